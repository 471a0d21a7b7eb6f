//! The escape corpus: attempts to read or write outside the workspace through the path
//! sandbox. Every attempt must be refused (or, for names that only look like `..`, land
//! inside the root), and nothing outside the root may change.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use keel_sandbox::{Access, PathSandbox, SandboxError};

/// A temp dir holding `outside/` (with a secret) and `root/` (the workspace).
struct Fixture {
    _dir: tempfile::TempDir,
    outside: PathBuf,
    root: PathBuf,
    sandbox: PathSandbox,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        let root = dir.path().join("root");
        std::fs::create_dir_all(outside.join("dir")).unwrap();
        std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        std::fs::write(outside.join("dir/inner.txt"), "inner\n").unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "// lib\n").unwrap();
        let sandbox = PathSandbox::new(&root).unwrap();
        Self {
            _dir: dir,
            outside,
            root,
            sandbox,
        }
    }

    fn link(&self, name: &str, target: impl AsRef<Path>) {
        let path = self.root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target, path).unwrap();
    }

    /// Every file under `outside/` and its contents.
    fn outside_state(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut state = BTreeMap::new();
        let mut stack = vec![self.outside.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                let kind = entry.file_type().unwrap();
                if kind.is_dir() {
                    stack.push(entry.path());
                } else {
                    state.insert(entry.path(), std::fs::read(entry.path()).unwrap());
                }
            }
        }
        state
    }

    /// Tries to write `given`; it must be refused.
    fn refuse_write(&self, given: &str) -> SandboxError {
        match self.sandbox.write_atomic(given, b"pwned\n") {
            Ok(report) => panic!("write to {given:?} allowed: {report:?}"),
            Err(err) => err,
        }
    }

    /// Tries to read `given`; it must be refused.
    fn refuse_read(&self, given: &str) -> SandboxError {
        match self.sandbox.open_read(given) {
            Ok((resolved, _)) => panic!("read of {given:?} allowed: {resolved:?}"),
            Err(err) => err,
        }
    }
}

/// Runs `attempt` and checks nothing outside the root changed.
fn contained(fixture: &Fixture, attempt: impl FnOnce(&Fixture)) {
    let before = fixture.outside_state();
    attempt(fixture);
    assert_eq!(fixture.outside_state(), before, "something outside changed");
}

#[test]
fn dot_dot_chains_are_refused() {
    let f = Fixture::new();
    contained(&f, |f| {
        for given in [
            "../outside/secret.txt",
            "src/../../outside/secret.txt",
            "./../outside/new.txt",
            "src/../../outside/dir/new.txt",
            "a/b/../../../outside/new.txt",
            "../outside/.",
            "../../../../../../../../etc/passwd",
        ] {
            let err = f.refuse_write(given);
            assert!(
                matches!(err, SandboxError::Outside { .. }),
                "{given}: {err}"
            );
            assert_eq!(err.to_string(), format!("{given}: outside the workspace"));
        }
        for given in ["../outside/secret.txt", "src/../../outside/dir/inner.txt"] {
            let err = f.refuse_read(given);
            assert!(
                matches!(err, SandboxError::Outside { read: true, .. }),
                "{given}: {err}"
            );
        }
    });
}

#[test]
fn absolute_paths_outside_are_refused() {
    let f = Fixture::new();
    let outside_secret = f.outside.join("secret.txt").display().to_string();
    let tmp_target = std::env::temp_dir().join(format!("keel-escape-{}", std::process::id()));
    contained(&f, |f| {
        f.refuse_write(&outside_secret);
        f.refuse_read(&outside_secret);
        f.refuse_read("/etc/passwd");
        f.refuse_read("//etc//passwd");
        f.refuse_write(&tmp_target.display().to_string());
    });
    assert!(!tmp_target.exists());
    // An absolute path inside the root is fine.
    let inside = f.root.join("src/lib.rs").display().to_string();
    assert!(f.sandbox.open_read(&inside).is_ok());
}

