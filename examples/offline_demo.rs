//! keel's agent loop end to end, offline: a SCRIPTED model fixes a bug in a throwaway repo.
//!
//! ```sh
//! cargo run --example offline_demo
//! ```
//!
//! No API key, no network. The model is a scripted stand-in whose replies are written below;
//! the engine, the sandboxed tools, the git commit and the JSONL session file are the real
//! ones. The demo makes a git repository in a temp dir holding a shell function with an
//! off-by-one bug and its failing test; the scripted model reads the function, runs the test
//! (it fails), patches the bug, runs the test again (it passes), commits and answers.

// An example talks to its user on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]
// Its report is read by keel-cli's tests/it/offline_demo.rs, which includes this file.
#![allow(unreachable_pub)]

use std::collections::HashMap;
use std::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keel::engine::{Agent, AgentEvent, AllowAll, JsonlSessionStore, RunOutcome, Stop};
use keel::provider::{ContentBlock, StopReason};
use keel::sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::{ScriptedProvider, Turn, reply};
use serde_json::{Value, json};

const SUM_SH: &str = "# sum_to N: the sum of the integers from 1 to N.\nsum_to() {\n    local n=$1 total=0 i\n    for ((i = 1; i < n; i++)); do\n        total=$((total + i))\n    done\n    echo \"$total\"\n}\n";
const TEST_SH: &str = "source ./sum.sh\nstatus=0\ncheck() {\n    if [ \"$2\" = \"$3\" ]; then echo \"ok   $1\"; else echo \"FAIL $1: expected $3, got $2\"; status=1; fi\n}\ncheck 'sum_to 1' \"$(sum_to 1)\" 1\ncheck 'sum_to 4' \"$(sum_to 4)\" 10\ncheck 'sum_to 0' \"$(sum_to 0)\" 0\nexit $status\n";
const BUGGY_LINE: &str = "    for ((i = 1; i < n; i++)); do\n";
const FIXED_LINE: &str = "    for ((i = 1; i <= n; i++)); do\n";
const PROMPT: &str = "test.sh fails: fix sum_to, check the test passes, and commit the fix.";
const BANNER: &str = "\
=== keel offline demo ==========================================================
The MODEL is a SCRIPTED STAND-IN: its replies are fixed in examples/offline_demo.rs,
so no API key is needed and nothing leaves this machine. Everything else is REAL:
the keel engine, the sandboxed tools (run_command under Landlock where the kernel
has it), the git commit, and the session file.
================================================================================";

/// One finished tool call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub input: Value,
    /// What the model read back.
    pub output: String,
    /// Whether the call failed.
    pub is_error: bool,
}

/// What the demo did.
#[derive(Debug)]
pub struct DemoReport {
    /// The temp dir holding the repository and the sessions (removed when dropped).
    pub dir: tempfile::TempDir,
    /// The repository's work tree.
    pub repo: PathBuf,
    /// The session's JSONL file.
    pub session_file: PathBuf,
    /// Every tool call, in order.
    pub calls: Vec<Call>,
    /// How the run ended.
    pub outcome: RunOutcome,
    /// `git log --oneline` of the repository, newest first.
    pub log: Vec<String>,
}

/// The scripted model: one reply per turn, each saying what it does and calling one tool.
fn scripted_model() -> ScriptedProvider {
    let step = |say: &str, id: &str, tool: &str, input: Value| {
        let content = vec![
            ContentBlock::text(say),
            ContentBlock::tool_use(id, tool, input),
        ];
        Turn::Reply(reply(content, StopReason::ToolUse))
    };
    let test = json!({"command": "bash test.sh"});
    let patch = json!({"path": "sum.sh", "old_string": BUGGY_LINE, "new_string": FIXED_LINE});
    let message = "Fix off-by-one in sum_to\n\nThe loop stopped at n - 1, so sum_to 4 gave 6.";
    ScriptedProvider::new()
        .then(step("Let me read sum.sh.", "call_1", "read_file", json!({"path": "sum.sh"})))
        .then(step("Now the test, to see the failure.", "call_2", "run_command", test.clone()))
        .then(step("The loop stops before n; it must include n.", "call_3", "patch_file", patch))
        .then(step("Running the test again.", "call_4", "run_command", test))
        .then(step("It passes. Committing.", "call_5", "git_commit", json!({"message": message})))
        .then_text("Fixed: `sum_to` looped while `i < n`, leaving n out of the sum; it now loops while `i <= n`. `bash test.sh` passes, and the fix is committed.")
}

/// A git repository at `dir` with the buggy project committed.
fn make_repo(dir: &Path) -> Result<(), Box<dyn Error>> {
    let mut options = git2::RepositoryInitOptions::new();
    options.initial_head("main");
    let repo = git2::Repository::init_opts(dir, &options)?;
    let mut config = repo.config()?;
    config.set_str("user.name", "Demo User")?;
    config.set_str("user.email", "demo@example.com")?;
    std::fs::write(dir.join("sum.sh"), SUM_SH)?;
    std::fs::write(dir.join("test.sh"), TEST_SH)?;
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let (me, message) = (repo.signature()?, "Add sum_to and its test");
    repo.commit(Some("HEAD"), &me, &me, message, &tree, &[])?;
    Ok(())
}

