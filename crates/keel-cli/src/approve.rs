//! Approvals asked on the terminal, and the approver each `--approvals` mode means.

use std::sync::Arc;

use keel_engine::{AllowAll, ApprovalRequest, Approver, Decision, DenyGated};

use crate::config::ApprovalMode;
use crate::render::describe_call;

/// Asks the person a question and returns the line they typed; `None` when they pressed
/// Ctrl-C or Ctrl-D, or nobody can answer. Called on a blocking thread.
pub type AskFn = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Asks `[y/N/a(lways)]` for each gated call, and `Continue? [Y/n]` at the iteration warning.
pub struct TerminalApprover {
    ask: AskFn,
}

impl TerminalApprover {
    /// An approver that asks through `ask`.
    pub fn new(ask: AskFn) -> Self {
        Self { ask }
    }

    async fn ask(&self, question: String) -> Option<String> {
        let ask = self.ask.clone();
        tokio::task::spawn_blocking(move || ask(&question))
            .await
            .ok()
            .flatten()
    }
}

/// The question asked for a gated call.
pub fn approval_question(request: &ApprovalRequest) -> String {
    format!(
        "Allow {}? ({}) [y/N/a(lways)] ",
        describe_call(&request.tool, &request.input),
        request.reason
    )
}

#[async_trait::async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let answer = self.ask(approval_question(request)).await;
        match answer
            .as_deref()
            .map(|a| a.trim().to_lowercase())
            .as_deref()
        {
            Some("y" | "yes") => Decision::Allow,
            Some("a" | "always") => Decision::AllowAlways,
            _ => {
                Decision::Deny("the user declined this call; ask them or do it another way".into())
            }
        }
    }

    async fn continue_after_warning(&self, used: u32, limit: u32) -> bool {
        let question = format!("keel has made {used} of {limit} model calls. Continue? [Y/n] ");
        match self.ask(question).await {
            Some(answer) => !matches!(answer.trim().to_lowercase().as_str(), "n" | "no"),
            None => false,
        }
    }
}

/// An approver chosen at run time.
pub struct ModeApprover(Arc<dyn Approver>);

impl ModeApprover {
    /// The approver `mode` means; `ask` uses `ask` (and, without it, refuses as `deny`).
    pub fn new(mode: ApprovalMode, ask: Option<AskFn>) -> Self {
        Self(match (mode, ask) {
            (ApprovalMode::Allow, _) => Arc::new(AllowAll),
            (ApprovalMode::Ask, Some(ask)) => Arc::new(TerminalApprover::new(ask)),
            (ApprovalMode::Deny, _) | (ApprovalMode::Ask, None) => Arc::new(DenyGated),
        })
    }
}

#[async_trait::async_trait]
impl Approver for ModeApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        self.0.approve(request).await
    }

    async fn continue_after_warning(&self, used: u32, limit: u32) -> bool {
        self.0.continue_after_warning(used, limit).await
    }
}
