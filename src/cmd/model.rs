//! `klab model`: seed 000's CPU models as a command.

use std::process::ExitCode;

use klab_core::model::{ModelParams, ModelReport};

use crate::cli::ModelArgs;
use crate::EXIT_GATE_FAILED;

pub fn run(args: ModelArgs) -> anyhow::Result<ExitCode> {
    let params = ModelParams {
        ns: args.ns,
        tile: args.tile,
        block_rows: args.block_rows,
        strides: args.strides,
    };
    let report = ModelReport::build(params)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_text());
    }
    Ok(if report.coverage_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_GATE_FAILED)
    })
}
