//! `grep`: searches file contents with ripgrep's crates (a parallel `ignore` walk,
//! `grep-searcher`, `grep-regex`).

use std::cmp::Ordering;
use std::fs::File;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;

use globset::{GlobBuilder, GlobMatcher};
use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use rustix::fs::{Mode, OFlags};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::list_directory::{
    Stop, TopK, resolve_existing, run_blocking, symlinked_file, walk_builder, walk_parallel,
};
use crate::path::{PathSandbox, open_beneath};

/// Matching lines returned when `max_results` is not given.
const DEFAULT_MAX_RESULTS: u32 = 200;
/// The most `max_results` may ask for.
const MAX_MAX_RESULTS: u32 = 2_000;
/// Longer matched lines are cut to this many bytes around the first match.
const MAX_LINE_BYTES: usize = 400;
/// How much of a cut line is kept before its first match.
const BEFORE_MATCH: usize = 100;

/// Arguments of [`Grep`].
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// Regular expression to look for, line by line (Rust regex syntax, as in ripgrep; escape
    /// `( ) [ ] { } . * + ? | \ ^ $` with a backslash to match them literally).
    pub pattern: String,
    /// File or directory to search, relative to the workspace root (default: the root).
    pub path: Option<String>,
    /// Only search files matching this glob, e.g. "*.rs", "*.{ts,tsx}" or "src/**/*.py".
    /// Without "/" it matches file names at any depth; with "/" the path relative to `path`.
    pub glob: Option<String>,
    /// Ignore case when matching (default false).
    pub case_insensitive: Option<bool>,
    /// The most matching lines to return (default 200, at most 2,000).
    #[schemars(range(min = 1, max = 2000))]
    pub max_results: Option<u32>,
}

/// Searches file contents for a regular expression, like ripgrep.
///
/// Output: one `path:line:text` line per matching line, paths relative to the workspace root,
/// sorted by path (component by component, like `rg --sort path`) then line number. Files
/// excluded by `.gitignore`/`.ignore` (in a git repository or not), `.git`, and binary files
/// (a NUL byte) are skipped; hidden files are searched; symlinks are only read when they
/// lead to a file inside the sandbox, and symlinked directories are never entered. Lines
/// longer than 400 bytes are cut around their first match. Past `max_results`, a note says
/// how many matching lines there were in all.
#[derive(Debug, Clone)]
pub struct Grep {
    sandbox: Arc<PathSandbox>,
}

impl Grep {
    /// The tool, searching inside `sandbox`.
    pub fn new(sandbox: Arc<PathSandbox>) -> Self {
        Self { sandbox }
    }
}

impl Tool for Grep {
    type Args = GrepArgs;
    const NAME: &'static str = "grep";

    fn description(&self) -> &str {
        "Searches file contents for a regular expression (ripgrep syntax), line by line. \
         Returns \"path:line:text\" lines sorted by path then line, paths relative to the \
         workspace root; at most max_results (default 200) lines, with a note giving the total \
         when there are more. Searches the whole workspace unless `path` names a directory or \
         file; `glob` keeps only matching files (\"*.rs\", \"*.{ts,tsx}\", \"src/**/*.py\"). \
         Files excluded by .gitignore, the .git directory and binary files are skipped. Set \
         case_insensitive to ignore case. Escape regex metacharacters to search for them \
         literally (e.g. \"foo\\(\"). To find files by name use glob."
    }

    fn effect(&self, _args: &GrepArgs) -> Effect {
        Effect::ReadOnly
    }

    async fn call(&self, args: GrepArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let sandbox = Arc::clone(&self.sandbox);
        run_blocking(Self::NAME, ctx, move |stop| grep(&sandbox, &args, stop)).await
    }
}

