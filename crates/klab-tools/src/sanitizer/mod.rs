//! Compute Sanitizer: build the command, run it as a child process under a watchdog, and
//! parse its report into findings and one outcome.
//!
//! # What a report looks like
//!
//! Every line the tool writes starts with the prefix `=========`; the application's own
//! output is interleaved without it. A *block* is a header line (prefix, one space, text)
//! followed by indented continuation lines, ended by a bare prefix line or the next header.
//! The parser works on that structure, not on particular kernels: every block becomes a
//! finding, the summary, or a note (kept verbatim in [`Report::notes`]); nothing is dropped.
//! A block whose header it does not recognise is a finding of kind [`FindingKind::Other`]
//! with its raw text.
//!
//! # Outcome precedence
//!
//! [`parse`] decides [`Outcome`] by the first rule that applies:
//!
//! 1. A finding of a known kind (anything but `Other`: invalid access, race, barrier,
//!    uninitialised read, leak) -> [`Outcome::FoundErrors`]. Real findings beat everything,
//!    including a non-zero application status (kept in [`Report::exit_status`] and
//!    [`Report::app_failure`]) and a tool failure message elsewhere in the report.
//! 2. A message saying the tool could not do its job (`Internal Sanitizer Error`,
//!    `Device not supported`, `Target application terminated before first instrumented API
//!    call`, `No attachable process`, `Failed to initialize ...`, unknown option, ...), or a
//!    timeout or signal in [`run`] -> [`Outcome::ToolFailed`]. Such runs also print API errors
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
//! Racecheck warnings count as errors for the outcome (a race is evidence against a kernel
//! whatever its severity); [`Report::error_summary`] keeps the tool's error count and
//! [`Report::warnings`] its warning count.

mod parse;
mod run;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use parse::parse;
pub use run::run;

/// A Compute Sanitizer tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tool {
    Memcheck,
    Racecheck,
    Synccheck,
    Initcheck,
}

impl Tool {
    /// The recommended order: memcheck first (racecheck does not check addresses), then
    /// racecheck, synccheck, initcheck.
    pub const ALL: [Tool; 4] = [
        Tool::Memcheck,
        Tool::Racecheck,
        Tool::Synccheck,
        Tool::Initcheck,
    ];

    /// The name `--tool` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Tool::Memcheck => "memcheck",
            Tool::Racecheck => "racecheck",
            Tool::Synccheck => "synccheck",
            Tool::Initcheck => "initcheck",
        }
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tool {
    type Err = SanitizerError;

    /// The lowercase name; ASCII case and surrounding whitespace are ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Tool::ALL
            .into_iter()
            .find(|tool| tool.as_str().eq_ignore_ascii_case(t))
            .ok_or_else(|| SanitizerError::UnknownTool(s.to_string()))
    }
}

/// A comma-separated list of tools as a command line gives it (`memcheck,racecheck`); empty
/// or `none` is no tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolList(pub Vec<Tool>);

impl FromStr for ToolList {
    type Err = SanitizerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() || s.trim() == "none" {
            return Ok(ToolList(Vec::new()));
        }
        s.split(',')
            .filter(|t| !t.trim().is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map(ToolList)
    }
}

impl fmt::Display for ToolList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.0.iter().map(|t| t.as_str()).collect();
        f.write_str(&names.join(","))
    }
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
    #[error("unknown sanitizer tool `{0}` (expected memcheck, racecheck, synccheck or initcheck)")]
    UnknownTool(String),
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

/// A race's hazard, from the order of the two accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Hazard {
    /// Write then read.
    Raw,
    /// Read then write.
    War,
    /// Write then write.
    Waw,
}

impl fmt::Display for Hazard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hazard::Raw => "RAW",
            Hazard::War => "WAR",
            Hazard::Waw => "WAW",
        })
    }
}

/// What a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    InvalidGlobalRead,
    InvalidGlobalWrite,
    InvalidSharedRead,
    InvalidSharedWrite,
    InvalidLocalRead,
    InvalidLocalWrite,
    /// A misaligned access (any space, read or write).
    Misaligned,
    UninitializedGlobalRead,
    /// One pair of racing accesses (racecheck).
    Race,
    /// A barrier or synchronisation error (synccheck).
    Barrier,
    /// An allocation never freed (memcheck `--leak-check full`).
    Leak,
    /// Anything else the tool reported as an error, e.g. `Program hit CUDA_ERROR_... on
    /// CUDA API call`, or a block this parser does not know. Kept with its raw text.
    Other,
}

