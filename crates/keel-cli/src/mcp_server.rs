//! `keel mcp-server`: keel's `code` and background-task tools served to an MCP host, built
//! from the agent `keel exec` would build (its sandbox, rules, hooks and approvals), with
//! the host told when a task it started ends. The serving itself is keel-mcp's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keel::TaskLauncher;
use keel_engine::{ApprovalRequest, Approver, Decision, DenyGated, Hooks};
use keel_mcp::server::{BearerToken, ClientHandle, Confirmation, LogLevel, ToolServer};
use keel_tasks::{TaskRecord, TaskStatus, TaskStore};
use keel_tool::{
    CallFailure, DynTool, Effect, ToolContext, ToolDefinition, ToolError, ToolOutput, ToolRegistry,
};
use serde_json::Value;

use crate::approve::{ModeApprover, approval_question};
use crate::cli::{McpServerArgs, Options};
use crate::config::ApprovalMode;
use crate::setup::{CliError, Mode, SessionChoice, Setup, existing_dir};
use crate::signals;

/// The tools a host gets.
const TOOLS: [&str; 6] = [
    "code",
    "start_task",
    "task_status",
    "wait_task",
    "cancel_task",
    "list_tasks",
];

/// The ones that only read.
const READ_ONLY: [&str; 3] = ["task_status", "wait_task", "list_tasks"];

/// The variable holding the bearer token when `--token-env` names none.
const TOKEN_VAR: &str = "KEEL_MCP_TOKEN";

/// How often the task store is read for tasks that ended.
const TASK_POLL: Duration = Duration::from_millis(500);

const INSTRUCTIONS: &str = "keel is a coding agent. `code` runs a self-contained coding task \
in a directory and returns the agent's report and the path of its log; `start_task` runs one \
in the background and returns its id at once: you are sent a logging message when it ends \
(or use wait_task / task_status). Directories must lie inside the roots keel was given.";

fn stderr_line(text: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "keel: {text}");
}

/// Gated calls of a host's runs: `--approvals allow` allows them, `--approvals deny` refuses
/// them; otherwise the host's user is asked through elicitation where the client supports
/// it, and they are refused where it does not.
struct HostApprover {
    mode: Option<ApprovalMode>,
    fixed: ModeApprover,
}

impl HostApprover {
    fn new(mode: Option<ApprovalMode>) -> Self {
        let fixed = match mode {
            Some(ApprovalMode::Allow) => ApprovalMode::Allow,
            _ => ApprovalMode::Deny,
        };
        Self {
            mode,
            fixed: ModeApprover::new(fixed, None, None),
        }
    }

    fn asks(&self) -> bool {
        matches!(self.mode, None | Some(ApprovalMode::Ask))
    }
}

#[async_trait::async_trait]
impl Approver for HostApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        if self.asks()
            && let Some(client) = keel_mcp::server::current_client()
        {
            // The question without its `[y/N/a(lways)]`: the host's form has its own answers.
            let question = approval_question(request);
            let question = question
                .split(" [y/N")
                .next()
                .unwrap_or_default()
                .trim_end();
            match client.confirm(question).await {
                Confirmation::Accepted => return Decision::Allow,
                Confirmation::Declined => {
                    return Decision::Deny(
                        "the user declined this call; ask them or do it another way".into(),
                    );
                }
                _ => {}
            }
        }
        if self.asks() {
            return DenyGated.approve(request).await;
        }
        self.fixed.approve(request).await
    }

    fn allows_unattended(&self) -> bool {
        self.fixed.allows_unattended()
    }
}

/// The roots the flags give, resolved; the working directory without any.
fn roots(args: &McpServerArgs, cwd: &std::path::Path) -> Result<Vec<PathBuf>, CliError> {
    if args.roots.is_empty() {
        return Ok(vec![cwd.to_path_buf()]);
    }
    args.roots
        .iter()
        .map(|dir| existing_dir(dir, "--root "))
        .collect()
}

