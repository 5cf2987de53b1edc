//! `klab bench <kernel>`: one kernel through the timing engine, with a receipt. The
//! measurement runs in a child under the watchdog ([`here`]); the child hands its verdict,
//! its receipt and its [`BenchReport`] to the parent in its result. For a person the child
//! prints the report (its parent relays it, and a lab's or sweep's log keeps it); a machine
//! format is printed by the parent from the result.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use klab_cuda::device::Device;

use klab_engine::verify::VerifyPolicy;

use klab_engine::timing::Outcome;
use klab_run::child::{ChildResult, Results, Verdict};
use klab_run::pace::{Pace, Turn};

use crate::child::{self, ChildCmd, RoundWork};
use crate::cli::BenchArgs;
use klab_run::blocks::{run_blocks, BenchSpec, Paced};
use klab_run::folder::output_dir;
use klab_run::kernel::Kernel;
use klab_run::receipt::{workload_info, write_receipt, ReceiptInput};
use klab_run::session::{Prepared, Session};

use crate::cmd::Finished;
use crate::output::{self, Format, Report};
use klab_run::bench::{BenchBlock, BenchReport};

/// The parent: bad input in one line, then the measurement in a child under the watchdog.
pub fn run(args: BenchArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let kernel = Kernel::parse(&args.kernel)?.at_shape(args.shape.as_ref())?;
    check_args(&args, &kernel)?;
    let what = format!("bench {}", kernel.name());
    let timeout = args.timeout;
    let format = args.output.format();
    let child = ChildCmd::Bench(BenchArgs {
        kernel: kernel.spec(),
        ..args
    });
    let run = child::relay(child, policy, timeout, &what, format)?;
    // For a person the child printed its report; a machine format is printed here.
    if let (
        true,
        Some(ChildResult::Bench {
            report: Some(report),
            ..
        }),
    ) = (format.is_for_machines(), &run.result)
    {
        output::emit(report.as_ref(), format)?;
    }
    Ok(ExitCode::from(run.verdict.exit_code()))
}

/// The child: the blocks, the receipt, and the verdict said to the parent.
pub fn here(args: BenchArgs, policy: VerifyPolicy, results: &Results) -> anyhow::Result<Finished> {
    let spec = spec_of(&args)?;
    let session = prepare(&spec, &args)?.open(policy)?;
    measure(args, spec, session, results, None)
}

/// The child of a paced bench (a block of `klab rounds`, a receipt of the lab:
/// `crate::pacing`), given its turns by its parent ([`Turn`]): it prepares (the driver, its
/// kernel's module, NVML: [`Prepared`]), opens the device on its `Open` turn and does its
/// work (slots, validations, timing) on its `Time` turn. Without either (its parent withdrew
/// it) it stops, having launched nothing.
pub fn paced_here(
    args: BenchArgs,
    policy: VerifyPolicy,
    results: &Results,
) -> anyhow::Result<Finished> {
    let mut pace = Pace::new(std::io::stdin());
    let spec = spec_of(&args)?;
    let prepared = prepare(&spec, &args)?;
    pace.wait_for(Turn::Open)?;
    let session = prepared.open(policy)?;
    measure(args, spec, session, results, Some(&mut pace))
}

/// The child of a round in one process: each block as [`here`] runs it, on the device opened
/// once (its seconds charged to the first block), each saying its result, with the seconds
/// it took, to its own file. It stops at the first block that ends in an error, since a
/// fault can leave the device's context unusable: its parent runs the blocks left, and any
/// block this process could not judge, in processes of their own.
pub fn round_here(work: RoundWork, policy: VerifyPolicy) -> anyhow::Result<Finished> {
    let Some(first) = work.blocks.first() else {
        return Ok(ExitCode::SUCCESS.into());
    };
    let mut since = Instant::now();
    let device = Device::open(first.bench.device)?;
    let mut open_s = Some(since.elapsed().as_secs_f64());
    let deadline = BlockDeadline::watched();
    for block in work.blocks {
        let results = Results::open(&block.results)
            .with_context(|| format!("opening {}", block.results.display()))?;
        deadline.set(Some(Duration::from_secs(block.bench.timeout)));
        let finished = spec_of(&block.bench).and_then(|spec| {
            let setup_s = open_s.take().unwrap_or(0.0);
            let session = prepare(&spec, &block.bench)?.on(device.clone(), setup_s, policy)?;
            measure(block.bench, spec, session, &results, None)
        });
        deadline.set(None);
        let elapsed = since.elapsed().as_secs_f64();
        since = Instant::now();
        match finished {
            Ok(Finished { code, mut result }) => {
                if let Some(ChildResult::Bench { elapsed_s, .. }) = &mut result {
                    *elapsed_s = Some(elapsed);
                }
                results.say(&result.unwrap_or(ChildResult::Exit {
                    code: crate::exit_code_number(code),
                }))
            }
            Err(e) => {
                results.say(&crate::said_error(&e));
                return Ok(ExitCode::from(crate::EXIT_ERROR).into());
            }
        }
    }
    Ok(ExitCode::SUCCESS.into())
}

