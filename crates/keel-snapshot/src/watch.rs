//! The change watcher (what git's fsmonitor does): after a full scan, an inotify watch on every
//! directory the walk read, so the next snapshot re-reads only the directories where something
//! changed. Whenever in doubt — events lost (queue overflow, a watch gone), a directory moved or
//! deleted, an ignore file or `.git` touched, too many directories dirty, another process's
//! snapshot in between, every [`MAX_TAKES`]th snapshot or after [`MAX_AGE`] — the next
//! snapshot is a full scan.
//!
//! inotify reports changes made through any mount of the same filesystem, so commands confined
//! in their own mount namespace are seen. Writes through a shared writable `mmap` raise no
//! event: the periodic full scan bounds how long such a change can go unrecorded.

use std::collections::{BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use git2::{Index, Oid, Repository};
use rustix::fs::inotify::{self, ReadFlags};

use crate::SnapshotError;
use crate::error::GitContext;
use crate::meta::Meta;
use crate::scan::{self, Found, Scanned, Walked, Watching};

/// A full scan at least every this many snapshots...
pub(crate) const MAX_TAKES: u32 = 20;
/// ... and when the last one is older than this.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(60);
/// More directories dirty than this: a full scan.
pub(crate) const MAX_DIRTY: usize = 1000;

/// Why a snapshot falls back to a full scan (for the log and the tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// Events were lost, a watch was removed or could not be added.
    Lost,
    /// A watched directory was moved, renamed or deleted.
    DirMoved,
    /// An ignore file, `.git` or a global exclude changed.
    Ignores,
    /// Too many directories changed.
    TooMany,
    /// Another snapshot was taken since (another process) or the stat cache was reset.
    Stale,
    /// The periodic full scan.
    Periodic,
}

/// The state a watcher keeps between snapshots.
pub(crate) struct Watcher {
    watching: Watching,
    /// Watch descriptor → directory (relative; empty for the root).
    wds: HashMap<i32, Vec<u8>>,
    /// The snapshot this state matches, and its number.
    pub commit: Oid,
    pub number: u64,
    meta: Meta,
    /// Every file the last scan found (in the index or skipped).
    files: BTreeSet<Vec<u8>>,
    /// The directories of files with more than one link: a write through another name (in a
    /// directory not watched) raises no event here, so these are read again every time.
    linked_dirs: BTreeSet<Vec<u8>>,
    takes: u32,
    since: Instant,
    guards: Vec<(PathBuf, Option<Stamp>)>,
}

type Stamp = (i64, i64, i64, i64, u64, u64);

fn stamp_of(path: &Path) -> Option<Stamp> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if path.file_name().is_some_and(|n| n == ".git") {
        // Whether a repository is there, not what git did in it.
        return Some((0, 0, 0, 0, m.ino(), u64::from(m.is_dir())));
    }
    Some((
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
        m.ino(),
        m.size(),
    ))
}

/// Files whose change alters what is ignored without an event in a watched directory.
fn guard_paths(root: &Path) -> Vec<PathBuf> {
    let mut paths = vec![
        root.join(".git"),
        root.join(".git/info/exclude"),
        root.join(".gitignore"),
    ];
    for parent in root.ancestors().skip(1) {
        paths.push(parent.join(".gitignore"));
        paths.push(parent.join(".git"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        let home = PathBuf::from(home);
        paths.push(home.join(".gitconfig"));
        paths.push(home.join(".config/git/ignore"));
        paths.push(home.join(".config/git/config"));
    }
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME") {
        let xdg = PathBuf::from(xdg);
        paths.push(xdg.join("git/ignore"));
        paths.push(xdg.join("git/config"));
    }
    if let Ok(config) = git2::Config::open_default()
        && let Ok(path) = config.get_path("core.excludesFile")
    {
        paths.push(path);
    }
    paths
}

/// A new inotify instance for a full scan.
pub(crate) fn watching() -> Result<Watching, SnapshotError> {
    let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC)
        .map_err(|err| SnapshotError::io("watching the workspace", "inotify", err.into()))?;
    Ok(Watching {
        fd: Arc::new(fd),
        added: Arc::default(),
        failed: Arc::new(AtomicBool::new(false)),
    })
}

impl Watcher {
    /// The watcher after a full scan with `watching`; `None` when a watch could not be added.
    pub(crate) fn after_full_scan(
        root: &Path,
        watching: Watching,
        meta: &Meta,
        files: Vec<(bool, Vec<u8>)>,
    ) -> Option<Self> {
        if watching.failed.load(Ordering::SeqCst) {
            return None;
        }
        let mut this = Self {
            watching,
            wds: HashMap::new(),
            commit: Oid::ZERO_SHA1,
            number: 0,
            meta: meta.clone(),
            linked_dirs: files
                .iter()
                .filter(|(linked, _)| *linked)
                .map(|(_, path)| parent(path))
                .collect(),
            files: files.into_iter().map(|(_, path)| path).collect(),
            takes: 0,
            since: Instant::now(),
            guards: guard_paths(root)
                .into_iter()
                .map(|p| {
                    let s = stamp_of(&p);
                    (p, s)
                })
                .collect(),
        };
        this.adopt_watches();
        Some(this)
    }

