//! A live session's life: opened, switched to another conversation, resumed, closed.

use std::sync::Arc;

use keel::provider::ContentBlock;
use keel_config::LiveMode;
use keel_host::{HostEvent, Opening, Ownership, Role, SessionHost, TaskWait};
use keel_test_support::scripted::ScriptedProvider;

use crate::support::{ScriptedSessions, drain, until};

#[tokio::test]
async fn a_switch_keeps_the_subscribers_and_tells_them_the_new_id() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let model = Arc::new(ScriptedProvider::new().then_text("one").then_text("two"));
    let sessions = ScriptedSessions::new(model, cwd.path(), home.path());
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    let mut watcher = live.subscribe(Role::Watcher);
    live.run_turn(vec![ContentBlock::text("first")], TaskWait::Leave)
        .await
        .unwrap();
    let first = live.id();
    let fresh = live.coding().session().unwrap();
    let fresh_id = fresh.id().to_owned();
    let previous = host.switch(&live, fresh).await.unwrap();
    assert_eq!(previous.id(), first);
    assert_eq!(live.id(), fresh_id);
    assert_eq!(host.ids(), vec![fresh_id.clone()]);
    let told = until(&mut watcher, |event| match event {
        HostEvent::SessionSwitched { id } => Some(id.clone()),
        _ => None,
    })
    .await;
    assert_eq!(told, fresh_id);
    let outcome = live
        .run_turn(vec![ContentBlock::text("second")], TaskWait::Leave)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.text, "two");
    assert_eq!(
        live.session().await.history().len(),
        2,
        "a new conversation"
    );
    let seen = drain(&mut owner);
    assert!(
        seen.iter()
            .any(|event| matches!(event, HostEvent::TurnEnded { turn: 2, .. }))
    );
}

#[tokio::test]
async fn a_mode_change_reaches_every_subscriber_and_the_approver() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let model = Arc::new(ScriptedProvider::new().then_text("ok"));
    let sessions = ScriptedSessions::new(model, cwd.path(), home.path());
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    assert_eq!(live.mode(), LiveMode::Ask);
    live.set_mode(LiveMode::ReadOnly);
    assert_eq!(live.mode_switch().get(), LiveMode::ReadOnly);
    let mode = until(&mut owner, |event| match event {
        HostEvent::ModeChanged { mode } => Some(*mode),
        _ => None,
    })
    .await;
    assert_eq!(mode, LiveMode::ReadOnly);
}

#[tokio::test]
async fn a_saved_session_is_resumed_by_id_with_its_history() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let model = Arc::new(ScriptedProvider::new().then_text("remembered"));
    let sessions = ScriptedSessions::new(model, cwd.path(), home.path());
    let host = SessionHost::default();
    let live = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap()
        .session;
    live.run_turn(vec![ContentBlock::text("remember this")], TaskWait::Leave)
        .await
        .unwrap();
    let id = live.id();
    host.close(&id, keel::engine::SessionEndReason::Other)
        .await
        .unwrap();
    let resumed = host
        .open(
            &sessions,
            &Opening::Resume { id: id.clone() },
            Ownership::default(),
        )
        .await
        .unwrap()
        .session;
    assert_eq!(resumed.id(), id);
    assert_eq!(resumed.session().await.history().len(), 2);
}

#[tokio::test]
async fn a_fork_is_a_new_session_that_starts_with_the_history_of_another() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let model = Arc::new(
        ScriptedProvider::new()
            .then_text("first")
            .then_text("forked"),
    );
    let sessions = ScriptedSessions::new(model, cwd.path(), home.path());
    let host = SessionHost::default();
    let original = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap()
        .session;
    original
        .run_turn(vec![ContentBlock::text("one")], TaskWait::Leave)
        .await
        .unwrap();
    let fork = host
        .open(
            &sessions,
            &Opening::Fork { id: original.id() },
            Ownership::default(),
        )
        .await
        .unwrap()
        .session;
    assert_ne!(fork.id(), original.id());
    assert_eq!(host.ids().len(), 2, "both live");
    assert_eq!(fork.session().await.history().len(), 2);
    fork.run_turn(vec![ContentBlock::text("two")], TaskWait::Leave)
        .await
        .unwrap();
    assert_eq!(fork.session().await.history().len(), 4);
    assert_eq!(
        original.session().await.history().len(),
        2,
        "the original is untouched"
    );
}
