//! `keel exec`: one headless run, printed as text, one JSON object, or a JSON stream.

use std::io::{IsTerminal, Read, Write};
use std::time::Instant;

use futures::StreamExt;
use keel::{CodingAgent, RunEvent};
use keel_engine::{AgentEvent, Hooks, RunOutcome, Session, Stop};
use serde_json::Value;

use crate::approve::{Answer, AskFn, LiveMode, ModeApprover};
use crate::cli::{ExecArgs, Options, OutputFormat};
use crate::output::{ClaudeStream, InitInfo, McpStatus};
use crate::render::{CallInputs, failure_tail, finished_line, restored_note};
use crate::setup::{AgentExtras, CliError, Mode, SessionChoice, Setup};
use crate::signals;
use crate::trouble::{failure_hint, retry_status};

/// Which session the flags ask for.
pub(crate) fn session_choice(options: &Options) -> SessionChoice {
    match (&options.resume, options.continue_latest) {
        (Some(id), _) => SessionChoice::Resume(id.clone()),
        (None, true) => SessionChoice::Latest,
        (None, false) => SessionChoice::New,
    }
}

/// The prompt: the argument, or stdin for `-` (or no argument with stdin not a terminal).
/// With both an argument and a pipe on stdin, what was piped comes first and the argument
/// after it, as `claude -p` does (`git diff | keel exec "review this"`).
pub(crate) fn read_prompt(arg: Option<String>) -> Result<String, CliError> {
    let piped = !std::io::stdin().is_terminal();
    match arg {
        Some(dash) if dash == "-" => non_empty(read_stdin()?),
        Some(text) if piped => non_empty(with_piped(&read_stdin()?, text)),
        Some(text) => non_empty(text),
        None if piped => non_empty(read_stdin()?),
        None => Err(CliError::Usage(
            "keel exec needs a prompt: keel exec \"fix the failing test\", or - to read it \
             from stdin"
                .into(),
        )),
    }
}

/// Everything on stdin.
fn read_stdin() -> Result<String, CliError> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|err| CliError::Usage(format!("reading the prompt from stdin: {err}")))?;
    Ok(text)
}

