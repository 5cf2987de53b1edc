//! The bound statement (seed 000): what limits one measured launch, filled from profiler
//! counters, and the address model's predictions set beside the measured counters.
//!
//! This module holds no tool code: the caller reads Nsight Compute's report into
//! [`Measured`] and this module decides the limiter, compares counters with the model
//! under declared tolerances, and writes the statement. The record types serialize to
//! `profile.json` (`klab-profile/1`), which `klab report` reads.

use serde::{Deserialize, Serialize};

use crate::predict::{AccessKind, Space, VariantPrediction};

/// Schema tag of `profile.json`.
pub const PROFILE_SCHEMA: &str = "klab-profile/1";

/// Seed 001's reading of SpeedOfLight: a unit at or above this share of its peak is the
/// limiter.
pub const LIMITER_PCT: f64 = 60.0;
/// Below this share for both memory and compute, the launch is latency- or
/// occupancy-bound rather than throughput-bound (seed 001).
pub const IDLE_PCT: f64 = 30.0;

/// Counters read from one profiled launch. `None`: the report does not have the metric
/// (not collected, not available on this GPU, or "no data").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub duration_ns: Option<f64>,
    /// `dram__throughput.avg.pct_of_peak_sustained_elapsed`.
    pub dram_pct: Option<f64>,
    /// `sm__throughput.avg.pct_of_peak_sustained_elapsed` (SpeedOfLight's compute).
    pub compute_pct: Option<f64>,
    /// `gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed` (the busiest
    /// memory unit).
    pub memory_pct: Option<f64>,
    /// `l1tex__throughput.avg.pct_of_peak_sustained_active`.
    pub l1tex_pct: Option<f64>,
    /// `lts__throughput.avg.pct_of_peak_sustained_elapsed` (L2).
    pub l2_pct: Option<f64>,
    pub dram_bytes_read: Option<f64>,
    pub dram_bytes_write: Option<f64>,
    /// DRAM bytes read and written: the two above summed, else `dram__bytes.sum` where the
    /// report holds only the total (the reader of the report decides, by its table of
    /// other names). Absent from records written before it existed.
    #[serde(default)]
    pub dram_bytes: Option<f64>,
    pub global_load_sectors: Option<f64>,
    pub global_load_requests: Option<f64>,
    pub global_store_sectors: Option<f64>,
    pub global_store_requests: Option<f64>,
    pub shared_load_conflicts: Option<f64>,
    pub shared_store_conflicts: Option<f64>,
    pub registers_per_thread: Option<f64>,
    /// SASS instructions executed for register spilling.
    pub spill_instructions: Option<f64>,
    pub static_shared_bytes: Option<f64>,
    /// `sm__maximum_warps_per_active_cycle_pct`.
    pub theoretical_occupancy_pct: Option<f64>,
    /// `sm__warps_active.avg.pct_of_peak_sustained_active`.
    pub achieved_occupancy_pct: Option<f64>,
    /// Blocks per SM allowed by each resource (`launch__occupancy_limit_*`), by name.
    pub occupancy_limits: Vec<(String, f64)>,
}

impl Measured {
    /// The resource that allows the fewest resident blocks, with that count. Ties name
    /// every tied resource.
    pub fn occupancy_limiter(&self) -> Option<(String, f64)> {
        let min = self
            .occupancy_limits
            .iter()
            .map(|(_, v)| *v)
            .fold(f64::INFINITY, f64::min);
        if !min.is_finite() {
            return None;
        }
        let names: Vec<&str> = self
            .occupancy_limits
            .iter()
            .filter(|(_, v)| *v == min)
            .map(|(n, _)| n.as_str())
            .collect();
        Some((names.join("+"), min))
    }
}

/// How a predicted and a measured value relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Agreement {
    Agrees,
    Disagrees,
    /// The model makes no prediction for this quantity.
    NotPredicted,
    /// The report does not have the counter.
    NotMeasured,
}

impl Agreement {
    pub fn label(self) -> &'static str {
        match self {
            Agreement::Agrees => "agrees",
            Agreement::Disagrees => "DISAGREES",
            Agreement::NotPredicted => "no prediction",
            Agreement::NotMeasured => "not measured",
        }
    }
}

