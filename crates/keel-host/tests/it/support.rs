//! A session factory over a scripted model, a tool whose every call is gated, and helpers to
//! read a subscription until something happens.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel::CodingAgent;
use keel::engine::Approver;
use keel::tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use keel_config::LiveMode;
use keel_host::{
    Answers, HostError, HostEvent, ModeApprover, Opening, SessionFactory, SessionParts,
    Subscription,
};
use keel_test_support::scripted::ScriptedProvider;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// `zap`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct ZapArgs {
    /// What to zap.
    pub(crate) target: String,
}

/// A tool every call of which is destructive (asked about in `ask` mode); it counts its runs.
#[derive(Clone, Default)]
pub(crate) struct Zap {
    pub(crate) runs: Arc<AtomicUsize>,
}

impl Zap {
    pub(crate) fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

impl Tool for Zap {
    type Args = ZapArgs;
    const NAME: &'static str = "zap";
    fn description(&self) -> &str {
        "Zaps a target."
    }
    fn effect(&self, args: &ZapArgs) -> Effect {
        Effect::destructive(format!("zaps {}", args.target))
    }
    async fn call(&self, args: ZapArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("zapped {}", args.target)))
    }
}

/// A model that zaps `target` once, then says `done`.
pub(crate) fn zapping_model(target: &str) -> Arc<ScriptedProvider> {
    Arc::new(
        ScriptedProvider::new()
            .then_tool_call("call_1", "zap", json!({ "target": target }))
            .then_text("done"),
    )
}

/// Opens sessions of an agent on a scripted model in `cwd`, with keel's home in `home`, in
/// `ask` mode, with the `zap` tool; snapshots on.
pub(crate) struct ScriptedSessions {
    pub(crate) model: Arc<ScriptedProvider>,
    pub(crate) cwd: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) zap: Zap,
}

impl ScriptedSessions {
    pub(crate) fn new(model: Arc<ScriptedProvider>, cwd: &Path, home: &Path) -> Self {
        Self {
            model,
            cwd: cwd.to_path_buf(),
            home: home.to_path_buf(),
            zap: Zap::default(),
        }
    }
}

#[async_trait::async_trait]
impl SessionFactory for ScriptedSessions {
    async fn open(&self, opening: &Opening, answers: Answers) -> Result<SessionParts, HostError> {
        let approver =
            ModeApprover::starting(LiveMode::Ask, Some(Arc::new(answers) as Arc<dyn Approver>));
        let mode = approver.switch();
        let coding = CodingAgent::builder(self.model.clone())
            .cwd(&self.cwd)
            .home(&self.home)
            .approver(approver)
            .delegation(false)
            .snapshots(Some(keel::snapshot::SnapshotLimits::default()))
            .tool(self.zap.clone())
            .build()
            .map_err(|err| HostError::Failed(err.to_string()))?;
        let session = match opening {
            Opening::Resume { id } => coding.resume(id),
            Opening::Fork { id } => coding
                .agent()
                .fork(id, None)
                .map_err(keel::BuildError::from),
            _ => coding.session(),
        }
        .map_err(|err| HostError::Failed(err.to_string()))?;
        Ok(SessionParts {
            coding,
            session,
            mode,
        })
    }
}

/// Reads `subscription` until `wanted` picks an event (at most 10 s).
pub(crate) async fn until<T>(
    subscription: &mut Subscription,
    mut wanted: impl FnMut(&HostEvent) -> Option<T>,
) -> T {
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = subscription.next().await {
            if let Some(found) = wanted(&event) {
                return Some(found);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(found)) => found,
        Ok(None) => panic!("the subscription ended before the event"),
        Err(_) => panic!("no such event within 10 s"),
    }
}

/// Every event `subscription` has now, without waiting.
pub(crate) fn drain(subscription: &mut Subscription) -> Vec<HostEvent> {
    let mut events = Vec::new();
    while let Some(event) = subscription.try_next() {
        events.push(event);
    }
    events
}

/// The question of the next `Question` event.
pub(crate) async fn next_question(subscription: &mut Subscription) -> keel_host::Question {
    until(subscription, |event| match event {
        HostEvent::Question(question) => Some(question.clone()),
        _ => None,
    })
    .await
}

/// The outcome's stop name of the `TurnEnded` event of turn `turn`.
pub(crate) async fn turn_end(subscription: &mut Subscription, turn: u64) -> String {
    until(subscription, |event| match event {
        HostEvent::TurnEnded {
            turn: ended,
            outcome,
        } if *ended == turn => Some(
            outcome
                .as_ref()
                .map_or("none".to_owned(), |o| o.stop.name().to_owned()),
        ),
        _ => None,
    })
    .await
}
