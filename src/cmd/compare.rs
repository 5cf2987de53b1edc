//! `klab compare BASELINE CANDIDATE`: re-check two receipts and everything they point at,
//! then print medians, the ratio, the round-level interval and the verdict.

use std::process::ExitCode;

use klab_core::stats::BootstrapConfig;
use klab_evidence::compare;

use crate::cli::CompareArgs;
use crate::output;

pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let cfg = BootstrapConfig {
        seed: args.seed,
        ..BootstrapConfig::default()
    };
    let c = compare::compare(&args.baseline, &args.candidate, &cfg)?;
    output::emit(&c, args.output.format())?;
    Ok(ExitCode::SUCCESS)
}
