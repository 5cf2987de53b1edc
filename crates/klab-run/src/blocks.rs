//! Timing blocks of one kernel in an open [`Session`] ([`run_blocks`]), each with the
//! GPU's state read around it: what [`BenchSpec`] asks for, one [`Block`] per round.

use klab_engine::timing::{self, Outcome, TimingConfig};
use klab_engine::workload::Workload;

use crate::error::RunError;
use crate::kernel::Kernel;
use crate::session::Session;

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

/// Run `rounds` blocks of one kernel in this process.
pub fn run_blocks(
    session: &mut Session,
    spec: &BenchSpec,
    log: &mut dyn FnMut(String),
) -> Result<Vec<Block>, RunError> {
    let mut blocks = Vec::new();
    let w = spec
        .kernel
        .workload(spec.n, None, session.backend.facts().ordinal)?;
    run_workload(session, &w, spec, &mut blocks, log)?;
    Ok(blocks)
}

fn run_workload<W: Workload>(
    session: &mut Session,
    w: &W,
    spec: &BenchSpec,
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
        let state = &session.state;
        let outcome = timing::measure(
            &mut session.backend,
            w,
            &kernels,
            &spec.config,
            &format!("round {round}"),
            &mut || state.read(),
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
