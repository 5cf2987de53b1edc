//! The lines the timing commands (`bench`, `triad`) print for a measured block: its check,
//! its timing and its integrity. Kernels, sessions and receipts are `klab-run`'s.

use klab_core::stats::{gb_per_s, Summary};
use klab_engine::timing::Measurement;
use klab_spec::rule::CheckOutcome;

/// Describe a check for stdout.
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

/// The block's integrity line: the floor, the checked and probe medians, and a flag.
pub fn integrity_line(round: u32, m: &Measurement) -> String {
    let us = |v: Option<f64>| {
        v.map(|x| format!("{x:.3}"))
            .unwrap_or_else(|| "none".into())
    };
    let probe = Summary::of(&m.probe_us).map(|s| s.median);
    let pair = Summary::of(&m.probe_invalidated_us).map(|s| s.median);
    format!(
        "round {round}: floor_us={} checked_median_us={} probe_median_us={} probe_invalidated_median_us={} verified_samples={} slots_per_sample={}{}",
        us(m.floor.as_ref().map(|f| f.us)),
        us(m.checked_median_us()),
        us(probe),
        us(pair),
        m.verified.len(),
        m.slots_per_sample,
        m.checked_flag().map(|f| format!(" FLAG: {f}")).unwrap_or_default()
    )
}

/// The standard stdout line for one measured block.
pub fn block_line(round: u32, m: &Measurement, useful_bytes: u64) -> String {
    match m.summary() {
        Some(s) => format!(
            "round {round}: p10_us={:.3} median_us={:.3} p90_us={:.3} useful_gb_s={:.1} slots={} warmup={} flags={}",
            s.p10,
            s.median,
            s.p90,
            gb_per_s(useful_bytes, s.median),
            m.slots,
            m.warmup_launches,
            if m.state.flags.is_empty() { "none".to_string() } else { m.state.flags.join("; ") }
        ),
        None => format!("round {round}: no samples"),
    }
}
