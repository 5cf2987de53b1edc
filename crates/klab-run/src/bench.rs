//! What `klab bench` reports: a [`BenchReport`] the child builds from its blocks and its
//! receipt and hands to its parent in its result, which the parent prints in the format it
//! was asked for. The lines a timing command says of a measured block (its check, its
//! integrity, its timing) are made here once, for `bench` and `triad`.

use klab_core::samples::{Regime, Timer};
use klab_core::stats::{gb_per_s, Summary};
use klab_engine::timing::{Measurement, Outcome, TimingConfig};
use klab_evidence::receipt::ResultSummary;
use klab_spec::rule::CheckOutcome;
use serde::{Deserialize, Serialize};

use crate::blocks::Block;

/// One bench: the configuration, each block, and the receipt or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub kernel: String,
    pub n: u64,
    pub regime: Regime,
    pub timer: Timer,
    pub samples: u32,
    pub warmup: String,
    pub rounds: u32,
    pub regime_caveat: String,
    pub blocks: Vec<BenchBlock>,
    /// Why no receipt was written: the first gate that failed.
    pub failure: Option<String>,
    /// The run's folder (its raw files, and the receipt when one was written).
    pub folder: String,
    pub result: Option<ResultSummary>,
    pub receipt: Option<String>,
}

/// One block as the bench saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchBlock {
    pub round: u32,
    pub correct: bool,
    /// Rejected before timing: the first check's failure (and the kernel is known to be
    /// broken when `known_broken`); nothing else of the block exists.
    pub rejected: Option<Rejection>,
    /// The checks around timing, as [`check_line`] says them.
    pub check: Option<String>,
    /// The floor, the checked and probe medians, as [`integrity_line`] says them.
    pub integrity: Option<String>,
    /// Why the block's timing is withheld (a gate failed during or after it).
    pub withheld: Option<String>,
    pub timing: Option<BlockTiming>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejection {
    pub check: String,
    pub known_broken: bool,
}

/// A timed block's samples summarized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockTiming {
    /// `None` when the block has no samples.
    pub p10_us: Option<f64>,
    pub median_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub useful_gb_s: Option<f64>,
    pub slots: u64,
    pub warmup_launches: u64,
    pub flags: Vec<String>,
}

impl BenchBlock {
    /// The block as the report keeps it: `useful_bytes` per launch gives its rate.
    pub fn of(block: &Block, useful_bytes: u64) -> BenchBlock {
        let round = block.round;
        match &block.outcome {
            Outcome::Rejected {
                before,
                known_broken,
            } => BenchBlock {
                round,
                correct: false,
                rejected: Some(Rejection {
                    check: before.describe(),
                    known_broken: *known_broken,
                }),
                check: None,
                integrity: None,
                withheld: None,
                timing: None,
            },
            Outcome::Measured(m) => {
                let withheld = m.gate_failure();
                let s = m.summary();
                BenchBlock {
                    round,
                    correct: withheld.is_none(),
                    rejected: None,
                    check: Some(check_line(m)),
                    integrity: Some(integrity_line(m)),
                    timing: withheld.is_none().then(|| BlockTiming {
                        p10_us: s.as_ref().map(|s| s.p10),
                        median_us: s.as_ref().map(|s| s.median),
                        p90_us: s.as_ref().map(|s| s.p90),
                        useful_gb_s: s.as_ref().map(|s| gb_per_s(useful_bytes, s.median)),
                        slots: m.slots,
                        warmup_launches: m.warmup_launches,
                        flags: m.state.flags.clone(),
                    }),
                    withheld,
                }
            }
        }
    }

    /// The block's lines, each `round R: ...`.
    fn render(&self, out: &mut String) {
        let r = self.round;
        if let Some(rej) = &self.rejected {
            let broken = if rej.known_broken {
                " (known-broken kernel: never timed)"
            } else {
                ""
            };
            *out += &format!("round {r}: REJECTED before timing: {}{broken}\n", rej.check);
            return;
        }
        for line in [&self.check, &self.integrity].into_iter().flatten() {
            *out += &format!("round {r}: {line}\n");
        }
        if let Some(why) = &self.withheld {
            *out += &format!("round {r}: timing withheld: {why}\n");
        }
        let Some(t) = &self.timing else { return };
        match (t.p10_us, t.median_us, t.p90_us, t.useful_gb_s) {
            (Some(p10), Some(median), Some(p90), Some(gb_s)) => {
                *out += &format!(
                    "round {r}: p10_us={p10:.3} median_us={median:.3} p90_us={p90:.3} useful_gb_s={gb_s:.1} slots={} warmup={} flags={}\n",
                    t.slots,
                    t.warmup_launches,
                    if t.flags.is_empty() { "none".to_string() } else { t.flags.join("; ") }
                );
            }
            _ => *out += &format!("round {r}: no samples\n"),
        }
    }
}

