//! # keel-agents
//!
//! Delegation: an agent hands a focused job to a fresh agent and gets back what happened.
//!
//! - [`CodeTool`] (`code`): stateless delegation for any host: "do this coding task in that
//!   directory", a fresh session with the default tools, a log file, the final text.
//! - Sub-agents ([`AgentDefinitions`], [`SpawnAgentTool`] `spawn_agent`): named agents defined
//!   in Markdown files, run with only their task, narrowed tools, a step cap and a token
//!   budget, under the parent's approver and sandbox.
//! - Teams ([`TeamDefinitions`], [`RunTeamTool`] `run_team`): agents in a pipeline, each one's
//!   output the next one's task.
//! - Skills ([`SkillIndex`], [`UseSkillTool`] `use_skill`): instructions loaded on demand.
//! - Custom slash commands ([`SlashCommands`]): Claude Code's `.claude/commands/*.md`
//!   prompts, expanded with their arguments (never running what they hold).
//!
//! Claude Code's files are read as Claude Code reads them: `.claude/agents`, `.claude/skills`
//! and `.claude/commands` of the project, and of the user ([`claude_user_dir`]), with tool
//! names translated through [`keel_tool::claude`].
//!
//! Background tasks (`start_task` and its companions, SQLite-backed) live in the
//! `keel-tasks` crate, so a host that only delegates links no SQLite; they reach sub-agents
//! through [`SubAgentRunner::with_extra_tools`].
//!
//! Every delegated run shares a [`Delegation`]: the parent's provider, models and
//! [`Policies`] (approver, permission rules, hooks, sandbox policy, allow-read paths), taken
//! whole, so a delegated run can never do what its parent may not. A
//! delegated run never fails its caller's loop: whatever happens comes back as text.
//!
//! Delegation stays inside: the directory the model names for `code` (`cwd`) must resolve
//! (symlinks followed, `..` removed) inside the session's [`roots`], its workspace and its
//! sandbox policy's writable roots (keel-tasks checks a task's `workdir` the same way);
//! `code` sessions get the parent's sandbox policy and allow-read paths. Agent, team and
//! skill files reached through a symlink that leads out of their folder are skipped with a
//! warning, so a repository cannot pull outside files into a prompt.
//!
//! ```
//! use std::sync::Arc;
//! use keel_agents::{
//!     AgentDefinition, AgentDefinitions, Delegation, Models, Policies, SubAgentLimits,
//!     SubAgentRunner,
//! };
//! use keel_sandbox::SandboxPolicy;
//! use keel_tool::ToolRegistry;
//! use keel_test_support::scripted::ScriptedProvider;
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! // A scripted model stands in for the provider.
//! let model = Arc::new(ScriptedProvider::new().then_text("Looks fine to me."));
//! let reviewer = AgentDefinition {
//!     name: "reviewer".into(),
//!     description: "Reviews a change".into(),
//!     tools: Some(vec!["grep".into()]),
//!     model: Some("haiku".into()), // Claude Code's alias: claude-haiku-5-5
//!     system_prompt: "You review code.".into(),
//!     path: "reviewer.md".into(),
//!     ..AgentDefinition::default()
//! };
//! let runner = SubAgentRunner::new(
//!     Delegation::new(
//!         model.clone(),
//!         Models::new("claude-sonnet-4-5", "claude-haiku-4-5"),
//!         Policies::new(SandboxPolicy::default()), // the parent's, taken whole
//!     ),
//!     Arc::new(AgentDefinitions::from_definitions(vec![reviewer])),
//!     ToolRegistry::new(), // the parent's tools: the sub-agent gets at most these
//!     SubAgentLimits::default(),
//! );
//! let cwd = std::env::temp_dir();
//! let cancel = Default::default();
//! let report = runner.run("reviewer", "Review the last commit", &cwd, &cancel).await?;
//! assert_eq!(report.output, "Looks fine to me.");
//! assert_eq!(report.error, None);
//! // The sub-agent saw only its own prompt and task, on the small model.
//! let request = &model.requests()[0];
//! assert_eq!(request.model, "claude-haiku-5-5");
//! assert_eq!(request.system.as_deref(), Some("You review code."));
//! assert_eq!(request.messages.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Modules, one concept each.
#[cfg(feature = "delegation")]
mod code;
pub mod commands;
mod delegation;
mod error;
pub mod frontmatter;
mod project;
pub mod roots;
#[cfg(feature = "delegation")]
mod run;
mod skills;
#[cfg(feature = "delegation")]
mod subagents;
#[cfg(feature = "delegation")]
mod teams;
mod tool_names;
pub use tool_names::KEEL_TOOLS;

#[cfg(feature = "delegation")]
pub use code::{CodeArgs, CodeModel, CodeTool};
pub use commands::{CommandDir, CommandOrigin, SlashCommand, SlashCommands};
#[cfg(feature = "delegation")]
pub use delegation::Delegation;
pub use delegation::{Models, Policies};
pub use error::AgentsError;
pub use frontmatter::claude_user_dir;
#[cfg(feature = "git")]
pub use project::STATUS_MAX_TRACKED;
pub use project::{project_context, project_context_from, project_root};
#[cfg(feature = "delegation")]
pub use run::{CallRecord, RunReport, run_reporting, run_to_end};
pub use skills::{
    Activation, GrantingApprover, SkillGrants, SkillIndex, SkillSummary, UseSkillArgs, UseSkillTool,
};
#[cfg(feature = "delegation")]
pub use subagents::{
    AgentDefinition, AgentDefinitions, ExtraTools, PermissionMode, SpawnAgentArgs, SpawnAgentTool,
    SubAgentLimits, SubAgentRunner, keel_tool_for_claude, render_report,
};
#[cfg(feature = "delegation")]
pub use teams::{RunTeamArgs, RunTeamTool, TeamDefinition, TeamDefinitions, TeamReport, TeamStep};

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
