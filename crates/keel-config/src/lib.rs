//! # keel-config
//!
//! keel's configuration as a library: the files keel and Claude Code read, the trust that
//! guards them, and their resolution — with the flags a host passes — into one [`Settings`]
//! value that builds the agent. A host embedding keel (an editor plugin, a service, the `keel`
//! CLI itself) honours the same files under the same trust.
//!
//! - [`files`]: `$KEEL_HOME/config.toml` (the user's, trusted), the project's
//!   `.keel/config.toml`, Claude Code's `settings.json` files and `.mcp.json`, merged into one
//!   [`Config`] with each key's origin. An untrusted project may only tighten what keel does.
//! - [`trust`]: a project's trust, recorded in the user's config and pinned to a SHA-256 of the
//!   project's power-granting files ([`files::project::config_hash`]).
//! - [`Settings`]: [`Overrides`] (the host's flags), the environment and the [`Config`]
//!   resolved: provider and model (with [`tiers`]), approvals ([`modes`]), the sandbox
//!   policy, MCP servers; then [`Settings::agent`] and [`Settings::session`].
//!
//! Nothing a repository carries may widen what keel does: a project's keys that would grant a
//! power are ignored until the user trusts the project, and named in
//! [`Settings::notices`].
//!
//! ```standalone_crate
//! use keel_config::{Overrides, SessionChoice, Settings, Surface};
//!
//! let home = tempfile::tempdir()?;
//! let project = tempfile::tempdir()?;
//! // The example runs in a process of its own (standalone_crate): nothing else reads the
//! // environment meanwhile.
//! # unsafe {
//! std::env::set_var("KEEL_HOME", home.path());
//! std::env::set_var("OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
//! # }
//! std::fs::create_dir(project.path().join(".keel"))?;
//! // A repository asks for every call to run without a question: untrusted, it may not.
//! std::fs::write(project.path().join(".keel/config.toml"), "approvals = \"allow\"\n")?;
//!
//! let mut overrides = Overrides::default();
//! overrides.cwd = Some(project.path().to_path_buf());
//! let settings = Settings::resolve(&overrides, Surface::Headless, &SessionChoice::New)?;
//! assert_eq!(settings.approvals.name(), "deny");
//! assert!(settings.notices[0].contains("approvals"), "{:?}", settings.notices);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(test, allow(clippy::too_many_lines))]

mod error;
pub mod files;
pub mod modes;
pub mod report;
mod settings;
pub mod tiers;
pub mod trust;

pub use error::Error;
pub use files::{ClaudeFiles, Config, SettingSources};
pub use modes::{ApprovalMode, LiveMode, PermissionMode};
pub use settings::{
    Extras, Overrides, ProviderOrigin, SessionChoice, Settings, Surface, check_model_name,
    existing_dir, given_dir, inline_agents, keel_home, load_config, mcp_configs, named_provider,
    session_store, tool_profile,
};

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
