//! Why a report could not be made. Every variant renders as one line that names the path.

use std::path::PathBuf;

/// A report error. Missing or unreadable artifacts are not errors (they become notes in
/// the report); only a folder that is not a run, and a failed write, are.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The folder does not exist or is not a folder.
    #[error("{} is not a folder", .0.display())]
    NotAFolder(PathBuf),
    /// The folder has no `lab.json`.
    #[error("{} is not a klab run folder: it has no lab.json", .0.display())]
    NotARun(PathBuf),
    /// `lab.json` exists but cannot be read (or is not a regular file inside the folder),
    /// or a report file cannot be written over what is at its path.
    #[error(transparent)]
    File(#[from] klab_core::artifact::FileError),
    /// `lab.json` is not a lab record.
    #[error("{} is not a klab lab record: {message}", .path.display())]
    NotALabRecord {
        /// lab.json.
        path: PathBuf,
        /// What did not parse.
        message: String,
    },
    /// Writing the report failed (no partial file is left: every file is written to a
    /// temporary name and renamed).
    #[error("cannot write {}: {error}", .path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The write error.
        error: std::io::Error,
    },
}
