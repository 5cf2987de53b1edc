//! Errors as the command contract states them (issue item 8): every error is one clear
//! `error:` line with exit 1 for a bad argument or input (2 only for a failed gate), each
//! cause said once, and every cheap limit checked before expensive work: a refusal that
//! could be known at once comes at once, and leaves no output folder behind. No GPU is
//! needed; the no-device cases skip on a machine with a CUDA driver.

mod common;

use std::fs;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// Long enough for any refusal; far shorter than the work the old code did first.
const LIMIT: Duration = Duration::from_secs(30);

/// `klab ARGS` in `dir`, killed after [`LIMIT`] (a refusal that came late fails the test).
fn klab(dir: &Path, args: &[&str]) -> Output {
    let started = Instant::now();
    let out = assert_cmd::Command::new(common::klab_bin())
        .current_dir(dir)
        .env(
            "LD_LIBRARY_PATH",
            std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default(),
        )
        .args(args)
        .timeout(LIMIT)
        .output()
        .unwrap();
    assert!(
        started.elapsed() < LIMIT,
        "klab {args:?} took {:?}: a limit checked after the work",
        started.elapsed()
    );
    out
}

/// [`common::refused`], with no clause said twice. Returns the line.
fn refused(out: &Output, needle: &str) -> String {
    let line = common::refused(out, needle);
    said_once(&line);
    line
}

/// No clause of `line` (the pieces between `: ` and `; `) is said twice.
fn said_once(line: &str) {
    for clause in line.split(": ").flat_map(|c| c.split("; ")) {
        let clause = clause.trim();
        if clause.len() >= 8 {
            assert_eq!(
                line.matches(clause).count(),
                1,
                "{clause:?} is said twice in: {line}"
            );
        }
    }
}

/// Whether this machine has a CUDA driver (the no-device tests then have nothing to test).
fn has_driver(test: &str) -> bool {
    let present = klab_cuda::probe::driver_present();
    if present {
        eprintln!("SKIPPED {test}: this machine has a CUDA driver");
    }
    present
}

const SOURCE: &str = "#define BLOCK 256
const int extern_count = 3;
__device__ float helper(float x) { return x; }
// __global__ void commented(float* o) {}
__global__ void mangled(float* out, const float* in, int n) {}
template <typename T> __global__ void scale(T* out, const T* in, int n) {}
extern \"C\" __global__ void k(float* out, const float* in, int n) {
    const char* s = \"ghost\";
}
";

/// A transpose manifest over [`SOURCE`] whose kernel has `entry` and `block`.
fn manifest(dir: &Path, entry: &str, block: &str) {
    fs::write(dir.join("k.cu"), SOURCE).unwrap();
    fs::write(
        dir.join("k.toml"),
        format!(
            "source = \"k.cu\"\n\n[[kernel]]\nname = \"t\"\nentry = \"{entry}\"\n\
             operation = \"transpose\"\nparams = [\"out\", \"in\", \"n:i32\"]\n\
             block = {block}\nelements_per_block = [32, 32]\n"
        ),
    )
    .unwrap();
}

// 1. Causes said once.

#[test]
fn a_cause_is_said_once_when_the_run_folder_cannot_be_made() {
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("f"), "keep").unwrap();
    // The old line: `... under f: File exists (os error 17): File exists (os error 17)`.
    let line = refused(
        &klab(t.path(), &["lab", "--out", "f"]),
        "creating a run folder under f: File exists (os error 17)",
    );
    assert_eq!(line.matches("os error").count(), 1, "{line}");
    let line = refused(
        &klab(t.path(), &["lab", "--out", "f/sub"]),
        "Not a directory (os error 20)",
    );
    assert_eq!(line.matches("os error").count(), 1, "{line}");
    assert_eq!(fs::read_to_string(t.path().join("f")).unwrap(), "keep");
}

