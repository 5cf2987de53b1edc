//! `counters.svg`: the address model's predictions against Nsight Compute's measurements,
//! per kernel, as paired bars. Left panel: global sectors per request (linear). Right panel:
//! shared-memory bank conflicts, which span 0 to about 1.6e7, on a symmetric log axis
//! y = log10(1 + count): a zero sits on the 0 line and is labelled "0"; a value that is not
//! measured or not predicted is labelled so instead of drawn. Disagreements are marked.

use klab_model::bound::{Agreement, KernelProfile};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    category, font, missing, rgb, svg, Plot, COUNTER_MEASURED, COUNTER_PREDICTED, DISAGREE,
};
use crate::format;

/// Pixel size.
pub const SIZE: (u32, u32) = (860, 460);
const FILE: &str = "counters.svg";
const TITLE: &str = "Predicted (address model) vs measured (Nsight Compute)";

/// One predicted/measured pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// "naive ld", "tiled st".
    pub label: String,
    pub predicted: Option<f64>,
    pub measured: Option<f64>,
    pub agreement: Agreement,
}

/// The pairs of one quantity family for every kernel: `kind` is `global {dir}
/// sectors/request` or `shared {dir} bank conflicts` with `{dir}` replaced by load and store.
pub fn pairs(kernels: &[KernelProfile], pattern: &str) -> Vec<Pair> {
    let mut out = Vec::new();
    for k in kernels {
        for (dir, short) in [("load", "ld"), ("store", "st")] {
            let quantity = pattern.replace("{dir}", dir);
            if let Some(r) = k.counters.iter().find(|r| r.quantity == quantity) {
                if r.predicted.is_some() || r.measured.is_some() {
                    out.push(Pair {
                        label: format!("{} {short}", k.kernel),
                        predicted: r.predicted,
                        measured: r.measured,
                        agreement: r.agreement,
                    });
                }
            }
        }
    }
    out
}

/// Symmetric log: 0 stays 0, 1.6e7 becomes about 7.2.
pub fn symlog(v: f64) -> f64 {
    (1.0 + v.max(0.0)).log10()
}

fn symlog_tick(v: &f64) -> String {
    let k = v.round();
    if (v - k).abs() > 1e-6 || k < 0.0 {
        return String::new();
    }
    match k as i32 {
        0 => "0".into(),
        1 => "10".into(),
        2 => "100".into(),
        e => format!("1e{e}"),
    }
}

/// Draw the plot from `profile.json`'s kernels.
pub fn counters(kernels: &[KernelProfile]) -> Plot {
    let sectors = pairs(kernels, "global {dir} sectors/request");
    let conflicts = pairs(kernels, "shared {dir} bank conflicts");
    if sectors.is_empty() && conflicts.is_empty() {
        return missing(
            FILE,
            SIZE,
            TITLE,
            "profile.json has no sectors/request or bank-conflict rows".into(),
        );
    }
    let drawn = svg(SIZE, |root| {
        let body = root.titled(TITLE, font(20))?;
        let (legend, panels) = body.split_vertically(28);
        let predicted = rgb(COUNTER_PREDICTED);
        let measured = rgb(COUNTER_MEASURED);
        let disagree = rgb(DISAGREE);
        legend.draw(&Rectangle::new([(20, 5), (36, 19)], predicted.filled()))?;
        legend.draw(&Text::new("predicted (address model)", (42, 5), font(13)))?;
        legend.draw(&Rectangle::new([(250, 5), (266, 19)], measured.filled()))?;
        legend.draw(&Text::new("measured (Nsight Compute)", (272, 5), font(13)))?;
        legend.draw(&TriangleMarker::new((488, 13), 7, disagree.filled()))?;
        legend.draw(&Text::new(
            "disagrees beyond the tolerance;  n/m: not measured",
            (500, 5),
            font(13),
        ))?;
        let (left, right) = panels.split_horizontally(SIZE.0 / 2);
        panel(&left, "global sectors per request", &sectors, false)?;
        panel(
            &right,
            "shared bank conflicts (symmetric log: log10(1 + count))",
            &conflicts,
            true,
        )?;
        Ok(())
    });
    Plot {
        file_name: FILE.into(),
        svg: drawn,
        caption: "Paired bars per kernel and direction (ld: loads, st: stores): grey = the CPU address model's prediction, orange = Nsight Compute's count. Left: global sectors per request (32 = every lane in its own sector, 4 = a warp's 128 contiguous bytes). Right: shared-memory bank conflicts on a symmetric log axis y = log10(1 + count), so a count of 0 is drawn on the 0 line and labelled 0, while 1.6e7 still fits. n/m: the profile does not have that counter; no model: the address model does not predict it. A red triangle marks a measurement that disagrees with the prediction beyond the tolerance in the table.".into(),
        missing: None,
    }
}

