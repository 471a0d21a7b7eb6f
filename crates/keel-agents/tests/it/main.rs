//! keel-agents's integration tests: one binary, a module per area. (A binary per file would
//! link each one on its own, statically; see .cargo/config.toml.)

// Tests are exempt from the long-function rule.
#![allow(clippy::too_many_lines)]

mod claude_files;
mod code_tool;
mod project;
mod skills;
mod subagents;
