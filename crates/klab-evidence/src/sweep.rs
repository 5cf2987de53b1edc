//! Sweeps: kernels over axes of shapes and cache regimes, every point gated and timed.
//!
//! A [`SweepPlan`] is the product of its axes ([`Axis`]: the size `n`, the cache regime)
//! cut into [`Group`]s, one per axis point, each holding every kernel at that point: a
//! group is the unit of work (one GPU at a time, one SLURM array task), so that kernels
//! compared with each other are timed on the same GPU, in the same rounds. Running a group
//! gives a [`GroupRecord`] of [`PointRecord`]s, written by whoever ran it (a local worker,
//! a SLURM task) into `tasks/<group>/group.json`; collecting the folder gives the
//! [`SweepTable`]. [`run_on_devices`] spreads groups over GPUs, one group at a time per
//! GPU. [`sbatch_script`] is the job array that runs a plan's groups on a cluster.

use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use klab_core::samples::{Regime, Timer};
use klab_engine::timing::WarmupPolicy;

pub const PLAN_SCHEMA: &str = "klab.sweep-plan/1";
pub const GROUP_SCHEMA: &str = "klab.sweep-group/1";
pub const TABLE_SCHEMA: &str = "klab.sweep/1";

/// The plan's file in a sweep folder, and each task's folder and record under it.
pub const PLAN_FILE: &str = "sweep-plan.json";
pub const TASKS_DIR: &str = "tasks";
pub const GROUP_FILE: &str = "group.json";

/// At most this many values on one axis, and points in one sweep: a range typed wrong
/// (`1:100000000:+1`) is refused, not run for a week.
pub const MAX_AXIS_VALUES: usize = 4096;
pub const MAX_POINTS: usize = 20_000;

/// Why a sweep cannot be planned, read or collected. Each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("--axis {given}: {why}")]
    Axis { given: String, why: String },
    #[error("{}: {why}", .path.display())]
    File {
        path: std::path::PathBuf,
        why: String,
    },
    #[error("{0}")]
    Plan(String),
}

/// One axis: its name and values, in the order given (repeats dropped).
#[derive(Debug, Clone, PartialEq)]
pub enum Axis {
    /// A size variable's values. `n` is each kernel's one size variable, as `--n` sets
    /// it; any other name is a size variable of the kernels' operation (`--shape`).
    Size { var: String, values: Vec<u64> },
    /// The cache regime of the timing.
    Regime(Vec<Regime>),
}

/// The size axis that means each kernel's one size variable, whatever its name.
pub const ONE_SIZE: &str = "n";

impl Axis {
    pub fn name(&self) -> &str {
        match self {
            Axis::Size { var, .. } => var,
            Axis::Regime(_) => "regime",
        }
    }

    /// `n=...`, `VAR=...` (a size variable) or `regime=...`.
    pub fn parse(given: &str) -> Result<Axis, SweepError> {
        let bad = |why: String| SweepError::Axis {
            given: given.to_string(),
            why,
        };
        let (name, values) = given.split_once('=').ok_or_else(|| {
            bad("expected NAME=VALUES, e.g. n=1024:16384:x2 or n=4097,8193".into())
        })?;
        let name = name.trim();
        if name == "regime" {
            let mut out = Vec::new();
            for v in values.split(',') {
                let r: Regime = v.trim().parse().map_err(bad)?;
                if !out.contains(&r) {
                    out.push(r);
                }
            }
            return Ok(Axis::Regime(out));
        }
        let named = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !named {
            return Err(bad(format!(
                "'{name}' is not an axis: name n (the kernels' size), a size variable of their operation, or regime"
            )));
        }
        let values = parse_sizes(values).map_err(bad)?;
        Ok(Axis::Size {
            var: name.to_string(),
            values,
        })
    }
}

/// For clap, which names the option and the value itself: only the why.
impl FromStr for Axis {
    type Err = String;
    fn from_str(s: &str) -> Result<Axis, String> {
        Axis::parse(s).map_err(|e| match e {
            SweepError::Axis { why, .. } => why,
            other => other.to_string(),
        })
    }
}

/// Sizes: a comma-separated list of sizes and ranges. `LO:HI:xK` multiplies by K from LO
/// while at most HI; `LO:HI:+K` adds K.
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, String> {
    let mut out: Vec<u64> = Vec::new();
    let push = |v: u64, out: &mut Vec<u64>| -> Result<(), String> {
        if v == 0 {
            return Err("sizes must be at least 1".into());
        }
        if !out.contains(&v) {
            out.push(v);
        }
        if out.len() > MAX_AXIS_VALUES {
            return Err(format!("more than {MAX_AXIS_VALUES} values"));
        }
        Ok(())
    };
    let num = |s: &str| -> Result<u64, String> {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("'{}' is not a whole number", s.trim()))
    };
    for part in text.split(',') {
        let fields: Vec<&str> = part.split(':').collect();
        match fields[..] {
            [one] => push(num(one)?, &mut out)?,
            [lo, hi, step] => {
                let (lo, hi) = (num(lo)?, num(hi)?);
                if lo == 0 || lo > hi {
                    return Err(format!("range {part}: expected 1 <= LO <= HI"));
                }
                let step = step.trim();
                let (mul, by) = if let Some(k) = step.strip_prefix('x') {
                    (true, num(k)?)
                } else if let Some(k) = step.strip_prefix('+') {
                    (false, num(k)?)
                } else {
                    return Err(format!(
                        "range {part}: the step is xK (multiply) or +K (add)"
                    ));
                };
                if (mul && by < 2) || (!mul && by < 1) {
                    return Err(format!(
                        "range {part}: a step of x{by} or +{by} never reaches HI"
                    ));
                }
                let mut v = lo;
                while v <= hi {
                    push(v, &mut out)?;
                    let next = if mul {
                        v.checked_mul(by)
                    } else {
                        v.checked_add(by)
                    };
                    match next {
                        Some(n) => v = n,
                        None => break,
                    }
                }
            }
            _ => return Err(format!("'{part}': expected a size or LO:HI:xK or LO:HI:+K")),
        }
    }
    if out.is_empty() {
        return Err("no sizes".into());
    }
    Ok(out)
}

