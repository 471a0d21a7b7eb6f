//! The process-group runner: keel's one way to start an outside program in a process group of
//! its own, feed it, read it, and kill the whole group when it runs too long or is given up.
//!
//! [`ProcessGroupRunner`] runs a [`ProcessSpec`] to its end (command hooks use it through the
//! [`ProcessRunner`] trait); [`spawn_in_group`], [`GroupGuard`] and [`kill_group`] are the
//! pieces `run_command` and the background-task supervisor (keel-tasks) build on: no other
//! code starts a process group or kills one. Every child is registered with the
//! [reaper] as it starts, so a sweep of commands' strays spares it.
//!
//! `run_command` alone does not go through [`spawn_in_group`]: its confined child calls
//! `setsid` itself between fork and exec ([`CommandSandbox`](crate::CommandSandbox)), which
//! also takes away the controlling terminal; it then guards the group with a
//! [marked](GroupGuard::marked) guard, so processes that left the group carrying the call's
//! marker go with it.
//!
//! ```
//! use keel_sandbox::ProcessGroupRunner;
//! use keel_tool::{ProcessRunner, ProcessSpec};
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let mut spec = ProcessSpec::shell("read line; echo \"got $line\"", std::env::temp_dir());
//! spec.stdin = b"hello\n".to_vec();
//! let output = ProcessGroupRunner.run(spec).await?;
//! assert_eq!(output.code, Some(0));
//! assert_eq!(output.stdout, b"got hello\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::time::Duration;

use keel_tool::{ProcessError, ProcessOutput, ProcessRunner, ProcessSpec};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, Command};

use crate::reaper::{self, Call, Tracked};

