//! Dispatch overhead: deserialize a call's arguments, run a no-op tool, serialize the result
//! block. `cargo bench -p keel-tool --bench dispatch`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_provider::{ToolCall, ToolInput};
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct ReadArgs {
    /// Path to read.
    path: String,
    /// First line.
    start_line: Option<u32>,
    /// Last line.
    end_line: Option<u32>,
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
        Ok(ToolOutput::text("ok"))
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = ToolRegistry::new().with(Noop).unwrap();
    let ctx = ToolContext::new(".", "bench");
    let input = json!({"path": "src/main.rs", "start_line": 10, "end_line": 120});
    c.bench_function("dispatch_noop", |b| {
        b.iter(|| {
            let call = ToolCall {
                id: "toolu_01NRLabsLyVHZPKxbKvkfSMn",
                name: "read_file",
                input: ToolInput::Valid(black_box(&input)),
            };
            let output = runtime.block_on(registry.dispatch(call, &ctx));
            serde_json::to_string(&output.into_block(call.id)).unwrap()
        })
    });
    c.bench_function("effect", |b| {
        b.iter(|| {
            registry.effect(ToolCall {
                id: "c",
                name: "read_file",
                input: ToolInput::Valid(black_box(&input)),
            })
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
