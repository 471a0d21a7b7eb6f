//! The agent loop against a scripted provider and real tools: every ending, every failure
//! a model can cause, and the history invariant.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use keel_engine::history::check_pairing;
use keel_engine::{
    Agent, AgentEvent, AllowAll, ApprovalRequest, Approver, Decision, DenyGated, Session, Stop,
};
use keel_provider::{
    CompletionRequest, ContentBlock, InvalidToolInput, Provider, ProviderError, Role, StopReason,
    StreamEvent,
};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::{ScriptedProvider, Turn, reply};
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )
    .unwrap();
    dir
}

fn agent(provider: Arc<dyn Provider>, tools: ToolRegistry) -> Agent {
    Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .system_prompt("You are a test agent.")
        .tools(tools)
        .build()
        .unwrap()
}

fn builtin(dir: &std::path::Path) -> ToolRegistry {
    default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default()).unwrap()
}

fn calls(content: Vec<ContentBlock>) -> Turn {
    Turn::Reply(reply(content, StopReason::ToolUse))
}

/// Every request the provider saw kept the pairing invariant.
fn assert_paired(provider: &ScriptedProvider) {
    for (i, request) in provider.requests().iter().enumerate() {
        check_pairing(&request.messages).unwrap_or_else(|e| panic!("request {i}: {e}"));
    }
}

fn results(session: &Session) -> Vec<(String, String, bool)> {
    session
        .history()
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => Some((tool_use_id.clone(), content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_plain_answer_completes() {
    let provider = Arc::new(ScriptedProvider::new().then_text("Hello!"));
    let mut session = agent(provider.clone(), ToolRegistry::new())
        .session(".")
        .unwrap();
    let outcome = session.run("hi").await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(outcome.text, "Hello!");
    assert_eq!(outcome.iterations, 1);
    assert_eq!(outcome.usage.input_tokens, 10);
    assert_eq!(session.history().len(), 2);
    let request = &provider.requests()[0];
    assert_eq!(request.system.as_deref(), Some("You are a test agent."));
}

#[tokio::test]
async fn read_patch_test_answer_with_the_real_tools() {
    let dir = workspace();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "read_file", json!({"path": "src/lib.rs"}))
            .then_tool_call(
                "t2",
                "patch_file",
                json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
            )
            .then_tool_call(
                "t3",
                "run_command",
                json!({"command": "grep -c 'a + b' src/lib.rs"}),
            )
            .then_text("Fixed add: it subtracted; now it adds. Verified with grep."),
    );
    let mut session = agent(provider.clone(), builtin(dir.path()))
        .session(dir.path())
        .unwrap();
    let outcome = session.run("fix add").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    assert_eq!(outcome.iterations, 4);
    assert!(
        std::fs::read_to_string(dir.path().join("src/lib.rs"))
            .unwrap()
            .contains("a + b")
    );
    let results = results(&session);
    assert_eq!(results.len(), 3);
    assert!(results[0].1.contains("a - b"), "{:?}", results[0]);
    assert!(!results[1].2, "{:?}", results[1]);
    assert!(results[2].1.starts_with('1'), "{:?}", results[2]);
    assert_paired(&provider);
    // The model saw each result before its next turn.
    let last = provider.requests().pop().unwrap();
    assert_eq!(last.messages.len(), 7);
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// Waits for a partner call: only finishes when two run at the same time.
struct Rendezvous(Arc<tokio::sync::Barrier>);

impl Tool for Rendezvous {
    type Args = NoArgs;
    const NAME: &'static str = "rendezvous";
    fn description(&self) -> &str {
        "Waits for another call."
    }
    fn effect(&self, _args: &NoArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        match tokio::time::timeout(Duration::from_secs(5), self.0.wait()).await {
            Ok(_) => Ok(ToolOutput::text("met")),
            Err(_) => Err(ToolError::failed("nobody came: calls ran one at a time")),
        }
    }
}

#[tokio::test]
async fn consecutive_read_only_calls_run_in_parallel() {
    let provider = Arc::new(
        ScriptedProvider::new()
            .then(calls(vec![
                ContentBlock::tool_use("a", "rendezvous", json!({})),
                ContentBlock::tool_use("b", "rendezvous", json!({})),
            ]))
            .then_text("both met"),
    );
    let tools = ToolRegistry::new()
        .with(Rendezvous(Arc::new(tokio::sync::Barrier::new(2))))
        .unwrap();
    let mut session = agent(provider.clone(), tools).session(".").unwrap();
    let outcome = session.run("go").await;
    assert_eq!(outcome.stop, Stop::Completed);
    let results = results(&session);
    assert_eq!(
        results,
        [
            ("a".into(), "met".into(), false),
            ("b".into(), "met".into(), false)
        ]
    );
}

#[tokio::test]
async fn deny_gated_refuses_destructive_calls_and_the_run_goes_on() {
    let dir = workspace();
    std::fs::create_dir_all(dir.path().join("build")).unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "run_command", json!({"command": "rm -rf build"}))
            .then_text("I could not delete build."),
    );
    let mut session = agent(provider.clone(), builtin(dir.path()))
        .session(dir.path())
        .unwrap();
    let mut events = Vec::new();
    {
        let mut stream = Box::pin(session.run_streaming("clean"));
        while let Some(event) = stream.next().await {
            events.push(event);
        }
    }
    assert!(dir.path().join("build").exists());
    let results = results(&session);
    assert!(results[0].1.starts_with("denied: "), "{:?}", results[0]);
    assert!(results[0].2);
    assert!(
        events.iter().any(
            |e| matches!(e, AgentEvent::ApprovalRequested { name, .. } if name == "run_command")
        )
    );
    let AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!("last event is Finished");
    };
    assert_eq!(outcome.stop, Stop::Completed);
}

