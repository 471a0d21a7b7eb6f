//! Pruning drops snapshots past the limits and really frees their space.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use keel_snapshot::{ShadowSnapshots, SnapshotLimits, SnapshotPoint, Snapshots};
use keel_test_support::temp::temp_dir;

fn point(n: usize) -> SnapshotPoint {
    SnapshotPoint {
        session_id: "s".into(),
        call_id: format!("c{n}"),
        tool: "write_file".into(),
        summary: format!("write {n}"),
        history_len: n,
    }
}

fn du(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            du(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// 200 KiB that do not compress, different for each `seed`.
fn noise(seed: u64) -> Vec<u8> {
    let mut rng = 0x2545_f491_4f6c_dd1du64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..200 * 1024)
        .map(|_| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng as u8
        })
        .collect()
}

/// Three snapshots, each with 200 KiB of incompressible data of its own.
fn three_snapshots(store: &Path, ws: &Path) -> Vec<keel_snapshot::SnapshotId> {
    let snapshots = ShadowSnapshots::open(store, ws, SnapshotLimits::default()).unwrap();
    (0..3)
        .map(|n| {
            std::fs::write(ws.join("blob.bin"), noise(n as u64)).unwrap();
            snapshots.take(&point(n)).unwrap()
        })
        .collect()
}

#[test]
fn pruning_by_age_keeps_the_newest_and_frees_the_rest() {
    let store = temp_dir();
    let ws = temp_dir();
    let ids = three_snapshots(store.path(), ws.path());
    let before = du(store.path());
    assert!(before > 600 * 1024, "{before}");

    let limits = SnapshotLimits {
        max_age: Duration::ZERO,
        ..SnapshotLimits::default()
    };
    std::thread::sleep(Duration::from_millis(5));
    let snapshots = ShadowSnapshots::open(store.path(), ws.path(), limits).unwrap();
    let report = snapshots.prune().unwrap();
    assert_eq!((report.dropped, report.kept), (2, 1));
    let after = du(store.path());
    assert!(
        before - after > 400 * 1024,
        "freed only {} bytes",
        before - after
    );
    let listed: Vec<_> = snapshots
        .list()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, [ids[2].clone()]);
    // What is kept still restores.
    std::fs::write(ws.path().join("blob.bin"), b"x").unwrap();
    snapshots.restore(&ids[2].0).unwrap();
    assert_eq!(
        std::fs::metadata(ws.path().join("blob.bin")).unwrap().len(),
        200 * 1024
    );
}

#[test]
fn pruning_by_size_drops_the_oldest_first() {
    let store = temp_dir();
    let ws = temp_dir();
    let ids = three_snapshots(store.path(), ws.path());
    let before = du(store.path());
    let limits = SnapshotLimits {
        max_bytes: 450 * 1024,
        ..SnapshotLimits::default()
    };
    // Opening with a limit the store is past leaves it as it is; a prune drops the oldest.
    let snapshots = ShadowSnapshots::open(store.path(), ws.path(), limits).unwrap();
    assert_eq!(snapshots.list().unwrap().len(), 3);
    let report = snapshots.prune().unwrap();
    assert_eq!((report.dropped, report.kept), (1, 2), "{report:?}");
    assert!(before - du(store.path()) > 150 * 1024);
    assert!(report.store_bytes <= 450 * 1024, "{report:?}");
    let listed: Vec<_> = snapshots
        .list()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, ids[1..]);
}

#[test]
fn opening_never_prunes_and_the_next_take_prunes_when_due() {
    let store = temp_dir();
    let ws = temp_dir();
    let roomy = ShadowSnapshots::open(store.path(), ws.path(), SnapshotLimits::default()).unwrap();
    for n in 0..4 {
        std::fs::write(ws.path().join("blob.bin"), noise(n)).unwrap();
        roomy.take(&point(n as usize)).unwrap();
    }
    drop(roomy);
    // Under these limits a prune is due (800 KiB written, more than an eighth of 300 KiB) and
    // only the newest snapshot fits; opening leaves all four.
    let limits = SnapshotLimits {
        max_bytes: 300 * 1024,
        ..SnapshotLimits::default()
    };
    let snapshots = ShadowSnapshots::open(store.path(), ws.path(), limits).unwrap();
    assert_eq!(snapshots.list().unwrap().len(), 4);
    std::fs::write(ws.path().join("blob.bin"), noise(4)).unwrap();
    snapshots.take(&point(4)).unwrap();
    assert_eq!(snapshots.list().unwrap().len(), 1);
}

#[test]
fn a_take_prunes_by_itself_when_due() {
    let store = temp_dir();
    let ws = temp_dir();
    // An eighth of the limit written since the last prune makes one due.
    let limits = SnapshotLimits {
        max_bytes: 300 * 1024,
        ..SnapshotLimits::default()
    };
    let snapshots = ShadowSnapshots::open(store.path(), ws.path(), limits).unwrap();
    for n in 0..4 {
        std::fs::write(ws.path().join("blob.bin"), noise(n)).unwrap();
        snapshots.take(&point(n as usize)).unwrap();
    }
    // Each snapshot holds 200 KiB of its own: only the newest fits.
    assert_eq!(snapshots.list().unwrap().len(), 1);
}
