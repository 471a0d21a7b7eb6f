//! Inline Markdown (emphasis, strong, inline code, strikethrough, links) as styled spans, and
//! spans laid out in rows of a given width, wrapped on words and painted.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use unicode_width::UnicodeWidthChar;

use crate::terminal::Style;

/// How a run of text is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Attrs {
    /// Strong, or a heading.
    pub(super) bold: bool,
    /// Emphasis.
    pub(super) italic: bool,
    /// A first-level heading, or a link's text.
    pub(super) underline: bool,
    /// Strikethrough.
    pub(super) strike: bool,
    /// Inline code.
    pub(super) code: bool,
    /// What matters less: a link's address, a quote's bar, a rule.
    pub(super) dim: bool,
}

impl Attrs {
    /// The SGR codes that draw these attributes (empty for plain text).
    fn codes(self) -> String {
        let mut codes: Vec<&str> = Vec::new();
        if self.bold {
            codes.push("1");
        }
        if self.dim {
            codes.push("2");
        }
        if self.italic {
            codes.push("3");
        }
        if self.underline {
            codes.push("4");
        }
        if self.strike {
            codes.push("9");
        }
        if self.code {
            codes.push("36");
        }
        codes.join(";")
    }
}

/// Text drawn one way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Span {
    /// The text: no control characters other than tabs.
    pub(super) text: String,
    /// How it is drawn.
    pub(super) attrs: Attrs,
}

/// One line's inline Markdown as spans, each with `base` added to its attributes; and whether
/// the spans are settled: no `*`, `_`, `` ` ``, `~` or `[` was left unmatched, which text still
/// to come could turn into a delimiter (then what is drawn now may change).
pub(super) fn spans(text: &str, base: Attrs) -> (Vec<Span>, bool) {
    let mut out: Vec<Span> = Vec::new();
    let mut settled = true;
    let mut stack: Vec<Attrs> = vec![base];
    let mut links: Vec<String> = Vec::new();
    let push = |out: &mut Vec<Span>, text: &str, attrs: Attrs| {
        // Entities (`&#27;`) decode to any character: made inert again.
        let text = crate::terminal::printable(text).replace('\n', " ");
        match out.last_mut() {
            Some(last) if last.attrs == attrs => last.text.push_str(&text),
            _ => out.push(Span { text, attrs }),
        }
    };
    for event in Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH) {
        let attrs = stack.last().copied().unwrap_or(base);
        match event {
            Event::Text(text) => {
                if !attrs.code && has_open_delimiter(&text) {
                    settled = false;
                }
                push(&mut out, &text, attrs);
            }
            Event::Code(code) => push(
                &mut out,
                &code,
                Attrs {
                    code: true,
                    ..attrs
                },
            ),
            Event::Html(html) | Event::InlineHtml(html) => push(&mut out, &html, attrs),
            Event::InlineMath(math) | Event::DisplayMath(math) => push(&mut out, &math, attrs),
            Event::SoftBreak | Event::HardBreak => push(&mut out, " ", attrs),
            Event::FootnoteReference(name) => push(&mut out, &format!("[^{name}]"), attrs),
            Event::TaskListMarker(done) => push(&mut out, if done { "☑ " } else { "☐ " }, attrs),
            Event::Start(tag) => {
                let next = match tag {
                    Tag::Emphasis => Attrs {
                        italic: true,
                        ..attrs
                    },
                    Tag::Strong => Attrs {
                        bold: true,
                        ..attrs
                    },
                    Tag::Strikethrough => Attrs {
                        strike: true,
                        ..attrs
                    },
                    Tag::Link { dest_url, .. } => {
                        links.push(dest_url.into_string());
                        Attrs {
                            underline: true,
                            ..attrs
                        }
                    }
                    Tag::Image { dest_url, .. } => {
                        links.push(dest_url.into_string());
                        attrs
                    }
                    _ => attrs,
                };
                stack.push(next);
            }
            Event::End(end) => {
                stack.pop();
                if matches!(end, TagEnd::Link | TagEnd::Image)
                    && let Some(url) = links.pop()
                {
                    let shown = out.last().map(|span| span.text.as_str()).unwrap_or("");
                    if !url.is_empty() && shown != url && !url.starts_with('#') {
                        let outer = stack.last().copied().unwrap_or(base);
                        push(&mut out, " ", outer);
                        push(&mut out, &format!("({url})"), Attrs { dim: true, ..outer });
                    }
                }
            }
            Event::Rule => push(&mut out, "───", attrs),
        }
    }
    (out, settled)
}

/// Whether `text` (left literal by the parser) holds a character that more text could make a
/// delimiter: `*`, `~`, `` ` ``, `[`, or a `_` that may open (not inside a word).
fn has_open_delimiter(text: &str) -> bool {
    let mut previous: Option<char> = None;
    for c in text.chars() {
        let opens = match c {
            '*' | '~' | '`' | '[' => true,
            '_' => !previous.is_some_and(char::is_alphanumeric),
            _ => false,
        };
        if opens {
            return true;
        }
        previous = Some(c);
    }
    false
}

/// The width of `text` in terminal columns.
pub(super) fn text_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

/// The width of `c` in terminal columns (a tab counts as the spaces it is drawn as).
fn char_width(c: char) -> usize {
    c.width().unwrap_or(0)
}

/// A row of spans.
pub(super) type Row = Vec<Span>;

