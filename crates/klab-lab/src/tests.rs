//! The pipeline without a GPU: needs decide what is skipped, and each gate's logic is fed
//! by a launcher that answers for the children.

use std::collections::VecDeque;

use klab_evidence::row::CSV_HEADER;
use klab_evidence::schema::LabRecord;

use super::*;

/// Answers each child with the next canned outcome; `write` lays files into the child's
/// output folder first, as the real command would.
#[derive(Default)]
struct Fake {
    answers: VecDeque<(ChildOutcome, Vec<(&'static str, String)>)>,
    ran: Vec<Child>,
    /// Each batch handed to `run_all`: its children's count and the jobs asked.
    batches: Vec<(usize, usize)>,
    /// Each sequence handed to `run_in_turn`.
    in_turn: Vec<Vec<Child>>,
    /// The child (counted from 1) that cannot be started.
    unstartable: Option<usize>,
    notes: Vec<String>,
    printed: String,
}

/// A klab child that exited `status` with its exit result, or (`None`) that hung.
fn outcome(status: Option<i32>, stdout: &str) -> ChildOutcome {
    let result = status.map(|c| ChildResult::Exit {
        code: u8::try_from(c).unwrap(),
    });
    let ending = klab_run::child::Ending {
        exit_code: status,
        signal: status.is_none().then_some(9),
        killed_after: status
            .is_none()
            .then_some(std::time::Duration::from_secs(9)),
    };
    ChildOutcome {
        verdict: ChildVerdict::of(result.as_ref(), &ending, None),
        stdout: stdout.into(),
        log: format!("$ klab ...\n{stdout}"),
        result,
    }
}

impl Fake {
    fn answer(&mut self, o: ChildOutcome, files: Vec<(&'static str, String)>) {
        self.answers.push_back((o, files));
    }
}

impl Launcher for Fake {
    fn run(&mut self, child: &Child, _: u64) -> Result<ChildOutcome, LabError> {
        self.ran.push(child.clone());
        if self.unstartable == Some(self.ran.len()) {
            return Err(LabError::Launch {
                what: format!("{child:?}"),
                why: "could not start".into(),
            });
        }
        let (o, files) = self.answers.pop_front().expect("an answer per child");
        let out = match child {
            Child::Bench { out, .. }
            | Child::Rounds { out, .. }
            | Child::Sanitize { out, .. }
            | Child::Profile { out, .. } => Some(out.clone()),
            Child::Transpose { .. } => None,
        };
        for (name, text) in files {
            let dir = out.clone().expect("files only for children with --out");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), text).unwrap();
        }
        Ok(o)
    }
    fn run_all(
        &mut self,
        children: &[Child],
        timeout_s: u64,
        jobs: usize,
    ) -> Vec<Result<ChildOutcome, LabError>> {
        self.batches.push((children.len(), jobs));
        children.iter().map(|c| self.run(c, timeout_s)).collect()
    }
    fn run_in_turn(
        &mut self,
        children: &[Child],
        timeout_s: u64,
    ) -> Vec<Result<ChildOutcome, LabError>> {
        self.in_turn.push(children.to_vec());
        in_turn(children, |_, c| self.run(c, timeout_s))
    }
    fn note(&mut self, line: &str) {
        self.notes.push(line.into());
    }
    fn progress(&mut self, _: &str, _: u64, _: u64, _: &str) {}
    fn print(&mut self, text: &str) {
        self.printed.push_str(text);
    }
}

fn options(out: &Path) -> LabOptions {
    LabOptions {
        out: out.to_path_buf(),
        device: 0,
        rounds: 2,
        isolation: klab_core::samples::Isolation::Round,
        order: klab_core::samples::RoundOrder::Alternating,
        timeout: 9,
        plan: LabPlan::default(),
        klab_binary: std::env::current_exe().unwrap(),
        command: vec!["klab".into(), "lab".into()],
    }
}

fn bare_machine() -> Machine {
    Machine {
        device: Err("no driver".into()),
        nvrtc: false,
        sanitizer: None,
        ncu: None,
        cublas: false,
        untimed_at_once: 1,
    }
}

/// A lab positioned at step `name`, on a machine whose needs all hold.
fn lab_at<'a>(opts: &'a LabOptions, fake: &'a mut Fake, dir: &Path, name: &'static str) -> Lab<'a> {
    let def = STEPS.iter().find(|d| d.name == name).unwrap();
    Lab {
        dir: dir.to_path_buf(),
        opts,
        machine: Machine {
            sanitizer: Some("/bin/compute-sanitizer".into()),
            ncu: Some("/bin/ncu".into()),
            nvrtc: true,
            cublas: true,
            untimed_at_once: 3,
            ..bare_machine()
        },
        built: true,
        steps: Vec::new(),
        launcher: fake,
        current: (def.name, def.needs),
    }
}

