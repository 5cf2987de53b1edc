//! `klab check <kernel>...`: the reference-verification gate. Each kernel runs in its own
//! child process under a watchdog, so a kernel that faults (an illegal address poisons the
//! CUDA context) or hangs is reported as that kernel's failure and the others still run.
//! The child's report comes back as its result, in the results file the parent made.

use klab_engine::verify::VerifyPolicy;
use klab_tools::process::Echo;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use klab_engine::check::{self, CheckOptions};
use klab_run::child::{ChildResult, ChildVerdict, Results};
use klab_spec::registry::Scope;

use crate::child::ChildCmd;
use crate::cli::CheckArgs;
use crate::cmd::Finished;
use crate::output::{self, Format, Report};
use crate::{EXIT_ERROR, EXIT_GATE_FAILED};
use klab_run::kernel::Kernel;
use klab_run::session::Session;

/// The arguments of a check child for one kernel, defaults elsewhere.
pub fn child_args(spec: String, device: u32) -> CheckArgs {
    CheckArgs {
        kernels: vec![spec],
        seed: 1,
        sizes: None,
        shape: Vec::new(),
        timeout: 60,
        verbose: false,
        quick: false,
        output: Default::default(),
        plan: false,
        resume_after: 0,
        device,
    }
}

/// Sizes from `--sizes 33,1024`.
fn sizes(s: &Option<String>) -> anyhow::Result<Option<Vec<u64>>> {
    s.as_ref()
        .map(|t| {
            t.split(',')
                .map(|x| {
                    x.trim()
                        .parse::<u64>()
                        .with_context(|| format!("--sizes: '{x}' is not a size"))
                })
                .collect()
        })
        .transpose()
}

/// The check's options from its arguments.
fn options(args: &CheckArgs) -> anyhow::Result<CheckOptions> {
    Ok(CheckOptions {
        seed: args.seed,
        sizes: sizes(&args.sizes)?,
        shapes: (!args.shape.is_empty()).then(|| {
            args.shape
                .iter()
                .map(|s| s.0.iter().map(|(k, v)| (k.clone(), *v as i64)).collect())
                .collect()
        }),
        quick: args.quick,
        resume_after: args.resume_after,
    })
}

/// Whether `kernel`'s reference runs on the host (a C or command reference), so that a CPU
/// can run it before any device.
fn runs_on_the_host(kernel: &Kernel) -> bool {
    use klab_spec::declared::ReferenceSpec;
    matches!(
        kernel.decl.op.spec.reference,
        ReferenceSpec::C(_) | ReferenceSpec::Command(_)
    )
}

/// What a CPU can check of `kernel` before any device: its plan (printed with `--plan`)
/// and, for a C or command reference, the reference built and run once on the plan's
/// smallest shape.
fn check_without_device(kernel: &Kernel, args: &CheckArgs) -> anyhow::Result<()> {
    let plan = check::plan(&kernel.decl, &options(args)?)?;
    if args.plan {
        print!("{}", plan.render(&kernel.decl));
    }
    // Resolved for every kind (a trusted kernel's manifest and name too, without a device),
    // and the user's data read: what the device run would refuse, refused now.
    let reference = kernel.reference(args.device)?;
    check::check_user_data(&kernel.decl, &reference)?;
    if runs_on_the_host(kernel) {
        let name = &kernel.decl.name;
        match check::reference_dry_run(&kernel.decl, reference, &plan)? {
            check::DryRun::Ran => {}
            check::DryRun::NotRun(why) => {
                eprintln!("klab check: {name}: the reference's run without a GPU is skipped: {why}")
            }
            check::DryRun::SlicesDoNotHold(why) => {
                eprintln!("klab check: {name}: the index-overflow case will not be sampled: {why}")
            }
        }
    }
    Ok(())
}

/// One kernel in this process (the child side).
fn check_here(
    args: &CheckArgs,
    name: &str,
    policy: VerifyPolicy,
    results: &Results,
) -> anyhow::Result<Finished> {
    let kernel = Kernel::parse_in_child(name)?;
    for shape in &args.shape {
        kernel.check_shape(shape)?;
    }
    let mut session = Session::open(&kernel.manifest, &kernel.decl, args.device, policy)?;
    let k = klab_engine::workload::load_kernels(&mut session.backend, &kernel.decl)?;
    let opts = options(args)?;
    let verbose = args.verbose;
    let mut show = |p: check::Progress<'_>| match p {
        // The parent reads this if the process dies (a fault, the watchdog) to name the case.
        check::Progress::Starting(label) => results.say(&ChildResult::Case {
            label: label.to_string(),
        }),
        check::Progress::Done(c) => {
            if verbose || !c.pass || c.skipped {
                eprintln!("klab check: {}", c.render());
            }
            // The parent counts a failure if this process dies in a later case, and knows
            // that what goes wrong from here on is not this case's.
            let label = c.case.clone();
            let over = if !c.pass && !c.skipped {
                ChildResult::CaseFailed { label }
            } else {
                ChildResult::CaseDone { label }
            };
            results.say(&over);
        }
    };
    let reference = kernel.reference(args.device)?;
    let report = check::run(
        &mut session.backend,
        &kernel.decl,
        &k,
        reference,
        &opts,
        &mut show,
    )?;
    let summary = Summary {
        report,
        resumed: args.resume_after > 0,
    };
    // For a person the child prints its summary (its parent relays it and logs keep it); a
    // machine format is printed by the parent, once, from the results.
    if !args.output.format().is_for_machines() {
        output::emit(&summary, Format::Human)?;
    }
    let report = summary.report;
    let passed = report.passed();
    Ok(Finished::with(ChildResult::Check { report }, passed))
}

