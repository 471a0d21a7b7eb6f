//! [`Brief`]: a tool offered under a shorter definition, for models with little context.

use std::sync::Arc;
use std::time::Duration;

use keel_provider::ToolDefinition;
use serde_json::Value;

use crate::context::ToolContext;
use crate::effect::Effect;
use crate::output::ToolOutput;
use crate::schema::compact_schema;
use crate::tool::{CallFailure, DynTool};

/// A tool offered to the model under a short definition: its own name, a description given
/// here, and its argument schema without the per-argument descriptions
/// ([`compact_schema`](crate::compact_schema)). Everything else is the wrapped tool's: the
/// arguments it accepts (the schema's types, ranges and required fields are kept), what a
/// call does ([`effect`](DynTool::effect), so approvals ask the same questions), its timeout
/// and its output. A brief tool can do nothing its full form cannot.
///
/// ```
/// use keel_tool::{Brief, DynTool, Effect, Tool, ToolContext, ToolError, ToolOutput};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct EchoArgs {
///     /// What to say back, word for word, as long as it is.
///     text: String,
/// }
///
/// struct Echo;
///
/// impl Tool for Echo {
///     type Args = EchoArgs;
///     const NAME: &'static str = "echo";
///     fn description(&self) -> &str {
///         "Repeats the text it is given, word for word, however long it is."
///     }
///     fn effect(&self, _args: &EchoArgs) -> Effect {
///         Effect::ReadOnly
///     }
///     async fn call(&self, args: EchoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text(args.text))
///     }
/// }
///
/// let brief = Brief::new(Echo, "Repeat text.");
/// let definition = brief.definition();
/// assert_eq!(definition.name, "echo");
/// assert_eq!(definition.description, "Repeat text.");
/// assert!(definition.input_schema["properties"]["text"].get("description").is_none());
/// assert_eq!(definition.input_schema["required"], serde_json::json!(["text"]));
/// ```
#[derive(Clone)]
pub struct Brief {
    inner: Arc<dyn DynTool>,
    description: String,
    schema: Value,
}

impl std::fmt::Debug for Brief {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Brief")
            .field("name", &self.inner.name())
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl Brief {
    /// `tool` offered as `description`, with its schema compacted.
    pub fn new(tool: impl DynTool, description: impl Into<String>) -> Self {
        Self::of(Arc::new(tool), description)
    }

    /// The shared `tool` offered as `description`, with its schema compacted.
    pub fn of(tool: Arc<dyn DynTool>, description: impl Into<String>) -> Self {
        let schema = compact_schema(&tool.definition().input_schema);
        Self {
            inner: tool,
            description: description.into(),
            schema,
        }
    }

    /// The tool this one offers.
    pub fn inner(&self) -> &Arc<dyn DynTool> {
        &self.inner
    }
}

#[async_trait::async_trait]
impl DynTool for Brief {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.inner.name().to_owned(),
            description: self.description.clone(),
            input_schema: self.schema.clone(),
        }
    }

    fn effect(&self, input: &Value) -> Effect {
        self.inner.effect(input)
    }

    fn timeout(&self) -> Option<Duration> {
        self.inner.timeout()
    }

    async fn call_json(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, CallFailure> {
        self.inner.call_json(input, ctx).await
    }
}
