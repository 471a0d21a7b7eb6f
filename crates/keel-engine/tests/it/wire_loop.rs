//! The loop's failure paths over the real back ends: every scenario is served from wiremock
//! in the Anthropic and in the OpenAI wire format and parsed by the real provider.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keel_engine::history::check_pairing;
use keel_engine::{Agent, AgentEvent, AllowAll, Session, Stop};
use keel_provider::{
    AnthropicProvider, ApiKey, ContentBlock, OpenAiProvider, Provider, StopReason, ToolUseResponse,
};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::mock::{request_bodies, serve_turns};
use keel_test_support::render::{anthropic_sse, openai_sse};
use keel_test_support::scripted::reply;
use keel_test_support::scripted::tool_results;
use keel_test_support::wire::wire_bytes;
use serde_json::{Value, json};
use wiremock::MockServer;

#[derive(Clone, Copy, Debug)]
enum Wire {
    Anthropic,
    OpenAi,
}

const WIRES: [Wire; 2] = [Wire::Anthropic, Wire::OpenAi];

impl Wire {
    fn route(self) -> &'static str {
        match self {
            Wire::Anthropic => "/v1/messages",
            Wire::OpenAi => "/v1/chat/completions",
        }
    }

    fn render(self, reply: &ToolUseResponse) -> String {
        match self {
            Wire::Anthropic => anthropic_sse(reply),
            Wire::OpenAi => openai_sse(reply),
        }
    }

    async fn serve(self, turns: &[ToolUseResponse]) -> MockServer {
        serve_turns(self.route(), turns.iter().map(|t| self.render(t)).collect()).await
    }

    fn provider(self, server: &MockServer) -> Arc<dyn Provider> {
        match self {
            Wire::Anthropic => Arc::new(
                AnthropicProvider::new(ApiKey::new("sk-ant-test"))
                    .unwrap()
                    .with_base_url(&server.uri())
                    .unwrap(),
            ),
            Wire::OpenAi => Arc::new(
                OpenAiProvider::new(&format!("{}/v1", server.uri()), Some(ApiKey::new("sk")))
                    .unwrap(),
            ),
        }
    }
}

/// Every request the server received keeps the pairing invariant, in keel's own terms: the
/// history the engine sent is re-derived from the session and checked, and each wire body
/// answers every call it made.
async fn assert_wire_paired(wire: Wire, server: &MockServer) {
    for body in request_bodies(server).await {
        let messages = body["messages"].as_array().unwrap();
        let mut open: Vec<String> = Vec::new();
        for message in messages {
            match wire {
                Wire::Anthropic => {
                    let blocks = message["content"].as_array().cloned().unwrap_or_default();
                    let results: Vec<String> = blocks
                        .iter()
                        .filter(|b| b["type"] == "tool_result")
                        .map(|b| b["tool_use_id"].as_str().unwrap().to_owned())
                        .collect();
                    assert_eq!(
                        std::mem::take(&mut open),
                        results,
                        "each call answered once, in the next message"
                    );
                    open = blocks
                        .iter()
                        .filter(|b| b["type"] == "tool_use")
                        .map(|b| b["id"].as_str().unwrap().to_owned())
                        .collect();
                }
                Wire::OpenAi => {
                    if message["role"] == "tool" {
                        let id = message["tool_call_id"].as_str().unwrap();
                        assert_eq!(open.first().map(String::as_str), Some(id));
                        open.remove(0);
                        continue;
                    }
                    assert!(open.is_empty(), "unanswered calls: {open:?}");
                    open = message["tool_calls"]
                        .as_array()
                        .map(|calls| {
                            calls
                                .iter()
                                .map(|c| c["id"].as_str().unwrap().to_owned())
                                .collect()
                        })
                        .unwrap_or_default();
                }
            }
        }
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct MakeFileArgs {
    /// File name.
    filename: String,
    /// Lines to write.
    lines_of_text: Vec<String>,
}

/// The tool the recorded cut-off call asks for; writes the file if it ever runs.
struct MakeFile(std::path::PathBuf);

impl keel_tool::Tool for MakeFile {
    type Args = MakeFileArgs;
    const NAME: &'static str = "make_file";
    fn description(&self) -> &str {
        "Writes a file."
    }
    async fn call(
        &self,
        args: MakeFileArgs,
        _ctx: &keel_tool::ToolContext,
    ) -> Result<keel_tool::ToolOutput, keel_tool::ToolError> {
        std::fs::write(self.0.join(&args.filename), args.lines_of_text.join("\n")).unwrap();
        Ok(keel_tool::ToolOutput::text("written"))
    }
}

fn session(provider: Arc<dyn Provider>, dir: &std::path::Path, allow_all: bool) -> Session {
    let mut tools =
        default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default()).unwrap();
    tools.register(MakeFile(dir.to_path_buf())).unwrap();
    let builder = Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(tools)
        .max_iterations(5);
    let builder = if allow_all {
        builder.approver(AllowAll)
    } else {
        builder
    };
    builder.build().unwrap().session(dir).unwrap()
}

fn results(session: &Session) -> Vec<(String, bool)> {
    tool_results(session.history())
}

fn calls(blocks: Vec<ContentBlock>) -> ToolUseResponse {
    reply(blocks, StopReason::ToolUse)
}

fn text(text: &str) -> ToolUseResponse {
    reply(vec![ContentBlock::text(text)], StopReason::EndTurn)
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "beta\n").unwrap();
    std::fs::create_dir_all(dir.path().join("build")).unwrap();
    dir
}

