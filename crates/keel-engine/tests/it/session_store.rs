//! The session store: exact round trips, resuming, damaged files, ids, listing; every
//! behaviour checked on both the JSONL file store and the in-memory store.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use keel_engine::session_store::{
    JsonlSessionStore, MemorySessionStore, SessionError, SessionMeta, SessionRecord, SessionStore,
};
use keel_provider::{ContentBlock, InvalidToolInput, Message, Role, Usage};
use serde_json::json;

/// A store under test, with raw access to its bytes to damage them.
enum Backend {
    Files(tempfile::TempDir, JsonlSessionStore),
    Memory(MemorySessionStore),
}

impl Backend {
    fn store(&self) -> &dyn SessionStore {
        match self {
            Backend::Files(_, store) => store,
            Backend::Memory(store) => store,
        }
    }

    fn raw(&self, id: &str) -> Vec<u8> {
        match self {
            Backend::Files(_, store) => std::fs::read(store.path_of(id).unwrap()).unwrap(),
            Backend::Memory(store) => store.raw(id).unwrap(),
        }
    }

    fn set_raw(&self, id: &str, data: &[u8]) {
        match self {
            Backend::Files(_, store) => {
                std::fs::create_dir_all(store.dir()).unwrap();
                std::fs::write(store.path_of(id).unwrap(), data).unwrap();
            }
            Backend::Memory(store) => store.insert_raw(id, data).unwrap(),
        }
    }

    fn append_raw(&self, id: &str, data: &[u8]) {
        let mut all = self.raw(id);
        all.extend_from_slice(data);
        self.set_raw(id, &all);
    }
}

fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().unwrap();
    // A directory that does not exist yet: `create` makes it.
    let store = JsonlSessionStore::new(dir.path().join("home").join("sessions"));
    vec![
        Backend::Files(dir, store),
        Backend::Memory(MemorySessionStore::new()),
    ]
}

fn meta(id: &str, cwd: impl Into<PathBuf>, started_at: &str) -> SessionMeta {
    SessionMeta {
        id: id.to_owned(),
        cwd: cwd.into(),
        model: "claude-test".to_owned(),
        provider: "anthropic".to_owned(),
        started_at: started_at.to_owned(),
        keel_version: "0.0.0-test".to_owned(),
    }
}

/// A history using every kind of content block, with the fields that are easy to lose.
fn rich_history() -> Vec<Message> {
    vec![
        Message::user("fix the failing test"),
        Message::new(
            Role::Assistant,
            vec![
                ContentBlock::Thinking {
                    thinking: "look at the test first".to_owned(),
                    signature: "sig-Zm9vYmFy==".to_owned(),
                },
                ContentBlock::RedactedThinking {
                    data: "opaque\u{1}payload".to_owned(),
                },
                ContentBlock::Reasoning {
                    id: "rs_1".to_owned(),
                    summary: vec!["**Reading**".to_owned(), "the test".to_owned()],
                    encrypted_content: Some("gAAAAB-opaque==".to_owned()),
                },
                ContentBlock::text("Reading it."),
                ContentBlock::tool_use("call_1", "read_file", json!({"path": "src/lib.rs"})),
                ContentBlock::ToolUse {
                    id: "call_2".to_owned(),
                    name: "run_command".to_owned(),
                    input: json!({}),
                    invalid: Some(InvalidToolInput {
                        raw: "{\"command\": \"cargo te".to_owned(),
                        reason: "EOF while parsing a string at line 1 column 20".to_owned(),
                    }),
                },
            ],
        ),
        Message::new(
            Role::User,
            vec![
                ContentBlock::tool_result("call_1", "fn main() {}\n", false),
                ContentBlock::tool_result("call_2", "invalid input: not run", true),
            ],
        ),
        Message::assistant("Done: ünïcödé ✓ and \"quotes\"\n"),
    ]
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_creation_input_tokens: 1,
        cache_read_input_tokens: 2,
    }
}

