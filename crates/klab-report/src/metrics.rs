//! Numbers the report derives from the artifacts: the theoretical peak and the measured
//! ceiling, each kernel's rate in the rounds with the p10-p90 range of its blocks, and
//! where each kernel sits on the roofline. Pure functions of [`RunData`]; the plots and
//! tables only format them. The rates, the ceiling and their percentages are the ones
//! `klab rounds` wrote to `rounds/summary.json`; the report only adds the block ranges.

use klab_core::device::{fp32_lanes_per_sm, DeviceFacts};
use klab_core::stats::Summary;
use klab_evidence::receipt::Receipt;

use crate::data::{Note, Part, RateRow, RoundsBlock, RoundsSummary, RunData};

/// The two bandwidth references every number is set against.
#[derive(Debug, Clone, PartialEq)]
pub struct Peaks {
    /// 2 x memory clock x bus width, GB/s.
    pub theoretical_gb_s: Option<f64>,
    /// How the peak was computed, or why it is unknown.
    pub theoretical_basis: String,
    /// The rounds' ceiling: the fastest copy kernel's median GB/s.
    pub ceiling_gb_s: Option<f64>,
    /// Where the ceiling came from, or why it is unknown.
    pub ceiling_basis: String,
    /// Peak FP32 GFLOP/s, or why it is unknown.
    pub fp32_gflops: Result<f64, String>,
}

/// The references of `run`.
pub fn peaks(run: &RunData) -> Peaks {
    let (theoretical_gb_s, theoretical_basis) = match &run.device {
        Ok(d) => (
            Some(d.theoretical_peak_gb_s()),
            format!(
                "2 x memory clock x bus width = 2 x {} MHz x {} bit / 8",
                fmt_clock_mhz(d.memory_clock_khz),
                d.bus_width_bits
            ),
        ),
        // Why there is none is said once, in the Device fact.
        Err(_) => (None, "unknown: no device in this run".into()),
    };
    let (ceiling_gb_s, ceiling_basis) = ceiling(run);
    Peaks {
        theoretical_gb_s,
        theoretical_basis,
        ceiling_gb_s,
        ceiling_basis,
        fp32_gflops: fp32_peak(run.device.as_ref().ok()),
    }
}

fn fmt_clock_mhz(khz: u64) -> String {
    if khz % 1000 == 0 {
        (khz / 1000).to_string()
    } else {
        format!("{:.3}", khz as f64 / 1000.0)
    }
}

/// The FP32 peak, or why the roofline cannot draw a compute roof.
pub fn fp32_peak(device: Option<&DeviceFacts>) -> Result<f64, String> {
    let d = device.ok_or("no device facts in this run")?;
    if d.sm_clock_khz.is_none() {
        return Err(
            "the device record has no sm_clock_khz (maximum SM clock), so the FP32 peak is unknown"
                .into(),
        );
    }
    if fp32_lanes_per_sm(d.compute_capability).is_none() {
        return Err(format!(
            "klab has no FP32 lane count for compute capability {}.{}",
            d.compute_capability.0, d.compute_capability.1
        ));
    }
    d.fp32_peak_gflops()
        .ok_or_else(|| "the FP32 peak is unknown".into())
}

fn ceiling(run: &RunData) -> (Option<f64>, String) {
    match &run.rounds {
        Err(n) => (None, format!("unknown: {n}")),
        Ok(s) => match &s.ceiling {
            Some(c) => (
                Some(c.gb_s),
                format!(
                    "the fastest copy kernel in the rounds ({}), median over every sample of its blocks, from rounds/summary.json",
                    c.kernel
                ),
            ),
            None if s.rates.is_empty() => (None, format!("unknown: {}", no_rates("rounds/summary.json"))),
            None => (
                None,
                "unknown: rounds/summary.json records no ceiling (no copy kernel in the rounds)"
                    .into(),
            ),
        },
    }
}

/// Why a `klab rounds` summary has no per-kernel rates: the field came with the ceilings
/// step, so a summary without it was written by an older klab.
pub fn no_rates(rel: &str) -> Note {
    Note(format!(
        "{rel} has no rates (written by a klab older than the ceilings step)"
    ))
}

/// One kernel's rate in the rounds: its row of `rounds/summary.json` as the writer computed
/// it, and the spread of its blocks from `rounds/rounds.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct BandwidthRow {
    /// The rate as `rounds/summary.json` has it (median, % of ceiling, % of peak).
    pub rate: RateRow,
    /// p10 of the kernel's block GB/s (the slow end).
    pub low_gb_s: Option<f64>,
    /// p90 of the kernel's block GB/s (the fast end).
    pub high_gb_s: Option<f64>,
}

