//! Claude Code's permission rules through the loop: a model's calls under `Bash(rm:*)`,
//! `Bash(npm test:*)`, `Edit(src/**)`, `Read(~/.ssh/**)`, `Write(//…/**)` and an ask rule,
//! with the built-in tools, and the error a misspelt tool name gets.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use keel_engine::{
    Agent, ApprovalRequest, Approver, Decision, PermissionRules, RuleTexts, ScopePattern, Session,
    Stop,
};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::{ScriptedProvider, tool_results};
use serde_json::{Value, json};

/// Asks about every change the rules leave open, records what it was asked, and denies.
#[derive(Clone, Default)]
struct Strict {
    asked: Arc<Mutex<Vec<(String, String)>>>,
}

impl Strict {
    /// `(primary argument, reason)` of each request.
    fn asked(&self) -> Vec<(String, String)> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Approver for Strict {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let argument = match &request.scope.pattern {
            ScopePattern::Command(text) | ScopePattern::Path(text) => text.clone(),
            ScopePattern::Input(json) => json.clone(),
        };
        self.asked
            .lock()
            .unwrap()
            .push((argument, request.reason.clone()));
        Decision::Deny("not approved".into())
    }

    fn asks_about_changes(&self) -> bool {
        true
    }
}

fn texts(list: &[&str]) -> Vec<String> {
    list.iter().map(|text| (*text).to_owned()).collect()
}

/// A session in `workspace` with the built-in tools, `rules` and `approver`, whose model
/// makes `calls` one per turn, then ends.
fn session(
    workspace: &Path,
    rules: PermissionRules,
    approver: Strict,
    calls: &[(&str, Value)],
) -> Session {
    let provider = calls
        .iter()
        .enumerate()
        .fold(ScriptedProvider::new(), |provider, (i, (tool, input))| {
            provider.then_tool_call(&format!("t{i}"), tool, input.clone())
        })
        .then_text("done");
    let tools = default_tools(
        &PathSandbox::new(workspace).unwrap(),
        &SandboxPolicy::default(),
    )
    .unwrap();
    let names: Vec<String> = tools.names().into_iter().map(str::to_owned).collect();
    let known: Vec<&str> = names.iter().map(String::as_str).collect();
    rules.validate(&known).unwrap();
    Agent::builder(Arc::new(provider))
        .model("m")
        .tools(tools)
        .permissions(rules)
        .approver(approver)
        .build()
        .unwrap()
        .session(workspace)
        .unwrap()
}

#[tokio::test]
async fn bash_rules_deny_allow_and_ask_by_claude_code_s_patterns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("build")).unwrap();
    let rules = PermissionRules::from_texts(&RuleTexts {
        allow: texts(&["Bash(npm test:*)", "Bash(git *)"]),
        ask: texts(&["Bash(git push:*)"]),
        deny: texts(&["Bash(rm:*)"]),
    })
    .unwrap();
    let approver = Strict::default();
    let run = |command: &str| ("run_command", json!({ "command": command }));
    let mut session = session(
        dir.path(),
        rules,
        approver.clone(),
        &[
            run("rm -rf build"),
            run("npm test -- -x"),
            run("npm testing"),
            run("git push origin main"),
            run("git --version"),
        ],
    );
    assert_eq!(session.run("go").await.stop, Stop::Completed);
    let results = tool_results(session.history());
    assert_eq!(
        results[0],
        (
            "denied: the permission rule Bash(rm:*) forbids this call".to_owned(),
            true
        )
    );
    assert!(dir.path().join("build").is_dir(), "rm ran");
    assert!(
        !results[1].0.starts_with("denied"),
        "npm test -- -x was allowed: {results:?}"
    );
    assert_eq!(results[2].0, "denied: not approved");
    assert_eq!(results[3].0, "denied: not approved");
    assert!(!results[4].0.starts_with("denied"), "{results:?}");
    assert_eq!(
        approver.asked(),
        [
            (
                "npm testing".to_owned(),
                "it may change files or run a command".to_owned()
            ),
            (
                "git push origin main".to_owned(),
                "the permission rule Bash(git push:*) asks for approval".to_owned()
            ),
        ],
        "npm testing is not npm test, and the ask rule beats Bash(git *)"
    );
}

