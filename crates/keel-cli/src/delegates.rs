//! What the agent can delegate to (sub-agents, teams, skills, the `code` tool), and the
//! `keel agents|agent|teams|team|skills` commands.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use keel_agents::tasks::{TaskLauncher, task_tools};
use keel_agents::{
    AgentDefinitions, CodeTool, Delegation, RunReport, RunTeamTool, SkillIndex, SpawnAgentTool,
    SubAgentLimits, SubAgentRunner, TeamDefinitions, UseSkillTool,
};
use keel_engine::Hooks;
use keel_tool::{RegistryError, ToolRegistry};
use tokio_util::sync::CancellationToken;

use crate::approve::ModeApprover;
use crate::cli::{Command, Options};
use crate::render::describe_call;
use crate::setup::{CliError, Mode, SessionChoice, Setup};

/// Sub-agents, teams and skills found for a project, and the runner of its sub-agents.
pub struct Delegates {
    /// Runs sub-agents and teams.
    pub runner: Arc<SubAgentRunner>,
    /// The teams.
    pub teams: Arc<TeamDefinitions>,
    /// The skills.
    pub skills: Arc<SkillIndex>,
    /// Definitions skipped, each naming its file and the problem.
    pub warnings: Vec<String>,
    /// Background tasks.
    pub tasks: Option<TaskLauncher>,
    delegation: Delegation,
}

impl Delegates {
    /// Finds the definitions of the project at `root` and the user's; sub-agents get at most
    /// `base`, the main agent's own tools.
    pub fn discover(
        setup: &Setup,
        root: &Path,
        base: &ToolRegistry,
        delegation: Delegation,
    ) -> Self {
        let home = Some(setup.keel_home.as_path());
        let (agents, mut warnings) =
            AgentDefinitions::discover(&AgentDefinitions::standard_dirs(root, home));
        let (teams, more) = TeamDefinitions::discover(&TeamDefinitions::standard_dirs(root, home));
        warnings.extend(more);
        let (skills, more) = SkillIndex::discover(&SkillIndex::standard_dirs(root, home));
        warnings.extend(more);
        let mut runner = SubAgentRunner::new(
            delegation.clone(),
            Arc::new(agents),
            base.clone(),
            SubAgentLimits::default(),
        );
        let settings = crate::tasks::settings(setup);
        let tasks = match crate::tasks::launcher(&setup.keel_home, &setup.config, settings) {
            Ok(launcher) => {
                runner =
                    runner.with_tasks(launcher.clone(), setup.config.tasks.allowed_agents.clone());
                Some(launcher)
            }
            Err(err) => {
                warnings.push(format!("background tasks are off: {err}"));
                None
            }
        };
        Self {
            runner: Arc::new(runner),
            teams: Arc::new(teams),
            skills: Arc::new(skills),
            warnings,
            tasks,
            delegation,
        }
    }

    /// `tools` with `code`, `spawn_agent`, `run_team` and `use_skill` added.
    pub fn register(
        &self,
        tools: ToolRegistry,
        setup: &Setup,
    ) -> Result<ToolRegistry, RegistryError> {
        let code = CodeTool::new(
            self.delegation.clone(),
            &setup.cwd,
            setup.keel_home.join("logs"),
        )
        .max_iterations(setup.max_iterations);
        let mut tools = tools
            .with(code)?
            .with(SpawnAgentTool::new(self.runner.clone()))?
            .with(RunTeamTool::new(self.runner.clone(), self.teams.clone()))?
            .with(UseSkillTool::new(self.skills.clone()))?;
        if let Some(launcher) = &self.tasks {
            let task_tools = task_tools(launcher, "main")?;
            for name in task_tools.names() {
                if let Some(tool) = task_tools.get(name) {
                    tools.register_dyn(tool)?;
                }
            }
        }
        Ok(tools)
    }

    /// One line per sub-agent: name, model, tools, description.
    pub fn agent_lines(&self) -> Vec<String> {
        let agents = self.runner.definitions().all();
        if agents.is_empty() {
            return vec![
                "no agents: define one in .keel/agents/<name>.md (front matter \
                         `description`, optional `tools`, `model`, `max_steps`; the body is \
                         its system prompt)"
                    .into(),
            ];
        }
        agents
            .iter()
            .map(|agent| {
                let tools = agent
                    .tools
                    .as_ref()
                    .map_or_else(|| "all tools".to_owned(), |t| t.join(","));
                format!(
                    "{}  [{}; {}]  {}",
                    agent.name,
                    agent.model.as_deref().unwrap_or("default"),
                    tools,
                    agent.description
                )
            })
            .collect()
    }

