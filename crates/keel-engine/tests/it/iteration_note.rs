//! The model is told how many calls it has left once the run reaches 80 % of its iteration
//! limit, and an approver in a read-only mode refuses every call that would change something.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use keel_engine::{Agent, AllowAll, ApprovalRequest, Approver, Decision, Stop};
use keel_provider::{CompletionRequest, ContentBlock, Role};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::ScriptedProvider;
use keel_tool::ToolRegistry;
use serde_json::json;

fn tools(dir: &std::path::Path) -> ToolRegistry {
    default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default()).unwrap()
}

/// The text blocks of a request's last message, when it is the user's.
fn last_user_texts(request: &CompletionRequest) -> Vec<String> {
    let last = request.messages.last().unwrap();
    if last.role != Role::User {
        return Vec::new();
    }
    last.content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn from_80_percent_of_the_limit_each_request_tells_the_model_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let provider = (0..12).fold(ScriptedProvider::new(), |p, i| {
        p.then_tool_call(&format!("t{i}"), "read_file", json!({"path": "a.txt"}))
    });
    let provider = Arc::new(provider);
    let agent = Agent::builder(provider.clone())
        .model("m")
        .tools(tools(dir.path()))
        .max_iterations(10)
        .approver(AllowAll)
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    let outcome = session.run("loop").await;
    assert_eq!(outcome.stop, Stop::MaxIterations);
    let requests = provider.requests();
    assert_eq!(requests.len(), 10);
    for (index, request) in requests.iter().enumerate().take(8) {
        assert!(
            !last_user_texts(request)
                .iter()
                .any(|t| t.contains("note from keel")),
            "request {} has the note too early",
            index + 1
        );
    }
    assert_eq!(
        last_user_texts(&requests[8]),
        [
            "[note from keel: this is model call 9 of 10 in this run; 1 left after this one. \
             Wrap up: finish the task, or say what is done and what remains.]"
        ]
    );
    assert!(last_user_texts(&requests[9])[0].contains("model call 10 of 10 in this run; 0 left"));
    // The note is in the requests only: the history (and so the session file) has none.
    let body = serde_json::to_string(session.history()).unwrap();
    assert!(!body.contains("note from keel"), "{body}");
    // It reaches the wire too: the request as the provider encodes it.
    let wire = serde_json::to_string(&requests[8]).unwrap();
    assert!(wire.contains("1 left after this one"));
}

/// Allows every asked call, but refuses changes: a read-only mode.
struct ReadOnlyMode;

#[async_trait::async_trait]
impl Approver for ReadOnlyMode {
    async fn approve(&self, _request: &ApprovalRequest) -> Decision {
        Decision::Allow
    }

    fn refuses_changes(&self) -> Option<String> {
        Some("refused: the session is in read-only mode".into())
    }
}

#[tokio::test]
async fn an_approver_in_a_read_only_mode_refuses_a_write_and_allows_a_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call(
                "w",
                "write_file",
                json!({"path": "new.txt", "content": "x"}),
            )
            .then_tool_call("r", "read_file", json!({"path": "a.txt"}))
            .then_text("done"),
    );
    let agent = Agent::builder(provider.clone())
        .model("m")
        .tools(tools(dir.path()))
        .approver(ReadOnlyMode)
        .build()
        .unwrap();
    let outcome = agent.session(dir.path()).unwrap().run("go").await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert!(!dir.path().join("new.txt").exists());
    let requests = provider.requests();
    let body = serde_json::to_string(&requests[1].messages).unwrap();
    assert!(body.contains("read-only mode"), "{body}");
    let body = serde_json::to_string(&requests[2].messages).unwrap();
    assert!(body.contains("\"a\\n\"") || body.contains("a\\n"), "{body}");
}
