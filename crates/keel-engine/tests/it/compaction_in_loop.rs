//! Compaction inside the loop: on a small configured window, and on a context-length error.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use keel_engine::compaction::SUMMARY_HEADER;
use keel_engine::history::check_pairing;
use keel_engine::{Agent, AgentEvent, CompactionPolicy, MemorySessionStore, SessionStore, Stop};
use keel_provider::{CompletionRequest, Provider, ProviderError, StreamEvent, Usage};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

/// Plays the script for work requests, answers summary requests (no tools) with a summary,
/// and reports prompt usage from the request's size, as a real model would. With
/// `too_long_once`, the first work request fails as too long for the model.
struct SizedModel {
    script: ScriptedProvider,
    summaries: Mutex<u32>,
    too_long_once: Mutex<bool>,
    requests: Mutex<Vec<CompletionRequest>>,
}

impl SizedModel {
    fn new(script: ScriptedProvider, too_long_once: bool) -> Self {
        Self {
            script,
            summaries: Mutex::new(0),
            too_long_once: Mutex::new(too_long_once),
            requests: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait::async_trait]
impl Provider for SizedModel {
    fn name(&self) -> &str {
        "sized"
    }

    fn stream(&self, req: &CompletionRequest) -> BoxStream<'_, Result<StreamEvent, ProviderError>> {
        self.requests.lock().unwrap().push(req.clone());
        let prompt_tokens = serde_json::to_vec(req).unwrap().len() as u64 / 4;
        let usage = StreamEvent::Usage(Usage {
            input_tokens: prompt_tokens,
            output_tokens: 20,
            ..Usage::default()
        });
        if req.tools.is_empty() {
            *self.summaries.lock().unwrap() += 1;
            let events = vec![
                Ok(StreamEvent::TextDelta {
                    index: 0,
                    text: "The user asked to read the files; all were read, nothing changed."
                        .into(),
                }),
                Ok(usage),
                Ok(StreamEvent::MessageEnd {
                    stop_reason: keel_provider::StopReason::EndTurn,
                }),
            ];
            return Box::pin(futures::stream::iter(events));
        }
        let mut too_long = self.too_long_once.lock().unwrap();
        if *too_long {
            *too_long = false;
            return Box::pin(futures::stream::iter(vec![Err(
                ProviderError::ContextLengthExceeded {
                    message: "prompt is too long".into(),
                },
            )]));
        }
        drop(too_long);
        // The script's own usage events are replaced by the sized one.
        let scripted: Vec<_> = futures::executor::block_on(self.script.stream(req).collect());
        let mut events: Vec<_> = scripted
            .into_iter()
            .filter(|e| !matches!(e, Ok(StreamEvent::Usage(_))))
            .collect();
        let end = events.len().saturating_sub(1);
        events.insert(end, Ok(usage));
        Box::pin(futures::stream::iter(events))
    }
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..8 {
        std::fs::write(
            dir.path().join(format!("file{i}.txt")),
            format!("line of file {i}\n").repeat(200),
        )
        .unwrap();
    }
    dir
}

fn reads(n: usize) -> ScriptedProvider {
    (0..n)
        .fold(ScriptedProvider::new(), |p, i| {
            p.then_tool_call(
                &format!("read_{i}"),
                "read_file",
                json!({"path": format!("file{i}.txt")}),
            )
        })
        .then_text("All files read.")
}

#[tokio::test]
async fn a_small_window_compacts_and_keeps_pairs_and_the_request() {
    let dir = workspace();
    let model = Arc::new(SizedModel::new(reads(8), false));
    let store = Arc::new(MemorySessionStore::new());
    let agent = Agent::builder(model.clone())
        .model("local-model")
        .tools(
            default_tools(
                &PathSandbox::new(dir.path()).unwrap(),
                &SandboxPolicy::default(),
            )
            .unwrap(),
        )
        .compaction(CompactionPolicy {
            context_window: Some(12_000),
            threshold: 0.6,
            keep_recent_messages: 4,
            ..CompactionPolicy::default()
        })
        .session_store(store.clone())
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    let events: Vec<AgentEvent> = session
        .run_streaming("Read every file, one by one.")
        .collect()
        .await;
    let AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!()
    };
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    let compactions: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Compacted {
                before_tokens,
                after_tokens,
            } => Some((*before_tokens, *after_tokens)),
            _ => None,
        })
        .collect();
    assert!(!compactions.is_empty(), "no compaction happened");
    assert!(
        compactions.iter().all(|(before, after)| after < before),
        "{compactions:?}"
    );

    let requests = model.requests.lock().unwrap().clone();
    for request in &requests {
        check_pairing(&request.messages).unwrap();
    }
    // After a compaction the work requests still open with the user's request, verbatim,
    // followed by the summary.
    let last = requests.iter().rev().find(|r| !r.tools.is_empty()).unwrap();
    assert!(
        last.messages[0]
            .text()
            .starts_with("Read every file, one by one.")
    );
    assert!(
        last.messages[0].text().contains(SUMMARY_HEADER),
        "{:?}",
        last.messages[0]
    );
    // The session file replays to the compacted history.
    let loaded = store.load(session.id()).unwrap();
    assert_eq!(loaded.messages, session.history());
}

