//! Dispatch turns every failure into an error result the model can read, and never panics.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use keel_provider::{InvalidToolInput, ToolCall, ToolInput};
use keel_test_support::temp::temp_dir;
use keel_tool::{
    CancellationToken, Effect, Progress, RegistryError, Tool, ToolContext, ToolError, ToolOutput,
    ToolRegistry,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// Text to return.
    text: String,
    /// How many times.
    repeat: Option<u32>,
    /// Formatting options.
    #[serde(default)]
    options: EchoOptions,
}

#[derive(Deserialize, JsonSchema, Default)]
struct EchoOptions {
    /// Upper-case the text.
    #[serde(default)]
    upper: bool,
}

struct Echo;

impl Tool for Echo {
    type Args = EchoArgs;
    const NAME: &'static str = "echo";
    fn description(&self) -> &str {
        "Returns the text."
    }
    fn effect(&self, _args: &EchoArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, args: EchoArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        ctx.progress(format!("echoing {} characters", args.text.len()));
        let text = args.text.repeat(args.repeat.unwrap_or(1) as usize);
        let text = if args.options.upper {
            text.to_uppercase()
        } else {
            text
        };
        let chars = text.len();
        Ok(ToolOutput::text(text).with_metadata(json!({ "chars": chars })))
    }
}

#[derive(Deserialize, JsonSchema)]
struct RemoveArgs {
    /// Path to remove.
    path: String,
    /// Remove directories and their contents.
    #[serde(default)]
    recursive: bool,
}

/// Decides its effect per call; fails on purpose when asked to.
struct Remove;

impl Tool for Remove {
    type Args = RemoveArgs;
    const NAME: &'static str = "remove";
    fn description(&self) -> &str {
        "Removes a path."
    }
    fn effect(&self, args: &RemoveArgs) -> Effect {
        if args.recursive {
            Effect::destructive(format!("deletes {} and everything in it", args.path))
        } else {
            Effect::Mutating
        }
    }
    async fn call(&self, args: RemoveArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Err(ToolError::NotFound(format!(
            "{} does not exist; list_directory shows what does",
            args.path
        )))
    }
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

struct Panics;

impl Tool for Panics {
    type Args = NoArgs;
    const NAME: &'static str = "panics";
    fn description(&self) -> &str {
        "Always panics."
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let items: Vec<u8> = Vec::new();
        let index = items.len() + 3;
        Ok(ToolOutput::text(items[index].to_string()))
    }
}

/// Sleeps for an hour, unless cancelled.
struct Slow;

impl Tool for Slow {
    type Args = NoArgs;
    const NAME: &'static str = "slow";
    fn description(&self) -> &str {
        "Takes an hour."
    }
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(50))
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(ToolOutput::text("done"))
    }
}

#[derive(Deserialize, JsonSchema)]
struct BigArgs {
    /// Lines to print.
    lines: usize,
}

struct Big;

impl Tool for Big {
    type Args = BigArgs;
    const NAME: &'static str = "big";
    fn description(&self) -> &str {
        "Prints many lines."
    }
    async fn call(&self, args: BigArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(
            (0..args.lines)
                .map(|i| format!("line {i}\n"))
                .collect::<String>(),
        ))
    }
}

fn registry() -> ToolRegistry {
    ToolRegistry::new()
        .with(Echo)
        .unwrap()
        .with(Remove)
        .unwrap()
        .with(Panics)
        .unwrap()
        .with(Slow)
        .unwrap()
        .with(Big)
        .unwrap()
}

fn valid<'a>(id: &'a str, name: &'a str, input: &'a Value) -> ToolCall<'a> {
    ToolCall {
        id,
        name,
        input: ToolInput::Valid(input),
    }
}

async fn run(registry: &ToolRegistry, name: &str, input: Value) -> ToolOutput {
    let ctx = ToolContext::new(".", "test-session");
    registry.dispatch(valid("call_1", name, &input), &ctx).await
}

#[tokio::test]
async fn every_failure_is_a_readable_error_result() {
    let registry = registry();
    let cut = InvalidToolInput {
        raw: "{\"text\": \"hel".into(),
        reason: "EOF while parsing a string at line 1 column 13".into(),
    };
    let ctx = ToolContext::new(".", "test-session");
    let cases = [
        ("unknown tool", run(&registry, "edit_file", json!({})).await),
        (
            "missing field",
            run(&registry, "echo", json!({"repeat": 2})).await,
        ),
        (
            "wrong type",
            run(&registry, "echo", json!({"text": 5})).await,
        ),
        (
            "wrong nested type",
            run(
                &registry,
                "echo",
                json!({"text": "a", "options": {"upper": "yes"}}),
            )
            .await,
        ),
        (
            "not an object",
            run(&registry, "echo", json!("hello")).await,
        ),
        (
            "cut off by the provider",
            registry
                .dispatch(
                    ToolCall {
                        id: "call_1",
                        name: "echo",
                        input: ToolInput::Invalid(&cut),
                    },
                    &ctx,
                )
                .await,
        ),
        ("tool panicked", run(&registry, "panics", json!({})).await),
        ("timed out", run(&registry, "slow", json!({})).await),
        (
            "tool error",
            run(&registry, "remove", json!({"path": "build"})).await,
        ),
    ];
    let mut report = String::new();
    for (case, output) in &cases {
        assert!(output.is_error, "{case}: {output:?}");
        report.push_str(&format!("{case}: {}\n", output.content));
    }
    insta::assert_snapshot!("dispatch_errors", report);
}

