//! Usage totals saturate instead of wrapping around.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_provider::{ModelCatalog, Usage};

fn usage(n: u64) -> Usage {
    Usage {
        input_tokens: n,
        output_tokens: n,
        cache_creation_input_tokens: n,
        cache_read_input_tokens: n,
    }
}

#[test]
fn adding_usage_saturates_at_u64_max() {
    let mut total = usage(u64::MAX - 1);
    total.add(&usage(5));
    assert_eq!(total, usage(u64::MAX));
    total.add(&usage(u64::MAX));
    assert_eq!(total, usage(u64::MAX));
    assert_eq!(usage(u64::MAX).total_input_tokens(), u64::MAX);
    assert_eq!(usage(u64::MAX) + usage(1), usage(u64::MAX));
    let mut sum = usage(1);
    sum += usage(u64::MAX);
    assert_eq!(sum, usage(u64::MAX));
    let summed: Usage = [usage(u64::MAX), usage(u64::MAX), usage(3)]
        .into_iter()
        .sum();
    assert_eq!(summed, usage(u64::MAX));
    assert_eq!(usage(2) + usage(3), usage(5));
}

#[test]
fn the_cost_of_a_saturated_total_is_the_largest_not_a_wrapped_one() {
    let catalog = ModelCatalog::built_in();
    let mut total = Usage::default();
    let mut last = 0.0;
    for _ in 0..4 {
        total.add(&usage(u64::MAX / 3));
        let cost = catalog.cost("claude-opus-4-1", &total).unwrap();
        assert!(cost.is_finite() && cost >= last, "{cost} after {last}");
        last = cost;
    }
    assert_eq!(total, usage(u64::MAX));
}
