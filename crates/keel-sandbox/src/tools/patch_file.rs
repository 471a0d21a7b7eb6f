//! `patch_file`: replaces an exact piece of a file, which must be unique unless every
//! occurrence is wanted.
//!
//! When `old_string` is not found, the error shows the part of the file most like it (line
//! by line: same text after trimming, else the longest common start and end), so the model
//! can see a whitespace or indentation mistake and retry. Files with `\r\n` line endings stay
//! that way: `old_string` and `new_string` written with `\n` are matched and written with
//! `\r\n`.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::editor::{blocking, checked_file, editor_text, write_through};
use super::read_file::{
    BINARY_PROBE_BYTES, binary_error, open_regular_file, plural, push_numbered, thousands,
};
use crate::path::{Access, PathSandbox};
use crate::protect::write_effect;

/// The largest file `patch_file` edits (it holds the whole file in memory).
pub const MAX_PATCH_BYTES: u64 = 32 * 1024 * 1024;

/// Lines of `old_string` compared when looking for the most similar part of the file.
const SIMILAR_LINES_COMPARED: usize = 40;
/// The least average line similarity (0 to 1) worth showing as "most similar".
const SIMILAR_THRESHOLD: f64 = 0.3;
/// Lines of context shown around the most similar part.
const SIMILAR_CONTEXT: usize = 2;
/// The most lines of the similar part shown.
const SIMILAR_MAX_SHOWN: usize = 16;
/// The most characters of one similar line shown.
const SIMILAR_MAX_LINE_CHARS: usize = 300;
/// The most match line numbers listed when `old_string` is not unique.
const MAX_LISTED_MATCHES: usize = 20;

/// The arguments of `patch_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct PatchFileArgs {
    /// The file to change: relative to the workspace root, or absolute (inside the workspace).
    pub path: String,
    /// The exact text to replace, whitespace and line breaks included, without read_file's line numbers; it must occur exactly once unless replace_all is true.
    pub old_string: String,
    /// The text to put in its place (may be empty, to delete old_string).
    pub new_string: String,
    /// Replace every occurrence of old_string instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

/// The `patch_file` tool: replaces exact text in a file.
#[derive(Debug, Clone)]
pub struct PatchFile {
    sandbox: Arc<PathSandbox>,
    protected_paths: Vec<PathBuf>,
}

impl PatchFile {
    /// A `patch_file` editing through `sandbox`.
    pub fn new(sandbox: Arc<PathSandbox>) -> Self {
        Self {
            sandbox,
            protected_paths: Vec::new(),
        }
    }

    /// Also treats `paths` as protected (the policy's
    /// [`protected_paths`](crate::SandboxPolicy::protected_paths)): writing them, or below
    /// them, needs the person's approval.
    pub fn with_protected_paths(mut self, paths: Vec<PathBuf>) -> Self {
        self.protected_paths = paths;
        self
    }
}

const DESCRIPTION: &str = "Edits a text file by replacing old_string with new_string. \
old_string must match the file exactly, whitespace and line breaks included, and occur \
exactly once; include a few surrounding lines to make it unique, or set replace_all to true \
to replace every occurrence. Read the file with read_file first and copy old_string from its \
output without the line numbers and the tab after them. If old_string is not found, the \
error shows the most similar lines of the file so you can correct it. Files with CRLF line \
endings keep them. The write is atomic and keeps the file's permissions. To create a file or \
rewrite it whole, use write_file.";

impl Tool for PatchFile {
    type Args = PatchFileArgs;
    const NAME: &'static str = "patch_file";

    fn description(&self) -> &str {
        DESCRIPTION
    }

    /// [`Effect::Protected`] for a protected path (resolved: a symlink to one counts),
    /// else [`Effect::Mutating`].
    fn effect(&self, args: &PatchFileArgs) -> Effect {
        write_effect(&self.sandbox, &self.protected_paths, &args.path)
    }

