//! keel-host's integration tests: one binary, a module per area.

// Tests are exempt from the long-function rule; their helpers (outside `#[test]` functions)
// may unwrap and panic: a setup failure is a test failure.
#![allow(
    clippy::too_many_lines,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod example;
mod fanout;
mod lifecycle;
mod questions;
mod rewind;
mod support;
