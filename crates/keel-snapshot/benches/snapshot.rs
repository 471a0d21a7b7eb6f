//! The cost of a snapshot of a 20,000-file workspace where a few files changed (the target is
//! ≤ 50 ms) and where nothing changed, with the change watcher and by full scans, after a first
//! snapshot taken in setup (its cost is printed).

#![allow(missing_docs, clippy::unwrap_used, clippy::print_stderr)]

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use keel_snapshot::{ShadowSnapshots, SnapshotLimits, SnapshotPoint, Snapshots};

/// 20,000 tracked-looking files in nested directories, a `.gitignore` with ignored build
/// output, and a few big files.
fn workspace(root: &Path) {
    let mut n = 0;
    for top in 0..20 {
        for sub in 0..20 {
            let dir = root.join(format!("crate{top}/src/module{sub}"));
            std::fs::create_dir_all(&dir).unwrap();
            for file in 0..50 {
                let body = format!("// file {n}\npub fn f{n}() -> u64 {{ {n} }}\n").repeat(8);
                std::fs::write(dir.join(format!("file{file}.rs")), body).unwrap();
                n += 1;
            }
        }
    }
    assert_eq!(n, 20_000);
    std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
    for i in 0..500 {
        let dir = root.join(format!("target/debug/deps{}", i % 10));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("lib{i}.rlib")), [0u8; 512]).unwrap();
    }
    for i in 0..3 {
        let big: Vec<u8> = (0..8 << 20)
            .map(|b: u32| (b.wrapping_mul(31) >> 7) as u8)
            .collect();
        std::fs::write(root.join(format!("assets{i}.bin")), big).unwrap();
    }
}

fn point(n: u64) -> SnapshotPoint {
    SnapshotPoint {
        session_id: "bench".into(),
        call_id: format!("call-{n}"),
        tool: "run_command".into(),
        summary: "cargo fmt".into(),
        history_len: 0,
    }
}

/// One workspace and store; `watch` says whether the change watcher is on.
fn setup(watch: bool) -> (tempfile::TempDir, tempfile::TempDir, ShadowSnapshots) {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    workspace(ws.path());
    let snapshots = ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default())
        .unwrap()
        .watch_changes(watch);
    let start = Instant::now();
    snapshots.take(&point(0)).unwrap();
    eprintln!(
        "first snapshot of 20,000 files (watcher {}): {:?}",
        if watch { "on" } else { "off" },
        start.elapsed()
    );
    // Past the racy window of the first snapshot's index.
    std::thread::sleep(Duration::from_millis(20));
    (ws, store, snapshots)
}

fn bench_one(c: &mut Criterion, watch: bool) {
    let (ws, _store, snapshots) = setup(watch);
    let prefix = if watch { "" } else { "full_scan_" };
    let mut round = 0u64;
    let mut group = c.benchmark_group("snapshot");
    group.sample_size(30);
    group.bench_function(format!("{prefix}20k_files_5_changed"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round += 1;
                for i in 0..5 {
                    let path = ws.path().join(format!("crate{i}/src/module{i}/file{i}.rs"));
                    std::fs::write(path, format!("// changed in round {round}\n")).unwrap();
                }
                let start = Instant::now();
                snapshots.take(&point(round)).unwrap();
                total += start.elapsed();
            }
            total
        });
    });
    group.bench_function(format!("{prefix}20k_files_nothing_changed"), |b| {
        b.iter(|| {
            round += 1;
            snapshots.take(&point(round)).unwrap();
        });
    });
    group.finish();
}

/// With the change watcher (keel's default; every 20th snapshot is still a full scan, counted
/// in the figures), and without it (a full scan every time).
fn bench(c: &mut Criterion) {
    bench_one(c, true);
    bench_one(c, false);
}

criterion_group!(benches, bench);
criterion_main!(benches);
