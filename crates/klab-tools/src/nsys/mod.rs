//! Nsight Systems SQLite exports (`nsys export --type sqlite report.nsys-rep`): kernel
//! launches, memory copies and sets, CUDA API calls, and what they say about a run.
//!
//! # What is read
//!
//! [`open`] opens an export read-only and never writes beside it. A finished export is opened
//! with an `immutable=1` URI (SQLite takes no locks and creates no `-wal`, `-shm` or journal
//! file). An export left in WAL mode with changes still in its `-wal` file (a writer still
//! open, or one that closed without a checkpoint) would read stale through `immutable=1`, so
//! it is read through the `-wal` and an existing `-shm` opened read-only
//! (`mode=ro&readonly_shm=1`), with a note; without a `-shm` that cannot be done without
//! creating one, and [`open`] fails with [`NsysError::UncheckpointedWal`], which says how to
//! fold the changes in. Then it reads:
//!
//! - the export's version from `META_DATA_EXPORT` (schema 3.4.0 on), else
//!   `EXPORT_META_DATA` (up to 3.0.0), else "unknown";
//! - `CUPTI_ACTIVITY_KIND_KERNEL`: one [`KernelLaunch`] per row, names resolved through
//!   `StringIds`;
//! - `CUPTI_ACTIVITY_KIND_MEMCPY` and `…_MEMSET`: one [`Memcpy`] / [`Memset`] per row, kinds
//!   labelled from `ENUM_CUDA_MEMCPY_OPER` / `ENUM_CUDA_MEM_KIND` when the export has them and
//!   from a built-in copy of those tables when it does not (schema 2.9.1 exports have none);
//! - `CUPTI_ACTIVITY_KIND_RUNTIME`: the CUDA API calls, de-duplicated per `correlationId`
//!   (see [`ApiCalls`]), joined to the activity rows to name the launching call;
//! - `TARGET_INFO_GPU` (and `TARGET_INFO_CUDA_DEVICE` when present): the GPUs.
//!
//! # Schema rules
//!
//! Columns are always selected by name (`PRAGMA table_info`), never by position: nsys
//! inserted `greenContextId` in the middle of the kernel table in 2024.5, and exports can
//! carry columns appended with `ALTER TABLE`. Unknown columns are ignored. Lazy exports create
//! only the tables that have data, so a missing activity table means zero events of that kind
//! and is recorded in [`Trace::notes`]. A table without a column this reader needs (for
//! example no `start`) is skipped with a note naming the table and the column; a missing
//! optional column (for example `correlationId`) leaves the values it would give unknown,
//! also with a note. NULLs (and non-integer values) in integer columns are read as unknown.
//!
//! # Findings and summaries
//!
//! [`Trace::findings`] states facts about the run that a reader should not miss, such as
//! "15 runtime API calls and zero kernels: launches failed" (a lazy export with kernel launch
//! calls and no kernel table, the signature of launches that returned an error nobody
//! checked; host callbacks and graph launches do not count, see [`ApiCalls`]). Findings are
//! information; they are not a gate.
//!
//! Time is compared as wall-clock time: [`Intervals`] is the union of a set of rows' spans,
//! so copies that run at once on four streams count once, and its overlap with the kernels'
//! union is the part that hid behind kernel execution. [`Trace::summary`] groups kernel
//! launches by name ([`KernelSummary`]); [`Trace::copy_summary`] groups copies by direction
//! ([`CopySummary`]: count, bytes, summed / median / min / max durations as nsys's own
//! `cuda_gpu_mem_time_sum` gives them, plus the union and its overlap with kernels).
//! Unified-memory migrations ([`Memcpy::is_unified`]) are their own directions and their own
//! finding: pages moved on demand while a kernel ran are part of that kernel's time, not
//! time added to it.

mod analyze;
mod read;
pub mod render;
mod schema;
#[doc(hidden)]
pub mod testdata;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use analyze::{
    median, summarize, summarize_copies, CopySummary, Intervals, KernelSummary, Rates,
};

