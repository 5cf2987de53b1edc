//! The CLI against hostile files (issue item 9): every subcommand that reads a file meets
//! a FIFO, /dev/zero, /dev/null, a folder, a dangling link and an unreadable file; output-
//! only commands meet a closed stdout and /dev/full; commands that write meet a read-only
//! folder and a full disk (a 64 KiB tmpfs, mounted where the machine allows); and
//! `receipt check` and `compare` meet mutated copies of a real timing run. Each run must
//! end within [`LIMIT`] with exit 1 and one `error:` line (exit 0, quietly, for a closed
//! stdout), never a panic, and leave any output that existed as it was and no partial
//! output folder. No GPU is needed: bench and rounds must fail the same way without one.
//! tests/hostile.rs holds the earlier named cases (links and FIFOs as outputs, caps).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use klab_tools::nsys::testdata;

mod common;
#[path = "../crates/klab-evidence/tests/compare_fixture/mod.rs"]
mod compare_fixture;

/// Every refusal here is immediate; a hang ends here and fails the test.
const LIMIT: Duration = Duration::from_secs(20);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cmd(dir: &Path, args: &[&str]) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("klab").unwrap();
    // No GPU on CI; on a machine with one, bench and rounds would start measuring.
    c.current_dir(dir)
        .args(args)
        .env("CUDA_VISIBLE_DEVICES", "")
        .timeout(LIMIT);
    c
}

fn klab(dir: &Path, args: &[&str]) -> Output {
    cmd(dir, args).output().unwrap()
}

use common::one_line_error;

fn is_root() -> bool {
    // SAFETY: a plain system call without arguments.
    unsafe { libc::geteuid() == 0 }
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

/// The hostile inputs, each named `.toml` where the name decides (a manifest path).
fn hostile_inputs(d: &Path) -> Vec<(&'static str, PathBuf)> {
    mkfifo(&d.join("fifo.toml"));
    fs::create_dir(d.join("folder.toml")).unwrap();
    std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling.toml")).unwrap();
    let mut all = vec![
        ("a FIFO", d.join("fifo.toml")),
        ("/dev/zero", PathBuf::from("/dev/zero")),
        ("/dev/null", PathBuf::from("/dev/null")),
        ("a folder", d.join("folder.toml")),
        ("a dangling link", d.join("dangling.toml")),
    ];
    let locked = d.join("locked.toml");
    fs::write(&locked, "source = \"k.cu\"\n").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    if is_root() {
        // Root reads a mode-000 file: the case would pass without testing anything.
        eprintln!(
            "SKIP fuzz_cli: the unreadable-file case (running as root, permissions are bypassed)"
        );
    } else {
        all.push(("an unreadable file", locked));
    }
    all
}

const RECEIPT: &str = "evidence/2026-11-30-timing/transpose-rotated/tiled.receipt.json";

#[test]
fn every_reading_command_refuses_every_hostile_input_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let good = repo().join(RECEIPT);
    let good = good.to_str().unwrap();
    fs::write(d.join("signers"), "x ssh-ed25519 AAAA\n").unwrap();
    for (what, h) in hostile_inputs(d) {
        let h = h.to_str().unwrap();
        // A signature beside the receipt, so verify reaches the receipt itself.
        if !h.starts_with("/dev/") {
            fs::write(format!("{h}.sig"), "not a signature").unwrap();
        }
        let (a, b) = (format!("{h}:a"), format!("{h}:b"));
        let runs: Vec<Vec<&str>> = vec![
            vec!["check", h],
            vec!["sanitize", "--import", h, "--tool", "memcheck"],
            vec!["bench", &a, "--out", "bench-out"],
            vec!["rounds", &a, &b, "--out", "rounds-out"],
            vec!["compare", h, good],
            vec!["compare", good, h],
            vec!["report", h],
            vec!["trace", h],
            vec!["profile", "--import", h],
            vec!["receipt", "check", h],
            vec![
                "receipt",
                "verify",
                h,
                "--allowed-signers",
                "signers",
                "--identity",
                "x",
            ],
            vec![
                "receipt",
                "verify",
                good,
                "--allowed-signers",
                h,
                "--identity",
                "x",
            ],
            vec!["init", h, "-o", "init-out.toml"],
            vec!["sweep", "--file", h, "--out", "sweep-out"],
            vec!["sweep", "collect", h],
            vec!["sweep", "task", h, "0"],
        ];
        for args in runs {
            one_line_error(&klab(d, &args), &format!("{what}: klab {args:?}"));
        }
        for out in [
            "bench-out",
            "rounds-out",
            "init-out.toml",
            "sweep-out",
            "artifacts",
        ] {
            assert!(!d.join(out).exists(), "{what}: {out} was made");
        }
    }
}

