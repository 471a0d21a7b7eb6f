//! The renderer's output, and the same output however the answer is cut into deltas.

use super::*;

/// A document with every kind of block.
const DOCUMENT: &str = "# Title\n\nSome **bold** and *italic* text with `code` and a \
[link](https://example.com). This sentence is long enough that it has to wrap on the \
terminal, and **this strong part crosses the wrap point of the row** before it ends.\n\n\
- one\n- two\n  - nested\n1. first\n2. second\n\n> quoted *words*\n\n\
```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\n\
| name | count |\n|------|------:|\n| alpha | 1 |\n| beta | 22 |\n\n---\nlast line";

/// `deltas` through one stream, then its end.
fn render(style: Style, width: usize, deltas: &[&str]) -> String {
    let mut stream = MarkdownStream::new(style, width);
    let mut out: String = deltas.iter().map(|delta| stream.push(delta)).collect();
    out.push_str(&stream.finish());
    out
}

/// The character boundaries of `text`.
fn boundaries(text: &str) -> Vec<usize> {
    (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect()
}

#[test]
fn the_blocks_are_drawn() {
    let out = render(Style::new(false), 40, &[DOCUMENT]);
    insta::assert_snapshot!(out, @r#"
    Title

    Some bold and italic text with code and
    a link (https://example.com). This
    sentence is long enough that it has to
    wrap on the terminal, and this strong
    part crosses the wrap point of the row
    before it ends.

    • one
    • two
      ◦ nested
    1. first
    2. second

    │ quoted words

    ```rust
    fn main() {
        println!("hi");
    }
    ```

    name  │ count
    ──────┼──────
    alpha │     1
    beta  │    22

    ────────────────────────────────────────
    last line
    "#);
}

#[test]
fn colours_mark_headings_strong_text_and_code() {
    let out = render(Style::new(true), 80, &[DOCUMENT]);
    assert!(out.contains("\x1b[1;4mTitle\x1b[0m"), "{out:?}");
    assert!(out.contains("\x1b[1mbold\x1b[0m"), "{out:?}");
    assert!(out.contains("\x1b[36mcode\x1b[0m"), "{out:?}");
    assert!(
        out.contains("\x1b[38;2;"),
        "the code block is highlighted: {out:?}"
    );
    assert!(
        !out.contains("```"),
        "fences are not drawn with colours: {out:?}"
    );
}

#[test]
fn any_single_cut_gives_the_same_lines() {
    for style in [Style::new(false), Style::new(true)] {
        let whole = render(style, 40, &[DOCUMENT]);
        for cut in boundaries(DOCUMENT) {
            let (a, b) = DOCUMENT.split_at(cut);
            assert_eq!(render(style, 40, &[a, b]), whole, "cut at {cut}: {a:?}");
        }
    }
}

#[test]
fn character_by_character_gives_the_same_lines() {
    let whole = render(Style::new(true), 40, &[DOCUMENT]);
    let points = boundaries(DOCUMENT);
    let deltas: Vec<&str> = points
        .windows(2)
        .map(|pair| &DOCUMENT[pair[0]..pair[1]])
        .collect();
    assert_eq!(render(Style::new(true), 40, &deltas), whole);
}

#[test]
fn cuts_inside_strong_a_fence_and_a_table_row_change_nothing() {
    let whole = render(Style::new(true), 40, &[DOCUMENT]);
    for needle in ["**bo", "``", "| alp", "crosses the wr"] {
        let cut = DOCUMENT.find(needle).unwrap() + needle.len() - 1;
        let (a, b) = DOCUMENT.split_at(cut);
        assert_eq!(render(Style::new(true), 40, &[a, b]), whole, "{needle}");
    }
}

#[test]
fn a_long_line_is_printed_before_its_newline() {
    let mut stream = MarkdownStream::new(Style::new(false), 40);
    let words = "word ".repeat(40);
    let early = stream.push(&words);
    assert!(early.lines().count() >= 3, "{early:?}");
    let rest = stream.push("end\n");
    let all = format!("{early}{rest}{}", stream.finish());
    assert_eq!(
        all,
        render(Style::new(false), 40, &[&format!("{words}end\n")])
    );
    assert!(all.lines().all(|line| line.chars().count() <= 40));
}

#[test]
fn an_unclosed_delimiter_holds_the_line() {
    let mut stream = MarkdownStream::new(Style::new(true), 40);
    let early = stream.push(&format!("**{}", "word ".repeat(40)));
    assert_eq!(early, "", "the ** may still close: nothing drawn yet");
    let out = format!("{}{}", stream.push("end**\n"), stream.finish());
    assert!(out.starts_with("\x1b[1mword"), "{out:?}");
    assert!(!out.contains("**"), "{out:?}");
}

#[test]
fn escapes_from_the_model_are_inert() {
    for style in [Style::new(false), Style::new(true)] {
        let out = render(
            style,
            80,
            &["a \x1b[2J b &#27;[31m c\n```sh\n\x1b]0;title\x07\n```\n| \x1b[1m | x |\n"],
        );
        let escapes = out.matches('\x1b').count();
        let ours = out.matches("\x1b[").count();
        assert_eq!(escapes, ours, "{out:?}");
        assert!(
            !out.contains("\x1b[2J") && !out.contains("\x1b[31m"),
            "{out:?}"
        );
        assert!(!out.contains("\x1b]"), "{out:?}");
    }
}

#[test]
fn nothing_is_left_at_the_end() {
    assert_eq!(
        render(Style::new(false), 80, &["tail without newline"]),
        "tail without newline\n"
    );
    assert_eq!(render(Style::new(false), 80, &["```\ncode"]), "```\ncode\n");
    assert_eq!(
        render(Style::new(false), 80, &["| a |\n|---|\n| b |"]),
        "a\n─\nb\n"
    );
    assert_eq!(render(Style::new(false), 80, &["\n\n\n"]), "");
}
