//! The project's side of the configuration: where its `.keel/config.toml` is, the hash its
//! trust is pinned to, and whether the user trusts it.
//!
//! A repository is untrusted: its configuration may only tighten what keel does until the user
//! trusts it (`keel trust`, the interactive question, or `--trust-project`). Trust is recorded
//! in the user's config per absolute path and pinned to a SHA-256 of the project's
//! power-granting files, so an edit (by the model, a pull, a branch switch) makes it untrusted
//! again.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::parse::ProjectTrust;

/// The project files that can grant powers, relative to the project's directory (the ones
/// the sandbox protects). The trust hash covers all of them, so trusting one version of them
/// trusts exactly that version.
pub use keel::sandbox::CONFIG_FILES as POWER_FILES;

/// The most bytes of one power file hashed; a larger file is hashed as "too large" (and
/// a config that large is refused when read anyway).
const MAX_HASHED: u64 = 16 * 1024 * 1024;

/// The project directory of `cwd`: the nearest directory from `cwd` up to the repository root
/// that holds `.keel/config.toml`, `.claude/settings.json` or `.claude/settings.local.json`,
/// else the repository root; outside a repository, `cwd` itself (ancestors of a directory
/// that is not a repository are never read).
pub fn locate(cwd: &Path) -> PathBuf {
    let Some(root) = keel::sandbox::repository_root(cwd) else {
        return cwd.to_path_buf();
    };
    for dir in cwd.ancestors() {
        let claude = dir.join(".claude");
        if dir.join(".keel").join("config.toml").is_file()
            || claude.join("settings.json").is_file()
            || claude.join("settings.local.json").is_file()
        {
            return dir.to_path_buf();
        }
        if dir == root {
            break;
        }
    }
    root
}

/// The hash the trust of the project in `dir` is pinned to, as `sha256:<hex>`: SHA-256 over
/// each power file's name and content (or its absence), over the content of every file
/// inside the project its hooks and task runners name (so a pull that changes a trusted
/// hook's script makes the project untrusted again, like an edit of its config), and over its
/// skill files (whose `allowed-tools` a trusted project's skills grant).
pub fn config_hash(dir: &Path) -> String {
    let mut hasher = Sha256::new();
    let scripts = referenced_files(dir, &[dir], &commands_in_config(dir));
    let names = POWER_FILES
        .iter()
        .map(|name| PathBuf::from(*name))
        .chain(
            scripts
                .iter()
                .filter_map(|path| path.strip_prefix(dir).ok().map(Path::to_path_buf)),
        )
        .chain(skill_files(dir));
    for name in names {
        hasher.update(name.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        match read_capped(&dir.join(&name)) {
            Ok(Some(bytes)) => {
                hasher.update(b"present\0");
                hasher.update((bytes.len() as u64).to_le_bytes());
                hasher.update(&bytes);
            }
            Ok(None) => hasher.update(b"absent\0"),
            Err(err) => {
                hasher.update(b"unreadable\0");
                hasher.update(err.to_string().as_bytes());
            }
        }
    }
    let digest = hasher.finalize();
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

/// The project's skill files (`.keel/skills/<name>.md`, `<dir>/<name>/SKILL.md` under
/// `.keel/skills` and `.claude/skills`), relative to `dir`, sorted: a trusted project's skills
/// may grant tools (their `allowed-tools`), so an edit of one, by the model too, makes the
/// project untrusted again like an edit of its config.
fn skill_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for folder in [".keel/skills", ".claude/skills"] {
        let Ok(entries) = std::fs::read_dir(dir.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = PathBuf::from(folder).join(entry.file_name());
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                for skill in ["SKILL.md", "skill.md"] {
                    if dir.join(&name).join(skill).is_file() {
                        files.push(name.join(skill));
                    }
                }
            } else if name.extension().is_some_and(|ext| ext == "md") {
                files.push(name);
            }
        }
    }
    files.sort();
    files
}

/// The file's bytes, `None` when it does not exist.
fn read_capped(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let mut bytes = Vec::new();
    file.take(MAX_HASHED + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_HASHED {
        return Err(std::io::Error::other("larger than 16 MiB"));
    }
    Ok(Some(bytes))
}

/// What the user decided about a project's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Trusted, and its files are as they were when trusted.
    Trusted,
    /// Trusted for this run by `--trust-project`.
    TrustedByFlag,
    /// Never decided.
    Untrusted,
    /// The user said no to these very files (the interactive question is not asked again).
    Declined,
    /// Trusted once, but the files changed since.
    Changed,
}

