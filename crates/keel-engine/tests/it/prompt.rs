//! The system prompt and the project context it is built from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use keel_engine::memory::MemorySource;
use keel_engine::prompt::{
    GitSummary, InstructionFile, LEAN_SYSTEM_PROMPT, MAX_INSTRUCTION_CHARS, ProjectContext,
    SYSTEM_PROMPT, gather_context, lean_system_prompt, system_prompt,
};
use keel_sandbox::{LEAN_TOOLS, PathSandbox, SandboxPolicy, default_tools, lean_tools};
use keel_test_support::git::TempRepo;

#[test]
fn system_prompt_is_concise_and_names_the_builtin_tools() {
    assert!(
        SYSTEM_PROMPT.len() <= 2_500,
        "SYSTEM_PROMPT is {} bytes",
        SYSTEM_PROMPT.len()
    );
    for tool in [
        "read_file",
        "write_file",
        "patch_file",
        "list_directory",
        "grep",
        "glob",
        "run_command",
        "git_status",
        "git_diff",
        "git_commit",
    ] {
        assert!(SYSTEM_PROMPT.contains(tool), "{tool} is not mentioned");
    }
}

#[test]
fn the_lean_prompt_is_short_and_names_only_the_lean_tools() {
    assert!(
        LEAN_SYSTEM_PROMPT.len() <= 700,
        "LEAN_SYSTEM_PROMPT is {} bytes",
        LEAN_SYSTEM_PROMPT.len()
    );
    for tool in ["patch_file", "write_file", "run_command"] {
        assert!(LEAN_SYSTEM_PROMPT.contains(tool), "{tool} is not mentioned");
    }
    // A tool the lean profile leaves out would be a call to nothing.
    for tool in [
        "glob",
        "git_status",
        "git_diff",
        "git_commit",
        "spawn_agent",
        "use_skill",
    ] {
        assert!(!LEAN_TOOLS.contains(&tool));
        assert!(!LEAN_SYSTEM_PROMPT.contains(tool), "{tool} is mentioned");
    }
    // The project's instructions and the environment are kept whole.
    let context = ProjectContext {
        instructions: vec![InstructionFile::new("AGENTS.md", "Run `make check`.")],
        cwd: "/work/app".into(),
        ..ProjectContext::default()
    };
    let lean = lean_system_prompt(&context);
    let full = system_prompt(&context);
    assert_eq!(
        lean.strip_prefix(LEAN_SYSTEM_PROMPT),
        full.strip_prefix(SYSTEM_PROMPT)
    );
    assert!(lean.contains("Run `make check`."), "{lean}");
}

#[test]
fn agents_md_and_claude_md_are_both_loaded() {
    let repo = TempRepo::new();
    repo.write("AGENTS.md", "use agents\n");
    repo.write("CLAUDE.md", "use claude\n");
    let context = gather_context(&repo.path(), &repo.path());
    assert_eq!(
        context.instructions,
        vec![
            InstructionFile::new("AGENTS.md", "use agents\n"),
            InstructionFile::new("CLAUDE.md", "use claude\n"),
        ]
    );
    assert_eq!(context.cwd, repo.path());
    assert!(context.date.is_some());
    assert!(context.skipped_instructions.is_empty());
}

#[test]
fn claude_md_is_used_without_agents_md() {
    let repo = TempRepo::new();
    repo.write("CLAUDE.md", "use claude\n");
    let context = gather_context(&repo.path(), &repo.path());
    assert_eq!(context.instructions.len(), 1);
    assert_eq!(context.instructions[0].path, PathBuf::from("CLAUDE.md"));
}

#[test]
fn invalid_utf8_is_read_lossily_not_skipped() {
    let repo = TempRepo::new();
    std::fs::write(repo.path().join("AGENTS.md"), b"caf\xe9 rules\n").unwrap();
    let context = gather_context(&repo.path(), &repo.path());
    assert_eq!(context.instructions.len(), 1);
    assert_eq!(context.instructions[0].path, PathBuf::from("AGENTS.md"));
    assert_eq!(context.instructions[0].content, "caf\u{fffd} rules\n");
}

