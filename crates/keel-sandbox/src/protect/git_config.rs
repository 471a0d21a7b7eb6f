//! A small reader of git config files, for one question: which directories `core.hooksPath`
//! may name for a repository. The answer over-approximates: every value found in any file
//! git could read (the repository's `config` and `config.worktree`, the global and system
//! files, the `GIT_CONFIG_COUNT` environment pairs, and every file they include, whatever an
//! `includeIf` condition says), not only the one that wins. Protecting a directory too many
//! is safe; missing one is not.
//!
//! The syntax is git's: `[section]`, `[section "subsection"]`, legacy `[section.sub]`,
//! section and key names case-insensitive, `key = value` and bare `key` (true, no path),
//! `#` and `;` comments outside quotes, double quotes, the escapes `\" \\ \n \t \b`, a
//! trailing `\` continuing the value on the next line, surrounding whitespace trimmed. What
//! git would reject (an unknown escape, an unclosed quote, a broken header) is read leniently:
//! git refuses such a file altogether, so no reading of it misses a hook git would run.
//!
//! Files are read up to [`MAX_FILE_BYTES`]; missing or unreadable ones are skipped; includes
//! are followed [`MAX_INCLUDE_DEPTH`] deep, each file read once, at most 256 from each
//! starting file. Nothing here panics, on any input.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The most bytes read of one config file.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;
/// How deep includes are followed (git's own limit).
pub(crate) const MAX_INCLUDE_DEPTH: usize = 10;
/// The most files read from one starting file (itself and what it includes), so that one
/// file's includes cannot keep the others from being read.
const MAX_FILES: usize = 256;
/// The most `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>` pairs read.
const MAX_ENV_PAIRS: usize = 1024;

/// What of the environment git's config depends on, read once from the process
/// ([`GitEnv::from_process`]) or given whole (tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GitEnv {
    /// `$HOME`: `~/.gitconfig`, and `~/` in values and include paths.
    pub(crate) home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (its `git/config`; default `~/.config`).
    pub(crate) xdg_config_home: Option<PathBuf>,
    /// `$GIT_CONFIG_GLOBAL`: the only global file when set.
    pub(crate) global: Option<PathBuf>,
    /// `$GIT_CONFIG_SYSTEM` (default `/etc/gitconfig`).
    pub(crate) system: Option<PathBuf>,
    /// `$GIT_CONFIG_NOSYSTEM` is true: no system file.
    pub(crate) nosystem: bool,
    /// The `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>` pairs, `n` below `GIT_CONFIG_COUNT`.
    pub(crate) pairs: Vec<(OsString, OsString)>,
}

impl GitEnv {
    /// The environment of this process.
    pub(crate) fn from_process() -> Self {
        Self::from_vars(|name| std::env::var_os(name))
    }

    /// The environment `var` gives (empty variables count as unset).
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Self {
        let path = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let count = var("GIT_CONFIG_COUNT")
            .and_then(|count| count.to_str()?.trim().parse::<usize>().ok())
            .unwrap_or(0)
            .min(MAX_ENV_PAIRS);
        let pairs = (0..count)
            .filter_map(|n| {
                Some((
                    var(&format!("GIT_CONFIG_KEY_{n}"))?,
                    var(&format!("GIT_CONFIG_VALUE_{n}"))?,
                ))
            })
            .collect();
        Self {
            home: path("HOME"),
            xdg_config_home: path("XDG_CONFIG_HOME"),
            global: path("GIT_CONFIG_GLOBAL"),
            system: path("GIT_CONFIG_SYSTEM"),
            nosystem: var("GIT_CONFIG_NOSYSTEM").is_some_and(|v| is_true(&v)),
            pairs,
        }
    }

