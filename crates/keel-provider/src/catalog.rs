//! What keel knows of each model: context window, output limit and price.
//!
//! Prices are USD per million tokens as the providers publish them; the table says when it was
//! last checked ([`PRICES_CHECKED`]). Anything may be unknown: a model the table lacks, or a
//! host's entry that gives a window but no price. An unknown price gives no cost:
//! [`ModelCatalog::cost`] returns `None` rather than a guess. Hosts add or correct entries with
//! [`ModelCatalog::insert`] (keel's CLI from the user's `[models.NAME]` tables).

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

/// The prices of a request whose prompt is long: some models (Claude Haiku 5.5, OpenAI's
/// GPT-6 family) bill every token of a request whose prompt (uncached, cache-written and
/// cache-read tokens together) is over a threshold at higher rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LongPromptPricing {
    /// Prompts of more than this many tokens are billed at [`pricing`](Self::pricing).
    pub above_tokens: u64,
    /// The prices of such a request, output included.
    pub pricing: Pricing,
}

/// One model's limits and prices; any of them may be unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The canonical id, e.g. `claude-sonnet-5-5`.
    pub id: String,
    /// Tokens of prompt plus output the model can hold; `None`: unknown (never compacted
    /// ahead of time).
    pub context_window: Option<u64>,
    /// The most tokens it may write in one reply; `None`: unknown.
    pub max_output_tokens: Option<u64>,
    /// Its prices; `None`: unknown (no cost is reported).
    pub pricing: Option<Pricing>,
    /// Its prices for a long prompt, when they differ.
    pub long_prompt: Option<LongPromptPricing>,
}

impl ModelInfo {
    /// A model of which nothing is known yet but its id.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            context_window: None,
            max_output_tokens: None,
            pricing: None,
            long_prompt: None,
        }
    }

    /// What one request's `usage` costs in USD, at the long-prompt prices when its prompt is
    /// over their threshold; `None` when the price is unknown.
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        match self.long_prompt {
            Some(long)
                if self.pricing.is_some() && usage.total_input_tokens() > long.above_tokens =>
            {
                Some(long.pricing.cost(usage))
            }
            _ => self.pricing.map(|pricing| pricing.cost(usage)),
        }
    }
}

/// The date the built-in models and prices were last checked against the providers' lists.
///
/// Sources, read 2026-11-28: Anthropic's models overview, pricing and model deprecations pages
/// (platform.claude.com/docs/en/about-claude/models/overview, .../about-claude/pricing,
/// .../about-claude/model-deprecations) and each model's page (`.../models/opus-5-5/overview`
/// and the like); OpenAI's models and pricing pages (developers.openai.com/api/docs/models,
/// .../api/docs/pricing) and each model's page (`.../models/gpt-6.2-sol`,
/// `.../models/gpt-5.3-codex` and the like).
pub const PRICES_CHECKED: &str = "2026-11-28";

/// One built-in model: id, context window, output limit, `[input, output, cache write, cache
/// read]` prices, and the long-prompt threshold and prices where they differ.
struct Row {
    id: &'static str,
    window: u64,
    max_output: u64,
    prices: [f64; 4],
    long: Option<(u64, [f64; 4])>,
}

const fn row(id: &'static str, window: u64, max_output: u64, prices: [f64; 4]) -> Row {
    Row {
        id,
        window,
        max_output,
        prices,
        long: None,
    }
}

impl Row {
    /// This row, billed at `prices` for a request whose prompt is over `above` tokens.
    const fn long(self, above: u64, prices: [f64; 4]) -> Row {
        Row {
            long: Some((above, prices)),
            ..self
        }
    }
}

const fn pricing([input, output, cache_write, cache_read]: [f64; 4]) -> Pricing {
    Pricing {
        input,
        output,
        cache_write,
        cache_read,
    }
}

const M: u64 = 1_000_000;