/// The bearer token for `--listen`, from `--token-env`'s variable or `KEEL_MCP_TOKEN`.
fn token(args: &McpServerArgs) -> Result<BearerToken, CliError> {
    let var = args.token_env.as_deref().unwrap_or(TOKEN_VAR);
    let value = std::env::var(var).unwrap_or_default();
    if value.is_empty() {
        return Err(CliError::Usage(format!(
            "--listen needs a bearer token in ${var}: set it (e.g. {var}=$(openssl rand -hex \
             32)) and give it to the MCP host as `Authorization: Bearer <token>`"
        )));
    }
    BearerToken::new(value).map_err(|err| CliError::Usage(format!("${var}: {err}")))
}

/// Runs `keel mcp-server`; returns the exit code.
pub(crate) async fn run(options: &Options, args: McpServerArgs) -> Result<u8, CliError> {
    let token = args.listen.map(|_| token(&args)).transpose()?;
    let mut setup = Setup::resolve(options, Mode::Exec, &SessionChoice::New)?;
    for notice in &setup.notices {
        stderr_line(notice);
    }
    let roots = roots(&args, &setup.cwd)?;
    // Calls may work in every root: the roots beyond the working directory are writable.
    for root in &roots {
        if !root.starts_with(&setup.cwd) && !setup.policy.writable_roots.contains(root) {
            setup.policy.writable_roots.push(root.clone());
        }
    }
    let asked = if options.yes {
        Some(ApprovalMode::Allow)
    } else {
        options.approvals.or(setup.config.approvals)
    };
    let coding = setup.agent(HostApprover::new(asked), Hooks::new())?;
    for warning in coding.warnings() {
        stderr_line(&format!("warning: {warning}"));
    }
    let mut tools = coding.agent().tools().subset(&TOOLS);
    if tools.get("code").is_none() {
        return Err(CliError::Usage(
            "keel mcp-server serves the delegation tools: drop --no-delegation".into(),
        ));
    }
    if let Some(launcher) = coding.tasks() {
        tools = tasks_in_roots(tools, launcher.store())
            .map_err(|err| CliError::Run(format!("the task tools: {err}")))?;
    }
    let server = ToolServer::builder(tools, &setup.cwd)
        .roots(roots)
        .read_only(READ_ONLY)
        .confine("code", "cwd")
        .confine("start_task", "workdir")
        .server_info("keel", env!("CARGO_PKG_VERSION"))
        .instructions(INSTRUCTIONS)
        .build()
        .map_err(|err| CliError::Usage(err.to_string()))?;
    let watcher = coding
        .tasks()
        .cloned()
        .map(|launcher| tokio::spawn(watch_tasks(server.clone(), launcher)));
    let served = match (args.listen, token) {
        (Some(addr), Some(token)) => {
            let http = server
                .serve_http(addr, token)
                .await
                .map_err(|err| CliError::Run(err.to_string()))?;
            stderr_line(&format!("MCP server at {}", http.url()));
            if !addr.ip().is_loopback() {
                stderr_line(&format!(
                    "warning: {addr} is not a loopback address: whoever can reach it and has \
                     the token can run keel here"
                ));
            }
            signals::interrupted().await;
            http.shutdown();
            http.wait().await;
            Ok(())
        }
        _ => {
            tokio::select! {
                served = server.serve_stdio() => served,
                _ = signals::interrupted() => Ok(()),
            }
        }
    };
    if let Some(watcher) = watcher {
        watcher.abort();
    }
    served.map_err(|err| CliError::Run(err.to_string()))?;
    Ok(0)
}

/// Tells each connected client when a task it started ends: a logging message naming the
/// task, its status and summary, once.
async fn watch_tasks(server: ToolServer, launcher: TaskLauncher) {
    let mut ticks = 0u32;
    loop {
        tokio::time::sleep(TASK_POLL).await;
        ticks = ticks.wrapping_add(1);
        // A supervisor that died would leave its task running forever.
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
/// tasks working inside the client's allowed roots: a host learns of, waits for and cancels
/// no task of another project.
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
struct InRoots {
    inner: Arc<dyn DynTool>,
    store: Arc<dyn TaskStore>,
}

/// Whether `record` works inside the current client's allowed roots (any, outside a call).
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
