//! Making the workspace equal to a snapshot, and telling what differs between two.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository, TreeWalkMode, TreeWalkResult};

use crate::beneath::{self, Content, Root};
use crate::error::GitContext;
use crate::meta::{Meta, plain_mode};
use crate::{RestoreReport, SnapshotError};

/// Every file of a `files` tree: path -> (blob, git mode).
fn flatten(repo: &Repository, tree: Oid) -> Result<BTreeMap<Vec<u8>, (Oid, u32)>, SnapshotError> {
    let tree = repo.find_tree(tree).ctx("reading a snapshot")?;
    let mut files = BTreeMap::new();
    tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            let mut path = dir.as_bytes().to_vec();
            path.extend_from_slice(entry.name_bytes());
            files.insert(
                path,
                (entry.id(), u32::try_from(entry.filemode()).unwrap_or(0)),
            );
        }
        TreeWalkResult::Ok
    })
    .ctx("reading a snapshot")?;
    Ok(files)
}

/// The permission bits `path` has in a snapshot with `meta`.
fn full_mode(meta: &Meta, path: &[u8], git_mode: u32) -> u32 {
    if git_mode == 0o120000 {
        return plain_mode(git_mode);
    }
    meta.modes
        .get(String::from_utf8_lossy(path).as_ref())
        .copied()
        .unwrap_or_else(|| plain_mode(git_mode))
}

/// The files that differ (content, kind or permission bits) between two snapshots.
pub(crate) fn changed(
    repo: &Repository,
    a: Oid,
    a_meta: &Meta,
    b: Oid,
    b_meta: &Meta,
) -> Result<Vec<String>, SnapshotError> {
    let mut out = BTreeSet::new();
    if a != b {
        let a_tree = repo.find_tree(a).ctx("reading a snapshot")?;
        let b_tree = repo.find_tree(b).ctx("reading a snapshot")?;
        let diff = repo
            .diff_tree_to_tree(Some(&a_tree), Some(&b_tree), None)
            .ctx("comparing snapshots")?;
        for delta in diff.deltas() {
            for file in [delta.old_file(), delta.new_file()] {
                if let Some(path) = file.path_bytes()
                    && file.id() != Oid::ZERO_SHA1
                {
                    out.insert(String::from_utf8_lossy(path).into_owned());
                }
            }
        }
    }
    for (path, mode) in &a_meta.modes {
        if b_meta.modes.get(path) != Some(mode) {
            out.insert(path.clone());
        }
    }
    for path in b_meta.modes.keys() {
        if !a_meta.modes.contains_key(path) {
            out.insert(path.clone());
        }
    }
    Ok(out.into_iter().collect())
}

fn os_path(path: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(path))
}

/// The directories above `path`, nearest first.
fn ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = path;
    std::iter::from_fn(move || {
        let cut = rest.iter().rposition(|b| *b == b'/')?;
        rest = &rest[..cut];
        Some(rest)
    })
}

