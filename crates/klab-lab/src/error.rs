//! The lab's one error type. A step that runs and fails is not an error: it is recorded in
//! lab.json with status `failed` or `error` and the run goes on. A [`LabError`] stops the
//! run: the plan is unusable, or the run folder cannot be written.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The plan is not one the lab can run (checked before any step).
    #[error("{what}: {why}")]
    Plan { what: String, why: String },
    /// A file the lab reads (its plan, what it hashes) or writes, refused or failed; the
    /// error names the path.
    #[error(transparent)]
    File(#[from] klab_core::artifact::FileError),
    #[error("creating a run folder under {}: {source}", .base.display())]
    RunDir {
        base: PathBuf,
        source: std::io::Error,
    },
    /// A klab child could not be started at all (not the same as a child that failed).
    #[error("starting {what}: {why}")]
    Launch { what: String, why: String },
}
