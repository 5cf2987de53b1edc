//! `klab sweep`: kernels over axes, every point gated and timed with its receipt.
//!
//! The plan ([`klab_evidence::sweep::SweepPlan`]) is written first; each group (one point of
//! the axes, every kernel) runs through [`run_group`]: `klab check --sizes N` per kernel,
//! then `klab bench` per kernel that passed, or one `klab rounds` of them all, each a
//! watched child. The group's record goes to `tasks/G/group.json`, whoever ran it: a
//! worker per GPU here (`--devices`), or a SLURM array task (`klab sweep task DIR G`,
//! written into `sweep.sbatch` by `--slurm`). [`collect`] merges the records, re-checks
//! every receipt as `klab compare` does, and writes the table and the report.

use klab_engine::verify::VerifyPolicy;
use klab_tools::process::Echo;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use klab_core::artifact::{read_regular, utc_timestamp, write_atomic, Input};
use klab_evidence::receipt::Receipt;
use klab_evidence::sweep::{
    self, Axis, DeviceList, Group, GroupRecord, PlannedKernel, PointRecord, PointStatus, SweepFile,
    SweepPlan, SweepTable, TaskProblem, TaskSummary, TimedSpan,
};
use klab_run::child::{ChildResult, ChildVerdict, Verdict};
use klab_spec::registry::Scope;

use klab_engine::declared::ShapeArg;

use crate::child::{ChildCmd, ChildRun};
use crate::cli::{
    BenchArgs, ResolveArgs, RoundsArgs, SweepArgs, SweepCommand, TimingArgs, DEFAULT_BUDGET_S,
};
use crate::output::{self, Format, Report};
use klab_run::folder::output_dir;
use klab_run::kernel::Kernel;
use serde::Serialize;

pub fn run(args: SweepArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    match &args.command {
        Some(SweepCommand::Collect { dir, output }) => {
            return collect_and_report(dir, output.format());
        }
        Some(SweepCommand::Task { dir, group }) => return task(dir, *group, args.device, policy),
        None => {}
    }
    let plan = plan(&args)?;
    let devices = if args.slurm {
        Vec::new()
    } else {
        devices(&args)?
    };
    let dir = output_dir(args.out.as_deref(), "sweep")?;
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    write_json(&dir.join(sweep::PLAN_FILE), &plan)?;
    for g in &plan.groups {
        let t = dir.join(SweepPlan::task_rel(g.id));
        std::fs::create_dir_all(&t).with_context(|| format!("creating {}", t.display()))?;
    }
    let points: usize =
        plan.groups.iter().map(|g| g.regimes.len()).sum::<usize>() * plan.kernels.len();
    if args.slurm {
        return slurm(&args, &plan, &dir);
    }
    eprintln!(
        "klab sweep: {points} points ({} kernels, {} shapes) on {} GPU(s): writing {}",
        plan.kernels.len(),
        plan.groups.len(),
        devices.len(),
        dir.display()
    );
    let bar = crate::cmd::progress_bar("sweep", plan.groups.len() as u64, "groups");
    sweep::run_on_devices(&devices, &plan.groups, |d, g| {
        let r = run_group(&plan, &dir, d, g, policy);
        bar.inc(1);
        bar.suspend(|| match &r {
            Ok(rec) => eprintln!("klab sweep: {}", group_line(rec)),
            Err(e) => eprintln!("klab sweep: group {}: {e:#}", g.id),
        });
    });
    bar.finish_and_clear();
    collect_and_report(&dir, args.output.format())
}

/// What a sweep reports: its table (as sweep.json holds it) and where its files are.
#[derive(serde::Serialize)]
struct SweepReport {
    #[serde(flatten)]
    table: SweepTable,
    table_csv: std::path::PathBuf,
    report: std::path::PathBuf,
}

impl Report for SweepReport {
    fn human(&self) -> String {
        format!(
            "{}table: {}\nreport: {}\n",
            render_text(&self.table),
            self.table_csv.display(),
            self.report.display()
        )
    }

    /// The points, as sweep.csv holds them.
    fn csv(&self) -> anyhow::Result<String> {
        Ok(sweep::points_csv(&self.table.points))
    }
}

/// [`collect`], then the table printed in `format`; the exit code is the table's.
fn collect_and_report(dir: &Path, format: Format) -> anyhow::Result<ExitCode> {
    let table = collect(dir)?;
    let code = table.exit_code();
    let report = SweepReport {
        table,
        table_csv: dir.join("sweep.csv"),
        report: dir.join(klab_report::REPORT_DIR).join("index.html"),
    };
    output::emit(&report, format)?;
    Ok(ExitCode::from(code))
}

