//! One `tool_use_completion` call against the provider the environment names.
//!
//! ```sh
//! ANTHROPIC_API_KEY=sk-ant-... cargo run -p keel-provider --example complete -- "What is 2+2?"
//! OPENAI_BASE_URL=http://localhost:11434/v1 KEEL_MODEL=qwen3:8b \
//!     cargo run -p keel-provider --example complete -- "List three prime numbers"
//! ```
//!
//! The provider is found by `ProviderConfig::detect`, the rules every keel front end uses:
//! Anthropic when `ANTHROPIC_API_KEY` is set (`ANTHROPIC_BASE_URL` moves it), else the
//! OpenAI-compatible back end when `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set. `KEEL_MODEL`
//! picks the model. The model is offered one tool, so a tool call shows how calls come back.

// An example program talks to its user on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use keel_provider::{
    CompletionRequest, Message, ModelCatalog, ProviderConfig, ProviderError, ToolDefinition,
    ToolInput,
};
use serde_json::json;

async fn run(prompt: String) -> Result<(), ProviderError> {
    let built = ProviderConfig::detect()?.build()?;
    let provider = built.provider;
    let model = std::env::var("KEEL_MODEL").unwrap_or_else(|_| built.kind.default_model().into());
    let request = CompletionRequest::new(model)
        .system("You are a concise assistant. Use the tool when the user asks for a file.")
        .tool(ToolDefinition {
            name: "read_file".into(),
            description: "Read a text file from the user's project.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Relative path"}},
                "required": ["path"],
                "additionalProperties": false
            }),
        })
        .message(Message::user(prompt))
        .max_tokens(1024);

    let reply = provider.tool_use_completion(&request).await?;
    let text = reply.text();
    if !text.is_empty() {
        println!("{text}");
    }
    for call in reply.tool_calls() {
        match call.input {
            ToolInput::Valid(input) => eprintln!("tool call {} {}({input})", call.id, call.name),
            ToolInput::Invalid(bad) => eprintln!(
                "tool call {} {} is invalid ({}); raw input: {}",
                call.id, call.name, bad.reason, bad.raw
            ),
        }
    }
    let cost = ModelCatalog::built_in()
        .cost(&request.model, &reply.usage)
        .map_or_else(|| "unknown".to_owned(), |usd| format!("${usd:.6}"));
    eprintln!(
        "[{} · stop: {:?} · tokens in {} (cache read {}, write {}) out {} · cost {cost}]",
        provider.name(),
        reply.stop_reason,
        reply.usage.input_tokens,
        reply.usage.cache_read_input_tokens,
        reply.usage.cache_creation_input_tokens,
        reply.usage.output_tokens,
    );
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let prompt = if args.is_empty() {
        "Say hello in five words.".to_owned()
    } else {
        args.join(" ")
    };
    match run(prompt).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
