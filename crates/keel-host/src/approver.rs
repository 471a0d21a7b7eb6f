//! The approval mode a session runs in ([`ModeSwitch`], shared with whoever changes it) and
//! the approver it means ([`ModeApprover`]), over whoever answers the questions; the question
//! a gated call asks, in the words every front end shows ([`approval_question`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use keel::engine::{AllowAll, ApprovalRequest, Approver, Decision, DenyGated};
use keel_config::LiveMode;

use crate::render::describe_call;

/// `mode`'s place in [`LiveMode::ALL`], as the switch keeps it.
fn index_of(mode: LiveMode) -> u8 {
    LiveMode::ALL
        .iter()
        .position(|m| *m == mode)
        .and_then(|i| u8::try_from(i).ok())
        .unwrap_or(0)
}

/// The mode at `index` in [`LiveMode::ALL`] (`ask` for anything else).
fn mode_of(index: u8) -> LiveMode {
    LiveMode::ALL
        .get(usize::from(index))
        .copied()
        .unwrap_or(LiveMode::Ask)
}

/// The mode a [`ModeApprover`] is in, shared with whoever changes it (the REPL's Shift-Tab
/// and `/mode`). Cheap to clone; clones share the mode.
#[derive(Debug, Clone)]
pub struct ModeSwitch(Arc<AtomicU8>);

impl ModeSwitch {
    /// A switch in `mode`.
    pub fn new(mode: LiveMode) -> Self {
        Self(Arc::new(AtomicU8::new(index_of(mode))))
    }

    /// Claude Code's name of the mode now (`default`, `acceptEdits`, …), as hooks read it in
    /// `permission_mode`.
    pub fn claude_name(&self) -> &'static str {
        self.get().claude_name()
    }

    /// The mode now.
    pub fn get(&self) -> LiveMode {
        mode_of(self.0.load(Ordering::SeqCst))
    }

    /// Puts the approver in `mode`, from its next question on.
    pub fn set(&self, mode: LiveMode) {
        self.0.store(index_of(mode), Ordering::SeqCst);
    }

    /// Moves to the next mode of the cycle; returns it.
    pub fn cycle(&self) -> LiveMode {
        let next = self.get().next();
        self.set(next);
        next
    }
}

/// The reason a read-only mode gives the model for a refused call.
const READ_ONLY_REFUSAL: &str = "refused: the person put this session in read-only mode, in \
which nothing may change files or run commands that change anything; read and explain, or \
tell the person what you would do";

/// The approver of a session, in the mode its [`ModeSwitch`] holds now. Sub-agents and team
/// steps share it (keel hands the host's approver to every delegated run), so they are in
/// the same mode; a background task records what the mode allows when it starts.
pub struct ModeApprover {
    mode: ModeSwitch,
    /// Who answers the questions of `ask` and `accept-edits` (the terminal, an editor over
    /// ACP); `None` refuses them as `deny` does.
    terminal: Option<Arc<dyn Approver>>,
    /// Whether `ask` and `accept-edits` ask about every change, not only risky calls
    /// (Claude Code's permission modes, for the Claude Agent SDKs).
    asks_changes: bool,
}

impl ModeApprover {
    /// An approver starting in `mode` whose questions `asker` answers (an editor over ACP).
    pub fn asking(mode: LiveMode, asker: Arc<dyn Approver>) -> Self {
        Self::starting(mode, Some(asker))
    }

    /// An approver starting in `mode` whose questions `asker` answers; without one they are
    /// refused as `deny` does.
    pub fn starting(mode: LiveMode, asker: Option<Arc<dyn Approver>>) -> Self {
        Self::switched_by(ModeSwitch::new(mode), asker)
    }

    /// An approver in the mode `switch` holds (shared with whoever else reads or changes
    /// it), whose questions `asker` answers.
    pub fn switched_by(switch: ModeSwitch, asker: Option<Arc<dyn Approver>>) -> Self {
        Self {
            mode: switch,
            terminal: asker,
            asks_changes: false,
        }
    }

    /// Asks about every change in `ask` mode, and about every change but a file edit in
    /// `accept-edits`, as Claude Code's `default` and `acceptEdits` modes do.
    pub fn asking_about_changes(mut self) -> Self {
        self.asks_changes = true;
        self
    }

    /// What changes its mode.
    pub fn switch(&self) -> ModeSwitch {
        self.mode.clone()
    }
}

