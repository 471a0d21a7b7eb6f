//! Usage and cost told apart per provider: with model tiers on several providers (a local
//! server for the cheap tier, a hosted API for the main loop), what each provider served and
//! what it cost.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// The tokens one provider served and what they cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProviderCost {
    /// Tokens used.
    pub usage: Usage,
    /// What they cost in USD; `None` when the price of a model it served is unknown (never a
    /// guess).
    pub cost_usd: Option<f64>,
}

impl Default for ProviderCost {
    /// Nothing used, nothing spent.
    fn default() -> Self {
        Self {
            usage: Usage::default(),
            cost_usd: Some(0.0),
        }
    }
}

/// Usage and cost by provider name (the name [`Provider::served_by`] gives a model's
/// provider), sorted by name.
///
/// [`Provider::served_by`]: crate::Provider::served_by
///
/// ```
/// use keel_provider::{CostByProvider, Usage};
///
/// let call = Usage { input_tokens: 100, output_tokens: 10, ..Usage::default() };
/// let mut costs = CostByProvider::default();
/// costs.add("anthropic", &call, Some(0.002));
/// costs.add("local", &call, None);
/// costs.add("anthropic", &call, Some(0.002));
/// assert_eq!(costs.get("anthropic").unwrap().usage.input_tokens, 200);
/// assert_eq!(costs.get("anthropic").unwrap().cost_usd, Some(0.004));
/// assert_eq!(costs.get("local").unwrap().cost_usd, None);
/// assert_eq!(costs.names().collect::<Vec<_>>(), ["anthropic", "local"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CostByProvider(BTreeMap<String, ProviderCost>);

impl CostByProvider {
    /// Adds a call (or a run) `provider` served: its usage and its cost (`None`: unknown,
    /// which makes the provider's total unknown).
    pub fn add(&mut self, provider: &str, usage: &Usage, cost_usd: Option<f64>) {
        let entry = self.0.entry(provider.to_owned()).or_default();
        entry.usage.add(usage);
        entry.cost_usd = entry.cost_usd.zip(cost_usd).map(|(a, b)| a + b);
    }

    /// Every provider's figures together: the usage summed, the cost summed (`None` when any
    /// provider's is unknown). Nothing served is nothing spent.
    pub fn total(&self) -> ProviderCost {
        let mut total = ProviderCost::default();
        for cost in self.0.values() {
            total.usage.add(&cost.usage);
            total.cost_usd = total.cost_usd.zip(cost.cost_usd).map(|(a, b)| a + b);
        }
        total
    }

    /// Adds every provider's figures of `other`.
    pub fn merge(&mut self, other: &CostByProvider) {
        for (provider, cost) in &other.0 {
            self.add(provider, &cost.usage, cost.cost_usd);
        }
    }

    /// One provider's figures.
    pub fn get(&self, provider: &str) -> Option<&ProviderCost> {
        self.0.get(provider)
    }

    /// Each provider's figures, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ProviderCost)> {
        self.0.iter().map(|(name, cost)| (name.as_str(), cost))
    }

    /// The providers' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// How many providers served something.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no provider served anything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
