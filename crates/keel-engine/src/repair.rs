//! Tool-call repair: what small models get almost right, made right, and said.
//!
//! Small local models often call a tool by writing the call as JSON in their reply's text
//! (bare, in a fenced block, or in Qwen's `<tool_call>` tags) instead of through the API's
//! tool calls, or spell an argument `filePath` where the schema says `file_path`. Read
//! literally, the first is an answer that ends the run and the second a call that fails.
//!
//! [`repair_reply`] mends both, and only when there is one reading:
//! - **A call in the text.** The reply has no tool call, and its whole text (after trimming) is
//!   one JSON call, or an array of them, for tools that are offered. A call is an object
//!   `{"name", "arguments"}` (also `parameters`, `args` or `input`; the arguments an object or
//!   a JSON string of one), optionally with `id` and `"type": "function"`, or OpenAI's
//!   `{"function": {"name", "arguments"}}`, or `{"tool_calls": [...]}`. Any other key, a name
//!   no offered tool has, prose before or after, or two fenced blocks: the text stays text.
//! - **A tool name** off by case or separators (`Read-File` for `read_file`), when exactly
//!   one offered tool has that spelling. Only for calls read from text: a call through the API
//!   names its tool exactly or fails with the tool's name list.
//! - **Argument names** off by case or separators (`filePath`, `File-Path` for `file_path`),
//!   when exactly one property of the tool's schema matches and the input does not also give
//!   that property.
//!
//! Nothing is mended silently: each mended call gets a [`ToolCallRepair`]; the session emits
//! [`AgentEvent::ToolCallRepaired`](crate::AgentEvent::ToolCallRepaired) for it, counts it in
//! [`RunOutcome::repaired_calls`](crate::RunOutcome::repaired_calls), and the reply in the
//! history keeps the model's text and gains a note ([`REPAIR_NOTE_PREFIX`]) saying what keel
//! read, so the model, the session file and a reader of the transcript all see it.
//!
//! ```
//! use keel_engine::repair::{RepairKind, repair_reply};
//! use keel_provider::{ContentBlock, ToolDefinition};
//! use serde_json::json;
//!
//! let tools = [ToolDefinition {
//!     name: "read_file".into(),
//!     description: "Reads a file.".into(),
//!     input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
//! }];
//! let mut reply = vec![ContentBlock::text(
//!     "```json\n{\"name\": \"read_file\", \"arguments\": {\"Path\": \"src/lib.rs\"}}\n```",
//! )];
//! let repairs = repair_reply(&mut reply, &tools);
//! assert_eq!(repairs.len(), 1);
//! assert!(matches!(repairs[0].kinds[0], RepairKind::CallFromText));
//! let call = reply.iter().find_map(|block| match block {
//!     ContentBlock::ToolUse { name, input, .. } => Some((name.clone(), input.clone())),
//!     _ => None,
//! });
//! assert_eq!(call, Some(("read_file".into(), json!({"path": "src/lib.rs"}))));
//!
//! // Prose that merely contains JSON stays prose.
//! let mut prose = vec![ContentBlock::text(
//!     "Call it like this: {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}",
//! )];
//! assert!(repair_reply(&mut prose, &tools).is_empty());
//! ```

use keel_provider::{ContentBlock, ToolDefinition};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How the note keel adds to a repaired reply begins.
pub const REPAIR_NOTE_PREFIX: &str = "[keel repaired this reply:";

/// The most calls read from one reply's text; a longer array stays text.
const MAX_CALLS_FROM_TEXT: usize = 16;

/// One call keel mended, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRepair {
    /// The call's id, once the session has given it one (empty from [`repair_reply`] for a
    /// call read from text: the session assigns ids after repair).
    pub call_id: String,
    /// The tool called, by its offered name.
    pub tool: String,
    /// What was mended, in the order it was done.
    pub kinds: Vec<RepairKind>,
    /// Where the call is in the reply's content blocks.
    pub block: usize,
}

/// One thing mended in a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RepairKind {
    /// The call was written as JSON in the reply's text and is now a tool call.
    CallFromText,
    /// The tool's name was spelt `from`.
    ToolName {
        /// The name as the model wrote it.
        from: String,
    },
    /// Argument names were mapped to the schema's, `(as written, as the schema names it)`.
    ArgumentNames {
        /// Each renamed argument.
        renamed: Vec<(String, String)>,
    },
}