    /// Keeps the watches the walks added on directories recorded (the root and `meta.dirs`);
    /// removes those on directories the walk then left out (nested repositories, the store).
    fn adopt_watches(&mut self) {
        let added = std::mem::take(
            &mut *self
                .watching
                .added
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (wd, rel) in added {
            let recorded =
                rel.is_empty() || self.meta.dirs.contains_key(&*String::from_utf8_lossy(&rel));
            if recorded {
                self.wds.insert(wd, rel);
            } else if !self.wds.contains_key(&wd) {
                let _ = inotify::remove_watch(&*self.watching.fd, wd);
            }
        }
    }

    /// Whether this state may be used for the snapshot after `newest`.
    pub(crate) fn usable(&self, newest: Option<Oid>) -> Result<(), Fallback> {
        if newest != Some(self.commit) {
            return Err(Fallback::Stale);
        }
        if self.takes + 1 >= MAX_TAKES || self.since.elapsed() >= MAX_AGE {
            return Err(Fallback::Periodic);
        }
        if self.guards.iter().any(|(p, s)| stamp_of(p) != *s) {
            return Err(Fallback::Ignores);
        }
        Ok(())
    }

    /// Reads the pending events: the directories to read again.
    pub(crate) fn drain(&mut self) -> Result<BTreeSet<Vec<u8>>, Fallback> {
        let mut dirty = self.linked_dirs.clone();
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut reader = inotify::Reader::new(&*self.watching.fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return Err(Fallback::Lost),
            };
            let flags = event.events();
            if flags.intersects(ReadFlags::QUEUE_OVERFLOW | ReadFlags::UNMOUNT) {
                return Err(Fallback::Lost);
            }
            let Some(dir) = self.wds.get(&event.wd()) else {
                // A watch this state removed itself.
                continue;
            };
            if flags.intersects(ReadFlags::IGNORED) {
                return Err(Fallback::Lost);
            }
            if flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
                return Err(Fallback::DirMoved);
            }
            if let Some(name) = event.file_name() {
                let name = name.to_bytes();
                if name == b".gitignore" || name == b".git" {
                    return Err(Fallback::Ignores);
                }
                if flags.contains(ReadFlags::ISDIR)
                    && flags
                        .intersects(ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO | ReadFlags::DELETE)
                {
                    return Err(Fallback::DirMoved);
                }
            }
            dirty.insert(dir.clone());
            if dirty.len() > MAX_DIRTY {
                return Err(Fallback::TooMany);
            }
        }
        Ok(dirty)
    }

    /// Re-reads the `dirty` directories into `index` and this state's metadata. `Ok(Err(_))`:
    /// the caller must do a full scan (with the same index: it reconciles everything).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update(
        &mut self,
        repo: &Repository,
        root: &Path,
        mut index: Index,
        stamp: Option<(i64, u32)>,
        max_file_bytes: u64,
        exclude: &Path,
        dirty: &BTreeSet<Vec<u8>>,
    ) -> Result<Result<Scanned, (Fallback, Index)>, SnapshotError> {
        let mut written = 0u64;
        let mut changed = false;
        let mut to_record = Vec::new();
        for dir in dirty {
            let reread = self.reread_dir(root, exclude, dir, &mut index, &mut changed)?;
            match reread {
                Ok(found) => to_record.extend(found),
                Err(fallback) => return Ok(Err((fallback, index))),
            }
        }
        if self.watching.failed.load(Ordering::SeqCst) {
            return Ok(Err((Fallback::Lost, index)));
        }
        for found in &to_record {
            self.forget_meta(&found.path);
            let kept = scan::record(
                repo,
                root,
                &mut index,
                &mut self.meta,
                found,
                stamp,
                max_file_bytes,
                &mut written,
                &mut changed,
            )?;
            let skipped = self
                .meta
                .skipped
                .last()
                .is_some_and(|s| s.as_bytes() == found.path.as_slice());
            if found.meta.nlink() > 1 {
                self.linked_dirs.insert(parent(&found.path));
            }
            if kept || skipped {
                self.files.insert(found.path.clone());
            } else {
                self.files.remove(&found.path);
            }
            if !kept
                && index
                    .get_path(Path::new(std::ffi::OsStr::from_bytes(&found.path)), 0)
                    .is_some()
            {
                let _ = index.remove_path(Path::new(std::ffi::OsStr::from_bytes(&found.path)));
                changed = true;
            }
        }
        self.meta.skipped.sort();
        self.meta.left_out.sort();
        self.meta.left_out.dedup();
        self.adopt_watches();
        let tree = index
            .write_tree_to(repo)
            .ctx("writing the snapshot's directories")?;
        self.takes += 1;
        Ok(Ok(Scanned {
            tree,
            meta: self.meta.clone(),
            index,
            written,
            changed,
        }))
    }

    /// Re-reads the one directory `dir` (relative; empty for the root): its mode, its
    /// directories (a new one read whole), its files gone (they leave `index`). The files to
    /// record (the stat cache skips the unchanged), or why a full scan must do it: the
    /// directory or one in it moved, gone, or left out differently.
    fn reread_dir(
        &mut self,
        root: &Path,
        exclude: &Path,
        dir: &[u8],
        index: &mut Index,
        changed: &mut bool,
    ) -> Result<Result<Vec<Found>, Fallback>, SnapshotError> {
        let abs = root.join(std::ffi::OsStr::from_bytes(dir));
        let Ok(meta) = std::fs::symlink_metadata(&abs) else {
            return Ok(Err(Fallback::DirMoved));
        };
        if !meta.is_dir() {
            return Ok(Err(Fallback::DirMoved));
        }
        if !dir.is_empty() {
            let name = String::from_utf8_lossy(dir);
            let Some(mode) = self.meta.dirs.get_mut(&*name) else {
                return Ok(Err(Fallback::DirMoved));
            };
            *mode = meta.mode() & 0o7777;
        }
        let listing = scan::walk(root, &abs, Some(1), exclude, Some(&self.watching))?;
        let prefix = if dir.is_empty() {
            Vec::new()
        } else {
            let mut p = dir.to_vec();
            p.push(b'/');
            p
        };
        // Directories and nested repositories: gone or new ones are a full scan's work,
        // except a new directory, read whole.
        if !self.same_dirs(&prefix, &listing) {
            return Ok(Err(Fallback::DirMoved));
        }
        let mut to_record = self.adopt_dirs(root, exclude, &listing.dirs)?;
        // Files: those gone leave the index; the others are recorded.
        let listed: BTreeSet<&[u8]> = listing.files.iter().map(|f| f.path.as_slice()).collect();
        let gone: Vec<Vec<u8>> = self
            .files
            .range(prefix.clone()..)
            .take_while(|p| p.starts_with(&prefix))
            .filter(|p| child_of(&prefix, p) && !listed.contains(p.as_slice()))
            .cloned()
            .collect();
        for path in gone {
            self.forget(index, &path, changed);
        }
        to_record.extend(listing.files);
        Ok(Ok(to_record))
    }

    /// Whether the directories and the left-out entries `listing` found right under `prefix`
    /// are the ones this state knows there, but for new directories.
    fn same_dirs(&self, prefix: &[u8], listing: &Walked) -> bool {
        let old_dirs: BTreeSet<String> = self
            .meta
            .dirs
            .keys()
            .filter(|d| child_of(prefix, d.as_bytes()))
            .cloned()
            .collect();
        let new_dirs: BTreeSet<String> = listing
            .dirs
            .iter()
            .map(|d| String::from_utf8_lossy(&d.path).into_owned())
            .collect();
        if old_dirs.difference(&new_dirs).next().is_some() {
            return false;
        }
        let old_left: BTreeSet<&String> = self
            .meta
            .left_out
            .iter()
            .filter(|d| child_of(prefix, d.trim_end_matches('/').as_bytes()))
            .collect();
        let new_left: BTreeSet<&String> = listing.left_out.iter().collect();
        old_left == new_left
    }

    /// Records the modes of `dirs`, reading each new one whole: the files found in them.
    fn adopt_dirs(
        &mut self,
        root: &Path,
        exclude: &Path,
        dirs: &[Found],
    ) -> Result<Vec<Found>, SnapshotError> {
        let mut files = Vec::new();
        for found in dirs {
            let rel = String::from_utf8_lossy(&found.path).into_owned();
            let is_new = !self.meta.dirs.contains_key(&rel);
            self.meta.dirs.insert(rel, found.meta.mode() & 0o7777);
            if is_new {
                let sub = scan::walk(
                    root,
                    &root.join(std::ffi::OsStr::from_bytes(&found.path)),
                    None,
                    exclude,
                    Some(&self.watching),
                )?;
                for d in &sub.dirs {
                    self.meta.dirs.insert(
                        String::from_utf8_lossy(&d.path).into_owned(),
                        d.meta.mode() & 0o7777,
                    );
                }
                self.meta.left_out.extend(sub.left_out);
                files.extend(sub.files);
            }
        }
        Ok(files)
    }

    fn forget_meta(&mut self, path: &[u8]) {
        let name = String::from_utf8_lossy(path);
        self.meta.modes.remove(&*name);
        self.meta.skipped.retain(|s| s.as_bytes() != path);
    }

    fn forget(&mut self, index: &mut Index, path: &[u8], changed: &mut bool) {
        self.forget_meta(path);
        self.files.remove(path);
        let p = Path::new(std::ffi::OsStr::from_bytes(path));
        if index.get_path(p, 0).is_some() {
            let _ = index.remove_path(p);
            *changed = true;
        }
    }
}

/// Whether `path` lies right in the directory `prefix` (`dir/`; empty for the root).
fn child_of(prefix: &[u8], path: &[u8]) -> bool {
    path.starts_with(prefix) && !path[prefix.len()..].contains(&b'/')
}

/// The directory of `path` (relative; empty for the root).
fn parent(path: &[u8]) -> Vec<u8> {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => path[..i].to_vec(),
        None => Vec::new(),
    }
}