    /// The global and system files git reads under this environment.
    fn files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        if let Some(global) = &self.global {
            files.push(global.clone());
        } else {
            let xdg = self
                .xdg_config_home
                .clone()
                .or_else(|| self.home.as_ref().map(|home| home.join(".config")));
            files.extend(xdg.map(|dir| dir.join("git/config")));
            files.extend(self.home.as_ref().map(|home| home.join(".gitconfig")));
        }
        if !self.nosystem {
            files.push(
                self.system
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("/etc/gitconfig")),
            );
        }
        files
    }

    /// `value` with a leading `~/` (or a lone `~`) taken from `$HOME`; `None` when it has one
    /// and there is no home.
    pub(crate) fn expand_home(&self, value: &Path) -> Option<PathBuf> {
        let bytes = value.as_os_str().as_bytes();
        if bytes == b"~" {
            return self.home.clone();
        }
        match bytes.strip_prefix(b"~/") {
            Some(rest) => Some(self.home.as_ref()?.join(std::ffi::OsStr::from_bytes(rest))),
            None => Some(value.to_path_buf()),
        }
    }
}

/// Whether git takes `value` as a true boolean (`true`, `yes`, `on`, a non-zero integer).
/// Anything else, unclear values included, is false: the system file is then read.
fn is_true(value: &std::ffi::OsStr) -> bool {
    let Some(text) = value.to_str() else {
        return false;
    };
    let text = text.trim();
    ["true", "yes", "on"]
        .iter()
        .any(|word| text.eq_ignore_ascii_case(word))
        || text.parse::<i64>().is_ok_and(|n| n != 0)
}

/// Every non-empty `core.hooksPath` value, as written (not yet expanded), in `repo_files`
/// (the repository's own config files), the global and system files of `env`, `env`'s
/// pairs, and everything they include.
pub(crate) fn hooks_path_values(repo_files: &[PathBuf], env: &GitEnv) -> Vec<PathBuf> {
    let mut reader = Reader {
        env,
        seen: Vec::new(),
        budget: MAX_FILES,
        values: Vec::new(),
    };
    for file in repo_files.iter().chain(env.files().iter()) {
        reader.budget = MAX_FILES;
        reader.read_file(file, 0);
    }
    for (key, value) in &env.pairs {
        reader.budget = MAX_FILES;
        let entry = Entry::from_key(key.as_bytes(), Some(value.as_bytes().to_vec()));
        // Include paths from the environment have no file to be relative to: git takes only
        // absolute ones (and `~/`).
        reader.take(entry, None, 0);
    }
    reader.values
}

/// Reads config files, collecting `core.hooksPath` values.
struct Reader<'a> {
    env: &'a GitEnv,
    /// Files already read (resolved): each is read once, so include cycles end.
    seen: Vec<PathBuf>,
    /// How many more files may be read from the current starting file.
    budget: usize,
    values: Vec<PathBuf>,
}

impl Reader<'_> {
    /// Reads `path` (included `depth` deep), if it can be read.
    fn read_file(&mut self, path: &Path, depth: usize) {
        if depth > MAX_INCLUDE_DEPTH || self.budget == 0 {
            return;
        }
        let Ok(real) = std::fs::canonicalize(path) else {
            return;
        };
        if self.seen.contains(&real) {
            return;
        }
        self.seen.push(real.clone());
        self.budget -= 1;
        let Some(text) = read_capped(&real) else {
            return;
        };
        let base = real.parent().map(Path::to_path_buf);
        for entry in parse(&text) {
            self.take(entry, base.as_deref(), depth);
        }
    }

    /// Takes one entry of a file in directory `base` (`None`: from the environment).
    fn take(&mut self, entry: Entry, base: Option<&Path>, depth: usize) {
        let (hooks, include) = (entry.is_hooks_path(), entry.is_include());
        let Some(value) = entry.value.filter(|value| !value.is_empty()) else {
            return;
        };
        let value = PathBuf::from(OsString::from_vec(value));
        if hooks {
            if !self.values.contains(&value) {
                self.values.push(value);
            }
        } else if include && let Some(path) = self.env.expand_home(&value) {
            let path = match base {
                _ if path.is_absolute() => path,
                Some(base) => base.join(path),
                None => return,
            };
            self.read_file(&path, depth + 1);
        }
    }
}

/// The first [`MAX_FILE_BYTES`] of the regular file at `path`. Opened without blocking: an
/// include naming a FIFO (or a terminal) must not hang keel's start; it is skipped.
fn read_capped(path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut text).ok()?;
    Some(text)
}

