//! `sanitize.json`, as types: what one Compute Sanitizer run found ([`RunRecord`] with its
//! parsed [`Report`], [`Finding`]s and [`Outcome`]) and the verdict on one kernel over
//! every tool ([`SanitizedKernel`]). `klab sanitize` writes these types and `klab lab` and
//! `klab report` read them back; the parser that fills a [`Report`] from the tool's text is
//! in `klab-tools`. Fields a reader does not find default, so a record written by an older
//! klab (or trimmed by hand) still reads.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use klab_core::text::{first_line_clipped, one_line};

/// A tool name that is not memcheck, racecheck, synccheck or initcheck.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sanitizer tool `{0}` (expected memcheck, racecheck, synccheck or initcheck)")]
pub struct UnknownTool(pub String);

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
    type Err = UnknownTool;

    /// The lowercase name; ASCII case and surrounding whitespace are ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Tool::ALL
            .into_iter()
            .find(|tool| tool.as_str().eq_ignore_ascii_case(t))
            .ok_or_else(|| UnknownTool(s.to_string()))
    }
}

/// A comma-separated list of tools as a command line gives it (`memcheck,racecheck`); empty
/// or `none` is no tool. Serialized as that text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolList(pub Vec<Tool>);

klab_core::serde_as_text!(ToolList);

impl FromStr for ToolList {
    type Err = UnknownTool;

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

/// How serious the tool says a finding is. Only racecheck grades its reports (`Error:`,
/// `Warning:`/`WARN:`, `Info:`/`INFO:`); every other tool's finding is an error.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fails the gate.
    #[default]
    Error,
    /// Fails the gate too (a possible race is evidence against a kernel); counted apart.
    Warning,
    /// Shown, never fails the gate: the tool itself says the accesses are benign (e.g.
    /// "identical data being written" by every thread).
    Info,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }

    /// Whether a finding of this severity fails the gate.
    pub fn fails(self) -> bool {
        self != Severity::Info
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
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
    /// An error the kernel's own code raised on the device: a hardware exception (`Illegal
    /// Instruction`, `Illegal Address`, `Invalid PC`, a stack overflow, with or without
    /// `Warp` / `Lane` / `Device`) or a device-side `malloc`/`free` error.
    DeviceException,
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
            FindingKind::DeviceException => "device exception",
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
    /// As the tool graded it; error when it does not say (and in records older than this
    /// field).
    #[serde(default)]
    pub severity: Severity,
    /// Bytes of the access (`of size 4 bytes`).
    #[serde(default)]
    pub access_size: Option<u32>,
    /// For a race.
    #[serde(default)]
    pub hazard: Option<Hazard>,
    /// The kernel (function name without its parameter list).
    #[serde(default)]
    pub kernel: Option<String>,
    /// `file:line`, e.g. `default_program:25` or `transpose.cu:25`. For a race, the first
    /// access of the pair.
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u32>,
    /// For a race, the second access's `file:line`.
    #[serde(default)]
    pub peer_location: Option<String>,
    /// `(x,y,z)` of the thread.
    #[serde(default)]
    pub thread: Option<[u32; 3]>,
    /// `(x,y,z)` of the block.
    #[serde(default)]
    pub block: Option<[u32; 3]>,
    /// The faulting or leaked address as printed, e.g. `0x48ea3d090c`.
    #[serde(default)]
    pub address: Option<String>,
    /// Hazards for a race (`[N hazards]`), 1 otherwise.
    #[serde(default = "one")]
    pub count: u64,
    /// The report lines this finding came from, verbatim (for a race pair: the block's
    /// header and the pair's line).
    #[serde(default)]
    pub raw: String,
}

