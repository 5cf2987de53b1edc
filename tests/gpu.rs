//! The transpose harness contract on a real GPU. Each test skips (saying so) where no CUDA
//! device can be opened, and fails instead under KLAB_REQUIRE_GPU=1 (scripts/gpu-run).

mod common;

use std::process::Output;

use common::{gpu_or_skip, klab, stdout_of_success};
use klab_core::device::Dim3;
use klab_cuda::device::Device;
use klab_cuda::gpu::CudaBackend;
use klab_cuda::nvrtc::{self, Cache, CompileSpec};
use klab_engine::backend::{Arg, Backend};
use klab_evidence::row::{parse_csv, TransposeRow, CSV_HEADER};
use klab_spec::plan::{self, LaunchPlan};
use klab_spec::Variant;

const LADDER: [u64; 7] = [1, 7, 31, 32, 33, 65, 257];

fn transpose(args: &[&str]) -> (Output, Vec<TransposeRow>) {
    let o = klab().arg("transpose").args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        stdout.starts_with(CSV_HEADER),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(stdout.matches(CSV_HEADER).count(), 1, "header once");
    let rows = parse_csv(&stdout).unwrap();
    (o, rows)
}

/// copy, naive, tiled, padded correct and timed; broken rejected and untimed.
fn assert_contract(rows: &[TransposeRow], what: &str) {
    let names: Vec<&str> = rows.iter().map(|r| r.variant.as_str()).collect();
    assert_eq!(
        names,
        ["copy", "naive", "tiled", "padded", "broken"],
        "{what}"
    );
    for r in rows {
        if r.variant == "broken" {
            assert!(!r.correct && r.timing.is_none(), "{what}: {r:?}");
        } else {
            assert!(r.correct, "{what}: {r:?}");
            assert_eq!((r.mismatches, r.max_abs_error), (0, 0.0), "{what}: {r:?}");
            let t = r.timing.expect("a passing variant is timed");
            assert!(
                t.average_ms > 0.0 && t.effective_gb_s > 0.0,
                "{what}: {r:?}"
            );
        }
    }
}

#[test]
fn ladder_sizes_every_variant_and_broken_exits_2() {
    if !gpu_or_skip("ladder_sizes_every_variant_and_broken_exits_2") {
        return;
    }
    for n in LADDER {
        let ns = n.to_string();
        let (o, rows) = transpose(&["all", &ns, "1"]);
        assert_eq!(o.status.code(), Some(2), "all {n} 1");
        assert_contract(&rows, &format!("N={n}"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("block 32x8x1"),
            "launch shape on stderr: {err}"
        );
        assert!(err.contains("registers"), "resources on stderr: {err}");
    }
}

#[test]
fn each_correct_variant_alone_exits_0_and_broken_alone_exits_2() {
    if !gpu_or_skip("each_correct_variant_alone_exits_0_and_broken_alone_exits_2") {
        return;
    }
    for v in ["copy", "naive", "tiled", "padded"] {
        for n in ["33", "4096"] {
            let (o, rows) = transpose(&[v, n, "20"]);
            assert_eq!(o.status.code(), Some(0), "{v} {n}");
            assert_eq!(rows.len(), 1);
            assert!(
                rows[0].correct && rows[0].timing.is_some(),
                "{v} {n}: {:?}",
                rows[0]
            );
        }
    }
    for n in ["1", "33", "1024", "4096"] {
        let (o, rows) = transpose(&["broken", n, "100"]);
        assert_eq!(o.status.code(), Some(2), "broken {n}");
        assert!(!rows[0].correct && rows[0].timing.is_none());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("never timed"), "{err}");
    }
}

#[test]
fn benchmark_size_4096_all_variants() {
    if !gpu_or_skip("benchmark_size_4096_all_variants") {
        return;
    }
    let (o, rows) = transpose(&["all", "4096", "100"]);
    assert_eq!(o.status.code(), Some(2));
    assert_contract(&rows, "all 4096 100");
    // Padded moves the same bytes as naive with coalesced stores: it must not be slower.
    let ms = |v: &str| {
        rows.iter()
            .find(|r| r.variant == v)
            .unwrap()
            .timing
            .unwrap()
            .average_ms
    };
    assert!(
        ms("padded") < ms("naive"),
        "padded {} ms vs naive {} ms",
        ms("padded"),
        ms("naive")
    );
}