impl BenchReport {
    /// The report's head before any block: what was timed and how.
    pub fn new(kernel: String, n: u64, config: &TimingConfig, rounds: u32, folder: String) -> Self {
        BenchReport {
            kernel,
            n,
            regime: config.regime,
            timer: config.timer,
            samples: config.samples,
            warmup: config.warmup.describe(),
            rounds,
            regime_caveat: config.regime.caveat().to_string(),
            blocks: Vec::new(),
            failure: None,
            folder,
            result: None,
            receipt: None,
        }
    }

    /// The text a person reads.
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "kernel={} n={} regime={} timer={} samples={} warmup=\"{}\" rounds={}\n",
            self.kernel, self.n, self.regime, self.timer, self.samples, self.warmup, self.rounds
        );
        out += &format!("regime_caveat=\"{}\"\n", self.regime_caveat);
        for b in &self.blocks {
            b.render(&mut out);
        }
        match (&self.failure, &self.result, &self.receipt) {
            (Some(why), _, _) => {
                out += &format!(
                    "result: gate FAILED: {why}; no receipt written (raw folder: {})\n",
                    self.folder
                );
            }
            (None, Some(r), Some(path)) => {
                out += &format!(
                    "result: median_us={:.3} p10_us={:.3} p90_us={:.3} useful_gb_s={:.1} pct_of_peak={:.1} flagged_blocks={}\n",
                    r.median_us, r.p10_us, r.p90_us, r.useful_gb_s, r.pct_of_peak, r.flagged_blocks
                );
                out += &format!("receipt={path}\n");
            }
            _ => {}
        }
        out
    }
}

/// A measured block's checks: before timing, after it (the worst slot) and revalidation.
pub fn check_line(m: &Measurement) -> String {
    let worst = |v: &[CheckOutcome]| v.iter().find(|c| !c.passed()).cloned();
    let after = worst(&m.after_timing);
    format!(
        "correctness={} before: {}; after timing ({} slot(s)): {}; revalidation: {}",
        if m.correct() { "PASS" } else { "FAIL" },
        m.before.describe(),
        m.after_timing.len(),
        after.map(|c| c.describe()).unwrap_or_else(|| "PASS".into()),
        m.revalidation.describe()
    )
}

/// A measured block's integrity: the floor, the checked and probe medians, and a flag.
pub fn integrity_line(m: &Measurement) -> String {
    let us = |v: Option<f64>| {
        v.map(|x| format!("{x:.3}"))
            .unwrap_or_else(|| "none".into())
    };
    let probe = Summary::of(&m.probe_us).map(|s| s.median);
    let pair = Summary::of(&m.probe_invalidated_us).map(|s| s.median);
    format!(
        "floor_us={} checked_median_us={} probe_median_us={} probe_invalidated_median_us={} verified_samples={} slots_per_sample={}{}",
        us(m.floor.as_ref().map(|f| f.us)),
        us(m.checked_median_us()),
        us(probe),
        us(pair),
        m.verified.len(),
        m.slots_per_sample,
        m.checked_flag().map(|f| format!(" FLAG: {f}")).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> BenchReport {
        let config = TimingConfig {
            timer: Timer::PerLaunch,
            regime: Regime::BufferRotated,
            samples: 50,
            warmup: klab_engine::timing::WarmupPolicy::Count { launches: 20 },
            invalidation: klab_core::samples::Invalidation::EveryLaunch,
        };
        BenchReport::new("copy".into(), 1024, &config, 2, "out/bench".into())
    }

    #[test]
    fn the_text_says_every_block_and_the_outcome() {
        let mut r = report();
        r.blocks.push(BenchBlock {
            round: 1,
            correct: false,
            rejected: Some(Rejection {
                check: "FAIL at 3".into(),
                known_broken: true,
            }),
            check: None,
            integrity: None,
            withheld: None,
            timing: None,
        });
        r.blocks.push(BenchBlock {
            round: 2,
            correct: true,
            rejected: None,
            check: Some("correctness=PASS".into()),
            integrity: Some("floor_us=none".into()),
            withheld: None,
            timing: Some(BlockTiming {
                p10_us: Some(1.0),
                median_us: Some(2.0),
                p90_us: Some(3.0),
                useful_gb_s: Some(4.0),
                slots: 8,
                warmup_launches: 3,
                flags: vec![],
            }),
        });
        r.failure = Some("the correctness gate failed".into());
        let text = r.render_text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("kernel=copy n=1024 regime="), "{text}");
        assert_eq!(
            lines[2],
            "round 1: REJECTED before timing: FAIL at 3 (known-broken kernel: never timed)"
        );
        assert_eq!(lines[3], "round 2: correctness=PASS");
        assert_eq!(lines[4], "round 2: floor_us=none");
        assert_eq!(
            lines[5],
            "round 2: p10_us=1.000 median_us=2.000 p90_us=3.000 useful_gb_s=4.0 slots=8 warmup=3 flags=none"
        );
        assert_eq!(
            lines[6],
            "result: gate FAILED: the correctness gate failed; no receipt written (raw folder: out/bench)"
        );
        let back: BenchReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
