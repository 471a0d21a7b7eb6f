//! Approvals asked on the terminal, and the approver each `--approvals` mode means.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

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
///
/// A `git_commit` names its message once (the files it stages are listed before the
/// question), not again in the reason.
pub(crate) fn approval_question(request: &ApprovalRequest) -> String {
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

/// The approval mode a session runs in now: `--approvals`' three, and the two an interactive
/// session cycles through as well (Shift-Tab, `/mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LiveMode {
    /// Gated calls (destructive, protected) are asked about.
    Ask,
    /// Gated edits of files (`write_file`, `patch_file`) run without a question; protected
    /// paths and everything else gated are still asked about.
    AcceptEdits,
    /// Every call that may change something is refused, whatever rules and hooks say.
    ReadOnly,
    /// Gated calls run (`--approvals allow`).
    Allow,
    /// Gated calls are refused (`--approvals deny`).
    Deny,
}

impl LiveMode {
    /// The mode `--approvals` asks for.
    pub(crate) fn of(mode: ApprovalMode) -> Self {
        match mode {
            ApprovalMode::Ask => Self::Ask,
            ApprovalMode::Allow => Self::Allow,
            ApprovalMode::Deny => Self::Deny,
        }
    }

    /// Its name, as `/mode` takes it and the banner shows it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::AcceptEdits => "accept-edits",
            Self::ReadOnly => "read-only",
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }

    /// The mode named `name` (one of [`Self::CYCLE`]'s, or `allow`/`deny`).
    pub(crate) fn named(name: &str) -> Option<Self> {
        [
            Self::Ask,
            Self::AcceptEdits,
            Self::ReadOnly,
            Self::Allow,
            Self::Deny,
        ]
        .into_iter()
        .find(|mode| mode.name() == name)
    }

    /// The modes Shift-Tab cycles through, in order.
    pub(crate) const CYCLE: [Self; 3] = [Self::Ask, Self::AcceptEdits, Self::ReadOnly];

    /// The mode after this one in [`Self::CYCLE`]; from `allow` or `deny`, `ask`.
    pub(crate) fn next(self) -> Self {
        match self {
            Self::Ask => Self::AcceptEdits,
            Self::AcceptEdits => Self::ReadOnly,
            Self::ReadOnly | Self::Allow | Self::Deny => Self::Ask,
        }
    }

    /// What the mode does, in a few words.
    pub(crate) fn meaning(self) -> &'static str {
        match self {
            Self::Ask => "risky calls are asked about",
            Self::AcceptEdits => {
                "file edits run without a question; other risky calls are asked about"
            }
            Self::ReadOnly => "every call that may change something is refused",
            Self::Allow => "every call runs without a question",
            Self::Deny => "risky calls are refused",
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            Self::Ask => 0,
            Self::AcceptEdits => 1,
            Self::ReadOnly => 2,
            Self::Allow => 3,
            Self::Deny => 4,
        }
    }

    fn from_u8(value: u8) -> Self {
        match value {
            1 => Self::AcceptEdits,
            2 => Self::ReadOnly,
            3 => Self::Allow,
            4 => Self::Deny,
            _ => Self::Ask,
        }
    }
}

/// The mode a [`ModeApprover`] is in, shared with whoever changes it (the REPL's Shift-Tab
/// and `/mode`). Cheap to clone; clones share the mode.
#[derive(Debug, Clone)]
pub(crate) struct ModeSwitch(Arc<AtomicU8>);

impl ModeSwitch {
    /// Claude Code's name of the mode now (`default`, `acceptEdits`, …), as hooks read it in
    /// `permission_mode`.
    pub(crate) fn claude_name(&self) -> &'static str {
        crate::claude_cli::PermissionMode::claude_name(self.get())
    }

    /// The mode now.
    pub(crate) fn get(&self) -> LiveMode {
        LiveMode::from_u8(self.0.load(Ordering::SeqCst))
    }

    /// Puts the approver in `mode`, from its next question on.
    pub(crate) fn set(&self, mode: LiveMode) {
        self.0.store(mode.to_u8(), Ordering::SeqCst);
    }

    /// Moves to the next mode of the cycle; returns it.
    pub(crate) fn cycle(&self) -> LiveMode {
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
pub(crate) struct ModeApprover {
    mode: ModeSwitch,
    /// Who answers the questions of `ask` and `accept-edits` (the terminal, an editor over
    /// ACP); `None` refuses them as `deny` does.
    terminal: Option<Arc<dyn Approver>>,
    /// Whether `ask` and `accept-edits` ask about every change, not only risky calls
    /// (Claude Code's permission modes, for the Claude Agent SDKs).
    asks_changes: bool,
}

impl ModeApprover {
    /// The approver `mode` means; `ask` uses `ask` (and, without it, refuses as `deny`),
    /// showing `preview`'s lines before each question.
    pub(crate) fn new(mode: LiveMode, ask: Option<AskFn>, preview: Option<PreviewFn>) -> Self {
        Self {
            mode: ModeSwitch(Arc::new(AtomicU8::new(mode.to_u8()))),
            terminal: ask
                .map(|ask| Arc::new(TerminalApprover::new(ask, preview)) as Arc<dyn Approver>),
            asks_changes: false,
        }
    }

    /// An approver starting in `mode` whose questions `asker` answers (an editor over ACP).
    pub(crate) fn asking(mode: LiveMode, asker: Arc<dyn Approver>) -> Self {
        Self::starting(mode, Some(asker))
    }

    /// An approver starting in `mode` whose questions `asker` answers; without one they are
    /// refused as `deny` does.
    pub(crate) fn starting(mode: LiveMode, asker: Option<Arc<dyn Approver>>) -> Self {
        Self {
            mode: ModeSwitch(Arc::new(AtomicU8::new(mode.to_u8()))),
            terminal: asker,
            asks_changes: false,
        }
    }

    /// Asks about every change in `ask` mode, and about every change but a file edit in
    /// `accept-edits`, as Claude Code's `default` and `acceptEdits` modes do.
    pub(crate) fn asking_about_changes(mut self) -> Self {
        self.asks_changes = true;
        self
    }

    /// What changes its mode.
    pub(crate) fn switch(&self) -> ModeSwitch {
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

#[cfg(test)]
mod tests {
    use super::*;
    use keel_engine::ApprovalScope;
    use keel_tool::Effect;
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
        let asked: AskFn = Arc::new(|_| Answer::Line("n".into()));
        let approver = ModeApprover::new(LiveMode::Ask, Some(asked), None);
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
