//! `klab compare BASELINE CANDIDATE`: re-check both receipts and everything they rely on,
//! require like-with-like conditions, then compare round by round.
//!
//! Before any ratio is printed, for each receipt ([`check`]): it parses under the strict
//! schema and validates ([`Receipt::load`]: every field's domain and every figure the receipt
//! alone determines); every artifact and raw sample file resolves inside the receipt's folder
//! (also after following symlinks), exists, and still has its recorded SHA-256 (and, for
//! artifacts, its recorded size); every raw sample file passes [`parse_samples_csv`] under
//! the receipt's rotation, holds exactly `samples_per_round` samples, none shorter than a
//! CUDA event pair resolves ([`check_resolution`]); the stated median, p10 and p90 are what
//! the samples give ([`Receipt::check_figures`]); and a combined receipt agrees with the
//! block receipts it lists ([`Receipt::check_blocks`]: failures, sample hashes, GPU state,
//! workload). Then the pair must be two measurements: not the same receipt, and no sample
//! file (by resolved path or by content) on both sides. The pair must agree on operation,
//! dtype, n, cache regime, rotation slots, GPU UUID, timer, samples per round and rounds
//! (every difference is named), both must record a passing correctness check and clean
//! sanitizer runs, and neither may have been timed under a profiler. Rounds are matched by
//! round number and handed to [`analyze_speedup`]; the headline ratio is its round-level
//! ratio (baseline / candidate, > 1 means the candidate is faster). When the pair is a
//! `klab rounds` baseline and a candidate of the same run, the candidate's stated
//! `result.rounds.ratio_to_baseline` must be that ratio.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::receipt::{BlockReceipt, Receipt, ReceiptError, BLOCK_RECEIPT_ROLE, RECEIPT_SCHEMA};
use klab_core::artifact::{self, sha256_hex, FileError, Input};
use klab_core::samples::{check_resolution, parse_samples_csv, SampleError};
use klab_core::stats::{
    analyze_speedup, render_analysis, IntervalConfig, SpeedupAnalysis, StatsError, Summary,
    QUANTILE_RULE,
};

/// One condition on which two receipts differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// The receipt field, e.g. `workload.n`.
    pub field: String,
    pub baseline: String,
    pub candidate: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} differs (baseline {}, candidate {})",
            self.field, self.baseline, self.candidate
        )
    }
}

