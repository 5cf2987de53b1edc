//! `klab lab`: the main job. The transpose lab's investigation end to end into a new
//! `artifacts/run-NN/`: environment and hashes, the address model, the build and its
//! resource report, the boundary ladder, the 4096 benchmark, alternating rounds in
//! separate processes, and a summary. Without a GPU it runs what a CPU can and says
//! which gates it skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context;
use klab_core::artifact::{create_run_dir, sha256_file, sha256_hex, utc_timestamp, write_atomic};
use klab_core::backend::Backend;
use klab_core::device::{resources_csv, DeviceFacts, KernelResources};
use klab_core::model::{ModelParams, ModelReport};
use klab_core::rounds::{self, RoundRow};
use klab_core::row::{self, TransposeRow};
use klab_core::{builtin, Variant};
use klab_cuda::device::Device;
use klab_cuda::gpu::CudaBackend;
use klab_cuda::{nvrtc, probe};
use serde::Serialize;

use crate::child::{ChildCmd, ChildRun};
use crate::cli::{
    BenchArgs, LabArgs, ProfileArgs, RoundsArgs, SanitizeArgs, TimingArgs, TransposeArgs,
};
use crate::cmd::gpu;
use crate::{EXIT_ERROR, EXIT_GATE_FAILED};
use klab_core::child::{ChildResult, Verdict};
use klab_core::registry::{self, Scope};
use klab_core::sanitize::SanitizedKernel;
use klab_core::schema::{LabArtifact, LabPlan, LabRecord, LabStep, RoundsSummary};

#[derive(Debug, Serialize)]
struct Step {
    name: &'static str,
    /// `ran`, `failed` (a gate failed), `error` (could not run), `skipped`.
    status: &'static str,
    detail: String,
    artifacts: Vec<String>,
}

struct Lab {
    dir: PathBuf,
    steps: Vec<Step>,
    gate_failed: bool,
    error: bool,
}

/// The steps that need a GPU, in the order the lab runs them.
const GPU_STEPS: [&str; 9] = [
    "ladder",
    "benchmark",
    "rounds",
    "receipts",
    "engine-rounds",
    "summary",
    "sanitize",
    "profile",
    "ceilings",
];

/// A progress bar on stderr for a long step, hidden when stderr is not a terminal.
fn progress(len: u64, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let target = if std::io::stderr().is_terminal() {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    };
    let bar = indicatif::ProgressBar::with_draw_target(Some(len), target);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "klab lab: {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(what.to_string());
    bar
}

impl Lab {
    fn skip_gpu_steps(&mut self, why: &str) {
        for name in GPU_STEPS {
            self.step(name, "skipped", why.to_string(), vec![]);
        }
    }

    fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> anyhow::Result<String> {
        let path = self.dir.join(name);
        write_atomic(&path, bytes.as_ref())
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(name.to_string())
    }

    fn step(
        &mut self,
        name: &'static str,
        status: &'static str,
        detail: String,
        artifacts: Vec<String>,
    ) {
        let mark = match status {
            "ran" => "ok",
            "skipped" => "SKIPPED",
            "failed" => "GATE FAILED",
            _ => "ERROR",
        };
        eprintln!("klab lab: [{mark}] {name}: {detail}");
        self.gate_failed |= status == "failed";
        self.error |= status == "error";
        self.steps.push(Step {
            name,
            status,
            detail,
            artifacts,
        });
    }
}

/// Every lab step runs in its own process under the watchdog (`--timeout`, per process).
fn run_child(cmd: ChildCmd, timeout_s: u64) -> anyhow::Result<ChildRun> {
    cmd.run(std::time::Duration::from_secs(timeout_s), false)
}

fn transpose_child(variant: &str, n: u64, reps: u32, args: &LabArgs) -> ChildCmd {
    ChildCmd::Transpose(TransposeArgs {
        variant: variant.into(),
        n: n.to_string(),
        reps: reps.to_string(),
        timeout: args.timeout,
        in_process: true,
        device: args.device,
    })
}

/// `klab bench --in-process` of one kernel into `out`.
fn bench_child(kernel: &str, n: Option<u64>, out: PathBuf, args: &LabArgs) -> ChildCmd {
    ChildCmd::Bench(BenchArgs {
        kernel: kernel.into(),
        n,
        timing: TimingArgs {
            samples: 200,
            ..default_timing()
        },
        rounds: 1,
        out: Some(out),
        claim: None,
        timeout: args.timeout,
        in_process: true,
        device: args.device,
    })
}

