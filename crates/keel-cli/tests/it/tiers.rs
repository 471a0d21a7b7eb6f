//! Model tiers across providers through the `keel` binary: `[models.small]` naming its own
//! provider (a local OpenAI-compatible server) while the main loop runs on Anthropic's wire,
//! compaction summaries on the small tier, cost per provider in the JSON result, the tier
//! provider's key hidden from commands, configured windows and prices, and config errors.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::request_bodies;
use serde_json::{Value, json};
use wiremock::MockServer;

/// The local tier's key: what it looks like matters (it must never reach a command).
const LOCAL_KEY: &str = "sk-local-tier-secret-0123456789";

/// The user's config: `[providers.local]` on `local`, with its key in `LOCAL_LLM_CRED`, the
/// small tier on it, and `extra`.
fn tier_config(local: &MockServer, extra: &str) -> String {
    format!(
        "{extra}\n[providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\n\
         api_key_env = \"LOCAL_LLM_CRED\"\n\n[models.small]\nprovider = \"local\"\n\
         model = \"qwen3:8b\"\n",
        local.uri()
    )
}

/// `value` is a number of USD within a billionth of `usd`.
fn assert_usd(value: &Value, usd: f64) {
    let got = value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"));
    assert!((got - usd).abs() < 1e-9, "{got} USD, not {usd}");
}

fn models(bodies: &[Value]) -> Vec<&str> {
    bodies
        .iter()
        .map(|body| body["model"].as_str().unwrap())
        .collect()
}

/// The JSON result of `keel exec --output-format json PROMPT` in `repo`, after checking it
/// exited 0.
async fn exec_json(home: &Home, hosted: &MockServer, repo: &TempRepo, args: &[&str]) -> Value {
    let mut command = home.keel_anthropic(hosted);
    command
        .current_dir(repo.path())
        .env("LOCAL_LLM_CRED", LOCAL_KEY)
        .args(["exec", "--output-format", "json"])
        .args(args);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(!stdout(&output).contains(LOCAL_KEY) && !stderr(&output).contains(LOCAL_KEY));
    serde_json::from_str(stdout(&output).trim()).unwrap()
}

#[tokio::test]
async fn code_on_the_small_tier_reaches_its_own_server_and_cost_is_told_per_provider() {
    let repo = TempRepo::new();
    let home = Home::new();
    let hosted = anthropic_server(&[
        tool_call(
            "toolu_1",
            "run_command",
            json!({"command": "printenv LOCAL_LLM_CRED; echo checked"}),
        ),
        tool_call(
            "toolu_2",
            "code",
            json!({"task": "Say hi", "cwd": repo.path(), "model": "small"}),
        ),
        text("Delegated."),
    ])
    .await;
    let local = openai_server(&[text("Hi from the small tier.")]).await;
    // The local model costs nothing, and the config says so.
    home.write_config(&format!(
        "{}\n[models.\"qwen3:8b\"]\ninput_price = 0\noutput_price = 0\n",
        tier_config(&local, "")
    ));
    let result = exec_json(&home, &hosted, &repo, &["-y", "Delegate it"]).await;
    assert_eq!(result["result"], "Delegated.");

    // The code session ran on the local server, with its own key; the main loop on the
    // hosted one.
    let local_requests = local.received_requests().await.unwrap();
    assert_eq!(models(&request_bodies(&local).await), ["qwen3:8b"]);
    assert_eq!(
        local_requests[0].headers["authorization"],
        format!("Bearer {LOCAL_KEY}").as_str()
    );
    let hosted_bodies = request_bodies(&hosted).await;
    assert_eq!(models(&hosted_bodies), ["claude-sonnet-4-5"; 3]);
    // The tier's key is hidden from commands, like the main provider's.
    let transcript = hosted_bodies[1].to_string();
    assert!(transcript.contains("checked"), "{transcript}");
    assert!(!transcript.contains(LOCAL_KEY), "{transcript}");
    assert!(
        hosted_bodies[2]
            .to_string()
            .contains("Hi from the small tier.")
    );

    // Three hosted calls of 100 tokens in and 20 out at Sonnet 4.5's prices.
    let hosted_cost = &result["keel_cost_by_provider"]["anthropic"];
    assert_eq!(
        (&hosted_cost["inputTokens"], &hosted_cost["outputTokens"]),
        (&json!(300), &json!(60))
    );
    assert_usd(&hosted_cost["costUSD"], 0.0018);
    // The code session's call is the run's too, told apart under its provider.
    let local_cost = &result["keel_cost_by_provider"]["local"];
    assert_eq!(
        (&local_cost["inputTokens"], &local_cost["outputTokens"]),
        (&json!(100), &json!(20))
    );
    assert_usd(&local_cost["costUSD"], 0.0);
    assert_usd(&result["total_cost_usd"], 0.0018);
    assert_eq!(result["usage"]["output_tokens"], json!(80), "{result}");
}

