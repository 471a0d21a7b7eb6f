//! One-line descriptions of tool calls and their results, for progress lines and prompts.

use std::collections::HashMap;
use std::time::Duration;

use keel::engine::AgentEvent;
use keel::provider::ContentBlock;
use serde_json::Value;

/// Text from the model or a file, made safe to print: control characters other than newline
/// and tab (an escape sequence could rewrite the screen) become `�`; carriage returns go.
pub fn printable(text: &str) -> String {
    text.chars()
        .filter(|&c| c != '\r')
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// The longest argument or summary shown on a line, in characters.
const MAX_SHOWN: usize = 80;

/// `text` on one line, shortened to `max` characters with an ellipsis.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut short: String = flat.chars().take(max.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// The argument that says what a call does: the path, command, pattern or message.
pub fn call_subject(name: &str, input: &Value) -> String {
    let field = |key: &str| input.get(key).and_then(Value::as_str);
    let subject = match name {
        "run_command" => field("command"),
        "grep" | "glob" => field("pattern"),
        "git_commit" => field("message"),
        _ => field("path"),
    };
    match subject {
        Some(subject) => one_line(subject, MAX_SHOWN),
        None if input.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        None => one_line(&input.to_string(), MAX_SHOWN),
    }
}

/// `name(subject)`.
pub fn describe_call(name: &str, input: &Value) -> String {
    format!("{name}({})", call_subject(name, input))
}

/// How many of a failed call's last output lines are shown under its line.
pub const TAIL_LINES: usize = 5;

/// What a result says, in a few words: its first non-empty line, and how many lines it has;
/// `no output` when it is empty.
pub fn summarize_output(output: &str) -> String {
    let lines = output.lines().count();
    let Some(first) = output.lines().find(|line| !line.trim().is_empty()) else {
        return "no output".to_owned();
    };
    let first = one_line(first, MAX_SHOWN);
    if lines > 1 {
        format!("{first} (+{} lines)", lines - 1)
    } else {
        first
    }
}

/// A `run_command` result taken apart: what the command printed, and the status keel added
/// (`[exit code 1]`, `[killed by signal 9 (SIGKILL)]`, `[stopped (…)]`); the notes after it
/// are dropped.
struct CommandResult<'a> {
    /// The command's output (empty when it printed nothing).
    printed: Vec<&'a str>,
    /// The status line without its brackets, if there is one.
    status: Option<&'a str>,
}

impl<'a> CommandResult<'a> {
    /// `output` as keel's `run_command` writes it: the output (or `(no output)`), the status
    /// line, `[note: …]` lines.
    fn parse(output: &'a str) -> Self {
        let lines: Vec<&str> = output.lines().collect();
        let status_at = lines.iter().rposition(|line| {
            ["[exit code ", "[killed by signal ", "[stopped"]
                .iter()
                .any(|start| line.starts_with(start))
                && line.ends_with(']')
        });
        let (printed, status) = match status_at {
            Some(at) => (
                lines[..at].to_vec(),
                Some(lines[at].trim_start_matches('[').trim_end_matches(']')),
            ),
            None => (lines, None),
        };
        let printed = if printed == ["(no output)"] {
            Vec::new()
        } else {
            printed
        };
        Self { printed, status }
    }

    /// The status worth a word: anything but `exit code 0`.
    fn failure(&self) -> Option<&'a str> {
        self.status.filter(|status| *status != "exit code 0")
    }
}

/// What a call's result says on its line: the exit status of a command that failed, then
/// the output's first line and length (`no output` when empty); for a failure whose output
/// is longer than a line, its length only, as its last lines follow ([`failure_tail`]).
fn summarize_result(name: &str, output: &str, is_error: bool) -> String {
    if name == "run_command" {
        let result = CommandResult::parse(output);
        let printed = result.printed.join("\n");
        let lines = result.printed.len();
        let summary = if is_error && lines > 1 {
            format!("{lines} lines")
        } else {
            summarize_output(&printed)
        };
        return match result.failure() {
            Some(status) => format!("{status} · {summary}"),
            None => summary,
        };
    }
    summarize_output(output)
}

