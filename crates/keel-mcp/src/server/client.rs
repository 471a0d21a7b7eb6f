//! The MCP clients connected to a server: what the host application can ask of them (their
//! roots, their user's consent) and tell them (logging messages), and the client of the
//! tool call running now ([`current_client`]).

#![expect(
    deprecated,
    reason = "roots and logging are what MCP hosts support today"
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{ElicitationError, RoleServer};
use rmcp::{Peer, ServiceError};
use schemars::JsonSchema;
use serde::Deserialize;

use super::roots::{AllowedRoots, root_path};

/// How long a question to the client's user may wait for an answer.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(600);
/// How long `roots/list` may take.
const ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

tokio::task_local! {
    static CURRENT: ClientHandle;
}

/// The client whose tool call is running in this task, if any: a tool (or an approver called
/// from it) uses it to ask the client's user ([`ClientHandle::confirm`]) or to read its
/// roots. Work spawned onto other tasks does not see it.
pub fn current_client() -> Option<ClientHandle> {
    CURRENT.try_with(Clone::clone).ok()
}

/// Runs `work` with `client` as the [`current_client`].
pub(crate) async fn with_client<F: Future>(client: ClientHandle, work: F) -> F::Output {
    CURRENT.scope(client, work).await
}

/// How severe a logging message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogLevel {
    /// Detail.
    Debug,
    /// Something the user may want to know (a task ended well).
    Info,
    /// Something that did not go as asked (a task failed).
    Warning,
    /// Something broke.
    Error,
}

impl From<LogLevel> for LoggingLevel {
    fn from(level: LogLevel) -> Self {
        match level {
            LogLevel::Debug => LoggingLevel::Debug,
            LogLevel::Info => LoggingLevel::Info,
            LogLevel::Warning => LoggingLevel::Warning,
            LogLevel::Error => LoggingLevel::Error,
        }
    }
}

/// What the client's user answered to [`ClientHandle::confirm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Confirmation {
    /// They said yes.
    Accepted,
    /// They said no, dismissed the question, or did not answer in time.
    Declined,
    /// Nobody could be asked: the client does not support elicitation, or the request
    /// failed.
    Unavailable,
}

/// The form a confirmation shows: one yes/no field.
#[derive(Debug, Deserialize, JsonSchema)]
struct Approve {
    /// Allow it?
    approve: bool,
}

rmcp::elicit_safe!(Approve);

/// The client's roots as last fetched: `None` until fetched, and again after the client
/// says they changed.
#[derive(Debug, Default)]
struct RootsCache {
    fetched: Option<Option<Vec<PathBuf>>>,
}

/// One connected MCP client. Cheap to clone.
#[derive(Clone)]
pub struct ClientHandle {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    session_id: String,
    peer: Peer<RoleServer>,
    server_roots: AllowedRoots,
    roots: tokio::sync::Mutex<RootsCache>,
    /// The least severe level the client wants (`logging/setLevel`), as a rank.
    min_level: AtomicU8,
}

/// The rank of `level`: higher is more severe.
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl std::fmt::Debug for ClientHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientHandle")
            .field("session_id", &self.inner.session_id)
            .finish_non_exhaustive()
    }
}

impl ClientHandle {
    pub(crate) fn new(
        session_id: String,
        peer: Peer<RoleServer>,
        server_roots: AllowedRoots,
    ) -> Self {
        Self {
            inner: Arc::new(ClientInner {
                session_id,
                peer,
                server_roots,
                roots: tokio::sync::Mutex::new(RootsCache::default()),
                min_level: AtomicU8::new(0),
            }),
        }
    }

    /// The id of this connection: the session id its tool calls run with (so background
    /// tasks it starts are recorded under it).
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// The client's name and version, as it gave them.
    pub fn client_name(&self) -> Option<String> {
        self.inner
            .peer
            .peer_info()
            .map(|info| format!("{} {}", info.client_info.name, info.client_info.version))
    }

    /// Whether the connection is gone.
    pub fn is_closed(&self) -> bool {
        self.inner.peer.is_transport_closed()
    }

    /// Whether the client said it can ask its user questions (elicitation).
    pub fn can_confirm(&self) -> bool {
        !self.inner.peer.supported_elicitation_modes().is_empty()
    }

