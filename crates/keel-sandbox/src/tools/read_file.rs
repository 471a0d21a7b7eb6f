//! `read_file`: a numbered range of a text file's lines, streamed so huge files stay cheap.
//!
//! Output format: one line per file line, `<number>\t<text>`, the number right-aligned to the
//! width of the largest number shown; line endings (`\n` or `\r\n`) are not shown. A line
//! longer than [`MAX_LINE_CHARS`] characters is cut, with a marker saying how long it is. When
//! the lines shown are not the whole file, a last line in brackets says which lines they are
//! and how to read on: `[lines 1-2000 of 5231; call read_file with start_line=2001 to read on]`.
//!
//! Some helpers here are shared with `patch_file`, which reads the same way.

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::sync::Arc;

use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::editor::{blocking, checked_file, editor_text};
use crate::path::{Access, PathSandbox, ResolvedPath};

/// The most lines one `read_file` call shows.
pub const MAX_LINES: usize = 2_000;
/// The most characters of one line `read_file` shows; longer lines are cut with a marker.
pub const MAX_LINE_CHARS: usize = 2_000;
/// The most characters one `read_file` call returns (line numbers included). It keeps a
/// read under the registry's default 30,000-character result limit, so the model gets whole
/// lines and a note saying where to read on instead of a result cut in the middle.
pub const MAX_OUTPUT_CHARS: usize = 25_000;
/// How much of the start of a file is searched for a NUL byte to tell binary files, as git
/// does.
pub(crate) const BINARY_PROBE_BYTES: usize = 8 * 1024;

/// Bytes of one line kept in memory: enough for [`MAX_LINE_CHARS`] characters of any width.
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4;
/// The read buffer.
const BUFFER_BYTES: usize = 64 * 1024;

/// The arguments of `read_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// The file to read: relative to the workspace root, or absolute.
    pub path: String,
    /// The first line to show, counting from 1. Default: 1.
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// The last line to show, inclusive. Default: as far as the limits allow (2,000 lines, 25,000 characters).
    #[schemars(range(min = 1))]
    pub end_line: Option<u64>,
}

/// The `read_file` tool: shows a text file's lines, numbered, a range at a time.
#[derive(Debug, Clone)]
pub struct ReadFile {
    sandbox: Arc<PathSandbox>,
}

impl ReadFile {
    /// A `read_file` reading through `sandbox`.
    pub fn new(sandbox: Arc<PathSandbox>) -> Self {
        Self { sandbox }
    }
}

const DESCRIPTION: &str = "Reads a text file and shows its lines numbered, one per line as \
`<line number><TAB><text>`; the numbers are not part of the file. Shows at most 2,000 lines \
and 25,000 characters per call, and lines longer than 2,000 characters are cut with a marker. \
When more of the file remains, a last line in brackets says which lines you got and exactly \
how to read on (e.g. `[lines 1-2000 of 5231; call read_file with start_line=2001 to read on]`). \
Use start_line and end_line (1-based, inclusive) to read just the part you need. Binary files \
are refused; for a directory use list_directory. Read a file before you patch it, and copy \
old_string from what you read, without the line numbers.";

impl Tool for ReadFile {
    type Args = ReadFileArgs;
    const NAME: &'static str = "read_file";

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn effect(&self, _args: &ReadFileArgs) -> Effect {
        Effect::ReadOnly
    }

    /// Reads the disk, or the editor's buffer where the host is an editor that reads
    /// ([`ToolContext::editor_files`]): the same path checks either way, and the disk when
    /// the editor cannot give the file.
    async fn call(&self, args: ReadFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let range = line_range(&args)?;
        let sandbox = Arc::clone(&self.sandbox);
        if let Some(editor) = ctx.editor_files().filter(|editor| editor.reads()) {
            let given = args.path.clone();
            let resolved = blocking(Self::NAME, move || {
                checked_file(&sandbox, &given, Access::Read)
            })
            .await?;
            match editor.read_text(resolved.absolute()).await {
                Ok(text) => {
                    let shown_path = self.sandbox.display(resolved.absolute());
                    return blocking(Self::NAME, move || {
                        let text = editor_text(text, &shown_path, Self::NAME)?;
                        numbered(
                            BufReader::new(Cursor::new(text.into_bytes())),
                            &shown_path,
                            range,
                        )
                        .map(|output| with_file_path(output, resolved.absolute()))
                    })
                    .await;
                }
                Err(err) => {
                    tracing::debug!(%err, "the editor did not give the file; reading the disk");
                }
            }
        }
        let sandbox = Arc::clone(&self.sandbox);
        blocking(Self::NAME, move || read_file(&sandbox, &args.path, range)).await
    }
}

