//! Permission rules: which tool calls run without asking, and which never run.
//!
//! A rule names a tool, optionally with a pattern matched against the call's primary argument:
//! `git_commit` matches every `git_commit` call, `run_command(cargo test*)` matches commands
//! starting with `cargo test`, `write_file(src/**)` matches writes anywhere under `src/`.
//! MCP tools are named as Claude Code names them: `mcp__github__create_issue` is one tool,
//! `mcp__github__*` (a name ending in `*` matches every tool whose name starts with the rest)
//! and `mcp__github` are every tool of the server `github`.
//! [`PermissionRules::check`] applies deny rules first, then allow rules; when neither
//! matches the verdict is [`Verdict::Ask`] and the engine decides by the call's effect.
//!
//! ```
//! use keel_engine::permissions::{PermissionRules, Verdict};
//! use serde_json::json;
//!
//! let rules = PermissionRules::parse(
//!     &["run_command(cargo test*)".into()],
//!     &["run_command(rm -rf*)".into()],
//! )?;
//! let run = |command: &str| rules.check("run_command", &json!({ "command": command }));
//! assert!(matches!(run("cargo test -p app"), Verdict::Allow { .. }));
//! assert!(matches!(run("cargo test && rm -rf /"), Verdict::Deny { .. }));
//! assert_eq!(run("cargo test && make"), Verdict::Ask);
//! # Ok::<(), keel_engine::permissions::PermissionError>(())
//! ```
//!
//! # Primary argument
//!
//! `run_command` → `command`; `read_file`, `write_file`, `patch_file`, `list_directory`,
//! `git_diff` → `path`; `grep`, `glob` → `pattern`; any other tool → the first of `command`,
//! `path`, `pattern`, `url` that the call has as a string. A rule with a pattern never matches
//! a call without that argument; a rule without one matches every call of its tool.
//!
//! # Patterns
//!
//! Everything is literal except `*`, and a pattern must match the whole argument, so a
//! pattern without `*` matches exactly.
//!
//! - Paths (the `path` argument): `*` matches within one path segment (no `/`), `**` matches
//!   across segments, and `**/` also matches nothing (`**/.env` matches `.env` and `a/b/.env`).
//!   Paths and patterns are normalized lexically before matching: `./` and empty segments are
//!   dropped and `dir/..` is resolved, so `./src/../.env` is `.env`. Absolute paths are
//!   matched as given.
//! - Commands and other text: `*` matches any run of characters, `/` included (and
//!   redirections: `cargo test*` allows `cargo test > out.txt`). Runs of whitespace count as
//!   one space.
//!
//! # Commands
//!
//! A command is split into sub-commands at `&&`, `||`, `;`, `|`, `&`, newlines, `(`, `)`,
//! `$(`, `<(`, `>(` and backticks (quotes are not interpreted, so a quoted separator splits
//! too: splitting more only makes rules stricter). A deny rule denies the command if it
//! matches any sub-command; allow rules allow it only if every sub-command matches one of
//! them, so `run_command(cargo test*)` does not allow `cargo test && rm -rf /`. A command
//! with command substitution (`$(`, backticks, `<(`, `>(`) is allowed only by a rule whose
//! pattern is `*` or absent.
//!
//! Deny rules match commands as written: `rm -rf*` does not catch `/bin/rm -rf` or
//! `sh -c 'rm -rf /'`. They are a guard against mistakes, not a sandbox; the sandbox policy
//! is what confines commands.

use std::fmt;
use std::str::FromStr;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a permission rule is invalid.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PermissionError {
    /// The rule's text is not `tool` or `tool(pattern)`.
    #[error(
        "invalid permission rule {rule:?}: {reason}; write rules like run_command(cargo test*) \
         or git_commit"
    )]
    Invalid {
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// One permission rule: a tool name, optionally with a pattern for the call's primary
/// argument. Written `tool` or `tool(pattern)`; [`Display`](fmt::Display) gives that text
/// back, and serde reads and writes it as that string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PermissionRule {
    /// The tool it applies to (`^[a-zA-Z0-9_-]{1,64}$`), or tools: a name ending in `*` is a
    /// prefix, and `mcp__<server>` stands for every tool of that MCP server.
    pub tool: String,
    /// Matched against the call's primary argument; `None` matches every call of the tool.
    pub pattern: Option<String>,
}