impl FindingKind {
    /// Lowercase words, e.g. `invalid global read`.
    pub fn label(self) -> &'static str {
        match self {
            FindingKind::InvalidGlobalRead => "invalid global read",
            FindingKind::InvalidGlobalWrite => "invalid global write",
            FindingKind::InvalidSharedRead => "invalid shared read",
            FindingKind::InvalidSharedWrite => "invalid shared write",
            FindingKind::InvalidLocalRead => "invalid local read",
            FindingKind::InvalidLocalWrite => "invalid local write",
            FindingKind::Misaligned => "misaligned access",
            FindingKind::UninitializedGlobalRead => "uninitialized global read",
            FindingKind::Race => "race",
            FindingKind::Barrier => "barrier error",
            FindingKind::Leak => "leak",
            FindingKind::Other => "other",
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One error the tool reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    /// Bytes of the access (`of size 4 bytes`).
    pub access_size: Option<u32>,
    /// For a race.
    pub hazard: Option<Hazard>,
    /// The kernel (function name without its parameter list).
    pub kernel: Option<String>,
    /// `file:line`, e.g. `default_program:25` or `transpose.cu:25`. For a race, the first
    /// access of the pair.
    pub location: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// For a race, the second access's `file:line`.
    pub peer_location: Option<String>,
    /// `(x,y,z)` of the thread.
    pub thread: Option<[u32; 3]>,
    /// `(x,y,z)` of the block.
    pub block: Option<[u32; 3]>,
    /// The faulting or leaked address as printed, e.g. `0x48ea3d090c`.
    pub address: Option<String>,
    /// Hazards for a race (`[N hazards]`), 1 otherwise.
    pub count: u64,
    /// The report lines this finding came from, verbatim (for a race pair: the block's
    /// header and the pair's line).
    pub raw: String,
}

impl Finding {
    pub(crate) fn new(kind: FindingKind, raw: String) -> Self {
        Finding {
            kind,
            access_size: None,
            hazard: None,
            kernel: None,
            location: None,
            file: None,
            line: None,
            peer_location: None,
            thread: None,
            block: None,
            address: None,
            count: 1,
            raw,
        }
    }

    /// One line: kind, size, kernel, location, thread and block where known.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(h) = self.hazard {
            s.push_str(&format!("{h} "));
        }
        s.push_str(self.kind.label());
        if let Some(n) = self.access_size {
            s.push_str(&format!(" of {n} bytes"));
        }
        if self.kind == FindingKind::Other {
            s.push_str(&format!(": {}", first_line_clipped(&self.raw, 120)));
        }
        if let Some(k) = &self.kernel {
            s.push_str(&format!(" in {k}"));
        }
        if let Some(l) = &self.location {
            s.push_str(&format!(" at {l}"));
        }
        if let Some(p) = &self.peer_location {
            s.push_str(&format!(" with {p}"));
        }
        if let Some([x, y, z]) = self.thread {
            s.push_str(&format!(" thread ({x},{y},{z})"));
        }
        if let Some([x, y, z]) = self.block {
            s.push_str(&format!(" block ({x},{y},{z})"));
        }
        if let Some(a) = &self.address {
            s.push_str(&format!(" address {a}"));
        }
        if self.kind == FindingKind::Race {
            s.push_str(&format!(" [{} hazards]", self.count));
        }
        s
    }
}

/// The verdict on one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The tool ran to its summary, found nothing, and the application succeeded.
    Clean,
    /// The tool found errors (see the module documentation for the precedence).
    FoundErrors,
    /// The tool ran and found nothing, but the application failed. `status` is the exit
    /// status when known.
    ApplicationFailed { status: Option<i32> },
    /// The tool could not run, or could not finish its report.
    ToolFailed { reason: String },
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Clean => f.write_str("clean"),
            Outcome::FoundErrors => f.write_str("found errors"),
            Outcome::ApplicationFailed { status: Some(s) } => {
                write!(f, "application failed (exit {s})")
            }
            Outcome::ApplicationFailed { status: None } => f.write_str("application failed"),
            Outcome::ToolFailed { reason } => write!(f, "tool failed: {reason}"),
        }
    }
}