/// `klab rounds` of `kernels` (ratios against `baseline`) into `out`.
fn rounds_child(
    kernels: &[&str],
    baseline: &str,
    n: u64,
    rounds: u32,
    out: PathBuf,
    args: &LabArgs,
) -> ChildCmd {
    ChildCmd::Rounds(RoundsArgs {
        kernels: kernels.iter().map(|k| k.to_string()).collect(),
        baseline: Some(baseline.into()),
        n: Some(n),
        timing: TimingArgs {
            samples: 100,
            ..default_timing()
        },
        rounds,
        out: Some(out),
        seed: crate::cli::BOOTSTRAP_SEED,
        timeout: args.timeout,
        device: args.device,
    })
}

/// The timing options' defaults, as the command line gives them.
fn default_timing() -> TimingArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct Only {
        #[command(flatten)]
        timing: TimingArgs,
    }
    Only::parse_from(["klab"]).timing
}

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

pub fn run(args: LabArgs) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("locating the klab binary")?;
    let plan = load_plan(args.plan.as_deref())?;
    let variants = plan_variants(&plan)?;
    let (bench_n, bench_reps) = (plan.bench_n, plan.bench_reps);
    let started = utc_timestamp();
    let dir = create_run_dir(&args.out)
        .with_context(|| format!("creating a run folder under {}", args.out.display()))?;
    eprintln!("klab lab: writing {}", dir.display());
    let mut lab = Lab {
        dir,
        steps: Vec::new(),
        gate_failed: false,
        error: false,
    };

    // 1. Environment and hashes.
    let device = Device::open(args.device);
    let facts: Option<DeviceFacts> = device.as_ref().ok().map(|d| d.facts().clone());
    let env = serde_json::json!({
        "klab_version": env!("CARGO_PKG_VERSION"),
        "klab_binary": exe.display().to_string(),
        "driver_loadable": probe::driver_present(),
        "nvrtc_version": nvrtc::version().ok(),
        "device": facts,
        "device_error": device.as_ref().err().map(|e| e.to_string()),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
    });
    let mut artifacts = vec![
        lab.write(
            "environment.json",
            serde_json::to_string_pretty(&env)? + "\n",
        )?,
        // What the steps below run, written before any of them.
        lab.write("plan.json", serde_json::to_string_pretty(&plan)? + "\n")?,
    ];
    let binary_sha = sha256_file(&exe).context("hashing the klab binary")?;
    artifacts.push(lab.write(
        "source.sha256",
        format!(
            "{}  {}\n{}  klab (binary, {})\n",
            sha256_hex(builtin::TRANSPOSE_SOURCE.as_bytes()),
            builtin::TRANSPOSE_PATH,
            binary_sha,
            exe.display()
        ),
    )?);
    let smi = ["-L", ""].iter().map(|a| {
        let argv: Vec<&str> = if a.is_empty() { vec![] } else { vec![*a] };
        Command::new("nvidia-smi").args(&argv).output()
    });
    let mut smi_text = String::new();
    for (a, out) in ["nvidia-smi -L", "nvidia-smi"].iter().zip(smi) {
        match out {
            Ok(o) => smi_text.push_str(&format!("$ {a}\n{}\n", String::from_utf8_lossy(&o.stdout))),
            Err(e) => smi_text.push_str(&format!("$ {a}\n(not available: {e})\n")),
        }
    }
    artifacts.push(lab.write("nvidia-smi.txt", smi_text)?);
    let detail = match &device {
        Ok(d) => d.facts().describe(),
        Err(e) => format!("no GPU: {e}"),
    };
    lab.step("environment", "ran", detail, artifacts);

    // 2. The CPU address model.
    match ModelReport::build(ModelParams::default()) {
        Ok(report) => {
            let a = vec![
                lab.write("model.txt", report.render_text())?,
                lab.write("model.json", serde_json::to_string_pretty(&report)? + "\n")?,
            ];
            if report.coverage_ok() {
                lab.step("model", "ran", "tiled mapping proven for the ladder and 4096; banks, sectors and per-variant predictions written".into(), a);
            } else {
                lab.step(
                    "model",
                    "failed",
                    "the tiled mapping proof failed; see model.txt".into(),
                    a,
                );
            }
        }
        Err(e) => lab.step("model", "error", e.to_string(), vec![]),
    }

    // 3. Build: NVRTC compile and resource report.
    let arch = facts
        .as_ref()
        .map(|f| f.arch())
        .unwrap_or_else(|| nvrtc::DEFAULT_ARCH.to_string());
    let compiled = if probe::nvrtc_present() {
        match gpu::compile(&arch) {
            Ok(c) => Some(c),
            Err(e) => {
                lab.step("build", "error", format!("{e:#}"), vec![]);
                None
            }
        }
    } else {
        lab.step(
            "build",
            "skipped",
            "NVRTC not found: kernels not compiled, resources unknown".into(),
            vec![],
        );
        None
    };
    let mut device = device.ok();
    if let Some(c) = &compiled {
        let mut a = vec![lab.write(
            "build.txt",
            format!(
                "program: {} (source sha256 {})\narch: {}\noptions: {}\nNVRTC: {}\ncache: {}\ncompile ms: {:.1}\n\n{}\n",
                c.program,
                c.source_sha256,
                c.arch,
                c.options.join(" "),
                c.nvrtc_version,
                if c.from_cache { "hit" } else { "compiled now" },
                c.compile_ms,
                c.log.trim_end()
            ),
        )?];
        let (resources, source): (Vec<KernelResources>, &str) = match device.take() {
            Some(d) => match resource_report(d, c) {
                Ok(r) => (r, "function attributes of the loaded module"),
                Err(e) => {
                    lab.step("build", "error", format!("{e:#}"), a);
                    return finish(lab, &started, facts.as_ref());
                }
            },
            None => (c.ptxas_resources(), "ptxas log (no device)"),
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
        lab.step(
            "build",
            "ran",
            format!(
                "{} for {arch} ({source}): {}",
                c.program,
                summary.join(", ")
            ),
            a,
        );
    }

    let Some(f) = facts.clone() else {
        lab.skip_gpu_steps("no CUDA device: correctness and timing gates need a GPU");
        return finish(lab, &started, None);
    };
    if compiled.is_none() {
        lab.skip_gpu_steps("kernels were not built");
        return finish(lab, &started, Some(&f));
    }

    // 4. Boundary ladder: every variant at sizes no block divides, plus block-exact ones.
    let mut log = String::new();
    let mut a = Vec::new();
    let mut problems = Vec::new();
    let mut runtime_errors = Vec::new();
    let bar = progress(plan.ladder.len() as u64, "ladder");
    for &n in &plan.ladder {
        bar.set_message(format!("N = {n}"));
        let child = run_child(transpose_child("all", n, 1, &args), args.timeout)?;
        bar.inc(1);
        log.push_str(&child.log_block());
        a.push(lab.write(&format!("check-{n}.csv"), &child.stdout)?);
        match (child.status(), row::parse_csv(&child.stdout)) {
            (Some(0 | 2), Ok(rows)) if rows.len() == Variant::ALL.len() => {
                problems.extend(unexpected(&rows).into_iter().map(|p| format!("N={n}: {p}")));
            }
            _ => runtime_errors.push(format!("N={n}: {}", child.failure())),
        }
    }
    bar.finish_and_clear();
    a.push(lab.write("check-launches.txt", &log)?);
    ladder_step(
        &mut lab,
        "ladder",
        &problems,
        &runtime_errors,
        a,
        format!(
            "all {} variants at N = {:?}; broken rejected every time",
            Variant::ALL.len(),
            plan.ladder
        ),
    );

    // 5. Benchmark: all five at 4096 x 100 in one process.
    let child = run_child(
        transpose_child("all", bench_n, bench_reps, &args),
        args.timeout,
    )?;
    let a = vec![
        lab.write("benchmark.csv", &child.stdout)?,
        lab.write("benchmark-launches.txt", child.log_block())?,
    ];
    match (child.status(), row::parse_csv(&child.stdout)) {
        (Some(0 | 2), Ok(rows)) if rows.len() == Variant::ALL.len() => {
            let p = unexpected(&rows);
            let detail = rows
                .iter()
                .filter_map(|r| {
                    r.timing.map(|t| {
                        format!(
                            "{} {:.4} ms {:.0} GB/s",
                            r.variant, t.average_ms, t.effective_gb_s
                        )
                    })
                })
                .collect::<Vec<_>>()
                .join(", ");
            ladder_step(
                &mut lab,
                "benchmark",
                &p,
                &[],
                a,
                format!("all {bench_n} {bench_reps}: {detail}"),
            );
        }
        _ => lab.step("benchmark", "error", child.failure(), a),
    }

    // 6. Rounds: each variant in its own process, order alternating by round.
    let mut rows = Vec::new();
    let mut log = String::new();
    let mut problems = Vec::new();
    let mut runtime_errors = Vec::new();
    let bar = progress(u64::from(args.rounds) * variants.len() as u64, "rounds");
    for round in 1..=args.rounds {
        for (position, v) in rounds::alternating_order(round, &variants)
            .iter()
            .enumerate()
        {
            bar.set_message(format!("round {round} {v}"));
            bar.inc(1);
            let child = run_child(
                transpose_child(v.name(), bench_n, bench_reps, &args),
                args.timeout,
            )?;
            log.push_str(&format!("# round {round} position {position}\n"));
            log.push_str(&child.log_block());
            match (child.status(), row::parse_csv(&child.stdout)) {
                (Some(0 | 2), Ok(mut parsed)) if parsed.len() == 1 => {
                    let r = parsed.remove(0);
                    problems.extend(
                        unexpected(std::slice::from_ref(&r))
                            .into_iter()
                            .map(|p| format!("round {round}: {p}")),
                    );
                    rows.push(RoundRow {
                        round,
                        position: position as u32,
                        row: r,
                    });
                }
                _ => runtime_errors.push(format!("round {round} {v}: {}", child.failure())),
            }
        }
    }
    bar.finish_and_clear();
    let a = vec![
        lab.write("repeated-benchmark.csv", rounds::rounds_csv(&rows))?,
        lab.write("repeated-launches.txt", &log)?,
    ];
    let order: Vec<&str> = variants.iter().map(|v| v.name()).collect();
    ladder_step(
        &mut lab,
        "rounds",
        &problems,
        &runtime_errors,
        a,
        format!(
            "{} rounds x {} processes ({} / reversed), {bench_n} x {bench_reps} each",
            args.rounds,
            variants.len(),
            order.join(" ")
        ),
    );

    // 6b. The timing engine: a receipt per variant at the benchmark size, then alternating
    // rounds (each block its own process) with round-level ratios against naive.
    let mut a = Vec::new();
    let mut problems = Vec::new();
    let mut errors = Vec::new();
    // The transposes at the benchmark size, and the plan's other kernels (triad: the
    // roofline's point off the zero-FLOP edge) at their own default size.
    let benches: Vec<(&str, Option<u64>)> = variants
        .iter()
        .map(|v| (v.name(), Some(bench_n)))
        .chain(plan.receipt_kernels.iter().map(|k| (k.as_str(), None)))
        .collect();
    for (v, n) in benches {
        let rel = format!("benchmark/{v}");
        let child = run_child(bench_child(v, n, lab.dir.join(&rel), &args), args.timeout)?;
        match &child.result {
            Some(ChildResult::Bench {
                verdict: Verdict::Pass,
                ..
            }) => {
                a.push(format!("{rel}/receipt.json"));
                for e in std::fs::read_dir(lab.dir.join(&rel))? {
                    let name = e?.file_name().to_string_lossy().into_owned();
                    if name.ends_with(".csv") {
                        a.push(format!("{rel}/{name}"));
                    }
                }
            }
            Some(ChildResult::Bench { detail, .. }) => problems.push(format!("{v}: {detail}")),
            _ => errors.push(format!("{v}: {}", child.failure())),
        }
        if lab.dir.join(&rel).is_dir() {
            a.push(lab.write(
                &format!("{rel}/bench.log"),
                format!("{}{}", child.stdout, child.log_block()),
            )?);
        }
    }
    ladder_step(
        &mut lab,
        "receipts",
        &problems,
        &errors,
        a,
        format!(
            "klab bench for each of {} at N = {bench_n} and {} at its default n (200 per-launch samples, same-buffer): receipts under benchmark/",
            plan.round_variants.join(", "),
            plan.receipt_kernels.join(", ")
        ),
    );
    let rounds_dir = lab.dir.join("rounds");
    let names: Vec<&str> = variants.iter().map(|v| v.name()).collect();
    let child = run_child(
        rounds_child(
            &names,
            &plan.rounds_baseline,
            bench_n,
            args.rounds,
            rounds_dir.clone(),
            &args,
        ),
        args.timeout * (u64::from(args.rounds) * names.len() as u64 * 2 + 1),
    )?;
    let mut a = Vec::new();
    if rounds_dir.is_dir() {
        for name in ["rounds.csv", "summary.txt", "summary.json", "rounds.log"] {
            if rounds_dir.join(name).is_file() {
                a.push(format!("rounds/{name}"));
            }
        }
        for &v in &variants {
            let r = format!("rounds/{}.receipt.json", v.name());
            if lab.dir.join(&r).is_file() {
                a.push(r);
            }
        }
    }
    let engine_summary =
        std::fs::read_to_string(rounds_dir.join("summary.txt")).unwrap_or_default();
    match child.status() {
        Some(0) => lab.step(
            "engine-rounds",
            "ran",
            format!("klab rounds {} --baseline {}: ABBA blocks in separate processes, per-variant receipts under rounds/", order_names(&variants), plan.rounds_baseline),
            a,
        ),
        Some(2) => lab.step("engine-rounds", "failed", "a correctness gate failed in a block; see rounds/rounds.csv".into(), a),
        _ => lab.step("engine-rounds", "error", child.failure(), a),
    }

    // 7. Summary.
    let summaries = rounds::summarize(&rows, Variant::Copy.name(), Some(f.theoretical_peak_gb_s()));
    let table = rounds::render_table(&summaries);
    let header = format!(
        "{}\nN = {bench_n}, {bench_reps} launches per timed batch (one event pair), 5 warmups, same buffers (warm), \
{} rounds in separate processes, order alternating; quantiles: {}; % copy = median GB/s over copy's median GB/s; \
% peak = median GB/s over the theoretical peak {:.1} GB/s (2 x memory clock x bus width)\n\n",
        f.describe(),
        args.rounds,
        klab_core::stats::QUANTILE_RULE,
        f.theoretical_peak_gb_s()
    );
    let a = vec![
        lab.write("summary.csv", rounds::summary_csv(&summaries))?,
        lab.write("summary.txt", format!("{header}{table}"))?,
    ];
    lab.step(
        "summary",
        "ran",
        "per-variant distributions over rounds".into(),
        a,
    );
    println!("{header}{table}");
    if !engine_summary.is_empty() {
        println!("Timing engine, per-launch samples (rounds/summary.txt):\n{engine_summary}");
    }

    // 8. The sanitizer gate: accepted variants clean, broken caught.
    sanitize_step(&mut lab, &args, &plan)?;
    // 9. Nsight Compute: one measured launch per variant, counters against the model.
    profile_step(&mut lab, &args, &plan)?;
    // 10. The ceilings and the library baseline, in the same rounds as the best variant.
    ceilings_step(&mut lab, &args, &plan)?;
    finish(lab, &started, Some(&f))
}

