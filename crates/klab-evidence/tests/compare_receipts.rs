//! `klab compare`: integrity of every file, raw sample checks, like-with-like conditions,
//! and a valid pair's round-level ratio, all with real files in a tempdir.

mod compare_fixture;

use std::fs;
use std::path::Path;

use compare_fixture::*;
use klab_core::samples::{Regime, SampleError, Timer};
use klab_core::stats::SpeedVerdict;
use klab_evidence::compare::{compare, is_interleaved_order, load_checked, CompareError};
use klab_evidence::receipt::Receipt;
use serde_json::json;

fn one_line(e: &CompareError) -> String {
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "error is not one line: {msg}");
    msg
}

fn refuse(b: &Path, c: &Path) -> CompareError {
    compare(b, c, &cfg()).expect_err("compare accepted the pair")
}

#[test]
fn valid_pair_compares_with_the_expected_ratio() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert!((cmp.ratio - 1.25).abs() < 1e-9, "{}", cmp.ratio);
    assert_eq!(cmp.ratio, cmp.analysis.ratio);
    assert_eq!(cmp.analysis.verdict, SpeedVerdict::Faster);
    assert_eq!(cmp.analysis.rounds, 7);
    assert_eq!(cmp.baseline.rounds, [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(
        cmp.baseline.round_medians_us,
        [100.0, 104.0, 99.0, 101.0, 102.0, 100.0, 103.0]
    );
    assert!((cmp.candidate.round_medians_us[1] - 83.2).abs() < 1e-9);
    // Median over all 35 samples.
    assert_eq!(cmp.baseline.median_us, 101.0);
    assert!((cmp.candidate.median_us - 80.8).abs() < 1e-9);
    assert_eq!(cmp.baseline.all_samples.count, 35);
    assert_eq!(cmp.baseline.name, "triad_baseline");
    assert!(cmp.notes.is_empty(), "{:?}", cmp.notes);

    let text = cmp.render_text();
    assert!(text.contains("median 101.000 µs"), "{text}");
    assert!(text.contains("median 80.800 µs"), "{text}");
    assert!(
        text.contains("ratio: 1.25x (median of 7 round ratios)"),
        "{text}"
    );
    assert!(text.contains("candidate faster"), "{text}");
    assert!(text.contains("0 failures against CPU double FMA"), "{text}");
    assert!(text.contains("interval: 95%"), "{text}");

    let json = serde_json::to_value(&cmp).unwrap();
    assert_eq!(json["analysis"]["verdict"], json!("faster"));
    assert!(json["baseline"]["round_medians_us"].is_array());

    // Reversed, the candidate is slower.
    let back = compare(&c, &b, &cfg()).unwrap();
    assert!((back.ratio - 0.8).abs() < 1e-9);
    assert_eq!(back.analysis.verdict, SpeedVerdict::Slower);
}

#[test]
fn load_checked_returns_rounds_in_receipt_order() {
    let d = tempfile::tempdir().unwrap();
    let (b, _) = pair(d.path());
    let (r, rounds) = load_checked(&b).unwrap();
    assert_eq!(rounds.len(), r.measurement.raw_samples.len());
    assert_eq!(rounds, baseline_rounds());
}

#[test]
fn rounds_are_matched_by_round_number() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    // List the candidate's rounds in reverse: same files, same numbers.
    edit_json(&c, |v| {
        v["measurement"]["raw_samples"]
            .as_array_mut()
            .unwrap()
            .reverse();
    });
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert!(cmp
        .analysis
        .round_ratios
        .iter()
        .all(|r| (r - 1.25).abs() < 1e-9));
    // A round numbered outside 1..=rounds is refused before any pairing.
    edit_json(&c, |v| {
        v["measurement"]["raw_samples"][0]["round"] = json!(9)
    });
    let e = refuse(&b, &c);
    assert!(matches!(e, CompareError::Receipt(_)), "{e:?}");
    assert!(one_line(&e).contains("is 9, outside rounds 1..=7"), "{e}");
}

#[test]
fn truncated_artifact_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    fs::write(c.parent().unwrap().join("samples-r01.csv"), "truncated").unwrap();
    let e = refuse(&b, &c);
    let msg = one_line(&e);
    assert!(matches!(e, CompareError::Changed { .. }), "{e:?}");
    assert!(
        msg.contains("artifact samples-r01.csv changed: sha256 "),
        "{msg}"
    );
    assert!(msg.contains(" recorded, "), "{msg}");
    assert!(
        msg.contains(&klab_core::artifact::sha256_hex(b"truncated")),
        "{msg}"
    );
    assert!(msg.contains("bytes recorded, 9 found"), "{msg}");
    assert!(msg.contains("candidate"), "names the receipt: {msg}");
}

