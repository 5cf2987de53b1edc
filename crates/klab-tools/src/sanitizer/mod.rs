//! Compute Sanitizer: build the command, run it as a child process under a watchdog, and
//! parse its report into findings and one outcome; or [`import`] a report saved elsewhere
//! and parse it the same way.
//!
//! # What a report looks like
//!
//! Every line the tool writes starts with the prefix `=========`; the application's own
//! output is interleaved without it. Lines end in `\n`, `\r\n` or a lone `\r`, and the
//! prefix is found anywhere in a line (an application that printed without a final newline
//! leaves its text in front of the tool's line; the finding keeps only the tool's part).
//! A *block* is a header line (prefix, one space, text)
//! followed by indented continuation lines, ended by a bare prefix line or the next header.
//! The parser works on that structure, not on particular kernels: every block becomes a
//! finding, the summary, or a note (kept verbatim in [`Report::notes`]); nothing is dropped.
//! A block whose header it does not recognise is a finding of kind [`FindingKind::Other`]
//! with its raw text, unless it is the program's: a program may print a line that starts
//! with the prefix (`========= Checking results`), inside a record too. Such a header line,
//! when its words are not alarming (error, fail, warning, invalid, address, race, leak, ...),
//! is read as the program's output where the tool's ERROR SUMMARY counts every finding
//! without it; the report is then read again without it, and a note says so. Racecheck's
//! summary counts only hazards, so under it nothing is set aside. Racecheck's `--racecheck-trace-sync yes` lines (`Barrier called by
//! threads starting at ...`, `Syncwarp called by ...`, `Sync mask of thread N: ...`) trace
//! synchronisation that happened: notes, not barrier errors.
//!
//! # Outcome precedence
//!
//! [`parse`] decides [`Outcome`] by the first rule that applies:
//!
//! 1. A finding of a known kind (anything but `Other`: invalid access, atomics included,
//!    race, barrier, uninitialised read, leak), or an `Other` the kernel's own code raised (a
//!    hardware exception: `Illegal Instruction`, `Illegal Address`, `Warp Illegal Address`,
//!    `Invalid PC`, a stack overflow, ...; a device-side `Malloc/Free error`) ->
//!    [`Outcome::FoundErrors`]. Real findings beat everything, including a non-zero
//!    application status (kept in [`Report::exit_status`] and [`Report::app_failure`]) and a
//!    tool failure message elsewhere in the report.
//! 2. A message saying the tool could not do its job (`Internal Sanitizer Error`,
//!    `Device not supported`, `Target application terminated before first instrumented API
//!    call`, `No attachable process`, `Failed to initialize ...`, unknown option, ...) or
//!    that its results may be incomplete (`Detected overflow of tracked cuda::barrier
//!    structures. Results might be incorrect`), or a timeout or signal in [`run`] ->
//!    [`Outcome::ToolFailed`]. Such runs also print API errors
//!    (`Program hit ... (error 999)`) and a non-zero ERROR SUMMARY; those do not make them
//!    findings about the kernel.
//! 3. `Other` findings (e.g. `Program hit CUDA_ERROR_...`, unknown blocks) or a summary count
//!    above zero (racecheck: errors plus warnings) -> `FoundErrors`.
//! 4. No summary line at all -> `ToolFailed` (no banner: the tool did not run, e.g. an
//!    unrecognised option or `compute-sanitizer --version`; banner: the report is incomplete).
//! 5. The exit status equals `error_exitcode` (when that is not 0) -> `FoundErrors`: the
//!    tool signalled errors even though the report itemises none.
//! 6. The application's own failure (`Target application returned an error`, `process didn't
//!    terminate successfully`) or any other non-zero status -> [`Outcome::ApplicationFailed`].
//! 7. Otherwise [`Outcome::Clean`]. An unknown status (`None`, e.g. a saved log) does not by
//!    itself fail a run in [`parse`]; [`run`] turns a signal death into `ToolFailed`.
//!
//! # Severity
//!
//! Racecheck grades each hazard (`Error:`, `Warning:`/`WARN:`, `Info:`/`INFO:`, or a
//! trailing `(Warning)`); every finding keeps its [`Severity`] and [`Report::describe`]
//! shows it. Errors and warnings fail the gate alike (a possible race is evidence against
//! a kernel; a demanding user would rather read a false alarm than ship a race), counted
//! apart in [`Report::error_summary`] and [`Report::warnings`]. Infos never fail: the tool
//! itself says those accesses are benign (every thread writing the same value), and a
//! report whose only findings are infos is [`Outcome::Clean`] with the infos listed. In the
//! rules above, "finding" means a finding that is not an info.
//!
//! # The summary against the findings
//!
//! The tool's own count is checked against the blocks parsed: `ERROR SUMMARY: N errors`
//! against every finding block plus those `not printed`, `RACECHECK SUMMARY: N hazards
//! displayed (E errors, W warnings)` against the race blocks. Compute Sanitizer counts
//! errors and warnings in N and infos in neither count; cuda-memcheck (5.5, 6.x) counts the
//! infos in N too while its breakdown still lists only errors and warnings. So N agrees
//! when it equals the error and warning blocks parsed, or those plus the info blocks; the
//! breakdown is checked against the error and warning blocks when it grades every displayed
//! hazard, or every one but the infos. A disagreement does not change the outcome (either
//! side already decides it); it is said in [`Report::summary_mismatch`] and in the describe
//! line, never silently.