/// Table names, as nsys writes them.
pub mod tables {
    /// Kernel executions.
    pub const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
    /// Memory copies.
    pub const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
    /// Memory sets.
    pub const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
    /// CUDA runtime and driver API calls.
    pub const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
    /// Interned strings.
    pub const STRING_IDS: &str = "StringIds";
    /// Copy-kind labels (absent in schema 2.9.1).
    pub const ENUM_MEMCPY_OPER: &str = "ENUM_CUDA_MEMCPY_OPER";
    /// Memory-kind labels (absent in schema 2.9.1).
    pub const ENUM_MEM_KIND: &str = "ENUM_CUDA_MEM_KIND";
    /// Export metadata, schema 3.4.0 on.
    pub const META_DATA_EXPORT: &str = "META_DATA_EXPORT";
    /// Export metadata, up to schema 3.0.0.
    pub const EXPORT_META_DATA: &str = "EXPORT_META_DATA";
    /// One row per GPU.
    pub const TARGET_INFO_GPU: &str = "TARGET_INFO_GPU";
    /// GPU id to CUDA device ordinal (2025.5 on).
    pub const TARGET_INFO_CUDA_DEVICE: &str = "TARGET_INFO_CUDA_DEVICE";
}

/// Reading an export failed. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum NsysError {
    #[error("{}: no such file", .path.display())]
    NotFound { path: PathBuf },
    #[error("{}: is a directory, not an Nsight Systems SQLite export", .path.display())]
    IsDirectory { path: PathBuf },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not a regular file (a FIFO, a device node) or larger than klab opens.
    #[error(transparent)]
    File(klab_core::artifact::FileError),
    #[error("{}: not an SQLite database (make one with `nsys export --type sqlite REPORT.nsys-rep`)", .path.display())]
    NotSqlite { path: PathBuf },
    #[error("{}: not an Nsight Systems export (no StringIds / CUPTI tables)", .path.display())]
    NotNsys { path: PathBuf },
    /// The export is in WAL mode with changes in its `-wal` file that SQLite cannot read
    /// without writing beside the export (no `-shm` to open read-only).
    #[error(
        "{}: has changes in {} not yet written into the database (WAL mode), which cannot be read without writing beside it ({reason}); run `sqlite3 {} 'PRAGMA wal_checkpoint'` to write them into it, or export again",
        .path.display(), .wal.display(), .path.display()
    )]
    UncheckpointedWal {
        path: PathBuf,
        wal: PathBuf,
        reason: String,
    },
    #[error("{}: SQLite: {source}", .path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

/// Open and read one export. Never writes beside it; never panics on a bad file.
pub fn open(path: &Path) -> Result<Trace, NsysError> {
    read::open(path)
}

/// Which Nsight Systems version wrote the export.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExportVersion {
    /// The metadata table the facts came from (`META_DATA_EXPORT` or `EXPORT_META_DATA`),
    /// `None` when the export has neither.
    pub table: Option<String>,
    /// `EXPORT_PRODUCT_VERSION`, e.g. `2024.5.1.113`.
    pub product: Option<String>,
    /// `EXPORT_SCHEMA_VERSION`, e.g. `3.13.2`.
    pub schema: Option<String>,
    /// `EXPORT_LAZY` (2022.x) or `EXPORT_PARAM_LAZY` (2023.3 on): only tables with data exist.
    pub lazy: Option<bool>,
}

impl fmt::Display for ExportVersion {
    /// `nsys 2024.5.1.113, schema 3.13.2` (unknown parts say so), then `, lazy export` when
    /// the export says it is lazy.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nsys {}, schema {}",
            self.product.as_deref().unwrap_or("unknown"),
            self.schema.as_deref().unwrap_or("unknown")
        )?;
        if self.lazy == Some(true) {
            f.write_str(", lazy export")?;
        }
        Ok(())
    }
}

/// Grid or block dimensions as launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Dim3 {
    pub x: i64,
    pub y: i64,
    pub z: i64,
}

