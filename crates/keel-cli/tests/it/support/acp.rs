//! A line-by-line ACP client for `keel acp`: sends each request after the previous one's
//! reply, answers the agent's own requests, and keeps every message in order.

use serde_json::{Value, json};

/// Talks to `keel acp` (`command` is keel, the `acp` argument added here) as a client that
/// sends each request after the previous one's reply (a `sessionId` of `"SESSION"` becomes
/// the id `session/new` answered); every message keel wrote, in order. keel's own requests
/// (a permission question, a file read) are refused with an error.
pub(crate) async fn converse(command: std::process::Command, requests: Vec<Value>) -> Vec<Value> {
    converse_answering(command, requests, |request| {
        json!({"error": {"code": -32603, "message": format!("this client does not answer {}", request["method"])}})
    })
    .await
}

/// [`converse`], answering each request keel sends with what `answer` makes of it: a JSON
/// object holding `result` or `error`, given the request.
pub(crate) async fn converse_answering(
    mut command: std::process::Command,
    requests: Vec<Value>,
    answer: impl Fn(&Value) -> Value + Send + 'static,
) -> Vec<Value> {
    command
        .arg("acp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    tokio::task::spawn_blocking(move || {
        use std::io::{BufRead, Write};
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut messages: Vec<Value> = Vec::new();
        for mut request in requests {
            if request["params"]["sessionId"] == "SESSION"
                && let Some(id) = messages
                    .iter()
                    .find_map(|m| m["result"]["sessionId"].as_str().map(str::to_owned))
            {
                request["params"]["sessionId"] = Value::String(id);
            }
            writeln!(stdin, "{request}").unwrap();
            // A notification has no reply to wait for.
            if request.get("id").is_none() {
                continue;
            }
            loop {
                let mut line = String::new();
                assert!(
                    stdout.read_line(&mut line).unwrap() > 0,
                    "keel acp ended early"
                );
                let message: Value =
                    serde_json::from_str(&line).expect("stdout holds only JSON-RPC");
                if message.get("method").is_some() && message.get("id").is_some() {
                    let mut reply = answer(&message);
                    reply["jsonrpc"] = json!("2.0");
                    reply["id"] = message["id"].clone();
                    writeln!(stdin, "{reply}").unwrap();
                }
                let done = message["id"] == request["id"] && message.get("method").is_none();
                messages.push(message);
                if done {
                    break;
                }
            }
        }
        drop(stdin);
        assert!(child.wait().unwrap().success());
        messages
    })
    .await
    .unwrap()
}

/// The `session/update` payloads among `messages`, in order.
pub(crate) fn updates(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .collect()
}

/// The reply to request `id`.
pub(crate) fn reply(messages: &[Value], id: u64) -> Value {
    messages
        .iter()
        .find(|m| m["id"] == id && m.get("method").is_none())
        .cloned()
        .unwrap_or_else(|| panic!("no reply to request {id}: {messages:#?}"))
}

/// `initialize` with `capabilities`, then `session/new` in `cwd`: the first two requests.
pub(crate) fn open(cwd: impl AsRef<std::path::Path>, capabilities: Value) -> Vec<Value> {
    vec![
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": capabilities}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
               "params": {"cwd": cwd.as_ref(), "mcpServers": []}}),
    ]
}

/// A `session/prompt` of `text` in the session, as request `id`.
pub(crate) fn prompt(id: u64, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
           "params": {"sessionId": "SESSION", "prompt": [{"type": "text", "text": text}]}})
}
