//! Shared by the nsys tests: the synthetic exports of `klab_tools::nsys::testdata`, written
//! into a temporary folder and opened.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use klab_tools::nsys::{self, testdata, Trace};
use tempfile::TempDir;

/// Writes one fixture (by file name) into a fresh temporary folder.
pub fn write(file: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let f = testdata::FIXTURES
        .iter()
        .find(|f| f.file == file)
        .unwrap_or_else(|| panic!("no fixture {file}"));
    let path = dir.path().join(f.file);
    (f.build)(&path).unwrap();
    (dir, path)
}

/// Writes and opens one fixture.
pub fn open(file: &str) -> (TempDir, Trace) {
    let (dir, path) = write(file);
    let t = nsys::open(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    (dir, t)
}

/// Whether some note contains `needle`.
pub fn has_note(t: &Trace, needle: &str) -> bool {
    t.notes.iter().any(|n| n.contains(needle))
}

/// Float equality to 1e-6 relative.
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// The file names in a folder, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

pub const UM_ADD: &str = "nsys2022.1_um_add.sqlite";
pub const SAXPY: &str = "nsys2022.2_saxpy.sqlite";
pub const TRANSPOSE32: &str = "nsys2024.5_transpose32.sqlite";
pub const REDUCE: &str = "nsys2026.1_reduce.sqlite";
pub const FAILED64: &str = "nsys2024.5_transpose64_failed.sqlite";
