//! The artifact files klab writes and reads back, as types: the writer serialises them and
//! the report deserialises the same types. Fields a reader does not find default, so a
//! record written by an older klab still reads.

use serde::{Deserialize, Serialize};

use klab_core::csv::Csv;
use klab_core::stats::SpeedupAnalysis;

/// Header of `klab rounds`' `rounds.csv`.
pub const ROUNDS_BLOCKS_CSV_HEADER: &str = "round,position,variant,correct,samples,median_us,p10_us,p90_us,useful_gb_s,sm_clock_before_mhz,sm_clock_after_mhz,temperature_before_c,temperature_after_c,power_before_w,power_after_w,flags";

/// One block of `klab rounds` (one process, one kernel): a row of `rounds.csv`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RoundsBlock {
    /// 1-based round and 0-based position within it.
    pub round: u64,
    pub position: u64,
    pub variant: String,
    /// The block's outputs passed every check.
    pub correct: bool,
    /// Per-launch samples, and their median, p10 and p90, us.
    pub samples: u64,
    pub median_us: Option<f64>,
    pub p10_us: Option<f64>,
    pub p90_us: Option<f64>,
    /// Useful GB/s at the median.
    pub useful_gb_s: Option<f64>,
    /// GPU state before and after the block (NVML).
    pub sm_clock_before_mhz: Option<u64>,
    pub sm_clock_after_mhz: Option<u64>,
    pub temperature_before_c: Option<u64>,
    pub temperature_after_c: Option<u64>,
    pub power_before_w: Option<f64>,
    pub power_after_w: Option<f64>,
    /// Why the block was flagged (GPU state changed); empty when it was not.
    pub flags: String,
}

impl RoundsBlock {
    /// The row as `rounds.csv` holds it (no newline).
    pub fn csv_line(&self) -> String {
        fn o<T: ToString>(v: Option<T>) -> String {
            v.map(|x| x.to_string()).unwrap_or_default()
        }
        let f = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_default();
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"",
            self.round,
            self.position,
            self.variant,
            self.correct,
            self.samples,
            f(self.median_us, 3),
            f(self.p10_us, 3),
            f(self.p90_us, 3),
            f(self.useful_gb_s, 1),
            o(self.sm_clock_before_mhz),
            o(self.sm_clock_after_mhz),
            o(self.temperature_before_c),
            o(self.temperature_after_c),
            f(self.power_before_w, 1),
            f(self.power_after_w, 1),
            self.flags.replace('"', "'")
        )
    }
}

/// `rounds.csv`: the header, then one line per block.
pub fn rounds_csv(blocks: &[RoundsBlock]) -> String {
    let mut s = format!("{ROUNDS_BLOCKS_CSV_HEADER}\n");
    for b in blocks {
        s.push_str(&b.csv_line());
        s.push('\n');
    }
    s
}

/// The rounds' result as one table: per kernel its rate and, for a candidate, its ratio to
/// the baseline (baseline / candidate median, > 1 faster) with the interval and the verdict.
pub fn rounds_result_csv(summary: &RoundsSummary) -> String {
    let mut rows = vec![[
        "kernel",
        "blocks",
        "blocks_passed",
        "median_us",
        "median_gb_s",
        "pct_of_ceiling",
        "pct_of_peak",
        "baseline",
        "ratio",
        "ratio_low",
        "ratio_high",
        "verdict",
        "resolvable_effect",
    ]
    .map(String::from)
    .to_vec()];
    let o = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    let u = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in &summary.rates {
        let a = summary
            .analyses
            .iter()
            .find(|a| a.candidate == r.kernel)
            .map(|a| &a.analysis);
        let verdict = a.map(|a| {
            serde_json::to_value(a.verdict)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        });
        rows.push(vec![
            r.kernel.clone(),
            u(r.blocks),
            u(r.blocks_passed),
            o(r.median_us),
            o(r.median_gb_s),
            o(r.pct_of_ceiling),
            o(r.pct_of_peak),
            summary.baseline.clone(),
            o(a.map(|a| a.ratio)),
            o(a.and_then(|a| a.interval).map(|i| i.0)),
            o(a.and_then(|a| a.interval).map(|i| i.1)),
            verdict.unwrap_or_default(),
            o(a.and_then(|a| a.resolvable_effect)),
        ]);
    }
    klab_core::csv::lines(&rows)
}

