//! `klab rounds A B [C ...]`: repeated, alternating rounds as a command.
//! Each round runs the kernels in order and then in reverse (ABBA for two), or with `--order
//! alternating` each kernel once, reversed every other round ([`RoundOrder`]); each round in a
//! process of its own, or each block ([`process`]); every counted block's row is kept (a
//! block the GPU's cap held down is run once more, and both runs' folders are named in the
//! summary); per-kernel receipts collect the blocks; ratios against the baseline are taken
//! per round with an order-statistic interval.

mod process;

use process::{BlockBench, BlockRun};

use crate::output::{self, Report};
use klab_core::stats::resolve::{self, Resolution};
use klab_engine::verify::VerifyPolicy;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use klab_core::artifact::{read_regular, sha256_file, utc_timestamp, write_atomic, Input};
use klab_core::samples::{parse_samples_csv, Isolation, RoundOrder};
use klab_core::stats::{analyze_speedup, gb_per_s, render_analysis, IntervalConfig, Summary};
use klab_evidence::receipt::{self, Receipt};
use klab_spec::declared::builtin::OpKind;
use serde::Serialize;

use crate::cli::RoundsArgs;
use crate::EXIT_GATE_FAILED;
use klab_core::gpustate::BlockState;
use klab_core::stats::{SpeedVerdict, SpeedupAnalysis};
use klab_evidence::schema::{
    rounds_csv, CeilingRate, RateRow, Rerun, RerunKept, RoundsAnalysis, RoundsBlock, RoundsSummary,
};
use klab_run::child::{ChildResult, Verdict};
use klab_run::folder::output_dir;
use klab_run::kernel::Kernel;
use klab_run::receipt::{workload_info, KlabBinary};
use klab_spec::registry::{self, Scope};

#[derive(Debug, Clone, Serialize)]
pub struct BlockRow {
    pub round: u32,
    pub position: u32,
    pub variant: String,
    pub correct: bool,
    pub dir: String,
    pub receipt: Option<Receipt>,
    pub samples: Vec<f64>,
    /// The GPU's state around the block (from its receipt).
    pub state: Option<BlockState>,
}

/// The block's row of rounds.csv.
fn block_record(r: &BlockRow) -> RoundsBlock {
    let s = Summary::of(&r.samples);
    let st = r
        .receipt
        .as_ref()
        .and_then(|x| x.measurement.gpu_state.first());
    RoundsBlock {
        round: u64::from(r.round),
        position: u64::from(r.position),
        variant: r.variant.clone(),
        correct: r.correct,
        samples: r.samples.len() as u64,
        median_us: s.map(|s| s.median),
        p10_us: s.map(|s| s.p10),
        p90_us: s.map(|s| s.p90),
        useful_gb_s: r.receipt.as_ref().map(|x| x.result.useful_gb_s),
        sm_clock_before_mhz: st.and_then(|s| s.before.sm_clock_mhz).map(u64::from),
        sm_clock_after_mhz: st.and_then(|s| s.after.sm_clock_mhz).map(u64::from),
        temperature_before_c: st.and_then(|s| s.before.temperature_c).map(u64::from),
        temperature_after_c: st.and_then(|s| s.after.temperature_c).map(u64::from),
        power_before_w: st.and_then(|s| s.before.power_draw_w),
        power_after_w: st.and_then(|s| s.after.power_draw_w),
        flags: st.map(|s| s.flags.join("; ")).unwrap_or_default(),
    }
}

/// How many of a kernel's blocks ran alone after their round's process could not judge
/// them (`--isolation round`), as the end of the receipt's order; empty when none did.
fn run_alone_after_their_round(rows: &[&BlockRow]) -> String {
    let alone = rows
        .iter()
        .filter(|r| r.dir.ends_with(process::ALONE_SUFFIX))
        .count();
    match alone {
        0 => String::new(),
        1 => "; 1 block run alone after its round's process could not judge it".into(),
        n => format!("; {n} blocks run alone after their round's process could not judge them"),
    }
}

/// Combine one kernel's block receipts into one receipt over all rounds.
fn combine(
    name: &str,
    rows: &[&BlockRow],
    rounds: u32,
    plan: &Plan,
    dir: &Path,
) -> anyhow::Result<Receipt> {
    let first = rows
        .iter()
        .find_map(|r| r.receipt.clone())
        .with_context(|| format!("{name}: no block produced a receipt"))?;
    let mut r = first;
    r.command = std::env::args().collect();
    r.created_utc = utc_timestamp();
    r.claim = format!("{name}: per-round distributions from alternating rounds (see rounds.csv)");
    r.measurement.rounds = u64::from(rounds);
    r.measurement.order = format!(
        "{}, {}{}",
        plan.order.describe(),
        plan.isolation.describe(),
        run_alone_after_their_round(rows)
    );
    r.measurement.raw_samples.clear();
    r.measurement.gpu_state.clear();
    r.artifacts.clear();
    r.measurement.warmup.launches = 0;
    let mut all = Vec::new();
    let mut failures = 0;
    for row in rows {
        let Some(b) = &row.receipt else { continue };
        for raw in &b.measurement.raw_samples {
            let path = format!("{}/{}", row.dir, raw.path);
            r.measurement.raw_samples.push(receipt::RawSamples {
                round: u64::from(row.round),
                position: u64::from(row.position),
                path: path.clone(),
                sha256: raw.sha256.clone(),
            });
            let bytes = std::fs::metadata(dir.join(&path))?.len();
            r.artifacts.push(receipt::Artifact {
                path,
                sha256: raw.sha256.clone(),
                bytes,
                role: "raw-samples".into(),
            });
        }
        let block_receipt = format!("{}/receipt.json", row.dir);
        r.artifacts.push(receipt::Artifact {
            sha256: sha256_file(&dir.join(&block_receipt))?,
            bytes: std::fs::metadata(dir.join(&block_receipt))?.len(),
            path: block_receipt,
            role: receipt::BLOCK_RECEIPT_ROLE.into(),
        });
        r.measurement
            .gpu_state
            .extend(b.measurement.gpu_state.iter().cloned());
        r.measurement.warmup.launches = r
            .measurement
            .warmup
            .launches
            .max(b.measurement.warmup.launches);
        failures += b.correctness.failures;
        all.extend(row.samples.iter().copied());
    }
    r.correctness.failures = failures;
    let parts: Option<Vec<&receipt::Integrity>> = rows
        .iter()
        .filter_map(|row| row.receipt.as_ref())
        .map(|b| b.integrity.as_ref())
        .collect();
    r.integrity = parts.and_then(|p| receipt::Integrity::combined(&p));
    let s = Summary::of(&all).context("no samples")?;
    let gbs = gb_per_s(r.workload.useful_bytes_per_launch, s.median);
    r.result = receipt::ResultSummary {
        median_us: s.median,
        p10_us: s.p10,
        p90_us: s.p90,
        useful_gb_s: gbs,
        pct_of_peak: 100.0 * gbs / r.hardware.theoretical_peak_gb_s,
        flagged_blocks: r
            .measurement
            .gpu_state
            .iter()
            .filter(|b| !b.flags.is_empty())
            .count() as u64,
        rounds: None,
    };
    Ok(r)
}

