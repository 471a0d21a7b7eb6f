//! keel-provider's integration tests: one binary, a module per area. (A binary per file would
//! link each one on its own, statically; see .cargo/config.toml.)

// Tests are exempt from the long-function rule.
#![allow(clippy::too_many_lines)]

mod anthropic_wire;
mod faults;
mod from_env;
mod gateway_quirks;
mod gateways;
mod images;
mod limits;
mod model_list;
mod openai_wire;
mod request_bodies;
mod responses_wire;
mod router;
mod served_context;
mod sse_chunking;
mod usage;
