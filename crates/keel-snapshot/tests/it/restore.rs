//! Restores are byte for byte: contents, permission bits, symlinks, directories; ignored files,
//! the user's `.git` and everything outside the workspace untouched.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use keel_snapshot::{ShadowSnapshots, SnapshotLimits, SnapshotPoint, Snapshots};
use keel_test_support::git::TempRepo;
use keel_test_support::manifest::{Entry, differences, manifest};
use keel_test_support::temp::temp_dir;

fn point(n: usize) -> SnapshotPoint {
    SnapshotPoint {
        session_id: "session-1".into(),
        call_id: format!("call-{n}"),
        tool: "run_command".into(),
        summary: format!("step {n}"),
        history_len: n,
    }
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn chmod(root: &Path, rel: &str, mode: u32) {
    std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A workspace with every kind of file a snapshot must give back.
fn fill(root: &Path) {
    write(root, "README.md", b"# project\n");
    write(root, "src/lib.rs", b"pub fn one() -> u32 { 1 }\n");
    write(root, "src/deep/er/still/file.txt", b"nested\n");
    write(root, "empty.txt", b"");
    let binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    write(root, "data.bin", &binary);
    // Mixed line endings, under attributes that would convert them if any filter ran.
    write(root, "crlf.txt", b"one\r\ntwo\nthree\r\n\x00four");
    write(
        root,
        ".gitattributes",
        b"* text eol=crlf\n*.txt filter=x ident\n",
    );
    write(root, "secret.key", b"0600 file\n");
    chmod(root, "secret.key", 0o600);
    write(root, "run.sh", b"#!/bin/sh\necho hi\n");
    chmod(root, "run.sh", 0o755);
    write(root, "private.sh", b"#!/bin/sh\n");
    chmod(root, "private.sh", 0o700);
    write(root, "readonly.txt", b"do not edit\n");
    chmod(root, "readonly.txt", 0o444);
    symlink("src/lib.rs", root.join("link-to-lib")).unwrap();
    symlink("../nowhere/at/all", root.join("src/dangling")).unwrap();
    std::fs::create_dir_all(root.join("empty-dir")).unwrap();
    write(root, ".gitignore", b"*.log\ntarget/\n");
    write(root, "build.log", b"ignored log\n");
    write(root, "target/debug/app", b"ignored binary\n");
}

/// Changes every kind of thing a tool call can change.
fn vandalise(root: &Path) {
    write(root, "README.md", b"# rewritten\n");
    std::fs::remove_dir_all(root.join("src")).unwrap();
    std::fs::remove_file(root.join("empty.txt")).unwrap();
    write(root, "data.bin", b"truncated");
    write(root, "crlf.txt", b"normalised\n");
    write(root, ".gitattributes", b"");
    chmod(root, "secret.key", 0o644);
    chmod(root, "run.sh", 0o644);
    std::fs::remove_file(root.join("private.sh")).unwrap();
    chmod(root, "readonly.txt", 0o644);
    write(root, "readonly.txt", b"edited\n");
    std::fs::remove_file(root.join("link-to-lib")).unwrap();
    write(root, "link-to-lib", b"a file now");
    std::fs::remove_dir(root.join("empty-dir")).unwrap();
    write(root, "new/dir/made.txt", b"created since\n");
    write(root, "new.txt", b"created since\n");
    symlink("/etc/passwd", root.join("new-link")).unwrap();
    // `.gitignore` itself changes: the log is no longer ignored under the new rules.
    write(root, ".gitignore", b"target/\n");
    write(root, "build.log", b"edited ignored log\n");
    write(root, "target/debug/app", b"rebuilt\n");
}

#[test]
fn restore_is_byte_for_byte_in_a_directory_that_is_not_a_repository() {
    let store = temp_dir();
    let ws = temp_dir();
    fill(ws.path());
    let original = manifest(ws.path(), &[]);
    let snapshots =
        ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default()).unwrap();
    let id = snapshots.take(&point(1)).unwrap();

    vandalise(ws.path());
    let report = snapshots.restore(&id.0).unwrap();

    let mut expected = original;
    // Ignored files are never restored nor removed: they keep what they have now.
    for ignored in ["build.log", "target/debug/app"] {
        let bytes = std::fs::read(ws.path().join(ignored)).unwrap();
        expected.insert(ignored.into(), Entry::File { bytes, mode: 0o644 });
    }
    let now = manifest(ws.path(), &[]);
    assert_eq!(differences(&expected, &now), Vec::<String>::new());
    assert!(report.before.is_some());
    assert!(report.removed.contains(&"new.txt".into()), "{report:?}");
    assert!(report.restored.contains(&"src/lib.rs".into()), "{report:?}");
    assert!(!report.restored.iter().any(|p| p.starts_with("target")));
}

#[test]
fn a_git_repository_is_neither_read_nor_written() {
    let repo = TempRepo::with_every_change();
    let ws = repo.path();
    write(&ws, "untracked.txt", b"untracked\n");
    let git_before = manifest(&ws.join(".git"), &[]);
    let original = manifest(&ws, &[".git"]);
    let store = temp_dir();
    let snapshots = ShadowSnapshots::open(store.path(), &ws, SnapshotLimits::default()).unwrap();
    let id = snapshots.take(&point(1)).unwrap();
    assert_eq!(
        differences(&git_before, &manifest(&ws.join(".git"), &[])),
        Vec::<String>::new()
    );

    write(&ws, "src/lib.rs", b"changed");
    std::fs::remove_file(ws.join("untracked.txt")).unwrap();
    write(&ws, "made.txt", b"new");
    let report = snapshots.restore(&id.0).unwrap();

    assert_eq!(
        differences(&original, &manifest(&ws, &[".git"])),
        Vec::<String>::new()
    );
    assert_eq!(
        differences(&git_before, &manifest(&ws.join(".git"), &[])),
        Vec::<String>::new()
    );
    assert_eq!(report.removed, [std::path::PathBuf::from("made.txt")]);
    // Nothing of keel's lives in the workspace.
    assert!(!ws.join(".keel").exists());
}

#[test]
fn restore_never_writes_or_deletes_through_a_symlink() {
    let outside = temp_dir();
    write(outside.path(), "main.rs", b"outside main\n");
    write(outside.path(), "victim.txt", b"outside victim\n");
    write(outside.path(), "other/lib.rs", b"outside lib\n");
    let outside_before = manifest(outside.path(), &[]);

    let ws = temp_dir();
    write(ws.path(), "src/main.rs", b"fn main() {}\n");
    write(ws.path(), "lib/lib.rs", b"// lib\n");
    let original = manifest(ws.path(), &[]);
    let store = temp_dir();
    let snapshots =
        ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default()).unwrap();
    let id = snapshots.take(&point(1)).unwrap();

    // The model swaps directories for symlinks to outside, relative and absolute.
    std::fs::remove_dir_all(ws.path().join("src")).unwrap();
    symlink(outside.path(), ws.path().join("src")).unwrap();
    std::fs::remove_dir_all(ws.path().join("lib")).unwrap();
    let relative = pathdiff(outside.path().join("other"), ws.path());
    symlink(&relative, ws.path().join("lib")).unwrap();
    snapshots.take(&point(2)).unwrap();
    // ...and makes a file whose removal, through a swapped parent, would hit outside.
    write(ws.path(), "victim-dir/victim.txt", b"inside\n");
    snapshots.take(&point(3)).unwrap();
    std::fs::remove_dir_all(ws.path().join("victim-dir")).unwrap();
    symlink(outside.path(), ws.path().join("victim-dir")).unwrap();

    snapshots.restore(&id.0).unwrap();

    assert_eq!(
        differences(&outside_before, &manifest(outside.path(), &[])),
        Vec::<String>::new()
    );
    assert_eq!(
        differences(&original, &manifest(ws.path(), &[])),
        Vec::<String>::new()
    );
}

