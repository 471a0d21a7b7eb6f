//! keel's own latency under `keel acp`: from the client's `session/prompt` to the first
//! `agent_message_chunk`, less the model's time. `cargo bench -p keel-cli --bench acp_first_chunk`
//!
//! `keel acp` runs with a clean environment (temp `HOME`/`KEEL_HOME`, a fake key) against a
//! loopback Anthropic Messages server inside the bench, which answers every `POST
//! /v1/messages` at once with the recorded stream `shared/wire/anthropic/basic_response.sse`.
//! A raw JSON-line client initializes, opens a session in a temp git repository and sends
//! prompts one after another (after a few untimed ones). For each:
//!
//! - t_prompt: the client writes `session/prompt`;
//! - t_request: the server has read the whole model request;
//! - t_response_sent: the server writes the response (headers and the whole stream, in one
//!   write);
//! - t_chunk: the client has read the first `agent_message_chunk`.
//!
//! Both writes are timed from just before they start, so a thread descheduled after its write
//! cannot hide keel's time; the writes themselves (a few µs) count as keel's.
//!
//! keel's overhead = (t_request − t_prompt) + (t_chunk − t_response_sent): the way in (parse,
//! session, request built and sent) and the way out (stream parsed, update written). Target: a
//! median ≤ 2 ms. Median, p90 and max of the overhead and of both parts are printed.
//!
//! The binary is the one cargo builds for benches (the release profile). Under `cargo test
//! --benches` (no `--bench` argument) it does a quick pass.

// A bench prints its figures, and a broken setup should stop it loudly.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use keel_test_support::git::TempRepo;
use keel_test_support::wire::wire_bytes;
use serde_json::{Value, json};

const KEEL: &str = env!("CARGO_BIN_EXE_keel");
const TARGET: Duration = Duration::from_millis(2);
/// The text of `basic_response.sse`.
const ANSWER: &str = "Hello there!";

/// When the model server had one request and when it had answered it.
struct Served {
    request: Instant,
    response_sent: Instant,
}

/// Reads one HTTP/1.1 request from `reader` (headers, then a `content-length` body); its
/// request line, or `None` at the end of the connection.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<String> {
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).ok()? == 0 {
        return None;
    }
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(request_line)
}

/// Serves one connection: every `POST /v1/messages` gets `stream` at once.
fn serve_connection(stream: TcpStream, sse: &[u8], served: &Sender<Served>) {
    stream.set_nodelay(true).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
        sse.len()
    )
    .into_bytes();
    response.extend_from_slice(sse);
    while let Some(request_line) = read_request(&mut reader) {
        let request = Instant::now();
        if !request_line.starts_with("POST /v1/messages ") {
            let _ = writer.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
            continue;
        }
        let response_sent = Instant::now();
        if writer.write_all(&response).is_err() {
            return;
        }
        let _ = served.send(Served {
            request,
            response_sent,
        });
    }
}

/// A loopback model server; its address and what it served.
fn model_server() -> (String, Receiver<Served>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let sse = wire_bytes("anthropic/basic_response.sse");
    let (sender, receiver) = channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (sse, sender) = (sse.clone(), sender.clone());
            std::thread::spawn(move || serve_connection(stream, &sse, &sender));
        }
    });
    (address, receiver)
}

/// `keel acp` and a thread reading its stdout: each message with when it was read.
struct Agent {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<(Instant, Value)>,
    next_id: u64,
}

