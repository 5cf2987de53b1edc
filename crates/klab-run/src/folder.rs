//! Where a command's results go: a fresh folder, never one that already holds results.

use std::path::{Path, PathBuf};

use crate::error::{RunError, Within};

/// A fresh output folder: `dir` if given (must not exist or be empty), else the next
/// `artifacts/<what>/run-NN`.
pub fn output_dir(dir: Option<&Path>, what: &str) -> Result<PathBuf, RunError> {
    match dir {
        Some(d) => {
            if d.exists()
                && std::fs::read_dir(d)
                    .map(|mut r| r.next().is_some())
                    .unwrap_or(true)
            {
                return Err(RunError::Message(format!("output folder {} already exists and is not empty (klab never overwrites results)", d.display())));
            }
            std::fs::create_dir_all(d).within(|| format!("creating {}", d.display()))?;
            Ok(d.to_path_buf())
        }
        None => klab_core::artifact::create_run_dir(&Path::new("artifacts").join(what))
            .within(|| format!("creating a run folder under artifacts/{what}")),
    }
}
