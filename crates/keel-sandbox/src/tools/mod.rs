//! The built-in tools. Names and arguments are a public contract: keep them exactly.

// File tools.

// Search tools.

// Command tools.
mod run_command;
pub use run_command::{RunCommand, RunCommandArgs};

// Git tools.
