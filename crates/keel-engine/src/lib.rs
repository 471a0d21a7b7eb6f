//! # keel-engine
//!
//! The agent loop: the model reads, edits, runs, sees errors and iterates until done.
//!
//! Work in progress (issue #5): this crate grows module by module; see docs/ARCHITECTURE.md.

// Modules, one concept each (sessions, hooks, prompt, permissions, approvals, events, loop).

pub mod hooks;

pub use hooks::{
    Hook, HookConfig, HookConfigError, HookEvent, HookInput, HookOutcome, HookReport, Hooks,
    PermissionDecision,
};
