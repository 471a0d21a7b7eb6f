//! Permission rules: which tool calls run without asking, which are always asked about, and
//! which never run.
//!
//! A rule names a tool, optionally with a pattern matched against the call's primary
//! argument. Rules are written in keel's spelling or in Claude Code's, freely mixed:
//!
//! - keel's: a keel tool name: `git_commit` matches every `git_commit` call,
//!   `run_command(cargo test*)` commands starting with `cargo test`, `write_file(src/**)`
//!   writes anywhere under `src/`.
//! - Claude Code's: `Bash(npm test:*)`, `Edit(src/**)`, `Read(~/.ssh/**)`, `Write(//tmp/**)`,
//!   `WebFetch(domain:example.com)`, `Bash` (the whole tool). A Claude tool name stands for
//!   keel's tools as [`keel_tool::claude::rule_tools`] says: `Bash` is `run_command`; `Edit`
//!   (and `MultiEdit`) every tool that edits files, `patch_file` and `write_file`; `Write` is
//!   `write_file`; `Read` every tool that reads files, `read_file`, `grep`, `glob` and
//!   `list_directory`; `Glob`, `Grep`, `LS` one each; `Agent` and `Task` are `spawn_agent`.
//!   A Claude tool keel does not have (`WebFetch`, `WebSearch`, `NotebookEdit`, …) is
//!   understood but matches nothing; [`PermissionRules::inert_rules`] lists such rules so
//!   configuration can warn about them.
//!
//! MCP tools are named alike in both: `mcp__github__create_issue` is one tool,
//! `mcp__github__*` (a name ending in `*` matches every tool whose name starts with the rest)
//! and `mcp__github` are every tool of the server `github`.
//!
//! [`PermissionRules::check`] applies deny rules first, then ask rules, then allow rules (as
//! Claude Code does: deny > ask > allow); when none matches the verdict is [`Verdict::Ask`]
//! and the engine decides by the call's effect.
//!
//! ```
//! use std::path::Path;
//!
//! use keel_engine::permissions::{PermissionRules, RuleTexts, Verdict};
//! use serde_json::json;
//!
//! let rules = PermissionRules::from_texts(&RuleTexts {
//!     allow: vec!["run_command(cargo test*)".into(), "Bash(npm test:*)".into()],
//!     ask: vec!["Bash(git push:*)".into()],
//!     deny: vec!["Bash(rm:*)".into()],
//! })?;
//! let run = |command: &str| {
//!     rules.check("run_command", &json!({ "command": command }), Path::new("/project"))
//! };
//! assert!(matches!(run("cargo test -p app"), Verdict::Allow { .. }));
//! assert!(matches!(run("npm test -- -x"), Verdict::Allow { .. }));
//! assert_eq!(run("npm testing"), Verdict::Ask);
//! assert!(matches!(run("cargo test && rm -rf /"), Verdict::Deny { .. }));
//! assert!(matches!(run("git push origin main"), Verdict::AskRule { .. }));
//! assert_eq!(run("cargo test && make"), Verdict::Ask);
//! # Ok::<(), keel_engine::permissions::PermissionError>(())
//! ```
//!
//! # Primary argument
//!
//! `run_command` → `command`; `read_file`, `write_file`, `patch_file`, `list_directory`,
//! `git_diff` → `path`; `grep`, `glob` → `pattern` for keel's rules, but `path` (the
//! directory searched; the working directory when absent) for Claude Code's path rules
//! (`Read(…)`, `Grep(…)`, `Glob(…)`), and for `glob` also `path/pattern`, which must be
//! covered too (allow) or is caught too (deny, ask), so `../.ssh/*` does not slip out of an
//! allowed directory; any other tool → the first of `command`, `path`, `pattern`, `url`
//! that the call has as a string. A rule with a pattern never matches a call without that
//! argument; a rule without one matches every call of its tools. A path rule sees the
//! directory a search starts in, not the files it reads there: `Read(.env)` denies reading
//! `.env`, not a `grep` of the directory holding it.
//!
//! # Paths
//!
//! A call's path is resolved against the session's working directory and normalized
//! lexically (`./` and empty segments dropped, `dir/..` resolved), and so is the rule's
//! pattern, so `src/../../etc/passwd` is `/etc/passwd` and never under `src/`, and a deny
//! rule for `.env` also catches the same file named by its absolute path. `*` matches within
//! one path segment (no `/`), `**` across segments, and `**/` also matches nothing (`**/.env`
//! matches `.env` and `a/b/.env`).
//!
//! - keel's rules: a pattern starting with `/` is an absolute path; any other is relative to
//!   the working directory.
//! - Claude Code's rules (gitignore-like, with Claude Code's anchors): `//path` is an
//!   absolute path, `~/path` is under the home directory, `/path` is relative to the project
//!   root ([`PermissionRules::with_project_root`]; the working directory unless set), and
//!   `path` or `./path` relative to the working directory. As in gitignore, a pattern
//!   without a `/` (`*.env`, `.env`) matches that name at any depth below its anchor, a
//!   pattern ending in `/` matches the directory and everything in it, and `dir/**` also
//!   matches `dir` itself.
//!
//! Paths are compared as text: a symbolic link is not followed.
//!
//! # Commands
//!
//! keel's command patterns are literal except `*`, which matches any run of characters, `/`
//! included (and redirections: `cargo test*` allows `cargo test > out.txt`); a pattern must
//! match the whole command, so one without `*` matches exactly. Runs of whitespace count as
//! one space. Claude Code's `Bash` patterns are the same, plus: `prefix:*` matches `prefix`
//! and `prefix` followed by a space and anything (`npm test:*` matches `npm test` and
//! `npm test -- -x`, not `npm testing`), and a pattern whose only `*` ends it after a space
//! (`git *`) also matches the bare command (`git`).
//!
//! A command is split into sub-commands at `&&`, `||`, `;`, `|`, `&`, newlines, `(`, `)`,
//! `$(`, `<(`, `>(` and backticks (quotes are not interpreted, so a quoted separator splits
//! too: splitting more only makes rules stricter). A deny or ask rule applies to the command
//! if it matches any sub-command; allow rules allow it only if every sub-command matches one
//! of them, so `run_command(cargo test*)` does not allow `cargo test && rm -rf /`. A command
//! with command substitution (`$(`, backticks, `<(`, `>(`) is allowed only by a rule whose
//! pattern is `*` or absent.
//!
//! Deny rules match commands as written: `rm -rf*` does not catch `/bin/rm -rf` or
//! `sh -c 'rm -rf /'`. They are a guard against mistakes, not a sandbox; the sandbox policy
//! is what confines commands.
//!
//! # Tool names
//!
//! [`PermissionRule::parse`] checks a rule's form, and for Claude Code's tools its pattern
//! (`Bash(:*)`, a `:*` not at the end, `WebFetch(example.com)` without `domain:` are
//! errors). It cannot know every keel tool (MCP servers and programs add their own), so a
//! misspelt name (`Bsah(rm:*)`) parses; [`PermissionRules::validate`] against the registry's
//! tool names refuses it, naming Claude Code's tools and keel's.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use keel_tool::claude::{self, ClaudeName};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a permission rule is invalid.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PermissionError {
    /// The rule's text is not `tool` or `tool(pattern)`, or its pattern is not one the tool
    /// takes.
    #[error(
        "invalid permission rule {rule:?}: {reason}; write rules like run_command(cargo test*), \
         Bash(npm test:*) or git_commit"
    )]
    Invalid {
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The rule names a tool that is neither Claude Code's, keel's nor an MCP tool.
    #[error(
        "unknown tool `{tool}` in permission rule `{rule}`{hint}; Claude Code's tools are \
         {claude}; keel's are {keel}; MCP tools are named mcp__<server>__<tool>"
    )]
    UnknownTool {
        /// The rule as written.
        rule: String,
        /// The tool name it gives.
        tool: String,
        /// `" (did you mean `Bash`?)"` when a known name differs only in case, else empty.
        hint: String,
        /// Claude Code's tool names, comma-separated.
        claude: String,
        /// keel's tool names, comma-separated.
        keel: String,
    },
}