impl PermissionRule {
    /// Parses `tool` or `tool(pattern)`; surrounding whitespace is ignored.
    ///
    /// ```
    /// use keel_engine::permissions::PermissionRule;
    ///
    /// let rule = PermissionRule::parse("write_file(src/**)")?;
    /// assert_eq!(rule.tool, "write_file");
    /// assert_eq!(rule.pattern.as_deref(), Some("src/**"));
    /// assert_eq!(rule.to_string(), "write_file(src/**)");
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
        Ok(Self {
            tool: tool.to_owned(),
            pattern,
        })
    }

    /// Whether the rule's tool name covers `tool`: the same name; a name ending in `*` whose
    /// rest starts `tool`; or `mcp__<server>` for `mcp__<server>__<any tool>`.
    pub fn covers_tool(&self, tool: &str) -> bool {
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
    /// matches and, if the rule has a pattern, so does the call's primary argument. For
    /// `run_command` every sub-command must match, and a command with command substitution
    /// matches only a pattern of `*`.
    pub fn matches(&self, tool: &str, input: &Value) -> bool {
        if !self.covers_tool(tool) {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        match primary_argument(tool, input) {
            None => false,
            Some(Argument::Command(command)) => {
                (pattern == "*" || !has_substitution(command))
                    && sub_commands(command)
                        .iter()
                        .all(|part| text_matches(pattern, part))
            }
            Some(Argument::Path(path)) => path_matches(pattern, path),
            Some(Argument::Text(text)) => text_matches(pattern, text),
        }
    }

    /// Whether this rule matches any part of the call, as deny rules are applied: like
    /// [`matches`](Self::matches), except that for `run_command` one matching sub-command is
    /// enough (and command substitution is no obstacle).
    pub fn matches_any_part(&self, tool: &str, input: &Value) -> bool {
        if !self.covers_tool(tool) {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        match primary_argument(tool, input) {
            Some(Argument::Command(command)) => sub_commands(command)
                .iter()
                .any(|part| text_matches(pattern, part)),
            _ => self.matches(tool, input),
        }
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
    /// Allow rules cover the whole call: it runs without asking.
    Allow {
        /// The rule that matched, as written; for a command whose sub-commands matched
        /// different rules, those rules joined with `, `.
        rule: String,
    },
    /// No rule decides: the engine decides by the call's effect.
    Ask,
}

/// A set of allow and deny rules; deny wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PermissionRules {
    /// Calls these cover run without asking.
    pub allow: Vec<PermissionRule>,
    /// Calls these match never run.
    pub deny: Vec<PermissionRule>,
}

impl PermissionRules {
    /// Parses the rules as written in configuration; the first invalid one is the error.
    pub fn parse(allow: &[String], deny: &[String]) -> Result<Self, PermissionError> {
        let parse_all = |texts: &[String]| -> Result<Vec<PermissionRule>, PermissionError> {
            texts
                .iter()
                .map(|text| PermissionRule::parse(text))
                .collect()
        };
        Ok(Self {
            allow: parse_all(allow)?,
            deny: parse_all(deny)?,
        })
    }

    /// The allow and deny rules as texts (`tool` or `tool(pattern)`), in order: what
    /// [`PermissionRules::parse`] reads back into the same rules, e.g. in another process.
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
        let texts = |rules: &[PermissionRule]| rules.iter().map(ToString::to_string).collect();
        (texts(&self.allow), texts(&self.deny))
    }

    /// The verdict for calling `tool` with `input`: [`Verdict::Deny`] if a deny rule matches
    /// any part of the call, else [`Verdict::Allow`] if allow rules cover all of it, else
    /// [`Verdict::Ask`].
    pub fn check(&self, tool: &str, input: &Value) -> Verdict {
        if let Some(rule) = self
            .deny
            .iter()
            .find(|rule| rule.matches_any_part(tool, input))
        {
            return Verdict::Deny {
                rule: rule.to_string(),
            };
        }
        if let Some(rule) = self.allow.iter().find(|rule| rule.matches(tool, input)) {
            return Verdict::Allow {
                rule: rule.to_string(),
            };
        }
        // A command whose sub-commands are each covered by some allow rule.
        if let Some(Argument::Command(command)) = primary_argument(tool, input) {
            if has_substitution(command) {
                return Verdict::Ask;
            }
            let mut used: Vec<String> = Vec::new();
            for part in sub_commands(command) {
                let single = Value::from(serde_json::Map::from_iter([(
                    "command".to_owned(),
                    Value::from(part),
                )]));
                let Some(rule) = self.allow.iter().find(|rule| rule.matches(tool, &single)) else {
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

fn primary_argument<'a>(tool: &str, input: &'a Value) -> Option<Argument<'a>> {
    let get = |key: &str| input.get(key).and_then(Value::as_str);
    match tool {
        "run_command" => get("command").map(Argument::Command),
        "read_file" | "write_file" | "patch_file" | "list_directory" | "git_diff" => {
            get("path").map(Argument::Path)
        }
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

/// Whether the path pattern matches all of `path`: `*` stays within a segment, `**` crosses
/// segments, `**/` may match nothing. Both are normalized first.
fn path_matches(pattern: &str, path: &str) -> bool {
    let pattern = normalize_path(pattern);
    let path = normalize_path(path);
    let mut regex = String::from("(?s)^");
    let mut rest = pattern.as_str();
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
    regex.push('$');
    regex_matches(&regex, &path)
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