#[test]
fn a_folder_given_as_a_file_is_named_once_whatever_the_command() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    for name in ["k.toml", "r.json", "plan.json", "s.csv", "e.sqlite"] {
        fs::create_dir(d.join(name)).unwrap();
    }
    // The path once: the old manifest line was `manifest DIR/./k.toml: file: DIR/./k.toml is ...`.
    let line = refused(
        &klab(d, &["check", "./k.toml"]),
        "k.toml is a folder, not a regular file; klab reads a manifest only from a regular file",
    );
    assert_eq!(line.matches("k.toml").count(), 1, "{line}");
    for (args, path, needle) in [
        (
            &["compare", "r.json", "r.json"][..],
            "r.json",
            "r.json is a folder, not a regular file; klab reads a receipt only from a regular file",
        ),
        (
            &["receipt", "check", "r.json"],
            "r.json",
            "r.json is a folder, not a regular file",
        ),
        (
            &["lab", "--plan", "plan.json"],
            "plan.json",
            "plan.json is a folder, not a regular file; klab reads a lab plan only from a regular file",
        ),
        (
            &["triad", "--bench-hot", "s.csv"],
            "s.csv",
            "s.csv is a folder; klab writes only a regular file or a new one",
        ),
        (&["trace", "e.sqlite"], "e.sqlite", "e.sqlite: is a directory"),
        (
            &["sanitize", "--import", "e.sqlite", "--tool", "memcheck"],
            "e.sqlite",
            "e.sqlite is a folder, not a regular file; klab reads a Compute Sanitizer report only from a regular file",
        ),
    ] {
        let line = refused(&klab(d, args), needle);
        assert_eq!(line.matches(path).count(), 1, "{line}");
    }
    assert!(!d.join("artifacts").exists(), "no run folder is made");
}

// 2. TOML errors say what and where.

#[test]
fn a_manifest_that_is_not_toml_says_what_is_wrong_and_where() {
    let t = tempfile::tempdir().unwrap();
    for (text, needle) in [
        // The old line: `toml:  (line 1)`.
        (
            "source = ",
            "toml: the file ends where a value is expected (line 1, column 10)",
        ),
        (
            "source = \n",
            "toml: invalid string; expected `\"`, `'` (line 1, column 10)",
        ),
        // The old line said line 1 of a duplicate on line 2.
        (
            "a.b = 1\na = 2\n",
            "toml: duplicate key `a` in document root (line 2, column 1)",
        ),
        (
            "source = \"k.cu\"\n[[kernel]]\nnam = 1\n",
            "toml: unknown field `nam`",
        ),
    ] {
        fs::write(t.path().join("k.toml"), text).unwrap();
        let line = refused(&klab(t.path(), &["check", "./k.toml"]), needle);
        assert!(!line.contains(":  "), "an empty message: {line}");
    }
}

// 3. Launch limits with checked arithmetic.

#[test]
fn a_chunk_past_the_size_type_is_refused_in_one_line_not_a_panic_or_an_abort() {
    // Once "capacity overflow" (exit 101) and a 34 GB allocation (SIGABRT): the ladder
    // enumerated one size per remainder of the chunk. It samples them now, and sizes the
    // n:i32 parameter cannot hold are named.
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("k.cu"), SOURCE).unwrap();
    for chunk in ["9223372036854775807", "4294967296"] {
        fs::write(
            dir.path().join("k.toml"),
            format!(
                "source = \"k.cu\"\n\n[[kernel]]\nname = \"t\"\nentry = \"k\"\n\
                 operation = \"transpose\"\nparams = [\"out\", \"in\", \"n:i32\"]\n\
                 block = [32, 8, 1]\nelements_per_block = [{chunk}, 32]\n"
            ),
        )
        .unwrap();
        let out = klab(dir.path(), &["check", "k.toml"]);
        assert_eq!(out.status.code(), Some(1), "{chunk}: {out:?}");
        refused(&out, "is not a whole number that i32 holds");
    }
}

