//! read_file on 10 MB files, through the registry: the first page, a range near the end, and
//! a full 2,000-line page of a file of short lines (which also counts its 2 million lines).
//! `cargo bench -p keel-sandbox --bench read_file`

// A benchmark: setup failures should stop it loudly, and it reports what each page shows.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::PathSandbox;
use keel_sandbox::tools::ReadFile;
use keel_tool::{ToolContext, ToolRegistry};
use serde_json::{Value, json};

const TEN_MB: usize = 10 * 1024 * 1024;

/// About 10 MB of code-like lines of varying length; returns the line count.
fn code_file(path: &std::path::Path) -> usize {
    let mut text = String::with_capacity(TEN_MB + 200);
    let mut lines = 0;
    while text.len() < TEN_MB {
        lines += 1;
        let indent = "    ".repeat(lines % 4);
        let pad = "x".repeat(lines % 50);
        text.push_str(&format!(
            "{indent}let value_{lines} = compute(\"{pad}\", {lines});\n"
        ));
    }
    std::fs::write(path, text).unwrap();
    lines
}

/// About 10 MB of 4-character lines (so a page is the full 2,000 lines).
fn short_line_file(path: &std::path::Path) {
    let text = "abc\n".repeat(TEN_MB / 4);
    std::fs::write(path, text).unwrap();
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lines = code_file(&dir.path().join("code.rs"));
    short_line_file(&dir.path().join("short.txt"));
    let sandbox = Arc::new(PathSandbox::new(dir.path()).unwrap());
    let registry = ToolRegistry::new().with(ReadFile::new(sandbox)).unwrap();
    let ctx = ToolContext::new(dir.path(), "bench").with_scratch_dir(dir.path().join("scratch"));

    let run = |input: &Value| {
        let call = ToolCall {
            id: "call_1",
            name: "read_file",
            input: ToolInput::Valid(black_box(input)),
        };
        let output = runtime.block_on(registry.dispatch(call, &ctx));
        assert!(!output.is_error, "{}", output.content);
        output
    };

    let mut group = c.benchmark_group("read_file_10mb");
    let first_page = json!({"path": "code.rs"});
    let near_end = json!({"path": "code.rs", "start_line": lines - 200, "end_line": lines - 100});
    let full_page = json!({"path": "short.txt", "start_line": 1, "end_line": 2000});
    for (name, input) in [
        ("first_page", &first_page),
        ("range_near_end", &near_end),
        ("2000_short_lines", &full_page),
    ] {
        let note = run(input)
            .content
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        eprintln!("{name}: {note}");
        group.bench_function(name, |b| b.iter(|| run(input)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
