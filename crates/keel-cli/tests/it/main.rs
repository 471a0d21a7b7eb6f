//! keel-cli's integration tests: one binary, a module per area. (A binary per file would
//! link each one on its own, statically; see .cargo/config.toml.)

// Tests are exempt from the long-function rule.
#![allow(clippy::too_many_lines)]

mod support;

mod acp;
mod acp_editor;
mod acp_sdk;
mod attacks_escape;
mod attacks_repo;
mod claude_config;
mod claude_sdk;
mod consent;
mod delegation;
mod exec;
mod faults;
mod front_door;
mod linking;
mod listings;
mod logs;
mod mcp;
mod mcp_server;
mod offline_demo;
mod print_mode;
mod repl;
mod repl_input;
mod repl_output;
mod repl_status;
mod responses;
mod rewind;
mod signals;
mod small_models;
mod tasks;
mod tiers;
mod tool_repair;
mod trouble;
mod usage_errors;
