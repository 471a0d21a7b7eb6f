//! `list_directory`: a directory's tree, and the walking machinery the search tools share.

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use keel_tool::{CancellationToken, Effect, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::error::SandboxError;
use crate::path::{Access, PathSandbox, ResolvedPath};

/// Default levels listed.
const DEFAULT_DEPTH: u32 = 2;
/// Most entries shown.
const MAX_ENTRIES: usize = 1_000;
/// Most entries walked; past this the total is given as "more than".
const MAX_SCANNED: usize = 200_000;

/// Arguments of [`ListDirectory`].
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ListDirectoryArgs {
    /// Directory to list, relative to the workspace root (default: the root).
    pub path: Option<String>,
    /// How many levels to list: 1 lists only the directory's own entries (default 2).
    #[schemars(range(min = 1))]
    pub depth: Option<u32>,
    /// Entries to skip, as gitignore-style globs relative to the listed directory, e.g.
    /// ["target/", "*.lock", "docs/generated/**"].
    pub ignore: Option<Vec<String>>,
}

/// Lists a directory as an indented tree, honouring `.gitignore`.
///
/// Output: the directory (`./` for the root) on the first line, then its entries one per
/// line, indented two spaces per level below it and sorted by name. Directories end with `/`;
/// symlinks show `name -> target` (marked when they lead outside the sandbox) and are never
/// followed. Hidden entries are listed; `.git` never is, nor anything `.gitignore`, `.ignore`
/// or the `ignore` argument excludes (in a git repository or not). Past 1,000 entries the
/// deepest are left out (whole levels are kept from the top) and each directory with entries
/// left out says how many.
#[derive(Debug, Clone)]
pub struct ListDirectory {
    sandbox: Arc<PathSandbox>,
}

impl ListDirectory {
    /// The tool, listing inside `sandbox`.
    pub fn new(sandbox: Arc<PathSandbox>) -> Self {
        Self { sandbox }
    }
}

impl Tool for ListDirectory {
    type Args = ListDirectoryArgs;
    const NAME: &'static str = "list_directory";

    fn description(&self) -> &str {
        "Lists a directory as an indented tree (default 2 levels deep), to see how a project is \
         laid out. Directories end with \"/\"; symlinks show \"name -> target\". Entries \
         excluded by .gitignore are left out, and so is .git; hidden files are shown. Use \
         `ignore` to skip more (gitignore-style globs like \"target/\" or \"*.lock\"), `path` \
         to look inside one directory, `depth` to go deeper or shallower. At most 1,000 \
         entries are shown; a directory marked \"[+N not shown]\" has more inside. To find \
         files by name use glob; to search contents use grep."
    }

    fn effect(&self, _args: &ListDirectoryArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(
        &self,
        args: ListDirectoryArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let sandbox = Arc::clone(&self.sandbox);
        run_blocking(Self::NAME, ctx, move |stop| list(&sandbox, args, stop)).await
    }
}

/// One entry found, relative to the listed directory.
struct Entry {
    relative: PathBuf,
    depth: usize,
    kind: Kind,
}

enum Kind {
    Dir,
    File,
    Symlink(PathBuf),
}

fn list(
    sandbox: &PathSandbox,
    args: ListDirectoryArgs,
    stop: &Stop,
) -> Result<ToolOutput, ToolError> {
    let depth = args.depth.unwrap_or(DEFAULT_DEPTH);
    if depth == 0 {
        return Err(ToolError::InvalidArguments(
            "depth must be at least 1 (1 lists the directory's own entries)".into(),
        ));
    }
    let dir = resolve_existing(sandbox, args.path.as_deref())?;
    let root = dir.absolute().to_path_buf();
    let shown_dir = sandbox.display(&root);
    if !root.is_dir() {
        return Err(ToolError::InvalidArguments(format!(
            "{shown_dir} is a file, not a directory; read it instead, or list its directory"
        )));
    }
    let skip = user_ignores(&root, args.ignore.as_deref().unwrap_or_default())?;

    let Walk {
        entries,
        unreadable,
        cut: scan_cut,
    } = walk(&root, depth, skip, stop)?;
    let total = entries.len();
    let header = if shown_dir == "." {
        "./".to_owned()
    } else {
        format!("{shown_dir}/")
    };
    if total == 0 {
        let mut text = format!("{header} is empty");
        if unreadable > 0 {
            text.push_str(&format!(" ({unreadable} entries could not be read)"));
        }
        return Ok(ToolOutput::text(text).with_metadata(json!({"entries": 0, "shown": 0})));
    }
    let kept = choose(&entries);
    let hidden = hidden_counts(&entries, &kept);

    let mut text = header;
    text.push('\n');
    for (entry, _) in entries.iter().zip(&kept).filter(|(_, keep)| **keep) {
        push_entry(&mut text, entry, &hidden, &root, sandbox);
        text.push('\n');
    }
    let shown = kept.iter().filter(|keep| **keep).count();
    tracing::debug!(dir = %shown_dir, depth, entries = total, shown, "list_directory");
    if shown < total || scan_cut {
        let all = if scan_cut {
            format!("more than {total}")
        } else {
            total.to_string()
        };
        text.push_str(&format!(
            "\n[{shown} of {all} entries shown, shallowest first; directories marked [+N not \
             shown] hold the rest. Narrow the listing: list one of them with path, lower depth, \
             or skip entries with ignore.]\n"
        ));
    }
    if unreadable > 0 {
        text.push_str(&format!(
            "\n[{unreadable} entries could not be read and are left out]\n"
        ));
    }
    Ok(ToolOutput::text(text).with_metadata(json!({
        "entries": total,
        "shown": shown,
        "unreadable": unreadable,
    })))
}

/// What a walk found: the entries in walk order, how many could not be read, and whether it
/// stopped at [`MAX_SCANNED`].
struct Walk {
    entries: Vec<Entry>,
    unreadable: usize,
    cut: bool,
}

/// Walks `root` down `depth` levels, sorted by name, leaving out `.git` and what `skip` and
/// the ignore files exclude.
fn walk(root: &Path, depth: u32, skip: Gitignore, stop: &Stop) -> Result<Walk, ToolError> {
    let mut builder = walk_builder(root);
    builder
        .max_depth(Some(usize::try_from(depth).unwrap_or(usize::MAX)))
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            not_git_dir(entry) && !skip.matched(entry.path(), is_dir).is_ignore()
        });
    let mut entries = Vec::new();
    let mut unreadable = 0usize;
    let mut cut = false;
    for item in builder.build() {
        if stop.is_set() {
            return Err(ToolError::Cancelled);
        }
        let entry = match item {
            Ok(entry) => entry,
            Err(_) => {
                unreadable += 1;
                continue;
            }
        };
        if entry.depth() == 0 {
            continue;
        }
        if entries.len() >= MAX_SCANNED {
            cut = true;
            break;
        }
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        let kind = match entry.file_type() {
            Some(t) if t.is_dir() => Kind::Dir,
            Some(t) if t.is_symlink() => {
                Kind::Symlink(std::fs::read_link(entry.path()).unwrap_or_default())
            }
            _ => Kind::File,
        };
        entries.push(Entry {
            relative: relative.to_path_buf(),
            depth: entry.depth(),
            kind,
        });
    }
    Ok(Walk {
        entries,
        unreadable,
        cut,
    })
}