/// A sweep file (`--file sweep.toml`): the kernels, the axes and the timing options.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    pub kernels: Vec<String>,
    #[serde(default)]
    pub baseline: Option<String>,
    /// Rounds per point (0 or absent: one `klab bench` per kernel and point).
    #[serde(default)]
    pub rounds: Option<u32>,
    #[serde(default)]
    pub samples: Option<u32>,
    #[serde(default)]
    pub timer: Option<Timer>,
    #[serde(default)]
    pub warmup: Option<String>,
    pub axes: FileAxes,
}

/// The `[axes]` table: `n = "1024:16384:x2"` or `n = [4097, 8193]` (or a size variable
/// of the operation, `M = [...]`), and `regime = [...]`.
/// (Every other key is a size axis, so unknown names are refused by [`Axis::parse`] and the
/// plan, not by serde.)
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FileAxes {
    #[serde(default)]
    pub regime: Option<Vec<Regime>>,
    #[serde(flatten)]
    pub sizes: std::collections::BTreeMap<String, SizesValue>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum SizesValue {
    List(Vec<u64>),
    Text(String),
}

impl SweepFile {
    /// Read and check a sweep file.
    pub fn load(path: &Path) -> Result<SweepFile, SweepError> {
        let bytes = klab_core::artifact::read_regular(path, klab_core::artifact::Input::SWEEP_FILE)
            .map_err(|e| SweepError::File {
                path: path.to_path_buf(),
                why: e.to_string(),
            })?;
        let text = String::from_utf8(bytes).map_err(|_| SweepError::File {
            path: path.to_path_buf(),
            why: "not UTF-8 text".into(),
        })?;
        let file: SweepFile = toml::from_str(&text).map_err(|e| SweepError::File {
            path: path.to_path_buf(),
            why: format!("not a sweep file: {}", e.message()),
        })?;
        file.axes(path)?;
        Ok(file)
    }

    /// The file's axes.
    pub fn axes(&self, path: &Path) -> Result<Vec<Axis>, SweepError> {
        let bad = |why: String| SweepError::File {
            path: path.to_path_buf(),
            why,
        };
        let mut axes = Vec::new();
        for (var, v) in &self.axes.sizes {
            let text = match v {
                SizesValue::Text(t) => t.clone(),
                SizesValue::List(l) => l.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
            };
            let axis = Axis::parse(&format!("{var}={text}")).map_err(|e| match e {
                SweepError::Axis { why, .. } => bad(format!("axes.{var}: {why}")),
                other => other,
            })?;
            axes.push(axis);
        }
        if let Some(r) = &self.axes.regime {
            if r.is_empty() {
                return Err(bad("axes.regime names no regime".into()));
            }
            let mut seen = Vec::new();
            for x in r {
                if !seen.contains(x) {
                    seen.push(*x);
                }
            }
            axes.push(Axis::Regime(seen));
        }
        Ok(axes)
    }
}

/// One point of the axes: every kernel of the sweep is gated and timed there, together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    pub id: u32,
    /// A value per size axis: `{n: 4096}` (each kernel's one size variable) or a whole
    /// shape of the operation (`{K: 32, M: 64, N: 64}`).
    pub shape: std::collections::BTreeMap<String, u64>,
    /// The regimes its kernels are timed in, one after another (checked once for all).
    pub regimes: Vec<Regime>,
}

impl Group {
    /// `n=4096, same-buffer` or `K=32,M=64, same-buffer,l2-flushed`.
    pub fn describe(&self) -> String {
        let regimes: Vec<&str> = self.regimes.iter().map(|r| r.name()).collect();
        format!("{}, {}", self.shape_text(), regimes.join(","))
    }

    /// The one size when the sweep varies `n`, the size `--n` and `--sizes` take.
    pub fn one_size(&self) -> Option<u64> {
        (self.shape.len() == 1)
            .then(|| self.shape.get(ONE_SIZE).copied())
            .flatten()
    }

    /// `n=4096` or `K=32,M=64,N=64`, as `--shape` takes it.
    pub fn shape_text(&self) -> String {
        shape_text(&self.shape)
    }
}