/// Makes the workspace at `root`, whose files are `current` (just recorded), equal to `target`.
pub(crate) fn apply(
    repo: &Repository,
    root: &Path,
    current: (Oid, &Meta),
    target: (Oid, &Meta),
) -> Result<RestoreReport, SnapshotError> {
    let (current_tree, current_meta) = current;
    let (target_tree, target_meta) = target;
    let before = flatten(repo, current_tree)?;
    let after = flatten(repo, target_tree)?;
    let dir = Root::open(root)
        .map_err(|source| SnapshotError::io("opening the workspace", root, source))?;
    let mut report = RestoreReport::default();

    // Directories first, writable by their owner while files go in.
    let mut target_dirs: Vec<(&String, u32)> =
        target_meta.dirs.iter().map(|(d, m)| (d, *m)).collect();
    target_dirs.sort_by_key(|(d, _)| d.matches('/').count());
    for (path, mode) in &target_dirs {
        let made = beneath::split(path.as_bytes())
            .and_then(|(mut parts, name)| {
                parts.push(name);
                dir.dir_for_write(&parts)
            })
            .and_then(|fd| beneath::chmod_dir(&fd, mode | 0o700));
        if let Err(err) = made {
            tracing::warn!(path = %path, error = %err, "could not restore a directory");
        }
    }

    // Files that differ, written (replacing anything in the way but a non-empty directory).
    let mut pending = Vec::new();
    for (path, (id, git_mode)) in &after {
        let mode = full_mode(target_meta, path, *git_mode);
        let same = before.get(path).is_some_and(|(old_id, old_mode)| {
            old_id == id && old_mode == git_mode && full_mode(current_meta, path, *old_mode) == mode
        });
        if same {
            continue;
        }
        if let Err(err) = write(repo, &dir, path, *id, *git_mode, mode) {
            pending.push((path, *id, *git_mode, mode, err));
        } else {
            report.restored.push(os_path(path));
        }
    }

    // Files made since, removed (ignored ones, under the rules as restored, left alone).
    let skipped: BTreeSet<&[u8]> = target_meta.skipped.iter().map(|s| s.as_bytes()).collect();
    // Directories the snapshot's files need (a symlink in their place was replaced above).
    let needed: BTreeSet<&[u8]> = after.keys().flat_map(|p| ancestors(p)).collect();
    let mut emptied: BTreeSet<Vec<u8>> = BTreeSet::new();
    for path in before.keys() {
        if after.contains_key(path)
            || skipped.contains(path.as_slice())
            || needed.contains(path.as_slice())
        {
            continue;
        }
        if repo.status_should_ignore(&os_path(path)).unwrap_or(false) {
            continue;
        }
        match remove(&dir, path) {
            Ok(true) => {
                report.removed.push(os_path(path));
                emptied.extend(ancestors(path).map(<[u8]>::to_vec));
            }
            Ok(false) => {}
            Err(err) => {
                tracing::warn!(path = %String::from_utf8_lossy(path), error = %err, "could not remove a file");
            }
        }
    }
    for old in current_meta.dirs.keys() {
        if !target_meta.dirs.contains_key(old) {
            emptied.insert(old.as_bytes().to_vec());
        }
    }
    // Directories left empty that the snapshot did not have, deepest first.
    let mut emptied: Vec<Vec<u8>> = emptied
        .into_iter()
        .filter(|d| {
            !d.is_empty()
                && !needed.contains(d.as_slice())
                && !target_meta
                    .dirs
                    .contains_key(String::from_utf8_lossy(d).as_ref())
        })
        .collect();
    emptied.sort_by_key(|d| std::cmp::Reverse(d.iter().filter(|b| **b == b'/').count()));
    for path in &emptied {
        if let Ok((parts, name)) = beneath::split(path)
            && let Ok(Some(parent)) = dir.dir_existing(&parts)
        {
            beneath::remove_empty_dir(&parent, name);
        }
    }

    // Files a directory was in the way of, once more.
    for (path, id, git_mode, mode, first) in pending {
        match write(repo, &dir, path, id, git_mode, mode) {
            Ok(()) => report.restored.push(os_path(path)),
            Err(err) => tracing::warn!(
                path = %String::from_utf8_lossy(path), error = %err, first = %first,
                "could not restore a file"
            ),
        }
    }

    // Directories' own permission bits, deepest first.
    for (path, mode) in target_dirs.iter().rev() {
        if let Ok((mut parts, name)) = beneath::split(path.as_bytes()) {
            parts.push(name);
            if let Ok(Some(fd)) = dir.dir_existing(&parts)
                && let Err(err) = beneath::chmod_dir(&fd, *mode)
            {
                tracing::warn!(path = %path, error = %err, "could not restore a directory's mode");
            }
        }
    }
    report.restored.sort();
    report.removed.sort();
    Ok(report)
}

fn write(
    repo: &Repository,
    root: &Root,
    path: &[u8],
    id: Oid,
    git_mode: u32,
    mode: u32,
) -> std::io::Result<()> {
    let blob = repo
        .find_blob(id)
        .map_err(|err| std::io::Error::other(err.message().to_owned()))?;
    let (parts, name) = beneath::split(path)?;
    let parent = root.dir_for_write(&parts)?;
    let content = if git_mode == 0o120000 {
        Content::Link(blob.content())
    } else {
        Content::File(blob.content(), mode)
    };
    beneath::put(&parent, name, &content)
}

fn remove(root: &Root, path: &[u8]) -> std::io::Result<bool> {
    let (parts, name) = beneath::split(path)?;
    match root.dir_existing(&parts)? {
        Some(parent) => beneath::remove(&parent, name),
        // Its directory is gone or is a symlink now: nothing of the workspace's to remove.
        None => Ok(false),
    }
}
