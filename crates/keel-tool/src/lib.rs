//! # keel-tool
//!
//! The [`Tool`] trait for keel agents, and the [`ToolRegistry`] the agent loop dispatches
//! through.
//!
//! - **Typed tools.** A tool declares an `Args` struct; its JSON Schema is derived with
//!   schemars and shaped to what Anthropic and OpenAI accept ([`schema_for`]): inlined, no
//!   `$ref`, `additionalProperties: false`, optional fields not required, doc comments as
//!   descriptions, fields in declared order.
//! - **Effects per call.** [`Tool::effect`] says whether *this* call only reads, mutates or
//!   destroys, so the engine can run reads in parallel and ask before destructive calls.
//! - **Dispatch never crashes the loop.** An unknown tool, arguments that do not parse, a call
//!   cut off by the provider, a panic, a timeout or a cancellation each become an error result
//!   the model can read and act on. Results over 30,000 characters are cut to head and tail,
//!   with the whole text saved to the session's scratch directory.
//! - **Tools that change while the agent runs.** A [`ToolSource`] (the tools of an MCP
//!   server) is asked before each model request; its tools are offered beside the registry's
//!   own.
//!
//! ```
//! use keel_provider::{ToolCall, ToolInput};
//! use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct AddArgs {
//!     /// The first number.
//!     a: i64,
//!     /// The second number.
//!     b: i64,
//! }
//!
//! struct Add;
//!
//! impl Tool for Add {
//!     type Args = AddArgs;
//!     const NAME: &'static str = "add";
//!     fn description(&self) -> &str {
//!         "Adds two integers."
//!     }
//!     fn effect(&self, _args: &AddArgs) -> Effect {
//!         Effect::ReadOnly
//!     }
//!     async fn call(&self, args: AddArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
//!         Ok(ToolOutput::text((args.a + args.b).to_string()))
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let registry = ToolRegistry::new().with(Add)?;
//! let ctx = ToolContext::new(".", "session-1");
//!
//! let input = json!({"a": 2, "b": 3});
//! let call = ToolCall { id: "call_1", name: "add", input: ToolInput::Valid(&input) };
//! assert_eq!(registry.dispatch(call, &ctx).await.content, "5");
//!
//! // A mistake becomes a result the model can correct itself from.
//! let input = json!({"a": 2});
//! let call = ToolCall { id: "call_2", name: "add", input: ToolInput::Valid(&input) };
//! let output = registry.dispatch(call, &ctx).await;
//! assert!(output.is_error);
//! assert_eq!(output.content, "invalid arguments for add: missing field `b`");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod brief;
pub mod claude;
mod context;
mod editor;
mod effect;
mod error;
mod head_tail;
mod output;
mod process;
mod registry;
mod schema;
mod source;
mod tool;

pub use brief::Brief;
pub use context::{Progress, ToolContext};
pub use editor::EditorFiles;
pub use effect::Effect;
pub use error::{RegistryError, ToolError};
pub use head_tail::{Cut, HeadTail, LINE_SLACK};
pub use output::{
    DEFAULT_OUTPUT_LIMIT, MAX_IMAGE_BASE64_BYTES, MAX_IMAGES_PER_RESULT,
    MAX_RESULT_IMAGE_BASE64_BYTES, ToolOutput,
};
pub use process::{ProcessError, ProcessOutput, ProcessRunner, ProcessSpec};
pub use registry::{DEFAULT_TIMEOUT, ToolRegistry};
pub use schema::{
    compact_schema, is_valid_tool_name, normalize_schema, schema_for, validate_definition,
};
pub use source::ToolSource;
pub use tool::{CallFailure, DynTool, Tool};

/// The conversation types a tool author meets, from keel-provider, so a tool crate depends
/// on keel-tool alone: the calls [`ToolRegistry::dispatch`] takes, the definitions it offers,
/// and the block [`ToolOutput::into_block`] makes.
pub use keel_provider::{
    ContentBlock, ImageData, InvalidToolInput, ToolCall, ToolDefinition, ToolInput,
};

pub use tokio_util::sync::CancellationToken;

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
