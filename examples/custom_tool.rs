//! A complete custom tool: typed arguments with doc comments, one async call, registered and
//! dispatched the way the agent loop does it.
//!
//! `cargo run -p keel-tool --example custom_tool`

// An example program talks to its user on stdout.
#![allow(clippy::print_stdout)]

use keel_tool::{
    Effect, Tool, ToolCall, ToolContext, ToolError, ToolInput, ToolOutput, ToolRegistry,
};
use schemars::JsonSchema;
use serde::Deserialize;

// ---- the tool: 25 lines, blank ones included ----
#[derive(Deserialize, JsonSchema)]
struct CountLinesArgs {
    /// File to count, relative to the working directory.
    path: String,
}

struct CountLines;

impl Tool for CountLines {
    type Args = CountLinesArgs;
    const NAME: &'static str = "count_lines";
    fn description(&self) -> &str {
        "Counts the lines of a text file."
    }
    fn effect(&self, _args: &CountLinesArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, args: CountLinesArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let text = tokio::fs::read_to_string(ctx.cwd().join(&args.path))
            .await
            .map_err(|err| ToolError::io(format!("reading {}", args.path), err))?;
        let lines = text.lines().count();
        Ok(ToolOutput::text(format!("{} has {lines} lines", args.path)))
    }
}
// ---- end of the tool ----

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = ToolRegistry::new().with(CountLines)?;
    println!("{}", serde_json::to_string_pretty(&registry.definitions())?);

    let ctx = ToolContext::new(env!("CARGO_MANIFEST_DIR"), "example");
    for input in [
        serde_json::json!({"path": "Cargo.toml"}),
        serde_json::json!({"path": "missing.txt"}),
        serde_json::json!({"file": "Cargo.toml"}),
    ] {
        let call = ToolCall {
            id: "call_1",
            name: "count_lines",
            input: ToolInput::Valid(&input),
        };
        let output = registry.dispatch(call, &ctx).await;
        println!(
            "{input} -> {}{}",
            if output.is_error { "error: " } else { "" },
            output.content
        );
    }
    Ok(())
}
