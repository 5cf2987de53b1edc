//! `klab trace`: the command line over synthetic Nsight Systems exports (written by
//! `klab_tools::nsys::testdata`, the same builder as the library tests): the report, the
//! CSV, exit codes and one-line errors.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use assert_cmd::prelude::*;
use klab_tools::nsys::testdata;
use tempfile::TempDir;

const UM_ADD: &str = "nsys2022.1_um_add.sqlite";
const SAXPY: &str = "nsys2022.2_saxpy.sqlite";
const TRANSPOSE32: &str = "nsys2024.5_transpose32.sqlite";
const REDUCE: &str = "nsys2026.1_reduce.sqlite";
const FAILED64: &str = "nsys2024.5_transpose64_failed.sqlite";
const ALL: [&str; 5] = [UM_ADD, SAXPY, TRANSPOSE32, REDUCE, FAILED64];

/// A temporary folder holding every fixture.
fn fixtures() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let paths = testdata::write_all(dir.path()).unwrap();
    assert_eq!(paths.len(), ALL.len());
    dir
}

/// `klab trace ARGS` run inside `dir`, so that file names print without temp paths.
fn trace(dir: &Path, args: &[&str]) -> Output {
    Command::cargo_bin("klab")
        .unwrap()
        .current_dir(dir)
        .arg("trace")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The file names in a folder, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Exit 1, nothing on stdout, one line on stderr that contains `needle`.
fn assert_one_line_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(o.stdout.is_empty(), "stdout: {}", stdout(o));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
}

#[test]
fn every_fixture_is_reported_in_order_and_the_run_exits_0() {
    let dir = fixtures();
    let mut args: Vec<&str> = ALL.to_vec();
    args.extend(["--bytes-moved", "8000000", "--peak-gbs", "2039"]);
    let o = trace(dir.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
    let out = stdout(&o);
    let headers: Vec<&str> = out.lines().filter(|l| l.starts_with("== ")).collect();
    assert_eq!(
        headers,
        [
            "== nsys2022.1_um_add.sqlite: nsys 2022.1.3.3, schema 2.9.1, lazy export",
            "== nsys2022.2_saxpy.sqlite: nsys 2022.2.1.31, schema 2.9.1",
            "== nsys2024.5_transpose32.sqlite: nsys 2024.5.1.113, schema 3.13.2, lazy export",
            "== nsys2026.1_reduce.sqlite: nsys 2026.1.1.204, schema 3.24.14, lazy export",
            "== nsys2024.5_transpose64_failed.sqlite: nsys 2024.5.1.113, schema 3.13.2, lazy export",
        ]
    );
    // Seed 004's numbers and finding.
    assert!(out.contains("  - 15 runtime API calls and zero kernels: launches failed\n"));
    let copy_row = out
        .lines()
        .find(|l| l.contains("mat_copy") && l.contains(" 6560 "))
        .unwrap();
    assert!(
        copy_row.contains(" 1219.5 ") && copy_row.contains(" 59.8 "),
        "{copy_row}"
    );
    // Five saxpy launches, each named by its one launching call.
    let saxpy: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("cudaLaunchKernel  saxpy("))
        .collect();
    assert_eq!(saxpy.len(), 5, "{out}");
    assert!(
        out.contains("  - 2 API calls returned an error (first: cudaLaunchKernel returned 9)\n")
    );
}

