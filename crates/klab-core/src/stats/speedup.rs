//! Round-level speedup of a candidate over a baseline (the ABBA discipline: per round, summarize
//! each side's samples with the same rule, then compare rounds, not launches).
//!
//! Per round r: ratio_r = median(baseline_r) / median(candidate_r), so > 1 means the candidate is
//! faster. The headline ratio is the median of the round ratios. Its interval is the
//! distribution-free confidence interval of a median: two order statistics of the round ratios,
//! chosen by the binomial distribution ([`median_ranks`]) so that it covers the true median
//! with at least the confidence asked for, whatever the ratios' distribution, as long as the
//! rounds are independent. The round is the unit: thousands of correlated launches are not
//! thousands of independent rounds.
//!
//! Why not a bootstrap: over 5 rounds the percentile bootstrap of a median is the rounds'
//! range, which misses the median when all five fall on one side of it: 2 in 32, so a "95%"
//! interval covered 93.75%, and an A/A pair was called different once in 16 runs. The
//! order-statistic interval states its exact coverage, and gives none from fewer rounds than
//! the confidence needs ([`min_rounds`]: 6 at 95%).

use serde::{Deserialize, Serialize};

use super::{median_unsorted, QUANTILE_RULE};

/// How the interval is found, for artifacts and receipts.
pub const INTERVAL_METHOD: &str = "distribution-free interval of the median round ratio: order \
     statistics k and n+1-k of the n round ratios, k the largest whose binomial coverage reaches \
     the confidence";

/// The confidence every verdict is drawn at.
pub const CONFIDENCE: f64 = 0.95;

/// Interval settings. Default: 95% confidence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IntervalConfig {
    pub confidence: f64,
}

impl Default for IntervalConfig {
    fn default() -> Self {
        IntervalConfig {
            confidence: CONFIDENCE,
        }
    }
}

/// The order statistics that bound a median's interval, and its exact coverage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MedianRanks {
    /// 1-based ranks of the interval's ends among the sorted ratios (`upper` = n + 1 - `lower`).
    pub lower: usize,
    pub upper: usize,
    /// The probability that the interval holds the true median: 1 - 2 P(Bin(n, 1/2) < lower).
    pub coverage: f64,
}

/// The narrowest order-statistic interval of the median of `n` independent values whose
/// coverage is at least `confidence`; `None` when even the range falls short (too few values).
pub fn median_ranks(n: usize, confidence: f64) -> Option<MedianRanks> {
    // P(X(k) <= m <= X(n+1-k)) = 1 - 2 P(Bin(n, 1/2) <= k - 1). Terms in logs: 2^-n
    // underflows past n = 1074, while the terms that matter do not.
    let mut ln_pmf = -(n as f64) * std::f64::consts::LN_2;
    let mut cdf = 0.0;
    let mut best = None;
    for k in 1..=n / 2 {
        cdf += ln_pmf.exp();
        let coverage = 1.0 - 2.0 * cdf;
        if coverage < confidence {
            break;
        }
        best = Some(MedianRanks {
            lower: k,
            upper: n + 1 - k,
            coverage,
        });
        ln_pmf += ((n - k + 1) as f64 / k as f64).ln();
    }
    best
}

/// The fewest rounds that give an interval at `confidence` (6 at 95%).
pub fn min_rounds(confidence: f64) -> usize {
    // The range's coverage 1 - 2^(1-n) reaches any confidence below 1 well before this bound.
    (2..=2_000)
        .find(|&n| median_ranks(n, confidence).is_some())
        .unwrap_or(2_000)
}

/// Which side of the comparison a round belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Baseline,
    Candidate,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Baseline => "baseline",
            Side::Candidate => "candidate",
        })
    }
}

/// Why a speedup analysis could not be made. Rounds and samples are numbered from 1.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("baseline has {baseline} rounds but candidate has {candidate}: rounds must pair up")]
    RoundCountMismatch { baseline: usize, candidate: usize },
    #[error("no rounds to compare")]
    NoRounds,
    #[error("{side} round {round} has no samples")]
    EmptyRound { side: Side, round: usize },
    #[error("{side} round {round} sample {index} is {value}: samples must be finite and positive")]
    BadSample {
        side: Side,
        round: usize,
        index: usize,
        value: f64,
    },
    #[error("confidence {0} is not inside (0, 1)")]
    BadConfidence(f64),
    #[error("round {round} ratio {baseline_median} / {candidate_median} is not a finite positive number")]
    RatioOutOfRange {
        round: usize,
        baseline_median: f64,
        candidate_median: f64,
    },
}

/// Outcome of the comparison. `Faster` means the candidate is faster than the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpeedVerdict {
    Faster,
    Slower,
    Unresolved,
}

