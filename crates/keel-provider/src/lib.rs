//! # keel-provider
//!
//! One [`Provider`] trait over the models a coding agent talks to, with two back ends that
//! speak the real wire formats: [`AnthropicProvider`] (the Messages API) and
//! [`OpenAiProvider`] (Chat Completions, for OpenAI and for Ollama, vLLM, llama.cpp and
//! OpenRouter; OpenAI's Responses API for the Codex models, see [`OpenAiApi`]).
//!
//! - **Types**: a conversation is a list of [`Message`]s made of [`ContentBlock`]s; a
//!   [`CompletionRequest`] asks for the next reply, which comes back as a
//!   [`ToolUseResponse`] (or as a stream of [`StreamEvent`]s).
//! - **Tool calls that cannot be trusted are marked**: input cut off by `max_tokens` or not a
//!   JSON object comes back as [`ToolInput::Invalid`] with the raw text kept. Never run it.
//! - **Faults**: rate limits, overloads, 5xx and dropped connections are retried per
//!   [`RetryPolicy`]; a stream cut after content fails with [`ProviderError::Stream`] rather
//!   than duplicate output; a silent server, or one that never finishes (a trickle of pings
//!   past the request deadline), fails with [`ProviderError::Timeout`];
//!   [`ProviderError::is_cut_mid_reply`] tells a caller it may retry the turn. Hostile
//!   replies are bounded: any `retry-after` is clamped, error bodies are read up to
//!   [`MAX_ERROR_BODY`], and SSE decoding is linear in its input.
//! - **Models served**: [`Provider::list_models`] reads the provider's own list (Anthropic's
//!   `GET /v1/models`, an OpenAI-compatible `GET {base}/models`) into a [`ModelList`], within
//!   [`MODEL_LIST_TIMEOUT`] and [`MAX_MODEL_LIST_BODY`] a page.
//! - **Cost**: [`ModelCatalog`] knows context windows and prices, and says `None` for a model
//!   it does not know; [`Usage`] totals saturate rather than wrap.
//! - **Tiers across providers**: [`ModelRouter`] sends each request to the provider
//!   registered for its model (a local server for the cheap tier) and the rest to the main
//!   one; [`Provider::served_by`] names the provider of a model, so cost is told per provider.
//! - **Secrets**: [`ApiKey`] prints as `[redacted]`, and keys are scrubbed from everything a
//!   server sends back before it becomes an error or a retry event: HTTP error bodies and
//!   error events inside a stream (Anthropic's `event: error`, OpenAI's error chunks) alike.
//!
//! ```
//! use keel_provider::{AnthropicStreamParser, ResponseAssembler, StopReason, ToolInput};
//!
//! // Replay a recorded Anthropic stream through the parser.
//! let wire = concat!(
//!     "event: message_start\n",
//!     "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
//!     "event: content_block_start\n",
//!     "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read_file\",\"input\":{}}}\n\n",
//!     "event: content_block_delta\n",
//!     "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"src/main.rs\\\"}\"}}\n\n",
//!     "event: content_block_stop\n",
//!     "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
//!     "event: message_delta\n",
//!     "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":20}}\n\n",
//!     "event: message_stop\n",
//!     "data: {\"type\":\"message_stop\"}\n\n",
//! );
//! let mut parser = AnthropicStreamParser::new();
//! let mut events = Vec::new();
//! parser.feed(wire.as_bytes(), &mut events)?;
//! parser.finish(&mut events)?;
//!
//! let mut assembler = ResponseAssembler::new();
//! events.into_iter().for_each(|event| assembler.push(event));
//! let reply = assembler.finish()?;
//!
//! assert_eq!(reply.stop_reason, StopReason::ToolUse);
//! assert_eq!(reply.usage.output_tokens, 20);
//! let call = reply.tool_calls()[0];
//! assert_eq!(call.name, "read_file");
//! assert!(matches!(call.input, ToolInput::Valid(input) if input["path"] == "src/main.rs"));
//! # Ok::<(), keel_provider::ProviderError>(())
//! ```
//!
//! Against a live API the same reply comes from one call:
//!
//! ```no_run
//! use keel_provider::{AnthropicProvider, CompletionRequest, Message, ModelCatalog, Provider};
//!
//! # async fn run() -> Result<(), keel_provider::ProviderError> {
//! let provider = AnthropicProvider::from_env()?;
//! let request = CompletionRequest::new("claude-sonnet-4-5")
//!     .system("You are terse.")
//!     .message(Message::user("Name one prime number."));
//! let reply = provider.tool_use_completion(&request).await?;
//! let cost = ModelCatalog::built_in().cost(&request.model, &reply.usage);
//! println!("{} (cost: {cost:?} USD)", reply.text());
//! # Ok(()) }
//! ```

pub mod anthropic;
pub mod catalog;
mod config;
mod cost;
mod error;
mod http;
mod image;
mod models;
pub mod openai;
mod provider;
mod retry;
mod router;
mod secret;
mod served;
pub mod sse;
mod stream;
mod types;

pub use anthropic::{AnthropicProvider, AnthropicStreamParser};
pub use catalog::{LongPromptPricing, ModelCatalog, ModelInfo, PRICES_CHECKED, Pricing};
pub use config::{BuiltProvider, NO_PROVIDER, ProviderConfig, ProviderKind, from_env};
pub use cost::{CostByProvider, ProviderCost};
pub use error::{ProviderError, TimeoutLimit};
pub use http::{DEFAULT_IDLE_TIMEOUT, DEFAULT_REQUEST_DEADLINE, MAX_ERROR_BODY};
pub use image::{IMAGE_MEDIA_TYPES, ImageData, ImageError, human_size};
pub use models::{MAX_MODEL_LIST_BODY, MODEL_LIST_TIMEOUT, ModelList};
pub use openai::{
    MaxTokensField, OpenAiApi, OpenAiProvider, OpenAiStreamParser, ResponsesStreamParser,
    needs_responses,
};
pub use provider::Provider;
pub use retry::RetryPolicy;
pub use router::ModelRouter;
pub use secret::ApiKey;
pub use served::{ContextSource, MAX_SERVED_CONTEXT_BODY, SERVED_CONTEXT_TIMEOUT, ServedContext};
pub use stream::{ResponseAssembler, StreamEvent, collect_response, json_kind, parse_tool_input};
pub use types::{
    CachePolicy, CompletionRequest, ContentBlock, InvalidToolInput, Message, Role, StopReason,
    ToolCall, ToolChoice, ToolDefinition, ToolInput, ToolUseResponse, Usage,
};

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
