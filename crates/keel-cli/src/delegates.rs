//! What the agent can delegate to (sub-agents, teams, skills, the `code` tool), and the
//! `keel agents|agent|teams|team|skills` commands.

use std::io::Write;

use keel::engine::Hooks;
use keel_host::report::delegates::{Listings, report_lines};
use tokio_util::sync::CancellationToken;

use crate::cli::{Command, Options};
use crate::error::CliError;
use keel_config::{SessionChoice, Surface};
use keel_host::ModeApprover;

/// Runs `keel agents|agent|teams|team|skills`; returns the exit code.
pub(crate) async fn command(options: &Options, command: Command) -> Result<u8, CliError> {
    // Listing needs no model: only running an agent or a team needs a provider.
    let mode = match command {
        Command::Agents { .. } | Command::Teams { .. } | Command::Skills { .. } => Surface::Listing,
        _ => Surface::Headless,
    };
    let mut setup = options.settings(mode, &SessionChoice::New)?;
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
    let coding = setup.agent(ModeApprover::starting(setup.live_mode, None), Hooks::new())?;
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
