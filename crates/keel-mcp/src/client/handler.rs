//! keel's side of a connection to an MCP server: what it tells the server about itself, and
//! the notifications it acts on (progress of a call, a changed tool list).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, RoleClient};

use keel_tool::ToolContext;

/// State shared by a server's connections and its tools: which calls wait for progress, and
/// whether its tool list changed since it was last read.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// The running calls' contexts, by the progress token their request carries.
    progress: Mutex<HashMap<ProgressToken, ToolContext>>,
    /// Set by `notifications/tools/list_changed`, cleared when the list is read again.
    stale: AtomicBool,
}

impl Shared {
    /// Sends the progress of the call whose request carries `token` to `ctx`, until
    /// [`forget`](Self::forget).
    pub(crate) fn watch(&self, token: ProgressToken, ctx: ToolContext) {
        if let Ok(mut map) = self.progress.lock() {
            map.insert(token, ctx);
        }
    }

    /// Stops sending progress for `token`.
    pub(crate) fn forget(&self, token: &ProgressToken) {
        if let Ok(mut map) = self.progress.lock() {
            map.remove(token);
        }
    }

    /// Whether the server said its tool list changed since it was last read; clears it.
    pub(crate) fn take_stale(&self) -> bool {
        self.stale.swap(false, Ordering::AcqRel)
    }

    /// Marks the tool list as changed.
    pub(crate) fn mark_stale(&self) {
        self.stale.store(true, Ordering::Release);
    }
}

/// The client handler of one connection.
#[derive(Debug, Clone)]
pub(crate) struct Handler {
    pub(crate) server: String,
    pub(crate) shared: Arc<Shared>,
}

/// One progress notification as a line: `3/10 compiling` or `40%`.
pub(crate) fn progress_line(params: &ProgressNotificationParam) -> String {
    let amount = match params.total {
        Some(total) if total > 0.0 => format!("{}/{}", params.progress, total),
        _ => format!("{}", params.progress),
    };
    match &params.message {
        Some(message) if !message.is_empty() => format!("{amount} {message}"),
        _ => amount,
    }
}

impl rmcp::ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let ctx = self
            .shared
            .progress
            .lock()
            .ok()
            .and_then(|map| map.get(&params.progress_token).cloned());
        if let Some(ctx) = ctx {
            ctx.progress(progress_line(&params));
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = self.server, "the server's tool list changed");
        self.shared.mark_stale();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("keel", env!("CARGO_PKG_VERSION")),
        )
    }
}
