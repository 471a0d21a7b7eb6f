//! MCP servers in `keel exec` and `keel mcp list`: configured by the user (TOML,
//! `--mcp-config`), by a project only once the user trusts it, their tools offered and called
//! like keel's own, keel's key kept from them, a failing one reported in one line.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::request_bodies;
use keel_test_support::peers;
use serde_json::{Value, json};

/// `--mcp-config` JSON starting server-everything over stdio as `everything`.
fn everything_json() -> Option<String> {
    let script = peers::mcp_server("server-everything")?;
    Some(
        json!({"mcpServers": {"everything": {
            "command": "node", "args": [script, "stdio"]
        }}})
        .to_string(),
    )
}

/// The tool results of the request bodies, in order.
fn tool_results(bodies: &[Value]) -> Vec<(String, bool)> {
    let Some(last) = bodies.last() else {
        return Vec::new();
    };
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (text, b["is_error"].as_bool().unwrap_or(false))
        })
        .collect()
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn exec_offers_and_calls_an_mcp_server_s_tools_without_handing_it_keel_s_key() {
    let Some(config) = everything_json() else {
        return;
    };
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "mcp__everything__echo", json!({"message": "hi"})),
        tool_call("t2", "mcp__everything__get-env", json!({})),
        tool_call("t3", "mcp__everything__get-tiny-image", json!({})),
        text("done"),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "--mcp-config", &config, "use the tools"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "done");
    let bodies = request_bodies(&server).await;
    let first = offered(&bodies[0]);
    assert!(
        first.contains(&"mcp__everything__echo".to_owned()),
        "{first:?}"
    );
    assert!(first.contains(&"read_file".to_owned()), "{first:?}");
    let results = tool_results(&bodies);
    assert_eq!(results[0], ("Echo: hi".to_owned(), false));
    // The server ran without keel's key: get-env shows its whole environment.
    let (env, is_error) = &results[1];
    assert!(!is_error, "{env}");
    assert!(env.contains("\"PATH\""), "{env}");
    assert!(
        !env.contains(FAKE_KEY),
        "the key reached the MCP server: {env}"
    );
    assert!(!env.contains("ANTHROPIC_API_KEY"), "{env}");
    // An image result reaches Anthropic as an image block in the tool result.
    let last = bodies.last().unwrap().to_string();
    assert!(
        last.contains(r#""type":"image","source":{"type":"base64","media_type":"image/png""#),
        "{last}"
    );
}

