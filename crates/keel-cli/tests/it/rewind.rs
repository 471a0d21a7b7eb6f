//! `keel rewind` gives back the workspace byte for byte after every ordinary deletion form,
//! whether the gate refused it or it ran (`keel exec` with approvals denied).

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::manifest::{Manifest, differences, manifest};
use serde_json::json;

/// Every form of deletion or truncation the issue lists, on the files of [`fixture`].
const FORMS: &[&str] = &[
    "rm a.txt",
    "rm -rf d",
    "unlink a.txt",
    "echo a.txt | xargs rm",
    "find . -name a.txt -exec rm {} \\;",
    "find d -delete",
    "python3 -c \"import shutil; shutil.rmtree('d')\"",
    "> b.txt",
    "sed -i d b.txt",
    "mv u.txt a.txt",
    "$(echo rm) -rf d",
    "git -c alias.x='!rm -rf d' x",
    "git checkout HEAD b.txt",
    "git read-tree -u --reset HEAD",
    "git checkout-index -a -f",
    "truncate -s0 a.txt",
    "perl -e 'unlink \"a.txt\"'",
    "cp /dev/null a.txt",
    "ln -sf x a.txt",
    "dd if=/dev/null of=a.txt",
    "tee a.txt </dev/null",
    "shred -u a.txt",
    "git clean -fdx",
    "git reset --hard",
    "git stash -u",
];

fn chmod(root: &Path, rel: &str, mode: u32) {
    std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A repository with tracked, modified and untracked files, odd permissions and symlinks.
fn fixture() -> TempRepo {
    let repo = TempRepo::new();
    let root = repo.path();
    repo.write("a.txt", "alpha\n");
    repo.write("b.txt", "beta\n");
    repo.write("d/x.txt", "x\n");
    repo.write("d/sub/y.txt", "y\n");
    repo.write("run.sh", "#!/bin/sh\necho run\n");
    chmod(&root, "run.sh", 0o755);
    repo.write("ro.txt", "read only\n");
    chmod(&root, "ro.txt", 0o444);
    symlink("a.txt", root.join("link")).unwrap();
    for path in [
        "a.txt",
        "b.txt",
        "d/x.txt",
        "d/sub/y.txt",
        "run.sh",
        "ro.txt",
        "link",
    ] {
        repo.stage(path);
    }
    repo.commit("the tracked files");
    // Modified, not committed.
    repo.write("b.txt", "beta, edited\n");
    // Untracked.
    repo.write("u.txt", "untracked\n");
    repo.write("ud/z.txt", "untracked in a directory\n");
    repo.write("secret.txt", "private\n");
    chmod(&root, "secret.txt", 0o600);
    symlink("nowhere/at/all", root.join("dangling")).unwrap();
    repo
}

/// What one form did: whether it changed the workspace, and what still differs after
/// `keel rewind 1`.
struct Outcome {
    damaged: bool,
    left: Vec<String>,
}

/// Runs `form` through `keel exec` with `flags` (after a harmless change, so a snapshot is
/// taken), then `keel rewind 1`.
async fn rewound_after(form: &str, flags: &[&str]) -> Outcome {
    let repo = fixture();
    let original: Manifest = manifest(&repo.path(), &[".git"]);
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "run_command",
            json!({"command": "mkdir -p made-by-keel"}),
        ),
        tool_call("toolu_2", "run_command", json!({"command": form})),
        text("Done."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .arg("exec")
        .args(flags)
        .arg("clean up");
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "{form}: {}", stderr(&output));
    let after = manifest(&repo.path(), &[".git"]);
    let damaged = differences(&original, &after)
        .iter()
        .any(|d| !d.contains("made-by-keel"));

    let mut list = home.keel();
    list.current_dir(repo.path()).arg("rewind");
    let listed = run(list).await;
    assert_eq!(listed.status.code(), Some(0), "{form}: {}", stderr(&listed));
    assert!(
        stdout(&listed).contains("run_command: mkdir -p made-by-keel"),
        "{form}: {}",
        stdout(&listed)
    );

    let mut rewind = home.keel();
    rewind.current_dir(repo.path()).args(["rewind", "1"]);
    let rewound = run(rewind).await;
    assert_eq!(
        rewound.status.code(),
        Some(0),
        "{form}: {}",
        stderr(&rewound)
    );
    let left = differences(&original, &manifest(&repo.path(), &[".git"]))
        .into_iter()
        .map(|d| format!("{form}: {d}"))
        .collect();
    Outcome { damaged, left }
}