/// The rounds' rates of `run`, or why there are none (see [`rate_rows`]).
pub fn bandwidth_rows(run: &RunData) -> Part<Vec<BandwidthRow>> {
    let s = run.rounds.as_ref().map_err(Note::clone)?;
    rate_rows(s, run.round_blocks.as_deref().unwrap_or(&[]))
}

/// One row per rate of `summary`, in its order, each with the p10-p90 range of its blocks'
/// GB/s in `blocks` (none when the kernel has no timed block there). A summary without
/// rates gives the note that says so; the rates are never recomputed from the blocks, so
/// the report and `klab rounds` cannot disagree.
pub fn rate_rows(summary: &RoundsSummary, blocks: &[RoundsBlock]) -> Part<Vec<BandwidthRow>> {
    if summary.rates.is_empty() {
        return Err(no_rates("rounds/summary.json"));
    }
    Ok(summary
        .rates
        .iter()
        .map(|rate| {
            let gb_s: Vec<f64> = blocks
                .iter()
                .filter(|b| b.variant == rate.kernel)
                .filter_map(|b| b.useful_gb_s)
                .collect();
            let q = Summary::of(&gb_s);
            BandwidthRow {
                rate: rate.clone(),
                low_gb_s: q.map(|q| q.p10),
                high_gb_s: q.map(|q| q.p90),
            }
        })
        .collect())
}

/// `100 x value / reference`, when both are known and the reference is positive.
pub fn pct(value: Option<f64>, reference: Option<f64>) -> Option<f64> {
    match (value, reference) {
        (Some(v), Some(r)) if r > 0.0 => Some(100.0 * v / r),
        _ => None,
    }
}

/// GB/s of one block of the rounds at a given per-launch time, from the block's median:
/// the bytes per launch are `useful_gb_s x median_us x 1e3`.
pub fn gb_s_at(useful_gb_s: f64, median_us: f64, at_us: f64) -> Option<f64> {
    (at_us > 0.0 && median_us > 0.0).then(|| useful_gb_s * median_us / at_us)
}

/// One kernel on the roofline.
#[derive(Debug, Clone, PartialEq)]
pub struct RoofPoint {
    /// Kernel name.
    pub label: String,
    /// FLOP per useful byte; `None` for a kernel that does no floating-point work.
    pub intensity: Option<f64>,
    /// Achieved useful bandwidth, GB/s.
    pub gb_s: f64,
    /// Achieved GFLOP/s (0 when `intensity` is `None`).
    pub gflop_s: f64,
}

/// Where the roofline's axes end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoofAxes {
    /// Left edge, FLOP per byte (zero-FLOP kernels are drawn here).
    pub x_min: f64,
    /// Right edge, FLOP per byte.
    pub x_max: f64,
    /// Bottom, GFLOP/s.
    pub y_min: f64,
    /// Top, GFLOP/s.
    pub y_max: f64,
}

/// The y at which a zero-FLOP kernel is drawn: at the left edge `x_min` its memory roof is
/// `x_min x peak`, so drawing it at `x_min x achieved GB/s` keeps its height relative to the
/// roof equal to its share of the bandwidth peak.
pub fn zero_flop_y(x_min: f64, gb_s: f64) -> f64 {
    x_min * gb_s
}

/// Where `p` is drawn: its real (intensity, GFLOP/s), or the left edge for zero FLOPs.
pub fn roof_position(p: &RoofPoint, axes: &RoofAxes) -> (f64, f64) {
    match p.intensity {
        Some(ai) => (ai, p.gflop_s),
        None => (axes.x_min, zero_flop_y(axes.x_min, p.gb_s)),
    }
}

/// Points for the roofline: every kernel of the rounds' rates, drawn as zero-FLOP (the
/// rates carry no FLOP count; the rounds' kernels are transposes and copies), and every
/// receipt whose workload does FLOPs, at its real intensity (triad: 2 FLOPs per 12 useful
/// bytes).
pub fn roof_points(rows: &[BandwidthRow], receipts: &[(String, &Receipt)]) -> Vec<RoofPoint> {
    let mut out: Vec<RoofPoint> = rows
        .iter()
        .map(|r| &r.rate)
        .filter_map(|r| {
            r.median_gb_s
                .filter(|g| g.is_finite() && *g > 0.0)
                .map(|g| RoofPoint {
                    label: r.kernel.clone(),
                    intensity: None,
                    gb_s: g,
                    gflop_s: 0.0,
                })
        })
        .collect();
    for (_, r) in receipts {
        let w = &r.workload;
        if w.flops_per_launch == 0
            || w.useful_bytes_per_launch == 0
            || !(r.result.median_us > 0.0 && r.result.useful_gb_s > 0.0)
        {
            continue;
        }
        out.push(RoofPoint {
            label: r.source.entry.clone(),
            intensity: Some(w.flops_per_launch as f64 / w.useful_bytes_per_launch as f64),
            gb_s: r.result.useful_gb_s,
            gflop_s: w.flops_per_launch as f64 / (r.result.median_us * 1e3),
        });
    }
    out
}

