//! Reports klab did not run: read a saved text report (capped, regular files only, through
//! [`klab_core::artifact`]) and give it to the same [`parse`] a run uses, so an imported
//! report gets the same findings and outcome.

use std::path::{Path, PathBuf};

use klab_core::artifact::{read_regular, FileError, Input};

use super::parse::{parse, prefix_at, report_lines};
use super::{Options, Report, Tool};

/// What klab reads, said when a file is something else.
pub const EXPECTED_FORMAT: &str = "a Compute Sanitizer text report (lines starting `=========`, as `compute-sanitizer --tool TOOL PROGRAM > report.txt 2>&1` writes it)";

/// Why a report was not imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{} is not a report klab reads{}: expected {EXPECTED_FORMAT}", .path.display(), .looks_like.map(|l| format!(" (it looks like {l})")).unwrap_or_default())]
    NotAReport {
        path: PathBuf,
        looks_like: Option<&'static str>,
    },
}

/// Parse the report at `path` as `tool`'s. The exit status is taken from a last line
/// `exit=N` (what `klab sanitize` and the H200 captures save after the report) and the
/// `--error-exitcode` from a `$ compute-sanitizer ...` command line above it; without
/// them the status is unknown and klab's default error exit code is assumed. A report
/// that is not valid UTF-8 is read lossily, as a run's captured output is.
pub fn import(tool: Tool, path: &Path) -> Result<Report, ImportError> {
    let bytes = read_regular(path, Input::SANITIZER_REPORT)?;
    let text = String::from_utf8_lossy(&bytes);
    // No line carries the prefix: another format, or not a report at all.
    if !report_lines(&text).any(|l| prefix_at(l).is_some()) {
        return Err(ImportError::NotAReport {
            path: path.to_path_buf(),
            looks_like: looks_like(&text),
        });
    }
    let exit = report_lines(&text)
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .and_then(|l| l.strip_prefix("exit="))
        .and_then(|s| s.trim().parse::<i32>().ok());
    let error_exitcode = error_exitcode(&text).unwrap_or(Options::default().error_exitcode);
    Ok(parse(tool, &text, exit, error_exitcode))
}

/// `--error-exitcode N` on a `$ ` command line at the top of a saved report.
fn error_exitcode(text: &str) -> Option<i32> {
    let first = report_lines(text).next()?.strip_prefix("$ ")?;
    let mut words = first.split_whitespace();
    words.find(|w| *w == "--error-exitcode")?;
    words.next()?.parse().ok()
}

/// A guess at a file's format, for the refusal.
fn looks_like(text: &str) -> Option<&'static str> {
    let t = text.trim_start();
    if t.starts_with("<?xml") || t.starts_with('<') {
        Some("XML (compute-sanitizer --xml): save the text report instead")
    } else if t.starts_with('{') || t.starts_with('[') {
        Some("JSON")
    } else if t.is_empty() {
        Some("an empty file")
    } else {
        None
    }
}
