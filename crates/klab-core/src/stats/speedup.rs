//! Round-level speedup of a candidate over a baseline (the ABBA discipline: per round, summarize
//! each side's samples with the same rule, then compare rounds, not launches).
//!
//! Per round r: ratio_r = median(baseline_r) / median(candidate_r), so > 1 means the candidate is
//! faster. The headline ratio is the median of the round ratios. Its interval is a percentile
//! bootstrap in which the round is the resampling unit: thousands of correlated launches are not
//! thousands of independent rounds.

use serde::{Deserialize, Serialize};

use super::{median_unsorted, quantile_sorted, Rng, QUANTILE_RULE};

/// Default bootstrap seed: the bytes of "klab" (0x6b6c6162 = 1802264930).
pub const DEFAULT_SEED: u64 = 0x6b6c_6162;

/// How the interval is computed, for artifacts and receipts.
pub const BOOTSTRAP_METHOD: &str = "percentile bootstrap over rounds: each replicate draws the \
     round count of round ratios with replacement and takes their median";

/// Bootstrap settings. Default: 10 000 resamples, 95% confidence, seed [`DEFAULT_SEED`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapConfig {
    pub resamples: u32,
    pub confidence: f64,
    pub seed: u64,
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        BootstrapConfig {
            resamples: 10_000,
            confidence: 0.95,
            seed: DEFAULT_SEED,
        }
    }
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
    #[error("resamples must be at least 1")]
    NoResamples,
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
    /// Percentile bootstrap interval over rounds; None when rounds < 2.
    pub interval: Option<(f64, f64)>,
    pub confidence: f64,
    pub resamples: u32,
    pub seed: u64,
    /// Faster if the interval's low end is > 1, Slower if its high end is < 1, else Unresolved.
    pub verdict: SpeedVerdict,
    /// Smallest relative effect these rounds could resolve: half the interval width / `ratio`.
    pub resolvable_effect: Option<f64>,
    /// 1-based rounds whose ratio lies on the other side of 1 than `ratio`.
    pub reversals: Vec<usize>,
    /// Caveat about the amount of evidence, when there is one.
    pub note: Option<String>,
}