impl Agent {
    fn start(model: &str, home: &std::path::Path) -> Self {
        let keel_home = home.join("keel");
        std::fs::create_dir_all(&keel_home).unwrap();
        let mut child = Command::new(KEEL)
            .arg("acp")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("KEEL_HOME", &keel_home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("NO_COLOR", "1")
            .env("ANTHROPIC_API_KEY", "sk-ant-bench-0123456789")
            .env("ANTHROPIC_BASE_URL", model)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning keel acp");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, messages) = channel();
        std::thread::spawn(move || {
            loop {
                let mut line = String::new();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        let read = Instant::now();
                        let message = serde_json::from_str(&line)
                            .unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"));
                        if sender.send((read, message)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Self {
            child,
            stdin,
            messages,
            next_id: 0,
        }
    }

    /// Sends request `method`; its id and when its writing began.
    fn send(&mut self, method: &str, params: Value) -> (u64, Instant) {
        let id = self.next_id;
        self.next_id += 1;
        let mut line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
            .to_string()
            .into_bytes();
        line.push(b'\n');
        let writing = Instant::now();
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
        (id, writing)
    }

    /// The next message, waiting at most 30 s.
    fn next(&self) -> (Instant, Value) {
        self.messages
            .recv_timeout(Duration::from_secs(30))
            .expect("keel acp said nothing for 30 s")
    }

    /// Waits for the reply to request `id`; when the first `agent_message_chunk` before it
    /// was read, the text of all of them, and the reply.
    fn reply(&self, id: u64) -> (Option<Instant>, String, Value) {
        let (mut first_chunk, mut text) = (None, String::new());
        loop {
            let (read, message) = self.next();
            if message.get("method").is_none() && message["id"] == id {
                return (first_chunk, text, message);
            }
            let update = &message["params"]["update"];
            if update["sessionUpdate"] == "agent_message_chunk" {
                first_chunk.get_or_insert(read);
                text.push_str(update["content"]["text"].as_str().unwrap_or_default());
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let (id, _) = self.send(method, params);
        let (_, _, reply) = self.reply(id);
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply
    }
}

/// One prompt's figures.
struct Sample {
    way_in: Duration,
    way_out: Duration,
}

/// Sends one prompt and times it; panics unless the turn ends normally with the answer.
fn prompt(agent: &mut Agent, session: &str, served: &Receiver<Served>) -> Sample {
    // Anything a previous turn left (none expected) is not this turn's.
    while served.try_recv().is_ok() {}
    let (id, prompt_written) = agent.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "Say hello."}]}),
    );
    let (first_chunk, text, reply) = agent.reply(id);
    assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
    assert_eq!(text, ANSWER);
    let first_chunk = first_chunk.expect("no agent_message_chunk before the reply");
    let model = served
        .recv_timeout(Duration::from_secs(5))
        .expect("the model server saw no request");
    assert!(
        served.try_recv().is_err(),
        "more than one model request for a prompt"
    );
    Sample {
        way_in: model.request.saturating_duration_since(prompt_written),
        way_out: first_chunk.saturating_duration_since(model.response_sent),
    }
}

/// The `q` quantile of sorted `times` (nearest rank).
fn quantile(times: &[Duration], q: f64) -> Duration {
    let rank = ((q * times.len() as f64).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

fn report(name: &str, mut times: Vec<Duration>) -> Duration {
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let median = quantile(&times, 0.5);
    println!(
        "  {name:<40} median {:>7.0} µs  p90 {:>7.0} µs  max {:>7.0} µs",
        us(median),
        us(quantile(&times, 0.9)),
        us(times[times.len() - 1]),
    );
    median
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not: a quick pass then.
    let full = std::env::args().any(|arg| arg == "--bench");
    let (warmups, prompts) = if full { (5, 50) } else { (1, 3) };
    println!("keel binary: {KEEL}");
    if !full {
        println!("quick pass (no --bench argument): a check that it runs, not the figures");
    }
    let (model, served) = model_server();
    let home = tempfile::tempdir().unwrap();
    let repo = TempRepo::new();
    repo.write("README.md", "a project\n");
    repo.commit("start");
    let mut agent = Agent::start(&model, home.path());
    agent.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let created = agent.request("session/new", json!({"cwd": repo.path(), "mcpServers": []}));
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();

    for _ in 0..warmups {
        prompt(&mut agent, &session, &served);
    }
    let samples: Vec<Sample> = (0..prompts)
        .map(|_| prompt(&mut agent, &session, &served))
        .collect();
    drop(agent.stdin);
    let status = agent.child.wait().unwrap();
    assert!(status.success(), "keel acp exited {status}");

    println!(
        "keel acp, session/prompt -> first agent_message_chunk, less the model's time ({prompts} prompts after {warmups} warm-ups):"
    );
    let overhead = report(
        "overhead (way in + way out)",
        samples.iter().map(|s| s.way_in + s.way_out).collect(),
    );
    report(
        "way in: prompt written -> model request",
        samples.iter().map(|s| s.way_in).collect(),
    );
    report(
        "way out: model response -> first chunk",
        samples.iter().map(|s| s.way_out).collect(),
    );
    println!(
        "target: median overhead <= {} ms: {}",
        TARGET.as_millis(),
        if overhead <= TARGET { "met" } else { "MISSED" }
    );
}
