//! The OpenAI Responses back end against the streams recorded from the real API
//! (`shared/wire/openai-responses/`), served verbatim, and against rendered streams for what
//! no recording shows: reasoning sent back encrypted, errors, cut replies.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use keel_provider::{
    ApiKey, CompletionRequest, ContentBlock, Message, OpenAiApi, OpenAiProvider, Provider,
    ProviderConfig, ProviderError, ProviderKind, ResponsesStreamParser, RetryPolicy, Role,
    StopReason, StreamEvent, ToolChoice, ToolDefinition, ToolUseResponse, Usage,
};
use keel_test_support::events::assemble;
use keel_test_support::mock::{request_bodies, serve_responses_replies, serve_sse, sse_response};
use keel_test_support::render::responses_sse;
use keel_test_support::scripted::reply;
use keel_test_support::wire::{wire_bytes, wire_files};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-proj-test-0123456789secret";

fn provider(server: &MockServer) -> OpenAiProvider {
    OpenAiProvider::new(&format!("{}/v1", server.uri()), Some(ApiKey::new(KEY)))
        .unwrap()
        .with_api(OpenAiApi::Responses)
        .with_retry_policy(
            RetryPolicy::default().with_backoff(Duration::from_millis(1), Duration::from_millis(5)),
        )
}

fn request(model: &str) -> CompletionRequest {
    CompletionRequest::new(model).message(Message::user("hi"))
}

async fn complete_body(body: Vec<u8>) -> ToolUseResponse {
    let server = serve_sse("/v1/responses", body).await;
    provider(&server)
        .tool_use_completion(&request("gpt-5"))
        .await
        .unwrap()
}

fn parse(bytes: &[u8], size: usize) -> Result<Vec<StreamEvent>, ProviderError> {
    let mut parser = ResponsesStreamParser::new();
    let mut events = Vec::new();
    for chunk in bytes.chunks(size) {
        parser.feed(chunk, &mut events)?;
    }
    parser.finish(&mut events)?;
    Ok(events)
}

/// The `response` of a recording's `response.completed` event: what the server says it sent.
fn completed(recording: &[u8]) -> Value {
    let text = std::str::from_utf8(recording).unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str::<Value>(data).unwrap())
        .find(|event| event["type"] == "response.completed")
        .unwrap()["response"]
        .clone()
}

/// The content keel should make of a completed response's `output`: its messages' text, its
/// function calls, its reasoning items that hold anything; no item of the server's own tools.
fn expected_content(response: &Value) -> Vec<ContentBlock> {
    let mut content = Vec::new();
    for item in response["output"].as_array().unwrap() {
        match item["type"].as_str().unwrap() {
            "message" => content.push(ContentBlock::text(
                item["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|part| part["text"].as_str().unwrap())
                    .collect::<String>(),
            )),
            "function_call" => content.push(ContentBlock::tool_use(
                item["call_id"].as_str().unwrap(),
                item["name"].as_str().unwrap(),
                serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap(),
            )),
            "reasoning" => {
                let summary: Vec<String> = item["summary"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|part| part["text"].as_str().unwrap().to_owned())
                    .collect();
                let encrypted_content = item["encrypted_content"].as_str().map(str::to_owned);
                if !summary.is_empty() || encrypted_content.is_some() {
                    content.push(ContentBlock::Reasoning {
                        id: item["id"].as_str().unwrap().to_owned(),
                        summary,
                        encrypted_content,
                    });
                }
            }
            _ => {}
        }
    }
    content
}

#[tokio::test]
async fn every_recording_gives_what_its_completed_response_holds() {
    let recordings = wire_files("openai-responses");
    assert_eq!(recordings.len(), 4, "{recordings:?}");
    for recording in recordings {
        let bytes = wire_bytes(&recording);
        let response = completed(&bytes);
        let reply = complete_body(bytes).await;
        assert_eq!(reply.content, expected_content(&response), "{recording}");
        let usage = &response["usage"];
        assert_eq!(
            reply.usage.total_input_tokens(),
            usage["input_tokens"].as_u64().unwrap(),
            "{recording}"
        );
        assert_eq!(
            reply.usage.output_tokens,
            usage["output_tokens"].as_u64().unwrap(),
            "{recording}"
        );
        assert_eq!(reply.model.as_deref(), response["model"].as_str());
    }
}

#[tokio::test]
async fn text_hello() {
    let reply = complete_body(wire_bytes("openai-responses/text_hello.sse")).await;
    assert_eq!(
        reply.content,
        vec![ContentBlock::text("Hello! How can I assist you today?")]
    );
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 11,
            output_tokens: 10,
            ..Usage::default()
        }
    );
    assert_eq!(reply.model.as_deref(), Some("gpt-4o-mini-2024-07-18"));
}

