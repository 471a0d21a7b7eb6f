//! keel as `claude -p`: Claude Code's headless flags on the top-level command, so a script,
//! a CI job or a program on the Claude Agent SDKs (which run the binary with no subcommand)
//! can switch to keel by changing one path.
//!
//! The flags are taken when the command line asks for Claude Code's print mode (`-p`,
//! `--print`, `--output-format`, `--input-format` before any keel subcommand); keel's own
//! flags (`--provider`, `-C`, `--sandbox`, …) are taken beside them. A flag keel cannot honour
//! is refused in one line, never ignored.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::cli::{Options, OutputFormat};
use crate::error::CliError;
use crate::exec::{Headless, read_prompt, run_prompt};
use keel_config::Extras;
use keel_config::{ClaudeFiles, SettingSources};
use keel_config::{LiveMode, PermissionMode};

/// keel's subcommands: a command line naming one before any print-mode flag is keel's own.
/// A list rather than clap's (building clap's command costs start-up time); a test keeps it
/// equal to clap's.
const SUBCOMMANDS: &[&str] = &[
    "exec",
    "sessions",
    "resume",
    "agents",
    "agent",
    "teams",
    "team",
    "skills",
    "trust",
    "untrust",
    "tasks",
    "rewind",
    "mcp",
    "acp",
    "config",
    "completions",
    "man",
    "task-run",
    "mcp-server",
    "help",
];

/// Whether `args` (without the program's name) ask for Claude Code's print mode: `-p`,
/// `--print`, `--output-format` or `--input-format` before any keel subcommand.
pub(crate) fn wanted(args: &[OsString]) -> bool {
    for arg in args {
        let Some(arg) = arg.to_str() else { continue };
        if SUBCOMMANDS.contains(&arg) {
            return false;
        }
        let flag = arg.split_once('=').map_or(arg, |(flag, _)| flag);
        if matches!(
            flag,
            "-p" | "--print" | "--output-format" | "--input-format"
        ) {
            return true;
        }
    }
    false
}

/// How prompts arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum InputFormat {
    /// The prompt argument (and what is piped on stdin).
    Text,
    /// User messages and control requests as JSON lines on stdin (the Claude Agent SDKs).
    StreamJson,
}

/// Claude Code's print-mode command line, with keel's own flags beside it.
#[derive(Debug, Parser)]
#[command(
    name = "keel",
    version,
    about = "keel in Claude Code's print mode (`claude -p`): one prompt, or the Claude Agent \
             SDKs' stream-json protocol, headless."
)]
pub(crate) struct ClaudeArgs {
    /// The prompt (what is piped on stdin comes before it).
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// Print the answer and exit (print mode; implied by the other print-mode flags).
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// text, json (one result object) or stream-json (one JSON object per line).
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub output_format: OutputFormat,

    /// text, or stream-json (user messages and control requests as JSON lines on stdin).
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub input_format: InputFormat,

    /// Accepted for stream-json, which Claude Code requires it with (keel prints every line
    /// anyway).
    #[arg(long)]
    pub verbose: bool,

    /// With stream-json: also the model's reply as it streams (`stream_event` lines).
    #[arg(long)]
    pub include_partial_messages: bool,

    /// Replace keel's system prompt (an empty one keeps keel's: the SDKs pass "" when the
    /// program gave none).
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,

    /// Replace keel's system prompt with FILE's text.
    #[arg(long, value_name = "FILE", conflicts_with = "system_prompt")]
    pub system_prompt_file: Option<PathBuf>,

    /// Add TEXT at the end of the system prompt.
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Option<String>,

