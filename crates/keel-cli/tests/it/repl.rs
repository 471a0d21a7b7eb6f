//! The interactive `keel` in a real pseudo-terminal, against wiremock, in temporary git
//! repositories: approvals, Ctrl-C, slash commands, diffs.
//!
//! Each test starts its mock server on the test's runtime, then drives keel from
//! `block_in_place` (the server goes on serving on the other worker thread).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::pty;

use std::time::Duration;

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::request_bodies;
use pty::Pty;
use serde_json::{Value, json};

/// The `tool_result` block answering `call_id` in a request body.
fn tool_result<'a>(body: &'a Value, call_id: &str) -> &'a Value {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["content"].as_array())
        .flatten()
        .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool_result for {call_id} in {body:#}"))
}

/// The text of a `tool_result` block (a string, or text blocks).
fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// The session id in keel's banner.
fn session_id(banner: &str) -> String {
    regex::Regex::new(&format!(r"session ({SESSION_ID})"))
        .unwrap()
        .captures(banner)
        .unwrap_or_else(|| panic!("no session id in {banner}"))[1]
        .to_owned()
}

/// The summary line of `HEAD`.
fn head_summary(repo: &TempRepo) -> String {
    let repo = repo.repo();
    let commit = repo.head().unwrap().peel_to_commit().unwrap();
    commit.summary().unwrap().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_answered_yes_run_and_answered_no_are_denied() {
    let repo = TempRepo::new();
    let initial = repo.head();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "git_commit", json!({"message": "Add notes"})),
        text("Committed the notes."),
        tool_call("toolu_2", "git_commit", json!({"message": "Add more"})),
        text("Left it uncommitted."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        repo.write("notes.txt", "alpha\n");
        keel.send_line("commit the notes");
        let before = keel.expect("[y/N/a(lways)");
        assert!(
            before.contains("Allow git_commit(Add notes)?"),
            "the question names the call: {before}"
        );
        keel.send_line("y");
        keel.expect("Committed the notes.");
        keel.prompt();
        repo.write("more.txt", "beta\n");
        keel.send_line("commit the rest");
        keel.expect("Allow git_commit(Add more)?");
        keel.expect("[y/N/a(lways)");
        keel.send_line("n");
        keel.expect("Left it uncommitted.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    // Yes: the commit was made, on top of the first.
    let repo2 = repo.repo();
    let head = repo2.head().unwrap().peel_to_commit().unwrap();
    assert_eq!(head.summary().unwrap(), Some("Add notes"));
    assert_eq!(head.parent_id(0).unwrap(), initial);
    assert!(
        transcript.contains("✓ git_commit(Add notes)"),
        "{transcript}"
    );
    // No: no second commit, the file is still uncommitted, and the model was told.
    assert!(head.tree().unwrap().get_name("more.txt").is_none());
    assert!(
        transcript.contains("✗ git_commit(Add more) · denied"),
        "{transcript}"
    );
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 4);
    let approved = tool_result(&bodies[1], "toolu_1");
    assert_ne!(approved["is_error"], true, "{approved}");
    let denied = tool_result(&bodies[3], "toolu_2");
    assert_eq!(denied["is_error"], true, "{denied}");
    assert!(
        result_text(denied).starts_with("denied: the user declined"),
        "{denied}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_a_slow_turn_and_the_next_prompt_is_answered() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = slow_then(
        &text("Too late."),
        Duration::from_secs(30),
        &text("The second answer."),
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let runtime = tokio::runtime::Handle::current();
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("a slow question");
        // Press Ctrl-C once the model has been asked (its answer is 30 s away).
        let asked = wait_for_request(&server, &runtime);
        assert!(asked, "keel never asked the model: {}", keel.transcript());
        keel.ctrl_c();
        keel.expect("cancelling…");
        keel.expect("Cancelled after 1 model call(s)");
        keel.prompt();
        keel.send_line("a quick question");
        keel.expect("The second answer.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert!(!transcript.contains("Too late."), "{transcript}");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    // The session went on: the second request holds both prompts.
    let sent = bodies[1]["messages"].to_string();
    assert!(sent.contains("a slow question"), "{sent}");
    assert!(sent.contains("a quick question"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_takes_back_the_commit_keel_made_and_keeps_the_work() {
    let repo = TempRepo::new();
    let initial = repo.head();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "write_file",
            json!({"path": "notes.txt", "content": "alpha\nbeta\n"}),
        ),
        tool_call("toolu_2", "git_commit", json!({"message": "Add notes"})),
        text("Wrote and committed the notes."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("write some notes and commit them");
        // The write shows as a diff of a new file.
        keel.expect("✓ write_file(notes.txt)");
        keel.expect("notes.txt (new file, 2 lines)");
        keel.expect("+alpha");
        keel.expect("+beta");
        keel.expect("[y/N/a(lways)");
        keel.send_line("y");
        keel.expect("Wrote and committed the notes.");
        keel.prompt();
        assert_eq!(head_summary(&repo), "Add notes");
        keel.send_line("/undo");
        keel.expect("undid commit");
        keel.expect("\"Add notes\"; its changes are staged in the work tree");
        keel.prompt();
        keel.send_line("/diff");
        keel.expect("changes since the session started (snapshot ");
        keel.expect("+++ b/notes.txt");
        keel.expect("+alpha");
        keel.prompt();
        // Nothing of this session's is left to undo.
        keel.send_line("/undo");
        keel.expect("cannot undo:");
        keel.prompt();
        keel.send_line("/exit");
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert_eq!(repo.head(), initial);
    assert_eq!(repo.read("notes.txt"), "alpha\nbeta\n");
    let index = repo.repo().index().unwrap();
    assert!(
        index
            .get_path(std::path::Path::new("notes.txt"), 0)
            .is_some(),
        "the undone commit's changes stay staged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_help_model_cost_sessions_clear_and_unknown() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("Hello there."), text("Hello again.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        let banner = keel.prompt();
        assert!(
            banner.contains(&format!("keel {}", env!("CARGO_PKG_VERSION"))),
            "{banner}"
        );
        assert!(banner.contains("claude-sonnet-4-5 · anthropic"), "{banner}");
        assert!(banner.contains("/help"), "{banner}");
        let first_id = session_id(&banner);
        keel.send_line("/help");
        let help = keel.prompt();
        for name in [
            "/help",
            "/undo",
            "/diff",
            "/cost",
            "/compact",
            "/clear",
            "/model",
            "/sessions",
            "/exit",
        ] {
            assert!(help.contains(name), "/help lists {name}: {help}");
        }
        keel.send_line("/frobnicate now");
        keel.expect("unknown command /frobnicate; /help lists the commands");
        keel.prompt();
        keel.send_line("/model");
        keel.expect("model: claude-sonnet-4-5");
        keel.prompt();
        keel.send_line("/model claude-haiku-4-5");
        keel.prompt();
        keel.send_line("/cost");
        keel.expect("tokens: 0 input, 0 output");
        keel.prompt();
        keel.send_line("say hello");
        keel.expect("Hello there.");
        keel.prompt();
        keel.send_line("/cost");
        // claude-haiku-4-5: 100 × $1 + 20 × $5 per million tokens.
        keel.expect("tokens: 100 input, 20 output · cost: $0.0002");
        keel.prompt();
        keel.send_line("/compact");
        keel.expect("cannot compact: nothing to compact");
        keel.prompt();
        keel.send_line("/sessions");
        let listing = keel.prompt();
        assert!(listing.contains(&first_id), "{listing}");
        assert!(listing.contains("say hello"), "{listing}");
        keel.send_line("/clear");
        keel.expect("new session ");
        let second_id = keel.prompt().trim().to_owned();
        assert_eq!(session_id(&format!("session {second_id}")), second_id);
        assert_ne!(second_id, first_id);
        keel.send_line("say hello again");
        keel.expect("Hello again.");
        keel.prompt();
        keel.send_line("/quit");
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], "claude-haiku-4-5");
    // /clear: a fresh history, the model kept.
    assert_eq!(bodies[1]["model"], "claude-haiku-4-5");
    assert_eq!(bodies[1]["messages"].as_array().unwrap().len(), 1);
    // The lines typed are in the history file.
    let history = std::fs::read_to_string(home.keel_home().join("history")).unwrap();
    assert!(history.contains("say hello"), "{history}");
    assert!(history.contains("/model claude-haiku-4-5"), "{history}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_iteration_warning_asks_whether_to_go_on() {
    let repo = TempRepo::new();
    let home = Home::new();
    let mut replies: Vec<_> = (1..=4)
        .map(|i| tool_call(&format!("toolu_{i}"), "git_status", json!({})))
        .collect();
    replies.push(text("Never sent."));
    let server = anthropic_server(&replies).await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["--max-iterations", "5"]);
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("look around");
        keel.expect("keel has made 4 of 5 model calls. Continue? [Y/n]");
        keel.send_line("n");
        keel.expect("Stopped after 4 model calls");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert_eq!(
        transcript.matches("✓ git_status()").count(),
        4,
        "{transcript}"
    );
    assert_eq!(request_bodies(&server).await.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_clears_the_line_hints_at_an_empty_prompt_and_twice_exits() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        // With text on the line, Ctrl-C clears it: what follows is a line of its own.
        keel.send("half a thought");
        keel.ctrl_c();
        keel.send_line("/cost");
        keel.expect("tokens: 0 input, 0 output");
        keel.prompt();
        keel.ctrl_c();
        keel.expect("press Ctrl-C again or Ctrl-D to exit");
        keel.prompt();
        keel.ctrl_c();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert_eq!(
        transcript.matches("press Ctrl-C again").count(),
        1,
        "{transcript}"
    );
    assert!(request_bodies(&server).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colours_paint_diffs_and_resuming_says_so() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "alpha\nbeta\n");
    repo.commit("add notes");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "patch_file",
            json!({"path": "notes.txt", "old_string": "beta", "new_string": "gamma"}),
        ),
        text("Patched."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).env_remove("NO_COLOR");
    let session_id = blocking(|| {
        let mut keel = Pty::spawn(command);
        let banner = keel.prompt();
        let id = session_id(&banner);
        keel.send_line("patch the notes");
        // Removed lines red, added lines green, as escape sequences on the terminal.
        keel.expect("\x1b[31m-beta\x1b[0m");
        keel.expect("\x1b[32m+gamma\x1b[0m");
        keel.expect("Patched.");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        id
    });
    assert_eq!(repo.read("notes.txt"), "alpha\ngamma\n");
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["resume", &session_id]);
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        let banner = keel.prompt();
        assert!(
            banner.contains(&format!("session {session_id} (resumed, 4 messages)")),
            "{banner}"
        );
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_slash_commands_list_and_run_agents_and_teams() {
    let repo = TempRepo::new();
    repo.write(
        ".keel/agents/planner.md",
        "---\ndescription: Plans the work\n---\nYou plan.\n",
    );
    repo.write(
        ".keel/teams/duo.yaml",
        "description: Two plans\nagents: [planner, planner]\n",
    );
    repo.write(".keel/skills/release.md", "How to cut a release.\n");
    let home = Home::new();
    let server = anthropic_server(&[text("PLAN A"), text("PLAN B"), text("PLAN C")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("/agents");
        keel.expect("planner  [inherit; all tools]  Plans the work");
        keel.prompt();
        keel.send_line("/teams");
        keel.expect("duo  [planner → planner]  Two plans");
        keel.prompt();
        keel.send_line("/skills");
        keel.expect("release  How to cut a release.");
        keel.prompt();
        keel.send_line("/agent planner");
        keel.expect("usage: /agent NAME TASK");
        keel.prompt();
        keel.send_line("/agent planner Plan the flag");
        keel.expect("[agent planner: 1 step, 20 output tokens]");
        keel.expect("PLAN A");
        keel.prompt();
        keel.send_line("/team duo Plan twice");
        keel.expect("PLAN C");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    assert_eq!(
        bodies[0]["messages"][0]["content"][0]["text"],
        "Plan the flag"
    );
    assert_eq!(
        bodies[2]["messages"][0]["content"][0]["text"],
        "Plan twice\n\n## Output of the previous agent (planner)\n\nPLAN B"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_task_is_announced_and_the_model_reacts() {
    let repo = TempRepo::new();
    let home = Home::new();
    home.write_config(
        "[tasks.runners.quick]\ncommand = [\"sh\", \"-c\", \"sleep 1; echo '{\\\"result\\\": \\\"quick result\\\"}'\", \"{task}\"]\n",
    );
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "start_task",
            json!({"task": "do it", "runner": "quick"}),
        ),
        text("Started it."),
        text("The task gave a quick result."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("start a task");
        keel.expect("Started it.");
        keel.prompt();
        // Nothing typed: when the task ends, keel says so and the model reacts.
        keel.expect("completed (exit 0)");
        keel.expect("The task gave a quick result.");
        keel.prompt();
        keel.send_line("/tasks");
        keel.expect(" completed ");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert_eq!(
        transcript.matches("completed (exit 0)").count(),
        1,
        "the notice is shown once: {transcript}"
    );
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    let last = bodies[2]["messages"].as_array().unwrap();
    // The notice may share a user message with the tool results before it (two user
    // messages in a row are merged), so look at every block.
    let notification = last
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|block| block["text"].as_str().map(str::to_owned))
        .filter(|t| t.starts_with("[notification] Task "))
        .count();
    assert_eq!(notification, 1, "{last:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_commands_and_memory_in_the_repl() {
    let repo = TempRepo::new();
    repo.write(
        ".claude/commands/greet.md",
        "---\ndescription: Greet someone\nargument-hint: NAME\n---\nSay hello to $ARGUMENTS.\n",
    );
    repo.write("CLAUDE.md", "Be brief.\n@docs/style.md\n@~/.ssh/id_rsa\n");
    repo.write("docs/style.md", "Tabs.\n");
    let home = Home::new();
    let server = anthropic_server(&[text("Hello, world.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("/help");
        keel.expect("Greet someone");
        keel.prompt();
        keel.send_line("/memory");
        keel.expect("docs/style.md");
        keel.expect("id_rsa");
        keel.prompt();
        keel.send_line("/greet world");
        keel.expect("Hello, world.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    let bodies = request_bodies(&server).await;
    assert_eq!(
        bodies[0]["messages"][0]["content"][0]["text"],
        "Say hello to world."
    );
}
