//! [`ShadowSnapshots`]: snapshots in a git repository keel owns, outside the workspace.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use git2::{Index, Oid, Repository};
use sha2::{Digest, Sha256};

use crate::error::GitContext;
use crate::lock::StoreLock;
use crate::meta::{self, Header, Meta};
use crate::scan::{self, Scanned};
use crate::watch::{Fallback, Watcher};
use crate::{
    RestoreReport, SnapshotError, SnapshotId, SnapshotInfo, SnapshotLimits, SnapshotPoint,
    Snapshots,
};

/// Where snapshot references live, one per snapshot, numbered.
pub(crate) const REF_PREFIX: &str = "refs/snapshots/";
/// The file in the store naming the workspace it belongs to.
const WORKSPACE_FILE: &str = "keel-workspace";
/// The stat cache (a git index) and the snapshot commit it matches.
const INDEX_FILE: &str = "keel-index";
const INDEX_COMMIT_FILE: &str = "keel-index-commit";
/// `info/attributes` has the highest precedence: no workspace `.gitattributes` applies.
const ATTRIBUTES: &str = "* -text -eol -filter -ident -working-tree-encoding\n";

/// Snapshots of one workspace in a shadow git repository, `<store_dir>/<workspace id>.git`,
/// whose work tree is the workspace. The user's own `.git` is never read or written (the
/// workspace need not be a git repository at all).
///
/// Every snapshot is a parentless commit under `refs/snapshots/<n>` holding a `files` tree (the
/// workspace's tracked and untracked files, not ignored ones, byte for byte, symlinks as
/// symlinks) and a `meta` blob (permission bits git does not keep, directories, files left
/// out); its message carries the [`SnapshotPoint`] and the time. Each operation opens the
/// repository afresh and holds an exclusive lock on the store, so the value may be shared
/// between threads and several processes may work in the same workspace.
#[derive(Debug, Clone)]
pub struct ShadowSnapshots {
    git_dir: PathBuf,
    workspace: PathBuf,
    limits: SnapshotLimits,
    warm: Arc<Mutex<Warm>>,
    watch: bool,
    /// Snapshots taken from watched changes, and by a full scan, with the watcher on.
    counts: Arc<[AtomicU64; 2]>,
}

/// What a process keeps between operations, so a snapshot where little changed costs little:
/// the repository, whose object cache holds the trees every snapshot reads back, the change
/// watcher and the stat cache (read back from its file only when another process took a
/// snapshot since).
#[derive(Default)]
struct Warm {
    repo: Option<Repository>,
    /// The change watcher, after a full scan (when watching is on).
    watcher: Option<Watcher>,
    /// The stat cache as the last snapshot of this process left it, so the next one need not
    /// read it back from disk.
    index: Option<HeldIndex>,
}

impl Warm {
    /// The repository (opened by [`ShadowSnapshots::warm`]), the watcher and the stat cache.
    fn parts(
        &mut self,
    ) -> Result<(&Repository, &mut Option<Watcher>, &mut Option<HeldIndex>), SnapshotError> {
        let Warm {
            repo: Some(repo),
            watcher,
            index,
        } = self
        else {
            return Err(SnapshotError::Store {
                message: "the snapshot store is not open".into(),
            });
        };
        Ok((repo, watcher, index))
    }
}

/// A [`WarmIndex`] kept between snapshots, which may be taken on different threads.
struct HeldIndex(WarmIndex);

// SAFETY: a libgit2 index may be used from any thread as long as no two use it at once;
// `HeldIndex` is only ever reached through `ShadowSnapshots::warm`'s mutex, which orders every
// use. The index is standalone (`Index::open`), bound to no repository another thread uses.
#[allow(unsafe_code)]
unsafe impl Send for HeldIndex {}

/// The stat cache of one operation: the index, the snapshot commit it matches, and when it
/// was written.
pub(crate) struct WarmIndex {
    index: Index,
    commit: Oid,
    /// The number of the snapshot `commit` is.
    number: u64,
    stamp: Option<(i64, u32)>,
}

