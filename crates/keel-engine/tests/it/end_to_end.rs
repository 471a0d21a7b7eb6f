//! End to end: the real back ends parse replies served from wiremock in each provider's wire
//! format, and the agent fixes a bug in a temp git repository with the real tools.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use keel_engine::history::check_pairing;
use keel_engine::{Agent, GitSummary, ProjectContext, Stop, gather_context, system_prompt};
use keel_provider::{
    AnthropicProvider, ApiKey, ContentBlock, OpenAiProvider, Provider, StopReason, ToolUseResponse,
};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::git::TempRepo;
use keel_test_support::mock::{request_bodies, serve_turns};
use keel_test_support::render::{anthropic_sse, openai_sse};
use keel_test_support::scripted::reply;
use serde_json::{Value, json};

/// The model's side of a read → patch → test → answer fix.
fn fix_turns() -> Vec<ToolUseResponse> {
    vec![
        reply(
            vec![
                ContentBlock::text("Let me read the code and run the tests."),
                ContentBlock::tool_use("call_read", "read_file", json!({"path": "src/lib.rs"})),
                ContentBlock::tool_use("call_ls", "list_directory", json!({})),
            ],
            StopReason::ToolUse,
        ),
        reply(
            vec![ContentBlock::tool_use(
                "call_patch",
                "patch_file",
                json!({"path": "src/lib.rs", "old_string": "    a - b", "new_string": "    a + b"}),
            )],
            StopReason::ToolUse,
        ),
        reply(
            vec![ContentBlock::tool_use(
                "call_test",
                "run_command",
                json!({"command": "sh test.sh"}),
            )],
            StopReason::ToolUse,
        ),
        reply(
            vec![ContentBlock::text(
                "Fixed `add` in src/lib.rs: it subtracted. test.sh passes now.",
            )],
            StopReason::EndTurn,
        ),
    ]
}

fn repo() -> TempRepo {
    let repo = TempRepo::new();
    repo.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    );
    repo.write(
        "test.sh",
        "grep -q 'a + b' src/lib.rs && echo 'test add ... ok' || { echo 'test add ... FAILED'; exit 1; }\n",
    );
    repo.write("AGENTS.md", "Run `sh test.sh` to test.\n");
    repo.stage("src/lib.rs");
    repo.stage("test.sh");
    repo.stage("AGENTS.md");
    repo.commit("Add add()");
    repo
}

async fn fix_with(provider: Arc<dyn Provider>, repo: &TempRepo) -> keel_engine::RunOutcome {
    let root = repo.path();
    let context = gather_context(&root, &root);
    let agent = Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .system_prompt(system_prompt(&context))
        .tools(default_tools(&PathSandbox::new(&root).unwrap(), &SandboxPolicy::default()).unwrap())
        .build()
        .unwrap();
    let mut session = agent.session(&root).unwrap();
    let outcome = session.run("test.sh fails; fix it").await;
    check_pairing(session.history()).unwrap();
    outcome
}

fn assert_fixed(repo: &TempRepo, outcome: &keel_engine::RunOutcome) {
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    assert_eq!(outcome.iterations, 4);
    assert!(outcome.text.starts_with("Fixed `add`"), "{}", outcome.text);
    assert!(repo.read("src/lib.rs").contains("a + b"));
}

#[tokio::test]
async fn anthropic_multi_turn_fix() {
    let repo = repo();
    let server = serve_turns(
        "/v1/messages",
        fix_turns().iter().map(anthropic_sse).collect(),
    )
    .await;
    let provider = AnthropicProvider::new(ApiKey::new("sk-ant-test"))
        .unwrap()
        .with_base_url(&server.uri())
        .unwrap();
    let outcome = fix_with(Arc::new(provider), &repo).await;
    assert_fixed(&repo, &outcome);

    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 4);
    // The last request carries the test result as a tool_result, with a cache breakpoint
    // on the newest message.
    let last = bodies[3]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "call_test");
    assert!(
        last["content"][0]["content"]
            .as_str()
            .unwrap()
            .contains("test add ... ok")
    );
    assert_eq!(last["content"][0]["cache_control"]["type"], "ephemeral");
    // The parallel first turn's two results came back together, in order.
    let second_turn = &bodies[1]["messages"][2]["content"];
    assert_eq!(second_turn[0]["tool_use_id"], "call_read");
    assert_eq!(second_turn[1]["tool_use_id"], "call_ls");
}

#[tokio::test]
async fn openai_multi_turn_fix() {
    let repo = repo();
    let server = serve_turns(
        "/v1/chat/completions",
        fix_turns().iter().map(openai_sse).collect(),
    )
    .await;
    let provider = OpenAiProvider::new(
        &format!("{}/v1", server.uri()),
        Some(ApiKey::new("sk-test")),
    )
    .unwrap();
    let outcome = fix_with(Arc::new(provider), &repo).await;
    assert_fixed(&repo, &outcome);

    let bodies = request_bodies(&server).await;
    let messages = bodies[3]["messages"].as_array().unwrap();
    let tool_messages: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 4);
    assert_eq!(tool_messages[3]["tool_call_id"], "call_test");
    assert_eq!(messages[0]["role"], "system");
}