/// `K=32,M=64,N=64`.
pub fn shape_text(shape: &std::collections::BTreeMap<String, u64>) -> String {
    shape
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A warmup policy in JSON as the text `--warmup` takes, read back strictly.
mod warmup_spec {
    use super::WarmupPolicy;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(w: &WarmupPolicy, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&w.spec())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<WarmupPolicy, D::Error> {
        let text = String::deserialize(d)?;
        WarmupPolicy::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// `--resolve` and `--budget` for each point's rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resolve {
    /// The half-width asked for, a fraction of the ratio.
    pub target: f64,
    pub budget_s: f64,
}

/// What a sweep runs: written to [`PLAN_FILE`] before any point, read by every task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepPlan {
    pub schema: String,
    pub created_utc: String,
    pub klab_version: String,
    /// Each kernel's full reference (a built-in name or `manifest.toml:name`) and its name.
    pub kernels: Vec<PlannedKernel>,
    /// The kernel every other is compared with at each point (by name).
    pub baseline: Option<String>,
    /// Rounds per point; 0: one `klab bench` per kernel and point.
    pub rounds: u32,
    /// With rounds: add rounds at each point until every ratio's interval is within this
    /// fraction of the ratio, or `budget_s` runs out (`klab rounds --resolve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve: Option<Resolve>,
    pub timer: Timer,
    pub samples: u32,
    #[serde(with = "warmup_spec")]
    pub warmup: WarmupPolicy,
    /// The watchdog of each check and each timed block, seconds.
    pub timeout_s: u64,
    pub axes: Vec<String>,
    pub groups: Vec<Group>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedKernel {
    pub spec: String,
    pub name: String,
}

impl SweepPlan {
    /// The groups of `axes`' product: one per shape, the size axes in the order given
    /// (the first outermost), each timed in every regime.
    pub fn groups_of(axes: &[Axis]) -> Result<Vec<Group>, SweepError> {
        let mut sizes: Vec<(&str, &Vec<u64>)> = Vec::new();
        let mut regimes: Option<&Vec<Regime>> = None;
        for a in axes {
            let twice = match a {
                Axis::Size { var, values } => {
                    let twice = sizes.iter().any(|(v, _)| v == var);
                    sizes.push((var, values));
                    twice
                }
                Axis::Regime(v) => regimes.replace(v).is_some(),
            };
            if twice {
                return Err(SweepError::Plan(format!(
                    "the axis {} is given twice; list all its values in one --axis",
                    a.name()
                )));
            }
        }
        if sizes.is_empty() {
            return Err(SweepError::Plan(
                "a sweep needs a size axis, e.g. --axis n=1024:16384:x2 (or one per size variable: --axis M=... --axis K=...)".into(),
            ));
        }
        if sizes.len() > 1 && sizes.iter().any(|(v, _)| *v == ONE_SIZE) {
            return Err(SweepError::Plan(
                "n is each kernel's one size variable; with several size axes, name the operation's variables instead".into(),
            ));
        }
        let default = vec![Regime::SameBuffer];
        let regimes = regimes.unwrap_or(&default);
        let mut shapes = vec![std::collections::BTreeMap::new()];
        for (var, values) in &sizes {
            shapes = shapes
                .into_iter()
                .flat_map(|s| {
                    values.iter().map(move |v| {
                        let mut s = s.clone();
                        s.insert(var.to_string(), *v);
                        s
                    })
                })
                .collect();
            if shapes.len() > MAX_POINTS {
                return Err(SweepError::Plan(format!(
                    "the size axes give more than {MAX_POINTS} shapes"
                )));
            }
        }
        Ok(shapes
            .into_iter()
            .enumerate()
            .map(|(id, shape)| Group {
                id: id as u32,
                shape,
                regimes: regimes.clone(),
            })
            .collect())
    }

    /// The axis points are drawn against: the first size axis.
    pub fn x_axis(&self) -> String {
        self.axes
            .iter()
            .find(|a| !a.starts_with("regime="))
            .and_then(|a| a.split_once('=').map(|(k, _)| k.to_string()))
            .unwrap_or_else(|| ONE_SIZE.to_string())
    }

    /// Read a plan (a sweep folder's [`PLAN_FILE`]).
    pub fn load(dir: &Path) -> Result<SweepPlan, SweepError> {
        let path = dir.join(PLAN_FILE);
        let bytes = klab_core::artifact::read_regular(&path, klab_core::artifact::Input::ARTIFACT)
            .map_err(|e| SweepError::File {
                path: path.clone(),
                why: format!("{e} (is this a klab sweep folder?)"),
            })?;
        let plan: SweepPlan = serde_json::from_slice(&bytes).map_err(|e| SweepError::File {
            path: path.clone(),
            why: format!("not a sweep plan: {e}"),
        })?;
        if plan.schema != PLAN_SCHEMA {
            return Err(SweepError::File {
                path,
                why: format!("schema '{}', expected {PLAN_SCHEMA}", plan.schema),
            });
        }
        for (i, g) in plan.groups.iter().enumerate() {
            if g.id as usize != i {
                return Err(SweepError::File {
                    path,
                    why: format!("group {i} has id {}", g.id),
                });
            }
        }
        Ok(plan)
    }

    /// The folder a group's task writes into, relative to the sweep folder.
    pub fn task_rel(group: u32) -> String {
        format!("{TASKS_DIR}/{group}")
    }
}

/// How a point ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PointStatus {
    /// Checked at its shape, timed, receipt written.
    Passed,
    /// The check at its shape failed (a mismatch, a known-broken kernel, a hang).
    CheckFailed,
    /// A timed block's own validations failed.
    TimingFailed,
    /// It could not run (no device, a tool that broke): no verdict on the kernel.
    Error,
    /// Its task never wrote a record (killed, never scheduled).
    NotRun,
}

impl PointStatus {
    pub fn name(self) -> &'static str {
        match self {
            PointStatus::Passed => "passed",
            PointStatus::CheckFailed => "check-failed",
            PointStatus::TimingFailed => "timing-failed",
            PointStatus::Error => "error",
            PointStatus::NotRun => "not-run",
        }
    }

    /// A gate's verdict on the kernel (exit 2), as against a point that could not run.
    pub fn is_gate_failure(self) -> bool {
        matches!(self, PointStatus::CheckFailed | PointStatus::TimingFailed)
    }
}

