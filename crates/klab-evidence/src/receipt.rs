//! The reproducible receipt (gate 5), schema `klab-receipt/1`: what ran, where, what
//! passed, and which files support the claim, each artifact bound to its bytes by SHA-256.
//!
//! Seed 003's receipt is the floor. Reading is strict: every struct refuses unknown fields
//! (a misspelt field is an error, not a silently missing value), serde refuses loosely typed
//! values (`"n": true`, `"n": "5"`), and [`Receipt::validate`] refuses what serde lets through:
//! empty labels, hashes that are not SHA-256, a slot count the cache regime cannot have, too
//! few samples or rounds, non-finite results, and paths that leave the receipt's folder.
//! Paths inside a receipt are relative to the folder that holds it.
//!
//! A receipt cannot contradict itself. [`Receipt::validate`] checks every field's domain
//! (RFC 3339 timestamps after 2000 and not ahead of this machine's clock by more than
//! [`MAX_CLOCK_AHEAD_S`], GPU state observed before the receipt was written, a `major.minor`
//! compute capability, a launch inside CUDA's limits and, for a built-in operation, a grid and
//! useful work that follow from `n`) and recomputes every figure the receipt alone
//! determines: useful GB/s and % of peak from the median, each block's GPU-state flags from
//! its observations, the flagged-block count, the % of ceiling. What needs the hashed files
//! is recomputed once `compare` has read them: [`Receipt::check_figures`] (median, p10, p90
//! from the raw samples) and [`Receipt::check_blocks`] (a combined receipt against the block
//! receipts it lists: failures, samples, GPU state, workload). A disagreement names the
//! field, the stated value and the recomputed one.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use klab_core::artifact::{format_utc, now_utc_secs, parse_utc, read_regular, write_atomic};
use klab_core::artifact::{FileError, Input};
use klab_core::device::DeviceLimits;
use klab_core::device::Dim3;
use klab_core::floor::Floor;
use klab_core::gpustate::{self, BlockState};
use klab_core::samples::{Invalidation, Regime, Timer, SAMPLES_CSV_HALF_UNIT_US};
use klab_core::stats::{gb_per_s, Summary, QUANTILE_RULE};
use klab_spec::declared::builtin::builtin_work;
use klab_spec::declared::builtin::OpKind;
use klab_spec::plan::{self, LaunchPlan};

/// The schema string every receipt carries.
pub const RECEIPT_SCHEMA: &str = "klab-receipt/1";

/// The earliest timestamp a receipt may carry, seconds since the Unix epoch
/// (2000-01-01T00:00:00Z): an earlier one is a clock that was never set.
pub const EARLIEST_UTC_SECS: i64 = 946_684_800;

/// How far ahead of this machine's clock a timestamp may be: two machines' clocks disagree,
/// but not by a day.
pub const MAX_CLOCK_AHEAD_S: i64 = 86_400;

/// How much a GPU state observation may postdate the receipt that records it: one clock
/// wrote both, so only a step of that clock (NTP) between them explains any.
const CLOCK_STEP_S: i64 = 60;

/// Relative tolerance for a figure recomputed from other stated figures: the writer did the
/// same arithmetic on the same values, and serde_json round-trips every f64, so only the
/// order of operations can move the last bits.
const DERIVED_RTOL: f64 = 1e-9;

/// Relative room on a gate's threshold when a reader checks it again from stated medians
/// (printed samples round to half a nanosecond).
const GATE_SLACK: f64 = 1e-6;

/// The role of a block receipt among a combined receipt's artifacts (`klab rounds`).
pub const BLOCK_RECEIPT_ROLE: &str = "block-receipt";

/// One receipt: a claim and everything needed to inspect and rerun it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// Always [`RECEIPT_SCHEMA`].
    pub schema: String,
    /// The claim another engineer could disprove, in one sentence.
    pub claim: String,
    /// The command line that produced the receipt.
    pub command: Vec<String>,
    /// When the receipt was written, `YYYY-MM-DDTHH:MM:SSZ`.
    pub created_utc: String,
    pub klab_version: String,
    /// The kernel measured.
    pub source: Source,
    /// The kernel it is claimed against, when the receipt states one.
    pub baseline_source: Option<Source>,
    pub hardware: Hardware,
    pub workload: Workload,
    pub correctness: Correctness,
    pub measurement: Measurement,
    /// Every file the receipt relies on, hashed.
    pub artifacts: Vec<Artifact>,
    pub result: ResultSummary,
    /// What kept the timed launches honest. Absent in receipts written before klab
    /// invalidated outputs before every timed launch; `klab compare` refuses those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<Integrity>,
}

/// How the timed launches were kept from reusing earlier results, and the times that
/// vouch for them ([`klab_engine::timing`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Integrity {
    pub invalidation: Invalidation,
    /// The invalidation policy in words.
    pub policy: String,
    /// Slots one sample launches on (one per launch of its interval).
    pub slots_per_sample: u64,
    /// Timed samples verified right after their intervals, over all blocks.
    pub verified_samples: u64,
    /// The physical floor of one launch (absent when the backend had no rates).
    pub floor: Option<Floor>,
    /// Median per-launch time of the launches klab verified, over all blocks.
    pub checked_median_us: Option<f64>,
    pub checked_launches: u64,
    /// Median per-launch time of the stale-output probes, over all blocks.
    pub probe_median_us: Option<f64>,
    /// Median of their pairs: the same launches on invalidated outputs.
    pub probe_invalidated_median_us: Option<f64>,
    pub probes: u64,
    /// Flags (a timed median far below the checked one), one line each.
    pub flags: Vec<String>,
}

impl Integrity {
    /// What a receipt without this section lacks, for the refusal.
    pub const LACKING: &'static str = "the invalidation policy, the physical floor and the checked median (it was written before klab overwrote outputs before every timed launch); measure it again";

    /// A combined receipt's section from its blocks' (`klab rounds`): their counts summed,
    /// their flags in order, and for each median the median of the blocks' medians (the
    /// launches themselves are in the blocks' receipts). The policy is the first block's
    /// (`check_blocks` refuses blocks that disagree on it); the floor is the lowest of the
    /// blocks' (each block's process measures the L2 ceiling anew), which the combined
    /// median clears whenever every block's median cleared its own. `None` when a block has
    /// no section.
    pub fn combined(blocks: &[&Integrity]) -> Option<Integrity> {
        let mut first = (*blocks.first()?).clone();
        first.floor = blocks
            .iter()
            .filter_map(|b| b.floor.clone())
            .min_by(|a, b| a.us.total_cmp(&b.us));
        let median = |f: fn(&Integrity) -> Option<f64>| {
            let v: Vec<f64> = blocks.iter().filter_map(|b| f(b)).collect();
            klab_core::stats::Summary::of(&v).map(|s| s.median)
        };
        Some(Integrity {
            verified_samples: blocks.iter().map(|b| b.verified_samples).sum(),
            checked_median_us: median(|b| b.checked_median_us),
            checked_launches: blocks.iter().map(|b| b.checked_launches).sum(),
            probe_median_us: median(|b| b.probe_median_us),
            probe_invalidated_median_us: median(|b| b.probe_invalidated_median_us),
            probes: blocks.iter().map(|b| b.probes).sum(),
            flags: blocks.iter().flat_map(|b| b.flags.clone()).collect(),
            ..first
        })
    }

