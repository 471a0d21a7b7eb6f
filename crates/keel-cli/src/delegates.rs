//! What the agent can delegate to (sub-agents, teams, skills, the `code` tool), and the
//! `keel agents|agent|teams|team|skills` commands.

use std::io::Write;

use keel::Delegates;
use keel_agents::RunReport;
use keel_engine::Hooks;
use tokio_util::sync::CancellationToken;

use crate::approve::ModeApprover;
use crate::cli::{Command, Options};
use crate::render::describe_call;
use crate::setup::{CliError, Mode, SessionChoice, Setup};
use crate::terminal::printable;

/// The `keel agents|teams|tasks|skills` listings.
pub(crate) trait Listings {
    /// One line per sub-agent: name, model, tools, description.
    fn agent_lines(&self) -> Vec<String>;
    /// One line per team: name, pipeline, description.
    fn team_lines(&self) -> Vec<String>;
    /// One line per background task, newest first.
    fn task_lines(&self) -> Vec<String>;
    /// One line per skill: name, description.
    fn skill_lines(&self) -> Vec<String>;
    /// Skill `name`: its name and description, its file, then its instructions made printable
    /// (a repository's file may hold escape sequences); or why it cannot be shown (no such
    /// skill: the known ones are named; its file now leads outside its folder; unreadable).
    fn skill_detail_lines(&self, name: &str) -> Result<Vec<String>, String>;
}

impl Listings for Delegates {
    fn agent_lines(&self) -> Vec<String> {
        let agents = self.runner().definitions().all();
        if agents.is_empty() {
            return vec![
                "no agents: define one in .keel/agents/<name>.md or .claude/agents/<name>.md \
                         (front matter `description`, optional `tools`, `disallowedTools`, \
                         `model`, `maxTurns`, `permissionMode`, `skills`; the body is its \
                         system prompt)"
                    .into(),
            ];
        }
        let mut lines = Vec::new();
        for agent in agents {
            let mut tools = agent
                .tools
                .as_ref()
                .map_or_else(|| "all tools".to_owned(), |t| t.join(","));
            if !agent.disallowed_tools.is_empty() {
                tools.push_str(&format!(" but {}", agent.disallowed_tools.join(",")));
            }
            lines.push(format!(
                "{}  [{}; {}]  {}",
                agent.name,
                agent.model.as_deref().unwrap_or("inherit"),
                tools,
                agent.description
            ));
            lines.extend(
                agent
                    .warnings()
                    .iter()
                    .map(|warning| format!("  warning: {warning}")),
            );
        }
        lines
    }

    fn team_lines(&self) -> Vec<String> {
        if self.teams().is_empty() {
            return vec![
                "no teams: define one in .keel/teams/<name>.yaml (`name`, \
                         `description`, `agents: [a, b, c]`)"
                    .into(),
            ];
        }
        self.teams()
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

    fn task_lines(&self) -> Vec<String> {
        let Some(launcher) = self.tasks() else {
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

    fn skill_lines(&self) -> Vec<String> {
        if self.skills().is_empty() {
            return vec![
                "no skills: add .keel/skills/<name>/SKILL.md or \
                         .keel/skills/<name>.md"
                    .into(),
            ];
        }
        self.skills()
            .skills()
            .iter()
            .map(|skill| format!("{}  {}", skill.name, skill.description))
            .collect()
    }

    fn skill_detail_lines(&self, name: &str) -> Result<Vec<String>, String> {
        let skills = self.skills();
        let body = skills
            .load(name)
            .map_err(|err| printable(&err.to_string()))?;
        let skill = skills
            .get(name)
            .ok_or_else(|| format!("no skill named {name}"))?;
        let mut lines = vec![
            printable(&format!("{} — {}", skill.name, skill.description)),
            printable(&format!("file: {}", skill.path.display())),
            String::new(),
        ];
        if body.trim().is_empty() {
            lines.push("(no instructions beyond its description)".into());
        } else {
            lines.extend(body.trim_end().lines().map(printable));
        }
        Ok(lines)
    }
}

/// A sub-agent run as lines: its tool calls, then a summary.
pub(crate) fn report_lines(agent: &str, report: &RunReport) -> Vec<String> {
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
pub(crate) async fn command(options: &Options, command: Command) -> Result<u8, CliError> {
    // Listing needs no model: only running an agent or a team needs a provider.
    let mode = match command {
        Command::Agents { .. } | Command::Teams { .. } | Command::Skills { .. } => Mode::Listing,
        _ => Mode::Exec,
    };
    let mut setup = Setup::resolve(options, mode, &SessionChoice::New)?;
    for notice in &setup.notices {
        let _ = writeln!(std::io::stderr().lock(), "keel: {notice}");
    }
    // Sub-agents, teams and skills are the full set's, whatever profile the flags or config
    // name for keel's own sessions.
    setup.tool_profile = Some(keel::ToolProfile::Full);
    if !setup.delegation {
        return Err(CliError::Usage(
            "--no-delegation leaves nothing to list or run here".into(),
        ));
    }
    let coding = setup.agent(ModeApprover::new(setup.live_mode, None, None), Hooks::new())?;
    let delegates = coding
        .delegates()
        .cloned()
        .ok_or_else(|| CliError::Run("delegation is off".into()))?;
    let mut err = std::io::stderr().lock();
    for warning in coding.warnings() {
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
        Command::Agents { .. } => (delegates.agent_lines(), Vec::new(), 0),
        Command::Teams { .. } => (delegates.team_lines(), Vec::new(), 0),
        Command::Skills { name: None, .. } => (delegates.skill_lines(), Vec::new(), 0),
        Command::Skills {
            name: Some(name), ..
        } => (
            delegates
                .skill_detail_lines(&name)
                .map_err(CliError::Usage)?,
            Vec::new(),
            0,
        ),
        Command::Agent { name, task, .. } => {
            let report = delegates
                .runner()
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
        Command::Team { name, task, .. } => {
            let team = delegates
                .teams()
                .require(&name)
                .map_err(|err| CliError::Usage(err.to_string()))?;
            let report = delegates
                .runner()
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
