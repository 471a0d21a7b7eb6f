//! The history invariants every request keeps, and the canonical form a history is put in
//! on load and before each request ([`canonicalize`]):
//!
//! - **pairing**: every `tool_use` is answered by exactly one `tool_result` in the next
//!   message, which providers require and broken agents violate after interrupts and
//!   crashes ([`check_pairing`], [`repair_pairing`]);
//! - **alternation**: never two user (or two assistant) messages in a row — a user message
//!   that would follow another is merged into it ([`merge_consecutive`]), e.g. a prompt after
//!   a run that stopped at its iteration limit, or after a crash between prompt and reply;
//! - **unique ids**: every `tool_use` id is non-empty, made of `[A-Za-z0-9_-]` and used once
//!   in the whole history; others are renamed `toolu_keel_<n>` together with their result
//!   ([`unique_ids`]).

use std::collections::{HashMap, HashSet, VecDeque};

use keel_provider::{ContentBlock, Message, Role};

/// The result given to a call that was stopped or never run because the person cancelled.
pub const INTERRUPTED: &str = "interrupted by the user";

/// The result given to a call that has none in the history: keel stopped (killed, crashed)
/// before the call finished. The call is never run again.
pub const STOPPED: &str = "interrupted: keel stopped before this call finished, so it may have \
                           run partly (check its effects); it was not run again";

/// The prefix of the ids given to calls whose id was missing, malformed or already used.
pub const RENAMED_ID_PREFIX: &str = "toolu_keel_";

