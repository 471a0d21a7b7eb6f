//! Approval questions brokered between subscribers: who may answer, who wins, what everyone
//! sees, and what happens with nobody to ask.

use std::sync::Arc;
use std::time::Duration;

use keel::engine::{ApprovalRequest, Approver, Decision};
use keel::provider::ContentBlock;
use keel_host::{
    Answer, AnsweredBy, HostError, HostEvent, Opening, Ownership, QuestionKind, QuestionWait, Role,
    SessionHost, TaskWait,
};
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

use crate::support::{ScriptedSessions, drain, next_question, turn_end, until, zapping_model};

fn prompt() -> Vec<ContentBlock> {
    vec![ContentBlock::text("zap the build")]
}

#[tokio::test]
async fn an_answerer_answers_a_watcher_cannot_and_a_late_subscriber_sees_the_turn_so_far() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(zapping_model("build"), cwd.path(), home.path());
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    let mut watcher = live.subscribe(Role::Watcher);
    let mut answerer = live.subscribe(Role::Answerer);
    let turn = live.start_turn(prompt(), TaskWait::Leave).unwrap();

    let question = next_question(&mut answerer).await;
    assert!(matches!(&question.kind, QuestionKind::Call(request) if request.tool == "zap"));
    assert_eq!(live.questions(), vec![question.clone()]);

    // A third subscriber, late: the turn so far first, the question among it.
    let mut late = live.subscribe(Role::Answerer);
    assert!(late.replayed() >= 2, "replayed {}", late.replayed());
    let replay = drain(&mut late);
    assert!(matches!(replay[0], HostEvent::TurnStarted { turn: 1 }));
    assert!(
        replay
            .iter()
            .any(|event| matches!(event, HostEvent::Question(q) if q.id == question.id))
    );

    let refused = live.answer(&watcher, question.id, Answer::Decision(Decision::Allow));
    assert!(
        matches!(&refused, Err(HostError::NotAllowed(why)) if why.contains("watcher")),
        "{refused:?}"
    );
    assert_eq!(sessions.zap.runs(), 0, "a watcher's answer runs nothing");

    live.answer(&answerer, question.id, Answer::Decision(Decision::Allow))
        .unwrap();
    // The first answer won: a second one finds no open question.
    let second = live.answer(
        &late,
        question.id,
        Answer::Decision(Decision::Deny("no".into())),
    );
    assert_eq!(second, Err(HostError::NoQuestion(question.id)));

    // Everyone sees the answer, and who gave it.
    for subscription in [&mut owner, &mut watcher, &mut late] {
        let (answer, by) = until(subscription, |event| match event {
            HostEvent::Answered { answer, by, .. } => Some((answer.clone(), *by)),
            _ => None,
        })
        .await;
        assert_eq!(answer, Answer::Decision(Decision::Allow));
        assert_eq!(by, AnsweredBy::Subscriber(answerer.id()));
    }
    assert_eq!(turn_end(&mut owner, turn.number).await, "completed");
    assert_eq!(sessions.zap.runs(), 1);
    assert_eq!(turn_end(&mut watcher, 1).await, "completed");
}

#[tokio::test]
async fn a_protected_call_is_answered_by_the_owner_alone() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let model = Arc::new(
        ScriptedProvider::new()
            .then_tool_call(
                "call_1",
                "write_file",
                json!({"path": ".keel/config.toml", "content": "approvals = \"allow\"\n"}),
            )
            .then_text("done"),
    );
    let sessions = ScriptedSessions::new(model, cwd.path(), home.path());
    let host = SessionHost::default();
    let ownership = Ownership {
        role: Role::Answerer,
        ..Ownership::default()
    };
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, ownership)
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    let mut other = live.subscribe(Role::Answerer);
    live.start_turn(prompt(), TaskWait::Leave).unwrap();
    let question = next_question(&mut other).await;
    assert!(question.owner_only(), "{question:?}");
    let refused = live.answer(&other, question.id, Answer::Decision(Decision::Allow));
    assert!(
        matches!(&refused, Err(HostError::NotAllowed(why)) if why.contains("protected")),
        "{refused:?}"
    );
    live.answer(
        &owner,
        question.id,
        Answer::Decision(Decision::Deny("not my config".into())),
    )
    .unwrap();
    assert_eq!(turn_end(&mut owner, 1).await, "completed");
    assert!(!cwd.path().join(".keel/config.toml").exists());
}

