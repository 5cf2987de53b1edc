//! The command-line contract on a machine with or without a GPU: exit codes, one-line
//! errors, help text, the model command and the lab's CPU-only path.

mod common;

use std::fs;
use std::process::Output;

use assert_cmd::prelude::*;
use common::klab;

fn run(args: &[&str]) -> Output {
    klab().args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An argument error: exit 1, nothing on stdout, exactly one line on stderr.
fn assert_arg_error(args: &[&str], needle: &str) {
    let o = run(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?} printed to stdout");
    assert_eq!(
        err.lines().count(),
        1,
        "{args:?} gave more than one line: {err}"
    );
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected '{needle}' in: {err}"
    );
}

#[test]
fn transpose_argument_errors_exit_1_with_one_line() {
    assert_arg_error(
        &["transpose", "padded", "0", "1"],
        "N must be at least 1, got 0",
    );
    assert_arg_error(&["transpose", "padded", "-5", "1"], "got negative '-5'");
    assert_arg_error(
        &["transpose", "padded", "abc", "1"],
        "N must be a positive integer, got 'abc'",
    );
    assert_arg_error(&["transpose", "padded", "12.5", "1"], "got '12.5'");
    assert_arg_error(
        &["transpose", "fastest", "32", "1"],
        "unknown variant 'fastest'",
    );
    assert_arg_error(
        &["transpose", "padded", "32", "0"],
        "reps must be at least 1, got 0",
    );
    assert_arg_error(
        &["transpose", "padded", "32", "-1"],
        "reps must be a positive integer",
    );
    assert_arg_error(
        &["transpose", "padded", "32", "x"],
        "reps must be a positive integer, got 'x'",
    );
    assert_arg_error(
        &["transpose", "padded", "99999999999999999999", "1"],
        "too large",
    );
    assert_arg_error(
        &["transpose", "padded"],
        "required arguments were not provided",
    );
    assert_arg_error(&["transpose"], "required arguments were not provided");
    assert_arg_error(
        &["transpose", "padded", "32", "1", "extra"],
        "unexpected argument",
    );
    assert_arg_error(
        &["transpose", "padded", "32", "1", "--bogus"],
        "unexpected argument '--bogus'",
    );
    assert_arg_error(&["frobnicate"], "unrecognized subcommand 'frobnicate'");
    assert_arg_error(&[], "no command given");
}

