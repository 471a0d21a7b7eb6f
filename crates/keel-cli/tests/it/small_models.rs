//! Small local models: `keel exec --tools lean` sends a first request of at most 6 KB; keel
//! asks a local server what context window it serves (Ollama's `/api/show`, llama.cpp's
//! `/props`, vLLM's listing, in their documented shapes), takes the lean tools for a small one
//! and says so, and warns, naming the fix for that server, when the first request would not
//! fit; garbage, a huge answer or a slow server invent nothing. `--tools`, `[tools] profile`
//! and `-p --tools` are checked, and a cloned project may only narrow the tools to lean.
//!
//! The servers' shapes: Ollama's docs/api.md and docs/openapi.yaml (`ShowResponse`:
//! `parameters` text such as `"temperature 0.7\nnum_ctx 2048"`, `model_info` with
//! `<arch>.context_length`), llama.cpp's tools/server/README.md ("GET /props":
//! `default_generation_settings.n_ctx`), vLLM's vllm/entrypoints/openai/models/serving.py
//! (`show_available_models`: cards with `max_model_len`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::request_bodies;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PROMPT: &str = "What does answer() return?";
const MODEL: &str = "qwen3:8b";

/// Ollama's `/api/show` answer for `MODEL` with `parameters` (docs/openapi.yaml's shape).
async fn ollama(server: &MockServer, parameters: &str) {
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "parameters": parameters,
            "license": "Apache License 2.0",
            "capabilities": ["completion", "tools", "thinking"],
            "details": {"parent_model": "", "format": "gguf", "family": "qwen3",
                        "families": ["qwen3"], "parameter_size": "8.2B",
                        "quantization_level": "Q4_K_M"},
            "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960,
                           "qwen3.block_count": 36}
        })))
        .mount(server)
        .await;
}

/// Runs `keel exec` with `args` (then the prompt) on `server` as an OpenAI-compatible server
/// in `repo`: the exit code, stderr, and the first model request's body as received.
async fn exec(
    home: &Home,
    repo: &TempRepo,
    server: &MockServer,
    args: &[&str],
) -> (Option<i32>, String, Option<Vec<u8>>) {
    let mut command = home.keel_openai(server);
    command
        .current_dir(repo.path())
        .args(["exec", "--model", MODEL])
        .args(args)
        .arg(PROMPT);
    let output = run(command).await;
    let first = server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .find(|request| request.url.path() == "/v1/chat/completions")
        .map(|request| request.body);
    (output.status.code(), stderr(&output), first)
}

