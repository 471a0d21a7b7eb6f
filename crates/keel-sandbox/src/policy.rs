//! What commands run by `run_command` may do.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where a command may write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read anywhere; write only inside the workspace, the session temp dir (`TMPDIR`),
    /// `/dev/shm`, the policy's `writable_roots`, cargo's package-cache lock files and
    /// `/dev/null`-like devices. Never the system temp dir, `~/.cargo/bin` or `~/.cargo/env`.
    #[default]
    WorkspaceWrite,
    /// Read anywhere; write nowhere but `/dev/null`-like devices.
    ReadOnly,
    /// No confinement.
    FullAccess,
}

/// The confinement applied to commands. Serializable, so a delegated run or a background task
/// can carry its parent's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxPolicy {
    /// Where commands may write.
    pub mode: SandboxMode,
    /// More directories commands may write under [`SandboxMode::WorkspaceWrite`], besides the
    /// workspace and the session temp dir, added by the person (`--add-dir`): caches such as
    /// `~/.npm` that builds need. Ignored in the other modes. Missing directories are
    /// skipped. A root holding programs that run later outside the sandbox (`~/.cargo`, whose
    /// `bin` and `env` are, or a PATH directory) gives that away: cargo's lock files are
    /// writable without it.
    pub writable_roots: Vec<PathBuf>,
    /// Whether commands may use the network (default `false`). Off, a confined command cannot
    /// open a socket of any family but `AF_UNIX` and `AF_NETLINK` (seccomp), nor connect or
    /// bind TCP ports or reach abstract Unix sockets outside its sandbox (Landlock, ABI 4 and
    /// 6), and, where user namespaces work, runs in a network namespace with no interface but
    /// a loopback that is down. Full access always has the network.
    pub network: bool,
    /// Whether to run unconfined, with a warning, when the kernel cannot enforce `mode`.
    /// When false, commands fail instead.
    pub allow_unconfined_fallback: bool,
    /// The longest timeout a `run_command` call may ask for (default 120 s).
    pub max_command_timeout: Duration,
    /// The timeout of a `run_command` call that names none (default 30 s).
    pub default_command_timeout: Duration,
    /// More paths (files or directories) commands and the write tools may not change without
    /// the person's approval, besides the built-in ones (`.git/` and the configuration files
    /// that grant powers): e.g. the scripts a trusted project's hooks run.
    pub protected_paths: Vec<PathBuf>,
    /// More environment variables commands never see, besides the usual credential names: the
    /// variables holding the keys keel itself uses (a provider's `api_key_env`).
    pub hidden_env: Vec<String>,
    /// Variables set for every command, in order (Claude Code's `env` setting): each is set
    /// before the environment is scrubbed, so a credential-like name or one of
    /// [`hidden_env`](Self::hidden_env) set here still never reaches a command.
    pub env: Vec<(String, String)>,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self {
            mode: SandboxMode::WorkspaceWrite,
            writable_roots: Vec::new(),
            network: false,
            allow_unconfined_fallback: false,
            max_command_timeout: Duration::from_secs(120),
            default_command_timeout: Duration::from_secs(30),
            protected_paths: Vec::new(),
            hidden_env: Vec::new(),
            env: Vec::new(),
        }
    }
}

impl SandboxPolicy {
    /// Also lets commands write below `dir` (in [`SandboxMode::WorkspaceWrite`]).
    pub fn allow_write(mut self, dir: impl Into<PathBuf>) -> Self {
        self.writable_roots.push(dir.into());
        self
    }

    /// Whether commands have the network: [`network`](Self::network), or full access.
    pub fn commands_have_network(&self) -> bool {
        self.network || self.mode == SandboxMode::FullAccess
    }

    /// The default policy with another mode.
    pub fn with_mode(mode: SandboxMode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }
}