/// Bootstrap replicates of the median of `ratios`, in draw order: each replicate draws
/// `ratios.len()` values with replacement (via [`Rng::below`], seeded by `seed`) and takes
/// their median by the quantile rule. Empty when `ratios` is empty.
pub fn bootstrap_median_replicates(ratios: &[f64], resamples: u32, seed: u64) -> Vec<f64> {
    if ratios.is_empty() {
        return Vec::new();
    }
    let n = ratios.len();
    let mut rng = Rng::new(seed);
    let mut draw = vec![0.0; n];
    (0..resamples)
        .map(|_| {
            for d in draw.iter_mut() {
                *d = ratios[rng.below(n as u64) as usize];
            }
            draw.sort_by(f64::total_cmp);
            quantile_sorted(&draw, 0.5).unwrap_or(f64::NAN)
        })
        .collect()
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
/// each side must come from the same ABBA round. Deterministic for a given `cfg.seed`.
pub fn analyze_speedup(
    baseline_rounds: &[Vec<f64>],
    candidate_rounds: &[Vec<f64>],
    cfg: &BootstrapConfig,
) -> Result<SpeedupAnalysis, StatsError> {
    if cfg.resamples == 0 {
        return Err(StatsError::NoResamples);
    }
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

    let interval = (rounds >= 2).then(|| {
        let mut reps = bootstrap_median_replicates(&round_ratios, cfg.resamples, cfg.seed);
        reps.sort_by(f64::total_cmp);
        let c = cfg.confidence;
        // Both quantile levels lie in (0, 1) and `reps` is non-empty, so these are Some.
        let lo = quantile_sorted(&reps, (1.0 - c) / 2.0).unwrap_or(f64::NAN);
        let hi = quantile_sorted(&reps, (1.0 + c) / 2.0).unwrap_or(f64::NAN);
        (lo, hi)
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
    let note = match rounds {
        1 => Some("1 round: no interval; collect >= 2 (better >= 5) rounds".to_string()),
        2..=4 => Some(format!(
            "{rounds} rounds: the interval rests on few rounds and is coarse; collect >= 5 rounds"
        )),
        _ => None,
    };
    Ok(SpeedupAnalysis {
        rounds,
        baseline_round_medians,
        candidate_round_medians,
        round_ratios,
        ratio,
        interval,
        confidence: cfg.confidence,
        resamples: cfg.resamples,
        seed: cfg.seed,
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
fn percent_label(confidence: f64) -> String {
    let p = (confidence * 100.0 * 1e4).round() / 1e4;
    format!("{p}")
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
    let method = format!(
        "round bootstrap, {} resamples, seed {}",
        a.resamples, a.seed
    );
    match a.interval {
        Some((lo, hi)) => {
            line(format!(
                "interval: {conf}% {}-{} ({BOOTSTRAP_METHOD}; {} resamples, seed {})",
                x(lo),
                x(hi),
                a.resamples,
                a.seed
            ));
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

    fn cfg() -> BootstrapConfig {
        BootstrapConfig::default()
    }

    #[test]
    fn default_config_is_10000_resamples_95_percent_klab_seed() {
        let c = BootstrapConfig::default();
        assert_eq!(
            (c.resamples, c.confidence, c.seed),
            (10_000, 0.95, 0x6b6c_6162)
        );
        assert_eq!(DEFAULT_SEED, 1_802_264_930);
        assert_eq!(&DEFAULT_SEED.to_be_bytes()[4..], b"klab");
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
        let (lo, hi) = a.interval.unwrap();
        assert!(2.0 <= lo && lo <= hi && hi <= 50.0 / 15.0);
        assert_eq!(a.verdict, SpeedVerdict::Faster);
        assert_eq!(
            (a.confidence, a.resamples, a.seed),
            (0.95, 10_000, DEFAULT_SEED)
        );
        assert_eq!(
            a.note.as_deref(),
            Some("2 rounds: the interval rests on few rounds and is coarse; collect >= 5 rounds")
        );
    }

    #[test]
    fn clear_2x_speedup_is_faster() {
        let mut rng = Rng::new(11);
        let b = rounds_around(&mut rng, &[200.0, 202.0, 199.0, 201.0, 200.5], 0.02);
        let c = rounds_around(&mut rng, &[100.0, 101.0, 99.5, 100.2, 100.1], 0.02);
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
        let b = rounds_around(&mut rng, &[100.0; 5], 0.05);
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
        assert!(a.reversals.is_empty());
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
            Some("1 round: no interval; collect >= 2 (better >= 5) rounds")
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
    fn interval_is_the_percentile_of_the_replicates() {
        let ratios = [1.1, 0.95, 1.3, 1.2, 1.05, 1.15];
        let (b, c) = one_sample_rounds(&ratios);
        let cfg = BootstrapConfig {
            resamples: 2_000,
            confidence: 0.9,
            seed: 99,
        };
        let a = analyze_speedup(&b, &c, &cfg).unwrap();
        let mut reps = bootstrap_median_replicates(&a.round_ratios, 2_000, 99);
        assert_eq!(reps.len(), 2_000);
        reps.sort_by(f64::total_cmp);
        // The levels exactly as (1 - c) / 2 and (1 + c) / 2 come out in floating point.
        let lo = quantile_sorted(&reps, (1.0 - 0.9) / 2.0).unwrap();
        let hi = quantile_sorted(&reps, (1.0 + 0.9) / 2.0).unwrap();
        assert_eq!(a.interval, Some((lo, hi)));
        assert!(lo < hi);
    }

    #[test]
    fn replicates_draw_with_replacement() {
        // One replicate of two values is the median of two draws from {1, 3}: 1, 2 or 3, and
        // over many replicates all three appear (2 about half the time).
        let reps = bootstrap_median_replicates(&[1.0, 3.0], 4_000, 5);
        assert!(reps.iter().all(|&r| r == 1.0 || r == 2.0 || r == 3.0));
        let count = |v: f64| reps.iter().filter(|&&r| r == v).count();
        let (ones, twos, threes) = (count(1.0), count(2.0), count(3.0));
        assert!(
            ones > 800 && threes > 800 && twos > 1_800,
            "{ones} {twos} {threes}"
        );
        assert!(bootstrap_median_replicates(&[], 10, 5).is_empty());
        assert_eq!(bootstrap_median_replicates(&[4.0], 3, 5), [4.0, 4.0, 4.0]);
    }

    #[test]
    fn fixed_seed_is_deterministic_and_seeds_differ() {
        let ratios = [1.1, 0.95, 1.3, 1.2, 1.05, 1.15, 1.0];
        let r1 = bootstrap_median_replicates(&ratios, 500, 7);
        let r2 = bootstrap_median_replicates(&ratios, 500, 7);
        let r3 = bootstrap_median_replicates(&ratios, 500, 8);
        assert_eq!(r1, r2);
        assert_ne!(r1, r3);

        let (b, c) = one_sample_rounds(&ratios);
        let a1 = analyze_speedup(&b, &c, &cfg()).unwrap();
        let a2 = analyze_speedup(&b, &c, &cfg()).unwrap();
        assert_eq!(a1, a2);
        let other = BootstrapConfig { seed: 1, ..cfg() };
        let a3 = analyze_speedup(&b, &c, &other).unwrap();
        assert_eq!(a3.seed, 1);
        assert_eq!(a3.round_ratios, a1.round_ratios);
    }

    #[test]
    fn every_error_path() {
        let ok = vec![vec![1.0]];
        let two = vec![vec![1.0], vec![2.0]];
        let run = |b: &[Vec<f64>], c: &[Vec<f64>], cfg: &BootstrapConfig| {
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
            let e = run(
                &ok,
                &ok,
                &BootstrapConfig {
                    confidence: c,
                    ..cfg()
                },
            );
            assert!(matches!(e, StatsError::BadConfidence(v) if v.to_bits() == c.to_bits()));
        }
        assert_eq!(
            run(
                &ok,
                &ok,
                &BootstrapConfig {
                    resamples: 0,
                    ..cfg()
                }
            ),
            StatsError::NoResamples
        );
        assert!(matches!(
            run(&[vec![1e300]], &[vec![1e-300]], &cfg()),
            StatsError::RatioOutOfRange { round: 1, .. }
        ));

        let messages = [
            run(&ok, &two, &cfg()).to_string(),
            run(&[], &[], &cfg()).to_string(),
            run(&[vec![]], &ok, &cfg()).to_string(),
            run(&[vec![-2.0]], &ok, &cfg()).to_string(),
            run(
                &ok,
                &ok,
                &BootstrapConfig {
                    confidence: 1.0,
                    ..cfg()
                },
            )
            .to_string(),
            run(
                &ok,
                &ok,
                &BootstrapConfig {
                    resamples: 0,
                    ..cfg()
                },
            )
            .to_string(),
        ];
        assert_eq!(
            messages,
            [
                "baseline has 1 rounds but candidate has 2: rounds must pair up",
                "no rounds to compare",
                "baseline round 1 has no samples",
                "baseline round 1 sample 1 is -2: samples must be finite and positive",
                "confidence 1 is not inside (0, 1)",
                "resamples must be at least 1",
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
        let (b, c) = one_sample_rounds(&[1.2, 1.25, 0.9, 1.2, 1.22]);
        let a = analyze_speedup(&b, &c, &cfg()).unwrap();
        let json = serde_json::to_value(&a).unwrap();
        // One round in five at 0.9x keeps the 95% interval's low end below 1.
        assert_eq!(json["verdict"], "unresolved");
        assert_eq!(json["reversals"], serde_json::json!([3]));
        assert!(json["interval"].is_array());
        let back: SpeedupAnalysis = serde_json::from_value(json).unwrap();
        assert_eq!(back, a);
        let cfg_json = serde_json::to_string(&cfg()).unwrap();
        assert_eq!(
            serde_json::from_str::<BootstrapConfig>(&cfg_json).unwrap(),
            cfg()
        );
    }

    fn hand_analysis(
        verdict: SpeedVerdict,
        ratio: f64,
        interval: Option<(f64, f64)>,
    ) -> SpeedupAnalysis {
        SpeedupAnalysis {
            rounds: 5,
            baseline_round_medians: vec![194.0, 195.0, 193.0, 180.0, 194.5],
            candidate_round_medians: vec![100.0; 5],
            round_ratios: vec![1.94, 1.95, 1.93, 1.80, 1.945],
            ratio,
            interval,
            confidence: 0.95,
            resamples: 10_000,
            seed: DEFAULT_SEED,
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
ratio: 1.94x (median of 5 round ratios)
interval: 95% 1.93x-1.95x (percentile bootstrap over rounds: each replicate draws the round count of round ratios with replacement and takes their median; 10000 resamples, seed 1802264930)
candidate faster: ratio 1.94x, 95% interval 1.93x-1.95x over 5 rounds (round bootstrap, 10000 resamples, seed 1802264930)
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
            "candidate slower: ratio 0.50x, 95% interval 0.48x-0.52x over 5 rounds (round bootstrap, 10000 resamples, seed 1802264930)\n"
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
                "unresolved: ratio 1.00x, 97.5% interval 0.90x-1.10x over 5 rounds includes 1x"
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
        assert!(text.contains("note: 1 round: no interval; collect >= 2 (better >= 5) rounds\n"));
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
            seed in any::<u64>(),
            confidence in 0.5f64..0.99,
        ) {
            let cfg = BootstrapConfig { resamples: 300, confidence, seed };
            let a = analyze_speedup(&b, &c, &cfg).unwrap();
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
            let cfg = BootstrapConfig { resamples: 300, ..BootstrapConfig::default() };
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

        /// With an odd round count every median is one element, and with confidence 0.5 or 0.75
        /// over 801 resamples both interval quantiles fall on single replicates, so swapping
        /// sides inverts the interval exactly (up to rounding) and flips the verdict.
        #[test]
        fn swapping_sides_inverts_ratios_and_flips_the_verdict(
            (b, c) in rounds_strategy(2, 11).prop_map(|(mut b, mut c)| {
                if b.len() % 2 == 0 {
                    b.pop();
                    c.pop();
                }
                (b, c)
            }),
            seed in any::<u64>(),
            confidence in prop::sample::select(vec![0.5f64, 0.75]),
        ) {
            let cfg = BootstrapConfig { resamples: 801, confidence, seed };
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
