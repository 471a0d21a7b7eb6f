//! Tool profiles: every tool for a large model, a few under short definitions for a small one;
//! the model's context window, as known, that chooses between them; and the first request
//! that would not fit it.

use keel_provider::{ContextSource, ModelCatalog, ServedContext};

/// Which of keel's own tools, and which system prompt, the agent is offered.
///
/// MCP servers' tools and the host's own ([`CodingAgentBuilder::tool`]) are offered in
/// both. A profile never changes what a call may do: a lean tool is the full tool under a
/// shorter definition ([`keel_tool::Brief`]), with the same paths, effects and approvals.
///
/// [`CodingAgentBuilder::tool`]: crate::CodingAgentBuilder::tool
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ToolProfile {
    /// Every tool: the built-in file, search, shell and git tools, delegation (`code`,
    /// `spawn_agent`, `run_team`), skills and background tasks, with keel's full system
    /// prompt.
    #[default]
    Full,
    /// For a model with a small context window (a local one on Ollama, llama.cpp, vLLM):
    /// `read_file`, `list_directory`, `grep`, `write_file`, `patch_file` and `run_command`
    /// ([`keel_sandbox::lean_tools`]) under one-sentence descriptions and compact schemas,
    /// keel's short system prompt ([`keel_engine::LEAN_SYSTEM_PROMPT`]) with the same project
    /// context, and no delegation, skills or background tasks.
    Lean,
}

impl ToolProfile {
    /// The profile's name, as flags and config files write it: `full`, `lean`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Lean => "lean",
        }
    }

    /// The profile named `name` (`full`, `lean`).
    ///
    /// ```
    /// use keel::ToolProfile;
    ///
    /// assert_eq!(ToolProfile::from_name("lean"), Some(ToolProfile::Lean));
    /// assert_eq!(ToolProfile::from_name("Bash,Read"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "full" => Some(Self::Full),
            "lean" => Some(Self::Lean),
            _ => None,
        }
    }
}

/// A context window at or below this many tokens is small: an agent left to choose takes the
/// [lean](ToolProfile::Lean) profile. 32,768 tokens: the full profile's first request (about
/// 4,400 tokens of prompt and tools) plus the output reserved for a reply (8,192) take 40 % of
/// it before a file is read; Ollama's documentation counts agents and coding tools among the
/// tasks that need at least 64,000.
pub const SMALL_CONTEXT_WINDOW: u64 = 32_768;

/// The model's context window, in tokens, and where that is known from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextWindow {
    /// The window, in tokens (for [`ContextSource::OllamaTrained`], the most it can be).
    pub tokens: u64,
    /// Where it is known from.
    pub origin: WindowOrigin,
}

/// Where a [`ContextWindow`] is known from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WindowOrigin {
    /// The host said so ([`CodingAgentBuilder::context_window`](crate::CodingAgentBuilder::context_window)).
    Configured,
    /// keel's model catalog.
    Catalog,
    /// The server serving the model said so
    /// ([`Provider::served_context`](keel_provider::Provider::served_context)).
    Server(ContextSource),
}

/// How the agent's [`ToolProfile`] was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileChoice {
    /// The host chose it ([`CodingAgentBuilder::tool_profile`](crate::CodingAgentBuilder::tool_profile)).
    Given,
    /// Lean, because the model's window is at most [`SMALL_CONTEXT_WINDOW`].
    SmallWindow(ContextWindow),
    /// Full: nothing chose and no small window is known.
    Default,
}

/// A first request estimated larger than the model's context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextOverflow {
    /// The first request's estimated tokens: system prompt, tool definitions and the prompt
    /// (serialized bytes / 4, the estimate compaction uses).
    pub estimate: u64,
    /// The window it exceeds.
    pub window: ContextWindow,
}

