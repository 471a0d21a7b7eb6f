//! Property test of the SSE decoder: random event streams, cut into random chunks (single
//! bytes, splits inside `\r\n`, inside a byte-order mark, inside multi-byte characters), decode
//! to the same events as the whole input, and to what a plain reading of the standard gives.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_provider::sse::{SseDecoder, SseEvent};
use keel_test_support::rng::Rng;

/// Values mix ASCII, the separators, and two-, three- and four-byte characters.
const PIECES: &[&str] = &[
    "a",
    "Z",
    "0",
    " ",
    ":",
    "{\"k\":1}",
    "é",
    "€",
    "😀",
    "data",
    "event",
    "  ",
    "\t",
];

const ENDINGS: &[&str] = &["\n", "\r", "\r\n"];

fn value(rng: &mut Rng) -> String {
    (0..rng.below(6))
        .map(|_| PIECES[rng.below(PIECES.len() as u64) as usize])
        .collect()
}

/// One random line, without its ending.
fn line(rng: &mut Rng) -> String {
    match rng.below(12) {
        0..=3 => format!("data: {}", value(rng)),
        4 => format!("data:{}", value(rng)),
        5 => "data".to_owned(),
        6 => format!("event: {}", value(rng)),
        7 => format!(": {}", value(rng)),
        8 => format!("id: {}", value(rng)),
        9 => format!("retry: {}", rng.below(10_000)),
        10 => format!("x-unknown{}", value(rng)),
        _ => String::new(),
    }
}

fn stream(rng: &mut Rng) -> Vec<u8> {
    let mut text = String::new();
    if rng.below(4) == 0 {
        text.push('\u{feff}');
    }
    for _ in 0..rng.below(40) {
        text.push_str(&line(rng));
        text.push_str(ENDINGS[rng.below(3) as usize]);
    }
    // Sometimes the stream ends mid-line or without the event's blank line.
    if rng.below(3) == 0 {
        text.push_str(&line(rng));
    }
    text.into_bytes()
}

/// The standard's algorithm, written plainly over the whole input.
fn reference(input: &[u8]) -> Vec<SseEvent> {
    let text = std::str::from_utf8(input).unwrap();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(end) = rest.find(['\r', '\n']) {
        lines.push(&rest[..end]);
        let skip = if rest[end..].starts_with("\r\n") {
            2
        } else {
            1
        };
        rest = &rest[end + skip..];
    }
    if !rest.is_empty() {
        lines.push(rest);
    }
    lines.push("");
    let (mut events, mut event, mut data) = (Vec::new(), String::new(), None::<String>);
    for line in lines {
        if line.is_empty() {
            if let Some(data) = data.take() {
                events.push(SseEvent {
                    event: std::mem::take(&mut event),
                    data,
                });
            }
            event.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            "event" => event = value.to_owned(),
            _ => {}
        }
    }
    events
}

fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::new();
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.push(chunk, &mut out).unwrap();
    }
    decoder.finish(&mut out).unwrap();
    out
}

/// Cuts `input` at random points; `bias` makes cuts right after `\r` and inside characters
/// likely.
fn random_chunks<'a>(rng: &mut Rng, input: &'a [u8]) -> Vec<&'a [u8]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < input.len() {
        let len = match rng.below(4) {
            0 => 1,
            1 => {
                // Up to just after the next `\r` or the next non-ASCII byte.
                input[start..]
                    .iter()
                    .position(|&b| b == b'\r' || b >= 0x80)
                    .map_or(input.len() - start, |p| p + 1)
            }
            2 => 0,
            _ => 1 + rng.below(64) as usize,
        };
        let end = (start + len).min(input.len());
        chunks.push(&input[start..end]);
        start = end;
    }
    chunks
}

#[test]
fn random_streams_decode_the_same_however_they_are_cut() {
    let mut rng = Rng(0x5EED_5EE5);
    for case in 0..3000 {
        let seed = rng.next_u64();
        let mut case_rng = Rng(seed | 1);
        let input = stream(&mut case_rng);
        let expected = reference(&input);
        let whole = decode(&[&input]);
        assert_eq!(whole, expected, "case {case} (seed {seed:#x}): {input:?}");
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(decode(&bytes), expected, "case {case}: one byte at a time");
        for _ in 0..4 {
            let chunks = random_chunks(&mut case_rng, &input);
            assert_eq!(
                decode(&chunks),
                expected,
                "case {case} (seed {seed:#x}): {chunks:?}"
            );
        }
    }
}

#[test]
fn a_split_inside_crlf_ends_one_line_only() {
    let input = b"data: a\r\ndata: b\r\n\r\n";
    for cut in 0..=input.len() {
        let (head, tail) = input.split_at(cut);
        assert_eq!(
            decode(&[head, tail]),
            [SseEvent {
                event: String::new(),
                data: "a\nb".into()
            }],
            "cut at {cut}"
        );
    }
}

#[test]
fn an_empty_chunk_inside_crlf_ends_no_extra_line() {
    // A blank line here would end the event early, splitting its data in two.
    let events = decode(&[b"data: a\r", b"", b"\ndata: b\r\n\r\n"]);
    assert_eq!(
        events,
        [SseEvent {
            event: String::new(),
            data: "a\nb".into()
        }]
    );
}

#[test]
fn a_byte_order_mark_is_dropped_even_in_pieces() {
    let input = "\u{feff}event: e\ndata: x\n\n".as_bytes();
    let expected = [SseEvent {
        event: "e".into(),
        data: "x".into(),
    }];
    for cut in 0..=input.len() {
        let (head, tail) = input.split_at(cut);
        assert_eq!(decode(&[head, tail]), expected, "cut at {cut}");
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(decode(&bytes), expected);
    // Only at the very start: later it is part of a field name.
    assert!(decode(&[b"\n\xEF\xBB\xBFdata: x\n\n"]).is_empty());
}

#[test]
fn a_line_longer_than_many_chunks_is_one_line() {
    let value = "€x".repeat(50_000);
    let input = format!("event: big\ndata: {value}\ndata: tail\n\n");
    for size in [1, 7, 1024, 16 * 1024] {
        let chunks: Vec<&[u8]> = input.as_bytes().chunks(size).collect();
        let events = decode(&chunks);
        assert_eq!(events.len(), 1, "chunk size {size}");
        assert_eq!(events[0].event, "big");
        assert_eq!(
            events[0].data,
            format!("{value}\ntail"),
            "chunk size {size}"
        );
    }
}
