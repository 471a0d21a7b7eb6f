//! A reply cut off mid-stream is dropped and asked for again by the loop, a bounded number
//! of times; nothing of the cut reply reaches the history or the session file.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Runs, counting_tools};
use futures::StreamExt;
use keel_engine::{Agent, AgentBuilder, AgentEvent, MemorySessionStore, Stop};
use keel_provider::{ContentBlock, ProviderError, StopReason, StreamEvent, TimeoutLimit};
use keel_test_support::scripted::{ScriptedProvider, Turn, reply};
use serde_json::json;

fn builder(
    provider: Arc<ScriptedProvider>,
    runs: &Runs,
    store: &MemorySessionStore,
) -> AgentBuilder {
    Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(counting_tools(runs))
        .session_store(Arc::new(store.clone()))
}

fn cut() -> ProviderError {
    ProviderError::Stream {
        message: "connection reset mid-reply".into(),
    }
}

fn discarded(events: &[AgentEvent]) -> Vec<(u32, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ReplyDiscarded {
                attempt,
                max_attempts,
                ..
            } => Some((*attempt, *max_attempts)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_reply_cut_mid_text_is_discarded_and_asked_for_again() {
    let partial = reply(
        vec![ContentBlock::text("PARTIAL-TEXT that never ends")],
        StopReason::EndTurn,
    );
    let provider = Arc::new(
        ScriptedProvider::new()
            // MessageStart and the text delta, then the connection drops.
            .then_cut(&partial, 2, cut())
            .then_text("the whole answer"),
    );
    let store = MemorySessionStore::new();
    let runs = Runs::default();
    let agent = builder(provider.clone(), &runs, &store).build().unwrap();
    let mut session = agent.session(".").unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("go").collect().await;
    let AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!("{events:?}")
    };
    assert_eq!(outcome.stop, Stop::Completed, "{outcome:?}");
    assert_eq!(outcome.text, "the whole answer");
    assert_eq!(discarded(&events), [(1, 3)]);
    // The UI was told to drop the text after it saw it.
    let shown = events
        .iter()
        .position(|e| matches!(e, AgentEvent::TextDelta { text } if text.starts_with("PARTIAL")))
        .unwrap();
    let dropped = events
        .iter()
        .position(|e| matches!(e, AgentEvent::ReplyDiscarded { .. }))
        .unwrap();
    assert!(shown < dropped);
    // The same request was sent again; nothing of the cut reply is kept anywhere.
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].messages, requests[1].messages);
    assert!(!format!("{:?}", session.history()).contains("PARTIAL"));
    let raw = String::from_utf8(store.raw(session.id()).unwrap()).unwrap();
    assert!(!raw.contains("PARTIAL"), "{raw}");
}

#[tokio::test]
async fn a_reply_cut_mid_tool_call_never_runs_it_and_the_retried_call_runs_once() {
    // The model starts a call and the stream stalls inside its input.
    let cut_mid_call = Turn::Events(vec![
        Ok(StreamEvent::MessageStart {
            id: Some("msg_1".into()),
            model: None,
        }),
        Ok(StreamEvent::TextDelta {
            index: 0,
            text: "Counting.".into(),
        }),
        Ok(StreamEvent::ToolUseStart {
            index: 1,
            id: "c1".into(),
            name: "count".into(),
        }),
        Ok(StreamEvent::ToolInputDelta {
            index: 1,
            partial_json: "{\"n\": 1".into(),
        }),
        Err(ProviderError::Timeout {
            after: Duration::from_secs(120),
            limit: TimeoutLimit::Idle,
        }),
    ]);
    let provider = Arc::new(
        ScriptedProvider::new()
            .then(cut_mid_call)
            .then(Turn::Reply(reply(
                vec![
                    ContentBlock::text("Counting."),
                    ContentBlock::tool_use("c1", "count", json!({"n": 1})),
                ],
                StopReason::ToolUse,
            )))
            .then_text("counted"),
    );
    let store = MemorySessionStore::new();
    let runs = Runs::default();
    let agent = builder(provider.clone(), &runs, &store).build().unwrap();
    let mut session = agent.session(".").unwrap();
    let outcome = session.run("count once").await;
    assert_eq!(outcome.stop, Stop::Completed, "{outcome:?}");
    assert_eq!(runs.lock().unwrap().clone(), [("count".to_owned(), 1)]);
    // One assistant message with the call, one result.
    let uses = session
        .history()
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| matches!(b, ContentBlock::ToolUse { .. }))
        .count();
    assert_eq!(uses, 1);
    keel_engine::history::check_pairing(session.history()).unwrap();
}

