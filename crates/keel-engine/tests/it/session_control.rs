//! What hosts steer between runs: the model, compaction on demand, and the messages a run
//! adds, reported as they are added.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures::StreamExt;
use keel_engine::compaction::SUMMARY_HEADER;
use keel_engine::history::check_pairing;
use keel_engine::{
    Agent, AgentEvent, CompactionError, CompactionPolicy, MemorySessionStore, SessionStore, Stop,
};
use keel_provider::{ContentBlock, Role};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

fn agent(model: ScriptedProvider, dir: &std::path::Path) -> (Agent, Arc<MemorySessionStore>) {
    let store = Arc::new(MemorySessionStore::new());
    let agent = Agent::builder(Arc::new(model))
        .model("claude-sonnet-4-5")
        .tools(default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default()).unwrap())
        .session_store(store.clone())
        .compaction(CompactionPolicy {
            keep_recent_messages: 2,
            ..CompactionPolicy::default()
        })
        .build()
        .unwrap();
    (agent, store)
}

#[tokio::test]
async fn each_added_message_is_reported_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let model = ScriptedProvider::new()
        .then_tool_call("call_1", "read_file", json!({"path": "a.txt"}))
        .then_text("It says alpha.");
    let (agent, _) = agent(model, dir.path());
    let mut session = agent.session(dir.path()).unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("Read a.txt").collect().await;
    let added: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::MessageAdded { message } => Some(message.clone()),
            _ => None,
        })
        .collect();
    // Everything after the prompt, exactly as the history holds it.
    assert_eq!(added.as_slice(), &session.history()[1..]);
    let roles: Vec<Role> = added.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::Assistant, Role::User, Role::Assistant]);
    assert!(matches!(
        &added[1].content[0],
        ContentBlock::ToolResult { tool_use_id, is_error: false, .. } if tool_use_id == "call_1"
    ));
    // A result is reported after its call finished, and the run's end comes last.
    let finished = events
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolCallFinished { .. }))
        .unwrap();
    let results = events
        .iter()
        .position(
            |e| matches!(e, AgentEvent::MessageAdded { message } if message.role == Role::User),
        )
        .unwrap();
    assert!(finished < results);
    assert!(matches!(events.last(), Some(AgentEvent::Finished(_))));
}

#[tokio::test]
async fn set_model_changes_the_next_request_and_keeps_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedProvider::new().then_text("one").then_text("two"));
    let agent = Agent::builder(model.clone())
        .model("claude-sonnet-4-5")
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    assert_eq!(session.model(), "claude-sonnet-4-5");
    session.run("first").await;
    session.set_model("claude-haiku-4-5");
    assert_eq!(session.model(), "claude-haiku-4-5");
    let outcome = session.run("second").await;
    assert_eq!(outcome.text, "two");
    let requests = model.requests();
    assert_eq!(requests[0].model, "claude-sonnet-4-5");
    assert_eq!(requests[1].model, "claude-haiku-4-5");
    assert_eq!(requests[1].messages.len(), 3);
    // The agent the session came from is unchanged.
    assert_eq!(agent.model(), "claude-sonnet-4-5");
}

#[tokio::test]
async fn compact_now_summarizes_older_turns_and_logs_the_result() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let model = ScriptedProvider::new()
        .then_tool_call("call_1", "read_file", json!({"path": "a.txt"}))
        .then_text("It says alpha.")
        .then_text("Second answer.")
        .then_text("Summary: a.txt was read; it says alpha.");
    let (agent, store) = agent(model, dir.path());
    let mut session = agent.session(dir.path()).unwrap();
    assert_eq!(session.run("Read a.txt").await.stop, Stop::Completed);
    assert_eq!(session.run("And again?").await.stop, Stop::Completed);
    let before = session.history().len();
    let compacted = session.compact_now().await.unwrap();
    assert!(
        compacted.after_tokens < compacted.before_tokens,
        "{compacted:?}"
    );
    assert!(session.history().len() < before);
    check_pairing(session.history()).unwrap();
    let all_text: String = session.history().iter().map(|m| m.text()).collect();
    assert!(all_text.contains(SUMMARY_HEADER), "{all_text}");
    assert!(all_text.contains("Summary: a.txt was read"), "{all_text}");
    // The original request stays verbatim.
    assert!(session.history()[0].text().starts_with("Read a.txt"));
    // The session file holds the compacted history: a resume sees the same.
    let loaded = store.load(session.id()).unwrap();
    assert_eq!(loaded.messages.as_slice(), session.history());
}

#[tokio::test]
async fn compact_now_on_a_short_history_says_there_is_nothing_to_compact() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, _) = agent(ScriptedProvider::new().then_text("hi"), dir.path());
    let mut session = agent.session(dir.path()).unwrap();
    session.run("hello").await;
    let history = session.history().to_vec();
    let err = session.compact_now().await.unwrap_err();
    assert!(matches!(err, CompactionError::NothingToCompact), "{err}");
    assert_eq!(session.history(), history.as_slice(), "nothing lost");
}