/// `target` relative to `base` (both absolute), for a `../` symlink.
fn pathdiff(target: std::path::PathBuf, base: &Path) -> std::path::PathBuf {
    let mut up = std::path::PathBuf::new();
    let mut base = base.to_path_buf();
    while !target.starts_with(&base) {
        up.push("..");
        base.pop();
    }
    up.join(target.strip_prefix(&base).unwrap())
}

#[test]
fn a_rewind_can_itself_be_rewound() {
    let ws = temp_dir();
    write(ws.path(), "a.txt", b"first\n");
    let store = temp_dir();
    let snapshots =
        ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default()).unwrap();
    let id = snapshots.take(&point(1)).unwrap();
    write(ws.path(), "a.txt", b"second\n");
    write(ws.path(), "b.txt", b"made\n");
    chmod(ws.path(), "b.txt", 0o600);
    let later = manifest(ws.path(), &[]);

    let report = snapshots.restore(&id.0).unwrap();
    assert_eq!(std::fs::read(ws.path().join("a.txt")).unwrap(), b"first\n");
    let before = report.before.unwrap();
    snapshots.restore(&before.0).unwrap();
    assert_eq!(
        differences(&later, &manifest(ws.path(), &[])),
        Vec::<String>::new()
    );

    // Restoring to where the workspace already is does nothing and records nothing.
    let again = snapshots.restore(&before.0).unwrap();
    assert_eq!(again, keel_snapshot::RestoreReport::default());
}

