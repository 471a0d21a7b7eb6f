//! keel for MCP hosts: a [`CodingAgent`]'s `code` tool and background-task tools served by a
//! [`ToolServer`] (`keel mcp-server` is this plus flags), and the host told when its tasks
//! end.
//!
//! The tools are the agent's own, so its policies (sandbox, approvals, rules, hooks) hold for
//! every call a host makes. `code`'s `cwd` and `start_task`'s `workdir` must lie inside the
//! server's roots narrowed by the host's, and the task tools see only the tasks working
//! there: a host learns of, waits for and cancels no task of another project.

use std::path::PathBuf;
#[cfg(feature = "tasks")]
use std::sync::Arc;
#[cfg(feature = "tasks")]
use std::time::Duration;

use keel_mcp::McpError;
use keel_mcp::server::ToolServer;
#[cfg(feature = "tasks")]
use keel_mcp::server::{ClientHandle, LogLevel};
#[cfg(feature = "tasks")]
use keel_tasks::{TaskRecord, TaskStatus, TaskStore};
#[cfg(feature = "tasks")]
use keel_tool::ToolRegistry;
#[cfg(feature = "tasks")]
use keel_tool::{CallFailure, DynTool, Effect, ToolContext, ToolDefinition, ToolError, ToolOutput};
#[cfg(feature = "tasks")]
use serde_json::Value;

use crate::CodingAgent;
#[cfg(feature = "tasks")]
use crate::TaskLauncher;

/// The tools a host gets: `code` and the background-task tools (those the agent has).
pub const HOST_TOOLS: [&str; 6] = [
    "code",
    "start_task",
    "task_status",
    "wait_task",
    "cancel_task",
    "list_tasks",
];

/// The ones that only read.
const READ_ONLY: [&str; 3] = ["task_status", "wait_task", "list_tasks"];

/// How often the task store is read for tasks that ended.
#[cfg(feature = "tasks")]
const TASK_POLL: Duration = Duration::from_millis(500);

/// What the server tells a host about itself.
const INSTRUCTIONS: &str = "keel is a coding agent. `code` runs a self-contained coding task \
in a directory and returns the agent's report and the path of its log; `start_task` runs one \
in the background and returns its id at once: you are sent a logging message when it ends \
(or use wait_task / task_status). Directories must lie inside the roots keel was given.";

/// A [`ToolServer`] of `agent`'s `code` and task tools, confined to `roots` (the working
/// directory when empty). Fails when the agent has no `code` tool (delegation off).
pub fn mcp_tool_server(agent: &CodingAgent, roots: Vec<PathBuf>) -> Result<ToolServer, McpError> {
    #[allow(unused_mut)] // without `tasks` nothing is wrapped
    let mut tools = agent.agent().tools().subset(&HOST_TOOLS);
    if tools.get("code").is_none() {
        return Err(McpError::Serve(
            "an MCP host is served the delegation tools, and this agent has none (delegation \
             is off)"
                .to_owned(),
        ));
    }
    #[cfg(feature = "tasks")]
    if let Some(launcher) = agent.tasks() {
        tools = tasks_in_roots(tools, launcher.store())
            .map_err(|err| McpError::Serve(format!("the task tools: {err}")))?;
    }
    let roots = if roots.is_empty() {
        vec![agent.cwd().to_path_buf()]
    } else {
        roots
    };
    ToolServer::builder(tools, agent.cwd())
        .roots(roots)
        .read_only(READ_ONLY)
        .confine("code", "cwd")
        .confine("start_task", "workdir")
        .server_info("keel", env!("CARGO_PKG_VERSION"))
        .instructions(INSTRUCTIONS)
        .build()
}

/// Tells each connected client when a task it started ends, once: a logging message naming
/// the task, its status and summary. Runs until dropped or aborted; also marks tasks whose
/// supervisor died as interrupted, every few seconds.
#[cfg(feature = "tasks")]
pub async fn tell_task_ends(server: ToolServer, launcher: TaskLauncher) {
    let mut ticks = 0u32;
    loop {
        tokio::time::sleep(TASK_POLL).await;
        ticks = ticks.wrapping_add(1);
        if ticks.is_multiple_of(10)
            && let Err(err) = launcher.recover()
        {
            tracing::warn!("task recovery: {err}");
        }
        for client in server.clients().list() {
            let ended = match launcher.store().take_unnotified(client.session_id()) {
                Ok(ended) => ended,
                Err(err) => {
                    tracing::warn!("cannot read finished tasks: {err}");
                    continue;
                }
            };
            for record in ended {
                announce(&client, &record).await;
            }
        }
    }
}

