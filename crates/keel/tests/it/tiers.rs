//! Model tiers across providers through the facade: with a `ModelRouter` as the provider,
//! `code {model: small}`, a sub-agent with `model: fast` and compaction summaries reach the
//! small tier's server; the catalog the builder takes prices and sizes every run.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use keel::prelude::*;
use keel_provider::{
    AnthropicProvider, ApiKey, ModelCatalog, ModelInfo, ModelRouter, OpenAiProvider, Pricing,
    Provider,
};
use keel_test_support::git::TempRepo;
use keel_test_support::mock::{request_bodies, serve_anthropic_replies, serve_openai_replies};
use keel_test_support::scripted::{ScriptedProvider, text_reply, tool_reply};
use serde_json::json;
use wiremock::MockServer;

/// The hosted provider (Anthropic's wire) with `qwen3:8b` routed to `local` (an
/// OpenAI-compatible server).
fn router(hosted: &MockServer, local: &MockServer) -> Arc<dyn Provider> {
    let main = AnthropicProvider::new(ApiKey::new("sk-ant-test"))
        .unwrap()
        .with_base_url(&hosted.uri())
        .unwrap();
    let small = OpenAiProvider::new(&format!("{}/v1", local.uri()), None).unwrap();
    Arc::new(ModelRouter::new("anthropic", Arc::new(main)).route(
        "qwen3:8b",
        "local",
        Arc::new(small),
    ))
}

fn models(bodies: &[serde_json::Value]) -> Vec<String> {
    bodies
        .iter()
        .map(|body| body["model"].as_str().unwrap().to_owned())
        .collect()
}

#[cfg(feature = "delegation")]
#[tokio::test]
async fn code_and_sub_agents_on_the_small_tier_reach_its_server() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let claude = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(claude.path().join("agents")).unwrap();
    std::fs::write(
        claude.path().join("agents/helper.md"),
        "---\nname: helper\ndescription: Helps\nmodel: fast\n---\nYou help.\n",
    )
    .unwrap();
    let hosted = serve_anthropic_replies(&[
        tool_reply(
            "toolu_1",
            "code",
            json!({"task": "Say hi", "cwd": repo.path(), "model": "small"}),
        ),
        tool_reply(
            "toolu_2",
            "spawn_agent",
            json!({"agent": "helper", "task": "Help"}),
        ),
        text_reply("Done."),
    ])
    .await;
    let local = serve_openai_replies(&[text_reply("Hi from code."), text_reply("Helped.")]).await;
    let agent = CodingAgent::builder(router(&hosted, &local))
        .model("claude-sonnet-5-5")
        .small_model("qwen3:8b")
        .cwd(repo.path())
        .home(home.path())
        .claude_home(claude.path())
        .approver(AllowAll)
        .build()
        .unwrap();
    let mut session = agent.session().unwrap();
    let outcome = session.run("Delegate twice").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);

    assert_eq!(
        models(&request_bodies(&local).await),
        ["qwen3:8b", "qwen3:8b"]
    );
    let hosted_bodies = request_bodies(&hosted).await;
    assert_eq!(models(&hosted_bodies), ["claude-sonnet-5-5"; 3]);
    let results = hosted_bodies[2].to_string();
    assert!(results.contains("Helped."), "{results}");
    // The main loop's calls are the hosted provider's, priced by the built-in catalog.
    let hosted_cost = outcome.cost_by_provider.get("anthropic").unwrap();
    assert_eq!(hosted_cost.usage.input_tokens, 300);
    assert!(hosted_cost.cost_usd.unwrap() > 0.0);
    // The code session's and the sub-agent's calls are the run's too, under the local
    // provider; the catalog has no price for qwen3:8b, so theirs (and the total) is unknown.
    let local_cost = outcome.cost_by_provider.get("local").unwrap();
    assert_eq!(local_cost.usage.input_tokens, 200);
    assert_eq!(local_cost.cost_usd, None);
    assert_eq!(outcome.cost_usd, None, "never a guess");
}

#[tokio::test]
async fn summaries_on_the_small_tier_and_a_configured_model_s_window_and_prices() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    // The main model is one the built-in catalog does not know; the catalog given to the
    // builder knows its window and prices, and the small model's prices.
    let mut catalog = ModelCatalog::built_in();
    let price = |input: f64, output: f64| Pricing {
        input,
        output,
        cache_write: input,
        cache_read: input,
    };
    catalog.insert(ModelInfo {
        context_window: Some(10),
        pricing: Some(price(1.0, 2.0)),
        ..ModelInfo::new("my-hosted-model")
    });
    catalog.insert(ModelInfo {
        pricing: Some(price(0.0, 0.0)),
        ..ModelInfo::new("qwen3:8b")
    });
    let read = |id: &str| tool_reply(id, "read_file", json!({"path": "missing.txt"}));
    // A 10-token window: compaction as soon as there is something to summarize (after four
    // rounds of calls, six messages kept).
    let hosted = serve_anthropic_replies(&[
        read("r0"),
        read("r1"),
        read("r2"),
        read("r3"),
        text_reply("Done."),
    ])
    .await;
    let local = serve_openai_replies(&[text_reply("The summary.")]).await;
    let agent = CodingAgent::builder(router(&hosted, &local))
        .model("my-hosted-model")
        .small_model("qwen3:8b")
        .catalog(catalog)
        .compaction_model("small")
        .cwd(repo.path())
        .home(home.path())
        .approver(AllowAll)
        .build()
        .unwrap();
    let mut session = agent.session().unwrap();
    let outcome = session.run("Read it four times").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);

    let summaries = request_bodies(&local).await;
    assert_eq!(models(&summaries), ["qwen3:8b"]);
    assert!(summaries[0].get("tools").is_none(), "{}", summaries[0]);
    let last = request_bodies(&hosted).await.pop().unwrap().to_string();
    assert!(last.contains("The summary."), "{last}");
    // Five hosted calls of 100 tokens in, 20 out at 1 and 2 USD per million; the summary
    // at the configured price of nothing.
    let hosted_cost = outcome.cost_by_provider.get("anthropic").unwrap();
    assert!((hosted_cost.cost_usd.unwrap() - 5.0 * 140e-6).abs() < 1e-12);
    assert_eq!(
        outcome.cost_by_provider.get("local").unwrap().cost_usd,
        Some(0.0)
    );
    assert!((outcome.cost_usd.unwrap() - 5.0 * 140e-6).abs() < 1e-12);
}

#[tokio::test]
async fn the_context_window_set_on_the_builder_compacts_a_model_no_catalog_knows() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let provider = Arc::new(
        ["r0", "r1", "r2", "r3"]
            .iter()
            .fold(ScriptedProvider::new(), |p, id| {
                p.then_tool_call(id, "read_file", json!({"path": "missing.txt"}))
            })
            .then_text("The summary.")
            .then_text("Done."),
    );
    let agent = CodingAgent::builder(provider.clone())
        .model("qwen3:32b")
        .context_window(10)
        .cwd(repo.path())
        .home(home.path())
        .approver(AllowAll)
        .build()
        .unwrap();
    let mut session = agent.session().unwrap();
    let outcome = session.run("Read it four times").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    assert_eq!(outcome.text, "Done.");
    let requests = provider.requests();
    assert!(
        requests[4].tools.is_empty(),
        "the fifth request is the summary's"
    );
    assert_eq!(requests[4].model, "qwen3:32b");
    assert_eq!(outcome.cost_usd, None, "no price is known: never a guess");
    assert_eq!(
        outcome.cost_by_provider.get("scripted").unwrap().cost_usd,
        None
    );
}
