//! `klab sanitize --import REPORT --tool T`: reports klab did not run, read by the same
//! parser as a run, with the documented exit codes (issue 15, item 6).

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::klab;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/klab-tools/tests/fixtures")
        .join(name)
}

fn import(path: &std::path::Path, tool: &str) -> Output {
    klab()
        .args(["sanitize", "--import"])
        .arg(path)
        .args(["--tool", tool])
        .output()
        .expect("klab runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn import_prints_the_findings_and_exits_2_on_errors() {
    let o = import(&fixture("san_racecheck_broken_33.txt"), "racecheck");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.contains("racecheck: found errors; summary 12 errors, 0 warnings; findings: 48 race (12648 hazards)"),
        "{out}"
    );
}

#[test]
fn import_of_a_clean_report_exits_0() {
    let o = import(&fixture("san_memcheck_padded_clean.txt"), "memcheck");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("memcheck: clean; summary 0 errors; no findings; exit 0"));
}

#[test]
fn import_reads_a_cr_only_report() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cr.txt");
    let t = std::fs::read_to_string(fixture("san_racecheck_broken_33.txt")).unwrap();
    std::fs::write(&p, t.replace('\n', "\r")).unwrap();
    let o = import(&p, "racecheck");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("findings: 48 race"));
}

#[test]
fn import_refuses_another_format_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("report.xml");
    std::fs::write(&p, "<?xml version=\"1.0\"?>\n<ComputeSanitizerOutput/>\n").unwrap();
    for path in [p, fixture("san_version.txt")] {
        let o = import(&path, "memcheck");
        assert_eq!(o.status.code(), Some(1));
        let err = text(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("expected a Compute Sanitizer text report"),
            "{err}"
        );
    }
}

/// A report imported under a tool that did not write it is refused in one line naming both
/// tools, with exit 1 (issue 29, item 8); racecheck's report read as memcheck's used to be
/// judged by memcheck's rules without a word. Each report is accepted under its own tool.
#[test]
fn import_refuses_a_report_of_another_tool_in_one_line() {
    for (file, tool, want) in [
        (
            "san_racecheck_broken_33.txt",
            "memcheck",
            "san_racecheck_broken_33.txt was written by racecheck, not memcheck (its RACECHECK SUMMARY line): import it with --tool racecheck",
        ),
        (
            "san_memcheck_broken_33.txt",
            "racecheck",
            "san_memcheck_broken_33.txt was written by memcheck, synccheck or initcheck, not racecheck (it has an ERROR SUMMARY line and no RACECHECK SUMMARY line",
        ),
        (
            "san_memcheck_triad_buggy.txt",
            "initcheck",
            "was written by memcheck, not initcheck (its invalid global read findings): import it with --tool memcheck",
        ),
    ] {
        let o = import(&fixture(file), tool);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{file} {tool}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
        assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
    }
    for (file, tool, code) in [
        ("san_racecheck_broken_33.txt", "racecheck", 2),
        ("san_memcheck_broken_33.txt", "memcheck", 0),
        ("san_memcheck_triad_buggy.txt", "memcheck", 2),
    ] {
        let o = import(&fixture(file), tool);
        assert_eq!(o.status.code(), Some(code), "{file}: {}", text(&o.stderr));
    }
}

#[test]
fn import_refuses_unreadable_inputs_and_bad_arguments_with_exit_1() {
    for (args, needle) in [
        (
            &["--import", "/dev/zero", "--tool", "memcheck"][..],
            "not a regular file",
        ),
        (
            &["--import", "/nonexistent/r.txt", "--tool", "memcheck"][..],
            "cannot read",
        ),
        (
            &["--import", "r.txt", "--tool", "leakcheck"][..],
            "possible values",
        ),
        (&["--import", "r.txt"][..], "--tool"),
        (&["--tool", "memcheck"][..], "--import"),
        (
            &["padded", "--import", "r.txt", "--tool", "memcheck"][..],
            "cannot be used",
        ),
    ] {
        let o = klab().arg("sanitize").args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            text(&o.stderr).contains(needle),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn tool_values_are_the_tool_names() {
    // The CLI's value enum and klab's tool list stay one list.
    let o = klab().args(["sanitize", "--help"]).output().unwrap();
    let names: Vec<&str> = klab_tools::sanitizer::Tool::ALL
        .iter()
        .map(|t| t.as_str())
        .collect();
    let want = format!("[possible values: {}]", names.join(", "));
    assert!(text(&o.stdout).contains(&want), "{}", text(&o.stdout));
}

/// Reports klab's own audit wrote on the H200 (evidence/2026-12-01-declared-rerun, call 1:
/// a `$ command` line before the tool's output and `exit=99` after it), imported: the same
/// findings and summary as the audit printed, warnings kept apart from errors.
#[test]
fn klabs_own_h200_audit_reports_import_as_the_audit_read_them() {
    for (file, tool, want) in [
        (
            "klab_audit_racecheck_gemm_no_second_sync.txt",
            "racecheck",
            "racecheck: found errors; summary 22 errors, 22 warnings; findings: 352 race (149248 hazards), 88 race warning (119040 hazards); first: RAW race in gemm_no_second_sync at gemm.cu:49 with gemm.cu:51 [256 hazards]",
        ),
        (
            "klab_audit_memcheck_gelu_pair_overread.txt",
            "memcheck",
            "memcheck: found errors; summary 5 errors; findings: 5 invalid global read; first: invalid global read of 4 bytes in gelu_pair_overread at gelu.cu:50",
        ),
    ] {
        let o = import(&fixture(file), tool);
        assert_eq!(o.status.code(), Some(2), "{file}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.contains(want), "{file}: {out}");
    }
}

/// An import runs nothing and writes nothing: the options of a run are refused beside it
/// rather than silently ignored (`--out` was).
#[test]
fn import_refuses_the_options_of_a_run() {
    let f = fixture("san_memcheck_padded_clean.txt");
    for extra in [
        &["--out", "somewhere"][..],
        &["--tools", "memcheck"][..],
        &["--timeout", "5"][..],
        &["--sanitizer", "/bin/true"][..],
    ] {
        let o = klab()
            .args(["sanitize", "--import"])
            .arg(&f)
            .args(["--tool", "memcheck"])
            .args(extra)
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
        assert!(err.contains("cannot be used with"), "{extra:?}: {err}");
    }
}