#[test]
fn changed_raw_samples_not_listed_as_artifact_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| {
        v["artifacts"]
            .as_array_mut()
            .unwrap()
            .retain(|a| a["role"] != json!("raw-samples"));
    });
    compare(&b, &c, &cfg()).unwrap();
    let p = c.parent().unwrap().join("samples-r03.csv");
    let mut text = fs::read_to_string(&p).unwrap();
    text = text.replace("78.400000", "78.300000");
    fs::write(&p, text).unwrap();
    let msg = one_line(&refuse(&b, &c));
    assert!(
        msg.contains("artifact samples-r03.csv changed: sha256"),
        "{msg}"
    );
}

#[test]
fn wrong_recorded_size_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&b, |v| v["artifacts"][7]["bytes"] = json!(1));
    let e = refuse(&b, &c);
    assert!(matches!(e, CompareError::Size { recorded: 1, .. }), "{e:?}");
    assert!(one_line(&e).contains("artifact memcheck.txt has"));
}

#[test]
fn missing_artifact_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    fs::remove_file(b.parent().unwrap().join("memcheck.txt")).unwrap();
    let e = refuse(&b, &c);
    assert!(matches!(e, CompareError::Missing { .. }), "{e:?}");
    assert!(one_line(&e).contains("artifact memcheck.txt is missing"));
    // A raw sample file that is missing.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    fs::remove_file(c.parent().unwrap().join("samples-r05.csv")).unwrap();
    assert!(one_line(&refuse(&b, &c)).contains("artifact samples-r05.csv is missing"));
}

#[cfg(unix)]
#[test]
fn symlink_leaving_the_folder_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    let dir = c.parent().unwrap();
    // Move the file outside the folder and leave a symlink to it: same bytes, same hash.
    let outside = d.path().join("elsewhere.csv");
    fs::rename(dir.join("samples-r02.csv"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("samples-r02.csv")).unwrap();
    let e = refuse(&b, &c);
    assert!(matches!(e, CompareError::Escapes { .. }), "{e:?}");
    let msg = one_line(&e);
    assert!(
        msg.contains("artifact samples-r02.csv resolves to"),
        "{msg}"
    );
    assert!(msg.contains("outside the receipt's folder"), "{msg}");

    // A symlinked folder inside the receipt's folder that leads out of it.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    let dir = b.parent().unwrap();
    let out = d.path().join("out");
    fs::create_dir(&out).unwrap();
    fs::rename(dir.join("memcheck.txt"), out.join("memcheck.txt")).unwrap();
    std::os::unix::fs::symlink(&out, dir.join("sub")).unwrap();
    edit_json(&b, |v| {
        v["artifacts"][7]["path"] = json!("sub/memcheck.txt");
        v["correctness"]["sanitizer"][0]["report"] = json!("sub/memcheck.txt");
    });
    assert!(matches!(refuse(&b, &c), CompareError::Escapes { .. }));

    // A symlink that stays inside the folder is fine.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    let dir = b.parent().unwrap();
    fs::create_dir(dir.join("raw")).unwrap();
    fs::rename(dir.join("samples-r01.csv"), dir.join("raw/r01.csv")).unwrap();
    std::os::unix::fs::symlink("raw/r01.csv", dir.join("samples-r01.csv")).unwrap();
    compare(&b, &c, &cfg()).unwrap();
}

#[test]
fn wrong_csv_header_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    replace_samples(
        &b,
        0,
        "sample,slot,elapsed_ms\n0,0,1\n1,1,1\n2,0,1\n3,1,1\n4,0,1\n",
    );
    let e = refuse(&b, &c);
    assert!(
        matches!(
            e,
            CompareError::Samples {
                error: SampleError::Schema(_),
                ..
            }
        ),
        "{e:?}"
    );
    let msg = one_line(&e);
    assert!(
        msg.contains("raw samples samples-r01.csv: sample file has header"),
        "{msg}"
    );
}

fn samples_refusal(text: &str) -> CompareError {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    replace_samples(&c, 2, text);
    let e = refuse(&b, &c);
    one_line(&e);
    e
}