    /// Calls that run without asking, in Claude Code's rule syntax (`Bash(npm test:*)`,
    /// `Read`, `Edit(src/**)`, `mcp__server__tool`) or keel's; comma or space separated in
    /// one value (a comma or space inside parentheses is the pattern's); repeatable.
    #[arg(
        long = "allowedTools",
        visible_alias = "allowed-tools",
        value_name = "RULES"
    )]
    pub allowed_tools: Vec<String>,

    /// Calls that never run, in the same syntax.
    #[arg(
        long = "disallowedTools",
        visible_alias = "disallowed-tools",
        value_name = "RULES"
    )]
    pub disallowed_tools: Vec<String>,

    /// default, acceptEdits, plan, bypassPermissions or dontAsk.
    #[arg(long, value_enum, value_name = "MODE")]
    pub permission_mode: Option<PermissionMode>,

    /// Every call runs without asking (bypassPermissions).
    #[arg(long)]
    pub dangerously_skip_permissions: bool,

    /// Lets the program switch to bypassPermissions later (accepted; keel lets it anyway).
    #[arg(long)]
    pub allow_dangerously_skip_permissions: bool,

    /// Who is asked about gated calls: `stdio` (the program, with stream-json input).
    #[arg(long, value_name = "TOOL")]
    pub permission_prompt_tool: Option<String>,

    /// The id of the new session (a UUID).
    #[arg(long, value_name = "UUID")]
    pub session_id: Option<String>,

    /// Which of Claude Code's settings files to read: user (~/.claude/settings.json), project
    /// (.claude/settings.json), local (.claude/settings.local.json), comma separated; empty
    /// reads none. keel's own config files are read whatever this says.
    #[arg(long, value_name = "SOURCES")]
    pub setting_sources: Option<String>,

    /// The most one run may spend on model calls, in USD (the model's price must be known).
    #[arg(long, value_name = "USD", value_parser = positive_usd)]
    pub max_budget_usd: Option<f64>,

    /// The model to go on with when --model keeps failing (overloaded, server errors).
    #[arg(long, value_name = "MODEL")]
    pub fallback_model: Option<String>,

    /// Only the MCP servers --mcp-config names, not the configured ones.
    #[arg(long)]
    pub strict_mcp_config: bool,

    /// Sub-agents as JSON: `{"reviewer": {"description": "…", "prompt": "…", "tools":
    /// ["Read", "Grep"], "model": "haiku"}}`, beside the project's and the user's.
    #[arg(long, value_name = "JSON")]
    pub agents: Option<String>,

    /// With --resume or --continue: a new session that starts with that one's history.
    #[arg(long)]
    pub fork_session: bool,

    /// A Claude Code settings file, or its JSON text, read after every other settings file
    /// (its values win).
    #[arg(long, value_name = "FILE|JSON")]
    pub settings: Option<String>,

    /// keel's own flags.
    #[command(flatten)]
    pub options: Options,
}

/// `--max-budget-usd`'s value: a positive number of dollars.
fn positive_usd(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(format!(
            "{text:?} is not a positive amount of USD, e.g. 0.50"
        )),
    }
}

/// A flag keel cannot honour, in one line.
fn refused(flag: &str, why: &str) -> CliError {
    CliError::Usage(format!("{flag}: {why}"))
}

impl ClaudeArgs {
    /// The refusal for the first flag keel cannot honour, if any.
    fn check(&self) -> Result<(), CliError> {
        if self.fork_session && self.options.resume.is_none() && !self.options.continue_latest {
            return Err(refused(
                "--fork-session",
                "needs the session to fork: --resume ID or --continue",
            ));
        }
        // `--tools` is keel's own flag (in `options`): here it takes Claude Code's `default`
        // (keel's choice: every tool, or the lean ones for a small window) and `lean`.
        if let Some(tools) = &self.options.tools
            && tools != "default"
            && tools != "lean"
        {
            return Err(refused(
                "--tools",
                "keel offers its whole tool set (`default`) or the lean one for small models \
                 (`lean`); narrow it with --disallowedTools",
            ));
        }
        if let Some(sources) = &self.setting_sources {
            SettingSources::parse(sources).map_err(|why| refused("--setting-sources", &why))?;
        }
        match self.permission_prompt_tool.as_deref() {
            None => {}
            Some("stdio") if self.input_format == InputFormat::StreamJson => {}
            Some("stdio") => {
                return Err(refused(
                    "--permission-prompt-tool stdio",
                    "needs --input-format stream-json (the program answers on stdin)",
                ));
            }
            Some(_) => {
                return Err(refused(
                    "--permission-prompt-tool",
                    "keel asks only over stdio (`--permission-prompt-tool stdio`)",
                ));
            }
        }
        if self.include_partial_messages && self.output_format != OutputFormat::StreamJson {
            return Err(refused(
                "--include-partial-messages",
                "needs --output-format stream-json",
            ));
        }
        if self.input_format == InputFormat::StreamJson
            && self.output_format != OutputFormat::StreamJson
        {
            return Err(refused(
                "--input-format stream-json",
                "needs --output-format stream-json",
            ));
        }
        Ok(())
    }

