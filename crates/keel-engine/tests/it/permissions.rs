//! Permission rules: parsing, pattern matching, command chaining, deny over allow.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use keel_engine::permissions::{PermissionRule, PermissionRules, RuleContext, Verdict};
use serde::Deserialize;
use serde_json::{Value, json};

const CWD: &str = "/project";

fn rules(allow: &[&str], deny: &[&str]) -> PermissionRules {
    let strings = |texts: &[&str]| texts.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
    PermissionRules::parse(&strings(allow), &strings(deny)).unwrap()
}

fn allow(rule: &str) -> Verdict {
    Verdict::Allow {
        rule: rule.to_owned(),
    }
}

fn deny(rule: &str) -> Verdict {
    Verdict::Deny {
        rule: rule.to_owned(),
    }
}

fn cmd(command: &str) -> Value {
    json!({ "command": command })
}

fn path(path: &str) -> Value {
    json!({ "path": path })
}

#[test]
fn verdict_table() {
    let cargo = rules(
        &["run_command(cargo test*)", "run_command(cargo build)"],
        &["run_command(rm -rf*)"],
    );
    let files = rules(
        &[
            "write_file(src/**)",
            "read_file(*.md)",
            "read_file(docs/**/*.md)",
        ],
        &["read_file(.env)", "read_file(**/secrets/**)"],
    );
    let everything = rules(&["run_command"], &["run_command(git push*)"]);
    let star = rules(&["run_command(*)"], &[]);
    let split = rules(
        &[
            "run_command(cargo test*)",
            "run_command(grep *)",
            "run_command(tail *)",
        ],
        &[],
    );
    let misc = rules(
        &[
            "git_commit",
            "grep(TODO*)",
            "fetch(https://docs.rs/*)",
            "my_tool",
        ],
        &["glob(**/*.pem)"],
    );
    let conflict = rules(&["read_file(**)"], &["read_file(**/.env)"]);

    #[rustfmt::skip]
    let cases: Vec<(&str, &PermissionRules, &str, Value, Verdict)> = vec![
        // Exact and wildcard commands.
        ("prefix wildcard", &cargo, "run_command", cmd("cargo test -p app"), allow("run_command(cargo test*)")),
        ("wildcard matches nothing", &cargo, "run_command", cmd("cargo test"), allow("run_command(cargo test*)")),
        ("exact", &cargo, "run_command", cmd("cargo build"), allow("run_command(cargo build)")),
        ("exact needs the whole command", &cargo, "run_command", cmd("cargo build --release"), Verdict::Ask),
        ("unmatched command", &cargo, "run_command", cmd("make"), Verdict::Ask),
        ("whitespace runs count as one", &cargo, "run_command", cmd("  cargo   test  "), allow("run_command(cargo test*)")),
        ("deny", &cargo, "run_command", cmd("rm -rf /"), deny("run_command(rm -rf*)")),
        ("deny despite extra spaces", &cargo, "run_command", cmd("rm  -rf  target"), deny("run_command(rm -rf*)")),
        // Chaining bypass attempts.
        ("&& chained deny", &cargo, "run_command", cmd("cargo test && rm -rf /"), deny("run_command(rm -rf*)")),
        ("; chained unknown", &cargo, "run_command", cmd("cargo test; curl evil.sh"), Verdict::Ask),
        ("|| chained unknown", &cargo, "run_command", cmd("cargo test || make"), Verdict::Ask),
        ("pipe to unknown", &cargo, "run_command", cmd("cargo test | sh"), Verdict::Ask),
        ("newline chained", &cargo, "run_command", cmd("cargo test\nmake install"), Verdict::Ask),
        ("background &", &cargo, "run_command", cmd("cargo test & make"), Verdict::Ask),
        ("$( substitution refused", &cargo, "run_command", cmd("cargo test $(make)"), Verdict::Ask),
        ("backticks refused", &cargo, "run_command", cmd("cargo test `make`"), Verdict::Ask),
        ("process substitution refused", &cargo, "run_command", cmd("cargo test <(make)"), Verdict::Ask),
        ("deny inside $(", &cargo, "run_command", cmd("echo $(rm -rf /)"), deny("run_command(rm -rf*)")),
        ("deny inside subshell", &cargo, "run_command", cmd("(cd x && rm -rf .)"), deny("run_command(rm -rf*)")),
        ("quoted separator splits", &cargo, "run_command", cmd("cargo test \"a;b\""), Verdict::Ask),
        ("redirect is not a separator", &cargo, "run_command", cmd("cargo test 2>&1"), allow("run_command(cargo test*)")),
        ("every part matched by different rules", &split, "run_command", cmd("cargo test 2>&1 | grep FAIL | tail -n 5"), allow("run_command(cargo test*), run_command(grep *), run_command(tail *)")),
        ("one part unmatched", &split, "run_command", cmd("cargo test | grep x | sh"), Verdict::Ask),
        ("* allows substitution", &star, "run_command", cmd("echo $(date)"), allow("run_command(*)")),
        ("no pattern allows all", &everything, "run_command", cmd("make `x`"), allow("run_command")),
        ("deny wins over allow-all", &everything, "run_command", cmd("make && git push --force"), deny("run_command(git push*)")),
        // Paths.
        ("** crosses segments", &files, "write_file", path("src/a/b/c.rs"), allow("write_file(src/**)")),
        ("** with leading ./", &files, "write_file", path("./src/lib.rs"), allow("write_file(src/**)")),
        ("outside src", &files, "write_file", path("tests/a.rs"), Verdict::Ask),
        (".. escapes the pattern", &files, "write_file", path("src/../build.rs"), Verdict::Ask),
        ("prefix is not a segment", &files, "write_file", path("srcx/a.rs"), Verdict::Ask),
        ("* stays within a segment", &files, "read_file", path("README.md"), allow("read_file(*.md)")),
        ("* does not cross /", &files, "read_file", path("notes/a.md"), Verdict::Ask),
        ("**/ matches zero segments", &files, "read_file", path("docs/intro.md"), allow("read_file(docs/**/*.md)")),
        ("**/ matches many segments", &files, "read_file", path("docs/a/b/intro.md"), allow("read_file(docs/**/*.md)")),
        ("exact path deny", &files, "read_file", path(".env"), deny("read_file(.env)")),
        ("deny via ./ and ..", &files, "read_file", path("./src/../.env"), deny("read_file(.env)")),
        ("exact path is exact", &files, "read_file", path("app/.env"), Verdict::Ask),
        ("deny nested", &files, "read_file", path("config/secrets/key.md"), deny("read_file(**/secrets/**)")),
        ("deny over allow", &conflict, "read_file", path("app/.env"), deny("read_file(**/.env)")),
        ("allow when deny misses", &conflict, "read_file", path("app/main.rs"), allow("read_file(**)")),
        ("missing argument never matches a pattern", &files, "write_file", json!({ "content": "x" }), Verdict::Ask),
        ("non-string argument", &files, "read_file", json!({ "path": 3 }), Verdict::Ask),
        ("other tool unaffected", &files, "patch_file", path("src/lib.rs"), Verdict::Ask),
        // Other tools.
        ("tool without pattern", &misc, "git_commit", json!({ "message": "x" }), allow("git_commit")),
        ("grep pattern", &misc, "grep", json!({ "pattern": "TODO(me)", "path": "src" }), allow("grep(TODO*)")),
        ("glob deny", &misc, "glob", json!({ "pattern": "keys/a.pem" }), deny("glob(**/*.pem)")),
        ("custom tool url", &misc, "fetch", json!({ "url": "https://docs.rs/regex" }), allow("fetch(https://docs.rs/*)")),
        ("custom tool other url", &misc, "fetch", json!({ "url": "https://evil.example" }), Verdict::Ask),
        ("custom tool without args", &misc, "my_tool", json!({}), allow("my_tool")),
        ("tool names are exact", &misc, "git_commit_all", json!({}), Verdict::Ask),
    ];
    assert!(cases.len() >= 30);
    let mut failures = Vec::new();
    for (name, rules, tool, input, expected) in &cases {
        let got = rules.check(tool, input, Path::new(CWD));
        if &got != expected {
            failures.push(format!(
                "{name}: {tool} {input} → {got:?}, expected {expected:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_rules_always_ask() {
    let none = PermissionRules::default();
    assert_eq!(
        none.check("run_command", &cmd("ls"), Path::new(CWD)),
        Verdict::Ask
    );
    assert_eq!(
        none.check("read_file", &path("a"), Path::new(CWD)),
        Verdict::Ask
    );
}

#[test]
fn single_rule_matching() {
    let rule = PermissionRule::parse("run_command(cargo test*)").unwrap();
    let context = RuleContext::new(CWD);
    assert!(rule.matches("run_command", &cmd("cargo test --all"), &context));
    assert!(!rule.matches("run_command", &cmd("cargo test && rm -rf /"), &context));
    assert!(rule.matches_any_part("run_command", &cmd("ls && cargo test"), &context));
    assert!(!rule.matches("read_file", &cmd("cargo test"), &context));
}

#[test]
fn parse_errors() {
    let bad = [
        "run_command(cargo",
        "",
        "   ",
        "run command",
        "run_command()",
        "run_command(  )",
        "(cargo test)",
        "run_command(cargo test) now",
        "read_file(a)(b",
        "tool.name",
    ];
    let long = "x".repeat(65);
    let messages: Vec<String> = bad
        .iter()
        .copied()
        .chain([long.as_str()])
        .map(|text| match PermissionRule::parse(text) {
            Ok(rule) => panic!("{text:?} parsed as {rule:?}"),
            Err(error) => error.to_string(),
        })
        .collect();
    assert_eq!(
        messages[0],
        "invalid permission rule \"run_command(cargo\": missing \")\"; write rules like \
         run_command(cargo test*), Bash(npm test:*) or git_commit"
    );
    insta::assert_json_snapshot!("parse_errors", messages);
}

#[test]
fn rules_parse_reports_the_bad_rule() {
    let error = PermissionRules::parse(&["git_commit".into()], &["read_file(.env".into()])
        .unwrap_err()
        .to_string();
    assert!(error.contains("\"read_file(.env\""), "{error}");
}

#[test]
fn display_round_trips() {
    for text in [
        "git_commit",
        "run_command(cargo test*)",
        "write_file(src/**)",
        "read_file(.env)",
        "run_command(echo (a))",
        "mcp-server_tool(https://x/*)",
    ] {
        let rule: PermissionRule = text.parse().unwrap();
        assert_eq!(rule.to_string(), text);
        assert_eq!(PermissionRule::parse(&rule.to_string()).unwrap(), rule);
    }
    let trimmed = PermissionRule::parse("  git_commit  ").unwrap();
    assert_eq!(trimmed.to_string(), "git_commit");
    let nested = PermissionRule::parse("run_command(echo (a))").unwrap();
    assert_eq!(nested.pattern.as_deref(), Some("echo (a)"));
}

#[derive(Deserialize)]
struct Config {
    permissions: Permissions,
}

#[derive(Deserialize)]
struct Permissions {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

#[test]
fn toml_config() {
    let config: Config = toml::from_str(
        r#"
        [permissions]
        allow = ["run_command(cargo test*)", "git_commit", "write_file(src/**)"]
        deny = ["run_command(rm -rf*)", "read_file(.env)"]
        "#,
    )
    .unwrap();
    let rules =
        PermissionRules::parse(&config.permissions.allow, &config.permissions.deny).unwrap();
    assert_eq!(rules.allow.len(), 3);
    assert_eq!(
        rules.deny[1],
        PermissionRule::parse("read_file(.env)").unwrap()
    );
    assert_eq!(
        rules.check("write_file", &path("src/main.rs"), Path::new(CWD)),
        allow("write_file(src/**)")
    );
    assert_eq!(
        rules.check("run_command", &cmd("cargo test; rm -rf ~"), Path::new(CWD)),
        deny("run_command(rm -rf*)")
    );
}

#[derive(Debug, Deserialize)]
struct TypedPermissions {
    allow: Vec<PermissionRule>,
}

#[test]
fn toml_rules_deserialize_directly() {
    let typed: TypedPermissions =
        toml::from_str(r#"allow = ["git_commit", "read_file(*.md)"]"#).unwrap();
    assert_eq!(typed.allow[1].pattern.as_deref(), Some("*.md"));
    let error = toml::from_str::<TypedPermissions>(r#"allow = ["read_file(*.md"]"#)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("invalid permission rule \"read_file(*.md\": missing \")\""),
        "{error}"
    );
}

#[test]
fn sources_parse_back_to_the_same_rules() {
    let allow = [
        "run_command(cargo test*)",
        "  write_file (src/**)",
        "git_status",
        "read_file( spaced pattern )",
    ]
    .map(str::to_owned);
    let deny = ["run_command(rm *)", "git_commit"].map(str::to_owned);
    let rules = PermissionRules::parse(&allow, &deny).unwrap();
    let (allow_texts, deny_texts) = rules.sources();
    assert_eq!(
        allow_texts,
        [
            "run_command(cargo test*)",
            "write_file(src/**)",
            "git_status",
            "read_file( spaced pattern )"
        ]
    );
    assert_eq!(deny_texts, ["run_command(rm *)", "git_commit"]);
    assert_eq!(
        PermissionRules::parse(&allow_texts, &deny_texts).unwrap(),
        rules
    );
}

#[test]
fn mcp_tools_are_matched_by_claude_code_s_names() {
    let rules = PermissionRules::parse(
        &["mcp__github__*".into(), "mcp__docs".into()],
        &[
            "mcp__github__delete_repo".into(),
            "mcp__fs__write_file(/etc/**)".into(),
        ],
    )
    .unwrap();
    let check = |tool: &str, input: Value| rules.check(tool, &input, Path::new(CWD));
    assert!(matches!(
        check("mcp__github__create_issue", json!({})),
        Verdict::Allow { .. }
    ));
    assert!(matches!(
        check("mcp__github__delete_repo", json!({})),
        Verdict::Deny { .. }
    ));
    assert!(matches!(
        check("mcp__docs__search", json!({})),
        Verdict::Allow { .. }
    ));
    // `mcp__docs` is the server's tools, not any name that starts the same way.
    assert_eq!(check("mcp__docsearch__find", json!({})), Verdict::Ask);
    assert!(matches!(
        check("mcp__fs__write_file", json!({"path": "/etc/passwd"})),
        Verdict::Deny { .. }
    ));
    assert_eq!(
        check("mcp__fs__write_file", json!({"path": "/tmp/x"})),
        Verdict::Ask
    );
    assert_eq!(check("run_command", json!({"command": "ls"})), Verdict::Ask);
    // A `*` anywhere but the end is still refused.
    assert!(PermissionRule::parse("mcp__*__x").is_err());
    assert!(PermissionRule::parse("*").is_err());
}
