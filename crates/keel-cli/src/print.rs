//! Lines to stdout and stderr: what every command prints through.

use std::io::Write;

use serde_json::Value;

/// Writes one line to stdout and flushes it; a closed stdout is not an error worth more
/// than stopping to write.
pub(crate) fn print_line(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// Writes `value` as one JSON line to stdout.
pub(crate) fn print_json(value: &Value) {
    print_line(&value.to_string());
}

/// Writes `lines` as JSON lines to stdout.
pub(crate) fn print_lines(lines: &[Value]) {
    for line in lines {
        print_json(line);
    }
}

/// Writes one line to stderr (progress, notices); a closed stderr is ignored.
pub(crate) fn progress(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}