#[tokio::test]
async fn parallel_reads_denial_unknown_tool_then_an_answer() {
    for wire in WIRES {
        let dir = workspace();
        let turns = [
            calls(vec![
                ContentBlock::tool_use("c1", "read_file", json!({"path": "a.txt"})),
                ContentBlock::tool_use("c2", "read_file", json!({"path": "b.txt"})),
                ContentBlock::tool_use("c3", "grep", json!({"pattern": "beta"})),
            ]),
            calls(vec![ContentBlock::tool_use(
                "c4",
                "run_command",
                json!({"command": "rm -rf build"}),
            )]),
            calls(vec![ContentBlock::tool_use("c5", "edit_file", json!({}))]),
            text("Read both files; deleting build was denied."),
        ];
        let server = wire.serve(&turns).await;
        let mut session = session(wire.provider(&server), dir.path(), false);
        let outcome = session.run("look around").await;
        assert_eq!(outcome.stop, Stop::Completed, "{wire:?}: {}", outcome.text);
        let results = results(&session);
        assert_eq!(results.len(), 5, "{wire:?}");
        assert!(
            results[0].0.contains("alpha") && results[1].0.contains("beta"),
            "{wire:?}"
        );
        assert!(
            results[2].0.contains("b.txt:1:beta"),
            "{wire:?}: {:?}",
            results[2]
        );
        assert!(
            results[3].0.starts_with("denied: ") && results[3].1,
            "{wire:?}"
        );
        assert!(dir.path().join("build").exists(), "{wire:?}");
        assert!(
            results[4].0.contains("unknown tool \"edit_file\""),
            "{wire:?}"
        );
        check_pairing(session.history()).unwrap();
        assert_wire_paired(wire, &server).await;
    }
}

#[tokio::test]
async fn the_recorded_cut_off_call_is_never_run() {
    // Anthropic's own recording of a tool call cut by max_tokens, verbatim, then an answer.
    let dir = workspace();
    let server = serve_turns(
        Wire::Anthropic.route(),
        vec![
            String::from_utf8(wire_bytes("anthropic/incomplete_partial_json_response.sse"))
                .unwrap(),
            anthropic_sse(&text("I will resend it whole.")),
        ],
    )
    .await;
    let mut session = session(Wire::Anthropic.provider(&server), dir.path(), true);
    let outcome = session.run("write the tax guide").await;
    assert_eq!(outcome.stop, Stop::Completed);
    let results = results(&session);
    assert_eq!(results.len(), 1);
    assert!(results[0].0.contains("cut off"), "{:?}", results[0]);
    assert!(!dir.path().join("taxes.txt").exists());
    assert_wire_paired(Wire::Anthropic, &server).await;
    // The second request sent the cut call back with an empty object as its input.
    let bodies = request_bodies(&server).await;
    let assistant = &bodies[1]["messages"][1];
    assert_eq!(assistant["content"][1]["input"], json!({}));
}

