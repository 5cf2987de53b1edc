//! Schema `klab-receipt/1`: strict parsing and validation, with real files in a tempdir.
//! Each refusal is checked through `Receipt::load` and, where it matters, through `compare`.

mod compare_fixture;

use std::fs;
use std::path::Path;

use compare_fixture::*;
use klab_evidence::compare::{compare, CompareError};
use klab_evidence::receipt::{Receipt, ReceiptError};
use serde_json::{json, Value};

/// A valid pair, the baseline receipt edited as JSON, then `Receipt::load` of it.
fn load_after(edit: impl FnOnce(&mut Value)) -> (tempfile::TempDir, Result<Receipt, ReceiptError>) {
    let d = tempfile::tempdir().unwrap();
    let (b, _) = pair(d.path());
    edit_json(&b, edit);
    let r = Receipt::load(&b);
    (d, r)
}

fn refused(edit: impl FnOnce(&mut Value)) -> String {
    let (_d, r) = load_after(edit);
    let e = r.expect_err("an invalid receipt was accepted");
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "error is not one line: {msg}");
    msg
}

/// Compare after editing the candidate's JSON; the error text.
fn compare_refused(edit: impl FnOnce(&mut Value)) -> String {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, edit);
    let e = compare(&b, &c, &cfg()).expect_err("compare accepted an invalid receipt");
    assert!(matches!(e, CompareError::Receipt(_)), "{e:?}");
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "error is not one line: {msg}");
    assert!(
        msg.contains("candidate"),
        "error does not name the file: {msg}"
    );
    msg
}

