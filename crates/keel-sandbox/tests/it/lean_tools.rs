//! The lean tool set: a few tools under short definitions, each the very tool of the full set
//! underneath (same paths, protected files, effects and results).

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::{PathSandbox, SandboxMode, SandboxPolicy, default_tools, lean_tools};
use keel_tool::{ToolContext, ToolRegistry, validate_definition};
use serde_json::{Value, json};

fn both(policy: &SandboxPolicy) -> (tempfile::TempDir, ToolRegistry, ToolRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = PathSandbox::new(dir.path()).unwrap();
    let full = default_tools(&sandbox, policy).unwrap();
    let lean = lean_tools(&sandbox, policy).unwrap();
    (dir, full, lean)
}

#[test]
fn the_lean_definitions_are_short_and_offerable() {
    let (_dir, _full, lean) = both(&SandboxPolicy::default());
    let definitions = lean.definitions();
    for definition in &definitions {
        validate_definition(definition).unwrap();
    }
    insta::assert_json_snapshot!("lean_definitions", definitions);
    let bytes = serde_json::to_string(&definitions).unwrap().len();
    assert!(bytes < 2_500, "{bytes} bytes");
}

#[test]
fn read_only_leaves_out_the_write_tools_and_the_network_is_said() {
    let (_dir, _full, lean) = both(&SandboxPolicy::with_mode(SandboxMode::ReadOnly));
    assert_eq!(
        lean.names(),
        ["grep", "list_directory", "read_file", "run_command"]
    );
    let description = |registry: &ToolRegistry| {
        registry
            .definitions()
            .into_iter()
            .find(|d| d.name == "run_command")
            .unwrap()
            .description
    };
    assert!(description(&lean).contains("no network"));
    let networked = SandboxPolicy {
        network: true,
        ..SandboxPolicy::default()
    };
    let (_dir, _full, lean) = both(&networked);
    assert!(
        !description(&lean).contains("network"),
        "{}",
        description(&lean)
    );
}

#[tokio::test]
async fn each_lean_call_is_the_full_tool_s_call() {
    let dir = tempfile::tempdir().unwrap();
    // A script the policy protects (a trusted project's hook): writing it is asked about.
    let policy = SandboxPolicy {
        allow_unconfined_fallback: !cfg!(feature = "confine"),
        protected_paths: vec![dir.path().join("hooks/check.sh")],
        ..SandboxPolicy::default()
    };
    let sandbox = PathSandbox::new(dir.path()).unwrap();
    let (full, lean) = (
        default_tools(&sandbox, &policy).unwrap(),
        lean_tools(&sandbox, &policy).unwrap(),
    );
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    std::fs::create_dir_all(dir.path().join(".keel")).unwrap();
    std::fs::write(dir.path().join(".keel/config.toml"), "model = \"x\"\n").unwrap();
    let ctx = ToolContext::new(dir.path(), "lean");
    let calls: Vec<(&str, Value)> = vec![
        ("read_file", json!({"path": "notes.txt"})),
        ("read_file", json!({"path": "../etc/passwd"})),
        ("grep", json!({"pattern": "alp"})),
        ("list_directory", json!({})),
        ("run_command", json!({"command": "rm -rf build"})),
        ("run_command", json!({"command": "git push --force"})),
        (
            "write_file",
            json!({"path": ".keel/config.toml", "content": "approvals = \"allow\""}),
        ),
        ("write_file", json!({"path": ".git/config", "content": "x"})),
        (
            "write_file",
            json!({"path": "hooks/check.sh", "content": "exit 0"}),
        ),
        (
            "patch_file",
            json!({"path": "notes.txt", "old_string": "gamma", "new_string": "delta"}),
        ),
        ("patch_file", json!({"path": "notes.txt", "old": "beta"})),
    ];
    for (name, input) in calls {
        let call = ToolCall {
            id: "call_1",
            name,
            input: ToolInput::Valid(&input),
        };
        assert_eq!(lean.effect(call), full.effect(call), "{name} {input}");
        // Only calls that change nothing are run: both registries share the workspace.
        if lean.effect(call) == keel_tool::Effect::ReadOnly || name == "patch_file" {
            let (a, b) = (
                full.dispatch(call, &ctx).await,
                lean.dispatch(call, &ctx).await,
            );
            assert_eq!(
                (a.content, a.is_error),
                (b.content, b.is_error),
                "{name} {input}"
            );
        }
    }
    // A tool left out of the lean set is unknown to it, not reachable by name.
    let input = json!({"pattern": "*.txt"});
    let glob = ToolCall {
        id: "call_2",
        name: "glob",
        input: ToolInput::Valid(&input),
    };
    assert!(lean.dispatch(glob, &ctx).await.is_error);
    assert!(lean.get("git_commit").is_none());
}
