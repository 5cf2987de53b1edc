//! Shared by the report's integration tests: the fixture run folder, a writable copy of it
//! (also one with rounds that have rates), and the builder of its `profile/profile.json`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use klab_core::bound::{
    compare, statement, KernelProfile, Measured, ProfileRecord, PROFILE_SCHEMA,
};
use klab_core::model::predict::predict;
use klab_core::variant::{BLOCK_ROWS, TILE};
use klab_core::Variant;

/// `tests/fixtures/run`: a trimmed copy of the H200 lab run
/// `evidence/2026-11-30-timing/lab-run-01` plus a sanitizer record, a profile and a triad
/// receipt (see the folder's README.md).
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

/// H200 rounds written by a `klab rounds` that records rates and a ceiling (the fixture's
/// own `rounds/summary.json` predates them): seven kernels at N = 4096, baseline sgeam,
/// ceiling copy_vec16.
pub const RATED_ROUNDS: &str = "../../evidence/2026-11-30-fast4/final/run/rounds-4096";

/// A writable copy of the fixture whose `rounds/rounds.csv` and `rounds/summary.json` are
/// [`RATED_ROUNDS`]', so that the rates table and the plots built on it have data.
pub fn fixture_with_rates() -> (tempfile::TempDir, PathBuf) {
    let (tmp, run) = fixture_copy();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join(RATED_ROUNDS);
    for f in ["rounds.csv", "summary.json"] {
        std::fs::copy(from.join(f), run.join("rounds").join(f)).unwrap();
    }
    (tmp, run)
}

const N: u64 = 4096;

fn kernel(variant: Variant, source: &str, m: Measured) -> KernelProfile {
    let p = predict(variant, N, TILE, BLOCK_ROWS).expect("prediction");
    let rows = compare(Some(&p), &m);
    let report = format!("{}.ncu-rep", variant.name());
    let bound = statement(
        format!(
            "{} at N = {N} (4096 x 4096 float32, 134,217,728 useful bytes), block 32x8, grid 128x128",
            variant.entry()
        ),
        "0 mismatches against the CPU oracle in the profiled process (validation launch and the measured launch's output)".into(),
        &report,
        &m,
        &rows,
    );
    KernelProfile {
        kernel: variant.name().into(),
        entry: variant.entry().into(),
        operation: format!("{:?}", variant.operation()).to_lowercase(),
        n: N,
        launch_skip: 0,
        argv: vec![
            "ncu".into(),
            "--csv".into(),
            format!("(H200 fixture: /work/shared/fixtures/h200/ncu/{source})"),
        ],
        report,
        raw_csv: format!("{}.csv", variant.name()),
        log: format!("{}.log", variant.name()),
        mismatches: Some(0),
        measured: m,
        absent_metrics: Vec::new(),
        counters: rows,
        bound,
    }
}

/// `profile.json` of the fixture, built through klab-core's bound types from real H200
/// numbers (Nsight Compute 2025.3.1, N = 4096, first profiled launch of each capture in
/// `/work/shared/fixtures/h200/ncu/`). A counter that capture did not collect is `None`.
pub fn fixture_profile() -> ProfileRecord {
    // ncu_raw_naive_metrics.csv (naive_k).
    let naive = Measured {
        duration_ns: Some(279_200.0),
        dram_pct: Some(10.35),
        global_store_sectors: Some(16_777_216.0),
        global_store_requests: Some(524_288.0),
        shared_load_conflicts: Some(0.0),
        registers_per_thread: Some(20.0),
        static_shared_bytes: Some(0.0),
        theoretical_occupancy_pct: Some(100.0),
        occupancy_limits: vec![
            ("barriers".into(), 32.0),
            ("blocks".into(), 32.0),
            ("registers".into(), 10.0),
            ("shared_mem".into(), 32.0),
            ("warps".into(), 8.0),
        ],
        ..Default::default()
    };
    // ncu_raw_sections_tiled.csv (SpeedOfLight, MemoryWorkloadAnalysis, LaunchStats,
    // Occupancy) and ncu_raw_tiled_bankconflicts.csv (shared load conflicts).
    let tiled = Measured {
        duration_ns: Some(78_464.0),
        dram_pct: Some(30.28),
        compute_pct: Some(24.68),
        memory_pct: Some(92.93),
        l1tex_pct: Some(96.65),
        l2_pct: Some(41.97),
        shared_load_conflicts: Some(16_488_054.0),
        registers_per_thread: Some(28.0),
        spill_instructions: Some(0.0),
        static_shared_bytes: Some(4096.0),
        theoretical_occupancy_pct: Some(100.0),
        achieved_occupancy_pct: Some(92.81),
        occupancy_limits: vec![
            ("barriers".into(), 32.0),
            ("blocks".into(), 32.0),
            ("registers".into(), 8.0),
            ("shared_mem".into(), 20.0),
            ("warps".into(), 8.0),
        ],
        ..Default::default()
    };
    // ncu_details_padded.csv (--set full, details page).
    let padded = Measured {
        duration_ns: Some(36_064.0),
        dram_pct: Some(65.05),
        compute_pct: Some(51.14),
        memory_pct: Some(65.05),
        l1tex_pct: Some(32.13),
        l2_pct: Some(81.70),
        registers_per_thread: Some(30.0),
        static_shared_bytes: Some(4224.0),
        theoretical_occupancy_pct: Some(100.0),
        achieved_occupancy_pct: Some(91.09),
        occupancy_limits: vec![
            ("barriers".into(), 32.0),
            ("blocks".into(), 32.0),
            ("registers".into(), 8.0),
            ("shared_mem".into(), 19.0),
            ("warps".into(), 8.0),
        ],
        ..Default::default()
    };
    ProfileRecord {
        schema: PROFILE_SCHEMA.into(),
        created_utc: "2026-11-30T10:51:00Z".into(),
        ncu_version: Some("2025.3.1".into()),
        device: Some("NVIDIA H200".into()),
        clock_control: "none".into(),
        cache_control: "all".into(),
        sections: vec![
            "SpeedOfLight".into(),
            "MemoryWorkloadAnalysis".into(),
            "LaunchStats".into(),
            "Occupancy".into(),
        ],
        rejected: vec![],
        kernels: vec![
            kernel(Variant::Naive, "ncu_raw_naive_metrics.csv", naive),
            kernel(
                Variant::Tiled,
                "ncu_raw_sections_tiled.csv, ncu_raw_tiled_bankconflicts.csv",
                tiled,
            ),
            kernel(Variant::Padded, "ncu_details_padded.csv", padded),
        ],
    }
}
