//! Skills: discovery in the three folders, descriptions, what is not a skill, malformed files,
//! shadowing, the prompt section, lazy loading and the `use_skill` tool.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_agents::{SkillIndex, UseSkillTool};
use keel_provider::{ToolCall, ToolInput};
use keel_test_support::temp::{TempDir, temp_dir};
use keel_tool::{Effect, Tool, ToolContext, ToolOutput, ToolRegistry};
use serde_json::json;

/// Writes `content` at `root/rel`, creating folders.
fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, content).unwrap();
    path
}

/// A project folder and a keel home, both temporary.
struct Setup {
    _tmp: TempDir,
    project: PathBuf,
    home: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let tmp = temp_dir();
        let project = tmp.path().join("project");
        let home = tmp.path().join("keel-home");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Self {
            _tmp: tmp,
            project,
            home,
        }
    }

    fn dirs(&self) -> Vec<PathBuf> {
        SkillIndex::standard_dirs(&self.project, Some(&self.home))
    }

    fn discover(&self) -> (SkillIndex, Vec<String>) {
        SkillIndex::discover(&self.dirs())
    }

    /// Discovery that must raise no warnings.
    fn index(&self) -> SkillIndex {
        let (index, warnings) = self.discover();
        assert!(warnings.is_empty(), "{warnings:#?}");
        index
    }
}

fn names(index: &SkillIndex) -> Vec<&str> {
    index.skills().iter().map(|s| s.name.as_str()).collect()
}

fn description<'a>(index: &'a SkillIndex, name: &str) -> &'a str {
    &index
        .get(name)
        .unwrap_or_else(|| panic!("no skill {name}"))
        .description
}

async fn use_skill(registry: &ToolRegistry, name: &str) -> ToolOutput {
    let input = json!({ "name": name });
    let ctx = ToolContext::new(".", "test-session");
    let call = ToolCall {
        id: "call_1",
        name: "use_skill",
        input: ToolInput::Valid(&input),
    };
    registry.dispatch(call, &ctx).await
}

#[test]
fn standard_dirs_are_project_keel_then_project_claude_then_home() {
    let dirs = SkillIndex::standard_dirs(Path::new("/p"), Some(Path::new("/h")));
    assert_eq!(
        dirs,
        [
            PathBuf::from("/p/.keel/skills"),
            PathBuf::from("/p/.claude/skills"),
            PathBuf::from("/h/skills"),
        ]
    );
    assert_eq!(SkillIndex::standard_dirs(Path::new("/p"), None).len(), 2);
}

#[test]
fn a_project_definitions_folder_linked_out_of_the_project_is_not_read() {
    let s = Setup::new();
    let elsewhere = s.project.parent().unwrap().join("elsewhere");
    write(
        &elsewhere,
        "planted.md",
        "---\ndescription: Reads the secret notes outside the project\n---\nSECRET\n",
    );
    std::fs::create_dir_all(s.project.join(".keel")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, s.project.join(".keel/skills")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, s.project.join(".claude")).unwrap();
    let index = s.index();
    assert!(names(&index).is_empty(), "{:?}", names(&index));
    // The user's own folder may be a symlink (a dotfiles repository): it is theirs.
    std::fs::remove_dir_all(&s.home).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &s.home).unwrap();
    std::fs::rename(elsewhere.join("planted.md"), elsewhere.join("mine.md")).unwrap();
    std::fs::create_dir_all(elsewhere.join("skills")).unwrap();
    std::fs::rename(elsewhere.join("mine.md"), elsewhere.join("skills/mine.md")).unwrap();
    assert_eq!(names(&s.index()), ["mine"]);
}

