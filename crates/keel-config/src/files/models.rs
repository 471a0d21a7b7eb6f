//! What a config says of models: `[models.NAME]` tables, `context_window` and
//! `compaction_model`.
//!
//! A `[models.NAME]` table is either a tier (`small`, or its other name `fast`; `strong`) or a
//! model id (`[models."qwen3:8b"]`). A tier table names its `model` and may name the
//! `provider` serving it (`anthropic`, `openai` or a `[providers.NAME]` table), so the cheap
//! tier can run on a local server while the main loop uses a hosted model. Any table may give
//! the model's `context_window`, `max_output_tokens` and prices in USD per million tokens
//! (`input_price`, `output_price`, `cache_write_price`, `cache_read_price`), which go into the
//! catalog every run prices and compacts with. These are power keys: honoured from the user's
//! config and from a trusted project only (a tier could send the work elsewhere; a price could
//! defeat `--max-budget-usd`).

use std::collections::BTreeMap;

use keel::provider::{ModelCatalog, ModelInfo, Pricing};
use serde::{Deserialize, Deserializer};

/// A `[models.NAME]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelTable {
    /// The provider serving the model: `anthropic`, `openai` or a `[providers.NAME]` name.
    pub provider: Option<String>,
    /// The model a tier runs (tier tables only).
    pub model: Option<String>,
    /// Tokens of prompt plus output the model holds.
    #[serde(default, deserialize_with = "tokens")]
    pub context_window: Option<u64>,
    /// The most tokens it writes in one reply.
    #[serde(default, deserialize_with = "tokens")]
    pub max_output_tokens: Option<u64>,
    /// USD per million uncached prompt tokens.
    #[serde(default, deserialize_with = "price")]
    pub input_price: Option<f64>,
    /// USD per million output tokens.
    #[serde(default, deserialize_with = "price")]
    pub output_price: Option<f64>,
    /// USD per million prompt tokens written to the cache (default: the input price).
    #[serde(default, deserialize_with = "price")]
    pub cache_write_price: Option<f64>,
    /// USD per million prompt tokens read from the cache (default: the input price).
    #[serde(default, deserialize_with = "price")]
    pub cache_read_price: Option<f64>,
}

/// A tier a `[models.NAME]` table may configure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// `small` (or `fast`): the cheap model for simple jobs.
    Small,
    /// `strong`: the model for the hardest jobs.
    Strong,
}

impl Tier {
    /// The tier a table name stands for, if it is one.
    pub fn of(name: &str) -> Option<Self> {
        match name {
            "small" | "fast" => Some(Self::Small),
            "strong" => Some(Self::Strong),
            _ => None,
        }
    }
}

/// A count of tokens: at least 1.
pub(super) fn tokens<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let value = u64::deserialize(deserializer)?;
    if value == 0 {
        return Err(serde::de::Error::custom(
            "must be at least 1 (a number of tokens)",
        ));
    }
    Ok(Some(value))
}

/// A price in USD per million tokens: a finite number, 0 or more.
fn price<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    let value = f64::deserialize(deserializer)?;
    if !value.is_finite() || value < 0.0 {
        return Err(serde::de::Error::custom(format!(
            "{value} is not a price: give USD per million tokens, 0 or more"
        )));
    }
    Ok(Some(value))
}

/// A problem with the `[models]` tables or `compaction_model` serde cannot see: what is wrong,
/// and the key it is at (for the line).
pub(super) struct Problem {
    /// What is wrong and how to fix it.
    pub message: String,
    /// The key's path, e.g. `["models", "small", "model"]`.
    pub path: Vec<String>,
}