#[test]
fn a_machine_without_a_gpu_skips_each_step_for_its_first_unmet_need() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = options(tmp.path());
    let mut fake = Fake::default();
    let o = run_on(&opts, bare_machine(), &mut fake).unwrap();
    assert!(fake.ran.is_empty(), "no child runs without a GPU");
    assert!(!o.error && !o.gate_failed, "{:?}", fake.notes);
    let record: LabRecord =
        serde_json::from_slice(&std::fs::read(o.dir.join("lab.json")).unwrap()).unwrap();
    let names: Vec<&str> = record.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "environment",
            "model",
            "build",
            "ladder",
            "benchmark",
            "receipts",
            "rounds",
            "sanitize",
            "profile",
            "ceilings",
            "report"
        ]
    );
    let step = |n: &str| record.step(n).unwrap();
    assert_eq!(step("model").status, "ran");
    assert_eq!(step("build").status, "skipped");
    assert!(step("build").detail.starts_with("NVRTC not found"));
    assert_eq!(step("build").needs, ["nvrtc"]);
    for name in ["ladder", "sanitize", "ceilings"] {
        assert_eq!(step(name).status, "skipped");
        assert!(step(name).detail.starts_with("no CUDA device"), "{name}");
    }
    assert_eq!(step("sanitize").needs, ["gpu", "kernels", "sanitizer"]);
    assert_eq!(o.skipped.len(), 8);
    // Every artifact lab.json lists is there with its hash.
    for a in &record.artifacts {
        let got = klab_core::artifact::sha256_file(&o.dir.join(&a.path)).unwrap();
        assert_eq!(Some(got), a.sha256, "{}", a.path);
    }
}

#[test]
fn each_need_names_what_is_missing() {
    let m = Machine {
        nvrtc: true,
        ..bare_machine()
    };
    assert!(m
        .unmet(Need::Gpu, true)
        .unwrap()
        .starts_with("no CUDA device"));
    assert_eq!(m.unmet(Need::Nvrtc, true), None);
    assert_eq!(m.unmet(Need::Kernels, true), None);
    assert_eq!(
        m.unmet(Need::Kernels, false).unwrap(),
        "kernels were not built"
    );
    assert!(m
        .unmet(Need::Sanitizer, true)
        .unwrap()
        .contains("compute-sanitizer"));
    assert!(m.unmet(Need::Ncu, true).unwrap().contains("ncu"));
    assert!(m.unmet(Need::Cublas, true).unwrap().contains("cuBLAS"));
}

fn transpose_csv(rows: &[&str]) -> String {
    format!("{CSV_HEADER}\n{}\n", rows.join("\n"))
}

const GOOD: [&str; 5] = [
    "copy,true,0,0,0.01,1.00",
    "naive,true,0,0,0.01,1.00",
    "tiled,true,0,0,0.01,1.00",
    "padded,true,0,0,0.01,1.00",
    "broken,false,3,inf,,",
];

