//! Protected paths for real: what a command writes to `.git` (the `core.fsmonitor` and hooks
//! attacks) or to the configuration that grants keel powers is refused where user namespaces
//! work and restored everywhere; the file tools ask the person before writing a protected
//! file, also through a symlink.
//!
//! The command tests run twice: with namespaces (where the machine has them) and in a child
//! test process with `KEEL_SANDBOX_NO_NAMESPACES=1` (detect and restore only).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::tools::{PatchFileArgs, RunCommand, RunCommandArgs, WriteFile, WriteFileArgs};
use keel_sandbox::{PathSandbox, SandboxMode, SandboxPolicy, default_tools};
use keel_tool::{Effect, Tool, ToolContext, ToolOutput};
use serde_json::json;

use crate::common::in_both_modes;

/// A git repository with a commit, a `.keel/config.toml` and a `.mcp.json`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("keel-protected-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(dir.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::create_dir_all(dir.path().join(".keel")).unwrap();
    std::fs::write(dir.path().join(".keel/config.toml"), "model = \"m\"\n").unwrap();
    std::fs::write(dir.path().join(".mcp.json"), "{}\n").unwrap();
    std::fs::write(dir.path().join("README"), "hello\n").unwrap();
    git(&["add", "."]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "init",
    ]);
    dir
}

/// Runs `command` under `policy`; built without the `confine` feature, unconfined (detect-
/// and-restore must hold all the same).
async fn run(root: &Path, mut policy: SandboxPolicy, command: &str) -> ToolOutput {
    policy.allow_unconfined_fallback |= !cfg!(feature = "confine");
    let tool = RunCommand::new(root, policy);
    let ctx = ToolContext::new(root, "protected-test");
    let args = RunCommandArgs {
        command: command.to_owned(),
        timeout_secs: Some(60),
    };
    tool.call(args, &ctx).await.unwrap()
}

fn namespaces(output: &ToolOutput) -> bool {
    output.metadata["namespaces"] == true
}

