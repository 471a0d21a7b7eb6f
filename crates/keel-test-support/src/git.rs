//! Temporary git repositories, made with libgit2 (no `git` executable needed).
//!
//! Every constructor first cuts libgit2 off from the machine's global, XDG and system git
//! configuration ([`isolate_config`]), so a developer's `~/.gitconfig` cannot change what a
//! test sees: a repository has an identity only if the test gives it one.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use git2::{IndexAddOption, Oid, Repository, RepositoryInitOptions, Signature, Status};
use tempfile::TempDir;

/// The identity [`TempRepo::new`] configures.
pub const TEST_NAME: &str = "Test User";
/// The e-mail [`TempRepo::new`] configures.
pub const TEST_EMAIL: &str = "test@example.com";

/// Points libgit2's global, XDG and system configuration search paths at an empty directory,
/// once per process. Called by every [`TempRepo`] constructor; call it yourself before other
/// libgit2 work in a test that needs no repository.
#[allow(unsafe_code)]
pub fn isolate_config() {
    static EMPTY: OnceLock<PathBuf> = OnceLock::new();
    EMPTY.get_or_init(|| {
        // One directory for every test process of this user, holding nothing: a directory per
        // process would be left behind by each (a static is never dropped).
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
        let empty = std::env::temp_dir().join(format!("keel-test-git-config-empty-{uid}"));
        std::fs::create_dir_all(&empty).unwrap();
        if let Some(entry) = std::fs::read_dir(&empty).unwrap().next() {
            let path = entry.unwrap().path();
            panic!(
                "{} must be empty (found {})",
                empty.display(),
                path.display()
            );
        }
        for level in [
            git2::ConfigLevel::System,
            git2::ConfigLevel::XDG,
            git2::ConfigLevel::Global,
        ] {
            // SAFETY: libgit2's option setters are not synchronised with its other calls. This
            // runs once per process inside `get_or_init`, which makes every other caller wait;
            // tests call `isolate_config` (directly or through a constructor) before their
            // first libgit2 call, so no libgit2 call runs concurrently with it.
            unsafe { git2::opts::set_search_path(level, &*empty.to_string_lossy()) }.unwrap();
        }
        empty
    });
}

/// A git repository in a temporary directory, removed when dropped. Its branch is `main`.
pub struct TempRepo {
    dir: TempDir,
}

impl TempRepo {
    /// A repository with `user.name`/`user.email` configured ([`TEST_NAME`], [`TEST_EMAIL`])
    /// and one commit, "initial commit", holding `README.md`.
    pub fn new() -> Self {
        let repo = Self::empty();
        repo.write("README.md", "# test\n");
        repo.commit("initial commit");
        repo
    }

    /// A repository with an identity configured and no commits (an unborn `main`).
    pub fn empty() -> Self {
        let repo = Self::bare_init();
        let mut config = repo.repo().config().unwrap();
        config.set_str("user.name", TEST_NAME).unwrap();
        config.set_str("user.email", TEST_EMAIL).unwrap();
        repo
    }

    /// A repository with no identity configured anywhere, and one commit holding `README.md`
    /// (made with an explicit test signature).
    pub fn without_identity() -> Self {
        let repo = Self::bare_init();
        repo.write("README.md", "# test\n");
        repo.commit("initial commit");
        repo
    }

    /// A typical small project, committed: `AGENTS.md` (run `cargo test`), a skill
    /// (`release`), a sub-agent (`reviewer`), a team (`ship`) and `src/lib.rs` (`answer()`
    /// returns 42): what a full first request carries (instructions, the skills index, the
    /// delegation tools).
    pub fn with_delegates() -> Self {
        let repo = Self::new();
        repo.write("AGENTS.md", "Run `cargo test` before you answer.\n");
        repo.write(
            ".keel/skills/release/SKILL.md",
            "---\nname: release\ndescription: How to cut a release\n---\nTag, then publish.\n",
        );
        repo.write(
            ".keel/agents/reviewer.md",
            "---\ndescription: Reviews a change\ntools: [read_file, grep]\n---\nYou review.\n",
        );
        repo.write(
            ".keel/teams/ship.yaml",
            "name: ship\ndescription: Review then ship\nagents: [reviewer]\n",
        );
        repo.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
        repo.commit("start");
        repo
    }

    /// A repository with committed files and one of every kind of change on top:
    ///
    /// - committed: `README.md`, `.gitignore` (`target/`, `*.log`), `src/lib.rs`,
    ///   `src/main.rs`, `old_name.txt`, `gone.txt`, `staged_then_edited.txt`;
    /// - staged: new `added.txt`; `old_name.txt` renamed to `new_name.txt`;
    ///   `staged_then_edited.txt` changed to `v2`;
    /// - unstaged: `src/lib.rs` edited; `staged_then_edited.txt` edited again to `v3`;
    ///   `gone.txt` deleted;
    /// - untracked: `notes.md`, `docs/guide.md`;
    /// - ignored: `target/debug/out.bin`, `build.log`.
    pub fn with_every_change() -> Self {
        let repo = Self::new();
        repo.write(".gitignore", "target/\n*.log\n");
        repo.write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n");
        repo.write("src/main.rs", "fn main() {}\n");
        repo.write("old_name.txt", "renamed content\n");
        repo.write("gone.txt", "about to be deleted\n");
        repo.write("staged_then_edited.txt", "v1\n");
        repo.commit("add sources");
        repo.write("src/lib.rs", "pub fn one() -> u32 {\n    2\n}\n");
        repo.write("added.txt", "new\n");
        repo.stage("added.txt");
        std::fs::rename(
            repo.dir.path().join("old_name.txt"),
            repo.dir.path().join("new_name.txt"),
        )
        .unwrap();
        repo.stage("old_name.txt");
        repo.stage("new_name.txt");
        repo.write("staged_then_edited.txt", "v2\n");
        repo.stage("staged_then_edited.txt");
        repo.write("staged_then_edited.txt", "v3\n");
        repo.remove("gone.txt");
        repo.write("notes.md", "todo\n");
        repo.write("docs/guide.md", "guide\n");
        repo.write("target/debug/out.bin", "ignored\n");
        repo.write("build.log", "ignored\n");
        repo
    }

