//! The approval gate: whether a call runs, is refused, or goes to the approver. The decision is
//! [`decide`], a pure function of the call's effect, the permission verdict, the hooks'
//! outcome and the remembered "always" answers; [`Session::plan`] gathers those, asks the
//! approver when [`decide`] says so, and reports what it did.

use std::collections::HashSet;

use keel_tool::{Effect, ToolOutput};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{OwnedCall, Session, Sink, emit};
use crate::approval::{ApprovalRequest, ApprovalScope, Decision};
use crate::events::AgentEvent;
use crate::history::INTERRUPTED;
use crate::hooks::{HookEvent, HookInput, HookOutcome, PermissionDecision};
use crate::permissions::Verdict;

/// What to do with one call.
pub(super) enum Plan {
    Run { read_only: bool },
    Answer(ToolOutput),
}

/// What the gate knows about one call.
#[derive(Debug, Clone, Copy)]
pub(super) struct GateInput<'a> {
    /// The tool's name.
    pub(super) tool: &'a str,
    /// The call's input.
    pub(super) input: &'a Value,
    /// The call's effect.
    pub(super) effect: &'a Effect,
    /// What the permission rules say.
    pub(super) verdict: &'a Verdict,
    /// What the `PreToolUse` hooks said; `None` when none ran.
    pub(super) hook: Option<&'a HookOutcome>,
    /// The scopes answered "always" so far.
    pub(super) remembered: &'a HashSet<ApprovalScope>,
    /// Why calls that are not read-only are refused, when the approver is in a read-only
    /// mode ([`Approver::refuses_changes`](crate::Approver::refuses_changes)).
    pub(super) refuses_changes: Option<&'a str>,
    /// Whether every call that may change something is asked about, not only destructive
    /// ones ([`Approver::asks_about_changes`](crate::Approver::asks_about_changes)).
    pub(super) asks_about_changes: bool,
}

/// The gate's decision on one call.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum GateDecision {
    /// Run the call without asking; `read_only` calls may run alongside others.
    Run { read_only: bool },
    /// Do not run it: answer the model with this error text.
    Refuse(String),
    /// Ask the approver, for this reason; an "always" answer covers `scope` if `remember`.
    /// `grantable`: the question comes only from what the call would do (not a protected
    /// call, an ask rule or a hook), so a standing grant
    /// ([`Approver::grants`](crate::Approver::grants)) may answer it.
    Ask {
        reason: String,
        scope: ApprovalScope,
        remember: bool,
        grantable: bool,
    },
}

/// Whether a call runs, is refused, or is asked about. No I/O.
///
/// A deny rule refuses any call; so does a hook that blocks or denies; in a read-only mode,
/// every call that is not read-only is refused, whatever rules and hooks say. A protected call
/// ([`Effect::Protected`]) is always asked about: allow rules, hooks answering `allow` and
/// earlier "always" answers never skip the question, and "always" is not remembered for it;
/// so is a call an ask rule matches ([`Verdict::AskRule`]). Otherwise a hook's `allow` or an allow rule (unless a hook asks) runs the call; a
/// destructive call, or one a hook asks about (or, when the approver asks about changes, any
/// call that is not read-only), is asked about unless its scope was answered "always";
/// anything else runs. A question that comes only from the call's effect (no protected call,
/// ask rule or hook behind it) is `grantable`: a standing grant of the session may answer it.
pub(super) fn decide(gate: GateInput<'_>) -> GateDecision {
    let read_only = gate.effect.is_read_only();
    let protected = matches!(gate.effect, Effect::Protected { .. });
    let ask_rule = match gate.verdict {
        Verdict::AskRule { rule } => Some(rule),
        _ => None,
    };
    // Asked every time: no allow, hook `allow` or remembered "always" skips the question.
    let always_ask = protected || ask_rule.is_some();
    if let Verdict::Deny { rule } = gate.verdict {
        return GateDecision::Refuse(format!(
            "denied: the permission rule {rule} forbids this call"
        ));
    }
    if let Some(why) = gate.refuses_changes
        && !read_only
    {
        return GateDecision::Refuse(why.to_owned());
    }
    let mut must_ask = false;
    match gate.hook {
        Some(HookOutcome::Block { reason }) => return GateDecision::Refuse(reason.clone()),
        Some(HookOutcome::Stop { reason }) => {
            return GateDecision::Refuse(format!("not run: a hook stopped the run: {reason}"));
        }
        Some(HookOutcome::Permission {
            decision: PermissionDecision::Deny,
            reason,
        }) => {
            return GateDecision::Refuse(format!(
                "denied by a hook: {}",
                reason.as_deref().unwrap_or("no reason given")
            ));
        }
        Some(HookOutcome::Permission {
            decision: PermissionDecision::Allow,
            ..
        }) if !always_ask => return GateDecision::Run { read_only },
        Some(HookOutcome::Permission {
            decision: PermissionDecision::Ask,
            ..
        }) => must_ask = true,
        _ => {}
    }
    if matches!(gate.verdict, Verdict::Allow { .. }) && !must_ask && !protected {
        return GateDecision::Run { read_only };
    }
    let reason = match gate.effect {
        _ if let Some(rule) = ask_rule => {
            format!("the permission rule {rule} asks for approval")
        }
        Effect::Destructive { reason } | Effect::Protected { reason } => reason.clone(),
        _ if must_ask => "a hook asks for approval".to_owned(),
        _ if gate.asks_about_changes && !read_only => {
            "it may change files or run a command".to_owned()
        }
        _ => return GateDecision::Run { read_only },
    };
    let scope = ApprovalScope::of(gate.tool, gate.input);
    if !always_ask && gate.remembered.contains(&scope) {
        return GateDecision::Run { read_only: false };
    }
    GateDecision::Ask {
        reason,
        scope,
        remember: !always_ask,
        grantable: !always_ask && !must_ask,
    }
}

