//! A full description of a directory tree — paths, bytes, permission bits, symlink targets —
//! to check that a workspace is byte for byte what it was.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One entry of a [`Manifest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file: its bytes and permission bits.
    File {
        /// The content.
        bytes: Vec<u8>,
        /// `mode & 0o7777`.
        mode: u32,
    },
    /// A symlink (never followed): its target.
    Link(PathBuf),
    /// A directory: its permission bits.
    Dir(u32),
}

/// Every entry under a root, by path relative to it.
pub type Manifest = BTreeMap<PathBuf, Entry>;

/// The manifest of `root`, leaving out the top-level names in `skip` (e.g. `.git`).
pub fn manifest(root: &Path, skip: &[&str]) -> Manifest {
    let mut out = Manifest::new();
    walk(root, Path::new(""), skip, &mut out);
    out
}

fn walk(root: &Path, rel: &Path, skip: &[&str], out: &mut Manifest) {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if rel.as_os_str().is_empty() && skip.iter().any(|s| name == *s) {
            continue;
        }
        let path = rel.join(&name);
        let meta = std::fs::symlink_metadata(root.join(&path)).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            out.insert(
                path.clone(),
                Entry::Link(std::fs::read_link(root.join(&path)).unwrap()),
            );
        } else if meta.is_dir() {
            out.insert(path.clone(), Entry::Dir(mode));
            walk(root, &path, skip, out);
        } else {
            let bytes = std::fs::read(root.join(&path)).unwrap();
            out.insert(path, Entry::File { bytes, mode });
        }
    }
}

/// The differences between two manifests, one line each (empty when equal).
pub fn differences(expected: &Manifest, actual: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    for (path, want) in expected {
        match actual.get(path) {
            None => out.push(format!("missing: {}", path.display())),
            Some(got) if got != want => out.push(format!(
                "differs: {} (want {}, got {})",
                path.display(),
                describe(want),
                describe(got)
            )),
            Some(_) => {}
        }
    }
    for path in actual.keys() {
        if !expected.contains_key(path) {
            out.push(format!("extra: {}", path.display()));
        }
    }
    out
}

fn describe(entry: &Entry) -> String {
    match entry {
        Entry::File { bytes, mode } => format!("file of {} bytes, mode {mode:o}", bytes.len()),
        Entry::Link(target) => format!("symlink to {}", target.display()),
        Entry::Dir(mode) => format!("directory, mode {mode:o}"),
    }
}
