//! `klab trace` (being built).

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// Nsight Systems SQLite exports
    #[arg(required = true)]
    pub exports: Vec<PathBuf>,
}

pub fn run(_args: TraceArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("klab trace is not built yet")
}
