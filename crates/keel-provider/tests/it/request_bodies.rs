//! The exact bodies and headers each back end sends, as snapshots.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_provider::{
    AnthropicProvider, ApiKey, CachePolicy, CompletionRequest, ContentBlock, InvalidToolInput,
    Message, OpenAiProvider, Provider, Role, ToolChoice, ToolDefinition,
};
use keel_test_support::images;
use keel_test_support::mock::{request_bodies, serve_sse};
use keel_test_support::wire::wire_bytes;
use serde_json::{Value, json};

/// A conversation with everything a body must carry: a system prompt, tools, thinking, text,
/// parallel calls, results that succeeded and failed, and a call cut off by max_tokens.
fn conversation() -> CompletionRequest {
    let mut request = CompletionRequest::new("claude-sonnet-4-5")
        .system("You are keel, a coding agent.")
        .tool(ToolDefinition {
            name: "read_file".into(),
            description: "Read a file with line numbers.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": false
            }),
        })
        .tool(ToolDefinition {
            name: "run_command".into(),
            description: "Run a shell command.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
                "additionalProperties": false
            }),
        })
        .message(Message::user("Fix the failing test in src/lib.rs"))
        .message(Message::new(
            Role::Assistant,
            vec![
                ContentBlock::Thinking {
                    thinking: "The test output will tell me more.".into(),
                    signature: "EqQBCgIYAhIM".into(),
                },
                ContentBlock::text("I'll look at the test first."),
                ContentBlock::tool_use("toolu_1", "read_file", json!({"path": "src/lib.rs"})),
                ContentBlock::tool_use("toolu_2", "run_command", json!({"command": "cargo test"})),
            ],
        ))
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result(
                    "toolu_1",
                    "1 | pub fn add(a: i32, b: i32) -> i32 { a - b }",
                    false,
                ),
                ContentBlock::tool_result("toolu_2", "test tests::adds ... FAILED", true),
            ],
        ))
        .message(Message::new(
            Role::Assistant,
            vec![ContentBlock::ToolUse {
                id: "toolu_3".into(),
                name: "run_command".into(),
                input: json!({}),
                invalid: Some(InvalidToolInput {
                    raw: "{\"command\": \"car".into(),
                    reason: "EOF while parsing a string".into(),
                }),
            }],
        ))
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result(
                    "toolu_3",
                    "your call was cut off; resend it whole",
                    true,
                ),
                ContentBlock::text("Keep going."),
            ],
        ))
        .max_tokens(4096);
    request.temperature = Some(0.5);
    request.stop_sequences = vec!["</done>".into()];
    request
}

async fn sent_to_anthropic(request: &CompletionRequest) -> (Value, wiremock::Request) {
    let server = serve_sse("/v1/messages", wire_bytes("anthropic/basic_response.sse")).await;
    let provider = AnthropicProvider::new(ApiKey::new("sk-ant-test"))
        .unwrap()
        .with_base_url(&server.uri())
        .unwrap();
    provider.tool_use_completion(request).await.unwrap();
    let received = server.received_requests().await.unwrap().remove(0);
    (request_bodies(&server).await.remove(0), received)
}

async fn sent_to_openai(request: &CompletionRequest) -> (Value, wiremock::Request) {
    let server = serve_sse(
        "/v1/chat/completions",
        wire_bytes("openai-chat/finish_length.sse"),
    )
    .await;
    let provider = OpenAiProvider::new(
        &format!("{}/v1", server.uri()),
        Some(ApiKey::new("sk-test")),
    )
    .unwrap();
    provider.tool_use_completion(request).await.unwrap();
    let received = server.received_requests().await.unwrap().remove(0);
    (request_bodies(&server).await.remove(0), received)
}

/// A short conversation whose last message is a tool result with text and two images, and
/// an earlier result that is images only.
fn image_conversation() -> CompletionRequest {
    CompletionRequest::new("claude-sonnet-4-5")
        .tool(ToolDefinition {
            name: "screenshot".into(),
            description: "Take a screenshot.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        })
        .message(Message::user("What is on the screen?"))
        .message(Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("toolu_1", "screenshot", json!({}))],
        ))
        .message(Message::new(
            Role::User,
            vec![ContentBlock::tool_result_with_images(
                "toolu_1",
                "",
                false,
                vec![images::png()],
            )],
        ))
        .message(Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("toolu_2", "screenshot", json!({}))],
        ))
        .message(Message::new(
            Role::User,
            vec![ContentBlock::tool_result_with_images(
                "toolu_2",
                "two windows",
                true,
                vec![images::png(), images::gif()],
            )],
        ))
}

fn header<'r>(request: &'r wiremock::Request, name: &str) -> &'r str {
    request.headers.get(name).unwrap().to_str().unwrap()
}

#[tokio::test]
async fn anthropic_body() {
    let (body, received) = sent_to_anthropic(&conversation()).await;
    insta::assert_json_snapshot!("anthropic_body", body);
    assert_eq!(header(&received, "x-api-key"), "sk-ant-test");
    assert_eq!(header(&received, "anthropic-version"), "2023-06-01");
    assert_eq!(header(&received, "content-type"), "application/json");
    assert_eq!(
        header(&received, "user-agent"),
        concat!("keel/", env!("CARGO_PKG_VERSION"))
    );
}