#[test]
fn the_ladder_fails_when_broken_is_accepted_or_a_size_hung() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = options(tmp.path());
    opts.plan.ladder = vec![7, 33];
    let mut fake = Fake::default();
    fake.answer(outcome(Some(2), &transpose_csv(&GOOD)), vec![]);
    let mut accepted = GOOD;
    accepted[4] = "broken,true,0,0,0.01,1.00";
    fake.answer(outcome(Some(0), &transpose_csv(&accepted)), vec![]);
    let mut lab = lab_at(&opts, &mut fake, tmp.path(), "ladder");
    steps::ladder(&mut lab).unwrap();
    let s = &lab.steps[0];
    assert_eq!(s.status, "failed");
    assert_eq!(s.detail, "N=33: broken was accepted");
    assert!(tmp.path().join("check-33.csv").is_file());

    let mut fake = Fake::default();
    fake.answer(outcome(Some(2), &transpose_csv(&GOOD)), vec![]);
    fake.answer(outcome(None, ""), vec![]);
    let mut lab = lab_at(&opts, &mut fake, tmp.path(), "ladder");
    steps::ladder(&mut lab).unwrap();
    // A hang is the kernel's failure (the one child verdict), not an error of the lab.
    assert_eq!(lab.steps[0].status, "failed");
    assert!(
        lab.steps[0].detail.contains("N=33: hung"),
        "{}",
        lab.steps[0].detail
    );
}

/// The ladder's sizes time nothing: they go to the launcher as one batch, to run at once
/// (they ran one after another, 2.3 s of the lab on the H200), each still its own child.
#[test]
fn the_ladders_sizes_run_as_one_batch_of_children() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = options(tmp.path());
    opts.plan.ladder = vec![1, 7, 33];
    let mut fake = Fake::default();
    for _ in 0..3 {
        fake.answer(outcome(Some(2), &transpose_csv(&GOOD)), vec![]);
    }
    let mut lab = lab_at(&opts, &mut fake, tmp.path(), "ladder");
    steps::ladder(&mut lab).unwrap();
    assert_eq!(lab.steps[0].status, "ran", "{}", lab.steps[0].detail);
    drop(lab);
    assert_eq!(fake.batches, [(3, 3)]);
    assert_eq!(fake.ran.len(), 3);
    for n in [1, 7, 33] {
        assert!(tmp.path().join(format!("check-{n}.csv")).is_file());
    }
}

/// A sanitize.json of `kernels`: (name, memcheck's outcome, known-broken).
fn sanitized(kernels: &[(&str, &str, bool)]) -> String {
    let records: Vec<String> = kernels
        .iter()
        .map(|(kernel, outcome, broken)| {
            format!(
                r#"{{"kernel":"{kernel}","known_broken":{},"sizes":[33,1024],"verdict":"v",
            "runs":[{{"tool":"memcheck","report":{{"tool":"memcheck","outcome":{{"kind":"{outcome}"}}}}}}]}}"#,
                if *broken { "\"racy\"" } else { "null" }
            )
        })
        .collect();
    format!("[{}]", records.join(","))
}

/// The default plan's accepted kernels with `accepted`'s outcome, and broken with `broken`'s.
fn lab_sanitized(accepted: &str, broken: &str) -> String {
    sanitized(&[
        ("copy", accepted, false),
        ("naive", "clean", false),
        ("tiled", "clean", false),
        ("padded", "clean", false),
        ("broken", broken, true),
    ])
}

/// The sanitize step of `opts` answered by one child with `status` and `json`.
fn sanitize_step(
    opts: &LabOptions,
    status: Option<i32>,
    json: Option<String>,
) -> (Vec<Child>, LabStep) {
    let dir = tempfile::tempdir().unwrap();
    let mut fake = Fake::default();
    let files = json.map(|j| vec![("sanitize.json", j)]).unwrap_or_default();
    fake.answer(outcome(status, ""), files);
    let mut lab = lab_at(opts, &mut fake, dir.path(), "sanitize");
    steps::sanitize(&mut lab).unwrap();
    let s = lab.steps[0].clone();
    drop(lab);
    (fake.ran, s)
}

