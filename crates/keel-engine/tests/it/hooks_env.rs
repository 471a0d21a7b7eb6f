//! Command hooks never see credentials, agent sockets or the variables the host hides: a
//! hook that prints its environment shows none of them.
//!
//! The variables are planted in a child test process (this test, run again alone), not in
//! this one: setting them here would race with the tests on the other threads.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_engine::{HookConfig, HookEvent, HookInput, Hooks};
use tempfile::TempDir;

/// Set in the child test process, which holds the planted variables.
const CHILD: &str = "KEEL_TEST_HOOKS_ENV_CHILD";

/// Variables planted in the child process, and whether a hook may see them.
const PLANTED: [(&str, &str, bool); 8] = [
    ("KEEL_TEST_PROVIDER_API_KEY", "sk-planted-api-key", false),
    ("KEEL_TEST_GITHUB_TOKEN", "ghp_planted_token", false),
    ("KEEL_TEST_AWS_ACCESS_KEY_ID", "AKIAPLANTED", false),
    ("SSH_AUTH_SOCK", "/tmp/planted-agent.sock", false),
    ("TMUX", "/tmp/tmux-0/planted,1,0", false),
    // A key variable with no credential-like name (a custom `api_key_env`), hidden by the host.
    ("KEEL_TEST_CUSTOM_CREDS", "planted-custom-secret", false),
    ("KEEL_TEST_PLAIN", "planted-plain-value", true),
    ("KEEL_TEST_OTHER_CREDS", "planted-visible-value", true),
];

/// What an `env` hook printed, as SessionStart context.
async fn hook_environment(hooks: &Hooks, dir: &std::path::Path) -> String {
    let report = hooks
        .run(&HookInput::session_start(
            "session-env",
            dir,
            keel_engine::SessionStartSource::Startup,
        ))
        .await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    report.messages.join("\n")
}

fn env_hook() -> Hooks {
    Hooks::from_config(
        &[HookConfig {
            event: HookEvent::SessionStart,
            matcher: None,
            command: "env".to_owned(),
            timeout_secs: None,
        }],
        runner(),
    )
    .unwrap()
}

#[tokio::test]
async fn hook_commands_never_see_credentials_sockets_or_hidden_variables() {
    if std::env::var_os(CHILD).is_none() {
        let mut child = keel_test_support::rerun::command(
            module_path!(),
            "hook_commands_never_see_credentials_sockets_or_hidden_variables",
        );
        child.env(CHILD, "1");
        for (name, value, _) in PLANTED {
            child.env(name, value);
        }
        tokio::task::spawn_blocking(move || keel_test_support::rerun::run(&mut child))
            .await
            .unwrap();
        return;
    }
    let dir = TempDir::new().unwrap();
    let hooks = env_hook().hide_env(["KEEL_TEST_CUSTOM_CREDS"]);
    let env = hook_environment(&hooks, dir.path()).await;
    assert!(env.contains("KEEL_SESSION_ID=session-env"), "{env}");
    assert!(env.contains("PATH="), "{env}");
    for (name, value, visible) in PLANTED {
        assert_eq!(
            env.contains(value),
            visible,
            "{name} should {}be visible:\n{env}",
            if visible { "" } else { "not " }
        );
    }

    // Hidden variables survive `extend`, from either side.
    let mut merged = Hooks::new().hide_env(["KEEL_TEST_OTHER_CREDS"]);
    merged.extend(hooks);
    assert_eq!(
        merged.hidden_env(),
        ["KEEL_TEST_OTHER_CREDS", "KEEL_TEST_CUSTOM_CREDS"]
    );
    let env = hook_environment(&merged, dir.path()).await;
    assert!(!env.contains("planted-custom-secret"), "{env}");
    assert!(!env.contains("planted-visible-value"), "{env}");
    assert!(env.contains("planted-plain-value"), "{env}");

    // Without `hide_env`, a variable with an ordinary name reaches the hook: the host must
    // name its key variables.
    let env = hook_environment(&env_hook(), dir.path()).await;
    assert!(env.contains("planted-custom-secret"), "{env}");
    assert!(!env.contains("sk-planted-api-key"), "{env}");
}

/// The process runner command hooks run through: keel-sandbox's.
fn runner() -> std::sync::Arc<dyn keel_tool::ProcessRunner> {
    std::sync::Arc::new(keel_sandbox::ProcessGroupRunner)
}
