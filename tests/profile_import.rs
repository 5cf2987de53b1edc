//! `klab profile --import FILE [--kernel NAME]`: Nsight Compute profiles written by others
//! (issue 15, item 6), read by the parsers and the step after the capture that `klab
//! profile` uses for its own. Every real H200 export (crates/klab-tools/tests/fixtures/ncu,
//! unmodified copies of ../shared/fixtures/h200/ncu, which is read too where it exists); the
//! formats klab refuses in one line; files that are not regular; and the `.ncu-rep` path
//! through a stand-in `ncu` on PATH that serves a real CSV page.

mod common;
#[path = "../crates/klab-tools/tests/common/csv_edit.rs"]
mod csv_edit;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::klab;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/klab-tools/tests/fixtures/ncu")
}

fn fixture(name: &str) -> PathBuf {
    fixture_dir().join(name)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn import(file: &Path, extra: &[&str]) -> Output {
    klab()
        .args(["profile", "--import"])
        .arg(file)
        .args(extra)
        .output()
        .expect("klab runs")
}

/// A refusal: exit 1, nothing on stdout, one line on stderr that holds every needle.
fn refused(o: &Output, needles: &[&str]) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}{}", text(&o.stdout));
    assert_eq!(text(&o.stdout), "", "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
}

/// The real CSV exports: (file, the page it is, profiled launches).
const REAL: [(&str, &str, usize); 8] = [
    ("ncu_raw_naive_metrics.csv", "raw page", 3),
    ("ncu_raw_tiled_bankconflicts.csv", "raw page", 3),
    ("ncu_raw_sections_tiled.csv", "raw page", 1),
    ("dev_import_raw_tiled.csv", "raw page", 2),
    ("ncu_details_padded.csv", "details page", 1),
    ("dev_import_details_tiled.csv", "details page", 2),
    ("dev_cupy_raw_other_names.csv", "raw page", 1),
    ("dev_cupy_details_launchstats.csv", "details page", 1),
];

#[test]
fn every_real_export_is_read_with_a_statement_per_launch() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/h200/ncu");
    let mut dirs = vec![fixture_dir()];
    if shared.is_dir() {
        dirs.push(shared);
    }
    for dir in &dirs {
        for (name, page, launches) in REAL {
            let path = dir.join(name);
            if !path.is_file() {
                // ../shared holds only the captures made with the probe program.
                assert!(name.starts_with("dev_"), "{} is missing", path.display());
                continue;
            }
            let o = import(&path, &[]);
            let out = text(&o.stdout);
            assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
            let first = out.lines().next().unwrap();
            assert!(first.contains(&format!("ncu's {page}")), "{name}: {first}");
            assert!(
                first.ends_with(&format!(
                    "{launches} profiled launch{}",
                    if launches == 1 { "" } else { "es" }
                )),
                "{name}: {first}"
            );
            for line in [
                "Workload:",
                "Correctness: not checked",
                "Observed limiter:",
                "Hypothesis:",
            ] {
                assert_eq!(
                    out.lines().filter(|l| l.starts_with(line)).count(),
                    launches,
                    "{name}: {line}\n{out}"
                );
            }
            // The table: 7 rows per launch; nothing predicted without --kernel.
            assert_eq!(
                out.lines().filter(|l| l.ends_with("no prediction")).count(),
                7 * launches,
                "{name}\n{out}"
            );
        }
    }
}

