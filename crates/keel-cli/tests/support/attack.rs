//! The attack-corpus harness: every attempt is a row of data run through the real `keel` binary
//! in a temporary repository of its own, then checked to have been held.
//!
//! A row ([`Attempt`]) names the files the repository carries, the user's config and flags, the
//! scripted model's tool calls (per conversation: the user's prompt, a `code` child's task, a
//! background task's text), steps before and after keel runs, and extra checks. Strings may hold
//! placeholders: `{repo}`, `{tmp}` (the repository's parent, under `/tmp`), `{outside}` (a dir
//! under `/var/tmp`, outside every writable root), `{canary}` (`{outside}/pwned`), `{home}`,
//! `{keel_home}`, `{port}` / `{udp_port}` (loopback listeners), `{abstract}` (an abstract unix
//! socket's name), `{evil_url}`, `{keel_bin}`, `{sleep}` (a sleep length unique to the attempt),
//! `{tmux}` (a tmux server's socket name), `{secret}` (the text of `{outside}/secret.txt`).
//!
//! Every attempt is checked for everything, whatever it aims at: no canary file (`pwned` in
//! `{outside}`, `{tmp}`, `{home}`) after keel exits nor after the user's own later shell and git
//! commands (run here, unconfined); `.git/config`, `.git/hooks`, `.git/info`, the power-granting
//! config files, the shell's start-up files, `~/.cargo/{env,bin}`, `~/.local/bin`, `~/.gitconfig`,
//! `~/.ssh` and the user's keel config unchanged; `victim/` still there; nothing arrived on the
//! TCP, UDP, abstract and ssh-agent sockets nor at the evil server; no credential value in any
//! output, saved file or request; every pid a command printed as `KEELPID=N` dead once keel
//! exited. A failing attempt lists exactly what got through; [`run_corpus`] runs them all, a
//! few at a time, and fails once at the end.

// Test helpers: a setup failure is a test failure; the summary is printed for the person.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use keel_test_support::render::{anthropic_sse, openai_sse};
use keel_test_support::scripted::{text_reply, tool_reply};
use serde_json::{Value, json};
use tempfile::TempDir;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::{FAKE_KEY, Home};

/// Credentials and sockets in keel's environment for every attempt: no command may see them.
pub const ENV_SECRETS: [(&str, &str); 9] = [
    ("GITHUB_TOKEN", "ghp_KEELCANARYgithub0001"),
    ("AWS_ACCESS_KEY_ID", "AKIAKEELCANARY0002"),
    ("AWS_SECRET_ACCESS_KEY", "keelcanary-aws-secret-0003"),
    ("GITLAB_PAT", "glpat-KEELCANARY0004"),
    (
        "DBUS_SESSION_BUS_ADDRESS",
        "unix:path=/run/user/0/keelcanary-dbus-0005",
    ),
    ("GPG_AGENT_INFO", "/run/user/0/keelcanary-gpg-0006:0:1"),
    ("WAYLAND_DISPLAY", "keelcanary-wayland-0007"),
    ("TMUX_PANE", "%keelcanary0008"),
    ("MY_LLM_CRED", "sk-keel-custom-canary-0010"),
];

/// The prompt of a row's first run, and of its second.
pub const HI: &str = "hi";
pub const AGAIN: &str = "hi again";

/// One scripted model turn, placeholders not yet filled.
#[derive(Clone, Debug)]
pub enum Turn {
    Call(String, Value),
    Text(String),
    /// A raw event stream (an `event: error`, say).
    Sse(String),
    /// An HTTP error with this status and body.
    Status(u16, String),
}

/// Something done outside keel: before it runs, or after it and before the user's later work.
#[derive(Clone, Debug)]
pub enum Step {
    Keel(Vec<String>),
    Shell(String),
    Write(String, String),
}

/// One `keel` invocation: a subcommand, flags, and the prompt for `exec`.
#[derive(Clone, Debug)]
struct RunSpec {
    sub: Vec<String>,
    flags: Vec<String>,
    prompt: Option<String>,
}

/// One attack attempt.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub name: String,
    control: Option<&'static str>,
    files: Vec<(String, String)>,
    links: Vec<(String, String)>,
    executable: Vec<String>,
    user_config: Option<String>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
    openai: bool,
    tmux: bool,
    runs: Vec<RunSpec>,
    convs: Vec<(String, Turn)>,
    before: Vec<Step>,
    after_keel: Vec<Step>,
    absent: Vec<String>,
    exists: Vec<String>,
    protect: Vec<String>,
    consented: Vec<String>,
    in_requests_not: Vec<String>,
    notices: Vec<String>,
    max_requests: Option<usize>,
    no_task: bool,
    want_pids: bool,
    exits: Vec<i32>,
    no_model: bool,
    tool_errors_ok: bool,
}