/// One permission rule: a tool name, optionally with a pattern for the call's primary
/// argument. Written `tool` or `tool(pattern)`, in keel's spelling (`run_command(cargo
/// test*)`) or Claude Code's (`Bash(cargo test:*)`); [`Display`](fmt::Display) gives that
/// text back as written, and serde reads and writes it as that string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PermissionRule {
    /// The tool it applies to (`^[a-zA-Z0-9_-]{1,64}$`), or tools: one of Claude Code's tool
    /// names stands for keel's tools ([`keel_tool::claude::rule_tools`]), a name ending in `*`
    /// is a prefix, and `mcp__<server>` stands for every tool of that MCP server.
    pub tool: String,
    /// Matched against the call's primary argument; `None` matches every call of the tool.
    pub pattern: Option<String>,
}

impl PermissionRule {
    /// Parses `tool` or `tool(pattern)`; surrounding whitespace is ignored. For one of Claude
    /// Code's tools the pattern must be one that tool takes: `Bash(prefix:*)` needs a prefix
    /// and `:*` only at its end, `WebFetch(domain:host)` needs `domain:`.
    ///
    /// ```
    /// use keel_engine::permissions::PermissionRule;
    ///
    /// let rule = PermissionRule::parse("write_file(src/**)")?;
    /// assert_eq!(rule.tool, "write_file");
    /// assert_eq!(rule.pattern.as_deref(), Some("src/**"));
    /// assert_eq!(rule.to_string(), "write_file(src/**)");
    /// let claude = PermissionRule::parse("Edit(src/**)")?;
    /// assert_eq!(claude.keel_tools(), ["patch_file", "write_file"]);
    /// assert!(PermissionRule::parse("Bash(:*)").is_err());
    /// # Ok::<(), keel_engine::permissions::PermissionError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self, PermissionError> {
        let invalid = |reason: String| PermissionError::Invalid {
            rule: text.to_owned(),
            reason,
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(invalid("the rule is empty".to_owned()));
        }
        let (tool, pattern) = match trimmed.split_once('(') {
            None => (trimmed, None),
            Some((tool, rest)) => {
                let Some(pattern) = rest.strip_suffix(')') else {
                    return Err(invalid(if rest.contains(')') {
                        "text after the closing \")\"".to_owned()
                    } else {
                        "missing \")\"".to_owned()
                    }));
                };
                if pattern.trim().is_empty() {
                    return Err(invalid(format!(
                        "empty pattern (to match every call, leave out the parentheses: {})",
                        tool.trim()
                    )));
                }
                (tool.trim_end(), Some(pattern.to_owned()))
            }
        };
        if tool.is_empty() {
            return Err(invalid("missing the tool name before \"(\"".to_owned()));
        }
        if !keel_tool::is_valid_tool_name(tool.strip_suffix('*').unwrap_or(tool)) {
            return Err(invalid(format!(
                "tool name {tool:?} may only have letters, digits, \"_\" and \"-\" (1 to 64), \
                 and a \"*\" at its end"
            )));
        }
        let rule = Self {
            tool: tool.to_owned(),
            pattern,
        };
        if let (Some(_), Some(pattern)) = (claude::resolve(&rule.tool), &rule.pattern) {
            ClaudePattern::parse(&rule.tool, pattern).map_err(invalid)?;
        }
        Ok(rule)
    }

    /// Whether the rule is in Claude Code's spelling: its tool is one of Claude Code's tool
    /// names (`Bash`, `Edit`, `WebFetch`, …).
    pub fn is_claude(&self) -> bool {
        claude::resolve(&self.tool).is_some()
    }

    /// Whether the rule names a tool of Claude Code's that keel does not have (`WebFetch`,
    /// `WebSearch`, …): understood, but it never matches a call.
    pub fn is_inert(&self) -> bool {
        claude::resolve(&self.tool) == Some(ClaudeName::NotInKeel)
    }

    /// keel's tools a rule in Claude Code's spelling covers (`Edit` → `patch_file`,
    /// `write_file`); for a rule in keel's spelling, its tool name.
    pub fn keel_tools(&self) -> Vec<&str> {
        if self.is_claude() {
            claude::rule_tools(&self.tool).to_vec()
        } else {
            vec![self.tool.as_str()]
        }
    }

    /// Whether the rule's tool name covers `tool`: a Claude Code tool name covering it; the
    /// same name; a name ending in `*` whose rest starts `tool`; or `mcp__<server>` for
    /// `mcp__<server>__<any tool>`.
    pub fn covers_tool(&self, tool: &str) -> bool {
        if self.is_claude() {
            return claude::rule_tools(&self.tool).contains(&tool);
        }
        if let Some(prefix) = self.tool.strip_suffix('*') {
            return tool.starts_with(prefix);
        }
        if self.tool == tool {
            return true;
        }
        let is_server = self
            .tool
            .strip_prefix("mcp__")
            .is_some_and(|server| !server.is_empty() && !server.contains("__"));
        is_server
            && tool
                .strip_prefix(self.tool.as_str())
                .is_some_and(|rest| rest.starts_with("__") && rest.len() > 2)
    }

    /// Whether this rule on its own covers the call, as allow rules are applied: the tool
    /// matches and, if the rule has a pattern, so does the call's primary argument (paths
    /// resolved in `context`). For `run_command` every sub-command must match, and a command
    /// with command substitution matches only a pattern of `*`.
    pub fn matches(&self, tool: &str, input: &Value, context: &RuleContext) -> bool {
        self.matches_as(tool, input, context, Parts::All)
    }

    /// Whether this rule matches any part of the call, as deny and ask rules are applied:
    /// like [`matches`](Self::matches), except that for `run_command` one matching
    /// sub-command is enough (and command substitution is no obstacle).
    pub fn matches_any_part(&self, tool: &str, input: &Value, context: &RuleContext) -> bool {
        self.matches_as(tool, input, context, Parts::Any)
    }

    fn matches_as(&self, tool: &str, input: &Value, context: &RuleContext, parts: Parts) -> bool {
        if !self.covers_tool(tool) {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        let claude = if self.is_claude() {
            match ClaudePattern::parse(&self.tool, pattern) {
                Ok(parsed) => Some(parsed),
                // Only a rule built without `parse` gets here: it matches nothing.
                Err(_) => return false,
            }
        } else {
            None
        };
        let Some(argument) = primary_argument(tool, input, claude.is_some()) else {
            return false;
        };
        match (argument, &claude) {
            (Argument::Command(command), _) => {
                let matches_part = |part: &String| match &claude {
                    Some(ClaudePattern::Command(command_pattern)) => command_pattern.matches(part),
                    Some(_) => false,
                    None => text_matches(pattern, part),
                };
                match parts {
                    Parts::Any => sub_commands(command).iter().any(matches_part),
                    Parts::All => {
                        (pattern.trim() == "*" || !has_substitution(command))
                            && sub_commands(command).iter().all(matches_part)
                    }
                }
            }
            (Argument::Path(path), None) => regex_matches(
                &keel_path_pattern(pattern, context),
                &resolve_path(path, &context.cwd),
            ),
            (Argument::Path(path), Some(ClaudePattern::Path(path_pattern))) => {
                let Some(regex) = path_pattern.regex(context) else {
                    return false;
                };
                let mut paths = vec![resolve_path(path, &context.cwd)];
                // `glob`'s pattern may reach out of its directory (`../.ssh/*`): it is a
                // second path the rule must cover (allow) or that it catches (deny, ask).
                if tool == "glob"
                    && let Some(glob) = input.get("pattern").and_then(Value::as_str)
                {
                    let joined = if glob.starts_with('/') {
                        glob.to_owned()
                    } else {
                        format!("{path}/{glob}")
                    };
                    paths.push(resolve_path(&joined, &context.cwd));
                }
                let matches = |path: &String| regex_matches(&regex, path);
                match parts {
                    Parts::Any => paths.iter().any(matches),
                    Parts::All => paths.iter().all(matches),
                }
            }
            (Argument::Path(text) | Argument::Text(text), Some(ClaudePattern::Text(pattern))) => {
                text_matches(pattern, text)
            }
            (Argument::Text(text), None) => text_matches(pattern, text),
            (_, Some(_)) => false,
        }
    }
}

