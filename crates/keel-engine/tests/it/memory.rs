//! Memory files as Claude Code loads them: user-level files, every directory from the project
//! root down to the working directory, `@` imports, and what may not be loaded.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use keel_engine::memory::{
    MAX_IMPORT_DEPTH, MAX_MEMORY_CHARS, MemorySource, MemorySources, SkipReason, load_memory,
};
use keel_engine::prompt::{MAX_INSTRUCTION_CHARS, gather_context_from, system_prompt};

/// A temporary directory holding a home (`home/`), a project (`work/repo/`) and a file beside
/// them both (`outside.txt`).
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Self {
        let tree = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(tree.root()).unwrap();
        std::fs::create_dir_all(tree.home()).unwrap();
        tree.write("outside.txt", "OUTSIDE-SECRET\n");
        tree
    }

    /// The base, canonical (the temp dir may be under a symlink).
    fn base(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    fn root(&self) -> PathBuf {
        self.base().join("work/repo")
    }

    fn home(&self) -> PathBuf {
        self.base().join("home")
    }

    /// Writes `text` at `relative` to the base, making its directories.
    fn write(&self, relative: &str, text: &str) {
        let path = self.base().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// The project's own sources, working in `cwd` (relative to the root).
    fn sources(&self, cwd: &str) -> MemorySources {
        MemorySources::new(self.root(), self.root().join(cwd))
    }

    /// With the user's files too.
    fn user_sources(&self, cwd: &str) -> MemorySources {
        MemorySources {
            user_files: vec![
                self.home().join(".claude/CLAUDE.md"),
                self.home().join(".keel/AGENTS.md"),
            ],
            user_home: Some(self.home()),
            ..self.sources(cwd)
        }
    }
}

fn paths(memory: &keel_engine::memory::Memory) -> Vec<String> {
    memory
        .files
        .iter()
        .map(|file| file.path.display().to_string())
        .collect()
}

fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

#[test]
fn every_file_from_the_user_and_the_root_down_to_cwd_is_loaded_in_order() {
    let tree = Tree::new();
    tree.write("home/.claude/CLAUDE.md", "user claude\n");
    tree.write("home/.keel/AGENTS.md", "user keel\n");
    tree.write("work/repo/AGENTS.md", "root agents\n");
    tree.write("work/repo/CLAUDE.md", "root claude\n");
    tree.write("work/repo/CLAUDE.local.md", "root local\n");
    tree.write("work/repo/.claude/CLAUDE.md", "root dot claude\n");
    tree.write("work/repo/a/AGENTS.md", "a agents\n");
    tree.write("work/repo/a/b/CLAUDE.md", "b claude\n");
    // Not on the way from the root to cwd: not loaded.
    tree.write("work/repo/other/AGENTS.md", "other\n");
    tree.write("work/repo/a/b/c/AGENTS.md", "below cwd\n");
    // Above the root: not the project's.
    tree.write("work/AGENTS.md", "above the root\n");

    let context = gather_context_from(&tree.user_sources("a/b"));
    let home = tree.home();
    let loaded: Vec<_> = context
        .instructions
        .iter()
        .map(|f| (f.path.clone(), f.source, f.content.as_str()))
        .collect();
    assert_eq!(
        loaded,
        vec![
            (
                home.join(".claude/CLAUDE.md"),
                MemorySource::User,
                "user claude\n"
            ),
            (
                home.join(".keel/AGENTS.md"),
                MemorySource::User,
                "user keel\n"
            ),
            ("AGENTS.md".into(), MemorySource::Project, "root agents\n"),
            ("CLAUDE.md".into(), MemorySource::Project, "root claude\n"),
            (
                ".claude/CLAUDE.md".into(),
                MemorySource::Project,
                "root dot claude\n"
            ),
            (
                "CLAUDE.local.md".into(),
                MemorySource::Local,
                "root local\n"
            ),
            ("a/AGENTS.md".into(), MemorySource::Project, "a agents\n"),
            ("a/b/CLAUDE.md".into(), MemorySource::Project, "b claude\n"),
        ]
    );
    assert!(context.skipped_instructions.is_empty());

    // The prompt shows them in that order, each under its path.
    let prompt = system_prompt(&context);
    let mut at = 0;
    for (path, _, content) in &loaded {
        let heading = format!("## {}", path.display());
        let found = prompt[at..]
            .find(&heading)
            .unwrap_or_else(|| panic!("{heading} missing or out of order:\n{prompt}"));
        at += found + heading.len();
        assert!(prompt[at..].contains(content.trim_end()));
    }
    assert!(prompt.contains(&format!(
        "## {} (the user's own instructions, for every project)",
        home.join(".claude/CLAUDE.md").display()
    )));
    assert!(prompt.contains("## CLAUDE.local.md (the user's private instructions"));
    for absent in ["other\n", "below cwd", "above the root"] {
        assert!(!prompt.contains(absent), "{absent}");
    }
}

#[test]
fn the_same_file_under_two_names_is_loaded_once() {
    let tree = Tree::new();
    tree.write("work/repo/AGENTS.md", "shared rules\n");
    symlink("AGENTS.md", tree.root().join("CLAUDE.md"));
    // A hard link counts as the same file too.
    std::fs::create_dir_all(tree.root().join("sub")).unwrap();
    std::fs::hard_link(
        tree.root().join("AGENTS.md"),
        tree.root().join("sub/CLAUDE.md"),
    )
    .unwrap();

    let memory = load_memory(&tree.sources("sub"));
    assert_eq!(paths(&memory), ["AGENTS.md"]);
    let skipped: Vec<_> = memory
        .skipped
        .iter()
        .map(|s| (s.path.clone(), s.reason.clone()))
        .collect();
    let duplicate = SkipReason::Duplicate {
        of: "AGENTS.md".into(),
    };
    assert_eq!(
        skipped,
        vec![
            ("CLAUDE.md".into(), duplicate.clone()),
            ("sub/CLAUDE.md".into(), duplicate)
        ]
    );
    assert!(!skipped[0].1.is_refusal());
    let prompt = system_prompt(&gather_context_from(&tree.sources("sub")));
    assert_eq!(prompt.matches("shared rules").count(), 1, "{prompt}");
}

#[test]
fn imports_are_loaded_after_their_importer_relative_to_its_directory() {
    let tree = Tree::new();
    tree.write(
        "work/repo/AGENTS.md",
        "# Rules\nSee @docs/git.md and @README.md.\n",
    );
    tree.write("work/repo/README.md", "the readme\n");
    tree.write("work/repo/docs/git.md", "git rules, and @style.md\n");
    tree.write("work/repo/docs/style.md", "style rules\n");
    tree.write("work/repo/CLAUDE.md", "claude rules\n");

    let memory = load_memory(&tree.sources(""));
    assert_eq!(
        paths(&memory),
        [
            "AGENTS.md",
            "docs/git.md",
            "docs/style.md",
            "README.md",
            "CLAUDE.md"
        ]
    );
    let from: Vec<_> = memory
        .files
        .iter()
        .map(|f| f.imported_from.clone().map(|p| p.display().to_string()))
        .collect();
    assert_eq!(
        from,
        [
            None,
            Some("AGENTS.md".into()),
            Some("docs/git.md".into()),
            Some("AGENTS.md".into()),
            None
        ]
    );
    assert_eq!(memory.files[1].source, MemorySource::Import);
    assert!(memory.skipped.is_empty(), "{:?}", memory.skipped);
}

#[test]
fn imports_in_code_are_not_followed() {
    let tree = Tree::new();
    tree.write(
        "work/repo/AGENTS.md",
        "Mention `@code.md` here.\n```\n@fenced.md\n```\n~~~~\n@tilde.md\n~~~~\nmail me@mail.md\n",
    );
    for name in ["code.md", "fenced.md", "tilde.md", "mail.md"] {
        tree.write(&format!("work/repo/{name}"), "IMPORTED\n");
    }
    let memory = load_memory(&tree.sources(""));
    assert_eq!(paths(&memory), ["AGENTS.md"]);
    assert!(memory.skipped.is_empty());
}

#[test]
fn an_import_chain_stops_at_the_depth_limit_with_a_note() {
    let tree = Tree::new();
    tree.write("work/repo/AGENTS.md", "top\n@d1.md\n");
    for depth in 1..=6 {
        tree.write(
            &format!("work/repo/d{depth}.md"),
            &format!("depth {depth}\n@d{}.md\n", depth + 1),
        );
    }
    let memory = load_memory(&tree.sources(""));
    let mut expected = vec!["AGENTS.md".to_owned()];
    expected.extend((1..=MAX_IMPORT_DEPTH).map(|d| format!("d{d}.md")));
    assert_eq!(paths(&memory), expected);
    assert_eq!(memory.skipped.len(), 1, "{:?}", memory.skipped);
    let skipped = &memory.skipped[0];
    assert_eq!(skipped.path, PathBuf::from("d6.md"));
    assert_eq!(skipped.imported_from, Some(PathBuf::from("d5.md")));
    assert_eq!(skipped.reason, SkipReason::TooDeep);
    assert!(
        skipped.to_string().contains("at most 5 levels deep"),
        "{skipped}"
    );
    let prompt = system_prompt(&gather_context_from(&tree.sources("")));
    assert!(prompt.contains("depth 5"));
    assert!(!prompt.contains("depth 6"));
}

#[test]
fn an_import_cycle_loads_each_file_once() {
    let tree = Tree::new();
    tree.write("work/repo/AGENTS.md", "top\n@a.md\n");
    tree.write("work/repo/a.md", "a\n@b.md\n");
    tree.write("work/repo/b.md", "b\n@a.md\n@AGENTS.md\n@b.md\n");
    let memory = load_memory(&tree.sources(""));
    assert_eq!(paths(&memory), ["AGENTS.md", "a.md", "b.md"]);
    let reasons: Vec<_> = memory.skipped.iter().map(|s| s.reason.clone()).collect();
    assert_eq!(
        reasons,
        [SkipReason::Cycle, SkipReason::Cycle, SkipReason::Cycle]
    );
}

#[test]
fn hostile_imports_from_a_project_file_are_refused_with_notes() {
    let tree = Tree::new();
    tree.write("home/.ssh/id_rsa", "SSH-SECRET\n");
    tree.write("elsewhere/notes.md", "LINKED-SECRET\n");
    symlink(
        tree.base().join("elsewhere/notes.md"),
        tree.root().join("link.md"),
    );
    symlink(tree.base().join("elsewhere"), tree.root().join("linkdir"));
    let outside = tree.base().join("outside.txt");
    tree.write(
        "work/repo/CLAUDE.md",
        &format!(
            "Project rules.\n@../../outside.txt\n@/etc/passwd\n@~/.ssh/id_rsa\n@link.md\n\
             @linkdir/notes.md\n@{}\n@missing.md\n",
            outside.display()
        ),
    );

    let context = gather_context_from(&tree.user_sources(""));
    let paths: Vec<_> = context
        .instructions
        .iter()
        .map(|f| f.path.clone())
        .collect();
    assert_eq!(paths, [PathBuf::from("CLAUDE.md")]);
    let skipped: Vec<_> = context
        .skipped_instructions
        .iter()
        .map(|s| (s.path.display().to_string(), s.reason.clone()))
        .collect();
    let out = |path: PathBuf| SkipReason::OutsideProject { resolved: path };
    assert_eq!(
        skipped,
        vec![
            (outside.display().to_string(), out(outside.clone())),
            ("/etc/passwd".into(), out("/etc/passwd".into())),
            ("~/.ssh/id_rsa".into(), SkipReason::HomeImportFromProject),
            (
                "link.md".into(),
                out(tree.base().join("elsewhere/notes.md"))
            ),
            (
                "linkdir/notes.md".into(),
                out(tree.base().join("elsewhere/notes.md"))
            ),
            (outside.display().to_string(), out(outside.clone())),
            ("missing.md".into(), SkipReason::NotFound),
        ]
    );
    for entry in &context.skipped_instructions {
        assert_eq!(entry.imported_from, Some(PathBuf::from("CLAUDE.md")));
    }
    let report = context.memory_report();
    assert_eq!(report.refusals().len(), 6, "{report}");
    assert!(
        report.to_string().contains(
            "~/.ssh/id_rsa (imported by CLAUDE.md): refused: only user-level memory files"
        ),
        "{report}"
    );

    let prompt = system_prompt(&context);
    for secret in ["OUTSIDE-SECRET", "SSH-SECRET", "LINKED-SECRET", "root:"] {
        assert!(!prompt.contains(secret), "{secret} leaked:\n{prompt}");
    }
}

#[test]
fn a_user_file_may_import_from_home_but_what_it_imports_from_the_project_may_not() {
    let tree = Tree::new();
    tree.write(
        "home/.claude/CLAUDE.md",
        "user rules\n@~/notes.md\n@/etc/hostname-not-there\n",
    );
    tree.write("home/notes.md", "user notes\n@~/more.md\n");
    tree.write("home/more.md", "more notes\n");
    tree.write(
        "home/.keel/AGENTS.md",
        &format!("@{}/shared.md\n", tree.root().display()),
    );
    tree.write("home/.ssh/id_rsa", "SSH-SECRET\n");
    // Repository content a user file imports stays repository content.
    tree.write("work/repo/shared.md", "shared\n@~/.ssh/id_rsa\n");

    let context = gather_context_from(&tree.user_sources(""));
    let home = tree.home();
    let loaded: Vec<_> = context
        .instructions
        .iter()
        .map(|f| (f.path.clone(), f.source, f.imported_from.clone()))
        .collect();
    assert_eq!(
        loaded,
        vec![
            (home.join(".claude/CLAUDE.md"), MemorySource::User, None),
            (
                home.join("notes.md"),
                MemorySource::Import,
                Some(home.join(".claude/CLAUDE.md"))
            ),
            (
                home.join("more.md"),
                MemorySource::Import,
                Some(home.join("notes.md"))
            ),
            (home.join(".keel/AGENTS.md"), MemorySource::User, None),
            (
                "shared.md".into(),
                MemorySource::Import,
                Some(home.join(".keel/AGENTS.md"))
            ),
        ]
    );
    let skipped: Vec<_> = context
        .skipped_instructions
        .iter()
        .map(|s| (s.path.display().to_string(), s.reason.clone()))
        .collect();
    assert_eq!(
        skipped,
        vec![
            ("/etc/hostname-not-there".into(), SkipReason::NotFound),
            ("~/.ssh/id_rsa".into(), SkipReason::HomeImportFromProject),
        ]
    );
    let prompt = system_prompt(&context);
    assert!(prompt.contains("more notes"));
    assert!(prompt.contains(&format!(
        "## {} (imported by {})",
        home.join("notes.md").display(),
        home.join(".claude/CLAUDE.md").display()
    )));
    assert!(!prompt.contains("SSH-SECRET"));
}

#[test]
fn a_project_file_may_import_from_an_extra_readable_root() {
    let tree = Tree::new();
    tree.write("shared/team.md", "team rules\n");
    tree.write(
        "work/repo/AGENTS.md",
        &format!("@{}\n", tree.base().join("shared/team.md").display()),
    );
    let without = load_memory(&tree.sources(""));
    assert_eq!(paths(&without), ["AGENTS.md"]);
    assert!(without.skipped[0].reason.is_refusal());

    let sources = MemorySources {
        extra_readable: vec![tree.base().join("shared")],
        ..tree.sources("")
    };
    let with = load_memory(&sources);
    assert_eq!(
        paths(&with),
        [
            "AGENTS.md".to_owned(),
            tree.base().join("shared/team.md").display().to_string()
        ]
    );
}

#[test]
fn the_total_size_is_capped_with_notes() {
    let tree = Tree::new();
    let big = "x".repeat(MAX_INSTRUCTION_CHARS);
    tree.write("work/repo/AGENTS.md", &big);
    tree.write("work/repo/CLAUDE.md", &big);
    tree.write("work/repo/.claude/CLAUDE.md", &"y".repeat(15_000));
    tree.write("work/repo/CLAUDE.local.md", &big);
    tree.write("work/repo/a/AGENTS.md", "too late\n");

    let memory = load_memory(&tree.sources("a"));
    assert_eq!(
        paths(&memory),
        [
            "AGENTS.md",
            "CLAUDE.md",
            ".claude/CLAUDE.md",
            "CLAUDE.local.md"
        ]
    );
    let local = &memory.files[3];
    assert!(local.truncated);
    let left = MAX_MEMORY_CHARS - 2 * MAX_INSTRUCTION_CHARS - 15_000;
    assert!(local.content.starts_with(&"x".repeat(left)));
    assert!(
        local.content.ends_with(&format!(
            "[truncated: showing the first {left} of {MAX_INSTRUCTION_CHARS} characters; \
             the memory files' total limit of {MAX_MEMORY_CHARS} characters is reached]"
        )),
        "{}",
        &local.content[local.content.len() - 200..]
    );
    assert!(!memory.files[0].truncated);
    assert_eq!(memory.skipped.len(), 1);
    assert_eq!(memory.skipped[0].path, PathBuf::from("a/AGENTS.md"));
    assert_eq!(memory.skipped[0].reason, SkipReason::TotalLimit);
}

#[test]
fn too_many_imports_stop_with_one_note() {
    let tree = Tree::new();
    let lines: String = (0..100).map(|i| format!("@f{i}.md\n")).collect();
    tree.write("work/repo/AGENTS.md", &lines);
    for i in 0..100 {
        tree.write(&format!("work/repo/f{i}.md"), "f\n");
    }
    let memory = load_memory(&tree.sources(""));
    assert_eq!(memory.files.len(), 1 + keel_engine::memory::MAX_IMPORTS);
    assert_eq!(memory.skipped.len(), 1);
    assert_eq!(memory.skipped[0].reason, SkipReason::TooManyImports);
}

#[test]
fn the_report_lists_what_was_loaded_and_skipped() {
    let tree = Tree::new();
    tree.write("work/repo/AGENTS.md", "rules\n@docs/a.md\n@nope.md\n");
    tree.write("work/repo/docs/a.md", "a\n");
    let report = gather_context_from(&tree.sources("")).memory_report();
    assert_eq!(report.loaded.len(), 2);
    assert_eq!(report.loaded[0].bytes, 26);
    assert_eq!(report.loaded[1].chars, 2);
    assert_eq!(
        report.to_string(),
        "Memory files loaded (2):\n  AGENTS.md  (project, 26 bytes)\n  \
         docs/a.md  (import by AGENTS.md, 2 bytes)\n\
         Skipped (1):\n  nope.md (imported by AGENTS.md): not found\n"
    );
    assert!(report.refusals().is_empty());
}
