//! The git tools: `git_status`, `git_diff` and `git_commit`, on the repository that contains
//! the workspace root. libgit2 does the work (no `git` executable needed), on a blocking
//! thread, opening the repository afresh for each call.
//!
//! Paths in their output are relative to the workspace root, as the file tools take them.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use git2::{Delta, Diff, DiffFormat, DiffOptions, Repository, Status, StatusOptions};
use keel_tool::{CancellationToken, Effect, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::git::{
    Context, GitError, SESSION_TRAILER, ensure_idle, head_commit, open_repo, session_id_problem,
    short_id, signature, stage_all, strip_session_trailers, workdir,
};
use crate::path::{Access, PathSandbox};

/// The most characters of patch text `git_diff` returns.
const DIFF_LIMIT: usize = 20_000;
/// The most entries `git_status` lists per section.
const STATUS_LIMIT: usize = 200;
/// The most changed files `git_commit` lists.
const COMMIT_FILES_LIMIT: usize = 50;

/// Runs blocking git work off the async runtime.
async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| ToolError::failed(format!("the git operation failed internally: {err}")))?
}

/// `path` (relative to the work tree `workdir`) as the workspace shows it: relative to the
/// workspace root, with `../` when the repository reaches above the root.
fn show_path(sandbox: &PathSandbox, workdir: &Path, path: &str) -> String {
    let absolute = workdir.join(path);
    let root = sandbox.root();
    let shown = if absolute.starts_with(root) {
        sandbox.display(&absolute)
    } else {
        root.ancestors()
            .enumerate()
            .skip(1)
            .find_map(|(ups, base)| {
                let rest = absolute.strip_prefix(base).ok()?;
                Some(format!("{}{}", "../".repeat(ups), rest.display()))
            })
            .unwrap_or_else(|| absolute.display().to_string())
    };
    if path.ends_with('/') && !shown.ends_with('/') {
        shown + "/"
    } else {
        shown
    }
}

fn delta_path(file: git2::DiffFile<'_>) -> String {
    file.path_bytes()
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
        .unwrap_or_default()
}

fn delta_label(delta: Delta) -> &'static str {
    match delta {
        Delta::Added | Delta::Untracked => "new file",
        Delta::Deleted => "deleted",
        Delta::Renamed => "renamed",
        Delta::Copied => "copied",
        Delta::Typechange => "type changed",
        Delta::Conflicted => "conflicted",
        Delta::Modified | Delta::Unmodified | Delta::Ignored | Delta::Unreadable => "modified",
    }
}

