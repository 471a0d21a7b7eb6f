//! # keel-engine
//!
//! The agent loop: the model reads, edits, runs, sees errors and iterates until done.
//!
//! Work in progress (issue #5): this crate grows module by module; see docs/ARCHITECTURE.md.

// Modules, one concept each (sessions, hooks, prompt, permissions, approvals, events, loop).
mod agent;
mod approval;
pub mod compaction;
mod error;
mod events;
pub mod history;
pub mod hooks;
pub mod permissions;
pub mod prompt;
mod session;
pub mod session_store;

pub use agent::{Agent, AgentBuilder, DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_TOKENS};
pub use approval::{AllowAll, ApprovalRequest, Approver, CallbackApprover, Decision, DenyGated};
pub use compaction::{
    Compaction, CompactionError, CompactionPolicy, compact, estimate_tokens, is_valid_cut,
    needs_compaction, rebuild, split_point, summary_request,
};
pub use error::EngineError;
pub use events::{AgentEvent, RunOutcome, Stop};
pub use hooks::{
    Hook, HookConfig, HookConfigError, HookEvent, HookInput, HookOutcome, HookReport, Hooks,
    PermissionDecision,
};
pub use permissions::{PermissionError, PermissionRule, PermissionRules, Verdict};
pub use prompt::{
    GitSummary, InstructionFile, ProjectContext, SYSTEM_PROMPT, gather_context, system_prompt,
};
pub use session::{CancelHandle, Session};
pub use session_store::{
    JsonlSessionStore, LoadedSession, MemorySessionStore, SessionError, SessionLog, SessionMeta,
    SessionRecord, SessionStore, SessionSummary, validate_id,
};