/// The plan from the command line or the sweep file, every kernel resolved now.
fn plan(args: &SweepArgs) -> anyhow::Result<SweepPlan> {
    let (specs, axes, baseline, rounds, timing) = match &args.file {
        Some(path) => {
            let f = SweepFile::load(path)?;
            let timing = TimingArgs {
                regime: args.timing.regime,
                timer: f.timer.unwrap_or(args.timing.timer),
                samples: f.samples.unwrap_or(args.timing.samples),
                warmup: match &f.warmup {
                    Some(w) => w
                        .parse()
                        .map_err(|e: String| anyhow::anyhow!("{}: warmup: {e}", path.display()))?,
                    None => args.timing.warmup,
                },
            };
            if timing.samples < 2 {
                bail!("{}: samples must be at least 2", path.display());
            }
            let axes = f.axes(path)?;
            (
                f.kernels.iter().map(|k| beside(path, k)).collect(),
                axes,
                f.baseline.clone(),
                f.rounds.unwrap_or(0),
                timing,
            )
        }
        None => (
            args.kernels.clone(),
            args.axes.clone(),
            args.baseline.clone(),
            args.rounds,
            args.timing.clone(),
        ),
    };
    let resolve = args.resolution.checked(rounds)?;
    let mut axes = axes;
    if !axes.iter().any(|a| matches!(a, Axis::Regime(_))) {
        axes.push(Axis::Regime(vec![timing.regime]));
    }
    let groups = SweepPlan::groups_of(&axes)?;
    let kernels = Kernel::parse_all(&specs, Scope::Default)?;
    if kernels.is_empty() {
        bail!("a sweep needs at least one kernel");
    }
    // Every kernel takes every group's sizes, said now rather than as failed points.
    for k in &kernels {
        for g in &groups {
            match g.one_size() {
                Some(_) if k.size_variable().is_none() => {
                    k.refuse_n_for_declared(Some(1)).context(
                        "the axis n is each kernel's one size variable; sweep this one by its variables (--axis VAR=...)",
                    )?;
                }
                Some(n) => k.refuse_n_for_declared(Some(n))?,
                None => k.check_shape(&ShapeArg(g.shape.clone()))?,
            }
        }
    }
    if rounds > 0 && kernels.len() < 2 {
        bail!("--rounds alternates at least two kernels; give more kernels or leave --rounds out");
    }
    let baseline = match baseline {
        Some(b) => Some(
            kernels
                .iter()
                .find(|k| k.name() == b || k.spec() == b)
                .map(|k| k.name())
                .with_context(|| format!("baseline '{b}' is not one of the kernels"))?,
        ),
        None => None,
    };
    let points: usize = groups.iter().map(|g| g.regimes.len()).sum::<usize>() * kernels.len();
    if points > sweep::MAX_POINTS {
        bail!(
            "{points} points ({} kernels, {} shapes, every regime): at most {} in one sweep",
            kernels.len(),
            groups.len(),
            sweep::MAX_POINTS
        );
    }
    Ok(SweepPlan {
        schema: sweep::PLAN_SCHEMA.into(),
        created_utc: utc_timestamp(),
        klab_version: env!("CARGO_PKG_VERSION").into(),
        kernels: kernels
            .iter()
            .map(|k| PlannedKernel {
                spec: k.spec(),
                name: k.name(),
            })
            .collect(),
        baseline,
        rounds,
        resolve,
        timer: timing.timer,
        samples: timing.samples,
        warmup: timing.warmup,
        timeout_s: args.timeout,
        axes: axes.iter().map(describe_axis).collect(),
        groups,
    })
}

/// A sweep file's kernel: a manifest named by a relative path is the one beside the file
/// (as a manifest's own source paths are), wherever klab runs.
fn beside(file: &Path, spec: &str) -> String {
    let Some(end) = spec.find(".toml").map(|i| i + ".toml".len()) else {
        return spec.to_string();
    };
    let (manifest, rest) = spec.split_at(end);
    let dir = file.parent().unwrap_or(Path::new(""));
    if Path::new(manifest).is_absolute() {
        return spec.to_string();
    }
    format!("{}{rest}", dir.join(manifest).display())
}