#[tokio::test]
async fn the_first_request_is_small_and_reviewed() {
    let repo = repo();
    let server = serve_turns(
        "/v1/messages",
        vec![anthropic_sse(&reply(
            vec![ContentBlock::text("Hello.")],
            StopReason::EndTurn,
        ))],
    )
    .await;
    let provider = AnthropicProvider::new(ApiKey::new("sk-ant-test"))
        .unwrap()
        .with_base_url(&server.uri())
        .unwrap();
    let root = repo.path();
    let context = ProjectContext {
        cwd: "/home/user/project".into(),
        date: Some("2026-11-22".into()),
        // The engine reads no git state: the host supplies it (keel-agents' project_context).
        git: Some(GitSummary {
            branch: Some("main".into()),
            head: Some("0123abc".into()),
            status: "clean".into(),
            recent_commits: vec!["Add add()".into(), "initial commit".into()],
        }),
        ..gather_context(&root, &root)
    };
    let agent = Agent::builder(Arc::new(provider))
        .model("claude-sonnet-4-5")
        .system_prompt(system_prompt(&context))
        .tools(default_tools(&PathSandbox::new(&root).unwrap(), &SandboxPolicy::default()).unwrap())
        .build()
        .unwrap();
    agent.session(&root).unwrap().run("hello").await;
    let received = server.received_requests().await.unwrap();
    let size = received[0].body.len();
    assert!(size < 20_000, "the first request is {size} bytes");
    let mut body = request_bodies(&server).await.remove(0);
    // The commit id differs per run.
    let system = body["system"][0]["text"].as_str().unwrap().to_owned();
    body["system"][0]["text"] = Value::String(repo.redact_commits(&system));
    insta::assert_json_snapshot!("first_request", body);
}

fn anthropic_at(base: &str) -> Arc<dyn Provider> {
    Arc::new(
        AnthropicProvider::new(ApiKey::new("sk-ant-test"))
            .unwrap()
            .with_base_url(base)
            .unwrap()
            .with_retry_policy(keel_provider::RetryPolicy::default().with_backoff(
                std::time::Duration::from_millis(10),
                std::time::Duration::from_millis(20),
            )),
    )
}

fn plain_agent(provider: Arc<dyn Provider>) -> Agent {
    Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_recorded_refusal_ends_the_run_refused() {
    let server = keel_test_support::mock::serve_sse(
        "/v1/messages",
        keel_test_support::wire::wire_bytes("anthropic/refusal_response.sse"),
    )
    .await;
    let outcome = plain_agent(anthropic_at(&server.uri()))
        .session(".")
        .unwrap()
        .run("something bad")
        .await;
    assert!(matches!(outcome.stop, Stop::Refused { .. }), "{outcome:?}");
    assert!(!outcome.text.is_empty());
}

#[tokio::test]
async fn an_overloaded_service_shows_as_retry_events() {
    use futures::StreamExt;
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(keel_test_support::mock::error_response(
            529,
            "overloaded_error",
            "Overloaded",
        ))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(keel_test_support::mock::sse_response(
            keel_test_support::wire::wire_bytes("anthropic/basic_response.sse"),
        ))
        .with_priority(2)
        .mount(&server)
        .await;
    let mut session = plain_agent(anthropic_at(&server.uri()))
        .session(".")
        .unwrap();
    let events: Vec<keel_engine::AgentEvent> = session.run_streaming("hi").collect().await;
    let retries = events
        .iter()
        .filter(|e| matches!(e, keel_engine::AgentEvent::Retrying { .. }))
        .count();
    assert_eq!(retries, 2);
    let keel_engine::AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!()
    };
    assert_eq!(outcome.text, "Hello there!");
}

#[tokio::test]
async fn cancelling_a_stalled_stream_then_the_next_prompt_works() {
    use keel_test_support::raw_http::{Ending, RawHttpServer, RawResponse};
    let recorded = String::from_utf8(keel_test_support::wire::wire_bytes(
        "anthropic/basic_response.sse",
    ))
    .unwrap();
    let events: Vec<Vec<u8>> = recorded
        .split("\n\n")
        .map(|e| format!("{e}\n\n").into_bytes())
        .collect();
    let server = RawHttpServer::start(vec![
        // "Hello", then silence.
        RawResponse::sse(events[..4].to_vec(), Ending::Hang),
        RawResponse::sse(events.clone(), Ending::Complete),
    ])
    .await;
    let mut session = plain_agent(anthropic_at(&server.url()))
        .session(".")
        .unwrap();
    let handle = session.cancel_handle();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        handle.cancel();
    });
    let outcome = session.run("hi").await;
    assert_eq!(outcome.stop, Stop::Cancelled);
    assert_eq!(session.history().last().unwrap().text(), "Hello");
    let outcome = session.run("again").await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(outcome.text, "Hello there!");
}

#[tokio::test]
async fn a_session_start_writes_nothing_to_the_users_repository() {
    let repo = repo();
    repo.write("src/lib.rs", "// work in progress\n");
    repo.write("new.txt", "untracked\n");
    let status_before = repo.status();
    let agent = Agent::builder(Arc::new(
        keel_test_support::scripted::ScriptedProvider::new(),
    ))
    .model("m")
    .build()
    .unwrap();
    let session = agent.session(repo.path()).unwrap();
    let refs: Vec<String> = repo
        .repo()
        .references_glob("refs/keel/*")
        .unwrap()
        .map(|r| r.unwrap().name().unwrap().to_owned())
        .collect();
    // Snapshots live in keel's own store (`AgentBuilder::snapshots`), never under the
    // user's refs; the work tree and index are untouched.
    assert!(refs.is_empty(), "{refs:?} ({})", session.id());
    assert_eq!(repo.status(), status_before);
    assert_eq!(repo.read("src/lib.rs"), "// work in progress\n");
}