/// `git log --oneline`, newest first.
fn git_log(dir: &Path) -> Result<Vec<String>, Box<dyn Error>> {
    let repo = git2::Repository::open(dir)?;
    let mut walk = repo.revwalk()?;
    walk.push_head()?;
    let mut lines = Vec::new();
    for oid in walk {
        let commit = repo.find_commit(oid?)?;
        let short = commit.as_object().short_id()?;
        let summary = commit.summary().ok().flatten().unwrap_or("");
        lines.push(format!("{} {summary}", short.as_str().unwrap_or("?")));
    }
    Ok(lines)
}

/// Prints a finished call on one line, `✓ read_file(sum.sh) · 8 lines · 1 ms` (a command's
/// status on the line, its output below).
fn write_call(out: &mut impl Write, call: &Call, took: Duration) -> std::io::Result<()> {
    let key = match call.name.as_str() {
        "run_command" => "command",
        "git_commit" => "message",
        _ => "path",
    };
    let subject = call.input.get(key).and_then(Value::as_str).unwrap_or("");
    let subject = subject.lines().next().unwrap_or("");
    let mut lines = call.output.lines().filter(|l| !l.trim().is_empty());
    let summary = match call.name.as_str() {
        "read_file" => format!(
            "{} lines",
            lines.clone().filter(|l| l.contains('\t')).count()
        ),
        "run_command" => lines.next_back().unwrap_or("(no output)").to_owned(),
        _ => lines.next().unwrap_or("(no output)").to_owned(),
    };
    let mark = if call.is_error { "✗" } else { "✓" };
    let ms = took.as_millis();
    writeln!(
        out,
        "  {mark} {}({subject}) · {summary} · {ms} ms",
        call.name
    )?;
    if call.name == "run_command" {
        lines.try_for_each(|line| writeln!(out, "    │ {line}"))?;
    }
    Ok(())
}

/// Runs the scripted scenario, printing what happens to `out`.
pub async fn run_demo(out: &mut impl Write) -> Result<DemoReport, Box<dyn Error>> {
    writeln!(out, "{BANNER}")?;
    let dir = tempfile::Builder::new()
        .prefix("keel-offline-demo-")
        .tempdir()?;
    let repo = std::fs::canonicalize(dir.path())?.join("project");
    std::fs::create_dir(&repo)?;
    make_repo(&repo)?;
    let store = Arc::new(JsonlSessionStore::new(repo.with_file_name("sessions")));
    let agent = Agent::builder(Arc::new(scripted_model()))
        .model("scripted-stand-in")
        .tools(default_tools(
            &PathSandbox::new(&repo)?,
            &SandboxPolicy::default(),
        )?)
        .approver(AllowAll)
        .session_store(store.clone())
        .build()?;
    let mut session = agent.session(&repo)?;
    writeln!(out, "repository: {}\nprompt: {PROMPT}\n", repo.display())?;
    let (mut calls, mut inputs, mut said) = (Vec::new(), HashMap::new(), String::new());
    let mut outcome = None;
    {
        let events = session.run_streaming(PROMPT);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            match event {
                AgentEvent::TextDelta { text } => said.push_str(&text),
                AgentEvent::ToolCallStarted { id, input, .. } => {
                    writeln!(out, "model (scripted): {}", std::mem::take(&mut said))?;
                    inputs.insert(id, input);
                }
                AgentEvent::ToolCallFinished {
                    id,
                    name,
                    output,
                    is_error,
                    duration,
                    ..
                } => {
                    let input = inputs.remove(&id).unwrap_or_default();
                    let call = Call {
                        name,
                        input,
                        output,
                        is_error,
                    };
                    write_call(out, &call, duration)?;
                    calls.push(call);
                }
                AgentEvent::Warning { message } => writeln!(out, "  warning: {message}")?,
                AgentEvent::Finished(done) => outcome = Some(done),
                _ => {}
            }
        }
    }
    let outcome = outcome.ok_or("the run ended without an outcome")?;
    if outcome.stop != Stop::Completed {
        return Err(format!("the run ended ({}): {}", outcome.stop.name(), outcome.text).into());
    }
    let session_file = store.path_of(session.id())?;
    let log = git_log(&repo)?;
    let (calls_made, file) = (outcome.iterations, session_file.display());
    writeln!(
        out,
        "\nfinal answer ({calls_made} model calls):\n{}\n",
        outcome.text
    )?;
    writeln!(out, "session file: {file}\n\ngit log --oneline:")?;
    for line in &log {
        writeln!(out, "  {line}")?;
    }
    Ok(DemoReport {
        dir,
        repo,
        session_file,
        calls,
        outcome,
        log,
    })
}

// The offline_demo test includes this file as a module and calls run_demo, not main.
#[allow(dead_code)]
#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run_demo(&mut std::io::stdout()).await {
        Ok(report) => {
            let kept = report.dir.keep();
            println!("\n(the demo's files are kept in {})", kept.display());
            std::process::ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("offline_demo failed: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
