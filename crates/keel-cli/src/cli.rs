//! The command line: flags and subcommands.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use keel::sandbox::SandboxMode;

use keel_config::{ApprovalMode, SessionChoice, Settings, Surface};

use crate::error::CliError;

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
  ANTHROPIC_MODEL, ANTHROPIC_SMALL_FAST_MODEL  the models, as Claude Code reads them
  ANTHROPIC_AUTH_TOKEN                  a gateway's bearer token (instead of the API key)
  ANTHROPIC_CUSTOM_HEADERS              more request headers, one `Name: Value` a line
  KEEL_HOME                             config, sessions and history (default ~/.keel)
  KEEL_LOG                              log to $KEEL_HOME/logs/keel.log: a filter such as
                                        debug, or keel_provider=trace (see --debug)

Without --provider: Anthropic if ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is set, else an
OpenAI-compatible server if OPENAI_BASE_URL or OPENAI_API_KEY is set.

Config: $KEEL_HOME/config.toml and ~/.claude/settings.json, then the project's
.claude/settings.json, .claude/settings.local.json and .keel/config.toml (searched up to the
repository root). A project's config may only tighten (deny and ask rules, lower limits, the
model) until you trust it with `keel trust`; flags win over all. `keel config` shows each
value and where it came from.

Exit codes: 0 success; 1 the run failed (iteration limit, provider failure, refusal);
2 usage or configuration error."
)]
pub(crate) struct Cli {
    /// What to do; without one, an interactive session in the working directory.
    #[command(subcommand)]
    command: Option<Command>,

    /// Flags for every command.
    #[command(flatten)]
    options: Options,
}

impl Cli {
    /// The subcommand, and the flags given before it joined with those given after it
    /// (see [`Options::then`]).
    pub(crate) fn into_parts(self) -> Result<(Option<Command>, Options), clap::Error> {
        let mut command = self.command;
        let mut options = self.options;
        if let Some(command) = &mut command {
            for later in command.take_options() {
                options = options.then(later)?;
            }
        }
        Ok((command, options))
    }
}

// The flags every command takes. (A doc comment on this struct or on `ExecArgs` would become
// the about text of the deferred subcommands that flatten them.)
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct Options {
    /// Work in DIR instead of the current directory.
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// The model provider: anthropic, openai (or any OpenAI-compatible server; OpenAI's
    /// Codex models go to its Responses API), openai-responses (the Responses API for every
    /// model), or a name defined as [providers.NAME] in the config.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,

    /// The model (default: claude-sonnet-4-5 for Anthropic, gpt-4.1 for OpenAI).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// The provider's base URL, e.g. http://localhost:11434/v1 for a local server.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// The most model calls in one run [default: 25] (also --max-turns, Claude Code's name).
    #[arg(long, visible_alias = "max-turns", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iterations: Option<u32>,

    /// Also let the file tools read below PATH (outside the working directory); repeatable.
    #[arg(long = "allow-read", value_name = "PATH")]
    pub allow_read: Vec<PathBuf>,

    /// Who approves destructive tool calls (commits, deletions, ...) [default: ask in the
    /// interactive session, deny in exec].
    #[arg(long, value_enum, value_name = "MODE")]
    pub approvals: Option<ApprovalMode>,

    /// Allow every tool call without asking (same as --approvals allow).
    #[arg(short = 'y', long = "yes", conflicts_with = "approvals")]
    pub yes: bool,

    /// Where commands may write [default: workspace-write].
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<SandboxArg>,

    /// Let commands use the network (off by default under workspace-write and read-only;
    /// keel's own model calls are never affected).
    #[arg(long)]
    pub network: bool,

    /// Also let commands write below DIR (the file tools may read it); repeatable.
    #[arg(long = "add-dir", value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,

    /// Also start the MCP servers of FILE, or of inline JSON, in Claude Code's `.mcp.json`
    /// format (`{"mcpServers": {"NAME": {...}}}`); repeatable; a server named again replaces
    /// the configured one.
    #[arg(long = "mcp-config", value_name = "FILE|JSON")]
    pub mcp_config: Vec<String>,

    /// Trust the project's configuration for this run (approvals, sandbox, hooks, runners,
    /// providers it sets apply), without recording it; for CI.
    #[arg(long)]
    pub trust_project: bool,

    /// Continue the newest session started in this directory.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_latest: bool,

    /// Continue session ID (see `keel sessions`).
    #[arg(short = 'r', long, value_name = "ID")]
    pub resume: Option<String>,

    /// Leave out the delegation tools (code, spawn_agent, run_team, use_skill, the task tools)
    /// and the skills index.
    #[arg(long)]
    pub no_delegation: bool,

    /// The tool set: full (every tool) or lean (six tools under short descriptions, a short
    /// prompt, no delegation: for small local models) [default: lean when the model's context
    /// window is 32K tokens or less, else full]. `keel mcp list --tools`: also list each
    /// server's tools.
    // The value is optional only for `keel mcp list --tools`; anywhere else a missing one is
    // refused (see setup::tool_profile).
    #[arg(long, value_name = "PROFILE", num_args = 0..=1, default_missing_value = "")]
    pub tools: Option<String>,

    /// In exec: do not wait for background tasks still running when the model ends its turn.
    #[arg(long)]
    pub no_wait_tasks: bool,

    /// Log keel's debug messages to $KEEL_HOME/logs/keel.log (KEEL_LOG, if set, says what
    /// to log instead).
    #[arg(long)]
    pub debug: bool,

    /// Claude Code's settings files to read, as `keel -p`'s `--settings` and
    /// `--setting-sources` say (keel's own command line reads them all).
    #[arg(skip)]
    pub claude_settings: keel_config::ClaudeFiles,
}