#[test]
fn broken_sample_sequence_is_refused() {
    let e = samples_refusal("sample,slot,elapsed_us\n0,0,80\n1,1,80\n3,1,80\n3,1,80\n4,0,80\n");
    assert!(
        matches!(
            e,
            CompareError::Samples {
                error: SampleError::Sequence { line: 4, .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("samples-r03.csv"));
}

#[test]
fn slots_not_following_the_rotation_are_refused() {
    // Rotation over 2 slots, but every sample says slot 0.
    let e = samples_refusal("sample,slot,elapsed_us\n0,0,80\n1,0,80\n2,0,80\n3,0,80\n4,0,80\n");
    assert!(
        matches!(
            e,
            CompareError::Samples {
                error: SampleError::Rotation { slots: 2, .. },
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn zero_negative_and_nan_durations_are_refused() {
    // And past an hour: no watchdog of klab's lets a launch run that long.
    for bad in ["0", "-80.5", "NaN", "nan", "inf", "", "1e20", "3600000001"] {
        let text = format!("sample,slot,elapsed_us\n0,0,80\n1,1,80\n2,0,{bad}\n3,1,80\n4,0,80\n");
        let e = samples_refusal(&text);
        assert!(
            matches!(
                e,
                CompareError::Samples {
                    error: SampleError::Duration { line: 4, .. },
                    ..
                }
            ),
            "{bad}: {e:?}"
        );
    }
}

#[test]
fn a_single_sample_is_refused() {
    let e = samples_refusal("sample,slot,elapsed_us\n0,0,80\n");
    assert!(
        matches!(
            e,
            CompareError::Samples {
                error: SampleError::TooFew(1),
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn sample_count_other_than_declared_is_refused() {
    let e = samples_refusal("sample,slot,elapsed_us\n0,0,80\n1,1,80\n2,0,80\n");
    assert!(
        matches!(
            e,
            CompareError::SampleCount {
                found: 3,
                declared: 5,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e
        .to_string()
        .contains("hold 3 samples but the receipt declares 5 per round"));
}

/// Compare a pair whose candidate template was edited; the differing fields named.
fn differing(edit: impl FnOnce(&mut Receipt)) -> Vec<String> {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair_with(d.path(), |_| {}, edit);
    let e = refuse(&b, &c);
    let msg = one_line(&e);
    assert!(
        msg.starts_with("receipts do not measure like with like: "),
        "{msg}"
    );
    match e {
        CompareError::Conditions(d) => {
            for x in &d {
                assert!(msg.contains(&x.to_string()), "{msg}");
            }
            d.into_iter().map(|x| x.field).collect()
        }
        other => panic!("expected a conditions refusal, got {other:?}"),
    }
}

#[test]
fn each_differing_condition_is_refused_and_named() {
    assert_eq!(differing(|r| set_n(r, 1_000_000)), ["workload.n"]);
    assert_eq!(
        differing(|r| r.workload.dtype = "float16".into()),
        ["workload.dtype"]
    );
    assert_eq!(
        differing(|r| r.workload.operation = "y[i] = 2 x[i] + z[i]".into()),
        ["workload.operation"]
    );
    assert_eq!(
        differing(|r| r.workload.rotation_slots = 3),
        ["workload.rotation_slots"]
    );
    assert_eq!(
        differing(|r| {
            r.workload.cache_regime = Regime::SameBuffer;
            r.workload.rotation_slots = 1;
        }),
        ["workload.cache_regime", "workload.rotation_slots"]
    );
    assert_eq!(
        differing(|r| {
            r.workload.cache_regime = Regime::L2Flushed;
            r.workload.rotation_slots = 1;
            r.measurement.l2_scrub_bytes = Some(1 << 28);
        }),
        ["workload.cache_regime", "workload.rotation_slots"]
    );
    assert_eq!(
        differing(|r| r.hardware.gpu_uuid = "GPU-ffffffff-other".into()),
        ["hardware.gpu_uuid"]
    );
    assert_eq!(
        differing(|r| r.measurement.timer = Timer::Batch { launches: 10 }),
        ["measurement.timer"]
    );
}

#[test]
fn wrong_dtype_comparison_is_refused() {
    // Seed 003's "wrong dtype": float16 against float32.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair_with(d.path(), |_| {}, |r| r.workload.dtype = "float16".into());
    let msg = one_line(&refuse(&b, &c));
    assert!(
        msg.contains("workload.dtype differs (baseline float32, candidate float16)"),
        "{msg}"
    );
}

#[test]
fn different_sample_counts_and_rounds_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut b = template("a");
    b.measurement.order = "ABBA".into();
    let bp = write_run(&d.path().join("b"), b, &baseline_rounds(), true);
    let four: Vec<Vec<f64>> = candidate_rounds()
        .into_iter()
        .map(|r| r[..4].to_vec())
        .collect();
    let cp = write_run(&d.path().join("c4"), template("b"), &four, false);
    match refuse(&bp, &cp) {
        CompareError::Conditions(d) => {
            assert_eq!(d.len(), 1);
            assert_eq!(d[0].field, "measurement.samples_per_round");
            assert_eq!(
                (d[0].baseline.as_str(), d[0].candidate.as_str()),
                ("5", "4")
            );
        }
        e => panic!("{e:?}"),
    }
    let three = candidate_rounds()[..3].to_vec();
    let cp = write_run(&d.path().join("c3"), template("b"), &three, false);
    match refuse(&bp, &cp) {
        CompareError::Conditions(d) => {
            assert_eq!(d.len(), 1);
            assert_eq!(d[0].field, "measurement.rounds");
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn every_difference_is_named_at_once() {
    let fields = differing(|r| {
        set_n(r, 7);
        r.workload.dtype = "float16".into();
        r.hardware.gpu_uuid = "GPU-other".into();
        r.measurement.timer = Timer::GraphReplay { launches: 20 };
    });
    assert_eq!(
        fields,
        [
            "workload.dtype",
            "workload.n",
            "hardware.gpu_uuid",
            "measurement.timer"
        ]
    );
}

#[test]
fn differing_warmup_is_a_note_not_a_refusal() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair_with(
        d.path(),
        |_| {},
        |r| {
            r.measurement.warmup.policy = "5 launches".into();
            r.measurement.warmup.launches = 5;
        },
    );
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert!(
        cmp.notes
            .iter()
            .any(|n| n.starts_with("measurement.warmup differs")),
        "{:?}",
        cmp.notes
    );
    assert!(cmp
        .render_text()
        .contains("note: measurement.warmup differs"));
}

#[test]
fn order_that_is_not_interleaved_is_noted() {
    assert!(is_interleaved_order("ABBA within each round"));
    assert!(is_interleaved_order("alternating"));
    // What klab rounds writes under either round order.
    for order in [
        klab_core::samples::RoundOrder::Mirrored,
        klab_core::samples::RoundOrder::Alternating,
    ] {
        assert!(is_interleaved_order(order.describe()), "{order}");
    }
    assert!(!is_interleaved_order("sequential"));
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair_with(
        d.path(),
        |r| r.measurement.order = "baseline run alone".into(),
        |r| r.measurement.order = "candidate run alone".into(),
    );
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert!(
        cmp.notes
            .iter()
            .any(|n| n.starts_with("rounds were not interleaved")),
        "{:?}",
        cmp.notes
    );

    // Declared ABBA, but both sat at position 0 of every round.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| {
        for s in v["measurement"]["raw_samples"].as_array_mut().unwrap() {
            s["position"] = json!(0);
        }
    });
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert!(
        cmp.notes.iter().any(|n| n.contains("share a position")),
        "{:?}",
        cmp.notes
    );

    // Baseline always first.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&b, |v| {
        for s in v["measurement"]["raw_samples"].as_array_mut().unwrap() {
            s["position"] = json!(0);
        }
    });
    edit_json(&c, |v| {
        for s in v["measurement"]["raw_samples"].as_array_mut().unwrap() {
            s["position"] = json!(1);
        }
    });
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert!(
        cmp.notes
            .iter()
            .any(|n| n.contains("baseline ran first in every round")),
        "{:?}",
        cmp.notes
    );
}

#[test]
fn flagged_gpu_state_is_noted() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| {
        v["measurement"]["gpu_state"][1]["after"]["clock_event_reasons"] = json!(["sw_power_cap"]);
        v["measurement"]["gpu_state"][1]["flags"] = json!(["sw_power_cap after"]);
        v["result"]["flagged_blocks"] = json!(1);
    });
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert_eq!(cmp.notes.len(), 1, "{:?}", cmp.notes);
    assert!(cmp.notes[0]
        .contains("candidate: GPU state flagged in 1 block(s): 'round 2' (sw_power_cap after)"));
}

#[test]
fn failing_correctness_sanitizer_or_profiler_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| v["correctness"]["failures"] = json!(1));
    let e = refuse(&b, &c);
    assert!(
        matches!(e, CompareError::Incorrect { failures: 1, .. }),
        "{e:?}"
    );

    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&b, |v| {
        v["correctness"]["sanitizer"][0]["errors"] = json!(2);
        v["correctness"]["sanitizer"][0]["exit_status"] = json!(99);
    });
    let msg = one_line(&refuse(&b, &c));
    assert!(
        msg.contains("sanitizer memcheck reported 2 error(s)"),
        "{msg}"
    );

    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&b, |v| {
        v["correctness"]["sanitizer"][0]["exit_status"] = json!(99)
    });
    let msg = one_line(&refuse(&b, &c));
    assert!(msg.contains("exited with status 99"), "{msg}");

    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| v["measurement"]["profiler_attached"] = json!(true));
    assert!(matches!(refuse(&b, &c), CompareError::Profiled { .. }));
}

#[test]
fn missing_receipt_is_a_one_line_error() {
    let d = tempfile::tempdir().unwrap();
    let (b, _) = pair(d.path());
    let e = refuse(&b, &d.path().join("nope/receipt.json"));
    let msg = one_line(&e);
    assert!(msg.starts_with("cannot read receipt "), "{msg}");
}

/// Issue 15: a receipt's sample file replaced by a FIFO blocked `klab compare` forever.
#[test]
fn a_fifo_as_a_sample_file_is_refused_not_waited_on() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    let samples = c.parent().unwrap().join("samples-r01.csv");
    fs::remove_file(&samples).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(&samples)
        .status()
        .unwrap()
        .success());
    let e = refuse(&b, &c);
    assert!(matches!(e, CompareError::Unreadable { .. }), "{e:?}");
    let msg = one_line(&e);
    assert!(
        msg.contains("samples-r01.csv is a FIFO (named pipe), not a regular file"),
        "{msg}"
    );
}

/// Issue 15: an artifact linked to /dev/zero was read until memory ran out; the link leaves
/// the receipt's folder, so it is not followed.
#[test]
fn an_artifact_linked_to_dev_zero_is_not_followed() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    let samples = c.parent().unwrap().join("samples-r01.csv");
    fs::remove_file(&samples).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &samples).unwrap();
    let e = refuse(&b, &c);
    assert!(matches!(e, CompareError::Escapes { .. }), "{e:?}");
    assert!(one_line(&e).contains("/dev/zero"), "{e}");
}