fn describe_axis(a: &Axis) -> String {
    match a {
        Axis::Size { var, values } => format!(
            "{var}={}",
            values
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
        Axis::Regime(v) => format!(
            "regime={}",
            v.iter().map(|r| r.name()).collect::<Vec<_>>().join(",")
        ),
    }
}

/// The GPUs of a local sweep, each checked before any folder is made.
fn devices(args: &SweepArgs) -> anyhow::Result<Vec<u32>> {
    let list = match &args.devices {
        None => vec![args.device],
        Some(DeviceList::Ordinals(v)) => v.clone(),
        Some(DeviceList::All) => (0..klab_cuda::device::Device::count()?).collect(),
    };
    for &d in &list {
        klab_cuda::device::Device::check(d)?;
    }
    Ok(list)
}

fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> anyhow::Result<()> {
    write_atomic(path, (serde_json::to_string_pretty(v)? + "\n").as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// `klab sweep task DIR G`: one group of a planned sweep, on this process's device.
fn task(dir: &Path, group: u32, device: u32, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let plan = SweepPlan::load(dir)?;
    let Some(g) = plan.groups.get(group as usize) else {
        bail!(
            "{}: the plan has {} groups; there is no group {group}",
            dir.display(),
            plan.groups.len()
        );
    };
    let rec = run_group(&plan, dir, device, g, policy)?;
    // A SLURM task's log line (its job log takes stderr with stdout); the sweep's report
    // is `klab sweep collect`'s.
    eprintln!("klab sweep task: {}", group_line(&rec));
    let worst = rec.points.iter().map(|p| p.status);
    let code = worst.fold(0u8, |c, s| match s {
        PointStatus::Error | PointStatus::NotRun => 1,
        s if s.is_gate_failure() && c == 0 => 2,
        _ => c,
    });
    Ok(ExitCode::from(code))
}

fn group_line(rec: &GroupRecord) -> String {
    let passed = rec
        .points
        .iter()
        .filter(|p| p.status == PointStatus::Passed)
        .count();
    format!(
        "group {} ({}) on device {}: {passed}/{} passed in {:.1} s",
        rec.group.id,
        rec.group.describe(),
        rec.device,
        rec.points.len(),
        rec.ended_unix_s - rec.started_unix_s
    )
}

/// Run one group and write its record (atomically, last): the checks, then the timing.
/// Each attempt works in a fresh `tasks/G/run-NN/` (a requeued or re-run task never meets
/// an earlier attempt's folders); the record at `tasks/G/group.json` is the last one's.
fn run_group(
    plan: &SweepPlan,
    dir: &Path,
    device: u32,
    g: &Group,
    policy: VerifyPolicy,
) -> anyhow::Result<GroupRecord> {
    let task_dir = dir.join(SweepPlan::task_rel(g.id));
    let tdir = klab_core::artifact::create_run_dir(&task_dir)
        .with_context(|| format!("creating an attempt folder under {}", task_dir.display()))?;
    let rel = format!(
        "{}/{}",
        SweepPlan::task_rel(g.id),
        tdir.file_name().expect("a run folder").to_string_lossy()
    );
    let started = now_unix();
    let mut run = GroupRun {
        plan,
        g,
        device,
        policy,
        timeout: Duration::from_secs(plan.timeout_s),
        log: String::new(),
        spans: Vec::new(),
    };
    // Each kernel is checked once at the group's shape, whatever the regimes it is timed in.
    let (checks, passed) = run.check_each();
    let mut all_points: Vec<PointRecord> = Vec::new();
    for &regime in &g.regimes {
        let mut points: Vec<PointRecord> = plan
            .kernels
            .iter()
            .zip(&checks)
            .map(|(k, (status, detail))| {
                PointRecord::unmeasured(g, &k.name, regime, device, *status, detail.clone())
            })
            .collect();
        let at = Place {
            rel: format!("{rel}/{}", regime.name()),
            dir: tdir.join(regime.name()),
            timing: TimingArgs {
                regime,
                timer: plan.timer,
                samples: plan.samples,
                warmup: plan.warmup,
            },
        };
        if plan.rounds > 0 && passed.len() >= 2 {
            run.time_in_rounds(&at, &passed, &mut points);
        } else {
            run.bench_each(&at, &passed, &mut points);
            let copies: Vec<String> = passed
                .iter()
                .filter(|(_, k)| k.decl.operation == klab_spec::declared::builtin::OpKind::Copy)
                .map(|(_, k)| k.name())
                .collect();
            sweep::place_benched(&mut points, &copies, plan.baseline.as_deref());
        }
        all_points.extend(points);
    }
    write_atomic(&tdir.join("sweep-task.log"), run.log.as_bytes())?;
    let rec = GroupRecord {
        schema: sweep::GROUP_SCHEMA.into(),
        group: g.clone(),
        host: host_name(),
        device,
        started_unix_s: started,
        ended_unix_s: now_unix(),
        timed_spans: run.spans,
        points: all_points,
    };
    write_json(&task_dir.join(sweep::GROUP_FILE), &rec)?;
    Ok(rec)
}

/// One group's run on one device: what its children run with, and what they leave (the
/// log of every child, the spans in which the GPU was timed).
struct GroupRun<'a> {
    plan: &'a SweepPlan,
    g: &'a Group,
    device: u32,
    policy: VerifyPolicy,
    timeout: Duration,
    log: String,
    spans: Vec<TimedSpan>,
}

/// Where one regime's timings go: the folder, its path relative to the sweep's, the method.
struct Place {
    rel: String,
    dir: std::path::PathBuf,
    timing: TimingArgs,
}

/// The point of `name` among `points`.
fn point_of(points: &[PointRecord], name: &str) -> usize {
    points
        .iter()
        .position(|p| p.kernel == name)
        .expect("a point per kernel")
}

impl GroupRun<'_> {
    /// Every kernel's check at the group's shape, each in a child: its status and detail,
    /// and the kernels that passed (with their index in the plan).
    #[allow(clippy::type_complexity)]
    fn check_each(&mut self) -> (Vec<(PointStatus, String)>, Vec<(usize, Kernel)>) {
        let mut checks = Vec::new();
        let mut passed = Vec::new();
        for (i, k) in self.plan.kernels.iter().enumerate() {
            let kernel = match Kernel::parse_in_child(&k.spec) {
                Ok(kernel) => kernel,
                Err(e) => {
                    checks.push((PointStatus::Error, format!("{e:#}")));
                    continue;
                }
            };
            let mut c = crate::cmd::check::child_args(k.spec.clone(), self.device);
            match self.g.one_size() {
                Some(n) => c.sizes = Some(n.to_string()),
                None => c.shape = vec![ShapeArg(self.g.shape.clone())],
            }
            c.timeout = self.plan.timeout_s;
            let run = ChildCmd::Check(c).run(
                self.policy,
                self.timeout + Duration::from_secs(60),
                Echo::Off,
            );
            let (status, detail) = match run {
                Err(e) => (PointStatus::Error, format!("{e:#}")),
                Ok(r) => {
                    self.log.push_str(&r.log_block());
                    match &r.verdict {
                        ChildVerdict::Passed => {
                            passed.push((i, kernel));
                            (PointStatus::Passed, "checked".into())
                        }
                        ChildVerdict::GateFailed { .. } => {
                            (PointStatus::CheckFailed, check_failure(&r))
                        }
                        v if v.is_kernel_failure() => (PointStatus::CheckFailed, v.describe()),
                        v => (PointStatus::Error, v.describe()),
                    }
                }
            };
            checks.push((status, detail));
        }
        (checks, passed)
    }

    /// The kernels that passed, timed together in alternating rounds; each point gets its
    /// kernel's combined receipt, or why there is none.
    fn time_in_rounds(
        &mut self,
        at: &Place,
        passed: &[(usize, Kernel)],
        points: &mut [PointRecord],
    ) {
        let (plan, g) = (self.plan, self.g);
        let rdir = at.dir.join("rounds");
        let names: Vec<String> = passed.iter().map(|(_, k)| k.name()).collect();
        let baseline = plan
            .baseline
            .clone()
            .filter(|b| names.contains(b))
            .unwrap_or_else(|| names[0].clone());
        let blocks = u64::from(plan.rounds) * passed.len() as u64 * 2;
        let cmd = ChildCmd::Rounds(RoundsArgs {
            output: Default::default(),
            kernels: passed.iter().map(|(_, k)| k.spec()).collect(),
            baseline: Some(baseline),
            n: g.one_size(),
            shape: shape_arg(g),
            timing: at.timing.clone(),
            rounds: plan.rounds,
            resolution: ResolveArgs {
                resolve: plan.resolve.map(|r| r.target),
                budget: plan.resolve.map_or(DEFAULT_BUDGET_S, |r| r.budget_s),
            },
            out: Some(rdir.clone()),
            isolation: klab_core::samples::Isolation::default(),
            order: klab_core::samples::RoundOrder::default(),
            timeout: plan.timeout_s,
            device: self.device,
        });
        let t0 = now_unix();
        // Rounds until resolved take their budget and then at most one round more.
        let watchdog = self.timeout * (blocks as u32 + 1)
            + plan.resolve.map_or(Duration::ZERO, |r| {
                Duration::from_secs_f64(r.budget_s) + self.timeout * (passed.len() as u32 * 2)
            });
        let run = cmd.run(self.policy, watchdog, Echo::Off);
        let t1 = now_unix();
        let rel = &at.rel;
        let (failed_as, why) = match &run {
            Ok(r) => {
                self.log.push_str(&r.log_block());
                match &r.verdict {
                    v if v.is_kernel_failure() => (
                        PointStatus::TimingFailed,
                        format!(
                            "a timed block failed: {} (see {rel}/rounds/rounds.csv)",
                            v.describe()
                        ),
                    ),
                    v => (PointStatus::Error, v.describe()),
                }
            }
            Err(e) => (PointStatus::Error, format!("{e:#}")),
        };
        let mut uuid = None;
        for (_, k) in passed {
            let i = point_of(points, &k.name());
            let path = rdir.join(format!("{}.receipt.json", k.name()));
            match path.is_file().then(|| Receipt::load(&path)) {
                Some(Ok(r)) => {
                    uuid = Some(r.hardware.gpu_uuid.clone());
                    fill(&mut points[i], &r, rounds_receipt(rel, &k.name()));
                    points[i].detail = format!("{} rounds", plan.rounds);
                }
                Some(Err(e)) => {
                    points[i].status = PointStatus::Error;
                    points[i].detail = format!("{e}");
                }
                None => {
                    points[i].status = failed_as;
                    points[i].detail = why.clone();
                }
            }
        }
        self.spans.push(TimedSpan {
            what: format!("klab rounds at {} ({})", g.shape_text(), at.timing.regime),
            gpu_uuid: uuid,
            device: self.device,
            started_unix_s: t0,
            ended_unix_s: t1,
        });
    }

    /// Each kernel that passed, timed alone by `klab bench`; its point gets the receipt, or
    /// why there is none.
    fn bench_each(&mut self, at: &Place, passed: &[(usize, Kernel)], points: &mut [PointRecord]) {
        let (plan, g) = (self.plan, self.g);
        for (_, k) in passed {
            let i = point_of(points, &k.name());
            let stem = klab_core::artifact::safe_stem(&k.name());
            let bdir = at.dir.join("bench").join(&stem);
            let cmd = ChildCmd::Bench(BenchArgs {
                output: Default::default(),
                kernel: k.spec(),
                n: g.one_size(),
                shape: shape_arg(g),
                timing: at.timing.clone(),
                rounds: 1,
                out: Some(bdir.clone()),
                claim: None,
                timeout: plan.timeout_s,
                device: self.device,
                klab_binary: None,
            });
            let t0 = now_unix();
            let run = cmd.run(self.policy, self.timeout, Echo::Off);
            let t1 = now_unix();
            let mut uuid = None;
            match run {
                Err(e) => {
                    points[i].status = PointStatus::Error;
                    points[i].detail = format!("{e:#}");
                }
                Ok(r) => {
                    self.log.push_str(&r.log_block());
                    match &r.result {
                        Some(ChildResult::Bench {
                            verdict: Verdict::Pass,
                            ..
                        }) => match Receipt::load(&bdir.join("receipt.json")) {
                            Ok(rec) => {
                                uuid = Some(rec.hardware.gpu_uuid.clone());
                                let at = bench_receipt(&at.rel, &k.name());
                                fill(&mut points[i], &rec, at);
                                points[i].detail = "bench".into();
                            }
                            Err(e) => {
                                points[i].status = PointStatus::Error;
                                points[i].detail = e.to_string();
                            }
                        },
                        _ if r.verdict.is_kernel_failure() => {
                            points[i].status = PointStatus::TimingFailed;
                            points[i].detail = r.verdict.describe();
                        }
                        _ => {
                            points[i].status = PointStatus::Error;
                            points[i].detail = r.verdict.describe();
                        }
                    }
                }
            }
            self.spans.push(TimedSpan {
                what: format!(
                    "klab bench {} at {} ({})",
                    k.name(),
                    g.shape_text(),
                    at.timing.regime
                ),
                gpu_uuid: uuid,
                device: self.device,
                started_unix_s: t0,
                ended_unix_s: t1,
            });
        }
    }
}

/// A receipt's numbers into its point.
fn fill(p: &mut PointRecord, r: &Receipt, rel: String) {
    p.gpu_uuid = Some(r.hardware.gpu_uuid.clone());
    p.median_us = Some(r.result.median_us);
    p.gb_s = Some(r.result.useful_gb_s);
    p.pct_of_peak = Some(r.result.pct_of_peak);
    p.theoretical_peak_gb_s = Some(r.hardware.theoretical_peak_gb_s);
    if let Some(c) = &r.result.rounds {
        p.pct_of_ceiling = c.pct_of_ceiling;
        p.ceiling_gb_s = c.ceiling_gb_s;
        p.ratio_to_baseline = c.ratio_to_baseline;
        p.ratio_interval = c.ratio_interval;
    }
    p.receipt = Some(rel);
}

/// `--shape` for a group that names an operation's size variables (none for `n`).
fn shape_arg(g: &Group) -> Option<ShapeArg> {
    g.one_size().is_none().then(|| ShapeArg(g.shape.clone()))
}

/// The first FAIL line a check printed, else a pointer to the log.
fn check_failure(r: &ChildRun) -> String {
    r.stdout
        .lines()
        .find(|l| l.contains("FAIL") || l.contains("REJECTED"))
        .map(|l| l.trim().to_string())
        .unwrap_or_else(|| "the check failed (see sweep-task.log)".into())
}

/// `--slurm`: the job array, written, then submitted with sbatch (or printed).
fn slurm(args: &SweepArgs, plan: &SweepPlan, dir: &Path) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("locating the klab binary")?;
    let exe = std::path::absolute(&exe).unwrap_or(exe);
    let blocks_per_kernel = if plan.rounds > 0 {
        2 * u64::from(plan.rounds)
    } else {
        1
    };
    // A check per kernel, then its blocks in each regime.
    let regimes = plan
        .groups
        .iter()
        .map(|g| g.regimes.len())
        .max()
        .unwrap_or(1) as u64;
    let worst_s = plan.timeout_s * plan.kernels.len() as u64 * (1 + regimes * blocks_per_kernel);
    let gres = (args.gres != "none").then_some(args.gres.as_str());
    let script = sweep::sbatch_script(&sweep::SlurmJob {
        klab: &exe,
        dir,
        tasks: plan.groups.len() as u32,
        partition: args.partition.as_deref(),
        gres,
        time_limit_min: worst_s.div_ceil(60),
    })
    .map_err(anyhow::Error::msg)?;
    let path = dir.join("sweep.sbatch");
    write_atomic(&path, script.as_bytes())?;
    let mut report = SlurmReport {
        script_path: path.display().to_string(),
        sweep_dir: dir.display().to_string(),
        tasks: plan.groups.len(),
        script: None,
        job_id: None,
    };
    if args.dry_run {
        report.script = Some(script);
        output::emit(&report, args.output.format())?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(sbatch) = klab_tools::process::locate_tool(None, "sbatch", &[]) else {
        bail!(
            "SLURM is not installed here (no sbatch on PATH); the job array is written to {} (submit it with sbatch where SLURM runs)",
            path.display()
        );
    };
    let argv: Vec<std::ffi::OsString> = vec!["--parsable".into(), path.clone().into()];
    // Detached: SLURM passes sbatch's environment to the tasks, which start long after
    // this klab, and must not take themselves for its orphaned children.
    let opts = klab_tools::process::RunOptions {
        detached: true,
        ..klab_tools::process::RunOptions::new(Duration::from_secs(120))
    };
    let out = klab_tools::process::run(&sbatch, &argv, &opts)
        .with_context(|| format!("running {}", sbatch.display()))?;
    if out.exit_code != Some(0) {
        bail!(
            "sbatch refused the job array {} (exit {:?}): {}",
            path.display(),
            out.exit_code,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let id = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap_or("")
        .to_string();
    write_atomic(&dir.join("slurm-job.txt"), format!("{id}\n").as_bytes())?;
    report.job_id = Some(id);
    output::emit(&report, args.output.format())?;
    Ok(ExitCode::SUCCESS)
}

/// What `klab sweep --slurm` reports: the job array's script, written, and either the
/// script itself (`--dry-run`) or the job SLURM gave it.
#[derive(Serialize)]
struct SlurmReport {
    script_path: String,
    sweep_dir: String,
    tasks: usize,
    /// The script, when it was not submitted (`--dry-run`).
    script: Option<String>,
    /// SLURM's job id, when it was submitted.
    job_id: Option<String>,
}

impl Report for SlurmReport {
    fn human(&self) -> String {
        match (&self.script, &self.job_id) {
            (Some(script), _) => format!(
                "{script}# written to {}; nothing submitted (--dry-run). Submit: sbatch {}; then: klab sweep collect {}\n",
                self.script_path, self.script_path, self.sweep_dir
            ),
            (None, id) => format!(
                "submitted SLURM job {}: {} array tasks; when it is done: klab sweep collect {}\n",
                id.as_deref().unwrap_or(""),
                self.tasks,
                self.sweep_dir
            ),
        }
    }
}

/// Merge the task records of `dir` into sweep.json, sweep.csv and the report; every
/// receipt is re-checked first.
pub fn collect(dir: &Path) -> anyhow::Result<SweepTable> {
    let plan = SweepPlan::load(dir)?;
    let mut points = Vec::new();
    let mut tasks = Vec::new();
    let mut problems = Vec::new();
    for g in &plan.groups {
        let rel = format!("{}/{}", SweepPlan::task_rel(g.id), sweep::GROUP_FILE);
        let rec = read_regular(&dir.join(&rel), Input::ARTIFACT)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                serde_json::from_slice::<GroupRecord>(&b).map_err(|e| format!("{rel}: {e}"))
            })
            .and_then(|r| {
                if r.schema != sweep::GROUP_SCHEMA {
                    return Err(format!("{rel}: not a sweep task's record"));
                }
                match r.problem_against(&plan, g) {
                    Some(why) => Err(format!("{rel}: {why}")),
                    None => Ok(r),
                }
            });
        match rec {
            Ok(mut r) => {
                // Words from a file reach the terminal as words, never as its controls.
                r.host = klab_core::text::one_line(&r.host);
                for p in &mut r.points {
                    p.detail = klab_core::text::one_line(&p.detail);
                }
                hold_to_receipts(dir, &plan, g, &mut r.points);
                tasks.push(TaskSummary {
                    group: g.id,
                    host: r.host.clone(),
                    device: r.device,
                    started_unix_s: r.started_unix_s,
                    ended_unix_s: r.ended_unix_s,
                    timed_spans: r.timed_spans.clone(),
                });
                points.extend(r.points);
            }
            Err(why) => {
                let why = format!(
                    "task {} ({}) left no record: {why} (killed, failed before its end, or never ran; see {}/)",
                    g.id,
                    g.describe(),
                    SweepPlan::task_rel(g.id)
                );
                for &regime in &g.regimes {
                    for k in &plan.kernels {
                        points.push(PointRecord::unmeasured(
                            g,
                            &k.name,
                            regime,
                            0,
                            PointStatus::NotRun,
                            "its task left no record".into(),
                        ));
                    }
                }
                problems.push(TaskProblem { group: g.id, why });
            }
        }
    }
    let table = SweepTable {
        schema: sweep::TABLE_SCHEMA.into(),
        plan,
        points,
        tasks,
        task_problems: problems,
    };
    // The report first: a folder that cannot take it leaves the table as it was.
    let report = klab_report::sweep::render(&table);
    klab_report::write(dir, &report)?;
    write_atomic(
        &dir.join("sweep.csv"),
        sweep::points_csv(&table.points).as_bytes(),
    )?;
    write_json(&dir.join("sweep.json"), &table)?;
    Ok(table)
}

/// Hold every point of group `g`'s record to its receipt, as `klab compare` holds a receipt:
/// a point that says it passed must name one; the receipt must check
/// ([`klab_evidence::compare::check`]), stand behind a speedup
/// ([`klab_evidence::compare::require_evidence`]) and be this point's (in the group's task
/// folder, named for the kernel, of the point's regime and shape); and every figure the
/// point shows is taken from it again ([`fill`]; the ratios and ceilings of benched points
/// from the receipts' medians, [`sweep::place_benched`]). The record itself is not hashed:
/// its figures are never trusted.
fn hold_to_receipts(dir: &Path, plan: &SweepPlan, g: &Group, points: &mut [PointRecord]) {
    let mut copies = Vec::new();
    for p in points.iter_mut() {
        let checked = receipt_of(dir, g, p);
        *p = PointRecord {
            status: p.status,
            detail: std::mem::take(&mut p.detail),
            ..PointRecord::unmeasured(g, &p.kernel, p.regime, p.device, p.status, String::new())
        };
        match checked {
            Ok(Some((rec, rel))) => {
                if klab_evidence::receipt::builtin_operation(&rec.workload.operation)
                    == Some(klab_spec::declared::builtin::OpKind::Copy)
                {
                    copies.push(p.kernel.clone());
                }
                fill(p, &rec, rel);
            }
            Ok(None) => {}
            Err(why) => {
                p.status = PointStatus::Error;
                p.detail = format!("its receipt was refused: {why}");
            }
        }
    }
    if plan.rounds == 0 {
        for &regime in &g.regimes {
            let mut at: Vec<PointRecord> = points
                .iter()
                .filter(|p| p.regime == regime)
                .cloned()
                .collect();
            sweep::place_benched(&mut at, &copies, plan.baseline.as_deref());
            for q in at {
                if let Some(p) = points
                    .iter_mut()
                    .find(|p| p.regime == q.regime && p.kernel == q.kernel)
                {
                    *p = q;
                }
            }
        }
    }
}

/// Point `p`'s receipt, checked and its own (see [`hold_to_receipts`]), with its path
/// relative to the sweep folder; `None` for a point that names none and does not say it
/// passed.
fn receipt_of(dir: &Path, g: &Group, p: &PointRecord) -> Result<Option<(Receipt, String)>, String> {
    let Some(rel) = &p.receipt else {
        return match p.status {
            PointStatus::Passed => Err("the point says it passed but names no receipt".into()),
            _ => Ok(None),
        };
    };
    // A record names its receipt inside the sweep folder, never elsewhere, and exactly
    // where the sweep writes it: no `..`, no link to another group's or kernel's.
    let path = klab_core::artifact::resolve_inside(dir, Path::new(rel), Input::RECEIPT)
        .map_err(|e| e.to_string())?;
    let written = std::fs::canonicalize(dir).map(|d| d.join(rel)).ok();
    if !is_receipt_path(rel, g, p.regime, &p.kernel) || written.as_deref() != Some(path.as_path()) {
        return Err(format!(
            "{rel} is not where the sweep writes {}'s receipt of group {} in {}",
            p.kernel, g.id, p.regime
        ));
    }
    let r = klab_evidence::compare::check_as_evidence(&path)
        .map_err(|e| e.to_string())?
        .receipt;
    if r.workload.cache_regime != p.regime {
        return Err(format!(
            "{rel} was timed in {}, the point is {}",
            r.workload.cache_regime, p.regime
        ));
    }
    // The plan's shape: the record's own is not hashed.
    let shape_ok = match g.one_size() {
        Some(n) => r.workload.n == n,
        None => {
            let shape: klab_engine::declared::Shape = g
                .shape
                .iter()
                .map(|(k, v)| (k.clone(), *v as i64))
                .collect();
            r.workload.shape() == klab_engine::declared::describe_shape(&shape)
        }
    };
    if !shape_ok {
        return Err(format!(
            "{rel} was timed at {}, the point is {}",
            r.workload.shape(),
            g.shape_text()
        ));
    }
    Ok(Some((r, rel.clone())))
}

/// Where a group's attempt writes `kernel`'s receipt of one `klab rounds` under `place`
/// (`tasks/G/run-NN/REGIME`).
fn rounds_receipt(place: &str, kernel: &str) -> String {
    format!("{place}/rounds/{kernel}.receipt.json")
}

/// Where a group's attempt writes `kernel`'s receipt of one `klab bench` under `place`.
fn bench_receipt(place: &str, kernel: &str) -> String {
    format!(
        "{place}/bench/{}/receipt.json",
        klab_core::artifact::safe_stem(kernel)
    )
}

/// Whether `rel` is one of the paths [`rounds_receipt`] or [`bench_receipt`] gives for
/// `kernel` in `regime` under an attempt folder of group `g`.
fn is_receipt_path(rel: &str, g: &Group, regime: klab_core::samples::Regime, kernel: &str) -> bool {
    let task = SweepPlan::task_rel(g.id);
    let Some(rest) = rel.strip_prefix(&format!("{task}/")) else {
        return false;
    };
    let Some((attempt, _)) = rest.split_once('/') else {
        return false;
    };
    // An attempt folder is `run-NN`, never `.` or `..`.
    if !attempt.starts_with("run-") || attempt.contains("..") {
        return false;
    }
    let place = format!("{task}/{attempt}/{}", regime.name());
    rel == rounds_receipt(&place, kernel) || rel == bench_receipt(&place, kernel)
}

/// The table as text: one line per point, then the task problems and the GPU overlap check.
fn render_text(t: &SweepTable) -> String {
    let mut s = format!(
        "{:<16} {:>12} {:<14} {:<14} {:>10} {:>9} {:>8}  {}\n",
        "kernel", "shape", "regime", "status", "GB/s", "% ceil", "ratio", "detail"
    );
    let f = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "-".into());
    for p in &t.points {
        let ratio = match (p.ratio_to_baseline, p.ratio_interval) {
            (Some(r), Some([lo, hi])) => format!("{r:.3}x [{lo:.3}-{hi:.3}]"),
            (Some(r), None) => format!("{r:.3}x"),
            _ => "-".into(),
        };
        s.push_str(&format!(
            "{:<16} {:>12} {:<14} {:<14} {:>10} {:>9} {:>8}  {}\n",
            p.kernel,
            sweep::shape_text(&p.shape),
            p.regime.name(),
            p.status.name(),
            f(p.gb_s, 1),
            f(p.pct_of_ceiling, 1),
            ratio,
            p.detail
        ));
    }
    for p in &t.task_problems {
        s.push_str(&format!("MISSING: {}\n", p.why));
    }
    let overlaps = t.overlapping_spans();
    if overlaps.is_empty() {
        let gpus: std::collections::BTreeSet<String> = t
            .tasks
            .iter()
            .flat_map(|x| &x.timed_spans)
            .filter_map(|x| x.gpu_uuid.clone())
            .collect();
        s.push_str(&format!(
            "timed blocks: none overlapped on one GPU ({} GPU(s) in the receipts)\n",
            gpus.len()
        ));
    } else {
        for (a, b) in overlaps {
            s.push_str(&format!(
                "OVERLAP on one GPU: '{}' and '{}'\n",
                a.what, b.what
            ));
        }
    }
    s
}