#[async_trait::async_trait]
impl Approver for ModeApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let mode = self.mode.get();
        let edit = matches!(request.tool.as_str(), "write_file" | "patch_file");
        match (mode, &self.terminal) {
            (LiveMode::Allow, _) => AllowAll.approve(request).await,
            (LiveMode::ReadOnly, _) => Decision::Deny(READ_ONLY_REFUSAL.to_owned()),
            (LiveMode::AcceptEdits, _) if edit && !request.is_protected() => Decision::Allow,
            (LiveMode::Ask | LiveMode::AcceptEdits, Some(terminal)) => {
                terminal.approve(request).await
            }
            (LiveMode::Ask | LiveMode::AcceptEdits | LiveMode::Deny, _) => {
                DenyGated.approve(request).await
            }
        }
    }

    async fn continue_after_warning(&self, used: u32, limit: u32) -> bool {
        match (self.mode.get(), &self.terminal) {
            (LiveMode::Allow | LiveMode::Deny, _) | (_, None) => true,
            (_, Some(terminal)) => terminal.continue_after_warning(used, limit).await,
        }
    }

    fn allows_unattended(&self) -> bool {
        self.mode.get() == LiveMode::Allow
    }

    fn refuses_changes(&self) -> Option<String> {
        (self.mode.get() == LiveMode::ReadOnly).then(|| READ_ONLY_REFUSAL.to_owned())
    }

    fn asks_about_changes(&self) -> bool {
        self.asks_changes && matches!(self.mode.get(), LiveMode::Ask | LiveMode::AcceptEdits)
    }
}

/// The question asked for a gated call: the call, why it is asked, and the choices — with
/// what "always" would allow (this exact command, this path, these arguments), or no
/// "always" at all for a protected call, which is asked every time.
///
/// A `git_commit` names its message once (the files it stages are listed before the
/// question), not again in the reason.
pub fn approval_question(request: &ApprovalRequest) -> String {
    let call = describe_call(&request.tool, &request.input);
    if request.tool == "git_commit" {
        // The summary line only: the body is shown above the question.
        let summary = request
            .input
            .get("message")
            .and_then(serde_json::Value::as_str)
            .and_then(|message| message.trim().lines().next())
            .unwrap_or_default();
        let call = describe_call(&request.tool, &serde_json::json!({ "message": summary }));
        let always = if request.allows_always() {
            "[y/N/a(lways): this same message]"
        } else {
            "[y/N]"
        };
        return format!(
            "Allow {call}? (git add -A stages the files listed, then commits) {always} "
        );
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use keel::engine::ApprovalScope;
    use keel::tool::Effect;
    use serde_json::json;

    fn request(tool: &str, effect: Effect) -> ApprovalRequest {
        let input = json!({"path": "a.txt"});
        ApprovalRequest {
            call_id: "c".into(),
            tool: tool.into(),
            scope: ApprovalScope::of(tool, &input),
            input,
            effect,
            reason: "why".into(),
        }
    }

    #[tokio::test]
    async fn the_mode_cycles_and_each_mode_decides_as_it_says() {
        let asker: Arc<dyn Approver> = Arc::new(DenyGated);
        let approver = ModeApprover::starting(LiveMode::Ask, Some(asker));
        let switch = approver.switch();
        let edit = request("write_file", Effect::destructive("replaces"));
        let protected = request("write_file", Effect::protected("a hook file"));
        assert_eq!(switch.get(), LiveMode::Ask);
        assert!(matches!(approver.approve(&edit).await, Decision::Deny(_)));
        assert_eq!(approver.refuses_changes(), None);
        assert_eq!(switch.cycle(), LiveMode::AcceptEdits);
        assert_eq!(approver.approve(&edit).await, Decision::Allow);
        assert!(matches!(
            approver.approve(&protected).await,
            Decision::Deny(_)
        ));
        assert_eq!(switch.cycle(), LiveMode::ReadOnly);
        assert!(approver.refuses_changes().is_some());
        assert!(matches!(approver.approve(&edit).await, Decision::Deny(_)));
        assert!(!approver.allows_unattended());
        assert_eq!(switch.cycle(), LiveMode::Ask);
        assert_eq!(approver.refuses_changes(), None);
        assert_eq!(LiveMode::named("accept-edits"), Some(LiveMode::AcceptEdits));
        assert_eq!(LiveMode::named("plan"), None);
    }
}
