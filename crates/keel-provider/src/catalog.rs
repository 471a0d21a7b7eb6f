//! What keel knows of each model: context window, output limit and price.
//!
//! Prices are USD per million tokens as the providers publish them; the table says when it was
//! last checked. An unknown model has no price: [`ModelCatalog::cost`] returns `None` rather
//! than a guess. Hosts add or correct entries with [`ModelCatalog::insert`].

use std::collections::HashMap;

use crate::types::Usage;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pricing {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Prompt tokens written to the cache.
    pub cache_write: f64,
    /// Prompt tokens read from the cache.
    pub cache_read: f64,
}

impl Pricing {
    /// What `usage` costs at these prices, in USD.
    ///
    /// Always a finite number, growing with the counts: tokens are converted to `f64` (exact up
    /// to 2^53, then rounded, never wrapped), each product is taken per million tokens first,
    /// and a sum beyond `f64`'s range saturates at `f64::MAX`. A price that is NaN counts as
    /// zero.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let part = |tokens: u64, price: f64| {
            let price = if price.is_nan() { 0.0 } else { price };
            (tokens as f64 / 1_000_000.0) * price
        };
        let total = part(usage.input_tokens, self.input)
            + part(usage.output_tokens, self.output)
            + part(usage.cache_creation_input_tokens, self.cache_write)
            + part(usage.cache_read_input_tokens, self.cache_read);
        if total.is_nan() {
            // Only +inf and -inf prices together get here.
            0.0
        } else {
            total.clamp(-f64::MAX, f64::MAX)
        }
    }
}

/// One model's limits and prices.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The canonical id, e.g. `claude-sonnet-4-5`.
    pub id: String,
    /// Tokens of prompt plus output the model can hold.
    pub context_window: u64,
    /// The most tokens it may write in one reply.
    pub max_output_tokens: u64,
    /// Its prices.
    pub pricing: Pricing,
}

/// The date the built-in prices were last checked against the providers' price lists.
pub const PRICES_CHECKED: &str = "2025-11-24";