#[test]
fn skills_are_found_in_all_three_folders_in_both_layouts() {
    let s = Setup::new();
    let deploy = write(
        &s.project,
        ".keel/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploy the service to staging.\ntriggers: [deploy, ship it]\n---\nRun make deploy.\n",
    );
    let lint = write(
        &s.project,
        ".keel/skills/lint.md",
        "Fix lint warnings one file at a time.\n\nMore.\n",
    );
    let review = write(
        &s.project,
        ".claude/skills/review/SKILL.md",
        "---\nname: review\ndescription: Review a pull request.\nallowed-tools: Read, Grep\n---\nLook at the diff.\n",
    );
    let notes = write(
        &s.project,
        ".claude/skills/notes.md",
        "Write release notes.\n",
    );
    let release = write(
        &s.home,
        "skills/release/SKILL.md",
        "---\ndescription: Cut a release.\n---\nBump the version.\n",
    );
    let style = write(
        &s.home,
        "skills/style.md",
        "# Style\n\nHouse style for prose.\n",
    );

    let index = s.index();
    assert_eq!(
        names(&index),
        ["deploy", "lint", "notes", "release", "review", "style"]
    );
    assert_eq!(index.len(), 6);
    assert!(!index.is_empty());

    let skill = index.get("deploy").unwrap();
    assert_eq!(skill.description, "Deploy the service to staging.");
    assert_eq!(skill.triggers, ["deploy", "ship it"]);
    assert_eq!(skill.path, deploy);
    assert_eq!(skill.folder(), deploy.parent());
    assert!(skill.in_folder);

    let skill = index.get("lint").unwrap();
    assert_eq!(
        (skill.description.as_str(), &skill.path, skill.folder()),
        ("Fix lint warnings one file at a time.", &lint, None)
    );
    assert!(skill.triggers.is_empty());
    assert_eq!(index.get("review").unwrap().path, review);
    assert_eq!(index.get("notes").unwrap().path, notes);
    // A folder skill without `name` is named after its folder.
    assert_eq!(index.get("release").unwrap().path, release);
    assert_eq!(index.get("style").unwrap().path, style);
    assert_eq!(description(&index, "style"), "House style for prose.");

    // Missing folders have no skills and raise no warnings.
    let (empty, warnings) = SkillIndex::discover(&[s.project.join("nowhere")]);
    assert!(empty.is_empty() && warnings.is_empty());
    assert_eq!(empty.prompt_section(), None);
}

#[test]
fn the_description_comes_from_the_front_matter_else_the_first_paragraph() {
    let s = Setup::new();
    let dir = ".keel/skills";
    write(
        &s.project,
        &format!("{dir}/file-name.md"),
        "---\nname: renamed\ndescription: >\n  Folded over\n  two lines.\n---\nThe body's paragraph.\n",
    );
    write(
        &s.project,
        &format!("{dir}/no-description.md"),
        "---\ntriggers: one trigger\n---\n\n# Heading\n\nFirst paragraph\nwraps   here.\n\nSecond paragraph.\n",
    );
    write(
        &s.project,
        &format!("{dir}/plain.md"),
        "\n\nJust a paragraph\nover lines.\n## Next heading\nnot this\n",
    );
    write(
        &s.project,
        &format!("{dir}/heading-only.md"),
        "# Only a heading #\n",
    );
    let long = "word ".repeat(100);
    write(&s.project, &format!("{dir}/long.md"), &long);
    write(
        &s.project,
        &format!("{dir}/empty-front.md"),
        "---\n---\nBody after an empty block.\n",
    );

    let index = s.index();
    assert_eq!(
        names(&index),
        [
            "empty-front",
            "heading-only",
            "long",
            "no-description",
            "plain",
            "renamed"
        ]
    );
    assert_eq!(description(&index, "renamed"), "Folded over two lines.");
    assert_eq!(
        description(&index, "no-description"),
        "First paragraph wraps here."
    );
    assert_eq!(
        index.get("no-description").unwrap().triggers,
        ["one trigger"]
    );
    assert_eq!(description(&index, "plain"), "Just a paragraph over lines.");
    assert_eq!(description(&index, "heading-only"), "Only a heading");
    assert_eq!(
        description(&index, "empty-front"),
        "Body after an empty block."
    );
    let long = description(&index, "long");
    assert!(long.ends_with('…'), "{long}");
    assert!(long.chars().count() <= 200, "{}", long.chars().count());
    assert!(long.chars().count() > 180, "{}", long.chars().count());
    assert!(long.starts_with("word word"));
    assert!(!long.contains("  "));
}

