//! Crash-safe turns: keel killed at any point of a session — simulated by cutting the
//! session file at hundreds of byte offsets, and by a store that dies at each write — then
//! resumed by a fresh agent: every request is valid, no call from before the kill runs
//! again, nothing is duplicated, and the file replays to exactly the history in memory.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::{Runs, Token, check_request};
use keel_engine::history::STOPPED;
use keel_engine::{
    Agent, JsonlSessionStore, LoadedSession, Notifier, SessionError, SessionLog, SessionMeta,
    SessionRecord, SessionStore, SessionSummary, Stop,
};
use keel_provider::{ContentBlock, Message, StopReason};
use keel_test_support::scripted::{ScriptedProvider, Turn, reply};
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Set once the simulated process is dead: tools that run after that never ran for real.
type Dead = Arc<AtomicBool>;

/// Tools that record their runs unless the process is "dead".
macro_rules! tool {
    ($ty:ident, $name:literal, $effect:expr) => {
        struct $ty(Runs, Dead);
        impl Tool for $ty {
            type Args = Token;
            const NAME: &'static str = $name;
            fn description(&self) -> &str {
                "Counts."
            }
            fn effect(&self, _args: &Token) -> Effect {
                $effect
            }
            async fn call(&self, args: Token, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
                if !self.1.load(Ordering::SeqCst) {
                    self.0.lock().unwrap().push(($name.to_owned(), args.n));
                }
                Ok(ToolOutput::text(format!("{} {}", $name, args.n)))
            }
        }
    };
}

tool!(Count, "count", Effect::Mutating);
tool!(Peek, "peek", Effect::ReadOnly);
tool!(Erase, "erase", Effect::destructive("erases"));

#[derive(Deserialize, JsonSchema)]
struct WalArgs {
    n: u64,
    id: String,
}

/// Write-ahead, checked from inside a call: the session file already holds the call.
struct Wal(Runs, Dead, PathBuf);

impl Tool for Wal {
    type Args = WalArgs;
    const NAME: &'static str = "wal";
    fn description(&self) -> &str {
        "Looks for its own call in the session file."
    }
    async fn call(&self, args: WalArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if !self.1.load(Ordering::SeqCst) {
            self.0.lock().unwrap().push(("wal".to_owned(), args.n));
        }
        let file = self.2.join(format!("{}.jsonl", ctx.session_id()));
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains(&format!("\"id\":\"{}\"", args.id)) {
            Ok(ToolOutput::text(format!("wal {}", args.n)))
        } else {
            Err(ToolError::failed(format!(
                "call {} is not in {}",
                args.id,
                file.display()
            )))
        }
    }
}

fn tools(runs: &Runs, dead: &Dead, dir: &Path) -> ToolRegistry {
    ToolRegistry::new()
        .with(Count(runs.clone(), dead.clone()))
        .unwrap()
        .with(Peek(runs.clone(), dead.clone()))
        .unwrap()
        .with(Erase(runs.clone(), dead.clone()))
        .unwrap()
        .with(Wal(runs.clone(), dead.clone(), dir.to_path_buf()))
        .unwrap()
}

/// Hands out a notice at the given `take` calls (1-based).
struct Notices {
    calls: AtomicUsize,
    at: Vec<usize>,
}

#[async_trait::async_trait]
impl Notifier for Notices {
    async fn take(&self, _session_id: &str) -> Vec<String> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.at.contains(&call) {
            vec![format!("task {call} finished")]
        } else {
            Vec::new()
        }
    }
}

fn calls(content: Vec<ContentBlock>) -> Turn {
    Turn::Reply(reply(content, StopReason::ToolUse))
}

fn call(id: &str, tool: &str, n: u64) -> ContentBlock {
    ContentBlock::tool_use(id, tool, json!({"n": n}))
}

const PROMPTS: [&str; 3] = ["p1", "p2", "p3"];
const MAX_ITERATIONS: u32 = 3;