/// `label: path`, or `label: old -> new` for renames and copies.
fn delta_line(sandbox: &PathSandbox, workdir: &Path, delta: &git2::DiffDelta<'_>) -> String {
    let new = show_path(sandbox, workdir, &delta_path(delta.new_file()));
    let label = delta_label(delta.status());
    if matches!(delta.status(), Delta::Renamed | Delta::Copied) {
        let old = show_path(sandbox, workdir, &delta_path(delta.old_file()));
        format!("{label}: {old} -> {new}")
    } else {
        format!("{label}: {new}")
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `3 files changed, 5 insertions(+), 1 deletion(-)`.
fn stats_line(diff: &Diff<'_>) -> Result<(String, serde_json::Value), GitError> {
    let stats = diff.stats().context("counting changes")?;
    let line = format!(
        "{} changed, {}(+), {}(-)",
        plural(stats.files_changed(), "file", "files"),
        plural(stats.insertions(), "insertion", "insertions"),
        plural(stats.deletions(), "deletion", "deletions"),
    );
    let value = json!({
        "files": stats.files_changed(),
        "insertions": stats.insertions(),
        "deletions": stats.deletions(),
    });
    Ok((line, value))
}

// ---------------------------------------------------------------------------------------------
// git_status

/// Arguments of `git_status`: none.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GitStatusArgs {}

/// `git_status`: the branch, how far it is from its upstream, and the staged, unstaged and
/// untracked changes.
#[derive(Debug, Clone)]
pub struct GitStatus {
    sandbox: Arc<PathSandbox>,
}

impl GitStatus {
    /// The tool, for the repository containing the sandbox's root.
    pub fn new(sandbox: Arc<PathSandbox>) -> Self {
        Self { sandbox }
    }
}

impl Tool for GitStatus {
    type Args = GitStatusArgs;
    const NAME: &'static str = "git_status";

    fn description(&self) -> &str {
        "Shows the git state of the workspace: the current branch (and how far it is ahead of or \
         behind its upstream), staged changes, unstaged changes, untracked files and conflicts. \
         Says \"clean\" when there is nothing to commit. Use git_diff to see the changes \
         themselves."
    }

    fn effect(&self, _args: &GitStatusArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(
        &self,
        _args: GitStatusArgs,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let sandbox = Arc::clone(&self.sandbox);
        blocking(move || status(&sandbox).map_err(ToolError::from)).await
    }
}

fn status(sandbox: &PathSandbox) -> Result<ToolOutput, GitError> {
    let repo = open_repo(sandbox.root())?;
    let workdir = workdir(&repo)?;
    let mut text = String::new();
    let mut meta = branch_line(&repo, &mut text)?;
    if let Some(state) = in_progress(&repo) {
        let _ = writeln!(
            text,
            "A {state} is in progress: finish it (`git {state} --continue`) or abort it (`git \
             {state} --abort`) from the shell; git_commit refuses until then."
        );
    }
    let mut options = StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(false)
        .include_ignored(false)
        .renames_head_to_index(true);
    let statuses = repo
        .statuses(Some(&mut options))
        .context("reading the status")?;
    let (mut staged, mut unstaged, mut untracked, mut conflicted) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for entry in statuses.iter() {
        let flags = entry.status();
        let path = String::from_utf8_lossy(entry.path_bytes()).into_owned();
        if flags.contains(Status::CONFLICTED) {
            conflicted.push(show_path(sandbox, &workdir, &path));
            continue;
        }
        if let Some(delta) = entry.head_to_index() {
            staged.push(delta_line(sandbox, &workdir, &delta));
        }
        if flags.contains(Status::WT_NEW) {
            untracked.push(show_path(sandbox, &workdir, &path));
        } else if let Some(delta) = entry.index_to_workdir() {
            unstaged.push(delta_line(sandbox, &workdir, &delta));
        }
    }
    let clean = staged.is_empty() && unstaged.is_empty() && untracked.is_empty();
    let clean = clean && conflicted.is_empty();
    if clean {
        text.push_str("clean: nothing to commit (no staged, unstaged or untracked changes)\n");
    }
    for (title, items) in [
        ("Conflicted", &conflicted),
        ("Staged", &staged),
        ("Unstaged", &unstaged),
        ("Untracked", &untracked),
    ] {
        if items.is_empty() {
            continue;
        }
        let _ = writeln!(text, "{title} ({}):", items.len());
        for item in items.iter().take(STATUS_LIMIT) {
            let _ = writeln!(text, "  {item}");
        }
        if items.len() > STATUS_LIMIT {
            let _ = writeln!(text, "  ... and {} more", items.len() - STATUS_LIMIT);
        }
    }
    if let Some(object) = meta.as_object_mut() {
        object.insert("clean".into(), clean.into());
        object.insert("staged".into(), staged.len().into());
        object.insert("unstaged".into(), unstaged.len().into());
        object.insert("untracked".into(), untracked.len().into());
        object.insert("conflicted".into(), conflicted.len().into());
    }
    Ok(ToolOutput::text(text.trim_end()).with_metadata(meta))
}

/// Which operation is under way, if any.
fn in_progress(repo: &Repository) -> Option<&'static str> {
    match ensure_idle(repo) {
        Err(GitError::InProgress { state }) => Some(state),
        _ => None,
    }
}

/// Writes the branch line(s) and returns the branch facts as metadata.
fn branch_line(repo: &Repository, text: &mut String) -> Result<serde_json::Value, GitError> {
    let head = match repo.head() {
        Ok(head) => head,
        Err(err) if err.code() == git2::ErrorCode::UnbornBranch => {
            let name = repo
                .find_reference("HEAD")
                .ok()
                .and_then(|r| r.symbolic_target().ok().flatten().map(str::to_owned))
                .map(|target| {
                    target
                        .strip_prefix("refs/heads/")
                        .unwrap_or(&target)
                        .to_owned()
                })
                .unwrap_or_default();
            let _ = writeln!(text, "On branch {name} (no commits yet)");
            return Ok(json!({ "branch": name, "unborn": true }));
        }
        Err(err) => return Err(GitError::git("reading HEAD", err)),
    };
    let Some(head_id) = head.target() else {
        return Err(GitError::git(
            "reading HEAD",
            git2::Error::from_str("HEAD does not point at a commit"),
        ));
    };
    if !head.is_branch() {
        let short = short_id(repo, head_id);
        let _ = writeln!(text, "HEAD detached at {short} (not on a branch)");
        return Ok(json!({ "branch": null, "detached": true, "head": head_id.to_string() }));
    }
    let name = head.shorthand().unwrap_or_default().to_owned();
    let branch = git2::Branch::wrap(head);
    let upstream = branch.upstream().ok().and_then(|upstream| {
        let upstream_name = upstream.name().ok().flatten()?.to_owned();
        let upstream_id = upstream.get().target()?;
        Some((upstream_name, upstream_id))
    });
    let Some((upstream, upstream_id)) = upstream else {
        let _ = writeln!(text, "On branch {name} (no upstream branch)");
        return Ok(json!({ "branch": name, "head": head_id.to_string() }));
    };
    let (ahead, behind) = repo
        .graph_ahead_behind(head_id, upstream_id)
        .context("comparing the branch with its upstream")?;
    let commits = |n| plural(n, "commit", "commits");
    let relation = match (ahead, behind) {
        (0, 0) => format!("up to date with {upstream}"),
        (a, 0) => format!("ahead of {upstream} by {}", commits(a)),
        (0, b) => format!("behind {upstream} by {}", commits(b)),
        (a, b) => format!("diverged from {upstream}: {a} ahead, {b} behind"),
    };
    let _ = writeln!(text, "On branch {name} ({relation})");
    Ok(json!({
        "branch": name,
        "head": head_id.to_string(),
        "upstream": upstream,
        "ahead": ahead,
        "behind": behind,
    }))
}

// ---------------------------------------------------------------------------------------------
// git_diff

/// Arguments of `git_diff`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GitDiffArgs {
    /// Show staged changes (index vs HEAD) instead of unstaged ones (work tree vs index).
    #[serde(default)]
    pub staged: bool,
    /// Only changes in this file or directory (relative to the workspace root).
    #[serde(default)]
    pub path: Option<String>,
}

/// `git_diff`: the unstaged (or staged) changes as a unified diff.
#[derive(Debug, Clone)]
pub struct GitDiff {
    sandbox: Arc<PathSandbox>,
}

impl GitDiff {
    /// The tool, for the repository containing the sandbox's root.
    pub fn new(sandbox: Arc<PathSandbox>) -> Self {
        Self { sandbox }
    }
}

impl Tool for GitDiff {
    type Args = GitDiffArgs;
    const NAME: &'static str = "git_diff";

    fn description(&self) -> &str {
        "Shows changes as a unified diff: by default the unstaged ones (the work tree against \
         the index); with staged: true the staged ones (the index against HEAD). path limits it \
         to a file or directory. Untracked files are not shown (git_status lists them). Long \
         diffs are cut; then look at one path at a time."
    }

    fn effect(&self, _args: &GitDiffArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(&self, args: GitDiffArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let sandbox = Arc::clone(&self.sandbox);
        blocking(move || diff(&sandbox, &args)).await
    }
}

fn diff(sandbox: &PathSandbox, args: &GitDiffArgs) -> Result<ToolOutput, ToolError> {
    let repo = open_repo(sandbox.root())?;
    let workdir = workdir(&repo)?;
    let mut options = DiffOptions::new();
    options.include_typechange(true);
    let pathspec = match &args.path {
        Some(given) => {
            let resolved = sandbox.resolve(given, Access::Read)?;
            let Ok(relative) = resolved.absolute().strip_prefix(&workdir) else {
                return Err(ToolError::InvalidArguments(format!(
                    "{given} is outside the git repository at {}",
                    workdir.display()
                )));
            };
            let Some(relative) = relative.to_str() else {
                return Err(ToolError::InvalidArguments(format!(
                    "{given}: the path is not valid UTF-8"
                )));
            };
            if !relative.is_empty() {
                options.pathspec(relative).disable_pathspec_match(true);
            }
            Some(given.as_str())
        }
        None => None,
    };
    let diff = if args.staged {
        let head = head_commit(&repo)?;
        let tree = match &head {
            Some(commit) => Some(commit.tree().context("reading the HEAD tree")?),
            None => None,
        };
        let mut diff = repo
            .diff_tree_to_index(tree.as_ref(), None, Some(&mut options))
            .context("comparing the index with HEAD")?;
        diff.find_similar(None).context("detecting renames")?;
        diff
    } else {
        repo.diff_index_to_workdir(None, Some(&mut options))
            .context("comparing the work tree with the index")?
    };
    if diff.deltas().len() == 0 {
        let scope = pathspec.map(|p| format!(" in {p}")).unwrap_or_default();
        let text = if args.staged {
            format!("no changes{scope}: nothing is staged (the index matches HEAD)")
        } else {
            format!(
                "no changes{scope}: the work tree matches the index (for staged changes use \
                 staged: true; untracked files are listed by git_status)"
            )
        };
        return Ok(ToolOutput::text(text).with_metadata(json!({ "files": 0 })));
    }
    let (stats, mut meta) = stats_line(&diff)?;
    let patch = patch_text(&diff, sandbox, &workdir)?;
    let mut text = format!("{stats}\n\n{}", patch.text);
    if !patch.left_out.is_empty() {
        let total = patch.left_out.len() + patch.shown;
        let mut names: Vec<&str> = patch.left_out.iter().map(String::as_str).take(20).collect();
        if patch.left_out.len() > names.len() {
            names.push("...");
        }
        let _ = write!(
            text,
            "\n[diff cut at {DIFF_LIMIT} characters: {} of {total} files shown (the last perhaps \
             in part); not shown: {}. Pass path to see one file or directory at a time.]\n",
            patch.shown,
            names.join(", ")
        );
    }
    if let Some(object) = meta.as_object_mut() {
        object.insert("truncated".into(), (!patch.left_out.is_empty()).into());
    }
    Ok(ToolOutput::text(text).with_metadata(meta))
}

/// Patch text cut at [`DIFF_LIMIT`] on a line boundary.
struct Patch {
    text: String,
    /// Files whose patch was started.
    shown: usize,
    /// Files not shown at all.
    left_out: Vec<String>,
}

fn patch_text(diff: &Diff<'_>, sandbox: &PathSandbox, workdir: &Path) -> Result<Patch, GitError> {
    let mut text = String::new();
    let mut cut = false;
    let mut started: Vec<String> = Vec::new();
    let mut all: Vec<String> = Vec::new();
    diff.print(DiffFormat::Patch, |delta, _hunk, line| {
        let path = delta_path(delta.new_file());
        if all.last() != Some(&path) {
            all.push(path.clone());
        }
        if cut {
            return true;
        }
        let content = String::from_utf8_lossy(line.content());
        let origin = line.origin();
        let prefix = matches!(origin, '+' | '-' | ' ');
        if text.len() + content.len() + usize::from(prefix) > DIFF_LIMIT {
            cut = true;
            return true;
        }
        if started.last() != Some(&path) {
            started.push(path);
        }
        if prefix {
            text.push(origin);
        }
        text.push_str(&content);
        true
    })
    .context("formatting the diff")?;
    let left_out = all
        .iter()
        .filter(|path| !started.contains(path))
        .map(|path| show_path(sandbox, workdir, path))
        .collect();
    Ok(Patch {
        text,
        shown: started.len(),
        left_out,
    })
}

// ---------------------------------------------------------------------------------------------
// git_commit

/// Arguments of `git_commit`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GitCommitArgs {
    /// The commit message: a short summary line, then a blank line and details if useful.
    pub message: String,
}

/// `git_commit`: stages every change (`git add -A`) and commits it.
///
/// The message gets a `Keel-Session: <session id>` trailer (the session of the call's
/// [`ToolContext`]), which is how [`GitSession::undo_last_commit`](crate::git::GitSession::undo_last_commit)
/// knows the commit is this session's.
#[derive(Debug, Clone)]
pub struct GitCommit {
    sandbox: Arc<PathSandbox>,
}

impl GitCommit {
    /// The tool, for the repository containing the sandbox's root.
    pub fn new(sandbox: Arc<PathSandbox>) -> Self {
        Self { sandbox }
    }
}

impl Tool for GitCommit {
    type Args = GitCommitArgs;
    const NAME: &'static str = "git_commit";

    fn description(&self) -> &str {
        "Stages every change in the work tree, like `git add -A` (modified files, new files that \
         are not ignored, deletions), and commits it on the current branch with the message. \
         The repository's user.name and user.email are used, or `keel <keel@localhost>` when \
         none is configured. Check git_status first: everything it lists gets committed."
    }

    fn effect(&self, args: &GitCommitArgs) -> Effect {
        let summary = args.message.trim().lines().next().unwrap_or_default();
        Effect::destructive(format!(
            "stages every change in the work tree (git add -A) and commits it: {summary:?}"
        ))
    }

    async fn call(&self, args: GitCommitArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let sandbox = Arc::clone(&self.sandbox);
        let session = ctx.session_id().to_owned();
        let cancel = ctx.cancel().clone();
        blocking(move || commit(&sandbox, &args.message, &session, &cancel)).await
    }
}

/// The message as committed: tidied, any session trailer of the model's removed, this
/// session's appended.
fn commit_message(message: &str, session: &str) -> Result<String, ToolError> {
    let body = strip_session_trailers(message);
    let body = git2::message_prettify(body, None)
        .map_err(|err| ToolError::InvalidArguments(format!("the commit message: {err}")))?;
    if body.trim().is_empty() {
        return Err(ToolError::InvalidArguments(
            "the commit message is empty; give a short summary of the change (a line of up to \
             about 70 characters, then details after a blank line if useful)"
                .to_owned(),
        ));
    }
    if let Some(problem) = session_id_problem(session) {
        tracing::warn!(
            session,
            problem,
            "session id cannot be a trailer; committing without"
        );
        return Ok(body);
    }
    Ok(format!(
        "{}\n\n{SESSION_TRAILER}: {session}\n",
        body.trim_end()
    ))
}

/// Stages and commits. A cancelled call stops before it writes the index: the blocking work
/// outlives the dropped future, and a commit after "interrupted" would surprise everyone.
fn commit(
    sandbox: &PathSandbox,
    message: &str,
    session: &str,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let message = commit_message(message, session)?;
    let repo = open_repo(sandbox.root())?;
    let workdir = workdir(&repo)?;
    ensure_idle(&repo)?;
    let mut index = repo.index().context("reading the index")?;
    let left_out = stage_all(&mut index)?;
    let left_out: Vec<String> = left_out
        .iter()
        .map(|path| show_path(sandbox, &workdir, path))
        .collect();
    let left_out_note = if left_out.is_empty() {
        String::new()
    } else {
        format!(
            "\nleft out (git repositories of their own; add them as submodules from the shell if \
             you mean to): {}",
            left_out.join(", ")
        )
    };
    let tree_id = index.write_tree().context("writing the tree")?;
    let tree = repo.find_tree(tree_id).context("reading the new tree")?;
    let parent = head_commit(&repo)?;
    let parent_tree = match &parent {
        Some(commit) => Some(commit.tree().context("reading the HEAD tree")?),
        None => None,
    };
    let unchanged = match &parent_tree {
        Some(parent_tree) => parent_tree.id() == tree_id,
        None => tree.is_empty(),
    };
    if unchanged {
        return Err(ToolError::failed(format!(
            "nothing to commit: the work tree matches HEAD (ignored files are never committed); \
             make changes first, or check git_status{left_out_note}"
        )));
    }
    if cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    index.write().context("writing the index")?;
    let (signature, fallback) = signature(&repo)?;
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let oid = repo
        .commit(
            Some("HEAD"),
            &signature,
            &signature,
            &message,
            &tree,
            &parents,
        )
        .context("creating the commit")?;
    tracing::info!(commit = %oid, "git_commit made a commit");
    let short = short_id(&repo, oid);
    let summary = message.lines().next().unwrap_or_default().to_owned();
    let branch = repo
        .head()
        .ok()
        .filter(git2::Reference::is_branch)
        .and_then(|head| head.shorthand().ok().map(str::to_owned));
    let mut diff = repo
        .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None)
        .context("listing the committed changes")?;
    diff.find_similar(None).context("detecting renames")?;
    let (stats, mut meta) = stats_line(&diff)?;
    let on = branch
        .as_deref()
        .map_or_else(|| "detached HEAD".to_owned(), |b| format!("branch {b}"));
    let mut text = format!("committed {short} on {on}: {summary}\n{stats}\n");
    for delta in diff.deltas().take(COMMIT_FILES_LIMIT) {
        let _ = writeln!(text, "  {}", delta_line(sandbox, &workdir, &delta));
    }
    if diff.deltas().len() > COMMIT_FILES_LIMIT {
        let _ = writeln!(
            text,
            "  ... and {} more",
            diff.deltas().len() - COMMIT_FILES_LIMIT
        );
    }
    let author = format!(
        "{} <{}>",
        String::from_utf8_lossy(signature.name_bytes()),
        String::from_utf8_lossy(signature.email_bytes())
    );
    if !left_out_note.is_empty() {
        text.push_str(left_out_note.trim_start());
        text.push('\n');
    }
    if fallback {
        let _ = writeln!(
            text,
            "author: {author} (the repository configures no user.name/user.email)"
        );
    }
    if let Some(object) = meta.as_object_mut() {
        object.insert("commit".into(), oid.to_string().into());
        object.insert("branch".into(), branch.into());
        object.insert("author".into(), author.into());
        object.insert("fallback_identity".into(), fallback.into());
        object.insert("left_out".into(), left_out.into());
    }
    Ok(ToolOutput::text(text.trim_end()).with_metadata(meta))
}
