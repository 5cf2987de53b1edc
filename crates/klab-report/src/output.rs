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

/// Write into `dir` (created if needed). Returns the paths written, page first. Each file
/// is written atomically; when one cannot be (a full disk), the files this call added and
/// the folders it made are removed again, so a failure leaves no partial report behind.
pub fn write_into(dir: &Path, report: &Report) -> Result<Vec<PathBuf>, ReportError> {
    let plots = dir.join("plots");
    // Deepest first: the order they are removed in.
    let made: Vec<PathBuf> = plots
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err())
        .map(Path::to_path_buf)
        .collect();
    let mut added = Vec::new();
    let result = write_files(dir, &plots, report, &mut added);
    if result.is_err() {
        for f in added.iter().rev() {
            let _ = std::fs::remove_file(f);
        }
        for d in &made {
            let _ = std::fs::remove_dir(d);
        }
    }
    result
}

/// [`write_into`]'s writes; `added` gets each file that did not exist before.
fn write_files(
    dir: &Path,
    plots: &Path,
    report: &Report,
    added: &mut Vec<PathBuf>,
) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(plots).map_err(|error| ReportError::Write {
        path: plots.to_path_buf(),
        error,
    })?;
    let mut put = |path: PathBuf, bytes: &str| {
        let new = std::fs::symlink_metadata(&path).is_err();
        write_atomic(&path, bytes.as_bytes()).map_err(ReportError::from)?;
        if new {
            added.push(path.clone());
        }
        Ok::<_, ReportError>(path)
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
