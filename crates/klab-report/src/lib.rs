//! klab-report: a self-contained HTML page and a markdown summary of a `klab lab` run
//! folder, with deterministic SVG plots.
//!
//! - [`load`] reads `lab.json` and every artifact the report knows into [`RunData`]; a
//!   missing or unreadable artifact becomes a [`Note`] shown in its section.
//! - [`render`] turns the data into a [`Report`]: the page, the summary and four plots
//!   (bandwidth, rounds, roofline, counters), byte-identical for the same input.
//! - [`write()`] puts them under `<run>/report/`, every file written atomically.
//!
//! Modules, one concept each: [`data`] (loading), [`metrics`] (derived numbers),
//! [`verdict`] (correctness beside every number), [`plots`], `sections` (what the report
//! says), `html` and `markdown` (two renderings of it), `escape`, `output`.

#![warn(missing_docs)]

pub mod data;
mod document;
mod error;
mod escape;
mod format;
mod html;
mod markdown;
pub mod metrics;
mod output;
pub mod plots;
mod sections;
pub mod sweep;
pub mod verdict;

pub use data::{load, Note, RunData};
pub use error::ReportError;
pub use output::{write, write_into, REPORT_DIR};

/// A rendered report, not yet written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `index.html`: one self-contained page.
    pub html: String,
    /// `report.md`: the same tables and statements, plots referenced as `plots/NAME.svg`.
    pub markdown: String,
    /// `(file name, SVG)` for each plot, in report order.
    pub plots: Vec<(String, String)>,
}

/// Render the page, the summary and the plots of a loaded run. Never fails: what is
/// missing is said in the report.
pub fn render(run: &RunData) -> Report {
    let plots = plots::all(run);
    let doc = sections::build(run);
    Report {
        html: html::render(&doc, &plots),
        markdown: markdown::render(&doc, &plots),
        plots: plots
            .iter()
            .map(|p| (p.file_name.clone(), p.svg.clone()))
            .collect(),
    }
}