impl fmt::Display for Dim3 {
    /// `128x128x1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.x, self.y, self.z)
    }
}

/// Start, end and duration of one activity row, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    /// As recorded (not normalised: nsys 2024.5+ records `EXPORT_PARAM_TIME_NORMALIZE=false`).
    pub start_ns: i64,
    pub end_ns: i64,
    /// `end - start`; `None` when the row has no timestamps (CUPTI: start = end = 0 means
    /// "timestamp information could not be collected") or ends before it starts.
    pub duration_ns: Option<u64>,
}

impl Span {
    /// The span of a row, with the duration rule above. A NULL timestamp reads as 0.
    pub fn new(start_ns: i64, end_ns: i64) -> Span {
        let duration_ns = if start_ns == 0 && end_ns == 0 {
            None
        } else {
            end_ns
                .checked_sub(start_ns)
                .and_then(|d| u64::try_from(d).ok())
        };
        Span {
            start_ns,
            end_ns,
            duration_ns,
        }
    }

    /// Start and end are both 0.
    pub fn has_no_timestamps(&self) -> bool {
        self.start_ns == 0 && self.end_ns == 0
    }

    /// End before start.
    pub fn is_reversed(&self) -> bool {
        self.end_ns < self.start_ns
    }
}

/// Achieved rate in GB/s (10^9 bytes per second): `bytes / duration_ns`. `None` for an
/// unknown or zero duration.
pub fn gb_per_s(bytes: u64, duration_ns: Option<u64>) -> Option<f64> {
    match duration_ns {
        Some(d) if d > 0 => Some(bytes as f64 / d as f64),
        _ => None,
    }
}

/// One row of `CUPTI_ACTIVITY_KIND_KERNEL`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelLaunch {
    /// The demangled name (`void reduce_v0<(int)256>(int *, int *)`), resolved through
    /// `StringIds`; when that id is NULL or missing from `StringIds`, the short name, then
    /// the mangled name, then `<string id N>` (N the first non-NULL id), then `<unnamed>`.
    pub name: String,
    /// The base name (`reduce_v0`), when it resolves.
    pub short_name: Option<String>,
    /// The mangled name, when present (NULL for `extern "C"` kernels in newer exports).
    pub mangled_name: Option<String>,
    /// CUDA device ordinal (`deviceId`; matches `TARGET_INFO_GPU.cuDevice`, not its `id`).
    pub device: i64,
    pub stream: i64,
    pub grid: Dim3,
    pub block: Dim3,
    pub span: Span,
    pub registers_per_thread: Option<i64>,
    /// `staticSharedMemory`, bytes.
    pub static_shared_bytes: Option<i64>,
    /// `dynamicSharedMemory`, bytes.
    pub dynamic_shared_bytes: Option<i64>,
    pub correlation_id: Option<i64>,
    /// The process that launched it (from `globalPid`).
    pub pid: Option<i64>,
    /// The GPU it ran on (see [`Gpu::id`] for how a row finds it).
    pub gpu: Option<i64>,
    /// The API call that launched it (same correlationId), version suffix stripped, e.g.
    /// `cudaLaunchKernel`.
    pub api: Option<String>,
}

impl KernelLaunch {
    /// Static plus dynamic shared memory in bytes, when both are known.
    pub fn shared_bytes(&self) -> Option<i64> {
        self.static_shared_bytes?
            .checked_add(self.dynamic_shared_bytes?)
    }
}

/// One row of `CUPTI_ACTIVITY_KIND_MEMCPY`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memcpy {
    pub device: i64,
    pub stream: i64,
    pub bytes: u64,
    /// `copyKind`.
    pub copy_kind: i64,
    /// Its label, e.g. `Host-to-Device`, `Unified Device-to-Host`, or `copy kind N`.
    pub direction: String,
    /// `srcKind` label, e.g. `Pageable`, when the column is present and not NULL.
    pub src_kind: Option<String>,
    /// `dstKind` label.
    pub dst_kind: Option<String>,
    pub span: Span,
    /// 0 for unified-memory migrations, which no API call caused.
    pub correlation_id: Option<i64>,
    /// The process (from `globalPid`).
    pub pid: Option<i64>,
    /// The GPU it ran on (see [`Gpu::id`]).
    pub gpu: Option<i64>,
    /// The API call that issued it, version suffix stripped.
    pub api: Option<String>,
}