/// One row of the predicted-vs-measured table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterRow {
    /// What is compared, e.g. "global store sectors/request".
    pub quantity: String,
    /// The Nsight Compute metric(s) behind the measured value.
    pub metric: String,
    pub predicted: Option<f64>,
    pub measured: Option<f64>,
    pub agreement: Agreement,
    /// The tolerance that decided `agreement`.
    pub tolerance: String,
}

/// Seed 000's bound statement, every line filled from data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundStatement {
    pub workload: String,
    pub correctness: String,
    pub observed_limiter: String,
    pub source_evidence: String,
    pub prediction: String,
    pub occupancy: String,
    pub registers: String,
    pub hypothesis: String,
}

impl BoundStatement {
    /// The statement as the seed writes it: one `Label: value` line each.
    pub fn render(&self) -> String {
        [
            ("Workload", &self.workload),
            ("Correctness", &self.correctness),
            ("Observed limiter", &self.observed_limiter),
            ("Source evidence", &self.source_evidence),
            ("Address-model prediction", &self.prediction),
            ("Occupancy", &self.occupancy),
            ("Registers and spills", &self.registers),
            ("Hypothesis", &self.hypothesis),
        ]
        .iter()
        .map(|(k, v)| format!("{k}: {v}\n"))
        .collect()
    }
}

/// One profiled kernel in `profile.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    /// Kernel name (built-in or manifest).
    pub kernel: String,
    /// Entry function.
    pub entry: String,
    pub operation: String,
    pub n: u64,
    /// A declared operation's shape (`rows=16384 cols=4096`), which replaces `n`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// Launches of the entry before the profiled one (validation + warmup).
    pub launch_skip: u64,
    /// The ncu argument vector.
    pub argv: Vec<String>,
    /// Paths relative to the profile folder.
    pub report: String,
    pub raw_csv: String,
    pub log: String,
    /// Mismatches in the profiled run (validation launch + the measured launch's output).
    pub mismatches: Option<u64>,
    pub measured: Measured,
    /// Metrics klab asked for that the report does not have (not available on this GPU
    /// or this ncu version), under their names or any other name ncu prints them under.
    #[serde(default)]
    pub absent_metrics: Vec<String>,
    pub counters: Vec<CounterRow>,
    pub bound: BoundStatement,
}

impl KernelProfile {
    /// `n = 4096`, or a declared operation's shape.
    pub fn size_label(&self) -> String {
        match &self.shape {
            Some(s) => s.clone(),
            None => format!("n = {}", self.n),
        }
    }
}

/// A kernel `klab profile` did not profile, and why (a failed or known-broken validation,
/// or a profiled launch whose output was wrong).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectedKernel {
    pub kernel: String,
    pub reason: String,
    /// The ncu log, relative to the profile folder.
    pub log: String,
    /// It hung under ncu and the watchdog killed it (said with the results, not only in
    /// the log).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hung: bool,
}

/// `profile.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRecord {
    pub schema: String,
    pub created_utc: String,
    pub ncu_version: Option<String>,
    pub device: Option<String>,
    /// Always `none`: klab never lets ncu change clocks.
    pub clock_control: String,
    pub cache_control: String,
    pub sections: Vec<String>,
    pub kernels: Vec<KernelProfile>,
    /// Kernels that were not profiled (gate failures), with the reason.
    #[serde(default)]
    pub rejected: Vec<RejectedKernel>,
}

/// Relative tolerance for sectors per request.
pub const SECTORS_REL_TOL: f64 = 0.05;
/// Relative tolerance for request counts.
pub const REQUESTS_REL_TOL: f64 = 0.01;
/// Relative tolerance for bank conflicts when the model predicts some.
pub const CONFLICTS_REL_TOL: f64 = 0.10;
/// When the model predicts no conflicts, "near zero" means at most this many conflicts
/// per predicted shared request. The model counts only address conflicts; on the H200
/// ncu also reports a few conflicts for conflict-free stores (0.06 per request for the
/// tiled kernel's row stores), which arbitration with concurrent accesses can cause. A
/// real conflict pattern adds at least one wavefront to every request it affects (a
/// 32-way one adds 31), so 0.1 per request still separates the two.
pub const CONFLICTS_ZERO_SHARE: f64 = 0.10;

struct Totals {
    requests: u64,
    units: u64,
}

