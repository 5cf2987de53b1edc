//! Rounds until resolved (`klab rounds --resolve P`): after each round the widest ratio
//! interval is compared with the target, and the rounds stop when it is narrow enough, when
//! one more round would not fit in the time budget, or at a cap on rounds. [`next`] decides;
//! [`Resolution`] is what the summary records of it.
//!
//! The width is how far the interval reaches from its ratio, relative to it: the farther
//! end's distance (`SpeedupAnalysis::reach`; the half-width when the interval is symmetric,
//! which an interval of a median ratio seldom is), so that a target reached puts both ends
//! within it. Kept under the name `half_width` in the records. Stopping at the first round that reaches the target reads the width
//! a little low on average (a sequential look); the first look comes only when the rounds can
//! give an interval at all ([`min_start`]: 6 at 95%).

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
    /// How far the widest interval reaches from its ratio at the end, as a fraction of the
    /// ratio (its half-width when symmetric); `None` with no ratio.
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
        // Short of the target: about how many rounds would have reached it.
        let more = match (self.stopped, self.half_width) {
            (Stop::Budget | Stop::MaxRounds, Some(w)) if w > self.target => format!(
                "; about {} rounds would reach it if further rounds spread as these did",
                rounds_for(self.target, w, self.rounds)
            ),
            _ => String::new(),
        };
        format!(
            "resolution: target +/-{} {why}; widest interval {width} after {} rounds in {:.1} s{more}",
            pct(self.target),
            self.rounds,
            self.elapsed_s
        )
    }
}

/// About how many rounds would bring a half-width of `half_width` after `rounds` rounds down
/// to `target`, if further rounds spread as these did: the width of a median's interval
/// shrinks about as one over the square root of the rounds. At least [`min_start`].
pub fn rounds_for(target: f64, half_width: f64, rounds: u32) -> u32 {
    let scale = (half_width / target).powi(2);
    let n = (f64::from(rounds.max(1)) * scale).ceil();
    let n = (n.min(f64::from(u32::MAX)) as u32).max(min_start());
    // Rounds past the last step of the interval's rank only widen it: name the next step.
    if n > MAX_ROUNDS {
        return n;
    }
    (n..=MAX_ROUNDS)
        .find(|&m| rank(m) > rank(m - 1))
        .unwrap_or(n)
}

/// The rank of the lower end of the interval over `rounds` rounds at klab's confidence
/// (0: no interval).
fn rank(rounds: u32) -> usize {
    super::median_ranks(rounds as usize, super::CONFIDENCE).map_or(0, |r| r.lower)
}

/// The fewest rounds after `rounds` whose interval can be narrower. Between them the rank
/// stays, and a round added can only widen [X(k), X(n+1-k)]: its upper index moves up one
/// while the set only grows.
pub fn next_useful(rounds: u32) -> u32 {
    let now = rank(rounds);
    (rounds + 1..=MAX_ROUNDS + 1)
        .find(|&n| rank(n) > now)
        .unwrap_or(MAX_ROUNDS + 1)
}

/// `klab compare --resolve P`: whether the rounds two receipts hold resolve P, and if not,
/// about how many would.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolveCheck {
    /// The half-width asked for, as a fraction of the ratio.
    pub target: f64,
    /// How far the interval reaches from the ratio, as a fraction of it (its half-width
    /// when symmetric); `None` when the rounds give no interval.
    pub half_width: Option<f64>,
    pub rounds: u32,
    pub reached: bool,
    /// When not reached: about how many rounds would reach it.
    pub rounds_needed: Option<u32>,
}

impl ResolveCheck {
    /// The check of a ratio's half-width (`None`: no interval) over `rounds` rounds.
    pub fn of(target: f64, half_width: Option<f64>, rounds: u32) -> ResolveCheck {
        let reached = half_width.is_some_and(|w| w <= target);
        let rounds_needed = match half_width {
            _ if reached => None,
            Some(w) => Some(rounds_for(target, w, rounds)),
            None => Some(min_start().max(rounds + 1)),
        };
        ResolveCheck {
            target,
            half_width,
            rounds,
            reached,
            rounds_needed,
        }
    }

    /// One line for the comparison.
    pub fn describe(&self) -> String {
        let pct = |f: f64| format!("{:.2}%", 100.0 * f);
        let target = pct(self.target);
        let (n, r) = (
            self.rounds,
            if self.rounds == 1 { "round" } else { "rounds" },
        );
        match (self.half_width, self.rounds_needed) {
            (Some(w), _) if self.reached => {
                format!("resolution: target +/-{target} reached: the interval is +/-{} over {n} {r}", pct(w))
            }
            (Some(w), Some(need)) => format!(
                "resolution: target +/-{target} NOT reached: the interval is +/-{} over {n} {r}; about {need} rounds would reach it if further rounds spread as these did",
                pct(w)
            ),
            (_, need) => format!(
                "resolution: target +/-{target} NOT reached: {n} {r} give no {}% interval; it takes at least {}",
                super::percent_label(super::CONFIDENCE),
                need.unwrap_or_else(min_start)
            ),
        }
    }
}

/// The most rounds `--resolve` adds up to, whatever the budget.
pub const MAX_ROUNDS: u32 = 200;

/// The fewest rounds `--resolve` starts from: fewer give no interval at klab's confidence.
pub fn min_start() -> u32 {
    super::min_rounds(super::CONFIDENCE) as u32
}

