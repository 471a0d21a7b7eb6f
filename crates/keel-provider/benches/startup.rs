//! Start-up cost of a provider: making it and sending its first request, for an `http://`
//! endpoint (a client with no TLS roots: no certificate store read) and an `https://` one
//! (the platform verifier reads the system's certificate store when its client is built,
//! which before this change every provider paid at construction, whatever its scheme).
//!
//! The requests go to a closed loopback port, so each is the client build plus one refused
//! connection, without retries. Target for `http://`: well under a millisecond.
//!
//! `served_context`: what asking a local server for its context window adds to a start, on a
//! provider whose client is already built (the first model request builds it anyway) against
//! a loopback server: Ollama answering `/api/show` with `num_ctx` (one request), and a server
//! answering 404 to every question (three requests: Ollama's, llama.cpp's, vLLM's).
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

/// A loopback server answering `/api/show` as Ollama does, or 404 to everything.
fn server(runtime: &tokio::runtime::Runtime, ollama: bool) -> wiremock::MockServer {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    runtime.block_on(async {
        let server = MockServer::start().await;
        if ollama {
            Mock::given(method("POST"))
                .and(path("/api/show"))
                .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                    "parameters": "num_ctx 8192",
                    "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}
                })))
                .mount(&server)
                .await;
        }
        server
    })
}

fn served_context(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("served_context");
    for (name, ollama) in [("ollama_num_ctx", true), ("nothing_answers", false)] {
        let server = server(&runtime, ollama);
        let provider = OpenAiProvider::new(&format!("{}/v1", server.uri()), None).unwrap();
        // The client is built (and a connection open) as the first model request would.
        let first = runtime.block_on(provider.served_context("qwen3:8b"));
        assert_eq!(first.is_some(), ollama);
        group.bench_function(name, |b| {
            b.iter(|| black_box(runtime.block_on(provider.served_context("qwen3:8b"))))
        });
    }
    group.finish();
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
    targets = startup, served_context
}
criterion_main!(benches);
