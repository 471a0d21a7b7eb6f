//! Property: under random faults, cancellations and denials, every request sent to the model
//! has every tool_use paired with exactly one tool_result.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use keel_engine::history::check_pairing;
use keel_engine::{Agent, CancelHandle, DenyGated, Stop};
use keel_provider::{ContentBlock, InvalidToolInput, ProviderError, StopReason, StreamEvent};
use keel_test_support::rng::Rng;
use keel_test_support::scripted::{ScriptedProvider, Turn, reply};
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

struct Reader;

impl Tool for Reader {
    type Args = NoArgs;
    const NAME: &'static str = "reader";
    fn description(&self) -> &str {
        "Reads."
    }
    fn effect(&self, _args: &NoArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("read"))
    }
}

struct Destroyer;

impl Tool for Destroyer {
    type Args = NoArgs;
    const NAME: &'static str = "destroyer";
    fn description(&self) -> &str {
        "Destroys."
    }
    fn effect(&self, _args: &NoArgs) -> Effect {
        Effect::destructive("destroys things")
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("destroyed"))
    }
}

/// Cancels the run it is called in (a user pressing Esc mid-tool), then waits to be stopped.
struct Interrupter(Arc<Mutex<Option<CancelHandle>>>);

impl Tool for Interrupter {
    type Args = NoArgs;
    const NAME: &'static str = "interrupter";
    fn description(&self) -> &str {
        "Gets interrupted."
    }
    async fn call(&self, _args: NoArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if let Some(handle) = self.0.lock().unwrap().as_ref() {
            handle.cancel();
        }
        ctx.cancel().cancelled().await;
        Err(ToolError::Cancelled)
    }
}

struct Panicker;

impl Tool for Panicker {
    type Args = NoArgs;
    const NAME: &'static str = "panicker";
    fn description(&self) -> &str {
        "Panics."
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let empty: Vec<u8> = Vec::new();
        Ok(ToolOutput::text(empty[empty.len()].to_string()))
    }
}

fn random_call(rng: &mut Rng, n: u64) -> ContentBlock {
    let id = format!("call_{n}");
    match rng.below(7) {
        0 | 1 => ContentBlock::tool_use(id, "reader", json!({})),
        2 => ContentBlock::tool_use(id, "destroyer", json!({})),
        3 => ContentBlock::tool_use(id, "interrupter", json!({})),
        4 => ContentBlock::tool_use(id, "no_such_tool", json!({})),
        5 => ContentBlock::tool_use(id, "panicker", json!({})),
        _ => ContentBlock::ToolUse {
            id,
            name: "reader".into(),
            input: json!({}),
            invalid: Some(InvalidToolInput {
                raw: "{\"x".into(),
                reason: "EOF".into(),
            }),
        },
    }
}

fn random_turn(rng: &mut Rng, counter: &mut u64) -> Turn {
    match rng.below(10) {
        0 => Turn::Events(vec![Err(ProviderError::Overloaded {
            message: "Overloaded".into(),
        })]),
        // A stream cut after a tool call started: no MessageEnd.
        1 => Turn::Events(vec![
            Ok(StreamEvent::ToolUseStart {
                index: 0,
                id: "cut".into(),
                name: "reader".into(),
            }),
            Err(ProviderError::Stream {
                message: "cut".into(),
            }),
        ]),
        2 => Turn::Reply(reply(vec![ContentBlock::text("done")], StopReason::EndTurn)),
        _ => {
            let mut content = Vec::new();
            if rng.below(2) == 0 {
                content.push(ContentBlock::text("working"));
            }
            for _ in 0..=rng.below(3) {
                *counter += 1;
                content.push(random_call(rng, *counter));
            }
            let stop = if rng.below(8) == 0 {
                StopReason::MaxTokens
            } else {
                StopReason::ToolUse
            };
            Turn::Reply(reply(content, stop))
        }
    }
}

#[tokio::test]
async fn every_request_keeps_tool_use_and_tool_result_paired() {
    let mut requests_checked = 0;
    let mut stops = std::collections::BTreeMap::new();
    for seed in 1..=150u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut counter = 0;
        let provider = (0..40).fold(ScriptedProvider::new(), |p, _| {
            p.then(random_turn(&mut rng, &mut counter))
        });
        let provider = Arc::new(provider);
        let handle_slot = Arc::new(Mutex::new(None));
        let tools = ToolRegistry::new()
            .with(Reader)
            .unwrap()
            .with(Destroyer)
            .unwrap()
            .with(Interrupter(handle_slot.clone()))
            .unwrap()
            .with(Panicker)
            .unwrap();
        let agent = Agent::builder(provider.clone())
            .model("m")
            .tools(tools)
            .max_iterations(8)
            .approver(DenyGated)
            .build()
            .unwrap();
        let mut session = agent.session(".").unwrap();
        *handle_slot.lock().unwrap() = Some(session.cancel_handle());
        // Several prompts in one session, whatever the previous run's fate.
        for prompt in 0..4 {
            let outcome = session.run(&format!("prompt {prompt}")).await;
            assert!(!outcome.text.is_empty(), "seed {seed}: empty outcome text");
            *stops.entry(outcome.stop.name()).or_insert(0) += 1;
            if provider.remaining() == 0 {
                break;
            }
        }
        check_pairing(session.history()).unwrap_or_else(|e| panic!("seed {seed}: history: {e}"));
        for (i, request) in provider.requests().iter().enumerate() {
            check_pairing(&request.messages)
                .unwrap_or_else(|e| panic!("seed {seed}, request {i}: {e}"));
            requests_checked += 1;
        }
    }
    // The generator really exercised every ending.
    for stop in ["completed", "cancelled", "failed", "max_iterations"] {
        assert!(stops.contains_key(stop), "no run ended {stop}: {stops:?}");
    }
    assert!(requests_checked > 500, "{requests_checked}");
    let _ = Stop::Completed;
}
