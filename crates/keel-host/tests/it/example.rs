//! The session-host example (`examples/host.rs`), run: two sessions at once, their questions
//! answered by the host's own policy.

#[path = "../../../../examples/host.rs"]
mod host_example;

use keel::engine::Decision;
use keel_host::Answer;

#[tokio::test]
async fn the_example_host_runs_two_sessions_and_answers_their_questions_itself() {
    let dir = tempfile::tempdir().unwrap();
    let reports = host_example::run(dir.path()).await.unwrap();
    assert_eq!(reports.len(), 2);
    let (build, src) = (&reports[0], &reports[1]);
    assert_eq!(build.command, "rm -rf build");
    assert_eq!(build.answer, Some(Answer::Decision(Decision::Allow)));
    assert_eq!(build.stop.as_deref(), Some("completed"));
    assert!(!build.build_left, "the allowed command ran");
    assert!(build.src_left);
    assert_eq!(src.command, "rm -rf src");
    assert!(
        matches!(&src.answer, Some(Answer::Decision(Decision::Deny(why))) if why.contains("build directories only")),
        "{:?}",
        src.answer
    );
    assert_eq!(src.stop.as_deref(), Some("completed"));
    assert!(src.src_left, "the refused command did not run");
}
