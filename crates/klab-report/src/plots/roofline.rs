//! `roofline.svg`: log-log roofline. x = arithmetic intensity (FLOP per useful byte), y =
//! GFLOP/s. Memory roof = theoretical peak GB/s x intensity (solid), the copy-kernel reference's
//! roof dashed, the FP32 compute roof when the device's SM clock is known. Zero-FLOP
//! kernels (transposes, copies) are drawn hollow at the left edge, at y = x_min x achieved
//! GB/s, so their height under the roof there is their true share of the peak.

use plotters::prelude::*;

use super::{
    font, missing, rgb, spread_labels, svg, Plot, CEILING, ROOF_COMPUTE, ROOF_MEMORY, ROOF_POINT,
};
use crate::format;
use crate::metrics::{roof_axes, roof_position, Peaks, RoofAxes, RoofPoint};

/// Pixel size.
pub const SIZE: (u32, u32) = (860, 560);
const FILE: &str = "roofline.svg";
const TITLE: &str = "Roofline (FP32)";

/// Draw the roofline for `points` against the run's peaks.
pub fn roofline(points: &[RoofPoint], peaks: &Peaks) -> Plot {
    let Some(peak) = peaks.theoretical_gb_s else {
        return missing(
            FILE,
            SIZE,
            TITLE,
            format!(
                "no memory roof: the theoretical peak is {}",
                peaks.theoretical_basis
            ),
        );
    };
    if points.is_empty() {
        return missing(FILE, SIZE, TITLE, "no kernel was timed in this run".into());
    }
    let fp32 = peaks.fp32_gflops.as_ref().ok().copied();
    let axes = roof_axes(points, peak, fp32);
    let drawn = svg(SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(TITLE, font(20))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(70)
            // A hair wider than the axes so the end decades get their tick labels
            // (log10(0.01) is not exactly -2 in floating point).
            .build_cartesian_2d(
                (axes.x_min * 0.9999..axes.x_max * 1.0001).log_scale(),
                (axes.y_min * 0.9999..axes.y_max * 1.0001).log_scale(),
            )?;
        chart
            .configure_mesh()
            .x_labels(8)
            .y_labels(8)
            .x_label_formatter(&|v| format::tick(*v))
            .y_label_formatter(&|v| format::tick(*v))
            .x_desc("arithmetic intensity (FLOP per useful byte)")
            .y_desc("GFLOP/s")
            .label_style(font(13))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()?;
        let memory = rgb(ROOF_MEMORY);
        let ridge = fp32.map(|f| f / peak).unwrap_or(axes.x_max).min(axes.x_max);
        chart
            .draw_series(LineSeries::new(
                [(axes.x_min, axes.x_min * peak), (ridge, ridge * peak)],
                memory.stroke_width(4),
            ))?
            .label(format!(
                "memory roof: theoretical peak {} GB/s x intensity",
                format::gb_s(peak)
            ))
            .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 18, y + 4)], memory.filled()));
        if let Some(c) = peaks.ceiling_gb_s {
            let colour = rgb(CEILING);
            let end = fp32.map(|f| f / c).unwrap_or(axes.x_max).min(axes.x_max);
            chart
                .draw_series(DashedLineSeries::new(
                    [(axes.x_min, axes.x_min * c), (end, end * c)],
                    8,
                    6,
                    colour.stroke_width(2),
                ))?
                .label(format!(
                    "copy-kernel reference {} GB/s x intensity",
                    format::gb_s(c)
                ))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
        }
        if let Some(f) = fp32 {
            let colour = rgb(ROOF_COMPUTE);
            chart
                .draw_series(LineSeries::new(
                    [(ridge, f), (axes.x_max, f)],
                    colour.stroke_width(3),
                ))?
                .label(format!("FP32 compute roof {} GFLOP/s", format::grouped(f)))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(3))
                });
        }
        let point = rgb(ROOF_POINT);
        let mut hollow_legend = false;
        let mut filled_legend = false;
        for p in points {
            let at = roof_position(p, &axes);
            if p.intensity.is_none() {
                let s = chart.draw_series(std::iter::once(Circle::new(
                    at,
                    6,
                    point.stroke_width(2),
                )))?;
                if !hollow_legend {
                    hollow_legend = true;
                    s.label("0 FLOPs: drawn at the left edge, y = x_min x GB/s")
                        .legend(move |(x, y)| Circle::new((x + 8, y), 5, point.stroke_width(2)));
                }
            } else {
                let s = chart.draw_series(std::iter::once(Circle::new(at, 6, point.filled())))?;
                if !filled_legend {
                    filled_legend = true;
                    s.label("achieved at the kernel's real intensity")
                        .legend(move |(x, y)| Circle::new((x + 8, y), 5, point.filled()));
                }
            }
        }
        // Labels right of each point, spread apart where points crowd.
        let pixels: Vec<(i32, i32)> = points
            .iter()
            .map(|p| chart.backend_coord(&roof_position(p, &axes)))
            .collect();
        let ys = spread_labels(&pixels.iter().map(|p| p.1).collect::<Vec<_>>(), 16);
        for ((p, (px, py)), ly) in points.iter().zip(&pixels).zip(ys) {
            let text = point_label(p, peak);
            if ly != *py {
                root.draw(&PathElement::new(
                    vec![(px + 7, *py), (px + 16, ly)],
                    RGBColor(120, 120, 120),
                ))?;
            }
            root.draw(&Text::new(text, (px + 18, ly - 7), font(12)))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font(font(12))
            .background_style(WHITE)
            .border_style(RGBColor(170, 170, 170))
            .draw()?;
        Ok(())
    });
    Plot {
        file_name: FILE.into(),
        svg: drawn,
        caption: caption(points, peaks, peak, &axes),
        missing: None,
    }
}

