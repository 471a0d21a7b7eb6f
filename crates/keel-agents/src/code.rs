//! The stateless `code` tool: "do this coding task in that directory". Each call runs a fresh
//! agent with the default tools in a fresh session, writes a log of what happened and returns
//! the final text. Nothing survives between calls.
//!
//! ```no_run
//! use std::sync::Arc;
//! use keel_agents::{CodeTool, Delegation, Models, Policies};
//! use keel_sandbox::SandboxPolicy;
//! use keel_tool::ToolRegistry;
//! # fn provider() -> Arc<dyn keel_provider::Provider> { unimplemented!() }
//!
//! // The parent's policies: its sessions take them whole.
//! let policies = Policies::new(SandboxPolicy::default());
//! let models = Models::new("claude-sonnet-4-5", "claude-haiku-4-5");
//! let delegation = Delegation::new(provider(), models, policies);
//! // Sessions may work in /work/app and below it, nowhere else.
//! let tools = ToolRegistry::new().with(CodeTool::new(delegation, "/work/app", "/tmp/keel-logs"))?;
//! assert_eq!(tools.names(), ["code"]);
//! # Ok::<(), keel_tool::RegistryError>(())
//! ```

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_engine::{MemorySources, Session, system_prompt};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use tracing::Instrument;

use crate::delegation::Delegation;
use crate::error::AgentsError;
use crate::project::{project_context_from, project_root};
use crate::roots;
use crate::run::{CallRecord, RunReport, run_reporting};

/// The default most model calls of one `code` session.
const DEFAULT_MAX_ITERATIONS: u32 = 25;
/// The default longest a `code` call may take.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The most characters of a tool call's input shown in the log.
const INPUT_CHARS: usize = 100;

const DESCRIPTION: &str = "\
Delegates a self-contained coding task to a fresh coding agent working in `cwd`, with tools to \
read, search, edit and write files, run commands and use git. It starts with no memory of \
this conversation and keeps none afterwards: put everything it needs in `task` (the goal, the \
files involved, constraints, how to verify the result). Returns its final report and the path \
of a log of the session. Use model `small` for simple, mechanical tasks and `default` \
otherwise.";

/// Which model a `code` session uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CodeModel {
    /// The configured model: for most tasks.
    Default,
    /// A cheaper, faster model: for simple, mechanical tasks.
    Small,
}

impl CodeModel {
    /// The tier name [`Models::resolve`](crate::Models::resolve) understands.
    pub fn tier(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Small => "small",
        }
    }
}

/// The arguments of a `code` call.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CodeArgs {
    /// The task, complete in itself: the agent knows nothing else of this conversation.
    pub task: String,
    /// The directory to work in: an absolute path to an existing directory inside the
    /// workspace.
    pub cwd: PathBuf,
    /// `default` for most tasks; `small` for simple, mechanical ones.
    pub model: CodeModel,
}

/// The `code` tool: runs a coding task in a directory with a fresh agent and returns its final
/// text and the path of a log of the session.
///
/// Stateless: each call builds its own agent (the [`Delegation`]'s provider and the parent's
/// [`Policies`](crate::Policies): approver, permission rules, hooks, and the default tools
/// confined to `cwd` under the parent's sandbox policy and allow-read paths;
/// the system prompt with the project's context) and its own session, which is dropped when
/// the call ends, whether it succeeded, failed or was cancelled.
///
/// `cwd` must lie inside the tool's roots: the workspace given to [`CodeTool::new`] and the
/// policy's `writable_roots`, all resolved, and `cwd` resolved too (symlinks followed, `..`
/// removed), so no path leads out. Anything else is an error result naming the roots, and no
/// session starts. The log goes to `<logs_dir>/code-<timestamp>.md`, the
/// timestamp in UTC with milliseconds and `-` between hours, minutes and seconds
/// (`code-2026-11-23T02-14-07.123Z.md`); an existing file is never overwritten.
///
/// A run that fails (a provider error, a refusal, the step cap, a cancellation) comes back as
/// an error result, with the reason and the log's path. Each tool call the session makes is
/// reported as it ends, as a progress line of the call ([`ToolContext::progress`]), as the
/// log shows it (`patch_file {"path":"src/lib.rs",…} — ok, 3 ms`).
#[derive(Debug, Clone)]
pub struct CodeTool {
    delegation: Delegation,
    workspace: PathBuf,
    logs_dir: PathBuf,
    max_iterations: u32,
    timeout: Duration,
    user_memory: Vec<PathBuf>,
    user_home: Option<PathBuf>,
}

