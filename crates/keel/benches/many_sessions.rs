//! A host at scale: 1,000 concurrent sessions of one [`CodingAgent`] in one process (a
//! multi-thread runtime), each a 5-turn scripted task (four `read_file` calls, then an answer)
//! against an Anthropic-format server on loopback.
//!
//! `cargo bench -p keel --bench many_sessions` (`-- --sessions N` for another count). Prints:
//! - per idle session: the heap bytes opening the sessions left allocated (counted by a
//!   counting allocator) and the resident memory added, before any run, divided by their
//!   number (a new session's history is empty);
//! - loop overhead per turn, p50 / p99: from a turn's start to the next turn's start, less the
//!   time the request spent at the server (measured there) and the tool's own run time — what
//!   the engine, the HTTP client and the runtime add, under the load of every session at once,
//!   and then with 200 sessions run one at a time (the loop's own cost, no CPU queue);
//! - the total wall time, and turns per second.

// A benchmark reports on stdout and stops on any failure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use keel::CodingAgent;
use keel_engine::{AgentEvent, MemorySessionStore, Stop};
use keel_provider::{AnthropicProvider, ApiKey};
use keel_test_support::render::anthropic_sse;
use keel_test_support::scripted::{text_reply, tool_reply};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpListener;

/// Counts the bytes allocated and not yet freed, so an idle session's cost is measured
/// exactly (resident memory moves in pages and depends on what the allocator kept).
struct Counting;

static LIVE: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is added.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: a pointer this allocator returned, with its layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            std::sync::atomic::Ordering::Relaxed,
        );
        // SAFETY: a pointer this allocator returned, with its layout.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_bytes() -> isize {
    LIVE.load(std::sync::atomic::Ordering::Relaxed)
}

const TURNS: usize = 5;
/// Sessions run one at a time after the concurrent ones.
const SEQUENTIAL: usize = 200;

/// Time each request spent at the server, by session (the `x-keel-session` metadata is not
/// sent, so sessions are told apart by their first user message).
type ServerTimes = Arc<Mutex<HashMap<String, Vec<Duration>>>>;