impl ToolCallRepair {
    /// One line saying what was mended, e.g. `read a call of read_file from the reply's text;
    /// argument "Path" read as "path"`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .kinds
            .iter()
            .map(|kind| match kind {
                RepairKind::CallFromText => {
                    format!("read a call of {} from the reply's text", self.tool)
                }
                RepairKind::ToolName { from } => {
                    format!("tool name \"{from}\" read as \"{}\"", self.tool)
                }
                RepairKind::ArgumentNames { renamed } => {
                    let pairs: Vec<String> = renamed
                        .iter()
                        .map(|(from, to)| format!("\"{from}\" as \"{to}\""))
                        .collect();
                    format!("{}'s arguments read {}", self.tool, pairs.join(", "))
                }
            })
            .collect();
        parts.join("; ")
    }
}

/// Mends the calls in a reply's `content` against the offered `tools`, as the module says,
/// and adds a note to the reply for each change. Returns what was mended; empty when nothing
/// was (and then `content` is unchanged).
pub fn repair_reply(
    content: &mut Vec<ContentBlock>,
    tools: &[ToolDefinition],
) -> Vec<ToolCallRepair> {
    if tools.is_empty() {
        return Vec::new();
    }
    let has_calls = content
        .iter()
        .any(|block| matches!(block, ContentBlock::ToolUse { .. }));
    // Calls read from the text, appended after the blocks already there.
    let mut from_text: Vec<(String, Option<String>, Value)> = Vec::new();
    if !has_calls && let Some(calls) = calls_in_text(content, tools) {
        from_text = calls;
    }
    let mut repairs = Vec::new();
    for (name, misspelt, input) in from_text {
        let mut kinds = vec![RepairKind::CallFromText];
        if let Some(from) = misspelt {
            kinds.push(RepairKind::ToolName { from });
        }
        repairs.push(ToolCallRepair {
            call_id: String::new(),
            tool: name.clone(),
            kinds,
            block: content.len(),
        });
        content.push(ContentBlock::ToolUse {
            id: String::new(),
            name,
            input,
            invalid: None,
        });
    }
    // Argument names, in every call (read from text or not).
    for (index, block) in content.iter_mut().enumerate() {
        let ContentBlock::ToolUse {
            id,
            name,
            input,
            invalid: None,
        } = block
        else {
            continue;
        };
        let Some(tool) = tools.iter().find(|tool| tool.name == *name) else {
            continue;
        };
        let renamed = rename_arguments(input, &tool.input_schema);
        if renamed.is_empty() {
            continue;
        }
        let kind = RepairKind::ArgumentNames { renamed };
        match repairs.iter_mut().find(|repair| repair.block == index) {
            Some(repair) => repair.kinds.push(kind),
            None => repairs.push(ToolCallRepair {
                call_id: id.clone(),
                tool: name.clone(),
                kinds: vec![kind],
                block: index,
            }),
        }
    }
    if repairs.is_empty() {
        return repairs;
    }
    repairs.sort_by_key(|repair| repair.block);
    // The note goes just before the first call, so every block index after it moves by one.
    let first_call = content
        .iter()
        .position(|block| matches!(block, ContentBlock::ToolUse { .. }))
        .unwrap_or(content.len());
    let descriptions: Vec<String> = repairs.iter().map(ToolCallRepair::describe).collect();
    content.insert(
        first_call,
        ContentBlock::text(format!("{REPAIR_NOTE_PREFIX} {}]", descriptions.join("; "))),
    );
    for repair in &mut repairs {
        if repair.block >= first_call {
            repair.block += 1;
        }
    }
    repairs
}

/// The calls a reply's whole text spells, each `(offered name, the name as written when it
/// differed, input)`; `None` unless every part of the text is a call of an offered tool.
fn calls_in_text(
    content: &[ContentBlock],
    tools: &[ToolDefinition],
) -> Option<Vec<(String, Option<String>, Value)>> {
    let mut text = String::new();
    for block in content {
        match block {
            ContentBlock::Text { text: part } => text.push_str(part),
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
            _ => return None,
        }
    }
    let values = json_payloads(text.trim())?;
    let mut calls = Vec::new();
    for value in values {
        collect_calls(value, &mut calls)?;
    }
    if calls.is_empty() || calls.len() > MAX_CALLS_FROM_TEXT {
        return None;
    }
    calls
        .into_iter()
        .map(|(written, input)| {
            let offered = offered_name(&written, tools)?;
            let misspelt = (offered != written).then_some(written);
            Some((offered.to_owned(), misspelt, input))
        })
        .collect()
}

