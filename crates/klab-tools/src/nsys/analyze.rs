//! What the rows say: findings, the per-kernel summary, and achieved rates.

use serde::Serialize;

use super::{gb_per_s, Finding, FindingKind, KernelLaunch, Span, TableState, Trace};

/// What the user said about the kernels, for achieved bandwidth.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    /// Bytes each kernel launch reads plus writes (`--bytes-moved`).
    pub bytes_moved: Option<u64>,
    /// The device's peak memory bandwidth, GB/s (`--peak-gbs`).
    pub peak_gbs: Option<f64>,
}

impl Rates {
    /// Achieved GB/s of a kernel that took `duration_ns`: `bytes_moved / duration_ns`.
    pub fn gb_s(&self, duration_ns: Option<u64>) -> Option<f64> {
        gb_per_s(self.bytes_moved?, duration_ns)
    }

    /// Achieved GB/s of a kernel at a (possibly fractional) duration such as a median.
    pub fn gb_s_at(&self, duration_ns: Option<f64>) -> Option<f64> {
        let d = duration_ns.filter(|d| *d > 0.0)?;
        Some(self.bytes_moved? as f64 / d)
    }

    /// `gb_s` as a percentage of `peak_gbs`.
    pub fn pct_of_peak(&self, gb_s: Option<f64>) -> Option<f64> {
        Some(gb_s? / self.peak_gbs? * 100.0)
    }
}

/// The median of a set of durations; `None` when empty. For an even count it is the mean
/// of the two middle values (so 4 launches of 96, 100, 104 and 120 µs give 102 µs).
pub fn median(values: &[u64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid] as f64
    } else {
        (v[mid - 1] as f64 + v[mid] as f64) / 2.0
    })
}

/// The launches of one kernel (same demangled name).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelSummary {
    pub name: String,
    /// All launches.
    pub launches: usize,
    /// Launches with a known duration; the statistics below are over these only.
    pub timed: usize,
    pub min_ns: Option<u64>,
    /// See [`median`]: the mean of the two middle values for an even count.
    pub median_ns: Option<f64>,
    pub max_ns: Option<u64>,
    /// Sum of the known durations.
    pub total_ns: u64,
}

/// One summary per kernel name, in order of each name's first launch.
pub fn summarize(kernels: &[KernelLaunch]) -> Vec<KernelSummary> {
    let mut groups: Vec<(&str, Vec<&KernelLaunch>)> = Vec::new();
    for k in kernels {
        match groups.iter_mut().find(|(n, _)| *n == k.name) {
            Some((_, v)) => v.push(k),
            None => groups.push((&k.name, vec![k])),
        }
    }
    groups
        .into_iter()
        .map(|(name, ks)| {
            let d: Vec<u64> = ks.iter().filter_map(|k| k.span.duration_ns).collect();
            KernelSummary {
                name: name.to_string(),
                launches: ks.len(),
                timed: d.len(),
                min_ns: d.iter().min().copied(),
                median_ns: median(&d),
                max_ns: d.iter().max().copied(),
                total_ns: d.iter().fold(0u64, |a, b| a.saturating_add(*b)),
            }
        })
        .collect()
}

