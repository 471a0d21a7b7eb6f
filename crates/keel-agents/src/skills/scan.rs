//! Finding skill files in a folder and reading, lazily, what the index needs of each: the
//! front matter, and the first paragraph only when the front matter gives no description.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::AgentsError;
use crate::frontmatter;
use crate::tool_names::NameList;

/// The file a folder skill keeps its instructions in (`skill.md` is accepted too).
const SKILL_FILES: [&str; 2] = ["SKILL.md", "skill.md"];
/// A folder of work in progress: never loaded.
const DRAFTS: &str = "drafts";
/// The most characters of a description taken from the first paragraph.
pub(super) const PARAGRAPH_DESCRIPTION_CHARS: usize = 200;
/// The most characters of a description given in the front matter.
pub(super) const FRONT_DESCRIPTION_CHARS: usize = 1024;
/// Reading a first paragraph stops after this many bytes of it: the description is cut far
/// shorter anyway.
const PARAGRAPH_BYTES: usize = 4096;

/// A skill file found in a skills folder.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Candidate {
    /// The name it has unless its front matter says otherwise.
    pub name: String,
    /// Folder skills (`<name>/SKILL.md`) sort before file skills (`<name>.md`) of the same
    /// name, so the folder wins within one skills folder.
    pub layout: Layout,
    /// The Markdown file.
    pub path: PathBuf,
}

/// How a skill is laid out in its skills folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Layout {
    /// `<dir>/<name>/SKILL.md`: the folder may hold scripts and references too.
    Folder,
    /// `<dir>/<name>.md`.
    File,
}

/// The skill files in `dir`, sorted by name. A missing folder has none; problems reading it
/// are added to `warnings`.
pub(super) fn candidates(dir: &Path, warnings: &mut Vec<String>) -> Vec<Candidate> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(err) => {
            warnings.push(format!(
                "cannot read the skills folder {}: {err}",
                dir.display()
            ));
            return Vec::new();
        }
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                warnings.push(format!(
                    "cannot read the skills folder {}: {err}",
                    dir.display()
                ));
                continue;
            }
        };
        let path = entry.path();
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            if file_name.eq_ignore_ascii_case(DRAFTS) {
                continue;
            }
            if let Some(skill) = SKILL_FILES
                .iter()
                .map(|file| path.join(file))
                .find(|skill| skill.is_file())
            {
                found.push(Candidate {
                    name: file_name,
                    layout: Layout::Folder,
                    path: skill,
                });
            }
        } else if path.is_file()
            && path
                .extension()
                .is_some_and(|ext| ext.eq_ignore_ascii_case("md"))
            && !frontmatter::is_not_a_definition(&path)
        {
            found.push(Candidate {
                name: frontmatter::stem(&path),
                layout: Layout::File,
                path,
            });
        }
    }
    found.sort();
    found
}

/// A skill's front matter; every field is optional, and fields other tools use (`license`,
/// ...) are ignored.
#[derive(Debug, Default, Deserialize)]
struct SkillFront {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    triggers: Option<Triggers>,
    /// Claude Code's `allowed-tools`: tools (or permission rules) the skill may use without
    /// asking while it is in use.
    #[serde(
        default,
        rename = "allowed-tools",
        alias = "allowed_tools",
        alias = "allowedTools"
    )]
    allowed_tools: Option<NameList>,
}

/// `triggers:` as a list, or a single string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Triggers {
    One(String),
    Many(Vec<String>),
}

/// What indexing reads of a skill file.
#[derive(Debug)]
pub(super) struct Head {
    pub name: String,
    pub description: String,
    pub triggers: Vec<String>,
    pub allowed_tools: Option<Vec<String>>,
}

