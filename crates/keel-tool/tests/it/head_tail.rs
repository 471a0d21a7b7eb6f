//! `HeadTail`: everything kept while it fits; past that the head and tail cut between lines,
//! in bounded memory, never inside a character, the same however the stream is split.

use keel_tool::HeadTail;

fn marker(omitted: u64, total: u64) -> String {
    format!("[... {omitted} bytes omitted ({total} in total) ...]")
}

#[test]
fn everything_is_kept_while_it_fits() {
    let mut kept = HeadTail::new(8, 8);
    kept.push(b"hello\n");
    kept.push(b"world\n");
    assert!(!kept.is_cut());
    assert_eq!(kept.render(marker), ("hello\nworld\n".to_owned(), 0));
    assert_eq!(kept.total(), 12);
}

#[test]
fn head_and_tail_fall_on_line_boundaries_in_bounded_memory() {
    const HEAD: usize = 14_000;
    const TAIL: usize = 14_000;
    let mut kept = HeadTail::new(HEAD, TAIL);
    let mut total = 0u64;
    for i in 0..200_000u32 {
        let line = format!("line {i:06}\n");
        total += line.len() as u64;
        kept.push(line.as_bytes());
        assert!(kept.held() <= HEAD + 2 * TAIL, "{} bytes held", kept.held());
    }
    let (text, omitted) = kept.render(marker);
    assert!(
        text.starts_with("line 000000\nline 000001\n"),
        "{}",
        &text[..40]
    );
    assert!(text.ends_with("line 199999\n"));
    assert!(text.contains(&format!("bytes omitted ({total} in total)")));
    assert!(omitted > total - (HEAD + TAIL) as u64);
    assert!(text.len() < HEAD + TAIL + 300);
    // Every kept line is whole, and the marker has a line of its own.
    for line in text.lines() {
        assert!(line.len() == 11 || line.starts_with("[... "), "{line:?}");
    }
}

#[test]
fn a_cut_inside_a_character_stays_valid_text() {
    let mut kept = HeadTail::new(14_000, 14_000);
    // An odd offset, so both cuts fall inside a two-byte character; no line breaks near.
    kept.push(b"a");
    kept.push("é".repeat(50_000).as_bytes());
    let (text, omitted) = kept.render(marker);
    assert!(
        !text.contains('\u{FFFD}'),
        "replacement character in the output"
    );
    let cut = kept.cut();
    assert!(std::str::from_utf8(cut.head).is_ok());
    assert!(std::str::from_utf8(cut.tail).is_ok());
    assert_eq!(cut.head.len() + cut.tail.len() + omitted as usize, 100_001);
}

#[test]
fn the_result_does_not_depend_on_how_the_stream_was_split() {
    let text: String = (0..3000).map(|i| format!("ligne {i} — ✓\n")).collect();
    let bytes = text.as_bytes();
    let mut whole = HeadTail::new(5000, 3000);
    whole.push(bytes);
    let expected = whole.render(marker);
    let mut rng = 0x2545_f491_u64;
    for _ in 0..50 {
        let mut pieces = HeadTail::new(5000, 3000);
        let mut at = 0;
        while at < bytes.len() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let n = (rng % 9000) as usize + 1;
            let end = (at + n).min(bytes.len());
            pieces.push(&bytes[at..end]);
            at = end;
        }
        assert_eq!(pieces.render(marker), expected);
    }
}

#[test]
fn last_lines_are_the_end_of_the_stream() {
    let mut tail = HeadTail::new(0, 64);
    assert_eq!(tail.last_lines(3), "");
    for n in 0..100 {
        tail.push(format!("{n}\n").as_bytes());
    }
    assert_eq!(tail.last_lines(3), "97\n98\n99");
    // Empty lines count as lines.
    let mut tail = HeadTail::new(0, 64);
    tail.push(b"a\n\nb\n\n");
    assert_eq!(tail.last_lines(10), "a\n\nb\n");
}
