//! The built-in tools. Names and arguments are a public contract: keep them exactly.

// File tools.
mod editor;
mod patch_file;
mod read_file;
mod write_file;
pub use patch_file::{MAX_PATCH_BYTES, PatchFile, PatchFileArgs};
pub use read_file::{MAX_LINE_CHARS, MAX_LINES, MAX_OUTPUT_CHARS, ReadFile, ReadFileArgs};
pub use write_file::{WriteFile, WriteFileArgs};

// Search tools.
mod glob;
mod grep;
mod list_directory;
pub use glob::{Glob, GlobArgs};
pub use grep::{Grep, GrepArgs};
pub use list_directory::{ListDirectory, ListDirectoryArgs};

// Command tools.
mod run_command;
pub use run_command::{RunCommand, RunCommandArgs};

// Git tools (the `git` feature).
#[cfg(feature = "git")]
mod git;
#[cfg(feature = "git")]
pub use git::{GitCommit, GitCommitArgs, GitDiff, GitDiffArgs, GitStatus, GitStatusArgs};
