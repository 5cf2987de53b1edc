//! Nsight Compute (`ncu`): build the command lines, run them as child processes under a
//! watchdog, and parse what ncu prints into typed records.
//!
//! # The flow
//!
//! 1. [`ProfileRequest::argv`] profiles one kernel by its function name, after skipping the
//!    launches that are not measurements (validation, warm-up), and exports a `.ncu-rep`.
//!    It never changes GPU clocks (`--clock-control none` is always there).
//! 2. [`import_argv`] turns the report into CSV: [`Page::Raw`] (one row per profiled kernel,
//!    one column per metric, read by [`parse_raw`]) or [`Page::Details`] (one row per
//!    section metric or rule result, read by [`parse_details`]).
//! 3. [`parse_query_metrics`] reads `ncu --query-metrics` so a caller can see which metric
//!    names exist before asking for them (ncu answers a name it does not know with `n/a`,
//!    not with an error).
//!
//! [`run`] runs any of these argument vectors; [`import_raw`] and [`import_details`] run an
//! import and parse it in one step. [`import_file`] takes a file someone else wrote (a
//! report, which goes through ncu, or either CSV page, told apart by its header) to the
//! same parsers and gives its launches as [`KernelRecord`]s whichever it was.
//!
//! # Other names
//!
//! A page may hold a value under another name than the one klab asks for (a counter
//! without its roll-up suffix, a total instead of its parts, the device attributes instead
//! of the `CC` column); [`ALIASES`] lists them, and [`KernelRecord`]'s lookups read through
//! it.
//!
//! # Units
//!
//! ncu's default units are kept and recorded, not forced to base units: the same metric
//! can come back as `ns` from a live run and `us` from an import (see [`value`] and
//! [`convert`]). Use [`KernelRecord::number_in`] to read a value in the unit you need.
//!
//! # Errors
//!
//! Each [`NcuError`] is one line that names the problem. Notably, `ERR_NVGPUCTRPERM` (the
//! driver does not let this user read the performance counters) is
//! [`NcuError::CounterPermission`]: a permission policy of the machine, not a failure of
//! the kernel.

mod aliases;
mod csv;
mod details;
mod import;
mod listing;
mod raw;
mod run;
pub mod value;

pub(crate) use klab_core::text::one_line;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use aliases::{alias, Alias, ALIASES};
pub use details::{
    parse_details, DetailsKernel, DetailsMetric, DetailsReport, RuleResult, Section, SectionMetric,
    COMMAND_LINE_SECTION, SECTION_METRICS,
};
pub use import::{import_file, read_page, Format, Imported, EXPECTED_FORMAT, REPORT_SIGNATURE};
pub use listing::{parse_query_metrics, MetricInfo, MetricListing, UNLISTED_PREFIXES};
pub use raw::{
    base_function_name, column_kind, parse_raw, Column, ColumnKind, KernelRecord, RawReport,
    DEVICE_ATTRIBUTE_PREFIXES, IDENTITY_COLUMNS,
};
pub use run::{import_details, import_raw, locate_ncu, run, RunOutput, DEFAULT_NCU_PATH};
pub use value::{convert, parse_value, Lookup, MetricValue, Value};

/// The sections klab collects by default: launch configuration (grid, block, registers,
/// shared memory), throughput against the device's ceilings, the memory hierarchy, and
/// occupancy with its limiters.
pub const DEFAULT_SECTIONS: [&str; 4] = [
    "LaunchStats",
    "SpeedOfLight",
    "MemoryWorkloadAnalysis",
    "Occupancy",
];