/// Writes a complete run: the rich history, two calls, an outcome.
fn write_run(store: &dyn SessionStore, meta: &SessionMeta) {
    let mut log = store.create(meta).unwrap();
    assert_eq!(log.id(), meta.id);
    let history = rich_history();
    log.append(&SessionRecord::message(history[0].clone()))
        .unwrap();
    log.append(&SessionRecord::message(history[1].clone()))
        .unwrap();
    log.append(&SessionRecord::usage(usage(100, 20), Some(0.25)))
        .unwrap();
    log.append(&SessionRecord::message(history[2].clone()))
        .unwrap();
    log.append(&SessionRecord::message(history[3].clone()))
        .unwrap();
    log.append(&SessionRecord::usage(usage(50, 5), Some(0.5)))
        .unwrap();
    log.append(&SessionRecord::Outcome {
        stop: "end_turn".to_owned(),
        text: "Done".to_owned(),
        iterations: 2,
        usage: usage(150, 25),
        cost_usd: Some(0.75),
    })
    .unwrap();
    log.flush().unwrap();
}

fn line_count(data: &[u8]) -> usize {
    data.iter().filter(|b| **b == b'\n').count()
}

#[test]
fn round_trip_is_exact() {
    for backend in backends() {
        let store = backend.store();
        let meta = meta("s1", "/work/project", "2026-01-01T00:00:00.000Z");
        write_run(store, &meta);

        let loaded = store.load("s1").unwrap();
        assert_eq!(loaded.meta, meta);
        assert_eq!(loaded.messages, rich_history());
        assert_eq!(
            loaded.usage,
            Usage {
                input_tokens: 150,
                output_tokens: 25,
                cache_creation_input_tokens: 2,
                cache_read_input_tokens: 4,
            }
        );
        assert_eq!(loaded.cost_usd, Some(0.75));
        assert_eq!(
            loaded.last_outcome,
            Some(("end_turn".to_owned(), "Done".to_owned()))
        );
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(line_count(&backend.raw("s1")), 8);
    }
}

#[test]
fn cost_is_unknown_if_any_call_cost_is_unknown() {
    for backend in backends() {
        let store = backend.store();
        let mut log = store
            .create(&meta("c", "/p", "2026-01-01T00:00:00Z"))
            .unwrap();
        log.flush().unwrap();
        assert_eq!(store.load("c").unwrap().cost_usd, Some(0.0));
        log.append(&SessionRecord::usage(usage(1, 1), Some(0.1)))
            .unwrap();
        log.append(&SessionRecord::usage(usage(1, 1), None))
            .unwrap();
        log.append(&SessionRecord::usage(usage(1, 1), Some(0.1)))
            .unwrap();
        log.flush().unwrap();
        let loaded = store.load("c").unwrap();
        assert_eq!(loaded.cost_usd, None);
        assert_eq!(loaded.usage.input_tokens, 3);
        assert_eq!(loaded.last_outcome, None);
    }
}

#[test]
fn files_are_private_and_the_directory_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("a").join("sessions");
    let store = JsonlSessionStore::new(&sessions);
    assert_eq!(store.dir(), sessions);
    let mut log = store
        .create(&meta("private", "/p", "2026-01-01T00:00:00Z"))
        .unwrap();
    log.flush().unwrap();
    let path = store.path_of("private").unwrap();
    assert_eq!(path, sessions.join("private.jsonl"));
    let file_mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(file_mode, 0o600, "{file_mode:o}");
    let dir_mode = std::fs::metadata(&sessions).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700, "{dir_mode:o}");
}

#[test]
fn dropping_a_log_flushes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(dir.path());
    let mut log = store
        .create(&meta("d", "/p", "2026-01-01T00:00:00Z"))
        .unwrap();
    log.append(&SessionRecord::message(Message::user("unflushed")))
        .unwrap();
    drop(log);
    assert_eq!(
        store.load("d").unwrap().messages,
        vec![Message::user("unflushed")]
    );
}

