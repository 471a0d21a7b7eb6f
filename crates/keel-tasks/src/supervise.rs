//! The supervisor of one task: starts its runner, from the command line recorded with the
//! task, in a process group of its own, keeps its whole log and the tails, kills the group on
//! timeout or cancellation, and records the real exit status and a summary.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use keel_sandbox::{CommandSandbox, GroupChild, spawn_in_group};
use keel_tool::HeadTail;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tracing::Instrument;

use crate::process::start_time;
use crate::runner::{DEFAULT_RUNNER, expand};
use crate::settings::{TaskSettings, no_settings};
use crate::{TaskEnd, TaskError, TaskRecord, TaskStatus, TaskStore};

/// Lines of output kept in `output_tail`.
pub(crate) const OUTPUT_TAIL_LINES: usize = 100;
/// Lines of errors kept in `error_tail`.
pub(crate) const ERROR_TAIL_LINES: usize = 40;
/// How often the supervisor looks for a cancellation in the store.
const CANCEL_POLL: Duration = Duration::from_millis(200);
/// The longest summary, in characters.
const SUMMARY_CHARS: usize = 2000;

/// Bytes of output kept for `output_tail` (its last lines), whatever the runner prints.
const OUTPUT_TAIL_BYTES: usize = 256 * 1024;
/// Bytes of errors kept for `error_tail`.
const ERROR_TAIL_BYTES: usize = 64 * 1024;

/// The last `lines` lines of a stream, kept in bounded memory ([`HeadTail`] without a head).
#[derive(Debug)]
struct Tail {
    kept: HeadTail,
    lines: usize,
}

impl Tail {
    fn new(lines: usize, bytes: usize) -> Self {
        Self {
            kept: HeadTail::new(0, bytes),
            lines,
        }
    }

    fn push(&mut self, line: &str) {
        self.kept.push(line.as_bytes());
        self.kept.push(b"\n");
    }

    fn text(&self) -> String {
        self.kept.last_lines(self.lines)
    }
}

/// Copies `stream` line by line into the log (with `prefix`) and the tail.
async fn pump(
    stream: impl AsyncRead + Unpin,
    prefix: &str,
    log: &tokio::sync::Mutex<tokio::fs::File>,
    tail: &mut Tail,
) {
    let mut lines = BufReader::new(stream).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                let mut log = log.lock().await;
                // A log that cannot be written costs the log, not the task.
                let _ = log.write_all(format!("{prefix}{line}\n").as_bytes()).await;
                tail.push(&line);
            }
            Ok(None) => break,
            Err(err) => {
                tail.push(&format!("(output unreadable: {err})"));
                break;
            }
        }
    }
}

/// What a runner's output says it did: the `result` of a JSON object it printed (keel's and
/// Claude Code's `--output-format json`), else the end of its output.
pub fn summarize(output_tail: &str) -> Option<String> {
    let from_json = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text.trim())
            .ok()
            .and_then(|value| value.get("result")?.as_str().map(str::to_owned))
    };
    let summary = output_tail
        .lines()
        .rev()
        .find_map(from_json)
        .or_else(|| from_json(output_tail))
        .or_else(|| {
            let lines: Vec<&str> = output_tail
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect();
            let start = lines.len().saturating_sub(5);
            let text = lines[start..].join("\n");
            (!text.is_empty()).then_some(text)
        })?;
    let mut summary = summary.trim().to_owned();
    if summary.chars().count() > SUMMARY_CHARS {
        summary = summary.chars().take(SUMMARY_CHARS - 1).collect::<String>() + "…";
    }
    Some(summary)
}

/// Runs task `id` to its end in this process and records how it ended; returns the record.
///
/// The runner is the command line recorded with the task ([`TaskSettings::runner`], its
/// `{task}` and `{workdir}` filled in): nothing else, no configuration file, is read. It runs
/// in the task's directory (which must still resolve to one inside the settings' roots), in
/// a process group of its own that is killed on timeout or when the task is cancelled in the
/// store, with `KEEL_TASK_ID` set to the task's id and the environment scrubbed. A runner
/// other than keel's own gets what commands get: no credentials, none of the policy's hidden
/// variables, confined by the recorded policy; keel's own keeps the provider's key it needs
/// and applies the recorded settings itself. A task recorded without settings (by an older
/// keel) is not run: it fails with a note saying why. `pid` is the process to record as the
/// task's (the detached supervisor's own, or the host's for in-process tasks).
pub async fn supervise(store: &dyn TaskStore, id: &str, pid: u32) -> Result<TaskRecord, TaskError> {
    let record = store
        .get(id)?
        .ok_or_else(|| TaskError::NotFound { id: id.to_owned() })?;
    if record.settings.is_none() {
        store.finish(id, &failed(no_settings(id)))?;
        return store
            .get(id)?
            .ok_or_else(|| TaskError::NotFound { id: id.to_owned() });
    }
    let started = start_time(pid).unwrap_or_default();
    if !store.mark_running(id, pid, started)? {
        // Cancelled (or ended) before it started.
        return store
            .get(id)?
            .ok_or_else(|| TaskError::NotFound { id: id.to_owned() });
    }
    let span = tracing::info_span!("task", id, runner = %record.runner);
    let end = run_runner(store, &record).instrument(span).await;
    store.finish(id, &end)?;
    store
        .get(id)?
        .ok_or_else(|| TaskError::NotFound { id: id.to_owned() })
}