/// One child's report as the check prints it: the summary a person reads, or its report.
#[derive(serde::Serialize)]
#[serde(transparent)]
struct Summary {
    report: check::CheckReport,
    #[serde(skip)]
    resumed: bool,
}

impl Report for Summary {
    /// The header, the failures and the verdict: the per-case lines went to stderr as the
    /// cases ran (failures always). A check resumed after a case that ended its process
    /// holds only the cases after it, so the parent says the verdict.
    fn human(&self) -> String {
        let r = self.report.render();
        let mut lines = r.lines();
        let mut out = String::new();
        if let Some(h) = lines.next() {
            out += h;
            out.push('\n');
        }
        for l in lines {
            if !(l.starts_with("PASS ") || (self.resumed && l.starts_with("verdict: "))) {
                out += l;
                out.push('\n');
            }
        }
        out
    }
}

/// Every kernel's report, printed once as one value in a machine format: a check of one
/// kernel prints its report alone (as `--json` has always printed it; `null` when no child
/// finished one), a check of several a list of those that were finished. The shape follows
/// the kernels asked for, never how many reports came back.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Checks {
    One(Option<Summary>),
    Several(Vec<Summary>),
}

impl Report for Checks {
    fn human(&self) -> String {
        self.all().iter().map(Summary::human).collect()
    }

    /// One row per case of every kernel.
    fn csv(&self) -> anyhow::Result<String> {
        let all = self.all();
        let head = ["kernel", "case", "n", "pass", "skipped", "detail"];
        let mut rows = vec![head.map(String::from).to_vec()];
        for c in all
            .iter()
            .flat_map(|s| s.report.cases.iter().map(move |c| (s, c)))
        {
            let (s, c) = c;
            rows.push(vec![
                s.report.kernel.clone(),
                c.case.clone(),
                c.n.to_string(),
                c.pass.to_string(),
                c.skipped.to_string(),
                c.detail.clone(),
            ]);
        }
        Ok(klab_core::csv::lines(&rows))
    }
}

impl Checks {
    fn all(&self) -> &[Summary] {
        match self {
            Checks::One(s) => s.as_slice(),
            Checks::Several(all) => all.as_slice(),
        }
    }
}

/// Where a check's output goes. For a person each child's stdout (its summary) and each line
/// about a child come as they are known, on stdout; in a machine format stdout holds the
/// reports alone, printed once at the end from the children's results, and the rest (the
/// lines, a kernel's own output) goes to stderr.
struct CheckOutput {
    format: Format,
    /// How many kernels the check was asked for.
    kernels: usize,
    reports: Vec<Summary>,
}

impl CheckOutput {
    fn new(format: Format, kernels: usize) -> CheckOutput {
        CheckOutput {
            format,
            kernels,
            reports: Vec::new(),
        }
    }

    /// A line about a kernel's children (a death, an error, a verdict after deaths).
    fn line(&self, line: &str) {
        self.text(&format!("{line}\n"));
    }

