//! Command hooks: running `bash -c <command>` through the host's process runner and reading
//! its answer.

use std::sync::Arc;
use std::time::Duration;

use keel_tool::{ProcessOutput, ProcessRunner, ProcessSpec};
use serde_json::Value;

use super::{HookAnswer, HookConfig, HookEvent, HookInput, HookOutcome, PermissionDecision};

/// The most of a hook's stdout, and of its stderr, that is kept; the rest is read and dropped.
const OUTPUT_CAP: usize = 64 * 1024;

/// The most of a failed hook's stderr quoted in its failure report.
const FAILURE_STDERR_CAP: usize = 1024;

/// A configured command hook and the runner that runs it: there is no command hook without
/// one.
#[derive(Debug, Clone)]
pub(super) struct CommandHook {
    /// The configuration it was built from (its command runs as `bash -c <command>`).
    pub(super) config: HookConfig,
    /// How long it may run.
    pub(super) timeout: Duration,
    /// Runs the command in a process group of its own.
    pub(super) runner: Arc<dyn ProcessRunner>,
}

impl CommandHook {
    /// Runs the command for `input`, with the variables `hidden` (and every credential) out of
    /// its environment; `Err` is the failure report.
    pub(super) async fn run(
        &self,
        input: &HookInput,
        hidden: &[String],
    ) -> Result<HookAnswer, String> {
        let event = input.hook_event_name();
        let command = &self.config.command;
        let who = format!("command hook `{command}` ({event})");
        let spec = self
            .spec(input, hidden)
            .map_err(|why| format!("{who} {why}"))?;
        let finished = self
            .runner
            .run(spec)
            .await
            .map_err(|error| format!("{who} {error}"))?;
        let stdout = String::from_utf8_lossy(&finished.stdout);
        let stderr = String::from_utf8_lossy(&finished.stderr);
        match finished.code {
            Some(0) => parse_stdout(event, &stdout).map_err(|why| format!("{who} {why}")),
            Some(2) => {
                let reason = stderr.trim();
                let reason = if reason.is_empty() {
                    format!("blocked by hook `{command}`")
                } else {
                    reason.to_owned()
                };
                Ok(HookAnswer {
                    outcome: HookOutcome::Block { reason },
                    ..HookAnswer::default()
                })
            }
            Some(code) => Err(format!(
                "{who} exited with code {code}{}",
                quote_stderr(&stderr)
            )),
            None => Err(format!(
                "{who} was killed by a signal ({}){}",
                signal_text(&finished),
                quote_stderr(&stderr)
            )),
        }
    }

    /// What the runner runs: `bash -c <command>` in the session's directory, with the
    /// session's variables, `input` as JSON on stdin, the hook's timeout and a 64 KiB cap on
    /// each output; `Err` when the input cannot be serialized.
    fn spec(&self, input: &HookInput, hidden: &[String]) -> Result<ProcessSpec, String> {
        let stdin = serde_json::to_vec(input)
            .map_err(|error| format!("could not serialize its input: {error}"))?;
        let cwd = input.cwd();
        let mut spec = ProcessSpec::shell(&self.config.command, cwd);
        spec.env = vec![
            ("KEEL_SESSION_ID".into(), input.session_id().into()),
            ("KEEL_PROJECT_DIR".into(), cwd.into()),
            ("CLAUDE_PROJECT_DIR".into(), cwd.into()),
        ];
        spec.hidden_env = hidden.to_vec();
        spec.stdin = stdin;
        spec.timeout = self.timeout;
        spec.output_cap = OUTPUT_CAP;
        Ok(spec)
    }
}

/// `signal: 9 (SIGKILL)`, as the standard library writes an exit status.
fn signal_text(output: &ProcessOutput) -> String {
    let Some(signal) = output.signal else {
        return "no exit code".to_owned();
    };
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return format!("signal: {signal}"),
    };
    format!("signal: {signal} ({name})")
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
fn parse_stdout(event: HookEvent, stdout: &str) -> Result<HookAnswer, String> {
    let text = stdout.trim();
    if !text.starts_with('{') {
        // Plain text: context for the model at session start and with a prompt, a log line
        // otherwise.
        let mut result = HookAnswer::default();
        if !text.is_empty() {
            if matches!(event, HookEvent::SessionStart | HookEvent::UserPromptSubmit) {
                result.messages.push(text.to_owned());
            } else {
                tracing::debug!(%event, stdout = text, "hook printed text");
            }
        }
        return Ok(result);
    }
    let json: Value = serde_json::from_str(text)
        .map_err(|error| format!("printed invalid JSON on stdout: {error}"))?;
    parse_json(event, &json)
}

