//! `/model NAME` weighed: the model from the next request on, checked against keel's catalog
//! and the provider's own model list. A doubtful name is used anyway (a gateway may serve
//! models it does not list), but never silently: the warning says what is known and how to
//! go back.

use keel::provider::{ModelList, ProviderError};

use crate::render::printable;

/// What `/model NAME` tells the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The model is served (or at least known): a dim line.
    Fine(String),
    /// The model may not work: a yellow line saying why.
    Doubtful(String),
}

/// What is known about a name the user chose.
pub struct Choice<'a> {
    /// The name typed.
    pub name: &'a str,
    /// The model in use before.
    pub previous: &'a str,
    /// The provider's short name, e.g. `anthropic`.
    pub provider: &'a str,
    /// Whether keel's catalog knows the name (so its price and window).
    pub in_catalog: bool,
    /// The provider's model list, or why it could not be read.
    pub listing: Result<&'a ModelList, &'a ProviderError>,
}

impl Choice<'_> {
    /// The line for this choice, made printable: the listed ids and the listing's error come
    /// from the network.
    pub fn verdict(&self) -> Verdict {
        match self.unprinted_verdict() {
            Verdict::Fine(line) => Verdict::Fine(printable(&line)),
            Verdict::Doubtful(line) => Verdict::Doubtful(printable(&line)),
        }
    }

    fn unprinted_verdict(&self) -> Verdict {
        let Choice { name, provider, .. } = *self;
        let unknown_cost = "its cost and context window are unknown to keel";
        match self.listing {
            Ok(list) if list.serves(name) => {
                let mut line = format!("model: {name} (from the next request on");
                if !self.in_catalog {
                    line.push_str(&format!("; {provider} lists it, but {unknown_cost}"));
                }
                line.push(')');
                Verdict::Fine(line)
            }
            Ok(list) => {
                let models = if list.len() == 1 { "model" } else { "models" };
                let mut line = format!(
                    "warning: {name} is not among the {} {models} {provider} lists",
                    list.len()
                );
                if let Some(close) = list.closest(name) {
                    line.push_str(&format!(" (did you mean {close}?)"));
                }
                let known = if self.in_catalog {
                    "keel's catalog knows it, but the provider will likely refuse it"
                } else {
                    unknown_cost
                };
                line.push_str(&format!(
                    "; using it anyway from the next request on ({known}). {}",
                    self.way_back()
                ));
                Verdict::Doubtful(line)
            }
            Err(_) if self.in_catalog => {
                Verdict::Fine(format!("model: {name} (from the next request on)"))
            }
            Err(error) => Verdict::Doubtful(format!(
                "warning: {name} is not a known model of {provider}; using it anyway (from \
                 the next request on; {unknown_cost}, and the provider will say if it has no \
                 such model; its model list could not be checked: {error}). {}",
                self.way_back()
            )),
        }
    }

    fn way_back(&self) -> String {
        format!("/model {} goes back.", self.previous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed() -> ModelList {
        ModelList::new(vec![
            "claude-haiku-4-5-20251001".into(),
            "claude-opus-4-6".into(),
            "MiniMax-M3".into(),
        ])
    }

    fn verdict(
        name: &str,
        in_catalog: bool,
        listing: Result<&ModelList, &ProviderError>,
    ) -> Verdict {
        Choice {
            name,
            previous: "claude-sonnet-4-5",
            provider: "anthropic",
            in_catalog,
            listing,
        }
        .verdict()
    }

    #[test]
    fn every_case_says_what_is_known() {
        let list = listed();
        let down = ProviderError::Auth {
            message: "invalid x-api-key".into(),
        };
        assert_eq!(
            verdict("claude-haiku-4-5", true, Ok(&list)),
            Verdict::Fine("model: claude-haiku-4-5 (from the next request on)".into())
        );
        assert_eq!(
            verdict("MiniMax-M3", false, Ok(&list)),
            Verdict::Fine(
                "model: MiniMax-M3 (from the next request on; anthropic lists it, but its cost \
                 and context window are unknown to keel)"
                    .into()
            )
        );
        assert_eq!(
            verdict("claude-opus-4.6", false, Ok(&list)),
            Verdict::Doubtful(
                "warning: claude-opus-4.6 is not among the 3 models anthropic lists (did you \
                 mean claude-opus-4-6?); using it anyway from the next request on (its cost and \
                 context window are unknown to keel). /model claude-sonnet-4-5 goes back."
                    .into()
            )
        );
        let Verdict::Doubtful(line) = verdict("claude-sonnet-4-5", true, Ok(&list)) else {
            panic!("a catalog model the provider does not list is doubtful");
        };
        assert!(line.contains("keel's catalog knows it, but the provider will likely refuse it"));
        assert_eq!(
            verdict("claude-sonnet-4-5", true, Err(&down)),
            Verdict::Fine("model: claude-sonnet-4-5 (from the next request on)".into())
        );
        // Ids and errors from the network never move the cursor or clear the screen.
        let hostile = ModelList::new(vec!["claude-opus-4-6\u{1b}[2J".into()]);
        let Verdict::Doubtful(line) = verdict("claude-opus-4-6", false, Ok(&hostile)) else {
            panic!("not listed as typed");
        };
        assert!(
            line.contains("did you mean claude-opus-4-6\u{FFFD}[2J"),
            "{line}"
        );
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
        let garbled = ProviderError::Stream {
            message: "\u{1b}[31mred".into(),
        };
        let Verdict::Doubtful(line) = verdict("gpt-nonsense-9", false, Err(&garbled)) else {
            panic!("unchecked");
        };
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
        let Verdict::Doubtful(line) = verdict("gpt-nonsense-9", false, Err(&down)) else {
            panic!("an unknown model with no list to check is doubtful");
        };
        assert!(
            line.contains("could not be checked: authentication failed: invalid x-api-key"),
            "{line}"
        );
    }
}
