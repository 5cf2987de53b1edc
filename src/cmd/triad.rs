//! `klab triad <mode> [samples.csv]`: the triad lab's program as a command. The kernels
//! run in a child ([`here`]) under the watchdog.

use klab_engine::verify::VerifyPolicy;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use klab_core::samples::{Regime, Timer};
use klab_engine::backend::Backend;
use klab_engine::general::{DeclaredWorkload, InputCase};
use klab_engine::timing::{self, Outcome, TimingConfig, WarmupPolicy};
use klab_engine::workload::{Workload, POISON_BYTES};
use klab_spec::ops::triad;

use crate::child::{self, ChildCmd};
use crate::cli::TriadArgs;
use crate::output::Format;
use klab_run::blocks::{run_blocks, BenchSpec};
use klab_run::kernel::Kernel;
use klab_run::receipt::{write_receipt, ReceiptInput};
use klab_run::session::Session;

use crate::EXIT_GATE_FAILED;
use klab_run::bench;

const USAGE: &str =
    "usage: klab triad [--check|--buggy|--profile|--bench-hot|--bench-rotate] [samples.csv]";

/// The mode and its cache regime (a benchmark mode's), every argument checked before the GPU
/// is touched.
fn mode_and_regime(args: &TriadArgs) -> anyhow::Result<(&str, Option<Regime>)> {
    let mode = args.mode.as_deref().unwrap_or("--check");
    let regime = match mode {
        "--bench-hot" => Some(Regime::SameBuffer),
        "--bench-rotate" => Some(Regime::BufferRotated),
        "--check" | "--buggy" | "--profile" => None,
        _ => bail!("unknown mode '{mode}'; {USAGE}"),
    };
    if !args.extra.is_empty() {
        bail!("too many arguments; {USAGE}");
    }
    if args.samples_csv.is_some() && regime.is_none() {
        bail!("a sample CSV path is valid only for benchmark modes");
    }
    if let Some(p) = args.samples_csv.as_deref() {
        if p == Path::new("-") {
            bail!("the sample CSV is hashed into the receipt written beside it, so it must be a file; give a path, not -");
        }
        // A FIFO, device node or link given as the output: refused before the GPU work.
        klab_core::artifact::check_output(p)?;
    }
    Ok((mode, regime))
}

/// The parent: the arguments checked, then the kernels in a child under the watchdog.
pub fn run(args: TriadArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let (mode, _) = mode_and_regime(&args)?;
    let (timeout, what) = (args.timeout, format!("triad {mode}"));
    let run = child::relay(ChildCmd::Triad(args), policy, timeout, &what, Format::Human)?;
    Ok(ExitCode::from(run.verdict.exit_code()))
}

/// The child: the mode's kernels and measurements.
pub fn here(args: TriadArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let (mode, regime) = mode_and_regime(&args)?;
    let kernel = Kernel::parse(if mode == "--buggy" {
        "triad_buggy"
    } else {
        "triad_f32"
    })?;
    let mut session = Session::open(&kernel.manifest, &kernel.decl, args.device, policy)?;
    let f = session.backend.facts().clone();
    println!(
        "device={} uuid={} compute_capability={}.{} l2_bytes={} cuda_runtime={} cuda_driver_api={} nvrtc={}",
        f.name,
        f.uuid,
        f.compute_capability.0,
        f.compute_capability.1,
        f.l2_bytes,
        f.runtime_version.as_deref().unwrap_or("not loaded"),
        f.driver_version,
        f.nvrtc_version.as_deref().unwrap_or("?")
    );
    match (mode, regime) {
        ("--check", _) => check(&mut session),
        ("--buggy", _) | ("--profile", _) => single(&mut session, mode == "--buggy"),
        (_, Some(regime)) => bench(&mut session, regime, args.samples_csv.as_deref()),
        _ => unreachable!("modes are matched above"),
    }
}

/// The triad lab's workload: `n` elements of the seed's input pattern for `seed` (with its
/// zeros and cancellations), alpha 1.25, checked by the triad contract's rule.
fn workload(buggy: bool, n: u64, seed: u32) -> anyhow::Result<DeclaredWorkload> {
    let kernel = Kernel::parse(if buggy { "triad_buggy" } else { "triad_f32" })?;
    let w = DeclaredWorkload::builtin(kernel.decl, n, InputCase::Structural, 0)?;
    let (mut x, mut z) = (vec![0.0f32; n as usize], vec![0.0f32; n as usize]);
    triad::fill_inputs(&mut x, &mut z, seed, triad::ALPHA);
    let bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
    let mut inputs = vec![Vec::new(); w.initial_bytes()?.len()];
    for (name, v) in [("x", &x), ("z", &z)] {
        let i = w
            .buffer_index(name)
            .context("the triad contract has x and z")?;
        inputs[i] = bytes(v);
    }
    Ok(w.with_inputs(inputs)?)
}

