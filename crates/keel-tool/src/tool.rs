//! The typed [`Tool`] trait authors implement, and the erased [`DynTool`] the registry keeps.

use std::future::Future;
use std::time::Duration;

use keel_provider::ToolDefinition;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::context::ToolContext;
use crate::effect::Effect;
use crate::error::ToolError;
use crate::output::ToolOutput;
use crate::schema::schema_for;

/// A tool with typed arguments. Implement this; the registry does the rest (schema, argument
/// parsing, errors, panics, timeouts, output size).
///
/// ```
/// use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct EchoArgs {
///     /// What to say back.
///     text: String,
/// }
///
/// struct Echo;
///
/// impl Tool for Echo {
///     type Args = EchoArgs;
///     const NAME: &'static str = "echo";
///     fn description(&self) -> &str {
///         "Repeats the text."
///     }
///     fn effect(&self, _args: &EchoArgs) -> Effect {
///         Effect::ReadOnly
///     }
///     async fn call(&self, args: EchoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text(args.text))
///     }
/// }
/// ```
pub trait Tool: Send + Sync + 'static {
    /// The arguments; their JSON Schema is what the model sees.
    type Args: DeserializeOwned + JsonSchema + Send;

    /// The name the model calls the tool by (`^[a-zA-Z0-9_-]{1,64}$`).
    const NAME: &'static str;

    /// What the tool does and when to use it, for the model.
    fn description(&self) -> &str;

    /// What this particular call does to the world (default [`Effect::Mutating`]).
    fn effect(&self, _args: &Self::Args) -> Effect {
        Effect::Mutating
    }

    /// How long a call may run before it is stopped; `None` for the registry's default.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Runs the call. Errors are reported to the model as error results.
    fn call(
        &self,
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
}

/// Why an erased call did not produce output.
#[derive(Debug)]
#[non_exhaustive]
pub enum CallFailure {
    /// The arguments did not deserialize: the field path and the reason.
    Arguments(String),
    /// The tool ran and failed.
    Tool(ToolError),
}

/// The object-safe form of a tool, as the registry stores it (`Arc<dyn DynTool>`). Every
/// [`Tool`] is one through a blanket impl; implement it by hand only for tools whose schema is
/// known at run time (tools proxied from another process).
#[async_trait::async_trait]
pub trait DynTool: Send + Sync + 'static {
    /// The tool's name.
    fn name(&self) -> &str;

    /// Name, description and argument schema, as sent to the model.
    fn definition(&self) -> ToolDefinition;

    /// What a call with this input does. Input that does not parse is `ReadOnly`: such a
    /// call is answered with an error and runs nothing.
    fn effect(&self, input: &Value) -> Effect;

    /// How long a call may run; `None` for the registry's default.
    fn timeout(&self) -> Option<Duration>;

    /// Parses `input` and runs the call.
    async fn call_json(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, CallFailure>;
}

/// Deserializes arguments, naming the path of the field at fault.
pub(crate) fn parse_args<A: DeserializeOwned>(input: &Value) -> Result<A, String> {
    serde_path_to_error::deserialize(input).map_err(|err| {
        let path = err.path().to_string();
        if path == "." {
            err.inner().to_string()
        } else {
            format!("{path}: {}", err.inner())
        }
    })
}

#[async_trait::async_trait]
impl<T: Tool> DynTool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: T::NAME.to_owned(),
            description: Tool::description(self).to_owned(),
            input_schema: schema_for::<T::Args>(),
        }
    }

    fn effect(&self, input: &Value) -> Effect {
        match parse_args::<T::Args>(input) {
            Ok(args) => Tool::effect(self, &args),
            Err(_) => Effect::ReadOnly,
        }
    }

    fn timeout(&self) -> Option<Duration> {
        Tool::timeout(self)
    }

    async fn call_json(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, CallFailure> {
        let args = parse_args::<T::Args>(input).map_err(CallFailure::Arguments)?;
        self.call(args, ctx).await.map_err(CallFailure::Tool)
    }
}
