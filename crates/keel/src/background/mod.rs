//! Background tasks: how a host runs them ([`BackgroundTasks`]) and the launcher the agent
//! gets, whose every task takes the agent's policies
//! ([`TaskSettings::from_policies`](keel_tasks::TaskSettings::from_policies)).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_agents::SubAgentRunner;
use keel_tasks::SubAgentTasks;
use keel_tasks::{
    Runners, Spawner, SqliteTaskStore, TaskLimits, TaskSettings, TaskStore, task_tools,
};
use keel_tool::{RegistryError, ToolRegistry};

mod opening;

pub(crate) use opening::OpeningTaskStore;

pub use keel_tasks::{TaskLauncher, TaskNotifier};

/// How background tasks run: `start_task` returns at once; the task runs in its own process
/// group, recorded in `$KEEL_HOME/tasks.db`, and the session that started it is told when it
/// ends. Every task takes the agent's policies (see [`Policies`](crate::Policies)).
#[derive(Debug, Clone)]
pub struct BackgroundTasks {
    keel_exe: PathBuf,
    spawner: Spawner,
    runners: Vec<(String, Vec<String>)>,
    limits: TaskLimits,
    allowed_agents: Vec<String>,
}

impl BackgroundTasks {
    /// Tasks run by the `keel` binary at `keel_exe` (the `keel` runner: `keel exec`),
    /// supervised by a tokio task in this process: they end with the host.
    pub fn in_process(keel_exe: impl Into<PathBuf>) -> Self {
        Self {
            keel_exe: keel_exe.into(),
            spawner: Spawner::InProcess,
            runners: Vec::new(),
            limits: TaskLimits::default(),
            allowed_agents: Vec::new(),
        }
    }

    /// Tasks run by the `keel` binary at `keel_exe`, each supervised by a detached
    /// `keel_exe task-run <id>` that survives this process (what the `keel` CLI does).
    pub fn detached(keel_exe: impl Into<PathBuf>) -> Self {
        let keel_exe = keel_exe.into();
        Self {
            spawner: Spawner::Detached {
                program: keel_exe.clone(),
                args: vec!["task-run".into()],
            },
            ..Self::in_process(keel_exe)
        }
    }

    /// Adds runner `name`: an argument template holding `{task}` (and optionally `{workdir}`).
    #[must_use]
    pub fn runner(mut self, name: impl Into<String>, command: Vec<String>) -> Self {
        self.runners.push((name.into(), command));
        self
    }

    /// How many tasks may run at once and a task's default timeout.
    #[must_use]
    pub fn limits(mut self, max_running: Option<usize>, timeout: Option<Duration>) -> Self {
        let defaults = TaskLimits::default();
        self.limits = TaskLimits {
            max_running: max_running.unwrap_or(defaults.max_running),
            timeout_secs: timeout.map_or(defaults.timeout_secs, |t| t.as_secs().max(1)),
            ..defaults
        };
        self
    }

    /// The sub-agents that may start tasks themselves (default none).
    #[must_use]
    pub fn allowed_agents(mut self, names: Vec<String>) -> Self {
        self.allowed_agents = names;
        self
    }

    /// The sub-agents that may start tasks.
    pub(crate) fn allowed(&self) -> &[String] {
        &self.allowed_agents
    }

    /// The launcher: `store` (the one in `keel_home`, from [`open_task_store`]), these runners,
    /// `settings` for every task.
    pub(crate) fn launcher(
        &self,
        keel_home: &Path,
        store: Arc<dyn TaskStore>,
        settings: TaskSettings,
    ) -> Result<TaskLauncher, String> {
        let home = crate::home::Home(keel_home);
        let mut runners = Runners::new(&self.keel_exe);
        for (name, command) in &self.runners {
            runners = runners
                .with(name, command.clone())
                .map_err(|err| err.to_string())?;
        }
        let launcher = TaskLauncher::new(
            store,
            runners,
            home.task_logs(),
            self.spawner.clone(),
            settings,
        )
        .limits(self.limits);
        Ok(launcher)
    }
}

/// The task store under `keel_home` (its `tasks.db`), with the tasks whose supervisor died
/// (keel killed, the machine restarted) marked interrupted, so their sessions are told and
/// listings show the truth. A failed recovery is logged; only a store that cannot be opened
/// is an error.
pub fn open_task_store(keel_home: &Path) -> Result<Arc<dyn TaskStore>, keel_tasks::TaskError> {
    let store = SqliteTaskStore::open(&crate::home::Home(keel_home).tasks_db())?;
    match keel_tasks::recover(&store) {
        Ok(marked) => {
            for record in marked {
                tracing::info!(task = %record.id, "marked interrupted");
            }
        }
        Err(err) => tracing::warn!("task recovery: {err}"),
    }
    Ok(Arc::new(store))
}

/// `runner` with the sub-agents named in `allowed` able to start tasks.
pub(crate) fn allow_sub_agents(
    runner: SubAgentRunner,
    launcher: &TaskLauncher,
    allowed: &[String],
) -> SubAgentRunner {
    runner.with_tasks(launcher.clone(), allowed.to_vec())
}

/// Adds the main agent's task tools to `tools`.
pub(crate) fn register_tools(
    tools: &mut ToolRegistry,
    launcher: &TaskLauncher,
) -> Result<(), RegistryError> {
    let task_tools = task_tools(launcher, "main")?;
    for name in task_tools.names() {
        if let Some(tool) = task_tools.get(name) {
            tools.register_dyn(tool)?;
        }
    }
    Ok(())
}
