//! The change watcher records exactly what a full scan records: random mutation rounds, each
//! snapshot through the watcher compared with a full scan of the same state in another store;
//! and every fallback to a full scan.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use keel_snapshot::{ShadowSnapshots, SnapshotId, SnapshotLimits, SnapshotPoint, Snapshots};
use keel_test_support::temp::temp_dir;

fn point(n: usize) -> SnapshotPoint {
    SnapshotPoint {
        session_id: "session-w".into(),
        call_id: format!("call-{n}"),
        tool: "run_command".into(),
        summary: format!("round {n}"),
        history_len: n,
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The `files` tree and the `meta` blob of snapshot `id` in `snapshots`.
fn recorded(snapshots: &ShadowSnapshots, id: &SnapshotId) -> (String, Vec<u8>) {
    let repo = snapshots.repository().unwrap();
    let commit = repo
        .find_commit(git2::Oid::from_str(&id.0).unwrap())
        .unwrap();
    let tree = commit.tree().unwrap();
    let files = tree.get_name("files").unwrap().id().to_string();
    let meta = repo
        .find_blob(tree.get_name("meta").unwrap().id())
        .unwrap()
        .content()
        .to_vec();
    (files, meta)
}

/// Every directory and file (not under ignored `build/`, not the nested repository).
fn entries(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let name = entry.file_name();
            if name == "nested" || name == "build" {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                dirs.push(path.clone());
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    dirs.sort();
    files.sort();
    (dirs, files)
}

fn mutate(root: &Path, rng: &mut Rng, round: usize) {
    let (dirs, files) = entries(root);
    let mut all_dirs = vec![root.to_path_buf()];
    all_dirs.extend(dirs.iter().cloned());
    let dir = all_dirs[rng.below(all_dirs.len())].clone();
    let file = files.get(rng.below(files.len())).cloned();
    let name = format!("f{round}-{}", rng.below(1000));
    match rng.below(14) {
        0 | 1 => std::fs::write(dir.join(&name), format!("new {round}\n")).unwrap(),
        2 => {
            if let Some(f) = file.filter(|f| !f.is_symlink()) {
                std::fs::write(f, format!("changed in round {round}\n")).unwrap();
            }
        }
        3 => {
            if let Some(f) = file {
                std::fs::remove_file(f).unwrap();
            }
        }
        4 => {
            if let Some(f) = file.filter(|f| !f.is_symlink()) {
                let modes = [0o600, 0o755, 0o644, 0o700, 0o444];
                let mode = modes[rng.below(modes.len())];
                std::fs::set_permissions(f, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        }
        5 => symlink(format!("target-{round}"), dir.join(&name)).unwrap(),
        6 => {
            std::fs::create_dir(dir.join(&name)).unwrap();
            if rng.below(2) == 0 {
                std::fs::write(dir.join(&name).join("inner.txt"), "inner").unwrap();
                std::fs::create_dir(dir.join(&name).join("deeper")).unwrap();
                std::fs::write(dir.join(&name).join("deeper/x.rs"), "x").unwrap();
            }
        }
        7 => {
            if let Some(d) = dirs.get(rng.below(dirs.len())) {
                std::fs::remove_dir_all(d).unwrap();
            }
        }
        8 => {
            if let Some(f) = file {
                std::fs::rename(f, dir.join(&name)).unwrap();
            }
        }
        9 => {
            if let Some(d) = dirs.get(rng.below(dirs.len()))
                && !dir.starts_with(d)
            {
                std::fs::rename(d, dir.join(&name)).unwrap();
            }
        }
        10 => {
            if let Some(f) = file.filter(|f| !f.is_symlink()) {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(f)
                    .unwrap()
                    .set_len(0)
                    .unwrap();
            }
        }
        11 => {
            // The same size, within the same second.
            if let Some(f) = file.filter(|f| !f.is_symlink()) {
                let len = std::fs::metadata(&f).unwrap().len() as usize;
                let byte = b'a' + (round % 26) as u8;
                std::fs::write(f, vec![byte; len]).unwrap();
            }
        }
        12 => std::fs::write(dir.join(format!("{name}.log")), "ignored").unwrap(),
        _ => {
            if let Some(d) = dirs.get(rng.below(dirs.len())) {
                let modes = [0o700, 0o755, 0o750];
                let mode = modes[rng.below(modes.len())];
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        }
    }
    if rng.below(4) == 0 {
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join(format!("build/out{round}")), "ignored").unwrap();
    }
}

fn seed(root: &Path) {
    std::fs::write(root.join(".gitignore"), "*.log\nbuild/\n").unwrap();
    std::fs::create_dir_all(root.join("src/a/b")).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join("nested/.git")).unwrap();
    std::fs::write(root.join("nested/inside.txt"), "left out").unwrap();
    for i in 0..10 {
        std::fs::write(root.join(format!("src/file{i}.rs")), format!("{i}")).unwrap();
        std::fs::write(root.join(format!("src/a/b/deep{i}.rs")), format!("{i}")).unwrap();
    }
    std::fs::write(root.join("docs/readme.md"), "docs").unwrap();
}

#[test]
fn watched_snapshots_equal_full_scans_over_random_rounds() {
    let ws = temp_dir();
    let store = temp_dir();
    seed(ws.path());
    let watched = ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default())
        .unwrap()
        .watch_changes(true);
    watched.take(&point(0)).unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 1..=220 {
        for _ in 0..=rng.below(3) {
            mutate(ws.path(), &mut rng, round);
        }
        let id = watched.take(&point(round)).unwrap();
        let reference_store = temp_dir();
        let fresh =
            ShadowSnapshots::open(reference_store.path(), ws.path(), SnapshotLimits::default())
                .unwrap();
        let full = fresh.take(&point(round)).unwrap();
        let (files, meta) = recorded(&watched, &id);
        let (want_files, want_meta) = recorded(&fresh, &full);
        assert_eq!(files, want_files, "files differ after round {round}");
        assert_eq!(
            String::from_utf8_lossy(&meta),
            String::from_utf8_lossy(&want_meta),
            "meta differs after round {round}"
        );
    }
    let (watched_takes, full_scans) = watched.watch_counts();
    // The watcher did the work most of the time (the test would prove nothing otherwise).
    assert!(
        watched_takes > 100,
        "only {watched_takes} watched snapshots, {full_scans} full scans"
    );
}

/// A workspace, a watching store with one snapshot taken, and the counts after a second.
fn started() -> (tempfile::TempDir, tempfile::TempDir, ShadowSnapshots) {
    let ws = temp_dir();
    let store = temp_dir();
    seed(ws.path());
    let watched = ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default())
        .unwrap()
        .watch_changes(true);
    watched.take(&point(0)).unwrap();
    std::fs::write(ws.path().join("src/file1.rs"), "changed").unwrap();
    watched.take(&point(1)).unwrap();
    assert_eq!(watched.watch_counts(), (1, 1));
    (ws, store, watched)
}

fn next_is_full_scan(watched: &ShadowSnapshots, change: impl FnOnce()) {
    let (w, f) = watched.watch_counts();
    change();
    watched.take(&point(9)).unwrap();
    assert_eq!(watched.watch_counts(), (w, f + 1), "not a full scan");
}

#[test]
fn a_gitignore_change_is_a_full_scan() {
    let (ws, _store, watched) = started();
    next_is_full_scan(&watched, || {
        std::fs::write(ws.path().join("src/.gitignore"), "file2.rs\n").unwrap();
    });
}

#[test]
fn a_renamed_directory_is_a_full_scan() {
    let (ws, _store, watched) = started();
    next_is_full_scan(&watched, || {
        std::fs::rename(ws.path().join("src/a"), ws.path().join("src/c")).unwrap();
    });
}

#[test]
fn a_deleted_directory_is_a_full_scan() {
    let (ws, _store, watched) = started();
    next_is_full_scan(&watched, || {
        std::fs::remove_dir_all(ws.path().join("docs")).unwrap();
    });
}

#[test]
fn a_git_exclude_change_is_a_full_scan() {
    let (ws, _store, watched) = started();
    // A `.git` appearing (an event in the root) ...
    next_is_full_scan(&watched, || {
        std::fs::create_dir_all(ws.path().join(".git/info")).unwrap();
        std::fs::write(ws.path().join(".git/info/exclude"), "").unwrap();
    });
    std::fs::write(ws.path().join("src/file1.rs"), "again").unwrap();
    let (w, _) = watched.watch_counts();
    watched.take(&point(8)).unwrap();
    assert_eq!(watched.watch_counts().0, w + 1);
    // ... and its exclude file changing (no event: `.git` is not watched).
    next_is_full_scan(&watched, || {
        std::fs::write(ws.path().join(".git/info/exclude"), "docs/\n").unwrap();
    });
}

#[test]
fn another_processes_snapshot_is_a_full_scan() {
    let (ws, store, watched) = started();
    next_is_full_scan(&watched, || {
        let other =
            ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default()).unwrap();
        other.take(&point(5)).unwrap();
    });
}

#[test]
fn a_restore_is_followed_by_a_full_scan() {
    let (ws, _store, watched) = started();
    let first = watched.list().unwrap()[0].id.clone();
    next_is_full_scan(&watched, || {
        std::fs::write(ws.path().join("docs/new.md"), "new").unwrap();
        watched.restore(&first.0).unwrap();
    });
}

#[test]
fn every_twentieth_snapshot_is_a_full_scan() {
    let (ws, _store, watched) = started();
    for n in 0..40 {
        std::fs::write(ws.path().join("docs/readme.md"), format!("{n}")).unwrap();
        watched.take(&point(n)).unwrap();
    }
    let (w, f) = watched.watch_counts();
    assert_eq!(w + f, 42);
    assert!((3..=4).contains(&f), "{f} full scans in 42 snapshots");
}

#[test]
fn a_nested_repository_appearing_is_a_full_scan() {
    let (ws, _store, watched) = started();
    next_is_full_scan(&watched, || {
        std::fs::create_dir_all(ws.path().join("src/a/.git")).unwrap();
    });
}

/// Commands run confined in their own mount namespace; their writes must raise events.
#[test]
fn writes_from_another_mount_namespace_are_seen() {
    let unshare = std::process::Command::new("unshare")
        .args(["-m", "true"])
        .status();
    if !unshare.is_ok_and(|s| s.success()) {
        eprintln!("skipped: unshare -m is not available here");
        return;
    }
    let (ws, _store, watched) = started();
    let target = ws.path().join("src/file3.rs");
    let status = std::process::Command::new("unshare")
        .arg("-m")
        .arg("sh")
        .arg("-c")
        .arg("mount --make-rprivate / && printf confined > \"$1\"")
        .arg("sh")
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success());
    let (w, _) = watched.watch_counts();
    let id = watched.take(&point(7)).unwrap();
    assert_eq!(
        watched.watch_counts().0,
        w + 1,
        "not taken from watched changes"
    );
    let reference = temp_dir();
    let fresh =
        ShadowSnapshots::open(reference.path(), ws.path(), SnapshotLimits::default()).unwrap();
    let full = fresh.take(&point(7)).unwrap();
    assert_eq!(recorded(&watched, &id), recorded(&fresh, &full));
}

/// A file with another name outside the workspace changes with no event in the workspace.
#[test]
fn a_write_through_a_hard_link_outside_is_seen() {
    let outside = temp_dir();
    let ws = temp_dir();
    let store = temp_dir();
    seed(ws.path());
    let inner = ws.path().join("docs/linked.txt");
    std::fs::write(&inner, "before").unwrap();
    let other = outside.path().join("other-name.txt");
    std::fs::hard_link(&inner, &other).unwrap();
    let watched = ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default())
        .unwrap()
        .watch_changes(true);
    watched.take(&point(0)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&other, "after!").unwrap();
    let id = watched.take(&point(1)).unwrap();
    assert_eq!(watched.watch_counts(), (1, 1));
    let reference = temp_dir();
    let fresh =
        ShadowSnapshots::open(reference.path(), ws.path(), SnapshotLimits::default()).unwrap();
    let full = fresh.take(&point(1)).unwrap();
    assert_eq!(recorded(&watched, &id), recorded(&fresh, &full));
}
