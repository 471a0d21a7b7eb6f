//! The task tools for the model: `start_task`, `task_status`, `wait_task`, `cancel_task`,
//! `list_tasks`.

use std::time::Duration;

use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::launch::TaskLauncher;
use crate::notify::notice;
use crate::runner::DEFAULT_RUNNER;
use crate::{NewTask, TaskError, TaskRecord};

/// The longest `wait_task` may block, in seconds.
pub const MAX_WAIT_SECS: u64 = 600;

fn tool_error(err: TaskError) -> ToolError {
    ToolError::failed(err.to_string())
}

/// A task's fields, one per line, for the model and for `keel tasks show`.
pub fn describe(record: &TaskRecord) -> String {
    let mut lines = vec![
        format!("id: {}", record.id),
        format!("status: {}", record.status),
        format!("runner: {}", record.runner),
        format!("workdir: {}", record.workdir.display()),
        format!("task: {}", record.task_prompt),
        format!("started by: {}", record.agent),
        format!("created: {}", record.created_at),
    ];
    let optional = [
        ("started", record.started_at.clone()),
        ("ended", record.completed_at.clone()),
        ("exit code", record.exit_code.map(|c| c.to_string())),
        ("summary", record.result_summary.clone()),
        ("note", record.note.clone()),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            lines.push(format!("{name}: {value}"));
        }
    }
    lines.push(format!("timeout: {} s", record.timeout_secs));
    lines.push(format!("log: {}", record.output_path.display()));
    lines.join("\n")
}

/// `start_task` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StartTaskArgs {
    /// The task, complete: the runner sees only this.
    pub task: String,
    /// The directory to work in (absolute, or relative to yours), inside the workspace;
    /// default: yours.
    pub workdir: Option<String>,
    /// The runner: `keel` (default) or one from the configuration.
    pub runner: Option<String>,
}

/// `start_task`: starts a background task and returns at once. Its `workdir` must lie inside
/// the launcher's roots (see [`TaskLauncher::start`]); anything else is an error result
/// naming them.
#[derive(Debug, Clone)]
pub struct StartTaskTool {
    launcher: TaskLauncher,
    agent: String,
}

impl StartTaskTool {
    /// The tool for agent `agent` (`main`, or a sub-agent's name).
    pub fn new(launcher: TaskLauncher, agent: impl Into<String>) -> Self {
        Self {
            launcher,
            agent: agent.into(),
        }
    }
}

impl Tool for StartTaskTool {
    type Args = StartTaskArgs;
    const NAME: &'static str = "start_task";

    fn description(&self) -> &str {
        "Starts a coding task in the background and returns at once with its id; you are \
         notified in this conversation when it completes, so go on with other work (do not \
         poll or sleep). Use it for long, independent work (minutes). The task runs with a \
         fresh agent that sees only the task text, so make it complete."
    }

    fn effect(&self, _args: &StartTaskArgs) -> Effect {
        Effect::Mutating
    }

    async fn call(&self, args: StartTaskArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.task.trim().is_empty() {
            return Err(ToolError::failed("the task is empty: say what to do"));
        }
        let workdir = match args
            .workdir
            .as_deref()
            .map(str::trim)
            .filter(|w| !w.is_empty())
        {
            Some(dir) => ctx.cwd().join(dir),
            None => ctx.cwd().to_path_buf(),
        };
        let runner = args.runner.unwrap_or_else(|| DEFAULT_RUNNER.to_owned());
        let started = self
            .launcher
            .start(NewTask {
                parent_session: Some(ctx.session_id().to_owned()),
                agent: self.agent.clone(),
                runner: runner.clone(),
                task_prompt: args.task,
                workdir,
                timeout_secs: self.launcher.default_timeout_secs(),
            })
            .map_err(tool_error)?;
        let mut text = format!(
            "Task {} started ({runner}, {}). You will be notified when it completes.",
            started.record.id,
            started.record.workdir.display()
        );
        if let Some(warning) = started.warning {
            text.push('\n');
            text.push_str(&warning);
        }
        Ok(ToolOutput::text(text))
    }
}

/// `task_status`, `wait_task` and `cancel_task` arguments: a task id.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskIdArgs {
    /// The task's id, as `start_task` returned it.
    pub id: String,
}

/// `task_status`: a task's state now.
#[derive(Debug, Clone)]
pub struct TaskStatusTool {
    launcher: TaskLauncher,
}

