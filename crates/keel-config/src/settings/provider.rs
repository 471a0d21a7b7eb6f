//! The provider the overrides, environment and config name, built by keel-provider's one
//! detection ([`ProviderConfig`]).

use std::sync::Arc;

use keel::provider::{
    BuiltProvider, CompletionRequest, Provider, ProviderConfig, ProviderError, ProviderKind,
    StreamEvent,
};

use super::{Overrides, env};
use crate::Error;
use crate::files::{self, Config};

/// The provider chosen, and the variable holding its key.
pub(super) struct Chosen {
    pub(super) name: String,
    pub(super) kind: ProviderKind,
    pub(super) provider: Arc<dyn Provider>,
    pub(super) key_var: String,
    /// Other variables its secrets came from (its headers').
    pub(super) secret_vars: Vec<String>,
    pub(super) origin: ProviderOrigin,
}

/// For a listing with no provider configured: a stand-in whose every call fails with
/// `message` (why there is no provider); a listing never calls it.
pub(super) fn unconfigured(message: String) -> Chosen {
    let kind = ProviderKind::Anthropic;
    Chosen {
        name: "none".into(),
        kind,
        provider: Arc::new(Unconfigured { message }),
        key_var: kind.key_var().into(),
        secret_vars: Vec::new(),
        origin: ProviderOrigin {
            key_var: kind.key_var().into(),
            base_url: String::new(),
            url_from: None,
            url_var: kind.base_url_var(),
        },
    }
}

/// The provider of a run that has none configured: every call fails with why.
struct Unconfigured {
    /// Why there is no provider, and how to configure one.
    message: String,
}

impl Provider for Unconfigured {
    fn name(&self) -> &str {
        "none"
    }

    fn stream(
        &self,
        _req: &CompletionRequest,
    ) -> futures::stream::BoxStream<'_, Result<StreamEvent, ProviderError>> {
        let error = ProviderError::Config {
            message: self.message.clone(),
        };
        Box::pin(futures::stream::once(std::future::ready(Err(error))))
    }
}

/// `message` of a provider's configuration error as a usage line pointing at `--help`.
fn provider_usage(err: ProviderError) -> Error {
    match err {
        ProviderError::Config { message } => Error::Invalid(format!("{message} (see keel --help)")),
        err => Error::Invalid(err.to_string()),
    }
}

/// The provider the flags, environment and config name, built by
/// [`ProviderConfig`] (the one provider detection).
///
/// A built-in name (`anthropic`, `openai`) is never redirected by a project: the config only
/// holds the user's tables for them (see `Config::load`), and its base URL comes from
/// `--base-url`, else the environment, else the user's config. A name defined in a config
/// takes its base URL from `--base-url`, else its table, else the environment.
pub(super) fn provider(overrides: &Overrides, config: &Config) -> Result<Chosen, Error> {
    let named = overrides
        .provider
        .clone()
        .or_else(|| env("KEEL_PROVIDER"))
        .or_else(|| config.provider.clone());
    let (name, kind, table) = match named {
        Some(name) => {
            let (kind, table) = lookup_provider(&name, config)?;
            (name, kind, table)
        }
        None => {
            let kind = ProviderConfig::detect().map_err(provider_usage)?.kind;
            (kind.name().to_owned(), kind, None)
        }
    };
    let flag_url = overrides
        .base_url
        .clone()
        .map(|url| (url, "--base-url".to_owned()));
    let (built, url_from) = build_provider(&name, kind, table, flag_url, config)?;
    Ok(Chosen {
        origin: ProviderOrigin {
            key_var: built.key_var.clone(),
            base_url: built.base_url,
            url_from,
            url_var: kind.base_url_var(),
        },
        name,
        kind,
        provider: built.provider,
        key_var: built.key_var,
        secret_vars: built.secret_vars,
    })
}

/// The wire format and the `[providers.NAME]` table (if any) of the provider called `name`: a
/// built-in one (`anthropic`, `openai`, which the user's config may adjust) or one the config
/// defines; else a usage error listing the names there are.
fn lookup_provider<'c>(
    name: &str,
    config: &'c Config,
) -> Result<(ProviderKind, Option<&'c files::ProviderConfig>), Error> {
    match (ProviderKind::from_name(name), config.providers.get(name)) {
        (Some(kind), table) => Ok((table.map_or(kind, |t| t.kind), table)),
        (None, Some(table)) => Ok((table.kind, Some(table))),
        (None, None) => {
            let mut known: Vec<String> = ProviderKind::ALL
                .iter()
                .map(|kind| kind.name().to_owned())
                .collect();
            known.extend(config.providers.keys().cloned());
            Err(Error::Invalid(format!(
                "unknown provider `{name}`: use one of {}, or define [providers.{name}] in the \
                 config",
                known.join(", ")
            )))
        }
    }
}

/// Builds the provider called `name` ([`ProviderConfig`], the one provider
/// detection), and says what set its base URL. The base URL is `flag_url`, else for a built-in
/// name the environment's, then the table's; for a configured name the table's, then the
/// environment's. The variables its secrets come from are redacted from the log.
fn build_provider(
    name: &str,
    kind: ProviderKind,
    table: Option<&files::ProviderConfig>,
    flag_url: Option<(String, String)>,
    config: &Config,
) -> Result<(BuiltProvider, Option<String>), Error> {
    // Each candidate base URL with what set it, for the hint after a failed call.
    let env_url = || env(kind.base_url_var()).map(|url| (url, kind.base_url_var().to_owned()));
    let table_url = || {
        table
            .and_then(|t| t.base_url.clone())
            .map(|url| (url, format!("base_url in [providers.{name}] of the config")))
    };
    let (base_url, url_from) = if ProviderKind::from_name(name).is_some() {
        flag_url.or_else(env_url).or_else(table_url)
    } else {
        flag_url.or_else(table_url).or_else(env_url)
    }
    .unzip();
    let secs = std::time::Duration::from_secs;
    let built = ProviderConfig {
        kind,
        name: Some(name.to_owned()),
        base_url,
        api_key_env: table.and_then(|t| t.api_key_env.clone()),
        headers: table.map(|t| t.headers.clone()).unwrap_or_default(),
        idle_timeout: config.idle_timeout_secs.map(secs),
        request_timeout: config.request_timeout_secs.map(secs),
    }
    .build()
    .map_err(provider_usage)?;
    Ok((built, url_from))
}

/// The provider a `[models.NAME]` table names, built as the main one is (no `--base-url`: that
/// flag moves the main provider only).
pub fn named_provider(name: &str, config: &Config) -> Result<BuiltProvider, Error> {
    let (kind, table) = lookup_provider(name, config)?;
    build_provider(name, kind, table, None, config).map(|(built, _)| built)
}

/// Where the provider's settings came from, to name in a failure's hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderOrigin {
    /// The variable the key is read from (`ANTHROPIC_API_KEY`, a config's `api_key_env`).
    pub key_var: String,
    /// The base URL requests go to.
    pub base_url: String,
    /// What set the base URL (`--base-url`, `OPENAI_BASE_URL`, a config table); `None` when
    /// it is the provider's default.
    pub url_from: Option<String>,
    /// The variable that would move the base URL (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`).
    pub url_var: &'static str,
}