#[tokio::test]
async fn the_output_token_budget_ends_the_run_before_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    // Each scripted reply reports some output tokens; the budget is used up after the first.
    let model = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("call_1", "read_file", json!({"path": "a.txt"}))
            .then_tool_call("call_2", "read_file", json!({"path": "a.txt"}))
            .then_text("never asked"),
    );
    let agent = Agent::builder(model.clone())
        .model("claude-sonnet-4-5")
        .tools(
            default_tools(
                &PathSandbox::new(dir.path()).unwrap(),
                &SandboxPolicy::default(),
            )
            .unwrap(),
        )
        .output_token_budget(1)
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    let outcome = session.run("Read a.txt").await;
    let Stop::TokenBudget { used, budget } = outcome.stop else {
        panic!("{:?}", outcome.stop);
    };
    assert_eq!(budget, 1);
    assert!(used >= 1);
    assert_eq!(
        outcome.iterations, 1,
        "no call after the budget was used up"
    );
    assert_eq!(model.requests().len(), 1);
    assert!(
        outcome
            .text
            .contains("output-token budget of 1 was used up"),
        "{}",
        outcome.text
    );
    // The call of the last reply was still answered.
    check_pairing(session.history()).unwrap();
    assert_eq!(
        keel_test_support::scripted::tool_results(session.history()).len(),
        1
    );
}

/// Hands out each queued notice once, to the session it is for; counts the times it is asked.
#[derive(Default)]
struct QueueNotifier {
    queued: std::sync::Mutex<Vec<(String, String)>>,
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl keel_engine::Notifier for QueueNotifier {
    async fn take(&self, session_id: &str) -> Vec<String> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut queued = self.queued.lock().unwrap();
        let (mine, others): (Vec<_>, Vec<_>) = queued
            .drain(..)
            .partition(|(session, _)| session == session_id);
        *queued = others;
        mine.into_iter().map(|(_, notice)| notice).collect()
    }
}

#[tokio::test]
async fn notices_are_added_before_the_next_request_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let model = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("call_1", "read_file", json!({"path": "a.txt"}))
            .then_text("Noted.")
            .then_text("Still noted."),
    );
    // Queued before the first request, but a new session does not ask before its first
    // request: nothing it started can have ended yet.
    let notifier = Arc::new(QueueNotifier::default());
    let (store_agent, store) = agent(ScriptedProvider::new(), dir.path());
    drop(store_agent);
    let agent = Agent::builder(model.clone())
        .model("claude-sonnet-4-5")
        .tools(
            default_tools(
                &PathSandbox::new(dir.path()).unwrap(),
                &SandboxPolicy::default(),
            )
            .unwrap(),
        )
        .session_store(store.clone())
        .notifier(notifier.clone())
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    notifier
        .queued
        .lock()
        .unwrap()
        .push(("another-session".into(), "not yours".into()));
    let id = session.id().to_owned();
    notifier
        .queued
        .lock()
        .unwrap()
        .push((id.clone(), "Task t1 completed (exit 0) in 2s.".into()));
    session.run("Read a.txt").await;
    session.run("And now?").await;
    let requests = model.requests();
    let notices = |request: &keel_provider::CompletionRequest| {
        request
            .messages
            .iter()
            .filter(|m| m.text().contains("[notification] Task t1 completed"))
            .count()
    };
    assert_eq!(notices(&requests[0]), 0);
    assert_eq!(notices(&requests[1]), 1, "added before the next request");
    assert_eq!(
        notifier.calls.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "asked before the second and third requests, not the first"
    );
    let last = requests[1].messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert_eq!(
        last.text(),
        "[notification] Task t1 completed (exit 0) in 2s."
    );
    assert_eq!(
        notices(&requests[2]),
        1,
        "kept in the history, not added again"
    );
    assert!(
        !requests
            .iter()
            .any(|r| r.messages.iter().any(|m| m.text().contains("not yours")))
    );
    check_pairing(session.history()).unwrap();
    // Saved with the session: a resume sees it.
    let loaded = store.load(&id).unwrap();
    assert_eq!(loaded.messages.as_slice(), session.history());
}

#[tokio::test]
async fn a_resumed_session_takes_its_notices_before_its_first_request() {
    let dir = tempfile::tempdir().unwrap();
    let (first, store) = agent(ScriptedProvider::new().then_text("Started."), dir.path());
    let mut session = first.session(dir.path()).unwrap();
    session.run("Start it").await;
    let id = session.id().to_owned();
    drop(session);
    // The task it started ended while no keel ran the session.
    let notifier = Arc::new(QueueNotifier::default());
    notifier
        .queued
        .lock()
        .unwrap()
        .push((id.clone(), "Task t2 completed (exit 0) in 9s.".into()));
    let model = Arc::new(ScriptedProvider::new().then_text("Seen."));
    let agent = Agent::builder(model.clone())
        .model("claude-sonnet-4-5")
        .session_store(store.clone())
        .notifier(notifier.clone())
        .build()
        .unwrap();
    let mut resumed = agent.resume(&id).unwrap();
    resumed.run("Anything new?").await;
    let requests = model.requests();
    assert!(
        requests[0]
            .messages
            .iter()
            .any(|m| m.text().contains("[notification] Task t2 completed")),
        "{:?}",
        requests[0].messages
    );
}