/// One `key = value` of a config file, with its section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The section name, lowercased.
    pub(crate) section: String,
    /// The subsection: as written in `[section "sub"]`, lowercased in legacy `[section.sub]`.
    pub(crate) subsection: Option<Vec<u8>>,
    /// The key name, lowercased.
    pub(crate) name: String,
    /// The value; `None` for a bare key.
    pub(crate) value: Option<Vec<u8>>,
}

impl Entry {
    /// The entry of a dotted key, `section[.subsection].name`, as in `GIT_CONFIG_KEY_<n>`.
    fn from_key(key: &[u8], value: Option<Vec<u8>>) -> Self {
        let lower = |bytes: &[u8]| String::from_utf8_lossy(bytes).to_ascii_lowercase();
        let first = key.iter().position(|&b| b == b'.');
        let last = key.iter().rposition(|&b| b == b'.');
        match (first, last) {
            (Some(first), Some(last)) => Self {
                section: lower(key.get(..first).unwrap_or_default()),
                subsection: (first < last)
                    .then(|| key.get(first + 1..last).unwrap_or_default().to_vec()),
                name: lower(key.get(last + 1..).unwrap_or_default()),
                value,
            },
            _ => Self {
                section: String::new(),
                subsection: None,
                name: lower(key),
                value,
            },
        }
    }

    fn is_hooks_path(&self) -> bool {
        self.section == "core" && self.subsection.is_none() && self.name == "hookspath"
    }

    /// `include.path`, or `includeIf.<condition>.path` whatever the condition (and any
    /// subsection of `include`: over-approximation).
    fn is_include(&self) -> bool {
        (self.section == "include" || self.section == "includeif") && self.name == "path"
    }
}

/// The bytes of a config file, one at a time; `\r\n` reads as `\n`.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The byte last read.
    last: Option<u8>,
}

impl Cursor<'_> {
    /// The next byte, `None` at the end.
    fn next(&mut self) -> Option<u8> {
        let mut byte = *self.bytes.get(self.pos)?;
        self.pos += 1;
        if byte == b'\r' && self.bytes.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            byte = b'\n';
        }
        self.last = Some(byte);
        Some(byte)
    }

    fn peek(&self) -> Option<u8> {
        let byte = *self.bytes.get(self.pos)?;
        if byte == b'\r' && self.bytes.get(self.pos + 1) == Some(&b'\n') {
            return Some(b'\n');
        }
        Some(byte)
    }

    /// Skips to just after the end of the line.
    fn skip_line(&mut self) {
        while let Some(byte) = self.next() {
            if byte == b'\n' {
                break;
            }
        }
    }
}

/// The section of the entries that follow: (name, subsection).
type Section = (String, Option<Vec<u8>>);

/// The entries of a config file's text, in order; entries before any section, and lines git
/// would reject, are skipped.
pub(crate) fn parse(text: &[u8]) -> Vec<Entry> {
    let mut cursor = Cursor {
        bytes: text,
        pos: 0,
        last: None,
    };
    let mut entries = Vec::new();
    let mut section: Option<Section> = None;
    while let Some(byte) = cursor.next() {
        match byte {
            b'\n' => {}
            _ if byte.is_ascii_whitespace() => {}
            b'#' | b';' => cursor.skip_line(),
            b'[' => {
                section = parse_section(&mut cursor);
                // A broken header ends its line; never the next one.
                if section.is_none() && cursor.last != Some(b'\n') {
                    cursor.skip_line();
                }
            }
            _ if byte.is_ascii_alphabetic() => {
                let (name, value) = parse_entry(&mut cursor, byte);
                if let Some((section, subsection)) = &section {
                    entries.push(Entry {
                        section: section.clone(),
                        subsection: subsection.clone(),
                        name,
                        value,
                    });
                }
            }
            _ => cursor.skip_line(),
        }
    }
    entries
}

