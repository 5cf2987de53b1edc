//! Where a block of `klab rounds` runs: alone, in a `klab bench` child of its own
//! ([`run_alone`]), or with the rest of its round in one child ([`run_round`], `--isolation
//! round`). Either way a block comes back as a [`BlockRun`]: the verdict and result its
//! child said, its seconds, and the folder it wrote, which the caller reads as one thing.
//!
//! A block alone is paced ([`crate::pacing`]): its process is started while the block
//! before it runs, prepares, opens a context once that block's last launch is over, and
//! starts its work once that block has closed the device or exited.
//!
//! A round's process first runs one settling block of the round's first kernel, which is not
//! counted: on the H200 the first block of a process timed about 7% faster than every block
//! after it (evidence/2026-12-05-gpu), so without it the ratios leant towards the kernel that
//! ran first. Its median is logged, so a run shows the step. With it a lean of about 0.8%
//! remained (evidence/2026-12-05-triton-isolation), which is why `block` is the default.
//!
//! In a round's process every block says its results to a file of its own, so each is judged
//! as a block alone is, by [`ChildVerdict::of`]. What the process can decide for a block is
//! kept: a block that passed or failed a gate judged itself in full. Anything else (an error,
//! a crash, a hang, a block the process never reached) is left to [`run_alone`], in a folder
//! of its own, so no verdict on a kernel rests on what another kernel did to a shared process.

use std::path::Path;
use std::time::{Duration, Instant};

use klab_engine::verify::VerifyPolicy;
use klab_run::child::{ChildResult, ChildVerdict, Ending, ResultsFile};
use klab_run::kernel::Kernel;
use klab_tools::process::Echo;

use super::{Blocks, Place, Plan};
use crate::child::{ChildCmd, RoundBlock, RoundWork};
use crate::cli::{BenchArgs, RoundsArgs};
use crate::pacing::{self, suffixed};
pub(super) use crate::pacing::{Ahead, BlockBench};

/// A block's run: what its child said and how that was judged, and its seconds (the whole
/// process's for a block alone; its own share of the process for a block of a round).
pub(super) struct BlockRun {
    pub verdict: ChildVerdict,
    pub result: Option<ChildResult>,
    pub wall_s: f64,
    /// Seconds its process ran beside other blocks' turns: before its own (started ahead,
    /// waiting or opening the device while the block before finished) and after the next
    /// block's (its receipt and exit, once it had closed the device); 0 in a round's
    /// process.
    pub ahead_s: f64,
}

/// What ends the folder of a block run alone after its round's process.
pub(super) const ALONE_SUFFIX: &str = "-alone";

impl BlockBench {
    /// The same block in a folder of its own (`-alone`), for a run alone after a round's
    /// process left it unjudged: whatever that process wrote stays where it was.
    pub(super) fn alone(&self) -> BlockBench {
        let rel = format!("{}{ALONE_SUFFIX}", self.rel);
        let dir = suffixed(&self.dir, ALONE_SUFFIX);
        let mut args = self.args.clone();
        args.out = Some(dir.clone());
        BlockBench { rel, dir, args }
    }

    /// `kernel`'s block at `place`, writing under `dir`.
    pub(super) fn at(
        plan: &Plan,
        args: &RoundsArgs,
        dir: &Path,
        place: Place,
        kernel: &Kernel,
    ) -> Self {
        let Place {
            round, position, ..
        } = place;
        let rel = format!(
            "blocks/r{round:02}-p{position}-{}{}",
            kernel.name(),
            if place.rerun { "-rerun" } else { "" }
        );
        Self::named(plan, args, dir, rel, kernel)
    }

    /// The settling block of round `round`'s process (the module's docs): `kernel`'s block,
    /// in a folder of its own that no receipt combines.
    pub(super) fn settling(
        plan: &Plan,
        args: &RoundsArgs,
        dir: &Path,
        round: u32,
        kernel: &Kernel,
    ) -> Self {
        let rel = format!("blocks/r{round:02}-settle-{}", kernel.name());
        Self::named(plan, args, dir, rel, kernel)
    }

    fn named(plan: &Plan, args: &RoundsArgs, dir: &Path, rel: String, kernel: &Kernel) -> Self {
        let block_dir = dir.join(&rel);
        // The child gets the kernel's full reference, so a user manifest's kernel is
        // measured, never a built-in of the same name.
        let bench = BenchArgs {
            output: Default::default(),
            kernel: kernel.spec(),
            // An operation with several size variables is timed at its bench shape.
            n: (args.shape.is_none() && kernel.size_variable().is_some()).then_some(plan.n),
            shape: args.shape.clone(),
            timing: args.timing.clone(),
            rounds: 1,
            out: Some(block_dir.clone()),
            claim: None,
            timeout: args.timeout,
            device: args.device,
            klab_binary: Some(plan.klab.clone()),
        };
        BlockBench {
            rel,
            dir: block_dir,
            args: bench,
        }
    }
}

