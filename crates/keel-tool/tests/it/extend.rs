//! `ToolRegistry::extend`: another registry's tools moved in whole, or not at all; and the
//! conversation types a tool author needs, reached through keel-tool alone.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use keel_tool::{
    ContentBlock, DynTool, Effect, RegistryError, Tool, ToolCall, ToolContext, ToolDefinition,
    ToolError, ToolInput, ToolOutput, ToolRegistry,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// A tool named `N` that answers its own name.
struct Named<const N: char>;

impl<const N: char> Tool for Named<N> {
    type Args = NoArgs;
    const NAME: &'static str = match N {
        'a' => "alpha",
        'b' => "beta",
        'c' => "gamma",
        _ => "delta",
    };
    fn description(&self) -> &str {
        "Answers its name."
    }
    fn effect(&self, _args: &NoArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(Self::NAME))
    }
}

/// Sleeps an hour unless stopped.
struct Slow;

impl Tool for Slow {
    type Args = NoArgs;
    const NAME: &'static str = "slow";
    fn description(&self) -> &str {
        "Takes its time."
    }
    fn effect(&self, _args: &NoArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(ToolOutput::text("done"))
    }
}

async fn run(registry: &ToolRegistry, name: &str) -> ToolOutput {
    let input = json!({});
    let call = ToolCall {
        id: "call_1",
        name,
        input: ToolInput::Valid(&input),
    };
    registry
        .dispatch(call, &ToolContext::new(".", "extend-test"))
        .await
}

#[tokio::test]
async fn extend_moves_every_tool_in_and_they_dispatch() {
    let mut mine = ToolRegistry::new().with(Named::<'a'>).unwrap();
    let theirs = ToolRegistry::new()
        .with(Named::<'b'>)
        .unwrap()
        .with(Named::<'c'>)
        .unwrap();
    mine.extend(theirs).unwrap();
    assert_eq!(mine.names(), ["alpha", "beta", "gamma"]);
    let names: Vec<String> = mine.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["alpha", "beta", "gamma"]);
    assert_eq!(run(&mine, "gamma").await.content, "gamma");
}

#[test]
fn a_clash_is_an_error_naming_it_and_nothing_is_added() {
    let mut mine = ToolRegistry::new()
        .with(Named::<'a'>)
        .unwrap()
        .with(Named::<'c'>)
        .unwrap();
    // beta sorts before gamma: were tools added one by one, beta would be in before the clash.
    let theirs = ToolRegistry::new()
        .with(Named::<'b'>)
        .unwrap()
        .with(Named::<'c'>)
        .unwrap();
    let err = mine.extend(theirs).unwrap_err();
    assert!(
        matches!(&err, RegistryError::Duplicate(name) if name == "gamma"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "a tool named \"gamma\" is already registered"
    );
    assert_eq!(mine.names(), ["alpha", "gamma"]);
}

#[tokio::test]
async fn the_other_registrys_timeouts_come_with_its_tools() {
    let mut mine = ToolRegistry::new().with(Named::<'a'>).unwrap();
    let theirs = ToolRegistry::new()
        .with(Slow)
        .unwrap()
        .with_timeout("slow", Duration::from_millis(10));
    mine.extend(theirs).unwrap();
    let output = run(&mine, "slow").await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "tool slow timed out after 0.01s and was stopped"
    );
}

#[test]
fn a_tool_author_reaches_the_conversation_types_through_keel_tool() {
    let definition: ToolDefinition = DynTool::definition(&Named::<'a'>);
    assert_eq!(definition.name, "alpha");
    let block: ContentBlock = ToolOutput::text("ok").into_block("call_1");
    let json: Value = serde_json::to_value(&block).unwrap();
    assert_eq!(json["type"], "tool_result");
}