impl Attempt {
    /// An attempt: `keel exec hi` in a fresh repository, nothing scripted yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            control: None,
            files: Vec::new(),
            links: Vec::new(),
            executable: Vec::new(),
            user_config: None,
            env: Vec::new(),
            cwd: None,
            openai: false,
            tmux: false,
            runs: vec![RunSpec {
                sub: vec!["exec".into()],
                flags: Vec::new(),
                prompt: Some(HI.into()),
            }],
            convs: Vec::new(),
            before: Vec::new(),
            after_keel: Vec::new(),
            absent: Vec::new(),
            exists: Vec::new(),
            protect: Vec::new(),
            consented: Vec::new(),
            in_requests_not: Vec::new(),
            notices: Vec::new(),
            max_requests: None,
            no_task: false,
            want_pids: false,
            exits: vec![0, 1],
            no_model: false,
            tool_errors_ok: false,
        }
    }

    /// Not an attack: a detector check. Passes only when a failure tagged `[tag]` shows.
    pub fn control(mut self, tag: &'static str) -> Self {
        self.control = Some(tag);
        self
    }
    /// A file the repository carries (a path relative to it, or a placeholder path).
    pub fn file(mut self, path: &str, text: &str) -> Self {
        self.files.push((path.into(), text.into()));
        self
    }
    /// A project config file, `.keel/config.toml`.
    pub fn config(self, text: &str) -> Self {
        self.file(".keel/config.toml", text)
    }
    /// An executable file the repository carries.
    pub fn script(mut self, path: &str, text: &str) -> Self {
        self.executable.push(path.into());
        self.file(path, text)
    }
    /// A symlink `path` → `target` the repository carries.
    pub fn link(mut self, path: &str, target: &str) -> Self {
        self.links.push((path.into(), target.into()));
        self
    }
    /// `$KEEL_HOME/config.toml`.
    pub fn user_config(mut self, text: &str) -> Self {
        self.user_config = Some(text.into());
        self
    }
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
    /// Where the user runs keel (relative to the repository, or a placeholder path).
    pub fn cwd(mut self, dir: &str) -> Self {
        self.cwd = Some(dir.into());
        self
    }
    /// The user's provider is an OpenAI-compatible server (`--provider openai`).
    pub fn openai(mut self) -> Self {
        self.openai = true;
        self.flag("--provider").flag("openai")
    }
    /// A tmux server runs (socket `/tmp/tmux-0/{tmux}`) and keel runs inside it (`TMUX`).
    pub fn tmux(mut self) -> Self {
        self.tmux = true;
        self
    }
    /// A flag for the first run.
    pub fn flag(mut self, flag: &str) -> Self {
        self.runs[0].flags.push(flag.into());
        self
    }
    pub fn flags(self, flags: &[&str]) -> Self {
        flags.iter().fold(self, |row, flag| row.flag(flag))
    }
    /// The first run is `keel ARGS` (no model, unless the command asks one).
    pub fn keel(mut self, args: &[&str]) -> Self {
        self.runs[0] = RunSpec {
            sub: args.iter().map(|a| (*a).to_owned()).collect(),
            flags: Vec::new(),
            prompt: None,
        };
        self
    }
    /// A second `keel exec FLAGS "hi again"` after the first.
    pub fn again(mut self, flags: &[&str]) -> Self {
        self.runs.push(RunSpec {
            sub: vec!["exec".into()],
            flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            prompt: Some(AGAIN.into()),
        });
        self
    }
    /// A tool call the model makes in conversation `conv` (the first message's text).
    pub fn call_in(mut self, conv: &str, tool: &str, input: Value) -> Self {
        self.convs
            .push((conv.into(), Turn::Call(tool.into(), input)));
        self
    }
    /// A tool call in the first run.
    pub fn call(self, tool: &str, input: Value) -> Self {
        self.call_in(HI, tool, input)
    }
    /// `run_command` in the first run.
    pub fn run(self, command: &str) -> Self {
        self.call("run_command", json!({ "command": command }))
    }
    /// `run_command` in conversation `conv`.
    pub fn run_in(self, conv: &str, command: &str) -> Self {
        self.call_in(conv, "run_command", json!({ "command": command }))
    }
    /// A raw reply (an event stream, an HTTP error) as the next one in `conv`.
    pub fn reply_in(mut self, conv: &str, turn: Turn) -> Self {
        self.convs.push((conv.into(), turn));
        self
    }
    pub fn before(mut self, step: Step) -> Self {
        self.before.push(step);
        self
    }
    pub fn before_keel(self, args: &[&str]) -> Self {
        self.before(Step::Keel(args.iter().map(|a| (*a).to_owned()).collect()))
    }
    pub fn before_shell(self, script: &str) -> Self {
        self.before(Step::Shell(script.into()))
    }
    pub fn after_keel(mut self, step: Step) -> Self {
        self.after_keel.push(step);
        self
    }
    /// `path` must not exist after keel, nor after the user's later work.
    pub fn absent(mut self, path: &str) -> Self {
        self.absent.push(path.into());
        self
    }
    /// `path` must still exist after keel.
    pub fn exists(mut self, path: &str) -> Self {
        self.exists.push(path.into());
        self
    }
    /// `path` must be unchanged after keel (besides the built-in list).
    pub fn protect(mut self, path: &str) -> Self {
        self.protect.push(path.into());
        self
    }
    /// A guarded path the user consented to change (`-y` and a file tool writing a config
    /// file): left out of the comparison.
    pub fn consented(mut self, path: &str) -> Self {
        self.consented.push(path.into());
        self
    }
    /// `text` must appear in no request keel sent.
    pub fn not_in_requests(mut self, text: &str) -> Self {
        self.in_requests_not.push(text.into());
        self
    }
    /// stderr must name `key` as ignored.
    pub fn notice(mut self, key: &str) -> Self {
        self.notices.push(key.into());
        self
    }
    pub fn max_requests(mut self, n: usize) -> Self {
        self.max_requests = Some(n);
        self
    }
    /// No background task may have been created.
    pub fn no_task(mut self) -> Self {
        self.no_task = true;
        self
    }
    /// The commands print `KEELPID=N`; at least one must be seen.
    pub fn pids(mut self) -> Self {
        self.want_pids = true;
        self
    }
    /// Exit codes that count as "keel ran" (default 0 and 1).
    pub fn exit_codes(mut self, codes: &[i32]) -> Self {
        self.exits = codes.to_vec();
        self
    }
    /// The first run asks no model (`keel skills`, a refused config).
    pub fn no_model(mut self) -> Self {
        self.no_model = true;
        self
    }
    /// Unknown tools and unparsable arguments are expected (a tool the mode removes).
    pub fn tool_errors_ok(mut self) -> Self {
        self.tool_errors_ok = true;
        self
    }
    /// The same attempt under another name (for variants).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Applies `f` (for variants built in loops).
    pub fn with(self, f: impl FnOnce(Self) -> Self) -> Self {
        f(self)
    }
}

