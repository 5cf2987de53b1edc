//! The steps of [`crate::STEPS`]. Each writes its artifacts into the run folder and ends
//! with exactly one [`Lab::step`] record; verdicts come from the files and children's results
//! the children write, never from their prose.

use std::path::Path;
use std::time::Duration;

use klab_core::artifact::{read_regular, read_text, sha256_file, sha256_hex, Input};
use klab_core::device::{resources_csv, KernelResources};
use klab_core::samples::{Isolation, RoundOrder};
use klab_cuda::device::Device;
use klab_cuda::gpu::CudaBackend;
use klab_cuda::nvrtc::{self, Cache, CompileSpec, Compiled};
use klab_cuda::probe;
use klab_engine::backend::Backend;
use klab_evidence::row::{self, TransposeRow};
use klab_evidence::sanitize::SanitizedKernel;
use klab_evidence::schema::RoundsSummary;
use klab_model::{ModelParams, ModelReport};
use klab_run::child::{ChildResult, ChildVerdict, Verdict};
use klab_spec::{builtin, Variant};

use crate::{files_under, Child, ChildOutcome, Lab, LabError, Status, LOGS_DIR};

/// Samples per `klab bench` receipt and per rounds block.
const BENCH_SAMPLES: u32 = 200;
const ROUNDS_SAMPLES: u32 = 100;
/// How long `nvidia-smi` may take.
const SMI_TIMEOUT: Duration = Duration::from_secs(30);

/// Rows a gate must reject: a known-broken variant passing would be the failure.
fn unexpected(rows: &[TransposeRow]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| {
            let broken = r
                .variant
                .parse::<Variant>()
                .map(|v| v.known_broken())
                .unwrap_or(false);
            match (broken, r.correct) {
                (false, false) => Some(format!(
                    "{} failed ({} mismatches)",
                    r.variant, r.mismatches
                )),
                (true, true) => Some(format!("{} was accepted", r.variant)),
                _ => None,
            }
        })
        .collect()
}

/// `error` when something could not run, else `failed` when a gate failed, else `ran`.
fn gate(lab: &mut Lab<'_>, problems: &[String], errors: &[String], a: Vec<String>, ok: String) {
    if !errors.is_empty() {
        lab.step(Status::Error, errors.join("; "), a);
    } else if !problems.is_empty() {
        lab.step(Status::Failed, problems.join("; "), a);
    } else {
        lab.step(Status::Ran, ok, a);
    }
}

/// The environment, the plan, hashes of the source and the binary, nvidia-smi.
pub(crate) fn environment(lab: &mut Lab<'_>) -> Result<(), LabError> {
    let exe = lab.opts.klab_binary.clone();
    let env = serde_json::json!({
        "klab_version": env!("CARGO_PKG_VERSION"),
        "klab_binary": exe.display().to_string(),
        "driver_loadable": probe::driver_present(),
        "nvrtc_version": nvrtc::version().ok(),
        "device": lab.machine.device.as_ref().ok(),
        "device_error": lab.machine.device.as_ref().err(),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    });
    let mut a = vec![
        lab.write("environment.json", pretty(&env))?,
        // What the steps below run, written before any of them.
        lab.write("plan.json", pretty(lab.plan()))?,
    ];
    let binary_sha = sha256_file(&exe)?;
    a.push(lab.write(
        "source.sha256",
        format!(
            "{}  {}\n{binary_sha}  klab (binary, {})\n",
            sha256_hex(builtin::TRANSPOSE_SOURCE.as_bytes()),
            builtin::TRANSPOSE_PATH,
            exe.display()
        ),
    )?);
    let mut smi = String::new();
    for args in [&["-L"][..], &[]] {
        let argv: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
        let shown = std::iter::once("nvidia-smi").chain(args.iter().copied());
        smi.push_str(&format!("$ {}\n", shown.collect::<Vec<_>>().join(" ")));
        match klab_tools::process::run_captured(Path::new("nvidia-smi"), &argv, SMI_TIMEOUT) {
            Ok(c) if c.timed_out => smi.push_str("(timed out)\n"),
            Ok(c) => smi.push_str(&format!("{}\n", String::from_utf8_lossy(&c.stdout))),
            Err(e) => smi.push_str(&format!("(not available: {e})\n")),
        }
    }
    a.push(lab.write("nvidia-smi.txt", smi)?);
    let detail = match &lab.machine.device {
        Ok(f) => f.describe(),
        // The step ran (it recorded what the machine has); what it found is no GPU.
        Err(e) => format!(
            "recorded in environment.json and nvidia-smi.txt; no GPU here, so the steps that need one are skipped: {e}"
        ),
    };
    lab.step(Status::Ran, detail, a);
    Ok(())
}