/// Metric names, one constant each, for the metrics klab always adds ([`KLAB_METRICS`]).
///
/// Every name was checked against a real H200 (Nsight Compute 2025.3.1): each appears in
/// the fixtures' raw CSV with a value (`tests/fixtures/ncu/dev_import_raw_tiled.csv`), and
/// each base name except `launch__*` and `sass__*` is in `ncu --query-metrics` (those two
/// families are not listed there, see [`UNLISTED_PREFIXES`]).
pub mod metrics {
    /// Sectors requested by global loads (L1TEX T stage).
    pub const GLOBAL_LOAD_SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum";
    /// Sectors requested by global stores.
    pub const GLOBAL_STORE_SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum";
    /// Requests sent to the T stage by global loads.
    pub const GLOBAL_LOAD_REQUESTS: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum";
    /// Requests sent to the T stage by global stores.
    pub const GLOBAL_STORE_REQUESTS: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum";
    /// Shared-memory bank conflicts of loads (LDS, ...).
    pub const SHARED_LOAD_BANK_CONFLICTS: &str =
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum";
    /// Shared-memory bank conflicts of stores (STS, ...).
    pub const SHARED_STORE_BANK_CONFLICTS: &str =
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum";
    /// Shared-memory wavefronts of loads.
    pub const SHARED_LOAD_WAVEFRONTS: &str = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum";
    /// Shared-memory wavefronts of stores.
    pub const SHARED_STORE_WAVEFRONTS: &str =
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum";
    /// DRAM throughput, percent of its peak over the kernel's elapsed time.
    pub const DRAM_THROUGHPUT_PCT: &str = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
    /// SM throughput, percent of its peak over the kernel's elapsed time.
    pub const SM_THROUGHPUT_PCT: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
    /// Kernel duration on the GPU.
    pub const DURATION: &str = "gpu__time_duration.sum";
    /// Bytes read from DRAM.
    pub const DRAM_BYTES_READ: &str = "dram__bytes_read.sum";
    /// Bytes written to DRAM.
    pub const DRAM_BYTES_WRITE: &str = "dram__bytes_write.sum";
    /// Bytes read from and written to DRAM: the two above summed, else this total where a
    /// page holds only it (see [`super::ALIASES`]). Not asked for: the parts say more.
    pub const DRAM_BYTES: &str = "dram__bytes.sum";
    /// Registers per thread of the launch.
    pub const REGISTERS_PER_THREAD: &str = "launch__registers_per_thread";
    /// Achieved occupancy: active warps, percent of the peak per active cycle.
    pub const ACHIEVED_OCCUPANCY_PCT: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
    /// Instructions executed for register spilling.
    pub const REGISTER_SPILLING_INSTRUCTIONS: &str = "sass__inst_executed_register_spilling";
}

/// The extra metrics klab always asks for besides [`DEFAULT_SECTIONS`]: global sectors and
/// requests per direction (sectors per request), shared bank conflicts and wavefronts,
/// DRAM and SM throughput, duration, DRAM bytes, registers, achieved occupancy, spilling.
pub const KLAB_METRICS: [&str; 16] = [
    metrics::GLOBAL_LOAD_SECTORS,
    metrics::GLOBAL_STORE_SECTORS,
    metrics::GLOBAL_LOAD_REQUESTS,
    metrics::GLOBAL_STORE_REQUESTS,
    metrics::SHARED_LOAD_BANK_CONFLICTS,
    metrics::SHARED_STORE_BANK_CONFLICTS,
    metrics::SHARED_LOAD_WAVEFRONTS,
    metrics::SHARED_STORE_WAVEFRONTS,
    metrics::DRAM_THROUGHPUT_PCT,
    metrics::SM_THROUGHPUT_PCT,
    metrics::DURATION,
    metrics::DRAM_BYTES_READ,
    metrics::DRAM_BYTES_WRITE,
    metrics::REGISTERS_PER_THREAD,
    metrics::ACHIEVED_OCCUPANCY_PCT,
    metrics::REGISTER_SPILLING_INSTRUCTIONS,
];

/// The extension ncu gives exported reports.
pub const REPORT_EXTENSION: &str = "ncu-rep";

/// `--cache-control`: whether ncu flushes the GPU caches before each replay pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CacheControl {
    /// Flush all caches before each pass (ncu's default): every pass starts cold, so
    /// passes agree with each other.
    #[default]
    All,
    /// Leave the caches alone: passes see whatever earlier work left behind.
    None,
}

impl CacheControl {
    /// The word `--cache-control` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheControl::All => "all",
            CacheControl::None => "none",
        }
    }
}

