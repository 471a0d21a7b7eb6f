//! Context compaction: token estimates, the threshold, pair-safe cuts, the summary request and
//! the rebuilt history.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_engine::compaction::{
    Compaction, CompactionError, CompactionPolicy, SUMMARY_HEADER, SUMMARY_SYSTEM_PROMPT, compact,
    estimate_tokens, is_valid_cut, needs_compaction, rebuild, split_point, summary_request,
};
use keel_engine::history::check_pairing;
use keel_provider::{
    CachePolicy, ContentBlock, Message, ModelCatalog, ModelInfo, Pricing, ProviderError, Role,
    ToolChoice, ToolDefinition, Usage,
};
use keel_test_support::rng::Rng;
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

/// A well-formed history: the request, then model turns with 0–3 tool calls answered by the
/// next user message (sometimes with text after the results), and new user turns after the
/// model's text replies; it sometimes ends on the model's turn.
fn history(rng: &mut Rng, turns: usize) -> Vec<Message> {
    let mut messages = vec![Message::new(
        Role::User,
        vec![
            ContentBlock::text("Fix the failing test in src/lib.rs."),
            ContentBlock::text("Do not touch Cargo.toml."),
        ],
    )];
    let mut next_id = 0;
    for turn in 0..turns {
        let calls = rng.below(4);
        let mut content = Vec::new();
        if rng.below(3) == 0 {
            content.push(ContentBlock::Thinking {
                thinking: format!("thinking {turn}"),
                signature: "sig".into(),
            });
        }
        content.push(ContentBlock::text(format!("assistant {turn}")));
        let ids: Vec<String> = (0..calls)
            .map(|_| {
                next_id += 1;
                format!("call_{next_id}")
            })
            .collect();
        for id in &ids {
            content.push(ContentBlock::tool_use(id, "read_file", json!({"path": id})));
        }
        messages.push(Message::new(Role::Assistant, content));
        if turn + 1 == turns && ids.is_empty() && rng.below(2) == 0 {
            break;
        }
        if ids.is_empty() {
            messages.push(Message::user(format!("user turn {turn}")));
        } else {
            let mut results: Vec<ContentBlock> = ids
                .iter()
                .map(|id| ContentBlock::tool_result(id, format!("contents of {id}"), false))
                .collect();
            if rng.below(4) == 0 {
                results.push(ContentBlock::text(format!("note {turn}")));
            }
            messages.push(Message::new(Role::User, results));
        }
    }
    messages
}

fn assert_alternates(messages: &[Message]) {
    assert_eq!(messages.first().map(|m| m.role), Some(Role::User));
    for pair in messages.windows(2) {
        assert_ne!(
            pair[0].role, pair[1].role,
            "two {:?} messages in a row",
            pair[0].role
        );
    }
}

fn summary_block(summary: &str) -> ContentBlock {
    ContentBlock::text(format!("{SUMMARY_HEADER}\n{summary}"))
}

#[test]
fn split_point_never_splits_pairs_and_keeps_request_and_tail() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut compacted = 0;
    for _ in 0..300 {
        let turns = 1 + rng.below(14) as usize;
        let messages = history(&mut rng, turns);
        check_pairing(&messages).unwrap();
        for keep in 0..10 {
            let latest = messages.len().saturating_sub(keep.max(1));
            let Some(cut) = split_point(&messages, keep) else {
                // None only when no cut in 2..=latest is valid.
                assert!(
                    (2..=latest).all(|c| !is_valid_cut(&messages, c)),
                    "split_point gave up on {messages:#?} keeping {keep}"
                );
                continue;
            };
            compacted += 1;
            assert!(is_valid_cut(&messages, cut));
            assert!(cut >= 2 && cut <= latest, "cut {cut} of {}", messages.len());
            let rebuilt = rebuild(&messages, cut, "S");
            check_pairing(&rebuilt).unwrap();
            assert_alternates(&rebuilt);
            // The request verbatim, then the summary, then the tail verbatim.
            let mut first = messages[0].content.clone();
            first.push(summary_block("S"));
            let mut tail = &messages[cut..];
            if messages[cut].role == Role::User {
                first.extend(messages[cut].content.iter().cloned());
                tail = &tail[1..];
            }
            assert_eq!(rebuilt[0], Message::new(Role::User, first));
            assert_eq!(&rebuilt[1..], tail);
        }
    }
    assert!(compacted > 500, "only {compacted} histories compacted");
}