impl CodeTool {
    /// A `code` tool delegating through `delegation`, working only inside `workspace` (the
    /// parent session's working directory) and the policy's writable roots, writing its logs
    /// under `logs_dir` (created when the first log is written).
    pub fn new(
        delegation: Delegation,
        workspace: impl Into<PathBuf>,
        logs_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            delegation,
            workspace: workspace.into(),
            logs_dir: logs_dir.into(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            timeout: DEFAULT_TIMEOUT,
            user_memory: Vec::new(),
            user_home: None,
        }
    }

    /// The user-level memory files the sessions' prompts load first
    /// ([`MemorySources::user_files`]) and the home directory their `@~/` imports mean
    /// (default none: only the project's memory files).
    pub fn user_memory(mut self, files: Vec<PathBuf>, home: Option<PathBuf>) -> Self {
        self.user_memory = files;
        self.user_home = home;
        self
    }

    /// The most model calls in one session (default 25).
    pub fn max_iterations(mut self, limit: u32) -> Self {
        self.max_iterations = limit;
        self
    }

    /// The longest one call may take, session included (default 30 minutes); after that the
    /// session is stopped and the call fails.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Where the logs go.
    pub fn logs_dir(&self) -> &Path {
        &self.logs_dir
    }

    /// The workspace the sessions work in.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The directories `cwd` may lie in: the workspace and the parent's writable roots,
    /// resolved.
    pub fn roots(&self) -> Vec<PathBuf> {
        roots::resolve(&self.workspace, &self.policy().writable_roots)
    }

    /// The sandbox policy of the sessions' tools: the parent's (under
    /// [`keel_sandbox::SandboxMode::ReadOnly`] the sessions get no tools that write).
    fn policy(&self) -> &SandboxPolicy {
        self.delegation.policies().sandbox()
    }

    /// A fresh session for `model` in `cwd`.
    fn start(&self, cwd: &Path, model: &str) -> Result<Session, AgentsError> {
        let root = project_root(cwd);
        let mut sandbox = PathSandbox::new(cwd)?;
        for path in self.delegation.policies().allow_read() {
            sandbox = sandbox.allow_read(path)?;
        }
        let tools = default_tools(&sandbox, self.policy())?;
        let agent = self
            .delegation
            .agent_builder(model)
            .tools(tools)
            .system_prompt(system_prompt(&project_context_from(&MemorySources {
                user_files: self.user_memory.clone(),
                user_home: self.user_home.clone(),
                extra_readable: self.delegation.policies().allow_read().to_vec(),
                ..MemorySources::new(root, cwd)
            })))
            .max_iterations(self.max_iterations)
            .build()?;
        let mut session = agent.session(cwd)?;
        // A delegated run: its stops fire SubagentStop hooks, not Stop.
        session.set_subagent("code");
        Ok(session)
    }

    async fn run(
        &self,
        mut args: CodeArgs,
        model: String,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        args.cwd = self.check_directory(&args.cwd)?;
        if args.task.trim().is_empty() {
            return Err(ToolError::InvalidArguments(
                "task is empty: say what to do".into(),
            ));
        }
        let header = Header::new(&args, model);
        // Writes a log if this call is dropped before it ends (cancelled, timed out).
        let mut guard = DropGuard {
            header: Some(header),
            logs_dir: &self.logs_dir,
        };
        let ended = match self.start(&args.cwd, guard.model()) {
            Err(err) => Ended::NotStarted(format!("the code session could not start: {err}")),
            Ok(mut session) => {
                // Each tool call of the session is a progress line for the caller's host.
                let report = run_reporting(&mut session, &args.task, ctx.cancel(), |call| {
                    ctx.progress(call_line(call).trim_start_matches("- "));
                })
                .await;
                // The session ends here, whatever happened: nothing of it is kept.
                drop(session);
                Ended::Ran(report)
            }
        };
        let Some(header) = guard.header.take() else {
            return Err(ToolError::failed("the code call lost its own record"));
        };
        let log = write_log(&self.logs_dir, &header, &ended);
        let log_line = match &log {
            Ok(path) => format!("Log: {}", path.display()),
            Err(err) => format!("Log: not written ({err})"),
        };
        match &log {
            Ok(path) => {
                tracing::info!(outcome = ended.name(), log = %path.display(), "code session ended")
            }
            Err(err) => tracing::warn!(
                outcome = ended.name(),
                "code session ended; log not written: {err}"
            ),
        }
        match ended {
            Ended::Ran(report) if report.error.is_none() => {
                Ok(ToolOutput::text(format!("{}\n\n{log_line}", report.output))
                    .with_delegated(report.cost_by_provider))
            }
            Ended::Ran(report) => {
                let delegated = report.cost_by_provider;
                let reason = report.error.unwrap_or_default();
                let mut text = format!("The code session did not complete: {reason}");
                let output = report.output.trim();
                if !output.is_empty() && output != reason.trim() {
                    let _ = write!(text, "\n\nIts last output:\n{output}");
                }
                // A failed run's calls were made and paid for all the same.
                Ok(ToolOutput::error(format!("{text}\n\n{log_line}")).with_delegated(delegated))
            }
            Ended::NotStarted(reason) => Err(ToolError::failed(format!("{reason}\n\n{log_line}"))),
            Ended::Dropped => Err(ToolError::failed(format!(
                "the code session was stopped\n\n{log_line}"
            ))),
        }
    }
}

