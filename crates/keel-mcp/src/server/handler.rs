//! One MCP connection's handler: `tools/list` from the registry, `tools/call` through its
//! dispatch with the request's cancellation and progress, the roots check before anything
//! runs.

#![expect(deprecated, reason = "logging/setLevel is what MCP hosts send today")]

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use keel_tool::{ToolCall, ToolContext, ToolInput};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeRequestParams,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use tokio::sync::OnceCell;

use super::Shared;
use super::client::{ClientHandle, with_client};

/// The handler of one connection (one stdio stream, or one HTTP session).
pub(crate) struct Connection {
    shared: Arc<Shared>,
    session_id: String,
    client: OnceCell<ClientHandle>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.clients.remove(&self.session_id);
    }
}

impl Connection {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let session_id = shared.next_session_id();
        Self {
            shared,
            session_id,
            client: OnceCell::new(),
        }
    }

    /// The client of this connection, registered at its first request.
    fn client(&self, context: &RequestContext<RoleServer>) -> ClientHandle {
        if let Some(client) = self.client.get() {
            return client.clone();
        }
        let client = ClientHandle::new(
            self.session_id.clone(),
            context.peer.clone(),
            self.shared.roots.clone(),
        );
        if self.client.set(client.clone()).is_ok() {
            self.shared.clients.add(client.clone());
        }
        self.client.get().cloned().unwrap_or(client)
    }

    fn tools(&self) -> Vec<Tool> {
        self.shared
            .registry
            .definitions()
            .into_iter()
            .map(|definition| {
                let schema: JsonObject = match definition.input_schema {
                    Value::Object(map) => map,
                    _ => JsonObject::new(),
                };
                let read_only = self.shared.read_only.contains(&definition.name);
                Tool::new(definition.name, definition.description, Arc::new(schema))
                    .with_annotations(ToolAnnotations::new().read_only(read_only))
            })
            .collect()
    }

    /// Checks the directories `name`'s arguments name (and rewrites them resolved); the
    /// error text when one is not allowed.
    async fn confine(
        &self,
        client: &ClientHandle,
        name: &str,
        arguments: &mut serde_json::Map<String, Value>,
    ) -> Result<(), String> {
        let args: Vec<&str> = self
            .shared
            .confined
            .iter()
            .filter(|(tool, _)| tool == name)
            .map(|(_, arg)| arg.as_str())
            .collect();
        if args.is_empty() {
            return Ok(());
        }
        let allowed = client.allowed_roots().await;
        for arg in args {
            let given = match arguments.get(arg) {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) if text.trim().is_empty() => None,
                Some(Value::String(text)) => Some(text.clone()),
                Some(other) => {
                    return Err(format!(
                        "{arg} must be a directory path (a string), got {}; nothing was run",
                        keel_provider::json_kind(other)
                    ));
                }
            };
            // Absent, the tool works in the server's directory: that must be allowed too.
            let dir = given.clone().unwrap_or_else(|| ".".to_owned());
            let resolved = allowed.check(arg, dir.as_ref(), &self.shared.cwd)?;
            if given.is_some() {
                arguments.insert(
                    arg.to_owned(),
                    Value::String(resolved.display().to_string()),
                );
            }
        }
        Ok(())
    }

    async fn run_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let client = self.client(&context);
        let name = request.name.to_string();
        let mut arguments = request.arguments.unwrap_or_default();
        if self.shared.registry.get(&name).is_some()
            && let Err(message) = self.confine(&client, &name, &mut arguments).await
        {
            tracing::info!(tool = %name, "refused: {message}");
            return text_result(message, true);
        }
        let input = Value::Object(arguments);
        let (sender, mut progress) = tokio::sync::mpsc::unbounded_channel();
        let ctx = ToolContext::new(&self.shared.cwd, &self.session_id)
            .with_cancel(context.ct.clone())
            .with_progress(sender);
        let call_id = format!("mcp-{}", context.id);
        let call = ToolCall {
            id: &call_id,
            name: &name,
            input: ToolInput::Valid(&input),
        };
        let token = context.meta.get_progress_token();
        let registry = &self.shared.registry;
        let running = with_client(client.clone(), registry.dispatch(call, &ctx));
        tokio::pin!(running);
        let started = Instant::now();
        // The first beat one period from now: awaiting an interval's immediate first tick
        // would wait for the timer's next turn (up to a millisecond).
        let every = self.shared.heartbeat;
        let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        let mut step = 0u32;
        let output = loop {
            tokio::select! {
                output = &mut running => break output,
                Some(line) = progress.recv() => {
                    step = step.saturating_add(1);
                    notify_progress(&context, token.as_ref(), step, line.line).await;
                }
                _ = heartbeat.tick() => {
                    step = step.saturating_add(1);
                    let message = format!(
                        "{name} running for {} s",
                        started.elapsed().as_secs()
                    );
                    notify_progress(&context, token.as_ref(), step, message).await;
                }
            }
        };
        text_result(output.content, output.is_error)
    }
}

/// Sends `notifications/progress` for the request's token, if it carries one.
async fn notify_progress(
    context: &RequestContext<RoleServer>,
    token: Option<&ProgressToken>,
    step: u32,
    message: String,
) {
    let Some(token) = token else { return };
    let mut param = ProgressNotificationParam::new(token.clone(), f64::from(step));
    param.message = Some(message);
    if let Err(err) = context.peer.notify_progress(param).await {
        tracing::debug!("progress not sent: {err}");
    }
}

/// A result of one text block.
fn text_result(text: String, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl ServerHandler for Connection {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .build();
        let mut info = InitializeResult::new(capabilities);
        info.server_info = self.shared.info.clone();
        info.instructions.clone_from(&self.shared.instructions);
        info
    }

    /// Up to the newest version with an `initialize` handshake: later ones forbid the
    /// server's requests (roots, elicitation) this server relies on.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let _ = self.client(&context);
        tracing::info!(
            session = %self.session_id,
            client = %request.client_info.name,
            "MCP client connected"
        );
        self.negotiate_initialize(&request)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.client(&context).set_min_level(request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let _ = self.client(&context);
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.run_call(request, context).await.into())
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        if let Some(client) = self.client.get() {
            client.roots_changed().await;
        }
    }
}
