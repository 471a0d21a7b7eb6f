//! The facade's examples, run as programs against a loopback server with the provider from the
//! environment, as a host would run them (`cargo test` builds examples before it runs tests),
//! and the front door they use: `CodingAgent::from_env` and `prompt`.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use keel::prelude::*;
use keel_provider::ProviderError;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::{model_requests, request_bodies, serve_anthropic_replies};
use keel_test_support::scripted::{text_reply, tool_reply};
use serde_json::{Value, json};

/// The built example `name`, beside this test's own binary.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap();
    let path = debug.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is not built: run `cargo test -p keel`",
        path.display()
    );
    path
}

/// Runs example `name` in `dir` with `prompt`, its provider the Anthropic server at `url`.
async fn run_example(name: &str, dir: &Path, url: &str, prompt: &str) -> Output {
    let provider = [
        ("ANTHROPIC_API_KEY", "sk-ant-example-test"),
        ("ANTHROPIC_BASE_URL", url),
    ];
    run_example_with(name, dir, prompt, &provider).await
}

/// Runs example `name` in `dir` with `prompt`, in an environment of its own: `PATH`, a
/// temporary `HOME` and `KEEL_HOME`, and the `provider` variables.
async fn run_example_with(
    name: &str,
    dir: &Path,
    prompt: &str,
    provider: &[(&str, &str)],
) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(example(name));
    command
        .arg(prompt)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("KEEL_HOME", home.path().join(".keel"))
        .envs(provider.iter().copied())
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    drop(home);
    output
}

/// The tool results the model was sent, by call id.
fn tool_results(bodies: &[Value]) -> Vec<(String, String, bool)> {
    let last = bodies.last().unwrap();
    let mut results = Vec::new();
    for message in last["messages"].as_array().unwrap() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                results.push((
                    block["tool_use_id"].as_str().unwrap().to_owned(),
                    block["content"].to_string(),
                    block["is_error"].as_bool().unwrap_or(false),
                ));
            }
        }
    }
    results
}

#[tokio::test]
async fn embed_runs_the_whole_agent_in_the_current_directory() {
    let repo = TempRepo::new();
    repo.write("AGENTS.md", "Answer in one line.\n");
    repo.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    let server = serve_anthropic_replies(&[
        tool_reply("call_1", "read_file", json!({"path": "src/lib.rs"})),
        text_reply("answer() returns 42."),
    ])
    .await;
    let output = run_example(
        "embed",
        &repo.path(),
        &server.uri(),
        "What does answer() return?",
    )
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "answer() returns 42.\n"
    );
    // CodingAgent::from_env found the provider: the key and the base URL from the environment.
    let requests = model_requests(&server).await;
    assert_eq!(requests[0].headers["x-api-key"], "sk-ant-example-test");
    let bodies = request_bodies(&server).await;
    // keel's prompt with the project's instructions, and the file read for real.
    assert!(
        bodies[0]["system"]
            .to_string()
            .contains("Answer in one line.")
    );
    let results = tool_results(&bodies);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("pub fn answer()"), "{results:?}");
}

#[tokio::test]
async fn embed_custom_adds_the_host_s_tool_and_approver() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "keep me\n");
    let server = serve_anthropic_replies(&[
        tool_reply("call_1", "open_tickets", json!({"label": "bug"})),
        tool_reply("call_2", "run_command", json!({"command": "rm notes.txt"})),
        text_reply("KEEL-1 is open; I may not delete files."),
    ])
    .await;
    let output = run_example("embed_custom", &repo.path(), &server.uri(), "Tickets?").await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    let bodies = request_bodies(&server).await;
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"open_tickets") && tools.contains(&"read_file"),
        "{tools:?}"
    );
    let results = tool_results(&bodies);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].1.contains("KEEL-1 [bug]") && !results[0].2,
        "{results:?}"
    );
    assert!(!results[0].1.contains("KEEL-2"), "{results:?}");
    // The deletion is gated, and the host's approver said no.
    assert!(results[1].2, "{results:?}");
    assert!(
        results[1].1.contains("the host allows only cargo commands"),
        "{results:?}"
    );
    assert!(repo.path().join("notes.txt").exists());
}

#[tokio::test]
async fn embed_without_a_provider_says_which_variable_to_set() {
    let repo = TempRepo::new();
    let output = run_example_with("embed", &repo.path(), "Hi", &[]).await;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "stderr: {stderr}");
}

#[test]
fn from_env_without_a_provider_is_a_typed_error_naming_the_variables() {
    let err = CodingAgent::from_env_with(|_| None).unwrap_err();
    let BuildError::Provider(ProviderError::Config { message }) = &err else {
        panic!("not a provider configuration error: {err:?}");
    };
    assert!(
        message.contains("ANTHROPIC_API_KEY") && message.contains("OPENAI_BASE_URL"),
        "{message}"
    );
    // A provider named without its key says which variable to set.
    let err =
        CodingAgent::from_env_with(|name| (name == "KEEL_PROVIDER").then(|| "anthropic".into()))
            .unwrap_err();
    assert!(
        matches!(&err, BuildError::Provider(ProviderError::Config { message })
            if message.contains("needs an API key: set ANTHROPIC_API_KEY")),
        "{err}"
    );
}

#[tokio::test]
async fn from_env_with_a_key_and_a_loopback_url_prompts_in_a_new_session() {
    let server = serve_anthropic_replies(&[text_reply("Hello from the loopback.")]).await;
    let home = tempfile::tempdir().unwrap();
    let keel_home = home.path().join(".keel");
    let vars = HashMap::from([
        ("ANTHROPIC_API_KEY", "sk-ant-from-env".to_owned()),
        ("ANTHROPIC_BASE_URL", server.uri()),
        ("HOME", home.path().display().to_string()),
        ("KEEL_HOME", keel_home.display().to_string()),
    ]);
    let agent = CodingAgent::from_env_with(|name| vars.get(name).cloned()).unwrap();
    assert_eq!(
        agent.cwd(),
        std::env::current_dir().unwrap().canonicalize().unwrap()
    );
    assert_eq!(agent.home(), keel_home);
    assert_eq!(agent.model(), "claude-sonnet-4-5");

    let outcome = agent.prompt("Say hello").await.unwrap();
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(outcome.text, "Hello from the loopback.");
    let requests = model_requests(&server).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].headers["x-api-key"], "sk-ant-from-env");
    // A session like any other: saved under keel's home, where resume_latest finds it.
    let session = agent.resume_latest().unwrap();
    assert_eq!(session.history().len(), 2);
}