    /// Refuse what the section cannot hold: an empty policy, no slots, negative medians,
    /// counts that contradict the medians they count, and a floor that is not the floor of
    /// this receipt's work on this receipt's device ([`Integrity::check_floor`]) or that
    /// the median breaches.
    fn validate(&self, r: &Receipt) -> Result<(), ReceiptError> {
        label("integrity.policy", &self.policy)?;
        if self.slots_per_sample == 0 {
            return Err(ReceiptError::invalid("integrity.slots_per_sample", "is 0"));
        }
        // What is verified is timed samples drawn at random (each at most once; there are
        // samples_per_round in each block's file) and the probes' launches on invalidated
        // outputs, one per probe.
        let m = &r.measurement;
        let samples = (m.raw_samples.len() as u64).saturating_mul(m.samples_per_round);
        if self.verified_samples > samples.saturating_add(self.probes) {
            return Err(ReceiptError::invalid(
                "integrity.verified_samples",
                format!(
                    "is {}, more than the receipt's {samples} timed samples ({} block file(s) of {}) and {} probes",
                    self.verified_samples,
                    m.raw_samples.len(),
                    m.samples_per_round,
                    self.probes
                ),
            ));
        }
        if let Some(f) = &self.floor {
            Integrity::check_floor(f, r)?;
            if f.breached_by(r.result.median_us) {
                return Err(ReceiptError::invalid(
                    "result.median_us",
                    f.breach_line(r.result.median_us),
                ));
            }
        }
        for (name, median, count) in [
            (
                "checked_median_us",
                self.checked_median_us,
                ("checked_launches", self.checked_launches),
            ),
            (
                "probe_median_us",
                self.probe_median_us,
                ("probes", self.probes),
            ),
            (
                "probe_invalidated_median_us",
                self.probe_invalidated_median_us,
                ("probes", self.probes),
            ),
        ] {
            if let Some(v) = median {
                positive(&format!("integrity.{name}"), v)?;
            }
            // A median of no launches, or launches without their median, is not a record
            // of what ran.
            let (count_name, n) = count;
            if median.is_some() != (n > 0) {
                return Err(ReceiptError::invalid(
                    format!("integrity.{name}"),
                    format!(
                        "is {}, but integrity.{count_name} is {n}",
                        median.map_or("absent".to_string(), |v| v.to_string())
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A stated floor is the floor of the receipt's declared work (`workload`'s useful bytes
    /// and FLOPs) at rates that are the receipt's device's (its HBM peak and L2 size), and
    /// its times are what [`Floor::of`] makes of them: a floor edited down, or taken from
    /// another workload, would let an impossible median through.
    fn check_floor(f: &Floor, r: &Receipt) -> Result<(), ReceiptError> {
        let w = &r.workload;
        for (field, stated, want, from) in [
            (
                "integrity.floor.useful_bytes",
                f.useful_bytes,
                w.useful_bytes_per_launch,
                "workload.useful_bytes_per_launch",
            ),
            (
                "integrity.floor.flops",
                f.flops,
                w.flops_per_launch,
                "workload.flops_per_launch",
            ),
            (
                "integrity.floor.rates.l2_bytes",
                f.rates.l2_bytes,
                r.hardware.l2_bytes,
                "hardware.l2_bytes",
            ),
        ] {
            if stated != want {
                return Err(ReceiptError::invalid(
                    field,
                    format!("is {stated}, but {from} is {want}"),
                ));
            }
        }
        agree(
            "integrity.floor.rates.hbm_gb_s",
            f.rates.hbm_gb_s,
            r.hardware.theoretical_peak_gb_s,
            "hardware.theoretical_peak_gb_s",
        )?;
        positive(
            "integrity.floor.rates.l2_measured_gb_s",
            f.rates.l2_measured_gb_s,
        )?;
        if let Some(ops) = f.rates.peak_ops_per_s {
            positive("integrity.floor.rates.peak_ops_per_s", ops)?;
        }
        let want = Floor::of(f.useful_bytes, f.flops, &f.rates);
        let from = "its bytes, FLOPs and rates";
        agree("integrity.floor.us", f.us, want.us, from)?;
        agree(
            "integrity.floor.memory_us",
            f.memory_us,
            want.memory_us,
            from,
        )?;
        agree(
            "integrity.floor.compute_us",
            f.compute_us,
            want.compute_us,
            from,
        )
    }

    /// The gates one block's own figures must pass, checked again from the figures it
    /// states (`median_us`: the block's timed median): the stale-output probes
    /// ([`klab_engine::timing::Measurement::gate_failure`]) and the flag a timed median far
    /// below the checked one must carry ([`klab_engine::timing::Measurement::checked_flag`]).
    /// Only a receipt of one block can be held to them: a receipt of several pools its
    /// blocks' launches into one median, which the blocks' own gates did not judge (its
    /// block receipts, where it lists them, are each held to them).
    fn check_block_gates(&self, median_us: f64) -> Result<(), ReceiptError> {
        use klab_engine::timing::{
            stale_outputs_faster, timed_far_below_checked, CHECKED_FLAG_WORDS,
        };
        if let (Some(stale), Some(invalidated)) =
            (self.probe_median_us, self.probe_invalidated_median_us)
        {
            // GATE_SLACK: a figure on the gate's edge is the engine's to judge, not a reader's
            // that sees it through a rounded median.
            if stale_outputs_faster(stale, invalidated, GATE_SLACK) {
                return Err(ReceiptError::invalid(
                    "integrity.probe_median_us",
                    format!(
                        "is {stale} us against {invalidated} us on invalidated outputs: a block whose launches ran {:.1}x faster with their previous output in place failed its gate, so it has no receipt",
                        invalidated / stale
                    ),
                ));
            }
        }
        if let Some(checked) = self.checked_median_us {
            let flagged = self.flags.iter().any(|f| f.contains(CHECKED_FLAG_WORDS));
            if timed_far_below_checked(median_us, checked, GATE_SLACK) && !flagged {
                return Err(ReceiptError::invalid(
                    "integrity.flags",
                    format!(
                        "hold no checked-median flag, but the timed median {median_us} us is {:.1}x below the checked median {checked} us, which klab flags",
                        checked / median_us
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Source identity of one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub repository: Option<String>,
    pub commit: Option<String>,
    /// The kernel's source file, as named when it was compiled.
    pub file: String,
    pub file_sha256: String,
    /// The kernel's entry point.
    pub entry: String,
    /// The kernel's name as the user gave it (a manifest's `[[kernel]]` name, or a built-in
    /// one), which `klab compare` prints: an entry point can be another kernel's too (a
    /// Triton cubin's `softmax` beside a CUDA `softmax`). Absent in an earlier klab's receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// SHA-256 of the compiled module (PTX or cubin) or binary that ran.
    pub binary_sha256: String,
    /// Compiler and version, e.g. `nvrtc 13.0`.
    pub compiler: String,
    pub flags: Vec<String>,
    /// What generated a precompiled module (Triton, with its source file hashed and its
    /// settings), as the manifest stated it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_by: Option<klab_spec::manifest::GeneratedBy>,
}

/// The device and its policy while the samples were taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    pub gpu_uuid: String,
    pub gpu_name: String,
    /// `major.minor`.
    pub compute_capability: String,
    pub driver: String,
    pub cuda_runtime: Option<String>,
    pub nvrtc: Option<String>,
    pub power_limit_w: Option<f64>,
    /// `observed` or `locked`.
    pub clock_policy: String,
    /// Exclusive host, MIG slice, or the competing-work policy.
    pub isolation: String,
    pub l2_bytes: u64,
    /// 2 x memory clock x bus width.
    pub theoretical_peak_gb_s: f64,
}

/// What was computed, on what shape, under which cache regime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// What runs and at which shape, e.g. `transpose: out (f32) at n=4096` or
    /// `declared: C (f32) at K=1024 M=2048 N=2048`.
    pub operation: String,
    pub dtype: String,
    /// The operation's one size variable; for an operation with several, the element
    /// count of its first compared output (the shape is in `operation`).
    pub n: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u32,
    pub cache_regime: Regime,
    /// Buffer sets the samples cycle through (1 unless buffer-rotated).
    pub rotation_slots: u64,
    pub useful_bytes_per_launch: u64,
    pub flops_per_launch: u64,
    /// Every launch of a kernel that is a sequence of several, in order (the first is also
    /// `grid`, `block` and `dynamic_shared_bytes`); empty for a kernel of one launch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sequence: Vec<LaunchRecord>,
}

/// One launch of a sequence, as a receipt records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchRecord {
    pub entry: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u32,
}

impl LaunchRecord {
    fn plan(&self) -> LaunchPlan {
        let d = |v: [u32; 3]| Dim3::new(v[0], v[1], v[2]);
        LaunchPlan {
            grid: d(self.grid),
            block: d(self.block),
            dynamic_shared_bytes: self.dynamic_shared_bytes,
        }
    }
}

impl Workload {
    /// The shape as `operation` states it (`n=4096`, `K=1024 M=2048 N=2048`); `n = N` for
    /// a receipt whose operation does not say.
    pub fn shape(&self) -> String {
        match self.operation.rsplit_once(" at ") {
            Some((_, shape)) if !shape.is_empty() => shape.to_string(),
            _ => format!("n = {}", self.n),
        }
    }
}

/// Gates 1 and 2: the reference check and the sanitizer runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Correctness {
    /// The independent oracle, e.g. `CPU double FMA, one cast to float`.
    pub reference: String,
    /// The comparison rule, e.g. `bitwise` or `|y - r| <= atol + rtol |r|`.
    pub rule: String,
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    /// Elements that failed the rule (0 for a passing kernel).
    pub failures: u64,
    /// Whether the outputs were validated again after timing.
    pub checked_after_timing: bool,
    /// Rotation slots whose final output was validated after timing.
    pub slots_checked: u64,
    pub sanitizer: Vec<SanitizerRun>,
}

/// One Compute Sanitizer run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SanitizerRun {
    /// memcheck, racecheck, synccheck or initcheck.
    pub tool: String,
    /// The process's exit status; `None` when it was killed by a signal.
    pub exit_status: Option<i32>,
    pub errors: u64,
    /// The report, an artifact path relative to the receipt's folder.
    pub report: String,
}

/// Gate 3: how the samples were taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    pub timer: Timer,
    pub warmup: Warmup,
    pub samples_per_round: u64,
    pub rounds: u64,
    /// How baseline and candidate were ordered across rounds, e.g. `ABBA within each round`.
    pub order: String,
    /// One raw sample file per round.
    pub raw_samples: Vec<RawSamples>,
    /// The quantile rule, e.g. [`klab_core::stats::QUANTILE_RULE`].
    pub quantiles: String,
    pub profiler_attached: bool,
    /// Bytes of the scrub between samples (l2-flushed).
    pub l2_scrub_bytes: Option<u64>,
    /// GPU state before and after each timed block.
    pub gpu_state: Vec<BlockState>,
    /// Where each block's time went (absent in receipts written before it was kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<klab_engine::timing::Phases>,
}

/// The warmup before timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Warmup {
    /// The rule, e.g. `20 launches and every slot twice`.
    pub policy: String,
    pub launches: u64,
}

/// One round's raw sample file (`sample,slot,elapsed_us`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSamples {
    pub round: u64,
    /// 0-based position of this kernel's block within the round.
    pub position: u64,
    pub path: String,
    pub sha256: String,
}

/// A file the receipt relies on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
    /// What the file is, e.g. `raw-samples`, `sanitizer-report`, `gpu-state`.
    pub role: String,
}

/// The distribution the receipt reports (microseconds per launch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultSummary {
    pub median_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    pub useful_gb_s: f64,
    pub pct_of_peak: f64,
    pub flagged_blocks: u64,
    /// Where the kernel stood in the `klab rounds` run that combined this receipt (absent
    /// from single-block receipts and from receipts written before klab recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<RoundsContext>,
}

/// A combined receipt's place in its rounds: its share of the fastest copy kernel timed in
/// the same rounds (the ceiling) and its round-level ratio against the rounds' baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundsContext {
    /// Every kernel of the rounds, in the order of the first round.
    pub kernels: Vec<String>,
    /// The fastest copy kernel of the rounds and its median effective GB/s.
    pub ceiling_kernel: Option<String>,
    pub ceiling_gb_s: Option<f64>,
    pub pct_of_ceiling: Option<f64>,
    pub baseline: String,
    /// Median of the per-round ratios baseline median / this kernel's median (above 1: this
    /// kernel is faster); absent for the baseline itself or when a block failed its gate.
    pub ratio_to_baseline: Option<f64>,
    /// Its 95% interval over rounds, when there were enough rounds for one (an
    /// order-statistic interval; a percentile bootstrap in receipts of an earlier klab).
    pub ratio_interval: Option<[f64; 2]>,
}

/// Why a receipt cannot be read, written or trusted. Each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    /// Not a readable regular file, or not writable.
    #[error(transparent)]
    File(#[from] FileError),
    /// Not JSON, or JSON that does not fit the schema (serde_json's message names the
    /// field or the line and column; `context` is the text of that line).
    #[error("receipt {} does not fit {RECEIPT_SCHEMA}: {message}{}", .path.display(), context_suffix(.context))]
    Parse {
        path: PathBuf,
        message: String,
        context: Option<String>,
    },
    /// A value serde accepted but a receipt cannot hold, or a stated figure that disagrees
    /// with the figure recomputed from what it was computed from (`problem` says both).
    #[error("{}{field} {problem}", file_prefix(.file))]
    Invalid {
        file: Option<PathBuf>,
        field: String,
        problem: String,
    },
}

fn context_suffix(context: &Option<String>) -> String {
    match context {
        Some(c) => format!(" (near `{c}`)"),
        None => String::new(),
    }
}

fn file_prefix(file: &Option<PathBuf>) -> String {
    match file {
        Some(f) => format!("receipt {}: ", f.display()),
        None => "receipt: ".to_string(),
    }
}

impl ReceiptError {
    fn invalid(field: impl Into<String>, problem: impl fmt::Display) -> ReceiptError {
        ReceiptError::Invalid {
            file: None,
            field: field.into(),
            problem: problem.to_string(),
        }
    }

