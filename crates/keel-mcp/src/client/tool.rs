//! An MCP server's tool as a keel [`DynTool`]: its name (`mcp__<server>__<tool>`), a
//! provider-safe schema, the effect its annotations claim, and calls that never fail the
//! loop (a dead server, a timeout, a cancellation each become an error result).

use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    ProgressToken, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::Value;

use keel_provider::ToolDefinition;
use keel_tool::{CallFailure, DynTool, Effect, ToolContext, ToolOutput, normalize_schema};

use super::Inner;
use super::content::tool_output;
use super::handler::Shared;

/// The name a server's tool is offered under: `mcp__<server>__<tool>`, Claude Code's naming
/// (so rules and hook matchers such as `mcp__github__*` work), with every character a tool
/// name may not hold replaced by `_`.
pub fn offered_name(server: &str, tool: &str) -> String {
    let clean = |text: &str| -> String {
        text.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("mcp__{}__{}", clean(server), clean(tool))
}

/// One tool of a server.
pub(crate) struct McpTool {
    server: Weak<Inner>,
    /// The server's own name for it.
    remote: String,
    definition: ToolDefinition,
    read_only: bool,
    destructive: bool,
    timeout: Option<Duration>,
}

/// The keel tools for the tools `listed` by `server`, and a line for each one left out.
pub(crate) fn keel_tools(
    server: &Arc<Inner>,
    listed: Vec<rmcp::model::Tool>,
) -> (Vec<Arc<dyn DynTool>>, Vec<String>) {
    let server_name = server.config.name();
    let mut tools: Vec<Arc<dyn DynTool>> = Vec::new();
    let mut warnings = Vec::new();
    for tool in listed {
        let name = offered_name(server_name, &tool.name);
        let left_out = |reason: String| {
            format!(
                "MCP server {server_name}: tool {:?} is left out: {reason}",
                tool.name
            )
        };
        if name.len() > 64 {
            warnings.push(left_out(format!(
                "{name} is longer than the 64 characters a tool name may have"
            )));
            continue;
        }
        if tools.iter().any(|t| t.name() == name) {
            warnings.push(left_out(format!(
                "another of its tools is also offered as {name}"
            )));
            continue;
        }
        let mut schema = Value::Object((*tool.input_schema).clone());
        normalize_schema(&mut schema);
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or("")
            .to_owned();
        let definition = ToolDefinition {
            name,
            description,
            input_schema: schema,
        };
        if let Err(reason) = keel_tool::validate_definition(&definition) {
            warnings.push(left_out(format!(
                "its input schema cannot be used: {reason}"
            )));
            continue;
        }
        let annotations = tool.annotations.as_ref();
        tools.push(Arc::new(McpTool {
            server: Arc::downgrade(server),
            remote: tool.name.to_string(),
            definition,
            read_only: annotations.and_then(|a| a.read_only_hint) == Some(true),
            destructive: annotations.and_then(|a| a.destructive_hint) == Some(true),
            timeout: server.config.tool_timeout,
        }));
    }
    (tools, warnings)
}

#[async_trait::async_trait]
impl DynTool for McpTool {
    fn name(&self) -> &str {
        &self.definition.name
    }

    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    /// From the server's annotations: `readOnlyHint` → read-only (may run beside other
    /// reads), `destructiveHint` → destructive (asked about), otherwise mutating.
    fn effect(&self, _input: &Value) -> Effect {
        if self.read_only {
            Effect::ReadOnly
        } else if self.destructive {
            Effect::Destructive {
                reason: format!(
                    "the MCP server marks {} as destructive",
                    self.definition.name
                ),
            }
        } else {
            Effect::Mutating
        }
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn call_json(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, CallFailure> {
        let Some(server) = self.server.upgrade() else {
            return Ok(ToolOutput::error(format!(
                "{} is no longer available: its MCP server was shut down",
                self.definition.name
            )));
        };
        Ok(call(&server, &self.remote, input, ctx).await)
    }
}

/// Sends `notifications/cancelled` for a request given up (the call timed out or was
/// cancelled, so its future was dropped), and stops routing its progress.
struct Abandon {
    peer: Peer<RoleClient>,
    id: RequestId,
    token: ProgressToken,
    shared: Arc<Shared>,
    armed: bool,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        self.shared.forget(&self.token);
        if !self.armed {
            return;
        }
        let peer = self.peer.clone();
        let id = self.id.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let params = CancelledNotificationParam::new(
                    Some(id),
                    Some("the call was cancelled or timed out".to_owned()),
                );
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}

async fn call(server: &Arc<Inner>, tool: &str, input: &Value, ctx: &ToolContext) -> ToolOutput {
    let name = server.config.name();
    let (peer, generation) = match Inner::peer(server).await {
        Ok(peer) => peer,
        Err(err) => return ToolOutput::error(format!("{err}; the call was not made")),
    };
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Some(arguments) = input.as_object() {
        params = params.with_arguments(arguments.clone());
    }
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = match peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
    {
        Ok(handle) => handle,
        Err(err) => {
            let why = server.ended(generation).await;
            return ToolOutput::error(format!(
                "MCP server {name} could not be reached ({err}; {why}); the call was not made, \
                 and the server will be started again at the next call"
            ));
        }
    };
    server
        .shared
        .watch(handle.progress_token.clone(), ctx.clone());
    let mut abandon = Abandon {
        peer: peer.clone(),
        id: handle.id.clone(),
        token: handle.progress_token.clone(),
        shared: server.shared.clone(),
        armed: true,
    };
    let response = handle.await_response().await;
    abandon.armed = false;
    drop(abandon);
    match response {
        Ok(ServerResult::CallToolResult(result)) => tool_output(result),
        Ok(_) => ToolOutput::error(format!(
            "MCP server {name} answered the call with something other than a tool result"
        )),
        Err(ServiceError::McpError(error)) => {
            ToolOutput::error(format!("MCP server {name}: {}", error.message))
        }
        Err(ServiceError::TransportClosed) => {
            let why = server.ended(generation).await;
            ToolOutput::error(format!(
                "MCP server {name} stopped during the call ({why}); the call may not have \
                 completed. The server will be started again at the next call of one of its \
                 tools"
            ))
        }
        Err(err) => ToolOutput::error(format!("MCP server {name}: {err}")),
    }
}
