//! Statistics over timing samples. Quantiles use linear interpolation at q(N-1)
//! (NumPy's default "linear" method), stated wherever a quantile is shown.
//!
//! - [`quantile_sorted`] and [`Summary`]: distribution of one sample set.
//! - [`Rng`]: a small seeded PRNG (xoshiro256** seeded by SplitMix64).
//! - [`analyze_speedup`] and [`render_analysis`]: round-level speedup of a candidate over a
//!   baseline, with the order-statistic interval of the median round ratio ([`median_ranks`]).
//! - [`resolve`]: when rounds added until an interval is narrow enough stop.

pub mod resolve;
mod rng;
mod speedup;

pub use rng::{splitmix_at, Rng};
pub use speedup::{
    analyze_speedup, median_ranks, min_rounds, percent_label, render_analysis, IntervalConfig,
    MedianRanks, Side, SpeedVerdict, SpeedupAnalysis, StatsError, CONFIDENCE, INTERVAL_METHOD,
};

use serde::{Deserialize, Serialize};

/// How quantiles are computed, for artifacts and receipts.
pub const QUANTILE_RULE: &str = "linear interpolation at q(N-1) over sorted samples";

/// Quantile `q` in [0, 1] of `sorted` (ascending, finite). None when empty or `q` is outside
/// [0, 1]. Interpolates linearly between the two samples around position q(N-1); the result
/// is kept between those two samples, so it is monotone in `q` despite float rounding.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    let (a, b) = (sorted[lo], sorted[hi]);
    if lo == hi {
        return Some(a);
    }
    Some((a + (b - a) * frac).max(a).min(b))
}

/// Median (quantile rule) of unsorted values; None when empty.
pub fn median_unsorted(values: &[f64]) -> Option<f64> {
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    quantile_sorted(&s, 0.5)
}

/// Quantiles, range and spread of a sample set, all by [`QUANTILE_RULE`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: usize,
    pub p10: f64,
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
    /// Interquartile range, p75 - p25.
    pub iqr: f64,
    /// p90 - p10.
    pub spread: f64,
    /// spread / median; None when that is not a finite number (a zero median).
    pub relative_spread: Option<f64>,
}

impl Summary {
    /// None for an empty set or one holding a non-finite value.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| quantile_sorted(&s, p);
        let (p10, p25, median, p75, p90) = (q(0.10)?, q(0.25)?, q(0.5)?, q(0.75)?, q(0.90)?);
        let spread = p90 - p10;
        let relative = spread / median;
        Some(Summary {
            count: s.len(),
            p10,
            p25,
            median,
            p75,
            p90,
            min: s[0],
            max: s[s.len() - 1],
            iqr: p75 - p25,
            spread,
            relative_spread: relative.is_finite().then_some(relative),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn linear_interpolation_at_q_n_minus_1() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile_sorted(&s, 0.5), Some(3.0));
        assert_eq!(quantile_sorted(&s, 0.1), Some(1.4));
        assert_eq!(quantile_sorted(&s, 0.9), Some(4.6));
        assert_eq!(quantile_sorted(&s, 0.25), Some(2.0));
        assert_eq!(quantile_sorted(&s, 0.75), Some(4.0));
        assert_eq!(quantile_sorted(&s, 0.0), Some(1.0));
        assert_eq!(quantile_sorted(&s, 1.0), Some(5.0));
        assert_eq!(quantile_sorted(&[7.0], 0.3), Some(7.0));
        assert_eq!(quantile_sorted(&[], 0.5), None);
        assert_eq!(quantile_sorted(&[1.0, 2.0], 0.5), Some(1.5));
        assert_eq!(quantile_sorted(&s, -0.1), None);
        assert_eq!(quantile_sorted(&s, 1.1), None);
        assert_eq!(quantile_sorted(&s, f64::NAN), None);
    }

    #[test]
    fn quartiles_interpolate_on_even_counts() {
        // N = 4: q(N-1) = 0.75 for p25 and 2.25 for p75.
        let s = [10.0, 20.0, 40.0, 80.0];
        assert_eq!(quantile_sorted(&s, 0.25), Some(17.5));
        assert_eq!(quantile_sorted(&s, 0.75), Some(50.0));
        assert_eq!(quantile_sorted(&s, 0.5), Some(30.0));
    }