fn restored(output: &ToolOutput) -> Vec<String> {
    output.metadata["restored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect()
}

/// Every file under `.git/hooks` that is not a sample.
fn live_hooks(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root.join(".git/hooks"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_none_or(|ext| ext != "sample"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn git_config_fsmonitor_and_hooks_leave_nothing_that_runs_later() {
    in_both_modes(
        module_path!(),
        "git_config_fsmonitor_and_hooks_leave_nothing_that_runs_later",
        async || {
            let root = repo();
            let config_before = std::fs::read(root.path().join(".git/config")).unwrap();
            let command = "git config core.fsmonitor 'touch /var/tmp/keel-pwned'; \
                 git config core.hooksPath .evil-hooks; \
                 printf '#!/bin/sh\\ntouch /var/tmp/keel-pwned\\n' > .git/hooks/pre-commit; \
                 chmod +x .git/hooks/pre-commit; \
                 echo '* filter=evil' > .git/info/attributes; echo done";
            let output = run(root.path(), SandboxPolicy::default(), command).await;
            assert!(output.content.contains("done"), "{}", output.content);
            assert_eq!(
                std::fs::read(root.path().join(".git/config")).unwrap(),
                config_before,
                "{}",
                output.content
            );
            assert!(live_hooks(root.path()).is_empty(), "{}", output.content);
            assert!(!root.path().join(".git/info/attributes").exists());
            if namespaces(&output) {
                // Refused outright: the repository is read-only for commands.
                assert!(
                    output.content.contains("Read-only file system"),
                    "{}",
                    output.content
                );
                assert_eq!(restored(&output), Vec::<String>::new());
            } else {
                // Detected and restored, and said so.
                assert_eq!(
                    restored(&output),
                    [
                        ".git/config",
                        ".git/hooks/pre-commit",
                        ".git/info/attributes"
                    ],
                    "{}",
                    output.content
                );
                assert!(
                    output
                        .content
                        .contains("[note: the command changed protected paths, which were restored: .git/config"),
                    "{}",
                    output.content
                );
                assert!(output.is_error);
            }
        },
    );
}

#[test]
fn keel_config_and_mcp_json_are_protected() {
    in_both_modes(
        module_path!(),
        "keel_config_and_mcp_json_are_protected",
        async || {
            let root = repo();
            let command = "echo 'sandbox = \"full-access\"' >> .keel/config.toml; \
                       echo '{\"mcpServers\":{}}' > .mcp.json; \
                       mkdir -p .claude && echo '{}' > .claude/settings.json; echo done";
            let output = run(root.path(), SandboxPolicy::default(), command).await;
            assert!(output.content.contains("done"), "{}", output.content);
            assert_eq!(
                std::fs::read_to_string(root.path().join(".keel/config.toml")).unwrap(),
                "model = \"m\"\n"
            );
            assert_eq!(
                std::fs::read_to_string(root.path().join(".mcp.json")).unwrap(),
                "{}\n"
            );
            // Created where none was: removed.
            assert!(!root.path().join(".claude/settings.json").exists());
            let restored = restored(&output);
            assert!(
                restored.contains(&".claude/settings.json".to_owned()),
                "{restored:?}"
            );
            if namespaces(&output) {
                assert_eq!(
                    output.content.matches("Read-only file system").count(),
                    2,
                    "{}",
                    output.content
                );
            } else {
                assert!(
                    restored.contains(&".keel/config.toml".to_owned()),
                    "{restored:?}"
                );
                assert!(restored.contains(&".mcp.json".to_owned()), "{restored:?}");
            }
        },
    );
}

#[test]
fn moving_the_config_directory_aside_is_undone() {
    in_both_modes(
        module_path!(),
        "moving_the_config_directory_aside_is_undone",
        async || {
            let root = repo();
            let command = "mv .keel .keel-old && mkdir .keel && \
                       echo 'approvals = \"allow\"' > .keel/config.toml && echo moved";
            let output = run(root.path(), SandboxPolicy::default(), command).await;
            assert!(output.content.contains("moved"), "{}", output.content);
            assert_eq!(
                std::fs::read_to_string(root.path().join(".keel/config.toml")).unwrap(),
                "model = \"m\"\n",
                "{}",
                output.content
            );
            assert_eq!(restored(&output), [".keel/config.toml"]);
        },
    );
}

#[test]
fn a_new_repository_made_by_a_command_keeps_no_config_or_hooks() {
    in_both_modes(
        module_path!(),
        "a_new_repository_made_by_a_command_keeps_no_config_or_hooks",
        async || {
            let root = tempfile::Builder::new()
                .prefix("keel-protected-new-")
                .tempdir_in("/var/tmp")
                .unwrap();
            let output = run(
                root.path(),
                SandboxPolicy::default(),
                "git init -q && git config core.fsmonitor evil && echo made",
            )
            .await;
            assert!(output.content.contains("made"), "{}", output.content);
            assert!(!root.path().join(".git/config").exists());
            assert!(!root.path().join(".git/hooks").exists());
            let status = std::process::Command::new("git")
                .arg("status")
                .current_dir(root.path())
                .output()
                .unwrap();
            assert!(status.status.success(), "{status:?}");
        },
    );
}

#[test]
fn full_access_commands_are_restored_too() {
    in_both_modes(
        module_path!(),
        "full_access_commands_are_restored_too",
        async || {
            let root = repo();
            let output = run(
                root.path(),
                SandboxPolicy::with_mode(SandboxMode::FullAccess),
                "git config core.fsmonitor evil && echo set",
            )
            .await;
            assert!(output.content.contains("set"), "{}", output.content);
            assert_eq!(restored(&output), [".git/config"]);
            let config = std::fs::read_to_string(root.path().join(".git/config")).unwrap();
            assert!(!config.contains("fsmonitor"), "{config}");
        },
    );
}

#[test]
fn policy_protected_paths_and_hooks_path_are_protected() {
    in_both_modes(
        module_path!(),
        "policy_protected_paths_and_hooks_path_are_protected",
        async || {
            let root = repo();
            std::fs::create_dir_all(root.path().join("scripts")).unwrap();
            std::fs::write(root.path().join("scripts/hook.sh"), "echo hi\n").unwrap();
            std::fs::create_dir_all(root.path().join("tools/hooks")).unwrap();
            let status = std::process::Command::new("git")
                .args(["config", "core.hooksPath", "tools/hooks"])
                .current_dir(root.path())
                .status()
                .unwrap();
            assert!(status.success());
            let policy = SandboxPolicy {
                protected_paths: vec![PathBuf::from("scripts")],
                ..SandboxPolicy::default()
            };
            let output = run(
                root.path(),
                policy,
                "echo evil > scripts/hook.sh; echo evil > tools/hooks/pre-commit; echo done",
            )
            .await;
            assert!(output.content.contains("done"), "{}", output.content);
            assert_eq!(
                std::fs::read_to_string(root.path().join("scripts/hook.sh")).unwrap(),
                "echo hi\n"
            );
            assert!(!root.path().join("tools/hooks/pre-commit").exists());
        },
    );
}

fn write_args(path: &str) -> WriteFileArgs {
    WriteFileArgs {
        path: path.to_owned(),
        content: "x".to_owned(),
    }
}

#[test]
fn file_tools_ask_before_writing_a_protected_file() {
    let root = repo();
    let sandbox = Arc::new(PathSandbox::new(root.path()).unwrap());
    let tool = WriteFile::new(sandbox.clone());
    let Effect::Protected { reason } = tool.effect(&write_args(".keel/config.toml")) else {
        panic!("not protected");
    };
    assert!(reason.contains(".keel/config.toml"), "{reason}");
    assert!(reason.contains("grants keel powers"), "{reason}");
    for path in [
        ".mcp.json",
        ".claude/settings.json",
        ".claude/settings.local.json",
    ] {
        assert!(
            matches!(tool.effect(&write_args(path)), Effect::Protected { .. }),
            "{path}"
        );
    }
    assert_eq!(tool.effect(&write_args("src/lib.rs")), Effect::Mutating);
    assert_eq!(tool.effect(&write_args(".keel/notes.md")), Effect::Mutating);

    // Through a symlink, the resolved path decides.
    std::os::unix::fs::symlink(".keel/config.toml", root.path().join("innocent.toml")).unwrap();
    let Effect::Protected { reason } = tool.effect(&write_args("innocent.toml")) else {
        panic!("a symlink to the config is not protected");
    };
    assert!(reason.contains(".keel/config.toml"), "{reason}");

    // The policy's paths, through default_tools, for patch_file too.
    let policy = SandboxPolicy {
        protected_paths: vec![PathBuf::from("scripts")],
        ..SandboxPolicy::default()
    };
    let registry = default_tools(&sandbox, &policy).unwrap();
    for (name, input) in [
        (
            "write_file",
            json!({"path": "scripts/run.sh", "content": "x"}),
        ),
        (
            "patch_file",
            json!({"path": "scripts/run.sh", "old_string": "a", "new_string": "b"}),
        ),
    ] {
        let call = ToolCall {
            id: "c",
            name,
            input: ToolInput::Valid(&input),
        };
        assert!(
            matches!(registry.effect(call), Effect::Protected { .. }),
            "{name}"
        );
    }
    let patch = keel_sandbox::tools::PatchFile::new(sandbox.clone())
        .with_protected_paths(policy.protected_paths.clone());
    let args = PatchFileArgs {
        path: "scripts/run.sh".to_owned(),
        old_string: "a".to_owned(),
        new_string: "b".to_owned(),
        replace_all: false,
    };
    assert!(matches!(patch.effect(&args), Effect::Protected { .. }));

    // .git stays refused outright.
    let ctx = ToolContext::new(root.path(), "protected-test");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let err = runtime
        .block_on(tool.call(write_args(".git/config"), &ctx))
        .unwrap_err();
    assert!(err.to_string().contains("inside .git/"), "{err}");
}