/// Round-level speedup of a candidate over a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedupAnalysis {
    pub rounds: usize,
    pub baseline_round_medians: Vec<f64>,
    pub candidate_round_medians: Vec<f64>,
    /// Baseline median / candidate median per round: > 1 means the candidate was faster.
    pub round_ratios: Vec<f64>,
    /// Median of `round_ratios` (quantile rule).
    pub ratio: f64,
    /// The order-statistic interval of the median; None with too few rounds for `confidence`.
    pub interval: Option<(f64, f64)>,
    pub confidence: f64,
    /// The interval's order statistics and exact coverage (absent from analyses written by a
    /// klab that drew a bootstrap interval).
    #[serde(default)]
    pub ranks: Option<MedianRanks>,
    /// Faster if the interval's low end is > 1, Slower if its high end is < 1, else Unresolved.
    pub verdict: SpeedVerdict,
    /// Smallest relative effect these rounds could resolve: half the interval width / `ratio`.
    pub resolvable_effect: Option<f64>,
    /// 1-based rounds whose ratio lies on the other side of 1 than `ratio`.
    pub reversals: Vec<usize>,
    /// Caveat about the amount of evidence, when there is one.
    pub note: Option<String>,
}

impl SpeedupAnalysis {
    /// How far the interval reaches from the ratio, relative to it: the farther end's
    /// distance, which is the half-width when the interval is symmetric. An interval of a
    /// median ratio is not symmetric in general (its ends are two rounds' ratios), so
    /// `--resolve P` asks this to be at most P: every end within +/-P of the ratio.
    pub fn reach(&self) -> Option<f64> {
        self.interval
            .map(|(lo, hi)| (self.ratio - lo).max(hi - self.ratio) / self.ratio)
    }
}

fn round_medians(rounds: &[Vec<f64>], side: Side) -> Result<Vec<f64>, StatsError> {
    rounds
        .iter()
        .enumerate()
        .map(|(r, samples)| {
            if samples.is_empty() {
                return Err(StatsError::EmptyRound { side, round: r + 1 });
            }
            if let Some((i, &value)) = samples
                .iter()
                .enumerate()
                .find(|(_, &v)| !(v.is_finite() && v > 0.0))
            {
                return Err(StatsError::BadSample {
                    side,
                    round: r + 1,
                    index: i + 1,
                    value,
                });
            }
            median_unsorted(samples).ok_or(StatsError::EmptyRound { side, round: r + 1 })
        })
        .collect()
}

/// Compares per-round raw samples (microseconds) of a baseline and a candidate. Round `r` of
/// each side must come from the same ABBA round. Deterministic.
pub fn analyze_speedup(
    baseline_rounds: &[Vec<f64>],
    candidate_rounds: &[Vec<f64>],
    cfg: &IntervalConfig,
) -> Result<SpeedupAnalysis, StatsError> {
    if !(cfg.confidence > 0.0 && cfg.confidence < 1.0) {
        return Err(StatsError::BadConfidence(cfg.confidence));
    }
    if baseline_rounds.len() != candidate_rounds.len() {
        return Err(StatsError::RoundCountMismatch {
            baseline: baseline_rounds.len(),
            candidate: candidate_rounds.len(),
        });
    }
    if baseline_rounds.is_empty() {
        return Err(StatsError::NoRounds);
    }
    let rounds = baseline_rounds.len();
    let baseline_round_medians = round_medians(baseline_rounds, Side::Baseline)?;
    let candidate_round_medians = round_medians(candidate_rounds, Side::Candidate)?;
    let mut round_ratios = Vec::with_capacity(rounds);
    for (r, (&b, &c)) in baseline_round_medians
        .iter()
        .zip(&candidate_round_medians)
        .enumerate()
    {
        let ratio = b / c;
        if !(ratio.is_finite() && ratio > 0.0) {
            return Err(StatsError::RatioOutOfRange {
                round: r + 1,
                baseline_median: b,
                candidate_median: c,
            });
        }
        round_ratios.push(ratio);
    }
    let ratio = median_unsorted(&round_ratios).ok_or(StatsError::NoRounds)?;

    let ranks = median_ranks(rounds, cfg.confidence);
    let interval = ranks.map(|k| {
        let mut sorted = round_ratios.clone();
        sorted.sort_by(f64::total_cmp);
        (sorted[k.lower - 1], sorted[k.upper - 1])
    });
    let verdict = match interval {
        Some((lo, _)) if lo > 1.0 => SpeedVerdict::Faster,
        Some((_, hi)) if hi < 1.0 => SpeedVerdict::Slower,
        _ => SpeedVerdict::Unresolved,
    };
    let resolvable_effect = interval.map(|(lo, hi)| (hi - lo) / 2.0 / ratio);
    let reversals = round_ratios
        .iter()
        .enumerate()
        .filter(|(_, &r)| (ratio > 1.0 && r < 1.0) || (ratio < 1.0 && r > 1.0))
        .map(|(i, _)| i + 1)
        .collect();
    let note = ranks.is_none().then(|| {
        format!(
            "{rounds} {} cannot give a {}% interval of the median round ratio: it takes at least {} rounds",
            if rounds == 1 { "round" } else { "rounds" },
            percent_label(cfg.confidence),
            min_rounds(cfg.confidence)
        )
    });
    Ok(SpeedupAnalysis {
        rounds,
        baseline_round_medians,
        candidate_round_medians,
        round_ratios,
        ratio,
        interval,
        confidence: cfg.confidence,
        ranks,
        verdict,
        resolvable_effect,
        reversals,
        note,
    })
}

