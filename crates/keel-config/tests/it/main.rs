//! keel-config's integration tests: one binary, a module per area.

// Tests are exempt from the long-function rule; their helpers may unwrap: a setup failure is
// a test failure.
#![allow(
    clippy::too_many_lines,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod trust;
