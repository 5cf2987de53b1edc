//! `klab triad <mode> [samples.csv]`: the triad lab's program as a command. The kernels
//! run in a child ([`here`]) under the watchdog.

use klab_engine::verify::VerifyPolicy;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use klab_core::samples::{Regime, Timer};
use klab_engine::backend::Backend;
use klab_engine::declared::{DeclaredWorkload, InputCase};
use klab_engine::timing::{self, Outcome, TimingConfig, WarmupPolicy};
use klab_engine::workload::{Workload, POISON_BYTES};
use klab_spec::ops::triad;

use crate::child::{self, ChildCmd};
use crate::cli::TriadArgs;
use crate::cmd::Finished;
use crate::output::Report;
use klab_core::device::DeviceFacts;
use klab_run::blocks::{run_blocks, BenchSpec};
use klab_run::child::Results;
use klab_run::kernel::Kernel;
use klab_run::receipt::{write_receipt, ReceiptInput};
use klab_run::session::Session;
use klab_spec::rule::CheckOutcome;
use serde::Serialize;

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
    let format = args.output.format();
    let run = child::relay(ChildCmd::Triad(args), policy, timeout, &what, format)?;
    Ok(ExitCode::from(run.verdict.exit_code()))
}

/// The child: the mode's kernels and measurements, reported through the sinks.
pub fn here(args: TriadArgs, policy: VerifyPolicy, results: &Results) -> anyhow::Result<Finished> {
    let (mode, regime) = mode_and_regime(&args)?;
    let kernel = Kernel::parse(if mode == "--buggy" {
        "triad_buggy"
    } else {
        "triad_f32"
    })?;
    let mut session = Session::open(&kernel.manifest, &kernel.decl, args.device, policy)?;
    let device = session.backend.facts().clone();
    let outcome = match (mode, regime) {
        ("--check", _) => check(&mut session)?,
        ("--buggy", _) | ("--profile", _) => single(&mut session, mode == "--buggy")?,
        (_, Some(regime)) => bench(&mut session, regime, args.samples_csv.as_deref())?,
        _ => unreachable!("modes are matched above"),
    };
    let code = if outcome.passed() {
        0
    } else {
        EXIT_GATE_FAILED
    };
    let report = TriadReport { device, outcome };
    Finished::reporting(&report, args.output.format(), code, results)
}

/// What `klab triad` reports: the device, then what its mode found.
#[derive(Serialize)]
struct TriadReport {
    device: DeviceFacts,
    #[serde(flatten)]
    outcome: TriadOutcome,
}

#[derive(Serialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
enum TriadOutcome {
    /// `--check`: every case of the triad lab's check.
    Check { cases: Vec<TriadCase> },
    /// `--buggy`: the known-broken variant launched once; rejected whatever its output.
    Buggy { output: CheckOutcome },
    /// `--profile`: one launch for a profiler, its output checked.
    Profile { n: u64, output: CheckOutcome },
    /// `--bench-hot`, `--bench-rotate`.
    Bench(Box<TriadBench>),
}

#[derive(Serialize)]
struct TriadCase {
    seed: u32,
    n: u64,
    #[serde(flatten)]
    outcome: CheckOutcome,
}

#[derive(Serialize)]
struct TriadBench {
    regime: Regime,
    /// Buffer rotation: the bytes the slots aim to cover, and the device's memory.
    rotation: Option<Rotation>,
    /// The check before timing.
    before: CheckOutcome,
    /// The timed block, or why it was not timed.
    #[serde(flatten)]
    timed: Timing,
}

#[derive(Serialize)]
struct Rotation {
    target_bytes: u64,
    free_bytes: u64,
    total_bytes: u64,
}

#[derive(Serialize)]
#[serde(tag = "timing", rename_all = "kebab-case")]
enum Timing {
    Timed(Box<TriadTimed>),
    /// The output was wrong before timing: nothing was timed.
    Rejected,
    /// A check after timing (or the timing's integrity) failed: the timing is withheld.
    Withheld {
        check: String,
    },
}

#[derive(Serialize)]
struct TriadTimed {
    integrity: String,
    post_timing_slots_checked: usize,
    rotation_working_set_bytes: Option<u64>,
    slots: u64,
    warmup: u64,
    samples: usize,
    raw_samples: String,
    p10_us: f64,
    median_us: f64,
    p90_us: f64,
    useful_gb_s: f64,
    regime_caveat: String,
    gpu_state_flags: Vec<String>,
    receipt: String,
}

impl TriadOutcome {
    fn passed(&self) -> bool {
        match self {
            TriadOutcome::Check { cases } => cases.iter().all(|c| c.outcome.passed()),
            TriadOutcome::Buggy { .. } => false,
            TriadOutcome::Profile { output, .. } => output.passed(),
            TriadOutcome::Bench(b) => matches!(b.timed, Timing::Timed(_)),
        }
    }
}

