//! Protected paths: what neither the file tools nor commands may change without the person's
//! approval, because it grants keel powers or runs later outside the sandbox.
//!
//! Built in: the repository (`.git`, whole), the configuration files that grant keel powers
//! (`.keel/config.toml`, `.claude/settings.json`, `.claude/settings.local.json`, `.mcp.json`)
//! relative to the workspace root and, if different, the repository root, and the directory
//! `core.hooksPath` names when it lies inside the workspace (every value of it in any config
//! file git could read for the repository, found by a small reader of git config files,
//! `git_config.rs`). Plus the policy's `protected_paths`.
//!
//! - The file tools never write under `.git/` ([`PathSandbox`](crate::PathSandbox)); a write
//!   to another protected path has the effect [`Effect::Protected`](keel_tool::Effect), which
//!   always asks the person. The path is resolved first (symlinks followed), so a link to a
//!   protected file is caught.
//! - Commands: where user namespaces work, every existing protected path is a read-only bind
//!   mount for them. In every mode, what can run later is snapshotted before a command and
//!   restored after it ([`ProtectedSnapshot`]): the git config, hooks and info files and the
//!   protected files, with their mode and existence.

mod git_config;
mod snapshot;

use std::path::{Path, PathBuf};

use keel_tool::Effect;

use self::git_config::GitEnv;
use crate::path::{Access, PathSandbox};

pub use snapshot::{ProtectedSnapshot, RestoreReport};

/// The configuration files that grant keel powers, relative to the workspace root and the
/// repository root: protected here, and what a host pins a project's trust to.
pub const CONFIG_FILES: [&str; 4] = [
    ".keel/config.toml",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
];

/// Why a path is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// A configuration file that grants keel powers.
    Config,
    /// The git hooks directory (`core.hooksPath`): its files run at the next git command.
    Hooks,
    /// The repository itself.
    Git,
    /// Named by the policy.
    Policy,
}

/// One protected path, resolved.
#[derive(Debug, Clone)]
struct Rule {
    /// Absolute, symlinks resolved as far as it exists.
    path: PathBuf,
    /// How to name it (relative to the workspace when inside).
    shown: String,
    why: Why,
    /// Whether everything below it is protected too.
    tree: bool,
}

/// The protected paths of one workspace, found now (a repository created or a config file
/// written since changes them, so they are found again for every command).
#[derive(Debug, Clone)]
pub(crate) struct Protected {
    /// The workspace root, resolved.
    root: PathBuf,
    rules: Vec<Rule>,
    /// What is watched for detect-and-restore: (base directory, path below it).
    watched: Vec<(PathBuf, PathBuf)>,
}

impl Protected {
    /// The protected paths for workspace `root` (resolved) and the policy's `extra` paths
    /// (relative ones are taken from the root).
    pub(crate) fn discover(root: &Path, extra: &[PathBuf]) -> Self {
        Self::discover_in(root, extra, &GitEnv::from_process())
    }

    /// [`discover`](Self::discover) with git's environment given.
    fn discover_in(root: &Path, extra: &[PathBuf], env: &GitEnv) -> Self {
        let root = resolve(root);
        let mut found = Self {
            root: root.clone(),
            rules: Vec::new(),
            watched: Vec::new(),
        };
        let repo = repository_root(&root);
        let mut bases = vec![root.clone()];
        if let Some(repo) = &repo
            && *repo != root
        {
            bases.push(repo.clone());
        }
        for base in &bases {
            for file in CONFIG_FILES {
                found.add(base, Path::new(file), Why::Config, false);
            }
        }
        let repo_root = repo.unwrap_or_else(|| root.clone());
        found.add_git(&repo_root, env);
        for path in extra {
            let absolute = if path.is_absolute() {
                path.clone()
            } else {
                root.join(path)
            };
            let resolved = resolve(&absolute);
            // A directory, or what may become one.
            let tree = !resolved.is_file();
            found.add_absolute(&resolved, Why::Policy, tree);
        }
        found
    }

    /// Adds `rel` below `base` (and, if a symlink leads elsewhere, where it leads).
    fn add(&mut self, base: &Path, rel: &Path, why: Why, tree: bool) {
        self.watch(base, rel);
        let resolved = resolve(&base.join(rel));
        self.rule(resolved.clone(), why, tree);
        if resolved != base.join(rel) {
            self.add_absolute(&resolved, why, tree);
        }
    }

