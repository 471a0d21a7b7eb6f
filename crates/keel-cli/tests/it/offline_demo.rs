//! The offline demo (`cargo run --example offline_demo`) runs its scenario for real: the
//! test fails before the scripted fix and passes after it, and the fix is committed.

// The example's file, as a module: its `main` and the fields the test does not read are unused.
#[allow(dead_code)]
#[path = "../../../../examples/offline_demo.rs"]
mod demo;

#[tokio::test]
async fn the_scripted_model_fixes_the_bug_with_the_real_tools() {
    let mut out = Vec::new();
    let report = demo::run_demo(&mut out).await.unwrap();
    let out = String::from_utf8(out).unwrap();

    assert!(
        out.contains("SCRIPTED STAND-IN"),
        "no scripted label:\n{out}"
    );
    let names: Vec<&str> = report.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "run_command",
            "patch_file",
            "run_command",
            "git_commit"
        ]
    );
    // The test really fails first, then passes; every other call succeeds.
    let failing = &report.calls[1];
    assert!(failing.is_error, "{}", failing.output);
    assert!(failing.output.contains("FAIL sum_to 4: expected 10, got 6"));
    assert!(failing.output.contains("[exit code 1]"));
    let passing = &report.calls[3];
    assert!(!passing.is_error, "{}", passing.output);
    assert!(!passing.output.contains("FAIL"), "{}", passing.output);
    assert!(passing.output.contains("ok   sum_to 4"));
    for (i, call) in report.calls.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert!(
            !call.is_error,
            "call {i} ({}) failed: {}",
            call.name, call.output
        );
    }

    assert_eq!(report.outcome.stop, keel::engine::Stop::Completed);
    assert!(out.contains(&report.outcome.text));
    // The fix is on disk and committed on top of the initial commit.
    let fixed = std::fs::read_to_string(report.repo.join("sum.sh")).unwrap();
    assert!(fixed.contains("i <= n") && !fixed.contains("i < n;"));
    assert_eq!(report.log.len(), 2, "{:?}", report.log);
    assert!(report.log[0].ends_with(" Fix off-by-one in sum_to"));
    assert!(report.log[1].ends_with(" Add sum_to and its test"));
    assert!(out.contains(&report.log[0]));
    let repo = git2::Repository::open(&report.repo).unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let message = head.message().unwrap();
    assert!(message.contains("Keel-Session: "), "{message}");
    let blob = head
        .tree()
        .unwrap()
        .get_path(std::path::Path::new("sum.sh"))
        .unwrap();
    let committed = repo.find_blob(blob.id()).unwrap();
    assert_eq!(committed.content(), fixed.as_bytes());
    let status = repo.statuses(None).unwrap();
    assert!(status.is_empty(), "work tree not clean after the commit");

    // The session was saved, and its file named in the output.
    let session = std::fs::read_to_string(&report.session_file).unwrap();
    assert!(session.contains("patch_file"));
    assert!(out.contains(&report.session_file.display().to_string()));
}
