//! Custom slash commands, as Claude Code defines them: a Markdown file whose body is a
//! prompt, run as `/name arguments`.
//!
//! ```markdown
//! ---
//! description: Review a pull request
//! argument-hint: <pr-number> [priority]
//! allowed-tools: Bash(gh pr view:*), Read
//! model: haiku
//! ---
//! Review PR #$1 with priority $2. Notes: $ARGUMENTS
//! ```
//!
//! Where they are found, first wins ([`SlashCommands::standard_dirs`]): the project's
//! `.keel/commands` and `.claude/commands`, then the user's `$KEEL_HOME/commands` and Claude
//! Code's `~/.claude/commands`. A project command overrides a user command of the same name
//! (Claude Code does not support such conflicts; keel takes the project's and warns).
//! Sub-folders give namespaces: `.claude/commands/frontend/component.md` is
//! `frontend:component`.
//!
//! The body is expanded by [`SlashCommand::expand`]: `$ARGUMENTS` is everything after the
//! name, `$1`, `$2`, ... the arguments one by one (split at spaces, quotes group); a body that
//! uses neither gets the arguments in an `ARGUMENTS:` line at its end, as Claude Code does.
//!
//! Nothing in a command file is run or read by this module. Claude Code runs a body's
//! `` !`command` `` before sending it; keel never does: a project's command file is the
//! repository's word, and running it would let a repository run commands unasked.
//! [`SlashCommand::expand`] turns each into the command in backticks followed by a note that it
//! was not run; [`SlashCommand::shell_commands`] lists them for a host that wants to offer
//! them to the person (a user's own commands, [`CommandOrigin::User`]). `@file` references are
//! left as text: the model reads the file with its tools, under its usual rules.
//!
//! A file or sub-folder reached through a symlink that leads out of its commands folder is
//! skipped with a warning, as agents and skills are.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::AgentsError;
use crate::frontmatter;
use crate::tool_names::NameList;

/// The deepest sub-folder searched (`a/b/c/name.md` is depth 3).
const MAX_DEPTH: usize = 6;
/// The most command files read from one folder tree.
const MAX_FILES: usize = 1000;
/// The largest command file read.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// The most characters of a description taken from the body's first line.
const DESCRIPTION_CHARS: usize = 200;
/// What replaces a body's `` !`command` ``, after the command.
const NOT_RUN: &str = "(not run: keel does not run the shell lines of command files)";

/// Whose a commands folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandOrigin {
    /// The project's (`.claude/commands`): the repository's word, not trusted to run
    /// anything.
    Project,
    /// The user's own (`$KEEL_HOME/commands`, `~/.claude/commands`).
    User,
}

/// A folder of command files and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandDir {
    /// The folder.
    pub path: PathBuf,
    /// Whose it is.
    pub origin: CommandOrigin,
}

/// One custom slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlashCommand {
    /// Its name, without the `/`: the file's stem, after its sub-folders' names and `:`
    /// (`frontend:component`).
    pub name: String,
    /// What it does (front matter `description`, else the body's first line).
    pub description: String,
    /// What arguments it takes, for completion (`argument-hint`).
    pub argument_hint: Option<String>,
    /// Claude Code's `allowed-tools`, as written (`Bash(git add:*)`, `Read`): what Claude Code
    /// lets the command use without asking. keel grants nothing by itself: a host may honour
    /// a user command's list, and a project command's only when the project is trusted.
    pub allowed_tools: Option<Vec<String>>,
    /// The model it asks for (`model`: an alias such as `haiku` or a model id), as written.
    pub model: Option<String>,
    /// The prompt, before expansion.
    pub body: String,
    /// The file.
    pub path: PathBuf,
    /// Whose it is.
    pub origin: CommandOrigin,
}

#[derive(Debug, Default, Deserialize)]
struct CommandFront {
    description: Option<String>,
    /// Claude Code's documentation writes `argument-hint: [pr-number] [priority]`, which YAML
    /// reads as a list (or not at all): any value is taken.
    #[serde(
        rename = "argument-hint",
        alias = "argument_hint",
        alias = "argumentHint"
    )]
    argument_hint: Option<serde_yaml_ng::Value>,
    #[serde(
        rename = "allowed-tools",
        alias = "allowed_tools",
        alias = "allowedTools"
    )]
    allowed_tools: Option<NameList>,
    model: Option<String>,
}

