//! `klab report` from the command line: on a copy of the report fixture (a trimmed H200
//! lab run) it writes the page, the summary and the plots and prints their paths; on a
//! folder that is not a run it exits 1 with one `error:` line and writes nothing.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/klab-report/tests/fixtures/run")
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            fs::copy(e.path(), &target).unwrap();
        }
    }
}

fn klab() -> Command {
    Command::cargo_bin("klab").unwrap()
}

const FILES: [&str; 6] = [
    "index.html",
    "report.md",
    "plots/bandwidth.svg",
    "plots/rounds.svg",
    "plots/roofline.svg",
    "plots/counters.svg",
];

#[test]
fn report_writes_the_page_the_summary_and_the_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run-07");
    copy_tree(&fixture(), &run);
    let out = klab().arg("report").arg(&run).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<&str> = stdout.lines().collect();
    let want: Vec<String> = FILES
        .iter()
        .map(|f| run.join("report").join(f).display().to_string())
        .collect();
    assert_eq!(printed, want);
    for f in FILES {
        let p = run.join("report").join(f);
        assert!(
            fs::metadata(&p).unwrap().len() > 500,
            "{} is too small",
            p.display()
        );
    }
    let html = fs::read_to_string(run.join("report/index.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg ").count(), 4);
    assert!(html.contains("klab report: run-07"));
    let md = fs::read_to_string(run.join("report/report.md")).unwrap();
    assert!(md.contains("![roofline.svg](plots/roofline.svg)"));

    // Again: byte-identical files.
    let first: Vec<Vec<u8>> = FILES
        .iter()
        .map(|f| fs::read(run.join("report").join(f)).unwrap())
        .collect();
    klab().arg("report").arg(&run).assert().success();
    for (f, bytes) in FILES.iter().zip(first) {
        assert_eq!(
            fs::read(run.join("report").join(f)).unwrap(),
            bytes,
            "{f} changed"
        );
    }
}

#[test]
fn report_out_writes_elsewhere() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    copy_tree(&fixture(), &run);
    let dest = tmp.path().join("site/run-report");
    let out = klab()
        .arg("report")
        .arg(&run)
        .arg("--out")
        .arg(&dest)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in FILES {
        assert!(dest.join(f).is_file(), "{f}");
    }
    assert!(!run.join("report").exists());
}

fn assert_one_error_line(out: &std::process::Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "printed to stdout");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(needle), "expected '{needle}' in {stderr}");
}

#[test]
fn a_folder_without_lab_json_exits_1_with_one_error_line() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("summary.csv"), "variant\n").unwrap();
    let out = klab().arg("report").arg(tmp.path()).output().unwrap();
    assert_one_error_line(&out, "is not a klab run folder: it has no lab.json");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&tmp.path().display().to_string()));
    assert!(!tmp.path().join("report").exists(), "wrote into a non-run");

    let out = klab()
        .arg("report")
        .arg(tmp.path().join("missing"))
        .output()
        .unwrap();
    assert_one_error_line(&out, "missing is not a folder");

    fs::write(tmp.path().join("lab.json"), "not json").unwrap();
    let out = klab().arg("report").arg(tmp.path()).output().unwrap();
    assert_one_error_line(&out, "is not a klab lab record");
}

#[test]
fn report_help() {
    let out = klab().args(["report", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
}
