//! The model's Markdown answer drawn for a terminal as it streams in: headings, emphasis,
//! inline code, lists, block quotes, rules, links (text, then the address dimmed), tables, and
//! code blocks highlighted by language, all wrapped on words to the terminal's width.
//!
//! [`MarkdownStream`] takes the answer's deltas as they come and returns what can be printed
//! now, as whole lines: a source line is drawn when its newline arrives, and the rows of a
//! long paragraph line earlier, as soon as a following row shows where they wrap (and nothing
//! left unmatched, like an opening `**`, could still change them); a code block's line when its
//! newline arrives; a table when its last row has come (the columns' widths need every row).
//! Nothing is printed twice: only the open line is kept and parsed again, so the work grows
//! with the answer's length, not its square. [`MarkdownStream::finish`] draws what is left at
//! the end of the turn, before a tool call, or on cancellation.
//!
//! Every line is drawn on its own: a paragraph the model broke over several source lines keeps
//! its breaks, and emphasis does not span lines. Model text is made [`printable`] on the way
//! in, and again after the parser decoded entities.
//!
//! Self-contained apart from [`crate::terminal`], so its benchmark includes it with `#[path]`.

mod code;
mod inline;
mod table;

use self::code::CodeBlock;
use self::inline::{Attrs, paint, spans, text_width, wrap};
use crate::terminal::{Style, printable};

/// The fewest columns a wrapped line's text is given, however deep its indentation.
const MIN_TEXT_WIDTH: usize = 20;
/// Columns a tab stands for in a code block.
const TAB: &str = "    ";

/// A streamed Markdown answer, drawn line by line.
pub(crate) struct MarkdownStream {
    style: Style,
    width: usize,
    /// The source line not yet ended by its newline.
    partial: String,
    /// How many rows of `partial` are printed already.
    shown_rows: usize,
    /// `partial`'s length when it was last drawn to see whether rows could be printed.
    checked_len: usize,
    /// The open block.
    block: Block,
    /// A blank line is owed before the next line printed.
    blank_pending: bool,
    /// Whether any line was printed.
    printed: bool,
}

/// The block the next source line continues.
enum Block {
    /// None in particular: each line is drawn by what it starts with.
    Lines,
    /// A fenced code block.
    Code {
        /// Its highlighter (boxed: it is large, and most lines are not code).
        block: Box<CodeBlock>,
        /// The fence's character (`` ` `` or `~`) and length, which its closing fence matches.
        fence: char,
        fence_len: usize,
        /// The fence's indentation, taken off each line.
        indent: usize,
    },
    /// A table's source lines so far.
    Table(String),
}

/// What a source line is, by how it starts.
enum Kind<'a> {
    /// Nothing but spaces.
    Blank,
    /// A code fence that opens a block.
    Fence {
        fence: char,
        fence_len: usize,
        indent: usize,
        info: &'a str,
    },
    /// A row of a pipe table.
    TableRow,
    /// A thematic break.
    Rule,
    /// Text that is wrapped: a paragraph, a heading, a list item, a quote.
    Flow(Flow<'a>),
}

/// A line of wrapped text: its prefixes (painted), its inline Markdown and how it is drawn.
struct Flow<'a> {
    /// Before the first row: a bullet, a number, a quote's bar.
    first: String,
    /// Before the following rows: as wide as `first`.
    rest: String,
    /// The prefixes' width in columns.
    prefix_width: usize,
    /// The inline Markdown.
    text: &'a str,
    /// Attributes of the whole line (a heading's).
    base: Attrs,
    /// Whether a blank line goes before it (a heading).
    blank_before: bool,
}

impl MarkdownStream {
    /// A stream drawing with `style` in `width` columns.
    pub(crate) fn new(style: Style, width: usize) -> Self {
        Self {
            style,
            width: width.max(MIN_TEXT_WIDTH),
            partial: String::new(),
            shown_rows: 0,
            checked_len: 0,
            block: Block::Lines,
            blank_pending: false,
            printed: false,
        }
    }

    /// Takes the next delta of the answer; returns the lines that can be printed now (each
    /// ending with a newline; empty when none can).
    pub(crate) fn push(&mut self, delta: &str) -> String {
        let delta = printable(delta);
        let mut out = String::new();
        let mut rest = delta.as_str();
        while let Some(newline) = rest.find('\n') {
            self.partial.push_str(&rest[..newline]);
            let line = std::mem::take(&mut self.partial);
            self.complete_line(&line, &mut out);
            self.shown_rows = 0;
            self.checked_len = 0;
            rest = &rest[newline + 1..];
        }
        self.partial.push_str(rest);
        self.print_settled_rows(&mut out);
        out
    }

