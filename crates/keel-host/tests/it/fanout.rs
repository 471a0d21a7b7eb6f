//! One session's events fanned out: every subscriber sees the same events in the same order,
//! a stalled one is dropped while the turn goes on, a late one gets the turn so far.

use std::sync::Arc;

use keel::RunEvent;
use keel::engine::AgentEvent;
use keel::provider::ContentBlock;
use keel_host::{
    HostError, HostEvent, HostOptions, Opening, Ownership, Role, SessionHost, TaskWait,
};
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

use crate::support::{ScriptedSessions, drain, turn_end, until};

/// A model that reads three files and answers.
fn busy_model() -> Arc<ScriptedProvider> {
    let mut model = ScriptedProvider::new();
    for (i, file) in ["a.txt", "b.txt", "c.txt"].iter().enumerate() {
        model = model.then_tool_call(&format!("call_{i}"), "read_file", json!({ "path": file }));
    }
    Arc::new(model.then_text("read them all"))
}

fn workspace() -> tempfile::TempDir {
    let cwd = tempfile::tempdir().unwrap();
    for file in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(cwd.path().join(file), "text\n").unwrap();
    }
    cwd
}

/// The engine events of `events`, by kind, in order.
fn kinds(events: &[HostEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            HostEvent::Run(RunEvent::Agent(event)) => Some(
                format!("{event:?}")
                    .split([' ', '(', '{'])
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn two_subscribers_and_a_late_third_see_the_same_turn() {
    let (cwd, home) = (workspace(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(busy_model(), cwd.path(), home.path());
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    let mut second = live.subscribe(Role::Watcher);
    let turn = live
        .start_turn(vec![ContentBlock::text("read")], TaskWait::Leave)
        .unwrap();
    // The late one joins once the second read has finished.
    let mut seen = Vec::new();
    let mut finished = 0;
    while finished < 2 {
        let event = owner.next().await.unwrap();
        if matches!(
            event,
            HostEvent::Run(RunEvent::Agent(AgentEvent::ToolCallFinished { .. }))
        ) {
            finished += 1;
        }
        seen.push(event);
    }
    let mut third = live.subscribe(Role::Watcher);
    assert!(third.replayed() > 0);
    assert_eq!(turn.outcome().await.unwrap().text, "read them all");
    seen.extend(drain(&mut owner));
    let from_second = drain(&mut second);
    let from_third = drain(&mut third);
    assert_eq!(kinds(&seen), kinds(&from_second));
    // The late one saw the whole turn: its replay, then the rest live.
    assert_eq!(kinds(&from_third), kinds(&seen));
    assert!(matches!(from_third[0], HostEvent::TurnStarted { turn: 1 }));
    assert!(
        matches!(
            from_third.last(),
            Some(HostEvent::TurnEnded {
                turn: 1,
                outcome: Some(_)
            })
        ),
        "{:?}",
        from_third.last()
    );
}

#[tokio::test]
async fn a_stalled_subscriber_is_dropped_while_the_turn_goes_on() {
    let (cwd, home) = (workspace(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(busy_model(), cwd.path(), home.path());
    let host = SessionHost::new(HostOptions {
        subscriber_buffer: 4,
        replay_limit: 64,
    });
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    // Never read during the turn.
    let mut stalled = live.subscribe(Role::Watcher);
    let outcome = live
        .run_turn(vec![ContentBlock::text("read")], TaskWait::Leave)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.text, "read them all", "the turn went on");
    let dropped = until(&mut owner, |event| match event {
        HostEvent::SubscriberDropped { subscriber, .. } => Some(*subscriber),
        _ => None,
    })
    .await;
    assert_eq!(dropped, stalled.id());
    assert_eq!(turn_end(&mut owner, 1).await, "completed");
    // The stalled one gets what fitted, then the notice, then nothing.
    let events = drain(&mut stalled);
    assert_eq!(events.len(), 5, "{events:?}");
    assert!(
        matches!(events.last(), Some(HostEvent::Dropped { reason }) if reason.contains("fell more than 4 events behind")),
        "{:?}",
        events.last()
    );
    assert!(stalled.next().await.is_none());
    assert_eq!(live.subscribers(), 1, "only the owner is left");
}

#[tokio::test]
async fn a_late_subscriber_s_replay_is_bounded() {
    let (cwd, home) = (workspace(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(busy_model(), cwd.path(), home.path());
    let host = SessionHost::new(HostOptions {
        subscriber_buffer: 1024,
        replay_limit: 3,
    });
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let live = opened.session;
    live.run_turn(vec![ContentBlock::text("read")], TaskWait::Leave)
        .await
        .unwrap();
    let mut late = live.subscribe(Role::Watcher);
    assert_eq!(late.replayed(), 3);
    let replay = drain(&mut late);
    assert_eq!(replay.len(), 3);
    assert!(matches!(replay[2], HostEvent::TurnEnded { turn: 1, .. }));
}

#[tokio::test]
async fn a_session_runs_one_turn_at_a_time_and_closing_ends_every_stream() {
    let (cwd, home) = (workspace(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(busy_model(), cwd.path(), home.path());
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    let mut watcher = live.subscribe(Role::Watcher);
    let turn = live
        .start_turn(vec![ContentBlock::text("read")], TaskWait::Leave)
        .unwrap();
    let again = live.start_turn(vec![ContentBlock::text("again")], TaskWait::Leave);
    assert!(matches!(again, Err(HostError::Busy(_))), "{again:?}");
    assert!(live.is_busy());
    turn.outcome().await.unwrap();
    assert!(!live.is_busy());
    let listed = host.list().await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, live.id());
    assert_eq!(listed[0].subscribers, 2);
    host.close(&live.id(), keel::engine::SessionEndReason::Other)
        .await
        .unwrap();
    assert!(host.list().await.is_empty());
    assert!(matches!(host.get(&live.id()), Err(HostError::NoSession(_))));
    for subscription in [&mut owner, &mut watcher] {
        let events = drain(subscription);
        assert!(
            matches!(events.last(), Some(HostEvent::Closed)),
            "{events:?}"
        );
        assert!(subscription.next().await.is_none());
    }
}
