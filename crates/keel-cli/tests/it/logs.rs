//! The log file: `KEEL_LOG` and `--debug` write `$KEEL_HOME/logs/keel.log` (0700/0600) with
//! the runs, turns, model calls and tool calls in it, never the provider's key, never on the
//! terminal; without them no file and no directory is made.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::pty;

use std::os::unix::fs::PermissionsExt;

use crate::support::*;
use keel_test_support::git::TempRepo;
use pty::Pty;
use serde_json::json;

/// The mode bits of `path`.
fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn keel_log_trace_logs_the_run_and_never_the_key() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "alpha\n");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "read_file", json!({"path": "notes.txt"})),
        text("It says alpha."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .env("KEEL_LOG", "trace")
        .args(["exec", "What do the notes say?"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // stderr is exec's progress only: the log went to the file.
    assert_eq!(
        redact(&stderr(&output), &[]),
        "✓ read_file(notes.txt) · 1 line · [time]\n"
    );
    let logs = home.keel_home().join("logs");
    let file = logs.join("keel.log");
    assert_eq!(mode(&logs), 0o700);
    assert_eq!(mode(&file), 0o600);
    let log = std::fs::read_to_string(&file).unwrap();
    for what in [
        "run{",
        "turn{iteration=1}",
        "model_call{",
        "tool_call{tool=\"read_file\"",
    ] {
        assert!(log.contains(what), "no {what} in the log:\n{log}");
    }
    assert!(log.contains("TRACE"), "nothing at trace level:\n{log}");
    assert!(!log.contains(FAKE_KEY), "the key is in the log:\n{log}");
    // Nor did anything have to be scrubbed: no library put the key in a field.
    assert!(!log.contains("[redacted]"), "{log}");
}

#[tokio::test]
async fn debug_logs_keels_crates_and_no_flag_logs_nothing() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("One."), text("Two.")]).await;
    let mut quiet = home.keel_anthropic(&server);
    quiet.current_dir(repo.path()).args(["exec", "hello"]);
    let output = run(quiet).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let logs = home.keel_home().join("logs");
    assert!(
        !logs.exists(),
        "a logs directory without KEEL_LOG or --debug"
    );

    let mut debug = home.keel_anthropic(&server);
    debug
        .current_dir(repo.path())
        .args(["--debug", "exec", "hello"]);
    let output = run(debug).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "");
    let log = std::fs::read_to_string(logs.join("keel.log")).unwrap();
    assert!(log.contains("model_call{"), "{log}");
    assert!(
        !log.contains("TRACE"),
        "--debug is debug, not trace:\n{log}"
    );
}

#[tokio::test]
async fn a_bad_filter_is_a_warning_and_the_run_goes_on() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("Still here.")]).await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .env("KEEL_LOG", "keel=loud")
        .args(["exec", "hello"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Still here.\n");
    assert!(
        stderr(&output).starts_with("keel: warning: KEEL_LOG=\"keel=loud\" is not a filter"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repl_never_draws_log_lines() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("Logged, not shown.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).env("KEEL_LOG", "trace");
    let (code, transcript) = tokio::task::block_in_place(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("hello");
        keel.expect("Logged, not shown.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    for level in ["TRACE", "DEBUG", " INFO ", "model_call"] {
        assert!(
            !transcript.contains(level),
            "{level} on screen:\n{transcript}"
        );
    }
    let log = std::fs::read_to_string(home.keel_home().join("logs/keel.log")).unwrap();
    assert!(log.contains("model_call{"), "{log}");
}