impl CommandFront {
    /// The front matter `yaml`, read as YAML, else (Claude Code's own reader is lenient:
    /// `argument-hint: [a] [b]` is not YAML) line by line as `key: value`.
    fn read(yaml: &str) -> Self {
        if let Ok(front) = serde_yaml_ng::from_str::<Self>(yaml) {
            return front;
        }
        let mut front = Self::default();
        for line in yaml.lines() {
            if line.starts_with(char::is_whitespace) {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = unquote(value.trim());
            if value.is_empty() {
                continue;
            }
            match key.trim() {
                "description" => front.description = Some(value.to_owned()),
                "argument-hint" | "argument_hint" | "argumentHint" => {
                    front.argument_hint = Some(serde_yaml_ng::Value::String(value.to_owned()));
                }
                "allowed-tools" | "allowed_tools" | "allowedTools" => {
                    front.allowed_tools = Some(NameList::Text(value.to_owned()));
                }
                "model" => front.model = Some(value.to_owned()),
                _ => {}
            }
        }
        front
    }
}

/// `value` without one pair of surrounding quotes.
fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

/// An `argument-hint` as text: a YAML list `[issue-number]` as Claude Code shows it.
fn hint_text(value: serde_yaml_ng::Value) -> Option<String> {
    use serde_yaml_ng::Value;
    let text = match value {
        Value::String(text) => text,
        Value::Sequence(items) => items
            .into_iter()
            .filter_map(|item| match item {
                Value::String(text) => Some(format!("[{text}]")),
                Value::Number(n) => Some(format!("[{n}]")),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" "),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    };
    let text = text.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

impl SlashCommand {
    /// Reads the command file `path`, named `name`.
    pub fn load(name: &str, path: &Path, origin: CommandOrigin) -> Result<Self, AgentsError> {
        let invalid = |reason: String| AgentsError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        let size = std::fs::metadata(path)
            .map_err(|err| AgentsError::io(path, err))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(invalid(format!(
                "the file is {size} bytes; a command file may have at most {MAX_FILE_BYTES}"
            )));
        }
        let bytes = std::fs::read(path).map_err(|err| AgentsError::io(path, err))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| invalid("the file is not UTF-8 text".to_owned()))?;
        let document = frontmatter::split(path, &text)?;
        let front = document
            .front
            .as_deref()
            .map(CommandFront::read)
            .unwrap_or_default();
        if document.body.is_empty() {
            return Err(invalid(
                "the body (the command's prompt) is empty: write what the command asks".into(),
            ));
        }
        let description = front
            .description
            .map(|d| d.trim().to_owned())
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| first_line(&document.body));
        let text_of =
            |value: Option<String>| value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        Ok(Self {
            name: name.to_owned(),
            description,
            argument_hint: front.argument_hint.and_then(hint_text),
            allowed_tools: front.allowed_tools.map(|list| list.names()),
            model: text_of(front.model),
            body: document.body,
            path: path.to_path_buf(),
            origin,
        })
    }