/// The lines a call asks for: the first (1-based) and the last, if given.
type LineRange = (u64, Option<u64>);

/// The range `args` asks for, or why it is not one.
fn line_range(args: &ReadFileArgs) -> Result<LineRange, ToolError> {
    let start = match args.start_line {
        None => 1,
        Some(0) => {
            return Err(ToolError::InvalidArguments(
                "start_line is 0, but lines count from 1; use start_line=1 for the first line"
                    .to_owned(),
            ));
        }
        Some(n) => n,
    };
    if let Some(end) = args.end_line
        && end < start
    {
        return Err(ToolError::InvalidArguments(format!(
            "end_line {end} is before start_line {start}; give end_line >= start_line, or \
             leave end_line out to read from start_line on"
        )));
    }
    Ok((start, args.end_line))
}

fn read_file(
    sandbox: &PathSandbox,
    given: &str,
    range: LineRange,
) -> Result<ToolOutput, ToolError> {
    let (resolved, file) = open_regular_file(sandbox, given)?;
    let shown_path = sandbox.display(resolved.absolute());
    let reader = text_reader(file, &shown_path).map_err(|err| match err {
        HeadError::Binary(err) => err,
        HeadError::Io(err) => ToolError::io(format!("reading {shown_path}"), err),
    })?;
    numbered(reader, &shown_path, range).map(|output| with_file_path(output, resolved.absolute()))
}

/// `output` with the absolute path of the file in its metadata (`file_path`), for readers
/// that want it whole (Claude Code's hook shapes, `keel_tool::claude::tool_response`).
pub(crate) fn with_file_path(mut output: ToolOutput, absolute: &std::path::Path) -> ToolOutput {
    if let Some(meta) = output.metadata.as_object_mut() {
        meta.insert(
            "file_path".to_owned(),
            json!(absolute.display().to_string()),
        );
    }
    output
}

/// The lines of `range` read from `reader`, numbered, with the note on how to read on.
fn numbered(
    mut reader: impl BufRead,
    shown_path: &str,
    (start, end_line): LineRange,
) -> Result<ToolOutput, ToolError> {
    let io = |err| ToolError::io(format!("reading {shown_path}"), err);
    // Lines before the range are skipped without being kept.
    let skipped = skip_lines(&mut reader, start - 1).map_err(io)?;
    // The most lines this call may show, and the last line number it may show.
    let wanted_last = match end_line {
        Some(end) => end.min(start.saturating_add(MAX_LINES as u64 - 1)),
        None => start.saturating_add(MAX_LINES as u64 - 1),
    };
    let prefix_allowance = digits(wanted_last) + 1;
    let mut shown: Vec<String> = Vec::new();
    let mut kept = Vec::with_capacity(MAX_LINE_BYTES);
    let mut output_chars = 0;
    let mut read_but_not_shown = 0;
    let mut cut_by_chars = false;
    if skipped == start - 1 {
        let mut number = start;
        while number <= wanted_last {
            let Some(line) = next_line(&mut reader, &mut kept).map_err(io)? else {
                break;
            };
            let chars = line.chars().count() + prefix_allowance + 1;
            if output_chars + chars > MAX_OUTPUT_CHARS && !shown.is_empty() {
                read_but_not_shown = 1;
                cut_by_chars = true;
                break;
            }
            output_chars += chars;
            shown.push(line);
            number += 1;
        }
    }
    let remaining = count_lines(&mut reader).map_err(io)?;
    let last_shown = start - 1 + shown.len() as u64;
    let total = skipped + shown.len() as u64 + read_but_not_shown + remaining;

    if total == 0 && start == 1 {
        return Ok(
            ToolOutput::text(format!("[{shown_path} is empty]")).with_metadata(metadata(
                shown_path,
                None,
                0,
                String::new(),
            )),
        );
    }
    if start > total {
        return Err(ToolError::InvalidArguments(format!(
            "start_line {start} is past the end of {shown_path}, which has {} line{}; give \
             start_line between 1 and {total}",
            thousands(total),
            plural(total),
        )));
    }

    let mut content = String::with_capacity(output_chars + 120);
    push_numbered(&mut content, start, shown.iter().map(String::as_str));
    if start > 1 || last_shown < total {
        content.push_str(&format!("\n[lines {start}-{last_shown} of {total}"));
        if cut_by_chars {
            content.push_str(&format!(
                ", cut at {} characters",
                thousands(MAX_OUTPUT_CHARS as u64)
            ));
        }
        if last_shown < total {
            content.push_str(&format!(
                "; call read_file with start_line={} to read on",
                last_shown + 1
            ));
        }
        content.push_str("]\n");
    }
    tracing::debug!(path = %shown_path, start, last_shown, total, "read_file");
    // The lines as they are in the file (cut lines as shown), without their numbers.
    let mut text = String::with_capacity(output_chars);
    for line in &shown {
        text.push_str(line);
        text.push('\n');
    }
    Ok(ToolOutput::text(content).with_metadata(metadata(
        shown_path,
        Some((start, last_shown)),
        total,
        text,
    )))
}

