//! The whole keel agent in a Rust program: exactly what `keel exec` runs (tools in a sandbox,
//! the project's context, delegation, skills, snapshots), in the current directory.
//!
//! ```sh
//! ANTHROPIC_API_KEY=sk-ant-... cargo run -p keel --example embed -- "Fix the failing test"
//! OPENAI_BASE_URL=http://localhost:11434/v1 cargo run -p keel --example embed -- "..."
//! ```
//!
//! Gated calls (deleting files, protected paths) are refused, as in `keel exec`: nobody is
//! there to ask.

// An example program talks to its user on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use keel::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Summarize this project".into());
    // The provider the environment names, the current directory, keel's home ($KEEL_HOME,
    // else ~/.keel); CodingAgent::builder says otherwise.
    let agent = CodingAgent::from_env()?;
    for warning in agent.warnings() {
        eprintln!("warning: {warning}");
    }
    let outcome = agent.prompt(&prompt).await?;
    println!("{}", outcome.text);
    if outcome.stop != Stop::Completed {
        return Err(format!("the run ended: {}", outcome.stop.name()).into());
    }
    Ok(())
}
