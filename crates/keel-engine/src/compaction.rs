//! Context compaction: when the conversation nears the model's context window, the older part
//! is replaced by a summary the model writes for itself.
//!
//! The compacted history is `[original request + summary (+ the first kept user turn)]`
//! followed by the kept tail, verbatim. The cut never separates a `tool_use` from its
//! `tool_result` (see [`split_point`]), so the result keeps the pairing invariant of
//! [`crate::history`].
//!
//! The pieces can be used one by one ([`estimate_tokens`], [`needs_compaction`],
//! [`split_point`], [`summary_request`], [`rebuild`]) or all at once with [`compact`].

use keel_provider::{
    CachePolicy, CompletionRequest, ContentBlock, ImageData, Message, ModelCatalog, Provider,
    ProviderError, Role, StopReason, ToolChoice, ToolDefinition, Usage,
};

use crate::history::repair_pairing;

/// The system prompt of the summary request.
pub const SUMMARY_SYSTEM_PROMPT: &str = "\
You are writing a handoff summary of a coding session for yourself. The earlier part of the \
conversation will be deleted and replaced by your summary; the original request and the most \
recent messages are kept verbatim. Anything you leave out is lost, so be complete and exact, \
but do not repeat what does not matter any more.

Write plain text with these sections:
1. Task: what the user asked for, including every constraint and preference they stated.
2. Decisions: what was decided and why, and approaches that were tried and rejected.
3. Files: every file read, created or changed, with its path and its current state.
4. Verified: what was built, tested or checked, and the outcome.
5. Remaining: what is still to do, in order, and the next step.
6. Errors: exact error messages, commands and identifiers still relevant, quoted verbatim.

Do not call tools. Do not address the user. Reply with the summary only.";

/// The header of the summary block in the compacted history.
pub const SUMMARY_HEADER: &str = "[Summary of earlier work, written by the model for itself]";

/// The longest tool result, in bytes, copied whole into the summary request; longer ones keep
/// their start and end.
pub const MAX_TOOL_RESULT_BYTES: usize = 16_000;

/// When and how to compact.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPolicy {
    /// The fraction of the context window at which to compact, e.g. `0.85`.
    pub threshold: f64,
    /// The context window in tokens; `None` takes the model's window from the catalog. With
    /// neither, [`needs_compaction`] never asks for compaction.
    pub context_window: Option<u64>,
    /// How many of the latest messages are kept verbatim, at least.
    pub keep_recent_messages: usize,
    /// The most tokens the summary may take.
    pub summary_max_tokens: u32,
    /// The model that writes the summary; `None`: the session's own. A cheap model (a local
    /// server's, through a [`ModelRouter`](keel_provider::ModelRouter)) saves the hosted
    /// model's prices; when it fails, the session's model writes the summary instead, with a
    /// warning. The window compacted against stays the session model's.
    pub summary_model: Option<String>,
}

impl Default for CompactionPolicy {
    /// Compacts at 85% of the catalog's window, keeps the latest 6 messages and allows a
    /// summary of 4096 tokens, written by the session's model.
    fn default() -> Self {
        Self {
            threshold: 0.85,
            context_window: None,
            keep_recent_messages: 6,
            summary_max_tokens: 4096,
            summary_model: None,
        }
    }
}

/// A compacted history and what it saved.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    /// The new history, to replace the old one.
    pub messages: Vec<Message>,
    /// Estimated prompt tokens before (system prompt and tools included; bytes / 4).
    pub before_tokens: u64,
    /// Estimated prompt tokens after, estimated the same way.
    pub after_tokens: u64,
    /// The summary the model wrote, trimmed.
    pub summary: String,
    /// How many of the old messages were summarized (`messages[..summarized]`).
    pub summarized: usize,
    /// Tokens used by the summary request.
    pub usage: Usage,
}

/// Why compaction did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionError {
    /// The history is too short, or has no place to cut that keeps the recent messages.
    #[error("nothing to compact: the history is too short to summarize")]
    NothingToCompact,
    /// The summary request failed.
    #[error("the summary request failed: {0}")]
    Provider(#[from] ProviderError),
    /// The model replied without any summary text.
    #[error("the model returned an empty summary")]
    EmptySummary,
    /// The session's run was cancelled while the summary was being written.
    #[error("compaction cancelled")]
    Cancelled,
}