fn decade_floor(v: f64) -> f64 {
    10f64.powf(v.log10().floor())
}

fn decade_ceil(v: f64) -> f64 {
    10f64.powf(v.log10().ceil())
}

/// Axes that hold every point and the roofs: x from at most 0.01 FLOP/byte (a decade
/// below the smallest real intensity) to at least 100 (past the ridge point), y whole
/// decades around every point and roof.
pub fn roof_axes(points: &[RoofPoint], peak_gb_s: f64, fp32: Option<f64>) -> RoofAxes {
    let min_ai = points
        .iter()
        .filter_map(|p| p.intensity)
        .filter(|a| *a > 0.0)
        .fold(f64::INFINITY, f64::min);
    let max_ai = points
        .iter()
        .filter_map(|p| p.intensity)
        .fold(0.0f64, f64::max);
    let x_min = if min_ai.is_finite() {
        0.01f64.min(decade_floor(min_ai) / 10.0)
    } else {
        0.01
    };
    let ridge = fp32.map(|f| f / peak_gb_s).unwrap_or(0.0);
    let x_max = 100f64.max(decade_ceil((ridge * 4.0).max(max_ai * 10.0).max(1.0)));
    let axes = RoofAxes {
        x_min,
        x_max,
        y_min: 0.0,
        y_max: 0.0,
    };
    let ys: Vec<f64> = points
        .iter()
        .map(|p| roof_position(p, &axes).1)
        .filter(|y| *y > 0.0)
        .chain([x_min * peak_gb_s])
        .collect();
    let low = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let top = fp32
        .unwrap_or(x_max * peak_gb_s)
        .max(ys.iter().copied().fold(0.0, f64::max));
    RoofAxes {
        y_min: decade_floor(low / 2.0),
        y_max: decade_ceil(top * 1.2),
        ..axes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(label: &str, ai: Option<f64>, gb_s: f64, gflop_s: f64) -> RoofPoint {
        RoofPoint {
            label: label.into(),
            intensity: ai,
            gb_s,
            gflop_s,
        }
    }

    #[test]
    fn zero_flop_points_keep_their_share_of_the_roof() {
        let peak = 4814.304;
        let copy = point("copy", None, 2885.22, 0.0);
        let axes = roof_axes(std::slice::from_ref(&copy), peak, None);
        assert_eq!(axes.x_min, 0.01);
        let (x, y) = roof_position(&copy, &axes);
        assert_eq!(x, 0.01);
        assert!((y - 28.8522).abs() < 1e-9, "{y}");
        // Height over the roof at the same x = share of the peak.
        let roof_at_x = peak * x;
        assert!((y / roof_at_x - 2885.22 / peak).abs() < 1e-12);
    }

    #[test]
    fn triad_sits_at_two_flops_per_twelve_bytes_and_axes_hold_everything() {
        let peak = 4814.304;
        let fp32 = 66_908.16;
        let triad = point("triad", Some(2.0 / 12.0), 1353.79, 225.6);
        let naive = point("naive", None, 500.06, 0.0);
        let axes = roof_axes(&[triad.clone(), naive.clone()], peak, Some(fp32));
        assert_eq!((axes.x_min, axes.x_max), (0.01, 100.0));
        assert_eq!(roof_position(&triad, &axes), (2.0 / 12.0, 225.6));
        let (_, y) = roof_position(&naive, &axes);
        assert!(y >= axes.y_min && y <= axes.y_max);
        assert!(fp32 <= axes.y_max && axes.y_max <= 10.0 * fp32 * 1.2);
        assert_eq!(axes.y_min, 1.0);
        // A kernel with a tiny intensity pushes the left edge a decade below it.
        let tiny = point("tiny", Some(0.003), 10.0, 0.03);
        assert!((roof_axes(&[tiny], peak, None).x_min - 0.0001).abs() < 1e-15);
    }

    #[test]
    fn fp32_peak_needs_the_sm_clock() {
        let mut d: DeviceFacts = serde_json::from_str(
            r#"{"ordinal":0,"name":"NVIDIA H200","uuid":"u","compute_capability":[9,0],
            "sm_count":132,"l2_bytes":62914560,"memory_clock_khz":3201000,"bus_width_bits":6016,
            "total_memory_bytes":1,"driver_version":"13.0","runtime_version":null,
            "nvrtc_version":null,"limits":{"max_threads_per_block":1024,
            "max_block_dim":{"x":1024,"y":1024,"z":64},"max_grid_dim":{"x":1,"y":1,"z":1},
            "max_shared_per_block":49152,"max_shared_per_block_optin":232448,"warp_size":32}}"#,
        )
        .unwrap();
        assert!(fp32_peak(Some(&d)).unwrap_err().contains("sm_clock_khz"));
        d.sm_clock_khz = Some(1_980_000);
        // 132 SMs x 128 lanes x 2 FLOPs x 1.98 GHz.
        assert!((fp32_peak(Some(&d)).unwrap() - 66_908.16).abs() < 1e-6);
        d.compute_capability = (3, 5);
        assert!(fp32_peak(Some(&d)).unwrap_err().contains("3.5"));
        assert!(fp32_peak(None).is_err());
    }

    #[test]
    fn block_bandwidth_scales_with_time() {
        assert_eq!(gb_s_at(2000.0, 50.0, 100.0), Some(1000.0));
        assert_eq!(gb_s_at(2000.0, 50.0, 0.0), None);
        assert_eq!(pct(Some(50.0), Some(200.0)), Some(25.0));
        assert_eq!(pct(Some(50.0), Some(0.0)), None);
    }

    fn rate(kernel: &str, median_gb_s: f64, pct_of_ceiling: f64) -> RateRow {
        RateRow {
            kernel: kernel.into(),
            blocks: Some(3),
            blocks_passed: Some(3),
            median_us: Some(40.0),
            median_gb_s: Some(median_gb_s),
            pct_of_ceiling: Some(pct_of_ceiling),
            pct_of_peak: Some(61.5),
            prediction: None,
        }
    }

    fn block(round: u64, variant: &str, useful_gb_s: Option<f64>) -> RoundsBlock {
        RoundsBlock {
            round,
            variant: variant.into(),
            correct: true,
            useful_gb_s,
            ..RoundsBlock::default()
        }
    }

    fn summary(rates: Vec<RateRow>) -> RoundsSummary {
        RoundsSummary {
            baseline: "copy".into(),
            n: Some(4096),
            rounds: Some(3),
            blocks: Some(6),
            order: Vec::new(),
            round_order: None,
            isolation: None,
            config: None,
            analyses: Vec::new(),
            rates,
            ceiling: None,
            theoretical_peak_gb_s: None,
            time: None,
            resolution: None,
            reruns: Vec::new(),
        }
    }

    #[test]
    fn rate_rows_keep_the_writers_numbers_and_order_and_add_the_block_range() {
        // The writer's order (not the blocks' order), its medians and percentages as they
        // are (even where they would not recompute from the blocks).
        let s = summary(vec![
            rate("tiled", 1600.0, 57.0),
            rate("copy", 2800.0, 100.0),
        ]);
        let blocks = [
            block(1, "copy", Some(2700.0)),
            block(1, "tiled", Some(1500.0)),
            block(2, "tiled", Some(1700.0)),
            block(2, "copy", Some(2900.0)),
            block(3, "copy", Some(2800.0)),
            block(3, "tiled", None),
            block(3, "other", Some(1.0)),
        ];
        let rows = rate_rows(&s, &blocks).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.rate.kernel.as_str()).collect();
        assert_eq!(names, ["tiled", "copy"]);
        assert_eq!(rows[0].rate, s.rates[0]);
        assert_eq!(rows[1].rate, s.rates[1]);
        // p10 and p90 of copy's three blocks (2700, 2800, 2900) and of tiled's two timed
        // ones (1500, 1700), by the quantile rule.
        let copy = Summary::of(&[2700.0, 2900.0, 2800.0]).unwrap();
        assert_eq!(
            (rows[1].low_gb_s, rows[1].high_gb_s),
            (Some(copy.p10), Some(copy.p90))
        );
        assert_eq!((copy.p10, copy.p90), (2720.0, 2880.0));
        assert_eq!(
            (rows[0].low_gb_s, rows[0].high_gb_s),
            (Some(1520.0), Some(1680.0))
        );
        // A kernel without a timed block has no range.
        let lone = rate_rows(&s, &blocks[..1]).unwrap();
        assert_eq!((lone[0].low_gb_s, lone[0].high_gb_s), (None, None));
    }

    #[test]
    fn a_summary_without_rates_gives_no_rows_and_says_why() {
        let note = rate_rows(&summary(Vec::new()), &[block(1, "copy", Some(1.0))]).unwrap_err();
        assert_eq!(
            note.0,
            "rounds/summary.json has no rates (written by a klab older than the ceilings step)"
        );
    }
}
