//! `run_command`: runs a shell command in the workspace, confined by the kernel.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use rustix::process::{Pid, PidfdFlags, Signal};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use crate::classify::classify;
use crate::confine::{self, Confinement};
use crate::policy::{SandboxMode, SandboxPolicy};

/// Bytes kept from the start of the output.
const HEAD_BYTES: usize = 14_000;
/// Bytes kept from the end of the output.
const TAIL_BYTES: usize = 14_000;
/// How far from a cut a line break is looked for, so cuts fall between lines.
const LINE_SLACK: usize = 400;
/// The environment variable that marks every process a call starts, so processes that left
/// its process group can still be found and killed.
const MARKER_VAR: &str = "KEEL_RUN_ID";
/// After `bash` exits and the rest of its group is killed: how long to wait for the output
/// pipe to close before looking for processes that escaped the group.
const SETTLE: Duration = Duration::from_millis(100);
/// After killing: how long to keep reading output before giving up on the pipe.
const DRAIN: Duration = Duration::from_millis(500);
/// Added to the longest command timeout for the registry's own timeout, so this tool's
/// timeout handling (which kills the processes and reports) runs first.
const REGISTRY_SLACK: Duration = Duration::from_secs(30);
/// How often progress lines are reported at most.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Makes markers unique within the process.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// The arguments of `run_command`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct RunCommandArgs {
    /// The command line, run with `bash -c` in the workspace root.
    pub command: String,
    /// Seconds before the command and all it started are killed (default and maximum: see above).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// The `run_command` tool: runs `bash -c <command>` in the workspace root and returns its
/// output and exit status.
///
/// - **Confined.** The command runs under the [`SandboxPolicy`], enforced by the kernel
///   with Landlock (see [`SandboxMode`]); what the kernel cannot enforce is stated in the
///   result.
/// - **One stream.** stdout and stderr go to one pipe, so their lines interleave in the
///   order they were written. stdin is `/dev/null`.
/// - **Nothing outlives the call.** The command runs in a new session (its own process
///   group, no controlling terminal). When it exits, times out, is cancelled, or the call's
///   future is dropped, its whole process group is killed with `SIGKILL`, and so are
///   processes that left the group but carry the call's `KEEL_RUN_ID` environment marker.
/// - **Bounded output.** Only the first and last 14,000 bytes are kept, with a marker saying
///   how much was left out, however much the command prints.
/// - **No credentials.** Environment variables whose names end in `API_KEY`, `APIKEY`,
///   `_TOKEN`, `_SECRET`, `SECRET_KEY`, `ACCESS_KEY`, `PASSWORD` or `_CREDENTIALS` (any case)
///   are removed from the command's environment.
/// - **Timeouts.** `timeout_secs` defaults to the policy's `default_command_timeout`; more
///   than `max_command_timeout` is cut to it, and the result says so.
///
/// A command that exits with a status other than 0, is killed, or times out gives an error
/// result (`is_error`); its text ends with `[exit code N]` or `[killed by signal N (...)]`.
/// The metadata holds `exit_code`, `signal`, `timed_out`, `cancelled`, `duration_ms`,
/// `confined`, `landlock_abi`, `network_blocked`, `output_bytes`, `omitted_bytes` and
/// `timeout_secs`. Its [effect](Tool::effect) is [`classify`] of the command.
#[derive(Debug, Clone)]
pub struct RunCommand {
    root: PathBuf,
    policy: SandboxPolicy,
    description: String,
}

impl RunCommand {
    /// A `run_command` tool running commands in `root` (usually
    /// [`PathSandbox::root`](crate::PathSandbox::root)) under `policy`.
    pub fn new(root: impl Into<PathBuf>, policy: SandboxPolicy) -> Self {
        let root = root.into();
        let root = std::path::absolute(&root).unwrap_or(root);
        let description = describe(&policy);
        Self {
            root,
            policy,
            description,
        }
    }

