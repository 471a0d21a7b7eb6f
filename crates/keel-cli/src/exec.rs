//! `keel exec`: one headless run, printed as text, one JSON object, or a JSON stream.

use std::io::{IsTerminal, Read, Write};
use std::time::Instant;

use futures::StreamExt;
use keel_engine::{AgentEvent, Hooks, RunOutcome, Session, Stop};
use keel_tasks::TaskLauncher;
use serde_json::Value;

use crate::approve::{Answer, AskFn, ModeApprover};
use crate::cli::{ExecArgs, Options, OutputFormat};
use crate::output::{
    InitInfo, init_object, message_object, reply_discarded_object, result_object, snapshot_object,
};
use crate::render::{CallInputs, finished_line, human_duration, restored_note};
use crate::setup::{CliError, Mode, SessionChoice, Setup};
use crate::signals;

/// Which session the flags ask for.
pub fn session_choice(options: &Options) -> SessionChoice {
    match (&options.resume, options.continue_latest) {
        (Some(id), _) => SessionChoice::Resume(id.clone()),
        (None, true) => SessionChoice::Latest,
        (None, false) => SessionChoice::New,
    }
}

/// The prompt: the argument, or stdin for `-` (or no argument with stdin not a terminal).
fn read_prompt(arg: Option<String>) -> Result<String, CliError> {
    let from_stdin = match arg.as_deref() {
        Some("-") => true,
        Some(text) => return non_empty(text.to_owned()),
        None => !std::io::stdin().is_terminal(),
    };
    if !from_stdin {
        return Err(CliError::Usage(
            "keel exec needs a prompt: keel exec \"fix the failing test\", or - to read it \
             from stdin"
                .into(),
        ));
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|err| CliError::Usage(format!("reading the prompt from stdin: {err}")))?;
    non_empty(text)
}

fn non_empty(text: String) -> Result<String, CliError> {
    if text.trim().is_empty() {
        Err(CliError::Usage(
            "the prompt is empty: say what keel should do".into(),
        ))
    } else {
        Ok(text)
    }
}

/// Reads an answer from the controlling terminal, for `--approvals ask` in exec.
fn ask_on_tty() -> Option<AskFn> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let ask: AskFn = std::sync::Arc::new(|question: &str| {
        let Ok(mut tty) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        else {
            return Answer::Closed;
        };
        // Keys typed before the question appeared never answer it.
        let _ = nix::sys::termios::tcflush(&tty, nix::sys::termios::FlushArg::TCIFLUSH);
        if tty.write_all(question.as_bytes()).is_err() {
            return Answer::Closed;
        }
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match tty.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => break,
                Ok(1) => line.push(byte[0]),
                _ if line.is_empty() => return Answer::Closed,
                _ => break,
            }
        }
        Answer::Line(String::from_utf8_lossy(&line).into_owned())
    });
    Some(ask)
}

