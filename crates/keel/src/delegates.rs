//! What the agent can delegate to: sub-agents, teams and skills found for the project and the
//! user, the runner of its sub-agents, and its background tasks.

use std::path::Path;
use std::sync::Arc;

use keel_agents::{
    AgentDefinitions, CodeTool, Delegation, RunTeamTool, SkillIndex, SpawnAgentTool,
    SubAgentLimits, SubAgentRunner, TeamDefinitions, UseSkillTool,
};
use keel_tool::{RegistryError, ToolRegistry};

#[cfg(feature = "tasks")]
use crate::tasks::TaskLauncher;

/// Sub-agents, teams and skills found for a project, the runner of its sub-agents, and its
/// background tasks.
#[derive(Debug)]
pub struct Delegates {
    runner: Arc<SubAgentRunner>,
    teams: Arc<TeamDefinitions>,
    skills: Arc<SkillIndex>,
    skills_on: bool,
    #[cfg(feature = "tasks")]
    tasks: Option<TaskLauncher>,
}

impl Delegates {
    /// Finds the definitions of the project at `root` and of the user (`keel_home`); sub-agents
    /// get at most `base`, the main agent's own tools. Definitions skipped are added to
    /// `warnings`, each naming its file and the problem.
    pub(crate) fn discover(
        root: &Path,
        keel_home: &Path,
        base: &ToolRegistry,
        delegation: Delegation,
        skills: bool,
        #[cfg(feature = "tasks")] tasks: Option<(TaskLauncher, Vec<String>)>,
        warnings: &mut Vec<String>,
    ) -> Self {
        let home = Some(keel_home);
        let (agents, more) =
            AgentDefinitions::discover(&AgentDefinitions::standard_dirs(root, home));
        warnings.extend(more);
        let (teams, more) = TeamDefinitions::discover(&TeamDefinitions::standard_dirs(root, home));
        warnings.extend(more);
        let skills_on = skills;
        let skills = if skills {
            let (skills, more) = SkillIndex::discover(&SkillIndex::standard_dirs(root, home));
            warnings.extend(more);
            skills
        } else {
            SkillIndex::default()
        };
        let runner = SubAgentRunner::new(
            delegation,
            Arc::new(agents),
            base.clone(),
            SubAgentLimits::default(),
        );
        #[cfg(feature = "tasks")]
        let (runner, tasks) = match tasks {
            Some((launcher, allowed)) => (
                crate::tasks::allow_sub_agents(runner, &launcher, &allowed),
                Some(launcher),
            ),
            None => (runner, None),
        };
        Self {
            runner: Arc::new(runner),
            teams: Arc::new(teams),
            skills: Arc::new(skills),
            skills_on,
            #[cfg(feature = "tasks")]
            tasks,
        }
    }

    /// `tools` with `code`, `spawn_agent`, `run_team`, `use_skill` (with skills on) and the
    /// task tools (with tasks on) added, in that order.
    pub(crate) fn register(
        &self,
        mut tools: ToolRegistry,
        code: CodeTool,
    ) -> Result<ToolRegistry, RegistryError> {
        tools.register(code)?;
        tools.register(SpawnAgentTool::new(self.runner.clone()))?;
        tools.register(RunTeamTool::new(self.runner.clone(), self.teams.clone()))?;
        if self.skills_on {
            tools.register(UseSkillTool::new(self.skills.clone()))?;
        }
        #[cfg(feature = "tasks")]
        if let Some(launcher) = &self.tasks {
            crate::tasks::register_tools(&mut tools, launcher)?;
        }
        Ok(tools)
    }

    /// Runs sub-agents and teams.
    pub fn runner(&self) -> &Arc<SubAgentRunner> {
        &self.runner
    }

    /// The teams.
    pub fn teams(&self) -> &Arc<TeamDefinitions> {
        &self.teams
    }

    /// The skills.
    pub fn skills(&self) -> &Arc<SkillIndex> {
        &self.skills
    }

    /// The background tasks, when they are on.
    #[cfg(feature = "tasks")]
    pub fn tasks(&self) -> Option<&TaskLauncher> {
        self.tasks.as_ref()
    }
}
