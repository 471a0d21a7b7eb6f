//! What a snapshot records besides the files git can hold: full permission bits, directories,
//! files left out; and the commit message carrying the point.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::SnapshotPoint;

/// The `meta` blob next to the `files` tree of every snapshot commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Meta {
    /// Permission bits of files whose mode is not the plain 0644 / 0755 git keeps.
    #[serde(default)]
    pub modes: BTreeMap<String, u32>,
    /// Every directory recorded (empty ones included), with its permission bits.
    #[serde(default)]
    pub dirs: BTreeMap<String, u32>,
    /// Files larger than the limit: not recorded, left alone by a restore.
    #[serde(default)]
    pub skipped: Vec<String>,
    /// Git repositories inside the workspace: not recorded, left alone by a restore.
    #[serde(default)]
    pub left_out: Vec<String>,
}

/// The JSON part of a snapshot commit's message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Header {
    pub point: SnapshotPoint,
    /// Milliseconds since the Unix epoch.
    pub time_ms: i64,
}

/// The commit message: a summary line a person reads in `git log`, then the header as JSON.
pub(crate) fn message(header: &Header) -> String {
    let line = format!("{}: {}", header.point.tool, header.point.summary);
    let line: String = line
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    let json = serde_json::to_string(header).unwrap_or_default();
    format!("{line}\n\n{json}\n")
}

/// The header of a snapshot commit's message, if it has one.
pub(crate) fn parse_message(message: &str) -> Option<Header> {
    let (_, json) = message.split_once("\n\n")?;
    serde_json::from_str(json.trim()).ok()
}

/// The permission bits a file of git mode `git_mode` has when `meta` says nothing.
pub(crate) fn plain_mode(git_mode: u32) -> u32 {
    match git_mode {
        0o100755 => 0o755,
        0o120000 => 0o777,
        _ => 0o644,
    }
}
