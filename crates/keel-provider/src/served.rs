//! The context window a local server actually serves a model with: what Ollama, llama.cpp's
//! llama-server and vLLM say when asked, read with a short time limit and a bounded body,
//! never retried. Knowing it only informs a choice (a smaller tool set, a warning); not
//! knowing it is never an error.
//!
//! The shapes read, and where they are documented:
//! - Ollama, `POST {root}/api/show {"model": NAME}` (docs/api.md "Show Model Information",
//!   docs/openapi.yaml `ShowResponse`): `parameters` is text with one `name value` a line
//!   (`num_ctx 8192` when the model's Modelfile sets it); `model_info["<arch>.context_length"]`
//!   (`<arch>` = `model_info["general.architecture"]`) is the length the model was trained
//!   for, which Ollama never exceeds (server/sched.go caps `num_ctx` at it). Without
//!   `num_ctx` Ollama serves its default: `OLLAMA_CONTEXT_LENGTH` on the server, else 4,096
//!   tokens below 24 GiB of VRAM, 32,768 below 48 GiB, 262,144 above (docs/context-length.mdx,
//!   server/routes.go); a client cannot see which, so only the trained length bounds it.
//! - Ollama, `GET {root}/api/ps` (docs/openapi.yaml `PsResponse`): each loaded model's
//!   `context_length`, what it runs with now.
//! - llama.cpp, `GET {root}/props` (tools/server/README.md "GET /props"):
//!   `default_generation_settings.n_ctx`, one slot's context (`-c` divided among the
//!   `--parallel` slots); `?model=NAME&autoload=false` picks the model in router mode without
//!   loading it.
//! - vLLM, `GET {base}/models` (vllm/entrypoints/openai/models/serving.py,
//!   `show_available_models`): each base model's card carries `max_model_len`.

use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::time::Instant;

use crate::http::HttpTransport;

/// The whole time the probe may take, every request included: 1 s. A local server answers in
/// milliseconds; one that does not is not waited for.
pub const SERVED_CONTEXT_TIMEOUT: Duration = Duration::from_secs(1);

/// The most of one answer that is read (1 MiB; Ollama's `/api/show` of a model, license and
/// template included, is a few KiB to a few tens of KiB). A longer one counts as no answer.
pub const MAX_SERVED_CONTEXT_BODY: usize = 1024 * 1024;

/// A window no server serves: a number above it is garbage, not a window.
const MAX_PLAUSIBLE_WINDOW: u64 = 1 << 32;

/// The context window a server serves a model with, in tokens, and how keel learned it.
///
/// ```
/// use keel_provider::{ContextSource, ServedContext};
///
/// let served = ServedContext { tokens: 4096, source: ContextSource::OllamaNumCtx };
/// assert_eq!(served.source.server(), "Ollama");
/// assert!(served.source.fix().contains("num_ctx"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedContext {
    /// The window, in tokens: exact, but for [`ContextSource::OllamaTrained`], where it is
    /// the most the server can serve.
    pub tokens: u64,
    /// Where the number comes from.
    pub source: ContextSource,
}

/// Where a [`ServedContext`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContextSource {
    /// Ollama: `num_ctx` in the model's parameters (its Modelfile's `PARAMETER num_ctx`),
    /// capped at the length the model was trained for, as Ollama caps it.
    OllamaNumCtx,
    /// Ollama: the context the loaded model runs with now (`/api/ps`).
    OllamaLoaded,
    /// Ollama: the length the model was trained for, the most Ollama serves it with; with
    /// neither `num_ctx` nor the model loaded, Ollama's default may be less.
    OllamaTrained,
    /// llama.cpp's llama-server: one slot's context (`-c` divided among `--parallel` slots).
    LlamaCpp,
    /// vLLM: the model's `max_model_len`.
    Vllm,
}