fn grep(sandbox: &PathSandbox, args: &GrepArgs, stop: &Stop) -> Result<ToolOutput, ToolError> {
    if args.pattern.is_empty() {
        return Err(ToolError::InvalidArguments(
            "pattern is empty; give a regular expression to look for".into(),
        ));
    }
    let max = match args.max_results.unwrap_or(DEFAULT_MAX_RESULTS) {
        0 => {
            return Err(ToolError::InvalidArguments(
                "max_results must be at least 1".into(),
            ));
        }
        n => n.min(MAX_MAX_RESULTS) as usize,
    };
    let case_insensitive = args.case_insensitive.unwrap_or(false);
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|err| {
            ToolError::InvalidArguments(format!(
                "invalid regex {:?}: {err}\n(the pattern is a Rust regular expression matched \
                 within single lines; escape metacharacters such as ( [ {{ . * + ? | with a \
                 backslash to match them literally)",
                args.pattern
            ))
        })?;
    let filter = args.glob.as_deref().map(FileGlob::new).transpose()?;
    let target = resolve_existing(sandbox, args.path.as_deref())?;
    let root = target.absolute().to_path_buf();
    let mut searcher = SearcherBuilder::new();
    searcher
        .binary_detection(BinaryDetection::quit(b'\0'))
        .line_number(true);

    let mut found = Found::new(matcher.clone(), searcher.build(), max);
    let mut unreadable = 0;
    if root.is_dir() {
        let dir = rustix::fs::open(
            &root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| ToolError::io(format!("opening {}", target.given()), errno.into()))?;
        let builder = walk_builder(&root);
        let (states, errors) = walk_parallel(
            &builder,
            stop,
            || Found::new(matcher.clone(), searcher.build(), max),
            |found, entry| {
                let Some(kind) = entry.file_type() else {
                    return;
                };
                let path = entry.path();
                let Ok(relative) = path.strip_prefix(&root) else {
                    return;
                };
                if let Some(filter) = &filter
                    && !filter.matches(path, relative, sandbox.root())
                {
                    return;
                }
                let file = if kind.is_file() {
                    open_beneath(
                        dir.as_fd(),
                        relative,
                        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY,
                        Mode::empty(),
                    )
                    .map(File::from)
                    .map_err(drop)
                } else if kind.is_symlink() {
                    match symlinked_file(sandbox, path) {
                        Some((given, _)) => sandbox.open_read(&given).map(|(_, f)| f).map_err(drop),
                        None => return,
                    }
                } else {
                    return;
                };
                match file {
                    Ok(file) => found.search(&file, path, sandbox),
                    Err(()) => found.unreadable += 1,
                }
            },
        );
        unreadable += errors;
        for state in states {
            found.merge(state);
        }
    } else if root.is_file() {
        // A file named explicitly is searched whatever the ignore rules and the glob say.
        let (_, file) = sandbox.open_read(target.given())?;
        found.search(&file, &root, sandbox);
    } else {
        return Err(ToolError::InvalidArguments(format!(
            "{} is neither a regular file nor a directory",
            target.given()
        )));
    }
    if stop.is_set() {
        return Err(ToolError::Cancelled);
    }
    unreadable += found.unreadable;
    tracing::debug!(
        pattern = %args.pattern,
        path = %target.given(),
        matches = found.top.seen(),
        files = found.files,
        binary = found.binary,
        unreadable,
        "grep"
    );
    Ok(render(args, &sandbox.display(&root), found, unreadable))
}

fn render(args: &GrepArgs, searched: &str, found: Found, unreadable: usize) -> ToolOutput {
    let total = found.top.seen();
    let (files, binary) = (found.files, found.binary);
    let hits = found.top.into_sorted_vec();
    let shown = hits.len();
    let mut text = String::new();
    if hits.is_empty() {
        let mut how = Vec::new();
        if let Some(glob) = &args.glob {
            how.push(format!("files matching {glob:?}"));
        }
        if args.case_insensitive.unwrap_or(false) {
            how.push("ignoring case".to_owned());
        }
        let how = if how.is_empty() {
            String::new()
        } else {
            format!(" ({})", how.join(", "))
        };
        text.push_str(&format!(
            "no matches for {:?} in {searched}{how}",
            args.pattern
        ));
        text.push('\n');
    }
    for hit in &hits {
        text.push_str(&hit.path);
        text.push(':');
        text.push_str(&hit.line.to_string());
        text.push(':');
        text.push_str(&hit.text);
        text.push('\n');
    }
    if total > shown {
        text.push_str(&format!(
            "\n[{shown} of {total} matching lines shown (matches in {files} files). Narrow the \
             search with a more specific pattern, a path or a glob, or raise max_results (at \
             most {MAX_MAX_RESULTS}).]\n"
        ));
    }
    if unreadable > 0 {
        text.push_str(&format!(
            "\n[{unreadable} files or directories could not be read and were skipped]\n"
        ));
    }
    ToolOutput::text(text).with_metadata(json!({
        "matches": total,
        "shown": shown,
        "files": files,
        "binary_files_skipped": binary,
        "unreadable": unreadable,
    }))
}