/// Answers "always" to every question, and counts them.
struct AlwaysOnce(std::sync::atomic::AtomicU32);

#[async_trait::async_trait]
impl Approver for AlwaysOnce {
    async fn approve(&self, _request: &ApprovalRequest) -> Decision {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Decision::AllowAlways
    }
}

#[tokio::test]
async fn allow_always_is_remembered_for_the_same_command() {
    let dir = workspace();
    for name in ["a", "b"] {
        std::fs::create_dir_all(dir.path().join(name)).unwrap();
    }
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "run_command", json!({"command": "rm -rf a"}))
            .then_tool_call("t2", "run_command", json!({"command": "rm -rf b"}))
            .then_tool_call("t3", "run_command", json!({"command": "rm -rf b"}))
            .then_text("done"),
    );
    let approver = Arc::new(AlwaysOnce(std::sync::atomic::AtomicU32::new(0)));
    struct Shared(Arc<AlwaysOnce>);
    #[async_trait::async_trait]
    impl Approver for Shared {
        async fn approve(&self, request: &ApprovalRequest) -> Decision {
            self.0.approve(request).await
        }
    }
    let agent = Agent::builder(provider.clone())
        .model("m")
        .tools(builtin(dir.path()))
        .approver(Shared(approver.clone()))
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    assert_eq!(session.run("clean").await.stop, Stop::Completed);
    assert!(!dir.path().join("a").exists() && !dir.path().join("b").exists());
    // Asked for `rm -rf a` and `rm -rf b`, not again for `rm -rf b`: "always" covers the
    // approved command, not the tool (tests/approvals.rs has the rest).
    assert_eq!(approver.0.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn unknown_tools_and_invalid_calls_get_error_results() {
    let dir = workspace();
    let invalid = ContentBlock::ToolUse {
        id: "t2".into(),
        name: "write_file".into(),
        input: json!({}),
        invalid: Some(InvalidToolInput {
            raw: "{\"path\": \"a".into(),
            reason: "EOF while parsing".into(),
        }),
    };
    let provider = Arc::new(
        ScriptedProvider::new()
            .then(calls(vec![ContentBlock::tool_use(
                "t1",
                "edit_file",
                json!({}),
            )]))
            .then(Turn::Reply(reply(vec![invalid], StopReason::MaxTokens)))
            .then_text("ok"),
    );
    let mut session = agent(provider.clone(), builtin(dir.path()))
        .session(dir.path())
        .unwrap();
    let outcome = session.run("go").await;
    assert_eq!(outcome.stop, Stop::Completed);
    let results = results(&session);
    assert!(
        results[0].1.contains("unknown tool \"edit_file\""),
        "{:?}",
        results[0]
    );
    assert!(results[0].1.contains("read_file"), "{:?}", results[0]);
    assert!(results[1].1.contains("cut off"), "{:?}", results[1]);
    assert!(!dir.path().join("a").exists());
    assert_paired(&provider);
}

struct StopAtWarning;

#[async_trait::async_trait]
impl Approver for StopAtWarning {
    async fn approve(&self, _request: &ApprovalRequest) -> Decision {
        Decision::Allow
    }
    async fn continue_after_warning(&self, _used: u32, _limit: u32) -> bool {
        false
    }
}

fn endless_reads(n: usize) -> ScriptedProvider {
    (0..n).fold(ScriptedProvider::new(), |p, i| {
        p.then_tool_call(&format!("t{i}"), "read_file", json!({"path": "src/lib.rs"}))
    })
}

#[tokio::test]
async fn max_iterations_warns_at_80_percent_and_stops_at_the_limit() {
    let dir = workspace();
    let provider = Arc::new(endless_reads(10));
    let agent = Agent::builder(provider.clone())
        .model("m")
        .tools(builtin(dir.path()))
        .max_iterations(5)
        .approver(AllowAll)
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("loop").collect().await;
    let warnings: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::IterationWarning { used, limit } => Some((*used, *limit)),
            _ => None,
        })
        .collect();
    assert_eq!(warnings, [(4, 5)]);
    let AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!()
    };
    assert_eq!(outcome.stop, Stop::MaxIterations);
    assert_eq!(outcome.iterations, 5);
    assert!(outcome.text.contains("iteration limit"), "{}", outcome.text);
    assert_eq!(provider.requests().len(), 5);

    // An approver that says no at the warning stops there.
    let provider = Arc::new(endless_reads(10));
    let agent = Agent::builder(provider.clone())
        .model("m")
        .tools(builtin(dir.path()))
        .max_iterations(5)
        .approver(StopAtWarning)
        .build()
        .unwrap();
    let outcome = agent.session(dir.path()).unwrap().run("loop").await;
    assert_eq!(outcome.stop, Stop::MaxIterations);
    assert_eq!(outcome.iterations, 4);
}

