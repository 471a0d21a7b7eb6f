//! Why a path or a command was refused.

use std::path::PathBuf;

use keel_tool::ToolError;

/// Why the sandbox refused a path or could not confine a command. Every message about a path
/// names the path as the model gave it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The path is empty.
    #[error("the path is empty")]
    Empty,
    /// The path contains a NUL byte.
    #[error("{given:?}: the path contains a NUL byte")]
    Nul {
        /// The path as given.
        given: String,
    },
    /// The path, or one of its names, is longer than the OS allows.
    #[error("{given:?}: the path is too long ({reason})")]
    TooLong {
        /// The path as given (shortened).
        given: String,
        /// Which limit.
        reason: String,
    },
    /// The path lies outside every root the operation may use.
    #[error("{given}: outside the workspace{}", read_note(*.read))]
    Outside {
        /// The path as given.
        given: String,
        /// Whether this was a read (which extra read-only roots would also allow).
        read: bool,
    },
    /// A symlink on the path leads outside the workspace.
    #[error("{given}: a symlink to {}, outside the workspace", .target.display())]
    SymlinkOutside {
        /// The path as given.
        given: String,
        /// Where the symlink leads.
        target: PathBuf,
    },
    /// A write under `.git/`.
    #[error("{given}: writing inside .git/ is not allowed (the git tools manage the repository)")]
    GitDir {
        /// The path as given.
        given: String,
    },
    /// Symlinks nested too deep, or in a loop.
    #[error("{given}: too many levels of symbolic links")]
    SymlinkLoop {
        /// The path as given.
        given: String,
    },
    /// The file system changed under the operation (a symlink swapped in).
    #[error(
        "{given}: the path changed while it was being opened (a symlink was swapped in); refused"
    )]
    Raced {
        /// The path as given.
        given: String,
    },
    /// Nothing exists at the path.
    #[error("{given}: no such file or directory")]
    NotFound {
        /// The path as given.
        given: String,
    },
    /// The kernel cannot enforce the policy's mode and the policy does not allow running
    /// unconfined.
    #[error("{message}")]
    Unenforceable {
        /// What is missing and what the person can do.
        message: String,
    },
    /// A command's sandbox could not be set up.
    #[error("the command's sandbox could not be set up: {message}")]
    Setup {
        /// Why.
        message: String,
    },
    /// An I/O error.
    #[error("{given}: {source}")]
    Io {
        /// The path as given.
        given: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

fn read_note(read: bool) -> &'static str {
    if read {
        " (and not in a directory allowed for reading)"
    } else {
        ""
    }
}

impl From<SandboxError> for ToolError {
    fn from(err: SandboxError) -> Self {
        match err {
            SandboxError::NotFound { .. } => ToolError::NotFound(err.to_string()),
            SandboxError::Io { .. }
            | SandboxError::Empty
            | SandboxError::TooLong { .. }
            | SandboxError::Setup { .. } => ToolError::Failed(err.to_string()),
            _ => ToolError::Denied(err.to_string()),
        }
    }
}
