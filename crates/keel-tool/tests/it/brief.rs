//! `Brief`: a tool under a short definition is the same tool: the same arguments accepted and
//! refused, the same effect for each call (so the same approvals), the same timeout and
//! output. Only what the model reads is shorter.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use keel_tool::{
    Brief, DynTool, Effect, Tool, ToolCall, ToolContext, ToolError, ToolInput, ToolOutput,
    ToolRegistry,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TouchArgs {
    /// The file to touch, relative to the workspace root; it is created when missing.
    path: String,
    /// Whether to delete the file instead of touching it (a destructive call, asked about).
    #[serde(default)]
    delete: bool,
    /// How many times, at least 1 and at most 3.
    #[schemars(range(min = 1, max = 3))]
    times: Option<u32>,
}

/// Says what it would do; deleting is destructive, touching mutating.
struct Touch;

impl Tool for Touch {
    type Args = TouchArgs;
    const NAME: &'static str = "touch";
    fn description(&self) -> &str {
        "Touches a file: creates it when it is missing and updates its modification time, \
         or deletes it with delete: true. Use it to mark files for other tools."
    }
    fn effect(&self, args: &TouchArgs) -> Effect {
        if args.delete {
            Effect::destructive("deletes a file")
        } else {
            Effect::Mutating
        }
    }
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(7))
    }
    async fn call(&self, args: TouchArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.path.contains("..") {
            return Err(ToolError::InvalidArguments("no .. in paths".into()));
        }
        Ok(ToolOutput::text(format!(
            "{} {} x{}",
            if args.delete { "deleted" } else { "touched" },
            args.path,
            args.times.unwrap_or(1)
        )))
    }
}

async fn dispatch(registry: &ToolRegistry, input: &Value) -> ToolOutput {
    let ctx = ToolContext::new(std::env::temp_dir(), "s1");
    let call = ToolCall {
        id: "call_1",
        name: "touch",
        input: ToolInput::Valid(input),
    };
    registry.dispatch(call, &ctx).await
}

#[test]
fn the_definition_is_short_and_the_schema_accepts_the_same_arguments() {
    let full = Touch.definition();
    let brief = Brief::new(Touch, "Touch or delete a file.").definition();
    assert_eq!(brief.name, "touch");
    assert_eq!(brief.description, "Touch or delete a file.");
    let properties = brief.input_schema["properties"].as_object().unwrap();
    assert_eq!(
        properties.keys().collect::<Vec<_>>(),
        ["path", "delete", "times"]
    );
    for (name, schema) in properties {
        assert!(schema.get("description").is_none(), "{name}: {schema}");
        let mut described = full.input_schema["properties"][name].clone();
        described.as_object_mut().unwrap().remove("description");
        assert_eq!(schema, &described, "{name} lost more than its description");
    }
    assert_eq!(
        brief.input_schema["required"],
        full.input_schema["required"]
    );
    assert_eq!(brief.input_schema["additionalProperties"], json!(false));
    assert!(brief.input_schema["properties"]["times"]["maximum"] == json!(3));
    assert!(
        serde_json::to_string(&brief).unwrap().len()
            < serde_json::to_string(&full).unwrap().len() / 2
    );
}

#[tokio::test]
async fn calls_effects_timeouts_and_refusals_are_the_full_tool_s() {
    let full = ToolRegistry::new().with(Touch).unwrap();
    let mut brief = ToolRegistry::new();
    brief
        .register_dyn(std::sync::Arc::new(Brief::new(
            Touch,
            "Touch or delete a file.",
        )))
        .unwrap();
    let inputs = [
        json!({"path": "a.txt"}),
        json!({"path": "a.txt", "delete": true}),
        json!({"path": "a.txt", "times": 2}),
        json!({"path": "../a.txt"}),
        json!({"path": "a.txt", "force": true}),
        json!({"delete": true}),
        json!("a.txt"),
    ];
    for input in &inputs {
        let call = ToolCall {
            id: "call_1",
            name: "touch",
            input: ToolInput::Valid(input),
        };
        assert_eq!(brief.effect(call), full.effect(call), "{input}");
        let (a, b) = (dispatch(&full, input).await, dispatch(&brief, input).await);
        assert_eq!(
            (a.content.as_str(), a.is_error),
            (b.content.as_str(), b.is_error),
            "{input}"
        );
    }
    // The destructive call is destructive under both definitions.
    let delete = json!({"path": "a.txt", "delete": true});
    assert!(matches!(
        Brief::new(Touch, "x").effect(&delete),
        Effect::Destructive { .. }
    ));
    assert_eq!(
        Brief::new(Touch, "x").timeout(),
        Some(Duration::from_secs(7))
    );
}