#[test]
fn the_working_directory_adds_its_own_file() {
    let repo = TempRepo::new();
    repo.write("AGENTS.md", "root rules\n");
    repo.write("crates/app/CLAUDE.md", "app rules\n");
    let cwd = repo.path().join("crates/app");
    let context = gather_context(&repo.path(), &cwd);
    let paths: Vec<_> = context
        .instructions
        .iter()
        .map(|f| f.path.clone())
        .collect();
    assert_eq!(
        paths,
        vec![
            PathBuf::from("AGENTS.md"),
            PathBuf::from("crates/app/CLAUDE.md")
        ]
    );
    assert_eq!(context.instructions[1].content, "app rules\n");
    let prompt = system_prompt(&context);
    assert!(
        prompt.contains("## crates/app/CLAUDE.md\n\napp rules\n"),
        "{prompt}"
    );
}

#[test]
fn instruction_files_leading_outside_the_project_are_not_read() {
    let repo = TempRepo::new();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("id_rsa");
    std::fs::write(
        &secret,
        "-----BEGIN OPENSSH PRIVATE KEY----- outside secret\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&secret, repo.path().join("AGENTS.md")).unwrap();
    // The next name is still used.
    repo.write("CLAUDE.md", "use claude\n");
    // In the working directory too, also through a symlinked directory.
    std::os::unix::fs::symlink(outside.path(), repo.path().join("linked")).unwrap();
    std::fs::write(outside.path().join("AGENTS.md"), "outside rules\n").unwrap();
    repo.write("crates/app/keep.txt", "");
    std::os::unix::fs::symlink("/etc/passwd", repo.path().join("crates/app/AGENTS.md")).unwrap();

    let context = gather_context(&repo.path(), &repo.path().join("crates/app"));
    assert_eq!(
        context.instructions,
        vec![InstructionFile::new("CLAUDE.md", "use claude\n")]
    );
    // Refused with a note naming each, not silently.
    let skipped: Vec<_> = context
        .skipped_instructions
        .iter()
        .map(|s| (s.path.clone(), s.reason.is_refusal()))
        .collect();
    assert_eq!(
        skipped,
        vec![
            (PathBuf::from("AGENTS.md"), true),
            (PathBuf::from("crates/app/AGENTS.md"), true)
        ]
    );
    let context = gather_context(&repo.path(), &repo.path().join("linked"));
    assert_eq!(context.instructions.len(), 1, "{:?}", context.instructions);
    let prompt = system_prompt(&context);
    assert!(!prompt.contains("outside"), "{prompt}");
    assert!(!prompt.contains("root:"), "{prompt}");
}

#[test]
fn a_symlink_to_a_file_inside_the_project_is_read() {
    let repo = TempRepo::new();
    repo.write("docs/agents.md", "shared rules\n");
    std::os::unix::fs::symlink("docs/agents.md", repo.path().join("AGENTS.md")).unwrap();
    let context = gather_context(&repo.path(), &repo.path());
    assert_eq!(context.instructions.len(), 1);
    assert_eq!(context.instructions[0].path, PathBuf::from("AGENTS.md"));
    assert_eq!(context.instructions[0].content, "shared rules\n");
}

#[test]
fn no_instruction_files_means_no_section() {
    let repo = TempRepo::new();
    let context = gather_context(&repo.path(), &repo.path());
    assert!(context.instructions.is_empty());
    assert!(!system_prompt(&context).contains("# Project instructions"));
}

#[test]
fn long_instruction_files_are_capped() {
    let repo = TempRepo::new();
    let long: String = "é".repeat(MAX_INSTRUCTION_CHARS + 10);
    repo.write("AGENTS.md", &long);
    let context = gather_context(&repo.path(), &repo.path());
    let content = &context.instructions[0].content;
    assert!(content.starts_with(&"é".repeat(MAX_INSTRUCTION_CHARS)));
    assert!(!content.starts_with(&"é".repeat(MAX_INSTRUCTION_CHARS + 1)));
    assert!(
        content.ends_with("[truncated: showing the first 20000 of 20010 characters]"),
        "{}",
        &content[content.len() - 80..]
    );

    repo.write("AGENTS.md", &"a".repeat(MAX_INSTRUCTION_CHARS));
    let context = gather_context(&repo.path(), &repo.path());
    assert_eq!(context.instructions[0].content.len(), MAX_INSTRUCTION_CHARS);
}

#[test]
fn the_engine_reads_no_git_state() {
    // The host supplies it (keel-agents' project_context; tested in keel-agents/tests/project.rs).
    let repo = TempRepo::new();
    let context = gather_context(&repo.path(), &repo.path());
    assert_eq!(context.git, None);
    assert!(system_prompt(&context).contains("- Git: not a git repository\n"));
}

#[test]
fn a_missing_directory_gives_an_empty_context() {
    let context = gather_context(
        std::path::Path::new("/nonexistent/keel/root"),
        std::path::Path::new("/nonexistent/keel/root/sub"),
    );
    assert!(context.instructions.is_empty());
    assert_eq!(context.git, None);
}

#[test]
fn system_prompt_snapshot() {
    let context = ProjectContext {
        instructions: vec![
            InstructionFile {
                source: MemorySource::User,
                ..InstructionFile::new(
                    "/home/dev/.claude/CLAUDE.md",
                    "Answer tersely.\n@~/notes.md\n",
                )
            },
            InstructionFile {
                source: MemorySource::Import,
                imported_from: Some("/home/dev/.claude/CLAUDE.md".into()),
                ..InstructionFile::new("/home/dev/notes.md", "Prefer small commits.\n")
            },
            InstructionFile::new(
                "AGENTS.md",
                "Run `cargo test` before finishing.\nNo unwrap in library code.\n",
            ),
            InstructionFile {
                source: MemorySource::Local,
                ..InstructionFile::new("CLAUDE.local.md", "My sandbox account is dev-7.\n")
            },
            InstructionFile::new(
                "crates/app/CLAUDE.md",
                "This crate talks to the network; mock it in tests.",
            ),
        ],
        skipped_instructions: Vec::new(),
        git: Some(GitSummary {
            branch: Some("feature/login".into()),
            head: Some("1a2b3c4".into()),
            status: "1 staged, 2 modified".into(),
            recent_commits: vec!["login: add the form".into(), "initial commit".into()],
        }),
        cwd: "/home/dev/project/crates/app".into(),
        date: Some("2025-06-01".into()),
    };
    insta::assert_snapshot!("system_prompt", system_prompt(&context));
}

#[test]
fn first_request_is_well_under_20_kb() {
    const LIMIT: usize = 20_000;
    let repo = TempRepo::new();
    repo.write(
        "AGENTS.md",
        "# Agent notes\n\n- Build with `cargo build`, test with `cargo test`.\n\
         - Keep functions small and documented.\n",
    );
    repo.commit("add agent notes");
    let sandbox = PathSandbox::new(repo.path()).unwrap();
    let tools = default_tools(&sandbox, &SandboxPolicy::default()).unwrap();
    let definitions = serde_json::to_string(&tools.definitions()).unwrap();
    let prompt = system_prompt(&gather_context(&repo.path(), &repo.path()));
    let total = definitions.len() + prompt.len();
    assert!(
        total < LIMIT,
        "first request is {total} bytes: tools {} + system prompt {}",
        definitions.len(),
        prompt.len()
    );
    // The lean profile's share: tools and prompt well under a small model's first request.
    let tools = lean_tools(&sandbox, &SandboxPolicy::default()).unwrap();
    let definitions = serde_json::to_string(&tools.definitions()).unwrap();
    let prompt = lean_system_prompt(&gather_context(&repo.path(), &repo.path()));
    let total = definitions.len() + prompt.len();
    assert!(
        total < 4_000,
        "the lean first request is {total} bytes: tools {} + system prompt {}",
        definitions.len(),
        prompt.len()
    );
}
