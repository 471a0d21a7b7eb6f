//! Custom slash commands, as Claude Code users write them: Markdown prompts in the project's
//! `.claude/commands/` and the user's `$KEEL_HOME/commands/` and `~/.claude/commands/`, typed
//! as `/name args` in the REPL or given as `keel -p "/name args"` (`keel exec` too).
//!
//! A command's text is a prompt, nothing more: its `` !`cmd` `` lines are never run, and its
//! `allowed-tools` grant nothing (see `keel::agents::commands`).

use keel::agents::commands::SlashCommands;

use keel_config::Settings;

/// The custom commands `setup`'s project and user have, and warnings about files that could
/// not be read.
pub(crate) fn load(setup: &Settings) -> (SlashCommands, Vec<String>) {
    let root = keel::agents::project_root(&setup.cwd);
    let claude = keel::agents::claude_user_dir();
    SlashCommands::load(&SlashCommands::standard_dirs(
        &root,
        Some(&setup.keel_home),
        claude.as_deref(),
    ))
}

/// The prompt `line` stands for when it calls one of `commands` (`/name args`), else `None`.
pub(crate) fn expand(commands: &SlashCommands, line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    commands
        .get(name)
        .map(|command| command.expand(args.trim()))
}
