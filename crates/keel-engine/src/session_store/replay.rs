//! Reading session files back: line splitting, damage handling, replay and summaries.
//!
//! Shared by every store so that they all read exactly the same way.

use keel_provider::{Message, Role, Usage};

use crate::history;

use super::{LoadedSession, SessionError, SessionMeta, SessionRecord, SessionSummary};

/// What one line turned out to be.
enum Line {
    /// A record this version knows.
    Record(Box<SessionRecord>),
    /// A line that was skipped; the warning says why.
    Skipped(String),
    /// An empty line (from a repaired cut-off line); ignored silently.
    Blank,
}

/// Splits `data` into `(1-based line number, bytes, is_last)`, without the newlines. A
/// final newline does not start another line.
fn lines(data: &[u8]) -> impl Iterator<Item = (usize, &[u8], bool)> {
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let count = if data.is_empty() {
        0
    } else {
        body.split(|b| *b == b'\n').count()
    };
    body.split(|b| *b == b'\n')
        .take(count)
        .enumerate()
        .map(move |(i, line)| (i + 1, line, i + 1 == count))
}

/// Decodes one line. `is_last` and `unterminated` (the file does not end with a newline)
/// only shape the warning for a damaged line.
fn decode(number: usize, raw: &[u8], is_last: bool, unterminated: bool) -> Line {
    if raw.trim_ascii().is_empty() {
        return Line::Blank;
    }
    let damaged = |reason: String| {
        if is_last && unterminated {
            format!(
                "line {number}: skipped the incomplete last line (the session was \
                 interrupted while writing it): {reason}"
            )
        } else if is_last {
            format!("line {number}: skipped the corrupt last line: {reason}")
        } else {
            format!("line {number}: skipped a corrupt line: {reason}")
        }
    };
    let value: serde_json::Value = match serde_json::from_slice(raw) {
        Ok(value) => value,
        Err(err) => return Line::Skipped(damaged(err.to_string())),
    };
    let kind = value
        .get("type")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    match kind {
        Some(kind) if SessionRecord::KNOWN_TYPES.contains(&kind.as_str()) => {
            match serde_json::from_value::<SessionRecord>(value) {
                Ok(record) => Line::Record(Box::new(record)),
                Err(err) => Line::Skipped(damaged(format!("bad {kind:?} record: {err}"))),
            }
        }
        Some(kind) => Line::Skipped(format!(
            "line {number}: skipped a record of unknown type {kind:?} (written by a newer \
             keel?)"
        )),
        None => Line::Skipped(damaged("no \"type\" field".to_owned())),
    }
}

/// Reads the header from the first line.
fn header(id: &str, data: &[u8]) -> Result<SessionMeta, SessionError> {
    let corrupt = |reason: String| SessionError::Corrupt {
        id: id.to_owned(),
        line: 1,
        reason,
    };
    let unterminated = !data.ends_with(b"\n");
    let Some((number, raw, is_last)) = lines(data).next() else {
        return Err(corrupt("the file is empty; it has no header".to_owned()));
    };
    match decode(number, raw, is_last, unterminated) {
        Line::Record(record) => match *record {
            SessionRecord::Header(meta) => Ok(meta),
            _ => Err(corrupt("the first line is not a header record".to_owned())),
        },
        Line::Skipped(warning) => Err(corrupt(format!("no valid header: {warning}"))),
        Line::Blank => Err(corrupt(
            "the first line is empty; it has no header".to_owned(),
        )),
    }
}

/// Reads the header from a file's first line (the rest need not be given).
pub(super) fn header_only(id: &str, first_line: &[u8]) -> Result<SessionMeta, SessionError> {
    // Only the first line matters here; make it look terminated so a header that is
    // followed by more lines is not mistaken for a cut-off one.
    let line = first_line.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut owned = line.to_vec();
    if first_line.contains(&b'\n') {
        owned.push(b'\n');
    }
    header(id, &owned)
}

/// Walks every record after the header, logging and collecting warnings.
fn for_each_record(
    id: &str,
    meta: &SessionMeta,
    data: &[u8],
    warnings: &mut Vec<String>,
    mut on_record: impl FnMut(SessionRecord),
) {
    if meta.id != id {
        warnings.push(format!(
            "line 1: the header names session {:?}, read as {id:?}",
            meta.id
        ));
    }
    let unterminated = !data.ends_with(b"\n");
    for (number, raw, is_last) in lines(data).skip(1) {
        match decode(number, raw, is_last, unterminated) {
            Line::Record(record) => match *record {
                SessionRecord::Header(_) => {
                    warnings.push(format!("line {number}: skipped a second header record"));
                }
                record => on_record(record),
            },
            Line::Skipped(warning) => warnings.push(warning),
            Line::Blank => {}
        }
    }
    for warning in warnings.iter() {
        tracing::warn!(session = id, "{warning}");
    }
}

