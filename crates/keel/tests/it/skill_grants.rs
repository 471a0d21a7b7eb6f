//! A skill's `allowed-tools` (Claude Code's Agent Skills), honoured: once the session has used
//! the skill, calls its rules cover run without asking for the rest of the session. The
//! user's skills grant; an untrusted project's skills do not (with a warning naming them);
//! deny and ask rules, protected paths, read-only modes and other sessions are untouched.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use keel::prelude::*;
use keel_engine::RuleTexts;
use keel_provider::{ContentBlock, Message};
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

/// Refuses every question, and remembers what it was asked. `changes`: asks about every
/// change, as Claude Code's default mode does; `read_only`: a read-only (plan) mode.
#[derive(Default)]
struct Asker {
    changes: bool,
    read_only: bool,
    asked: Mutex<Vec<String>>,
}

impl Asker {
    fn about_changes() -> Arc<Self> {
        Arc::new(Self {
            changes: true,
            ..Self::default()
        })
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Approver for Asker {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let asked = request
            .input
            .get("command")
            .or_else(|| request.input.get("path"))
            .and_then(|value| value.as_str())
            .unwrap_or_default()
            .to_owned();
        self.asked.lock().unwrap().push(asked);
        Decision::Deny("the person says no".into())
    }

    fn asks_about_changes(&self) -> bool {
        self.changes
    }

    fn refuses_changes(&self) -> Option<String> {
        self.read_only
            .then(|| "refused: plan mode changes nothing".to_owned())
    }
}

/// A command that changes nothing but is asked about by an approver that asks about every
/// change. (No parentheses: allow rules, and grants, cover a command only if they cover each
/// part of it, and a command is split at `(` and `)` even inside quotes.)
const PRINT: &str = "python3 -c 'import this'";
/// What it prints.
const ZEN: &str = "Beautiful is better than ugly";
const SKILL: &str = "---\nname: py\ndescription: Runs Python snippets.\n\
                     allowed-tools: Bash(python3:*), Write\n---\nRun python3 -c to compute.\n";

/// Writes skill `py` (allowed-tools `Bash(python3:*)` and `Write`) into the skills folder
/// `dir`.
fn write_skill(dir: &Path, text: &str) {
    std::fs::create_dir_all(dir.join("py")).unwrap();
    std::fs::write(dir.join("py/SKILL.md"), text).unwrap();
}

/// The `(content, is_error)` of the result of call `id`.
fn result(history: &[Message], id: &str) -> (String, bool) {
    history
        .iter()
        .flat_map(|message| message.content.iter())
        .find_map(|block| match block {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } if tool_use_id == id => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {id}"))
}

fn assert_refused(history: &[Message], id: &str) {
    let (content, is_error) = result(history, id);
    assert!(
        is_error && content.contains("denied"),
        "{id} ran: {content}"
    );
}

fn assert_ran(history: &[Message], id: &str, expected: &str) {
    let (content, is_error) = result(history, id);
    assert!(
        !is_error && content.contains(expected),
        "{id} did not run as expected: {content}"
    );
}

/// A workspace, a keel home and a user home, with the builder over `model` and `approver`.
struct Setup {
    workspace: tempfile::TempDir,
    home: tempfile::TempDir,
    user: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let setup = Self {
            workspace: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
            user: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(setup.workspace.path().join(".git")).unwrap();
        setup
    }

    fn builder(&self, model: Arc<ScriptedProvider>, approver: Arc<Asker>) -> CodingAgentBuilder {
        CodingAgent::builder(model)
            .cwd(self.workspace.path())
            .home(self.home.path())
            .user_home(self.user.path())
            .claude_home(self.user.path().join(".claude"))
            .approver(approver)
            .snapshots(None)
    }
}

#[tokio::test]
async fn a_user_skill_grants_its_allowed_tools_to_the_session_after_it_is_used() {
    let setup = Setup::new();
    write_skill(&setup.home.path().join("skills"), SKILL);
    let model = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("before", "run_command", json!({"command": PRINT}))
            .then_tool_call("use", "use_skill", json!({"name": "py"}))
            .then_tool_call("after", "run_command", json!({"command": PRINT}))
            .then_tool_call("rm", "run_command", json!({"command": "rm x.txt"}))
            .then_tool_call(
                "chained",
                "run_command",
                json!({"command": format!("{PRINT} && touch y.txt")}),
            )
            .then_tool_call(
                "write",
                "write_file",
                json!({"path": "notes.txt", "content": "hi\n"}),
            )
            .then_tool_call(
                "config",
                "write_file",
                json!({"path": ".claude/settings.json", "content": "{}\n"}),
            )
            .then_text("done")
            .then_tool_call("other", "run_command", json!({"command": PRINT}))
            .then_text("done"),
    );
    let approver = Asker::about_changes();
    let agent = setup
        .builder(model.clone(), approver.clone())
        .build()
        .unwrap();
    assert!(
        agent
            .warnings()
            .iter()
            .all(|w| !w.contains("allowed-tools")),
        "{:?}",
        agent.warnings()
    );
    std::fs::write(setup.workspace.path().join("x.txt"), "kept\n").unwrap();
    let mut session = agent.session().unwrap();
    let outcome = session.run("compute").await;
    assert_eq!(outcome.stop, Stop::Completed);
    let history = session.history();

    // Before the skill is used, the command is asked about (and refused).
    assert_refused(history, "before");
    let (loaded, _) = result(history, "use");
    assert!(
        loaded.contains("run without asking") && loaded.contains("Bash(python3:*)"),
        "{loaded}"
    );
    // After: it runs without a question.
    assert_ran(history, "after", ZEN);
    // What the rules do not cover is asked about as before: another command, a command
    // only partly covered, and a protected path even though `Write` is granted.
    assert_refused(history, "rm");
    assert_refused(history, "chained");
    assert_ran(history, "write", "");
    assert_refused(history, "config");
    assert_eq!(
        approver.asked(),
        [
            PRINT.to_owned(),
            "rm x.txt".to_owned(),
            format!("{PRINT} && touch y.txt"),
            ".claude/settings.json".to_owned(),
        ]
    );
    assert!(setup.workspace.path().join("x.txt").exists());
    assert!(!setup.workspace.path().join("y.txt").exists());
    assert!(setup.workspace.path().join("notes.txt").exists());
    assert!(
        !setup
            .workspace
            .path()
            .join(".claude/settings.json")
            .exists()
    );
    let grants = agent.delegates().unwrap().skill_grants();
    assert_eq!(
        grants.granted(session.id()),
        [
            ("py".to_owned(), "Bash(python3:*)".to_owned()),
            ("py".to_owned(), "Write".to_owned())
        ]
    );

    // Another session of the same agent holds nothing.
    let mut other = agent.session().unwrap();
    other.run("compute").await;
    assert_refused(other.history(), "other");
}

#[tokio::test]
async fn a_granted_destructive_command_runs_under_the_default_approver() {
    // DenyGated refuses destructive calls; overwriting a file that exists is one.
    let setup = Setup::new();
    write_skill(&setup.user.path().join(".claude/skills"), SKILL);
    let workspace = setup.workspace.path();
    std::fs::write(workspace.join("zen.txt"), "old\n").unwrap();
    std::fs::write(workspace.join("keep.txt"), "kept\n").unwrap();
    let overwrite = format!("{PRINT} > zen.txt");
    let model = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("before", "run_command", json!({"command": overwrite}))
            .then_tool_call("use", "use_skill", json!({"name": "py"}))
            .then_tool_call("after", "run_command", json!({"command": overwrite}))
            .then_tool_call("rm", "run_command", json!({"command": "rm keep.txt"}))
            .then_text("done"),
    );
    let agent = CodingAgent::builder(model)
        .cwd(workspace)
        .home(setup.home.path())
        .user_home(setup.user.path())
        .claude_home(setup.user.path().join(".claude"))
        .snapshots(None)
        .build()
        .unwrap();
    let mut session = agent.session().unwrap();
    session.run("clean up").await;
    let history = session.history();
    assert_refused(history, "before");
    assert_ran(history, "after", "");
    assert_refused(history, "rm");
    let zen = std::fs::read_to_string(workspace.join("zen.txt")).unwrap();
    assert!(zen.contains(ZEN), "{zen}");
    assert!(workspace.join("keep.txt").exists());
}

