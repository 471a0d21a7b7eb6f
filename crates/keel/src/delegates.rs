//! What the agent can delegate to: sub-agents, teams and skills found for the project and the
//! user, the runner of its sub-agents, and its background tasks (sub-agents, teams and tasks
//! with the `delegation` feature; skills always).

use std::path::Path;
use std::sync::Arc;

#[cfg(feature = "delegation")]
use keel_agents::{
    AgentDefinitions, CodeTool, Delegation, RunTeamTool, SpawnAgentTool, SubAgentLimits,
    SubAgentRunner, TeamDefinitions,
};
use keel_agents::{SkillGrants, SkillIndex, UseSkillTool};
use keel_tool::{RegistryError, ToolRegistry};

#[cfg(feature = "tasks")]
use crate::background::TaskLauncher;

/// Sub-agents, teams and skills found for a project, the runner of its sub-agents, and its
/// background tasks.
#[derive(Debug)]
pub struct Delegates {
    #[cfg(feature = "delegation")]
    runner: Arc<SubAgentRunner>,
    #[cfg(feature = "delegation")]
    teams: Arc<TeamDefinitions>,
    skills: Arc<SkillIndex>,
    skills_on: bool,
    grants: Arc<SkillGrants>,
    #[cfg(feature = "tasks")]
    tasks: Option<TaskLauncher>,
}

impl Delegates {
    /// Finds the definitions of the project at `root` and of the user (`keel_home`); sub-agents
    /// get at most `base`, the main agent's own tools; `use_skill` records the skills' grants
    /// in `grants`. Definitions skipped, and skills' `allowed-tools` not honoured, are added
    /// to `warnings`, each naming its file or skill and the problem.
    // Each argument is one of the builder's settings, several only with some features.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn discover(
        root: &Path,
        keel_home: &Path,
        claude_home: Option<&Path>,
        #[cfg(feature = "delegation")] base: &ToolRegistry,
        #[cfg(feature = "delegation")] delegation: Delegation,
        skills: bool,
        grants: Arc<SkillGrants>,
        #[cfg(feature = "tasks")] tasks: Option<(TaskLauncher, Vec<String>)>,
        #[cfg(feature = "delegation")] extra_agents: Vec<keel_agents::AgentDefinition>,
        warnings: &mut Vec<String>,
    ) -> Self {
        let home = Some(keel_home);
        #[cfg(feature = "delegation")]
        let (agents, more) = AgentDefinitions::discover(
            &AgentDefinitions::standard_dirs_with_claude(root, home, claude_home),
        );
        #[cfg(feature = "delegation")]
        let agents = agents.with(extra_agents);
        #[cfg(feature = "delegation")]
        warnings.extend(more);
        #[cfg(feature = "delegation")]
        let (teams, more) = TeamDefinitions::discover(&TeamDefinitions::standard_dirs(root, home));
        #[cfg(feature = "delegation")]
        warnings.extend(more);
        let skills_on = skills;
        let skills = if skills {
            let (skills, more) = SkillIndex::discover(&SkillIndex::standard_dirs_with_claude(
                root,
                home,
                claude_home,
            ));
            warnings.extend(more);
            warnings.extend(grants.check(&skills));
            skills
        } else {
            SkillIndex::default()
        };
        let skills = Arc::new(skills);
        #[cfg(feature = "delegation")]
        let runner = SubAgentRunner::new(
            delegation,
            Arc::new(agents),
            base.clone(),
            SubAgentLimits::default(),
        )
        .with_skills(skills.clone());
        #[cfg(feature = "tasks")]
        let (runner, tasks) = match tasks {
            Some((launcher, allowed)) => (
                crate::background::allow_sub_agents(runner, &launcher, &allowed),
                Some(launcher),
            ),
            None => (runner, None),
        };
        Self {
            #[cfg(feature = "delegation")]
            runner: Arc::new(runner),
            #[cfg(feature = "delegation")]
            teams: Arc::new(teams),
            skills,
            skills_on,
            grants,
            #[cfg(feature = "tasks")]
            tasks,
        }
    }

    /// `tools` with `code`, `spawn_agent`, `run_team`, `use_skill` (with skills on) and the
    /// task tools (with tasks on) added, in that order.
    pub(crate) fn register(
        &self,
        mut tools: ToolRegistry,
        #[cfg(feature = "delegation")] code: CodeTool,
    ) -> Result<ToolRegistry, RegistryError> {
        #[cfg(feature = "delegation")]
        {
            tools.register(code)?;
            tools.register(SpawnAgentTool::new(self.runner.clone()))?;
            tools.register(RunTeamTool::new(self.runner.clone(), self.teams.clone()))?;
        }
        if self.skills_on {
            tools.register(
                UseSkillTool::new(self.skills.clone()).with_grants(self.grants.clone()),
            )?;
        }
        #[cfg(feature = "tasks")]
        if let Some(launcher) = &self.tasks {
            crate::background::register_tools(&mut tools, launcher)?;
        }
        Ok(tools)
    }

    /// Runs sub-agents and teams.
    #[cfg(feature = "delegation")]
    pub fn runner(&self) -> &Arc<SubAgentRunner> {
        &self.runner
    }

    /// The teams.
    #[cfg(feature = "delegation")]
    pub fn teams(&self) -> &Arc<TeamDefinitions> {
        &self.teams
    }

    /// The skills.
    pub fn skills(&self) -> &Arc<SkillIndex> {
        &self.skills
    }

    /// The rules each session was granted by the skills it used (their `allowed-tools`).
    pub fn skill_grants(&self) -> &Arc<SkillGrants> {
        &self.grants
    }

    /// The background tasks, when they are on.
    #[cfg(feature = "tasks")]
    pub fn tasks(&self) -> Option<&TaskLauncher> {
        self.tasks.as_ref()
    }
}
