//! The tool server over streamable HTTP: the bearer token (401 without it, or with a wrong
//! one; before anything else is looked at), then rmcp's own HTTP client with it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, deprecated)]

use std::sync::Arc;

use crate::server_support::*;
use keel_mcp::server::BearerToken;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

const TOKEN: &str = "test-token-0123456789abcdef";

fn initialize() -> serde_json::Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}
        }
    })
}

#[tokio::test]
async fn without_the_token_every_request_is_401_and_with_it_mcp_works() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().canonicalize().unwrap();
    let server = server(&work, &[], Arc::default());
    let http = server
        .serve_http(
            "127.0.0.1:0".parse().unwrap(),
            BearerToken::new(TOKEN).unwrap(),
        )
        .await
        .unwrap();
    let url = http.url();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let raw = reqwest::Client::new();
    let post = |auth: Option<String>, url: String| {
        let raw = raw.clone();
        async move {
            let mut request = raw
                .post(url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(initialize().to_string());
            if let Some(auth) = auth {
                request = request.header("authorization", auth);
            }
            request.send().await.unwrap()
        }
    };
    for auth in [
        None,
        Some("Bearer wrong".to_owned()),
        Some(format!("Bearer {TOKEN}x")),
        Some(format!("Basic {TOKEN}")),
        Some(TOKEN.to_owned()),
        Some("Bearer ".to_owned()),
    ] {
        let response = post(auth.clone(), url.clone()).await;
        assert_eq!(response.status(), 401, "{auth:?}");
        assert_eq!(
            response.headers().get("www-authenticate").unwrap(),
            "Bearer"
        );
    }
    // Another path, too: 401 first.
    let other = url.replace("/mcp", "/other");
    assert_eq!(post(None, other.clone()).await.status(), 401);
    assert_eq!(
        post(Some(format!("Bearer {TOKEN}")), other).await.status(),
        404
    );
    let response = post(Some(format!("Bearer {TOKEN}")), url.clone()).await;
    assert_eq!(response.status(), 200);
    assert!(server.clients().list().len() <= 1);

    // rmcp's client with the token: the whole protocol.
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(TOKEN),
    );
    let client = TestClient::new(None, None).serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 4);
    let mut params = CallToolRequestParams::new("echo");
    params.arguments = Some(json!({"text": "over http"}).as_object().unwrap().clone());
    let result = client.call_tool(params).await.unwrap();
    assert_eq!(result.is_error, Some(false));
    assert_eq!(
        result.content[0].as_text().map(|t| t.text.as_str()),
        Some("over http")
    );
    let mut params = CallToolRequestParams::new("touch");
    params.arguments = Some(json!({"cwd": "/"}).as_object().unwrap().clone());
    let result = client.call_tool(params).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    client.cancel().await.unwrap();

    // The same client without the token does not get in.
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header("nope"),
    );
    assert!(TestClient::new(None, None).serve(transport).await.is_err());

    http.shutdown();
    http.wait().await;
    assert!(raw.post(&url).send().await.is_err(), "still listening");
}

#[test]
fn no_server_without_a_token() {
    assert!(BearerToken::new("").is_err());
}
