//! Detect and restore: what a command could change that runs later outside the sandbox,
//! kept before the command and put back after it.
//!
//! Every path is read and written beneath an open directory, one component at a time, never
//! following a symlink: a command that swapped a directory for a symlink cannot make the
//! restore write anywhere else. A symlink or file found where a directory was is removed and
//! the directory made again.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Files larger than this are compared by size, time and inode, and cannot be restored.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The most bytes kept over a whole snapshot.
const MAX_TOTAL_BYTES: u64 = 16 * 1024 * 1024;
/// The most entries kept over a whole snapshot.
const MAX_ENTRIES: usize = 8192;
/// How deep directories are read.
const MAX_DEPTH: usize = 8;

/// What was at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// Nothing (or not reachable through real directories).
    Absent,
    /// A regular file.
    File { content: Vec<u8>, mode: u32 },
    /// A regular file too large to keep (or past the snapshot's budget).
    Large { size: u64, mtime: i64, ino: u64 },
    /// A symlink and its target.
    Symlink(OsString),
    /// A directory and what it holds.
    Dir {
        mode: u32,
        children: BTreeMap<OsString, Entry>,
    },
    /// Anything else (a fifo, socket or device), known by its inode.
    Special { ino: u64 },
}

/// One watched path: below `base`, at `rel`.
#[derive(Debug, Clone)]
struct Watched {
    base: PathBuf,
    rel: PathBuf,
    before: Entry,
}

/// The state of a workspace's protected paths before a command (git config, hooks and info,
/// the configuration files that grant powers, the policy's protected paths): content, mode
/// and existence. [`restore`](Self::restore) puts back whatever changed.
#[derive(Debug, Clone)]
pub struct ProtectedSnapshot {
    root: PathBuf,
    items: Vec<Watched>,
}

/// What [`ProtectedSnapshot::restore`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// The paths put back as they were (relative to the workspace when inside it).
    pub restored: Vec<PathBuf>,
    /// What could not be put back, and why.
    pub failures: Vec<String>,
}

impl RestoreReport {
    /// Whether nothing had changed.
    pub fn is_empty(&self) -> bool {
        self.restored.is_empty() && self.failures.is_empty()
    }

    /// One line for the model and the person, if anything changed.
    pub fn note(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut note = String::new();
        if !self.restored.is_empty() {
            let list: Vec<String> = self
                .restored
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            note.push_str(&format!(
                "the command changed protected paths, which were restored: {} (git config, \
                 hooks and keel's configuration can only change through the tools, with the \
                 user's approval)",
                list.join(", ")
            ));
        }
        if !self.failures.is_empty() {
            if !note.is_empty() {
                note.push_str("; ");
            }
            note.push_str(&format!(
                "protected paths changed and could NOT be restored: {}",
                self.failures.join("; ")
            ));
        }
        Some(note)
    }
}

/// How much a snapshot may still keep.
struct Budget {
    bytes: u64,
    entries: usize,
}

impl ProtectedSnapshot {
    /// Reads every watched `(base, rel)` now.
    pub(crate) fn take(root: &Path, watched: &[(PathBuf, PathBuf)]) -> Self {
        let mut budget = Budget {
            bytes: MAX_TOTAL_BYTES,
            entries: MAX_ENTRIES,
        };
        let items = watched
            .iter()
            .map(|(base, rel)| Watched {
                base: base.clone(),
                rel: rel.clone(),
                before: read_item(base, rel, &mut budget),
            })
            .collect();
        Self {
            root: root.to_path_buf(),
            items,
        }
    }

    /// Compares every watched path with the snapshot and puts back what changed: content,
    /// mode, existence (files created since are removed, removed ones made again).
    pub fn restore(&self) -> RestoreReport {
        let mut report = RestoreReport::default();
        let mut budget = Budget {
            bytes: u64::MAX,
            entries: usize::MAX,
        };
        for item in &self.items {
            let now = read_item(&item.base, &item.rel, &mut budget);
            if now == item.before {
                continue;
            }
            let shown = self.shown(&item.base.join(&item.rel));
            if let Err(err) = restore_item(item, &now, &shown, &mut report) {
                report.failures.push(format!("{}: {err}", shown.display()));
            }
        }
        if !report.is_empty() {
            tracing::warn!(
                restored = ?report.restored,
                failures = ?report.failures,
                "restored protected paths a command changed"
            );
        }
        report
    }

    fn shown(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(&self.root) {
            Ok(rel) => rel.to_path_buf(),
            Err(_) => path.to_path_buf(),
        }
    }
}