/// Read `rounds.csv` by column name (the GPU-state columns may be missing or empty).
pub fn parse_rounds_csv(text: &str) -> Result<Vec<RoundsBlock>, String> {
    let c = Csv::parse(text)?;
    c.require(&["round", "position", "variant", "correct", "median_us"])?;
    c.rows()
        .map(|r| {
            let count = |name: &str| -> Result<Option<u64>, String> {
                match r.get(name) {
                    "" => Ok(None),
                    t => t
                        .parse()
                        .map(Some)
                        .map_err(|_| format!("line {}: {name} '{t}' is not a count", r.line)),
                }
            };
            Ok(RoundsBlock {
                round: r.u64("round")?,
                position: r.u64("position")?,
                variant: r.text("variant")?,
                correct: r.bool("correct")?,
                samples: r.u64("samples").unwrap_or(0),
                median_us: r.opt_f64("median_us")?,
                p10_us: r.opt_f64("p10_us")?,
                p90_us: r.opt_f64("p90_us")?,
                useful_gb_s: r.opt_f64("useful_gb_s")?,
                sm_clock_before_mhz: count("sm_clock_before_mhz")?,
                sm_clock_after_mhz: count("sm_clock_after_mhz")?,
                temperature_before_c: count("temperature_before_c")?,
                temperature_after_c: count("temperature_after_c")?,
                power_before_w: r.opt_f64("power_before_w")?,
                power_after_w: r.opt_f64("power_after_w")?,
                flags: r.get("flags").to_string(),
            })
        })
        .collect()
}

/// `lab.json`: the run's record. Fields a reader does not know are ignored, so an extended
/// record still reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabRecord {
    /// klab's version.
    #[serde(default)]
    pub klab_version: Option<String>,
    /// The command line of the run.
    #[serde(default)]
    pub command: Vec<String>,
    /// When the run started, UTC.
    #[serde(default)]
    pub started_utc: Option<String>,
    /// When the run finished, UTC.
    #[serde(default)]
    pub finished_utc: Option<String>,
    /// The device facts (read into [`DeviceFacts`] separately, so that a device record of
    /// another shape costs only the device).
    #[serde(default)]
    pub device: Option<serde_json::Value>,
    /// The steps in the order they ran.
    pub steps: Vec<LabStep>,
    /// Every artifact with its size and hash.
    #[serde(default)]
    pub artifacts: Vec<LabArtifact>,
}

/// One step of the lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabStep {
    /// Step name (`environment`, `ladder`, `profile`, ...).
    pub name: String,
    /// `ran`, `failed` (a gate failed), `error` (could not run) or `skipped`.
    pub status: String,
    /// One line: what ran, or why not.
    #[serde(default)]
    pub detail: String,
    /// Artifacts the step wrote, relative to the run folder.
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// What the step needs from the machine (`gpu`, `nvrtc`, `kernels`, `sanitizer`,
    /// `ncu`, `cublas`); a step whose needs were not met is `skipped`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
}

/// One hashed artifact listed in `lab.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabArtifact {
    /// Relative to the run folder.
    pub path: String,
    /// Size when the run recorded it.
    #[serde(default)]
    pub bytes: Option<u64>,
    /// SHA-256 when the run recorded it, lowercase hex.
    #[serde(default)]
    pub sha256: Option<String>,
}

impl LabRecord {
    /// The step called `name`, if the lab recorded one.
    pub fn step(&self, name: &str) -> Option<&LabStep> {
        self.steps.iter().find(|s| s.name == name)
    }
}