/// The last lines of a failed call's output, to show under its line (where a traceback's
/// error is); nothing for a success, or when the line says all there is.
pub fn failure_tail(name: &str, output: &str, is_error: bool) -> Vec<String> {
    if !is_error {
        return Vec::new();
    }
    let lines: Vec<&str> = if name == "run_command" {
        let printed = CommandResult::parse(output).printed;
        if printed.len() <= 1 {
            return Vec::new();
        }
        printed
    } else {
        // The first line is on the call's line already.
        output.lines().skip(1).collect()
    };
    let lines: Vec<&str> = lines
        .into_iter()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    lines[start..]
        .iter()
        .map(|line| (*line).to_owned())
        .collect()
}

/// A finished call on one line: `✓ read_file(src/lib.rs) · 42 lines · 3 ms`,
/// `✗ run_command(pytest) · exit code 1 · 12 lines · 1.2 s`; a result with images says what
/// they are, never their data: `✓ screenshot() · 1 line · [image: image/png, 12 KB] · 9 ms`.
/// `images` holds one description per image ([`keel::provider::ImageData::describe`]).
pub fn finished_line(
    name: &str,
    input: &Value,
    output: &str,
    images: &[String],
    is_error: bool,
    duration: Duration,
) -> String {
    let mark = if is_error { "✗" } else { "✓" };
    let summary = if name == "read_file" && !is_error {
        // Numbered lines: how many says more than the first one.
        let lines = output
            .lines()
            .filter(|l| l.split_once('\t').is_some())
            .count();
        format!("{lines} line{}", if lines == 1 { "" } else { "s" })
    } else {
        summarize_result(name, output, is_error)
    };
    let mut summary = summary;
    for image in images {
        summary.push_str(&format!(" · [image: {image}]"));
    }
    format!(
        "{mark} {} · {summary} · {}",
        describe_call(name, input),
        human_duration(duration)
    )
}

/// The note a command's result carries when keel restored protected paths it changed (`.git`
/// config or hooks, keel's configuration), for the person as well as the model.
pub fn restored_note(output: &str) -> Option<&str> {
    output.lines().find_map(|line| {
        line.strip_prefix("[note: ")
            .filter(|note| note.starts_with("the command changed protected paths"))
            .map(|note| note.trim_end_matches(']'))
    })
}

/// `3 ms`, `1.2 s`, `2 min 5 s`.
pub fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis} ms")
    } else if millis < 60_000 {
        format!("{:.1} s", duration.as_secs_f64())
    } else {
        let secs = duration.as_secs();
        format!("{} min {} s", secs / 60, secs % 60)
    }
}

/// Each tool call's input by id, as a run's events show it: from the model's message (a call
/// answered without running, e.g. denied, has no start event) and from the start event.
#[derive(Debug, Default)]
pub struct CallInputs(HashMap<String, Value>);

impl CallInputs {
    /// Records the inputs `event` shows, if any.
    pub fn observe(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::MessageAdded { message } => {
                for block in &message.content {
                    if let ContentBlock::ToolUse { id, input, .. } = block {
                        self.0.insert(id.clone(), input.clone());
                    }
                }
            }
            AgentEvent::ToolCallStarted { id, input, .. } => {
                self.0.insert(id.clone(), input.clone());
            }
            _ => {}
        }
    }

    /// The input of call `id` (an empty object if it was never seen), forgotten from now on.
    pub fn take(&mut self, id: &str) -> Value {
        self.0
            .remove(id)
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
    }
}

