//! A coding agent with the built-in tools, in the current directory.
//!
//! ```sh
//! ANTHROPIC_API_KEY=sk-ant-... cargo run -p keel-engine --example agent -- "Fix the failing test"
//! OPENAI_BASE_URL=http://localhost:11434/v1 KEEL_MODEL=qwen3:8b \
//!     cargo run -p keel-engine --example agent -- "Add a --verbose flag"
//! ```
//!
//! Anthropic when `ANTHROPIC_API_KEY` is set, else the OpenAI-compatible back end when
//! `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set; `KEEL_MODEL` picks the model. Every tool call
//! is allowed (as with `-y`): run it in a repository you can restore.

// An example program talks to its user on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::sync::Arc;

use keel_engine::{Agent, AllowAll};
use keel_provider::{AnthropicProvider, ApiKey, OpenAiProvider, Provider};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};

/// The provider the environment names, and its default model.
fn provider() -> Result<(Arc<dyn Provider>, &'static str), String> {
    if ApiKey::from_env("ANTHROPIC_API_KEY").is_some() {
        let provider = AnthropicProvider::from_env().map_err(|e| e.to_string())?;
        return Ok((Arc::new(provider), "claude-sonnet-4-5"));
    }
    if std::env::var_os("OPENAI_BASE_URL").is_some() || ApiKey::from_env("OPENAI_API_KEY").is_some()
    {
        let provider = OpenAiProvider::from_env().map_err(|e| e.to_string())?;
        return Ok((Arc::new(provider), "gpt-4.1"));
    }
    Err("no model provider configured: set ANTHROPIC_API_KEY, or OPENAI_BASE_URL for a local server".into())
}

async fn run(prompt: String) -> Result<(), Box<dyn std::error::Error>> {
    let (provider, default_model) = provider()?;
    let cwd = std::env::current_dir()?;
    let agent = Agent::builder(provider)
        .model(std::env::var("KEEL_MODEL").unwrap_or_else(|_| default_model.into()))
        .tools(default_tools(
            &PathSandbox::new(&cwd)?,
            &SandboxPolicy::default(),
        )?)
        .approver(AllowAll)
        .build()?;
    let outcome = agent.session(&cwd)?.run(&prompt).await;
    println!(
        "{}\n[{} after {} model calls]",
        outcome.text,
        outcome.stop.name(),
        outcome.iterations
    );
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let prompt = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    match run(prompt).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
