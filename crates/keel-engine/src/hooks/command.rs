//! Command hooks: running `bash -c <command>` and reading its answer.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, Command};

use super::{HookEvent, HookInput, HookOutcome, HookResult, PermissionDecision};

/// The most of a hook's stdout, and of its stderr, that is kept; the rest is read and dropped.
const OUTPUT_CAP: usize = 64 * 1024;

/// The most of a failed hook's stderr quoted in its failure report.
const FAILURE_STDERR_CAP: usize = 1024;

/// How long the output pipes of a hook that has exited may stay open.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// How long a killed hook has to be reaped before we stop waiting for it.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// A configured command hook.
#[derive(Debug, Clone)]
pub(super) struct CommandHook {
    /// The command, run as `bash -c <command>`.
    pub(super) command: String,
    /// How long it may run.
    pub(super) timeout: Duration,
}

/// What a finished command left.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl CommandHook {
    /// Runs the command for `input`, with the variables `hidden` (and every credential) out of
    /// its environment; `Err` is the failure report.
    pub(super) async fn run(
        &self,
        input: &HookInput,
        hidden: &[String],
    ) -> Result<HookResult, String> {
        let event = input.hook_event_name;
        let who = format!("command hook `{}` ({event})", self.command);
        let finished = self
            .execute(input, hidden)
            .await
            .map_err(|why| format!("{who} {why}"))?;
        match finished.status.code() {
            Some(0) => parse_stdout(event, &finished.stdout).map_err(|why| format!("{who} {why}")),
            Some(2) => {
                let reason = finished.stderr.trim();
                let reason = if reason.is_empty() {
                    format!("blocked by hook `{}`", self.command)
                } else {
                    reason.to_owned()
                };
                Ok(HookResult {
                    outcome: HookOutcome::Block { reason },
                    messages: Vec::new(),
                })
            }
            Some(code) => Err(format!(
                "{who} exited with code {code}{}",
                quote_stderr(&finished.stderr)
            )),
            None => Err(format!(
                "{who} was killed by a signal ({}){}",
                finished.status,
                quote_stderr(&finished.stderr)
            )),
        }
    }

    /// Spawns the command, feeds it `input`, and collects its exit and output within the
    /// timeout; `Err` says what went wrong (spawn error, timeout).
    async fn execute(&self, input: &HookInput, hidden: &[String]) -> Result<Finished, String> {
        let stdin_json = serde_json::to_vec(input)
            .map_err(|error| format!("could not serialize its input: {error}"))?;
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(&self.command)
            .current_dir(&input.cwd)
            .env("KEEL_SESSION_ID", &input.session_id)
            .env("KEEL_PROJECT_DIR", &input.cwd)
            .env("CLAUDE_PROJECT_DIR", &input.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // The same environment as commands: no credentials, no agent or desktop sockets, none
        // of the host's hidden variables.
        keel_sandbox::scrub_env(&mut command, hidden);
        // Registered with the reaper as it starts, so a sweep of commands' strays spares it.
        let (mut child, _tracked) = keel_sandbox::reaper::spawn(&mut command)
            .map_err(|error| format!("could not be started in {}: {error}", input.cwd.display()))?;
        // The child leads its own process group; the guard kills the group if we give up on
        // it (timeout, or this future dropped).
        let mut group = ProcessGroup::new(child.id());

        let collected = tokio::time::timeout(self.timeout, collect(&mut child, stdin_json)).await;
        match collected {
            Ok(Ok(finished)) => {
                group.settle();
                Ok(finished)
            }
            Ok(Err(error)) => {
                group.kill();
                reap(&mut child).await;
                group.settle();
                Err(format!("failed while running: {error}"))
            }
            Err(_elapsed) => {
                group.kill();
                reap(&mut child).await;
                group.settle();
                Err(format!(
                    "timed out after {} s and was killed",
                    self.timeout.as_secs_f64()
                ))
            }
        }
    }
}

