//! The one way a host, an example or the CLI finds its provider: [`from_env`], or a
//! [`ProviderConfig`] value (from a config file, flags, or [`ProviderConfig::detect`]) built
//! with [`ProviderConfig::build`].
//!
//! The rules, in one place:
//! - Without a name: Anthropic when `ANTHROPIC_API_KEY` is set, else the OpenAI-compatible
//!   back end when `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set, else an error saying so.
//!   `KEEL_PROVIDER` (`anthropic`, `openai` or `openai-responses`) names one outright.
//! - The key is read from the configured variable (default `ANTHROPIC_API_KEY` /
//!   `OPENAI_API_KEY`). Anthropic needs one; OpenAI needs one only for api.openai.com.
//! - The base URL is the configured one, else `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, else the
//!   public API.
//! - A variable set to blanks counts as unset.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::anthropic::AnthropicProvider;
use crate::error::ProviderError;
use crate::http::{DEFAULT_IDLE_TIMEOUT, DEFAULT_REQUEST_DEADLINE};
use crate::openai::{self, OpenAiProvider};
use crate::provider::Provider;
use crate::secret::ApiKey;

/// The message when the environment names no provider.
pub const NO_PROVIDER: &str = "no model provider configured: set ANTHROPIC_API_KEY, or \
                               OPENAI_BASE_URL for a local server";

/// The wire format a provider speaks. Written `anthropic` / `openai` / `openai-responses` in
/// names and files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ProviderKind {
    /// Anthropic's Messages API.
    #[default]
    Anthropic,
    /// OpenAI's Chat Completions API, or any server that speaks it; on OpenAI's own API, the
    /// Responses API for the models only it serves ([`crate::needs_responses`]).
    OpenAi,
    /// OpenAI's Responses API for every model (OpenAI's, Azure's, a gateway's `/responses`).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
}

impl ProviderKind {
    /// Every kind, in the order names are listed.
    pub const ALL: [ProviderKind; 3] = [Self::Anthropic, Self::OpenAi, Self::OpenAiResponses];

    /// The built-in provider of this name (`anthropic`, `openai`, `openai-responses`), if
    /// any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// The name as written in flags and files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
            Self::OpenAiResponses => "openai-responses",
        }
    }

    /// The model used when none is chosen: `claude-sonnet-4-5` / `gpt-4.1`; for the
    /// Responses API, the model the `codex` alias names
    /// ([`ModelCatalog::expand_alias`](crate::ModelCatalog::expand_alias)).
    pub fn default_model(self) -> &'static str {
        match self {
            Self::Anthropic => "claude-sonnet-4-5",
            Self::OpenAi => "gpt-4.1",
            Self::OpenAiResponses => crate::ModelCatalog::expand_alias("codex"),
        }
    }

    /// The variable the key is read from unless configured otherwise.
    pub fn key_var(self) -> &'static str {
        match self {
            Self::Anthropic => "ANTHROPIC_API_KEY",
            Self::OpenAi | Self::OpenAiResponses => "OPENAI_API_KEY",
        }
    }

    /// The variable that moves the base URL when none is configured.
    pub fn base_url_var(self) -> &'static str {
        match self {
            Self::Anthropic => "ANTHROPIC_BASE_URL",
            Self::OpenAi | Self::OpenAiResponses => "OPENAI_BASE_URL",
        }
    }

    /// The names of every kind, for messages: `anthropic, openai, openai-responses`.
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How to reach a provider: a value a host fills from its flags or config file, or
/// [`detect`](Self::detect)s from the environment, then [`build`](Self::build)s.
///
/// ```
/// use keel_provider::{ProviderConfig, ProviderKind};
///
/// // A local Ollama: no key needed, since it is not api.openai.com.
/// let config = ProviderConfig {
///     base_url: Some("http://localhost:11434/v1".into()),
///     ..ProviderConfig::new(ProviderKind::OpenAi)
/// };
/// let built = config.build_with(|_| None)?;
/// assert_eq!(built.provider.name(), "openai");
/// assert_eq!(built.key_var, "OPENAI_API_KEY");
/// # Ok::<(), keel_provider::ProviderError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// Which wire format it speaks.
    pub kind: ProviderKind,
    /// The name used in error messages (a config's `[providers.NAME]`); `None`: the kind's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where it is served; `None`: the kind's base URL variable, else the public API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding its key; `None`: the kind's
    /// ([`ProviderKind::key_var`]), and for Anthropic `ANTHROPIC_AUTH_TOKEN`, a bearer token,
    /// when that is set. Codex's spelling `env_key` is read too.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "env_key")]
    pub api_key_env: Option<String>,
    /// Headers every request carries (a gateway's), `${VAR}` in a value read from the
    /// environment. For Anthropic, `ANTHROPIC_CUSTOM_HEADERS` (`Name: Value` lines, as Claude
    /// Code reads it) adds more.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// The longest wait for the next piece of a reply; `None`: [`DEFAULT_IDLE_TIMEOUT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<Duration>,
    /// The longest time one attempt may take; `None`: [`DEFAULT_REQUEST_DEADLINE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout: Option<Duration>,
}

