//! Landlock confinement of `run_command`, enforced by the running kernel: where commands may
//! write in each mode, and whether they may open TCP connections.
//!
//! These tests need a kernel with Landlock (Linux 5.13+, enabled). On a kernel without it
//! they fail, unless `KEEL_TEST_ALLOW_NO_LANDLOCK=1` is set, when they check that confined
//! modes refuse to run instead.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use keel_sandbox::tools::{RunCommand, RunCommandArgs};
use keel_sandbox::{SandboxMode, SandboxPolicy};
use keel_tool::{Tool, ToolContext, ToolError, ToolOutput};
use tempfile::TempDir;

/// A directory outside both the system temp dir and the workspace, which the test user could
/// otherwise write (the tests may run as root).
fn outside_dir() -> TempDir {
    let temp = std::env::temp_dir();
    let base = [
        PathBuf::from("/var/tmp"),
        std::env::home_dir().unwrap_or_default(),
    ]
    .into_iter()
    .find(|base| base.is_dir() && !base.starts_with(&temp))
    .expect("no writable directory outside the temp dir");
    let dir = tempfile::Builder::new()
        .prefix("keel-landlock-outside-")
        .tempdir_in(&base)
        .unwrap();
    assert!(
        !dir.path().starts_with(std::env::temp_dir()),
        "{} is inside the temp dir",
        dir.path().display()
    );
    dir
}