/// Writes one line to stdout and flushes it; a closed stdout is not an error worth more
/// than stopping to write.
fn print_line(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

fn print_json(value: &Value) {
    print_line(&value.to_string());
}

fn progress(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

/// Runs `keel exec`; returns the exit code.
pub async fn run(options: &Options, args: ExecArgs) -> Result<u8, CliError> {
    let prompt = read_prompt(args.prompt)?;
    let choice = session_choice(options);
    let setup = Setup::resolve(options, Mode::Exec, &choice)?;
    for notice in &setup.notices {
        progress(&format!("keel: {notice}"));
    }
    let ask = match setup.approvals {
        crate::config::ApprovalMode::Ask => {
            let ask = ask_on_tty();
            if ask.is_none() {
                progress(
                    "keel: --approvals ask has no terminal to ask on; gated calls are refused",
                );
            }
            ask
        }
        _ => None,
    };
    let wired = setup.agent(ModeApprover::new(setup.approvals, ask, None), Hooks::new())?;
    for warning in wired.delegates.iter().flat_map(|d| d.warnings.iter()) {
        progress(&format!("keel: warning: {warning}"));
    }
    let agent = wired.agent;
    let mut session = setup.session(&agent, &choice)?;
    let started = Instant::now();
    let format = args.output_format;
    if format == OutputFormat::StreamJson {
        print_json(&init_object(&InitInfo {
            session_id: session.id(),
            cwd: &setup.cwd,
            model: &setup.model,
            provider: &setup.provider_name,
            tools: agent
                .tools()
                .names()
                .iter()
                .map(|n| n.to_string())
                .collect(),
            approvals: setup.approvals.name(),
            sandbox: sandbox_name(setup.policy.mode),
        }));
    }
    let cancel = session.cancel_handle();
    let ctrl_c = tokio::spawn(async move {
        signals::interrupted().await;
        cancel.cancel();
    });
    let mut outcome = stream_run(&mut session, &prompt, format).await;
    let tasks = wired.delegates.as_ref().and_then(|d| d.tasks.clone());
    if let (Some(launcher), false, Some(first)) = (tasks, options.no_wait_tasks, &outcome)
        && first.stop == Stop::Completed
        && !signals::terminating()
    {
        // Tasks the model started and left running: wait for them, then let it react.
        if wait_for_tasks(&launcher, session.id(), format).await {
            let more = stream_run(&mut session, TASKS_ENDED_PROMPT, format).await;
            outcome = more.map(|mut last| {
                last.iterations += first.iterations;
                let mut usage = first.usage;
                usage.add(&last.usage);
                last.usage = usage;
                last.cost_usd = first.cost_usd.zip(last.cost_usd).map(|(a, b)| a + b);
                last
            });
        }
    }
    ctrl_c.abort();
    let session_id = session.id().to_owned();
    let outcome =
        outcome.ok_or_else(|| CliError::Run("the run ended without an outcome".into()))?;
    if let Some(error) = session.persistence_error() {
        progress(&format!(
            "keel: warning: the session was not fully saved: {error}"
        ));
    }
    match format {
        OutputFormat::Text => {
            if outcome.stop == Stop::Completed {
                print_line(&outcome.text);
            } else {
                progress(&format!(
                    "keel: the run ended ({}): {}",
                    outcome.stop.name(),
                    outcome.text
                ));
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            print_json(&result_object(&outcome, &session_id, started.elapsed()));
        }
    }
    Ok(if outcome.stop == Stop::Completed {
        0
    } else {
        1
    })
}

/// The prompt of the turn after the background tasks ended.
const TASKS_ENDED_PROMPT: &str = "The background tasks you started have ended; their \
notifications are above. Check their results and finish the request.";

/// Waits until the tasks `session_id` started have all ended (each has its own timeout).
/// Returns whether there were any.
async fn wait_for_tasks(launcher: &TaskLauncher, session_id: &str, format: OutputFormat) -> bool {
    let mut waited = false;
    loop {
        // A supervisor that died would leave its task running forever: look each time.
        if let Err(err) = launcher.recover() {
            tracing::warn!("task recovery: {err}");
        }
        let active = match launcher.store().active_for_session(session_id) {
            Ok(active) => active,
            Err(err) => {
                progress(&format!("keel: warning: cannot read the tasks: {err}"));
                return waited;
            }
        };
        if active.is_empty() {
            return waited;
        }
        if !waited && format == OutputFormat::Text {
            let ids: Vec<&str> = active.iter().map(|t| t.id.as_str()).collect();
            progress(&format!(
                "waiting for {} background task(s): {} (--no-wait-tasks skips this)",
                active.len(),
                ids.join(", ")
            ));
        }
        waited = true;
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(300)) => {}
            // keel is stopping: the tasks go on without it (their supervisors are detached).
            () = signals::terminated() => return false,
        }
    }
}

/// Runs `prompt`, printing its events as `format` says; the run's outcome.
async fn stream_run(
    session: &mut Session,
    prompt: &str,
    format: OutputFormat,
) -> Option<RunOutcome> {
    let session_id = session.id().to_owned();
    let mut outcome: Option<RunOutcome> = None;
    let mut calls = CallInputs::default();
    let events = session.run_streaming(prompt);
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        calls.observe(&event);
        match event {
            AgentEvent::MessageAdded { message } if format == OutputFormat::StreamJson => {
                print_json(&message_object(&message, &session_id));
            }
            AgentEvent::ToolCallFinished {
                id,
                name,
                output,
                is_error,
                duration,
            } if format == OutputFormat::Text => {
                let input = calls.take(&id);
                progress(&finished_line(&name, &input, &output, is_error, duration));
                if let Some(note) = restored_note(&output) {
                    progress(&format!("keel: {note}"));
                }
            }
            AgentEvent::ReplyDiscarded {
                attempt,
                max_attempts,
                error,
            } => match format {
                OutputFormat::StreamJson => print_json(&reply_discarded_object(
                    attempt,
                    max_attempts,
                    &error,
                    &session_id,
                )),
                _ => progress(&format!(
                    "the reply was cut off ({error}); asking again ({attempt}/{max_attempts})"
                )),
            },
            AgentEvent::SnapshotTaken { call_id, id } if format == OutputFormat::StreamJson => {
                print_json(&snapshot_object(&call_id, &id.0, &session_id));
            }
            AgentEvent::Warning { message } if format == OutputFormat::Text => {
                progress(&format!("warning: {message}"));
            }
            AgentEvent::Retrying {
                attempt,
                wait,
                error,
            } if format == OutputFormat::Text => progress(&format!(
                "retrying ({attempt}) in {}: {error}",
                human_duration(wait)
            )),
            AgentEvent::Finished(done) => outcome = Some(done),
            _ => {}
        }
    }
    outcome
}

/// The name `--sandbox` takes for `mode`.
pub fn sandbox_name(mode: keel_sandbox::SandboxMode) -> &'static str {
    match mode {
        keel_sandbox::SandboxMode::ReadOnly => "read-only",
        keel_sandbox::SandboxMode::FullAccess => "full-access",
        _ => "workspace-write",
    }
}