/// Adds a shown `entry` to `text`, without its newline: indented by its depth; a directory
/// with `/` and how many entries below it are `hidden`; a symlink with its target, marked
/// when it leads outside the sandbox.
fn push_entry(
    text: &mut String,
    entry: &Entry,
    hidden: &HashMap<&Path, usize>,
    root: &Path,
    sandbox: &PathSandbox,
) {
    let name = entry
        .relative
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    for _ in 0..entry.depth {
        text.push_str("  ");
    }
    text.push_str(&name);
    match &entry.kind {
        Kind::Dir => {
            text.push('/');
            if let Some(n) = hidden.get(entry.relative.as_path()) {
                text.push_str(&format!("  [+{n} not shown]"));
            }
        }
        Kind::File => {}
        Kind::Symlink(target) => {
            text.push_str(" -> ");
            text.push_str(&target.to_string_lossy());
            let inside = root
                .join(&entry.relative)
                .to_str()
                .is_some_and(|link| sandbox.resolve(link, Access::Read).is_ok());
            if !inside {
                text.push_str("  [outside the workspace, not followed]");
            }
        }
    }
}

/// Which entries to show: whole levels, shallowest first, until the cap.
fn choose(entries: &[Entry]) -> Vec<bool> {
    if entries.len() <= MAX_ENTRIES {
        return vec![true; entries.len()];
    }
    let mut order: Vec<usize> = (0..entries.len()).collect();
    // Stable: within a level, walk order (sorted) is kept.
    order.sort_by_key(|&i| entries[i].depth);
    let mut kept = vec![false; entries.len()];
    for &i in order.iter().take(MAX_ENTRIES) {
        kept[i] = true;
    }
    kept
}

