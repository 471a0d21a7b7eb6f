//! What `run_command` keeps of a command's output, its progress lines, and its result.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use keel_tool::{ToolContext, ToolOutput};
use serde_json::json;

use super::{Finished, Stop};
use crate::confine::CommandSandbox;
use crate::protect::RestoreReport;

/// Bytes kept from the start of the output.
const HEAD_BYTES: usize = 14_000;
/// Bytes kept from the end of the output.
const TAIL_BYTES: usize = 14_000;
/// How far from a cut a line break is looked for, so cuts fall between lines.
const LINE_SLACK: usize = 400;
/// How often progress lines are reported at most.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// The output kept: the first [`HEAD_BYTES`], and the last [`TAIL_BYTES`] in a buffer that is
/// compacted as it grows, so memory stays bounded whatever the command prints.
#[derive(Debug, Default)]
pub(super) struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    pub(super) total: u64,
}

impl Capture {
    pub(super) fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let room = HEAD_BYTES.saturating_sub(self.head.len()).min(data.len());
        let (head, rest) = data.split_at(room);
        self.head.extend_from_slice(head);
        if rest.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail
                .extend_from_slice(&rest[rest.len() - TAIL_BYTES..]);
        } else if !rest.is_empty() {
            self.tail.extend_from_slice(rest);
            if self.tail.len() > 2 * TAIL_BYTES {
                self.tail.drain(..self.tail.len() - TAIL_BYTES);
            }
        }
    }

    /// The output as text, and how many bytes were left out of it.
    pub(super) fn render(&self) -> (String, u64) {
        let tail = &self.tail[self.tail.len().saturating_sub(TAIL_BYTES)..];
        let kept = (self.head.len() + tail.len()) as u64;
        if kept == self.total {
            let mut all = self.head.clone();
            all.extend_from_slice(tail);
            return (String::from_utf8_lossy(&all).into_owned(), 0);
        }
        let head_from = self.head.len().saturating_sub(LINE_SLACK);
        let head_end = self.head[head_from..]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or_else(|| char_end(&self.head), |pos| head_from + pos + 1);
        let head = &self.head[..head_end];
        let tail_start = tail[..tail.len().min(LINE_SLACK)]
            .iter()
            .position(|&b| b == b'\n')
            .map_or_else(
                // No line break near the cut: start at a character boundary.
                || {
                    tail.iter()
                        .take(3)
                        .take_while(|&&b| b & 0xC0 == 0x80)
                        .count()
                },
                |pos| pos + 1,
            );
        let tail = &tail[tail_start..];
        let omitted = self.total - (head.len() + tail.len()) as u64;
        let text = format!(
            "{}\n[... {omitted} bytes omitted ({} in total); filter the output (grep, head, \
             tail) or redirect it to a file and read that in parts ...]\n{}",
            String::from_utf8_lossy(head).trim_end_matches('\n'),
            self.total,
            String::from_utf8_lossy(tail),
        );
        (text, omitted)
    }
}

/// The length of `bytes` without a character cut off at its end.
fn char_end(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let byte = bytes[len - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let needs = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needs > back { len - back } else { len };
    }
    len
}

/// Reports the latest output line as progress, at most every [`PROGRESS_EVERY`].
#[derive(Debug, Default)]
pub(super) struct ProgressLine {
    last: Option<Instant>,
}

impl ProgressLine {
    pub(super) fn update(&mut self, ctx: &ToolContext, data: &[u8]) {
        if self.last.is_some_and(|at| at.elapsed() < PROGRESS_EVERY) {
            return;
        }
        let trimmed = data.strip_suffix(b"\n").unwrap_or(data);
        let line = trimmed.rsplit(|&b| b == b'\n').next().unwrap_or(trimmed);
        if line.is_empty() {
            return;
        }
        let line = String::from_utf8_lossy(&line[..line.len().min(200)]);
        ctx.progress(line.trim_end().to_owned());
        self.last = Some(Instant::now());
    }
}

/// The name of a common signal.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