/// bench and rounds without a GPU: one line, no run folder (rounds made one, wrote
/// rounds.csv and rounds.log into it, and printed a line per failed block).
#[test]
fn bench_and_rounds_without_a_gpu_fail_in_one_line_and_make_no_folder() {
    if klab_cuda::probe::driver_present() {
        eprintln!("SKIP bench_and_rounds_without_a_gpu: a CUDA driver is present");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    for args in [
        &["bench", "naive", "--out", "out"][..],
        &["rounds", "naive", "tiled", "--out", "out"],
        &["rounds", "naive", "tiled"],
    ] {
        let err = one_line_error(&klab(d, args), &format!("klab {args:?}"));
        assert!(err.contains("no CUDA driver"), "{err}");
        assert!(
            !d.join("out").exists(),
            "klab {args:?} made its --out folder"
        );
        assert!(
            !d.join("artifacts").exists(),
            "klab {args:?} made a run folder"
        );
    }
}

/// The commands that only print, with arguments that succeed.
/// The commands that only print; `dir` receives the receipts `compare` reads (a fixture
/// pair: the committed H200 receipts predate invalidation, and compare refuses them).
fn printing_commands(dir: &Path) -> Vec<Vec<String>> {
    let r = repo().join("evidence/2026-11-30-timing/transpose-rotated");
    let p = |f: &str| r.join(f).to_string_lossy().into_owned();
    let (base, cand) = compare_fixture::pair(&dir.join("pair"));
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    let fixture = repo().join("crates/klab-tools/tests/fixtures/ncu/ncu_raw_naive_metrics.csv");
    vec![
        vec!["model".into()],
        vec!["model".into(), "--json".into()],
        vec!["kernels".into()],
        vec!["receipt".into(), "check".into(), p("tiled.receipt.json")],
        vec!["compare".into(), s(base), s(cand)],
        vec![
            "profile".into(),
            "--import".into(),
            fixture.to_string_lossy().into_owned(),
        ],
    ]
}

/// `klab ARGS` with stdout given (assert_cmd captures it), killed after [`LIMIT`].
fn with_stdout(dir: &Path, args: &[String], stdout: Stdio) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_klab"))
        .current_dir(dir)
        .args(args)
        .env("CUDA_VISIBLE_DEVICES", "")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("klab {args:?} took over {LIMIT:?} (a hang?)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// A closed stdout is the reader having read enough: quiet, exit 0.
#[test]
fn a_closed_stdout_ends_output_only_commands_quietly_with_exit_0() {
    let t = tempfile::tempdir().unwrap();
    for args in printing_commands(t.path()) {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) fills the two descriptors; the read end is closed at once.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            libc::close(fds[0]);
        }
        // SAFETY: the write end is ours and handed over once.
        let w = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
        let out = with_stdout(t.path(), &args, Stdio::from(w));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "klab {args:?}: {stderr}");
        assert_eq!(stderr, "", "klab {args:?}");
    }
}