impl ContextSource {
    /// The server's name: `Ollama`, `llama.cpp` or `vLLM`.
    pub fn server(self) -> &'static str {
        match self {
            Self::OllamaNumCtx | Self::OllamaLoaded | Self::OllamaTrained => "Ollama",
            Self::LlamaCpp => "llama.cpp",
            Self::Vllm => "vLLM",
        }
    }

    /// What the number is, for a message: `num_ctx in the model's parameters`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::OllamaNumCtx => "num_ctx in the model's parameters",
            Self::OllamaLoaded => "the context the loaded model runs with",
            Self::OllamaTrained => "the length the model was trained for",
            Self::LlamaCpp => "a slot's n_ctx",
            Self::Vllm => "max_model_len",
        }
    }

    /// How to serve a larger window on that server, for a message.
    pub fn fix(self) -> &'static str {
        match self {
            Self::OllamaNumCtx | Self::OllamaLoaded => {
                "raise num_ctx (PARAMETER num_ctx in a Modelfile) or OLLAMA_CONTEXT_LENGTH on \
                 the server"
            }
            Self::OllamaTrained => "choose a model trained for a longer context",
            Self::LlamaCpp => "restart llama-server with a larger -c (or fewer --parallel slots)",
            Self::Vllm => "restart vLLM with a larger --max-model-len",
        }
    }
}

/// What Ollama's `/api/show` says of a model: its `num_ctx` and its trained length, either
/// possibly unknown. `None`: not Ollama's answer.
pub(crate) fn ollama_show(body: &[u8]) -> Option<(Option<u64>, Option<u64>)> {
    let show: Value = serde_json::from_slice(body).ok()?;
    let show = show.as_object()?;
    // Every answer of Ollama's carries `model_info` (an object, null for a remote model).
    let info = show.get("model_info")?;
    let num_ctx = show
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(|text| {
            // The last `num_ctx` line is the one that counts.
            text.lines().rev().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next())
                    .flatten()
                    .and_then(|value| value.parse::<u64>().ok())
            })
        })
        .and_then(plausible);
    let trained = info
        .get("general.architecture")
        .and_then(Value::as_str)
        .and_then(|arch| info.get(format!("{arch}.context_length")))
        .and_then(Value::as_u64)
        .and_then(plausible);
    Some((num_ctx, trained))
}

/// The context `model` runs with in Ollama's `/api/ps` answer, if it is loaded.
pub(crate) fn ollama_loaded(body: &[u8], model: &str) -> Option<u64> {
    let ps: Value = serde_json::from_slice(body).ok()?;
    let wanted = without_latest(model);
    ps.get("models")?
        .as_array()?
        .iter()
        .find(|loaded| {
            ["name", "model"].iter().any(|key| {
                loaded
                    .get(*key)
                    .and_then(Value::as_str)
                    .is_some_and(|name| without_latest(name) == wanted)
            })
        })?
        .get("context_length")?
        .as_u64()
        .and_then(plausible)
}

/// A slot's context in llama-server's `/props` answer.
pub(crate) fn llama_cpp_slot(body: &[u8]) -> Option<u64> {
    let props: Value = serde_json::from_slice(body).ok()?;
    props
        .get("default_generation_settings")?
        .get("n_ctx")?
        .as_u64()
        .and_then(plausible)
}

/// `model`'s `max_model_len` in vLLM's model listing.
pub(crate) fn vllm_max_model_len(body: &[u8], model: &str) -> Option<u64> {
    let listing: Value = serde_json::from_slice(body).ok()?;
    listing
        .get("data")?
        .as_array()?
        .iter()
        .find(|card| card.get("id").and_then(Value::as_str) == Some(model))?
        .get("max_model_len")?
        .as_u64()
        .and_then(plausible)
}

/// Ollama names `qwen3` and `qwen3:latest` alike.
fn without_latest(name: &str) -> &str {
    name.strip_suffix(":latest").unwrap_or(name)
}

/// `tokens`, if it can be a window.
fn plausible(tokens: u64) -> Option<u64> {
    (1..=MAX_PLAUSIBLE_WINDOW)
        .contains(&tokens)
        .then_some(tokens)
}

