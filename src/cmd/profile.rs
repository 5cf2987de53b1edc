//! `klab profile <kernel>...`: Nsight Compute on exactly one measured launch of klab's own
//! launch sequence, the counters set beside the address model's predictions, and seed
//! 000's bound statement filled from them.
//!
//! The parent builds ncu's argument vector (never a shell) around a klab child that runs
//! one kernel's profile work (`klab __child`, [`here`]), whose launch sequence is `timing::profile_sequence`: the launch skip is
//! computed from that same sequence and checked against what the child reports.
//!
//! `klab profile --import FILE [--kernel NAME]...` reads a profile someone else made
//! (`ncu::import_file`: an `.ncu-rep` through ncu, or a raw or details CSV page) and gives
//! every launch in it to the same step a capture ends with, [`read_launch`]: the counters,
//! the rows against the predictions, the bound statement. What differs is only what klab
//! can say around the counters ([`Framing`]): no correctness verdict (klab ran nothing), and
//! predictions only for a launch of a `--kernel` whose grid and block are the ones klab
//! would launch at `--n`.

use crate::output::{self, Report};
use klab_engine::verify::VerifyPolicy;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use klab_core::artifact::{utc_timestamp, write_atomic};
use klab_core::device::Dim3;
use klab_engine::timing::{self, profile_launch_skip};
use klab_engine::workload::Workload;
use klab_model::bound::{
    self, BoundStatement, CounterRow, KernelProfile, Measured, ProfileRecord, RejectedKernel,
    PROFILE_SCHEMA,
};
use klab_model::predict::{predict, VariantPrediction};
use klab_spec::variant::{BLOCK_ROWS, TILE};
use klab_spec::{builtin, Variant};
use klab_tools::ncu::{self, metrics, KernelRecord, MessageLevel, Page, ProfileRequest, RunOutput};

use crate::child::{self, ChildCmd};
use crate::cli::ProfileArgs;
use crate::cmd::Finished;
use crate::{EXIT_ERROR, EXIT_GATE_FAILED};
use klab_run::child::{ChildResult, ProfileChild, ResultsFile};
use klab_run::folder::output_dir;
use klab_run::kernel::Kernel;
use klab_run::session::Session;

pub fn run(args: ProfileArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.import {
        return import_file(&args, path);
    }
    profile_in_children(args, policy)
}

/// The child ncu starts: one kernel's launch sequence.
pub fn here(args: ProfileArgs, policy: VerifyPolicy) -> anyhow::Result<Finished> {
    let [name] = args.kernels.as_slice() else {
        bail!("a profile child runs exactly one kernel");
    };
    child(&args, name, policy)
}