fn names(rel: &Path) -> Vec<&OsStr> {
    rel.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect()
}

fn open_dir(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn open_base(base: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(
        base,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// What is at `rel` below `base`, through real directories only.
fn read_item(base: &Path, rel: &Path, budget: &mut Budget) -> Entry {
    let names = names(rel);
    let Some((leaf, parents)) = names.split_last() else {
        return Entry::Absent;
    };
    let Ok(mut dir) = open_base(base) else {
        return Entry::Absent;
    };
    for name in parents {
        match open_dir(&dir, name) {
            Ok(next) => dir = next,
            Err(_) => return Entry::Absent,
        }
    }
    read_entry(&dir, leaf, budget, 0)
}

fn read_entry(dir: &OwnedFd, name: &OsStr, budget: &mut Budget, depth: usize) -> Entry {
    let Ok(stat) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return Entry::Absent;
    };
    budget.entries = budget.entries.saturating_sub(1);
    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    let large = || Entry::Large {
        size,
        mtime: stat.st_mtime,
        ino: stat.st_ino,
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Symlink => rustix::fs::readlinkat(dir, name, Vec::new())
            .map(|target| Entry::Symlink(OsStr::from_bytes(target.as_bytes()).to_os_string()))
            .unwrap_or(Entry::Special { ino: stat.st_ino }),
        FileType::RegularFile => {
            if size > MAX_FILE_BYTES || size > budget.bytes || budget.entries == 0 {
                return large();
            }
            let Ok(fd) = rustix::fs::openat(
                dir,
                name,
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY,
                Mode::empty(),
            ) else {
                return large();
            };
            let mut content = Vec::new();
            if std::fs::File::from(fd)
                .take(MAX_FILE_BYTES + 1)
                .read_to_end(&mut content)
                .is_err()
            {
                return large();
            }
            budget.bytes = budget.bytes.saturating_sub(content.len() as u64);
            Entry::File {
                content,
                mode: stat.st_mode & 0o7777,
            }
        }
        FileType::Directory => {
            let mut children = BTreeMap::new();
            if depth < MAX_DEPTH
                && let Ok(fd) = open_dir(dir, name)
            {
                for child in list(&fd) {
                    let entry = read_entry(&fd, &child, budget, depth + 1);
                    children.insert(child, entry);
                }
            }
            Entry::Dir {
                mode: stat.st_mode & 0o7777,
                children,
            }
        }
        _ => Entry::Special { ino: stat.st_ino },
    }
}

/// The names in a directory, without `.` and `..`.
fn list(dir: &OwnedFd) -> Vec<OsString> {
    let Ok(reader) = rustix::fs::Dir::read_from(dir) else {
        return Vec::new();
    };
    reader
        .flatten()
        .map(|entry| OsStr::from_bytes(entry.file_name().to_bytes()).to_os_string())
        .filter(|name| name != "." && name != "..")
        .collect()
}

/// Puts `item` back; `now` is what is there.
fn restore_item(
    item: &Watched,
    now: &Entry,
    shown: &Path,
    report: &mut RestoreReport,
) -> Result<(), String> {
    let names = names(&item.rel);
    let Some((leaf, parents)) = names.split_last() else {
        return Ok(());
    };
    let mut dir = open_base(&item.base).map_err(|err| err.to_string())?;
    if item.before == Entry::Absent && *now == Entry::Absent {
        return Ok(());
    }
    for name in parents {
        dir = match open_dir(&dir, name) {
            Ok(next) => next,
            Err(_) if item.before == Entry::Absent => return Ok(()),
            Err(_) => {
                // A symlink or file where a directory was: remove it, make the directory.
                remove(&dir, name).map_err(|err| err.to_string())?;
                rustix::fs::mkdirat(&dir, *name, Mode::from_raw_mode(0o755))
                    .map_err(|err| err.to_string())?;
                open_dir(&dir, name).map_err(|err| err.to_string())?
            }
        };
    }
    restore_entry(&dir, leaf, &item.before, now, shown, report)
}

fn restore_entry(
    dir: &OwnedFd,
    name: &OsStr,
    before: &Entry,
    now: &Entry,
    shown: &Path,
    report: &mut RestoreReport,
) -> Result<(), String> {
    if before == now {
        return Ok(());
    }
    let err = |e: Errno| e.to_string();
    match (before, now) {
        (
            Entry::Dir {
                mode,
                children: was,
            },
            Entry::Dir {
                mode: mode_now,
                children: is,
            },
        ) => {
            let fd = open_dir(dir, name).map_err(err)?;
            if mode != mode_now {
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(*mode)).map_err(err)?;
                report.restored.push(shown.to_path_buf());
            }
            let all: BTreeSet<&OsString> = was.keys().chain(is.keys()).collect();
            for child in all {
                let before = was.get(child).unwrap_or(&Entry::Absent);
                let now = is.get(child).unwrap_or(&Entry::Absent);
                let shown = shown.join(child);
                if let Err(e) = restore_entry(&fd, child, before, now, &shown, report) {
                    report.failures.push(format!("{}: {e}", shown.display()));
                }
            }
            Ok(())
        }
        (Entry::Large { .. } | Entry::Special { .. }, _) => {
            Err("changed, and too large or too special to restore".to_owned())
        }
        _ => {
            if *now != Entry::Absent {
                remove(dir, name).map_err(err)?;
            }
            create(dir, name, before).map_err(err)?;
            report.restored.push(shown.to_path_buf());
            Ok(())
        }
    }
}

/// Removes `name` in `dir`, a whole tree if a directory, never following a symlink.
fn remove(dir: &OwnedFd, name: &OsStr) -> Result<(), Errno> {
    let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => return Ok(()),
        Err(errno) => return Err(errno),
    };
    if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
        let fd = open_dir(dir, name)?;
        for child in list(&fd) {
            remove(&fd, &child)?;
        }
        rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
    } else {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())
    }
}

