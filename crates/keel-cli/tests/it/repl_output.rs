//! What the interactive `keel` shows of answers and tool calls, read off the screen of a real
//! pseudo-terminal (80×24, colours on) against wiremock: Markdown drawn and wrapped on words,
//! a failed command's last lines, an empty output, `/last`, and escape sequences from the
//! model kept inert.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::pty;

use std::process::Command;

use crate::support::*;
use keel_test_support::git::TempRepo;
use pty::{COLUMNS, Pty};
use serde_json::json;

/// `keel -y` against `server` in `repo`, colours on (as on a person's terminal).
fn keel(home: &Home, server: &wiremock::MockServer, repo: &TempRepo) -> Command {
    let mut command = home.keel_anthropic(server);
    command
        .current_dir(repo.path())
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env("PAGER", "cat")
        .arg("-y");
    command
}

/// The screen from the row holding `from` down, times redacted: what a turn drew.
fn screen_from(keel: &Pty, from: &str) -> String {
    redact(&keel.screen_from(from), &[])
}

/// An answer in Markdown.
const ANSWER: &str = "## Plan\n\nThe fix is **bold words** and a `call()`.\n\n\
- first step\n  - nested step\n2. numbered\n\n```python\ndef main():\n    return 1\n```\nDone.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_drawn_as_markdown() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text(ANSWER)]).await;
    let command = keel(&home, &server, &repo);
    blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("how do I fix it?");
        keel.expect("Done.");
        keel.prompt();
        insta::assert_snapshot!(screen_from(&keel, "keel> how do I fix it?"), @r"
        [allow] keel> how do I fix it?
        Plan

        The fix is bold words and a call().

        • first step
          ◦ nested step
        2. numbered

        def main():
            return 1
        Done.
        [time] · 100 in / 20 out tokens · $0.0006 · context 1% of 200k
        [allow] keel>
        ");
        let bold = keel.screen_cell_of("bold words").unwrap();
        assert!(bold.bold(), "strong text is bold");
        assert!(
            keel.screen_cell_of("Plan").unwrap().bold(),
            "a heading is bold"
        );
        assert!(!keel.screen_cell_of("The fix").unwrap().bold());
        let code = keel.screen_cell_of("def").unwrap();
        assert_ne!(code.fgcolor(), vt100::Color::Default, "code is highlighted");
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_paragraph_wraps_on_words_at_the_terminal_width() {
    let repo = TempRepo::new();
    let home = Home::new();
    let words: Vec<String> = (0..60).map(|n| format!("word{n}")).collect();
    let paragraph = format!("{} end.", words.join(" "));
    let server = anthropic_server(&[text(&paragraph)]).await;
    let command = keel(&home, &server, &repo);
    blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("talk");
        keel.expect("end.");
        keel.prompt();
        let screen = screen_from(&keel, "word0 ");
        let rows: Vec<&str> = screen
            .lines()
            // Up to the status line after the turn (then the prompt).
            .take_while(|row| !row.contains(" tokens · ") && !row.contains("keel>"))
            .collect();
        assert!(rows.len() >= 5, "{screen}");
        for row in &rows {
            assert!(row.chars().count() <= usize::from(COLUMNS), "{row}");
            // Every row starts and ends on a whole word.
            for word in row.split(' ') {
                assert!(
                    word == "end." || words.iter().any(|w| w == word),
                    "{word:?} is cut in {screen}"
                );
            }
        }
        assert!(
            rows.iter().any(|row| row.chars().count() > 70),
            "rows are filled: {screen}"
        );
        keel.ctrl_d();
        keel.wait();
    });
}

/// A script printing a traceback of 8 lines, then failing.
const FAILING: &str = "printf 'Traceback (most recent call last):\\n  File \"t.py\", line 9\\n    \
run()\\n  File \"t.py\", line 5, in run\\n    check()\\n  File \"t.py\", line 2, in check\\n    \
assert 1 == 2\\nAssertionError: one is not two\\n'\nexit 3\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_command_shows_its_last_lines_and_last_shows_all() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "run_command", json!({"command": "true"})),
        tool_call("toolu_2", "run_command", json!({"command": "sh fail.sh"})),
        text("The test failed."),
    ])
    .await;
    repo.write("fail.sh", FAILING);
    let command = keel(&home, &server, &repo);
    blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("run the tests");
        keel.expect("The test failed.");
        keel.prompt();
        let screen = screen_from(&keel, "keel> run the tests");
        insta::assert_snapshot!(screen, @r#"
        [allow] keel> run the tests
        ✓ run_command(true) · no output · [time]
        ✗ run_command(sh fail.sh) · exit code 3 · 8 lines · [time]
              File "t.py", line 5, in run
                check()
              File "t.py", line 2, in check
                assert 1 == 2
            AssertionError: one is not two
        The test failed.
        [time] · 300 in / 60 out tokens · $0.0018 · context 1% of 200k
        [allow] keel>
        "#);
        assert!(!screen.contains("(no output)"), "{screen}");
        keel.send_line("/last");
        keel.expect("AssertionError: one is not two");
        keel.prompt();
        let shown = screen_from(&keel, "keel> /last");
        assert!(
            shown.contains("Traceback (most recent call last):") && shown.contains("[exit code 3]"),
            "/last shows the whole output: {shown}"
        );
        keel.ctrl_d();
        let (code, transcript) = keel.wait();
        assert_eq!(code, 0, "{transcript}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_in_an_answer_stay_inert() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text(
        "before\x1b[2J \x1b[31mred? &#27;[32mgreen? `\x1b[1m` \x1b]0;title\x07 after",
    )])
    .await;
    let command = keel(&home, &server, &repo);
    blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("say it");
        keel.expect("after");
        keel.prompt();
        let screen = keel.screen();
        assert!(
            screen.contains("keel "),
            "the banner was not cleared: {screen}"
        );
        // Each escape became a replacement character (the emulator draws it as nothing).
        let printed = keel.transcript();
        assert!(
            printed.contains("before\u{FFFD}[2J \u{FFFD}[31mred? \u{FFFD}[32mgreen?"),
            "{printed:?}"
        );
        let red = keel.screen_cell_of("red?").unwrap();
        assert_eq!(red.fgcolor(), vt100::Color::Default, "{screen}");
        let green = keel.screen_cell_of("green?").unwrap();
        assert_eq!(green.fgcolor(), vt100::Color::Default, "{screen}");
        insta::assert_snapshot!(screen_from(&keel, "keel> say it"), @r"
        [allow] keel> say it
        before[2J [31mred? [32mgreen? [1m ]0;title after
        [time] · 100 in / 20 out tokens · $0.0006 · context 1% of 200k
        [allow] keel>
        ");
        keel.ctrl_d();
        keel.wait();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_the_answer_is_printed_as_written_and_last_inline() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "run_command",
            json!({"command": "echo one; echo two"}),
        ),
        text(ANSWER),
    ])
    .await;
    let mut command = keel(&home, &server, &repo);
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = command.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"how do I fix it?\n/last\n").unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let out = stdout(&output);
    assert!(
        out.contains(ANSWER),
        "the Markdown source, unrendered: {out}"
    );
    assert!(!out.contains('\x1b'), "no colours: {out:?}");
    assert!(
        out.contains("── run_command(echo one; echo two) ──\none\ntwo\n[exit code 0]"),
        "/last prints inline: {out}"
    );
}
