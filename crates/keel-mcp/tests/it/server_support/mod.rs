//! A registry of small tools and an in-process rmcp client, for the server tests.

#![allow(deprecated, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_mcp::server::{Confirmation, ToolServer, current_client};
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam,
    Root,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ErrorData, ServiceExt as _};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
pub(crate) struct EchoArgs {
    /// What to say back.
    pub(crate) text: String,
}

/// Says the text back.
pub(crate) struct Echo;

impl Tool for Echo {
    type Args = EchoArgs;
    const NAME: &'static str = "echo";
    fn description(&self) -> &str {
        "Says the text back."
    }
    fn effect(&self, _args: &EchoArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, args: EchoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(args.text))
    }
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct TouchArgs {
    /// Where.
    pub(crate) cwd: PathBuf,
}

/// Writes `touched` in `cwd` and says where.
pub(crate) struct Touch;

impl Tool for Touch {
    type Args = TouchArgs;
    const NAME: &'static str = "touch";
    fn description(&self) -> &str {
        "Writes a file named touched in cwd."
    }
    async fn call(&self, args: TouchArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        std::fs::write(args.cwd.join("touched"), ctx.session_id())
            .map_err(|err| ToolError::failed(err.to_string()))?;
        Ok(ToolOutput::text(format!("touched {}", args.cwd.display())))
    }
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct SlowArgs {
    /// Lines of progress to report before waiting.
    pub(crate) lines: u32,
}

/// Reports progress, then waits until cancelled (recording that it was).
pub(crate) struct Slow {
    pub(crate) cancelled: Arc<Mutex<bool>>,
}

impl Tool for Slow {
    type Args = SlowArgs;
    const NAME: &'static str = "slow";
    fn description(&self) -> &str {
        "Reports progress, then runs until cancelled."
    }
    async fn call(&self, args: SlowArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        for n in 1..=args.lines {
            ctx.progress(format!("step {n}"));
        }
        let flag = self.cancelled.clone();
        let token = ctx.cancel().clone();
        // Seen from outside the dispatch: the registry drops this future when cancelled.
        tokio::spawn(async move {
            token.cancelled().await;
            *flag.lock().unwrap() = true;
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(ToolOutput::text("not cancelled"))
    }
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct AskArgs {}

/// Asks the client's user, and says what they answered.
pub(crate) struct Ask;

impl Tool for Ask {
    type Args = AskArgs;
    const NAME: &'static str = "ask";
    fn description(&self) -> &str {
        "Asks the user."
    }
    async fn call(&self, _args: AskArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(client) = current_client() else {
            return Ok(ToolOutput::text("no client"));
        };
        let answer = client.confirm("Allow the thing?").await;
        Ok(ToolOutput::text(match answer {
            Confirmation::Accepted => "accepted",
            Confirmation::Declined => "declined",
            _ => "unavailable",
        }))
    }
}

/// The registry of the tests: echo, touch, slow, ask.
pub(crate) fn registry(cancelled: Arc<Mutex<bool>>) -> ToolRegistry {
    ToolRegistry::new()
        .with(Echo)
        .unwrap()
        .with(Touch)
        .unwrap()
        .with(Slow { cancelled })
        .unwrap()
        .with(Ask)
        .unwrap()
}

/// A server of [`registry`] working in `cwd` with `roots`.
pub(crate) fn server(cwd: &Path, roots: &[PathBuf], cancelled: Arc<Mutex<bool>>) -> ToolServer {
    ToolServer::builder(registry(cancelled), cwd)
        .roots(roots.to_vec())
        .read_only(["echo"])
        .confine("touch", "cwd")
        .heartbeat(Duration::from_millis(50))
        .build()
        .unwrap()
}

/// What the client saw.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) progress: Vec<ProgressNotificationParam>,
    pub(crate) logs: Vec<LoggingMessageNotificationParam>,
    pub(crate) roots_asked: usize,
}

/// A client with roots (when `roots` is `Some`) and an answer to elicitation (when
/// `answer` is `Some`).
#[derive(Clone)]
pub(crate) struct TestClient {
    pub(crate) roots: Arc<Mutex<Option<Vec<String>>>>,
    pub(crate) answer: Option<ElicitationAction>,
    pub(crate) seen: Arc<Mutex<Seen>>,
}

impl TestClient {
    pub(crate) fn new(roots: Option<Vec<String>>, answer: Option<ElicitationAction>) -> Self {
        Self {
            roots: Arc::new(Mutex::new(roots)),
            answer,
            seen: Arc::default(),
        }
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.roots.lock().unwrap().is_some() {
            capabilities.roots = Some(Default::default());
        }
        if self.answer.is_some() {
            capabilities.elicitation = Some(Default::default());
        }
        ClientConfig::new(capabilities, Implementation::new("test-client", "1.0"))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.seen.lock().unwrap().roots_asked += 1;
        let roots = self.roots.lock().unwrap().clone().unwrap_or_default();
        Ok(ListRootsResult::new(
            roots.into_iter().map(Root::new).collect(),
        ))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let action = self.answer.clone().unwrap_or(ElicitationAction::Decline);
        let accepted = action == ElicitationAction::Accept;
        let mut result = ElicitResult::new(action);
        if accepted {
            result = result.with_content(json!({"approve": true}));
        }
        Ok(result)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen.lock().unwrap().progress.push(params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen.lock().unwrap().logs.push(params);
    }
}

/// `client` connected to `server` over an in-memory pipe.
pub(crate) async fn connect(
    server: &ToolServer,
    client: TestClient,
) -> RunningService<RoleClient, TestClient> {
    let (server_side, client_side) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server_side);
    let server = server.clone();
    tokio::spawn(async move {
        let _ = server.serve(server_read, server_write).await;
    });
    let (client_read, client_write) = tokio::io::split(client_side);
    client.serve((client_read, client_write)).await.unwrap()
}

/// A file URI of `path`.
pub(crate) fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}