/// What a bench's child times, from its arguments (checked as the parent checked them).
fn spec_of(args: &BenchArgs) -> anyhow::Result<BenchSpec> {
    let kernel = Kernel::parse_in_child(&args.kernel)?.at_shape(args.shape.as_ref())?;
    let n = check_args(args, &kernel)?;
    Ok(BenchSpec {
        kernel,
        n,
        config: args.timing.config(),
        rounds: args.rounds,
        claim: args.claim.clone(),
    })
}

/// `spec`'s kernel prepared on the device `args` names, which is not opened yet.
fn prepare(spec: &BenchSpec, args: &BenchArgs) -> anyhow::Result<Prepared> {
    let k = &spec.kernel;
    Ok(Session::prepare(&k.manifest, &k.decl, args.device)?)
}

/// The deadline of the block a round's process is running: a block that runs past its
/// `--timeout` ends the process (SIGKILL: no CUDA teardown can hold it up, and no core is
/// dumped), so that a kernel that hangs costs one block's watchdog here, not the whole
/// round's. Its parent then runs it, and the blocks after it, alone, each under a watchdog
/// of its own, which gives the verdict.
struct BlockDeadline {
    current: Arc<Mutex<Option<(Instant, Duration)>>>,
}

impl BlockDeadline {
    /// A thread that watches the deadline until the process ends.
    fn watched() -> BlockDeadline {
        let current = Arc::new(Mutex::new(None::<(Instant, Duration)>));
        let watched = Arc::clone(&current);
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(50));
            let past = watched
                .lock()
                .map(|c| c.is_some_and(|(t, limit)| t.elapsed() > limit))
                .unwrap_or(false);
            if past {
                eprintln!("klab: a block ran past its --timeout; this round's process ends here");
                klab_tools::process::end_this_process_now();
            }
        });
        BlockDeadline { current }
    }

    /// A block starts now, with `limit` to run in (`None`: no block is running).
    fn set(&self, limit: Option<Duration>) {
        if let Ok(mut c) = self.current.lock() {
            *c = limit.map(|l| (Instant::now(), l));
        }
    }
}

