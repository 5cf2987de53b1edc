//! Hostile paths on the command line (issue 15): a FIFO, a device node, a symbolic link or an
//! oversized file given where klab reads or writes a file. Each must end quickly with exit 1
//! and one `error:` line that names the path and what it is; nothing given as an output may
//! be replaced. No GPU is needed: every refusal comes before any GPU work.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use klab_tools::nsys::testdata;

mod common;

/// A refusal must come at once; a hang (the old FIFO read) ends here and fails the test.
const LIMIT: Duration = Duration::from_secs(30);

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

/// `klab ARGS` in `dir`, killed after [`LIMIT`].
fn klab(dir: &Path, args: &[&str]) -> Output {
    let started = Instant::now();
    let out = assert_cmd::Command::cargo_bin("klab")
        .unwrap()
        .current_dir(dir)
        .args(args)
        .timeout(LIMIT)
        .output()
        .unwrap();
    assert!(
        started.elapsed() < LIMIT,
        "klab {args:?} took {:?} (a hang?)",
        started.elapsed()
    );
    out
}

use common::refused;

#[test]
fn a_fifo_as_a_manifest_is_refused_not_waited_on() {
    let t = tempfile::tempdir().unwrap();
    mkfifo(&t.path().join("k.toml"));
    refused(
        &klab(t.path(), &["check", "./k.toml"]),
        "k.toml is a FIFO (named pipe), not a regular file; klab reads a manifest only from a regular file",
    );
}

#[test]
fn a_fifo_as_a_cuda_source_in_a_manifest_is_refused() {
    let t = tempfile::tempdir().unwrap();
    fs::write(
        t.path().join("k.toml"),
        "source = \"k.cu\"\n\n[[kernel]]\nname = \"k\"\nentry = \"k\"\noperation = \"transpose\"\n\
params = [\"out\", \"in\", \"n:i32\"]\nblock = [32, 8, 1]\nelements_per_block = [32, 32]\n",
    )
    .unwrap();
    mkfifo(&t.path().join("k.cu"));
    refused(
        &klab(t.path(), &["check", "./k.toml"]),
        "k.cu is a FIFO (named pipe), not a regular file; klab reads a CUDA source only from a regular file",
    );
}

#[test]
fn dev_zero_as_a_source_is_refused_not_read_until_memory_runs_out() {
    let t = tempfile::tempdir().unwrap();
    refused(
        &klab(t.path(), &["init", "/dev/zero", "-o", "-"]),
        "/dev/zero is a character device, not a regular file; klab reads a CUDA source only from a regular file",
    );
}

#[test]
fn dev_zero_and_a_fifo_as_receipts_are_refused() {
    let t = tempfile::tempdir().unwrap();
    mkfifo(&t.path().join("receipt.json"));
    refused(
        &klab(t.path(), &["compare", "/dev/zero", "receipt.json"]),
        "/dev/zero is a character device, not a regular file; klab reads a receipt only from a regular file",
    );
    refused(
        &klab(t.path(), &["compare", "receipt.json", "/dev/zero"]),
        "receipt.json is a FIFO (named pipe), not a regular file",
    );
}

#[test]
fn an_oversized_receipt_is_refused_naming_the_cap() {
    let t = tempfile::tempdir().unwrap();
    let big = fs::File::create(t.path().join("big.json")).unwrap();
    big.set_len(17 << 20).unwrap();
    refused(
        &klab(t.path(), &["compare", "big.json", "big.json"]),
        "big.json is 17825792 bytes, more than 16 MiB, the most klab reads of a receipt",
    );
}

#[test]
fn a_fifo_as_an_nsys_export_is_refused_not_waited_on() {
    let t = tempfile::tempdir().unwrap();
    mkfifo(&t.path().join("t.sqlite"));
    refused(
        &klab(t.path(), &["trace", "t.sqlite"]),
        "t.sqlite is a FIFO (named pipe), not a regular file; klab reads a Nsight Systems export only from a regular file",
    );
}