/// Reads the front matter of the skill file at `path` and, if it gives no description, the
/// body up to the end of its first paragraph; never further. `default_name` is the name when
/// the front matter gives none.
pub(super) fn read_head(path: &Path, default_name: &str) -> Result<Head, AgentsError> {
    let invalid = |reason: &str| AgentsError::Invalid {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    let file = File::open(path).map_err(|err| AgentsError::io(path, err))?;
    let mut lines = Lines {
        reader: BufReader::new(file),
        buf: Vec::new(),
        first: true,
        path,
    };
    let first = lines.next()?.map(<[u8]>::to_vec);
    let (front, pending) = if first.as_deref() == Some(b"---".as_slice()) {
        (read_front(&mut lines)?, None)
    } else {
        (SkillFront::default(), first)
    };

    let name = match front.name.as_deref().map(str::trim) {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => default_name.trim().to_owned(),
    };
    if name.is_empty() {
        return Err(invalid("the skill has no name"));
    }
    if name.contains(char::is_control) {
        return Err(invalid("the skill's name must be one line of text"));
    }
    let description = match front.description.as_deref().map(one_line) {
        Some(description) if !description.is_empty() => {
            shorten(&description, FRONT_DESCRIPTION_CHARS)
        }
        _ => shorten(
            &one_line(&first_paragraph(&mut lines, pending)?),
            PARAGRAPH_DESCRIPTION_CHARS,
        ),
    };
    if description.is_empty() {
        return Err(invalid(
            "the skill has no description: give one in the front matter (`description:`) or \
             start the body with a paragraph saying what the skill is for",
        ));
    }
    let triggers = match front.triggers {
        None => Vec::new(),
        Some(Triggers::One(trigger)) => vec![trigger],
        Some(Triggers::Many(triggers)) => triggers,
    };
    let triggers = triggers
        .iter()
        .map(|trigger| one_line(trigger))
        .filter(|trigger| !trigger.is_empty())
        .collect();
    Ok(Head {
        name,
        description,
        triggers,
        allowed_tools: front.allowed_tools.map(|list| list.names()),
    })
}

/// Reads the front matter after its opening `---` line, through its closing one, and parses
/// it as [`frontmatter::parse`] would (same rules, same messages).
fn read_front(lines: &mut Lines<'_>) -> Result<SkillFront, AgentsError> {
    let path = lines.path;
    let mut text = String::from("---\n");
    loop {
        let Some(line) = lines.next()? else {
            // Let the shared parser say what is wrong: the block is never closed.
            text.pop();
            break;
        };
        let line = std::str::from_utf8(line).map_err(|_| AgentsError::Invalid {
            path: path.to_path_buf(),
            reason: "the front matter is not UTF-8 text".into(),
        })?;
        text.push_str(line);
        text.push('\n');
        if line == "---" {
            break;
        }
    }
    let document = frontmatter::parse::<SkillFront>(path, &text)?;
    Ok(document.front.unwrap_or_default())
}

/// The first paragraph of the body, one line: leading headings are passed over (the first
/// one is the description if no paragraph follows); reading stops at the blank line or
/// heading that ends the paragraph. Bytes that are not UTF-8 are replaced, not refused: the
/// body is checked when it is loaded.
fn first_paragraph(lines: &mut Lines<'_>, pending: Option<Vec<u8>>) -> Result<String, AgentsError> {
    let mut paragraph = String::new();
    let mut heading: Option<String> = None;
    let mut take = |line: &[u8]| -> bool {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return !paragraph.is_empty();
        }
        if let Some(title) = heading_text(text) {
            if !paragraph.is_empty() {
                return true;
            }
            if heading.is_none() && !title.is_empty() {
                heading = Some(title.to_owned());
            }
            return false;
        }
        if !paragraph.is_empty() {
            paragraph.push(' ');
        }
        paragraph.push_str(text);
        paragraph.len() >= PARAGRAPH_BYTES
    };
    let mut done = pending.as_deref().is_some_and(&mut take);
    while !done {
        match lines.next()? {
            Some(line) => done = take(line),
            None => break,
        }
    }
    if paragraph.is_empty() {
        Ok(heading.unwrap_or_default())
    } else {
        Ok(paragraph)
    }
}

/// The text of an ATX heading (`# Title`), or `None` if the line is not one.
fn heading_text(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches('#');
    let level = line.len() - rest.len();
    if (1..=6).contains(&level) && (rest.is_empty() || rest.starts_with([' ', '\t'])) {
        Some(rest.trim().trim_end_matches('#').trim_end())
    } else {
        None
    }
}

/// `text` with every run of whitespace (line breaks too) made one space.
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to at most `max` characters, at a word boundary when one is near, ending `…`.
pub(super) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let keep = max.saturating_sub(1);
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let cut = &text[..end];
    let cut = match cut.rfind(' ') {
        Some(space) if space >= end / 2 => &cut[..space],
        _ => cut,
    };
    format!(
        "{}…",
        cut.trim_end_matches(|c: char| c.is_whitespace() || c == ',')
    )
}

/// Lines of a file as bytes, without their `\n` or `\r\n` (and without a byte order mark on
/// the first), read one at a time so reading can stop anywhere.
struct Lines<'a> {
    reader: BufReader<File>,
    buf: Vec<u8>,
    first: bool,
    path: &'a Path,
}

impl Lines<'_> {
    fn next(&mut self) -> Result<Option<&[u8]>, AgentsError> {
        self.buf.clear();
        let read = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(|err| AgentsError::io(self.path, err))?;
        if read == 0 {
            return Ok(None);
        }
        let mut line = self.buf.as_slice();
        if std::mem::take(&mut self.first) {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        line = line.strip_suffix(b"\n").unwrap_or(line);
        line = line.strip_suffix(b"\r").unwrap_or(line);
        Ok(Some(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorten_cuts_at_a_word_and_marks_the_cut() {
        assert_eq!(shorten("short", 10), "short");
        assert_eq!(shorten("one two three four", 12), "one two…");
        assert_eq!(shorten("abcdefghijklmnop", 8), "abcdefg…");
        assert_eq!(shorten("été été été", 6), "été…");
    }

    #[test]
    fn headings_are_recognised() {
        assert_eq!(heading_text("# Title"), Some("Title"));
        assert_eq!(heading_text("### Title ###"), Some("Title"));
        assert_eq!(heading_text("#hashtag"), None);
        assert_eq!(heading_text("####### seven"), None);
        assert_eq!(heading_text("plain"), None);
    }
}
