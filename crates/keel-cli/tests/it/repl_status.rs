//! Status at a glance, in a real pseudo-terminal against wiremock: the banner (model,
//! provider, approval mode, sandbox, network), the line after each turn (time, tokens, cost,
//! context), `/context`, Shift-Tab and `/mode`, the `git_commit` question, `/model`'s
//! checks (the catalog and the provider's list), `/agent` and `/team`, the progress line without colours; and `keel exec`'s
//! iteration warning (stderr, stream-json, and the note the model reads).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::pty;

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::request_bodies;
use pty::Pty;
use serde_json::{Value, json};

/// `screen` with what changes from run to run replaced: paths, the server's port, session
/// ids, keel's version, durations.
fn redact_screen(screen: &str, repo: &TempRepo, server: &wiremock::MockServer) -> String {
    let host = server.uri().replace("http://", "");
    let text = redact(screen, &[(&repo.path(), "[repo]")]).replace(&host, "[server]");
    let version = regex::Regex::new(r"keel \d+\.\d+\.\d+\S*").unwrap();
    version.replace_all(&text, "keel [version]").into_owned()
}

/// The text of every block of the last message of a request body.
fn last_message_texts(body: &Value) -> Vec<String> {
    let messages = body["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_banner_and_the_line_after_a_turn_say_where_keel_stands() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("Hello there.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let screen = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("hi");
        keel.expect("Hello there.");
        keel.expect("context ");
        keel.prompt();
        let screen = keel.screen();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        screen
    });
    let screen = redact_screen(&screen, &repo, &server);
    let words = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(
            "approvals: ask (Shift-Tab: next mode) · sandbox: workspace-write · network: off"
        ),
        "{screen}"
    );
    // Nothing is cut mid-word at the edge.
    for row in screen.lines() {
        assert!(
            row.chars().count() < 80,
            "a row filled to the edge: {row:?}"
        );
    }
    // 100 in, 20 out at claude-sonnet-4-5's prices: $0.0003 + $0.0003.
    assert!(
        screen.contains("100 in / 20 out tokens · $0.0006 · context"),
        "{screen}"
    );
    insta::assert_snapshot!("banner_and_turn_line", screen);
}