#[test]
fn a_fifo_as_lab_json_is_refused_by_report() {
    let t = tempfile::tempdir().unwrap();
    fs::create_dir(t.path().join("run")).unwrap();
    mkfifo(&t.path().join("run/lab.json"));
    refused(
        &klab(t.path(), &["report", "run"]),
        "lab.json is a FIFO (named pipe), not a regular file; klab reads a lab record only from a regular file",
    );
}

#[test]
fn a_fifo_as_a_lab_plan_is_refused_before_any_step() {
    let t = tempfile::tempdir().unwrap();
    mkfifo(&t.path().join("plan.json"));
    refused(
        &klab(t.path(), &["lab", "--plan", "plan.json"]),
        "plan.json is a FIFO (named pipe), not a regular file; klab reads a lab plan only from a regular file",
    );
    assert!(
        !t.path().join("artifacts").exists(),
        "no run folder is made"
    );
}

#[test]
fn trace_csv_to_dev_full_is_refused_and_dev_full_stays_a_device() {
    let t = tempfile::tempdir().unwrap();
    refused(
        &klab(t.path(), &["trace", "t.sqlite", "--csv", "/dev/full"]),
        "/dev/full is a character device; klab writes only a regular file or a new one",
    );
    assert!(fs::metadata("/dev/full")
        .unwrap()
        .file_type()
        .is_char_device());
}

