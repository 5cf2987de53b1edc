//! Receipts that contradict their own files, and `klab receipt check|sign|verify`, through the
//! command line. Each defect of the issue ("receipts that contradict their own files are
//! accepted") has a test here: the receipt is forged the way the defect describes, with every
//! other field kept consistent so that only the check under test can object, and `klab
//! compare` must exit 1 with one line naming the field and both values. The forgeries start
//! from the klab-evidence fixture (small synthetic receipts) or from a copy of real H200 rounds
//! (evidence/2026-12-01-engine/engine/user-rounds: two kernels, five ABBA rounds, block
//! receipts).

mod common;
#[path = "../crates/klab-evidence/tests/compare_fixture/mod.rs"]
mod compare_fixture;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::klab;
use compare_fixture::{edit_json, pair, replace_samples};
use klab_core::artifact::sha256_hex;
use serde_json::{json, Value};

fn compare(b: &Path, c: &Path) -> Output {
    klab().arg("compare").arg(b).arg(c).output().unwrap()
}

/// Exit 1 and one stderr line, `error: ...`, containing every needle.
fn refused(o: &Output, needles: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout {}\nstderr {err}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
    err
}

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

/// A copy of real rounds from the H200: `my_naive.receipt.json` (the baseline) and
/// `my_tiled.receipt.json`, each combining five rounds' block receipts under `blocks/`.
fn h200_rounds() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let run = t.path().join("user-rounds");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("evidence/2026-12-01-engine/engine/user-rounds"),
        &run,
    );
    (t, run)
}

/// Rewrite a file a combined receipt lists and record its new hash and size there.
fn rewrite_artifact(receipt: &Path, rel: &str, bytes: &[u8]) {
    fs::write(receipt.parent().unwrap().join(rel), bytes).unwrap();
    let sha = sha256_hex(bytes);
    edit_json(receipt, |v| {
        for a in v["artifacts"].as_array_mut().unwrap() {
            if a["path"] == json!(rel) {
                a["sha256"] = json!(sha);
                a["bytes"] = json!(bytes.len());
            }
        }
    });
}

#[test]
fn the_real_h200_rounds_compare_and_their_stated_ratio_is_recomputed() {
    let (_t, run) = h200_rounds();
    // Measured before invalidation: refused as they are, with the note naming what they lack.
    refused(
        &compare(
            &run.join("my_naive.receipt.json"),
            &run.join("my_tiled.receipt.json"),
        ),
        &["my_naive.receipt.json", "it lacks the invalidation policy"],
    );
    for r in ["my_naive.receipt.json", "my_tiled.receipt.json"] {
        common::add_integrity(&run.join(r));
    }
    let o = compare(
        &run.join("my_naive.receipt.json"),
        &run.join("my_tiled.receipt.json"),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The ratio `klab rounds` stated is the one these samples give.
    let tiled = run.join("my_tiled.receipt.json");
    edit_json(&tiled, |v| {
        v["result"]["rounds"]["ratio_to_baseline"] = json!(7.0)
    });
    refused(
        &compare(&run.join("my_naive.receipt.json"), &tiled),
        &[
            "my_tiled.receipt.json",
            "result.rounds.ratio_to_baseline is 7, but the baseline's and these raw samples give 6.55",
        ],
    );
}

/// Defect: `result.median_us = 1` when the hashed samples say otherwise. The forgery keeps
/// the quantiles in order and the GB/s and % of peak consistent with the forged median.
#[test]
fn a_median_the_samples_do_not_give_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| {
        let bytes = v["workload"]["useful_bytes_per_launch"].as_f64().unwrap();
        let peak = v["hardware"]["theoretical_peak_gb_s"].as_f64().unwrap();
        let gb = klab_core::stats::gb_per_s(bytes as u64, 1.0);
        v["result"]["p10_us"] = json!(0.9);
        v["result"]["median_us"] = json!(1.0);
        v["result"]["useful_gb_s"] = json!(gb);
        v["result"]["pct_of_peak"] = json!(100.0 * gb / peak);
    });
    refused(
        &compare(&b, &c),
        &[
            "candidate/receipt.json",
            "result.median_us is 1, but its 35 raw samples give 80.8",
        ],
    );
    // A median edited alone contradicts the receipt's own GB/s first.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| v["result"]["median_us"] = json!(80.0));
    refused(
        &compare(&b, &c),
        &[
            "result.useful_gb_s is ",
            ", but workload.useful_bytes_per_launch / result.median_us give ",
        ],
    );
}