#[test]
fn readme_changelog_license_drafts_and_other_files_are_not_skills() {
    let s = Setup::new();
    for rel in [
        ".keel/skills/README.md",
        ".keel/skills/CHANGELOG.md",
        ".claude/skills/LICENSE.md",
        ".claude/skills/readme.md",
        ".keel/skills/drafts/half-done/SKILL.md",
        ".keel/skills/drafts/idea.md",
        "skills/drafts/SKILL.md",
        ".keel/skills/.hidden.md",
        ".keel/skills/notes.txt",
        ".keel/skills/resources/reference.md",
    ] {
        write(&s.project, rel, "Not a skill.\n");
    }
    write(&s.home, "skills/Drafts/wip/SKILL.md", "Not a skill.\n");
    write(&s.home, "skills/real.md", "A real skill.\n");
    let index = s.index();
    assert_eq!(names(&index), ["real"]);
}

#[test]
fn crlf_files_are_read_like_lf_ones() {
    let s = Setup::new();
    write(
        &s.project,
        ".keel/skills/windows/SKILL.md",
        "---\r\nname: windows\r\ndescription: Written on Windows.\r\ntriggers:\r\n  - crlf\r\n---\r\nLine one\r\nline two\r\n",
    );
    write(
        &s.project,
        ".keel/skills/plain-crlf.md",
        "\u{feff}First\r\nparagraph.\r\n\r\nBody.\r\n",
    );
    let index = s.index();
    let skill = index.get("windows").unwrap();
    assert_eq!(skill.description, "Written on Windows.");
    assert_eq!(skill.triggers, ["crlf"]);
    assert_eq!(index.load("windows").unwrap(), "Line one\nline two");
    assert_eq!(description(&index, "plain-crlf"), "First paragraph.");
    assert_eq!(
        index.load("plain-crlf").unwrap(),
        "First\nparagraph.\n\nBody."
    );
}

#[test]
fn malformed_files_are_skipped_with_a_warning_naming_the_file_and_the_problem() {
    let s = Setup::new();
    let dir = ".keel/skills";
    let bad_yaml = write(
        &s.project,
        &format!("{dir}/bad-yaml.md"),
        "---\nname: [unclosed\n---\nBody.\n",
    );
    let unclosed = write(
        &s.project,
        &format!("{dir}/unclosed/SKILL.md"),
        "---\nname: unclosed\ndescription: never closed\n",
    );
    let wrong_type = write(
        &s.project,
        &format!("{dir}/wrong-type.md"),
        "---\ndescription: [1, 2]\n---\nBody.\n",
    );
    let not_utf8 = write(
        &s.project,
        &format!("{dir}/not-utf8.md"),
        b"---\ndescription: caf\xE9\n---\nBody.\n",
    );
    let empty = write(&s.project, &format!("{dir}/empty.md"), "");
    let two_line_name = write(
        &s.project,
        &format!("{dir}/two-line-name.md"),
        "---\nname: \"two\\nlines\"\ndescription: d\n---\n",
    );
    write(&s.project, &format!("{dir}/good.md"), "Still loaded.\n");

    let (index, warnings) = s.discover();
    assert_eq!(names(&index), ["good"]);
    assert_eq!(warnings.len(), 6, "{warnings:#?}");
    let warning_for = |path: &Path| -> &str {
        let shown = path.display().to_string();
        warnings
            .iter()
            .find(|w| w.contains(&shown))
            .unwrap_or_else(|| panic!("no warning names {shown}: {warnings:#?}"))
    };
    let w = warning_for(&bad_yaml);
    assert!(w.starts_with("skill skipped: "), "{w}");
    assert!(w.contains("front matter: "), "{w}");
    assert!(
        warning_for(&unclosed)
            .ends_with("the front matter opened with `---` is never closed by a `---` line"),
        "{warnings:#?}"
    );
    assert!(warning_for(&wrong_type).contains("front matter: "));
    assert!(warning_for(&not_utf8).ends_with("the front matter is not UTF-8 text"));
    assert!(warning_for(&empty).contains("the skill has no description"));
    assert!(warning_for(&two_line_name).ends_with("the skill's name must be one line of text"));
}

