//! Delegation through the `keel` binary: the tools exec gets, the code tool's log under
//! `$KEEL_HOME/logs`, sub-agents, teams and skills, against wiremock in temp repos.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::request_bodies;
use serde_json::{Value, json};

fn define(repo: &TempRepo) {
    repo.write(
        ".keel/agents/planner.md",
        "---\nname: planner\ndescription: Plans the work\ntools: [grep]\nmodel: fast\n---\nYou plan.\n",
    );
    repo.write(
        ".keel/agents/writer.md",
        "---\ndescription: Writes the code\n---\nYou write.\n",
    );
    repo.write(
        ".keel/agents/broken.md",
        "---\ndescription: [oops\n---\nBody\n",
    );
    repo.write(
        ".keel/teams/ship.yaml",
        "name: ship\ndescription: Plan then write\nagents: [planner, ghost, writer]\n",
    );
    repo.write(
        ".keel/skills/release/SKILL.md",
        "---\nname: release\ndescription: How to cut a release\n---\nBump the version, tag, push.\n",
    );
}

fn tools_of(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn system_text(body: &Value) -> String {
    match &body["system"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| b["text"].as_str().unwrap_or_default())
            .collect(),
        _ => String::new(),
    }
}

#[tokio::test]
async fn exec_has_the_delegation_tools_and_the_skills_index_unless_told_not_to() {
    let repo = TempRepo::new();
    define(&repo);
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "use_skill", json!({"name": "release"})),
        text("Done."),
        text("Plain."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "Cut a release"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    // The malformed definition is a warning naming the file, and the run goes on.
    let err = stderr(&output);
    assert!(err.contains("keel: warning: agent skipped: "), "{err}");
    assert!(err.contains(".keel/agents/broken.md"), "{err}");
    let bodies = request_bodies(&server).await;
    let tools = tools_of(&bodies[0]);
    for name in ["code", "spawn_agent", "run_team", "use_skill"] {
        assert!(
            tools.contains(&name.to_owned()),
            "{name} missing from {tools:?}"
        );
    }
    let system = system_text(&bodies[0]);
    assert!(
        system.contains("- release: How to cut a release"),
        "{system}"
    );
    let result = &bodies[1]["messages"][2]["content"][0]["content"];
    assert!(
        result
            .as_str()
            .unwrap()
            .contains("Bump the version, tag, push."),
        "{result}"
    );

    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "--no-delegation", "Plain"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let bodies = request_bodies(&server).await;
    let tools = tools_of(&bodies[2]);
    assert!(
        !tools.iter().any(|t| t == "code" || t == "use_skill"),
        "{tools:?}"
    );
    assert!(!system_text(&bodies[2]).contains("How to cut a release"));
}

#[tokio::test]
async fn the_code_tool_logs_under_keel_home() {
    let repo = TempRepo::new();
    repo.write("a.txt", "alpha\n");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "code",
            json!({"task": "Read a.txt", "cwd": repo.path(), "model": "small"}),
        ),
        tool_call("toolu_c1", "read_file", json!({"path": "a.txt"})),
        text("It says alpha."),
        text("The delegate says alpha."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "Delegate it"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "The delegate says alpha.\n");
    let bodies = request_bodies(&server).await;
    assert_eq!(
        bodies[1]["model"], "claude-haiku-5-5",
        "small is the small model"
    );
    let logs: Vec<_> = std::fs::read_dir(home.keel_home().join("logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(logs.len(), 1);
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(log.starts_with("# Code Session "), "{log}");
    assert!(log.contains("- model: claude-haiku-5-5"), "{log}");
    assert!(log.contains("It says alpha."), "{log}");
    let result = bodies[3]["messages"][2]["content"][0]["content"]
        .as_str()
        .unwrap();
    assert!(
        result.ends_with(&format!("Log: {}", logs[0].display())),
        "{result}"
    );
}

#[tokio::test]
async fn agents_teams_and_skills_are_listed() {
    let repo = TempRepo::new();
    define(&repo);
    let home = Home::new();
    let server = anthropic_server(&[]).await;
    let mut lists = Vec::new();
    for command_name in ["agents", "teams", "skills"] {
        let mut command = home.keel_anthropic(&server);
        command.current_dir(repo.path()).arg(command_name);
        let output = run(command).await;
        assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
        lists.push(format!("$ keel {command_name}\n{}", stdout(&output)));
    }
    insta::assert_snapshot!(lists.join(""), @r"
    $ keel agents
    planner  [fast; grep]  Plans the work
    writer  [inherit; all tools]  Writes the code
    $ keel teams
    ship  [planner → ghost → writer]  Plan then write
    $ keel skills
    release  How to cut a release
    ");
    assert!(
        request_bodies(&server).await.is_empty(),
        "listing calls no model"
    );
}

#[tokio::test]
async fn keel_agent_runs_one_sub_agent_with_only_its_task() {
    let repo = TempRepo::new();
    define(&repo);
    let home = Home::new();
    let server = anthropic_server(&[text("Step 1: grep. Step 2: edit.")]).await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["agent", "planner", "Plan a --verbose flag"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Step 1: grep. Step 2: edit.\n");
    assert!(stderr(&output).contains("[agent planner: 1 step, 20 output tokens]"));
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(system_text(&bodies[0]), "You plan.");
    assert_eq!(bodies[0]["model"], "claude-haiku-5-5");
    assert_eq!(tools_of(&bodies[0]), ["grep", "read_file"]);
    assert_eq!(bodies[0]["messages"].as_array().unwrap().len(), 1);

    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["agent", "nobody", "x"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).ends_with("keel: no agent named `nobody`; known: planner, writer\n"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn keel_team_runs_the_pipeline_and_reports_the_missing_agent() {
    let repo = TempRepo::new();
    define(&repo);
    let home = Home::new();
    let server = anthropic_server(&[text("PLAN"), text("CODE")]).await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["team", "ship", "Add a flag"]);
    let output = run(command).await;
    assert_eq!(
        output.status.code(),
        Some(1),
        "a missing agent fails the team"
    );
    assert_eq!(stdout(&output), "CODE\n");
    let err = stderr(&output);
    assert!(
        err.contains("- ghost: error: no agent named `ghost`"),
        "{err}"
    );
    let bodies = request_bodies(&server).await;
    assert_eq!(
        bodies[1]["messages"][0]["content"][0]["text"],
        "Add a flag\n\n## Output of the previous agent (planner)\n\nPLAN"
    );
}
