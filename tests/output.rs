//! `--format human|json|csv` (and `--json`): every command that reports prints one value in
//! the format asked for, and stdout then holds that value alone. What needs no GPU is run
//! here: the listing, the model, imported sanitizer and Nsight Compute reports; the
//! measuring commands' formats run in tests/gpu.rs and the sweep's in tests/sweep.rs.

use std::path::PathBuf;
use std::process::Output;

use klab_core::csv::Csv;

fn klab(args: &[&str]) -> Output {
    assert_cmd::Command::cargo_bin("klab")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert_eq!(
        o.status.code().map(|c| c == 0 || c == 2),
        Some(true),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/klab-tools/tests/fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The CSV on stdout, parsed: a header and rows of its width.
fn csv(o: &Output) -> Csv {
    Csv::parse(&stdout(o)).unwrap_or_else(|e| panic!("not CSV: {e}"))
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("not one JSON value: {e}"))
}

#[test]
fn the_listing_is_a_table_with_a_row_per_kernel() {
    let listed = json(&klab(&["kernels", "--json"]));
    let n = listed.as_array().unwrap().len();
    assert!(n > 10, "{listed}");
    assert_eq!(json(&klab(&["kernels", "--format", "json"])), listed);
    let table = csv(&klab(&["kernels", "--format", "csv"]));
    table.require(&["name", "operation", "entry"]).unwrap();
    let rows: Vec<_> = table.rows().collect();
    assert_eq!(rows.len(), n);
    assert_eq!(rows[0].get("name"), listed[0]["name"].as_str().unwrap());
}

#[test]
fn json_and_format_together_are_refused_in_one_line() {
    let o = klab(&["kernels", "--json", "--format", "csv"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--json"));
}

#[test]
fn the_model_is_a_row_per_predicted_access() {
    let value = json(&klab(&["model", "--format", "json"]));
    let accesses: usize = value["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["accesses"].as_array().unwrap().len())
        .sum();
    let table = csv(&klab(&["model", "--format", "csv"]));
    table
        .require(&["variant", "n", "access_name", "access_sectors"])
        .unwrap();
    assert_eq!(table.rows().count(), accesses);
    assert!(table.rows().any(|r| r.get("variant") == "naive"));
}

#[test]
fn an_imported_sanitizer_report_prints_in_every_format() {
    let file = fixture("san_racecheck_broken_33.txt");
    let args = ["sanitize", "--import", &file, "--tool", "racecheck"];
    let human = stdout(&klab(&args));
    assert!(human.starts_with(&format!("{file}: racecheck")), "{human}");
    let value = json(&klab(&[&args[..], &["--json"]].concat()));
    assert_eq!(value["file"], file.as_str());
    assert_eq!(value["report"]["tool"], "racecheck");
    let findings = value["report"]["findings"].as_array().unwrap().len();
    assert!(findings > 0);
    let table = csv(&klab(&[&args[..], &["--format", "csv"]].concat()));
    table
        .require(&[
            "file", "tool", "outcome", "kind", "hazard", "location", "count",
        ])
        .unwrap();
    assert_eq!(table.rows().count(), findings);
    assert!(table
        .rows()
        .all(|r| r.get("file") == file && r.get("tool") == "racecheck"));
    // A clean report is one row, its outcome and no finding.
    let clean = fixture("san_memcheck_padded_clean.txt");
    let table = csv(&klab(&[
        "sanitize", "--import", &clean, "--tool", "memcheck", "--format", "csv",
    ]));
    let rows: Vec<_> = table.rows().collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get("outcome"), "clean");
    assert_eq!(rows[0].get("kind"), "");
}

#[test]
fn an_imported_profile_is_the_counter_table() {
    let file = fixture("ncu/ncu_raw_naive_metrics.csv");
    let args = ["profile", "--import", &file];
    let value = json(&klab(&[&args[..], &["--format", "json"]].concat()));
    let kernels = value["kernels"].as_array().unwrap();
    assert_eq!(value["launches"], 3);
    let counters: usize = kernels
        .iter()
        .map(|k| k["counters"].as_array().unwrap().len())
        .sum();
    let table = csv(&klab(&[&args[..], &["--format", "csv"]].concat()));
    table
        .require(&["kernel", "quantity", "predicted", "measured", "agreement"])
        .unwrap();
    assert_eq!(table.rows().count(), counters);
    assert!(counters >= 7 * 3);
}
