//! Why a run failed: a kind a host can act on, the message, and the provider's error.

use std::sync::Arc;

use keel_provider::ProviderError;
use serde::{Deserialize, Serialize};

/// What kind of failure ended a run, for a host to act on (ask for a new key, wait and
/// retry, compact, report a bug).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The API key is missing, wrong or lacks permission.
    Auth,
    /// Too many requests: the provider's rate limit.
    RateLimited,
    /// The service is overloaded.
    Overloaded,
    /// The prompt does not fit the model's context window, even after compacting.
    ContextTooLong,
    /// The server sent nothing for too long, or the reply ran past its deadline.
    Timeout,
    /// The connection failed or broke, or the reply stream was cut or malformed.
    Network,
    /// The server rejected the request as malformed.
    BadRequest,
    /// The server failed (HTTP 5xx and the like).
    Provider,
    /// The provider is configured wrongly (base URL, headers).
    Config,
    /// The model's replies were cut off at the output limit too many times in a row.
    OutputLimit,
    /// Something inside keel went wrong.
    Internal,
}

impl FailureKind {
    /// The kind of failure `error` is.
    pub fn of(error: &ProviderError) -> Self {
        match error {
            ProviderError::Auth { .. } => Self::Auth,
            ProviderError::RateLimited { .. } => Self::RateLimited,
            ProviderError::Overloaded { .. } => Self::Overloaded,
            ProviderError::ContextLengthExceeded { .. } => Self::ContextTooLong,
            ProviderError::Timeout { .. } => Self::Timeout,
            ProviderError::Transport { .. } | ProviderError::Stream { .. } => Self::Network,
            ProviderError::InvalidRequest { .. } => Self::BadRequest,
            ProviderError::Server { .. } => Self::Provider,
            ProviderError::Config { .. } => Self::Config,
            // A variant added later: the provider failed.
            _ => Self::Provider,
        }
    }

    /// A short name: `auth`, `rate_limited`, `overloaded`, `context_too_long`, `timeout`,
    /// `network`, `bad_request`, `provider`, `config`, `output_limit`, `internal`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::RateLimited => "rate_limited",
            Self::Overloaded => "overloaded",
            Self::ContextTooLong => "context_too_long",
            Self::Timeout => "timeout",
            Self::Network => "network",
            Self::BadRequest => "bad_request",
            Self::Provider => "provider",
            Self::Config => "config",
            Self::OutputLimit => "output_limit",
            Self::Internal => "internal",
        }
    }

    /// Whether sending the prompt again later may succeed (rate limit, overload, timeout,
    /// network, a server failure).
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Self::RateLimited | Self::Overloaded | Self::Timeout | Self::Network | Self::Provider
        )
    }
}

/// Why a run failed ([`Stop::Failed`](crate::Stop::Failed)): its kind, a message for a person
/// and, when the model call failed, the provider's error. Two failures are equal when their
/// kind and message are.
///
/// Serialized as `{"failure": <kind>, "error": <message>}` (the provider's error is left
/// out).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFailure {
    /// What kind of failure.
    #[serde(rename = "failure")]
    pub kind: FailureKind,
    /// What went wrong, for a person (a provider error's text).
    #[serde(rename = "error")]
    pub message: String,
    /// The provider's error, when a model call failed.
    #[serde(skip)]
    pub provider: Option<Arc<ProviderError>>,
}

impl RunFailure {
    /// A failure of `kind` that no provider error caused.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            provider: None,
        }
    }
}

impl From<ProviderError> for RunFailure {
    fn from(error: ProviderError) -> Self {
        Self {
            kind: FailureKind::of(&error),
            message: error.to_string(),
            provider: Some(Arc::new(error)),
        }
    }
}

impl PartialEq for RunFailure {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use keel_provider::TimeoutLimit;

    use super::*;

    #[test]
    fn provider_errors_map_to_kinds() {
        let message = || "m".to_owned();
        let cases = [
            (
                ProviderError::Auth { message: message() },
                FailureKind::Auth,
            ),
            (
                ProviderError::RateLimited {
                    retry_after: None,
                    message: message(),
                },
                FailureKind::RateLimited,
            ),
            (
                ProviderError::Overloaded { message: message() },
                FailureKind::Overloaded,
            ),
            (
                ProviderError::Server {
                    status: 500,
                    message: message(),
                },
                FailureKind::Provider,
            ),
            (
                ProviderError::InvalidRequest { message: message() },
                FailureKind::BadRequest,
            ),
            (
                ProviderError::ContextLengthExceeded { message: message() },
                FailureKind::ContextTooLong,
            ),
            (
                ProviderError::Transport { message: message() },
                FailureKind::Network,
            ),
            (
                ProviderError::Stream { message: message() },
                FailureKind::Network,
            ),
            (
                ProviderError::Timeout {
                    after: Duration::from_secs(1),
                    limit: TimeoutLimit::Idle,
                },
                FailureKind::Timeout,
            ),
            (
                ProviderError::Config { message: message() },
                FailureKind::Config,
            ),
        ];
        for (error, kind) in cases {
            let text = error.to_string();
            let failure = RunFailure::from(error.clone());
            assert_eq!(failure.kind, kind, "{error:?}");
            assert_eq!(failure.message, text);
            assert_eq!(failure.provider.as_deref(), Some(&error));
        }
    }

    #[test]
    fn serialized_with_the_kind_and_message() {
        let failure = RunFailure::new(FailureKind::OutputLimit, "cut");
        let json = serde_json::to_value(crate::Stop::Failed(failure.clone()));
        assert_eq!(
            json.ok(),
            Some(serde_json::json!({"kind": "failed", "failure": "output_limit", "error": "cut"}))
        );
    }
}