fn failed(error: String) -> TaskEnd {
    TaskEnd {
        status: TaskStatus::Failed,
        exit_code: None,
        output_tail: String::new(),
        error_tail: error.clone(),
        result_summary: None,
        note: Some(error),
    }
}

async fn open_log(path: &Path) -> std::io::Result<tokio::fs::File> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await
}

/// How the runner's wait ended.
enum Ended {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
    WaitFailed(std::io::Error),
}

impl Ended {
    /// The task's status, exit code and note for this end (`timeout_secs`: the task's
    /// limit).
    fn outcome(self, timeout_secs: u64) -> (TaskStatus, Option<i32>, Option<String>) {
        match self {
            Ended::Exited(status) => match status.code() {
                Some(0) => (TaskStatus::Completed, Some(0), None),
                Some(code) => (TaskStatus::Failed, Some(code), None),
                None => {
                    use std::os::unix::process::ExitStatusExt;
                    let signal = status.signal().unwrap_or_default();
                    (
                        TaskStatus::Failed,
                        None,
                        Some(format!("the runner was killed by signal {signal}")),
                    )
                }
            },
            Ended::TimedOut => (
                TaskStatus::TimedOut,
                None,
                Some(format!(
                    "timed out after {timeout_secs} s: its process group was killed"
                )),
            ),
            Ended::Cancelled => (
                TaskStatus::Cancelled,
                None,
                Some("cancelled: its process group was killed".into()),
            ),
            Ended::WaitFailed(err) => (
                TaskStatus::Failed,
                None,
                Some(format!("waiting for the runner failed: {err}")),
            ),
        }
    }
}

/// Waits for the runner `child` to exit, or for `timeout`, or for the task `id` to be
/// cancelled in `store` (looked for every [`CANCEL_POLL`]); on the last two its process
/// `group` is killed.
async fn watch(
    child: &mut tokio::process::Child,
    group: &keel_sandbox::GroupGuard,
    timeout: Duration,
    store: &dyn TaskStore,
    id: &str,
) -> Ended {
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            status = child.wait() => return match status {
                Ok(status) => Ended::Exited(status),
                Err(err) => Ended::WaitFailed(err),
            },
            () = &mut deadline => {
                group.kill();
                let _ = child.wait().await;
                return Ended::TimedOut;
            }
            () = tokio::time::sleep(CANCEL_POLL) => {
                let cancelled = matches!(
                    store.get(id),
                    Ok(Some(now)) if now.status == TaskStatus::Cancelled
                );
                if cancelled {
                    group.kill();
                    let _ = child.wait().await;
                    return Ended::Cancelled;
                }
            }
        }
    }
}

/// The runner's command: `program` with `args` in `workdir`, no input, its output piped,
/// its environment scrubbed, `KEEL_TASK_ID` set; a runner other than keel's own confined by
/// the task's policy (the sandbox returned). The error says why it could not be confined.
fn runner_command(
    record: &TaskRecord,
    settings: &TaskSettings,
    workdir: &Path,
    program: &str,
    args: &[String],
) -> Result<(Command, Option<CommandSandbox>), String> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let own = record.runner == DEFAULT_RUNNER;
    scrub_runner_env(&mut command, settings, own);
    command.env("KEEL_TASK_ID", &record.id);
    if own {
        return Ok((command, None));
    }
    match confine(&mut command, settings, workdir, &record.output_path) {
        Ok(sandbox) => Ok((command, Some(sandbox))),
        Err(err) => Err(format!(
            "cannot confine runner `{}` ({program}): {err}",
            record.runner
        )),
    }
}