mod import;
mod parse;
mod run;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use klab_evidence::sanitize::{
    Finding, FindingKind, Hazard, Outcome, Report, RunRecord, SanitizedKernel, Severity, Tool,
    ToolList, UnknownTool,
};

pub use import::{import, ImportError, EXPECTED_FORMAT};
pub use parse::parse;
pub use run::run;

/// The compute-sanitizer binary: `explicit` if given, else the first on PATH, else the
/// toolkit's usual places ([`crate::process::locate_tool`]).
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    crate::process::locate_tool(
        explicit,
        "compute-sanitizer",
        &[
            Path::new("/usr/local/cuda/bin/compute-sanitizer"),
            Path::new("/usr/local/cuda/compute-sanitizer/compute-sanitizer"),
        ],
    )
}

/// Command-line options. Every one is written out explicitly by [`argv`], so a saved command
/// line says what was checked without relying on the tool's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Options {
    /// `--error-exitcode`: the status the tool returns when it found errors (the tool's own
    /// default is 0, which lets a CI step stay green through real errors). Default 99.
    pub error_exitcode: i32,
    /// `--padding` bytes after each allocation, memcheck only. Default 32.
    pub padding: u32,
    /// `--leak-check full` (true) or `no`, memcheck only. Default true.
    pub leak_check: bool,
    /// `--destroy-on-device-error kernel` (true) or `context`. Default true: the context
    /// survives a faulting kernel, so the application finishes with its own status.
    pub destroy_on_device_error_kernel: bool,
    /// `--print-limit`: how many errors are printed (the tool's default is 100; 0 means no
    /// limit). Errors over the limit are still counted in the summary.
    pub print_limit: Option<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            error_exitcode: 99,
            padding: 32,
            leak_check: true,
            destroy_on_device_error_kernel: true,
            print_limit: None,
        }
    }
}

/// The command: `compute-sanitizer --tool <t> --error-exitcode <c> --destroy-on-device-error
/// kernel|context [memcheck: --padding <p> --leak-check full|no] [--print-limit <n>] <program>
/// <args...>`. Element 0 is the literal `compute-sanitizer`; [`run`] replaces it with the
/// binary it is given.
pub fn argv(tool: Tool, opts: &Options, program: &Path, args: &[OsString]) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![
        "compute-sanitizer".into(),
        "--tool".into(),
        tool.as_str().into(),
        "--error-exitcode".into(),
        opts.error_exitcode.to_string().into(),
        "--destroy-on-device-error".into(),
        if opts.destroy_on_device_error_kernel {
            "kernel"
        } else {
            "context"
        }
        .into(),
    ];
    if tool == Tool::Memcheck {
        v.push("--padding".into());
        v.push(opts.padding.to_string().into());
        v.push("--leak-check".into());
        v.push(if opts.leak_check { "full" } else { "no" }.into());
    }
    if let Some(n) = opts.print_limit {
        v.push("--print-limit".into());
        v.push(n.to_string().into());
    }
    v.push(program.as_os_str().to_os_string());
    v.extend(args.iter().cloned());
    v
}

/// Errors of this module. A tool that ran and failed is not an error: it is a
/// [`RunRecord`] whose outcome is [`Outcome::ToolFailed`].
#[derive(Debug, thiserror::Error)]
pub enum SanitizerError {
    #[error("cannot start the Compute Sanitizer binary {}: {source}", .program.display())]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("waiting for {}: {source}", .program.display())]
    Wait {
        program: PathBuf,
        source: std::io::Error,
    },
}