/// Serves `GET /v1/models` on `server` in Anthropic's shape, once.
async fn list_models(server: &wiremock::MockServer, ids: &[&str]) {
    use wiremock::matchers::{header, method, path};
    let data: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "model", "id": id, "display_name": id, "created_at": "2025-10-01T00:00:00Z"}))
        .collect();
    wiremock::Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("x-api-key", FAKE_KEY))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(
            json!({"data": data, "has_more": false, "first_id": ids[0], "last_id": ids[ids.len() - 1]}),
        ))
        .expect(1)
        .mount(server)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_checks_the_providers_list_and_its_cost_is_unknown_never_zero() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("From the new model.")]).await;
    list_models(
        &server,
        &["claude-haiku-4-5-20251001", "claude-sonnet-4-5-20250929"],
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (typo, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        // Listed as a dated snapshot, and in the catalog: no warning.
        keel.send_line("/model claude-haiku-4-5");
        keel.expect("model: claude-haiku-4-5 (from the next request on)");
        keel.prompt();
        keel.send_line("/model claude-haiku-4.5");
        keel.expect("goes back.");
        let typo = keel.screen_from("/model claude-haiku-4.5");
        keel.prompt();
        keel.send_line("/model gpt-nonsense-9");
        keel.expect("gpt-nonsense-9 is not among the 2 models anthropic lists;");
        keel.prompt();
        keel.send_line("hi");
        keel.expect("From the new model.");
        keel.expect("cost unknown");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        (typo, transcript)
    });
    let typo = typo.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        typo.contains(
            "warning: claude-haiku-4.5 is not among the 2 models anthropic lists (did you mean \
             claude-haiku-4-5?); using it anyway from the next request on (its cost and context \
             window are unknown to keel). /model claude-haiku-4-5 goes back."
        ),
        "{typo}"
    );
    let after = transcript.split("From the new model.").nth(1).unwrap();
    assert!(!after.contains("$0.00"), "{after}");
    // An unknown model has no known window either: no made-up context share.
    let line = after.lines().find(|l| l.contains("cost unknown")).unwrap();
    assert!(!line.contains("context"), "{line}");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies[0]["model"], "gpt-nonsense-9");
    // The list was asked for once, with the key (`expect(1)` is checked when the server drops).
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_says_when_the_providers_list_could_not_be_checked() {
    let repo = TempRepo::new();
    let home = Home::new();
    // No `GET /v1/models` here: the server answers 404.
    let server = anthropic_server(&[]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let screen = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("/model claude-haiku-4-5");
        keel.expect("model: claude-haiku-4-5 (from the next request on)");
        keel.prompt();
        keel.send_line("/model gpt-nonsense-9");
        keel.expect("goes back.");
        let screen = keel.screen_from("/model gpt-nonsense-9");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        screen
    });
    let words = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words
            .contains("warning: gpt-nonsense-9 is not a known model of anthropic; using it anyway"),
        "{words}"
    );
    assert!(
        words.contains("its model list could not be checked: invalid request: HTTP 404). /model claude-haiku-4-5 goes back."),
        "{words}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shift_tab_cycles_the_mode_and_read_only_refuses_a_write() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "write_file",
            json!({"path": "new.txt", "content": "x\n"}),
        ),
        text("I could not write it."),
        tool_call(
            "toolu_2",
            "write_file",
            json!({"path": "new.txt", "content": "y\n"}),
        ),
        text("Written."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let transcript = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        // Half a line typed: Shift-Tab keeps it.
        keel.send("write");
        keel.send("\x1b[Z");
        keel.expect("mode: accept-edits");
        keel.expect("[accept-edits] keel> write");
        keel.send("\x1b[Z");
        keel.expect("mode: read-only — every call that may change something is refused");
        keel.expect("[read-only] keel> write");
        keel.send_line(" new.txt");
        keel.expect("I could not write it.");
        keel.prompt();
        keel.send_line("/mode plan");
        keel.expect("unknown mode plan; use one of ask, accept-edits, read-only");
        keel.prompt();
        keel.send_line("/mode ask");
        keel.expect("mode: ask");
        keel.prompt();
        keel.send_line("write new.txt again");
        keel.expect("Written.");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        transcript
    });
    assert!(transcript.contains("✗ write_file(new.txt)"), "{transcript}");
    // Refused in read-only mode, written once back in ask.
    assert_eq!(repo.read("new.txt"), "y\n");
    let bodies = request_bodies(&server).await;
    assert_eq!(
        bodies[0]["messages"][0]["content"][0]["text"],
        "write new.txt"
    );
    let refused = serde_json::to_string(&bodies[1]["messages"]).unwrap();
    assert!(refused.contains("read-only mode"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commit_question_lists_the_files_it_stages_once_and_wraps_on_words() {
    let repo = TempRepo::new();
    repo.write("README.md", "# test, edited\n");
    repo.write("dist/d", "built\n");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "git_commit",
            json!({"message": "Update the readme and ship the bundle\n\nThe dist directory holds the bundle that the release script uploads to the mirror every night."}),
        ),
        text("Left it uncommitted."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let screen = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("commit");
        keel.expect("[y/N/a(lways): this same message] ");
        let screen = keel.screen();
        keel.send_line("n");
        keel.expect("Left it uncommitted.");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        screen
    });
    let screen = redact_screen(&screen, &repo, &server);
    assert!(screen.contains("  ? dist/d  (untracked)"), "{screen}");
    assert!(screen.contains("  M README.md"), "{screen}");
    // The summary once (in the question), the body once (above it).
    assert_eq!(
        screen
            .matches("Update the readme and ship the bundle")
            .count(),
        1,
        "{screen}"
    );
    assert_eq!(screen.matches("release script").count(), 1, "{screen}");
    assert!(
        screen.contains("Allow git_commit(Update the readme and ship the bundle)?"),
        "{screen}"
    );
    // No line is cut mid-word: every row ends at a word's end or is short of the width.
    for row in screen.lines() {
        assert!(
            row.chars().count() < 80,
            "a row filled to the edge: {row:?}"
        );
    }
    insta::assert_snapshot!("commit_question", screen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_shows_what_fills_the_window() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "read_file", json!({"path": "README.md"})),
        text("Read it."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let lines = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("read the readme");
        keel.expect("Read it.");
        keel.prompt();
        keel.send_line("/context");
        keel.expect("context (window of claude-sonnet-4-5: 200,000 tokens):");
        let lines = keel.expect("keel> ");
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        lines
    });
    for part in [
        "system prompt",
        "tools (",
        "your messages",
        "model replies",
        "tool results",
        "total (estimated)",
        "free",
    ] {
        assert!(lines.contains(part), "no {part}: {lines}");
    }
    let numbers = regex::Regex::new(r"~\s*[\d,]+").unwrap();
    let shares = regex::Regex::new(r"\(\d+%\)").unwrap();
    let redacted = numbers.replace_all(&lines, "~N");
    let redacted = shares.replace_all(&redacted, "(P%)");
    insta::assert_snapshot!("context", redacted.trim_start_matches('\n').trim_end());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_shows_every_step_s_output_and_counts_steps_right() {
    let repo = TempRepo::new();
    repo.write(
        ".keel/agents/planner.md",
        "---\ndescription: Plans the work\n---\nYou plan.\n",
    );
    repo.write(
        ".keel/teams/duo.yaml",
        "description: Two plans\nagents: [planner, planner]\n",
    );
    let home = Home::new();
    let server = anthropic_server(&[text("PLAN A"), text("PLAN B")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let transcript = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("/team duo Plan twice");
        keel.expect("── planner (step 1 of 2) ──");
        keel.expect("[agent planner: 1 step, 20 output tokens]");
        keel.expect("PLAN A");
        keel.expect("── planner (step 2 of 2) ──");
        keel.expect("PLAN B");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        transcript
    });
    assert!(!transcript.contains("1 steps"), "{transcript}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_colours_a_command_says_when_it_starts() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "run_command",
            json!({"command": "sleep 0.2; echo done"}),
        ),
        text("Ran it."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let transcript = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("run it");
        keel.expect("running: run_command(sleep 0.2; echo done)…");
        keel.expect("✓ run_command(sleep 0.2; echo done)");
        keel.expect("Ran it.");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        transcript
    });
    let started = transcript.find("running: run_command").unwrap();
    let finished = transcript.find("✓ run_command").unwrap();
    assert!(started < finished, "{transcript}");
}