#[test]
fn resume_appends_to_the_same_session() {
    for backend in backends() {
        let store = backend.store();
        let meta = meta("r", "/p", "2026-01-01T00:00:00Z");
        write_run(store, &meta);

        let (loaded, mut log) = store.open("r").unwrap();
        assert_eq!(loaded.messages, rich_history());
        assert_eq!(log.id(), "r");
        log.append(&SessionRecord::message(Message::user("and now the docs")))
            .unwrap();
        log.append(&SessionRecord::usage(usage(10, 1), Some(0.25)))
            .unwrap();
        log.append(&SessionRecord::Outcome {
            stop: "max_iterations".to_owned(),
            text: "ran out".to_owned(),
            iterations: 1,
            usage: usage(10, 1),
            cost_usd: Some(0.25),
        })
        .unwrap();
        log.flush().unwrap();

        let again = store.load("r").unwrap();
        let mut expected = rich_history();
        expected.push(Message::user("and now the docs"));
        assert_eq!(again.messages, expected);
        assert_eq!(again.usage.input_tokens, 160);
        assert_eq!(again.cost_usd, Some(1.0));
        assert_eq!(
            again.last_outcome,
            Some(("max_iterations".to_owned(), "ran out".to_owned()))
        );
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
        assert_eq!(line_count(&backend.raw("r")), 11);
        if let Backend::Files(_, store) = &backend {
            let files = std::fs::read_dir(store.dir()).unwrap().count();
            assert_eq!(files, 1, "resuming must not create another file");
        }
    }
}

#[test]
fn cut_off_last_line_is_skipped_and_resuming_starts_a_new_line() {
    for backend in backends() {
        let store = backend.store();
        write_run(store, &meta("cut", "/p", "2026-01-01T00:00:00Z"));
        // A crash in the middle of writing a record: no closing brace, no newline.
        backend.append_raw("cut", br#"{"type":"message","message":{"role":"user","con"#);

        let loaded = store.load("cut").unwrap();
        assert_eq!(loaded.messages, rich_history());
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].starts_with("line 9: skipped the incomplete last line"),
            "{}",
            loaded.warnings[0]
        );

        let (resumed, mut log) = store.open("cut").unwrap();
        assert_eq!(resumed.warnings, loaded.warnings);
        log.append(&SessionRecord::message(Message::user("after the crash")))
            .unwrap();
        log.flush().unwrap();
        drop(log);

        let raw = backend.raw("cut");
        assert!(
            raw.ends_with(b"\"con\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"after the crash\"}]}}\n"),
            "{}",
            String::from_utf8_lossy(&raw)
        );
        let after = store.load("cut").unwrap();
        let mut expected = rich_history();
        expected.push(Message::user("after the crash"));
        assert_eq!(after.messages, expected);
        // The fragment is now a damaged line in the middle, kept and skipped.
        assert_eq!(after.warnings.len(), 1, "{:?}", after.warnings);
        assert!(
            after.warnings[0].starts_with("line 9: skipped a corrupt line"),
            "{}",
            after.warnings[0]
        );
    }
}

#[test]
fn corrupt_middle_line_is_skipped_and_the_rest_kept() {
    for backend in backends() {
        let store = backend.store();
        let mut log = store
            .create(&meta("mid", "/p", "2026-01-01T00:00:00Z"))
            .unwrap();
        log.append(&SessionRecord::message(Message::user("one")))
            .unwrap();
        log.flush().unwrap();
        drop(log);
        backend.append_raw("mid", b"{not json at all\n");
        backend.append_raw(
            "mid",
            b"{\"type\":\"message\",\"message\":{\"role\":\"wizard\"}}\n",
        );
        let (_, mut log) = store.open("mid").unwrap();
        log.append(&SessionRecord::message(Message::assistant("two")))
            .unwrap();
        log.flush().unwrap();

        let loaded = store.load("mid").unwrap();
        assert_eq!(
            loaded.messages,
            vec![Message::user("one"), Message::assistant("two")]
        );
        assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
        assert!(loaded.warnings[0].starts_with("line 3: skipped a corrupt line"));
        assert!(loaded.warnings[1].starts_with("line 4: skipped a corrupt line"));
        assert!(loaded.warnings[1].contains("bad \"message\" record"));
    }
}

