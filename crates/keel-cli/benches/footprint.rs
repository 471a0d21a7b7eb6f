//! The `keel` binary's footprint: start-up time and peak memory.
//! `cargo bench -p keel-cli --bench footprint`
//!
//! - `keel --version` wall time (spawn to exit), median and p90 over 200 runs; target ≤ 10 ms.
//! - Peak RSS of `keel exec -y` on a 4-turn task (read_file, grep, run_command `true`, the
//!   answer) served by wiremock in a temp git repository, with a clean environment; the
//!   kernel's `ru_maxrss` from `wait4`, the most over 5 runs; target ≤ 20 MiB. A run that
//!   does not exit 0 fails the bench.
//!
//! The binary is the one cargo builds for benches: the release profile (thin LTO, one codegen
//! unit, stripped). Under `cargo test --benches` (no `--bench` argument) it does a quick pass.

// wait4 is the one way to read a child's peak RSS, and it is a libc call; the workspace
// denies unsafe code by default.
#![allow(unsafe_code)]
// A bench prints its figures, and a broken setup should stop it loudly.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel::provider::{ContentBlock, StopReason, ToolUseResponse};
use keel_test_support::git::TempRepo;
use keel_test_support::mock::serve_turns;
use keel_test_support::render::anthropic_sse;
use keel_test_support::scripted::reply;
use serde_json::{Value, json};

const KEEL: &str = env!("CARGO_BIN_EXE_keel");
const VERSION_TARGET: Duration = Duration::from_millis(10);
const RSS_TARGET_KIB: u64 = 20 * 1024;
const ANSWER: &str = "lib.rs defines add; the command ran.";

/// Wall time of `keel --version`, `runs` times (after a few untimed runs), sorted.
fn version_times(runs: usize) -> Vec<Duration> {
    let run = || {
        let started = Instant::now();
        let status = Command::new(KEEL)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("spawning keel --version");
        let took = started.elapsed();
        assert!(status.success(), "keel --version failed: {status}");
        took
    };
    (0..5).for_each(|_| {
        run();
    });
    let mut times: Vec<Duration> = (0..runs).map(|_| run()).collect();
    times.sort();
    times
}

/// The `q` quantile of sorted `times` (nearest rank).
fn quantile(times: &[Duration], q: f64) -> Duration {
    let rank = ((q * times.len() as f64).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

fn call(id: &str, name: &str, input: Value) -> ToolUseResponse {
    reply(
        vec![ContentBlock::tool_use(id, name, input)],
        StopReason::ToolUse,
    )
}

/// The 4 turns, in Anthropic's wire format.
fn turns() -> Vec<String> {
    [
        call("toolu_1", "read_file", json!({"path": "src/lib.rs"})),
        call("toolu_2", "grep", json!({"pattern": "fn add"})),
        call("toolu_3", "run_command", json!({"command": "true"})),
        reply(vec![ContentBlock::text(ANSWER)], StopReason::EndTurn),
    ]
    .iter()
    .map(anthropic_sse)
    .collect()
}

/// Waits for `pid`; returns its wait status and peak RSS in KiB.
fn wait_with_rusage(pid: u32) -> (libc::c_int, u64) {
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = libc::pid_t::try_from(pid).expect("pid fits pid_t");
    // SAFETY: `pid` is our own unwaited child (std never reaps a child it is not asked to
    // wait for), and both pointers are to live locals of the right types.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    // Linux reports ru_maxrss in KiB.
    (status, u64::try_from(usage.ru_maxrss).unwrap_or(0))
}

/// One `keel exec -y` run of the 4-turn task; its peak RSS in KiB. Panics unless it exits 0
/// having made exactly the 4 model calls and printed the answer.
fn exec_peak_rss(runtime: &tokio::runtime::Runtime) -> u64 {
    let server = runtime.block_on(serve_turns("/v1/messages", turns()));
    let repo = TempRepo::new();
    repo.write(
        "src/lib.rs",
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n",
    );
    repo.commit("add lib");
    let home = tempfile::tempdir().unwrap();
    let keel_home = home.path().join("keel");
    std::fs::create_dir(&keel_home).unwrap();
    let out_path = home.path().join("stdout");
    let err_path = home.path().join("stderr");
    // Reaped by wait4 in wait_with_rusage, which clippy cannot see.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(KEEL)
        .args(["exec", "-y", "Read src/lib.rs, find add, run true."])
        .current_dir(repo.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("KEEL_HOME", &keel_home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("NO_COLOR", "1")
        .env("ANTHROPIC_API_KEY", "sk-ant-bench-0123456789")
        .env("ANTHROPIC_BASE_URL", server.uri())
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .expect("spawning keel exec");
    let (status, peak_kib) = wait_with_rusage(child.id());
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let (stdout, stderr) = (read(&out_path), read(&err_path));
    let exited_ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    assert!(
        exited_ok,
        "keel exec failed (wait status {status}):\n{stderr}"
    );
    assert_eq!(stdout.trim(), ANSWER, "stderr:\n{stderr}");
    let requests = runtime
        .block_on(server.received_requests())
        .unwrap_or_default();
    assert_eq!(requests.len(), 4, "model calls; stderr:\n{stderr}");
    assert!(!stderr.contains('✗'), "a tool call failed:\n{stderr}");
    peak_kib
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: a quick pass then.
    let full = std::env::args().any(|arg| arg == "--bench");
    let (version_runs, exec_runs) = if full { (200, 5) } else { (5, 1) };
    println!("keel binary: {KEEL}");
    if !full {
        println!("quick pass (no --bench argument): a check that it runs, not the figures");
    }

    let times = version_times(version_runs);
    let (median, p90) = (quantile(&times, 0.5), quantile(&times, 0.9));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "keel --version: median {:.2} ms, p90 {:.2} ms over {version_runs} runs (target: median <= {} ms, {})",
        ms(median),
        ms(p90),
        VERSION_TARGET.as_millis(),
        met(median <= VERSION_TARGET)
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let peaks: Vec<u64> = (0..exec_runs).map(|_| exec_peak_rss(&runtime)).collect();
    let max = peaks.iter().copied().max().unwrap_or(0);
    println!(
        "keel exec (4 turns) peak RSS: max {:.1} MiB ({max} KiB) over {exec_runs} runs, each {peaks:?} KiB (target <= {} MiB: {})",
        max as f64 / 1024.0,
        RSS_TARGET_KIB / 1024,
        met(max <= RSS_TARGET_KIB)
    );
}
