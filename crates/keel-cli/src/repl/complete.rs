//! Tab completion at the prompt: slash commands, their arguments (agent, team, skill, model
//! names, session ids) and paths.
//!
//! What a word completes to is decided by [`complete`], from the line, the cursor and the
//! [`Vocabulary`]; paths are listed through the file tools' [`PathSandbox`], so a completion
//! never shows a name outside the sandbox's read roots: a `../../etc/` or `/etc/` prefix, and
//! a symlink pointing out, complete to nothing. [`PromptHelper`] hands it to the line editor.

use std::sync::Arc;

use keel::CodingAgent;
use keel::sandbox::{Access, PathSandbox};
use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

use super::commands::HELP;
use crate::sessions;
use keel_config::Settings;

/// The most candidates a path completion offers.
const MAX_PATHS: usize = 500;
/// The most session ids `/resume` completes (this directory's newest).
const SESSIONS_COMPLETED: usize = 50;

/// The words a line may complete to, besides paths.
#[derive(Debug, Clone, Default)]
pub(super) struct Vocabulary {
    /// The slash commands, with their `/`.
    pub commands: Vec<String>,
    /// Sub-agent names, for `/agent`.
    pub agents: Vec<String>,
    /// Team names, for `/team`.
    pub teams: Vec<String>,
    /// Skill names, for `/skills`.
    pub skills: Vec<String>,
    /// Model names from the catalog, for `/model`.
    pub models: Vec<String>,
}

/// Where the session ids `/resume` completes come from (read only when asked: listing
/// sessions reads their files).
pub(super) type SessionIds = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// What a Tab at a position completes: the byte where the replaced word starts, and the
/// candidates (what is shown, what replaces the word).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Completion {
    /// Where the word being completed starts.
    pub start: usize,
    /// `(shown, replacement)` pairs, sorted.
    pub candidates: Vec<(String, String)>,
}

/// What `line` with the cursor at `pos` completes to: a command name for a first word
/// starting with `/`, a command's argument for its second word, a path for a word starting
/// with `@` or holding a `/`; nothing otherwise.
pub(super) fn complete(
    line: &str,
    pos: usize,
    vocabulary: &Vocabulary,
    sessions: &dyn Fn() -> Vec<String>,
    paths: Option<&PathSandbox>,
) -> Completion {
    let pos = floor_char_boundary(line, pos);
    let head = &line[..pos];
    let start = head.rfind(char::is_whitespace).map_or(0, |i| {
        i + head[i..].chars().next().map_or(1, char::len_utf8)
    });
    let word = &head[start..];
    let before: Vec<&str> = head[..start].split_whitespace().collect();
    let candidates = match before.as_slice() {
        [] if word.starts_with('/') && !word[1..].contains('/') => {
            words(word, vocabulary.commands.iter().map(String::as_str))
        }
        [command] if command.starts_with('/') => match *command {
            "/agent" => words(word, vocabulary.agents.iter().map(String::as_str)),
            "/team" => words(word, vocabulary.teams.iter().map(String::as_str)),
            "/skills" => words(word, vocabulary.skills.iter().map(String::as_str)),
            "/model" => words(word, vocabulary.models.iter().map(String::as_str)),
            "/mode" => words(word, keel_config::LiveMode::CYCLE.iter().map(|m| m.name())),
            "/resume" => words(word, sessions().iter().map(String::as_str)),
            _ => path_words(word, paths),
        },
        _ => path_words(word, paths),
    };
    Completion { start, candidates }
}

/// The names in `names` that start with `word`, sorted, each shown and inserted as is.
fn words<'a>(word: &str, names: impl Iterator<Item = &'a str>) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = names
        .filter(|name| name.starts_with(word) && printable_name(name))
        .map(|name| (name.to_owned(), name.to_owned()))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Paths for `word` when it looks like one: `@path` (a mention) or a word holding a `/`.