#[test]
fn a_file_without_a_valid_header_is_corrupt() {
    let message_line = serde_json::to_string(&SessionRecord::message(Message::user("hi"))).unwrap();
    let header = serde_json::to_string(&SessionRecord::Header(meta("h", "/p", "x"))).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("no header", format!("{message_line}\n").into_bytes()),
        ("cut-off header", header.as_bytes()[..20].to_vec()),
        ("garbage", b"\x00\xffbinary\n".to_vec()),
        ("blank first line", format!("\n{header}\n").into_bytes()),
    ];
    for backend in backends() {
        for (name, data) in &cases {
            backend.set_raw("h", data);
            let err = backend.store().load("h").unwrap_err();
            assert!(
                matches!(&err, SessionError::Corrupt { id, line: 1, .. } if id == "h"),
                "{name}: {err:?}"
            );
            assert!(backend.store().open("h").is_err(), "{name}");
            // The store still lists the other sessions.
            assert!(backend.store().list(10).unwrap().is_empty(), "{name}");
        }
    }
}

#[test]
fn unknown_record_types_are_skipped() {
    for backend in backends() {
        let store = backend.store();
        let mut log = store
            .create(&meta("u", "/p", "2026-01-01T00:00:00Z"))
            .unwrap();
        log.append(&SessionRecord::message(Message::user("one")))
            .unwrap();
        log.flush().unwrap();
        drop(log);
        backend.append_raw("u", b"{\"type\":\"checkpoint\",\"commit\":\"abc\"}\n");
        backend.append_raw(
            "u",
            b"{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"two\"}]}}\n",
        );

        let loaded = store.load("u").unwrap();
        assert_eq!(
            loaded.messages,
            vec![Message::user("one"), Message::assistant("two")]
        );
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].contains("line 3")
                && loaded.warnings[0].contains("unknown type \"checkpoint\""),
            "{}",
            loaded.warnings[0]
        );
    }
}

#[test]
fn compacted_replaces_the_history() {
    for backend in backends() {
        let store = backend.store();
        let mut log = store
            .create(&meta("k", "/p", "2026-01-01T00:00:00Z"))
            .unwrap();
        for text in ["a", "b", "c"] {
            log.append(&SessionRecord::message(Message::user(text)))
                .unwrap();
        }
        let summary = vec![Message::user("summary of a, b, c")];
        log.append(&SessionRecord::Compacted {
            messages: summary.clone(),
            before_tokens: 3000,
            after_tokens: 100,
        })
        .unwrap();
        log.append(&SessionRecord::message(Message::assistant("d")))
            .unwrap();
        log.flush().unwrap();

        let loaded = store.load("k").unwrap();
        assert_eq!(
            loaded.messages,
            vec![summary[0].clone(), Message::assistant("d")]
        );
        // Listing still shows the first prompt, from before the compaction.
        let listed = store.list(1).unwrap();
        assert_eq!(listed[0].first_prompt.as_deref(), Some("a"));
    }
}

#[test]
fn invalid_ids_are_refused() {
    for backend in backends() {
        let store = backend.store();
        for id in ["../x", "a/b", "", "..", "../../etc/passwd", "a b", "a\0b"] {
            let invalid =
                |r: Result<(), SessionError>| matches!(r, Err(SessionError::InvalidId { .. }));
            assert!(invalid(store.load(id).map(|_| ())), "load {id:?}");
            assert!(invalid(store.open(id).map(|_| ())), "open {id:?}");
            assert!(
                invalid(
                    store
                        .create(&meta(id, "/p", "2026-01-01T00:00:00Z"))
                        .map(|_| ())
                ),
                "create {id:?}"
            );
        }
        if let Backend::Files(dir, store) = &backend {
            assert!(matches!(
                store.path_of("../x"),
                Err(SessionError::InvalidId { .. })
            ));
            // Nothing was written anywhere.
            let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            assert!(entries.is_empty(), "{entries:?}");
        }
    }
}