    /// The same error, naming the receipt file it came from.
    pub fn in_file(self, path: &Path) -> ReceiptError {
        match self {
            ReceiptError::Invalid {
                file: None,
                field,
                problem,
            } => ReceiptError::Invalid {
                file: Some(path.to_path_buf()),
                field,
                problem,
            },
            other => other,
        }
    }
}

impl Receipt {
    /// Pretty-printed JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Plain structs, vectors and strings: serialisation cannot fail (a non-finite f64
        // becomes null, which `validate` refuses before any write).
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Parse a receipt from JSON text; `path` only names the origin in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Receipt, ReceiptError> {
        serde_json::from_str(text).map_err(|e| {
            let line = e.line();
            let context = (line > 0)
                .then(|| text.lines().nth(line - 1))
                .flatten()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(|l| {
                    if l.chars().count() > 80 {
                        format!("{}...", l.chars().take(77).collect::<String>())
                    } else {
                        l.to_string()
                    }
                });
            ReceiptError::Parse {
                path: path.to_path_buf(),
                message: e.to_string(),
                context,
            }
        })
    }

    /// Read and parse a receipt (no validation; see [`Receipt::load`]).
    pub fn read(path: &Path) -> Result<Receipt, ReceiptError> {
        let bytes = read_regular(path, Input::RECEIPT)?;
        let text = String::from_utf8(bytes).map_err(|_| ReceiptError::Parse {
            path: path.to_path_buf(),
            message: "not UTF-8 text".to_string(),
            context: None,
        })?;
        Receipt::from_json(&text, path)
    }

    /// Read, parse and validate; a validation error names the file.
    pub fn load(path: &Path) -> Result<Receipt, ReceiptError> {
        let r = Receipt::read(path)?;
        r.validate().map_err(|e| e.in_file(path))?;
        Ok(r)
    }

    /// Validate, then write atomically (temporary file + rename). An invalid receipt is
    /// never written.
    pub fn write(&self, path: &Path) -> Result<(), ReceiptError> {
        self.validate().map_err(|e| e.in_file(path))?;
        Ok(write_atomic(path, self.to_json().as_bytes())?)
    }

