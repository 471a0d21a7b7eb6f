// Unit tests are exempt from the long-function rule; the library's own code is not.
#![cfg_attr(test, allow(clippy::too_many_lines))]
//! # keel-engine
//!
//! The agent loop: the model reads, edits, runs, sees errors and iterates until done.
//!
//! - [`Agent`] holds the provider, model, tools and policies; [`Agent::session`] starts a
//!   [`Session`], [`Agent::resume`] reopens a saved one.
//! - [`Session::run`] runs one prompt to its end and returns a [`RunOutcome`];
//!   [`Session::run_streaming`] yields [`AgentEvent`]s as it goes; a [`CancelHandle`] stops
//!   it promptly, mid-stream or mid-tool, and the next prompt works.
//! - Every request keeps each `tool_use` paired with exactly one `tool_result`
//!   ([`history`]); calls cut off, denied or interrupted get an error result the model reads.
//! - Gated calls go through [`PermissionRules`], [`Hooks`] and an [`Approver`]
//!   ([`DenyGated`] by default: headless runs never do destructive things unasked). An
//!   "always" answer covers one [`ApprovalScope`] (the tool with that exact command, path or
//!   input), never the whole tool; a protected call (`Effect::Protected`: keel's config, a
//!   repository's `.git`) reaches the approver every time, whatever allow rules, hooks and
//!   earlier answers say; [`Decision::Cancel`] ends the run as cancelled.
//! - Sessions are saved as they happen, write-ahead ([`JsonlSessionStore`]: a reply's calls
//!   are in the file before they run, each result as its call ends), and resumed to a valid
//!   history after a kill at any point ([`history::canonicalize`]); a reply cut off
//!   mid-stream is dropped and asked for again ([`AgentEvent::ReplyDiscarded`]).
//! - With [`AgentBuilder::snapshots`], the workspace is snapshotted before every call that
//!   may change it; [`Session::rewind_to`] takes the conversation back to a snapshot's point.
//!
//! ```
//! use std::sync::Arc;
//! use keel_engine::{Agent, Stop};
//! use keel_test_support::scripted::ScriptedProvider;
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! // A scripted model: it asks for a tool that does not exist, then answers.
//! let model = ScriptedProvider::new()
//!     .then_tool_call("call_1", "read_file", serde_json::json!({"path": "README.md"}))
//!     .then_text("There is no read_file tool here, so I answer from memory.");
//! let agent = Agent::builder(Arc::new(model)).model("claude-sonnet-4-5").build()?;
//! let mut session = agent.session(".")?;
//! let outcome = session.run("What does the README say?").await;
//! assert_eq!(outcome.stop, Stop::Completed);
//! assert_eq!(outcome.iterations, 2);
//! // The failed call was answered, not dropped: the history stays well-formed.
//! keel_engine::history::check_pairing(session.history())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Modules, one concept each (sessions, hooks, prompt, permissions, approvals, events, loop).
mod agent;
mod approval;
pub mod compaction;
mod error;
mod events;
mod failure;
pub mod history;
pub mod hooks;
pub mod memory;
mod notify;
pub mod permissions;
pub mod prompt;
pub mod repair;
mod session;
pub mod session_store;

pub use agent::{
    Agent, AgentBuilder, DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_TOKENS, DEFAULT_STREAM_RETRIES,
};
pub use approval::{
    AllowAll, ApprovalRequest, ApprovalScope, Approver, CallbackApprover, Decision, DenyGated,
    ScopePattern,
};
pub use compaction::{Compaction, CompactionError, CompactionPolicy};
pub use error::EngineError;
pub use events::{AgentEvent, Compacted, RunOutcome, Stop};
pub use failure::{FailureKind, RunFailure};
pub use hooks::{
    CompactTrigger, Hook, HookAnswer, HookConfig, HookConfigError, HookEvent, HookEventInput,
    HookInput, HookOutcome, HookReport, HookSessionInfo, HookSubagent, HookToolCall,
    HookToolResponse, Hooks, PermissionDecision, SessionEndReason, SessionStartSource,
    answer_from_json, outcome_from_json,
};
pub use keel_provider::{CostByProvider, ProviderCost};
pub use memory::{
    LoadedMemory, Memory, MemoryReport, MemorySource, MemorySources, SkipReason, SkippedMemory,
    load_memory,
};
pub use notify::Notifier;
pub use permissions::{
    PermissionError, PermissionRule, PermissionRules, RuleContext, RuleTexts, Verdict,
};
pub use prompt::{
    GitSummary, InstructionFile, LEAN_SYSTEM_PROMPT, ProjectContext, SYSTEM_PROMPT, gather_context,
    gather_context_from, lean_system_prompt, system_prompt,
};
pub use session::{CancelHandle, Session};
pub use session_store::{
    JsonlSessionStore, LoadedSession, MemorySessionStore, SessionError, SessionLog, SessionMeta,
    SessionRecord, SessionStore, SessionSummary, validate_id,
};

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