/// Decimals for ratios: 2, or more (up to 6) where 2 would hide a distinction that
/// matters: the interval's ends from each other, or a decisive end from 1.
fn ratio_decimals(a: &SpeedupAnalysis) -> usize {
    let f = |x: f64, d: usize| format!("{x:.d$}");
    let Some((lo, hi)) = a.interval else {
        return 2;
    };
    (2..=6)
        .find(|&d| {
            let ends_apart = lo == hi || f(lo, d) != f(hi, d);
            let lo_apart = lo <= 1.0 || f(lo, d) != f(1.0, d);
            let hi_apart = hi >= 1.0 || f(hi, d) != f(1.0, d);
            ends_apart && lo_apart && hi_apart
        })
        .unwrap_or(6)
}

/// "95", "97.5": a confidence as a percentage without trailing zeros.
pub fn percent_label(confidence: f64) -> String {
    let p = (confidence * 100.0 * 1e4).round() / 1e4;
    format!("{p}")
}

/// An interval's exact coverage, rounded down to 0.1% so that it is never overstated.
fn coverage_label(coverage: f64) -> String {
    format!("{:.1}%", (coverage * 1000.0).floor() / 10.0)
}

fn percent(x: f64) -> String {
    let p = x * 100.0;
    if p >= 10.0 {
        format!("{p:.0}%")
    } else if p >= 1.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.2}%")
    }
}