/// One block in a `klab bench` child of its own, paced ([`pacing::run_paced`]), with the
/// block after it (`next`) started while it runs; its turns, command and output go to the
/// log.
pub(super) fn run_alone(
    bench: &BlockBench,
    next: Option<&BlockBench>,
    ahead: &mut Ahead,
    args: &RoundsArgs,
    policy: VerifyPolicy,
    blocks: &mut Blocks,
    place: Place,
) -> anyhow::Result<BlockRun> {
    let timeout = Duration::from_secs(args.timeout);
    let run = pacing::run_paced(bench, next, ahead, policy, timeout)?;
    if let Some(w) = &run.withdrawn {
        blocks.wall_total += w.wall_s;
        blocks.log.push_str(&w.line);
    }
    blocks.wall_total += run.wall_s;
    blocks.processes += 1;
    blocks.log.push_str(&format!(
        "# round {} position {}{}\n# {}\n{}",
        place.round,
        place.position,
        if place.rerun { " (re-run)" } else { "" },
        run.turns,
        run.out.log_block()
    ));
    Ok(BlockRun {
        verdict: run.out.verdict,
        result: run.out.result,
        wall_s: run.wall_s,
        ahead_s: run.beside_s,
    })
}

/// Every block of round `round` (`benches`, in the round's order) in one child after the
/// settling block `settle`, each given a results file of its own. Returns, per block of
/// `benches`, its run when the process could judge it (see the module's docs), `None` for the
/// blocks to run alone.
pub(super) fn run_round(
    settle: &BlockBench,
    benches: &[BlockBench],
    args: &RoundsArgs,
    policy: VerifyPolicy,
    blocks: &mut Blocks,
    round: u32,
) -> anyhow::Result<Vec<Option<BlockRun>>> {
    let in_process: Vec<&BlockBench> = std::iter::once(settle).chain(benches).collect();
    let files = in_process
        .iter()
        .map(|_| ResultsFile::new())
        .collect::<Result<Vec<_>, _>>()?;
    let work = RoundWork {
        blocks: in_process
            .iter()
            .zip(&files)
            .map(|(b, f)| RoundBlock {
                bench: b.args.clone(),
                results: f.path().to_path_buf(),
            })
            .collect(),
    };
    // Each block has the time a block alone would (the process ends one that takes more),
    // and one more for opening the device and ending the process.
    let timeout = Duration::from_secs(args.timeout.saturating_mul(in_process.len() as u64 + 1));
    let started = Instant::now();
    let out = ChildCmd::Round(work).run(policy, timeout, Echo::Off)?;
    let wall_s = started.elapsed().as_secs_f64();
    blocks.wall_total += wall_s;
    blocks.processes += 1;
    blocks.log.push_str(&format!(
        "# round {round}: its {} blocks in one process, after a settling block\n{}",
        benches.len(),
        out.log_block()
    ));
    let ending = Ending {
        exit_code: out.captured.exit_code,
        signal: out.captured.signal,
        killed_after: out.captured.timed_out.then_some(timeout),
    };
    let mut runs = Vec::with_capacity(files.len());
    let mut own_s = 0.0;
    for file in &files {
        let run = judged(&file.read()?, &ending);
        own_s += run.as_ref().map_or(0.0, |r| r.wall_s);
        runs.push(run);
    }
    let settled = runs.remove(0);
    let receipt = settled
        .as_ref()
        .filter(|r| r.verdict == ChildVerdict::Passed)
        .and_then(|_| klab_evidence::receipt::Receipt::load(&settle.dir.join("receipt.json")).ok());
    let what = settled_line(settle, receipt.as_ref());
    blocks.log.push_str(&format!("# round {round}: {what}\n"));
    let phases = receipt
        .as_ref()
        .and_then(|r| r.measurement.phases.first().cloned())
        .unwrap_or_default();
    blocks.account_settling(
        round,
        &format!("(settling block, not counted) {}", settle.rel),
        settled.as_ref().map_or(0.0, |r| r.wall_s),
        &phases,
    );
    blocks.phases_csv.push_str(&format!(
        "{round},,(the round's process beyond its blocks),{:.4},,,,,,{:.4},\n",
        (wall_s - own_s).max(0.0),
        (wall_s - own_s).max(0.0)
    ));
    Ok(runs)
}

/// The settling block in a few words: its median, from the receipt in its folder when it
/// passed, or that it has none. What it says counts for nothing: its kernel's own blocks
/// judge it.
fn settled_line(settle: &BlockBench, receipt: Option<&klab_evidence::receipt::Receipt>) -> String {
    match receipt.map(|r| r.result.median_us) {
        Some(m) => format!("settling block {}: median {m:.3} us, not counted", settle.rel),
        None => format!(
            "settling block {}: no timing (its kernel's own blocks are judged as they run), not counted",
            settle.rel
        ),
    }
}