#[tokio::test]
async fn one_function_call_is_named_by_its_call_id() {
    let reply = complete_body(wire_bytes("openai-responses/function_call.sse")).await;
    assert_eq!(
        reply.content,
        vec![ContentBlock::tool_use(
            "call_0UFGPwrziw5rbinYp7rthrTb",
            "get_weather_at_location",
            json!({"location": "San Francisco, CA"})
        )]
    );
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert!(reply.tool_calls()[0].is_valid());
}

#[test]
fn a_reasoning_summary_streams_as_thinking_then_ends_as_one_item() {
    let events = parse(&wire_bytes("openai-responses/reasoning_summary.sse"), 4096).unwrap();
    let thinking: String = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ThinkingDelta { index: 0, thinking } => Some(thinking.as_str()),
            _ => None,
        })
        .collect();
    let reasoning: Vec<&StreamEvent> = events
        .iter()
        .filter(|event| matches!(event, StreamEvent::Reasoning { .. }))
        .collect();
    let [
        StreamEvent::Reasoning {
            index: 0,
            id,
            summary,
            encrypted_content: None,
        },
    ] = reasoning[..]
    else {
        panic!("{reasoning:?}");
    };
    assert_eq!(id, "rs_0287fead24f79e6800690a92b01bf081959d0cfa3d2d08a836");
    assert_eq!(summary.len(), 4);
    // The parts, streamed, read as paragraphs: the same text as the item's.
    assert_eq!(thinking, summary.join("\n\n"));
    assert!(summary[0].starts_with("**Planning a New York itinerary**"));
    let reply = assemble(events);
    assert!(matches!(reply.content[0], ContentBlock::Reasoning { .. }));
    let text = reply.text();
    assert_eq!(text.chars().count(), 6290);
    assert!(text.contains('—'), "raw UTF-8 kept");
    assert_eq!(reply.usage.output_tokens, 3506);
}

#[tokio::test]
async fn the_servers_own_tools_are_skipped_and_empty_reasoning_is_not_kept() {
    let reply = complete_body(wire_bytes("openai-responses/mcp_failed_call_then_text.sse")).await;
    assert_eq!(
        reply.content,
        vec![ContentBlock::text("You rolled 2d4+1: 6")]
    );
    // Its mcp_calls were the server's to run, not keel's.
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(reply.usage.total_input_tokens(), 991);
}

#[test]
fn recordings_parse_the_same_however_they_are_cut() {
    for recording in wire_files("openai-responses") {
        let bytes = wire_bytes(&recording);
        let whole = assemble(parse(&bytes, bytes.len()).unwrap());
        let sizes: &[usize] = if bytes.len() > 100_000 {
            &[7, 1000]
        } else {
            &[1, 2, 3, 17, 256]
        };
        for &size in sizes {
            assert_eq!(
                assemble(parse(&bytes, size).unwrap()),
                whole,
                "{recording} cut every {size} bytes"
            );
        }
    }
}

fn tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: "read_file".into(),
        description: "Read a file.".into(),
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }]
}

/// A history with every kind of block: text, an image, reasoning, calls, results (one failed,
/// one with an image), Anthropic's thinking (left out).
fn rich_request(model: &str) -> CompletionRequest {
    let png = keel_test_support::images::png();
    let mut request = CompletionRequest::new(model)
        .system("You are keel.")
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::text("Fix the test."),
                ContentBlock::image(png.clone()),
            ],
        ))
        .message(Message::new(
            Role::Assistant,
            vec![
                ContentBlock::Thinking {
                    thinking: "Anthropic's".into(),
                    signature: "sig".into(),
                },
                ContentBlock::Reasoning {
                    id: "rs_1".into(),
                    summary: vec!["**Reading first**".into()],
                    encrypted_content: Some("gAAAAB-opaque-1".into()),
                },
                ContentBlock::Reasoning {
                    id: "rs_stored".into(),
                    summary: vec!["kept server side, not sent".into()],
                    encrypted_content: None,
                },
                ContentBlock::text("Let me look."),
                ContentBlock::tool_use("call_1", "read_file", json!({"path": "a.rs"})),
                ContentBlock::tool_use("call_2", "read_file", json!({"path": "b.png"})),
            ],
        ))
        .message(Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result("call_1", "no such file", true),
                ContentBlock::tool_result_with_images("call_2", "an image", false, vec![png]),
                ContentBlock::text("Go on."),
            ],
        ))
        .max_tokens(4096);
    request.tools = tools();
    request
}