/// The session that gets killed: a parallel read-only batch, a write-ahead check, a denied
/// call, notices, a reused id, a run stopped by the iteration limit, and a prompt after it.
fn original_script() -> ScriptedProvider {
    ScriptedProvider::new()
        // Run 1.
        .then(calls(vec![
            call("a1", "peek", 1),
            call("a2", "peek", 2),
            call("a3", "count", 3),
            ContentBlock::tool_use("a4", "wal", json!({"n": 4, "id": "a4"})),
        ]))
        .then(calls(vec![call("b1", "erase", 5), call("b2", "count", 6)]))
        .then_text("r1 done")
        // Run 2: three calls in a row, stopped by the iteration limit.
        .then(calls(vec![call("c1", "count", 7)]))
        .then(calls(vec![call("c2", "peek", 8), call("c3", "peek", 9)]))
        // An id used before: renamed.
        .then(calls(vec![call("a3", "count", 10)]))
        // Run 3: its prompt joins the results the limit left last.
        .then_text("r3 done")
}

/// Runs the original session to its end against `store`; returns its id.
async fn run_original(
    store: Arc<dyn SessionStore>,
    dir: &Path,
    runs: &Runs,
    dead: &Dead,
) -> String {
    let agent = Agent::builder(Arc::new(original_script()))
        .model("claude-sonnet-4-5")
        .tools(tools(runs, dead, dir))
        .session_store(store)
        .max_iterations(MAX_ITERATIONS)
        .notifier(Arc::new(Notices {
            calls: AtomicUsize::new(0),
            // Asked before the 2nd request on (a new session does not ask before its
            // first): notices before the 3rd and 5th requests.
            at: vec![2, 4],
        }))
        .build()
        .unwrap();
    let mut session = agent.session(dir).unwrap();
    let stops: Vec<Stop> = {
        let mut stops = Vec::new();
        for prompt in PROMPTS {
            stops.push(session.run(prompt).await.stop);
        }
        stops
    };
    if !dead.load(Ordering::SeqCst) {
        assert_eq!(
            stops,
            [Stop::Completed, Stop::MaxIterations, Stop::Completed],
            "{:?}",
            session.history()
        );
    }
    session.id().to_owned()
}