/// A matching line.
#[derive(Debug)]
struct Hit {
    path: Arc<str>,
    line: u64,
    text: String,
}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> Ordering {
        Path::new(&*self.path)
            .cmp(Path::new(&*other.path))
            .then(self.line.cmp(&other.line))
    }
}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Hit {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Hit {}

/// What one walker thread found.
struct Found {
    matcher: RegexMatcher,
    searcher: Searcher,
    top: TopK<Hit>,
    /// Lines of the file being searched.
    lines: Vec<(u64, String)>,
    max: usize,
    files: usize,
    binary: usize,
    unreadable: usize,
}

impl Found {
    fn new(matcher: RegexMatcher, searcher: Searcher, max: usize) -> Self {
        Self {
            matcher,
            searcher,
            top: TopK::new(max),
            lines: Vec::new(),
            max,
            files: 0,
            binary: 0,
            unreadable: 0,
        }
    }

    /// Searches `file`, found at `path`.
    fn search(&mut self, file: &File, path: &Path, sandbox: &PathSandbox) {
        self.lines.clear();
        let mut sink = FileSink {
            matcher: &self.matcher,
            top: &self.top,
            sandbox,
            path,
            shown: None,
            keep: false,
            lines: &mut self.lines,
            max: self.max,
            count: 0,
            binary: false,
        };
        let result = self.searcher.search_file(&self.matcher, file, &mut sink);
        let (shown, count, binary) = (sink.shown, sink.count, sink.binary);
        if result.is_err() {
            self.unreadable += 1;
            return;
        }
        if binary {
            self.binary += 1;
            return;
        }
        let Some(shown) = shown else {
            return;
        };
        self.files += 1;
        let kept = self.lines.len();
        for (line, text) in self.lines.drain(..) {
            self.top.push(Hit {
                path: Arc::clone(&shown),
                line,
                text,
            });
        }
        self.top.count(count - kept);
    }

    fn merge(&mut self, other: Found) {
        self.top.merge(other.top);
        self.files += other.files;
        self.binary += other.binary;
        self.unreadable += other.unreadable;
    }
}

/// Collects one file's matching lines; only their count once they cannot make the cut.
struct FileSink<'a> {
    matcher: &'a RegexMatcher,
    top: &'a TopK<Hit>,
    sandbox: &'a PathSandbox,
    path: &'a Path,
    /// The path as shown, once there is a match.
    shown: Option<Arc<str>>,
    /// Whether this file's lines may be among those shown.
    keep: bool,
    lines: &'a mut Vec<(u64, String)>,
    max: usize,
    count: usize,
    binary: bool,
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.count += 1;
        let line = mat.line_number().unwrap_or(0);
        if self.shown.is_none() {
            let shown: Arc<str> = self.sandbox.display(self.path).into();
            self.keep = self.top.would_keep(&Hit {
                path: Arc::clone(&shown),
                line,
                text: String::new(),
            });
            self.shown = Some(shown);
        }
        if self.keep && self.lines.len() < self.max {
            self.lines
                .push((line, line_text(self.matcher, mat.bytes())));
        }
        Ok(true)
    }

    fn binary_data(
        &mut self,
        _searcher: &Searcher,
        _binary_byte_offset: u64,
    ) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A matched line for output: without its line ending, and cut around the first match when
