//! # keel-sandbox
//!
//! Everything in keel that touches the user's machine, and the fences around it.
//!
//! - [`PathSandbox`]: which paths tools may read and write. Writes stay inside the workspace
//!   root (never under `.git/`); reads may also use extra read-only roots. Symlinks are
//!   resolved before the check, and files are opened with `openat2(RESOLVE_BENEATH)` so a
//!   symlink swapped in mid-operation cannot escape.
//! - [`SandboxPolicy`]: what commands may do, enforced by the kernel through a
//!   [`CommandSandbox`]: Landlock for files (write only in the workspace, the session temp
//!   dir and the policy's roots; never a device node), the network off by default (a seccomp
//!   filter on `socket()`, Landlock's TCP and abstract-socket rules, a network namespace),
//!   and where unprivileged user namespaces work, a mount namespace in which the protected
//!   paths are read-only and the session's sockets (tmux, X11, the runtime dir, Docker, SSH
//!   agents) hidden. [`CommandSandbox`] also confines programs a host starts itself (task
//!   runners).
//! - Protected paths: `.git`, the configuration files that grant keel powers
//!   (`.keel/config.toml`, `.claude/settings*.json`, `.mcp.json`), the `core.hooksPath`
//!   directory and the policy's `protected_paths`. The file tools never write `.git` and
//!   mark writes to the others [`Effect::Protected`](keel_tool::Effect) (the person is always
//!   asked); around every command, [`ProtectedSnapshot`] restores what changed anyway.
//! - [`scrub_env`]: the environment every process keel starts gets — no credentials, no
//!   `TMUX`, `SSH_AUTH_SOCK`, desktop bus or display.
//! - [`reaper`]: no process outlives its call — keel as a child subreaper, the sweep of
//!   escaped processes after each command, [`reaper::kill_descendants`] at exit.
//! - The built-in tools in [`tools`], each an ordinary [`keel_tool::Tool`]: all of them
//!   ([`default_tools`]), or the few a small model needs under short definitions
//!   ([`lean_tools`]).
//!
//! # Features
//!
//! Both on by default; a host that turns them off links neither libgit2 nor the Landlock
//! and seccomp crates.
//!
//! - `confine`: kernel confinement of commands (Landlock, seccomp, namespaces). Without it,
//!   [`CommandSandbox`] keeps its API but cannot confine: full access runs as always, while
//!   workspace-write and read-only REFUSE to run a command ([`SandboxError::Unenforceable`],
//!   naming the missing feature) unless the policy's `allow_unconfined_fallback` is set, in
//!   which case commands run unconfined — network and files open — with a note in every
//!   result saying so. Protected paths are still detected and restored after each command,
//!   and environments still scrubbed.
//! - `git`: the git tools (`git_status`, `git_diff`, `git_commit`) and the `git` module
//!   (`GitSession`, `GitError`, `UndoneCommit`, the session trailer), through libgit2.
//!   Without it, [`default_tools`] registers 7 tools instead of 10. The classification of
//!   `git ...` command lines ([`classify()`]) and the protection of `.git` and of the
//!   `core.hooksPath` directory do not need it.
//!
//! Not covered: pathname Unix sockets outside the hidden directories can still be connected
//! to (Landlock ABI 7 cannot restrict them); without user namespaces, protected paths are
//! only restored after a command (a process that escaped and outlived the sweep could change
//! them later); a repository cloned into a subdirectory carries its own `.git/config`.
//!
//! ```
//! use keel_sandbox::{Access, PathSandbox, SandboxError};
//!
//! let dir = tempfile::tempdir()?;
//! let sandbox = PathSandbox::new(dir.path())?;
//!
//! let report = sandbox.write_atomic("src/hello.txt", b"hi\n")?;
//! assert!(report.created);
//! assert_eq!(std::fs::read_to_string(dir.path().join("src/hello.txt"))?, "hi\n");
//!
//! let err = sandbox.resolve("../outside.txt", Access::Write).unwrap_err();
//! assert_eq!(err.to_string(), "../outside.txt: outside the workspace");
//! assert!(matches!(sandbox.resolve(".git/config", Access::Write), Err(SandboxError::GitDir { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Unit tests may run long (a scenario and its checks); library functions stay within 120 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod classify;
mod confine;
mod env;
mod error;
#[cfg(feature = "git")]
pub mod git;
mod lean;
mod path;
mod policy;
pub mod process;
mod protect;
pub mod reaper;
pub mod tools;

pub use classify::classify;
pub use confine::{CommandSandbox, NO_NAMESPACES_VAR};
pub use env::{is_hidden_var, is_session_var, scrub_env, scrub_std_env};
pub use error::SandboxError;
#[cfg(feature = "git")]
pub use git::{CommitPreview, GitError, GitSession, StagedChange, UndoneCommit, commit_preview};
pub use lean::{LEAN_TOOLS, lean_tools};
pub use path::{Access, PathSandbox, ResolvedPath, WriteReport};
pub use policy::{SandboxMode, SandboxPolicy};
pub use process::{GroupChild, GroupGuard, ProcessGroupRunner, kill_group, spawn_in_group};
pub use protect::{CONFIG_FILES, ProtectedSnapshot, RestoreReport, repository_root};

use std::sync::Arc;

use keel_tool::{RegistryError, ToolRegistry};

/// The built-in tools for a workspace: `read_file`, `list_directory`, `grep`, `glob`,
/// `run_command`, `git_status` and `git_diff`, plus the tools that write — `write_file`,
/// `patch_file` and `git_commit` — unless `policy` is [`SandboxMode::ReadOnly`]: 10 tools,
/// 7 read-only.
///
/// Built without the `git` feature there are no git tools: `read_file`, `list_directory`,
/// `grep`, `glob`, `run_command`, `write_file` and `patch_file` (7 tools; 5 read-only).
///
/// ```
/// use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
///
/// let dir = tempfile::tempdir()?;
/// let registry = default_tools(&PathSandbox::new(dir.path())?, &SandboxPolicy::default())?;
/// assert_eq!(registry.len(), if cfg!(feature = "git") { 10 } else { 7 });
/// assert!(registry.get("patch_file").is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn default_tools(
    sandbox: &PathSandbox,
    policy: &SandboxPolicy,
) -> Result<ToolRegistry, RegistryError> {
    let shared = Arc::new(sandbox.clone());
    let mut registry = ToolRegistry::new()
        .with(tools::ReadFile::new(shared.clone()))?
        .with(tools::ListDirectory::new(shared.clone()))?
        .with(tools::Grep::new(shared.clone()))?
        .with(tools::Glob::new(shared.clone()))?
        .with(tools::RunCommand::new(sandbox.root(), policy.clone()))?;
    #[cfg(feature = "git")]
    {
        registry.register(tools::GitStatus::new(shared.clone()))?;
        registry.register(tools::GitDiff::new(shared.clone()))?;
    }
    if policy.mode != SandboxMode::ReadOnly {
        let protected = policy.protected_paths.clone();
        registry.register(
            tools::WriteFile::new(shared.clone()).with_protected_paths(protected.clone()),
        )?;
        registry.register(tools::PatchFile::new(shared.clone()).with_protected_paths(protected))?;
        #[cfg(feature = "git")]
        registry.register(tools::GitCommit::new(shared))?;
    }
    Ok(registry)
}

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