/// How much of a command a rule must match.
#[derive(Clone, Copy)]
enum Parts {
    /// Every sub-command (allow rules).
    All,
    /// One sub-command (deny and ask rules).
    Any,
}

/// A pattern of a rule in Claude Code's spelling, by its tool.
enum ClaudePattern<'a> {
    /// `Bash(…)`.
    Command(CommandPattern<'a>),
    /// `Read(…)`, `Edit(…)`, `Write(…)`, … : a path.
    Path(PathPattern<'a>),
    /// `WebFetch(domain:…)`: keel has no such tool, so it matches nothing.
    Domain,
    /// Any other tool's pattern, matched as text against the call's primary argument.
    Text(&'a str),
}

/// Claude Code's tools whose rules take paths.
const CLAUDE_PATH_TOOLS: &[&str] = &[
    "Read",
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Glob",
    "Grep",
    "LS",
];

impl<'a> ClaudePattern<'a> {
    /// The pattern `pattern` of a rule for Claude Code's tool `tool`, or what is wrong with it.
    fn parse(tool: &str, pattern: &'a str) -> Result<Self, String> {
        match tool {
            "Bash" => CommandPattern::parse(pattern).map(Self::Command),
            "WebFetch" => match pattern.trim().strip_prefix("domain:") {
                Some(host) if !host.trim().is_empty() => Ok(Self::Domain),
                _ => Err(format!(
                    "WebFetch rules name a host as domain:<host>, e.g. \
                     WebFetch(domain:example.com), not {pattern:?}"
                )),
            },
            _ if CLAUDE_PATH_TOOLS.contains(&tool) => PathPattern::parse(pattern).map(Self::Path),
            _ => Ok(Self::Text(pattern)),
        }
    }
}

/// A `Bash(…)` pattern.
enum CommandPattern<'a> {
    /// `prefix:*`: the prefix alone, or followed by a space and anything.
    Prefix(String),
    /// With `*` wildcards; `bare` is the command a trailing ` *` also allows alone.
    Wildcard {
        pattern: &'a str,
        bare: Option<String>,
    },
    /// Without wildcards: the whole command.
    Exact(String),
}

impl<'a> CommandPattern<'a> {
    fn parse(pattern: &'a str) -> Result<Self, String> {
        if let Some(prefix) = pattern.trim().strip_suffix(":*") {
            let prefix = collapse_whitespace(prefix);
            if prefix.is_empty() {
                return Err(
                    "\":*\" needs a command prefix before it, e.g. Bash(npm test:*); to match \
                     every command, write Bash"
                        .to_owned(),
                );
            }
            if prefix.contains('*') || prefix.contains(":*") {
                return Err(format!(
                    "\"{prefix}:*\" mixes \"*\" into a \":*\" prefix; write a plain prefix \
                     (Bash(npm test:*)) or \"*\" wildcards alone (Bash(npm test *))"
                ));
            }
            return Ok(Self::Prefix(prefix));
        }
        if pattern.contains(":*") {
            return Err(
                "\":*\" may only end a Bash pattern (Bash(npm test:*)); for a wildcard \
                 elsewhere write \"*\" alone (Bash(git * main))"
                    .to_owned(),
            );
        }
        if !pattern.contains('*') {
            return Ok(Self::Exact(collapse_whitespace(pattern)));
        }
        let collapsed = collapse_whitespace(pattern);
        let bare = collapsed
            .strip_suffix(" *")
            .filter(|rest| !rest.contains('*') && !rest.is_empty())
            .map(str::to_owned);
        Ok(Self::Wildcard { pattern, bare })
    }

    /// Whether one sub-command matches.
    fn matches(&self, command: &str) -> bool {
        let command = collapse_whitespace(command);
        match self {
            Self::Prefix(prefix) => command
                .strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(' ')),
            Self::Exact(exact) => &command == exact,
            Self::Wildcard { pattern, bare } => {
                bare.as_deref() == Some(command.as_str()) || text_matches(pattern, &command)
            }
        }
    }
}

/// A path pattern in Claude Code's spelling, split at its anchor.
struct PathPattern<'a> {
    anchor: Anchor,
    /// The pattern below the anchor.
    rest: &'a str,
}