#[tokio::test]
async fn a_refusal_ends_the_run_with_its_reason() {
    let provider = Arc::new(ScriptedProvider::new().then(Turn::Reply(reply(
        vec![ContentBlock::text("I can't help with that.")],
        StopReason::Refusal,
    ))));
    let outcome = agent(provider, ToolRegistry::new())
        .session(".")
        .unwrap()
        .run("x")
        .await;
    assert_eq!(
        outcome.stop,
        Stop::Refused {
            reason: "I can't help with that.".into()
        }
    );
}

#[tokio::test]
async fn a_provider_failure_ends_the_run_and_the_session_goes_on() {
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_error(ProviderError::Overloaded {
                message: "Overloaded".into(),
            })
            .then_text("back"),
    );
    let mut session = agent(provider.clone(), ToolRegistry::new())
        .session(".")
        .unwrap();
    let outcome = session.run("first").await;
    let Stop::Failed(failure) = &outcome.stop else {
        panic!("{outcome:?}")
    };
    // The kind a host acts on, and the provider's own error, are kept.
    assert_eq!(failure.kind, keel_engine::FailureKind::Overloaded);
    assert!(matches!(
        failure.provider.as_deref(),
        Some(ProviderError::Overloaded { .. })
    ));
    assert!(outcome.text.contains("overloaded"), "{}", outcome.text);
    let outcome = session.run("second").await;
    assert_eq!(outcome.stop, Stop::Completed);
    let last = provider.requests().pop().unwrap();
    // Both prompts are in the history, in one user message (never two user messages in a
    // row); no assistant message was invented for the failure.
    assert_eq!(last.messages.len(), 1, "{:?}", last.messages);
    assert_eq!(
        last.messages[0].content,
        [ContentBlock::text("first"), ContentBlock::text("second")]
    );
}