/// Pretty JSON and a newline: the artifacts' form.
fn pretty<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string_pretty(v).expect("plain data serialises") + "\n"
}

/// The CPU address model.
pub(crate) fn model(lab: &mut Lab<'_>) -> Result<(), LabError> {
    match ModelReport::build(ModelParams::default()) {
        Ok(report) => {
            let a = vec![
                lab.write("model.txt", report.render_text())?,
                lab.write("model.json", pretty(&report))?,
            ];
            if report.coverage_ok() {
                lab.step(Status::Ran, "tiled mapping proven for the ladder and 4096; banks, sectors and per-variant predictions written".into(), a);
            } else {
                lab.step(
                    Status::Failed,
                    "the tiled mapping proof failed; see model.txt".into(),
                    a,
                );
            }
        }
        Err(e) => lab.step(Status::Error, e.to_string(), vec![]),
    }
    Ok(())
}

/// NVRTC compile and the resource report (from the loaded module when there is a device,
/// else from the ptxas log).
pub(crate) fn build(lab: &mut Lab<'_>) -> Result<(), LabError> {
    let arch = match &lab.machine.device {
        Ok(f) => f.arch(),
        Err(_) => nvrtc::DEFAULT_ARCH.to_string(),
    };
    let c = match nvrtc::compile(&CompileSpec::transpose_lab(&arch), &Cache::from_env()) {
        Ok(c) => c,
        Err(e) => {
            lab.step(Status::Error, e.to_string(), vec![]);
            return Ok(());
        }
    };
    for note in &c.notes {
        lab.launcher.note(&format!("klab: {note}"));
    }
    let mut a = vec![lab.write(
        "build.txt",
        format!(
            "program: {} (source sha256 {})\narch: {}\noptions: {}\nNVRTC: {}\ntoolkit headers: {}\ncache: {}\ncompile ms: {:.1}\n\n{}\n",
            c.program,
            c.source_sha256,
            c.arch,
            c.options.join(" "),
            c.nvrtc_version,
            c.toolkit_include.as_deref().unwrap_or("not found"),
            if c.from_cache { "hit" } else { "compiled now" },
            c.compile_ms,
            c.log.trim_end()
        ),
    )?];
    let (resources, source) = if lab.machine.device.is_ok() {
        match resource_report(lab.opts.device, &c) {
            Ok(r) => (r, "function attributes of the loaded module"),
            Err(e) => {
                lab.step(Status::Error, e, a);
                return Ok(());
            }
        }
    } else {
        (c.ptxas_resources(), "ptxas log (no device)")
    };
    a.push(lab.write("resources.csv", resources_csv(&resources))?);
    let summary: Vec<String> = resources
        .iter()
        .map(|r| {
            format!(
                "{} {}r/{}B smem/{}B local",
                r.kernel, r.registers, r.static_shared_bytes, r.local_bytes
            )
        })
        .collect();
    lab.built = true;
    lab.step(
        Status::Ran,
        format!(
            "{} for {arch} ({source}): {}",
            c.program,
            summary.join(", ")
        ),
        a,
    );
    Ok(())
}

/// Resources from the driver: load the module and read each kernel's attributes.
fn resource_report(ordinal: u32, compiled: &Compiled) -> Result<Vec<KernelResources>, String> {
    let device = Device::open(ordinal).map_err(|e| e.to_string())?;
    // Attributes only: no output is verified through this backend.
    let mut backend =
        CudaBackend::new(device, compiled, Default::default()).map_err(|e| e.to_string())?;
    Variant::ALL
        .iter()
        .map(|v| {
            let k = backend.kernel(v.entry()).map_err(|e| e.to_string())?;
            Ok(backend.resources(&k))
        })
        .collect()
}

fn transpose(selection: &str, n: u64, reps: u32) -> Child {
    Child::Transpose {
        selection: selection.into(),
        n,
        reps,
    }
}

