//! The `keel` binary: an interactive coding agent (`keel`) and a headless runner for
//! scripts (`keel exec`). It only wires keel's crates together: flags, config files and
//! output formats live here, everything the agent does lives in the libraries.

// The binary talks to its user on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod acp;
mod approve;
mod claude_cli;
mod cli;
mod config_report;
mod context_notes;
mod delegates;
mod error;
mod exec;
mod headless;
mod logging;
mod markdown;
mod mcp;
mod mcp_server;
mod print;
mod repl;
mod rewind;
mod sdk_session;
mod sessions;
mod shell;
mod signals;
mod slash_commands;
mod tasks;
mod terminal;
mod usage;
mod wrap;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, Options};
use crate::error::CliError;
use keel_config::SessionChoice;

async fn dispatch(command: Option<Command>, options: Options) -> Result<u8, CliError> {
    signals::install();
    match command {
        Some(Command::Exec(args)) => exec::run(&options, args).await,
        Some(Command::Sessions { limit, .. }) => {
            sessions::list(limit, &mut std::io::stdout().lock())?;
            Ok(0)
        }
        Some(Command::Resume { id, .. }) => repl::run(&options, SessionChoice::Resume(id)).await,
        Some(
            command @ (Command::Agents { .. }
            | Command::Agent { .. }
            | Command::Teams { .. }
            | Command::Team { .. }
            | Command::Skills { .. }),
        ) => delegates::command(&options, command).await,
        Some(Command::Tasks { action, .. }) => tasks::command(action).await,
        Some(Command::Mcp { action, .. }) => mcp::run(action, &options).await,
        Some(Command::Acp { .. }) => acp::run(&options).await,
        Some(Command::Config { .. }) => config_report::run(&options),
        Some(Command::Trust { dir, .. }) => {
            println!(
                "{}",
                keel_config::trust::trust_project(dir.as_deref(), &options.overrides())?
            );
            Ok(0)
        }
        Some(Command::Untrust { dir, .. }) => {
            println!(
                "{}",
                keel_config::trust::untrust_project(dir.as_deref(), &options.overrides())?
            );
            Ok(0)
        }
        Some(Command::Rewind {
            id, conversation, ..
        }) => rewind::command(&options, id, conversation),
        Some(Command::TaskRun { id, .. }) => tasks::task_run(&id).await,
        Some(Command::McpServer(args)) => mcp_server::run(&options, args).await,
        Some(Command::Completions { shell, .. }) => shell::completions(shell),
        Some(Command::Man { dir, .. }) => shell::man(dir.as_deref()),
        None => repl::run(&options, options.session_choice()).await,
    }
}

/// What the command line asks for: keel's own commands, or Claude Code's print mode.
#[allow(clippy::large_enum_variant)] // made once per process
enum Invocation {
    /// A keel command (none: the interactive session) and the flags for it.
    Keel(Option<Command>, Options),
    /// `keel -p …`, as `claude -p …`.
    Claude(claude_cli::ClaudeArgs),
}

impl Invocation {
    fn parse() -> Result<Self, clap::Error> {
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        if claude_cli::wanted(&args) {
            return claude_cli::ClaudeArgs::try_parse().map(Self::Claude);
        }
        let (command, options) = Cli::try_parse().and_then(Cli::into_parts)?;
        Ok(Self::Keel(command, options))
    }

    fn debug(&self) -> bool {
        match self {
            Self::Keel(_, options) => options.debug,
            Self::Claude(args) => args.options.debug,
        }
    }

    async fn run(self) -> Result<u8, CliError> {
        match self {
            Self::Keel(command, options) => dispatch(command, options).await,
            Self::Claude(args) => {
                signals::install();
                claude_cli::run(args).await
            }
        }
    }
}

fn main() -> ExitCode {
    // Other processes of the same user (the commands keel runs among them) may not read keel's
    // memory or environment through /proc, nor attach to it.
    if let Err(err) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("keel: warning: cannot protect keel's memory from other processes: {err}");
    }
    let invocation = match Invocation::parse() {
        Ok(invocation) => invocation,
        Err(err) => {
            let (text, code) = usage::clap_failure(&err, std::env::args_os());
            if code == 0 {
                // Help and version, as clap lays them out.
                let _ = err.print();
            } else {
                eprintln!("{text}");
            }
            return ExitCode::from(code);
        }
    };
    // Only when KEEL_LOG or --debug asks: otherwise no subscriber, no file.
    if let Some(warning) = logging::init(invocation.debug()) {
        eprintln!("keel: {warning}");
    }
    // Orphans of the commands keel runs (double forks, `setsid -f`) become keel's children, so
    // they can be found and killed when their call ends, and at exit.
    if let Err(err) = keel::sandbox::reaper::become_subreaper() {
        eprintln!("keel: warning: cannot become a child subreaper: {err}");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("keel: cannot start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(invocation.run());
    drop(runtime);
    // Nothing keel started outlives it, but the detached supervisors of background tasks.
    let killed = keel::sandbox::reaper::kill_descendants();
    if killed > 0 {
        tracing::debug!(killed, "killed processes left at exit");
    }
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("keel: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}