#[tokio::test]
async fn summaries_run_on_the_small_tier_and_an_unpriced_tier_s_cost_is_null() {
    let repo = TempRepo::new();
    let home = Home::new();
    let read = |id: &str| tool_call(id, "read_file", json!({"path": "missing.txt"}));
    // A 10-token window: compaction once four rounds of calls have left something to
    // summarize.
    let hosted = anthropic_server(&[
        read("r0"),
        read("r1"),
        read("r2"),
        read("r3"),
        text("Done."),
    ])
    .await;
    let local = openai_server(&[text("The summary.")]).await;
    home.write_config(&tier_config(
        &local,
        "context_window = 10\ncompaction_model = \"small\"\n",
    ));
    let result = exec_json(&home, &hosted, &repo, &["Read it four times"]).await;
    assert_eq!(result["result"], "Done.");

    let summaries = request_bodies(&local).await;
    assert_eq!(models(&summaries), ["qwen3:8b"]);
    assert!(
        summaries[0]["messages"]
            .to_string()
            .contains("<transcript>")
    );
    assert!(summaries[0].get("tools").is_none(), "{}", summaries[0]);
    let last = request_bodies(&hosted).await.pop().unwrap().to_string();
    assert!(last.contains("The summary."), "{last}");
    let by_provider = &result["keel_cost_by_provider"];
    assert_eq!(
        by_provider["local"],
        json!({"inputTokens": 100, "outputTokens": 20, "cacheReadInputTokens": 0,
               "cacheCreationInputTokens": 0, "webSearchRequests": 0, "costUSD": null}),
        "no price for qwen3:8b: null, never a guess"
    );
    assert_eq!(by_provider["anthropic"]["inputTokens"], 500);
    assert_usd(&by_provider["anthropic"]["costUSD"], 0.003);
    assert_eq!(result["total_cost_usd"], Value::Null);
}

