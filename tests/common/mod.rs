//! Shared by the integration tests.
#![allow(dead_code)]

pub mod planted;

use std::path::PathBuf;
use std::process::{Command, Output};

/// The klab binary: `KLAB_BIN` when set (the GPU machine runs a copied bundle), else the
/// one Cargo built for this test.
pub fn klab_bin() -> PathBuf {
    std::env::var_os("KLAB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_klab")))
}

pub fn klab() -> Command {
    Command::new(klab_bin())
}

/// Run a command that must succeed; its stdout (stdout and stderr in the failure message).
pub fn stdout_of_success(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{cmd:?}\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Whether a CUDA device can be opened. Without one, a GPU test prints that it skipped
/// and passes, unless KLAB_REQUIRE_GPU=1 (scripts/gpu-run), where absence fails it.
pub fn gpu_or_skip(test: &str) -> bool {
    match klab_cuda::device::Device::open(0) {
        Ok(_) => true,
        Err(e) => {
            if std::env::var("KLAB_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("{test}: KLAB_REQUIRE_GPU=1 but no GPU: {e}");
            }
            // Past the harness's capture: scripts/test counts and names these at its end.
            progress(&format!("SKIPPED (no GPU) {test}: {e}"));
            false
        }
    }
}

/// The transpose lab's source (kernels/transpose.cu) brought as precompiled modules, as a
/// user with their own build would: `t.cubin` (NVRTC's cubin for `arch`), `t.ptx` (NVRTC's
/// PTX for compute_80, which the driver JIT-compiles on load), and a manifest over each,
/// `cubin.toml` (kernel `pre_cubin_padded`) and `ptx.toml` (`pre_ptx_padded`), both the
/// padded transpose. Needs NVRTC (`klab_cuda::probe::nvrtc_present`).
pub fn precompiled_transposes(arch: &str) -> tempfile::TempDir {
    use klab_cuda::nvrtc::{self, Cache, CompileSpec};
    let dir = tempfile::tempdir().unwrap();
    let cubin = nvrtc::compile(&CompileSpec::transpose_lab(arch), &Cache::disabled())
        .unwrap()
        .cubin;
    std::fs::write(dir.path().join("t.cubin"), &cubin).unwrap();
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(
        klab_spec::builtin::TRANSPOSE_SOURCE,
        cudarc::nvrtc::CompileOptions {
            arch: Some("compute_80"),
            ..Default::default()
        },
    )
    .unwrap()
    .to_src();
    std::fs::write(dir.path().join("t.ptx"), ptx.trim_end_matches('\0')).unwrap();
    for kind in ["cubin", "ptx"] {
        std::fs::write(
            dir.path().join(format!("{kind}.toml")),
            format!(
                "source = \"t.{kind}\"\n[[kernel]]\nname = \"pre_{kind}_padded\"\nentry = \"transpose_padded\"\noperation = \"transpose\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [32, 8, 1]\nelements_per_block = [32, 32]\n"
            ),
        )
        .unwrap();
    }
    dir
}

/// Whether NVRTC can be loaded; without it a test that compiles prints that it skipped and
/// passes, unless KLAB_REQUIRE_NVRTC=1 (scripts/test), where absence fails it.
pub fn nvrtc_or_skip(test: &str) -> bool {
    if klab_cuda::probe::nvrtc_present() {
        return true;
    }
    if std::env::var("KLAB_REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!("{test}: KLAB_REQUIRE_NVRTC=1 but libnvrtc.so.13 cannot be loaded");
    }
    eprintln!("SKIPPED {test}: NVRTC not found (libnvrtc.so.13 not on the library path)");
    false
}

/// Exit 1 and exactly one stderr line, `error: ...`, never a panic: how klab refuses bad
/// input. Returns the line.
pub fn one_line_error(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{what}: stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: one line expected: {stderr}");
    assert!(lines[0].starts_with("error: "), "{what}: {stderr}");
    lines[0].to_string()
}

/// [`one_line_error`] whose line contains `needle`.
pub fn refused(out: &Output, needle: &str) -> String {
    let line = one_line_error(out, needle);
    assert!(line.contains(needle), "{needle:?} not in: {line}");
    line
}

/// Give a receipt from before invalidation an integrity section (every launch invalidated,
/// no floor), as a test's stand-in for measuring it again.
/// The floor klab states for a receipt's (as JSON) work on its device, with an L2 ceiling
/// of `l2_measured_gb_s`.
pub fn floor_of(v: &serde_json::Value, l2_measured_gb_s: f64) -> klab_core::floor::Floor {
    let rates = klab_core::floor::DeviceRates {
        hbm_gb_s: v["hardware"]["theoretical_peak_gb_s"].as_f64().unwrap(),
        l2_measured_gb_s,
        l2_method: "test".into(),
        l2_bytes: v["hardware"]["l2_bytes"].as_u64().unwrap(),
        peak_ops_per_s: None,
        ops_method: "test".into(),
    };
    klab_core::floor::Floor::of(
        v["workload"]["useful_bytes_per_launch"].as_u64().unwrap(),
        v["workload"]["flops_per_launch"].as_u64().unwrap(),
        &rates,
    )
}

pub fn add_integrity(receipt: &std::path::Path) {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(receipt).unwrap()).unwrap();
    let policy = klab_core::samples::Invalidation::EveryLaunch;
    let floor = floor_of(&v, 9000.0);
    v["integrity"] = serde_json::json!({
        "invalidation": policy,
        "policy": policy.describe(),
        "slots_per_sample": 1,
        "verified_samples": 4,
        "floor": floor,
        "checked_median_us": v["result"]["median_us"],
        "checked_launches": 6,
        "probe_median_us": v["result"]["median_us"],
        "probe_invalidated_median_us": v["result"]["median_us"],
        "probes": 4,
        "flags": [],
    });
    std::fs::write(receipt, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// A line for the person waiting, on the real stderr: the test harness captures what
/// `eprintln!` prints, and a long test would otherwise say nothing until it ends.
pub fn progress(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// While it lives, says every 30 s that `what` is still running ([`progress`]), so that the
/// test command prints a line at least every minute.
pub struct Heartbeat {
    stop: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(what: &str) -> Heartbeat {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let what = what.to_string();
        let thread = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let every = std::time::Duration::from_secs(30);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every)
            {
                progress(&format!(
                    "  ... {what}: still running after {:.0} s",
                    started.elapsed().as_secs_f64()
                ));
            }
        });
        Heartbeat {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        let _ = self.stop.send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
