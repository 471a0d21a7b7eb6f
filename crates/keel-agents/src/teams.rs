//! Teams: agents in a pipeline, each one's output the next one's task (the original request
//! kept in front), defined in `.keel/teams/<name>.yaml`; the `run_team` tool.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::error::AgentsError;
use crate::run::RunReport;
use crate::subagents::SubAgentRunner;

/// A team as defined in `<dir>/<name>.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamDefinition {
    /// Its name (the file's `name`, else the file's name).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The agents, in pipeline order.
    pub agents: Vec<String>,
    /// The file it came from.
    pub path: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TeamFile {
    name: Option<String>,
    #[serde(default)]
    description: String,
    agents: Vec<String>,
}

impl TeamDefinition {
    /// Reads one team file.
    pub fn load(path: &Path) -> Result<Self, AgentsError> {
        let text = std::fs::read_to_string(path).map_err(|err| AgentsError::io(path, err))?;
        let invalid = |reason: String| AgentsError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        let file: TeamFile =
            serde_yaml_ng::from_str(&text).map_err(|err| invalid(err.to_string()))?;
        if file.agents.is_empty() {
            return Err(invalid(
                "`agents` is empty: list the agents in pipeline order".into(),
            ));
        }
        let name = file
            .name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| crate::frontmatter::stem(path));
        Ok(Self {
            name: name.trim().to_owned(),
            description: file.description.trim().to_owned(),
            agents: file.agents.iter().map(|a| a.trim().to_owned()).collect(),
            path: path.to_path_buf(),
        })
    }
}

/// The teams a project and its user define.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TeamDefinitions {
    teams: Vec<TeamDefinition>,
}

impl TeamDefinitions {
    /// Where team files are looked for, first wins: the project's `.keel/teams`, then
    /// `$KEEL_HOME/teams`.
    pub fn standard_dirs(project_root: &Path, keel_home: Option<&Path>) -> Vec<PathBuf> {
        let mut dirs = crate::frontmatter::project_dirs(project_root, &[".keel/teams"]);
        dirs.extend(keel_home.map(|home| home.join("teams")));
        dirs
    }

    /// Reads every `<dir>/<name>.yaml` or `.yml`; a file that cannot be used, or is a symlink
    /// to a file outside `<dir>`, is skipped with a warning naming it and the problem; a name
    /// defined twice keeps the first.
    pub fn discover(dirs: &[PathBuf]) -> (Self, Vec<String>) {
        let mut teams: Vec<TeamDefinition> = Vec::new();
        let mut warnings = Vec::new();
        for dir in dirs {
            let mut files = match std::fs::read_dir(dir) {
                Ok(entries) => entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| {
                        p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml")
                    })
                    .collect::<Vec<_>>(),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => {
                    warnings.push(format!("teams skipped: {}: {err}", dir.display()));
                    continue;
                }
            };
            files.sort();
            for file in files {
                let loaded = crate::frontmatter::check_inside(dir, &file)
                    .and_then(|()| TeamDefinition::load(&file));
                match loaded {
                    Ok(team) => match teams.iter().find(|t| t.name == team.name) {
                        Some(first) => warnings.push(format!(
                            "team `{}` in {} skipped: {} defines it first",
                            team.name,
                            file.display(),
                            first.path.display()
                        )),
                        None => teams.push(team),
                    },
                    Err(err) => warnings.push(format!("team skipped: {err}")),
                }
            }
        }
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        teams.sort_by(|a, b| a.name.cmp(&b.name));
        (Self { teams }, warnings)
    }

    /// The team named `name`.
    pub fn get(&self, name: &str) -> Option<&TeamDefinition> {
        self.teams.iter().find(|t| t.name == name)
    }

    /// The team named `name`, or an error listing the teams there are.
    pub fn require(&self, name: &str) -> Result<&TeamDefinition, AgentsError> {
        self.get(name).ok_or_else(|| {
            AgentsError::not_found("team", name, self.teams.iter().map(|t| t.name.as_str()))
        })
    }

    /// Every team, by name.
    pub fn all(&self) -> &[TeamDefinition] {
        &self.teams
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.teams.is_empty()
    }
}

/// One agent's part in a team run.
#[derive(Debug, Clone, PartialEq)]
pub struct TeamStep {
    /// The agent.
    pub agent: String,
    /// What its run reported, or why it did not run (e.g. no such agent).
    pub result: Result<RunReport, String>,
}

/// A team run: each agent's part, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct TeamReport {
    /// The team.
    pub team: String,
    /// Each agent's part.
    pub steps: Vec<TeamStep>,
}

impl TeamReport {
    /// What every agent's run used and cost, by the provider that served each call.
    pub fn cost_by_provider(&self) -> keel_provider::CostByProvider {
        let mut total = keel_provider::CostByProvider::default();
        for step in &self.steps {
            if let Ok(report) = &step.result {
                total.merge(&report.cost_by_provider);
            }
        }
        total
    }