    /// The answer ended (or is interrupted): returns the lines left to print, and readies the
    /// stream for a new answer.
    pub(crate) fn finish(&mut self) -> String {
        let mut out = String::new();
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.complete_line(&line, &mut out);
        }
        if let Block::Table(source) = std::mem::replace(&mut self.block, Block::Lines) {
            self.draw_table(&source, &mut out);
        }
        self.shown_rows = 0;
        self.checked_len = 0;
        self.blank_pending = false;
        self.printed = false;
        out
    }

    /// Prints `line` (without its newline), after the blank line owed, if any.
    fn emit(&mut self, line: &str, out: &mut String) {
        if self.blank_pending {
            out.push('\n');
            self.blank_pending = false;
        }
        out.push_str(line);
        out.push('\n');
        self.printed = true;
    }

    /// Draws a source line its newline ended.
    fn complete_line(&mut self, line: &str, out: &mut String) {
        match &mut self.block {
            Block::Code {
                block,
                fence,
                fence_len,
                indent,
            } => {
                if closes_fence(line, *fence, *fence_len) {
                    self.block = Block::Lines;
                    if !self.style.enabled() {
                        self.emit(line, out);
                    }
                } else {
                    let drawn = block.line(&code_line(line, *indent));
                    self.emit(&drawn, out);
                }
                return;
            }
            Block::Table(source) => {
                if is_table_row(line) {
                    source.push_str(line);
                    source.push('\n');
                    return;
                }
                let source = std::mem::take(source);
                self.block = Block::Lines;
                self.draw_table(&source, out);
            }
            Block::Lines => {}
        }
        match classify(line, self.style) {
            Kind::Blank => {
                if self.printed {
                    self.blank_pending = true;
                }
            }
            Kind::Fence {
                fence,
                fence_len,
                indent,
                info,
            } => {
                self.block = Block::Code {
                    block: Box::new(CodeBlock::new(info, self.style)),
                    fence,
                    fence_len,
                    indent,
                };
                if !self.style.enabled() {
                    self.emit(line, out);
                }
            }
            Kind::TableRow => self.block = Block::Table(format!("{line}\n")),
            Kind::Rule => {
                let rule = self.style.dim(&"─".repeat(self.width));
                self.emit(&rule, out);
            }
            Kind::Flow(flow) => {
                let (rows, _) = self.flow_rows(&flow);
                self.emit_rows(&flow, &rows, rows.len(), out);
            }
        }
    }

    /// Prints the rows of the open line that are settled: all but the last, when nothing in
    /// the line could change them. The line is drawn again only once it has grown by half a
    /// row or an eighth of itself, so a huge line costs a few times its length in all.
    fn print_settled_rows(&mut self, out: &mut String) {
        if !matches!(self.block, Block::Lines) || self.partial.is_empty() {
            return;
        }
        let len = self.partial.len();
        if len < self.checked_len + (self.width / 2).max(len / 8) {
            return;
        }
        self.checked_len = len;
        let partial = std::mem::take(&mut self.partial);
        if let Kind::Flow(flow) = classify(&partial, self.style) {
            let (rows, settled) = self.flow_rows(&flow);
            if settled && rows.len() > self.shown_rows + 1 {
                self.emit_rows(&flow, &rows, rows.len() - 1, out);
            }
        }
        self.partial = partial;
    }

    /// Prints `rows[shown_rows..upto]` of `flow`, and remembers they are printed.
    fn emit_rows(&mut self, flow: &Flow<'_>, rows: &[String], upto: usize, out: &mut String) {
        if self.shown_rows == 0 && flow.blank_before && self.printed {
            self.blank_pending = true;
        }
        for row in rows.get(self.shown_rows..upto).unwrap_or_default() {
            self.emit(row, out);
        }
        self.shown_rows = upto;
    }

    /// `flow`'s rows, painted with their prefixes; and whether they are settled (see
    /// [`inline::spans`]).
    fn flow_rows(&self, flow: &Flow<'_>) -> (Vec<String>, bool) {
        let (spans, settled) = spans(flow.text, flow.base);
        let width = self
            .width
            .saturating_sub(flow.prefix_width)
            .max(MIN_TEXT_WIDTH);
        let rows = wrap(&spans, width);
        if rows.is_empty() {
            return (vec![flow.first.trim_end().to_owned()], settled);
        }
        let rows = rows
            .iter()
            .enumerate()
            .map(|(index, row)| {
                let prefix = if index == 0 { &flow.first } else { &flow.rest };
                format!("{prefix}{}", paint(self.style, row))
            })
            .collect();
        (rows, settled)
    }

    /// Prints the table in `source`, or its lines as text when it is not one.
    fn draw_table(&mut self, source: &str, out: &mut String) {
        match table::render(source, self.width, self.style) {
            Some(lines) => {
                for line in lines {
                    self.emit(&line, out);
                }
            }
            None => {
                for line in source.lines() {
                    let flow = paragraph(line.trim());
                    let (rows, _) = self.flow_rows(&flow);
                    self.shown_rows = 0;
                    self.emit_rows(&flow, &rows, rows.len(), out);
                }
                self.shown_rows = 0;
            }
        }
    }
}

/// A plain paragraph line.
fn paragraph(text: &str) -> Flow<'_> {
    Flow {
        first: String::new(),
        rest: String::new(),
        prefix_width: 0,
        text,
        base: Attrs::default(),
        blank_before: false,
    }
}

