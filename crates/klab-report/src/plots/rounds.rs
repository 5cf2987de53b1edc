//! `rounds.svg`: every block of the alternating rounds (`rounds/rounds.csv`), one panel per
//! kernel with its own y range so that round-to-round drift is visible, rounds in order
//! along x. A block is its per-launch median with a p10-p90 whisker; a kernel's blocks in a
//! round (two in mirrored rounds, one in alternating ones) are drawn side by side in the
//! order they ran.

use plotters::prelude::*;

use super::{font, missing, rgb, svg, Plot, ROUNDS_BLOCK};
use crate::data::{Note, RoundsBlock};
use crate::format;
use crate::metrics::gb_s_at;

/// Pixel size.
pub const SIZE: (u32, u32) = (860, 560);
const FILE: &str = "rounds.svg";
const TITLE: &str = "Per-round values: drift from round to round";

/// One block.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Mark {
    /// Round plus an offset for the block's place among the kernel's blocks of that round.
    x: f64,
    gb_s: f64,
    /// p10-p90 range.
    range: Option<(f64, f64)>,
}

struct Panel {
    kernel: String,
    marks: Vec<Mark>,
}

fn panels(order: &[String], blocks: &[RoundsBlock]) -> Vec<Panel> {
    let mut names: Vec<String> = order.to_vec();
    for v in blocks.iter().map(|b| &b.variant) {
        if !names.contains(v) {
            names.push(v.clone());
        }
    }
    names
        .into_iter()
        .map(|kernel| {
            let mine: Vec<&RoundsBlock> = blocks.iter().filter(|b| b.variant == kernel).collect();
            let marks: Vec<Mark> = mine
                .iter()
                .filter_map(|b| {
                    let g = b.useful_gb_s?;
                    let m = b.median_us?;
                    // Blocks of one round, in the order they ran: first at -0.1, second +0.1.
                    let k = mine
                        .iter()
                        .filter(|o| o.round == b.round && o.position < b.position)
                        .count();
                    let range = match (b.p90_us, b.p10_us) {
                        (Some(slow), Some(fast)) => gb_s_at(g, m, slow).zip(gb_s_at(g, m, fast)),
                        _ => None,
                    };
                    Some(Mark {
                        x: b.round as f64 - 0.1 + 0.2 * k as f64,
                        gb_s: g,
                        range,
                    })
                })
                .collect();
            Panel { kernel, marks }
        })
        .filter(|p| !p.marks.is_empty())
        .collect()
}

/// Draw the panels. `order` puts the kernels in the rates table's order; `why_missing`
/// explains an empty or unreadable `rounds/rounds.csv`.
pub fn rounds(order: &[String], blocks: &[RoundsBlock], why_missing: Option<&Note>) -> Plot {
    let panels = panels(order, blocks);
    if panels.is_empty() {
        let why = why_missing
            .map(|n| n.0.clone())
            .unwrap_or_else(|| "no per-round values: rounds/rounds.csv has no timed block".into());
        return missing(FILE, SIZE, TITLE, why);
    }
    let max_round = panels
        .iter()
        .flat_map(|p| &p.marks)
        .map(|m| m.x.round())
        .fold(1.0f64, f64::max);
    let cols = if panels.len() == 1 { 1 } else { 2 };
    let rows = panels.len().div_ceil(cols);
    let drawn = svg(SIZE, |root| {
        let body = root.titled(TITLE, font(20))?;
        let (legend_area, grid) = body.split_vertically(28);
        let colour = rgb(ROUNDS_BLOCK);
        legend_area.draw(&Rectangle::new([(22, 4), (26, 20)], colour.filled()))?;
        legend_area.draw(&Circle::new((24, 12), 5, colour.filled()))?;
        legend_area.draw(&Text::new(
            "rounds/rounds.csv: block median, whisker p10-p90",
            (34, 5),
            font(13),
        ))?;
        let areas = grid.split_evenly((rows, cols));
        for (area, p) in areas.iter().zip(&panels) {
            let values: Vec<f64> = p
                .marks
                .iter()
                .flat_map(|m| {
                    let (lo, hi) = m.range.unwrap_or((m.gb_s, m.gb_s));
                    [m.gb_s, lo, hi]
                })
                .collect();
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(0.0f64, f64::max);
            let pad = ((hi - lo) * 0.12).max(hi * 0.002);
            let pad = if pad > 0.0 { pad } else { 1.0 };
            let medians: Vec<f64> = p.marks.iter().map(|m| m.gb_s).collect();
            let drift = match (
                medians.iter().copied().reduce(f64::min),
                medians.iter().copied().reduce(f64::max),
                klab_core::stats::Summary::of(&medians),
            ) {
                (Some(a), Some(b), Some(s)) if s.median > 0.0 => format!(
                    "{}: block range {} of its median",
                    p.kernel,
                    format::pct(100.0 * (b - a) / s.median)
                ),
                _ => p.kernel.clone(),
            };
            let mut chart = ChartBuilder::on(area)
                .caption(drift, font(15))
                .margin(8)
                .x_label_area_size(26)
                .y_label_area_size(58)
                .build_cartesian_2d(0.5f64..max_round + 0.5, (lo - pad)..(hi + pad))?;
            let round_label = |x: &f64| {
                let r = x.round();
                if (x - r).abs() < 1e-6 && r >= 1.0 {
                    format!("round {r:.0}")
                } else {
                    String::new()
                }
            };
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(max_round as usize)
                .x_label_formatter(&round_label)
                .y_labels(5)
                .y_label_formatter(&|v| format::grouped(*v))
                .y_desc("GB/s")
                .label_style(font(12))
                .max_light_lines(1)
                .light_line_style(RGBColor(242, 242, 242))
                .draw()?;
            for m in &p.marks {
                if let Some((slow, fast)) = m.range {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(m.x, slow), (m.x, fast)],
                        colour.stroke_width(4),
                    )))?;
                }
            }
            chart.draw_series(
                p.marks
                    .iter()
                    .map(|m| Circle::new((m.x, m.gb_s), 5, colour.filled())),
            )?;
        }
        Ok(())
    });
    Plot {
        file_name: FILE.into(),
        svg: drawn,
        caption: "Every block of the alternating rounds (rounds/rounds.csv), one panel per kernel (each with its own y range, so drift within a kernel is visible; compare levels across kernels in the bandwidth plot). Along x, rounds in the order they ran; within a round, the kernel's blocks in the order they ran, each its own process under the default --isolation block. A point is the block's median GB/s over its per-launch samples, the whisker its p10-p90; a panel's title gives the range of its block medians as a share of their median.".into(),
        missing: None,
    }
}