/// Regression: `klab model > /dev/full` panicked in println! (exit 101, a backtrace).
#[test]
fn stdout_on_a_full_device_is_one_line_not_a_panic() {
    let t = tempfile::tempdir().unwrap();
    for args in printing_commands(t.path()) {
        let full = fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = with_stdout(t.path(), &args, Stdio::from(full));
        let err = one_line_error(&out, &format!("klab {args:?} > /dev/full"));
        assert!(
            err.contains("cannot write to stdout: No space left"),
            "{err}"
        );
    }
}

/// A tmpfs mounted at a folder for the test's life (root with CAP_SYS_ADMIN only).
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, options: &str) -> Option<Mount> {
        fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount(at.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The outputs a write test gives: (args, the output path they name) in folder `out`.
fn writing_commands(d: &Path, out: &Path) -> Vec<(Vec<String>, PathBuf)> {
    let s = |p: &Path| p.to_string_lossy().into_owned();
    fs::write(
        d.join("k.cu"),
        "extern \"C\" __global__ void k(float* o, int n) {}\n",
    )
    .unwrap();
    let export = testdata::write_all(d).unwrap()[0].clone();
    let run = repo().join("evidence/2026-12-01-one-engine");
    vec![
        (
            vec![
                "init".into(),
                s(&d.join("k.cu")),
                "-o".into(),
                s(&out.join("k.toml")),
                "--force".into(),
            ],
            out.join("k.toml"),
        ),
        (
            vec![
                "trace".into(),
                s(&export),
                "--csv".into(),
                s(&out.join("t.csv")),
            ],
            out.join("t.csv"),
        ),
        (
            vec![
                "trace".into(),
                s(&export),
                "--summary-csv".into(),
                s(&out.join("s.csv")),
            ],
            out.join("s.csv"),
        ),
        (
            vec![
                "report".into(),
                s(&run),
                "--out".into(),
                s(&out.join("report")),
            ],
            out.join("report/index.html"),
        ),
    ]
}

/// Each writer into `out`: exit 1, one line, and the folder exactly as it was (no
/// half-written file, no temporary, no partial report folder left behind; report's was
/// left with its plots/ folder on a full disk).
fn writes_are_refused_and_leave_the_folder(d: &Path, out: &Path, why: &str) {
    let listing = |p: &Path| {
        let mut v = walk(p);
        v.sort();
        v
    };
    for (args, target) in writing_commands(d, out) {
        let before = listing(out);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let err = one_line_error(&klab(d, &argv), &format!("{why}: klab {args:?}"));
        assert!(!err.is_empty());
        assert_eq!(
            listing(out),
            before,
            "{why}: klab {args:?} changed {}",
            out.display()
        );
        let _ = target;
    }
}

fn walk(p: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let path = e.path();
        if path.is_dir() {
            out.push((path.display().to_string(), 0));
            out.extend(walk(&path));
        } else {
            // A hash, not the bytes: the filler is 64 KiB.
            let mut h = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&fs::read(&path).unwrap_or_default(), &mut h);
            out.push((path.display().to_string(), std::hash::Hasher::finish(&h)));
        }
    }
    out
}

#[test]
fn writes_into_a_read_only_folder_are_one_line_and_change_nothing() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let ro = d.join("ro");
    let _mount;
    if is_root() {
        // Root writes through mode 555: a read-only mount is what stops it.
        match Mount::tmpfs(&ro, "ro,size=64k") {
            Some(m) => _mount = m,
            None => {
                eprintln!("SKIP writes_into_a_read_only_folder: root, and mount -t tmpfs failed");
                return;
            }
        }
    } else {
        fs::create_dir(&ro).unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    }
    writes_are_refused_and_leave_the_folder(d, &ro, "read-only");
}

