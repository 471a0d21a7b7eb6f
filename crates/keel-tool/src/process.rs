//! Running a program to its end in a process group of its own: the interface.
//!
//! keel runs outside programs in three places: the `run_command` tool, command hooks and the
//! background-task supervisor. All three go through one mechanism, keel-sandbox's process-group
//! runner; crates below keel-sandbox in the dependency order (the engine's hooks) reach it
//! through this trait, which the host hands them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// A program to run: what, where, with what input, for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// The program (looked up on `PATH` when it has no `/`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Variables set on top of the scrubbed environment (no credentials, no session sockets,
    /// none of `hidden_env`).
    pub env: Vec<(OsString, OsString)>,
    /// More variables to keep out of its environment (a provider's key variable).
    pub hidden_env: Vec<String>,
    /// Written to its stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// How long it may run before its whole process group is killed.
    pub timeout: Duration,
    /// The most bytes of stdout, and of stderr, kept (the first ones); the rest is read and
    /// dropped.
    pub output_cap: usize,
}

impl ProcessSpec {
    /// `bash -c <script>` in `cwd`, no input, a 60 s timeout, 64 KiB of each output kept.
    pub fn shell(script: impl Into<OsString>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: "bash".into(),
            args: vec!["-c".into(), script.into()],
            cwd: cwd.into(),
            env: Vec::new(),
            hidden_env: Vec::new(),
            stdin: Vec::new(),
            timeout: Duration::from_secs(60),
            output_cap: 64 * 1024,
        }
    }
}

/// How a program ended, and what it wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOutput {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// The first `output_cap` bytes of its stdout.
    pub stdout: Vec<u8>,
    /// The first `output_cap` bytes of its stderr.
    pub stderr: Vec<u8>,
}

/// Why a program could not be run to its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// It could not be started.
    #[error("could not be started in {cwd}: {source}")]
    Spawn {
        /// The working directory it was to start in.
        cwd: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It ran past its timeout; its process group was killed.
    #[error("timed out after {} s and was killed", after.as_secs_f64())]
    TimedOut {
        /// The timeout.
        after: Duration,
    },
    /// Reading its output or waiting for it failed; its process group was killed.
    #[error("failed while running: {0}")]
    Io(#[source] std::io::Error),
}

/// Runs a program to its end in a process group of its own, killed whole on timeout or when
/// the returned future is dropped. keel-sandbox's `ProcessGroupRunner` is the implementation.
#[async_trait::async_trait]
pub trait ProcessRunner: Send + Sync + std::fmt::Debug {
    /// Runs `spec` to its end.
    async fn run(&self, spec: ProcessSpec) -> Result<ProcessOutput, ProcessError>;
}