#[test]
fn earlier_folders_shadow_later_ones_with_a_warning() {
    let s = Setup::new();
    let keel = write(
        &s.project,
        ".keel/skills/deploy.md",
        "---\ndescription: From .keel.\n---\nkeel body\n",
    );
    let claude = write(
        &s.project,
        ".claude/skills/deploy/SKILL.md",
        "---\ndescription: From .claude.\n---\nclaude body\n",
    );
    // Named `deploy` by its front matter, not its file name.
    let home = write(
        &s.home,
        "skills/ship.md",
        "---\nname: deploy\ndescription: From home.\n---\nhome body\n",
    );
    let home_review = write(&s.home, "skills/review.md", "Review from home.\n");
    let claude_review = write(
        &s.project,
        ".claude/skills/review.md",
        "Review from .claude.\n",
    );

    let (index, warnings) = s.discover();
    assert_eq!(names(&index), ["deploy", "review"]);
    assert_eq!(index.get("deploy").unwrap().path, keel);
    assert_eq!(description(&index, "deploy"), "From .keel.");
    assert_eq!(index.get("review").unwrap().path, claude_review);
    assert_eq!(index.load("deploy").unwrap(), "keel body");
    let shadowed = |name: &str, loser: &Path, winner: &Path| {
        format!(
            "skill `{name}` in {} is shadowed by the one in {}",
            loser.display(),
            winner.display()
        )
    };
    assert_eq!(
        warnings,
        [
            shadowed("deploy", &claude, &keel),
            shadowed("review", &home_review, &claude_review),
            shadowed("deploy", &home, &keel),
        ]
    );

    // Within one folder, `<name>/SKILL.md` wins over `<name>.md`.
    let s = Setup::new();
    let folder = write(&s.home, "skills/dup/SKILL.md", "The folder one.\n");
    let file = write(&s.home, "skills/dup.md", "The file one.\n");
    let (index, warnings) = s.discover();
    assert_eq!(index.get("dup").unwrap().path, folder);
    assert_eq!(warnings, [shadowed("dup", &file, &folder)]);

    // The same folder given twice is searched once.
    let (index, warnings) = SkillIndex::discover(&[s.home.join("skills"), s.home.join("skills/")]);
    assert_eq!(names(&index), ["dup"]);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
}

#[test]
fn the_prompt_section_lists_each_skill_on_one_line() {
    let s = Setup::new();
    write(
        &s.project,
        ".keel/skills/deploy/SKILL.md",
        "---\ndescription: Deploy the service to staging.\ntriggers: [deploy, ship it]\n---\nRun make deploy.\n",
    );
    write(
        &s.project,
        ".claude/skills/review.md",
        "# Review\n\nReview a pull request: read the diff,\nrun the tests, comment.\n",
    );
    write(
        &s.home,
        "skills/release/SKILL.md",
        "---\nname: release\ndescription: Cut a release.\n---\n",
    );
    let index = s.index();
    let section = index.prompt_section().unwrap();
    insta::assert_snapshot!("prompt_section", section);
}