impl Session {
    /// Whether a call runs: gathers what [`decide`] needs (the effect, the rules' verdict, the
    /// `PreToolUse` hooks' outcome unless a rule denies the call), and asks the approver when
    /// it says so ([`ask_approver`](Self::ask_approver)). [`Decision::Cancel`] cancels the
    /// run.
    ///
    /// A `PreToolUse` hook's `updatedInput` replaces the call's input (in keel's shape) before
    /// anything is decided: its effect and the rules' verdict are those of the new input, so
    /// it meets the same rules, approver and sandbox as the model's would. A hook's
    /// `"continue": false` refuses the call and stops the run once this reply's calls are
    /// answered.
    pub(super) async fn plan(
        &mut self,
        call: &mut OwnedCall,
        cancel: &CancellationToken,
        sink: &Sink,
    ) -> Plan {
        if cancel.is_cancelled() {
            return self.answer(call, ToolOutput::error(INTERRUPTED), sink);
        }
        let (mut effect, mut verdict) = self.judge(call);
        let denied = matches!(verdict, Verdict::Deny { .. });
        let hook = if !denied
            && call.invalid.is_none()
            && self.config.hooks().handles(HookEvent::PreToolUse)
        {
            let (outcome, input_changed) = self.pre_tool_use_hooks(call, sink).await;
            if input_changed {
                (effect, verdict) = self.judge(call);
            }
            Some(outcome)
        } else {
            None
        };
        let refuses_changes = self.config.approver().refuses_changes();
        let decision = decide(GateInput {
            tool: &call.name,
            input: &call.input,
            effect: &effect,
            verdict: &verdict,
            hook: hook.as_ref(),
            remembered: &self.always_allowed,
            refuses_changes: refuses_changes.as_deref(),
            asks_about_changes: self.config.approver().asks_about_changes(),
        });
        let (reason, scope, remember, grantable) = match decision {
            GateDecision::Run { read_only } => return Plan::Run { read_only },
            GateDecision::Refuse(text) => {
                return self.answer(call, ToolOutput::error(text), sink);
            }
            GateDecision::Ask {
                reason,
                scope,
                remember,
                grantable,
            } => (reason, scope, remember, grantable),
        };
        let request = ApprovalRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input: call.input.clone(),
            effect,
            reason,
            scope,
        };
        // A standing grant of this session (a skill's allowed tools) answers for the person.
        if grantable && self.config.approver().grants(&self.id, &request) {
            tracing::debug!(call = %call.id, tool = %call.name, "run by a standing grant");
            return Plan::Run { read_only: false };
        }
        self.ask_approver(call, request, remember, cancel, sink)
            .await
    }

    /// The call's effect and the permission rules' verdict on it.
    fn judge(&self, call: &OwnedCall) -> (Effect, Verdict) {
        let effect = self.config.tools().effect(call.as_call());
        let verdict = self
            .config
            .permissions()
            .check(&call.name, &call.input, &self.cwd);
        (effect, verdict)
    }

    /// Runs the `PreToolUse` hooks on `call`: a hook's `"continue": false` asks the run to
    /// stop, an `updatedInput` (in Claude Code's shape) replaces the call's input, in keel's.
    /// Returns their outcome, and whether the input changed.
    async fn pre_tool_use_hooks(
        &mut self,
        call: &mut OwnedCall,
        sink: &Sink,
    ) -> (HookOutcome, bool) {
        let input = HookInput::pre_tool_use(&self.id, &self.cwd, &call.name, call.input.clone())
            .with_tool_use_id(&call.id);
        let report = self.hooks(input, sink).await;
        if let HookOutcome::Stop { reason } = &report.outcome {
            self.request_stop(reason.clone());
        }
        let Some(updated) = report.updated_input else {
            return (report.outcome, false);
        };
        let input = keel_tool::claude::keel_input(&call.name, &updated, &self.cwd);
        tracing::debug!(call = %call.id, %input, "a PreToolUse hook changed the input");
        call.input = input;
        (report.outcome, true)
    }

    /// Asks the approver about `call` (`request`), after the `Notification` hooks (whose
    /// `"continue": false` refuses the call and stops the run), and remembers an "always"
    /// answer for the request's scope when `remember` says it may.
    async fn ask_approver(
        &mut self,
        call: &OwnedCall,
        request: ApprovalRequest,
        remember: bool,
        cancel: &CancellationToken,
        sink: &Sink,
    ) -> Plan {
        if self.config.hooks().handles(HookEvent::Notification) {
            let tool = keel_tool::claude::claude_name(&call.name).unwrap_or(&call.name);
            let input = HookInput::notification(
                &self.id,
                &self.cwd,
                format!("keel needs your permission to use {tool}"),
                "permission_prompt",
            );
            if let HookOutcome::Stop { reason } = self.hooks(input, sink).await.outcome {
                let text = format!("not run: a hook stopped the run: {reason}");
                self.request_stop(reason);
                return self.answer(call, ToolOutput::error(text), sink);
            }
        }
        emit(
            sink,
            AgentEvent::ApprovalRequested {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
                reason: request.reason.clone(),
            },
        );
        let decision = tokio::select! {
            biased;
            () = cancel.cancelled() => Decision::Cancel,
            decision = self.config.approver().approve(&request) => decision,
        };
        match decision {
            Decision::Allow => Plan::Run { read_only: false },
            Decision::AllowAlways => {
                // A protected call is asked every time.
                if remember {
                    self.always_allowed.insert(request.scope);
                }
                Plan::Run { read_only: false }
            }
            Decision::Cancel => {
                // The person stopped: the whole run ends, as if its cancel handle had fired.
                cancel.cancel();
                self.answer(call, ToolOutput::error(INTERRUPTED), sink)
            }
            Decision::Deny(reason) if reason == INTERRUPTED => {
                self.answer(call, ToolOutput::error(INTERRUPTED), sink)
            }
            Decision::Deny(reason) => {
                self.answer(call, ToolOutput::error(format!("denied: {reason}")), sink)
            }
        }
    }

    /// A call answered without running it.
    pub(super) fn answer(&self, call: &OwnedCall, output: ToolOutput, sink: &Sink) -> Plan {
        super::schedule::finished(sink, call, &output, std::time::Duration::ZERO);
        Plan::Answer(output)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn destructive() -> Effect {
        Effect::Destructive {
            reason: "deletes files".into(),
        }
    }

    fn protected() -> Effect {
        Effect::Protected {
            reason: "changes .git".into(),
        }
    }

    fn block() -> HookOutcome {
        HookOutcome::Block {
            reason: "hook says no".into(),
        }
    }

    fn hook(decision: PermissionDecision) -> HookOutcome {
        HookOutcome::Permission {
            decision,
            reason: Some("why".into()),
        }
    }

    fn allow_rule() -> Verdict {
        Verdict::Allow {
            rule: "run_command".into(),
        }
    }

    fn deny_rule() -> Verdict {
        Verdict::Deny {
            rule: "run_command(rm*)".into(),
        }
    }

    fn ask_rule() -> Verdict {
        Verdict::AskRule {
            rule: "Bash(rm:*)".into(),
        }
    }

    fn run(read_only: bool) -> GateDecision {
        GateDecision::Run { read_only }
    }

    fn refuse(text: &str) -> GateDecision {
        GateDecision::Refuse(text.into())
    }

    /// A question; one that may be remembered comes from the call's effect alone, so a
    /// standing grant may answer it too.
    fn ask(reason: &str, remember: bool) -> GateDecision {
        GateDecision::Ask {
            reason: reason.into(),
            scope: ApprovalScope::of("run_command", &input()),
            remember,
            grantable: remember,
        }
    }

    /// A question a hook asks: remembered if answered "always", never answered by a grant.
    fn hook_ask(reason: &str) -> GateDecision {
        GateDecision::Ask {
            reason: reason.into(),
            scope: ApprovalScope::of("run_command", &input()),
            remember: true,
            grantable: false,
        }
    }

    fn input() -> Value {
        json!({"command": "rm -rf build"})
    }

    #[test]
    fn the_gate_decides_by_rule_hook_effect_and_memory() {
        use PermissionDecision::{Allow, Ask, Deny};
        let nothing = HashSet::new();
        let remembered = HashSet::from([ApprovalScope::of("run_command", &input())]);
        let denied_by_rule = "denied: the permission rule run_command(rm*) forbids this call";
        let rule_asks = "the permission rule Bash(rm:*) asks for approval";
        // (effect, verdict, hook, remembered?, expected)
        let cases: Vec<(Effect, Verdict, Option<HookOutcome>, bool, GateDecision)> = vec![
            // Nothing gates a read-only or mutating call.
            (Effect::ReadOnly, Verdict::Ask, None, false, run(true)),
            (Effect::Mutating, Verdict::Ask, None, false, run(false)),
            // A destructive call is asked about, remembered "always" answers skip that.
            (
                destructive(),
                Verdict::Ask,
                None,
                false,
                ask("deletes files", true),
            ),
            (destructive(), Verdict::Ask, None, true, run(false)),
            // Allow rules skip the question; deny rules refuse, whatever else says.
            (destructive(), allow_rule(), None, false, run(false)),
            (
                Effect::ReadOnly,
                deny_rule(),
                None,
                false,
                refuse(denied_by_rule),
            ),
            (
                destructive(),
                deny_rule(),
                Some(hook(Allow)),
                true,
                refuse(denied_by_rule),
            ),
            // Hooks: block and deny refuse; allow runs; ask asks, even under an allow rule.
            (
                Effect::ReadOnly,
                Verdict::Ask,
                Some(block()),
                false,
                refuse("hook says no"),
            ),
            (
                Effect::Mutating,
                allow_rule(),
                Some(hook(Deny)),
                false,
                refuse("denied by a hook: why"),
            ),
            (
                destructive(),
                Verdict::Ask,
                Some(hook(Allow)),
                false,
                run(false),
            ),
            (
                Effect::ReadOnly,
                Verdict::Ask,
                Some(hook(Allow)),
                false,
                run(true),
            ),
            (
                Effect::Mutating,
                allow_rule(),
                Some(hook(Ask)),
                false,
                hook_ask("a hook asks for approval"),
            ),
            (
                destructive(),
                Verdict::Ask,
                Some(hook(Ask)),
                false,
                hook_ask("deletes files"),
            ),
            (
                Effect::Mutating,
                Verdict::Ask,
                Some(hook(Ask)),
                true,
                run(false),
            ),
            (
                Effect::Mutating,
                Verdict::Ask,
                Some(HookOutcome::Continue),
                false,
                run(false),
            ),
            // A protected call is asked about every time, and never remembered.
            (
                protected(),
                Verdict::Ask,
                None,
                false,
                ask("changes .git", false),
            ),
            (
                protected(),
                allow_rule(),
                None,
                true,
                ask("changes .git", false),
            ),
            (
                protected(),
                Verdict::Ask,
                Some(hook(Allow)),
                true,
                ask("changes .git", false),
            ),
            (
                protected(),
                Verdict::Ask,
                Some(block()),
                false,
                refuse("hook says no"),
            ),
            (
                protected(),
                deny_rule(),
                None,
                false,
                refuse(denied_by_rule),
            ),
            // An ask rule asks every time, even for a read-only call, past a hook's allow
            // and a remembered "always", and is never remembered; hooks may still refuse.
            (
                Effect::ReadOnly,
                ask_rule(),
                None,
                false,
                ask(rule_asks, false),
            ),
            (
                Effect::Mutating,
                ask_rule(),
                Some(hook(Allow)),
                true,
                ask(rule_asks, false),
            ),
            (destructive(), ask_rule(), None, true, ask(rule_asks, false)),
            (
                destructive(),
                ask_rule(),
                Some(block()),
                false,
                refuse("hook says no"),
            ),
        ];
        for (index, (effect, verdict, hook, is_remembered, expected)) in
            cases.into_iter().enumerate()
        {
            let input = input();
            let decision = decide(GateInput {
                tool: "run_command",
                input: &input,
                effect: &effect,
                verdict: &verdict,
                hook: hook.as_ref(),
                remembered: if is_remembered { &remembered } else { &nothing },
                refuses_changes: None,
                asks_about_changes: false,
            });
            assert_eq!(
                decision, expected,
                "case {index}: {effect:?}, {verdict:?}, {hook:?}, remembered {is_remembered}"
            );
        }
    }

    #[test]
    fn an_approver_that_asks_about_changes_is_asked_about_every_change_rules_leave_open() {
        let nothing = HashSet::new();
        let remembered = HashSet::from([ApprovalScope::of("run_command", &input())]);
        let change = "it may change files or run a command";
        let cases: Vec<(Effect, Verdict, Option<HookOutcome>, bool, GateDecision)> = vec![
            (Effect::ReadOnly, Verdict::Ask, None, false, run(true)),
            (
                Effect::Mutating,
                Verdict::Ask,
                None,
                false,
                ask(change, true),
            ),
            (Effect::Mutating, Verdict::Ask, None, true, run(false)),
            (Effect::Mutating, allow_rule(), None, false, run(false)),
            (
                Effect::Mutating,
                Verdict::Ask,
                Some(hook(PermissionDecision::Allow)),
                false,
                run(false),
            ),
            (
                destructive(),
                Verdict::Ask,
                None,
                false,
                ask("deletes files", true),
            ),
        ];
        for (index, (effect, verdict, hook, is_remembered, expected)) in
            cases.into_iter().enumerate()
        {
            let input = input();
            let decision = decide(GateInput {
                tool: "run_command",
                input: &input,
                effect: &effect,
                verdict: &verdict,
                hook: hook.as_ref(),
                remembered: if is_remembered { &remembered } else { &nothing },
                refuses_changes: None,
                asks_about_changes: true,
            });
            assert_eq!(decision, expected, "case {index}");
        }
    }

    #[test]
    fn a_read_only_mode_refuses_every_call_that_is_not_read_only() {
        let nothing = HashSet::new();
        let remembered = HashSet::from([ApprovalScope::of("run_command", &input())]);
        let why = "refused: read-only mode";
        let cases: Vec<(Effect, Verdict, Option<HookOutcome>, bool, GateDecision)> = vec![
            (Effect::ReadOnly, Verdict::Ask, None, false, run(true)),
            (Effect::Mutating, Verdict::Ask, None, false, refuse(why)),
            (destructive(), Verdict::Ask, None, true, refuse(why)),
            (Effect::Mutating, allow_rule(), None, false, refuse(why)),
            (Effect::Mutating, ask_rule(), None, false, refuse(why)),
            (
                Effect::ReadOnly,
                ask_rule(),
                None,
                false,
                ask("the permission rule Bash(rm:*) asks for approval", false),
            ),
            (
                Effect::Mutating,
                Verdict::Ask,
                Some(hook(PermissionDecision::Allow)),
                false,
                refuse(why),
            ),
        ];
        for (index, (effect, verdict, hook, is_remembered, expected)) in
            cases.into_iter().enumerate()
        {
            let input = input();
            let decision = decide(GateInput {
                tool: "run_command",
                input: &input,
                effect: &effect,
                verdict: &verdict,
                hook: hook.as_ref(),
                remembered: if is_remembered { &remembered } else { &nothing },
                refuses_changes: Some(why),
                asks_about_changes: false,
            });
            assert_eq!(decision, expected, "case {index}");
        }
    }
}
