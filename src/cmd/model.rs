//! `klab model`: seed 000's CPU models as a command.

use std::process::ExitCode;

use anyhow::bail;
use klab_core::device::CUDA_MAX_THREADS_PER_BLOCK;
use klab_model::{ModelParams, ModelReport};

use crate::cli::ModelArgs;
use crate::output;
use crate::EXIT_GATE_FAILED;

pub fn run(args: ModelArgs) -> anyhow::Result<ExitCode> {
    // The block is `tile x block-rows` threads: one CUDA could never launch, or one whose
    // thread rows outnumber its tile's rows, is a bad argument, not a mapping to disprove.
    if args.block_rows > args.tile {
        bail!(
            "--block-rows {} is above --tile {}: a block's thread rows each cover a row of its tile, so it has at most --tile of them",
            args.block_rows,
            args.tile
        );
    }
    let threads = u64::from(args.tile) * u64::from(args.block_rows);
    if threads > u64::from(CUDA_MAX_THREADS_PER_BLOCK) {
        bail!(
            "--tile {} x --block-rows {} is {threads} threads, above {CUDA_MAX_THREADS_PER_BLOCK}, the most any CUDA device allows in a block",
            args.tile,
            args.block_rows
        );
    }
    let params = ModelParams {
        ns: args.ns,
        tile: args.tile,
        block_rows: args.block_rows,
        strides: args.strides,
    };
    let report = ModelReport::build(params)?;
    output::emit(&report, args.output.format())?;
    Ok(if report.coverage_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_GATE_FAILED)
    })
}