fn panel(
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    pairs: &[Pair],
    log: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    if pairs.is_empty() {
        area.draw(&Text::new(format!("{title}: no rows"), (20, 30), font(14)))?;
        return Ok(());
    }
    let t = |v: f64| if log { symlog(v) } else { v };
    let top = pairs
        .iter()
        .flat_map(|p| [p.predicted, p.measured])
        .flatten()
        .map(t)
        .fold(0.0f64, f64::max);
    let top = if log {
        (top + 0.6).ceil().max(2.0)
    } else {
        (top * 1.25).max(36.0)
    };
    let bottom = if log { -0.3 } else { -0.03 * top };
    let names: Vec<String> = pairs.iter().map(|p| p.label.clone()).collect();
    let n = pairs.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, font(14))
        .margin(10)
        .x_label_area_size(28)
        .y_label_area_size(48)
        .build_cartesian_2d(-0.5f64..n - 0.5, bottom..top)?;
    let label = category(&names);
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .x_labels(pairs.len())
        .x_label_formatter(&label)
        .label_style(font(12))
        .max_light_lines(1)
        .light_line_style(RGBColor(242, 242, 242));
    if log {
        mesh.y_labels(top as usize + 1)
            .y_label_formatter(&symlog_tick);
    } else {
        mesh.y_label_formatter(&|v| {
            if *v < 0.0 {
                String::new()
            } else {
                format::tick(*v)
            }
        });
    }
    mesh.draw()?;
    let predicted = rgb(COUNTER_PREDICTED);
    let measured = rgb(COUNTER_MEASURED);
    let step = top - bottom;
    let above = |size: u32| font(size).pos(Pos::new(HPos::Center, VPos::Bottom));
    for (i, p) in pairs.iter().enumerate() {
        let x = i as f64;
        // The measured value's label sits higher, so neighbouring labels never overlap.
        for (value, colour, x0, absent, lift) in [
            (p.predicted, predicted, x - 0.38, "no model", 3),
            (p.measured, measured, x + 0.02, "n/m", 15),
        ] {
            let x1 = x0 + 0.36;
            let mid = (x0 + x1) / 2.0;
            match value {
                Some(v) if t(v) > 0.0 => {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, 0.0), (x1, t(v))],
                        colour.filled(),
                    )))?;
                    chart.draw_series(std::iter::once(
                        EmptyElement::at((mid, t(v)))
                            + Text::new(format::compact(v), (0, -lift), above(11)),
                    ))?;
                }
                Some(_) => {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(x0, 0.0), (x1, 0.0)],
                        colour.stroke_width(4),
                    )))?;
                    chart.draw_series(std::iter::once(
                        EmptyElement::at((mid, 0.0)) + Text::new("0", (0, -lift - 2), above(11)),
                    ))?;
                }
                None => {
                    chart.draw_series(std::iter::once(
                        EmptyElement::at((mid, 0.0)) + Text::new(absent, (0, -lift), above(10)),
                    ))?;
                }
            }
        }
        if p.agreement == Agreement::Disagrees {
            let y = [p.predicted, p.measured]
                .into_iter()
                .flatten()
                .map(t)
                .fold(0.0f64, f64::max)
                + 0.16 * step;
            chart.draw_series(std::iter::once(TriangleMarker::new(
                (x, y.min(top - 0.02 * step)),
                8,
                rgb(DISAGREE).filled(),
            )))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlog_keeps_zero_and_fits_the_largest_count() {
        assert_eq!(symlog(0.0), 0.0);
        assert!((symlog(16_488_054.0) - 7.2172).abs() < 1e-3);
        assert_eq!(symlog_tick(&0.0), "0");
        assert_eq!(symlog_tick(&7.0), "1e7");
        assert_eq!(symlog_tick(&0.5), "");
        assert_eq!(symlog_tick(&-0.3), "");
    }
}