#[tokio::test]
async fn configured_prices_and_window_cost_and_compact_a_model_keel_does_not_know() {
    let repo = TempRepo::new();
    let home = Home::new();
    let read = |id: &str| tool_call(id, "read_file", json!({"path": "missing.txt"}));
    let hosted = anthropic_server(&[
        read("r0"),
        read("r1"),
        read("r2"),
        read("r3"),
        text("The summary."),
        text("Done."),
    ])
    .await;
    home.write_config(
        "model = \"my-gateway-model\"\n\n[models.\"my-gateway-model\"]\ncontext_window = 10\n\
         input_price = 10\noutput_price = 50\n",
    );
    let result = exec_json(&home, &hosted, &repo, &["Read it four times"]).await;
    assert_eq!(result["result"], "Done.");
    let bodies = request_bodies(&hosted).await;
    assert!(
        bodies[4].get("tools").is_none(),
        "the fifth request is the summary's: {}",
        bodies[4]
    );
    // Six calls of 100 tokens in and 20 out at 10 and 50 USD per million.
    assert_usd(&result["total_cost_usd"], 0.012);
    assert_usd(
        &result["keel_cost_by_provider"]["anthropic"]["costUSD"],
        0.012,
    );
    assert_eq!(
        result["modelUsage"]["my-gateway-model"]["contextWindow"], 10,
        "the configured window"
    );

    // A budget needs a price: the configured one counts.
    let hosted = anthropic_server(&[text("Cheap enough.")]).await;
    let mut command = home.keel_anthropic(&hosted);
    command
        .current_dir(repo.path())
        .args(["-p", "--max-budget-usd", "1", "hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let mut command = home.keel_anthropic(&hosted);
    command.current_dir(repo.path()).args([
        "-p",
        "--max-budget-usd",
        "1",
        "--model",
        "unpriced-model",
        "hi",
    ]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("keel knows no price for unpriced-model"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn a_tier_s_provider_that_cannot_be_used_is_one_line_naming_the_file_and_key() {
    let repo = TempRepo::new();
    let home = Home::new();
    let hosted = MockServer::start().await;
    let config = home.keel_home().join("config.toml");
    let cases = [
        (
            "[models.small]\nprovider = \"lcoal\"\nmodel = \"qwen3:8b\"\n",
            "`models.small.provider`: unknown provider `lcoal`: use one of anthropic, openai",
        ),
        (
            "[providers.remote]\nkind = \"anthropic\"\napi_key_env = \"MISSING_KEY\"\n\
             [models.strong]\nprovider = \"remote\"\nmodel = \"claude-opus-5-5\"\n",
            "`models.strong.provider`: provider `remote` needs an API key: set MISSING_KEY",
        ),
        (
            "[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             [models.\"claude-sonnet-4-5\"]\nprovider = \"local\"\n",
            "`models.claude-sonnet-4-5.provider`: claude-sonnet-4-5 is the main model, which \
             `anthropic` serves",
        ),
        (
            "[models.small]\nmodel = \"qwen3:8b\"\ninput_price = \"free\"\n",
            ":3: bad value for `models.small.input_price`: ",
        ),
    ];
    for (text, expected) in cases {
        home.write_config(text);
        let mut command = home.keel_anthropic(&hosted);
        command.current_dir(repo.path()).args(["exec", "hi"]);
        let output = run(command).await;
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(
            message.starts_with(&format!("keel: {}", config.display()))
                && message.contains(expected),
            "for {text:?}: {message}"
        );
        assert_eq!(message.trim_end().lines().count(), 1, "{message}");
    }
    assert!(request_bodies(&hosted).await.is_empty());
}

#[tokio::test]
async fn keel_config_shows_the_tiers_the_window_and_the_summary_model() {
    let repo = TempRepo::new();
    let home = Home::new();
    let local = MockServer::start().await;
    home.write_config(&tier_config(
        &local,
        "context_window = 300000\ncompaction_model = \"small\"\n\
         [models.\"qwen3:8b\"]\ncontext_window = 32768\ninput_price = 0\noutput_price = 0\n",
    ));
    std::fs::create_dir_all(repo.path().join(".keel")).unwrap();
    std::fs::write(
        repo.path().join(".keel/config.toml"),
        "context_window = 10\n[models.strong]\nmodel = \"claude-opus-5-5\"\n",
    )
    .unwrap();
    let screen = |trust: bool| {
        let mut command = home.keel();
        command
            .current_dir(repo.path())
            .env("LOCAL_LLM_CRED", LOCAL_KEY)
            .arg("config");
        if trust {
            command.arg("--trust-project");
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        redact(
            &stdout(&output),
            &[
                (&repo.path(), "<repo>"),
                (home.path(), "<home>"),
                (std::path::Path::new(&local.uri()), "<local>"),
            ],
        )
    };
    insta::assert_snapshot!("config_tiers_untrusted", screen(false));
    insta::assert_snapshot!("config_tiers_trusted", screen(true));
}