fn join_differences(d: &[Difference]) -> String {
    d.iter()
        .map(Difference::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why two receipts cannot be compared. Each renders as one line naming the problem and,
/// where there is one, the receipt and file.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The receipt cannot be read, does not parse, or does not validate.
    #[error(transparent)]
    Receipt(#[from] ReceiptError),
    #[error("receipt {}: cannot resolve its folder: {error}", .receipt.display())]
    Folder { receipt: PathBuf, error: io::Error },
    #[error("receipt {}: artifact {path} is missing", .receipt.display())]
    Missing { receipt: PathBuf, path: String },
    #[error("receipt {}: artifact {path} resolves to {}, outside the receipt's folder {}", .receipt.display(), .resolved.display(), .folder.display())]
    Escapes {
        receipt: PathBuf,
        path: String,
        resolved: PathBuf,
        folder: PathBuf,
    },
    #[error("receipt {}: artifact {path}: {error}", .receipt.display())]
    Unreadable {
        receipt: PathBuf,
        path: String,
        error: FileError,
    },
    #[error("receipt {}: artifact {path} changed: sha256 {recorded} recorded, {found} found{}", .receipt.display(), size_suffix(.sizes))]
    Changed {
        receipt: PathBuf,
        path: String,
        recorded: String,
        found: String,
        /// (recorded, found) byte counts, when they differ too.
        sizes: Option<(u64, u64)>,
    },
    #[error("receipt {}: artifact {path} has {found} bytes but {recorded} are recorded (its sha256 matches: the recorded size is wrong)", .receipt.display())]
    Size {
        receipt: PathBuf,
        path: String,
        recorded: u64,
        found: u64,
    },
    // `error`, not `source`: the message already says it, and a source would be said twice
    // by a caller that prints the error's chain.
    #[error("receipt {}: raw samples {path}: {error}", .receipt.display())]
    Samples {
        receipt: PathBuf,
        path: String,
        error: SampleError,
    },
    #[error("receipt {}: raw samples {path} hold {found} samples but the receipt declares {declared} per round", .receipt.display())]
    SampleCount {
        receipt: PathBuf,
        path: String,
        found: usize,
        declared: u64,
    },
    #[error("baseline and candidate are the same receipt ({}): a receipt compared with itself shows nothing", .path.display())]
    SameReceipt { path: PathBuf },
    #[error("baseline raw samples {baseline_file} and candidate raw samples {candidate_file} {how}: the two sides share a measurement (baseline {}, candidate {})", .baseline.display(), .candidate.display())]
    SharedSamples {
        baseline: PathBuf,
        baseline_file: String,
        candidate: PathBuf,
        candidate_file: String,
        /// `are the same file (PATH)` or `hold the same bytes (sha256 ...)`.
        how: String,
    },
    #[error("receipts do not measure like with like: {}", join_differences(.0))]
    Conditions(Vec<Difference>),
    #[error(
        "round numbers do not pair up: baseline has rounds {baseline:?}, candidate {candidate:?}"
    )]
    Rounds {
        baseline: Vec<u64>,
        candidate: Vec<u64>,
    },
    #[error("receipt {}: it lacks {}", .receipt.display(), crate::receipt::Integrity::LACKING)]
    NoIntegrity { receipt: PathBuf },
    #[error("receipt {}: it states no {what}; measure it again", .receipt.display())]
    Unvouched { receipt: PathBuf, what: String },
    #[error("receipt {}: its launches were timed without invalidation ({policy}): a timed launch may have found its previous result in place", .receipt.display())]
    NotInvalidated { receipt: PathBuf, policy: String },
    #[error("receipt {}: correctness check recorded {failures} failure(s) against {reference}; a failing kernel's timing is not a result", .receipt.display())]
    Incorrect {
        receipt: PathBuf,
        failures: u64,
        reference: String,
    },
    #[error("receipt {}: sanitizer {tool} {what} (report {report})", .receipt.display())]
    Sanitizer {
        receipt: PathBuf,
        tool: String,
        what: String,
        report: String,
    },
    #[error("receipt {}: samples were timed with a profiler attached; profiler durations are not benchmark results", .receipt.display())]
    Profiled { receipt: PathBuf },
    #[error("cannot analyze the rounds: {0}")]
    Stats(#[from] StatsError),
}

fn size_suffix(sizes: &Option<(u64, u64)>) -> String {
    match sizes {
        Some((r, f)) => format!(" ({r} bytes recorded, {f} found)"),
        None => String::new(),
    }
}

/// One side of a comparison: where it came from and its distribution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideSummary {
    /// The receipt file, as given.
    pub receipt: String,
    /// A short name for tables: the kernel entry, or the receipt's folder.
    pub name: String,
    pub claim: String,
    /// One line: the correctness and sanitizer evidence this receipt records.
    pub correctness: String,
    /// Distribution over all samples of all rounds (quantile rule), for description only;
    /// the ratio is computed round by round.
    pub all_samples: Summary,
    /// Median over all samples, microseconds.
    pub median_us: f64,
    /// Round numbers, ascending, as matched against the other side.
    pub rounds: Vec<u64>,
    /// Median of each round's samples (quantile rule), microseconds, in `rounds` order.
    pub round_medians_us: Vec<f64>,
}

/// The result of `klab compare`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub baseline: SideSummary,
    pub candidate: SideSummary,
    /// The quantile rule behind every median.
    pub quantiles: String,
    /// Round-level ratio, baseline / candidate (> 1: candidate faster): the median of the
    /// per-round ratios, equal to `analysis.ratio`.
    pub ratio: f64,
    pub analysis: SpeedupAnalysis,
    /// Caveats that do not refuse the comparison: order not interleaved, flagged GPU state,
    /// differing warmup or environment.
    pub notes: Vec<String>,
    /// With `--resolve`: whether the rounds resolve the half-width asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<klab_core::stats::resolve::ResolveCheck>,
}

impl Comparison {
    /// Human-readable account: both medians, the correctness evidence beside them, the
    /// round-level ratio, interval and verdict, then the notes.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for (role, s) in [("baseline", &self.baseline), ("candidate", &self.candidate)] {
            out.push_str(&format!(
                "{role:<9} {} ({}): median {:.3} µs, p10 {:.3} µs, p90 {:.3} µs over {} samples in {} rounds\n",
                s.name,
                s.receipt,
                s.median_us,
                s.all_samples.p10,
                s.all_samples.p90,
                s.all_samples.count,
                s.rounds.len()
            ));
            out.push_str(&format!("{:<9} correctness: {}\n", "", s.correctness));
        }
        out.push_str(&format!("quantiles: {}\n", self.quantiles));
        out.push_str(&render_analysis(
            &self.analysis,
            &self.baseline.name,
            &self.candidate.name,
        ));
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        if let Some(r) = &self.resolution {
            out.push_str(&r.describe());
            out.push('\n');
        }
        out
    }
}

/// The folder a receipt's relative paths are resolved against.
fn receipt_folder(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

struct Resolver<'a> {
    receipt: &'a Path,
    folder: PathBuf,
}