#[test]
fn missing_and_duplicate_sessions() {
    for backend in backends() {
        let store = backend.store();
        assert!(matches!(
            store.load("nope"),
            Err(SessionError::NotFound { id }) if id == "nope"
        ));
        assert!(matches!(
            store.open("nope"),
            Err(SessionError::NotFound { .. })
        ));
        let meta = meta("dup", "/p", "2026-01-01T00:00:00Z");
        write_run(store, &meta);
        assert!(matches!(
            store.create(&meta),
            Err(SessionError::AlreadyExists { id }) if id == "dup"
        ));
        // The refused create changed nothing.
        assert_eq!(store.load("dup").unwrap().messages, rich_history());
    }
}

#[test]
fn latest_for_cwd_picks_the_newest_in_that_directory() {
    let project = tempfile::tempdir().unwrap();
    let here = project.path().join("here");
    let there = project.path().join("there");
    std::fs::create_dir_all(&here).unwrap();
    std::fs::create_dir_all(&there).unwrap();
    for backend in backends() {
        let store = backend.store();
        assert_eq!(store.latest_for_cwd(&here).unwrap(), None);
        let sessions = [
            meta("a-old", &here, "2026-01-01T10:00:00.000Z"),
            meta("z-newer-elsewhere", &there, "2026-01-03T10:00:00.000Z"),
            // Same second as a-old but later: compared as times, not as text.
            meta("b-new", &here, "2026-01-02T10:00:00.500Z"),
            meta("c-mid", &here, "2026-01-02T10:00:00Z"),
        ];
        for meta in &sessions {
            store.create(meta).unwrap().flush().unwrap();
        }
        assert_eq!(
            store.latest_for_cwd(&here).unwrap(),
            Some(sessions[2].clone())
        );
        // The same directory spelled differently.
        let detour = here.join("..").join("here");
        assert_eq!(
            store.latest_for_cwd(&detour).unwrap().map(|m| m.id),
            Some("b-new".to_owned())
        );
        assert_eq!(
            store.latest_for_cwd(&there).unwrap().map(|m| m.id),
            Some("z-newer-elsewhere".to_owned())
        );
        assert_eq!(store.latest_for_cwd(Path::new("/nowhere")).unwrap(), None);
        // A damaged file does not hide the others.
        backend.set_raw("d-broken", b"{\"type\":\"head");
        assert_eq!(
            store.latest_for_cwd(&here).unwrap().map(|m| m.id),
            Some("b-new".to_owned())
        );
    }
}

#[test]
fn list_is_newest_first_with_prompt_and_outcome() {
    for backend in backends() {
        let store = backend.store();
        assert!(store.list(10).unwrap().is_empty());
        write_run(store, &meta("first", "/p", "2026-01-01T00:00:00Z"));

        let mut log = store
            .create(&meta("second", "/q", "2026-01-02T00:00:00Z"))
            .unwrap();
        // Tool results and assistant text do not count as the prompt.
        log.append(&SessionRecord::message(Message::new(
            Role::User,
            vec![ContentBlock::tool_result("t", "output", false)],
        )))
        .unwrap();
        let long = format!("please\n   {}", "refactor ".repeat(20));
        log.append(&SessionRecord::message(Message::user(long)))
            .unwrap();
        log.flush().unwrap();

        let mut log = store
            .create(&meta("third", "/p", "2026-01-03T00:00:00Z"))
            .unwrap();
        log.append(&SessionRecord::Outcome {
            stop: "cancelled".to_owned(),
            text: String::new(),
            iterations: 0,
            usage: Usage::default(),
            cost_usd: None,
        })
        .unwrap();
        log.flush().unwrap();
        backend.set_raw("broken", b"not a session\n");

        let all = store.list(usize::MAX).unwrap();
        let ids: Vec<&str> = all.iter().map(|s| s.meta.id.as_str()).collect();
        assert_eq!(ids, ["third", "second", "first"]);
        assert_eq!(all[0].first_prompt, None);
        assert_eq!(all[0].outcome.as_deref(), Some("cancelled"));
        let prompt = all[1].first_prompt.as_deref().unwrap();
        assert!(prompt.starts_with("please refactor refactor"), "{prompt}");
        // At most 80 characters; a cut right after a word drops the trailing space.
        assert!((79..=80).contains(&prompt.chars().count()), "{prompt}");
        assert!(!prompt.contains("  ") && !prompt.contains('\n'), "{prompt}");
        assert!(prompt.ends_with('…'), "{prompt}");
        assert_eq!(all[1].outcome, None);
        assert_eq!(all[2].first_prompt.as_deref(), Some("fix the failing test"));
        assert_eq!(all[2].outcome.as_deref(), Some("end_turn"));

        let two = store.list(2).unwrap();
        assert_eq!(two, all[..2].to_vec());
        assert!(store.list(0).unwrap().is_empty());
    }
}