#[test]
fn the_sanitizer_step_needs_the_accepted_clean_and_the_broken_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = options(tmp.path());
    let run = |accepted: &str, broken: &str| {
        let (ran, s) = sanitize_step(&opts, Some(2), Some(lab_sanitized(accepted, broken)));
        // One child for every kernel of both lists, so --jobs spreads all their runs.
        let [Child::Sanitize { kernels, .. }] = ran.as_slice() else {
            panic!("one sanitize child: {ran:?}")
        };
        assert_eq!(kernels, &["copy", "naive", "tiled", "padded", "broken"]);
        assert!(s.artifacts.contains(&"sanitize/sanitize.json".to_string()));
        (s.status, s.detail)
    };
    let (status, detail) = run("clean", "found_errors");
    assert_eq!(status, "ran");
    assert!(detail.ends_with("broken: found by memcheck"), "{detail}");
    let (status, detail) = run("clean", "clean");
    assert_eq!(status, "failed");
    assert!(
        detail.contains("no sanitizer tool caught broken: broken: no sanitizer tool reported it"),
        "{detail}"
    );
    let (status, detail) = run("found_errors", "found_errors");
    assert_eq!(status, "failed");
    assert!(
        detail.starts_with("an accepted variant is not clean: copy"),
        "{detail}"
    );
}

/// The child's exit is not the verdict (2 whenever a known-broken kernel is rejected), but a
/// child that could not run, or a record that lacks a kernel, is an error (a hung one a
/// failure), never a pass.
#[test]
fn the_sanitizer_step_is_an_error_without_a_record_of_every_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = options(tmp.path());
    let (_, s) = sanitize_step(&opts, Some(1), Some(lab_sanitized("clean", "found_errors")));
    assert_eq!(s.status, "error", "{}", s.detail);
    // A hung child is the kernel's failure, not an error.
    let (_, s) = sanitize_step(&opts, None, None);
    assert_eq!(s.status, "failed", "{}", s.detail);
    assert!(s.detail.contains("watchdog"), "{}", s.detail);
    let partial = sanitized(&[("copy", "clean", false), ("broken", "found_errors", true)]);
    let (_, s) = sanitize_step(&opts, Some(2), Some(partial));
    assert_eq!(s.status, "error", "{}", s.detail);
    assert!(
        s.detail
            .starts_with("sanitize/sanitize.json has no record of naive, tiled, padded"),
        "{}",
        s.detail
    );
}

/// Two known-broken kernels, one caught: the one caught must not vouch for the other.
#[test]
fn the_sanitizer_step_needs_every_broken_kernel_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = options(tmp.path());
    opts.plan.sanitize_accepted = vec!["copy".into()];
    opts.plan.sanitize_broken = vec!["broken".into(), "naive".into()];
    let json = sanitized(&[
        ("copy", "clean", false),
        ("broken", "found_errors", true),
        ("naive", "clean", true),
    ]);
    let (_, s) = sanitize_step(&opts, Some(2), Some(json));
    assert_eq!(s.status, "failed", "{}", s.detail);
    assert!(
        s.detail.starts_with("no sanitizer tool caught naive: broken: found by memcheck; naive: no sanitizer tool reported it"),
        "{}",
        s.detail
    );
}