impl Resolver<'_> {
    /// Resolve `rel` inside the folder, following symlinks only while they stay in it, and
    /// read it (a regular file of at most `kind.cap` bytes). Returns the resolved path too.
    fn read(&self, rel: &str, kind: Input) -> Result<(PathBuf, Vec<u8>), CompareError> {
        let receipt = self.receipt.to_path_buf();
        let read =
            artifact::resolve_inside(&self.folder, Path::new(rel), kind).and_then(|resolved| {
                artifact::read_regular(&resolved, kind).map(|bytes| (resolved, bytes))
            });
        read.map_err(|e| match e {
            e if e.is_not_found() => CompareError::Missing {
                receipt,
                path: rel.to_string(),
            },
            FileError::Escapes {
                folder, resolved, ..
            } => CompareError::Escapes {
                receipt,
                path: rel.to_string(),
                resolved,
                folder,
            },
            error => CompareError::Unreadable {
                receipt,
                path: rel.to_string(),
                error,
            },
        })
    }
}

/// The found digest when `bytes` no longer hash to `recorded`.
fn hash_mismatch(bytes: &[u8], recorded: &str) -> Option<String> {
    let found = sha256_hex(bytes);
    (found != recorded).then_some(found)
}

/// A receipt that passed every check of one side (see the module documentation), with what
/// the checks read.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub receipt: Receipt,
    /// For each `measurement.raw_samples` entry, in that order, its elapsed times in
    /// microseconds (acquisition order).
    pub rounds: Vec<Vec<f64>>,
    /// For each `measurement.raw_samples` entry, the file it resolved to.
    pub sample_files: Vec<PathBuf>,
    /// The block receipts it lists, as read and validated.
    pub blocks: Vec<BlockReceipt>,
}

/// Whether an artifact is a block receipt: listed as one, or a JSON file of the receipt
/// schema under another role (so a relabelled block receipt is still checked).
fn is_block_receipt(role: &str, path: &str, bytes: &[u8]) -> bool {
    if role == BLOCK_RECEIPT_ROLE {
        return true;
    }
    path.ends_with(".json")
        && bytes.len() as u64 <= Input::RECEIPT.cap
        && serde_json::from_slice::<serde_json::Value>(bytes)
            .ok()
            .is_some_and(|v| v.get("schema").and_then(|s| s.as_str()) == Some(RECEIPT_SCHEMA))
}

/// Read and validate a receipt, re-check every artifact and raw sample file it names, parse
/// the raw samples, and recompute its figures from them and from its block receipts.
pub fn check(path: &Path) -> Result<Checked, CompareError> {
    let receipt = Receipt::load(path)?;
    // A link to a receipt (`latest.json -> run-07/receipt.json`) names the files beside the
    // receipt it leads to, not beside the link.
    let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let folder = receipt_folder(&real);
    fs::canonicalize(&folder).map_err(|error| CompareError::Folder {
        receipt: path.to_path_buf(),
        error,
    })?;
    let r = Resolver {
        receipt: path,
        folder: folder.clone(),
    };

    let mut blocks = Vec::new();
    for a in &receipt.artifacts {
        let (_, bytes) = r.read(&a.path, Input::ARTIFACT)?;
        let found_bytes = bytes.len() as u64;
        if let Some(found) = hash_mismatch(&bytes, &a.sha256) {
            return Err(CompareError::Changed {
                receipt: path.to_path_buf(),
                path: a.path.clone(),
                recorded: a.sha256.clone(),
                found,
                sizes: (found_bytes != a.bytes).then_some((a.bytes, found_bytes)),
            });
        }
        if found_bytes != a.bytes {
            return Err(CompareError::Size {
                receipt: path.to_path_buf(),
                path: a.path.clone(),
                recorded: a.bytes,
                found: found_bytes,
            });
        }
        if is_block_receipt(&a.role, &a.path, &bytes) {
            // The bytes just hashed, not a second read of the file.
            let at = folder.join(&a.path);
            let text = String::from_utf8(bytes).map_err(|_| ReceiptError::Parse {
                path: at.clone(),
                message: "not UTF-8 text".to_string(),
                context: None,
            })?;
            let block = Receipt::from_json(&text, &at)?;
            block.validate().map_err(|e| e.in_file(&at))?;
            blocks.push(BlockReceipt {
                path: a.path.clone(),
                receipt: block,
            });
        }
    }

    let m = &receipt.measurement;
    let mut rounds = Vec::with_capacity(m.raw_samples.len());
    let mut sample_files = Vec::with_capacity(m.raw_samples.len());
    for raw in &m.raw_samples {
        let (resolved, bytes) = r.read(&raw.path, Input::SAMPLES)?;
        if let Some(found) = hash_mismatch(&bytes, &raw.sha256) {
            return Err(CompareError::Changed {
                receipt: path.to_path_buf(),
                path: raw.path.clone(),
                recorded: raw.sha256.clone(),
                found,
                sizes: None,
            });
        }
        let samples_error = |error| CompareError::Samples {
            receipt: path.to_path_buf(),
            path: raw.path.clone(),
            error,
        };
        let samples =
            parse_samples_csv(&bytes, receipt.workload.rotation_slots).map_err(samples_error)?;
        check_resolution(&samples, m.timer).map_err(samples_error)?;
        if samples.len() as u64 != m.samples_per_round {
            return Err(CompareError::SampleCount {
                receipt: path.to_path_buf(),
                path: raw.path.clone(),
                found: samples.len(),
                declared: m.samples_per_round,
            });
        }
        rounds.push(samples.into_iter().map(|s| s.elapsed_us).collect());
        sample_files.push(resolved);
    }
    receipt
        .check_figures(&rounds)
        .and_then(|()| receipt.check_blocks(&blocks, &rounds, &folder))
        .map_err(|e| e.in_file(path))?;
    Ok(Checked {
        receipt,
        rounds,
        sample_files,
        blocks,
    })
}