fn tool_names(body: &[u8]) -> Vec<String> {
    let body: Value = serde_json::from_slice(body).unwrap();
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The lean tools, as offered (sorted by name).
fn lean_tools() -> Vec<String> {
    let mut names: Vec<String> = keel::sandbox::LEAN_TOOLS.map(str::to_owned).to_vec();
    names.sort();
    names
}

#[tokio::test]
async fn the_lean_first_request_is_at_most_6_kb() {
    let repo = TempRepo::with_delegates();
    let home = Home::new();
    let server = openai_server(&[text("42")]).await;
    let (code, err, lean) = exec(&home, &repo, &server, &["--tools", "lean"]).await;
    assert_eq!(code, Some(0), "{err}");
    let lean = lean.unwrap();
    assert_eq!(tool_names(&lean), lean_tools());
    assert!(
        lean.len() <= 6_000,
        "the lean first request is {} bytes",
        lean.len()
    );

    let server = openai_server(&[text("42")]).await;
    let (code, err, full) = exec(&home, &repo, &server, &["--tools", "full"]).await;
    assert_eq!(code, Some(0), "{err}");
    let full = full.unwrap();
    assert!(tool_names(&full).contains(&"spawn_agent".to_owned()));
    assert!(
        lean.len() * 3 < full.len(),
        "lean {} bytes, full {} bytes",
        lean.len(),
        full.len()
    );
    // Neither profile said anything about a window: the server said nothing of one.
    assert!(!err.contains("context window"), "{err}");
}

#[tokio::test]
async fn an_ollama_serving_a_small_window_gets_the_lean_tools_and_keel_says_so() {
    let repo = TempRepo::with_delegates();
    let home = Home::new();
    let server = openai_server(&[text("42")]).await;
    ollama(&server, "temperature 0.7\nnum_ctx 8192").await;
    let (code, err, body) = exec(&home, &repo, &server, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(tool_names(&body.unwrap()), lean_tools());
    assert_eq!(
        err.lines()
            .filter(|line| line.contains("context window"))
            .collect::<Vec<_>>(),
        [
            "keel: lean tools (six, briefly described, no delegation) for qwen3:8b's context \
             window of 8,192 tokens (Ollama: num_ctx in the model's parameters); --tools full \
             offers every tool"
        ],
        "{err}"
    );
    // A large window: the full set, nothing said.
    let server = openai_server(&[text("42")]).await;
    ollama(&server, "num_ctx 40960").await;
    let (code, err, body) = exec(&home, &repo, &server, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(tool_names(&body.unwrap()).contains(&"code".to_owned()));
    assert!(!err.contains("context window"), "{err}");
}

/// The warning line of `err`, the one naming the context window.
fn warning(err: &str) -> String {
    let lines: Vec<&str> = err
        .lines()
        .filter(|line| line.starts_with("keel: warning: the first request"))
        .collect();
    assert_eq!(lines.len(), 1, "one warning: {err}");
    // The estimate depends on the temp directory's name in the prompt: a number.
    let estimate = regex::Regex::new(r"about [0-9,]+ tokens").unwrap();
    estimate.replace(lines[0], "about N tokens").into_owned()
}

#[tokio::test]
async fn the_warning_names_the_window_the_estimate_and_the_fix_for_each_server() {
    let repo = TempRepo::with_delegates();
    let home = Home::new();

    // Ollama, num_ctx 2048, the full tools asked for.
    let server = openai_server(&[text("42")]).await;
    ollama(&server, "num_ctx 2048").await;
    let (code, err, _) = exec(&home, &repo, &server, &["--tools", "full"]).await;
    assert_eq!(code, Some(0), "a warning stops nothing: {err}");
    assert_eq!(
        warning(&err),
        "keel: warning: the first request is about N tokens, more than qwen3:8b's context \
         window of 2,048 tokens (Ollama: num_ctx in the model's parameters): the server will \
         cut it or refuse it; use --tools lean, or raise num_ctx (PARAMETER num_ctx in a \
         Modelfile) or OLLAMA_CONTEXT_LENGTH on the server"
    );

    // llama.cpp's llama-server (its /props; Ollama's /api/show is a 404 there).
    let server = openai_server(&[text("42")]).await;
    Mock::given(method("GET"))
        .and(path("/props"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": 2048,
                                            "speculative": false, "is_processing": false},
            "total_slots": 1,
            "model_path": "../models/Qwen3-8B-Q4_K_M.gguf",
            "chat_template": "...",
            "build_info": "b(build number)-(build commit hash)"
        })))
        .mount(&server)
        .await;
    let (code, err, _) = exec(&home, &repo, &server, &["--tools", "full"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        warning(&err).ends_with(
            "(llama.cpp: a slot's n_ctx): the server will cut it or refuse it; use --tools \
             lean, or restart llama-server with a larger -c (or fewer --parallel slots)"
        ),
        "{err}"
    );

    // vLLM (its model listing; the other two are 404s).
    let server = openai_server(&[text("42")]).await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [{"id": MODEL, "object": "model", "created": 1735142223,
                      "owned_by": "vllm", "root": MODEL, "parent": null,
                      "max_model_len": 2048, "permission": [{}]}]
        })))
        .mount(&server)
        .await;
    let (code, err, _) = exec(&home, &repo, &server, &["--tools", "full"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        warning(&err).ends_with(
            "(vLLM: max_model_len): the server will cut it or refuse it; use --tools lean, or \
             restart vLLM with a larger --max-model-len"
        ),
        "{err}"
    );

    // Lean already, and still too large: the server's fix alone.
    let server = openai_server(&[text("42")]).await;
    ollama(&server, "num_ctx 512").await;
    let (code, err, body) = exec(&home, &repo, &server, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(tool_names(&body.unwrap()), lean_tools());
    assert!(
        warning(&err).ends_with(
            "the server will cut it or refuse it; raise num_ctx (PARAMETER num_ctx in a \
             Modelfile) or OLLAMA_CONTEXT_LENGTH on the server"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn hostile_servers_invent_no_window() {
    let repo = TempRepo::with_delegates();
    let home = Home::new();
    let huge = format!(
        "{{\"parameters\": \"num_ctx 1024\", \"model_info\": {{}}, \"license\": \"{}\"}}",
        "x".repeat(2 << 20)
    );
    let answers = [
        // Garbage with a success status, on every question.
        ResponseTemplate::new(200)
            .set_body_raw(b"\x00\xff<html>num_ctx 1024".to_vec(), "text/html"),
        // An answer in Ollama's shape, too large to be read.
        ResponseTemplate::new(200).set_body_raw(huge.into_bytes(), "application/json"),
        // The right answer, long after the probe gave up (1 s).
        ResponseTemplate::new(200)
            .set_body_json(json!({"parameters": "num_ctx 1024", "model_info": {}}))
            .set_delay(Duration::from_secs(4)),
    ];
    for answer in answers {
        let server = openai_server(&[text("42")]).await;
        Mock::given(method("POST"))
            .and(path("/api/show"))
            .respond_with(answer.clone())
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .respond_with(answer)
            .mount(&server)
            .await;
        let (code, err, body) = exec(&home, &repo, &server, &[]).await;
        assert_eq!(code, Some(0), "{err}");
        assert!(!err.contains("context window"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(tool_names(&body.unwrap()).contains(&"code".to_owned()));
    }
}

#[tokio::test]
async fn bad_tool_sets_are_one_line() {
    let repo = TempRepo::with_delegates();
    let home = Home::new();
    let server = openai_server(&[text("42")]).await;
    let (code, err, _) = exec(&home, &repo, &server, &["--tools", "tiny"]).await;
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "keel: --tools tiny: no such tool set; use lean (six tools, for small models) or full \
         (every tool)"
    );
    let mut command = home.keel_openai(&server);
    command
        .current_dir(repo.path())
        .args(["exec", PROMPT, "--tools"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output).trim_end(),
        "keel: --tools needs a tool set; use lean (six tools, for small models) or full \
         (every tool)"
    );
    home.write_config("[tools]\nprofile = \"tiny\"\n");
    let (code, err, _) = exec(&home, &repo, &server, &[]).await;
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "config.toml:2: bad value `tiny` for `tools.profile`; allowed values: full, lean"
        ),
        "{err}"
    );
    assert!(request_bodies(&server).await.is_empty());
}

/// `keel -p --tools TOOLS` on a fresh server: the exit code, stderr and the model requests.
async fn print_mode(
    home: &Home,
    repo: &TempRepo,
    tools: &str,
) -> (Option<i32>, String, Vec<Value>) {
    let server = openai_server(&[text("42")]).await;
    let mut command = home.keel_openai(&server);
    command
        .current_dir(repo.path())
        .args(["-p", "--model", MODEL, "--tools", tools, PROMPT]);
    let output = run(command).await;
    let bodies = request_bodies(&server).await;
    (output.status.code(), stderr(&output), bodies)
}

#[tokio::test]
async fn print_mode_takes_default_and_lean_and_refuses_the_rest_in_one_line() {
    let repo = TempRepo::with_delegates();
    let home = Home::new();
    for (value, lean) in [("lean", true), ("default", false)] {
        let (code, err, bodies) = print_mode(&home, &repo, value).await;
        assert_eq!(code, Some(0), "{err}");
        let body = serde_json::to_vec(&bodies[0]).unwrap();
        assert_eq!(tool_names(&body) == lean_tools(), lean, "--tools {value}");
    }
    for value in ["Bash,Read", "full", ""] {
        let (code, err, bodies) = print_mode(&home, &repo, value).await;
        assert_eq!(code, Some(2), "{value}");
        assert_eq!(
            err.trim_end(),
            "keel: --tools: keel offers its whole tool set (`default`) or the lean one for \
             small models (`lean`); narrow it with --disallowedTools",
            "{value}"
        );
        assert!(bodies.is_empty());
    }
}

#[tokio::test]
async fn a_cloned_project_may_narrow_the_tools_to_lean_and_nothing_more() {
    let repo = TempRepo::with_delegates();
    let home = Home::new();

    // Lean from the project: six tools, no notice; the model's destructive call is still
    // refused (exec's approvals), the file still there.
    repo.write(".keel/config.toml", "[tools]\nprofile = \"lean\"\n");
    let server = openai_server(&[
        tool_call("t1", "run_command", json!({"command": "rm -rf src"})),
        text("I could not delete it."),
    ])
    .await;
    let (code, err, body) = exec(&home, &repo, &server, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(tool_names(&body.unwrap()), lean_tools());
    assert!(!err.contains("ignored"), "{err}");
    assert!(repo.path().join("src/lib.rs").exists());
    let bodies = request_bodies(&server).await;
    let result = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        result["content"].as_str().unwrap().contains("denied")
            || result["content"].as_str().unwrap().contains("refused"),
        "{result}"
    );

    // Full from an untrusted project: ignored, named, and the small window still chooses.
    repo.write(".keel/config.toml", "[tools]\nprofile = \"full\"\n");
    let server = openai_server(&[text("42")]).await;
    ollama(&server, "num_ctx 8192").await;
    let (code, err, body) = exec(&home, &repo, &server, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(tool_names(&body.unwrap()), lean_tools());
    assert!(
        err.contains("ignored tools.profile = \"full\"") && err.contains("keel trust"),
        "{err}"
    );
    // Nor does it win over the user's lean.
    home.write_config("[tools]\nprofile = \"lean\"\n");
    let server = openai_server(&[text("42")]).await;
    let (_, err, body) = exec(&home, &repo, &server, &[]).await;
    assert_eq!(tool_names(&body.unwrap()), lean_tools(), "{err}");
    // Trusted (for this run), it chooses full; a flag still wins over it.
    let server = openai_server(&[text("42")]).await;
    ollama(&server, "num_ctx 8192").await;
    let (_, err, body) = exec(&home, &repo, &server, &["--trust-project"]).await;
    assert!(
        tool_names(&body.unwrap()).contains(&"code".to_owned()),
        "{err}"
    );
    let server = openai_server(&[text("42")]).await;
    let (_, err, body) = exec(
        &home,
        &repo,
        &server,
        &["--trust-project", "--tools", "lean"],
    )
    .await;
    assert_eq!(tool_names(&body.unwrap()), lean_tools(), "{err}");
}

#[tokio::test]
async fn keel_config_names_the_tool_set_and_what_chose_it() {
    let repo = TempRepo::with_delegates();
    let home = Home::new();
    let line = |args: &[&str]| {
        let mut command = home.keel();
        command
            .current_dir(repo.path())
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
            .arg("config")
            .args(args);
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let out = stdout(&output).replace(&repo.path().display().to_string(), "<repo>");
        out.lines()
            .find(|line| line.starts_with("tools "))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line(&[]),
        "tools full, or lean for a model whose context window is 32,768 tokens or less (default)"
    );
    assert_eq!(line(&["--tools", "lean"]), "tools lean (--tools)");
    repo.write(".keel/config.toml", "[tools]\nprofile = \"lean\"\n");
    assert_eq!(line(&[]), "tools lean (<repo>/.keel/config.toml)");
}