/// Makes `entry` at `name` in `dir`, where nothing is.
fn create(dir: &OwnedFd, name: &OsStr, entry: &Entry) -> Result<(), Errno> {
    match entry {
        Entry::Absent | Entry::Large { .. } | Entry::Special { .. } => Ok(()),
        Entry::Symlink(target) => rustix::fs::symlinkat(target.as_os_str(), dir, name),
        Entry::File { content, mode } => {
            let mut temp = OsString::from(".keel-restore-");
            temp.push(name);
            let _ = rustix::fs::unlinkat(dir, temp.as_os_str(), AtFlags::empty());
            let fd = rustix::fs::openat(
                dir,
                temp.as_os_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )?;
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(*mode))?;
            let mut file = std::fs::File::from(fd);
            file.write_all(content)
                .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
            rustix::fs::renameat(dir, temp.as_os_str(), dir, name)
        }
        Entry::Dir { mode, children } => {
            rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700))?;
            let fd = open_dir(dir, name)?;
            for (child, entry) in children {
                create(&fd, child, entry)?;
            }
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(*mode))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn changes_are_put_back_and_new_files_removed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        let watched = vec![
            (root.to_path_buf(), PathBuf::from(".git/config")),
            (root.to_path_buf(), PathBuf::from(".git/hooks")),
            (root.to_path_buf(), PathBuf::from(".mcp.json")),
        ];
        let snapshot = ProtectedSnapshot::take(root, &watched);
        assert!(snapshot.restore().is_empty());

        std::fs::write(root.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        std::fs::set_permissions(
            root.join(".git/config"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::remove_file(root.join(".git/hooks/pre-commit.sample")).unwrap();
        std::fs::write(root.join(".mcp.json"), "{}").unwrap();
        let report = snapshot.restore();
        assert_eq!(
            report.restored,
            [
                PathBuf::from(".git/config"),
                PathBuf::from(".git/hooks/pre-commit"),
                PathBuf::from(".git/hooks/pre-commit.sample"),
                PathBuf::from(".mcp.json"),
            ]
        );
        assert!(report.failures.is_empty(), "{report:?}");
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        let mode = std::fs::metadata(root.join(".git/config"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o777, 0o777);
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert!(root.join(".git/hooks/pre-commit.sample").exists());
        assert!(!root.join(".mcp.json").exists());
        assert!(report.note().unwrap().contains(".git/config"));
        assert!(snapshot.restore().is_empty());
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_never_leads_the_restore_outside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join(".keel")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join(".keel/config.toml"), "model = \"x\"\n").unwrap();
        let watched = vec![(root.clone(), PathBuf::from(".keel/config.toml"))];
        let snapshot = ProtectedSnapshot::take(&root, &watched);
        std::fs::rename(root.join(".keel"), root.join(".keel-old")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join(".keel")).unwrap();
        let report = snapshot.restore();
        assert_eq!(report.restored, [PathBuf::from(".keel/config.toml")]);
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
        assert!(
            !std::fs::symlink_metadata(root.join(".keel"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(root.join(".keel/config.toml")).unwrap(),
            "model = \"x\"\n"
        );
    }
}