/// Defect: a block receipt edited to `failures = 7` (its new hash recorded in the combined
/// receipt, so every hash still matches).
#[test]
fn a_block_receipt_with_failures_the_combined_receipt_hides_is_refused() {
    let (_t, run) = h200_rounds();
    let tiled = run.join("my_tiled.receipt.json");
    let rel = "blocks/r03-p2-my_tiled/receipt.json";
    let mut block: Value = serde_json::from_slice(&fs::read(run.join(rel)).unwrap()).unwrap();
    block["correctness"]["failures"] = json!(7);
    rewrite_artifact(
        &tiled,
        rel,
        serde_json::to_string_pretty(&block).unwrap().as_bytes(),
    );
    refused(
        &compare(&run.join("my_naive.receipt.json"), &tiled),
        &[
            "my_tiled.receipt.json: correctness.failures is 0, but its 10 block receipts record 7",
            "blocks/r03-p2-my_tiled/receipt.json: 7",
        ],
    );
}

/// Defect: the baseline's raw samples pointed at the candidate's files (the ratio came out
/// 1.00x). The forged baseline takes the candidate's sample files, hashes and result and
/// drops its own block receipts, so it is consistent on its own.
#[test]
fn a_baseline_on_the_candidates_sample_files_is_refused() {
    let (_t, run) = h200_rounds();
    let naive = run.join("my_naive.receipt.json");
    let tiled = run.join("my_tiled.receipt.json");
    let t: Value = serde_json::from_slice(&fs::read(&tiled).unwrap()).unwrap();
    edit_json(&naive, |v| {
        v["measurement"]["raw_samples"] = t["measurement"]["raw_samples"].clone();
        v["measurement"]["gpu_state"] = t["measurement"]["gpu_state"].clone();
        v["artifacts"] = json!(t["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["role"] == json!("raw-samples"))
            .collect::<Vec<_>>());
        let ctx = v["result"]["rounds"].clone();
        v["result"] = t["result"].clone();
        v["result"]["rounds"] = ctx;
        v["result"]["rounds"]["pct_of_ceiling"] = Value::Null;
    });
    // It lists none of the block receipts its result.rounds says it combined: refused on
    // its own, before the pair could give it away.
    refused(
        &compare(&naive, &tiled),
        &["my_naive.receipt.json: artifacts list no block receipt, but result.rounds says klab rounds combined 10 blocks"],
    );
    refused(
        &klab()
            .args(["receipt", "check"])
            .arg(&naive)
            .output()
            .unwrap(),
        &["artifacts list no block receipt"],
    );
    // Without result.rounds it passes for one session's rounds; only the pair gives it away.
    edit_json(&naive, |v| v["result"]["rounds"] = Value::Null);
    refused(
        &compare(&naive, &tiled),
        &[
            "baseline raw samples blocks/r01-p1-my_tiled/samples-r01-p0.csv and candidate raw samples blocks/r01-p1-my_tiled/samples-r01-p0.csv are the same file",
            "the two sides share a measurement",
        ],
    );
    klab()
        .args(["receipt", "check"])
        .arg(&naive)
        .assert_success_for_test();

    // Copies of the candidate's files in the baseline's own folder: the same bytes.
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    for i in 0..7 {
        let name = format!("samples-r{:02}.csv", i + 1);
        let text = fs::read_to_string(c.parent().unwrap().join(&name)).unwrap();
        replace_samples(&b, i, &text);
    }
    let cr: Value = serde_json::from_slice(&fs::read(&c).unwrap()).unwrap();
    edit_json(&b, |v| v["result"] = cr["result"].clone());
    refused(
        &compare(&b, &c),
        &[
            "baseline raw samples samples-r01.csv and candidate raw samples samples-r01.csv hold the same bytes (sha256 ",
        ],
    );
}

/// Defect: `klab compare A A` exited 0.
#[test]
fn a_receipt_compared_with_itself_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, _) = pair(d.path());
    refused(
        &compare(&b, &b),
        &[
            "baseline and candidate are the same receipt",
            "baseline/receipt.json",
        ],
    );
    // The same file by another spelling of its path.
    let other = d.path().join("baseline/../baseline/./receipt.json");
    refused(&compare(&b, &other), &["are the same receipt"]);
}

