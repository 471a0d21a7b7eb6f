//! Helpers shared by the sandbox's integration tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// Runs `test` here, then — unless this process already runs without namespaces — again in a
/// child test process (this test only: `name` in the module whose `module_path!()` is
/// `module_path`) with `KEEL_SANDBOX_NO_NAMESPACES=1`, so both the namespace path and the
/// detect-and-restore path are tested.
pub(crate) fn in_both_modes(module_path: &str, name: &str, test: impl AsyncFnOnce()) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(test());
    if std::env::var_os("KEEL_SANDBOX_NO_NAMESPACES").is_some() {
        return;
    }
    keel_test_support::rerun::run(
        keel_test_support::rerun::command(module_path, name).env("KEEL_SANDBOX_NO_NAMESPACES", "1"),
    );
}