#[test]
fn large_files_and_nested_repositories_are_left_out_and_left_alone() {
    let ws = temp_dir();
    write(ws.path(), "small.txt", b"small\n");
    write(ws.path(), "big.bin", &vec![7u8; 4096]);
    let nested = TempRepo::new();
    let nested_path = ws.path().join("vendor/dep");
    std::fs::create_dir_all(ws.path().join("vendor")).unwrap();
    std::fs::rename(nested.path(), &nested_path).unwrap();
    write(&nested_path, "inside.txt", b"nested repo file\n");
    let store = temp_dir();
    let limits = SnapshotLimits {
        max_file_bytes: 1024,
        ..SnapshotLimits::default()
    };
    let snapshots = ShadowSnapshots::open(store.path(), ws.path(), limits).unwrap();
    let id = snapshots.take(&point(1)).unwrap();

    write(ws.path(), "big.bin", b"now small");
    write(&nested_path, "inside.txt", b"changed in the nested repo\n");
    write(ws.path(), "small.txt", b"changed\n");
    snapshots.restore(&id.0).unwrap();

    assert_eq!(
        std::fs::read(ws.path().join("small.txt")).unwrap(),
        b"small\n"
    );
    // Not recorded, so neither restored nor removed.
    assert_eq!(
        std::fs::read(ws.path().join("big.bin")).unwrap(),
        b"now small"
    );
    assert_eq!(
        std::fs::read(nested_path.join("inside.txt")).unwrap(),
        b"changed in the nested repo\n"
    );
}

#[test]
fn list_says_which_call_each_snapshot_precedes_and_what_changed_after_it() {
    let ws = temp_dir();
    write(ws.path(), "a.txt", b"1");
    let store = temp_dir();
    let snapshots =
        ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default()).unwrap();
    let first = snapshots.take(&point(1)).unwrap();
    write(ws.path(), "b.txt", b"2");
    chmod(ws.path(), "a.txt", 0o600);
    let second = snapshots.take(&point(2)).unwrap();
    std::fs::remove_file(ws.path().join("b.txt")).unwrap();

    let list = snapshots.list().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!((&list[0].id, &list[1].id), (&first, &second));
    assert_eq!(list[0].point, point(1));
    assert_eq!(list[0].changed, ["a.txt", "b.txt"]);
    assert_eq!(list[1].changed, ["b.txt"]);
    assert!(list[0].time <= list[1].time);
    // Prefixes and numbers name snapshots too.
    assert!(snapshots.restore(&first.0[..10]).is_ok());
    assert!(snapshots.restore("#2").is_ok());
    assert!(matches!(
        snapshots.restore("deadbeef"),
        Err(keel_snapshot::SnapshotError::NotFound { .. })
    ));
}

#[test]
fn two_takes_at_once_both_succeed() {
    let ws = temp_dir();
    for i in 0..200 {
        write(
            ws.path(),
            &format!("d{}/f{i}.txt", i % 7),
            format!("{i}").as_bytes(),
        );
    }
    let store = temp_dir();
    let a = ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default()).unwrap();
    let b = ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default()).unwrap();
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        let one = scope.spawn(|| {
            barrier.wait();
            (0..5)
                .map(|n| a.take(&point(n)).unwrap())
                .collect::<Vec<_>>()
        });
        let two = scope.spawn(|| {
            barrier.wait();
            (0..5)
                .map(|n| b.take(&point(n + 10)).unwrap())
                .collect::<Vec<_>>()
        });
        one.join().unwrap();
        two.join().unwrap();
    });
    let list = a.list().unwrap();
    assert_eq!(list.len(), 10);
    write(ws.path(), "d0/f0.txt", b"changed");
    a.restore(&list[0].id.0).unwrap();
    assert_eq!(std::fs::read(ws.path().join("d0/f0.txt")).unwrap(), b"0");
}
