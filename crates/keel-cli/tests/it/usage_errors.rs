//! Usage and configuration errors through the built binary: exit 2 and one line on stderr
//! that says what is wrong and how to fix it.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::*;

/// Runs keel with `args` in `home` (with a key and an unreachable provider), and returns its
/// exit code and stderr.
fn keel(home: &Home, keel_home: Option<&str>, args: &[&str]) -> (Option<i32>, String) {
    let mut command = home.keel();
    command
        .env("ANTHROPIC_API_KEY", FAKE_KEY)
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .current_dir(home.path())
        .args(args);
    if let Some(dir) = keel_home {
        command.env("KEEL_HOME", dir);
    }
    let output = command.output().unwrap();
    assert!(output.stdout.is_empty(), "{args:?} printed on stdout");
    (output.status.code(), stderr(&output))
}

#[test]
fn every_usage_error_is_one_line_with_the_fix_and_exit_2() {
    let home = Home::new();
    let file = home.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let cases: Vec<(Option<&str>, Vec<&str>, &str)> = vec![
        (None, vec!["--bogus"], "unexpected argument '--bogus' found"),
        (
            None,
            vec!["exec", "--output-format", "xml", "hi"],
            "use one of: 'text', 'json', 'stream-json' (see `keel exec --help`)",
        ),
        (
            None,
            vec!["--max-iterations", "x", "exec", "hi"],
            "invalid digit",
        ),
        (None, vec!["exce", "hi"], "did you mean 'exec'?"),
        (
            None,
            vec!["--model", "", "exec", "hi"],
            "--model needs a model name, e.g. --model claude-sonnet-4-5",
        ),
        (
            file.to_str(),
            vec!["exec", "hi"],
            "is not a writable directory",
        ),
        (
            Some("/proc/keel-home"),
            vec!["exec", "hi"],
            "keel's home /proc/keel-home is not a writable directory",
        ),
    ];
    for (keel_home, args, expected) in cases {
        let (code, err) = keel(&home, keel_home, &args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?} gave:\n{err}");
        assert!(err.starts_with("keel: "), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}