/// A symbolic link, a FIFO or a folder given as an output: refused, left as it was.
#[test]
fn outputs_that_are_links_fifos_or_folders_are_refused_and_kept() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    fs::write(d.join("target.txt"), "keep").unwrap();
    std::os::unix::fs::symlink(d.join("target.txt"), d.join("link.csv")).unwrap();
    mkfifo(&d.join("fifo.csv"));
    fs::create_dir(d.join("dir.csv")).unwrap();
    // A real export: the old code read it and then renamed its CSV over the output.
    let export = testdata::write_all(d).unwrap()[0].clone();
    let export = export.to_str().unwrap();
    for (flag, name, is) in [
        ("--csv", "link.csv", "a symbolic link"),
        ("--summary-csv", "fifo.csv", "a FIFO (named pipe)"),
        ("--csv", "dir.csv", "a folder"),
    ] {
        refused(
            &klab(d, &["trace", export, flag, name]),
            &format!("{name} is {is}; klab writes only a regular file or a new one"),
        );
    }
    assert!(fs::symlink_metadata(d.join("link.csv"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::metadata(d.join("fifo.csv"))
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(fs::read_to_string(d.join("target.txt")).unwrap(), "keep");

    // klab init's -o the same way (--force overwrites a file, never a link).
    fs::write(
        d.join("k.cu"),
        "extern \"C\" __global__ void k(float* o) {}\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(d.join("target.txt"), d.join("k.toml")).unwrap();
    refused(
        &klab(d, &["init", "k.cu", "--force"]),
        "k.toml is a symbolic link; klab writes only a regular file or a new one",
    );
    assert_eq!(fs::read_to_string(d.join("target.txt")).unwrap(), "keep");
}

/// `--summary-csv -` wrote a file named `-`; it means stdout, as `--csv -` does.
#[test]
fn summary_csv_dash_means_stdout() {
    let t = tempfile::tempdir().unwrap();
    let paths = testdata::write_all(t.path()).unwrap();
    let export = paths[0].file_name().unwrap().to_str().unwrap().to_string();
    let out = klab(t.path(), &["trace", &export, "--summary-csv", "-"]);
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!t.path().join("-").exists(), "a file named - was written");
    let header = stdout.lines().next().unwrap_or("");
    assert!(header.contains(','), "a CSV header on stdout: {stdout}");
    assert_eq!(
        stdout.lines().next(),
        klab(t.path(), &["trace", &export, "--summary-csv", "s.csv"])
            .status
            .success()
            .then(|| fs::read_to_string(t.path().join("s.csv")).unwrap())
            .as_deref()
            .and_then(|s| s.lines().next()),
        "stdout holds only the summary CSV"
    );
    refused(
        &klab(
            t.path(),
            &["trace", &export, "--csv", "-", "--summary-csv", "-"],
        ),
        "would both write to stdout",
    );
}

/// `klab report` hashed what a symbolic link in the run folder pointed at, anywhere (as
/// root, /etc/shadow); now a link that leaves the folder is not followed.
#[test]
fn report_does_not_follow_a_link_out_of_the_run_folder() {
    let t = tempfile::tempdir().unwrap();
    let run = t.path().join("run");
    fs::create_dir(&run).unwrap();
    let secret = t.path().join("secret.txt");
    fs::write(&secret, "outside").unwrap();
    let secret_sha = klab_core::artifact::sha256_hex(b"outside");
    std::os::unix::fs::symlink(&secret, run.join("model.txt")).unwrap();
    // The old code hashed /dev/zero forever through such a link.
    std::os::unix::fs::symlink("/dev/zero", run.join("zero.bin")).unwrap();
    fs::write(
        run.join("lab.json"),
        format!(
            r#"{{"steps": [], "artifacts": [{{"path": "model.txt", "bytes": 7, "sha256": "{secret_sha}"}},
                {{"path": "zero.bin", "bytes": 1, "sha256": "{secret_sha}"}}]}}"#
        ),
    )
    .unwrap();
    let out = klab(t.path(), &["report", "run"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = fs::read_to_string(run.join("report/report.md")).unwrap();
    // The artifacts table's row (the model's section names the file too).
    let row = md
        .lines()
        .find(|l| l.starts_with("| model.txt"))
        .unwrap_or_else(|| panic!("no model.txt row in:\n{md}"));
    // Nor does the model's section show what the link points at.
    assert!(!md.contains("outside"), "{md}");
    assert!(row.contains("leads out of"), "{row}");
    assert!(!row.to_lowercase().contains("verified"), "{row}");
    let row = md.lines().find(|l| l.contains("zero.bin")).unwrap();
    assert!(row.contains("leads out of"), "{row}");
}

/// An empty `KLAB_CACHE_DIR` means the default cache, not the current folder.
#[test]
fn an_empty_klab_cache_dir_writes_nothing_into_the_current_folder() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let cwd = t.path().join("cwd");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&cwd).unwrap();
    let out = assert_cmd::Command::cargo_bin("klab")
        .unwrap()
        .current_dir(&cwd)
        .env("KLAB_CACHE_DIR", "")
        .env_remove("XDG_CACHE_HOME")
        .env("HOME", &home)
        .args(["lab", "--out", "../artifacts"])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let names: Vec<PathBuf> = fs::read_dir(&cwd)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        names.is_empty(),
        "{names:?} in the current folder; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The module went to the default cache instead (where NVRTC is there to compile it).
    if klab_cuda::probe::nvrtc_present()
        || std::env::var("KLAB_REQUIRE_NVRTC").as_deref() == Ok("1")
    {
        let cached = fs::read_dir(home.join(".cache/klab/nvrtc"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert!(
            cached > 0,
            "nothing in ~/.cache/klab/nvrtc; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `klab triad --bench-hot /dev/full` would have timed on a GPU and then replaced the device
/// node; now the output is refused first, and `-` (a receipt hashes the file) is refused too.
#[test]
fn triad_sample_csv_that_is_a_device_or_dash_is_refused_before_any_gpu_work() {
    let t = tempfile::tempdir().unwrap();
    refused(
        &klab(t.path(), &["triad", "--bench-hot", "/dev/full"]),
        "/dev/full is a character device; klab writes only a regular file or a new one",
    );
    refused(
        &klab(t.path(), &["triad", "--bench-rotate", "-"]),
        "give a path, not -",
    );
}
