//! What the interactive session prints: streamed answer text, tool lines, notices, the
//! spinner, and the colours they are painted in.
//!
//! Everything goes to stdout through one [`View`], shared (it is cheap to clone) between the
//! loop and the approval prompts asked on a blocking thread, so that a spinner is always
//! cleared and a half-written line always ended before anything else is printed.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the spinner moves.
const SPIN_INTERVAL: Duration = Duration::from_millis(100);

/// ANSI colours, or plain text when they are off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Style {
    color: bool,
}

impl Style {
    /// Colours when stdout is a terminal and `NO_COLOR` is not set (to a non-empty value).
    pub(super) fn detect() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        Self::new(std::io::stdout().is_terminal() && !no_color)
    }

    /// Colours on or off.
    pub(super) fn new(color: bool) -> Self {
        Self { color }
    }

    /// Whether colours (and, with them, spinners) are on.
    pub(super) fn enabled(self) -> bool {
        self.color
    }

    /// `text` in the SGR colour `code`, when colours are on.
    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Bold.
    pub(super) fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    /// Dimmed, for what matters less.
    pub(super) fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Red: errors and removed lines.
    pub(super) fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    /// Green: success and added lines.
    pub(super) fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Yellow: warnings.
    pub(super) fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Cyan: hunk headers.
    pub(super) fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }
}

/// Text from the model or a file, made safe to print: control characters other than newline
/// and tab (an escape sequence could rewrite the screen) become `�`; carriage returns go.
pub(super) fn printable(text: &str) -> String {
    text.chars()
        .filter(|&c| c != '\r')
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// The screen's state: whether the cursor is at the start of a line, and the spinner shown.
struct Screen {
    at_line_start: bool,
    spinner: Option<ProgressBar>,
}

impl Screen {
    /// Clears the spinner, if one is shown.
    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    /// Writes `text` (the spinner cleared first) and flushes it.
    fn write(&mut self, text: &str) {
        self.stop_spinner();
        if text.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        // A closed stdout is not worth more than not printing.
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        self.at_line_start = text.ends_with('\n');
    }

    /// Ends a half-written line, if any.
    fn end_line(&mut self) {
        if !self.at_line_start {
            self.write("\n");
        }
    }
}

/// Prints for the interactive session; clones share the screen.
#[derive(Clone)]
pub(super) struct View {
    style: Style,
    screen: Arc<Mutex<Screen>>,
}

impl View {
    /// A view painting with `style`; spinners only when colours are on (a terminal, no
    /// `NO_COLOR`).
    pub(super) fn new(style: Style) -> Self {
        Self {
            style,
            screen: Arc::new(Mutex::new(Screen {
                at_line_start: true,
                spinner: None,
            })),
        }
    }

    /// The screen, to print on.
    fn screen(&self) -> MutexGuard<'_, Screen> {
        // A panic while printing leaves nothing half-done that matters: go on.
        self.screen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The colours.
    pub(super) fn style(&self) -> Style {
        self.style
    }

    /// More of the model's answer, as it comes.
    pub(super) fn text(&self, text: &str) {
        self.screen().write(&printable(text));
    }

    /// Ends a half-written line, if any.
    pub(super) fn end_line(&self) {
        self.screen().end_line();
    }

    /// One line, on a line of its own.
    pub(super) fn line(&self, text: &str) {
        let mut screen = self.screen();
        screen.end_line();
        screen.write(&format!("{text}\n"));
    }

    /// Several lines, on lines of their own.
    pub(super) fn lines(&self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let mut screen = self.screen();
        screen.end_line();
        let mut text = lines.join("\n");
        text.push('\n');
        screen.write(&text);
    }

    /// Something the user may like to know, dimmed.
    pub(super) fn notice(&self, text: &str) {
        self.line(&self.style.dim(text));
    }

    /// Something that went wrong but does not stop anything, in yellow.
    pub(super) fn warning(&self, text: &str) {
        self.line(&self.style.yellow(text));
    }

    /// Something that failed, in red.
    pub(super) fn error(&self, text: &str) {
        self.line(&self.style.red(text));
    }

    /// A finished tool call: its one-line description, the mark painted green or the whole
    /// line red for a failure.
    pub(super) fn tool_line(&self, line: &str, is_error: bool) {
        let painted = if is_error {
            self.style.red(line)
        } else {
            match line.strip_prefix('✓') {
                Some(rest) => format!("{}{rest}", self.style.green("✓")),
                None => line.to_owned(),
            }
        };
        self.line(&painted);
    }

    /// Shows the spinner with `message` (or changes its message); nothing without colours.
    pub(super) fn spin(&self, message: &str) {
        if !self.style.enabled() {
            return;
        }
        let mut screen = self.screen();
        if let Some(spinner) = &screen.spinner {
            spinner.set_message(message.to_owned());
            return;
        }
        screen.end_line();
        let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
        let style = ProgressStyle::with_template("{spinner:.cyan} {msg:.dim} {elapsed:.dim}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        spinner.set_style(style);
        spinner.set_message(message.to_owned());
        spinner.enable_steady_tick(SPIN_INTERVAL);
        screen.spinner = Some(spinner);
    }

    /// Clears the spinner, if one is shown.
    pub(super) fn stop_spinner(&self) {
        self.screen().stop_spinner();
    }

    /// Readies the screen for a prompt or a question: no spinner, the cursor at the start of
    /// a line. The line editor's own output moves to the next line when it is done.
    pub(super) fn before_prompt(&self) {
        let mut screen = self.screen();
        screen.stop_spinner();
        screen.end_line();
        // The editor ends its line itself.
        screen.at_line_start = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_ansi_codes_or_nothing() {
        assert_eq!(Style::new(true).red("x"), "\x1b[31mx\x1b[0m");
        assert_eq!(Style::new(false).red("x"), "x");
        assert_eq!(Style::new(false).bold("x"), "x");
    }

    #[test]
    fn control_characters_are_not_printed() {
        assert_eq!(printable("a\x1b[2Jb\r\n\tc"), "a\u{FFFD}[2Jb\n\tc");
    }
}