/// `(id, context window, max output, input, output, cache write, cache read)`.
type Row = (&'static str, u64, u64, f64, f64, f64, f64);

/// Anthropic bills cache writes (5-minute) at 1.25× input and reads at 0.1×; OpenAI does not
/// bill cache writes beyond input and discounts cached reads.
const BUILT_IN: &[Row] = &[
    ("claude-opus-4-5", 200_000, 64_000, 5.0, 25.0, 6.25, 0.50),
    ("claude-opus-4-1", 200_000, 32_000, 15.0, 75.0, 18.75, 1.50),
    ("claude-opus-4", 200_000, 32_000, 15.0, 75.0, 18.75, 1.50),
    ("claude-sonnet-4-5", 200_000, 64_000, 3.0, 15.0, 3.75, 0.30),
    ("claude-sonnet-4", 200_000, 64_000, 3.0, 15.0, 3.75, 0.30),
    ("claude-3-7-sonnet", 200_000, 64_000, 3.0, 15.0, 3.75, 0.30),
    ("claude-haiku-4-5", 200_000, 64_000, 1.0, 5.0, 1.25, 0.10),
    ("claude-3-5-haiku", 200_000, 8_192, 0.80, 4.0, 1.0, 0.08),
    ("gpt-5", 400_000, 128_000, 1.25, 10.0, 1.25, 0.125),
    ("gpt-5-mini", 400_000, 128_000, 0.25, 2.0, 0.25, 0.025),
    ("gpt-5-nano", 400_000, 128_000, 0.05, 0.40, 0.05, 0.005),
    ("gpt-4.1", 1_047_576, 32_768, 2.0, 8.0, 2.0, 0.50),
    ("gpt-4.1-mini", 1_047_576, 32_768, 0.40, 1.60, 0.40, 0.10),
    ("gpt-4.1-nano", 1_047_576, 32_768, 0.10, 0.40, 0.10, 0.025),
    ("gpt-4o", 128_000, 16_384, 2.50, 10.0, 2.50, 1.25),
    ("gpt-4o-mini", 128_000, 16_384, 0.15, 0.60, 0.15, 0.075),
    ("o3", 200_000, 100_000, 2.0, 8.0, 2.0, 0.50),
    ("o4-mini", 200_000, 100_000, 1.10, 4.40, 1.10, 0.275),
];

/// Model ids to the canonical id they are billed as.
const ALIASES: &[(&str, &str)] = &[
    ("claude-opus-4-0", "claude-opus-4"),
    ("claude-sonnet-4-0", "claude-sonnet-4"),
    ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
    ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
];

/// Claude Code's family aliases (`--model sonnet`), and the model each names today.
const FAMILY_ALIASES: &[(&str, &str)] = &[
    ("sonnet", "claude-sonnet-4-5"),
    ("opus", "claude-opus-4-5"),
    ("haiku", "claude-haiku-4-5"),
];

/// A table of models, looked up by id.
#[derive(Debug, Clone)]
pub struct ModelCatalog {
    models: HashMap<String, ModelInfo>,
}

impl Default for ModelCatalog {
    fn default() -> Self {
        Self::built_in()
    }
}

impl ModelCatalog {
    /// The models keel knows out of the box.
    pub fn built_in() -> Self {
        let models = BUILT_IN
            .iter()
            .map(|&(id, context_window, max_output_tokens, i, o, w, r)| {
                (
                    id.to_owned(),
                    ModelInfo {
                        id: id.to_owned(),
                        context_window,
                        max_output_tokens,
                        pricing: Pricing {
                            input: i,
                            output: o,
                            cache_write: w,
                            cache_read: r,
                        },
                    },
                )
            })
            .collect();
        Self { models }
    }

    /// An empty catalog.
    pub fn empty() -> Self {
        Self {
            models: HashMap::new(),
        }
    }

    /// Adds or replaces a model.
    pub fn insert(&mut self, info: ModelInfo) {
        self.models.insert(info.id.clone(), info);
    }

    /// The ids of the models in the catalog, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.models.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// The model `id` names. Dated snapshots (`claude-sonnet-4-5-20250929`,
    /// `gpt-4o-2024-08-06`), `-latest` and router prefixes (`anthropic/claude-sonnet-4`) are
    /// resolved to their model; anything else must match exactly.
    pub fn get(&self, id: &str) -> Option<&ModelInfo> {
        let id = id.trim();
        if let Some(info) = self.models.get(id) {
            return Some(info);
        }
        let id = id.rsplit_once('/').map_or(id, |(_, model)| model);
        let base = strip_version_suffix(id);
        let canonical = ALIASES
            .iter()
            .find(|(alias, _)| *alias == id || *alias == base)
            .map_or(base, |(_, canonical)| canonical);
        self.models.get(canonical)
    }

    /// The model a family alias names, as Claude Code takes them: `sonnet`, `opus` and
    /// `haiku` are the newest of their family keel knows; any other name is given back as
    /// it is.
    ///
    /// ```
    /// use keel_provider::ModelCatalog;
    ///
    /// assert_eq!(ModelCatalog::expand_alias("sonnet"), "claude-sonnet-4-5");
    /// assert_eq!(ModelCatalog::expand_alias("gpt-4.1"), "gpt-4.1");
    /// ```
    pub fn expand_alias(name: &str) -> &str {
        FAMILY_ALIASES
            .iter()
            .find(|(alias, _)| *alias == name.trim())
            .map_or(name, |(_, model)| model)
    }

    /// What `usage` on `model` costs in USD; `None` when the model is unknown.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.get(model).map(|info| info.pricing.cost(usage))
    }
}