/// Issue: a stated quantile the hashed samples do not give, each one named.
#[test]
fn quantiles_the_samples_do_not_give_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| v["result"]["p90_us"] = json!(90.0));
    let msg = one_line(&refuse(&b, &c));
    assert!(
        msg.contains(
            "candidate/receipt.json: result.p90_us is 90, but its 35 raw samples give 83.2 ("
        ),
        "{msg}"
    );
    // Within the sample files' printed precision (half a microsecond's millionth) is the
    // same figure: a writer that summarised the unrounded samples is not refused.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    let r = Receipt::read(&c).unwrap();
    edit_json(&c, |v| {
        v["result"]["p10_us"] = json!(r.result.p10_us + 4e-7)
    });
    compare(&b, &c, &cfg()).unwrap();
}

/// A copy of real rounds from the H200 (five ABBA rounds of two kernels, block receipts).
fn h200_rounds() -> (tempfile::TempDir, std::path::PathBuf) {
    fn copy_dir(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for e in fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let dst = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &dst);
            } else {
                fs::copy(e.path(), dst).unwrap();
            }
        }
    }
    let t = tempfile::tempdir().unwrap();
    let run = t.path().join("user-rounds");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../evidence/2026-12-01-engine/engine/user-rounds"),
        &run,
    );
    (t, run)
}

