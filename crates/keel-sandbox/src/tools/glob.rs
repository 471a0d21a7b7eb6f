//! `glob`: finds files by path pattern, newest first.

use std::cmp::Reverse;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use globset::GlobBuilder;
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::list_directory::{
    Stop, TopK, resolve_existing, run_blocking, symlinked_file, walk_builder, walk_parallel,
};
use crate::path::PathSandbox;

/// Most files listed.
const MAX_FILES: usize = 500;

/// Arguments of [`Glob`].
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct GlobArgs {
    /// Pattern for file paths relative to `path`, e.g. "**/*.rs", "src/*.toml",
    /// "**/test_*.py" or "*.{json,yaml}". "*" and "?" stay within one directory, "**" spans
    /// any number of directories, "{a,b}" gives alternatives, `[abc]` a character set.
    pub pattern: String,
    /// Directory the pattern is relative to (default: the workspace root).
    pub path: Option<String>,
}

/// Finds files whose path matches a glob pattern.
///
/// Output: one path per line, relative to the workspace root, most recently modified first
/// (ties by path). Only files are listed (and symlinks leading to files inside the sandbox),
/// never directories. `.gitignore`/`.ignore` are honoured (in a git repository or not),
/// `.git` is skipped, hidden files are included. A leading run of plain directory names in
/// the pattern (`src/tools/*.rs`) is walked directly, even if ignored. At most 500 paths,
/// with a note giving the total.
#[derive(Debug, Clone)]
pub struct Glob {
    sandbox: Arc<PathSandbox>,
}

impl Glob {
    /// The tool, searching inside `sandbox`.
    pub fn new(sandbox: Arc<PathSandbox>) -> Self {
        Self { sandbox }
    }
}

impl Tool for Glob {
    type Args = GlobArgs;
    const NAME: &'static str = "glob";

    fn description(&self) -> &str {
        "Finds files by path pattern, e.g. \"**/*.rs\" (any depth), \"src/*.toml\" (directly in \
         src), \"**/test_*.py\" or \"**/*.{ts,tsx}\". The pattern is relative to `path` \
         (default: the workspace root); \"*\" does not cross \"/\", \"**\" spans directories. \
         Returns file paths relative to the workspace root, most recently modified first, at \
         most 500 (a note gives the total). Files excluded by .gitignore and the .git \
         directory are skipped. Lists files only; use list_directory to see directories and \
         grep to search file contents."
    }