fn body(provider: &OpenAiProvider, request: &CompletionRequest) -> Value {
    serde_json::from_slice(&provider.request_body(request).unwrap()).unwrap()
}

#[test]
fn request_bodies_for_a_reasoning_model_and_another() {
    let provider = OpenAiProvider::new("http://localhost:1/v1", None)
        .unwrap()
        .with_api(OpenAiApi::Responses);
    insta::assert_json_snapshot!(
        "responses_body_reasoning_model",
        body(&provider, &rich_request("gpt-5.3-codex"))
    );
    let mut plain = rich_request("gpt-4.1");
    plain.tool_choice = ToolChoice::Tool("read_file".into());
    plain.temperature = Some(0.2);
    let plain = body(&provider, &plain);
    assert_eq!(
        plain["tool_choice"],
        json!({"type": "function", "name": "read_file"})
    );
    assert_eq!(plain["temperature"], json!(0.2));
    // Models that do not reason reject both.
    assert!(
        plain.get("reasoning").is_none() && plain.get("include").is_none(),
        "{plain}"
    );
    assert_eq!(plain["store"], json!(false));
    assert_eq!(plain["max_output_tokens"], json!(4096));
}

#[tokio::test]
async fn reasoning_goes_back_encrypted_before_the_call_it_led_to() {
    let first = reply(
        vec![
            ContentBlock::Reasoning {
                id: "rs_9".into(),
                summary: vec!["**Looking**".into(), "at the file".into()],
                encrypted_content: Some("gAAAAB-encrypted-9".into()),
            },
            ContentBlock::tool_use("call_9", "read_file", json!({"path": "src/lib.rs"})),
        ],
        StopReason::ToolUse,
    );
    let second = keel_test_support::scripted::text_reply("Done.");
    let server = serve_responses_replies(&[first.clone(), second]).await;
    let provider = provider(&server);
    let mut request = CompletionRequest::new("gpt-5.3-codex").message(Message::user("Read it"));
    request.tools = tools();
    let got = provider.tool_use_completion(&request).await.unwrap();
    assert_eq!(
        got.content, first.content,
        "the reply as the server sent it"
    );
    request.messages.push(got.to_message());
    request.messages.push(Message::new(
        Role::User,
        vec![ContentBlock::tool_result("call_9", "fn main() {}", false)],
    ));
    let done = provider.tool_use_completion(&request).await.unwrap();
    assert_eq!(done.text(), "Done.");

    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(bodies[0]["reasoning"], json!({"summary": "auto"}));
    assert_eq!(
        bodies[1]["input"],
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Read it"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Looking**"}, {"type": "summary_text", "text": "at the file"}], "encrypted_content": "gAAAAB-encrypted-9"},
            {"type": "function_call", "call_id": "call_9", "name": "read_file", "arguments": "{\"path\":\"src/lib.rs\"}"},
            {"type": "function_call_output", "call_id": "call_9", "output": "fn main() {}"},
        ])
    );
    // Stateless: the whole history each time, nothing stored, no item id sent back.
    assert!(bodies[1].get("previous_response_id").is_none());
    assert_eq!(bodies[1]["store"], json!(false));
    assert!(!bodies[1].to_string().contains("rs_9"));
}

#[tokio::test]
async fn openais_own_api_sends_only_the_models_that_need_it_to_responses() {
    let openai = OpenAiProvider::new("https://api.openai.com/v1", Some(ApiKey::new(KEY))).unwrap();
    assert_eq!(openai.api(), OpenAiApi::Auto);
    assert_eq!(openai.url_for("gpt-5.3-codex").path(), "/v1/responses");
    assert_eq!(openai.url_for("gpt-4.1").path(), "/v1/chat/completions");
    // Any other server speaks Chat Completions, whatever the model's name.
    let local = OpenAiProvider::new("http://localhost:11434/v1", None).unwrap();
    assert_eq!(local.api(), OpenAiApi::ChatCompletions);
    assert!(!local.uses_responses("my-codex-finetune"));

    // The same choice on the wire.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(sse_response(wire_bytes("openai-responses/text_hello.sse")))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse_response(wire_bytes("openai-chat/finish_length.sse")))
        .mount(&server)
        .await;
    let auto = provider(&server).with_api(OpenAiApi::Auto);
    let codex = auto
        .tool_use_completion(&request("gpt-5.3-codex"))
        .await
        .unwrap();
    assert_eq!(codex.text(), "Hello! How can I assist you today?");
    auto.tool_use_completion(&request("gpt-4.1")).await.unwrap();
    let paths: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.url.path().to_owned())
        .collect();
    assert_eq!(paths, ["/v1/responses", "/v1/chat/completions"]);
}