/// The JSON values a text is made of: the text itself, one fenced block that is all of it, or
/// `<tool_call>…</tool_call>` sections that are all of it.
fn json_payloads(text: &str) -> Option<Vec<Value>> {
    if text.starts_with("<tool_call>") {
        let mut values = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let inner = rest.strip_prefix("<tool_call>")?;
            let (body, after) = inner.split_once("</tool_call>")?;
            values.push(parse_object_or_array(body.trim())?);
            rest = after.trim_start();
        }
        return Some(values);
    }
    let body = match text.strip_prefix("```") {
        Some(fenced) => {
            let (info, body) = fenced.split_once('\n')?;
            let info = info.trim();
            if !(info.is_empty()
                || info.eq_ignore_ascii_case("json")
                || info.eq_ignore_ascii_case("tool_call")
                || info.eq_ignore_ascii_case("tool_code"))
            {
                return None;
            }
            let body = body.trim_end().strip_suffix("```")?;
            // A second fence inside means two blocks (or one with prose between).
            if body.contains("```") {
                return None;
            }
            body.trim()
        }
        None => text,
    };
    Some(vec![parse_object_or_array(body)?])
}

/// `text` as a JSON object or array, nothing before or after it.
fn parse_object_or_array(text: &str) -> Option<Value> {
    if !(text.starts_with('{') || text.starts_with('[')) {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// Adds the calls `value` spells to `calls`; `None` when it is not only calls.
fn collect_calls(value: Value, calls: &mut Vec<(String, Value)>) -> Option<()> {
    match value {
        Value::Array(items) => {
            if items.is_empty() {
                return None;
            }
            for item in items {
                collect_calls(item, calls)?;
            }
            Some(())
        }
        Value::Object(mut object) => {
            if let Some(list) = object.remove("tool_calls") {
                return match list {
                    Value::Array(_) if object.is_empty() => collect_calls(list, calls),
                    _ => None,
                };
            }
            calls.push(call_of(object)?);
            Some(())
        }
        _ => None,
    }
}

/// The `(name, input)` an object spells, or `None` when it has any key a call does not.
fn call_of(mut object: Map<String, Value>) -> Option<(String, Value)> {
    // `"type": "function"` and an `id` may come along; nothing else.
    match object.remove("type") {
        None => {}
        Some(Value::String(kind)) if kind == "function" || kind == "tool_call" => {}
        Some(_) => return None,
    }
    if let Some(id) = object.remove("id")
        && !id.is_string()
    {
        return None;
    }
    if let Some(function) = object.remove("function") {
        let Value::Object(function) = function else {
            return None;
        };
        return if object.is_empty() {
            call_of(function)
        } else {
            None
        };
    }
    let Some(Value::String(name)) = object.remove("name") else {
        return None;
    };
    let mut input = None;
    for key in ["arguments", "parameters", "args", "input"] {
        if let Some(value) = object.remove(key) {
            if input.is_some() {
                return None;
            }
            input = Some(value);
        }
    }
    if !object.is_empty() {
        return None;
    }
    let input = match input {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(map)) => Value::Object(map),
        // OpenAI's shape: the arguments as JSON text.
        Some(Value::String(text)) => match serde_json::from_str(&text).ok()? {
            Value::Object(map) => Value::Object(map),
            _ => return None,
        },
        Some(_) => return None,
    };
    Some((name, input))
}

/// The offered tool `written` names: exactly, else the one tool whose name is the same
/// without case and separators.
fn offered_name<'a>(written: &str, tools: &'a [ToolDefinition]) -> Option<&'a str> {
    if let Some(tool) = tools.iter().find(|tool| tool.name == written) {
        return Some(&tool.name);
    }
    let key = fold(written);
    let mut matches = tools.iter().filter(|tool| fold(&tool.name) == key);
    let first = matches.next()?;
    matches.next().is_none().then_some(first.name.as_str())
}

/// Renames `input`'s keys that the schema does not have to the one property they spell
/// without case and separators; returns each `(from, to)`.
fn rename_arguments(input: &mut Value, schema: &Value) -> Vec<(String, String)> {
    let (Value::Object(arguments), Some(Value::Object(properties))) =
        (&*input, schema.get("properties"))
    else {
        return Vec::new();
    };
    // Each key the schema lacks, with the one property it spells, if one.
    let claims: Vec<(String, String)> = arguments
        .keys()
        .filter(|key| !properties.contains_key(*key))
        .filter_map(|key| {
            let folded = fold(key);
            let mut candidates = properties
                .keys()
                .filter(|property| fold(property) == folded);
            match (candidates.next(), candidates.next()) {
                (Some(target), None) => Some((key.clone(), target.clone())),
                _ => None,
            }
        })
        .collect();
    // A property the input already gives, or that two keys claim, has two readings: left.
    let renames: Vec<(String, String)> = claims
        .iter()
        .filter(|(_, to)| {
            !arguments.contains_key(to) && claims.iter().filter(|(_, t)| t == to).count() == 1
        })
        .cloned()
        .collect();
    if let Value::Object(arguments) = input {
        for (from, to) in &renames {
            if let Some(value) = arguments.remove(from) {
                arguments.insert(to.clone(), value);
            }
        }
    }
    renames
}

/// A name without case and separators (`_`, `-`, `.`, spaces).
fn fold(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}