    /// Adds an absolute, resolved path: watched from the workspace or repository it lies in,
    /// else from its parent.
    fn add_absolute(&mut self, path: &Path, why: Why, tree: bool) {
        self.rule(path.to_path_buf(), why, tree);
        if let Ok(rel) = path.strip_prefix(&self.root)
            && !rel.as_os_str().is_empty()
        {
            let root = self.root.clone();
            self.watch(&root, rel);
        } else if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
            self.watch(parent, Path::new(name));
        }
    }

    fn rule(&mut self, path: PathBuf, why: Why, tree: bool) {
        if self.rules.iter().any(|rule| rule.path == path) {
            return;
        }
        let shown = match path.strip_prefix(&self.root) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        };
        self.rules.push(Rule {
            path,
            shown,
            why,
            tree,
        });
    }

    fn watch(&mut self, base: &Path, rel: &Path) {
        let item = (base.to_path_buf(), rel.to_path_buf());
        if !self.watched.contains(&item) {
            self.watched.push(item);
        }
    }

    /// The repository at `repo_root`: its `.git` (whole, protected), and what runs later from
    /// it: config, hooks and info of its git dir (also when `.git` is a file pointing
    /// elsewhere), and the `core.hooksPath` directory when it lies inside the workspace.
    fn add_git(&mut self, repo_root: &Path, env: &GitEnv) {
        let dot_git = repo_root.join(".git");
        self.rule(dot_git.clone(), Why::Git, true);
        let (git_dir, common_dir) = git_dirs(&dot_git);
        match (&git_dir, &common_dir) {
            (Some(git_dir), Some(common)) => {
                if !git_dir.starts_with(&dot_git) {
                    // `.git` is a file naming the git dir: watch the file, protect the dirs.
                    self.watch(repo_root, Path::new(".git"));
                    self.rule(git_dir.clone(), Why::Git, true);
                    self.watch(git_dir, Path::new("config.worktree"));
                }
                if !common.starts_with(&dot_git) {
                    self.rule(common.clone(), Why::Git, true);
                }
                for rel in ["config", "config.worktree", "hooks", "info"] {
                    self.watch(common, Path::new(rel));
                }
                // Submodules' git dirs carry their own config and hooks.
                for module in module_dirs(common) {
                    for rel in ["config", "hooks", "info"] {
                        self.watch(&module, Path::new(rel));
                    }
                }
            }
            _ => {
                // No repository yet: one created by a command is checked too.
                for rel in [".git/config", ".git/hooks", ".git/info"] {
                    self.watch(repo_root, Path::new(rel));
                }
            }
        }
        for hooks in hooks_paths(repo_root, git_dir.as_deref(), common_dir.as_deref(), env) {
            if hooks.starts_with(&self.root) && hooks != self.root {
                self.add_absolute(&hooks, Why::Hooks, true);
            }
        }
    }

    /// Why writing `path` (absolute, symlinks resolved) needs the person's approval, if it
    /// does: the words for [`Effect::Protected`](keel_tool::Effect).
    pub(crate) fn reason(&self, path: &Path) -> Option<String> {
        let rule = self
            .rules
            .iter()
            .find(|rule| path == rule.path || (rule.tree && path.starts_with(&rule.path)))?;
        let shown = match path.strip_prefix(&self.root) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        };
        Some(match rule.why {
            Why::Config => format!(
                "changes {shown}, a configuration file that grants keel powers (approvals, \
                 sandbox, hooks, programs it runs)"
            ),
            Why::Hooks => format!(
                "changes {shown}, in the git hooks directory ({}): hooks run outside the \
                 sandbox at the next git command",
                rule.shown
            ),
            Why::Git => format!("changes {shown}, inside the git repository's own files"),
            Why::Policy => format!("changes {shown}, a protected path ({})", rule.shown),
        })
    }

    /// The existing protected paths (resolved), for read-only bind mounts: never `/` nor the
    /// workspace or one of its ancestors.
    #[cfg(feature = "confine")]
    pub(crate) fn existing(&self) -> Vec<PathBuf> {
        self.rules
            .iter()
            .map(|rule| rule.path.clone())
            .filter(|path| path.symlink_metadata().is_ok() && !self.root.starts_with(path))
            .collect()
    }

    /// Snapshots what is watched, for [`ProtectedSnapshot::restore`].
    pub(crate) fn snapshot(&self) -> ProtectedSnapshot {
        ProtectedSnapshot::take(&self.root, &self.watched)
    }
}