/// For each shown directory, how many entries below it are not shown.
fn hidden_counts<'a>(entries: &'a [Entry], kept: &[bool]) -> HashMap<&'a Path, usize> {
    let shown_dirs: HashSet<&Path> = entries
        .iter()
        .zip(kept)
        .filter(|(entry, keep)| **keep && matches!(entry.kind, Kind::Dir))
        .map(|(entry, _)| entry.relative.as_path())
        .collect();
    let mut counts = HashMap::new();
    for (entry, _) in entries.iter().zip(kept).filter(|(_, keep)| !**keep) {
        let mut at = entry.relative.parent();
        while let Some(dir) = at.filter(|dir| !dir.as_os_str().is_empty()) {
            if shown_dirs.contains(dir) {
                *counts.entry(dir).or_insert(0) += 1;
                break;
            }
            at = dir.parent();
        }
    }
    counts
}

/// The `ignore` argument as a gitignore matcher rooted at the listed directory.
fn user_ignores(root: &Path, patterns: &[String]) -> Result<Gitignore, ToolError> {
    let mut builder = GitignoreBuilder::new(root);
    for pattern in patterns {
        builder.add_line(None, pattern).map_err(|err| {
            ToolError::InvalidArguments(format!("invalid ignore pattern {pattern:?}: {err}"))
        })?;
    }
    builder
        .build()
        .map_err(|err| ToolError::InvalidArguments(format!("invalid ignore patterns: {err}")))
}

// ---------------------------------------------------------------------------------------------
// Shared by the search tools (list_directory, grep, glob).
// ---------------------------------------------------------------------------------------------

/// Tells blocking search work to stop: the run was cancelled, or the call was abandoned
/// (timed out, or its future dropped).
#[derive(Debug, Clone)]
pub(super) struct Stop {
    token: CancellationToken,
    abandoned: Arc<AtomicBool>,
}

impl Stop {
    /// Whether to stop now.
    pub(super) fn is_set(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed) || self.token.is_cancelled()
    }
}

/// Marks the call abandoned when the awaiting future goes away.
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `work` on the blocking pool, off the async runtime; it should check the [`Stop`] it is
/// given and return [`ToolError::Cancelled`] when set.
pub(super) async fn run_blocking<T, F>(
    tool: &'static str,
    ctx: &ToolContext,
    work: F,
) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(&Stop) -> Result<T, ToolError> + Send + 'static,
{
    let stop = Stop {
        token: ctx.cancel().clone(),
        abandoned: Arc::new(AtomicBool::new(false)),
    };
    let _abandon = AbandonOnDrop(Arc::clone(&stop.abandoned));
    match tokio::task::spawn_blocking(move || work(&stop)).await {
        Ok(result) => result,
        Err(err) => Err(ToolError::failed(format!(
            "{tool} failed internally: {err}"
        ))),
    }
}

/// Resolves a search tool's `path` argument (default, or empty: the root) for reading; it
/// must exist.
pub(super) fn resolve_existing(
    sandbox: &PathSandbox,
    path: Option<&str>,
) -> Result<ResolvedPath, ToolError> {
    let given = match path {
        Some(path) if !path.is_empty() => path,
        _ => ".",
    };
    let resolved = sandbox.resolve(given, Access::Read)?;
    if !resolved.exists() {
        return Err(SandboxError::NotFound {
            given: given.to_owned(),
        }
        .into());
    }
    Ok(resolved)
}

/// A walker below `root` (already resolved, so free of symlinks): honours `.gitignore`,
/// `.ignore` and git's excludes whether or not this is a git repository, lists hidden
/// entries, never follows symlinks, and never enters `.git`.
pub(super) fn walk_builder(root: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(not_git_dir);
    builder
}

/// False for `.git` below the walk's root.
fn not_git_dir(entry: &DirEntry) -> bool {
    entry.depth() == 0 || entry.file_name() != ".git"
}

/// Where a symlink met while walking leads, if that is a regular file the sandbox lets us
/// read. Links leading outside, to directories or to nothing give `None`.
pub(super) fn symlinked_file(sandbox: &PathSandbox, link: &Path) -> Option<(String, ResolvedPath)> {
    let given = link.to_str()?;
    let resolved = sandbox.resolve(given, Access::Read).ok()?;
    let meta = std::fs::metadata(resolved.absolute()).ok()?;
    meta.is_file().then(|| (given.to_owned(), resolved))
}

