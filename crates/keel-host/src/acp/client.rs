//! What keel asks of the ACP client: permission for gated calls
//! (`session/request_permission`), and the editor's files (`fs/read_text_file`,
//! `fs/write_text_file`) where the client offers them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Announced, kind, title, tool_call};
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, ReadTextFileRequest, RequestPermissionOutcome,
    RequestPermissionRequest, SessionNotification, SessionUpdate, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, WriteTextFileRequest,
};
use keel::engine::{ApprovalRequest, ApprovalScope, Approver, Decision, ScopePattern};
use keel::tool::EditorFiles;

/// The connection to the client.
pub type Connection = agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Client>;

/// The permission options keel offers, by id.
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";
const REJECT_ALWAYS: &str = "reject_always";

/// Asks the client about gated calls (`session/request_permission`). "Always allow" is the
/// engine's: the call's scope runs without asking for the rest of the session (never for a
/// protected path). "Always reject" is kept here: a later call in a rejected scope is denied
/// without asking.
pub struct ClientApprover {
    connection: Connection,
    /// The session's id.
    session_id: String,
    /// The session's directory, which the calls' paths are relative to.
    cwd: PathBuf,
    /// The calls shown to the client before their question.
    announced: Announced,
    rejected: Mutex<HashSet<ApprovalScope>>,
}

impl ClientApprover {
    /// An approver asking through `connection` for session `session_id` in `cwd`; each
    /// call asked about is first shown to the client as a `pending` tool call, and noted in
    /// `announced`.
    pub fn new(
        connection: Connection,
        session_id: String,
        cwd: PathBuf,
        announced: Announced,
    ) -> Self {
        Self {
            connection,
            session_id,
            cwd,
            announced,
            rejected: Mutex::default(),
        }
    }

    fn rejected_always(&self, scope: &ApprovalScope) -> bool {
        self.rejected
            .lock()
            .is_ok_and(|rejected| rejected.contains(scope))
    }
}

#[async_trait::async_trait]
impl Approver for ClientApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let scope = scope_words(&request.scope);
        if self.rejected_always(&request.scope) {
            return Decision::Deny(format!(
                "the user rejected {scope} for the rest of this session"
            ));
        }
        let session_id = self.session_id.clone();
        // The call as the client will show it while the question is open.
        let call = tool_call(
            request.call_id.clone(),
            &request.tool,
            request.input.clone(),
            &self.cwd,
        )
        .status(ToolCallStatus::Pending);
        let shown = SessionNotification::new(session_id.clone(), SessionUpdate::ToolCall(call));
        if self.connection.send_notification(shown).is_ok()
            && let Ok(mut announced) = self.announced.lock()
        {
            announced.insert(request.call_id.clone());
        }
        let fields = ToolCallUpdateFields::new()
            .title(title(&request.tool, &request.input))
            .kind(kind(&request.tool))
            .raw_input(request.input.clone());
        let mut options = vec![PermissionOption::new(
            ALLOW_ONCE,
            "Allow once",
            PermissionOptionKind::AllowOnce,
        )];
        // A protected path is asked about every time: no "always" to offer.
        if !request.is_protected() {
            options.push(PermissionOption::new(
                ALLOW_ALWAYS,
                format!("Always allow {scope} in this session"),
                PermissionOptionKind::AllowAlways,
            ));
        }
        options.push(PermissionOption::new(
            REJECT_ONCE,
            "Reject",
            PermissionOptionKind::RejectOnce,
        ));
        options.push(PermissionOption::new(
            REJECT_ALWAYS,
            format!("Always reject {scope} in this session"),
            PermissionOptionKind::RejectAlways,
        ));
        let asked = RequestPermissionRequest::new(
            session_id,
            ToolCallUpdate::new(request.call_id.clone(), fields),
            options,
        );
        match self.connection.send_request(asked).block_task().await {
            Ok(response) => match response.outcome {
                RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                    ALLOW_ONCE => Decision::Allow,
                    ALLOW_ALWAYS => Decision::AllowAlways,
                    REJECT_ALWAYS => {
                        if let Ok(mut rejected) = self.rejected.lock() {
                            rejected.insert(request.scope.clone());
                        }
                        Decision::Deny(format!(
                            "the user rejected {scope} for the rest of this session"
                        ))
                    }
                    _ => Decision::Deny("the user rejected this call".to_owned()),
                },
                // The prompt turn was cancelled while the question was open.
                _ => Decision::Cancel,
            },
            Err(err) => Decision::Deny(format!("the client could not be asked: {err}")),
        }
    }
}

/// The calls a scope covers, in words: `` `rm -rf build` (this exact command)``.
fn scope_words(scope: &ApprovalScope) -> String {
    match &scope.pattern {
        ScopePattern::Command(command) => format!("`{command}` (this exact command)"),
        ScopePattern::Path(path) => format!("{} on `{path}` (this path only)", scope.tool),
        ScopePattern::Input(_) => format!("{} with exactly these arguments", scope.tool),
    }
}

/// The editor's files, through the client's `fs/read_text_file` and `fs/write_text_file`:
/// the file tools ask it only after their own path checks.
pub struct ClientFiles {
    connection: Connection,
    session_id: String,
    reads: bool,
    writes: bool,
}

impl ClientFiles {
    /// The files of session `session_id`, read and written through the client as far as it
    /// offers (`reads`, `writes`); `None` when it offers neither.
    pub fn offered(
        connection: Connection,
        session_id: String,
        reads: bool,
        writes: bool,
    ) -> Option<Self> {
        (reads || writes).then_some(Self {
            connection,
            session_id,
            reads,
            writes,
        })
    }
}

impl std::fmt::Debug for ClientFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFiles")
            .field("session_id", &self.session_id)
            .field("reads", &self.reads)
            .field("writes", &self.writes)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl EditorFiles for ClientFiles {
    fn reads(&self) -> bool {
        self.reads
    }

    fn writes(&self) -> bool {
        self.writes
    }

    async fn read_text(&self, path: &Path) -> Result<String, String> {
        let request = ReadTextFileRequest::new(self.session_id.clone(), path);
        match self.connection.send_request(request).block_task().await {
            Ok(response) => Ok(response.content),
            Err(err) => Err(err.to_string()),
        }
    }

    async fn write_text(&self, path: &Path, text: &str) -> Result<(), String> {
        let request = WriteTextFileRequest::new(self.session_id.clone(), path, text);
        match self.connection.send_request(request).block_task().await {
            Ok(_) => Ok(()),
            Err(err) => Err(err.to_string()),
        }
    }
}