/// One kernel at one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointRecord {
    pub group: u32,
    pub kernel: String,
    /// The group's shape ([`Group::shape`]).
    pub shape: std::collections::BTreeMap<String, u64>,
    pub regime: Regime,
    pub status: PointStatus,
    pub detail: String,
    /// The CUDA ordinal the task used, and the GPU's UUID from the receipt.
    pub device: u32,
    pub gpu_uuid: Option<String>,
    pub median_us: Option<f64>,
    pub gb_s: Option<f64>,
    /// Against the fastest copy kernel timed at the same point (in the same rounds, under
    /// rounds).
    pub pct_of_ceiling: Option<f64>,
    pub ceiling_gb_s: Option<f64>,
    pub pct_of_peak: Option<f64>,
    pub theoretical_peak_gb_s: Option<f64>,
    /// Baseline median / this kernel's median: the round-level ratio and its interval
    /// under rounds, the ratio of the two receipts' medians without.
    pub ratio_to_baseline: Option<f64>,
    pub ratio_interval: Option<[f64; 2]>,
    /// The receipt, relative to the sweep folder.
    pub receipt: Option<String>,
}

impl PointRecord {
    /// A point with a status and no measurement (yet).
    pub fn unmeasured(
        g: &Group,
        kernel: &str,
        regime: Regime,
        device: u32,
        status: PointStatus,
        detail: String,
    ) -> PointRecord {
        PointRecord {
            group: g.id,
            kernel: kernel.to_string(),
            shape: g.shape.clone(),
            regime,
            status,
            detail,
            device,
            gpu_uuid: None,
            median_us: None,
            gb_s: None,
            pct_of_ceiling: None,
            ceiling_gb_s: None,
            pct_of_peak: None,
            theoretical_peak_gb_s: None,
            ratio_to_baseline: None,
            ratio_interval: None,
            receipt: None,
        }
    }
}

/// A group's points timed by one bench each (no rounds): the ceiling is the fastest of the
/// `copies` that passed, and the ratio to `baseline` is the ratio of the two receipts'
/// medians, with no interval (that takes rounds).
pub fn place_benched(points: &mut [PointRecord], copies: &[String], baseline: Option<&str>) {
    let passed = |p: &PointRecord| p.status == PointStatus::Passed;
    let ceiling = points
        .iter()
        .filter(|p| passed(p) && copies.contains(&p.kernel))
        .filter_map(|p| p.gb_s)
        .filter(|g| *g > 0.0)
        .reduce(f64::max);
    let base = baseline.and_then(|b| {
        points
            .iter()
            .find(|p| passed(p) && p.kernel == b)
            .and_then(|p| p.median_us)
    });
    for p in points.iter_mut().filter(|p| passed(p)) {
        if let Some(c) = ceiling {
            p.ceiling_gb_s = Some(c);
            p.pct_of_ceiling = p.gb_s.map(|g| 100.0 * g / c);
        }
        if Some(p.kernel.as_str()) != baseline {
            p.ratio_to_baseline = base.zip(p.median_us).map(|(b, m)| b / m);
        }
    }
}

/// A group's record: what ran where and when (seconds since the Unix epoch, the host's
/// clock), and its points in the plan's kernel order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupRecord {
    pub schema: String,
    pub group: Group,
    pub host: String,
    pub device: u32,
    pub started_unix_s: f64,
    pub ended_unix_s: f64,
    /// Each timed block's span on the GPU, for showing that none overlapped on one GPU.
    pub timed_spans: Vec<TimedSpan>,
    pub points: Vec<PointRecord>,
}