/// A block of a round's process, from what it said in its results file and how the process
/// ended: its run when the process could judge it, `None` when it must run alone.
fn judged(said: &str, process: &Ending) -> Option<BlockRun> {
    let result = ChildResult::find(said);
    let during = ChildResult::running(said);
    let verdict = match &result {
        // The block said its result and the process went on: it ended as a block that exits.
        Some(_) => ChildVerdict::of(result.as_ref(), &Ending::default(), during.as_deref()),
        // The block the process was running when it ended.
        None if during.is_some() => ChildVerdict::of(None, process, during.as_deref()),
        None => return None,
    };
    let wall_s = match &result {
        Some(ChildResult::Bench {
            elapsed_s: Some(s), ..
        }) => *s,
        _ => 0.0,
    };
    matches!(
        verdict,
        ChildVerdict::Passed | ChildVerdict::GateFailed { .. }
    )
    .then_some(BlockRun {
        verdict,
        result,
        wall_s,
        ahead_s: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use klab_run::child::Verdict;

    fn bench(verdict: Verdict) -> ChildResult {
        ChildResult::Bench {
            kernel: "k".into(),
            verdict,
            receipt: None,
            detail: "d".into(),
            report: None,
            elapsed_s: Some(0.25),
            waited_s: None,
        }
    }

    fn said(lines: &[ChildResult]) -> String {
        lines.iter().map(|l| l.line() + "\n").collect()
    }

    fn case() -> ChildResult {
        ChildResult::Case {
            label: "k at n=8: its validations and timed launches".into(),
        }
    }

    fn killed() -> Ending {
        Ending {
            exit_code: None,
            signal: Some(9),
            killed_after: Some(Duration::from_secs(60)),
        }
    }

    /// A block that said its verdict keeps it, whatever ended the process after it.
    #[test]
    fn a_block_that_judged_itself_keeps_its_verdict_and_seconds() {
        for (result, passed) in [(bench(Verdict::Pass), true), (bench(Verdict::Fail), false)] {
            let done = ChildResult::CaseDone { label: "k".into() };
            let run = judged(&said(&[case(), done, result]), &killed()).unwrap();
            assert_eq!(run.verdict == ChildVerdict::Passed, passed);
            assert!(passed || matches!(run.verdict, ChildVerdict::GateFailed { .. }));
            assert_eq!(run.wall_s, 0.25);
        }
    }

    /// A block running when the process ended, by the parent's watchdog or its own
    /// deadline (SIGKILL), is judged alone, under a watchdog of its own: the process's time
    /// is not that block's. The blocks after it never ran and run alone too.
    #[test]
    fn the_block_running_when_the_process_was_ended_and_the_rest_run_alone() {
        let deadline = Ending {
            exit_code: None,
            signal: Some(9),
            killed_after: None,
        };
        for ending in [killed(), deadline] {
            assert!(judged(&said(&[case()]), &ending).is_none());
            assert!(judged("", &ending).is_none());
        }
        assert!(judged("", &Ending::default()).is_none());
    }

    fn bench_args() -> BenchArgs {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["klab", "bench", "padded"]).unwrap();
        let crate::cli::Command::Bench(args) = cli.into_command() else {
            panic!("not a bench")
        };
        args
    }

    /// A block run alone after its round's process writes beside what that process left.
    #[test]
    fn a_block_run_alone_after_its_round_has_a_folder_of_its_own() {
        let mut args = bench_args();
        args.out = Some("/r/blocks/r01-p1-padded".into());
        let bench = BlockBench {
            rel: "blocks/r01-p1-padded".into(),
            dir: "/r/blocks/r01-p1-padded".into(),
            args,
        };
        let alone = bench.alone();
        assert_eq!(alone.rel, "blocks/r01-p1-padded-alone");
        assert_eq!(alone.dir, Path::new("/r/blocks/r01-p1-padded-alone"));
        assert_eq!(alone.args.out.as_deref(), Some(alone.dir.as_path()));
        assert_eq!(alone.args.kernel, bench.args.kernel);
    }

    /// The settling block has a folder of its own, named apart from every counted block's,
    /// and says its median only when it passed with a receipt; without one it says so
    /// (its kernel's own blocks are judged as they run).
    #[test]
    fn the_settling_block_is_named_apart_and_says_only_its_median() {
        let t = tempfile::tempdir().unwrap();
        let settle = BlockBench {
            rel: "blocks/r03-settle-padded".into(),
            dir: t.path().join("blocks/r03-settle-padded"),
            args: bench_args(),
        };
        assert_eq!(
            settled_line(&settle, None),
            "settling block blocks/r03-settle-padded: no timing (its kernel's own blocks are judged as they run), not counted"
        );
    }

    /// An error or a crash in a shared process may be another block's doing (a fault leaves
    /// the context unusable): the block runs alone and that run judges it.
    #[test]
    fn an_error_or_a_crash_is_judged_again_alone() {
        let error = ChildResult::Error {
            message: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            klab_fault: false,
        };
        // During the kernel's case: a crash, had it been alone.
        assert!(judged(&said(&[case(), error.clone()]), &Ending::default()).is_none());
        // Before it (loading the module): an error.
        assert!(judged(&said(&[error]), &Ending::default()).is_none());
        // Died of a signal while running it.
        let died = Ending {
            exit_code: None,
            signal: Some(11),
            killed_after: None,
        };
        assert!(judged(&said(&[case()]), &died).is_none());
    }
}
