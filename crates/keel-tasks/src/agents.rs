//! Background tasks for sub-agents: the task tools handed, through keel-agents'
//! [`ExtraTools`] seam, to the sub-agents allowed to start tasks.

use std::sync::Arc;

use keel_agents::{ExtraTools, SubAgentRunner};

use crate::launch::TaskLauncher;
use crate::tools::task_tools;

/// The task tools ([`task_tools`]) for the sub-agents named in `allowed`, started with
/// `launcher`, and none for the others: give it to
/// [`SubAgentRunner::with_extra_tools`](keel_agents::SubAgentRunner::with_extra_tools).
///
/// ```
/// # use std::sync::Arc;
/// # use keel_agents::{AgentDefinition, AgentDefinitions, Delegation, Models, Policies,
/// #     SubAgentLimits, SubAgentRunner};
/// # use keel_sandbox::SandboxPolicy;
/// # use keel_tasks::{Runners, Spawner, SqliteTaskStore, TaskLauncher, TaskSettings};
/// # let dir = tempfile::tempdir()?;
/// # let store = Arc::new(SqliteTaskStore::open(&dir.path().join("tasks.db"))?);
/// # let launcher = TaskLauncher::new(store, Runners::new("keel".as_ref()), dir.path(),
/// #     Spawner::InProcess, TaskSettings::new(dir.path(), SandboxPolicy::default()));
/// # let model = Arc::new(keel_test_support::scripted::ScriptedProvider::new());
/// let worker = AgentDefinition {
///     name: "worker".into(),
///     description: "Does long jobs".into(),
///     system_prompt: "You work.".into(),
///     path: "worker.md".into(),
///     ..AgentDefinition::default()
/// };
/// let definitions = Arc::new(AgentDefinitions::from_definitions(vec![worker]));
/// let runner = SubAgentRunner::new(
///     Delegation::new(model, Models::new("m", "m"), Policies::new(SandboxPolicy::default())),
///     definitions.clone(),
///     keel_tool::ToolRegistry::new(),
///     SubAgentLimits::default(),
/// )
/// .with_extra_tools(keel_tasks::task_tools_for(launcher, vec!["worker".into()]));
/// let tools = runner.tools_for(definitions.get("worker").unwrap())?;
/// assert!(tools.get("start_task").is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn task_tools_for(launcher: TaskLauncher, allowed: Vec<String>) -> ExtraTools {
    let allowed: Arc<[String]> = allowed.into();
    Arc::new(move |agent: &str| {
        if allowed.iter().any(|name| name == agent) {
            task_tools(&launcher, agent).map(Some)
        } else {
            Ok(None)
        }
    })
}

/// `runner.with_tasks(launcher, allowed)`: [`task_tools_for`] as a method of
/// [`SubAgentRunner`], as it was when tasks lived in keel-agents.
pub trait SubAgentTasks {
    /// Lets the sub-agents named in `allowed` start background tasks with `launcher` (by
    /// default none may: only the main agent).
    #[must_use]
    fn with_tasks(self, launcher: TaskLauncher, allowed: Vec<String>) -> Self;
}

impl SubAgentTasks for SubAgentRunner {
    fn with_tasks(self, launcher: TaskLauncher, allowed: Vec<String>) -> Self {
        self.with_extra_tools(task_tools_for(launcher, allowed))
    }
}
