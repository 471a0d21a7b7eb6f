//! A host agent whose only tool is `code`: it plans the work and hands each coding task to a
//! fresh agent working in the current directory, then reports what was done.
//!
//! ```sh
//! ANTHROPIC_API_KEY=sk-ant-... cargo run -p keel --example delegate -- "Add a --verbose flag"
//! OPENAI_BASE_URL=http://localhost:11434/v1 KEEL_MODEL=qwen3:8b \
//!     cargo run -p keel --example delegate -- "Fix the failing test"
//! ```
//!
//! The provider is the one the environment names ([`ProviderConfig::detect`]: Anthropic when
//! `ANTHROPIC_API_KEY` is set, else the OpenAI-compatible back end when `OPENAI_BASE_URL` or
//! `OPENAI_API_KEY` is set); `KEEL_MODEL` picks the model (the `small`
//! tier is a cheaper model of the same provider). Each `code` session writes a log to
//! `$KEEL_HOME/logs` (default `~/.keel/logs`). Delegated sessions may edit files and run
//! commands in the workspace (the current directory) and nowhere else: a `cwd` outside it is
//! refused. Destructive calls are refused, as no one is there to approve them.

// An example program talks to its user on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use keel::agents::{CodeTool, Delegation, Models, Policies};
use keel::engine::{Agent, Stop};
use keel::provider::{Provider, ProviderConfig};
use keel::sandbox::SandboxPolicy;
use keel::tool::ToolRegistry;

/// What the host model is told: it coordinates, the `code` tool does the work.
fn host_prompt(cwd: &Path) -> String {
    format!(
        "You coordinate coding work in the project at {cwd}. You cannot read or change files \
         yourself: your only tool is `code`, which runs a fresh coding agent in a directory. \
         That agent knows nothing of this conversation, so give it complete, self-contained \
         tasks (the goal, the files involved, how to verify the result), with cwd set to the \
         absolute path {cwd} or a directory inside it. Split large work into focused tasks, \
         one call each; use model `small` for simple, mechanical tasks. When the work is done, \
         answer with a short summary of what changed, what was verified, and the log paths.",
        cwd = cwd.display()
    )
}

async fn run(
    provider: Arc<dyn Provider>,
    default_model: &str,
    prompt: &str,
) -> Result<Stop, Box<dyn std::error::Error>> {
    let cwd = std::env::current_dir()?;
    let model = std::env::var("KEEL_MODEL").unwrap_or_else(|_| default_model.to_owned());
    let models = Models::new(&model, Models::small_for(&model));
    let logs = keel::home_dir()?.join("logs");
    // Delegated sessions use the same provider and take these policies whole: writes only
    // inside `cwd`, gated (destructive) calls refused.
    let delegation = Delegation::new(
        provider.clone(),
        models,
        Policies::new(SandboxPolicy::default()),
    );
    let tools = ToolRegistry::new().with(CodeTool::new(delegation, &cwd, &logs))?;
    let agent = Agent::builder(provider)
        .model(model)
        .system_prompt(host_prompt(&cwd))
        .tools(tools)
        .build()?;
    let outcome = agent.session(&cwd)?.run(prompt).await;
    println!(
        "{}\n[{} after {} model calls; code session logs in {}]",
        outcome.text,
        outcome.stop.name(),
        outcome.iterations,
        logs.display()
    );
    Ok(outcome.stop)
}

#[tokio::main]
async fn main() -> ExitCode {
    let prompt = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let built = match ProviderConfig::detect().and_then(|config| config.build()) {
        Ok(built) => built,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    let (provider, default_model) = (built.provider, built.kind.default_model());
    if prompt.trim().is_empty() {
        eprintln!("usage: delegate <what to do>");
        return ExitCode::from(2);
    }
    match run(provider, default_model, &prompt).await {
        Ok(Stop::Completed) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
