//! Who decides whether a gated tool call may run.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use keel_tool::Effect;
use serde_json::Value;

/// A call waiting for approval.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub input: Value,
    /// What it would do. [`Effect::Protected`] means the call changes what grants powers or
    /// runs later outside the sandbox: it is asked every time, whatever the rules, hooks and
    /// earlier answers say, and "always" is not remembered for it
    /// ([`allows_always`](Self::allows_always) is `false`).
    pub effect: Effect,
    /// Why it needs approval, for the person asked.
    pub reason: String,
    /// What a [`Decision::AllowAlways`] answer would allow from now on: this tool with this
    /// command, path or input, never the whole tool.
    pub scope: ApprovalScope,
}

impl ApprovalRequest {
    /// Whether the call is [`Effect::Protected`]: it changes keel's configuration, a
    /// repository's `.git` or something else that grants powers.
    pub fn is_protected(&self) -> bool {
        matches!(self.effect, Effect::Protected { .. })
    }

    /// Whether an "always" answer is remembered for this call: not for protected ones, which
    /// are asked every time (the engine treats [`Decision::AllowAlways`] as
    /// [`Decision::Allow`] for them), so a prompt should not offer it.
    pub fn allows_always(&self) -> bool {
        !self.is_protected()
    }
}

/// What an "always" answer covers: one tool, and one pattern of its calls.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApprovalScope {
    /// The tool.
    pub tool: String,
    /// Which of its calls.
    pub pattern: ScopePattern,
}

/// Which calls of a tool an [`ApprovalScope`] covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ScopePattern {
    /// Calls with exactly this `command` (for inputs with a string `command`); runs of spaces
    /// and tabs outside quotes count as one, and leading and trailing whitespace is ignored,
    /// so `rm -rf build` covers `rm  -rf build` but neither `rm -rf build2` nor `rm -rf build;
    /// git push --force`.
    Command(String),
    /// Calls with exactly this `path` (for inputs with a string `path` and no `command`),
    /// whatever their other arguments.
    Path(String),
    /// Calls with exactly this input (for every other input), as compact JSON.
    Input(String),
}

impl ApprovalScope {
    /// The scope of calling `tool` with `input`: its command if it has a string `command`,
    /// else its path if it has a string `path`, else the whole input.
    ///
    /// ```
    /// use keel_engine::{ApprovalScope, ScopePattern};
    /// use serde_json::json;
    ///
    /// let scope = ApprovalScope::of("run_command", &json!({"command": "  rm   -rf build "}));
    /// assert_eq!(scope.pattern, ScopePattern::Command("rm -rf build".into()));
    /// assert_eq!(
    ///     scope.describe(),
    ///     "always allow `rm -rf build` (this exact command) in this session"
    /// );
    /// ```
    pub fn of(tool: &str, input: &Value) -> Self {
        let text = |key: &str| input.get(key).and_then(Value::as_str);
        let pattern = if let Some(command) = text("command") {
            ScopePattern::Command(normalize_command(command))
        } else if let Some(path) = text("path") {
            ScopePattern::Path(path.to_owned())
        } else {
            ScopePattern::Input(input.to_string())
        };
        Self {
            tool: tool.to_owned(),
            pattern,
        }
    }

    /// Whether calling `tool` with `input` falls in this scope.
    pub fn covers(&self, tool: &str, input: &Value) -> bool {
        *self == Self::of(tool, input)
    }

    /// The words a prompt shows for the "always" answer, e.g. ``always allow `rm -rf build`
    /// (this exact command) in this session``.
    pub fn describe(&self) -> String {
        match &self.pattern {
            ScopePattern::Command(command) => {
                format!("always allow `{command}` (this exact command) in this session")
            }
            ScopePattern::Path(path) => format!(
                "always allow {} on `{path}` (this path only) in this session",
                self.tool
            ),
            ScopePattern::Input(_) => format!(
                "always allow {} with exactly these arguments in this session",
                self.tool
            ),
        }
    }
}

/// `command` trimmed, with each run of spaces and tabs outside quotes made one space. Quoted
/// text, escaped characters and newlines (which separate commands) are kept as they are.
fn normalize_command(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    let mut quote: Option<char> = None;
    let mut pending_space = false;
    let mut chars = command.trim().chars();
    while let Some(c) = chars.next() {
        match quote {
            Some(open) => {
                out.push(c);
                if c == open {
                    quote = None;
                } else if c == '\\' && open == '"' {
                    out.extend(chars.next());
                }
            }
            None if c == ' ' || c == '\t' => pending_space = true,
            None => {
                if pending_space {
                    out.push(' ');
                    pending_space = false;
                }
                out.push(c);
                match c {
                    '\'' | '"' => quote = Some(c),
                    '\\' => out.extend(chars.next()),
                    _ => {}
                }
            }
        }
    }
    out
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run this call, this once.
    Allow,
    /// Run this call, and every later call in the session that falls in its
    /// [`ApprovalRequest::scope`] (same tool, same command, path or input) without asking.
    /// For a protected call ([`ApprovalRequest::is_protected`]) this is [`Allow`](Self::Allow):
    /// nothing is remembered.
    AllowAlways,
    /// Do not run it; the model is told `denied: <reason>` and the run goes on.
    Deny(String),
    /// The person stopped (Ctrl-C at the prompt): the call is answered `interrupted`, the
    /// other calls of the turn too, and the run ends with [`Stop::Cancelled`](crate::Stop),
    /// as if its [`CancelHandle`](crate::CancelHandle) had fired.
    Cancel,
}