impl std::fmt::Debug for Warm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warm")
            .field("repo", &self.repo.is_some())
            .finish()
    }
}

/// A short, stable id for a workspace: the first 16 hex digits of the SHA-256 of its canonical
/// path.
pub fn workspace_id(canonical: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let digest = Sha256::digest(canonical.as_os_str().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A snapshot reference with its number and commit.
pub(crate) struct SnapshotRef {
    pub name: String,
    pub number: u64,
    pub commit: Oid,
}

impl ShadowSnapshots {
    /// Opens (creating it if needed) the store of `workspace` under `store_dir` (keel's is
    /// `$KEEL_HOME/snapshots`). Opening never prunes: a prune reads every object of the store
    /// (tens of ms for a hundred snapshots of 2,000 files) and opening is on keel's way to its
    /// first request; the next take prunes when one is due.
    pub fn open(
        store_dir: impl AsRef<Path>,
        workspace: impl AsRef<Path>,
        limits: SnapshotLimits,
    ) -> Result<Self, SnapshotError> {
        let workspace = workspace.as_ref();
        let workspace = std::fs::canonicalize(workspace)
            .map_err(|source| SnapshotError::io("opening the workspace", workspace, source))?;
        let store_dir = store_dir.as_ref();
        std::fs::create_dir_all(store_dir).map_err(|source| {
            SnapshotError::io("creating the snapshot store", store_dir, source)
        })?;
        // Canonical, so that a store inside the workspace is recognised and left out.
        let store_dir = std::fs::canonicalize(store_dir)
            .map_err(|source| SnapshotError::io("opening the snapshot store", store_dir, source))?;
        let git_dir = store_dir.join(format!("{}.git", workspace_id(&workspace)));
        std::fs::create_dir_all(&git_dir)
            .map_err(|source| SnapshotError::io("creating the snapshot store", &git_dir, source))?;
        let this = Self {
            git_dir,
            workspace,
            limits,
            warm: Arc::default(),
            watch: true,
            counts: Arc::default(),
        };
        {
            let _lock = StoreLock::acquire(&this.git_dir)?;
            this.init()?;
        }
        Ok(this)
    }

    /// Turns the change watcher on or off (on by default). On, a snapshot after the first in
    /// this process re-reads only the directories inotify reported changes in, falling back to
    /// a full scan whenever in doubt (events lost, a directory moved or deleted, an ignore file
    /// changed, another process's snapshot in between, every 20th snapshot, after 60 s). The
    /// snapshots recorded are the same either way.
    #[must_use]
    pub fn watch_changes(mut self, on: bool) -> Self {
        self.watch = on;
        self.warm = Arc::default();
        self
    }

    /// With the watcher on, how many snapshots this value took from watched changes alone, and
    /// how many by a full scan (the first, and every fallback).
    pub fn watch_counts(&self) -> (u64, u64) {
        (
            self.counts[0].load(Ordering::Relaxed),
            self.counts[1].load(Ordering::Relaxed),
        )
    }

    /// Forgets the change watcher: the next snapshot is a full scan.
    fn drop_watcher(&self) {
        self.warm
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .watcher = None;
    }

    /// The workspace (canonical).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The shadow repository's directory.
    pub fn store(&self) -> &Path {
        &self.git_dir
    }

    /// The limits in force.
    pub fn limits(&self) -> SnapshotLimits {
        self.limits
    }

    /// Drops the snapshots past the limits now (the newest is always kept) and deletes the
    /// objects no kept snapshot reaches. Runs by itself after a take when one is due.
    pub fn prune(&self) -> Result<crate::PruneReport, SnapshotError> {
        let _lock = StoreLock::acquire(&self.git_dir)?;
        self.drop_watcher();
        let repo = self.repo()?;
        crate::prune::prune(&repo, &self.git_dir, &self.limits)
    }

    /// The shadow repository, its work tree set to the workspace: for a host that wants to
    /// show a snapshot's files or diff them against the workspace (as the REPL's `/diff` does).
    /// Read it only; [`Snapshots`] is what changes it.
    pub fn repository(&self) -> Result<Repository, SnapshotError> {
        self.repo()
    }

    /// The tree of the workspace's files in snapshot `id` (a full id, a unique prefix or `#n`),
    /// an object of [`ShadowSnapshots::repository`].
    pub fn files_tree(&self, id: &str) -> Result<Oid, SnapshotError> {
        let repo = self.repo()?;
        let found = Self::resolve(&repo, id)?;
        Ok(parts(&repo, found.commit)?.files)
    }

    /// Makes the repository if it is not there, and checks it belongs to this workspace.
    fn init(&self) -> Result<(), SnapshotError> {
        let marker = self.git_dir.join(WORKSPACE_FILE);
        let path = self.workspace.as_os_str().as_encoded_bytes();
        match std::fs::read(&marker) {
            Ok(recorded) if recorded == path => return Ok(()),
            Ok(_) => {
                return Err(SnapshotError::Store {
                    message: format!(
                        "{} belongs to another workspace (see its {WORKSPACE_FILE})",
                        self.git_dir.display()
                    ),
                });
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(SnapshotError::io("reading", marker, source));
            }
        }
        let repo = Repository::init_bare(&self.git_dir).ctx("creating the snapshot store")?;
        let mut config = repo.config().ctx("opening the snapshot store's config")?;
        for (key, value) in [
            ("core.autocrlf", false),
            ("core.filemode", true),
            ("core.symlinks", true),
            ("core.ignorecase", false),
            ("gc.auto", false),
        ] {
            config
                .set_bool(key, value)
                .ctx("configuring the snapshot store")?;
        }
        let info = self.git_dir.join("info");
        std::fs::create_dir_all(&info)
            .map_err(|source| SnapshotError::io("creating", &info, source))?;
        let attributes = info.join("attributes");
        std::fs::write(&attributes, ATTRIBUTES)
            .map_err(|source| SnapshotError::io("writing", &attributes, source))?;
        std::fs::write(&marker, path)
            .map_err(|source| SnapshotError::io("writing", &marker, source))?;
        tracing::info!(store = %self.git_dir.display(), workspace = %self.workspace.display(), "snapshot store created");
        Ok(())
    }

    pub(crate) fn repo(&self) -> Result<Repository, SnapshotError> {
        let repo = Repository::open_bare(&self.git_dir).ctx("opening the snapshot store")?;
        repo.set_workdir(&self.workspace, false)
            .ctx("setting the snapshot store's work tree")?;
        Ok(repo)
    }

    /// What this process keeps between operations, locked, with the repository opened the
    /// first time.
    fn warm(&self) -> Result<std::sync::MutexGuard<'_, Warm>, SnapshotError> {
        let mut warm = self.warm.lock().unwrap_or_else(PoisonError::into_inner);
        if warm.repo.is_none() {
            warm.repo = Some(self.repo()?);
        }
        Ok(warm)
    }

    /// Runs `f` with this process's repository and stat cache (opened the first time).
    fn with_repo<T>(
        &self,
        f: impl FnOnce(&Repository, &mut Option<WarmIndex>) -> Result<T, SnapshotError>,
    ) -> Result<T, SnapshotError> {
        let mut warm = self.warm()?;
        let (repo, _, index) = warm.parts()?;
        let mut held = index.take().map(|held| held.0);
        let result = f(repo, &mut held);
        *index = held.map(HeldIndex);
        result
    }

    /// The stat cache, if it matches the newest snapshot; else an empty one. With the time it
    /// was written (entries modified since then are read again).
    fn load_index(
        &self,
        newest: Option<&SnapshotRef>,
        warm: &mut Option<WarmIndex>,
    ) -> Result<(Index, Option<(i64, u32)>), SnapshotError> {
        if let (Some(held), Some(newest)) = (warm.take(), newest)
            && held.commit == newest.commit
        {
            return Ok((held.index, held.stamp));
        }
        let path = self.git_dir.join(INDEX_FILE);
        let recorded = std::fs::read_to_string(self.git_dir.join(INDEX_COMMIT_FILE)).ok();
        let valid = matches!((newest, recorded), (Some(newest), Some(recorded))
            if recorded.trim() == newest.commit.to_string());
        if valid {
            let stamp = std::fs::metadata(&path).ok().and_then(|meta| {
                use std::os::unix::fs::MetadataExt;
                Some((meta.mtime(), u32::try_from(meta.mtime_nsec()).ok()?))
            });
            if let Ok(index) = Index::open(&path) {
                return Ok((index, stamp));
            }
        }
        let _ = std::fs::remove_file(&path);
        let index = Index::open(&path).ctx("creating the snapshot index")?;
        Ok((index, None))
    }

    /// Reads the workspace into the store (not yet a snapshot).
    fn scan(
        &self,
        repo: &Repository,
        warm: &mut Option<WarmIndex>,
    ) -> Result<(Scanned, Option<SnapshotRef>), SnapshotError> {
        let newest = match warm.as_ref().and_then(|held| still_newest(repo, held)) {
            Some(newest) => Some(newest),
            None => snapshot_refs(repo)?.into_iter().next_back(),
        };
        let (index, stamp) = self.load_index(newest.as_ref(), warm)?;
        let (scanned, _) = scan::scan(
            repo,
            &self.workspace,
            index,
            stamp,
            self.limits.max_file_bytes,
            self.git_dir.parent().unwrap_or(&self.git_dir),
            None,
        )?;
        Ok((scanned, newest))
    }

    /// Records `scanned` as the next snapshot; saves the stat cache with it.
    fn commit(
        &self,
        repo: &Repository,
        warm: &mut Option<WarmIndex>,
        scanned: Scanned,
        newest: Option<&SnapshotRef>,
        point: &SnapshotPoint,
    ) -> Result<SnapshotId, SnapshotError> {
        let Scanned {
            tree,
            meta,
            mut index,
            written,
            changed,
        } = scanned;
        let meta_json = serde_json::to_vec(&meta).unwrap_or_default();
        let meta_blob = repo
            .blob(&meta_json)
            .ctx("writing the snapshot's metadata")?;
        let mut builder = repo.treebuilder(None).ctx("building a snapshot")?;
        builder
            .insert("files", tree, 0o040000)
            .ctx("building a snapshot")?;
        builder
            .insert("meta", meta_blob, 0o100644)
            .ctx("building a snapshot")?;
        let root = builder.write().ctx("writing a snapshot")?;
        let root = repo.find_tree(root).ctx("reading a snapshot")?;
        let now = jiff::Timestamp::now();
        let header = Header {
            point: point.clone(),
            time_ms: now.as_millisecond(),
        };
        let time = git2::Time::new(now.as_second(), 0);
        let signature = git2::Signature::new("keel", "keel@localhost", &time)
            .ctx("making the snapshot's signature")?;
        let commit = repo
            .commit(
                None,
                &signature,
                &signature,
                &meta::message(&header),
                &root,
                &[],
            )
            .ctx("writing the snapshot commit")?;
        let number = newest.map_or(1, |r| r.number + 1);
        let name = ref_name(number);
        repo.reference(&name, commit, false, "keel snapshot")
            .ctx("recording the snapshot")?;
        // The stat cache now matches this snapshot. Unchanged, the file on disk still holds it
        // (its older time only makes more entries count as racily clean).
        let index_path = self.git_dir.join(INDEX_FILE);
        if changed || !index_path.exists() {
            index.write().ctx("saving the snapshot index")?;
        }
        let sidecar = self.git_dir.join(INDEX_COMMIT_FILE);
        std::fs::write(&sidecar, commit.to_string())
            .map_err(|source| SnapshotError::io("writing", &sidecar, source))?;
        let stamp = std::fs::metadata(&index_path).ok().and_then(|meta| {
            use std::os::unix::fs::MetadataExt;
            Some((meta.mtime(), u32::try_from(meta.mtime_nsec()).ok()?))
        });
        *warm = Some(WarmIndex {
            index,
            commit,
            number,
            stamp,
        });
        crate::prune::add_written(&self.git_dir, written);
        tracing::debug!(%name, %commit, tool = %point.tool, "snapshot taken");
        Ok(SnapshotId(commit.to_string()))
    }

    /// A snapshot through the change watcher: only the directories with events are read again
    /// when the watcher's state is usable; else a full scan that starts a new watcher.
    fn take_watched(&self, point: &SnapshotPoint) -> Result<SnapshotId, SnapshotError> {
        let mut warm = self.warm()?;
        let (repo, watcher, kept) = warm.parts()?;
        let mut held = kept.take().map(|held| held.0);
        // Two reference look-ups when the watcher's snapshot is still the newest.
        let newest = match watcher
            .as_ref()
            .and_then(|w| still_newest_of(repo, w.commit, w.number))
        {
            Some(newest) => Some(newest),
            None => snapshot_refs(repo)?.into_iter().next_back(),
        };
        let (index, stamp) = self.load_index(newest.as_ref(), &mut held)?;
        let exclude = self.git_dir.parent().unwrap_or(&self.git_dir);
        let mut current = watcher.take();
        let mut index = Some(index);
        let mut scanned = None;
        if let Some(w) = current.as_mut() {
            let ready = if stamp.is_none() {
                Err(Fallback::Stale)
            } else {
                w.usable(newest.as_ref().map(|r| r.commit))
            };
            let dirty = ready.and_then(|()| w.drain());
            match dirty {
                Ok(dirty) => {
                    let idx = index.take().ok_or_else(|| SnapshotError::Store {
                        message: "the snapshot index is gone".into(),
                    })?;
                    match w.update(
                        repo,
                        &self.workspace,
                        idx,
                        stamp,
                        self.limits.max_file_bytes,
                        exclude,
                        &dirty,
                    )? {
                        Ok(s) => {
                            tracing::debug!(dirs = dirty.len(), "snapshot from watched changes");
                            scanned = Some(s);
                            self.counts[0].fetch_add(1, Ordering::Relaxed);
                        }
                        Err((why, idx)) => {
                            tracing::debug!(?why, "snapshot falls back to a full scan");
                            index = Some(idx);
                        }
                    }
                }
                Err(why) => tracing::debug!(?why, "snapshot falls back to a full scan"),
            }
        }
        let scanned = match scanned {
            Some(s) => s,
            None => {
                let idx = index.take().ok_or_else(|| SnapshotError::Store {
                    message: "the snapshot index is gone".into(),
                })?;
                self.counts[1].fetch_add(1, Ordering::Relaxed);
                // No inotify instance to be had (the per-user limit): a plain full scan.
                let watching = crate::watch::watching()
                    .inspect_err(|err| tracing::debug!("not watching the workspace: {err}"))
                    .ok();
                let (s, files) = scan::scan(
                    repo,
                    &self.workspace,
                    idx,
                    stamp,
                    self.limits.max_file_bytes,
                    exclude,
                    watching.as_ref(),
                )?;
                current = watching.and_then(|watching| {
                    Watcher::after_full_scan(&self.workspace, watching, &s.meta, files)
                });
                s
            }
        };
        let id = self.commit(repo, &mut held, scanned, newest.as_ref(), point)?;
        *kept = held.map(HeldIndex);
        if let (Some(mut w), Ok(commit)) = (current, Oid::from_str(&id.0)) {
            w.commit = commit;
            w.number = newest.as_ref().map_or(1, |r| r.number + 1);
            *watcher = Some(w);
        }
        Ok(id)
    }

    fn take_locked(&self, point: &SnapshotPoint) -> Result<SnapshotId, SnapshotError> {
        if self.watch {
            return self.take_watched(point);
        }
        self.with_repo(|repo, warm| {
            let (scanned, newest) = self.scan(repo, warm)?;
            self.commit(repo, warm, scanned, newest.as_ref(), point)
        })
    }

    /// The snapshot `id` names: a full id, a unique prefix of one, or `#n` its number.
    pub(crate) fn resolve(repo: &Repository, id: &str) -> Result<SnapshotRef, SnapshotError> {
        let id = id.trim();
        let refs = snapshot_refs(repo)?;
        let not_found = || SnapshotError::NotFound { id: id.to_owned() };
        if let Some(number) = id.strip_prefix('#') {
            let number: u64 = number.parse().map_err(|_| not_found())?;
            return refs
                .into_iter()
                .find(|r| r.number == number)
                .ok_or_else(not_found);
        }
        let lower = id.to_ascii_lowercase();
        if lower.len() < 4 || !lower.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(not_found());
        }
        let mut matching = refs
            .into_iter()
            .filter(|r| r.commit.to_string().starts_with(&lower));
        let found = matching.next().ok_or_else(not_found)?;
        if matching.any(|r| r.commit != found.commit) {
            return Err(SnapshotError::Ambiguous { id: id.to_owned() });
        }
        Ok(found)
    }
}