#[test]
fn rebuild_keeps_pairing_for_every_cut() {
    let mut rng = Rng(42);
    for _ in 0..200 {
        let turns = 1 + rng.below(10) as usize;
        let messages = history(&mut rng, turns);
        for cut in 0..=messages.len() + 1 {
            let rebuilt = rebuild(&messages, cut, "summary");
            check_pairing(&rebuilt)
                .unwrap_or_else(|e| panic!("cut {cut}: {e}\n{messages:#?}\n{rebuilt:#?}"));
            assert_alternates(&rebuilt);
            assert!(rebuilt[0].content.contains(&summary_block("summary")));
            assert_eq!(rebuilt[0].content[..2], messages[0].content[..]);
        }
    }
}

fn tool_loop(turns: usize) -> Vec<Message> {
    let mut messages = vec![Message::user("Rename foo to bar everywhere.")];
    for i in 0..turns {
        let id = format!("t{i}");
        messages.push(Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use(
                &id,
                "grep",
                json!({"pattern": "foo"}),
            )],
        ));
        messages.push(Message::new(
            Role::User,
            vec![ContentBlock::tool_result(&id, format!("match {i}"), false)],
        ));
    }
    messages
}

#[test]
fn a_tool_loop_is_cut_at_an_assistant_message() {
    // user, (assistant call, user result) x 6: 13 messages.
    let messages = tool_loop(6);
    // Keeping 4, messages[9] (a call) is the cut.
    assert_eq!(split_point(&messages, 4), Some(9));
    // Keeping 5, messages[8] holds results; the cut is on the call before it.
    let cut = split_point(&messages, 5).unwrap();
    assert_eq!(cut, 7);
    assert_eq!(messages[cut].role, Role::Assistant);
    let rebuilt = rebuild(&messages, cut, "renamed in 3 files");
    assert_eq!(rebuilt.len(), 1 + messages.len() - cut);
    assert_eq!(&rebuilt[1..], &messages[cut..]);
}

#[test]
fn a_new_user_turn_is_kept_rather_than_summarized() {
    let messages = vec![
        Message::user("Start."),
        Message::assistant("done step 1"),
        Message::user("Now step 2."),
        Message::assistant("done step 2"),
        Message::user("Now step 3."),
        Message::assistant("done step 3"),
    ];
    // Keeping 1: messages[5] would be the largest cut, but it answers a new instruction.
    assert_eq!(split_point(&messages, 1), Some(4));
    let rebuilt = rebuild(&messages, 4, "steps 1 and 2 done");
    assert_eq!(
        rebuilt,
        vec![
            Message::new(
                Role::User,
                vec![
                    ContentBlock::text("Start."),
                    summary_block("steps 1 and 2 done"),
                    ContentBlock::text("Now step 3."),
                ]
            ),
            Message::assistant("done step 3"),
        ]
    );
}

#[test]
fn too_short_histories_have_no_split_point() {
    assert_eq!(split_point(&[], 0), None);
    assert_eq!(split_point(&[Message::user("hi")], 0), None);
    let two = [Message::user("hi"), Message::assistant("hello")];
    assert_eq!(split_point(&two, 0), None);
    // Long enough, but the recent messages to keep leave nothing to summarize.
    let messages = tool_loop(3);
    assert_eq!(split_point(&messages, 6), None);
    // messages[2] holds results, so keeping 5 cannot cut there either.
    assert_eq!(split_point(&messages, 5), None);
    assert_eq!(split_point(&messages, 4), Some(3));
    // A history that does not start with the user's request is not compacted.
    let odd = [
        Message::assistant("a"),
        Message::user("b"),
        Message::assistant("c"),
        Message::user("d"),
    ];
    assert_eq!(split_point(&odd, 0), None);
}

fn long_history() -> Vec<Message> {
    let mut messages = vec![Message::user("Port the parser to nom.")];
    for i in 0..5 {
        let id = format!("read_{i}");
        messages.push(Message::new(
            Role::Assistant,
            vec![
                ContentBlock::text(format!("Reading part {i}.")),
                ContentBlock::tool_use(&id, "read_file", json!({"path": format!("src/p{i}.rs")})),
            ],
        ));
        messages.push(Message::new(
            Role::User,
            vec![ContentBlock::tool_result(
                &id,
                format!("OLD CONTENT {i} {}", "x".repeat(2_000)),
                i == 2,
            )],
        ));
    }
    messages.push(Message::assistant("All parts read; starting the port."));
    messages.push(Message::user("Keep the public API unchanged."));
    messages
}