    /// Text as it is: a child's own stdout, or a line.
    fn text(&self, text: &str) {
        if self.format.is_for_machines() {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    }

    /// A child's report: for a person the child printed it already (with its stdout).
    fn report(&mut self, summary: Summary) {
        if self.format.is_for_machines() {
            self.reports.push(summary);
        }
    }

    fn finish(self) -> anyhow::Result<()> {
        if !self.format.is_for_machines() {
            return Ok(());
        }
        let format = self.format;
        output::emit(&self.into_checks(), format)
    }

    /// The reports as one value. A kernel whose child died mid-case has the report of the
    /// fresh process that ran the cases after it (its earlier failures are on stderr and in
    /// the exit code).
    fn into_checks(mut self) -> Checks {
        if self.kernels == 1 {
            Checks::One(self.reports.pop())
        } else {
            Checks::Several(self.reports)
        }
    }
}

/// The verdict of a check in which `deaths` cases ended their process after `failed_before`
/// other cases had failed in the processes they ended, `last` being the report of the fresh
/// process that ran the cases after the last of them: a failure, or for a known-broken
/// kernel its rejection (the deaths are the gate failing, never "another gate's bug").
fn verdict_after_deaths(
    known_broken: Option<&str>,
    deaths: usize,
    failed_before: usize,
    last: &check::CheckReport,
) -> String {
    let ended = format!(
        "{deaths} case(s) ended their process and {failed_before} failed before, named above; of the {} after the last, run in a fresh one, {} failed",
        last.cases.len(),
        last.failures()
    );
    match known_broken {
        Some(why) => format!("REJECTED (known-broken: {why}; {ended})"),
        None => format!("FAIL ({ended})"),
    }
}

/// At most this many processes die in one kernel's check before klab gives up on the rest.
const MAX_FAULTS: usize = 8;

/// How one kernel's check came out, over all the processes it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checked {
    Passed,
    Failed,
    /// A child stopped on an error before any case ran: no verdict on the kernel.
    Error,
}

impl Checked {
    fn new(passed: bool) -> Checked {
        if passed {
            Checked::Passed
        } else {
            Checked::Failed
        }
    }
}

/// `kernel`'s check in a child, and, when a child dies in a case (a fault poisons the CUDA
/// context), in a fresh one from the case after it: each death is that case's failure,
/// named with its shape, input and seed. A hang ends the check (the watchdog's time is the
/// whole check's). Each child is judged by its [`ChildVerdict`].
fn check_in_children(
    kernel: &Kernel,
    args: &CheckArgs,
    policy: VerifyPolicy,
    timeout: Duration,
    out: &mut CheckOutput,
) -> anyhow::Result<Checked> {
    let mut passed = true;
    let mut resume_after = 0;
    let mut failed_before = 0;
    for deaths in 0.. {
        let cmd = ChildCmd::Check(CheckArgs {
            kernels: vec![kernel.spec()],
            resume_after,
            ..args.clone()
        });
        let o = cmd.run(policy, timeout, Echo::Off)?;
        out.text(&o.stdout);
        eprint!("{}", o.stderr);
        if let (
            Some(ChildResult::Check { report }),
            ChildVerdict::Passed | ChildVerdict::GateFailed { .. },
        ) = (&o.result, &o.verdict)
        {
            let checked = Checked::new(passed && report.passed());
            let after_deaths = (deaths > 0).then(|| {
                verdict_after_deaths(
                    kernel.decl.known_broken.as_deref(),
                    deaths,
                    failed_before,
                    report,
                )
            });
            out.report(Summary {
                report: report.clone(),
                resumed: deaths > 0,
            });
            if let Some(v) = after_deaths {
                out.line(&format!("check {}: verdict: {v}", kernel.name()));
            }
            return Ok(checked);
        }
        if let ChildVerdict::Error { message } = &o.verdict {
            // Before any case ran, or klab's own checking failed: no verdict on the kernel.
            out.line(&format!("check {}: ERROR: {message}", kernel.name()));
            return Ok(Checked::Error);
        }
        out.line(&format!(
            "check {}: FAIL: {}",
            kernel.name(),
            o.verdict.describe()
        ));
        passed = false;
        failed_before += ChildResult::cases_failed(&o.said);
        let started = ChildResult::cases_started(&o.said);
        if matches!(o.verdict, ChildVerdict::Hung { .. }) || started == 0 {
            break;
        }
        if deaths + 1 >= MAX_FAULTS {
            out.line(&format!(
                "check {}: {MAX_FAULTS} processes died; the cases after the last are not run",
                kernel.name()
            ));
            break;
        }
        eprintln!(
            "klab check: {}: the cases after it run in a fresh process",
            kernel.name()
        );
        resume_after += started;
    }
    Ok(Checked::new(passed))
}

pub fn run(args: CheckArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    sizes(&args.sizes)?;
    check_in_the_parent(args, policy)
}

/// A check child: one kernel's plan (`plan`), or its cases from `resume_after` on.
pub fn here(args: CheckArgs, policy: VerifyPolicy, results: &Results) -> anyhow::Result<Finished> {
    sizes(&args.sizes)?;
    let [name] = args.kernels.as_slice() else {
        anyhow::bail!(
            "a check child checks one kernel, not {}",
            args.kernels.len()
        );
    };
    if args.plan {
        let kernel = Kernel::parse_in_child(name)?;
        check_without_device(&kernel, &args)?;
        return Ok(ExitCode::SUCCESS.into());
    }
    check_here(&args, name, policy, results)
}