/// The facts of a read: the path as shown, the lines shown, the file's line count and the
/// text of the lines shown (`content`, without line numbers, each line ending in `\n`).
fn metadata(
    path: &str,
    range: Option<(u64, u64)>,
    total: u64,
    content: String,
) -> serde_json::Value {
    json!({
        "path": path,
        "start_line": range.map(|(start, _)| start),
        "end_line": range.map(|(_, end)| end),
        "total_lines": total,
        "content": content,
    })
}

/// Opens `given` for reading through the sandbox and makes sure it is a regular file, with
/// messages that say what to use instead.
pub(crate) fn open_regular_file(
    sandbox: &PathSandbox,
    given: &str,
) -> Result<(ResolvedPath, File), ToolError> {
    // Look before opening: opening a FIFO would block. The path is already resolved and
    // checked; the open below goes through the sandbox, and the type is checked again on the
    // opened file.
    let resolved = sandbox.resolve(given, Access::Read)?;
    if let Ok(meta) = std::fs::symlink_metadata(resolved.absolute()) {
        check_regular(sandbox, &resolved, &meta)?;
    }
    let (resolved, file) = sandbox.open_read(given)?;
    let meta = file.metadata().map_err(|err| {
        ToolError::io(
            format!("reading {}", sandbox.display(resolved.absolute())),
            err,
        )
    })?;
    check_regular(sandbox, &resolved, &meta)?;
    Ok((resolved, file))
}

