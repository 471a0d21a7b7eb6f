//! The attack-corpus harness: every attempt is a row of data run through the real `keel` binary
//! in a temporary repository of its own, then checked to have been held.
//!
//! A row ([`Attempt`]) names the files the repository carries, the user's config and flags, the
//! scripted model's tool calls (per conversation: the user's prompt, a `code` child's task, a
//! background task's text), steps before and after keel runs, and extra checks. Strings may hold
//! placeholders: `{repo}`, `{tmp}` (the repository's parent, under `/tmp`), `{outside}` (a dir
//! under `/var/tmp`, outside every writable root), `{canary}` (`{outside}/pwned`), `{home}`,
//! `{keel_home}`, `{port}` / `{udp_port}` (loopback listeners), `{abstract}` (an abstract unix
//! socket's name), `{evil_url}` / `{honest_url}` (the mock servers), `{keel_bin}`, `{sleep}` (a
//! sleep length unique to the attempt), `{n}` (a string unique to the attempt, in its socket
//! names), `{tmux}` (a tmux server's socket name), `{secret}` (the text of
//! `{outside}/secret.txt`, also in `~/.ssh/id_rsa`).
//!
//! `KEEL_ATTACK_FILTER=text` runs only the rows whose name holds it; `KEEL_ATTACK_VERBOSE=1`
//! prints every row's exit code, stderr and last message, held or not.
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
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use futures::StreamExt;
use serde_json::{Value, json};

mod checks;
mod world;