    /// Where commands run.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The policy commands run under.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// The timeout for a call asking for `asked` seconds, and a note if it was cut.
    fn timeout_for(&self, asked: Option<u64>) -> Result<(Duration, Option<String>), ToolError> {
        let max = self.policy.max_command_timeout;
        let Some(secs) = asked else {
            return Ok((self.policy.default_command_timeout.min(max), None));
        };
        if secs == 0 {
            return Err(ToolError::InvalidArguments(
                "timeout_secs must be at least 1".to_owned(),
            ));
        }
        let asked = Duration::from_secs(secs);
        if asked > max {
            let note = format!(
                "timeout_secs {secs} is more than the maximum of {}s, so the command ran with \
                 {}s",
                max.as_secs(),
                max.as_secs()
            );
            return Ok((max, Some(note)));
        }
        Ok((asked, None))
    }
}

fn describe(policy: &SandboxPolicy) -> String {
    let sandbox = match policy.mode {
        SandboxMode::WorkspaceWrite => {
            " Sandbox: the command may write only inside the workspace and the temp dir."
        }
        SandboxMode::ReadOnly => " Sandbox: read-only; the command cannot write files.",
        SandboxMode::FullAccess => "",
    };
    let network = if policy.network || policy.mode == SandboxMode::FullAccess {
        ""
    } else {
        " Network access is blocked."
    };
    format!(
        "Runs a shell command with `bash -c` in the workspace root and returns its output \
         (stdout and stderr interleaved, in order) and its exit code. stdin is empty, so \
         commands must not wait for input; use non-interactive flags. Background processes \
         are stopped when the command ends. The command is killed after {}s unless \
         timeout_secs says otherwise (at most {}s). Long output keeps only its beginning and \
         end: filter it (grep, head, tail) or redirect it to a file and read that.{sandbox}\
         {network}",
        policy.default_command_timeout.as_secs(),
        policy.max_command_timeout.as_secs(),
    )
}

impl Tool for RunCommand {
    type Args = RunCommandArgs;
    const NAME: &'static str = "run_command";

    fn description(&self) -> &str {
        &self.description
    }

    fn effect(&self, args: &RunCommandArgs) -> Effect {
        classify(&args.command)
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.policy.max_command_timeout + REGISTRY_SLACK)
    }

    async fn call(&self, args: RunCommandArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.command.trim().is_empty() {
            return Err(ToolError::InvalidArguments(
                "command is empty; give the shell command to run".to_owned(),
            ));
        }
        let (timeout, timeout_note) = self.timeout_for(args.timeout_secs)?;
        if !self.root.is_dir() {
            return Err(ToolError::NotFound(format!(
                "the workspace root {} is not a directory",
                self.root.display()
            )));
        }
        let confinement = confine::prepare(&self.root, &self.policy)?;
        let started = Instant::now();
        let running = spawn(&self.root, &args.command, &confinement)?;
        let finished = supervise(running, timeout, ctx).await?;
        let mut notes: Vec<String> = timeout_note.into_iter().collect();
        notes.extend(confinement.notes.iter().cloned());
        Ok(report(
            &finished,
            &confinement,
            timeout,
            started.elapsed(),
            &notes,
        ))
    }
}

/// A spawned command: `bash`, the read end of its output pipe, and its process group.
struct Running {
    child: tokio::process::Child,
    output: pipe::Receiver,
    group: ProcessGroup,
}

fn spawn(root: &Path, command: &str, confinement: &Confinement) -> Result<Running, ToolError> {
    let (reader, writer) =
        std::io::pipe().map_err(|err| ToolError::io("creating the output pipe", err))?;
    let writer_too = writer
        .try_clone()
        .map_err(|err| ToolError::io("creating the output pipe", err))?;
    let marker = format!(
        "{}-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos())
    );
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer_too)
        .kill_on_drop(true)
        .env(MARKER_VAR, &marker);
    for (name, _) in std::env::vars_os() {
        if is_secret(&name) {
            cmd.env_remove(&name);
        }
    }
    confinement.apply(&mut cmd);
    let spawned = cmd.spawn();
    // The command holds our copies of the pipe's write end: drop them, or the pipe never
    // reports end-of-file.
    drop(cmd);
    let child = spawned.map_err(|err| {
        let what = if confinement.confined() {
            "could not start the command in its sandbox"
        } else {
            "could not start the command"
        };
        ToolError::Failed(format!("{what}: bash: {err}"))
    })?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
        .ok_or_else(|| ToolError::failed("the command exited before it could be watched"))?;
    let group = ProcessGroup {
        pgid,
        marker,
        settled: false,
    };
    let output = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|err| ToolError::io("reading the command's output", err))?;
    Ok(Running {
        child,
        output,
        group,
    })
}

