//! Tool-call repair: a reply whose whole text is a JSON call of an offered tool becomes that
//! call, and argument or tool names off by case or separators are mapped when there is one
//! reading; everything else stays as the model wrote it. Each repair is noted in the reply,
//! reported as an event and counted in the outcome.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::common::{Runs, check_request, counting_tools};
use futures::StreamExt;
use keel_engine::repair::{REPAIR_NOTE_PREFIX, RepairKind, repair_reply};
use keel_engine::{Agent, AgentEvent, Stop};
use keel_provider::{ContentBlock, StopReason, ToolDefinition};
use keel_test_support::scripted::{ScriptedProvider, Turn, reply};
use serde_json::{Value, json};

fn tool(name: &str, properties: &[&str]) -> ToolDefinition {
    let properties: serde_json::Map<String, Value> = properties
        .iter()
        .map(|p| ((*p).to_owned(), json!({"type": "string"})))
        .collect();
    ToolDefinition {
        name: name.into(),
        description: String::new(),
        input_schema: json!({"type": "object", "properties": properties}),
    }
}

fn tools() -> Vec<ToolDefinition> {
    vec![
        tool("read_file", &["path"]),
        tool("edit_file", &["file_path", "old_string", "new_string"]),
        tool("run_command", &["command", "timeout_secs"]),
        tool("list_files", &[]),
    ]
}

/// Calls as `(name, input)`.
type Calls = Vec<(String, Value)>;

/// The calls in `content`.
fn calls(content: &[ContentBlock]) -> Calls {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse { name, input, .. } => Some((name.clone(), input.clone())),
            _ => None,
        })
        .collect()
}

fn text_reply(text: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::text(text)]
}

#[test]
fn calls_written_as_text_become_calls() {
    let read = || ("read_file".to_owned(), json!({"path": "src/lib.rs"}));
    let ls = || ("run_command".to_owned(), json!({"command": "ls"}));
    let cases: Vec<(&str, String, Calls)> = vec![
        (
            "bare JSON",
            r#"{"name": "read_file", "arguments": {"path": "src/lib.rs"}}"#.into(),
            vec![read()],
        ),
        (
            "surrounded by blank lines",
            "\n\n  {\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lib.rs\"}}  \n".into(),
            vec![read()],
        ),
        (
            "a json fence",
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lib.rs\"}}\n```"
                .into(),
            vec![read()],
        ),
        (
            "a bare fence",
            "```\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lib.rs\"}}\n```".into(),
            vec![read()],
        ),
        (
            "Llama's parameters",
            r#"{"name": "run_command", "parameters": {"command": "ls"}}"#.into(),
            vec![ls()],
        ),
        (
            "OpenAI's shape, arguments as JSON text",
            r#"{"id": "call_1", "type": "function", "function": {"name": "run_command", "arguments": "{\"command\": \"ls\"}"}}"#.into(),
            vec![ls()],
        ),
        (
            "Qwen's tool_call tags, twice",
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lib.rs\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>".into(),
            vec![read(), ls()],
        ),
        (
            "an array",
            r#"[{"name": "read_file", "arguments": {"path": "src/lib.rs"}}, {"name": "run_command", "args": {"command": "ls"}}]"#.into(),
            vec![read(), ls()],
        ),
        (
            "a tool_calls list",
            r#"{"tool_calls": [{"function": {"name": "run_command", "arguments": {"command": "ls"}}}]}"#.into(),
            vec![ls()],
        ),
        (
            "a tool without arguments",
            r#"{"name": "list_files"}"#.into(),
            vec![("list_files".into(), json!({}))],
        ),
        (
            "null arguments",
            r#"{"name": "list_files", "arguments": null}"#.into(),
            vec![("list_files".into(), json!({}))],
        ),
    ];
    for (case, text, expected) in cases {
        let mut content = text_reply(&text);
        let repairs = repair_reply(&mut content, &tools());
        assert_eq!(calls(&content), expected, "{case}");
        assert_eq!(repairs.len(), expected.len(), "{case}");
        for repair in &repairs {
            assert_eq!(repair.kinds[0], RepairKind::CallFromText, "{case}");
            // Each repair points at its call.
            assert!(
                matches!(&content[repair.block], ContentBlock::ToolUse { name, .. } if *name == repair.tool),
                "{case}"
            );
        }
        // The model's text is kept, and a note says what keel read.
        assert_eq!(content[0], ContentBlock::text(text.clone()), "{case}");
        let ContentBlock::Text { text: note } = &content[1] else {
            panic!("{case}: no note: {content:?}");
        };
        assert!(note.starts_with(REPAIR_NOTE_PREFIX), "{case}: {note}");
        assert!(note.contains("from the reply's text"), "{case}: {note}");
    }
}