    /// The prompt for `/name args`: `$ARGUMENTS` is `args` (trimmed), `$1`, `$2`, ... its
    /// arguments one by one (split at spaces; `"..."` and `'...'` group; a missing one is
    /// empty); with neither in the body and `args` not empty, `ARGUMENTS: args` is added at
    /// the end. Each `` !`command` `` becomes `` `command` `` and a note that it was not run:
    /// nothing is ever run. Arguments are put in once, never expanded again.
    pub fn expand(&self, args: &str) -> String {
        let args = args.trim();
        let positional = split_args(args);
        let body = neutralise_shell(&self.body);
        let mut out = String::with_capacity(body.len() + args.len());
        let mut used = false;
        let mut rest = body.as_str();
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            if let Some(tail) = after.strip_prefix("ARGUMENTS") {
                out.push_str(args);
                used = true;
                rest = tail;
                continue;
            }
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            let index = after[..digits].parse::<usize>().ok().filter(|i| *i >= 1);
            match index {
                Some(index) => {
                    if let Some(arg) = positional.get(index - 1) {
                        out.push_str(arg);
                    }
                    used = true;
                    rest = &after[digits..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        if !used && !args.is_empty() {
            out.push_str("\n\nARGUMENTS: ");
            out.push_str(args);
        }
        out
    }

    /// The commands of the body's `` !`command` `` lines, which Claude Code runs before
    /// sending the prompt and keel never does. A host may offer to run those of a user's own
    /// command ([`CommandOrigin::User`]) under its approvals; a project's must not be run
    /// unasked.
    pub fn shell_commands(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut rest = self.body.as_str();
        while let Some(at) = rest.find("!`") {
            let after = &rest[at + 2..];
            match after.find('`') {
                Some(end) => {
                    found.push(after[..end].to_owned());
                    rest = &after[end + 1..];
                }
                None => break,
            }
        }
        found
    }
}

/// `body` with each `` !`command` `` as `` `command` `` and the note that it was not run.
fn neutralise_shell(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.find("!`") {
        let after = &rest[at + 2..];
        let Some(end) = after.find('`') else { break };
        out.push_str(&rest[..at]);
        out.push('`');
        out.push_str(&after[..end]);
        out.push_str("` ");
        out.push_str(NOT_RUN);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `args` split as a shell would at its simplest: at whitespace, `"..."` and `'...'` keeping
/// their spaces (the quotes dropped); an unclosed quote runs to the end.
fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in args.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                started = true;
            }
            None if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            None => {
                current.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(current);
    }
    out
}

/// The body's first non-empty line, without a heading's `#`s, cut to about 200 characters.
fn first_line(body: &str) -> String {
    let line = body
        .lines()
        .map(|line| line.trim().trim_start_matches('#').trim())
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    match line.char_indices().nth(DESCRIPTION_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// The custom slash commands a project and its user define, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlashCommands {
    /// Sorted by name; names unique.
    commands: Vec<SlashCommand>,
}

impl SlashCommands {
    /// Where commands are looked for, first wins: the project's `.keel/commands` and
    /// `.claude/commands` (those that resolve inside the project), then `<keel_home>/commands`
    /// and `<claude_home>/commands` (Claude Code's user folder, see
    /// [`claude_user_dir`](crate::claude_user_dir)).
    pub fn standard_dirs(
        project_root: &Path,
        keel_home: Option<&Path>,
        claude_home: Option<&Path>,
    ) -> Vec<CommandDir> {
        let project =
            frontmatter::project_dirs(project_root, &[".keel/commands", ".claude/commands"])
                .into_iter()
                .map(|path| CommandDir {
                    path,
                    origin: CommandOrigin::Project,
                });
        let user = [keel_home, claude_home]
            .into_iter()
            .flatten()
            .map(|home| CommandDir {
                path: home.join("commands"),
                origin: CommandOrigin::User,
            });
        project.chain(user).collect()
    }

    /// Reads every `<dir>/**/<name>.md` (sub-folders as namespaces; not `drafts/`, hidden
    /// entries, README and the like). A file that cannot be used, is too deep, or is reached
    /// through a symlink leading out of its folder is skipped with a warning naming it; a
    /// name defined in an earlier folder shadows the same name in a later one (with a
    /// warning). Missing folders have no commands.
    pub fn load(dirs: &[CommandDir]) -> (Self, Vec<String>) {
        let mut commands: Vec<SlashCommand> = Vec::new();
        let mut warnings = Vec::new();
        let mut seen: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            let Ok(root) = std::fs::canonicalize(&dir.path) else {
                continue;
            };
            if seen.contains(&root) {
                continue;
            }
            seen.push(root.clone());
            let mut files = Vec::new();
            walk(&dir.path, &root, &[], &mut files, &mut warnings);
            for (name, path) in files {
                let loaded = frontmatter::check_inside(&dir.path, &path)
                    .and_then(|()| SlashCommand::load(&name, &path, dir.origin));
                match loaded {
                    Ok(command) => match commands.iter().find(|c| c.name == command.name) {
                        Some(first) => warnings.push(format!(
                            "command `/{}` in {} skipped: {} defines it first",
                            command.name,
                            path.display(),
                            first.path.display()
                        )),
                        None => commands.push(command),
                    },
                    Err(err) => warnings.push(format!("command skipped: {err}")),
                }
            }
        }
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        commands.sort_by(|a, b| a.name.cmp(&b.name));
        (Self { commands }, warnings)
    }

    /// The command `name` (a leading `/` is allowed).
    pub fn get(&self, name: &str) -> Option<&SlashCommand> {
        let name = name.trim();
        let name = name.strip_prefix('/').unwrap_or(name);
        self.commands
            .binary_search_by(|command| command.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.commands[i])
    }

    /// Every command, by name.
    pub fn list(&self) -> &[SlashCommand] {
        &self.commands
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }
}

/// Adds the command files under `dir` (inside the canonical `root`) to `files`, each with its
/// name (`namespace:stem`); what is skipped is a warning.
fn walk(
    dir: &Path,
    root: &Path,
    namespace: &[String],
    files: &mut Vec<(String, PathBuf)>,
    warnings: &mut Vec<String>,
) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return,
        Err(err) => {
            warnings.push(format!("commands skipped: {}: {err}", dir.display()));
            return;
        }
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if files.len() >= MAX_FILES {
            warnings.push(format!(
                "commands skipped: more than {MAX_FILES} command files under {}",
                root.display()
            ));
            return;
        }
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if file_name.starts_with('.') {
            continue;
        }
        // Where it leads must stay inside the commands folder.
        let Ok(real) = std::fs::canonicalize(&path) else {
            warnings.push(format!(
                "command skipped: {}: it cannot be resolved (a dangling symlink?)",
                path.display()
            ));
            continue;
        };
        if !real.starts_with(root) {
            warnings.push(format!(
                "command skipped: {}: it is a symlink to {}, outside {}; commands must lie \
                 inside their folder",
                path.display(),
                real.display(),
                root.display()
            ));
            continue;
        }
        if real.is_dir() {
            if file_name.eq_ignore_ascii_case("drafts") {
                continue;
            }
            if namespace.len() + 1 > MAX_DEPTH {
                warnings.push(format!(
                    "commands skipped: {}: folders deeper than {MAX_DEPTH} are not searched",
                    path.display()
                ));
                continue;
            }
            if !valid_part(&file_name) {
                warnings.push(format!(
                    "commands skipped: {}: a folder name must have no spaces, `:` or `/`",
                    path.display()
                ));
                continue;
            }
            let mut inner = namespace.to_vec();
            inner.push(file_name);
            walk(&path, root, &inner, files, warnings);
        } else if real.is_file()
            && path
                .extension()
                .is_some_and(|ext| ext.eq_ignore_ascii_case("md"))
            && !frontmatter::is_not_a_definition(&path)
        {
            let stem = frontmatter::stem(&path);
            if !valid_part(&stem) {
                warnings.push(format!(
                    "command skipped: {}: a command's name must have no spaces, `:` or `/`",
                    path.display()
                ));
                continue;
            }
            let mut name = namespace.join(":");
            if !name.is_empty() {
                name.push(':');
            }
            name.push_str(&stem);
            files.push((name, path));
        }
    }
}

/// Whether `part` may be (part of) a command's name.
fn valid_part(part: &str) -> bool {
    !part.is_empty()
        && !part
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, ':' | '/' | '\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(body: &str) -> SlashCommand {
        SlashCommand {
            name: "c".into(),
            description: "d".into(),
            argument_hint: None,
            allowed_tools: None,
            model: None,
            body: body.into(),
            path: "c.md".into(),
            origin: CommandOrigin::Project,
        }
    }

