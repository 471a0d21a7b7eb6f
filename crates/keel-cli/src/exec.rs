//! `keel exec`: one headless run, printed as text, one JSON object, or a JSON stream.

use std::io::{IsTerminal, Read, Write};
use std::sync::Arc;
use std::time::Instant;

use keel::engine::{RunOutcome, SessionEndReason, Stop};
use keel::provider::ContentBlock;
use keel_config::{ApprovalMode, Extras, LiveMode, Settings, Surface};
use keel_host::stream_json::{ClaudeStream, InitInfo};
use keel_host::trouble::failure_hint;
use keel_host::{ConfiguredSessions, LiveSession, Opening, Ownership, SessionHost, TaskWait};

use crate::approve::{Answer, AskFn, TerminalApprover};
use crate::cli::{ExecArgs, Options, OutputFormat};
use crate::context_notes::print_context_notes;
use crate::error::CliError;
use crate::headless::stream_turn;
use crate::print::{print_json, print_line, progress};
use crate::signals;

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
    pub extras: Extras,
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
    let choice = options.session_choice();
    let mut settings = options.settings(Surface::Headless, &choice)?;
    settings.add(headless.extras, &options.mcp_config)?;
    for notice in &settings.notices {
        progress(&format!("keel: {notice}"));
    }
    for line in settings.start_mcp_servers().await {
        progress(&format!("keel: {line}"));
    }
    // `--permission-mode` decides alone; else `--approvals ask` asks on the terminal.
    let ask = match (headless.mode, settings.approvals) {
        (None, ApprovalMode::Ask) => {
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
    settings.ask_served_context().await;
    let settings = Arc::new(settings);
    let sessions =
        ConfiguredSessions::new(settings.clone()).mode(headless.mode.unwrap_or(settings.live_mode));
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::of(&choice), Ownership::default())
        .await?;
    let (live, mut owner) = (opened.session, opened.owner);
    if let Some(ask) = ask {
        live.answer_with(&owner, Arc::new(TerminalApprover::new(ask, None)))?;
    }
    for warning in live.coding().warnings() {
        progress(&format!("keel: warning: {warning}"));
    }
    let prompt = expand_command(&settings, prompt);
    print_context_notes(live.coding(), &prompt);
    let started = Instant::now();
    let mut stream = {
        let session = live.session().await;
        ClaudeStream::new(session.id(), &settings.model, headless.partial)
            .with_catalog(session.catalog().clone())
    };
    if format == OutputFormat::StreamJson {
        print_json(&stream.init(&InitInfo::of(&settings, live.coding())));
    }
    let ctrl_c = {
        let live = live.clone();
        tokio::spawn(async move {
            signals::interrupted().await;
            live.cancel();
        })
    };
    let wait = if options.no_wait_tasks {
        TaskWait::Leave
    } else {
        TaskWait::Wait
    };
    let prompt = vec![ContentBlock::text(prompt)];
    let outcome = stream_turn(&live, &mut owner, prompt, format, &mut stream, wait).await;
    ctrl_c.abort();
    end_session(&host, &live).await;
    let outcome =
        outcome.ok_or_else(|| CliError::Run("the run ended without an outcome".into()))?;
    print_result(format, &mut stream, &outcome, started);
    if let Some(hint) = failure_hint(&outcome.stop, &settings.origin) {
        progress(&format!("keel: {hint}"));
    }
    Ok(u8::from(outcome.stop != Stop::Completed))
}

/// `/name args` calls a custom slash command: its text is the prompt.
fn expand_command(settings: &Settings, prompt: String) -> String {
    if !prompt.trim_start().starts_with('/') {
        return prompt;
    }
    let (commands, warnings) = crate::slash_commands::load(settings);
    for warning in warnings {
        progress(&format!("keel: warning: {warning}"));
    }
    crate::slash_commands::expand(&commands, &prompt).unwrap_or(prompt)
}

/// Closes `live` (its `SessionEnd` hooks run), saying what failed and whether the session
/// was not fully saved.
pub(crate) async fn end_session(host: &SessionHost, live: &LiveSession) {
    match host.close(&live.id(), SessionEndReason::Other).await {
        Ok(ended) => {
            for failure in &ended.failures {
                progress(&format!("keel: warning: {failure}"));
            }
        }
        Err(err) => progress(&format!("keel: warning: {err}")),
    }
    if let Some(error) = live.session().await.persistence_error() {
        progress(&format!(
            "keel: warning: the session was not fully saved: {error}"
        ));
    }
}

/// The run's answer: the text on stdout (or why it ended, on stderr), or the JSON result.
fn print_result(
    format: OutputFormat,
    stream: &mut ClaudeStream,
    outcome: &RunOutcome,
    started: Instant,
) {
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
            let mut result = stream.result(outcome, started.elapsed());
            if format == OutputFormat::Json
                && let Some(fields) = result.as_object_mut()
            {
                // A stream's figure, not in Claude Code's single json object.
                fields.remove("model_usage_since_last_result");
            }
            print_json(&result);
        }
    }
}
