//! keel's events as Agent Client Protocol `session/update`s: text and thinking chunks, tool
//! calls (kind, title, locations, raw input, a diff for each file edit) and their updates
//! (progress while they run, output when they end), a resumed session's history replayed, and
//! a prompt's content blocks as keel's. The updates are values: a front end sends them over
//! its connection.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod client;

pub use client::{ClientApprover, ClientFiles, Connection};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, ImageContent, SessionUpdate, StopReason, TextContent,
    ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use keel::engine::{AgentEvent, RunOutcome, Stop};
use keel::provider::{Message, Role};
use serde_json::Value;

/// The most lines of a running call's progress shown in its update (the latest ones).
const PROGRESS_LINES: usize = 40;

/// What kind of tool `name` is, for the client's icons.
pub fn kind(name: &str) -> ToolKind {
    match name {
        "read_file" | "list_directory" | "git_status" | "git_diff" => ToolKind::Read,
        "write_file" | "patch_file" => ToolKind::Edit,
        "grep" | "glob" => ToolKind::Search,
        "run_command" | "git_commit" => ToolKind::Execute,
        _ => ToolKind::Other,
    }
}

/// A call's title: the tool and its primary argument.
pub fn title(name: &str, input: &Value) -> String {
    let argument = ["path", "command", "pattern", "task"]
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str));
    match argument {
        Some(argument) => format!("{name} {argument}"),
        None => name.to_owned(),
    }
}

/// The file a call names, resolved against `cwd`.
fn location(input: &Value, cwd: &Path) -> Option<PathBuf> {
    let path = input.get("path").and_then(Value::as_str)?;
    Some(cwd.join(path))
}

/// The diff a file edit makes, from its input.
fn diff(name: &str, input: &Value, cwd: &Path) -> Option<ToolCallContent> {
    let path = location(input, cwd)?;
    let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    let diff = match name {
        "patch_file" => Diff::new(path, text("new_string")?).old_text(text("old_string")),
        "write_file" => Diff::new(path, text("content")?),
        _ => return None,
    };
    Some(ToolCallContent::Diff(diff))
}

/// `text` as a tool call's content.
fn text_content(text: String) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::Text(TextContent::new(text)))
}

/// A command's output as a fenced block (a fence longer than any run of backticks in it), so
/// an editor shows it verbatim.
fn fenced(output: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in output.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}console\n{}\n{fence}", output.trim_end_matches('\n'))
}

/// A finished call's content: its output, fenced for a command.
fn output_content(name: &str, output: String) -> ToolCallContent {
    if kind(name) == ToolKind::Execute {
        text_content(fenced(&output))
    } else {
        text_content(output)
    }
}

/// The calls already shown to the client (as `pending`, before a permission question about
/// them): when one starts, the client gets an update of it, not a second `tool_call`.
pub type Announced = Arc<Mutex<HashSet<String>>>;

/// A new tool call as the client first sees it.
pub fn tool_call(id: String, name: &str, input: Value, cwd: &Path) -> ToolCall {
    let mut call = ToolCall::new(id, title(name, &input)).kind(kind(name));
    if let Some(path) = location(&input, cwd) {
        // A read from a line on: the editor can follow to that line.
        let line = input
            .get("start_line")
            .and_then(Value::as_u64)
            .and_then(|line| u32::try_from(line).ok());
        let mut place = ToolCallLocation::new(path);
        if let Some(line) = line {
            place = place.line(line);
        }
        call = call.locations(vec![place]);
    }
    if let Some(diff) = diff(name, &input, cwd) {
        call = call.content(vec![diff]);
    }
    call.raw_input(input)
}

fn status(is_error: bool) -> ToolCallStatus {
    if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    }
}

/// The stop reason ACP names for how a run ended.
pub fn stop_reason(stop: &Stop) -> StopReason {
    match stop {
        Stop::Cancelled => StopReason::Cancelled,
        Stop::MaxIterations => StopReason::MaxTurnRequests,
        Stop::TokenBudget { .. } | Stop::CostBudget { .. } => StopReason::MaxTokens,
        Stop::Refused { .. } => StopReason::Refusal,
        _ => StopReason::EndTurn,
    }
}

