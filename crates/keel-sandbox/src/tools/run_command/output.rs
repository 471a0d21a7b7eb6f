//! What `run_command` keeps of a command's output, its progress lines, and its result.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use keel_tool::{HeadTail, ToolContext, ToolOutput};
use serde_json::json;

use super::{Finished, Stop};
use crate::confine::CommandSandbox;
use crate::protect::RestoreReport;

/// Bytes kept from the start of the output.
const HEAD_BYTES: usize = 14_000;
/// Bytes kept from the end of the output.
const TAIL_BYTES: usize = 14_000;
/// How often progress lines are reported at most.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// The output kept: the first [`HEAD_BYTES`] and the last [`TAIL_BYTES`], in bounded memory
/// whatever the command prints.
pub(super) fn capture() -> HeadTail {
    HeadTail::new(HEAD_BYTES, TAIL_BYTES)
}

/// The output as text, and how many bytes were left out of it.
pub(super) fn render(capture: &HeadTail) -> (String, u64) {
    capture.render(|omitted, total| {
        format!(
            "[... {omitted} bytes omitted ({total} in total); filter the output (grep, head, \
             tail) or redirect it to a file and read that in parts ...]"
        )
    })
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
    let (text, omitted) = render(&finished.capture);
    // The output alone (stdout and stderr, interleaved), for Claude Code's `stdout`.
    let stdout = text.clone();
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
        "output_bytes": finished.capture.total(),
        "omitted_bytes": omitted,
        "timeout_secs": secs,
        "stdout": stdout,
    });
    let output = if success {
        ToolOutput::text(content)
    } else {
        ToolOutput::error(content)
    };
    output.with_metadata(metadata)
}