#[tokio::test]
async fn compact_summarizes_the_old_part_with_a_tool_free_request() {
    let messages = long_history();
    let provider = ScriptedProvider::new().then_text("  The task: port the parser.\n");
    let tools = [ToolDefinition {
        name: "read_file".into(),
        description: "Reads a file.".into(),
        input_schema: json!({"type": "object"}),
    }];
    let policy = CompactionPolicy {
        keep_recent_messages: 3,
        ..CompactionPolicy::default()
    };
    let Compaction {
        messages: rebuilt,
        before_tokens,
        after_tokens,
        summary,
        summarized,
        usage,
    } = compact(
        &provider,
        "claude-sonnet-4-5",
        Some("system"),
        &tools,
        &messages,
        &policy,
    )
    .await
    .unwrap();

    assert_eq!(summary, "The task: port the parser.");
    assert_eq!(summarized, 9);
    assert_eq!(usage.input_tokens, 10);
    assert_eq!(rebuilt, rebuild(&messages, summarized, &summary));
    assert_eq!(&rebuilt[1..], &messages[summarized..]);
    check_pairing(&rebuilt).unwrap();
    assert!(
        after_tokens < before_tokens / 2,
        "{before_tokens} -> {after_tokens}"
    );
    assert_eq!(
        before_tokens,
        estimate_tokens(Some("system"), &tools, &messages, None)
    );

    let requests = provider.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.model, "claude-sonnet-4-5");
    assert!(request.tools.is_empty());
    assert_eq!(request.tool_choice, ToolChoice::None);
    assert_eq!(request.cache, CachePolicy::Disabled);
    assert_eq!(request.max_tokens, policy.summary_max_tokens);
    assert_eq!(request.system.as_deref(), Some(SUMMARY_SYSTEM_PROMPT));
    assert_eq!(request.messages.len(), 1);
    let text = request.messages[0].text();
    for old in [
        "Port the parser to nom.",
        "Reading part 3.",
        "[tool call read_3: read_file] {\"path\":\"src/p3.rs\"}",
        "[tool result read_3]\nOLD CONTENT 3",
        "[tool error read_2]\nOLD CONTENT 2",
    ] {
        assert!(text.contains(old), "summary request lacks {old:?}");
    }
    // The kept tail is not summarized.
    assert!(!text.contains("OLD CONTENT 4"));
    assert!(!text.contains("Keep the public API unchanged."));
}

#[tokio::test]
async fn compact_reports_nothing_to_compact_without_calling_the_model() {
    let provider = ScriptedProvider::new().then_text("unused");
    let messages = [Message::user("hi"), Message::assistant("hello")];
    let err = compact(
        &provider,
        "m",
        None,
        &[],
        &messages,
        &CompactionPolicy::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CompactionError::NothingToCompact), "{err}");
    assert!(provider.requests().is_empty());
}

#[tokio::test]
async fn compact_rejects_an_empty_summary_and_passes_provider_errors() {
    let policy = CompactionPolicy {
        keep_recent_messages: 2,
        ..CompactionPolicy::default()
    };
    let messages = long_history();
    let provider = ScriptedProvider::new().then_text("   \n");
    let err = compact(&provider, "m", None, &[], &messages, &policy)
        .await
        .unwrap_err();
    assert!(matches!(err, CompactionError::EmptySummary), "{err}");

    let provider = ScriptedProvider::new().then_error(ProviderError::InvalidRequest {
        message: "bad".into(),
    });
    let err = compact(&provider, "m", None, &[], &messages, &policy)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CompactionError::Provider(ProviderError::InvalidRequest { .. })
        ),
        "{err}"
    );
}

#[test]
fn long_tool_results_are_clipped_in_the_summary_request() {
    let big = format!("HEAD{}TAIL", "y".repeat(100_000));
    let messages = [
        Message::user("go"),
        Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use("a", "cat", json!({}))],
        ),
        Message::new(Role::User, vec![ContentBlock::tool_result("a", big, false)]),
    ];
    let request = summary_request("m", &messages, 3, 100);
    let text = request.messages[0].text();
    assert!(text.len() < 20_000, "{} bytes", text.len());
    assert!(text.contains("HEAD") && text.contains("TAIL") && text.contains("bytes omitted"));
}

fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    serde_json::to_vec(value).unwrap().len() as u64
}

#[test]
fn estimate_tokens_without_a_report_counts_everything() {
    let messages = long_history();
    let tools = [ToolDefinition {
        name: "grep".into(),
        description: "Searches.".into(),
        input_schema: json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
    }];
    let system = "You are keel.";
    let expected = (system.len() as u64).div_ceil(4)
        + json_len(&tools).div_ceil(4)
        + json_len(&messages).div_ceil(4);
    assert_eq!(
        estimate_tokens(Some(system), &tools, &messages, None),
        expected
    );
    // Everything counts: more tools, a system prompt, more messages all raise it.
    let bare = estimate_tokens(None, &[], &messages, None);
    assert!(bare < expected);
    assert!(estimate_tokens(None, &[], &messages[..3], None) < bare);
    assert_eq!(estimate_tokens(None, &[], &[], None), 2); // "[]"
}

