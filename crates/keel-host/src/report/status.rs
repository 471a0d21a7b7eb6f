//! A session's status at a glance: where the provider is, the line after each turn (time,
//! tokens, cost, context used), the line of a mode change, and `/context` (what fills the
//! window).

use std::time::Duration;

use keel::engine::Session;
use keel::engine::compaction::{block_tokens, json_tokens};
use keel::provider::{ContentBlock, Message, ProviderKind, Role, ToolDefinition, Usage};
use keel_config::LiveMode;

use crate::render::{human_duration, thousands};

/// A window size the short way: `200k`, `1M`, `8192`.
pub fn window_size(tokens: u64) -> String {
    if tokens >= 1_000_000 && tokens.is_multiple_of(1_000_000) {
        format!("{}M", tokens / 1_000_000)
    } else if tokens >= 1000 && tokens.is_multiple_of(1000) {
        format!("{}k", tokens / 1000)
    } else {
        thousands(tokens)
    }
}

/// `part` of `whole` in percent, rounded; a part that is not nothing is at least 1 %.
pub fn percent(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    let exact = u128::from(part) * 100;
    let rounded = (exact + u128::from(whole) / 2) / u128::from(whole);
    let rounded = u64::try_from(rounded).unwrap_or(u64::MAX);
    if part > 0 { rounded.max(1) } else { 0 }
}

/// Where the provider is: its kind and host, e.g. `anthropic, api.anthropic.com`.
pub fn provider_label(name: &str, kind: ProviderKind, base_url: &str) -> String {
    let host = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    let kind = match kind {
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::OpenAiResponses => "openai-responses",
        _ => "openai-compatible",
    };
    if name == kind {
        format!("{name} at {host}")
    } else {
        format!("{name} ({kind}) at {host}")
    }
}

/// The line shown when the mode changes.
pub fn mode_line(mode: LiveMode) -> String {
    format!("mode: {} — {}", mode.name(), mode.meaning())
}

/// The dim line after a turn: how long it took, its tokens, what it cost ("cost unknown"
/// for a model without a price, never a made-up amount), and how full the context is
/// (`context_used` of `window` tokens; left out when the window is unknown).
pub fn turn_line(
    took: Duration,
    usage: &Usage,
    cost_usd: Option<f64>,
    context_used: u64,
    window: Option<u64>,
) -> String {
    let mut tokens = format!(
        "{} in / {} out tokens",
        thousands(
            usage
                .input_tokens
                .saturating_add(usage.cache_creation_input_tokens)
        ),
        thousands(usage.output_tokens)
    );
    if usage.cache_read_input_tokens > 0 {
        tokens.push_str(&format!(
            " ({} cached)",
            thousands(usage.cache_read_input_tokens)
        ));
    }
    let cost = cost_usd.map_or_else(|| "cost unknown".to_owned(), |usd| format!("${usd:.4}"));
    let mut line = format!("{} · {tokens} · {cost}", human_duration(took));
    if let Some(window) = window {
        line.push_str(&format!(
            " · context {}% of {}",
            percent(context_used, window),
            window_size(window)
        ));
    }
    line
}

/// What fills the context window, as `/context` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextParts {
    /// The system prompt's tokens.
    pub system: u64,
    /// The tool definitions' tokens, and how many tools.
    pub tools: (u64, usize),
    /// The person's messages (and notices), without tool results.
    pub user: u64,
    /// The model's replies (text and calls).
    pub assistant: u64,
    /// Tool results.
    pub results: u64,
}

impl ContextParts {
    /// The parts of a request with this system prompt, these tools and these messages,
    /// estimated as keel's compaction estimates them (about 4 bytes a token).
    pub fn of(system: Option<&str>, tools: &[ToolDefinition], messages: &[Message]) -> Self {
        let mut parts = Self {
            system: system.map_or(0, json_tokens),
            tools: (json_tokens(tools), tools.len()),
            ..Self::default()
        };
        for message in messages {
            for block in &message.content {
                let tokens = block_tokens(block);
                match (message.role, block) {
                    (_, ContentBlock::ToolResult { .. }) => parts.results += tokens,
                    (Role::Assistant, _) => parts.assistant += tokens,
                    _ => parts.user += tokens,
                }
            }
        }
        parts
    }

    /// Everything, estimated.
    pub fn total(&self) -> u64 {
        self.system + self.tools.0 + self.user + self.assistant + self.results
    }
}

/// `/context`'s lines: each part with its tokens and share of the window, the total, and
/// what the provider last reported when that differs.
pub fn context_lines(session: &Session, tools: &[ToolDefinition]) -> Vec<String> {
    let parts = ContextParts::of(session.system_prompt(), tools, session.history());
    let window = session.context_window();
    let share = |tokens: u64| {
        window.map_or_else(String::new, |window| {
            format!(" ({}%)", percent(tokens, window))
        })
    };
    let row = |name: &str, tokens: u64| {
        format!("  {name:<22} ~{:>9}{}", thousands(tokens), share(tokens))
    };
    let window_text = window.map_or_else(
        || format!("the window of {} is not known", session.model()),
        |w| format!("window of {}: {} tokens", session.model(), thousands(w)),
    );
    let mut lines = vec![format!("context ({window_text}):")];
    lines.push(row("system prompt", parts.system));
    lines.push(row(&format!("tools ({})", parts.tools.1), parts.tools.0));
    lines.push(row("your messages", parts.user));
    lines.push(row("model replies", parts.assistant));
    lines.push(row("tool results", parts.results));
    lines.push(row("total (estimated)", parts.total()));
    let next = session.prompt_estimate();
    if next != parts.total() {
        lines.push(row("next request", next));
    }
    if let Some(window) = window {
        let used = next.max(parts.total());
        lines.push(format!(
            "  {:<22} ~{:>9} ({}%)",
            "free",
            thousands(window.saturating_sub(used)),
            100u64.saturating_sub(percent(used, window))
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turn_line_says_cost_unknown_rather_than_zero() {
        let usage = Usage {
            input_tokens: 1200,
            output_tokens: 34,
            cache_read_input_tokens: 5000,
            ..Usage::default()
        };
        let known = turn_line(
            Duration::from_millis(1500),
            &usage,
            Some(0.0123),
            50_000,
            Some(200_000),
        );
        assert!(
            known.ends_with(
                "1,200 in / 34 out tokens (5,000 cached) · $0.0123 · context 25% of 200k"
            ),
            "{known}"
        );
        let unknown = turn_line(Duration::from_millis(1500), &usage, None, 1, None);
        assert!(unknown.contains("cost unknown"), "{unknown}");
        assert!(!unknown.contains("$0.00"), "{unknown}");
        assert!(!unknown.contains("context"), "{unknown}");
    }

    #[test]
    fn percentages_round_and_a_little_is_at_least_one() {
        assert_eq!(percent(0, 100), 0);
        assert_eq!(percent(1, 1_000_000), 1);
        assert_eq!(percent(50, 200), 25);
        assert_eq!(percent(5, 0), 0);
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(window_size(200_000), "200k");
        assert_eq!(window_size(1_000_000), "1M");
    }
}