/// A snapshot commit's parts.
pub(crate) struct Parts {
    pub files: Oid,
    pub meta: Meta,
    pub header: Option<Header>,
    pub time: jiff::Timestamp,
}

pub(crate) fn parts(repo: &Repository, commit: Oid) -> Result<Parts, SnapshotError> {
    let commit = repo.find_commit(commit).ctx("reading a snapshot")?;
    let tree = commit.tree().ctx("reading a snapshot")?;
    let files = tree
        .get_name("files")
        .map(|e| e.id())
        .ok_or_else(|| SnapshotError::Store {
            message: format!("snapshot {} has no files", commit.id()),
        })?;
    let meta = tree
        .get_name("meta")
        .and_then(|e| repo.find_blob(e.id()).ok())
        .and_then(|blob| serde_json::from_slice(blob.content()).ok())
        .unwrap_or_default();
    let header = meta::parse_message(&String::from_utf8_lossy(commit.message_bytes()));
    let time = header
        .as_ref()
        .and_then(|h| jiff::Timestamp::from_millisecond(h.time_ms).ok())
        .or_else(|| jiff::Timestamp::from_second(commit.time().seconds()).ok())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    Ok(Parts {
        files,
        meta,
        header,
        time,
    })
}

/// Every snapshot reference, oldest (lowest number) first.
/// The name of snapshot `number`'s reference.
fn ref_name(number: u64) -> String {
    format!("{REF_PREFIX}{number:012}")
}

