//! The interactive prompt's input in a real pseudo-terminal, against wiremock: multi-line
//! input, Tab completion, `@path` mentions (and the paths they refuse), `!cmd`, type-ahead
//! queued while a turn runs (never an approval's answer), `/resume` and the line at exit.
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

/// The text of the first user message of a request body.
fn first_prompt(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The screen from the first prompt on (the banner, which wraps where the temp path makes
/// it, left out), with what varies from run to run replaced: the repository's path, session
/// ids, ages.
fn screen(keel: &Pty, repo: &TempRepo) -> String {
    let path = std::fs::canonicalize(repo.path()).unwrap();
    let screen = keel.screen();
    let from_prompt = screen
        .find("keel> ")
        .map_or(screen.as_str(), |at| &screen[at..]);
    let text = redact(from_prompt, &[(path.as_path(), "[repo]")]);
    let age = regex::Regex::new(r"\d+ (s|min) ago").unwrap();
    age.replace_all(&text, "[age] ago").into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backslash_enter_and_alt_enter_insert_newlines_and_a_paste_keeps_its_own() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("Got four lines.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send("line one\\\r");
        keel.send("line two\x1b\r");
        // Pasted (bracketed paste): its newlines stay, nothing is sent until Enter.
        keel.send("\x1b[200~pasted a\rpasted b\x1b[201~");
        keel.send_line(" and line three");
        keel.expect("Got four lines.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 1, "{transcript}");
    assert_eq!(
        first_prompt(&bodies[0]),
        "line one\nline two\npasted a\npasted b and line three"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tab_completes_commands_and_mentioned_paths_and_the_mention_attaches_the_file() {
    let repo = TempRepo::new();
    repo.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    let home = Home::new();
    let server = anthropic_server(&[text("It returns 42.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript, completion) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send("/ag\t");
        keel.expect("/agents");
        keel.expect("keel> /agent");
        let commands = screen(&keel, &repo);
        keel.ctrl_c();
        keel.send("explain @sr\t");
        keel.expect("@src/");
        let directory = screen(&keel, &repo);
        keel.send("li\t");
        keel.expect("lib.rs");
        let file = screen(&keel, &repo);
        keel.send("\r");
        keel.expect("attached @src/lib.rs (30 B)");
        keel.expect("It returns 42.");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        (
            code,
            transcript,
            format!("{commands}---\n{directory}---\n{file}"),
        )
    });
    assert_eq!(code, 0, "{transcript}");
    insta::assert_snapshot!("completion", completion);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        first_prompt(&bodies[0]),
        "explain @src/lib.rs\n\n<file path=\"src/lib.rs\">\npub fn answer() -> u32 { 42 \
         }\n</file>"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_outside_the_workspace_are_refused_and_nothing_is_sent() {
    let repo = TempRepo::new();
    // A file beside the repository: `../NAME` from inside it.
    let name = format!(
        "keel-outside-{}.txt",
        repo.path().file_name().unwrap().to_string_lossy()
    );
    let secret = repo.path().parent().unwrap().join(&name);
    std::fs::write(&secret, "TOP-SECRET-OUTSIDE\n").unwrap();
    std::os::unix::fs::symlink(&secret, repo.path().join("link.txt")).unwrap();
    let relative = format!("../{name}");
    let home = Home::new();
    let server = anthropic_server(&[text("Fine.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        for mention in ["@/etc/passwd", &format!("@{relative}"), "@link.txt"] {
            keel.send_line(&format!("read {mention}"));
            keel.expect(&format!("refused {mention}: "));
            keel.expect("outside the workspace");
            keel.expect("nothing was sent");
            // The line is back at the prompt, to change: clear it.
            keel.expect(&format!("keel> read {mention}"));
            keel.ctrl_c();
        }
        // Completion lists nothing outside either: not `..`, not the symlink out.
        let before = keel.transcript().len();
        keel.send("@../\t\t");
        keel.send("\x15");
        keel.send("@li\t\t");
        keel.send("\x15");
        keel.send_line("/cost");
        keel.expect("tokens: 0 input");
        let completed = keel.transcript()[before..].to_owned();
        assert!(!completed.contains(&name), "{completed}");
        assert!(!completed.contains("link.txt"), "{completed}");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    std::fs::remove_file(&secret).unwrap();
    assert_eq!(code, 0, "{transcript}");
    assert!(request_bodies(&server).await.is_empty(), "{transcript}");
    assert!(!transcript.contains("TOP-SECRET"), "{transcript}");
    assert!(!transcript.contains("root:"), "{transcript}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bang_line_runs_in_the_sandbox_and_only_a_double_bang_is_sent() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("It said hi.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let outside = repo.path().parent().unwrap().join(format!(
        "keel-bang-{}.txt",
        repo.path().file_name().unwrap().to_string_lossy()
    ));
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("!pwd; echo marker-$((6*7))");
        keel.expect("marker-42");
        keel.prompt();
        keel.send_line(&format!("!echo x > {}", outside.display()));
        keel.expect("[exit code");
        keel.prompt();
        keel.send_line("!!echo hi");
        keel.expect("go with your next message");
        keel.prompt();
        keel.send_line("what did it say?");
        keel.expect("It said hi.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    let cwd = std::fs::canonicalize(repo.path()).unwrap();
    assert!(
        transcript.contains(&format!("{}\n", cwd.display())),
        "{transcript}"
    );
    assert!(!outside.exists(), "a write outside the workspace ran");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 1, "only the prompt was sent: {transcript}");
    let sent = first_prompt(&bodies[0]);
    assert_eq!(
        sent,
        "what did it say?\n\n<shell command=\"echo hi\">\nhi\n[exit code 0]\n</shell>"
    );
    assert!(!sent.contains("marker"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_typed_during_a_turn_is_queued_not_echoed_and_offered_as_the_next_prompt() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = slow_then(
        &text("The first answer."),
        Duration::from_millis(1500),
        &text("The second answer."),
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let runtime = tokio::runtime::Handle::current();
    let (code, transcript, queued) = blocking(|| {
        let mut keel = Pty::spawn(command);
        // As a person's terminal: what is typed is echoed unless keel turns that off.
        keel.echo_on();
        keel.prompt();
        keel.send_line("a slow question");
        assert!(wait_for_request(&server, &runtime), "{}", keel.transcript());
        keel.send_line("and then this");
        keel.expect("queued: and then this");
        keel.send("half typed");
        keel.expect("The first answer.");
        keel.expect("keel> and then this");
        keel.expect("half typed");
        let queued = screen(&keel, &repo);
        keel.send("\r");
        keel.expect("The second answer.");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        (code, transcript, queued)
    });
    assert_eq!(code, 0, "{transcript}");
    insta::assert_snapshot!("queued_type_ahead", queued);
    // Never echoed: the typed text shows only in the queued line and at the next prompt.
    assert_eq!(
        transcript.matches("and then this").count(),
        2,
        "{transcript}"
    );
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let last = bodies[1]["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"][0]["text"], "and then this\nhalf typed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_turn_gives_the_terminal_its_echo_back() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = slow_then(
        &text("Too late."),
        Duration::from_secs(30),
        &text("Unused."),
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let runtime = tokio::runtime::Handle::current();
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.echo_on();
        keel.prompt();
        keel.send_line("a slow question");
        assert!(wait_for_request(&server, &runtime), "{}", keel.transcript());
        keel.send_line("typed meanwhile");
        keel.expect("queued: typed meanwhile");
        keel.ctrl_c();
        keel.expect("Cancelled after 1 model call(s)");
        // The queue came back as the next prompt's text.
        keel.expect("keel> typed meanwhile");
        keel.ctrl_c();
        // While a command runs (no line editor, no turn) the terminal is as keel found it.
        keel.send_line("!sleep 1; echo slept");
        keel.expect("$ sleep 1; echo slept");
        let echoes = keel.echoes();
        keel.expect("slept");
        keel.prompt();
        assert!(
            echoes,
            "the terminal's echo stayed off: {}",
            keel.transcript()
        );
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_ahead_never_answers_an_approval() {
    let repo = TempRepo::new();
    repo.write("build/f.txt", "x\n");
    let home = Home::new();
    let server = slow_then(
        &tool_call("toolu_1", "run_command", json!({"command": "rm -rf build"})),
        Duration::from_millis(1500),
        &text("Kept it."),
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let runtime = tokio::runtime::Handle::current();
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("tidy up");
        assert!(wait_for_request(&server, &runtime), "{}", keel.transcript());
        keel.send_line("y");
        keel.expect("queued: y");
        keel.expect("Allow run_command(rm -rf build)?");
        keel.expect("] ");
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            repo.path().join("build/f.txt").exists(),
            "the type-ahead answered: {}",
            keel.transcript()
        );
        keel.send_line("n");
        keel.expect("Kept it.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert!(
        transcript.contains("typed before the question, not an answer, thrown away: y"),
        "{transcript}"
    );
    assert!(repo.path().join("build/f.txt").exists(), "{transcript}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_lists_this_directory_s_sessions_and_replays_the_picked_one() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "alpha\n");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "read_file", json!({"path": "notes.txt"})),
        text("The notes say alpha."),
        text("Still alpha."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let first_id = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("what do the notes say?");
        keel.expect("The notes say alpha.");
        keel.prompt();
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
        // A UUID makes the line wrap on an 80-column screen.
        let hint = regex::Regex::new(&format!(r"keel resume\s+({SESSION_ID})")).unwrap();
        hint.captures(&transcript)
            .unwrap_or_else(|| panic!("no `keel resume` line at exit: {transcript}"))[1]
            .to_owned()
    });
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript, listed, replayed) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("/resume");
        keel.expect("Resume which? (a number or an id; Enter: none) ");
        let listed = screen(&keel, &repo);
        keel.send_line("1");
        keel.expect("resumed session");
        keel.prompt();
        let replayed = screen(&keel, &repo);
        keel.send_line("and now?");
        keel.expect("Still alpha.");
        keel.prompt();
        // Leaving an untouched session says nothing; this one has turns.
        keel.ctrl_c();
        keel.prompt();
        keel.ctrl_c();
        let (code, transcript) = keel.wait();
        (code, transcript, listed, replayed)
    });
    assert_eq!(code, 0, "{transcript}");
    let hint = regex::Regex::new(&format!(r"keel resume\s+{first_id}")).unwrap();
    assert!(hint.is_match(&transcript), "{transcript}");
    insta::assert_snapshot!("resume_list", listed);
    insta::assert_snapshot!("resume_replay", replayed);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    // The resumed session went on: its history came along.
    let sent = bodies[2]["messages"].to_string();
    assert!(sent.contains("what do the notes say?"), "{sent}");
    assert!(sent.contains("and now?"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_a_session_without_turns_prints_no_resume_line() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("/exit");
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert!(!transcript.contains("keel resume"), "{transcript}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_completes_a_skill_name_and_shows_that_skill() {
    let repo = TempRepo::new();
    repo.write(
        ".keel/skills/release/SKILL.md",
        "---\ndescription: Cut a release\n---\nBump the version, then tag it.\n",
    );
    let home = Home::new();
    let server = anthropic_server(&[]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send("/skills rel\t");
        keel.expect("/skills release");
        keel.send("\r");
        keel.expect("Bump the version, then tag it.");
        keel.prompt();
        keel.send_line("/skills nope");
        keel.expect("nope");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert!(
        transcript.contains("release — Cut a release"),
        "{transcript}"
    );
    let after = transcript.split("/skills nope").nth(1).unwrap();
    assert!(
        after.contains("release"),
        "the known skills are named: {after}"
    );
    // Only the listing asked for anything: no model request was made.
    assert!(request_bodies(&server).await.is_empty());
}