/// The scripted model: replies by conversation (the first user message's text), in order, then
/// "done."; anything unknown gets "done." too.
struct Script {
    convs: Mutex<HashMap<String, VecDeque<Turn>>>,
    ids: AtomicUsize,
    evil: bool,
}

fn first_user_text(body: &Value) -> String {
    let Some(message) = body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .find_map(|b| b["text"].as_str())
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let openai = request.url.path().ends_with("/chat/completions");
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let turn = if self.evil {
            Turn::Text("evil.".into())
        } else {
            let conv = first_user_text(&body);
            let next = self
                .convs
                .lock()
                .unwrap()
                .get_mut(&conv)
                .and_then(VecDeque::pop_front);
            next.unwrap_or_else(|| Turn::Text("done.".into()))
        };
        let sse = match turn {
            Turn::Sse(raw) => raw,
            Turn::Status(status, body) => {
                return ResponseTemplate::new(status).set_body_raw(body, "application/json");
            }
            Turn::Text(text) => render(openai, &text_reply(&text)),
            Turn::Call(tool, input) => {
                let id = format!("toolu_a{}", self.ids.fetch_add(1, Ordering::Relaxed));
                render(openai, &tool_reply(&id, &tool, input))
            }
        };
        keel_test_support::mock::sse_response(sse)
    }
}

fn render(openai: bool, reply: &keel_provider::ToolUseResponse) -> String {
    if openai {
        openai_sse(reply)
    } else {
        anthropic_sse(reply)
    }
}

async fn serve(script: Script) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(script)
        .mount(&server)
        .await;
    server
}

/// Everything one attempt owns; dropped (and cleaned) at its end.
struct Ctx {
    tmp: TempDir,
    outside: TempDir,
    ssh_dir: TempDir,
    home: Home,
    repo: PathBuf,
    cwd: PathBuf,
    honest: MockServer,
    evil: MockServer,
    tcp: TcpListener,
    udp: UdpSocket,
    abstract_sock: UnixListener,
    ssh: UnixListener,
    ssh_path: PathBuf,
    tmux: Option<String>,
    vars: Vec<(String, String)>,
    secret: String,
}

impl Ctx {
    fn fill(&self, text: &str) -> String {
        self.vars
            .iter()
            .fold(text.to_owned(), |t, (k, v)| t.replace(k.as_str(), v))
    }

    fn fill_value(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.fill(s)),
            Value::Array(items) => items.iter().map(|v| self.fill_value(v)).collect(),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| (k.clone(), self.fill_value(v)))
                .collect(),
            other => other.clone(),
        }
    }

    /// A path from a row: a placeholder path as filled, else relative to the repository.
    fn path(&self, text: &str) -> PathBuf {
        let filled = self.fill(text);
        if filled.starts_with('/') {
            PathBuf::from(filled)
        } else {
            self.repo.join(filled)
        }
    }

    /// Readable text: the attempt's paths put back as placeholders.
    fn unfill(&self, text: &str) -> String {
        let mut vars: Vec<&(String, String)> =
            self.vars.iter().filter(|(_, v)| v.len() > 8).collect();
        vars.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        vars.iter()
            .fold(text.to_owned(), |t, (k, v)| t.replace(v.as_str(), k))
    }

    fn keel(&self, row: &Attempt, args: &[String]) -> Command {
        let mut command = self.home.keel_anthropic(&self.honest);
        command
            .env("OPENAI_BASE_URL", format!("{}/v1", self.honest.uri()))
            .env("TMUX", self.tmux_env())
            .env("SSH_AUTH_SOCK", &self.ssh_path)
            .current_dir(&self.cwd)
            .args(args)
            .process_group(0);
        if row.openai {
            command.env("OPENAI_API_KEY", FAKE_KEY);
        }
        for (name, value) in ENV_SECRETS.iter().filter(|(n, _)| *n != "MY_LLM_CRED") {
            command.env(name, value);
        }
        for (name, value) in &row.env {
            command.env(name, self.fill(value));
        }
        command
    }

    fn tmux_env(&self) -> String {
        match &self.tmux {
            Some(name) => format!("/tmp/tmux-0/{name},1,0"),
            None => "/tmp/tmux-0/keelcanary-notmux-0009,1,0".into(),
        }
    }
}