/// Runs `use_skill py` then [`PRINT`] in an agent `configure` finishes building, and returns
/// the agent's warnings, the use_skill result, the command's result and what was asked.
async fn use_then_print(
    setup: &Setup,
    configure: impl FnOnce(CodingAgentBuilder) -> CodingAgentBuilder,
    approver: Arc<Asker>,
) -> (Vec<String>, String, (String, bool), Vec<String>) {
    let model = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("use", "use_skill", json!({"name": "py"}))
            .then_tool_call("after", "run_command", json!({"command": PRINT}))
            .then_text("done"),
    );
    let agent = configure(setup.builder(model, approver.clone()))
        .build()
        .unwrap();
    let mut session = agent.session().unwrap();
    session.run("compute").await;
    let history = session.history();
    (
        agent.warnings().to_vec(),
        result(history, "use").0,
        result(history, "after"),
        approver.asked(),
    )
}

#[tokio::test]
async fn an_untrusted_projects_skill_grants_nothing_and_says_so() {
    let setup = Setup::new();
    write_skill(&setup.workspace.path().join(".claude/skills"), SKILL);
    let (warnings, loaded, after, asked) =
        use_then_print(&setup, |b| b, Asker::about_changes()).await;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("`py`") && w.contains("not trusted")),
        "{warnings:?}"
    );
    assert!(
        loaded.contains("skill `py`") && loaded.contains("not trusted"),
        "{loaded}"
    );
    assert!(after.1 && after.0.contains("denied"), "{after:?}");
    assert_eq!(asked, [PRINT]);
}