#[tokio::test]
async fn an_empty_registry_says_so() {
    let output = run(&ToolRegistry::new(), "echo", json!({})).await;
    assert_eq!(
        output.content,
        "unknown tool \"echo\": no tools are available"
    );
}

#[tokio::test]
async fn a_good_call_returns_the_tools_output_and_progress() {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let ctx = ToolContext::new(".", "s").with_progress(sender);
    let input = json!({"text": "ab", "repeat": 2, "options": {"upper": true}});
    let output = registry()
        .dispatch(valid("call_9", "echo", &input), &ctx)
        .await;
    assert_eq!(
        output,
        ToolOutput::text("ABAB").with_metadata(json!({"chars": 4}))
    );
    assert_eq!(
        receiver.recv().await,
        Some(Progress {
            call_id: "call_9".into(),
            tool: "echo".into(),
            line: "echoing 2 characters".into()
        })
    );
}

#[tokio::test]
async fn the_registry_timeout_overrides_the_tools() {
    let registry = registry().with_timeout("slow", Duration::from_millis(10));
    let output = run(&registry, "slow", json!({})).await;
    assert_eq!(
        output.content,
        "tool slow timed out after 0.01s and was stopped"
    );
}

#[tokio::test]
async fn cancelling_stops_a_running_call_promptly() {
    let registry = registry().with_timeout("slow", Duration::from_secs(3600));
    let token = CancellationToken::new();
    let ctx = ToolContext::new(".", "s").with_cancel(token.clone());
    let input = json!({});
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        token.cancel();
    });
    let output = registry.dispatch(valid("c", "slow", &input), &ctx).await;
    canceller.await.unwrap();
    assert_eq!(output, ToolOutput::error("interrupted by the user"));
    // A call made after cancellation does not start.
    let output = registry
        .dispatch(valid("d", "echo", &json!({"text": "x"})), &ctx)
        .await;
    assert_eq!(output, ToolOutput::error("interrupted by the user"));
}

#[tokio::test]
async fn large_output_is_cut_and_saved_whole() {
    let scratch = temp_dir();
    let ctx = ToolContext::new(".", "s").with_scratch_dir(scratch.path());
    let registry = registry().with_output_limit(1000);
    let input = json!({"lines": 5000});
    let output = registry
        .dispatch(valid("call_7", "big", &input), &ctx)
        .await;
    let saved = scratch.path().join("big-call_7.txt");
    let full = std::fs::read_to_string(&saved).unwrap();
    assert_eq!(full.lines().count(), 5000);
    assert!(output.content.starts_with("line 0\n"));
    assert!(output.content.ends_with("line 4999\n"));
    assert!(output.content.chars().count() < 1300);
    let marker = output
        .content
        .lines()
        .find(|l| l.starts_with("[..."))
        .unwrap();
    let marker = marker.replace(&saved.display().to_string(), "<scratch>/big-call_7.txt");
    insta::assert_snapshot!("truncation_marker", marker);
}

#[test]
fn effects_are_decided_per_call() {
    let registry = registry();
    let effect = |name: &str, input: Value| registry.effect(valid("c", name, &input));
    assert_eq!(effect("echo", json!({"text": "x"})), Effect::ReadOnly);
    assert_eq!(effect("remove", json!({"path": "a.txt"})), Effect::Mutating);
    assert_eq!(
        effect("remove", json!({"path": "build", "recursive": true})),
        Effect::destructive("deletes build and everything in it")
    );
    // Calls that will not run cannot do harm.
    assert_eq!(
        effect("remove", json!({"recursive": true})),
        Effect::ReadOnly
    );
    assert_eq!(effect("nope", json!({})), Effect::ReadOnly);
    // A tool that says nothing is assumed to mutate.
    assert_eq!(effect("panics", json!({})), Effect::Mutating);
}

#[test]
fn definitions_are_sorted_and_subsets_intersect() {
    let registry = registry();
    let names: Vec<String> = registry.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["big", "echo", "panics", "remove", "slow"]);
    let sub = registry.subset(&["slow", "echo", "not_a_tool"]);
    assert_eq!(sub.names(), ["echo", "slow"]);
    let mut registry = registry;
    assert!(registry.remove("echo").is_some());
    assert!(registry.get("echo").is_none());
    assert_eq!(registry.len(), 4);
}

#[test]
fn duplicate_names_are_refused() {
    let err = ToolRegistry::new()
        .with(Echo)
        .unwrap()
        .with(Echo)
        .unwrap_err();
    assert_eq!(err, RegistryError::Duplicate("echo".into()));
    assert_eq!(
        err.to_string(),
        "a tool named \"echo\" is already registered"
    );
}

#[test]
fn tool_definitions() {
    for definition in registry().definitions() {
        keel_tool::validate_definition(&definition).unwrap();
        insta::assert_json_snapshot!(format!("definition_{}", definition.name), definition);
    }
}