#[tokio::test]
async fn use_skill_returns_the_body_and_reads_the_file_only_once() {
    let s = Setup::new();
    let path = write(
        &s.project,
        ".keel/skills/deploy/SKILL.md",
        "---\ndescription: Deploy.\n---\n\nRun `make deploy`.\nThen check the logs.\n",
    );
    let plain = write(&s.home, "skills/plain.md", "Plain skill.\n\nIts steps.\n");
    let index = Arc::new(s.index());
    assert!(!index.is_loaded("deploy"), "indexing does not load bodies");
    let registry = ToolRegistry::new()
        .with(UseSkillTool::new(Arc::clone(&index)))
        .unwrap();
    assert_eq!(
        registry.effect(ToolCall {
            id: "c",
            name: "use_skill",
            input: ToolInput::Valid(&json!({ "name": "deploy" })),
        }),
        Effect::ReadOnly
    );

    let folder = path.parent().unwrap().display().to_string();
    let expected = format!(
        "# Skill: deploy\n(The skill's folder is {folder}; files these instructions mention are \
         there.)\n\nRun `make deploy`.\nThen check the logs.\n"
    );
    let output = use_skill(&registry, "deploy").await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(output.content, expected);
    assert_eq!(output.metadata["skill"], "deploy");
    assert!(index.is_loaded("deploy"));

    // Changed on disk after the first load: the kept body is what comes back.
    std::fs::write(&path, "---\ndescription: Deploy.\n---\nSomething else.\n").unwrap();
    let again = use_skill(&registry, "deploy").await;
    assert_eq!(again.content, expected);
    assert_eq!(
        index.load("deploy").unwrap(),
        "Run `make deploy`.\nThen check the logs."
    );
    // Even removed.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(use_skill(&registry, "deploy").await.content, expected);

    // A file skill has no folder line; names are matched ignoring case and spaces.
    let output = use_skill(&registry, " Plain ").await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(
        output.content,
        "# Skill: plain\n\nPlain skill.\n\nIts steps.\n"
    );
    assert_eq!(
        output.metadata["path"],
        plain.display().to_string().as_str()
    );

    let debug = format!("{index:?}");
    assert_eq!(
        debug,
        r#"SkillIndex { skills: ["deploy", "plain"], loaded: ["deploy", "plain"] }"#
    );
}

#[tokio::test]
async fn an_unknown_skill_is_an_error_result_listing_the_known_ones() {
    let s = Setup::new();
    write(&s.project, ".keel/skills/deploy.md", "Deploy.\n");
    write(&s.home, "skills/review.md", "Review.\n");
    let index = Arc::new(s.index());
    let registry = ToolRegistry::new()
        .with(UseSkillTool::new(Arc::clone(&index)))
        .unwrap();
    let output = use_skill(&registry, "nope").await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "no skill named `nope`; known: deploy, review"
    );
    assert_eq!(
        index.load("nope").unwrap_err().to_string(),
        "no skill named `nope`; known: deploy, review"
    );

    let empty = UseSkillTool::new(Arc::new(SkillIndex::default()));
    let registry = ToolRegistry::new().with(empty).unwrap();
    let output = use_skill(&registry, "deploy").await;
    assert!(output.is_error);
    assert_eq!(output.content, "no skill named `deploy`; known: none");
}

#[test]
fn the_tool_description_names_no_skill() {
    let s = Setup::new();
    write(&s.project, ".keel/skills/deploy.md", "Deploy.\n");
    let with = UseSkillTool::new(Arc::new(s.index()));
    let without = UseSkillTool::new(Arc::new(SkillIndex::default()));
    assert_eq!(Tool::description(&with), Tool::description(&without));
    assert!(!Tool::description(&with).contains("deploy"));
    assert_eq!(<UseSkillTool as Tool>::NAME, "use_skill");
}

