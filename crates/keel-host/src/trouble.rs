//! Provider trouble, told to a person: the one status line shown while a model call is
//! retried ("retrying in 4.0 s (overloaded) · 2/4"), and, when the retries run out, what to
//! check: the variable holding the key, or where the base URL came from.

use keel::engine::{FailureKind, Stop};
use keel::provider::ProviderError;

use crate::render::human_duration;
use keel_config::ProviderOrigin;

/// The status line for retry `attempt` of `max_attempts`, made after `wait` because of
/// `error`: `retrying in 4.0 s (overloaded) · 2/4`.
pub fn retry_status(
    attempt: u32,
    max_attempts: u32,
    wait: std::time::Duration,
    error: &ProviderError,
) -> String {
    format!(
        "retrying in {} ({}) · {attempt}/{max_attempts}",
        human_duration(wait),
        short_reason(error)
    )
}

/// A few words for why a call failed: `overloaded`, `HTTP 503`, `connection refused`.
fn short_reason(error: &ProviderError) -> String {
    match error {
        ProviderError::Overloaded { .. } => "overloaded".into(),
        ProviderError::RateLimited { .. } => "rate limited".into(),
        ProviderError::Server { status, .. } => format!("HTTP {status}"),
        ProviderError::Transport { message } => transport_reason(message).into(),
        ProviderError::Timeout { .. } => "timed out".into(),
        ProviderError::Stream { .. } => "the reply stream broke".into(),
        other => FailureKind::of(other).name().replace('_', " "),
    }
}

/// What a transport error's chain says went wrong, in a few words.
fn transport_reason(message: &str) -> &'static str {
    let lower = message.to_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|needle| lower.contains(needle));
    if has(&["connection refused"]) {
        "connection refused"
    } else if has(&[
        "dns error",
        "failed to lookup",
        "name or service not known",
        "no such host",
    ]) {
        "host not found"
    } else if has(&["certificate", "tls", "handshake"]) {
        "TLS failed"
    } else if has(&["connection reset", "broken pipe"]) {
        "connection reset"
    } else if has(&["timed out", "timeout"]) {
        "timed out"
    } else if has(&["network is unreachable", "no route to host"]) {
        "network unreachable"
    } else {
        "connection failed"
    }
}

/// After a run that failed because its model call did: one line saying what to check, or
/// `None` when the failure was not the provider's (or its message says all there is).
pub fn failure_hint(stop: &Stop, origin: &ProviderOrigin) -> Option<String> {
    let Stop::Failed(failure) = stop else {
        return None;
    };
    let url = shown_url(&origin.base_url);
    let url_check = || match &origin.url_from {
        Some(from) => from.clone(),
        None => format!("your network, or set {} for another server", origin.url_var),
    };
    let error = failure.provider.as_deref();
    match failure.kind {
        FailureKind::Auth => Some(format!(
            "the API key was refused by {url}: check {}",
            origin.key_var
        )),
        FailureKind::Network => match error {
            Some(ProviderError::Transport { message }) => Some(format!(
                "cannot reach {url} ({}): check {}",
                transport_reason(message),
                url_check()
            )),
            _ => Some(format!(
                "the connection to {url} broke mid-reply: try again; if it keeps happening, \
                 check {}",
                url_check()
            )),
        },
        FailureKind::Timeout => Some(format!(
            "{url} did not answer in time: check {}, or raise request_timeout_secs / \
             idle_timeout_secs in the config",
            url_check()
        )),
        FailureKind::Overloaded | FailureKind::RateLimited | FailureKind::Provider => Some(
            format!("{url} kept failing after the retries: try again in a while"),
        ),
        FailureKind::BadRequest => Some(format!(
            "{url} rejected the request: check the model name (--model, KEEL_MODEL) and {}",
            url_check()
        )),
        _ => None,
    }
}

/// `url` without what may hold a secret: its user and password, its query string.
fn shown_url(url: &str) -> String {
    let without_query = url.split(['?', '#']).next().unwrap_or(url);
    let Some((scheme, rest)) = without_query.split_once("://") else {
        return without_query.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit('@').next().unwrap_or(authority);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use keel::engine::RunFailure;

    use super::*;

    fn origin(url_from: Option<&str>) -> ProviderOrigin {
        ProviderOrigin {
            key_var: "ANTHROPIC_API_KEY".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            url_from: url_from.map(str::to_owned),
            url_var: "ANTHROPIC_BASE_URL",
        }
    }

    fn failed(error: ProviderError) -> Stop {
        Stop::Failed(RunFailure::from(error))
    }

    #[test]
    fn the_status_line_says_the_wait_the_reason_and_the_attempt() {
        let error = ProviderError::Overloaded {
            message: "Overloaded".into(),
        };
        assert_eq!(
            retry_status(2, 4, Duration::from_secs(4), &error),
            "retrying in 4.0 s (overloaded) · 2/4"
        );
        let refused = ProviderError::Transport {
            message: "error sending request: tcp connect error: Connection refused (os error 111)"
                .into(),
        };
        assert_eq!(
            retry_status(1, 4, Duration::from_millis(500), &refused),
            "retrying in 500 ms (connection refused) · 1/4"
        );
    }

    #[test]
    fn a_refused_connection_names_the_url_and_where_it_came_from() {
        let stop = failed(ProviderError::Transport {
            message: "tcp connect error: Connection refused (os error 111)".into(),
        });
        assert_eq!(
            failure_hint(&stop, &origin(Some("OPENAI_BASE_URL"))).as_deref(),
            Some("cannot reach http://127.0.0.1:9/v1 (connection refused): check OPENAI_BASE_URL")
        );
        let default = failure_hint(&stop, &origin(None)).unwrap_or_default();
        assert!(default.contains("set ANTHROPIC_BASE_URL"), "{default}");
    }

    #[test]
    fn a_refused_key_names_its_variable() {
        let stop = failed(ProviderError::Auth {
            message: "invalid x-api-key".into(),
        });
        let hint = failure_hint(&stop, &origin(None)).unwrap_or_default();
        assert!(hint.ends_with("check ANTHROPIC_API_KEY"), "{hint}");
    }

    #[test]
    fn runs_that_did_not_fail_on_the_provider_have_no_hint() {
        assert_eq!(failure_hint(&Stop::Completed, &origin(None)), None);
        let internal = Stop::Failed(RunFailure {
            kind: FailureKind::Internal,
            message: "bug".into(),
            provider: None,
        });
        assert_eq!(failure_hint(&internal, &origin(None)), None);
    }

    #[test]
    fn urls_lose_their_credentials_and_query() {
        assert_eq!(
            shown_url("https://user:sk-secret@example.com/v1?key=sk-2"),
            "https://example.com/v1"
        );
        assert_eq!(shown_url("http://127.0.0.1:9/v1"), "http://127.0.0.1:9/v1");
    }
}
