//! What keel writes to a terminal, made safe and painted: the colours ([`Style`]: ANSI SGR
//! codes, or plain text when they are off), text from the model or a file with its control
//! characters made inert ([`printable`]), and the terminal's width.
//!
//! Self-contained (no other keel-cli module is used), so that the Markdown renderer's
//! benchmark can include it with `#[path]`.

use std::ffi::OsString;
use std::io::IsTerminal;

/// The width assumed when the terminal's cannot be read (stdout is not a terminal).
const FALLBACK_WIDTH: usize = 80;

/// ANSI colours, or plain text when they are off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Style {
    color: bool,
}

impl Style {
    /// Colours as the conventions say, first rule that applies: `NO_COLOR` set (to a
    /// non-empty value) turns them off; `CLICOLOR_FORCE` set (not to `0`) turns them on, even
    /// when stdout is not a terminal; `TERM=dumb` turns them off; otherwise they are on when
    /// stdout is a terminal.
    pub(crate) fn detect() -> Self {
        Self::detect_with(
            |name| std::env::var_os(name),
            std::io::stdout().is_terminal(),
        )
    }

    /// [`Style::detect`] with the environment read through `var` and whether stdout is a
    /// terminal given.
    fn detect_with(var: impl Fn(&str) -> Option<OsString>, terminal: bool) -> Self {
        let var = |name: &str| var(name).filter(|value| !value.is_empty());
        let no_color = var("NO_COLOR").is_some();
        let forced = var("CLICOLOR_FORCE").is_some_and(|value| value != "0");
        let dumb = var("TERM").is_some_and(|term| term == "dumb");
        Self::new(!no_color && (forced || (!dumb && terminal)))
    }

    /// Colours on or off.
    pub(crate) fn new(color: bool) -> Self {
        Self { color }
    }

    /// Whether colours (and, with them, spinners) are on.
    pub(crate) fn enabled(self) -> bool {
        self.color
    }

    /// `text` in the SGR attributes `codes` (`1`, `1;4`, `38;2;r;g;b`…), when colours are
    /// on; `text` itself when they are off or `codes` is empty.
    pub(crate) fn sgr(self, codes: &str, text: &str) -> String {
        if self.color && !codes.is_empty() {
            format!("\x1b[{codes}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Bold.
    pub(crate) fn bold(self, text: &str) -> String {
        self.sgr("1", text)
    }

    /// Dimmed, for what matters less.
    pub(crate) fn dim(self, text: &str) -> String {
        self.sgr("2", text)
    }

    /// Red: errors and removed lines.
    pub(crate) fn red(self, text: &str) -> String {
        self.sgr("31", text)
    }

    /// Green: success and added lines.
    pub(crate) fn green(self, text: &str) -> String {
        self.sgr("32", text)
    }

    /// Yellow: warnings.
    pub(crate) fn yellow(self, text: &str) -> String {
        self.sgr("33", text)
    }

    /// Cyan: hunk headers.
    pub(crate) fn cyan(self, text: &str) -> String {
        self.sgr("36", text)
    }
}

pub(crate) use keel_host::render::printable;

/// The terminal's width in columns: stdout's, else 80.
pub(crate) fn width() -> usize {
    terminal_size::terminal_size_of(std::io::stdout())
        .map(|(terminal_size::Width(columns), _)| usize::from(columns))
        .filter(|&columns| columns > 0)
        .unwrap_or(FALLBACK_WIDTH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_ansi_codes_or_nothing() {
        assert_eq!(Style::new(true).red("x"), "\x1b[31mx\x1b[0m");
        assert_eq!(Style::new(true).sgr("1;3", "x"), "\x1b[1;3mx\x1b[0m");
        assert_eq!(Style::new(true).sgr("", "x"), "x");
        assert_eq!(Style::new(false).red("x"), "x");
        assert_eq!(Style::new(false).bold("x"), "x");
    }

    #[test]
    fn the_colour_conventions_are_followed() {
        let detect = |vars: &[(&str, &str)], terminal: bool| {
            let vars: Vec<(String, OsString)> = vars
                .iter()
                .map(|(name, value)| ((*name).to_owned(), OsString::from(value)))
                .collect();
            let lookup = |name: &str| {
                vars.iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, value)| value.clone())
            };
            Style::detect_with(lookup, terminal).enabled()
        };
        assert!(detect(&[("TERM", "xterm")], true));
        assert!(!detect(&[("TERM", "xterm")], false), "not a terminal");
        assert!(!detect(&[("TERM", "dumb")], true), "a dumb terminal");
        assert!(!detect(&[("NO_COLOR", "1")], true));
        assert!(
            detect(&[("NO_COLOR", "")], true),
            "an empty NO_COLOR does not count"
        );
        assert!(
            detect(&[("CLICOLOR_FORCE", "1")], false),
            "forced without a terminal"
        );
        assert!(detect(&[("CLICOLOR_FORCE", "1"), ("TERM", "dumb")], false));
        assert!(!detect(&[("CLICOLOR_FORCE", "0")], false));
        assert!(
            !detect(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")], true),
            "NO_COLOR wins"
        );
    }

    #[test]
    fn control_characters_are_not_printed() {
        assert_eq!(printable("a\x1b[2Jb\r\n\tc"), "a\u{FFFD}[2Jb\n\tc");
    }
}