/// Rough size of a value in tokens: its serialized JSON length / 4, rounded up (the
/// estimate [`estimate_tokens`] uses for what no usage report covers).
pub fn json_tokens<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    let bytes = serde_json::to_vec(value).map_or(0, |v| v.len());
    bytes_to_tokens(bytes)
}

/// The tokens one image (of a prompt or a tool result) is estimated at, whatever its size: Anthropic's
/// documented figure for the largest image it takes without scaling it down (about 1.15
/// megapixels; tokens ≈ width × height / 750, so larger images are scaled to about this).
/// Its base64 text is not counted: the model never reads it as text.
pub const IMAGE_TOKENS: u64 = 1_600;

/// The images `block` carries.
fn images_of(block: &ContentBlock) -> &[ImageData] {
    match block {
        ContentBlock::ToolResult { images, .. } => images,
        ContentBlock::Image { image } => std::slice::from_ref(image),
        _ => &[],
    }
}

/// Rough size of `blocks` in tokens: as [`json_tokens`], except that each image counts as
/// [`IMAGE_TOKENS`] instead of its base64 text.
fn blocks_tokens<'a, T: serde::Serialize + ?Sized>(
    value: &T,
    blocks: impl Iterator<Item = &'a ContentBlock>,
) -> u64 {
    let (mut count, mut base64) = (0u64, 0usize);
    for image in blocks.flat_map(images_of) {
        count = count.saturating_add(1);
        base64 = base64.saturating_add(image.data().len());
    }
    let bytes = serde_json::to_vec(value).map_or(0, |v| v.len());
    // Base64 needs no escaping in JSON, so its bytes are exactly these.
    bytes_to_tokens(bytes.saturating_sub(base64)).saturating_add(count.saturating_mul(IMAGE_TOKENS))
}

/// Rough size of one block in tokens: its serialized JSON length / 4, each image it carries
/// counted as [`IMAGE_TOKENS`] instead.
pub fn block_tokens(block: &ContentBlock) -> u64 {
    blocks_tokens(block, std::iter::once(block))
}

/// Rough size of `messages` in tokens, as [`estimate_tokens`] counts them: their serialized
/// JSON length / 4, each image counted as [`IMAGE_TOKENS`] instead of its base64 text.
pub fn messages_tokens(messages: &[Message]) -> u64 {
    blocks_tokens(messages, messages.iter().flat_map(|m| m.content.iter()))
}

fn bytes_to_tokens(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(4)).unwrap_or(u64::MAX)
}

/// Estimated prompt tokens of a request with this system prompt, tools and messages.
///
/// With `last_report = Some((usage, covered))` — the usage of the last call, whose prompt held
/// `messages[..covered]` — the estimate is that call's whole prompt
/// ([`Usage::total_input_tokens`]) plus about one token per 4 bytes of serialized JSON for
/// `messages[covered..]`. Without a report, or when `covered` is beyond the end of `messages`
/// (the history shrank since, so the report is stale), everything is estimated at 4 bytes per
/// token, system prompt and tool definitions included. Either way an image in a tool result
/// counts as [`IMAGE_TOKENS`], not by its base64 size ([`messages_tokens`]).
pub fn estimate_tokens(
    system: Option<&str>,
    tools: &[ToolDefinition],
    messages: &[Message],
    last_report: Option<(Usage, usize)>,
) -> u64 {
    if let Some((usage, covered)) = last_report
        && let Some(added) = messages.get(covered..)
    {
        return usage
            .total_input_tokens()
            .saturating_add(messages_tokens(added));
    }
    bytes_to_tokens(system.map_or(0, str::len))
        .saturating_add(json_tokens(tools))
        .saturating_add(messages_tokens(messages))
}

/// Whether `estimate` reaches the policy's threshold of the context window: the policy's
/// `context_window`, else the catalog's window for `model`. Unknown model and no configured
/// window: never.
pub fn needs_compaction(
    estimate: u64,
    model: &str,
    catalog: &ModelCatalog,
    policy: &CompactionPolicy,
) -> bool {
    let window = policy
        .context_window
        .or_else(|| catalog.context_window(model));
    match window {
        // Token counts are far below 2^53, so the conversion is exact.
        #[allow(clippy::cast_precision_loss)]
        Some(window) if window > 0 => estimate as f64 >= policy.threshold * window as f64,
        _ => false,
    }
}