#[tokio::test]
async fn retries_surface_as_events() {
    let provider = Arc::new(ScriptedProvider::new().then(Turn::Events(vec![
        Ok(StreamEvent::Retrying {
            attempt: 1,
            max_attempts: 4,
            wait: Duration::from_millis(500),
            error: ProviderError::Overloaded {
                message: "Overloaded".into(),
            },
        }),
        Ok(StreamEvent::TextDelta {
            index: 0,
            text: "hi".into(),
        }),
        Ok(StreamEvent::MessageEnd {
            stop_reason: StopReason::EndTurn,
        }),
    ])));
    let mut session = agent(provider, ToolRegistry::new()).session(".").unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("x").collect().await;
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::Retrying {
            attempt: 1,
            max_attempts: 4,
            ..
        }
    )));
    assert!(events.contains(&AgentEvent::TextDelta { text: "hi".into() }));
    assert!(matches!(
        events[0],
        AgentEvent::TurnStarted { iteration: 1 }
    ));
}

#[tokio::test]
async fn a_reply_is_framed_by_reply_started_and_reply_finished() {
    let provider = Arc::new(ScriptedProvider::new().then(Turn::Events(vec![
        Ok(StreamEvent::MessageStart {
            id: Some("msg_7".into()),
            model: Some("m-1".into()),
        }),
        Ok(StreamEvent::TextDelta {
            index: 0,
            text: "hi".into(),
        }),
        Ok(StreamEvent::MessageEnd {
            stop_reason: StopReason::EndTurn,
        }),
    ])));
    let mut session = agent(provider, ToolRegistry::new()).session(".").unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("x").collect().await;
    let position = |wanted: fn(&AgentEvent) -> bool| events.iter().position(wanted).unwrap();
    let started = position(|e| matches!(e, AgentEvent::ReplyStarted { .. }));
    let delta = position(|e| matches!(e, AgentEvent::TextDelta { .. }));
    let usage = position(|e| matches!(e, AgentEvent::Usage { .. }));
    let finished = position(|e| matches!(e, AgentEvent::ReplyFinished { .. }));
    let added = position(|e| matches!(e, AgentEvent::MessageAdded { .. }));
    assert!(started < delta && delta < usage && usage < finished && finished < added);
    assert_eq!(
        events[started],
        AgentEvent::ReplyStarted {
            id: Some("msg_7".into()),
            model: Some("m-1".into()),
        }
    );
    assert!(matches!(
        events[finished],
        AgentEvent::ReplyFinished {
            stop_reason: StopReason::EndTurn,
            ..
        }
    ));
}

#[tokio::test]
async fn thinking_streams_as_its_own_events_and_is_not_the_answer() {
    let provider = Arc::new(ScriptedProvider::new().then(Turn::Events(vec![
        Ok(StreamEvent::ThinkingDelta {
            index: 0,
            thinking: "The user wants ".into(),
        }),
        Ok(StreamEvent::ThinkingDelta {
            index: 0,
            thinking: "a greeting.".into(),
        }),
        Ok(StreamEvent::ThinkingSignature {
            index: 0,
            signature: "sig".into(),
        }),
        Ok(StreamEvent::TextDelta {
            index: 1,
            text: "hi".into(),
        }),
        Ok(StreamEvent::MessageEnd {
            stop_reason: StopReason::EndTurn,
        }),
    ])));
    let mut session = agent(provider, ToolRegistry::new()).session(".").unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("x").collect().await;
    let streamed: Vec<&AgentEvent> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::ThinkingDelta { .. } | AgentEvent::TextDelta { .. }
            )
        })
        .collect();
    assert_eq!(
        streamed,
        [
            &AgentEvent::ThinkingDelta {
                text: "The user wants ".into()
            },
            &AgentEvent::ThinkingDelta {
                text: "a greeting.".into()
            },
            &AgentEvent::TextDelta { text: "hi".into() },
        ]
    );
    let Some(AgentEvent::Finished(outcome)) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(outcome.text, "hi");
}

#[tokio::test]
async fn a_prompt_s_images_reach_the_model_and_stay_in_the_history() {
    let provider = Arc::new(ScriptedProvider::new().then_text("a red button"));
    let mut session = agent(provider.clone(), ToolRegistry::new())
        .session(".")
        .unwrap();
    let image = keel_test_support::images::png();
    let prompt = vec![
        ContentBlock::text("what is this?"),
        ContentBlock::image(image.clone()),
    ];
    let events: Vec<AgentEvent> = session
        .run_streaming_content(prompt.clone())
        .collect()
        .await;
    let Some(AgentEvent::Finished(outcome)) = events.last() else {
        panic!("{events:?}");
    };
    assert_eq!(outcome.text, "a red button");
    assert_eq!(provider.requests()[0].messages[0].content, prompt);
    assert_eq!(session.history()[0].content, prompt);
}

