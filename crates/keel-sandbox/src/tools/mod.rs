//! The built-in tools. Names and arguments are a public contract: keep them exactly.

// File tools.

// Search tools.

// Command tools.

// Git tools.
mod git;
pub use git::{GitCommit, GitCommitArgs, GitDiff, GitDiffArgs, GitStatus, GitStatusArgs};