/// `id` without a trailing `-YYYYMMDD`, `-YYYY-MM-DD` or `-latest`.
fn strip_version_suffix(id: &str) -> &str {
    if let Some(base) = id.strip_suffix("-latest") {
        return base;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((base, date)) = id.rsplit_once('-')
        && date.len() == 8
        && digits(date)
    {
        return base;
    }
    let parts: Vec<&str> = id.rsplitn(4, '-').collect();
    if let [day, month, year, base] = parts[..]
        && year.len() == 4
        && month.len() == 2
        && day.len() == 2
        && digits(year)
        && digits(month)
        && digits(day)
    {
        return base;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_and_prefixes_resolve_to_their_model() {
        let catalog = ModelCatalog::built_in();
        for (id, expected) in [
            ("claude-sonnet-4-20250514", "claude-sonnet-4"),
            ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
            ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
            ("gpt-4o-2024-08-06", "gpt-4o"),
            ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
            ("anthropic/claude-haiku-4-5", "claude-haiku-4-5"),
            ("claude-opus-4-0", "claude-opus-4"),
        ] {
            assert_eq!(
                catalog.get(id).map(|m| m.id.as_str()),
                Some(expected),
                "{id}"
            );
        }
        for unknown in ["gpt-4o-mega", "claude", "llama3.1:8b", "gpt-4", ""] {
            assert!(catalog.get(unknown).is_none(), "{unknown}");
        }
    }

    #[test]
    fn family_aliases_name_models_the_catalog_knows() {
        let catalog = ModelCatalog::built_in();
        for (alias, _) in FAMILY_ALIASES {
            let model = ModelCatalog::expand_alias(alias);
            assert_ne!(model, *alias);
            assert!(catalog.get(model).is_some(), "{alias} -> {model}");
        }
        assert_eq!(
            ModelCatalog::expand_alias("claude-opus-4-1"),
            "claude-opus-4-1"
        );
    }

    #[test]
    fn cost_counts_every_kind_of_token() {
        let catalog = ModelCatalog::built_in();
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_creation_input_tokens: 200_000,
            cache_read_input_tokens: 2_000_000,
        };
        // 3.00 + 1.50 + 0.75 + 0.60
        let cost = catalog.cost("claude-sonnet-4-5", &usage).unwrap();
        assert!((cost - 5.85).abs() < 1e-9, "{cost}");
        assert_eq!(catalog.cost("my-local-model", &usage), None);
    }

    #[test]
    fn absurd_usage_costs_a_finite_saturated_amount() {
        let catalog = ModelCatalog::built_in();
        let max = Usage {
            input_tokens: u64::MAX,
            output_tokens: u64::MAX,
            cache_creation_input_tokens: u64::MAX,
            cache_read_input_tokens: u64::MAX,
        };
        // 2^64 tokens of each kind at 3 + 15 + 3.75 + 0.30 USD per million.
        let cost = catalog.cost("claude-sonnet-4-5", &max).unwrap();
        let expected = (u64::MAX as f64 / 1e6) * 22.05;
        assert!(
            cost.is_finite() && (cost / expected - 1.0).abs() < 1e-12,
            "{cost}"
        );
        // More tokens never cost less: no wrap-around anywhere.
        let less = Usage {
            input_tokens: u64::MAX - 1,
            ..max
        };
        assert!(catalog.cost("claude-sonnet-4-5", &less).unwrap() <= cost);

        let absurd = |price: f64| Pricing {
            input: price,
            output: price,
            cache_write: price,
            cache_read: price,
        };
        assert_eq!(absurd(f64::MAX).cost(&max), f64::MAX);
        assert_eq!(absurd(f64::INFINITY).cost(&max), f64::MAX);
        assert_eq!(absurd(f64::NAN).cost(&max), 0.0);
        let mixed = Pricing {
            input: f64::INFINITY,
            output: f64::NEG_INFINITY,
            ..absurd(1.0)
        };
        assert!(mixed.cost(&max).is_finite());
        assert_eq!(absurd(1.0).cost(&Usage::default()), 0.0);
    }

    #[test]
    fn hosts_can_add_models() {
        let mut catalog = ModelCatalog::empty();
        catalog.insert(ModelInfo {
            id: "local".into(),
            context_window: 8192,
            max_output_tokens: 2048,
            pricing: Pricing {
                input: 0.0,
                output: 0.0,
                cache_write: 0.0,
                cache_read: 0.0,
            },
        });
        assert_eq!(catalog.cost("local", &Usage::default()), Some(0.0));
        assert_eq!(catalog.cost("gpt-4o", &Usage::default()), None);
    }
}
