//! Timing blocks of one kernel in an open [`Session`] ([`run_blocks`]), each with the
//! GPU's state read around it: what [`BenchSpec`] asks for, one [`Block`] per round. A
//! block paced by its parent ([`Paced`]) waits for its turn to time and says when its
//! timed launches are over.

use klab_core::gpustate::GpuState;
use klab_cuda::nvml::StateReader;
use klab_engine::timing::{self, BlockEvents, Milestone, Outcome, TimingConfig, TimingError};
use klab_engine::workload::Workload;

use crate::error::RunError;
use crate::kernel::Kernel;
use crate::pace::{Pace, Turn};
use crate::session::Session;

/// A block its parent paces ([`Turn`]): where its turns come from, and how it says that its
/// launches are over.
pub struct Paced<'a> {
    pub pace: &'a mut Pace<std::io::Stdin>,
    pub launches_over: &'a dyn Fn(),
    /// When its session was open (its device, module and checker), for its log.
    pub session_open: std::time::Instant,
}

/// The events of one process's blocks: the GPU's state, and, when paced, the one block's
/// turn to start on the device, the milestones it passed since and the end of its launches.
struct Events<'a, 'p> {
    state: &'a StateReader,
    paced: Option<&'a mut Paced<'p>>,
    /// For a paced block: when it was given the turn to open its device, when its session
    /// was open, when it was ready for its turn (all before its work on the device done),
    /// when it was given its turn, each milestone after it, and when its launches were over.
    opened: Option<(std::time::Instant, std::time::Instant)>,
    ready: Option<std::time::Instant>,
    turn: Option<std::time::Instant>,
    passed: Vec<(Milestone, std::time::Instant)>,
    over: Option<std::time::Instant>,
}