    #[test]
    fn arguments_expand_once_and_positionals_split_like_a_shell() {
        let c = command("Fix $1 in $2 ($ARGUMENTS) $3$ $10 $0 $$ $HOME");
        assert_eq!(
            c.expand(r#" 42 "src/a b.rs" $1 "#),
            r#"Fix 42 in src/a b.rs (42 "src/a b.rs" $1) $1$  $0 $$ $HOME"#
        );
        assert_eq!(c.expand(""), "Fix  in  () $  $0 $$ $HOME");
        assert_eq!(command("Do it").expand("now"), "Do it\n\nARGUMENTS: now");
        assert_eq!(command("Do it").expand("  "), "Do it");
        assert_eq!(split_args("a 'b c' \"d\"e 'f"), ["a", "b c", "de", "f"]);
        assert_eq!(command("é$1é").expand("ü"), "éüé");
    }

    #[test]
    fn shell_lines_are_never_run_and_shown_as_not_run() {
        let c = command("Status: !`git status`\n!`rm -rf ~`\nA lone !` stays");
        assert_eq!(c.shell_commands(), ["git status", "rm -rf ~"]);
        let text = c.expand("");
        assert!(!text.contains("!`rm") && !text.contains("!`git"), "{text}");
        assert!(text.contains(&format!("`rm -rf ~` {NOT_RUN}")), "{text}");
        assert!(text.ends_with("A lone !` stays"), "{text}");
    }

    #[test]
    fn descriptions_default_to_the_first_line() {
        assert_eq!(first_line("\n# Title\nmore"), "Title");
        assert_eq!(first_line(&"x".repeat(300)).chars().count(), 201);
    }
}
