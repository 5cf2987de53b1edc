//! `klab bench <kernel>`: one kernel through the timing engine, with a receipt. The
//! measurement runs in a child under the watchdog ([`here`]); the child reports its verdict
//! and receipt as its result.

use std::process::ExitCode;

use klab_engine::verify::VerifyPolicy;

use klab_engine::timing::Outcome;
use klab_run::child::{ChildResult, Results, Verdict};

use crate::child::{self, ChildCmd};
use crate::cli::BenchArgs;
use klab_run::blocks::{run_blocks, BenchSpec};
use klab_run::folder::output_dir;
use klab_run::kernel::Kernel;
use klab_run::receipt::{workload_info, write_receipt, ReceiptInput};
use klab_run::session::Session;

use crate::cmd::measure;
use crate::cmd::Finished;

/// The parent: bad input in one line, then the measurement in a child under the watchdog.
pub fn run(args: BenchArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let kernel = Kernel::parse(&args.kernel)?.at_shape(args.shape.as_ref())?;
    check_args(&args, &kernel)?;
    let what = format!("bench {}", kernel.name());
    let timeout = args.timeout;
    let child = ChildCmd::Bench(BenchArgs {
        kernel: kernel.spec(),
        ..args
    });
    child::relay(child, policy, timeout, &what)
}

/// The child: the blocks, the receipt, and the verdict said to the parent.
pub fn here(args: BenchArgs, policy: VerifyPolicy, results: &Results) -> anyhow::Result<Finished> {
    let kernel = Kernel::parse_in_child(&args.kernel)?.at_shape(args.shape.as_ref())?;
    let n = check_args(&args, &kernel)?;
    let config = args.timing.config();
    let spec = BenchSpec {
        kernel: kernel.clone(),
        n,
        config,
        rounds: args.rounds,
        claim: args.claim.clone(),
    };
    let mut session = Session::open(&kernel.manifest, &kernel.decl, args.device, policy)?;
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
    let blocks = run_blocks(&mut session, &spec, &mut |l| eprintln!("klab bench: {l}"))?;
    results.say(&ChildResult::CaseDone { label: running });
    let info = workload_info(&kernel, n, args.device)?;
    println!(
        "kernel={} n={n} regime={} timer={} samples={} warmup=\"{}\" rounds={}",
        kernel.name(),
        spec.config.regime,
        spec.config.timer,
        spec.config.samples,
        spec.config.warmup.describe(),
        spec.rounds
    );
    println!("regime_caveat=\"{}\"", spec.config.regime.caveat());
    let mut timed = Vec::new();
    let mut failed = false;
    let mut why_failed: Option<String> = None;
    for b in &blocks {
        match &b.outcome {
            Outcome::Rejected {
                before,
                known_broken,
            } => {
                failed = true;
                why_failed.get_or_insert_with(|| "the correctness gate failed".into());
                println!(
                    "round {}: REJECTED before timing: {}{}",
                    b.round,
                    before.describe(),
                    if *known_broken {
                        " (known-broken kernel: never timed)"
                    } else {
                        ""
                    }
                );
            }
            Outcome::Measured(m) => {
                println!("round {}: {}", b.round, measure::check_line(m));
                println!("{}", measure::integrity_line(b.round, m));
                if let Some(why) = m.gate_failure() {
                    failed = true;
                    println!("round {}: timing withheld: {why}", b.round);
                    why_failed.get_or_insert(why);
                } else {
                    println!("{}", measure::block_line(b.round, m, info.useful_bytes));
                }
                timed.push((b.round, 0u32, m.as_ref()));
            }
        }
    }
    if failed {
        let why = why_failed.unwrap_or_else(|| "the correctness gate failed".into());
        println!(
            "result: gate FAILED: {why}; no receipt written (raw folder: {})",
            dir.display()
        );
        let result = ChildResult::Bench {
            kernel: kernel.name(),
            verdict: Verdict::Fail,
            receipt: None,
            detail: why,
        };
        return Ok(Finished::with(result, false));
    }
    let (path, r) = write_receipt(ReceiptInput {
        dir: &dir,
        spec: &spec,
        facts: &facts,
        module: &session.module,
        blocks: timed,
        order: "single kernel, rounds in sequence".into(),
        extra_artifacts: Vec::new(),
        receipt_name: "receipt.json".into(),
        samples_name: None,
    })?;
    println!(
        "result: median_us={:.3} p10_us={:.3} p90_us={:.3} useful_gb_s={:.1} pct_of_peak={:.1} flagged_blocks={}",
        r.result.median_us, r.result.p10_us, r.result.p90_us, r.result.useful_gb_s, r.result.pct_of_peak, r.result.flagged_blocks
    );
    println!("receipt={}", path.display());
    let result = ChildResult::Bench {
        kernel: kernel.name(),
        verdict: Verdict::Pass,
        receipt: Some(path.display().to_string()),
        detail: format!("median {:.3} us", r.result.median_us),
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