    /// The approval mode the flags choose, if they choose one.
    pub(crate) fn mode(&self) -> Option<LiveMode> {
        if self.dangerously_skip_permissions {
            return Some(LiveMode::Allow);
        }
        self.permission_mode.map(PermissionMode::live)
    }

    /// What the flags add to the agent.
    pub(crate) fn extras(&self) -> Result<Extras, CliError> {
        let system_prompt = match (&self.system_prompt, &self.system_prompt_file) {
            (_, Some(file)) => Some(std::fs::read_to_string(file).map_err(|err| {
                CliError::Usage(format!("--system-prompt-file {}: {err}", file.display()))
            })?),
            (Some(text), None) if !text.is_empty() => Some(text.clone()),
            _ => None,
        };
        if let Some(id) = &self.session_id {
            keel::engine::validate_id(id)
                .map_err(|err| CliError::Usage(format!("--session-id: {err}")))?;
        }
        let mut extras = Extras::default();
        extras.system_prompt = system_prompt;
        extras
            .append_system_prompt
            .clone_from(&self.append_system_prompt);
        extras.allow = rules(&self.allowed_tools);
        extras.deny = rules(&self.disallowed_tools);
        extras.session_id.clone_from(&self.session_id);
        extras.max_budget_usd = self.max_budget_usd;
        extras.fork = self.fork_session;
        extras.fallback_model.clone_from(&self.fallback_model);
        extras.strict_mcp = self.strict_mcp_config;
        if let Some(text) = &self.agents {
            let json = serde_json::from_str(text)
                .map_err(|err| CliError::Usage(format!("--agents: not valid JSON: {err}")))?;
            extras.agents = keel_config::inline_agents(&json, "--agents")?;
        }
        Ok(extras)
    }
}

/// The rules of `--allowedTools` / `--disallowedTools` values (comma or space separated), as
/// written: keel's permission rules read Claude Code's syntax (`Bash(npm test:*)`, `Edit`)
/// themselves.
pub(crate) fn rules(given: &[String]) -> Vec<String> {
    given
        .iter()
        .flat_map(|list| split_rules(list))
        .map(|rule| rule.trim().to_owned())
        .collect()
}

/// The rules of one flag value: split at commas and spaces outside parentheses.
fn split_rules(list: &str) -> Vec<String> {
    let mut rules = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in list.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' | ' ' if depth == 0 => {
                if !current.trim().is_empty() {
                    rules.push(std::mem::take(&mut current));
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        rules.push(current);
    }
    rules
}

/// Takes the program's in-process servers (`{"type": "sdk"}`) out of `--mcp-config`'s inline
/// JSON values: their names. The SDKs pass them so; keel reaches them through the program.
fn take_program_servers(values: &mut Vec<String>) -> Result<Vec<String>, CliError> {
    let mut names = Vec::new();
    let mut kept = Vec::new();
    for value in values.drain(..) {
        if !value.trim_start().starts_with('{') {
            kept.push(value);
            continue;
        }
        let mut json: serde_json::Value = serde_json::from_str(&value)
            .map_err(|err| CliError::Usage(format!("--mcp-config: not valid JSON: {err}")))?;
        if let Some(servers) = json
            .get_mut("mcpServers")
            .and_then(serde_json::Value::as_object_mut)
        {
            let sdk: Vec<String> = servers
                .iter()
                .filter(|(_, server)| server["type"] == "sdk")
                .map(|(name, _)| name.clone())
                .collect();
            for name in sdk {
                servers.remove(&name);
                names.push(name);
            }
            if servers.is_empty() {
                continue;
            }
        }
        kept.push(json.to_string());
    }
    *values = kept;
    Ok(names)
}