/// Plain-text account of an analysis: per-round medians and ratios, the ratio, the interval with
/// its method, the verdict, the smallest resolvable effect and any reversals.
pub fn render_analysis(a: &SpeedupAnalysis, baseline: &str, candidate: &str) -> String {
    let d = ratio_decimals(a);
    let x = |v: f64| format!("{v:.d$}x");
    let conf = percent_label(a.confidence);
    let rounds_word = if a.rounds == 1 { "round" } else { "rounds" };
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!(
        "speedup of {candidate} (candidate) over {baseline} (baseline): per round, baseline median / candidate median; > 1 means candidate faster"
    ));
    line(format!("medians: {QUANTILE_RULE}"));
    // Wide enough for the "<name> us" headers.
    let (wb, wc) = (baseline.len().max(9) + 3, candidate.len().max(9) + 3);
    line(format!(
        "round  {:>wb$}  {:>wc$}  ratio",
        format!("{baseline} us"),
        format!("{candidate} us")
    ));
    for (i, ((b, c), r)) in a
        .baseline_round_medians
        .iter()
        .zip(&a.candidate_round_medians)
        .zip(&a.round_ratios)
        .enumerate()
    {
        line(format!("{:>5}  {b:>wb$.3}  {c:>wc$.3}  {}", i + 1, x(*r)));
    }
    line(format!(
        "ratio: {} (median of {} round {})",
        x(a.ratio),
        a.rounds,
        if a.rounds == 1 { "ratio" } else { "ratios" }
    ));
    match a.interval {
        Some((lo, hi)) => {
            let method = match a.ranks {
                Some(k) => format!(
                    "order statistics {} and {} of {}, coverage {}",
                    k.lower,
                    k.upper,
                    a.rounds,
                    coverage_label(k.coverage)
                ),
                None => "a percentile bootstrap, as an earlier klab drew it".to_string(),
            };
            let how = match a.ranks {
                Some(_) => format!("{INTERVAL_METHOD}; here {method}"),
                None => method.clone(),
            };
            line(format!("interval: {conf}% {}-{} ({how})", x(lo), x(hi)));
            let body = format!(
                "ratio {}, {conf}% interval {}-{} over {} {rounds_word}",
                x(a.ratio),
                x(lo),
                x(hi),
                a.rounds
            );
            line(match a.verdict {
                SpeedVerdict::Faster => format!("candidate faster: {body} ({method})"),
                SpeedVerdict::Slower => format!("candidate slower: {body} ({method})"),
                SpeedVerdict::Unresolved => {
                    format!("unresolved: {body} includes 1x ({method})")
                }
            });
        }
        None => {
            line(format!("interval: none ({} {rounds_word})", a.rounds));
            line(format!(
                "unresolved: ratio {} over {} {rounds_word}; no interval",
                x(a.ratio),
                a.rounds
            ));
        }
    }
    if let Some(e) = a.resolvable_effect {
        line(format!(
            "smallest resolvable effect: {} (half the interval width / ratio)",
            percent(e)
        ));
    }
    if !a.reversals.is_empty() {
        let named: Vec<String> = a
            .reversals
            .iter()
            .map(
                |&r| match r.checked_sub(1).and_then(|i| a.round_ratios.get(i)) {
                    Some(&v) => format!("round {r} ({})", x(v)),
                    None => format!("round {r}"),
                },
            )
            .collect();
        line(format!(
            "reversals: {} against {} overall; inspect GPU state and raw samples, collect more balanced rounds",
            named.join(", "),
            x(a.ratio)
        ));
    }
    if let Some(n) = &a.note {
        line(format!("note: {n}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    // proptest's prelude exports rand's `Rng` trait; this module means the klab type.
    use crate::stats::Rng;

    /// `n` samples uniformly within +-`jitter` (relative) of `center`.
    fn noisy(rng: &mut Rng, center: f64, jitter: f64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| center * (1.0 + jitter * (2.0 * rng.next_f64() - 1.0)))
            .collect()
    }

    fn rounds_around(rng: &mut Rng, centers: &[f64], jitter: f64) -> Vec<Vec<f64>> {
        centers.iter().map(|&c| noisy(rng, c, jitter, 50)).collect()
    }

    fn cfg() -> IntervalConfig {
        IntervalConfig::default()
    }

    #[test]
    fn the_ranks_are_the_binomial_ones() {
        assert_eq!(IntervalConfig::default().confidence, 0.95);
        let ranks = |n, c| median_ranks(n, c).map(|k| (k.lower, k.upper, k.coverage));
        // The range of 5 covers 1 - 2/32: short of 95%, enough for 90%.
        assert_eq!(ranks(5, 0.95), None);
        assert_eq!(ranks(5, 0.9), Some((1, 5, 1.0 - 2.0 / 32.0)));
        assert_eq!(ranks(6, 0.95), Some((1, 6, 1.0 - 2.0 / 64.0)));
        assert_eq!(ranks(7, 0.95), Some((1, 7, 1.0 - 2.0 / 128.0)));
        assert_eq!(ranks(8, 0.95), Some((1, 8, 1.0 - 2.0 / 256.0)));
        // From 9, the second smallest and second largest: 1 - 2 (1 + 9) / 512.
        assert_eq!(ranks(9, 0.95), Some((2, 8, 1.0 - 20.0 / 512.0)));
        assert_eq!(ranks(10, 0.95), Some((2, 9, 1.0 - 22.0 / 1024.0)));
        assert_eq!((ranks(1, 0.5), ranks(0, 0.5)), (None, None));
        assert_eq!(
            (min_rounds(0.95), min_rounds(0.9), min_rounds(0.99)),
            (6, 5, 8)
        );
        // Past 2^-1074 the terms are still right: about n/2 - 0.98 sqrt(n) at 95%.
        for n in [200, 2_000, 5_000] {
            let k = median_ranks(n, 0.95).unwrap();
            let expect = n as f64 / 2.0 - 0.98 * (n as f64).sqrt();
            assert!((k.lower as f64 - expect).abs() <= 2.0, "{n}: {k:?}");
            assert!(k.coverage >= 0.95 && k.coverage < 0.96, "{n}: {k:?}");
            assert_eq!(k.upper, n + 1 - k.lower);
        }
    }

    /// Simulated A/A runs: symmetric noise around 1 gives a verdict about as often as the
    /// stated coverage leaves room for, never more often than 1 - confidence.
    #[test]
    fn an_a_a_pair_is_called_different_at_most_as_often_as_the_coverage_allows() {
        let mut rng = Rng::new(2026);
        for (n, expect) in [(6, 2.0 / 64.0), (7, 2.0 / 128.0), (9, 20.0 / 512.0)] {
            let runs = 20_000;
            let called = (0..runs)
                .filter(|_| {
                    let ratios: Vec<f64> = (0..n)
                        .map(|_| 1.0 + 0.01 * (rng.next_f64() - 0.5))
                        .collect();
                    let (b, c) = one_sample_rounds(&ratios);
                    analyze_speedup(&b, &c, &cfg()).unwrap().verdict != SpeedVerdict::Unresolved
                })
                .count();
            let rate = called as f64 / runs as f64;
            assert!(
                (rate - expect).abs() < 0.004,
                "{n} rounds: {rate} vs {expect}"
            );
            assert!(rate < 0.05);
        }
    }

    #[test]
    fn medians_and_ratios_by_hand() {
        let b = vec![vec![30.0, 10.0, 20.0], vec![40.0, 60.0]];
        let c = vec![vec![10.0], vec![25.0, 5.0, 20.0, 10.0]];
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        assert_eq!(a.rounds, 2);
        assert_eq!(a.baseline_round_medians, [20.0, 50.0]);
        assert_eq!(a.candidate_round_medians, [10.0, 15.0]);
        assert_eq!(a.round_ratios, [2.0, 50.0 / 15.0]);
        assert_eq!(a.ratio, (2.0 + 50.0 / 15.0) / 2.0);
        // Two rounds cannot give a 95% interval: no verdict, however far apart the sides.
        assert_eq!((a.interval, a.ranks), (None, None));
        assert_eq!(a.verdict, SpeedVerdict::Unresolved);
        assert_eq!(a.confidence, 0.95);
        assert_eq!(
            a.note.as_deref(),
            Some("2 rounds cannot give a 95% interval of the median round ratio: it takes at least 6 rounds")
        );
    }

    #[test]
    fn clear_2x_speedup_is_faster() {
        let mut rng = Rng::new(11);
        let b = rounds_around(
            &mut rng,
            &[200.0, 202.0, 199.0, 201.0, 200.5, 200.0, 199.5],
            0.02,
        );
        let c = rounds_around(
            &mut rng,
            &[100.0, 101.0, 99.5, 100.2, 100.1, 100.0, 100.3],
            0.02,
        );
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        let (lo, hi) = a.interval.unwrap();
        assert!(
            1.9 < lo && lo <= a.ratio && a.ratio <= hi && hi < 2.1,
            "{lo} {hi}"
        );
        assert_eq!(a.verdict, SpeedVerdict::Faster);
        assert!(a.reversals.is_empty());
        assert_eq!(a.note, None);
        let e = a.resolvable_effect.unwrap();
        assert!(e > 0.0 && e < 0.05, "{e}");
        assert_eq!(e, (hi - lo) / 2.0 / a.ratio);
        // Seven rounds: the interval is their range.
        let min = a.round_ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let max = a.round_ratios.iter().copied().fold(0.0, f64::max);
        assert_eq!((lo, hi), (min, max));
        assert_eq!(a.ranks.map(|k| (k.lower, k.upper)), Some((1, 7)));
    }

    #[test]
    fn clear_slowdown_is_slower() {
        let mut rng = Rng::new(12);
        let b = rounds_around(&mut rng, &[100.0; 6], 0.02);
        let c = rounds_around(&mut rng, &[150.0; 6], 0.02);
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        let (lo, hi) = a.interval.unwrap();
        assert!(0.6 < lo && hi < 0.7, "{lo} {hi}");
        assert_eq!(a.verdict, SpeedVerdict::Slower);
        assert!(a.reversals.is_empty());
    }

    #[test]
    fn identical_samples_are_unresolved() {
        let mut rng = Rng::new(13);
        let b = rounds_around(&mut rng, &[100.0; 6], 0.05);
        let c: Vec<Vec<f64>> = b
            .iter()
            .map(|r| r.iter().rev().copied().collect())
            .collect();
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        assert!(a.round_ratios.iter().all(|&r| r == 1.0));
        assert_eq!(a.ratio, 1.0);
        assert_eq!(a.interval, Some((1.0, 1.0)));
        assert_eq!(a.verdict, SpeedVerdict::Unresolved);
        assert_eq!(a.resolvable_effect, Some(0.0));
        assert_eq!(a.reach(), Some(0.0));
        assert!(a.reversals.is_empty());
    }

    /// Seven round ratios 0.998, 1.0 (five times), 1.017: the interval is their range, the
    /// half-width 0.95% of the ratio, but its high end 1.7% above it. `--resolve 1%` asks
    /// for every end within 1%, so it reads the reach, not the half-width.
    #[test]
    fn an_asymmetric_interval_reaches_as_far_as_its_farther_end() {
        let one = |x: f64| vec![x; 3];
        let b: Vec<Vec<f64>> = [0.998, 1.0, 1.0, 1.0, 1.0, 1.0, 1.017]
            .iter()
            .map(|r| one(100.0 * r))
            .collect();
        let c = vec![one(100.0); 7];
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        assert_eq!(a.ratio, 1.0);
        let (lo, hi) = a.interval.unwrap();
        assert!(
            (lo - 0.998).abs() < 1e-12 && (hi - 1.017).abs() < 1e-12,
            "{lo} {hi}"
        );
        assert!((a.resolvable_effect.unwrap() - 0.0095).abs() < 1e-9);
        assert!((a.reach().unwrap() - 0.017).abs() < 1e-9);
        let check = crate::stats::resolve::ResolveCheck::of(0.01, a.reach(), 7);
        assert!(!check.reached, "{}", check.describe());
    }

    #[test]
    fn same_distribution_noise_is_unresolved() {
        let mut rng = Rng::new(14);
        let b = rounds_around(&mut rng, &[100.0; 9], 0.05);
        let c = rounds_around(&mut rng, &[100.0; 9], 0.05);
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        let (lo, hi) = a.interval.unwrap();
        assert!(lo < 1.0 && 1.0 < hi, "{lo} {hi}");
        assert!(hi - lo < 0.05, "{lo} {hi}");
        assert_eq!(a.verdict, SpeedVerdict::Unresolved);
    }

    #[test]
    fn one_round_has_no_interval() {
        let a = analyze_speedup(&[vec![200.0, 210.0]], &[vec![100.0, 105.0]], &cfg()).unwrap();
        assert_eq!(a.rounds, 1);
        assert_eq!(a.ratio, 2.0);
        assert_eq!(a.interval, None);
        assert_eq!(a.verdict, SpeedVerdict::Unresolved);
        assert_eq!(a.resolvable_effect, None);
        assert_eq!(
            a.note.as_deref(),
            Some("1 round cannot give a 95% interval of the median round ratio: it takes at least 6 rounds")
        );
    }

    fn one_sample_rounds(ratios: &[f64]) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        let b = ratios.iter().map(|&r| vec![100.0 * r]).collect();
        let c = ratios.iter().map(|_| vec![100.0]).collect();
        (b, c)
    }

    #[test]
    fn reversal_round_is_reported() {
        let (b, c) = one_sample_rounds(&[1.2, 1.25, 0.9, 1.2, 1.22]);
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        assert!(a.ratio > 1.0);
        assert_eq!(a.reversals, [3]);

        // Overall slower: rounds above 1 are the reversals.
        let (b, c) = one_sample_rounds(&[0.8, 1.1, 0.85, 0.9, 1.05]);
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        assert!(a.ratio < 1.0);
        assert_eq!(a.reversals, [2, 5]);

        // A round at exactly 1 is on no side; an overall ratio of exactly 1 has no side.
        let (b, c) = one_sample_rounds(&[1.0, 1.2, 1.3]);
        assert!(analyze_speedup(&b, &c, &cfg())
            .unwrap()
            .reversals
            .is_empty());
        let (b, c) = one_sample_rounds(&[0.8, 1.0, 1.2]);
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        assert_eq!(a.ratio, 1.0);
        assert!(a.reversals.is_empty());
    }

    #[test]
    fn the_interval_is_the_ranked_ratios() {
        let ratios = [1.1, 0.95, 1.3, 1.2, 1.05, 1.15, 1.0, 1.25, 1.12];
        let (b, c) = one_sample_rounds(&ratios);
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        // Sorted: 0.95 1.0 1.05 1.1 1.12 1.15 1.2 1.25 1.3; ranks 2 and 8 of 9.
        let (lo, hi) = a.interval.unwrap();
        assert!(close(lo, 1.0, 1e-12) && close(hi, 1.25, 1e-12), "{lo} {hi}");
        assert_eq!(a.verdict, SpeedVerdict::Unresolved);
        // At 80%, ranks 3 and 7 (coverage 1 - 2 * 46/512 = 82%): 1.05-1.2, all above 1.
        let tighter = analyze_speedup(&b, &c, &IntervalConfig { confidence: 0.8 }).unwrap();
        assert_eq!(tighter.ranks.map(|k| k.lower), Some(3));
        assert_eq!(tighter.interval, Some((1.05, 1.2)));
        assert_eq!(tighter.verdict, SpeedVerdict::Faster);
        assert_eq!(a, analyze_speedup(&b, &c, &cfg()).unwrap());
    }

    #[test]
    fn every_error_path() {
        let ok = vec![vec![1.0]];
        let two = vec![vec![1.0], vec![2.0]];
        let run = |b: &[Vec<f64>], c: &[Vec<f64>], cfg: &IntervalConfig| {
            analyze_speedup(b, c, cfg).unwrap_err()
        };
        assert_eq!(
            run(&ok, &two, &cfg()),
            StatsError::RoundCountMismatch {
                baseline: 1,
                candidate: 2
            }
        );
        assert_eq!(run(&[], &[], &cfg()), StatsError::NoRounds);
        assert_eq!(
            run(&two, &[vec![1.0], vec![]], &cfg()),
            StatsError::EmptyRound {
                side: Side::Candidate,
                round: 2
            }
        );
        assert_eq!(
            run(&[vec![]], &ok, &cfg()),
            StatsError::EmptyRound {
                side: Side::Baseline,
                round: 1
            }
        );
        for bad in [0.0, -1.0, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(
                run(&[vec![1.0, 2.0, bad]], &ok, &cfg()),
                StatsError::BadSample {
                    side: Side::Baseline,
                    round: 1,
                    index: 3,
                    value: bad
                }
            );
        }
        match run(&ok, &[vec![f64::NAN]], &cfg()) {
            StatsError::BadSample {
                side: Side::Candidate,
                round: 1,
                index: 1,
                value,
            } => assert!(value.is_nan()),
            e => panic!("{e:?}"),
        }
        for c in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
            let e = run(&ok, &ok, &IntervalConfig { confidence: c });
            assert!(matches!(e, StatsError::BadConfidence(v) if v.to_bits() == c.to_bits()));
        }
        assert!(matches!(
            run(&[vec![1e300]], &[vec![1e-300]], &cfg()),
            StatsError::RatioOutOfRange { round: 1, .. }
        ));

        let messages = [
            run(&ok, &two, &cfg()).to_string(),
            run(&[], &[], &cfg()).to_string(),
            run(&[vec![]], &ok, &cfg()).to_string(),
            run(&[vec![-2.0]], &ok, &cfg()).to_string(),
            run(&ok, &ok, &IntervalConfig { confidence: 1.0 }).to_string(),
        ];
        assert_eq!(
            messages,
            [
                "baseline has 1 rounds but candidate has 2: rounds must pair up",
                "no rounds to compare",
                "baseline round 1 has no samples",
                "baseline round 1 sample 1 is -2: samples must be finite and positive",
                "confidence 1 is not inside (0, 1)",
            ]
        );
    }

    #[test]
    fn serializes_lowercase_verdict_and_round_trips() {
        assert_eq!(
            serde_json::to_string(&SpeedVerdict::Faster).unwrap(),
            "\"faster\""
        );
        assert_eq!(
            serde_json::to_string(&SpeedVerdict::Slower).unwrap(),
            "\"slower\""
        );
        assert_eq!(
            serde_json::to_string(&SpeedVerdict::Unresolved).unwrap(),
            "\"unresolved\""
        );
        let (b, c) = one_sample_rounds(&[1.2, 1.25, 0.9, 1.2, 1.22, 1.21, 1.23]);
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        let json = serde_json::to_value(&a).unwrap();
        // One round in seven at 0.9x keeps the 95% interval's low end below 1.
        assert_eq!(json["verdict"], "unresolved");
        assert_eq!(json["reversals"], serde_json::json!([3]));
        assert!(json["interval"].is_array());
        assert_eq!(json["ranks"]["lower"], 1);
        let back: SpeedupAnalysis = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, a);
        // An analysis an earlier klab wrote (a bootstrap's settings, no ranks) still reads,
        // and renders its interval as what it was.
        let mut old = json;
        old.as_object_mut().unwrap().remove("ranks");
        old["resamples"] = 10_000.into();
        old["seed"] = 1_802_264_930u64.into();
        let back: SpeedupAnalysis = serde_json::from_value(old).unwrap();
        assert_eq!(back.ranks, None);
        let text = render_analysis(&back, "a", "b");
        assert!(
            text.contains("(a percentile bootstrap, as an earlier klab drew it)\n"),
            "{text}"
        );
    }

    fn hand_analysis(
        verdict: SpeedVerdict,
        ratio: f64,
        interval: Option<(f64, f64)>,
    ) -> SpeedupAnalysis {
        SpeedupAnalysis {
            rounds: 6,
            baseline_round_medians: vec![194.0, 195.0, 193.0, 180.0, 194.5, 194.2],
            candidate_round_medians: vec![100.0; 6],
            round_ratios: vec![1.94, 1.95, 1.93, 1.80, 1.945, 1.942],
            ratio,
            interval,
            confidence: 0.95,
            ranks: median_ranks(6, 0.95),
            verdict,
            resolvable_effect: interval.map(|(lo, hi)| (hi - lo) / 2.0 / ratio),
            reversals: vec![],
            note: None,
        }
    }

    #[test]
    fn render_full_text() {
        let a = hand_analysis(SpeedVerdict::Faster, 1.94, Some((1.93, 1.95)));
        let text = render_analysis(&a, "triad_buggy", "triad_f32");
        assert_eq!(
            text,
            "\
speedup of triad_f32 (candidate) over triad_buggy (baseline): per round, baseline median / candidate median; > 1 means candidate faster
medians: linear interpolation at q(N-1) over sorted samples
round  triad_buggy us  triad_f32 us  ratio
    1         194.000       100.000  1.94x
    2         195.000       100.000  1.95x
    3         193.000       100.000  1.93x
    4         180.000       100.000  1.80x
    5         194.500       100.000  1.95x
    6         194.200       100.000  1.94x
ratio: 1.94x (median of 6 round ratios)
interval: 95% 1.93x-1.95x (distribution-free interval of the median round ratio: order statistics k and n+1-k of the n round ratios, k the largest whose binomial coverage reaches the confidence; here order statistics 1 and 6 of 6, coverage 96.8%)
candidate faster: ratio 1.94x, 95% interval 1.93x-1.95x over 6 rounds (order statistics 1 and 6 of 6, coverage 96.8%)
smallest resolvable effect: 0.52% (half the interval width / ratio)
"
        );
    }

    #[test]
    fn render_verdicts_reversals_and_notes() {
        let slower = render_analysis(
            &hand_analysis(SpeedVerdict::Slower, 0.5, Some((0.48, 0.52))),
            "a",
            "b",
        );
        assert!(slower.contains(
            "candidate slower: ratio 0.50x, 95% interval 0.48x-0.52x over 6 rounds (order statistics 1 and 6 of 6, coverage 96.8%)\n"
        ), "{slower}");
        assert!(
            slower.contains("smallest resolvable effect: 4.0%"),
            "{slower}"
        );

        let mut open = hand_analysis(SpeedVerdict::Unresolved, 1.0, Some((0.9, 1.1)));
        open.reversals = vec![2, 4];
        open.confidence = 0.975;
        let text = render_analysis(&open, "a", "b");
        assert!(
            text.contains(
                "unresolved: ratio 1.00x, 97.5% interval 0.90x-1.10x over 6 rounds includes 1x"
            ),
            "{text}"
        );
        assert!(
            text.contains("reversals: round 2 (1.95x), round 4 (1.80x) against 1.00x overall"),
            "{text}"
        );
        assert!(text.contains("smallest resolvable effect: 10%"), "{text}");

        let one = analyze_speedup(&[vec![200.0]], &[vec![100.0]], &cfg()).unwrap();
        let text = render_analysis(&one, "a", "b");
        assert!(text.contains("interval: none (1 round)\n"), "{text}");
        assert!(
            text.contains("unresolved: ratio 2.00x over 1 round; no interval\n"),
            "{text}"
        );
        assert!(text.contains("note: 1 round cannot give a 95% interval of the median round ratio: it takes at least 6 rounds\n"));
        assert!(!text.contains("smallest resolvable effect"));
        assert!(!text.contains("reversals"));
    }

    #[test]
    fn render_adds_decimals_when_two_would_hide_the_verdict() {
        // At 2 or 3 decimals the low end would print as 1.00x / 1.000x beside "faster".
        let a = hand_analysis(SpeedVerdict::Faster, 1.002, Some((1.0001, 1.004)));
        let text = render_analysis(&a, "a", "b");
        assert!(
            text.contains("candidate faster: ratio 1.0020x, 95% interval 1.0001x-1.0040x"),
            "{text}"
        );
        // Ends that 2 decimals would merge get a third.
        let a = hand_analysis(SpeedVerdict::Faster, 1.5, Some((1.501, 1.503)));
        let text = render_analysis(&a, "a", "b");
        assert!(text.contains("interval 1.501x-1.503x"), "{text}");
        // Plain cases keep 2.
        let a = hand_analysis(SpeedVerdict::Faster, 1.5, Some((1.4, 1.6)));
        assert!(render_analysis(&a, "a", "b").contains("interval 1.40x-1.60x"));
    }

    fn rounds_strategy(
        min_rounds: usize,
        max_rounds: usize,
    ) -> impl Strategy<Value = (Vec<Vec<f64>>, Vec<Vec<f64>>)> {
        prop::collection::vec(
            (
                prop::collection::vec(1.0f64..1000.0, 1..6),
                prop::collection::vec(1.0f64..1000.0, 1..6),
            ),
            min_rounds..max_rounds,
        )
        .prop_map(|v| v.into_iter().unzip())
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * a.abs().max(b.abs())
    }

    proptest! {
        #[test]
        fn interval_lies_within_the_round_ratios(
            (b, c) in rounds_strategy(2, 9),
            confidence in 0.5f64..0.99,
        ) {
            let cfg = IntervalConfig { confidence };
            let a = analyze_speedup(&b, &c, &cfg).unwrap();
            prop_assume!(a.interval.is_some());
            let (lo, hi) = a.interval.unwrap();
            let min = a.round_ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let max = a.round_ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(lo <= hi);
            prop_assert!(min <= lo && hi <= max, "{min} {lo} {hi} {max}");
            prop_assert!(min <= a.ratio && a.ratio <= max);
            prop_assert_eq!(a.verdict == SpeedVerdict::Faster, lo > 1.0);
            prop_assert_eq!(a.verdict == SpeedVerdict::Slower, hi < 1.0);
        }

        #[test]
        fn scaling_the_candidate_by_k_scales_ratios_by_one_over_k(
            (b, c) in rounds_strategy(1, 8),
            k in 0.01f64..100.0,
        ) {
            let cfg = IntervalConfig::default();
            let a = analyze_speedup(&b, &c, &cfg).unwrap();
            let scaled: Vec<Vec<f64>> =
                c.iter().map(|r| r.iter().map(|x| x * k).collect()).collect();
            let s = analyze_speedup(&b, &scaled, &cfg).unwrap();
            for (r, rs) in a.round_ratios.iter().zip(&s.round_ratios) {
                prop_assert!(close(r / k, *rs, 1e-12), "{r} / {k} vs {rs}");
            }
            prop_assert!(close(a.ratio / k, s.ratio, 1e-12));
            match (a.interval, s.interval) {
                (Some((lo, hi)), Some((slo, shi))) => {
                    prop_assert!(close(lo / k, slo, 1e-9) && close(hi / k, shi, 1e-9));
                }
                (None, None) => {}
                other => prop_assert!(false, "{other:?}"),
            }
        }

        /// With an odd round count every median is one element, and the interval's ends are
        /// ratios, so swapping sides inverts the interval exactly (up to rounding) and flips
        /// the verdict.
        #[test]
        fn swapping_sides_inverts_ratios_and_flips_the_verdict(
            (b, c) in rounds_strategy(2, 13).prop_map(|(mut b, mut c)| {
                if b.len() % 2 == 0 {
                    b.pop();
                    c.pop();
                }
                (b, c)
            }),
            confidence in prop::sample::select(vec![0.5f64, 0.75, 0.95]),
        ) {
            let cfg = IntervalConfig { confidence };
            let a = analyze_speedup(&b, &c, &cfg).unwrap();
            let s = analyze_speedup(&c, &b, &cfg).unwrap();
            prop_assert_eq!(&a.baseline_round_medians, &s.candidate_round_medians);
            prop_assert_eq!(&a.candidate_round_medians, &s.baseline_round_medians);
            for (r, rs) in a.round_ratios.iter().zip(&s.round_ratios) {
                prop_assert!(close(1.0 / r, *rs, 1e-12), "{r} vs {rs}");
            }
            prop_assert!(close(1.0 / a.ratio, s.ratio, 1e-12));
            prop_assert_eq!(&a.reversals, &s.reversals);
            if let (Some((lo, hi)), Some((slo, shi))) = (a.interval, s.interval) {
                prop_assert!(close(1.0 / hi, slo, 1e-12) && close(1.0 / lo, shi, 1e-12));
                prop_assume!((lo - 1.0).abs() > 1e-9 && (hi - 1.0).abs() > 1e-9);
            }
            let flipped = match a.verdict {
                SpeedVerdict::Faster => SpeedVerdict::Slower,
                SpeedVerdict::Slower => SpeedVerdict::Faster,
                SpeedVerdict::Unresolved => SpeedVerdict::Unresolved,
            };
            prop_assert_eq!(s.verdict, flipped);
        }
    }
}