/// Refuse rounds to start from that `--resolve` cannot use.
pub fn check_start(rounds: u32) -> Result<(), String> {
    let least = min_start();
    if rounds < least {
        Err(format!(
            "--resolve adds rounds to at least {least}, the fewest that give a {}% interval (got --rounds {rounds})",
            super::percent_label(super::CONFIDENCE)
        ))
    } else {
        Ok(())
    }
}

/// What to do after `rounds` rounds that took `elapsed_s`: `None` to run `step` more rounds
/// (rounds come in multiples of `step`), else why to stop. `half_width` is the widest
/// interval's (`None` when some ratio has none); `resolvable` is false when more rounds
/// cannot give one (a failed gate).
pub fn next(
    target: f64,
    half_width: Option<f64>,
    resolvable: bool,
    rounds: u32,
    step: u32,
    elapsed_s: f64,
    budget_s: f64,
) -> Option<Stop> {
    if !resolvable {
        return Some(Stop::NoRatio);
    }
    if half_width.is_some_and(|w| w <= target) {
        return Some(Stop::Resolved);
    }
    // Only the rounds up to the next step of the interval's rank can narrow it: they must
    // all fit, to a whole multiple of `step`.
    let useful = next_useful(rounds).next_multiple_of(step.max(1));
    if rounds >= MAX_ROUNDS || useful > MAX_ROUNDS {
        return Some(Stop::MaxRounds);
    }
    let per_round = elapsed_s / f64::from(rounds.max(1));
    let more = f64::from(useful - rounds);
    (elapsed_s + per_round * more > budget_s).then_some(Stop::Budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rounds_stop_when_resolved_out_of_time_or_at_the_cap() {
        // Narrow enough: stop, whatever the time left.
        assert_eq!(
            next(0.01, Some(0.009), true, 5, 1, 10.0, 60.0),
            Some(Stop::Resolved)
        );
        assert_eq!(
            next(0.01, Some(0.01), true, 5, 1, 10.0, 60.0),
            Some(Stop::Resolved)
        );
        // Too wide with time for a round of 2 s: go on.
        assert_eq!(next(0.01, Some(0.02), true, 5, 1, 10.0, 60.0), None);
        // Too wide, and one more round (2 s) would end past the budget.
        assert_eq!(
            next(0.01, Some(0.02), true, 5, 1, 58.5, 60.0),
            Some(Stop::Budget)
        );
        // No interval yet (one round) is not resolved.
        assert_eq!(next(0.01, None, true, 1, 1, 1.0, 60.0), None);
        // After 7 rounds (the range) only the 9th can narrow the interval: two rounds of 2 s
        // must fit, not one.
        assert_eq!(next_useful(7), 9);
        assert_eq!(next(0.01, Some(0.02), true, 7, 1, 14.0, 18.0), None);
        assert_eq!(
            next(0.01, Some(0.02), true, 7, 1, 14.0, 17.0),
            Some(Stop::Budget)
        );
        assert_eq!((next_useful(1), next_useful(5), next_useful(9)), (6, 6, 12));
        // Rounds in pairs (alternating): after 8, the 9th narrows the interval, but the
        // rounds run to 10, so two rounds (4 s) must fit where one round would have.
        assert_eq!(next_useful(8), 9);
        assert_eq!(next(0.01, Some(0.02), true, 8, 1, 16.0, 19.0), None);
        assert_eq!(
            next(0.01, Some(0.02), true, 8, 2, 16.0, 19.0),
            Some(Stop::Budget)
        );
        assert_eq!(next(0.01, Some(0.02), true, 8, 2, 16.0, 20.0), None);
        assert_eq!(
            next(0.01, Some(0.5), true, MAX_ROUNDS, 1, 1.0, 1e9),
            Some(Stop::MaxRounds)
        );
        assert_eq!(
            next(0.01, Some(0.001), false, 5, 1, 1.0, 60.0),
            Some(Stop::NoRatio)
        );
    }

    #[test]
    fn a_comparison_says_whether_its_rounds_resolve_the_target() {
        let ok = ResolveCheck::of(0.01, Some(0.004), 7);
        assert!(ok.reached);
        assert_eq!(ok.rounds_needed, None);
        assert_eq!(
            ok.describe(),
            "resolution: target +/-1.00% reached: the interval is +/-0.40% over 7 rounds"
        );
        // Twice too wide: about four times the rounds (28, where the rank steps up).
        let wide = ResolveCheck::of(0.01, Some(0.02), 7);
        assert_eq!((wide.reached, wide.rounds_needed), (false, Some(28)));
        // 1.6 times too wide after 14: 36, and the rank steps up at 37.
        assert_eq!(rounds_for(0.01, 0.016, 14), 37);
        assert!(wide.describe().starts_with(
            "resolution: target +/-1.00% NOT reached: the interval is +/-2.00% over 7 rounds; about 28 rounds"
        ));
        let none = ResolveCheck::of(0.01, None, 5);
        assert_eq!((none.reached, none.rounds_needed), (false, Some(6)));
        assert_eq!(
            none.describe(),
            "resolution: target +/-1.00% NOT reached: 5 rounds give no 95% interval; it takes at least 6"
        );
        // Never fewer than the rounds that give an interval, never an overflow.
        assert_eq!(rounds_for(0.01, 0.0101, 1), 6);
        assert_eq!(rounds_for(1e-12, 1.0, 7), u32::MAX);
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
            "resolution: target +/-1.00% NOT reached: the 60 s budget ran out; widest interval +/-1.60% after 14 rounds in 59.2 s; about 37 rounds would reach it if further rounds spread as these did"
        );
    }
}
