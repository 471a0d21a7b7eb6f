//! What each facade feature adds, checked in whatever build runs this file: CI runs it with
//! the default features and again with `--no-default-features`, so both sides of every
//! switch are seen.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use keel::prelude::*;
use keel_provider::ContentBlock;
use keel_test_support::git::TempRepo;
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

fn build(provider: Arc<ScriptedProvider>, repo: &TempRepo, home: &std::path::Path) -> CodingAgent {
    CodingAgent::builder(provider)
        .cwd(repo.path())
        .home(home)
        .approver(AllowAll)
        .build()
        .unwrap()
}

#[test]
fn the_tools_offered_are_the_features_built() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let agent = build(Arc::new(ScriptedProvider::new()), &repo, home.path());
    let names = agent.agent().tools().names();
    for tool in ["git_status", "git_diff", "git_commit"] {
        assert_eq!(
            names.contains(&tool),
            cfg!(feature = "git"),
            "{tool}: {names:?}"
        );
    }
    for tool in ["code", "spawn_agent", "run_team"] {
        assert_eq!(
            names.contains(&tool),
            cfg!(feature = "delegation"),
            "{tool}: {names:?}"
        );
    }
    // What every build has: the file, search and shell tools, and skills.
    for tool in [
        "read_file",
        "list_directory",
        "grep",
        "glob",
        "run_command",
        "write_file",
        "patch_file",
        "use_skill",
    ] {
        assert!(names.contains(&tool), "{tool}: {names:?}");
    }
    #[cfg(feature = "snapshots")]
    assert!(agent.snapshots().is_some(), "{:?}", agent.warnings());
}

#[tokio::test]
async fn the_prompt_tells_the_git_state_only_when_it_was_read() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let provider = Arc::new(ScriptedProvider::new().then_text("ok"));
    let agent = build(provider.clone(), &repo, home.path());
    let mut session = agent.session().unwrap();
    assert_eq!(session.run("hello").await.stop, Stop::Completed);
    let system = provider.requests()[0].system.clone().unwrap();
    let git_line = system
        .lines()
        .find(|line| line.starts_with("- Git: "))
        .unwrap()
        .to_owned();
    if cfg!(feature = "git") {
        assert!(git_line.starts_with("- Git: branch "), "{git_line}");
    } else {
        // Never "not a git repository" for a repository whose state was not read.
        assert_eq!(
            git_line,
            "- Git: HEAD unknown; state not read (keel was built without its `git` feature)"
        );
    }
}

#[tokio::test]
async fn skills_are_offered_and_indexed_in_the_prompt_in_every_build() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let skill = home.path().join("skills/release/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: release\ndescription: Cut a release.\n---\nTag it.\n",
    )
    .unwrap();
    let provider = Arc::new(ScriptedProvider::new().then_text("ok"));
    let agent = build(provider.clone(), &repo, home.path());
    let mut session = agent.session().unwrap();
    assert_eq!(session.run("hello").await.stop, Stop::Completed);
    let request = &provider.requests()[0];
    let system = request.system.clone().unwrap();
    assert!(system.contains("\n\n# Skills\n"), "{system}");
    assert!(system.contains("- release: Cut a release."), "{system}");
    assert!(request.tools.iter().any(|tool| tool.name == "use_skill"));
}

#[tokio::test]
async fn a_command_runs_confined_or_not_at_all() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call(
                "call_1",
                "run_command",
                json!({"command": "touch made.txt"}),
            )
            .then_text("done"),
    );
    let agent = build(provider.clone(), &repo, home.path());
    assert_eq!(agent.policies().sandbox().mode, SandboxMode::WorkspaceWrite);
    let mut session = agent.session().unwrap();
    assert_eq!(session.run("make a file").await.stop, Stop::Completed);
    let result = provider.requests()[1]
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .find_map(|block| match block {
            ContentBlock::ToolResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    let made = repo.path().join("made.txt").exists();
    if cfg!(feature = "confine") {
        assert!(made && !result.1, "{result:?}");
    } else {
        // Without Landlock and seccomp in the build the command is refused, never run bare.
        assert!(!made && result.1, "{result:?}");
        assert!(
            result
                .0
                .contains("keel was built without kernel confinement"),
            "{}",
            result.0
        );
    }
}

/// Claude Code's user folder, given to the builder: its agents are offered (the project's
/// override them), its skills are indexed, and a sub-agent's `model: haiku` is the model id
/// on the wire, with the skill it names in its system prompt.
#[cfg(feature = "delegation")]
#[tokio::test]
async fn claude_codes_user_folder_gives_agents_and_skills() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let claude = tempfile::tempdir().unwrap();
    let write = |path: std::path::PathBuf, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        claude.path().join("agents/helper.md"),
        "---\nname: helper\ndescription: Helps\nmodel: haiku\nskills: notes\n---\nYou help.\n",
    );
    write(
        claude.path().join("skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: Take notes.\nallowed-tools: Read\n---\nWrite notes.\n",
    );
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call(
                "toolu_1",
                "spawn_agent",
                json!({"agent": "helper", "task": "Help"}),
            )
            .then_text("Helped.")
            .then_text("Done."),
    );
    let agent = CodingAgent::builder(provider.clone())
        .cwd(repo.path())
        .home(home.path())
        .claude_home(claude.path())
        .approver(AllowAll)
        .build()
        .unwrap();
    let mut session = agent.session().unwrap();
    assert_eq!(session.run("hello").await.stop, Stop::Completed);
    let requests = provider.requests();
    assert!(
        requests[0]
            .system
            .clone()
            .unwrap()
            .contains("- notes: Take notes.")
    );
    assert_eq!(requests[1].model, "claude-haiku-5-5");
    assert_eq!(
        requests[1].system.as_deref(),
        Some("You help.\n\n# Skill: notes\n\nWrite notes.")
    );
}
