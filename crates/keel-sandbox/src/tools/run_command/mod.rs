//! `run_command`: runs a shell command in the workspace, confined by the kernel.

mod output;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel_tool::{Effect, HeadTail, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use self::output::{ProgressLine, capture, report};
use crate::classify::classify_in;
use crate::confine::CommandSandbox;
use crate::policy::{SandboxMode, SandboxPolicy};
use crate::process::GroupGuard;
use crate::reaper::{self, Call};

/// The environment variable that marks every process a call starts, so processes that left
/// its process group can still be found and killed.
const MARKER_VAR: &str = "KEEL_RUN_ID";
/// After `bash` exits and the rest of its group is killed: how long to wait for the output
/// pipe to close before looking for processes that escaped the group.
const SETTLE: Duration = Duration::from_millis(100);
/// After killing: how long to keep reading output before giving up on the pipe.
const DRAIN: Duration = Duration::from_millis(500);
/// After killing what a call left: how long to wait to reap it before leaving that to a
/// later call (a SIGKILLed process dies at once, unless the machine is very busy).
const REAP_WAIT: Duration = Duration::from_secs(2);
/// Added to the longest command timeout for the registry's own timeout, so this tool's
/// timeout handling (which kills the processes and reports) runs first.
const REGISTRY_SLACK: Duration = Duration::from_secs(30);

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
/// - **Confined.** The command runs under the [`SandboxPolicy`] through a
///   [`CommandSandbox`]: Landlock, a seccomp filter when the network is off, and where the
///   machine allows, user, mount and network namespaces in which protected paths are
///   read-only (see [`SandboxMode`] and the [`CommandSandbox`] docs); what the kernel cannot
///   enforce is stated in the result.
/// - **Protected paths are restored.** What runs later outside the sandbox (git config,
///   hooks and info files, keel's and other agents' configuration, the policy's
///   `protected_paths`) is snapshotted before the command and restored after it; the result
///   then says so in a `[note: ...]` line and lists the paths in `restored`.
/// - **A session temp dir.** `TMPDIR`, `TMP` and `TEMP` are `<scratch dir>/tmp` of the call's
///   [`ToolContext`], created `0700`; the system temp dir is not writable.
/// - **One stream.** stdout and stderr go to one pipe, so their lines interleave in the
///   order they were written. stdin is `/dev/null`.
/// - **Nothing outlives the call.** The command runs in a new session (its own process
///   group, no controlling terminal). When it exits, times out, is cancelled, or the call's
///   future is dropped, its whole process group is killed with `SIGKILL`, and so are
///   processes that left the group but carry the call's `KEEL_RUN_ID` environment marker,
///   and — when this process is a subreaper ([`reaper`](crate::reaper)) — whatever escaped
///   and was re-parented to it.
/// - **Bounded output.** Only the first and last 14,000 bytes are kept, with a marker saying
///   how much was left out, however much the command prints.
/// - **No credentials.** The environment is scrubbed by [`scrub_env`](crate::scrub_env) with
///   the policy's `hidden_env`.
/// - **Timeouts.** `timeout_secs` defaults to the policy's `default_command_timeout`; more
///   than `max_command_timeout` is cut to it, and the result says so.
///
/// A command that exits with a status other than 0, is killed, times out, or changed a
/// protected path gives an error result (`is_error`); its text ends with `[exit code N]` or
/// `[killed by signal N (...)]` and the notes. The metadata holds `exit_code`, `signal`,
/// `timed_out`, `cancelled`, `duration_ms`, `confined`, `landlock_abi`, `network_blocked`,
/// `namespaces`, `restored`, `restore_failures`, `output_bytes`, `omitted_bytes` and
/// `timeout_secs`. Its [effect](Tool::effect) is [`classify_in`] of the command in the root.
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
            " Sandbox: the command may write only inside the workspace and its temp dir \
             ($TMPDIR); changes to .git and to keel's configuration files are blocked or undone."
        }
        SandboxMode::ReadOnly => " Sandbox: read-only; the command cannot write files.",
        SandboxMode::FullAccess => "",
    };
    let network = if policy.commands_have_network() {
        " The command has network access."
    } else {
        " Network access is blocked: the command has no network (nothing can be downloaded; \
         use offline modes such as `cargo build --offline`)."
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
        classify_in(&args.command, &self.root)
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
        let sandbox =
            CommandSandbox::prepare(&self.root, &self.policy, &ctx.scratch_dir().join("tmp"))?;
        let snapshot = sandbox.snapshot_protected();
        let started = Instant::now();
        let running = spawn(&self.root, &args.command, &sandbox)?;
        let finished = supervise(running, timeout, ctx).await?;
        let restored = snapshot.restore();
        let mut notes: Vec<String> = timeout_note.into_iter().collect();
        notes.extend(sandbox.notes().iter().cloned());
        Ok(report(
            &finished,
            &sandbox,
            &restored,
            timeout,
            started.elapsed(),
            &notes,
        ))
    }
}