fn totals(p: &VariantPrediction, space: Space, kind: AccessKind) -> Option<Totals> {
    let mut found = false;
    let mut t = Totals {
        requests: 0,
        units: 0,
    };
    for a in p
        .accesses
        .iter()
        .filter(|a| a.space == space && a.kind == kind)
    {
        found = true;
        t.requests += a.requests;
        t.units += match space {
            Space::Global => a.sectors.unwrap_or(0),
            Space::Shared => a.bank_conflicts.unwrap_or(0),
        };
    }
    found.then_some(t)
}

fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    }
}

fn row(
    quantity: &str,
    metric: &str,
    predicted: Option<f64>,
    measured: Option<f64>,
    tolerance: String,
    agrees: impl Fn(f64, f64) -> bool,
) -> CounterRow {
    let agreement = match (predicted, measured) {
        (None, _) => Agreement::NotPredicted,
        (_, None) => Agreement::NotMeasured,
        (Some(p), Some(m)) if agrees(p, m) => Agreement::Agrees,
        _ => Agreement::Disagrees,
    };
    CounterRow {
        quantity: quantity.to_string(),
        metric: metric.to_string(),
        predicted,
        measured,
        agreement,
        tolerance,
    }
}

fn within(p: f64, m: f64, rel: f64, abs: f64) -> bool {
    (m - p).abs() <= (rel * p.abs()).max(abs)
}

/// Relative tolerance of DRAM traffic against the useful bytes.
pub const DRAM_REL_TOL: f64 = 0.15;

/// DRAM traffic against the useful bytes the manifest declares (every byte the operation
/// must read or write, once): the prediction any kernel has, written before measuring.
/// More traffic means re-reads or write amplification; less, a working set served from L2
/// or writes still in L2 when the kernel ends (then the row disagrees: it informs, it is not
/// a gate).
pub fn dram_row(useful_bytes: u64, m: &Measured) -> CounterRow {
    row(
        "DRAM bytes (read + write) vs useful bytes",
        "dram__bytes_read.sum + dram__bytes_write.sum, or dram__bytes.sum",
        (useful_bytes > 0).then_some(useful_bytes as f64),
        m.dram_bytes,
        format!("+/-{:.0}%", DRAM_REL_TOL * 100.0),
        |p, m| within(p, m, DRAM_REL_TOL, 0.0),
    )
}

/// The predicted-vs-measured table. `prediction` is `None` for kernels the address model
/// does not describe (their rows say "no prediction" but still show what was measured).
pub fn compare(prediction: Option<&VariantPrediction>, m: &Measured) -> Vec<CounterRow> {
    let mut rows = Vec::new();
    for (kind, word, sectors, requests, s_metric, r_metric) in [
        (
            AccessKind::Load,
            "load",
            m.global_load_sectors,
            m.global_load_requests,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        ),
        (
            AccessKind::Store,
            "store",
            m.global_store_sectors,
            m.global_store_requests,
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
        ),
    ] {
        let t = prediction.and_then(|p| totals(p, Space::Global, kind));
        let p_spr = t
            .as_ref()
            .and_then(|t| ratio(Some(t.units as f64), Some(t.requests as f64)));
        rows.push(row(
            &format!("global {word} sectors/request"),
            &format!("{s_metric} / {r_metric}"),
            p_spr,
            ratio(sectors, requests),
            format!("+/-{:.0}% (min 0.1)", SECTORS_REL_TOL * 100.0),
            |p, m| within(p, m, SECTORS_REL_TOL, 0.1),
        ));
        rows.push(row(
            &format!("global {word} requests"),
            r_metric,
            t.as_ref().map(|t| t.requests as f64),
            requests,
            format!("+/-{:.0}%", REQUESTS_REL_TOL * 100.0),
            |p, m| within(p, m, REQUESTS_REL_TOL, 0.5),
        ));
    }
    for (kind, word, measured, metric) in [
        (
            AccessKind::Load,
            "load",
            m.shared_load_conflicts,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        ),
        (
            AccessKind::Store,
            "store",
            m.shared_store_conflicts,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        ),
    ] {
        // A kernel without shared accesses of this kind predicts zero conflicts.
        let t = prediction.map(|p| {
            totals(p, Space::Shared, kind).unwrap_or(Totals {
                requests: 0,
                units: 0,
            })
        });
        let zero_allowance = t
            .as_ref()
            .map(|t| (t.requests as f64 * CONFLICTS_ZERO_SHARE).max(0.0))
            .unwrap_or(0.0);
        rows.push(row(
            &format!("shared {word} bank conflicts"),
            metric,
            t.as_ref().map(|t| t.units as f64),
            measured,
            format!(
                "+/-{:.0}%; when 0 is predicted, at most {CONFLICTS_ZERO_SHARE} per shared request ({zero_allowance:.0})",
                CONFLICTS_REL_TOL * 100.0
            ),
            |p, m| {
                if p == 0.0 {
                    m <= zero_allowance
                } else {
                    within(p, m, CONFLICTS_REL_TOL, 0.0)
                }
            },
        ));
    }
    rows
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}%"))
        .unwrap_or_else(|| "n/a".into())
}

