//! Timing blocks of one kernel in an open [`Session`] ([`run_blocks`]), each with the
//! GPU's state read around it: what [`BenchSpec`] asks for, one [`Block`] per round. A
//! block paced by its parent ([`Paced`]) waits for its turn to time and says when its
//! timed launches are over.

use klab_core::gpustate::GpuState;
use klab_cuda::nvml::StateReader;
use klab_engine::timing::{self, BlockEvents, Outcome, TimingConfig, TimingError};
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
}

/// The events of one process's blocks: the GPU's state, and, when paced, the one block's
/// turn to start on the device and the end of its launches.
struct Events<'a, 'p> {
    state: &'a StateReader,
    paced: Option<&'a mut Paced<'p>>,
}

impl BlockEvents for Events<'_, '_> {
    fn gpu_state(&mut self) -> GpuState {
        self.state.read()
    }

    fn start(&mut self) -> Result<(), TimingError> {
        match self.paced.as_mut() {
            Some(p) => p
                .pace
                .wait_for(Turn::Time)
                .map_err(|e| TimingError::Stopped(e.to_string())),
            None => Ok(()),
        }
    }

    fn launches_over(&mut self) {
        if let Some(p) = &self.paced {
            (p.launches_over)();
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
        };
        let outcome = timing::measure(
            &mut session.backend,
            w,
            &kernels,
            &spec.config,
            &format!("round {round}"),
            &mut events,
        )?;
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