/// Checks one file's `[models]` tables and `compaction_model`.
pub(super) fn check(
    models: &BTreeMap<String, ModelTable>,
    compaction_model: Option<&str>,
) -> Result<(), Problem> {
    let problem = |path: &[&str], message: String| Problem {
        message,
        path: path.iter().map(|part| (*part).to_owned()).collect(),
    };
    if compaction_model.is_some_and(|model| model.trim().is_empty()) {
        return Err(problem(
            &["compaction_model"],
            "`compaction_model` is empty: name a tier (small, strong) or a model, or leave the \
             key out"
                .into(),
        ));
    }
    if models.contains_key("small") && models.contains_key("fast") {
        return Err(problem(
            &["models", "fast"],
            "`models.small` and `models.fast` are the same tier: keep one of them".into(),
        ));
    }
    for (name, table) in models {
        let key = format!("models.{}", quoted(name));
        let at = |field: &'static str| vec!["models", name.as_str(), field];
        if name.trim().is_empty() {
            return Err(problem(
                &["models"],
                "a `[models]` table has an empty name".into(),
            ));
        }
        if name == "default" {
            return Err(problem(
                &["models", name],
                "`models.default`: the default model is the top-level `model` (served by \
                 `provider`, its window set by `context_window`); use `[models.\"MODEL-ID\"]` \
                 for its prices"
                    .into(),
            ));
        }
        for (field, value) in [("provider", &table.provider), ("model", &table.model)] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(problem(
                    &at(field),
                    format!("`{key}.{field}` is empty: name one or leave the key out"),
                ));
            }
        }
        match (Tier::of(name), &table.model) {
            (Some(_), None) => {
                return Err(problem(
                    &["models", name],
                    format!(
                        "`{key}` names no model: add `model = \"MODEL-ID\"`, the model the \
                         {name} tier runs"
                    ),
                ));
            }
            (None, Some(_)) => {
                return Err(problem(
                    &at("model"),
                    format!(
                        "`{key}.model`: only a tier table (small, fast, strong) names a model; \
                         `[models.{}]` describes the model of that id",
                        quoted(name)
                    ),
                ));
            }
            _ => {}
        }
        if table.output_price.is_some() && table.input_price.is_none() {
            return Err(problem(
                &at("output_price"),
                format!("`{key}` has an output price but no `input_price`: give both"),
            ));
        }
        if table.input_price.is_some() && table.output_price.is_none() {
            return Err(problem(
                &at("input_price"),
                format!("`{key}` has an input price but no `output_price`: give both"),
            ));
        }
        if let (Some(window), Some(output)) = (table.context_window, table.max_output_tokens)
            && output >= window
        {
            return Err(problem(
                &at("max_output_tokens"),
                format!(
                    "`{key}.max_output_tokens` ({output}) must be below its `context_window` \
                     ({window})"
                ),
            ));
        }
    }
    Ok(())
}

/// `name` as a TOML key: bare when it can be, else quoted.
fn quoted(name: &str) -> String {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        name.to_owned()
    } else {
        format!("\"{name}\"")
    }
}