/// A workspace outside the temp dir, so writes to the two are told apart.
fn workspace() -> TempDir {
    tempfile::Builder::new()
        .prefix("keel-landlock-root-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

async fn call(root: &Path, policy: SandboxPolicy, command: &str) -> Result<ToolOutput, ToolError> {
    let tool = RunCommand::new(root, policy);
    let ctx = ToolContext::new(root, "landlock-test");
    let args = RunCommandArgs {
        command: command.to_owned(),
        timeout_secs: Some(20),
    };
    tool.call(args, &ctx).await
}

/// Runs `command`; `None` if Landlock is missing and the tests were told to allow that.
async fn run(root: &Path, policy: SandboxPolicy, command: &str) -> Option<ToolOutput> {
    match call(root, policy, command).await {
        Ok(output) => Some(output),
        Err(ToolError::Denied(message))
            if std::env::var_os("KEEL_TEST_ALLOW_NO_LANDLOCK").is_some() =>
        {
            assert!(message.contains("needs Landlock"), "{message}");
            None
        }
        Err(err) => panic!("{command}: {err}"),
    }
}

fn mode(mode: SandboxMode) -> SandboxPolicy {
    SandboxPolicy::with_mode(mode)
}

#[tokio::test]
async fn workspace_write_confines_writes_to_the_workspace_and_session_temp() {
    let root = workspace();
    let outside = outside_dir();
    std::fs::write(outside.path().join("readable.txt"), "readable\n").unwrap();
    let target = outside.path().join("created.txt");

    let command = format!("touch {}", target.display());
    let Some(output) = run(root.path(), mode(SandboxMode::WorkspaceWrite), &command).await else {
        return;
    };
    assert!(output.is_error, "{}", output.content);
    assert!(
        output.content.contains("Permission denied"),
        "{}",
        output.content
    );
    assert!(
        !target.exists(),
        "the write outside the workspace went through"
    );
    assert_eq!(output.metadata["confined"], true);
    assert!(output.metadata["landlock_abi"].as_u64().unwrap() >= 1);

    // Children of children are confined too, and so is every way of writing.
    let command = format!(
        "bash -c 'echo x > {0}' ; mkdir {1}/dir ; ln -s /etc {1}/link ; rm {1}/readable.txt",
        target.display(),
        outside.path().display()
    );
    let output = run(root.path(), mode(SandboxMode::WorkspaceWrite), &command)
        .await
        .unwrap();
    assert_eq!(
        output.content.matches("Permission denied").count(),
        4,
        "{}",
        output.content
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);

    // Reading outside, and writing in the workspace, the session temp dir ($TMPDIR) and
    // /dev/null, work; the system temp dir is not writable.
    let system_temp =
        std::env::temp_dir().join(format!("keel-landlock-sys-{}", std::process::id()));
    let command = format!(
        "cat {}/readable.txt && echo inside > inside.txt && mkdir -p sub/dir && \
         echo temp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo gone > /dev/null && \
         cat /dev/urandom | head -c 4 | wc -c && touch {}",
        outside.path().display(),
        system_temp.display()
    );
    let output = run(root.path(), mode(SandboxMode::WorkspaceWrite), &command)
        .await
        .unwrap();
    assert!(
        output
            .content
            .starts_with("readable\ntemp\n4\ntouch: cannot touch"),
        "{}",
        output.content
    );
    assert!(
        output.content.contains("Permission denied"),
        "{}",
        output.content
    );
    assert!(!system_temp.exists());
    assert_eq!(
        std::fs::read_to_string(root.path().join("inside.txt")).unwrap(),
        "inside\n"
    );
}

#[tokio::test]
async fn read_only_blocks_writing_in_the_workspace() {
    let root = workspace();
    std::fs::write(root.path().join("existing.txt"), "old\n").unwrap();
    let temp_target = std::env::temp_dir().join(format!("keel-landlock-ro-{}", std::process::id()));
    let command = format!(
        "touch new.txt; echo new > existing.txt; touch {}; cat existing.txt; echo ok > /dev/null \
         && ls",
        temp_target.display()
    );
    let Some(output) = run(root.path(), mode(SandboxMode::ReadOnly), &command).await else {
        return;
    };
    assert_eq!(
        output.content.matches("Permission denied").count(),
        3,
        "{}",
        output.content
    );
    assert!(
        output
            .content
            .ends_with("old\nexisting.txt\n[exit code 0]\n"),
        "{}",
        output.content
    );
    assert!(!root.path().join("new.txt").exists());
    assert!(!temp_target.exists());
    assert_eq!(
        std::fs::read_to_string(root.path().join("existing.txt")).unwrap(),
        "old\n"
    );
}

#[tokio::test]
async fn full_access_is_not_confined() {
    let root = workspace();
    let outside = outside_dir();
    let target = outside.path().join("created.txt");
    let command = format!("touch {}", target.display());
    let output = run(root.path(), mode(SandboxMode::FullAccess), &command)
        .await
        .unwrap();
    assert_eq!(output.content, "(no output)\n[exit code 0]\n");
    assert!(target.exists());
    assert_eq!(output.metadata["confined"], false);
}

#[tokio::test]
async fn network_false_blocks_tcp_connect() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = workspace();
    let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

    let open = SandboxPolicy {
        network: true,
        ..mode(SandboxMode::WorkspaceWrite)
    };
    let Some(output) = run(root.path(), open, &command).await else {
        return;
    };
    assert_eq!(output.content, "connected\n[exit code 0]\n");

    let closed = SandboxPolicy {
        network: false,
        ..mode(SandboxMode::WorkspaceWrite)
    };
    let output = run(root.path(), closed, &command).await.unwrap();
    let abi = output.metadata["landlock_abi"].as_u64().unwrap();
    if abi >= 4 {
        assert!(output.is_error);
        // seccomp refuses the socket; Landlock would refuse the connect.
        assert!(
            output.content.contains("Operation not permitted"),
            "{}",
            output.content
        );
        assert!(!output.content.contains("connected"), "{}", output.content);
        assert_eq!(output.metadata["network_blocked"], true);
    } else {
        // Too old for Landlock to block TCP: the result must say so rather than pretend.
        assert!(
            output.content.contains("cannot restrict TCP"),
            "{}",
            output.content
        );
    }
}

#[tokio::test]
async fn confined_commands_cannot_signal_the_agent() {
    let root = workspace();
    let command = format!("kill -0 {} && echo reachable", std::process::id());
    let Some(output) = run(root.path(), mode(SandboxMode::WorkspaceWrite), &command).await else {
        return;
    };
    let abi = output.metadata["landlock_abi"].as_u64().unwrap();
    if abi >= 6 {
        assert!(
            output.content.contains("Operation not permitted"),
            "{}",
            output.content
        );
    } else {
        assert!(output.content.contains("reachable"), "{}", output.content);
    }
    // Signals within the sandbox still work.
    let output = run(
        root.path(),
        mode(SandboxMode::WorkspaceWrite),
        "sleep 5 & kill $! && wait $!; echo $?",
    )
    .await
    .unwrap();
    assert_eq!(output.content, "143\n[exit code 0]\n");
}

#[tokio::test]
async fn the_description_names_the_sandbox() {
    let root = workspace();
    let tool = RunCommand::new(root.path(), mode(SandboxMode::WorkspaceWrite));
    let description = Tool::description(&tool);
    assert!(
        description.contains("only inside the workspace and its temp dir"),
        "{description}"
    );
    assert!(
        description.contains("Network access is blocked"),
        "{description}"
    );
    let open = SandboxPolicy {
        network: true,
        ..mode(SandboxMode::WorkspaceWrite)
    };
    let tool = RunCommand::new(root.path(), open);
    assert!(Tool::description(&tool).contains("The command has network access."));
}

#[tokio::test]
async fn extra_writable_roots_open_only_themselves() {
    let root = workspace();
    let cache = outside_dir();
    let elsewhere = outside_dir();
    let policy = mode(SandboxMode::WorkspaceWrite).allow_write(cache.path());
    let command = format!(
        "touch {}/cached && touch {}/denied",
        cache.path().display(),
        elsewhere.path().display()
    );
    let Some(output) = run(root.path(), policy, &command).await else {
        return;
    };
    assert!(cache.path().join("cached").exists(), "{}", output.content);
    assert!(
        output.content.contains("Permission denied"),
        "{}",
        output.content
    );
    assert!(!elsewhere.path().join("denied").exists());
}
