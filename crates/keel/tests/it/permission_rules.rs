//! Permission rules given to the builder: a rule naming a tool the agent does not have stops
//! the build (a misspelt deny rule would forbid nothing); Claude Code's spelling works; a rule
//! naming a Claude Code tool keel lacks is a warning.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use keel::engine::RuleTexts;
use keel::prelude::*;
use keel_provider::ContentBlock;
use keel_test_support::scripted::ScriptedProvider;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

fn texts(list: &[&str]) -> Vec<String> {
    list.iter().map(|text| (*text).to_owned()).collect()
}

fn builder(provider: Arc<ScriptedProvider>, dir: &Path, home: &Path) -> CodingAgentBuilder {
    let builder = CodingAgent::builder(provider)
        .cwd(dir)
        .home(home)
        .approver(AllowAll);
    #[cfg(feature = "snapshots")]
    let builder = builder.snapshots(None);
    builder
}

fn rules(allow: &[&str], ask: &[&str], deny: &[&str]) -> PermissionRules {
    PermissionRules::from_texts(&RuleTexts {
        allow: texts(allow),
        ask: texts(ask),
        deny: texts(deny),
    })
    .unwrap()
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// A host's own tool.
struct Deploy;

impl Tool for Deploy {
    type Args = NoArgs;
    const NAME: &'static str = "deploy";
    fn description(&self) -> &str {
        "Deploys."
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("deployed"))
    }
}

#[test]
fn a_rule_naming_an_unknown_tool_stops_the_build_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    for (rules, tool, rule) in [
        (rules(&[], &[], &["Bsah(rm:*)"]), "Bsah", "Bsah(rm:*)"),
        (rules(&["run_comand"], &[], &[]), "run_comand", "run_comand"),
        (rules(&[], &["deploy"], &[]), "deploy", "deploy"),
    ] {
        let error = builder(Arc::new(ScriptedProvider::new()), dir.path(), home.path())
            .permissions(rules)
            .build()
            .err()
            .unwrap_or_else(|| panic!("{rule} was accepted"));
        assert!(matches!(error, BuildError::Permissions(_)), "{error:?}");
        let message = error.to_string();
        assert!(
            message.contains(&format!(
                "unknown tool `{tool}` in permission rule `{rule}`"
            )),
            "{message}"
        );
    }
}

#[test]
fn rules_may_name_any_tool_the_agent_has_claude_codes_and_mcp_tools() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let agent = builder(Arc::new(ScriptedProvider::new()), dir.path(), home.path())
        .tool(Deploy)
        .permissions(rules(
            &[
                "read_file",
                "Bash(cargo test:*)",
                "mcp__github__create_issue",
            ],
            &["deploy", "Bash(git push:*)"],
            &["Edit(/secrets/**)", "run_command(rm *)"],
        ))
        .build()
        .unwrap();
    assert!(agent.warnings().is_empty(), "{:?}", agent.warnings());
}

#[test]
fn a_rule_naming_a_claude_code_tool_keel_lacks_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let agent = builder(Arc::new(ScriptedProvider::new()), dir.path(), home.path())
        .permissions(rules(
            &["Bash(npm test:*)"],
            &[],
            &["WebFetch(domain:x.com)"],
        ))
        .build()
        .unwrap();
    let warnings = agent.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("permission deny rule WebFetch(domain:x.com) names WebFetch")
            && warnings[0].contains("matches nothing"),
        "{}",
        warnings[0]
    );
}

#[tokio::test]
async fn a_claude_deny_rule_refuses_the_models_command() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("x")).unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("call_1", "run_command", json!({"command": "rm -rf x"}))
            .then_text("done"),
    );
    let agent = builder(provider.clone(), dir.path(), home.path())
        .permissions(rules(&["Bash"], &[], &["Bash(rm:*)"]))
        .build()
        .unwrap();
    let mut session = agent.session().unwrap();
    let outcome = session.run("clean up").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    assert!(dir.path().join("x").is_dir(), "rm ran");
    let results: Vec<(String, bool)> = provider
        .requests()
        .iter()
        .flat_map(|request| request.messages.clone())
        .flat_map(|message| message.content)
        .filter_map(|block| match block {
            ContentBlock::ToolResult {
                content, is_error, ..
            } => Some((content, is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].1, "{results:?}");
    assert!(results[0].0.contains("Bash(rm:*)"), "{}", results[0].0);
}

#[test]
fn keel_tools_names_every_tool_of_a_full_agent() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let provider = Arc::new(ScriptedProvider::new());
    let agent = builder(provider, dir.path(), home.path()).build().unwrap();
    for name in agent.agent().tools().names() {
        assert!(keel::KEEL_TOOLS.contains(&name), "{name}");
    }
}

#[test]
fn a_hook_matcher_naming_no_tool_stops_the_build_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let hook = |matcher: &str| keel::engine::HookConfig {
        event: keel::engine::HookEvent::PreToolUse,
        matcher: Some(matcher.to_owned()),
        command: "true".to_owned(),
        timeout_secs: None,
    };
    let provider = Arc::new(ScriptedProvider::new());
    let error = builder(provider.clone(), dir.path(), home.path())
        .hook_configs(vec![hook("Bash|Wrte")])
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("`Wrte`"), "{error}");
    // Claude's names, keel's, patterns and MCP tools are fine.
    builder(provider, dir.path(), home.path())
        .hook_configs(vec![hook(
            "Bash|Edit|write_file|spawn_agent|mcp__gh__.*|.*",
        )])
        .build()
        .unwrap();
}