impl Finding {
    pub fn new(kind: FindingKind, raw: String) -> Self {
        Finding {
            kind,
            severity: Severity::Error,
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

    /// One line: severity (when not an error), kind, size, kernel, location, thread and
    /// block where known.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if self.severity != Severity::Error {
            s.push_str(&format!("{} ", self.severity));
        }
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
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// The tool's error count: `ERROR SUMMARY: N errors`, or racecheck's `E` in `RACECHECK
    /// SUMMARY: N hazards displayed (E errors, W warnings)`. Summed if several appear.
    #[serde(default)]
    pub error_summary: Option<u64>,
    /// Racecheck's warning count `W`.
    #[serde(default)]
    pub warnings: Option<u64>,
    /// `ERROR SUMMARY: N errors were not printed` (over `--print-limit`).
    #[serde(default)]
    pub not_printed: Option<u64>,
    /// The summary line(s) without the prefix, joined by ` | ` if several.
    #[serde(default)]
    pub summary_line: Option<String>,
    /// Whether the `COMPUTE-SANITIZER` banner was seen.
    #[serde(default)]
    pub banner: bool,
    /// The status the run exited with, as given to [`parse`].
    #[serde(default)]
    pub exit_status: Option<i32>,
    /// The tool's line saying the application failed (`Target application returned an
    /// error`), recorded whatever the outcome.
    #[serde(default)]
    pub app_failure: Option<String>,
    /// The first message saying the tool could not work, recorded whatever the outcome.
    #[serde(default)]
    pub tool_failure: Option<String>,
    /// How the tool's own summary count disagrees with the findings parsed from the same
    /// report, in words; `None` when they agree or there is no count to compare.
    #[serde(default)]
    pub summary_mismatch: Option<String>,
    /// Every block that is neither a finding nor a summary, verbatim without the prefix
    /// (leak summary, application and tool failure messages, unused-memory notes).
    #[serde(default)]
    pub notes: Vec<String>,
    pub outcome: Outcome,
}

impl Report {
    /// A report with nothing in it yet (the parser fills it; the outcome starts clean).
    pub fn empty(tool: Tool) -> Report {
        Report {
            tool,
            findings: Vec::new(),
            error_summary: None,
            warnings: None,
            not_printed: None,
            summary_line: None,
            banner: false,
            exit_status: None,
            app_failure: None,
            tool_failure: None,
            summary_mismatch: None,
            notes: Vec::new(),
            outcome: Outcome::Clean,
        }
    }

    /// Only [`Outcome::Clean`] passes.
    pub fn passes(&self) -> bool {
        self.outcome == Outcome::Clean
    }

    /// Findings per kind and severity, in [`FindingKind`] then [`Severity`] order.
    pub fn counts_by_kind(&self) -> Vec<(FindingKind, Severity, usize)> {
        let mut m: BTreeMap<(FindingKind, Severity), usize> = BTreeMap::new();
        for f in &self.findings {
            *m.entry((f.kind, f.severity)).or_default() += 1;
        }
        m.into_iter().map(|((k, s), n)| (k, s, n)).collect()
    }

    /// Sum of [`Finding::count`] over race findings of every severity.
    pub fn race_hazards(&self) -> u64 {
        self.race_hazards_of(|_| true)
    }

    fn race_hazards_of(&self, severity: impl Fn(Severity) -> bool) -> u64 {
        self.findings
            .iter()
            .filter(|f| f.kind == FindingKind::Race && severity(f.severity))
            .fold(0u64, |a, f| a.saturating_add(f.count))
    }

    /// One line: tool, outcome, summary, counts by kind (and severity, when not an error),
    /// a disagreement between the summary and the findings, the first failing finding with
    /// a location (else the first failing finding, else the first), exit status.
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
                .map(|(k, sev, n)| {
                    let graded = match sev {
                        Severity::Error => k.to_string(),
                        _ => format!("{k} {sev}"),
                    };
                    if k == FindingKind::Race {
                        let h = self.race_hazards_of(|s| s == sev);
                        format!("{n} {graded} ({h} hazards)")
                    } else {
                        format!("{n} {graded}")
                    }
                })
                .collect();
            parts.push(format!("findings: {}", counts.join(", ")));
        }
        if let Some(m) = &self.summary_mismatch {
            parts.push(format!("summary disagrees: {m}"));
        }
        let failing = || self.findings.iter().filter(|f| f.severity.fails());
        let first = failing()
            .find(|f| f.location.is_some())
            .or_else(|| failing().next())
            .or_else(|| self.findings.first());
        if let Some(first) = first {
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
    #[serde(default)]
    pub argv: Vec<String>,
    /// `None` when the process was killed by a signal (including the watchdog).
    #[serde(default)]
    pub exit_status: Option<i32>,
    /// The watchdog killed it.
    #[serde(default)]
    pub timed_out: bool,
    /// stdout and stderr merged line by line in arrival order (like `2>&1`).
    #[serde(default)]
    pub output: String,
    pub report: Report,
}

impl RunRecord {
    /// The run as its report file holds it: `$ ARGV`, the output, `exit=N` (or `signal`).
    pub fn log_text(&self) -> String {
        format!(
            "$ {}\n{}\nexit={}\n",
            self.argv.join(" "),
            self.output,
            self.exit_status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "signal".into())
        )
    }
}

