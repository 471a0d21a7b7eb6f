//! Tools and snapshot stores shared by the snapshot, crash and retry tests.

#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::{Arc, Mutex};

use keel_snapshot::{
    RestoreReport, SnapshotError, SnapshotId, SnapshotInfo, SnapshotPoint, Snapshots,
};
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;

/// Every tool run, in order: `(tool, n)`.
pub type Runs = Arc<Mutex<Vec<(String, u64)>>>;

/// A token identifying one call across runs.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Token {
    /// The token.
    pub n: u64,
}

macro_rules! counting_tool {
    ($ty:ident, $name:literal, $effect:expr) => {
        /// A tool that records each run of it.
        #[derive(Clone)]
        pub struct $ty(pub Runs);

        impl Tool for $ty {
            type Args = Token;
            const NAME: &'static str = $name;
            fn description(&self) -> &str {
                "Counts."
            }
            fn effect(&self, _args: &Token) -> Effect {
                $effect
            }
            async fn call(&self, args: Token, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
                self.0.lock().unwrap().push(($name.to_owned(), args.n));
                Ok(ToolOutput::text(format!("{} {}", $name, args.n)))
            }
        }
    };
}

counting_tool!(Count, "count", Effect::Mutating);
counting_tool!(Peek, "peek", Effect::ReadOnly);
counting_tool!(Erase, "erase", Effect::destructive("erases"));

/// `count`, `peek` and `erase`, all recording into `runs`.
pub fn counting_tools(runs: &Runs) -> ToolRegistry {
    ToolRegistry::new()
        .with(Count(runs.clone()))
        .unwrap()
        .with(Peek(runs.clone()))
        .unwrap()
        .with(Erase(runs.clone()))
        .unwrap()
}

/// A snapshot store that records the points it is asked for, or fails.
#[derive(Debug, Default)]
pub struct FakeSnapshots {
    pub points: Mutex<Vec<SnapshotPoint>>,
    pub fail: bool,
}

impl Snapshots for FakeSnapshots {
    fn take(&self, point: &SnapshotPoint) -> Result<SnapshotId, SnapshotError> {
        if self.fail {
            return Err(SnapshotError::Store {
                message: "the disk is full".into(),
            });
        }
        let mut points = self.points.lock().unwrap();
        points.push(point.clone());
        Ok(SnapshotId(format!("{:040x}", points.len())))
    }

    fn list(&self) -> Result<Vec<SnapshotInfo>, SnapshotError> {
        Ok(Vec::new())
    }

    fn restore(&self, id: &str) -> Result<RestoreReport, SnapshotError> {
        Err(SnapshotError::NotFound { id: id.into() })
    }
}

/// Whether `messages` is a request the real APIs accept: it starts with a user message,
/// roles alternate strictly, every `tool_use` id is non-empty, `[A-Za-z0-9_-]` and unique,
/// and each call is answered exactly once in the very next message.
pub fn check_request(messages: &[keel_provider::Message]) -> Result<(), String> {
    use keel_provider::{ContentBlock, Role};
    if messages.first().is_none_or(|m| m.role != Role::User) {
        return Err("the first message is not a user message".into());
    }
    for (i, pair) in messages.windows(2).enumerate() {
        if pair[0].role == pair[1].role {
            return Err(format!("messages {i} and {} have the same role", i + 1));
        }
    }
    for (i, m) in messages.iter().enumerate() {
        if m.content.is_empty() {
            return Err(format!("message {i} is empty"));
        }
    }
    let mut ids = std::collections::HashSet::new();
    for block in messages.iter().flat_map(|m| &m.content) {
        if let ContentBlock::ToolUse { id, .. } = block {
            if !keel_engine::history::is_valid_id(id) {
                return Err(format!("bad tool_use id {id:?}"));
            }
            if !ids.insert(id.clone()) {
                return Err(format!("tool_use id {id:?} used twice"));
            }
        }
    }
    keel_engine::history::check_pairing(messages)
}