/// A provider built from a [`ProviderConfig`], with what a host needs to know about it.
#[derive(Clone)]
pub struct BuiltProvider {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// Its wire format (its default model: [`ProviderKind::default_model`]).
    pub kind: ProviderKind,
    /// Its name (the configured one, else the kind's).
    pub name: String,
    /// The variable its key was read from: a host hides it from the commands it runs.
    pub key_var: String,
    /// Every other variable a secret came from (`${VAR}` in headers,
    /// `ANTHROPIC_CUSTOM_HEADERS`): a host hides them too.
    pub secret_vars: Vec<String>,
    /// The base URL requests go to (before the endpoint path).
    pub base_url: String,
}

impl std::fmt::Debug for BuiltProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltProvider")
            .field("provider", &self.provider.name())
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("key_var", &self.key_var)
            .field("secret_vars", &self.secret_vars)
            .field("base_url", &self.base_url)
            .finish()
    }
}

/// The provider the environment names: [`ProviderConfig::detect`], then
/// [`ProviderConfig::build`].
///
/// ```no_run
/// # async fn run() -> Result<(), keel_provider::ProviderError> {
/// use keel_provider::{CompletionRequest, Message};
///
/// let provider = keel_provider::from_env()?;
/// let reply = provider
///     .tool_use_completion(&CompletionRequest::new("claude-sonnet-4-5").message(Message::user("Hi")))
///     .await?;
/// println!("{}", reply.text());
/// # Ok(()) }
/// ```
pub fn from_env() -> Result<Arc<dyn Provider>, ProviderError> {
    Ok(ProviderConfig::detect()?.build()?.provider)
}

/// A variable of the process environment (blank ones are dropped by [`set`]).
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// `lookup(name)`, with a blank value counted as unset.
fn set<F: Fn(&str) -> Option<String>>(lookup: &F, name: &str) -> Option<String> {
    lookup(name).filter(|value| !value.trim().is_empty())
}

/// Request headers as `(name, value)` pairs.
type Headers = Vec<(String, String)>;

/// Claude Code's variable for a gateway's bearer token, used instead of the API key.
const ANTHROPIC_AUTH_TOKEN: &str = "ANTHROPIC_AUTH_TOKEN";

fn config_error(message: String) -> ProviderError {
    ProviderError::Config { message }
}

impl ProviderConfig {
    /// The defaults for `kind`: its key variable, its base URL variable, default timeouts.
    pub fn new(kind: ProviderKind) -> Self {
        Self {
            kind,
            ..Self::default()
        }
    }

    /// The provider the process environment names (see [`detect_with`](Self::detect_with)).
    pub fn detect() -> Result<Self, ProviderError> {
        Self::detect_with(process_env)
    }

    /// The provider the variables `lookup` gives name: `KEEL_PROVIDER` (a
    /// [`ProviderKind`]'s name) if set; else Anthropic when `ANTHROPIC_API_KEY` is set; else the
    /// OpenAI-compatible back end when `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set; else
    /// [`ProviderError::Config`] with [`NO_PROVIDER`]. Blank values count as unset.
    pub fn detect_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ProviderError> {
        if let Some(name) = set(&lookup, "KEEL_PROVIDER") {
            let name = name.trim();
            return ProviderKind::from_name(name).map(Self::new).ok_or_else(|| {
                config_error(format!(
                    "unknown provider `{name}` in KEEL_PROVIDER: use one of {}",
                    ProviderKind::names()
                ))
            });
        }
        if set(&lookup, "ANTHROPIC_API_KEY").is_some()
            || set(&lookup, ANTHROPIC_AUTH_TOKEN).is_some()
        {
            Ok(Self::new(ProviderKind::Anthropic))
        } else if set(&lookup, "OPENAI_BASE_URL").is_some()
            || set(&lookup, "OPENAI_API_KEY").is_some()
        {
            Ok(Self::new(ProviderKind::OpenAi))
        } else {
            Err(config_error(NO_PROVIDER.into()))
        }
    }