#[test]
fn estimate_tokens_with_a_report_adds_only_the_new_messages() {
    let messages = long_history();
    let usage = Usage {
        input_tokens: 100,
        output_tokens: 999,
        cache_creation_input_tokens: 20,
        cache_read_input_tokens: 3,
    };
    let covered = 9;
    let expected = 123 + json_len(&messages[covered..]).div_ceil(4);
    assert_eq!(
        estimate_tokens(Some("ignored"), &[], &messages, Some((usage, covered))),
        expected
    );
    // Everything covered: exactly the reported prompt plus "[]".
    assert_eq!(
        estimate_tokens(None, &[], &messages, Some((usage, messages.len()))),
        123 + 1
    );
    // A report covering more than the history (it shrank since) is stale and ignored.
    assert_eq!(
        estimate_tokens(None, &[], &messages[..2], Some((usage, 5))),
        estimate_tokens(None, &[], &messages[..2], None)
    );
}

#[test]
fn needs_compaction_with_a_configured_window() {
    let catalog = ModelCatalog::empty();
    let policy = CompactionPolicy {
        context_window: Some(1_000),
        ..CompactionPolicy::default()
    };
    assert!(!needs_compaction(849, "unknown-model", &catalog, &policy));
    assert!(needs_compaction(850, "unknown-model", &catalog, &policy));
    assert!(needs_compaction(5_000, "unknown-model", &catalog, &policy));
    let zero = CompactionPolicy {
        context_window: Some(0),
        ..CompactionPolicy::default()
    };
    assert!(!needs_compaction(10, "unknown-model", &catalog, &zero));
}

#[test]
fn needs_compaction_with_the_catalog() {
    let catalog = ModelCatalog::built_in();
    let policy = CompactionPolicy::default();
    let window = catalog.get("claude-sonnet-4-5").unwrap().context_window;
    assert_eq!(window, Some(200_000));
    assert!(!needs_compaction(
        169_999,
        "claude-sonnet-4-5",
        &catalog,
        &policy
    ));
    assert!(needs_compaction(
        170_000,
        "claude-sonnet-4-5",
        &catalog,
        &policy
    ));
    // Dated snapshots resolve to their model.
    assert!(needs_compaction(
        170_000,
        "claude-sonnet-4-5-20250929",
        &catalog,
        &policy
    ));
    // Unknown model, no configured window: never proactively.
    assert!(!needs_compaction(u64::MAX, "mystery", &catalog, &policy));
    // A configured window overrides the catalog's.
    let small = CompactionPolicy {
        context_window: Some(10_000),
        ..policy.clone()
    };
    assert!(needs_compaction(
        9_000,
        "claude-sonnet-4-5",
        &catalog,
        &small
    ));
    // Models added to the catalog count.
    let mut custom = ModelCatalog::empty();
    custom.insert(ModelInfo {
        context_window: Some(100),
        ..ModelInfo::new("local")
    });
    assert!(needs_compaction(85, "local", &custom, &policy));
    assert!(!needs_compaction(84, "local", &custom, &policy));
    // A model known only by its price is never compacted ahead of time.
    custom.insert(ModelInfo {
        pricing: Some(Pricing {
            input: 1.0,
            output: 1.0,
            cache_write: 1.0,
            cache_read: 1.0,
        }),
        ..ModelInfo::new("priced")
    });
    assert!(!needs_compaction(u64::MAX, "priced", &custom, &policy));
}

#[test]
fn default_policy() {
    let policy = CompactionPolicy::default();
    assert_eq!(policy.threshold, 0.85);
    assert_eq!(policy.context_window, None);
    assert_eq!(policy.keep_recent_messages, 6);
    assert_eq!(policy.summary_max_tokens, 4096);
}

#[test]
fn summary_system_prompt() {
    insta::assert_snapshot!(SUMMARY_SYSTEM_PROMPT);
}

#[test]
fn summary_request_snapshot() {
    let messages = tool_loop(3);
    let request = summary_request("claude-sonnet-4-5", &messages, 5, 2048);
    insta::assert_json_snapshot!(request);
}

#[test]
fn rebuilt_history_snapshot() {
    let messages = tool_loop(4);
    let cut = split_point(&messages, 3).unwrap();
    insta::assert_json_snapshot!(rebuild(
        &messages,
        cut,
        "Found foo in 2 files; renamed in a.rs."
    ));
}
