//! Timing blocks of one kernel in an open [`Session`] ([`run_blocks`]), each with the
//! GPU's state read around it: what [`BenchSpec`] asks for, one [`Block`] per round. A
//! block paced by its parent ([`Paced`]) waits for its turn to time, says when its timed
//! launches are over, and logs where its time went (its turn marks).

use std::time::Instant;

use klab_core::gpustate::GpuState;
use klab_cuda::nvml::StateReader;
use klab_engine::timing::{self, BlockEvents, Milestone, Outcome, TimingConfig, TimingError};
use klab_engine::workload::Workload;

use crate::error::RunError;
use crate::kernel::Kernel;
use crate::pace::{offset, Opened, Pace, Turn};
use crate::session::Session;

/// A block its parent paces ([`Turn`]): where its turns come from, and how it says that its
/// launches are over.
pub struct Paced<'a> {
    pub pace: &'a mut Pace<std::io::Stdin>,
    pub launches_over: &'a dyn Fn(),
    /// When its session was open (its device, module and checker), for its log.
    pub session_open: Instant,
}

/// The events of one process's blocks: the GPU's state, and, when paced, the one block's
/// turn to start on the device, the end of its launches, and the marks of its time.
struct Events<'a, 'p> {
    state: &'a StateReader,
    paced: Option<&'a mut Paced<'p>>,
    marks: TurnMarks,
}

/// When a paced block passed each point of its time, for its log: its turn to open the
/// device and its session open, its readiness for its turn and the turn, each
/// [`Milestone`] after it, and the end of its launches.
#[derive(Default)]
struct TurnMarks {
    opened: Option<OpenMarks>,
    /// When it was ready for its turn (all before its work on the device done).
    ready: Option<Instant>,
    turn: Option<Instant>,
    passed: Vec<(Milestone, Instant)>,
    over: Option<Instant>,
}

/// A paced block's turn to open its device ([`Opened`]), and when its session was then open.
#[derive(Clone, Copy)]
struct OpenMarks {
    turn: Opened,
    session_open: Instant,
}

impl TurnMarks {
    /// `from its open turn (prepared in 0.090 s, then waited 0.040 s for it): session open
    /// +0.190 s, ready +0.240 s, turn +0.250 s; after its turn: slots made +0.002 s, ...,
    /// launches over +0.120 s, judged +0.180 s`: where a paced block's time went, from the
    /// turn to open its device (None when no one paced it). `judged` is now: the block's
    /// outcome made, its held cross-check done.
    fn describe(&self) -> Option<String> {
        let turn = self.turn?;
        let from = |t0: Instant, marks: &[(&str, Instant)]| {
            marks
                .iter()
                .map(|&(label, t)| format!("{label} {}", offset(t0, t)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let before = match (self.opened, self.ready) {
            (Some(opened), Some(ready)) => {
                let marks = [
                    ("session open", opened.session_open),
                    ("ready", ready),
                    ("turn", turn),
                ];
                format!(
                    "from its open turn (prepared in {:.3} s, then waited {:.3} s for it): {}; ",
                    opened.turn.prepared_s,
                    opened.turn.waited_s,
                    from(opened.turn.at, &marks)
                )
            }
            _ => String::new(),
        };
        let after: Vec<(&str, Instant)> = self
            .passed
            .iter()
            .map(|&(m, t)| (m.label(), t))
            .chain(self.over.map(|t| ("launches over", t)))
            .chain(std::iter::once(("judged", Instant::now())))
            .collect();
        Some(format!("{before}after its turn: {}", from(turn, &after)))
    }
}

impl BlockEvents for Events<'_, '_> {
    fn gpu_state(&mut self) -> GpuState {
        self.state.read()
    }

    fn start(&mut self) -> Result<(), TimingError> {
        match self.paced.as_mut() {
            Some(p) => {
                self.marks.ready = Some(Instant::now());
                self.marks.opened = p.pace.opened.map(|turn| OpenMarks {
                    turn,
                    session_open: p.session_open,
                });
                p.pace
                    .wait_for(Turn::Time)
                    .map_err(|e| TimingError::Stopped(e.to_string()))?;
                self.marks.turn = Some(Instant::now());
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn reached(&mut self, milestone: Milestone) {
        if self.marks.turn.is_some() {
            self.marks.passed.push((milestone, Instant::now()));
        }
    }

    fn launches_over(&mut self) {
        if let Some(p) = &self.paced {
            (p.launches_over)();
            self.marks.over = Some(Instant::now());
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
            marks: TurnMarks::default(),
        };
        let outcome = timing::measure(
            &mut session.backend,
            w,
            &kernels,
            &spec.config,
            &format!("round {round}"),
            &mut events,
        )?;
        if let Some(line) = events.marks.describe() {
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
    use std::time::Duration;

    /// A paced block's log line gives each milestone, then the end of its launches and its
    /// judgement, in seconds from its turn, after the marks from its turn to open the
    /// device; a block no one paced has none.
    #[test]
    fn a_paced_block_logs_its_milestones_from_its_turn() {
        let state = StateReader::new("GPU-00000000-0000-0000-0000-000000000000");
        let mut e = Events {
            state: &state,
            paced: None,
            marks: TurnMarks::default(),
        };
        e.reached(Milestone::SlotsMade);
        assert_eq!(e.marks.describe(), None, "not paced");
        assert!(e.marks.passed.is_empty(), "nothing kept without a turn");

        let turn = Instant::now() - Duration::from_millis(500);
        let mut m = TurnMarks {
            turn: Some(turn),
            passed: vec![
                (Milestone::SlotsMade, turn + Duration::from_millis(2)),
                (Milestone::Validated, turn + Duration::from_millis(31)),
            ],
            over: Some(turn + Duration::from_millis(120)),
            ..TurnMarks::default()
        };
        let line = m.describe().unwrap();
        let (head, judged) = line.rsplit_once(", judged +").unwrap();
        assert_eq!(
            head,
            "after its turn: slots made +0.002 s, validated +0.031 s, launches over +0.120 s"
        );
        let judged_s: f64 = judged.trim_end_matches(" s").parse().unwrap();
        assert!(judged_s >= 0.5, "{line}");

        let opened = turn - Duration::from_millis(250);
        m.opened = Some(OpenMarks {
            turn: Opened {
                at: opened,
                prepared_s: 0.0896,
                waited_s: 0.0404,
            },
            session_open: opened + Duration::from_millis(190),
        });
        m.ready = Some(opened + Duration::from_millis(240));
        let line = m.describe().unwrap();
        assert!(
            line.starts_with(
                "from its open turn (prepared in 0.090 s, then waited 0.040 s for it): \
                 session open +0.190 s, ready +0.240 s, turn +0.250 s; \
                 after its turn: slots made +0.002 s,"
            ),
            "{line}"
        );
    }
}