#[tokio::test]
async fn path_rules_resolve_the_call_s_path_and_their_anchors() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let workspace = home.join("project");
    let outside = dir.path().join("x");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "secret").unwrap();
    std::fs::write(workspace.join("src/lib.rs"), "fn a() {}\n").unwrap();
    let write_outside = format!("Write(/{}/**)", outside.display());
    let rules = PermissionRules::from_texts(&RuleTexts {
        allow: texts(&["Edit(src/**)", &write_outside]),
        ask: Vec::new(),
        deny: texts(&["Read(~/.ssh/**)"]),
    })
    .unwrap()
    .with_home(&home);
    let approver = Strict::default();
    let key = home.join(".ssh/id_rsa").display().to_string();
    let mut session = session(
        &workspace,
        rules,
        approver.clone(),
        &[
            ("read_file", json!({ "path": key })),
            ("read_file", json!({ "path": "../.ssh/id_rsa" })),
            ("read_file", json!({ "path": "src/../../.ssh/id_rsa" })),
            (
                "write_file",
                json!({ "path": "src/new.rs", "content": "fn b() {}\n" }),
            ),
            (
                "patch_file",
                json!({ "path": "src/lib.rs", "old_string": "fn a", "new_string": "fn c" }),
            ),
            (
                "write_file",
                json!({ "path": "src/../../etc/passwd", "content": "x" }),
            ),
            ("write_file", json!({ "path": "notes.txt", "content": "x" })),
            (
                "write_file",
                json!({ "path": outside.join("y/z.txt").display().to_string(), "content": "x" }),
            ),
        ],
    );
    assert_eq!(session.run("go").await.stop, Stop::Completed);
    let results = tool_results(session.history());
    let denied_key = "denied: the permission rule Read(~/.ssh/**) forbids this call";
    for (index, result) in results[..3].iter().enumerate() {
        assert_eq!(result.0, denied_key, "read {index}: {results:?}");
    }
    assert!(
        !results.iter().any(|(text, _)| text.contains("secret")),
        "{results:?}"
    );
    assert_eq!(
        approver.asked(),
        [
            (
                "src/../../etc/passwd".to_owned(),
                "it may change files or run a command".to_owned()
            ),
            (
                "notes.txt".to_owned(),
                "it may change files or run a command".to_owned()
            ),
        ],
        "Edit(src/**) covers both edits in src and nothing outside it; Write(//…) the \
         absolute path: {results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("src/new.rs")).unwrap(),
        "fn b() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("src/lib.rs")).unwrap(),
        "fn c() {}\n"
    );
    assert!(!home.join("etc/passwd").exists() && !dir.path().join("etc").exists());
    assert!(!workspace.join("notes.txt").exists());
}

#[test]
fn a_misspelt_tool_name_is_an_error_naming_the_tools_there_are() {
    let dir = tempfile::tempdir().unwrap();
    let tools = default_tools(
        &PathSandbox::new(dir.path()).unwrap(),
        &SandboxPolicy::default(),
    )
    .unwrap();
    let rules = PermissionRules::parse(&[], &["Bsah(rm:*)".into()]).unwrap();
    let error = rules.validate(&tools.names()).unwrap_err().to_string();
    assert!(
        error.starts_with(
            "unknown tool `Bsah` in permission rule `Bsah(rm:*)`; Claude Code's tools are Bash, "
        ),
        "{error}"
    );
    assert!(error.contains("keel's are run_command, "), "{error}");
    assert!(
        error.contains("git_commit"),
        "the registry's names: {error}"
    );
    assert!(
        error.ends_with("MCP tools are named mcp__<server>__<tool>"),
        "{error}"
    );
}