/// Defect: a compute capability of "banana".
#[test]
fn a_compute_capability_that_is_not_major_minor_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| {
        v["hardware"]["compute_capability"] = json!("banana")
    });
    refused(
        &compare(&b, &c),
        &["hardware.compute_capability 'banana' is not a compute capability (major.minor digits, e.g. 9.0)"],
    );
}

/// Defect: a grid inconsistent with n (a triad of n = 1000003 launches ceil(n / e) blocks).
#[test]
fn a_grid_inconsistent_with_n_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    edit_json(&c, |v| v["workload"]["grid"] = json!([700000, 1, 1]));
    refused(
        &compare(&b, &c),
        &[
            "workload.grid.x is 700000, but no whole number e of elements per block gives ceil(n / e) or n / e = 700000 at n = 1000003",
        ],
    );
    edit_json(&c, |v| v["workload"]["grid"] = json!([3907, 2, 1]));
    refused(
        &compare(&b, &c),
        &["workload.grid.y is 2, but triad spans 1 grid axis(es)"],
    );
    // n edited to match another receipt: the useful bytes no longer follow from it.
    edit_json(&c, |v| {
        v["workload"]["grid"] = json!([3907, 1, 1]);
        v["workload"]["n"] = json!(1_000_000);
    });
    refused(
        &compare(&b, &c),
        &["workload.useful_bytes_per_launch is 12000036, but triad at n = 1000000 gives 12000000"],
    );
}

/// Defect: durations of 1e-320 us (finite and positive, so the sample parser took them).
#[test]
fn a_duration_below_the_event_resolution_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = pair(d.path());
    replace_samples(
        &c,
        2,
        "sample,slot,elapsed_us\n0,0,80\n1,1,80\n2,0,1e-320\n3,1,80\n4,0,80\n",
    );
    refused(
        &compare(&b, &c),
        &[
            "raw samples samples-r03.csv: sample file line 4: duration 1e-320 us is below the CUDA event resolution (0.5 us per sample for timer per-launch",
        ],
    );
}

