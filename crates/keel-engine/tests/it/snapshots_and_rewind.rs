//! Snapshots before every call that may change the workspace, and rewinding the
//! conversation to the point a snapshot names.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::common::{FakeSnapshots, Runs, counting_tools};
use futures::StreamExt;
use keel_engine::{Agent, AgentEvent, JsonlSessionStore, SessionError, SessionStore, Stop};
use keel_provider::{ContentBlock, Message, StopReason};
use keel_test_support::scripted::{ScriptedProvider, Turn, reply};
use serde_json::json;

fn calls(content: Vec<ContentBlock>) -> Turn {
    Turn::Reply(reply(content, StopReason::ToolUse))
}

fn agent(
    provider: Arc<ScriptedProvider>,
    runs: &Runs,
    snapshots: Arc<FakeSnapshots>,
    store: Option<Arc<JsonlSessionStore>>,
) -> Agent {
    let mut builder = Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(counting_tools(runs))
        .snapshots(snapshots);
    if let Some(store) = store {
        builder = builder.session_store(store);
    }
    builder.build().unwrap()
}

#[tokio::test]
async fn a_snapshot_precedes_every_call_that_may_change_files_and_only_those() {
    let provider = Arc::new(
        ScriptedProvider::new()
            .then(calls(vec![
                ContentBlock::tool_use("r1", "peek", json!({"n": 1})),
                ContentBlock::tool_use("m1", "count", json!({"n": 2})),
                // Denied by the default approver: never snapshotted, never run.
                ContentBlock::tool_use("d1", "erase", json!({"n": 3})),
            ]))
            .then_text("first done")
            .then_tool_call("m2", "count", json!({"n": 4}))
            .then_text("second done"),
    );
    let runs = Runs::default();
    let snapshots = Arc::new(FakeSnapshots::default());
    let mut session = agent(provider, &runs, snapshots.clone(), None)
        .session(".")
        .unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("first").collect().await;
    // The snapshot is reported before the call starts.
    let order: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::SnapshotTaken { call_id, .. } => Some(format!("snapshot {call_id}")),
            AgentEvent::ToolCallStarted { id, .. } => Some(format!("start {id}")),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["start r1", "snapshot m1", "start m1"]);
    assert_eq!(session.history().len(), 4);
    assert_eq!(session.run("second").await.stop, Stop::Completed);

    let points = snapshots.points.lock().unwrap().clone();
    assert_eq!(points.len(), 2, "{points:?}");
    assert_eq!(points[0].session_id, session.id());
    assert_eq!(
        (points[0].call_id.as_str(), points[0].tool.as_str()),
        ("m1", "count")
    );
    assert_eq!(points[0].summary, r#"{"n":2}"#);
    // The history length before each run's prompt.
    assert_eq!(points[0].history_len, 0);
    assert_eq!(points[1].call_id, "m2");
    assert_eq!(points[1].history_len, 4);
    assert_eq!(
        runs.lock().unwrap().clone(),
        [
            ("peek".to_owned(), 1),
            ("count".to_owned(), 2),
            ("count".to_owned(), 4)
        ]
    );
}

#[tokio::test]
async fn a_failed_snapshot_is_a_warning_and_the_call_still_runs() {
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("m1", "count", json!({"n": 1}))
            .then_text("done"),
    );
    let runs = Runs::default();
    let snapshots = Arc::new(FakeSnapshots {
        fail: true,
        ..FakeSnapshots::default()
    });
    let mut session = agent(provider, &runs, snapshots, None)
        .session(".")
        .unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("go").collect().await;
    let warnings: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Warning { message } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{events:?}");
    assert!(
        warnings[0].contains("no snapshot before count m1") && warnings[0].contains("disk is full"),
        "{}",
        warnings[0]
    );
    assert_eq!(runs.lock().unwrap().len(), 1);
}