/// Asks the server whose model listing is at `models_url` (`{base}/models`) what window it
/// serves `model` with: Ollama's `/api/show` (then `/api/ps` when the model's parameters name
/// no `num_ctx`), else llama-server's `/props`, else vLLM's listing; the first that answers
/// in its shape decides. Each is one request, never retried, its answer read up to
/// [`MAX_SERVED_CONTEXT_BODY`]; all of them within [`SERVED_CONTEXT_TIMEOUT`]. `None` for a
/// host that is not local or private ([`may_probe`]) and for anything else unknown.
pub(crate) async fn probe(
    transport: &HttpTransport,
    models_url: &url::Url,
    headers: &HeaderMap,
    model: &str,
) -> Option<ServedContext> {
    if !may_probe(models_url) {
        return None;
    }
    let asking = ask_in_turn(transport, models_url, headers, model);
    let deadline = Instant::now().checked_add(SERVED_CONTEXT_TIMEOUT)?;
    match tokio::time::timeout_at(deadline, asking).await {
        Ok(served) => served,
        Err(_) => {
            tracing::debug!(url = %models_url, "the server did not say its context window in time");
            None
        }
    }
}

/// The servers' endpoints, one after the other (see [`probe`]).
async fn ask_in_turn(
    transport: &HttpTransport,
    models_url: &url::Url,
    headers: &HeaderMap,
    model: &str,
) -> Option<ServedContext> {
    let base = models_url.as_str().trim_end_matches('/');
    let base = base.strip_suffix("/models").unwrap_or(base);
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let at = |path: &str| url::Url::parse(&format!("{root}{path}")).ok();
    let ask = |method: Method, url: url::Url, body: Option<Value>| async move {
        let mut request = transport.request(method, &url, headers).ok()?;
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let answer = transport
            .bounded_body(
                request,
                MAX_SERVED_CONTEXT_BODY,
                "the answer is longer than 1 MiB",
            )
            .await;
        answer
            .map_err(|err| tracing::debug!(%url, error = %err, "no context window here"))
            .ok()
    };

    let show = ask(
        Method::POST,
        at("/api/show")?,
        Some(serde_json::json!({ "model": model })),
    )
    .await;
    if let Some((num_ctx, trained)) = show.as_deref().and_then(ollama_show) {
        let served = |tokens, source| Some(ServedContext { tokens, source });
        if let Some(num_ctx) = num_ctx {
            return served(
                num_ctx.min(trained.unwrap_or(u64::MAX)),
                ContextSource::OllamaNumCtx,
            );
        }
        let loaded = ask(Method::GET, at("/api/ps")?, None).await;
        if let Some(tokens) = loaded
            .as_deref()
            .and_then(|body| ollama_loaded(body, model))
        {
            return served(tokens, ContextSource::OllamaLoaded);
        }
        return trained.and_then(|tokens| served(tokens, ContextSource::OllamaTrained));
    }
    let mut props = at("/props")?;
    props
        .query_pairs_mut()
        .append_pair("model", model)
        .append_pair("autoload", "false");
    if let Some(tokens) = ask(Method::GET, props, None)
        .await
        .as_deref()
        .and_then(llama_cpp_slot)
    {
        return Some(ServedContext {
            tokens,
            source: ContextSource::LlamaCpp,
        });
    }
    let tokens = ask(Method::GET, models_url.clone(), None)
        .await
        .as_deref()
        .and_then(|body| vllm_max_model_len(body, model))?;
    Some(ServedContext {
        tokens,
        source: ContextSource::Vllm,
    })
}