/// A rate's share of the rounds' ceiling (the fastest copy kernel), in percent.
fn pct_of_ceiling(gb_s: Option<f64>, ceiling: Option<&(String, f64)>) -> Option<f64> {
    gb_s.zip(ceiling)
        .filter(|(_, c)| c.1 > 0.0)
        .map(|(g, c)| 100.0 * g / c.1)
}

/// A combined receipt's place in its rounds: the ceiling and this kernel's share of it, and
/// its round-level ratio against the baseline (`None` for the baseline itself).
fn place_in_rounds(
    names: &[String],
    ceiling: Option<&(String, f64)>,
    gb_s: Option<f64>,
    baseline: &str,
    ratio: Option<(f64, Option<(f64, f64)>)>,
) -> receipt::RoundsContext {
    receipt::RoundsContext {
        kernels: names.to_vec(),
        ceiling_kernel: ceiling.map(|c| c.0.clone()),
        ceiling_gb_s: ceiling.map(|c| c.1),
        pct_of_ceiling: pct_of_ceiling(gb_s, ceiling),
        baseline: baseline.to_string(),
        ratio_to_baseline: ratio.map(|r| r.0),
        ratio_interval: ratio.and_then(|r| r.1).map(|(lo, hi)| [lo, hi]),
    }
}