/// A parsed report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub tool: Tool,
    /// In report order.
    pub findings: Vec<Finding>,
    /// The tool's error count: `ERROR SUMMARY: N errors`, or racecheck's `E` in `RACECHECK
    /// SUMMARY: N hazards displayed (E errors, W warnings)`. Summed if several appear.
    pub error_summary: Option<u64>,
    /// Racecheck's warning count `W`.
    pub warnings: Option<u64>,
    /// `ERROR SUMMARY: N errors were not printed` (over `--print-limit`).
    pub not_printed: Option<u64>,
    /// The summary line(s) without the prefix, joined by ` | ` if several.
    pub summary_line: Option<String>,
    /// Whether the `COMPUTE-SANITIZER` banner was seen.
    pub banner: bool,
    /// The status the run exited with, as given to [`parse`].
    pub exit_status: Option<i32>,
    /// The tool's line saying the application failed (`Target application returned an
    /// error`), recorded whatever the outcome.
    pub app_failure: Option<String>,
    /// The first message saying the tool could not work, recorded whatever the outcome.
    pub tool_failure: Option<String>,
    /// Every block that is neither a finding nor a summary, verbatim without the prefix
    /// (leak summary, application and tool failure messages, unused-memory notes).
    pub notes: Vec<String>,
    pub outcome: Outcome,
}

impl Report {
    /// Only [`Outcome::Clean`] passes.
    pub fn passes(&self) -> bool {
        self.outcome == Outcome::Clean
    }

    /// Findings per kind, in [`FindingKind`] order.
    pub fn counts_by_kind(&self) -> Vec<(FindingKind, usize)> {
        let mut m: BTreeMap<FindingKind, usize> = BTreeMap::new();
        for f in &self.findings {
            *m.entry(f.kind).or_default() += 1;
        }
        m.into_iter().collect()
    }

    /// Sum of [`Finding::count`] over race findings.
    pub fn race_hazards(&self) -> u64 {
        self.findings
            .iter()
            .filter(|f| f.kind == FindingKind::Race)
            .fold(0u64, |a, f| a.saturating_add(f.count))
    }

    /// One line: tool, outcome, summary, counts by kind, the first finding with a location
    /// (else the first finding), exit status.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("{}: {}", self.tool, self.outcome)];
        parts.push(match (self.error_summary, self.warnings) {
            (Some(e), Some(w)) => format!(
                "summary {}, {}",
                plural(e, "error", "errors"),
                plural(w, "warning", "warnings")
            ),
            (Some(e), None) => format!("summary {}", plural(e, "error", "errors")),
            (None, _) => "no summary".to_string(),
        });
        if let Some(n) = self.not_printed {
            let last = parts.len() - 1;
            parts[last].push_str(&format!(" ({n} not printed)"));
        }
        if self.findings.is_empty() {
            parts.push("no findings".to_string());
        } else {
            let counts: Vec<String> = self
                .counts_by_kind()
                .into_iter()
                .map(|(k, n)| {
                    if k == FindingKind::Race {
                        format!("{n} {k} ({} hazards)", self.race_hazards())
                    } else {
                        format!("{n} {k}")
                    }
                })
                .collect();
            parts.push(format!("findings: {}", counts.join(", ")));
            let first = self
                .findings
                .iter()
                .find(|f| f.location.is_some())
                .unwrap_or(&self.findings[0]);
            parts.push(format!("first: {}", first.describe()));
        }
        parts.push(match self.exit_status {
            Some(s) => format!("exit {s}"),
            None => "exit unknown".to_string(),
        });
        one_line(&parts.join("; "))
    }
}

/// One run of the tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub tool: Tool,
    /// The command as run (element 0 is the sanitizer binary), lossily converted.
    pub argv: Vec<String>,
    /// `None` when the process was killed by a signal (including the watchdog).
    pub exit_status: Option<i32>,
    /// The watchdog killed it.
    pub timed_out: bool,
    /// stdout and stderr merged line by line in arrival order (like `2>&1`).
    pub output: String,
    pub report: Report,
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Control characters (newlines, tabs) to spaces.
pub(crate) fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The first non-empty line, clipped to `max` characters.
pub(crate) fn first_line_clipped(s: &str, max: usize) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line = line
        .trim_start_matches('=')
        .trim_start()
        .chars()
        .take(max)
        .collect::<String>();
    one_line(&line)
}