#[test]
fn the_rounds_step_reads_its_rates_from_summary_json_and_prints_the_table() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = options(tmp.path());
    let mut fake = Fake::default();
    // The ceiling's own share can come out a hair above 100: it is not faster than itself.
    let summary = r#"{"baseline":"naive","rates":[
        {"kernel":"copy","median_gb_s":3000.4,"pct_of_ceiling":100.00000000000001},
        {"kernel":"naive","median_gb_s":500.0,"pct_of_ceiling":16.66},
        {"kernel":"padded","median_gb_s":3521.0,"pct_of_ceiling":117.35}]}"#;
    fake.answer(
        outcome(Some(0), ""),
        vec![
            ("summary.json", summary.into()),
            ("summary.txt", "the table\n".into()),
            // What `klab rounds` itself writes: each block's command and output.
            ("rounds.log", "# round 1 position 0\n".into()),
        ],
    );
    let mut lab = lab_at(&opts, &mut fake, tmp.path(), "rounds");
    steps::rounds(&mut lab).unwrap();
    // The lab's log of its child goes to its own folder; the command's log is kept.
    let dir = lab.dir.clone();
    assert_eq!(
        std::fs::read_to_string(dir.join("rounds/rounds.log")).unwrap(),
        "# round 1 position 0\n"
    );
    assert!(dir.join("logs/rounds.log").is_file());
    let s = lab.steps[0].clone();
    assert_eq!(s.status, "ran");
    assert!(
        s.detail
            .contains("copy 3000 GB/s (100.0% of ceiling), naive 500 GB/s (16.7% of ceiling), padded 3521 GB/s (117.3% of ceiling, faster than the copy: see summary.txt)"),
        "{}",
        s.detail
    );
    for a in ["rounds/rounds.log", "logs/rounds.log"] {
        assert!(
            s.artifacts.contains(&a.to_string()),
            "{a}: {:?}",
            s.artifacts
        );
    }
    match &fake.ran[0] {
        Child::Rounds {
            kernels,
            baseline,
            n,
            rounds,
            isolation,
            order,
            ..
        } => {
            assert_eq!(kernels, &opts.plan.round_variants);
            assert_eq!((baseline.as_str(), *n, *rounds), ("naive", 4096, 2));
            // The lab's isolation and round order reach its rounds child.
            assert_eq!(*isolation, klab_core::samples::Isolation::Round);
            assert_eq!(*order, klab_core::samples::RoundOrder::Alternating);
        }
        other => panic!("{other:?}"),
    }
    assert!(fake.printed.contains("the table"));

    let mut fake = Fake::default();
    fake.answer(outcome(Some(2), ""), vec![]);
    let mut lab = lab_at(&opts, &mut fake, tmp.path(), "ceilings");
    steps::ceilings(&mut lab).unwrap();
    assert_eq!(lab.steps[0].status, "failed");
    assert_eq!(lab.steps[0].name, "ceilings");
}

/// A kernel of one of the repository's examples, by its manifest's absolute path.
fn example(rel: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ops");
    root.join(rel).canonicalize().unwrap().display().to_string()
}

#[test]
fn a_plan_takes_declared_kernels_and_refuses_one_a_step_cannot_size() {
    let gelu = example("gelu/gelu.toml");
    let gemm = example("gemm/gemm.toml");
    // One size variable: --n sets it, so every step can take it.
    let mut plan = LabPlan {
        round_variants: vec![format!("{gelu}:gelu"), format!("{gelu}:gelu_strided")],
        rounds_baseline: format!("{gelu}:gelu"),
        profile_kernels: vec![format!("{gelu}:gelu")],
        sanitize_accepted: vec![format!("{gelu}:gelu"), format!("{gemm}:gemm")],
        receipt_kernels: vec![format!("{gemm}:gemm")],
        ..LabPlan::default()
    };
    crate::check_plan(&plan).unwrap();
    // A GEMM has M, N and K: the rounds step's --n cannot shape it.
    plan.round_variants.push(format!("{gemm}:gemm"));
    let e = crate::check_plan(&plan).unwrap_err().to_string();
    assert!(
        e.contains("round_variants") && e.contains("3 size variables (K, M, N)"),
        "{e}"
    );
    assert!(e.contains("receipt_kernels"), "{e}");
}

/// The examples' plan (`klab lab --plan examples/ops/lab-plan.json`, run from the
/// repository root) passes the plan check: every kernel resolves and every step can size it.
#[test]
fn the_examples_lab_plan_is_a_valid_plan() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let text = std::fs::read_to_string(root.join("examples/ops/lab-plan.json")).unwrap();
    // Its manifest paths are relative to the repository root; the test runs elsewhere.
    let text = text.replace("\"examples/", &format!("\"{}/examples/", root.display()));
    let plan: LabPlan = serde_json::from_str(&text).unwrap();
    crate::check_plan(&plan).unwrap();
    assert!(plan
        .sanitize_broken
        .iter()
        .any(|k| k.ends_with("gemm.toml:gemm_no_second_sync")));
}