/// `text` as the agent's message.
pub fn message(text: String) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(
        text,
    ))))
}

/// A resumed session's history as updates: the user's text and images, the agent's thinking
/// and text, each tool call and how it ended (paths relative to `cwd`).
pub fn replay(history: &[Message], cwd: &Path) -> Vec<SessionUpdate> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut updates = Vec::new();
    for message in history {
        for block in &message.content {
            if let Some(update) = replayed(message.role, block, cwd, &mut names) {
                updates.push(update);
            }
        }
    }
    updates
}

/// One block of the history as an update, if it shows; `names` keeps the calls' tools.
fn replayed<'h>(
    role: Role,
    block: &'h keel::provider::ContentBlock,
    cwd: &Path,
    names: &mut HashMap<&'h str, &'h str>,
) -> Option<SessionUpdate> {
    let chunk = |text: &str| ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
    Some(match (role, block) {
        (Role::User, keel::provider::ContentBlock::Text { text }) => {
            SessionUpdate::UserMessageChunk(chunk(text))
        }
        (Role::User, keel::provider::ContentBlock::Image { image }) => {
            SessionUpdate::UserMessageChunk(ContentChunk::new(ContentBlock::Image(
                ImageContent::new(image.data(), image.media_type()),
            )))
        }
        (Role::Assistant, keel::provider::ContentBlock::Text { text }) => {
            SessionUpdate::AgentMessageChunk(chunk(text))
        }
        (Role::Assistant, keel::provider::ContentBlock::Thinking { thinking, .. }) => {
            SessionUpdate::AgentThoughtChunk(chunk(thinking))
        }
        (Role::Assistant, keel::provider::ContentBlock::Reasoning { summary, .. })
            if !summary.is_empty() =>
        {
            SessionUpdate::AgentThoughtChunk(chunk(&summary.join("\n\n")))
        }
        (
            _,
            keel::provider::ContentBlock::ToolUse {
                id, name, input, ..
            },
        ) => {
            names.insert(id, name);
            SessionUpdate::ToolCall(tool_call(id.clone(), name, input.clone(), cwd))
        }
        (
            _,
            keel::provider::ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            },
        ) => {
            let name = names.get(tool_use_id.as_str()).copied().unwrap_or_default();
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                tool_use_id.clone(),
                ToolCallUpdateFields::new()
                    .status(status(*is_error))
                    .content(vec![output_content(name, content.clone())]),
            ))
        }
        _ => return None,
    })
}

/// One prompt turn's events as updates: the calls' names and their latest progress lines.
pub struct TurnUpdates {
    cwd: PathBuf,
    announced: Announced,
    /// The calls of this turn the client has seen start.
    started: HashSet<String>,
    progress: HashMap<String, VecDeque<String>>,
    /// How the run ended, once it has.
    pub outcome: Option<RunOutcome>,
}

impl TurnUpdates {
    /// The updates of a turn of a session working in `cwd`, whose permission questions
    /// announce calls in `announced`.
    pub fn new(cwd: &Path, announced: Announced) -> Self {
        Self {
            cwd: cwd.to_path_buf(),
            announced,
            started: HashSet::new(),
            progress: HashMap::new(),
            outcome: None,
        }
    }

    /// Whether call `id` was shown to the client already; forgets it.
    fn was_announced(&self, id: &str) -> bool {
        self.announced
            .lock()
            .is_ok_and(|mut announced| announced.remove(id))
    }