#[test]
fn summaries_are_one_short_line() {
    // Through the public event: a long multi-line command is cut to 200 characters.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let long = format!("echo {}\nrm -rf build", "x".repeat(400));
        let provider = Arc::new(
            ScriptedProvider::new()
                .then(calls(vec![ContentBlock::tool_use(
                    "m1",
                    "count",
                    json!({"n": 1, "command": long}),
                )]))
                .then_tool_call("m2", "count", json!({"n": 2, "path": "src/a b.rs"}))
                .then_text("done"),
        );
        let runs = Runs::default();
        let snapshots = Arc::new(FakeSnapshots::default());
        let mut session = agent(provider, &runs, snapshots.clone(), None)
            .session(".")
            .unwrap();
        session.run("go").await;
        let points = snapshots.points.lock().unwrap().clone();
        assert_eq!(points[0].summary.chars().count(), 200);
        assert!(points[0].summary.starts_with("echo xxx"));
        assert!(points[0].summary.ends_with('…'));
        assert!(!points[0].summary.contains('\n'));
        assert_eq!(points[1].summary, "src/a b.rs");
    });
}

#[tokio::test]
async fn rewinding_to_a_snapshot_point_restores_the_conversation_and_survives_resume() {
    let home = tempfile::tempdir().unwrap();
    let store = Arc::new(JsonlSessionStore::new(home.path()));
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_text("one")
            .then_tool_call("m1", "count", json!({"n": 1}))
            .then_text("two")
            .then_text("after the rewind"),
    );
    let runs = Runs::default();
    let snapshots = Arc::new(FakeSnapshots::default());
    let agent = agent(
        provider.clone(),
        &runs,
        snapshots.clone(),
        Some(store.clone()),
    );
    let mut session = agent.session(".").unwrap();
    session.run("first").await;
    let after_first = session.history().to_vec();
    session.run("second").await;
    let point = snapshots.points.lock().unwrap()[0].clone();
    assert_eq!(point.history_len, after_first.len());

    // A cut between a call and its result is refused, and changes nothing.
    let err = session.rewind_to(after_first.len() + 2).unwrap_err();
    assert!(matches!(err, SessionError::InvalidRewind { .. }), "{err}");
    let err = session.rewind_to(99).unwrap_err();
    assert!(matches!(err, SessionError::InvalidRewind { .. }), "{err}");
    assert_eq!(session.history().len(), after_first.len() + 4);

    session.rewind_to(point.history_len).unwrap();
    assert_eq!(session.history(), after_first);
    // Resumed, the session continues from the rewound point.
    let id = session.id().to_owned();
    drop(session);
    let mut resumed = agent.resume(&id).unwrap();
    assert_eq!(resumed.history(), after_first);
    resumed.run("third").await;
    let last = provider.requests().pop().unwrap();
    let mut expected = after_first.clone();
    expected.push(Message::user("third"));
    assert_eq!(last.messages, expected);
}

#[tokio::test]
async fn a_closed_session_is_rewound_through_its_store() {
    let home = tempfile::tempdir().unwrap();
    let store = Arc::new(JsonlSessionStore::new(home.path()));
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("m1", "count", json!({"n": 1}))
            .then_text("one")
            .then_text("two"),
    );
    let runs = Runs::default();
    let agent = agent(
        provider,
        &runs,
        Arc::new(FakeSnapshots::default()),
        Some(store.clone()),
    );
    let mut session = agent.session(".").unwrap();
    session.run("first").await;
    let after_first = session.history().to_vec();
    session.run("second").await;
    let id = session.id().to_owned();
    drop(session);

    // Message 2 is the result of the call in message 1.
    assert!(matches!(
        store.rewind(&id, 2),
        Err(SessionError::InvalidRewind { history_len: 2, .. })
    ));
    store.rewind(&id, after_first.len()).unwrap();
    assert_eq!(store.load(&id).unwrap().messages, after_first);
    store.rewind(&id, 0).unwrap();
    assert!(agent.resume(&id).unwrap().history().is_empty());
}