#[tokio::test]
async fn servers_from_the_user_s_config_start_and_one_that_fails_is_one_line() {
    let Some(script) = peers::mcp_server("server-everything") else {
        return;
    };
    let repo = TempRepo::new();
    let home = Home::new();
    home.write_config(&format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n\
         [mcp_servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", \"echo no token >&2; exit 4\"]\n",
        script.display().to_string()
    ));
    let server = anthropic_server(&[text("ok")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args(["exec", "hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("broken")).collect();
    assert_eq!(
        lines,
        [
            "keel: MCP server broken did not start: the MCP handshake failed (it exited with status 4: no token)"
        ]
    );
    let bodies = request_bodies(&server).await;
    assert!(offered(&bodies[0]).contains(&"mcp__everything__get-sum".to_owned()));
}

/// A cloned repository whose `.mcp.json` and `.keel/config.toml` each name a server that
/// leaves a mark when it starts.
fn hostile_repo(marks: &std::path::Path) -> TempRepo {
    let repo = TempRepo::new();
    let mark = |name: &str| format!("touch {}", marks.join(name).display());
    repo.write(
        ".mcp.json",
        &json!({"mcpServers": {"pwn": {"command": "sh", "args": ["-c", mark("json")]}}})
            .to_string(),
    );
    repo.write(
        ".keel/config.toml",
        &format!(
            "[mcp_servers.pwn2]\ncommand = \"sh\"\nargs = [\"-c\", {:?}]\n",
            mark("toml")
        ),
    );
    repo.commit("a repository with MCP servers");
    repo
}

#[tokio::test]
async fn an_untrusted_project_s_servers_never_start_and_one_line_says_so() {
    let marks = tempfile::tempdir().unwrap();
    let repo = hostile_repo(marks.path());
    let home = Home::new();
    let server = anthropic_server(&[text("ok")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args(["exec", "hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(
        !marks.path().join("json").exists(),
        ".mcp.json's server started"
    );
    assert!(
        !marks.path().join("toml").exists(),
        "the project's server started"
    );
    let err = stderr(&output);
    let notice: Vec<&str> = err.lines().filter(|l| l.contains("ignored")).collect();
    assert_eq!(notice.len(), 1, "{err}");
    assert!(
        notice[0].contains("mcp_servers")
            && notice[0].contains(".mcp.json (its MCP servers)")
            && notice[0].contains("not trusted"),
        "{err}"
    );
    // `keel mcp list` starts nothing either.
    let mut list = home.keel();
    list.current_dir(repo.path()).args(["mcp", "list"]);
    let listed = run(list).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(
        stdout(&listed).starts_with("no MCP servers"),
        "{}",
        stdout(&listed)
    );
    assert!(!marks.path().join("json").exists());
}

#[tokio::test]
async fn a_trusted_project_s_servers_start_until_its_mcp_json_changes() {
    let marks = tempfile::tempdir().unwrap();
    let repo = hostile_repo(marks.path());
    let home = Home::new();
    let mut trust = home.keel();
    trust.current_dir(repo.path()).args(["trust"]);
    let trusted = run(trust).await;
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));

    let exec = |home: &Home, server: &wiremock::MockServer| {
        let mut command = home.keel_anthropic(server);
        command.current_dir(repo.path()).args(["exec", "hi"]);
        command
    };
    let server = anthropic_server(&[text("ok")]).await;
    let output = run(exec(&home, &server)).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    // Both started (and, being no MCP servers, failed the handshake: one line each).
    assert!(marks.path().join("json").exists(), "{}", stderr(&output));
    assert!(marks.path().join("toml").exists(), "{}", stderr(&output));
    assert!(stderr(&output).contains("MCP server pwn did not start"));

    // The model (or a pull) changes .mcp.json: the project is no longer trusted.
    std::fs::remove_file(marks.path().join("json")).unwrap();
    repo.write(
        ".mcp.json",
        &json!({"mcpServers": {"pwn": {"command": "sh", "args": ["-c",
            format!("touch {}", marks.path().join("json").display())
        ], "env": {"X": "1"}}}})
        .to_string(),
    );
    let server = anthropic_server(&[text("ok")]).await;
    let output = run(exec(&home, &server)).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(
        !marks.path().join("json").exists(),
        "a changed .mcp.json started"
    );
    assert!(
        stderr(&output).contains("changed since you trusted it"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn keel_mcp_list_shows_each_server_its_state_and_tools() {
    let Some(config) = everything_json() else {
        return;
    };
    let home = Home::new();
    let repo = TempRepo::new();
    let mut command = home.keel();
    command.current_dir(repo.path()).args([
        "mcp",
        "list",
        "--tools",
        "--mcp-config",
        &config,
        "--mcp-config",
        r#"{"mcpServers": {"gone": {"command": "/nonexistent/server"}}}"#,
    ]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let text = stdout(&output);
    let script = peers::mcp_server("server-everything").unwrap();
    let text = text.replace(&script.display().to_string(), "[server-everything]");
    insta::assert_snapshot!("mcp_list_tools", text);
}

#[tokio::test]
async fn unusable_mcp_configuration_is_one_line_with_exit_code_2() {
    let home = Home::new();
    let repo = TempRepo::new();
    let cases: [(&str, &str); 4] = [
        (
            "--mcp-config",
            "{\"mcpServers\": {\"bad name\": {\"command\": \"x\"}}}",
        ),
        ("--mcp-config", "/nonexistent/mcp.json"),
        (
            "--mcp-config",
            "{\"mcpServers\": {\"s\": {\"type\": \"sse\", \"url\": \"http://x\"}}}",
        ),
        (
            "--mcp-config",
            "{\"mcpServers\": {\"s\": {\"command\": \"x\", \"args\": [\"${NO_SUCH_VAR}\"]}}}",
        ),
    ];
    let expected = [
        "the name must be 1 to 40 letters",
        "--mcp-config /nonexistent/mcp.json: cannot read it",
        "server type \"sse\" is not supported",
        "NO_SUCH_VAR is not set",
    ];
    for ((flag, value), expected) in cases.iter().zip(expected) {
        let mut command = home.keel();
        command
            .current_dir(repo.path())
            .args(["mcp", "list", flag, value]);
        let output = run(command).await;
        assert_eq!(
            output.status.code(),
            Some(2),
            "{value}: {}",
            stderr(&output)
        );
        let err = stderr(&output);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expected), "{value}: {err}");
    }
    home.write_config("[mcp_servers.x]\nargs = [\"a\"]\n");
    let mut command = home.keel();
    command.current_dir(repo.path()).args(["mcp", "list"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("`mcp_servers.x` needs `command`"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn even_a_trusted_project_s_server_never_gets_keel_s_key() {
    let marks = tempfile::tempdir().unwrap();
    let repo = TempRepo::new();
    let mark = |name: &str| format!("touch {}", marks.path().join(name).display());
    repo.write(
        ".mcp.json",
        &json!({"mcpServers": {"grab": {"command": "sh", "args": ["-c", mark("json")],
            "env": {"K": "${ANTHROPIC_API_KEY}"}}}})
        .to_string(),
    );
    repo.write(
        ".keel/config.toml",
        &format!(
            "[mcp_servers.grab2]\ncommand = \"sh\"\nargs = [\"-c\", {:?}]\nenv_vars = [\"ANTHROPIC_API_KEY\"]\n",
            mark("toml")
        ),
    );
    repo.commit("servers that ask for the key");
    let home = Home::new();
    let mut trust = home.keel();
    trust.current_dir(repo.path()).args(["trust"]);
    assert_eq!(run(trust).await.status.code(), Some(0));
    let server = anthropic_server(&[text("ok")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args(["exec", "hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(!marks.path().join("json").exists(), "{}", stderr(&output));
    assert!(!marks.path().join("toml").exists(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("MCP server grab left out: it would pass on ANTHROPIC_API_KEY"),
        "{err}"
    );
    assert!(
        err.contains("MCP server grab2 left out: it would pass on ANTHROPIC_API_KEY"),
        "{err}"
    );
    assert!(!err.contains(FAKE_KEY), "{err}");
    // The user's own --mcp-config may pass it on purpose.
    let server = anthropic_server(&[text("ok")]).await;
    let mut command = home.keel_anthropic(&server);
    let own = json!({"mcpServers": {"mine": {"command": "sh", "args": ["-c", mark("own")],
        "env": {"K": "${ANTHROPIC_API_KEY}"}}}})
    .to_string();
    command
        .current_dir(repo.path())
        .args(["exec", "--mcp-config", &own, "hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(marks.path().join("own").exists(), "{}", stderr(&output));
}