/// ncu over a child per kernel, each profiling klab's own launch sequence.
fn profile_in_children(args: ProfileArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let sections = split_list(&args.sections);
    if sections.is_empty() {
        bail!("--sections: at least one section is needed");
    }
    let mut metrics: Vec<String> = ncu::KLAB_METRICS.iter().map(|s| s.to_string()).collect();
    for m in args.metrics.as_deref().map(split_list).unwrap_or_default() {
        if !metrics.contains(&m) {
            metrics.push(m);
        }
    }
    let kernels = profilable_kernels(&args)?;
    crate::cmd::given_tool("--ncu", args.ncu.as_deref())?;
    let ncu_bin = ncu::locate_ncu(args.ncu.as_deref()).with_context(|| {
        "Nsight Compute (ncu) not found: pass --ncu PATH or put ncu on PATH".to_string()
    })?;
    let exe = std::env::current_exe().context("locating the klab binary")?;
    // No device check here: the device is ncu's child's, and a stand-in ncu (tests/profile.rs)
    // profiles on a machine without one.
    let dir = output_dir(args.out.as_deref(), "profile")?;

    let capture = Capture {
        args: &args,
        policy,
        ncu_bin: &ncu_bin,
        exe: &exe,
        dir: &dir,
        sections: &sections,
        metrics: &metrics,
    };
    // ncu's version is asked beside the captures: a start of ncu of its own that nothing
    // waits on until the record is written.
    let (version, outcomes) = std::thread::scope(|s| {
        let version = s.spawn(|| {
            ncu::run(&ncu::version_argv(&ncu_bin), Duration::from_secs(60))
                .ok()
                .and_then(|o| ncu::parse_version(&o.output).ok())
                .map(|v| v.to_string())
        });
        let jobs = klab_cuda::device::Device::processes_at_once(args.device, args.jobs);
        let outcomes = capture.profile_all(&kernels, jobs);
        (
            version.join().expect("the ncu version thread panicked"),
            outcomes,
        )
    });
    let Tally {
        profiles,
        device,
        rejected,
        gate_failed,
        tool_failed,
    } = Tally::of(&kernels, outcomes);
    let record = ProfileRecord {
        schema: PROFILE_SCHEMA.into(),
        created_utc: utc_timestamp(),
        ncu_version: version,
        device,
        clock_control: "none".into(),
        cache_control: args.cache_control.to_string(),
        sections,
        kernels: profiles,
        rejected,
    };
    write_outputs(&dir, &record)?;
    let report = Profiled {
        record,
        folder: dir.clone(),
    };
    output::emit(&report, args.output.format())?;
    Ok(if tool_failed {
        ExitCode::from(EXIT_ERROR)
    } else if gate_failed {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// The captures' outcomes, in the kernels' order, as the record and the exit code need them.
#[derive(Default)]
struct Tally {
    profiles: Vec<KernelProfile>,
    /// The device the first profiled capture ran on, as ncu names it.
    device: Option<String>,
    rejected: Vec<RejectedKernel>,
    gate_failed: bool,
    tool_failed: bool,
}

impl Tally {
    /// Each error is said on stderr as it is counted.
    fn of(kernels: &[(String, Kernel)], outcomes: Vec<anyhow::Result<Outcome>>) -> Tally {
        let mut t = Tally::default();
        for ((_, kernel), outcome) in kernels.iter().zip(outcomes) {
            match outcome {
                Ok(Outcome::Read(p, on)) => {
                    if t.device.is_none() {
                        t.device = on;
                    }
                    t.profiles.push(*p);
                }
                Ok(Outcome::Rejected(r)) => {
                    t.rejected.push(r);
                    t.gate_failed = true;
                }
                Err(e) => {
                    eprintln!(
                        "klab profile: {}: {}",
                        kernel.name(),
                        one_line(&crate::error_text(&e))
                    );
                    t.tool_failed = true;
                }
            }
        }
        t
    }
}

/// The kernels named, each with its spec, refused before ncu starts when one is named twice,
/// cannot be profiled, or cannot run at the size asked.
fn profilable_kernels(args: &ProfileArgs) -> anyhow::Result<Vec<(String, Kernel)>> {
    let kernels = args
        .kernels
        .iter()
        .map(|k| Kernel::parse(k).map(|kk| (kk.spec(), kk)))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, (_, k)) in kernels.iter().enumerate() {
        if kernels[..i].iter().any(|(_, o)| o.name() == k.name()) {
            bail!("kernel '{}' is listed twice", k.name());
        }
        refuse_unprofilable(k)?;
        k.refuse_n_for_declared(args.n)?;
        k.workload(args.n.unwrap_or_else(|| k.default_n()), None, args.device)?;
    }
    Ok(kernels)
}

/// A profile run's report: its record (as profile.json holds it) and its folder.
#[derive(serde::Serialize)]
struct Profiled {
    #[serde(flatten)]
    record: ProfileRecord,
    folder: std::path::PathBuf,
}

/// Each profile as a block (its bound statement), then the table of counters.
fn render_profiles(kernels: &[KernelProfile]) -> String {
    let mut out = String::new();
    for p in kernels {
        out += &format!(
            "== {} ({}) ==\n{}\n",
            p.kernel,
            p.size_label(),
            p.bound.render()
        );
    }
    out
}

impl Report for Profiled {
    /// A kernel that hung first (its line once came as it was killed), then the profiles.
    fn human(&self) -> String {
        let mut out = String::new();
        for r in self.record.rejected.iter().filter(|r| r.hung) {
            out += &format!("profile {}: FAIL: {}\n", r.kernel, r.reason);
        }
        out += &render_profiles(&self.record.kernels);
        if !self.record.kernels.is_empty() {
            out += &bound::render_table(&self.record.kernels);
            out.push('\n');
        }
        out + &format!("profile: {}\n", self.folder.display())
    }

    /// The counters against the model, as profile.csv holds them.
    fn csv(&self) -> anyhow::Result<String> {
        Ok(bound::table_csv(&self.record.kernels))
    }
}

/// Profiles read from someone's ncu export.
#[derive(serde::Serialize)]
struct ImportedProfiles {
    file: String,
    format: String,
    launches: usize,
    kernels: Vec<KernelProfile>,
}

impl Report for ImportedProfiles {
    fn human(&self) -> String {
        let plural = if self.launches == 1 { "" } else { "es" };
        let mut out = format!(
            "{}: {}, {} profiled launch{plural}\n",
            self.file, self.format, self.launches
        );
        out += &render_profiles(&self.kernels);
        out + &bound::render_table(&self.kernels)
    }

    fn csv(&self) -> anyhow::Result<String> {
        Ok(bound::table_csv(&self.kernels))
    }
}

/// klab profile selects one launch by its entry name, which a library routine does not
/// have and a sequence of several kernels has several of.
fn refuse_unprofilable(k: &Kernel) -> anyhow::Result<()> {
    let launches = k.decl.launches();
    if launches.len() > 1 {
        bail!(
            "'{}' is a sequence of {} launches ({}): klab profile measures one kernel launch against one address model; check, sanitize and bench time the sequence as one unit",
            k.name(),
            launches.len(),
            k.decl.entry
        );
    }
    if klab_spec::manifest::LibraryRoutine::from_entry(&k.decl.entry).is_some() {
        bail!(
            "'{}' is a library routine ({}), not a kernel of {}: klab profile selects one kernel launch by its entry name",
            k.name(),
            k.decl.entry,
            k.manifest.program
        );
    }
    Ok(())
}

fn write_outputs(dir: &Path, record: &ProfileRecord) -> anyhow::Result<()> {
    write_atomic(
        &dir.join("profile.json"),
        (serde_json::to_string_pretty(record)? + "\n").as_bytes(),
    )?;
    let mut text = String::new();
    for k in &record.kernels {
        text.push_str(&format!(
            "== {} ({}) ==\n{}\n",
            k.kernel,
            k.size_label(),
            k.bound.render()
        ));
    }
    text.push_str(&bound::render_table(&record.kernels));
    write_atomic(&dir.join("bound.txt"), text.as_bytes())?;
    write_atomic(
        &dir.join("counters.csv"),
        bound::table_csv(&record.kernels).as_bytes(),
    )?;
    Ok(())
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

fn one_line(s: &str) -> String {
    s.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

/// The address model's prediction, for the built-in transpose variants only: the model
/// describes their source, not an arbitrary user kernel.
fn model_prediction(kernel: &Kernel, n: u64) -> Option<VariantPrediction> {
    if kernel.manifest.source.text() != Some(builtin::TRANSPOSE_SOURCE) {
        return None;
    }
    let v = Variant::ALL
        .into_iter()
        .find(|v| v.entry() == kernel.decl.entry)?;
    predict(v, n, TILE, BLOCK_ROWS).ok()
}

/// A capture that gave a report of a launch whose output was right: what its import needs.
struct Captured {
    stem: String,
    n: u64,
    skip: u64,
    shown: Vec<String>,
    report_rel: String,
    log_rel: String,
    child: ProfileChild,
    measured_failures: u64,
}

/// What one capture reads: a kernel's profile, or its rejection (it hung or its output was
/// wrong).
enum Outcome {
    Read(Box<KernelProfile>, Option<String>),
    Rejected(RejectedKernel),
}

impl Outcome {
    /// How the capture did not deliver, where another capture beside it can be the cause:
    /// a hang (it waited on ncu's serialization behind a kernel that hung) or an error (ncu
    /// or the child failed, e.g. short of memory beside the others). A wrong output is the
    /// kernel's own and is never run again.
    fn may_be_the_neighbours(outcome: &anyhow::Result<Outcome>) -> Option<String> {
        match outcome {
            Ok(Outcome::Rejected(r)) if r.hung => Some(r.reason.clone()),
            Ok(_) => None,
            Err(e) => Some(one_line(&crate::error_text(e))),
        }
    }
}

/// What every capture of one `klab profile` shares.
struct Capture<'a> {
    args: &'a ProfileArgs,
    policy: VerifyPolicy,
    ncu_bin: &'a Path,
    exe: &'a Path,
    dir: &'a Path,
    sections: &'a [String],
    metrics: &'a [String],
}

impl Capture<'_> {
    /// Every kernel's capture, `jobs` at once, the outcomes in the kernels' order. A capture
    /// that hung or failed beside others is run again alone before its outcome counts, so
    /// that one kernel's hang cannot be charged to the kernels that waited behind it.
    fn profile_all(
        &self,
        kernels: &[(String, Kernel)],
        jobs: usize,
    ) -> Vec<anyhow::Result<Outcome>> {
        let mut outcomes =
            klab_core::par::map_jobs(jobs, kernels, |(spec, kernel)| self.profile(spec, kernel));
        if jobs.min(kernels.len()) > 1 {
            for ((spec, kernel), outcome) in kernels.iter().zip(outcomes.iter_mut()) {
                if let Some(why) = Outcome::may_be_the_neighbours(outcome) {
                    let log = self.set_aside(kernel);
                    eprintln!(
                        "klab profile: {}: {why} beside other captures (log {log}); run again alone",
                        kernel.name()
                    );
                    *outcome = self.profile(spec, kernel);
                }
            }
        }
        outcomes
    }

    /// Before a capture runs again: its first log kept as `STEM.beside.log` (returned), and
    /// its report and pages removed, so that nothing of the first attempt is read as the
    /// second's or left in the folder without a record.
    fn set_aside(&self, kernel: &Kernel) -> String {
        let stem = klab_core::artifact::safe_stem(&kernel.name());
        let kept = format!("{stem}.beside.log");
        // A first attempt may have stopped before writing any of these.
        let _ = std::fs::rename(self.dir.join(format!("{stem}.log")), self.dir.join(&kept));
        for ext in ["ncu-rep", "raw.csv", "details.csv"] {
            let _ = std::fs::remove_file(self.dir.join(format!("{stem}.{ext}")));
        }
        kept
    }

    /// One kernel's capture and then its imports.
    fn profile(&self, spec: &str, kernel: &Kernel) -> anyhow::Result<Outcome> {
        Ok(match self.capture(spec, kernel)? {
            Ok(c) => {
                let (p, on) =
                    finish_one(self.args, kernel, self.ncu_bin, self.dir, self.metrics, c)?;
                Outcome::Read(Box::new(p), on)
            }
            Err(rejected) => Outcome::Rejected(rejected),
        })
    }

    /// ncu on one measured launch of `kernel`: its rejection when the kernel hung or its
    /// output was wrong; an error when ncu or the child did not deliver.
    fn capture(
        &self,
        spec: &str,
        kernel: &Kernel,
    ) -> anyhow::Result<Result<Captured, RejectedKernel>> {
        let Capture {
            args,
            policy,
            ncu_bin,
            exe,
            dir,
            sections,
            metrics,
        } = *self;
        let name = kernel.name();
        let n = args.n.unwrap_or_else(|| kernel.default_n());
        let skip = profile_launch_skip(args.warmup);
        let stem = klab_core::artifact::safe_stem(&name);
        let report_rel = format!("{stem}.ncu-rep");
        // ncu starts the klab child and passes its command line through; the child says what
        // it profiled in this file, never on the stdout it shares with ncu and the kernel.
        let results =
            ResultsFile::new().context("making a file for the profiled child's results")?;
        let request = ProfileRequest {
            kernel_name: klab_tools::ncu::kernel_name_filter(&kernel.decl.entry),
            launch_skip: skip,
            launch_count: 1,
            sections: sections.to_vec(),
            metrics: metrics.to_vec(),
            export: dir.join(&report_rel),
            cache_control: args.cache_control,
            program: exe.to_path_buf(),
            args: ChildCmd::ProfiledLaunches(ProfileArgs {
                kernels: vec![spec.to_string()],
                // An operation with several size variables is profiled at its bench shape.
                n: kernel.size_variable().is_some().then_some(n),
                out: None,
                jobs: 1,
                ..args.clone()
            })
            .argv_reporting_to(policy, results.path()),
        };
        let argv = request.argv(ncu_bin);
        // The command as it is logged and saved: the results file is this run's alone (and gone
        // when it ends), so a saved command that names it could not be run again.
        let shown: Vec<String> = child::without_results_file(&argv, results.path());
        eprintln!("klab profile: {name}: {}", child::command_line(&shown));
        let out = ncu::run(&argv, Duration::from_secs(args.timeout))?;
        let log_rel = format!("{stem}.log");
        write_atomic(&dir.join(&log_rel), ncu_log(&shown, &out).as_bytes())?;
        let said = results
            .read()
            .context("reading what the profiled child said")?;
        let (child, measured_failures) =
            match profiled_launch(&out, &said, skip, args.timeout, &log_rel)? {
                Launch::Profiled(child, measured_failures) => (child, measured_failures),
                Launch::Rejected { reason, hung } => {
                    if !hung {
                        eprintln!("klab profile: {name}: {reason}");
                    }
                    return Ok(Err(RejectedKernel {
                        kernel: name,
                        reason,
                        log: log_rel,
                        hung,
                    }));
                }
            };
        if !dir.join(&report_rel).is_file() {
            bail!("ncu wrote no report {report_rel}; see {log_rel}");
        }
        Ok(Ok(Captured {
            stem,
            n,
            skip,
            shown,
            report_rel,
            log_rel,
            child,
            measured_failures,
        }))
    }
}

/// ncu's command line, its output and how it ended, for the kernel's log.
fn ncu_log(shown: &[String], out: &RunOutput) -> String {
    format!(
        "$ {}\n{}{}[exit {}{}]\n",
        child::command_line(shown),
        out.stdout,
        out.stderr,
        out.exit_status
            .map(|s| s.to_string())
            .unwrap_or_else(|| "signal".into()),
        if out.timed_out {
            ", killed by the watchdog"
        } else {
            ""
        }
    )
}

/// What ncu's run of the child says of the profiled launch.
enum Launch {
    /// The child's report and the measured launch's own mismatches (none).
    Profiled(ProfileChild, u64),
    /// No bound statement for this kernel, and why (`hung`: the watchdog ended it).
    Rejected { reason: String, hung: bool },
}

/// Judge ncu's run: a hang, a kernel rejected before the measured launch or a measured
/// launch with a wrong output is the kernel's; a run that did not complete, or measured
/// another launch than ncu skipped to, is an error.
fn profiled_launch(
    out: &RunOutput,
    said: &str,
    skip: u64,
    timeout_s: u64,
    log_rel: &str,
) -> anyhow::Result<Launch> {
    let child = match ChildResult::find(said) {
        Some(ChildResult::Profile { report }) => Some(report),
        _ => None,
    };
    if out.timed_out {
        // A kernel that never finishes is that kernel's failure, not ncu's.
        return Ok(Launch::Rejected {
            reason: format!(
                "hung: killed by the watchdog after {timeout_s} s (ncu and the kernel's process)"
            ),
            hung: true,
        });
    }
    let Some(child) = child else {
        let mut why = error_lines(out);
        // The child's own one-line error (klab prints `error: ...`).
        why.extend(
            out.output
                .lines()
                .filter(|l| l.starts_with("error:"))
                .map(String::from),
        );
        bail!(
            "the profiled run did not complete (exit {:?}): {}; see {log_rel}",
            out.exit_status,
            if why.is_empty() {
                "no error line".to_string()
            } else {
                why.join("; ")
            },
        );
    };
    let Some(measured_failures) = child.measured_failures else {
        let reason = format!(
            "not profiled: {} (validation: {} mismatches{})",
            if child.known_broken {
                "known-broken kernel"
            } else {
                "failed its validation"
            },
            child.before_failures,
            child
                .first_failure
                .as_ref()
                .map(|f| format!(", first {f}"))
                .unwrap_or_default()
        );
        return Ok(Launch::Rejected {
            reason,
            hung: false,
        });
    };
    // The sequence stopped early for a rejected kernel; otherwise it must have made
    // exactly the launches ncu skipped.
    if child.launches_before != skip {
        bail!(
            "the child made {} launches before the measured one but ncu skipped {skip}: the profiled launch would be the wrong one",
            child.launches_before
        );
    }
    if measured_failures > 0 {
        // Counters of a launch that computed the wrong result explain nothing.
        let reason = format!(
            "the profiled launch's own output had {measured_failures} mismatches{}: no bound statement",
            child
                .first_failure
                .as_ref()
                .map(|f| format!(" (first {f})"))
                .unwrap_or_default()
        );
        return Ok(Launch::Rejected {
            reason,
            hung: false,
        });
    }
    Ok(Launch::Profiled(child, measured_failures))
}

/// A capture's imports and reading: the counters beside the predictions, the bound
/// statement, and the device ncu named.
fn finish_one(
    args: &ProfileArgs,
    kernel: &Kernel,
    ncu_bin: &Path,
    dir: &Path,
    metrics: &[String],
    captured: Captured,
) -> anyhow::Result<(KernelProfile, Option<String>)> {
    let Captured {
        stem,
        n,
        skip,
        shown,
        report_rel,
        log_rel,
        child,
        measured_failures,
    } = captured;
    let name = kernel.name();

    // Import: raw page (every metric) and details page (sections as ncu shows them), two
    // ncu processes at once (neither touches the GPU).
    let raw_rel = format!("{stem}.raw.csv");
    let report = dir.join(&report_rel);
    let (raw, details) = std::thread::scope(|s| {
        let details = s.spawn(|| import(ncu_bin, &report, Page::Details, args.timeout));
        let raw = import(ncu_bin, &report, Page::Raw, args.timeout);
        (raw, details.join().expect("the import thread panicked"))
    });
    let raw = raw?;
    write_atomic(&dir.join(&raw_rel), raw.as_bytes())?;
    if let Ok(details) = details {
        write_atomic(&dir.join(format!("{stem}.details.csv")), details.as_bytes())?;
    }
    let parsed = ncu::parse_raw(&raw).with_context(|| format!("reading {raw_rel}"))?;
    let record = match parsed.kernels.as_slice() {
        [one] => one,
        [] => bail!("{raw_rel}: no profiled launch"),
        more => bail!(
            "{raw_rel}: {} launches profiled, expected exactly one",
            more.len()
        ),
    };
    let device = record.device_name().map(String::from);
    let w = kernel.workload(n, None, args.device)?;
    let plan = w.plans()[0];
    let workload = format!(
        "{} {} ({}), block {}x{}x{}, grid {}x{}x{}; the launch after {} validation and {} warmup launches (ncu --launch-skip {skip} --launch-count 1, --clock-control none, --cache-control {})",
        w.dtype(),
        w.operation(),
        name,
        plan.block.x,
        plan.block.y,
        plan.block.z,
        plan.grid.x,
        plan.grid.y,
        plan.grid.z,
        1,
        args.warmup,
        args.cache_control
    );
    let correctness = format!(
        "{} mismatches in the validation launch and {measured_failures} in the profiled launch's own output (poisoned before it), checked against {} ({}); log {log_rel}",
        child.before_failures,
        w.reference(),
        w.rule()
    );
    let reading = read_launch(
        record,
        metrics,
        Framing {
            prediction: model_prediction(kernel, n),
            useful_bytes: Some(w.useful_bytes()),
            workload,
            correctness,
            evidence: report_rel.clone(),
        },
        &format!("{raw_rel} (log {log_rel})"),
    )?;
    // klab asked for these by name: a capture without any of them went wrong (an import
    // reads whatever its author collected).
    let m = &reading.measured;
    if m.compute_pct.is_none()
        && m.dram_pct.is_none()
        && m.global_load_sectors.is_none()
        && m.global_store_sectors.is_none()
    {
        bail!("{raw_rel}: none of the counters the bound statement needs is in the report (SpeedOfLight throughput, global sectors); see {log_rel}");
    }
    let profile = KernelProfile {
        kernel: name,
        entry: kernel.decl.entry.clone(),
        operation: kernel.decl.operation.name().to_string(),
        n: w.n(),
        shape: declared_shape(kernel, &w),
        launch_skip: skip,
        argv: shown,
        report: report_rel,
        raw_csv: raw_rel,
        log: log_rel,
        mismatches: Some(child.before_failures + measured_failures),
        measured: reading.measured,
        absent_metrics: reading.absent_metrics,
        counters: reading.counters,
        bound: reading.bound,
    };
    Ok((profile, device))
}

/// The built-in operations' rows have their n; a declared one's its whole shape.
fn declared_shape(kernel: &Kernel, w: &klab_engine::declared::DeclaredWorkload) -> Option<String> {
    (kernel.decl.operation == klab_spec::declared::builtin::OpKind::Declared)
        .then(|| klab_engine::declared::describe_shape(&w.shape))
}

/// What is set beside one launch's counters and said around them: everything in a bound
/// statement that does not come from the report.
struct Framing {
    /// The address model's prediction (built-in transposes only, [`model_prediction`]).
    prediction: Option<VariantPrediction>,
    /// The useful bytes the operation declares; `None` for a launch of no kernel klab knows.
    useful_bytes: Option<u64>,
    /// The statement's Workload line.
    workload: String,
    /// Its Correctness line.
    correctness: String,
    /// The report its Source evidence line cites.
    evidence: String,
}

/// One launch's counters, read and judged.
struct Reading {
    measured: Measured,
    absent_metrics: Vec<String>,
    counters: Vec<CounterRow>,
    bound: BoundStatement,
}

/// The step after a capture, the one code path for klab's own capture and for `--import`:
/// the counters the bound statement reads, the metrics in `metrics` the report lacks, the
/// rows against the predictions (the address model's, then DRAM traffic against the useful
/// bytes), and the statement. A launch without any counter klab reads is an error naming
/// `source`; one with some gets a statement whose missing figures say `n/a`.
fn read_launch(
    record: &KernelRecord,
    metrics: &[String],
    framing: Framing,
    source: &str,
) -> anyhow::Result<Reading> {
    let measured = measured_from(record);
    if measured == Measured::default() {
        bail!("{source}: none of the counters klab reads is in the report (SpeedOfLight throughput, global sectors and requests, shared bank conflicts, DRAM bytes, launch statistics, occupancy)");
    }
    let absent_metrics: Vec<String> = metrics
        .iter()
        .filter(|m| record.metric(m).is_absent())
        .cloned()
        .collect();
    let mut counters = bound::compare(framing.prediction.as_ref(), &measured);
    // Without a declared operation there are no useful bytes: the row shows the measured
    // traffic as "no prediction".
    counters.push(bound::dram_row(
        framing.useful_bytes.unwrap_or(0),
        &measured,
    ));
    let bound = bound::statement(
        framing.workload,
        framing.correctness,
        &framing.evidence,
        &measured,
        &counters,
    );
    Ok(Reading {
        measured,
        absent_metrics,
        counters,
        bound,
    })
}

/// `--import FILE [--kernel NAME]...`: every launch of the file (or of each `--kernel`'s
/// entry) through [`read_launch`], printed as a capture prints; nothing is written. Exit 0
/// when read (disagreeing rows included, as for a capture), 1 otherwise.
fn import_file(args: &ProfileArgs, path: &Path) -> anyhow::Result<ExitCode> {
    // Names first: a wrong one is refused before the file is read or ncu runs.
    let kernels = args
        .import_kernels
        .iter()
        .map(|k| Kernel::parse(k))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, k) in kernels.iter().enumerate() {
        if kernels[..i].iter().any(|o| o.name() == k.name()) {
            bail!("kernel '{}' is listed twice", k.name());
        }
        refuse_unprofilable(k)?;
        k.refuse_n_for_declared(args.n)?;
    }
    if kernels.is_empty() && args.n.is_some() {
        bail!("--n is the size of a --kernel's launch; without --kernel an imported launch's size is not known");
    }
    let imported = ncu::import_file(path, args.ncu.as_deref(), Duration::from_secs(args.timeout))
        .map_err(|e| match e {
        // These name the file already.
        e @ (ncu::NcuError::File(_)
        | ncu::NcuError::NotAProfile { .. }
        | ncu::NcuError::NcuMissing { .. }) => anyhow::Error::new(e),
        e => anyhow::Error::new(e).context(path.display().to_string()),
    })?;
    let file = path.display().to_string();

    // Which launches, each with the kernel of klab's it is set beside (if any).
    let mut chosen: Vec<(&KernelRecord, Option<&Kernel>)> = Vec::new();
    if kernels.is_empty() {
        chosen.extend(imported.kernels.iter().map(|r| (r, None)));
    }
    for k in &kernels {
        let before = chosen.len();
        chosen.extend(
            imported
                .kernels
                .iter()
                .filter(|r| r.is_named(&k.decl.entry))
                .map(|r| (r, Some(k))),
        );
        if chosen.len() == before {
            bail!(
                "{file}: no launch of {}'s entry {}; the file has {}",
                k.name(),
                k.decl.entry,
                launch_names(&imported.kernels)
            );
        }
    }
    let metrics: Vec<String> = ncu::KLAB_METRICS.iter().map(|s| s.to_string()).collect();
    let mut profiles = Vec::new();
    let names: Vec<String> = chosen
        .iter()
        .map(|(r, k)| k.map_or_else(|| r.function_name().to_string(), Kernel::name))
        .collect();
    for (&(record, kernel), base) in chosen.iter().zip(&names) {
        // Several launches of one kernel: ncu's result ID tells them apart.
        let label = if names.iter().filter(|n| *n == base).count() > 1 {
            format!("{base}#{}", record.id)
        } else {
            base.clone()
        };
        profiles.push(match kernel {
            None => imported_unknown(record, label, &file, &metrics)?,
            Some(k) => imported_as(args, k, record, label, &file, &metrics)?,
        });
    }
    // Printed once every launch was read: a refusal leaves no half-printed profile.
    let report = ImportedProfiles {
        file: file.clone(),
        format: imported.format.describe(),
        launches: imported.kernels.len(),
        kernels: profiles,
    };
    output::emit(&report, args.output.format())?;
    Ok(ExitCode::SUCCESS)
}

/// `naive_k (3), tiled_k (1)`: the function names of a file's launches, with counts.
/// The launches' kernels as [`KernelRecord::is_named`] compares them, each with its count.
fn launch_names(records: &[KernelRecord]) -> String {
    let mut names: Vec<(String, usize)> = Vec::new();
    for r in records {
        let name = r.qualified_name();
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => names.push((name, 1)),
        }
    }
    names
        .iter()
        .map(|(n, c)| format!("{n} ({c})"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn dim3(d: Option<[u32; 3]>) -> Option<Dim3> {
    d.map(|[x, y, z]| Dim3::new(x, y, z))
}

/// A launch's grid and block as the report gives them: their shapes (`128x128x1`), else
/// their counts (`16,384 blocks`, from the launch statistics), else `not given`.
fn launch_shown(record: &KernelRecord) -> (String, String) {
    let one = |dims: Option<[u32; 3]>, total: Option<u64>, what: &str| match (dim3(dims), total) {
        (Some(d), _) => d.to_string(),
        (None, Some(n)) => format!(
            "{} {what}",
            bound::group(i64::try_from(n).unwrap_or(i64::MAX))
        ),
        (None, None) => "not given".to_string(),
    };
    (
        one(record.grid, record.grid_total(), "blocks"),
        one(record.block, record.block_total(), "threads"),
    )
}

/// klab did not run an imported launch: no verdict on its output exists.
const NOT_CHECKED: &str =
    "not checked: an imported report holds counters, not a verdict on the launch's output";

/// An imported launch of no kernel klab knows: what ncu recorded, nothing predicted.
fn imported_unknown(
    record: &KernelRecord,
    label: String,
    file: &str,
    metrics: &[String],
) -> anyhow::Result<KernelProfile> {
    let (grid, block) = launch_shown(record);
    let device = match (record.device_name(), record.device) {
        (Some(name), _) => name.to_string(),
        (None, Some(d)) => format!("device {d}"),
        (None, None) => "device not given".to_string(),
    };
    let workload = format!(
        "{} as ncu recorded it: grid {grid}, block {block}, {device} (CC {}), ncu result {}; klab did not run it, so its operation, size and inputs are not known (--kernel NAME sets a kernel of klab's beside it)",
        record.kernel_name,
        record
            .compute_capability()
            .unwrap_or_else(|| "not given".to_string()),
        record.id
    );
    let reading = read_launch(
        record,
        metrics,
        Framing {
            prediction: None,
            useful_bytes: None,
            workload,
            correctness: NOT_CHECKED.to_string(),
            evidence: file.to_string(),
        },
        file,
    )?;
    Ok(imported_profile(
        record,
        label,
        "unknown",
        0,
        Some(format!(
            "ncu result {}: grid {grid}, block {block}",
            record.id
        )),
        file,
        reading,
    ))
}

/// An imported launch of `kernel`'s entry, set beside its predictions at `--n`: only when it
/// was launched with the grid and block klab launches at that size (the model predicts one
/// size; another size's counters would disagree for no fault of the kernel).
fn imported_as(
    args: &ProfileArgs,
    kernel: &Kernel,
    record: &KernelRecord,
    label: String,
    file: &str,
    metrics: &[String],
) -> anyhow::Result<KernelProfile> {
    let n = args.n.unwrap_or_else(|| kernel.default_n());
    let w = kernel.workload(n, None, args.device)?;
    let plan = w.plans()[0];
    let (grid, block) = (dim3(record.grid), dim3(record.block));
    if grid != Some(plan.grid) || block != Some(plan.block) {
        // Counts alone (a page without the shape columns) do not say the shape the
        // predictions are for: refused as well, with what the page does say.
        let (grid, block) = launch_shown(record);
        bail!(
            "{file}: ncu result {} ({}) was launched with grid {grid}, block {block}, but klab's {} launches grid {}, block {} at {}: give --n the size it was profiled at",
            record.id,
            record.function_name(),
            kernel.name(),
            plan.grid,
            plan.block,
            declared_shape(kernel, &w).unwrap_or_else(|| format!("n = {}", w.n()))
        );
    }
    let workload = format!(
        "{} {} ({}), block {}, grid {}; ncu result {} of {file}, launched with that grid and block; klab did not run it, so which launch of its program it was (validation, warmup, timed) is not known",
        w.dtype(),
        w.operation(),
        kernel.name(),
        plan.block,
        plan.grid,
        record.id
    );
    let correctness = format!(
        "{NOT_CHECKED}; `klab check {}` checks the kernel at this size against {} ({})",
        kernel.name(),
        w.reference(),
        w.rule()
    );
    let reading = read_launch(
        record,
        metrics,
        Framing {
            prediction: model_prediction(kernel, n),
            useful_bytes: Some(w.useful_bytes()),
            workload,
            correctness,
            evidence: file.to_string(),
        },
        file,
    )?;
    Ok(imported_profile(
        record,
        label,
        kernel.decl.operation.name(),
        w.n(),
        declared_shape(kernel, &w),
        file,
        reading,
    ))
}

/// The record of an imported launch: no launch sequence, no log, no mismatch count.
fn imported_profile(
    record: &KernelRecord,
    label: String,
    operation: &str,
    n: u64,
    shape: Option<String>,
    file: &str,
    reading: Reading,
) -> KernelProfile {
    KernelProfile {
        kernel: label,
        entry: record.function_name().to_string(),
        operation: operation.to_string(),
        n,
        shape,
        launch_skip: 0,
        argv: Vec::new(),
        report: file.to_string(),
        raw_csv: String::new(),
        log: String::new(),
        mismatches: None,
        measured: reading.measured,
        absent_metrics: reading.absent_metrics,
        counters: reading.counters,
        bound: reading.bound,
    }
}

/// ncu's `==ERROR==` lines.
fn error_lines(out: &RunOutput) -> Vec<String> {
    out.messages()
        .into_iter()
        .filter(|m| m.level == MessageLevel::Error)
        .map(|m| m.to_string())
        .collect()
}

fn import(ncu_bin: &Path, report: &Path, page: Page, timeout: u64) -> anyhow::Result<String> {
    let argv = ncu::import_argv(ncu_bin, report, page);
    let out = ncu::run(&argv, Duration::from_secs(timeout))?;
    if !out.succeeded() {
        bail!(
            "ncu --import {} failed (exit {:?}): {}",
            report.display(),
            out.exit_status,
            error_lines(&out).join("; ")
        );
    }
    Ok(out.stdout)
}

/// Read the counters the bound statement uses from one launch's record.
pub fn measured_from(r: &KernelRecord) -> Measured {
    // Values are read in base units: an imported report prints `us` and `Mbyte` where a
    // live run prints `ns` and `byte`.
    let get = |name: &str, unit: &str| r.number_in(name, unit);
    let limits = [
        ("registers", "launch__occupancy_limit_registers"),
        ("shared memory", "launch__occupancy_limit_shared_mem"),
        ("warps", "launch__occupancy_limit_warps"),
        ("blocks", "launch__occupancy_limit_blocks"),
        ("barriers", "launch__occupancy_limit_barriers"),
    ];
    Measured {
        // ncu's other names for these (no roll-up suffix, another roll-up of the one launch,
        // a GPU-level twin, a total for its parts) are read through ncu::ALIASES.
        duration_ns: get(metrics::DURATION, "ns"),
        dram_pct: get(metrics::DRAM_THROUGHPUT_PCT, "%"),
        compute_pct: get("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
        memory_pct: get(
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
            "%",
        ),
        l1tex_pct: get("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),
        l2_pct: get("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
        dram_bytes_read: get(metrics::DRAM_BYTES_READ, "byte"),
        dram_bytes_write: get(metrics::DRAM_BYTES_WRITE, "byte"),
        // Read plus write, else the total where the report holds only it.
        dram_bytes: get(metrics::DRAM_BYTES, "byte"),
        global_load_sectors: get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sector"),
        global_load_requests: get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", ""),
        global_store_sectors: get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "sector"),
        global_store_requests: get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", ""),
        shared_load_conflicts: get(
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "",
        ),
        shared_store_conflicts: get(
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
            "",
        ),
        registers_per_thread: get("launch__registers_per_thread", "register/thread"),
        spill_instructions: get("sass__inst_executed_register_spilling", "inst"),
        static_shared_bytes: get("launch__shared_mem_per_block_static", "byte/block"),
        theoretical_occupancy_pct: get("sm__maximum_warps_per_active_cycle_pct", "%"),
        achieved_occupancy_pct: get("sm__warps_active.avg.pct_of_peak_sustained_active", "%"),
        occupancy_limits: limits
            .iter()
            .filter_map(|(label, m)| get(m, "block").map(|v| (label.to_string(), v)))
            .collect(),
    }
}

/// The child: the launch sequence ncu profiles, then one line for the parent.
fn child(args: &ProfileArgs, spec: &str, policy: VerifyPolicy) -> anyhow::Result<Finished> {
    let kernel = Kernel::parse_in_child(spec)?;
    let n = args.n.unwrap_or_else(|| kernel.default_n());
    let w = kernel.workload(n, None, args.device)?;
    let mut session = Session::open(&kernel.manifest, &kernel.decl, args.device, policy)?;
    let k = klab_engine::workload::load_kernels(&mut session.backend, &kernel.decl)?;
    let p = timing::profile_sequence(&mut session.backend, &w, &k, args.warmup)?;
    let report = ProfileChild {
        entry: kernel.decl.entry.clone(),
        n,
        launches_before: p.launches_before,
        before_failures: p.before.failures,
        measured_failures: p.measured.as_ref().map(|m| m.failures),
        known_broken: w.known_broken(),
        first_failure: p
            .before
            .first_failure
            .clone()
            .or_else(|| p.measured.as_ref().and_then(|m| m.first_failure.clone())),
    };
    let ok = p.measured.as_ref().is_some_and(|m| m.passed());
    Ok(Finished::with(ChildResult::Profile { report }, ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_and_trim() {
        assert_eq!(split_list(" a, b,,c "), ["a", "b", "c"]);
        assert!(split_list("").is_empty());
    }

    #[test]
    fn the_model_predicts_only_built_in_transposes() {
        let k = Kernel::parse("naive").unwrap();
        assert!(model_prediction(&k, 64).is_some());
        let k = Kernel::parse("triad_f32").unwrap();
        assert!(model_prediction(&k, 1024).is_none());
    }
}