/// Every variant at sizes no block divides, plus block-exact ones; broken must be rejected.
/// Each size is its own process under its own watchdog. They run at once (the machine's
/// `untimed_at_once`): the lab judges only their correctness, and the one batch each times
/// is a figure of the transpose lab's program that no step reports.
pub(crate) fn ladder(lab: &mut Lab<'_>) -> Result<(), LabError> {
    let ladder = lab.plan().ladder.clone();
    let (mut log, mut a, mut problems, mut errors) =
        (String::new(), Vec::new(), Vec::new(), Vec::new());
    let sizes = ladder
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    lab.progress(0, 1, &format!("N = {sizes}"));
    let children: Vec<Child> = ladder.iter().map(|&n| transpose("all", n, 1)).collect();
    let jobs = lab.machine.untimed_at_once;
    let outcomes = lab.untimed_children(&children, jobs);
    for (&n, child) in ladder.iter().zip(outcomes) {
        let child = child?;
        log.push_str(&child.log);
        a.push(lab.write(&format!("check-{n}.csv"), &child.stdout)?);
        match (&child.verdict, row::parse_csv(&child.stdout)) {
            (ChildVerdict::Passed | ChildVerdict::GateFailed { .. }, Ok(rows))
                if rows.len() == Variant::ALL.len() =>
            {
                problems.extend(unexpected(&rows).into_iter().map(|p| format!("N={n}: {p}")));
            }
            (v, _) if v.is_kernel_failure() => problems.push(format!("N={n}: {}", v.describe())),
            (v, _) => errors.push(format!("N={n}: {}", v.describe())),
        }
    }
    lab.progress(1, 1, "");
    a.push(lab.log("ladder", &log)?);
    let ok = format!(
        "all {} variants at N = {ladder:?}; broken rejected every time",
        Variant::ALL.len()
    );
    gate(lab, &problems, &errors, a, ok);
    Ok(())
}

/// All five variants at the benchmark size in one process.
pub(crate) fn benchmark(lab: &mut Lab<'_>) -> Result<(), LabError> {
    let (n, reps) = (lab.plan().bench_n, lab.plan().bench_reps);
    let child = lab.child(&transpose("all", n, reps), 1)?;
    let a = vec![
        lab.write("benchmark.csv", &child.stdout)?,
        lab.log("benchmark", &child.log)?,
    ];
    match (&child.verdict, row::parse_csv(&child.stdout)) {
        (ChildVerdict::Passed | ChildVerdict::GateFailed { .. }, Ok(rows))
            if rows.len() == Variant::ALL.len() =>
        {
            let detail: Vec<String> = rows
                .iter()
                .filter_map(|r| {
                    r.timing.map(|t| {
                        format!(
                            "{} {:.4} ms {:.0} GB/s",
                            r.variant, t.average_ms, t.effective_gb_s
                        )
                    })
                })
                .collect();
            let ok = format!("all {n} {reps}: {}", detail.join(", "));
            gate(lab, &unexpected(&rows), &[], a, ok);
        }
        (v, _) => lab.step(Status::unusable(v), v.describe(), a),
    }
    Ok(())
}

/// `klab bench` of each round kernel at the benchmark size, and of the plan's further
/// kernels (triad: the roofline's point off the zero-FLOP edge) at their default size.
pub(crate) fn receipts(lab: &mut Lab<'_>) -> Result<(), LabError> {
    let plan = lab.plan().clone();
    let kernels: Vec<&str> = plan
        .round_variants
        .iter()
        .chain(&plan.receipt_kernels)
        .map(String::as_str)
        .collect();
    let children: Vec<Child> = plan
        .round_variants
        .iter()
        .map(|v| (v, Some(plan.bench_n)))
        .chain(plan.receipt_kernels.iter().map(|k| (k, None)))
        .map(|(kernel, n)| Child::Bench {
            kernel: kernel.clone(),
            n,
            samples: BENCH_SAMPLES,
            out: lab.dir.join(format!("benchmark/{kernel}")),
        })
        .collect();
    lab.progress(0, kernels.len() as u64, &kernels.join(", "));
    let outcomes = lab.children_in_turn(&children);
    let mut judged = Judged::default();
    let mut not_started = None;
    for (kernel, child) in kernels.iter().zip(outcomes) {
        match child {
            Ok(child) => judged.receipt(lab, kernel, child),
            // What ran before a child that could not be started is still logged.
            Err(e) => {
                not_started = Some(e);
                break;
            }
        }
    }
    judged.artifacts.push(lab.log("receipts", &judged.log)?);
    if let Some(e) = not_started {
        return Err(e);
    }
    lab.progress(kernels.len() as u64, kernels.len() as u64, "");
    let ok = format!(
        "klab bench for each of {} at N = {} and {} at its default n ({BENCH_SAMPLES} per-launch samples, same-buffer): receipts under benchmark/",
        plan.round_variants.join(", "),
        plan.bench_n,
        plan.receipt_kernels.join(", ")
    );
    gate(lab, &judged.problems, &judged.errors, judged.artifacts, ok);
    Ok(())
}