pub(crate) fn check_regular(
    sandbox: &PathSandbox,
    resolved: &ResolvedPath,
    meta: &std::fs::Metadata,
) -> Result<(), ToolError> {
    let shown = sandbox.display(resolved.absolute());
    if meta.is_dir() {
        return Err(ToolError::failed(format!(
            "{shown} is a directory, not a file; use list_directory to see what is in it"
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::failed(format!(
            "{shown} is not a regular file (a device, pipe or socket); only files can be read"
        )));
    }
    Ok(())
}

/// Why the start of a file could not be taken as text.
pub(crate) enum HeadError {
    /// The file is binary: the error to report.
    Binary(ToolError),
    /// Reading failed.
    Io(std::io::Error),
}

/// The error for a binary file.
pub(crate) fn binary_error(shown_path: &str, tool: &str) -> ToolError {
    ToolError::failed(format!(
        "{shown_path} is a binary file (it has a NUL byte in its first 8 KiB); {tool} works on \
         text files only"
    ))
}

/// A file read through a buffer, its first bytes already read into memory.
type TextReader = BufReader<std::io::Chain<Cursor<Vec<u8>>, File>>;

/// A buffered reader of `file`, after checking its first [`BINARY_PROBE_BYTES`] for NUL.
fn text_reader(mut file: File, shown_path: &str) -> Result<TextReader, HeadError> {
    let mut head = Vec::with_capacity(BINARY_PROBE_BYTES);
    (&mut file)
        .take(BINARY_PROBE_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(HeadError::Io)?;
    if head.contains(&0) {
        return Err(HeadError::Binary(binary_error(shown_path, "read_file")));
    }
    Ok(BufReader::with_capacity(
        BUFFER_BYTES,
        Cursor::new(head).chain(file),
    ))
}

/// Skips up to `count` lines (a last line without `\n` counts); returns how many there
/// were. Whole buffers are skipped by counting their newlines.
fn skip_lines(reader: &mut impl BufRead, count: u64) -> std::io::Result<u64> {
    let mut skipped = 0u64;
    let mut last = None;
    while skipped < count {
        let chunk = reader.fill_buf()?;
        let Some(&last_byte) = chunk.last() else {
            // The end: a last line without a newline was skipped too.
            if last.is_some_and(|b| b != b'\n') {
                skipped += 1;
            }
            return Ok(skipped);
        };
        let in_chunk = count_newlines(chunk);
        if skipped + in_chunk < count {
            skipped += in_chunk;
            last = Some(last_byte);
            let len = chunk.len();
            reader.consume(len);
            continue;
        }
        // The last line to skip ends in this buffer: stop right after its newline.
        let wanted = count - skipped;
        let mut seen = 0;
        let mut end = chunk.len();
        for (at, &b) in chunk.iter().enumerate() {
            if b == b'\n' {
                seen += 1;
                if seen == wanted {
                    end = at + 1;
                    break;
                }
            }
        }
        reader.consume(end);
        skipped = count;
    }
    Ok(skipped)
}

/// Counts the lines from here to the end (a last line without `\n` counts).
fn count_lines(reader: &mut impl BufRead) -> std::io::Result<u64> {
    let mut lines = 0u64;
    let mut last = None;
    loop {
        let chunk = reader.fill_buf()?;
        let Some(&last_byte) = chunk.last() else {
            break;
        };
        lines += count_newlines(chunk);
        last = Some(last_byte);
        let len = chunk.len();
        reader.consume(len);
    }
    if last.is_some_and(|b| b != b'\n') {
        lines += 1;
    }
    Ok(lines)
}

/// How many `\n` are in `bytes`. Counts in `u8` over blocks short enough not to overflow,
/// which the compiler turns into wide vector compares.
fn count_newlines(bytes: &[u8]) -> u64 {
    bytes
        .chunks(255)
        .map(|block| {
            let in_block = block
                .iter()
                .fold(0u8, |n, &b| n.wrapping_add(u8::from(b == b'\n')));
            u64::from(in_block)
        })
        .sum()
}

/// Reads the next line as it is shown: without its line ending, cut after [`MAX_LINE_CHARS`]
/// characters with a marker. Only the kept part is held in memory. `None` at the end.
fn next_line(reader: &mut impl BufRead, kept: &mut Vec<u8>) -> std::io::Result<Option<String>> {
    kept.clear();
    let mut line_bytes = 0usize;
    let mut line_chars = 0usize;
    let mut ended = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        let (part, used) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => {
                ended = true;
                (&chunk[..at], at + 1)
            }
            None => (chunk, chunk.len()),
        };
        let room = MAX_LINE_BYTES.saturating_sub(kept.len());
        kept.extend_from_slice(&part[..part.len().min(room)]);
        line_bytes += part.len();
        line_chars += utf8_chars(part);
        reader.consume(used);
        if ended {
            break;
        }
    }
    if line_bytes == 0 && !ended {
        return Ok(None);
    }
    let whole = line_bytes == kept.len();
    if whole && ended && kept.last() == Some(&b'\r') {
        kept.pop();
        line_chars -= 1;
    }
    let text = String::from_utf8_lossy(kept);
    if whole && text.chars().count() <= MAX_LINE_CHARS {
        return Ok(Some(text.into_owned()));
    }
    let mut cut: String = text.chars().take(MAX_LINE_CHARS).collect();
    cut.push_str(&format!(
        "… [line cut at {} characters; it has {}]",
        thousands(MAX_LINE_CHARS as u64),
        thousands(line_chars.max(MAX_LINE_CHARS + 1) as u64)
    ));
    Ok(Some(cut))
}

/// Characters in UTF-8 `bytes` (bytes that do not continue a character).
fn utf8_chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
}