/// Walks `builder` in parallel. Each walker thread gets a state from `make`, and `visit` is
/// called with it for every entry; the states are returned when the walk ends, with the count
/// of entries that could not be read. Stops early when `stop` is set.
pub(super) fn walk_parallel<S, M, V>(
    builder: &WalkBuilder,
    stop: &Stop,
    make: M,
    visit: V,
) -> (Vec<S>, usize)
where
    S: Send,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, DirEntry) + Sync,
{
    let states = Mutex::new(Vec::new());
    let errors = AtomicUsize::new(0);
    let mut visitors = Visitors {
        make: &make,
        visit: &visit,
        states: &states,
        errors: &errors,
        stop,
    };
    builder.build_parallel().visit(&mut visitors);
    let states = states.into_inner().unwrap_or_else(|p| p.into_inner());
    (states, errors.into_inner())
}

struct Visitors<'a, S, M, V> {
    make: &'a M,
    visit: &'a V,
    states: &'a Mutex<Vec<S>>,
    errors: &'a AtomicUsize,
    stop: &'a Stop,
}

impl<'a, S, M, V> ParallelVisitorBuilder<'a> for Visitors<'a, S, M, V>
where
    S: Send,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, DirEntry) + Sync,
{
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(Visitor {
            state: Some((self.make)()),
            visit: self.visit,
            states: self.states,
            errors: self.errors,
            stop: self.stop,
        })
    }
}

/// One walker thread's visitor; hands its state back when dropped.
struct Visitor<'a, S: Send, V> {
    state: Option<S>,
    visit: &'a V,
    states: &'a Mutex<Vec<S>>,
    errors: &'a AtomicUsize,
    stop: &'a Stop,
}

impl<S, V> ParallelVisitor for Visitor<'_, S, V>
where
    S: Send,
    V: Fn(&mut S, DirEntry) + Sync,
{
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        if self.stop.is_set() {
            return WalkState::Quit;
        }
        match (entry, self.state.as_mut()) {
            (Ok(entry), Some(state)) => (self.visit)(state, entry),
            (Ok(_), None) => {}
            (Err(_), _) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        WalkState::Continue
    }
}

impl<S: Send, V> Drop for Visitor<'_, S, V> {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            self.states
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(state);
        }
    }
}

/// Keeps the `k` smallest items pushed, and counts them all.
#[derive(Debug)]
pub(super) struct TopK<T: Ord> {
    k: usize,
    heap: BinaryHeap<T>,
    seen: usize,
}

impl<T: Ord> TopK<T> {
    /// Keeps at most `k` items.
    pub(super) fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k.min(4096) + 1),
            seen: 0,
        }
    }

    /// Whether `item` would be kept if pushed now.
    pub(super) fn would_keep(&self, item: &T) -> bool {
        self.heap.len() < self.k || self.heap.peek().is_some_and(|top| item < top)
    }

    /// Counts `item`, and keeps it if it is among the `k` smallest so far.
    pub(super) fn push(&mut self, item: T) {
        self.seen += 1;
        self.keep(item);
    }

    /// Counts `n` items that were not kept.
    pub(super) fn count(&mut self, n: usize) {
        self.seen += n;
    }

    fn keep(&mut self, item: T) {
        if self.heap.len() < self.k {
            self.heap.push(item);
        } else if self.heap.peek().is_some_and(|top| item < *top) {
            self.heap.pop();
            self.heap.push(item);
        }
    }

    /// Folds `other` in.
    pub(super) fn merge(&mut self, other: TopK<T>) {
        self.seen += other.seen;
        for item in other.heap {
            self.keep(item);
        }
    }

    /// How many items were pushed or counted in all.
    pub(super) fn seen(&self) -> usize {
        self.seen
    }

    /// The kept items, smallest first.
    pub(super) fn into_sorted_vec(self) -> Vec<T> {
        self.heap.into_sorted_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_the_smallest_and_counts_all() {
        let mut a = TopK::new(3);
        for n in [9, 1, 8, 2] {
            a.push(n);
        }
        let mut b = TopK::new(3);
        for n in [7, 0] {
            b.push(n);
        }
        b.count(5);
        a.merge(b);
        assert_eq!(a.seen(), 11);
        assert!(a.would_keep(&1));
        assert!(!a.would_keep(&2));
        assert_eq!(a.into_sorted_vec(), [0, 1, 2]);
    }
}