#[tokio::test]
async fn a_context_length_error_compacts_and_retries_once() {
    let dir = workspace();
    let model = Arc::new(SizedModel::new(
        ScriptedProvider::new()
            .then_tool_call("r0", "read_file", json!({"path": "file0.txt"}))
            .then_tool_call("r1", "read_file", json!({"path": "file1.txt"}))
            .then_tool_call("r2", "read_file", json!({"path": "file2.txt"}))
            .then_text("done")
            .then_text("still here, with the summary"),
        false,
    ));
    let agent = Agent::builder(model.clone())
        .model("local-model")
        .tools(
            default_tools(
                &PathSandbox::new(dir.path()).unwrap(),
                &SandboxPolicy::default(),
            )
            .unwrap(),
        )
        .compaction(CompactionPolicy {
            keep_recent_messages: 2,
            ..CompactionPolicy::default()
        })
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    assert_eq!(session.run("read three files").await.stop, Stop::Completed);
    // Now the model says the prompt is too long once.
    *model.too_long_once.lock().unwrap() = true;
    let model_script_done = ScriptedProvider::new().then_text("still here");
    let _ = model_script_done;
    let outcome = session.run("anything else?").await;
    assert_eq!(*model.summaries.lock().unwrap(), 1);
    assert!(
        matches!(outcome.stop, Stop::Completed | Stop::Failed { .. }),
        "{outcome:?}"
    );
    check_pairing(session.history()).unwrap();
    assert!(session.history()[0].text().contains(SUMMARY_HEADER));
}

/// A catalog knowing `main-model`'s window and price (1 USD per million input tokens, 2 per
/// million output tokens), and nothing of `small-model`.
fn priced_main_model() -> keel_provider::ModelCatalog {
    let mut catalog = keel_provider::ModelCatalog::empty();
    catalog.insert(keel_provider::ModelInfo {
        context_window: Some(6_000),
        pricing: Some(keel_provider::Pricing {
            input: 1.0,
            output: 2.0,
            cache_write: 1.0,
            cache_read: 1.0,
        }),
        ..keel_provider::ModelInfo::new("main-model")
    });
    catalog
}

/// An agent on `main-model` served by `main` (as `hosted`), with `small-model` routed to
/// `small` (as `local`), compacting at 60% of the catalog's 6,000-token window with
/// summaries by `small-model`.
fn tiered_agent(
    dir: &std::path::Path,
    main: Arc<dyn Provider>,
    small: Arc<dyn Provider>,
) -> keel_engine::AgentBuilder {
    let router =
        keel_provider::ModelRouter::new("hosted", main).route("small-model", "local", small);
    Agent::builder(Arc::new(router))
        .model("main-model")
        .catalog(priced_main_model())
        .tools(default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default()).unwrap())
        .compaction(CompactionPolicy {
            threshold: 0.6,
            keep_recent_messages: 4,
            summary_model: Some("small-model".into()),
            ..CompactionPolicy::default()
        })
}

