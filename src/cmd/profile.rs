//! `klab profile` (being built).

use std::process::ExitCode;

pub fn run(_args: crate::cli::ProfileArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("klab profile is not built yet")
}
