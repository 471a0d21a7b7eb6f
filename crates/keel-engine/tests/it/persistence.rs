//! Sessions saved as they happen, and resumed exactly.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::sync::Arc;

use keel_engine::{Agent, EngineError, JsonlSessionStore, SessionStore, Stop};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

fn agent(
    provider: Arc<ScriptedProvider>,
    store: Arc<JsonlSessionStore>,
    dir: &std::path::Path,
) -> Agent {
    Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default()).unwrap())
        .session_store(store)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_session_is_saved_as_it_goes_and_resumes_exactly() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.txt"), "hello\n").unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = Arc::new(JsonlSessionStore::new(home.path().join("sessions")));
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "read_file", json!({"path": "notes.txt"}))
            .then_text("It says hello.")
            .then_text("Second answer."),
    );
    let agent = agent(provider.clone(), store.clone(), work.path());
    let mut session = agent.session(work.path()).unwrap();
    let id = session.id().to_owned();
    assert_eq!(
        session.run("what does notes.txt say?").await.stop,
        Stop::Completed
    );

    // The file already holds everything, before the session is dropped.
    let loaded = store.load(&id).unwrap();
    assert_eq!(loaded.messages, session.history());
    assert_eq!(loaded.last_outcome.as_ref().unwrap().0, "completed");
    assert_eq!(loaded.usage.input_tokens, 20);
    assert!(session.persistence_error().is_none());
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(store.path_of(&id).unwrap())
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let history = session.history().to_vec();
    drop(session);

    // Resume: the same history, and the next prompt continues it.
    let mut resumed = agent.resume(&id).unwrap();
    assert_eq!(resumed.history(), history.as_slice());
    assert_eq!(resumed.cwd(), work.path());
    assert_eq!(resumed.run("and again?").await.stop, Stop::Completed);
    let last_request = provider.requests().pop().unwrap();
    assert_eq!(last_request.messages.len(), history.len() + 1);
    assert_eq!(store.load(&id).unwrap().messages, resumed.history());

    // The latest session for the directory is this one.
    assert_eq!(agent.resume_latest(work.path()).unwrap().id(), id);
}

#[tokio::test]
async fn a_crash_mid_write_loses_only_the_broken_line() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = Arc::new(JsonlSessionStore::new(home.path()));
    let provider = Arc::new(ScriptedProvider::new().then_text("one").then_text("two"));
    let agent = agent(provider, store.clone(), work.path());
    let mut session = agent.session(work.path()).unwrap();
    let id = session.id().to_owned();
    session.run("first").await;
    let saved = session.history().to_vec();
    drop(session);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(store.path_of(&id).unwrap())
        .unwrap();
    file.write_all(b"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"con")
        .unwrap();
    drop(file);

    let mut resumed = agent.resume(&id).unwrap();
    assert_eq!(resumed.history(), saved.as_slice());
    assert_eq!(resumed.run("second").await.stop, Stop::Completed);
    let loaded = store.load(&id).unwrap();
    assert_eq!(loaded.messages, resumed.history());
}

#[test]
fn resuming_without_a_store_or_session_says_why() {
    let agent = Agent::builder(Arc::new(ScriptedProvider::new()))
        .model("m")
        .build()
        .unwrap();
    let err = agent.resume("x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent configuration: resuming needs a session store: call .session_store(..)"
    );
    let home = tempfile::tempdir().unwrap();
    let agent = Agent::builder(Arc::new(ScriptedProvider::new()))
        .model("m")
        .session_store(Arc::new(JsonlSessionStore::new(home.path())))
        .build()
        .unwrap();
    assert!(matches!(
        agent.resume_latest(home.path()),
        Err(EngineError::NoSession(_))
    ));
    assert!(agent.resume("../../etc/passwd").is_err());
}