impl Options {
    /// The flags keel-config reads, as it takes them.
    pub(crate) fn overrides(&self) -> keel_config::Overrides {
        let mut overrides = keel_config::Overrides::default();
        overrides.cwd.clone_from(&self.cwd);
        overrides.provider.clone_from(&self.provider);
        overrides.model.clone_from(&self.model);
        overrides.base_url.clone_from(&self.base_url);
        overrides.max_iterations = self.max_iterations;
        overrides.allow_read.clone_from(&self.allow_read);
        overrides.approvals = self.approvals;
        overrides.yes = self.yes;
        overrides.sandbox = self.sandbox.map(SandboxMode::from);
        overrides.network = self.network;
        overrides.add_dir.clone_from(&self.add_dir);
        overrides.mcp_config.clone_from(&self.mcp_config);
        overrides.trust_project = self.trust_project;
        overrides.no_delegation = self.no_delegation;
        overrides.tools.clone_from(&self.tools);
        overrides.claude_files = self.claude_settings.clone();
        overrides
    }

    /// The settings the flags, environment and config files give for `surface`; the log
    /// scrubs the values of the variables the providers' secrets come from.
    pub(crate) fn settings(
        &self,
        surface: Surface,
        choice: &SessionChoice,
    ) -> Result<Settings, CliError> {
        let settings = Settings::resolve(&self.overrides(), surface, choice)?;
        for var in &settings.secret_vars {
            crate::logging::redact_var(var);
        }
        Ok(settings)
    }

    /// Which session the flags ask for.
    pub(crate) fn session_choice(&self) -> SessionChoice {
        match (&self.resume, self.continue_latest) {
            (Some(id), _) => SessionChoice::Resume(id.clone()),
            (None, true) => SessionChoice::Latest,
            (None, false) => SessionChoice::New,
        }
    }