/// long.
fn line_text(matcher: &RegexMatcher, bytes: &[u8]) -> String {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() <= MAX_LINE_BYTES {
        return String::from_utf8_lossy(line).into_owned();
    }
    let at = matcher
        .find(line)
        .ok()
        .flatten()
        .map_or(0, |found| found.start());
    let mut start = at
        .saturating_sub(BEFORE_MATCH)
        .min(line.len() - MAX_LINE_BYTES);
    let mut end = start + MAX_LINE_BYTES;
    // Cut on character boundaries.
    while start > 0 && is_continuation(line[start]) {
        start -= 1;
    }
    while end < line.len() && is_continuation(line[end]) {
        end -= 1;
    }
    let mut text = String::with_capacity(MAX_LINE_BYTES + 48);
    if start > 0 {
        text.push('…');
    }
    text.push_str(&String::from_utf8_lossy(&line[start..end]));
    if end < line.len() {
        text.push('…');
    }
    text.push_str(&format!(" [line cut: {} bytes in all]", line.len()));
    text
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// The `glob` argument.
struct FileGlob {
    matcher: GlobMatcher,
    target: GlobTarget,
}

enum GlobTarget {
    /// No "/": the file name, at any depth.
    Name,
    /// The path relative to the searched directory or to the workspace root.
    Relative,
    /// A leading "/": the absolute path.
    Absolute,
}

impl FileGlob {
    /// Parses `glob`; "*" and "?" do not match "/".
    fn new(glob: &str) -> Result<Self, ToolError> {
        let trimmed = glob.trim();
        let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
        if trimmed.is_empty() {
            return Err(ToolError::InvalidArguments(
                "glob is empty; give a pattern such as \"*.rs\" or leave glob out".into(),
            ));
        }
        let target = if trimmed.starts_with('/') {
            GlobTarget::Absolute
        } else if trimmed.contains('/') {
            GlobTarget::Relative
        } else {
            GlobTarget::Name
        };
        let matcher = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .build()
            .map_err(|err| ToolError::InvalidArguments(format!("invalid glob {glob:?}: {err}")))?
            .compile_matcher();
        Ok(Self { matcher, target })
    }

    /// Whether the file at `path` (`relative` to the searched directory) passes.
    fn matches(&self, path: &Path, relative: &Path, workspace: &Path) -> bool {
        match self.target {
            GlobTarget::Name => path
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name)),
            GlobTarget::Relative => {
                self.matcher.is_match(relative)
                    || path
                        .strip_prefix(workspace)
                        .is_ok_and(|from_root| self.matcher.is_match(from_root))
            }
            GlobTarget::Absolute => self.matcher.is_match(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_around_the_match_on_char_boundaries() {
        let matcher = RegexMatcher::new("needle").unwrap();
        let line = format!("{}needle{}\n", "é".repeat(300), "x".repeat(500));
        let text = line_text(&matcher, line.as_bytes());
        assert!(text.starts_with('…'), "{text}");
        assert!(text.contains("needle"), "{text}");
        assert!(text.ends_with("… [line cut: 1106 bytes in all]"), "{text}");
        assert!(text.len() < MAX_LINE_BYTES + 40, "{}", text.len());
        assert_eq!(line_text(&matcher, b"a needle\r\n"), "a needle");
    }

    #[test]
    fn globs_without_a_slash_match_names_at_any_depth() {
        let root = Path::new("/w");
        let name = FileGlob::new("*.rs").unwrap();
        assert!(name.matches(Path::new("/w/a/b/c.rs"), Path::new("a/b/c.rs"), root));
        assert!(!name.matches(Path::new("/w/a/b/c.rsx"), Path::new("a/b/c.rsx"), root));
        let rel = FileGlob::new("src/*.rs").unwrap();
        assert!(rel.matches(Path::new("/w/src/a.rs"), Path::new("src/a.rs"), root));
        assert!(!rel.matches(Path::new("/w/src/x/a.rs"), Path::new("src/x/a.rs"), root));
        // Relative to the workspace root too, when a subdirectory is searched.
        assert!(rel.matches(Path::new("/w/src/a.rs"), Path::new("a.rs"), root));
        assert!(FileGlob::new("[").is_err());
    }
}
