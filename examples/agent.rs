//! A coding agent with the built-in tools, in the current directory.
//!
//! `ANTHROPIC_API_KEY=... cargo run -p keel-engine --example agent -- "Fix the failing test"`

// An example program talks to its user on stdout.
#![allow(clippy::print_stdout)]

use std::sync::Arc;

use keel_engine::{Agent, AllowAll};
use keel_provider::AnthropicProvider;
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cwd = std::env::current_dir()?;
    let tools = default_tools(&PathSandbox::new(&cwd)?, &SandboxPolicy::default())?;
    let agent = Agent::builder(Arc::new(AnthropicProvider::from_env()?))
        .model("claude-sonnet-4-5")
        .tools(tools)
        .approver(AllowAll)
        .build()?;
    let prompt = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let outcome = agent.session(&cwd)?.run(&prompt).await;
    println!(
        "{}\n[{} after {} calls]",
        outcome.text,
        outcome.stop.name(),
        outcome.iterations
    );
    Ok(())
}
