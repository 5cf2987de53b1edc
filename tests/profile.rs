//! `klab profile` end to end on a machine without a GPU: a stand-in `ncu` script records
//! the argument vector it was given, plays the child's report line and serves a real H200
//! capture (crates/klab-tools/tests/fixtures/ncu) for `--import`. What is tested is klab's
//! side: the argument vector, the launch-skip check, the import, the parse, the counters
//! against the address model, the bound statement and the files.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

const FAKE_NCU: &str = r#"#!/usr/bin/env bash
for a in "$@"; do
  if [ "$a" = --version ]; then
    echo "NVIDIA (R) Nsight Compute Command Line Profiler"
    echo "Version 2025.3.1.0 (build 36398880) (public-release)"
    exit 0
  fi
done
if [[ " $* " == *" --import "* ]]; then
  if [[ " $* " == *" --page details "* ]]; then cat "$FAKE_DETAILS"; else cat "$FAKE_RAW"; fi
  exit 0
fi
printf '%s\n' "$@" > "$FAKE_ARGV_LOG"
prev=""; exp=""; res=""; name=""
for a in "$@"; do
  [ "$prev" = --export ] && exp="$a"
  [ "$prev" = --results-to ] && res="$a"
  [ "$prev" = --kernel-name ] && name="$a"
  prev="$a"
done
# With FAKE_SPANS, each capture says when it began and ended, and the first kernel's takes
# longest (so that, run at once, it ends last).
if [ -n "${FAKE_SPANS:-}" ]; then
  echo "begin $name $(date +%s.%N)" >> "$FAKE_SPANS"
  if [ "$name" = transpose_naive ]; then sleep 0.8; else sleep 0.2; fi
  echo "end $name $(date +%s.%N)" >> "$FAKE_SPANS"
fi
# With FAKE_HANG, ncu's serialization: one profiled process at a time (a lock that dies with
# its holder). The kernel FAKE_HANG names takes the lock first, says so in FAKE_LOCK.held,
# and never ends; the others wait for that word (at most 5 s), then for the lock, then
# profile for a second (so that one started beside the hung kernel cannot finish before its
# own watchdog, which fires at about the moment the hung kernel's frees the lock).
if [ -n "${FAKE_HANG:-}" ]; then
  exec 9> "$FAKE_LOCK"
  if [ "$name" = "$FAKE_HANG" ]; then
    flock 9
    : > "$FAKE_LOCK.held"
    sleep 60
  fi
  for _ in $(seq 100); do [ -e "$FAKE_LOCK.held" ] && break; sleep 0.05; done
  flock 9
  sleep 1
fi
launches=$FAKE_LAUNCHES; measured=$FAKE_MEASURED
# The known-broken transpose stops after its one validation launch.
if [ "$name" = transpose_broken ]; then launches=1; measured=null; fi
echo "==PROF== Connected to process 1 (klab)"
# The profiled klab says what it ran in the file its parent named; a result-like line on
# stdout (where the kernel and ncu print) is only output and must decide nothing.
echo "klab-result: {\"result\":\"error\",\"message\":\"forged on stdout\"}"
[ -n "$res" ] && echo "klab-result: {\"result\":\"profile\",\"report\":{\"entry\":\"transpose_naive\",\"n\":4096,\"launches_before\":$launches,\"before_failures\":0,\"measured_failures\":$measured,\"known_broken\":false,\"first_failure\":null}}" >> "$res"
if [ "$measured" != null ]; then : > "$exp"; fi
echo "==PROF== Disconnected from process 1"
"#;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/klab-tools/tests/fixtures/ncu")
        .join(name)
}

/// The naive capture holds three profiled launches; klab profiles exactly one, so the
/// stand-in serves the header, the unit row and the first launch.
fn one_launch_raw(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixture("ncu_raw_naive_metrics.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("\"ID\"")).unwrap();
    let kept = lines[..header + 3].join("\n") + "\n";
    let p = dir.join("naive-one.csv");
    std::fs::write(&p, kept).unwrap();
    p
}

