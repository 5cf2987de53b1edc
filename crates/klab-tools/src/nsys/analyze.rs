//! What the rows say: findings, the per-kernel and per-direction summaries, wall-clock
//! time as a union of intervals, and achieved rates.

use std::collections::BTreeSet;

use serde::Serialize;

use super::{gb_per_s, Finding, FindingKind, KernelLaunch, Memcpy, Span, TableState, Trace};

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

/// The wall-clock time a set of rows covers: their `[start, end)` spans merged into sorted,
/// disjoint intervals. Time covered by several rows at once (copies on four streams, a
/// migration inside a kernel) counts once. Spans of unknown duration are left out, as in the
/// statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intervals {
    merged: Vec<(i64, i64)>,
}

impl Intervals {
    /// The union of the spans with a known, non-zero duration.
    pub fn of(spans: impl IntoIterator<Item = Span>) -> Intervals {
        let mut v: Vec<(i64, i64)> = spans
            .into_iter()
            .filter(|s| s.duration_ns.is_some_and(|d| d > 0))
            .map(|s| (s.start_ns, s.end_ns))
            .collect();
        v.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(v.len());
        for (start, end) in v {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        Intervals { merged }
    }

    /// Total time covered, ns. Saturates: a merged interval can span more than `i64::MAX`.
    pub fn ns(&self) -> u64 {
        self.merged
            .iter()
            .fold(0u64, |a, &(s, e)| a.saturating_add(length(s, e)))
    }

    /// Time covered by both `self` and `other`, ns.
    pub fn overlap_ns(&self, other: &Intervals) -> u64 {
        let (a, b) = (&self.merged, &other.merged);
        let (mut i, mut j, mut total) = (0, 0, 0u64);
        while i < a.len() && j < b.len() {
            let start = a[i].0.max(b[j].0);
            let end = a[i].1.min(b[j].1);
            if start < end {
                total = total.saturating_add(length(start, end));
            }
            // Drop whichever interval ends first; the other may overlap the next one.
            if a[i].1 <= b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        total
    }
}

/// `end - start` of a merged interval, which may not fit in an `i64`.
fn length(start: i64, end: i64) -> u64 {
    u64::try_from(i128::from(end) - i128::from(start)).unwrap_or(u64::MAX)
}

/// The copies of one direction (one `copyKind`), as nsys's `cuda_gpu_mem_time_sum` and
/// `cuda_gpu_mem_size_sum` reports give them, plus wall-clock time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopySummary {
    /// `copyKind`.
    pub copy_kind: i64,
    /// Its label, e.g. `Host-to-Device` or `Unified Device-to-Host`.
    pub direction: String,
    /// Unified-memory migrations (see [`Memcpy::is_unified`]).
    pub unified: bool,
    /// All rows.
    pub count: usize,
    /// Rows with a known duration; the time statistics below are over these only.
    pub timed: usize,
    /// Bytes of all rows.
    pub bytes: u64,
    /// Sum of the known durations: more than `wall_ns` when copies overlap.
    pub total_ns: u64,
    /// See [`median`].
    pub median_ns: Option<f64>,
    pub min_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Wall-clock time the copies cover ([`Intervals`]).
    pub wall_ns: u64,
    /// The part of `wall_ns` during which some kernel ran (on any device or stream).
    pub during_kernels_ns: u64,
}

/// One summary per copy direction, in `copyKind` order.
pub fn summarize_copies(memcpys: &[Memcpy], kernels: &[KernelLaunch]) -> Vec<CopySummary> {
    let kernel_time = Intervals::of(kernels.iter().map(|k| k.span));
    let kinds: BTreeSet<i64> = memcpys.iter().map(|m| m.copy_kind).collect();
    kinds
        .into_iter()
        .map(|kind| {
            let ms: Vec<&Memcpy> = memcpys.iter().filter(|m| m.copy_kind == kind).collect();
            let d: Vec<u64> = ms.iter().filter_map(|m| m.span.duration_ns).collect();
            let wall = Intervals::of(ms.iter().map(|m| m.span));
            CopySummary {
                copy_kind: kind,
                direction: ms[0].direction.clone(),
                unified: ms[0].is_unified(),
                count: ms.len(),
                timed: d.len(),
                bytes: ms.iter().fold(0u64, |a, m| a.saturating_add(m.bytes)),
                total_ns: d.iter().fold(0u64, |a, b| a.saturating_add(*b)),
                median_ns: median(&d),
                min_ns: d.iter().min().copied(),
                max_ns: d.iter().max().copied(),
                wall_ns: wall.ns(),
                during_kernels_ns: wall.overlap_ns(&kernel_time),
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

/// Byte counts in a readable unit (10^3 steps): `512 B`, `65.5 kB`, `1.05 MB`, `4.00 GB`.
fn human_bytes(b: u64) -> String {
    let f = b as f64;
    if f < 1e3 {
        format!("{b} B")
    } else if f < 1e6 {
        format!("{:.1} kB", f / 1e3)
    } else if f < 1e9 {
        format!("{:.2} MB", f / 1e6)
    } else {
        format!("{:.2} GB", f / 1e9)
    }
}

/// The findings of a trace (see the module docs of `nsys`). In this order:
///
/// 1. Kernel launch calls ([`ApiCalls::launches`](super::ApiCalls::launches): not host
///    callbacks, not graph launches) but no kernel rows (the kernel table missing or empty,
///    not skipped): `N runtime API calls and zero kernels: launches failed`.
/// 2. API calls that returned non-zero: `K API calls returned an error (first: NAME
///    returned CODE)`, the first by start time.
/// 3. Kernel, memcpy or memset rows without timestamps (start = end = 0), or that end
///    before they start: their durations are unknown and left out of the statistics.
/// 4. Copies (not unified-memory migrations) took more wall-clock time than kernels: the
///    union of the copies' spans against the union of the kernels', with the sum when
///    overlapping copies make it larger and the part of the copy time during kernels.
/// 5. Unified-memory migrations: how many, their bytes and wall-clock time, and how much of
///    it fell while kernels ran (demand paging inside kernel time, not extra time).
pub fn findings(t: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    let no_kernel_rows = matches!(t.tables.kernel, TableState::Missing | TableState::Read(0));
    // Only kernel launches make missing kernels a failure: a trace of copies, host callbacks
    // or graph launches alone is not one.
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
    out.extend(copies_dominate(t));
    out.extend(unified_memory(t));
    out
}

/// Finding 4 of [`findings`].
fn copies_dominate(t: &Trace) -> Option<Finding> {
    let kernel_time = Intervals::of(t.kernels.iter().map(|k| k.span));
    let copies: Vec<&Memcpy> = t.memcpys.iter().filter(|m| !m.is_unified()).collect();
    let copy_time = Intervals::of(copies.iter().map(|m| m.span));
    let (kernel_ns, wall_ns) = (kernel_time.ns(), copy_time.ns());
    if kernel_ns == 0 || wall_ns <= kernel_ns {
        return None;
    }
    let mut text = format!(
        "memory copies took {} of wall-clock time, {:.1}x the {} of kernel time",
        human_ns(wall_ns),
        wall_ns as f64 / kernel_ns as f64,
        human_ns(kernel_ns)
    );
    let summed = copies
        .iter()
        .filter_map(|m| m.span.duration_ns)
        .fold(0u64, |a, b| a.saturating_add(b));
    if summed > wall_ns {
        // A stream id is a process's: the same id in two processes is two streams.
        let streams: BTreeSet<(Option<i64>, i64, i64)> =
            copies.iter().map(|m| (m.pid, m.device, m.stream)).collect();
        let on = if streams.len() > 1 {
            format!(" over {} streams", streams.len())
        } else {
            String::new()
        };
        text.push_str(&format!(
            " (their durations sum to {}{on}: they overlap)",
            human_ns(summed)
        ));
    }
    let during = copy_time.overlap_ns(&kernel_time);
    if during > 0 {
        text.push_str(&format!("; {} of it while kernels ran", human_ns(during)));
    }
    Some(Finding {
        kind: FindingKind::CopiesDominate,
        text,
    })
}

/// Finding 5 of [`findings`].
fn unified_memory(t: &Trace) -> Option<Finding> {
    let migrations: Vec<CopySummary> = t.copy_summary().into_iter().filter(|c| c.unified).collect();
    if migrations.is_empty() {
        return None;
    }
    let ms: Vec<&Memcpy> = t.memcpys.iter().filter(|m| m.is_unified()).collect();
    let time = Intervals::of(ms.iter().map(|m| m.span));
    let wall_ns = time.ns();
    let during = time.overlap_ns(&Intervals::of(t.kernels.iter().map(|k| k.span)));
    let by_direction: Vec<String> = migrations
        .iter()
        .map(|c| {
            let d = c.direction.strip_prefix("Unified ").unwrap_or(&c.direction);
            format!("{} {d}", c.count)
        })
        .collect();
    let bytes = ms.iter().fold(0u64, |a, m| a.saturating_add(m.bytes));
    let mut text = format!(
        "{} ({}; {}) took {} of wall-clock time",
        plural(
            ms.len() as u64,
            "unified-memory migration",
            "unified-memory migrations"
        ),
        by_direction.join(", "),
        human_bytes(bytes),
        human_ns(wall_ns)
    );
    const PAGING: &str = "demand paging inside kernel time, not time added to it";
    if wall_ns == 0 {
        text.push_str(" (durations unknown)");
    } else if during == wall_ns {
        text.push_str(&format!(", all of it while kernels ran: {PAGING}"));
    } else if during > 0 {
        text.push_str(&format!(
            ": {} while kernels ran ({PAGING}), {} outside kernels",
            human_ns(during),
            human_ns(wall_ns - during)
        ));
    } else {
        text.push_str(", none of it while kernels ran");
    }
    Some(Finding {
        kind: FindingKind::UnifiedMemory,
        text,
    })
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

    fn span(start: i64, duration: i64) -> Span {
        Span::new(start, start + duration)
    }

    #[test]
    fn the_union_counts_overlapping_time_once() {
        // The example: one copy on each of four streams, staggered, 8.0 + 6.2 +
        // 7.0 + 5.0 = 26.2 ms summed; [0, 8.0) and [3.0, 9.2) cover 9.2 ms, [10.0, 17.0)
        // and [14.2, 19.2) another 9.2 ms: 18.4 ms of wall-clock time.
        let spans = [
            span(0, 8_000_000),
            span(3_000_000, 6_200_000),
            span(10_000_000, 7_000_000),
            span(14_200_000, 5_000_000),
        ];
        let summed: u64 = spans.iter().map(|s| s.duration_ns.unwrap()).sum();
        assert_eq!(summed, 26_200_000);
        assert_eq!(Intervals::of(spans).ns(), 18_400_000);
        // Order does not matter; nested and touching spans merge.
        let mut rev = spans;
        rev.reverse();
        assert_eq!(Intervals::of(rev).ns(), 18_400_000);
        assert_eq!(Intervals::of([span(0, 10), span(2, 3)]).ns(), 10);
        assert_eq!(Intervals::of([span(0, 10), span(10, 5)]).ns(), 15);
        assert_eq!(Intervals::of([]).ns(), 0);
        // Unknown durations are left out.
        let untimed = Span::new(0, 0);
        let reversed = Span::new(10, 5);
        assert_eq!(Intervals::of([untimed, reversed, span(100, 7)]).ns(), 7);
    }

    #[test]
    fn overlap_with_kernels_is_the_shared_time() {
        let kernels = Intervals::of([span(100, 100), span(300, 100)]); // [100,200) [300,400)
        let copies = Intervals::of([span(50, 100), span(180, 150), span(450, 10)]);
        // [50,150) shares 50; [180,330) shares 20 + 30; [450,460) none.
        assert_eq!(copies.overlap_ns(&kernels), 100);
        assert_eq!(kernels.overlap_ns(&copies), 100);
        // Entirely inside one kernel: all of it.
        let inside = Intervals::of([span(110, 10), span(150, 40)]);
        assert_eq!(inside.overlap_ns(&kernels), inside.ns());
        assert_eq!(Intervals::default().overlap_ns(&kernels), 0);
        // One long copy across both kernels.
        assert_eq!(Intervals::of([span(0, 1000)]).overlap_ns(&kernels), 200);
    }

    #[test]
    fn extreme_spans_saturate() {
        let a = Span::new(i64::MIN + 1, 0);
        let b = Span::new(0, i64::MAX);
        let u = Intervals::of([a, b]);
        assert_eq!(u.ns(), u64::MAX - 1);
        assert_eq!(u.overlap_ns(&u), u64::MAX - 1);
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ns(999), "999 ns");
        assert_eq!(human_ns(6_560), "6.6 us");
        assert_eq!(human_ns(656_000), "656.0 us");
        assert_eq!(human_ns(1_234_567), "1.23 ms");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(65_536), "65.5 kB");
        assert_eq!(human_bytes(1_118_208), "1.12 MB");
        assert_eq!(human_bytes(4_000_000_000), "4.00 GB");
    }
}