/// The receipts step's benches as they are judged: the artifacts of those that passed, the
/// kernels' failures, the errors, and the step's log.
#[derive(Default)]
struct Judged {
    artifacts: Vec<String>,
    problems: Vec<String>,
    errors: Vec<String>,
    log: String,
}

impl Judged {
    /// `kernel`'s bench, which ended as `child` said.
    fn receipt(&mut self, lab: &Lab<'_>, kernel: &str, child: ChildOutcome) {
        match &child.result {
            Some(ChildResult::Bench {
                verdict: Verdict::Pass,
                ..
            }) => self.artifacts.extend(
                files_under(&lab.dir, &format!("benchmark/{kernel}"))
                    .into_iter()
                    .filter(|p| p.ends_with(".csv") || p.ends_with("/receipt.json")),
            ),
            _ if child.verdict.is_kernel_failure() => self
                .problems
                .push(format!("{kernel}: {}", child.verdict.describe())),
            _ => self
                .errors
                .push(format!("{kernel}: {}", child.verdict.describe())),
        }
        self.log.push_str(&child.log);
    }
}

/// One `klab rounds` into `rel`: blocks in the lab's isolation and round order, round-level ratios
/// against `baseline` and every kernel's rate against the fastest copy in the rounds.
/// Returns the rounds' summary.txt.
fn rounds_into(
    lab: &mut Lab<'_>,
    rel: &str,
    kernels: &[String],
    baseline: &str,
    n: u64,
) -> Result<String, LabError> {
    let dir = lab.dir.join(rel);
    let rounds = lab.opts.rounds;
    lab.progress(0, 1, &kernels.join(" "));
    let child = Child::Rounds {
        kernels: kernels.to_vec(),
        baseline: baseline.into(),
        n,
        rounds,
        samples: ROUNDS_SAMPLES,
        isolation: lab.opts.isolation,
        order: lab.opts.order,
        out: dir.clone(),
    };
    // The watchdog allows every block its own time, whichever process runs it, and under
    // round isolation each round's settling block too.
    let settling = match lab.opts.isolation {
        Isolation::Round => u64::from(rounds),
        Isolation::Block => 0,
    };
    let blocks =
        u64::from(rounds) * kernels.len() as u64 * u64::from(lab.opts.order.blocks_per_kernel())
            + settling;
    let child = lab.child(&child, blocks + 1)?;
    lab.progress(1, 1, "");
    let log = lab.log(rel, &child.log)?;
    let a: Vec<String> = files_under(&lab.dir, rel)
        .into_iter()
        .filter(|p| !p.starts_with(&format!("{rel}/blocks/")))
        .chain([log])
        .collect();
    match &child.verdict {
        ChildVerdict::Passed => lab.step(
            Status::Ran,
            format!(
                "klab rounds {} --baseline {baseline} --n {n}{}{}: {}; ratios against {baseline} in {rel}/summary.txt{}",
                kernels.join(" "),
                match lab.opts.isolation {
                    Isolation::Block => "",
                    Isolation::Round => " --isolation round",
                },
                match lab.opts.order {
                    RoundOrder::Mirrored => "",
                    RoundOrder::Alternating => " --order alternating",
                },
                rates_line(&dir),
                time_line(&dir)
            ),
            a,
        ),
        ChildVerdict::GateFailed { .. } => lab.step(
            Status::Failed,
            format!("a correctness gate failed in a block; see {rel}/rounds.csv"),
            a,
        ),
        v => lab.step(Status::unusable(v), v.describe(), a),
    }
    Ok(read_text(&dir.join("summary.txt"), Input::ARTIFACT).unwrap_or_default())
}

/// A rounds folder's summary.json, if it reads.
fn rounds_summary(dir: &Path) -> Option<RoundsSummary> {
    read_regular(&dir.join("summary.json"), Input::ARTIFACT)
        .ok()
        .and_then(|b| serde_json::from_slice::<RoundsSummary>(&b).ok())
}

/// Where a rounds folder's time went (`; time: ...`), when its summary says.
fn time_line(dir: &Path) -> String {
    rounds_summary(dir)
        .and_then(|s| Some(format!("; time: {}", s.time?.describe(s.blocks?))))
        .unwrap_or_default()
}

