//! Dropping snapshots past the limits and freeing their space. libgit2 has no `gc`: the
//! references go, then every loose object no kept snapshot reaches is deleted (the store is
//! never packed, so every object is a loose file).
//!
//! A full prune walks the kept snapshots' trees and the object directory, so it runs only when
//! due: at most once a day, or when the bytes written since the last one pass an eighth of the
//! size limit (a small state file keeps both).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::error::GitContext;
use crate::shadow::{parts, snapshot_refs};
use crate::{SnapshotError, SnapshotLimits};

const STATE_FILE: &str = "keel-prune.json";
const PERIOD_MS: i64 = 24 * 60 * 60 * 1000;

/// What a prune did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Snapshots dropped.
    pub dropped: usize,
    /// Snapshots kept.
    pub kept: usize,
    /// Bytes of object files deleted.
    pub freed_bytes: u64,
    /// Bytes of object files left.
    pub store_bytes: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    last_ms: i64,
    written_since: u64,
}

fn read_state(git_dir: &Path) -> State {
    std::fs::read(git_dir.join(STATE_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn write_state(git_dir: &Path, state: &State) {
    let path = git_dir.join(STATE_FILE);
    let json = serde_json::to_vec(state).unwrap_or_default();
    if let Err(err) = std::fs::write(&path, json) {
        tracing::warn!(path = %path.display(), error = %err, "could not record the prune state");
    }
}

/// Counts `bytes` written by a take towards the next prune.
pub(crate) fn add_written(git_dir: &Path, bytes: u64) {
    let mut state = read_state(git_dir);
    if state.last_ms == 0 {
        state.last_ms = jiff::Timestamp::now().as_millisecond();
    }
    state.written_since = state.written_since.saturating_add(bytes);
    write_state(git_dir, &state);
}

/// Whether a prune is due: the cheap check made after each take (never on open, which is on
/// keel's way to its first request).
pub(crate) fn due(git_dir: &Path, limits: &SnapshotLimits, extra: u64) -> bool {
    let state = read_state(git_dir);
    if state.last_ms == 0 {
        return false;
    }
    let now = jiff::Timestamp::now().as_millisecond();
    now.saturating_sub(state.last_ms) > PERIOD_MS
        || state.written_since.saturating_add(extra) > limits.max_bytes / 8
}

/// Every loose object file: id -> size.
fn loose_objects(git_dir: &Path) -> HashMap<Oid, u64> {
    let mut found = HashMap::new();
    let Ok(fanout) = std::fs::read_dir(git_dir.join("objects")) else {
        return found;
    };
    for dir in fanout.flatten() {
        let prefix = dir.file_name().to_string_lossy().into_owned();
        if prefix.len() != 2 {
            continue;
        }
        let Ok(files) = std::fs::read_dir(dir.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = format!("{prefix}{}", file.file_name().to_string_lossy());
            if let (Ok(id), Ok(meta)) = (Oid::from_str(&name), file.metadata()) {
                found.insert(id, meta.len());
            }
        }
    }
    found
}

/// The objects `commit` reaches that are not in `seen` (subtrees already seen are not walked).
fn reach(
    repo: &Repository,
    commit: Oid,
    seen: &HashSet<Oid>,
) -> Result<HashSet<Oid>, SnapshotError> {
    let mut new = HashSet::new();
    let commit = repo.find_commit(commit).ctx("reading a snapshot")?;
    new.insert(commit.id());
    let mut stack = vec![commit.tree_id()];
    while let Some(tree_id) = stack.pop() {
        if seen.contains(&tree_id) || !new.insert(tree_id) {
            continue;
        }
        let tree = repo.find_tree(tree_id).ctx("reading a snapshot")?;
        for entry in tree.iter() {
            match entry.kind() {
                Some(git2::ObjectType::Tree) => stack.push(entry.id()),
                _ => {
                    if !seen.contains(&entry.id()) {
                        new.insert(entry.id());
                    }
                }
            }
        }
    }
    Ok(new)
}

/// Drops the snapshots past `limits` (never the newest) and deletes unreachable objects.
pub(crate) fn prune(
    repo: &Repository,
    git_dir: &Path,
    limits: &SnapshotLimits,
) -> Result<PruneReport, SnapshotError> {
    let refs = snapshot_refs(repo)?;
    let sizes = loose_objects(git_dir);
    let now = jiff::Timestamp::now();
    let max_age_ms = i64::try_from(limits.max_age.as_millis()).unwrap_or(i64::MAX);
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut keep = vec![false; refs.len()];
    // Newest first: each snapshot costs the objects no newer one has.
    for (i, r) in refs.iter().enumerate().rev() {
        let newest = i + 1 == refs.len();
        let age_ms = now
            .as_millisecond()
            .saturating_sub(parts(repo, r.commit)?.time.as_millisecond());
        if !newest && age_ms > max_age_ms {
            continue;
        }
        let new = reach(repo, r.commit, &seen)?;
        let added: u64 = new
            .iter()
            .map(|id| sizes.get(id).copied().unwrap_or(0))
            .sum();
        if !newest && total.saturating_add(added) > limits.max_bytes {
            // Past the size limit: this and every older snapshot go.
            break;
        }
        seen.extend(new);
        total = total.saturating_add(added);
        keep[i] = true;
    }
    let mut report = PruneReport::default();
    for (r, kept) in refs.iter().zip(&keep) {
        if *kept {
            report.kept += 1;
            continue;
        }
        repo.find_reference(&r.name)
            .and_then(|mut reference| reference.delete())
            .ctx("dropping a snapshot")?;
        report.dropped += 1;
    }
    // Objects nothing kept reaches: dropped snapshots', and leftovers of scans never recorded.
    for (id, size) in &sizes {
        if seen.contains(id) {
            report.store_bytes += size;
            continue;
        }
        let hex = id.to_string();
        let path = git_dir.join("objects").join(&hex[..2]).join(&hex[2..]);
        match std::fs::remove_file(&path) {
            Ok(()) => report.freed_bytes += size,
            Err(err) => tracing::debug!(path = %path.display(), error = %err, "object not deleted"),
        }
    }
    if let Ok(fanout) = std::fs::read_dir(git_dir.join("objects")) {
        for dir in fanout.flatten() {
            if dir.file_name().len() == 2 {
                let _ = std::fs::remove_dir(dir.path());
            }
        }
    }
    write_state(
        git_dir,
        &State {
            last_ms: now.as_millisecond(),
            written_since: 0,
        },
    );
    tracing::info!(
        dropped = report.dropped,
        kept = report.kept,
        freed = report.freed_bytes,
        "snapshots pruned"
    );
    Ok(report)
}