/// What the roofline shows and how, in sentences: the roofs drawn or why not, and how
/// kernels without FLOPs are placed.
fn caption(points: &[RoofPoint], peaks: &Peaks, peak: f64, axes: &RoofAxes) -> String {
    let mut caption = vec![format!(
        "Log-log roofline. Memory roof: theoretical peak {} GB/s x intensity (solid).",
        format::gb_s(peak)
    )];
    caption.push(match peaks.ceiling_gb_s {
        Some(_) => "Dashed: the copy-kernel reference's roof.".to_string(),
        None => format!(
            "The copy-kernel reference's roof is not drawn: the reference is {}.",
            peaks.ceiling_basis
        ),
    });
    caption.push(match &peaks.fp32_gflops {
        Ok(f) => format!(
            "Compute roof: FP32 peak {} GFLOP/s (SMs x FP32 lanes per SM x 2 x maximum SM clock).",
            format::grouped(*f)
        ),
        Err(why) => format!("The compute roof is not drawn: {why}."),
    });
    if points.iter().any(|p| p.intensity.is_none()) {
        caption.push(format!(
            "Transposes and copies do 0 FLOPs, so they have no place on a FLOP axis: they are drawn with hollow markers at the left edge of the x axis (x = {} FLOP/byte) at y = {} x achieved GB/s, so each one's height relative to the memory roof there is its true fraction of the bandwidth peak.",
            format::tick(axes.x_min),
            format::tick(axes.x_min)
        ));
    }
    if points.iter().any(|p| p.intensity.is_some()) {
        caption.push(
            "Filled markers: kernels that do FLOPs, at their real intensity (FLOPs per launch / useful bytes per launch from the receipt; triad: 2 FLOPs per 12 useful bytes).".into(),
        );
    }
    caption.join(" ")
}

/// A point's label: its rate and share of the peak, and its FLOP rate where it has FLOPs.
fn point_label(p: &RoofPoint, peak: f64) -> String {
    let share = 100.0 * p.gb_s / peak;
    match p.intensity {
        None => format!(
            "{}: {} GB/s = {} of peak",
            p.label,
            format::gb_s(p.gb_s),
            format::pct(share)
        ),
        Some(ai) => format!(
            "{}: {} GFLOP/s at {} FLOP/B ({} of peak GB/s)",
            p.label,
            format::tick(p.gflop_s),
            format::tick(ai),
            format::pct(share)
        ),
    }
}