    /// What `event` shows the client, if anything.
    pub fn event(&mut self, event: AgentEvent) -> Option<SessionUpdate> {
        let chunk = |text| ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
        match event {
            AgentEvent::TextDelta { text } if !text.is_empty() => {
                Some(SessionUpdate::AgentMessageChunk(chunk(text)))
            }
            AgentEvent::ThinkingDelta { text } if !text.is_empty() => {
                Some(SessionUpdate::AgentThoughtChunk(chunk(text)))
            }
            AgentEvent::ToolCallStarted { id, name, input } => {
                self.started.insert(id.clone());
                if self.was_announced(&id) {
                    let fields = ToolCallUpdateFields::new().status(ToolCallStatus::InProgress);
                    Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        id, fields,
                    )))
                } else {
                    let call =
                        tool_call(id, &name, input, &self.cwd).status(ToolCallStatus::InProgress);
                    Some(SessionUpdate::ToolCall(call))
                }
            }
            AgentEvent::ToolProgress { id, line, .. } => {
                let lines = self.progress.entry(id.clone()).or_default();
                if lines.len() == PROGRESS_LINES {
                    lines.pop_front();
                }
                lines.push_back(line);
                let shown = lines
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join("\n");
                let fields = ToolCallUpdateFields::new()
                    .status(ToolCallStatus::InProgress)
                    .content(vec![text_content(fenced(&shown))]);
                Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    id, fields,
                )))
            }
            AgentEvent::ToolCallFinished {
                id,
                name,
                output,
                is_error,
                ..
            } => Some(self.finished(id, &name, output, is_error)),
            AgentEvent::Finished(outcome) => {
                self.outcome = Some(outcome);
                None
            }
            _ => None,
        }
    }

    /// A finished call: an update of the call the client saw start, or the whole call when
    /// it was refused before it ran and without a question (a rule, a hook, the read-only
    /// mode).
    fn finished(
        &mut self,
        id: String,
        name: &str,
        output: String,
        is_error: bool,
    ) -> SessionUpdate {
        self.progress.remove(&id);
        let announced = self.was_announced(&id);
        let content = vec![output_content(name, output)];
        if self.started.remove(&id) || announced {
            let fields = ToolCallUpdateFields::new()
                .status(status(is_error))
                .content(content);
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields))
        } else {
            let call = ToolCall::new(id, name.to_owned())
                .kind(kind(name))
                .status(status(is_error))
                .content(content);
            SessionUpdate::ToolCall(call)
        }
    }
}

/// A prompt's blocks as keel sends them to the model: one text block — text as it is, a
/// resource link as `[@name](uri)`, an embedded text resource (a file or selection the
/// editor attached) after it in a `<context ref="uri">` block — then the images. Audio and
/// binary resources are not taken (keel's prompt capabilities say so), nor an image that is
/// not PNG, JPEG, GIF or WebP: each is an error naming it.
pub fn prompt_content(
    blocks: &[ContentBlock],
) -> Result<(String, Vec<keel::provider::ContentBlock>), String> {
    use agent_client_protocol::v1::schema::EmbeddedResourceResource;
    let mut text = Vec::new();
    let mut context = Vec::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(part) => text.push(part.text.clone()),
            ContentBlock::ResourceLink(link) => {
                text.push(format!("[@{}]({})", link.name, link.uri));
            }
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(resource) => context.push(format!(
                    "<context ref=\"{}\">\n{}\n</context>",
                    resource.uri, resource.text
                )),
                EmbeddedResourceResource::BlobResourceContents(resource) => {
                    return Err(format!(
                        "{}: keel takes text resources only, not binary ones",
                        resource.uri
                    ));
                }
                _ => return Err("a resource of a kind keel does not know".to_owned()),
            },
            ContentBlock::Image(image) => {
                let data = keel::provider::ImageData::new(&image.mime_type, &image.data)
                    .map_err(|err| format!("an image in the prompt: {err}"))?;
                images.push(keel::provider::ContentBlock::image(data));
            }
            ContentBlock::Audio(_) => {
                return Err(
                    "keel does not take audio (its promptCapabilities say audio: false)".to_owned(),
                );
            }
            _ => return Err("a content block of a kind keel does not know".to_owned()),
        }
    }
    let mut prompt = text.join("\n");
    for block in context {
        prompt.push_str("\n\n");
        prompt.push_str(&block);
    }
    Ok((prompt, images))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_longer_than_any_backticks_in_the_output() {
        assert_eq!(fenced("ok\n"), "```console\nok\n```");
        assert_eq!(fenced("a ```` b"), "`````console\na ```` b\n`````");
    }
}