/// [`check`], returning the receipt and its raw samples (one entry per
/// `measurement.raw_samples` entry, in that order).
pub fn load_checked(path: &Path) -> Result<(Receipt, Vec<Vec<f64>>), CompareError> {
    check(path).map(|c| (c.receipt, c.rounds))
}

/// Refuse a pair that is one measurement twice: the same receipt file, or a raw sample file
/// on both sides (the same file after resolving links, or the same bytes elsewhere).
fn require_two_measurements(
    baseline: &Path,
    b: &Checked,
    candidate: &Path,
    c: &Checked,
) -> Result<(), CompareError> {
    if let (Ok(x), Ok(y)) = (fs::canonicalize(baseline), fs::canonicalize(candidate)) {
        if x == y {
            return Err(CompareError::SameReceipt { path: x });
        }
    }
    let br = &b.receipt.measurement.raw_samples;
    let cr = &c.receipt.measurement.raw_samples;
    for (i, bf) in b.sample_files.iter().enumerate() {
        for (j, cf) in c.sample_files.iter().enumerate() {
            let how = if bf == cf {
                format!("are the same file ({})", bf.display())
            } else if br[i].sha256 == cr[j].sha256 {
                format!("hold the same bytes (sha256 {})", br[i].sha256)
            } else {
                continue;
            };
            return Err(CompareError::SharedSamples {
                baseline: baseline.to_path_buf(),
                baseline_file: br[i].path.clone(),
                candidate: candidate.to_path_buf(),
                candidate_file: cr[j].path.clone(),
                how,
            });
        }
    }
    Ok(())
}

/// When the pair is the baseline and a candidate of one `klab rounds` run (both combined
/// receipts in the run's folder, the baseline's file named after the run's baseline), the
/// candidate's stated `result.rounds.ratio_to_baseline` was computed from these very
/// samples: it must be `ratio`. Other pairs' stated ratios were against other samples.
fn check_stated_ratio(
    baseline: &Path,
    b: &Receipt,
    candidate: &Path,
    c: &Receipt,
    ratio: f64,
) -> Result<(), CompareError> {
    let (Some(bc), Some(cc)) = (&b.result.rounds, &c.result.rounds) else {
        return Ok(());
    };
    let Some(stated) = cc.ratio_to_baseline else {
        return Ok(());
    };
    let folder = |p: &Path| fs::canonicalize(receipt_folder(p)).ok();
    let same_run = bc.kernels == cc.kernels
        && bc.baseline == cc.baseline
        && bc.ratio_to_baseline.is_none()
        && folder(baseline).is_some()
        && folder(baseline) == folder(candidate)
        && baseline.file_name().and_then(|n| n.to_str())
            == Some(format!("{}.receipt.json", cc.baseline).as_str());
    if !same_run {
        return Ok(());
    }
    c.check_ratio_to_baseline(stated, ratio)
        .map_err(|e| CompareError::Receipt(e.in_file(candidate)))
}