/// A section header after its `[`, up to and including its `]`; `None` when malformed.
fn parse_section(cursor: &mut Cursor<'_>) -> Option<Section> {
    let mut name = Vec::new();
    loop {
        let byte = cursor.next()?;
        match byte {
            b']' => break,
            b' ' | b'\t' => {
                let sub = parse_subsection(cursor)?;
                return Some((String::from_utf8_lossy(&name).into_owned(), Some(sub)));
            }
            _ if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.' => {
                name.push(byte.to_ascii_lowercase());
            }
            _ => return None,
        }
    }
    // Legacy `[section.sub]`: the part after the first dot is the subsection (lowercased).
    match name.iter().position(|&b| b == b'.') {
        Some(dot) => Some((
            String::from_utf8_lossy(name.get(..dot).unwrap_or_default()).into_owned(),
            Some(name.get(dot + 1..).unwrap_or_default().to_vec()),
        )),
        None => Some((String::from_utf8_lossy(&name).into_owned(), None)),
    }
}

/// `"subsection"]` after the section name's whitespace (escaped characters stand for
/// themselves); `None` when malformed.
fn parse_subsection(cursor: &mut Cursor<'_>) -> Option<Vec<u8>> {
    let mut byte = cursor.next()?;
    while byte == b' ' || byte == b'\t' {
        byte = cursor.next()?;
    }
    if byte != b'"' {
        return None;
    }
    let mut sub = Vec::new();
    loop {
        match cursor.next()? {
            b'\n' => return None,
            b'"' => break,
            b'\\' => match cursor.next()? {
                b'\n' => return None,
                escaped => sub.push(escaped),
            },
            other => sub.push(other),
        }
    }
    (cursor.next()? == b']').then_some(sub)
}

/// A key whose first letter `first` was read, and its value: `(name, None)` for a bare key.
fn parse_entry(cursor: &mut Cursor<'_>, first: u8) -> (String, Option<Vec<u8>>) {
    let mut name = vec![first.to_ascii_lowercase()];
    while let Some(byte) = cursor.peek()
        && (byte.is_ascii_alphanumeric() || byte == b'-')
    {
        name.push(byte.to_ascii_lowercase());
        cursor.pos += 1;
    }
    let name = String::from_utf8_lossy(&name).into_owned();
    while matches!(cursor.peek(), Some(b' ' | b'\t')) {
        cursor.pos += 1;
    }
    if cursor.peek() == Some(b'=') {
        cursor.pos += 1;
        (name, Some(parse_value(cursor)))
    } else {
        // A bare key (or junk after the name, which git rejects): no value.
        cursor.skip_line();
        (name, None)
    }
}