    /// Refuse what serde lets through: see the module documentation. Returns the first
    /// problem found, naming its field.
    pub fn validate(&self) -> Result<(), ReceiptError> {
        if self.schema != RECEIPT_SCHEMA {
            return Err(ReceiptError::invalid(
                "schema",
                format!("is '{}', expected '{RECEIPT_SCHEMA}'", self.schema),
            ));
        }
        label("claim", &self.claim)?;
        if self.command.is_empty() {
            return Err(ReceiptError::invalid("command", "is empty"));
        }
        label("command[0]", &self.command[0])?;
        label("created_utc", &self.created_utc)?;
        let now = now_utc_secs();
        let created = timestamp("created_utc", &self.created_utc, now)?;
        label("klab_version", &self.klab_version)?;
        self.source.validate("source")?;
        if let Some(b) = &self.baseline_source {
            b.validate("baseline_source")?;
        }
        self.hardware.validate()?;
        self.workload.validate()?;
        self.correctness.validate()?;
        self.measurement.validate()?;
        self.measurement.validate_states(created, now)?;
        self.check_scrub()?;

        let mut seen = BTreeSet::new();
        for (i, a) in self.artifacts.iter().enumerate() {
            let f = |name: &str| format!("artifacts[{i}].{name}");
            rel_path(&f("path"), &a.path)?;
            sha256(&f("sha256"), &a.sha256)?;
            label(&f("role"), &a.role)?;
            if !seen.insert(normalized(&a.path)) {
                return Err(ReceiptError::invalid(
                    f("path"),
                    format!("'{}' is listed twice", a.path),
                ));
            }
        }
        for (i, s) in self.correctness.sanitizer.iter().enumerate() {
            if !seen.contains(&normalized(&s.report)) {
                return Err(ReceiptError::invalid(
                    format!("correctness.sanitizer[{i}].report"),
                    format!(
                        "'{}' is not listed in artifacts, so it is not hashed",
                        s.report
                    ),
                ));
            }
        }
        self.result.validate()?;
        if let Some(i) = &self.integrity {
            i.validate(self)?;
        }
        self.derived_figures()
    }

    /// The scrub between samples is the l2-flushed regime's, larger than the L2 it
    /// flushes, and no other regime's.
    fn check_scrub(&self) -> Result<(), ReceiptError> {
        let regime = self.workload.cache_regime;
        let l2 = self.hardware.l2_bytes;
        match (regime, self.measurement.l2_scrub_bytes) {
            (Regime::L2Flushed, Some(b)) if b > 0 && b >= l2 => Ok(()),
            (Regime::L2Flushed, b) => Err(ReceiptError::invalid(
                "measurement.l2_scrub_bytes",
                format!(
                    "is {b:?} in the l2-flushed regime, whose scrub is larger than the L2 (hardware.l2_bytes {l2})"
                ),
            )),
            (_, None) => Ok(()),
            (_, Some(b)) => Err(ReceiptError::invalid(
                "measurement.l2_scrub_bytes",
                format!("is {b} in the {regime} regime, which has no scrub"),
            )),
        }
    }

    /// The figures the receipt alone determines, recomputed: useful GB/s and % of peak from
    /// the median, the flagged-block count, the % of ceiling from the ceiling's rate.
    fn derived_figures(&self) -> Result<(), ReceiptError> {
        let r = &self.result;
        agree(
            "result.useful_gb_s",
            r.useful_gb_s,
            gb_per_s(self.workload.useful_bytes_per_launch, r.median_us),
            "workload.useful_bytes_per_launch / result.median_us",
        )?;
        agree(
            "result.pct_of_peak",
            r.pct_of_peak,
            100.0 * r.useful_gb_s / self.hardware.theoretical_peak_gb_s,
            "100 x result.useful_gb_s / hardware.theoretical_peak_gb_s",
        )?;
        let flagged = self
            .measurement
            .gpu_state
            .iter()
            .filter(|b| !b.flags.is_empty())
            .count() as u64;
        if r.flagged_blocks != flagged {
            return Err(ReceiptError::invalid(
                "result.flagged_blocks",
                format!(
                    "is {}, but {flagged} block(s) in measurement.gpu_state carry flags",
                    r.flagged_blocks
                ),
            ));
        }
        let Some(c) = &r.rounds else {
            return Ok(());
        };
        match (c.ceiling_gb_s, c.pct_of_ceiling) {
            (Some(g), Some(p)) => agree(
                "result.rounds.pct_of_ceiling",
                p,
                100.0 * r.useful_gb_s / g,
                "100 x result.useful_gb_s / result.rounds.ceiling_gb_s",
            ),
            (Some(g), None) if g > 0.0 => Err(ReceiptError::invalid(
                "result.rounds.pct_of_ceiling",
                format!("is absent, but result.rounds.ceiling_gb_s is {g}"),
            )),
            (None, Some(p)) => Err(ReceiptError::invalid(
                "result.rounds.pct_of_ceiling",
                format!("is {p}, but there is no result.rounds.ceiling_gb_s to be a share of"),
            )),
            _ => Ok(()),
        }
    }

    /// Refuse a stated `result.rounds.ratio_to_baseline` that is not `found`, the
    /// round-level ratio recomputed from the baseline's and this receipt's samples.
    pub fn check_ratio_to_baseline(&self, stated: f64, found: f64) -> Result<(), ReceiptError> {
        agree(
            "result.rounds.ratio_to_baseline",
            stated,
            found,
            "the baseline's and these raw samples",
        )
    }