/// Real H200 pages of another program's kernel (CuPy's fill), whose DRAM traffic is only
/// `dram__bytes.sum` and whose duration, compute capability, grid and block come under the
/// names ncu gives them there: every value is read, none is n/a.
#[test]
fn a_real_page_with_other_metric_names_is_read_in_full() {
    for (name, wants) in [
        (
            "dev_cupy_raw_other_names.csv",
            [
                "grid 131072x1x1, block 128x1x1",
                "NVIDIA H200 (CC 9.0)",
                "duration under the profiler 82,432 ns",
                "39,385,344",
            ],
        ),
        (
            "dev_cupy_details_launchstats.csv",
            [
                "grid 131072x1x1, block 128x1x1",
                "(CC 9.0)",
                "duration under the profiler 82,720 ns",
                "DRAM 10.1%",
            ],
        ),
    ] {
        let o = import(&fixture(name), &[]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
        for want in wants {
            assert!(out.contains(want), "{name}: {want}\n{out}");
        }
    }
}

#[test]
fn measured_counters_are_the_reports() {
    let o = import(&fixture("ncu_raw_tiled_bankconflicts.csv"), &[]);
    let out = text(&o.stdout);
    // The capture has only the bank-conflict metrics and the launch statistics: read and
    // shown, with the rest n/a, rather than refused.
    assert!(
        out.contains("shared bank conflicts load 16,488,054"),
        "{out}"
    );
    assert!(out.contains("Observed limiter: not established: SpeedOfLight throughput missing"));
    let o = import(&fixture("dev_import_raw_tiled.csv"), &[]);
    let out = text(&o.stdout);
    // Imported values in scaled units (us, Mbyte) read in base units.
    assert!(
        out.contains("duration under the profiler 84,480 ns"),
        "{out}"
    );
    assert!(
        out.contains("global sectors/request load 4 store 4"),
        "{out}"
    );
    assert!(out.contains("== tiled_k#0 (ncu result 0: grid 128x128x1, block 32x8x1) =="));
}

#[test]
fn a_raw_and_a_details_page_print_as_a_capture_prints() {
    // Run from the fixture folder so the file names in the output are stable.
    for (name, snap) in [
        ("ncu_raw_sections_tiled.csv", "raw_sections_tiled"),
        ("ncu_details_padded.csv", "details_padded"),
    ] {
        let o = klab()
            .current_dir(fixture_dir())
            .args(["profile", "--import", name])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        insta::assert_snapshot!(snap, text(&o.stdout));
    }
}

/// The probe program's kernels are `naive_k`, `copy_k`: renamed to klab's entries, the real
/// counters can stand beside klab's predictions.
fn renamed(dir: &Path, from: &str, to: &str) -> PathBuf {
    let t = std::fs::read_to_string(fixture("ncu_raw_naive_metrics.csv")).unwrap();
    let p = dir.join(format!("{to}.csv"));
    std::fs::write(&p, t.replace(from, to)).unwrap();
    p
}

#[test]
fn with_kernel_the_launches_stand_beside_the_models_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let f = renamed(dir.path(), "naive_k", "transpose_naive");
    let o = import(&f, &["--kernel", "naive"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        out.matches("global store sectors/request predicted 32 measured 32 (agrees)")
            .count(),
        3,
        "{out}"
    );
    assert!(out.contains("== naive#1 (n = 4096) =="), "{out}");
    assert!(out.contains(
        "Workload: f32 transpose: out (f32) at n=4096 (naive), block 32x8x1, grid 128x128x1; ncu result 0 of"
    ));
    assert!(out.contains("Correctness: not checked"));
    assert!(out.contains("`klab check naive`"));
    assert!(out.contains(
        "naive#2    DRAM bytes (read + write) vs useful bytes    134,217,728            n/a  not measured"
    ));
}

#[test]
fn disagreeing_counters_are_reported_and_exit_0_as_for_a_capture() {
    // The naive kernel's 32 sectors per store request against copy's prediction of 4.
    let dir = tempfile::tempdir().unwrap();
    let f = renamed(dir.path(), "naive_k", "transpose_copy");
    let o = import(&f, &["--kernel", "copy"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        out.contains("global store sectors/request predicted 4 measured 32 (DISAGREES)"),
        "{out}"
    );
}

#[test]
fn a_kernel_with_no_launch_or_another_size_is_refused() {
    let o = import(
        &fixture("ncu_raw_naive_metrics.csv"),
        &["--kernel", "naive"],
    );
    refused(
        &o,
        &["no launch of naive's entry transpose_naive", "naive_k (3)"],
    );
    let dir = tempfile::tempdir().unwrap();
    // Another namespace's kernel of the entry's name is not klab's; the refusal names it
    // as it was compared, not as the bare function name it shares.
    let f = renamed(dir.path(), "naive_k", "mylib::transpose_naive");
    let o = import(&f, &["--kernel", "naive"]);
    refused(
        &o,
        &[
            "no launch of naive's entry transpose_naive",
            "the file has mylib::transpose_naive (3)",
        ],
    );
    let f = renamed(dir.path(), "naive_k", "transpose_naive");
    let o = import(&f, &["--kernel", "naive", "--n", "1000"]);
    refused(
        &o,
        &[
            "launched with grid 128x128x1, block 32x8x1",
            "grid 32x32x1",
            "give --n",
        ],
    );
}

/// Values a page holds under other names are shown, not `n/a` (issue 29, item 8): each
/// page is a real H200 page (see the README of the fixtures) with columns renamed or
/// dropped here, since no real page with those names is at hand; the values are its own.
#[test]
fn values_under_other_names_are_shown() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let no_identity = [("CC", ""), ("Grid Size", ""), ("Block Size", "")];
    // The duration without its roll-up suffix (the other roll-ups dropped), and no CC, Grid
    // Size or Block Size columns: the device attributes and launch statistics say them.
    let mut renames = no_identity.to_vec();
    renames.extend([
        ("gpu__time_duration.sum", "gpu__time_duration"),
        ("gpu__time_duration.avg", ""),
        ("gpu__time_duration.max", ""),
        ("gpu__time_duration.min", ""),
    ]);
    let text = std::fs::read_to_string(fixture("ncu_raw_sections_tiled.csv")).unwrap();
    let f = write("raw.csv", csv_edit::edited(&text, &renames, None));
    let o = import(&f, &[]);
    let out = text_of(&o);
    for want in [
        "== tiled_k (ncu result 0: grid 16,384 blocks, block 256 threads) ==",
        "Workload: tiled_k as ncu recorded it: grid 16,384 blocks, block 256 threads, NVIDIA H200 (CC 9.0), ncu result 0;",
        "duration under the profiler 78,464 ns",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    // DRAM bytes as one total (the page's read and write columns, summed into one).
    let text = std::fs::read_to_string(fixture("dev_import_raw_tiled.csv")).unwrap();
    let row = "tiled_k#0  DRAM bytes (read + write) vs useful bytes            n/a    114,394,112  no prediction";
    assert!(text_of(&import(&fixture("dev_import_raw_tiled.csv"), &[])).contains(row));
    let f = write(
        "dram.csv",
        csv_edit::edited(
            &text,
            &[
                ("dram__bytes_read.sum", "dram__bytes.sum"),
                ("dram__bytes_write.sum", ""),
            ],
            Some(("dram__bytes_read.sum", "114.394112")),
        ),
    );
    let out = text_of(&import(&f, &[]));
    assert!(out.contains(row), "{out}");
    // The details page: Launch Statistics' Grid Size and Block Size rows.
    let text = std::fs::read_to_string(fixture("ncu_details_padded.csv")).unwrap();
    let f = write("details.csv", csv_edit::edited(&text, &no_identity, None));
    let out = text_of(&import(&f, &[]));
    assert!(
        out.contains("== padded_k (ncu result 0: grid 16,384 blocks, block 256 threads) =="),
        "{out}"
    );
    // Counts are not shapes: beside klab's predictions (which hold for one shape) such a
    // page is refused, saying what it holds.
    let text = std::fs::read_to_string(fixture("ncu_raw_naive_metrics.csv")).unwrap();
    let f = write(
        "naive.csv",
        csv_edit::edited(&text, &no_identity, None).replace("naive_k", "transpose_naive"),
    );
    refused(
        &import(&f, &["--kernel", "naive"]),
        &[
            "launched with grid 16,384 blocks, block 256 threads",
            "grid 128x128x1, block 32x8x1",
        ],
    );
}

/// stdout, with stderr and the status when the import did not exit 0.
fn text_of(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    text(&o.stdout)
}

#[test]
fn bad_arguments_are_one_line_errors() {
    let f = fixture("ncu_raw_naive_metrics.csv");
    for (args, needle) in [
        (&["--n", "4096"][..], "without --kernel"),
        (&["--kernel", "sgeam"][..], "library routine"),
        (
            &["--kernel", "naive", "--kernel", "naive"][..],
            "listed twice",
        ),
        (&["--kernel", "no_such_kernel"][..], "no_such_kernel"),
        (&["naive"][..], "cannot be used with"),
        (&["--warmup", "3"][..], "cannot be used with"),
        (&["--out", "x"][..], "cannot be used with"),
    ] {
        refused(&import(&f, args), &[needle]);
    }
    let o = klab()
        .args(["profile", "--kernel", "naive"])
        .output()
        .unwrap();
    refused(&o, &["--import"]);
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

const EXPECTED: &str = "expected an Nsight Compute report (.ncu-rep) or its raw or details CSV page, as `ncu --import REPORT.ncu-rep --csv --page raw > REPORT.csv` writes it (or `ncu --csv --page raw ...` while profiling)";

#[test]
fn ncus_default_text_output_is_refused_naming_the_csv_command() {
    // The real default output of `ncu --metrics no_such__metric.sum` (dev_misc.txt).
    let misc = std::fs::read_to_string(fixture("dev_misc.txt")).unwrap();
    let start = misc.find("## ncu --metrics no_such__metric.sum\n").unwrap();
    let body = &misc[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let body = &body[..body.find("\n## ").unwrap() + 1];
    assert!(body.contains("Section: Command line profiler metrics"));
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "naive.txt", body.as_bytes());
    refused(
        &import(&p, &[]),
        &[
            "naive.txt is not a profile klab reads (it looks like ncu's default text output",
            EXPECTED,
        ],
    );
    // The whole file too, though it also holds "No kernels were profiled" runs.
    refused(
        &import(&fixture("dev_misc.txt"), &[]),
        &["ncu's default text output", EXPECTED],
    );
}

#[test]
fn other_formats_are_refused_saying_what_they_look_like() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes, looks) in [
        ("empty.csv", &b""[..], "an empty file"),
        ("blank.csv", &b" \n\n"[..], "an empty file"),
        ("p.json", &b"{\"kernels\": []}\n"[..], "JSON"),
        (
            "garbage.bin",
            &b"\x7fELF\x02\x01\x00\x00junk"[..],
            "binary data",
        ),
        ("t.sqlite", &b"SQLite format 3\x00...."[..], "klab trace"),
        ("a.csv", &b"kernel,n\nnaive,4096\n"[..], ""),
        (
            "err.txt",
            &b"==ERROR== Could not open report file 'x.ncu-rep'.\n"[..],
            "ncu said: ==ERROR== Could not open report file",
        ),
    ] {
        let p = write(dir.path(), name, bytes);
        refused(
            &import(&p, &[]),
            &[
                &format!("{name} is not a profile klab reads"),
                looks,
                EXPECTED,
            ],
        );
    }
    // ncu's own verdict in a saved run says more than "not a table".
    let p = write(
        dir.path(),
        "none.txt",
        b"==PROF== Connected to process 1 (./k)\n==WARNING== No kernels were profiled.\n",
    );
    refused(&import(&p, &[]), &["no kernels were profiled"]);
    // A table that breaks off inside a quoted field.
    let t = std::fs::read_to_string(fixture("ncu_raw_sections_tiled.csv")).unwrap();
    let p = write(
        dir.path(),
        "cut.csv",
        &t.as_bytes()[..t.rfind("\"0\",").unwrap() + 2],
    );
    refused(
        &import(&p, &[]),
        &["cut.csv: ", "unterminated quoted CSV field"],
    );
}

#[test]
fn files_that_are_not_regular_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("page.csv");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    refused(
        &import(&fifo, &[]),
        &["is a FIFO (named pipe), not a regular file"],
    );
    refused(
        &import(Path::new("/dev/zero"), &[]),
        &["/dev/zero is a character device, not a regular file"],
    );
    refused(&import(dir.path(), &[]), &["is a folder"]);
    refused(
        &import(&dir.path().join("missing.ncu-rep"), &[]),
        &["cannot read", "missing.ncu-rep"],
    );
}

