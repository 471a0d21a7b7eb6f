//! Commands that need no model: the listings (`keel agents|skills|teams|sessions|tasks`) with
//! no provider configured, shell completions and the man page.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::*;
use keel_test_support::git::TempRepo;

/// The subcommands `keel --help` lists (`help` aside).
fn subcommands(home: &Home) -> Vec<String> {
    let output = home.keel().arg("--help").output().unwrap();
    let help = stdout(&output);
    let commands = help
        .split("Commands:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap_or_else(|| panic!("no Commands: in\n{help}"));
    let names: Vec<String> = commands
        .lines()
        .filter_map(|line| line.strip_prefix("  "))
        .filter(|line| !line.starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect();
    assert!(names.len() > 10, "{names:?}");
    names
}

#[tokio::test]
async fn listings_need_no_provider() {
    let repo = TempRepo::new();
    repo.write(
        ".keel/agents/planner.md",
        "---\ndescription: Plans the work\n---\nYou plan.\n",
    );
    repo.write(".keel/skills/release.md", "How to cut a release.\n");
    let home = Home::new();
    let expected = [
        ("agents", "planner  [inherit; all tools]  Plans the work"),
        ("skills", "release  How to cut a release."),
        ("teams", "no teams"),
        ("sessions", "no sessions yet"),
        ("tasks", "no tasks yet"),
    ];
    for (listing, line) in expected {
        // Home::keel clears every provider variable.
        let mut command = home.keel();
        command.current_dir(repo.path()).arg(listing);
        let output = run(command).await;
        assert_eq!(
            output.status.code(),
            Some(0),
            "keel {listing}: {}",
            stderr(&output)
        );
        assert!(
            stdout(&output).contains(line),
            "keel {listing}: {}",
            stdout(&output)
        );
        assert!(
            !stderr(&output).contains("provider"),
            "keel {listing}: {}",
            stderr(&output)
        );
    }
}

#[tokio::test]
async fn skills_name_shows_one_skill_and_nothing_a_repository_could_hide_in_it() {
    let repo = TempRepo::new();
    repo.write(
        ".keel/skills/release/SKILL.md",
        "---\ndescription: Cut a release\n---\nBump the version.\n\u{1b}]0;owned\u{7}\u{1b}[2JTag it.\n",
    );
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "the secret\n").unwrap();
    std::fs::create_dir_all(repo.path().join(".keel/skills")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.md"),
        repo.path().join(".keel/skills/leak.md"),
    )
    .unwrap();
    let home = Home::new();
    let keel = |args: &[&str]| {
        let mut command = home.keel();
        command.current_dir(repo.path()).args(args);
        run(command)
    };

    let output = keel(&["skills", "release"]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let shown = stdout(&output);
    assert!(
        shown.starts_with("release — Cut a release\nfile: "),
        "{shown}"
    );
    assert!(
        shown.contains("/.keel/skills/release/SKILL.md\n\nBump the version.\n"),
        "{shown}"
    );
    assert!(shown.contains("Tag it."), "{shown}");
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );

    // An unknown name: one line naming the known skills, exit 2.
    let output = keel(&["skills", "relase"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("release"), "{}", stderr(&output));
    assert!(stdout(&output).is_empty());

    // A skill file that is a link out of the repository is never read.
    let output = keel(&["skills", "leak"]).await;
    assert_ne!(output.status.code(), Some(0));
    assert!(!stdout(&output).contains("the secret"));
    assert!(
        !stderr(&output).contains("the secret"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn running_an_agent_or_a_team_still_needs_a_provider_and_says_so() {
    let repo = TempRepo::new();
    repo.write(
        ".keel/agents/planner.md",
        "---\ndescription: Plans the work\n---\nYou plan.\n",
    );
    let home = Home::new();
    for args in [["agent", "planner", "plan"], ["team", "duo", "plan"]] {
        let mut command = home.keel();
        command.current_dir(repo.path()).args(args);
        let output = run(command).await;
        assert_eq!(output.status.code(), Some(2), "keel {args:?}");
        assert!(
            stderr(&output).contains("no model provider configured"),
            "keel {args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn completions_cover_every_subcommand() {
    let home = Home::new();
    let names = subcommands(&home);
    let output = home.keel().args(["completions", "bash"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let script = stdout(&output);
    assert!(script.contains("complete -F _keel"), "{script:.200}");
    for name in &names {
        assert!(
            script.contains(&format!("keel,{name})")),
            "no {name} in bash's"
        );
    }
    // Subcommands are built when used; `keel help tasks <TAB>` still offers tasks' actions.
    assert!(
        script.contains("keel__subcmd__help__subcmd__tasks,show)"),
        "no `keel help tasks show` in bash's"
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let output = home.keel().args(["completions", shell]).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{shell}: {}",
            stderr(&output)
        );
        assert!(stdout(&output).contains("exec"), "{shell}");
    }
    let output = home.keel().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn the_man_page_is_roff_naming_every_subcommand() {
    let home = Home::new();
    let names = subcommands(&home);
    let output = home.keel().arg("man").output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let page = stdout(&output);
    let th = page.lines().find(|line| line.starts_with(".TH ")).unwrap();
    assert!(th.starts_with(".TH KEEL 1 "), "{th}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "no {section}");
    }
    // Every line is a request (.XX), a comment, or text that does not start with a dot or a
    // quote (which roff would read as a request).
    for line in page.lines() {
        assert!(
            !line.starts_with('\'') && (!line.starts_with('.') || line.len() > 1),
            "{line}"
        );
    }
    for name in &names {
        // roff escapes the hyphen.
        assert!(
            page.contains(&format!("keel\\-{}", name.replace('-', "\\-"))),
            "no {name}"
        );
    }
    assert!(page.contains("KEEL_LOG"));
    assert!(!page.contains("task\\-run"), "the hidden command is listed");
}

#[test]
fn man_dir_writes_the_pages_the_main_page_refers_to() {
    let home = Home::new();
    let names = subcommands(&home);
    let dir = home.path().join("man1");
    let output = home
        .keel()
        .args(["man", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    // One line per file written.
    assert_eq!(stdout(&output).lines().count(), files.len(), "{files:?}");
    // keel.1, every subcommand's, their own subcommands' (keel tasks show), nothing hidden.
    let mut expected: Vec<String> = names.iter().map(|name| format!("keel-{name}.1")).collect();
    expected.extend(["keel.1".into(), "keel-tasks-show.1".into()]);
    for name in &expected {
        assert!(files.contains(name), "no {name} in {files:?}");
    }
    assert!(
        !files
            .iter()
            .any(|f| f.contains("task-run") || f.contains("help")),
        "{files:?}"
    );
    let exec = std::fs::read_to_string(dir.join("keel-exec.1")).unwrap();
    assert!(exec.contains(".TH KEEL-EXEC 1 "), "{exec:.300}");
    assert!(exec.contains("output\\-format"), "{exec}");
}