#[tokio::test]
async fn the_openai_responses_kind_speaks_responses_for_every_model() {
    let kind: ProviderKind = serde_json::from_str("\"openai-responses\"").unwrap();
    assert_eq!(kind, ProviderKind::OpenAiResponses);
    assert_eq!(ProviderKind::from_name("openai-responses"), Some(kind));
    assert_eq!(kind.key_var(), "OPENAI_API_KEY");
    // Its usual model is the `codex` alias's, one only this API serves.
    assert!(
        keel_provider::needs_responses(kind.default_model()),
        "{}",
        kind.default_model()
    );
    let server = serve_sse(
        "/v1/responses",
        wire_bytes("openai-responses/text_hello.sse"),
    )
    .await;
    let built = ProviderConfig {
        base_url: Some(format!("{}/v1", server.uri())),
        ..ProviderConfig::new(kind)
    }
    .build_with(|_| None)
    .unwrap();
    assert_eq!(built.provider.name(), "openai-responses");
    let reply = built
        .provider
        .tool_use_completion(&request("gpt-4.1"))
        .await
        .unwrap();
    assert_eq!(reply.text(), "Hello! How can I assist you today?");
}

/// One SSE event in the Responses shape.
fn event(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

fn failed(code: &str, message: &str) -> String {
    event(
        json!({"type": "response.failed", "sequence_number": 1, "response": {"id": "resp_1", "status": "failed", "error": {"code": code, "message": message}}}),
    )
}

async fn drain(provider: &dyn Provider, model: &str) -> (Vec<StreamEvent>, Option<ProviderError>) {
    keel_test_support::events::drain(provider, &request(model)).await
}

async fn serve_in_order(bodies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    for body in bodies {
        Mock::given(method("POST"))
            .and(path("/v1/responses"))
            .respond_with(body)
            .up_to_n_times(1)
            .mount(&server)
            .await;
    }
    server
}

fn retries(events: &[StreamEvent]) -> Vec<Duration> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Retrying { wait, .. } => Some(*wait),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_failed_response_before_any_output_is_retried() {
    let server = serve_in_order(vec![
        sse_response(failed(
            "server_error",
            "The server had an error while processing your request.",
        )),
        sse_response(wire_bytes("openai-responses/text_hello.sse")),
    ])
    .await;
    let (events, error) = drain(&provider(&server), "gpt-5").await;
    assert_eq!(error, None);
    assert_eq!(retries(&events).len(), 1);
    assert_eq!(
        assemble(events).text(),
        "Hello! How can I assist you today?"
    );
}

#[tokio::test]
async fn a_rate_limit_event_waits_as_its_message_asks() {
    let limited = event(
        json!({"type": "error", "sequence_number": 0, "code": "rate_limit_exceeded", "message": "Rate limit reached for gpt-5. Please try again in 0.25s.", "param": null}),
    );
    let server = serve_in_order(vec![
        sse_response(limited),
        sse_response(wire_bytes("openai-responses/text_hello.sse")),
    ])
    .await;
    let (events, error) = drain(&provider(&server), "gpt-5").await;
    assert_eq!(error, None);
    assert_eq!(retries(&events), [Duration::from_millis(250)]);
}

/// What an error must be.
type ErrorCheck = fn(&ProviderError) -> bool;

#[tokio::test]
async fn errors_are_typed_by_their_code_and_never_show_the_key() {
    let cases: Vec<(String, ErrorCheck)> = vec![
        (
            failed(
                "context_length_exceeded",
                "Your input exceeds the context window of this model.",
            ),
            |e| matches!(e, ProviderError::ContextLengthExceeded { .. }),
        ),
        (
            failed("insufficient_quota", "You exceeded your current quota."),
            |e| matches!(e, ProviderError::InvalidRequest { message } if message.contains("quota")),
        ),
        (
            event(
                json!({"type": "error", "code": "invalid_api_key", "message": format!("Incorrect API key provided: {KEY}")}),
            ),
            |e| matches!(e, ProviderError::Auth { .. }),
        ),
        (failed("invalid_prompt", "Invalid prompt."), |e| {
            matches!(e, ProviderError::InvalidRequest { .. })
        }),
    ];
    for (body, expected) in cases {
        let server = serve_sse("/v1/responses", body.clone()).await;
        let (_, error) = drain(&provider(&server), "gpt-5").await;
        let error = error.unwrap();
        assert!(expected(&error), "{body} gave {error:?}");
        assert!(!error.to_string().contains(KEY), "{error}");
        // None of these is worth another try.
        assert_eq!(server.received_requests().await.unwrap().len(), 1, "{body}");
    }
}

#[tokio::test]
async fn an_http_error_is_typed_and_scrubbed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "type": "invalid_request_error", "code": "invalid_api_key"}})))
        .mount(&server)
        .await;
    let (_, error) = drain(&provider(&server), "gpt-5").await;
    let error = error.unwrap();
    assert!(matches!(error, ProviderError::Auth { .. }), "{error:?}");
    assert!(!error.to_string().contains(KEY), "{error}");
    let auth = &server.received_requests().await.unwrap()[0].headers["authorization"];
    assert_eq!(auth.to_str().unwrap(), format!("Bearer {KEY}"));
}

