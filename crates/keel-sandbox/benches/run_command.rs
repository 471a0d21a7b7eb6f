//! The overhead of `run_command` for a command that does nothing (`true`), through the tool:
//! confined (workspace-write, Landlock) and unconfined (full access). Spawning `bash`, the
//! sandbox, reading the output, reaping and the report are all in the figure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use criterion::{Criterion, criterion_group, criterion_main};
use keel_sandbox::tools::{RunCommand, RunCommandArgs};
use keel_sandbox::{SandboxMode, SandboxPolicy};
use keel_tool::{Tool, ToolContext};

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path(), "bench");
    let mut group = c.benchmark_group("run_command_true");
    for (name, mode) in [
        ("workspace_write_confined", SandboxMode::WorkspaceWrite),
        ("full_access_unconfined", SandboxMode::FullAccess),
    ] {
        let tool = RunCommand::new(dir.path(), SandboxPolicy::with_mode(mode));
        group.bench_function(name, |b| {
            b.iter(|| {
                let args = RunCommandArgs {
                    command: "true".to_owned(),
                    timeout_secs: None,
                };
                let output = runtime.block_on(tool.call(args, &ctx)).unwrap();
                assert!(!output.is_error, "{}", output.content);
                output
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