fn correctness(c: &CheckOutcome) -> &'static str {
    if c.passed() {
        "PASS"
    } else {
        "FAIL"
    }
}

impl Report for TriadReport {
    fn human(&self) -> String {
        let f = &self.device;
        let mut lines = vec![format!(
            "device={} uuid={} compute_capability={}.{} l2_bytes={} cuda_runtime={} cuda_driver_api={} nvrtc={}",
            f.name,
            f.uuid,
            f.compute_capability.0,
            f.compute_capability.1,
            f.l2_bytes,
            f.runtime_version.as_deref().unwrap_or("not loaded"),
            f.driver_version,
            f.nvrtc_version.as_deref().unwrap_or("?")
        )];
        match &self.outcome {
            TriadOutcome::Check { cases } => lines.extend(cases.iter().map(|c| {
                let o = &c.outcome;
                format!(
                    "seed={} n={} correctness={} failures={} max_abs={:e} max_rel={:e}{}",
                    c.seed,
                    c.n,
                    correctness(o),
                    o.failures,
                    o.max_abs,
                    o.max_rel,
                    o.first_failure
                        .as_ref()
                        .map(|f| format!(" first={f}"))
                        .unwrap_or_default()
                )
            })),
            TriadOutcome::Buggy { output } => {
                lines.push("buggy launch completed; inspect it under Compute Sanitizer".into());
                lines.push(format!(
                    "triad_buggy (i <= n) is a known-broken variant: rejected whatever its output ({})",
                    output.describe()
                ));
            }
            TriadOutcome::Profile { n, output } => lines.push(format!(
                "profile launch complete n={n} ({})",
                output.describe()
            )),
            TriadOutcome::Bench(b) => lines.extend(b.lines()),
        }
        lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

impl TriadBench {
    fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(r) = &self.rotation {
            lines.push(format!(
                "rotation_target_bytes={} free_bytes={} total_bytes={}",
                r.target_bytes, r.free_bytes, r.total_bytes
            ));
        }
        let b = &self.before;
        if let Timing::Rejected = &self.timed {
            lines.push(format!("correctness=FAIL {}", b.describe()));
            return lines;
        }
        lines.push(format!(
            "correctness={} failures={} max_abs={:e} max_rel={:e}",
            correctness(b),
            b.failures,
            b.max_abs,
            b.max_rel
        ));
        let t = match &self.timed {
            Timing::Timed(t) => t,
            Timing::Withheld { check } => {
                lines.push(check.clone());
                return lines;
            }
            Timing::Rejected => return lines,
        };
        lines.push(format!("round 1: {}", t.integrity));
        lines.push(format!(
            "post_timing_slots_checked={}",
            t.post_timing_slots_checked
        ));
        if let Some(bytes) = t.rotation_working_set_bytes {
            lines.push(format!("rotation_working_set_bytes={bytes}"));
        }
        lines.push(format!(
            "regime={} slots={} warmup={} samples={} raw_samples={}",
            self.regime, t.slots, t.warmup, t.samples, t.raw_samples
        ));
        lines.push(format!(
            "p10_us={:.3} median_us={:.3} p90_us={:.3}",
            t.p10_us, t.median_us, t.p90_us
        ));
        lines.push(format!(
            "useful_gb_s={:.3} (12 algorithmic bytes per element)",
            t.useful_gb_s
        ));
        lines.push(format!("regime_caveat=\"{}\"", t.regime_caveat));
        if !t.gpu_state_flags.is_empty() {
            lines.push(format!(
                "gpu_state_flags=\"{}\"",
                t.gpu_state_flags.join("; ")
            ));
        }
        lines.push(format!("receipt={}", t.receipt));
        lines
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

fn check(session: &mut Session) -> anyhow::Result<TriadOutcome> {
    let kernel = [session.backend.kernel("triad_f32")?];
    let mut cases = Vec::new();
    for (n, seed) in triad::CHECK_CASES {
        let w = workload(false, n, seed)?;
        let outcome = if n == 0 {
            // Nothing to launch: an empty grid. The (empty) output trivially matches.
            CheckOutcome {
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
        cases.push(TriadCase { seed, n, outcome });
    }
    Ok(TriadOutcome::Check { cases })
}

fn single(session: &mut Session, buggy: bool) -> anyhow::Result<TriadOutcome> {
    let w = workload(buggy, triad::N, 7)?;
    let kernel = klab_engine::workload::load_kernels(&mut session.backend, w.decl())?;
    let mut bufs = w.create_slot(&mut session.backend, 0)?;
    let output = timing::validate_once(
        &mut session.backend,
        &w,
        &kernel,
        &mut bufs,
        0,
        POISON_BYTES[0],
    )?;
    Ok(if buggy {
        TriadOutcome::Buggy { output }
    } else {
        TriadOutcome::Profile {
            n: triad::N,
            output,
        }
    })
}

fn bench(
    session: &mut Session,
    regime: Regime,
    path: Option<&Path>,
) -> anyhow::Result<TriadOutcome> {
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
    let rotation = if regime == Regime::BufferRotated {
        let slot = 3 * triad::N * 4;
        let l2 = session.backend.l2_bytes();
        let (free_bytes, total_bytes) = session.backend.memory_info()?;
        Some(Rotation {
            target_bytes: (8 * slot).max(2 * l2 + slot),
            free_bytes,
            total_bytes,
        })
    } else {
        None
    };
    let blocks = run_blocks(session, &spec, None, &mut |l| eprintln!("klab triad: {l}"))?;
    let outcome = |before: CheckOutcome, timed| {
        TriadOutcome::Bench(Box::new(TriadBench {
            regime,
            rotation,
            before,
            timed,
        }))
    };
    let m = match &blocks[0].outcome {
        Outcome::Rejected { before, .. } => return Ok(outcome(before.clone(), Timing::Rejected)),
        Outcome::Measured(m) => m,
    };
    if let Some(why) = m.gate_failure() {
        eprintln!("error: {why}; timing withheld");
        let check = bench::check_line(m);
        return Ok(outcome(m.before.clone(), Timing::Withheld { check }));
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
        klab: None,
    })?;
    let timed = TriadTimed {
        integrity: bench::integrity_line(m),
        post_timing_slots_checked: m.after_timing.len(),
        rotation_working_set_bytes: (regime == Regime::BufferRotated)
            .then(|| m.slots * 3 * triad::N * 4),
        slots: m.slots,
        warmup: m.warmup_launches,
        samples: m.samples.len(),
        raw_samples: path.display().to_string(),
        p10_us: r.result.p10_us,
        median_us: r.result.median_us,
        p90_us: r.result.p90_us,
        useful_gb_s: r.result.useful_gb_s,
        regime_caveat: regime.caveat().to_string(),
        gpu_state_flags: m.state.flags.clone(),
        receipt: receipt.display().to_string(),
    };
    Ok(outcome(m.before.clone(), Timing::Timed(Box::new(timed))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::output::Format;
    use clap::Parser;
    use klab_core::device::DeviceLimits;

    fn parsed(argv: &[&str]) -> TriadArgs {
        let cli = Cli::try_parse_from([&["klab", "triad"], argv].concat()).unwrap();
        match cli.into_command() {
            Command::Triad(a) => a,
            other => panic!("{other:?}"),
        }
    }

    /// The lab's positional, hyphenated modes and `--format` live side by side: a known
    /// option is never taken for the mode or the sample path.
    #[test]
    fn the_format_is_an_option_beside_the_labs_modes() {
        let a = parsed(&["--format", "json", "--bench-hot", "x.csv"]);
        assert_eq!(a.mode.as_deref(), Some("--bench-hot"));
        assert_eq!(a.samples_csv.as_deref(), Some(Path::new("x.csv")));
        assert_eq!(a.output.format(), Format::Json);
        let a = parsed(&["--bench-rotate", "y.csv", "--format", "csv"]);
        assert_eq!(a.samples_csv.as_deref(), Some(Path::new("y.csv")));
        assert_eq!(a.output.format(), Format::Csv);
        let a = parsed(&["--check", "--json"]);
        assert_eq!(
            (a.mode.as_deref(), a.output.format()),
            (Some("--check"), Format::Json)
        );
        let a = parsed(&[]);
        assert_eq!((a.mode, a.output.format()), (None, Format::Human));
    }

    fn device() -> DeviceFacts {
        DeviceFacts {
            ordinal: 0,
            name: "NVIDIA H200".into(),
            uuid: "GPU-1".into(),
            compute_capability: (9, 0),
            sm_count: 132,
            l2_bytes: 52_428_800,
            memory_clock_khz: 3_201_000,
            sm_clock_khz: Some(1_980_000),
            bus_width_bits: 6144,
            total_memory_bytes: 150_000_000_000,
            driver_version: "13.0".into(),
            runtime_version: None,
            nvrtc_version: Some("13.0".into()),
            limits: DeviceLimits::hopper(),
        }
    }

    fn outcome(failures: u64) -> CheckOutcome {
        CheckOutcome {
            failures,
            max_abs: if failures > 0 { 0.5 } else { 0.0 },
            max_rel: 0.0,
            first_failure: (failures > 0).then(|| "y[3]: got 1, want 1.5".to_string()),
        }
    }

    const DEVICE_LINE: &str = "device=NVIDIA H200 uuid=GPU-1 compute_capability=9.0 l2_bytes=52428800 cuda_runtime=not loaded cuda_driver_api=13.0 nvrtc=13.0";

    /// The text is the triad lab's key=value lines, as it was before the report was a value.
    #[test]
    fn the_check_prints_a_line_per_case_and_its_json_names_the_mode() {
        let report = TriadReport {
            device: device(),
            outcome: TriadOutcome::Check {
                cases: vec![
                    TriadCase {
                        seed: 7,
                        n: 0,
                        outcome: outcome(0),
                    },
                    TriadCase {
                        seed: 7,
                        n: 257,
                        outcome: outcome(2),
                    },
                ],
            },
        };
        assert!(!report.outcome.passed());
        assert_eq!(
            report.human(),
            format!(
                "{DEVICE_LINE}\nseed=7 n=0 correctness=PASS failures=0 max_abs=0e0 max_rel=0e0\n\
                 seed=7 n=257 correctness=FAIL failures=2 max_abs=5e-1 max_rel=0e0 first=y[3]: got 1, want 1.5\n"
            )
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["mode"], "check");
        assert_eq!(json["cases"][1]["failures"], 2);
        assert_eq!(json["device"]["uuid"], "GPU-1");
    }

    fn timed() -> TriadTimed {
        TriadTimed {
            integrity: "integrity ok".into(),
            post_timing_slots_checked: 9,
            rotation_working_set_bytes: Some(905_969_664),
            slots: 9,
            warmup: 20,
            samples: 200,
            raw_samples: "rot.csv".into(),
            p10_us: 1.0,
            median_us: 1.25,
            p90_us: 1.5,
            useful_gb_s: 4000.0,
            regime_caveat: "cold".into(),
            gpu_state_flags: vec!["a".into(), "b".into()],
            receipt: "rot.receipt.json".into(),
        }
    }

    #[test]
    fn a_bench_says_each_way_it_can_end() {
        let bench = |timed| TriadReport {
            device: device(),
            outcome: TriadOutcome::Bench(Box::new(TriadBench {
                regime: Regime::BufferRotated,
                rotation: Some(Rotation {
                    target_bytes: 8,
                    free_bytes: 9,
                    total_bytes: 10,
                }),
                before: outcome(0),
                timed,
            })),
        };
        let report = bench(Timing::Timed(Box::new(timed())));
        assert!(report.outcome.passed());
        assert_eq!(
            report.human(),
            format!(
                "{DEVICE_LINE}\nrotation_target_bytes=8 free_bytes=9 total_bytes=10\n\
                 correctness=PASS failures=0 max_abs=0e0 max_rel=0e0\nround 1: integrity ok\n\
                 post_timing_slots_checked=9\nrotation_working_set_bytes=905969664\n\
                 regime=buffer-rotated slots=9 warmup=20 samples=200 raw_samples=rot.csv\n\
                 p10_us=1.000 median_us=1.250 p90_us=1.500\n\
                 useful_gb_s=4000.000 (12 algorithmic bytes per element)\n\
                 regime_caveat=\"cold\"\ngpu_state_flags=\"a; b\"\nreceipt=rot.receipt.json\n"
            )
        );
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            (&json["mode"], &json["timing"]),
            (&"bench".into(), &"timed".into())
        );
        assert_eq!(json["median_us"], 1.25);

        let withheld = bench(Timing::Withheld {
            check: "after timing: FAIL".into(),
        });
        assert!(!withheld.outcome.passed());
        assert!(withheld.human().ends_with(
            "correctness=PASS failures=0 max_abs=0e0 max_rel=0e0\nafter timing: FAIL\n"
        ));
        assert_eq!(
            serde_json::to_value(&withheld).unwrap()["timing"],
            "withheld"
        );

        let mut rejected = bench(Timing::Rejected);
        if let TriadOutcome::Bench(b) = &mut rejected.outcome {
            b.before = outcome(3);
        }
        assert!(rejected.human().ends_with(&format!(
            "total_bytes=10\ncorrectness=FAIL {}\n",
            outcome(3).describe()
        )));
    }

    #[test]
    fn the_buggy_variant_is_rejected_whatever_its_output() {
        let report = TriadReport {
            device: device(),
            outcome: TriadOutcome::Buggy { output: outcome(0) },
        };
        assert!(!report.outcome.passed());
        assert!(report
            .human()
            .contains("buggy launch completed; inspect it under Compute Sanitizer\n"));
        let csv = report.csv().unwrap();
        assert!(csv.starts_with("field,value\n"), "{csv}");
        assert!(csv.contains("\nmode,buggy\n"), "{csv}");
    }
}