#[test]
fn without_a_driver_gpu_commands_exit_1_with_one_line() {
    if klab_cuda::probe::driver_present() {
        eprintln!("SKIPPED without_a_driver_gpu_commands_exit_1_with_one_line: this machine has a CUDA driver");
        return;
    }
    for args in [
        &["transpose", "padded", "33", "1"][..],
        &["transpose", "all", "4096", "100"][..],
        &["env"][..],
    ] {
        let o = run(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(last.starts_with("error: no CUDA driver"), "{args:?}: {err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("error")).count(), 1);
        assert!(!err.contains("panicked"), "{err}");
    }
    // Nothing was printed on stdout by transpose: no header without a device.
    assert!(run(&["transpose", "copy", "7", "1"]).stdout.is_empty());
}

#[test]
fn help_is_stable() {
    for (name, args) in [
        ("help", &["--help"][..]),
        ("transpose_help", &["transpose", "--help"][..]),
        ("model_help", &["model", "--help"][..]),
        ("lab_help", &["lab", "--help"][..]),
        ("bench_help", &["bench", "--help"][..]),
        ("triad_help", &["triad", "--help"][..]),
        ("rounds_help", &["rounds", "--help"][..]),
        ("compare_help", &["compare", "--help"][..]),
        ("receipt_help", &["receipt", "--help"][..]),
        ("receipt_check_help", &["receipt", "check", "--help"][..]),
        ("receipt_sign_help", &["receipt", "sign", "--help"][..]),
        ("receipt_verify_help", &["receipt", "verify", "--help"][..]),
        ("check_help", &["check", "--help"][..]),
        ("init_help", &["init", "--help"][..]),
        ("sanitize_help", &["sanitize", "--help"][..]),
        ("profile_help", &["profile", "--help"][..]),
        ("sweep_help", &["sweep", "--help"][..]),
        ("sweep_collect_help", &["sweep", "collect", "--help"][..]),
    ] {
        let out = klab()
            .args(args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        insta::assert_snapshot!(name, String::from_utf8(out).unwrap());
    }
}

#[test]
fn model_prints_the_seed_numbers() {
    let o = run(&["model"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    for needle in ["4096", "12.5%", "80.0%"] {
        assert!(text.contains(needle), "missing {needle} in:\n{text}");
    }
    let o = run(&["model", "--json", "--n", "33,64"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.is_object());
}

#[test]
fn model_exits_2_when_the_mapping_proof_fails() {
    // 7 rows of threads do not divide a 32-row tile: shared indices leave the tile.
    let o = run(&["model", "--n", "64", "--block-rows", "7"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn model_rejects_bad_parameters_with_exit_1() {
    let o = run(&["model", "--tile", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert_arg_error(&["model", "--n", "x"], "invalid value 'x'");
}

#[test]
fn lab_without_a_gpu_runs_the_cpu_gates_and_says_what_it_skipped() {
    if klab_cuda::probe::driver_present() {
        eprintln!("SKIPPED lab_without_a_gpu_runs_the_cpu_gates_and_says_what_it_skipped: this machine has a CUDA driver");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("artifacts");
    let o = klab().args(["lab", "--out"]).arg(&out).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "skipped gates: ladder, benchmark, receipts, rounds, sanitize, profile, ceilings"
        ),
        "{err}"
    );
    let run1 = out.join("run-01");
    for f in [
        "environment.json",
        "plan.json",
        "source.sha256",
        "model.txt",
        "model.json",
        "lab.json",
    ] {
        assert!(run1.join(f).is_file(), "missing {f}");
    }
    let lab: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(run1.join("lab.json")).unwrap()).unwrap();
    let steps = lab["steps"].as_array().unwrap();
    let status = |name: &str| {
        steps
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["status"].as_str().unwrap().to_string())
    };
    assert_eq!(status("model").as_deref(), Some("ran"));
    assert_eq!(status("ladder").as_deref(), Some("skipped"));
    // Every artifact listed is hashed, and the hash is right.
    for a in lab["artifacts"].as_array().unwrap() {
        let p = run1.join(a["path"].as_str().unwrap());
        let sha = klab_core::artifact::sha256_file(&p).unwrap();
        assert_eq!(a["sha256"].as_str().unwrap(), sha);
    }
    if klab_cuda::probe::nvrtc_present() {
        assert_eq!(status("build").as_deref(), Some("ran"));
        let res = fs::read_to_string(run1.join("resources.csv")).unwrap();
        assert!(
            res.contains("transpose_padded,") && res.contains(",4224,"),
            "{res}"
        );
        assert!(fs::read_to_string(run1.join("build.txt"))
            .unwrap()
            .contains("-lineinfo"));
    } else {
        assert_eq!(status("build").as_deref(), Some("skipped"));
    }
    // A second lab never overwrites the first.
    let before = fs::read(run1.join("lab.json")).unwrap();
    let o = klab().args(["lab", "--out"]).arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(out.join("run-02/lab.json").is_file());
    assert_eq!(fs::read(run1.join("lab.json")).unwrap(), before);
}

#[test]
fn lab_reports_an_unwritable_output_folder_as_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    fs::write(&file, b"x").unwrap();
    let o = klab().args(["lab", "--out"]).arg(&file).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("creating a run folder"), "{err}");
}

#[test]
fn timing_command_argument_errors_exit_1_with_one_line() {
    assert_arg_error(&["bench", "fastest"], "unknown kernel 'fastest'");
    assert_arg_error(
        &["bench", "padded", "--regime", "cold"],
        "unknown cache regime 'cold'",
    );
    assert_arg_error(
        &["bench", "padded", "--timer", "batch:0"],
        "launch count must be a positive integer",
    );
    assert_arg_error(
        &["bench", "padded", "--samples", "1"],
        "samples must be at least 2",
    );
    assert_arg_error(
        &["bench", "padded", "--warmup", "stable:1:1:1"],
        "warmup 'stable:1:1:1'",
    );
    assert_arg_error(
        &["bench", "padded", "--n", "0"],
        "'--n <N>': must be at least 1, got 0",
    );
    assert_arg_error(
        &["bench", "padded", "--rounds", "0"],
        "'--rounds <ROUNDS>': must be at least 1, got 0",
    );
    assert_arg_error(
        &["bench", "padded", "--n", "-4"],
        "unexpected argument '-4'",
    );
    assert_arg_error(&["rounds", "padded"], "at least two kernels");
    assert_arg_error(&["bench", "padded", "--timeout", "0"], "invalid value '0'");
    assert_arg_error(&["check", "padded", "--timeout", "0"], "invalid value '0'");
    assert_arg_error(&["rounds", "padded", "padded"], "named twice");
    assert_arg_error(
        &["rounds", "padded", "tiled", "--baseline", "naive"],
        "baseline 'naive' is not one of the kernels",
    );
    assert_arg_error(&["triad", "--fast"], "unknown mode '--fast'");
    assert_arg_error(
        &["triad", "--check", "out.csv"],
        "a sample CSV path is valid only for benchmark modes",
    );
    assert_arg_error(
        &["triad", "--bench-hot", "a.csv", "b.csv"],
        "too many arguments",
    );
    assert_arg_error(&["compare", "only-one.json"], "required");
}

#[test]
fn compare_refuses_missing_or_malformed_receipts_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json");
    let o = klab()
        .arg("compare")
        .arg(&missing)
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("nope.json"), "{err}");
    let bad = dir.path().join("bad.json");
    fs::write(&bad, br#"{"schema": "klab-receipt/1", "n": true}"#).unwrap();
    let o = klab().arg("compare").arg(&bad).arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn check_rejects_unknown_kernels_and_bad_manifests_with_one_line() {
    assert_arg_error(&["check", "gemm"], "unknown kernel 'gemm'");
    assert_arg_error(
        &["check", "padded", "--sizes", "3,x"],
        "--sizes: 'x' is not a size",
    );
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("k.cu"),
        "extern \"C\" __global__ void k(float* o, const float* i, int n) {}",
    )
    .unwrap();
    let manifest = dir.path().join("mine.toml");
    fs::write(
        &manifest,
        "source = \"k.cu\"\n[[kernel]]\nname = \"k\"\nentry = \"k\"\noperation = \"transpose\"\nparams = [\"out\", \"in\", \"n:f32\"]\nblock = [32, 8]\nelements_per_block = [32, 32]\n",
    )
    .unwrap();
    assert_arg_error(
        &["check", manifest.to_str().unwrap()],
        "kernel[0].params[2]: 'n' must be i32",
    );
    assert_arg_error(&["bench", manifest.to_str().unwrap()], "must be i32");
    let text = fs::read_to_string(&manifest).unwrap();
    fs::write(
        &manifest,
        text.replace(
            "source = \"k.cu\"",
            "source = \"k.cu\"\ninclude_dirs = [\"inc\"]",
        )
        .replace("n:f32", "n:i32"),
    )
    .unwrap();
    assert_arg_error(
        &["check", manifest.to_str().unwrap()],
        "mine.toml: include_dirs[0]: no folder ",
    );
    assert_arg_error(
        &["check", dir.path().join("none.toml").to_str().unwrap()],
        "cannot read manifest ",
    );
}

#[test]
fn the_lab_writes_its_plan_and_takes_another_or_refuses_it_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("artifacts");
    // A plan of the lab's own (the written default, with a smaller ladder) is taken as given.
    let default: serde_json::Value = {
        let o = klab().args(["lab", "--out"]).arg(&out).output().unwrap();
        assert!(o.status.code() == Some(0) || o.status.code() == Some(2));
        serde_json::from_str(&fs::read_to_string(out.join("run-01/plan.json")).unwrap()).unwrap()
    };
    assert_eq!(
        default["ladder"],
        serde_json::json!([1, 7, 31, 32, 33, 65, 257])
    );
    assert_eq!(default["ceiling_kernels"][4], "lean_64_cm");
    let mut mine = default.clone();
    mine["ladder"] = serde_json::json!([5, 33]);
    let plan = dir.path().join("plan.json");
    fs::write(&plan, mine.to_string()).unwrap();
    let lab_with_plan = || {
        klab()
            .args(["lab", "--out"])
            .arg(&out)
            .arg("--plan")
            .arg(&plan)
            .output()
            .unwrap()
    };
    let o = lab_with_plan();
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(2),
        "{}",
        stderr(&o)
    );
    let written: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("run-02/plan.json")).unwrap()).unwrap();
    assert_eq!(written, mine);
    // A stray field, a kernel that is not in the registry, or a zero size: one line, exit 1,
    // and no run folder.
    for (edit, needle) in [
        (("ladders", serde_json::json!([1])), "unknown field"),
        (
            ("round_variants", serde_json::json!(["copy", "fastest"])),
            "'fastest'",
        ),
        (
            (
                "round_variants",
                serde_json::json!(["copy", "mut_wild_store"]),
            ),
            "only 'klab audit'",
        ),
        (("ladder", serde_json::json!([0])), "at least 1"),
        (("ladder", serde_json::json!([4294967296u64])), "at most"),
        (
            ("round_variants", serde_json::json!(["copy"])),
            "at least two",
        ),
        (
            (
                "round_variants",
                serde_json::json!(["copy", "naive", "naive"]),
            ),
            "listed twice",
        ),
        (
            ("rounds_baseline", serde_json::json!("padded2")),
            "'padded2' is not one of round_variants",
        ),
        (
            ("receipt_kernels", serde_json::json!(["nosuch"])),
            "unknown kernel 'nosuch'",
        ),
        (
            ("profile_kernels", serde_json::json!(["mut_wild_store"])),
            "only 'klab audit'",
        ),
        (
            ("ceiling_baseline", serde_json::json!("qq")),
            "'qq' is not one of ceiling_kernels",
        ),
        (("sanitize_tools", serde_json::json!(",")), "names no tool"),
    ] {
        let mut bad = default.clone();
        bad[edit.0] = edit.1;
        fs::write(&plan, bad.to_string()).unwrap();
        let o = lab_with_plan();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(!out.join("run-03").exists());
}

#[test]
fn device_is_one_global_option_before_or_after_the_command() {
    for argv in [
        ["--device", "3", "bench", "padded"],
        ["bench", "padded", "--device", "3"],
    ] {
        let o = run(&argv);
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{argv:?}: {err}");
        assert!(!err.contains("unexpected argument"), "{argv:?}: {err}");
    }
    assert_arg_error(&["--device", "x", "env"], "invalid value 'x' for '--device");
}

/// Precompiled modules (a cubin and a PTX NVRTC made) and a template entry are taken by
/// check and bench up to the point where a driver is needed, which then stops them in one
/// line.
#[test]
fn precompiled_modules_and_template_entries_stop_only_at_the_missing_driver() {
    let test = "precompiled_modules_and_template_entries_stop_only_at_the_missing_driver";
    if klab_cuda::probe::driver_present() {
        eprintln!("SKIPPED {test}: this machine has a CUDA driver");
        return;
    }
    if !common::nvrtc_or_skip(test) {
        return;
    }
    let dir = common::precompiled_transposes(klab_cuda::nvrtc::DEFAULT_ARCH);
    fs::write(
        dir.path().join("scale.cu"),
        "template <int B> __global__ void scale(float* o, const float* i, int n) {}\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("template.toml"),
        "source = \"scale.cu\"\n[[kernel]]\nname = \"scale128\"\nentry = \"scale<128>\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [128]\nelements_per_block = [128, 1]\n",
    )
    .unwrap();
    for (cmd, manifest) in [
        ("check", "cubin.toml"),
        ("check", "ptx.toml"),
        ("bench", "cubin.toml"),
        ("check", "template.toml"),
    ] {
        let m = dir.path().join(manifest);
        let o = run(&[cmd, m.to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{cmd} {manifest}: {err}");
        assert_eq!(err.lines().count(), 1, "{cmd} {manifest}: {err}");
        assert!(
            err.starts_with("error: no CUDA driver"),
            "{cmd} {manifest}: {err}"
        );
    }
}

#[test]
fn a_closed_stdout_ends_an_output_only_command_quietly_with_exit_0() {
    // `klab model | head -0`: the reader is gone before klab prints (or, in a race, just
    // after it printed into the pipe): either way exit 0 and nothing on stderr.
    for args in [vec!["model"], vec!["model", "--json"], vec!["kernels"]] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_klab"))
            .args(&args)
            .env_remove("KLAB_PARENT")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
}

/// A fresh clone: `./scripts/test` installed NVRTC into the checkout's `.deps/`, and the klab
/// built there finds it without `LD_LIBRARY_PATH`, from any folder, and compiles with it
/// (the lab's build step ran on a CPU-only machine; it once said "NVRTC not found").
#[test]
fn the_checkouts_nvrtc_is_found_without_a_library_path() {
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    if !top.join(klab_cuda::probe::CHECKOUT_NVRTC).is_file()
        || std::env::var_os("KLAB_BIN").is_some()
    {
        eprintln!("SKIPPED the_checkouts_nvrtc_is_found_without_a_library_path: no NVRTC in this checkout's .deps/, or a copied binary");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = klab()
        .args(["env", "--json"])
        .env_remove("LD_LIBRARY_PATH")
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["nvrtc_loadable"], true, "{v}");
    assert!(
        v["nvrtc_version"].as_str().unwrap().starts_with("13."),
        "{v}"
    );
    if klab_cuda::probe::driver_present() {
        return;
    }
    // Without a driver the lab runs what a CPU can: the build compiles, from an empty cache.
    let o = klab()
        .args(["lab", "--out"])
        .arg(tmp.path().join("runs"))
        .env_remove("LD_LIBRARY_PATH")
        .env("KLAB_CACHE_DIR", tmp.path().join("cache"))
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lab: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("runs/run-01/lab.json")).unwrap())
            .unwrap();
    let build = lab["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "build")
        .unwrap();
    assert_eq!(build["status"], "ran", "{build}");
}
