//! Shared by receipt_*.rs and compare_*.rs: small valid receipts written as real files
//! (receipt JSON, raw sample CSVs, a sanitizer report) in a folder, and helpers that damage
//! them one way at a time.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use klab_core::artifact::sha256_hex;
use klab_core::gpustate::{BlockState, GpuState};
use klab_core::samples::{samples_csv, Regime, Sample, Timer};
use klab_core::stats::{gb_per_s, IntervalConfig, Summary, QUANTILE_RULE};
use klab_evidence::receipt::{
    Artifact, Correctness, Hardware, Measurement, RawSamples, Receipt, ResultSummary, SanitizerRun,
    Source, Warmup, Workload, RECEIPT_SCHEMA,
};
use serde_json::Value;

pub const UUID: &str = "GPU-0e2f0c4a-fixture-only";

/// The interval settings the tests compare with.
pub fn cfg() -> IntervalConfig {
    IntervalConfig::default()
}

/// Baseline rounds: 7 rounds of 5 samples (microseconds); round medians 100, 104, 99, 101,
/// 102, 100, 103 (7 rounds: the default, whose 95% interval is their range).
pub fn baseline_rounds() -> Vec<Vec<f64>> {
    vec![
        vec![100.0, 102.0, 98.0, 101.0, 99.0],
        vec![104.0, 103.0, 105.0, 102.0, 106.0],
        vec![99.0, 100.0, 98.0, 101.0, 97.0],
        vec![101.0, 100.0, 102.0, 99.0, 103.0],
        vec![102.0, 101.0, 103.0, 100.0, 104.0],
        vec![100.0, 99.0, 101.0, 98.0, 102.0],
        vec![103.0, 102.0, 104.0, 101.0, 105.0],
    ]
}

/// Candidate rounds: every baseline sample x 0.8, so every round ratio is 1.25.
pub fn candidate_rounds() -> Vec<Vec<f64>> {
    baseline_rounds()
        .into_iter()
        .map(|r| r.into_iter().map(|v| v * 0.8).collect())
        .collect()
}

fn digest(tag: &str) -> String {
    sha256_hex(tag.as_bytes())
}

/// A valid receipt without files: buffer-rotated over 2 slots, per-launch timer. Raw
/// samples, artifacts and result are filled by [`write_run`].
pub fn template(entry: &str) -> Receipt {
    Receipt {
        schema: RECEIPT_SCHEMA.to_string(),
        claim: format!("{entry} buffer-rotated triad_f32 latency"),
        command: vec!["klab".into(), "bench".into(), "triad".into()],
        created_utc: "2026-11-30T09:04:56Z".into(),
        klab_version: "0.1.0".into(),
        source: Source {
            repository: Some("https://example.invalid/klab".into()),
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            file: format!("kernels/{entry}.cu"),
            file_sha256: digest(entry),
            entry: entry.into(),
            binary_sha256: digest(&format!("{entry}.ptx")),
            compiler: "nvrtc 13.0".into(),
            flags: vec!["-lineinfo".into(), "--gpu-architecture=sm_90".into()],
            name: None,
            generated_by: None,
        },
        baseline_source: None,
        hardware: Hardware {
            gpu_uuid: UUID.into(),
            gpu_name: "NVIDIA H200".into(),
            compute_capability: "9.0".into(),
            driver: "580.95.05".into(),
            cuda_runtime: Some("13.0".into()),
            nvrtc: Some("13.0".into()),
            power_limit_w: Some(700.0),
            clock_policy: "observed".into(),
            isolation: "exclusive host".into(),
            l2_bytes: 62_914_560,
            theoretical_peak_gb_s: 4_800.0,
        },
        workload: Workload {
            operation: "triad: y[i] = fmaf(1.25f, x[i], z[i])".into(),
            dtype: "float32".into(),
            n: 1_000_003,
            grid: [3907, 1, 1],
            block: [256, 1, 1],
            dynamic_shared_bytes: 0,
            cache_regime: Regime::BufferRotated,
            rotation_slots: 2,
            useful_bytes_per_launch: 12_000_036,
            flops_per_launch: 2_000_006,
            sequence: Vec::new(),
        },
        correctness: Correctness {
            reference: "CPU double FMA, one cast to float".into(),
            rule: "|y - r| <= atol + rtol |r|".into(),
            atol: Some(2e-6),
            rtol: Some(2e-5),
            failures: 0,
            checked_after_timing: true,
            slots_checked: 2,
            sanitizer: vec![],
        },
        measurement: Measurement {
            timer: Timer::PerLaunch,
            warmup: Warmup {
                policy: "20 launches and every slot twice".into(),
                launches: 20,
            },
            samples_per_round: 0,
            rounds: 0,
            order: "ABBA within each round".into(),
            raw_samples: vec![],
            quantiles: QUANTILE_RULE.into(),
            profiler_attached: false,
            l2_scrub_bytes: None,
            gpu_state: vec![],
            phases: vec![],
        },
        artifacts: vec![],
        result: ResultSummary {
            median_us: 0.0,
            p10_us: 0.0,
            p90_us: 0.0,
            useful_gb_s: 0.0,
            pct_of_peak: 0.0,
            flagged_blocks: 0,
            rounds: None,
        },
        integrity: Some(integrity()),
    }
}

