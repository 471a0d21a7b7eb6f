//! Consent that means what it says, through the loop: "always" covers the approved pattern
//! only, protected calls reach the approver every time, and a person who stops at a prompt
//! cancels the run.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use keel_engine::history::check_pairing;
use keel_engine::{
    Agent, AgentEvent, AllowAll, ApprovalRequest, ApprovalScope, Approver, Decision, DenyGated,
    Hook, HookEvent, HookInput, HookOutcome, Hooks, PermissionDecision, PermissionRules,
    ScopePattern, Session, Stop,
};
use keel_provider::ContentBlock;
use keel_provider::StopReason;
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::{ScriptedProvider, Turn, reply, tool_results};
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Answers from a script (then denies), and keeps every request it was asked.
#[derive(Clone, Default)]
struct Scripted {
    answers: Arc<Mutex<VecDeque<Decision>>>,
    asked: Arc<Mutex<Vec<ApprovalRequest>>>,
}

impl Scripted {
    fn new(answers: impl IntoIterator<Item = Decision>) -> Self {
        Self {
            answers: Arc::new(Mutex::new(answers.into_iter().collect())),
            asked: Arc::default(),
        }
    }

    fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }

    /// The primary argument of each call asked about.
    fn asked_about(&self) -> Vec<String> {
        self.asked()
            .iter()
            .map(|request| match &request.scope.pattern {
                ScopePattern::Command(text) | ScopePattern::Path(text) => text.clone(),
                ScopePattern::Input(json) => json.clone(),
            })
            .collect()
    }
}

#[async_trait]
impl Approver for Scripted {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        self.asked.lock().unwrap().push(request.clone());
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| Decision::Deny("no".into()))
    }
}

#[derive(Deserialize, JsonSchema)]
struct PathArgs {
    path: String,
}

/// A tool's name and effect.
trait Kind: Send + Sync + 'static {
    const NAME: &'static str;
    fn effect() -> Effect;
}

/// `write_config`: a protected change.
struct ProtectedKind;

impl Kind for ProtectedKind {
    const NAME: &'static str = "write_config";
    fn effect() -> Effect {
        Effect::protected("changes .keel/config.toml, which grants keel powers")
    }
}

/// `overwrite`: a destructive one.
struct DestructiveKind;

impl Kind for DestructiveKind {
    const NAME: &'static str = "overwrite";
    fn effect() -> Effect {
        Effect::destructive("overwrites a file")
    }
}

/// Writes `path` in the workspace, with its kind's name and effect.
struct Writes<K>(std::marker::PhantomData<K>);

impl<K: Kind> Tool for Writes<K> {
    type Args = PathArgs;
    const NAME: &'static str = K::NAME;
    fn description(&self) -> &str {
        "Writes a file."
    }
    fn effect(&self, _args: &PathArgs) -> Effect {
        K::effect()
    }
    async fn call(&self, args: PathArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        std::fs::write(ctx.cwd().join(&args.path), "written")
            .map_err(|error| ToolError::failed(error.to_string()))?;
        Ok(ToolOutput::text(format!("wrote {}", args.path)))
    }
}

fn protected_tool() -> Writes<ProtectedKind> {
    Writes(std::marker::PhantomData)
}

fn deleting_tool() -> Writes<DestructiveKind> {
    Writes(std::marker::PhantomData)
}

struct Setup {
    tools: ToolRegistry,
    hooks: Hooks,
    rules: PermissionRules,
}

impl Setup {
    fn builtin(dir: &Path) -> Self {
        Self {
            tools: default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default())
                .unwrap(),
            hooks: Hooks::new(),
            rules: PermissionRules::default(),
        }
    }

    fn with(tool: impl Tool + 'static) -> Self {
        Self {
            tools: ToolRegistry::new().with(tool).unwrap(),
            hooks: Hooks::new(),
            rules: PermissionRules::default(),
        }
    }

    fn session(
        self,
        provider: Arc<ScriptedProvider>,
        approver: impl Approver + 'static,
        dir: &Path,
    ) -> Session {
        Agent::builder(provider)
            .model("m")
            .tools(self.tools)
            .hooks(self.hooks)
            .permissions(self.rules)
            .approver(approver)
            .build()
            .unwrap()
            .session(dir)
            .unwrap()
    }
}

/// A model that makes these calls one per turn, then ends.
fn one_call_per_turn(tool: &str, inputs: &[Value]) -> Arc<ScriptedProvider> {
    let provider = inputs
        .iter()
        .enumerate()
        .fold(ScriptedProvider::new(), |provider, (i, input)| {
            provider.then_tool_call(&format!("t{i}"), tool, input.clone())
        });
    Arc::new(provider.then_text("done"))
}

fn command(text: &str) -> Value {
    json!({ "command": text })
}

