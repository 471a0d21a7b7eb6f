//! The cost meter: tokens and dollars a session spent, by provider when more than one served
//! the calls (a tier on a local server): what `/cost` shows.

use keel::engine::CostByProvider;
use keel::provider::Usage;

/// Tokens and cost added up over runs and compactions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    usage: Usage,
    /// The cost of the calls whose price is known.
    known_usd: f64,
    /// How many runs or compactions had a price that is not known.
    unpriced: u32,
    /// How many runs or compactions were added.
    count: u32,
    /// Usage and cost by the provider that served each call.
    by_provider: CostByProvider,
}

impl Totals {
    /// Adds a run's or a compaction's usage and cost (`None`: its model's price is unknown),
    /// and the same by provider.
    pub fn add(&mut self, usage: &Usage, cost_usd: Option<f64>, by_provider: &CostByProvider) {
        self.by_provider.merge(by_provider);
        self.usage.add(usage);
        self.count += 1;
        match cost_usd {
            Some(cost) => self.known_usd += cost,
            None => self.unpriced += 1,
        }
    }

    /// One line for `/cost`.
    pub fn summary(&self) -> String {
        let usage = &self.usage;
        let mut tokens = format!(
            "tokens: {} input, {} output",
            usage.input_tokens, usage.output_tokens
        );
        if usage.cache_creation_input_tokens > 0 || usage.cache_read_input_tokens > 0 {
            tokens.push_str(&format!(
                " (cache: {} written, {} read)",
                usage.cache_creation_input_tokens, usage.cache_read_input_tokens
            ));
        }
        let cost = if self.count == 0 {
            "$0.0000".to_owned()
        } else if self.unpriced == self.count {
            "unknown (no price known for the model)".to_owned()
        } else if self.unpriced > 0 {
            format!(
                "${:.4} for the calls with a known price; the model's price is unknown for the rest",
                self.known_usd
            )
        } else {
            format!("${:.4}", self.known_usd)
        };
        let mut line = format!("{tokens} · cost: {cost}");
        if self.by_provider.len() > 1 {
            line.push_str(" · by provider: ");
            line.push_str(&by_provider_text(&self.by_provider));
        }
        line
    }
}

/// `anthropic: 200 in / 40 out, $0.0012; local: 900 in / 30 out, cost unknown`.
pub fn by_provider_text(costs: &CostByProvider) -> String {
    costs
        .iter()
        .map(|(name, cost)| {
            let usage = &cost.usage;
            let money = cost
                .cost_usd
                .map_or_else(|| "cost unknown".to_owned(), |usd| format!("${usd:.4}"));
            format!(
                "{name}: {} in / {} out, {money}",
                usage.total_input_tokens(),
                usage.output_tokens
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Usage with these input and output tokens.
    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        }
    }

    /// One provider's figures.
    fn one(name: &str, input: u64, output: u64, cost: Option<f64>) -> CostByProvider {
        let mut costs = CostByProvider::default();
        costs.add(name, &usage(input, output), cost);
        costs
    }

    #[test]
    fn costs_by_provider_are_told_when_there_are_several() {
        let mut totals = Totals::default();
        totals.add(
            &usage(200, 40),
            Some(0.0012),
            &one("anthropic", 200, 40, Some(0.0012)),
        );
        assert!(
            !totals.summary().contains("by provider"),
            "{}",
            totals.summary()
        );
        let mut run = one("anthropic", 100, 20, Some(0.0006));
        run.merge(&one("local", 900, 30, None));
        totals.add(&usage(1000, 50), None, &run);
        let summary = totals.summary();
        assert!(
            summary.ends_with(
                " · by provider: anthropic: 300 in / 60 out, $0.0018; local: 900 in / 30 out, \
                 cost unknown"
            ),
            "{summary}"
        );
    }

    #[test]
    fn costs_add_up_and_unknown_prices_are_said() {
        let mut totals = Totals::default();
        assert_eq!(
            totals.summary(),
            "tokens: 0 input, 0 output · cost: $0.0000"
        );
        totals.add(
            &usage(100, 20),
            Some(0.0006),
            &one("anthropic", 100, 20, Some(0.0006)),
        );
        totals.add(
            &usage(100, 20),
            Some(0.0006),
            &one("anthropic", 100, 20, Some(0.0006)),
        );
        assert_eq!(
            totals.summary(),
            "tokens: 200 input, 40 output · cost: $0.0012"
        );
        totals.add(&usage(1, 1), None, &one("anthropic", 1, 1, None));
        assert!(
            totals
                .summary()
                .ends_with("the model's price is unknown for the rest")
        );
        let mut unknown = Totals::default();
        unknown.add(&usage(5, 5), None, &one("anthropic", 5, 5, None));
        assert!(
            unknown
                .summary()
                .ends_with("cost: unknown (no price known for the model)")
        );
    }
}