fn check(session: &mut Session) -> anyhow::Result<ExitCode> {
    let kernel = [session.backend.kernel("triad_f32")?];
    let mut failed = false;
    for (n, seed) in triad::CHECK_CASES {
        let w = workload(false, n, seed)?;
        let outcome = if n == 0 {
            // Nothing to launch: an empty grid. The (empty) output trivially matches.
            klab_spec::rule::CheckOutcome {
                failures: 0,
                max_abs: 0.0,
                max_rel: 0.0,
                first_failure: None,
            }
        } else {
            let mut bufs = w.create_slot(&mut session.backend, 0)?;
            timing::validate_once(
                &mut session.backend,
                &w,
                &kernel,
                &mut bufs,
                0,
                POISON_BYTES[0],
            )?
        };
        failed |= !outcome.passed();
        println!(
            "seed={seed} n={n} correctness={} failures={} max_abs={:e} max_rel={:e}{}",
            if outcome.passed() { "PASS" } else { "FAIL" },
            outcome.failures,
            outcome.max_abs,
            outcome.max_rel,
            outcome
                .first_failure
                .map(|f| format!(" first={f}"))
                .unwrap_or_default()
        );
    }
    Ok(if failed {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn single(session: &mut Session, buggy: bool) -> anyhow::Result<ExitCode> {
    let w = workload(buggy, triad::N, 7)?;
    let kernel = klab_engine::workload::load_kernels(&mut session.backend, w.decl())?;
    let mut bufs = w.create_slot(&mut session.backend, 0)?;
    let c = timing::validate_once(
        &mut session.backend,
        &w,
        &kernel,
        &mut bufs,
        0,
        POISON_BYTES[0],
    )?;
    if buggy {
        println!("buggy launch completed; inspect it under Compute Sanitizer");
        println!(
            "triad_buggy (i <= n) is a known-broken variant: rejected whatever its output ({})",
            c.describe()
        );
        return Ok(ExitCode::from(EXIT_GATE_FAILED));
    }
    println!("profile launch complete n={} ({})", triad::N, c.describe());
    Ok(if c.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_GATE_FAILED)
    })
}

fn bench(session: &mut Session, regime: Regime, path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let default = if regime == Regime::SameBuffer {
        "samples-hot.csv"
    } else {
        "samples-rotate.csv"
    };
    let path: PathBuf = path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(default));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .context("the sample CSV path needs a file name")?
        .to_string();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        bail!("folder {} for the sample CSV does not exist", dir.display());
    }
    let spec = BenchSpec {
        kernel: Kernel::parse("triad_f32")?,
        n: triad::N,
        config: TimingConfig {
            timer: Timer::PerLaunch,
            regime,
            samples: 200,
            warmup: WarmupPolicy::Count { launches: 20 },
            invalidation: klab_core::samples::Invalidation::EveryLaunch,
        },
        rounds: 1,
        claim: None,
    };
    if regime == Regime::BufferRotated {
        let slot = 3 * triad::N * 4;
        let l2 = session.backend.l2_bytes();
        let (free, total) = session.backend.memory_info()?;
        println!(
            "rotation_target_bytes={} free_bytes={free} total_bytes={total}",
            (8 * slot).max(2 * l2 + slot)
        );
    }
    let blocks = run_blocks(session, &spec, &mut |l| eprintln!("klab triad: {l}"))?;
    let m = match &blocks[0].outcome {
        Outcome::Rejected { before, .. } => {
            println!("correctness=FAIL {}", before.describe());
            return Ok(ExitCode::from(EXIT_GATE_FAILED));
        }
        Outcome::Measured(m) => m,
    };
    println!(
        "correctness={} failures={} max_abs={:e} max_rel={:e}",
        if m.before.passed() { "PASS" } else { "FAIL" },
        m.before.failures,
        m.before.max_abs,
        m.before.max_rel
    );
    if let Some(why) = m.gate_failure() {
        println!("{}", bench::check_line(m));
        eprintln!("error: {why}; timing withheld");
        return Ok(ExitCode::from(EXIT_GATE_FAILED));
    }
    println!("round 1: {}", bench::integrity_line(m));
    println!("post_timing_slots_checked={}", m.after_timing.len());
    if regime == Regime::BufferRotated {
        println!("rotation_working_set_bytes={}", m.slots * 3 * triad::N * 4);
    }
    let stem = name.strip_suffix(".csv").unwrap_or(&name).to_string();
    let (receipt, r) = write_receipt(ReceiptInput {
        dir: &dir,
        spec: &spec,
        facts: &session.backend.facts().clone(),
        module: &session.module,
        blocks: vec![(1, 0, m.as_ref())],
        order: "single kernel".into(),
        extra_artifacts: Vec::new(),
        receipt_name: format!("{stem}.receipt.json"),
        samples_name: Some(name),
    })?;
    println!(
        "regime={} slots={} warmup={} samples={} raw_samples={}",
        regime,
        m.slots,
        m.warmup_launches,
        m.samples.len(),
        path.display()
    );
    println!(
        "p10_us={:.3} median_us={:.3} p90_us={:.3}",
        r.result.p10_us, r.result.median_us, r.result.p90_us
    );
    println!(
        "useful_gb_s={:.3} (12 algorithmic bytes per element)",
        r.result.useful_gb_s
    );
    println!("regime_caveat=\"{}\"", regime.caveat());
    if !m.state.flags.is_empty() {
        println!("gpu_state_flags=\"{}\"", m.state.flags.join("; "));
    }
    println!("receipt={}", receipt.display());
    Ok(ExitCode::SUCCESS)
}