/// `rounds/summary.json`: the engine's round-level ratios against a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundsSummary {
    /// The variant every candidate is compared with.
    pub baseline: String,
    /// Problem size.
    #[serde(default)]
    pub n: Option<u64>,
    /// Rounds.
    #[serde(default)]
    pub rounds: Option<u64>,
    /// Blocks (processes) in all.
    #[serde(default)]
    pub blocks: Option<u64>,
    /// Order of the blocks within a round (the first round's, under alternating rounds).
    #[serde(default)]
    pub order: Vec<String>,
    /// Which blocks made a round (summaries without it: mirrored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_order: Option<klab_core::samples::RoundOrder>,
    /// What one process ran: a round's blocks, or one block (summaries without it ran one
    /// block per process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<klab_core::samples::Isolation>,
    /// Timer, regime, samples and warmup, as written.
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    /// One analysis per candidate.
    #[serde(default)]
    pub analyses: Vec<RoundsAnalysis>,
    /// Per kernel: median rate, % of the fastest copy in the same rounds, % of peak.
    #[serde(default)]
    pub rates: Vec<RateRow>,
    /// The fastest copy kernel in these rounds, the denominator of `pct_of_ceiling`.
    #[serde(default)]
    pub ceiling: Option<CeilingRate>,
    /// 2 x memory clock x bus width of the device, GB/s.
    #[serde(default)]
    pub theoretical_peak_gb_s: Option<f64>,
    /// Where the blocks' time went: every block's wall seconds, and the phases of those
    /// that wrote a receipt.
    #[serde(default)]
    pub time: Option<RoundsTime>,
    /// With `--resolve`: the half-width asked for, the one reached and why the rounds stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<klab_core::stats::resolve::Resolution>,
    /// Blocks run again because NVML saw the power or thermal cap hold the GPU down during
    /// them, each with what was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reruns: Vec<Rerun>,
}

/// A block held down by power or heat, and its one re-run at the same place in the round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rerun {
    pub round: u32,
    pub position: u32,
    pub kernel: String,
    /// What held the first run down.
    pub why: String,
    /// Both runs' folders under `blocks/` (each kept on disk; only the run that counts is
    /// in `rounds.csv` and the receipts).
    pub first: String,
    pub rerun: String,
    /// Which run the ratios and receipts take.
    pub kept: RerunKept,
}

/// Which run of a capped block counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RerunKept {
    /// The re-run ran clear: the cap was a passing state of the GPU.
    Rerun,
    /// The re-run was capped too: that is the kernel's own draw, and it counts against it
    /// (the first run is kept, at its place in the alternation).
    FirstCappedAgain,
    /// The re-run failed a gate or could not run: that outcome is kept, so a failure is
    /// never hidden behind a capped pass.
    RerunFailed,
    /// The re-run passed but NVML gave no state for it, so it cannot be shown clear: the
    /// first run is kept.
    FirstRerunUnobserved,
}

impl Rerun {
    /// One line for the summary.
    pub fn describe(&self) -> String {
        let what = match self.kept {
            RerunKept::Rerun => "the re-run ran clear and takes its place",
            RerunKept::FirstCappedAgain => {
                "the re-run was held down too, so it is the kernel's own draw: the first run is kept and counts against it"
            }
            RerunKept::RerunFailed => "the re-run did not pass, and that is what counts",
            RerunKept::FirstRerunUnobserved => {
                "the re-run's GPU state is unknown, so the first run is kept"
            }
        };
        format!(
            "round {} position {} {} was held down ({}) and run again: {what} (runs in {} and {})",
            self.round, self.position, self.kernel, self.why, self.first, self.rerun
        )
    }
}

/// The rounds' time: the processes' wall seconds as the parent saw them, the blocks' phases
/// summed (`checker`: the distinct checkers, `; `-joined), and the rest (process start,
/// context teardown, receipts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundsTime {
    pub wall_s: f64,
    pub phases: klab_engine::timing::Phases,
    pub other_s: f64,
    /// The processes the blocks ran in (one per block, or one per round and one per block
    /// run alone); absent from summaries written before it was recorded (one per block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// The settling blocks run and not counted (one per round's process under `--isolation
    /// round`), whose phases are in `phases`; absent when none ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settling: Option<u64>,
    /// Seconds the blocks' processes worked beside other blocks' turns, which `wall_s` does
    /// not hold: started ahead, the driver, the context, the module and the first
    /// validation while the block before finished; and, once a block had closed the device,
    /// its receipt and exit on the host while the next one timed. In `phases` and `other_s`
    /// all the same. Absent when no block was started ahead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlapped_s: Option<f64>,
}