impl std::str::FromStr for CacheControl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "all" => Ok(CacheControl::All),
            "none" => Ok(CacheControl::None),
            other => Err(format!("'{other}': expected all or none")),
        }
    }
}

impl std::fmt::Display for CacheControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Columns only the details page has: a header with both is a details page, and
/// [`super::parse_raw`] refuses it.
pub const DETAILS_COLUMNS: [&str; 2] = ["Section Name", "Metric Name"];

/// Whether a CSV header (its field names) is the details page's.
pub(crate) fn is_details_header<S: AsRef<str>>(names: &[S]) -> bool {
    DETAILS_COLUMNS
        .iter()
        .all(|c| names.iter().any(|n| n.as_ref().trim() == *c))
}

/// Which page `--import ... --csv --page` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Page {
    /// One row per kernel, every metric a column ([`parse_raw`]).
    Raw,
    /// One row per section metric or rule result ([`parse_details`]).
    Details,
}

impl Page {
    /// The word `--page` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Page::Raw => "raw",
            Page::Details => "details",
        }
    }

    /// The page in words, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Page::Raw => "raw page (--page raw: one row per launch, one column per metric)",
            Page::Details => {
                "details page (--page details: one row per section metric or rule result)"
            }
        }
    }
}

/// The `--kernel-name` that selects `entry`'s launches under `--kernel-name-base function`.
/// A plain name is itself. A qualified name (`ops::twice`) or a template instance
/// (`scale<float, 128>`) becomes a regular expression that takes the function's name with or
/// without its namespaces and template arguments: ncu's function base drops the parameter
/// list, and klab does not rely on what else it drops (ncu also prints a non-type template
/// argument as `(int)128`, which the instance as written would not match). An overload's
/// parameter types (`twice(float *, int)`) are left out with the rest: the profiled process
/// launches that kernel alone.
pub fn kernel_name_filter(entry: &str) -> String {
    let entry = entry.trim();
    // The function a template instance names (`ns::scale` of `ns::scale<(1 > 0)>`: its
    // arguments may hold anything), else the name before an overload's parameter types.
    let template = klab_core::text::template_name(entry);
    let name = template
        .unwrap_or_else(|| raw::strip_trailing_group(entry, '(', ')'))
        .trim();
    if klab_core::text::is_identifier(name) && template.is_none() {
        return name.to_string();
    }
    let base = name.rsplit("::").next().unwrap_or(name);
    let qualifier = &name[..name.len() - base.len()];
    let group = if qualifier.is_empty() {
        String::new()
    } else {
        format!("({qualifier})?")
    };
    format!("regex:^{group}{base}(<.*>)?$")
}