fn one() -> u64 {
    1
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One kernel of `sanitize.json`: every tool's run at a ragged and a full-tile size, and the
/// verdict line `klab sanitize` printed for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SanitizedKernel {
    /// Kernel name.
    pub kernel: String,
    /// Why the kernel is known to be broken, when it is.
    pub known_broken: Option<String>,
    /// The sizes each tool ran.
    pub sizes: Vec<u64>,
    /// One run per tool, in the order they ran.
    pub runs: Vec<RunRecord>,
    /// The verdict line.
    pub verdict: String,
}

impl SanitizedKernel {
    /// Tools whose run found errors.
    pub fn found_by(&self) -> Vec<Tool> {
        self.runs
            .iter()
            .filter(|r| r.report.outcome == Outcome::FoundErrors)
            .map(|r| r.tool)
            .collect()
    }

    /// Every tool ran and came back clean.
    pub fn clean(&self) -> bool {
        !self.runs.is_empty() && self.runs.iter().all(|r| !r.timed_out && r.report.passes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_logs_its_command_output_and_exit() {
        let mut r = RunRecord {
            tool: Tool::Memcheck,
            argv: vec![
                "compute-sanitizer".into(),
                "--tool".into(),
                "memcheck".into(),
            ],
            exit_status: Some(0),
            timed_out: false,
            output: "========= ERROR SUMMARY: 0 errors".into(),
            report: Report::empty(Tool::Memcheck),
        };
        assert_eq!(
            r.log_text(),
            "$ compute-sanitizer --tool memcheck\n========= ERROR SUMMARY: 0 errors\nexit=0\n"
        );
        r.exit_status = None;
        assert!(r.log_text().ends_with("\nexit=signal\n"));
    }

    #[test]
    fn a_trimmed_record_still_reads() {
        let k: SanitizedKernel = serde_json::from_str(
            r#"{"kernel":"broken","known_broken":"why","sizes":[33,1024],
                "runs":[{"tool":"memcheck","report":{"tool":"memcheck","outcome":{"kind":"found_errors"},
                "findings":[{"kind":"invalid_global_write","location":"a.cu:3"}]}},
                {"tool":"racecheck","exit_status":0,"report":{"tool":"racecheck","outcome":{"kind":"clean"}}}]}"#,
        )
        .unwrap();
        assert_eq!(k.found_by(), vec![Tool::Memcheck]);
        assert!(!k.clean());
        assert_eq!(k.runs[0].report.findings[0].count, 1);
        assert_eq!(k.runs[1].report.tool, Tool::Racecheck);
        let none: SanitizedKernel = serde_json::from_str(r#"{"kernel":"x"}"#).unwrap();
        assert!(!none.clean(), "no runs is not clean");
    }

    #[test]
    fn a_record_round_trips() {
        let mut report = Report::empty(Tool::Synccheck);
        report.outcome = Outcome::ToolFailed {
            reason: "no banner".into(),
        };
        let k = SanitizedKernel {
            kernel: "tiled".into(),
            known_broken: None,
            sizes: vec![33, 1024],
            runs: vec![RunRecord {
                tool: Tool::Synccheck,
                argv: vec!["compute-sanitizer".into()],
                exit_status: None,
                timed_out: true,
                output: String::new(),
                report,
            }],
            verdict: "FAIL".into(),
        };
        let back: SanitizedKernel =
            serde_json::from_str(&serde_json::to_string(&k).unwrap()).unwrap();
        assert_eq!(back, k);
    }
}
