//! keel's integration tests: one binary, a module per area. (A binary per file would
//! link each one on its own, statically; see .cargo/config.toml.)

// Tests are exempt from the long-function rule.
#![allow(clippy::too_many_lines)]

mod examples;
mod mcp;
mod memory;
mod permission_rules;
#[cfg(all(feature = "delegation", feature = "snapshots", feature = "tasks"))]
mod policies;
mod profiles;
mod skill_grants;
#[cfg(all(feature = "tasks", feature = "snapshots"))]
mod tasks;
mod tiers;