#[test]
fn both_stores_write_the_same_bytes() {
    let [files, memory] = <[Backend; 2]>::try_from(backends()).ok().unwrap();
    let meta = meta("same", "/p", "2026-01-01T00:00:00Z");
    write_run(files.store(), &meta);
    write_run(memory.store(), &meta);
    assert_eq!(files.raw("same"), memory.raw("same"));
}

#[test]
fn new_sessions_get_fresh_ids_and_round_trip() {
    for backend in backends() {
        let store = backend.store();
        let a = SessionMeta::new("/p", "anthropic", "m");
        let b = SessionMeta::new("/p", "anthropic", "m");
        assert_ne!(a.id, b.id);
        store.create(&a).unwrap().flush().unwrap();
        store.create(&b).unwrap().flush().unwrap();
        assert_eq!(store.load(&a.id).unwrap().meta, a);
        assert_eq!(store.list(5).unwrap().len(), 2);
    }
}

#[test]
fn records_have_no_room_for_secrets() {
    // The header's fields, exactly: adding one (an API key, say) must be a deliberate change.
    let header = serde_json::to_value(SessionRecord::Header(meta("x", "/p", "t"))).unwrap();
    let mut keys: Vec<&str> = header
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "cwd",
            "id",
            "keel_version",
            "model",
            "provider",
            "started_at",
            "type"
        ]
    );
}

#[test]
fn session_file_format() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(dir.path());
    let meta = SessionMeta::new("/work/project", "anthropic", "claude-test");
    let mut log = store.create(&meta).unwrap();
    log.append(&SessionRecord::message(Message::user("hello")))
        .unwrap();
    log.append(&SessionRecord::message(rich_history()[1].clone()))
        .unwrap();
    log.append(&SessionRecord::usage(usage(12, 3), Some(0.001)))
        .unwrap();
    log.append(&SessionRecord::Compacted {
        messages: vec![Message::user("summary")],
        before_tokens: 1000,
        after_tokens: 10,
    })
    .unwrap();
    log.append(&SessionRecord::Outcome {
        stop: "end_turn".to_owned(),
        text: "bye".to_owned(),
        iterations: 1,
        usage: usage(12, 3),
        cost_usd: None,
    })
    .unwrap();
    log.flush().unwrap();
    let text = std::fs::read_to_string(store.path_of(&meta.id).unwrap()).unwrap();
    assert!(text.ends_with('\n'));
    let normalized = text
        .replace(&meta.id, "[id]")
        .replace(&meta.started_at, "[started_at]")
        .replace(&meta.keel_version, "[version]");
    insta::assert_snapshot!("session_file", normalized);
}

#[test]
fn a_header_naming_another_session_is_read_with_a_warning() {
    for backend in backends() {
        let store = backend.store();
        write_run(store, &meta("original", "/p", "2026-01-01T00:00:00Z"));
        // A file copied or renamed by hand.
        backend.set_raw("copy", &backend.raw("original"));
        let loaded = store.load("copy").unwrap();
        assert_eq!(loaded.meta.id, "original");
        assert_eq!(loaded.messages, rich_history());
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].contains("\"original\""),
            "{}",
            loaded.warnings[0]
        );
    }
}