/// `1 runtime API call` / `15 runtime API calls`.
fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Durations in a readable unit: `6.6 us`, `656.0 us`, `1.23 ms`.
fn human_ns(ns: u64) -> String {
    let ns = ns as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// The findings of a trace (see the module docs of `nsys`). In this order:
///
/// 1. API calls but no kernel rows (the kernel table missing or empty, not skipped):
///    `N runtime API calls and zero kernels: launches failed`.
/// 2. API calls that returned non-zero: `K API calls returned an error (first: NAME
///    returned CODE)`, the first by start time.
/// 3. Kernel, memcpy or memset rows without timestamps (start = end = 0), or that end
///    before they start: their durations are unknown and left out of the statistics.
/// 4. Copies took longer than kernels (sums of known durations).
pub fn findings(t: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    let no_kernel_rows = matches!(t.tables.kernel, TableState::Missing | TableState::Read(0));
    // Only launch calls make missing kernels a failure: a trace of copies alone is not one.
    if t.api.launches > 0 && no_kernel_rows {
        out.push(Finding {
            kind: FindingKind::LaunchesFailed,
            text: format!(
                "{} and zero kernels: launches failed",
                plural(t.api.count, "runtime API call", "runtime API calls")
            ),
        });
    }
    if let Some(first) = t.api.errors.first() {
        let n = t.api.errors.len() as u64;
        out.push(Finding {
            kind: FindingKind::ApiErrors,
            text: format!(
                "{} an error (first: {} returned {})",
                plural(n, "API call returned", "API calls returned"),
                first.name,
                first.return_value
            ),
        });
    }
    let kinds: [(&str, &str, Vec<Span>); 3] = [
        (
            "kernel launch",
            "kernel launches",
            t.kernels.iter().map(|k| k.span).collect(),
        ),
        (
            "memcpy row",
            "memcpy rows",
            t.memcpys.iter().map(|m| m.span).collect(),
        ),
        (
            "memset row",
            "memset rows",
            t.memsets.iter().map(|m| m.span).collect(),
        ),
    ];
    for (one, many, spans) in &kinds {
        let none = spans.iter().filter(|s| s.has_no_timestamps()).count() as u64;
        if none > 0 {
            out.push(Finding {
                kind: FindingKind::NoTimestamps,
                text: format!(
                    "{} of {} {} no timestamps (start = end = 0): duration unknown, left out of the statistics",
                    none,
                    plural(spans.len() as u64, one, many),
                    if none == 1 { "has" } else { "have" }
                ),
            });
        }
        let reversed = spans.iter().filter(|s| s.is_reversed()).count() as u64;
        if reversed > 0 {
            out.push(Finding {
                kind: FindingKind::ReversedTimestamps,
                text: format!(
                    "{} of {} {}: duration unknown, left out of the statistics",
                    reversed,
                    plural(spans.len() as u64, one, many),
                    if reversed == 1 {
                        "ends before it starts"
                    } else {
                        "end before they start"
                    }
                ),
            });
        }
    }
    let sum = |it: &mut dyn Iterator<Item = u64>| it.fold(0u64, |a, b| a.saturating_add(b));
    let kernel_ns = sum(&mut t.kernels.iter().filter_map(|k| k.span.duration_ns));
    let copy_ns = sum(&mut t.memcpys.iter().filter_map(|m| m.span.duration_ns));
    if kernel_ns > 0 && copy_ns > kernel_ns {
        out.push(Finding {
            kind: FindingKind::CopiesDominate,
            text: format!(
                "memory copies took {} in total, {:.1}x the {} of kernel time",
                human_ns(copy_ns),
                copy_ns as f64 / kernel_ns as f64,
                human_ns(kernel_ns)
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[7]), Some(7.0));
        assert_eq!(median(&[9, 1, 5]), Some(5.0));
        assert_eq!(median(&[120, 96, 104, 100]), Some(102.0));
        assert_eq!(median(&[1, 2]), Some(1.5));
    }

    #[test]
    fn rates_follow_bytes_over_nanoseconds() {
        let r = Rates {
            bytes_moved: Some(8_000_000),
            peak_gbs: Some(2039.0),
        };
        let g = r.gb_s(Some(6_560)).unwrap();
        assert!((g - 1219.512195).abs() < 1e-5, "{g}");
        let p = r.pct_of_peak(Some(g)).unwrap();
        assert!((p - 59.809328).abs() < 1e-5, "{p}");
        assert_eq!(r.gb_s(None), None);
        assert_eq!(r.gb_s(Some(0)), None);
        assert_eq!(Rates::default().gb_s(Some(10)), None);
        assert_eq!(r.gb_s_at(Some(102.0)).map(|g| g.round()), Some(78431.0));
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ns(999), "999 ns");
        assert_eq!(human_ns(6_560), "6.6 us");
        assert_eq!(human_ns(656_000), "656.0 us");
        assert_eq!(human_ns(1_234_567), "1.23 ms");
    }
}