#[tokio::test]
async fn a_trusted_projects_skill_grants() {
    let setup = Setup::new();
    write_skill(&setup.workspace.path().join(".keel/skills"), SKILL);
    let (warnings, loaded, after, asked) = use_then_print(
        &setup,
        |b| b.trust_project_skills(true),
        Asker::about_changes(),
    )
    .await;
    assert!(
        warnings.iter().all(|w| !w.contains("allowed-tools")),
        "{warnings:?}"
    );
    assert!(loaded.contains("run without asking"), "{loaded}");
    assert!(!after.1 && after.0.contains(ZEN), "{after:?}");
    assert!(asked.is_empty(), "{asked:?}");
}

#[tokio::test]
async fn an_ask_rule_still_asks_after_the_grant() {
    let setup = Setup::new();
    write_skill(&setup.home.path().join("skills"), SKILL);
    let rules = PermissionRules::from_texts(&RuleTexts {
        ask: vec!["Bash(python3:*)".into()],
        ..RuleTexts::default()
    })
    .unwrap();
    let (_, loaded, after, asked) =
        use_then_print(&setup, |b| b.permissions(rules), Asker::about_changes()).await;
    assert!(loaded.contains("run without asking"), "{loaded}");
    assert!(after.1 && after.0.contains("denied"), "{after:?}");
    assert_eq!(asked, [PRINT]);
}

#[tokio::test]
async fn a_deny_rule_and_a_read_only_mode_still_refuse_after_the_grant() {
    let setup = Setup::new();
    write_skill(&setup.home.path().join("skills"), SKILL);
    let rules = PermissionRules::parse(&[], &["Bash(python3:*)".into()]).unwrap();
    let (_, _, after, asked) =
        use_then_print(&setup, |b| b.permissions(rules), Asker::about_changes()).await;
    assert!(
        after.1 && after.0.contains("permission rule Bash(python3:*) forbids"),
        "{after:?}"
    );
    assert!(asked.is_empty(), "{asked:?}");

    let plan = Arc::new(Asker {
        changes: true,
        read_only: true,
        ..Asker::default()
    });
    let (_, _, after, _) = use_then_print(&setup, |b| b, plan).await;
    assert!(after.1 && after.0.contains("plan mode"), "{after:?}");
}

#[tokio::test]
async fn an_allowed_tools_entry_that_is_not_a_rule_is_ignored_with_a_warning() {
    let setup = Setup::new();
    write_skill(
        &setup.home.path().join("skills"),
        "---\nname: py\ndescription: Runs Python snippets.\n\
         allowed-tools: Bash(python3:*), Bash(unclosed\n---\nRun python3.\n",
    );
    let (warnings, loaded, after, _) = use_then_print(&setup, |b| b, Asker::about_changes()).await;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("skill `py`") && w.contains("Bash(unclosed")),
        "{warnings:?}"
    );
    assert!(loaded.contains("Bash(unclosed"), "{loaded}");
    assert!(!after.1 && after.0.contains(ZEN), "{after:?}");
}