/// Edit a block receipt as JSON and record its new hash and size in the combined receipt,
/// so only the cross-checks can object.
fn edit_block(combined: &Path, rel: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let p = combined.parent().unwrap().join(rel);
    edit_json(&p, edit);
    let bytes = fs::read(&p).unwrap();
    let sha = klab_core::artifact::sha256_hex(&bytes);
    edit_json(combined, |v| {
        for a in v["artifacts"].as_array_mut().unwrap() {
            if a["path"] == json!(rel) {
                a["sha256"] = json!(sha);
                a["bytes"] = json!(bytes.len());
            }
        }
    });
}

#[test]
fn a_combined_receipt_is_held_against_its_block_receipts() {
    let (_t, run) = h200_rounds();
    let tiled = run.join("my_tiled.receipt.json");
    let c = klab_evidence::compare::check(&tiled).unwrap();
    assert_eq!(c.blocks.len(), 10);
    assert_eq!(c.sample_files.len(), 10);
    let rel = "blocks/r02-p1-my_tiled/receipt.json";
    let check = |edit: fn(&mut serde_json::Value)| {
        let (_t, run) = h200_rounds();
        let tiled = run.join("my_tiled.receipt.json");
        edit_block(&tiled, rel, edit);
        let e = klab_evidence::compare::check(&tiled).unwrap_err();
        one_line(&e)
    };
    // A block's sample hash that is not the combined receipt's.
    let msg = check(|v| v["measurement"]["raw_samples"][0]["sha256"] = json!("ab".repeat(32)));
    assert!(
        msg.contains(&format!(
            "measurement.raw_samples[2].sha256 is c4b7b3c52ebf8862a6f322b794dd6770f40fada62bbca55c7ed96477cbee9839, but block receipt {rel} records {}",
            "ab".repeat(32)
        )),
        "{msg}"
    );
    // Another size in a block.
    let msg = check(|v| {
        v["workload"]["n"] = json!(1024);
        v["workload"]["grid"] = json!([32, 32, 1]);
        v["workload"]["useful_bytes_per_launch"] = json!(8 * 1024 * 1024);
        v["result"]["useful_gb_s"] = json!(klab_core::stats::gb_per_s(
            8 * 1024 * 1024,
            v["result"]["median_us"].as_f64().unwrap()
        ));
        v["result"]["pct_of_peak"] =
            json!(100.0 * v["result"]["useful_gb_s"].as_f64().unwrap() / 4814.304);
    });
    assert!(
        msg.contains(&format!(
            "workload.grid is [128,128,1], but block receipt {rel} says [32,32,1]"
        )),
        "{msg}"
    );
    // A block's own median that its samples do not give: the block's file is named.
    let msg = check(|v| {
        v["result"]["median_us"] = json!(43.0);
        let gb = klab_core::stats::gb_per_s(134_217_728, 43.0);
        v["result"]["useful_gb_s"] = json!(gb);
        v["result"]["pct_of_peak"] = json!(100.0 * gb / 4814.304);
    });
    assert!(
        msg.contains(&format!(
            "{rel}: result.median_us is 43, but its 100 raw samples give"
        )),
        "{msg}"
    );
    // GPU state that is not the blocks'.
    let msg = check(|v| v["measurement"]["gpu_state"][0]["before"]["temperature_c"] = json!(90));
    assert!(
        msg.contains("measurement.gpu_state holds 10 observation(s), but its block receipts hold 10 (first difference at [2])"),
        "{msg}"
    );
    // Relabelling a block receipt does not hide it: it is still a receipt, still checked.
    let (_t, run) = h200_rounds();
    let tiled = run.join("my_tiled.receipt.json");
    edit_block(&tiled, rel, |v| v["correctness"]["failures"] = json!(3));
    edit_json(&tiled, |v| {
        for a in v["artifacts"].as_array_mut().unwrap() {
            if a["path"] == json!(rel) {
                a["role"] = json!("notes");
            }
        }
    });
    let msg = one_line(&klab_evidence::compare::check(&tiled).unwrap_err());
    assert!(
        msg.contains("correctness.failures is 0, but its 10 block receipts record 3"),
        "{msg}"
    );
}