/// A spawned command: `bash`, the read end of its output pipe, and its processes.
struct Running {
    child: tokio::process::Child,
    output: pipe::Receiver,
    group: CallProcesses,
}

fn spawn(root: &Path, command: &str, sandbox: &CommandSandbox) -> Result<Running, ToolError> {
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
        .kill_on_drop(true);
    sandbox.apply(&mut cmd);
    cmd.env(MARKER_VAR, &marker);
    // Counted as running before the spawn, so no other call's sweep takes this `bash`.
    let mut call = Call::begin();
    let spawned = cmd.spawn();
    // The command holds our copies of the pipe's write end: drop them, or the pipe never
    // reports end-of-file.
    drop(cmd);
    let child = spawned.map_err(|err| {
        let what = if sandbox.confined() {
            "could not start the command in its sandbox"
        } else {
            "could not start the command"
        };
        ToolError::Failed(format!("{what}: bash: {err}"))
    })?;
    let raw = child
        .id()
        .ok_or_else(|| ToolError::failed("the command exited before it could be watched"))?;
    call.started(raw);
    // `bash` called setsid in the sandbox's child setup: it leads a group of its own.
    let group = CallProcesses {
        group: GroupGuard::marked(Some(raw), format!("{MARKER_VAR}={marker}")),
        call,
    };
    let output = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|err| ToolError::io("reading the command's output", err))?;
    Ok(Running {
        child,
        output,
        group,
    })
}

/// The processes of one call: its process group and its marker for those that left it (a
/// marked [`GroupGuard`]), and its place among the running calls (for the sweep of what
/// escaped). Dropping it kills them all, so a dropped call leaves nothing running.
struct CallProcesses {
    /// Dropped first: kills the group and the marked processes unless settled.
    group: GroupGuard,
    /// Dropped next: ends the call (sweeping if it was the last).
    call: Call,
}

impl CallProcesses {
    /// Kills every process in the group.
    fn kill(&self) {
        self.group.kill();
    }

    /// Kills the processes that carry the marker but left the group; keeps their pidfds to
    /// reap those that are this process's children.
    fn kill_escaped(&self) {
        self.group.kill_marked();
    }

    /// Ends the call: kills what it left among this process's children (and, for the last
    /// call running in a subreaper, what escaped), then waits a little to reap it.
    async fn finish(&mut self) {
        let mut left = self.call.finish();
        let until = tokio::time::Instant::now() + REAP_WAIT;
        while !left.is_empty() && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
            left = reaper::reap(left);
        }
        Call::keep_unreaped(left);
    }
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
    capture: HeadTail,
}

/// Reads the output until `bash` exits, the timeout passes or the call is cancelled; then
/// kills what is left and collects the rest of the output.
async fn supervise(
    mut running: Running,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<Finished, ToolError> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut capture = capture();
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
    running.group.finish().await;
    running.group.group.settle();
    Ok(Finished {
        stop,
        status,
        capture,
    })
}

/// Reads until end-of-file or `limit` passes; returns whether end-of-file was reached.
async fn drain(
    output: &mut pipe::Receiver,
    capture: &mut HeadTail,
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