/// Each kernel's median rate and share of the ceiling, from a rounds folder's summary.json.
fn rates_line(dir: &Path) -> String {
    let rates: Vec<String> = rounds_summary(dir)
        .map(|s| s.rates)
        .unwrap_or_default()
        .iter()
        .filter_map(|r| {
            let pct = r.pct_of_ceiling?;
            // The ceiling is the fastest copy in the rounds, not a bound: summary.txt says why
            // a kernel can pass it.
            let above = if r.above_ceiling() {
                ", faster than the copy: see summary.txt"
            } else {
                ""
            };
            Some(format!(
                "{} {:.0} GB/s ({pct:.1}% of ceiling{above})",
                r.kernel, r.median_gb_s?
            ))
        })
        .collect();
    if rates.is_empty() {
        "no rates".into()
    } else {
        rates.join(", ")
    }
}

/// The round kernels at the benchmark size; the table goes to stdout.
pub(crate) fn rounds(lab: &mut Lab<'_>) -> Result<(), LabError> {
    let plan = lab.plan().clone();
    let text = rounds_into(
        lab,
        "rounds",
        &plan.round_variants,
        &plan.rounds_baseline,
        plan.bench_n,
    )?;
    if !text.is_empty() {
        let device = lab
            .machine
            .device
            .as_ref()
            .map(|f| f.describe())
            .unwrap_or_default();
        lab.launcher.print(&format!("{device}\n{text}"));
    }
    Ok(())
}

/// The copy ceilings, cuBLAS and the best transposes in the same rounds.
pub(crate) fn ceilings(lab: &mut Lab<'_>) -> Result<(), LabError> {
    let plan = lab.plan().clone();
    rounds_into(
        lab,
        "ceilings",
        &plan.ceiling_kernels,
        &plan.ceiling_baseline,
        plan.ceiling_n,
    )?;
    Ok(())
}