/// Whether environment variable `name` looks like a credential.
fn is_secret(name: &OsStr) -> bool {
    const SUFFIXES: [&str; 8] = [
        "API_KEY",
        "APIKEY",
        "_TOKEN",
        "_SECRET",
        "SECRET_KEY",
        "ACCESS_KEY",
        "PASSWORD",
        "_CREDENTIALS",
    ];
    let name = name.to_string_lossy().to_ascii_uppercase();
    SUFFIXES.iter().any(|suffix| name.ends_with(suffix))
}

/// The processes of one call: its process group, and its marker for those that left it.
/// Dropping it kills them all, so a dropped call leaves nothing running.
struct ProcessGroup {
    pgid: Pid,
    marker: String,
    /// Set once everything is known to be gone; dropping then does nothing.
    settled: bool,
}

impl ProcessGroup {
    /// Kills every process in the group.
    fn kill(&self) {
        // ESRCH (nobody left) is the expected answer once the command is done.
        let _ = rustix::process::kill_process_group(self.pgid, Signal::KILL);
    }

    /// Kills the processes that carry the marker but left the group; returns how many.
    fn kill_escaped(&self) -> usize {
        kill_marked(&format!("{MARKER_VAR}={}", self.marker))
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !self.settled {
            self.kill();
            self.kill_escaped();
        }
    }
}

/// Kills every process whose environment holds the variable `needle` (`NAME=value`).
fn kill_marked(needle: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let own = std::process::id();
    let mut killed = 0;
    for entry in entries.flatten() {
        let Some(raw) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if raw == own || !environ_has(raw, needle) {
            continue;
        }
        // Pin the process with a pidfd, check it is still the one that matched (the pid may
        // have been reused), and signal it through the pidfd.
        let Some(pid) = i32::try_from(raw).ok().and_then(Pid::from_raw) else {
            continue;
        };
        let Ok(pidfd) = rustix::process::pidfd_open(pid, PidfdFlags::empty()) else {
            continue;
        };
        if environ_has(raw, needle)
            && rustix::process::pidfd_send_signal(&pidfd, Signal::KILL).is_ok()
        {
            killed += 1;
        }
    }
    if killed > 0 {
        tracing::debug!(
            killed,
            "killed processes that left the command's process group"
        );
    }
    killed
}

fn environ_has(pid: u32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        environ
            .split(|byte| *byte == 0)
            .any(|var| var == needle.as_bytes())
    })
}

/// Why the command stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Exited,
    TimedOut,
    Cancelled,
}

/// A finished command.
struct Finished {
    stop: Stop,
    status: Option<ExitStatus>,
    capture: Capture,
}

/// Reads the output until `bash` exits, the timeout passes or the call is cancelled; then
/// kills what is left and collects the rest of the output.
async fn supervise(
    mut running: Running,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<Finished, ToolError> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut capture = Capture::default();
    let mut progress = ProgressLine::default();
    let mut status = None;
    let mut eof = false;
    let sleep = tokio::time::sleep(timeout);
    tokio::pin!(sleep);
    let stop = loop {
        if status.is_some() {
            break Stop::Exited;
        }
        tokio::select! {
            biased;
            () = ctx.cancel().cancelled() => break Stop::Cancelled,
            () = &mut sleep => break Stop::TimedOut,
            read = running.output.read(&mut buf), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => {
                    capture.push(&buf[..n]);
                    progress.update(ctx, &buf[..n]);
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => {
                    tracing::warn!(error = %err, "reading a command's output failed");
                    eof = true;
                }
            },
            waited = running.child.wait() => match waited {
                Ok(exit) => status = Some(exit),
                Err(err) => return Err(ToolError::io("waiting for the command", err)),
            },
        }
    };
    // Whatever is left of the group goes: background jobs, or everything on a timeout.
    running.group.kill();
    if stop == Stop::Exited {
        if !eof {
            eof = drain(&mut running.output, &mut capture, &mut buf, SETTLE).await;
        }
        if !eof {
            // Someone outside the group still holds the pipe: a process that escaped it.
            running.group.kill_escaped();
            drain(&mut running.output, &mut capture, &mut buf, DRAIN).await;
        }
    } else {
        running.group.kill_escaped();
        if !eof {
            drain(&mut running.output, &mut capture, &mut buf, DRAIN).await;
        }
        if let Ok(Ok(exit)) = tokio::time::timeout(DRAIN, running.child.wait()).await {
            status = Some(exit);
        }
    }
    running.group.settled = true;
    Ok(Finished {
        stop,
        status,
        capture,
    })
}

