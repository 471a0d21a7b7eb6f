//! Reading the workspace into the shadow repository: one walk (in parallel, `.gitignore` and
//! the global excludes applied, the user's `.git` and nested repositories left out), a stat
//! cache in the shadow index so unchanged files are not read again, and the index's cache tree
//! so unchanged directories are not written again.
//!
//! Blobs are written from the bytes on disk with `git_blob_create_from_buffer`, which runs no
//! filter: no `.gitattributes` (the workspace's are untrusted) can change what is stored.

use std::collections::HashSet;
use std::fs::Metadata;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use git2::{Index, IndexEntry, IndexTime, Oid, Repository};

use crate::SnapshotError;
use crate::error::GitContext;
use crate::meta::Meta;

/// Git's mode for a regular file without, and with, the exec bit, and for a symlink.
const MODE_FILE: u32 = 0o100644;
const MODE_EXEC: u32 = 0o100755;
const MODE_LINK: u32 = 0o120000;

/// One file, symlink or directory the walk found.
pub(crate) struct Found {
    /// Relative to the workspace, `/`-separated.
    pub path: Vec<u8>,
    pub meta: Metadata,
}

/// What the walk found.
#[derive(Default)]
pub(crate) struct Walked {
    pub files: Vec<Found>,
    pub dirs: Vec<Found>,
    pub left_out: Vec<String>,
}

/// A watch descriptor and the directory it watches (relative; empty for the root).
pub(crate) type Watch = (i32, Vec<u8>);

/// A file's path (relative) and whether it has more than one link.
pub(crate) type FoundPath = (bool, Vec<u8>);

/// An inotify instance a walk adds a watch to for every directory it is about to read (before
/// reading it, so nothing created in between is missed), and the watches it added.
#[derive(Clone)]
pub(crate) struct Watching {
    pub fd: Arc<OwnedFd>,
    /// Watch descriptor and directory (relative, `/`-separated; empty for the root).
    pub added: Arc<Mutex<Vec<Watch>>>,
    /// Set when a watch could not be added (e.g. `ENOSPC`: the watch limit).
    pub failed: Arc<AtomicBool>,
}

