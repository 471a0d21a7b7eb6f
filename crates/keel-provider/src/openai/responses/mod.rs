//! OpenAI's Responses API (`POST {base}/responses`, streamed): the only API that serves the
//! Codex models, and the one Codex itself speaks. [`OpenAiProvider`](super::OpenAiProvider)
//! speaks it for every model with [`OpenAiApi::Responses`](super::OpenAiApi), and on OpenAI's
//! own API for the models that need it ([`needs_responses`]).

pub(crate) mod parse;
pub(crate) mod request;

use crate::error::ProviderError;
use crate::sse::SseDriver;
use crate::stream::StreamEvent;

/// Whether `model` is served only by the Responses API: OpenAI's Codex models
/// (`gpt-5-codex`, `gpt-5.3-codex`, `codex-mini-latest`, …) and its `-pro` models (`o3-pro`,
/// `gpt-5-pro`). A router prefix (`openai/`) is ignored.
///
/// ```
/// use keel_provider::openai::needs_responses;
///
/// assert!(needs_responses("gpt-5.3-codex"));
/// assert!(needs_responses("o3-pro"));
/// assert!(!needs_responses("gpt-4.1"));
/// ```
pub fn needs_responses(model: &str) -> bool {
    let model = model.trim();
    let model = model.rsplit_once('/').map_or(model, |(_, name)| name);
    model.contains("codex")
        || model.ends_with("-pro")
        || model.contains("-pro-")
        || model.contains("deep-research")
        || model.starts_with("computer-use")
}

/// Parses a Responses API event stream incrementally.
///
/// Each output item is the block at its `output_index`. Function calls are assembled from
/// their argument deltas, and the item's final arguments are the call's input; a call left
/// open when the reply is cut (`response.incomplete`) is never runnable. Reasoning summaries
/// stream as thinking, and each reasoning item ends as a [`StreamEvent::Reasoning`] carrying
/// its encrypted content to send back. `response.failed` and `error` events are errors typed
/// by their code (`rate_limit_exceeded` with the wait its message asks for,
/// `context_length_exceeded`, `server_error`, …). Unknown events and items are skipped.
///
/// ```
/// use keel_provider::StreamEvent;
/// use keel_provider::openai::ResponsesStreamParser;
///
/// let mut parser = ResponsesStreamParser::new();
/// let mut events = Vec::new();
/// parser.feed(
///     b"event: response.output_text.delta\n\
///       data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hi\"}\n\n",
///     &mut events,
/// )?;
/// assert!(events.contains(&StreamEvent::TextDelta { index: 0, text: "Hi".into() }));
/// # Ok::<(), keel_provider::ProviderError>(())
/// ```
#[derive(Debug, Default)]
pub struct ResponsesStreamParser(SseDriver<parse::ResponsesEvents>);

impl ResponsesStreamParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next chunk of the body; events are appended to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.0.feed(chunk, out)
    }

    /// Ends the stream: one without `response.completed` (or `response.incomplete`) fails
    /// with [`ProviderError::Stream`].
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.0.finish(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_served_only_by_responses() {
        for model in [
            "gpt-5-codex",
            "gpt-5.1-codex-max",
            "codex-mini-latest",
            "openai/gpt-5.3-codex",
            "o3-pro",
            "o1-pro-2025-03-19",
            "gpt-5-pro",
            "o3-deep-research",
            "computer-use-preview",
        ] {
            assert!(needs_responses(model), "{model}");
        }
        for model in [
            "gpt-4.1",
            "gpt-5",
            "o3",
            "gpt-5.1",
            "qwen3:8b",
            "",
            "claude-sonnet-4-5",
        ] {
            assert!(!needs_responses(model), "{model}");
        }
    }
}
