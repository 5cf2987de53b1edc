//! `klab receipt check`: one receipt on its own, every check `klab compare` makes of one
//! side ([`compare::check`]). Exit codes: 0 success, 1 a refused receipt.

use std::process::ExitCode;

use klab_core::compare;

use crate::cli::{ReceiptArgs, ReceiptCheckArgs, ReceiptCommand};

pub fn run(args: ReceiptArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ReceiptCommand::Check(a) => check(a),
    }
}

fn check(args: ReceiptCheckArgs) -> anyhow::Result<ExitCode> {
    for path in &args.receipts {
        let c = compare::check(path)?;
        let samples: usize = c.rounds.iter().map(Vec::len).sum();
        println!(
            "ok {}: {} raw sample file(s), {samples} samples, {} block receipt(s), median {:.3} us",
            path.display(),
            c.rounds.len(),
            c.blocks.len(),
            c.receipt.result.median_us
        );
    }
    Ok(ExitCode::SUCCESS)
}