/// The tool's result: the output, the status line, the notes, and the metadata.
pub(super) fn report(
    finished: &Finished,
    sandbox: &CommandSandbox,
    restored: &RestoreReport,
    timeout: Duration,
    elapsed: Duration,
    notes: &[String],
) -> ToolOutput {
    let (text, omitted) = finished.capture.render();
    let mut content = if text.is_empty() {
        "(no output)".to_owned()
    } else {
        text
    };
    if !content.ends_with('\n') {
        content.push('\n');
    }
    let secs = timeout.as_secs();
    let code = finished.status.and_then(|status| status.code());
    let signal = finished.status.and_then(|status| status.signal());
    let why = match finished.stop {
        Stop::Exited => None,
        Stop::TimedOut => Some(format!("timed out after {secs}s")),
        Stop::Cancelled => Some("interrupted by the user".to_owned()),
    };
    let status_line = match (code, signal, &why) {
        (_, Some(signal), Some(why)) => format!("[killed by signal {signal} ({why})]"),
        (_, Some(signal), None) => match signal_name(signal) {
            Some(name) => format!("[killed by signal {signal} ({name})]"),
            None => format!("[killed by signal {signal}]"),
        },
        (Some(code), _, None) => format!("[exit code {code}]"),
        (Some(code), _, Some(why)) => format!("[exit code {code} ({why})]"),
        (None, None, Some(why)) => format!("[stopped ({why})]"),
        (None, None, None) => "[stopped]".to_owned(),
    };
    content.push_str(&status_line);
    content.push('\n');
    if finished.stop == Stop::TimedOut {
        content.push_str(&format!(
            "[note: the command did not finish within {secs}s, so it was killed with everything \
             it started; if it needs longer, pass a larger timeout_secs, or run it in smaller \
             steps]\n"
        ));
    }
    for note in notes.iter().chain(restored.note().as_ref()) {
        content.push_str(&format!("[note: {note}]\n"));
    }
    let success = finished.stop == Stop::Exited && code == Some(0) && restored.is_empty();
    let metadata = json!({
        "exit_code": code,
        "signal": signal,
        "timed_out": finished.stop == Stop::TimedOut,
        "cancelled": finished.stop == Stop::Cancelled,
        "duration_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        "confined": sandbox.confined(),
        "landlock_abi": sandbox.landlock_abi(),
        "network_blocked": sandbox.network_blocked(),
        "namespaces": sandbox.namespaces(),
        "restored": restored.restored,
        "restore_failures": restored.failures,
        "output_bytes": finished.capture.total,
        "omitted_bytes": omitted,
        "timeout_secs": secs,
    });
    let output = if success {
        ToolOutput::text(content)
    } else {
        ToolOutput::error(content)
    };
    output.with_metadata(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_everything_when_small() {
        let mut capture = Capture::default();
        capture.push(b"hello\n");
        capture.push(b"world\n");
        assert_eq!(capture.render(), ("hello\nworld\n".to_owned(), 0));
    }

    #[test]
    fn capture_keeps_head_and_tail_on_line_boundaries_with_bounded_memory() {
        let mut capture = Capture::default();
        let mut total = 0u64;
        for i in 0..200_000u32 {
            let line = format!("line {i:06}\n");
            total += line.len() as u64;
            capture.push(line.as_bytes());
            assert!(capture.tail.len() <= 2 * TAIL_BYTES);
        }
        let (text, omitted) = capture.render();
        assert!(
            text.starts_with("line 000000\nline 000001\n"),
            "{}",
            &text[..40]
        );
        assert!(text.ends_with("line 199999\n"));
        assert!(text.contains(&format!("bytes omitted ({total} in total)")));
        assert!(omitted > total - (HEAD_BYTES + TAIL_BYTES) as u64);
        assert!(text.len() < HEAD_BYTES + TAIL_BYTES + 300);
        for line in text.lines().filter(|line| line.starts_with("line")) {
            assert_eq!(line.len(), 11, "{line:?}");
        }
    }

    #[test]
    fn capture_cut_in_a_character_stays_valid_text() {
        let mut capture = Capture::default();
        // An odd offset, so both cuts fall inside a two-byte character.
        capture.push(b"a");
        capture.push("é".repeat(50_000).as_bytes());
        let (rendered, _) = capture.render();
        assert!(
            !rendered.contains('\u{FFFD}'),
            "replacement character in the output"
        );
    }
}
