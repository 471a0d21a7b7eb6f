//! Tools that change while the agent runs (an MCP server's list): the loop refreshes its
//! registry's sources before every model request, so a tool added during a turn is offered in
//! the next request and one removed is not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use keel_engine::{Agent, AgentEvent, Stop};
use keel_test_support::scripted::ScriptedProvider;
use keel_tool::{
    CallFailure, DynTool, Effect, ToolContext, ToolDefinition, ToolOutput, ToolRegistry, ToolSource,
};
use serde_json::{Value, json};

/// A server's tool list: calling `grow` replaces `grow` with `grown` at the next refresh.
#[derive(Default)]
struct Server {
    grown: Mutex<bool>,
    changed: Mutex<bool>,
}

struct Named {
    name: &'static str,
    server: Arc<Server>,
}

#[async_trait::async_trait]
impl DynTool for Named {
    fn name(&self) -> &str {
        self.name
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.to_owned(),
            description: "a server's tool".into(),
            input_schema: json!({"type": "object"}),
        }
    }
    fn effect(&self, _input: &Value) -> Effect {
        Effect::ReadOnly
    }
    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }
    async fn call_json(
        &self,
        _input: &Value,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, CallFailure> {
        *self.server.changed.lock().unwrap() = true;
        Ok(ToolOutput::text(format!("{} ran", self.name)))
    }
}

struct Source(Arc<Server>);

#[async_trait::async_trait]
impl ToolSource for Source {
    fn name(&self) -> &str {
        "server"
    }
    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        let name = if *self.0.grown.lock().unwrap() {
            "mcp__server__grown"
        } else {
            "mcp__server__grow"
        };
        vec![Arc::new(Named {
            name,
            server: self.0.clone(),
        })]
    }
    async fn refresh(&self) {
        let mut changed = self.0.changed.lock().unwrap();
        if *changed {
            *changed = false;
            *self.0.grown.lock().unwrap() = true;
        }
    }
}

#[tokio::test]
async fn each_request_offers_the_source_s_tools_as_they_are_then() {
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "mcp__server__grow", json!({}))
            .then_tool_call("t2", "mcp__server__grown", json!({}))
            .then_text("done"),
    );
    let mut registry = ToolRegistry::new();
    registry.add_source(Arc::new(Source(Arc::new(Server::default()))));
    let agent = Agent::builder(provider.clone())
        .model("claude-sonnet-4-5")
        .tools(registry)
        .build()
        .unwrap();
    let mut session = agent.session(".").unwrap();
    let outcome = session.run("grow").await;
    assert_eq!(outcome.stop, Stop::Completed);
    let offered: Vec<Vec<String>> = provider
        .requests()
        .iter()
        .map(|r| r.tools.iter().map(|t| t.name.clone()).collect())
        .collect();
    assert_eq!(
        offered,
        [
            vec!["mcp__server__grow".to_owned()],
            vec!["mcp__server__grown".to_owned()],
            vec!["mcp__server__grown".to_owned()],
        ]
    );
    let results: Vec<String> = session
        .history()
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            keel_provider::ContentBlock::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["mcp__server__grow ran", "mcp__server__grown ran"]);
}

/// A tool that reports three progress lines, one per millisecond, then answers.
struct Counting;

#[async_trait::async_trait]
impl DynTool for Counting {
    fn name(&self) -> &str {
        "count"
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "count".into(),
            description: "counts".into(),
            input_schema: json!({"type": "object"}),
        }
    }
    fn effect(&self, _input: &Value) -> Effect {
        Effect::ReadOnly
    }
    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }
    async fn call_json(
        &self,
        _input: &Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, CallFailure> {
        for step in 1..=3 {
            ctx.progress(format!("{step}/3"));
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        Ok(ToolOutput::text("counted"))
    }
}

#[tokio::test]
async fn progress_lines_are_events_between_a_call_s_start_and_finish() {
    use futures::StreamExt;
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "count", json!({}))
            .then_text("done"),
    );
    let mut registry = ToolRegistry::new();
    registry.register_dyn(Arc::new(Counting)).unwrap();
    let agent = Agent::builder(provider)
        .model("claude-sonnet-4-5")
        .tools(registry)
        .build()
        .unwrap();
    let mut session = agent.session(".").unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("count").collect().await;
    let seen: Vec<String> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallStarted { id, .. } => Some(format!("start {id}")),
            AgentEvent::ToolProgress { id, name, line } => Some(format!("{name} {id} {line}")),
            AgentEvent::ToolCallFinished { id, .. } => Some(format!("finish {id}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        seen,
        [
            "start t1",
            "count t1 1/3",
            "count t1 2/3",
            "count t1 3/3",
            "finish t1"
        ]
    );
}
