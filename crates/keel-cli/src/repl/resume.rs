//! `/resume`: this directory's sessions listed (numbered, newest first, with their age and
//! first prompt) and the one picked — `/resume N`, `/resume ID`, or the number typed at the
//! question `/resume` asks — reopened, its transcript replayed compactly on screen (the
//! person's prompts, the answers, one line per tool call) before the session goes on. And the
//! `keel resume <id>` line printed when the person leaves.

use std::collections::HashMap;
use std::time::Duration;

use keel::engine::SessionSummary;
use keel::provider::{ContentBlock, ImageData, Message, Role};
use serde_json::Value;

use super::Repl;
use super::mention::typed;
use super::view::{Style, printable};
use super::worktree;
use crate::sessions;
use keel_config::SessionChoice;
use keel_host::render::{finished_line, one_line};

/// How many sessions `/resume` lists.
const LISTED: usize = 20;
/// How many of the last prompts a replay shows.
const REPLAYED_TURNS: usize = 10;
/// How many lines of one answer a replay shows.
const ANSWER_LINES: usize = 12;

/// One line of `/resume`'s list: number, age, first prompt (what it attached left out), id.
fn pick_line(style: Style, number: usize, summary: &SessionSummary) -> String {
    let prompt = summary.first_prompt.as_deref().map_or("(no prompt)", typed);
    format!(
        "{}  {:>7}  {}  {}",
        style.bold(&format!("{number:>3}")),
        format!(
            "{} ago",
            keel_host::report::delegates::age(&summary.meta.started_at)
        ),
        printable(&one_line(prompt, 46)),
        style.dim(&summary.meta.id)
    )
}

/// The transcript of `history`, compactly: `› prompt` lines, answers (at most
/// [`ANSWER_LINES`] lines each), `✓ tool(subject) · summary` lines; the last
/// [`REPLAYED_TURNS`] prompts only. Everything from the session file made printable.
pub(super) fn replay_lines(style: Style, history: &[Message]) -> Vec<String> {
    let prompts: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, message)| message.role == Role::User && prompt_text(message).is_some())
        .map(|(i, _)| i)
        .collect();
    let first = prompts
        .len()
        .checked_sub(REPLAYED_TURNS)
        .and_then(|skip| prompts.get(skip))
        .copied()
        .unwrap_or(0);
    let mut lines = Vec::new();
    if first > 0 {
        let earlier = prompts.iter().filter(|&&i| i < first).count();
        lines.push(style.dim(&format!(
            "({earlier} earlier prompt{} not shown)",
            if earlier == 1 { "" } else { "s" }
        )));
    }
    let mut calls: HashMap<&str, (&str, &Value)> = HashMap::new();
    for message in &history[first..] {
        for block in &message.content {
            match block {
                ContentBlock::Text { text } if message.role == Role::User => {
                    if let Some(notice) = text.strip_prefix("[notification] ") {
                        lines.push(style.dim(&printable(&one_line(notice, 100))));
                        continue;
                    }
                    let mut typed_lines = printable(typed(text))
                        .lines()
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                        .into_iter();
                    if let Some(head) = typed_lines.next() {
                        lines.push(style.bold(&format!("› {head}")));
                    }
                    lines.extend(typed_lines.map(|line| style.bold(&format!("  {line}"))));
                }
                ContentBlock::Text { text } => {
                    let text = printable(text.trim());
                    let all: Vec<&str> = text.lines().collect();
                    lines.extend(all.iter().take(ANSWER_LINES).map(|l| (*l).to_owned()));
                    if all.len() > ANSWER_LINES {
                        lines.push(
                            style.dim(&format!("… ({} more lines)", all.len() - ANSWER_LINES)),
                        );
                    }
                }
                ContentBlock::ToolUse {
                    id, name, input, ..
                } => {
                    calls.insert(id, (name, input));
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                    images,
                } => {
                    let Some((name, input)) = calls.remove(tool_use_id.as_str()) else {
                        continue;
                    };
                    // The line the call had when it ran, less its duration (not saved).
                    let images: Vec<String> = images.iter().map(ImageData::describe).collect();
                    let line =
                        finished_line(name, input, content, &images, *is_error, Duration::ZERO);
                    let line = printable(line.strip_suffix(" · 0 ms").unwrap_or(&line));
                    lines.push(if *is_error {
                        style.red(&line)
                    } else {
                        style.dim(&line)
                    });
                }
                _ => {}
            }
        }
    }
    lines
}

/// The text the person typed in `message`, if it holds any (tool results do not).
fn prompt_text(message: &Message) -> Option<&str> {
    message.content.iter().find_map(|block| match block {
        ContentBlock::Text { text } if !text.starts_with("[notification] ") => Some(text.as_str()),
        _ => None,
    })
}

