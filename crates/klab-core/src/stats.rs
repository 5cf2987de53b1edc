//! Statistics over timing samples. Quantiles use linear interpolation at q(N-1)
//! (NumPy's default "linear" method), stated wherever a quantile is shown.

use serde::Serialize;

/// How quantiles are computed, for artifacts and receipts.
pub const QUANTILE_RULE: &str = "linear interpolation at q(N-1) over sorted samples";

/// Quantile `q` in [0, 1] of `sorted` (ascending, finite). None when empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * frac)
}

/// p10, median, p90 and spread of a sample set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub count: usize,
    pub p10: f64,
    pub median: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// None for an empty set or one holding a non-finite value.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        Some(Summary {
            count: s.len(),
            p10: quantile_sorted(&s, 0.10)?,
            median: quantile_sorted(&s, 0.5)?,
            p90: quantile_sorted(&s, 0.90)?,
            min: s[0],
            max: s[s.len() - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_interpolation_at_q_n_minus_1() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile_sorted(&s, 0.5), Some(3.0));
        assert_eq!(quantile_sorted(&s, 0.1), Some(1.4));
        assert_eq!(quantile_sorted(&s, 0.9), Some(4.6));
        assert_eq!(quantile_sorted(&s, 0.0), Some(1.0));
        assert_eq!(quantile_sorted(&s, 1.0), Some(5.0));
        assert_eq!(quantile_sorted(&[7.0], 0.3), Some(7.0));
        assert_eq!(quantile_sorted(&[], 0.5), None);
        assert_eq!(quantile_sorted(&[1.0, 2.0], 0.5), Some(1.5));
    }

    #[test]
    fn summary_sorts_and_rejects_non_finite() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (s.p10, s.median, s.p90, s.min, s.max),
            (1.4, 3.0, 4.6, 1.0, 5.0)
        );
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
        assert!(Summary::of(&[]).is_none());
    }
}