fn has_tool_result(message: &Message) -> bool {
    message
        .content
        .iter()
        .any(|block| matches!(block, ContentBlock::ToolResult { .. }))
}

/// Whether `cut` is a place where [`rebuild`] keeps the tail verbatim and the pairing
/// invariant: `2 <= cut < messages.len()`, the first message is a user message, and
/// `messages[cut]` is either an assistant message (its calls are answered in the kept tail) or
/// a user message holding no `tool_result` (a new user turn, merged into the first message).
/// A user message holding results is never a cut: its calls would be summarized away.
pub fn is_valid_cut(messages: &[Message], cut: usize) -> bool {
    let Some(first) = messages.first() else {
        return false;
    };
    if first.role != Role::User || cut < 2 {
        return false;
    }
    messages
        .get(cut)
        .is_some_and(|m| m.role == Role::Assistant || !has_tool_result(m))
}

/// Where to cut: `messages[..cut]` are summarized, `messages[cut..]` kept verbatim.
///
/// The rule: the largest valid cut (see [`is_valid_cut`]) that keeps at least `keep_recent`
/// messages (and always at least one). If that cut is an assistant message answering a new
/// user turn (a user message without results, other than the original request), the cut moves
/// back onto that user message, so the latest instruction is kept verbatim rather than only
/// summarized. The first message (the original request) is re-inserted verbatim by
/// [`rebuild`] and must be a user message.
///
/// `None` when there is too little to compact: no valid cut leaves something to summarize
/// besides the original request.
pub fn split_point(messages: &[Message], keep_recent: usize) -> Option<usize> {
    let latest = messages.len().checked_sub(keep_recent.max(1))?;
    let cut = (2..=latest)
        .rev()
        .find(|&cut| is_valid_cut(messages, cut))?;
    let before = cut - 1;
    let new_turn = messages[cut].role == Role::Assistant
        && messages[before].role == Role::User
        && !has_tool_result(&messages[before]);
    if new_turn && is_valid_cut(messages, before) {
        return Some(before);
    }
    Some(cut)
}

/// The request asking the model for a handoff summary of `messages[..cut]`.
///
/// The old messages are rendered as a text transcript in one user message rather than sent as
/// messages: the request has no tools (providers refuse `tool_use` blocks without tool
/// definitions) and nothing to pair. Thinking blocks are left out; a tool result longer than
/// [`MAX_TOOL_RESULT_BYTES`] keeps its start and end. Prompt caching is off: the prompt is
/// used once.
pub fn summary_request(
    model: &str,
    messages: &[Message],
    cut: usize,
    max_tokens: u32,
) -> CompletionRequest {
    let old = &messages[..cut.min(messages.len())];
    let mut text = String::from(
        "Here is the earlier part of the conversation, which is about to be deleted:\n\n\
         <transcript>\n",
    );
    for message in old {
        render_message(&mut text, message);
    }
    text.push_str("</transcript>\n\nWrite the handoff summary now.");
    let mut request = CompletionRequest::new(model)
        .system(SUMMARY_SYSTEM_PROMPT)
        .message(Message::user(text))
        .max_tokens(max_tokens);
    request.tool_choice = ToolChoice::None;
    request.cache = CachePolicy::Disabled;
    request
}

fn render_message(out: &mut String, message: &Message) {
    out.push_str(match message.role {
        Role::User => "## user\n",
        Role::Assistant => "## assistant\n",
    });
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => {
                out.push_str(text);
                out.push('\n');
            }
            ContentBlock::Image { image } => {
                out.push_str(&format!("[image: {}]\n", image.describe()));
            }
            ContentBlock::ToolUse {
                id, name, input, ..
            } => {
                out.push_str(&format!("[tool call {id}: {name}] {input}\n"));
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                images,
            } => {
                let kind = if *is_error {
                    "tool error"
                } else {
                    "tool result"
                };
                out.push_str(&format!("[{kind} {tool_use_id}]\n"));
                out.push_str(&clip(content, MAX_TOOL_RESULT_BYTES));
                out.push('\n');
                // The summary model gets no pictures, only what they were.
                for image in images {
                    out.push_str(&format!("[image: {}]\n", image.describe()));
                }
            }
            // Reasoning is private and signature-bound; the summary works from what was done.
            _ => {}
        }
    }
    out.push('\n');
}

