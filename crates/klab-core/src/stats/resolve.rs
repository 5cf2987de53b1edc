//! Rounds until resolved (`klab rounds --resolve P`): after each round the widest ratio
//! interval is compared with the target, and the rounds stop when it is narrow enough, when
//! one more round would not fit in the time budget, or at a cap on rounds. [`next`] decides;
//! [`Resolution`] is what the summary records of it.
//!
//! The width is the bootstrap interval's half-width relative to its ratio (the analysis's
//! `resolvable_effect`). Stopping at the first round that reaches the target reads the width
//! a little low on average (a sequential look); the minimum rounds (`--rounds`, at least 5
//! with `--resolve`) keep the first looks away from the noisiest intervals.

use serde::{Deserialize, Serialize};

/// Why the rounds stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    /// Every ratio's interval is within the target.
    Resolved,
    /// One more round would not fit in the budget.
    Budget,
    /// The cap on rounds was reached.
    MaxRounds,
    /// A ratio cannot be resolved by more rounds (a kernel failed a gate, or no analysis).
    NoRatio,
}

/// What the rounds did to reach a resolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// The half-width asked for, as a fraction of the ratio (0.01: 1%).
    pub target: f64,
    /// The widest interval's half-width at the end, as a fraction; `None` with no ratio.
    pub half_width: Option<f64>,
    pub reached: bool,
    pub stopped: Stop,
    pub rounds: u32,
    pub elapsed_s: f64,
    pub budget_s: f64,
}

impl Resolution {
    /// One line for the summary.
    pub fn describe(&self) -> String {
        let pct = |f: f64| format!("{:.2}%", 100.0 * f);
        let width = self
            .half_width
            .map(|w| format!("+/-{}", pct(w)))
            .unwrap_or_else(|| "none".into());
        let why = match self.stopped {
            Stop::Resolved => "reached".to_string(),
            Stop::Budget => format!("NOT reached: the {:.0} s budget ran out", self.budget_s),
            Stop::MaxRounds => format!("NOT reached: {} rounds is the cap", self.rounds),
            Stop::NoRatio => "NOT reached: no ratio to resolve".to_string(),
        };
        format!(
            "resolution: target +/-{} {why}; widest interval {width} after {} rounds in {:.1} s",
            pct(self.target),
            self.rounds,
            self.elapsed_s
        )
    }
}

/// The most rounds `--resolve` adds up to, whatever the budget.
pub const MAX_ROUNDS: u32 = 200;

/// The fewest rounds `--resolve` starts from: a bootstrap over fewer rounds gives intervals
/// too coarse to stop on.
pub const MIN_ROUNDS: u32 = 5;

/// Refuse rounds to start from that `--resolve` cannot use.
pub fn check_start(rounds: u32) -> Result<(), String> {
    if rounds < MIN_ROUNDS {
        Err(format!(
            "--resolve adds rounds to at least {MIN_ROUNDS} (got --rounds {rounds})"
        ))
    } else {
        Ok(())
    }
}

/// What to do after `rounds` rounds that took `elapsed_s`: `None` to run one more round,
/// else why to stop. `half_width` is the widest interval's (`None` when some ratio has
/// none); `resolvable` is false when more rounds cannot give one (a failed gate).
pub fn next(
    target: f64,
    half_width: Option<f64>,
    resolvable: bool,
    rounds: u32,
    elapsed_s: f64,
    budget_s: f64,
) -> Option<Stop> {
    if !resolvable {
        return Some(Stop::NoRatio);
    }
    if half_width.is_some_and(|w| w <= target) {
        return Some(Stop::Resolved);
    }
    if rounds >= MAX_ROUNDS {
        return Some(Stop::MaxRounds);
    }
    let per_round = elapsed_s / f64::from(rounds.max(1));
    (elapsed_s + per_round > budget_s).then_some(Stop::Budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rounds_stop_when_resolved_out_of_time_or_at_the_cap() {
        // Narrow enough: stop, whatever the time left.
        assert_eq!(
            next(0.01, Some(0.009), true, 5, 10.0, 60.0),
            Some(Stop::Resolved)
        );
        assert_eq!(
            next(0.01, Some(0.01), true, 5, 10.0, 60.0),
            Some(Stop::Resolved)
        );
        // Too wide with time for a round of 2 s: go on.
        assert_eq!(next(0.01, Some(0.02), true, 5, 10.0, 60.0), None);
        // Too wide, and one more round (2 s) would end past the budget.
        assert_eq!(
            next(0.01, Some(0.02), true, 5, 58.5, 60.0),
            Some(Stop::Budget)
        );
        // No interval yet (one round) is not resolved.
        assert_eq!(next(0.01, None, true, 1, 1.0, 60.0), None);
        assert_eq!(
            next(0.01, Some(0.5), true, MAX_ROUNDS, 1.0, 1e9),
            Some(Stop::MaxRounds)
        );
        assert_eq!(
            next(0.01, Some(0.001), false, 5, 1.0, 60.0),
            Some(Stop::NoRatio)
        );
    }

    #[test]
    fn the_line_says_whether_it_was_reached() {
        let r = Resolution {
            target: 0.01,
            half_width: Some(0.016),
            reached: false,
            stopped: Stop::Budget,
            rounds: 14,
            elapsed_s: 59.2,
            budget_s: 60.0,
        };
        assert_eq!(
            r.describe(),
            "resolution: target +/-1.00% NOT reached: the 60 s budget ran out; widest interval +/-1.60% after 14 rounds in 59.2 s"
        );
    }
}