impl Repl {
    /// `/resume`: lists this directory's sessions and asks which to resume; `/resume N` or
    /// `/resume ID` resumes one.
    pub(super) async fn resume(&mut self, argument: Option<String>) {
        // This session and sessions without a prompt are not worth resuming.
        let mut listed =
            match sessions::of_dir(self.settings.store.as_ref(), &self.settings.cwd, LISTED * 2) {
                Ok(listed) => listed,
                Err(err) => return self.view.error(&err.to_string()),
            };
        let current = self.live.id();
        listed.retain(|summary| summary.meta.id != current && summary.first_prompt.is_some());
        listed.truncate(LISTED);
        let choice = match argument {
            Some(choice) => choice,
            None => {
                if listed.is_empty() {
                    return self.view.notice("no saved sessions of this directory yet");
                }
                let style = self.view.style();
                let lines: Vec<String> = listed
                    .iter()
                    .enumerate()
                    .map(|(i, summary)| pick_line(style, i + 1, summary))
                    .collect();
                self.view.lines(&lines);
                let ask = self.input.ask_fn(self.view.clone());
                let answer = tokio::task::spawn_blocking(move || {
                    ask("Resume which? (a number or an id; Enter: none) ")
                })
                .await;
                match answer.ok().and_then(|answer| answer.word()) {
                    Some(word) if !word.is_empty() => word,
                    _ => return,
                }
            }
        };
        let id = match choice.parse::<usize>() {
            Ok(n) => match n.checked_sub(1).and_then(|i| listed.get(i)) {
                Some(summary) => summary.meta.id.clone(),
                None => {
                    return self.view.error(&format!(
                        "no session {n} in the list; /resume lists this directory's sessions"
                    ));
                }
            },
            Err(_) => choice,
        };
        if id == self.live.id() {
            return self.view.notice("that is this session");
        }
        let session = match self
            .settings
            .session(self.live.coding().agent(), &SessionChoice::Resume(id))
        {
            Ok(session) => session,
            Err(err) => return self.view.error(&err.to_string()),
        };
        if session.cwd() != self.settings.cwd {
            return self.view.error(&format!(
                "session {} belongs to {}; run `keel resume {}` there",
                session.id(),
                session.cwd().display(),
                session.id()
            ));
        }
        self.leave_hint();
        if let Err(err) = self.host.switch(&self.live, session).await {
            return self.view.error(&err.to_string());
        }
        self.snapshots.clear();
        self.attachments.clear();
        self.persistence_warned = false;
        self.baseline = worktree::baseline(&self.settings.cwd);
        let engine = self.live.session().await;
        let messages = engine.history().len();
        self.view
            .lines(&replay_lines(self.view.style(), engine.history()));
        self.view.notice(&format!(
            "resumed session {} ({messages} message{}); go on",
            engine.id(),
            if messages == 1 { "" } else { "s" }
        ));
    }

    /// When leaving: how to come back to this session, if it holds a turn.
    pub(super) fn leave_hint(&self) {
        let held = self
            .live
            .try_session()
            .is_some_and(|engine| !engine.history().is_empty());
        if held {
            self.view.notice(&format!(
                "to go on with this session later: keel resume {}",
                self.live.id()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_replay_shows_prompts_answers_and_calls_without_escapes_or_attachments() {
        let history = vec![
            Message::user("explain @a.rs\n\n<file path=\"a.rs\">\nfn a() {}\n</file>"),
            Message::new(
                Role::Assistant,
                vec![
                    ContentBlock::text("Reading it."),
                    ContentBlock::ToolUse {
                        id: "t1".into(),
                        name: "read_file".into(),
                        input: json!({"path": "a.rs"}),
                        invalid: None,
                    },
                ],
            ),
            Message::new(
                Role::User,
                vec![ContentBlock::tool_result("t1", "1\tfn a() {}", false)],
            ),
            Message::new(
                Role::Assistant,
                vec![ContentBlock::text("It is \x1b[2Jempty.")],
            ),
        ];
        let lines = replay_lines(Style::new(false), &history);
        assert_eq!(
            lines,
            [
                "› explain @a.rs",
                "Reading it.",
                "✓ read_file(a.rs) · 1 line",
                "It is \u{FFFD}[2Jempty."
            ]
        );
    }

    #[test]
    fn a_replayed_image_result_is_described_not_dumped() {
        let history = vec![
            Message::user("look"),
            Message::new(
                Role::Assistant,
                vec![ContentBlock::tool_use("t1", "screenshot", json!({}))],
            ),
            Message::new(
                Role::User,
                vec![keel_test_support::images::result_with_png(
                    "t1",
                    "the screen",
                )],
            ),
        ];
        let lines = replay_lines(Style::new(false), &history);
        assert_eq!(
            lines,
            [
                "› look",
                "✓ screenshot() · the screen · [image: image/png, 69 bytes]"
            ]
        );
    }

    #[test]
    fn a_long_session_replays_its_last_prompts() {
        let mut history = Vec::new();
        for n in 0..15 {
            history.push(Message::user(format!("prompt {n}")));
            history.push(Message::new(
                Role::Assistant,
                vec![ContentBlock::text(format!("answer {n}"))],
            ));
        }
        let lines = replay_lines(Style::new(false), &history);
        assert_eq!(lines[0], "(5 earlier prompts not shown)");
        assert_eq!(lines[1], "› prompt 5");
        assert_eq!(lines.len(), 21);
    }
}