/// Where a Claude Code path pattern starts.
#[derive(Clone, Copy)]
enum Anchor {
    /// `//path`.
    Root,
    /// `~/path`.
    Home,
    /// `/path`.
    Project,
    /// `./path`: the working directory, explicitly.
    Cwd,
    /// `path`: the working directory; without a `/` the name matches at any depth.
    CwdUnanchored,
}

impl<'a> PathPattern<'a> {
    fn parse(pattern: &'a str) -> Result<Self, String> {
        let pattern = pattern.trim();
        let (anchor, rest) = if let Some(rest) = pattern.strip_prefix("//") {
            (Anchor::Root, rest)
        } else if pattern == "~" {
            (Anchor::Home, "")
        } else if let Some(rest) = pattern.strip_prefix("~/") {
            (Anchor::Home, rest)
        } else if pattern.starts_with('~') {
            return Err(format!(
                "{pattern:?}: only ~/ (your home directory) is understood, not ~user"
            ));
        } else if let Some(rest) = pattern.strip_prefix('/') {
            (Anchor::Project, rest)
        } else if let Some(rest) = pattern.strip_prefix("./") {
            (Anchor::Cwd, rest)
        } else {
            (Anchor::CwdUnanchored, pattern)
        };
        Ok(Self { anchor, rest })
    }

    /// The regex a resolved path must match, or `None` when the anchor is unknown (no home
    /// directory).
    fn regex(&self, context: &RuleContext) -> Option<String> {
        let base = match self.anchor {
            Anchor::Root => PathBuf::from("/"),
            Anchor::Home => context.home.clone()?,
            Anchor::Project => context.project_root.clone(),
            Anchor::Cwd | Anchor::CwdUnanchored => context.cwd.clone(),
        };
        // gitignore: a pattern with no `/` but at its end matches at any depth.
        let unanchored = matches!(self.anchor, Anchor::CwdUnanchored)
            && !self.rest.trim_end_matches('/').contains('/');
        let mut rest = self.rest.to_owned();
        if rest.ends_with('/') {
            // gitignore: `dir/` is the directory and everything in it.
            rest.push_str("**");
        }
        if unanchored && !rest.is_empty() && rest != "." {
            rest = format!("**/{rest}");
        }
        Some(anchored_regex(&base, &rest, true))
    }
}

impl FromStr for PermissionRule {
    type Err = PermissionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl TryFrom<String> for PermissionRule {
    type Error = PermissionError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl From<PermissionRule> for String {
    fn from(rule: PermissionRule) -> Self {
        rule.to_string()
    }
}

impl fmt::Display for PermissionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            None => f.write_str(&self.tool),
            Some(pattern) => write!(f, "{}({pattern})", self.tool),
        }
    }
}

/// What the rules say about a tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A deny rule matched: the call must not run.
    Deny {
        /// The rule that matched, as written.
        rule: String,
    },
    /// An ask rule matched (and no deny rule): the person is asked, whatever allow rules,
    /// hooks, the mode or earlier "always" answers say.
    AskRule {
        /// The rule that matched, as written.
        rule: String,
    },
    /// Allow rules cover the whole call: it runs without asking.
    Allow {
        /// The rule that matched, as written; for a command whose sub-commands matched
        /// different rules, those rules joined with `, `.
        rule: String,
    },
    /// No rule decides: the engine decides by the call's effect.
    Ask,
}

/// The directories path patterns are anchored to when a call is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleContext {
    /// The session's working directory: relative call paths and patterns start here.
    pub cwd: PathBuf,
    /// The project's root: Claude Code's `/path` patterns start here.
    pub project_root: PathBuf,
    /// The home directory: `~/path` patterns start here; `None` when unknown (they then
    /// match nothing).
    pub home: Option<PathBuf>,
}

impl RuleContext {
    /// A context for `cwd`, which is also the project root; the home directory is the
    /// process's (`$HOME`).
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        Self {
            project_root: cwd.clone(),
            cwd,
            home: std::env::home_dir(),
        }
    }
}

/// Permission rules as written in configuration: allow, ask and deny lists of texts
/// (`tool` or `tool(pattern)`, in keel's or Claude Code's spelling). Claude Code's
/// `permissions` object in `settings.json` and keel's `[permissions]` table deserialize into
/// it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleTexts {
    /// Calls these cover run without asking.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Calls these match are always asked about.
    #[serde(default)]
    pub ask: Vec<String>,
    /// Calls these match never run.
    #[serde(default)]
    pub deny: Vec<String>,
}

/// A set of allow, ask and deny rules; deny wins, then ask, then allow.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PermissionRules {
    /// Calls these cover run without asking.
    pub allow: Vec<PermissionRule>,
    /// Calls these match are always asked about (unless a deny rule matches).
    pub ask: Vec<PermissionRule>,
    /// Calls these match never run.
    pub deny: Vec<PermissionRule>,
    /// Where Claude Code's `/path` patterns start; the working directory when `None`.
    project_root: Option<PathBuf>,
    /// Where `~/path` patterns start; the process's home directory when `None`.
    home: Option<PathBuf>,
}

fn parse_list(texts: &[String]) -> Result<Vec<PermissionRule>, PermissionError> {
    texts
        .iter()
        .map(|text| PermissionRule::parse(text))
        .collect()
}

impl PermissionRules {
    /// Parses allow and deny rules as written in configuration; the first invalid one is the
    /// error. [`from_texts`](Self::from_texts) also takes ask rules.
    pub fn parse(allow: &[String], deny: &[String]) -> Result<Self, PermissionError> {
        Ok(Self {
            allow: parse_list(allow)?,
            deny: parse_list(deny)?,
            ..Self::default()
        })
    }

    /// Parses allow, ask and deny rules as written in configuration; the first invalid one is
    /// the error.
    pub fn from_texts(texts: &RuleTexts) -> Result<Self, PermissionError> {
        Ok(Self {
            allow: parse_list(&texts.allow)?,
            ask: parse_list(&texts.ask)?,
            deny: parse_list(&texts.deny)?,
            ..Self::default()
        })
    }

    /// The rules as texts, as written: what [`from_texts`](Self::from_texts) reads back into
    /// the same rules, e.g. in another process (the project root and home directory set by
    /// [`with_project_root`](Self::with_project_root) and [`with_home`](Self::with_home) are
    /// not texts: set them again there).
    ///
    /// ```
    /// use keel_engine::permissions::{PermissionRules, RuleTexts};
    ///
    /// let texts = RuleTexts {
    ///     allow: vec!["Bash(npm test:*)".into()],
    ///     ask: vec!["Bash(git push:*)".into()],
    ///     deny: vec!["Read(~/.ssh/**)".into()],
    /// };
    /// let rules = PermissionRules::from_texts(&texts)?;
    /// assert_eq!(rules.texts(), texts);
    /// # Ok::<(), keel_engine::PermissionError>(())
    /// ```
    pub fn texts(&self) -> RuleTexts {
        let texts = |rules: &[PermissionRule]| rules.iter().map(ToString::to_string).collect();
        RuleTexts {
            allow: texts(&self.allow),
            ask: texts(&self.ask),
            deny: texts(&self.deny),
        }
    }