/// Three rounds: the few-rounds note is printed once, with the analysis (it used to be
/// printed again among the comparison's notes).
#[test]
fn the_few_rounds_note_is_printed_once() {
    let d = tempfile::tempdir().unwrap();
    let b = write_run(
        &d.path().join("baseline"),
        template("triad_baseline"),
        &baseline_rounds()[..3],
        true,
    );
    let c = write_run(
        &d.path().join("candidate"),
        template("triad_candidate"),
        &candidate_rounds()[..3],
        false,
    );
    let text = compare(&b, &c, &cfg()).unwrap().render_text();
    assert_eq!(
        text.matches("3 rounds cannot give a 95% interval").count(),
        1,
        "{text}"
    );
}

/// `compare` holds a receipt to the gates it states figures for: no floor or no verified
/// sample is no evidence; a one-block receipt whose stale-output probes fail the gate, or
/// whose timed median is far below the checked one without the flag, is refused; the flags
/// a receipt carries are printed.
#[test]
fn a_receipt_is_held_to_its_integrity_figures() {
    let refused_after = |edit: fn(&mut serde_json::Value)| {
        let d = tempfile::tempdir().unwrap();
        let (b, c) = pair(d.path());
        edit_json(&c, edit);
        one_line(&refuse(&b, &c))
    };
    let msg = refused_after(|v| v["integrity"]["floor"] = json!(null));
    assert!(
        msg.contains("it states no physical floor (integrity.floor)"),
        "{msg}"
    );
    let msg = refused_after(|v| v["integrity"]["verified_samples"] = json!(0));
    assert!(msg.contains("it states no verified timed sample"), "{msg}");

    // One block: the gates again, from its stated medians.
    let one_block = |edit: fn(&mut Receipt)| {
        let d = tempfile::tempdir().unwrap();
        let mut c = template("triad_candidate");
        edit(&mut c);
        let cp = write_run(&d.path().join("c"), c, &candidate_rounds()[..1], false);
        (d, klab_evidence::compare::check(&cp))
    };
    let (_d, r) = one_block(|r| {
        let i = r.integrity.as_mut().unwrap();
        i.probe_median_us = Some(3.0);
        i.probe_invalidated_median_us = Some(300.0);
    });
    let msg = one_line(&r.unwrap_err());
    assert!(
        msg.contains("ran 100.0x faster with their previous output in place"),
        "{msg}"
    );
    let (_d, r) = one_block(|r| r.integrity.as_mut().unwrap().checked_median_us = Some(5000.0));
    let msg = one_line(&r.unwrap_err());
    assert!(
        msg.contains("integrity.flags hold no checked-median flag, but the timed median"),
        "{msg}"
    );
    let (_d, r) = one_block(|r| {
        let i = r.integrity.as_mut().unwrap();
        i.checked_median_us = Some(5000.0);
        i.flags = vec!["timed median 100.000 us is 50.0x below the checked median 5000.000 us (launches klab verified)".into()];
    });
    r.unwrap();
    // Several blocks pool their medians, which the blocks' own gates did not judge: their
    // flags are printed.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair_with(
        d.path(),
        |_| {},
        |r| {
            let i = r.integrity.as_mut().unwrap();
            i.checked_median_us = Some(5000.0);
            i.flags = vec!["round 3: timed median far below the checked median".into()];
        },
    );
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert!(
        cmp.notes.iter().any(|n| n
            == "candidate: integrity flag: round 3: timed median far below the checked median"),
        "{:?}",
        cmp.notes
    );
}

