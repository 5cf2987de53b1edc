//! Running the tool: an argument vector (no shell), both pipes read concurrently, a
//! watchdog that kills the whole process group at the deadline (the shared
//! [`crate::process`] runner).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use super::parse::parse_with;
use super::{argv, Options, RunRecord, SanitizerError, Tool};
use crate::process::{self, ProcessError, DRAIN_GRACE};

/// Run `sanitizer` (the compute-sanitizer binary) with [`argv`]`(tool, opts, program, args)`,
/// capture stdout and stderr (merged line by line in arrival order, as `2>&1` would), kill
/// the sanitizer and everything it started if it runs past `timeout`, and parse the output.
///
/// The child runs in its own process group (Unix) so the watchdog can kill the application
/// the sanitizer launched as well; stdin is `/dev/null`. A timeout or a death by signal is a
/// tool failure for the outcome (unless the report already holds real findings) and
/// `timed_out` says which. Only a binary that cannot be started, or a failed wait, is an
/// `Err`; the error names the binary.
pub fn run(
    tool: Tool,
    opts: &Options,
    program: &Path,
    args: &[OsString],
    sanitizer: &Path,
    timeout: Duration,
) -> Result<RunRecord, SanitizerError> {
    let mut full = argv(tool, opts, program, args);
    full[0] = sanitizer.as_os_str().to_os_string();

    let cap = process::run_captured(sanitizer, &full[1..], timeout).map_err(|e| match e {
        ProcessError::Spawn { program, source } => SanitizerError::Spawn { program, source },
        ProcessError::Wait { program, source } => SanitizerError::Wait { program, source },
        // run_captured gives the child no input file, so this cannot happen; kept total.
        e @ ProcessError::Stdin { .. } => SanitizerError::Spawn {
            program: sanitizer.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        },
    })?;

    let output = String::from_utf8_lossy(&cap.merged).into_owned();
    let exit_status = cap.exit_code;
    let external = if cap.timed_out {
        Some(format!(
            "timed out after {}; the watchdog killed the sanitizer and its process group",
            klab_core::text::describe_duration(timeout)
        ))
    } else if exit_status.is_none() {
        Some(match cap.signal {
            Some(sig) => format!("the sanitizer was killed by signal {sig}"),
            None => "the sanitizer ended without an exit status".to_string(),
        })
    } else {
        None
    };
    let mut report = parse_with(tool, &output, exit_status, opts.error_exitcode, external);
    if cap.incomplete {
        report.notes.push(format!(
            "output may be incomplete: the pipes were still open {} s after the sanitizer exited",
            DRAIN_GRACE.as_secs()
        ));
    }
    Ok(RunRecord {
        tool,
        argv: full
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        exit_status,
        timed_out: cap.timed_out,
        output,
        report,
    })
}