    /// The allow and deny rules as texts (`tool` or `tool(pattern)`), in order: what
    /// [`PermissionRules::parse`] reads back into the same rules, e.g. in another process.
    /// Ask rules are not in them: where there may be some, use [`texts`](Self::texts).
    ///
    /// ```
    /// use keel_engine::PermissionRules;
    ///
    /// let rules = PermissionRules::parse(&["run_command(cargo test*)".into()], &["git_commit".into()])?;
    /// let (allow, deny) = rules.sources();
    /// assert_eq!(PermissionRules::parse(&allow, &deny)?, rules);
    /// # Ok::<(), keel_engine::PermissionError>(())
    /// ```
    pub fn sources(&self) -> (Vec<String>, Vec<String>) {
        let texts = self.texts();
        (texts.allow, texts.deny)
    }

    /// The rules with Claude Code's `/path` patterns starting at `root`, the project's root
    /// (the directory of the `.claude/settings.json` they came from). Unset, they start at
    /// the working directory.
    pub fn with_project_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.project_root = Some(root.into());
        self
    }

    /// The rules with `~/path` patterns starting at `home`. Unset, they start at the
    /// process's home directory (`$HOME`).
    pub fn with_home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// Where path patterns start for a session working in `cwd`.
    pub fn context(&self, cwd: &Path) -> RuleContext {
        RuleContext {
            cwd: cwd.to_path_buf(),
            project_root: self
                .project_root
                .clone()
                .unwrap_or_else(|| cwd.to_path_buf()),
            home: self.home.clone().or_else(std::env::home_dir),
        }
    }

    /// Checks that every rule names a tool keel knows: one of Claude Code's tool names
    /// ([`keel_tool::claude`]), one of keel's built-in tools that table names (`run_command`,
    /// `read_file`, …), one of `known` (give the tool registry's names), or an MCP tool
    /// (`mcp__…`); a name ending in `*` must start one of those. The first rule that does
    /// not is the error, naming the tools there are.
    ///
    /// ```
    /// use keel_engine::permissions::PermissionRules;
    ///
    /// let rules = PermissionRules::parse(&["git_commit".into()], &["Bsah(rm:*)".into()])?;
    /// let error = rules.validate(&["git_commit"]).unwrap_err().to_string();
    /// assert!(error.starts_with("unknown tool `Bsah` in permission rule `Bsah(rm:*)`"));
    /// # Ok::<(), keel_engine::PermissionError>(())
    /// ```
    pub fn validate<'a>(&self, known: &[&'a str]) -> Result<(), PermissionError> {
        let keel: Vec<&'a str> = {
            let mut names: Vec<&str> = claude::keel_names().collect();
            for name in known {
                if !names.contains(name) {
                    names.push(name);
                }
            }
            names
        };
        let is_known = |name: &str| {
            claude::resolve(name).is_some() || name.starts_with("mcp__") || keel.contains(&name)
        };
        for rule in self.deny.iter().chain(&self.ask).chain(&self.allow) {
            let name = rule.tool.as_str();
            let ok = match name.strip_suffix('*') {
                Some(prefix) => {
                    prefix.starts_with("mcp__")
                        || keel.iter().any(|tool| tool.starts_with(prefix))
                        || claude::known_names().any(|tool| tool.starts_with(prefix))
                }
                None => is_known(name),
            };
            if ok {
                continue;
            }
            let near = claude::known_names()
                .find(|candidate| candidate.eq_ignore_ascii_case(name))
                .or_else(|| {
                    keel.iter()
                        .copied()
                        .find(|candidate| candidate.eq_ignore_ascii_case(name))
                });
            return Err(PermissionError::UnknownTool {
                rule: rule.to_string(),
                tool: name.to_owned(),
                hint: near.map_or_else(String::new, |near| format!(" (did you mean `{near}`?)")),
                claude: claude::known_names().collect::<Vec<_>>().join(", "),
                keel: keel.join(", "),
            });
        }
        Ok(())
    }

    /// The rules naming a tool of Claude Code's that keel does not have (`WebFetch(…)`,
    /// `WebSearch`, …), deny rules first, then ask, then allow: understood, but they never
    /// match, so configuration can warn about them.
    pub fn inert_rules(&self) -> impl Iterator<Item = &PermissionRule> {
        self.deny
            .iter()
            .chain(&self.ask)
            .chain(&self.allow)
            .filter(|rule| rule.is_inert())
    }

    /// The verdict for calling `tool` with `input` in a session working in `cwd` (paths are
    /// resolved there, see [`context`](Self::context)): [`Verdict::Deny`] if a deny rule
    /// matches any part of the call, else [`Verdict::AskRule`] if an ask rule does, else
    /// [`Verdict::Allow`] if allow rules cover all of it, else [`Verdict::Ask`].
    pub fn check(&self, tool: &str, input: &Value, cwd: &Path) -> Verdict {
        let context = self.context(cwd);
        if let Some(rule) = self
            .deny
            .iter()
            .find(|rule| rule.matches_any_part(tool, input, &context))
        {
            return Verdict::Deny {
                rule: rule.to_string(),
            };
        }
        if let Some(rule) = self
            .ask
            .iter()
            .find(|rule| rule.matches_any_part(tool, input, &context))
        {
            return Verdict::AskRule {
                rule: rule.to_string(),
            };
        }
        if let Some(rule) = self
            .allow
            .iter()
            .find(|rule| rule.matches(tool, input, &context))
        {
            return Verdict::Allow {
                rule: rule.to_string(),
            };
        }
        // A command whose sub-commands are each covered by some allow rule.
        if let Some(Argument::Command(command)) = primary_argument(tool, input, false) {
            if has_substitution(command) {
                return Verdict::Ask;
            }
            let mut used: Vec<String> = Vec::new();
            for part in sub_commands(command) {
                let single = Value::from(serde_json::Map::from_iter([(
                    "command".to_owned(),
                    Value::from(part),
                )]));
                let Some(rule) = self
                    .allow
                    .iter()
                    .find(|rule| rule.matches(tool, &single, &context))
                else {
                    return Verdict::Ask;
                };
                let text = rule.to_string();
                if !used.contains(&text) {
                    used.push(text);
                }
            }
            return Verdict::Allow {
                rule: used.join(", "),
            };
        }
        Verdict::Ask
    }
}