/// The models keel knows, current and still served. Anthropic bills 5-minute cache writes at
/// 1.25× input; reads at 0.1× (0.05× on Opus 5.5 and Sonnet 5.5, 0.025× on Fable 5.1).
/// Claude Opus 4 and 4.1 are retired on Anthropic's own API but still served on Amazon Bedrock
/// and Google Cloud. OpenAI's GPT-6 models bill cache writes (30-minute retention) at 1.25×
/// input and, above 272K prompt tokens, double input and cache rates and 1.5× output; its
/// older models bill cache writes as input. Retired models (Claude Sonnet 4, 3.7 Sonnet, 3.5
/// Haiku, GPT-5-Codex) are gone.
const BUILT_IN: &[Row] = &[
    // Anthropic.
    row("claude-fable-5-2", M, 128_000, [8.0, 40.0, 10.0, 0.20]),
    row("claude-fable-5-1", M, 128_000, [10.0, 50.0, 12.5, 0.25]),
    row("claude-fable-5", M, 128_000, [10.0, 50.0, 12.5, 1.0]),
    row("claude-opus-5-5", M, 128_000, [4.0, 20.0, 5.0, 0.20]),
    row("claude-opus-5", M, 128_000, [5.0, 25.0, 6.25, 0.50]),
    row("claude-opus-4-8", M, 128_000, [5.0, 25.0, 6.25, 0.50]),
    row("claude-opus-4-7", M, 128_000, [5.0, 25.0, 6.25, 0.50]),
    row("claude-opus-4-6", M, 128_000, [5.0, 25.0, 6.25, 0.50]),
    row("claude-opus-4-5", 200_000, 64_000, [5.0, 25.0, 6.25, 0.50]),
    row(
        "claude-opus-4-1",
        200_000,
        32_000,
        [15.0, 75.0, 18.75, 1.50],
    ),
    row("claude-opus-4", 200_000, 32_000, [15.0, 75.0, 18.75, 1.50]),
    row("claude-sonnet-5-5", M, 128_000, [2.0, 10.0, 2.5, 0.10]),
    row("claude-sonnet-5", M, 128_000, [2.0, 10.0, 2.5, 0.20]),
    row("claude-sonnet-4-6", M, 64_000, [3.0, 15.0, 3.75, 0.30]),
    row(
        "claude-sonnet-4-5",
        200_000,
        64_000,
        [3.0, 15.0, 3.75, 0.30],
    ),
    row("claude-haiku-5-5", M, 128_000, [0.10, 0.50, 0.125, 0.01])
        .long(100_000, [0.50, 2.50, 0.625, 0.05]),
    row("claude-haiku-4-5", 200_000, 64_000, [1.0, 5.0, 1.25, 0.10]),
    // OpenAI.
    row("gpt-6.2-astra", 1_050_000, 128_000, [8.0, 40.0, 10.0, 0.40])
        .long(272_000, [16.0, 60.0, 20.0, 0.80]),
    row("gpt-6.2-sol", 1_050_000, 128_000, [2.0, 10.0, 2.5, 0.10])
        .long(272_000, [4.0, 15.0, 5.0, 0.20]),
    row("gpt-6.1-sol", 1_050_000, 128_000, [2.0, 10.0, 2.5, 0.10])
        .long(272_000, [4.0, 15.0, 5.0, 0.20]),
    row("gpt-6-astra", 1_050_000, 128_000, [10.0, 50.0, 12.5, 1.0])
        .long(272_000, [20.0, 75.0, 25.0, 2.0]),
    row("gpt-6-sol", 1_050_000, 128_000, [2.0, 10.0, 2.5, 0.20])
        .long(272_000, [4.0, 15.0, 5.0, 0.40]),
    row("gpt-6-luna", 1_050_000, 128_000, [0.10, 0.50, 0.125, 0.01])
        .long(272_000, [0.20, 0.75, 0.25, 0.02]),
    row("gpt-5.3-codex", 400_000, 128_000, [1.75, 14.0, 1.75, 0.175]),
    row("gpt-5", 400_000, 128_000, [1.25, 10.0, 1.25, 0.125]),
    row("gpt-5-mini", 400_000, 128_000, [0.25, 2.0, 0.25, 0.025]),
    row("gpt-5-nano", 400_000, 128_000, [0.05, 0.40, 0.05, 0.005]),
    row("gpt-4.1", 1_047_576, 32_768, [2.0, 8.0, 2.0, 0.50]),
    row("gpt-4.1-mini", 1_047_576, 32_768, [0.40, 1.60, 0.40, 0.10]),
    row("gpt-4.1-nano", 1_047_576, 32_768, [0.10, 0.40, 0.10, 0.025]),
    row("gpt-4o", 128_000, 16_384, [2.50, 10.0, 2.50, 1.25]),
    row("gpt-4o-mini", 128_000, 16_384, [0.15, 0.60, 0.15, 0.075]),
    row("o3", 200_000, 100_000, [2.0, 8.0, 2.0, 0.50]),
    row("o4-mini", 200_000, 100_000, [1.10, 4.40, 1.10, 0.275]),
];