/// Files under `rel` (recursively), as run-relative paths, sorted.
fn files_under(dir: &Path, rel: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![rel.to_string()];
    while let Some(r) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&r)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = format!("{r}/{}", e.file_name().to_string_lossy());
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(name),
                Ok(t) if t.is_file() => out.push(name),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

fn sanitize_step(lab: &mut Lab, args: &LabArgs, plan: &LabPlan) -> anyhow::Result<()> {
    let Ok(tool) = crate::cmd::sanitize::find_sanitizer(None) else {
        lab.step(
            "sanitize",
            "skipped",
            "compute-sanitizer not found (PATH, /usr/local/cuda/bin): the sanitizer gate did not run".into(),
            vec![],
        );
        return Ok(());
    };
    let bar = progress(2, "sanitize");
    let mut runs = Vec::new();
    for (rel, kernels) in [
        ("sanitize", &plan.sanitize_accepted),
        ("sanitize-broken", &plan.sanitize_broken),
    ] {
        bar.set_message(kernels.join(" "));
        let cmd = ChildCmd::Sanitize(SanitizeArgs {
            kernels: kernels.iter().map(|k| k.to_string()).collect(),
            tools: plan.sanitize_tools.parse()?,
            sanitizer: Some(tool.clone()),
            timeout: args.timeout,
            out: Some(lab.dir.join(rel)),
            device: args.device,
        });
        // Each kernel runs once per tool, each under its own watchdog.
        let runs_of = (kernels.len() * plan.sanitize_tools.split(',').count()) as u64;
        let child = run_child(cmd, args.timeout * (runs_of + 1))?;
        bar.inc(1);
        if lab.dir.join(rel).is_dir() {
            lab.write(
                &format!("{rel}/sanitize.log"),
                format!("{}{}", child.stdout, child.log_block()),
            )?;
        }
        runs.push((rel, child));
    }
    bar.finish_and_clear();
    let mut a = files_under(&lab.dir, "sanitize");
    a.extend(files_under(&lab.dir, "sanitize-broken"));
    let (accepted, broken) = (&runs[0].1, &runs[1].1);
    // Verdicts come from the sanitize.json files the children wrote, never from their prose.
    let kernels_of = |rel: &str| -> Vec<SanitizedKernel> {
        std::fs::read(lab.dir.join(rel).join("sanitize.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    };
    let caught_by: Vec<String> = kernels_of("sanitize-broken")
        .iter()
        .flat_map(|k| k.found_by())
        .map(|t| t.to_string())
        .collect();
    let broken_line = if caught_by.is_empty() {
        "broken: no sanitizer tool reported it".to_string()
    } else {
        format!("broken: found by {}", caught_by.join(", "))
    };
    let unclean: Vec<String> = kernels_of("sanitize")
        .iter()
        .filter(|k| !k.verdict.starts_with("CLEAN"))
        .map(|k| format!("{}: {}", k.kernel, k.verdict))
        .collect();
    match (accepted.status(), broken.status()) {
        (Some(0), Some(2)) if !caught_by.is_empty() => lab.step(
            "sanitize",
            "ran",
            format!(
                "{} clean under {} at a ragged and a full-tile size; {broken_line}",
                plan.sanitize_accepted.join(", "),
                plan.sanitize_tools
            ),
            a,
        ),
        (Some(0), Some(2)) => lab.step(
            "sanitize",
            "failed",
            format!("no sanitizer tool caught the known-broken variant: {broken_line}"),
            a,
        ),
        (Some(2), _) => lab.step(
            "sanitize",
            "failed",
            format!("an accepted variant is not clean: {}", unclean.join("; ")),
            a,
        ),
        _ => lab.step(
            "sanitize",
            "error",
            format!("{} / {}", accepted.failure(), broken.failure()),
            a,
        ),
    }
    Ok(())
}

fn profile_step(lab: &mut Lab, args: &LabArgs, plan: &LabPlan) -> anyhow::Result<()> {
    let bench_n = plan.bench_n;
    let Some(ncu) = klab_tools::ncu::locate_ncu(None) else {
        lab.step(
            "profile",
            "skipped",
            "Nsight Compute (ncu) not found (PATH, /usr/local/cuda/bin): no counters, no bound statements".into(),
            vec![],
        );
        return Ok(());
    };
    let bar = progress(1, "profile");
    bar.set_message(plan.profile_kernels.join(" "));
    let cmd = ChildCmd::Profile(ProfileArgs {
        kernels: plan.profile_kernels.iter().map(|k| k.to_string()).collect(),
        n: Some(bench_n),
        ncu: Some(ncu),
        out: Some(lab.dir.join("profile")),
        timeout: args.timeout,
        device: args.device,
        ..profile_defaults()
    });
    let child = run_child(
        cmd,
        args.timeout * (plan.profile_kernels.len() as u64 * 3 + 1),
    )?;
    bar.finish_and_clear();
    if lab.dir.join("profile").is_dir() {
        lab.write(
            "profile/profile.log",
            format!("{}{}", child.stdout, child.log_block()),
        )?;
    }
    let a = files_under(&lab.dir, "profile");
    let disagreements = std::fs::read_to_string(lab.dir.join("profile/counters.csv"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("DISAGREES"))
        .count();
    match child.status() {
        Some(0) => lab.step(
            "profile",
            "ran",
            format!(
                "ncu on one measured launch of {} at N = {bench_n}: bound statements in profile/bound.txt; {disagreements} counter(s) disagree with the address model",
                plan.profile_kernels.join(", ")
            ),
            a,
        ),
        Some(2) => lab.step(
            "profile",
            "failed",
            "a profiled variant failed its correctness check; see profile/profile.log".into(),
            a,
        ),
        _ => lab.step("profile", "error", child.failure(), a),
    }
    Ok(())
}

fn ceilings_step(lab: &mut Lab, args: &LabArgs, plan: &LabPlan) -> anyhow::Result<()> {
    let rounds = args.rounds;
    if !probe::cublas_present() {
        lab.step(
            "ceilings",
            "skipped",
            "libcublas could not be loaded: no cuBLAS sgeam baseline, so no ceilings step".into(),
            vec![],
        );
        return Ok(());
    }
    let bar = progress(1, "ceilings");
    bar.set_message(plan.ceiling_kernels.join(" "));
    let child = run_child(
        rounds_child(
            &plan
                .ceiling_kernels
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            &plan.ceiling_baseline,
            plan.ceiling_n,
            rounds,
            lab.dir.join("ceilings"),
            args,
        ),
        args.timeout * (u64::from(rounds) * plan.ceiling_kernels.len() as u64 * 2 + 1),
    )?;
    bar.finish_and_clear();
    if lab.dir.join("ceilings").is_dir() {
        lab.write(
            "ceilings/ceilings.log",
            format!("{}{}", child.stdout, child.log_block()),
        )?;
    }
    let a: Vec<String> = files_under(&lab.dir, "ceilings")
        .into_iter()
        .filter(|p| !p.starts_with("ceilings/blocks/"))
        .collect();
    let rates: Vec<String> = std::fs::read(lab.dir.join("ceilings/summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<RoundsSummary>(&b).ok())
        .map(|s| s.rates)
        .unwrap_or_default()
        .iter()
        .filter_map(|r| {
            Some(format!(
                "{} {:.0} GB/s ({:.1}% of ceiling)",
                r.kernel, r.median_gb_s?, r.pct_of_ceiling?
            ))
        })
        .collect();
    match child.status() {
        Some(0) => lab.step(
            "ceilings",
            "ran",
            format!(
                "klab rounds {} --baseline {} --n {}: {}; ratios against {} in ceilings/summary.txt",
                plan.ceiling_kernels.join(" "),
                plan.ceiling_baseline,
                plan.ceiling_n,
                rates.join(", "),
                plan.ceiling_baseline
            ),
            a,
        ),
        Some(2) => lab.step(
            "ceilings",
            "failed",
            "a correctness gate failed in a block; see ceilings/rounds.csv".into(),
            a,
        ),
        _ => lab.step("ceilings", "error", child.failure(), a),
    }
    Ok(())
}

fn order_names(variants: &[Variant]) -> String {
    variants
        .iter()
        .map(|v| v.name())
        .collect::<Vec<_>>()
        .join(" ")
}

fn ladder_step(
    lab: &mut Lab,
    name: &'static str,
    problems: &[String],
    errors: &[String],
    a: Vec<String>,
    ok: String,
) {
    if !errors.is_empty() {
        lab.step(name, "error", errors.join("; "), a);
    } else if !problems.is_empty() {
        lab.step(name, "failed", problems.join("; "), a);
    } else {
        lab.step(name, "ran", ok, a);
    }
}

/// Resources from the driver: load the module and read each kernel's attributes.
fn resource_report(
    device: Device,
    compiled: &nvrtc::Compiled,
) -> anyhow::Result<Vec<KernelResources>> {
    let mut backend = CudaBackend::new(device, compiled)?;
    Variant::ALL
        .iter()
        .map(|v| {
            let k = backend.kernel(v.entry())?;
            Ok(backend.resources(&k))
        })
        .collect()
}

fn write_record(lab: &Lab, started: &str, device: Option<&DeviceFacts>) -> anyhow::Result<()> {
    let mut artifacts = Vec::new();
    for s in &lab.steps {
        for name in &s.artifacts {
            let path = lab.dir.join(name);
            artifacts.push(LabArtifact {
                path: name.clone(),
                bytes: Some(std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)),
                sha256: Some(
                    sha256_file(&path).with_context(|| format!("hashing {}", path.display()))?,
                ),
            });
        }
    }
    let record = LabRecord {
        klab_version: Some(env!("CARGO_PKG_VERSION").into()),
        command: std::env::args().collect(),
        started_utc: Some(started.to_string()),
        finished_utc: Some(utc_timestamp()),
        device: device.map(serde_json::to_value).transpose()?,
        steps: lab
            .steps
            .iter()
            .map(|s| LabStep {
                name: s.name.into(),
                status: s.status.into(),
                detail: s.detail.clone(),
                artifacts: s.artifacts.clone(),
            })
            .collect(),
        artifacts,
    };
    lab.write("lab.json", serde_json::to_string_pretty(&record)? + "\n")?;
    Ok(())
}

/// The report is built from the run's own `lab.json`, so it comes after a first record;
/// the record is then written again with the report step and its files hashed.
fn report_step(lab: &mut Lab) {
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
                "report",
                "ran",
                "report/index.html (self-contained, SVG plots) and report/report.md, from the steps above".into(),
                a,
            );
        }
        Err(e) => lab.step("report", "error", e.to_string(), vec![]),
    }
}

fn finish(mut lab: Lab, started: &str, device: Option<&DeviceFacts>) -> anyhow::Result<ExitCode> {
    write_record(&lab, started, device)?;
    report_step(&mut lab);
    write_record(&lab, started, device)?;
    let skipped: Vec<&str> = lab
        .steps
        .iter()
        .filter(|s| s.status == "skipped")
        .map(|s| s.name)
        .collect();
    if !skipped.is_empty() {
        eprintln!("klab lab: skipped gates: {}", skipped.join(", "));
    }
    eprintln!("klab lab: artifacts in {}", lab.dir.display());
    Ok(if lab.error {
        ExitCode::from(EXIT_ERROR)
    } else if lab.gate_failed {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// `klab profile`'s defaults, as the command line gives them.
fn profile_defaults() -> ProfileArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct Only {
        #[command(flatten)]
        profile: ProfileArgs,
    }
    Only::parse_from(["klab", "_"]).profile
}

/// The plan: `--plan FILE`, else the default; checked whole before any step runs.
fn load_plan(path: Option<&Path>) -> anyhow::Result<LabPlan> {
    let (plan, what) = match path {
        None => (LabPlan::default(), "the built-in plan".to_string()),
        Some(p) => {
            let bytes =
                std::fs::read(p).with_context(|| format!("reading the plan {}", p.display()))?;
            let plan: LabPlan = serde_json::from_slice(&bytes)
                .with_context(|| format!("the plan {} is not a lab plan", p.display()))?;
            (plan, format!("the plan {}", p.display()))
        }
    };
    check_plan(&plan).with_context(|| what)?;
    Ok(plan)
}

fn check_plan(plan: &LabPlan) -> anyhow::Result<()> {
    // Transposes take n as an i32.
    let size_ok = |n: u64| (1..=i32::MAX as u64).contains(&n);
    if plan.ladder.is_empty() || !plan.ladder.iter().all(|&n| size_ok(n)) {
        anyhow::bail!("ladder sizes must be at least 1 and at most {}", i32::MAX);
    }
    if !size_ok(plan.bench_n) || !size_ok(plan.ceiling_n) {
        anyhow::bail!(
            "bench_n and ceiling_n must be at least 1 and at most {}",
            i32::MAX
        );
    }
    if plan.bench_reps == 0 {
        anyhow::bail!("bench_reps must be at least 1");
    }
    let variants = plan_variants(plan)?;
    if variants.len() < 2 {
        anyhow::bail!("round_variants: the rounds alternate at least two variants");
    }
    for (i, v) in variants.iter().enumerate() {
        if variants[..i].contains(v) {
            anyhow::bail!("round_variants: '{}' is listed twice", v.name());
        }
    }
    if !plan.round_variants.contains(&plan.rounds_baseline) {
        anyhow::bail!(
            "rounds_baseline '{}' is not one of round_variants",
            plan.rounds_baseline
        );
    }
    if !plan.ceiling_kernels.contains(&plan.ceiling_baseline) {
        anyhow::bail!(
            "ceiling_baseline '{}' is not one of ceiling_kernels",
            plan.ceiling_baseline
        );
    }
    if plan.ceiling_kernels.len() < 2 {
        anyhow::bail!("ceiling_kernels: the rounds alternate at least two kernels");
    }
    // Every kernel resolves now, not halfway through the run.
    for (field, names) in [
        ("receipt_kernels", &plan.receipt_kernels),
        ("sanitize_accepted", &plan.sanitize_accepted),
        ("sanitize_broken", &plan.sanitize_broken),
        ("profile_kernels", &plan.profile_kernels),
        ("ceiling_kernels", &plan.ceiling_kernels),
    ] {
        for n in names {
            registry::expand_one(n, Scope::Default).with_context(|| field.to_string())?;
        }
    }
    if plan.sanitize_accepted.is_empty() || plan.profile_kernels.is_empty() {
        anyhow::bail!("sanitize_accepted and profile_kernels name at least one kernel each");
    }
    let tools: klab_tools::sanitizer::ToolList = plan
        .sanitize_tools
        .parse()
        .map_err(|e| anyhow::anyhow!("sanitize_tools: {e}"))?;
    if tools.0.is_empty() {
        anyhow::bail!("sanitize_tools names no tool");
    }
    Ok(())
}

/// The plan's round variants as the transpose lab's harness variants (copy first).
fn plan_variants(plan: &LabPlan) -> anyhow::Result<Vec<Variant>> {
    let v: Vec<Variant> = plan
        .round_variants
        .iter()
        .map(|n| {
            n.parse::<Variant>()
                .map_err(|_| anyhow::anyhow!("plan: round variant '{n}' is not one of the transpose lab's (copy, naive, tiled, padded)"))
        })
        .collect::<Result<_, _>>()?;
    if v.first() != Some(&Variant::Copy) || v.iter().any(|x| x.known_broken()) {
        anyhow::bail!("plan: round_variants must start with copy (the % of copy reference) and hold no known-broken variant");
    }
    Ok(v)
}
