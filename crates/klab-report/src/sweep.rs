//! The report of a `klab sweep` folder: the points table, the spread of each point over
//! GPUs, the tasks, and two plots against size: each kernel's GB/s (with the copy ceiling
//! of its rounds and the theoretical peak) and its ratio to the baseline with the
//! round-level interval. Rendered through the same [`Document`] as the lab's report, so
//! the page and the markdown agree; byte-identical for the same table.

use std::collections::BTreeMap;

use klab_evidence::sweep::{PointRecord, PointStatus, SweepTable};
use plotters::prelude::*;

use crate::document::{Block, Cell, Document, Section, Table, Tone};
use crate::format;
use crate::plots::{font, missing, rgb, svg, Plot, Rgb, CEILING, PEAK};
use crate::Report;

const SIZE: (u32, u32) = (900, 480);
const BANDWIDTH_FILE: &str = "sweep-bandwidth.svg";
const SPEEDUP_FILE: &str = "sweep-speedup.svg";
const CEILING_FILE: &str = "sweep-ceiling.svg";

/// One colour per series, in kernel order (repeating past the end).
const SERIES: [Rgb; 8] = [
    (27, 126, 163),
    (201, 58, 114),
    (46, 140, 60),
    (156, 108, 24),
    (90, 70, 180),
    (20, 150, 150),
    (178, 34, 52),
    (100, 100, 100),
];

/// Render a collected sweep.
pub fn render(t: &SweepTable) -> Report {
    let plots = vec![bandwidth_plot(t), ceiling_plot(t), speedup_plot(t)];
    let doc = document(t);
    Report {
        html: crate::html::render(&doc, &plots),
        markdown: crate::markdown::render(&doc, &plots),
        plots: plots
            .iter()
            .map(|p| (p.file_name.clone(), p.svg.clone()))
            .collect(),
    }
}

/// A series: a kernel at the values of every axis but the first size axis (named only
/// when the sweep varies them), its points against that axis in order.
type Series<'a> = (String, Vec<(f64, &'a PointRecord)>);

/// Where a point lies on the plots' size axis.
fn x_of(p: &PointRecord, var: &str) -> Option<f64> {
    p.shape.get(var).map(|v| *v as f64)
}

