//! Shared helpers for the sanitizer tests.
#![allow(dead_code)]

use std::path::PathBuf;

pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A fixture's text, unmodified, and the status from its last line `exit=N` (the capture
/// script's record of the command's exit status; absent in two files).
pub fn fixture(name: &str) -> (String, Option<i32>) {
    let text = std::fs::read_to_string(fixture_path(name)).expect("fixture");
    let exit = text
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("exit="))
        .and_then(|s| s.trim().parse().ok());
    (text, exit)
}

/// Every fixture file name.
pub fn all_fixtures() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixture_path(""))
        .expect("fixtures dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".txt"))
        .collect();
    v.sort();
    v
}

/// A small deterministic PRNG (xorshift64*), so the fuzz loops need no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}
