//! Tables (GitHub's pipe tables), drawn once their last row has come: columns as wide as
//! their widest cell, narrowed (cells wrapped) to fit the terminal.

use pulldown_cmark::{Alignment, Event, Options, Parser, Tag, TagEnd};

use super::inline::{Attrs, Row, Span, paint, row_width, spans, wrap};
use crate::terminal::Style;

/// Between two columns.
const SEPARATOR: &str = " │ ";
/// The narrowest a column is made.
const MIN_COLUMN: usize = 3;

/// A parsed table: the header's cells, the body rows' cells (Markdown source of each cell),
/// and each column's alignment.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    alignments: Vec<Alignment>,
}

/// The table the lines `source` hold, drawn in `width` columns; `None` when they are not a
/// table (no delimiter row) or it cannot be drawn that narrow.
pub(super) fn render(source: &str, width: usize, style: Style) -> Option<Vec<String>> {
    let table = parse(source)?;
    let columns = table.alignments.len().max(table.header.len());
    if columns == 0 {
        return None;
    }
    let cell_spans = |cell: &str, header: bool| {
        spans(
            cell,
            Attrs {
                bold: header,
                ..Attrs::default()
            },
        )
        .0
    };
    let header: Vec<Vec<Span>> = table.header.iter().map(|c| cell_spans(c, true)).collect();
    let body: Vec<Vec<Vec<Span>>> = table
        .rows
        .iter()
        .map(|row| row.iter().map(|c| cell_spans(c, false)).collect())
        .collect();
    let mut widths = vec![0usize; columns];
    for row in std::iter::once(&header).chain(body.iter()) {
        for (index, cell) in row.iter().enumerate().take(columns) {
            widths[index] = widths[index].max(row_width(cell));
        }
    }
    fit(&mut widths, width)?;
    let mut lines = Vec::new();
    lines.extend(draw_row(&header, &widths, &table.alignments, style));
    let rule: Vec<String> = widths.iter().map(|&w| "─".repeat(w)).collect();
    lines.push(style.dim(&rule.join("─┼─")));
    for row in &body {
        lines.extend(draw_row(row, &widths, &table.alignments, style));
    }
    Some(lines)
}

/// Narrows the widest columns until they and the separators between them fit in `room`
/// columns; `None` when even the narrowest do not.
fn fit(widths: &mut [usize], room: usize) -> Option<()> {
    let separators = SEPARATOR.chars().count() * widths.len().saturating_sub(1);
    let room = room.checked_sub(separators)?;
    if widths.len() * MIN_COLUMN > room {
        return None;
    }
    for width in widths.iter_mut() {
        *width = (*width).max(1);
    }
    while widths.iter().sum::<usize>() > room {
        let widest = widths.iter_mut().max()?;
        if *widest <= MIN_COLUMN {
            return None;
        }
        *widest -= 1;
    }
    Some(())
}

/// One row's cells wrapped in their columns, side by side, on as many lines as the tallest.
fn draw_row(
    cells: &[Vec<Span>],
    widths: &[usize],
    alignments: &[Alignment],
    style: Style,
) -> Vec<String> {
    let wrapped: Vec<Vec<Row>> = widths
        .iter()
        .enumerate()
        .map(|(index, &width)| {
            cells
                .get(index)
                .map(|cell| wrap(cell, width))
                .unwrap_or_default()
        })
        .collect();
    let height = wrapped.iter().map(Vec::len).max().unwrap_or(0).max(1);
    (0..height)
        .map(|line| {
            let parts: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(index, &width)| {
                    let row = wrapped[index].get(line).map(Vec::as_slice).unwrap_or(&[]);
                    let gap = width.saturating_sub(row_width(row));
                    let (left, right) = match alignments.get(index) {
                        Some(Alignment::Right) => (gap, 0),
                        Some(Alignment::Center) => (gap / 2, gap - gap / 2),
                        _ => (0, gap),
                    };
                    format!(
                        "{}{}{}",
                        " ".repeat(left),
                        paint(style, row),
                        " ".repeat(right)
                    )
                })
                .collect();
            parts.join(&style.dim(SEPARATOR)).trim_end().to_owned()
        })
        .collect()
}

/// The cells of the table in `source`, as Markdown source.
fn parse(source: &str) -> Option<Table> {
    let mut table: Option<Table> = None;
    let mut row: Vec<String> = Vec::new();
    let mut in_header = false;
    let mut cell: Option<std::ops::Range<usize>> = None;
    for (event, range) in Parser::new_ext(source, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::Table(alignments)) => {
                table = Some(Table {
                    header: Vec::new(),
                    rows: Vec::new(),
                    alignments,
                });
            }
            Event::Start(Tag::TableHead) => in_header = true,
            Event::Start(Tag::TableCell) => cell = Some(range),
            Event::End(TagEnd::TableCell) => {
                let text = cell
                    .take()
                    .and_then(|range| source.get(range))
                    .unwrap_or_default();
                let text = text.trim().trim_start_matches('|').trim_end_matches('|');
                row.push(text.trim().to_owned());
            }
            Event::End(TagEnd::TableHead) => {
                in_header = false;
                if let Some(table) = &mut table {
                    table.header = std::mem::take(&mut row);
                }
            }
            Event::End(TagEnd::TableRow) => {
                if let Some(table) = &mut table
                    && !in_header
                {
                    table.rows.push(std::mem::take(&mut row));
                }
            }
            _ => {}
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let lines = render(
            "| name | n |\n|---|--:|\n| alpha | 1 |\n| b | 22 |\n",
            80,
            Style::new(false),
        )
        .unwrap();
        assert_eq!(
            lines,
            ["name  │  n", "──────┼───", "alpha │  1", "b     │ 22"]
        );
    }

    #[test]
    fn wide_tables_wrap_their_cells() {
        let lines = render(
            "| a | b |\n|---|---|\n| one two three four | x |\n",
            14,
            Style::new(false),
        )
        .unwrap();
        assert!(lines.iter().all(|l| l.chars().count() <= 14), "{lines:?}");
        assert!(lines.len() > 3, "{lines:?}");
    }

    #[test]
    fn lines_without_a_delimiter_row_are_not_a_table() {
        assert!(render("| a | b |\n| c | d |\n", 80, Style::new(false)).is_none());
    }
}