impl RoundsTime {
    /// `40.1 s over 40 blocks: setup 6.00 s, ..., other 5.33 s; a block's floor 0.28 s (...)`:
    /// the floor is what every process pays whatever it times, opening the device (setup)
    /// and starting, ending and writing its receipts (other), per process: per block when
    /// each had its own.
    pub fn describe(&self, blocks: u64) -> String {
        let processes = self.processes.unwrap_or(blocks);
        let per = |s: f64| s / processes.max(1) as f64;
        let settling = match self.settling {
            Some(n) if n > 0 => format!(" and {n} settling blocks"),
            _ => String::new(),
        };
        let (over, whose, receipts) = if processes == blocks {
            (
                format!("{blocks} blocks{settling}"),
                "a block's",
                "its receipt",
            )
        } else {
            (
                format!("{blocks} blocks{settling} in {processes} processes"),
                "a process's",
                "its blocks' receipts",
            )
        };
        let ahead = match self.overlapped_s {
            Some(s) if s > 0.0 => format!(
                "; {s:.2} s of the processes' work ran beside another block's turn (each started ahead)"
            ),
            _ => String::new(),
        };
        format!(
            "{:.1} s over {over}: {}, other (process start, receipts) {:.2} s; {whose} floor {:.2} s ({:.2} s opening the device, {:.2} s starting, ending and writing {receipts}){ahead}",
            self.wall_s,
            self.phases.describe(),
            self.other_s,
            per(self.phases.setup_s + self.other_s),
            per(self.phases.setup_s),
            per(self.other_s),
        )
    }
}

/// The ceiling of a `klab rounds` summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CeilingRate {
    pub kernel: String,
    pub gb_s: f64,
}

/// One kernel's rate in a `klab rounds` summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateRow {
    /// Kernel name.
    pub kernel: String,
    /// Blocks run.
    #[serde(default)]
    pub blocks: Option<u64>,
    /// Blocks that passed their validations.
    #[serde(default)]
    pub blocks_passed: Option<u64>,
    /// Median microseconds per launch over every sample of the kernel's blocks.
    #[serde(default)]
    pub median_us: Option<f64>,
    /// Median effective GB/s over every sample of the kernel's blocks.
    #[serde(default)]
    pub median_gb_s: Option<f64>,
    /// Against the fastest copy kernel of the same rounds.
    #[serde(default)]
    pub pct_of_ceiling: Option<f64>,
    /// Against 2 x memory clock x bus width.
    #[serde(default)]
    pub pct_of_peak: Option<f64>,
    /// The manifest's prediction for this kernel, written before measuring.
    #[serde(default)]
    pub prediction: Option<String>,
}

impl RateRow {
    /// Faster than the ceiling (the fastest copy of the same rounds): its share, as printed
    /// to a tenth of a percent, is over 100.0%. The ceiling's own share is 100% only up to
    /// rounding (100 x g / g can come out a hair above 100), and a kernel printed at 100.0%
    /// must not be called faster than it.
    pub fn above_ceiling(&self) -> bool {
        self.pct_of_ceiling
            .is_some_and(|pct| (pct * 10.0).round() > 1000.0)
    }
}

/// One candidate against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundsAnalysis {
    /// The variant compared.
    pub candidate: String,
    /// The variant it is compared with.
    pub baseline: String,
    /// Round-level ratio, interval and verdict.
    pub analysis: SpeedupAnalysis,
    /// The same in SM cycles (each block's samples times its SM clock), where every block's
    /// clock is known: a ratio a clock change made shows here as no effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_cycles: Option<SpeedupAnalysis>,
}

