//! One test of the running test binary, run again alone in a child process.
//!
//! A crate's integration tests share one binary, and its tests run on threads of one process.
//! A test that needs something process-wide of its own (environment variables, another
//! sandbox mode, a process to SIGKILL) runs its body in a child: the same binary, selected
//! by the test's full name, with an environment variable that tells the body it is the child.
//!
//! The test starts with the child's side (`if std::env::var_os(MARKER).is_some() { ... }`),
//! and otherwise runs `rerun::run(rerun::command(module_path!(), "its_name").env(MARKER, "1"))`.

use std::process::{Command, Output};

/// The name libtest gives test `test` of the module whose `module_path!()` is `module_path`:
/// the path without the crate's name (`it::reaper` and `spares` make `reaper::spares`).
pub fn test_name(module_path: &str, test: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, module)) => format!("{module}::{test}"),
        None => test.to_owned(),
    }
}

/// A command that runs test `test` of module `module_path` (its `module_path!()`) of this
/// test binary, and nothing else: `--exact`, one thread, its output not captured. The caller
/// adds the environment that tells the test it is the child.
pub fn command(module_path: &str, test: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args([
        "--exact",
        &test_name(module_path, test),
        "--test-threads=1",
        "--nocapture",
    ]);
    command
}

/// Runs `command` (from [`command`]) to its end and returns its output; panics, showing that
/// output, unless it succeeded having run exactly one test (a name that selects no test would
/// pass without running anything).
pub fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let ran_one = stdout
        .lines()
        .any(|line| line.starts_with("test result: ok. 1 passed;"));
    assert!(
        output.status.success() && ran_one,
        "{command:?}: {}, not one test passed\n--- stdout\n{stdout}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}