    /// The name used in messages: the configured one, else the kind's.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(self.kind.name())
    }

    /// The variable the key is read from.
    pub fn key_var(&self) -> &str {
        self.api_key_env
            .as_deref()
            .unwrap_or_else(|| self.kind.key_var())
    }

    /// The variable the key is read from with the variables `lookup` gives: for Anthropic
    /// without a configured variable, `ANTHROPIC_AUTH_TOKEN` when it is set (a gateway's bearer
    /// token wins, as in Claude Code), else [`key_var`](Self::key_var).
    fn key_var_with<F: Fn(&str) -> Option<String>>(&self, lookup: &F) -> &str {
        if self.kind == ProviderKind::Anthropic
            && self.api_key_env.is_none()
            && set(lookup, ANTHROPIC_AUTH_TOKEN).is_some()
        {
            ANTHROPIC_AUTH_TOKEN
        } else {
            self.key_var()
        }
    }

    /// The headers to send, `${VAR}`s read with `lookup`, and the variables they came from;
    /// for Anthropic, `ANTHROPIC_CUSTOM_HEADERS`' too.
    fn headers_with<F: Fn(&str) -> Option<String>>(
        &self,
        lookup: &F,
    ) -> Result<(Headers, Vec<String>), ProviderError> {
        let mut headers = Vec::new();
        let mut vars = Vec::new();
        if self.kind == ProviderKind::Anthropic
            && let Some(custom) = set(lookup, "ANTHROPIC_CUSTOM_HEADERS")
        {
            vars.push("ANTHROPIC_CUSTOM_HEADERS".to_owned());
            for line in custom.lines().filter(|line| !line.trim().is_empty()) {
                let (name, value) = line.split_once(':').ok_or_else(|| {
                    config_error(
                        "ANTHROPIC_CUSTOM_HEADERS: write one `Name: Value` per line".to_owned(),
                    )
                })?;
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
        for (name, value) in &self.headers {
            let mut text = String::new();
            let mut rest = value.as_str();
            while let Some(start) = rest.find("${") {
                let Some(end) = rest[start..].find('}') else {
                    break;
                };
                let var = &rest[start + 2..start + end];
                let found = set(lookup, var).ok_or_else(|| {
                    config_error(format!(
                        "provider `{}`: header `{name}` takes ${{{var}}}, which is not set",
                        self.name()
                    ))
                })?;
                text.push_str(&rest[..start]);
                text.push_str(&found);
                vars.push(var.to_owned());
                rest = &rest[start + end + 1..];
            }
            text.push_str(rest);
            headers.push((name.clone(), text));
        }
        Ok((headers, vars))
    }

    /// Builds the provider, reading the key and the default base URL from the process
    /// environment (see [`build_with`](Self::build_with)).
    pub fn build(&self) -> Result<BuiltProvider, ProviderError> {
        self.build_with(process_env)
    }

    /// Builds the provider with the variables `lookup` gives: the key from
    /// [`key_var`](Self::key_var); the base URL from [`base_url`](Self::base_url), else the
    /// kind's variable, else the public API. Errors are [`ProviderError::Config`] with a
    /// message naming the provider and the fix: Anthropic without a key; OpenAI without a key
    /// for api.openai.com; a base URL that is not an `http(s)://` URL.
    pub fn build_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<BuiltProvider, ProviderError> {
        let (provider, base_url): (Arc<dyn Provider>, String) = match self.kind {
            ProviderKind::Anthropic => {
                let (provider, url) = self.anthropic_with(&lookup)?;
                (Arc::new(provider), url)
            }
            ProviderKind::OpenAi => {
                let (provider, url) = self.openai_with(&lookup)?;
                (Arc::new(provider), url)
            }
            ProviderKind::OpenAiResponses => {
                let (provider, url) = self.openai_with(&lookup)?;
                (
                    Arc::new(provider.with_api(openai::OpenAiApi::Responses)),
                    url,
                )
            }
        };
        let (_, secret_vars) = self.headers_with(&lookup)?;
        Ok(BuiltProvider {
            provider,
            kind: self.kind,
            name: self.name().to_owned(),
            key_var: self.key_var_with(&lookup).to_owned(),
            secret_vars,
            base_url,
        })
    }

    fn key_with<F: Fn(&str) -> Option<String>>(&self, lookup: &F) -> Option<ApiKey> {
        set(lookup, self.key_var_with(lookup)).map(|key| ApiKey::new(key.trim()))
    }

    fn base_url_with<F: Fn(&str) -> Option<String>>(&self, lookup: &F) -> Option<String> {
        self.base_url
            .clone()
            .or_else(|| set(lookup, self.kind.base_url_var()))
    }

    fn header_error(&self, err: ProviderError) -> ProviderError {
        config_error(format!("provider `{}`: {err}", self.name()))
    }

    fn bad_url(&self, url: &str, err: ProviderError) -> ProviderError {
        config_error(format!(
            "bad base URL `{url}` for provider `{}`: {err}; give one like https://host/v1",
            self.name()
        ))
    }

    /// The Anthropic back end this value describes (whatever its kind), and its base URL.
    pub(crate) fn anthropic_with<F: Fn(&str) -> Option<String>>(
        &self,
        lookup: &F,
    ) -> Result<(AnthropicProvider, String), ProviderError> {
        let key = self.key_with(lookup).ok_or_else(|| {
            let token = if self.api_key_env.is_none() {
                format!(" (or {ANTHROPIC_AUTH_TOKEN} for a gateway's bearer token)")
            } else {
                String::new()
            };
            config_error(format!(
                "provider `{}` needs an API key: set {}{token}",
                self.name(),
                self.key_var()
            ))
        })?;
        let provider = if self.key_var_with(lookup) == ANTHROPIC_AUTH_TOKEN {
            AnthropicProvider::with_auth_token(key)?
        } else {
            AnthropicProvider::new(key)?
        };
        let (headers, _) = self.headers_with(lookup)?;
        let mut provider = provider
            .with_headers(&headers)
            .map_err(|err| self.header_error(err))?
            .with_idle_timeout(self.idle_timeout.unwrap_or(DEFAULT_IDLE_TIMEOUT))
            .with_request_deadline(self.request_timeout.unwrap_or(DEFAULT_REQUEST_DEADLINE));
        let base_url = self.base_url_with(lookup);
        if let Some(url) = &base_url {
            provider = provider
                .with_base_url(url)
                .map_err(|err| self.bad_url(url, err))?;
        }
        let url = base_url.unwrap_or_else(|| crate::anthropic::DEFAULT_BASE_URL.into());
        Ok((provider, url))
    }

    /// The OpenAI-compatible back end this value describes (whatever its kind), and its base
    /// URL.
    pub(crate) fn openai_with<F: Fn(&str) -> Option<String>>(
        &self,
        lookup: &F,
    ) -> Result<(OpenAiProvider, String), ProviderError> {
        let key = self.key_with(lookup);
        let url = self
            .base_url_with(lookup)
            .unwrap_or_else(|| openai::DEFAULT_BASE_URL.into());
        if key.is_none() && url.contains("api.openai.com") {
            return Err(config_error(format!(
                "provider `{}` needs an API key for api.openai.com: set {}, or OPENAI_BASE_URL \
                 for a local server",
                self.name(),
                self.key_var()
            )));
        }
        let (headers, _) = self.headers_with(lookup)?;
        let provider = OpenAiProvider::new(&url, key)
            .map_err(|err| self.bad_url(&url, err))?
            .with_headers(&headers)
            .map_err(|err| self.header_error(err))?
            .with_idle_timeout(self.idle_timeout.unwrap_or(DEFAULT_IDLE_TIMEOUT))
            .with_request_deadline(self.request_timeout.unwrap_or(DEFAULT_REQUEST_DEADLINE));
        Ok((provider, url))
    }
}
