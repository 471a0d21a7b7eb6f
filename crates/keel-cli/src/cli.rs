//! The command line: flags and subcommands.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use keel_sandbox::SandboxMode;

use crate::config::ApprovalMode;

/// keel: a coding agent that reads, edits, runs commands, sees the errors and tries again.
#[derive(Debug, Parser)]
#[command(
    name = "keel",
    version,
    about = "A coding agent for your terminal: reads, edits, runs commands, checks its work.",
    after_help = "\
Environment:
  ANTHROPIC_API_KEY, OPENAI_API_KEY     provider keys (never printed or saved)
  ANTHROPIC_BASE_URL, OPENAI_BASE_URL   where the provider is served
  KEEL_PROVIDER, KEEL_MODEL             like --provider and --model
  KEEL_HOME                             config, sessions and history (default ~/.keel)
  KEEL_LOG                              log to $KEEL_HOME/logs/keel.log: a filter such as
                                        debug, or keel_provider=trace (see --debug)

Without --provider: Anthropic if ANTHROPIC_API_KEY is set, else an OpenAI-compatible server
if OPENAI_BASE_URL or OPENAI_API_KEY is set.

Config: $KEEL_HOME/config.toml, then .keel/config.toml in the project (searched up to the
repository root). A project's config may only tighten (deny rules, lower limits, the model)
until you trust it with `keel trust`; flags win over both.

Exit codes: 0 success; 1 the run failed (iteration limit, provider failure, refusal);
2 usage or configuration error."
)]
pub(crate) struct Cli {
    /// What to do; without one, an interactive session in the working directory.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Flags for every command.
    #[command(flatten)]
    pub options: Options,
}

/// Flags shared by the interactive session and `exec`.
#[derive(Debug, Clone, Args)]
pub(crate) struct Options {
    /// Work in DIR instead of the current directory.
    #[arg(short = 'C', long = "cwd", value_name = "DIR", global = true)]
    pub cwd: Option<PathBuf>,

    /// The model provider: anthropic, openai (or any OpenAI-compatible server), or a name
    /// defined as [providers.NAME] in the config.
    #[arg(long, value_name = "NAME", global = true)]
    pub provider: Option<String>,

    /// The model (default: claude-sonnet-4-5 for Anthropic, gpt-4.1 for OpenAI).
    #[arg(long, value_name = "NAME", global = true)]
    pub model: Option<String>,

    /// The provider's base URL, e.g. http://localhost:11434/v1 for a local server.
    #[arg(long, value_name = "URL", global = true)]
    pub base_url: Option<String>,

    /// The most model calls in one run [default: 25].
    #[arg(long, value_name = "N", global = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iterations: Option<u32>,

    /// Also let the file tools read below PATH (outside the working directory); repeatable.
    #[arg(long = "allow-read", value_name = "PATH", global = true)]
    pub allow_read: Vec<PathBuf>,

    /// Who approves destructive tool calls (commits, deletions, ...) [default: ask in the
    /// interactive session, deny in exec].
    #[arg(long, value_enum, value_name = "MODE", global = true)]
    pub approvals: Option<ApprovalMode>,

    /// Allow every tool call without asking (same as --approvals allow).
    #[arg(short = 'y', long = "yes", global = true, conflicts_with = "approvals")]
    pub yes: bool,

    /// Where commands may write [default: workspace-write].
    #[arg(long, value_enum, value_name = "MODE", global = true)]
    pub sandbox: Option<SandboxArg>,

    /// Let commands use the network (off by default under workspace-write and read-only;
    /// keel's own model calls are never affected).
    #[arg(long, global = true)]
    pub network: bool,

    /// Also let commands write below DIR (the file tools may read it); repeatable.
    #[arg(long = "add-dir", value_name = "DIR", global = true)]
    pub add_dir: Vec<PathBuf>,

    /// Trust the project's configuration for this run (approvals, sandbox, hooks, runners,
    /// providers it sets apply), without recording it; for CI.
    #[arg(long, global = true)]
    pub trust_project: bool,

    /// Continue the newest session started in this directory.
    #[arg(
        short = 'c',
        long = "continue",
        global = true,
        conflicts_with = "resume"
    )]
    pub continue_latest: bool,

    /// Continue session ID (see `keel sessions`).
    #[arg(long, value_name = "ID", global = true)]
    pub resume: Option<String>,

    /// Leave out the delegation tools (code, spawn_agent, run_team, use_skill, the task tools)
    /// and the skills index.
    #[arg(long, global = true)]
    pub no_delegation: bool,

    /// In exec: do not wait for background tasks still running when the model ends its turn.
    #[arg(long, global = true)]
    pub no_wait_tasks: bool,

    /// Log keel's debug messages to $KEEL_HOME/logs/keel.log (KEEL_LOG, if set, says what
    /// to log instead).
    #[arg(long, global = true)]
    pub debug: bool,
}