#[tokio::test]
async fn summaries_run_on_the_summary_model_s_provider_and_cost_is_told_per_provider() {
    let dir = workspace();
    let main = Arc::new(SizedModel::new(reads(8), false));
    // The small provider has no script: it can only write summaries.
    let small = Arc::new(SizedModel::new(ScriptedProvider::new(), false));
    let agent = tiered_agent(dir.path(), main.clone(), small.clone())
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    let outcome = session.run("Read every file, one by one.").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);

    let summaries = *small.summaries.lock().unwrap();
    assert!(summaries > 0, "no compaction happened");
    assert_eq!(
        *main.summaries.lock().unwrap(),
        0,
        "the main model wrote no summary"
    );
    let small_requests = small.requests.lock().unwrap().clone();
    assert!(
        small_requests
            .iter()
            .all(|r| r.model == "small-model" && r.tools.is_empty())
    );
    assert!(
        main.requests
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.model == "main-model")
    );

    let hosted = outcome.cost_by_provider.get("hosted").unwrap();
    let local = outcome.cost_by_provider.get("local").unwrap();
    assert_eq!(outcome.cost_by_provider.len(), 2);
    assert_eq!(local.usage.output_tokens, 20 * u64::from(summaries));
    assert_eq!(
        local.cost_usd, None,
        "small-model has no price: never a guess"
    );
    let expected =
        hosted.usage.input_tokens as f64 / 1e6 + hosted.usage.output_tokens as f64 * 2.0 / 1e6;
    assert!(
        (hosted.cost_usd.unwrap() - expected).abs() < 1e-12,
        "{hosted:?}"
    );
    assert_eq!(
        outcome.cost_usd, None,
        "the run's total has an unknown part"
    );
    let mut total = hosted.usage;
    total.add(&local.usage);
    assert_eq!(total, outcome.usage);
}

#[tokio::test]
async fn an_unpriced_summary_model_leaves_the_cost_budget_on() {
    let dir = workspace();
    let main = Arc::new(SizedModel::new(reads(8), false));
    let small = Arc::new(SizedModel::new(ScriptedProvider::new(), false));
    // Each work call costs about 0.001-0.005 USD; the budget is reached after compacting.
    let agent = tiered_agent(dir.path(), main.clone(), small.clone())
        .cost_budget_usd(0.02)
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    let outcome = session.run("Read every file, one by one.").await;
    assert!(
        *small.summaries.lock().unwrap() > 0,
        "no compaction happened"
    );
    let Stop::CostBudget { spent_usd, .. } = outcome.stop else {
        panic!(
            "the budget no longer held: {:?} {}",
            outcome.stop, outcome.text
        )
    };
    let hosted = outcome.cost_by_provider.get("hosted").unwrap();
    assert!(
        (spent_usd - hosted.cost_usd.unwrap()).abs() < 1e-12,
        "only priced calls count"
    );
}

#[tokio::test]
async fn when_the_summary_model_fails_the_session_s_model_writes_the_summary() {
    let dir = workspace();
    let main = Arc::new(SizedModel::new(reads(8), false));
    let down: Arc<dyn Provider> = Arc::new((0..8).fold(ScriptedProvider::new(), |p, _| {
        p.then_error(ProviderError::InvalidRequest {
            message: "model \"small-model\" not found".into(),
        })
    }));
    let agent = tiered_agent(dir.path(), main.clone(), down)
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    let events: Vec<AgentEvent> = session
        .run_streaming("Read every file, one by one.")
        .collect()
        .await;
    let AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!()
    };
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    assert!(
        *main.summaries.lock().unwrap() > 0,
        "the main model wrote the summary"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Warning { message }
            if message.contains("compaction summary on small-model failed")
                && message.contains("main-model writes it"))),
        "no warning"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Compacted { .. }))
    );
    assert_eq!(
        outcome.cost_by_provider.names().collect::<Vec<_>>(),
        ["hosted"]
    );
    assert!(session.history()[0].text().contains(SUMMARY_HEADER));
}
