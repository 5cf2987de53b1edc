//! `klab report` (being built).

use std::process::ExitCode;

pub fn run(_args: crate::cli::ReportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("klab report is not built yet")
}
