//! `/cost`: tokens and dollars spent since keel started.

use keel_provider::Usage;

/// Tokens and cost added up over runs and compactions.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Totals {
    usage: Usage,
    /// The cost of the calls whose price is known.
    known_usd: f64,
    /// How many runs or compactions had a price that is not known.
    unpriced: u32,
    /// How many runs or compactions were added.
    count: u32,
}

impl Totals {
    /// Adds a run's or a compaction's usage and cost (`None`: its model's price is unknown).
    pub(crate) fn add(&mut self, usage: &Usage, cost_usd: Option<f64>) {
        self.usage.add(usage);
        self.count += 1;
        match cost_usd {
            Some(cost) => self.known_usd += cost,
            None => self.unpriced += 1,
        }
    }

    /// One line for `/cost`.
    pub(crate) fn summary(&self) -> String {
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
        format!("{tokens} · cost: {cost}")
    }
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

    #[test]
    fn costs_add_up_and_unknown_prices_are_said() {
        let mut totals = Totals::default();
        assert_eq!(
            totals.summary(),
            "tokens: 0 input, 0 output · cost: $0.0000"
        );
        totals.add(&usage(100, 20), Some(0.0006));
        totals.add(&usage(100, 20), Some(0.0006));
        assert_eq!(
            totals.summary(),
            "tokens: 200 input, 40 output · cost: $0.0012"
        );
        totals.add(&usage(1, 1), None);
        assert!(
            totals
                .summary()
                .ends_with("the model's price is unknown for the rest")
        );
        let mut unknown = Totals::default();
        unknown.add(&usage(5, 5), None);
        assert!(
            unknown
                .summary()
                .ends_with("cost: unknown (no price known for the model)")
        );
    }
}