impl Tool for TaskStatusTool {
    type Args = TaskIdArgs;
    const NAME: &'static str = "task_status";

    fn description(&self) -> &str {
        "Shows a background task's state: status, runner, directory, times, exit code, summary \
         and log path."
    }

    fn effect(&self, _args: &TaskIdArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(&self, args: TaskIdArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let record = self
            .launcher
            .store()
            .get(args.id.trim())
            .map_err(tool_error)?
            .ok_or_else(|| {
                tool_error(TaskError::NotFound {
                    id: args.id.clone(),
                })
            })?;
        Ok(ToolOutput::text(describe(&record)))
    }
}

/// `wait_task` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WaitTaskArgs {
    /// The task's id.
    pub id: String,
    /// The longest to wait, in seconds (default and most: 600).
    pub timeout_secs: Option<u64>,
}

/// `wait_task`: blocks until a task ends or the timeout passes.
#[derive(Debug, Clone)]
pub struct WaitTaskTool {
    launcher: TaskLauncher,
}

impl Tool for WaitTaskTool {
    type Args = WaitTaskArgs;
    const NAME: &'static str = "wait_task";

    fn description(&self) -> &str {
        "Waits for a background task to end (up to timeout_secs, at most 600) and returns how \
         it ended. Use it only when you have nothing else to do until the task is done."
    }

    fn effect(&self, _args: &WaitTaskArgs) -> Effect {
        Effect::ReadOnly
    }

    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(MAX_WAIT_SECS + 30))
    }

    async fn call(&self, args: WaitTaskArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let secs = args
            .timeout_secs
            .unwrap_or(MAX_WAIT_SECS)
            .min(MAX_WAIT_SECS);
        let record = self
            .launcher
            .wait(args.id.trim(), Duration::from_secs(secs))
            .await
            .map_err(tool_error)?;
        if record.status.is_terminal() {
            Ok(ToolOutput::text(notice(&record)))
        } else {
            Ok(ToolOutput::text(format!(
                "Task {} is still {} after {secs} s; you will be notified when it ends.",
                record.id, record.status
            )))
        }
    }
}

/// `cancel_task`: stops a task (its process group is killed).
#[derive(Debug, Clone)]
pub struct CancelTaskTool {
    launcher: TaskLauncher,
}

impl Tool for CancelTaskTool {
    type Args = TaskIdArgs;
    const NAME: &'static str = "cancel_task";

    fn description(&self) -> &str {
        "Cancels a background task: its processes are killed and it is marked cancelled."
    }

    fn effect(&self, _args: &TaskIdArgs) -> Effect {
        Effect::Mutating
    }

    async fn call(&self, args: TaskIdArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let record = self.launcher.cancel(args.id.trim()).map_err(tool_error)?;
        Ok(ToolOutput::text(format!("Task {} cancelled.", record.id)))
    }
}

/// `list_tasks` arguments (none).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListTasksArgs {}

/// `list_tasks`: the recent tasks.
#[derive(Debug, Clone)]
pub struct ListTasksTool {
    launcher: TaskLauncher,
}

impl Tool for ListTasksTool {
    type Args = ListTasksArgs;
    const NAME: &'static str = "list_tasks";

    fn description(&self) -> &str {
        "Lists the 20 most recent background tasks: id, status, runner, first line of the task."
    }

    fn effect(&self, _args: &ListTasksArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(
        &self,
        _args: ListTasksArgs,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let records = self.launcher.store().list(20).map_err(tool_error)?;
        if records.is_empty() {
            return Ok(ToolOutput::text("No tasks yet."));
        }
        let lines: Vec<String> = records
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {}",
                    r.id,
                    r.status,
                    r.runner,
                    r.task_prompt.lines().next().unwrap_or_default()
                )
            })
            .collect();
        Ok(ToolOutput::text(lines.join("\n")))
    }
}

/// The five task tools for agent `agent` (`main` or a sub-agent's name).
pub fn task_tools(
    launcher: &TaskLauncher,
    agent: &str,
) -> Result<ToolRegistry, keel_tool::RegistryError> {
    ToolRegistry::new()
        .with(StartTaskTool::new(launcher.clone(), agent))?
        .with(TaskStatusTool {
            launcher: launcher.clone(),
        })?
        .with(WaitTaskTool {
            launcher: launcher.clone(),
        })?
        .with(CancelTaskTool {
            launcher: launcher.clone(),
        })?
        .with(ListTasksTool {
            launcher: launcher.clone(),
        })
}
