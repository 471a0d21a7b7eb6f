//! Approvals asked on the terminal: the question, the preview before it, the answer read.

use std::sync::Arc;

use keel::engine::{ApprovalRequest, Approver, Decision};
use keel_host::approval_question;

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

#[async_trait::async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let mut question = String::new();
        for line in self.preview.iter().flat_map(|preview| preview(request)) {
            question.push_str(&line);
            question.push('\n');
        }
        // Wrapped on words here: the terminal would cut a long question mid-word.
        let width = crate::wrap::terminal_width().saturating_sub(4);
        // The call's arguments are the model's: no control character reaches the terminal.
        let asked: String = approval_question(request)
            .chars()
            .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
            .collect();
        question.push_str(&crate::wrap::wrap_words(asked.trim_end(), width, "  ").join("\n"));
        question.push(' ');
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