impl Tool for CodeTool {
    type Args = CodeArgs;
    const NAME: &'static str = "code";

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn effect(&self, _args: &CodeArgs) -> Effect {
        Effect::Mutating
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn call(&self, args: CodeArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let model = self.delegation.models().resolve(args.model.tier());
        let span = tracing::info_span!("code", cwd = %args.cwd.display(), model = %model);
        self.run(args, model, ctx).instrument(span).await
    }
}

impl CodeTool {
    /// `cwd` resolved, if it is an absolute path to a directory inside the roots.
    fn check_directory(&self, cwd: &Path) -> Result<PathBuf, ToolError> {
        if !cwd.is_absolute() {
            return Err(ToolError::failed(format!(
                "directory not found: {} (cwd must be an absolute path)",
                cwd.display()
            )));
        }
        roots::check("cwd", cwd, &self.roots()).map_err(ToolError::failed)
    }
}

/// How a call ended.
enum Ended {
    /// The session ran, well or not.
    Ran(RunReport),
    /// The session could not be made; why.
    NotStarted(String),
    /// The call was dropped before the session ended.
    Dropped,
}

impl Ended {
    fn name(&self) -> &'static str {
        match self {
            Self::Ran(report) => report.stop.name(),
            Self::NotStarted(_) => "not started",
            Self::Dropped => "stopped",
        }
    }
}

/// What the log says before the result.
struct Header {
    /// When the call started, UTC.
    started: jiff::Timestamp,
    cwd: PathBuf,
    model: String,
    task: String,
}

impl Header {
    fn new(args: &CodeArgs, model: String) -> Self {
        Self {
            started: jiff::Timestamp::now(),
            cwd: args.cwd.clone(),
            model,
            task: args.task.clone(),
        }
    }
}

/// Writes the log of a call dropped mid-session (cancelled or timed out), when dropped armed.
struct DropGuard<'a> {
    header: Option<Header>,
    logs_dir: &'a Path,
}

impl DropGuard<'_> {
    fn model(&self) -> &str {
        self.header
            .as_ref()
            .map_or("", |header| header.model.as_str())
    }
}

impl Drop for DropGuard<'_> {
    fn drop(&mut self) {
        if let Some(header) = self.header.take() {
            match write_log(self.logs_dir, &header, &Ended::Dropped) {
                Ok(path) => tracing::info!(log = %path.display(), "code call stopped mid-session"),
                Err(err) => tracing::warn!("code call stopped mid-session; log not written: {err}"),
            }
        }
    }
}

/// Writes the log of a call under `dir`, never over an existing file; returns its path or
/// why it could not be written.
fn write_log(dir: &Path, header: &Header, ended: &Ended) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let stem = format!("code-{}", file_stamp(header.started));
    let text = render_log(header, ended);
    for n in 1..=1000_u32 {
        let name = if n == 1 {
            format!("{stem}.md")
        } else {
            format!("{stem}-{n}.md")
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                return file
                    .write_all(text.as_bytes())
                    .and_then(|()| file.flush())
                    .map(|()| path.clone())
                    .map_err(|err| format!("cannot write {}: {err}", path.display()));
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(format!("cannot create {}: {err}", path.display())),
        }
    }
    Err(format!(
        "cannot create {}: too many logs with this timestamp",
        dir.join(format!("{stem}.md")).display()
    ))
}