fn path_words(word: &str, paths: Option<&PathSandbox>) -> Vec<(String, String)> {
    let Some(sandbox) = paths else {
        return Vec::new();
    };
    if let Some(path) = word.strip_prefix('@') {
        return complete_path(path, sandbox)
            .into_iter()
            .map(|(shown, path)| (shown, format!("@{path}")))
            .collect();
    }
    if word.contains('/') {
        return complete_path(word, sandbox);
    }
    Vec::new()
}

/// The entries of the directory `prefix` names (up to its last `/`; the session's working
/// directory when it has none) whose names start with the rest, each checked against the
/// sandbox's read roots: `(name shown, path)`, directories ending in `/`. Hidden entries only
/// when the rest starts with a dot. At most [`MAX_PATHS`], the first by name.
pub(super) fn complete_path(prefix: &str, sandbox: &PathSandbox) -> Vec<(String, String)> {
    let (dir, stem) = match prefix.rfind('/') {
        Some(i) => prefix.split_at(i + 1),
        None => ("", prefix),
    };
    let dir_given = if dir.is_empty() { "." } else { dir };
    let Ok(resolved) = sandbox.resolve(dir_given, Access::Read) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(resolved.absolute()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.starts_with(stem) && (!name.starts_with('.') || stem.starts_with('.')))
        .filter(|name| printable_name(name))
        .collect();
    names.sort_unstable();
    let mut found = Vec::new();
    for name in names {
        let path = format!("{dir}{name}");
        // Each entry is checked as a read would be: a symlink leading out is left out.
        let Ok(target) = sandbox.resolve(&path, Access::Read) else {
            continue;
        };
        if target.absolute().is_dir() {
            found.push((format!("{name}/"), format!("{path}/")));
        } else {
            found.push((name, path));
        }
        if found.len() >= MAX_PATHS {
            break;
        }
    }
    found
}

/// Whether `name` may be shown and put on the line: no control characters (a file name or a
/// definition from the repository could carry an escape sequence).
fn printable_name(name: &str) -> bool {
    !name.chars().any(char::is_control)
}

/// `names` as owned strings.
fn owned<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    names.into_iter().map(str::to_owned).collect()
}

/// The largest char boundary at or before `pos`.
fn floor_char_boundary(line: &str, pos: usize) -> usize {
    let mut pos = pos.min(line.len());
    while !line.is_char_boundary(pos) {
        pos -= 1;
    }
    pos
}

/// The prompt's helper for the line editor: completion from a [`Vocabulary`] and the path
/// sandbox; no hints, highlighting or validation.
#[derive(Clone)]
pub(super) struct PromptHelper {
    /// The words.
    pub vocabulary: Arc<Vocabulary>,
    /// Session ids for `/resume`.
    pub sessions: SessionIds,
    /// The read roots paths complete in; `None`: no path completion.
    pub paths: Option<Arc<PathSandbox>>,
}

impl PromptHelper {
    /// What Tab completes in the session `setup` and `coding` make: the commands `/help`
    /// lists, the delegates' names, the catalog's models, this directory's sessions, and
    /// paths inside the file tools' read roots.
    pub(super) fn for_session(
        setup: &Settings,
        coding: &CodingAgent,
        custom: &keel::agents::commands::SlashCommands,
    ) -> Self {
        let commands = HELP
            .iter()
            .flat_map(|(names, _)| names.split(", "))
            .filter_map(|name| name.split_whitespace().next())
            .map(str::to_owned)
            .chain(
                custom
                    .list()
                    .iter()
                    .map(|command| format!("/{}", command.name)),
            );
        let mut vocabulary = Vocabulary {
            commands: commands.collect(),
            // The config's models (`[models.NAME]`) beside the built-in ones.
            models: owned(setup.catalog.ids()),
            ..Vocabulary::default()
        };
        if let Some(delegates) = coding.delegates() {
            let agents = delegates.runner().definitions().all();
            vocabulary.agents = owned(agents.iter().map(|agent| agent.name.as_str()));
            let teams = delegates.teams().all();
            vocabulary.teams = owned(teams.iter().map(|team| team.name.as_str()));
            vocabulary.skills = owned(delegates.skills().names());
        }
        let (store, cwd) = (setup.store.clone(), setup.cwd.clone());
        let sessions: SessionIds = Arc::new(move || {
            sessions::of_dir(store.as_ref(), &cwd, SESSIONS_COMPLETED)
                .map(|listed| listed.into_iter().map(|summary| summary.meta.id).collect())
                .unwrap_or_default()
        });
        Self {
            vocabulary: Arc::new(vocabulary),
            sessions,
            paths: Some(Arc::new(coding.path_sandbox().clone())),
        }
    }

