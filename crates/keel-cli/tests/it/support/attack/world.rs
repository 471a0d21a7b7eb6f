//! One attempt's world: its temp dirs, home, repository, mock servers, listeners and tmux
//! server; how keel and the user's own commands are run in it.

use std::collections::{HashMap, VecDeque};
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

use keel_test_support::render::{anthropic_sse, openai_sse};
use keel_test_support::scripted::{text_reply, tool_reply};
use serde_json::Value;
use tempfile::TempDir;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::super::{FAKE_KEY, Home};
use super::{Attempt, ENV_SECRETS, Step, Turn};

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

fn render(openai: bool, reply: &keel::provider::ToolUseResponse) -> String {
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
pub(super) struct Ctx {
    pub(super) tmp: TempDir,
    pub(super) outside: TempDir,
    /// Holds the ssh-agent socket's directory (`ssh_path`) for as long as the attempt.
    pub(super) _ssh_dir: TempDir,
    pub(super) home: Home,
    pub(super) repo: PathBuf,
    pub(super) cwd: PathBuf,
    pub(super) honest: MockServer,
    pub(super) evil: MockServer,
    pub(super) tcp: TcpListener,
    pub(super) udp: UdpSocket,
    pub(super) abstract_sock: UnixListener,
    pub(super) ssh: UnixListener,
    pub(super) ssh_path: PathBuf,
    pub(super) tmux: Option<String>,
    pub(super) vars: Vec<(String, String)>,
    pub(super) secret: String,
}

impl Ctx {
    pub(super) fn fill(&self, text: &str) -> String {
        self.vars
            .iter()
            .fold(text.to_owned(), |t, (k, v)| t.replace(k.as_str(), v))
    }

    pub(super) fn fill_value(&self, value: &Value) -> Value {
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
    pub(super) fn path(&self, text: &str) -> PathBuf {
        let filled = self.fill(text);
        if filled.starts_with('/') {
            PathBuf::from(filled)
        } else {
            self.repo.join(filled)
        }
    }

    /// Readable text: the attempt's paths put back as placeholders.
    pub(super) fn unfill(&self, text: &str) -> String {
        let mut vars: Vec<&(String, String)> =
            self.vars.iter().filter(|(_, v)| v.len() > 8).collect();
        vars.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        vars.iter()
            .fold(text.to_owned(), |t, (k, v)| t.replace(v.as_str(), k))
    }

    pub(super) fn keel(&self, row: &Attempt, args: &[String]) -> Command {
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

    pub(super) fn tmux_env(&self) -> String {
        match &self.tmux {
            Some(name) => format!("/tmp/tmux-0/{name},1,0"),
            None => "/tmp/tmux-0/keelcanary-notmux-0009,1,0".into(),
        }
    }
}

/// Runs `command` (in its own process group) to its end, or kills the group after `limit`.
pub(super) fn output_within(mut command: Command, limit: Duration) -> (Output, bool) {
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

pub(super) fn shell(script: &str, dir: &Path, home: &Path) -> Command {
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
pub(super) const LATER: [(&str, &str); 7] = [
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
pub(super) const STARTUP: &str = "for f in .profile .bash_profile .bashrc .cargo/env; do \
    [ -f \"$HOME/$f\" ] && . \"$HOME/$f\"; done >/dev/null 2>&1; ";

const REPO_SETUP: &str = "set -e; git init -q -b main . && git config user.name 'Test User' \
    && git config user.email test@example.com && printf '# test\\n' > README.md \
    && mkdir -p victim && printf 'keep\\n' > victim/keep.txt";
const REPO_COMMIT: &str = "set -e; git add -A && git commit -qm initial \
    && git init -q --bare ../remote.git && git remote add origin ../remote.git";

pub(super) fn alive(pid: u32) -> bool {
    super::super::process_alive(pid)
}

pub(super) fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .unwrap_or_default()
}

pub(super) fn kill(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The pids of running processes whose command line holds `needle` (a row's unique sleep).
pub(super) fn pids_running(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id() && cmdline(*pid).contains(needle) && alive(*pid))
        .collect()
}

/// The world of attempt `index` (numbering its sockets, sleeps and secret; unique in this
/// process), set up for `row`.
pub(super) async fn set_up(index: usize, row: &Attempt) -> Ctx {
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
        _ssh_dir: ssh_dir,
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

/// Runs a step outside keel (a `keel` step as the user, in the row's working directory).
pub(super) async fn run_step(ctx: &Ctx, row: &Attempt, step: &Step, outputs: &mut Vec<Output>) {
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