#[test]
fn n_46341_proves_64_bit_indexing() {
    if !gpu_or_skip("n_46341_proves_64_bit_indexing") {
        return;
    }
    // 46341^2 = 2,147,488,281 > 2^31: a 32-bit element index would wrap.
    let (o, rows) = transpose(&["all", "46341", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_contract(&rows, "all 46341 1");
    assert!(err.contains("distinct 32-bit patterns"), "{err}");
}

#[test]
fn distinct_bit_patterns_survive_every_correct_variant() {
    if !gpu_or_skip("distinct_bit_patterns_survive_every_correct_variant") {
        return;
    }
    // 4097 is past the exact-integer range and one past a tile multiple.
    let (o, rows) = transpose(&["all", "4097", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert_contract(&rows, "all 4097 3");
}

#[test]
fn too_large_for_device_memory_is_a_one_line_error() {
    if !gpu_or_skip("too_large_for_device_memory_is_a_one_line_error") {
        return;
    }
    // 2 x 2,000,000^2 x 4 bytes = 32 TB; the grid (62,500 blocks a side) is still legal.
    let o = klab()
        .args(["transpose", "padded", "2000000", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap();
    assert!(last.starts_with("error: N = 2000000 needs"), "{err}");
    assert!(last.contains("GB is free"), "{err}");
    // Past the grid limit the plan is refused naming it.
    let o = klab()
        .args(["transpose", "padded", "3000000", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("MAX_GRID_DIM_Y"), "{err}");
}

fn backend() -> CudaBackend {
    let device = Device::open(0).unwrap();
    let spec = CompileSpec::transpose_lab(&device.facts().arch());
    let compiled = nvrtc::compile(&spec, &Cache::disabled()).unwrap();
    CudaBackend::new(device, &compiled, Default::default()).unwrap()
}

#[test]
fn seed_004_block_shapes_are_refused_and_launch_status_is_checked() {
    if !gpu_or_skip("seed_004_block_shapes_are_refused_and_launch_status_is_checked") {
        return;
    }
    let mut b = backend();
    let k = b.kernel(Variant::Copy.entry()).unwrap();
    let res = b.resources(&k);
    for tile in [64u32, 128] {
        let p = LaunchPlan {
            grid: Dim3::new(16, 16, 1),
            block: Dim3::new(tile, tile, 1),
            dynamic_shared_bytes: 0,
        };
        let e = plan::validate(&p, b.limits(), Some(&res)).unwrap_err();
        assert!(e.to_string().contains("threads per block"), "{e}");
        // Launched anyway, the driver refuses it and the backend reports that: a run that
        // launches nothing is never silent.
        let mut out = b.alloc(64).unwrap();
        let inp = b.alloc(64).unwrap();
        b.fill_bytes(&mut out, 0).unwrap();
        let err = b
            .launch(&k, &p, &[Arg::Buffer(&out), Arg::Buffer(&inp), Arg::I32(8)])
            .unwrap_err();
        assert!(err.message.contains("CUDA_ERROR_INVALID_VALUE"), "{err}");
    }
}

/// A timed launch's inputs are perturbed on the device at the positions the host draws
/// (klab_copy_elements against klab_engine::inputs::drawn_position), for every element size.
#[test]
fn perturbation_on_the_device_copies_the_elements_the_host_draws() {
    if !gpu_or_skip("perturbation_on_the_device_copies_the_elements_the_host_draws") {
        return;
    }
    // With klab's module (the device checker's policy) and without it (the CPU oracle's).
    for checker in [
        klab_engine::verify::Checker::Device,
        klab_engine::verify::Checker::Cpu,
    ] {
        let mut b = backend();
        b.set_verify_policy(klab_engine::verify::VerifyPolicy {
            checker,
            ..Default::default()
        });
        perturb_like_the_host(&mut b, checker);
    }
}

fn perturb_like_the_host(b: &mut CudaBackend, checker: klab_engine::verify::Checker) {
    for size in [1usize, 2, 4, 8] {
        let elements = 10_007u64;
        let bytes = elements as usize * size;
        let (dst_bytes, src_bytes): (Vec<u8>, Vec<u8>) = (0..bytes)
            .map(|i| ((i % 251) as u8, (i % 241) as u8 ^ 0xa5))
            .unzip();
        let mut dst = b.alloc_bytes(bytes).unwrap();
        let mut src = b.alloc_bytes(bytes).unwrap();
        b.upload_bytes(&mut dst, &dst_bytes).unwrap();
        b.upload_bytes(&mut src, &src_bytes).unwrap();
        let key = 0x1234_5678_9abc_def0 ^ size as u64;
        b.copy_elements(&mut dst, &src, elements, size, key, 64)
            .unwrap();
        let mut got = vec![0u8; bytes];
        b.download_bytes(&dst, &mut got).unwrap();
        let mut want = dst_bytes.clone();
        for j in 0..64 {
            let at = klab_engine::inputs::drawn_position(key, j, elements) as usize * size;
            want[at..at + size].copy_from_slice(&src_bytes[at..at + size]);
        }
        assert_eq!(got, want, "{checker:?}, element size {size}");
        assert_ne!(
            got, dst_bytes,
            "{checker:?}, element size {size}: nothing copied"
        );
    }
}

#[test]
fn driver_attributes_match_the_compiler_report_and_device_facts_are_sane() {
    if !gpu_or_skip("driver_attributes_match_the_compiler_report_and_device_facts_are_sane") {
        return;
    }
    let device = Device::open(0).unwrap();
    let f = device.facts().clone();
    assert!(
        f.uuid.starts_with("GPU-") && f.uuid.len() == 40,
        "{}",
        f.uuid
    );
    assert!(f.sm_count > 0 && f.l2_bytes > 0 && f.bus_width_bits > 0);
    assert!(f.theoretical_peak_gb_s() > 100.0);
    assert_eq!(f.limits.max_threads_per_block, 1024);
    assert!(f.nvrtc_version.is_some());
    let spec = CompileSpec::transpose_lab(&f.arch());
    let compiled = nvrtc::compile(&spec, &Cache::disabled()).unwrap();
    let ptxas = compiled.ptxas_resources();
    let mut b = CudaBackend::new(device, &compiled, Default::default()).unwrap();
    for v in Variant::ALL {
        let k = b.kernel(v.entry()).unwrap();
        let d = b.resources(&k);
        let p = ptxas
            .iter()
            .find(|r| r.kernel == v.entry())
            .unwrap_or_else(|| {
                panic!(
                    "{v} missing from the ptxas report; NVRTC log:\n{}",
                    compiled.log
                )
            });
        assert_eq!(
            (d.registers, d.static_shared_bytes, d.local_bytes),
            (p.registers, p.static_shared_bytes, p.local_bytes),
            "{v}"
        );
    }
}

/// A manifest over `source` whose kernels are copies (the copy operation, the transpose
/// lab's launch shape), each `(name, entry)`.
fn copy_manifest(source: &str, kernels: &[(&str, &str)]) -> String {
    let mut m = format!("source = \"{source}\"\n");
    for (name, entry) in kernels {
        m += &format!("[[kernel]]\nname = \"{name}\"\nentry = \"{entry}\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [32, 8, 1]\nelements_per_block = [32, 32]\n");
    }
    m
}

fn run_klab(args: &[&str]) -> (Option<i32>, String, String) {
    let o = klab().args(args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn triad_modes_follow_the_seed() {
    if !gpu_or_skip("triad_modes_follow_the_seed") {
        return;
    }
    let (code, out, err) = run_klab(&["triad", "--check"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.matches("correctness=PASS").count(), 8, "{out}");
    for case in ["seed=7 n=0 ", "seed=7 n=257 ", "seed=101 n=1000003 "] {
        assert!(out.contains(case), "{case} missing: {out}");
    }
    let (code, out, _) = run_klab(&["triad", "--buggy"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("buggy launch completed"));
    let (code, out, _) = run_klab(&["triad", "--profile"]);
    assert_eq!(code, Some(0), "{out}");

    let dir = tempfile::tempdir().unwrap();
    for (mode, file) in [("--bench-hot", "hot.csv"), ("--bench-rotate", "rot.csv")] {
        let path = dir.path().join(file);
        let (code, out, err) = run_klab(&["triad", mode, path.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(out.contains("post_timing_slots_checked="), "{out}");
        let text = std::fs::read_to_string(&path).unwrap();
        let samples = klab_core::samples::parse_samples_csv(
            text.as_bytes(),
            if mode == "--bench-hot" {
                1
            } else {
                out.split("slots=")
                    .nth(1)
                    .unwrap()
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            },
        )
        .unwrap();
        assert_eq!(samples.len(), 200);
        let receipt = path.with_file_name(file.replace(".csv", ".receipt.json"));
        let r = klab_evidence::receipt::Receipt::load(&receipt).unwrap();
        assert_eq!(r.measurement.samples_per_round, 200);
        assert!(r.measurement.warmup.launches >= 20);
        if mode == "--bench-rotate" {
            assert!(
                r.workload.rotation_slots >= 8,
                "{}",
                r.workload.rotation_slots
            );
            assert!(r.workload.rotation_slots * 12 * 1_000_003 >= 2 * r.hardware.l2_bytes);
        }
    }
}

#[test]
fn bench_every_regime_and_timer_writes_a_valid_receipt() {
    if !gpu_or_skip("bench_every_regime_and_timer_writes_a_valid_receipt") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (k, regime, timer) in [
        ("padded", "same-buffer", "per-launch"),
        ("padded", "l2-flushed", "per-launch"),
        ("triad_f32", "buffer-rotated", "batch:10"),
        ("tiled", "same-buffer", "graph:10"),
    ] {
        let out = dir
            .path()
            .join(format!("{k}-{regime}-{}", timer.replace(':', "")));
        let (code, stdout, err) = run_klab(&[
            "bench",
            k,
            "--regime",
            regime,
            "--timer",
            timer,
            "--samples",
            "30",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "{k} {regime} {timer}: {stdout}{err}");
        let r = klab_evidence::receipt::Receipt::load(&out.join("receipt.json")).unwrap();
        r.validate().unwrap();
        assert_eq!(
            r.measurement.timer.label().contains("batch"),
            timer.starts_with("batch")
        );
        assert_eq!(
            r.measurement.l2_scrub_bytes.is_some(),
            regime == "l2-flushed"
        );
        assert_eq!(r.measurement.gpu_state.len(), 1);
        assert!(
            r.measurement.gpu_state[0].before.sm_clock_mhz.is_some(),
            "NVML state read"
        );
        assert!(r.result.median_us > 0.0);
    }
    // A known-broken kernel is rejected and never timed.
    let out = dir.path().join("broken");
    let (code, stdout, _) = run_klab(&["bench", "broken", "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stdout}");
    assert!(!out.join("receipt.json").exists());
}

#[test]
fn rounds_then_compare_padded_against_tiled() {
    if !gpu_or_skip("rounds_then_compare_padded_against_tiled") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rounds");
    let (code, stdout, err) = run_klab(&[
        "rounds",
        "tiled",
        "padded",
        "--rounds",
        "6",
        "--samples",
        "30",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}{err}");
    let csv = std::fs::read_to_string(out.join("rounds.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6 * 4, "{csv}");
    // Each block's process was started ahead and did its setup while the block before
    // finished.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let ahead = summary["time"]["overlapped_s"].as_f64().unwrap_or(0.0);
    assert!(ahead > 0.0, "{}", summary["time"]);
    // Six rounds, the fewest that give a 95% interval: their range, all above 1.
    assert!(
        stdout.contains("candidate faster: ratio")
            && stdout.contains("order statistics 1 and 6 of 6"),
        "{stdout}"
    );
    let (code, cmp, err) = run_klab(&[
        "compare",
        out.join("tiled.receipt.json").to_str().unwrap(),
        out.join("padded.receipt.json").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{cmp}{err}");
    // Tamper with one sample file: compare must refuse.
    let victim = std::fs::read_dir(out.join("blocks"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let csv = std::fs::read_dir(&victim)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "csv"))
        .unwrap();
    let mut text = std::fs::read_to_string(&csv).unwrap();
    text.push_str("999,0,1.0\n");
    std::fs::write(&csv, text).unwrap();
    let (code, _, err) = run_klab(&[
        "compare",
        out.join("tiled.receipt.json").to_str().unwrap(),
        out.join("padded.receipt.json").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{err}");
}

#[test]
fn check_accepts_correct_kernels_and_rejects_broken_ones_in_isolation() {
    if !gpu_or_skip("check_accepts_correct_kernels_and_rejects_broken_ones_in_isolation") {
        return;
    }
    let (code, out, err) = run_klab(&[
        "check",
        "padded",
        "triad_f32",
        "reduce_guarded",
        "--sizes",
        "1,33,257,1024",
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.matches("verdict: PASS").count(), 3, "{out}");
    // Mutants run only in the audit: a user manifest of the same bug goes through check.
    let (_dir, guard_le) = mutant_as_user("mut_guard_le");
    let (code, out, _) = run_klab(&[
        "check",
        "reduce_drop_tail",
        &guard_le,
        "padded",
        "--sizes",
        "33,611,1024",
    ]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("check reduce_drop_tail"), "{out}");
    assert!(
        out.matches("verdict: PASS").count() == 1,
        "padded still passes after the others: {out}"
    );
}

#[test]
fn reduce_lab_reproduces_its_outcome() {
    if !gpu_or_skip("reduce_lab_reproduces_its_outcome") {
        return;
    }
    let (code, out, err) = run_klab(&["reduce-lab"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("the reduction lab reproduced"), "{out}");
}

#[test]
fn a_faulting_kernel_fails_alone_and_the_others_still_run() {
    if !gpu_or_skip("a_faulting_kernel_fails_alone_and_the_others_still_run") {
        return;
    }
    let (_dir, wild) = mutant_as_user("mut_wild_store");
    let (code, out, err) = run_klab(&["check", &wild, "padded", "--sizes", "33"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        out.contains("check user_mut_wild_store: FAIL:"),
        "{out}{err}"
    );
    assert!(err.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{err}");
    assert_eq!(
        out.matches("verdict: PASS").count(),
        1,
        "padded ran after the fault: {out}"
    );
}

/// A round's blocks share a process; a kernel that faults in it is judged in a process of
/// its own, and the blocks after it run alone too (the fault leaves the context unusable),
/// so the kernels before and after it still pass. `--isolation block` runs every block alone.
#[test]
fn a_fault_in_a_rounds_process_is_judged_alone_and_the_others_still_pass() {
    if !gpu_or_skip("a_fault_in_a_rounds_process_is_judged_alone_and_the_others_still_pass") {
        return;
    }
    let (_dir, wild) = mutant_as_user("mut_wild_store");
    let out = tempfile::tempdir().unwrap();
    for isolation in ["round", "block"] {
        let dir = out.path().join(isolation);
        let (code, stdout, err) = run_klab(&[
            "rounds",
            "padded",
            &wild,
            "--n",
            "256",
            "--rounds",
            "1",
            "--samples",
            "10",
            "--isolation",
            isolation,
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{stdout}{err}");
        for line in [
            "position 0 padded: median",
            "position 1 user_mut_wild_store: FAILED",
            "position 2 user_mut_wild_store: FAILED",
            "position 3 padded: median",
        ] {
            assert!(err.contains(line), "{isolation}: {line}: {err}");
        }
        let log = std::fs::read_to_string(dir.join("rounds.log")).unwrap();
        assert_eq!(
            log.contains("# round 1: its 4 blocks in one process"),
            isolation == "round",
            "{log}"
        );
        // Alone: every block in block isolation, the faulting kernel's and those after it
        // in round isolation.
        let alone = log.matches("# round 1 position").count();
        assert_eq!(alone, if isolation == "round" { 3 } else { 4 }, "{log}");
        // The round's process settled on the first kernel first; that block counts nowhere.
        assert_eq!(
            log.contains("settling block blocks/r01-settle-padded: median"),
            isolation == "round",
            "{log}"
        );
        assert_eq!(
            dir.join("blocks/r01-settle-padded/receipt.json").is_file(),
            isolation == "round"
        );
        assert!(log.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{log}");
    }
}

/// Issue 5's done-when on the device: ncu on naive, tiled and padded shows the predicted
/// and measured sectors per request (32 for naive stores) and the bank conflicts (tiled
/// high, padded near zero) side by side, and they agree.
/// Each counter at a size where the H200 reads it steadily. naive's store sectors per
/// request at 4096: at 1024 they moved from 31.2 to 34.2 from run to run, with klab's old
/// binary and its new one alike, where labs at 4096 read 32.01-32.03
/// (evidence/2026-12-04-child-protocol). The bank conflicts at 1024: at 4096 padded's shared
/// loads read about 60 000 conflicts (0.12 per request) in every lab, which the profile
/// reports as a disagreement with the model (evidence/2026-12-04-report-formats).
#[test]
fn profile_counters_agree_with_the_address_model() {
    if !gpu_or_skip("profile_counters_agree_with_the_address_model") {
        return;
    }
    let Some(ncu) = klab_tools::ncu::locate_ncu(None) else {
        if std::env::var_os("KLAB_REQUIRE_GPU").is_some() {
            panic!("ncu not found on PATH or in /usr/local/cuda/bin");
        }
        eprintln!("SKIPPED profile_counters_agree_with_the_address_model: no ncu");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // counters.csv of `klab profile KERNELS --n N`.
    let profile = |kernels: &[&str], n: u64| -> String {
        let out = dir.path().join(format!("p{n}"));
        let o = klab()
            .arg("profile")
            .args(kernels)
            .args(["--n", &n.to_string(), "--ncu"])
            .arg(&ncu)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let csv = std::fs::read_to_string(out.join("counters.csv")).unwrap();
        eprintln!("{csv}");
        csv
    };
    let row = |csv: &str, kernel: &str, n: u64, quantity: &str| -> (f64, f64, String) {
        let line = csv
            .lines()
            .find(|l| l.starts_with(&format!("{kernel},{n},{quantity},")))
            .unwrap_or_else(|| panic!("{kernel} {quantity} in\n{csv}"));
        let f: Vec<&str> = line.split(',').collect();
        (
            f[3].parse().unwrap(),
            f[4].parse().unwrap(),
            f[5].to_string(),
        )
    };
    let large = profile(&["naive"], 4096);
    let (p, m, a) = row(&large, "naive", 4096, "global store sectors/request");
    assert_eq!(p, 32.0);
    assert!((m - 32.0).abs() < 0.5, "naive store sectors/request {m}");
    assert_eq!(a, "agrees");
    let small = profile(&["tiled", "padded"], 1024);
    let (p, m, a) = row(&small, "tiled", 1024, "shared load bank conflicts");
    assert_eq!(p, 31.0 * 1024.0 * 1024.0 / 32.0);
    assert!(m > 0.9 * p, "tiled conflicts {m} vs {p}");
    assert_eq!(a, "agrees");
    let (p, m, a) = row(&small, "padded", 1024, "shared load bank conflicts");
    assert_eq!(p, 0.0);
    // A tenth of a conflict per shared load request at most (1024^2 / 32 of them).
    assert!(m < 0.1 * 32768.0, "padded conflicts {m}");
    assert_eq!(a, "agrees");
    for (csv, k, n) in [
        (&large, "naive", 4096),
        (&small, "tiled", 1024),
        (&small, "padded", 1024),
    ] {
        let (_, _, a) = row(csv, k, n, "global load sectors/request");
        assert_eq!(a, "agrees", "{k} loads");
    }
}

/// Issue 6's kernels and baselines pass the oracle on the ladder (ragged sizes and the
/// 4097 matrix with -0.0, subnormals and NaN payloads included).
#[test]
fn fast_variants_and_library_baselines_pass_the_oracle() {
    if !gpu_or_skip("fast_variants_and_library_baselines_pass_the_oracle") {
        return;
    }
    let o = klab()
        .args([
            "check",
            "memcpy",
            "sgeam",
            "copy_vec16",
            "vec4_t1",
            "archive/vec4_t2",
            "vec4_t4",
            "reg4_64",
            "archive/reg4_128x64",
            "own4_64",
            "own8_64_o5",
            "lean_64_cm",
            "leanu_64_cm",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn example(file: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/user")
        .join(file)
        .display()
        .to_string()
}

/// The comparison users want most, on their own kernels: rounds of two user-manifest
/// kernels (started from another folder, so the children must get the manifest's absolute
/// path), combined receipts, and `klab compare` of them.
#[test]
fn rounds_and_compare_of_two_user_manifest_kernels() {
    if !gpu_or_skip("rounds_and_compare_of_two_user_manifest_kernels") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = example("mine.toml");
    stdout_of_success(
        klab()
            .current_dir(dir.path())
            .args([
                "rounds",
                &format!("{manifest}:my_naive"),
                &format!("{manifest}:my_tiled"),
            ])
            .args([
                "--n",
                "1024",
                "--rounds",
                "3",
                "--samples",
                "30",
                "--out",
                "r",
            ]),
    );
    let r = dir.path().join("r");
    let text = stdout_of_success(
        klab()
            .arg("compare")
            .arg(r.join("my_naive.receipt.json"))
            .arg(r.join("my_tiled.receipt.json")),
    );
    assert!(text.contains("ratio"), "{text}");
    // Every block measured the user's kernel, never a built-in of the same family.
    let receipt = std::fs::read_to_string(r.join("my_tiled.receipt.json")).unwrap();
    assert!(receipt.contains("\"entry\": \"my_tiled\""), "{receipt}");
}

/// A kernel that spins forever is stopped by the watchdog as that kernel's failure (exit
/// 2, "hung"), and the command's other kernels still run.
#[test]
fn a_spinning_kernel_is_stopped_in_check_bench_and_rounds() {
    if !gpu_or_skip("a_spinning_kernel_is_stopped_in_check_bench_and_rounds") {
        return;
    }
    let spin = format!("{}:spin", example("spin.toml"));
    let dir = tempfile::tempdir().unwrap();
    let runs: [Vec<String>; 3] = [
        // Two sizes: the whole ladder of padded (its index-overflow case moves 17 GB)
        // takes longer than the 10 s watchdog meant for the spinning kernel.
        vec![
            "check".into(),
            spin.clone(),
            "padded".into(),
            "--sizes".into(),
            "33,64".into(),
            "--timeout".into(),
            "10".into(),
        ],
        vec![
            "bench".into(),
            spin.clone(),
            "--n".into(),
            "256".into(),
            "--timeout".into(),
            "10".into(),
            "--out".into(),
            dir.path().join("b").display().to_string(),
        ],
        vec![
            "rounds".into(),
            "padded".into(),
            spin.clone(),
            "--n".into(),
            "256".into(),
            "--rounds".into(),
            "1".into(),
            "--samples".into(),
            "10".into(),
            "--timeout".into(),
            "10".into(),
            "--out".into(),
            dir.path().join("r").display().to_string(),
        ],
    ];
    for argv in runs {
        let t0 = std::time::Instant::now();
        let o = klab().args(&argv).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(2), "{argv:?}: {text}");
        assert!(
            text.contains("hung: killed by the watchdog after 10"),
            "{argv:?}: {text}"
        );
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(120),
            "{argv:?}"
        );
        if argv[0] == "check" {
            // padded, after the hung kernel, was still checked.
            assert!(text.contains("verdict: PASS"), "{text}");
        }
        if argv[0] == "rounds" {
            assert!(text.contains("position 0 padded: median"), "{text}");
        }
    }
}

/// One of the audit's mutants as a user would bring it: a manifest of their own (in a temp
/// folder) over kernels/mutants.cu, the kernel renamed `user_NAME`. Returns the folder (keep
/// it alive) and the kernel spec.
fn mutant_as_user(name: &str) -> (tempfile::TempDir, String) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("kernels/mutants.toml")).unwrap();
    let block = text
        .split("[[kernel]]")
        .find(|b| b.contains(&format!("name = \"{name}\"")))
        .unwrap_or_else(|| panic!("no mutant {name}"));
    let block = block.replace(
        &format!("name = \"{name}\""),
        &format!("name = \"user_{name}\""),
    );
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("bugs.toml");
    let source = root.join("kernels/mutants.cu");
    std::fs::write(
        &manifest,
        format!("source = \"{}\"\n[[kernel]]{block}", source.display()),
    )
    .unwrap();
    let spec = format!("{}:user_{name}", manifest.display());
    (dir, spec)
}

/// Kernels as users have them, on the device: the transpose lab brought as a precompiled
/// cubin and PTX (loaded by the driver, the PTX JIT-compiled; resources from the loaded
/// module) and a template instance named by its entry pass check, are timed by bench with
/// receipts that bind the module's bytes, and a cubin is clean under memcheck.
#[test]
fn precompiled_modules_and_template_entries_check_bench_and_sanitize() {
    let test = "precompiled_modules_and_template_entries_check_bench_and_sanitize";
    if !gpu_or_skip(test) {
        return;
    }
    let arch = Device::open(0).unwrap().facts().arch();
    let dir = common::precompiled_transposes(&arch);
    std::fs::write(
        dir.path().join("tcopy.cu"),
        r#"template <int T, int R>
__global__ void tcopy(float* out, const float* in, int n) {
  const int x = blockIdx.x * T + threadIdx.x;
  const int y = blockIdx.y * T + threadIdx.y;
  for (int k = 0; k < T; k += R) {
    if (x < n && y + k < n) out[static_cast<size_t>(y + k) * n + x] = in[static_cast<size_t>(y + k) * n + x];
  }
}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("template.toml"),
        copy_manifest("tcopy.cu", &[("tcopy_32x8", "tcopy<32, 8>")]),
    )
    .unwrap();
    let path = |f: &str| dir.path().join(f).display().to_string();
    let (code, out, err) = run_klab(&[
        "check",
        &path("cubin.toml"),
        &path("ptx.toml"),
        &path("template.toml"),
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.matches("verdict: PASS").count(), 3, "{out}{err}");

    for (manifest, file, compiler) in [
        ("cubin.toml", Some("t.cubin"), "precompiled cubin"),
        ("ptx.toml", Some("t.ptx"), "precompiled PTX"),
        ("template.toml", None, "NVRTC "),
    ] {
        let out_dir = dir.path().join(format!("bench-{manifest}"));
        let (code, out, err) = run_klab(&[
            "bench",
            &path(manifest),
            "--n",
            "1024",
            "--samples",
            "20",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "{manifest}: {out}{err}");
        let r = klab_evidence::receipt::Receipt::load(&out_dir.join("receipt.json")).unwrap();
        r.validate().unwrap();
        assert!(
            r.source.compiler.starts_with(compiler),
            "{manifest}: {}",
            r.source.compiler
        );
        match file {
            Some(f) => {
                // The receipt binds the module's bytes; klab compiled nothing, so no flags.
                let sha = klab_core::artifact::sha256_file(&dir.path().join(f)).unwrap();
                assert_eq!(r.source.file_sha256, sha, "{manifest}");
                assert!(r.source.flags.is_empty(), "{:?}", r.source.flags);
                assert_eq!(r.source.entry, "transpose_padded");
                // The padded tile's 33 x 32 floats, read from the loaded module.
                assert!(
                    err.contains("transpose_padded: ") && err.contains("4224 B static shared"),
                    "{manifest}: {err}"
                );
                assert!(err.contains("[driver]"), "{err}");
            }
            None => assert_eq!(r.source.entry, "tcopy<32, 8>"),
        }
    }

    let Some(sanitizer) = klab_tools::sanitizer::locate(None) else {
        if std::env::var("KLAB_REQUIRE_GPU").as_deref() == Ok("1") {
            panic!("{test}: compute-sanitizer not found");
        }
        eprintln!("SKIPPED the sanitize part of {test}: no compute-sanitizer");
        return;
    };
    let (code, out, err) = run_klab(&[
        "sanitize",
        &path("cubin.toml"),
        &path("template.toml"),
        "--tools",
        "memcheck",
        "--sanitizer",
        sanitizer.to_str().unwrap(),
        "--out",
        dir.path().join("sanitize").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.matches(": CLEAN under memcheck").count(), 2, "{out}");
}

/// Upload `bytes` into a new buffer of exactly that length.
fn uploaded(b: &mut CudaBackend, bytes: &[u8]) -> klab_cuda::gpu::DeviceBuffer {
    let mut d = b.alloc_bytes(bytes.len()).unwrap();
    b.upload_bytes(&mut d, bytes).unwrap();
    d
}

/// The device checker on the GPU gives the CPU oracle's verdict, field for field and the
/// errors to the bit, on the same planted outputs the emulation judges: every shape of the
/// built-in ladders under every rule and dtype.
#[test]
fn the_device_checker_agrees_with_the_cpu_oracle_on_the_gpu() {
    if !gpu_or_skip("the_device_checker_agrees_with_the_cpu_oracle_on_the_gpu") {
        return;
    }
    let mut b = backend();
    b.set_verify_policy(klab_engine::verify::VerifyPolicy::default());
    let mut judged = 0;
    common::planted::ladder_cases(|cases| {
        for c in &cases {
            let got = uploaded(&mut b, &c.got);
            let want = uploaded(&mut b, &c.source);
            let mag = c.magnitude.as_ref().map(|m| {
                let bytes: Vec<u8> = m.iter().flat_map(|v| v.to_le_bytes()).collect();
                uploaded(&mut b, &bytes)
            });
            let check = klab_engine::verify::DeviceCheck {
                got: &got,
                want: &want,
                map: c.map,
                magnitude: mag.as_ref(),
                dtype: c.dtype,
                comparison: c.cmp,
                elements: c.elements(),
            };
            let s = b
                .device_check(&check)
                .unwrap()
                .expect("the device checker loads");
            let (dev, cpu) = (
                s.verdict(c.dtype, &c.cmp, &c.shape, c.magnitude.as_deref()),
                c.cpu(),
            );
            assert_eq!(dev, cpu, "{}", c.describe());
            judged += 1;
        }
    });
    eprintln!("{judged} outputs judged alike by the device checker on the GPU and the CPU oracle");
    assert!(judged > 200);
}

/// The device generator makes the host's bytes on the GPU, for every pattern and dtype.
#[test]
fn the_device_generator_makes_the_hosts_bytes_on_the_gpu() {
    if !gpu_or_skip("the_device_generator_makes_the_hosts_bytes_on_the_gpu") {
        return;
    }
    let mut b = backend();
    b.set_verify_policy(klab_engine::verify::VerifyPolicy::default());
    let mut made = 0;
    for g in common::planted::generators() {
        let bytes = g.elements as usize * g.dtype.size_bytes();
        let mut host = vec![0u8; bytes];
        g.fill(&mut host);
        let mut d = b.alloc_bytes(bytes).unwrap();
        assert!(
            b.device_generate(&mut d, &g).unwrap(),
            "the generator loads"
        );
        let mut back = vec![0u8; bytes];
        b.download_bytes(&d, &mut back).unwrap();
        assert!(back == host, "{g:?}");
        made += 1;
    }
    eprintln!("{made} inputs generated on the GPU identical to the host's");
}

/// A benchmark, not a gate: the device check of a 1 GiB output (the transpose lab's
/// N = 16384, f32) through the transpose map and directly, each timed end to end (the
/// parameters' upload, the kernels, the summary's download) as klab calls it. Prints the
/// median of 20 calls; the evidence keeps the line.
#[test]
fn the_device_check_of_a_1_gib_output() {
    if !gpu_or_skip("the_device_check_of_a_1_gib_output") {
        return;
    }
    use klab_engine::inputs::{Generator, Pattern};
    use klab_engine::verify::{DeviceCheck, ExpectMap, VerifyPolicy};
    use klab_spec::rule::Comparison;
    let mut b = backend();
    b.set_verify_policy(VerifyPolicy::default());
    let n: u64 = 16384;
    let elements = n * n;
    let g = Generator {
        dtype: klab_core::dtype::Dtype::F32,
        elements,
        k: 0,
        pattern: Pattern::DistinctF32 { rotate: 0 },
    };
    let mut input = b.alloc_bytes(4 * elements as usize).unwrap();
    assert!(b.device_generate(&mut input, &g).unwrap());
    let mut out = b.alloc_bytes(4 * elements as usize).unwrap();
    let k = b.kernel("transpose_padded").unwrap();
    let plan = LaunchPlan::tiled_2d(n, 32, 8);
    let args = [Arg::Buffer(&out), Arg::Buffer(&input), Arg::I32(n as i32)];
    b.launch(&k, &plan, &args).unwrap();
    b.synchronize().unwrap();
    let time = |b: &mut CudaBackend,
                got: &klab_cuda::gpu::DeviceBuffer,
                input: &klab_cuda::gpu::DeviceBuffer,
                map| {
        let check = DeviceCheck {
            got,
            want: input,
            map,
            magnitude: None,
            dtype: g.dtype,
            comparison: Comparison::default(),
            elements,
        };
        let mut ms = Vec::new();
        for _ in 0..21 {
            let t = std::time::Instant::now();
            let s = b.device_check(&check).unwrap().unwrap();
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(s.failures, 0, "{map:?}");
        }
        ms.remove(0); // the first call loads the checker
        ms.sort_by(f64::total_cmp);
        ms[ms.len() / 2]
    };
    let transposed = time(
        &mut b,
        &out,
        &input,
        ExpectMap::Transpose { rows: n, cols: n },
    );
    // The same input made again, against the first: the direct map's cost.
    assert!(b.device_generate(&mut out, &g).unwrap());
    let direct = time(&mut b, &out, &input, ExpectMap::Direct);
    eprintln!(
        "device check of a 1 GiB f32 output (N = {n}): transpose map {transposed:.3} ms, direct {direct:.3} ms (median of 20 calls, end to end)"
    );
}

/// The sweep on the GPUs of this host (`--devices all`, one GPU or more): a user's own
/// operation (the gelu example, with its C reference), one of its kernels wrong as a user
/// would bring it (no known-broken label), at an even and an odd size. The wrong kernel's
/// points are recorded as failed and the sweep goes on; the others are checked, timed in
/// rounds, and name the GPU they ran on; no two timed blocks overlapped on one GPU.
#[test]
fn a_sweep_over_every_gpu_records_a_failed_point_and_where_each_point_ran() {
    let test = "a_sweep_over_every_gpu_records_a_failed_point_and_where_each_point_ran";
    if !gpu_or_skip(test) {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ops/gelu");
    let manifest = std::fs::read_to_string(root.join("gelu.toml")).unwrap();
    let unlabelled = "known_broken = \"the arithmetic is in bf16, not f32: results land several ulps from the correctly rounded value\"\n";
    assert!(manifest.contains(unlabelled), "the example's label moved");
    let manifest = manifest
        .replace(unlabelled, "")
        .replace(
            "source = \"gelu.cu\"",
            &format!("source = \"{}\"", root.join("gelu.cu").display()),
        )
        .replace(
            "gelu_ref.c:gelu_ref",
            &format!("{}:gelu_ref", root.join("gelu_ref.c").display()),
        );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, manifest).unwrap();
    let k = |name: &str| format!("{}:{name}", path.display());
    let out = dir.path().join("sweep");
    let started = std::time::Instant::now();
    let o = klab()
        .args([
            "sweep",
            &k("gelu"),
            &k("gelu_bf16_math"),
            &k("gelu_strided"),
        ])
        .args(["--axis", "n=1048576,1048577", "--baseline", &k("gelu")])
        .args(["--rounds", "2", "--samples", "20", "--devices", "all"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("{test}: {:.1} s\n{text}", started.elapsed().as_secs_f64());
    assert_eq!(o.status.code(), Some(2), "a gate failed: exit 2\n{text}");
    let table: klab_evidence::sweep::SweepTable =
        serde_json::from_slice(&std::fs::read(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(table.points.len(), 6, "every point recorded, none dropped");
    assert!(table.task_problems.is_empty(), "{:?}", table.task_problems);
    let gpus = Device::count().unwrap();
    for p in &table.points {
        if p.kernel == "gelu_bf16_math" {
            assert_eq!(
                p.status,
                klab_evidence::sweep::PointStatus::CheckFailed,
                "{p:?}"
            );
            assert!(p.receipt.is_none() && p.median_us.is_none(), "{p:?}");
        } else {
            assert_eq!(p.status, klab_evidence::sweep::PointStatus::Passed, "{p:?}");
            assert!(p.device < gpus, "{p:?}");
            let uuid = p.gpu_uuid.as_deref().unwrap_or_default();
            assert!(uuid.starts_with("GPU-"), "the point names its GPU: {p:?}");
            assert!(p.receipt.is_some() && p.median_us.is_some(), "{p:?}");
            if p.kernel == "gelu_strided" {
                // Rounds give the round-level ratio; 2 rounds give no 95% interval (it
                // takes 6).
                assert!(
                    p.ratio_to_baseline.is_some() && p.ratio_interval.is_none(),
                    "{p:?}"
                );
            }
        }
    }
    // Two groups (one per size), each a task on one of the GPUs, with its timed spans.
    assert_eq!(table.tasks.len(), 2, "{:?}", table.tasks);
    let spans: Vec<_> = table.tasks.iter().flat_map(|t| &t.timed_spans).collect();
    assert!(!spans.is_empty(), "timed spans are recorded");
    assert!(spans
        .iter()
        .all(|s| s.gpu_uuid.as_deref().is_some_and(|u| u.starts_with("GPU-"))));
    assert!(
        table.overlapping_spans().is_empty(),
        "{:?}",
        table.overlapping_spans()
    );
    if gpus >= 2 {
        // Two groups and two GPUs: they ran on different ones.
        assert_ne!(
            table.tasks[0].device, table.tasks[1].device,
            "{:?}",
            table.tasks
        );
    }
    assert!(out.join("report/report.md").is_file());
}

/// A user's reference that prints a passing result line on stdout when the child exits
/// (after klab's own) decides nothing: the child's results are read from the file its
/// parent named, and the wrong kernel is rejected by bench and by check.
#[test]
fn a_result_printed_on_stdout_by_a_reference_decides_nothing() {
    if !gpu_or_skip("a_result_printed_on_stdout_by_a_reference_decides_nothing") {
        return;
    }
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/forged-result/forged.toml");
    let kernel = format!("{}:doubled", manifest.display());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench");
    let (code, stdout, stderr) = run_klab(&[
        "bench",
        &kernel,
        "--samples",
        "10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(r#"klab-result: {"result":"exit","code":0}"#),
        "the forged line is shown as the output it is: {stdout}"
    );
    // The check's child reported its failing cases; a forged exit 0 read as its result made
    // the parent say "FAIL: passed" and start a second child.
    let (code, stdout, stderr) = run_klab(&["check", &kernel, "--quick"]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(stdout.contains("verdict: FAIL"), "{stdout}");
    assert!(!stdout.contains("FAIL: passed"), "{stdout}");
    assert!(!stderr.contains("fresh process"), "{stderr}");
    // Rounds beside the correct kernel: the wrong one fails every block, the right one is
    // timed in every block (the forged result made every block an error before).
    let copied = format!("{}:copied", manifest.display());
    let rounds = dir.path().join("rounds");
    let (code, stdout, stderr) = run_klab(&[
        "rounds",
        &kernel,
        &copied,
        "--rounds",
        "1",
        "--samples",
        "10",
        "--out",
        rounds.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("doubled: FAILED"), "{stderr}");
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert!(rounds.join("copied.receipt.json").is_file(), "{stdout}");
}

/// A kernel whose block stages 100 KiB in dynamic shared memory (past the default 48 KiB):
/// klab opts it in, as the program that launches it must, and checks, sanitizes and times
/// it. It was refused at the default limit, so Triton's matmuls could not be checked.
#[test]
fn a_kernel_past_the_default_shared_memory_is_opted_in_and_checked() {
    if !gpu_or_skip("a_kernel_past_the_default_shared_memory_is_opted_in_and_checked") {
        return;
    }
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/large-shared/reverse.toml");
    let kernel = format!("{}:reverse_tiles", manifest.display());
    let (code, stdout, stderr) = run_klab(&["check", &kernel, "--verbose"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    // The ladder straddles the 25600-element tile, not the block's 1024 threads.
    assert!(
        format!("{stdout}{stderr}").contains("n=25601"),
        "{stdout}\n{stderr}"
    );
    let (code, stdout, stderr) = run_klab(&["sanitize", &kernel]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench");
    let (code, stdout, stderr) = run_klab(&[
        "bench",
        &kernel,
        "--samples",
        "10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let receipt = std::fs::read_to_string(out.join("receipt.json")).unwrap();
    assert!(
        receipt.contains("102400"),
        "the launch's shared memory: {receipt}"
    );
}

/// A float4 kernel correct only for sizes that are multiples of 4, as its own program
/// promises: declared `multiple = 4`, it passes; the same kernel without the declaration is
/// rejected at the ladder's ragged sizes (its tail is never written).
#[test]
fn a_kernel_for_multiples_of_4_passes_when_its_manifest_says_so() {
    if !gpu_or_skip("a_kernel_for_multiples_of_4_passes_when_its_manifest_says_so") {
        return;
    }
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vector-loads");
    let kernel = format!("{}:scale4", fixture.join("scale4.toml").display());
    let (code, stdout, stderr) = run_klab(&["check", &kernel]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let dir = tempfile::tempdir().unwrap();
    for f in ["scale4.cu", "scale4_ref.c"] {
        std::fs::copy(fixture.join(f), dir.path().join(f)).unwrap();
    }
    let toml = std::fs::read_to_string(fixture.join("scale4.toml")).unwrap();
    let undeclared = dir.path().join("scale4.toml");
    std::fs::write(
        &undeclared,
        toml.replace("sizes.n = { multiple = 4 }", "sizes.n = {}"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_klab(&["check", undeclared.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(stdout.contains("verdict: FAIL"), "{stdout}");
}

/// A kernel taking `__half` and `__nv_bfloat16` scalars: klab passes each as its bits and the
/// C reference gets their values, so the correct kernel passes bitwise and the one that
/// swaps them is rejected.
#[test]
fn half_precision_scalars_reach_the_kernel_as_their_bits() {
    if !gpu_or_skip("half_precision_scalars_reach_the_kernel_as_their_bits") {
        return;
    }
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/half-scalars/axpb.toml");
    let kernel = |name: &str| format!("{}:{name}", manifest.display());
    let (code, stdout, stderr) = run_klab(&["check", &kernel("axpb")]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let (code, stdout, stderr) = run_klab(&["check", &kernel("axpb_swapped")]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    // Its label says it is broken: rejected, as expected.
    assert!(
        stdout.contains("verdict: REJECTED (known-broken: a and b are swapped"),
        "{stdout}"
    );
}

/// A struct by value, which the source's text leaves klab to take on trust, is held to
/// the compiled kernel's parameter sizes at load: one line, exit 1, no case run.
#[test]
fn a_parameter_the_compiled_kernel_declares_otherwise_is_refused_at_load() {
    if !gpu_or_skip("a_parameter_the_compiled_kernel_declares_otherwise_is_refused_at_load") {
        return;
    }
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/compiled-params/k.toml");
    let (code, stdout, stderr) = run_klab(&["check", manifest.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("shift cannot take what the manifest passes: 's' is passed as f32 (4 bytes), but parameter 3 is 16 bytes"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// `--format json` and `csv` on the commands that measure: stdout holds the report alone
/// and parses, even from a kernel that prints (its printf goes to stderr), and the value
/// says what the text says.
#[test]
fn measuring_commands_print_one_parseable_report_in_every_format() {
    if !gpu_or_skip("measuring_commands_print_one_parseable_report_in_every_format") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("loud.cu"),
        r#"extern "C" __global__ void loud_copy(float* out, const float* in, int n) {
  const int x = blockIdx.x * 32 + threadIdx.x;
  const int y = blockIdx.y * 32 + threadIdx.y;
  if (x == 0 && y == 0) printf("hello from the kernel\n");
  for (int k = 0; k < 32; k += 8) {
    if (x < n && y + k < n) out[(size_t)(y + k) * n + x] = in[(size_t)(y + k) * n + x];
  }
}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("loud.toml"),
        copy_manifest("loud.cu", &[("loud_copy", "loud_copy")]),
    )
    .unwrap();
    let loud = format!("{}:loud_copy", dir.path().join("loud.toml").display());
    let out = |name: &str| dir.path().join(name).display().to_string();
    let run = |args: &[&str]| {
        let o = klab().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        (String::from_utf8(o.stdout).unwrap(), err)
    };
    let json = |text: &str| -> serde_json::Value {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not one JSON value ({e}): {text}"))
    };
    let csv = |text: &str| {
        klab_core::csv::Csv::parse(text).unwrap_or_else(|e| panic!("not CSV ({e}): {text}"))
    };

    // bench: the kernel's printf reaches stderr, the report stdout.
    let (text, err) = run(&[
        "bench",
        &loud,
        "--n",
        "1024",
        "--samples",
        "20",
        "--format",
        "json",
        "--out",
        &out("b1"),
    ]);
    assert!(err.contains("hello from the kernel"), "{err}");
    let b = json(&text);
    assert!(b["result"]["median_us"].as_f64().unwrap() > 0.0, "{b}");
    assert!(std::path::Path::new(b["receipt"].as_str().unwrap()).is_file());
    let (text, _) = run(&[
        "bench",
        &loud,
        "--n",
        "1024",
        "--samples",
        "20",
        "--rounds",
        "2",
        "--format",
        "csv",
        "--out",
        &out("b2"),
    ]);
    let t = csv(&text);
    t.require(&["round", "median_us", "receipt"]).unwrap();
    assert_eq!(t.rows().count(), 2, "{text}");
    // The text still says it all, on stdout, the printf there too.
    let (text, _) = run(&[
        "bench",
        &loud,
        "--n",
        "1024",
        "--samples",
        "20",
        "--out",
        &out("b3"),
    ]);
    assert!(
        text.contains("hello from the kernel") && text.contains("receipt="),
        "{text}"
    );

    // check: one kernel is its report, two are a list; CSV is a row per case.
    let (text, err) = run(&["check", &loud, "--sizes", "33,1024", "--quick", "--json"]);
    assert!(err.contains("hello from the kernel"), "{err}");
    assert_eq!(json(&text)["kernel"], "loud_copy", "{text}");
    let (text, _) = run(&["check", &loud, "copy", "--sizes", "33", "--quick", "--json"]);
    assert_eq!(json(&text).as_array().map(Vec::len), Some(2), "{text}");
    let (text, _) = run(&[
        "check", &loud, "copy", "--sizes", "33,1024", "--quick", "--format", "csv",
    ]);
    let t = csv(&text);
    t.require(&["kernel", "case", "pass"]).unwrap();
    assert!(
        t.rows().count() >= 4 && t.rows().all(|r| r.get("pass") == "true"),
        "{text}"
    );

    // rounds: the summary, and a row per kernel with its ratio to the baseline.
    let (text, _) = run(&[
        "rounds",
        "copy",
        &loud,
        "--n",
        "1024",
        "--rounds",
        "2",
        "--samples",
        "20",
        "--format",
        "csv",
        "--out",
        &out("r"),
    ]);
    let t = csv(&text);
    t.require(&["kernel", "median_us", "ratio", "verdict"])
        .unwrap();
    let rows: Vec<_> = t.rows().collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        rows.iter()
            .any(|r| r.get("kernel") == "loud_copy" && !r.get("ratio").is_empty()),
        "{text}"
    );
}

/// The lab drivers report like every command: one JSON value or a CSV table on stdout,
/// handed up by their child, with the exit code their verdict gives.
#[test]
fn the_lab_drivers_print_their_reports_in_every_format() {
    if !gpu_or_skip("the_lab_drivers_print_their_reports_in_every_format") {
        return;
    }
    let run = |args: &[&str], code: i32| {
        let o = klab().args(args).output().unwrap();
        let out = String::from_utf8(o.stdout).unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(code), "{args:?}: {out}{err}");
        out
    };
    let json = |text: &str| -> serde_json::Value {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not one JSON value ({e}): {text}"))
    };
    let t = json(&run(
        &["transpose", "all", "33", "1", "--format", "json"],
        2,
    ));
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "{t}");
    assert!(
        rows.iter()
            .all(|r| r["correct"] == (r["variant"] != "broken")),
        "{t}"
    );
    let text = run(&["transpose", "copy", "1024", "10", "--format", "csv"], 0);
    assert_eq!(parse_csv(&text).unwrap().len(), 1, "{text}");

    let t = json(&run(&["triad", "--check", "--json"], 0));
    assert_eq!(
        (t["mode"].as_str(), t["cases"].as_array().map(Vec::len)),
        (Some("check"), Some(8)),
        "{t}"
    );
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("hot.csv");
    let t = json(&run(
        &[
            "triad",
            "--format",
            "json",
            "--bench-hot",
            samples.to_str().unwrap(),
        ],
        0,
    ));
    assert_eq!(t["timing"], "timed", "{t}");
    assert!(
        std::path::Path::new(t["receipt"].as_str().unwrap()).is_file(),
        "{t}"
    );
    assert!(t["median_us"].as_f64().unwrap() > 0.0, "{t}");

    let text = run(&["reduce-lab", "--format", "csv"], 0);
    let table = klab_core::csv::Csv::parse(&text).unwrap();
    table
        .require(&["variant", "suite", "test", "pass"])
        .unwrap();
    assert!(
        table
            .rows()
            .any(|r| r.get("variant") == "drop-tail" && r.get("pass") == "false"),
        "{text}"
    );
}

/// `klab rounds --resolve`: one kernel under two names (an A/A test) gains rounds until its
/// interval is narrow enough and says so; a target it cannot reach in the budget is said to
/// be missed, with the rounds it ran.
#[test]
fn rounds_until_resolved_stop_on_the_target_or_the_budget() {
    if !gpu_or_skip("rounds_until_resolved_stop_on_the_target_or_the_budget") {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("aa.toml");
    let source = root.join("kernels/transpose.cu").display().to_string();
    std::fs::write(
        &manifest,
        copy_manifest(
            &source,
            &[("copy_a", "transpose_copy"), ("copy_b", "transpose_copy")],
        ),
    )
    .unwrap();
    let m = manifest.display().to_string();
    let summary = |out: &str, target: &str, budget: &str| -> serde_json::Value {
        let o = klab()
            .args(["rounds", &format!("{m}:copy_a"), &format!("{m}:copy_b")])
            .args([
                "--n",
                "4096",
                "--samples",
                "50",
                "--resolve",
                target,
                "--budget",
                budget,
            ])
            .arg("--out")
            .arg(dir.path().join(out))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(text.contains("resolution: target"), "{text}");
        serde_json::from_slice(&std::fs::read(dir.path().join(out).join("summary.json")).unwrap())
            .unwrap()
    };
    // A 43 us kernel resolves to 2% in a few rounds (0.7% after 7 on the H200).
    let s = summary("reached", "2%", "120");
    let r = &s["resolution"];
    assert_eq!(r["reached"], true, "{s}");
    assert_eq!(r["stopped"], "resolved");
    assert!(r["half_width"].as_f64().unwrap() <= 0.02);
    assert_eq!(s["rounds"], r["rounds"]);
    assert!(r["rounds"].as_u64().unwrap() >= 7);
    // NVML gave every block's SM clock, so the ratio is also taken in cycles; one kernel
    // under two names is the same in cycles as in time, within the same interval.
    let a = &s["analyses"][0];
    let (time, cycles) = (&a["analysis"], &a["in_cycles"]);
    assert!(cycles["ratio"].as_f64().is_some(), "{a}");
    assert!(
        (cycles["ratio"].as_f64().unwrap() - time["ratio"].as_f64().unwrap()).abs() < 0.02,
        "{a}"
    );
    // 0.001% is out of reach: with a 2 s budget the 7 rounds asked for (the default) are all
    // that run (they take longer), and the rounds say the target was missed.
    let s = summary("budget", "0.001%", "2");
    let r = &s["resolution"];
    assert_eq!(r["reached"], false, "{s}");
    assert_eq!(r["stopped"], "budget");
    assert_eq!(r["rounds"], 7, "{s}");
}
