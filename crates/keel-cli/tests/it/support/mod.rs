//! Helpers for running the built `keel` binary against wiremock in temporary repositories.

// Test helpers: a setup failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub(crate) mod acp;
pub(crate) mod attack;
pub(crate) mod pty;

use tempfile::TempDir;

/// The environment variables keel reads; cleared for every run so the host's never leak in.
pub(crate) const KEEL_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "KEEL_PROVIDER",
    "KEEL_MODEL",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "KEEL_HOME",
    "KEEL_LOG",
    "NO_COLOR",
    "CLAUDE_CONFIG_DIR",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_CUSTOM_HEADERS",
];

/// A fake key: what it looks like matters (it must never be printed), not what it opens.
pub(crate) const FAKE_KEY: &str = "sk-ant-test-0123456789secret";

/// A home for one test: `$HOME` and `$KEEL_HOME` in a temp dir.
pub(crate) struct Home {
    dir: TempDir,
}

impl Home {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("keel")).unwrap();
        Self { dir }
    }

    /// `$HOME`.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `$KEEL_HOME`.
    pub(crate) fn keel_home(&self) -> PathBuf {
        self.dir.path().join("keel")
    }

    /// Writes `$KEEL_HOME/config.toml`.
    pub(crate) fn write_config(&self, text: &str) {
        std::fs::write(self.keel_home().join("config.toml"), text).unwrap();
    }

    /// `keel` with a clean environment: this home, no provider variables, git identity
    /// from the test repo.
    pub(crate) fn keel(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_keel"));
        for var in KEEL_VARS {
            command.env_remove(var);
        }
        command
            .env("HOME", self.path())
            .env("KEEL_HOME", self.keel_home())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        command
    }

    /// `keel` talking to `server` as an Anthropic provider.
    pub(crate) fn keel_anthropic(&self, server: &wiremock::MockServer) -> Command {
        let mut command = self.keel();
        command
            .env("ANTHROPIC_API_KEY", FAKE_KEY)
            .env("ANTHROPIC_BASE_URL", server.uri());
        command
    }

    /// `keel` talking to `server` as an OpenAI-compatible provider (no key).
    pub(crate) fn keel_openai(&self, server: &wiremock::MockServer) -> Command {
        let mut command = self.keel();
        command.env("OPENAI_BASE_URL", format!("{}/v1", server.uri()));
        command
    }
}

/// Runs `command` off the async runtime (the mock server keeps serving meanwhile).
pub(crate) async fn run(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) use keel_test_support::mock::{
    serve_anthropic_replies as anthropic_server, serve_openai_replies as openai_server,
};
pub(crate) use keel_test_support::scripted::{text_reply as text, tool_reply as tool_call};

/// A session id as keel makes them: a UUID v7.
pub(crate) const SESSION_ID: &str =
    r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}";

/// Replaces what changes from run to run (session ids, durations, temp paths) so output can
/// be snapshotted.
pub(crate) fn redact(text: &str, paths: &[(&Path, &str)]) -> String {
    let mut out = text.to_owned();
    for (path, name) in paths {
        out = out.replace(&path.display().to_string(), name);
    }
    // A `stream-json` line's own id, then session ids (UUIDs v7, like line ids).
    let line_id = regex::Regex::new(&format!(r#""uuid":"{SESSION_ID}""#)).unwrap();
    let out = line_id.replace_all(&out, r#""uuid":"[uuid]""#);
    let id = regex::Regex::new(SESSION_ID).unwrap();
    let out = id.replace_all(&out, "[session-id]");
    let stamp = regex::Regex::new(r#""timestamp":"[0-9T:.Z-]+""#).unwrap();
    let out = stamp.replace_all(&out, r#""timestamp":"[time]""#);
    let ms = regex::Regex::new(r#""duration(_api)?_ms":\d+"#).unwrap();
    let out = ms.replace_all(&out, r#""duration${1}_ms":"[ms]""#);
    let took = regex::Regex::new(r"· \d+(\.\d+)? (ms|s)").unwrap();
    let out = took.replace_all(&out, "· [time]");
    // The line after a turn starts with its duration.
    let turn = regex::Regex::new(r"(?m)^\d+(\.\d+)? (ms|s) ·").unwrap();
    turn.replace_all(&out, "[time] ·").into_owned()
}

/// Whether process `pid` runs (a zombie has exited: it does not count).
pub(crate) fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim()
            .starts_with('Z')
    })
}

/// A server whose first Anthropic reply comes after `delay` (a model that thinks), and whose
/// second comes at once.
pub(crate) async fn slow_then(
    first: &keel::provider::ToolUseResponse,
    delay: std::time::Duration,
    second: &keel::provider::ToolUseResponse,
) -> wiremock::MockServer {
    use keel_test_support::mock::sse_response;
    use keel_test_support::render::anthropic_sse;
    use wiremock::matchers::{method, path};
    let server = wiremock::MockServer::start().await;
    for (reply, wait) in [(first, delay), (second, std::time::Duration::ZERO)] {
        wiremock::Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(sse_response(anthropic_sse(reply)).set_delay(wait))
            .up_to_n_times(1)
            .mount(&server)
            .await;
    }
    server
}

/// Runs blocking terminal work while the mock server keeps serving (on the test runtime's
/// other worker thread).
pub(crate) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(work)
}

/// Waits, from blocking code, until `server` has received a request (at most 5 s); whether
/// it did.
pub(crate) fn wait_for_request(
    server: &wiremock::MockServer,
    runtime: &tokio::runtime::Handle,
) -> bool {
    (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(25));
        runtime
            .block_on(server.received_requests())
            .is_some_and(|requests| !requests.is_empty())
    })
}