    /// Edits the disk, or through the editor's buffers where the host is an editor
    /// ([`ToolContext::editor_files`]): the same path checks either way; the text comes from
    /// the editor when it reads (else the disk), and goes back through it when it writes.
    async fn call(&self, args: PatchFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        check_strings(&args)?;
        let sandbox = Arc::clone(&self.sandbox);
        let Some(editor) = ctx
            .editor_files()
            .filter(|editor| editor.reads() || editor.writes())
        else {
            return blocking(Self::NAME, move || patch_file(&sandbox, &args)).await;
        };
        let given = args.path.clone();
        let resolved = blocking(Self::NAME, move || {
            checked_file(&sandbox, &given, Access::Write)
        })
        .await?;
        let shown_path = self.sandbox.display(resolved.absolute());
        let from_editor = if editor.reads() {
            editor.read_text(resolved.absolute()).await.ok()
        } else {
            None
        };
        let text = match from_editor {
            Some(text) if text.len() as u64 > MAX_PATCH_BYTES => {
                return Err(too_big(&shown_path, text.len() as u64));
            }
            Some(text) => editor_text(text, &shown_path, Self::NAME)?,
            None => {
                let sandbox = Arc::clone(&self.sandbox);
                let given = args.path.clone();
                blocking(Self::NAME, move || {
                    let (resolved, file) = open_regular_file(&sandbox, &given)?;
                    read_text(file, &sandbox.display(resolved.absolute()))
                })
                .await?
            }
        };
        let patched = patch_text(&text, &args, &shown_path)?;
        if editor.writes() {
            write_through(editor.as_ref(), &resolved, &patched.text, &shown_path).await?;
        } else {
            let sandbox = Arc::clone(&self.sandbox);
            let text = patched.text.clone();
            blocking(Self::NAME, move || {
                Ok(sandbox.write_atomic(&args.path, text.as_bytes())?)
            })
            .await?;
        }
        Ok(summary(&patched, &shown_path, resolved.absolute(), text))
    }
}

/// Refuses a call that could not change anything.
fn check_strings(args: &PatchFileArgs) -> Result<(), ToolError> {
    if args.old_string.is_empty() {
        return Err(ToolError::InvalidArguments(
            "old_string is empty; give the exact text to replace, as read_file shows it. To \
             create a file or rewrite it whole, use write_file"
                .to_owned(),
        ));
    }
    if args.old_string == args.new_string {
        return Err(ToolError::InvalidArguments(
            "old_string and new_string are the same, so nothing would change; put the new \
             text in new_string"
                .to_owned(),
        ));
    }
    Ok(())
}

fn patch_file(sandbox: &PathSandbox, args: &PatchFileArgs) -> Result<ToolOutput, ToolError> {
    let (resolved, file) = open_regular_file(sandbox, &args.path)?;
    let shown_path = sandbox.display(resolved.absolute());
    let text = read_text(file, &shown_path)?;
    let patched = patch_text(&text, args, &shown_path)?;
    let report = sandbox.write_atomic(&args.path, patched.text.as_bytes())?;
    Ok(summary(
        &patched,
        &sandbox.display(report.path.absolute()),
        report.path.absolute(),
        text,
    ))
}

/// A file's text with the edit made, and where.
struct Patched {
    /// The new text.
    text: String,
    /// The edit made.
    edit: Edit,
    /// Byte spans of the new text that replaced each occurrence.
    spans: Vec<(usize, usize)>,
}

/// `text` with `args`' edit made, or why it cannot be.
fn patch_text(text: &str, args: &PatchFileArgs, shown_path: &str) -> Result<Patched, ToolError> {
    let Some(edit) = find_edit(text, &args.old_string, &args.new_string) else {
        return Err(ToolError::failed(not_found_message(
            text,
            &args.old_string,
            shown_path,
        )));
    };
    if edit.starts.len() > 1 && !args.replace_all {
        return Err(ToolError::failed(several_matches_message(
            text,
            &edit.starts,
            shown_path,
        )));
    }
    let (patched, spans) = apply(text, &edit);
    Ok(Patched {
        text: patched,
        edit,
        spans,
    })
}

