//! What the agent can delegate to, as lines: its sub-agents, teams, skills and background
//! tasks (`keel agents`, `/agents`, an editor's `/agents` …), and a sub-agent's run.

use keel::Delegates;
use keel::agents::RunReport;

use crate::render::{describe_call, printable};

/// The `keel agents|teams|tasks|skills` listings.
pub trait Listings {
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
            Ok(records) => records.iter().map(task_line).collect(),
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

/// How long ago `time` (RFC 3339) was: `5 s`, `3 min`, `2 h`, `4 d`.
pub fn age(time: &str) -> String {
    let Ok(then) = time.parse::<jiff::Timestamp>() else {
        return "?".into();
    };
    let secs = jiff::Timestamp::now().duration_since(then).as_secs().max(0);
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86_400 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    }
}

/// One line of `keel tasks`.
pub fn task_line(record: &keel::tasks::TaskRecord) -> String {
    format!(
        "{}  {:<11}  {:>6}  {}  {}  {}",
        record.id,
        record.status.as_str(),
        age(&record.created_at),
        record.runner,
        record.workdir.display(),
        crate::render::one_line(record.task_prompt.lines().next().unwrap_or_default(), 60)
    )
}