/// `prompt` after what was `piped` (nothing piped: the prompt alone).
fn with_piped(piped: &str, prompt: String) -> String {
    let piped = piped.trim_end();
    if piped.trim().is_empty() {
        prompt
    } else {
        format!("{piped}\n\n{prompt}")
    }
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
pub(crate) fn print_line(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

pub(crate) fn print_json(value: &Value) {
    print_line(&value.to_string());
}

/// Writes one line to stderr (progress, notices); a closed stderr is ignored.
pub(crate) fn progress(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

/// On stderr: the lean tools chosen for a small window, and the first request that would not
/// fit the window (with `prompt`).
pub(crate) fn print_context_notes(coding: &CodingAgent, prompt: &str) {
    if let Some(note) = crate::context_notes::profile_note(coding) {
        progress(&format!("keel: {note}"));
    }
    if let Some(warning) = crate::context_notes::overflow_warning(coding, prompt) {
        progress(&format!("keel: warning: {warning}"));
    }
}

/// Runs `keel exec`; returns the exit code.
pub(crate) async fn run(options: &Options, args: ExecArgs) -> Result<u8, CliError> {
    let prompt = read_prompt(args.prompt)?;
    let headless = Headless {
        partial: args.include_partial_messages,
        ..Headless::default()
    };
    run_prompt(options, prompt, args.output_format, headless).await
}

/// How a headless run differs from `keel exec`'s defaults: what Claude Code's flags add to
/// the agent, and the approval mode they choose.
#[derive(Debug, Default)]
pub(crate) struct Headless {
    /// Added to the agent.
    pub extras: AgentExtras,
    /// The approval mode (`--permission-mode`); `None`: `--approvals`' (exec asks on the
    /// terminal when there is one).
    pub mode: Option<LiveMode>,
    /// With stream-json: the reply as it streams, as `stream_event` lines.
    pub partial: bool,
}

/// Runs `prompt` headless, printing it as `format` says; the exit code.
pub(crate) async fn run_prompt(
    options: &Options,
    prompt: String,
    format: OutputFormat,
    headless: Headless,
) -> Result<u8, CliError> {
    let choice = session_choice(options);
    let mut setup = Setup::resolve(options, Mode::Exec, &choice)?;
    setup.add(headless.extras, options)?;
    for notice in &setup.notices {
        progress(&format!("keel: {notice}"));
    }
    for line in setup.start_mcp_servers().await {
        progress(&format!("keel: {line}"));
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
    let approver = match headless.mode {
        Some(mode) => ModeApprover::starting(mode, None),
        None => ModeApprover::new(setup.live_mode, ask, None),
    };
    let mode = approver.switch();
    setup.ask_served_context().await;
    let coding = setup.agent(approver, Hooks::new())?;
    for warning in coding.warnings() {
        progress(&format!("keel: warning: {warning}"));
    }
    // `/name args` calls a custom slash command: its text is the prompt.
    let prompt = if prompt.trim_start().starts_with('/') {
        let (commands, warnings) = crate::slash_commands::load(&setup);
        for warning in warnings {
            progress(&format!("keel: warning: {warning}"));
        }
        crate::slash_commands::expand(&commands, &prompt).unwrap_or(prompt)
    } else {
        prompt
    };
    print_context_notes(&coding, &prompt);
    let agent = coding.agent();
    let mut session = setup.session(agent, &choice)?;
    session.set_permission_mode(mode.claude_name());
    let started = Instant::now();
    let mut stream = ClaudeStream::new(session.id(), &setup.model, headless.partial)
        .with_catalog(session.catalog().clone());
    if format == OutputFormat::StreamJson {
        print_json(&stream.init(&init_info(&setup, &coding)));
    }
    let cancel = session.cancel_handle();
    let ctrl_c = tokio::spawn(async move {
        signals::interrupted().await;
        cancel.cancel();
    });
    let outcome = stream_run(
        &coding,
        &mut session,
        vec![keel_provider::ContentBlock::text(prompt)],
        format,
        &mut stream,
        !options.no_wait_tasks,
    )
    .await;
    ctrl_c.abort();
    let ended = session.end(keel_engine::SessionEndReason::Other).await;
    for failure in &ended.failures {
        progress(&format!("keel: warning: {failure}"));
    }
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
            let mut result = stream.result(&outcome, started.elapsed());
            if format == OutputFormat::Json
                && let Some(fields) = result.as_object_mut()
            {
                // A stream's figure, not in Claude Code's single json object.
                fields.remove("model_usage_since_last_result");
            }
            print_json(&result);
        }
    }
    if let Some(hint) = failure_hint(&outcome.stop, &setup.origin) {
        progress(&format!("keel: {hint}"));
    }
    Ok(if outcome.stop == Stop::Completed {
        0
    } else {
        1
    })
}

/// What the `system`/`init` line says of this run.
pub(crate) fn init_info<'a>(setup: &'a Setup, coding: &CodingAgent) -> InitInfo<'a> {
    let mcp_servers = setup
        .mcp_status()
        .into_iter()
        .map(|(name, status)| McpStatus {
            name: name.to_owned(),
            status,
        })
        .collect();
    let (agents, skills) = coding
        .delegates()
        .map_or_else(Default::default, |delegates| {
            (
                delegates
                    .runner()
                    .definitions()
                    .all()
                    .iter()
                    .map(|agent| agent.name.clone())
                    .collect(),
                delegates.skills().names().map(str::to_owned).collect(),
            )
        });
    InitInfo {
        cwd: &setup.cwd,
        provider: &setup.provider_name,
        tools: coding
            .agent()
            .tools()
            .definitions()
            .into_iter()
            .map(|definition| definition.name)
            .collect(),
        mcp_servers,
        approvals: setup.approvals.name(),
        sandbox: sandbox_name(setup.policy.mode),
        api_key_source: if setup.origin.key_var == "ANTHROPIC_API_KEY" {
            "ANTHROPIC_API_KEY"
        } else {
            "none"
        },
        agents,
        skills,
        additional_directories: setup.allow_read.clone(),
    }
}

/// Prints `lines` as JSON lines.
pub(crate) fn print_lines(lines: &[Value]) {
    for line in lines {
        print_json(line);
    }
}