/// What the model reads after the edit, and its facts in the metadata: `path` (as shown),
/// `file_path` (absolute), `replacements`, `lines` (the changed line ranges), `crlf`, and
/// `original`, the file's text before the edit (for Claude Code's `originalFile`).
fn summary(
    patched: &Patched,
    shown_path: &str,
    absolute: &std::path::Path,
    original: String,
) -> ToolOutput {
    let Patched { text, edit, spans } = patched;
    let ranges = line_ranges(text, spans);
    let count = edit.starts.len() as u64;
    let occurrences = format!("{} occurrence{}", thousands(count), plural(count));
    let summary = if edit.new.is_empty() {
        let at = ranges.iter().map(|&(first, _)| first.to_string());
        format!(
            "patched {shown_path}: removed {occurrences}; the text around {} now meets at line{} {}",
            if count == 1 { "it" } else { "them" },
            plural(count),
            list(at, MAX_LISTED_MATCHES),
        )
    } else {
        let spans = ranges.iter().map(|&(first, last)| {
            if first == last {
                first.to_string()
            } else {
                format!("{first}-{last}")
            }
        });
        let single_line = ranges.len() == 1 && ranges[0].0 == ranges[0].1;
        format!(
            "patched {shown_path}: replaced {occurrences}, line{} {} now",
            if single_line { "" } else { "s" },
            list(spans, MAX_LISTED_MATCHES),
        )
    };
    tracing::debug!(path = %shown_path, occurrences = count, "patch_file");
    ToolOutput::text(summary).with_metadata(json!({
        "path": shown_path,
        "replacements": count,
        "lines": ranges.iter().map(|&(first, last)| [first, last]).collect::<Vec<_>>(),
        "crlf": edit.crlf,
        "file_path": absolute.display().to_string(),
        "original": original,
    }))
}

/// The error for a file of `size` bytes, more than patch_file edits.
fn too_big(shown_path: &str, size: u64) -> ToolError {
    ToolError::failed(format!(
        "{shown_path} is {} bytes, more than patch_file edits ({} bytes); change it with a \
         command instead",
        thousands(size),
        thousands(MAX_PATCH_BYTES),
    ))
}

