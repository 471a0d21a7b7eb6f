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

mod error;
mod point;

pub use error::SnapshotError;
pub use point::{RestoreReport, SnapshotId, SnapshotInfo, SnapshotPoint, Snapshots};