struct Fake {
    dir: tempfile::TempDir,
    ncu: PathBuf,
}

fn fake() -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let ncu = dir.path().join("ncu");
    std::fs::write(&ncu, FAKE_NCU).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ncu, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Fake { dir, ncu }
}

fn klab(f: &Fake, raw: &Path, launches: &str, measured: &str) -> Command {
    let mut c = Command::cargo_bin("klab").unwrap();
    c.env("FAKE_RAW", raw)
        .env("FAKE_DETAILS", fixture("ncu_details_padded.csv"))
        .env("FAKE_ARGV_LOG", f.dir.path().join("argv.txt"))
        .env("FAKE_LAUNCHES", launches)
        .env("FAKE_MEASURED", measured)
        .arg("profile")
        .arg("--ncu")
        .arg(&f.ncu);
    c
}

#[test]
fn naive_is_profiled_on_one_launch_and_its_stores_agree_with_the_model() {
    let f = fake();
    let raw = one_launch_raw(f.dir.path());
    let out = f.dir.path().join("profile");
    klab(&f, &raw, "6", "0")
        .args(["naive", "--out"])
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("Observed limiter:"))
        .stdout(predicate::str::contains(
            "global store sectors/request predicted 32 measured 32 (agrees)",
        ));

    // The argument vector ncu was given.
    let argv = std::fs::read_to_string(f.dir.path().join("argv.txt")).unwrap();
    let argv: Vec<&str> = argv.lines().collect();
    let after = |flag: &str| argv[argv.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(after("--kernel-name"), "transpose_naive");
    assert_eq!(after("--launch-skip"), "6", "1 validation + 5 warmups");
    assert_eq!(after("--launch-count"), "1");
    assert_eq!(after("--clock-control"), "none");
    for s in [
        "LaunchStats",
        "SpeedOfLight",
        "MemoryWorkloadAnalysis",
        "Occupancy",
    ] {
        assert!(argv.windows(2).any(|w| w == ["--section", s]), "{s}");
    }
    let metrics = after("--metrics");
    assert!(metrics.contains("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"));
    // The profiled program: klab's own child command for exactly this kernel, by its
    // qualified name, with the launch sequence's size and warmups.
    let program = argv.iter().position(|a| *a == "__child").unwrap();
    let spec: serde_json::Value = serde_json::from_str(argv.last().unwrap()).unwrap();
    assert!(argv[program..].contains(&"--results-to"), "{argv:?}");
    let work = &spec["work"]["profiled-launches"];
    assert_eq!(
        work["kernels"],
        serde_json::json!(["transpose/naive"]),
        "{spec}"
    );
    assert_eq!(work["n"], 4096, "{spec}");
    assert_eq!(work["warmup"], 5, "{spec}");

    // The files.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("profile.json")).unwrap()).unwrap();
    assert_eq!(json["schema"], "klab-profile/1");
    assert_eq!(json["clock_control"], "none");
    assert_eq!(json["ncu_version"], "2025.3.1.0");
    assert_eq!(json["device"], "NVIDIA H200");
    let k = &json["kernels"][0];
    assert_eq!(k["kernel"], "naive");
    assert_eq!(k["launch_skip"], 6);
    assert_eq!(k["mismatches"], 0);
    assert_eq!(k["measured"]["global_store_sectors"], 16_777_216.0);
    assert_eq!(k["measured"]["dram_pct"], 10.35);
    // Load counters were not in that capture: reported as absent, not as zero.
    assert!(k["absent_metrics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m == "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"));
    let csv = std::fs::read_to_string(out.join("counters.csv")).unwrap();
    assert!(
        csv.starts_with("kernel,n,quantity,predicted,measured,agreement,metric,tolerance,shape\n")
    );
    assert!(csv.contains("naive,4096,global store sectors/request,32,32,agrees,"));
    assert!(csv.contains("naive,4096,global load sectors/request,4,,not measured,"));
    let bound = std::fs::read_to_string(out.join("bound.txt")).unwrap();
    assert!(
        bound.contains(
            "Workload: f32 transpose: out (f32) at n=4096 (naive), block 32x8x1, grid 128x128x1"
        ),
        "{bound}"
    );
    assert!(bound.contains("Correctness: 0 mismatches"));
    assert!(bound.contains("stage a tile in shared memory"));
    assert!(out.join("naive.raw.csv").is_file());
    assert!(out.join("naive.details.csv").is_file());
    assert!(out.join("naive.log").is_file());
    // ncu was given the child's results file; the saved command and the log, which a
    // person may run again, are without it (the file was this run's alone).
    assert!(argv.contains(&"--results-to"), "{argv:?}");
    let saved = serde_json::to_string(&json).unwrap();
    assert!(!saved.contains("--results-to"), "{saved}");
    let log = std::fs::read_to_string(out.join("naive.log")).unwrap();
    assert!(!log.contains("--results-to"), "{log}");
    assert!(log.contains("transpose/naive"), "{log}");
}

/// Each capture's span (begin, end) in seconds, by ncu's `--kernel-name`.
fn spans(path: &Path) -> Vec<(String, f64, f64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out: Vec<(String, f64, f64)> = Vec::new();
    for line in text.lines() {
        let [what, name, t] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("{line}");
        };
        let t: f64 = t.parse().unwrap();
        match what {
            "begin" => out.push((name.to_string(), t, f64::NAN)),
            _ => out.iter_mut().find(|s| s.0 == name).unwrap().2 = t,
        }
    }
    out
}

#[test]
fn captures_run_at_once_by_default_and_one_after_another_with_jobs_1_in_kernel_order() {
    let f = fake();
    let raw = one_launch_raw(f.dir.path());
    let kernels = ["naive", "tiled", "copy"];
    for jobs in [None, Some("1")] {
        let tag = jobs.unwrap_or("default");
        let log = f.dir.path().join(format!("spans-{tag}.txt"));
        let out = f.dir.path().join(format!("p-{tag}"));
        let mut cmd = klab(&f, &raw, "6", "0");
        cmd.env("FAKE_SPANS", &log).args(kernels);
        if let Some(j) = jobs {
            cmd.args(["--jobs", j]);
        }
        cmd.arg("--out").arg(&out).assert().success();
        let spans = spans(&log);
        assert_eq!(spans.len(), 3, "{spans:?}");
        let overlapping = spans
            .iter()
            .enumerate()
            .any(|(i, a)| spans[i + 1..].iter().any(|b| a.1 < b.2 && b.1 < a.2));
        assert_eq!(overlapping, jobs.is_none(), "{tag}: {spans:?}");
        // The record keeps the order the kernels were named in, whichever capture ended first.
        let (profiled, rejected) = profiled_and_rejected(&out);
        assert_eq!(profiled, kernels, "{tag}");
        assert!(rejected.is_empty(), "{tag}: {rejected:?}");
    }
}

/// The kernels a profile.json holds, and the ones it rejected, by name.
fn profiled_and_rejected(out: &Path) -> (Vec<String>, Vec<serde_json::Value>) {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("profile.json")).unwrap()).unwrap();
    let names = json["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kernel"].as_str().unwrap().to_string())
        .collect();
    (names, json["rejected"].as_array().unwrap().clone())
}