/// What `klab lab` runs: which kernels, sizes and tools each step uses. The lab writes it to
/// `plan.json` in the run folder before any step; `klab lab --plan FILE` reads one (every
/// field required, unknown fields refused).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabPlan {
    /// Boundary ladder: `klab transpose all N 1` at each size.
    pub ladder: Vec<u64>,
    /// The benchmark's matrix edge and timed launches per batch.
    pub bench_n: u64,
    pub bench_reps: u32,
    /// The kernels of the rounds step at `bench_n` (in order, then reversed, within each
    /// round) and of the receipts step; rates are shares of the fastest copy among them.
    pub round_variants: Vec<String>,
    /// The rounds step's baseline (one of `round_variants`).
    pub rounds_baseline: String,
    /// Further kernels the receipts step benches at their own default size.
    pub receipt_kernels: Vec<String>,
    /// Kernels the sanitizer step must find clean, and known-broken ones it must catch.
    pub sanitize_accepted: Vec<String>,
    pub sanitize_broken: Vec<String>,
    /// Compute Sanitizer tools, comma-separated.
    pub sanitize_tools: String,
    /// Kernels profiled under Nsight Compute (at `bench_n`).
    pub profile_kernels: Vec<String>,
    /// The ceilings step: kernels alternating in one `klab rounds`, its baseline and size.
    pub ceiling_kernels: Vec<String>,
    pub ceiling_baseline: String,
    pub ceiling_n: u64,
}