fn num(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if v.fract() == 0.0 && v.abs() < 1e15 => group(v as i64),
        Some(v) => format!("{v:.2}"),
    }
}

/// `16777216` -> `16,777,216`.
pub fn group(v: i64) -> String {
    let s = v.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// The limiter seed 001 reads off SpeedOfLight, with the numbers that decided it.
pub fn limiter(m: &Measured) -> String {
    let (Some(mem), Some(comp)) = (m.memory_pct.or(m.dram_pct), m.compute_pct) else {
        return format!(
            "not established: SpeedOfLight throughput missing (memory {}, compute {})",
            pct(m.memory_pct.or(m.dram_pct)),
            pct(m.compute_pct)
        );
    };
    let units = [
        ("DRAM", m.dram_pct),
        ("L1/TEX", m.l1tex_pct),
        ("L2", m.l2_pct),
    ];
    let busiest = units
        .iter()
        .filter_map(|(n, v)| v.map(|v| (*n, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    // SpeedOfLight's memory figure does not always include L2 (the H200 reports L2 above
    // it), so the busiest memory unit decides.
    // The unit is named only when its own figure is the one that decides.
    let (busiest, mem) = match busiest {
        Some((unit, v)) if v >= mem => (Some(unit), v),
        _ => (None, mem),
    };
    let numbers = format!(
        "busiest memory figure {mem:.1}% of peak (SpeedOfLight memory {}, DRAM {}, L1/TEX {}, L2 {}), compute (SM) {comp:.1}%",
        pct(m.memory_pct),
        pct(m.dram_pct),
        pct(m.l1tex_pct),
        pct(m.l2_pct)
    );
    if mem >= LIMITER_PCT && mem >= comp {
        match busiest {
            Some("DRAM") => format!("memory bandwidth (DRAM): {numbers}"),
            Some(unit) => format!("memory path in {unit}, not DRAM bandwidth: {numbers}"),
            None => format!("memory (SpeedOfLight memory throughput): {numbers}"),
        }
    } else if comp >= LIMITER_PCT {
        format!("compute: {numbers}")
    } else if mem < IDLE_PCT && comp < IDLE_PCT {
        format!("latency or too little parallel work (both below {IDLE_PCT:.0}%): {numbers}")
    } else {
        format!("not established (neither above {LIMITER_PCT:.0}%): {numbers}")
    }
}

/// What the kernel would need next, from the counters (rules documented inline).
pub fn hypothesis(m: &Measured, rows: &[CounterRow]) -> String {
    let get = |q: &str| {
        rows.iter()
            .find(|r| r.quantity == q)
            .and_then(|r| r.measured)
    };
    let ld = get("global load sectors/request");
    let st = get("global store sectors/request");
    let conflicts = get("shared load bank conflicts").unwrap_or(0.0)
        + get("shared store bank conflicts").unwrap_or(0.0);
    let requests = m.global_load_requests.unwrap_or(0.0) + m.global_store_requests.unwrap_or(0.0);
    // Scattered global accesses: more than twice the sectors of an aligned 4-byte warp.
    if let Some((dir, spr)) = [("stores", st), ("loads", ld)]
        .into_iter()
        .filter_map(|(d, v)| v.map(|v| (d, v)))
        .find(|(_, v)| *v > 8.0)
    {
        return format!(
            "global {dir} touch {spr:.1} sectors per request: make each warp's accesses adjacent (for a transpose, stage a tile in shared memory so both directions are)"
        );
    }
    // Shared-memory serialisation: more conflicts than a quarter of the global requests.
    if requests > 0.0 && conflicts > 0.25 * requests {
        return format!(
            "{} shared-memory bank conflicts: change the shared row stride (pad the tile) so column accesses hit distinct banks",
            num(Some(conflicts))
        );
    }
    if m.dram_pct.is_some_and(|d| d >= 80.0) {
        return "DRAM is near its ceiling: only moving fewer bytes can make this launch faster"
            .into();
    }
    "no counter here names the next change: read Warp State Statistics (stall reasons) before editing".into()
}

/// Fill the statement. `workload`, `correctness` and `evidence_file` come from the
/// caller (what ran, and where the report is).
pub fn statement(
    workload: String,
    correctness: String,
    evidence_file: &str,
    m: &Measured,
    rows: &[CounterRow],
) -> BoundStatement {
    let find = |q: &str| rows.iter().find(|r| r.quantity == q);
    let pair = |q: &str| {
        find(q)
            .map(|r| {
                format!(
                    "{} predicted {} measured {} ({})",
                    r.quantity,
                    num(r.predicted),
                    num(r.measured),
                    r.agreement.label()
                )
            })
            .unwrap_or_default()
    };
    let prediction = [
        pair("global load sectors/request"),
        pair("global store sectors/request"),
        pair("shared load bank conflicts"),
        pair("shared store bank conflicts"),
    ]
    .join("; ");
    let source_evidence = format!(
        "{evidence_file}: SpeedOfLight DRAM {} / compute {} / duration under the profiler {} ns (not a benchmark result); MemoryWorkloadAnalysis global sectors/request load {} store {}, shared bank conflicts load {} store {}",
        pct(m.dram_pct),
        pct(m.compute_pct),
        num(m.duration_ns),
        num(ratio(m.global_load_sectors, m.global_load_requests)),
        num(ratio(m.global_store_sectors, m.global_store_requests)),
        num(m.shared_load_conflicts),
        num(m.shared_store_conflicts),
    );
    let occupancy = match m.occupancy_limiter() {
        Some((name, blocks)) => format!(
            "theoretical {}, achieved {}; limiter: {name} ({blocks:.0} blocks per SM)",
            pct(m.theoretical_occupancy_pct),
            pct(m.achieved_occupancy_pct)
        ),
        None => format!(
            "theoretical {}, achieved {}; limiter not reported",
            pct(m.theoretical_occupancy_pct),
            pct(m.achieved_occupancy_pct)
        ),
    };
    let registers = format!(
        "{} registers/thread, {} spill instructions, {} B static shared",
        num(m.registers_per_thread),
        num(m.spill_instructions),
        num(m.static_shared_bytes)
    );
    BoundStatement {
        workload,
        correctness,
        observed_limiter: limiter(m),
        source_evidence,
        prediction,
        occupancy,
        registers,
        hypothesis: hypothesis(m, rows),
    }
}

/// The predicted-vs-measured table as text, one line per row, for every kernel.
pub fn render_table(kernels: &[KernelProfile]) -> String {
    let mut out = format!(
        "{:<10} {:<32} {:>14} {:>14}  {}\n",
        "kernel", "quantity", "predicted", "measured", "verdict"
    );
    for k in kernels {
        for r in &k.counters {
            out.push_str(&format!(
                "{:<10} {:<32} {:>14} {:>14}  {}\n",
                k.kernel,
                r.quantity,
                num(r.predicted),
                num(r.measured),
                r.agreement.label()
            ));
        }
    }
    out
}

/// The same table as CSV, every text field quoted where it must be (an imported launch's
/// name is a C++ signature with commas).
pub fn table_csv(kernels: &[KernelProfile]) -> String {
    use klab_core::csv::field;
    // `shape` is last: a declared operation's sizes (empty for the built-ins' n).
    let mut out =
        String::from("kernel,n,quantity,predicted,measured,agreement,metric,tolerance,shape\n");
    let f = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    for k in kernels {
        for r in &k.counters {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{}\n",
                field(&k.kernel),
                k.n,
                field(&r.quantity.to_string()),
                f(r.predicted),
                f(r.measured),
                field(r.agreement.label()),
                field(&r.metric),
                field(&r.tolerance),
                field(k.shape.as_deref().unwrap_or(""))
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::predict;
    use klab_spec::Variant;

    /// Counters of the naive kernel at N = 4096 as the H200 fixture reports them
    /// (ncu_raw_naive_metrics.csv); load counters were not in that capture.
    fn naive_h200() -> Measured {
        Measured {
            duration_ns: Some(279_200.0),
            dram_pct: Some(10.35),
            compute_pct: Some(24.0),
            memory_pct: Some(12.0),
            global_store_sectors: Some(16_777_216.0),
            global_store_requests: Some(524_288.0),
            shared_load_conflicts: Some(0.0),
            registers_per_thread: Some(20.0),
            occupancy_limits: vec![
                ("registers".into(), 10.0),
                ("warps".into(), 8.0),
                ("shared_mem".into(), 32.0),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn dram_traffic_is_predicted_by_the_useful_bytes() {
        let mut m = naive_h200();
        m.dram_bytes = Some(1.95e9);
        assert_eq!(dram_row(2_000_000_000, &m).agreement, Agreement::Agrees);
        // Twice the traffic (every input read twice, say) disagrees.
        m.dram_bytes = Some(3.95e9);
        assert_eq!(dram_row(2_000_000_000, &m).agreement, Agreement::Disagrees);
        m.dram_bytes = None;
        assert_eq!(
            dram_row(2_000_000_000, &m).agreement,
            Agreement::NotMeasured
        );
        assert_eq!(dram_row(0, &m).agreement, Agreement::NotPredicted);
    }

    #[test]
    fn naive_stores_agree_at_32_sectors_per_request() {
        let p = predict(Variant::Naive, 4096, 32, 8).unwrap();
        let rows = compare(Some(&p), &naive_h200());
        let st = rows
            .iter()
            .find(|r| r.quantity == "global store sectors/request")
            .unwrap();
        assert_eq!(st.predicted, Some(32.0));
        assert_eq!(st.measured, Some(32.0));
        assert_eq!(st.agreement, Agreement::Agrees);
        let ld = rows
            .iter()
            .find(|r| r.quantity == "global load sectors/request")
            .unwrap();
        assert_eq!(ld.predicted, Some(4.0));
        assert_eq!(ld.agreement, Agreement::NotMeasured);
        let sh = rows
            .iter()
            .find(|r| r.quantity == "shared load bank conflicts")
            .unwrap();
        assert_eq!(sh.predicted, Some(0.0));
        assert_eq!(sh.agreement, Agreement::Agrees);
    }

    #[test]
    fn tiled_conflicts_agree_and_a_wrong_count_disagrees() {
        let p = predict(Variant::Tiled, 4096, 32, 8).unwrap();
        // The H200 measured 16,488,054 (ncu_raw_tiled_bankconflicts.csv).
        let m = Measured {
            shared_load_conflicts: Some(16_488_054.0),
            shared_store_conflicts: Some(0.0),
            ..Default::default()
        };
        let rows = compare(Some(&p), &m);
        let ld = rows
            .iter()
            .find(|r| r.quantity == "shared load bank conflicts")
            .unwrap();
        assert_eq!(ld.predicted, Some(524_288.0 * 31.0));
        assert_eq!(ld.agreement, Agreement::Agrees);
        // Padded predicts zero: the tiled count must be flagged against it.
        let p = predict(Variant::Padded, 4096, 32, 8).unwrap();
        let rows = compare(Some(&p), &m);
        let ld = rows
            .iter()
            .find(|r| r.quantity == "shared load bank conflicts")
            .unwrap();
        assert_eq!(ld.predicted, Some(0.0));
        assert_eq!(ld.agreement, Agreement::Disagrees);
    }

    #[test]
    fn a_copy_measured_at_naive_sectors_disagrees() {
        let p = predict(Variant::Copy, 4096, 32, 8).unwrap();
        let rows = compare(Some(&p), &naive_h200());
        let st = rows
            .iter()
            .find(|r| r.quantity == "global store sectors/request")
            .unwrap();
        assert_eq!(st.predicted, Some(4.0));
        assert_eq!(st.agreement, Agreement::Disagrees);
    }

    #[test]
    fn without_a_model_rows_say_so_but_keep_the_measurement() {
        let rows = compare(None, &naive_h200());
        assert!(rows.iter().all(|r| r.agreement == Agreement::NotPredicted));
        assert_eq!(rows[2].measured, Some(32.0));
    }

    #[test]
    fn limiter_rules() {
        let mut m = naive_h200();
        assert!(limiter(&m).starts_with("latency"), "{}", limiter(&m));
        m.memory_pct = Some(92.9);
        m.dram_pct = Some(30.3);
        m.l1tex_pct = Some(96.7);
        m.l2_pct = Some(42.0);
        assert!(
            limiter(&m).starts_with("memory path in L1/TEX"),
            "{}",
            limiter(&m)
        );
        m.dram_pct = Some(97.0);
        assert!(limiter(&m).starts_with("memory bandwidth (DRAM)"));
        m.memory_pct = Some(45.0);
        m.dram_pct = Some(45.0);
        m.l1tex_pct = None;
        m.l2_pct = None;
        m.compute_pct = Some(70.0);
        assert!(limiter(&m).starts_with("compute"));
        m.compute_pct = Some(40.0);
        assert!(limiter(&m).starts_with("not established"));
        // The H200 copy kernel: SpeedOfLight memory 56.7% but L2 at 74.5%.
        m.memory_pct = Some(56.7);
        m.dram_pct = Some(56.7);
        m.l2_pct = Some(74.5);
        m.compute_pct = Some(26.4);
        assert!(
            limiter(&m).starts_with("memory path in L2"),
            "{}",
            limiter(&m)
        );
        // SpeedOfLight's memory figure above every unit read: no unit is named.
        let m2 = Measured {
            memory_pct: Some(92.9),
            dram_pct: Some(30.3),
            compute_pct: Some(24.7),
            ..Default::default()
        };
        assert!(
            limiter(&m2).starts_with("memory (SpeedOfLight memory throughput)"),
            "{}",
            limiter(&m2)
        );
        m.compute_pct = None;
        assert!(limiter(&m).contains("missing"));
    }

    #[test]
    fn hypotheses_follow_the_counters() {
        let p = predict(Variant::Naive, 4096, 32, 8).unwrap();
        let m = naive_h200();
        let h = hypothesis(&m, &compare(Some(&p), &m));
        assert!(h.contains("stage a tile"), "{h}");
        let m = Measured {
            global_load_sectors: Some(2_097_152.0),
            global_load_requests: Some(524_288.0),
            global_store_sectors: Some(2_097_152.0),
            global_store_requests: Some(524_288.0),
            shared_load_conflicts: Some(16_488_054.0),
            ..Default::default()
        };
        let p = predict(Variant::Tiled, 4096, 32, 8).unwrap();
        let h = hypothesis(&m, &compare(Some(&p), &m));
        assert!(h.contains("pad the tile"), "{h}");
        let m = Measured {
            shared_load_conflicts: Some(0.0),
            dram_pct: Some(85.0),
            ..m
        };
        let h = hypothesis(&m, &compare(Some(&p), &m));
        assert!(h.contains("near its ceiling"), "{h}");
    }

    #[test]
    fn occupancy_limiter_names_the_smallest_and_ties() {
        let m = naive_h200();
        assert_eq!(m.occupancy_limiter(), Some(("warps".into(), 8.0)));
        let m = Measured {
            occupancy_limits: vec![("warps".into(), 8.0), ("registers".into(), 8.0)],
            ..Default::default()
        };
        assert_eq!(m.occupancy_limiter().unwrap().0, "warps+registers");
        assert_eq!(Measured::default().occupancy_limiter(), None);
    }

    #[test]
    fn statement_has_every_line_filled() {
        let p = predict(Variant::Naive, 4096, 32, 8).unwrap();
        let m = naive_h200();
        let rows = compare(Some(&p), &m);
        let s = statement("w".into(), "c".into(), "naive.ncu-rep", &m, &rows);
        let text = s.render();
        assert_eq!(text.lines().count(), 8);
        assert!(text.contains("global store sectors/request predicted 32 measured 32 (agrees)"));
        assert!(
            text.contains("naive.ncu-rep: SpeedOfLight DRAM 10.3%")
                || text.contains("naive.ncu-rep: SpeedOfLight DRAM 10.4%")
        );
        assert!(text.contains("limiter: warps (8 blocks per SM)"));
        assert!(text.contains("20 registers/thread"));
    }

    #[test]
    fn grouping() {
        assert_eq!(group(16_777_216), "16,777,216");
        assert_eq!(group(0), "0");
        assert_eq!(group(-1234), "-1,234");
        assert_eq!(group(999), "999");
    }
}
