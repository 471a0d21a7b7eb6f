//! Missing, malformed or reused tool call ids are replaced by unique ones before the calls
//! run and in the history, each result staying with its call; a saved session holding
//! duplicates is repaired when it is loaded.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::common::{Runs, check_request, counting_tools};
use keel_engine::{Agent, MemorySessionStore, SessionRecord, SessionStore, Stop};
use keel_provider::{ContentBlock, Message, Role, StopReason};
use keel_test_support::scripted::{ScriptedProvider, Turn, reply};
use serde_json::json;

fn calls(content: Vec<ContentBlock>) -> Turn {
    Turn::Reply(reply(content, StopReason::ToolUse))
}

fn agent(provider: Arc<ScriptedProvider>, runs: &Runs, store: &MemorySessionStore) -> Agent {
    Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(counting_tools(runs))
        .session_store(Arc::new(store.clone()))
        .build()
        .unwrap()
}

/// `(call id, n)` of every call, in order.
type Uses = Vec<(String, u64)>;
/// `(result id, text)` of every result, in order.
type Results = Vec<(String, String)>;

fn pairs(history: &[Message]) -> (Uses, Results) {
    let mut uses = Vec::new();
    let mut results = Vec::new();
    for block in history.iter().flat_map(|m| &m.content) {
        match block {
            ContentBlock::ToolUse { id, input, .. } => {
                uses.push((id.clone(), input["n"].as_u64().unwrap()));
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } => results.push((tool_use_id.clone(), content.clone())),
            _ => {}
        }
    }
    (uses, results)
}

#[tokio::test]
async fn duplicate_empty_malformed_and_reused_ids_are_replaced_before_the_calls_run() {
    let provider = Arc::new(
        ScriptedProvider::new()
            .then(calls(vec![
                ContentBlock::tool_use("dup", "peek", json!({"n": 1})),
                ContentBlock::tool_use("dup", "peek", json!({"n": 2})),
                ContentBlock::tool_use("", "count", json!({"n": 3})),
                ContentBlock::tool_use("call.4/x", "count", json!({"n": 4})),
            ]))
            // Reuses an id of the reply before.
            .then_tool_call("dup", "count", json!({"n": 5}))
            .then_text("done"),
    );
    let store = MemorySessionStore::new();
    let runs = Runs::default();
    let mut session = agent(provider.clone(), &runs, &store).session(".").unwrap();
    assert_eq!(session.run("go").await.stop, Stop::Completed);
    // Every call ran once.
    let mut ran: Vec<u64> = runs.lock().unwrap().iter().map(|r| r.1).collect();
    ran.sort_unstable();
    assert_eq!(ran, [1, 2, 3, 4, 5]);
    let (uses, results) = pairs(session.history());
    assert_eq!(
        uses,
        [
            ("dup".to_owned(), 1),
            ("toolu_keel_1".to_owned(), 2),
            ("toolu_keel_2".to_owned(), 3),
            ("toolu_keel_3".to_owned(), 4),
            ("toolu_keel_4".to_owned(), 5),
        ]
    );
    // Each result stays with its own call.
    assert_eq!(
        results,
        [
            ("dup".to_owned(), "peek 1".to_owned()),
            ("toolu_keel_1".to_owned(), "peek 2".to_owned()),
            ("toolu_keel_2".to_owned(), "count 3".to_owned()),
            ("toolu_keel_3".to_owned(), "count 4".to_owned()),
            ("toolu_keel_4".to_owned(), "count 5".to_owned()),
        ]
    );
    for (i, request) in provider.requests().iter().enumerate() {
        check_request(&request.messages).unwrap_or_else(|e| panic!("request {i}: {e}"));
    }
    // The session file holds the renamed ids.
    let loaded = store.load(session.id()).unwrap();
    assert_eq!(loaded.messages, session.history());
    let raw = String::from_utf8(store.raw(session.id()).unwrap()).unwrap();
    assert!(
        raw.contains("toolu_keel_4") && !raw.contains("call.4/x"),
        "{raw}"
    );
}

#[tokio::test]
async fn a_saved_session_with_duplicate_ids_is_repaired_on_load_and_goes_on() {
    let store = MemorySessionStore::new();
    let provider = Arc::new(ScriptedProvider::new().then_text("unused"));
    let runs = Runs::default();
    let agent = agent(provider.clone(), &runs, &store);
    let session = agent.session(".").unwrap();
    let id = session.id().to_owned();
    drop(session);
    // What an older keel saved: the same id twice in a reply, and again in a later one.
    let mut raw = store.raw(&id).unwrap();
    for message in [
        Message::user("go"),
        Message::new(
            Role::Assistant,
            vec![
                ContentBlock::tool_use("a", "count", json!({"n": 1})),
                ContentBlock::tool_use("a", "count", json!({"n": 2})),
            ],
        ),
        Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result("a", "count 1", false),
                ContentBlock::tool_result("a", "count 2", false),
            ],
        ),
        Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("a", "count", json!({"n": 3}))],
        ),
        Message::new(
            Role::User,
            vec![ContentBlock::tool_result("a", "count 3", false)],
        ),
        Message::assistant("done"),
    ] {
        raw.extend(serde_json::to_vec(&SessionRecord::message(message)).unwrap());
        raw.push(b'\n');
    }
    store.insert_raw(&id, raw).unwrap();

    let loaded = store.load(&id).unwrap();
    check_request(&loaded.messages).unwrap();
    let (uses, results) = pairs(&loaded.messages);
    assert_eq!(
        uses,
        [
            ("a".to_owned(), 1),
            ("toolu_keel_1".to_owned(), 2),
            ("toolu_keel_2".to_owned(), 3)
        ]
    );
    assert_eq!(
        results,
        [
            ("a".to_owned(), "count 1".to_owned()),
            ("toolu_keel_1".to_owned(), "count 2".to_owned()),
            ("toolu_keel_2".to_owned(), "count 3".to_owned()),
        ]
    );
    // Resumed, the next request is valid, and so is the file afterwards.
    let mut session = agent.resume(&id).unwrap();
    assert_eq!(session.run("again").await.stop, Stop::Completed);
    let request = provider.requests().pop().unwrap();
    check_request(&request.messages).unwrap();
    assert_eq!(store.load(&id).unwrap().messages, session.history());
    assert!(runs.lock().unwrap().is_empty());
}