/// `spans` in rows of at most `width` columns, broken between words (a word wider than a row
/// is broken where the row ends). Runs of spaces become one space; no row starts or ends with
/// one.
pub(super) fn wrap(spans: &[Span], width: usize) -> Vec<Row> {
    let width = width.max(1);
    let mut rows: Vec<Row> = Vec::new();
    let mut row = Layout::default();
    // The word being gathered, its width, and the space before it (kept with its attributes).
    let mut word: Row = Vec::new();
    let mut word_width = 0;
    let mut space: Option<Attrs> = None;
    for span in spans {
        for c in span.text.chars() {
            let c = if c == '\t' { ' ' } else { c };
            if c == ' ' {
                if !word.is_empty() {
                    row.place(
                        &mut rows,
                        std::mem::take(&mut word),
                        word_width,
                        space,
                        width,
                    );
                    word_width = 0;
                }
                space = Some(span.attrs);
                continue;
            }
            let c_width = char_width(c);
            push_char(&mut word, c, span.attrs);
            word_width += c_width;
        }
    }
    if !word.is_empty() {
        row.place(&mut rows, word, word_width, space, width);
    }
    if !row.spans.is_empty() {
        rows.push(row.spans);
    }
    rows
}

/// Adds `c`, drawn with `attrs`, to the end of `row`.
fn push_char(row: &mut Row, c: char, attrs: Attrs) {
    match row.last_mut() {
        Some(last) if last.attrs == attrs => last.text.push(c),
        _ => row.push(Span {
            text: c.to_string(),
            attrs,
        }),
    }
}

/// The row being filled.
#[derive(Default)]
struct Layout {
    spans: Row,
    width: usize,
}

impl Layout {
    /// Places `word` (`word_width` columns, after a space drawn with `space` unless it starts
    /// the row) on this row, or on new rows when it does not fit.
    fn place(
        &mut self,
        rows: &mut Vec<Row>,
        word: Row,
        word_width: usize,
        space: Option<Attrs>,
        width: usize,
    ) {
        if self.width > 0 && self.width + 1 + word_width <= width {
            push_char(&mut self.spans, ' ', space.unwrap_or_default());
            self.width += 1;
            self.append(word, word_width);
            return;
        }
        if self.width > 0 {
            rows.push(std::mem::take(&mut self.spans));
            self.width = 0;
        }
        if word_width <= width {
            self.append(word, word_width);
            return;
        }
        // Wider than a row: broken where each row ends.
        for span in word {
            for c in span.text.chars() {
                let c_width = char_width(c);
                if self.width > 0 && self.width + c_width > width {
                    rows.push(std::mem::take(&mut self.spans));
                    self.width = 0;
                }
                push_char(&mut self.spans, c, span.attrs);
                self.width += c_width;
            }
        }
    }

    /// Appends `word` to the row.
    fn append(&mut self, word: Row, word_width: usize) {
        for span in word {
            match self.spans.last_mut() {
                Some(last) if last.attrs == span.attrs => last.text.push_str(&span.text),
                _ => self.spans.push(span),
            }
        }
        self.width += word_width;
    }
}

/// `row` painted with `style`.
pub(super) fn paint(style: Style, row: &[Span]) -> String {
    row.iter()
        .map(|span| style.sgr(&span.attrs.codes(), &span.text))
        .collect()
}

/// `row`'s width in columns.
pub(super) fn row_width(row: &[Span]) -> usize {
    row.iter().map(|span| text_width(&span.text)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain_rows(text: &str, width: usize) -> Vec<String> {
        let (spans, _) = spans(text, Attrs::default());
        wrap(&spans, width)
            .iter()
            .map(|row| paint(Style::new(false), row))
            .collect()
    }

    #[test]
    fn rows_break_between_words() {
        assert_eq!(
            plain_rows("the quick brown fox jumps", 10),
            ["the quick", "brown fox", "jumps"]
        );
        assert_eq!(
            plain_rows("abcdefghijkl xy", 5),
            ["abcde", "fghij", "kl xy"]
        );
        assert_eq!(plain_rows("  a   b  ", 10), ["a b"]);
    }

    #[test]
    fn emphasis_code_and_links_are_styled() {
        let (spans, settled) = spans("a **b** *c* `d` [e](http://f)", Attrs::default());
        assert!(settled);
        let bold = spans.iter().find(|s| s.text == "b").unwrap();
        assert!(bold.attrs.bold);
        assert!(spans.iter().find(|s| s.text == "c").unwrap().attrs.italic);
        assert!(spans.iter().find(|s| s.text == "d").unwrap().attrs.code);
        assert!(
            spans
                .iter()
                .find(|s| s.text == "(http://f)")
                .unwrap()
                .attrs
                .dim
        );
        assert_eq!(
            paint(Style::new(true), &wrap(&spans, 80)[0])
                .matches("\x1b[1m")
                .count(),
            1
        );
    }

    #[test]
    fn an_unmatched_delimiter_is_not_settled() {
        assert!(!spans("a **b", Attrs::default()).1);
        assert!(!spans("see [the", Attrs::default()).1);
        assert!(spans("snake_case words", Attrs::default()).1);
    }

    #[test]
    fn entities_do_not_make_escapes() {
        let (spans, _) = spans("a &#27;[2J b", Attrs::default());
        let text: String = spans.iter().map(|s| s.text.as_str()).collect();
        assert!(!text.contains('\x1b'), "{text:?}");
    }
}