/// Replays a whole session file.
pub(super) fn replay(id: &str, data: &[u8]) -> Result<LoadedSession, SessionError> {
    let meta = header(id, data)?;
    let mut messages: Vec<Message> = Vec::new();
    let mut usage = Usage::default();
    let mut cost_usd = Some(0.0_f64);
    let mut last_outcome = None;
    let mut warnings = Vec::new();
    let mut rewind_warnings = Vec::new();
    for_each_record(id, &meta, data, &mut warnings, |record| match record {
        SessionRecord::Header(_) => {}
        SessionRecord::Message { message } => messages.push(message),
        SessionRecord::Usage {
            usage: call,
            cost_usd: cost,
        } => {
            usage.add(&call);
            cost_usd = match (cost_usd, cost) {
                (Some(total), Some(cost)) => Some(total + cost),
                _ => None,
            };
        }
        SessionRecord::ToolResult { result } => history::insert_result(&mut messages, result),
        SessionRecord::Compacted { messages: kept, .. } => messages = kept,
        SessionRecord::Rewound { history_len } => {
            history::canonicalize(&mut messages);
            if history_len <= messages.len() {
                messages.truncate(history_len);
            } else {
                rewind_warnings.push(format!(
                    "skipped a rewind to message {history_len} of a history of {}",
                    messages.len()
                ));
            }
        }
        SessionRecord::Outcome { stop, text, .. } => last_outcome = Some((stop, text)),
    });
    warnings.extend(rewind_warnings);
    history::canonicalize(&mut messages);
    Ok(LoadedSession {
        meta,
        messages,
        usage,
        cost_usd,
        last_outcome,
        warnings,
    })
}

/// Summarizes a whole session file for listing.
pub(super) fn summarize(id: &str, data: &[u8]) -> Result<SessionSummary, SessionError> {
    let meta = header(id, data)?;
    let mut first_prompt = None;
    let mut outcome = None;
    let mut warnings = Vec::new();
    for_each_record(id, &meta, data, &mut warnings, |record| match record {
        SessionRecord::Message { message } if first_prompt.is_none() => {
            first_prompt = prompt_of(&message);
        }
        SessionRecord::Outcome { stop, .. } => outcome = Some(stop),
        _ => {}
    });
    Ok(SessionSummary {
        meta,
        first_prompt,
        outcome,
    })
}

/// The text of a user message that has some, on one line and shortened.
fn prompt_of(message: &Message) -> Option<String> {
    if message.role != Role::User {
        return None;
    }
    let text = message.text();
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return None;
    }
    Some(shorten(&words.join(" "), SessionSummary::PROMPT_CHARS))
}

/// `text` cut to at most `max` characters, an ellipsis marking the cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(max.saturating_sub(1)).collect();
    short.truncate(short.trim_end().len());
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_numbers_and_last() {
        let got: Vec<(usize, &[u8], bool)> = lines(b"a\nb\nc").collect();
        assert_eq!(
            got,
            vec![
                (1, &b"a"[..], false),
                (2, &b"b"[..], false),
                (3, &b"c"[..], true)
            ]
        );
        let got: Vec<(usize, &[u8], bool)> = lines(b"a\n").collect();
        assert_eq!(got, vec![(1, &b"a"[..], true)]);
        assert_eq!(lines(b"").count(), 0);
        assert_eq!(lines(b"\n").count(), 1);
    }

    #[test]
    fn shorten_keeps_char_boundaries() {
        assert_eq!(shorten("héllo", 10), "héllo");
        let long = "é".repeat(100);
        let short = shorten(&long, 80);
        assert_eq!(short.chars().count(), 80);
        assert!(short.ends_with('…'));
    }

    #[test]
    fn prompt_skips_tool_results_and_collapses_whitespace() {
        let tool = Message::new(
            Role::User,
            vec![keel_provider::ContentBlock::tool_result("t", "out", false)],
        );
        assert_eq!(prompt_of(&tool), None);
        assert_eq!(prompt_of(&Message::assistant("hi")), None);
        assert_eq!(
            prompt_of(&Message::user("  fix\n\nthe   bug ")),
            Some("fix the bug".to_owned())
        );
    }

    #[test]
    fn invalid_utf8_line_is_skipped_not_fatal() {
        let header = serde_json::to_vec(&SessionRecord::Header(SessionMeta::new("/", "p", "m")))
            .unwrap_or_default();
        let id = header_only("x", &header).map(|m| m.id).unwrap_or_default();
        let mut data = header;
        data.extend_from_slice(b"\n\xff\xfe\n");
        let loaded = replay(&id, &data);
        assert!(
            matches!(&loaded, Ok(l) if l.warnings.len() == 1 && l.warnings[0].starts_with("line 2:")),
            "{loaded:?}"
        );
    }
}
