//! Tool results with images through the engine: the next request carries them, the session
//! file keeps them and replays them, an old file without them loads, history repair and
//! compaction keep or describe them, and events describe them without their data.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures::StreamExt;
use keel_engine::compaction::{
    IMAGE_TOKENS, block_tokens, estimate_tokens, messages_tokens, rebuild, summary_request,
};
use keel_engine::history::{canonicalize, check_pairing, insert_result};
use keel_engine::session_store::{SessionRecord, SessionStore};
use keel_engine::{Agent, AgentEvent, JsonlSessionStore, Stop};
use keel_provider::{ContentBlock, ImageData, Message, Role};
use keel_test_support::images::{TINY_PNG, png, png_base64_of_len, result_with_png};
use keel_test_support::scripted::ScriptedProvider;
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// Returns a 1x1 PNG, and an image a hostile server might send.
struct Screenshot;

impl Tool for Screenshot {
    type Args = NoArgs;
    const NAME: &'static str = "screenshot";
    fn description(&self) -> &str {
        "Takes a screenshot."
    }
    fn effect(&self, _args: &NoArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("the screen")
            .with_image(png())
            .with_image_base64("image/svg+xml", "PHN2Zz48L3N2Zz4="))
    }
}

fn agent(provider: Arc<ScriptedProvider>, store: Arc<JsonlSessionStore>) -> Agent {
    Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(ToolRegistry::new().with(Screenshot).unwrap())
        .session_store(store)
        .build()
        .unwrap()
}

fn the_result() -> ContentBlock {
    ContentBlock::tool_result_with_images(
        "t1",
        "the screen\n[image not shown: unsupported media type \"image/svg+xml\" (the APIs take \
         image/png, image/jpeg, image/gif and image/webp)]",
        false,
        vec![png()],
    )
}

#[tokio::test]
async fn an_image_result_reaches_the_model_is_saved_and_replays() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = Arc::new(JsonlSessionStore::new(home.path()));
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "screenshot", json!({}))
            .then_text("A white pixel.")
            .then_text("Still a white pixel."),
    );
    let agent = agent(provider.clone(), store.clone());
    let mut session = agent.session(work.path()).unwrap();
    let id = session.id().to_owned();
    let events: Vec<AgentEvent> = session.run_streaming("what is on screen?").collect().await;

    // The request after the call carries the image (and the note about the refused one).
    let requests = provider.requests();
    assert_eq!(requests[1].messages[2].content, vec![the_result()]);

    // The event describes the image; neither it nor any other event holds the data.
    let finished = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolCallFinished { images, output, .. } => Some((images, output)),
            _ => None,
        })
        .unwrap();
    assert_eq!(finished.0, &vec!["image/png, 69 bytes".to_owned()]);
    assert!(!finished.1.contains(TINY_PNG));
    for event in &events {
        if !matches!(event, AgentEvent::MessageAdded { .. }) {
            assert!(!format!("{event:?}").contains(TINY_PNG), "{event:?}");
        }
    }

    // The session file keeps it, and a resumed session sends it again.
    let raw = std::fs::read_to_string(store.path_of(&id).unwrap()).unwrap();
    assert!(raw.contains(TINY_PNG), "{raw}");
    let history = session.history().to_vec();
    assert_eq!(history[2].content, vec![the_result()]);
    drop(session);
    let mut resumed = agent.resume(&id).unwrap();
    assert_eq!(resumed.history(), history.as_slice());
    assert_eq!(resumed.run("and now?").await.stop, Stop::Completed);
    let last = provider.requests().pop().unwrap();
    assert_eq!(last.messages[2].content, vec![the_result()]);
}