/// The parent's check: every kernel's plan, then each kernel's check in its children.
fn check_in_the_parent(args: CheckArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    // Resolve every kernel and the sizes first: bad input is an error, not a verdict.
    let kernels = Kernel::parse_all(&args.kernels, Scope::Default)?;
    for k in &kernels {
        for shape in &args.shape {
            k.check_shape(shape)?;
        }
    }
    // The plan and the reference's first run, in a child: a C reference runs inside the
    // process that loads it, and one that crashes must not take klab with it.
    for k in &kernels {
        let cmd = ChildCmd::Check(CheckArgs {
            kernels: vec![k.spec()],
            plan: true,
            ..args.clone()
        });
        let plan = check::plan(&k.decl, &options(&args)?)?;
        if runs_on_the_host(k) {
            if let Some(line) = check::dry_run_announcement(&k.decl, &plan) {
                eprintln!("klab check: {}: {line}", k.name());
            }
        }
        let o = cmd.run(policy, Duration::from_secs(args.timeout), Echo::Off)?;
        if args.plan {
            print!("{}", o.stdout);
        }
        if o.verdict != ChildVerdict::Passed {
            let at = plan
                .smallest(&k.decl)
                .map(|p| format!(" at {}", klab_engine::declared::describe_shape(&p.shape)))
                .unwrap_or_default();
            // The plan's shapes, the user's data, a trusted kernel's manifest and a C or
            // command reference's first run: any of them may be what failed.
            anyhow::bail!(
                "{}: checked on the CPU before any device{at} (the plan, the inputs and the reference's first run): {}",
                k.name(),
                o.verdict.describe()
            );
        }
        // What the child said on its way (a reference's run skipped, and why).
        eprint!("{}", o.stderr);
    }
    if args.plan {
        return Ok(ExitCode::SUCCESS);
    }
    // A device must exist before children are blamed for anything.
    klab_cuda::device::Device::check(args.device)?;
    let timeout = Duration::from_secs(args.timeout);
    let mut out = CheckOutput::new(args.output.format(), kernels.len());
    let mut outcomes = Vec::new();
    for k in &kernels {
        outcomes.push(check_in_children(k, &args, policy, timeout, &mut out)?);
    }
    out.finish()?;
    // An error outranks a failure, as in every command: some kernel has no verdict.
    Ok(if outcomes.contains(&Checked::Error) {
        ExitCode::from(EXIT_ERROR)
    } else if outcomes.contains(&Checked::Failed) {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON's shape follows the kernels asked for: one kernel is its report (or null
    /// when no child finished one), several are a list even when one report came back.
    #[test]
    fn a_checks_json_shape_follows_the_kernels_asked_for() {
        let report = check::CheckReport {
            kernel: "k".into(),
            operation: "copy".into(),
            known_broken: None,
            seed: 1,
            cases: Vec::new(),
        };
        let json = |c: Checks| -> serde_json::Value {
            serde_json::from_str(&Format::Json.render(&c).unwrap()).unwrap()
        };
        let summary = || Summary {
            report: report.clone(),
            resumed: false,
        };
        let checks = |kernels: usize, reports: usize| {
            let mut out = CheckOutput::new(Format::Json, kernels);
            for _ in 0..reports {
                out.report(summary());
            }
            json(out.into_checks())
        };
        assert_eq!(checks(1, 1)["kernel"], "k");
        assert_eq!(checks(1, 0), serde_json::Value::Null);
        assert_eq!(checks(2, 1).as_array().map(Vec::len), Some(1));
        assert_eq!(checks(2, 2).as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn a_known_broken_kernel_whose_case_ended_its_process_is_rejected_not_for_another_gate() {
        // The fresh process after a fault ran no case: its own report once said "the oracle
        // passed all 0 cases: this bug is for another gate" for a bug the fault had shown.
        let pass = check::CaseResult {
            skipped: false,
            case: "n=3: exact".into(),
            n: 3,
            pass: true,
            detail: String::new(),
        };
        let last = check::CheckReport {
            kernel: "k".into(),
            operation: "declared".into(),
            known_broken: Some("a 32-bit offset".into()),
            seed: 1,
            cases: vec![
                pass.clone(),
                check::CaseResult {
                    pass: false,
                    ..pass
                },
            ],
        };
        assert_eq!(
            verdict_after_deaths(Some("a 32-bit offset"), 1, 43, &last),
            "REJECTED (known-broken: a 32-bit offset; 1 case(s) ended their process and 43 failed before, named above; of the 2 after the last, run in a fresh one, 1 failed)"
        );
        assert_eq!(
            verdict_after_deaths(None, 2, 0, &last),
            "FAIL (2 case(s) ended their process and 0 failed before, named above; of the 2 after the last, run in a fresh one, 1 failed)"
        );
    }
}