    /// These flags (given before a subcommand) with `later`'s (given after it): a value given
    /// in both is the later one, lists are joined, a switch given in either is on. Flags that
    /// clap keeps apart within one set (`--yes` and `--approvals`, `--continue` and
    /// `--resume`) are kept apart across the two.
    fn then(self, later: Options) -> Result<Options, clap::Error> {
        let joined = Options {
            cwd: later.cwd.or(self.cwd),
            provider: later.provider.or(self.provider),
            model: later.model.or(self.model),
            base_url: later.base_url.or(self.base_url),
            max_iterations: later.max_iterations.or(self.max_iterations),
            allow_read: [self.allow_read, later.allow_read].concat(),
            approvals: later.approvals.or(self.approvals),
            yes: self.yes || later.yes,
            sandbox: later.sandbox.or(self.sandbox),
            network: self.network || later.network,
            add_dir: [self.add_dir, later.add_dir].concat(),
            mcp_config: [self.mcp_config, later.mcp_config].concat(),
            trust_project: self.trust_project || later.trust_project,
            continue_latest: self.continue_latest || later.continue_latest,
            resume: later.resume.or(self.resume),
            no_delegation: self.no_delegation || later.no_delegation,
            tools: later.tools.or(self.tools),
            no_wait_tasks: self.no_wait_tasks || later.no_wait_tasks,
            debug: self.debug || later.debug,
            claude_settings: self.claude_settings,
        };
        let conflict = |one: &str, other: &str| {
            clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                format!("the argument '{one}' cannot be used with '{other}'\n"),
            )
        };
        if joined.yes && joined.approvals.is_some() {
            return Err(conflict("--yes", "--approvals <MODE>"));
        }
        if joined.continue_latest && joined.resume.is_some() {
            return Err(conflict("--continue", "--resume <ID>"));
        }
        Ok(joined)
    }
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

/// The subcommands. Each takes the flags of [`Options`] too, after its name as before it:
/// they are flattened into each rather than `global`, because clap copies a global flag into
/// every subcommand at every start (17 flags into 19 subcommands: about 0.35 ms of keel's
/// start-up, interleaved medians of benches/startup.sh) while a deferred subcommand is built
/// only when it is the one given. [`Cli::into_parts`] joins the two sets.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Command {
    /// Run one prompt headless and print the result (for scripts and CI).
    Exec(ExecArgs),
    /// List recent sessions: id, time, directory, first prompt, outcome.
    Sessions {
        /// How many to list.
        #[arg(long, short = 'n', default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        options: Options,
    },
    /// Continue session ID interactively.
    Resume {
        /// The session's id (see `keel sessions`).
        id: String,
        #[command(flatten)]
        options: Options,
    },
    /// List the sub-agents (.keel/agents, .claude/agents, $KEEL_HOME/agents).
    Agents {
        #[command(flatten)]
        options: Options,
    },
    /// Run sub-agent NAME on TASK headless and print its answer.
    Agent {
        /// The agent's name (see `keel agents`).
        name: String,
        /// What it should do.
        task: String,
        #[command(flatten)]
        options: Options,
    },
    /// List the teams (.keel/teams, $KEEL_HOME/teams).
    Teams {
        #[command(flatten)]
        options: Options,
    },
    /// Run team NAME's pipeline on TASK headless and print the result.
    Team {
        /// The team's name (see `keel teams`).
        name: String,
        /// The request.
        task: String,
        #[command(flatten)]
        options: Options,
    },
    /// List the skills (.keel/skills, .claude/skills, $KEEL_HOME/skills), or show one.
    Skills {
        /// A skill to show: its description, file and instructions.
        name: Option<String>,
        #[command(flatten)]
        options: Options,
    },
    /// Trust the project in DIR (default: here): its configuration may then grant powers
    /// (approvals, sandbox, hooks, runners, providers), as long as it stays as it is now.
    Trust {
        /// The project's directory (its repository root, or where its .keel/ is); without it,
        /// -C's directory; a relative one is read from -C's directory.
        dir: Option<PathBuf>,
        #[command(flatten)]
        options: Options,
    },
    /// Stop trusting the project in DIR (default: here).
    Untrust {
        /// The project's directory; without it, -C's directory; a relative one is read from
        /// -C's directory.
        dir: Option<PathBuf>,
        #[command(flatten)]
        options: Options,
    },
    /// List the background tasks (id, status, age, runner, workdir, task), or act on one.
    Tasks {
        /// What to do with a task.
        #[command(subcommand)]
        action: Option<TasksAction>,
        #[command(flatten)]
        options: Options,
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
        #[command(flatten)]
        options: Options,
    },
    /// The MCP servers keel takes tools from: `keel mcp list` says which answer, with what
    /// tools.
    Mcp {
        /// What to do.
        #[command(subcommand)]
        action: McpAction,
        #[command(flatten)]
        options: Options,
    },
    /// Speak the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim,
    /// Emacs) and acpx.
    Acp {
        #[command(flatten)]
        options: Options,
    },
    /// Print every effective setting and where it came from: a flag, a variable, keel's or
    /// Claude Code's settings files, or the default.
    Config {
        #[command(flatten)]
        options: Options,
    },
    /// Print the shell completion script for SHELL on stdout.
    ///
    /// E.g. `keel completions bash > ~/.local/share/bash-completion/completions/keel`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
        #[command(flatten)]
        options: Options,
    },
    /// Print keel's manual page (roff) on stdout, or write every command's into a directory.
    ///
    /// E.g. `keel man > ~/.local/share/man/man1/keel.1`, or `keel man --dir
    /// ~/.local/share/man/man1` for keel.1 and the keel-exec.1, keel-tasks.1, ... it refers to.
    Man {
        /// Write keel.1 and a page per subcommand (keel-exec.1, ...) into DIR instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        #[command(flatten)]
        options: Options,
    },
    /// Serve keel's `code` and background-task tools to an MCP host over stdio (or
    /// streamable HTTP with --listen).
    ///
    /// E.g. `claude mcp add keel -- keel mcp-server --root ~/src/app`. The host's calls run
    /// as `keel exec`'s would: the same sandbox, rules, hooks and approvals.
    McpServer(McpServerArgs),
    /// Supervise background task ID (keel starts this itself).
    #[command(hide = true)]
    TaskRun {
        /// The task's id.
        id: String,
        #[command(flatten)]
        options: Options,
    },
}

