//! # keel-sandbox
//!
//! Everything in keel that touches the user's machine, and the fences around it.
//!
//! - [`PathSandbox`]: which paths tools may read and write. Writes stay inside the workspace
//!   root (never under `.git/`); reads may also use extra read-only roots. Symlinks are
//!   resolved before the check, and files are opened with `openat2(RESOLVE_BENEATH)` so a
//!   symlink swapped in mid-operation cannot escape.
//! - [`SandboxPolicy`]: what commands may do; enforced by the kernel with Landlock.
//! - The built-in tools in [`tools`], each an ordinary [`keel_tool::Tool`].
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

pub mod classify;
mod confine;
mod error;
pub mod git;
mod path;
mod policy;
pub mod tools;

pub use classify::classify;
pub use error::SandboxError;
pub use git::{Checkpoint, GitError, GitSession, UndoneCommit};
pub use path::{Access, PathSandbox, ResolvedPath, WriteReport};
pub use policy::{SandboxMode, SandboxPolicy};