impl Events<'_, '_> {
    /// `from its open turn: session open +0.190 s, ready +0.240 s, turn +0.250 s; after its
    /// turn: slots made +0.002 s, ..., launches over +0.120 s, judged +0.180 s`: where a
    /// paced block's time went, from the turn to open its device, for its log (None when no
    /// one paced it). `judged` is now: the block's outcome made, its held cross-check done.
    fn since_turn(&self) -> Option<String> {
        let turn = self.turn?;
        let from = |t0: std::time::Instant, marks: &[(&str, std::time::Instant)]| {
            marks
                .iter()
                .map(|&(label, t)| {
                    format!(
                        "{label} +{:.3} s",
                        t.saturating_duration_since(t0).as_secs_f64()
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let before = match (self.opened, self.ready) {
            (Some((opened, session_open)), Some(ready)) => {
                let marks = [
                    ("session open", session_open),
                    ("ready", ready),
                    ("turn", turn),
                ];
                Some(format!("from its open turn: {}; ", from(opened, &marks)))
            }
            _ => None,
        };
        let after: Vec<(&str, std::time::Instant)> = self
            .passed
            .iter()
            .map(|&(m, t)| (m.label(), t))
            .chain(self.over.map(|t| ("launches over", t)))
            .chain(std::iter::once(("judged", std::time::Instant::now())))
            .collect();
        Some(format!(
            "{}after its turn: {}",
            before.unwrap_or_default(),
            from(turn, &after)
        ))
    }
}

impl BlockEvents for Events<'_, '_> {
    fn gpu_state(&mut self) -> GpuState {
        self.state.read()
    }

    fn start(&mut self) -> Result<(), TimingError> {
        match self.paced.as_mut() {
            Some(p) => {
                self.ready = Some(std::time::Instant::now());
                self.opened = p.pace.opened_at.map(|o| (o, p.session_open));
                p.pace
                    .wait_for(Turn::Time)
                    .map_err(|e| TimingError::Stopped(e.to_string()))?;
                self.turn = Some(std::time::Instant::now());
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn reached(&mut self, milestone: Milestone) {
        if self.turn.is_some() {
            self.passed.push((milestone, std::time::Instant::now()));
        }
    }

    fn launches_over(&mut self) {
        if let Some(p) = &self.paced {
            (p.launches_over)();
            self.over = Some(std::time::Instant::now());
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchSpec {
    pub kernel: Kernel,
    pub n: u64,
    pub config: TimingConfig,
    pub rounds: u32,
    pub claim: Option<String>,
}

/// One block's result.
pub struct Block {
    pub round: u32,
    pub outcome: Outcome,
}

/// Run `rounds` blocks of one kernel in this process; a paced process times one block.
pub fn run_blocks(
    session: &mut Session,
    spec: &BenchSpec,
    paced: Option<Paced>,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Block>, RunError> {
    if paced.is_some() && spec.rounds != 1 {
        return Err(RunError::Message(
            "a paced process times exactly one block".into(),
        ));
    }
    let mut blocks = Vec::new();
    let w = spec
        .kernel
        .workload(spec.n, None, session.backend.facts().ordinal)?;
    run_workload(session, &w, spec, paced, &mut blocks, log)?;
    Ok(blocks)
}

fn run_workload<W: Workload>(
    session: &mut Session,
    w: &W,
    spec: &BenchSpec,
    mut paced: Option<Paced>,
    blocks: &mut Vec<Block>,
    log: &mut dyn FnMut(String),
) -> Result<(), RunError> {
    if w.n() == 0 {
        return Err(RunError::Message(
            "n must be at least 1 to time a kernel".into(),
        ));
    }
    let kernels = klab_engine::workload::load_kernels(&mut session.backend, w.decl())?;
    log(format!(
        "{}: {}; {}",
        w.entry(),
        klab_engine::workload::describe_plans(w),
        klab_engine::workload::describe_resources(&session.backend, &kernels)
    ));
    for round in 1..=spec.rounds {
        let mut events = Events {
            state: &session.state,
            paced: paced.as_mut(),
            opened: None,
            ready: None,
            turn: None,
            passed: Vec::new(),
            over: None,
        };
        let outcome = timing::measure(
            &mut session.backend,
            w,
            &kernels,
            &spec.config,
            &format!("round {round}"),
            &mut events,
        )?;
        if let Some(line) = events.since_turn() {
            log(line);
        }
        let mut outcome = outcome;
        if let Outcome::Measured(m) = &mut outcome {
            (m.phases.setup_s, m.phases.compile_s) = session.take_open_time();
        }
        let stop = matches!(outcome, Outcome::Rejected { .. });
        blocks.push(Block { round, outcome });
        if stop {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn events(state: &StateReader) -> Events<'_, 'static> {
        Events {
            state,
            paced: None,
            opened: None,
            ready: None,
            turn: None,
            passed: Vec::new(),
            over: None,
        }
    }

    /// A paced block's log line gives each milestone, then the end of its launches and its
    /// judgement, in seconds from its turn; a block no one paced has none.
    #[test]
    fn a_paced_block_logs_its_milestones_from_its_turn() {
        let state = StateReader::new("GPU-00000000-0000-0000-0000-000000000000");
        let mut e = events(&state);
        e.reached(Milestone::SlotsMade);
        assert_eq!(e.since_turn(), None, "not paced");
        assert!(e.passed.is_empty(), "nothing kept without a turn");

        let turn = Instant::now() - Duration::from_millis(500);
        e.turn = Some(turn);
        e.passed = vec![
            (Milestone::SlotsMade, turn + Duration::from_millis(2)),
            (Milestone::Validated, turn + Duration::from_millis(31)),
        ];
        e.over = Some(turn + Duration::from_millis(120));
        let line = e.since_turn().unwrap();
        let judged = line.rsplit_once("judged +").unwrap().1;
        assert_eq!(
            line.rsplit_once(", judged").unwrap().0,
            "after its turn: slots made +0.002 s, validated +0.031 s, launches over +0.120 s"
        );
        let judged_s: f64 = judged.trim_end_matches(" s").parse().unwrap();
        assert!(judged_s >= 0.5, "{line}");

        // From the turn to open its device: its session, its readiness and its turn.
        let opened = turn - Duration::from_millis(250);
        e.opened = Some((opened, opened + Duration::from_millis(190)));
        e.ready = Some(opened + Duration::from_millis(240));
        let line = e.since_turn().unwrap();
        assert!(
            line.starts_with(
                "from its open turn: session open +0.190 s, ready +0.240 s, turn +0.250 s; \
                 after its turn: slots made +0.002 s,"
            ),
            "{line}"
        );
    }
}