/// How long the output pipes of a program that has exited may stay open (a process it left
/// running in the background may hold them).
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// How long a killed program has to be reaped before we stop waiting for it.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// Sends SIGKILL to every process in group `pgid`; a group already gone is not an error, and
/// neither is a `pgid` of 0 or 1 (never a group of ours): nothing is sent.
pub fn kill_group(pgid: u32) -> std::io::Result<()> {
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .filter(|pgid| *pgid > 1)
        .and_then(rustix::process::Pid::from_raw)
    else {
        return Ok(());
    };
    match rustix::process::kill_process_group(pid, rustix::process::Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// A child's process group, killed whole when the guard is dropped unless
/// [settled](GroupGuard::settle) first: a run given up (a timeout, a dropped future) leaves
/// nothing behind. A [marked](GroupGuard::marked) guard also kills, on drop and with
/// [`kill_marked`](GroupGuard::kill_marked), the processes that left the group (`setsid`, a
/// double fork) but still carry the call's environment marker.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<u32>,
    /// `NAME=value`: the environment entry every process of the call carries.
    marker: Option<String>,
}

impl GroupGuard {
    /// The group led by `pid` (a child started with `process_group(0)` or that called
    /// `setsid`); `None` guards nothing.
    pub fn new(pid: Option<u32>) -> Self {
        Self {
            pgid: pid,
            marker: None,
        }
    }

    /// The group led by `pid`, and the processes whose environment holds `marker`
    /// (`NAME=value`, set on the child so that everything it starts inherits it).
    pub fn marked(pid: Option<u32>, marker: impl Into<String>) -> Self {
        Self {
            pgid: pid,
            marker: Some(marker.into()),
        }
    }

    /// The group's id, unless settled.
    pub fn pgid(&self) -> Option<u32> {
        self.pgid
    }

    /// Kills every process of the group now.
    pub fn kill(&self) {
        if let Some(pgid) = self.pgid
            && let Err(error) = kill_group(pgid)
        {
            tracing::debug!(pgid, %error, "could not kill a process group");
        }
    }

    /// Kills the processes that carry the marker but left the group (nothing for a guard
    /// without one); those that are this process's children are reaped at a later end of a
    /// command.
    pub fn kill_marked(&self) {
        if let Some(marker) = &self.marker {
            Call::keep_unreaped(reaper::kill_marked(marker));
        }
    }

    /// Marks the group as dealt with: dropping the guard then does nothing.
    pub fn settle(&mut self) {
        self.pgid = None;
        self.marker = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        self.kill_marked();
    }
}

/// A child started by [`spawn_in_group`]: the child, its group's guard (the group is killed
/// when it is dropped, unless settled) and its registration with the reaper.
#[derive(Debug)]
pub struct GroupChild {
    /// The child, the leader of its group.
    pub child: Child,
    /// Kills its group when dropped.
    pub group: GroupGuard,
    /// Its registration with the reaper, so a sweep of commands' strays spares it while held.
    pub tracked: Tracked,
}

/// Spawns `command` as the leader of a process group of its own (`process_group(0)`, and
/// `kill_on_drop`), registered with the reaper in the same step. The caller sets up its
/// environment ([`crate::scrub_env`] or a [`CommandSandbox`](crate::CommandSandbox)) and its
/// pipes.
pub fn spawn_in_group(command: &mut Command) -> std::io::Result<GroupChild> {
    command.process_group(0).kill_on_drop(true);
    let (child, tracked) = reaper::spawn(command)?;
    let group = GroupGuard::new(child.id());
    Ok(GroupChild {
        child,
        group,
        tracked,
    })
}

/// Runs programs in process groups of their own, with scrubbed environments: the
/// implementation of [`ProcessRunner`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessGroupRunner;

#[async_trait::async_trait]
impl ProcessRunner for ProcessGroupRunner {
    async fn run(&self, spec: ProcessSpec) -> Result<ProcessOutput, ProcessError> {
        let mut command = Command::new(&spec.program);
        command
            .args(&spec.args)
            .current_dir(&spec.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // The same environment as commands: no credentials, no agent or desktop sockets, none
        // of the host's hidden variables; then the spec's own.
        crate::scrub_env(&mut command, &spec.hidden_env);
        for (name, value) in &spec.env {
            command.env(name, value);
        }
        let GroupChild {
            mut child,
            mut group,
            tracked: _tracked,
        } = spawn_in_group(&mut command).map_err(|source| ProcessError::Spawn {
            cwd: spec.cwd.clone(),
            source,
        })?;
        let collected = tokio::time::timeout(
            spec.timeout,
            collect(&mut child, spec.stdin, spec.output_cap),
        )
        .await;
        match collected {
            Ok(Ok(output)) => {
                group.settle();
                Ok(output)
            }
            Ok(Err(error)) => {
                group.kill();
                reap(&mut child).await;
                group.settle();
                Err(ProcessError::Io(error))
            }
            Err(_elapsed) => {
                group.kill();
                reap(&mut child).await;
                group.settle();
                Err(ProcessError::TimedOut {
                    after: spec.timeout,
                })
            }
        }
    }
}

/// Writes stdin, reads stdout and stderr, and waits for the exit, all at once so that no pipe
/// fills up and stalls the child. Once the child has exited, its output pipes get
/// [`PIPE_GRACE`] to close: a process it left running in the background may hold them open,
/// and is left alone, with the output read so far.
async fn collect(child: &mut Child, input: Vec<u8>, cap: usize) -> std::io::Result<ProcessOutput> {
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut stdout_kept = Vec::new();
    let mut stderr_kept = Vec::new();
    let status = {
        let mut write = std::pin::pin!(async move {
            if let Some(mut stdin) = stdin {
                // A program that does not read its input may exit first: a broken pipe is fine.
                if let Err(error) = stdin.write_all(&input).await {
                    tracing::debug!(%error, "a program did not read all of its input");
                }
            }
        });
        let mut read_out = std::pin::pin!(read_capped(stdout, &mut stdout_kept, cap));
        let mut read_err = std::pin::pin!(read_capped(stderr, &mut stderr_kept, cap));
        let mut wait = std::pin::pin!(child.wait());
        // Armed when the child exits.
        let mut grace = std::pin::pin!(tokio::time::sleep(Duration::MAX));
        let (mut status, mut out_done, mut err_done, mut written) = (None, false, false, false);
        while status.is_none() || !out_done || !err_done {
            tokio::select! {
                exit = &mut wait, if status.is_none() => {
                    status = Some(exit?);
                    grace.as_mut().reset(tokio::time::Instant::now() + PIPE_GRACE);
                }
                read = &mut read_out, if !out_done => {
                    read?;
                    out_done = true;
                }
                read = &mut read_err, if !err_done => {
                    read?;
                    err_done = true;
                }
                () = &mut write, if !written => written = true,
                () = &mut grace, if status.is_some() => {
                    tracing::debug!("a program left a process holding its output open");
                    break;
                }
            }
        }
        status
    };
    let status = status.ok_or_else(|| std::io::Error::other("the exit status was lost"))?;
    Ok(ProcessOutput {
        code: status.code(),
        signal: status.signal(),
        stdout: stdout_kept,
        stderr: stderr_kept,
    })
}

/// Reads a pipe to its end into `kept`, keeping the first `cap` bytes and dropping the rest.
async fn read_capped(
    pipe: Option<impl AsyncRead + Unpin>,
    kept: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<()> {
    let Some(mut pipe) = pipe else {
        return Ok(());
    };
    let mut buffer = vec![0u8; 8192];
    let mut truncated = false;
    loop {
        let read = pipe.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        let room = cap.saturating_sub(kept.len());
        truncated |= read > room;
        kept.extend_from_slice(buffer.get(..read.min(room)).unwrap_or_default());
    }
    if truncated {
        tracing::debug!(cap, "a program's output was cut to its cap");
    }
    Ok(())
}

/// Waits a little for a killed child, so it does not linger as a zombie.
async fn reap(child: &mut Child) {
    if tokio::time::timeout(REAP_GRACE, child.wait())
        .await
        .is_err()
    {
        tracing::warn!("a killed program did not exit in time");
    }
}
