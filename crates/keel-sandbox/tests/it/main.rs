//! keel-sandbox's integration tests: one binary, a module per area. (A binary per file would
//! link each one on its own, statically; see .cargo/config.toml.)

// Tests are exempt from the long-function rule.
#![allow(clippy::too_many_lines)]

mod common;

mod atomic_kill;
mod classify;
mod classify_deletions;
#[cfg(feature = "git")]
mod commit_preview;
#[cfg(feature = "confine")]
mod confinement;
mod default_tools;
mod editor_files;
mod escape;
mod file_tools;
#[cfg(feature = "git")]
mod git_session;
#[cfg(feature = "git")]
mod git_tools;
#[cfg(feature = "confine")]
mod landlock;
mod lean_tools;
#[cfg(feature = "confine")]
mod network;
mod process;
mod protected;
mod run_command;
mod search_tools;
