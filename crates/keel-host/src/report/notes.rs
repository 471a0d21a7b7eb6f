//! What keel says at start about the tool set and the model's context window: that it chose
//! the lean tools for a small window, and a warning when the first request would not fit the
//! window, naming the fix for the server found.

use keel::{CodingAgent, ContextWindow, ProfileChoice, ToolProfile, WindowOrigin};

use crate::render::thousands;

/// One line when the lean tools were chosen for a small window (none when a flag or the
/// config chose, or the tools are the full set).
pub fn profile_note(coding: &CodingAgent) -> Option<String> {
    let ProfileChoice::SmallWindow(window) = coding.profile_choice() else {
        return None;
    };
    Some(format!(
        "lean tools (six, briefly described, no delegation) for {}'s {}; --tools full offers \
         every tool",
        coding.model(),
        window_text(&window),
    ))
}

/// One warning when the first request with `prompt` is estimated larger than the model's
/// known window: the estimate, the window, and how to make them fit.
pub fn overflow_warning(coding: &CodingAgent, prompt: &str) -> Option<String> {
    let overflow = coding.context_overflow(prompt)?;
    let server_fix = match overflow.window.origin {
        WindowOrigin::Server(source) => Some(source.fix()),
        _ => None,
    };
    let fix = match (coding.tool_profile(), server_fix) {
        (ToolProfile::Full, Some(fix)) => format!("use --tools lean, or {fix}"),
        (ToolProfile::Full, None) => "use --tools lean".to_owned(),
        (_, Some(fix)) => fix.to_owned(),
        (_, None) => "shorten the prompt or the project's instructions (AGENTS.md)".to_owned(),
    };
    Some(format!(
        "the first request is about {} tokens, more than {}'s {}: the server will cut it or \
         refuse it; {fix}",
        thousands(overflow.estimate),
        coding.model(),
        window_text(&overflow.window),
    ))
}

/// `context window of 8,192 tokens (Ollama: num_ctx in the model's parameters)`.
fn window_text(window: &ContextWindow) -> String {
    let tokens = thousands(window.tokens);
    match window.origin {
        WindowOrigin::Server(source) => format!(
            "context window of {}{tokens} tokens ({}: {})",
            if source == keel::provider::ContextSource::OllamaTrained {
                "at most "
            } else {
                ""
            },
            source.server(),
            source.describe()
        ),
        WindowOrigin::Catalog => format!("context window of {tokens} tokens (keel's catalog)"),
        _ => format!("context window of {tokens} tokens (as configured)"),
    }
}