    /// Completes nothing (before the agent is built).
    pub(super) fn empty() -> Self {
        Self {
            vocabulary: Arc::new(Vocabulary::default()),
            sessions: Arc::new(Vec::new),
            paths: None,
        }
    }
}

impl Completer for PromptHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let found = complete(
            line,
            pos,
            &self.vocabulary,
            self.sessions.as_ref(),
            self.paths.as_deref(),
        );
        let candidates = found
            .candidates
            .into_iter()
            .map(|(display, replacement)| Pair {
                display,
                replacement,
            })
            .collect();
        Ok((found.start, candidates))
    }
}

impl Hinter for PromptHelper {
    type Hint = String;
}

impl Highlighter for PromptHelper {
    fn highlight_candidate<'c>(
        &self,
        candidate: &'c str,
        _: rustyline::CompletionType,
    ) -> std::borrow::Cow<'c, str> {
        // A file name is untrusted text: no escape sequence reaches the terminal.
        std::borrow::Cow::Owned(super::view::printable(candidate))
    }
}

impl Validator for PromptHelper {}

impl Helper for PromptHelper {}

/// The shown text of a candidate (for tests).
#[cfg(test)]
fn shown(completion: &Completion) -> Vec<&str> {
    completion
        .candidates
        .iter()
        .map(|(shown, _)| shown.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary() -> Vocabulary {
        let strings = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect();
        Vocabulary {
            commands: strings(&["/agent", "/agents", "/help", "/model", "/resume", "/team"]),
            agents: strings(&["planner", "reviewer"]),
            teams: strings(&["duo"]),
            skills: strings(&["release"]),
            models: strings(&["claude-haiku-4-5", "claude-sonnet-4-5", "gpt-4o"]),
        }
    }

    fn no_sessions() -> Vec<String> {
        Vec::new()
    }

    /// A workspace with files, a hidden one, a directory, and a directory beside it that is
    /// outside the sandbox.
    fn workspace() -> (tempfile::TempDir, PathSandbox) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("work");
        std::fs::create_dir_all(root.join("src/bin")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "").unwrap();
        std::fs::write(root.join("src/list.rs"), "").unwrap();
        std::fs::write(root.join("README.md"), "").unwrap();
        std::fs::write(root.join(".env"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/secret.txt"), "").unwrap();
        let sandbox = PathSandbox::new(&root).unwrap();
        (dir, sandbox)
    }

    #[test]
    fn a_first_word_with_a_slash_completes_commands() {
        let found = complete("/ag", 3, &vocabulary(), &no_sessions, None);
        assert_eq!(found.start, 0);
        assert_eq!(shown(&found), ["/agent", "/agents"]);
        assert!(
            complete("/zz", 3, &vocabulary(), &no_sessions, None)
                .candidates
                .is_empty()
        );
        // Not the first word: no command.
        assert!(
            complete("x /ag", 5, &vocabulary(), &no_sessions, None)
                .candidates
                .is_empty()
        );
    }

    #[test]
    fn arguments_complete_from_their_command_s_names() {
        let v = vocabulary();
        let found = complete("/agent pl", 9, &v, &no_sessions, None);
        assert_eq!((found.start, shown(&found)), (7, vec!["planner"]));
        assert_eq!(
            shown(&complete("/team ", 6, &v, &no_sessions, None)),
            ["duo"]
        );
        assert_eq!(
            shown(&complete("/skills r", 9, &v, &no_sessions, None)),
            ["release"]
        );
        assert_eq!(
            shown(&complete("/model claude-", 14, &v, &no_sessions, None)),
            ["claude-haiku-4-5", "claude-sonnet-4-5"]
        );
        let sessions = || vec!["20260101T000000-abcdef".to_owned()];
        assert_eq!(
            shown(&complete("/resume 2026", 12, &v, &sessions, None)),
            ["20260101T000000-abcdef"]
        );
        // The task after the name is free text.
        assert!(
            complete("/agent planner do", 17, &v, &no_sessions, None)
                .candidates
                .is_empty()
        );
    }

    #[test]
    fn mentions_and_words_with_a_slash_complete_paths_inside_the_workspace() {
        let (_dir, sandbox) = workspace();
        let v = vocabulary();
        let found = complete("explain @sr", 11, &v, &no_sessions, Some(&sandbox));
        assert_eq!(found.start, 8);
        assert_eq!(found.candidates, [("src/".to_owned(), "@src/".to_owned())]);
        let found = complete("look at src/li", 14, &v, &no_sessions, Some(&sandbox));
        assert_eq!(
            found.candidates,
            [
                ("lib.rs".to_owned(), "src/lib.rs".to_owned()),
                ("list.rs".to_owned(), "src/list.rs".to_owned())
            ]
        );
        // Hidden files only when asked for.
        assert_eq!(
            shown(&complete("@", 1, &v, &no_sessions, Some(&sandbox))),
            ["README.md", "src/"]
        );
        assert_eq!(
            shown(&complete("@.e", 3, &v, &no_sessions, Some(&sandbox))),
            [".env"]
        );
        // A plain word is not a path.
        assert!(
            complete("src", 3, &v, &no_sessions, Some(&sandbox))
                .candidates
                .is_empty()
        );
    }

    #[test]
    fn nothing_outside_the_read_roots_is_ever_listed() {
        let (dir, sandbox) = workspace();
        let root = sandbox.root().to_path_buf();
        std::os::unix::fs::symlink(dir.path().join("outside"), root.join("out")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside/secret.txt"), root.join("s.txt"))
            .unwrap();
        let v = vocabulary();
        for line in [
            "@../",
            "@../outside/",
            "@../../etc/",
            "@../../../../../../etc/pas",
            "@/etc/",
            "@/etc/pas",
            "../outside/se",
            "/etc/pa",
            "@out/",
            "@out/se",
            "see out/",
            "@src/../../outside/",
        ] {
            let found = complete(line, line.len(), &v, &no_sessions, Some(&sandbox));
            assert!(found.candidates.is_empty(), "{line}: {found:?}");
        }
        // The symlinks themselves lead out: they are not offered either.
        let found = complete("@", 1, &v, &no_sessions, Some(&sandbox));
        assert_eq!(shown(&found), ["README.md", "src/"]);
        let found = complete("@s", 2, &v, &no_sessions, Some(&sandbox));
        assert_eq!(shown(&found), ["src/"]);
    }

    #[test]
    fn names_with_control_characters_are_never_offered() {
        let (_dir, sandbox) = workspace();
        std::fs::write(sandbox.root().join("evil\x1b[2J.txt"), "").unwrap();
        std::fs::write(sandbox.root().join("evil.txt"), "").unwrap();
        let found = complete("@ev", 3, &vocabulary(), &no_sessions, Some(&sandbox));
        assert_eq!(shown(&found), ["evil.txt"]);
        let mut v = vocabulary();
        v.agents.push("plan\x1b]0;x\x07".into());
        assert_eq!(
            shown(&complete("/agent pl", 9, &v, &no_sessions, None)),
            ["planner"]
        );
    }

    #[test]
    fn a_cursor_inside_a_character_does_not_panic() {
        let found = complete("@é", 2, &vocabulary(), &no_sessions, None);
        assert!(found.candidates.is_empty());
    }
}