/// A value after its `=`, up to the end of its (last continued) line.
fn parse_value(cursor: &mut Cursor<'_>) -> Vec<u8> {
    let mut value = Vec::new();
    let mut quoted = false;
    let mut comment = false;
    // Where trailing whitespace (outside quotes) began, if the value ends in some.
    let mut trim: Option<usize> = None;
    while let Some(byte) = cursor.next() {
        if byte == b'\n' {
            // An unclosed quote ends here too (git would reject the file).
            break;
        }
        if comment {
            continue;
        }
        if byte.is_ascii_whitespace() && !quoted {
            if trim.is_none() {
                trim = Some(value.len());
            }
            if !value.is_empty() {
                value.push(byte);
            }
            continue;
        }
        if !quoted && (byte == b'#' || byte == b';') {
            comment = true;
            continue;
        }
        trim = None;
        match byte {
            b'\\' => match cursor.next() {
                Some(b'\n') | None => {}
                Some(b't') => value.push(b'\t'),
                Some(b'b') => value.push(0x08),
                Some(b'n') => value.push(b'\n'),
                // `\\`, `\"`, and (leniently) any other character as itself.
                Some(other) => value.push(other),
            },
            b'"' => quoted = !quoted,
            _ => value.push(byte),
        }
    }
    if let Some(len) = trim {
        value.truncate(len);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(section: &str, sub: Option<&str>, name: &str, value: Option<&str>) -> Entry {
        Entry {
            section: section.to_owned(),
            subsection: sub.map(|s| s.as_bytes().to_vec()),
            name: name.to_owned(),
            value: value.map(|v| v.as_bytes().to_vec()),
        }
    }

    fn hooks(text: &str) -> Vec<String> {
        parse(text.as_bytes())
            .into_iter()
            .filter(Entry::is_hooks_path)
            .filter_map(|e| e.value)
            .map(|v| String::from_utf8(v).unwrap())
            .collect()
    }

    #[test]
    fn sections_subsections_and_legacy_subsections() {
        assert_eq!(
            parse(b"[core]\n\thooksPath = a\n[remote \"Origin\"]\nurl = u\n[Branch.Main]\nx=1\n"),
            vec![
                entry("core", None, "hookspath", Some("a")),
                entry("remote", Some("Origin"), "url", Some("u")),
                entry("branch", Some("main"), "x", Some("1")),
            ]
        );
        assert_eq!(
            parse(b"[sec \"a \\\"q\\\" \\\\ \\x\"]\nk=v\n"),
            vec![entry("sec", Some("a \"q\" \\ x"), "k", Some("v"))]
        );
        // A subsection of core is not core.hooksPath.
        assert!(hooks("[core \"x\"]\nhooksPath = a\n[core.y]\nhooksPath = b\n").is_empty());
    }

    #[test]
    fn names_are_case_insensitive() {
        assert_eq!(
            hooks("[Core]\n HooksPath = A\n[CORE]\nHOOKSPATH=b"),
            ["A", "b"]
        );
    }

    #[test]
    fn bare_keys_have_no_value() {
        assert_eq!(
            parse(b"[core]\nhooksPath\nbare # comment\nx = 1"),
            vec![
                entry("core", None, "hookspath", None),
                entry("core", None, "bare", None),
                entry("core", None, "x", Some("1")),
            ]
        );
        assert!(hooks("[core]\nhooksPath\n").is_empty());
    }

    #[test]
    fn comments_outside_quotes_only() {
        assert_eq!(
            hooks(
                "# [core] hooksPath = no\n; hooksPath = no\n[core] # c\nhooksPath = a # c\nhooksPath = b;c\nhooksPath = \"c # d ; e\" ; f"
            ),
            ["a", "b", "c # d ; e"]
        );
    }

    #[test]
    fn quotes_escapes_and_continuations() {
        assert_eq!(
            hooks(
                "[core]\nhooksPath = \"  sp aces  \"\nhooksPath = a\\\"b\\\\c\\n\\t\\b\nhooksPath = long\\\n  er\nhooksPath = q\"u o\"te\n"
            ),
            ["  sp aces  ", "a\"b\\c\n\t\u{8}", "long  er", "qu ote"]
        );
    }

    #[test]
    fn whitespace_is_trimmed_around_values_not_inside() {
        assert_eq!(
            hooks("[core]\n  hooksPath   =   my  hooks \t \r\nhooksPath=x\r\n"),
            ["my  hooks", "x"]
        );
    }

    #[test]
    fn entries_may_follow_the_header_on_its_line() {
        assert_eq!(hooks("[core] hooksPath = a\n"), ["a"]);
    }

    #[test]
    fn malformed_lines_are_skipped_not_misread() {
        assert_eq!(
            parse(b"hooksPath = before-any-section\n[core\nhooksPath = x\n[bad!]\nk=v\n[core]\n=v\n5k=v\nk=\"unclosed\nhooksPath = y\n"),
            vec![
                entry("core", None, "k", Some("unclosed")),
                entry("core", None, "hookspath", Some("y")),
            ]
        );
    }

    #[test]
    fn a_broken_header_never_hides_the_next_line() {
        assert_eq!(hooks("[core\n[core]\nhooksPath = x\n"), ["x"]);
        assert_eq!(hooks("[core \"sub\n[core]\nhooksPath = y\n"), ["y"]);
    }

    #[test]
    fn dotted_keys_from_the_environment() {
        let key = |k: &str| Entry::from_key(k.as_bytes(), Some(b"v".to_vec()));
        assert!(key("core.hooksPath").is_hooks_path());
        assert!(key("CORE.HOOKSPATH").is_hooks_path());
        assert!(!key("core.x.hooksPath").is_hooks_path());
        assert!(!key("hooksPath").is_hooks_path());
        assert!(key("include.path").is_include());
        assert!(key("includeIf.gitdir:~/x/.path").is_include());
    }

    /// Writes `text` to `dir/name`, returning the path.
    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn values(repo_files: &[PathBuf], env: &GitEnv) -> Vec<String> {
        hooks_path_values(repo_files, env)
            .into_iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    /// An environment with no global or system file of the machine's.
    fn isolated(dir: &Path) -> GitEnv {
        GitEnv {
            home: Some(dir.join("home")),
            nosystem: true,
            ..GitEnv::default()
        }
    }

    #[test]
    fn every_value_of_every_file_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let repo = write(
            d,
            "repo/config",
            "[core]\nhooksPath = repo-1\nhooksPath = repo-2\n",
        );
        let worktree = write(d, "repo/config.worktree", "[core]\nhooksPath = wt\n");
        write(d, "home/.gitconfig", "[core]\nhooksPath = home\n");
        write(
            d,
            "home/.config/git/config",
            "[core]\nhooksPath = xdg-default\n",
        );
        write(d, "xdg/git/config", "[core]\nhooksPath = xdg\n");
        write(d, "global", "[core]\nhooksPath = global\n");
        write(d, "system", "[core]\nhooksPath = system\n");
        let env = isolated(d);
        assert_eq!(
            values(&[repo.clone(), worktree.clone(), d.join("missing")], &env),
            ["repo-1", "repo-2", "wt", "xdg-default", "home"]
        );
        let env = GitEnv {
            xdg_config_home: Some(d.join("xdg")),
            ..isolated(d)
        };
        assert_eq!(values(&[], &env), ["xdg", "home"]);
        let env = GitEnv {
            global: Some(d.join("global")),
            system: Some(d.join("system")),
            nosystem: false,
            ..isolated(d)
        };
        assert_eq!(values(&[], &env), ["global", "system"]);
        let env = GitEnv {
            global: Some(d.join("global")),
            system: Some(d.join("system")),
            nosystem: true,
            ..isolated(d)
        };
        assert_eq!(values(&[], &env), ["global"]);
    }

    #[test]
    fn environment_pairs_are_read() {
        let vars = |name: &str| {
            let value = match name {
                "GIT_CONFIG_COUNT" => "3",
                "GIT_CONFIG_KEY_0" => "user.name",
                "GIT_CONFIG_VALUE_0" => "x",
                "GIT_CONFIG_KEY_1" => "Core.HooksPath",
                "GIT_CONFIG_VALUE_1" => "from-env",
                "GIT_CONFIG_KEY_2" => "core.hooksPath",
                "GIT_CONFIG_VALUE_2" => "~/env-hooks",
                "GIT_CONFIG_KEY_3" => "core.hooksPath",
                "GIT_CONFIG_VALUE_3" => "beyond-the-count",
                "GIT_CONFIG_NOSYSTEM" => "yes",
                "HOME" => "/home/u",
                _ => return None,
            };
            Some(OsString::from(value))
        };
        let env = GitEnv::from_vars(vars);
        assert!(env.nosystem);
        assert_eq!(env.home.as_deref(), Some(Path::new("/home/u")));
        assert_eq!(values(&[], &env), ["from-env", "~/env-hooks"]);
    }

    #[test]
    fn nosystem_takes_git_booleans() {
        for (value, expected) in [
            ("true", true),
            ("ON", true),
            ("1", true),
            ("2", true),
            ("0", false),
            ("false", false),
            ("", false),
            ("maybe", false),
        ] {
            let env = GitEnv::from_vars(|name| {
                (name == "GIT_CONFIG_NOSYSTEM").then(|| OsString::from(value))
            });
            assert_eq!(env.nosystem, expected, "{value:?}");
        }
    }

    #[test]
    fn includes_are_followed_relative_home_and_conditional() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let repo = write(
            d,
            "repo/config",
            "[include]\npath = ../inc/one\n[includeIf \"gitdir:/nowhere/\"]\npath = ~/two\n[includeIf \"onbranch:x\"]\n  PATH = /does/not/exist\n",
        );
        write(
            d,
            "inc/one",
            "[core]\nhooksPath = one\n[include]\npath = nested/three\n",
        );
        write(d, "inc/nested/three", "[core]\nhooksPath = three\n");
        write(d, "home/two", "[core]\nhooksPath = two\n");
        assert_eq!(values(&[repo], &isolated(d)), ["one", "three", "two"]);
    }

    #[test]
    fn an_include_naming_a_fifo_is_skipped_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let repo = write(
            d,
            "repo/config",
            "[include]\npath = ../fifo\n[core]\nhooksPath = after\n",
        );
        // A blocking open of the FIFO would wait for a writer forever.
        let (done, finished) = std::sync::mpsc::channel();
        let env = isolated(d);
        std::thread::spawn(move || done.send(values(&[repo], &env)).unwrap());
        let found = finished
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("reading the config blocked on the FIFO");
        assert_eq!(found, ["after"]);
    }

    #[test]
    fn include_cycles_and_depth_are_harmless() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let a = write(
            d,
            "a",
            "[include]\npath = b\npath = a\n[core]\nhooksPath = a\n",
        );
        write(d, "b", "[include]\npath = a\n[core]\nhooksPath = b\n");
        assert_eq!(values(&[a], &isolated(d)), ["b", "a"]);
        // A chain deeper than git's limit stops there.
        for n in 0..20 {
            write(
                d,
                &format!("chain/{n}"),
                &format!("[core]\nhooksPath = h{n}\n[include]\npath = {}\n", n + 1),
            );
        }
        let found = values(&[d.join("chain/0")], &isolated(d));
        assert_eq!(found.len(), MAX_INCLUDE_DEPTH + 1, "{found:?}");
    }

    #[test]
    fn many_includes_in_one_file_do_not_hide_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut text = String::from("[include]\n");
        for n in 0..400 {
            write(d, &format!("many/{n}"), "[user]\nname = x\n");
            text.push_str(&format!("path = many/{n}\n"));
        }
        let repo = write(d, "config", &text);
        write(d, "home/.gitconfig", "[core]\nhooksPath = global\n");
        assert_eq!(values(&[repo], &isolated(d)), ["global"]);
    }

    #[test]
    fn environment_includes_must_be_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let inc = write(d, "inc", "[core]\nhooksPath = included\n");
        write(d, "home/rel", "[core]\nhooksPath = home-included\n");
        let env = GitEnv {
            pairs: vec![
                ("include.path".into(), inc.into_os_string()),
                ("include.path".into(), "relative".into()),
                ("include.path".into(), "~/rel".into()),
            ],
            ..isolated(d)
        };
        assert_eq!(values(&[], &env), ["included", "home-included"]);
    }

    #[test]
    fn big_files_are_read_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut text = String::from("[core]\nhooksPath = early\n");
        text.push_str(&"# padding\n".repeat((MAX_FILE_BYTES as usize) / 10 + 10));
        text.push_str("hooksPath = late\n");
        let path = write(d, "big", &text);
        assert_eq!(values(&[path], &isolated(d)), ["early"]);
    }

    #[test]
    fn home_expansion() {
        let env = GitEnv {
            home: Some(PathBuf::from("/h")),
            ..GitEnv::default()
        };
        assert_eq!(
            env.expand_home(Path::new("~/x")),
            Some(PathBuf::from("/h/x"))
        );
        assert_eq!(env.expand_home(Path::new("~")), Some(PathBuf::from("/h")));
        assert_eq!(env.expand_home(Path::new("~x")), Some(PathBuf::from("~x")));
        assert_eq!(
            env.expand_home(Path::new("a/~/b")),
            Some(PathBuf::from("a/~/b"))
        );
        assert_eq!(GitEnv::default().expand_home(Path::new("~/x")), None);
    }

    /// Junk never panics, and a valid entry survives junk before it on other lines.
    #[test]
    fn junk_never_panics() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = b"[]\"\\#;= \t\r\n.-aZ~/\x00\xff";
        for round in 0..3000 {
            let len = (next() % 200) as usize;
            let junk: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if round % 2 == 0 {
                        alphabet[(r % alphabet.len() as u64) as usize]
                    } else {
                        (r & 0xff) as u8
                    }
                })
                .collect();
            let _ = parse(&junk);
            let _ = Entry::from_key(&junk, Some(junk.clone()));
            let mut text = junk.clone();
            text.extend_from_slice(b"\n\"\n[core]\nhooksPath = kept\n");
            // An unclosed header or quote in the junk cannot swallow the lines after it.
            assert!(
                parse(&text)
                    .iter()
                    .any(|e| e.is_hooks_path() && e.value.as_deref() == Some(b"kept")),
                "{:?}",
                String::from_utf8_lossy(&junk)
            );
        }
    }
}