#[tokio::test]
async fn with_nobody_to_answer_a_gated_call_is_refused_as_a_headless_run_refuses_it() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(zapping_model("build"), cwd.path(), home.path());
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    live.start_turn(prompt(), TaskWait::Leave).unwrap();
    let by = until(&mut owner, |event| match event {
        HostEvent::Answered { answer, by, .. } => {
            assert!(
                matches!(answer, Answer::Decision(Decision::Deny(why)) if why.contains("without a person")),
                "{answer:?}"
            );
            Some(*by)
        }
        _ => None,
    })
    .await;
    assert_eq!(by, AnsweredBy::NoAnswerer);
    assert_eq!(turn_end(&mut owner, 1).await, "completed");
    assert_eq!(sessions.zap.runs(), 0);
}

#[tokio::test]
async fn an_unattended_owner_s_wait_runs_out_and_the_call_is_refused() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(zapping_model("build"), cwd.path(), home.path());
    let host = SessionHost::default();
    let ownership = Ownership {
        wait: QuestionWait::DenyAfter(Duration::from_millis(100)),
        role: Role::Answerer,
    };
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, ownership)
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    live.start_turn(prompt(), TaskWait::Leave).unwrap();
    let (answer, by) = until(&mut owner, |event| match event {
        HostEvent::Answered { answer, by, .. } => Some((answer.clone(), *by)),
        _ => None,
    })
    .await;
    assert_eq!(by, AnsweredBy::Timeout);
    assert!(
        matches!(&answer, Answer::Decision(Decision::Deny(why)) if why.contains("nobody answered")),
        "{answer:?}"
    );
    assert_eq!(turn_end(&mut owner, 1).await, "completed");
    assert_eq!(sessions.zap.runs(), 0);
}

/// Answers every question after `delay`, as a person or a program would.
struct Answering {
    decision: Decision,
    delay: Duration,
}

#[async_trait::async_trait]
impl Approver for Answering {
    async fn approve(&self, _request: &ApprovalRequest) -> Decision {
        tokio::time::sleep(self.delay).await;
        self.decision.clone()
    }
}

#[tokio::test]
async fn the_first_of_two_attached_answerers_wins_and_the_other_is_stopped() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(zapping_model("build"), cwd.path(), home.path());
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    // The owner (a terminal) is slow to answer no; a browser answers yes at once.
    let slow_no = Answering {
        decision: Decision::Deny("too late".into()),
        delay: Duration::from_secs(30),
    };
    live.answer_with(&owner, Arc::new(slow_no)).unwrap();
    let browser = live.subscribe(Role::Answerer);
    let quick_yes = Answering {
        decision: Decision::Allow,
        delay: Duration::from_millis(10),
    };
    live.answer_with(&browser, Arc::new(quick_yes)).unwrap();
    let started = std::time::Instant::now();
    live.start_turn(prompt(), TaskWait::Leave).unwrap();
    let by = until(&mut owner, |event| match event {
        HostEvent::Answered { by, .. } => Some(*by),
        _ => None,
    })
    .await;
    assert_eq!(by, AnsweredBy::Subscriber(browser.id()));
    assert_eq!(turn_end(&mut owner, 1).await, "completed");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the slow answerer held the turn"
    );
    assert_eq!(sessions.zap.runs(), 1);
}

#[tokio::test]
async fn a_watcher_cannot_attach_an_answering_approver() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(zapping_model("build"), cwd.path(), home.path());
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, Ownership::default())
        .await
        .unwrap();
    let watcher = opened.session.subscribe(Role::Watcher);
    let yes = Answering {
        decision: Decision::Allow,
        delay: Duration::ZERO,
    };
    let refused = opened.session.answer_with(&watcher, Arc::new(yes));
    assert!(
        matches!(refused, Err(HostError::NotAllowed(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_question_whose_turn_is_cancelled_is_withdrawn() {
    let (cwd, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sessions = ScriptedSessions::new(zapping_model("build"), cwd.path(), home.path());
    let host = SessionHost::default();
    let ownership = Ownership {
        role: Role::Answerer,
        ..Ownership::default()
    };
    let opened = host
        .open(&sessions, &Opening::New { cwd: None }, ownership)
        .await
        .unwrap();
    let (live, mut owner) = (opened.session, opened.owner);
    live.start_turn(prompt(), TaskWait::Leave).unwrap();
    let question = next_question(&mut owner).await;
    live.cancel();
    let withdrawn = until(&mut owner, |event| match event {
        HostEvent::QuestionWithdrawn { question } => Some(*question),
        HostEvent::Answered { .. } => Some(u64::MAX),
        _ => None,
    })
    .await;
    assert_eq!(withdrawn, question.id);
    assert_eq!(turn_end(&mut owner, 1).await, "cancelled");
    assert!(live.questions().is_empty());
    assert_eq!(sessions.zap.runs(), 0);
}
