//! Consent that means what it says, in a real pseudo-terminal: "always" covers the approved
//! command only, keys typed before a question never answer it, Ctrl-C at a question ends the
//! turn, and an edit asked about is shown first.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::pty;

use std::time::Duration;

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::request_bodies;
use pty::Pty;
use serde_json::{Value, json};

/// The `tool_result` blocks of the last request, by call id: (is_error, text).
fn results(body: &Value) -> Vec<(String, bool, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .map(|block| {
            (
                block["tool_use_id"].as_str().unwrap().to_owned(),
                block["is_error"] == true,
                block["content"].to_string(),
            )
        })
        .collect()
}

fn rm(id: &str, target: &str) -> keel::provider::ToolUseResponse {
    tool_call(
        id,
        "run_command",
        json!({"command": format!("rm -rf {target}")}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_covers_the_approved_command_only_and_the_question_says_so() {
    let repo = TempRepo::new();
    for dir in ["build", "build2", "keep"] {
        repo.write(&format!("{dir}/f.txt"), "x\n");
    }
    let home = Home::new();
    let server = anthropic_server(&[
        rm("toolu_1", "build"),
        // The same command again: allowed by the "always".
        rm("toolu_2", "build"),
        // Another command of the same tool, destructive too: asked again.
        rm("toolu_3", "build2"),
        // The approved command chained with another: asked again.
        tool_call(
            "toolu_4",
            "run_command",
            json!({"command": "rm -rf build; rm -rf keep"}),
        ),
        text("Done."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("clean up");
        let question = keel.expect("] ");
        // The question is wrapped on words at the terminal's width.
        let question = question.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            question.contains("Allow run_command(rm -rf build)?")
                && question.contains(
                    "[y/N/a(lways): allow `rm -rf build` (this exact command) in this session"
                ),
            "the question says what always covers: {question}"
        );
        keel.send_line("a");
        let question = keel.expect("] ");
        assert!(
            question.contains("rm -rf build2"),
            "a different command is asked about: {question}"
        );
        keel.send_line("n");
        let question = keel.expect("] ");
        assert!(
            question.contains("rm -rf build; rm -rf keep"),
            "a chained command is asked about: {question}"
        );
        keel.send_line("n");
        keel.expect("Done.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert!(!repo.path().join("build").exists());
    assert!(repo.path().join("build2/f.txt").exists(), "{transcript}");
    assert!(repo.path().join("keep/f.txt").exists(), "{transcript}");
    let bodies = request_bodies(&server).await;
    let results = results(bodies.last().unwrap());
    let denied: Vec<&str> = results
        .iter()
        .filter(|(_, is_error, _)| *is_error)
        .map(|(id, _, _)| id.as_str())
        .collect();
    assert_eq!(denied, ["toolu_3", "toolu_4"], "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_typed_before_a_question_never_answer_it() {
    let repo = TempRepo::new();
    repo.write("build/f.txt", "x\n");
    let home = Home::new();
    // The model "thinks" for a while before asking to delete build/.
    let server = slow_then(
        &rm("toolu_1", "build"),
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
        let asked = wait_for_request(&server, &runtime);
        assert!(asked, "keel never asked the model: {}", keel.transcript());
        // Typed while the model works, before any question is on the screen.
        keel.send_line("y");
        keel.expect("Allow run_command(rm -rf build)?");
        keel.expect("] ");
        // The typed-ahead "y" did not answer: the question still waits. Answer no.
        std::thread::sleep(Duration::from_millis(300));
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
    assert!(repo.path().join("build/f.txt").exists(), "{transcript}");
    let bodies = request_bodies(&server).await;
    let results = results(bodies.last().unwrap());
    assert!(
        results[0].1 && results[0].2.contains("declined"),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_a_question_ends_the_whole_turn() {
    let repo = TempRepo::new();
    repo.write("build/f.txt", "x\n");
    let home = Home::new();
    let server = anthropic_server(&[
        rm("toolu_1", "build"),
        text("This reply is never asked for."),
        text("The next turn."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("delete build");
        keel.expect("Allow run_command(rm -rf build)?");
        keel.expect("] ");
        keel.ctrl_c();
        keel.expect("Cancelled");
        keel.prompt();
        keel.send_line("what now?");
        keel.expect("This reply is never asked for.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert!(repo.path().join("build/f.txt").exists(), "{transcript}");
    let bodies = request_bodies(&server).await;
    // The cancelled turn made no second request: the next request is the next prompt's.
    assert_eq!(bodies.len(), 2, "{transcript}");
    let results = results(&bodies[1]);
    assert!(
        results[0].1 && results[0].2.contains("interrupted"),
        "{results:?}"
    );
    assert!(bodies[1]["messages"].to_string().contains("what now?"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_of_keels_config_is_shown_and_asked_every_time() {
    let repo = TempRepo::new();
    let home = Home::new();
    let write = |id: &str, content: &str| {
        tool_call(
            id,
            "write_file",
            json!({"path": ".keel/config.toml", "content": content}),
        )
    };
    let server = anthropic_server(&[
        write("toolu_1", "approvals = \"allow\"\n"),
        write("toolu_2", "sandbox = \"full-access\"\n"),
        text("Configured."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        keel.prompt();
        keel.send_line("configure keel");
        let before = keel.expect("[y/N] ");
        assert!(
            before.contains("+approvals = \"allow\""),
            "the change is shown before the question: {before}"
        );
        assert!(
            before.contains("Allow write_file(.keel/config.toml)?"),
            "{before}"
        );
        // "a" is not offered, and does not mean always here.
        keel.send_line("a");
        let before = keel.expect("[y/N] ");
        assert!(before.contains("+sandbox = \"full-access\""), "{before}");
        keel.send_line("n");
        keel.expect("Configured.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert!(!repo.path().join(".keel/config.toml").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_asks_once_whether_to_trust_a_project_and_records_the_answer() {
    let repo = TempRepo::new();
    repo.write("build/f.txt", "x\n");
    repo.write(".keel/config.toml", "approvals = \"allow\"\n");
    let home = Home::new();
    // Trusted: approvals = "allow" applies, so the deletion runs without a question.
    let server = anthropic_server(&[rm("toolu_1", "build"), text("Deleted.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path());
    let (code, transcript) = blocking(|| {
        let mut keel = Pty::spawn(command);
        let question = keel.expect("Trust this project? [y/N] ");
        assert!(
            question.contains(".keel/config.toml sets approvals"),
            "the question names the file and its keys: {question}"
        );
        keel.send_line("y");
        keel.prompt();
        keel.send_line("delete build");
        keel.expect("Deleted.");
        keel.prompt();
        keel.ctrl_d();
        keel.wait()
    });
    assert_eq!(code, 0, "{transcript}");
    assert!(!repo.path().join("build").exists(), "{transcript}");
    assert!(!transcript.contains("Allow run_command"), "{transcript}");
    let user_config = std::fs::read_to_string(home.keel_home().join("config.toml")).unwrap();
    assert!(
        user_config.contains("trusted = true") && user_config.contains("config_hash = \"sha256:"),
        "{user_config}"
    );

    // Edited since: asked again; "n" is recorded and the config's keys are ignored.
    repo.write(
        ".keel/config.toml",
        "approvals = \"allow\"\nmodel = \"m\"\n",
    );
    repo.write("build/f.txt", "x\n");
    let ask_again = |server: &wiremock::MockServer, answer: Option<&'static str>| {
        let mut command = home.keel_anthropic(server);
        command.current_dir(repo.path());
        blocking(move || {
            let mut keel = Pty::spawn(command);
            if let Some(answer) = answer {
                let question = keel.expect("Trust this project? [y/N] ");
                assert!(
                    question.contains("changed since you trusted it"),
                    "{question}"
                );
                keel.send_line(answer);
            }
            keel.expect("ignored approvals");
            keel.prompt();
            keel.send_line("delete build");
            keel.expect("Allow run_command(rm -rf build)?");
            keel.expect("] ");
            keel.send_line("n");
            keel.expect("Kept.");
            keel.prompt();
            keel.ctrl_d();
            keel.wait()
        })
    };
    let server = anthropic_server(&[rm("toolu_1", "build"), text("Kept.")]).await;
    let (code, transcript) = ask_again(&server, Some("n"));
    assert_eq!(code, 0, "{transcript}");
    // The same files again: not asked, still not trusted.
    let server = anthropic_server(&[rm("toolu_1", "build"), text("Kept.")]).await;
    let (code, transcript) = ask_again(&server, None);
    assert_eq!(code, 0, "{transcript}");
    assert!(!transcript.contains("Trust this project?"), "{transcript}");
    assert!(repo.path().join("build/f.txt").exists());
}