    /// Recompute median, p10 and p90 (by [`QUANTILE_RULE`]) over all samples of all raw
    /// sample files (`samples`, one entry per `measurement.raw_samples` entry, as `compare`
    /// parsed them) and refuse a stated value further from them than the sample files'
    /// printed precision explains ([`SAMPLES_CSV_HALF_UNIT_US`]).
    pub fn check_figures(&self, samples: &[Vec<f64>]) -> Result<(), ReceiptError> {
        let all: Vec<f64> = samples.iter().flatten().copied().collect();
        let s = Summary::of(&all).ok_or_else(|| {
            ReceiptError::invalid("measurement.raw_samples", "hold no finite samples")
        })?;
        let r = &self.result;
        for (field, stated, found) in [
            ("result.median_us", r.median_us, s.median),
            ("result.p10_us", r.p10_us, s.p10),
            ("result.p90_us", r.p90_us, s.p90),
        ] {
            let tol = SAMPLES_CSV_HALF_UNIT_US + DERIVED_RTOL * found.abs();
            // A NaN difference is not within tolerance either.
            let within = (stated - found).abs() <= tol;
            if !within {
                return Err(ReceiptError::invalid(
                    field,
                    format!(
                        "is {stated}, but its {} raw samples give {found} ({QUANTILE_RULE}; tolerance {tol:.1e} us)",
                        all.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Check a combined receipt against the block receipts it lists among its artifacts
    /// (`klab rounds` writes one per block, in the order it combined them): each block's own
    /// figures from its samples, the same kernel, device and workload, each block's sample
    /// files listed here with the same hash and every one of ours owned by a block, the
    /// failures summed, the GPU state concatenated, the warmup the largest. `samples` is
    /// [`Receipt::check_figures`]'s. A block's own problem names the block's file, found as
    /// `folder`/its path.
    pub fn check_blocks(
        &self,
        blocks: &[BlockReceipt],
        samples: &[Vec<f64>],
        folder: &Path,
    ) -> Result<(), ReceiptError> {
        if blocks.is_empty() {
            // A `klab rounds` receipt (result.rounds) combined separate processes' blocks and
            // is held to them; one that lists none would escape every check of them.
            if self.result.rounds.is_some() {
                return Err(ReceiptError::invalid(
                    "artifacts",
                    format!(
                        "list no block receipt, but result.rounds says klab rounds combined {} blocks into this receipt, and it lists one per block",
                        self.measurement.raw_samples.len(),
                    ),
                ));
            }
            if let (Some(i), 1) = (&self.integrity, self.measurement.raw_samples.len()) {
                i.check_block_gates(self.result.median_us)?;
            }
            return Ok(());
        }
        let ours: Vec<PathBuf> = self
            .measurement
            .raw_samples
            .iter()
            .map(|r| normalized(&r.path))
            .collect();
        let mut owned = vec![false; ours.len()];
        let mut failures = 0u64;
        let mut states = Vec::new();
        let mut warmup = 0;
        let mut per_block = Vec::new();
        for b in blocks {
            let in_block = |e: ReceiptError| e.in_file(&folder.join(&b.path));
            let r = &b.receipt;
            if let Some(a) = r.artifacts.iter().find(|a| a.role == BLOCK_RECEIPT_ROLE) {
                return Err(in_block(ReceiptError::invalid(
                    "artifacts",
                    format!(
                        "list a block receipt ({}) of their own; block receipts do not nest",
                        a.path
                    ),
                )));
            }
            let mine = self.samples_of_block(b, &ours, &mut owned, samples)?;
            r.check_figures(&mine).map_err(in_block)?;
            if let Some(i) = &r.integrity {
                i.check_block_gates(r.result.median_us).map_err(in_block)?;
            }
            self.same_as_block(b)?;
            failures = failures.saturating_add(r.correctness.failures);
            per_block.push(format!("{}: {}", b.path, r.correctness.failures));
            states.extend(r.measurement.gpu_state.iter().cloned());
            warmup = warmup.max(r.measurement.warmup.launches);
        }
        if let Some(k) = owned.iter().position(|o| !o) {
            return Err(ReceiptError::invalid(
                format!("measurement.raw_samples[{k}].path"),
                format!(
                    "'{}' belongs to none of the {} block receipts listed",
                    self.measurement.raw_samples[k].path,
                    blocks.len()
                ),
            ));
        }
        if self.correctness.failures != failures {
            let nonzero: Vec<&String> = per_block.iter().filter(|l| !l.ends_with(": 0")).collect();
            return Err(ReceiptError::invalid(
                "correctness.failures",
                format!(
                    "is {}, but its {} block receipts record {failures}{}",
                    self.correctness.failures,
                    blocks.len(),
                    if nonzero.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " ({})",
                            nonzero
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                ),
            ));
        }
        if self.measurement.gpu_state != states {
            let i = self
                .measurement
                .gpu_state
                .iter()
                .zip(&states)
                .position(|(a, b)| a != b)
                .unwrap_or(states.len().min(self.measurement.gpu_state.len()));
            return Err(ReceiptError::invalid(
                "measurement.gpu_state",
                format!(
                    "holds {} observation(s), but its block receipts hold {} (first difference at [{i}])",
                    self.measurement.gpu_state.len(),
                    states.len()
                ),
            ));
        }
        if self.measurement.warmup.launches != warmup {
            return Err(ReceiptError::invalid(
                "measurement.warmup.launches",
                format!(
                    "is {}, but the largest of its block receipts' is {warmup}",
                    self.measurement.warmup.launches
                ),
            ));
        }
        self.check_integrity_of(blocks)
    }

    /// The samples of block receipt `b`, each a file of ours (`ours`, normalised paths)
    /// with the same hash and no other block's (`owned` marks them).
    fn samples_of_block(
        &self,
        b: &BlockReceipt,
        ours: &[PathBuf],
        owned: &mut [bool],
        samples: &[Vec<f64>],
    ) -> Result<Vec<Vec<f64>>, ReceiptError> {
        let r = &b.receipt;
        let dir = Path::new(&b.path).parent().unwrap_or(Path::new(""));
        let mut mine = Vec::new();
        for raw in &r.measurement.raw_samples {
            let at = normalized(&dir.join(&raw.path).to_string_lossy());
            let Some(k) = ours.iter().position(|p| *p == at) else {
                return Err(ReceiptError::invalid(
                    "measurement.raw_samples",
                    format!(
                        "do not list {}, a sample file of block receipt {}",
                        at.display(),
                        b.path
                    ),
                ));
            };
            let stated = &self.measurement.raw_samples[k].sha256;
            if *stated != raw.sha256 {
                return Err(ReceiptError::invalid(
                    format!("measurement.raw_samples[{k}].sha256"),
                    format!(
                        "is {stated}, but block receipt {} records {} for {}",
                        b.path,
                        raw.sha256,
                        at.display()
                    ),
                ));
            }
            if owned[k] {
                return Err(ReceiptError::invalid(
                    format!("measurement.raw_samples[{k}].path"),
                    format!("{} belongs to more than one block receipt", at.display()),
                ));
            }
            owned[k] = true;
            mine.push(samples.get(k).cloned().unwrap_or_default());
        }
        Ok(mine)
    }

    /// Block receipt `b` is of the same source, workload, device and timing method.
    fn same_as_block(&self, b: &BlockReceipt) -> Result<(), ReceiptError> {
        let r = &b.receipt;
        for (field, ours, theirs) in [
            ("source", to_value(&self.source), to_value(&r.source)),
            ("workload", to_value(&self.workload), to_value(&r.workload)),
            (
                "hardware",
                device_identity(&self.hardware),
                device_identity(&r.hardware),
            ),
            (
                "measurement",
                timing_identity(&self.measurement),
                timing_identity(&r.measurement),
            ),
        ] {
            if let Some((f, a, t)) = first_difference(field, &ours, &theirs) {
                return Err(ReceiptError::invalid(
                    f,
                    format!("is {a}, but block receipt {} says {t}", b.path),
                ));
            }
        }
        Ok(())
    }

    /// A combined receipt's integrity section is [`Integrity::combined`] of its blocks',
    /// and the blocks agree on the policy.
    fn check_integrity_of(&self, blocks: &[BlockReceipt]) -> Result<(), ReceiptError> {
        let parts: Option<Vec<&Integrity>> = blocks
            .iter()
            .map(|b| b.receipt.integrity.as_ref())
            .collect();
        let Some(parts) = parts else {
            // A block without the section: compare refuses the pair and says what it lacks.
            return Ok(());
        };
        for (b, p) in blocks.iter().zip(&parts) {
            if (&p.invalidation, &p.policy, p.slots_per_sample)
                != (
                    &parts[0].invalidation,
                    &parts[0].policy,
                    parts[0].slots_per_sample,
                )
            {
                return Err(ReceiptError::invalid(
                    "integrity",
                    format!(
                        "block receipt {} has another invalidation policy than {}",
                        b.path, blocks[0].path
                    ),
                ));
            }
        }
        let want = Integrity::combined(&parts);
        if self.integrity != want {
            let (ours, theirs) = (to_value(&self.integrity), to_value(&want));
            let (f, a, t) = first_difference("integrity", &ours, &theirs).unwrap_or((
                "integrity".into(),
                ours.to_string(),
                theirs.to_string(),
            ));
            return Err(ReceiptError::invalid(
                f,
                format!("is {a}, but its block receipts give {t}"),
            ));
        }
        Ok(())
    }
}

/// A receipt listed among another's artifacts: one block of a `klab rounds` run, read and
/// validated from the bytes whose hash the combined receipt records.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockReceipt {
    /// Its path as the combined receipt lists it (relative to that receipt's folder).
    pub path: String,
    pub receipt: Receipt,
}

fn to_value(v: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

/// The facts of the device itself (a combined receipt takes power and policy from its
/// first block, so only these must agree across blocks).
fn device_identity(h: &Hardware) -> serde_json::Value {
    serde_json::json!({
        "gpu_uuid": h.gpu_uuid,
        "gpu_name": h.gpu_name,
        "compute_capability": h.compute_capability,
        "driver": h.driver,
        "l2_bytes": h.l2_bytes,
        "theoretical_peak_gb_s": h.theoretical_peak_gb_s,
    })
}

/// How each sample was taken (rounds, order and warmup are the combination's own).
fn timing_identity(m: &Measurement) -> serde_json::Value {
    serde_json::json!({
        "timer": m.timer,
        "samples_per_round": m.samples_per_round,
        "quantiles": m.quantiles,
        "profiler_attached": m.profiler_attached,
        "l2_scrub_bytes": m.l2_scrub_bytes,
    })
}

/// The first field (dotted, under `at`) where two JSON objects differ, with both values.
fn first_difference(
    at: &str,
    a: &serde_json::Value,
    b: &serde_json::Value,
) -> Option<(String, String, String)> {
    match (a, b) {
        (serde_json::Value::Object(x), serde_json::Value::Object(y)) => {
            for (k, v) in x {
                let w = y.get(k).unwrap_or(&serde_json::Value::Null);
                if let Some(d) = first_difference(&format!("{at}.{k}"), v, w) {
                    return Some(d);
                }
            }
            y.keys()
                .find(|k| !x.contains_key(*k))
                .map(|k| (format!("{at}.{k}"), "absent".to_string(), y[k].to_string()))
        }
        _ if a != b => Some((at.to_string(), a.to_string(), b.to_string())),
        _ => None,
    }
}

/// Refuse `stated` unless it is `found` (recomputed `from` other stated figures) within
/// [`DERIVED_RTOL`].
fn agree(field: &str, stated: f64, found: f64, from: &str) -> Result<(), ReceiptError> {
    let tol = DERIVED_RTOL * stated.abs().max(found.abs());
    if (stated - found).abs() <= tol {
        Ok(())
    } else {
        Err(ReceiptError::invalid(
            field,
            format!("is {stated}, but {from} give {found}"),
        ))
    }
}

/// An RFC 3339 timestamp no earlier than 2000 and no further ahead of `now` than
/// [`MAX_CLOCK_AHEAD_S`]; its seconds since the epoch.
fn timestamp(field: &str, value: &str, now: i64) -> Result<i64, ReceiptError> {
    let t = parse_utc(value).ok_or_else(|| {
        ReceiptError::invalid(
            field,
            format!("'{value}' is not an RFC 3339 timestamp (e.g. 2026-11-30T09:04:56Z)"),
        )
    })?;
    if t < EARLIEST_UTC_SECS {
        return Err(ReceiptError::invalid(
            field,
            format!("'{value}' is before 2000-01-01T00:00:00Z: the clock was not set"),
        ));
    }
    if t > now.saturating_add(MAX_CLOCK_AHEAD_S) {
        return Err(ReceiptError::invalid(
            field,
            format!(
                "'{value}' is {:.1} hours ahead of this machine's clock ({})",
                (t - now) as f64 / 3600.0,
                format_utc(u64::try_from(now).unwrap_or(0))
            ),
        ));
    }
    Ok(t)
}

impl Source {
    fn validate(&self, at: &str) -> Result<(), ReceiptError> {
        let f = |name: &str| format!("{at}.{name}");
        if let Some(r) = &self.repository {
            label(&f("repository"), r)?;
        }
        if let Some(c) = &self.commit {
            label(&f("commit"), c)?;
        }
        label(&f("file"), &self.file)?;
        sha256(&f("file_sha256"), &self.file_sha256)?;
        label(&f("entry"), &self.entry)?;
        if let Some(n) = &self.name {
            label(&f("name"), n)?;
        }
        sha256(&f("binary_sha256"), &self.binary_sha256)?;
        label(&f("compiler"), &self.compiler)
    }
}

impl Hardware {
    fn validate(&self) -> Result<(), ReceiptError> {
        label("hardware.gpu_uuid", &self.gpu_uuid)?;
        label("hardware.gpu_name", &self.gpu_name)?;
        label("hardware.compute_capability", &self.compute_capability)?;
        if !is_compute_capability(&self.compute_capability) {
            return Err(ReceiptError::invalid(
                "hardware.compute_capability",
                format!(
                    "'{}' is not a compute capability (major.minor digits, e.g. 9.0)",
                    self.compute_capability
                ),
            ));
        }
        label("hardware.driver", &self.driver)?;
        if let Some(v) = &self.cuda_runtime {
            label("hardware.cuda_runtime", v)?;
        }
        if let Some(v) = &self.nvrtc {
            label("hardware.nvrtc", v)?;
        }
        if let Some(w) = self.power_limit_w {
            positive("hardware.power_limit_w", w)?;
        }
        label("hardware.clock_policy", &self.clock_policy)?;
        label("hardware.isolation", &self.isolation)?;
        non_negative("hardware.theoretical_peak_gb_s", self.theoretical_peak_gb_s)
    }
}

impl Workload {
    fn validate(&self) -> Result<(), ReceiptError> {
        label("workload.operation", &self.operation)?;
        label("workload.dtype", &self.dtype)?;
        if self.n == 0 {
            return Err(ReceiptError::invalid(
                "workload.n",
                "is 0; a positive element count is required",
            ));
        }
        for (name, dims) in [("grid", self.grid), ("block", self.block)] {
            if dims.contains(&0) {
                return Err(ReceiptError::invalid(
                    format!("workload.{name}"),
                    format!("{dims:?} has a zero dimension"),
                ));
            }
        }
        self.validate_launch()?;
        if !self.cache_regime.accepts_slots(self.rotation_slots) {
            let want = match self.cache_regime {
                Regime::BufferRotated => "at least 2",
                Regime::SameBuffer | Regime::L2Flushed => "exactly 1",
            };
            return Err(ReceiptError::invalid(
                "workload.rotation_slots",
                format!(
                    "is {} but cache regime {} needs {want}: cache policy and slot count disagree",
                    self.rotation_slots, self.cache_regime
                ),
            ));
        }
        Ok(())
    }
}

impl Workload {
    /// The launch against CUDA's limits and, for a built-in operation, against `n`.
    ///
    /// A built-in operation (copy, transpose, triad, reduce-sum, named by the label's
    /// prefix as klab writes it) launches `ceil(n / e)` or `n / e` blocks along each of its
    /// axes (1 for a vector, 2 for an n x n matrix) for the whole number `e` of elements per
    /// block its manifest declares, and 1 along the others; its useful bytes and FLOPs are
    /// the contract's ([`builtin_work`]). The receipt does not record the manifest (only
    /// the kernel's source hash), so `e` is not known here: a grid is refused when no `e`
    /// gives it, which catches a grid from another size or shape, but not one from another
    /// `e` at this `n`. A declared operation's launch is an expression over sizes the
    /// receipt does not keep, so only CUDA's limits are checked for it.
    fn validate_launch(&self) -> Result<(), ReceiptError> {
        let first = LaunchRecord {
            entry: String::new(),
            grid: self.grid,
            block: self.block,
            dynamic_shared_bytes: self.dynamic_shared_bytes,
        };
        plan::validate(&first.plan(), &any_device_limits(), None).map_err(|e| {
            ReceiptError::invalid(
                "workload",
                format!("launch grid {:?} block {:?}: {e}", self.grid, self.block),
            )
        })?;
        for (i, l) in self.sequence.iter().enumerate() {
            let field = format!("workload.sequence[{i}]");
            label(&format!("{field}.entry"), &l.entry)?;
            plan::validate(&l.plan(), &any_device_limits(), None).map_err(|e| {
                ReceiptError::invalid(
                    field.clone(),
                    format!("launch grid {:?} block {:?}: {e}", l.grid, l.block),
                )
            })?;
        }
        if let Some(l) = self.sequence.first() {
            if (l.grid, l.block, l.dynamic_shared_bytes)
                != (self.grid, self.block, self.dynamic_shared_bytes)
            {
                return Err(ReceiptError::invalid(
                    "workload.sequence[0]",
                    "differs from the workload's grid, block and dynamic shared bytes, which are the first launch's",
                ));
            }
        }
        let Some(op) = builtin_operation(&self.operation) else {
            return Ok(());
        };
        let n = self.n;
        for (axis, &g) in self.grid.iter().enumerate() {
            let name = ["x", "y", "z"][axis];
            let g = u64::from(g);
            if axis >= op.dims() {
                if g != 1 {
                    return Err(ReceiptError::invalid(
                        format!("workload.grid.{name}"),
                        format!(
                            "is {g}, but {op} spans {} grid axis(es): grid {:?} does not launch it at n = {n}",
                            op.dims(),
                            self.grid
                        ),
                    ));
                }
            } else if !grid_fits(n, g) {
                return Err(ReceiptError::invalid(
                    format!("workload.grid.{name}"),
                    format!(
                        "is {g}, but no whole number e of elements per block gives ceil(n / e) or n / e = {g} at n = {n}: grid {:?} is not a {op} launch at this n",
                        self.grid
                    ),
                ));
            }
        }
        let (bytes, flops) = builtin_work(op, n).ok_or_else(|| {
            ReceiptError::invalid(
                "workload.n",
                format!("is {n}, too large for {op}'s useful-byte count"),
            )
        })?;
        for (field, stated, found) in [
            (
                "workload.useful_bytes_per_launch",
                self.useful_bytes_per_launch,
                bytes,
            ),
            ("workload.flops_per_launch", self.flops_per_launch, flops),
        ] {
            if stated != found {
                return Err(ReceiptError::invalid(
                    field,
                    format!("is {stated}, but {op} at n = {n} gives {found}"),
                ));
            }
        }
        Ok(())
    }
}

/// The built-in operation a workload label names (`transpose: out[c][r] = in[r][c]`, as
/// klab writes it: the operation's name before the colon); `None` for a declared one.
pub fn builtin_operation(label: &str) -> Option<OpKind> {
    let name = label.split_once(':')?.0.trim();
    [
        OpKind::Copy,
        OpKind::Transpose,
        OpKind::Triad,
        OpKind::ReduceSum,
    ]
    .into_iter()
    .find(|k| k.name() == name)
}

/// Whether `g` blocks is `ceil(n / e)` or `floor(n / e)` for some whole `e >= 1`. The
/// smallest `e` with `ceil(n / e) <= g` is `ceil(n / g)`, so `g` is a ceiling when that `e`
/// gives it; likewise `floor(n / g)` is the largest `e` with `floor(n / e) >= g`.
fn grid_fits(n: u64, g: u64) -> bool {
    if g == 0 || n == 0 {
        return false;
    }
    let e = n.div_ceil(g);
    let e_down = n / g;
    n.div_ceil(e) == g || (e_down >= 1 && n / e_down == g)
}

/// The launch limits every compute capability from 3.0 on shares (threads per block, block
/// and grid dimensions). Shared memory per block differs by architecture, so it is not
/// limited here.
fn any_device_limits() -> DeviceLimits {
    DeviceLimits {
        max_shared_per_block: u32::MAX,
        max_shared_per_block_optin: u32::MAX,
        ..DeviceLimits::hopper()
    }
}

/// `major.minor`, each one or two digits, the major without a leading zero.
fn is_compute_capability(s: &str) -> bool {
    let Some((major, minor)) = s.split_once('.') else {
        return false;
    };
    let digits = |p: &str| (1..=2).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit());
    digits(major) && digits(minor) && !major.starts_with('0')
}

impl Correctness {
    fn validate(&self) -> Result<(), ReceiptError> {
        label("correctness.reference", &self.reference)?;
        label("correctness.rule", &self.rule)?;
        if let Some(v) = self.atol {
            non_negative("correctness.atol", v)?;
        }
        if let Some(v) = self.rtol {
            non_negative("correctness.rtol", v)?;
        }
        if self.checked_after_timing && self.slots_checked == 0 {
            return Err(ReceiptError::invalid(
                "correctness.slots_checked",
                "is 0, but correctness.checked_after_timing is true: a check after timing checks a slot",
            ));
        }
        for (i, s) in self.sanitizer.iter().enumerate() {
            label(&format!("correctness.sanitizer[{i}].tool"), &s.tool)?;
            rel_path(&format!("correctness.sanitizer[{i}].report"), &s.report)?;
        }
        Ok(())
    }
}

impl Measurement {
    fn validate(&self) -> Result<(), ReceiptError> {
        if self.timer.launches_per_sample() == 0 {
            return Err(ReceiptError::invalid(
                "measurement.timer",
                "times 0 launches per sample",
            ));
        }
        label("measurement.warmup.policy", &self.warmup.policy)?;
        if self.samples_per_round < 2 {
            return Err(ReceiptError::invalid(
                "measurement.samples_per_round",
                format!(
                    "is {}; at least two samples per round are required",
                    self.samples_per_round
                ),
            ));
        }
        if self.rounds == 0 {
            return Err(ReceiptError::invalid(
                "measurement.rounds",
                "is 0; at least one round is required",
            ));
        }
        label("measurement.order", &self.order)?;
        // One file per block: a round may hold several blocks of this kernel (ABBA puts
        // two in each round), each at its own position; every round needs at least one.
        let mut blocks = BTreeSet::new();
        let mut covered = BTreeSet::new();
        let mut paths = BTreeSet::new();
        for (i, r) in self.raw_samples.iter().enumerate() {
            let f = |name: &str| format!("measurement.raw_samples[{i}].{name}");
            rel_path(&f("path"), &r.path)?;
            sha256(&f("sha256"), &r.sha256)?;
            if r.round == 0 || r.round > self.rounds {
                return Err(ReceiptError::invalid(
                    f("round"),
                    format!("is {}, outside rounds 1..={}", r.round, self.rounds),
                ));
            }
            covered.insert(r.round);
            if !blocks.insert((r.round, r.position)) {
                return Err(ReceiptError::invalid(
                    f("position"),
                    format!(
                        "round {} position {} has more than one file",
                        r.round, r.position
                    ),
                ));
            }
            if !paths.insert(normalized(&r.path)) {
                return Err(ReceiptError::invalid(
                    f("path"),
                    format!("'{}' is listed for more than one block", r.path),
                ));
            }
        }
        if let Some(missing) = (1..=self.rounds).find(|r| !covered.contains(r)) {
            return Err(ReceiptError::invalid(
                "measurement.raw_samples",
                format!("round {missing} has no sample file"),
            ));
        }
        label("measurement.quantiles", &self.quantiles)?;
        if self.quantiles != QUANTILE_RULE {
            // Every quantile is recomputed by this rule; another rule's figures cannot be.
            return Err(ReceiptError::invalid(
                "measurement.quantiles",
                format!(
                    "is '{}'; klab states and recomputes quantiles only by '{QUANTILE_RULE}'",
                    self.quantiles
                ),
            ));
        }
        for (i, b) in self.gpu_state.iter().enumerate() {
            label(&format!("measurement.gpu_state[{i}].label"), &b.label)?;
        }
        Ok(())
    }

    /// Each block's observations: timestamps, before no later than after, neither later
    /// than the receipt (`created`), and the flags the observations give.
    fn validate_states(&self, created: i64, now: i64) -> Result<(), ReceiptError> {
        for (i, b) in self.gpu_state.iter().enumerate() {
            let f = |name: &str| format!("measurement.gpu_state[{i}].{name}");
            let before = timestamp(&f("before.utc"), &b.before.utc, now)?;
            let after = timestamp(&f("after.utc"), &b.after.utc, now)?;
            if after < before {
                return Err(ReceiptError::invalid(
                    f("after.utc"),
                    format!(
                        "'{}' is earlier than before.utc '{}'",
                        b.after.utc, b.before.utc
                    ),
                ));
            }
            if after > created.saturating_add(CLOCK_STEP_S) {
                return Err(ReceiptError::invalid(
                    f("after.utc"),
                    format!(
                        "'{}' is later than created_utc '{}': a receipt cannot predate its measurements",
                        b.after.utc,
                        format_utc(u64::try_from(created).unwrap_or(0))
                    ),
                ));
            }
            let flags = gpustate::flags(&b.before, &b.after);
            if flags != b.flags {
                return Err(ReceiptError::invalid(
                    f("flags"),
                    format!(
                        "is {:?}, but its before and after observations give {flags:?}",
                        b.flags
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl ResultSummary {
    fn validate(&self) -> Result<(), ReceiptError> {
        for (name, v) in [
            ("median_us", self.median_us),
            ("p10_us", self.p10_us),
            ("p90_us", self.p90_us),
            ("useful_gb_s", self.useful_gb_s),
            ("pct_of_peak", self.pct_of_peak),
        ] {
            non_negative(&format!("result.{name}"), v)?;
        }
        if let Some(c) = &self.rounds {
            c.validate()?;
        }
        if !(self.p10_us <= self.median_us && self.median_us <= self.p90_us) {
            return Err(ReceiptError::invalid(
                "result",
                format!(
                    "quantiles out of order: p10 {} us, median {} us, p90 {} us",
                    self.p10_us, self.median_us, self.p90_us
                ),
            ));
        }
        Ok(())
    }
}

impl RoundsContext {
    fn validate(&self) -> Result<(), ReceiptError> {
        for (name, v) in [
            ("ceiling_gb_s", self.ceiling_gb_s),
            ("pct_of_ceiling", self.pct_of_ceiling),
            ("ratio_to_baseline", self.ratio_to_baseline),
        ] {
            if let Some(v) = v {
                non_negative(&format!("result.rounds.{name}"), v)?;
            }
        }
        if self.kernels.is_empty() {
            return Err(ReceiptError::invalid("result.rounds.kernels", "is empty"));
        }
        for (i, k) in self.kernels.iter().enumerate() {
            label(&format!("result.rounds.kernels[{i}]"), k)?;
        }
        let named = |field: &str, k: &str| {
            if self.kernels.iter().any(|x| x == k) {
                Ok(())
            } else {
                Err(ReceiptError::invalid(
                    field,
                    format!(
                        "'{k}' is not one of result.rounds.kernels {:?}",
                        self.kernels
                    ),
                ))
            }
        };
        named("result.rounds.baseline", &self.baseline)?;
        match (&self.ceiling_kernel, self.ceiling_gb_s) {
            (Some(k), Some(_)) => named("result.rounds.ceiling_kernel", k)?,
            (None, None) => {}
            (k, g) => {
                return Err(ReceiptError::invalid(
                    "result.rounds.ceiling_gb_s",
                    format!(
                    "is {g:?} with ceiling_kernel {k:?}: a ceiling names its kernel and its rate"
                ),
                ))
            }
        }
        if let Some([lo, hi]) = self.ratio_interval {
            if self.ratio_to_baseline.is_none() {
                return Err(ReceiptError::invalid(
                    "result.rounds.ratio_interval",
                    "is present without a ratio_to_baseline",
                ));
            }
            for v in [lo, hi] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(ReceiptError::invalid(
                        "result.rounds.ratio_interval",
                        format!("[{lo}, {hi}] holds a value that is not a finite positive ratio"),
                    ));
                }
            }
            if lo > hi {
                return Err(ReceiptError::invalid(
                    "result.rounds.ratio_interval",
                    format!("[{lo}, {hi}] has its bounds out of order"),
                ));
            }
        }
        Ok(())
    }
}

/// A label: present and not only whitespace.
fn label(field: &str, value: &str) -> Result<(), ReceiptError> {
    if value.trim().is_empty() {
        return Err(ReceiptError::invalid(field, "is empty"));
    }
    Ok(())
}

/// A SHA-256 digest: exactly 64 lowercase hex digits.
fn sha256(field: &str, value: &str) -> Result<(), ReceiptError> {
    if is_sha256_hex(value) {
        Ok(())
    } else {
        Err(ReceiptError::invalid(
            field,
            format!("'{value}' is not a SHA-256 digest (64 lowercase hex digits)"),
        ))
    }
}

/// Whether `s` is 64 lowercase hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A time, rate or limit: a finite number above 0.
fn positive(field: &str, v: f64) -> Result<(), ReceiptError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ReceiptError::invalid(
            field,
            format!("is {v}; a finite number above 0 is required"),
        ))
    }
}

fn non_negative(field: &str, v: f64) -> Result<(), ReceiptError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ReceiptError::invalid(
            field,
            format!("is {v}; a finite non-negative number is required"),
        ))
    }
}

fn rel_path(field: &str, value: &str) -> Result<(), ReceiptError> {
    check_relative_path(value)
        .map_err(|why| ReceiptError::invalid(field, format!("'{value}' {why}")))
}

/// Check that `p` names a file inside the receipt's folder, lexically: not empty, not
/// absolute, no `..`, no backslash (a separator elsewhere) and no NUL. Symlinks are checked
/// where the file is opened (see `compare`).
pub fn check_relative_path(p: &str) -> Result<(), String> {
    if p.trim().is_empty() {
        return Err("is empty".into());
    }
    if p.contains('\\') || p.contains('\0') {
        return Err("contains a backslash or NUL; use '/' separators".into());
    }
    let path = Path::new(p);
    let mut names = 0;
    for c in path.components() {
        match c {
            Component::Normal(_) => names += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                return Err("has a '..' component and may leave the receipt's folder".into())
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err("is absolute; paths are relative to the receipt's folder".into())
            }
        }
    }
    if names == 0 {
        return Err("names no file".into());
    }
    Ok(())
}

/// `p` without `.` components, for duplicate detection.
fn normalized(p: &str) -> PathBuf {
    Path::new(p)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workloads_shape_is_what_its_operation_states_else_its_n() {
        let mut w = Workload {
            operation: "declared: C (f32) at K=1024 M=2048 N=2048".into(),
            dtype: "f32".into(),
            n: 4_194_304,
            grid: [128, 128, 1],
            block: [16, 16, 1],
            dynamic_shared_bytes: 0,
            cache_regime: Regime::SameBuffer,
            rotation_slots: 1,
            useful_bytes_per_launch: 1,
            flops_per_launch: 0,
            sequence: Vec::new(),
        };
        assert_eq!(w.shape(), "K=1024 M=2048 N=2048");
        w.operation = "copy: out[r][c] = in[r][c]".into();
        assert_eq!(w.shape(), "n = 4194304");
    }

    #[test]
    fn a_sequences_launches_are_each_within_cudas_limits_and_the_first_is_the_workloads() {
        let launch = |entry: &str, grid: u32, block: u32| LaunchRecord {
            entry: entry.into(),
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            dynamic_shared_bytes: 0,
        };
        let mut w = Workload {
            operation: "declared: y (f32) at cols=4096 rows=16384".into(),
            dtype: "f32".into(),
            n: 16384 * 4096,
            grid: [16384, 1, 1],
            block: [256, 1, 1],
            dynamic_shared_bytes: 0,
            cache_regime: Regime::SameBuffer,
            rotation_slots: 1,
            useful_bytes_per_launch: 1,
            flops_per_launch: 0,
            sequence: vec![
                launch("row_mean", 16384, 256),
                launch("normalise", 262144, 256),
            ],
        };
        assert!(w.validate().is_ok());
        w.sequence[1].block = [2048, 1, 1];
        let e = w.validate().unwrap_err().to_string();
        assert!(
            e.contains("workload.sequence[1]") && e.contains("2048"),
            "{e}"
        );
        w.sequence[1].block = [256, 1, 1];
        w.sequence[0].grid = [1, 1, 1];
        let e = w.validate().unwrap_err().to_string();
        assert!(e.contains("workload.sequence[0]"), "{e}");
    }

    #[test]
    fn relative_paths() {
        for ok in ["a.csv", "./a.csv", "run/r01.csv", "a..b.csv"] {
            assert!(check_relative_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "  ",
            "/etc/passwd",
            "../x",
            "a/../b",
            ".",
            "./",
            "a\\..\\b",
        ] {
            assert!(check_relative_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sha256_shape() {
        assert!(is_sha256_hex(&"a".repeat(64)));
        assert!(!is_sha256_hex(&"A".repeat(64)));
        assert!(!is_sha256_hex(&"a".repeat(63)));
        assert!(!is_sha256_hex(&"g".repeat(64)));
    }
}
