//! `klab compare BASELINE CANDIDATE`: re-check two receipts and everything they point at,
//! then print medians, the ratio, the round-level interval and the verdict.

use std::process::ExitCode;

use klab_core::stats::BootstrapConfig;
use klab_evidence::compare;

use crate::cli::CompareArgs;

pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let cfg = BootstrapConfig {
        seed: args.seed,
        ..BootstrapConfig::default()
    };
    let c = compare::compare(&args.baseline, &args.candidate, &cfg)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        print!("{}", c.render_text());
    }
    Ok(ExitCode::SUCCESS)
}