/// Model ids to the canonical id they are billed as.
const ALIASES: &[(&str, &str)] = &[("claude-opus-4-0", "claude-opus-4")];

/// The names people use for models (Claude Code's `--model sonnet`, and `gpt` and `codex`),
/// and the model each names today: the newest of each Claude family, OpenAI's flagship GPT
/// model and its current Codex model (which OpenAI serves on the Responses API only).
const FAMILY_ALIASES: &[(&str, &str)] = &[
    ("sonnet", "claude-sonnet-5-5"),
    ("opus", "claude-opus-5-5"),
    ("haiku", "claude-haiku-5-5"),
    ("gpt", "gpt-6.2-astra"),
    ("codex", "gpt-5.3-codex"),
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
    /// The models keel knows out of the box (see [`PRICES_CHECKED`]).
    pub fn built_in() -> Self {
        let models = BUILT_IN
            .iter()
            .map(|row| {
                let info = ModelInfo {
                    id: row.id.to_owned(),
                    context_window: Some(row.window),
                    max_output_tokens: Some(row.max_output),
                    pricing: Some(pricing(row.prices)),
                    long_prompt: row.long.map(|(above_tokens, prices)| LongPromptPricing {
                        above_tokens,
                        pricing: pricing(prices),
                    }),
                };
                (row.id.to_owned(), info)
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
    /// `gpt-4o-2024-08-06`), `-latest` and router prefixes (`anthropic/claude-sonnet-4-5`)
    /// are resolved to their model; anything else must match exactly.
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

    /// The context window of `model`, if the catalog knows it.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.get(model).and_then(|info| info.context_window)
    }

    /// The model a name people use stands for: `sonnet`, `opus` and `haiku` (as Claude Code
    /// takes them) are the newest of their family keel knows; `gpt` is OpenAI's flagship GPT
    /// model and `codex` its current Codex model. Any other name is given back as it is.
    ///
    /// ```
    /// use keel_provider::ModelCatalog;
    ///
    /// assert_eq!(ModelCatalog::expand_alias("sonnet"), "claude-sonnet-5-5");
    /// assert_eq!(ModelCatalog::expand_alias("codex"), "gpt-5.3-codex");
    /// assert_eq!(ModelCatalog::expand_alias("gpt-4.1"), "gpt-4.1");
    /// ```
    pub fn expand_alias(name: &str) -> &str {
        FAMILY_ALIASES
            .iter()
            .find(|(alias, _)| *alias == name.trim())
            .map_or(name, |(_, model)| model)
    }

    /// What one request's `usage` on `model` costs in USD (see [`ModelInfo::cost`]); `None`
    /// when the model or its price is unknown.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.get(model).and_then(|info| info.cost(usage))
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
            ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
            ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
            ("claude-opus-4-5-latest", "claude-opus-4-5"),
            ("gpt-4o-2024-08-06", "gpt-4o"),
            ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
            ("anthropic/claude-haiku-5-5", "claude-haiku-5-5"),
            ("openai/gpt-6.2-sol", "gpt-6.2-sol"),
            ("claude-opus-4-0", "claude-opus-4"),
        ] {
            assert_eq!(
                catalog.get(id).map(|m| m.id.as_str()),
                Some(expected),
                "{id}"
            );
        }
        for unknown in [
            "gpt-4o-mega",
            "claude",
            "llama3.1:8b",
            "gpt-4",
            "",
            "sonnet",
        ] {
            assert!(catalog.get(unknown).is_none(), "{unknown}");
        }
    }

    #[test]
    fn retired_models_are_gone_and_every_row_is_whole() {
        let catalog = ModelCatalog::built_in();
        for retired in [
            "claude-3-7-sonnet",
            "claude-3-5-haiku",
            "claude-sonnet-4",
            "gpt-5-codex",
        ] {
            assert!(catalog.get(retired).is_none(), "{retired}");
        }
        for id in catalog.ids() {
            let info = catalog.get(id).unwrap();
            let pricing = info.pricing.unwrap();
            assert!(
                info.context_window.unwrap() > info.max_output_tokens.unwrap(),
                "{id}"
            );
            assert!(
                pricing.output > pricing.input && pricing.cache_read < pricing.input,
                "{id}"
            );
            if let Some(long) = info.long_prompt {
                assert!(long.pricing.input > pricing.input, "{id}");
                assert!(long.above_tokens < info.context_window.unwrap(), "{id}");
            }
        }
        assert_eq!(PRICES_CHECKED, "2026-11-28");
    }

    #[test]
    fn names_people_use_are_the_newest_models_the_catalog_knows() {
        let catalog = ModelCatalog::built_in();
        for (alias, _) in FAMILY_ALIASES {
            let model = ModelCatalog::expand_alias(alias);
            assert_ne!(model, *alias);
            assert!(catalog.get(model).is_some(), "{alias} -> {model}");
        }
        for (alias, model) in [
            ("sonnet", "claude-sonnet-5-5"),
            ("opus", "claude-opus-5-5"),
            (" haiku ", "claude-haiku-5-5"),
            ("gpt", "gpt-6.2-astra"),
            ("codex", "gpt-5.3-codex"),
        ] {
            assert_eq!(ModelCatalog::expand_alias(alias), model);
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
    fn a_long_prompt_is_billed_at_its_own_prices() {
        let catalog = ModelCatalog::built_in();
        let usage = |prompt: u64| Usage {
            input_tokens: prompt - 40_000,
            output_tokens: 1_000_000,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 40_000,
        };
        // At 100,000 prompt tokens: 0.06 × 0.10 + 1 × 0.50 + 0.04 × 0.01.
        let short = catalog.cost("claude-haiku-5-5", &usage(100_000)).unwrap();
        assert!((short - 0.5064).abs() < 1e-9, "{short}");
        // One more token: 0.060001 × 0.50 + 1 × 2.50 + 0.04 × 0.05.
        let long = catalog.cost("claude-haiku-5-5", &usage(100_001)).unwrap();
        assert!((long - 2.5320005).abs() < 1e-9, "{long}");
        // GPT-6.2 Sol's threshold is 272K.
        let sol = |prompt| catalog.cost("gpt-6.2-sol", &usage(prompt)).unwrap();
        assert!(
            sol(272_001) > sol(272_000) * 1.4,
            "{} {}",
            sol(272_000),
            sol(272_001)
        );
        // A model without long-prompt prices is billed the same at any length.
        let flat = |prompt| catalog.cost("claude-sonnet-5-5", &usage(prompt)).unwrap();
        assert!((flat(900_000) - flat(100_000) - 0.8 * 2.0).abs() < 1e-9);
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
        assert!(catalog.cost("claude-haiku-5-5", &max).unwrap().is_finite());

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
    fn hosts_can_add_models_knowing_only_part_of_them() {
        let mut catalog = ModelCatalog::empty();
        catalog.insert(ModelInfo {
            pricing: Some(Pricing {
                input: 0.0,
                output: 0.0,
                cache_write: 0.0,
                cache_read: 0.0,
            }),
            ..ModelInfo::new("local")
        });
        catalog.insert(ModelInfo {
            context_window: Some(32_768),
            ..ModelInfo::new("qwen3:8b")
        });
        assert_eq!(catalog.cost("local", &Usage::default()), Some(0.0));
        assert_eq!(catalog.context_window("local"), None);
        assert_eq!(catalog.cost("qwen3:8b", &Usage::default()), None);
        assert_eq!(catalog.context_window("qwen3:8b"), Some(32_768));
        assert_eq!(catalog.cost("gpt-4o", &Usage::default()), None);
    }
}