/// Resumes session `id` from `dir` with a fresh agent and runs one more prompt; checks every
/// promise. `ran_before` are the calls that really ran before the kill.
async fn resume_and_check(dir: &Path, id: &str, ran_before: &[(String, u64)], case: &str) {
    let store = Arc::new(JsonlSessionStore::new(dir));
    let provider = Arc::new(
        ScriptedProvider::new()
            // An id the original used: renamed if it is in the history.
            .then(calls(vec![call("a1", "count", 100)]))
            .then_text("resumed done"),
    );
    let runs = Runs::default();
    let dead = Dead::default();
    let agent = Agent::builder(provider.clone())
        .model("claude-sonnet-4-5")
        .tools(tools(&runs, &dead, dir))
        .session_store(store.clone())
        .max_iterations(10)
        .notifier(Arc::new(Notices {
            calls: AtomicUsize::new(0),
            at: vec![1],
        }))
        .build()
        .unwrap();
    let mut session = match agent.resume(id) {
        Ok(session) => session,
        // A header cut off: the file is refused whole, nothing runs.
        Err(keel_engine::EngineError::Session(SessionError::Corrupt { line: 1, .. })) => return,
        Err(err) => panic!("{case}: {err}"),
    };
    let outcome = session.run("resume").await;
    assert_eq!(outcome.stop, Stop::Completed, "{case}: {outcome:?}");
    assert_eq!(outcome.text, "resumed done", "{case}");

    // Every request is valid.
    let requests = provider.requests();
    assert_eq!(requests.len(), 2, "{case}");
    for (i, request) in requests.iter().enumerate() {
        check_request(&request.messages)
            .unwrap_or_else(|e| panic!("{case}: request {i}: {e}\n{:#?}", request.messages));
    }
    // Nothing from before the kill ran again; the new call ran once.
    assert_eq!(
        runs.lock().unwrap().clone(),
        [("count".to_owned(), 100)],
        "{case}"
    );

    // Nothing is duplicated: each prompt, notice and call at most once.
    let last = &requests[1].messages;
    let texts: Vec<&str> = last
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    for prompt in PROMPTS.iter().chain(&["resume", "r1 done", "r3 done"]) {
        assert!(
            texts.iter().filter(|t| **t == *prompt).count() <= 1,
            "{case}: {prompt:?} twice in {texts:?}"
        );
    }
    assert_eq!(
        texts.iter().filter(|t| **t == "resume").count(),
        1,
        "{case}"
    );
    let mut seen_n = std::collections::HashSet::new();
    for block in last.iter().flat_map(|m| &m.content) {
        if let ContentBlock::ToolUse { input, .. } = block {
            let n = input["n"].as_u64().unwrap();
            assert!(seen_n.insert(n), "{case}: call {n} twice");
        }
    }

    // A result that says a call ran means it ran (no invented results); the others say
    // keel stopped.
    let history = session.history();
    for (i, message) in history.iter().enumerate() {
        for block in &message.content {
            let ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } = block
            else {
                continue;
            };
            let (tool, n) = history[i - 1]
                .content
                .iter()
                .find_map(|b| match b {
                    ContentBlock::ToolUse {
                        id, name, input, ..
                    } if id == tool_use_id => Some((name.clone(), input["n"].as_u64().unwrap())),
                    _ => None,
                })
                .unwrap();
            if n >= 100 || content == STOPPED || content.starts_with("denied") {
                continue;
            }
            assert_eq!(*content, format!("{tool} {n}"), "{case}");
            assert!(
                ran_before.contains(&(tool.clone(), n)),
                "{case}: {tool} {n} has a result but never ran"
            );
        }
    }
    // The file replays to exactly what is in memory.
    let loaded = store.load(id).unwrap();
    assert_eq!(loaded.messages, history, "{case}");
}

#[tokio::test]
async fn a_session_cut_at_any_byte_resumes_validly() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let dead = Dead::default();
    let store = Arc::new(JsonlSessionStore::new(dir.path()));
    let id = run_original(store.clone(), dir.path(), &runs, &dead).await;
    let ran = runs.lock().unwrap().clone();
    // Everything ran once; the denied call never did; write-ahead held.
    assert_eq!(
        ran.iter()
            .map(|r| r.1)
            .collect::<std::collections::BTreeSet<_>>(),
        [1, 2, 3, 4, 6, 7, 8, 9, 10].into()
    );
    let full = store.load(&id).unwrap();
    let results: Vec<String> = full
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert!(results.contains(&"wal 4".to_owned()), "{results:?}");
    check_request(&full.messages).unwrap();
    assert!(
        full.messages
            .iter()
            .any(|m| m.content.contains(&ContentBlock::text("p3"))
                && m.content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::ToolResult { .. }))),
        "p3 joins the results left by the limit"
    );

    let bytes = std::fs::read(store.path_of(&id).unwrap()).unwrap();
    let mut offsets: std::collections::BTreeSet<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .flat_map(|(i, _)| [i, i + 1])
        .collect();
    for k in 0..=240 {
        offsets.insert(k * bytes.len() / 240);
    }
    let cases: Vec<usize> = offsets.into_iter().filter(|o| *o <= bytes.len()).collect();
    assert!(cases.len() >= 200, "{}", cases.len());
    for offset in cases {
        let case_dir = tempfile::tempdir().unwrap();
        std::fs::write(
            case_dir.path().join(format!("{id}.jsonl")),
            &bytes[..offset],
        )
        .unwrap();
        resume_and_check(case_dir.path(), &id, &ran, &format!("cut at byte {offset}")).await;
    }
}

/// A store whose process "dies" at its `die_at`-th append: that record is written half (or
/// not at all) and nothing after it.
#[derive(Debug)]
struct DyingStore {
    inner: JsonlSessionStore,
    die_at: usize,
    half: bool,
    writes: Arc<AtomicUsize>,
    dead: Dead,
}