#[tokio::test]
async fn a_call_cut_at_the_output_limit_is_never_runnable() {
    let mut body = String::new();
    body.push_str(&event(json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5", "status": "in_progress"}})));
    body.push_str(&event(json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "fc_1", "type": "function_call", "arguments": "", "call_id": "call_1", "name": "write_file"}})));
    body.push_str(&event(json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": "{\"path\": \"a.txt\", \"content\": \"rm -rf"})));
    body.push_str(&event(json!({"type": "response.incomplete", "response": {"id": "resp_1", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "usage": {"input_tokens": 10, "output_tokens": 5}}})));
    let reply = complete_body(body.into_bytes()).await;
    assert_eq!(reply.stop_reason, StopReason::MaxTokens);
    let call = reply.tool_calls()[0];
    assert_eq!(call.id, "call_1");
    assert!(!call.is_valid(), "{call:?}");
}

#[tokio::test]
async fn a_stream_cut_after_text_fails_without_a_retry() {
    let bytes = wire_bytes("openai-responses/text_hello.sse");
    let text = String::from_utf8(bytes).unwrap();
    let cut = &text[..text.find("event: response.output_text.done").unwrap()];
    let server = serve_sse("/v1/responses", cut.to_owned()).await;
    let (events, error) = drain(&provider(&server), "gpt-5").await;
    assert!(
        matches!(error, Some(ProviderError::Stream { .. })),
        "{error:?}"
    );
    assert!(events.iter().any(StreamEvent::is_content));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[test]
fn malformed_events_are_errors_not_panics() {
    for body in [
        "data: {not json\n\n",
        "data: {\"type\": 7}\n\n",
        "data: {\"type\":\"response.output_text.delta\",\"output_index\":-1,\"delta\":\"x\"}\n\n",
    ] {
        assert!(
            matches!(parse(body.as_bytes(), 3), Err(ProviderError::Stream { .. })),
            "{body}"
        );
    }
    // Unknown events and items are skipped; a stream without its end is incomplete.
    let unknown = event(json!({"type": "response.web_search_call.searching", "output_index": 0}));
    assert!(matches!(
        parse(unknown.as_bytes(), 5),
        Err(ProviderError::Stream { .. })
    ));
    // Odd but well-formed: a delta for an item never announced, a done for an unknown index.
    let mut odd = event(
        json!({"type": "response.function_call_arguments.delta", "output_index": 4, "delta": "{}"}),
    );
    odd.push_str(&event(json!({"type": "response.output_item.done", "output_index": 9, "item": {"type": "function_call", "call_id": "call_x", "name": "read_file", "arguments": "{\"path\":\"a\"}"}})));
    odd.push_str(&event(
        json!({"type": "response.completed", "response": {}}),
    ));
    let reply = assemble(parse(odd.as_bytes(), 64).unwrap());
    assert_eq!(
        reply.content,
        vec![ContentBlock::tool_use(
            "call_x",
            "read_file",
            json!({"path": "a"})
        )]
    );
    // A rendered reply survives any cut.
    let rendered = responses_sse(&keel_test_support::scripted::text_reply("fine"));
    assert_eq!(
        assemble(parse(rendered.as_bytes(), 1).unwrap()).text(),
        "fine"
    );
}