/// Reads until end-of-file or `limit` passes; returns whether end-of-file was reached.
async fn drain(
    output: &mut pipe::Receiver,
    capture: &mut Capture,
    buf: &mut [u8],
    limit: Duration,
) -> bool {
    let until = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(until, output.read(buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) => return true,
            Ok(Ok(n)) => capture.push(&buf[..n]),
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(Err(_)) => return true,
        }
    }
}

/// The output kept: the first [`HEAD_BYTES`], and the last [`TAIL_BYTES`] in a buffer that is
/// compacted as it grows, so memory stays bounded whatever the command prints.
#[derive(Debug, Default)]
struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
}

impl Capture {
    fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let room = HEAD_BYTES.saturating_sub(self.head.len()).min(data.len());
        let (head, rest) = data.split_at(room);
        self.head.extend_from_slice(head);
        if rest.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail
                .extend_from_slice(&rest[rest.len() - TAIL_BYTES..]);
        } else if !rest.is_empty() {
            self.tail.extend_from_slice(rest);
            if self.tail.len() > 2 * TAIL_BYTES {
                self.tail.drain(..self.tail.len() - TAIL_BYTES);
            }
        }
    }

    /// The output as text, and how many bytes were left out of it.
    fn render(&self) -> (String, u64) {
        let tail = &self.tail[self.tail.len().saturating_sub(TAIL_BYTES)..];
        let kept = (self.head.len() + tail.len()) as u64;
        if kept == self.total {
            let mut all = self.head.clone();
            all.extend_from_slice(tail);
            return (String::from_utf8_lossy(&all).into_owned(), 0);
        }
        let head_from = self.head.len().saturating_sub(LINE_SLACK);
        let head_end = self.head[head_from..]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or_else(|| char_end(&self.head), |pos| head_from + pos + 1);
        let head = &self.head[..head_end];
        let tail_start = tail[..tail.len().min(LINE_SLACK)]
            .iter()
            .position(|&b| b == b'\n')
            .map_or_else(
                // No line break near the cut: start at a character boundary.
                || {
                    tail.iter()
                        .take(3)
                        .take_while(|&&b| b & 0xC0 == 0x80)
                        .count()
                },
                |pos| pos + 1,
            );
        let tail = &tail[tail_start..];
        let omitted = self.total - (head.len() + tail.len()) as u64;
        let text = format!(
            "{}\n[... {omitted} bytes omitted ({} in total); filter the output (grep, head, \
             tail) or redirect it to a file and read that in parts ...]\n{}",
            String::from_utf8_lossy(head).trim_end_matches('\n'),
            self.total,
            String::from_utf8_lossy(tail),
        );
        (text, omitted)
    }
}

/// The length of `bytes` without a character cut off at its end.
fn char_end(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let byte = bytes[len - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let needs = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needs > back { len - back } else { len };
    }
    len
}

/// Reports the latest output line as progress, at most every [`PROGRESS_EVERY`].
#[derive(Debug, Default)]
struct ProgressLine {
    last: Option<Instant>,
}

impl ProgressLine {
    fn update(&mut self, ctx: &ToolContext, data: &[u8]) {
        if self.last.is_some_and(|at| at.elapsed() < PROGRESS_EVERY) {
            return;
        }
        let trimmed = data.strip_suffix(b"\n").unwrap_or(data);
        let line = trimmed.rsplit(|&b| b == b'\n').next().unwrap_or(trimmed);
        if line.is_empty() {
            return;
        }
        let line = String::from_utf8_lossy(&line[..line.len().min(200)]);
        ctx.progress(line.trim_end().to_owned());
        self.last = Some(Instant::now());
    }
}

/// The name of a common signal.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

