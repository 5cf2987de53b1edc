//! Writing a report: `index.html`, `report.md` and `plots/*.svg`, each file written to a
//! temporary name in its folder and renamed over the target, so a killed writer never
//! leaves a torn file. Plots are written first, the page last.

use std::path::{Path, PathBuf};

use klab_core::artifact::write_atomic;

use crate::error::ReportError;
use crate::Report;

/// The report's folder in a run, and the name of the lab step that writes it there.
pub const REPORT_DIR: &str = "report";

/// Write into `<run_dir>/report/`, a folder of klab's own (an earlier report there is
/// replaced whatever version wrote it). Returns the paths written, page first.
pub fn write(run_dir: &Path, report: &Report) -> Result<Vec<PathBuf>, ReportError> {
    write_checked(&run_dir.join(REPORT_DIR), report, Folder::Klabs)
}

/// Write into `dir`, a folder the user named (created if needed): refused before anything
/// is written when a file it would write is there and not an earlier klab report's (other
/// files are left as they are). Returns the paths written, page first.
pub fn write_into(dir: &Path, report: &Report) -> Result<Vec<PathBuf>, ReportError> {
    write_checked(dir, report, Folder::Users)
}

/// Whose folder a report goes into: what may already be there.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Folder {
    /// A run's own `report/`: anything.
    Klabs,
    /// A folder the user named: what the report writes may be there only as an earlier
    /// report's.
    Users,
}

/// Each file is written atomically; when one cannot be (a full disk), the files this call
/// added and the folders it made are removed again, so a failure leaves no partial report
/// behind.
fn write_checked(dir: &Path, report: &Report, folder: Folder) -> Result<Vec<PathBuf>, ReportError> {
    let plots = dir.join("plots");
    refuse_foreign(dir, &plots, report, folder)?;
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

/// A `plots` that is not a real folder (a link would send the plots elsewhere) is refused.
/// In a user's folder a report replaces only a report: the files it writes (`index.html`,
/// `report.md`, its plots) may be there only as an earlier report's, which its
/// `index.html` says with klab's generator line. Other files are left as they are.
fn refuse_foreign(
    dir: &Path,
    plots: &Path,
    report: &Report,
    folder: Folder,
) -> Result<(), ReportError> {
    let refuse = |path: &Path, why: &str| ReportError::Write {
        path: path.to_path_buf(),
        error: std::io::Error::new(std::io::ErrorKind::AlreadyExists, why.to_string()),
    };
    if let Ok(m) = std::fs::symlink_metadata(plots) {
        if !m.is_dir() {
            return Err(refuse(
                plots,
                "not a folder (a link or a file): the plots would not go into the report",
            ));
        }
    }
    if folder == Folder::Klabs {
        return Ok(());
    }
    let page = dir.join("index.html");
    match klab_core::artifact::read_prefix(
        &page,
        klab_core::artifact::Input::new("report page", 64 << 20),
        4096,
    ) {
        Ok(head) => {
            let generator = crate::html::GENERATOR.as_bytes();
            return match head.windows(generator.len()).any(|w| w == generator) {
                true => Ok(()),
                false => Err(refuse(
                    &page,
                    "a page klab's report does not replace (not klab's, or an older klab's, from before it marked its pages): remove it, or give another --out",
                )),
            };
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    // No page: whatever the report would write over is not an earlier report's.
    let targets = ["report.md"]
        .iter()
        .map(|f| dir.join(f))
        .chain(report.plots.iter().map(|(name, _)| plots.join(name)));
    for t in targets {
        if std::fs::symlink_metadata(&t).is_ok() {
            return Err(refuse(
                &t,
                "not an earlier klab report's file (no klab page beside it): remove it, or give another --out",
            ));
        }
    }
    Ok(())
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
