//! Approvals asked on the terminal, and the approver each `--approvals` mode means.

use std::sync::Arc;

use keel_engine::{AllowAll, ApprovalRequest, Approver, Decision, DenyGated};

use crate::config::ApprovalMode;
use crate::render::describe_call;

/// What the person did at a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Typed a line and pressed Enter.
    Line(String),
    /// Pressed Ctrl-C: stop the whole turn.
    Interrupted,
    /// Pressed Ctrl-D, or nobody can answer: no.
    Closed,
}

impl Answer {
    /// The line typed, trimmed and lower-cased; `None` for Ctrl-C or Ctrl-D.
    pub(crate) fn word(&self) -> Option<String> {
        match self {
            Self::Line(line) => Some(line.trim().to_lowercase()),
            Self::Interrupted | Self::Closed => None,
        }
    }
}

/// Asks the person a question and returns what they did. Called on a blocking thread. The
/// question's last line is the prompt; lines before it (what the call would change) are
/// shown first.
pub(crate) type AskFn = Arc<dyn Fn(&str) -> Answer + Send + Sync>;

/// The lines shown before the question about a call, e.g. the diff of an edit.
pub(crate) type PreviewFn = Arc<dyn Fn(&ApprovalRequest) -> Vec<String> + Send + Sync>;

/// Asks `[y/N/a(lways)]` for each gated call, and `Continue? [Y/n]` at the iteration warning.
pub(crate) struct TerminalApprover {
    ask: AskFn,
    preview: Option<PreviewFn>,
}

impl TerminalApprover {
    /// An approver that asks through `ask`, showing what `preview` gives before each question
    /// about a call.
    pub(crate) fn new(ask: AskFn, preview: Option<PreviewFn>) -> Self {
        Self { ask, preview }
    }

    async fn ask(&self, question: String) -> Answer {
        let ask = self.ask.clone();
        tokio::task::spawn_blocking(move || ask(&question))
            .await
            .unwrap_or(Answer::Closed)
    }
}

/// The question asked for a gated call: the call, why it is asked, and the choices — with
/// what "always" would allow (this exact command, this path, these arguments), or no
/// "always" at all for a protected call, which is asked every time.
pub(crate) fn approval_question(request: &ApprovalRequest) -> String {
    let call = describe_call(&request.tool, &request.input);
    if !request.allows_always() {
        return format!("Allow {call}? ({}) [y/N] ", request.reason);
    }
    let always = request.scope.describe();
    let always = always.strip_prefix("always ").unwrap_or(&always);
    format!(
        "Allow {call}? ({}) [y/N/a(lways): {always}] ",
        request.reason
    )
}

#[async_trait::async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let mut question = String::new();
        for line in self.preview.iter().flat_map(|preview| preview(request)) {
            question.push_str(&line);
            question.push('\n');
        }
        question.push_str(&approval_question(request));
        let answer = self.ask(question).await;
        if answer == Answer::Interrupted {
            return Decision::Cancel;
        }
        match answer.word().as_deref() {
            Some("y" | "yes") => Decision::Allow,
            Some("a" | "always") if request.allows_always() => Decision::AllowAlways,
            _ => {
                Decision::Deny("the user declined this call; ask them or do it another way".into())
            }
        }
    }

    async fn continue_after_warning(&self, used: u32, limit: u32) -> bool {
        let question = format!("keel has made {used} of {limit} model calls. Continue? [Y/n] ");
        match self.ask(question).await.word() {
            Some(answer) => !matches!(answer.as_str(), "n" | "no"),
            None => false,
        }
    }
}

/// An approver chosen at run time.
pub(crate) struct ModeApprover(Arc<dyn Approver>);

impl ModeApprover {
    /// The approver `mode` means; `ask` uses `ask` (and, without it, refuses as `deny`),
    /// showing `preview`'s lines before each question.
    pub(crate) fn new(mode: ApprovalMode, ask: Option<AskFn>, preview: Option<PreviewFn>) -> Self {
        Self(match (mode, ask) {
            (ApprovalMode::Allow, _) => Arc::new(AllowAll),
            (ApprovalMode::Ask, Some(ask)) => Arc::new(TerminalApprover::new(ask, preview)),
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

    fn allows_unattended(&self) -> bool {
        self.0.allows_unattended()
    }
}