#[test]
fn a_block_past_the_cuda_limits_is_named_by_its_limit_not_called_zero() {
    let t = tempfile::tempdir().unwrap();
    for (block, needle) in [
        // 2^31 cubed wraps a u64 product to 0: the old line said "a dimension is 0".
        (
            "[2147483648, 2147483648, 2147483648]",
            "kernel[0].block: x is 2147483648, above 1024, the most threads along x any CUDA device allows (MAX_BLOCK_DIM_X)",
        ),
        (
            "[4294967295, 1, 1]",
            "x is 4294967295, above 1024",
        ),
        (
            "[64, 64, 1]",
            "kernel[0].block: 64x64x1 is 4096 threads, above 1024, the most any CUDA device allows in a block (MAX_THREADS_PER_BLOCK)",
        ),
        ("[32, 8, 65]", "z is 65, above 64"),
        ("[32, 0, 1]", "kernel[0].block: y is 0; every dimension is at least 1"),
    ] {
        manifest(t.path(), "k", block);
        let line = refused(&klab(t.path(), &["check", "./k.toml"]), needle);
        assert!(!line.contains("a dimension is 0") || block.contains(" 0"), "{line}");
    }
}

// 4. An entry is a `__global__` function, matched by name as a token.

#[test]
fn an_entry_must_name_a_global_function_not_any_word_of_the_source() {
    let t = tempfile::tempdir().unwrap();
    for entry in [
        "extern",
        "BLOCK",
        "extern_count",
        "helper",
        "commented",
        "ghost",
        "float",
        "sca",
    ] {
        manifest(t.path(), entry, "[32, 8, 1]");
        refused(
            &klab(t.path(), &["check", "./k.toml"]),
            &format!("kernel[0].entry: no __global__ function '{entry}' in k.cu (it declares mangled, scale, k)"),
        );
    }
    // A plain C++ kernel (not extern "C") is an entry: NVRTC lowers its name, so the
    // manifest is accepted and the check goes on to the device (none here).
    manifest(t.path(), "mangled", "[32, 8, 1]");
    refused(&klab(t.path(), &["check", "./k.toml"]), "no CUDA driver");
    manifest(t.path(), "scale", "[32, 8, 1]");
    refused(
        &klab(t.path(), &["check", "./k.toml"]),
        "kernel[0].entry: 'scale' (k.cu line 6) is a template <typename T>: name an instance, scale<...> with its arguments",
    );
    manifest(t.path(), "k<float>", "[32, 8, 1]");
    refused(
        &klab(t.path(), &["check", "./k.toml"]),
        "kernel[0].entry: 'k' (k.cu line 7) is not a template",
    );
    // The real ones get past the manifest (to the device, which this machine may lack).
    for entry in ["k", "scale<float>"] {
        manifest(t.path(), entry, "[32, 8, 1]");
        let o = klab(t.path(), &["check", "./k.toml", "--sizes", "33"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("kernel[0].entry"), "{entry}: {err}");
    }
}

// 5 and 6. klab model: limits first, a bad argument is exit 1.

#[test]
fn model_checks_every_limit_before_it_enumerates() {
    let t = tempfile::tempdir().unwrap();
    // The old code enumerated the coverage for about two minutes, then refused the prediction.
    let started = Instant::now();
    refused(
        &klab(
            t.path(),
            &["model", "--n", "100000", "--tile", "1", "--block-rows", "1"],
        ),
        "prediction lane-steps is 640000002048, above this model's limit of 68719476736",
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // A coverage limit at the last n is found before the first n's work.
    refused(
        &klab(t.path(), &["model", "--n", "4096,200000"]),
        "n * n outputs is 40000000000, above this model's limit of 17179869184",
    );
}

#[test]
fn model_block_rows_above_the_tile_or_the_cuda_limit_is_a_bad_argument() {
    let t = tempfile::tempdir().unwrap();
    // The old code ran the model and exited 2, a failed gate, for a bad argument.
    refused(
        &klab(t.path(), &["model", "--block-rows", "33"]),
        "--block-rows 33 is above --tile 32: a block's thread rows each cover a row of its tile",
    );
    refused(
        &klab(t.path(), &["model", "--tile", "64", "--block-rows", "32"]),
        "--tile 64 x --block-rows 32 is 2048 threads, above 1024, the most any CUDA device allows in a block",
    );
    refused(
        &klab(t.path(), &["model", "--block-rows", "0"]),
        "invalid value '0' for '--block-rows <BLOCK_ROWS>': 0 is not in 1..=1024",
    );
    refused(
        &klab(t.path(), &["model", "--tile", "2048"]),
        "invalid value '2048' for '--tile <TILE>': 2048 is not in 1..=1024",
    );
    // A mapping the model disproves is still a failed gate.
    let o = klab(t.path(), &["model", "--n", "64", "--block-rows", "7"]);
    assert_eq!(o.status.code(), Some(2));
}

// 7. No device: one line, and no output folder.

#[test]
fn rounds_without_a_device_fail_in_one_line_before_making_a_folder() {
    if has_driver("rounds_without_a_device_fail_in_one_line_before_making_a_folder") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    refused(&klab(d, &["rounds", "copy", "naive"]), "no CUDA driver");
    assert!(!d.join("artifacts").exists(), "a run folder was made");
    refused(
        &klab(d, &["rounds", "copy", "naive", "--out", "new"]),
        "no CUDA driver",
    );
    assert!(!d.join("new").exists(), "--out was made");
    // An empty folder given as --out stays as it was.
    fs::create_dir(d.join("empty")).unwrap();
    refused(
        &klab(d, &["rounds", "copy", "naive", "--out", "empty"]),
        "no CUDA driver",
    );
    assert_eq!(fs::read_dir(d.join("empty")).unwrap().count(), 0);
}

#[test]
fn counts_and_sizes_are_refused_before_any_step_or_block_runs() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    for (args, needle) in [
        // The old lab ran every step and failed at the rounds step.
        (
            &["lab", "--rounds", "0"][..],
            "invalid value '0' for '--rounds <ROUNDS>': must be at least 1, got 0",
        ),
        (
            &["rounds", "copy", "naive", "--rounds", "0"],
            "must be at least 1, got 0",
        ),
        (
            &["bench", "copy", "--rounds", "0"],
            "must be at least 1, got 0",
        ),
        // The old rounds checked its workloads at n = 1 and left the size to every block.
        (
            &["rounds", "copy", "naive", "--n", "0"],
            "invalid value '0' for '--n <N>': must be at least 1, got 0",
        ),
        (
            &["rounds", "copy", "naive", "--n", "3000000000"],
            "copy: --n 3000000000: n = 3000000000 is past what the kernel takes it as (2147483647 at most)",
        ),
        (
            &["profile", "copy", "--n", "0"],
            "must be at least 1, got 0",
        ),
        // Alternating rounds come in pairs, each kernel first in half of them.
        (
            &["rounds", "copy", "naive", "--order", "alternating"],
            "--order alternating takes an even number of rounds, so that each kernel runs first in as many rounds as it runs last (got --rounds 7; pass --rounds 6 or 8)",
        ),
        (
            &["lab", "--order", "alternating", "--rounds", "5"],
            "--order alternating takes an even number of rounds, so that each kernel runs first in as many rounds as it runs last (got --rounds 5; pass --rounds 4 or 6)",
        ),
        (
            &["lab", "--rounds", "1"],
            "(got --rounds 1; pass --rounds 2)",
        ),
        (
            &["check", "copy", "--timeout", "x"],
            "must be a whole number, got 'x'",
        ),
    ] {
        refused(&klab(d, args), needle);
        assert!(!d.join("artifacts").exists(), "{args:?} made a run folder");
    }
}

#[test]
fn the_other_commands_that_make_a_folder_check_the_device_first() {
    if has_driver("the_other_commands_that_make_a_folder_check_the_device_first") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    // /bin/true stands in for the tools: the device is what is missing. (klab profile is
    // left out: its device is ncu's child's, and a stand-in ncu profiles without one.)
    for args in [
        &["sanitize", "copy", "--sanitizer", "/bin/true"][..],
        &["audit", "--only", "copy", "--sanitizer", "/bin/true"],
        &["bench", "copy"],
        &["triad", "--bench-hot", "s.csv"],
    ] {
        refused(&klab(d, args), "no CUDA driver");
        assert!(!d.join("artifacts").exists(), "{args:?} made a run folder");
        assert!(!d.join("s.csv").exists(), "{args:?} wrote its output");
    }
}

#[test]
fn a_tool_binary_that_cannot_start_is_refused_before_any_folder_or_child() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    fs::write(d.join("plain"), "#!/bin/sh\n").unwrap();
    fs::create_dir(d.join("dir")).unwrap();
    for (args, needle) in [
        // The old code started it once per kernel, after making the run folder.
        (
            &["profile", "copy", "--ncu", "plain"][..],
            "--ncu plain: not executable",
        ),
        (
            &["profile", "copy", "--ncu", "dir"],
            "--ncu dir: not a file",
        ),
        (
            &["profile", "copy", "--ncu", "gone"],
            "--ncu gone: no such file",
        ),
        (
            &["sanitize", "copy", "--sanitizer", "./plain"],
            "--sanitizer ./plain: not executable",
        ),
        (
            &["audit", "--only", "copy", "--sanitizer", "dir"],
            "--sanitizer dir: not a file",
        ),
    ] {
        refused(&klab(d, args), needle);
        assert!(!d.join("artifacts").exists(), "{args:?} made a run folder");
    }
}