/// The smallest window known for `model`: the configured one (else the catalog's), and the
/// one the server serves; the server's on a tie, its fix being the one to name.
pub(crate) fn known_window(
    catalog: &ModelCatalog,
    model: &str,
    configured: Option<u64>,
    served: Option<ServedContext>,
) -> Option<ContextWindow> {
    let stated = match configured {
        Some(tokens) => Some(ContextWindow {
            tokens,
            origin: WindowOrigin::Configured,
        }),
        None => catalog.context_window(model).map(|tokens| ContextWindow {
            tokens,
            origin: WindowOrigin::Catalog,
        }),
    };
    let served = served.map(|served| ContextWindow {
        tokens: served.tokens,
        origin: WindowOrigin::Server(served.source),
    });
    match (stated, served) {
        (Some(stated), Some(served)) if stated.tokens < served.tokens => Some(stated),
        (stated, served) => served.or(stated),
    }
}

/// The profile for an agent given `profile` (or none) whose model's window is `window`.
pub(crate) fn choose(
    profile: Option<ToolProfile>,
    window: Option<ContextWindow>,
) -> (ToolProfile, ProfileChoice) {
    match (profile, window) {
        (Some(profile), _) => (profile, ProfileChoice::Given),
        (None, Some(window)) if window.tokens <= SMALL_CONTEXT_WINDOW => {
            (ToolProfile::Lean, ProfileChoice::SmallWindow(window))
        }
        (None, _) => (ToolProfile::Full, ProfileChoice::Default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(tokens: u64) -> Option<ServedContext> {
        Some(ServedContext {
            tokens,
            source: ContextSource::OllamaNumCtx,
        })
    }

    #[test]
    fn the_smallest_window_known_counts() {
        // Unknown model, nothing said: nothing known.
        assert_eq!(
            known_window(&ModelCatalog::built_in(), "qwen3:8b", None, None),
            None
        );
        // The server's window below the configured one wins, and the other way round.
        let window = known_window(
            &ModelCatalog::built_in(),
            "qwen3:8b",
            Some(65_536),
            served(8_192),
        )
        .unwrap();
        assert_eq!(window.tokens, 8_192);
        assert_eq!(
            window.origin,
            WindowOrigin::Server(ContextSource::OllamaNumCtx)
        );
        let window = known_window(
            &ModelCatalog::built_in(),
            "qwen3:8b",
            Some(4_096),
            served(8_192),
        )
        .unwrap();
        assert_eq!(window.origin, WindowOrigin::Configured);
        // The catalog's window of a model it knows, unless configured.
        let window =
            known_window(&ModelCatalog::built_in(), "claude-sonnet-4-5", None, None).unwrap();
        assert_eq!(window.origin, WindowOrigin::Catalog);
        assert!(window.tokens > SMALL_CONTEXT_WINDOW);
        let window = known_window(
            &ModelCatalog::built_in(),
            "claude-sonnet-4-5",
            Some(16_000),
            None,
        )
        .unwrap();
        assert_eq!(window.tokens, 16_000);
    }

    #[test]
    fn only_a_small_window_chooses_lean_and_a_given_profile_always_wins() {
        let small = known_window(
            &ModelCatalog::built_in(),
            "m",
            Some(SMALL_CONTEXT_WINDOW),
            None,
        );
        let large = known_window(
            &ModelCatalog::built_in(),
            "m",
            Some(SMALL_CONTEXT_WINDOW + 1),
            None,
        );
        assert_eq!(choose(None, small).0, ToolProfile::Lean);
        assert_eq!(
            choose(None, large),
            (ToolProfile::Full, ProfileChoice::Default)
        );
        assert_eq!(
            choose(None, None),
            (ToolProfile::Full, ProfileChoice::Default)
        );
        assert_eq!(
            choose(Some(ToolProfile::Full), small),
            (ToolProfile::Full, ProfileChoice::Given)
        );
        assert_eq!(
            choose(Some(ToolProfile::Lean), large),
            (ToolProfile::Lean, ProfileChoice::Given)
        );
    }
}