/// The whole file as UTF-8 text, refusing binary, non-UTF-8 and oversized files.
fn read_text(file: std::fs::File, shown_path: &str) -> Result<String, ToolError> {
    let io = |err| ToolError::io(format!("reading {shown_path}"), err);
    let size = file.metadata().map_err(io)?.len();
    if size > MAX_PATCH_BYTES {
        return Err(too_big(shown_path, size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(MAX_PATCH_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
        return Err(binary_error(shown_path, "patch_file"));
    }
    String::from_utf8(bytes).map_err(|err| {
        ToolError::failed(format!(
            "{shown_path} is not valid UTF-8 (at byte {}); patch_file edits UTF-8 text only",
            err.utf8_error().valid_up_to()
        ))
    })
}

/// What to replace, in the file's own line endings, and where it occurs.
struct Edit {
    old: String,
    new: String,
    /// Byte offsets of the (non-overlapping) occurrences, in order.
    starts: Vec<usize>,
    /// Whether `\n` in the arguments was taken as the file's `\r\n`.
    crlf: bool,
}

/// Finds `old` in `text`. In a file that mostly uses `\r\n`, arguments written with `\n`
/// are matched and written with `\r\n`; if that finds nothing they are tried as given (for
/// files with mixed endings). `None` when neither occurs.
fn find_edit(text: &str, old: &str, new: &str) -> Option<Edit> {
    let starts_of =
        |needle: &str| -> Vec<usize> { text.match_indices(needle).map(|(at, _)| at).collect() };
    if uses_crlf(text) && !old.contains('\r') && !new.contains('\r') {
        let (old_crlf, new_crlf) = (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"));
        let starts = starts_of(&old_crlf);
        if !starts.is_empty() {
            return Some(Edit {
                old: old_crlf,
                new: new_crlf,
                starts,
                crlf: true,
            });
        }
    }
    let starts = starts_of(old);
    (!starts.is_empty()).then(|| Edit {
        old: old.to_owned(),
        new: new.to_owned(),
        starts,
        crlf: false,
    })
}

/// Whether most of `text`'s line endings are `\r\n`.
fn uses_crlf(text: &str) -> bool {
    let crlf = text.matches("\r\n").count();
    let lf = text.bytes().filter(|&b| b == b'\n').count();
    crlf > 0 && crlf * 2 >= lf
}

/// The patched text, and where each replacement lies in it (byte start and length).
fn apply(text: &str, edit: &Edit) -> (String, Vec<(usize, usize)>) {
    let grown = edit.starts.len() * edit.new.len();
    let mut out = String::with_capacity(text.len() + grown);
    let mut spans = Vec::with_capacity(edit.starts.len());
    let mut copied = 0;
    for &start in &edit.starts {
        out.push_str(&text[copied..start]);
        spans.push((out.len(), edit.new.len()));
        out.push_str(&edit.new);
        copied = start + edit.old.len();
    }
    out.push_str(&text[copied..]);
    (out, spans)
}

/// The 1-based first and last line of each span of `text` (spans in order). An empty span
/// is at the line it falls on.
fn line_ranges(text: &str, spans: &[(usize, usize)]) -> Vec<(u64, u64)> {
    let bytes = text.as_bytes();
    let newlines =
        |from: usize, to: usize| bytes[from..to].iter().filter(|&&b| b == b'\n').count() as u64;
    let mut line = 1;
    let mut counted = 0;
    spans
        .iter()
        .map(|&(start, len)| {
            line += newlines(counted, start);
            let first = line;
            // The last byte of the span is on the last line, even when it is the newline.
            let last = first + newlines(start, start + len.saturating_sub(1));
            line += newlines(start, start + len);
            counted = start + len;
            (first, last)
        })
        .collect()
}

/// The 1-based lines at byte offsets `starts` (in order).
fn lines_at(text: &str, starts: &[usize]) -> Vec<u64> {
    line_ranges(text, &starts.iter().map(|&at| (at, 0)).collect::<Vec<_>>())
        .into_iter()
        .map(|(first, _)| first)
        .collect()
}

/// `a, b and c`, at most `max` items, then how many more.
fn list(items: impl ExactSizeIterator<Item = String>, max: usize) -> String {
    let total = items.len();
    let shown: Vec<String> = items.take(max).collect();
    match shown.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] if total <= max => format!("{} and {last}", init.join(", ")),
        _ => format!("{} and {} more", shown.join(", "), total - max),
    }
}

fn several_matches_message(text: &str, starts: &[usize], shown_path: &str) -> String {
    let lines = lines_at(text, starts);
    format!(
        "old_string occurs {} times in {shown_path}, starting at lines {}; include more of the \
         surrounding lines in old_string so that it matches just one place, or set replace_all \
         to true to replace every occurrence",
        thousands(starts.len() as u64),
        list(lines.iter().map(u64::to_string), MAX_LISTED_MATCHES),
    )
}

fn not_found_message(text: &str, old: &str, shown_path: &str) -> String {
    let mut message = format!("old_string was not found in {shown_path}.");
    let file_lines: Vec<&str> = text.lines().collect();
    let old_lines: Vec<&str> = old.lines().collect();
    if looks_numbered(&old_lines) {
        message.push_str(
            " It seems to include read_file's line numbers: leave out the number and the tab \
             at the start of each line.",
        );
    }
    let Some(similar) = most_similar(&file_lines, &old_lines) else {
        message.push_str(
            " No part of the file resembles it; read the file again with read_file and copy \
             the text to replace exactly.",
        );
        return message;
    };
    let last = similar.start + similar.len;
    let (first_number, last_number) = (similar.start as u64 + 1, last as u64);
    if first_number == last_number {
        message.push_str(&format!(" The most similar line is {first_number}:\n"));
    } else {
        message.push_str(&format!(
            " The most similar lines are {first_number}-{last_number}:\n"
        ));
    }
    let from = similar.start.saturating_sub(SIMILAR_CONTEXT);
    let to = (last + SIMILAR_CONTEXT)
        .min(file_lines.len())
        .min(from + SIMILAR_MAX_SHOWN);
    let shown: Vec<String> = file_lines[from..to]
        .iter()
        .map(|line| clip(line, SIMILAR_MAX_LINE_CHARS))
        .collect();
    push_numbered(
        &mut message,
        from as u64 + 1,
        shown.iter().map(String::as_str),
    );
    if to < last {
        message.push_str("…\n");
    }
    if similar.same_when_trimmed {
        message.push_str(
            "They differ from old_string only in indentation or spaces at line ends: copy the \
             whitespace exactly as shown (without the line numbers and the tab after them).",
        );
    } else {
        message.push_str(
            "old_string must match the file exactly, whitespace and line breaks included; copy \
             it from the lines above (without the line numbers and the tab after them), or read \
             the file again if it may have changed.",
        );
    }
    message
}

/// `line` cut to `max` characters, with `…` when cut.
fn clip(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

/// Whether every non-blank line starts with a number and a tab, as read_file prints them.
fn looks_numbered(lines: &[&str]) -> bool {
    let numbered = |line: &&str| {
        let rest = line.trim_start();
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest.as_bytes().get(digits) == Some(&b'\t')
    };
    let mut non_blank = lines
        .iter()
        .filter(|line| !line.trim().is_empty())
        .peekable();
    non_blank.peek().is_some() && non_blank.all(numbered)
}

/// The part of the file most like `old_string`.
struct Similar {
    /// Index of its first line.
    start: usize,
    /// How many lines.
    len: usize,
    /// Whether it equals `old_string` line by line once each line is trimmed.
    same_when_trimmed: bool,
}

/// Slides a window of `old`'s length over `file` and keeps the one whose lines are most like
/// `old`'s (the first of equals). `None` if nothing is similar enough.
fn most_similar(file: &[&str], old: &[&str]) -> Option<Similar> {
    if file.is_empty() || old.is_empty() {
        return None;
    }
    let file_trimmed: Vec<&str> = file.iter().map(|line| line.trim()).collect();
    let old_trimmed: Vec<&str> = old.iter().map(|line| line.trim()).collect();
    let compared = &old_trimmed[..old_trimmed.len().min(SIMILAR_LINES_COMPARED)];
    let mut best: Option<(usize, f64)> = None;
    for start in 0..file_trimmed.len() {
        let window = &file_trimmed[start..];
        let score: f64 = compared
            .iter()
            .zip(window)
            .map(|(want, have)| line_similarity(want, have))
            .sum();
        if best.is_none_or(|(_, best_score)| score > best_score) {
            best = Some((start, score));
        }
    }
    let (start, score) = best?;
    if score / (compared.len() as f64) < SIMILAR_THRESHOLD {
        return None;
    }
    let len = old.len().min(file.len() - start);
    let same_when_trimmed = len == old.len() && file_trimmed[start..start + len] == old_trimmed[..];
    Some(Similar {
        start,
        len,
        same_when_trimmed,
    })
}

/// How alike two trimmed lines are, from 0 to 1: 1 when equal (a quarter for two blank
/// lines, which say little), else the share of the longer one covered by their common start
/// and end, scaled below 1.
fn line_similarity(want: &str, have: &str) -> f64 {
    if want == have {
        return if want.is_empty() { 0.25 } else { 1.0 };
    }
    let (a, b) = (want.as_bytes(), have.as_bytes());
    let longest = a.len().max(b.len());
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    0.9 * (prefix + suffix) as f64 / longest as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_is_detected_by_majority() {
        assert!(uses_crlf("a\r\nb\r\n"));
        assert!(uses_crlf("a\r\nb\n"));
        assert!(!uses_crlf("a\nb\nc\r\n"));
        assert!(!uses_crlf("no line breaks"));
    }

    #[test]
    fn line_ranges_follow_the_replacements() {
        let text = "a\nXY\nb\nXY\n";
        assert_eq!(line_ranges(text, &[(2, 3), (7, 2)]), vec![(2, 2), (4, 4)]);
        assert_eq!(line_ranges("a\nb\nc\n", &[(2, 4)]), vec![(2, 3)]);
        assert_eq!(lines_at("a\nb\nc", &[0, 2, 4]), vec![1, 2, 3]);
    }

    #[test]
    fn lists_read_naturally() {
        let items = |n: usize| {
            (1..=n)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .into_iter()
        };
        assert_eq!(list(items(1), 3), "1");
        assert_eq!(list(items(3), 3), "1, 2 and 3");
        assert_eq!(list(items(5), 3), "1, 2, 3 and 2 more");
    }

    #[test]
    fn similarity_prefers_equal_lines_then_common_ends() {
        assert!((line_similarity("let x = 1;", "let x = 1;") - 1.0).abs() < f64::EPSILON);
        let close = line_similarity("let x = 1;", "let x = 2;");
        let far = line_similarity("let x = 1;", "return;");
        assert!(close > 0.7 && close < 1.0, "{close}");
        assert!(far < 0.2, "{far}");
    }

    #[test]
    fn clip_cuts_on_characters() {
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("héllo", 5), "héllo");
    }

    #[test]
    fn numbered_lines_are_recognised() {
        assert!(looks_numbered(&["  9\tfn main() {", " 10\t}"]));
        assert!(!looks_numbered(&["fn main() {", "}"]));
        assert!(!looks_numbered(&["", "  "]));
    }
}