/// Headless with approvals denied (the default): the gate refuses what it recognises, the
/// rest runs; either way the rewind gives back the original.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_deletion_form_is_rewound_byte_for_byte() {
    let mut failures = Vec::new();
    for form in FORMS {
        failures.extend(rewound_after(form, &[]).await.left);
    }
    assert!(failures.is_empty(), "not rewound:\n{}", failures.join("\n"));
}

/// With approvals allowed every form runs and does its damage; the rewind still gives back
/// the original, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_deletion_form_that_ran_is_rewound_byte_for_byte() {
    let mut failures = Vec::new();
    let mut harmless = Vec::new();
    for form in FORMS {
        let outcome = rewound_after(form, &["--approvals", "allow"]).await;
        if !outcome.damaged {
            harmless.push(*form);
        }
        failures.extend(outcome.left);
    }
    assert!(failures.is_empty(), "not rewound:\n{}", failures.join("\n"));
    // These must write `.git/index`, which commands see read-only (a protected path), so they
    // fail before touching a file; every other form did its damage.
    assert_eq!(
        harmless,
        [
            "git checkout HEAD b.txt",
            "git read-tree -u --reset HEAD",
            "git reset --hard",
            "git stash -u"
        ],
        "forms that changed nothing"
    );
}

#[tokio::test]
async fn rewind_lists_nothing_and_refuses_an_unknown_snapshot() {
    let repo = TempRepo::new();
    let home = Home::new();
    let mut list = home.keel();
    list.current_dir(repo.path()).arg("rewind");
    let listed = run(list).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(
        stdout(&listed).starts_with("no snapshots of "),
        "{}",
        stdout(&listed)
    );

    let mut rewind = home.keel();
    rewind.current_dir(repo.path()).args(["rewind", "7"]);
    let refused = run(rewind).await;
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        stderr(&refused),
        "keel: no snapshot number 7: there are 0 (`keel rewind` lists them)\n"
    );
}

#[tokio::test]
async fn rewind_restores_a_snapshot_taken_of_this_workspace() {
    let repo = fixture();
    let original = manifest(&repo.path(), &[".git"]);
    let home = Home::new();
    // A snapshot as the engine takes it, in the store keel rewind reads.
    let snapshots = keel::snapshot::ShadowSnapshots::open(
        home.keel_home().join("snapshots"),
        repo.path(),
        keel::snapshot::SnapshotLimits::default(),
    )
    .unwrap();
    keel::snapshot::Snapshots::take(
        &snapshots,
        &keel::snapshot::SnapshotPoint {
            session_id: "s-1".into(),
            call_id: "toolu_1".into(),
            tool: "run_command".into(),
            summary: "rm -rf d".into(),
            history_len: 1,
        },
    )
    .unwrap();
    std::fs::remove_dir_all(repo.path().join("d")).unwrap();
    std::fs::write(repo.path().join("new.txt"), "new").unwrap();

    let mut list = home.keel();
    list.current_dir(repo.path()).arg("rewind");
    let listed = stdout(&run(list).await);
    assert!(listed.contains("  1  "), "{listed}");
    assert!(
        listed.contains("run_command: rm -rf d  (3 files changed)"),
        "{listed}"
    );

    let mut rewind = home.keel();
    rewind.current_dir(repo.path()).args(["rewind", "1"]);
    let output = run(rewind).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = stdout(&output);
    assert!(printed.contains(": 2 restored, 1 removed"), "{printed}");
    assert!(printed.contains("  restored d/sub/y.txt"), "{printed}");
    assert!(printed.contains("  removed  new.txt"), "{printed}");
    assert_eq!(
        differences(&original, &manifest(&repo.path(), &[".git"])),
        Vec::<String>::new()
    );
}
