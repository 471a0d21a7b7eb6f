//! The builder loads the user's memory files (`~/.claude/CLAUDE.md`, `$KEEL_HOME/AGENTS.md`)
//! before the project's, reports what it loaded and skipped, and warns about refusals.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use keel::CodingAgent;
use keel_engine::MemorySource;
use keel_test_support::git::TempRepo;
use keel_test_support::scripted::ScriptedProvider;

#[tokio::test]
async fn the_prompt_holds_the_users_and_the_projects_memory_files() {
    let repo = TempRepo::new();
    let dir = tempfile::tempdir().unwrap();
    let user = std::fs::canonicalize(dir.path()).unwrap();
    let keel_home = user.join(".keel");
    std::fs::create_dir_all(user.join(".claude")).unwrap();
    std::fs::create_dir_all(user.join(".ssh")).unwrap();
    std::fs::create_dir_all(&keel_home).unwrap();
    std::fs::write(user.join(".claude/CLAUDE.md"), "CLAUDE-USER\n@~/notes.md\n").unwrap();
    std::fs::write(user.join("notes.md"), "USER-NOTES\n").unwrap();
    std::fs::write(keel_home.join("AGENTS.md"), "KEEL-USER\n").unwrap();
    std::fs::write(user.join(".ssh/id_rsa"), "SSH-SECRET\n").unwrap();
    repo.write("AGENTS.md", "PROJECT-AGENTS\n");
    repo.write("CLAUDE.md", "PROJECT-CLAUDE\n@~/.ssh/id_rsa\n");

    let model = Arc::new(ScriptedProvider::new().then_text("ok"));
    let agent = CodingAgent::builder(model.clone())
        .cwd(repo.path())
        .home(&keel_home)
        .user_home(&user)
        .build()
        .unwrap();

    let memory = agent.memory();
    let loaded: Vec<_> = memory
        .loaded
        .iter()
        .map(|f| (f.path.clone(), f.source))
        .collect();
    assert_eq!(
        loaded,
        vec![
            (user.join(".claude/CLAUDE.md"), MemorySource::User),
            (user.join("notes.md"), MemorySource::Import),
            (keel_home.join("AGENTS.md"), MemorySource::User),
            ("AGENTS.md".into(), MemorySource::Project),
            ("CLAUDE.md".into(), MemorySource::Project),
        ]
    );
    assert_eq!(memory.skipped.len(), 1, "{memory}");
    assert!(
        agent
            .warnings()
            .iter()
            .any(|w| w.starts_with("memory file ~/.ssh/id_rsa (imported by CLAUDE.md): refused")),
        "{:?}",
        agent.warnings()
    );

    let mut session = agent.session().unwrap();
    session.run("hi").await;
    let system = model.requests()[0].system.clone().unwrap_or_default();
    let order: Vec<_> = [
        "CLAUDE-USER",
        "USER-NOTES",
        "KEEL-USER",
        "PROJECT-AGENTS",
        "PROJECT-CLAUDE",
    ]
    .iter()
    .map(|text| {
        system
            .find(text)
            .unwrap_or_else(|| panic!("{text} missing"))
    })
    .collect();
    assert!(order.is_sorted(), "{order:?}");
    assert!(!system.contains("SSH-SECRET"));
}

#[test]
fn a_replaced_prompt_reports_no_memory() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    repo.write("AGENTS.md", "rules\n");
    let agent = CodingAgent::builder(Arc::new(ScriptedProvider::new()))
        .cwd(repo.path())
        .home(home.path())
        .user_home(home.path())
        .system_prompt("Be brief.")
        .build()
        .unwrap();
    assert!(agent.memory().loaded.is_empty());
}
