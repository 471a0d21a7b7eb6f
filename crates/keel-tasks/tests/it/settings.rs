//! A task's recorded settings carry its launching session's permission rules whole: ask
//! rules, Claude Code's spelling, and where path patterns start.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use keel_agents::Policies;
use keel_engine::{PermissionRules, RuleTexts, Verdict};
use keel_sandbox::SandboxPolicy;
use keel_tasks::{NewTask, SqliteTaskStore, TaskSettings, TaskStore};
use serde_json::json;

fn texts(list: &[&str]) -> Vec<String> {
    list.iter().map(|text| (*text).to_owned()).collect()
}

#[test]
fn a_tasks_settings_keep_ask_rules_claude_rules_and_the_project_root() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("project");
    let sub = workspace.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir_all(workspace.join("secrets")).unwrap();
    let rules = PermissionRules::from_texts(&RuleTexts {
        allow: texts(&["Bash(cargo test:*)"]),
        ask: texts(&["Bash(git push:*)"]),
        deny: texts(&["Bash(rm:*)", "Edit(/secrets/**)"]),
    })
    .unwrap()
    .with_project_root(&workspace);
    let policies = Policies::new(SandboxPolicy::default()).with_permissions(rules);
    let settings = TaskSettings::from_policies(&workspace, &policies).unwrap();
    assert_eq!(settings.ask_rules, ["Bash(git push:*)"]);
    assert_eq!(settings.deny_rules, ["Bash(rm:*)", "Edit(/secrets/**)"]);

    // Recorded in the store and read back, as the task's own `keel exec` does.
    let store = SqliteTaskStore::open(&dir.path().join("tasks.db")).unwrap();
    let task = NewTask {
        parent_session: None,
        agent: "main".into(),
        runner: "keel".into(),
        task_prompt: "push it".into(),
        workdir: sub.clone(),
        timeout_secs: 60,
    };
    let record = store
        .create(&task, &settings, &dir.path().join("logs"))
        .unwrap();
    let loaded = keel_tasks::load_settings(&store, &record.id).unwrap();
    assert_eq!(loaded, settings);

    let task_rules = loaded.permission_rules().unwrap();
    assert_eq!(task_rules.texts(), policies.permissions().texts());
    assert_eq!(
        task_rules.check(
            "run_command",
            &json!({"command": "git push origin main"}),
            &sub
        ),
        Verdict::AskRule {
            rule: "Bash(git push:*)".into()
        }
    );
    assert_eq!(
        task_rules.check("run_command", &json!({"command": "rm -rf x"}), &sub),
        Verdict::Deny {
            rule: "Bash(rm:*)".into()
        }
    );
    // The task works in `sub`, but `/secrets/**` still starts at the session's project root.
    assert_eq!(
        task_rules.check(
            "write_file",
            &json!({"path": "../secrets/key", "content": "x"}),
            &sub
        ),
        Verdict::Deny {
            rule: "Edit(/secrets/**)".into()
        }
    );
}

#[test]
fn without_a_project_root_path_rules_start_at_the_sessions_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().to_path_buf();
    std::fs::create_dir_all(workspace.join("sub")).unwrap();
    let rules = PermissionRules::from_texts(&RuleTexts {
        deny: texts(&["Edit(/Cargo.lock)"]),
        ..RuleTexts::default()
    })
    .unwrap();
    let policies = Policies::new(SandboxPolicy::default()).with_permissions(rules);
    let settings = TaskSettings::from_policies(&workspace, &policies).unwrap();
    assert_eq!(settings.project_root.as_deref(), Some(workspace.as_path()));
    let task_rules = settings.permission_rules().unwrap();
    assert!(matches!(
        task_rules.check(
            "write_file",
            &json!({"path": "../Cargo.lock", "content": "x"}),
            &workspace.join("sub")
        ),
        Verdict::Deny { .. }
    ));
}

#[test]
fn settings_recorded_by_an_older_keel_load_without_ask_rules() {
    let old = json!({
        "policy": SandboxPolicy::default(),
        "roots": ["/work/project"],
        "allow_read": [],
        "approvals": "deny",
        "allow_rules": ["run_command(cargo test*)"],
        "deny_rules": ["run_command(rm *)"],
        "hooks": [],
        "runner": ["keel", "exec"],
    });
    let settings: TaskSettings = serde_json::from_value(old).unwrap();
    assert!(settings.ask_rules.is_empty());
    assert_eq!(settings.project_root, None::<PathBuf>);
    let rules = settings.permission_rules().unwrap();
    assert_eq!(rules.deny[0].to_string(), "run_command(rm *)");
    assert!(rules.ask.is_empty());
}

#[test]
fn an_invalid_recorded_rule_is_an_error_naming_it() {
    let mut settings = TaskSettings::new(&std::env::temp_dir(), SandboxPolicy::default());
    settings.ask_rules = texts(&["read_file(.env"]);
    let error = settings.permission_rules().unwrap_err().to_string();
    assert!(error.contains("read_file(.env"), "{error}");
}