/// The sanitizer gate: the accepted kernels clean under every tool, the known-broken ones
/// caught by at least one. One `klab sanitize` runs them all, so its `--jobs` spreads every
/// (kernel, tool) run over the cores at once; the verdict is read per kernel from its
/// sanitize.json, since its exit status is 2 whenever a known-broken kernel is rejected.
pub(crate) fn sanitize(lab: &mut Lab<'_>) -> Result<(), LabError> {
    let plan = lab.plan().clone();
    let sanitizer = lab.machine.sanitizer.clone().expect("a declared need");
    let tools: klab_tools::sanitizer::ToolList =
        plan.sanitize_tools.parse().expect("the plan was checked");
    let mut kernels: Vec<String> = Vec::new();
    for k in plan.sanitize_accepted.iter().chain(&plan.sanitize_broken) {
        if !kernels.contains(k) {
            kernels.push(k.clone());
        }
    }
    lab.progress(0, 1, &kernels.join(" "));
    let child = Child::Sanitize {
        kernels: kernels.clone(),
        tools: tools.clone(),
        sanitizer,
        out: lab.dir.join("sanitize"),
    };
    // Each kernel runs once per tool, each under its own watchdog.
    let child = lab.child(&child, (kernels.len() * tools.0.len()) as u64 + 1)?;
    lab.progress(1, 1, "");
    let log = lab.log("sanitize", &child.log)?;
    let a: Vec<String> = files_under(&lab.dir, "sanitize")
        .into_iter()
        .chain([log])
        .collect();
    if !matches!(
        child.verdict,
        ChildVerdict::Passed | ChildVerdict::GateFailed { .. }
    ) {
        lab.step(
            Status::unusable(&child.verdict),
            child.verdict.describe(),
            a,
        );
        return Ok(());
    }
    let records: Vec<SanitizedKernel> =
        read_regular(&lab.dir.join("sanitize/sanitize.json"), Input::ARTIFACT)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
    let record_of = |spec: &str| {
        records
            .iter()
            .find(|r| registry_name_matches(spec, &r.kernel))
    };
    let unrecorded: Vec<&str> = kernels
        .iter()
        .filter(|k| record_of(k).is_none())
        .map(String::as_str)
        .collect();
    if !unrecorded.is_empty() {
        let why = format!(
            "sanitize/sanitize.json has no record of {} ({})",
            unrecorded.join(", "),
            child.verdict.describe()
        );
        lab.step(Status::Error, why, a);
        return Ok(());
    }
    // Each known-broken kernel must be caught by some tool: one caught kernel must not
    // vouch for another that no tool saw.
    let found: Vec<(String, Vec<String>)> = plan
        .sanitize_broken
        .iter()
        .filter_map(|spec| record_of(spec))
        .map(|k| {
            let by = k.found_by().iter().map(|t| t.to_string()).collect();
            (k.kernel.clone(), by)
        })
        .collect();
    let missed: Vec<String> = plan
        .sanitize_broken
        .iter()
        .filter(|spec| record_of(spec).is_some_and(|k| k.found_by().is_empty()))
        .cloned()
        .collect();
    let broken_line = found
        .iter()
        .map(|(k, by)| {
            if by.is_empty() {
                format!("{k}: no sanitizer tool reported it")
            } else {
                format!("{k}: found by {}", by.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    let broken_line = if broken_line.is_empty() {
        "no known-broken kernel in the plan".to_string()
    } else {
        broken_line
    };
    let unclean: Vec<String> = plan
        .sanitize_accepted
        .iter()
        .filter_map(|spec| record_of(spec))
        .filter(|k| !k.clean())
        .map(|k| format!("{}: {}", k.kernel, k.verdict))
        .collect();
    if !unclean.is_empty() {
        let why = format!("an accepted variant is not clean: {}", unclean.join("; "));
        lab.step(Status::Failed, why, a);
    } else if !missed.is_empty() {
        let why = format!(
            "no sanitizer tool caught {}: {broken_line}",
            missed.join(", ")
        );
        lab.step(Status::Failed, why, a);
    } else {
        let ok = format!(
            "{} clean under {} at a ragged and a full-tile size (exact inputs); {broken_line}",
            plan.sanitize_accepted.join(", "),
            plan.sanitize_tools
        );
        lab.step(Status::Ran, ok, a);
    }
    Ok(())
}

/// Nsight Compute: one measured launch per kernel, counters against the address model.
pub(crate) fn profile(lab: &mut Lab<'_>) -> Result<(), LabError> {
    let plan = lab.plan().clone();
    let ncu = lab.machine.ncu.clone().expect("a declared need");
    lab.progress(0, 1, &plan.profile_kernels.join(" "));
    let child = Child::Profile {
        kernels: plan.profile_kernels.clone(),
        n: plan.bench_n,
        ncu,
        out: lab.dir.join("profile"),
    };
    // Per kernel: the version probe, the capture and the import.
    let child = lab.child(&child, plan.profile_kernels.len() as u64 * 3 + 1)?;
    lab.progress(1, 1, "");
    let log = lab.log("profile", &child.log)?;
    let a: Vec<String> = files_under(&lab.dir, "profile")
        .into_iter()
        .chain([log])
        .collect();
    let disagreements = read_text(&lab.dir.join("profile/counters.csv"), Input::ARTIFACT)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("DISAGREES"))
        .count();
    match &child.verdict {
        ChildVerdict::Passed => lab.step(
            Status::Ran,
            format!(
                "ncu on one measured launch of {} at N = {}: bound statements in profile/bound.txt; {disagreements} counter(s) disagree with the prediction (the address model, the useful bytes)",
                plan.profile_kernels.join(", "),
                plan.bench_n
            ),
            a,
        ),
        ChildVerdict::GateFailed { .. } => lab.step(
            Status::Failed,
            format!("a profiled variant failed its correctness check; see {LOGS_DIR}/profile.log"),
            a,
        ),
        v => lab.step(Status::unusable(v), v.describe(), a),
    }
    Ok(())
}

/// The report, built from the run's own lab.json (so it comes after a first record).
pub(crate) fn report(lab: &mut Lab<'_>) {
    let result = klab_report::load(&lab.dir)
        .map(|d| klab_report::render(&d))
        .and_then(|r| klab_report::write(&lab.dir, &r));
    match result {
        Ok(paths) => {
            let a: Vec<String> = paths
                .iter()
                .filter_map(|p| p.strip_prefix(&lab.dir).ok())
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            lab.step(
                Status::Ran,
                "report/index.html (self-contained, SVG plots) and report/report.md, from the steps above".into(),
                a,
            );
        }
        Err(e) => lab.step(Status::Error, e.to_string(), vec![]),
    }
}

/// Whether `kernel` (a name as `klab sanitize` records it) is the kernel the plan names
/// `spec` (an alias, a qualified name or `manifest.toml:name`).
fn registry_name_matches(spec: &str, kernel: &str) -> bool {
    klab_spec::registry::expand_one(spec, klab_spec::registry::Scope::Default)
        .map(|r| r.name() == kernel)
        .unwrap_or(spec == kernel)
}