/// Decides gated calls, and whether a run may go on past its iteration warning.
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    /// Whether the call may run.
    async fn approve(&self, request: &ApprovalRequest) -> Decision;

    /// Asked once when a run reaches 80 % of its iteration limit; `false` ends it with
    /// `MaxIterations`. Default: go on.
    async fn continue_after_warning(&self, _used: u32, _limit: u32) -> bool {
        true
    }

    /// Whether gated calls may run with nobody there to ask: what a run this approver's
    /// agent starts in another process (a background task) gets. Default `false`: such runs
    /// refuse gated calls. Only an approver that allows every call says `true`.
    fn allows_unattended(&self) -> bool {
        false
    }

    /// Why every call that is not read-only is refused without asking, while this approver
    /// is in a read-only mode (the reason is what the model reads); `None` (the default):
    /// calls are gated as usual. The gate checks it before rules and hooks, so nothing
    /// allows a change in a read-only mode.
    fn refuses_changes(&self) -> Option<String> {
        None
    }

    /// Whether every call that may change something (not only a destructive one) is asked
    /// about, as Claude Code's default permission mode does; rules, hooks and "always"
    /// answers still decide first. Default `false`.
    fn asks_about_changes(&self) -> bool {
        false
    }

    /// Whether session `session_id` holds a standing grant that lets this call run without
    /// asking (a skill's `allowed-tools` the host honours, say). The gate asks it just before
    /// it would ask [`approve`](Self::approve), and only for a call asked about because of
    /// what it would do (a destructive call, or any change while
    /// [`asks_about_changes`](Self::asks_about_changes)): never for a protected call, one an
    /// ask rule matches or one a hook asks about, which are always put to the approver; deny
    /// rules, hooks' refusals and [`refuses_changes`](Self::refuses_changes) are decided
    /// before. `true` runs the call: no approval event, no notification, no question.
    /// Default `false`.
    fn grants(&self, _session_id: &str, _request: &ApprovalRequest) -> bool {
        false
    }
}

/// A shared approver approves as the one it holds: a host hands the same approver to an agent
/// and to the sub-agents it spawns.
#[async_trait::async_trait]
impl<A: Approver + ?Sized> Approver for Arc<A> {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        (**self).approve(request).await
    }

    async fn continue_after_warning(&self, used: u32, limit: u32) -> bool {
        (**self).continue_after_warning(used, limit).await
    }

    fn allows_unattended(&self) -> bool {
        (**self).allows_unattended()
    }

    fn refuses_changes(&self) -> Option<String> {
        (**self).refuses_changes()
    }

    fn asks_about_changes(&self) -> bool {
        (**self).asks_about_changes()
    }

    fn grants(&self, session_id: &str, request: &ApprovalRequest) -> bool {
        (**self).grants(session_id, request)
    }
}

/// Allows everything (`--approvals allow`, `-y`), protected calls included.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

#[async_trait::async_trait]
impl Approver for AllowAll {
    async fn approve(&self, _request: &ApprovalRequest) -> Decision {
        Decision::Allow
    }

    fn allows_unattended(&self) -> bool {
        true
    }
}

/// The headless default: gated calls are refused and the model is told why (for a protected
/// call: that the change needs the person's approval); the run uses its whole iteration
/// budget.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyGated;

impl DenyGated {
    /// What it decides for `request`, without waiting: the refusal, and why, in words the
    /// model reads.
    pub fn decide(request: &ApprovalRequest) -> Decision {
        if request.is_protected() {
            return Decision::Deny(format!(
                "{} (this change needs the person's approval); this session runs without a \
                 person to approve it, so leave this change to the user",
                request.reason
            ));
        }
        Decision::Deny(format!(
            "{} ({}); this session runs without a person to approve it, so do it another way \
             or leave it to the user",
            request.reason, "destructive actions need approval"
        ))
    }
}

#[async_trait::async_trait]
impl Approver for DenyGated {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        Self::decide(request)
    }
}

type ApproveFn =
    dyn Fn(ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send>> + Send + Sync;

/// An approver made of a callback, e.g. a prompt in the CLI.
#[derive(Clone)]
pub struct CallbackApprover {
    approve: Arc<ApproveFn>,
}

impl std::fmt::Debug for CallbackApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackApprover").finish_non_exhaustive()
    }
}

impl CallbackApprover {
    /// Asks `approve` for each gated call.
    pub fn new<F, Fut>(approve: F) -> Self
    where
        F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Decision> + Send + 'static,
    {
        Self {
            approve: Arc::new(move |request| Box::pin(approve(request))),
        }
    }
}

#[async_trait::async_trait]
impl Approver for CallbackApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        (self.approve)(request.clone()).await
    }
}