/// Credentials and sockets in keel's environment for every attempt: no command may see them.
pub(crate) const ENV_SECRETS: [(&str, &str); 9] = [
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
pub(crate) const HI: &str = "hi";
pub(crate) const AGAIN: &str = "hi again";

/// One scripted model turn, placeholders not yet filled.
#[derive(Clone, Debug)]
pub(crate) enum Turn {
    Call(String, Value),
    Text(String),
    /// A raw event stream (an `event: error`, say).
    Sse(String),
    /// An HTTP error with this status and body.
    Status(u16, String),
}

/// Something done outside keel: before it runs, or after it and before the user's later work.
#[derive(Clone, Debug)]
pub(crate) enum Step {
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

impl RunSpec {
    /// The arguments after `keel`, placeholders not yet filled.
    fn args(&self) -> Vec<String> {
        let mut args = self.sub.clone();
        args.extend(self.flags.iter().cloned());
        args.extend(self.prompt.iter().cloned());
        args
    }
}

/// One attack attempt.
#[derive(Clone, Debug)]
pub(crate) struct Attempt {
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
    pub(crate) fn new(name: impl Into<String>) -> Self {
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
    pub(crate) fn control(mut self, tag: &'static str) -> Self {
        self.control = Some(tag);
        self
    }
    /// A file the repository carries (a path relative to it, or a placeholder path).
    pub(crate) fn file(mut self, path: &str, text: &str) -> Self {
        self.files.push((path.into(), text.into()));
        self
    }
    /// A project config file, `.keel/config.toml`.
    pub(crate) fn config(self, text: &str) -> Self {
        self.file(".keel/config.toml", text)
    }
    /// An executable file the repository carries.
    pub(crate) fn script(mut self, path: &str, text: &str) -> Self {
        self.executable.push(path.into());
        self.file(path, text)
    }
    /// A symlink `path` → `target` the repository carries.
    pub(crate) fn link(mut self, path: &str, target: &str) -> Self {
        self.links.push((path.into(), target.into()));
        self
    }
    /// `$KEEL_HOME/config.toml`.
    pub(crate) fn user_config(mut self, text: &str) -> Self {
        self.user_config = Some(text.into());
        self
    }
    pub(crate) fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
    /// Where the user runs keel (relative to the repository, or a placeholder path).
    pub(crate) fn cwd(mut self, dir: &str) -> Self {
        self.cwd = Some(dir.into());
        self
    }
    /// The user's provider is an OpenAI-compatible server (`--provider openai`).
    pub(crate) fn openai(mut self) -> Self {
        self.openai = true;
        self.flag("--provider").flag("openai")
    }
    /// A tmux server runs (socket `/tmp/tmux-0/{tmux}`) and keel runs inside it (`TMUX`).
    pub(crate) fn tmux(mut self) -> Self {
        self.tmux = true;
        self
    }
    /// A flag for the first run.
    pub(crate) fn flag(mut self, flag: &str) -> Self {
        self.runs[0].flags.push(flag.into());
        self
    }
    pub(crate) fn flags(self, flags: &[&str]) -> Self {
        flags.iter().fold(self, |row, flag| row.flag(flag))
    }
    /// The first run is `keel ARGS` (no model, unless the command asks one).
    pub(crate) fn keel(mut self, args: &[&str]) -> Self {
        self.runs[0] = RunSpec {
            sub: args.iter().map(|a| (*a).to_owned()).collect(),
            flags: Vec::new(),
            prompt: None,
        };
        self
    }
    /// A second `keel exec FLAGS "hi again"` after the first.
    pub(crate) fn again(mut self, flags: &[&str]) -> Self {
        self.runs.push(RunSpec {
            sub: vec!["exec".into()],
            flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            prompt: Some(AGAIN.into()),
        });
        self
    }
    /// A tool call the model makes in conversation `conv` (the first message's text).
    pub(crate) fn call_in(mut self, conv: &str, tool: &str, input: Value) -> Self {
        self.convs
            .push((conv.into(), Turn::Call(tool.into(), input)));
        self
    }
    /// A tool call in the first run.
    pub(crate) fn call(self, tool: &str, input: Value) -> Self {
        self.call_in(HI, tool, input)
    }
    /// `run_command` in the first run.
    pub(crate) fn run(self, command: &str) -> Self {
        self.call("run_command", json!({ "command": command }))
    }
    /// `run_command` in conversation `conv`.
    pub(crate) fn run_in(self, conv: &str, command: &str) -> Self {
        self.call_in(conv, "run_command", json!({ "command": command }))
    }
    /// A raw reply (an event stream, an HTTP error) as the next one in `conv`.
    pub(crate) fn reply_in(mut self, conv: &str, turn: Turn) -> Self {
        self.convs.push((conv.into(), turn));
        self
    }
    pub(crate) fn before(mut self, step: Step) -> Self {
        self.before.push(step);
        self
    }
    pub(crate) fn before_keel(self, args: &[&str]) -> Self {
        self.before(Step::Keel(args.iter().map(|a| (*a).to_owned()).collect()))
    }
    pub(crate) fn before_shell(self, script: &str) -> Self {
        self.before(Step::Shell(script.into()))
    }
    pub(crate) fn after_keel(mut self, step: Step) -> Self {
        self.after_keel.push(step);
        self
    }
    /// `path` must not exist after keel, nor after the user's later work.
    pub(crate) fn absent(mut self, path: &str) -> Self {
        self.absent.push(path.into());
        self
    }
    /// `path` must still exist after keel.
    pub(crate) fn exists(mut self, path: &str) -> Self {
        self.exists.push(path.into());
        self
    }
    /// `path` must be unchanged after keel (besides the built-in list).
    pub(crate) fn protect(mut self, path: &str) -> Self {
        self.protect.push(path.into());
        self
    }
    /// A guarded path the user consented to change (`-y` and a file tool writing a config
    /// file): left out of the comparison.
    pub(crate) fn consented(mut self, path: &str) -> Self {
        self.consented.push(path.into());
        self
    }
    /// `text` must appear in no request keel sent.
    pub(crate) fn not_in_requests(mut self, text: &str) -> Self {
        self.in_requests_not.push(text.into());
        self
    }
    /// stderr must name `key` as ignored.
    pub(crate) fn notice(mut self, key: &str) -> Self {
        self.notices.push(key.into());
        self
    }
    pub(crate) fn max_requests(mut self, n: usize) -> Self {
        self.max_requests = Some(n);
        self
    }
    /// No background task may have been created.
    pub(crate) fn no_task(mut self) -> Self {
        self.no_task = true;
        self
    }
    /// The commands print `KEELPID=N`; at least one must be seen.
    pub(crate) fn pids(mut self) -> Self {
        self.want_pids = true;
        self
    }
    /// Exit codes that count as "keel ran" (default 0 and 1).
    pub(crate) fn exit_codes(mut self, codes: &[i32]) -> Self {
        self.exits = codes.to_vec();
        self
    }
    /// The first run asks no model (`keel skills`, a refused config).
    pub(crate) fn no_model(mut self) -> Self {
        self.no_model = true;
        self
    }
    /// Unknown tools and unparsable arguments are expected (a tool the mode removes).
    pub(crate) fn tool_errors_ok(mut self) -> Self {
        self.tool_errors_ok = true;
        self
    }
    /// The same attempt under another name (for variants).
    pub(crate) fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Applies `f` (for variants built in loops).
    pub(crate) fn with(self, f: impl FnOnce(Self) -> Self) -> Self {
        f(self)
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

/// Attempts running at once in this process, whichever corpus they belong to: the corpora are
/// tests of one binary, which may run at the same time.
static SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// Numbers the attempts of this process across corpora: an attempt's sockets, sleep length
/// and secret are named after its number, so no two attempts share one.
static ATTEMPTS: AtomicUsize = AtomicUsize::new(0);

/// Runs every row, four at a time (four attempts in this process, with the other corpora's);
/// prints each failure and the counts; fails once at the end.
/// `KEEL_ATTACK_FILTER=text` runs only the rows whose name holds it.
pub(crate) async fn run_corpus(corpus: &str, rows: Vec<Attempt>) {
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
    let verdicts: Vec<Verdict> = futures::stream::iter(rows)
        .map(|row| async {
            let _slot = SLOTS.acquire().await.unwrap();
            checks::attempt(ATTEMPTS.fetch_add(1, Ordering::Relaxed), row).await
        })
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