#[tokio::test]
async fn always_for_a_command_covers_that_exact_command_only() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["build", "build2"] {
        std::fs::create_dir(dir.path().join(name)).unwrap();
    }
    let provider = one_call_per_turn(
        "run_command",
        &[
            command("rm -rf build"),
            command("rm -rf build2"),
            command("git push --force origin main"),
            command("rm -rf build; rm -rf build2"),
            // Whitespace outside quotes does not change the command.
            command("  rm   -rf\tbuild "),
        ],
    );
    let approver = Scripted::new([Decision::AllowAlways]);
    let mut session = Setup::builtin(dir.path()).session(provider, approver.clone(), dir.path());
    assert_eq!(session.run("clean").await.stop, Stop::Completed);

    assert_eq!(
        approver.asked_about(),
        [
            "rm -rf build",
            "rm -rf build2",
            "git push --force origin main",
            "rm -rf build; rm -rf build2"
        ],
        "only the approved command itself runs unasked"
    );
    assert!(!dir.path().join("build").exists());
    assert!(
        dir.path().join("build2").exists(),
        "build2 was not approved"
    );
    let results = tool_results(session.history());
    assert!(results[1].0.starts_with("denied: "), "{results:?}");
    assert!(results[2].0.starts_with("denied: "), "{results:?}");
    assert!(!results[4].1, "the remembered command ran: {results:?}");
}

#[tokio::test]
async fn always_for_a_path_covers_that_path_only() {
    let dir = tempfile::tempdir().unwrap();
    let provider = one_call_per_turn(
        "overwrite",
        &[
            json!({"path": "a.txt"}),
            json!({"path": "a.txt"}),
            json!({"path": "b.txt"}),
        ],
    );
    let approver = Scripted::new([Decision::AllowAlways]);
    let mut session = Setup::with(deleting_tool()).session(provider, approver.clone(), dir.path());
    session.run("go").await;
    assert_eq!(approver.asked_about(), ["a.txt", "b.txt"]);
    assert!(!dir.path().join("b.txt").exists());
}

#[test]
fn the_scope_and_its_words() {
    let scopes = [
        ApprovalScope::of(
            "run_command",
            &json!({"command": " rm  -rf 'my  dir' ", "timeout_secs": 5}),
        ),
        ApprovalScope::of(
            "write_file",
            &json!({"path": "src/main.rs", "content": "x"}),
        ),
        ApprovalScope::of("code", &json!({"task": "fix it", "cwd": "."})),
    ];
    let shown: Vec<String> = scopes
        .iter()
        .map(|scope| format!("{:?}\n{}", scope.pattern, scope.describe()))
        .collect();
    insta::assert_snapshot!(shown.join("\n\n"));
    let rm = &scopes[0];
    assert!(rm.covers("run_command", &command("rm -rf 'my  dir'")));
    assert!(!rm.covers("run_command", &command("rm -rf 'my dir'")));
    assert!(!rm.covers(
        "run_command",
        &command("rm -rf 'my  dir'\ngit push --force")
    ));
    assert!(!rm.covers("run_shell", &command("rm -rf 'my  dir'")));
    assert!(!scopes[2].covers("code", &json!({"task": "fix it", "cwd": "/"})));
}

/// Gives the same permission decision for every PreToolUse.
struct HookDecides(PermissionDecision, &'static str);

#[async_trait]
impl Hook for HookDecides {
    async fn run(&self, _input: &HookInput) -> Result<HookOutcome, String> {
        Ok(HookOutcome::Permission {
            decision: self.0,
            reason: Some(self.1.into()),
        })
    }
}

fn hooks(hook: impl Hook + 'static) -> Hooks {
    let mut hooks = Hooks::new();
    hooks
        .add(HookEvent::PreToolUse, None, Arc::new(hook))
        .unwrap();
    hooks
}

#[tokio::test]
async fn a_protected_call_reaches_the_approver_despite_allow_rules_hooks_and_always() {
    let dir = tempfile::tempdir().unwrap();
    let same = json!({"path": "config.toml"});
    let provider = one_call_per_turn("write_config", &[same.clone(), same.clone(), same]);
    let approver = Scripted::new([
        Decision::AllowAlways,
        Decision::AllowAlways,
        Decision::Deny("not this time".into()),
    ]);
    let mut setup = Setup::with(protected_tool());
    setup.rules = PermissionRules::parse(&["write_config".into()], &[]).unwrap();
    setup.hooks = hooks(HookDecides(
        PermissionDecision::Allow,
        "the hook allows all",
    ));
    let mut session = setup.session(provider, approver.clone(), dir.path());
    session.run("configure").await;

    let asked = approver.asked();
    assert_eq!(asked.len(), 3, "asked every time");
    for request in &asked {
        assert!(request.is_protected());
        assert!(!request.allows_always());
        assert_eq!(
            request.reason,
            "changes .keel/config.toml, which grants keel powers"
        );
    }
    let results = tool_results(session.history());
    assert_eq!(results[0], ("wrote config.toml".into(), false));
    assert_eq!(results[2], ("denied: not this time".into(), true));
}

#[tokio::test]
async fn deny_rules_and_hook_denials_refuse_a_protected_call_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let input = json!({"path": "config.toml"});

    let approver = Scripted::new([Decision::Allow]);
    let mut setup = Setup::with(protected_tool());
    setup.rules = PermissionRules::parse(&[], &["write_config".into()]).unwrap();
    let mut session = setup.session(
        one_call_per_turn("write_config", std::slice::from_ref(&input)),
        approver.clone(),
        dir.path(),
    );
    session.run("configure").await;
    assert!(approver.asked().is_empty());
    assert!(
        tool_results(session.history())[0]
            .0
            .contains("permission rule write_config")
    );

    let mut setup = Setup::with(protected_tool());
    setup.hooks = hooks(HookDecides(PermissionDecision::Deny, "not here"));
    let mut session = setup.session(
        one_call_per_turn("write_config", &[input]),
        approver.clone(),
        dir.path(),
    );
    session.run("configure").await;
    assert!(approver.asked().is_empty());
    assert_eq!(
        tool_results(session.history())[0],
        ("denied by a hook: not here".into(), true)
    );
    assert!(!dir.path().join("config.toml").exists());
}