impl Trust {
    /// The decision recorded for `dir` with its files hashing to `hash`.
    pub fn of(dir: &Path, hash: &str, records: &BTreeMap<String, ProjectTrust>) -> Self {
        match records.get(&dir.display().to_string()) {
            Some(record) if record.config_hash == hash => {
                if record.trusted {
                    Self::Trusted
                } else {
                    Self::Declined
                }
            }
            Some(record) if record.trusted => Self::Changed,
            _ => Self::Untrusted,
        }
    }

    /// Whether the project's configuration may grant powers.
    pub fn grants(self) -> bool {
        matches!(self, Self::Trusted | Self::TrustedByFlag)
    }
}

/// A project configuration file that was read, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The project's directory (holding `.keel/`).
    pub dir: PathBuf,
    /// Its `.keel/config.toml`.
    pub file: PathBuf,
    /// The hash of its power files now.
    pub hash: String,
    /// The user's decision.
    pub trust: Trust,
    /// Keys it sets that were not applied, each with its reason in parentheses when it is not
    /// the lack of trust.
    pub ignored: Vec<String>,
    /// Keys it sets that only a trusted project may set (so trusting it would change things).
    pub needs_trust: Vec<String>,
    /// The command lines of its hooks and task runners, when they apply (trusted).
    pub commands: Vec<String>,
}

impl Project {
    /// One line for stderr when keys were ignored, saying which and how to trust.
    pub fn notice(&self) -> Option<String> {
        if self.ignored.is_empty() {
            return None;
        }
        let keys = self.ignored.join(", ");
        let file = self.file.display();
        let why = if self.trust.grants() || self.needs_trust.is_empty() {
            return Some(format!("{file}: ignored {keys}"));
        } else {
            match self.trust {
                Trust::Changed => {
                    "its configuration changed since you trusted it; run `keel trust` in it to \
                     trust this version (or pass --trust-project)"
                }
                _ => {
                    "this project is not trusted; run `keel trust` in it to let its config \
                     grant these (or pass --trust-project)"
                }
            }
        };
        Some(format!("{file}: ignored {keys}: {why}"))
    }
}

/// The command lines of the hooks, task runners and MCP servers `dir/.keel/config.toml` and
/// `dir/.mcp.json` set, read leniently (a file that does not parse names none; it is refused
/// when loaded anyway).
pub fn commands_in_config(dir: &Path) -> Vec<String> {
    let mut commands = commands_in_toml(dir);
    commands.extend(super::mcp::commands_in_mcp_json(&dir.join(".mcp.json")));
    for name in ["settings.json", "settings.local.json"] {
        commands.extend(super::claude::commands_in(&dir.join(".claude").join(name)));
    }
    commands
}

fn commands_in_toml(dir: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(dir.join(".keel").join("config.toml")) else {
        return Vec::new();
    };
    let Ok(value) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut commands = Vec::new();
    if let Some(hooks) = value.get("hooks").and_then(toml::Value::as_array) {
        commands.extend(
            hooks
                .iter()
                .filter_map(|hook| hook.get("command")?.as_str().map(str::to_owned)),
        );
    }
    let runners = value
        .get("tasks")
        .and_then(|tasks| tasks.get("runners"))
        .and_then(toml::Value::as_table);
    for runner in runners.into_iter().flat_map(|runners| runners.values()) {
        if let Some(argv) = runner.get("command").and_then(toml::Value::as_array) {
            let words: Vec<&str> = argv.iter().filter_map(toml::Value::as_str).collect();
            commands.push(words.join(" "));
        }
    }
    let servers = value.get("mcp_servers").and_then(toml::Value::as_table);
    for server in servers.into_iter().flat_map(|servers| servers.values()) {
        if let Some(command) = server.get("command").and_then(toml::Value::as_str) {
            let args = server.get("args").and_then(toml::Value::as_array);
            let mut words = vec![command];
            words.extend(args.into_iter().flatten().filter_map(toml::Value::as_str));
            commands.push(words.join(" "));
        }
    }
    commands
}