/// `2026-11-23T02:14:07.123Z`.
fn iso_stamp(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// `2026-11-23T02-14-07.123Z`: the ISO form with `-` for `:`, a file name on every system.
fn file_stamp(at: jiff::Timestamp) -> String {
    iso_stamp(at).replace(':', "-")
}

/// The log's Markdown.
fn render_log(header: &Header, ended: &Ended) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Code Session {}\n", iso_stamp(header.started));
    let _ = writeln!(out, "- cwd: {}", header.cwd.display());
    let _ = writeln!(out, "- model: {}", header.model);
    let _ = writeln!(out, "- task: {}", header.task.trim().replace('\n', "\n  "));
    let _ = writeln!(out, "- outcome: {}", ended.name());
    let (output, error) = match ended {
        Ended::Ran(report) => (Some(report.output.trim()), report.error.as_deref()),
        Ended::NotStarted(reason) => (None, Some(reason.as_str())),
        Ended::Dropped => (
            None,
            Some(
                "the call was stopped (cancelled or timed out) before the session ended; its \
                 tool calls and usage are not known",
            ),
        ),
    };
    out.push_str("\n## Result\n\n");
    match output {
        Some(text) if !text.is_empty() && Some(text) != error.map(str::trim) => {
            out.push_str(text);
            out.push('\n');
        }
        _ => out.push_str("(no final answer)\n"),
    }
    if let Some(error) = error {
        let _ = writeln!(out, "\n## Error\n\n{}", error.trim());
    }
    out.push_str("\n## Tool calls\n\n");
    match ended {
        Ended::Ran(report) if !report.calls.is_empty() => {
            for call in &report.calls {
                let _ = writeln!(out, "{}", call_line(call));
            }
        }
        Ended::Ran(_) => out.push_str("none\n"),
        _ => out.push_str("unknown\n"),
    }
    out.push_str("\n## Usage\n\n");
    match ended {
        Ended::Ran(report) => {
            let usage = &report.usage;
            let cost = report
                .cost_usd
                .map_or_else(|| "unknown".to_owned(), |cost| format!("${cost:.4}"));
            let _ = writeln!(out, "- model calls: {}", report.steps);
            let _ = writeln!(out, "- input tokens: {}", usage.input_tokens);
            let _ = writeln!(out, "- output tokens: {}", usage.output_tokens);
            let _ = writeln!(
                out,
                "- cache read tokens: {}",
                usage.cache_read_input_tokens
            );
            let _ = writeln!(
                out,
                "- cache write tokens: {}",
                usage.cache_creation_input_tokens
            );
            let _ = writeln!(out, "- cost: {cost}");
        }
        _ => out.push_str("unknown\n"),
    }
    out
}

/// `- read_file {"path":"src/lib.rs"} — ok, 3 ms`.
fn call_line(call: &CallRecord) -> String {
    let input = call.input.to_string();
    let short = match input.char_indices().nth(INPUT_CHARS) {
        Some((end, _)) => format!("{}…", &input[..end]),
        None => input,
    };
    format!(
        "- {} {short} — {}, {}",
        call.name,
        if call.is_error { "error" } else { "ok" },
        show_duration(call.duration)
    )
}

/// `3 ms`, `2.5 s`.
fn show_duration(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_iso_utc_with_milliseconds() {
        let at: jiff::Timestamp = "2026-11-23T02:14:07.123456Z".parse().unwrap();
        assert_eq!(iso_stamp(at), "2026-11-23T02:14:07.123Z");
        assert_eq!(file_stamp(at), "2026-11-23T02-14-07.123Z");
        let whole: jiff::Timestamp = "2026-11-23T02:14:07Z".parse().unwrap();
        assert_eq!(iso_stamp(whole), "2026-11-23T02:14:07.000Z");
    }

    #[test]
    fn logs_are_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("nested/logs");
        let header = Header {
            started: "2026-11-23T02:14:07.123Z".parse().unwrap(),
            cwd: "/work/app".into(),
            model: "claude-haiku-4-5".into(),
            task: "first line\nsecond line".into(),
        };
        let first = write_log(&logs, &header, &Ended::Dropped).unwrap();
        let second = write_log(&logs, &header, &Ended::Dropped).unwrap();
        assert_eq!(first, logs.join("code-2026-11-23T02-14-07.123Z.md"));
        assert_eq!(second, logs.join("code-2026-11-23T02-14-07.123Z-2.md"));
        let text = std::fs::read_to_string(&first).unwrap();
        assert!(
            text.starts_with("# Code Session 2026-11-23T02:14:07.123Z\n"),
            "{text}"
        );
        assert!(
            text.contains("- task: first line\n  second line\n"),
            "{text}"
        );
        assert!(text.contains("## Error\n\nthe call was stopped"), "{text}");
    }

    #[test]
    fn long_inputs_are_shortened() {
        let call = CallRecord {
            name: "write_file".into(),
            input: serde_json::json!({"path": "a.txt", "content": "x".repeat(500)}),
            is_error: true,
            duration: Duration::from_millis(2500),
        };
        let line = call_line(&call);
        assert!(
            line.starts_with("- write_file {\"path\":\"a.txt\",\"content\":\"xxx"),
            "{line}"
        );
        assert!(line.ends_with("xxx… — error, 2.5 s"), "{line}");
    }
}
