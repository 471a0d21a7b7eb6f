//! Model tiers across providers, from the config's `[models.NAME]` tables: the catalog every
//! run prices and compacts with, the router that sends a tier's model to its own provider (a
//! local server) and everything else to the main one, and the models of the tiers.

use std::collections::BTreeMap;
use std::sync::Arc;

use keel::provider::{ModelCatalog, ModelRouter, Provider};

use crate::Error;
use crate::files::Config;
use crate::files::models::{self, Tier};
use crate::settings::named_provider;

/// What the `[models]` tables make of the main provider.
pub struct Tiers {
    /// The built-in catalog with the tables' windows, limits and prices over it.
    pub catalog: ModelCatalog,
    /// The main provider, with each model a table routes elsewhere sent there; it names each
    /// provider as the config does (`served_by`), for the cost per provider.
    pub provider: Arc<dyn Provider>,
    /// The small tier's model, when a table sets it.
    pub small: Option<String>,
    /// The strong tier's model, when a table sets it.
    pub strong: Option<String>,
    /// The variables the routed providers' secrets come from: hidden from commands, hooks and
    /// MCP servers as the main provider's are.
    pub secret_vars: Vec<String>,
}

impl Tiers {
    /// The tiers of `config` over the main provider `provider`, called `name`, running `model`.
    ///
    /// A provider a table names is built as the main one is (its key and headers from its
    /// variables); one that cannot be built, or an unknown name, is a usage error naming the
    /// table and its file, unless `lenient` (a listing, which calls no model): then that route
    /// is left out. A table that would send the main model itself elsewhere is an error too.
    pub fn resolve(
        config: &Config,
        name: &str,
        provider: Arc<dyn Provider>,
        model: &str,
        lenient: bool,
    ) -> Result<Self, Error> {
        let mut router = ModelRouter::new(name, provider);
        let mut built: BTreeMap<String, Arc<dyn Provider>> = BTreeMap::new();
        let mut secret_vars = Vec::new();
        for (table, table_config) in &config.models {
            let Some(provider_name) = table_config.provider.as_deref().map(str::trim) else {
                continue;
            };
            let id = models::model_id(table, table_config);
            let place = || format!("{}: `models.{table}.provider`", origin(config, table));
            if provider_name == name {
                continue;
            }
            if id == model.trim() {
                return Err(Error::Invalid(format!(
                    "{}: {id} is the main model, which `{name}` serves; name another model for \
                     `models.{table}`, or choose the provider with `provider = \
                     \"{provider_name}\"`",
                    place()
                )));
            }
            let provider = match built.get(provider_name) {
                Some(provider) => provider.clone(),
                None => match named_provider(provider_name, config) {
                    Ok(made) => {
                        secret_vars.push(made.key_var.clone());
                        secret_vars.extend(made.secret_vars.iter().cloned());
                        built.insert(provider_name.to_owned(), made.provider.clone());
                        made.provider
                    }
                    Err(_) if lenient => continue,
                    Err(err) => return Err(Error::Invalid(format!("{}: {err}", place()))),
                },
            };
            router = router.route(id, provider_name, provider);
        }
        secret_vars.sort();
        secret_vars.dedup();
        let tier_model =
            |tier| models::tier(&config.models, tier).and_then(|table| table.model.clone());
        Ok(Self {
            catalog: models::catalog(&config.models),
            provider: Arc::new(router),
            small: tier_model(Tier::Small),
            strong: tier_model(Tier::Strong),
            secret_vars,
        })
    }
}

/// The file that set `models.NAME` last (or `the config`).
fn origin(config: &Config, table: &str) -> String {
    config.last_origin(&format!("models.{table}")).map_or_else(
        || "the config".to_owned(),
        |origin| origin.file.display().to_string(),
    )
}
