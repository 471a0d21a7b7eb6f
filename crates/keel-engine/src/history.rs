//! The history invariant: every `tool_use` is answered by exactly one `tool_result` in the
//! next message, which providers require and broken agents violate after interrupts.

use std::collections::HashSet;

use keel_provider::{ContentBlock, Message, Role};

/// The result given to a call that never got one (cut by a crash or an interrupt).
pub const INTERRUPTED: &str = "interrupted by the user";

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

/// Repairs `messages` so the invariant holds: a missing result is added as
/// [`INTERRUPTED`] (in a new user message if none follows), a duplicate or orphan result is
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
                    .map(|id| ContentBlock::tool_result(id.clone(), INTERRUPTED, true))
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
            vec![
                result("b"),
                ContentBlock::tool_result("a", INTERRUPTED, true)
            ]
        );
        assert_eq!(
            history[4].content,
            vec![ContentBlock::tool_result("c", INTERRUPTED, true)]
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
}
