//! The JSON objects `keel exec` prints, in the shapes of Claude Code's `--output-format json`
//! and `stream-json`, so tools written for it read keel's too.

use std::time::Duration;

use keel_engine::{RunOutcome, Stop};
use keel_provider::{ContentBlock, Message, Role, Usage};
use serde_json::{Value, json};

/// `success`, `error_max_turns` or `error_during_execution`.
pub(crate) fn result_subtype(stop: &Stop) -> &'static str {
    match stop {
        Stop::Completed => "success",
        Stop::MaxIterations => "error_max_turns",
        _ => "error_during_execution",
    }
}

fn usage_json(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
    })
}

/// The final `result` object.
pub(crate) fn result_object(outcome: &RunOutcome, session_id: &str, duration: Duration) -> Value {
    json!({
        "type": "result",
        "subtype": result_subtype(&outcome.stop),
        "is_error": outcome.stop != Stop::Completed,
        "result": outcome.text,
        "num_turns": outcome.iterations,
        "session_id": session_id,
        "duration_ms": u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        "usage": usage_json(&outcome.usage),
        "total_cost_usd": outcome.cost_usd,
    })
}

/// What the `system`/`init` line says about the run.
pub(crate) struct InitInfo<'a> {
    /// The session's id.
    pub session_id: &'a str,
    /// The working directory.
    pub cwd: &'a std::path::Path,
    /// The model.
    pub model: &'a str,
    /// The provider's name.
    pub provider: &'a str,
    /// The tools' names.
    pub tools: Vec<String>,
    /// `ask`, `deny` or `allow`.
    pub approvals: &'a str,
    /// `workspace-write`, `read-only` or `full-access`.
    pub sandbox: &'a str,
}

/// The first `stream-json` line.
pub(crate) fn init_object(info: &InitInfo<'_>) -> Value {
    json!({
        "type": "system",
        "subtype": "init",
        "session_id": info.session_id,
        "cwd": info.cwd,
        "model": info.model,
        "provider": info.provider,
        "tools": info.tools,
        "permissionMode": info.approvals,
        "sandbox": info.sandbox,
        "keel_version": env!("CARGO_PKG_VERSION"),
    })
}

/// A `stream-json` line saying the reply being streamed was cut off and is discarded (a UI
/// drops what it showed of it); the same request is sent again.
pub(crate) fn reply_discarded_object(
    attempt: u32,
    max_attempts: u32,
    error: &str,
    session_id: &str,
) -> Value {
    json!({
        "type": "system",
        "subtype": "reply_discarded",
        "attempt": attempt,
        "max_attempts": max_attempts,
        "error": error,
        "session_id": session_id,
    })
}

/// A `stream-json` line saying the run has used `used` of its `limit` model calls (80 %):
/// the model is told how many are left, so it can wrap up.
pub(crate) fn iteration_warning_object(used: u32, limit: u32, session_id: &str) -> Value {
    json!({
        "type": "system",
        "subtype": "iteration_warning",
        "used": used,
        "limit": limit,
        "remaining": limit.saturating_sub(used),
        "session_id": session_id,
    })
}

/// A `stream-json` line saying the workspace was snapshotted before call `call_id`
/// (`keel rewind SNAPSHOT` puts it back).
pub(crate) fn snapshot_object(call_id: &str, snapshot: &str, session_id: &str) -> Value {
    json!({
        "type": "system",
        "subtype": "snapshot",
        "tool_use_id": call_id,
        "snapshot_id": snapshot,
        "session_id": session_id,
    })
}

/// A `stream-json` line for a message added to the history: `assistant` for the model's,
/// `user` for tool results (and a `Stop` hook's reason). An image a tool result carries is
/// shown as its media type and size (`{"media_type": "image/png", "bytes": 12345}`), never its
/// base64 data.
pub(crate) fn message_object(message: &Message, session_id: &str) -> Value {
    let kind = match message.role {
        Role::Assistant => "assistant",
        _ => "user",
    };
    let mut shown = serde_json::to_value(message).unwrap_or(Value::Null);
    if let Some(blocks) = shown.get_mut("content").and_then(Value::as_array_mut) {
        for (block, original) in blocks.iter_mut().zip(&message.content) {
            if let ContentBlock::ToolResult { images, .. } = original
                && !images.is_empty()
                && let Some(object) = block.as_object_mut()
            {
                let described = images
                    .iter()
                    .map(|image| {
                        json!({"media_type": image.media_type(), "bytes": image.decoded_len()})
                    })
                    .collect();
                object.insert("images".to_owned(), Value::Array(described));
            }
        }
    }
    json!({
        "type": kind,
        "message": shown,
        "parent_tool_use_id": null,
        "session_id": session_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_test_support::images::{TINY_PNG, png_base64_of_len, result_with_png};

    #[test]
    fn stream_json_shows_images_by_type_and_size_only() {
        let big = keel_provider::ImageData::new("image/png", png_base64_of_len(16_384)).unwrap();
        let message = Message::new(
            Role::User,
            vec![
                result_with_png("t1", "shot"),
                ContentBlock::tool_result_with_images("t2", "", false, vec![big]),
                ContentBlock::tool_result("t3", "plain", false),
            ],
        );
        let line = message_object(&message, "s");
        let text = line.to_string();
        assert!(
            !text.contains(TINY_PNG) && !text.contains("AAAAAAAA"),
            "{text}"
        );
        let content = &line["message"]["content"];
        assert_eq!(
            content[0]["images"],
            json!([{"media_type": "image/png", "bytes": 69}])
        );
        assert_eq!(content[0]["content"], "shot");
        assert_eq!(
            content[1]["images"],
            json!([{"media_type": "image/png", "bytes": 12_288}])
        );
        assert!(content[2].get("images").is_none());
    }
}