/// Runs keel in print mode as `args` say; the exit code.
pub(crate) async fn run(mut args: ClaudeArgs) -> Result<u8, CliError> {
    args.check()?;
    if args.options.tools.as_deref() == Some("default") {
        args.options.tools = None;
    }
    args.options.claude_settings = ClaudeFiles {
        settings: args.settings.clone(),
        sources: match &args.setting_sources {
            Some(list) => {
                SettingSources::parse(list).map_err(|why| refused("--setting-sources", &why))?
            }
            None => SettingSources::ALL,
        },
    };
    let headless = Headless {
        extras: args.extras()?,
        mode: args.mode(),
        partial: args.include_partial_messages,
    };
    match args.input_format {
        InputFormat::Text => {
            let prompt = read_prompt(args.prompt)?;
            run_prompt(&args.options, prompt, args.output_format, headless).await
        }
        InputFormat::StreamJson => {
            if args.prompt.is_some() {
                return Err(refused(
                    "a prompt argument",
                    "with --input-format stream-json the prompts come on stdin",
                ));
            }
            let asks_program = args.permission_prompt_tool.as_deref() == Some("stdio");
            let mut options = args.options;
            let program_servers = take_program_servers(&mut options.mcp_config)?;
            crate::sdk_session::run(&options, headless, asks_program, program_servers).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_subcommand_list_is_clap_s() {
        use clap::CommandFactory;
        let mut names: Vec<String> = crate::cli::Cli::command()
            .get_subcommands()
            .map(|command| command.get_name().to_owned())
            .collect();
        names.push("help".to_owned());
        names.sort();
        let mut listed: Vec<&str> = SUBCOMMANDS.to_vec();
        listed.sort_unstable();
        assert_eq!(names, listed);
    }

    #[test]
    fn print_mode_is_asked_for_before_any_subcommand() {
        assert!(wanted(&args(&["-p", "hi"])));
        assert!(wanted(&args(&[
            "--output-format",
            "stream-json",
            "--verbose"
        ])));
        assert!(wanted(&args(&[
            "--model",
            "x",
            "--input-format=stream-json"
        ])));
        assert!(!wanted(&args(&["exec", "--output-format", "json", "hi"])));
        assert!(!wanted(&args(&["--model", "x"])));
        assert!(!wanted(&args(&[])));
    }

    #[test]
    fn the_program_s_servers_are_taken_out_of_mcp_config() {
        let mut values = vec![
            r#"{"mcpServers": {"vault": {"type": "sdk", "name": "vault"},
                               "files": {"command": "npx", "args": []}}}"#
                .to_owned(),
            r#"{"mcpServers": {"only": {"type": "sdk", "name": "only"}}}"#.to_owned(),
            "servers.json".to_owned(),
        ];
        let names = take_program_servers(&mut values).unwrap();
        assert_eq!(names, ["vault", "only"]);
        assert_eq!(values.len(), 2);
        assert!(values[0].contains("files") && !values[0].contains("vault"));
        assert_eq!(values[1], "servers.json");
    }

    #[test]
    fn flag_values_split_into_rules_as_written() {
        assert_eq!(
            rules(&[
                "Bash(npm test:*),Read".into(),
                "Edit(src/**) mcp__gh__list".into()
            ]),
            ["Bash(npm test:*)", "Read", "Edit(src/**)", "mcp__gh__list"]
        );
        assert_eq!(
            rules(&["Bash(echo a, b)".into()]),
            ["Bash(echo a, b)"],
            "a comma inside parentheses is part of the pattern"
        );
    }
}