impl Default for LabPlan {
    fn default() -> LabPlan {
        let lab = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        LabPlan {
            // Tiles that are not full, and a block-exact contrast.
            ladder: vec![1, 7, 31, 32, 33, 65, 257],
            bench_n: 4096,
            bench_reps: 100,
            round_variants: lab(&["copy", "naive", "tiled", "padded"]),
            rounds_baseline: "naive".into(),
            // The roofline's one kernel that does arithmetic (2 FLOPs per 12 useful bytes).
            receipt_kernels: lab(&["triad_f32"]),
            sanitize_accepted: lab(&["copy", "naive", "tiled", "padded"]),
            sanitize_broken: lab(&["broken"]),
            sanitize_tools: "memcheck,racecheck,synccheck".into(),
            profile_kernels: lab(&["copy", "naive", "tiled", "padded"]),
            // Both copies, cuBLAS sgeam, the lab's padded and klab's best transpose on the
            // H200 (lean_64_cm: faster than sgeam at all five sizes of
            // evidence/2026-11-30-fast4/final).
            ceiling_kernels: lab(&["sgeam", "memcpy", "copy_vec16", "padded", "lean_64_cm"]),
            ceiling_baseline: "sgeam".into(),
            ceiling_n: 8192,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_record_round_trips_and_an_old_one_still_reads() {
        let r = LabRecord {
            klab_version: Some("0.1.0".into()),
            command: vec!["klab".into(), "lab".into()],
            started_utc: Some("2026-12-01T00:00:00Z".into()),
            finished_utc: None,
            device: None,
            steps: vec![LabStep {
                name: "model".into(),
                status: "ran".into(),
                detail: "ok".into(),
                artifacts: vec!["model.txt".into()],
                needs: vec!["gpu".into()],
            }],
            artifacts: vec![LabArtifact {
                path: "model.txt".into(),
                bytes: Some(3),
                sha256: Some("ab".into()),
            }],
        };
        let back: LabRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.step("model").unwrap().status, "ran");
        let old: LabRecord =
            serde_json::from_str(r#"{"steps": [{"name": "a", "status": "ran"}]}"#).unwrap();
        assert!(old.artifacts.is_empty() && old.steps[0].detail.is_empty());
    }

    #[test]
    fn the_default_plan_round_trips_and_a_stray_field_is_refused() {
        let p = LabPlan::default();
        let text = serde_json::to_string_pretty(&p).unwrap();
        assert_eq!(serde_json::from_str::<LabPlan>(&text).unwrap(), p);
        let stray = text.replacen('{', "{\"ladders\": [1],", 1);
        assert!(serde_json::from_str::<LabPlan>(&stray).is_err());
    }

    #[test]
    fn rounds_csv_rows_round_trip() {
        let b = RoundsBlock {
            round: 2,
            position: 3,
            variant: "lean_64_cm".into(),
            correct: true,
            samples: 100,
            median_us: Some(130.25),
            p10_us: Some(129.5),
            p90_us: Some(131.0),
            useful_gb_s: Some(4100.5),
            sm_clock_before_mhz: Some(1980),
            sm_clock_after_mhz: Some(1980),
            temperature_before_c: Some(40),
            temperature_after_c: Some(44),
            power_before_w: Some(300.5),
            power_after_w: Some(410.0),
            flags: "power capping".into(),
        };
        let failed = RoundsBlock {
            round: 1,
            variant: "spin".into(),
            ..RoundsBlock::default()
        };
        let text = rounds_csv(&[b.clone(), failed.clone()]);
        assert_eq!(parse_rounds_csv(&text).unwrap(), vec![b, failed]);
        assert!(parse_rounds_csv("round,position\n1,2\n").is_err());
    }

    #[test]
    fn a_rounds_summary_round_trips() {
        let s = RoundsSummary {
            baseline: "sgeam".into(),
            n: Some(8192),
            rounds: Some(5),
            blocks: Some(20),
            order: vec!["sgeam".into(), "x".into(), "x".into(), "sgeam".into()],
            isolation: Some(klab_core::samples::Isolation::Round),
            round_order: Some(klab_core::samples::RoundOrder::Alternating),
            config: None,
            analyses: Vec::new(),
            rates: vec![RateRow {
                kernel: "x".into(),
                blocks: Some(10),
                blocks_passed: Some(10),
                median_us: Some(130.0),
                median_gb_s: Some(4000.0),
                pct_of_ceiling: None,
                pct_of_peak: Some(83.0),
                prediction: None,
            }],
            ceiling: Some(CeilingRate {
                kernel: "copy_vec16".into(),
                gb_s: 4100.0,
            }),
            theoretical_peak_gb_s: Some(4814.3),
            time: Some(RoundsTime {
                wall_s: 12.5,
                phases: klab_engine::timing::Phases {
                    setup_s: 3.0,
                    compile_s: 0.5,
                    inputs_s: 0.25,
                    validations_s: 1.0,
                    timed_s: 2.0,
                    checker: "device checker".into(),
                },
                other_s: 5.75,
                processes: None,
                overlapped_s: None,
                settling: None,
            }),
            resolution: Some(klab_core::stats::resolve::Resolution {
                target: 0.01,
                half_width: Some(0.008),
                reached: true,
                stopped: klab_core::stats::resolve::Stop::Resolved,
                rounds: 9,
                elapsed_s: 21.5,
                budget_s: 300.0,
            }),
            reruns: vec![Rerun {
                round: 3,
                position: 1,
                kernel: "x".into(),
                why: "held by the power cap for 2.000 ms during the block".into(),
                first: "blocks/r03-p1-x".into(),
                rerun: "blocks/r03-p1-x-rerun".into(),
                kept: RerunKept::Rerun,
            }],
        };
        let back: RoundsSummary =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert_eq!(
            s.time.clone().unwrap().describe(20),
            "12.5 s over 20 blocks: setup 3.00 s, compile 0.50 s, inputs 0.25 s, validations 1.00 s, timed 2.00 s, other (process start, receipts) 5.75 s; a block's floor 0.44 s (0.15 s opening the device, 0.29 s starting, ending and writing its receipt)"
        );
        let mut shared = s.time.clone().unwrap();
        shared.processes = Some(5);
        assert_eq!(
            shared.describe(20),
            "12.5 s over 20 blocks in 5 processes: setup 3.00 s, compile 0.50 s, inputs 0.25 s, validations 1.00 s, timed 2.00 s, other (process start, receipts) 5.75 s; a process's floor 1.75 s (0.60 s opening the device, 1.15 s starting, ending and writing its blocks' receipts)"
        );
        shared.settling = Some(5);
        assert!(shared
            .describe(20)
            .starts_with("12.5 s over 20 blocks and 5 settling blocks in 5 processes: "));
        // A summary written before the time breakdown still reads.
        let old: RoundsSummary = serde_json::from_str(r#"{"baseline": "naive"}"#).unwrap();
        assert_eq!(old.time, None);
    }
}