    #[test]
    fn summary_sorts_and_rejects_non_finite() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (s.p10, s.median, s.p90, s.min, s.max),
            (1.4, 3.0, 4.6, 1.0, 5.0)
        );
        assert_eq!((s.p25, s.p75, s.iqr), (2.0, 4.0, 2.0));
        assert!((s.spread - 3.2).abs() < 1e-12, "{}", s.spread);
        assert!((s.relative_spread.unwrap() - 3.2 / 3.0).abs() < 1e-12);
        assert_eq!(s.count, 5);
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
        assert!(Summary::of(&[1.0, f64::INFINITY]).is_none());
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn summary_iqr_and_spread_on_even_count() {
        let s = Summary::of(&[80.0, 10.0, 40.0, 20.0]).unwrap();
        assert_eq!((s.p25, s.median, s.p75, s.iqr), (17.5, 30.0, 50.0, 32.5));
        // p10 at position 0.3: 10 + 10 * 0.3 = 13; p90 at 2.7: 40 + 40 * 0.7 = 68.
        assert!((s.p10 - 13.0).abs() < 1e-12, "{}", s.p10);
        assert!((s.p90 - 68.0).abs() < 1e-12, "{}", s.p90);
        assert!((s.spread - 55.0).abs() < 1e-12);
        assert!((s.relative_spread.unwrap() - 55.0 / 30.0).abs() < 1e-12);
    }

    #[test]
    fn summary_of_one_sample_and_zero_median() {
        let s = Summary::of(&[2.5]).unwrap();
        assert_eq!(
            (s.p10, s.p25, s.median, s.p75, s.p90),
            (2.5, 2.5, 2.5, 2.5, 2.5)
        );
        assert_eq!((s.iqr, s.spread, s.relative_spread), (0.0, 0.0, Some(0.0)));
        let z = Summary::of(&[-1.0, 0.0, 1.0]).unwrap();
        assert_eq!(z.median, 0.0);
        assert_eq!(z.relative_spread, None);
    }

    #[test]
    fn summary_round_trips_through_json() {
        let s = Summary::of(&[3.0, 1.0, 2.0, 9.0]).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"iqr\"") && json.contains("\"relative_spread\""));
        assert_eq!(serde_json::from_str::<Summary>(&json).unwrap(), s);
    }

    proptest! {
        #[test]
        fn quantile_is_monotone_and_within_range(
            mut v in prop::collection::vec(-1e6f64..1e6, 1..40),
            q1 in 0.0f64..=1.0,
            q2 in 0.0f64..=1.0,
        ) {
            v.sort_by(f64::total_cmp);
            let (qa, qb) = if q1 <= q2 { (q1, q2) } else { (q2, q1) };
            let a = quantile_sorted(&v, qa).unwrap();
            let b = quantile_sorted(&v, qb).unwrap();
            prop_assert!(a <= b, "q {qa} -> {a}, q {qb} -> {b}");
            for x in [a, b] {
                prop_assert!(v[0] <= x && x <= v[v.len() - 1]);
            }
        }

        #[test]
        fn quantile_at_integer_position_is_an_element(
            mut v in prop::collection::vec(-1e6f64..1e6, 1..40),
            k in 0usize..40,
        ) {
            v.sort_by(f64::total_cmp);
            let n = v.len();
            let k = k % n;
            let q = if n == 1 { 0.5 } else { k as f64 / (n - 1) as f64 };
            let pos = q * (n - 1) as f64;
            prop_assume!(pos.fract() == 0.0);
            let x = quantile_sorted(&v, q).unwrap();
            prop_assert_eq!(x, v[pos as usize]);
            prop_assert!(v.contains(&x));
        }

        #[test]
        fn summary_orders_its_quantiles(v in prop::collection::vec(-1e6f64..1e6, 1..40)) {
            let s = Summary::of(&v).unwrap();
            prop_assert!(s.min <= s.p10 && s.p10 <= s.p25 && s.p25 <= s.median);
            prop_assert!(s.median <= s.p75 && s.p75 <= s.p90 && s.p90 <= s.max);
            prop_assert!(s.iqr >= 0.0 && s.spread >= s.iqr);
        }
    }
}

/// Throughput in GB/s (10^9 bytes per second) of `bytes` moved in `micros` microseconds.
pub fn gb_per_s(bytes: u64, micros: f64) -> f64 {
    bytes as f64 / (micros * 1e-6) / 1e9
}

#[cfg(test)]
mod throughput_tests {
    #[test]
    fn gb_per_s_is_bytes_over_time() {
        // Seed 000: 134,217,728 bytes in 250 us is 536.87 GB/s.
        assert!((super::gb_per_s(134_217_728, 250.0) - 536.870912).abs() < 1e-9);
    }
}
