//! The reproducible receipt (gate 5), schema `klab-receipt/1`: what ran, where, what
//! passed, and which files support the claim, each artifact bound to its bytes by SHA-256.
//!
//! Seed 003's receipt is the floor. Reading is strict: every struct refuses unknown fields
//! (a misspelt field is an error, not a silently missing value), serde refuses loosely typed
//! values (`"n": true`, `"n": "5"`), and [`Receipt::validate`] refuses what serde lets through:
//! empty labels, hashes that are not SHA-256, a slot count the cache regime cannot have, too
//! few samples or rounds, non-finite results, and paths that leave the receipt's folder.
//! Paths inside a receipt are relative to the folder that holds it.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::artifact::{read_regular, write_atomic, FileError, Input};
use crate::gpustate::BlockState;
use crate::samples::{Regime, Timer};

/// The schema string every receipt carries.
pub const RECEIPT_SCHEMA: &str = "klab-receipt/1";

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
    /// SHA-256 of the compiled module (PTX or cubin) or binary that ran.
    pub binary_sha256: String,
    /// Compiler and version, e.g. `nvrtc 13.0`.
    pub compiler: String,
    pub flags: Vec<String>,
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
    pub operation: String,
    pub dtype: String,
    /// Element count.
    pub n: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u32,
    pub cache_regime: Regime,
    /// Buffer sets the samples cycle through (1 unless buffer-rotated).
    pub rotation_slots: u64,
    pub useful_bytes_per_launch: u64,
    pub flops_per_launch: u64,
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
    /// The quantile rule, e.g. [`crate::stats::QUANTILE_RULE`].
    pub quantiles: String,
    pub profiler_attached: bool,
    /// Bytes of the scrub between samples (l2-flushed).
    pub l2_scrub_bytes: Option<u64>,
    /// GPU state before and after each timed block.
    pub gpu_state: Vec<BlockState>,
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
    /// Its bootstrap interval over rounds, when there were enough rounds for one.
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
    /// A value serde accepted but a receipt cannot hold.
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
        label("klab_version", &self.klab_version)?;
        self.source.validate("source")?;
        if let Some(b) = &self.baseline_source {
            b.validate("baseline_source")?;
        }
        self.hardware.validate()?;
        self.workload.validate()?;
        self.correctness.validate()?;
        self.measurement.validate()?;

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
        self.result.validate()
    }
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
        sha256(&f("binary_sha256"), &self.binary_sha256)?;
        label(&f("compiler"), &self.compiler)
    }
}

impl Hardware {
    fn validate(&self) -> Result<(), ReceiptError> {
        label("hardware.gpu_uuid", &self.gpu_uuid)?;
        label("hardware.gpu_name", &self.gpu_name)?;
        label("hardware.compute_capability", &self.compute_capability)?;
        label("hardware.driver", &self.driver)?;
        if let Some(v) = &self.cuda_runtime {
            label("hardware.cuda_runtime", v)?;
        }
        if let Some(v) = &self.nvrtc {
            label("hardware.nvrtc", v)?;
        }
        if let Some(w) = self.power_limit_w {
            non_negative("hardware.power_limit_w", w)?;
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
        for (i, b) in self.gpu_state.iter().enumerate() {
            label(&format!("measurement.gpu_state[{i}].label"), &b.label)?;
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
            for (name, v) in [
                ("ceiling_gb_s", c.ceiling_gb_s),
                ("pct_of_ceiling", c.pct_of_ceiling),
                ("ratio_to_baseline", c.ratio_to_baseline),
            ] {
                if let Some(v) = v {
                    non_negative(&format!("result.rounds.{name}"), v)?;
                }
            }
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