pub fn run(args: RoundsArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let plan = Plan::resolve(&args)?;
    // Every block would fail the same way without the device: say so once, before a folder.
    klab_cuda::device::Device::check(args.device)?;
    let dir = output_dir(args.out.as_deref(), "rounds")?;
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    eprintln!("klab rounds: writing {}", dir.display());

    let (blocks, rounds, resolution) = run_blocks(&plan, &args, policy, &dir)?;
    let rows = &blocks.rows;
    let time = blocks.time();
    eprintln!("klab rounds: {}", time.describe(rows.len() as u64));
    write_atomic(&dir.join("phases.csv"), blocks.phases_csv.as_bytes())?;
    write_atomic(&dir.join("rounds.log"), blocks.log.as_bytes())?;
    let records: Vec<RoundsBlock> = rows.iter().map(block_record).collect();
    write_atomic(&dir.join("rounds.csv"), rounds_csv(&records).as_bytes())?;
    if !blocks.errors.is_empty() {
        bail!(
            "{} block(s) could not run: {}",
            blocks.errors.len(),
            blocks.errors.join("; ")
        );
    }

    let rates = Rates::of(&plan, rows, args.device)?;
    let mut text = plan.header(&args, rounds);
    text.push_str(&rates.table(&plan));
    for r in &blocks.reruns {
        text.push_str(&r.describe());
        text.push('\n');
    }
    let ratios = Ratios::against_baseline(&plan, rows, rounds);
    text.push_str(&ratios.text);
    if let Some(r) = &resolution {
        text.push_str(&r.describe());
        text.push('\n');
    }
    // Every receipt is written, even when an analysis could not be made.
    write_receipts(&plan, rows, &rates, &ratios.analyses, rounds, &dir)?;
    if let Some(e) = ratios.error {
        return Err(e.context("analysing the rounds"));
    }
    write_atomic(&dir.join("summary.txt"), text.as_bytes())?;
    let json = RoundsSummary {
        baseline: plan.baseline.clone(),
        n: Some(plan.n),
        rounds: Some(u64::from(rounds)),
        blocks: Some(rows.len() as u64),
        order: plan.order.of_round(&plan.names, 1),
        round_order: Some(plan.order),
        isolation: Some(plan.isolation),
        config: Some(serde_json::to_value(args.timing.config())?),
        analyses: ratios.analyses,
        rates: rates.rows,
        ceiling: rates.ceiling.as_ref().map(|c| CeilingRate {
            kernel: c.0.clone(),
            gb_s: c.1,
        }),
        theoretical_peak_gb_s: rates.peak,
        time: Some(time),
        resolution,
        reruns: blocks.reruns.clone(),
    };
    write_atomic(
        &dir.join("summary.json"),
        (serde_json::to_string_pretty(&json)? + "\n").as_bytes(),
    )?;
    let report = RoundsReport {
        summary: json,
        artifacts: dir.clone(),
        text,
    };
    output::emit(&report, args.output.format())?;
    Ok(if rows.iter().any(|r| !r.correct) {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// What rounds report: the summary (as summary.json holds it) and the folder; as text,
/// summary.txt, which the analysis wrote from the same rows.
#[derive(serde::Serialize)]
struct RoundsReport {
    #[serde(flatten)]
    summary: RoundsSummary,
    artifacts: std::path::PathBuf,
    #[serde(skip)]
    text: String,
}

impl Report for RoundsReport {
    fn human(&self) -> String {
        format!("{}artifacts: {}\n", self.text, self.artifacts.display())
    }

    /// One row per kernel: its rate and its ratio to the baseline.
    fn csv(&self) -> anyhow::Result<String> {
        Ok(klab_evidence::schema::rounds_result_csv(&self.summary))
    }
}

/// What the rounds are of: the kernels, the baseline among them, the size and each
/// kernel's operation, resolved before any block runs.
struct Plan {
    kernels: Vec<Kernel>,
    names: Vec<String>,
    baseline: String,
    n: u64,
    /// Each kernel's operation, at the size the blocks time.
    ops: Vec<String>,
    /// This klab binary, hashed once for every block's receipt.
    klab: KlabBinary,
    isolation: Isolation,
    order: RoundOrder,
}

impl Plan {
    fn resolve(args: &RoundsArgs) -> anyhow::Result<Plan> {
        args.resolution.checked(args.rounds)?;
        args.order
            .check_rounds(args.rounds)
            .map_err(anyhow::Error::msg)?;
        let kernels = Kernel::parse_all(&args.kernels, Scope::Default)?
            .into_iter()
            .map(|k| k.at_shape(args.shape.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if kernels.len() < 2 {
            bail!(
                "rounds alternate at least two kernels; {} names one",
                args.kernels.join(" ")
            );
        }
        let names: Vec<String> = kernels.iter().map(|k| k.name()).collect();
        // The baseline is one of these kernels: named as it was given, by its own name, or
        // by any spec that resolves to it (never a built-in that merely shares the name).
        let baseline = match &args.baseline {
            Some(b) => kernels
                .iter()
                .find(|k| k.name() == *b || k.spec() == *b)
                .or_else(|| {
                    let r = registry::expand_one(b, Scope::Default).ok()?;
                    kernels.iter().find(|k| k.kref == r)
                })
                .map(|k| k.name())
                .with_context(|| format!("baseline '{b}' is not one of the kernels"))?,
            None => names[0].clone(),
        };
        for k in &kernels {
            k.refuse_n_for_declared(args.n)?;
        }
        let n = args.n.unwrap_or_else(|| kernels[0].default_n());
        let ops: Vec<String> = kernels
            .iter()
            // At the size the blocks will time: a size a workload refuses is refused here, once.
            .map(|k| workload_info(k, n, args.device).map(|i| i.operation))
            .collect::<Result<_, _>>()?;
        Ok(Plan {
            kernels,
            names,
            baseline,
            n,
            ops,
            klab: KlabBinary::this()?,
            isolation: args.isolation,
            order: args.order,
        })
    }

    /// One round's order as the summary's first line gives it.
    fn order_line(&self) -> String {
        let first = self.order.of_round(&self.names, 1).join(" ");
        match self.order {
            RoundOrder::Mirrored => first,
            RoundOrder::Alternating => format!("{first}, reversed every other round"),
        }
    }

    /// The summary's first lines: the order, the size and the timing method.
    fn header(&self, args: &RoundsArgs, rounds: u32) -> String {
        let config = args.timing.config();
        // A declared operation's size is its bench shape.
        let size = match (
            self.kernels[0].size_variable(),
            &self.kernels[0].decl.op.spec.bench,
        ) {
            (None, Some(shape)) => format!(
                "shape {}",
                shape
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            _ => format!("n = {}", self.n),
        };
        let isolation = self
            .isolation
            .caveat()
            .map(|c| format!("isolation caveat: {c}\n"))
            .unwrap_or_default();
        format!(
            "klab rounds: {} rounds, order per round: {} ({}), {size}, regime {}, timer {}, {} samples per block\nregime caveat: {}\n{isolation}\n",
            rounds,
            self.order_line(),
            self.isolation.describe(),
            config.regime,
            config.timer,
            config.samples,
            config.regime.caveat()
        )
    }

    fn position_of(&self, name: &str) -> usize {
        self.names.iter().position(|x| x == name).unwrap_or(0)
    }
}

/// Every block's row, and where the blocks' time went.
struct Blocks {
    rows: Vec<BlockRow>,
    /// Each block's command line, output and end, for rounds.log.
    log: String,
    /// Blocks that could not run (not a kernel's failure).
    errors: Vec<String>,
    phases_csv: String,
    totals: klab_engine::timing::Phases,
    wall_total: f64,
    /// The processes the blocks ran in.
    processes: u64,
    /// Blocks held down by power or heat and run again.
    reruns: Vec<Rerun>,
    /// Settling blocks run (`--isolation round`), counted in no ratio.
    settling: u64,
    /// Seconds blocks' processes worked beside other blocks' turns (started ahead, and
    /// finishing on the host after the next block's turn, [`process::Ahead`]): in the
    /// phases, not in `wall_total`.
    overlapped_s: f64,
}

impl Blocks {
    fn new() -> Blocks {
        Blocks {
            rows: Vec::new(),
            log: String::new(),
            errors: Vec::new(),
            phases_csv: String::from(
                "round,position,kernel,wall_s,setup_s,compile_s,inputs_s,validations_s,timed_s,other_s,checker\n",
            ),
            totals: klab_engine::timing::Phases::default(),
            wall_total: 0.0,
            processes: 0,
            reruns: Vec::new(),
            settling: 0,
            overlapped_s: 0.0,
        }
    }

    /// Where the time went, over every block: what the command costs beyond the kernels.
    fn time(&self) -> klab_evidence::schema::RoundsTime {
        let mut checkers: Vec<&str> = Vec::new();
        for r in self.rows.iter().filter_map(|r| r.receipt.as_ref()) {
            for p in &r.measurement.phases {
                if !checkers.contains(&p.checker.as_str()) {
                    checkers.push(&p.checker);
                }
            }
        }
        let mut phases = self.totals.clone();
        phases.checker = checkers.join("; ");
        klab_evidence::schema::RoundsTime {
            wall_s: self.wall_total,
            other_s: (self.wall_total + self.overlapped_s - phases.total_s()).max(0.0),
            phases,
            processes: Some(self.processes),
            settling: (self.settling > 0).then_some(self.settling),
            overlapped_s: (self.overlapped_s > 0.0).then_some(self.overlapped_s),
        }
    }
}

impl Blocks {
    /// A measured block's phases, in phases.csv and the totals; how its `wall_s` went, as
    /// a few words.
    fn account(
        &mut self,
        place: Place,
        name: &str,
        wall_s: f64,
        p: &klab_engine::timing::Phases,
    ) -> String {
        let label = if place.rerun {
            format!("{name} (re-run)")
        } else {
            name.to_string()
        };
        let position = place.position.to_string();
        self.phases_row(place.round, &position, &label, wall_s, p)
    }

    /// A round's settling block (`--isolation round`): its phases in phases.csv (no
    /// position: it counts in no ratio) and the totals, since its process spent them (the
    /// device's opening among them, which its process charges to its first block).
    fn account_settling(
        &mut self,
        round: u32,
        label: &str,
        wall_s: f64,
        p: &klab_engine::timing::Phases,
    ) {
        self.settling += 1;
        self.phases_row(round, "", label, wall_s, p);
    }

    fn phases_row(
        &mut self,
        round: u32,
        position: &str,
        label: &str,
        wall_s: f64,
        p: &klab_engine::timing::Phases,
    ) -> String {
        let other = (wall_s - p.total_s()).max(0.0);
        self.phases_csv.push_str(&format!(
            "{},{},{},{wall_s:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{other:.4},{}\n",
            round,
            position,
            klab_core::csv::field(label),
            p.setup_s,
            p.compile_s,
            p.inputs_s,
            p.validations_s,
            p.timed_s,
            klab_core::csv::field(&p.checker)
        ));
        let t = &mut self.totals;
        t.setup_s += p.setup_s;
        t.compile_s += p.compile_s;
        t.inputs_s += p.inputs_s;
        t.validations_s += p.validations_s;
        t.timed_s += p.timed_s;
        format!("; {wall_s:.2} s: {}, other {other:.2} s", p.describe())
    }
}

/// Where a block runs: its round, its position in the round's order, and whether it is the
/// re-run of a block the GPU's cap held down.
#[derive(Debug, Clone, Copy)]
struct Place {
    round: u32,
    position: usize,
    rerun: bool,
}

/// What held a block that passed down, when NVML saw the power or thermal cap during it.
fn capped_pass(row: &BlockRow) -> Option<String> {
    if !row.correct {
        return None;
    }
    row.state.as_ref()?.capped()
}

/// Which run of a capped block counts, given its re-run: a re-run shown clear takes its
/// place; a re-run held down too means the kernel's own draw caps the GPU, and the first run
/// (at its place in the alternation) counts against it, as it does when the re-run's state
/// is unknown; a re-run that did not pass counts as what it is.
fn after_capped(rerun: &BlockRow) -> RerunKept {
    if !rerun.correct {
        RerunKept::RerunFailed
    } else if rerun.state.is_none() {
        RerunKept::FirstRerunUnobserved
    } else if capped_pass(rerun).is_some() {
        RerunKept::FirstCappedAgain
    } else {
        RerunKept::Rerun
    }
}

/// Every round's blocks, each a `klab bench` child in its own folder under `dir`: the
/// `--rounds` asked for, then with `--resolve` one more at a time until the widest ratio
/// interval is narrow enough or the next round would not fit in the budget. Returns the
/// blocks, the rounds run and, with `--resolve`, how that ended.
fn run_blocks(
    plan: &Plan,
    args: &RoundsArgs,
    policy: VerifyPolicy,
    dir: &Path,
) -> anyhow::Result<(Blocks, u32, Option<Resolution>)> {
    let mut blocks = Blocks::new();
    let kernels: Vec<&Kernel> = plan.kernels.iter().collect();
    let per_round = kernels.len() as u64 * u64::from(plan.order.blocks_per_kernel());
    let bar = crate::cmd::progress_bar("rounds", u64::from(args.rounds) * per_round, "blocks");
    let every = EveryRound {
        plan,
        args,
        policy,
        dir,
        kernels: &kernels,
        bar: &bar,
    };
    let started = std::time::Instant::now();
    let mut rounds = 0;
    // Without a device to ask (no driver here), no block opens a context early.
    let mut ahead = process::Ahead::new(
        klab_cuda::device::Device::shares_processes(args.device).unwrap_or(false),
    );
    // Rounds end only at a whole multiple of the order's step (alternating rounds in pairs).
    let step = plan.order.rounds_step();
    let resolution = loop {
        if rounds >= args.rounds && rounds % step == 0 {
            // Blocks that could not run end the rounds (the caller says so).
            let Some(target) = args.resolution.resolve.filter(|_| blocks.errors.is_empty()) else {
                break None;
            };
            let (width, resolvable) = widest_interval(plan, &blocks.rows, rounds);
            let elapsed_s = started.elapsed().as_secs_f64();
            if let Some(stopped) = resolve::next(
                target,
                width,
                resolvable,
                rounds,
                plan.order.rounds_step(),
                elapsed_s,
                args.resolution.budget,
            ) {
                break Some(Resolution {
                    target,
                    half_width: width,
                    reached: stopped == resolve::Stop::Resolved,
                    stopped,
                    rounds,
                    elapsed_s,
                    budget_s: args.resolution.budget,
                });
            }
            bar.inc_length(per_round * u64::from(step));
        }
        rounds += 1;
        one_round(&every, &mut blocks, &mut ahead, rounds)?;
    };
    bar.finish_and_clear();
    Ok((blocks, rounds, resolution))
}

/// What every round of one `klab rounds` shares: the plan and arguments, the checker, the
/// folder, the kernels (each round orders them as the plan's order says) and the progress
/// bar.
struct EveryRound<'a> {
    plan: &'a Plan,
    args: &'a RoundsArgs,
    policy: VerifyPolicy,
    dir: &'a Path,
    kernels: &'a [&'a Kernel],
    bar: &'a indicatif::ProgressBar,
}

/// Round `round`'s blocks, in order: in one process (`--isolation round`), the blocks it
/// could not judge then alone, or each alone; each counted in `blocks` as it comes.
fn one_round(
    every: &EveryRound,
    blocks: &mut Blocks,
    ahead: &mut process::Ahead,
    round: u32,
) -> anyhow::Result<()> {
    let EveryRound {
        plan,
        args,
        policy,
        dir,
        kernels,
        bar,
    } = *every;
    let order = plan.order.of_round(kernels, round);
    let benches: Vec<BlockBench> = order
        .iter()
        .enumerate()
        .map(|(position, k)| BlockBench::at(plan, args, dir, place(round, position), k))
        .collect();
    let mut ran: Vec<Option<BlockRun>> = match args.isolation {
        Isolation::Round => {
            bar.set_message(format!("round {round}, one process"));
            let settle = BlockBench::settling(plan, args, dir, round, order[0]);
            process::run_round(&settle, &benches, args, policy, blocks, round)?
        }
        Isolation::Block => benches.iter().map(|_| None).collect(),
    };
    // The block after each, started ahead: the next in this round, or the next round's
    // first when that round is sure to run (one the resolver adds is not, but the second of
    // a pair of alternating rounds is).
    let sure = round < args.rounds || round % plan.order.rounds_step() != 0;
    let next_round_first = (sure && args.isolation == Isolation::Block).then(|| {
        let first = plan.order.of_round(kernels, round + 1)[0];
        BlockBench::at(plan, args, dir, place(round + 1, 0), first)
    });
    let next_of = |position: usize| match benches.get(position + 1) {
        Some(b) if args.isolation == Isolation::Block => Some(b),
        Some(_) => None,
        None => next_round_first.as_ref(),
    };
    for (position, kernel) in order.iter().enumerate() {
        bar.set_message(format!("round {round} {}", kernel.name()));
        let say = |status: &str| {
            bar.suspend(|| {
                eprintln!(
                    "klab rounds: round {round} position {position} {}: {status}",
                    kernel.name()
                )
            })
        };
        let mut run = |blocks: &mut Blocks, at: Place| {
            let (bench, run) = match (at.rerun, ran[position].take()) {
                // What the round's process judged.
                (false, Some(run)) => (benches[position].clone(), run),
                // A re-run, and a block alone: in folders of their own after a round's
                // process, which may have left files in the block's.
                (rerun, _) => {
                    let bench = if rerun {
                        BlockBench::at(plan, args, dir, at, kernel)
                    } else if args.isolation == Isolation::Round {
                        benches[position].alone()
                    } else {
                        benches[position].clone()
                    };
                    let next = next_of(position);
                    let run = process::run_alone(&bench, next, ahead, args, policy, blocks, at)?;
                    (bench, run)
                }
            };
            record_block(blocks, at, &kernel.name(), &bench, run)
        };
        counted_block(
            blocks,
            place(round, position),
            &kernel.name(),
            &mut run,
            &say,
        )?;
        bar.inc(1);
    }
    Ok(())
}

/// One block at `at`, run by `run`; when the GPU's power or thermal cap held it down, run
/// once more in its place, and the run that counts ([`after_capped`]) kept in `blocks`.
fn counted_block(
    blocks: &mut Blocks,
    at: Place,
    kernel: &str,
    run: &mut dyn FnMut(&mut Blocks, Place) -> anyhow::Result<String>,
    say: &dyn Fn(&str),
) -> anyhow::Result<()> {
    let status = run(blocks, at)?;
    say(&status);
    let Some(why) = blocks.rows.last().and_then(capped_pass) else {
        return Ok(());
    };
    // `run` leaves exactly one row for each block it ran.
    let first = blocks.rows.pop().expect("the block just run");
    let status = run(blocks, Place { rerun: true, ..at })?;
    say(&format!(
        "run again, as the cap held it down ({why}): {status}"
    ));
    let rerun = blocks.rows.pop().expect("the block just run");
    let kept = after_capped(&rerun);
    blocks.reruns.push(Rerun {
        round: at.round,
        position: at.position as u32,
        kernel: kernel.to_string(),
        why,
        first: first.dir.clone(),
        rerun: rerun.dir.clone(),
        kept,
    });
    blocks.rows.push(match kept {
        RerunKept::FirstCappedAgain | RerunKept::FirstRerunUnobserved => first,
        RerunKept::Rerun | RerunKept::RerunFailed => rerun,
    });
    Ok(())
}

/// The farthest any ratio's interval reaches from it, relative to it
/// (`SpeedupAnalysis::reach`), after `rounds` rounds (`None`
/// while one has no interval), and whether more rounds can resolve them all (no kernel
/// failed a gate, every analysis could be made).
fn widest_interval(plan: &Plan, rows: &[BlockRow], rounds: u32) -> (Option<f64>, bool) {
    let ratios = Ratios::against_baseline(plan, rows, rounds);
    let resolvable = ratios.error.is_none() && ratios.analyses.len() + 1 == plan.names.len();
    let widths: Option<Vec<f64>> = ratios.analyses.iter().map(|a| a.analysis.reach()).collect();
    let widest = widths.and_then(|w| w.into_iter().reduce(f64::max));
    (widest, resolvable)
}

/// The first run of the block at `position` of `round`.
fn place(round: u32, position: usize) -> Place {
    Place {
        round,
        position,
        rerun: false,
    }
}

/// A block's run, as a row in `blocks` (its receipt and samples read from its folder) and
/// its time in the phases; what to say of it, in a few words.
fn record_block(
    blocks: &mut Blocks,
    place: Place,
    name: &str,
    bench: &BlockBench,
    run: BlockRun,
) -> anyhow::Result<String> {
    let Place {
        round, position, ..
    } = place;
    let BlockRun {
        verdict,
        result,
        wall_s,
        ahead_s,
    } = run;
    let block_dir = &bench.dir;
    let name = name.to_string();
    let mut row = BlockRow {
        round,
        position: position as u32,
        variant: name.clone(),
        correct: false,
        dir: bench.rel.clone(),
        receipt: None,
        samples: Vec::new(),
        state: None,
    };
    let status = match &result {
        Some(ChildResult::Bench {
            verdict: Verdict::Pass,
            receipt: Some(_),
            ..
        }) => {
            // The parent chose the block's folder; read the receipt from there (the result
            // line's path is text, a folder's name need not be).
            let r = Receipt::load(&block_dir.join("receipt.json"))?;
            for raw in &r.measurement.raw_samples {
                let bytes = read_regular(&block_dir.join(&raw.path), Input::SAMPLES)?;
                let s = parse_samples_csv(&bytes, r.workload.rotation_slots)?;
                row.samples.extend(s.iter().map(|x| x.elapsed_us));
            }
            let median = Summary::of(&row.samples).map(|s| s.median).unwrap_or(0.0);
            let time = match r.measurement.phases.first() {
                Some(p) => {
                    // What its process did beside other blocks' turns: before its own (less
                    // what it waited), and after the next block's.
                    let waited_s = match &result {
                        Some(ChildResult::Bench {
                            waited_s: Some(w), ..
                        }) => *w,
                        _ => 0.0,
                    };
                    let ahead = (ahead_s - waited_s).max(0.0);
                    blocks.overlapped_s += ahead;
                    blocks.account(place, &name, wall_s + ahead, p)
                }
                None => format!("; {wall_s:.2} s"),
            };
            row.correct = true;
            row.state = r.measurement.gpu_state.first().cloned();
            row.receipt = Some(r);
            format!("median {median:.3} us{time}")
        }
        // A gate, a hang or a crash is this kernel's failure; the other blocks still run.
        _ if verdict.is_kernel_failure() => format!("FAILED: {}", verdict.describe()),
        _ => {
            let why = verdict.describe();
            blocks.errors.push(format!("round {round} {name}: {why}"));
            format!("ERROR: {why}")
        }
    };
    blocks.rows.push(row);
    Ok(status)
}

/// One kernel's line of the table: its blocks and median rate.
struct Line {
    ok: usize,
    blocks: usize,
    summary: Option<Summary>,
    gb_s: Option<f64>,
}

/// Every kernel's median rate, the ceiling (the fastest copy in these rounds) and the
/// device's theoretical peak.
struct Rates {
    lines: Vec<Line>,
    rows: Vec<RateRow>,
    ceiling: Option<(String, f64)>,
    peak: Option<f64>,
}

impl Rates {
    fn of(plan: &Plan, rows: &[BlockRow], device: u32) -> anyhow::Result<Rates> {
        let mut lines = Vec::new();
        for (k, name) in plan.names.iter().enumerate() {
            let mine: Vec<&BlockRow> = rows.iter().filter(|r| r.variant == *name).collect();
            let all: Vec<f64> = mine
                .iter()
                .flat_map(|r| r.samples.iter().copied())
                .collect();
            let summary = Summary::of(&all);
            let gb_s = match &summary {
                Some(s) => Some(gb_per_s(
                    workload_info(&plan.kernels[k], plan.n, device)?.useful_bytes,
                    s.median,
                )),
                None => None,
            };
            lines.push(Line {
                ok: mine.iter().filter(|r| r.correct).count(),
                blocks: mine.len(),
                summary,
                gb_s,
            });
        }
        let ceiling = plan
            .names
            .iter()
            .zip(&lines)
            .zip(&plan.kernels)
            .filter(|(_, k)| k.decl.operation == OpKind::Copy)
            .filter_map(|((name, l), _)| l.gb_s.map(|g| (name.clone(), g)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let peak = rows
            .iter()
            .find_map(|r| r.receipt.as_ref())
            .map(|r| r.hardware.theoretical_peak_gb_s);
        let rows = plan
            .names
            .iter()
            .zip(&lines)
            .zip(&plan.kernels)
            .map(|((name, l), k)| RateRow {
                kernel: name.clone(),
                blocks: Some(l.blocks as u64),
                blocks_passed: Some(l.ok as u64),
                median_us: l.summary.as_ref().map(|s| s.median),
                median_gb_s: l.gb_s,
                pct_of_ceiling: pct_of_ceiling(l.gb_s, ceiling.as_ref()),
                pct_of_peak: l.gb_s.zip(peak).map(|(g, p)| 100.0 * g / p),
                prediction: k.decl.prediction.clone(),
            })
            .collect();
        Ok(Rates {
            lines,
            rows,
            ceiling,
            peak,
        })
    }

    /// Says which kernels ran faster than the ceiling, and why that can happen: the ceiling
    /// is the fastest copy timed here, not a bound. A kernel whose access order keeps more of
    /// its bytes in L2 (under same-buffer, or at a size near L2) can beat a copy of as many
    /// bytes, and a reader seeing 117% of a "ceiling" must not take it for a timing error.
    /// It reads the shares `summary.json` gets, so the two cannot disagree.
    fn above_ceiling_note(&self) -> Option<String> {
        let (copy, _) = self.ceiling.as_ref()?;
        let above: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.above_ceiling())
            .filter_map(|r| Some(format!("{} at {:.1}%", r.kernel, r.pct_of_ceiling?)))
            .collect();
        if above.is_empty() {
            return None;
        }
        Some(format!(
            "above the ceiling: {} of {copy}'s rate. The ceiling is the fastest copy timed in \
             these rounds, not a bound: a kernel whose accesses are served more from L2 (see the \
             regime caveat) can move its bytes faster than this copy; compare against DRAM at a \
             size well beyond L2 or under --regime l2-flushed\n",
            above.join(", ")
        ))
    }

    /// The table of rates, the ceiling's line and the manifests' predictions.
    fn table(&self, plan: &Plan) -> String {
        let mut text = format!(
            "{:<12} {:>6} {:>11} {:>23} {:>10} {:>9} {:>7}\n",
            "kernel", "blocks", "median us", "p10 - p90 us", "GB/s", "% ceiling", "% peak"
        );
        let pct = |g: Option<f64>, of: Option<f64>| match (g, of) {
            (Some(g), Some(of)) if of > 0.0 => format!("{:.1}", 100.0 * g / of),
            _ => "-".into(),
        };
        for (name, l) in plan.names.iter().zip(&self.lines) {
            let blocks = format!("{}/{}", l.ok, l.blocks);
            match &l.summary {
                Some(s) => text.push_str(&format!(
                    "{:<12} {:>6} {:>11.3} {:>23} {:>10.1} {:>9} {:>7}\n",
                    name,
                    blocks,
                    s.median,
                    format!("{:.3} - {:.3}", s.p10, s.p90),
                    l.gb_s.unwrap_or(0.0),
                    pct(l.gb_s, self.ceiling.as_ref().map(|c| c.1)),
                    pct(l.gb_s, self.peak),
                )),
                None => text.push_str(&format!("{name:<12} {blocks:>6} {:>11}\n", "-")),
            }
        }
        match &self.ceiling {
            Some((name, g)) => text.push_str(&format!(
                "ceiling: {name} at {g:.1} GB/s, the fastest copy in these rounds; peak: {} (2 x memory clock x bus width)\n",
                self.peak.map(|p| format!("{p:.1} GB/s")).unwrap_or_else(|| "unknown".into())
            )),
            None => text.push_str("ceiling: no copy kernel in these rounds, so no % of ceiling\n"),
        }
        if let Some(note) = self.above_ceiling_note() {
            text.push_str(&note);
        }
        // Predictions declared in the manifests, beside the outcome above.
        for (k, name) in plan.names.iter().enumerate() {
            if let Some(p) = &plan.kernels[k].decl.prediction {
                text.push_str(&format!("predicted before measuring, {name}: {p}\n"));
            }
        }
        text.push('\n');
        text
    }
}

/// The round-level ratios of every candidate that passed every block against a baseline
/// that did, their text, and an analysis that could not be made.
struct Ratios {
    analyses: Vec<RoundsAnalysis>,
    text: String,
    error: Option<anyhow::Error>,
}

/// `name`'s samples in each of `rounds` rounds; in SM cycles (each block's samples times its
/// clock) with `cycles`, `None` there when a block's clock is unknown.
fn round_samples(
    rows: &[BlockRow],
    rounds: u32,
    name: &str,
    cycles: bool,
) -> Option<Vec<Vec<f64>>> {
    (1..=rounds)
        .map(|round| {
            let mut all = Vec::new();
            for b in rows
                .iter()
                .filter(|b| b.round == round && b.variant == name)
            {
                let scale = if cycles {
                    b.state.as_ref()?.sm_clock_mhz()?
                } else {
                    1.0
                };
                all.extend(b.samples.iter().map(|s| s * scale));
            }
            Some(all)
        })
        .collect()
}

/// The lowest and highest SM clock of the blocks, in MHz.
fn clock_range(rows: &[BlockRow]) -> Option<(f64, f64)> {
    let clocks = rows.iter().filter_map(|b| b.state.as_ref()?.sm_clock_mhz());
    clocks.fold(None, |r, c| match r {
        None => Some((c, c)),
        Some((lo, hi)) => Some((f64::min(lo, c), f64::max(hi, c))),
    })
}

/// How far the blocks' SM clocks may spread before the ratio in cycles is printed beside
/// the ratio in time.
const CLOCKS_MOVED: f64 = 0.01;

/// One line: a ratio in SM cycles, for the summary.
fn cycles_line(a: &SpeedupAnalysis, (lo, hi): (f64, f64)) -> String {
    let verdict = match a.verdict {
        SpeedVerdict::Faster => "candidate faster",
        SpeedVerdict::Slower => "candidate slower",
        SpeedVerdict::Unresolved => "unresolved",
    };
    let interval = a
        .interval
        .map(|(l, h)| format!(", 95% {l:.4}x-{h:.4}x"))
        .unwrap_or_default();
    format!(
        "in SM cycles (time x SM clock; the blocks' clocks ran {lo:.0}-{hi:.0} MHz): {:.4}x{interval}, {verdict}\n",
        a.ratio
    )
}

impl Ratios {
    fn against_baseline(plan: &Plan, rows: &[BlockRow], rounds: u32) -> Ratios {
        let mut r = Ratios {
            analyses: Vec::new(),
            text: String::new(),
            error: None,
        };
        let baseline = &plan.baseline;
        let all_passed = |name: &str| rows.iter().filter(|r| r.variant == name).all(|r| r.correct);
        if !all_passed(baseline) {
            r.text += &format!(
                "the baseline {baseline} failed a gate in at least one block: no ratios are reported\n"
            );
            return r;
        }
        let cfg = IntervalConfig::default();
        let in_time = |name: &str| round_samples(rows, rounds, name, false).unwrap_or_default();
        let b = in_time(baseline);
        let b_cycles = round_samples(rows, rounds, baseline, true);
        let clocks = clock_range(rows);
        let bop = &plan.ops[plan.position_of(baseline)];
        for (k, name) in plan.names.iter().enumerate() {
            if name == baseline {
                continue;
            }
            if !all_passed(name) {
                r.text.push_str(&format!(
                    "{name}: a block failed its gate, so no ratio is reported for it\n\n"
                ));
                continue;
            }
            // An analysis that cannot be made still leaves every receipt written.
            let a = match analyze_speedup(&b, &in_time(name), &cfg) {
                Ok(a) => a,
                Err(e) => {
                    r.error = Some(anyhow::Error::from(e));
                    break;
                }
            };
            let in_cycles = b_cycles
                .as_ref()
                .zip(round_samples(rows, rounds, name, true))
                .and_then(|(b, c)| analyze_speedup(b, &c, &cfg).ok());
            if plan.ops[k] != *bop {
                r.text.push_str(&format!(
                    "note: {name} computes '{}', {baseline} computes '{bop}': the ratio is context, not a speedup\n",
                    plan.ops[k]
                ));
            }
            r.text.push_str(&render_analysis(&a, baseline, name));
            if let (Some(c), Some((lo, hi))) = (&in_cycles, clocks) {
                if hi - lo > CLOCKS_MOVED * hi {
                    r.text.push_str(&cycles_line(c, (lo, hi)));
                }
            }
            r.text.push('\n');
            r.analyses.push(RoundsAnalysis {
                baseline: baseline.clone(),
                candidate: name.clone(),
                analysis: a,
                in_cycles,
            });
        }
        r
    }
}

/// A combined receipt for every kernel whose blocks all passed, each with its place in
/// these rounds (its share of the ceiling, its ratio).
fn write_receipts(
    plan: &Plan,
    rows: &[BlockRow],
    rates: &Rates,
    analyses: &[RoundsAnalysis],
    rounds: u32,
    dir: &Path,
) -> anyhow::Result<()> {
    for (k, name) in plan.names.iter().enumerate() {
        let mine: Vec<&BlockRow> = rows.iter().filter(|r| r.variant == *name).collect();
        if rates.lines[k].ok != mine.len() {
            continue;
        }
        let mut r = combine(name, &mine, rounds, plan, dir)?;
        let ratio = analyses.iter().find(|x| x.candidate == *name);
        // The share of the ceiling is of the receipt's own rate, which is what a reader
        // recomputes it from (the table's rate is at `n`, a declared shape's may differ).
        r.result.rounds = Some(place_in_rounds(
            &plan.names,
            rates.ceiling.as_ref(),
            Some(r.result.useful_gb_s),
            &plan.baseline,
            ratio.map(|x| (x.analysis.ratio, x.analysis.interval)),
        ));
        r.validate()
            .with_context(|| format!("combined receipt for {name}"))?;
        r.write(&dir.join(format!("{name}.receipt.json")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel faster than the fastest copy is named with its share, and the note says the
    /// ceiling is no bound; with every kernel at or under it there is no note.
    #[test]
    fn a_kernel_above_the_ceiling_is_named_and_the_ceiling_explained() {
        let row = |kernel: &str, pct: f64| RateRow {
            kernel: kernel.into(),
            blocks: Some(6),
            blocks_passed: Some(6),
            median_us: Some(1.0),
            median_gb_s: Some(pct * 23.096),
            pct_of_ceiling: Some(pct),
            pct_of_peak: None,
            prediction: None,
        };
        let mut rates = Rates {
            lines: Vec::new(),
            rows: vec![
                row("copy", 100.0),
                row("naive", 18.32),
                row("padded", 117.24),
            ],
            ceiling: Some(("copy".into(), 2309.6)),
            peak: Some(3352.3),
        };
        let note = rates.above_ceiling_note().unwrap();
        assert!(
            note.starts_with("above the ceiling: padded at 117.2% of copy's rate."),
            "{note}"
        );
        assert!(note.contains("not a bound"), "{note}");
        assert!(
            !note.contains("naive") && !note.contains("copy at"),
            "{note}"
        );

        rates.rows[2] = row("padded", 100.0);
        assert_eq!(rates.above_ceiling_note(), None);
        // The ceiling's own share, as the rounds compute it, can come out a hair above 100
        // (memcpy was called faster than itself in the lab's ceilings step on an H100).
        let g = 3220.0347717855984;
        let own = pct_of_ceiling(Some(g), Some(&("copy".into(), g))).unwrap();
        assert!(own > 100.0, "the case this guards against: {own}");
        rates.rows[0] = row("copy", own);
        assert_eq!(rates.above_ceiling_note(), None);
        rates.ceiling = None;
        rates.rows[2] = row("padded", 400.0);
        assert_eq!(rates.above_ceiling_note(), None);
    }

    #[test]
    fn a_receipt_knows_its_share_of_the_ceiling_and_its_ratio() {
        let names: Vec<String> = ["sgeam", "copy_vec16", "own4_64"].map(String::from).into();
        let ceiling = ("copy_vec16".to_string(), 4000.0);
        let c = place_in_rounds(
            &names,
            Some(&ceiling),
            Some(3000.0),
            "sgeam",
            Some((0.95, Some((0.93, 0.96)))),
        );
        assert_eq!(c.kernels, names);
        assert_eq!(c.ceiling_kernel.as_deref(), Some("copy_vec16"));
        assert_eq!(c.pct_of_ceiling, Some(75.0));
        assert_eq!(c.ratio_to_baseline, Some(0.95));
        assert_eq!(c.ratio_interval, Some([0.93, 0.96]));
        // The baseline has no ratio; no copy kernel (or a zero rate) means no share.
        let b = place_in_rounds(&names, None, Some(3000.0), "sgeam", None);
        assert_eq!((b.pct_of_ceiling, b.ratio_to_baseline), (None, None));
        let zero = ("copy_vec16".to_string(), 0.0);
        assert_eq!(pct_of_ceiling(Some(1.0), Some(&zero)), None);
        assert_eq!(pct_of_ceiling(None, Some(&ceiling)), None);
    }

    /// A receipt says how many of its blocks ran alone after their round's process.
    #[test]
    fn the_order_counts_the_blocks_run_alone_after_their_round() {
        let at = |dir: &str| BlockRow {
            dir: dir.into(),
            ..block(1, "k", 1.0, 1980, 0)
        };
        let (a, b, c) = (
            at("blocks/r01-p0-k"),
            at("blocks/r02-p1-k-alone"),
            at("blocks/r03-p0-k-alone"),
        );
        assert_eq!(run_alone_after_their_round(&[&a]), "");
        assert_eq!(
            run_alone_after_their_round(&[&a, &b]),
            "; 1 block run alone after its round's process could not judge it"
        );
        assert!(run_alone_after_their_round(&[&a, &b, &c]).starts_with("; 2 blocks run alone"));
    }

    fn block(round: u32, variant: &str, us: f64, mhz: u32, capped_ns: u64) -> BlockRow {
        let state = |ns| klab_core::gpustate::GpuState {
            sm_clock_mhz: Some(mhz),
            power_capped_ns: Some(ns),
            ..Default::default()
        };
        BlockRow {
            round,
            position: 0,
            variant: variant.into(),
            correct: true,
            dir: String::new(),
            receipt: None,
            samples: vec![us; 3],
            state: Some(BlockState::new("b", state(0), state(capped_ns))),
        }
    }

    /// A block the cap held down is run again: a clear re-run takes its place, a re-run
    /// held down too leaves the first (the kernel's own draw counts against it), and a re-run
    /// that failed is what counts, so a capped pass never hides a failure.
    #[test]
    fn a_capped_block_is_run_again_and_the_fair_run_kept() {
        let clear = block(2, "b", 10.0, 1980, 0);
        let capped = block(2, "b", 12.0, 1980, 3_000_000);
        assert_eq!(capped_pass(&clear), None);
        assert_eq!(
            capped_pass(&capped).as_deref(),
            Some("held by the power cap for 3.000 ms during the block")
        );
        // A failed block is a failure, whatever held the GPU down.
        let mut failed = capped.clone();
        failed.correct = false;
        assert_eq!(capped_pass(&failed), None);

        assert_eq!(after_capped(&clear), RerunKept::Rerun);
        assert_eq!(after_capped(&capped), RerunKept::FirstCappedAgain);
        assert_eq!(after_capped(&failed), RerunKept::RerunFailed);
        // A re-run NVML said nothing of cannot be shown clear.
        let mut unseen = clear.clone();
        unseen.state = None;
        assert_eq!(after_capped(&unseen), RerunKept::FirstRerunUnobserved);
        let r = Rerun {
            round: 2,
            position: 1,
            kernel: "b".into(),
            why: capped_pass(&capped).unwrap(),
            first: "blocks/r02-p1-b".into(),
            rerun: "blocks/r02-p1-b-rerun".into(),
            kept: RerunKept::FirstCappedAgain,
        };
        assert_eq!(
            r.describe(),
            "round 2 position 1 b was held down (held by the power cap for 3.000 ms during the block) and run again: the re-run was held down too, so it is the kernel's own draw: the first run is kept and counts against it (runs in blocks/r02-p1-b and blocks/r02-p1-b-rerun)"
        );
    }

    /// A capped block runs once more at its place, and the run that counts is the one left
    /// in the rows, in order; a clear block runs once.
    #[test]
    fn a_capped_block_is_run_again_in_its_place() {
        let place = |rerun| Place {
            round: 2,
            position: 1,
            rerun,
        };
        for (first_ns, rerun_ns, kept, us) in [
            (3_000_000, 0, RerunKept::Rerun, 10.0),
            (3_000_000, 2_000_000, RerunKept::FirstCappedAgain, 12.0),
            (0, 0, RerunKept::Rerun, 12.0),
        ] {
            let mut blocks = Blocks::new();
            blocks.rows.push(block(2, "a", 9.0, 1980, 0));
            let mut ran = Vec::new();
            let mut run = |b: &mut Blocks, p: Place| {
                ran.push(p.rerun);
                let mut row = if p.rerun {
                    block(2, "b", 10.0, 1980, rerun_ns)
                } else {
                    block(2, "b", 12.0, 1980, first_ns)
                };
                row.dir = format!("blocks/r02-p1-b{}", if p.rerun { "-rerun" } else { "" });
                b.rows.push(row);
                Ok("ran".to_string())
            };
            counted_block(&mut blocks, place(false), "b", &mut run, &|_| {}).unwrap();
            let rows: Vec<(&str, f64)> = blocks
                .rows
                .iter()
                .map(|r| (r.variant.as_str(), r.samples[0]))
                .collect();
            assert_eq!(rows, [("a", 9.0), ("b", us)]);
            if first_ns == 0 {
                assert_eq!(ran, [false]);
                assert!(blocks.reruns.is_empty());
                continue;
            }
            assert_eq!(ran, [false, true]);
            let r = &blocks.reruns[..];
            assert_eq!(r.len(), 1);
            assert_eq!((r[0].kept, r[0].round, r[0].position), (kept, 2, 1));
            assert_eq!(
                (r[0].first.as_str(), r[0].rerun.as_str()),
                ("blocks/r02-p1-b", "blocks/r02-p1-b-rerun")
            );
        }
    }

    /// Every round counts in the ratios, as in the receipts `klab compare` recomputes them
    /// from: a capped block was run again (or kept as the kernel's own), never left out.
    /// A plan of two copies, `a` the baseline, mirrored, with no kernels to run.
    fn two_copies(isolation: Isolation) -> Plan {
        Plan {
            kernels: Vec::new(),
            names: vec!["a".into(), "b".into()],
            baseline: "a".into(),
            n: 1,
            ops: vec!["copy".into(), "copy".into()],
            klab: KlabBinary {
                sha256: String::new(),
                stamp: String::new(),
            },
            isolation,
            order: RoundOrder::Mirrored,
        }
    }

    #[test]
    fn the_ratios_are_over_every_round() {
        let mut rows = Vec::new();
        for r in 1..=6 {
            rows.push(block(r, "a", 10.0, 1980, 0));
            rows.push(block(r, "b", 8.0 + r as f64 / 10.0, 1980, 0));
        }
        let plan = two_copies(Isolation::Round);
        let r = Ratios::against_baseline(&plan, &rows, 6);
        let a = &r.analyses[0].analysis;
        assert_eq!(a.rounds, 6);
        assert_eq!(a.interval, Some((10.0 / 8.6, 10.0 / 8.1)));
        assert_eq!(a.verdict, SpeedVerdict::Faster);
    }

    /// A candidate that ran at a lower SM clock is slower in time and the same in cycles.
    #[test]
    fn a_clock_change_shows_in_time_and_not_in_cycles() {
        let rows: Vec<BlockRow> = (1..=6)
            .flat_map(|r| [block(r, "a", 10.0, 1980, 0), block(r, "b", 12.5, 1584, 0)])
            .collect();
        assert_eq!(clock_range(&rows), Some((1584.0, 1980.0)));
        let cfg = IntervalConfig::default();
        let analysis = |cycles| {
            let s = |n| round_samples(&rows, 6, n, cycles).unwrap();
            analyze_speedup(&s("a"), &s("b"), &cfg).unwrap()
        };
        let (time, cycles) = (analysis(false), analysis(true));
        assert_eq!((time.ratio, time.verdict), (0.8, SpeedVerdict::Slower));
        assert_eq!(cycles.ratio, 1.0);
        assert_eq!(cycles.verdict, SpeedVerdict::Unresolved);
        assert!(cycles_line(&cycles, (1584.0, 1980.0)).starts_with(
            "in SM cycles (time x SM clock; the blocks' clocks ran 1584-1980 MHz): 1.0000x"
        ));
        // A block without a clock: no ratio in cycles.
        let mut unknown = rows.clone();
        unknown[0].state = None;
        assert_eq!(round_samples(&unknown, 6, "a", true), None);
    }

    /// A settling block's seconds are the process's (its device opening among them): in
    /// the totals and phases.csv, with no position, and counted apart from the blocks.
    #[test]
    fn a_settling_blocks_phases_are_accounted_apart_from_the_blocks() {
        let mut blocks = Blocks::new();
        let p = klab_engine::timing::Phases {
            setup_s: 0.25,
            timed_s: 0.125,
            checker: "device checker".into(),
            ..Default::default()
        };
        blocks.wall_total = 1.0;
        blocks.account_settling(
            2,
            "(settling block, not counted) blocks/r02-settle-a",
            0.5,
            &p,
        );
        let row = blocks.phases_csv.lines().nth(1).unwrap();
        assert!(
            row.starts_with(
                "2,,\"(settling block, not counted) blocks/r02-settle-a\",0.5000,0.2500,"
            ),
            "{row}"
        );
        let time = blocks.time();
        assert_eq!(time.settling, Some(1));
        assert_eq!(time.phases.setup_s, 0.25);
        assert_eq!(time.other_s, 1.0 - 0.375);
        assert_eq!(Blocks::new().time().settling, None);
    }

    /// The summary's first line gives a round's blocks, and says when every other round
    /// reverses them.
    #[test]
    fn the_order_line_says_when_rounds_alternate() {
        let mut plan = two_copies(Isolation::Block);
        assert_eq!(plan.order_line(), "a b b a");
        plan.order = RoundOrder::Alternating;
        assert_eq!(plan.order_line(), "a b, reversed every other round");
    }

    /// Mirrored rounds are ABBA; alternating rounds are their halves, so the blocks run in
    /// the same sequence either way.
    #[test]
    fn mirrored_rounds_are_abba_and_alternating_rounds_their_halves() {
        let m = RoundOrder::Mirrored;
        assert_eq!(m.of_round(&["A", "B"], 1), ["A", "B", "B", "A"]);
        assert_eq!(m.of_round(&["A", "B"], 2), ["A", "B", "B", "A"]);
        assert_eq!(
            m.of_round(&["A", "B", "C"], 3),
            ["A", "B", "C", "C", "B", "A"]
        );
        let a = RoundOrder::Alternating;
        let kernels = ["A", "B", "C"];
        let halves: Vec<&str> = (1..=4).flat_map(|r| a.of_round(&kernels, r)).collect();
        let mirrored: Vec<&str> = (1..=2).flat_map(|r| m.of_round(&kernels, r)).collect();
        assert_eq!(halves, mirrored);
        // Alternating rounds come in pairs; mirrored ones in any number.
        assert!(m.check_rounds(7).is_ok() && a.check_rounds(6).is_ok());
        assert!(a.check_rounds(7).is_err());
        for order in [m, a] {
            let round = order.of_round(&kernels, 1);
            assert_eq!(
                round.len(),
                kernels.len() * order.blocks_per_kernel() as usize
            );
        }
    }
}