/// Five reads of `a.txt`, then an answer: a run with `--max-iterations 5` is warned after
/// its fourth call.
async fn five_reads() -> wiremock::MockServer {
    let mut replies: Vec<_> = (1..=5)
        .map(|i| tool_call(&format!("toolu_{i}"), "read_file", json!({"path": "a.txt"})))
        .collect();
    replies.push(text("Done."));
    anthropic_server(&replies).await
}

#[tokio::test]
async fn exec_says_the_iteration_warning_on_stderr_and_tells_the_model() {
    let repo = TempRepo::new();
    repo.write("a.txt", "a\n");
    let home = Home::new();
    let server = five_reads().await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "--max-iterations", "5", "Loop"]);
    let output = run(command).await;
    let stderr = stderr(&output);
    assert!(
        stderr.contains("keel: warning: 4 of 5 model calls used (--max-iterations); the model is told to wrap up"),
        "{stderr}"
    );
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 5);
    for body in &bodies[..4] {
        assert!(
            !last_message_texts(body)
                .iter()
                .any(|t| t.contains("note from keel")),
            "{body}"
        );
    }
    assert_eq!(
        last_message_texts(&bodies[4]),
        [
            "[note from keel: this is model call 5 of 5 in this run; 0 left after this one. \
          Wrap up: finish the task, or say what is done and what remains.]"
        ]
    );
}

#[tokio::test]
async fn stream_json_has_a_system_line_for_the_iteration_warning() {
    let repo = TempRepo::new();
    repo.write("a.txt", "a\n");
    let home = Home::new();
    let server = five_reads().await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args([
        "exec",
        "--max-iterations",
        "5",
        "--output-format",
        "stream-json",
        "Loop",
    ]);
    let output = run(command).await;
    let lines: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let warnings: Vec<&Value> = lines
        .iter()
        .filter(|line| line["subtype"] == "iteration_warning")
        .collect();
    assert_eq!(warnings.len(), 1, "{lines:#?}");
    let warning = warnings[0];
    assert_eq!(warning["type"], "system");
    assert_eq!(warning["used"], 4);
    assert_eq!(warning["limit"], 5);
    assert_eq!(warning["remaining"], 1);
    assert_eq!(warning["session_id"], lines[0]["session_id"]);
    // Nothing on stderr duplicates it in stream-json.
    assert!(!stderr(&output).contains("model calls used"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_in_file_names_and_the_message_never_reach_the_terminal() {
    let repo = TempRepo::new();
    repo.write("evil\x1b[2J.txt", "x\n");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "git_commit",
            json!({"message": "Clear\x1b[2J the screen\n\nBody\x1b[2J too"}),
        ),
        text("Left it."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let screen = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("commit");
        keel.expect("[y/N/a(lways): this same message] ");
        let screen = keel.screen();
        keel.send_line("n");
        keel.expect("Left it.");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        screen
    });
    // Had ESC [2J reached the terminal, the banner would be gone from the screen and no
    // "[2J" would be drawn as text (the emulator draws no glyph for the replacement mark).
    assert!(screen.contains("approvals: ask"), "{screen}");
    for shown in [
        r"\? evil.?\[2J\.txt  \(untracked\)",
        r"Clear.?\[2J the screen",
        r"Body.?\[2J too",
    ] {
        let shown = regex::Regex::new(shown).unwrap();
        assert!(shown.is_match(&screen), "{shown}: {screen}");
    }
}