#[test]
fn prose_and_near_misses_stay_as_written() {
    let cases: Vec<(&str, String)> = vec![
        (
            "prose around JSON",
            r#"Call it like this: {"name": "read_file", "arguments": {"path": "a"}}"#.into(),
        ),
        (
            "JSON then prose",
            "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\nThat reads the file."
                .into(),
        ),
        (
            "a fence then prose",
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```\nas above"
                .into(),
        ),
        (
            "two fences",
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}\n```".into(),
        ),
        (
            "a fence of another language",
            "```python\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```".into(),
        ),
        (
            "a tool that is not offered",
            r#"{"name": "delete_everything", "arguments": {}}"#.into(),
        ),
        ("data with a name", r#"{"name": "Alice", "age": 3}"#.into()),
        (
            "a call with a key calls do not have",
            r#"{"name": "read_file", "arguments": {"path": "a"}, "reason": "to see it"}"#.into(),
        ),
        (
            "arguments and parameters both",
            r#"{"name": "read_file", "arguments": {"path": "a"}, "parameters": {"path": "b"}}"#
                .into(),
        ),
        (
            "arguments that are not an object",
            r#"{"name": "read_file", "arguments": ["a"]}"#.into(),
        ),
        (
            "arguments that are text but not JSON",
            r#"{"name": "read_file", "arguments": "src/lib.rs"}"#.into(),
        ),
        (
            "an array holding a stranger",
            r#"[{"name": "read_file", "arguments": {"path": "a"}}, {"name": "rm_rf"}]"#.into(),
        ),
        ("an empty array", "[]".into()),
        (
            "cut-off JSON",
            r#"{"name": "read_file", "arguments": {"path": "a""#.into(),
        ),
        ("a JSON string", r#""read_file""#.into()),
        (
            "an unclosed tool_call tag",
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}".into(),
        ),
        (
            "a tool_call tag then prose",
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {}}</tool_call> and more".into(),
        ),
        (
            "a type other than function",
            r#"{"type": "message", "name": "read_file", "arguments": {}}"#.into(),
        ),
        ("plain prose", "All done: the tests pass.".into()),
    ];
    for (case, text) in cases {
        let mut content = text_reply(&text);
        let repairs = repair_reply(&mut content, &tools());
        assert!(repairs.is_empty(), "{case}: {repairs:?}");
        assert_eq!(content, text_reply(&text), "{case}");
    }
    // With nothing offered, nothing is a call.
    let mut content = text_reply(r#"{"name": "read_file", "arguments": {"path": "a"}}"#);
    assert!(repair_reply(&mut content, &[]).is_empty());
    assert!(calls(&content).is_empty());
}

#[test]
fn a_reply_that_calls_a_tool_keeps_its_text_as_text() {
    let text = r#"{"name": "run_command", "arguments": {"command": "rm -rf /"}}"#;
    let mut content = vec![
        ContentBlock::text(text),
        ContentBlock::tool_use("call_1", "read_file", json!({"path": "a"})),
    ];
    let before = content.clone();
    assert!(repair_reply(&mut content, &tools()).is_empty());
    assert_eq!(content, before);
}

#[test]
fn thinking_is_kept_beside_a_call_read_from_text() {
    let mut content = vec![
        ContentBlock::Thinking {
            thinking: "I should read it.".into(),
            signature: "sig".into(),
        },
        ContentBlock::text(r#"{"name": "read_file", "arguments": {"path": "a"}}"#),
    ];
    let repairs = repair_reply(&mut content, &tools());
    assert_eq!(repairs.len(), 1);
    assert!(matches!(content[0], ContentBlock::Thinking { .. }));
    assert_eq!(
        calls(&content),
        [("read_file".into(), json!({"path": "a"}))]
    );
}

#[test]
fn tool_names_off_by_case_or_separators_are_mapped_when_unambiguous() {
    let mut content = text_reply(r#"{"name": "Read-File", "arguments": {"path": "a"}}"#);
    let repairs = repair_reply(&mut content, &tools());
    assert_eq!(
        calls(&content),
        [("read_file".into(), json!({"path": "a"}))]
    );
    assert_eq!(
        repairs[0].kinds,
        [
            RepairKind::CallFromText,
            RepairKind::ToolName {
                from: "Read-File".into()
            }
        ]
    );
    // Two offered tools fold to the same name: no reading is sure.
    let mut twins = tools();
    twins.push(tool("readFile", &["path"]));
    let text = r#"{"name": "READ_FILE", "arguments": {"path": "a"}}"#;
    let mut content = text_reply(text);
    assert!(repair_reply(&mut content, &twins).is_empty());
    assert_eq!(content, text_reply(text));
}

#[test]
fn argument_names_off_by_case_or_separators_are_mapped_when_unambiguous() {
    // In a call through the API.
    let mut content = vec![ContentBlock::tool_use(
        "call_1",
        "edit_file",
        json!({"filePath": "a.rs", "OldString": "x", "new-string": "y"}),
    )];
    let repairs = repair_reply(&mut content, &tools());
    assert_eq!(
        calls(&content),
        [(
            "edit_file".into(),
            json!({"file_path": "a.rs", "old_string": "x", "new_string": "y"})
        )]
    );
    assert_eq!(repairs.len(), 1);
    assert_eq!(repairs[0].call_id, "call_1");
    let RepairKind::ArgumentNames { renamed } = &repairs[0].kinds[0] else {
        panic!("{repairs:?}");
    };
    let mut renamed = renamed.clone();
    renamed.sort();
    assert_eq!(
        renamed,
        [
            ("OldString".to_owned(), "old_string".to_owned()),
            ("filePath".to_owned(), "file_path".to_owned()),
            ("new-string".to_owned(), "new_string".to_owned()),
        ]
    );
    // The note comes before the call.
    assert!(
        matches!(&content[0], ContentBlock::Text { text } if text.contains("\"filePath\" as \"file_path\""))
    );
    assert_eq!(repairs[0].block, 1);

    let untouched: Vec<(&str, Value)> = vec![
        // The property is given already.
        (
            "edit_file",
            json!({"filePath": "a", "file_path": "b", "old_string": "x", "new_string": "y"}),
        ),
        // Two keys claim one property.
        (
            "edit_file",
            json!({"filePath": "a", "FILE_PATH": "b", "old_string": "x", "new_string": "y"}),
        ),
        // Nothing in the schema is spelt so.
        ("read_file", json!({"file": "a"})),
        // Right already.
        ("read_file", json!({"path": "a"})),
        // A tool not offered: its schema is unknown.
        ("mystery", json!({"Path": "a"})),
    ];
    for (name, input) in untouched {
        let mut content = vec![ContentBlock::tool_use("call_1", name, input.clone())];
        assert!(
            repair_reply(&mut content, &tools()).is_empty(),
            "{name} {input}"
        );
        assert_eq!(calls(&content), [(name.to_owned(), input)]);
    }
    // A call whose input was cut off is never run, so never mended.
    let invalid = ContentBlock::ToolUse {
        id: "call_1".into(),
        name: "read_file".into(),
        input: json!({}),
        invalid: Some(keel_provider::InvalidToolInput {
            raw: r#"{"Path": "a"#.into(),
            reason: "cut off".into(),
        }),
    };
    let mut content = vec![invalid.clone()];
    assert!(repair_reply(&mut content, &tools()).is_empty());
    assert_eq!(content, [invalid]);
}

#[test]
fn a_call_from_text_may_need_its_arguments_mapped_too() {
    let mut content = text_reply(
        "```json\n{\"name\": \"edit_file\", \"arguments\": {\"file_path\": \"a\", \"oldString\": \"x\", \"new_string\": \"y\"}}\n```",
    );
    let repairs = repair_reply(&mut content, &tools());
    assert_eq!(repairs.len(), 1);
    assert_eq!(
        repairs[0].kinds,
        [
            RepairKind::CallFromText,
            RepairKind::ArgumentNames {
                renamed: vec![("oldString".into(), "old_string".into())]
            }
        ]
    );
    assert_eq!(
        calls(&content)[0].1,
        json!({"file_path": "a", "old_string": "x", "new_string": "y"})
    );
}

fn agent(provider: Arc<ScriptedProvider>, runs: &Runs) -> Agent {
    Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(counting_tools(runs))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_session_runs_a_repaired_call_and_says_so() {
    // A small model writes the call in a fence, with `N` for `n`.
    let written = "```json\n{\"name\": \"count\", \"arguments\": {\"N\": 7}}\n```";
    let provider = Arc::new(
        ScriptedProvider::new()
            .then(Turn::Reply(reply(
                vec![ContentBlock::text(written)],
                StopReason::EndTurn,
            )))
            .then_text("counted"),
    );
    let runs = Runs::default();
    let mut session = agent(provider.clone(), &runs).session(".").unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("count to 7").collect().await;
    let Some(AgentEvent::Finished(outcome)) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(outcome.text, "counted");
    assert_eq!(outcome.repaired_calls, 1);
    assert_eq!(*runs.lock().unwrap(), [("count".to_owned(), 7)]);

    let repaired: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallRepaired { repair } => Some(repair.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(repaired.len(), 1);
    assert_eq!(repaired[0].tool, "count");
    assert!(repaired[0].kinds.contains(&RepairKind::ArgumentNames {
        renamed: vec![("N".into(), "n".into())]
    }));

    // The history holds the model's text, the note and the call under the id the event
    // names; the result answers that id, and the second request is well formed.
    let reply = &session.history()[1];
    assert_eq!(reply.content[0], ContentBlock::text(written));
    assert!(
        matches!(&reply.content[1], ContentBlock::Text { text } if text.starts_with(REPAIR_NOTE_PREFIX))
    );
    let ContentBlock::ToolUse { id, input, .. } = &reply.content[2] else {
        panic!("{reply:?}");
    };
    assert!(!id.is_empty());
    assert_eq!(*id, repaired[0].call_id);
    assert_eq!(*input, json!({"n": 7}));
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    check_request(&requests[1].messages).unwrap();
    let answered = requests[1].messages.iter().flat_map(|m| &m.content).any(
        |block| matches!(block, ContentBlock::ToolResult { tool_use_id, content, .. } if tool_use_id == id && content == "count 7"),
    );
    assert!(answered, "{:?}", requests[1].messages);
}

#[tokio::test]
async fn a_reply_cut_off_at_the_output_limit_is_not_read_as_a_call() {
    let written = r#"{"name": "count", "arguments": {"n": 7}}"#;
    let provider = Arc::new(ScriptedProvider::new().then(Turn::Reply(reply(
        vec![ContentBlock::text(written)],
        StopReason::MaxTokens,
    ))));
    let runs = Runs::default();
    let mut session = agent(provider, &runs).session(".").unwrap();
    let outcome = session.run("count").await;
    assert_eq!(outcome.repaired_calls, 0);
    assert!(runs.lock().unwrap().is_empty());
}

#[tokio::test]
async fn prose_ends_the_run_as_an_answer() {
    let answer = r#"Use {"name": "count", "arguments": {"n": 1}} to count."#;
    let provider = Arc::new(ScriptedProvider::new().then_text(answer));
    let runs = Runs::default();
    let mut session = agent(provider, &runs).session(".").unwrap();
    let outcome = session.run("how do I count?").await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(outcome.text, answer);
    assert_eq!(outcome.repaired_calls, 0);
    assert!(runs.lock().unwrap().is_empty());
}
