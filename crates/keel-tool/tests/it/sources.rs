//! Tool sources: tools that change while the agent runs, offered beside the registry's own,
//! never shadowing them, never invalid, brought up to date by `refresh_sources`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use keel_tool::{
    CallFailure, DynTool, Effect, Tool, ToolCall, ToolContext, ToolDefinition, ToolError,
    ToolInput, ToolOutput, ToolRegistry, ToolSource,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A tool known only at run time, answering `from <name>`.
struct Remote {
    name: String,
    schema: Value,
}

#[async_trait::async_trait]
impl DynTool for Remote {
    fn name(&self) -> &str {
        &self.name
    }
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: "remote".into(),
            input_schema: self.schema.clone(),
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
        Ok(ToolOutput::text(format!("from {}", self.name)))
    }
}

fn remote(name: &str) -> Arc<dyn DynTool> {
    Arc::new(Remote {
        name: name.into(),
        schema: json!({"type": "object"}),
    })
}

/// A source whose list is replaced by `next` at its next refresh.
struct Changing {
    now: Mutex<Vec<Arc<dyn DynTool>>>,
    next: Mutex<Option<Vec<Arc<dyn DynTool>>>>,
    refreshed: AtomicUsize,
}

#[async_trait::async_trait]
impl ToolSource for Changing {
    fn name(&self) -> &str {
        "changing"
    }
    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.now.lock().unwrap().clone()
    }
    async fn refresh(&self) {
        self.refreshed.fetch_add(1, Ordering::SeqCst);
        if let Some(next) = self.next.lock().unwrap().take() {
            *self.now.lock().unwrap() = next;
        }
    }
}

fn changing(now: Vec<Arc<dyn DynTool>>) -> Arc<Changing> {
    Arc::new(Changing {
        now: Mutex::new(now),
        next: Mutex::new(None),
        refreshed: AtomicUsize::new(0),
    })
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

struct Own;

impl Tool for Own {
    type Args = NoArgs;
    const NAME: &'static str = "own";
    fn description(&self) -> &str {
        "The registry's own."
    }
    async fn call(&self, _args: NoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("from the registry"))
    }
}

async fn dispatch(registry: &ToolRegistry, name: &str) -> ToolOutput {
    let input = json!({});
    let call = ToolCall {
        id: "c1",
        name,
        input: ToolInput::Valid(&input),
    };
    registry.dispatch(call, &ToolContext::new(".", "s")).await
}

fn names(registry: &ToolRegistry) -> Vec<String> {
    registry.definitions().into_iter().map(|d| d.name).collect()
}

#[tokio::test]
async fn a_source_s_tools_are_offered_sorted_among_the_registry_s_and_dispatched() {
    let mut registry = ToolRegistry::new().with(Own).unwrap();
    registry.add_source(changing(vec![remote("zeta"), remote("alpha")]));
    assert_eq!(names(&registry), ["alpha", "own", "zeta"]);
    assert_eq!(dispatch(&registry, "zeta").await.content, "from zeta");
    assert_eq!(
        dispatch(&registry, "own").await.content,
        "from the registry"
    );
    assert!(registry.get("alpha").is_some());
    let unknown = dispatch(&registry, "nope").await;
    assert!(unknown.is_error);
    assert!(
        unknown.content.contains("alpha, own, zeta"),
        "{}",
        unknown.content
    );
}

#[tokio::test]
async fn a_source_never_shadows_a_registry_tool_or_offers_an_invalid_one() {
    let mut registry = ToolRegistry::new().with(Own).unwrap();
    let bad_schema: Arc<dyn DynTool> = Arc::new(Remote {
        name: "bad".into(),
        schema: json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}}),
    });
    registry.add_source(changing(vec![
        remote("own"),
        remote("bad name"),
        bad_schema,
    ]));
    registry.add_source(changing(vec![remote("dup"), remote("dup")]));
    assert_eq!(names(&registry), ["dup", "own"]);
    // `own` is still the registry's own tool.
    assert_eq!(
        dispatch(&registry, "own").await.content,
        "from the registry"
    );
    assert!(dispatch(&registry, "bad").await.is_error);
}

#[tokio::test]
async fn refresh_brings_a_changed_list_before_the_next_request() {
    let source = changing(vec![remote("first")]);
    let mut registry = ToolRegistry::new();
    registry.add_source(source.clone());
    *source.next.lock().unwrap() = Some(vec![remote("second")]);
    assert_eq!(names(&registry), ["first"]);
    registry.refresh_sources().await;
    assert_eq!(names(&registry), ["second"]);
    assert!(dispatch(&registry, "first").await.is_error);
    assert_eq!(source.refreshed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_subset_keeps_only_the_named_source_tools() {
    let mut registry = ToolRegistry::new().with(Own).unwrap();
    registry.add_source(changing(vec![remote("mcp__a__x"), remote("mcp__a__y")]));
    let narrowed = registry.subset(&["own", "mcp__a__y"]);
    assert_eq!(names(&narrowed), ["mcp__a__y", "own"]);
    assert!(dispatch(&narrowed, "mcp__a__x").await.is_error);
}
