//! `klab lab`: the main job. The pipeline lives in `klab-lab`; this command turns the
//! arguments into its options, starts its children as klab commands under the watchdog,
//! and prints what it reports.

use klab_engine::verify::VerifyPolicy;
use klab_tools::process::Echo;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use klab_lab::{Child, ChildOutcome, LabError, LabOptions, Launcher};

use crate::child::{ChildCmd, ChildRun};
use crate::cli::{
    BenchArgs, LabArgs, ProfileArgs, RoundsArgs, SanitizeArgs, TimingArgs, TransposeArgs,
};
use crate::pacing::{self, Ahead, BlockBench, PacedRun};
use crate::{EXIT_ERROR, EXIT_GATE_FAILED};
use klab_cuda::device::Device;

pub fn run(args: LabArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    // Refused before any step, not in the rounds step's child.
    args.order
        .check_rounds(args.rounds)
        .map_err(anyhow::Error::msg)?;
    let opts = LabOptions {
        out: args.out.clone(),
        device: args.device,
        rounds: args.rounds,
        isolation: args.isolation,
        order: args.order,
        timeout: args.timeout,
        plan: klab_lab::load_plan(args.plan.as_deref())?,
        klab_binary: std::env::current_exe().context("locating the klab binary")?,
        command: std::env::args().collect(),
    };
    let mut launcher = Children {
        policy,
        device: args.device,
        timeout: args.timeout,
        bar: None,
    };
    let outcome = klab_lab::run(&opts, &mut launcher)?;
    Ok(if outcome.error {
        ExitCode::from(EXIT_ERROR)
    } else if outcome.gate_failed {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// The lab's children as klab commands, and a progress bar on a terminal.
struct Children {
    /// How the children verify outputs (handed to each as its options).
    policy: VerifyPolicy,
    device: u32,
    /// The watchdog each child applies to its own processes.
    timeout: u64,
    bar: Option<(String, indicatif::ProgressBar)>,
}

impl Children {
    fn command(&self, child: &Child) -> ChildCmd {
        let (device, timeout) = (self.device, self.timeout);
        match child.clone() {
            Child::Transpose { selection, n, reps } => ChildCmd::Transpose(TransposeArgs {
                output: Default::default(),
                variant: selection,
                n: n.to_string(),
                reps: reps.to_string(),
                timeout,
                device,
            }),
            Child::Bench {
                kernel,
                n,
                samples,
                out,
            } => ChildCmd::Bench(BenchArgs {
                output: Default::default(),
                kernel,
                n,
                shape: None,
                timing: TimingArgs {
                    samples,
                    ..default_timing()
                },
                rounds: 1,
                out: Some(out),
                claim: None,
                timeout,
                device,
                klab_binary: None,
            }),
            Child::Rounds {
                kernels,
                baseline,
                n,
                rounds,
                samples,
                isolation,
                order,
                out,
            } => ChildCmd::Rounds(RoundsArgs {
                resolution: crate::cli::ResolveArgs::none(),
                output: Default::default(),
                kernels,
                baseline: Some(baseline),
                n: Some(n),
                shape: None,
                timing: TimingArgs {
                    samples,
                    ..default_timing()
                },
                rounds,
                isolation,
                order,
                out: Some(out),
                timeout,
                device,
            }),
            Child::Sanitize {
                kernels,
                tools,
                sanitizer,
                out,
            } => ChildCmd::Sanitize(SanitizeArgs {
                output: Default::default(),
                kernels,
                import: None,
                tool: None,
                tools,
                sanitizer: Some(sanitizer),
                timeout,
                jobs: None,
                out: Some(out),
                device,
            }),
            Child::Profile {
                kernels,
                n,
                ncu,
                out,
            } => ChildCmd::Profile(ProfileArgs {
                kernels,
                n: Some(n),
                ncu: Some(ncu),
                out: Some(out),
                timeout,
                device,
                ..profile_defaults()
            }),
        }
    }

    /// `child` run to its end under a watchdog of `timeout_s` seconds.
    fn run_one(&self, child: &Child, timeout_s: u64) -> Result<ChildOutcome, LabError> {
        let cmd = self.command(child);
        let run: ChildRun = cmd
            .run(self.policy, Duration::from_secs(timeout_s), Echo::Off)
            .map_err(|e| LabError::Launch {
                what: format!("{child:?}"),
                why: crate::error_text(&e),
            })?;
        Ok(ChildOutcome {
            log: run.log_block(),
            verdict: run.verdict,
            stdout: run.stdout,
            result: run.result,
        })
    }
}

/// A paced bench's run as the lab reads a child: its turns line above its command and
/// output in the log.
fn paced_outcome(run: PacedRun) -> ChildOutcome {
    // A child started ahead for another bench is withdrawn only when the order changes,
    // which the lab's never does; said if it did.
    let withdrawn = run.withdrawn.map(|w| w.line).unwrap_or_default();
    ChildOutcome {
        log: format!("{withdrawn}# {}\n{}", run.turns, run.out.log_block()),
        verdict: run.out.verdict,
        stdout: run.out.stdout,
        result: run.out.result,
    }
}

impl Launcher for Children {
    fn run(&mut self, child: &Child, timeout_s: u64) -> Result<ChildOutcome, LabError> {
        self.run_one(child, timeout_s)
    }

    fn run_all(
        &mut self,
        children: &[Child],
        timeout_s: u64,
        jobs: usize,
    ) -> Vec<Result<ChildOutcome, LabError>> {
        let this = &*self;
        klab_core::par::map_jobs(jobs, children, |c| this.run_one(c, timeout_s))
    }

    /// Each bench paced ([`crate::pacing`]), the next started while it runs; any other
    /// child as [`Launcher::run`] runs it. None is run after one that could not be started.
    fn run_in_turn(
        &mut self,
        children: &[Child],
        timeout_s: u64,
    ) -> Vec<Result<ChildOutcome, LabError>> {
        let paced: Vec<Option<BlockBench>> = children
            .iter()
            .map(|c| match (c, self.command(c)) {
                (Child::Bench { out, .. }, ChildCmd::Bench(args)) => Some(BlockBench {
                    rel: out.display().to_string(),
                    dir: out.clone(),
                    args,
                }),
                _ => None,
            })
            .collect();
        // Without a device to ask (no driver here), no bench opens a context early.
        let mut ahead = Ahead::new(Device::shares_processes(self.device).unwrap_or(false));
        let timeout = Duration::from_secs(timeout_s);
        klab_lab::in_turn(children, |i, child| {
            let outcome = match &paced[i] {
                Some(bench) => {
                    let next = paced.get(i + 1).and_then(Option::as_ref);
                    pacing::run_paced(bench, next, &mut ahead, self.policy, timeout)
                        .map(paced_outcome)
                        .map_err(|e| LabError::Launch {
                            what: format!("{child:?}"),
                            why: crate::error_text(&e),
                        })
                }
                None => self.run_one(child, timeout_s),
            };
            if let Some((_, bar)) = &self.bar {
                bar.inc(1);
            }
            outcome
        })
    }

    fn note(&mut self, line: &str) {
        match &self.bar {
            Some((_, bar)) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    fn progress(&mut self, step: &str, done: u64, total: u64, what: &str) {
        if done >= total {
            if let Some((_, bar)) = self.bar.take() {
                bar.finish_and_clear();
            }
            return;
        }
        if self.bar.as_ref().is_none_or(|(s, _)| s != step) {
            self.bar = Some((
                step.to_string(),
                crate::cmd::progress_bar("lab", total, step),
            ));
        }
        if let Some((_, bar)) = &self.bar {
            bar.set_position(done);
            bar.set_message(what.to_string());
        }
    }

    fn print(&mut self, text: &str) {
        println!("{text}");
    }
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