/// A hook's answer in Claude Code's JSON form (`decision`, `hookSpecificOutput`,
/// `continue`, `systemMessage`, `suppressOutput`), for `event`.
pub(super) fn parse_json(event: HookEvent, json: &Value) -> Result<HookAnswer, String> {
    let mut result = HookAnswer::default();
    let specific = json.get("hookSpecificOutput");

    if let Some(message) = json
        .get("systemMessage")
        .and_then(Value::as_str)
        .filter(|message| !message.trim().is_empty())
    {
        result.system_messages.push(message.to_owned());
    }
    result.suppress_output = json.get("suppressOutput").and_then(Value::as_bool) == Some(true);

    if let Some(updated) = specific
        .and_then(|specific| specific.get("updatedInput"))
        .filter(|updated| !updated.is_null())
    {
        if event != HookEvent::PreToolUse {
            tracing::debug!(%event, "updatedInput ignored outside PreToolUse");
        } else if updated.is_object() {
            result.updated_input = Some(updated.clone());
        } else {
            return Err(format!(
                "gave an updatedInput that is not a JSON object: {updated}"
            ));
        }
    }

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
        merge(
            &mut result,
            HookOutcome::Stop {
                reason: reason.to_owned(),
            },
        );
    }
    Ok(result)
}

/// Records a permission decision, which only `PreToolUse` hooks may give.
fn permission(
    event: HookEvent,
    result: &mut HookAnswer,
    decision: PermissionDecision,
    reason: Option<String>,
) {
    if event == HookEvent::PreToolUse {
        merge(result, HookOutcome::Permission { decision, reason });
    } else {
        tracing::debug!(%event, ?decision, "permission decision ignored outside PreToolUse");
    }
}

fn merge(result: &mut HookAnswer, outcome: HookOutcome) {
    result.outcome = std::mem::take(&mut result.outcome).merge(outcome);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_context_only_at_session_start_and_with_a_prompt() {
        let start = parse_stdout(HookEvent::SessionStart, "hello\n").unwrap_or_default();
        assert_eq!(start.messages, vec!["hello".to_owned()]);
        let prompt = parse_stdout(HookEvent::UserPromptSubmit, "hello\n").unwrap_or_default();
        assert_eq!(prompt.messages, vec!["hello".to_owned()]);
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
    fn continue_false_stops_at_every_event_and_wins_over_a_block() {
        let json = r#"{"continue":false,"stopReason":"halt","decision":"block","reason":"no"}"#;
        for event in HookEvent::ALL {
            let outcome = parse_stdout(event, json).map(|result| result.outcome);
            assert_eq!(
                outcome,
                Ok(HookOutcome::Stop {
                    reason: "halt".to_owned()
                }),
                "{event}"
            );
        }
    }

    #[test]
    fn system_message_suppress_output_and_updated_input_are_read() {
        let json = r#"{"systemMessage":"linted","suppressOutput":true,
            "hookSpecificOutput":{"hookEventName":"PreToolUse","updatedInput":{"command":"ls"}}}"#;
        let pre = parse_stdout(HookEvent::PreToolUse, json).unwrap_or_default();
        assert_eq!(pre.system_messages, ["linted"]);
        assert!(pre.suppress_output);
        assert_eq!(
            pre.updated_input,
            Some(serde_json::json!({"command": "ls"}))
        );
        assert_eq!(pre.outcome, HookOutcome::Continue);
        // Only PreToolUse hooks change a call's input.
        let post = parse_stdout(HookEvent::PostToolUse, json).unwrap_or_default();
        assert_eq!(post.updated_input, None);
        let bad = r#"{"hookSpecificOutput":{"updatedInput":"ls"}}"#;
        let error = parse_stdout(HookEvent::PreToolUse, bad)
            .err()
            .unwrap_or_default();
        assert!(error.contains("updatedInput"), "{error}");
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