/// The effect of writing `given` through `sandbox`: [`Effect::Protected`] when the path,
/// resolved (symlinks followed), is protected; else [`Effect::Mutating`] (also when it cannot
/// be resolved: the write itself then fails).
pub(crate) fn write_effect(sandbox: &PathSandbox, extra: &[PathBuf], given: &str) -> Effect {
    let Ok(resolved) = sandbox.resolve(given, Access::Write) else {
        return Effect::Mutating;
    };
    Protected::discover(sandbox.root(), extra)
        .reason(resolved.absolute())
        .map_or(Effect::Mutating, Effect::protected)
}

/// `path` absolute, with symlinks resolved as far as it exists (the rest kept as given).
pub(crate) fn resolve(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if parent != path => resolve(parent).join(name),
        _ => path.to_path_buf(),
    }
}

/// The nearest directory at or above `root` that has a `.git` entry (a directory, or the
/// file of a worktree or submodule): the repository whose `.git` is protected, and where a
/// host's search for project configuration stops.
pub fn repository_root(root: &Path) -> Option<PathBuf> {
    root.ancestors()
        .find(|dir| dir.join(".git").symlink_metadata().is_ok())
        .map(Path::to_path_buf)
}

/// The git dir and the common dir for the `.git` entry `dot_git`: itself when a directory,
/// or the directory a `gitdir: <path>` file names (and its `commondir`).
fn git_dirs(dot_git: &Path) -> (Option<PathBuf>, Option<PathBuf>) {
    let Ok(meta) = dot_git.symlink_metadata() else {
        return (None, None);
    };
    let git_dir = if meta.is_dir() {
        dot_git.to_path_buf()
    } else if meta.is_file() {
        let Some(named) = std::fs::read_to_string(dot_git).ok().and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("gitdir:").map(|p| p.trim().to_owned()))
        }) else {
            return (None, None);
        };
        let base = dot_git.parent().unwrap_or(Path::new("/"));
        resolve(&base.join(named))
    } else {
        return (None, None);
    };
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .map(|rel| resolve(&git_dir.join(rel.trim())))
        .unwrap_or_else(|| git_dir.clone());
    (Some(git_dir), Some(common))
}

/// The git dirs of submodules under `common/modules` (names may hold slashes), a few levels
/// deep and a bounded number.
fn module_dirs(common: &Path) -> Vec<PathBuf> {
    const MAX_DEPTH: usize = 4;
    const MAX_MODULES: usize = 64;
    let mut found = Vec::new();
    let mut stack = vec![(common.join("modules"), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                continue;
            }
            let path = entry.path();
            if path.join("config").is_file() {
                if found.len() < MAX_MODULES {
                    found.push(path.clone());
                }
                stack.push((path.join("modules"), depth + 1));
            } else if depth < MAX_DEPTH {
                stack.push((path, depth + 1));
            }
        }
    }
    found
}