/// What to profile and how. Build it with [`ProfileRequest::new`] (klab's defaults) and
/// adjust the fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileRequest {
    /// The kernel's entry function name, matched with `--kernel-name-base function` (the
    /// demangled name without parameters). A name starting with `regex:` is a regular
    /// expression to ncu.
    pub kernel_name: String,
    /// Matching launches to skip before profiling (validation and warm-up launches; see
    /// [`ProfileRequest::skipping`]).
    pub launch_skip: u64,
    /// Matching launches to profile after the skipped ones.
    pub launch_count: u64,
    /// `--section` identifiers, in order; duplicates are dropped.
    pub sections: Vec<String>,
    /// `--metrics` names, in order; duplicates are dropped; none means no `--metrics`.
    pub metrics: Vec<String>,
    /// Where the report goes. ncu appends `.ncu-rep` when the name does not end with it;
    /// the argument vector passes [`ProfileRequest::report_path`] so the file lands exactly
    /// where this struct says.
    pub export: PathBuf,
    /// `--cache-control`.
    pub cache_control: CacheControl,
    /// The application to run.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl ProfileRequest {
    /// klab's defaults: skip nothing, profile one launch, [`DEFAULT_SECTIONS`] and
    /// [`KLAB_METRICS`], caches flushed.
    pub fn new(
        kernel_name: impl Into<String>,
        export: impl Into<PathBuf>,
        program: impl Into<PathBuf>,
        args: Vec<OsString>,
    ) -> Self {
        ProfileRequest {
            kernel_name: kernel_name.into(),
            launch_skip: 0,
            launch_count: 1,
            sections: DEFAULT_SECTIONS.iter().map(|s| s.to_string()).collect(),
            metrics: KLAB_METRICS.iter().map(|s| s.to_string()).collect(),
            export: export.into(),
            cache_control: CacheControl::All,
            program: program.into(),
            args,
        }
    }

    /// Skip the launches of this kernel that come before the first measured one: the
    /// validation launches (run once to check the output) and the warm-ups. The profiled
    /// launch is the first timed one.
    pub fn skipping(mut self, validation_launches: u64, warmup_launches: u64) -> Self {
        self.launch_skip = validation_launches.saturating_add(warmup_launches);
        self
    }

    /// The report file ncu writes: [`ProfileRequest::export`] with `.ncu-rep` appended
    /// unless it already ends with it (`run/naive` -> `run/naive.ncu-rep`, `a.b` ->
    /// `a.b.ncu-rep`).
    pub fn report_path(&self) -> PathBuf {
        with_report_extension(&self.export)
    }

    /// The command: `<ncu> --kernel-name-base function --kernel-name <name> --launch-skip K
    /// --launch-count N --clock-control none --cache-control all|none --force-overwrite
    /// --export <report> [--section S]... [--metrics a,b,...] <program> <args...>`.
    /// Element 0 is `ncu` as given.
    pub fn argv(&self, ncu: &Path) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![
            ncu.as_os_str().to_os_string(),
            "--kernel-name-base".into(),
            "function".into(),
            "--kernel-name".into(),
            self.kernel_name.clone().into(),
            "--launch-skip".into(),
            self.launch_skip.to_string().into(),
            "--launch-count".into(),
            self.launch_count.to_string().into(),
            // Never change the GPU's clocks: klab measures the machine as it runs.
            "--clock-control".into(),
            "none".into(),
            "--cache-control".into(),
            self.cache_control.as_str().into(),
            "--force-overwrite".into(),
            "--export".into(),
            self.report_path().into_os_string(),
        ];
        for s in dedup(&self.sections) {
            v.push("--section".into());
            v.push(s.into());
        }
        let metrics = dedup(&self.metrics);
        if !metrics.is_empty() {
            v.push("--metrics".into());
            v.push(metrics.join(",").into());
        }
        v.push(self.program.as_os_str().to_os_string());
        v.extend(self.args.iter().cloned());
        v
    }
}

/// `path` with `.ncu-rep` appended unless it already ends with it.
pub fn with_report_extension(path: &Path) -> PathBuf {
    if path.extension().is_some_and(|e| e == REPORT_EXTENSION) {
        return path.to_path_buf();
    }
    let mut s = path.as_os_str().to_os_string();
    s.push(".");
    s.push(REPORT_EXTENSION);
    PathBuf::from(s)
}

fn dedup(items: &[String]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::with_capacity(items.len());
    for i in items {
        let t = i.trim();
        if !t.is_empty() && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// `<ncu> --import <report> --csv --page raw|details`: ncu's default units (no
/// `--print-units base`); the units are recorded by the parsers.
pub fn import_argv(ncu: &Path, report: &Path, page: Page) -> Vec<OsString> {
    vec![
        ncu.as_os_str().to_os_string(),
        "--import".into(),
        report.as_os_str().to_os_string(),
        "--csv".into(),
        "--page".into(),
        page.as_str().into(),
    ]
}

/// `<ncu> --version`, read by [`parse_version`].
pub fn version_argv(ncu: &Path) -> Vec<OsString> {
    vec![ncu.as_os_str().to_os_string(), "--version".into()]
}

/// `<ncu> --query-metrics`, read by [`parse_query_metrics`].
pub fn query_metrics_argv(ncu: &Path) -> Vec<OsString> {
    vec![ncu.as_os_str().to_os_string(), "--query-metrics".into()]
}

/// Nsight Compute's version, from `ncu --version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcuVersion {
    /// The dotted numbers, e.g. `[2025, 3, 1, 0]`.
    pub numbers: Vec<u32>,
    /// The build, e.g. `36398880`, when printed.
    pub build: Option<String>,
    /// The whole version line as printed, trimmed.
    pub line: String,
}

impl NcuVersion {
    /// Whether this version is `min` or newer, comparing the numbers left to right (missing
    /// numbers count as 0): `is_at_least(&[2023, 1])`.
    pub fn is_at_least(&self, min: &[u32]) -> bool {
        let n = self.numbers.len().max(min.len());
        for i in 0..n {
            let a = self.numbers.get(i).copied().unwrap_or(0);
            let b = min.get(i).copied().unwrap_or(0);
            if a != b {
                return a > b;
            }
        }
        true
    }
}

impl fmt::Display for NcuVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.numbers.iter().map(|n| n.to_string()).collect();
        f.write_str(&parts.join("."))
    }
}