async fn run_runner(store: &dyn TaskStore, record: &TaskRecord) -> TaskEnd {
    let Some(settings) = &record.settings else {
        return failed(no_settings(&record.id));
    };
    // The directory is checked again: it may have been swapped for a symlink since.
    let workdir = match settings.check_workdir(&record.workdir) {
        Ok(workdir) => workdir,
        Err(err) => return failed(err.to_string()),
    };
    if settings.runner.is_empty() {
        return failed(format!(
            "no command line was recorded for runner `{}`",
            record.runner
        ));
    }
    let argv = expand(&settings.runner, &record.task_prompt, &workdir);
    let log = match open_log(&record.output_path).await {
        Ok(log) => tokio::sync::Mutex::new(log),
        Err(err) => {
            return failed(format!(
                "cannot open the log {}: {err}",
                record.output_path.display()
            ));
        }
    };
    let (program, args) = match argv.split_first() {
        Some(split) => split,
        None => return failed("the runner's command is empty".into()),
    };
    let (mut command, sandbox) = match runner_command(record, settings, &workdir, program, args) {
        Ok(prepared) => prepared,
        Err(error) => return failed(error),
    };
    // What a confined runner changed of the protected paths is put back when it ends.
    let protected = sandbox.as_ref().map(CommandSandbox::snapshot_protected);
    // In a process group of its own, killed whole when `group` is dropped (a supervisor
    // given up leaves nothing running), and registered with the reaper as it starts, so a
    // sweep of commands' strays spares it.
    let GroupChild {
        mut child,
        group,
        tracked: _tracked,
    } = match spawn_in_group(&mut command) {
        Ok(spawned) => spawned,
        Err(err) => {
            return failed(format!(
                "cannot start runner `{}` ({program}): {err}",
                record.runner
            ));
        }
    };
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return failed("the runner's output could not be captured".into());
    };
    let mut out_tail = Tail::new(OUTPUT_TAIL_LINES, OUTPUT_TAIL_BYTES);
    let mut err_tail = Tail::new(ERROR_TAIL_LINES, ERROR_TAIL_BYTES);
    let timeout = Duration::from_secs(record.timeout_secs.max(1));
    let (ended, (), ()) = tokio::join!(
        watch(&mut child, &group, timeout, store, &record.id),
        pump(stdout, "", &log, &mut out_tail),
        pump(stderr, "[stderr] ", &log, &mut err_tail)
    );
    // Whatever the runner left in its group goes with it; then what it changed of the
    // protected paths is put back.
    group.kill();
    let restored = protected.map(|snapshot| snapshot.restore());
    let _ = log.lock().await.flush().await;
    let output_tail = out_tail.text();
    let error_tail = err_tail.text();
    let result_summary = summarize(&output_tail);
    let (status, exit_code, note) = ended.outcome(record.timeout_secs);
    let restore_note = restored
        .as_ref()
        .and_then(keel_sandbox::RestoreReport::note);
    let note = match (note, restore_note) {
        (Some(note), Some(restored)) => Some(format!("{note}; {restored}")),
        (note, restored) => note.or(restored),
    };
    TaskEnd {
        status,
        exit_code,
        output_tail,
        error_tail,
        result_summary,
        note,
    }
}

/// Takes from the runner's environment what it must not see: for every runner the
/// terminal, agent and desktop sockets; for a runner other than keel's own (`own` false),
/// also credentials and the policy's hidden variables, as commands
/// ([`keel_sandbox::scrub_env`]). keel's own runner keeps the provider's key (custom
/// `api_key_env` included): it needs it, and hides it from its commands itself.
fn scrub_runner_env(command: &mut Command, settings: &TaskSettings, own: bool) {
    if !own {
        keel_sandbox::scrub_env(command, &settings.policy.hidden_env);
        return;
    }
    for (name, _) in std::env::vars_os() {
        if keel_sandbox::is_session_var(&name) {
            command.env_remove(name);
        }
    }
}

/// Confines runner `command` (not keel's own) under the recorded policy, working in
/// `workdir`, its temporary files beside its log (`<id>.tmp`): the same Landlock, seccomp
/// and namespace rules as keel's commands.
fn confine(
    command: &mut Command,
    settings: &TaskSettings,
    workdir: &Path,
    log: &Path,
) -> Result<CommandSandbox, String> {
    let temp_dir: PathBuf = log.with_extension("tmp");
    let sandbox = CommandSandbox::prepare(workdir, &settings.policy, &temp_dir)
        .map_err(|err| err.to_string())?;
    sandbox.apply(command);
    Ok(sandbox)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_come_from_json_results_else_the_last_lines() {
        let keel =
            "progress\n{\"type\":\"result\",\"result\":\"Fixed the test.\",\"is_error\":false}";
        assert_eq!(summarize(keel).as_deref(), Some("Fixed the test."));
        let pretty = "{\n  \"result\": \"multi-line json\"\n}";
        assert_eq!(summarize(pretty).as_deref(), Some("multi-line json"));
        assert_eq!(summarize("a\nb\n\nc").as_deref(), Some("a\nb\nc"));
        assert_eq!(summarize(""), None);
        let mut tail = Tail::new(2, 100);
        for n in 0..5 {
            tail.push(&n.to_string());
        }
        assert_eq!(tail.text(), "3\n4");
    }
}
