//! # keel-snapshot
//!
//! The data-loss guarantee that does not depend on classifying commands: before every tool
//! call that may change files, the engine asks a [`Snapshots`] store to record the workspace
//! as it is, and the person can later rewind the workspace to any recorded point.
//!
//! - [`Snapshots`] is the trait the engine reaches snapshots through: [`Snapshots::take`]
//!   before a call, [`Snapshots::list`] and [`Snapshots::restore`] for `keel rewind` and the
//!   REPL's `/rewind`. A host may bring its own.
//! - [`SnapshotPoint`] says which call a snapshot precedes; [`SnapshotInfo`] is one recorded
//!   snapshot as listed.
//! - [`ShadowSnapshots`] is keel's store: a git repository of its own per workspace
//!   (`$KEEL_HOME/snapshots/<workspace id>.git`) whose work tree is the workspace. It never
//!   touches the user's `.git` and works where there is none. Files are stored byte for byte
//!   (no `.gitattributes` filter runs), symlinks as symlinks, permission bits git does not keep
//!   in a metadata blob; ignored files, nested repositories and files over
//!   [`SnapshotLimits::max_file_bytes`] are left out and left alone. A stat cache makes a
//!   snapshot of a large tree where few files changed cost one walk. A restore never writes or
//!   deletes through a symlink. Old snapshots are pruned past [`SnapshotLimits`].
//!
//! ```
//! use keel_snapshot::{ShadowSnapshots, SnapshotLimits, SnapshotPoint, Snapshots};
//!
//! let store = tempfile::tempdir()?;
//! let workspace = tempfile::tempdir()?;
//! std::fs::write(workspace.path().join("notes.txt"), "keep me")?;
//!
//! let snapshots = ShadowSnapshots::open(store.path(), workspace.path(), SnapshotLimits::default())?;
//! let point = SnapshotPoint {
//!     session_id: "s-1".into(),
//!     call_id: "call-1".into(),
//!     tool: "run_command".into(),
//!     summary: "rm notes.txt".into(),
//!     history_len: 1,
//! };
//! let id = snapshots.take(&point)?;
//! std::fs::remove_file(workspace.path().join("notes.txt"))?;
//! std::fs::write(workspace.path().join("junk.txt"), "made since")?;
//!
//! let report = snapshots.restore(&id.0)?;
//! assert_eq!(std::fs::read_to_string(workspace.path().join("notes.txt"))?, "keep me");
//! assert!(!workspace.path().join("junk.txt").exists());
//! assert!(report.before.is_some()); // the rewind itself can be rewound
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Unit tests may run long (a scenario and its checks); library functions stay within 120 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

#[cfg(feature = "shadow")]
mod beneath;
mod error;
mod limits;
#[cfg(feature = "shadow")]
mod lock;
#[cfg(feature = "shadow")]
mod meta;
mod point;
#[cfg(feature = "shadow")]
mod prune;
#[cfg(feature = "shadow")]
mod restore;
#[cfg(feature = "shadow")]
mod scan;
#[cfg(feature = "shadow")]
mod shadow;
#[cfg(feature = "shadow")]
mod watch;

pub use error::SnapshotError;
pub use limits::SnapshotLimits;
pub use point::{RestoreReport, SnapshotId, SnapshotInfo, SnapshotPoint, Snapshots};
#[cfg(feature = "shadow")]
pub use prune::PruneReport;
#[cfg(feature = "shadow")]
pub use shadow::{ShadowSnapshots, workspace_id};

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
