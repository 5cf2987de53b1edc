//! `klab compare BASELINE CANDIDATE`: re-check two receipts and everything they point at,
//! then print medians, the ratio, the round-level interval and the verdict.

use std::process::ExitCode;

use klab_core::stats::resolve::ResolveCheck;
use klab_core::stats::IntervalConfig;
use klab_evidence::compare;

use crate::cli::CompareArgs;
use crate::output;

pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let cfg = IntervalConfig::default();
    let mut c = compare::compare(&args.baseline, &args.candidate, &cfg)?;
    c.resolution = args.resolve.map(|target| {
        let rounds = u32::try_from(c.analysis.rounds).unwrap_or(u32::MAX);
        ResolveCheck::of(target, c.analysis.reach(), rounds)
    });
    output::emit(&c, args.output.format())?;
    // A resolution asked for and not reached is a gate the pair did not pass.
    Ok(if c.resolution.as_ref().is_some_and(|r| !r.reached) {
        ExitCode::from(crate::EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
