//! `keel exec` run as a process against wiremock, in temporary git repositories.

mod support;

use keel_test_support::git::TempRepo;
use serde_json::{Value, json};
use support::*;

#[tokio::test]
async fn text_output_prints_the_answer_and_one_progress_line_per_call() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "alpha\nbeta\n");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "read_file", json!({"path": "notes.txt"})),
        text("The notes say alpha and beta."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "What do the notes say?"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "The notes say alpha and beta.\n");
    let progress = redact(&stderr(&output), &[]);
    insta::assert_snapshot!(progress, @"✓ read_file(notes.txt) · 2 lines · [time]");
}