/// One bench's blocks of `spec` in `session`, the receipt, and the verdict said to the
/// parent.
fn measure(
    args: BenchArgs,
    spec: BenchSpec,
    mut session: Session,
    results: &Results,
    mut pace: Option<&mut Pace<std::io::Stdin>>,
) -> anyhow::Result<Finished> {
    let session_open = Instant::now();
    let (kernel, n) = (spec.kernel.clone(), spec.n);
    let facts = session.backend.facts().clone();
    eprintln!("klab bench: {}", facts.describe());
    let dir = output_dir(args.out.as_deref(), "bench")?;
    // From here to the end of the blocks the kernel's code runs: a fault, an error or a
    // death in between is the kernel's (the parent reads these lines).
    let running = format!(
        "{} at n={n}: its validations and timed launches",
        kernel.name()
    );
    results.say(&ChildResult::Case {
        label: running.clone(),
    });
    let launches_over = || results.say(&ChildResult::LaunchesOver);
    let paced = pace.as_mut().map(|pace| Paced {
        pace,
        launches_over: &launches_over,
        session_open,
    });
    let blocks = run_blocks(&mut session, &spec, paced, &mut |l| {
        eprintln!("klab bench: {l}")
    })?;
    let waited_s = pace.as_ref().map(|p| p.waited_s);
    results.say(&ChildResult::CaseDone { label: running });
    // Nothing more runs on the device: closing it now lets a paced block's parent start
    // the next block's timing while this one writes its receipt and exits.
    let (module, released) = session.release_device();
    if waited_s.is_some() && released {
        results.say(&ChildResult::DeviceReleased);
    }
    let info = workload_info(&kernel, n, args.device)?;
    let mut report = BenchReport::new(
        kernel.name(),
        n,
        &spec.config,
        spec.rounds,
        dir.display().to_string(),
    );
    report.blocks = blocks
        .iter()
        .map(|b| BenchBlock::of(b, info.useful_bytes))
        .collect();
    report.failure = report
        .blocks
        .iter()
        .find_map(|b| match (&b.rejected, &b.withheld) {
            (Some(_), _) => Some("the correctness gate failed".to_string()),
            (None, why) => why.clone(),
        });
    let for_a_person = !args.output.format().is_for_machines();
    if let Some(why) = report.failure.clone() {
        if for_a_person {
            output::emit(&report, Format::Human)?;
        }
        let result = ChildResult::Bench {
            kernel: kernel.name(),
            verdict: Verdict::Fail,
            receipt: None,
            detail: why,
            report: Some(Box::new(report)),
            elapsed_s: None,
            waited_s,
        };
        return Ok(Finished::with(result, false));
    }
    let timed = blocks
        .iter()
        .filter_map(|b| match &b.outcome {
            Outcome::Measured(m) => Some((b.round, 0u32, m.as_ref())),
            Outcome::Rejected { .. } => None,
        })
        .collect();
    let (path, r) = write_receipt(ReceiptInput {
        dir: &dir,
        spec: &spec,
        facts: &facts,
        module: &module,
        blocks: timed,
        order: "single kernel, rounds in sequence".into(),
        extra_artifacts: Vec::new(),
        receipt_name: "receipt.json".into(),
        samples_name: None,
        klab: args.klab_binary.as_ref(),
    })?;
    let median = r.result.median_us;
    report.result = Some(r.result);
    report.receipt = Some(path.display().to_string());
    if for_a_person {
        output::emit(&report, Format::Human)?;
    }
    let result = ChildResult::Bench {
        kernel: kernel.name(),
        verdict: Verdict::Pass,
        receipt: Some(path.display().to_string()),
        detail: format!("median {median:.3} us"),
        report: Some(Box::new(report)),
        elapsed_s: None,
        waited_s,
    };
    Ok(Finished::with(result, true))
}

/// The size, after the checks every bench makes before it starts (clap refuses a zero
/// `--n` or `--rounds`; a bench shape may still say 0).
fn check_args(args: &BenchArgs, kernel: &Kernel) -> anyhow::Result<u64> {
    kernel.refuse_n_for_declared(args.n)?;
    let n = args.n.unwrap_or_else(|| kernel.default_n());
    if n == 0 {
        anyhow::bail!("n must be at least 1, got 0");
    }
    Ok(n)
}

impl Report for BenchReport {
    fn human(&self) -> String {
        self.render_text()
    }

    /// One row per block; the receipt's figures are the blocks' samples pooled.
    fn csv(&self) -> anyhow::Result<String> {
        let head = [
            "kernel",
            "n",
            "round",
            "correct",
            "p10_us",
            "median_us",
            "p90_us",
            "useful_gb_s",
            "slots",
            "warmup",
            "flags",
            "rejected",
            "withheld",
            "receipt",
        ];
        let mut rows = vec![head.map(String::from).to_vec()];
        let o = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
        for b in &self.blocks {
            let t = b.timing.as_ref();
            rows.push(vec![
                self.kernel.clone(),
                self.n.to_string(),
                b.round.to_string(),
                b.correct.to_string(),
                o(t.and_then(|t| t.p10_us)),
                o(t.and_then(|t| t.median_us)),
                o(t.and_then(|t| t.p90_us)),
                o(t.and_then(|t| t.useful_gb_s)),
                t.map(|t| t.slots.to_string()).unwrap_or_default(),
                t.map(|t| t.warmup_launches.to_string()).unwrap_or_default(),
                t.map(|t| t.flags.join("; ")).unwrap_or_default(),
                b.rejected
                    .as_ref()
                    .map(|r| r.check.clone())
                    .unwrap_or_default(),
                b.withheld.clone().unwrap_or_default(),
                self.receipt.clone().unwrap_or_default(),
            ]);
        }
        Ok(klab_core::csv::lines(&rows))
    }
}