/// Read `ncu --version`: the line `Version 2025.3.1.0 (build 36398880) (public-release)`
/// (any line whose first word is `Version`, case-insensitive, followed by dotted numbers).
pub fn parse_version(text: &str) -> Result<NcuVersion, NcuError> {
    for line in text.lines() {
        let t = line.trim();
        let mut words = t.split_whitespace();
        if !words
            .next()
            .is_some_and(|w| w.eq_ignore_ascii_case("version"))
        {
            continue;
        }
        let Some(num) = words.next() else { continue };
        let numbers: Option<Vec<u32>> = num.split('.').map(|p| p.parse().ok()).collect();
        let Some(numbers) = numbers else { continue };
        let build = t.find("(build ").and_then(|k| {
            let rest = &t[k + "(build ".len()..];
            rest.find(')').map(|e| rest[..e].trim().to_string())
        });
        return Ok(NcuVersion {
            numbers,
            build,
            line: t.to_string(),
        });
    }
    Err(NcuError::Version {
        first_line: one_line(
            text.lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or(""),
        ),
    })
}

/// How serious an ncu message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageLevel {
    /// `==ERROR==`
    Error,
    /// `==WARNING==` (e.g. `Running with unmodified GPU clocks`, `No kernels were profiled`,
    /// `Unable to access the following 6 metrics`).
    Warning,
    /// `==PROF==` (connected, profiling progress, disconnected, report written).
    Prof,
}

/// One line ncu printed with its own prefix, anywhere in the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcuMessage {
    /// Which prefix it had.
    pub level: MessageLevel,
    /// The text after the prefix, trimmed.
    pub text: String,
    /// The line (1-based) in the parsed text.
    pub line: usize,
}

impl fmt::Display for NcuMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = match self.level {
            MessageLevel::Error => "==ERROR==",
            MessageLevel::Warning => "==WARNING==",
            MessageLevel::Prof => "==PROF==",
        };
        write!(f, "{p} {}", self.text)
    }
}