impl Memcpy {
    /// `bytes / duration`, GB/s.
    pub fn gb_s(&self) -> Option<f64> {
        gb_per_s(self.bytes, self.span.duration_ns)
    }

    /// A unified-memory migration: copyKind 11, 12 or 13 (`CUDA_MEMCPY_KIND_UVM_HTOD`,
    /// `_DTOH`, `_DTOD`, nsys's own additions to CUPTI's copy kinds, the same ids in every
    /// export seen). Pages the driver moved, on demand or by prefetch; no API call issued
    /// them (correlationId 0).
    pub fn is_unified(&self) -> bool {
        matches!(self.copy_kind, 11..=13)
    }
}

/// One row of `CUPTI_ACTIVITY_KIND_MEMSET`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memset {
    pub device: i64,
    pub stream: i64,
    pub bytes: u64,
    /// The value written to each byte.
    pub value: Option<i64>,
    /// `memKind` label, e.g. `Device`.
    pub mem_kind: Option<String>,
    pub span: Span,
    pub correlation_id: Option<i64>,
    /// The process (from `globalPid`).
    pub pid: Option<i64>,
    /// The GPU it ran on (see [`Gpu::id`]).
    pub gpu: Option<i64>,
    /// The API call that issued it, version suffix stripped.
    pub api: Option<String>,
}

impl Memset {
    /// `bytes / duration`, GB/s.
    pub fn gb_s(&self) -> Option<f64> {
        gb_per_s(self.bytes, self.span.duration_ns)
    }
}

/// An API call that returned non-zero.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    /// Version suffix stripped, e.g. `cudaLaunchKernel`.
    pub name: String,
    /// The `cudaError_t` (runtime) or `CUresult` (driver) value.
    pub return_value: i64,
    pub start_ns: Option<i64>,
    pub correlation_id: Option<i64>,
    /// The calling process (from `globalTid`).
    pub pid: Option<i64>,
}

/// The CUDA API calls of `CUPTI_ACTIVITY_KIND_RUNTIME`.
///
/// Rows of one process (from `globalTid`) that share a non-zero `correlationId` are one
/// call: nsys 2022.2 with backtraces writes an extra `eventClass = 67` row (un-suffixed name,
/// same correlationId) for each call. Of such a group the row with eventClass 0 (runtime) or
/// 1 (driver) stands for the call, else the first row. Rows without a correlationId (NULL or
/// 0) each count once. A table without `eventClass` is read the same way. Correlation ids
/// are per process, so the same id in two processes is two calls, and activity rows are
/// joined to the call of their own process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApiCalls {
    /// Distinct calls.
    pub count: u64,
    /// Table rows (more than `count` when rows were duplicates).
    pub rows: u64,
    /// Calls that launch a kernel (`cudaLaunchKernel`, `cuLaunchKernel`, their cooperative
    /// and extended forms, ...); not `cudaLaunchHostFunc`, nor graph launches.
    pub launches: u64,
    /// Graph launches (`cudaGraphLaunch`, `cuGraphLaunch`). Kept apart: a graph's kernels
    /// become kernel rows only when nsys traced its nodes, so zero kernel rows after graph
    /// launches is no sign that they failed.
    pub graph_launches: u64,
    /// Calls whose returnValue is not 0, in order of start time.
    pub errors: Vec<ApiError>,
}