/// The snapshot this process took last, when it is still the newest (no other process took
/// one since): two reference look-ups instead of reading every snapshot's reference, which
/// grows with the store.
fn still_newest(repo: &Repository, held: &WarmIndex) -> Option<SnapshotRef> {
    still_newest_of(repo, held.commit, held.number)
}

/// Snapshot `number`, when it is `commit` and no later one exists.
fn still_newest_of(repo: &Repository, held: Oid, number: u64) -> Option<SnapshotRef> {
    if repo.find_reference(&ref_name(number + 1)).is_ok() {
        return None;
    }
    let name = ref_name(number);
    let commit = repo.find_reference(&name).ok()?.target()?;
    (commit == held).then_some(SnapshotRef {
        name,
        number,
        commit,
    })
}

pub(crate) fn snapshot_refs(repo: &Repository) -> Result<Vec<SnapshotRef>, SnapshotError> {
    let mut found = Vec::new();
    let references = repo
        .references_glob(&format!("{REF_PREFIX}*"))
        .ctx("listing snapshots")?;
    for reference in references {
        let reference = reference.ctx("listing snapshots")?;
        let (Ok(name), Some(commit)) = (reference.name(), reference.target()) else {
            continue;
        };
        let Some(number) = name.strip_prefix(REF_PREFIX).and_then(|n| n.parse().ok()) else {
            continue;
        };
        found.push(SnapshotRef {
            name: name.to_owned(),
            number,
            commit,
        });
    }
    found.sort_by_key(|r| r.number);
    Ok(found)
}