impl GroupRecord {
    /// Why this record is not one that a task of `plan` writes for `group`, if it is not:
    /// a point of another group, shape or regime, a kernel the plan does not have, or a
    /// kernel and regime given twice. A record is a file in a shared folder; what the table
    /// merges must be the plan's.
    pub fn problem_against(&self, plan: &SweepPlan, group: &Group) -> Option<String> {
        if self.group != *group {
            return Some(format!("not the record of group {} of this plan", group.id));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, p) in self.points.iter().enumerate() {
            let at = format!("points[{i}]");
            if p.group != group.id || p.shape != group.shape || !group.regimes.contains(&p.regime) {
                return Some(format!(
                    "{at} is of group {} at {:?} {}, not of group {} ({})",
                    p.group,
                    p.shape,
                    p.regime,
                    group.id,
                    group.describe()
                ));
            }
            if !plan.kernels.iter().any(|k| k.name == p.kernel) {
                return Some(format!(
                    "{at} names kernel '{}', which the plan does not have",
                    klab_core::text::one_line(&p.kernel)
                ));
            }
            if !seen.insert((p.kernel.as_str(), p.regime.name())) {
                return Some(format!(
                    "{at} gives kernel '{}' in {} a second time",
                    p.kernel, p.regime
                ));
            }
        }
        None
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedSpan {
    pub what: String,
    pub gpu_uuid: Option<String>,
    pub device: u32,
    pub started_unix_s: f64,
    pub ended_unix_s: f64,
}

/// A task that left no usable record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskProblem {
    pub group: u32,
    pub why: String,
}

/// The collected sweep: every point of the plan (those of missing tasks as not run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepTable {
    pub schema: String,
    pub plan: SweepPlan,
    pub points: Vec<PointRecord>,
    pub tasks: Vec<TaskSummary>,
    pub task_problems: Vec<TaskProblem>,
}

/// Where and when a task ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSummary {
    pub group: u32,
    pub host: String,
    pub device: u32,
    pub started_unix_s: f64,
    pub ended_unix_s: f64,
    pub timed_spans: Vec<TimedSpan>,
}

impl SweepTable {
    /// Exit status: 1 when a point could not run or a task is missing, else 2 when a gate
    /// failed, else 0.
    pub fn exit_code(&self) -> u8 {
        if !self.task_problems.is_empty()
            || self
                .points
                .iter()
                .any(|p| matches!(p.status, PointStatus::Error | PointStatus::NotRun))
        {
            1
        } else if self.points.iter().any(|p| p.status.is_gate_failure()) {
            2
        } else {
            0
        }
    }

    /// Pairs of timed spans on one GPU that overlap (there must be none).
    pub fn overlapping_spans(&self) -> Vec<(TimedSpan, TimedSpan)> {
        let mut spans: Vec<&TimedSpan> = self.tasks.iter().flat_map(|t| &t.timed_spans).collect();
        spans.sort_by(|a, b| a.started_unix_s.total_cmp(&b.started_unix_s));
        let key = |s: &TimedSpan| {
            s.gpu_uuid
                .clone()
                .unwrap_or_else(|| format!("device {}", s.device))
        };
        let mut out = Vec::new();
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                if key(a) == key(b) && b.started_unix_s < a.ended_unix_s {
                    out.push(((*a).clone(), (*b).clone()));
                }
            }
        }
        out
    }
}

/// The CSV of the points, one row each (the table's columns, empty where absent).
pub fn points_csv(points: &[PointRecord]) -> String {
    let mut s = String::from(
        "group,kernel,shape,regime,status,device,gpu_uuid,median_us,gb_s,pct_of_ceiling,pct_of_peak,ratio_to_baseline,ratio_low,ratio_high,receipt,detail\n",
    );
    let f = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_default();
    for p in points {
        let [lo, hi] = p
            .ratio_interval
            .map(|[a, b]| [Some(a), Some(b)])
            .unwrap_or([None, None]);
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            p.group,
            klab_core::csv::field(&p.kernel),
            klab_core::csv::field(&shape_text(&p.shape)),
            p.regime,
            p.status.name(),
            p.device,
            klab_core::csv::field(p.gpu_uuid.as_deref().unwrap_or("")),
            f(p.median_us, 3),
            f(p.gb_s, 1),
            f(p.pct_of_ceiling, 1),
            f(p.pct_of_peak, 1),
            f(p.ratio_to_baseline, 4),
            f(lo, 4),
            f(hi, 4),
            klab_core::csv::field(p.receipt.as_deref().unwrap_or("")),
            klab_core::csv::field(&p.detail),
        ));
    }
    s
}

/// Run every group on one of `devices`: one worker per device, each taking the next group
/// not yet started, so a GPU runs one group at a time and the GPUs run at once. Results in
/// group order.
pub fn run_on_devices<G, R, F>(devices: &[u32], groups: &[G], run: F) -> Vec<R>
where
    G: Sync,
    R: Send,
    F: Fn(u32, &G) -> R + Sync,
{
    klab_core::par::map_workers(devices, groups, |&d, g| run(d, g))
}

/// `--devices`: `all` or a comma-separated list of CUDA ordinals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceList {
    All,
    Ordinals(Vec<u32>),
}

impl FromStr for DeviceList {
    type Err = String;
    fn from_str(s: &str) -> Result<DeviceList, String> {
        if s.trim() == "all" {
            return Ok(DeviceList::All);
        }
        let mut out = Vec::new();
        for part in s.split(',') {
            let d: u32 = part.trim().parse().map_err(|_| {
                format!(
                    "'{}' is not a CUDA device ordinal (expected all or e.g. 0,1,3)",
                    part.trim()
                )
            })?;
            if out.contains(&d) {
                return Err(format!("device {d} is listed twice"));
            }
            out.push(d);
        }
        Ok(DeviceList::Ordinals(out))
    }
}

