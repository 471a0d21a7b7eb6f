//! `!cmd`: a shell command the person runs from the prompt, through the agent's own
//! `run_command` tool — the same runner, sandbox policy and confinement as the model's
//! commands, in the session's working directory — its output shown, not sent to the model.
//! `!!cmd` also attaches the command and its output to the next message sent (as a
//! `<shell command="…">` block). The person typed it, so it is not asked about.

use std::sync::atomic::{AtomicU64, Ordering};

use keel::provider::{ToolCall, ToolInput};
use keel::tool::ToolContext;
use tokio_util::sync::CancellationToken;

use super::Repl;
use super::mention::shell_block;
use super::view::printable;
use crate::signals;

/// The name of the tool `!cmd` runs.
const RUN_COMMAND: &str = "run_command";

/// Numbers the calls, for their ids (a large output is saved under the id).
static RUNS: AtomicU64 = AtomicU64::new(0);

/// What a line starting with `!` asks: the command, and whether its output goes with the
/// next message (`!!`). `None` for a line that is not a shell line.
pub(super) fn parse(line: &str) -> Option<(&str, bool)> {
    let rest = line.strip_prefix('!')?;
    Some(match rest.strip_prefix('!') {
        Some(command) => (command.trim(), true),
        None => (rest.trim(), false),
    })
}

impl Repl {
    /// Runs `command` as `!command` (or `!!command` with `attach`): the output shown, and
    /// with `attach` kept for the next prompt. Ctrl-C stops it.
    pub(super) async fn shell(&mut self, command: &str, attach: bool) {
        if command.is_empty() {
            self.view.error(
                "usage: !COMMAND runs it in the sandbox; !!COMMAND also sends its output with \
                 your next message",
            );
            return;
        }
        let tools = self.live.coding().agent().tools();
        if tools.get(RUN_COMMAND).is_none() {
            self.view.error("no run_command tool in this session");
            return;
        }
        let id = format!("keel_shell_{}", RUNS.fetch_add(1, Ordering::Relaxed) + 1);
        let input = serde_json::json!({ "command": command });
        let call = ToolCall {
            id: &id,
            name: RUN_COMMAND,
            input: ToolInput::Valid(&input),
        };
        let cancel = CancellationToken::new();
        let ctx = ToolContext::new(self.live.cwd(), self.live.id()).with_cancel(cancel.clone());
        self.view
            .line(&self.view.style().dim(&format!("$ {}", printable(command))));
        self.view.spin(&format!(
            "running {}",
            keel_host::render::one_line(command, 60)
        ));
        let output = {
            let running = tools.dispatch(call, &ctx);
            futures::pin_mut!(running);
            tokio::select! {
                output = &mut running => output,
                _ = signals::interrupted() => {
                    cancel.cancel();
                    running.await
                }
            }
        };
        self.view.stop_spinner();
        let text = printable(output.content.trim_end());
        let lines: Vec<String> = if text.is_empty() {
            vec![self.view.style().dim("(no output)")]
        } else {
            text.lines().map(str::to_owned).collect()
        };
        if output.is_error {
            let style = self.view.style();
            self.view
                .lines(&lines.iter().map(|line| style.red(line)).collect::<Vec<_>>());
        } else {
            self.view.lines(&lines);
        }
        if attach {
            self.attachments.push(shell_block(command, &output.content));
            self.view
                .notice("(the command and its output go with your next message)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bang_runs_two_also_attach() {
        assert_eq!(parse("!ls -la"), Some(("ls -la", false)));
        assert_eq!(parse("!! git status "), Some(("git status", true)));
        assert_eq!(parse("!"), Some(("", false)));
        assert_eq!(parse("ls"), None);
    }
}
