//! The outcome of a run: its running totals (iterations, usage, cost), and the text that says
//! how it ended.

use keel_provider::{ToolUseResponse, Usage};

use super::{Session, Sink, emit};
use crate::events::{AgentEvent, Stop};
use crate::session_store::SessionRecord;
use keel_provider::CostByProvider;

/// The running totals of one run.
#[derive(Default)]
pub(super) struct RunState {
    pub(super) stop_blocks: u32,
    /// The final reply was cut off at the output limit.
    pub(super) cut_at_end: bool,
    pub(super) iterations: u32,
    pub(super) usage: Usage,
    /// What the run cost; `None` once a call's price is unknown.
    pub(super) cost_usd: Option<f64>,
    /// What the calls with a known price cost: what the cost budget counts, so a call on a
    /// model without a price (a local summary model) never switches the budget off.
    pub(super) spent_usd: f64,
    /// Usage and cost by the provider that served each call.
    pub(super) by_provider: CostByProvider,
    pub(super) warned: bool,
    pub(super) cut_replies: u32,
    pub(super) last_text: String,
    pub(super) failed_tools: Vec<String>,
    /// Calls mended by [`crate::repair`].
    pub(super) repaired_calls: u32,
}

impl RunState {
    /// Adds one call's (or a compaction's) usage and cost, served by the providers in
    /// `by_provider`.
    pub(super) fn charge(
        &mut self,
        usage: &Usage,
        cost: Option<f64>,
        by_provider: &CostByProvider,
    ) {
        self.usage.add(usage);
        self.cost_usd = self.cost_usd.zip(cost).map(|(total, cost)| total + cost);
        self.spent_usd += cost.unwrap_or(0.0);
        self.by_provider.merge(by_provider);
    }
}

impl Session {
    /// What one call on `model` using `usage` cost (`None`: its price is unknown), and the
    /// same under the name of the provider that served it.
    pub(super) fn price(&self, model: &str, usage: &Usage) -> (Option<f64>, CostByProvider) {
        let cost = self.config.catalog().cost(model, usage);
        let mut by_provider = CostByProvider::default();
        by_provider.add(self.config.provider().served_by(model), usage, cost);
        (cost, by_provider)
    }

    /// Counts the model calls a tool made on the session's behalf (a delegated run) as the
    /// session's own: in its usage, its cost (and cost budget) and its cost per provider.
    pub(super) fn charge_delegated(
        &mut self,
        delegated: &CostByProvider,
        sink: &Sink,
        state: &mut RunState,
    ) {
        let total = delegated.total();
        self.spend(&total.usage, total.cost_usd, delegated, sink, state);
    }

    /// Counts one model call's response as the session's.
    pub(super) fn account(
        &mut self,
        response: &ToolUseResponse,
        sink: &Sink,
        state: &mut RunState,
    ) {
        let (cost, by_provider) = self.price(self.config.model(), &response.usage);
        self.spend(&response.usage, cost, &by_provider, sink, state);
    }

    /// Adds `usage` costing `cost` (served as `by_provider` says) to the session's and the
    /// run's totals, logs it and reports it.
    fn spend(
        &mut self,
        usage: &Usage,
        cost: Option<f64>,
        by_provider: &CostByProvider,
        sink: &Sink,
        state: &mut RunState,
    ) {
        self.usage.add(usage);
        self.log_record(&SessionRecord::usage(*usage, cost));
        state.charge(usage, cost, by_provider);
        emit(
            sink,
            AgentEvent::Usage {
                call: *usage,
                total: state.usage,
                cost_usd: state.cost_usd,
            },
        );
    }
}

/// ` Its last message: ...` when the model said something, for a run that stopped early.
pub(super) fn last_message(state: &RunState) -> String {
    if state.last_text.trim().is_empty() {
        String::new()
    } else {
        format!(" Its last message: {}", state.last_text.trim())
    }
}

/// The outcome's text: never empty, never silent about what happened.
pub(super) fn final_text(stop: &Stop, state: &RunState, max_tokens: u32) -> String {
    let failures = if state.failed_tools.is_empty() {
        String::new()
    } else {
        format!(
            " Tool calls that failed: {}.",
            state.failed_tools.join("; ")
        )
    };
    match stop {
        Stop::Completed if state.cut_at_end => format!(
            "{}\n\n[the reply was cut off at the output limit ({} tokens)]",
            state.last_text.trim_end(),
            max_tokens
        ),
        Stop::Completed if !state.last_text.trim().is_empty() => state.last_text.clone(),
        Stop::Completed => format!(
            "The model ended its turn without a message after {} model call(s).{failures}",
            state.iterations
        ),
        Stop::MaxIterations => {
            let last = last_message(state);
            format!(
                "Stopped after {} model calls, the iteration limit; the task may be unfinished \
                 — send another prompt to go on.{failures}{last}",
                state.iterations
            )
        }
        Stop::Cancelled => format!(
            "Cancelled after {} model call(s); the session can go on with the next prompt.{failures}",
            state.iterations
        ),
        Stop::TokenBudget { used, budget } => {
            let last = last_message(state);
            format!(
                "Stopped after {} model call(s): the output-token budget of {budget} was used up \
                 ({used} written); the task may be unfinished.{failures}{last}",
                state.iterations
            )
        }
        Stop::CostBudget {
            spent_usd,
            budget_usd,
        } => {
            let last = last_message(state);
            format!(
                "Stopped after {} model call(s): the spending limit of ${budget_usd:.4} was \
                 reached (${spent_usd:.4} spent); the task may be unfinished.{failures}{last}",
                state.iterations
            )
        }
        Stop::Refused { reason } => reason.clone(),
        Stop::PromptBlocked { reason } => {
            format!("The prompt was blocked by a UserPromptSubmit hook and not sent: {reason}")
        }
        Stop::HookStopped { reason } => {
            let last = last_message(state);
            format!(
                "Stopped by a hook after {} model call(s): {reason}{failures}{last}",
                state.iterations
            )
        }
        Stop::Failed(failure) => format!(
            "The run failed: {}. The session is saved; send another prompt to go on.{failures}",
            failure.message
        ),
    }
}