    fn effect(&self, _args: &GlobArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(&self, args: GlobArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let sandbox = Arc::clone(&self.sandbox);
        run_blocking(Self::NAME, ctx, move |stop| glob(&sandbox, &args, stop)).await
    }
}

/// A file found: newest first, then by path.
type Found = (Reverse<SystemTime>, PathBuf);

fn glob(sandbox: &PathSandbox, args: &GlobArgs, stop: &Stop) -> Result<ToolOutput, ToolError> {
    let pattern = normalize(&args.pattern)?;
    let matcher = GlobBuilder::new(&pattern)
        .literal_separator(true)
        .build()
        .map_err(|err| {
            ToolError::InvalidArguments(format!("invalid glob pattern {:?}: {err}", args.pattern))
        })?
        .compile_matcher();
    let dir = resolve_existing(sandbox, args.path.as_deref())?;
    let root = dir.absolute().to_path_buf();
    let shown_dir = sandbox.display(&root);
    if !root.is_dir() {
        return Err(ToolError::InvalidArguments(format!(
            "{shown_dir} is a file, not a directory; give the directory to search as path"
        )));
    }

    // Walk only below the pattern's leading plain directory names, only as deep as needed.
    let components: Vec<&str> = pattern.split('/').collect();
    let literal = components[..components.len() - 1]
        .iter()
        .take_while(|c| !has_meta(c))
        .count();
    let mut start = root.clone();
    for name in &components[..literal] {
        start.push(name);
        // A missing name, a file or a symlink (never followed): nothing can match below.
        if !std::fs::symlink_metadata(&start).is_ok_and(|meta| meta.is_dir()) {
            return Ok(render(args, &shown_dir, sandbox, TopK::new(MAX_FILES), 0));
        }
    }
    let depth = if components.iter().any(|c| c.contains("**")) {
        None
    } else {
        Some(components.len() - literal)
    };

    let mut builder = walk_builder(&start);
    builder.max_depth(depth);
    let (states, unreadable) = walk_parallel(
        &builder,
        stop,
        || TopK::<Found>::new(MAX_FILES),
        |found, entry| {
            let Some(kind) = entry.file_type() else {
                return;
            };
            if kind.is_dir() {
                return;
            }
            let path = entry.path();
            if !path
                .strip_prefix(&root)
                .is_ok_and(|relative| matcher.is_match(relative))
            {
                return;
            }
            let modified = if kind.is_file() {
                entry.metadata().ok().and_then(|meta| meta.modified().ok())
            } else if kind.is_symlink() {
                match symlinked_file(sandbox, path) {
                    Some((_, target)) => std::fs::metadata(target.absolute())
                        .ok()
                        .and_then(|meta| meta.modified().ok()),
                    None => return,
                }
            } else {
                return;
            };
            let item = (
                Reverse(modified.unwrap_or(SystemTime::UNIX_EPOCH)),
                path.to_path_buf(),
            );
            found.push(item);
        },
    );
    if stop.is_set() {
        return Err(ToolError::Cancelled);
    }
    let mut found = TopK::new(MAX_FILES);
    for state in states {
        found.merge(state);
    }
    tracing::debug!(pattern = %pattern, dir = %shown_dir, files = found.seen(), "glob");
    Ok(render(args, &shown_dir, sandbox, found, unreadable))
}

/// The pattern without leading `./` and empty or `.` names; refuses absolute patterns and
/// `..`, which could never match paths below `path`.
fn normalize(given: &str) -> Result<String, ToolError> {
    let trimmed = given.trim();
    if trimmed.is_empty() {
        return Err(ToolError::InvalidArguments(
            "pattern is empty; give a glob such as \"**/*.rs\"".into(),
        ));
    }
    if trimmed.starts_with('/') {
        return Err(ToolError::InvalidArguments(format!(
            "pattern {given:?} is absolute; patterns are relative to path: give the directory \
             as path and a relative pattern (e.g. path \"src\", pattern \"**/*.rs\")"
        )));
    }
    let names: Vec<&str> = trimmed
        .split('/')
        .filter(|name| !name.is_empty() && *name != ".")
        .collect();
    if names.contains(&"..") {
        return Err(ToolError::InvalidArguments(format!(
            "pattern {given:?} contains \"..\"; patterns only match below path: set path to the \
             directory to search instead"
        )));
    }
    if names.is_empty() {
        return Err(ToolError::InvalidArguments(format!(
            "pattern {given:?} names no files; give a glob such as \"**/*.rs\""
        )));
    }
    Ok(names.join("/"))
}

/// Whether a path name holds glob syntax.
fn has_meta(name: &str) -> bool {
    name.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

fn render(
    args: &GlobArgs,
    shown_dir: &str,
    sandbox: &PathSandbox,
    found: TopK<Found>,
    unreadable: usize,
) -> ToolOutput {
    let total = found.seen();
    let files = found.into_sorted_vec();
    let mut text = String::new();
    if files.is_empty() {
        text.push_str(&format!("no files match {:?} in {shown_dir}", args.pattern));
        if !args.pattern.contains('/') {
            text.push_str(&format!(
                " (a pattern without \"/\" only matches files directly in that directory; use \
                 \"**/{}\" to match at any depth)",
                args.pattern.trim()
            ));
        }
        text.push('\n');
    }
    for (_, path) in &files {
        text.push_str(&sandbox.display(path));
        text.push('\n');
    }
    if total > files.len() {
        text.push_str(&format!(
            "\n[{} of {total} matching files shown, most recently modified first. Narrow the \
             pattern or the path to see the others.]\n",
            files.len()
        ));
    }
    if unreadable > 0 {
        text.push_str(&format!(
            "\n[{unreadable} files or directories could not be read and were skipped]\n"
        ));
    }
    ToolOutput::text(text).with_metadata(json!({
        "files": total,
        "shown": files.len(),
        "unreadable": unreadable,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_normalized_or_refused() {
        assert_eq!(normalize("./src//*.rs").unwrap(), "src/*.rs");
        assert!(normalize("/etc/*").is_err());
        assert!(normalize("../*.rs").is_err());
        assert!(normalize(" ").is_err());
        assert!(normalize("./").is_err());
        assert!(has_meta("*.rs") && has_meta("{a,b}") && !has_meta("src"));
    }

    #[test]
    fn found_files_order_newest_first_then_by_path() {
        // `Found` orders newest first, then by path.
        let old = (Reverse(SystemTime::UNIX_EPOCH), PathBuf::from("a"));
        let new = (Reverse(SystemTime::now()), PathBuf::from("b"));
        assert!(new < old);
        assert!(std::path::Path::new("a/b") < std::path::Path::new("a-b"));
    }
}