/// Fields outside what a measurement can hold are refused by name: more verified launches
/// than timed samples and probes, a zero median, limit or rate, a check after timing of no slot, and a
/// scrub in a regime that has none (or an l2-flushed one without it). Each was accepted by
/// `compare` before.
#[test]
fn values_no_measurement_holds_are_refused() {
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit); 8] = [
        ("integrity.verified_samples", |v| {
            v["integrity"]["verified_samples"] = json!(1_000_000_000_000u64)
        }),
        ("integrity.checked_median_us", |v| {
            v["integrity"]["checked_median_us"] = json!(0.0)
        }),
        ("integrity.floor.rates.peak_ops_per_s", |v| {
            v["integrity"]["floor"]["rates"]["peak_ops_per_s"] = json!(0.0)
        }),
        ("integrity.floor.rates.l2_measured_gb_s", |v| {
            v["integrity"]["floor"]["rates"]["l2_measured_gb_s"] = json!(0.0)
        }),
        ("correctness.slots_checked", |v| {
            v["correctness"]["slots_checked"] = json!(0)
        }),
        ("hardware.power_limit_w", |v| {
            v["hardware"]["power_limit_w"] = json!(0.0)
        }),
        ("measurement.l2_scrub_bytes", |v| {
            v["measurement"]["l2_scrub_bytes"] = json!(u64::MAX)
        }),
        ("measurement.l2_scrub_bytes", |v| {
            v["workload"]["cache_regime"] = json!("l2-flushed");
            v["workload"]["rotation_slots"] = json!(1);
            v["measurement"]["l2_scrub_bytes"] = json!(null)
        }),
    ];
    for (field, edit) in cases {
        let d = tempfile::tempdir().unwrap();
        let (b, c) = pair(d.path());
        edit_json(&c, edit);
        let msg = one_line(&refuse(&b, &c));
        assert!(msg.contains(field), "{field}: {msg}");
    }
    // What a real block verifies: 4 samples drawn at random and the 8 probes' invalidated
    // launches, 12 of a block of 10 samples (an H100's, refused by the first form of this
    // check); one more than samples and probes together is not.
    let d = tempfile::tempdir().unwrap();
    for verified in [12, 13] {
        let mut c = template("triad_candidate");
        c.integrity.as_mut().unwrap().verified_samples = verified;
        let dir = d.path().join(format!("c{verified}"));
        let cp = write_run(&dir, c, &candidate_rounds()[..1], false);
        klab_evidence::compare::check(&cp).unwrap();
    }
    let cp = d.path().join("c13/receipt.json");
    edit_json(&cp, |v| v["integrity"]["verified_samples"] = json!(14));
    let msg = one_line(&klab_evidence::compare::check(&cp).unwrap_err());
    assert!(
        msg.contains("5 timed samples (1 block file(s) of 5) and 8 probes"),
        "{msg}"
    );
}