    /// The last output an agent produced (the pipeline's result), if any agent ran.
    pub fn output(&self) -> Option<&str> {
        self.steps
            .iter()
            .rev()
            .find_map(|step| step.result.as_ref().ok().map(|r| r.output.as_str()))
    }

    /// Whether every agent ran and completed.
    pub fn succeeded(&self) -> bool {
        self.steps
            .iter()
            .all(|step| step.result.as_ref().is_ok_and(|r| r.error.is_none()))
    }

    /// One line per agent: `- NAME: N steps, T output tokens[, error: ...]`, or why it did
    /// not run.
    pub fn step_lines(&self) -> Vec<String> {
        self.steps
            .iter()
            .map(|step| match &step.result {
                Ok(report) => format!("- {}: {}", step.agent, report.stats()),
                Err(error) => format!("- {}: error: {error}", step.agent),
            })
            .collect()
    }

    /// The report as the calling model reads it: the final output, then each agent's steps,
    /// tokens and error.
    pub fn render(&self) -> String {
        let mut text = format!(
            "{}\n\n[team {}]",
            self.output().unwrap_or("(no agent produced output)").trim(),
            self.team
        );
        for line in self.step_lines() {
            text.push('\n');
            text.push_str(&line);
        }
        text
    }
}

/// The task of the agent after one that produced `output`: the original request in front.
fn next_task(request: &str, previous: &str, output: &str) -> String {
    format!("{request}\n\n## Output of the previous agent ({previous})\n\n{output}")
}

impl SubAgentRunner {
    /// Runs `team`'s agents in order on `task` in `cwd`: the first gets the task, each next one
    /// the task followed by the previous output. A missing agent or a failed run is an error
    /// entry and the pipeline goes on with the last output there is.
    pub async fn run_team(
        &self,
        team: &TeamDefinition,
        task: &str,
        cwd: &Path,
        cancel: &CancellationToken,
    ) -> TeamReport {
        let mut steps = Vec::new();
        let mut previous: Option<(String, String)> = None;
        for agent in &team.agents {
            if cancel.is_cancelled() {
                steps.push(TeamStep {
                    agent: agent.clone(),
                    result: Err("cancelled before it started".into()),
                });
                continue;
            }
            let input = match &previous {
                Some((name, output)) => next_task(task, name, output),
                None => task.to_owned(),
            };
            let result = self
                .run(agent, &input, cwd, cancel)
                .await
                .map_err(|err| err.to_string());
            if let Ok(report) = &result
                && report.error.is_none()
            {
                previous = Some((agent.clone(), report.output.clone()));
            }
            steps.push(TeamStep {
                agent: agent.clone(),
                result,
            });
        }
        TeamReport {
            team: team.name.clone(),
            steps,
        }
    }
}

/// `run_team` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunTeamArgs {
    /// The team's name, as listed in this tool's description.
    pub team: String,
    /// The request: the first agent gets it, and every later one sees it first.
    pub task: String,
}

/// `run_team { team, task }`: runs a team's pipeline and returns each agent's part.
#[derive(Debug)]
pub struct RunTeamTool {
    runner: Arc<SubAgentRunner>,
    teams: Arc<TeamDefinitions>,
    description: String,
}

impl RunTeamTool {
    /// The tool over `runner` and `teams`; its description lists the teams.
    pub fn new(runner: Arc<SubAgentRunner>, teams: Arc<TeamDefinitions>) -> Self {
        let mut description = String::from(
            "Runs a team: its agents one after the other, each getting the request and the \
             previous agent's output; returns the last output and what each agent did. The \
             agents see only the request, not this conversation. Available teams:",
        );
        if teams.is_empty() {
            description.push_str(" none are defined.");
        }
        for team in teams.all() {
            description.push_str(&format!(
                "\n- {}: {} ({})",
                team.name,
                team.description,
                team.agents.join(" → ")
            ));
        }
        Self {
            runner,
            teams,
            description,
        }
    }
}

impl Tool for RunTeamTool {
    type Args = RunTeamArgs;
    const NAME: &'static str = "run_team";

    fn description(&self) -> &str {
        &self.description
    }

    /// Like `spawn_agent`: each call the agents make is checked as the parent's would be.
    fn effect(&self, _args: &RunTeamArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(&self, args: RunTeamArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let team = self
            .teams
            .require(&args.team)
            .map_err(|err| ToolError::failed(err.to_string()))?;
        let report = self
            .runner
            .run_team(team, &args.task, ctx.cwd(), ctx.cancel())
            .await;
        Ok(ToolOutput::text(report.render()).with_delegated(report.cost_by_provider()))
    }
}