/// The conditions that must match, as (field, baseline, candidate) strings.
fn like_with_like(b: &Receipt, c: &Receipt) -> Vec<Difference> {
    // A pair timed under different invalidation (an older binary's) measured other work.
    let policy = |r: &Receipt| {
        r.integrity
            .as_ref()
            .map(|i| i.policy.clone())
            .unwrap_or_default()
    };
    let pairs: [(&str, String, String); 10] = [
        ("integrity.policy", policy(b), policy(c)),
        (
            "workload.operation",
            b.workload.operation.clone(),
            c.workload.operation.clone(),
        ),
        (
            "workload.dtype",
            b.workload.dtype.clone(),
            c.workload.dtype.clone(),
        ),
        (
            "workload.n",
            b.workload.n.to_string(),
            c.workload.n.to_string(),
        ),
        (
            "workload.cache_regime",
            b.workload.cache_regime.to_string(),
            c.workload.cache_regime.to_string(),
        ),
        (
            "workload.rotation_slots",
            b.workload.rotation_slots.to_string(),
            c.workload.rotation_slots.to_string(),
        ),
        (
            "hardware.gpu_uuid",
            b.hardware.gpu_uuid.clone(),
            c.hardware.gpu_uuid.clone(),
        ),
        (
            "measurement.timer",
            b.measurement.timer.label(),
            c.measurement.timer.label(),
        ),
        (
            "measurement.samples_per_round",
            b.measurement.samples_per_round.to_string(),
            c.measurement.samples_per_round.to_string(),
        ),
        (
            "measurement.rounds",
            b.measurement.rounds.to_string(),
            c.measurement.rounds.to_string(),
        ),
    ];
    let mut differences: Vec<Difference> = pairs
        .into_iter()
        .filter(|(_, x, y)| x != y)
        .map(|(field, baseline, candidate)| Difference {
            field: field.to_string(),
            baseline,
            candidate,
        })
        .collect();
    differences.extend(device_differences(b, c));
    differences
}

/// How far two receipts of one GPU may disagree on the L2 ceiling they measured (each
/// block's process measures it anew; honest blocks agree within a few percent).
const L2_CEILING_SPREAD: f64 = 1.5;

