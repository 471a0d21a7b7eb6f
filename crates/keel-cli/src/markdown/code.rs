//! Code blocks' lines, highlighted with syntect's bundled syntaxes and theme. The syntaxes and
//! themes are loaded the first time a code block in a known language is drawn with colours
//! on, never before (start-up stays free of them).

use std::sync::OnceLock;

use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::SyntaxSet;

use crate::terminal::Style;

/// The theme code is painted with (one of syntect's bundled ones; dark backgrounds).
const THEME: &str = "base16-ocean.dark";

/// The bundled syntaxes, loaded once.
fn syntaxes() -> &'static SyntaxSet {
    static SYNTAXES: OnceLock<SyntaxSet> = OnceLock::new();
    SYNTAXES.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// The theme, loaded once (`None` if it is not bundled).
fn theme() -> Option<&'static Theme> {
    static THEMES: OnceLock<ThemeSet> = OnceLock::new();
    THEMES
        .get_or_init(ThemeSet::load_defaults)
        .themes
        .get(THEME)
}

/// One code block being drawn: its highlighter (which carries the parse state from line to
/// line), or none when colours are off or the language is not known.
pub(super) struct CodeBlock {
    highlighter: Option<HighlightLines<'static>>,
    style: Style,
}

impl CodeBlock {
    /// A block in language `info` (a fence's first word: `rust`, `py`, `sh`…) drawn with
    /// `style`.
    pub(super) fn new(info: &str, style: Style) -> Self {
        let language = info.split([' ', ',', '{']).next().unwrap_or_default();
        let highlighter = if style.enabled() && !language.is_empty() {
            let syntaxes = syntaxes();
            syntaxes
                .find_syntax_by_token(language)
                .zip(theme())
                .map(|(syntax, theme)| HighlightLines::new(syntax, theme))
        } else {
            None
        };
        Self { highlighter, style }
    }

    /// `line` (printable, without its newline, tabs expanded) painted.
    pub(super) fn line(&mut self, line: &str) -> String {
        let Some(highlighter) = &mut self.highlighter else {
            return line.to_owned();
        };
        let with_newline = format!("{line}\n");
        let Ok(regions) = highlighter.highlight_line(&with_newline, syntaxes()) else {
            // The highlighter is in an unknown state: the rest of the block is plain.
            self.highlighter = None;
            return line.to_owned();
        };
        let mut out = String::with_capacity(line.len() * 2);
        for (region, text) in regions {
            let text = text.trim_end_matches('\n');
            if text.is_empty() {
                continue;
            }
            let colour = region.foreground;
            let codes = format!("38;2;{};{};{}", colour.r, colour.g, colour.b);
            out.push_str(&self.style.sgr(&codes, text));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_languages_are_coloured_and_others_are_plain() {
        let mut rust = CodeBlock::new("rust", Style::new(true));
        let painted = rust.line("fn main() {}");
        assert!(painted.contains("\x1b[38;2;"), "{painted:?}");
        let mut unknown = CodeBlock::new("no-such-language", Style::new(true));
        assert_eq!(unknown.line("fn main() {}"), "fn main() {}");
        let mut off = CodeBlock::new("rust", Style::new(false));
        assert_eq!(off.line("fn main() {}"), "fn main() {}");
    }
}