/// What the job array needs.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmJob<'a> {
    /// The klab binary the tasks run (on a path every node sees).
    pub klab: &'a Path,
    /// The sweep folder (on a shared path).
    pub dir: &'a Path,
    pub tasks: u32,
    pub partition: Option<&'a str>,
    /// `--gres`, e.g. `gpu:1`; None leaves it out (a cluster without GPU scheduling).
    pub gres: Option<&'a str>,
    /// The array task's time limit, minutes.
    pub time_limit_min: u64,
}

/// A value that goes into an `#SBATCH` line as one word (a partition, a `--gres`): letters,
/// digits and `_ - . : , + = / @ %`, so that it can neither end the line (a newline would
/// add directives, or a command that ends sbatch's reading of them) nor split into words.
pub fn slurm_word(s: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-.:,+=/@%".contains(c);
    match s.chars().find(|c| !allowed(*c)) {
        _ if s.is_empty() => Err("must not be empty".into()),
        Some(c) => Err(format!(
            "{c:?} cannot go into an #SBATCH line (letters, digits and _-.:,+=/@% only)"
        )),
        None => Ok(s.to_string()),
    }
}

/// The sbatch script of a job array with one task per group: task I runs `klab sweep task
/// DIR I`, its output in `tasks/I/`. A path with a control character (a newline would end
/// the `#SBATCH` line it is in) is refused, as are words [`slurm_word`] refuses.
pub fn sbatch_script(job: &SlurmJob<'_>) -> Result<String, String> {
    for (what, path) in [("the sweep folder", job.dir), ("the klab binary", job.klab)] {
        if path.display().to_string().chars().any(char::is_control) {
            return Err(format!(
                "{what}'s path {:?} has a control character, which cannot go into a job script",
                path.display().to_string()
            ));
        }
    }
    for (what, word) in [("--partition", job.partition), ("--gres", job.gres)] {
        if let Some(w) = word {
            slurm_word(w).map_err(|why| format!("{what} {w:?}: {why}"))?;
        }
    }
    let q = |p: &Path| klab_core::text::shell_quote(&p.display().to_string());
    let mut s = String::from(
        "#!/bin/bash\n# Written by klab sweep: one array task per point of the sweep's axes.\n",
    );
    s.push_str("#SBATCH --job-name=klab-sweep\n");
    s.push_str(&format!(
        "#SBATCH --array=0-{}\n",
        job.tasks.saturating_sub(1)
    ));
    s.push_str(&format!(
        "#SBATCH --output={}/{TASKS_DIR}/%a/slurm-%A_%a.out\n",
        job.dir.display()
    ));
    s.push_str("#SBATCH --ntasks=1\n");
    if let Some(g) = job.gres {
        s.push_str(&format!("#SBATCH --gres={g}\n"));
    }
    if let Some(p) = job.partition {
        s.push_str(&format!("#SBATCH --partition={p}\n"));
    }
    s.push_str(&format!("#SBATCH --time={}\n", job.time_limit_min.max(1)));
    s.push_str("set -u\n");
    s.push_str(&format!(
        "exec {} sweep task {} \"$SLURM_ARRAY_TASK_ID\"\n",
        q(job.klab),
        q(job.dir)
    ));
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_lists_and_ranges() {
        assert_eq!(
            parse_sizes("1024:16384:x2").unwrap(),
            vec![1024, 2048, 4096, 8192, 16384]
        );
        assert_eq!(parse_sizes("4097, 8193").unwrap(), vec![4097, 8193]);
        assert_eq!(parse_sizes("1:10:+4,9,5").unwrap(), vec![1, 5, 9]);
        assert_eq!(parse_sizes("3:3:x2").unwrap(), vec![3]);
        for (bad, says) in [
            ("", "not a whole number"),
            ("0", "at least 1"),
            ("8:4:x2", "LO <= HI"),
            ("1:8:x1", "never reaches"),
            ("1:8:*2", "xK (multiply) or +K"),
            ("1:2", "expected a size"),
            ("1:100000:+1", "more than 4096"),
            ("-3", "not a whole number"),
        ] {
            let e = parse_sizes(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // A range near u64::MAX ends instead of overflowing.
        let top = parse_sizes(&format!("{}:{}:x2", u64::MAX / 2, u64::MAX)).unwrap();
        assert_eq!(top.len(), 2);
    }

    #[test]
    fn axes_multiply_into_groups() {
        let axes = [
            Axis::parse("n=4096,8193").unwrap(),
            Axis::parse("regime=same-buffer,l2-flushed,same-buffer").unwrap(),
        ];
        let g = SweepPlan::groups_of(&axes).unwrap();
        // One group per shape, timed in each regime (checked once).
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].id, 1);
        assert_eq!(g[1].one_size(), Some(8193));
        assert_eq!(g[1].regimes, [Regime::SameBuffer, Regime::L2Flushed]);
        assert_eq!(g[1].describe(), "n=8193, same-buffer,l2-flushed");
        assert_eq!(g[1].shape_text(), "n=8193");
        // Size variables of an operation: their product, the first axis outermost.
        let gemm = [
            Axis::parse("M=64,128").unwrap(),
            Axis::parse("K=16,17,32").unwrap(),
        ];
        let g = SweepPlan::groups_of(&gemm).unwrap();
        assert_eq!(g.len(), 6);
        assert_eq!(g[1].shape_text(), "K=17,M=64");
        assert_eq!(g[3].shape_text(), "K=16,M=128");
        assert_eq!(g[3].one_size(), None);
        let mixed = [Axis::parse("n=4").unwrap(), Axis::parse("K=1").unwrap()];
        let e = SweepPlan::groups_of(&mixed).unwrap_err().to_string();
        assert!(e.contains("name the operation's variables"), "{e}");
        let e = Axis::parse("9k=1,2").unwrap_err().to_string();
        assert!(e.contains("'9k' is not an axis"), "{e}");
        assert!(Axis::parse("n")
            .unwrap_err()
            .to_string()
            .contains("NAME=VALUES"));
        assert!(Axis::parse("regime=cold").is_err());
        let twice = [Axis::parse("n=1").unwrap(), Axis::parse("n=2").unwrap()];
        assert!(SweepPlan::groups_of(&twice)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let none = [Axis::parse("regime=l2-flushed").unwrap()];
        assert!(SweepPlan::groups_of(&none)
            .unwrap_err()
            .to_string()
            .contains("needs a size axis"));
    }

    #[test]
    fn a_sweep_file_reads_and_refuses_unknown_fields() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.toml");
        std::fs::write(
            &p,
            "kernels = [\"copy\", \"naive\"]\nbaseline = \"naive\"\nrounds = 3\ntimer = \"batch:10\"\n[axes]\nn = \"32:128:x2\"\nregime = [\"same-buffer\", \"l2-flushed\"]\n",
        )
        .unwrap();
        let f = SweepFile::load(&p).unwrap();
        let g = SweepPlan::groups_of(&f.axes(&p).unwrap()).unwrap();
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].regimes.len(), 2);
        assert_eq!(f.timer, Some(Timer::Batch { launches: 10 }));
        std::fs::write(&p, "kernels = [\"copy\"]\nrepeat = 2\n[axes]\nn = [1, 2]\n").unwrap();
        let e = SweepFile::load(&p).unwrap_err().to_string();
        assert!(e.contains("unknown field `repeat`"), "{e}");
        std::fs::write(
            &p,
            "kernels = [\"g\"]\n[axes]\nM = [1, 2]\nK = \"16:32:x2\"\n",
        )
        .unwrap();
        let f = SweepFile::load(&p).unwrap();
        let g = SweepPlan::groups_of(&f.axes(&p).unwrap()).unwrap();
        assert_eq!(g.len(), 4);
        std::fs::write(&p, "kernels = [\"g\"]\n[axes]\n\"9x\" = [1]\n").unwrap();
        let e = SweepFile::load(&p).unwrap_err().to_string();
        assert!(e.contains("axes.9x"), "{e}");
        std::fs::write(&p, "kernels = [\"copy\"]\n[axes]\nn = [0]\n").unwrap();
        assert!(SweepFile::load(&p)
            .unwrap_err()
            .to_string()
            .contains("at least 1"));
    }

    #[test]
    fn benched_points_take_the_fastest_copy_as_ceiling_and_the_medians_ratio() {
        let g = Group {
            id: 0,
            shape: [("n".to_string(), 4096)].into(),
            regimes: vec![Regime::SameBuffer],
        };
        let timed = |k: &str, us: f64, gb: f64| {
            let mut p = PointRecord::unmeasured(
                &g,
                k,
                Regime::SameBuffer,
                0,
                PointStatus::Passed,
                "bench".into(),
            );
            p.median_us = Some(us);
            p.gb_s = Some(gb);
            p
        };
        let mut failed_copy = timed("copy_fast", 1.0, 9999.0);
        failed_copy.status = PointStatus::TimingFailed;
        let mut points = vec![
            timed("copy", 50.0, 2000.0),
            timed("memcpy", 45.0, 2500.0),
            failed_copy,
            timed("sgeam", 60.0, 1500.0),
            timed("lean", 40.0, 2250.0),
        ];
        let copies = ["copy".to_string(), "memcpy".into(), "copy_fast".into()];
        place_benched(&mut points, &copies, Some("sgeam"));
        // The failed copy's rate is no ceiling.
        assert_eq!(points[4].ceiling_gb_s, Some(2500.0));
        assert_eq!(points[4].pct_of_ceiling, Some(90.0));
        assert_eq!(points[4].ratio_to_baseline, Some(1.5));
        assert_eq!(points[4].ratio_interval, None);
        assert_eq!(points[3].ratio_to_baseline, None, "the baseline itself");
        assert_eq!(
            points[2].pct_of_ceiling, None,
            "a failed point gets no numbers"
        );
        // No copy and no baseline timed: nothing is made up.
        let mut alone = vec![timed("lean", 40.0, 2250.0)];
        place_benched(&mut alone, &copies, Some("sgeam"));
        assert_eq!(
            (alone[0].pct_of_ceiling, alone[0].ratio_to_baseline),
            (None, None)
        );
    }

    #[test]
    fn device_lists_parse() {
        assert_eq!("all".parse::<DeviceList>().unwrap(), DeviceList::All);
        assert_eq!(
            "0, 1,3".parse::<DeviceList>().unwrap(),
            DeviceList::Ordinals(vec![0, 1, 3])
        );
        assert!("0,0".parse::<DeviceList>().unwrap_err().contains("twice"));
        assert!("gpu0".parse::<DeviceList>().is_err());
    }

    /// Fake GPUs: every device runs one group at a time, and the devices run at once.
    #[test]
    fn groups_spread_over_devices_one_at_a_time_per_device() {
        use std::sync::Mutex;
        let groups: Vec<u32> = (0..9).collect();
        let running: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        let most_at_once = std::sync::atomic::AtomicUsize::new(0);
        let out = run_on_devices(&[0, 1, 3], &groups, |d, &g| {
            {
                let mut r = running.lock().unwrap();
                assert!(!r.contains(&d), "device {d} ran two groups at once");
                r.push(d);
                most_at_once.fetch_max(r.len(), std::sync::atomic::Ordering::SeqCst);
            }
            std::thread::sleep(std::time::Duration::from_millis(15));
            running.lock().unwrap().retain(|&x| x != d);
            (g, d)
        });
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), groups);
        assert!(out.iter().all(|x| [0, 1, 3].contains(&x.1)));
        assert!(most_at_once.load(std::sync::atomic::Ordering::SeqCst) >= 2);
        assert!(run_on_devices(&[], &groups, |d, _| d).is_empty());
    }

    fn span(uuid: &str, a: f64, b: f64) -> TimedSpan {
        TimedSpan {
            what: "x".into(),
            gpu_uuid: Some(uuid.into()),
            device: 0,
            started_unix_s: a,
            ended_unix_s: b,
        }
    }

    #[test]
    fn overlapping_blocks_on_one_gpu_are_found() {
        let task = |spans: Vec<TimedSpan>| TaskSummary {
            group: 0,
            host: "h".into(),
            device: 0,
            started_unix_s: 0.0,
            ended_unix_s: 9.0,
            timed_spans: spans,
        };
        let mut t = SweepTable {
            schema: TABLE_SCHEMA.into(),
            plan: SweepPlan {
                schema: PLAN_SCHEMA.into(),
                created_utc: String::new(),
                klab_version: String::new(),
                kernels: Vec::new(),
                baseline: None,
                rounds: 0,
                resolve: None,
                timer: Timer::PerLaunch,
                samples: 10,
                warmup: WarmupPolicy::Count { launches: 20 },
                timeout_s: 1,
                axes: Vec::new(),
                groups: Vec::new(),
            },
            points: Vec::new(),
            tasks: vec![
                task(vec![span("A", 0.0, 1.0), span("B", 0.5, 1.5)]),
                task(vec![span("A", 1.0, 2.0)]),
            ],
            task_problems: Vec::new(),
        };
        assert!(t.overlapping_spans().is_empty());
        t.tasks[1].timed_spans.push(span("B", 1.2, 1.3));
        assert_eq!(t.overlapping_spans().len(), 1);
        let json = serde_json::to_string(&t).unwrap();
        let back: SweepTable = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn the_job_array_runs_one_task_per_group() {
        let s = sbatch_script(&SlurmJob {
            klab: Path::new("/shared/bin/klab"),
            dir: Path::new("/shared/sweeps/it's"),
            tasks: 12,
            partition: Some("gpu"),
            gres: Some("gpu:1"),
            time_limit_min: 30,
        })
        .unwrap();
        assert!(s.contains("#SBATCH --array=0-11\n"), "{s}");
        assert!(s.contains("#SBATCH --gres=gpu:1\n#SBATCH --partition=gpu\n"));
        assert!(s.contains("--output=/shared/sweeps/it's/tasks/%a/slurm-%A_%a.out"));
        assert!(s.ends_with(
            "exec '/shared/bin/klab' sweep task '/shared/sweeps/it'\\''s' \"$SLURM_ARRAY_TASK_ID\"\n"
        ));
        let none = sbatch_script(&SlurmJob {
            gres: None,
            partition: None,
            ..SlurmJob {
                klab: Path::new("k"),
                dir: Path::new("d"),
                tasks: 1,
                partition: None,
                gres: None,
                time_limit_min: 0,
            }
        })
        .unwrap();
        assert!(!none.contains("--gres") && !none.contains("--partition"));
        assert!(none.contains("--time=1\n"));
    }

    /// A value or path that would end its `#SBATCH` line, or split into words, is refused:
    /// a newline in `--partition` used to add directives and a command to the script.
    #[test]
    fn nothing_can_end_an_sbatch_line() {
        let job = |partition, gres, dir| SlurmJob {
            klab: Path::new("/k"),
            dir,
            tasks: 1,
            partition,
            gres,
            time_limit_min: 1,
        };
        let d = Path::new("/d");
        for (p, g) in [
            (Some("gpu\n#SBATCH --time=99999\necho injected"), None),
            (None, Some("a b")),
            (Some(""), None),
            (None, Some("gpu:1;rm")),
        ] {
            let e = sbatch_script(&job(p, g, d)).unwrap_err();
            assert!(
                e.contains("cannot go into an #SBATCH line") || e.contains("empty"),
                "{e}"
            );
        }
        let e = sbatch_script(&job(None, None, Path::new("/d\nx"))).unwrap_err();
        assert!(e.contains("control character"), "{e}");
        for ok in ["gpu", "gpu:h200:1", "a100-80g,h100", "debug_q"] {
            assert_eq!(slurm_word(ok).as_deref(), Ok(ok));
        }
    }
}
