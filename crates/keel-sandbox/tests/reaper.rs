//! No process outlives its call, for real: with this test process a child subreaper, what a
//! command leaves behind (`setsid -f`, a double fork, `env -i setsid -f` without the call's
//! marker) is gone when the call ends, also when calls overlap; registered processes are
//! spared; `kill_descendants` spares only the surviving ones.
//!
//! Every process these tests start goes through `run_command` or `reaper::spawn*`, as the
//! sweep requires of a subreaper host.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use keel_sandbox::reaper::{self, Tracked};
use keel_sandbox::tools::{RunCommand, RunCommandArgs};
use keel_sandbox::{SandboxMode, SandboxPolicy};
use keel_tool::{Tool, ToolContext, ToolOutput};

/// The live processes (zombies are dead) whose command line holds `needle`.
fn alive(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            if !String::from_utf8_lossy(&cmdline).contains(needle) {
                return None;
            }
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let state = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .next()?
                .to_owned();
            (state != "Z").then_some(pid)
        })
        .collect()
}

/// Waits (up to 5 s) until no process matches.
async fn assert_gone(needle: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    while !alive(needle).is_empty() {
        assert!(
            Instant::now() < until,
            "{:?} with {needle:?} survived",
            alive(needle)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Which of `pids` are zombie children of this process (killed, not reaped).
fn zombie_children(pids: &[u32]) -> Vec<u32> {
    let own = std::process::id().to_string();
    pids.iter()
        .copied()
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.split_whitespace().collect())
                .unwrap_or_default();
            fields.first() == Some(&"Z") && fields.get(1) == Some(&own.as_str())
        })
        .collect()
}

async fn run(root: &Path, command: &str, timeout: u64) -> ToolOutput {
    reaper::become_subreaper().unwrap();
    // Built without the `confine` feature, which cannot confine, in full access: reaping is
    // the same.
    let mode = if cfg!(feature = "confine") {
        SandboxMode::WorkspaceWrite
    } else {
        SandboxMode::FullAccess
    };
    let tool = RunCommand::new(root, SandboxPolicy::with_mode(mode));
    let ctx = ToolContext::new(root, "reaper-test");
    let args = RunCommandArgs {
        command: command.to_owned(),
        timeout_secs: Some(timeout),
    };
    tool.call(args, &ctx).await.unwrap()
}

#[tokio::test]
async fn escapees_are_gone_when_the_call_ends() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let output = run(
        dir.path(),
        "setsid -f sh -c 'echo $$ >> pids; exec sleep 600.301'; \
         (sh -c 'echo $$ >> pids; exec sleep 600.302' &) ; \
         ( ( setsid sh -c 'echo $$ >> pids; exec sleep 600.303' </dev/null >/dev/null 2>&1 & ) & ); \
         env -i /bin/sh -c 'setsid -f sh -c \"echo \\$\\$ >> pids; exec sleep 600.304\"' \
           </dev/null >/dev/null 2>&1; sleep 0.2; echo left",
        20,
    )
    .await;
    assert_eq!(output.content, "left\n[exit code 0]\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(reaper::is_subreaper());
    for needle in ["600.301", "600.302", "600.303", "600.304"] {
        assert_gone(needle).await;
    }
    // Reaped, not left as zombies of this process.
    let pids: Vec<u32> = std::fs::read_to_string(dir.path().join("pids"))
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 4, "{pids:?}");
    // Another call running meanwhile may be the one that sweeps and reaps: give it time.
    let until = Instant::now() + Duration::from_secs(5);
    while !zombie_children(&pids).is_empty() {
        assert!(
            Instant::now() < until,
            "zombies left: {:?}",
            zombie_children(&pids)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_escapee_without_the_marker_is_gone_after_a_timeout_too() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        dir.path(),
        "env -i setsid -f sleep 600.311 </dev/null >/dev/null 2>&1; sleep 600.312",
        1,
    )
    .await;
    assert_eq!(output.metadata["timed_out"], true);
    assert_gone("600.311").await;
    assert_gone("600.312").await;
}

#[tokio::test]
async fn overlapping_calls_sweep_when_the_last_one_ends() {
    let dir = tempfile::tempdir().unwrap();
    let slow = run(dir.path(), "sleep 1.5; echo slow", 20);
    let quick = async {
        let output = run(
            dir.path(),
            "env -i setsid -f sleep 600.321 </dev/null >/dev/null 2>&1; echo quick",
            20,
        )
        .await;
        // The slow call still runs: its bash must not have been swept.
        output
    };
    let (slow, quick) = tokio::join!(slow, quick);
    assert_eq!(quick.content, "quick\n[exit code 0]\n");
    assert_eq!(slow.content, "slow\n[exit code 0]\n");
    assert_gone("600.321").await;
}

#[tokio::test]
async fn registered_processes_are_spared() {
    reaper::become_subreaper().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new("sleep");
    command.arg("600.331").kill_on_drop(true);
    let (mut child, tracked) = reaper::spawn(&mut command).unwrap();
    let output = run(
        dir.path(),
        "env -i setsid -f sleep 600.332 </dev/null >/dev/null 2>&1; echo ran",
        20,
    )
    .await;
    assert_eq!(output.content, "ran\n[exit code 0]\n");
    assert_gone("600.332").await;
    assert_eq!(alive("600.331").len(), 1, "the registered child was swept");
    assert_eq!(tracked.pid(), child.id().unwrap());
    child.kill().await.unwrap();
    drop(tracked);
}

#[test]
fn kill_descendants_spares_only_surviving_processes() {
    if std::env::var_os("KEEL_TEST_KILL_DESCENDANTS_CHILD").is_some() {
        reaper::become_subreaper().unwrap();
        let mut plain = std::process::Command::new("sleep");
        plain.arg("600.341");
        let (_plain, _plain_guard) = reaper::spawn_std(&mut plain, false).unwrap();
        let mut grandchild = std::process::Command::new("sh");
        grandchild.args(["-c", "sleep 600.342 & wait"]);
        let mut grandchild = grandchild.spawn().unwrap();
        let mut kept = std::process::Command::new("sleep");
        kept.arg("600.343");
        let (mut kept, kept_guard) = reaper::spawn_std(&mut kept, true).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(reaper::kill_descendants() >= 3);
        let until = Instant::now() + Duration::from_secs(5);
        while !(alive("600.341").is_empty() && alive("600.342").is_empty()) {
            assert!(Instant::now() < until, "descendants survived");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(alive("600.343").len(), 1);
        grandchild.wait().unwrap();
        drop(kept_guard);
        kept.kill().unwrap();
        kept.wait().unwrap();
        return;
    }
    let mut command = keel_test_support::rerun::command(
        module_path!(),
        "kill_descendants_spares_only_surviving_processes",
    );
    command.env("KEEL_TEST_KILL_DESCENDANTS_CHILD", "1");
    let (mut child, _guard) = reaper::spawn_std(&mut command, false).unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn tracked_guards_are_ordinary_values() {
    let guard = Tracked::new(4_000_000);
    assert_eq!(guard.pid(), 4_000_000);
    let surviving = Tracked::surviving(4_000_001);
    assert_eq!(surviving.pid(), 4_000_001);
}
