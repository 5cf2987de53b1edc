//! `rounds.svg`: every round's value per variant, one panel per variant with its own y
//! range so that round-to-round drift is visible, rounds in order along x. Two sources:
//! the repeated rounds' batch averages (`repeated-benchmark.csv`, one point per round) and
//! the timing engine's blocks (`rounds/rounds.csv`, each block's per-launch median with a
//! p10-p90 whisker, two blocks per round in ABBA order).

use plotters::prelude::*;

use super::{font, missing, rgb, svg, Plot, ROUNDS_BATCH, ROUNDS_ENGINE};
use crate::data::RoundsBlock;
use crate::format;
use crate::metrics::gb_s_at;
use klab_core::rounds::RoundRow;

/// Pixel size.
pub const SIZE: (u32, u32) = (860, 560);
const FILE: &str = "rounds.svg";
const TITLE: &str = "Per-round values: drift from round to round";

/// One value in one round.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Mark {
    /// Round plus an offset for the source and the block's position.
    x: f64,
    gb_s: f64,
    /// p10-p90 range (engine blocks).
    range: Option<(f64, f64)>,
}

struct Panel {
    variant: String,
    batch: Vec<Mark>,
    engine: Vec<Mark>,
}

fn panels(order: &[String], repeated: &[RoundRow], blocks: &[RoundsBlock]) -> Vec<Panel> {
    let mut names: Vec<String> = order.to_vec();
    for v in repeated
        .iter()
        .filter(|r| r.row.timing.is_some())
        .map(|r| &r.row.variant)
        .chain(blocks.iter().map(|b| &b.variant))
    {
        if !names.contains(v) {
            names.push(v.clone());
        }
    }
    names
        .into_iter()
        .map(|variant| {
            let batch: Vec<Mark> = repeated
                .iter()
                .filter(|r| r.row.variant == variant)
                .filter_map(|r| {
                    r.row
                        .timing
                        .filter(|t| t.effective_gb_s.is_finite())
                        .map(|t| Mark {
                            x: f64::from(r.round) - 0.2,
                            gb_s: t.effective_gb_s,
                            range: None,
                        })
                })
                .collect();
            let mine: Vec<&RoundsBlock> = blocks.iter().filter(|b| b.variant == variant).collect();
            let engine: Vec<Mark> = mine
                .iter()
                .filter_map(|b| {
                    let g = b.useful_gb_s?;
                    let m = b.median_us?;
                    // Blocks of one round, in the order they ran: first at +0.05, second +0.25.
                    let k = mine
                        .iter()
                        .filter(|o| o.round == b.round && o.position < b.position)
                        .count();
                    let range = match (b.p90_us, b.p10_us) {
                        (Some(slow), Some(fast)) => gb_s_at(g, m, slow).zip(gb_s_at(g, m, fast)),
                        _ => None,
                    };
                    Some(Mark {
                        x: b.round as f64 + 0.05 + 0.2 * k as f64,
                        gb_s: g,
                        range,
                    })
                })
                .collect();
            Panel {
                variant,
                batch,
                engine,
            }
        })
        .filter(|p| !p.batch.is_empty() || !p.engine.is_empty())
        .collect()
}

/// Draw the panels. `order` puts the variants in the bandwidth table's order.
pub fn rounds(order: &[String], repeated: &[RoundRow], blocks: &[RoundsBlock]) -> Plot {
    let panels = panels(order, repeated, blocks);
    if panels.is_empty() {
        return missing(
            FILE,
            SIZE,
            TITLE,
            "no per-round values: repeated-benchmark.csv and rounds/rounds.csv are both missing or empty".into(),
        );
    }
    let max_round = panels
        .iter()
        .flat_map(|p| p.batch.iter().chain(&p.engine))
        .map(|m| m.x.round())
        .fold(1.0f64, f64::max);
    let cols = if panels.len() == 1 { 1 } else { 2 };
    let rows = panels.len().div_ceil(cols);
    let drawn = svg(SIZE, |root| {
        let body = root.titled(TITLE, font(20))?;
        let (legend_area, grid) = body.split_vertically(28);
        let batch_colour = rgb(ROUNDS_BATCH);
        let engine_colour = rgb(ROUNDS_ENGINE);
        legend_area.draw(&Circle::new((24, 12), 5, batch_colour.filled()))?;
        legend_area.draw(&Text::new(
            "repeated-benchmark.csv: batch average of one process",
            (34, 5),
            font(13),
        ))?;
        legend_area.draw(&Rectangle::new(
            [(420, 4), (424, 20)],
            engine_colour.filled(),
        ))?;
        legend_area.draw(&Circle::new((422, 12), 5, engine_colour.filled()))?;
        legend_area.draw(&Text::new(
            "rounds/rounds.csv: engine block median, whisker p10-p90",
            (434, 5),
            font(13),
        ))?;
        let areas = grid.split_evenly((rows, cols));
        for (area, p) in areas.iter().zip(&panels) {
            let values: Vec<f64> = p
                .batch
                .iter()
                .chain(&p.engine)
                .flat_map(|m| {
                    let (lo, hi) = m.range.unwrap_or((m.gb_s, m.gb_s));
                    [m.gb_s, lo, hi]
                })
                .collect();
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(0.0f64, f64::max);
            let pad = ((hi - lo) * 0.12).max(hi * 0.002);
            let pad = if pad > 0.0 { pad } else { 1.0 };
            let batch: Vec<f64> = p.batch.iter().map(|m| m.gb_s).collect();
            let drift = match (
                batch.iter().copied().reduce(f64::min),
                batch.iter().copied().reduce(f64::max),
                klab_core::stats::Summary::of(&batch),
            ) {
                (Some(a), Some(b), Some(s)) if s.median > 0.0 => format!(
                    "{}: batch range {} of its median",
                    p.variant,
                    format::pct(100.0 * (b - a) / s.median)
                ),
                _ => p.variant.clone(),
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
            for m in &p.engine {
                if let Some((slow, fast)) = m.range {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(m.x, slow), (m.x, fast)],
                        engine_colour.stroke_width(4),
                    )))?;
                }
            }
            chart.draw_series(
                p.engine
                    .iter()
                    .map(|m| Circle::new((m.x, m.gb_s), 5, engine_colour.filled())),
            )?;
            chart.draw_series(
                p.batch
                    .iter()
                    .map(|m| Circle::new((m.x, m.gb_s), 5, batch_colour.filled())),
            )?;
        }
        Ok(())
    });
    Plot {
        file_name: FILE.into(),
        svg: drawn,
        caption: "Every round's value, one panel per variant (each with its own y range, so drift within a variant is visible; compare levels across variants in the bandwidth plot). Along x, rounds in the order they ran; within a round, the batch average of the repeated rounds (left) and the timing engine's blocks in the order they ran (right, ABBA). Batch averages time 100 back-to-back launches with one event pair; engine blocks time each launch, so their levels differ.".into(),
        missing: None,
    }
}