impl Snapshots for ShadowSnapshots {
    fn take(&self, point: &SnapshotPoint) -> Result<SnapshotId, SnapshotError> {
        let id = {
            let _lock = StoreLock::acquire(&self.git_dir)?;
            self.take_locked(point)?
        };
        if crate::prune::due(&self.git_dir, &self.limits, 0)
            && let Err(err) = self.prune()
        {
            tracing::warn!("pruning snapshots failed: {err}");
        }
        Ok(id)
    }

    fn list(&self) -> Result<Vec<SnapshotInfo>, SnapshotError> {
        let _lock = StoreLock::acquire(&self.git_dir)?;
        let repo = self.repo()?;
        let refs = snapshot_refs(&repo)?;
        let mut parts_list = Vec::with_capacity(refs.len());
        for r in &refs {
            parts_list.push(parts(&repo, r.commit)?);
        }
        // The newest is compared with the workspace now: one scan, as much as a take costs.
        let now = if parts_list.is_empty() {
            None
        } else {
            let (scanned, _) = self.scan(&repo, &mut None)?;
            Some((scanned.tree, scanned.meta))
        };
        let mut out = Vec::with_capacity(refs.len());
        for (i, (r, p)) in refs.iter().zip(&parts_list).enumerate() {
            let (next_tree, next_meta) = match parts_list.get(i + 1) {
                Some(next) => (next.files, &next.meta),
                None => match &now {
                    Some((tree, meta)) => (*tree, meta),
                    None => (p.files, &p.meta),
                },
            };
            let changed = crate::restore::changed(&repo, p.files, &p.meta, next_tree, next_meta)?;
            let point = p
                .header
                .as_ref()
                .map(|h| h.point.clone())
                .unwrap_or(SnapshotPoint {
                    session_id: String::new(),
                    call_id: String::new(),
                    tool: String::new(),
                    summary: String::new(),
                    history_len: 0,
                });
            out.push(SnapshotInfo {
                id: SnapshotId(r.commit.to_string()),
                time: p.time,
                point,
                changed,
            });
        }
        Ok(out)
    }