/// `klab receipt check`: exit 0 on a consistent receipt, 1 with the field on a forged one.
#[test]
fn receipt_check_passes_real_receipts_and_names_a_contradiction() {
    let (_t, run) = h200_rounds();
    let out = klab()
        .args(["receipt", "check"])
        .arg(run.join("my_naive.receipt.json"))
        .arg(run.join("my_tiled.receipt.json"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("10 block receipt(s)"), "{stdout}");
    let tiled = run.join("my_tiled.receipt.json");
    edit_json(&tiled, |v| v["created_utc"] = json!("1999-12-31T23:59:59Z"));
    refused(
        &klab()
            .args(["receipt", "check"])
            .arg(&tiled)
            .output()
            .unwrap(),
        &["created_utc '1999-12-31T23:59:59Z' is before 2000-01-01T00:00:00Z"],
    );
}

trait AssertSuccess {
    fn assert_success_for_test(&mut self);
}

impl AssertSuccess for std::process::Command {
    fn assert_success_for_test(&mut self) {
        let o = self.output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{self:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// The ssh-keygen on this machine, if any (the test is skipped, saying so, without one).
fn ssh_keygen() -> Option<PathBuf> {
    let found = klab_tools::sshsig::locate(None).ok();
    if found.is_none() {
        eprintln!("SKIPPED: no ssh-keygen on this machine (apt-get install openssh-client)");
    }
    found
}

/// `klab receipt sign` and `verify` with a throwaway ed25519 key: a signed receipt verifies
/// for its identity (exit 0); a modified receipt, another identity or another key's
/// allowed-signers entry fail verification (exit 2); a missing signature or tool is exit 1.
#[test]
fn receipts_are_signed_and_verified_with_ssh_keygen() {
    let Some(tool) = ssh_keygen() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let (b, _) = pair(d.path());
    let key = d.path().join("id_ed25519");
    let made = std::process::Command::new(&tool)
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "lab@h200", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let public = fs::read_to_string(d.path().join("id_ed25519.pub")).unwrap();
    let mut parts = public.split_whitespace();
    let (kind, blob) = (parts.next().unwrap(), parts.next().unwrap());
    let allowed = d.path().join("allowed_signers");
    fs::write(&allowed, format!("lab@h200 {kind} {blob}\n")).unwrap();

    let signed = klab()
        .args(["receipt", "sign"])
        .arg(&b)
        .arg("--key")
        .arg(&key)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&signed.stdout);
    assert_eq!(
        signed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&signed.stderr)
    );
    let sig = d.path().join("baseline/receipt.json.sig");
    assert!(out.contains("receipt.json.sig"), "{out}");
    assert!(fs::read_to_string(&sig)
        .unwrap()
        .starts_with("-----BEGIN SSH SIGNATURE-----"));
    // Atomic: nothing but the signature beside the receipt.
    let names: Vec<String> = fs::read_dir(d.path().join("baseline"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("sig") || n.starts_with('.'))
        .collect();
    assert_eq!(names, ["receipt.json.sig"]);

    let verify = |identity: &str, signers: &Path| {
        klab()
            .args(["receipt", "verify"])
            .arg(&b)
            .arg("--allowed-signers")
            .arg(signers)
            .args(["--identity", identity])
            .output()
            .unwrap()
    };
    let ok = verify("lab@h200", &allowed);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        String::from_utf8_lossy(&ok.stdout)
            .contains("Good \"klab-receipt\" signature for lab@h200"),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );

    // Another identity: exit 2, one line.
    let other = verify("mallory@elsewhere", &allowed);
    assert_eq!(other.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&other.stderr).contains("is not signed by mallory@elsewhere"));

    // Another key under the same identity: exit 2.
    let key2 = d.path().join("other");
    std::process::Command::new(&tool)
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key2)
        .output()
        .unwrap();
    let public2 = fs::read_to_string(d.path().join("other.pub")).unwrap();
    let p2: Vec<&str> = public2.split_whitespace().collect();
    let allowed2 = d.path().join("allowed_other");
    fs::write(&allowed2, format!("lab@h200 {} {}\n", p2[0], p2[1])).unwrap();
    assert_eq!(verify("lab@h200", &allowed2).status.code(), Some(2));

    // A modified receipt (one more space in its claim): exit 2, naming the receipt.
    let text = fs::read_to_string(&b).unwrap();
    fs::write(&b, text.replacen("\"claim\": \"", "\"claim\": \" ", 1)).unwrap();
    let bad = verify("lab@h200", &allowed);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "baseline/receipt.json is not signed by lab@h200 under namespace klab-receipt"
        ),
        "{err}"
    );
    fs::write(&b, &text).unwrap();
    assert_eq!(verify("lab@h200", &allowed).status.code(), Some(0));
    // The signature covers the receipt's bytes; a file it hashes changed since signing is
    // not vouched for by a good signature.
    let samples = d.path().join("baseline/samples-r01.csv");
    let kept = fs::read(&samples).unwrap();
    let mut more = kept.clone();
    more.extend_from_slice(b"5,1,101.000000\n");
    fs::write(&samples, &more).unwrap();
    refused(
        &verify("lab@h200", &allowed),
        &[
            "the signature is good, but the receipt no longer checks",
            "samples-r01.csv",
        ],
    );
    fs::write(&samples, &kept).unwrap();
    assert_eq!(verify("lab@h200", &allowed).status.code(), Some(0));

    // A signature goes over an earlier signature only: signing again is fine, but a
    // --signature naming the receipt, one of its files or the key is refused, and each
    // is left as it was.
    let sign_to = |to: &Path| {
        klab()
            .args(["receipt", "sign"])
            .arg(&b)
            .arg("--key")
            .arg(&key)
            .arg("--signature")
            .arg(to)
            .output()
            .unwrap()
    };
    assert_eq!(sign_to(&sig).status.code(), Some(0));
    for kept in [b.clone(), samples.clone(), key.clone()] {
        let before = fs::read(&kept).unwrap();
        refused(
            &sign_to(&kept),
            &[
                "exists and is not an SSH signature",
                "give another --signature",
            ],
        );
        assert_eq!(fs::read(&kept).unwrap(), before, "{}", kept.display());
    }
    assert_eq!(verify("lab@h200", &allowed).status.code(), Some(0));

    // A missing signature or ssh-keygen: exit 1, one line.
    fs::remove_file(&sig).unwrap();
    refused(&verify("lab@h200", &allowed), &["receipt.json.sig"]);
    refused(
        &klab()
            .args(["receipt", "sign"])
            .arg(&b)
            .arg("--key")
            .arg(&key)
            .args(["--ssh-keygen", "/nonexistent/ssh-keygen"])
            .output()
            .unwrap(),
        &["cannot start /nonexistent/ssh-keygen"],
    );
    // A receipt that does not stand up is not signed.
    edit_json(&b, |v| {
        v["hardware"]["compute_capability"] = json!("banana")
    });
    refused(
        &klab()
            .args(["receipt", "sign"])
            .arg(&b)
            .arg("--key")
            .arg(&key)
            .output()
            .unwrap(),
        &["hardware.compute_capability 'banana'"],
    );
    assert!(!sig.exists());
}