/// Leading spaces of `line` in columns (a tab counts 4), and the rest.
fn indentation(line: &str) -> (usize, &str) {
    let rest = line.trim_start_matches([' ', '\t']);
    let columns = line[..line.len() - rest.len()]
        .chars()
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum();
    (columns, rest)
}

/// What `line` is, by how it starts.
fn classify(line: &str, style: Style) -> Kind<'_> {
    let (indent, text) = indentation(line);
    if text.is_empty() {
        return Kind::Blank;
    }
    if let Some(fence) = opens_fence(text) {
        return Kind::Fence {
            fence: fence.0,
            fence_len: fence.1,
            indent,
            info: text[fence.1..].trim(),
        };
    }
    if text.starts_with('|') {
        return Kind::TableRow;
    }
    if indent < 4 && is_rule(text) {
        return Kind::Rule;
    }
    Kind::Flow(flow(indent, text, style))
}

/// A line of text after its indentation: a heading, a quote, a list item, or a paragraph.
fn flow(indent: usize, text: &str, style: Style) -> Flow<'_> {
    if let Some((level, heading)) = heading(text) {
        return Flow {
            text: heading,
            base: Attrs {
                bold: true,
                underline: level == 1,
                italic: level >= 3,
                ..Attrs::default()
            },
            blank_before: true,
            ..paragraph("")
        };
    }
    if let Some(quoted) = text.strip_prefix('>') {
        let quoted = quoted.strip_prefix(' ').unwrap_or(quoted);
        let (inner_indent, inner_text) = indentation(quoted);
        let inner = if inner_text.is_empty() {
            paragraph("")
        } else {
            flow(inner_indent, inner_text, style)
        };
        let bar = style.dim("│ ");
        return Flow {
            first: format!("{bar}{}", inner.first),
            rest: format!("{bar}{}", inner.rest),
            prefix_width: inner.prefix_width + 2,
            ..inner
        };
    }
    let pad = " ".repeat(indent.min(MIN_TEXT_WIDTH));
    if let Some((marker, item)) = list_marker(text) {
        let marker = match marker {
            "-" | "*" | "+" => match indent {
                0 | 1 => "•",
                2..=4 => "◦",
                _ => "▪",
            },
            number => number,
        };
        let first = format!("{pad}{marker} ");
        let prefix_width = text_width(&first);
        return Flow {
            rest: " ".repeat(prefix_width),
            first,
            prefix_width,
            ..paragraph(item)
        };
    }
    Flow {
        prefix_width: pad.len(),
        first: pad.clone(),
        rest: pad,
        ..paragraph(text)
    }
}

/// A heading's level and text (`## Title ##` → 2, `Title`).
fn heading(text: &str) -> Option<(usize, &str)> {
    let level = text.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &text[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim();
    let closed = rest.trim_end_matches('#');
    let rest = if closed.is_empty() || closed.ends_with(' ') {
        closed.trim_end()
    } else {
        rest
    };
    Some((level, rest))
}

/// A list item's marker (`-`, `*`, `+`, `3.`, `3)`) and its text.
fn list_marker(text: &str) -> Option<(&str, &str)> {
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    let marker_len = if digits > 0 {
        if digits > 9 || !text[digits..].starts_with(['.', ')']) {
            return None;
        }
        digits + 1
    } else if text.starts_with(['-', '*', '+']) {
        1
    } else {
        return None;
    };
    let rest = &text[marker_len..];
    if rest.is_empty() {
        return Some((&text[..marker_len], ""));
    }
    rest.starts_with([' ', '\t'])
        .then(|| (&text[..marker_len], rest.trim_start()))
}

/// Whether `text` is a thematic break: three or more `-`, `*` or `_`, spaces between allowed.
fn is_rule(text: &str) -> bool {
    let Some(first) = text.chars().next() else {
        return false;
    };
    matches!(first, '-' | '*' | '_')
        && text.chars().all(|c| c == first || c == ' ' || c == '\t')
        && text.chars().filter(|&c| c == first).count() >= 3
}

/// The fence `text` opens, if it is one: its character and length.
fn opens_fence(text: &str) -> Option<(char, usize)> {
    let fence = text.chars().next().filter(|&c| c == '`' || c == '~')?;
    let len = text.chars().take_while(|&c| c == fence).count();
    if len < 3 || (fence == '`' && text[len..].contains('`')) {
        return None;
    }
    Some((fence, len))
}

/// Whether `line` closes a block opened by `len` times `fence`.
fn closes_fence(line: &str, fence: char, len: usize) -> bool {
    let text = line.trim();
    text.len() >= len && text.chars().all(|c| c == fence)
}

/// Whether `line` goes on a table.
fn is_table_row(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

/// A code block's line: the fence's indentation taken off, tabs expanded.
fn code_line(line: &str, indent: usize) -> String {
    let (spaces, text) = indentation(line);
    let kept = " ".repeat(spaces.saturating_sub(indent));
    format!("{kept}{text}").replace('\t', TAB)
}

#[cfg(test)]
mod tests;
