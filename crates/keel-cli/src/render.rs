//! One-line descriptions of tool calls and their results, for progress lines and prompts.

use std::collections::HashMap;
use std::time::Duration;

use keel_engine::AgentEvent;
use keel_provider::ContentBlock;
use serde_json::Value;

/// The longest argument or summary shown on a line, in characters.
const MAX_SHOWN: usize = 80;

/// `text` on one line, shortened to `max` characters with an ellipsis.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut short: String = flat.chars().take(max.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// The argument that says what a call does: the path, command, pattern or message.
pub(crate) fn call_subject(name: &str, input: &Value) -> String {
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
pub(crate) fn describe_call(name: &str, input: &Value) -> String {
    format!("{name}({})", call_subject(name, input))
}

/// What a result says, in a few words: its first non-empty line, and how many lines it has.
pub(crate) fn summarize_output(output: &str) -> String {
    let lines = output.lines().count();
    let first = output
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("(no output)");
    let first = one_line(first, MAX_SHOWN);
    if lines > 1 {
        format!("{first} (+{} lines)", lines - 1)
    } else {
        first
    }
}

/// A finished call on one line: `✓ read_file(src/lib.rs) · 42 lines… · 3 ms`.
pub(crate) fn finished_line(
    name: &str,
    input: &Value,
    output: &str,
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
        summarize_output(output)
    };
    format!(
        "{mark} {} · {summary} · {}",
        describe_call(name, input),
        human_duration(duration)
    )
}

/// The note a command's result carries when keel restored protected paths it changed (`.git`
/// config or hooks, keel's configuration), for the person as well as the model.
pub(crate) fn restored_note(output: &str) -> Option<&str> {
    output.lines().find_map(|line| {
        line.strip_prefix("[note: ")
            .filter(|note| note.starts_with("the command changed protected paths"))
            .map(|note| note.trim_end_matches(']'))
    })
}

/// `3 ms`, `1.2 s`, `2 min 5 s`.
pub(crate) fn human_duration(duration: Duration) -> String {
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
pub(crate) struct CallInputs(HashMap<String, Value>);

impl CallInputs {
    /// Records the inputs `event` shows, if any.
    pub(crate) fn observe(&mut self, event: &AgentEvent) {
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
    pub(crate) fn take(&mut self, id: &str) -> Value {
        self.0
            .remove(id)
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert_eq!(summarize_output(""), "(no output)");
        let line = finished_line(
            "read_file",
            &json!({"path": "a"}),
            "fine",
            true,
            Duration::from_millis(1500),
        );
        assert_eq!(line, "✗ read_file(a) · fine · 1.5 s");
    }
}