fn report(
    finished: &Finished,
    confinement: &Confinement,
    timeout: Duration,
    elapsed: Duration,
    notes: &[String],
) -> ToolOutput {
    let (text, omitted) = finished.capture.render();
    let mut content = if text.is_empty() {
        "(no output)".to_owned()
    } else {
        text
    };
    if !content.ends_with('\n') {
        content.push('\n');
    }
    let secs = timeout.as_secs();
    let code = finished.status.and_then(|status| status.code());
    let signal = finished.status.and_then(|status| status.signal());
    let why = match finished.stop {
        Stop::Exited => None,
        Stop::TimedOut => Some(format!("timed out after {secs}s")),
        Stop::Cancelled => Some("interrupted by the user".to_owned()),
    };
    let status_line = match (code, signal, &why) {
        (_, Some(signal), Some(why)) => format!("[killed by signal {signal} ({why})]"),
        (_, Some(signal), None) => match signal_name(signal) {
            Some(name) => format!("[killed by signal {signal} ({name})]"),
            None => format!("[killed by signal {signal}]"),
        },
        (Some(code), _, None) => format!("[exit code {code}]"),
        (Some(code), _, Some(why)) => format!("[exit code {code} ({why})]"),
        (None, None, Some(why)) => format!("[stopped ({why})]"),
        (None, None, None) => "[stopped]".to_owned(),
    };
    content.push_str(&status_line);
    content.push('\n');
    if finished.stop == Stop::TimedOut {
        content.push_str(&format!(
            "[note: the command did not finish within {secs}s, so it was killed with everything \
             it started; if it needs longer, pass a larger timeout_secs, or run it in smaller \
             steps]\n"
        ));
    }
    for note in notes {
        content.push_str(&format!("[note: {note}]\n"));
    }
    let success = finished.stop == Stop::Exited && code == Some(0);
    let metadata = json!({
        "exit_code": code,
        "signal": signal,
        "timed_out": finished.stop == Stop::TimedOut,
        "cancelled": finished.stop == Stop::Cancelled,
        "duration_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        "confined": confinement.confined(),
        "landlock_abi": confinement.abi,
        "network_blocked": confinement.network_blocked,
        "output_bytes": finished.capture.total,
        "omitted_bytes": omitted,
        "timeout_secs": secs,
    });
    let output = if success {
        ToolOutput::text(content)
    } else {
        ToolOutput::error(content)
    };
    output.with_metadata(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_everything_when_small() {
        let mut capture = Capture::default();
        capture.push(b"hello\n");
        capture.push(b"world\n");
        assert_eq!(capture.render(), ("hello\nworld\n".to_owned(), 0));
    }

    #[test]
    fn capture_keeps_head_and_tail_on_line_boundaries_with_bounded_memory() {
        let mut capture = Capture::default();
        let mut total = 0u64;
        for i in 0..200_000u32 {
            let line = format!("line {i:06}\n");
            total += line.len() as u64;
            capture.push(line.as_bytes());
            assert!(capture.tail.len() <= 2 * TAIL_BYTES);
        }
        let (text, omitted) = capture.render();
        assert!(
            text.starts_with("line 000000\nline 000001\n"),
            "{}",
            &text[..40]
        );
        assert!(text.ends_with("line 199999\n"));
        assert!(text.contains(&format!("bytes omitted ({total} in total)")));
        assert!(omitted > total - (HEAD_BYTES + TAIL_BYTES) as u64);
        assert!(text.len() < HEAD_BYTES + TAIL_BYTES + 300);
        for line in text.lines().filter(|line| line.starts_with("line")) {
            assert_eq!(line.len(), 11, "{line:?}");
        }
    }

    #[test]
    fn capture_cut_in_a_character_stays_valid_text() {
        let mut capture = Capture::default();
        // An odd offset, so both cuts fall inside a two-byte character.
        capture.push(b"a");
        capture.push("é".repeat(50_000).as_bytes());
        let (rendered, _) = capture.render();
        assert!(
            !rendered.contains('\u{FFFD}'),
            "replacement character in the output"
        );
    }

    #[test]
    fn secrets_are_recognised_by_name() {
        for name in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "openai_api_key",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "PGPASSWORD",
            "CLIENT_SECRET",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(is_secret(OsStr::new(name)), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "TOKENIZERS_PARALLELISM",
            "SSH_AUTH_SOCK",
            "KEYBOARD",
        ] {
            assert!(!is_secret(OsStr::new(name)), "{name}");
        }
    }
}
