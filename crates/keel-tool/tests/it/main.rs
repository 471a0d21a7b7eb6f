//! keel-tool's integration tests: one binary, a module per area. (A binary per file would
//! link each one on its own, statically; see .cargo/config.toml.)

// Tests are exempt from the long-function rule.
#![allow(clippy::too_many_lines)]

mod brief;
mod dispatch;
mod extend;
mod head_tail;
mod images;
mod schema;
mod sources;