/// Errors of this module, one line each.
#[derive(Debug, thiserror::Error)]
pub enum NcuError {
    /// A file given to [`import_file`] could not be read (missing, a FIFO, a device, too
    /// large).
    #[error(transparent)]
    File(#[from] klab_core::artifact::FileError),
    /// A file given to [`import_file`] that is neither a report nor a CSV page.
    #[error(
        "{} is not a profile klab reads{}: expected {EXPECTED_FORMAT}",
        .path.display(),
        .looks_like.as_ref().map(|l| format!(" (it looks like {l})")).unwrap_or_default()
    )]
    NotAProfile {
        /// The file as given.
        path: PathBuf,
        /// What it seems to be instead, when that can be told.
        looks_like: Option<String>,
    },
    /// A report to import, and no ncu binary to read it.
    #[error(
        "{} is an Nsight Compute report, and reading one takes ncu, which is neither on PATH \
         nor at {DEFAULT_NCU_PATH}: give its path (--ncu PATH), or import a CSV page written \
         where ncu is: ncu --import {} --csv --page raw > {}",
        .path.display(),
        .path.display(),
        .path.with_extension("csv").display()
    )]
    NcuMissing {
        /// The report.
        path: PathBuf,
    },
    /// One CSV page given to the other page's parser.
    #[error(
        "the CSV is ncu's {}, not the {} this parser reads",
        .found.describe(),
        .expected.describe()
    )]
    WrongPage {
        /// The page the parser reads.
        expected: Page,
        /// The page the header shows.
        found: Page,
    },
    /// The text to parse is empty or blank.
    #[error("the ncu output is empty")]
    Empty,
    /// ncu printed `ERR_NVGPUCTRPERM`: this user may not read the performance counters.
    #[error(
        "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): this is the \
         driver's permission policy for this user, not a kernel failure; run as an \
         administrator or allow profiling for all users \
         (NVreg_RestrictProfilingToAdminUsers=0). ncu said: {message}"
    )]
    CounterPermission {
        /// ncu's line, verbatim.
        message: String,
    },
    /// No launch matched the filters, or the table has no kernel rows.
    #[error("no kernels were profiled: {detail}")]
    NoKernelsProfiled {
        /// ncu's own line when it printed one, else what the parser saw.
        detail: String,
    },
    /// No line whose first CSV field is `ID`.
    #[error(
        "no CSV header (a line whose first field is \"ID\") in the ncu output{}",
        hint_suffix(.hint)
    )]
    NoHeader {
        /// The first `==ERROR==` line, if any.
        hint: Option<String>,
    },
    /// A row with a different number of fields than the header (details page: more).
    #[error("CSV row {row} (line {line}) has {found} fields but the header has {expected}")]
    RaggedRow {
        /// The record's number in the table, the header being row 1.
        row: usize,
        /// The line (1-based) the row starts on.
        line: usize,
        /// Fields in the row.
        found: usize,
        /// Fields in the header.
        expected: usize,
    },
    /// A quoted field that never closes (a truncated capture).
    #[error("unterminated quoted CSV field starting on line {line}")]
    UnterminatedQuote {
        /// The line (1-based) where the field opens.
        line: usize,
    },
    /// The details page lacks a column it needs.
    #[error("the CSV header has no \"{column}\" column")]
    MissingColumn {
        /// The column's name.
        column: String,
    },
    /// A kernel row whose `ID` is not a whole number.
    #[error("CSV row {row} (line {line}): kernel ID \"{value}\" is not a whole number")]
    BadId {
        /// The record's number in the table, the header being row 1.
        row: usize,
        /// The line (1-based) the row starts on.
        line: usize,
        /// The field as printed.
        value: String,
    },
    /// Numbers written in a locale other than English, or in one that cannot be told
    /// ([`value::NumberLocale`]): refused, never read 1000 times off.
    #[error(
        "{problem}; klab reads only ncu's English number format (`,` between thousands, `.` \
         before decimals) rather than risk a number 1000 times off: write the page under the \
         C locale, e.g. LC_ALL=C ncu --import REPORT.ncu-rep --csv --page raw > REPORT.csv"
    )]
    NumberLocale {
        /// What the numbers show, with examples from the page.
        problem: String,
    },
    /// `--query-metrics` output without any metric line.
    #[error("no metrics in the ncu --query-metrics output{}", hint_suffix(.hint))]
    EmptyListing {
        /// The first `==ERROR==` line, if any.
        hint: Option<String>,
    },
    /// `--version` output without a version line.
    #[error(
        "no \"Version x.y.z\" line in the ncu --version output (first line: \"{first_line}\")"
    )]
    Version {
        /// The first non-empty line of the output.
        first_line: String,
    },
    /// [`run`] was given no program.
    #[error("the ncu argument vector is empty")]
    EmptyArgv,
    /// The binary could not be started (missing, not executable).
    #[error("cannot start the Nsight Compute binary {}: {source}", .program.display())]
    Spawn {
        /// The binary as given.
        program: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Waiting for the process failed.
    #[error("waiting for {}: {source}", .program.display())]
    Wait {
        /// The binary as given.
        program: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The watchdog killed ncu at the deadline ([`RunOutput::check`]).
    #[error("ncu timed out after {after}; the watchdog killed it and its process group")]
    TimedOut {
        /// The timeout, as a person reads it.
        after: String,
    },
    /// ncu died of a signal it was not sent by the watchdog ([`RunOutput::check`]).
    #[error("ncu was killed by signal {signal}")]
    Killed {
        /// The signal number.
        signal: i32,
    },
    /// ncu exited non-zero ([`RunOutput::check`]).
    #[error("ncu failed ({}): {message}", status_words(.status))]
    Failed {
        /// The exit status, when there is one.
        status: Option<i32>,
        /// The first `==ERROR==` line, else the last line printed.
        message: String,
    },
}

fn hint_suffix(hint: &Option<String>) -> String {
    match hint {
        Some(h) => format!("; ncu said: {h}"),
        None => String::new(),
    }
}

fn status_words(status: &Option<i32>) -> String {
    match status {
        Some(s) => format!("exit {s}"),
        None => "no exit status".to_string(),
    }
}

/// The text ncu prints for a counter-permission failure.
pub(crate) const COUNTER_PERMISSION_CODE: &str = "ERR_NVGPUCTRPERM";
/// The text ncu prints when no launch matched the filters (as `==WARNING==` in 2025.3,
/// `==PROF==` in some older versions).
pub(crate) const NO_KERNELS_TEXT: &str = "No kernels were profiled";

/// The failures that ncu reports in its own lines, which beat anything a table holds:
/// a counter-permission error (anywhere) or, when no kernel row was found, "No kernels
/// were profiled".
pub(crate) fn output_failure(text: &str, have_rows: bool) -> Option<NcuError> {
    if let Some(line) = text.lines().find(|l| l.contains(COUNTER_PERMISSION_CODE)) {
        return Some(NcuError::CounterPermission {
            message: one_line(line.trim()),
        });
    }
    if !have_rows {
        if let Some(line) = text.lines().find(|l| l.contains(NO_KERNELS_TEXT)) {
            return Some(NcuError::NoKernelsProfiled {
                detail: one_line(line.trim()),
            });
        }
    }
    None
}

/// The first `==ERROR==` message, for hints.
pub(crate) fn first_error(messages: &[NcuMessage]) -> Option<String> {
    messages
        .iter()
        .find(|m| m.level == MessageLevel::Error)
        .map(|m| one_line(&m.to_string()))
}

#[cfg(test)]
mod tests {

    /// A plain entry is matched as it is; a qualified name or a template instance with or
    /// without what ncu's function base keeps of it.
    #[test]
    fn an_entrys_kernel_name_filter_takes_namespaces_and_templates() {
        assert_eq!(kernel_name_filter("tiled_k"), "tiled_k");
        assert_eq!(
            kernel_name_filter("ops::twice"),
            "regex:^(ops::)?twice(<.*>)?$"
        );
        assert_eq!(
            kernel_name_filter("scale<float, 128>"),
            "regex:^scale(<.*>)?$"
        );
        assert_eq!(
            kernel_name_filter("a::b::scale<float, 128>"),
            "regex:^(a::b::)?scale(<.*>)?$"
        );
        // Template arguments that hold brackets or quotes (a reviewer's entries).
        assert_eq!(
            kernel_name_filter("ns::scale<(1 > 0)>"),
            "regex:^(ns::)?scale(<.*>)?$"
        );
        assert_eq!(kernel_name_filter("scale<'<'>"), "regex:^scale(<.*>)?$");
        assert_eq!(kernel_name_filter("k<>"), "regex:^k(<.*>)?$");
        // An overload, by its parameter types.
        assert_eq!(kernel_name_filter("twice(float *, int)"), "twice");
        assert_eq!(
            kernel_name_filter("ops::twice(const float *, int)"),
            "regex:^(ops::)?twice(<.*>)?$"
        );
    }

    use super::*;

    fn strings(v: &[OsString]) -> Vec<String> {
        v.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn defaults() {
        let r = ProfileRequest::new("naive_k", "out/naive", "./probe", vec![]);
        assert_eq!(r.launch_skip, 0);
        assert_eq!(r.launch_count, 1);
        assert_eq!(r.cache_control, CacheControl::All);
        assert_eq!(r.sections, DEFAULT_SECTIONS);
        assert_eq!(r.metrics, KLAB_METRICS);
        assert_eq!(r.clone().skipping(1, 5).launch_skip, 6);
        assert_eq!(r.clone().skipping(u64::MAX, 5).launch_skip, u64::MAX);
    }

    #[test]
    fn argv_layout() {
        let mut r = ProfileRequest::new(
            "tiled_k",
            "/tmp/r/tiled.ncu-rep",
            "./probe",
            vec!["tiled".into(), "two words".into()],
        )
        .skipping(1, 5);
        r.sections = vec!["SpeedOfLight".into(), "SpeedOfLight".into(), " ".into()];
        r.metrics = vec!["a.sum".into(), "b.sum".into(), "a.sum".into()];
        r.cache_control = CacheControl::None;
        assert_eq!(
            strings(&r.argv(Path::new("/opt/ncu"))),
            [
                "/opt/ncu",
                "--kernel-name-base",
                "function",
                "--kernel-name",
                "tiled_k",
                "--launch-skip",
                "6",
                "--launch-count",
                "1",
                "--clock-control",
                "none",
                "--cache-control",
                "none",
                "--force-overwrite",
                "--export",
                "/tmp/r/tiled.ncu-rep",
                "--section",
                "SpeedOfLight",
                "--metrics",
                "a.sum,b.sum",
                "./probe",
                "tiled",
                "two words",
            ]
        );
        r.metrics.clear();
        r.sections.clear();
        let v = strings(&r.argv(Path::new("ncu")));
        assert!(!v.iter().any(|a| a == "--metrics" || a == "--section"));
    }

    #[test]
    fn report_extension() {
        let p = |s: &str| with_report_extension(Path::new(s));
        assert_eq!(p("run/naive"), PathBuf::from("run/naive.ncu-rep"));
        assert_eq!(p("run/naive.ncu-rep"), PathBuf::from("run/naive.ncu-rep"));
        assert_eq!(p("a.b"), PathBuf::from("a.b.ncu-rep"));
        assert_eq!(p("x.ncu-rep.bak"), PathBuf::from("x.ncu-rep.bak.ncu-rep"));
    }

    #[test]
    fn import_and_version_argv() {
        assert_eq!(
            strings(&import_argv(
                Path::new("ncu"),
                Path::new("r.ncu-rep"),
                Page::Details
            )),
            ["ncu", "--import", "r.ncu-rep", "--csv", "--page", "details"]
        );
        assert_eq!(
            strings(&version_argv(Path::new("/x/ncu"))),
            ["/x/ncu", "--version"]
        );
        assert_eq!(
            strings(&query_metrics_argv(Path::new("ncu"))),
            ["ncu", "--query-metrics"]
        );
    }

    #[test]
    fn versions() {
        let v = parse_version(
            "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\nVersion 2025.3.1.0 (build 36398880) (public-release)\n",
        )
        .unwrap();
        assert_eq!(v.numbers, [2025, 3, 1, 0]);
        assert_eq!(v.build.as_deref(), Some("36398880"));
        assert_eq!(v.to_string(), "2025.3.1.0");
        assert!(v.is_at_least(&[2025, 3]));
        assert!(v.is_at_least(&[2025, 3, 1, 0]));
        assert!(!v.is_at_least(&[2025, 3, 2]));
        assert!(v.is_at_least(&[2024]));
        assert!(!v.is_at_least(&[2026]));
        let old = parse_version("Version 2019.5.0").unwrap();
        assert_eq!(old.numbers, [2019, 5, 0]);
        assert_eq!(old.build, None);
        let e = parse_version("ncu: command not found\n").unwrap_err();
        assert!(e.to_string().contains("ncu: command not found"), "{e}");
        assert!(matches!(
            parse_version("Version x.y").unwrap_err(),
            NcuError::Version { .. }
        ));
    }

    #[test]
    fn errors_are_one_line() {
        let e = NcuError::NoHeader {
            hint: Some(one_line("==ERROR== a\nb")),
        };
        assert!(!e.to_string().contains('\n'));
        assert!(e.to_string().ends_with("; ncu said: ==ERROR== a b"));
        let e = NcuError::Failed {
            status: Some(1),
            message: "x".into(),
        };
        assert_eq!(e.to_string(), "ncu failed (exit 1): x");
    }
}