/// Regression guard for atomic writes: on a full disk, an output that existed keeps its
/// bytes (a write in place would truncate it first).
#[test]
fn writes_onto_a_full_disk_are_one_line_and_keep_what_was_there() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let full = d.join("full");
    let Some(_mount) = Mount::tmpfs(&full, "size=64k") else {
        eprintln!(
            "SKIP writes_onto_a_full_disk: mount -t tmpfs failed (needs root with CAP_SYS_ADMIN)"
        );
        return;
    };
    for name in ["k.toml", "t.csv", "s.csv"] {
        fs::write(full.join(name), "keep\n").unwrap();
    }
    // Fill what is left: the next block write fails with ENOSPC.
    let filler = vec![0u8; 4096];
    let mut f = fs::File::create(full.join("filler")).unwrap();
    while std::io::Write::write_all(&mut f, &filler).is_ok() {}
    drop(f);
    writes_are_refused_and_leave_the_folder(d, &full, "full disk");
    for name in ["k.toml", "t.csv", "s.csv"] {
        assert_eq!(
            fs::read_to_string(full.join(name)).unwrap(),
            "keep\n",
            "{name}"
        );
    }
}

/// A deterministic stream of mutations (xorshift): the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 as usize
    }
}

fn mutate(bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = bytes.to_vec();
    match rng.next() % 5 {
        0 => out.truncate(rng.next() % out.len()),
        1 => {
            let i = rng.next() % out.len();
            out[i] ^= 1 << (rng.next() % 8);
        }
        2 => {
            // A digit changed: a hash, a count or a figure that no longer agrees.
            let digits: Vec<usize> = (0..out.len())
                .filter(|&i| out[i].is_ascii_digit())
                .collect();
            let i = digits[rng.next() % digits.len()];
            out[i] = b'0' + ((out[i] - b'0' + 1) % 10);
        }
        3 => {
            let lines: Vec<&[u8]> = out.split_inclusive(|&b| b == b'\n').collect();
            let skip = rng.next() % lines.len();
            out = lines
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != skip)
                .flat_map(|(_, l)| l.to_vec())
                .collect();
        }
        _ => {
            let i = rng.next() % (out.len() + 1);
            let tokens: [&[u8]; 5] = [b"\0", b"-1", b"1e999", b"\"", b"NaN"];
            out.splice(i..i, tokens[rng.next() % tokens.len()].iter().copied());
        }
    }
    out
}

/// `KLAB_FUZZ_CASES` as for the property suites, a few dozen by default: each is two runs.
fn cases() -> usize {
    std::env::var("KLAB_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

/// Mutated receipts and samples of a real rounds run, through `receipt check` and
/// `compare`: exit 0 (a mutation that changed nothing checked) or 1 in one line, or 2 for
/// compare's verdict, never a panic.
#[test]
fn mutated_timing_runs_are_checked_or_refused_in_one_line() {
    let src = repo().join("evidence/2026-11-30-timing/transpose-rotated");
    let files = [
        "tiled.receipt.json",
        "padded.receipt.json",
        "blocks/r01-p0-tiled/samples-r01-p0.csv",
        "blocks/r01-p0-tiled/receipt.json",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut refused = 0;
    for case in 0..cases() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("run");
        assert!(Command::new("cp")
            .arg("-r")
            .arg(&src)
            .arg(&d)
            .status()
            .unwrap()
            .success());
        let file = files[rng.next() % files.len()];
        let bytes = fs::read(d.join(file)).unwrap();
        fs::write(d.join(file), mutate(&bytes, &mut rng)).unwrap();
        for args in [
            &[
                "receipt",
                "check",
                "tiled.receipt.json",
                "padded.receipt.json",
            ][..],
            &["compare", "padded.receipt.json", "tiled.receipt.json"],
        ] {
            let out = klab(&d, args);
            let what = format!("case {case}, {file} mutated: klab {args:?}");
            match out.status.code() {
                Some(1) => {
                    one_line_error(&out, &what);
                    refused += 1;
                }
                Some(0 | 2) => {
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
                }
                code => panic!(
                    "{what}: exit {code:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
            }
        }
    }
    // Most mutations break a hash or the JSON: were none refused, nothing was checked.
    assert!(refused > 0, "no mutated run was refused");
}