#[test]
fn an_old_session_file_without_images_loads() {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(home.path());
    // Written by a keel that knew nothing of images.
    let old = concat!(
        r#"{"type":"header","id":"old","cwd":"/work/project","model":"claude-test","provider":"anthropic","started_at":"2026-01-01T00:00:00Z","keel_version":"0.1.0"}"#,
        "\n",
        r#"{"type":"message","message":{"role":"user","content":[{"type":"text","text":"hello"}]}}"#,
        "\n",
        r#"{"type":"message","message":{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"read_file","input":{"path":"a"}}]}}"#,
        "\n",
        r#"{"type":"tool_result","result":{"type":"tool_result","tool_use_id":"c1","content":"1\talpha","is_error":false}}"#,
        "\n",
    );
    std::fs::write(store.path_of("old").unwrap(), old).unwrap();
    let loaded = store.load("old").unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(
        loaded.messages.last().unwrap().content,
        vec![ContentBlock::tool_result("c1", "1\talpha", false)]
    );
}

#[test]
fn a_tool_result_record_with_an_image_round_trips() {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(home.path());
    let meta = keel_engine::session_store::SessionMeta::new("/p", "anthropic", "m");
    let mut log = store.create(&meta).unwrap();
    log.append(&SessionRecord::message(Message::user("look")))
        .unwrap();
    log.append(&SessionRecord::message(Message::new(
        Role::Assistant,
        vec![ContentBlock::tool_use("c1", "screenshot", json!({}))],
    )))
    .unwrap();
    log.append(&SessionRecord::ToolResult {
        result: result_with_png("c1", "shot"),
    })
    .unwrap();
    log.flush().unwrap();
    let loaded = store.load(&meta.id).unwrap();
    assert_eq!(
        loaded.messages.last().unwrap().content,
        vec![result_with_png("c1", "shot")]
    );
}

#[test]
fn history_repair_keeps_images() {
    let mut messages = vec![
        Message::user("look"),
        Message::new(
            Role::Assistant,
            vec![
                ContentBlock::tool_use("a", "screenshot", json!({})),
                ContentBlock::tool_use("b", "screenshot", json!({})),
            ],
        ),
    ];
    // Results arrive out of order; one is answered twice.
    insert_result(&mut messages, result_with_png("b", "second"));
    insert_result(&mut messages, result_with_png("a", "first"));
    messages[2]
        .content
        .push(ContentBlock::tool_result("a", "duplicate", false));
    canonicalize(&mut messages);
    check_pairing(&messages).unwrap();
    assert_eq!(
        messages[2].content,
        vec![
            result_with_png("a", "first"),
            result_with_png("b", "second")
        ]
    );
}

#[test]
fn an_image_counts_as_a_fixed_number_of_tokens() {
    let big = ImageData::new("image/png", png_base64_of_len(1_000_000)).unwrap();
    let with_big = ContentBlock::tool_result_with_images("t", "shot", false, vec![big]);
    let with_small = result_with_png("t", "shot");
    let text_only = ContentBlock::tool_result("t", "shot", false);
    // The base64 is not counted as text: a 1 MB image is not 250,000 tokens, and its size
    // does not matter; only the JSON around it (a dozen tokens) adds to the fixed figure.
    assert_eq!(block_tokens(&with_big), block_tokens(&with_small));
    let extra = block_tokens(&with_big) - block_tokens(&text_only);
    assert!(
        (IMAGE_TOKENS..IMAGE_TOKENS + 20).contains(&extra),
        "{extra}"
    );
    let messages = vec![
        Message::user("look"),
        Message::new(Role::User, vec![with_big.clone(), with_big]),
    ];
    let small_messages = vec![
        Message::user("look"),
        Message::new(Role::User, vec![with_small.clone(), with_small]),
    ];
    let text_messages = vec![
        Message::user("look"),
        Message::new(Role::User, vec![text_only.clone(), text_only]),
    ];
    assert_eq!(messages_tokens(&messages), messages_tokens(&small_messages));
    let extra = messages_tokens(&messages) - messages_tokens(&text_messages);
    assert!(
        (2 * IMAGE_TOKENS..2 * IMAGE_TOKENS + 40).contains(&extra),
        "{extra}"
    );
    assert_eq!(
        estimate_tokens(None, &[], &messages, None),
        estimate_tokens(None, &[], &small_messages, None)
    );
    assert!(estimate_tokens(None, &[], &messages, None) < 4 * IMAGE_TOKENS);
}