pub use keel_config::report::thousands;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn images_are_described_not_dumped() {
        let images = vec![keel_test_support::images::png().describe()];
        let line = finished_line(
            "screenshot",
            &json!({}),
            "the screen",
            &images,
            false,
            Duration::from_millis(9),
        );
        assert_eq!(
            line,
            "✓ screenshot() · the screen · [image: image/png, 69 bytes] · 9 ms"
        );
    }

    #[test]
    fn calls_are_described_by_their_subject() {
        assert_eq!(
            describe_call("run_command", &json!({"command": "cargo test\n  --all"})),
            "run_command(cargo test --all)"
        );
        assert_eq!(
            describe_call("read_file", &json!({"path": "a.rs"})),
            "read_file(a.rs)"
        );
        assert_eq!(describe_call("git_status", &json!({})), "git_status()");
        assert_eq!(
            describe_call("custom", &json!({"n": 1})),
            "custom({\"n\":1})"
        );
        let long = "x".repeat(200);
        assert_eq!(
            call_subject("grep", &json!({"pattern": long}))
                .chars()
                .count(),
            80
        );
    }

    #[test]
    fn outputs_are_summarized_on_one_line() {
        assert_eq!(summarize_output("one\ntwo\nthree"), "one (+2 lines)");
        assert_eq!(summarize_output("\n  \nlate"), "late (+2 lines)");
        assert_eq!(summarize_output(""), "no output");
        let line = finished_line(
            "read_file",
            &json!({"path": "a"}),
            "fine",
            &[],
            true,
            Duration::from_millis(1500),
        );
        assert_eq!(line, "✗ read_file(a) · fine · 1.5 s");
    }

    /// keel's run_command result for `printed` and `status`.
    fn command_output(printed: &str, status: &str) -> String {
        format!("{printed}\n[{status}]\n")
    }

    #[test]
    fn a_command_says_its_exit_code_and_an_empty_output_says_so() {
        let input = json!({"command": "pytest"});
        let ms = Duration::from_millis(3);
        let quiet = command_output("(no output)", "exit code 0");
        assert_eq!(
            finished_line("run_command", &input, &quiet, &[], false, ms),
            "✓ run_command(pytest) · no output · 3 ms"
        );
        let one = command_output("hi", "exit code 0");
        assert_eq!(
            finished_line("run_command", &input, &one, &[], false, ms),
            "✓ run_command(pytest) · hi · 3 ms"
        );
        let failed = command_output("(no output)", "exit code 2");
        assert_eq!(
            finished_line("run_command", &input, &failed, &[], true, ms),
            "✗ run_command(pytest) · exit code 2 · no output · 3 ms"
        );
        let killed = command_output("x", "killed by signal 9 (SIGKILL)");
        assert_eq!(
            finished_line("run_command", &input, &killed, &[], true, ms),
            "✗ run_command(pytest) · killed by signal 9 (SIGKILL) · x · 3 ms"
        );
    }

    #[test]
    fn a_failure_shows_its_last_lines() {
        let traceback = "Traceback (most recent call last):\n  File \"t.py\", line 3\n    \
                         main()\n  File \"t.py\", line 2\n    assert 1 == 2\n\
                         AssertionError: one is not two";
        let output = format!(
            "{}[note: the command changed protected paths]\n",
            command_output(traceback, "exit code 1")
        );
        let line = finished_line(
            "run_command",
            &json!({"command": "python t.py"}),
            &output,
            &[],
            true,
            Duration::from_millis(3),
        );
        assert_eq!(
            line,
            "✗ run_command(python t.py) · exit code 1 · 6 lines · 3 ms"
        );
        let tail = failure_tail("run_command", &output, true);
        assert_eq!(tail.len(), TAIL_LINES);
        assert_eq!(tail.last().unwrap(), "AssertionError: one is not two");
        assert_eq!(tail[0], "  File \"t.py\", line 3");
        assert!(failure_tail("run_command", &output, false).is_empty());
        assert!(failure_tail("run_command", &command_output("x", "exit code 1"), true).is_empty());
        assert_eq!(
            failure_tail("read_file", "no such file\nhint: check the path", true),
            ["hint: check the path"]
        );
    }
}