/// Serves the script over HTTP/1.1 keep-alive: turns 1–4 ask for `read_file`, turn 5 answers.
async fn serve(listener: TcpListener, times: ServerTimes) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let times = times.clone();
        stream.set_nodelay(true).unwrap();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut reader = BufReader::new(read);
            loop {
                let mut length = 0usize;
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(value) = lower.strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let started = Instant::now();
                let mut body = vec![0u8; length];
                reader.read_exact(&mut body).await.unwrap();
                let request: Value = serde_json::from_slice(&body).unwrap();
                let messages = request["messages"].as_array().unwrap();
                let session = session_key(&messages[0]["content"].to_string());
                let turn = messages.len().div_ceil(2);
                let reply = if turn < TURNS {
                    tool_reply(
                        &format!("toolu_{turn}"),
                        "read_file",
                        json!({"path": "src/lib.rs"}),
                    )
                } else {
                    text_reply("The file defines answer(), which returns 42.")
                };
                let sse = anthropic_sse(&reply);
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                    sse.len()
                );
                times
                    .lock()
                    .unwrap()
                    .entry(session)
                    .or_default()
                    .push(started.elapsed());
                // One write: a head and body sent apart would wait on the peer's delayed ACK.
                if write.write_all((head + &sse).as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// `Session N` from the text of a session's first message.
fn session_key(text: &str) -> String {
    let start = text.find("Session ").unwrap();
    let end = start + text[start..].find(':').unwrap();
    text[start..end].to_owned()
}

/// What one session's run left: its prompt, when each turn started (and when it ended), the
/// tools' run time before each turn, and how it stopped.
type RunRecord = (String, Vec<Instant>, Vec<Duration>, Option<Stop>);

/// Runs session number `i` to its end.
async fn run_one(i: usize, mut session: keel_engine::Session) -> RunRecord {
    let prompt = format!("Session {i}: what does answer() return?");
    let mut turn_starts = Vec::new();
    let mut tool_time = Duration::ZERO;
    let mut tool_times = Vec::new();
    let mut stop = None;
    {
        let events = session.run_streaming(&prompt);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            match event {
                AgentEvent::TurnStarted { .. } => {
                    turn_starts.push(Instant::now());
                    tool_times.push(std::mem::take(&mut tool_time));
                }
                AgentEvent::ToolCallFinished { duration, .. } => tool_time += duration,
                AgentEvent::Finished(outcome) => stop = Some(outcome.stop),
                _ => {}
            }
        }
    }
    turn_starts.push(Instant::now());
    tool_times.push(tool_time);
    (prompt, turn_starts, tool_times, stop)
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Each turn's own time: its span less the server's time and the tools' time.
fn own_times(results: &[RunRecord], times: &ServerTimes) -> Vec<Duration> {
    let times = times.lock().unwrap();
    let mut overheads = Vec::new();
    for (prompt, starts, tools, stop) in results {
        assert_eq!(*stop, Some(Stop::Completed), "{prompt}");
        let server = &times[&session_key(prompt)];
        assert_eq!(server.len(), TURNS, "{prompt}");
        for turn in 0..TURNS {
            let span = starts[turn + 1] - starts[turn];
            overheads.push(
                span.saturating_sub(server[turn])
                    .saturating_sub(tools[turn + 1]),
            );
        }
    }
    overheads.sort();
    overheads
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn main() {
    let sessions: usize = std::env::args()
        .skip_while(|a| a != "--sessions")
        .nth(1)
        .map_or(1000, |n| n.parse().unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::create_dir(workspace.path().join("src")).unwrap();
        std::fs::write(
            workspace.path().join("src/lib.rs"),
            "pub fn answer() -> u32 {\n    42\n}\n",
        )
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let times: ServerTimes = Arc::default();
        tokio::spawn(serve(listener, times.clone()));
        let provider = AnthropicProvider::new(ApiKey::new("sk-ant-bench"))
            .unwrap()
            .with_base_url(&format!("http://{address}"))
            .unwrap();
        let agent = Arc::new(
            CodingAgent::builder(Arc::new(provider))
                .cwd(workspace.path())
                .home(home.path())
                .session_store(Arc::new(MemorySessionStore::new()))
                .snapshots(None)
                .build()
                .unwrap(),
        );

        let mut opened = Vec::with_capacity(sessions);
        let (before, heap_before) = (rss_bytes(), live_bytes());
        for _ in 0..sessions {
            opened.push(agent.session().unwrap());
        }
        let idle = rss_bytes().saturating_sub(before) / sessions as u64;
        let heap = (live_bytes() - heap_before) as f64 / sessions as f64;

        let started = Instant::now();
        let mut runs = Vec::with_capacity(sessions);
        for (i, session) in opened.into_iter().enumerate() {
            runs.push(tokio::spawn(run_one(i, session)));
        }
        let mut results = Vec::with_capacity(sessions);
        for run in runs {
            results.push(run.await.unwrap());
        }
        let wall = started.elapsed();

        let overheads = own_times(&results, &times);
        // The same, one session at a time: the loop's own cost, without waiting for the CPU.
        times.lock().unwrap().clear();
        let mut alone = Vec::new();
        for i in 0..SEQUENTIAL.min(sessions) {
            alone.push(run_one(sessions + i, agent.session().unwrap()).await);
        }
        let alone = own_times(&alone, &times);
        println!("sessions: {sessions}, {TURNS} turns each, 2 worker threads");
        println!(
            "per idle session: {:.2} KiB of heap, {:.1} KiB of RSS",
            heap / 1024.0,
            idle as f64 / 1024.0
        );
        println!(
            "loop overhead per turn: p50 {:.3} ms, p99 {:.3} ms (under every session at once)",
            percentile(&overheads, 0.50).as_secs_f64() * 1e3,
            percentile(&overheads, 0.99).as_secs_f64() * 1e3
        );
        println!(
            "loop overhead per turn, one session at a time ({} sessions): p50 {:.3} ms, p99 {:.3} ms",
            SEQUENTIAL.min(sessions),
            percentile(&alone, 0.50).as_secs_f64() * 1e3,
            percentile(&alone, 0.99).as_secs_f64() * 1e3
        );
        println!(
            "wall: {:.2} s, {:.0} turns/s",
            wall.as_secs_f64(),
            (sessions * TURNS) as f64 / wall.as_secs_f64()
        );
    });
}