// `keel tasks` actions. (A doc comment here would become `keel tasks`'s about text, the
// subcommand being deferred.)
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum TasksAction {
    /// Every field of task ID and the end of its output.
    Show {
        /// The task's id.
        id: String,
        #[command(flatten)]
        options: Options,
    },
    /// Task ID's whole log.
    Logs {
        /// The task's id.
        id: String,
        /// Keep printing what is added until the task ends.
        #[arg(short = 'f', long)]
        follow: bool,
        #[command(flatten)]
        options: Options,
    },
    /// Cancel task ID: its process group is killed.
    Cancel {
        /// The task's id.
        id: String,
        #[command(flatten)]
        options: Options,
    },
}

// `keel mcp` actions.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum McpAction {
    /// Each configured MCP server: connected or why not, how many tools, how it is reached.
    // `--tools` (keel's tool set flag, without a value here): also list each server's tools,
    // by the names the model sees.
    List {
        #[command(flatten)]
        options: Options,
    },
}

// `keel mcp-server`'s own arguments.
#[derive(Debug, Args)]
pub(crate) struct McpServerArgs {
    /// A directory the host's calls may work in (`cwd` of code, `workdir` of start_task);
    /// repeatable [default: the working directory]. A host's roots can only narrow these.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,

    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio, e.g. 127.0.0.1:8765; every
    /// request must carry `Authorization: Bearer <token>` (see --token-env).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,

    /// The variable holding the bearer token for --listen [default: KEEL_MCP_TOKEN].
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,

    /// Flags for every command (also taken before `mcp-server`).
    #[command(flatten)]
    pub options: Options,
}

// `keel exec`'s own arguments.
#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// The prompt; `-` (or nothing, with a pipe on stdin) reads it from stdin.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// How to print the run: the final text, one JSON result object, or one JSON object per
    /// line as it happens.
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub output_format: OutputFormat,

    /// With `--output-format stream-json`: also print the model's replies as they stream
    /// (`stream_event` lines carrying the Messages API's stream events).
    #[arg(long)]
    pub include_partial_messages: bool,

    /// Flags for every command (also taken before `exec`).
    #[command(flatten)]
    pub options: Options,
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