/// Defect: a combined receipt carried its first block's integrity section (4 verified
/// samples, that block's flags) as if it were the whole run's. It must be the blocks'
/// sections combined: counts summed, flags in order, medians the median of the blocks'.
#[test]
fn a_combined_integrity_section_must_be_its_blocks_combined() {
    let (_t, run) = h200_rounds();
    let tiled = run.join("my_tiled.receipt.json");
    let combined: Value = serde_json::from_slice(&fs::read(&tiled).unwrap()).unwrap();
    let blocks: Vec<String> = combined["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["role"] == json!(klab_evidence::receipt::BLOCK_RECEIPT_ROLE))
        .map(|a| a["path"].as_str().unwrap().to_string())
        .collect();
    let mut sections = Vec::new();
    for (i, rel) in blocks.iter().enumerate() {
        let path = run.join(rel);
        common::add_integrity(&path);
        let mut block: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        if i == 3 {
            block["integrity"]["flags"] = json!(["round 2: timed median far below checked"]);
        }
        // Each block's process measures the L2 ceiling anew: the floors differ a little.
        block["integrity"]["floor"] = json!(common::floor_of(&block, 9000.0 + i as f64));
        rewrite_artifact(
            &tiled,
            rel,
            serde_json::to_string_pretty(&block).unwrap().as_bytes(),
        );
        sections.push(
            serde_json::from_value::<klab_evidence::receipt::Integrity>(block["integrity"].clone())
                .unwrap(),
        );
    }
    common::add_integrity(&run.join("my_naive.receipt.json"));
    // The first block's section, as `klab rounds` once wrote it.
    edit_json(&tiled, |v| {
        v["integrity"] = serde_json::to_value(&sections[0]).unwrap()
    });
    refused(
        &compare(&run.join("my_naive.receipt.json"), &tiled),
        &[
            "my_tiled.receipt.json: integrity.checked_launches is 6, but its block receipts give 60",
        ],
    );
    let parts: Vec<&klab_evidence::receipt::Integrity> = sections.iter().collect();
    let whole = klab_evidence::receipt::Integrity::combined(&parts).unwrap();
    assert_eq!(whole.flags.len(), 1);
    // The lowest of the blocks' floors.
    let lowest = parts
        .iter()
        .map(|p| p.floor.as_ref().unwrap().us)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(whole.floor.as_ref().unwrap().us, lowest);
    edit_json(&tiled, |v| {
        v["integrity"] = serde_json::to_value(&whole).unwrap()
    });
    let o = compare(&run.join("my_naive.receipt.json"), &tiled);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A pair timed under different invalidation (one receipt from a binary that did not yet
/// perturb the inputs) measured different work: refused, naming both policies.
#[test]
fn receipts_timed_under_different_invalidation_are_refused() {
    let (_t, run) = h200_rounds();
    let (naive, tiled) = (
        run.join("my_naive.receipt.json"),
        run.join("my_tiled.receipt.json"),
    );
    common::add_integrity(&naive);
    common::add_integrity(&tiled);
    edit_json(&naive, |v| {
        v["integrity"]["policy"] = json!("every timed launch: outputs and scratch overwritten")
    });
    refused(
        &compare(&naive, &tiled),
        &[
            "integrity.policy",
            "every timed launch: outputs and scratch overwritten",
        ],
    );
}

/// `klab receipt check` says "ok" of a receipt true to its files, and says in the same
/// breath what `klab compare` would refuse it for (a failing kernel, a profiler, a
/// lab-contract invalidation): "ok" never hides a refusal.
#[test]
fn receipt_check_notes_what_compare_would_refuse() {
    let d = tempfile::tempdir().unwrap();
    let (b, _) = pair(d.path());
    let ok = klab().args(["receipt", "check"]).arg(&b).output().unwrap();
    assert_eq!(ok.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&ok.stdout).contains("note"));
    edit_json(&b, |v| v["correctness"]["failures"] = json!(3));
    let o = klab().args(["receipt", "check"]).arg(&b).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.starts_with("ok "), "{out}");
    assert!(
        out.contains("correctness check recorded 3 failure(s)")
            && out.contains("; klab compare refuses it"),
        "{out}"
    );
}
