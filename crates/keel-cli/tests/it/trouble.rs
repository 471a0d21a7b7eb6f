//! Provider trouble as a person sees it: one status line while a model call is retried (in
//! the REPL's pseudo-terminal and in `keel exec`'s stderr), and after the retries a line
//! naming what to check (the key's variable, the base URL and what set it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::pty;

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::{error_response, sse_response};
use keel_test_support::render::anthropic_sse;
use pty::Pty;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

/// A base URL where nothing listens (the discard port, closed on test machines).
const DEAD_URL: &str = "http://127.0.0.1:9";

/// A server that answers the first request 529 (overloaded, "retry in 1 s") and the next
/// with `answer`.
async fn overloaded_once(answer: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            error_response(529, "overloaded_error", "Overloaded")
                .insert_header("retry-after-ms", "1000"),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(sse_response(anthropic_sse(&text(answer))))
        .mount(&server)
        .await;
    server
}

/// The screen from the line where `prompt` was typed down: what one turn left on it
/// (the banner above changes with the session and directory).
fn turn_screen(keel: &Pty, prompt: &str) -> String {
    redact(&keel.screen_from(prompt), &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_shows_one_status_line_that_goes_when_the_call_goes_through() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = overloaded_once("Here after one retry.").await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).env_remove("NO_COLOR");
    let (during, after) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("say hello");
        keel.expect("retrying in 1.0 s (overloaded) · 1/4");
        let during = turn_screen(&keel, "say hello");
        keel.expect("Here after one retry.");
        keel.prompt();
        let after = turn_screen(&keel, "say hello");
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        (during, after)
    });
    // While waiting: the status line, once, in the spinner's place (no two-line warnings).
    assert_eq!(during.matches("retrying").count(), 1, "{during}");
    let status = during
        .lines()
        .find(|line| line.contains("retrying"))
        .unwrap();
    assert!(
        status.contains("retrying in 1.0 s (overloaded) · 1/4"),
        "{status}"
    );
    assert!(!during.contains("Overloaded"), "{during}");
    // After: gone, the answer in its place.
    insta::assert_snapshot!(after, @r"
    keel> say hello
    Here after one retry.
    [time] · 100 in / 20 out tokens · $0.0006 · context 1% of 200k
    keel>
    ");
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_provider_ends_the_turn_naming_the_url_to_check() {
    let repo = TempRepo::new();
    let home = Home::new();
    let mut command = home.keel();
    command
        .current_dir(repo.path())
        .env_remove("NO_COLOR")
        .env("ANTHROPIC_API_KEY", FAKE_KEY)
        .env("ANTHROPIC_BASE_URL", DEAD_URL);
    let screen = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("say hello");
        keel.expect("check ANTHROPIC_BASE_URL");
        keel.prompt();
        let screen = turn_screen(&keel, "say hello");
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        assert!(!transcript.contains(FAKE_KEY));
        screen
    });
    // The error (its chain wrapped over lines), then what to check; the retries' status
    // line is gone.
    let screen = regex::Regex::new(r"(?s)connection failed: .*go on\.")
        .unwrap()
        .replace(&screen, "connection failed: [error chain]");
    insta::assert_snapshot!(screen, @r"
    keel> say hello
    The run failed: connection failed: [error chain]
    cannot reach http://127.0.0.1:9 (connection refused): check ANTHROPIC_BASE_URL
    [time] · 0 in / 0 out tokens · $0.0000 · context 2% of 200k
    keel>
    ");
}

#[tokio::test]
async fn exec_prints_one_line_per_retry_then_the_answer() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = overloaded_once("Fine now.").await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args(["exec", "say hello"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Fine now.\n");
    insta::assert_snapshot!(stderr(&output), @"keel: retrying in 1.0 s (overloaded) · 1/4");
}

#[tokio::test]
async fn exec_against_a_dead_server_names_the_variable_that_set_its_url() {
    let repo = TempRepo::new();
    let home = Home::new();
    let mut command = home.keel();
    command
        .current_dir(repo.path())
        .env("OPENAI_BASE_URL", format!("{DEAD_URL}/v1"))
        .args(["exec", "say hello"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines.len(),
        6,
        "four retries, the failure, the hint:\n{err}"
    );
    for (n, line) in lines[..4].iter().enumerate() {
        assert!(
            line.starts_with("keel: retrying in ")
                && line.ends_with(&format!("(connection refused) · {}/4", n + 1)),
            "{line}"
        );
    }
    assert!(
        lines[4].starts_with("keel: the run ended (failed): The run failed: connection failed"),
        "{}",
        lines[4]
    );
    assert_eq!(
        lines[5],
        "keel: cannot reach http://127.0.0.1:9/v1 (connection refused): check OPENAI_BASE_URL"
    );
}

#[tokio::test]
async fn a_refused_key_names_its_variable_and_stream_json_keeps_its_objects() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(error_response(
            401,
            "authentication_error",
            "invalid x-api-key",
        ))
        .mount(&server)
        .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "--output-format", "stream-json", "say hello"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    // stdout: JSON objects only (init, the prompt, the result).
    for line in stdout(&output).lines() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|err| panic!("{err}: {line}"));
    }
    let hint = format!(
        "keel: the API key was refused by {}: check ANTHROPIC_API_KEY\n",
        server.uri()
    );
    assert_eq!(stderr(&output), hint);
    assert!(!stdout(&output).contains(FAKE_KEY));
}
