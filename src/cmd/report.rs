//! `klab report`: a self-contained HTML page, a markdown summary and SVG plots of a run
//! folder (the work is in the `klab-report` crate).

use std::process::ExitCode;

use crate::cli::ReportArgs;

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let data = klab_report::load(&args.run_dir)?;
    let report = klab_report::render(&data);
    let written = match &args.out {
        Some(dir) => klab_report::write_into(dir, &report)?,
        None => klab_report::write(&args.run_dir, &report)?,
    };
    for p in written {
        println!("{}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
