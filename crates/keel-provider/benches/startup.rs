//! Start-up cost of a provider: making it and sending its first request, for an `http://`
//! endpoint (a client with no TLS roots: no certificate store read) and an `https://` one
//! (the platform verifier reads the system's certificate store when its client is built,
//! which before this change every provider paid at construction, whatever its scheme).
//!
//! The requests go to a closed loopback port, so each is the client build plus one refused
//! connection, without retries. Target for `http://`: well under a millisecond.
//!
//! `cargo bench -p keel-provider --bench startup`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_provider::{CompletionRequest, Message, OpenAiProvider, Provider, RetryPolicy};

/// A loopback port nothing listens on (port 1 needs root to bind).
fn first_request(runtime: &tokio::runtime::Runtime, base_url: &str) {
    let request = CompletionRequest::new("m").message(Message::user("hi"));
    runtime.block_on(async {
        let provider = OpenAiProvider::new(base_url, None)
            .unwrap()
            .with_retry_policy(RetryPolicy::none());
        let result = provider.tool_use_completion(&request).await;
        assert!(result.is_err(), "nothing listens on {base_url}");
        black_box(result).ok();
    });
}

fn startup(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("provider_startup");
    group.bench_function("new_only", |b| {
        b.iter(|| black_box(OpenAiProvider::new("https://127.0.0.1:1/v1", None).unwrap()))
    });
    group.bench_function("http_new_and_first_request", |b| {
        b.iter(|| first_request(&runtime, "http://127.0.0.1:1/v1"))
    });
    group.bench_function("https_new_and_first_request", |b| {
        b.iter(|| first_request(&runtime, "https://127.0.0.1:1/v1"))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = startup
}
criterion_main!(benches);