#[tokio::test]
async fn allow_all_runs_a_protected_call_and_deny_gated_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = json!({"path": "config.toml"});
    let mut session = Setup::with(protected_tool()).session(
        one_call_per_turn("write_config", std::slice::from_ref(&input)),
        DenyGated,
        dir.path(),
    );
    session.run("configure").await;
    let (text, is_error) = tool_results(session.history()).remove(0);
    assert!(is_error);
    assert!(
        text.starts_with("denied: changes .keel/config.toml, which grants keel powers"),
        "{text}"
    );
    assert!(text.contains("needs the person's approval"), "{text}");
    assert!(!dir.path().join("config.toml").exists());

    let mut session = Setup::with(protected_tool()).session(
        one_call_per_turn("write_config", &[input]),
        AllowAll,
        dir.path(),
    );
    session.run("configure").await;
    assert!(dir.path().join("config.toml").exists());
}

#[tokio::test]
async fn cancel_at_a_prompt_interrupts_the_turn_and_ends_the_run_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    // One turn, three calls: the first is approved, the second is where the person stops,
    // the third is never asked about.
    let provider = Arc::new(
        ScriptedProvider::new()
            .then(Turn::Reply(reply(
                vec![
                    ContentBlock::tool_use("c1", "run_command", command("rm -rf a")),
                    ContentBlock::tool_use("c2", "run_command", command("rm -rf b")),
                    ContentBlock::tool_use("c3", "read_file", json!({"path": "notes.txt"})),
                ],
                StopReason::ToolUse,
            )))
            .then_text("the next prompt works"),
    );
    for name in ["a", "b"] {
        std::fs::create_dir(dir.path().join(name)).unwrap();
    }
    let approver = Scripted::new([Decision::Allow, Decision::Cancel]);
    let mut session =
        Setup::builtin(dir.path()).session(provider.clone(), approver.clone(), dir.path());
    let events: Vec<AgentEvent> = session.run_streaming("clean").collect().await;

    let AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!("the last event is Finished");
    };
    assert_eq!(outcome.stop, Stop::Cancelled);
    assert_eq!(outcome.iterations, 1, "no model call after the cancel");
    assert_eq!(approver.asked().len(), 2);
    assert!(dir.path().join("a").exists() && dir.path().join("b").exists());
    // Every call answered exactly once, as interrupted, and reported once.
    let results = tool_results(session.history());
    assert_eq!(
        results,
        vec![("interrupted by the user".to_owned(), true); 3],
        "{results:?}"
    );
    let finished: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallFinished { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(finished, ["c2", "c3", "c1"]);
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, AgentEvent::ToolCallStarted { .. })),
        "nothing ran"
    );
    check_pairing(session.history()).unwrap();

    // The session goes on with the next prompt.
    let outcome = session.run("again").await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(outcome.text, "the next prompt works");
    for request in provider.requests() {
        check_pairing(&request.messages).unwrap();
    }
}

#[test]
fn only_allow_all_lets_gated_calls_run_unattended() {
    assert!(AllowAll.allows_unattended());
    assert!(!DenyGated.allows_unattended());
    let asking =
        keel_engine::CallbackApprover::new(|_request: ApprovalRequest| async { Decision::Allow });
    assert!(!asking.allows_unattended());
    // A shared approver answers as the one it holds.
    let shared: Arc<dyn Approver> = Arc::new(AllowAll);
    assert!(shared.allows_unattended());
    assert!(!Arc::new(DenyGated).allows_unattended());
}