impl Command {
    /// The flags given after this subcommand's name (and its action's, for `tasks`), taken
    /// out of it in the order given.
    fn take_options(&mut self) -> Vec<Options> {
        let own = match self {
            Command::Exec(ExecArgs { options, .. })
            | Command::Sessions { options, .. }
            | Command::Resume { options, .. }
            | Command::Agents { options }
            | Command::Agent { options, .. }
            | Command::Teams { options }
            | Command::Team { options, .. }
            | Command::Skills { options, .. }
            | Command::Trust { options, .. }
            | Command::Untrust { options, .. }
            | Command::Tasks { options, .. }
            | Command::Mcp { options, .. }
            | Command::Acp { options }
            | Command::Config { options }
            | Command::Rewind { options, .. }
            | Command::Completions { options, .. }
            | Command::Man { options, .. }
            | Command::TaskRun { options, .. }
            | Command::McpServer(McpServerArgs { options, .. }) => std::mem::take(options),
        };
        let mut taken = vec![own];
        if let Command::Tasks {
            action: Some(action),
            ..
        } = self
        {
            let (TasksAction::Show { options, .. }
            | TasksAction::Logs { options, .. }
            | TasksAction::Cancel { options, .. }) = action;
            taken.push(std::mem::take(options));
        }
        if let Command::Mcp { action, .. } = self {
            let McpAction::List { options, .. } = action;
            taken.push(std::mem::take(options));
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn parts(args: &[&str]) -> (Option<Command>, Options) {
        Cli::try_parse_from(args)
            .and_then(Cli::into_parts)
            .unwrap_or_else(|err| panic!("{args:?}: {err}"))
    }

    #[test]
    fn flags_before_and_after_the_subcommand_are_joined_the_later_winning() {
        let (command, options) = parts(&[
            "keel",
            "--model",
            "before",
            "--allow-read",
            "/a",
            "--network",
            "exec",
            "--model",
            "after",
            "--allow-read",
            "/b",
            "--sandbox",
            "read-only",
            "hi",
        ]);
        assert_eq!(options.model.as_deref(), Some("after"));
        assert_eq!(
            options.allow_read,
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert!(options.network, "a switch given before stays on");
        assert_eq!(options.sandbox, Some(SandboxArg::ReadOnly));
        let Some(Command::Exec(args)) = command else {
            panic!("not exec: {command:?}")
        };
        assert_eq!(args.prompt.as_deref(), Some("hi"));
        // What was joined is not left in the subcommand for anyone to read instead.
        assert!(args.options.model.is_none() && args.options.allow_read.is_empty());
    }

    #[test]
    fn every_subcommand_takes_the_flags_after_its_name() {
        let cases: &[&[&str]] = &[
            &["keel", "exec", "hi", "-C", "/w"],
            &["keel", "sessions", "-C", "/w"],
            &["keel", "resume", "abc", "-C", "/w"],
            &["keel", "agents", "-C", "/w"],
            &["keel", "agent", "a", "t", "-C", "/w"],
            &["keel", "teams", "-C", "/w"],
            &["keel", "team", "a", "t", "-C", "/w"],
            &["keel", "skills", "-C", "/w"],
            &["keel", "trust", "-C", "/w"],
            &["keel", "untrust", "-C", "/w"],
            &["keel", "tasks", "-C", "/w"],
            &["keel", "tasks", "show", "t1", "-C", "/w"],
            &["keel", "tasks", "-C", "/w", "logs", "t1", "-f"],
            &["keel", "tasks", "cancel", "t1", "-C", "/w"],
            &["keel", "rewind", "-C", "/w"],
            &["keel", "completions", "bash", "-C", "/w"],
            &["keel", "man", "-C", "/w"],
            &["keel", "task-run", "t1", "-C", "/w"],
            &["keel", "mcp-server", "--root", "/r", "-C", "/w"],
            &["keel", "-C", "/w"],
        ];
        for args in cases {
            let (_, options) = parts(args);
            assert_eq!(options.cwd, Some(PathBuf::from("/w")), "{args:?}");
        }
    }

    #[test]
    fn the_tool_set_is_taken_before_or_after_the_subcommand() {
        let (_, options) = parts(&["keel", "--tools", "full", "exec", "--tools", "lean", "hi"]);
        assert_eq!(options.tools.as_deref(), Some("lean"));
        let (command, options) = parts(&["keel", "exec", "--tools", "lean", "hi"]);
        assert_eq!(options.tools.as_deref(), Some("lean"));
        let Some(Command::Exec(args)) = command else {
            panic!("not exec: {command:?}")
        };
        assert_eq!(
            args.prompt.as_deref(),
            Some("hi"),
            "the prompt is not the value"
        );
        // `keel mcp list --tools` takes no value: it lists each server's tools.
        let (_, options) = parts(&["keel", "mcp", "list", "--tools", "-C", "/w"]);
        assert_eq!(options.tools.as_deref(), Some(""));
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }
}
