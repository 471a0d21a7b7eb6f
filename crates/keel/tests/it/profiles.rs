//! Tool profiles: the full and lean tool sets (snapshotted), the lean profile chosen for a
//! small context window (configured, or what the server says), the host's and MCP servers'
//! tools kept in both, and the first request measured against the window.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use keel::prelude::*;
use keel::{ContextWindow, ProfileChoice, SMALL_CONTEXT_WINDOW, ToolProfile, WindowOrigin};
use keel_provider::{ContextSource, ServedContext};
use keel_test_support::git::TempRepo;
use keel_test_support::scripted::ScriptedProvider;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// A host's own tool.
struct Deploy;

impl Tool for Deploy {
    type Args = NoArgs;
    const NAME: &'static str = "deploy";
    fn description(&self) -> &str {
        "Deploys the app."
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("deployed"))
    }
}

/// The first request of an agent `configure` builds, and the agent.
async fn first_request(
    configure: impl FnOnce(CodingAgentBuilder) -> CodingAgentBuilder,
) -> (CodingAgent, keel_provider::CompletionRequest) {
    let repo = TempRepo::with_delegates();
    let home = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedProvider::new().then_text("done"));
    let builder = CodingAgent::builder(model.clone())
        .model("qwen3:8b")
        .cwd(repo.path())
        .home(home.path())
        .background_tasks(Some(keel::BackgroundTasks::detached("/bin/false")))
        .tool(Deploy);
    let agent = configure(builder).build().unwrap();
    let mut session = agent.session().unwrap();
    session.run("What does answer() return?").await;
    let request = model.requests().remove(0);
    (agent, request)
}

fn names(request: &keel_provider::CompletionRequest) -> Vec<&str> {
    request
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect()
}

#[tokio::test]
async fn each_profile_s_tools() {
    let (full_agent, full) = first_request(|b| b.tool_profile(ToolProfile::Full)).await;
    let (lean_agent, lean) = first_request(|b| b.tool_profile(ToolProfile::Lean)).await;
    assert_eq!(full_agent.tool_profile(), ToolProfile::Full);
    assert_eq!(lean_agent.profile_choice(), ProfileChoice::Given);
    insta::assert_snapshot!(
        "tool_lists",
        format!(
            "full: {}\nlean: {}",
            names(&full).join(", "),
            names(&lean).join(", ")
        )
    );
    // The host's tool is offered in both; nothing of delegation, skills or tasks in lean.
    assert!(names(&lean).contains(&"deploy"));
    assert!(lean_agent.delegates().is_none());
    let system = lean.system.as_deref().unwrap();
    assert!(
        system.starts_with(keel::engine::LEAN_SYSTEM_PROMPT),
        "{system}"
    );
    assert!(system.contains("Run `cargo test` before you answer."));
    assert!(!system.contains("release"), "no skills index: {system}");
    let size = |request: &keel_provider::CompletionRequest| {
        serde_json::to_string(&request.tools).unwrap().len() + system_len(request)
    };
    assert!(
        size(&lean) * 4 < size(&full),
        "lean {} vs full {}",
        size(&lean),
        size(&full)
    );
}

fn system_len(request: &keel_provider::CompletionRequest) -> usize {
    request.system.as_deref().map_or(0, str::len)
}

#[tokio::test]
async fn a_small_window_chooses_lean_and_a_large_one_full() {
    let (agent, request) = first_request(|b| b.context_window(8_192)).await;
    assert_eq!(agent.tool_profile(), ToolProfile::Lean);
    assert_eq!(
        agent.profile_choice(),
        ProfileChoice::SmallWindow(ContextWindow {
            tokens: 8_192,
            origin: WindowOrigin::Configured
        })
    );
    assert!(!names(&request).contains(&"spawn_agent"));

    let served = ServedContext {
        tokens: 4_096,
        source: ContextSource::OllamaNumCtx,
    };
    let (agent, _) = first_request(|b| b.context_window(131_072).served_context(served)).await;
    assert_eq!(
        agent.profile_choice(),
        ProfileChoice::SmallWindow(ContextWindow {
            tokens: 4_096,
            origin: WindowOrigin::Server(ContextSource::OllamaNumCtx)
        })
    );
    // Compaction works to the window the server serves.
    assert_eq!(agent.session().unwrap().context_window(), Some(4_096));

    let (agent, request) = first_request(|b| b.context_window(SMALL_CONTEXT_WINDOW + 1)).await;
    assert_eq!(agent.profile_choice(), ProfileChoice::Default);
    assert!(names(&request).contains(&"spawn_agent"));
    // Nothing known (a model the catalog lacks, nothing said): full.
    let (agent, _) = first_request(|b| b).await;
    assert_eq!(
        (agent.tool_profile(), agent.context_window()),
        (ToolProfile::Full, None)
    );
    // A profile given wins over the window.
    let (agent, _) =
        first_request(|b| b.served_context(served).tool_profile(ToolProfile::Full)).await;
    assert_eq!(agent.tool_profile(), ToolProfile::Full);
    assert_eq!(agent.profile_choice(), ProfileChoice::Given);
}

#[tokio::test]
async fn a_first_request_larger_than_the_window_is_measured() {
    let served = ServedContext {
        tokens: 2_048,
        source: ContextSource::OllamaNumCtx,
    };
    let (agent, request) =
        first_request(|b| b.served_context(served).tool_profile(ToolProfile::Full)).await;
    let overflow = agent
        .context_overflow("What does answer() return?")
        .unwrap();
    assert_eq!(overflow.window.tokens, 2_048);
    // The estimate is the request's size at 4 bytes a token, give or take the envelope.
    let bytes = serde_json::to_string(&request.tools).unwrap().len()
        + system_len(&request)
        + "What does answer() return?".len();
    let estimate = overflow.estimate as usize;
    assert!(
        (bytes / 4..=bytes / 4 + 50).contains(&estimate),
        "{estimate} tokens for {bytes} bytes"
    );
    // The lean profile fits the same window; a longer prompt counts.
    let (agent, _) = first_request(|b| b.served_context(served)).await;
    assert_eq!(agent.tool_profile(), ToolProfile::Lean);
    assert_eq!(agent.context_overflow("hi"), None);
    assert!(agent.context_overflow(&"word ".repeat(2_000)).is_some());
    // No window known: nothing to exceed.
    let (agent, _) = first_request(|b| b).await;
    assert_eq!(agent.context_overflow(&"word ".repeat(100_000)), None);
}