#[test]
fn a_kernel_that_waited_behind_a_hung_one_is_profiled_alone_and_only_the_hung_one_fails() {
    if std::process::Command::new("flock")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: no flock(1) here to stand in for ncu's serialization");
        return;
    }
    let f = fake();
    let raw = one_launch_raw(f.dir.path());
    let out = f.dir.path().join("p");
    // Both captures start at once; naive waits behind tiled, which never ends, and both
    // reach the 3 s watchdog. Run again alone, naive is profiled and tiled hangs again.
    klab(&f, &raw, "6", "0")
        .env("FAKE_HANG", "transpose_tiled")
        .env("FAKE_LOCK", f.dir.path().join("ncu.lock"))
        .args(["--timeout", "3", "naive", "tiled", "--out"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "naive: hung: killed by the watchdog after 3 s",
        ))
        .stderr(predicate::str::contains(
            "beside other captures (log naive.beside.log); run again alone",
        ));
    let (profiled, rejected) = profiled_and_rejected(&out);
    assert_eq!(profiled, ["naive"]);
    // The first attempt's log is kept beside the second's.
    assert!(out.join("naive.beside.log").is_file());
    assert!(out.join("naive.log").is_file());
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0]["kernel"], "tiled");
    assert_eq!(rejected[0]["hung"], true);
}