/// `text` if it fits in `max` bytes, else its start and end (keel's one head+tail capture,
/// [`keel_tool::HeadTail`]) with a marker between.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut kept = keel_tool::HeadTail::new(max / 2, max / 2);
    kept.push(text.as_bytes());
    kept.render(|omitted, _| format!("[... {omitted} bytes omitted ...]"))
        .0
}

/// The compacted history: one user message holding the original request's blocks verbatim and
/// then a text block `"{SUMMARY_HEADER}\n{summary}"`, followed by `messages[cut..]`.
///
/// When `messages[cut]` is a user message, its blocks are appended to that first message
/// (after the summary) so roles still alternate; otherwise the tail follows as is. With a cut
/// from [`split_point`] the tail is verbatim and the pairing invariant holds. For any other
/// `cut` (clamped to `1..=len`) the result is repaired with
/// [`repair_pairing`], with a warning, so the invariant holds
/// anyway.
pub fn rebuild(messages: &[Message], cut: usize, summary: &str) -> Vec<Message> {
    let cut = cut.clamp(1, messages.len().max(1));
    let mut first: Vec<ContentBlock> = match messages.first() {
        Some(message) if message.role == Role::User => message
            .content
            .iter()
            .filter(|block| !matches!(block, ContentBlock::ToolResult { .. }))
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    first.push(ContentBlock::text(format!("{SUMMARY_HEADER}\n{summary}")));
    let mut tail = messages.get(cut..).unwrap_or_default().iter();
    let mut rebuilt = Vec::with_capacity(messages.len().saturating_sub(cut) + 1);
    if let Some(next) = messages.get(cut)
        && next.role == Role::User
    {
        first.extend(next.content.iter().cloned());
        tail.next();
    }
    rebuilt.push(Message::new(Role::User, first));
    rebuilt.extend(tail.cloned());
    let fixes = repair_pairing(&mut rebuilt);
    if fixes > 0 {
        tracing::warn!(
            cut,
            fixes,
            "compaction cut split tool calls; history repaired"
        );
    }
    rebuilt
}

/// Compacts `messages`: finds the cut ([`split_point`] with the policy's
/// `keep_recent_messages`), asks `provider` for a summary of the older part
/// ([`summary_request`]) and [`rebuild`]s the history. The token estimates before and after
/// use [`estimate_tokens`] without a report, so they compare like with like.
pub async fn compact(
    provider: &dyn Provider,
    model: &str,
    system: Option<&str>,
    tools: &[ToolDefinition],
    messages: &[Message],
    policy: &CompactionPolicy,
) -> Result<Compaction, CompactionError> {
    let cut = split_point(messages, policy.keep_recent_messages)
        .ok_or(CompactionError::NothingToCompact)?;
    let before_tokens = estimate_tokens(system, tools, messages, None);
    let request = summary_request(model, messages, cut, policy.summary_max_tokens);
    tracing::debug!(cut, before_tokens, "requesting compaction summary");
    let response = provider.tool_use_completion(&request).await?;
    let summary = response.text().trim().to_owned();
    if summary.is_empty() {
        return Err(CompactionError::EmptySummary);
    }
    if response.stop_reason == StopReason::MaxTokens {
        tracing::warn!(
            max_tokens = policy.summary_max_tokens,
            "compaction summary was cut at the output limit"
        );
    }
    let rebuilt = rebuild(messages, cut, &summary);
    let after_tokens = estimate_tokens(system, tools, &rebuilt, None);
    tracing::info!(
        summarized = cut,
        before_tokens,
        after_tokens,
        "history compacted"
    );
    Ok(Compaction {
        messages: rebuilt,
        before_tokens,
        after_tokens,
        summary,
        summarized: cut,
        usage: response.usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_both_ends_on_char_boundaries() {
        let text = "é".repeat(100);
        let clipped = clip(&text, 51);
        assert!(clipped.starts_with('é') && clipped.ends_with('é'));
        assert!(clipped.contains("bytes omitted"));
        assert_eq!(clip("short", 51), "short");
    }
}