struct DyingLog {
    inner: Box<dyn SessionLog>,
    path: PathBuf,
    die_at: usize,
    half: bool,
    writes: Arc<AtomicUsize>,
    dead: Dead,
}

impl SessionLog for DyingLog {
    fn append(&mut self, record: &SessionRecord) -> Result<(), SessionError> {
        if self.dead.load(Ordering::SeqCst) {
            return Ok(());
        }
        if self.writes.fetch_add(1, Ordering::SeqCst) == self.die_at {
            self.dead.store(true, Ordering::SeqCst);
            if self.half {
                let line = serde_json::to_vec(record).unwrap();
                let mut file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&self.path)
                    .unwrap();
                file.write_all(&line[..line.len() / 2]).unwrap();
            }
            return Ok(());
        }
        self.inner.append(record)
    }

    fn flush(&mut self) -> Result<(), SessionError> {
        if self.dead.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.flush()
    }

    fn id(&self) -> &str {
        self.inner.id()
    }
}

impl SessionStore for DyingStore {
    fn create(&self, meta: &SessionMeta) -> Result<Box<dyn SessionLog>, SessionError> {
        Ok(Box::new(DyingLog {
            inner: self.inner.create(meta)?,
            path: self.inner.path_of(&meta.id)?,
            die_at: self.die_at,
            half: self.half,
            writes: self.writes.clone(),
            dead: self.dead.clone(),
        }))
    }
    fn load(&self, id: &str) -> Result<LoadedSession, SessionError> {
        self.inner.load(id)
    }
    fn open(&self, id: &str) -> Result<(LoadedSession, Box<dyn SessionLog>), SessionError> {
        self.inner.open(id)
    }
    fn latest_for_cwd(&self, cwd: &Path) -> Result<Option<SessionMeta>, SessionError> {
        self.inner.latest_for_cwd(cwd)
    }
    fn list(&self, limit: usize) -> Result<Vec<SessionSummary>, SessionError> {
        self.inner.list(limit)
    }
}

async fn run_dying(
    die_at: usize,
    half: bool,
) -> (tempfile::TempDir, String, Vec<(String, u64)>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let dead = Dead::default();
    let writes = Arc::new(AtomicUsize::new(0));
    let store = Arc::new(DyingStore {
        inner: JsonlSessionStore::new(dir.path()),
        die_at,
        half,
        writes: writes.clone(),
        dead: dead.clone(),
    });
    let id = run_original(store, dir.path(), &runs, &dead).await;
    let ran = runs.lock().unwrap().clone();
    (dir, id, ran, writes.load(Ordering::SeqCst))
}

#[tokio::test]
async fn a_session_killed_at_every_write_resumes_validly() {
    let (_, _, _, total) = run_dying(usize::MAX, false).await;
    assert!(total > 20, "{total}");
    let kills = Mutex::new(0);
    for die_at in 0..total {
        for half in [false, true] {
            let (dir, id, ran, _) = run_dying(die_at, half).await;
            resume_and_check(
                dir.path(),
                &id,
                &ran,
                &format!("killed at write {die_at} (half: {half})"),
            )
            .await;
            *kills.lock().unwrap() += 1;
        }
    }
    assert_eq!(*kills.lock().unwrap(), 2 * total);
}

#[tokio::test]
async fn a_prompt_after_a_kill_between_prompt_and_reply_joins_it() {
    // The file holds a prompt and nothing after it.
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(dir.path());
    let meta = SessionMeta::new(dir.path(), "scripted", "m");
    let mut log = store.create(&meta).unwrap();
    log.append(&SessionRecord::message(Message::user("first")))
        .unwrap();
    drop(log);
    resume_and_check(dir.path(), &meta.id, &[], "kill between prompt and reply").await;
    let loaded = store.load(&meta.id).unwrap();
    assert_eq!(
        loaded.messages[0].content[..2],
        [ContentBlock::text("first"), ContentBlock::text("resume")]
    );
}
