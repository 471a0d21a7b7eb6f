//! keel-engine's integration tests: one binary, a module per area. (A binary per file would
//! link each one on its own, statically; see .cargo/config.toml.)

// Tests are exempt from the long-function rule.
#![allow(clippy::too_many_lines)]

mod common;

mod agent_loop;
mod approvals;
mod claude_rules;
mod compaction;
mod compaction_in_loop;
mod crash_resume;
mod delegated_cost;
mod end_to_end;
mod hooks;
mod hooks_claude;
mod hooks_env;
mod hooks_in_loop;
mod images;
mod iteration_note;
mod memory;
mod pairing_property;
mod permissions;
mod persistence;
mod prompt;
mod session_control;
mod session_store;
mod snapshots_and_rewind;
mod stream_retry;
mod tool_call_repair;
mod tool_ids;
mod tool_sources;
mod wire_loop;
