//! Shared by the report's integration tests: the fixture run folder and a writable copy.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `tests/fixtures/run`: a trimmed copy of an H200 `klab lab` run (see the folder's
/// README.md; `tests/fixtures/make-fixture` rebuilds it from a run folder).
pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run")
}

/// Copy a folder tree (files and folders only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A writable copy of the fixture in a fresh temporary folder; the run is `<tmp>/run`.
pub fn fixture_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    copy_tree(&fixture(), &run);
    (tmp, run)
}
