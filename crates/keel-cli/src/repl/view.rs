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

use crate::markdown::MarkdownStream;
use crate::terminal;

/// Before each of the last lines of a failed call's output.
const TAIL_INDENT: &str = "    ";

/// How often the spinner moves.
const SPIN_INTERVAL: Duration = Duration::from_millis(100);

pub(super) use crate::terminal::{Style, printable};

/// The last tool call's full output, kept for `/last`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LastOutput {
    /// The call, described on one line.
    pub(super) call: String,
    /// Its whole output (as capped by the tool's output limit).
    pub(super) output: String,
}

/// The screen's state: whether the cursor is at the start of a line, the spinner shown, the
/// answer being drawn.
struct Screen {
    at_line_start: bool,
    spinner: Option<ProgressBar>,
    /// The model's answer being drawn as Markdown (`None` between answers, or when the answer
    /// is printed as it comes).
    markdown: Option<MarkdownStream>,
    /// The last tool call's output.
    last_output: Option<LastOutput>,
}

impl Screen {
    /// Clears the spinner, if one is shown.
    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    /// Writes `text` (the spinner cleared first) and flushes it.
    fn emit(&mut self, text: &str) {
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

    /// Draws what is left of the answer being drawn, if any: before anything else is printed.
    fn finish_answer(&mut self) {
        if let Some(mut markdown) = self.markdown.take() {
            let rest = markdown.finish();
            self.emit(&rest);
        }
    }

    /// Writes `text` after the rest of the answer being drawn.
    fn write(&mut self, text: &str) {
        self.finish_answer();
        self.emit(text);
    }

    /// Ends a half-written line, if any (the answer being drawn is finished first).
    fn end_line(&mut self) {
        self.finish_answer();
        if !self.at_line_start {
            self.emit("\n");
        }
    }
}

/// Prints for the interactive session; clones share the screen.
#[derive(Clone)]
pub(super) struct View {
    style: Style,
    /// Whether the answer is drawn as Markdown (stdout is a terminal, or colours are forced)
    /// or printed as the model wrote it.
    markdown: bool,
    screen: Arc<Mutex<Screen>>,
}

impl View {
    /// A view painting with `style`; spinners only when colours are on (a terminal, no
    /// `NO_COLOR`). The answer is drawn as Markdown when stdout is a terminal or colours are
    /// on (`CLICOLOR_FORCE`), else printed as the model wrote it.
    pub(super) fn new(style: Style) -> Self {
        Self::with_markdown(style, std::io::stdout().is_terminal() || style.enabled())
    }

    /// A view painting with `style`, drawing answers as Markdown or not.
    fn with_markdown(style: Style, markdown: bool) -> Self {
        Self {
            style,
            markdown,
            screen: Arc::new(Mutex::new(Screen {
                at_line_start: true,
                spinner: None,
                markdown: None,
                last_output: None,
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

    /// More of the model's answer, as it comes: drawn as Markdown, line by line, to the
    /// terminal's width (the rest when anything else is printed), or printed as it is.
    pub(super) fn text(&self, text: &str) {
        let mut screen = self.screen();
        screen.stop_spinner();
        if !self.markdown {
            screen.emit(&printable(text));
            return;
        }
        if screen.markdown.is_none() {
            screen.end_line();
        }
        let style = self.style;
        let lines = screen
            .markdown
            .get_or_insert_with(|| MarkdownStream::new(style, terminal::width()))
            .push(text);
        screen.emit(&lines);
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
        self.painted(text, Style::dim);
    }

    /// Something that went wrong but does not stop anything, in yellow.
    pub(super) fn warning(&self, text: &str) {
        self.painted(text, Style::yellow);
    }

    /// Something that failed, in red.
    pub(super) fn error(&self, text: &str) {
        self.painted(text, Style::red);
    }

    /// `text` on lines of its own, each painted with `paint`; on a terminal, text wider than
    /// it is wrapped on words (the terminal would cut words).
    fn painted(&self, text: &str, paint: fn(Style, &str) -> String) {
        let width = crate::wrap::terminal_width();
        let fits = text.lines().all(|line| line.chars().count() <= width);
        let lines = if fits || !std::io::stdout().is_terminal() {
            vec![text.to_owned()]
        } else {
            crate::wrap::wrap_words(text, width, "")
        };
        let lines: Vec<String> = lines.iter().map(|line| paint(self.style, line)).collect();
        self.lines(&lines);
    }

    /// A finished tool call: its one-line description, the mark painted green or the whole
    /// line red for a failure; under it, dimmed and indented, the last lines of a failure's
    /// output (`tail`), cut to the terminal's width. The call's output is untrusted: made
    /// printable.
    pub(super) fn tool_line(&self, line: &str, tail: &[String], is_error: bool) {
        let line = printable(line);
        let painted = if is_error {
            self.style.red(&line)
        } else {
            match line.strip_prefix('✓') {
                Some(rest) => format!("{}{rest}", self.style.green("✓")),
                None => line.clone(),
            }
        };
        let room = terminal::width().saturating_sub(TAIL_INDENT.len() + 1);
        let mut lines = vec![painted];
        lines.extend(tail.iter().map(|line| {
            let line = one_line_cut(&printable(line), room);
            self.style.dim(&format!("{TAIL_INDENT}{line}"))
        }));
        self.lines(&lines);
    }

    /// Keeps `output`, the whole output of the call described by `call`, for `/last`.
    pub(super) fn keep_last_output(&self, call: String, output: String) {
        self.screen().last_output = Some(LastOutput { call, output });
    }

    /// The last tool call's output, if a call finished in this session.
    pub(super) fn last_output(&self) -> Option<LastOutput> {
        self.screen().last_output.clone()
    }

    /// Shows the spinner with `message` (or changes its message); nothing without colours.
    pub(super) fn spin(&self, message: &str) {
        if !self.style.enabled() {
            return;
        }
        let mut screen = self.screen();
        screen.finish_answer();
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

/// `line` cut to `max` characters, with an ellipsis when it was longer; tabs as spaces.
fn one_line_cut(line: &str, max: usize) -> String {
    let line = line.replace('\t', "    ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_lines_are_cut_to_the_width() {
        assert_eq!(one_line_cut("abcdef", 4), "abc…");
        assert_eq!(one_line_cut("a\tb", 10), "a    b");
    }

    #[test]
    fn the_last_output_is_kept() {
        let view = View::with_markdown(Style::new(false), false);
        assert_eq!(view.last_output(), None);
        view.keep_last_output("run_command(x)".into(), "out".into());
        assert_eq!(
            view.last_output().map(|last| last.output),
            Some("out".into())
        );
    }
}
