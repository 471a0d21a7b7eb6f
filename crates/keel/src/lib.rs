//! # keel
//!
//! The keel coding agent as a library: the front door a Rust host depends on.
//!
//! [`CodingAgent::builder`] assembles exactly the agent `keel exec` runs — the built-in file,
//! search, shell and git tools confined to the workspace, the system prompt with the project's
//! context (`AGENTS.md`, git state), delegation (`code`, `spawn_agent`, `run_team`), skills,
//! background tasks with their notifications, snapshots before every change, the session
//! store — under one set of [`Policies`] (approver, permission rules, hooks, sandbox policy)
//! that every delegated run takes whole: a delegated run is never freer than its parent.
//! The `keel` CLI is this builder plus flags, config files and rendering.
//! [`CodingAgent::from_env`] is the builder with its defaults and the provider the environment
//! names; with [`CodingAgent::prompt`] a host is two statements:
//! `CodingAgent::from_env()?.prompt("Fix the failing test").await?`.
//!
//! For a model with a small context window (a local one on Ollama, llama.cpp or vLLM), the
//! [lean](ToolProfile::Lean) [`ToolProfile`] offers six tools under short definitions with a
//! short prompt; it is chosen by itself when the model's known window is at most
//! [`SMALL_CONTEXT_WINDOW`] tokens (give the builder what
//! [`Provider::served_context`](keel_provider::Provider::served_context) answers), and
//! [`CodingAgent::context_overflow`] says when a first request would not fit.
//!
//! ```
//! use std::sync::Arc;
//! use keel::prelude::*;
//! use keel_test_support::scripted::ScriptedProvider;
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let workspace = tempfile::tempdir()?;
//! let home = tempfile::tempdir()?;
//! // A scripted model stands in for a provider (use keel::provider::from_env() for real).
//! let model = Arc::new(ScriptedProvider::new().then_text("Nothing to fix."));
//! let agent = CodingAgent::builder(model.clone())
//!     .cwd(workspace.path())
//!     .home(home.path())
//!     .build()?;
//! let mut session = agent.session()?;
//! let outcome = session.run("Fix the failing test").await;
//! assert_eq!(outcome.stop, Stop::Completed);
//! // The request carried keel's system prompt and its tools.
//! let request = &model.requests()[0];
//! assert!(request.system.as_deref().unwrap_or_default().starts_with("You are keel"));
//! assert!(request.tools.iter().any(|tool| tool.name == "patch_file"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//!
//! All on by default; each owns a heavy dependency, so a host can leave out what it does
//! not use:
//!
//! - `confine`: Landlock and seccomp confinement of commands. Without it, commands under a
//!   workspace-write or read-only policy are refused (as on a kernel without Landlock) unless
//!   the policy allows running them unconfined: never silently unconfined.
//! - `git`: the git tools (`git_status`, `git_diff`, `git_commit`) and the repository's state
//!   in the system prompt (libgit2).
//! - `delegation`: `code`, `spawn_agent` and `run_team`. Skills stay without it.
//! - `snapshots`: a snapshot of the workspace before every change, for rewinding
//!   (keel-snapshot: a shadow git repository, libgit2).
//! - `tasks`: background tasks in a SQLite store (needs `delegation`).
//! - `mcp`: tools from MCP servers ([`CodingAgentBuilder::mcp_servers`], the client in
//!   [`mcp`]) and, with `delegation`, the agent's `code` and task tools served to MCP hosts
//!   (`mcp_host`).

// Unit tests may run long (a scenario and its checks); library functions stay within 120 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

mod agent;
#[cfg(feature = "tasks")]
mod background;
mod builder;
mod delegates;
mod error;
mod home;
#[cfg(all(feature = "mcp", feature = "delegation"))]
pub mod mcp_host;
mod profile;
mod protected;

pub use agent::{CodingAgent, RunEvent, TASKS_ENDED_PROMPT};
#[cfg(feature = "tasks")]
pub use background::{BackgroundTasks, TaskLauncher, TaskNotifier, open_task_store};
pub use builder::CodingAgentBuilder;
pub use delegates::Delegates;
pub use error::BuildError;
pub use home::{Home, home_dir, home_dir_from, user_home_dir, user_memory_files};
pub use keel_agents::KEEL_TOOLS;
pub use profile::{
    ContextOverflow, ContextWindow, ProfileChoice, SMALL_CONTEXT_WINDOW, ToolProfile, WindowOrigin,
};

pub use keel_agents::Policies;

/// The crates under the front door, for what the prelude leaves out.
pub use keel_agents as agents;
pub use keel_engine as engine;
#[cfg(feature = "mcp")]
pub use keel_mcp as mcp;
pub use keel_provider as provider;
pub use keel_sandbox as sandbox;
#[cfg(feature = "snapshots")]
pub use keel_snapshot as snapshot;
#[cfg(feature = "tasks")]
pub use keel_tasks as tasks;
pub use keel_tool as tool;

/// What a host needs to build, run and extend the agent, `#[async_trait]` included: a host
/// implementing [`Approver`](keel_engine::Approver), [`Hook`](keel_engine::Hook),
/// [`Provider`](keel_provider::Provider) or [`ToolSource`](keel_tool::ToolSource) needs no
/// dependency of its own for it.
///
/// ```
/// use keel::prelude::*;
///
/// /// Allows `cargo` commands; refuses every other gated call, saying why.
/// struct CargoOnly;
///
/// #[async_trait]
/// impl Approver for CargoOnly {
///     async fn approve(&self, request: &ApprovalRequest) -> Decision {
///         let command = request.input["command"].as_str().unwrap_or_default();
///         if request.tool == "run_command" && command.starts_with("cargo ") {
///             Decision::Allow
///         } else {
///             Decision::Deny(format!("only cargo commands, not {}", request.tool))
///         }
///     }
/// }
/// ```
pub mod prelude {
    pub use crate::{BuildError, CodingAgent, CodingAgentBuilder, Policies, RunEvent};
    pub use async_trait::async_trait;
    pub use keel_engine::{
        AgentEvent, AllowAll, ApprovalRequest, Approver, Decision, DenyGated, HookConfig, Hooks,
        PermissionRules, RunOutcome, Session, Stop,
    };
    pub use keel_provider::{AnthropicProvider, OpenAiProvider, Provider};
    pub use keel_sandbox::{SandboxMode, SandboxPolicy};
    pub use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
}

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;

/// The workspace README's Rust examples, compiled as doctests so the README stays true. They
/// live in the highest crate the README's examples use: this one.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