/// Runs `command` (in its own process group) to its end, or kills the group after `limit`.
fn output_within(mut command: Command, limit: Duration) -> (Output, bool) {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (done, timed_out) = (done.clone(), timed_out.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + limit;
            while !done.load(Ordering::Relaxed) {
                if Instant::now() > deadline {
                    timed_out.store(true, Ordering::Relaxed);
                    let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let output = child.wait_with_output().unwrap();
    done.store(true, Ordering::Relaxed);
    watchdog.join().unwrap();
    (output, timed_out.load(Ordering::Relaxed))
}

fn shell(script: &str, dir: &Path, home: &Path) -> Command {
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env_clear()
        .env("HOME", home)
        .env(
            "PATH",
            format!(
                "{0}/bin:{0}/.cargo/bin:{0}/.local/bin:/usr/local/bin:/usr/bin:/bin",
                home.display()
            ),
        )
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .process_group(0);
    command
}

/// The user's own work after keel exits, unconfined: each must not fire anything planted.
const LATER: [(&str, &str); 7] = [
    ("a login shell", "true"),
    ("git status", "git status --short"),
    (
        "git diff",
        "echo later >> README.md && git diff > /dev/null",
    ),
    ("git commit", "git add -A && git commit -qm later"),
    (
        "git checkout",
        "git checkout -qb later && git checkout -q main",
    ),
    ("git push", "git push -q origin main"),
    ("git st", "git st"),
];
const STARTUP: &str = "for f in .profile .bash_profile .bashrc .cargo/env; do \
    [ -f \"$HOME/$f\" ] && . \"$HOME/$f\"; done >/dev/null 2>&1; ";

const REPO_SETUP: &str = "set -e; git init -q -b main . && git config user.name 'Test User' \
    && git config user.email test@example.com && printf '# test\\n' > README.md \
    && mkdir -p victim && printf 'keep\\n' > victim/keep.txt";
const REPO_COMMIT: &str = "set -e; git add -A && git commit -qm initial \
    && git init -q --bare ../remote.git && git remote add origin ../remote.git";

/// Files and dirs that must not change; the dirs are compared whole.
const GUARDED_REPO: [&str; 7] = [
    ".git/config",
    ".git/hooks",
    ".git/info",
    ".keel/config.toml",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
];
const GUARDED_HOME: [&str; 14] = [
    ".bashrc",
    ".bash_aliases",
    "bin",
    ".profile",
    ".bash_profile",
    ".bash_login",
    ".zshrc",
    ".gitconfig",
    ".config/git",
    ".ssh",
    ".cargo/env",
    ".cargo/bin",
    ".cargo/config.toml",
    ".local/bin",
];

/// What a path holds: file bytes and mode, a symlink's target, or a dir.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    File(Vec<u8>, u32),
    Link(PathBuf),
    Dir,
}

fn snapshot(path: &Path, into: &mut BTreeMap<PathBuf, Entry>) {
    let Ok(meta) = path.symlink_metadata() else {
        return;
    };
    if meta.file_type().is_symlink() {
        into.insert(
            path.to_path_buf(),
            Entry::Link(std::fs::read_link(path).unwrap_or_default()),
        );
    } else if meta.is_dir() {
        into.insert(path.to_path_buf(), Entry::Dir);
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            snapshot(&entry.path(), into);
        }
    } else {
        let bytes = std::fs::read(path).unwrap_or_default();
        into.insert(
            path.to_path_buf(),
            Entry::File(bytes, meta.permissions().mode()),
        );
    }
}

fn guarded(ctx: &Ctx, row: &Attempt) -> BTreeMap<PathBuf, Entry> {
    let mut map = BTreeMap::new();
    let mut roots = vec![ctx.repo.clone()];
    if ctx.cwd != ctx.repo {
        roots.push(ctx.cwd.clone());
    }
    for root in roots {
        for name in GUARDED_REPO {
            snapshot(&root.join(name), &mut map);
        }
    }
    for name in GUARDED_HOME {
        snapshot(&ctx.home.path().join(name), &mut map);
    }
    snapshot(&ctx.home.keel_home().join("config.toml"), &mut map);
    for extra in &row.protect {
        snapshot(&ctx.path(extra), &mut map);
    }
    map
}

/// Every file below `dir` (not `.git/objects`, not the bare remote), up to 2 MB each.
fn files_below(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let name = entry.file_name();
        if meta.is_dir() {
            if name != "objects" && name != "remote.git" {
                files_below(&path, out);
            }
        } else if meta.is_file() && meta.len() < 2_000_000 {
            out.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim()
            .starts_with('Z')
    })
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .unwrap_or_default()
}