/// Writes stdin, reads stdout and stderr, and waits for the exit, all at once so that no pipe
/// fills up and stalls the child. Once the hook has exited, its output pipes get
/// [`PIPE_GRACE`] to close: a process it left running in the background may hold them open,
/// and is left alone, with the output read so far.
async fn collect(child: &mut Child, stdin_json: Vec<u8>) -> std::io::Result<Finished> {
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut stdout_kept = Vec::new();
    let mut stderr_kept = Vec::new();
    let status = {
        let mut write = std::pin::pin!(async move {
            if let Some(mut stdin) = stdin {
                // A hook that does not read its input may exit first: a broken pipe is fine.
                if let Err(error) = stdin.write_all(&stdin_json).await {
                    tracing::debug!(%error, "hook did not read all of its input");
                }
            }
        });
        let mut read_out = std::pin::pin!(read_capped(stdout, &mut stdout_kept));
        let mut read_err = std::pin::pin!(read_capped(stderr, &mut stderr_kept));
        let mut wait = std::pin::pin!(child.wait());
        // Armed when the hook exits.
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
                    tracing::debug!("a hook left a process holding its output open");
                    break;
                }
            }
        }
        status
    };
    let status = status.ok_or_else(|| std::io::Error::other("the hook's exit status was lost"))?;
    Ok(Finished {
        status,
        stdout: String::from_utf8_lossy(&stdout_kept).into_owned(),
        stderr: String::from_utf8_lossy(&stderr_kept).into_owned(),
    })
}

/// Reads a pipe to its end into `kept`, keeping the first [`OUTPUT_CAP`] bytes and dropping
/// the rest.
async fn read_capped(
    pipe: Option<impl AsyncRead + Unpin>,
    kept: &mut Vec<u8>,
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
        let room = OUTPUT_CAP.saturating_sub(kept.len());
        truncated |= read > room;
        kept.extend_from_slice(buffer.get(..read.min(room)).unwrap_or_default());
    }
    if truncated {
        tracing::debug!(cap = OUTPUT_CAP, "hook output truncated");
    }
    Ok(())
}

/// Waits a little for a killed child, so it does not linger as a zombie.
async fn reap(child: &mut Child) {
    if tokio::time::timeout(REAP_GRACE, child.wait())
        .await
        .is_err()
    {
        tracing::warn!("a killed hook did not exit in time");
    }
}

/// ` : <stderr>` for a failure report, trimmed and shortened, or nothing if stderr is empty.
fn quote_stderr(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        return String::new();
    }
    match stderr.char_indices().nth(FAILURE_STDERR_CAP) {
        Some((end, _)) => format!(": {}…", stderr.get(..end).unwrap_or(stderr)),
        None => format!(": {stderr}"),
    }
}

