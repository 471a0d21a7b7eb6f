//! The models a provider serves, as its API lists them: Anthropic's `GET /v1/models` (paged
//! with `after_id`) and an OpenAI-compatible `GET {base}/models`. Read with a short time limit
//! and a bounded body, never retried: a listing only informs a choice, it never blocks one.

use std::time::Duration;

use serde::Deserialize;

use crate::error::ProviderError;

/// The whole time a listing may take, every page included: 5 s.
pub const MODEL_LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of one listing page that is read (8 MiB; OpenRouter's full list is about 1 MiB).
/// A longer page is an error, and the rest of it is never received.
pub const MAX_MODEL_LIST_BODY: usize = 8 * 1024 * 1024;

/// The most pages followed (of up to 1,000 models each, as Anthropic pages them).
pub(crate) const MAX_MODEL_LIST_PAGES: usize = 10;

/// The model ids a provider lists, in its order.
///
/// ```
/// use keel_provider::ModelList;
///
/// let listed = ModelList::new(vec!["claude-sonnet-4-5-20250929".into(), "claude-opus-4-6".into()]);
/// assert!(listed.serves("claude-opus-4-6"));
/// // An alias is served when the list holds it with a date after it.
/// assert!(listed.serves("claude-sonnet-4-5"));
/// assert!(!listed.serves("claude-sonnet-4"));
/// assert!(!listed.serves("gpt-nonsense-9"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelList {
    ids: Vec<String>,
}

impl ModelList {
    /// A list of these ids.
    pub fn new(ids: Vec<String>) -> Self {
        Self { ids }
    }

    /// The listed ids, in the provider's order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// How many models are listed.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `name` is served: listed as it is, or an alias of a listed id that is the name
    /// followed by a date (`claude-sonnet-4-5` for `claude-sonnet-4-5-20250929`, the way
    /// Anthropic lists dated snapshots and serves their aliases).
    pub fn serves(&self, name: &str) -> bool {
        self.ids
            .iter()
            .any(|id| id == name || is_dated_snapshot_of(id, name))
    }

    /// The listed name closest to `name` (by edit distance), if one is close enough to be a
    /// likely typo: at most a third of the name's length in edits. A dated id is also
    /// compared, and offered, as its alias (`claude-haiku-4-5` for
    /// `claude-haiku-4-5-20251001`).
    pub fn closest(&self, name: &str) -> Option<&str> {
        let limit = (name.chars().count() / 3).max(1);
        self.ids
            .iter()
            .flat_map(|id| [Some(id.as_str()), alias_of(id)])
            .flatten()
            .map(|candidate| (strsim::levenshtein(candidate, name), candidate))
            .filter(|(distance, _)| *distance > 0 && *distance <= limit)
            .min_by_key(|(distance, _)| *distance)
            .map(|(_, candidate)| candidate)
    }
}

/// `id` without its `-YYYYMMDD` ending, if it has one.
fn alias_of(id: &str) -> Option<&str> {
    let (alias, date) = id.rsplit_once('-')?;
    (date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit())).then_some(alias)
}

/// Whether `id` is `name` followed by `-YYYYMMDD`.
fn is_dated_snapshot_of(id: &str, name: &str) -> bool {
    alias_of(id) == Some(name)
}

/// One page of a listing, in Anthropic's shape (`data`, `has_more`, `last_id`) or OpenAI's
/// (`object: "list"`, `data`, no paging).
#[derive(Debug, Deserialize)]
pub(crate) struct ModelPage {
    data: Vec<ListedModel>,
    #[serde(default)]
    has_more: bool,
    #[serde(default)]
    last_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ListedModel {
    id: String,
}

impl ModelPage {
    /// Parses a page body.
    pub(crate) fn parse(body: &[u8]) -> Result<Self, ProviderError> {
        serde_json::from_slice(body).map_err(|err| ProviderError::Stream {
            message: format!("the model list is not the expected JSON ({err})"),
        })
    }

    /// The cursor of the next page, if the server says there is one.
    pub(crate) fn next_after(&self) -> Option<&str> {
        self.last_id.as_deref().filter(|_| self.has_more)
    }

    /// Adds this page's ids to `ids`.
    pub(crate) fn take_into(self, ids: &mut Vec<String>) {
        ids.extend(self.data.into_iter().map(|model| model.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_model_and_strangers_find_none() {
        let list = ModelList::new(vec![
            "claude-sonnet-4-5-20250929".into(),
            "claude-haiku-4-5".into(),
            "gpt-4o".into(),
        ]);
        assert_eq!(list.closest("claude-haiku-4.5"), Some("claude-haiku-4-5"));
        assert_eq!(list.closest("claude-sonet-4-5"), Some("claude-sonnet-4-5"));
        assert_eq!(list.closest("gpt-4"), Some("gpt-4o"));
        assert_eq!(list.closest("gpt-nonsense-9"), None);
        assert_eq!(
            list.closest("claude-haiku-4-5"),
            None,
            "the same name is no suggestion"
        );
    }

    #[test]
    fn only_a_date_makes_an_alias() {
        assert!(is_dated_snapshot_of(
            "claude-3-5-haiku-20241022",
            "claude-3-5-haiku"
        ));
        assert!(!is_dated_snapshot_of(
            "claude-3-5-haiku-latest",
            "claude-3-5-haiku"
        ));
        assert!(!is_dated_snapshot_of(
            "claude-3-5-haiku-2024102",
            "claude-3-5-haiku"
        ));
        assert!(!is_dated_snapshot_of(
            "claude-3-5-haiku20241022",
            "claude-3-5-haiku"
        ));
    }

    #[test]
    fn pages_in_both_shapes_parse() {
        let anthropic = br#"{"data":[{"type":"model","id":"claude-opus-4-6","display_name":"Claude Opus 4.6","created_at":"2026-02-04T00:00:00Z"}],"first_id":"claude-opus-4-6","has_more":true,"last_id":"claude-opus-4-6"}"#;
        let page = ModelPage::parse(anthropic).unwrap();
        assert_eq!(page.next_after(), Some("claude-opus-4-6"));
        let openai = br#"{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1715367049,"owned_by":"system"}]}"#;
        let page = ModelPage::parse(openai).unwrap();
        assert_eq!(page.next_after(), None);
        let mut ids = Vec::new();
        page.take_into(&mut ids);
        assert_eq!(ids, ["gpt-4o"]);
        assert!(matches!(
            ModelPage::parse(b"<html>login</html>"),
            Err(ProviderError::Stream { .. })
        ));
    }
}
