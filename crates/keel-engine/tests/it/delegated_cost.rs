//! The model calls a tool makes on the session's behalf (a delegated run: `code`, a sub-agent,
//! a team) are the session's own: its usage, its cost per provider, and its cost budget.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use keel_engine::{Agent, AgentBuilder, Stop};
use keel_provider::{CostByProvider, Usage};
use keel_test_support::scripted::ScriptedProvider;
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// A tool whose own run made model calls: 1,000 tokens on a local server (free) and on a
/// hosted one (`cost` USD).
struct Delegate {
    cost: f64,
}

fn local_and_hosted(cost: f64) -> CostByProvider {
    let usage = Usage {
        input_tokens: 1_000,
        output_tokens: 100,
        ..Usage::default()
    };
    let mut costs = CostByProvider::default();
    costs.add("local", &usage, Some(0.0));
    costs.add("hosted", &usage, Some(cost));
    costs
}

impl Tool for Delegate {
    type Args = NoArgs;
    const NAME: &'static str = "delegate";
    fn description(&self) -> &str {
        "Runs a delegated session."
    }
    fn effect(&self, _args: &NoArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("delegated work done").with_delegated(local_and_hosted(self.cost)))
    }
}

fn agent(provider: Arc<ScriptedProvider>, cost: f64) -> AgentBuilder {
    Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(ToolRegistry::new().with(Delegate { cost }).unwrap())
}

#[tokio::test]
async fn a_delegated_run_is_counted_in_the_run_s_usage_and_cost_per_provider() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("call_1", "delegate", json!({}))
            .then_text("Done."),
    );
    let agent = agent(provider.clone(), 0.25).build().unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    let outcome = session.run("Delegate it").await;
    assert_eq!(outcome.stop, Stop::Completed);

    let local = outcome.cost_by_provider.get("local").unwrap();
    assert_eq!(local.usage.input_tokens, 1_000);
    assert_eq!(local.cost_usd, Some(0.0));
    let hosted = outcome.cost_by_provider.get("hosted").unwrap();
    assert_eq!(hosted.cost_usd, Some(0.25));
    // The session's own two calls (10 in, 5 out each) and the delegated 2,000 in, 200 out.
    assert_eq!(outcome.usage.input_tokens, 2_020);
    assert_eq!(outcome.usage.output_tokens, 210);
    let own = outcome
        .cost_by_provider
        .get("scripted")
        .unwrap()
        .cost_usd
        .unwrap();
    let total = outcome.cost_usd.unwrap();
    assert!(
        (total - (own + 0.25)).abs() < 1e-12,
        "{total} vs {own} + 0.25"
    );
    // The delegated result itself reaches the model as any result does.
    assert_eq!(provider.requests().len(), 2);
}

#[tokio::test]
async fn a_delegated_run_counts_against_the_cost_budget() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("call_1", "delegate", json!({}))
            .then_text("never asked"),
    );
    let agent = agent(provider.clone(), 1.0)
        .cost_budget_usd(0.5)
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    let outcome = session.run("Delegate it").await;
    let Stop::CostBudget { spent_usd, .. } = outcome.stop else {
        panic!(
            "the delegated run's cost slipped past the budget: {:?}",
            outcome.stop
        );
    };
    assert!(spent_usd >= 1.0, "{spent_usd}");
    assert_eq!(
        provider.requests().len(),
        1,
        "no call after the budget was spent"
    );
}
