//! What a tool call does to the world, decided per call.

use serde::{Deserialize, Serialize};

/// What one call does, so the engine can run read-only calls in parallel and ask before
/// destructive ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Effect {
    /// Reads only: safe to run alongside other read-only calls.
    ReadOnly,
    /// Changes files or state: run one at a time, in the model's order.
    #[default]
    Mutating,
    /// Hard to undo (deletes, force-pushes): needs an approval.
    Destructive {
        /// Why, for the person approving, e.g. `deletes the build directory`.
        reason: String,
    },
    /// Changes what grants powers or runs later outside the sandbox (keel's configuration
    /// files, a repository's `.git`): needs the person's approval of this exact call, every
    /// time. Permission allow rules, hooks answering `allow` and "always" answers never skip
    /// the question; a headless run without approvals refuses it.
    Protected {
        /// Why, for the person approving, e.g. `changes .keel/config.toml, which grants keel
        /// powers`.
        reason: String,
    },
}

impl Effect {
    /// A destructive effect with this reason.
    pub fn destructive(reason: impl Into<String>) -> Self {
        Self::Destructive {
            reason: reason.into(),
        }
    }

    /// A protected effect with this reason.
    pub fn protected(reason: impl Into<String>) -> Self {
        Self::Protected {
            reason: reason.into(),
        }
    }

    /// Whether the call only reads.
    pub fn is_read_only(&self) -> bool {
        matches!(self, Self::ReadOnly)
    }
}