    fn restore(&self, id: &str) -> Result<RestoreReport, SnapshotError> {
        let _lock = StoreLock::acquire(&self.git_dir)?;
        self.drop_watcher();
        let repo = self.repo()?;
        let target_ref = Self::resolve(&repo, id)?;
        let target = parts(&repo, target_ref.commit)?;
        // The process's warm cache is left alone: this scan's index goes with `before`.
        let mut warm = None;
        let (scanned, newest) = self.scan(&repo, &mut warm)?;
        let current_tree = scanned.tree;
        let current_meta = scanned.meta.clone();
        if current_tree == target.files
            && current_meta.modes == target.meta.modes
            && current_meta.dirs == target.meta.dirs
        {
            return Ok(RestoreReport::default());
        }
        let short: String = target_ref.commit.to_string().chars().take(12).collect();
        let point = SnapshotPoint {
            session_id: String::new(),
            call_id: String::new(),
            tool: "rewind".to_owned(),
            summary: format!("before rewinding to {short}"),
            history_len: 0,
        };
        let before = self.commit(&repo, &mut warm, scanned, newest.as_ref(), &point)?;
        let mut report = crate::restore::apply(
            &repo,
            &self.workspace,
            (current_tree, &current_meta),
            (target.files, &target.meta),
        )?;
        report.before = Some(before);
        tracing::info!(
            snapshot = %target_ref.commit,
            restored = report.restored.len(),
            removed = report.removed.len(),
            "workspace rewound"
        );
        Ok(report)
    }
}
