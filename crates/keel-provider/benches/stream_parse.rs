//! Stream parsing throughput: a ≥ 10 MB Anthropic stream (and a Chat Completions one, and a
//! Responses API one) built from the recorded events, parsed and assembled into a reply; the SSE layer alone on the
//! Anthropic one (target ≥ 300 MiB/s); and one 100 MB `data:` line fed in 16 KiB chunks, to
//! the SSE decoder (target ≤ 1 s) and as a text delta through the whole Anthropic parser.
//!
//! `cargo bench -p keel-provider --bench stream_parse`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keel_provider::sse::SseDecoder;
use keel_provider::{
    AnthropicStreamParser, OpenAiStreamParser, ResponseAssembler, ResponsesStreamParser,
    StreamEvent,
};

const TARGET_BYTES: usize = 10 * 1024 * 1024;
/// Network reads arrive in pieces; 16 KiB is a typical TLS record batch.
const CHUNK: usize = 16 * 1024;
/// The single huge line: 100 MB.
const HUGE_LINE: usize = 100_000_000;

fn recording(name: &str) -> String {
    String::from_utf8(keel_test_support::wire::wire_bytes(name)).unwrap()
}

/// The recording's events, separated.
fn events(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| format!("{e}\n\n"))
        .collect()
}

/// The tool-use recording with its text and tool-input deltas repeated until the stream
/// passes 10 MiB: the same event shapes the API sends, in the same proportions.
fn anthropic_stream() -> Vec<u8> {
    let events = events(&recording("anthropic/tool_use_response.sse"));
    let is_delta = |e: &str| e.contains("\"content_block_delta\"");
    let text_deltas: Vec<&String> = events
        .iter()
        .filter(|e| is_delta(e) && e.contains("text_delta"))
        .collect();
    let head: Vec<&String> = events.iter().take_while(|e| !is_delta(e)).collect();
    let mut out = String::new();
    head.iter().for_each(|e| out.push_str(e));
    while out.len() < TARGET_BYTES {
        text_deltas.iter().for_each(|e| out.push_str(e));
    }
    // Then the text block closes, and the tool block, its input and the end follow as
    // recorded.
    let rest = events
        .iter()
        .skip_while(|e| !e.contains("content_block_stop"));
    rest.for_each(|e| out.push_str(e));
    out.into_bytes()
}

/// The parallel-calls recording with the first call's argument fragments repeated: the
/// repeated input is not valid JSON, so the benchmark also pays for rejecting that call.
fn openai_stream() -> Vec<u8> {
    let events = events(&recording("openai-chat/two_parallel_tool_calls.sse"));
    let fragments: Vec<&String> = events
        .iter()
        .filter(|e| e.contains("\"arguments\":\"") && !e.contains("\"id\":\"call_"))
        .take(11)
        .collect();
    let mut out = String::new();
    out.push_str(&events[0]);
    out.push_str(&events[1]);
    while out.len() < TARGET_BYTES {
        fragments.iter().for_each(|e| out.push_str(e));
    }
    events[13..].iter().for_each(|e| out.push_str(e));
    out.into_bytes()
}

/// The Responses recording with a reasoning summary, its `output_text.delta` events (each
/// with its `logprobs` and `obfuscation`) repeated until the stream passes 10 MiB.
fn responses_stream() -> Vec<u8> {
    let events = events(&recording("openai-responses/reasoning_summary.sse"));
    let is_delta = |e: &str| e.starts_with("event: response.output_text.delta");
    let deltas: Vec<&String> = events.iter().filter(|e| is_delta(e)).collect();
    let mut out = String::new();
    events
        .iter()
        .take_while(|e| !is_delta(e))
        .for_each(|e| out.push_str(e));
    while out.len() < TARGET_BYTES {
        deltas.iter().for_each(|e| out.push_str(e));
    }
    events
        .iter()
        .skip_while(|e| !e.starts_with("event: response.output_text.done"))
        .for_each(|e| out.push_str(e));
    out.into_bytes()
}

fn parse<P>(
    bytes: &[u8],
    mut parser: P,
    feed: fn(&mut P, &[u8], &mut Vec<StreamEvent>),
    finish: fn(&mut P, &mut Vec<StreamEvent>),
) -> usize {
    let mut assembler = ResponseAssembler::new();
    let mut events = Vec::new();
    for chunk in bytes.chunks(CHUNK) {
        feed(&mut parser, chunk, &mut events);
        events.drain(..).for_each(|e| assembler.push(e));
    }
    finish(&mut parser, &mut events);
    events.drain(..).for_each(|e| assembler.push(e));
    let reply = assembler.finish().unwrap();
    reply.content.len()
}

