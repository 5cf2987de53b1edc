//! The report's four SVG plots, drawn with plotters' SVG backend only.
//!
//! Determinism: a plot is a pure function of its input. Sizes are fixed, fonts are named
//! by family only (`sans-serif`, nothing is measured from system fonts), every collection
//! is iterated in file order (no hash maps), and nothing time- or random-dependent is
//! written. The same run folder gives byte-identical SVG.
//!
//! Every plot has one series colour used nowhere else on the page ([`CHECK_COLOURS`]), so
//! a screenshot test can tell that the plot was rendered.

mod bandwidth;
mod counters;
mod roofline;
mod rounds;

use plotters::coord::Shift;
use plotters::prelude::*;

pub use bandwidth::bandwidth;
pub use counters::counters;
pub use roofline::roofline;
pub use rounds::rounds;

/// An RGB colour.
pub type Rgb = (u8, u8, u8);

/// Bars of median bandwidth per variant (bandwidth.svg).
pub const BANDWIDTH_BAR: Rgb = (27, 126, 163);
/// The copy-kernel reference, the copy kernel's median (bandwidth.svg, roofline.svg).
pub const CEILING: Rgb = (214, 96, 28);
/// The theoretical peak, 2 x memory clock x bus width (bandwidth.svg).
pub const PEAK: Rgb = (120, 38, 140);
/// Block medians of the rounds and their p10-p90 whiskers (rounds.svg).
pub const ROUNDS_BLOCK: Rgb = (201, 58, 114);
/// The theoretical memory roof (roofline.svg).
pub const ROOF_MEMORY: Rgb = (46, 94, 170);
/// The FP32 compute roof (roofline.svg).
pub const ROOF_COMPUTE: Rgb = (156, 108, 24);
/// Achieved points (roofline.svg).
pub const ROOF_POINT: Rgb = (178, 34, 52);
/// The address model's predictions (counters.svg).
pub const COUNTER_PREDICTED: Rgb = (122, 132, 150);
/// Nsight Compute's measurements (counters.svg).
pub const COUNTER_MEASURED: Rgb = (231, 138, 35);
/// A measurement that disagrees with the model (counters.svg).
pub const DISAGREE: Rgb = (220, 20, 60);

/// For each plot file, the series colour that only that plot draws, in large filled areas
/// or thick strokes: what the browser test counts in the screenshot.
pub const CHECK_COLOURS: [(&str, Rgb); 4] = [
    ("bandwidth.svg", BANDWIDTH_BAR),
    ("rounds.svg", ROUNDS_BLOCK),
    ("roofline.svg", ROOF_MEMORY),
    ("counters.svg", COUNTER_MEASURED),
];

/// The font family every plot names (resolved by the viewer; nothing is measured).
pub const FONT: &str = "sans-serif";

/// One rendered plot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plot {
    /// File name under `report/plots/`, e.g. `bandwidth.svg`.
    pub file_name: String,
    /// The SVG document.
    pub svg: String,
    /// What the plot shows and how to read it (plain text).
    pub caption: String,
    /// Why there is nothing to draw, when the run lacks the data; the SVG then only says so.
    pub missing: Option<String>,
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

pub(crate) fn rgb(c: Rgb) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

pub(crate) fn font(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).color(&BLACK)
}

/// Draw an SVG of `size` with `draw`; a drawing error (which the string backend does not
/// produce in practice) becomes an SVG that says so, never a panic.
pub(crate) fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> DrawResult,
) -> String {
    let mut out = String::new();
    let result = {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let r = root
            .fill(&WHITE)
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error>)
            .and_then(|_| draw(&root));
        r.and_then(|_| root.present().map_err(|e| e.into()))
    };
    match result {
        Ok(()) => out,
        Err(e) => message_svg(size, "plot could not be drawn", &e.to_string()),
    }
}

/// An SVG with a title and one line of text (no data, or a drawing error).
pub(crate) fn message_svg(size: (u32, u32), title: &str, text: &str) -> String {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let _ = root.fill(&WHITE);
        let _ = root.draw(&Text::new(title.to_string(), (20, 20), font(18)));
        let _ = root.draw(&Text::new(text.to_string(), (20, 50), font(14)));
        let _ = root.present();
    }
    out
}

/// A plot that has nothing to draw.
pub(crate) fn missing(file_name: &str, size: (u32, u32), title: &str, why: String) -> Plot {
    Plot {
        file_name: file_name.into(),
        svg: message_svg(size, title, &why),
        caption: format!("{title}: not drawn. {why}"),
        missing: Some(why),
    }
}

/// The category label under integer x positions of a categorical axis.
pub(crate) fn category<'a>(names: &'a [String]) -> impl Fn(&f64) -> String + 'a {
    move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
            names[i as usize].clone()
        } else {
            String::new()
        }
    }
}

/// Spread label positions (pixels, any order) so that neighbours are at least `gap` apart,
/// keeping their order; returns the adjusted positions in the input order.
pub fn spread_labels(ys: &[i32], gap: i32) -> Vec<i32> {
    let mut order: Vec<usize> = (0..ys.len()).collect();
    order.sort_by_key(|&i| (ys[i], i));
    let mut placed = vec![0; ys.len()];
    let mut last: Option<i32> = None;
    for &i in &order {
        let y = match last {
            Some(l) if ys[i] < l + gap => l + gap,
            _ => ys[i],
        };
        placed[i] = y;
        last = Some(y);
    }
    placed
}

/// Every plot of a run, in report order: bandwidth, rounds, roofline, counters.
pub fn all(run: &crate::data::RunData) -> Vec<Plot> {
    let peaks = crate::metrics::peaks(run);
    let rows = crate::metrics::bandwidth_rows(run);
    let rates = rows.as_deref().unwrap_or(&[]);
    let receipts: Vec<(String, &klab_evidence::receipt::Receipt)> = run
        .receipts
        .as_ref()
        .map(|rs| {
            rs.iter()
                .filter_map(|e| e.receipt.as_ref().ok().map(|r| (e.path.clone(), r)))
                .collect()
        })
        .unwrap_or_default();
    let points = crate::metrics::roof_points(rates, &receipts);
    vec![
        bandwidth(rates, &peaks, rows.as_ref().err()),
        rounds(
            &rates
                .iter()
                .map(|r| r.rate.kernel.clone())
                .collect::<Vec<_>>(),
            run.round_blocks.as_deref().unwrap_or(&[]),
            run.round_blocks.as_ref().err(),
        ),
        roofline(&points, &peaks),
        match &run.profile {
            Ok(p) => counters(&p.kernels),
            Err(n) => missing(
                "counters.svg",
                counters::SIZE,
                "Predicted vs measured counters",
                n.0.clone(),
            ),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_spread_apart_in_order() {
        assert_eq!(spread_labels(&[100, 104, 50], 14), vec![100, 114, 50]);
        assert_eq!(spread_labels(&[10, 10, 10], 5), vec![10, 15, 20]);
        assert_eq!(spread_labels(&[], 5), Vec::<i32>::new());
    }

    #[test]
    fn category_labels_only_at_integers() {
        let names = vec!["copy".to_string(), "naive".to_string()];
        let f = category(&names);
        assert_eq!(f(&0.0), "copy");
        assert_eq!(f(&1.0), "naive");
        assert_eq!(f(&0.5), "");
        assert_eq!(f(&2.0), "");
        assert_eq!(f(&-1.0), "");
    }
}
