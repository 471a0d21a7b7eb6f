//! SIGTERM and SIGHUP are handled like Ctrl-C: the run is cancelled and saved, what it started
//! is killed, and keel exits.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use crate::support::*;
use keel_test_support::git::TempRepo;
use serde_json::json;

/// Waits until `path` exists (a command's pid file); panics after 20 s.
fn wait_for(path: &std::path::Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `keel exec` whose model starts a long command, sends `signal` once the command runs,
/// and checks keel exits soon, the command is gone and the session recorded the cancellation.
async fn stops_on(signal: nix::sys::signal::Signal) {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "run_command",
            json!({"command": "echo $$ > pid.txt; exec sleep 60", "timeout_secs": 100}),
        ),
        text("never reached"),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "--output-format", "json", "sleep a while"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    let pid_file = repo.path().join("pid.txt");
    let sleeper: u32 = tokio::task::spawn_blocking(move || wait_for(&pid_file))
        .await
        .unwrap()
        .parse()
        .unwrap();
    assert!(process_alive(sleeper));
    let started = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        signal,
    )
    .unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "keel took {:?} to stop",
        started.elapsed()
    );
    assert_eq!(
        output.status.code(),
        Some(1),
        "a cancelled run exits 1, not killed by the signal; stderr: {}",
        stderr(&output)
    );
    assert!(!process_alive(sleeper), "the command outlived keel");
    let result: serde_json::Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["subtype"], "error_during_execution", "{result}");
    // The session was saved with the call answered.
    let sessions = home.keel_home().join("sessions");
    let file = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("a session file");
    let saved = std::fs::read_to_string(file).unwrap();
    assert!(saved.contains("toolu_1"), "{saved}");
    assert!(saved.contains("tool_result"), "{saved}");
}

#[tokio::test]
async fn sigterm_cancels_saves_kills_and_exits() {
    stops_on(nix::sys::signal::Signal::SIGTERM).await;
}

#[tokio::test]
async fn sighup_cancels_saves_kills_and_exits() {
    stops_on(nix::sys::signal::Signal::SIGHUP).await;
}