/// Blocks until the run is cancelled.
struct WaitForCancel;

impl Tool for WaitForCancel {
    type Args = NoArgs;
    const NAME: &'static str = "wait";
    fn description(&self) -> &str {
        "Waits until cancelled."
    }
    async fn call(&self, _args: NoArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        ctx.cancel().cancelled().await;
        Err(ToolError::Cancelled)
    }
}

#[tokio::test]
async fn cancelling_mid_tool_keeps_the_history_paired_and_the_session_usable() {
    let provider = Arc::new(
        ScriptedProvider::new()
            .then(calls(vec![
                ContentBlock::tool_use("w1", "wait", json!({})),
                ContentBlock::tool_use("w2", "wait", json!({})),
            ]))
            .then_text("next prompt works"),
    );
    let tools = ToolRegistry::new().with(WaitForCancel).unwrap();
    let mut session = agent(provider.clone(), tools).session(".").unwrap();
    let handle = session.cancel_handle();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        handle.cancel();
    });
    let outcome = session.run("wait").await;
    canceller.await.unwrap();
    assert_eq!(outcome.stop, Stop::Cancelled);
    let results = results(&session);
    assert_eq!(results.len(), 2);
    assert!(
        results
            .iter()
            .all(|r| r.1 == "interrupted by the user" && r.2)
    );
    let outcome = session.run("again").await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(outcome.text, "next prompt works");
    assert_paired(&provider);
}

/// Streams some text, then nothing, forever.
struct Stalls;

#[async_trait::async_trait]
impl Provider for Stalls {
    fn name(&self) -> &str {
        "stalls"
    }
    fn stream(
        &self,
        _req: &CompletionRequest,
    ) -> BoxStream<'_, Result<StreamEvent, ProviderError>> {
        let start = futures::stream::iter(vec![Ok(StreamEvent::TextDelta {
            index: 0,
            text: "Let me look".into(),
        })]);
        Box::pin(start.chain(futures::stream::pending()))
    }
}

#[tokio::test]
async fn cancelling_mid_stream_keeps_what_was_said() {
    let mut session = agent(Arc::new(Stalls), ToolRegistry::new())
        .session(".")
        .unwrap();
    let handle = session.cancel_handle();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        handle.cancel();
    });
    let outcome = session.run("look").await;
    assert_eq!(outcome.stop, Stop::Cancelled);
    let last = session.history().last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(last.text(), "Let me look");
}

#[tokio::test]
async fn a_silent_end_is_never_silent() {
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "read_file", json!({"path": "missing.rs"}))
            .then(Turn::Reply(reply(Vec::new(), StopReason::EndTurn))),
    );
    let dir = workspace();
    let outcome = agent(provider, builtin(dir.path()))
        .session(dir.path())
        .unwrap()
        .run("x")
        .await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert!(
        outcome.text.contains("without a message"),
        "{}",
        outcome.text
    );
    assert!(outcome.text.contains("read_file"), "{}", outcome.text);
}

#[test]
fn building_without_a_model_is_a_clear_error() {
    let err = Agent::builder(Arc::new(ScriptedProvider::new()))
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent configuration: no model given: call .model(\"...\")"
    );
}

#[tokio::test]
async fn deny_gated_is_the_default() {
    let dir = workspace();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "git_commit", json!({"message": "x"}))
            .then_text("ok"),
    );
    let mut session = agent(provider, builtin(dir.path()))
        .session(dir.path())
        .unwrap();
    session.run("commit").await;
    let results = results(&session);
    assert!(results[0].1.starts_with("denied: "), "{:?}", results[0]);
    let _ = DenyGated;
}

#[tokio::test]
async fn a_reply_cut_at_the_output_limit_says_so() {
    let provider = Arc::new(ScriptedProvider::new().then(Turn::Reply(reply(
        vec![ContentBlock::text("The three causes are: first, the")],
        StopReason::MaxTokens,
    ))));
    let outcome = agent(provider, ToolRegistry::new())
        .session(".")
        .unwrap()
        .run("explain")
        .await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(
        outcome.text,
        "The three causes are: first, the\n\n[the reply was cut off at the output limit (8192 tokens)]"
    );
}
