//! Atomic writes leave nothing behind when killed (issue 13): a process writing large files
//! with `PathSandbox::write_atomic` is SIGKILLed at random moments, many times; the directory
//! then holds the old contents or the new ones whole, and never a temp file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use keel_sandbox::PathSandbox;

/// Set in the child: the directory it writes in.
const CHILD_DIR: &str = "KEEL_TEST_ATOMIC_CHILD_DIR";
const SIZE: usize = 12 << 20;
const KILLS: usize = 60;

fn contents(byte: u8) -> Vec<u8> {
    let mut data = vec![byte; SIZE];
    // Ends that differ from the middle, so a torn file cannot pass for a whole one.
    data[..8].copy_from_slice(b"<<start>");
    data[SIZE - 6..].copy_from_slice(b"<end>\n");
    data
}

/// The child: writes `fresh.txt` (new) once, then rewrites `data.txt` until it is killed.
/// Without the variable (a normal test run) it does nothing.
#[test]
fn child_writes_until_killed() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let sandbox = PathSandbox::new(&dir).unwrap();
    let (a, b, fresh) = (contents(b'a'), contents(b'b'), contents(b'f'));
    sandbox.write_atomic("fresh.txt", &fresh).unwrap();
    loop {
        sandbox.write_atomic("data.txt", &b).unwrap();
        sandbox.write_atomic("data.txt", &a).unwrap();
    }
}

/// A small xorshift generator: no dependency, and the seed is printed to replay a failure.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn killed_writes_leave_old_or_new_contents_and_no_temp() {
    let seed = std::env::var("KEEL_TEST_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("KEEL_TEST_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let (a, b, fresh) = (contents(b'a'), contents(b'b'), contents(b'f'));
    std::fs::write(dir.path().join("data.txt"), &a).unwrap();
    let spawn = || {
        let _ = std::fs::remove_file(dir.path().join("fresh.txt"));
        keel_test_support::rerun::command(module_path!(), "child_writes_until_killed")
            .env(CHILD_DIR, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // How long a child takes to start and write fresh.txt on this machine, now: the kills
    // then fall before, during and after that first write, and in later ones.
    let started = Instant::now();
    let mut child = spawn();
    while !dir.path().join("fresh.txt").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the child never wrote"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let first_write = started.elapsed().as_millis() as u64;
    child.kill().unwrap();
    child.wait().unwrap();
    eprintln!("a child writes fresh.txt after {first_write} ms");
    let (mut saw_new, mut saw_fresh) = (0, 0);
    // A kill between the two syscalls that put a whole temp in place (named, then renamed)
    // leaves it, named for the dead writer; the next write removes it (checked at the end).
    let mut dead = Vec::new();
    let is_dead_temp = |name: &str, dead: &[u32]| {
        name.starts_with('.')
            && name.ends_with(".tmp")
            && dead
                .iter()
                .any(|pid| name.contains(&format!(".keel-{pid}-")))
    };
    for kill in 0..KILLS {
        let mut child = spawn();
        dead.push(child.id());
        std::thread::sleep(Duration::from_millis(rng.below(3 * first_write + 1)));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "kill {kill}: the child ended by itself");

        let left: Vec<String> = names(dir.path())
            .into_iter()
            .filter(|name| !is_dead_temp(name, &dead))
            .collect();
        let expected: &[&str] = if left.len() == 2 {
            &["data.txt", "fresh.txt"]
        } else {
            &["data.txt"]
        };
        assert_eq!(left, expected, "kill {kill} (seed {seed}): files left");
        let data = std::fs::read(dir.path().join("data.txt")).unwrap();
        assert!(
            data == a || data == b,
            "kill {kill} (seed {seed}): data.txt is neither old nor new whole ({} bytes)",
            data.len()
        );
        saw_new += usize::from(data == b);
        if left.len() == 2 {
            let written = std::fs::read(dir.path().join("fresh.txt")).unwrap();
            assert!(
                written == fresh,
                "kill {kill} (seed {seed}): fresh.txt is not whole"
            );
            saw_fresh += 1;
        }
    }
    eprintln!("{KILLS} kills: data.txt new {saw_new} times, fresh.txt there {saw_fresh} times");
    // One more writer, let run past its first write: no dead writer's temp is left.
    let mut child = spawn();
    let started = Instant::now();
    while !dir.path().join("fresh.txt").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the child never wrote"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let stale: Vec<String> = names(dir.path())
        .into_iter()
        .filter(|name| is_dead_temp(name, &dead))
        .collect();
    assert_eq!(
        stale,
        [] as [String; 0],
        "(seed {seed}) temps of dead writers left"
    );
    // The kills landed at different points: some before fresh.txt was whole, some after.
    assert!(saw_fresh > 0 && saw_fresh < KILLS, "{saw_fresh} of {KILLS}");
}