/// What a receipt of today's engine says of its timed launches: invalidated before each,
/// a floor far below the fixture's samples, checked and probe times beside them.
pub fn integrity() -> klab_evidence::receipt::Integrity {
    let rates = klab_core::floor::DeviceRates {
        hbm_gb_s: 4_800.0,
        l2_measured_gb_s: 10_000.0,
        l2_method: "klab_l2_read (fixture)".into(),
        l2_bytes: 62_914_560,
        peak_ops_per_s: Some(2.0e15),
        ops_method: "fixture".into(),
    };
    klab_evidence::receipt::Integrity {
        invalidation: klab_core::samples::Invalidation::EveryLaunch,
        policy: klab_core::samples::Invalidation::EveryLaunch
            .describe()
            .into(),
        slots_per_sample: 1,
        verified_samples: 8,
        floor: Some(klab_core::floor::Floor::of(12_000_036, 2_000_006, &rates)),
        checked_median_us: Some(10.0),
        checked_launches: 12,
        probe_median_us: Some(10.0),
        probe_invalidated_median_us: Some(10.0),
        probes: 8,
        flags: vec![],
    }
}

/// Move a (triad) template to size `n` with everything that follows from it: a grid of
/// `ceil(n / 256)` blocks, the contract's useful bytes and FLOPs, and their floor.
pub fn set_n(r: &mut Receipt, n: u64) {
    r.workload.n = n;
    r.workload.grid = [n.div_ceil(256) as u32, 1, 1];
    let (bytes, flops) =
        klab_spec::declared::builtin::builtin_work(klab_spec::declared::builtin::OpKind::Triad, n)
            .unwrap();
    r.workload.useful_bytes_per_launch = bytes;
    r.workload.flops_per_launch = flops;
    if let Some(f) = r.integrity.as_mut().and_then(|i| i.floor.as_mut()) {
        *f = klab_core::floor::Floor::of(bytes, flops, &f.rates);
    }
}

/// The sample CSV of one round, slots following `sample mod slots`.
pub fn csv(values: &[f64], slots: u64) -> String {
    let s: Vec<Sample> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| Sample {
            sample: i as u64,
            slot: i as u64 % slots.max(1),
            elapsed_us: v,
        })
        .collect();
    samples_csv(&s)
}

fn steady() -> GpuState {
    GpuState {
        utc: "2026-11-30T09:04:56Z".into(),
        uuid: Some(UUID.into()),
        sm_clock_mhz: Some(1980),
        ..Default::default()
    }
}