    /// Whether the client said it has roots to tell.
    fn has_roots(&self) -> bool {
        self.inner
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some())
    }

    /// The client's roots (`roots/list`), resolved to local directories: `None` when it
    /// names none (no roots capability, an empty list, or it cannot be asked); roots that
    /// are not local directories are left out, so `Some` of an empty list means none of
    /// the roots it named can be used. Fetched once, and again after
    /// `notifications/roots/list_changed`.
    pub async fn client_roots(&self) -> Option<Vec<PathBuf>> {
        if !self.has_roots() {
            return None;
        }
        let mut cache = self.inner.roots.lock().await;
        if let Some(roots) = &cache.fetched {
            return roots.clone();
        }
        let listed = tokio::time::timeout(ROOTS_TIMEOUT, self.inner.peer.list_roots()).await;
        let roots = match listed {
            Ok(Ok(result)) if result.roots.is_empty() => None,
            Ok(Ok(result)) => {
                let mut paths = Vec::new();
                for root in &result.roots {
                    match root_path(&root.uri) {
                        Some(path) => paths.push(path),
                        None => tracing::info!(
                            uri = %root.uri,
                            "client root ignored: not a local directory"
                        ),
                    }
                }
                Some(paths)
            }
            Ok(Err(err)) => {
                tracing::warn!("roots/list failed: {err}");
                return None;
            }
            Err(_) => {
                tracing::warn!("roots/list timed out");
                return None;
            }
        };
        cache.fetched = Some(roots.clone());
        roots
    }

    /// Forgets the client's roots, so the next call asks again.
    pub(crate) async fn roots_changed(&self) {
        self.inner.roots.lock().await.fetched = None;
    }

    /// Where this client's calls may work: the server's roots narrowed by the client's.
    pub async fn allowed_roots(&self) -> AllowedRoots {
        let client = self.client_roots().await;
        self.inner.server_roots.narrowed(client.as_deref())
    }

    /// The least severe level the client asked for (`logging/setLevel`).
    pub(crate) fn set_min_level(&self, level: LoggingLevel) {
        self.inner.min_level.store(rank(level), Ordering::Relaxed);
    }

    /// Sends a logging message (`notifications/message`) a host can show; `data` is any
    /// JSON (a string, or an object with fields). A message less severe than the level the
    /// client set (`logging/setLevel`) is not sent.
    pub async fn log(
        &self,
        level: LogLevel,
        logger: &str,
        data: serde_json::Value,
    ) -> Result<(), ServiceError> {
        let level = LoggingLevel::from(level);
        if rank(level) < self.inner.min_level.load(Ordering::Relaxed) {
            return Ok(());
        }
        let param = LoggingMessageNotificationParam::new(level, data).with_logger(logger);
        self.inner.peer.notify_logging_message(param).await
    }

    /// Asks the client's user `message` through elicitation (a yes/no form). Never fails:
    /// a client that cannot ask gives [`Confirmation::Unavailable`].
    pub async fn confirm(&self, message: &str) -> Confirmation {
        if !self.can_confirm() {
            return Confirmation::Unavailable;
        }
        let asked = self
            .inner
            .peer
            .elicit_with_timeout::<Approve>(message, Some(CONFIRM_TIMEOUT))
            .await;
        match asked {
            Ok(Some(Approve { approve: true })) => Confirmation::Accepted,
            Ok(_) | Err(ElicitationError::UserDeclined | ElicitationError::UserCancelled) => {
                Confirmation::Declined
            }
            Err(ElicitationError::Service(ServiceError::Timeout { .. })) => Confirmation::Declined,
            Err(err) => {
                tracing::warn!("elicitation failed: {err}");
                Confirmation::Unavailable
            }
        }
    }
}

/// The clients connected now, by session id. Cheap to clone; clones share the list.
#[derive(Debug, Clone, Default)]
pub struct Clients {
    inner: Arc<Mutex<BTreeMap<String, ClientHandle>>>,
}

impl Clients {
    /// The clients connected now (closed connections are dropped from the list).
    pub fn list(&self) -> Vec<ClientHandle> {
        let Ok(mut map) = self.inner.lock() else {
            return Vec::new();
        };
        map.retain(|_, client| !client.is_closed());
        map.values().cloned().collect()
    }

    /// The client of session `id`, if still connected.
    pub fn get(&self, id: &str) -> Option<ClientHandle> {
        self.list().into_iter().find(|c| c.session_id() == id)
    }

    pub(crate) fn add(&self, client: ClientHandle) {
        if let Ok(mut map) = self.inner.lock() {
            map.insert(client.session_id().to_owned(), client);
        }
    }

    pub(crate) fn remove(&self, id: &str) {
        if let Ok(mut map) = self.inner.lock() {
            map.remove(id);
        }
    }
}
