//! # keel-test-support
//!
//! Helpers shared by every keel crate's tests. Not for production use: helpers panic on
//! setup failures, since a broken fixture should fail the test loudly.
//!
//! - [`wire`]: the streams recorded from the real APIs in `shared/wire/`, read verbatim.
//! - [`events`]: a provider's stream run to its end, events folded into a reply.
//! - [`mock`]: wiremock servers that serve those streams (or any SSE body) on loopback.
//! - [`raw_http`]: a loopback HTTP server that misbehaves on purpose: cuts a stream
//!   mid-way, or stops sending.
//! - [`scripted`]: a [`Provider`](keel_provider::Provider) that replays scripted replies and
//!   records every request.
//! - [`render`]: scripted replies rendered in the Anthropic and OpenAI wire formats.
//! - [`rerun`]: one test run again alone in a child process (the same test binary), for
//!   what must not be shared with the tests on the other threads: environment variables.
//! - [`rng`]: a seeded generator for property-style tests.
//! - [`temp`]: temporary directories.
//! - [`git`]: temporary git repositories.
//! - [`manifest`]: a directory tree described byte for byte (paths, bytes, modes, links).
//! - [`images`]: small valid images (and huge ones) for tool results that carry images.
//! - [`peers`]: the real protocol peers `.ci/peers` installs (MCP servers, the MCP Python SDK,
//!   acpx, the ACP TypeScript SDK).
//!
//! ```
//! use keel_provider::{CompletionRequest, Message, Provider};
//! use keel_test_support::scripted::ScriptedProvider;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let provider = ScriptedProvider::new().then_text("Hello!");
//! let request = CompletionRequest::new("any").message(Message::user("Hi"));
//! let reply = provider.tool_use_completion(&request).await.unwrap();
//! assert_eq!(reply.text(), "Hello!");
//! assert_eq!(provider.requests().len(), 1);
//! # });
//! ```

// Test helpers: a setup failure is a test failure, so unwrap and panic are the right tools.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Test code, not library code: the long-function limit is for library functions (a helper that
// renders a whole wire format, a stream of events, reads best as one).
#![allow(clippy::too_many_lines)]

pub mod events;
pub mod git;
pub mod images;
pub mod manifest;
pub mod mock;
pub mod peers;
pub mod raw_http;
pub mod render;
pub mod rerun;
pub mod rng;
pub mod scripted;
pub mod temp;
pub mod wire;

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
