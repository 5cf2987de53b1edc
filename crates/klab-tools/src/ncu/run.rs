//! Running ncu: an argument vector (never a shell) under the shared watchdog
//! ([`crate::process`]), and finding the binary.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::csv::message;
use super::{
    import_argv, one_line, output_failure, parse_details, parse_raw, DetailsReport, MessageLevel,
    NcuError, NcuMessage, Page, RawReport,
};
use crate::process::{self, ProcessError};

/// Where the CUDA toolkit puts ncu when it is not on `PATH`.
pub const DEFAULT_NCU_PATH: &str = "/usr/local/cuda/bin/ncu";

/// One finished ncu command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOutput {
    /// The command as run (element 0 is the binary), lossily converted.
    pub argv: Vec<String>,
    /// `None` when the process was killed by a signal (including the watchdog).
    pub exit_status: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    /// The watchdog killed it and its process group.
    pub timed_out: bool,
    /// How long the watchdog allowed, as a person reads it (`600.0 s`).
    pub timeout: String,
    /// stdout: with `--csv`, the table (and whatever the application printed to stdout).
    pub stdout: String,
    /// stderr.
    pub stderr: String,
    /// Both merged line by line in arrival order (like `2>&1`).
    pub output: String,
    /// The pipes were still open after ncu exited, so the output may be cut short.
    pub incomplete: bool,
}

impl RunOutput {
    /// Exit status 0, not timed out.
    pub fn succeeded(&self) -> bool {
        self.exit_status == Some(0) && !self.timed_out
    }

    /// ncu's own `==ERROR==` / `==WARNING==` / `==PROF==` lines, from the merged output.
    pub fn messages(&self) -> Vec<NcuMessage> {
        self.output
            .lines()
            .enumerate()
            .filter_map(|(i, l)| message(l, i + 1))
            .collect()
    }

    /// Whether the command did its job, judged from its status and ncu's own lines, first
    /// match wins: timed out; killed by a signal; `ERR_NVGPUCTRPERM`; `No kernels were
    /// profiled` (ncu exits 0 then); a non-zero exit status (with the first `==ERROR==`
    /// line, else the last line printed).
    pub fn check(&self) -> Result<(), NcuError> {
        if self.timed_out {
            return Err(NcuError::TimedOut {
                after: self.timeout.clone(),
            });
        }
        if let Some(signal) = self.signal.filter(|_| self.exit_status.is_none()) {
            return Err(NcuError::Killed { signal });
        }
        if let Some(e) = output_failure(&self.output, false) {
            return Err(e);
        }
        if self.exit_status != Some(0) {
            let msgs = self.messages();
            let message = msgs
                .iter()
                .find(|m| m.level == MessageLevel::Error)
                .map(|m| m.to_string())
                .or_else(|| {
                    self.output
                        .lines()
                        .rev()
                        .map(str::trim)
                        .find(|l| !l.is_empty())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| "no output".to_string());
            return Err(NcuError::Failed {
                status: self.exit_status,
                message: one_line(&message),
            });
        }
        Ok(())
    }
}

/// Run `argv` (element 0 is the ncu binary; see the `*_argv` builders) with stdin from
/// `/dev/null`, capturing stdout and stderr; the watchdog kills ncu and the application it
/// started if it runs past `timeout`. Only a binary that cannot be started (the error names
/// it), a failed wait, or an empty `argv` is an `Err`; judge the run with
/// [`RunOutput::check`].
pub fn run(argv: &[OsString], timeout: Duration) -> Result<RunOutput, NcuError> {
    let (program, args) = argv.split_first().ok_or(NcuError::EmptyArgv)?;
    let program = Path::new(program);
    // ncu writes its CSV numbers in the locale's format (`44,19` under de_DE), which the
    // page parsers refuse rather than guess: its numbers are asked for in C's.
    let mut opts = process::RunOptions::new(timeout);
    opts.env.push(("LC_ALL".into(), "C".into()));
    let cap = process::run(program, args, &opts).map_err(|e| match e {
        ProcessError::Spawn { program, source } => NcuError::Spawn { program, source },
        ProcessError::Wait { program, source } => NcuError::Wait { program, source },
        // These options give the child no input file, so this cannot happen; kept total.
        e @ ProcessError::Stdin { .. } => NcuError::Spawn {
            program: program.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        },
    })?;
    Ok(RunOutput {
        argv: argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        exit_status: cap.exit_code,
        signal: cap.signal,
        timed_out: cap.timed_out,
        timeout: klab_core::text::describe_duration(timeout),
        stdout: String::from_utf8_lossy(&cap.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&cap.stderr).into_owned(),
        output: String::from_utf8_lossy(&cap.merged).into_owned(),
        incomplete: cap.incomplete,
    })
}

/// `ncu --import <report> --csv --page raw`, checked ([`RunOutput::check`]) and parsed
/// from stdout ([`parse_raw`]).
pub fn import_raw(ncu: &Path, report: &Path, timeout: Duration) -> Result<RawReport, NcuError> {
    let out = run(&import_argv(ncu, report, Page::Raw), timeout)?;
    out.check()?;
    parse_raw(&out.stdout)
}

/// `ncu --import <report> --csv --page details`, checked and parsed ([`parse_details`]).
pub fn import_details(
    ncu: &Path,
    report: &Path,
    timeout: Duration,
) -> Result<DetailsReport, NcuError> {
    let out = run(&import_argv(ncu, report, Page::Details), timeout)?;
    out.check()?;
    parse_details(&out.stdout)
}

/// The ncu binary: `explicit` if given (as is, so a wrong path fails later with an error
/// naming it), else `ncu` on `PATH`, else [`DEFAULT_NCU_PATH`] if it exists.
pub fn locate_ncu(explicit: Option<&Path>) -> Option<PathBuf> {
    process::locate_tool(explicit, "ncu", &[Path::new(DEFAULT_NCU_PATH)])
}