#[test]
fn compaction_describes_images_and_keeps_recent_ones() {
    let messages = vec![
        Message::user("look"),
        Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("a", "screenshot", json!({}))],
        ),
        Message::new(Role::User, vec![result_with_png("a", "first")]),
        Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("b", "screenshot", json!({}))],
        ),
        Message::new(Role::User, vec![result_with_png("b", "second")]),
        Message::assistant("two pixels"),
    ];
    // The summary model reads what the old images were, not their data.
    let request = summary_request("m", &messages, 3, 1000);
    let transcript = request.messages[0].text();
    assert!(
        transcript.contains("[image: image/png, 69 bytes]"),
        "{transcript}"
    );
    assert!(!transcript.contains(TINY_PNG));
    // The kept tail keeps its images verbatim.
    let rebuilt = rebuild(&messages, 3, "summary");
    check_pairing(&rebuilt).unwrap();
    assert!(
        rebuilt
            .iter()
            .flat_map(|m| &m.content)
            .any(|b| *b == result_with_png("b", "second"))
    );
}

#[test]
fn a_tampered_image_record_is_skipped_and_the_call_answered() {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(home.path());
    let meta = keel_engine::session_store::SessionMeta::new("/p", "anthropic", "m");
    let mut log = store.create(&meta).unwrap();
    log.append(&SessionRecord::message(Message::user("look")))
        .unwrap();
    log.append(&SessionRecord::message(Message::new(
        Role::Assistant,
        vec![ContentBlock::tool_use("c1", "screenshot", json!({}))],
    )))
    .unwrap();
    log.flush().unwrap();
    drop(log);
    let path = store.path_of(&meta.id).unwrap();
    let mut raw = std::fs::read_to_string(&path).unwrap();
    raw.push_str(
        r#"{"type":"tool_result","result":{"type":"tool_result","tool_use_id":"c1","content":"x","images":[{"media_type":"image/png","data":"<not base64>"}]}}"#,
    );
    raw.push('\n');
    std::fs::write(&path, raw).unwrap();
    let loaded = store.load(&meta.id).unwrap();
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(
        !loaded.warnings[0].contains("<not base64>"),
        "{:?}",
        loaded.warnings
    );
    let mut messages = loaded.messages;
    canonicalize(&mut messages);
    check_pairing(&messages).unwrap();
}

/// Keeps the `tool_response` of every PostToolUse it sees.
struct Capture(std::sync::Mutex<Vec<serde_json::Value>>);

#[async_trait::async_trait]
impl keel_engine::Hook for Capture {
    async fn run(
        &self,
        input: &keel_engine::HookInput,
    ) -> Result<keel_engine::HookOutcome, String> {
        self.0
            .lock()
            .unwrap()
            .push(input.tool_response().cloned().unwrap_or_default());
        Ok(keel_engine::HookOutcome::Continue)
    }
}

#[tokio::test]
async fn post_tool_use_hooks_learn_of_images_without_their_data() {
    let work = tempfile::tempdir().unwrap();
    let capture = Arc::new(Capture(std::sync::Mutex::new(Vec::new())));
    let mut hooks = keel_engine::Hooks::new();
    hooks
        .add(keel_engine::HookEvent::PostToolUse, None, capture.clone())
        .unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "screenshot", json!({}))
            .then_text("A white pixel."),
    );
    let agent = Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(ToolRegistry::new().with(Screenshot).unwrap())
        .hooks(hooks)
        .build()
        .unwrap();
    let mut session = agent.session(work.path()).unwrap();
    assert_eq!(session.run("look").await.stop, Stop::Completed);
    let seen = capture.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0]["images"],
        json!([{"media_type": "image/png", "bytes": 69}])
    );
    assert!(!seen[0].to_string().contains(TINY_PNG));
}