fn series_of(t: &SweepTable) -> Vec<Series<'_>> {
    let x = t.plan.x_axis();
    let regimes: std::collections::BTreeSet<_> = t.points.iter().map(|p| p.regime.name()).collect();
    let mut out: Vec<Series<'_>> = Vec::new();
    for p in &t.points {
        let Some(px) = x_of(p, &x) else { continue };
        let mut rest: Vec<String> = p
            .shape
            .iter()
            .filter(|(k, _)| **k != x)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if regimes.len() > 1 {
            rest.push(p.regime.name().to_string());
        }
        let name = if rest.is_empty() {
            p.kernel.clone()
        } else {
            format!("{} ({})", p.kernel, rest.join(", "))
        };
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push((px, p)),
            None => out.push((name, vec![(px, p)])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn status_cell(s: PointStatus) -> Cell {
    let tone = match s {
        PointStatus::Passed => Tone::Good,
        PointStatus::CheckFailed | PointStatus::TimingFailed => Tone::Bad,
        PointStatus::Error | PointStatus::NotRun => Tone::Unknown,
    };
    Cell::toned(s.name(), tone)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> Cell {
    Cell::mono(v.map(f).unwrap_or_else(|| "-".into()))
}

fn document(t: &SweepTable) -> Document {
    Document {
        title: "klab sweep".into(),
        facts: facts(t),
        sections: vec![points_section(t), gpus_section(t), tasks_section(t)],
    }
}

/// The report's facts: when, which klab, the kernels, the axes, the timing, the points.
fn facts(t: &SweepTable) -> Vec<(String, String)> {
    let plan = &t.plan;
    let passed = t
        .points
        .iter()
        .filter(|p| p.status == PointStatus::Passed)
        .count();
    let mut facts = vec![
        ("Created".to_string(), plan.created_utc.clone()),
        ("klab".to_string(), plan.klab_version.clone()),
        (
            "Kernels".to_string(),
            plan.kernels
                .iter()
                .map(|k| k.name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("Axes".to_string(), plan.axes.join("; ")),
        (
            "Timing".to_string(),
            format!(
                "{}; {} samples a block; warmup {}",
                if plan.rounds > 0 {
                    format!("{} rounds per point (ABBA)", plan.rounds)
                } else {
                    "one klab bench per kernel and point".into()
                },
                plan.samples,
                plan.warmup.spec()
            ),
        ),
        (
            "Points".to_string(),
            format!("{passed} of {} passed", t.points.len()),
        ),
    ];
    if let Some(b) = &plan.baseline {
        facts.push(("Baseline".into(), b.clone()));
    }
    facts
}

/// Every kernel at every point: its status, time, rates and ratio, with the plots.
fn points_section(t: &SweepTable) -> Section {
    let mut points = Table::new(&[
        "kernel",
        "n",
        "regime",
        "status",
        "median us",
        "GB/s",
        "% of ceiling",
        "% of peak",
        "ratio to baseline",
        "GPU",
        "detail",
    ]);
    for p in &t.points {
        let ratio = match (p.ratio_to_baseline, p.ratio_interval) {
            (Some(r), Some([lo, hi])) => format!(
                "{} [{}-{}]",
                format::ratio(r),
                format::ratio(lo),
                format::ratio(hi)
            ),
            (Some(r), None) => format!("{} (no interval)", format::ratio(r)),
            _ => "-".into(),
        };
        points.rows.push(vec![
            Cell::plain(&p.kernel),
            Cell::mono(klab_evidence::sweep::shape_text(&p.shape)),
            Cell::plain(p.regime.name()),
            status_cell(p.status),
            opt(p.median_us, format::us),
            opt(p.gb_s, format::gb_s),
            opt(p.pct_of_ceiling, format::pct),
            opt(p.pct_of_peak, format::pct),
            Cell::mono(ratio),
            Cell::mono(short_uuid(p.gpu_uuid.as_deref())),
            Cell::plain(&p.detail),
        ]);
    }
    Section {
        id: "points".into(),
        title: "Points".into(),
        blocks: vec![
            Block::Paragraph("Every kernel at every point of the axes: checked at that shape first; only a kernel that passed is timed. A ratio above 1 means faster than the baseline; under rounds it is the median of per-round ratios with the 95% order-statistic interval of that median over rounds, computed within one GPU.".into()),
            Block::Plots(vec![
                BANDWIDTH_FILE.into(),
                CEILING_FILE.into(),
                SPEEDUP_FILE.into(),
            ]),
            Block::Table(points),
        ],
    }
}

/// The same kernel, shape and regime on each GPU, and the spread between GPUs.
fn gpus_section(t: &SweepTable) -> Section {
    let gpus: Vec<String> = {
        let mut g: Vec<String> = t.points.iter().filter_map(|p| p.gpu_uuid.clone()).collect();
        g.sort();
        g.dedup();
        g
    };
    let mut blocks = Vec::new();
    if gpus.len() < 2 {
        blocks.push(Block::Note(format!(
            "{} GPU in this sweep: no spread across GPUs to show.",
            gpus.len()
        )));
    }
    if !gpus.is_empty() {
        let mut cols: Vec<String> = vec!["kernel".into(), "n".into(), "regime".into()];
        cols.extend(
            gpus.iter()
                .map(|g| format!("% ceiling, GB/s on {}", short_uuid(Some(g)))),
        );
        cols.push("spread (points of the ceiling)".into());
        let col_refs: Vec<&str> = cols.iter().map(String::as_str).collect();
        let mut table = Table::new(&col_refs);
        let mut by_point: BTreeMap<(String, String, &str), Vec<&PointRecord>> = BTreeMap::new();
        for p in t.points.iter().filter(|p| p.status == PointStatus::Passed) {
            by_point
                .entry((
                    p.kernel.clone(),
                    klab_evidence::sweep::shape_text(&p.shape),
                    p.regime.name(),
                ))
                .or_default()
                .push(p);
        }
        for ((kernel, n, regime), ps) in by_point {
            let mut row = vec![
                Cell::plain(kernel),
                Cell::mono(n.to_string()),
                Cell::plain(regime),
            ];
            let mut pcts = Vec::new();
            for g in &gpus {
                let p = ps
                    .iter()
                    .find(|p| p.gpu_uuid.as_deref() == Some(g.as_str()));
                if let Some(pc) = p.and_then(|p| p.pct_of_ceiling) {
                    pcts.push(pc);
                }
                row.push(Cell::mono(match p {
                    Some(p) => format!(
                        "{}, {}",
                        p.pct_of_ceiling
                            .map(format::pct)
                            .unwrap_or_else(|| "-".into()),
                        p.gb_s.map(format::gb_s).unwrap_or_else(|| "-".into())
                    ),
                    None => "-".into(),
                }));
            }
            let spread = if pcts.len() >= 2 {
                let hi = pcts.iter().cloned().fold(f64::MIN, f64::max);
                let lo = pcts.iter().cloned().fold(f64::MAX, f64::min);
                format!("{:.1}", hi - lo)
            } else {
                "-".into()
            };
            row.push(Cell::mono(spread));
            table.rows.push(row);
        }
        blocks.push(Block::Table(table));
    }
    Section {
        id: "gpus".into(),
        title: "Per GPU".into(),
        blocks,
    }
}

/// Each task (a group on a device), its problems, and whether timed spans overlapped.
fn tasks_section(t: &SweepTable) -> Section {
    let mut tasks = Table::new(&[
        "group",
        "host",
        "device",
        "started (unix s)",
        "seconds",
        "timed spans",
    ]);
    for task in &t.tasks {
        tasks.rows.push(vec![
            Cell::mono(task.group.to_string()),
            Cell::plain(&task.host),
            Cell::mono(task.device.to_string()),
            Cell::mono(format!("{:.1}", task.started_unix_s)),
            Cell::mono(format!("{:.1}", task.ended_unix_s - task.started_unix_s)),
            Cell::mono(task.timed_spans.len().to_string()),
        ]);
    }
    let mut task_blocks = vec![Block::Table(tasks)];
    for p in &t.task_problems {
        task_blocks.push(Block::Note(p.why.clone()));
    }
    let overlaps = t.overlapping_spans();
    task_blocks.push(if overlaps.is_empty() {
        Block::Paragraph("No two timed blocks overlapped on one GPU (each task's timed spans, by GPU UUID).".into())
    } else {
        Block::Note(format!(
            "{} pairs of timed spans overlapped on one GPU: their numbers are not clean measurements.",
            overlaps.len()
        ))
    });
    Section {
        id: "tasks".into(),
        title: "Tasks".into(),
        blocks: task_blocks,
    }
}

fn short_uuid(u: Option<&str>) -> String {
    match u {
        Some(u) => u.chars().take(12).collect(),
        None => "-".into(),
    }
}

/// The x range of sizes (log2), a little wider than the data.
fn x_range(t: &SweepTable) -> Option<(f64, f64)> {
    let x = t.plan.x_axis();
    let ns: Vec<f64> = t.points.iter().filter_map(|p| x_of(p, &x)).collect();
    let lo = ns.iter().cloned().fold(f64::MAX, f64::min);
    let hi = ns.iter().cloned().fold(f64::MIN, f64::max);
    (lo.is_finite() && hi.is_finite() && lo > 0.0).then(|| (lo / 1.2, hi * 1.2))
}

fn bandwidth_plot(t: &SweepTable) -> Plot {
    let title = "GB/s against size";
    let series = series_of(t);
    let any = t.points.iter().any(|p| p.gb_s.is_some());
    let Some((x0, x1)) = x_range(t).filter(|_| any) else {
        return missing(BANDWIDTH_FILE, SIZE, title, "no point was timed".into());
    };
    let peak = t
        .points
        .iter()
        .filter_map(|p| p.theoretical_peak_gb_s)
        .fold(0.0f64, f64::max);
    let top = t
        .points
        .iter()
        .filter_map(|p| p.gb_s)
        .chain(std::iter::once(peak))
        .fold(0.0f64, f64::max)
        * 1.15;
    let x_var = t.plan.x_axis();
    let frame = Frame {
        title,
        x_desc: &x_var,
        x: (x0, x1),
        y: (0.0, top.max(1.0)),
        y_desc: "GB/s (useful bytes / time)",
        y_label: &|v| format::tick(*v),
        legend_low: true,
    };
    let svg = against_size(&frame, |chart| {
        kernel_lines(chart, &series, |p| p.gb_s, false)?;
        // The copy ceiling of each point's rounds.
        let mut ceil: Vec<(f64, f64)> = t
            .points
            .iter()
            .filter_map(|p| Some((x_of(p, &t.plan.x_axis())?, p.ceiling_gb_s?)))
            .collect();
        ceil.sort_by(|a, b| a.0.total_cmp(&b.0));
        ceil.dedup_by(|a, b| a.0 == b.0);
        if !ceil.is_empty() {
            labelled_line(
                chart,
                ceil,
                rgb(CEILING),
                3,
                "copy ceiling (fastest copy in the point's rounds)".into(),
            )?;
        }
        if peak > 0.0 {
            let label = format!("theoretical peak: {} GB/s", format::gb_s(peak));
            labelled_line(chart, vec![(x0, peak), (x1, peak)], rgb(PEAK), 2, label)?;
        }
        Ok(())
    });
    Plot {
        file_name: BANDWIDTH_FILE.into(),
        svg,
        caption: "Each kernel's median effective bandwidth at each size (log scale), the copy ceiling of the point's rounds and the theoretical peak.".into(),
        missing: None,
    }
}

fn ceiling_plot(t: &SweepTable) -> Plot {
    let title = "% of the copy ceiling against size";
    let series = series_of(t);
    let top = t
        .points
        .iter()
        .filter_map(|p| p.pct_of_ceiling)
        .fold(0.0f64, f64::max);
    let Some((x0, x1)) = x_range(t).filter(|_| top > 0.0) else {
        return missing(
            CEILING_FILE,
            SIZE,
            title,
            "no point has a share of a ceiling (no copy kernel was timed beside it)".into(),
        );
    };
    let x_var = t.plan.x_axis();
    let frame = Frame {
        title,
        x_desc: &x_var,
        x: (x0, x1),
        y: (0.0, (top * 1.1).max(110.0)),
        y_desc: "% of the fastest copy at the point",
        y_label: &|v| format!("{v:.0}%"),
        legend_low: true,
    };
    let svg = against_size(&frame, |chart| {
        chart.draw_series(LineSeries::new(
            [(x0, 100.0), (x1, 100.0)],
            rgb(CEILING).stroke_width(2),
        ))?;
        kernel_lines(chart, &series, |p| p.pct_of_ceiling, false)
    });
    Plot {
        file_name: CEILING_FILE.into(),
        svg,
        caption: "Each kernel's median bandwidth as a share of the fastest copy kernel timed at the same point (100%: the ceiling line).".into(),
        missing: None,
    }
}

fn speedup_plot(t: &SweepTable) -> Plot {
    let title = "Ratio to the baseline against size";
    let series = series_of(t);
    let any = t.points.iter().any(|p| p.ratio_to_baseline.is_some());
    let Some((x0, x1)) = x_range(t).filter(|_| any) else {
        return missing(
            SPEEDUP_FILE,
            SIZE,
            title,
            "no ratio to a baseline (no --baseline, or the baseline was not timed)".into(),
        );
    };
    let vals: Vec<f64> = t
        .points
        .iter()
        .flat_map(|p| {
            p.ratio_to_baseline
                .into_iter()
                .chain(p.ratio_interval.into_iter().flatten())
        })
        .collect();
    let hi = vals.iter().cloned().fold(1.0f64, f64::max) * 1.1;
    let lo = vals.iter().cloned().fold(1.0f64, f64::min) * 0.9;
    let x_var = t.plan.x_axis();
    let frame = Frame {
        title,
        x_desc: &x_var,
        x: (x0, x1),
        y: (lo, hi),
        y_desc: "baseline median / kernel median",
        y_label: &|v| format!("{v:.2}x"),
        legend_low: false,
    };
    let svg = against_size(&frame, |chart| {
        chart.draw_series(LineSeries::new(
            [(x0, 1.0), (x1, 1.0)],
            BLACK.stroke_width(1),
        ))?;
        kernel_lines(chart, &series, |p| p.ratio_to_baseline, true)
    });
    Plot {
        file_name: SPEEDUP_FILE.into(),
        svg,
        caption: "Each kernel's ratio to the baseline at each size (above 1: faster), with the round-level 95% interval as a vertical bar under rounds.".into(),
        missing: None,
    }
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;
type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<
        plotters::coord::combinators::LogCoord<f64>,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// A plot against size: its title, ranges and y axis.
struct Frame<'a> {
    title: &'a str,
    /// The size variable along x.
    x_desc: &'a str,
    x: (f64, f64),
    y: (f64, f64),
    y_desc: &'a str,
    y_label: &'a dyn Fn(&f64) -> String,
    /// The legend in the lower right (else the upper left).
    legend_low: bool,
}

/// An SVG with a log-scale size axis, the series `draw` adds and their legend.
fn against_size(f: &Frame<'_>, draw: impl FnOnce(&mut Chart<'_, '_>) -> DrawResult) -> String {
    svg(SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(f.title, font(20))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((f.x.0..f.x.1).log_scale(), f.y.0..f.y.1)?;
        chart
            .configure_mesh()
            .x_desc(f.x_desc)
            .y_desc(f.y_desc)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(f.y_label)
            .label_style(font(13))
            .light_line_style(RGBColor(242, 242, 242))
            .draw()?;
        draw(&mut chart)?;
        chart
            .configure_series_labels()
            .position(if f.legend_low {
                SeriesLabelPosition::LowerRight
            } else {
                SeriesLabelPosition::UpperLeft
            })
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .label_font(font(12))
            .draw()?;
        Ok(())
    })
}

/// A line with a legend entry.
fn labelled_line(
    chart: &mut Chart<'_, '_>,
    points: Vec<(f64, f64)>,
    c: RGBColor,
    width: u32,
    label: String,
) -> DrawResult {
    chart
        .draw_series(LineSeries::new(points, c.stroke_width(width)))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(width)));
    Ok(())
}

/// Each series' `value` against n, a line with its points (and, with `whiskers`, each
/// point's ratio interval as a vertical bar).
fn kernel_lines(
    chart: &mut Chart<'_, '_>,
    series: &[Series<'_>],
    value: impl Fn(&PointRecord) -> Option<f64>,
    whiskers: bool,
) -> DrawResult {
    for (i, (name, ps)) in series.iter().enumerate() {
        let c = rgb(SERIES[i % SERIES.len()]);
        let pts: Vec<(f64, f64)> = ps
            .iter()
            .filter_map(|(x, p)| Some((*x, value(p)?)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        labelled_line(chart, pts.clone(), c, 2, name.clone())?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        if whiskers {
            for (x, p) in ps {
                if let Some([a, b]) = p.ratio_interval {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(*x, a), (*x, b)],
                        c.stroke_width(2),
                    )))?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use klab_core::samples::{Regime, Timer};
    use klab_engine::timing::WarmupPolicy;
    use klab_evidence::sweep::{Group, PlannedKernel, SweepPlan, TaskProblem};

    fn point(
        kernel: &str,
        n: u64,
        uuid: &str,
        gb_s: f64,
        pct: f64,
        ratio: Option<f64>,
    ) -> PointRecord {
        let g = Group {
            id: 0,
            shape: [("n".to_string(), n)].into(),
            regimes: vec![Regime::SameBuffer],
        };
        let mut p = PointRecord::unmeasured(
            &g,
            kernel,
            Regime::SameBuffer,
            0,
            PointStatus::Passed,
            "3 rounds".into(),
        );
        p.gpu_uuid = Some(uuid.into());
        p.gb_s = Some(gb_s);
        p.median_us = Some(100.0);
        p.pct_of_ceiling = Some(pct);
        p.ceiling_gb_s = Some(gb_s * 100.0 / pct);
        p.theoretical_peak_gb_s = Some(4800.0);
        p.ratio_to_baseline = ratio;
        p.ratio_interval = ratio.map(|r| [r * 0.98, r * 1.02]);
        p
    }

    fn table(points: Vec<PointRecord>) -> SweepTable {
        SweepTable {
            schema: klab_evidence::sweep::TABLE_SCHEMA.into(),
            plan: SweepPlan {
                schema: klab_evidence::sweep::PLAN_SCHEMA.into(),
                created_utc: "2026-12-02T00:00:00Z".into(),
                klab_version: "0.1.0".into(),
                kernels: ["sgeam", "lean"]
                    .iter()
                    .map(|k| PlannedKernel {
                        spec: k.to_string(),
                        name: k.to_string(),
                    })
                    .collect(),
                baseline: Some("sgeam".into()),
                rounds: 3,
                resolve: None,
                timer: Timer::PerLaunch,
                samples: 100,
                warmup: WarmupPolicy::Count { launches: 20 },
                timeout_s: 900,
                axes: vec!["n=4096,8192".into()],
                groups: Vec::new(),
            },
            points,
            tasks: Vec::new(),
            task_problems: vec![TaskProblem {
                group: 2,
                why: "task 2 (n = 16384, same-buffer) left no record".into(),
            }],
        }
    }

    #[test]
    fn the_report_draws_both_plots_and_the_spread_over_gpus() {
        let t = table(vec![
            point("sgeam", 4096, "GPU-aaaaaaaaaaaa-1", 2500.0, 90.0, None),
            point("lean", 4096, "GPU-aaaaaaaaaaaa-1", 2700.0, 97.0, Some(1.08)),
            point("lean", 4096, "GPU-bbbbbbbbbbbb-2", 2650.0, 95.5, Some(1.06)),
            point("lean", 8192, "GPU-aaaaaaaaaaaa-1", 2800.0, 98.0, Some(1.1)),
        ]);
        let r = render(&t);
        assert_eq!(r.plots.len(), 3);
        let (bw, ce, sp) = (&r.plots[0].1, &r.plots[1].1, &r.plots[2].1);
        for svg in [bw, ce, sp] {
            assert!(svg.contains("lean"), "a series per kernel");
            assert!(!svg.contains("not drawn"));
        }
        assert!(bw.contains("theoretical peak"));
        assert!(bw.contains("copy ceiling"));
        // The per-GPU table: lean at 4096 on both GPUs, 1.5 points of the ceiling apart.
        assert!(r.markdown.contains("GPU-aaaaaaaa"), "{}", r.markdown);
        assert!(r.markdown.contains("| 1.5 |"), "{}", r.markdown);
        assert!(r.markdown.contains("left no record"));
        assert!(r.html.contains("1.08"));
        // Byte-identical for the same table.
        assert_eq!(render(&t), r);
        // Nothing timed: both plots say why instead of drawing.
        let mut empty = t.clone();
        for p in &mut empty.points {
            p.gb_s = None;
            p.ratio_to_baseline = None;
        }
        let e = render(&empty);
        assert!(e.plots[0].1.contains("no point was timed"));
        // Two size axes: drawn against the first, a series per value of the other.
        let mut gemm = t.clone();
        gemm.plan.axes = vec!["M=64,128".into(), "K=16,32".into()];
        for (p, (m, k)) in gemm
            .points
            .iter_mut()
            .zip([(64, 16), (128, 16), (64, 32), (128, 32)])
        {
            p.kernel = "gemm".into();
            p.shape = [("M".to_string(), m), ("K".to_string(), k)].into();
        }
        let g = render(&gemm);
        assert!(g.plots[0].1.contains("gemm (K=16)") && g.plots[0].1.contains("gemm (K=32)"));
        assert!(g.markdown.contains("K=32,M=128"), "{}", g.markdown);
        assert!(e.plots[2].1.contains("no ratio to a baseline"));
    }
}
