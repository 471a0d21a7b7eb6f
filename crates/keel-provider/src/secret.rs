//! API keys that never show up in logs, errors or `Debug` output.

use std::fmt;

/// The shortest beginning of a key, at the end of a shortened message, that is redacted.
const MIN_CUT_PREFIX: usize = 4;

/// An API key. `Debug` and `Display` print `[redacted]`; the key is read only to build the
/// request header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// Reads a key from the environment variable `var`; `None` if unset or empty.
    pub fn from_env(var: &str) -> Option<Self> {
        std::env::var(var)
            .ok()
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
            .map(Self)
    }

    /// The key itself, for the request header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `[redacted]`, and a beginning of
    /// the key cut off by a shortened message (one ending in `…`) replaced too.
    pub(crate) fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_owned();
        }
        let text = text.replace(&self.0, "[redacted]");
        let cut = text
            .strip_suffix('…')
            .and_then(|kept| self.strip_cut_key(kept));
        match cut {
            Some(before) => format!("{before}[redacted]…"),
            None => text,
        }
    }

    /// `text` without the longest beginning of the key (at least [`MIN_CUT_PREFIX`] bytes) it
    /// ends with; `None` if it ends with none.
    fn strip_cut_key<'a>(&self, text: &'a str) -> Option<&'a str> {
        (MIN_CUT_PREFIX..self.0.len())
            .rev()
            .filter_map(|len| self.0.get(..len))
            .find_map(|prefix| text.strip_suffix(prefix))
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Removes the key (if any) from `text`.
pub(crate) fn redact_opt(key: Option<&ApiKey>, text: &str) -> String {
    match key {
        Some(key) => key.redact(text),
        None => text.to_owned(),
    }
}