impl Watching {
    /// Watches the directory `abs` (whose path relative to the workspace is `rel`).
    pub(crate) fn add(&self, abs: &Path, rel: Vec<u8>) {
        use rustix::fs::inotify::{WatchFlags, add_watch};
        let flags = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MODIFY
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::ATTRIB
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR
            | WatchFlags::DONT_FOLLOW;
        match add_watch(&*self.fd, abs, flags) {
            Ok(wd) => self
                .added
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((wd, rel)),
            Err(err) => {
                tracing::debug!(dir = %abs.display(), error = %err, "cannot watch a directory");
                self.failed.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// The workspace as read into the shadow repository.
pub(crate) struct Scanned {
    /// The `files` tree.
    pub tree: Oid,
    pub meta: Meta,
    /// The index, updated; to be written once the snapshot is recorded.
    pub index: Index,
    /// Bytes of the blobs written.
    pub written: u64,
    /// Whether the index changed (else it need not be written again).
    pub changed: bool,
}

/// Reads the workspace at `root` into `repo`, starting from `index` (the stat cache of the last
/// snapshot; entries with an mtime at or after `stamp` are read again, as git does with racily
/// clean entries).
pub(crate) fn scan(
    repo: &Repository,
    root: &Path,
    mut index: Index,
    stamp: Option<(i64, u32)>,
    max_file_bytes: u64,
    exclude: &Path,
    watching: Option<&Watching>,
) -> Result<(Scanned, Vec<FoundPath>), SnapshotError> {
    let walked = walk(root, root, None, exclude, watching)?;
    let mut meta = Meta {
        left_out: walked.left_out,
        ..Meta::default()
    };
    for dir in &walked.dirs {
        meta.dirs.insert(
            String::from_utf8_lossy(&dir.path).into_owned(),
            dir.meta.mode() & 0o7777,
        );
    }
    let mut files = walked.files;
    files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(files.len());
    let mut written = 0u64;
    let mut changed = false;
    for found in &files {
        if record(
            repo,
            root,
            &mut index,
            &mut meta,
            found,
            stamp,
            max_file_bytes,
            &mut written,
            &mut changed,
        )? {
            seen.insert(&found.path);
        }
    }
    // Every path seen is in the index: when the counts agree, nothing else is.
    let gone: Vec<Vec<u8>> = if index.len() == seen.len() {
        Vec::new()
    } else {
        index
            .iter()
            .filter(|entry| !seen.contains(entry.path.as_slice()))
            .map(|entry| entry.path)
            .collect()
    };
    changed |= !gone.is_empty();
    for path in gone {
        index
            .remove_path(Path::new(std::ffi::OsStr::from_bytes(&path)))
            .ctx("updating the snapshot index")?;
    }
    let tree = index
        .write_tree_to(repo)
        .ctx("writing the snapshot's directories")?;
    // With the number of links: a file with another name elsewhere may change without an
    // event in the directories watched.
    let paths = files
        .into_iter()
        .map(|found| (found.meta.nlink() > 1, found.path))
        .collect();
    Ok((
        Scanned {
            tree,
            meta,
            index,
            written,
            changed,
        },
        paths,
    ))
}

/// Records one file the walk found into `index` and `meta`: read again unless the stat cache
/// says it is unchanged. Whether it is in the index afterwards (not skipped, not vanished).
#[allow(clippy::too_many_arguments)]
pub(crate) fn record(
    repo: &Repository,
    root: &Path,
    index: &mut Index,
    meta: &mut Meta,
    found: &Found,
    stamp: Option<(i64, u32)>,
    max_file_bytes: u64,
    written: &mut u64,
    changed: &mut bool,
) -> Result<bool, SnapshotError> {
    let path = Path::new(std::ffi::OsStr::from_bytes(&found.path));
    let name = String::from_utf8_lossy(&found.path);
    let is_link = found.meta.file_type().is_symlink();
    if !is_link && found.meta.len() > max_file_bytes {
        meta.skipped.push(name.into_owned());
        return Ok(false);
    }
    let perm = found.meta.mode() & 0o7777;
    let git_mode = if is_link {
        MODE_LINK
    } else if perm & 0o111 != 0 {
        MODE_EXEC
    } else {
        MODE_FILE
    };
    if !is_link && perm != 0o644 && perm != 0o755 {
        meta.modes.insert(name.clone().into_owned(), perm);
    }
    let cached = index.get_path(path, 0);
    if let Some(entry) = &cached
        && up_to_date(entry, &found.meta, git_mode, stamp)
    {
        return Ok(true);
    }
    let bytes = match read(root, &found.path, is_link) {
        Ok(bytes) => bytes,
        // Gone (or replaced) since the walk: as if it had not been there.
        Err(err) => {
            tracing::debug!(path = %name, error = %err, "file vanished while snapshotting");
            return Ok(false);
        }
    };
    let id = repo
        .blob(&bytes)
        .ctx("writing a file to the snapshot store")?;
    *written += bytes.len() as u64;
    let entry = entry_for(&found.meta, git_mode, id, found.path.clone());
    *changed = true;
    match index.add(&entry) {
        Ok(()) => Ok(true),
        // libgit2 refuses some names (e.g. `.git` spelled otherwise); leave them out.
        Err(err) => {
            tracing::warn!(path = %name, error = %err.message(), "file left out of the snapshot");
            meta.skipped.push(name.into_owned());
            Ok(false)
        }
    }
}

/// Whether `entry` still describes the file whose metadata is `meta`.
fn up_to_date(
    entry: &IndexEntry,
    meta: &Metadata,
    git_mode: u32,
    stamp: Option<(i64, u32)>,
) -> bool {
    let Some(stamp) = stamp else {
        return false;
    };
    let mtime = (i64::from(entry.mtime.seconds()), entry.mtime.nanoseconds());
    // Racily clean: written in the same tick as the index, it may have changed unseen.
    if mtime >= stamp {
        return false;
    }
    entry.mode == git_mode
        && i64::from(entry.mtime.seconds()) == meta.mtime()
        && entry.mtime.nanoseconds() == nanos(meta.mtime_nsec())
        && i64::from(entry.ctime.seconds()) == meta.ctime()
        && entry.ctime.nanoseconds() == nanos(meta.ctime_nsec())
        && entry.ino == meta.ino() as u32
        && entry.file_size == meta.size() as u32
}

fn nanos(ns: i64) -> u32 {
    u32::try_from(ns).unwrap_or(0)
}

fn secs(s: i64) -> i32 {
    // Index times are 32-bit; later times wrap as git's do.
    s as i32
}

fn entry_for(meta: &Metadata, git_mode: u32, id: Oid, path: Vec<u8>) -> IndexEntry {
    IndexEntry {
        ctime: IndexTime::new(secs(meta.ctime()), nanos(meta.ctime_nsec())),
        mtime: IndexTime::new(secs(meta.mtime()), nanos(meta.mtime_nsec())),
        dev: meta.dev() as u32,
        ino: meta.ino() as u32,
        mode: git_mode,
        uid: meta.uid(),
        gid: meta.gid(),
        file_size: meta.size() as u32,
        id,
        flags: 0,
        flags_extended: 0,
        path,
    }
}

/// The bytes of a file (never following a symlink in its place) or a symlink's target.
fn read(root: &Path, rel: &[u8], is_link: bool) -> std::io::Result<Vec<u8>> {
    let path = root.join(std::ffi::OsStr::from_bytes(rel));
    if is_link {
        return Ok(std::fs::read_link(&path)?.into_os_string().into_vec());
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags())
        .open(&path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("no longer a regular file"));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `O_NOFOLLOW | O_NONBLOCK` (a FIFO swapped in must not block the snapshot).
fn libc_flags() -> i32 {
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32
}

use std::os::unix::ffi::OsStringExt;

/// Walks the workspace: files and symlinks, directories, nested repositories and `exclude`
/// (the snapshot store, should it lie inside) left out.
/// From `start` (the root or a directory in it; `max_depth` as the walker's), with `watching`
/// watching every directory before it is read.
pub(crate) fn walk(
    root: &Path,
    start: &Path,
    max_depth: Option<usize>,
    exclude: &Path,
    watching: Option<&Watching>,
) -> Result<Walked, SnapshotError> {
    let (tx, rx) = mpsc::channel::<Walked>();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let mut builder = ignore::WalkBuilder::new(start);
    builder.max_depth(max_depth);
    if let Some(watching) = watching {
        let rel = start.strip_prefix(root).unwrap_or(Path::new(""));
        watching.add(start, rel.as_os_str().as_bytes().to_vec());
        let watching = watching.clone();
        let root = root.to_path_buf();
        builder.filter_entry(move |entry| {
            // Called for an entry not ignored, before the walker reads it.
            if entry.file_type().is_some_and(|t| t.is_dir())
                && entry.file_name() != ".git"
                && let Ok(rel) = entry.path().strip_prefix(&root)
            {
                watching.add(entry.path(), rel.as_os_str().as_bytes().to_vec());
            }
            true
        });
    }
    builder
        .hidden(false)
        .ignore(false)
        .parents(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .threads(threads);
    let root_buf: PathBuf = root.to_path_buf();
    builder.build_parallel().run(|| {
        let tx = tx.clone();
        let root = root_buf.clone();
        Box::new(WalkSink {
            tx,
            root,
            exclude: exclude.to_path_buf(),
            found: Walked::default(),
        })
        .into_visitor()
    });
    drop(tx);
    let mut all = Walked::default();
    for part in rx {
        all.files.extend(part.files);
        all.dirs.extend(part.dirs);
        all.left_out.extend(part.left_out);
    }
    all.left_out.sort();
    if !all.left_out.is_empty() {
        tracing::debug!(left_out = ?all.left_out, "git repositories inside the workspace left out");
    }
    Ok(all)
}

/// One walker thread's findings, sent when the thread is done.
struct WalkSink {
    tx: mpsc::Sender<Walked>,
    root: PathBuf,
    exclude: PathBuf,
    found: Walked,
}

impl Drop for WalkSink {
    fn drop(&mut self) {
        let found = std::mem::take(&mut self.found);
        let _ = self.tx.send(found);
    }
}

impl WalkSink {
    fn into_visitor(
        mut self: Box<Self>,
    ) -> Box<dyn FnMut(Result<ignore::DirEntry, ignore::Error>) -> ignore::WalkState + Send> {
        Box::new(move |entry| self.visit(entry))
    }

    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) -> ignore::WalkState {
        use ignore::WalkState::{Continue, Skip};
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                tracing::debug!(error = %err, "snapshot walk");
                return Continue;
            }
        };
        if entry.depth() == 0 {
            return Continue;
        }
        if entry.file_name() == ".git" || entry.path() == self.exclude {
            return Skip;
        }
        let Ok(rel) = entry.path().strip_prefix(&self.root) else {
            return Skip;
        };
        let rel = rel.as_os_str().as_bytes().to_vec();
        let Ok(meta) = entry.metadata() else {
            return Skip;
        };
        let kind = meta.file_type();
        if kind.is_dir() {
            if std::fs::symlink_metadata(entry.path().join(".git")).is_ok() {
                let mut name = String::from_utf8_lossy(&rel).into_owned();
                name.push('/');
                self.found.left_out.push(name);
                return Skip;
            }
            self.found.dirs.push(Found { path: rel, meta });
        } else if kind.is_file() || kind.is_symlink() {
            self.found.files.push(Found { path: rel, meta });
        }
        Continue
    }
}
