//! Coloured diffs: of one file before and after a write (with `similar`), and the lines of a
//! git patch (for `/diff`).

use similar::udiff::UnifiedHunkHeader;
use similar::{ChangeTag, TextDiff};

use super::view::{Style, printable};

/// The most diff lines shown after one write; `/diff` shows everything.
pub(super) const MAX_FILE_DIFF_LINES: usize = 80;
/// Lines of context around each change.
const CONTEXT: usize = 3;

/// `path`'s change from `old` (`None`: the file did not exist) to `new`, as coloured lines: a
/// header with the counts, then unified hunks, at most [`MAX_FILE_DIFF_LINES`] of them.
/// Empty when nothing changed.
pub(super) fn file_diff(style: Style, path: &str, old: Option<&str>, new: &str) -> Vec<String> {
    let before = old.unwrap_or_default();
    if old.is_some() && before == new {
        return Vec::new();
    }
    let diff = TextDiff::from_lines(before, new);
    let (mut added, mut removed) = (0usize, 0usize);
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let header = match old {
        None => format!("{path} (new file, {added} line{})", plural(added)),
        Some(_) => format!("{path} (+{added} -{removed})"),
    };
    let mut body = Vec::new();
    for group in diff.grouped_ops(CONTEXT) {
        body.push(style.cyan(&UnifiedHunkHeader::new(&group).to_string()));
        for op in &group {
            for change in diff.iter_changes(op) {
                let origin = match change.tag() {
                    ChangeTag::Insert => '+',
                    ChangeTag::Delete => '-',
                    ChangeTag::Equal => ' ',
                };
                body.push(change_line(style, origin, change.value()));
                if change.missing_newline() {
                    body.push(style.dim("\\ No newline at end of file"));
                }
            }
        }
    }
    let mut lines = vec![style.bold(&header)];
    let hidden = body.len().saturating_sub(MAX_FILE_DIFF_LINES);
    body.truncate(MAX_FILE_DIFF_LINES);
    lines.extend(body);
    if hidden > 0 {
        lines.push(style.dim(&format!(
            "… {hidden} more diff line{}; /diff shows them all",
            plural(hidden)
        )));
    }
    lines
}

/// `s` unless `n` is 1.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// One changed (`+`), removed (`-`) or context (` `) line, painted.
fn change_line(style: Style, origin: char, content: &str) -> String {
    let content = content.strip_suffix('\n').unwrap_or(content);
    let line = format!("{origin}{}", printable(content));
    match origin {
        '+' => style.green(&line),
        '-' => style.red(&line),
        _ => line,
    }
}

/// One line of a git patch as libgit2 prints it (`origin` is its
/// [`git2::DiffLine::origin`]), painted; file headers may be several lines.
pub(super) fn patch_lines(style: Style, origin: char, content: &str) -> Vec<String> {
    match origin {
        '+' | '-' | ' ' => vec![change_line(style, origin, content)],
        'F' => content
            .lines()
            .map(|line| style.bold(&printable(line)))
            .collect(),
        'H' => vec![style.cyan(&printable(content.trim_end()))],
        // End-of-file newline notes ('=', '>', '<') and binary notes ('B').
        _ => content
            .lines()
            .map(|line| style.dim(&printable(line)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_shows_as_a_hunk_with_counts() {
        let lines = file_diff(Style::new(false), "a.txt", Some("one\ntwo\n"), "one\n2\n");
        assert_eq!(
            lines,
            ["a.txt (+1 -1)", "@@ -1,2 +1,2 @@", " one", "-two", "+2"]
        );
    }

    #[test]
    fn a_new_file_is_all_additions_and_no_change_is_nothing() {
        let lines = file_diff(Style::new(false), "n.txt", None, "x\n");
        assert_eq!(lines, ["n.txt (new file, 1 line)", "@@ -0,0 +1 @@", "+x"]);
        assert!(file_diff(Style::new(false), "n.txt", Some("x\n"), "x\n").is_empty());
    }

    #[test]
    fn long_diffs_are_cut_and_colours_wrap_lines() {
        let new: String = (0..200).map(|i| format!("{i}\n")).collect();
        let lines = file_diff(Style::new(false), "big", None, &new);
        assert_eq!(lines.len(), MAX_FILE_DIFF_LINES + 2);
        assert!(lines[lines.len() - 1].starts_with("… 121 more diff lines"));
        let coloured = file_diff(Style::new(true), "c", Some("a\n"), "b\n");
        assert!(coloured.contains(&"\x1b[32m+b\x1b[0m".to_owned()));
        assert!(coloured.contains(&"\x1b[31m-a\x1b[0m".to_owned()));
    }
}