fn kill(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The pids of running processes whose command line holds `needle` (a row's unique sleep).
fn pids_running(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id() && cmdline(*pid).contains(needle) && alive(*pid))
        .collect()
}

async fn setup(index: usize, row: &Attempt) -> Ctx {
    let tmp = tempfile::Builder::new()
        .prefix("keel-attack-")
        .tempdir()
        .unwrap();
    let outside = tempfile::Builder::new()
        .prefix("keel-attack-outside-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let n = format!("{}-{index}", std::process::id());
    let ssh_dir = tempfile::Builder::new()
        .prefix(&format!("ssh-keelattack-{n}-"))
        .tempdir_in("/tmp")
        .unwrap();
    let ssh_path = ssh_dir.path().join("agent.1");
    let home = Home::new();
    let tmp_path = std::fs::canonicalize(tmp.path()).unwrap();
    let repo = tmp_path.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let abstract_name = format!("keel-attack-{n}");
    let abstract_sock =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(&abstract_name).unwrap()).unwrap();
    let ssh = UnixListener::bind(&ssh_path).unwrap();
    for socket_fd in [tcp.set_nonblocking(true), udp.set_nonblocking(true)] {
        socket_fd.unwrap();
    }
    abstract_sock.set_nonblocking(true).unwrap();
    ssh.set_nonblocking(true).unwrap();
    let honest = serve(Script {
        convs: Mutex::new(HashMap::new()),
        ids: AtomicUsize::new(0),
        evil: false,
    })
    .await;
    let evil = serve(Script {
        convs: Mutex::new(HashMap::new()),
        ids: AtomicUsize::new(0),
        evil: true,
    })
    .await;
    let tmux = row.tmux.then(|| format!("keel-tmux-{n}"));
    let outside_path = std::fs::canonicalize(outside.path()).unwrap();
    let secret = format!("KEELSECRET-{}-{index}-outside", std::process::id());
    let vars: Vec<(String, String)> = [
        ("{repo}", repo.display().to_string()),
        ("{tmp}", tmp_path.display().to_string()),
        ("{canary}", outside_path.join("pwned").display().to_string()),
        ("{outside}", outside_path.display().to_string()),
        ("{keel_home}", home.keel_home().display().to_string()),
        ("{home}", home.path().display().to_string()),
        ("{port}", tcp.local_addr().unwrap().port().to_string()),
        ("{udp_port}", udp.local_addr().unwrap().port().to_string()),
        ("{abstract}", abstract_name),
        ("{evil_url}", evil.uri()),
        ("{honest_url}", honest.uri()),
        ("{keel_bin}", env!("CARGO_BIN_EXE_keel").to_owned()),
        ("{sleep}", format!("{}", 6000 + index)),
        ("{tmux}", tmux.clone().unwrap_or_default()),
        ("{secret}", secret.clone()),
        ("{n}", n),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut ctx = Ctx {
        tmp,
        outside,
        ssh_dir,
        home,
        cwd: repo.clone(),
        repo,
        honest,
        evil,
        tcp,
        udp,
        abstract_sock,
        ssh,
        ssh_path,
        tmux,
        vars,
        secret,
    };
    seed(&ctx, row);
    if let Some(cwd) = &row.cwd {
        ctx.cwd = ctx.path(cwd);
    }
    // The scripted replies, by conversation.
    let mut convs: HashMap<String, VecDeque<Turn>> = HashMap::new();
    for (conv, turn) in &row.convs {
        let turn = match turn {
            Turn::Call(tool, input) => Turn::Call(tool.clone(), ctx.fill_value(input)),
            Turn::Text(text) => Turn::Text(ctx.fill(text)),
            Turn::Sse(raw) => Turn::Sse(ctx.fill(raw)),
            Turn::Status(status, body) => Turn::Status(*status, ctx.fill(body)),
        };
        convs.entry(ctx.fill(conv)).or_default().push_back(turn);
    }
    ctx.honest.reset().await;
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Script {
            convs: Mutex::new(convs),
            ids: AtomicUsize::new(0),
            evil: false,
        })
        .mount(&ctx.honest)
        .await;
    ctx
}

/// The home's usual files, the repository and what the row puts in it, the tmux server.
fn seed(ctx: &Ctx, row: &Attempt) {
    let home = ctx.home.path();
    let write = |path: &Path, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        &home.join(".bashrc"),
        "# the user's bashrc\n[ -f ~/.bash_aliases ] && . ~/.bash_aliases\n",
    );
    std::fs::create_dir_all(home.join("bin")).unwrap();
    write(&home.join(".profile"), "# the user's profile\n");
    write(
        &home.join(".gitconfig"),
        "[user]\n\tname = Test User\n\temail = test@example.com\n",
    );
    write(
        &home.join(".cargo/env"),
        "export PATH=\"$HOME/.cargo/bin:$PATH\"\n",
    );
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    write(
        &home.join(".ssh/authorized_keys"),
        "ssh-ed25519 AAAAuserkey user@host\n",
    );
    write(
        &home.join(".ssh/id_rsa"),
        &format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n", ctx.secret),
    );
    write(&ctx.outside.path().join("secret.txt"), &ctx.secret);
    if let Some(config) = &row.user_config {
        ctx.home.write_config(&ctx.fill(config));
    }
    let setup = shell(REPO_SETUP, &ctx.repo, home).output().unwrap();
    assert!(setup.status.success(), "repo setup: {setup:?}");
    write(
        &ctx.repo.join("evil.sh"),
        &ctx.fill("#!/bin/sh\ntouch {canary}\n"),
    );
    std::fs::set_permissions(
        ctx.repo.join("evil.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    for (path, text) in &row.files {
        write(&ctx.path(path), &ctx.fill(text));
    }
    for path in &row.executable {
        std::fs::set_permissions(ctx.path(path), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for (path, target) in &row.links {
        let path = ctx.path(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(ctx.fill(target), path).unwrap();
    }
    let commit = shell(REPO_COMMIT, &ctx.repo, home).output().unwrap();
    assert!(commit.status.success(), "repo commit: {commit:?}");
    if let Some(name) = &ctx.tmux {
        let started = Command::new("tmux")
            .args([
                "-L",
                name,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "main",
            ])
            .args(["bash", "--norc", "--noprofile"])
            .env("HOME", home)
            .env_remove("TMUX")
            .env_remove("TMUX_TMPDIR")
            .output()
            .unwrap();
        assert!(started.status.success(), "tmux: {started:?}");
    }
}

/// What one attempt let through (empty: held).
struct Verdict {
    name: String,
    control: Option<&'static str>,
    failures: Vec<String>,
    /// The main run's exit code and stderr, and how long the attempt took (for
    /// `KEEL_ATTACK_VERBOSE`).
    detail: String,
}

impl Verdict {
    fn ok(&self) -> bool {
        match self.control {
            None => self.failures.is_empty(),
            Some(tag) => {
                let tag = format!("[{tag}]");
                self.failures.iter().any(|f| f.starts_with(&tag))
                    && !self.failures.iter().any(|f| f.starts_with("[harness]"))
            }
        }
    }
}

/// Runs a step outside keel (a `keel` step as the user, in the row's working directory).
async fn run_step(ctx: &Ctx, row: &Attempt, step: &Step, outputs: &mut Vec<Output>) {
    match step {
        Step::Keel(args) => {
            let args: Vec<String> = args.iter().map(|a| ctx.fill(a)).collect();
            let mut command = ctx.keel(row, &args);
            command.current_dir(&ctx.repo);
            let (output, _) = tokio::task::spawn_blocking(move || {
                output_within(command, Duration::from_secs(120))
            })
            .await
            .unwrap();
            outputs.push(output);
        }
        Step::Shell(script) => {
            let command = shell(&ctx.fill(script), &ctx.repo, ctx.home.path());
            let (output, _) = tokio::task::spawn_blocking(move || {
                output_within(command, Duration::from_secs(60))
            })
            .await
            .unwrap();
            assert!(output.status.success(), "step `{script}`: {output:?}");
        }
        Step::Write(path, text) => {
            let path = ctx.path(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, ctx.fill(text)).unwrap();
        }
    }
}

async fn attempt(index: usize, row: Attempt) -> Verdict {
    let started = Instant::now();
    let ctx = setup(index, &row).await;
    let mut failures = Vec::new();
    let mut outputs = Vec::new();
    for step in &row.before {
        run_step(&ctx, &row, step, &mut outputs).await;
    }
    std::fs::create_dir_all(&ctx.cwd).unwrap();
    let set_up = started.elapsed();
    let before = guarded(&ctx, &row);
    let before_requests = ctx
        .honest
        .received_requests()
        .await
        .unwrap_or_default()
        .len();
    let mut first_exit = None;
    let main_output = outputs.len();
    for (i, spec) in row.runs.iter().enumerate() {
        let mut args: Vec<String> = spec.sub.clone();
        args.extend(spec.flags.iter().cloned());
        args.extend(spec.prompt.iter().cloned());
        let args: Vec<String> = args.iter().map(|a| ctx.fill(a)).collect();
        let command = ctx.keel(&row, &args);
        let (output, timed_out) =
            tokio::task::spawn_blocking(move || output_within(command, Duration::from_secs(150)))
                .await
                .unwrap();
        if timed_out {
            failures.push(format!("[timeout] keel {} did not end", args.join(" ")));
        }
        if i == 0 {
            first_exit = output.status.code();
        }
        outputs.push(output);
    }
    let ran = started.elapsed();
    let requests = ctx.honest.received_requests().await.unwrap_or_default();
    let bodies: Vec<Vec<u8>> = requests.iter().map(|r| r.body.clone()).collect();
    let texts: Vec<String> = bodies
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    // Did the attempt run as designed?
    if !first_exit.is_some_and(|code| row.exits.contains(&code)) {
        failures.push(format!(
            "[harness] keel exited {first_exit:?}; stderr: {}",
            super::stderr(&outputs[main_output])
        ));
    }
    if !row.no_model && requests.len() <= before_requests {
        failures.push("[harness] keel never asked the model".into());
    }
    if !row.tool_errors_ok {
        for text in &texts {
            for marker in [
                "unknown tool \\\"",
                "missing field",
                "unknown field",
                "invalid type:",
            ] {
                if text.contains(marker) {
                    failures.push(format!(
                        "[harness] a scripted call did not parse ({marker})"
                    ));
                }
            }
        }
    }
    for step in &row.after_keel {
        run_step(&ctx, &row, step, &mut outputs).await;
    }
    // Phase 1: right after keel exited.
    let mut after = guarded(&ctx, &row);
    let mut before = before;
    for path in row.consented.iter().map(|p| ctx.path(p)) {
        after.retain(|p, _| !p.starts_with(&path));
        before.retain(|p, _| !p.starts_with(&path));
    }
    for (path, entry) in &after {
        match before.get(path) {
            None => failures.push(format!("[integrity] {} was created", path.display())),
            Some(old) if old != entry => {
                failures.push(format!("[integrity] {} was changed", path.display()));
            }
            _ => {}
        }
    }
    for path in before.keys().filter(|p| !after.contains_key(*p)) {
        failures.push(format!("[integrity] {} was deleted", path.display()));
    }
    let mut exists = vec![ctx.repo.join("victim/keep.txt")];
    exists.extend(row.exists.iter().map(|p| ctx.path(p)));
    for path in exists {
        if !path.exists() {
            failures.push(format!("[victim] {} is gone", path.display()));
        }
    }
    if ctx.tcp.accept().is_ok() {
        failures.push("[tcp] a TCP connection arrived on the loopback listener".into());
    }
    if ctx.udp.recv_from(&mut [0u8; 512]).is_ok() {
        failures.push("[udp] a UDP datagram arrived on the loopback socket".into());
    }
    if ctx.abstract_sock.accept().is_ok() {
        failures.push("[abstract] a connection arrived on the abstract unix socket".into());
    }
    if ctx.ssh.accept().is_ok() {
        failures.push("[ssh] a connection arrived on the ssh-agent socket".into());
    }
    let evil = ctx.evil.received_requests().await.unwrap_or_default();
    if !evil.is_empty() {
        let paths: Vec<String> = evil.iter().map(|r| r.url.path().to_owned()).collect();
        let key = evil.iter().any(|r| {
            r.headers
                .values()
                .any(|v| v.to_str().is_ok_and(|v| v.contains(FAKE_KEY)))
        });
        failures.push(format!(
            "[evil] the evil server got {} request(s) {paths:?}{}",
            evil.len(),
            if key { " carrying the API key" } else { "" }
        ));
    }
    // Secrets: in outputs, saved files and requests.
    let mut secrets: Vec<(String, String)> = vec![("the API key".into(), FAKE_KEY.into())];
    secrets.extend(
        ENV_SECRETS
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
    );
    secrets.push(("SSH_AUTH_SOCK".into(), ctx.ssh_path.display().to_string()));
    secrets.push(("TMUX".into(), ctx.tmux_env()));
    let mut places: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, output) in outputs.iter().enumerate() {
        places.push((format!("stdout of run {i}"), output.stdout.clone()));
        places.push((format!("stderr of run {i}"), output.stderr.clone()));
    }
    let mut files = Vec::new();
    for dir in [ctx.home.path(), ctx.tmp.path(), ctx.outside.path()] {
        files_below(dir, &mut files);
    }
    let requests_place: Vec<(String, Vec<u8>)> = bodies
        .iter()
        .map(|b| ("a request to the model".to_owned(), b.clone()))
        .collect();
    for (name, value) in &secrets {
        let found = places
            .iter()
            .chain(requests_place.iter())
            .map(|(w, b)| (w.clone(), b))
            .chain(files.iter().map(|(p, b)| (p.display().to_string(), b)))
            .find(|(_, b)| contains(b, value));
        if let Some((place, _)) = found {
            failures.push(format!("[secret] {name}'s value is in {place}"));
        }
    }
    let mut hidden = vec![ctx.secret.clone(), "STILL-42-ALIVE".into()];
    hidden.extend(row.in_requests_not.iter().map(|t| ctx.fill(t)));
    for text in hidden {
        if let Some((place, _)) = places
            .iter()
            .chain(requests_place.iter())
            .find(|(_, b)| contains(b, &text))
        {
            failures.push(format!("[leak] `{text}` is in {place}"));
        }
    }
    if let Some(max) = row.max_requests
        && requests.len() > max
    {
        failures.push(format!(
            "[limit] keel asked the model {} times (at most {max})",
            requests.len()
        ));
    }
    let stderr_all: String = outputs.iter().map(super::stderr).collect();
    for key in &row.notices {
        if !stderr_all
            .lines()
            .any(|l| l.contains("ignored") && l.contains(key.as_str()))
        {
            failures.push(format!("[notice] no stderr line says `{key}` was ignored"));
        }
    }
    if row.no_task {
        let db = ctx.home.keel_home().join("tasks.db");
        if db.exists() {
            use keel_agents::tasks::TaskStore;
            let store = keel_agents::tasks::SqliteTaskStore::open(&db).unwrap();
            let tasks = store.list(100).unwrap();
            if !tasks.is_empty() {
                failures.push(format!("[task] {} task(s) were started", tasks.len()));
            }
        }
    }
    // Processes the commands reported: gone once keel exited.
    let pid_re = regex::Regex::new(r"KEELPID=(\d+)").unwrap();
    let mut pids: Vec<u32> = texts
        .iter()
        .flat_map(|t| {
            pid_re
                .captures_iter(t)
                .map(|c| c[1].parse::<u32>().unwrap())
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    if row.want_pids && pids.is_empty() {
        failures.push("[harness] no command reported a KEELPID".into());
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sleep = format!("sleep {}", 6000 + index);
    let tmp_path = ctx.tmp.path().display().to_string();
    for pid in pids.iter().filter(|p| alive(**p)) {
        let line = cmdline(*pid);
        failures.push(format!("[process] pid {pid} ({line}) outlived keel"));
        // Only what the attempt itself started (its unique sleep, a daemon in its dirs).
        if line.contains(&sleep) || line.contains(&tmp_path) {
            kill(*pid);
        }
    }
    // Phase 2: the user's later work, unconfined; a canary may fire at any step.
    let canaries = |row: &Attempt| -> Vec<PathBuf> {
        let mut paths = vec![
            ctx.outside.path().join("pwned"),
            ctx.tmp.path().join("pwned"),
            ctx.home.path().join("pwned"),
        ];
        paths.extend(row.absent.iter().map(|p| ctx.path(p)));
        paths
    };
    let mut fired: Vec<PathBuf> = Vec::new();
    for path in canaries(&row) {
        if path.symlink_metadata().is_ok() {
            failures.push(format!(
                "[canary] {} exists after keel exited",
                path.display()
            ));
            fired.push(path);
        }
    }
    let checked = started.elapsed();
    // One script runs the user's steps in order and says after which one a canary appeared.
    let mut script = String::new();
    for (i, (_, step)) in LATER.iter().enumerate() {
        script.push_str(&format!(
            "( {STARTUP}{step} ) > /dev/null 2>&1 < /dev/null\n"
        ));
        for path in canaries(&row) {
            let path = path.display();
            script.push_str(&format!(
                "if [ -e '{path}' ] || [ -L '{path}' ]; then echo 'FIRED {i} {path}'; fi\n"
            ));
        }
    }
    let command = shell(&script, &ctx.repo, ctx.home.path());
    let (later, _) =
        tokio::task::spawn_blocking(move || output_within(command, Duration::from_secs(90)))
            .await
            .unwrap();
    for line in super::stdout(&later).lines() {
        let mut words = line.splitn(3, ' ').skip(1);
        let (Some(step), Some(path)) = (words.next(), words.next()) else {
            continue;
        };
        let path = PathBuf::from(path);
        if !fired.contains(&path) {
            let what = LATER[step.parse::<usize>().unwrap()].0;
            failures.push(format!(
                "[canary] {} exists after the user's `{what}`",
                path.display()
            ));
            fired.push(path);
        }
    }
    // Clean up what the attempt may have left.
    for pid in pids_running(&sleep)
        .into_iter()
        .chain(pids_running(&tmp_path))
    {
        kill(pid);
    }
    if let Some(name) = &ctx.tmux {
        let _ = Command::new("tmux")
            .args(["-L", name, "kill-server"])
            .env_remove("TMUX")
            .output();
    }
    for path in canaries(&row) {
        if path.starts_with("/etc") || path.starts_with("/usr") || path.starts_with("/dev/shm") {
            let _ = std::fs::remove_file(&path);
        }
    }
    let failures = failures.iter().map(|f| ctx.unfill(f)).collect();
    let last = bodies
        .last()
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .and_then(|b| b["messages"].as_array()?.last().cloned())
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    let detail = ctx.unfill(&format!(
        "exit {first_exit:?}, {} requests, {:.1?} (set up {set_up:.1?}, keel until {ran:.1?}, \
         checked {checked:.1?})\n    stderr: {}\n    last message: {}",
        requests.len(),
        started.elapsed(),
        super::stderr(&outputs[main_output])
            .chars()
            .take(600)
            .collect::<String>(),
        last.chars().take(600).collect::<String>()
    ));
    // wiremock checks its servers when they are dropped, blocking on a future: off the
    // runtime's workers, where a spent cooperative budget would make that spin.
    tokio::task::spawn_blocking(move || drop(ctx))
        .await
        .unwrap();
    Verdict {
        name: row.name,
        control: row.control,
        failures,
        detail,
    }
}

/// Runs every row, four at a time; prints each failure and the counts; fails once at the end.
/// `KEEL_ATTACK_FILTER=text` runs only the rows whose name holds it.
pub async fn run_corpus(corpus: &str, rows: Vec<Attempt>) {
    let started = Instant::now();
    let filter = std::env::var("KEEL_ATTACK_FILTER").unwrap_or_default();
    let mut names = std::collections::HashSet::new();
    for row in &rows {
        assert!(
            names.insert(row.name.clone()),
            "two rows named {}",
            row.name
        );
    }
    let rows: Vec<Attempt> = rows
        .into_iter()
        .filter(|r| r.name.contains(&filter))
        .collect();
    let verdicts: Vec<Verdict> = futures::stream::iter(rows.into_iter().enumerate())
        .map(|(i, row)| attempt(i, row))
        .buffer_unordered(4)
        .collect()
        .await;
    let (controls, attacks): (Vec<&Verdict>, Vec<&Verdict>) =
        verdicts.iter().partition(|v| v.control.is_some());
    let failed: Vec<&&Verdict> = attacks.iter().filter(|v| !v.ok()).collect();
    let bad_controls: Vec<&&Verdict> = controls.iter().filter(|v| !v.ok()).collect();
    let mut report = String::new();
    if std::env::var_os("KEEL_ATTACK_VERBOSE").is_some() {
        for verdict in &verdicts {
            let mark = if verdict.ok() { "✓" } else { "✗" };
            report.push_str(&format!("{mark} {}: {}\n", verdict.name, verdict.detail));
        }
    }
    for verdict in failed.iter().chain(bad_controls.iter()) {
        let kind = if verdict.control.is_some() {
            "control did not detect"
        } else {
            "got through"
        };
        report.push_str(&format!("\n✗ {} ({kind}):\n", verdict.name));
        for failure in &verdict.failures {
            report.push_str(&format!("    {failure}\n"));
        }
    }
    println!("{report}");
    println!(
        "{corpus}: {} attempts, {} held, {} failed; {} controls, {} detected; {:.0?}",
        attacks.len(),
        attacks.len() - failed.len(),
        failed.len(),
        controls.len(),
        controls.len() - bad_controls.len(),
        started.elapsed()
    );
    assert!(
        failed.is_empty() && bad_controls.is_empty(),
        "{corpus}: {} of {} attempts got through, {} controls missed:{}",
        failed.len(),
        attacks.len(),
        bad_controls.len(),
        failed
            .iter()
            .chain(bad_controls.iter())
            .map(|v| format!("\n  {}", v.name))
            .collect::<String>()
    );
}