/// Appends `lines` numbered from `first`, in read_file's format: the number right-aligned to
/// the width of the largest, a tab, the line, a newline.
pub(crate) fn push_numbered<'a>(
    out: &mut String,
    first: u64,
    lines: impl ExactSizeIterator<Item = &'a str>,
) {
    let last = first + (lines.len() as u64).saturating_sub(1);
    let width = digits(last);
    for (number, line) in (first..).zip(lines) {
        out.push_str(&format!("{number:>width$}\t{line}\n"));
    }
}

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// `n` with thousands separators: `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let plain = n.to_string();
    let mut out = String::with_capacity(plain.len() + plain.len() / 3);
    for (i, c) in plain.chars().enumerate() {
        if i > 0 && (plain.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `"s"` unless `n` is 1.
pub(crate) fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separates_groups_of_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn digits_counts_decimal_digits() {
        assert_eq!(digits(0), 1);
        assert_eq!(digits(9), 1);
        assert_eq!(digits(10), 2);
        assert_eq!(digits(2_000), 4);
    }

    #[test]
    fn lines_are_counted_with_or_without_a_final_newline() {
        let count = |text: &str| count_lines(&mut Cursor::new(text.as_bytes())).unwrap();
        assert_eq!(count(""), 0);
        assert_eq!(count("\n"), 1);
        assert_eq!(count("a"), 1);
        assert_eq!(count("a\nb"), 2);
        assert_eq!(count("a\nb\n"), 2);
    }

    #[test]
    fn skipping_stops_right_after_the_last_skipped_line() {
        let text = "1\n22\n333\n4444";
        for capacity in [1, 3, 64] {
            let skip = |count| {
                let mut reader = BufReader::with_capacity(capacity, Cursor::new(text.as_bytes()));
                let skipped = skip_lines(&mut reader, count).unwrap();
                let mut rest = String::new();
                reader.read_to_string(&mut rest).unwrap();
                (skipped, rest)
            };
            assert_eq!(skip(0), (0, text.to_owned()));
            assert_eq!(skip(2), (2, "333\n4444".to_owned()));
            assert_eq!(skip(3), (3, "4444".to_owned()));
            assert_eq!(skip(4), (4, String::new()));
            assert_eq!(skip(9), (4, String::new()));
        }
        let mut ends_with_newline = Cursor::new("a\nb\n".as_bytes());
        assert_eq!(skip_lines(&mut ends_with_newline, 5).unwrap(), 2);
    }

    #[test]
    fn newlines_are_counted_across_blocks() {
        let text = "ab\n".repeat(1000);
        assert_eq!(count_newlines(text.as_bytes()), 1000);
        assert_eq!(count_newlines(&[b'\n'; 600]), 600);
        assert_eq!(count_newlines(b""), 0);
    }

    #[test]
    fn next_line_strips_line_endings_and_cuts_long_lines() {
        let long = "é".repeat(MAX_LINE_CHARS + 5);
        let text = format!("a\r\nb\n{long}\nlast");
        let mut reader = BufReader::with_capacity(16, Cursor::new(text.into_bytes()));
        let mut kept = Vec::new();
        let mut next = || next_line(&mut reader, &mut kept).unwrap();
        assert_eq!(next().as_deref(), Some("a"));
        assert_eq!(next().as_deref(), Some("b"));
        let cut = next().unwrap();
        assert!(cut.starts_with(&"é".repeat(MAX_LINE_CHARS)));
        assert!(
            cut.ends_with("… [line cut at 2,000 characters; it has 2,005]"),
            "{cut}"
        );
        assert_eq!(next().as_deref(), Some("last"));
        assert_eq!(next(), None);
    }
}