#[tokio::test]
async fn max_iterations_with_the_warning_over_the_wire() {
    for wire in WIRES {
        let dir = workspace();
        let turns: Vec<ToolUseResponse> = (0..6)
            .map(|i| {
                calls(vec![ContentBlock::tool_use(
                    format!("r{i}"),
                    "read_file",
                    json!({"path": "a.txt"}),
                )])
            })
            .collect();
        let server = wire.serve(&turns).await;
        let mut session = session(wire.provider(&server), dir.path(), true);
        let events: Vec<AgentEvent> = session.run_streaming("loop").collect().await;
        assert!(
            events.contains(&AgentEvent::IterationWarning { used: 4, limit: 5 }),
            "{wire:?}"
        );
        let AgentEvent::Finished(outcome) = events.last().unwrap() else {
            panic!()
        };
        assert_eq!(outcome.stop, Stop::MaxIterations, "{wire:?}");
        assert_eq!(request_bodies(&server).await.len(), 5, "{wire:?}");
        assert_wire_paired(wire, &server).await;
    }
}

#[tokio::test]
async fn cancel_mid_tool_then_the_next_prompt_over_the_wire() {
    for wire in WIRES {
        let dir = workspace();
        let turns = [
            calls(vec![
                ContentBlock::tool_use("s1", "run_command", json!({"command": "sleep 30"})),
                ContentBlock::tool_use("s2", "read_file", json!({"path": "a.txt"})),
            ]),
            text("Back again."),
        ];
        let server = wire.serve(&turns).await;
        let mut session = session(wire.provider(&server), dir.path(), true);
        let handle = session.cancel_handle();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            handle.cancel();
        });
        let outcome = session.run("wait a bit").await;
        assert_eq!(outcome.stop, Stop::Cancelled, "{wire:?}");
        let results = results(&session);
        // `sleep` is read-only, so both calls ran together: the read finished at once, the
        // sleep was interrupted. Each call has its one result.
        assert_eq!(results.len(), 2, "{wire:?}");
        assert_eq!(
            results[0],
            ("interrupted by the user".to_owned(), true),
            "{wire:?}"
        );
        let outcome = session.run("are you there?").await;
        assert_eq!(outcome.stop, Stop::Completed, "{wire:?}");
        assert_eq!(outcome.text, "Back again.");
        assert_wire_paired(wire, &server).await;
        let bodies: Vec<Value> = request_bodies(&server).await;
        assert_eq!(bodies.len(), 2);
    }
}

#[tokio::test]
async fn a_stream_error_echoing_the_key_is_scrubbed_from_the_outcome_events_and_session_file() {
    const KEY: &str = "sk-live-0123456789-SECRET-abcdef";
    for wire in WIRES {
        // The error each back end sends inside a 200 stream, echoing the key.
        let body = match wire {
            Wire::Anthropic => format!(
                "event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key {KEY}\"}}}}\n\n"
            ),
            Wire::OpenAi => format!(
                "data: {{\"error\":{{\"message\":\"Incorrect API key provided: {KEY}\",\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}}}\n\n"
            ),
        };
        let server = serve_turns(wire.route(), vec![body]).await;
        let provider: Arc<dyn Provider> = match wire {
            Wire::Anthropic => Arc::new(
                AnthropicProvider::new(ApiKey::new(KEY))
                    .unwrap()
                    .with_base_url(&server.uri())
                    .unwrap(),
            ),
            Wire::OpenAi => Arc::new(
                OpenAiProvider::new(&format!("{}/v1", server.uri()), Some(ApiKey::new(KEY)))
                    .unwrap(),
            ),
        };
        let home = tempfile::tempdir().unwrap();
        let dir = workspace();
        let mut session = Agent::builder(provider)
            .model("claude-sonnet-4-5")
            .session_store(Arc::new(keel_engine::JsonlSessionStore::new(home.path())))
            .build()
            .unwrap()
            .session(dir.path())
            .unwrap();
        let events: Vec<AgentEvent> = session.run_streaming("hi").collect().await;
        let AgentEvent::Finished(outcome) = events.last().unwrap() else {
            panic!("{wire:?}: the last event is Finished");
        };
        assert!(
            matches!(outcome.stop, Stop::Failed { .. }),
            "{wire:?}: {outcome:?}"
        );
        assert!(
            outcome.text.contains("[redacted]"),
            "{wire:?}: {}",
            outcome.text
        );
        let shown = format!("{events:?}");
        assert!(!shown.contains(KEY), "{wire:?}: {shown}");
        let mut saved = String::new();
        for entry in std::fs::read_dir(home.path()).unwrap() {
            saved.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default());
        }
        assert!(
            saved.contains("[redacted]"),
            "{wire:?}: the outcome is saved: {saved}"
        );
        assert!(!saved.contains(KEY), "{wire:?}: {saved}");
    }
}