#[tokio::test]
async fn indexing_stops_at_the_front_matter_or_the_first_paragraph() {
    let s = Setup::new();
    let dir = ".keel/skills";
    // Bytes that are not UTF-8 after what indexing needs do not break indexing...
    let broken = write(
        &s.project,
        &format!("{dir}/broken-body.md"),
        b"---\ndescription: Fine front matter.\n---\nBody \xFF\xFE not UTF-8.\n",
    );
    write(
        &s.project,
        &format!("{dir}/broken-later.md"),
        b"First paragraph is fine.\n\nThe second \xFF is not.\n",
    );
    write(
        &s.project,
        &format!("{dir}/no-description/SKILL.md"),
        b"---\nname: no-description\n---\nThe paragraph.\n\n\xC3\x28 broken\n",
    );
    let index = Arc::new(s.index());
    assert_eq!(description(&index, "broken-body"), "Fine front matter.");
    assert_eq!(
        description(&index, "broken-later"),
        "First paragraph is fine."
    );
    assert_eq!(description(&index, "no-description"), "The paragraph.");
    assert!(!index.is_loaded("broken-body"));

    // ...and loading reports them cleanly, naming the file.
    let err = index.load("broken-body").unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: the file is not UTF-8 text (the first invalid byte is at offset 45)",
            broken.display()
        )
    );
    assert!(!index.is_loaded("broken-body"), "failures are not kept");
    let registry = ToolRegistry::new()
        .with(UseSkillTool::new(Arc::clone(&index)))
        .unwrap();
    let output = use_skill(&registry, "broken-later").await;
    assert!(output.is_error);
    assert!(
        output
            .content
            .contains("broken-later.md: the file is not UTF-8 text")
    );
}

#[tokio::test]
async fn skills_linked_from_outside_their_folder_are_skipped_and_checked_again_on_load() {
    let s = Setup::new();
    let outside = temp_dir();
    let secret_file = write(outside.path(), "secret.md", "SECRET first paragraph.\n");
    write(outside.path(), "folder/SKILL.md", "SECRET folder skill.\n");
    let skills = s.project.join(".keel/skills");
    write(&s.project, ".keel/skills/good/SKILL.md", "Good skill.\n");
    write(
        &s.project,
        ".keel/skills/shared/notes.md",
        "Shared notes.\n",
    );
    // A file skill, a folder skill's SKILL.md and a whole skill folder, linked from outside.
    std::os::unix::fs::symlink(&secret_file, skills.join("file.md")).unwrap();
    std::fs::create_dir_all(skills.join("linked")).unwrap();
    std::os::unix::fs::symlink(&secret_file, skills.join("linked/SKILL.md")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("folder"), skills.join("folder")).unwrap();
    // A link inside the skills folder is fine.
    std::os::unix::fs::symlink("shared/notes.md", skills.join("alias.md")).unwrap();

    let (index, warnings) = s.discover();
    assert_eq!(names(&index), ["alias", "good"]);
    let section = index.prompt_section().unwrap();
    assert!(!section.contains("SECRET"), "{section}");
    let outside_root = outside.path().canonicalize().unwrap();
    let skipped = |link: &str, target: PathBuf| {
        format!(
            "skill skipped: {}: it is a symlink to {}, outside {}; definitions must lie inside \
             their folder",
            skills.join(link).display(),
            target.display(),
            skills.display()
        )
    };
    assert_eq!(
        warnings,
        [
            skipped("file.md", outside_root.join("secret.md")),
            skipped("folder/SKILL.md", outside_root.join("folder/SKILL.md")),
            skipped("linked/SKILL.md", outside_root.join("secret.md")),
        ]
    );

    // A skill swapped for a link out after it was found is refused when it is used.
    let good = skills.join("good/SKILL.md");
    std::fs::remove_file(&good).unwrap();
    std::os::unix::fs::symlink(&secret_file, &good).unwrap();
    let registry = ToolRegistry::new()
        .with(UseSkillTool::new(Arc::new(index)))
        .unwrap();
    let output = use_skill(&registry, "good").await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        format!(
            "{}: it is a symlink to {}, outside {}; definitions must lie inside their folder",
            good.display(),
            outside_root.join("secret.md").display(),
            skills.display()
        )
    );
    assert_eq!(
        use_skill(&registry, "alias").await.content,
        "# Skill: alias\n\nShared notes.\n"
    );
}
