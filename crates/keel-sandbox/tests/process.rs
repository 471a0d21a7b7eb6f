//! The process-group runner: input, output caps, the scrubbed environment, and a timeout that
//! kills the whole group (a grandchild too).

use std::time::Duration;

use keel_sandbox::ProcessGroupRunner;
use keel_tool::{ProcessError, ProcessRunner, ProcessSpec};

fn spec(script: &str) -> ProcessSpec {
    ProcessSpec::shell(script, std::env::temp_dir())
}

#[tokio::test]
async fn runs_to_the_end_with_input_exit_code_and_both_outputs() {
    let mut spec = spec("cat; echo oops >&2; exit 3");
    spec.stdin = b"{\"a\":1}".to_vec();
    let output = ProcessGroupRunner.run(spec).await.unwrap();
    assert_eq!(output.code, Some(3));
    assert_eq!(output.signal, None);
    assert_eq!(output.stdout, b"{\"a\":1}");
    assert_eq!(output.stderr, b"oops\n");
}

#[tokio::test]
async fn output_is_cut_to_its_cap_and_the_rest_is_drained() {
    let mut spec = spec("head -c 1000000 /dev/zero; echo done >&2");
    spec.output_cap = 100;
    let output = ProcessGroupRunner.run(spec).await.unwrap();
    assert_eq!(output.code, Some(0));
    assert_eq!(output.stdout.len(), 100);
    assert_eq!(output.stderr, b"done\n");
}

#[tokio::test]
async fn hidden_variables_stay_out_and_given_ones_go_in() {
    assert!(
        std::env::var_os("HOME").is_some(),
        "the test needs HOME set"
    );
    let mut spec = spec("echo \"[$HOME][$GIVEN]\"");
    spec.hidden_env = vec!["HOME".into()];
    spec.env = vec![("GIVEN".into(), "yes".into())];
    let output = ProcessGroupRunner.run(spec).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "[][yes]\n");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_group() {
    let marker = std::env::temp_dir().join(format!("keel-process-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    // The grandchild would write the marker after 2 s unless its group is killed.
    let mut spec = spec(&format!("(sleep 2; touch {}) & sleep 30", marker.display()));
    spec.timeout = Duration::from_millis(300);
    let error = ProcessGroupRunner.run(spec).await.unwrap_err();
    assert!(matches!(error, ProcessError::TimedOut { .. }), "{error}");
    assert_eq!(error.to_string(), "timed out after 0.3 s and was killed");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!marker.exists(), "the grandchild outlived the timeout");
}

#[tokio::test]
async fn a_missing_working_directory_is_a_spawn_error_naming_it() {
    let spec = ProcessSpec::shell("true", "/nonexistent/keel-dir");
    let error = ProcessGroupRunner.run(spec).await.unwrap_err();
    assert!(matches!(error, ProcessError::Spawn { .. }));
    assert!(
        error.to_string().contains("/nonexistent/keel-dir"),
        "{error}"
    );
}

#[test]
fn killing_groups_that_are_not_ours_sends_nothing() {
    // 0 would be this process's own group and 1 every process we may signal.
    keel_sandbox::kill_group(0).unwrap();
    keel_sandbox::kill_group(1).unwrap();
}