/// `--sandbox` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxArg {
    /// Commands may write only in the working directory and the temp dir.
    WorkspaceWrite,
    /// Commands may write nowhere; the write tools are removed.
    ReadOnly,
    /// No confinement.
    FullAccess,
}

impl From<SandboxArg> for SandboxMode {
    fn from(arg: SandboxArg) -> Self {
        match arg {
            SandboxArg::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            SandboxArg::ReadOnly => SandboxMode::ReadOnly,
            SandboxArg::FullAccess => SandboxMode::FullAccess,
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run one prompt headless and print the result (for scripts and CI).
    Exec(ExecArgs),
    /// List recent sessions: id, time, directory, first prompt, outcome.
    Sessions {
        /// How many to list.
        #[arg(long, short = 'n', default_value_t = 20)]
        limit: usize,
    },
    /// Continue session ID interactively.
    Resume {
        /// The session's id (see `keel sessions`).
        id: String,
    },
    /// List the sub-agents (.keel/agents, .claude/agents, $KEEL_HOME/agents).
    Agents,
    /// Run sub-agent NAME on TASK headless and print its answer.
    Agent {
        /// The agent's name (see `keel agents`).
        name: String,
        /// What it should do.
        task: String,
    },
    /// List the teams (.keel/teams, $KEEL_HOME/teams).
    Teams,
    /// Run team NAME's pipeline on TASK headless and print the result.
    Team {
        /// The team's name (see `keel teams`).
        name: String,
        /// The request.
        task: String,
    },
    /// List the skills (.keel/skills, .claude/skills, $KEEL_HOME/skills), or show one.
    Skills {
        /// A skill to show: its description, file and instructions.
        name: Option<String>,
    },
    /// Trust the project in DIR (default: here): its configuration may then grant powers
    /// (approvals, sandbox, hooks, runners, providers), as long as it stays as it is now.
    Trust {
        /// The project's directory (its repository root, or where its .keel/ is).
        dir: Option<PathBuf>,
    },
    /// Stop trusting the project in DIR (default: here).
    Untrust {
        /// The project's directory.
        dir: Option<PathBuf>,
    },
    /// List the background tasks (id, status, age, runner, workdir, task), or act on one.
    Tasks {
        /// What to do with a task.
        #[command(subcommand)]
        action: Option<TasksAction>,
    },
    /// List this workspace's snapshots (keel takes one before every call that may change
    /// files), or rewind the workspace to snapshot ID (its number in the list or its id).
    Rewind {
        /// The snapshot: its number in the list (`3`, `#3`) or its id (4 or more hex digits).
        id: Option<String>,
        /// Also cut the conversation of the session that took it back to where that call's
        /// turn began.
        #[arg(long)]
        conversation: bool,
    },
    /// Print the shell completion script for SHELL on stdout.
    ///
    /// E.g. `keel completions bash > ~/.local/share/bash-completion/completions/keel`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print keel's manual page (roff) on stdout, or write every command's into a directory.
    ///
    /// E.g. `keel man > ~/.local/share/man/man1/keel.1`, or `keel man --dir
    /// ~/.local/share/man/man1` for keel.1 and the keel-exec.1, keel-tasks.1, ... it refers to.
    Man {
        /// Write keel.1 and a page per subcommand (keel-exec.1, ...) into DIR instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Supervise background task ID (keel starts this itself).
    #[command(hide = true)]
    TaskRun {
        /// The task's id.
        id: String,
    },
}

/// `keel tasks` actions.
#[derive(Debug, Subcommand)]
pub(crate) enum TasksAction {
    /// Every field of task ID and the end of its output.
    Show {
        /// The task's id.
        id: String,
    },
    /// Task ID's whole log.
    Logs {
        /// The task's id.
        id: String,
        /// Keep printing what is added until the task ends.
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Cancel task ID: its process group is killed.
    Cancel {
        /// The task's id.
        id: String,
    },
}

/// `keel exec`.
#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// The prompt; `-` (or nothing, with a pipe on stdin) reads it from stdin.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// How to print the run: the final text, one JSON result object, or one JSON object per
    /// line as it happens.
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub output_format: OutputFormat,
}

/// `--output-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// The final answer on stdout; progress on stderr.
    Text,
    /// One result object on stdout (Claude Code's `--output-format json` shape).
    Json,
    /// One object per line: init, each message, the result.
    StreamJson,
}
