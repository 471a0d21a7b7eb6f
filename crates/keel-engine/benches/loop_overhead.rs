//! Loop overhead per turn: everything but the model and the tools, on a 100-turn scripted
//! session (a no-op tool each turn). `cargo bench -p keel-engine --bench loop_overhead`
//!
//! The scripted provider answers instantly and the tool does nothing, so the time is the
//! loop's own: history upkeep, the pairing check, request building (which clones the history:
//! the part that grows with it), event delivery, approvals and dispatch.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_engine::{Agent, Stop};
use keel_test_support::scripted::ScriptedProvider;
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// A path.
    #[allow(dead_code)]
    path: String,
}

struct Noop;

impl Tool for Noop {
    type Args = ReadArgs;
    const NAME: &'static str = "read_file";
    fn description(&self) -> &str {
        "Does nothing."
    }
    fn effect(&self, _args: &ReadArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, _args: ReadArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("fn main() {}\n".repeat(20)))
    }
}

const TURNS: usize = 100;

fn script() -> ScriptedProvider {
    (0..TURNS - 1)
        .fold(ScriptedProvider::new(), |p, i| {
            p.then_tool_call(
                &format!("toolu_{i:04}"),
                "read_file",
                json!({"path": "src/main.rs"}),
            )
        })
        .then_text("done")
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("loop_overhead");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("100_turn_session", |b| {
        b.iter_batched(
            || {
                Agent::builder(Arc::new(script()))
                    .model("claude-sonnet-4-5")
                    .system_prompt("You are a benchmark.")
                    .tools(ToolRegistry::new().with(Noop).unwrap())
                    .max_iterations(TURNS as u32)
                    .build()
                    .unwrap()
            },
            |agent| {
                let outcome = runtime.block_on(agent.session(".").unwrap().run("go"));
                assert_eq!(outcome.stop, Stop::Completed);
                assert_eq!(outcome.iterations as usize, TURNS);
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