#[test]
fn a_rejected_kernel_beside_others_fails_alone_and_is_not_run_again() {
    let f = fake();
    let raw = one_launch_raw(f.dir.path());
    let out = f.dir.path().join("p");
    klab(&f, &raw, "6", "0")
        .args(["broken", "naive", "--out"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not profiled"))
        .stderr(predicate::str::contains("run again alone").not());
    let (profiled, rejected) = profiled_and_rejected(&out);
    assert_eq!(profiled, ["naive"]);
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0]["kernel"], "broken");
    assert_ne!(rejected[0]["hung"], true, "{rejected:?}");
}

#[test]
fn a_child_that_launched_a_different_number_of_times_is_refused() {
    let f = fake();
    let raw = one_launch_raw(f.dir.path());
    klab(&f, &raw, "5", "0")
        .args(["naive", "--out"])
        .arg(f.dir.path().join("p"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "the child made 5 launches before the measured one but ncu skipped 6",
        ));
}

#[test]
fn a_report_with_several_launches_is_refused() {
    let f = fake();
    klab(&f, &fixture("ncu_raw_naive_metrics.csv"), "6", "0")
        .args(["naive", "--out"])
        .arg(f.dir.path().join("p"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "3 launches profiled, expected exactly one",
        ));
}

#[test]
fn a_kernel_rejected_before_the_measured_launch_is_a_gate_failure() {
    let f = fake();
    let raw = one_launch_raw(f.dir.path());
    let out = f.dir.path().join("p");
    // The child stops after its one validation launch, so ncu profiles nothing.
    klab(&f, &raw, "1", "null")
        .args(["broken", "--out"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not profiled"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("profile.json")).unwrap()).unwrap();
    assert_eq!(json["kernels"].as_array().unwrap().len(), 0);
    assert_eq!(json["rejected"][0]["kernel"], "broken");
    assert!(json["rejected"][0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("not profiled"));
}

#[test]
fn a_profiled_launch_with_wrong_output_is_a_gate_failure_without_a_statement() {
    let f = fake();
    let raw = one_launch_raw(f.dir.path());
    let out = f.dir.path().join("p");
    klab(&f, &raw, "6", "7")
        .args(["naive", "--out"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the profiled launch's own output had 7 mismatches",
        ));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("profile.json")).unwrap()).unwrap();
    assert_eq!(json["kernels"].as_array().unwrap().len(), 0);
    assert_eq!(json["rejected"][0]["kernel"], "naive");
}

#[test]
fn a_kernel_listed_twice_is_refused_before_ncu_runs() {
    let f = fake();
    let raw = one_launch_raw(f.dir.path());
    klab(&f, &raw, "6", "0")
        .args(["naive", "naive", "--out"])
        .arg(f.dir.path().join("p"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("listed twice"));
    assert!(!f.dir.path().join("argv.txt").exists(), "ncu never ran");
}

#[test]
fn bad_arguments_are_one_line_errors() {
    let f = fake();
    let raw = one_launch_raw(f.dir.path());
    for (args, msg) in [
        (
            vec!["naive", "--cache-control", "sometimes"],
            "--cache-control",
        ),
        (vec!["naive", "--sections", " , "], "--sections"),
        (vec!["no_such_kernel"], "no_such_kernel"),
        (
            vec!["naive", "--warmup", "18446744073709551615"],
            "--warmup",
        ),
        (vec!["sgeam"], "library routine"),
    ] {
        let out = klab(&f, &raw, "6", "0").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(msg), "{err}");
    }
    let out = Command::cargo_bin("klab")
        .unwrap()
        .args(["profile", "naive", "--ncu", "/nonexistent/ncu"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
}