/// The files inside the project that `commands` (hook commands, runners' command lines)
/// name: words that are paths of existing files inside `dir`, taken relative to each of
/// `bases`. Protecting them keeps the model from rewriting what a trusted hook runs.
pub fn referenced_files(dir: &Path, bases: &[&Path], commands: &[String]) -> Vec<PathBuf> {
    let mut scripts = Vec::new();
    for command in commands {
        // Claude Code's hooks name their scripts from the project directory.
        let dir_text = dir.display().to_string();
        let command = command
            .replace("${CLAUDE_PROJECT_DIR}", &dir_text)
            .replace("$CLAUDE_PROJECT_DIR", &dir_text)
            .replace("${KEEL_PROJECT_DIR}", &dir_text)
            .replace("$KEEL_PROJECT_DIR", &dir_text);
        for word in command.split_whitespace() {
            let word = word.replace(['"', '\''], "");
            let word = word.trim_matches(';');
            if word.is_empty() || word.starts_with('-') {
                continue;
            }
            for base in bases {
                let candidate = base.join(word);
                if let Ok(full) = std::fs::canonicalize(&candidate)
                    && full.is_file()
                    && full.starts_with(dir)
                    && !scripts.contains(&full)
                {
                    scripts.push(full);
                }
            }
        }
    }
    scripts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_changes_with_any_power_file() {
        let dir = tempfile::tempdir().unwrap();
        let empty = config_hash(dir.path());
        std::fs::create_dir(dir.path().join(".keel")).unwrap();
        std::fs::write(dir.path().join(".keel/config.toml"), "model = \"a\"\n").unwrap();
        let one = config_hash(dir.path());
        assert_ne!(empty, one);
        std::fs::write(dir.path().join(".mcp.json"), "{}").unwrap();
        let two = config_hash(dir.path());
        assert_ne!(one, two);
        std::fs::write(dir.path().join("README.md"), "not a power file").unwrap();
        assert_eq!(two, config_hash(dir.path()));
        // A script a hook runs counts as part of the config.
        std::fs::create_dir(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("scripts/check.sh"), "exit 0\n").unwrap();
        std::fs::write(
            dir.path().join(".keel/config.toml"),
            "[[hooks]]\nevent = \"Stop\"\ncommand = \"bash scripts/check.sh --strict\"\n",
        )
        .unwrap();
        let with_hook = config_hash(dir.path());
        std::fs::write(dir.path().join("scripts/check.sh"), "curl evil\n").unwrap();
        assert_ne!(
            with_hook,
            config_hash(dir.path()),
            "the hook's script changed"
        );
        assert!(two.starts_with("sha256:") && two.len() == 7 + 64, "{two}");
        // So does a skill (its allowed-tools grant tools), by the model too, and a new one.
        let skill = dir.path().join(".claude/skills/py/SKILL.md");
        std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
        let before = config_hash(dir.path());
        std::fs::write(&skill, "---\nname: py\nallowed-tools: Read\n---\nx\n").unwrap();
        let with_skill = config_hash(dir.path());
        assert_ne!(before, with_skill, "a new skill");
        std::fs::write(&skill, "---\nname: py\nallowed-tools: Bash\n---\nx\n").unwrap();
        assert_ne!(with_skill, config_hash(dir.path()), "an edited skill");
        let before = config_hash(dir.path());
        std::fs::create_dir_all(dir.path().join(".keel/skills")).unwrap();
        std::fs::write(dir.path().join(".keel/skills/release.md"), "x\n").unwrap();
        assert_ne!(before, config_hash(dir.path()), "a file skill");
    }

    #[test]
    fn the_project_is_found_up_to_the_repository_root_only() {
        let outer = tempfile::tempdir().unwrap();
        let outer = std::fs::canonicalize(outer.path()).unwrap();
        std::fs::create_dir_all(outer.join(".keel")).unwrap();
        std::fs::write(outer.join(".keel/config.toml"), "").unwrap();
        // Outside a repository: only the directory itself.
        let plain = outer.join("plain/sub");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(locate(&plain), plain);
        // Inside one: the nearest .keel up to the root, never beyond it.
        let repo = outer.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let deep = repo.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(locate(&deep), repo);
        std::fs::create_dir_all(repo.join("a/.keel")).unwrap();
        std::fs::write(repo.join("a/.keel/config.toml"), "").unwrap();
        assert_eq!(locate(&deep), repo.join("a"));
    }
}