/// The logging message of an ended task.
#[cfg(feature = "tasks")]
async fn announce(client: &ClientHandle, record: &TaskRecord) {
    let level = match record.status {
        TaskStatus::Completed => LogLevel::Info,
        _ => LogLevel::Warning,
    };
    let data = serde_json::json!({
        "message": keel_tasks::notice(record),
        "task": record.id,
        "status": record.status.as_str(),
        "summary": record.result_summary,
        "exit_code": record.exit_code,
        "log": record.output_path.display().to_string(),
    });
    if let Err(err) = client.log(level, "keel.tasks", data).await {
        tracing::warn!(task = %record.id, "the task's end was not sent: {err}");
    }
}

/// `tools` with the task tools that name a task by id (and `list_tasks`) seeing only the
/// tasks working inside the client's allowed roots.
#[cfg(feature = "tasks")]
fn tasks_in_roots(
    mut tools: ToolRegistry,
    store: &Arc<dyn TaskStore>,
) -> Result<ToolRegistry, keel_tool::RegistryError> {
    for name in ["task_status", "wait_task", "cancel_task", "list_tasks"] {
        if let Some(inner) = tools.remove(name) {
            tools.register_dyn(Arc::new(InRoots {
                inner,
                store: store.clone(),
            }))?;
        }
    }
    Ok(tools)
}

/// A task tool confined to the tasks inside the current client's allowed roots.
#[cfg(feature = "tasks")]
struct InRoots {
    inner: Arc<dyn DynTool>,
    store: Arc<dyn TaskStore>,
}

/// Whether `record` works inside the current client's allowed roots (any, outside a call).
#[cfg(feature = "tasks")]
async fn visible(record: &TaskRecord) -> bool {
    match keel_mcp::server::current_client() {
        Some(client) => client
            .allowed_roots()
            .await
            .dirs()
            .iter()
            .any(|root| record.workdir.starts_with(root)),
        None => true,
    }
}

/// The recent tasks the current client may see, as `list_tasks` shows them.
#[cfg(feature = "tasks")]
async fn list_visible(store: &dyn TaskStore) -> Result<ToolOutput, CallFailure> {
    let records = store
        .list(500)
        .map_err(|err| CallFailure::Tool(ToolError::failed(err.to_string())))?;
    let mut lines = Vec::new();
    for record in records {
        if lines.len() == 20 {
            break;
        }
        if visible(&record).await {
            lines.push(format!(
                "{} {} {} {}",
                record.id,
                record.status,
                record.runner,
                record.task_prompt.lines().next().unwrap_or_default()
            ));
        }
    }
    if lines.is_empty() {
        return Ok(ToolOutput::text("No tasks yet."));
    }
    Ok(ToolOutput::text(lines.join("\n")))
}

#[cfg(feature = "tasks")]
#[async_trait::async_trait]
impl DynTool for InRoots {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn definition(&self) -> ToolDefinition {
        self.inner.definition()
    }

    fn effect(&self, input: &Value) -> Effect {
        self.inner.effect(input)
    }

    fn timeout(&self) -> Option<Duration> {
        self.inner.timeout()
    }

    async fn call_json(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, CallFailure> {
        if self.inner.name() == "list_tasks" {
            return list_visible(self.store.as_ref()).await;
        }
        if let Some(id) = input.get("id").and_then(Value::as_str) {
            let id = id.trim();
            // A task outside the roots is, to this host, no task at all.
            if let Ok(Some(record)) = self.store.get(id)
                && !visible(&record).await
            {
                let unknown = keel_tasks::TaskError::NotFound { id: id.to_owned() };
                return Err(CallFailure::Tool(ToolError::failed(unknown.to_string())));
            }
        }
        self.inner.call_json(input, ctx).await
    }
}