/// Whether a server at `url` may be asked for its window: a local or private address, or a
/// name that can only be one (`localhost`, a name without a dot such as a container's,
/// `.local`, `.lan`, `.internal`, `.home.arpa`). A public host (api.openai.com, a cloud
/// gateway) serves none of the endpoints asked, so it is never asked, and start-up there costs
/// nothing.
pub(crate) fn may_probe(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => {
            let [a, b, ..] = ip.octets();
            // 100.64.0.0/10: carrier-grade NAT, where Tailscale's addresses are.
            ip.is_loopback()
                || ip.is_private()
                || ip.is_link_local()
                || (a == 100 && b & 0xc0 == 64)
        }
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback() || ip.is_unique_local() || ip.is_unicast_link_local()
        }
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            !name.contains('.')
                || [".localhost", ".local", ".lan", ".internal", ".home.arpa"]
                    .iter()
                    .any(|suffix| name.ends_with(suffix))
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_and_private_hosts_are_asked() {
        for url in [
            "http://localhost:11434/v1",
            "http://127.0.0.1:8080/v1",
            "http://[::1]:8000/v1",
            "http://192.168.1.20:11434/v1",
            "http://10.0.0.5:8000/v1",
            "http://100.101.102.103:11434/v1",
            "http://ollama:11434/v1",
            "http://gpu-box.local:8000/v1",
            "http://vllm.internal/v1",
            "http://[fd12::1]:8000/v1",
        ] {
            assert!(may_probe(&url::Url::parse(url).unwrap()), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "https://openrouter.ai/api/v1",
            "https://api.groq.com/openai/v1",
            "http://8.8.8.8/v1",
            "http://[2001:db8::1]/v1",
        ] {
            assert!(!may_probe(&url::Url::parse(url).unwrap()), "{url}");
        }
    }

    #[test]
    fn nonsense_reads_as_unknown() {
        for body in [
            &b""[..],
            b"null",
            b"[]",
            b"{}",
            b"<html>404</html>",
            b"{\"model_info\": {}, \"parameters\": \"num_ctx lots\"}",
            b"{\"default_generation_settings\": {\"n_ctx\": -1}}",
            b"{\"default_generation_settings\": {\"n_ctx\": 0}}",
            b"{\"default_generation_settings\": {\"n_ctx\": 1e400}}",
            b"{\"default_generation_settings\": {\"n_ctx\": 99999999999999999999}}",
            b"{\"data\": [{\"id\": \"m\", \"max_model_len\": \"8192\"}]}",
            b"{\"models\": [{\"name\": \"m\", \"context_length\": 4.5}]}",
        ] {
            assert_eq!(llama_cpp_slot(body), None);
            assert_eq!(vllm_max_model_len(body, "m"), None);
            assert_eq!(ollama_loaded(body, "m"), None);
            if let Some((num_ctx, trained)) = ollama_show(body) {
                assert_eq!((num_ctx, trained), (None, None));
            }
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = keel_test_support::rng::Rng(0x9e37_79b9_7f4a_7c15);
        let shapes: [&[u8]; 4] = [
            br#"{"parameters":"num_ctx 4096","model_info":{"general.architecture":"x","x.context_length":8192}}"#,
            br#"{"models":[{"name":"m:latest","context_length":4096}]}"#,
            br#"{"default_generation_settings":{"n_ctx":4096}}"#,
            br#"{"data":[{"id":"m","max_model_len":4096}]}"#,
        ];
        for round in 0..2_000 {
            let mut body = shapes[round % shapes.len()].to_vec();
            // Flip, cut or insert bytes at random places.
            for _ in 0..(round % 7) {
                let at = rng.below(body.len() as u64 + 1) as usize;
                let byte = rng.next_u64().to_le_bytes()[0];
                match rng.below(3) {
                    0 if at < body.len() => body[at] = byte,
                    1 => body.truncate(at),
                    _ => body.insert(at, byte),
                }
            }
            let _ = ollama_show(&body);
            let _ = ollama_loaded(&body, "m");
            let _ = llama_cpp_slot(&body);
            let _ = vllm_max_model_len(&body, "m");
        }
    }

    #[test]
    fn the_documented_shapes_read() {
        // Ollama's docs/api.md example, with the `num_ctx` parameter its Modelfile shows.
        let show = br#"{"parameters":"num_keep                       24\nnum_ctx                        4096\nstop                           \"<|eot_id|>\"","model_info":{"general.architecture":"llama","llama.context_length":8192}}"#;
        assert_eq!(ollama_show(show), Some((Some(4096), Some(8192))));
        let ps = br#"{"models":[{"name":"gemma4","model":"gemma4","size":6591830464,"context_length":4096}]}"#;
        assert_eq!(ollama_loaded(ps, "gemma4:latest"), Some(4096));
        assert_eq!(ollama_loaded(ps, "qwen3:8b"), None);
        let props = br#"{"default_generation_settings":{"id":0,"id_task":-1,"n_ctx":1024,"params":{}},"total_slots":1}"#;
        assert_eq!(llama_cpp_slot(props), Some(1024));
        let models = br#"{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":8192},{"id":"lora","object":"model","parent":"Qwen/Qwen3-8B"}]}"#;
        assert_eq!(vllm_max_model_len(models, "Qwen/Qwen3-8B"), Some(8192));
        assert_eq!(vllm_max_model_len(models, "lora"), None);
    }
}