    fn bare_init() -> Self {
        isolate_config();
        let dir = tempfile::Builder::new()
            .prefix("keel-test-repo-")
            .tempdir()
            .unwrap();
        let mut options = RepositoryInitOptions::new();
        options.initial_head("main");
        Repository::init_opts(dir.path(), &options).unwrap();
        Self { dir }
    }

    /// The work tree (canonical: symlinks in the temp path resolved).
    pub fn path(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    /// The repository, opened afresh.
    pub fn repo(&self) -> Repository {
        Repository::open(self.dir.path()).unwrap()
    }

    /// Writes `contents` to `relative`, creating parent directories.
    pub fn write(&self, relative: &str, contents: &str) {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, contents).unwrap();
    }

    /// The contents of `relative`.
    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(relative)).unwrap()
    }

    /// Deletes the file `relative`.
    pub fn remove(&self, relative: &str) {
        std::fs::remove_file(self.dir.path().join(relative)).unwrap();
    }

    /// Stages `relative` as it is on disk (`git add <path>`; a deleted file is unstaged).
    pub fn stage(&self, relative: &str) {
        let repo = self.repo();
        let mut index = repo.index().unwrap();
        if self.dir.path().join(relative).exists() {
            index.add_path(Path::new(relative)).unwrap();
        } else {
            index.remove_path(Path::new(relative)).unwrap();
        }
        index.write().unwrap();
    }

    /// Stages everything (`git add -A`) and commits it as the test identity, with `message`.
    /// Returns the new commit.
    pub fn commit(&self, message: &str) -> Oid {
        let repo = self.repo();
        let mut index = repo.index().unwrap();
        index.add_all(["*"], IndexAddOption::DEFAULT, None).unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let signature = Signature::now(TEST_NAME, TEST_EMAIL).unwrap();
        let parent = repo.head().ok().map(|head| head.peel_to_commit().unwrap());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        repo.commit(
            Some("HEAD"),
            &signature,
            &signature,
            message,
            &tree,
            &parents,
        )
        .unwrap()
    }

    /// The commit `HEAD` points at.
    pub fn head(&self) -> Oid {
        self.repo().head().unwrap().peel_to_commit().unwrap().id()
    }

    /// `text` with the ids of the commits reachable from `HEAD` (which depend on the clock)
    /// replaced: full ids by `<commit>`, short ones by `<short>`.
    pub fn redact_commits(&self, text: &str) -> String {
        let repo = self.repo();
        let mut text = text.to_owned();
        let mut walk = repo.revwalk().unwrap();
        if walk.push_head().is_err() {
            return text;
        }
        for oid in walk {
            let oid = oid.unwrap();
            let object = repo.find_object(oid, None).unwrap();
            let short = object.short_id().unwrap();
            text = text.replace(&oid.to_string(), "<commit>");
            text = text.replace(short.as_str().unwrap(), "<short>");
        }
        text
    }

    /// The message of `HEAD`.
    pub fn head_message(&self) -> String {
        let repo = self.repo();
        let commit = repo.head().unwrap().peel_to_commit().unwrap();
        String::from_utf8_lossy(commit.message_bytes()).into_owned()
    }

    /// Every path git reports on, with its status (untracked files listed one by one, ignored
    /// ones left out), sorted by path.
    pub fn status(&self) -> Vec<(String, Status)> {
        let repo = self.repo();
        let mut options = git2::StatusOptions::new();
        options.include_untracked(true).recurse_untracked_dirs(true);
        let statuses = repo.statuses(Some(&mut options)).unwrap();
        statuses
            .iter()
            .map(|entry| {
                (
                    String::from_utf8_lossy(entry.path_bytes()).into_owned(),
                    entry.status(),
                )
            })
            .collect()
    }

    /// The index's entries as `(path, blob, mode, stage)`, read from the index file.
    pub fn index_entries(&self) -> Vec<(String, Oid, u32, u16)> {
        let repo = self.repo();
        let index = repo.index().unwrap();
        index
            .iter()
            .map(|entry| {
                (
                    String::from_utf8_lossy(&entry.path).into_owned(),
                    entry.id,
                    entry.mode,
                    (entry.flags >> 12) & 0x3,
                )
            })
            .collect()
    }

    /// The raw bytes of the index file (empty if there is none).
    pub fn index_bytes(&self) -> Vec<u8> {
        std::fs::read(self.repo().path().join("index")).unwrap_or_default()
    }

    /// The files of the tree of commit `commit`, as `(path, contents)`, sorted by path.
    pub fn tree_files(&self, commit: Oid) -> Vec<(String, String)> {
        let repo = self.repo();
        let tree = repo.find_commit(commit).unwrap().tree().unwrap();
        let mut files = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) {
                let blob = repo.find_blob(entry.id()).unwrap();
                files.push((
                    format!("{dir}{}", entry.name().unwrap()),
                    String::from_utf8_lossy(blob.content()).into_owned(),
                ));
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        files.sort();
        files
    }
}

impl Default for TempRepo {
    fn default() -> Self {
        Self::new()
    }
}