/// A call's primary argument, and how patterns match it.
enum Argument<'a> {
    Command(&'a str),
    Path(&'a str),
    Text(&'a str),
}

/// The call's primary argument; `claude` for a rule in Claude Code's spelling, whose path
/// rules match `grep`'s and `glob`'s `path` (the working directory when absent).
fn primary_argument<'a>(tool: &str, input: &'a Value, claude: bool) -> Option<Argument<'a>> {
    let get = |key: &str| input.get(key).and_then(Value::as_str);
    match tool {
        "run_command" => get("command").map(Argument::Command),
        "read_file" | "write_file" | "patch_file" | "git_diff" => get("path").map(Argument::Path),
        "list_directory" if claude => Some(Argument::Path(get("path").unwrap_or("."))),
        "list_directory" => get("path").map(Argument::Path),
        "grep" | "glob" if claude => match input.get("path") {
            None | Some(Value::Null) => Some(Argument::Path(".")),
            Some(path) => path.as_str().map(Argument::Path),
        },
        "grep" | "glob" => get("pattern").map(Argument::Text),
        _ => ["command", "path", "pattern", "url"]
            .into_iter()
            .find_map(|key| get(key).map(|value| (key, value)))
            .map(|(key, value)| match key {
                "path" => Argument::Path(value),
                _ => Argument::Text(value),
            }),
    }
}

/// Whether `command` substitutes another command's output (`$(`, backticks, `<(`, `>(`).
fn has_substitution(command: &str) -> bool {
    ["$(", "`", "<(", ">("]
        .iter()
        .any(|marker| command.contains(marker))
}

/// `command` split at every operator that starts another command; parts trimmed, empty
/// parts dropped (a command with no parts yields one empty part).
fn sub_commands(command: &str) -> Vec<String> {
    let chars: Vec<char> = command.chars().collect();
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut index = 0;
    while index < chars.len() {
        let char = chars[index];
        let separator = match char {
            ';' | '|' | '\n' | '\r' | '(' | ')' | '`' => true,
            // `&` is a separator unless part of a redirection: `2>&1`, `&>file`, `<&3`.
            '&' => {
                let previous = index.checked_sub(1).map(|i| chars[i]);
                let next = chars.get(index + 1).copied();
                !matches!(previous, Some('>' | '<')) && next != Some('>')
            }
            _ => false,
        };
        if separator {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(char);
        }
        index += 1;
    }
    parts.push(current);
    let mut parts: Vec<String> = parts
        .iter()
        .map(|part| {
            // `$(` leaves a `$` behind and `<(`/`>(` a `<`/`>`: drop them with the spaces.
            let part = part.trim();
            let part = part.strip_suffix(['$', '<', '>']).unwrap_or(part);
            collapse_whitespace(part)
        })
        .filter(|part| !part.is_empty())
        .collect();
    if parts.is_empty() {
        parts.push(String::new());
    }
    parts
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether the text pattern matches all of `text`: `*` is any run of characters.
fn text_matches(pattern: &str, text: &str) -> bool {
    let pattern = collapse_whitespace(pattern);
    let text = collapse_whitespace(text);
    let mut regex = String::from("(?s)^");
    for (index, literal) in pattern.split('*').enumerate() {
        if index > 0 {
            regex.push_str(".*");
        }
        regex.push_str(&regex::escape(literal));
    }
    regex.push('$');
    regex_matches(&regex, &text)
}

/// The regex for a path pattern in keel's spelling: absolute if it starts with `/`, else
/// relative to the working directory.
fn keel_path_pattern(pattern: &str, context: &RuleContext) -> String {
    match pattern.strip_prefix('/') {
        Some(rest) => anchored_regex(Path::new("/"), rest, false),
        None => anchored_regex(&context.cwd, pattern, false),
    }
}

/// The regex for the path pattern `rest` below the directory `base` (a literal path), both
/// normalized; `..` at the start of `rest` climbs out of `base`. `*` stays within a segment,
/// `**` crosses segments, `**/` may match nothing; with `dir_itself`, a final `/**` (or a
/// `rest` of `**`) also matches the directory before it.
fn anchored_regex(base: &Path, rest: &str, dir_itself: bool) -> String {
    let base = normalize_path(&base.to_string_lossy());
    let absolute = base.starts_with('/');
    let mut base_segments: Vec<&str> = base
        .split('/')
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .collect();
    let rest = normalize_path(rest);
    let mut rest_segments: Vec<&str> = rest
        .split('/')
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .collect();
    while rest_segments.first() == Some(&"..") {
        rest_segments.remove(0);
        if base_segments.last().is_some_and(|last| *last != "..") {
            base_segments.pop();
        } else if !absolute {
            base_segments.push("..");
        }
    }
    let mut base = base_segments.join("/");
    if absolute {
        base.insert(0, '/');
    }
    let mut rest = rest_segments.join("/");
    let mut tail = "";
    if dir_itself {
        if rest == "**" {
            rest.clear();
            tail = "(?:/.*)?";
        } else if let Some(before) = rest.strip_suffix("/**") {
            rest = before.to_owned();
            tail = "(?:/.*)?";
        }
    }
    let mut regex = String::from("(?s)^");
    if rest.is_empty() {
        if !tail.is_empty() {
            base = base.trim_end_matches('/').to_owned();
        } else if base.is_empty() {
            base = ".".to_owned();
        }
        regex.push_str(&regex::escape(&base));
    } else {
        let base = base.trim_end_matches('/');
        regex.push_str(&regex::escape(base));
        if !base.is_empty() || absolute {
            regex.push('/');
        }
        regex.push_str(&glob_regex(&rest));
    }
    regex.push_str(tail);
    regex.push('$');
    regex
}

/// The regex for a path glob: `*` stays within a segment, `**` crosses segments, `**/` may
/// match nothing; everything else is literal.
fn glob_regex(pattern: &str) -> String {
    let mut regex = String::new();
    let mut rest = pattern;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("**/") {
            regex.push_str("(?:.*/)?");
            rest = after;
        } else if let Some(after) = rest.strip_prefix("**") {
            regex.push_str(".*");
            rest = after;
        } else if let Some(after) = rest.strip_prefix('*') {
            regex.push_str("[^/]*");
            rest = after;
        } else {
            let end = rest.find('*').unwrap_or(rest.len());
            regex.push_str(&regex::escape(&rest[..end]));
            rest = &rest[end..];
        }
    }
    regex
}

/// `path` resolved against `cwd` (unless absolute) and normalized.
fn resolve_path(path: &str, cwd: &Path) -> String {
    if path.starts_with('/') {
        normalize_path(path)
    } else {
        normalize_path(&format!("{}/{path}", cwd.to_string_lossy()))
    }
}

fn regex_matches(regex: &str, text: &str) -> bool {
    match Regex::new(regex) {
        Ok(regex) => regex.is_match(text),
        Err(error) => {
            // Unreachable in practice: every literal is escaped.
            tracing::debug!(%regex, %error, "permission pattern did not compile");
            false
        }
    }
}

