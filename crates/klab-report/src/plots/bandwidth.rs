//! `bandwidth.svg`: each kernel's median effective bandwidth in the rounds with the p10-p90
//! range of its blocks, against the copy-kernel reference (the rounds' ceiling) and the
//! theoretical peak, both drawn as labelled lines.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{category, font, missing, rgb, svg, Plot, BANDWIDTH_BAR, CEILING, PEAK};
use crate::data::Note;
use crate::format;
use crate::metrics::{BandwidthRow, Peaks};

/// Pixel size.
pub const SIZE: (u32, u32) = (860, 460);
const FILE: &str = "bandwidth.svg";
const TITLE: &str = "Effective bandwidth per kernel";

/// Draw the plot from the bandwidth table. `why_missing` explains an empty table.
pub fn bandwidth(rows: &[BandwidthRow], peaks: &Peaks, why_missing: Option<&Note>) -> Plot {
    let rows: Vec<&BandwidthRow> = rows
        .iter()
        .filter(|r| r.rate.median_gb_s.is_some_and(f64::is_finite))
        .collect();
    if rows.is_empty() {
        let why = why_missing
            .map(|n| n.0.clone())
            .unwrap_or_else(|| "no kernel was timed in the rounds".into());
        return missing(FILE, SIZE, TITLE, why);
    }
    let names: Vec<String> = rows.iter().map(|r| r.rate.kernel.clone()).collect();
    let top = rows
        .iter()
        .filter_map(|r| r.high_gb_s.or(r.rate.median_gb_s))
        .chain(peaks.theoretical_gb_s)
        .chain(peaks.ceiling_gb_s)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        * 1.35;
    let top = if top > 0.0 { top } else { 1.0 };
    let n = rows.len() as f64;
    let drawn = svg(SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(TITLE, font(20))
            .margin(14)
            .x_label_area_size(34)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..top)?;
        let label = category(&names);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(rows.len())
            .x_label_formatter(&label)
            .y_label_formatter(&|v| format::tick(*v))
            .y_desc("GB/s (useful bytes / time)")
            .label_style(font(14))
            .max_light_lines(1)
            .light_line_style(RGBColor(242, 242, 242))
            .draw()?;
        let bar = rgb(BANDWIDTH_BAR);
        chart
            .draw_series(rows.iter().enumerate().map(|(i, r)| {
                let x = i as f64;
                Rectangle::new(
                    [(x - 0.3, 0.0), (x + 0.3, r.rate.median_gb_s.unwrap_or(0.0))],
                    bar.filled(),
                )
            }))?
            .label("median over every sample; whisker p10-p90 of the blocks")
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], bar.filled()));
        for (i, r) in rows.iter().enumerate() {
            let x = i as f64;
            if let (Some(lo), Some(hi)) = (r.low_gb_s, r.high_gb_s) {
                let whisker = BLACK.stroke_width(2);
                chart.draw_series([
                    PathElement::new(vec![(x, lo), (x, hi)], whisker),
                    PathElement::new(vec![(x - 0.08, lo), (x + 0.08, lo)], whisker),
                    PathElement::new(vec![(x - 0.08, hi), (x + 0.08, hi)], whisker),
                ])?;
            }
            let median = r.rate.median_gb_s.unwrap_or(0.0);
            // Two short lines rather than one long one, so that neighbouring bars' labels
            // do not run into each other.
            let mut text = vec![format!("{} GB/s", format::gb_s(median))];
            if let Some(p) = r.rate.pct_of_peak {
                text.push(format!("{} of peak", format::pct(p)));
            }
            let y = r.high_gb_s.unwrap_or(median).max(median);
            let style = font(13).pos(Pos::new(HPos::Center, VPos::Bottom));
            for (k, line) in text.into_iter().rev().enumerate() {
                chart.draw_series(std::iter::once(
                    EmptyElement::at((x, y))
                        + Text::new(line, (0, -6 - 15 * k as i32), style.clone()),
                ))?;
            }
        }
        let lines = [
            (peaks.ceiling_gb_s, CEILING, "copy-kernel reference"),
            (
                peaks.theoretical_gb_s,
                PEAK,
                "theoretical peak (2 x memory clock x bus width)",
            ),
        ];
        for (value, colour, name) in lines {
            let Some(v) = value else { continue };
            let colour = rgb(colour);
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, v), (n - 0.5, v)],
                    colour.stroke_width(3),
                ))?
                .label(format!("{name}: {} GB/s", format::gb_s(v)))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(3))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(font(13))
            .background_style(WHITE)
            .border_style(RGBColor(170, 170, 170))
            .draw()?;
        Ok(())
    });
    let mut caption = format!(
        "Median effective bandwidth of each kernel in the alternating rounds, over every sample of its blocks (bars; whiskers: p10-p90 of its block medians), against the copy-kernel reference ({}) and the theoretical peak ({}).",
        peaks.ceiling_basis, peaks.theoretical_basis
    );
    if peaks.ceiling_gb_s.is_none() {
        caption.push_str(" The copy-kernel line is not drawn: the rounds have no ceiling.");
    }
    if peaks.theoretical_gb_s.is_none() {
        caption.push_str(" The peak line is not drawn: the device is unknown.");
    }
    Plot {
        file_name: FILE.into(),
        svg: drawn,
        caption,
        missing: None,
    }
}