/// A `klab rounds` receipt that lists no block receipt escapes every check of its blocks:
/// refused.
#[test]
fn a_rounds_receipt_without_its_block_receipts_is_refused() {
    let (_t, run) = h200_rounds();
    let tiled = run.join("my_tiled.receipt.json");
    edit_json(&tiled, |v| {
        v["artifacts"]
            .as_array_mut()
            .unwrap()
            .retain(|a| a["role"] != json!("block-receipt"));
    });
    let msg = one_line(&klab_evidence::compare::check(&tiled).unwrap_err());
    assert!(
        msg.contains("artifacts list no block receipt, but result.rounds says klab rounds combined 10 blocks"),
        "{msg}"
    );
}

/// Two receipts that each alternated, but not with each other (their blocks ran days
/// apart), are matched by round number only: said so.
#[test]
fn receipts_of_two_separate_runs_are_noted() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| {
        for s in v["measurement"]["gpu_state"].as_array_mut().unwrap() {
            s["before"]["utc"] = json!("2026-12-04T10:00:00Z");
            s["after"]["utc"] = json!("2026-12-04T10:00:01Z");
        }
        v["created_utc"] = json!("2026-12-04T10:00:02Z");
    });
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert!(
        cmp.notes.iter().any(|n| n.contains(
            "the two receipts are not one alternating run: the baseline's blocks ran from 2026-11-30T09:04:56Z to 2026-11-30T09:04:56Z, the candidate's from 2026-12-04T10:00:00Z"
        )),
        "{:?}",
        cmp.notes
    );
    // One run: no such note.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert!(cmp.notes.is_empty(), "{:?}", cmp.notes);
}

/// A link to a receipt names the files beside the receipt it leads to (`latest.json ->
/// run/receipt.json`), not beside the link: it was refused as "artifact ... is missing".
#[cfg(unix)]
#[test]
fn a_link_to_a_receipt_reads_the_files_beside_the_receipt() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    let link = d.path().join("latest.json");
    std::os::unix::fs::symlink(&c, &link).unwrap();
    klab_evidence::compare::check(&link).unwrap();
    compare(&b, &link, &cfg()).unwrap();
}

/// A floor recomputed from device facts forged faster (a larger L2, a faster L2 ceiling)
/// agrees with itself; it cannot agree with the receipt it is compared against on the same
/// GPU: refused, naming each fact.
#[test]
fn two_receipts_of_one_gpu_must_state_the_same_device() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair_with(
        d.path(),
        |_| {},
        |r| {
            r.hardware.l2_bytes = 1 << 40;
            let f = r.integrity.as_mut().unwrap().floor.as_mut().unwrap();
            let mut rates = f.rates.clone();
            rates.l2_bytes = 1 << 40;
            rates.l2_measured_gb_s *= 1e6;
            *f = klab_core::floor::Floor::of(f.useful_bytes, f.flops, &rates);
        },
    );
    klab_evidence::compare::check(&c).unwrap();
    match refuse(&b, &c) {
        CompareError::Conditions(d) => {
            let fields: Vec<&str> = d.iter().map(|x| x.field.as_str()).collect();
            assert_eq!(
                fields,
                [
                    "hardware.l2_bytes",
                    "integrity.floor.rates.l2_measured_gb_s"
                ],
                "{d:?}"
            );
        }
        e => panic!("{e:?}"),
    }
    // A few percent apart, as two blocks' measurements are: taken.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair_with(
        d.path(),
        |_| {},
        |r| {
            let f = r.integrity.as_mut().unwrap().floor.as_mut().unwrap();
            let mut rates = f.rates.clone();
            rates.l2_measured_gb_s *= 1.04;
            *f = klab_core::floor::Floor::of(f.useful_bytes, f.flops, &rates);
        },
    );
    compare(&b, &c, &cfg()).unwrap();
}

/// Two kernels of one entry point (a Triton cubin's `softmax` beside a CUDA `softmax`) are
/// named as the user named them, not by the entry they share nor by their folders.
#[test]
fn each_side_is_named_as_the_user_named_its_kernel() {
    let t = tempfile::tempdir().unwrap();
    let (b, c) = pair_with(
        t.path(),
        |r| {
            r.source.entry = "softmax".into();
            r.source.name = Some("softmax_cuda".into());
        },
        |r| {
            r.source.entry = "softmax".into();
            r.source.name = Some("softmax_triton".into());
        },
    );
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert_eq!(cmp.baseline.name, "softmax_cuda");
    assert_eq!(cmp.candidate.name, "softmax_triton");
    // A receipt of an earlier klab, without the name: the entry point, as before.
    let t = tempfile::tempdir().unwrap();
    let (b, c) = pair(t.path());
    let cmp = compare(&b, &c, &cfg()).unwrap();
    assert_eq!(cmp.candidate.name, "triad_candidate");
}