#[test]
fn symlinked_files_and_directories_outside_are_refused() {
    let f = Fixture::new();
    f.link("link_file", f.outside.join("secret.txt"));
    f.link("link_dir", &f.outside);
    f.link("src/relative", "../../outside");
    f.link("chain1", "chain2");
    f.link("chain2", f.outside.join("secret.txt"));
    f.link("slash", "/");
    contained(&f, |f| {
        for given in [
            "link_file",
            "link_dir/new.txt",
            "link_dir/secret.txt",
            "link_dir/dir/inner.txt",
            "src/relative/secret.txt",
            "chain1",
            "slash/tmp/keel-escape.txt",
        ] {
            let err = f.refuse_write(given);
            assert!(
                matches!(err, SandboxError::SymlinkOutside { .. }),
                "{given}: {err}"
            );
        }
        for given in [
            "link_file",
            "link_dir/secret.txt",
            "chain1",
            "slash/etc/passwd",
        ] {
            let err = f.refuse_read(given);
            assert!(
                matches!(err, SandboxError::SymlinkOutside { .. }),
                "{given}: {err}"
            );
        }
    });
    let err = f.refuse_read("link_file");
    assert_eq!(
        err.to_string(),
        format!(
            "link_file: a symlink to {}, outside the workspace",
            f.outside.join("secret.txt").display()
        )
    );
}

#[test]
fn dangling_symlinks_cannot_create_files_outside() {
    let f = Fixture::new();
    f.link("dangling", f.outside.join("created-by-write.txt"));
    f.link("dangling_dir", f.outside.join("newdir"));
    contained(&f, |f| {
        f.refuse_write("dangling");
        f.refuse_write("dangling_dir/file.txt");
    });
    assert!(!f.outside.join("created-by-write.txt").exists());
    assert!(!f.outside.join("newdir").exists());
}

#[test]
fn symlink_loops_are_an_error_not_a_hang() {
    let f = Fixture::new();
    f.link("loop1", "loop2");
    f.link("loop2", "loop1");
    let err = f.refuse_read("loop1");
    assert!(matches!(err, SandboxError::SymlinkLoop { .. }), "{err}");
    let err = f.refuse_write("loop1/x");
    assert!(matches!(err, SandboxError::SymlinkLoop { .. }), "{err}");
}