/// Runs `prompt` (and, when it leaves background tasks running and `wait_for_tasks` is set,
/// the turn after they end), printing its events as `format` says (`stream` makes the JSON
/// lines); the outcome.
pub(crate) async fn stream_run(
    coding: &CodingAgent,
    session: &mut Session,
    prompt: Vec<keel_provider::ContentBlock>,
    format: OutputFormat,
    stream: &mut ClaudeStream,
    wait_for_tasks: bool,
) -> Option<RunOutcome> {
    let json_lines = format == OutputFormat::StreamJson;
    let mut waited: Vec<String> = Vec::new();
    let mut outcome: Option<RunOutcome> = None;
    let mut waiting = false;
    let mut calls = CallInputs::default();
    // A run stopped by a signal waits for no task: the tasks go on without keel (their
    // supervisors are detached).
    let wait = wait_for_tasks && !signals::terminating();
    let events = if wait {
        futures::future::Either::Left(coding.run_content(session, prompt))
    } else {
        futures::future::Either::Right(coding.run_content_without_waiting(session, prompt))
    };
    futures::pin_mut!(events);
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = signals::terminated(), if waiting => None,
        };
        let Some(event) = event else { break };
        let event = match event {
            RunEvent::Agent(event) => event,
            RunEvent::WaitingForTasks { ids } => {
                waiting = true;
                waited.clone_from(&ids);
                if format == OutputFormat::Text {
                    progress(&format!(
                        "waiting for {} background task(s): {} (--no-wait-tasks skips this)",
                        ids.len(),
                        ids.join(", ")
                    ));
                }
                continue;
            }
            RunEvent::TasksEnded => {
                waiting = false;
                if json_lines && let Some(tasks) = coding.tasks() {
                    for id in waited.drain(..) {
                        if let Ok(Some(task)) = tasks.store().get(&id) {
                            print_json(&stream.task_notification(&task));
                        }
                    }
                }
                continue;
            }
            RunEvent::Done(done) => {
                outcome = Some(done);
                continue;
            }
            _ => continue,
        };
        calls.observe(&event);
        let lines = stream.event(&event);
        if json_lines {
            print_lines(&lines);
        }
        match event {
            AgentEvent::ToolCallFinished {
                id,
                name,
                output,
                images,
                is_error,
                duration,
            } if format == OutputFormat::Text => {
                let input = calls.take(&id);
                progress(&finished_line(
                    &name, &input, &output, &images, is_error, duration,
                ));
                for line in failure_tail(&name, &output, is_error) {
                    progress(&format!("    {line}"));
                }
                if let Some(note) = restored_note(&output) {
                    progress(&format!("keel: {note}"));
                }
            }
            AgentEvent::ReplyDiscarded {
                attempt,
                max_attempts,
                error,
            } if format != OutputFormat::StreamJson => progress(&format!(
                "the reply was cut off ({error}); asking again ({attempt}/{max_attempts})"
            )),
            AgentEvent::IterationWarning { used, limit } if format == OutputFormat::Text => {
                progress(&iteration_warning_line(used, limit));
            }
            AgentEvent::Warning { message } if format == OutputFormat::Text => {
                progress(&format!("warning: {message}"));
            }
            AgentEvent::HookMessage { event, message } if format == OutputFormat::Text => {
                progress(&format!("{event} hook: {message}"));
            }
            AgentEvent::ToolCallRepaired { repair } if format == OutputFormat::Text => {
                progress(&format!(
                    "keel: repaired a tool call: {}",
                    repair.describe()
                ));
            }
            AgentEvent::Retrying {
                attempt,
                max_attempts,
                wait,
                error,
            } if format == OutputFormat::Text => progress(&format!(
                "keel: {}",
                retry_status(attempt, max_attempts, wait, &error)
            )),
            // A run's own end: the whole request's comes with Done (kept in case the wait
            // for tasks is cut short).
            AgentEvent::Finished(done) if outcome.is_none() => outcome = Some(done),
            _ => {}
        }
    }
    outcome
}

/// The stderr line of a text run at 80 % of its iteration limit.
fn iteration_warning_line(used: u32, limit: u32) -> String {
    format!(
        "keel: warning: {used} of {limit} model calls used (--max-iterations); the model is told \
         to wrap up"
    )
}

/// The name `--sandbox` takes for `mode`.
pub(crate) fn sandbox_name(mode: keel_sandbox::SandboxMode) -> &'static str {
    match mode {
        keel_sandbox::SandboxMode::ReadOnly => "read-only",
        keel_sandbox::SandboxMode::FullAccess => "full-access",
        _ => "workspace-write",
    }
}