/// One GPU of `TARGET_INFO_GPU`.
///
/// An activity row's `deviceId` is a CUDA ordinal in the process that issued it, and two
/// processes that each see one GPU (`CUDA_VISIBLE_DEVICES`) both call theirs device 0. A row
/// finds its GPU by its process and ordinal in `TARGET_INFO_CUDA_DEVICE` (2025.5 on), else
/// by the one GPU with that ordinal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gpu {
    /// `TARGET_INFO_GPU.id`: the GPU's number in the export, the same in every process.
    pub id: Option<i64>,
    /// The CUDA device ordinal that `deviceId` in activity rows refers to:
    /// `TARGET_INFO_CUDA_DEVICE.cudaId` when every process gives the GPU the same one, else
    /// `TARGET_INFO_GPU.cuDevice`.
    pub cuda_device: Option<i64>,
    /// Each process that used the GPU and its ordinal there (`TARGET_INFO_CUDA_DEVICE`), by
    /// pid.
    pub processes: Vec<ProcessOrdinal>,
    pub name: Option<String>,
    pub sm_count: Option<i64>,
    /// `memoryBandwidth` converted from B/s to GB/s.
    pub memory_bandwidth_gbs: Option<f64>,
}

/// A process's CUDA ordinal for a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ProcessOrdinal {
    pub pid: i64,
    pub cuda_device: i64,
}

/// What became of an activity table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableState {
    /// Read; this many rows.
    Read(u64),
    /// Not in the export: zero events.
    Missing,
    /// Present but not readable by this reader (a needed column is missing); see the notes.
    Skipped,
}

/// What each activity table gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Tables {
    pub kernel: TableState,
    pub memcpy: TableState,
    pub memset: TableState,
    pub runtime: TableState,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// API calls were recorded but no kernel ran.
    LaunchesFailed,
    /// API calls returned an error.
    ApiErrors,
    /// Activity rows without timestamps (start = end = 0).
    NoTimestamps,
    /// Activity rows that end before they start.
    ReversedTimestamps,
    /// Copies took more wall-clock time than the kernels.
    CopiesDominate,
    /// Unified-memory migrations, and whether they happened while kernels ran.
    UnifiedMemory,
}

/// A fact about the run, one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub text: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Everything read from one export.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trace {
    /// The path as given to [`open`].
    pub path: PathBuf,
    pub version: ExportVersion,
    pub gpus: Vec<Gpu>,
    /// In order of start time, rows without timestamps last, ties in table order.
    pub kernels: Vec<KernelLaunch>,
    /// In the same order.
    pub memcpys: Vec<Memcpy>,
    /// In the same order.
    pub memsets: Vec<Memset>,
    pub api: ApiCalls,
    pub tables: Tables,
    /// Facts about the run (see the module docs).
    pub findings: Vec<Finding>,
    /// What the reader had to work around in the export: missing tables or columns,
    /// fallbacks, duplicates. One line each.
    pub notes: Vec<String>,
}

impl Trace {
    /// Whether a CUDA ordinal names more than one GPU here (processes that each see their own
    /// GPU as device 0), so a row's `device` does not say which GPU it ran on; its `gpu` does.
    ///
    /// Only where the export maps processes' ordinals to GPUs (`TARGET_INFO_CUDA_DEVICE`):
    /// without that map no row knows its GPU, and the tables keep the ordinal.
    pub fn ordinals_shared(&self) -> bool {
        if self.gpus.iter().all(|g| g.processes.is_empty()) {
            return false;
        }
        let mut owner: HashMap<i64, Option<i64>> = HashMap::new();
        self.gpus.iter().any(|g| {
            let ordinals = g
                .processes
                .iter()
                .map(|p| p.cuda_device)
                .chain(g.cuda_device);
            ordinals
                .collect::<BTreeSet<_>>()
                .into_iter()
                .any(|d| *owner.entry(d).or_insert(g.id) != g.id)
        })
    }

    /// The per-kernel summary (see [`summarize`]).
    pub fn summary(&self) -> Vec<KernelSummary> {
        summarize(&self.kernels)
    }

    /// The per-direction copy summary (see [`summarize_copies`]).
    pub fn copy_summary(&self) -> Vec<CopySummary> {
        summarize_copies(&self.memcpys, &self.kernels)
    }
}