    /// One line per team: name, pipeline, description.
    pub fn team_lines(&self) -> Vec<String> {
        if self.teams.is_empty() {
            return vec![
                "no teams: define one in .keel/teams/<name>.yaml (`name`, \
                         `description`, `agents: [a, b, c]`)"
                    .into(),
            ];
        }
        self.teams
            .all()
            .iter()
            .map(|team| {
                format!(
                    "{}  [{}]  {}",
                    team.name,
                    team.agents.join(" → "),
                    team.description
                )
            })
            .collect()
    }

    /// One line per background task, newest first.
    pub fn task_lines(&self) -> Vec<String> {
        let Some(launcher) = &self.tasks else {
            return vec!["background tasks are off".into()];
        };
        match launcher.store().list(20) {
            Ok(records) if records.is_empty() => {
                vec!["no tasks yet; the model starts them with start_task".into()]
            }
            Ok(records) => records.iter().map(crate::tasks::task_line).collect(),
            Err(err) => vec![format!("cannot read the tasks: {err}")],
        }
    }

    /// One line per skill: name, description.
    pub fn skill_lines(&self) -> Vec<String> {
        if self.skills.is_empty() {
            return vec![
                "no skills: add .keel/skills/<name>/SKILL.md or \
                         .keel/skills/<name>.md"
                    .into(),
            ];
        }
        self.skills
            .skills()
            .iter()
            .map(|skill| format!("{}  {}", skill.name, skill.description))
            .collect()
    }
}

/// A sub-agent run as lines: its tool calls, then a summary.
pub fn report_lines(agent: &str, report: &RunReport) -> Vec<String> {
    let mut lines: Vec<String> = report
        .calls
        .iter()
        .map(|call| {
            format!(
                "{} {} {}",
                if call.is_error { "✗" } else { "✓" },
                agent,
                describe_call(&call.name, &call.input)
            )
        })
        .collect();
    lines.push(format!("[agent {agent}: {}]", report.stats()));
    lines
}

/// Runs `keel agents|agent|teams|team|skills`; returns the exit code.
pub async fn command(options: &Options, command: Command) -> Result<u8, CliError> {
    let setup = Setup::resolve(options, Mode::Exec, &SessionChoice::New)?;
    for notice in &setup.notices {
        let _ = writeln!(std::io::stderr().lock(), "keel: {notice}");
    }
    if !setup.delegation {
        return Err(CliError::Usage(
            "--no-delegation leaves nothing to list or run here".into(),
        ));
    }
    let wired = setup.agent(ModeApprover::new(setup.approvals, None, None), Hooks::new())?;
    let delegates = wired
        .delegates
        .ok_or_else(|| CliError::Run("delegation is off".into()))?;
    let mut err = std::io::stderr().lock();
    for warning in &delegates.warnings {
        let _ = writeln!(err, "keel: warning: {warning}");
    }
    drop(err);
    let cancel = CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    let ctrl_c = tokio::spawn(async move {
        crate::signals::interrupted().await;
        on_ctrl_c.cancel();
    });
    let (out, progress, code) = match command {
        Command::Agents => (delegates.agent_lines(), Vec::new(), 0),
        Command::Teams => (delegates.team_lines(), Vec::new(), 0),
        Command::Skills => (delegates.skill_lines(), Vec::new(), 0),
        Command::Agent { name, task } => {
            let report = delegates
                .runner
                .run(&name, &task, &setup.cwd, &cancel)
                .await
                .map_err(|err| CliError::Usage(err.to_string()))?;
            let code = u8::from(report.error.is_some());
            (
                vec![report.output.clone()],
                report_lines(&name, &report),
                code,
            )
        }
        Command::Team { name, task } => {
            let team = delegates
                .teams
                .require(&name)
                .map_err(|err| CliError::Usage(err.to_string()))?;
            let report = delegates
                .runner
                .run_team(team, &task, &setup.cwd, &cancel)
                .await;
            let code = u8::from(!report.succeeded());
            let output = report
                .output()
                .unwrap_or("(no agent produced output)")
                .to_owned();
            let mut progress = vec![format!("[team {}]", report.team)];
            progress.extend(report.step_lines());
            (vec![output], progress, code)
        }
        _ => (Vec::new(), Vec::new(), 2),
    };
    ctrl_c.abort();
    let mut err = std::io::stderr().lock();
    for line in progress {
        let _ = writeln!(err, "{line}");
    }
    let mut stdout = std::io::stdout().lock();
    for line in out {
        let _ = writeln!(stdout, "{line}");
    }
    Ok(code)
}