#[test]
fn symlinks_that_stay_inside_work() {
    let f = Fixture::new();
    f.link("lib_link", "src/lib.rs");
    f.link("src_link", "src");
    let report = f.sandbox.write_atomic("lib_link", b"// new\n").unwrap();
    assert_eq!(report.path.relative(), Path::new("src/lib.rs"));
    // The link is kept and now shows the new content.
    assert!(
        std::fs::symlink_metadata(f.root.join("lib_link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(f.root.join("src/lib.rs")).unwrap(),
        "// new\n"
    );
    f.sandbox.write_atomic("src_link/new.rs", b"x").unwrap();
    assert!(f.root.join("src/new.rs").exists());
}

#[test]
fn proc_magic_links_are_refused() {
    let f = Fixture::new();
    let through_proc_root = format!("/proc/self/root{}", f.outside.join("secret.txt").display());
    contained(&f, |f| {
        f.refuse_read("/proc/self/root/etc/passwd");
        f.refuse_write(&through_proc_root);
        f.refuse_read(&through_proc_root);
        // The test's working directory is the crate, outside the root.
        f.refuse_write("/proc/self/cwd/escape.txt");
        f.refuse_read("/proc/self/cwd/Cargo.toml");
        f.refuse_read("/proc/self/environ");
    });
}

#[test]
fn writes_into_git_are_refused_but_reads_work() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root.join("vendor/dep/.git")).unwrap();
    let config_before = std::fs::read(f.root.join(".git/config")).unwrap();
    for given in [
        ".git/config",
        ".git",
        ".git/hooks/pre-commit",
        "src/../.git/HEAD",
        "./.git/new",
        "vendor/dep/.git/config",
    ] {
        let err = f.refuse_write(given);
        assert!(matches!(err, SandboxError::GitDir { .. }), "{given}: {err}");
    }
    f.link("git_link", ".git");
    let err = f.refuse_write("git_link/config");
    assert!(matches!(err, SandboxError::GitDir { .. }), "{err}");
    assert_eq!(
        std::fs::read(f.root.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!f.root.join(".git/hooks/pre-commit").exists());
    assert!(f.sandbox.open_read(".git/config").is_ok());
    // A file merely named like .git is not the repository.
    f.sandbox.write_atomic(".gitignore", b"target\n").unwrap();
}

#[test]
fn malformed_paths_get_clear_errors() {
    let f = Fixture::new();
    let err = f.refuse_write("");
    assert_eq!(err.to_string(), "the path is empty");
    let err = f.refuse_write("src/a\0../../outside/secret.txt");
    assert_eq!(
        err.to_string(),
        "\"src/a\\\\0../../outside/secret.txt\": the path contains a NUL byte"
    );
    let long_name = "a".repeat(300);
    let err = f.refuse_write(&long_name);
    assert!(
        err.to_string()
            .contains("a name of 300 bytes, the limit is 255"),
        "{err}"
    );
    let long_path = "a/".repeat(3000);
    let err = f.refuse_read(&long_path);
    assert!(
        err.to_string().contains("6000 bytes, the limit is 4096"),
        "{err}"
    );
    let err = f.refuse_write("src/lib.rs/child");
    assert!(matches!(err, SandboxError::Io { .. }), "{err}");
}

#[test]
fn look_alike_names_stay_inside_the_root() {
    let f = Fixture::new();
    contained(&f, |f| {
        // Fullwidth full stops, a division slash, a one-dot leader, a tilde: names, not syntax.
        for given in [
            "\u{ff0e}\u{ff0e}/outside/secret.txt",
            "..\u{2215}outside\u{2215}secret.txt",
            "\u{2024}\u{2024}/outside/x.txt",
            "~/.bashrc",
            "...",
            ".. /outside/secret.txt",
        ] {
            let report = f.sandbox.write_atomic(given, b"contained\n").unwrap();
            assert!(report.path.absolute().starts_with(&f.root), "{given}");
            assert_eq!(
                std::fs::read(report.path.absolute()).unwrap(),
                b"contained\n"
            );
        }
    });
}

#[test]
fn hard_links_are_replaced_not_written_through() {
    let f = Fixture::new();
    std::fs::hard_link(f.outside.join("secret.txt"), f.root.join("hard")).unwrap();
    contained(&f, |f| {
        f.sandbox.write_atomic("hard", b"replaced\n").unwrap();
    });
    assert_eq!(
        std::fs::read_to_string(f.root.join("hard")).unwrap(),
        "replaced\n"
    );
}

#[test]
fn a_symlink_made_after_the_sandbox_is_still_caught() {
    let f = Fixture::new();
    // As a command run by the agent might: make a link, then ask for a write through it.
    symlink(&f.outside, f.root.join("made_later")).unwrap();
    contained(&f, |f| {
        f.refuse_write("made_later/secret.txt");
    });
}

#[test]
fn a_symlink_swapped_in_during_writes_never_escapes() {
    let f = Fixture::new();
    let target_dir = f.root.join("race");
    std::fs::create_dir_all(&target_dir).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let target_dir = target_dir.clone();
        let outside = f.outside.clone();
        std::thread::spawn(move || {
            let parked = target_dir.with_file_name("race_parked");
            while !stop.load(Ordering::Relaxed) {
                // Swap the real directory for a symlink to outside/, then back.
                if std::fs::rename(&target_dir, &parked).is_ok() {
                    let _ = symlink(&outside, &target_dir);
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(&target_dir);
                    let _ = std::fs::rename(&parked, &target_dir);
                }
            }
        })
    };
    let mut written = 0;
    let mut refused = 0;
    for i in 0..2000 {
        match f
            .sandbox
            .write_atomic(&format!("race/file{}.txt", i % 10), b"raced\n")
        {
            Ok(_) => written += 1,
            Err(_) => refused += 1,
        }
        let _ = f.sandbox.open_read("race/file0.txt");
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let state = f.outside_state();
    assert!(
        state
            .keys()
            .all(|p| !p.file_name().unwrap().to_string_lossy().starts_with("file")),
        "a write escaped: {state:?}"
    );
    assert!(
        state
            .keys()
            .all(|p| !p.file_name().unwrap().to_string_lossy().contains("keel")),
        "a temp file escaped: {state:?}"
    );
    assert_eq!(written + refused, 2000);
}

#[test]
fn extra_read_roots_are_read_only() {
    let f = Fixture::new();
    let sandbox = PathSandbox::new(&f.root)
        .unwrap()
        .allow_read(&f.outside)
        .unwrap();
    let secret = f.outside.join("secret.txt").display().to_string();
    let (resolved, _) = sandbox.open_read(&secret).unwrap();
    assert_eq!(resolved.root(), f.outside.as_path());
    assert!(
        sandbox
            .resolve("../outside/dir/inner.txt", Access::Read)
            .is_ok()
    );
    let before = f.outside_state();
    assert!(matches!(
        sandbox.write_atomic(&secret, b"x"),
        Err(SandboxError::Outside { read: false, .. })
    ));
    assert_eq!(f.outside_state(), before);
}
