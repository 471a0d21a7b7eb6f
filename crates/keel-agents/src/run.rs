//! Running a delegated session to its end under a step cap and an output-token budget, and
//! what it reports: its final text, its steps, its tokens, its tool calls, its error.

use std::time::Duration;

use futures::StreamExt;
use keel_engine::{AgentEvent, CostByProvider, Session, Stop};
use keel_provider::Usage;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A tool call a delegated run made.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub input: Value,
    /// Whether it failed (or was denied).
    pub is_error: bool,
    /// How long it took.
    pub duration: Duration,
}

/// How a delegated run went.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// The final text (never empty: it says what happened when the run failed).
    pub output: String,
    /// Model calls made.
    pub steps: u32,
    /// Tokens used.
    pub usage: Usage,
    /// What it cost in USD, when the model's price is known.
    pub cost_usd: Option<f64>,
    /// Its usage and cost by the provider that served each call.
    pub cost_by_provider: CostByProvider,
    /// How the run ended.
    pub stop: Stop,
    /// Why the run did not complete, if it did not.
    pub error: Option<String>,
    /// The tool calls made, in order.
    pub calls: Vec<CallRecord>,
}

impl RunReport {
    /// Output tokens used: what the token budget counts.
    pub fn tokens(&self) -> u64 {
        self.usage.output_tokens
    }

    /// `N steps, T output tokens` (`1 step`, `1 output token`) and, if the run did not
    /// complete, `, error: ...`.
    pub fn stats(&self) -> String {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        let tokens = self.tokens();
        let mut text = format!(
            "{} step{}, {tokens} output token{}",
            self.steps,
            plural(u64::from(self.steps)),
            plural(tokens)
        );
        if let Some(error) = &self.error {
            text.push_str(&format!(", error: {error}"));
        }
        text
    }
}

/// Runs `task` in `session` to its end; `cancel` (the calling tool's token) cancels it. A
/// step cap and a token budget are the agent's (`max_iterations`, `output_token_budget`).
pub async fn run_to_end(
    session: &mut Session,
    task: &str,
    cancel: &CancellationToken,
) -> RunReport {
    run_reporting(session, task, cancel, |_| {}).await
}

/// [`run_to_end`], handing each tool call to `on_call` as it ends (for a progress line).
pub async fn run_reporting(
    session: &mut Session,
    task: &str,
    cancel: &CancellationToken,
    mut on_call: impl FnMut(&CallRecord) + Send,
) -> RunReport {
    let handle = session.cancel_handle();
    let mut calls = Vec::new();
    let mut inputs = std::collections::HashMap::new();
    let mut outcome = None;
    {
        let events = session.run_streaming(task);
        futures::pin_mut!(events);
        loop {
            let event = tokio::select! {
                biased;
                () = cancel.cancelled(), if outcome.is_none() => {
                    handle.cancel();
                    // Go on reading: the run ends promptly and reports itself.
                    events.next().await
                }
                event = events.next() => event,
            };
            let Some(event) = event else { break };
            match event {
                AgentEvent::ToolCallStarted { id, input, .. } => {
                    inputs.insert(id, input);
                }
                AgentEvent::ToolCallFinished {
                    id,
                    name,
                    is_error,
                    duration,
                    ..
                } => {
                    let call = CallRecord {
                        name,
                        input: inputs.remove(&id).unwrap_or(Value::Null),
                        is_error,
                        duration,
                    };
                    on_call(&call);
                    calls.push(call);
                }
                AgentEvent::Finished(done) => outcome = Some(done),
                _ => {}
            }
        }
    }
    let Some(outcome) = outcome else {
        return RunReport {
            output: "the run ended without an outcome".into(),
            steps: 0,
            usage: Usage::default(),
            cost_usd: None,
            cost_by_provider: CostByProvider::default(),
            stop: Stop::Failed(keel_engine::RunFailure::new(
                keel_engine::FailureKind::Internal,
                "no outcome",
            )),
            error: Some("the run ended without an outcome".into()),
            calls,
        };
    };
    let error = match &outcome.stop {
        Stop::Completed => None,
        Stop::MaxIterations => Some(format!(
            "stopped at the step cap ({} model calls)",
            outcome.iterations
        )),
        Stop::TokenBudget { used, budget } => Some(format!(
            "stopped: the token budget of {budget} output tokens was used up ({used} written)"
        )),
        Stop::Cancelled => Some("cancelled".into()),
        _ => Some(outcome.text.clone()),
    };
    RunReport {
        output: outcome.text,
        steps: outcome.iterations,
        usage: outcome.usage,
        cost_usd: outcome.cost_usd,
        cost_by_provider: outcome.cost_by_provider,
        stop: outcome.stop,
        error,
        calls,
    }
}