#[tokio::test]
async fn anthropic_body_with_images() {
    let (body, _) = sent_to_anthropic(&image_conversation()).await;
    insta::assert_json_snapshot!("anthropic_body_with_images", body);
    // The result carrying images is the last block: it is still the breakpoint.
    let last = &body["messages"][4]["content"][0];
    assert_eq!(last["type"], "tool_result");
    assert_eq!(last["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(body.to_string().matches("cache_control").count(), 2);
}

#[tokio::test]
async fn anthropic_cache_breakpoints_are_at_most_four_and_can_be_turned_off() {
    let (body, _) = sent_to_anthropic(&conversation()).await;
    assert_eq!(body.to_string().matches("cache_control").count(), 3);

    let mut request = conversation();
    request.cache = CachePolicy::Disabled;
    let (body, _) = sent_to_anthropic(&request).await;
    assert!(!body.to_string().contains("cache_control"), "{body}");
}

#[tokio::test]
async fn anthropic_tool_choice_forms() {
    for (choice, expected) in [
        (ToolChoice::Any, json!({"type": "any"})),
        (
            ToolChoice::Tool("read_file".into()),
            json!({"type": "tool", "name": "read_file"}),
        ),
        (ToolChoice::None, json!({"type": "none"})),
    ] {
        let mut request = conversation();
        request.tool_choice = choice;
        let (body, _) = sent_to_anthropic(&request).await;
        assert_eq!(body["tool_choice"], expected);
    }
}

#[tokio::test]
async fn openai_body() {
    let mut request = conversation();
    request.model = "gpt-4.1".into();
    let (body, received) = sent_to_openai(&request).await;
    insta::assert_json_snapshot!("openai_body", body);
    assert_eq!(header(&received, "authorization"), "Bearer sk-test");
    assert!(header(&received, "user-agent").starts_with("keel/"));
}

#[tokio::test]
async fn openai_body_with_images() {
    let mut request = image_conversation();
    request.model = "gpt-4.1".into();
    let (body, _) = sent_to_openai(&request).await;
    insta::assert_json_snapshot!("openai_body_with_images", body);
    // No base64 reaches a back end that cannot show it.
    assert!(!body.to_string().contains(images::TINY_PNG), "{body}");
}

/// A prompt with a screenshot attached: text then the image, in one user message.
fn prompt_with_image() -> CompletionRequest {
    CompletionRequest::new("claude-sonnet-4-5").message(Message::new(
        Role::User,
        vec![
            ContentBlock::text("Why does the button look wrong?"),
            ContentBlock::image(images::png()),
        ],
    ))
}

#[tokio::test]
async fn anthropic_body_with_a_prompt_image() {
    let (body, _) = sent_to_anthropic(&prompt_with_image()).await;
    insta::assert_json_snapshot!("anthropic_body_with_a_prompt_image", body);
    assert_eq!(body["messages"][0]["content"][1]["type"], "image");
    assert_eq!(
        body["messages"][0]["content"][1]["source"]["data"],
        images::TINY_PNG
    );
}

#[tokio::test]
async fn openai_body_with_a_prompt_image() {
    let mut request = prompt_with_image();
    request.model = "gpt-4.1".into();
    let (body, _) = sent_to_openai(&request).await;
    insta::assert_json_snapshot!("openai_body_with_a_prompt_image", body);
    assert_eq!(
        body["messages"][0]["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{}", images::TINY_PNG)
    );
}

#[tokio::test]
async fn openai_tool_choice_forms() {
    for (choice, expected) in [
        (ToolChoice::Any, json!("required")),
        (
            ToolChoice::Tool("read_file".into()),
            json!({"type": "function", "function": {"name": "read_file"}}),
        ),
        (ToolChoice::None, json!("none")),
    ] {
        let mut request = conversation();
        request.tool_choice = choice;
        let (body, _) = sent_to_openai(&request).await;
        assert_eq!(body["tool_choice"], expected);
    }
}

#[test]
fn openai_itself_gets_max_completion_tokens() {
    let provider =
        OpenAiProvider::new("https://api.openai.com/v1", Some(ApiKey::new("k"))).unwrap();
    let body: Value =
        serde_json::from_slice(&provider.request_body(&conversation()).unwrap()).unwrap();
    assert_eq!(body["max_completion_tokens"], 4096);
    assert!(body.get("max_tokens").is_none());
}

#[test]
fn debug_output_never_shows_keys() {
    let anthropic = AnthropicProvider::new(ApiKey::new("sk-ant-SECRET")).unwrap();
    let openai =
        OpenAiProvider::new("https://api.openai.com/v1", Some(ApiKey::new("sk-SECRET"))).unwrap();
    for text in [
        format!("{anthropic:?}"),
        format!("{openai:?}"),
        format!("{:?}", ApiKey::new("sk-SECRET")),
        ApiKey::new("sk-SECRET").to_string(),
    ] {
        assert!(!text.contains("SECRET"), "{text}");
    }
}

#[test]
fn configuration_errors_are_one_clear_line() {
    let err = OpenAiProvider::new("localhost:11434", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "provider configuration: base URL \"localhost:11434\" uses localhost:, expected http: or https:"
    );
    let err = AnthropicProvider::new(ApiKey::new("k"))
        .unwrap()
        .with_base_url("::nope")
        .unwrap_err();
    assert!(err.to_string().contains("is not a valid URL"), "{err}");
}
