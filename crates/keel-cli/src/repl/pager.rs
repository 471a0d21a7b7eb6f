//! `/last`: the last tool call's whole output, in the user's pager (`$PAGER`, else
//! `less -R`), or printed inline when stdout is not a terminal or the pager cannot start.

use std::io::{IsTerminal, Write};
use std::process::{Command, Stdio};

use super::view::{View, printable};

/// The pager when `$PAGER` is not set.
const DEFAULT_PAGER: &str = "less -R";
/// The exit codes of a shell that could not run the command (not found, not executable).
const NOT_STARTED: [i32; 2] = [126, 127];

/// Shows the last tool call's output, or says there is none yet.
pub(super) async fn show_last(view: &View) {
    let Some(last) = view.last_output() else {
        view.notice("no tool call has finished in this session yet");
        return;
    };
    // The output is untrusted: no escape sequence reaches the terminal or the pager.
    let output = printable(&last.output);
    let title = format!("── {} ──", printable(&last.call));
    if std::io::stdout().is_terminal() {
        view.before_prompt();
        let pager = std::env::var("PAGER")
            .ok()
            .filter(|pager| !pager.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_PAGER.to_owned());
        let text = format!("{title}\n{output}");
        let shown = tokio::task::spawn_blocking(move || page(&pager, &text))
            .await
            .unwrap_or(false);
        if shown {
            return;
        }
    }
    view.notice(&title);
    let lines: Vec<String> = output.lines().map(str::to_owned).collect();
    view.lines(&lines);
}

/// Runs `pager` (a shell command line) on `text`; whether it ran.
fn page(pager: &str, text: &str) -> bool {
    let Ok(mut child) = Command::new("sh")
        .arg("-c")
        .arg(pager)
        .stdin(Stdio::piped())
        .spawn()
    else {
        return false;
    };
    if let Some(mut stdin) = child.stdin.take() {
        // The person may quit before reading it all: a broken pipe is not a failure.
        let _ = stdin.write_all(text.as_bytes());
    }
    match child.wait() {
        Ok(status) => !status
            .code()
            .is_some_and(|code| NOT_STARTED.contains(&code)),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pager_that_cannot_start_is_reported() {
        assert!(page("cat >/dev/null", "text"));
        assert!(!page("no-such-pager-keel-test", "text"));
    }
}