/// The 1-based line of the key at `path` in `text` (of its last part found), if the text
/// parses.
pub(super) fn line_of_key(text: &str, path: &[String]) -> Option<usize> {
    let document = toml::de::DeTable::parse(text).ok()?;
    let mut table = document.get_ref();
    let mut span = None;
    for part in path {
        let Some((key, value)) = table.iter().find(|(key, _)| key.get_ref() == part) else {
            break;
        };
        span = Some(key.span());
        match value.get_ref() {
            toml::de::DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    super::parse::line_of(text, span)
}

/// `later`'s tables over `earlier`'s (a project's over the user's): a tier table replaces the
/// tier's whole (its model and its provider go together: small and fast are one tier); a
/// model's table wins key by key.
pub fn merge(earlier: &mut BTreeMap<String, ModelTable>, later: BTreeMap<String, ModelTable>) {
    for (name, table) in later {
        if let Some(tier) = Tier::of(&name) {
            earlier.retain(|known, _| Tier::of(known) != Some(tier));
            earlier.insert(name, table);
            continue;
        }
        let entry = earlier.entry(name).or_default();
        let ModelTable {
            provider,
            model,
            context_window,
            max_output_tokens,
            input_price,
            output_price,
            cache_write_price,
            cache_read_price,
        } = table;
        macro_rules! over {
            ($($field:ident),*) => { $( if $field.is_some() { entry.$field = $field; } )* };
        }
        over!(
            provider,
            model,
            context_window,
            max_output_tokens,
            input_price,
            output_price,
            cache_write_price,
            cache_read_price
        );
    }
}

/// A table's keys as written, in one line (`keel config` shows it).
pub fn describe(table: &ModelTable) -> String {
    let mut keys = Vec::new();
    let mut text = |key: &str, value: &Option<String>| {
        if let Some(value) = value {
            keys.push(format!("{key} = {value:?}"));
        }
    };
    text("provider", &table.provider);
    text("model", &table.model);
    for (key, value) in [
        ("context_window", table.context_window),
        ("max_output_tokens", table.max_output_tokens),
    ] {
        if let Some(value) = value {
            keys.push(format!("{key} = {value}"));
        }
    }
    for (key, value) in [
        ("input_price", table.input_price),
        ("output_price", table.output_price),
        ("cache_write_price", table.cache_write_price),
        ("cache_read_price", table.cache_read_price),
    ] {
        if let Some(value) = value {
            keys.push(format!("{key} = {value}"));
        }
    }
    keys.join(", ")
}

/// The model id a table describes: a tier table's `model` (a name people use, `haiku`, as
/// the model it names: the id requests carry), else its name.
pub fn model_id<'a>(name: &'a str, table: &'a ModelTable) -> &'a str {
    match Tier::of(name) {
        Some(_) => ModelCatalog::expand_alias(table.model.as_deref().unwrap_or(name).trim()),
        None => name.trim(),
    }
}

/// The table configuring `tier`, if any (`small` or `fast` for the small tier).
pub fn tier(models: &BTreeMap<String, ModelTable>, tier: Tier) -> Option<&ModelTable> {
    models
        .iter()
        .find(|(name, _)| Tier::of(name) == Some(tier))
        .map(|(_, table)| table)
}

/// The built-in catalog with `models`' windows, limits and prices over it: a field a table
/// leaves out keeps the catalog's value for that model (none for a model it does not know;
/// cache prices default to the input price). Prices a table gives replace the model's
/// long-prompt prices too.
pub fn catalog(models: &BTreeMap<String, ModelTable>) -> ModelCatalog {
    let mut catalog = ModelCatalog::built_in();
    for (name, table) in models {
        let id = model_id(name, table);
        let mut info = catalog
            .get(id)
            .cloned()
            .map(|info| ModelInfo {
                id: id.to_owned(),
                ..info
            })
            .unwrap_or_else(|| ModelInfo::new(id));
        if let Some(window) = table.context_window {
            info.context_window = Some(window);
        }
        if let Some(output) = table.max_output_tokens {
            info.max_output_tokens = Some(output);
        }
        if let (Some(input), Some(output)) = (table.input_price, table.output_price) {
            info.pricing = Some(Pricing {
                input,
                output,
                cache_write: table.cache_write_price.unwrap_or(input),
                cache_read: table.cache_read_price.unwrap_or(input),
            });
            info.long_prompt = None;
        } else if let Some(pricing) = &mut info.pricing {
            if let Some(price) = table.cache_write_price {
                pricing.cache_write = price;
            }
            if let Some(price) = table.cache_read_price {
                pricing.cache_read = price;
            }
        }
        catalog.insert(info);
    }
    catalog
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> BTreeMap<String, ModelTable> {
        #[derive(Deserialize)]
        struct File {
            models: BTreeMap<String, ModelTable>,
        }
        toml::from_str::<File>(text).unwrap().models
    }

    #[test]
    fn a_tier_named_by_alias_describes_the_model_requests_carry() {
        let models = table(
            "[models.small]\nprovider = \"gateway\"\nmodel = \" haiku \"\ninput_price = 0\noutput_price = 0\n",
        );
        let id = model_id("small", &models["small"]);
        // The id the router routes and the catalog prices: the one a request for `haiku`
        // carries after the alias is expanded.
        assert_eq!(id, ModelCatalog::expand_alias("haiku"));
        assert_ne!(id, "haiku");
        assert_eq!(
            catalog(&models)
                .get(id)
                .and_then(|info| info.pricing)
                .map(|p| p.input),
            Some(0.0)
        );
    }

    #[test]
    fn tables_give_the_catalog_windows_and_prices_over_the_built_in_ones() {
        let models = table(
            r#"
[models.small]
provider = "local"
model = "qwen3:8b"
context_window = 32768
input_price = 0
output_price = 0

[models."claude-sonnet-4-5"]
context_window = 1000000
cache_read_price = 0.25

[models."my-gateway-model"]
input_price = 2
output_price = 8
"#,
        );
        let catalog = catalog(&models);
        let qwen = catalog.get("qwen3:8b").unwrap();
        assert_eq!(qwen.context_window, Some(32_768));
        assert_eq!(qwen.max_output_tokens, None);
        assert_eq!(qwen.pricing.unwrap().cache_read, 0.0);
        let sonnet = catalog.get("claude-sonnet-4-5").unwrap();
        assert_eq!(sonnet.context_window, Some(1_000_000));
        assert_eq!(sonnet.max_output_tokens, Some(64_000), "kept");
        let pricing = sonnet.pricing.unwrap();
        assert_eq!((pricing.input, pricing.cache_read), (3.0, 0.25));
        let gateway = catalog.get("my-gateway-model").unwrap();
        assert_eq!(
            gateway.context_window, None,
            "no window: never compacted early"
        );
        let pricing = gateway.pricing.unwrap();
        assert_eq!((pricing.cache_write, pricing.cache_read), (2.0, 2.0));
        assert_eq!(
            tier(&models, Tier::Small).unwrap().model.as_deref(),
            Some("qwen3:8b")
        );
        assert!(tier(&models, Tier::Strong).is_none());
    }

    /// Parses `text` as the user's file; the error as it is printed.
    fn parse_text(text: &str) -> Result<(), String> {
        super::super::parse::parse(std::path::Path::new("/home/me/.keel/config.toml"), text)
            .map(|_| ())
            .map_err(|err| err.to_string())
    }

    #[test]
    fn bad_tables_are_one_line_naming_the_file_line_and_key() {
        let file = "/home/me/.keel/config.toml";
        let cases = [
            (
                "[models.small]\nprovider = \"local\"\n",
                ":1: `models.small` names no model: add `model = \"MODEL-ID\"`",
            ),
            (
                "\n[models.\"qwen3:8b\"]\ninput_price = -1\noutput_price = 1\n",
                ":3: bad value for `models.qwen3:8b.input_price`: -1 is not a price: give USD \
                 per million tokens, 0 or more",
            ),
            (
                "[models.m]\ninput_price = 1\noutput_price = nan\n",
                ":3: bad value for `models.m.output_price`: NaN is not a price",
            ),
            (
                "model = \"x\"\ncontext_window = 0\n",
                ":2: bad value for `context_window`: must be at least 1 (a number of tokens)",
            ),
            (
                "[models.small]\nmodel = \"x\"\ncontext_window = -5\n",
                ":3: bad value for `models.small.context_window`: ",
            ),
            (
                "[models.small]\nmodel = \"x\"\ncontxt_window = 5\n",
                ":3: unknown key `contxt_window` in `models.small`; allowed keys: provider, \
                 model, context_window, max_output_tokens, input_price, output_price, \
                 cache_write_price, cache_read_price",
            ),
            (
                "[models.default]\nmodel = \"x\"\n",
                ":1: `models.default`: the default model is the top-level `model`",
            ),
            (
                "[models.small]\nmodel = \"a\"\n[models.fast]\nmodel = \"b\"\n",
                ":3: `models.small` and `models.fast` are the same tier: keep one of them",
            ),
            (
                "max_iterations = 3\ncompaction_model = \" \"\n",
                ":2: `compaction_model` is empty",
            ),
            (
                "[models.\"gpt-6-luna\"]\nmodel = \"x\"\n",
                ":2: `models.gpt-6-luna.model`: only a tier table (small, fast, strong) names a \
                 model",
            ),
            (
                "[models.m]\n\ninput_price = 1\n",
                ":3: `models.m` has an input price but no `output_price`: give both",
            ),
            (
                "[models.small]\nprovider = \"\"\nmodel = \"x\"\n",
                ":2: `models.small.provider` is empty",
            ),
            (
                "[models.m]\ncontext_window = 1000\nmax_output_tokens = 1000\n",
                ":3: `models.m.max_output_tokens` (1000) must be below its `context_window` \
                 (1000)",
            ),
        ];
        for (text, expected) in cases {
            let message = parse_text(text).unwrap_err();
            assert!(
                message.starts_with(&format!("{file}{expected}")),
                "for {text:?}:\n  got      {message}\n  expected {file}{expected}"
            );
            assert!(!message.contains('\n'), "one line: {message:?}");
        }
        assert_eq!(
            parse_text(
                "context_window = 200000\ncompaction_model = \"small\"\n[models.fast]\n\
                 provider = \"local\"\nmodel = \"qwen3:8b\"\ninput_price = 0\noutput_price = 0\n"
            ),
            Ok(())
        );
    }

    #[test]
    fn a_later_file_replaces_a_tier_and_wins_key_by_key_for_a_model() {
        let mut user = table(
            "[models.small]\nprovider = \"local\"\nmodel = \"qwen3:8b\"\n\
             [models.m]\ncontext_window = 1000\ninput_price = 1\noutput_price = 2\n",
        );
        merge(
            &mut user,
            table(
                "[models.fast]\nmodel = \"claude-haiku-5-5\"\n[models.strong]\nmodel = \"o3\"\n\
                 [models.m]\ncontext_window = 2000\n",
            ),
        );
        assert!(!user.contains_key("small"), "fast is the same tier");
        assert_eq!(
            user["fast"].provider, None,
            "the tier is the later file's, whole"
        );
        assert_eq!(user["fast"].model.as_deref(), Some("claude-haiku-5-5"));
        assert_eq!(user["strong"].model.as_deref(), Some("o3"));
        assert_eq!(user["m"].context_window, Some(2000));
        assert_eq!(user["m"].input_price, Some(1.0));
    }

    #[test]
    fn keys_are_found_on_their_lines() {
        let text = "model = \"x\"\n\n[models.small]\nprovider = \"local\"\n\n[models.\"qwen3:8b\"]\ninput_price = 1\n";
        let path = |parts: &[&str]| parts.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
        assert_eq!(line_of_key(text, &path(&["models", "small"])), Some(3));
        assert_eq!(
            line_of_key(text, &path(&["models", "small", "provider"])),
            Some(4)
        );
        assert_eq!(
            line_of_key(text, &path(&["models", "qwen3:8b", "input_price"])),
            Some(7)
        );
        assert_eq!(line_of_key(text, &path(&["model"])), Some(1));
        assert_eq!(line_of_key("[[[", &path(&["model"])), None);
    }
}
