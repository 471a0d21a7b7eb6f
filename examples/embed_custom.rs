//! The keel agent with a tool of the host's own and the host's own approver.
//!
//! ```sh
//! ANTHROPIC_API_KEY=sk-ant-... cargo run -p keel --example embed_custom -- "Which tickets are open?"
//! ```
//!
//! The `open_tickets` tool answers from the host's data; the approver lets the agent run
//! `cargo` commands and refuses every other gated call with a reason the model reads.

// An example program talks to its user on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use keel::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

/// The arguments of `open_tickets`.
#[derive(Deserialize, JsonSchema)]
struct TicketArgs {
    /// Only tickets with this label (all when empty).
    label: String,
}

/// Lists the host's open tickets.
struct OpenTickets;

impl Tool for OpenTickets {
    type Args = TicketArgs;
    const NAME: &'static str = "open_tickets";

    fn description(&self) -> &str {
        "Lists the open tickets of this project, optionally only those with a label."
    }

    fn effect(&self, _args: &TicketArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(&self, args: TicketArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let tickets = [
            ("KEEL-1", "bug", "tests fail on empty input"),
            ("KEEL-2", "docs", "README typo"),
        ];
        let lines: Vec<String> = tickets
            .iter()
            .filter(|(_, label, _)| args.label.is_empty() || *label == args.label)
            .map(|(id, label, title)| format!("{id} [{label}] {title}"))
            .collect();
        Ok(ToolOutput::text(lines.join("\n")))
    }
}

/// Allows `cargo` commands; refuses every other gated call, saying why.
struct CargoOnly;

// `async_trait` comes with keel's prelude: no dependency of the host's own.
#[async_trait]
impl Approver for CargoOnly {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let command = request.input["command"].as_str().unwrap_or_default();
        if request.tool == "run_command" && command.starts_with("cargo ") {
            Decision::Allow
        } else {
            Decision::Deny(format!(
                "the host allows only cargo commands, not {}",
                request.tool
            ))
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Fix the open bug tickets".into());
    let agent = CodingAgent::builder(keel::provider::from_env()?)
        .tool(OpenTickets)
        .approver(CargoOnly)
        .build()?;
    let mut session = agent.session()?;
    let outcome = session.run(&prompt).await;
    println!("{}", outcome.text);
    Ok(())
}
