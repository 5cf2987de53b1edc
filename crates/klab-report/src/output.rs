//! Writing a report: `index.html`, `report.md` and `plots/*.svg`, each file written to a
//! temporary name in its folder and renamed over the target, so a killed writer never
//! leaves a torn file. Plots are written first, the page last.

use std::path::{Path, PathBuf};

use klab_core::artifact::write_atomic;

use crate::error::ReportError;
use crate::Report;

/// The report's folder in a run, and the name of the lab step that writes it there.
pub const REPORT_DIR: &str = "report";

/// Write into `<run_dir>/report/`. Returns the paths written, page first.
pub fn write(run_dir: &Path, report: &Report) -> Result<Vec<PathBuf>, ReportError> {
    write_into(&run_dir.join(REPORT_DIR), report)
}

/// Write into `dir` (created if needed). Returns the paths written, page first.
pub fn write_into(dir: &Path, report: &Report) -> Result<Vec<PathBuf>, ReportError> {
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots).map_err(|error| ReportError::Write {
        path: plots.clone(),
        error,
    })?;
    let put = |path: PathBuf, bytes: &str| {
        write_atomic(&path, bytes.as_bytes())
            .map(|_| path.clone())
            .map_err(ReportError::from)
    };
    let mut plot_paths = Vec::new();
    for (name, svg) in &report.plots {
        let file = Path::new(name);
        if file.file_name() != Some(file.as_os_str()) {
            return Err(ReportError::Write {
                path: plots.join(name),
                error: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a plot name must be a plain file name",
                ),
            });
        }
        plot_paths.push(put(plots.join(name), svg)?);
    }
    let md = put(dir.join("report.md"), &report.markdown)?;
    let html = put(dir.join("index.html"), &report.html)?;
    let mut out = vec![html, md];
    out.extend(plot_paths);
    Ok(out)
}