/// `path` with `.` and empty segments dropped and `dir/..` resolved, lexically; `.` when
/// nothing is left. A leading `/` is kept.
fn normalize_path(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => match segments.last() {
                Some(last) if *last != ".." => {
                    segments.pop();
                }
                _ if absolute => {}
                _ => segments.push(".."),
            },
            _ => segments.push(segment),
        }
    }
    let joined = segments.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use serde_json::json;

    use super::*;

    const CWD: &str = "/home/me/project/app";

    fn texts(list: &[&str]) -> Vec<String> {
        list.iter().map(|text| (*text).to_owned()).collect()
    }

    fn rules(allow: &[&str], ask: &[&str], deny: &[&str]) -> PermissionRules {
        PermissionRules::from_texts(&RuleTexts {
            allow: texts(allow),
            ask: texts(ask),
            deny: texts(deny),
        })
        .unwrap()
        .with_project_root("/home/me/project")
        .with_home("/home/me")
    }

    fn allow(rule: &str) -> Verdict {
        Verdict::Allow { rule: rule.into() }
    }

    fn deny(rule: &str) -> Verdict {
        Verdict::Deny { rule: rule.into() }
    }

    fn ask_rule(rule: &str) -> Verdict {
        Verdict::AskRule { rule: rule.into() }
    }

    fn cmd(command: &str) -> Value {
        json!({ "command": command })
    }

    fn path(path: &str) -> Value {
        json!({ "path": path })
    }

    #[test]
    fn claude_rules_verdict_table() {
        let bash = rules(
            &["Bash(npm test:*)", "Bash(npm run build)", "Bash(git *)"],
            &["Bash(git push:*)"],
            &["Bash(rm:*)"],
        );
        let files = rules(
            &["Edit(src/**)", "Read(/docs/**)", "Write(//tmp/x/**)"],
            &["Edit(*.lock)"],
            &["Read(~/.ssh/**)", "Read(.env)", "Edit(secrets/)"],
        );
        let whole = rules(&["Bash", "Read"], &[], &["mcp__github__delete_repo"]);
        let keel = rules(&["write_file(src/**)"], &[], &["read_file(.env)"]);
        #[rustfmt::skip]
        let cases: Vec<(&str, &PermissionRules, &str, Value, Verdict)> = vec![
            // Bash: `:*` is a prefix at a word boundary.
            ("prefix alone", &bash, "run_command", cmd("npm test"), allow("Bash(npm test:*)")),
            ("prefix with args", &bash, "run_command", cmd("npm test -- -x"), allow("Bash(npm test:*)")),
            ("prefix is a word", &bash, "run_command", cmd("npm testing"), Verdict::Ask),
            ("exact", &bash, "run_command", cmd("npm  run build"), allow("Bash(npm run build)")),
            ("exact needs all", &bash, "run_command", cmd("npm run build --prod"), Verdict::Ask),
            ("wildcard", &bash, "run_command", cmd("git status"), allow("Bash(git *)")),
            ("trailing ' *' allows the bare command", &bash, "run_command", cmd("git"), allow("Bash(git *)")),
            ("wildcard after a space is a word", &bash, "run_command", cmd("gitk"), Verdict::Ask),
            ("deny prefix", &bash, "run_command", cmd("rm -rf build"), deny("Bash(rm:*)")),
            ("deny bare", &bash, "run_command", cmd("rm"), deny("Bash(rm:*)")),
            ("deny is a word", &bash, "run_command", cmd("rmdir x"), Verdict::Ask),
            ("deny chained", &bash, "run_command", cmd("npm test && rm -rf /"), deny("Bash(rm:*)")),
            ("allow every part", &bash, "run_command", cmd("npm test | git log"), allow("Bash(npm test:*), Bash(git *)")),
            ("ask beats allow", &bash, "run_command", cmd("git push origin main"), ask_rule("Bash(git push:*)")),
            ("ask in a chain", &bash, "run_command", cmd("npm test; git push"), ask_rule("Bash(git push:*)")),
            ("deny beats ask", &bash, "run_command", cmd("git push && rm x"), deny("Bash(rm:*)")),
            ("substitution", &bash, "run_command", cmd("npm test $(curl x)"), Verdict::Ask),
            ("Bash is not read_file", &bash, "read_file", path("x"), Verdict::Ask),
            // Paths: Edit covers both editing tools, relative to the working directory.
            ("edit patch", &files, "patch_file", path("src/lib.rs"), allow("Edit(src/**)")),
            ("edit write", &files, "write_file", path("./src/a/b.rs"), allow("Edit(src/**)")),
            ("edit absolute inside", &files, "write_file", path("/home/me/project/app/src/x.rs"), allow("Edit(src/**)")),
            ("edit is not read", &files, "read_file", path("src/lib.rs"), Verdict::Ask),
            ("hostile ..", &files, "write_file", path("src/../../etc/passwd"), Verdict::Ask),
            ("hostile .. back inside", &files, "write_file", path("src/../src/x.rs"), allow("Edit(src/**)")),
            ("dir/** is the dir too", &files, "write_file", path("src"), allow("Edit(src/**)")),
            ("prefix is not a dir", &files, "write_file", path("srcx/a.rs"), Verdict::Ask),
            // `/path` is the project root, not the working directory.
            ("project root", &files, "read_file", path("../docs/a.md"), allow("Read(/docs/**)")),
            ("project root absolute", &files, "read_file", path("/home/me/project/docs/x/y.md"), allow("Read(/docs/**)")),
            ("not under the cwd's docs", &files, "read_file", path("docs/a.md"), Verdict::Ask),
            ("Read covers grep's path", &files, "grep", json!({"pattern": "x", "path": "../docs"}), allow("Read(/docs/**)")),
            ("Read covers glob's path and pattern", &files, "glob", json!({"pattern": "**/*.md", "path": "../docs"}), allow("Read(/docs/**)")),
            ("glob's pattern must stay inside", &files, "glob", json!({"pattern": "../../**", "path": "../docs"}), Verdict::Ask),
            ("glob's pattern reaching a denied dir", &files, "glob", json!({"pattern": "../../.ssh/*"}), deny("Read(~/.ssh/**)")),
            ("glob's absolute pattern", &files, "glob", json!({"pattern": "/home/me/.ssh/*"}), deny("Read(~/.ssh/**)")),
            // `~/` is the home directory, whichever way the call names the file.
            ("home absolute", &files, "read_file", path("/home/me/.ssh/id_rsa"), deny("Read(~/.ssh/**)")),
            ("home relative", &files, "read_file", path("../../.ssh/id_rsa"), deny("Read(~/.ssh/**)")),
            ("home dir itself via glob", &files, "glob", json!({"pattern": "*", "path": "/home/me/.ssh"}), deny("Read(~/.ssh/**)")),
            ("home list", &files, "list_directory", path("/home/me/.ssh/"), deny("Read(~/.ssh/**)")),
            // A name without `/` matches at any depth below the working directory.
            (".env anywhere", &files, "read_file", path("config/.env"), deny("Read(.env)")),
            (".env absolute", &files, "read_file", path("/home/me/project/app/.env"), deny("Read(.env)")),
            (".env outside the cwd", &files, "read_file", path("/srv/.env"), Verdict::Ask),
            ("*.lock asks", &files, "patch_file", path("src/Cargo.lock"), ask_rule("Edit(*.lock)")),
            ("dir/ denies inside", &files, "write_file", path("secrets/a/b"), deny("Edit(secrets/)")),
            ("dir/ at any depth", &files, "patch_file", path("src/secrets/key"), deny("Edit(secrets/)")),
            ("dir/ is the dir", &files, "write_file", path("secrets"), deny("Edit(secrets/)")),
            // `//` is an absolute path.
            ("absolute write", &files, "write_file", path("/tmp/x/y/z"), allow("Write(//tmp/x/**)")),
            ("absolute write escape", &files, "write_file", path("/tmp/x/../y"), Verdict::Ask),
            ("Write is not patch", &files, "patch_file", path("/tmp/x/y"), Verdict::Ask),
            // Whole tools.
            ("Bash whole", &whole, "run_command", cmd("echo $(date)"), allow("Bash")),
            ("Read whole", &whole, "grep", json!({"pattern": "x"}), allow("Read")),
            ("mcp deny", &whole, "mcp__github__delete_repo", json!({}), deny("mcp__github__delete_repo")),
            // keel's rules resolve paths too: an absolute path does not slip past.
            ("keel deny absolute", &keel, "read_file", path("/home/me/project/app/.env"), deny("read_file(.env)")),
            ("keel allow hostile", &keel, "write_file", path("src/../../x"), Verdict::Ask),
            ("keel allow", &keel, "write_file", path("src/a.rs"), allow("write_file(src/**)")),
        ];
        let mut failures = Vec::new();
        for (name, rules, tool, input, expected) in &cases {
            let got = rules.check(tool, input, Path::new(CWD));
            if &got != expected {
                failures.push(format!(
                    "{name}: {tool} {input} → {got:?}, expected {expected:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn without_a_home_directory_home_rules_match_nothing() {
        let rule = PermissionRule::parse("Read(~/.ssh/**)").unwrap();
        let context = RuleContext {
            cwd: CWD.into(),
            project_root: CWD.into(),
            home: None,
        };
        assert!(!rule.matches_any_part("read_file", &path("/home/me/.ssh/id_rsa"), &context));
    }

    #[test]
    fn malformed_claude_patterns_are_refused() {
        for (text, needle) in [
            ("Bash(:*)", "needs a command prefix"),
            ("Bash( :* )", "needs a command prefix"),
            ("Bash(npm:* test)", "may only end a Bash pattern"),
            ("Bash(npm *:*)", "mixes"),
            ("WebFetch(example.com)", "domain:<host>"),
            ("WebFetch(domain:)", "domain:<host>"),
            ("Read(~bob/x)", "~user"),
        ] {
            let error = PermissionRule::parse(text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text}: {error}");
            assert!(error.contains(&format!("{text:?}")), "{text}: {error}");
        }
        for text in [
            "WebFetch(domain:example.com)",
            "Bash",
            "Bash(*)",
            "Bash(npm test:*)",
            "Write(//tmp/**)",
            "Agent(Explore)",
            "mcp__github",
        ] {
            let rule = PermissionRule::parse(text).unwrap();
            assert_eq!(rule.to_string(), text);
        }
    }

    #[test]
    fn unknown_tools_are_named_with_the_known_ones() {
        let bad = rules(&["Bash(npm test:*)"], &[], &["Bsah(rm:*)"]);
        let error = bad.validate(&["my_tool"]).unwrap_err().to_string();
        assert!(
            error.starts_with("unknown tool `Bsah` in permission rule `Bsah(rm:*)`; "),
            "{error}"
        );
        assert!(
            error.contains("Claude Code's tools are Bash, Read,"),
            "{error}"
        );
        assert!(
            error.contains("keel's are run_command, read_file,"),
            "{error}"
        );
        assert!(error.contains("my_tool"), "{error}");
        let cased = rules(&["bash(ls)"], &[], &[]).validate(&[]).unwrap_err();
        assert!(
            cased.to_string().contains("(did you mean `Bash`?)"),
            "{cased}"
        );
        let unknown_keel = rules(&["git_comit"], &[], &[]).validate(&["git_commit"]);
        assert!(unknown_keel.is_err());
        let good = rules(
            &[
                "run_command(ls)",
                "my_tool",
                "mcp__x__y",
                "git_*",
                "WebSearch",
            ],
            &["Edit(src/**)"],
            &["mcp__x"],
        );
        good.validate(&["my_tool", "git_commit"]).unwrap();
        assert!(
            rules(&["nothing_*"], &[], &[])
                .validate(&["git_commit"])
                .is_err()
        );
    }

    #[test]
    fn inert_rules_are_listed_and_match_nothing() {
        let rules = rules(
            &["WebFetch(domain:example.com)", "Bash"],
            &["WebSearch"],
            &["NotebookEdit(x.ipynb)"],
        );
        let inert: Vec<String> = rules.inert_rules().map(ToString::to_string).collect();
        assert_eq!(
            inert,
            [
                "NotebookEdit(x.ipynb)",
                "WebSearch",
                "WebFetch(domain:example.com)"
            ]
        );
        let fetch = json!({ "url": "https://example.com" });
        for tool in ["WebFetch", "fetch", "web_fetch"] {
            assert_eq!(rules.check(tool, &fetch, Path::new(CWD)), Verdict::Ask);
        }
    }

    #[test]
    fn texts_round_trip_with_ask_rules_as_written() {
        let texts = RuleTexts {
            allow: texts(&["Bash(npm test:*)", "  Edit (src/**)"]),
            ask: texts(&["Bash(git push:*)"]),
            deny: texts(&["Read(~/.ssh/**)", "run_command(rm *)"]),
        };
        let rules = PermissionRules::from_texts(&texts).unwrap();
        let back = rules.texts();
        assert_eq!(back.allow, ["Bash(npm test:*)", "Edit(src/**)"]);
        assert_eq!(back.ask, ["Bash(git push:*)"]);
        assert_eq!(PermissionRules::from_texts(&back).unwrap(), rules);
        let config: RuleTexts = toml::from_str(r#"ask = ["Bash(git push:*)"]"#).unwrap();
        assert_eq!(config.ask, ["Bash(git push:*)"]);
        assert!(config.allow.is_empty() && config.deny.is_empty());
    }
}
