//! The Markdown renderer's throughput on a streamed answer.
//! `cargo bench -p keel-cli --bench markdown`
//!
//! A 1 MB answer (prose with emphasis and links, nested lists, code blocks in a few languages,
//! tables, quotes) pushed through [`MarkdownStream`] in 20-byte deltas, as a provider's SSE
//! text deltas come, colours on (code highlighted) and off; and 100 KB of the same, to show
//! the cost grows with the answer's length, not its square (1 MB should take ~10× 100 KB).
//! A fast model streams ~200 tokens/s, about 1 KB/s: the renderer must be orders of
//! magnitude faster.
//!
//! keel-cli is a binary crate: the renderer (and the terminal module it paints with) is
//! compiled into this bench with `#[path]`, nothing is exported from a library.

// The included modules carry their unit tests, which a bench does not run.
#![allow(missing_docs, dead_code, unreachable_pub, unused_imports)]
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

#[path = "../src/markdown/mod.rs"]
mod markdown;
#[path = "../src/terminal.rs"]
mod terminal;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use markdown::MarkdownStream;
use terminal::Style;

/// How SSE text deltas come, in bytes.
const DELTA: usize = 20;

/// One section of a typical answer, ~1.5 KB.
const SECTION: &str = "## Changes in the parser\n\n\
The **parser** now reads the stream *incrementally*: each `push` looks only at the new bytes, \
and a [design note](https://example.com/notes/parser) explains why the old approach was \
quadratic on long answers. This paragraph is long enough to wrap several times at eighty \
columns, which exercises the word wrapper and the early flushing of settled rows.\n\n\
- first, the tokenizer keeps its state between calls\n\
- second, the lexer no longer copies its input\n  \
- nested: the copy was the hot spot in `lex_line`\n  \
- nested: **bold** and `code` in an item\n\
1. run the tests\n2. run the benchmarks\n\n\
```rust\nfn parse(input: &str) -> Result<Ast, Error> {\n    let mut lexer = Lexer::new(input);\n    \
while let Some(token) = lexer.next()? {\n        println!(\"{token:?}\");\n    }\n    Ok(Ast::default())\n}\n```\n\n\
```python\ndef main():\n    for i in range(10):\n        print(f\"{i}: {i * i}\")\n```\n\n\
| file | lines | change |\n|------|------:|--------|\n| src/lexer.rs | 412 | no copy |\n\
| src/parser.rs | 980 | incremental |\n| tests/stream.rs | 120 | new |\n\n\
> Note: the old API stays, *deprecated*, for one release.\n\n---\n\n";

/// An answer of about `bytes` bytes.
fn answer(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + SECTION.len());
    while text.len() < bytes {
        text.push_str(SECTION);
    }
    text
}

/// `text` cut into deltas of about [`DELTA`] bytes (on character boundaries).
fn deltas(text: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / DELTA + 1);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + DELTA).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// Streams `deltas` through a renderer; the bytes it drew.
fn stream(style: Style, deltas: &[&str]) -> usize {
    let mut renderer = MarkdownStream::new(style, 80);
    let mut drawn = 0;
    for delta in deltas {
        drawn += renderer.push(delta).len();
    }
    drawn + renderer.finish().len()
}

fn bench(c: &mut Criterion) {
    // What the first highlighted code block costs: syntect's syntaxes and themes are loaded
    // then, not at start-up.
    let started = Instant::now();
    let mut first = MarkdownStream::new(Style::new(true), 80);
    black_box(first.push("```rust\nfn main() {}\n```\n"));
    println!(
        "markdown: first highlighted code block (syntaxes loaded) in {:.1?}",
        started.elapsed()
    );
    let mut group = c.benchmark_group("markdown");
    group.sample_size(10);
    for (name, bytes) in [("100KB", 100_000), ("1MB", 1_000_000)] {
        let text = answer(bytes);
        let pieces = deltas(&text);
        group.throughput(Throughput::Bytes(text.len() as u64));
        for (colours, style) in [("colour", Style::new(true)), ("plain", Style::new(false))] {
            group.bench_function(format!("{name}_{colours}"), |b| {
                b.iter(|| black_box(stream(style, black_box(&pieces))))
            });
        }
    }
    group.finish();
    // The figures the issue asks for, in one place.
    let time = |bytes: usize, style: Style| {
        let text = answer(bytes);
        let pieces = deltas(&text);
        stream(style, &pieces);
        let started = Instant::now();
        let runs = 3;
        for _ in 0..runs {
            black_box(stream(style, &pieces));
        }
        (started.elapsed() / runs, text.len())
    };
    for (colours, style) in [("colour", Style::new(true)), ("plain", Style::new(false))] {
        let (small, small_len) = time(100_000, style);
        let (large, large_len) = time(1_000_000, style);
        let rate = large_len as f64 / large.as_secs_f64() / 1e6;
        println!(
            "markdown {colours}: 1 MB in {large:.1?} = {rate:.1} MB/s (~{:.0}× a 1 KB/s model); \
             100 KB in {small:.1?}; ratio {:.1} for {:.1}× the bytes",
            rate * 1e6 / 1e3,
            large.as_secs_f64()
                / small
                    .as_secs_f64()
                    .max(Duration::from_nanos(1).as_secs_f64()),
            large_len as f64 / small_len as f64,
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