/// Whether `messages` keeps the invariant; the error says where it breaks.
pub fn check_pairing(messages: &[Message]) -> Result<(), String> {
    for (i, message) in messages.iter().enumerate() {
        let calls: Vec<&str> = tool_use_ids(message).collect();
        let next_results: Vec<&str> = messages.get(i + 1).map(result_ids).unwrap_or_default();
        if message.role == Role::Assistant {
            for id in &calls {
                let count = next_results.iter().filter(|r| *r == id).count();
                if count != 1 {
                    return Err(format!(
                        "message {i}: tool_use {id} has {count} tool_results in the next message"
                    ));
                }
            }
        }
        if message.role == Role::User && i > 0 {
            let asked: HashSet<&str> = tool_use_ids(&messages[i - 1]).collect();
            for id in result_ids(message) {
                if !asked.contains(id) {
                    return Err(format!(
                        "message {i}: tool_result {id} answers no tool_use in the message before"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn tool_use_ids(message: &Message) -> impl Iterator<Item = &str> {
    message.content.iter().filter_map(|block| match block {
        ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
        _ => None,
    })
}

fn result_ids(message: &Message) -> Vec<&str> {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
        .collect()
}

/// Repairs `messages` so the pairing invariant holds: a missing result is added as
/// [`STOPPED`] (in a new user message if none follows), a duplicate or orphan result is
/// dropped, and a message left empty is removed. Returns how many fixes were made.
pub fn repair_pairing(messages: &mut Vec<Message>) -> usize {
    let mut fixes = 0;
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role == Role::Assistant {
            let calls: Vec<String> = tool_use_ids(&messages[i]).map(str::to_owned).collect();
            if !calls.is_empty() {
                let needs_message = messages.get(i + 1).is_none_or(|m| m.role != Role::User);
                if needs_message {
                    messages.insert(i + 1, Message::new(Role::User, Vec::new()));
                }
                let next = &mut messages[i + 1];
                // Keep the first result for each call, drop duplicates and orphans.
                let mut seen = HashSet::new();
                let before = next.content.len();
                next.content.retain(|block| match block {
                    ContentBlock::ToolResult { tool_use_id, .. } => {
                        calls.contains(tool_use_id) && seen.insert(tool_use_id.clone())
                    }
                    _ => true,
                });
                fixes += before - next.content.len();
                // Missing results go first, in call order, before any text.
                let missing: Vec<ContentBlock> = calls
                    .iter()
                    .filter(|id| !seen.contains(*id))
                    .map(|id| ContentBlock::tool_result(id.clone(), STOPPED, true))
                    .collect();
                fixes += missing.len();
                let insert_at = next
                    .content
                    .iter()
                    .rposition(|b| matches!(b, ContentBlock::ToolResult { .. }))
                    .map_or(0, |p| p + 1);
                next.content.splice(insert_at..insert_at, missing);
            }
        } else if i == 0 || messages[i - 1].role != Role::Assistant {
            // A user message not after an assistant one may not hold results.
            let before = messages[i].content.len();
            messages[i]
                .content
                .retain(|block| !matches!(block, ContentBlock::ToolResult { .. }));
            fixes += before - messages[i].content.len();
        }
        if messages[i].content.is_empty() {
            messages.remove(i);
            fixes += 1;
            continue;
        }
        i += 1;
    }
    fixes
}

/// Whether `id` may be sent back on both wire formats: non-empty, `[A-Za-z0-9_-]` only.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Gives every `tool_use` a unique valid id: an id that is empty, not made of
/// `[A-Za-z0-9_-]`, or already used earlier in `messages` is replaced by the first free
/// `toolu_keel_<n>`, and the result answering that call (the k-th result naming the old id in
/// the next message answers the k-th call that had it) is renamed with it. Deterministic:
/// the same messages always get the same names. Returns how many ids were changed.
pub fn unique_ids(messages: &mut [Message]) -> usize {
    unique_ids_from(messages, 0)
}

/// [`unique_ids`] for `messages[start..]`, taking the ids of `messages[..start]` as already
/// used (they are not changed): how a new reply is checked against the history.
pub(crate) fn unique_ids_from(messages: &mut [Message], start: usize) -> usize {
    // The usual case, checked without allocating an id: nothing to rename.
    let mut ids: HashSet<&str> = HashSet::new();
    let all_fine = messages
        .iter()
        .flat_map(tool_use_ids)
        .all(|id| is_valid_id(id) && ids.insert(id));
    if all_fine {
        return 0;
    }
    let mut used: HashSet<String> = messages
        .iter()
        .flat_map(tool_use_ids)
        .map(str::to_owned)
        .collect();
    let mut seen: HashSet<String> = messages[..start.min(messages.len())]
        .iter()
        .flat_map(tool_use_ids)
        .map(str::to_owned)
        .collect();
    let mut next = 1_u64;
    let mut fixes = 0;
    for i in start..messages.len() {
        if messages[i].role != Role::Assistant {
            continue;
        }
        // For each id as the model gave it, the ids its calls now have, in order.
        let mut finals: HashMap<String, VecDeque<String>> = HashMap::new();
        let mut renamed = false;
        for block in &mut messages[i].content {
            let ContentBlock::ToolUse { id, .. } = block else {
                continue;
            };
            let original = id.clone();
            if !is_valid_id(id) || !seen.insert(id.clone()) {
                let fresh = loop {
                    let candidate = format!("{RENAMED_ID_PREFIX}{next}");
                    next += 1;
                    if used.insert(candidate.clone()) {
                        break candidate;
                    }
                };
                tracing::warn!(old = %original, new = %fresh, "renamed a missing or duplicate tool call id");
                seen.insert(fresh.clone());
                *id = fresh;
                fixes += 1;
                renamed = true;
            }
            finals.entry(original).or_default().push_back(id.clone());
        }
        if !renamed {
            continue;
        }
        if let Some(next_message) = messages.get_mut(i + 1)
            && next_message.role == Role::User
        {
            for block in &mut next_message.content {
                if let ContentBlock::ToolResult { tool_use_id, .. } = block
                    && let Some(name) = finals
                        .get_mut(tool_use_id.as_str())
                        .and_then(VecDeque::pop_front)
                {
                    *tool_use_id = name;
                }
            }
        }
    }
    fixes
}

/// Merges every message into the one before it when both have the same role, so roles
/// alternate. Returns how many messages were merged away.
pub fn merge_consecutive(messages: &mut Vec<Message>) -> usize {
    let mut merged = 0;
    let mut i = 1;
    while i < messages.len() {
        if messages[i].role == messages[i - 1].role {
            let content = std::mem::take(&mut messages[i].content);
            messages[i - 1].content.extend(content);
            messages.remove(i);
            merged += 1;
        } else {
            i += 1;
        }
    }
    merged
}

/// Puts `messages` in canonical form — unique ids, every call answered once, roles
/// alternating — as is done on load and before each request. A history already canonical is
/// left as it is. Returns how many fixes were made.
pub fn canonicalize(messages: &mut Vec<Message>) -> usize {
    let mut fixes = unique_ids(messages);
    fixes += repair_pairing(messages);
    let merged = merge_consecutive(messages);
    if merged > 0 {
        // Merging two assistant messages may leave a call unanswered.
        fixes += merged + repair_pairing(messages);
    }
    fixes
}

/// Adds the tool result `block` to the history: to the user message after the assistant
/// message that made the calls (made if missing), in the order of the calls, whatever order
/// the results came in. How results are added both while a run goes and when a session is
/// replayed, so both give the same message.
pub fn insert_result(messages: &mut Vec<Message>, block: ContentBlock) {
    let ContentBlock::ToolResult { tool_use_id, .. } = &block else {
        messages.push(Message::new(Role::User, vec![block]));
        return;
    };
    let Some(last) = messages.last() else {
        messages.push(Message::new(Role::User, vec![block]));
        return;
    };
    if last.role == Role::Assistant {
        messages.push(Message::new(Role::User, vec![block]));
        return;
    }
    let order: Vec<&str> = messages
        .len()
        .checked_sub(2)
        .and_then(|i| messages.get(i))
        .filter(|m| m.role == Role::Assistant)
        .map(|m| tool_use_ids(m).collect())
        .unwrap_or_default();
    let rank = |id: &str| order.iter().position(|c| *c == id).unwrap_or(usize::MAX);
    let mine = rank(tool_use_id);
    let target = messages.len() - 1;
    let content = &messages[target].content;
    let at = content
        .iter()
        .position(|b| match b {
            ContentBlock::ToolResult { tool_use_id, .. } => rank(tool_use_id) > mine,
            _ => true,
        })
        .unwrap_or(content.len());
    messages[target].content.insert(at, block);
}

/// Whether the history may be rewound to its first `len` messages: `len` is within it and
/// does not split a call from its result (the cut may not end right after an assistant
/// message with tool calls). The error says why not.
pub fn check_rewind(messages: &[Message], len: usize) -> Result<(), String> {
    if len > messages.len() {
        return Err(format!(
            "the conversation has only {} messages",
            messages.len()
        ));
    }
    if let Some(before) = len.checked_sub(1).and_then(|i| messages.get(i))
        && before.role == Role::Assistant
        && tool_use_ids(before).next().is_some()
    {
        return Err(format!(
            "message {len} is the result of the tool calls just before it; rewind to the \
             start of a prompt"
        ));
    }
    Ok(())
}

/// Where a new prompt starts, as a length to rewind to: the history's length, unless the
/// prompt will be merged into the last message (a user message): then the start of that
/// message, or, when it holds the results of the calls before it, the start of the
/// assistant message that made them (a rewind must not split a call from its result).
pub fn prompt_boundary(messages: &[Message]) -> usize {
    let len = messages.len();
    match messages.last() {
        Some(last) if last.role == Role::User => {
            if result_ids(last).is_empty() {
                len - 1
            } else {
                len.saturating_sub(2)
            }
        }
        _ => len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> ContentBlock {
        ContentBlock::tool_use(id, "read_file", json!({}))
    }

    fn result(id: &str) -> ContentBlock {
        ContentBlock::tool_result(id, "ok", false)
    }

    #[test]
    fn missing_duplicate_and_orphan_results_are_repaired() {
        let mut history = vec![
            Message::user("go"),
            Message::new(Role::Assistant, vec![call("a"), call("b")]),
            Message::new(Role::User, vec![result("b"), result("b"), result("zz")]),
            Message::new(Role::Assistant, vec![call("c")]),
        ];
        assert!(check_pairing(&history).is_err());
        let fixes = repair_pairing(&mut history);
        // A duplicate and an orphan dropped, two missing results added.
        assert_eq!(fixes, 4);
        check_pairing(&history).unwrap();
        assert_eq!(
            history[2].content,
            vec![result("b"), ContentBlock::tool_result("a", STOPPED, true)]
        );
        assert_eq!(
            history[4].content,
            vec![ContentBlock::tool_result("c", STOPPED, true)]
        );
        assert_eq!(repair_pairing(&mut history), 0);
    }

    #[test]
    fn results_in_the_wrong_place_are_removed() {
        let mut history = vec![
            Message::new(Role::User, vec![result("x")]),
            Message::user("hello"),
        ];
        repair_pairing(&mut history);
        assert_eq!(history, vec![Message::user("hello")]);
    }

    #[test]
    fn results_are_inserted_in_call_order_whatever_order_they_come_in() {
        let mut history = vec![
            Message::user("go"),
            Message::new(Role::Assistant, vec![call("a"), call("b"), call("c")]),
        ];
        for id in ["c", "a", "b"] {
            insert_result(&mut history, result(id));
        }
        assert_eq!(
            history[2].content,
            vec![result("a"), result("b"), result("c")]
        );
    }

    #[test]
    fn consecutive_user_messages_are_merged_and_canonical_form_is_stable() {
        let mut history = vec![
            Message::user("go"),
            Message::new(Role::Assistant, vec![call("a")]),
            Message::user("again"),
            Message::user("and again"),
        ];
        assert!(canonicalize(&mut history) > 0);
        assert_eq!(history.len(), 3);
        assert_eq!(
            history[2].content,
            vec![
                ContentBlock::tool_result("a", STOPPED, true),
                ContentBlock::text("again"),
                ContentBlock::text("and again"),
            ]
        );
        let before = history.clone();
        assert_eq!(canonicalize(&mut history), 0);
        assert_eq!(history, before);
    }

    #[test]
    fn rewind_points_never_split_a_call_from_its_result() {
        let history = vec![
            Message::user("go"),
            Message::new(Role::Assistant, vec![call("a")]),
            Message::new(Role::User, vec![result("a")]),
            Message::assistant("done"),
        ];
        assert!(check_rewind(&history, 0).is_ok());
        assert!(check_rewind(&history, 1).is_ok());
        assert!(check_rewind(&history, 2).is_err());
        assert!(check_rewind(&history, 3).is_ok());
        assert!(check_rewind(&history, 4).is_ok());
        assert!(check_rewind(&history, 5).is_err());
        assert_eq!(prompt_boundary(&history), 4);
        // A prompt that will join the results left last starts before their call.
        assert_eq!(prompt_boundary(&history[..3]), 1);
        // One that will join an unanswered prompt starts with it.
        assert_eq!(prompt_boundary(&history[..1]), 0);
    }

    #[test]
    fn ids_are_checked_for_both_wire_formats() {
        assert!(is_valid_id("toolu_01A-b"));
        assert!(is_valid_id("call_abc123"));
        assert!(!is_valid_id(""));
        assert!(!is_valid_id("call.1"));
        assert!(!is_valid_id("a b"));
    }
}