#[tokio::test]
async fn retries_are_bounded_then_the_run_fails_with_the_error() {
    let partial = reply(vec![ContentBlock::text("partial")], StopReason::EndTurn);
    let mut script = ScriptedProvider::new();
    for _ in 0..3 {
        script = script.then_cut(&partial, 2, cut());
    }
    let provider = Arc::new(script.then_text("never asked for"));
    let store = MemorySessionStore::new();
    let runs = Runs::default();
    let agent = builder(provider.clone(), &runs, &store)
        .stream_retries(2)
        .build()
        .unwrap();
    let mut session = agent.session(".").unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("go").collect().await;
    let AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!("{events:?}")
    };
    assert!(
        matches!(&outcome.stop, Stop::Failed(failure) if failure.message.contains("connection reset") && failure.kind == keel_engine::FailureKind::Network),
        "{outcome:?}"
    );
    assert_eq!(discarded(&events), [(1, 2), (2, 2)]);
    assert_eq!(provider.requests().len(), 3);
    assert_eq!(provider.remaining(), 1);
    // Nothing but the prompt is in the history.
    assert_eq!(session.history().len(), 1);

    // With no retries, the first cut ends the run.
    let provider = Arc::new(ScriptedProvider::new().then_cut(&partial, 2, cut()));
    let agent = builder(provider.clone(), &runs, &store)
        .stream_retries(0)
        .build()
        .unwrap();
    let outcome = agent.session(".").unwrap().run("go").await;
    assert!(matches!(outcome.stop, Stop::Failed { .. }));
    assert_eq!(provider.requests().len(), 1);
}

#[tokio::test]
async fn other_provider_errors_are_not_retried_by_the_loop() {
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_error(ProviderError::InvalidRequest {
                message: "bad".into(),
            })
            .then_text("never"),
    );
    let store = MemorySessionStore::new();
    let runs = Runs::default();
    let agent = builder(provider.clone(), &runs, &store).build().unwrap();
    let outcome = agent.session(".").unwrap().run("go").await;
    assert!(matches!(outcome.stop, Stop::Failed { .. }));
    assert_eq!(provider.requests().len(), 1);
}

#[tokio::test]
async fn an_overload_mid_reply_is_asked_again_but_one_before_any_content_is_the_providers() {
    let partial = reply(
        vec![ContentBlock::text("PARTIAL-TEXT")],
        StopReason::EndTurn,
    );
    let overloaded = || ProviderError::Overloaded {
        message: "Overloaded".into(),
    };
    // Anthropic's `overloaded_error` event after the text began: the loop asks again.
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_cut(&partial, 2, overloaded())
            .then_text("the whole answer"),
    );
    let store = MemorySessionStore::new();
    let runs = Runs::default();
    let agent = builder(provider.clone(), &runs, &store).build().unwrap();
    let outcome = agent.session(".").unwrap().run("go").await;
    assert_eq!(outcome.stop, Stop::Completed, "{outcome:?}");
    assert_eq!(provider.requests().len(), 2);
    // Only the message start arrived: the provider has already retried what it could, and
    // the loop does not retry a reply that never began.
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_cut(&partial, 1, overloaded())
            .then_text("never"),
    );
    let agent = builder(provider.clone(), &runs, &store).build().unwrap();
    let outcome = agent.session(".").unwrap().run("go").await;
    assert!(matches!(outcome.stop, Stop::Failed { .. }), "{outcome:?}");
    assert_eq!(provider.requests().len(), 1);
}
