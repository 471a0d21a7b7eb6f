//! Errors that end a model call.

use std::time::Duration;

/// Why a model call failed.
///
/// Messages never contain an API key: back ends redact the key from anything a server echoes,
/// in an HTTP error body or in an error event inside a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The key is missing, wrong or lacks permission (HTTP 401/403). Not retried.
    #[error("authentication failed: {message}")]
    Auth {
        /// What the server said.
        message: String,
    },
    /// Too many requests (HTTP 429).
    #[error("rate limited{}: {message}", fmt_after(.retry_after))]
    RateLimited {
        /// How long the server asked us to wait, if it said.
        retry_after: Option<Duration>,
        /// What the server said.
        message: String,
    },
    /// The service is overloaded (HTTP 529, or an `overloaded_error` in a stream).
    #[error("the service is overloaded: {message}")]
    Overloaded {
        /// What the server said.
        message: String,
    },
    /// The server failed (HTTP 5xx, 408, 409).
    #[error("server error (HTTP {status}): {message}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// What the server said.
        message: String,
    },
    /// The server rejected the request as malformed (HTTP 400, 404, 413, 422 ...). Not retried.
    #[error("invalid request: {message}")]
    InvalidRequest {
        /// What the server said.
        message: String,
    },
    /// The prompt does not fit the model's context window. Not retried: compact first.
    #[error("the prompt is longer than the model's context window: {message}")]
    ContextLengthExceeded {
        /// What the server said.
        message: String,
    },
    /// The connection failed or broke.
    #[error("connection failed: {message}")]
    Transport {
        /// What failed.
        message: String,
    },
    /// The response stream was malformed, or cut after content had arrived (not retried, so
    /// that no output is duplicated).
    #[error("bad response stream: {message}")]
    Stream {
        /// What was wrong.
        message: String,
    },
    /// The server sent nothing for too long ([`TimeoutLimit::Idle`]), or one attempt ran past
    /// its whole-request deadline ([`TimeoutLimit::RequestDeadline`]), e.g. a server trickling
    /// keep-alive pings without a reply.
    #[error("{}", fmt_timeout(*.after, *.limit))]
    Timeout {
        /// The limit that ran out.
        after: Duration,
        /// Which limit it was.
        limit: TimeoutLimit,
    },
    /// The provider cannot do what was asked, e.g. list its models
    /// ([`Provider::list_models`](crate::Provider::list_models)).
    #[error("{message}")]
    Unsupported {
        /// What cannot be done, as a sentence.
        message: String,
    },
    /// The provider is configured wrongly (bad base URL, a header that cannot be sent).
    #[error("provider configuration: {message}")]
    Config {
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// Which time limit ended a model call (see [`ProviderError::Timeout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutLimit {
    /// Nothing arrived for the idle timeout (`with_idle_timeout`).
    Idle,
    /// The attempt, from sending to the reply's end, took longer than the request deadline
    /// (`with_request_deadline`).
    RequestDeadline,
}

fn fmt_timeout(after: Duration, limit: TimeoutLimit) -> String {
    let secs = after.as_secs_f64();
    match limit {
        TimeoutLimit::Idle => format!("no data from the server for {secs}s (the idle timeout)"),
        TimeoutLimit::RequestDeadline => {
            format!("the reply took longer than the request deadline of {secs}s")
        }
    }
}

fn fmt_after(after: &Option<Duration>) -> String {
    match after {
        Some(d) => format!(" (retry after {}s)", d.as_secs_f64()),
        None => String::new(),
    }
}

impl ProviderError {
    /// The same error with its message passed through `f` (a [`Timeout`](Self::Timeout) has
    /// none and is returned as is).
    pub(crate) fn map_message(self, f: impl FnOnce(&str) -> String) -> Self {
        match self {
            Self::Auth { message } => Self::Auth {
                message: f(&message),
            },
            Self::RateLimited {
                retry_after,
                message,
            } => Self::RateLimited {
                retry_after,
                message: f(&message),
            },
            Self::Overloaded { message } => Self::Overloaded {
                message: f(&message),
            },
            Self::Server { status, message } => Self::Server {
                status,
                message: f(&message),
            },
            Self::InvalidRequest { message } => Self::InvalidRequest {
                message: f(&message),
            },
            Self::ContextLengthExceeded { message } => Self::ContextLengthExceeded {
                message: f(&message),
            },
            Self::Transport { message } => Self::Transport {
                message: f(&message),
            },
            Self::Stream { message } => Self::Stream {
                message: f(&message),
            },
            Self::Config { message } => Self::Config {
                message: f(&message),
            },
            Self::Unsupported { message } => Self::Unsupported {
                message: f(&message),
            },
            Self::Timeout { after, limit } => Self::Timeout { after, limit },
        }
    }

    /// Whether this error may have cut a reply short, so that sending the turn's request again
    /// may succeed: the stream broke or was malformed ([`Stream`](Self::Stream)), stalled or
    /// ran past its deadline ([`Timeout`](Self::Timeout)), or the service failed in the middle
    /// of it ([`Overloaded`](Self::Overloaded), e.g. Anthropic's `overloaded_error` event,
    /// [`Server`](Self::Server), [`RateLimited`](Self::RateLimited),
    /// [`Transport`](Self::Transport)).
    ///
    /// `false` for errors that a new request would meet again: authentication, an invalid
    /// request, a prompt longer than the context window, configuration. (A refusal is not an
    /// error: it is a reply with [`StopReason::Refusal`](crate::StopReason::Refusal).)
    ///
    /// The provider retries these itself while nothing of the reply has arrived; once content
    /// has arrived it returns the error instead, so as not to duplicate output, and a caller
    /// that saw content before the error can discard it and start the turn again (keel's
    /// engine does).
    pub fn is_cut_mid_reply(&self) -> bool {
        self.is_retryable() || matches!(self, Self::Stream { .. })
    }

    /// Whether trying the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::Overloaded { .. }
                | Self::Server { .. }
                | Self::Transport { .. }
                | Self::Timeout { .. }
        )
    }
}