#[test]
fn written_receipt_round_trips_and_validates() {
    let d = tempfile::tempdir().unwrap();
    let (b, _) = pair(d.path());
    let r = Receipt::load(&b).unwrap();
    let text = fs::read_to_string(&b).unwrap();
    assert_eq!(text, r.to_json(), "written text is to_json");
    assert!(
        text.starts_with("{\n  \"schema\": \"klab-receipt/1\""),
        "{text}"
    );
    let again = Receipt::from_json(&r.to_json(), Path::new("x")).unwrap();
    assert_eq!(again, r);
    // Atomic write leaves no temporaries beside the receipt.
    let stray: Vec<_> = fs::read_dir(b.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

#[test]
fn write_refuses_an_invalid_receipt_and_leaves_no_file() {
    let d = tempfile::tempdir().unwrap();
    let mut r = template("k");
    r.hardware.gpu_uuid = " ".into();
    let p = d.path().join("receipt.json");
    let e = r.write(&p).unwrap_err().to_string();
    assert!(e.contains("hardware.gpu_uuid is empty"), "{e}");
    assert!(e.contains("receipt.json"), "{e}");
    assert!(!p.exists());
}

#[test]
fn boolean_length_is_refused_by_serde() {
    // Seed 003's "boolean length": Python's True == 1; here `true` is not a u64.
    let msg = refused(|v| v["workload"]["n"] = json!(true));
    assert!(
        msg.contains("invalid type: boolean `true`, expected u64"),
        "{msg}"
    );
    assert!(msg.contains("\"n\": true"), "error shows the line: {msg}");
    assert!(msg.contains("receipt.json"), "{msg}");
    assert!(msg.contains("line "), "{msg}");
    compare_refused(|v| v["workload"]["n"] = json!(true));
}

#[test]
fn string_length_is_refused_by_serde() {
    let msg = refused(|v| v["workload"]["n"] = json!("5"));
    assert!(
        msg.contains("invalid type: string \"5\", expected u64"),
        "{msg}"
    );
    let msg = refused(|v| v["measurement"]["rounds"] = json!(-1));
    assert!(msg.contains("expected u64"), "{msg}");
}

#[test]
fn zero_length_is_refused() {
    let msg = refused(|v| v["workload"]["n"] = json!(0));
    assert!(msg.contains("workload.n is 0"), "{msg}");
}

#[test]
fn unknown_and_missing_fields_are_refused() {
    let msg = refused(|v| v["workload"]["dtpye"] = json!("float32"));
    assert!(msg.contains("unknown field `dtpye`"), "{msg}");
    let msg = refused(|v| v["hardware"]["gpu_uuid_"] = json!("x"));
    assert!(msg.contains("unknown field `gpu_uuid_`"), "{msg}");
    let msg = refused(|v| v["result"]["speedup"] = json!(2.0));
    assert!(msg.contains("unknown field `speedup`"), "{msg}");
    let msg = refused(|v| {
        v["workload"].as_object_mut().unwrap().remove("dtype");
    });
    assert!(msg.contains("missing field `dtype`"), "{msg}");
    compare_refused(|v| v["measurement"]["sample"] = json!(5));
}

#[test]
fn wrong_schema_is_refused() {
    let msg = refused(|v| v["schema"] = json!("klab-receipt/2"));
    assert!(
        msg.contains("schema is 'klab-receipt/2', expected 'klab-receipt/1'"),
        "{msg}"
    );
    compare_refused(|v| v["schema"] = json!(""));
}

#[test]
fn empty_labels_are_refused() {
    for (path, field) in [
        (vec!["hardware", "gpu_uuid"], "hardware.gpu_uuid"),
        (vec!["hardware", "gpu_name"], "hardware.gpu_name"),
        (vec!["workload", "dtype"], "workload.dtype"),
        (vec!["workload", "operation"], "workload.operation"),
        (vec!["claim"], "claim"),
        (vec!["source", "file"], "source.file"),
        (vec!["source", "entry"], "source.entry"),
        (vec!["measurement", "order"], "measurement.order"),
        (
            vec!["measurement", "warmup", "policy"],
            "measurement.warmup.policy",
        ),
    ] {
        for blank in ["", "  \t"] {
            let msg = refused(|v| {
                let mut at = &mut *v;
                for k in &path {
                    at = &mut at[*k];
                }
                *at = json!(blank);
            });
            assert!(msg.contains(&format!("{field} is empty")), "{field}: {msg}");
        }
    }
    let msg = compare_refused(|v| v["hardware"]["gpu_uuid"] = json!(""));
    assert!(msg.contains("hardware.gpu_uuid is empty"), "{msg}");
}

#[test]
fn empty_timer_and_regime_labels_are_refused() {
    // Seed 003's "missing timer": the timer and regime are closed sets, so an empty or
    // unknown label does not parse.
    let msg = refused(|v| v["measurement"]["timer"] = json!(""));
    assert!(msg.contains("unknown timer ''"), "{msg}");
    let msg = refused(|v| v["measurement"]["timer"] = json!({"kind": "per-launch"}));
    assert!(msg.contains("expected a string"), "{msg}");
    let msg = refused(|v| v["measurement"]["timer"] = json!("per-launch:10"));
    assert!(msg.contains("unknown timer 'per-launch:10'"), "{msg}");
    let msg = refused(|v| v["workload"]["cache_regime"] = json!(""));
    assert!(msg.contains("unknown variant ``"), "{msg}");
    let msg = refused(|v| v["workload"]["cache_regime"] = json!("hot"));
    assert!(msg.contains("unknown variant `hot`"), "{msg}");
    let msg = refused(|v| v["measurement"]["timer"] = json!("batch:0"));
    assert!(
        msg.contains("launch count must be a positive integer"),
        "{msg}"
    );
    compare_refused(|v| v["measurement"]["timer"] = json!(" "));
}

#[test]
fn one_rotating_slot_is_refused() {
    // Seed 003's "one rotating slot": buffer-rotated needs at least two slots.
    let msg = refused(|v| v["workload"]["rotation_slots"] = json!(1));
    assert!(msg.contains("workload.rotation_slots is 1"), "{msg}");
    assert!(
        msg.contains("cache policy and slot count disagree"),
        "{msg}"
    );
    compare_refused(|v| v["workload"]["rotation_slots"] = json!(1));
}

#[test]
fn same_buffer_with_three_slots_is_refused() {
    let msg = refused(|v| {
        v["workload"]["cache_regime"] = json!("same-buffer");
        v["workload"]["rotation_slots"] = json!(3);
    });
    assert!(msg.contains("needs exactly 1"), "{msg}");
    let msg = refused(|v| {
        v["workload"]["cache_regime"] = json!("l2-flushed");
        v["workload"]["rotation_slots"] = json!(0);
    });
    assert!(msg.contains("workload.rotation_slots is 0"), "{msg}");
}

#[test]
fn sample_and_round_counts_are_refused() {
    let msg = refused(|v| v["measurement"]["samples_per_round"] = json!(1));
    assert!(msg.contains("measurement.samples_per_round is 1"), "{msg}");
    let msg = refused(|v| {
        v["measurement"]["rounds"] = json!(0);
        v["measurement"]["raw_samples"] = json!([]);
    });
    assert!(msg.contains("measurement.rounds is 0"), "{msg}");
    let msg = refused(|v| v["measurement"]["rounds"] = json!(6));
    assert!(msg.contains("is 7, outside rounds 1..=6"), "{msg}");
    let msg = refused(|v| v["measurement"]["rounds"] = json!(8));
    assert!(msg.contains("round 8 has no sample file"), "{msg}");
    let msg = refused(|v| {
        v["measurement"]["raw_samples"][1]["round"] = json!(1);
        v["measurement"]["raw_samples"][1]["position"] =
            v["measurement"]["raw_samples"][0]["position"].clone();
    });
    assert!(msg.contains("position 0 has more than one file"), "{msg}");
    let msg = refused(|v| {
        v["measurement"]["raw_samples"][1]["path"] = json!("./samples-r01.csv");
    });
    assert!(msg.contains("listed for more than one block"), "{msg}");
    // Two blocks in one round (ABBA) at different positions are fine.
    let (_d, r) = load_after(|v| {
        let mut extra = v["measurement"]["raw_samples"][0].clone();
        extra["position"] = json!(3);
        extra["path"] = json!("samples-r01-b.csv");
        v["measurement"]["raw_samples"]
            .as_array_mut()
            .unwrap()
            .push(extra);
    });
    r.unwrap();
}

#[test]
fn hashes_that_are_not_sha256_are_refused() {
    let upper = "A".repeat(64);
    let short = "a".repeat(63);
    let not_hex = "g".repeat(64);
    for bad in [upper.as_str(), short.as_str(), not_hex.as_str(), ""] {
        let msg = refused(|v| v["measurement"]["raw_samples"][0]["sha256"] = json!(bad));
        assert!(msg.contains("measurement.raw_samples[0].sha256"), "{msg}");
        assert!(msg.contains("is not a SHA-256 digest"), "{msg}");
    }
    let msg = refused(|v| v["artifacts"][0]["sha256"] = json!("xyz"));
    assert!(
        msg.contains("artifacts[0].sha256 'xyz' is not a SHA-256"),
        "{msg}"
    );
    let msg = refused(|v| v["source"]["file_sha256"] = json!("<triad_bench.cu SHA-256>"));
    assert!(msg.contains("source.file_sha256"), "{msg}");
    let msg = refused(|v| v["source"]["binary_sha256"] = json!(1234));
    assert!(msg.contains("expected a string"), "{msg}");
    compare_refused(|v| v["artifacts"][0]["sha256"] = json!("not-hex"));
}

#[test]
fn paths_with_parent_components_are_refused() {
    let msg = refused(|v| v["measurement"]["raw_samples"][0]["path"] = json!("../samples-r01.csv"));
    assert!(
        msg.contains("measurement.raw_samples[0].path '../samples-r01.csv' has a '..' component"),
        "{msg}"
    );
    let msg = refused(|v| v["artifacts"][0]["path"] = json!("sub/../../x.csv"));
    assert!(msg.contains("artifacts[0].path"), "{msg}");
    let msg = refused(|v| v["correctness"]["sanitizer"][0]["report"] = json!("../memcheck.txt"));
    assert!(msg.contains("correctness.sanitizer[0].report"), "{msg}");
    compare_refused(|v| v["artifacts"][0]["path"] = json!("../baseline/samples-r01.csv"));
}

#[test]
fn absolute_and_empty_paths_are_refused() {
    let msg = refused(|v| v["artifacts"][1]["path"] = json!("/etc/passwd"));
    assert!(
        msg.contains("artifacts[1].path '/etc/passwd' is absolute"),
        "{msg}"
    );
    let msg = refused(|v| v["measurement"]["raw_samples"][2]["path"] = json!(""));
    assert!(
        msg.contains("measurement.raw_samples[2].path '' is empty"),
        "{msg}"
    );
    let msg = refused(|v| v["measurement"]["raw_samples"][2]["path"] = json!("."));
    assert!(msg.contains("names no file"), "{msg}");
    compare_refused(|v| v["measurement"]["raw_samples"][0]["path"] = json!("/tmp/samples-r01.csv"));
}

#[test]
fn sanitizer_report_must_be_a_hashed_artifact() {
    let msg = refused(|v| v["correctness"]["sanitizer"][0]["report"] = json!("racecheck.txt"));
    assert!(
        msg.contains("'racecheck.txt' is not listed in artifacts"),
        "{msg}"
    );
    let msg = refused(|v| v["artifacts"][1]["path"] = json!("samples-r01.csv"));
    assert!(msg.contains("is listed twice"), "{msg}");
}

#[test]
fn non_finite_or_negative_results_are_refused() {
    let msg = refused(|v| v["result"]["median_us"] = json!(-1.0));
    assert!(msg.contains("result.median_us is -1"), "{msg}");
    // JSON has no NaN: serde_json writes it as null, which is not an f64.
    let msg = refused(|v| v["result"]["p90_us"] = Value::Null);
    assert!(msg.contains("expected f64"), "{msg}");
    let msg = refused(|v| v["result"]["p10_us"] = json!(1e9));
    assert!(msg.contains("quantiles out of order"), "{msg}");

    // On a receipt built in memory, NaN and infinity are refused by validate.
    let d = tempfile::tempdir().unwrap();
    let (b, _) = pair(d.path());
    let r = Receipt::load(&b).unwrap();
    for bad in [f64::NAN, f64::INFINITY, -0.5] {
        let mut x = r.clone();
        x.result.useful_gb_s = bad;
        let e = x.validate().unwrap_err().to_string();
        assert!(e.contains("result.useful_gb_s"), "{e}");
        let mut x = r.clone();
        x.hardware.theoretical_peak_gb_s = bad;
        assert!(x.validate().is_err());
        let mut x = r.clone();
        x.correctness.atol = Some(bad);
        assert!(x.validate().is_err());
    }
}

#[test]
fn malformed_json_and_missing_file_are_one_line_errors() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("receipt.json");
    let e = Receipt::read(&p).unwrap_err().to_string();
    assert!(e.starts_with("cannot read receipt "), "{e}");
    fs::write(&p, "{\n  \"schema\": \"klab-receipt/1\",\n  \"claim\": \n").unwrap();
    let e = Receipt::read(&p).unwrap_err().to_string();
    assert!(e.contains("receipt.json") && e.contains("line "), "{e}");
    assert!(!e.contains('\n'), "{e}");
    fs::write(&p, [0xff, 0xfe]).unwrap();
    let e = Receipt::read(&p).unwrap_err().to_string();
    assert!(e.contains("not UTF-8"), "{e}");
}

#[test]
fn baseline_source_is_validated_when_present() {
    let d = tempfile::tempdir().unwrap();
    let (b, _) = pair(d.path());
    let mut r = Receipt::load(&b).unwrap();
    let mut s = r.source.clone();
    s.binary_sha256 = "<baseline binary SHA-256>".into();
    r.baseline_source = Some(s);
    let e = r.validate().unwrap_err().to_string();
    assert!(e.contains("baseline_source.binary_sha256"), "{e}");
}

/// `result.rounds` (where a combined receipt stood in its rounds) is optional, so receipts
/// written before it still load; when present it round-trips, and its numbers are checked.
#[test]
fn the_rounds_context_is_optional_kept_and_checked() {
    let (_d, r) = load_after(|v| {
        assert!(
            v["result"].get("rounds").is_none(),
            "the fixture has no context"
        );
    });
    let r = r.unwrap();
    assert_eq!(r.result.rounds, None);
    // The share of the ceiling is recomputed from the receipt's own rate.
    let pct = 100.0 * r.result.useful_gb_s / 4094.0;
    let context = json!({
        "kernels": ["sgeam", "copy_vec16", "own4_64"],
        "ceiling_kernel": "copy_vec16",
        "ceiling_gb_s": 4094.0,
        "pct_of_ceiling": pct,
        "baseline": "sgeam",
        "ratio_to_baseline": 0.95,
        "ratio_interval": [0.93, 0.95]
    });
    let c = context.clone();
    let (_d, r) = load_after(move |v| v["result"]["rounds"] = c);
    let r = r.unwrap();
    let got = r.result.rounds.as_ref().unwrap();
    assert_eq!(got.pct_of_ceiling, Some(pct));
    assert_eq!(got.ratio_interval, Some([0.93, 0.95]));
    assert_eq!(serde_json::to_value(got).unwrap(), context);
    let mut bad = context.clone();
    bad["ratio_to_baseline"] = json!(-1.0);
    let msg = refused(move |v| v["result"]["rounds"] = bad);
    assert!(msg.contains("result.rounds.ratio_to_baseline"), "{msg}");
    let mut wrong = context.clone();
    wrong["pct_of_ceiling"] = json!(77.4);
    let msg = refused(move |v| v["result"]["rounds"] = wrong);
    assert!(
        msg.contains(&format!(
            "result.rounds.pct_of_ceiling is 77.4, but 100 x result.useful_gb_s / result.rounds.ceiling_gb_s give {pct}"
        )),
        "{msg}"
    );
    let mut stranger = context.clone();
    stranger["baseline"] = json!("cublas");
    let msg = refused(move |v| v["result"]["rounds"] = stranger);
    assert!(
        msg.contains("result.rounds.baseline 'cublas' is not one of result.rounds.kernels"),
        "{msg}"
    );
    let mut backwards = context.clone();
    backwards["ratio_interval"] = json!([0.96, 0.93]);
    let msg = refused(move |v| v["result"]["rounds"] = backwards);
    assert!(msg.contains("bounds out of order"), "{msg}");
    let mut extra = context;
    extra["speedup"] = json!(2.0);
    let msg = refused(move |v| v["result"]["rounds"] = extra);
    assert!(msg.contains("speedup"), "{msg}");
}

/// Issue: domains serde lets through. Each field named with the value it holds.
#[test]
fn timestamps_must_be_rfc3339_after_2000_and_not_ahead_of_the_clock() {
    for (bad, says) in [
        ("yesterday", "'yesterday' is not an RFC 3339 timestamp"),
        ("2026-11-30 09:04:56", "is not an RFC 3339 timestamp"),
        ("2026-02-30T09:04:56Z", "is not an RFC 3339 timestamp"),
        ("1970-01-01T00:00:00Z", "is before 2000-01-01T00:00:00Z"),
        (
            "2999-01-01T00:00:00Z",
            "hours ahead of this machine's clock",
        ),
    ] {
        let msg = refused(|v| v["created_utc"] = json!(bad));
        assert!(msg.contains(&format!("created_utc '{bad}'")), "{msg}");
        assert!(msg.contains(says), "{bad}: {msg}");
    }
    // An offset other than Z is RFC 3339 too.
    let (_d, r) = load_after(|v| v["created_utc"] = json!("2026-11-30T10:04:56+01:00"));
    r.unwrap();
    let msg = refused(|v| v["measurement"]["gpu_state"][2]["before"]["utc"] = json!("banana"));
    assert!(
        msg.contains("measurement.gpu_state[2].before.utc 'banana' is not an RFC 3339 timestamp"),
        "{msg}"
    );
    let msg = refused(|v| {
        v["measurement"]["gpu_state"][0]["before"]["utc"] = json!("2026-11-30T09:05:00Z")
    });
    assert!(
        msg.contains("measurement.gpu_state[0].after.utc '2026-11-30T09:04:56Z' is earlier than before.utc '2026-11-30T09:05:00Z'"),
        "{msg}"
    );
    let msg = refused(|v| {
        v["measurement"]["gpu_state"][0]["after"]["utc"] = json!("2026-11-30T10:00:00Z")
    });
    assert!(
        msg.contains("is later than created_utc '2026-11-30T09:04:56Z'"),
        "{msg}"
    );
}

#[test]
fn compute_capability_must_be_major_minor() {
    for ok in ["9.0", "10.0", "12.1", "8.9"] {
        let (_d, r) = load_after(|v| v["hardware"]["compute_capability"] = json!(ok));
        r.unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for bad in [
        "banana", "9", "9.", ".0", "9.0.1", "09.0", "sm_90", "9.0a", "-9.0", "123.4",
    ] {
        let msg = refused(|v| v["hardware"]["compute_capability"] = json!(bad));
        assert!(
            msg.contains(&format!(
                "hardware.compute_capability '{bad}' is not a compute capability"
            )),
            "{bad}: {msg}"
        );
    }
}

#[test]
fn a_launch_outside_cuda_limits_or_the_builtin_contract_is_refused() {
    let msg = refused(|v| v["workload"]["block"] = json!([2048, 1, 1]));
    assert!(
        msg.contains("workload launch grid [3907, 1, 1] block [2048, 1, 1]: block 2048x1x1 has 2048 threads, over the device limit of 1024"),
        "{msg}"
    );
    let msg = refused(|v| v["workload"]["grid"] = json!([3907, 70000, 1]));
    assert!(
        msg.contains("grid y dimension 70000 exceeds the device limit 65535"),
        "{msg}"
    );
    let msg = refused(|v| v["workload"]["flops_per_launch"] = json!(0));
    assert!(
        msg.contains("workload.flops_per_launch is 0, but triad at n = 1000003 gives 2000006"),
        "{msg}"
    );
    // Every grid ceil(n / e) or floor(n / e) is a triad launch at this n (e = 256, 1, n).
    for grid in [3907, 1_000_003, 1, 3906, 500_002, 500_001] {
        let (_d, r) = load_after(|v| v["workload"]["grid"] = json!([grid, 1, 1]));
        r.unwrap_or_else(|e| panic!("{grid}: {e}"));
    }
    // A declared operation's launch is not a function of n that the receipt records.
    let (_d, r) = load_after(|v| {
        v["workload"]["operation"] = json!("declared: y (f32) at n=1000003");
        v["workload"]["grid"] = json!([700000, 1, 1]);
        v["workload"]["flops_per_launch"] = json!(5);
        // The floor is of the FLOPs stated (it is refused when it is another's, below).
        v["integrity"]["floor"] = Value::Null;
    });
    r.unwrap();
}

/// The physical floor is the floor of this receipt's work on this receipt's device: a floor
/// lowered by hand, taken from another workload or from another device's rates, or whose
/// counts contradict the medians they count, is refused, naming the field.
#[test]
fn a_floor_or_integrity_count_that_is_not_this_receipts_is_refused() {
    let msg = refused(|v| v["integrity"]["floor"]["us"] = json!(1.0));
    assert!(
        msg.contains("integrity.floor.us is 1, but its bytes, FLOPs and rates give"),
        "{msg}"
    );
    let msg = refused(|v| v["integrity"]["floor"]["useful_bytes"] = json!(1000));
    assert!(
        msg.contains("integrity.floor.useful_bytes is 1000, but workload.useful_bytes_per_launch is 12000036"),
        "{msg}"
    );
    let msg = refused(|v| v["integrity"]["floor"]["rates"]["hbm_gb_s"] = json!(48000.0));
    assert!(
        msg.contains(
            "integrity.floor.rates.hbm_gb_s is 48000, but hardware.theoretical_peak_gb_s give 4800"
        ),
        "{msg}"
    );
    let msg = refused(|v| v["integrity"]["floor"]["rates"]["l2_bytes"] = json!(1));
    assert!(
        msg.contains("integrity.floor.rates.l2_bytes is 1, but hardware.l2_bytes"),
        "{msg}"
    );
    let msg = refused(|v| v["integrity"]["probes"] = json!(0));
    assert!(
        msg.contains("integrity.probe_median_us is 10, but integrity.probes is 0"),
        "{msg}"
    );
    let msg = refused(|v| v["integrity"]["checked_median_us"] = Value::Null);
    assert!(
        msg.contains("integrity.checked_median_us is absent, but integrity.checked_launches is 12"),
        "{msg}"
    );
}

/// Figures the receipt alone determines, recomputed: a forged one names the field, what
/// it says and what the other figures give.
#[test]
fn figures_that_follow_from_other_figures_are_recomputed() {
    let msg = refused(|v| v["result"]["useful_gb_s"] = json!(4000.0));
    assert!(
        msg.contains("result.useful_gb_s is 4000, but workload.useful_bytes_per_launch / result.median_us give 118.8"),
        "{msg}"
    );
    let msg = refused(|v| v["result"]["pct_of_peak"] = json!(99.0));
    assert!(
        msg.contains("result.pct_of_peak is 99, but 100 x result.useful_gb_s / hardware.theoretical_peak_gb_s give 2.4"),
        "{msg}"
    );
    // Was a note; a count the states contradict is now refused.
    let msg = refused(|v| v["result"]["flagged_blocks"] = json!(2));
    assert!(
        msg.contains(
            "result.flagged_blocks is 2, but 0 block(s) in measurement.gpu_state carry flags"
        ),
        "{msg}"
    );
    // Flags are what the before and after observations give.
    let msg = refused(|v| {
        v["measurement"]["gpu_state"][1]["flags"] = json!(["sw_power_cap after"]);
        v["result"]["flagged_blocks"] = json!(1);
    });
    assert!(
        msg.contains("measurement.gpu_state[1].flags is [\"sw_power_cap after\"], but its before and after observations give []"),
        "{msg}"
    );
    let msg = refused(|v| v["measurement"]["gpu_state"][1]["after"]["sm_clock_mhz"] = json!(1500));
    assert!(
        msg.contains("measurement.gpu_state[1].flags is [], but"),
        "{msg}"
    );
    assert!(
        msg.contains("SM clock moved 24.2% (1980 -> 1500 MHz)"),
        "{msg}"
    );
    let msg = refused(|v| v["measurement"]["quantiles"] = json!("nearest rank"));
    assert!(
        msg.contains(
            "measurement.quantiles is 'nearest rank'; klab states and recomputes quantiles only by"
        ),
        "{msg}"
    );
}
