//! A provider's stream run to its end, and events folded into a reply.

use futures::StreamExt;
use keel_provider::{
    CompletionRequest, Provider, ProviderError, ResponseAssembler, StreamEvent, ToolUseResponse,
};

/// Runs `provider`'s stream for `request` to its end: the events, and the error it ended with,
/// if any.
pub async fn drain(
    provider: &dyn Provider,
    request: &CompletionRequest,
) -> (Vec<StreamEvent>, Option<ProviderError>) {
    let mut stream = provider.stream(request);
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(err) => return (events, Some(err)),
        }
    }
    (events, None)
}

/// The reply `events` make; panics when they make none (no `MessageEnd`).
pub fn assemble(events: Vec<StreamEvent>) -> ToolUseResponse {
    let mut assembler = ResponseAssembler::new();
    events.into_iter().for_each(|event| assembler.push(event));
    assembler.finish().unwrap()
}