// 8. Names before tools.

#[test]
fn audit_only_names_the_unknown_kernel_before_looking_for_tools() {
    let t = tempfile::tempdir().unwrap();
    // No compute-sanitizer where klab looks: the old line was about it, not the name.
    let out = assert_cmd::Command::new(common::klab_bin())
        .current_dir(t.path())
        .env("PATH", "/nonexistent")
        .args(["audit", "--only", "BAD"])
        .timeout(LIMIT)
        .output()
        .unwrap();
    refused(
        &out,
        "--only: 'BAD' is not one of the audited kernels (mut_",
    );
    let out = assert_cmd::Command::new(common::klab_bin())
        .current_dir(t.path())
        .env("PATH", "/nonexistent")
        .args(["audit", "--only", "copy,BAD2", "--sanitizer", "/bin/true"])
        .timeout(LIMIT)
        .output()
        .unwrap();
    refused(&out, "--only: 'BAD2' is not one of the audited kernels");
    assert!(!t.path().join("artifacts").exists());
}

/// `--shape` names every size variable of the operation, each in its range, or is refused
/// in one line before any device is asked for.
#[test]
fn a_shape_that_does_not_fit_the_operation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let gemm = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ops/gemm/gemm.toml");
    let gemm_k = format!("{}:gemm", gemm.display());
    for (args, needle) in [
        (
            vec!["bench", gemm_k.as_str(), "--shape", "M=64"],
            "give K too",
        ),
        (
            vec!["bench", gemm_k.as_str(), "--shape", "m=64,N=1,K=1"],
            "'m' is not a size variable",
        ),
        (
            vec!["check", gemm_k.as_str(), "--shape", "M=0,N=1,K=1"],
            "M = 0 is below min = 1",
        ),
        (
            vec!["rounds", "copy", "naive", "--shape", "M=64"],
            "'M' is not a size variable",
        ),
        (
            vec!["bench", "copy", "--shape", "n=64", "--n", "64"],
            "cannot be used with",
        ),
        (vec!["bench", "copy", "--shape", "n=6,n=7"], "given twice"),
    ] {
        refused(&klab(dir.path(), &args), needle);
    }
}