/// Reads the stdout of a hook that exited with 0; `Err` for stdout that looks like JSON but
/// is not valid, or that holds a decision keel does not know.
fn parse_stdout(event: HookEvent, stdout: &str) -> Result<HookResult, String> {
    let text = stdout.trim();
    if !text.starts_with('{') {
        // Plain text: context for the model at session start, a log line otherwise.
        let mut result = HookResult::default();
        if !text.is_empty() {
            if event == HookEvent::SessionStart {
                result.messages.push(text.to_owned());
            } else {
                tracing::debug!(%event, stdout = text, "hook printed text");
            }
        }
        return Ok(result);
    }
    let json: Value = serde_json::from_str(text)
        .map_err(|error| format!("printed invalid JSON on stdout: {error}"))?;
    let mut result = HookResult::default();
    let specific = json.get("hookSpecificOutput");

    if let Some(context) = specific
        .and_then(|specific| specific.get("additionalContext"))
        .and_then(Value::as_str)
        .filter(|context| !context.trim().is_empty())
    {
        result.messages.push(context.to_owned());
    }

    if let Some(decision) = specific.and_then(|specific| specific.get("permissionDecision")) {
        let decision = match decision.as_str() {
            Some("allow") => PermissionDecision::Allow,
            Some("deny") => PermissionDecision::Deny,
            Some("ask") => PermissionDecision::Ask,
            _ => {
                return Err(format!(
                    "gave an unknown permissionDecision {decision} (expected \"allow\", \"deny\" or \"ask\")"
                ));
            }
        };
        let reason = specific
            .and_then(|specific| specific.get("permissionDecisionReason"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        permission(event, &mut result, decision, reason);
    }

    let reason = json.get("reason").and_then(Value::as_str);
    match json.get("decision") {
        None | Some(Value::Null) => {}
        Some(Value::String(decision)) if decision == "block" => {
            let reason = reason
                .filter(|reason| !reason.trim().is_empty())
                .unwrap_or("blocked by a hook");
            merge(
                &mut result,
                HookOutcome::Block {
                    reason: reason.to_owned(),
                },
            );
        }
        Some(Value::String(decision)) if decision == "approve" => {
            permission(
                event,
                &mut result,
                PermissionDecision::Allow,
                reason.map(str::to_owned),
            );
        }
        Some(other) => {
            return Err(format!(
                "gave an unknown decision {other} (expected \"block\" or \"approve\")"
            ));
        }
    }

    if json.get("continue").and_then(Value::as_bool) == Some(false) {
        let reason = json
            .get("stopReason")
            .and_then(Value::as_str)
            .filter(|reason| !reason.trim().is_empty())
            .unwrap_or("a hook asked to stop");
        if event == HookEvent::Stop {
            // The run stops anyway, which is what `continue: false` asks for.
            tracing::debug!(reason, "Stop hook asked to stop");
        } else {
            merge(
                &mut result,
                HookOutcome::Block {
                    reason: reason.to_owned(),
                },
            );
        }
    }
    Ok(result)
}

/// Records a permission decision, which only `PreToolUse` hooks may give.
fn permission(
    event: HookEvent,
    result: &mut HookResult,
    decision: PermissionDecision,
    reason: Option<String>,
) {
    if event == HookEvent::PreToolUse {
        merge(result, HookOutcome::Permission { decision, reason });
    } else {
        tracing::debug!(%event, ?decision, "permission decision ignored outside PreToolUse");
    }
}

fn merge(result: &mut HookResult, outcome: HookOutcome) {
    result.outcome = std::mem::take(&mut result.outcome).merge(outcome);
}

/// A child's process group, killed on drop unless settled.
struct ProcessGroup {
    pgid: Option<libc::pid_t>,
}

impl ProcessGroup {
    fn new(pid: Option<u32>) -> Self {
        Self {
            pgid: pid.and_then(|pid| libc::pid_t::try_from(pid).ok()),
        }
    }

    /// Kills every process of the group.
    #[allow(unsafe_code)]
    fn kill(&self) {
        if let Some(pgid) = self.pgid.filter(|pgid| *pgid > 1) {
            // SAFETY: killpg takes two integers and touches no memory of ours. `pgid` is the
            // pid of a child we spawned with `process_group(0)` and have not reaped when this
            // is called, so the group is ours.
            let killed = unsafe { libc::killpg(pgid, libc::SIGKILL) };
            if killed != 0 {
                tracing::debug!(
                    pgid,
                    error = %std::io::Error::last_os_error(),
                    "could not kill a hook's process group"
                );
            }
        }
    }

    /// Marks the group as dealt with: dropping it does nothing.
    fn settle(&mut self) {
        self.pgid = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_context_only_at_session_start() {
        let start = parse_stdout(HookEvent::SessionStart, "hello\n").unwrap_or_default();
        assert_eq!(start.messages, vec!["hello".to_owned()]);
        let pre = parse_stdout(HookEvent::PreToolUse, "hello\n").unwrap_or_default();
        assert!(pre.messages.is_empty());
        assert_eq!(pre.outcome, HookOutcome::Continue);
    }

    #[test]
    fn the_most_decisive_answer_of_one_output_wins() {
        let json = r#"{"decision":"block","reason":"no","hookSpecificOutput":{"permissionDecision":"allow"}}"#;
        let result = parse_stdout(HookEvent::PreToolUse, json).map(|result| result.outcome);
        assert_eq!(
            result,
            Ok(HookOutcome::Block {
                reason: "no".to_owned()
            })
        );
    }

    #[test]
    fn continue_false_blocks_except_at_stop() {
        let json = r#"{"continue":false,"stopReason":"halt"}"#;
        let post = parse_stdout(HookEvent::PostToolUse, json).map(|result| result.outcome);
        assert_eq!(
            post,
            Ok(HookOutcome::Block {
                reason: "halt".to_owned()
            })
        );
        let stop = parse_stdout(HookEvent::Stop, json).map(|result| result.outcome);
        assert_eq!(stop, Ok(HookOutcome::Continue));
    }

    #[test]
    fn permission_outside_pre_tool_use_is_ignored() {
        let json = r#"{"hookSpecificOutput":{"permissionDecision":"deny"}}"#;
        let post = parse_stdout(HookEvent::PostToolUse, json).map(|result| result.outcome);
        assert_eq!(post, Ok(HookOutcome::Continue));
    }

    #[test]
    fn unknown_decisions_are_errors() {
        let json = r#"{"hookSpecificOutput":{"permissionDecision":"maybe"}}"#;
        let error = parse_stdout(HookEvent::PreToolUse, json)
            .err()
            .unwrap_or_default();
        assert!(error.contains("\"maybe\""), "{error}");
        let json = r#"{"decision":"perhaps"}"#;
        let error = parse_stdout(HookEvent::PreToolUse, json)
            .err()
            .unwrap_or_default();
        assert!(error.contains("\"perhaps\""), "{error}");
    }

    #[test]
    fn long_stderr_is_shortened() {
        let quoted = quote_stderr(&"x".repeat(5000));
        assert!(quoted.ends_with('…'));
        assert_eq!(quoted.chars().count(), FAILURE_STDERR_CAP + 3);
        assert_eq!(quote_stderr("  \n"), "");
    }
}