/// Every directory `core.hooksPath` may name for the repository at `repo_root` (git dir
/// `git_dir`, common dir `common_dir`; `None` without a repository, when only the global and
/// system files count), resolved: the values of every config file git could read and of
/// `env`'s pairs ([`git_config`]). `~/` is taken from `$HOME`, relative values from the
/// repository root.
fn hooks_paths(
    repo_root: &Path,
    git_dir: Option<&Path>,
    common_dir: Option<&Path>,
    env: &GitEnv,
) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(common) = common_dir {
        files.push(common.join("config"));
        files.push(common.join("config.worktree"));
    }
    if let Some(git_dir) = git_dir
        && Some(git_dir) != common_dir
    {
        files.push(git_dir.join("config.worktree"));
    }
    let mut found: Vec<PathBuf> = Vec::new();
    for value in git_config::hooks_path_values(&files, env) {
        let Some(value) = env.expand_home(&value) else {
            continue;
        };
        let resolved = resolve(&repo_root.join(value));
        if !found.contains(&resolved) {
            found.push(resolved);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files_and_the_repository_are_protected() {
        let dir = tempfile::tempdir().unwrap();
        let root = resolve(dir.path());
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        let protected = Protected::discover(&root.join("sub"), &[PathBuf::from("scripts")]);
        for (path, words) in [
            ("sub/.keel/config.toml", "grants keel powers"),
            (".mcp.json", "grants keel powers"),
            (".git/config", "repository"),
            ("sub/scripts/run.sh", "protected path"),
        ] {
            let reason = protected.reason(&root.join(path));
            assert!(
                reason.as_deref().is_some_and(|r| r.contains(words)),
                "{path}: {reason:?}"
            );
        }
        assert_eq!(protected.reason(&root.join("sub/src/lib.rs")), None);
        assert_eq!(protected.reason(&root.join("sub/.keel/other.toml")), None);
    }

    /// An environment with no global or system file of the machine's.
    fn isolated(home: &Path) -> GitEnv {
        GitEnv {
            home: Some(home.to_path_buf()),
            nosystem: true,
            ..GitEnv::default()
        }
    }

    fn hooks_reason(protected: &Protected, path: &Path) -> bool {
        protected
            .reason(path)
            .is_some_and(|reason| reason.contains("git hooks directory"))
    }

    #[test]
    fn a_hooks_path_set_only_in_an_included_file_is_protected() {
        let dir = tempfile::tempdir().unwrap();
        let root = resolve(dir.path());
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(
            root.join(".git/config"),
            "[includeIf \"gitdir:/elsewhere/\"]\n\tpath = ../team.gitconfig\n",
        )
        .unwrap();
        std::fs::write(
            root.join("team.gitconfig"),
            "[Core]\n\tHooksPath = ci/hooks\n",
        )
        .unwrap();
        let env = isolated(&root.join("home"));
        let protected = Protected::discover_in(&root, &[], &env);
        assert!(hooks_reason(&protected, &root.join("ci/hooks/pre-commit")));
        assert!(!hooks_reason(&protected, &root.join("ci/other")));
    }

    #[test]
    fn a_hooks_path_set_through_git_config_count_is_protected() {
        let dir = tempfile::tempdir().unwrap();
        let root = resolve(dir.path());
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let home = root.join("home");
        let env = GitEnv::from_vars(|name| {
            let value = match name {
                "GIT_CONFIG_COUNT" => "2".into(),
                "GIT_CONFIG_KEY_0" => "user.name".into(),
                "GIT_CONFIG_VALUE_0" => "someone".into(),
                "GIT_CONFIG_KEY_1" => "core.hooksPath".into(),
                "GIT_CONFIG_VALUE_1" => "env/hooks".into(),
                "GIT_CONFIG_NOSYSTEM" => "1".into(),
                "HOME" => home.clone().into_os_string(),
                _ => return None,
            };
            Some(value)
        });
        let protected = Protected::discover_in(&root, &[], &env);
        assert!(hooks_reason(
            &protected,
            &root.join("env/hooks/post-checkout")
        ));
        // Without the pair, nothing there is protected.
        let protected = Protected::discover_in(&root, &[], &isolated(&home));
        assert!(!hooks_reason(
            &protected,
            &root.join("env/hooks/post-checkout")
        ));
    }

    #[test]
    fn hooks_paths_come_from_every_source_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let root = resolve(dir.path());
        let repo = root.join("repo");
        let git = repo.join(".git");
        std::fs::create_dir_all(&git).unwrap();
        std::fs::write(
            git.join("config"),
            "[core]\n\thooksPath = rel/hooks\n[include]\n\tpath = ../extra.inc\n",
        )
        .unwrap();
        std::fs::write(repo.join("extra.inc"), "[core]\nhooksPath = /abs/hooks\n").unwrap();
        std::fs::write(
            git.join("config.worktree"),
            "[core]\nhooksPath = ~/home-hooks\n",
        )
        .unwrap();
        let env = GitEnv {
            pairs: vec![("core.hooksPath".into(), "env-hooks".into())],
            ..isolated(&root.join("home"))
        };
        let (git_dir, common) = git_dirs(&git);
        assert_eq!(
            hooks_paths(&repo, git_dir.as_deref(), common.as_deref(), &env),
            [
                repo.join("rel/hooks"),
                PathBuf::from("/abs/hooks"),
                root.join("home/home-hooks"),
                repo.join("env-hooks"),
            ]
        );
        // Without a repository, only the global files and the environment count.
        assert_eq!(
            hooks_paths(&repo, None, None, &env),
            [repo.join("env-hooks")]
        );
    }

    #[test]
    fn a_linked_worktree_reads_the_common_config_and_its_own_config_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let root = resolve(dir.path());
        let main_git = root.join("main/.git");
        let wt_git = main_git.join("worktrees/wt");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(
            main_git.join("config"),
            "[core]\nhooksPath = common-hooks\n",
        )
        .unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        std::fs::write(
            wt_git.join("config.worktree"),
            "[core]\nhooksPath = wt-hooks\n",
        )
        .unwrap();
        let wt = root.join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        let (git_dir, common) = git_dirs(&wt.join(".git"));
        assert_eq!(common.as_deref(), Some(main_git.as_path()));
        assert_eq!(
            hooks_paths(&wt, git_dir.as_deref(), common.as_deref(), &isolated(&root)),
            [wt.join("common-hooks"), wt.join("wt-hooks")]
        );
    }
}