#[test]
fn the_text_report_is_stable() {
    let dir = fixtures();
    let o = trace(
        dir.path(),
        &[
            TRANSPOSE32,
            "--bytes-moved",
            "8000000",
            "--peak-gbs",
            "2039",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!("transpose32_report", stdout(&o));
    let o = trace(dir.path(), &[FAILED64]);
    assert_eq!(o.status.code(), Some(0), "findings do not fail a run");
    insta::assert_snapshot!("failed64_report", stdout(&o));
}

#[test]
fn csv_to_stdout_has_the_fixed_header_and_nothing_else() {
    let dir = fixtures();
    let mut args: Vec<&str> = ALL.to_vec();
    args.extend(["--csv", "-", "--bytes-moved", "8000000"]);
    let o = trace(dir.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = stdout(&o);
    let mut lines = csv.lines();
    insta::assert_snapshot!("csv_header", lines.next().unwrap());
    // kernels + memcpys + memsets of every file: (1+3) + (5+3) + (6+2+1) + (8+3) + (0+2).
    assert_eq!(lines.count(), 4 + 8 + 9 + 11 + 2);
    assert!(!csv.contains("== "), "no text report with --csv -");
    assert!(csv.contains(
        "nsys2024.5_transpose32.sqlite,kernel,\"mat_copy(const int *, int *, int)\",0,7,32x32x1,32x32x1,16,0,,,52000904000,52000910560,6560,8000000,1219.512,,cudaLaunchKernel,8,4242,0\n"
    ));
    let o = trace(dir.path(), &[TRANSPOSE32, "--csv", "-"]);
    insta::assert_snapshot!("transpose32_csv", stdout(&o));
}

#[test]
fn csv_to_a_file_is_complete_and_leaves_no_temporary_files() {
    let dir = fixtures();
    fs::create_dir(dir.path().join("out")).unwrap();
    let o = trace(
        dir.path(),
        &[
            TRANSPOSE32,
            FAILED64,
            "--csv",
            "out/kernels.csv",
            "--bytes-moved",
            "8000000",
            "--peak-gbs",
            "2039",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("== nsys2024.5_transpose32.sqlite"),
        "the report is still printed"
    );
    assert!(out.ends_with("csv: out/kernels.csv (11 rows)\n"), "{out}");
    assert_eq!(names_in(&dir.path().join("out")), ["kernels.csv"]);
    let csv = fs::read_to_string(dir.path().join("out/kernels.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 9 + 2);
    assert!(lines[0].starts_with("file,kind,name,"));
    assert!(
        lines[4].ends_with(",6560,8000000,1219.512,59.81,cudaLaunchKernel,8,4242,0"),
        "{}",
        lines[4]
    );
    assert!(lines[11].starts_with("nsys2024.5_transpose64_failed.sqlite,memcpy,Device-to-Host,"));
    // A second run replaces the file whole.
    let o = trace(dir.path(), &[FAILED64, "--csv", "out/kernels.csv"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        fs::read_to_string(dir.path().join("out/kernels.csv"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    assert_eq!(names_in(&dir.path().join("out")), ["kernels.csv"]);
}

#[test]
fn a_failing_run_leaves_no_partial_csv() {
    let dir = fixtures();
    // An existing CSV is left exactly as it was.
    fs::write(dir.path().join("old.csv"), "old contents\n").unwrap();
    let before = names_in(dir.path());
    let o = trace(
        dir.path(),
        &[TRANSPOSE32, "missing.sqlite", "--csv", "old.csv"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        fs::read_to_string(dir.path().join("old.csv")).unwrap(),
        "old contents\n"
    );
    assert_eq!(names_in(dir.path()), before, "no temporary file left");
    let err = stderr(&o);
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            "error: missing.sqlite: no such file",
            "error: CSV not written to old.csv: 1 of 2 exports could not be read",
        ]
    );
    // A new CSV is not created.
    let o = trace(
        dir.path(),
        &["missing.sqlite", TRANSPOSE32, "--csv", "new.csv"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(!dir.path().join("new.csv").exists());
    assert_eq!(names_in(dir.path()), before);
    // Nor is a CSV on stdout.
    let o = trace(dir.path(), &[TRANSPOSE32, "missing.sqlite", "--csv", "-"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    // A folder that does not exist: one error, nothing created.
    let o = trace(dir.path(), &[TRANSPOSE32, "--csv", "nodir/x.csv"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("error: cannot write nodir/x.csv"),
        "{}",
        stderr(&o)
    );
    assert_eq!(names_in(dir.path()), before);
}

/// Two CSVs are written both or neither: one that cannot be written (no folder), or both
/// named one file, is refused before anything is read or written.
#[test]
fn csv_and_summary_are_written_both_or_neither() {
    let dir = fixtures();
    fs::write(dir.path().join("keep.csv"), "mine\n").unwrap();
    let before = names_in(dir.path());
    for args in [
        [
            TRANSPOSE32,
            "--csv",
            "keep.csv",
            "--summary-csv",
            "nodir/s.csv",
        ],
        [
            TRANSPOSE32,
            "--csv",
            "nodir/c.csv",
            "--summary-csv",
            "keep.csv",
        ],
        [
            TRANSPOSE32,
            "--csv",
            "keep.csv",
            "--summary-csv",
            "./keep.csv",
        ],
    ] {
        let o = trace(dir.path(), &args);
        let err = stderr(&o);
        assert_one_line_error(
            &o,
            if args[4] == "./keep.csv" {
                "both name"
            } else {
                "no folder nodir"
            },
        );
        assert!(!err.is_empty());
        assert_eq!(
            fs::read_to_string(dir.path().join("keep.csv")).unwrap(),
            "mine\n"
        );
        assert_eq!(names_in(dir.path()), before);
    }
}

#[test]
fn csv_will_not_overwrite_an_export() {
    let dir = fixtures();
    let before = fs::read(dir.path().join(TRANSPOSE32)).unwrap();
    let o = trace(dir.path(), &[TRANSPOSE32, "--csv", TRANSPOSE32]);
    assert_one_line_error(&o, "is one of the exports");
    assert_eq!(fs::read(dir.path().join(TRANSPOSE32)).unwrap(), before);
}

#[test]
fn peak_without_bytes_moved_is_a_one_line_usage_error() {
    let dir = fixtures();
    let o = trace(dir.path(), &[TRANSPOSE32, "--peak-gbs", "2039"]);
    assert_one_line_error(&o, "--bytes-moved");
}

#[test]
fn bad_numbers_are_one_line_errors() {
    let dir = fixtures();
    for (args, needle) in [
        (
            &["--bytes-moved", "-5"][..],
            "bytes must be positive, got '-5'",
        ),
        (
            &["--bytes-moved", "0"][..],
            "bytes must be at least 1, got 0",
        ),
        (
            &["--bytes-moved", "abc"][..],
            "bytes must be a whole number, got 'abc'",
        ),
        (
            &["--bytes-moved", "8e6"][..],
            "bytes must be a whole number, got '8e6'",
        ),
        (
            &["--bytes-moved", "99999999999999999999999"][..],
            "bytes must be at most 18446744073709551615",
        ),
        (
            &["--bytes-moved", "8", "--peak-gbs", "NaN"][..],
            "GB/s must be a number, got NaN",
        ),
        (
            &["--bytes-moved", "8", "--peak-gbs", "0"][..],
            "finite number above 0, got '0'",
        ),
        (
            &["--bytes-moved", "8", "--peak-gbs", "-2039"][..],
            "finite number above 0, got '-2039'",
        ),
        (
            &["--bytes-moved", "8", "--peak-gbs", "inf"][..],
            "finite number above 0, got 'inf'",
        ),
        (
            &["--bytes-moved", "8", "--peak-gbs", "fast"][..],
            "GB/s must be a number, got 'fast'",
        ),
    ] {
        let mut a = vec![TRANSPOSE32];
        a.extend(args);
        let o = trace(dir.path(), &a);
        assert_one_line_error(&o, needle);
    }
    let o = trace(dir.path(), &[]);
    assert_one_line_error(&o, "required");
}

#[test]
fn a_bad_file_is_an_error_and_the_others_are_still_reported() {
    let dir = fixtures();
    fs::write(
        dir.path().join("notes.sqlite"),
        "not a database, just text\n".repeat(100),
    )
    .unwrap();
    fs::write(dir.path().join("empty.sqlite"), "").unwrap();
    fs::create_dir(dir.path().join("folder.sqlite")).unwrap();
    let o = trace(
        dir.path(),
        &[
            UM_ADD,
            "missing.sqlite",
            "notes.sqlite",
            "empty.sqlite",
            "folder.sqlite",
            FAILED64,
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            "error: missing.sqlite: no such file",
            "error: notes.sqlite: not an SQLite database (make one with `nsys export --type sqlite REPORT.nsys-rep`)",
            "error: empty.sqlite: not an Nsight Systems export (no StringIds / CUPTI tables)",
            "error: folder.sqlite: is a directory, not an Nsight Systems SQLite export",
        ]
    );
    let out = stdout(&o);
    let headers: Vec<&str> = out.lines().filter(|l| l.starts_with("== ")).collect();
    assert_eq!(headers.len(), 2, "{out}");
    assert!(headers[0].starts_with("== nsys2022.1_um_add.sqlite"));
    assert!(headers[1].starts_with("== nsys2024.5_transpose64_failed.sqlite"));
    assert!(out.contains("15 runtime API calls and zero kernels: launches failed"));
    // Nothing was written beside the exports.
    let mut expected: Vec<String> = ALL.iter().map(|s| s.to_string()).collect();
    expected.extend(["empty.sqlite", "folder.sqlite", "notes.sqlite"].map(String::from));
    expected.sort();
    assert_eq!(names_in(dir.path()), expected);
}

#[test]
fn help_is_stable() {
    let o = Command::cargo_bin("klab")
        .unwrap()
        .args(["trace", "--help"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    insta::assert_snapshot!("help", stdout(&o));
}

#[test]
fn the_summary_csv_has_one_row_per_kernel_name_with_the_median_rate() {
    let dir = fixtures();
    let o = trace(
        dir.path(),
        &[
            TRANSPOSE32,
            "--summary-csv",
            "summary.csv",
            "--bytes-moved",
            "8000000",
            "--peak-gbs",
            "2039",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = fs::read_to_string(dir.path().join("summary.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "file,name,launches,timed,min_ns,median_ns,max_ns,total_ns,gb_s_at_median,pct_of_peak"
        )
    );
    let rows: Vec<&str> = lines.collect();
    assert!(!rows.is_empty());
    // Seed 004's copy at TILE_DIM 32: launches of 6,560 and 7,210 ns, median 6,885 ns,
    // 8,000,000 bytes / 6,885 ns = 1161.9 GB/s = 57.0% of 2039.
    assert!(rows.contains(
        &"nsys2024.5_transpose32.sqlite,\"mat_copy(const int *, int *, int)\",2,2,6560,6885,7210,13770,1161.9,57.0"
    ), "{text}");
    for r in &rows {
        assert!(r.starts_with(TRANSPOSE32), "{r}");
    }
    // The text report's summary and the CSV agree on the kernels listed.
    let names = rows.len();
    let report = stdout(&o);
    assert!(
        report.contains(&format!("summary csv: summary.csv ({names} rows)")),
        "{report}"
    );
    // A failed export: no summary file at all.
    let o = trace(
        dir.path(),
        &[TRANSPOSE32, "missing.sqlite", "--summary-csv", "s2.csv"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(!dir.path().join("s2.csv").exists());
}

/// A scenario export of `testdata` written as `name` into `dir`.
fn scenario(dir: &Path, name: &str, build: fn(&Path) -> testdata::Result<()>) {
    build(&dir.join(name)).unwrap();
}

#[test]
fn unified_memory_migrations_inside_a_kernel_are_reported_as_demand_paging() {
    let dir = tempfile::tempdir().unwrap();
    scenario(dir.path(), "um.sqlite", testdata::unified_memory_in_kernel);
    let o = trace(dir.path(), &["um.sqlite"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // The old report: "memory copies took 67.00 ms in total, 1.1x the 60.00 ms of kernel
    // time".
    assert!(!out.contains("memory copies took"), "{out}");
    let by_direction: String = out
        .split("\n\n")
        .find(|s| s.starts_with("memcpy by direction"))
        .unwrap()
        .to_string();
    let findings = &out[out.find("findings:").unwrap()..];
    insta::assert_snapshot!(
        "um_in_kernel_directions_and_findings",
        format!("{by_direction}\n\n{findings}")
    );
}

#[test]
fn copies_on_four_streams_are_reported_as_wall_clock_time() {
    let dir = tempfile::tempdir().unwrap();
    scenario(
        dir.path(),
        "streams.sqlite",
        testdata::copies_on_four_streams,
    );
    let o = trace(dir.path(), &["streams.sqlite"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The old report: "memory copies took 26.20 ms in total, 6.5x the 4.00 ms of kernel
    // time".
    insta::assert_snapshot!("four_streams_report", stdout(&o));
}

#[test]
fn a_newline_in_a_kernel_name_does_not_split_a_trace_table_row() {
    let dir = fixtures();
    testdata::edit(
        &dir.path().join(TRANSPOSE32),
        "UPDATE StringIds SET value = 'mat' || char(10) || 'copy' WHERE value LIKE 'mat_copy%'",
    )
    .unwrap();
    let o = trace(dir.path(), &[TRANSPOSE32]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.lines().any(|l| l == "copy"), "{out}");
    assert_eq!(
        out.lines()
            .filter(|l| l.ends_with("cudaLaunchKernel  mat\\ncopy"))
            .count(),
        2,
        "{out}"
    );
}

#[test]
fn a_wal_export_is_read_through_its_wal_or_refused_in_one_line() {
    let dir = fixtures();
    let path = dir.path().join(TRANSPOSE32);
    testdata::commit_to_wal(&path, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL;").unwrap();
    let before = names_in(dir.path());
    let o = trace(dir.path(), &[TRANSPOSE32]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // As sqlite3 sees it: no kernels (the old report listed the 6 still in the file).
    assert!(out.contains("kernel launches: none\n"), "{out}");
    assert!(
        out.contains("-wal holds changes not yet checkpointed into the export (WAL mode)"),
        "{out}"
    );
    assert_eq!(names_in(dir.path()), before);

    fs::remove_file(dir.path().join(format!("{TRANSPOSE32}-shm"))).unwrap();
    let before = names_in(dir.path());
    let o = trace(dir.path(), &[TRANSPOSE32]);
    assert_one_line_error(&o, &format!("{TRANSPOSE32}: has changes in "));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("sqlite3 {TRANSPOSE32} 'PRAGMA wal_checkpoint'")),
        "{err}"
    );
    assert_eq!(names_in(dir.path()), before, "no -shm created");
}