/// Where two receipts of one GPU state different facts of it: its L2 size, its theoretical
/// peak, or L2 ceilings further apart than [`L2_CEILING_SPREAD`]. A receipt's floor is
/// computed from these, so one forged faster would let an impossible median through; it
/// must then agree with the receipt it is compared against.
fn device_differences(b: &Receipt, c: &Receipt) -> Vec<Difference> {
    if b.hardware.gpu_uuid != c.hardware.gpu_uuid {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut differ = |field: &str, x: String, y: String| {
        if x != y {
            out.push(Difference {
                field: field.to_string(),
                baseline: x,
                candidate: y,
            });
        }
    };
    differ(
        "hardware.l2_bytes",
        b.hardware.l2_bytes.to_string(),
        c.hardware.l2_bytes.to_string(),
    );
    differ(
        "hardware.theoretical_peak_gb_s",
        b.hardware.theoretical_peak_gb_s.to_string(),
        c.hardware.theoretical_peak_gb_s.to_string(),
    );
    let l2 = |r: &Receipt| {
        r.integrity
            .as_ref()
            .and_then(|i| i.floor.as_ref())
            .map(|f| f.rates.l2_measured_gb_s)
    };
    if let (Some(x), Some(y)) = (l2(b), l2(c)) {
        if x.max(y) > L2_CEILING_SPREAD * x.min(y) {
            out.push(Difference {
                field: "integrity.floor.rates.l2_measured_gb_s".into(),
                baseline: format!("{x}"),
                candidate: format!("{y} (more than {L2_CEILING_SPREAD}x apart on one GPU)"),
            });
        }
    }
    out
}

/// [`check`] and then [`require_evidence`]: a receipt true to its files that can stand
/// behind a speedup.
pub fn check_as_evidence(path: &Path) -> Result<Checked, CompareError> {
    let c = check(path)?;
    require_evidence(path, &c.receipt)?;
    Ok(c)
}

/// Refuse a receipt that [`check`] accepted but whose evidence cannot stand behind a
/// speedup: it lacks the integrity section, was timed without invalidation, states no
/// physical floor or no verified sample, its kernel failed its correctness check or a
/// sanitizer run, or its samples were taken under a profiler (a median below the floor is
/// refused when the receipt validates). `klab receipt check`, `klab sweep collect` and
/// `klab report` hold a receipt to this too, so that none of them passes what `compare`
/// refuses.
pub fn require_evidence(path: &Path, r: &Receipt) -> Result<(), CompareError> {
    let Some(integrity) = &r.integrity else {
        return Err(CompareError::NoIntegrity {
            receipt: path.to_path_buf(),
        });
    };
    if integrity.invalidation != klab_core::samples::Invalidation::EveryLaunch {
        return Err(CompareError::NotInvalidated {
            receipt: path.to_path_buf(),
            policy: integrity.policy.clone(),
        });
    }
    // klab states a floor from every GPU it times on, and verifies timed samples in every
    // block: a receipt without them was not vouched for.
    let lacking = match (&integrity.floor, integrity.verified_samples) {
        (None, _) => Some("physical floor (integrity.floor), which klab states on every GPU"),
        (_, 0) => Some("verified timed sample (integrity.verified_samples is 0)"),
        _ => None,
    };
    if let Some(what) = lacking {
        return Err(CompareError::Unvouched {
            receipt: path.to_path_buf(),
            what: what.to_string(),
        });
    }
    if r.correctness.failures > 0 {
        return Err(CompareError::Incorrect {
            receipt: path.to_path_buf(),
            failures: r.correctness.failures,
            reference: r.correctness.reference.clone(),
        });
    }
    for s in &r.correctness.sanitizer {
        let what = if s.errors > 0 {
            Some(format!("reported {} error(s)", s.errors))
        } else {
            match s.exit_status {
                Some(0) => None,
                Some(code) => Some(format!("exited with status {code}")),
                None => Some("was killed by a signal".to_string()),
            }
        };
        if let Some(what) = what {
            return Err(CompareError::Sanitizer {
                receipt: path.to_path_buf(),
                tool: s.tool.clone(),
                what,
                report: s.report.clone(),
            });
        }
    }
    if r.measurement.profiler_attached {
        return Err(CompareError::Profiled {
            receipt: path.to_path_buf(),
        });
    }
    Ok(())
}

fn correctness_line(r: &Receipt) -> String {
    let c = &r.correctness;
    let mut s = format!(
        "{} failures against {} ({})",
        c.failures, c.reference, c.rule
    );
    if let Some(a) = c.atol {
        s.push_str(&format!(", atol {a}"));
    }
    if let Some(t) = c.rtol {
        s.push_str(&format!(", rtol {t}"));
    }
    if c.sanitizer.is_empty() {
        s.push_str("; no sanitizer run recorded");
    } else {
        let runs: Vec<String> = c
            .sanitizer
            .iter()
            .map(|x| format!("{} {} errors", x.tool, x.errors))
            .collect();
        s.push_str(&format!("; sanitizer: {}", runs.join(", ")));
    }
    s
}

/// A short name for one side: the kernels' names as the user gave them when both receipts
/// say and they differ, else the entry points when those differ, else the receipt's folder
/// name when those differ, else the role.
fn names(bp: &Path, b: &Receipt, cp: &Path, c: &Receipt) -> (String, String) {
    if let (Some(x), Some(y)) = (&b.source.name, &c.source.name) {
        if x != y {
            return (x.clone(), y.clone());
        }
    }
    if b.source.entry != c.source.entry {
        return (b.source.entry.clone(), c.source.entry.clone());
    }
    let folder = |p: &Path| {
        fs::canonicalize(receipt_folder(p))
            .ok()
            .and_then(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    match (folder(bp), folder(cp)) {
        (Some(x), Some(y)) if x != y => (x, y),
        _ => ("baseline".to_string(), "candidate".to_string()),
    }
}

fn notes_for(role: &str, r: &Receipt, notes: &mut Vec<String>) {
    if let Some(g) = &r.source.generated_by {
        notes.push(format!("{role}: {}", g.describe()));
    }
    let flagged: Vec<String> = r
        .measurement
        .gpu_state
        .iter()
        .filter(|b| !b.flags.is_empty())
        .map(|b| format!("'{}' ({})", b.label, b.flags.join(", ")))
        .collect();
    if !flagged.is_empty() {
        notes.push(format!(
            "{role}: GPU state flagged in {} block(s): {}",
            flagged.len(),
            flagged.join("; ")
        ));
    }
    if let Some(i) = &r.integrity {
        for f in &i.flags {
            notes.push(format!("{role}: integrity flag: {f}"));
        }
    }
    if r.measurement.gpu_state.is_empty() {
        notes.push(format!(
            "{role}: no GPU state recorded around the timed blocks"
        ));
    }
    let other_uuid = r.measurement.gpu_state.iter().any(|b| {
        [&b.before.uuid, &b.after.uuid]
            .into_iter()
            .flatten()
            .any(|u| *u != r.hardware.gpu_uuid)
    });
    if other_uuid {
        notes.push(format!(
            "{role}: a GPU state observation names a device other than {}",
            r.hardware.gpu_uuid
        ));
    }
    let c = &r.correctness;
    if !c.checked_after_timing {
        notes.push(format!(
            "{role}: outputs were not checked again after timing"
        ));
    } else if c.slots_checked < r.workload.rotation_slots {
        notes.push(format!(
            "{role}: only {} of {} rotation slot(s) were checked after timing",
            c.slots_checked, r.workload.rotation_slots
        ));
    }
    if c.sanitizer.is_empty() {
        notes.push(format!("{role}: no sanitizer run recorded"));
    }
}

fn environment_notes(b: &Receipt, c: &Receipt, notes: &mut Vec<String>) {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unrecorded".to_string());
    let optf = |v: Option<f64>| v.map_or("unrecorded".to_string(), |x| format!("{x} W"));
    let optu = |v: Option<u64>| v.map_or("none".to_string(), |x| format!("{x} bytes"));
    let fields: [(&str, String, String); 9] = [
        (
            "measurement.warmup",
            format!(
                "'{}', {} launches",
                b.measurement.warmup.policy, b.measurement.warmup.launches
            ),
            format!(
                "'{}', {} launches",
                c.measurement.warmup.policy, c.measurement.warmup.launches
            ),
        ),
        (
            "hardware.driver",
            b.hardware.driver.clone(),
            c.hardware.driver.clone(),
        ),
        (
            "hardware.cuda_runtime",
            opt(&b.hardware.cuda_runtime),
            opt(&c.hardware.cuda_runtime),
        ),
        (
            "hardware.clock_policy",
            b.hardware.clock_policy.clone(),
            c.hardware.clock_policy.clone(),
        ),
        (
            "hardware.isolation",
            b.hardware.isolation.clone(),
            c.hardware.isolation.clone(),
        ),
        (
            "hardware.power_limit_w",
            optf(b.hardware.power_limit_w),
            optf(c.hardware.power_limit_w),
        ),
        (
            "measurement.l2_scrub_bytes",
            optu(b.measurement.l2_scrub_bytes),
            optu(c.measurement.l2_scrub_bytes),
        ),
        (
            "correctness.rule",
            b.correctness.rule.clone(),
            c.correctness.rule.clone(),
        ),
        (
            "correctness.tolerance",
            format!(
                "atol {:?}, rtol {:?}",
                b.correctness.atol, b.correctness.rtol
            ),
            format!(
                "atol {:?}, rtol {:?}",
                c.correctness.atol, c.correctness.rtol
            ),
        ),
    ];
    for (field, x, y) in fields {
        if x != y {
            notes.push(format!(
                "{field} differs (baseline {x}, candidate {y}); not refused, but it may move the result"
            ));
        }
    }
}

/// Why two receipts that each declare alternating rounds did not alternate with each other:
/// their blocks ran in time spans that do not overlap (two `klab rounds` runs, say), so
/// their rounds are matched by number only and drift between the runs is not cancelled.
/// `None` when the spans overlap or a receipt recorded no GPU state to tell.
fn separate_runs(b: &Receipt, c: &Receipt) -> Option<String> {
    let span = |r: &Receipt| -> Option<(i64, i64, String, String)> {
        let times = r
            .measurement
            .gpu_state
            .iter()
            .flat_map(|s| [&s.before.utc, &s.after.utc])
            .filter_map(|t| klab_core::artifact::parse_utc(t).map(|secs| (secs, t)));
        let (lo, lo_t) = times.clone().min_by_key(|(s, _)| *s)?;
        let (hi, hi_t) = times.max_by_key(|(s, _)| *s)?;
        Some((lo, hi, lo_t.clone(), hi_t.clone()))
    };
    let ((b0, b1, bs, be), (c0, c1, cs, ce)) = (span(b)?, span(c)?);
    // Whole seconds: spans of one run share at least the second they meet in.
    (b1 < c0 || c1 < b0).then(|| {
        format!(
            "the two receipts are not one alternating run: the baseline's blocks ran from {bs} to {be}, the candidate's from {cs} to {ce}; their rounds are matched by number only, so drift between the runs is not cancelled"
        )
    })
}

/// Whether an `order` label declares interleaved rounds (ABBA, ABAB, alternating, ...).
pub fn is_interleaved_order(order: &str) -> bool {
    let o = order.to_ascii_lowercase();
    ["abba", "baab", "abab", "alternat", "interleav"]
        .iter()
        .any(|k| o.contains(k))
}

/// Order notes: labels that do not declare interleaving, and positions that show the two
/// receipts were not alternated within the matched rounds.
fn order_notes(
    b: &Receipt,
    c: &Receipt,
    positions: &[(u64, Vec<u64>, Vec<u64>)],
    notes: &mut Vec<String>,
) {
    let (bo, co) = (&b.measurement.order, &c.measurement.order);
    if !is_interleaved_order(bo) || !is_interleaved_order(co) {
        notes.push(format!(
            "rounds were not interleaved (baseline order '{bo}', candidate order '{co}'): drift between the runs is not cancelled"
        ));
        return;
    }
    if bo != co {
        notes.push(format!(
            "measurement.order differs (baseline '{bo}', candidate '{co}')"
        ));
    }
    if let Some(why) = separate_runs(b, c) {
        notes.push(why);
        return;
    }
    let same: Vec<String> = positions
        .iter()
        .filter(|(_, pb, pc)| pb.iter().any(|p| pc.contains(p)))
        .map(|(r, _, _)| r.to_string())
        .collect();
    if !same.is_empty() {
        notes.push(format!(
            "round(s) {}: baseline and candidate share a position, so they were not alternated within one round",
            same.join(", ")
        ));
    } else if positions.len() >= 2 {
        // Mean position per round: ABBA puts both at the same mean (balanced).
        let mean = |p: &[u64]| p.iter().sum::<u64>() as f64 / p.len().max(1) as f64;
        let earlier = positions
            .iter()
            .filter(|(_, pb, pc)| mean(pb) < mean(pc))
            .count();
        let later = positions
            .iter()
            .filter(|(_, pb, pc)| mean(pb) > mean(pc))
            .count();
        if earlier == positions.len() || later == positions.len() {
            let who = if later == positions.len() {
                "candidate"
            } else {
                "baseline"
            };
            notes.push(format!(
                "the {who} ran first in every round: the order did not alternate"
            ));
        }
    }
}

/// Compare two receipts (see the module documentation for every check).
pub fn compare(
    baseline: &Path,
    candidate: &Path,
    cfg: &IntervalConfig,
) -> Result<Comparison, CompareError> {
    let bc = check(baseline)?;
    let cc = check(candidate)?;
    require_two_measurements(baseline, &bc, candidate, &cc)?;
    let (b, b_rounds) = (bc.receipt, bc.rounds);
    let (c, c_rounds) = (cc.receipt, cc.rounds);

    let differences = like_with_like(&b, &c);
    if !differences.is_empty() {
        return Err(CompareError::Conditions(differences));
    }
    require_evidence(baseline, &b)?;
    require_evidence(candidate, &c)?;

    // Pool each round's blocks (ABBA runs a kernel twice per round) and match rounds by
    // number; validate guarantees every round 1..=rounds has at least one block.
    let pool = |r: &Receipt, files: &[Vec<f64>]| -> (Vec<u64>, Vec<Vec<f64>>, Vec<Vec<u64>>) {
        let mut numbers: Vec<u64> = r.measurement.raw_samples.iter().map(|x| x.round).collect();
        numbers.sort_unstable();
        numbers.dedup();
        let mut pooled = Vec::with_capacity(numbers.len());
        let mut positions = Vec::with_capacity(numbers.len());
        for n in &numbers {
            let mut samples = Vec::new();
            let mut pos = Vec::new();
            for (i, raw) in r.measurement.raw_samples.iter().enumerate() {
                if raw.round == *n {
                    samples.extend_from_slice(&files[i]);
                    pos.push(raw.position);
                }
            }
            pooled.push(samples);
            positions.push(pos);
        }
        (numbers, pooled, positions)
    };
    let (bn, b_sorted, bpos) = pool(&b, &b_rounds);
    let (cn, c_sorted, cpos) = pool(&c, &c_rounds);
    if bn != cn {
        return Err(CompareError::Rounds {
            baseline: bn,
            candidate: cn,
        });
    }
    let analysis = analyze_speedup(&b_sorted, &c_sorted, cfg)?;
    check_stated_ratio(baseline, &b, candidate, &c, analysis.ratio)?;
    let positions: Vec<(u64, Vec<u64>, Vec<u64>)> = bn
        .iter()
        .zip(bpos)
        .zip(cpos)
        .map(|((r, pb), pc)| (*r, pb, pc))
        .collect();
    let mut notes = Vec::new();
    order_notes(&b, &c, &positions, &mut notes);
    environment_notes(&b, &c, &mut notes);
    notes_for("baseline", &b, &mut notes);
    notes_for("candidate", &c, &mut notes);
    let k = bn.len() as u64;
    if bn.iter().copied().ne(1..=k) {
        notes.push(format!(
            "the round table numbers rounds 1 to {k}; the receipts number them {bn:?}"
        ));
    }
    // The analysis's own note (few rounds) is printed with the analysis, not again here.

    let (bname, cname) = names(baseline, &b, candidate, &c);
    let side = |path: &Path,
                r: &Receipt,
                name: String,
                rounds: &[Vec<f64>],
                numbers: Vec<u64>,
                medians: &[f64]|
     -> Result<SideSummary, CompareError> {
        let all: Vec<f64> = rounds.iter().flatten().copied().collect();
        // Samples are parsed finite and positive, so the summary exists.
        let all_samples = Summary::of(&all).ok_or(StatsError::NoRounds)?;
        Ok(SideSummary {
            receipt: path.display().to_string(),
            name,
            claim: r.claim.clone(),
            correctness: correctness_line(r),
            median_us: all_samples.median,
            all_samples,
            rounds: numbers,
            round_medians_us: medians.to_vec(),
        })
    };
    let baseline_side = side(
        baseline,
        &b,
        bname,
        &b_sorted,
        bn,
        &analysis.baseline_round_medians,
    )?;
    let candidate_side = side(
        candidate,
        &c,
        cname,
        &c_sorted,
        cn,
        &analysis.candidate_round_medians,
    )?;
    Ok(Comparison {
        baseline: baseline_side,
        candidate: candidate_side,
        quantiles: QUANTILE_RULE.to_string(),
        ratio: analysis.ratio,
        analysis,
        notes,
        resolution: None,
    })
}
