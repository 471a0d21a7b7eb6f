//! # keel-engine
//!
//! The agent loop: the model reads, edits, runs, sees errors and iterates until done.
//!
//! Work in progress (issue #5): this crate grows module by module; see docs/ARCHITECTURE.md.

// Modules, one concept each (sessions, hooks, prompt, permissions, approvals, events, loop).
pub mod permissions;
pub mod prompt;

pub use permissions::{PermissionError, PermissionRule, PermissionRules, Verdict};
pub use prompt::{
    GitSummary, InstructionFile, ProjectContext, SYSTEM_PROMPT, gather_context, system_prompt,
};