/// Write `template` with `rounds` into `dir` (created): one `samples-rNN.csv` per round,
/// a `memcheck.txt` report, hashes, result, and `receipt.json`. `first` says whether this
/// run took position 0 in odd rounds (ABBA). Returns the receipt path.
pub fn write_run(dir: &Path, mut r: Receipt, rounds: &[Vec<f64>], first: bool) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let slots = r.workload.rotation_slots;
    r.measurement.rounds = rounds.len() as u64;
    r.measurement.samples_per_round = rounds.first().map_or(0, |x| x.len() as u64);
    for (k, values) in rounds.iter().enumerate() {
        let round = k as u64 + 1;
        let name = format!("samples-r{round:02}.csv");
        let text = csv(values, slots);
        fs::write(dir.join(&name), &text).unwrap();
        let sha = sha256_hex(text.as_bytes());
        let position = u64::from((round % 2 == 1) != first);
        r.measurement.raw_samples.push(RawSamples {
            round,
            position,
            path: name.clone(),
            sha256: sha.clone(),
        });
        r.artifacts.push(Artifact {
            path: name,
            sha256: sha,
            bytes: text.len() as u64,
            role: "raw-samples".into(),
        });
        r.measurement.gpu_state.push(BlockState::new(
            format!("round {round}"),
            steady(),
            steady(),
        ));
    }
    let report = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
    fs::write(dir.join("memcheck.txt"), report).unwrap();
    r.artifacts.push(Artifact {
        path: "memcheck.txt".into(),
        sha256: sha256_hex(report.as_bytes()),
        bytes: report.len() as u64,
        role: "sanitizer-report".into(),
    });
    r.correctness.sanitizer.push(SanitizerRun {
        tool: "memcheck".into(),
        exit_status: Some(0),
        errors: 0,
        report: "memcheck.txt".into(),
    });
    let all: Vec<f64> = rounds.iter().flatten().copied().collect();
    if let Some(s) = Summary::of(&all) {
        r.result.median_us = s.median;
        r.result.p10_us = s.p10;
        r.result.p90_us = s.p90;
        // As klab computes them: `compare` recomputes both from the median.
        r.result.useful_gb_s = gb_per_s(r.workload.useful_bytes_per_launch, s.median);
        r.result.pct_of_peak = 100.0 * r.result.useful_gb_s / r.hardware.theoretical_peak_gb_s;
    }
    let path = dir.join("receipt.json");
    r.write(&path).unwrap();
    path
}

/// A valid baseline/candidate pair under `root`, folders `baseline/` and `candidate/`.
pub fn pair(root: &Path) -> (PathBuf, PathBuf) {
    pair_with(root, |_| {}, |_| {})
}

/// A pair whose templates were edited first (before files are written).
pub fn pair_with(
    root: &Path,
    edit_baseline: impl FnOnce(&mut Receipt),
    edit_candidate: impl FnOnce(&mut Receipt),
) -> (PathBuf, PathBuf) {
    let mut b = template("triad_baseline");
    edit_baseline(&mut b);
    let mut c = template("triad_candidate");
    edit_candidate(&mut c);
    let bp = write_run(&root.join("baseline"), b, &baseline_rounds(), true);
    let cp = write_run(&root.join("candidate"), c, &candidate_rounds(), false);
    (bp, cp)
}

/// Edit a receipt file as JSON (bypassing validation), written back pretty-printed.
pub fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut v);
    fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// Replace round `index`'s (0-based) raw sample file with `text` and re-record its hash
/// and size everywhere, so only the content checks can object.
pub fn replace_samples(receipt: &Path, index: usize, text: &str) {
    let dir = receipt.parent().unwrap();
    let r = Receipt::read(receipt).unwrap();
    let name = r.measurement.raw_samples[index].path.clone();
    fs::write(dir.join(&name), text).unwrap();
    let sha = sha256_hex(text.as_bytes());
    edit_json(receipt, |v| {
        v["measurement"]["raw_samples"][index]["sha256"] = Value::from(sha.clone());
        for a in v["artifacts"].as_array_mut().unwrap() {
            if a["path"].as_str() == Some(name.as_str()) {
                a["sha256"] = Value::from(sha.clone());
                a["bytes"] = Value::from(text.len() as u64);
            }
        }
    });
}
