//! The process-group runner: input, output caps, the scrubbed environment, and a timeout that
//! kills the whole group (a grandchild too); groups spawned and guarded by hand.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use keel_sandbox::ProcessGroupRunner;
use keel_tool::{ProcessError, ProcessRunner, ProcessSpec};

fn spec(script: &str) -> ProcessSpec {
    ProcessSpec::shell(script, std::env::temp_dir())
}

#[tokio::test]
async fn runs_to_the_end_with_input_exit_code_and_both_outputs() {
    let mut spec = spec("cat; echo oops >&2; exit 3");
    spec.stdin = b"{\"a\":1}".to_vec();
    let output = ProcessGroupRunner.run(spec).await.unwrap();
    assert_eq!(output.code, Some(3));
    assert_eq!(output.signal, None);
    assert_eq!(output.stdout, b"{\"a\":1}");
    assert_eq!(output.stderr, b"oops\n");
}

#[tokio::test]
async fn output_is_cut_to_its_cap_and_the_rest_is_drained() {
    let mut spec = spec("head -c 1000000 /dev/zero; echo done >&2");
    spec.output_cap = 100;
    let output = ProcessGroupRunner.run(spec).await.unwrap();
    assert_eq!(output.code, Some(0));
    assert_eq!(output.stdout.len(), 100);
    assert_eq!(output.stderr, b"done\n");
}

#[tokio::test]
async fn hidden_variables_stay_out_and_given_ones_go_in() {
    assert!(
        std::env::var_os("HOME").is_some(),
        "the test needs HOME set"
    );
    let mut spec = spec("echo \"[$HOME][$GIVEN]\"");
    spec.hidden_env = vec!["HOME".into()];
    spec.env = vec![("GIVEN".into(), "yes".into())];
    let output = ProcessGroupRunner.run(spec).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "[][yes]\n");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_group() {
    let marker = std::env::temp_dir().join(format!("keel-process-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    // The grandchild would write the marker after 2 s unless its group is killed.
    let mut spec = spec(&format!("(sleep 2; touch {}) & sleep 30", marker.display()));
    spec.timeout = Duration::from_millis(300);
    let error = ProcessGroupRunner.run(spec).await.unwrap_err();
    assert!(matches!(error, ProcessError::TimedOut { .. }), "{error}");
    assert_eq!(error.to_string(), "timed out after 0.3 s and was killed");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!marker.exists(), "the grandchild outlived the timeout");
}

#[tokio::test]
async fn a_missing_working_directory_is_a_spawn_error_naming_it() {
    let spec = ProcessSpec::shell("true", "/nonexistent/keel-dir");
    let error = ProcessGroupRunner.run(spec).await.unwrap_err();
    assert!(matches!(error, ProcessError::Spawn { .. }));
    assert!(
        error.to_string().contains("/nonexistent/keel-dir"),
        "{error}"
    );
}

#[test]
fn killing_groups_that_are_not_ours_sends_nothing() {
    // 0 would be this process's own group and 1 every process we may signal.
    keel_sandbox::kill_group(0).unwrap();
    keel_sandbox::kill_group(1).unwrap();
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Waits up to 5 s for `pid` to be gone.
async fn wait_gone(pid: u32) -> bool {
    for _ in 0..500 {
        if gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Reads the pids a child prints, one a line, until `count` are read.
async fn read_pids(stdout: tokio::process::ChildStdout, count: usize) -> Vec<u32> {
    use tokio::io::AsyncBufReadExt as _;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut pids = Vec::new();
    while pids.len() < count {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the child ended early");
        pids.push(line.trim().parse().unwrap());
    }
    pids
}

#[tokio::test]
async fn a_spawned_group_is_killed_whole_when_its_guard_is_dropped() {
    let mut command = tokio::process::Command::new("sh");
    command
        .args(["-c", "sleep 300.201 & echo $!; echo $$; wait"])
        .stdout(std::process::Stdio::piped());
    let mut spawned = keel_sandbox::spawn_in_group(&mut command).unwrap();
    let leader = spawned.child.id().unwrap();
    assert_eq!(spawned.group.pgid(), Some(leader));
    let pids = read_pids(spawned.child.stdout.take().unwrap(), 2).await;
    assert_eq!(pids[1], leader, "the child leads its group");
    let keel_sandbox::GroupChild { child, group, .. } = spawned;
    drop(group);
    // The grandchild, in the group but not the child we hold, goes too.
    assert!(wait_gone(pids[0]).await, "the group's sleep survived");
    drop(child);
}

#[tokio::test]
async fn a_marked_guard_also_kills_what_left_the_group_carrying_the_marker() {
    let marker = format!("KEEL_TEST_MARK={}", std::process::id());
    let (name, value) = marker.split_once('=').unwrap();
    let mut command = tokio::process::Command::new("sh");
    command
        // The escapee says its pid once it has left the group.
        .args(["-c", "setsid sh -c 'echo $$; exec sleep 300.202' & wait"])
        .env(name, value)
        .stdout(std::process::Stdio::piped());
    let mut spawned = keel_sandbox::spawn_in_group(&mut command).unwrap();
    let escaped = read_pids(spawned.child.stdout.take().unwrap(), 1).await[0];
    let marked = keel_sandbox::GroupGuard::marked(spawned.child.id(), marker);
    spawned.group.settle();
    marked.kill();
    // Time for a wrong kill to take effect.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !gone(escaped),
        "a process outside the group died of a group kill"
    );
    drop(marked);
    assert!(wait_gone(escaped).await, "the marked escapee survived");
}