/// Decodes `bytes` in network-sized chunks; returns the events' total data length.
fn decode_sse(bytes: &[u8]) -> usize {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    let mut total = 0;
    for chunk in bytes.chunks(CHUNK) {
        decoder.push(chunk, &mut events).unwrap();
        total += events.drain(..).map(|e| e.data.len()).sum::<usize>();
    }
    decoder.finish(&mut events).unwrap();
    total + events.drain(..).map(|e| e.data.len()).sum::<usize>()
}

/// One `data:` line of `HUGE_LINE` bytes, then the blank line.
fn huge_data_line() -> Vec<u8> {
    let mut line = Vec::with_capacity(HUGE_LINE + 2);
    line.extend_from_slice(b"data: ");
    line.resize(HUGE_LINE, b'x');
    line.extend_from_slice(b"\n\n");
    line
}

/// A whole Anthropic reply whose one text delta is about `HUGE_LINE` bytes.
fn huge_text_delta() -> Vec<u8> {
    let events = events(&recording("anthropic/basic_response.sse"));
    let mut out = String::new();
    for event in &events {
        if event.contains("\"text_delta\"") {
            if out.contains("text_delta") {
                continue;
            }
            out.push_str("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"");
            out.push_str(&"x".repeat(HUGE_LINE));
            out.push_str("\"}}\n\n");
        } else {
            out.push_str(event);
        }
    }
    out.into_bytes()
}

fn bench_sse(c: &mut Criterion) {
    let anthropic = anthropic_stream();
    let huge = huge_data_line();
    let huge_delta = huge_text_delta();
    assert_eq!(decode_sse(&huge), HUGE_LINE - 6);
    assert!(
        parse(
            &huge_delta,
            AnthropicStreamParser::new(),
            |p, c, o| p.feed(c, o).unwrap(),
            |p, o| p.finish(o).unwrap()
        ) == 1
    );

    let mut group = c.benchmark_group("sse");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(anthropic.len() as u64));
    group.bench_function("decode_anthropic_10MiB", |b| {
        b.iter(|| decode_sse(black_box(&anthropic)))
    });
    group.sample_size(10);
    group.throughput(Throughput::Bytes(huge.len() as u64));
    group.bench_function("one_100MB_data_line", |b| {
        b.iter(|| decode_sse(black_box(&huge)))
    });
    group.throughput(Throughput::Bytes(huge_delta.len() as u64));
    group.bench_function("anthropic_100MB_text_delta", |b| {
        b.iter(|| {
            parse(
                black_box(&huge_delta),
                AnthropicStreamParser::new(),
                |p, c, o| p.feed(c, o).unwrap(),
                |p, o| p.finish(o).unwrap(),
            )
        })
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let anthropic = anthropic_stream();
    let openai = openai_stream();
    let responses = responses_stream();
    assert!(anthropic.len() >= TARGET_BYTES && openai.len() >= TARGET_BYTES);
    assert!(responses.len() >= TARGET_BYTES);
    // The reasoning item and the long message.
    assert_eq!(
        parse(
            &responses,
            ResponsesStreamParser::new(),
            |p, c, o| p.feed(c, o).unwrap(),
            |p, o| p.finish(o).unwrap()
        ),
        2
    );
    // The built streams must parse into a whole reply with its tool call intact.
    assert_eq!(
        parse(
            &anthropic,
            AnthropicStreamParser::new(),
            |p, c, o| p.feed(c, o).unwrap(),
            |p, o| p.finish(o).unwrap()
        ),
        2
    );

    let mut group = c.benchmark_group("stream_parse");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(anthropic.len() as u64));
    group.bench_function("anthropic_10MiB", |b| {
        b.iter(|| {
            parse(
                black_box(&anthropic),
                AnthropicStreamParser::new(),
                |p, c, o| p.feed(c, o).unwrap(),
                |p, o| p.finish(o).unwrap(),
            )
        })
    });
    group.throughput(Throughput::Bytes(openai.len() as u64));
    group.bench_function("openai_10MiB", |b| {
        b.iter(|| {
            parse(
                black_box(&openai),
                OpenAiStreamParser::new(),
                |p, c, o| p.feed(c, o).unwrap(),
                |p, o| p.finish(o).unwrap(),
            )
        })
    });
    group.throughput(Throughput::Bytes(responses.len() as u64));
    group.bench_function("responses_10MiB", |b| {
        b.iter(|| {
            parse(
                black_box(&responses),
                ResponsesStreamParser::new(),
                |p, c, o| p.feed(c, o).unwrap(),
                |p, o| p.finish(o).unwrap(),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench, bench_sse);
criterion_main!(benches);