/// A bench that said `verdict`, as a child ends.
fn benched(verdict: klab_run::child::Verdict) -> ChildOutcome {
    let result = ChildResult::Bench {
        kernel: "k".into(),
        verdict,
        receipt: None,
        detail: "d".into(),
        report: None,
        elapsed_s: None,
        waited_s: None,
    };
    let ending = klab_run::child::Ending {
        exit_code: Some(if verdict == klab_run::child::Verdict::Pass {
            0
        } else {
            2
        }),
        ..Default::default()
    };
    let stdout = format!("result: {verdict:?}\n");
    ChildOutcome {
        verdict: ChildVerdict::of(Some(&result), &ending, None),
        log: format!("$ klab ...\n{stdout}"),
        stdout,
        result: Some(result),
    }
}

/// The receipts' benches time kernels, so they go to the launcher as one sequence to run in
/// turn (each started while the one before runs, as rounds' blocks are), in the plan's
/// order: each round variant at the benchmark size, then each receipt kernel at its own. A
/// bench that fails its gate is that kernel's failure.
#[test]
fn the_receipts_run_in_turn_in_the_plans_order() {
    use klab_run::child::Verdict;
    let tmp = tempfile::tempdir().unwrap();
    let opts = options(tmp.path());
    let plan = &opts.plan;
    let expected: Vec<(String, Option<u64>)> = plan
        .round_variants
        .iter()
        .map(|v| (v.clone(), Some(plan.bench_n)))
        .chain(plan.receipt_kernels.iter().map(|k| (k.clone(), None)))
        .collect();
    assert!(expected.len() >= 2, "the default plan has several receipts");
    let mut fake = Fake::default();
    fake.answer(benched(Verdict::Fail), vec![]);
    for _ in 1..expected.len() {
        fake.answer(benched(Verdict::Pass), vec![]);
    }
    let mut lab = lab_at(&opts, &mut fake, tmp.path(), "receipts");
    steps::receipts(&mut lab).unwrap();
    let step = &lab.steps[0];
    assert_eq!(step.status, "failed", "{}", step.detail);
    assert!(step.detail.contains(&expected[0].0), "{}", step.detail);
    drop(lab);
    assert_eq!(fake.in_turn.len(), 1, "one sequence");
    let asked: Vec<(String, Option<u64>)> = fake.in_turn[0]
        .iter()
        .map(|c| match c {
            Child::Bench { kernel, n, out, .. } => {
                assert_eq!(out, &tmp.path().join(format!("benchmark/{kernel}")));
                (kernel.clone(), *n)
            }
            other => panic!("not a bench: {other:?}"),
        })
        .collect();
    assert_eq!(asked, expected);
    // Each bench's output is in the step's log once: its log holds it.
    let log = std::fs::read_to_string(tmp.path().join("logs/receipts.log")).unwrap();
    assert_eq!(log.matches("result: Fail").count(), 1, "{log}");
    assert_eq!(
        log.matches("result: Pass").count(),
        expected.len() - 1,
        "{log}"
    );
}

/// A receipt's bench that cannot be started ends the step with that error, none after it
/// runs, and what ran before it is still in the step's log.
#[test]
fn a_receipt_that_cannot_start_ends_the_step_with_what_ran_logged() {
    use klab_run::child::Verdict;
    let tmp = tempfile::tempdir().unwrap();
    let opts = options(tmp.path());
    let mut fake = Fake {
        unstartable: Some(2),
        ..Fake::default()
    };
    fake.answer(benched(Verdict::Pass), vec![]);
    let mut lab = lab_at(&opts, &mut fake, tmp.path(), "receipts");
    let e = steps::receipts(&mut lab).unwrap_err();
    assert!(e.to_string().contains("could not start"), "{e}");
    drop(lab);
    assert_eq!(fake.ran.len(), 2, "none after the one that could not start");
    let log = std::fs::read_to_string(tmp.path().join("logs/receipts.log")).unwrap();
    assert_eq!(log.matches("result: Pass").count(), 1, "{log}");
}