/// A stand-in ncu in its own folder: logs its arguments, then runs `body`.
fn fake_ncu(dir: &Path, body: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let ncu = bin.join("ncu");
    std::fs::write(
        &ncu,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > '{}'\n{body}\n",
            dir.join("argv.txt").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&ncu, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn path_with(bin: &Path) -> std::ffi::OsString {
    let mut p = bin.as_os_str().to_os_string();
    p.push(":");
    p.push(std::env::var_os("PATH").unwrap_or_default());
    p
}

#[test]
fn a_report_goes_through_ncu_on_path_and_the_same_parser() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_ncu(
        dir.path(),
        &format!("cat '{}'", fixture("dev_import_raw_tiled.csv").display()),
    );
    // By its signature, whatever its name; and by its name.
    for name in ["tiled.ncu-rep", "tiled.report"] {
        let report = write(dir.path(), name, b"NVR\0 the rest of a report");
        let o = klab()
            .env("PATH", path_with(&bin))
            .args(["profile", "--import"])
            .arg(&report)
            .output()
            .unwrap();
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert!(
            out.lines().next().unwrap().ends_with(
                "an Nsight Compute report, read through ncu --import --csv --page raw, 2 profiled launches"
            ),
            "{out}"
        );
        assert!(out.contains("shared bank conflicts load 16,387,320 store 32,957"));
        let argv = std::fs::read_to_string(dir.path().join("argv.txt")).unwrap();
        assert_eq!(
            argv.lines().collect::<Vec<_>>(),
            [
                "--import",
                report.to_str().unwrap(),
                "--csv",
                "--page",
                "raw"
            ]
        );
    }
    // Named a report but without the signature: still ncu's to judge.
    let report = write(dir.path(), "odd.ncu-rep", b"not what ncu writes");
    let o = klab()
        .args(["profile", "--import"])
        .arg(&report)
        .arg("--ncu")
        .arg(bin.join("ncu"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn ncus_failure_or_absence_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_ncu(
        dir.path(),
        "echo \"==ERROR== Could not open report file '$2'.\" >&2\nexit 1",
    );
    let report = write(dir.path(), "r.ncu-rep", b"NVR\0");
    let o = klab()
        .env("PATH", path_with(&bin))
        .args(["profile", "--import"])
        .arg(&report)
        .output()
        .unwrap();
    refused(
        &o,
        &["r.ncu-rep: ncu failed (exit 1): ==ERROR== Could not open report file"],
    );
    let o = import(&report, &["--ncu", "/nonexistent/ncu"]);
    refused(
        &o,
        &["cannot start the Nsight Compute binary /nonexistent/ncu"],
    );
    // No ncu anywhere: the report cannot be read here; a CSV page can.
    if !Path::new(klab_tools::ncu::DEFAULT_NCU_PATH).exists() {
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let o = klab()
            .env("PATH", &empty)
            .args(["profile", "--import"])
            .arg(&report)
            .output()
            .unwrap();
        refused(
            &o,
            &[
                "r.ncu-rep is an Nsight Compute report, and reading one takes ncu",
                "--ncu PATH",
                "--csv --page raw",
            ],
        );
        let o = klab()
            .env("PATH", &empty)
            .args(["profile", "--import"])
            .arg(fixture("ncu_details_padded.csv"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
}

/// klab's own capture on the H200 (the raw and details pages of naive at N = 4096): both
/// imports put every counter beside the address model, and every one agrees, as they did
/// in the capture; ncu's default text output of the same run is refused.
#[test]
fn klabs_own_h200_capture_imports_as_it_was_captured() {
    for page in [
        "klab_capture_naive.raw.csv",
        "klab_capture_naive.details.csv",
    ] {
        let o = import(&fixture(page), &["--kernel", "naive"]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{page}: {}", text(&o.stderr));
        let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("naive ")).collect();
        assert_eq!(rows.len(), 7, "{page}: {out}");
        assert!(rows.iter().all(|r| r.ends_with("agrees")), "{page}: {out}");
        assert!(
            out.contains("global store sectors/request predicted 32 measured 32.00 (agrees)"),
            "{page}: {out}"
        );
        assert!(out.contains("20 registers/thread"), "{page}: {out}");
    }
    refused(
        &import(&fixture("klab_capture_tiled_default_text.txt"), &[]),
        &["ncu's default text output", "--csv --page raw"],
    );
}
