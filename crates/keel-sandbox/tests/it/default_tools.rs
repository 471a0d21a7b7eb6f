//! The default tool set, and attacks that need several tools together.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::{PathSandbox, SandboxMode, SandboxPolicy, default_tools};
use keel_tool::{Effect, ToolContext, ToolOutput, ToolRegistry, validate_definition};
use serde_json::{Value, json};

async fn call(registry: &ToolRegistry, ctx: &ToolContext, name: &str, input: Value) -> ToolOutput {
    let call = ToolCall {
        id: "call_1",
        name,
        input: ToolInput::Valid(&input),
    };
    registry.dispatch(call, ctx).await
}

#[test]
fn every_tool_is_there_and_offerable_to_models() {
    let dir = tempfile::tempdir().unwrap();
    let registry = default_tools(
        &PathSandbox::new(dir.path()).unwrap(),
        &SandboxPolicy::default(),
    )
    .unwrap();
    let expected: &[&str] = if cfg!(feature = "git") {
        &[
            "git_commit",
            "git_diff",
            "git_status",
            "glob",
            "grep",
            "list_directory",
            "patch_file",
            "read_file",
            "run_command",
            "write_file",
        ]
    } else {
        &[
            "glob",
            "grep",
            "list_directory",
            "patch_file",
            "read_file",
            "run_command",
            "write_file",
        ]
    };
    assert_eq!(registry.names(), expected);
    for definition in registry.definitions() {
        validate_definition(&definition).unwrap();
        assert!(definition.description.len() > 40, "{}", definition.name);
    }
}

#[test]
fn read_only_mode_offers_no_tool_that_writes() {
    let dir = tempfile::tempdir().unwrap();
    let registry = default_tools(
        &PathSandbox::new(dir.path()).unwrap(),
        &SandboxPolicy::with_mode(SandboxMode::ReadOnly),
    )
    .unwrap();
    let expected: &[&str] = if cfg!(feature = "git") {
        &[
            "git_diff",
            "git_status",
            "glob",
            "grep",
            "list_directory",
            "read_file",
            "run_command",
        ]
    } else {
        &["glob", "grep", "list_directory", "read_file", "run_command"]
    };
    assert_eq!(registry.names(), expected);
}

#[test]
fn effects_follow_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let registry = default_tools(
        &PathSandbox::new(dir.path()).unwrap(),
        &SandboxPolicy::default(),
    )
    .unwrap();
    let effect = |name: &str, input: Value| {
        registry.effect(ToolCall {
            id: "c",
            name,
            input: ToolInput::Valid(&input),
        })
    };
    assert_eq!(effect("read_file", json!({"path": "a"})), Effect::ReadOnly);
    assert_eq!(
        effect("run_command", json!({"command": "ls -la"})),
        Effect::ReadOnly
    );
    assert_eq!(
        effect("write_file", json!({"path": "a", "content": ""})),
        Effect::Mutating
    );
    assert!(matches!(
        effect("run_command", json!({"command": "rm -rf build"})),
        Effect::Destructive { .. }
    ));
    if cfg!(feature = "git") {
        assert!(matches!(
            effect("git_commit", json!({"message": "x"})),
            Effect::Destructive { .. }
        ));
    }
}

#[tokio::test]
async fn a_symlink_made_by_run_command_cannot_be_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    // Built without the `confine` feature, run_command may run unconfined: the path
    // sandbox's checks are the same.
    let policy = SandboxPolicy {
        allow_unconfined_fallback: !cfg!(feature = "confine"),
        ..SandboxPolicy::default()
    };
    let registry = default_tools(&PathSandbox::new(&root).unwrap(), &policy).unwrap();
    let ctx = ToolContext::new(&root, "escape");

    let made = call(
        &registry,
        &ctx,
        "run_command",
        json!({"command": format!("ln -s {} out && ln -s {}/secret.txt leak", outside.display(), outside.display())}),
    )
    .await;
    assert!(!made.is_error, "{}", made.content);

    for (name, input) in [
        (
            "write_file",
            json!({"path": "out/secret.txt", "content": "pwned"}),
        ),
        ("write_file", json!({"path": "leak", "content": "pwned"})),
        (
            "write_file",
            json!({"path": "out/new.txt", "content": "pwned"}),
        ),
        (
            "patch_file",
            json!({"path": "leak", "old_string": "secret", "new_string": "pwned"}),
        ),
        ("read_file", json!({"path": "leak"})),
        ("read_file", json!({"path": "out/secret.txt"})),
    ] {
        let output = call(&registry, &ctx, name, input.clone()).await;
        assert!(output.is_error, "{name} {input}: {}", output.content);
        assert!(
            output.content.contains("outside the workspace"),
            "{name} {input}: {}",
            output.content
        );
        assert!(!output.content.contains("secret\n"), "{}", output.content);
    }
    let grep = call(&registry, &ctx, "grep", json!({"pattern": "secret"})).await;
    assert!(!grep.content.contains("leak:1:secret"), "{}", grep.content);

    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
}
