//! Synthetic Nsight Systems exports, for tests and for `examples/make_nsys_fixtures.rs`.
//!
//! Nsight Systems cannot run where klab is tested, so these files are built here from the
//! DDL of real exports as recorded in the project's schema notes (`shared/nsys-schema.md`):
//! the same table and column names, column order, NOT NULL and nullable columns, nsys's
//! `-- REFERENCES …` comments (real `REFERENCES` clauses in 2022.2), and each version's
//! quirks. The rows are invented, with round numbers so that tests can check the arithmetic.
//! Tables that a version creates but this reader never looks at are created with
//! placeholder columns (they are empty).
//!
//! | file | nsys (schema) | what it holds |
//! |---|---|---|
//! | `nsys2022.1_um_add.sqlite` | 2022.1.3.3 (2.9.1), lazy | `EXPORT_META_DATA`, no `ENUM_*` tables, unified-memory copies (copyKind 11/12, srcKind = dstKind = 7, correlationId 0, stream 0) |
//! | `nsys2022.2_saxpy.sqlite` | 2022.2.1.31 (2.9.1), not lazy | `REFERENCES` clauses, `eventClass = 67` duplicate API rows, `name TEXT` appended to RUNTIME and MEMCPY, empty MEMSET and other empty tables, no `ENUM_*` tables |
//! | `nsys2024.5_transpose32.sqlite` | 2024.5.1.113 (3.13.2) | `META_DATA_EXPORT`, `greenContextId` after `contextId`, `ENUM_*` tables, seed 004's TILE_DIM 32 timings, a memset |
//! | `nsys2026.1_reduce.sqlite` | 2026.1.1.204 (3.24.14) | the 39-column kernel table, `copyCount`, `TARGET_INFO_CUDA_DEVICE`, driver calls, a NULL mangledName, a kernel without timestamps, two API errors |
//! | `nsys2024.5_transpose64_failed.sqlite` | 2024.5.1.113 (3.13.2), lazy | seed 004's failure: 15 API calls, no kernel table |
//!
//! The memset layout is known only from the 2022.2 export; the 2024.5 fixture assumes it
//! unchanged.
//!
//! Besides these fixtures, scenario builders write 2024.5-layout exports for one finding
//! each: [`unified_memory_in_kernel`] (migrations that sum to more than the kernel's time
//! but all happen inside it), [`copies_on_four_streams`] (copies whose durations sum to
//! 26.2 ms in 18.4 ms of wall-clock time); [`commit_to_wal`] and [`open_wal_writer`] leave
//! an export's changes in its `-wal` file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::Connection;

/// Errors of the builder (SQLite or the file system).
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How a version writes a column's reference to another table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refs {
    /// `shortName INTEGER NOT NULL, -- REFERENCES StringIds(id) -- Base kernel function name`
    Comment,
    /// `shortName INTEGER NOT NULL REFERENCES StringIds(id), -- Base kernel function name`
    /// (nsys 2022.2).
    Constraint,
}

/// One column of a table definition.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    pub name: &'static str,
    pub ty: &'static str,
    pub not_null: bool,
    pub refs: Option<&'static str>,
    pub doc: &'static str,
}

const fn col(
    name: &'static str,
    ty: &'static str,
    not_null: bool,
    refs: Option<&'static str>,
    doc: &'static str,
) -> Col {
    Col {
        name,
        ty,
        not_null,
        refs,
        doc,
    }
}

/// `CREATE TABLE` text in nsys's layout: one column per line with its comment.
pub fn create_table_sql(table: &str, cols: &[Col], refs: Refs) -> String {
    let mut s = format!("CREATE TABLE {table} (\n");
    for (i, c) in cols.iter().enumerate() {
        let mut def = format!("    {:<32}{}", c.name, c.ty);
        if c.not_null {
            def.push_str(" NOT NULL");
        }
        if let (Some(r), Refs::Constraint) = (c.refs, refs) {
            def.push_str(&format!(" REFERENCES {r}"));
        }
        let comma = if i + 1 < cols.len() { "," } else { "" };
        let comment = match (c.refs, refs) {
            (Some(r), Refs::Comment) if c.doc.is_empty() => format!(" -- REFERENCES {r}"),
            (Some(r), Refs::Comment) => format!(" -- REFERENCES {r} -- {}", c.doc),
            _ if c.doc.is_empty() => String::new(),
            _ => format!(" -- {}", c.doc),
        };
        s.push_str(&format!("{def}{comma}{comment}\n"));
    }
    s.push_str(");");
    s
}

/// The nsys versions the fixtures imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    /// 2022.1.3.3, schema 2.9.1.
    V2022_1,
    /// 2022.2.1.31, schema 2.9.1.
    V2022_2,
    /// 2024.5.1.113, schema 3.13.2.
    V2024_5,
    /// 2026.1.1.204, schema 3.24.14.
    V2026_1,
}

impl Version {
    fn refs(self) -> Refs {
        if self == Version::V2022_2 {
            Refs::Constraint
        } else {
            Refs::Comment
        }
    }
}

const RUNTIME_REF: Option<&str> = Some("CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)");
const STRING_REF: Option<&str> = Some("StringIds(id)");

/// The columns shared by the activity tables: start … globalPid, with `greenContextId`
/// after `contextId` from 2024.5 on.
fn activity_head(v: Version) -> Vec<Col> {
    let mut cols = vec![
        col(
            "start",
            "INTEGER",
            true,
            None,
            "Event start timestamp (ns).",
        ),
        col("end", "INTEGER", true, None, "Event end timestamp (ns)."),
        col("deviceId", "INTEGER", true, None, "Device ID."),
        col("contextId", "INTEGER", true, None, "Context ID."),
    ];
    if v >= Version::V2024_5 {
        cols.push(col(
            "greenContextId",
            "INTEGER",
            false,
            None,
            "Green context ID.",
        ));
    }
    cols.extend([
        col("streamId", "INTEGER", true, None, "Stream ID."),
        col("correlationId", "INTEGER", false, RUNTIME_REF, ""),
        col("globalPid", "INTEGER", false, None, "Serialized GlobalId."),
    ]);
    cols
}

/// `CUPTI_ACTIVITY_KIND_KERNEL`: 27 columns (2022.1–2023.3), 28 (2024.5), 39 (2026.1).
pub fn kernel_cols(v: Version) -> Vec<Col> {
    let mut cols = activity_head(v);
    let graph_ref = if v == Version::V2022_2 {
        "CUDA_GRAPH_EVENTS(graphNodeId)"
    } else {
        "CUDA_GRAPH_NODE_EVENTS(graphNodeId)"
    };
    cols.extend([
        col(
            "demangledName",
            "INTEGER",
            true,
            STRING_REF,
            "Kernel function name w/ templates",
        ),
        col(
            "shortName",
            "INTEGER",
            true,
            STRING_REF,
            "Base kernel function name",
        ),
        col(
            "mangledName",
            "INTEGER",
            false,
            STRING_REF,
            "Raw C++ mangled kernel function name",
        ),
        col(
            "launchType",
            "INTEGER",
            false,
            Some("ENUM_CUDA_KERNEL_LAUNCH_TYPE(id)"),
            "",
        ),
        col(
            "cacheConfig",
            "INTEGER",
            false,
            Some("ENUM_CUDA_FUNC_CACHE_CONFIG(id)"),
            "",
        ),
        col(
            "registersPerThread",
            "INTEGER",
            true,
            None,
            "Number of registers required for each thread executing the kernel.",
        ),
        col("gridX", "INTEGER", true, None, "X-dimension grid size."),
        col("gridY", "INTEGER", true, None, "Y-dimension grid size."),
        col("gridZ", "INTEGER", true, None, "Z-dimension grid size."),
        col("blockX", "INTEGER", true, None, "X-dimension block size."),
        col("blockY", "INTEGER", true, None, "Y-dimension block size."),
        col("blockZ", "INTEGER", true, None, "Z-dimension block size."),
        col(
            "staticSharedMemory",
            "INTEGER",
            true,
            None,
            "Static shared memory allocated for the kernel (B).",
        ),
        col(
            "dynamicSharedMemory",
            "INTEGER",
            true,
            None,
            "Dynamic shared memory reserved for the kernel (B).",
        ),
        col(
            "localMemoryPerThread",
            "INTEGER",
            true,
            None,
            "Amount of local memory reserved for each thread (B).",
        ),
        col(
            "localMemoryTotal",
            "INTEGER",
            true,
            None,
            "Total amount of local memory reserved for the kernel (B).",
        ),
        col(
            "gridId",
            "INTEGER",
            true,
            None,
            "Unique grid ID of the kernel assigned at runtime.",
        ),
        col(
            "sharedMemoryExecuted",
            "INTEGER",
            false,
            None,
            "Shared memory size set by the driver.",
        ),
        col("graphNodeId", "INTEGER", false, Some(graph_ref), ""),
        col(
            "sharedMemoryLimitConfig",
            "INTEGER",
            false,
            Some("ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG(id)"),
            "",
        ),
    ]);
    if v >= Version::V2026_1 {
        cols.extend(kernel_cols_added_in_2026_1());
    }
    cols
}

/// `CUPTI_ACTIVITY_KIND_MEMCPY`: 19 columns (2022.1–2023.3), 20 (2024.5), 21 (2026.1).
/// The kernel table's columns that nsys 2026.1 added after the 2024.5 ones.
fn kernel_cols_added_in_2026_1() -> Vec<Col> {
    vec![
        col(
            "qmdBulkReleaseDone",
            "INTEGER",
            false,
            None,
            "QMD bulk release done timestamp (ns).",
        ),
        col(
            "qmdPreexitDone",
            "INTEGER",
            false,
            None,
            "QMD pre-exit done timestamp (ns).",
        ),
        col(
            "qmdLastCtaDone",
            "INTEGER",
            false,
            None,
            "QMD last CTA done timestamp (ns).",
        ),
        col("graphId", "INTEGER", false, None, "Graph ID."),
        col(
            "clusterX",
            "INTEGER",
            false,
            None,
            "X-dimension cluster size.",
        ),
        col(
            "clusterY",
            "INTEGER",
            false,
            None,
            "Y-dimension cluster size.",
        ),
        col(
            "clusterZ",
            "INTEGER",
            false,
            None,
            "Z-dimension cluster size.",
        ),
        col(
            "clusterSchedulingPolicy",
            "INTEGER",
            false,
            None,
            "Cluster scheduling policy.",
        ),
        col(
            "maxPotentialClusterSize",
            "INTEGER",
            false,
            None,
            "Maximum potential cluster size.",
        ),
        col(
            "maxActiveClusters",
            "INTEGER",
            false,
            None,
            "Maximum active clusters.",
        ),
        col(
            "sharedMemoryRequestedPercentage",
            "INTEGER",
            false,
            None,
            "Shared memory carveout requested (%).",
        ),
    ]
}

pub fn memcpy_cols(v: Version) -> Vec<Col> {
    let mut cols = activity_head(v);
    let mem = Some("ENUM_CUDA_MEM_KIND(id)");
    cols.extend([
        col(
            "bytes",
            "INTEGER",
            true,
            None,
            "Number of bytes transferred (B).",
        ),
        col(
            "copyKind",
            "INTEGER",
            true,
            Some("ENUM_CUDA_MEMCPY_OPER(id)"),
            "",
        ),
        col(
            "deprecatedSrcId",
            "INTEGER",
            false,
            None,
            "Deprecated, use srcDeviceId instead.",
        ),
        col("srcKind", "INTEGER", false, mem, ""),
        col("dstKind", "INTEGER", false, mem, ""),
        col("srcDeviceId", "INTEGER", false, None, "Source device ID."),
        col("srcContextId", "INTEGER", false, None, "Source context ID."),
        col(
            "dstDeviceId",
            "INTEGER",
            false,
            None,
            "Destination device ID.",
        ),
        col(
            "dstContextId",
            "INTEGER",
            false,
            None,
            "Destination context ID.",
        ),
        col(
            "migrationCause",
            "INTEGER",
            false,
            Some("ENUM_CUDA_UNIF_MEM_MIGRATION(id)"),
            "",
        ),
        col(
            "graphNodeId",
            "INTEGER",
            false,
            Some("CUDA_GRAPH_NODE_EVENTS(graphNodeId)"),
            "",
        ),
        col(
            "virtualAddress",
            "INTEGER",
            false,
            None,
            "Virtual base address of the page/s being transferred.",
        ),
    ]);
    if v >= Version::V2026_1 {
        cols.push(col(
            "copyCount",
            "INTEGER",
            false,
            None,
            "The total number of memcopy operations traced in this record.",
        ));
    }
    cols
}

/// `CUPTI_ACTIVITY_KIND_MEMSET` as in the 2022.2 export (11 columns).
pub fn memset_cols() -> Vec<Col> {
    let mut cols = activity_head(Version::V2022_2);
    cols.extend([
        col("value", "INTEGER", true, None, "Value assigned to memory."),
        col("bytes", "INTEGER", true, None, "Number of bytes set (B)."),
        col(
            "graphNodeId",
            "INTEGER",
            false,
            Some("CUDA_GRAPH_NODE_EVENTS(graphNodeId)"),
            "",
        ),
        col(
            "memKind",
            "INTEGER",
            false,
            Some("ENUM_CUDA_MEM_KIND(id)"),
            "Type of memory being set. See enum CUDA_MEMOPR_MEMORY_KIND",
        ),
    ]);
    cols
}

/// `CUPTI_ACTIVITY_KIND_RUNTIME`: the same 8 columns in every version.
pub fn runtime_cols() -> Vec<Col> {
    vec![
        col(
            "start",
            "INTEGER",
            true,
            None,
            "Event start timestamp (ns).",
        ),
        col("end", "INTEGER", true, None, "Event end timestamp (ns)."),
        col(
            "eventClass",
            "INTEGER",
            true,
            Some("ENUM_NSYS_EVENT_CLASS(id)"),
            "",
        ),
        col("globalTid", "INTEGER", false, None, "Serialized GlobalId."),
        col(
            "correlationId",
            "INTEGER",
            false,
            None,
            "ID used to identify events that this function call has triggered.",
        ),
        col("nameId", "INTEGER", true, STRING_REF, "Function name"),
        col(
            "returnValue",
            "INTEGER",
            true,
            None,
            "Return value of the function call.",
        ),
        col(
            "callchainId",
            "INTEGER",
            false,
            Some("CUDA_CALLCHAINS(id)"),
            "",
        ),
    ]
}

/// `TARGET_INFO_GPU`: the same 41 columns in every version.
pub fn gpu_cols() -> Vec<Col> {
    let text = [
        "name",
        "busLocation",
        "uuid",
        "chipName",
        "ctxswDevPath",
        "ctrlDevPath",
    ];
    [
        "vmId",
        "id",
        "name",
        "busLocation",
        "isDiscrete",
        "l2CacheSize",
        "totalMemory",
        "memoryBandwidth",
        "clockRate",
        "smCount",
        "pwGpuId",
        "uuid",
        "luid",
        "chipName",
        "cuDevice",
        "ctxswDevPath",
        "ctrlDevPath",
        "revision",
        "nodeMask",
        "constantMemory",
        "maxIPC",
        "maxRegistersPerBlock",
        "maxShmemPerBlock",
        "maxShmemPerBlockOptin",
        "maxShmemPerSm",
        "maxRegistersPerSm",
        "threadsPerWarp",
        "asyncEngines",
        "maxWarpsPerSm",
        "maxBlocksPerSm",
        "maxThreadsPerBlock",
        "maxBlockDimX",
        "maxBlockDimY",
        "maxBlockDimZ",
        "maxGridDimX",
        "maxGridDimY",
        "maxGridDimZ",
        "computeMajor",
        "computeMinor",
        "smMajor",
        "smMinor",
    ]
    .into_iter()
    .map(|n| {
        let ty = if text.contains(&n) { "TEXT" } else { "INTEGER" };
        col(n, ty, n == "vmId" || n == "id", None, "")
    })
    .collect()
}

/// A file being built: a connection and the strings interned so far.
pub struct Db {
    conn: Connection,
    strings: HashMap<String, i64>,
}

impl Db {
    /// A new file at `path` (an old one is replaced) with a `StringIds` table.
    pub fn create(path: &Path, refs: Refs) -> Result<Db> {
        if path.exists() {
            std::fs::remove_file(path)?;
        }
        let conn = Connection::open(path)?;
        // nsys's REFERENCES name tables that may not exist; SQLite as bundled by rusqlite
        // enforces foreign keys by default, nsys does not.
        // No fsync per insert: these are scratch files.
        conn.execute_batch("PRAGMA foreign_keys = OFF; PRAGMA synchronous = OFF;")?;
        // The same text in every version; 2026.1 adds the comment.
        let _ = refs;
        let ddl = "CREATE TABLE StringIds (\n    id                              INTEGER NOT NULL PRIMARY KEY, -- Consolidation of repetitive string values.\n    value                           TEXT NOT NULL\n);";
        conn.execute_batch(ddl)?;
        Ok(Db {
            conn,
            strings: HashMap::new(),
        })
    }

    /// The connection, for raw SQL.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Runs SQL statements.
    pub fn sql(&self, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql)?;
        Ok(())
    }

    /// Creates a table from column specs.
    pub fn table(&self, table: &str, cols: &[Col], refs: Refs) -> Result<()> {
        self.sql(&create_table_sql(table, cols, refs))
    }

    /// The `StringIds` id of a string, inserting it the first time.
    pub fn string(&mut self, s: &str) -> Result<i64> {
        if let Some(&id) = self.strings.get(s) {
            return Ok(id);
        }
        let id = self.strings.len() as i64;
        self.conn.execute(
            "INSERT INTO StringIds (id, value) VALUES (?1, ?2)",
            rusqlite::params![id, s],
        )?;
        self.strings.insert(s.to_string(), id);
        Ok(id)
    }

    /// Inserts one row given as (column, value) pairs; columns not named get their default
    /// (NULL). Naming a column the table lacks is an error.
    pub fn insert(&self, table: &str, row: &[(&str, Value)]) -> Result<()> {
        let names: Vec<String> = row.iter().map(|(c, _)| format!("\"{c}\"")).collect();
        let marks: Vec<String> = (1..=row.len()).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "INSERT INTO {table} ({}) VALUES ({})",
            names.join(", "),
            marks.join(", ")
        );
        self.conn
            .execute(&sql, rusqlite::params_from_iter(row.iter().map(|(_, v)| v)))?;
        Ok(())
    }

    /// Writes a metadata table (`EXPORT_META_DATA` or `META_DATA_EXPORT`).
    pub fn meta(&self, table: &str, pairs: &[(&str, &str)]) -> Result<()> {
        self.sql(&format!(
            "CREATE TABLE {table} (\n    name                            TEXT,\n    value                           TEXT\n);"
        ))?;
        for (k, v) in pairs {
            self.insert(table, &[("name", text(k)), ("value", text(v))])?;
        }
        Ok(())
    }
}

/// An integer value.
pub fn int(v: i64) -> Value {
    Value::Integer(v)
}

/// A text value.
pub fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

/// NULL.
pub fn null() -> Value {
    Value::Null
}

/// The standard metadata keys of a version, plus extra ones.
fn meta_pairs(
    product: &str,
    schema: &str,
    extra: &[(&'static str, &'static str)],
) -> Vec<(String, String)> {
    let mut parts = schema.split('.');
    let mut v: Vec<(String, String)> = vec![
        ("EXPORT_PRODUCT_NAME".into(), "NVIDIA Nsight Systems".into()),
        ("EXPORT_PRODUCT_VERSION".into(), product.into()),
        ("EXPORT_SCHEMA_VERSION".into(), schema.into()),
        (
            "EXPORT_SCHEMA_VERSION_MAJOR".into(),
            parts.next().unwrap_or("0").into(),
        ),
        (
            "EXPORT_SCHEMA_VERSION_MINOR".into(),
            parts.next().unwrap_or("0").into(),
        ),
        (
            "EXPORT_SCHEMA_VERSION_MICRO".into(),
            parts.next().unwrap_or("0").into(),
        ),
        ("EXPORT_PLATFORM".into(), "Linux".into()),
        ("EXPORT_TIME_UTC".into(), "2025-11-14T10:21:07.000Z".into()),
    ];
    v.extend(extra.iter().map(|(k, x)| (k.to_string(), x.to_string())));
    v
}

fn write_meta(db: &Db, table: &str, pairs: &[(String, String)]) -> Result<()> {
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    db.meta(table, &refs)
}

/// The process id the fixtures' rows carry.
pub const PID: i64 = 4242;

/// A serialized GlobalId of a process as nsys writes `globalPid`: hardware id 1 in the top
/// byte, the process id in bits 24..48, thread id 0.
pub fn global_pid(pid: i64) -> i64 {
    (1 << 56) | (pid << 24)
}

/// A `globalTid`: [`global_pid`] plus the thread id in the low 24 bits (the main thread's
/// id equals the process id).
pub fn global_tid(pid: i64, tid: i64) -> i64 {
    global_pid(pid) | tid
}

/// A kernel launch to write.
#[derive(Debug, Clone)]
pub struct Kernel<'a> {
    pub demangled: &'a str,
    pub short: &'a str,
    /// `None` writes NULL.
    pub mangled: Option<&'a str>,
    pub grid: [i64; 3],
    pub block: [i64; 3],
    pub start: i64,
    /// `end = start + duration`, except that start = 0 writes end = 0 (no timestamps).
    pub duration: i64,
    pub correlation_id: i64,
    pub registers: i64,
    pub static_shared: i64,
    pub dynamic_shared: i64,
    pub device: i64,
    pub stream: i64,
    /// The launching process.
    pub pid: i64,
}

/// Writes a kernel row with every column of version `v` filled as nsys would.
pub fn add_kernel(db: &mut Db, v: Version, k: &Kernel<'_>, grid_id: i64) -> Result<()> {
    let end = if k.start == 0 {
        0
    } else {
        k.start + k.duration
    };
    let mut row: Vec<(&str, Value)> = vec![
        ("start", int(k.start)),
        ("end", int(end)),
        ("deviceId", int(k.device)),
        ("contextId", int(1)),
        ("streamId", int(k.stream)),
        ("correlationId", int(k.correlation_id)),
        ("globalPid", int(global_pid(k.pid))),
        ("demangledName", int(db.string(k.demangled)?)),
        ("shortName", int(db.string(k.short)?)),
        (
            "mangledName",
            match k.mangled {
                Some(m) => int(db.string(m)?),
                None => null(),
            },
        ),
        ("launchType", int(0)),
        ("cacheConfig", int(0)),
        ("registersPerThread", int(k.registers)),
        ("gridX", int(k.grid[0])),
        ("gridY", int(k.grid[1])),
        ("gridZ", int(k.grid[2])),
        ("blockX", int(k.block[0])),
        ("blockY", int(k.block[1])),
        ("blockZ", int(k.block[2])),
        ("staticSharedMemory", int(k.static_shared)),
        ("dynamicSharedMemory", int(k.dynamic_shared)),
        ("localMemoryPerThread", int(0)),
        ("localMemoryTotal", int(0)),
        ("gridId", int(grid_id)),
        ("sharedMemoryExecuted", int(0)),
        ("graphNodeId", null()),
        ("sharedMemoryLimitConfig", int(1)),
    ];
    if v >= Version::V2024_5 {
        row.push(("greenContextId", null()));
    }
    if v >= Version::V2026_1 {
        row.extend([
            ("qmdBulkReleaseDone", null()),
            ("qmdPreexitDone", null()),
            ("qmdLastCtaDone", null()),
            ("graphId", null()),
            ("clusterX", int(0)),
            ("clusterY", int(0)),
            ("clusterZ", int(0)),
            ("clusterSchedulingPolicy", int(0)),
            ("maxPotentialClusterSize", null()),
            ("maxActiveClusters", null()),
            ("sharedMemoryRequestedPercentage", null()),
        ]);
    }
    db.insert(super::tables::KERNEL, &row)
}

/// An API call to write.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub name: &'a str,
    pub event_class: i64,
    pub correlation_id: i64,
    pub start: i64,
    pub duration: i64,
    pub return_value: i64,
    pub callchain: Option<i64>,
    /// The calling process (its main thread).
    pub pid: i64,
}

/// A runtime call (eventClass 0) that returned 0.
pub fn call(name: &str, correlation_id: i64, start: i64, duration: i64) -> Call<'_> {
    Call {
        name,
        event_class: 0,
        correlation_id,
        start,
        duration,
        return_value: 0,
        callchain: None,
        pid: PID,
    }
}

/// Writes a RUNTIME row.
pub fn add_call(db: &mut Db, c: &Call<'_>) -> Result<()> {
    let name = db.string(c.name)?;
    db.insert(
        super::tables::RUNTIME,
        &[
            ("start", int(c.start)),
            ("end", int(c.start + c.duration)),
            ("eventClass", int(c.event_class)),
            ("globalTid", int(global_tid(c.pid, c.pid))),
            ("correlationId", int(c.correlation_id)),
            ("nameId", int(name)),
            ("returnValue", int(c.return_value)),
            ("callchainId", c.callchain.map(int).unwrap_or(Value::Null)),
        ],
    )
}

/// A memory copy to write.
#[derive(Debug, Clone, Copy)]
pub struct Copy {
    pub copy_kind: i64,
    pub src_kind: i64,
    pub dst_kind: i64,
    pub bytes: i64,
    pub start: i64,
    pub duration: i64,
    pub correlation_id: i64,
    pub stream: i64,
    /// Unified-memory migrations: (migrationCause, virtualAddress).
    pub migration: Option<(i64, i64)>,
    /// The process.
    pub pid: i64,
}

/// Writes a MEMCPY row with every column of version `v`.
pub fn add_copy(db: &Db, v: Version, c: &Copy) -> Result<()> {
    let mut row: Vec<(&str, Value)> = vec![
        ("start", int(c.start)),
        ("end", int(c.start + c.duration)),
        ("deviceId", int(0)),
        ("contextId", int(1)),
        ("streamId", int(c.stream)),
        ("correlationId", int(c.correlation_id)),
        ("globalPid", int(global_pid(c.pid))),
        ("bytes", int(c.bytes)),
        ("copyKind", int(c.copy_kind)),
        ("deprecatedSrcId", int(0)),
        ("srcKind", int(c.src_kind)),
        ("dstKind", int(c.dst_kind)),
        ("srcDeviceId", int(0)),
        ("srcContextId", int(1)),
        ("dstDeviceId", int(0)),
        ("dstContextId", int(1)),
        (
            "migrationCause",
            c.migration.map(|m| int(m.0)).unwrap_or(Value::Null),
        ),
        ("graphNodeId", null()),
        (
            "virtualAddress",
            c.migration.map(|m| int(m.1)).unwrap_or(Value::Null),
        ),
    ];
    if v >= Version::V2024_5 {
        row.push(("greenContextId", null()));
    }
    if v >= Version::V2026_1 {
        row.push(("copyCount", int(1)));
    }
    db.insert(super::tables::MEMCPY, &row)
}

/// A host-to-device or device-to-host copy from ordinary memory (copyKind 1 or 2).
pub fn plain_copy(htod: bool, bytes: i64, start: i64, duration: i64, correlation_id: i64) -> Copy {
    Copy {
        copy_kind: if htod { 1 } else { 2 },
        src_kind: if htod { 0 } else { 2 },
        dst_kind: if htod { 2 } else { 0 },
        bytes,
        start,
        duration,
        correlation_id,
        stream: 7,
        migration: None,
        pid: PID,
    }
}

/// Writes the `ENUM_CUDA_MEMCPY_OPER` and `ENUM_CUDA_MEM_KIND` tables as nsys 2022.4+ do.
pub fn add_enum_tables(db: &Db) -> Result<()> {
    let names = [
        "UNKNOWN", "HTOD", "DTOH", "HTOA", "ATOH", "ATOA", "ATOD", "DTOA", "DTOD", "HTOH", "PTOP",
        "UVM_HTOD", "UVM_DTOH", "UVM_DTOD",
    ];
    let ddl = |t: &str| {
        format!(
            "CREATE TABLE {t} (\n    id                              INTEGER NOT NULL PRIMARY KEY,\n    name                            TEXT NOT NULL,\n    label                           TEXT NOT NULL\n);"
        )
    };
    db.sql(&ddl(super::tables::ENUM_MEMCPY_OPER))?;
    for (i, (n, l)) in names
        .iter()
        .zip(super::schema::MEMCPY_KIND_LABELS)
        .enumerate()
    {
        db.insert(
            super::tables::ENUM_MEMCPY_OPER,
            &[
                ("id", int(i as i64)),
                ("name", text(&format!("CUDA_MEMCPY_KIND_{n}"))),
                ("label", text(l)),
            ],
        )?;
    }
    let kinds = [
        "PAGEABLE",
        "PINNED",
        "DEVICE",
        "ARRAY",
        "MANAGED",
        "DEVICE_STATIC",
        "MANAGED_STATIC",
        "UNKNOWN",
    ];
    db.sql(&ddl(super::tables::ENUM_MEM_KIND))?;
    for (i, (n, l)) in kinds.iter().zip(super::schema::MEM_KIND_LABELS).enumerate() {
        db.insert(
            super::tables::ENUM_MEM_KIND,
            &[
                ("id", int(i as i64)),
                ("name", text(&format!("CUDA_MEMOPR_MEMORY_KIND_{n}"))),
                ("label", text(l)),
            ],
        )?;
    }
    Ok(())
}

/// Writes `TARGET_INFO_GPU` with one GPU.
pub fn add_gpu(
    db: &Db,
    refs: Refs,
    id: i64,
    cu_device: i64,
    name: &str,
    sm_count: i64,
    bandwidth_bytes_per_s: i64,
) -> Result<()> {
    db.table(super::tables::TARGET_INFO_GPU, &gpu_cols(), refs)?;
    db.insert(
        super::tables::TARGET_INFO_GPU,
        &[
            ("vmId", int(0)),
            ("id", int(id)),
            ("name", text(name)),
            ("busLocation", text("0000:1b:00.0")),
            ("isDiscrete", int(1)),
            ("memoryBandwidth", int(bandwidth_bytes_per_s)),
            ("smCount", int(sm_count)),
            ("cuDevice", int(cu_device)),
            ("threadsPerWarp", int(32)),
            ("maxThreadsPerBlock", int(1024)),
        ],
    )
}

/// Placeholder DDL for tables a non-lazy export creates but this reader ignores.
fn add_empty_tables(db: &Db, names: &[&str]) -> Result<()> {
    for n in names {
        db.sql(&format!(
            "CREATE TABLE {n} (\n    start                           INTEGER NOT NULL,\n    end                             INTEGER NOT NULL\n);"
        ))?;
    }
    Ok(())
}

/// nsys 2022.1.3.3, schema 2.9.1, lazy: a unified-memory `add` kernel. No ENUM tables;
/// migrations are copyKind 11/12 with srcKind = dstKind = 7, correlationId 0, stream 0.
pub fn nsys_2022_1_um_add(path: &Path) -> Result<()> {
    let v = Version::V2022_1;
    let refs = v.refs();
    let mut db = Db::create(path, refs)?;
    let meta = meta_pairs(
        "2022.1.3.3",
        "2.9.1",
        &[
            ("EXPORT_LAZY", "true"),
            ("EXPORT_INPUT_FILE", "um_add.qdrep"),
            ("EXPORT_OUTUPT_FILE", "um_add.sqlite"),
        ],
    );
    write_meta(&db, super::tables::EXPORT_META_DATA, &meta)?;
    add_gpu(&db, refs, 0, 0, "Tesla T4", 40, 320_064_000_000)?;
    db.table(super::tables::KERNEL, &kernel_cols(v), refs)?;
    db.table(super::tables::MEMCPY, &memcpy_cols(v), refs)?;
    db.table(super::tables::RUNTIME, &runtime_cols(), refs)?;
    let t0 = 380_000_000_000;
    for c in [
        call("cudaMallocManaged_v6000", 1, t0 + 1_000, 150_000),
        call("cudaMallocManaged_v6000", 2, t0 + 160_000, 20_000),
        call("cudaLaunchKernel_v7000", 3, t0 + 400_000, 30_000),
        call("cudaDeviceSynchronize_v3020", 4, t0 + 432_000, 3_000_000),
        call("cudaFree_v3020", 5, t0 + 3_500_000, 40_000),
        call("cudaFree_v3020", 6, t0 + 3_545_000, 30_000),
    ] {
        add_call(&mut db, &c)?;
    }
    add_kernel(
        &mut db,
        v,
        &Kernel {
            demangled: "add(int, float *, float *)",
            short: "add",
            mangled: Some("_Z3addiPfS_"),
            grid: [4096, 1, 1],
            block: [256, 1, 1],
            start: t0 + 440_000,
            duration: 2_500_000,
            correlation_id: 3,
            registers: 18,
            static_shared: 0,
            dynamic_shared: 0,
            device: 0,
            stream: 7,
            pid: PID,
        },
        1,
    )?;
    let um = |kind, bytes, start, duration, cause, addr| Copy {
        copy_kind: kind,
        src_kind: 7,
        dst_kind: 7,
        bytes,
        start,
        duration,
        correlation_id: 0,
        stream: 0,
        migration: Some((cause, addr)),
        pid: PID,
    };
    add_copy(
        &db,
        v,
        &um(11, 65_536, t0 + 450_000, 10_240, 2, 0x7f3a_0000_0000),
    )?;
    add_copy(
        &db,
        v,
        &um(11, 1_048_576, t0 + 470_000, 131_072, 2, 0x7f3a_0001_0000),
    )?;
    add_copy(
        &db,
        v,
        &um(12, 4_096, t0 + 3_000_000, 2_048, 3, 0x7f3a_0000_0000),
    )?;
    Ok(())
}

/// nsys 2022.2.1.31, schema 2.9.1, not lazy: five `saxpy` launches. REFERENCES clauses,
/// eventClass 67 duplicates of the malloc, memcpy and launch calls (un-suffixed names, the
/// same correlationIds, a wider time range, a callchain), `name TEXT` appended to RUNTIME
/// and MEMCPY, an empty MEMSET table, other empty tables, no ENUM tables.
pub fn nsys_2022_2_saxpy(path: &Path) -> Result<()> {
    let v = Version::V2022_2;
    let refs = v.refs();
    let mut db = Db::create(path, refs)?;
    let meta = meta_pairs(
        "2022.2.1.31",
        "2.9.1",
        &[
            ("EXPORT_LAZY", "false"),
            ("EXPORT_INPUT_FILE", "saxpy.qdrep"),
            ("EXPORT_OUTUPT_FILE", "saxpy.sqlite"),
        ],
    );
    write_meta(&db, super::tables::EXPORT_META_DATA, &meta)?;
    add_gpu(
        &db,
        refs,
        0,
        0,
        "NVIDIA A100-SXM4-40GB",
        108,
        1_555_200_000_000,
    )?;
    db.table(super::tables::KERNEL, &kernel_cols(v), refs)?;
    db.table(super::tables::MEMCPY, &memcpy_cols(v), refs)?;
    db.table(super::tables::MEMSET, &memset_cols(), refs)?;
    db.table(super::tables::RUNTIME, &runtime_cols(), refs)?;
    add_empty_tables(
        &db,
        &[
            "OPENGL_API",
            "OPENGL_WORKLOAD",
            "VULKAN_API",
            "VULKAN_WORKLOAD",
            "WDDM_DMA_PACKET_EVENTS",
            "NVTX_EVENTS",
            "OSRT_API",
            "CUDA_GRAPH_EVENTS",
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
            "SCHED_EVENTS",
        ],
    )?;
    let t0 = 1_200_000_000;
    let mut calls = vec![
        call("cudaMalloc_v3020", 1, t0 + 10_000, 200_000),
        call("cudaMalloc_v3020", 2, t0 + 220_000, 5_000),
        call("cudaMalloc_v3020", 3, t0 + 230_000, 5_000),
        call("cudaMemcpy_v3020", 4, t0 + 300_000, 660_000),
        call("cudaMemcpy_v3020", 5, t0 + 1_000_000, 820_000),
    ];
    for i in 0..5 {
        calls.push(call(
            "cudaLaunchKernel_v7000",
            6 + i,
            t0 + 2_000_000 + i * 40_000,
            8_000,
        ));
    }
    calls.push(call("cudaMemcpy_v3020", 11, t0 + 2_300_000, 640_000));
    for i in 0..3 {
        calls.push(call(
            "cudaFree_v3020",
            12 + i,
            t0 + 3_000_000 + i * 10_000,
            6_000,
        ));
    }
    for c in &calls {
        if let Some(plain) = c
            .name
            .strip_suffix("_v3020")
            .or(c.name.strip_suffix("_v7000"))
        {
            if plain != "cudaFree" {
                // The backtrace duplicate comes first and spans a little more.
                add_call(
                    &mut db,
                    &Call {
                        name: plain,
                        event_class: 67,
                        start: c.start - 500,
                        duration: c.duration + 1_000,
                        callchain: Some(c.correlation_id),
                        ..*c
                    },
                )?;
            }
        }
        add_call(&mut db, c)?;
    }
    for (i, d) in [21_000, 20_500, 20_480, 20_600, 20_450]
        .into_iter()
        .enumerate()
    {
        let i = i as i64;
        add_kernel(
            &mut db,
            v,
            &Kernel {
                demangled: "saxpy(double *, double *, double *, double, int)",
                short: "saxpy",
                mangled: Some("_Z5saxpyPdS_S_di"),
                grid: [3907, 1, 1],
                block: [256, 1, 1],
                start: t0 + 2_005_000 + i * 40_000,
                duration: d,
                correlation_id: 6 + i,
                registers: 16,
                static_shared: 0,
                dynamic_shared: 0,
                device: 0,
                stream: 7,
                pid: PID,
            },
            10 + i,
        )?;
    }
    add_copy(
        &db,
        v,
        &plain_copy(true, 8_000_000, t0 + 310_000, 640_000, 4),
    )?;
    add_copy(
        &db,
        v,
        &plain_copy(true, 8_000_000, t0 + 1_010_000, 800_000, 5),
    )?;
    add_copy(
        &db,
        v,
        &plain_copy(false, 8_000_000, t0 + 2_310_000, 625_000, 11),
    )?;
    // Columns added after the export, as in the 2022.2 file.
    db.sql(
        "ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME ADD COLUMN name TEXT;\n\
         ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY ADD COLUMN name TEXT;",
    )?;
    Ok(())
}

/// The kernels of seed 004's transpose at TILE_DIM 32 (N = 1000: a 32x32 grid of 32x32
/// blocks), two runs each: (demangled, short, mangled, registers, static shared bytes,
/// duration of the first run, duration of the second run).
const TRANSPOSE_KERNELS: [(&str, &str, &str, i64, i64, i64, i64); 3] = [
    (
        "mat_copy(const int *, int *, int)",
        "mat_copy",
        "_Z8mat_copyPKiPii",
        16,
        0,
        7_210,
        6_560,
    ),
    (
        "mat_transpose_unshared(const int *, int *, int)",
        "mat_transpose_unshared",
        "_Z22mat_transpose_unsharedPKiPii",
        16,
        0,
        35_100,
        34_500,
    ),
    (
        "mat_transpose_shared(const int *, int *, int)",
        "mat_transpose_shared",
        "_Z20mat_transpose_sharedPKiPii",
        18,
        4_096,
        13_400,
        12_930,
    ),
];

fn meta_2024_5(lazy: bool, name: &str) -> Vec<(String, String)> {
    let mut m = meta_pairs(
        "2024.5.1.113",
        "3.13.2",
        &[
            ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
            ("EXPORT_PARAM_TIME_SHIFT", "0"),
            ("EXPORT_PARAM_APPEND", "false"),
        ],
    );
    m.push(("EXPORT_PARAM_LAZY".into(), lazy.to_string()));
    m.push(("EXPORT_PARAM_OUTPUT_FILE".into(), name.into()));
    m
}

/// nsys 2024.5.1.113, schema 3.13.2: seed 004's transpose at TILE_DIM 32 with the seed's
/// timings (second runs: copy 6.56 µs, naive 34.50 µs, shared 12.93 µs), 4 MB copies each
/// way (330 µs and 326 µs) and a 4 MB memset. META_DATA_EXPORT, greenContextId, ENUM tables.
pub fn nsys_2024_5_transpose32(path: &Path) -> Result<()> {
    let v = Version::V2024_5;
    let refs = v.refs();
    let mut db = Db::create(path, refs)?;
    write_meta(
        &db,
        super::tables::META_DATA_EXPORT,
        &meta_2024_5(true, "report_32.sqlite"),
    )?;
    add_enum_tables(&db)?;
    add_gpu(
        &db,
        refs,
        0,
        0,
        "NVIDIA A100-SXM-64GB",
        108,
        2_039_000_000_000,
    )?;
    db.table(super::tables::KERNEL, &kernel_cols(v), refs)?;
    db.table(super::tables::MEMCPY, &memcpy_cols(v), refs)?;
    db.table(super::tables::MEMSET, &memset_cols(), refs)?;
    db.table(super::tables::RUNTIME, &runtime_cols(), refs)?;
    let t0 = 52_000_000_000;
    let mut calls = vec![
        call("cudaMalloc_v3020", 1, t0, 180_000),
        call("cudaMalloc_v3020", 2, t0 + 190_000, 4_000),
        call("cudaMemcpy_v3020", 3, t0 + 200_000, 345_000),
        call("cudaMemset_v3020", 4, t0 + 550_000, 9_000),
    ];
    for i in 0..6 {
        calls.push(call(
            "cudaLaunchKernel_v7000",
            5 + i,
            t0 + 600_000 + i * 100_000,
            5_000,
        ));
    }
    calls.push(call("cudaMemcpy_v3020", 11, t0 + 1_300_000, 340_000));
    calls.push(call("cudaFree_v3020", 12, t0 + 1_700_000, 90_000));
    calls.push(call("cudaFree_v3020", 13, t0 + 1_800_000, 60_000));
    for c in &calls {
        add_call(&mut db, c)?;
    }
    for run in 0..2i64 {
        for (j, (demangled, short, mangled, regs, smem, d1, d2)) in
            TRANSPOSE_KERNELS.iter().enumerate()
        {
            let i = run * 3 + j as i64;
            add_kernel(
                &mut db,
                v,
                &Kernel {
                    demangled,
                    short,
                    mangled: Some(mangled),
                    grid: [32, 32, 1],
                    block: [32, 32, 1],
                    start: t0 + 604_000 + i * 100_000,
                    duration: if run == 0 { *d1 } else { *d2 },
                    correlation_id: 5 + i,
                    registers: *regs,
                    static_shared: *smem,
                    dynamic_shared: 0,
                    device: 0,
                    stream: 7,
                    pid: PID,
                },
                100 + i,
            )?;
        }
    }
    add_copy(
        &db,
        v,
        &plain_copy(true, 4_000_000, t0 + 210_000, 330_000, 3),
    )?;
    add_copy(
        &db,
        v,
        &plain_copy(false, 4_000_000, t0 + 1_310_000, 326_000, 11),
    )?;
    db.insert(
        super::tables::MEMSET,
        &[
            ("start", int(t0 + 555_000)),
            ("end", int(t0 + 575_000)),
            ("deviceId", int(0)),
            ("contextId", int(1)),
            ("streamId", int(7)),
            ("correlationId", int(4)),
            ("globalPid", int(global_pid(PID))),
            ("value", int(0)),
            ("bytes", int(4_000_000)),
            ("memKind", int(2)),
        ],
    )?;
    Ok(())
}

/// The 2026.1 export's metadata, device tables and the empty activity tables.
fn reduce_schema(path: &Path) -> Result<Db> {
    let v = Version::V2026_1;
    let refs = v.refs();
    let db = Db::create(path, refs)?;
    let mut meta = meta_pairs(
        "2026.1.1.204",
        "3.24.14",
        &[
            ("EXPORT_PARAM_LAZY", "true"),
            ("EXPORT_PARAM_OUTPUT_FILE", "reduce.sqlite"),
            ("EXPORT_PARAM_TIME_NORMALIZE", "false"),
            ("EXPORT_PARAM_EXPORT_TYPE", "sqlite"),
            ("EXPORT_PARAM_INCLUDE_JSON", "false"),
            ("EXPORT_PARAM_INCLUDE_BLOBS", "false"),
            ("EXPORT_PARAM_USE_SHUFFLE", "false"),
        ],
    );
    meta.retain(|(k, _)| k != "EXPORT_TIME_UTC");
    meta.push(("EXPORT_TIME_UTC".into(), "2026-02-03T08:00:00.000Z".into()));
    write_meta(&db, super::tables::META_DATA_EXPORT, &meta)?;
    add_enum_tables(&db)?;
    add_gpu(&db, refs, 1, 0, "NVIDIA H200", 132, 4_800_000_000_000)?;
    db.table(
        super::tables::TARGET_INFO_CUDA_DEVICE,
        &[
            col("gpuId", "INTEGER", false, Some("TARGET_INFO_GPU(id)"), ""),
            col("cudaId", "INTEGER", true, None, "CUDA device ID."),
            col("pid", "INTEGER", true, None, "Process ID."),
            col("uuid", "TEXT", false, None, "Device UUID."),
            col(
                "numMultiprocessors",
                "INTEGER",
                false,
                None,
                "Number of SMs.",
            ),
        ],
        refs,
    )?;
    db.insert(
        super::tables::TARGET_INFO_CUDA_DEVICE,
        &[
            ("gpuId", int(1)),
            ("cudaId", int(0)),
            ("pid", int(4242)),
            ("uuid", text("GPU-5e1c0b7a-0000-0000-0000-000000000001")),
            ("numMultiprocessors", int(132)),
        ],
    )?;
    db.table(super::tables::KERNEL, &kernel_cols(v), refs)?;
    db.table(super::tables::MEMCPY, &memcpy_cols(v), refs)?;
    db.table(super::tables::RUNTIME, &runtime_cols(), refs)?;
    Ok(db)
}

/// nsys 2026.1.1.204, schema 3.24.14: reductions. The 39-column kernel table, copyCount,
/// TARGET_INFO_CUDA_DEVICE (GPU id 1 is CUDA device 0), driver calls (eventClass 1), an
/// `extern "C"` kernel with a NULL mangledName, a reduce_v1 launch without timestamps, a
/// launch that returned 9 (cudaErrorInvalidConfiguration) and the cudaGetLastError after it.
pub fn nsys_2026_1_reduce(path: &Path) -> Result<()> {
    let v = Version::V2026_1;
    let mut db = reduce_schema(path)?;
    let t0 = 7_000_000_000_000;
    let driver = |name, corr, start, duration| Call {
        event_class: 1,
        ..call(name, corr, start, duration)
    };
    let failed = |name, corr, start, duration| Call {
        return_value: 9,
        ..call(name, corr, start, duration)
    };
    let mut calls = vec![
        driver("cuModuleGetLoadingMode", 1, t0, 1_000),
        call("cudaMalloc_v3020", 2, t0 + 10_000, 250_000),
        call("cudaMalloc_v3020", 3, t0 + 270_000, 6_000),
        call("cudaMemcpy_v3020", 4, t0 + 300_000, 1_070_000),
        driver("cuLibraryLoadData", 5, t0 + 1_400_000, 30_000),
        call("cudaLaunchKernel_v7000", 6, t0 + 1_450_000, 7_000),
    ];
    for i in 0..4 {
        calls.push(call(
            "cudaLaunchKernel_v7000",
            7 + i,
            t0 + 1_600_000 + i * 200_000,
            5_000,
        ));
    }
    calls.push(failed("cudaLaunchKernel_v7000", 11, t0 + 2_500_000, 3_000));
    calls.push(failed("cudaGetLastError_v3020", 12, t0 + 2_510_000, 1_000));
    for i in 0..3 {
        calls.push(call(
            "cudaLaunchKernel_v7000",
            13 + i,
            t0 + 2_600_000 + i * 200_000,
            5_000,
        ));
    }
    calls.push(call("cudaMemcpy_v3020", 16, t0 + 3_300_000, 9_000));
    calls.push(call("cudaMemcpy_v3020", 17, t0 + 3_400_000, 12_000));
    calls.push(call("cudaFree_v3020", 18, t0 + 3_500_000, 80_000));
    for c in &calls {
        add_call(&mut db, c)?;
    }
    let base = Kernel {
        demangled: "init_data",
        short: "init_data",
        mangled: None,
        grid: [65_536, 1, 1],
        block: [256, 1, 1],
        start: t0 + 1_455_000,
        duration: 40_000,
        correlation_id: 6,
        registers: 8,
        static_shared: 0,
        dynamic_shared: 0,
        device: 0,
        stream: 13,
        pid: PID,
    };
    add_kernel(&mut db, v, &base, 1)?;
    let v0 = Kernel {
        demangled: "void reduce_v0<(int)256>(int *, int *)",
        short: "reduce_v0",
        mangled: Some("_Z9reduce_v0ILi256EEvPiS0_"),
        grid: [16_384, 1, 1],
        static_shared: 1_024,
        registers: 16,
        ..base.clone()
    };
    for (i, d) in [100_000, 104_000, 96_000, 120_000].into_iter().enumerate() {
        let i = i as i64;
        add_kernel(
            &mut db,
            v,
            &Kernel {
                start: t0 + 1_604_000 + i * 200_000,
                duration: d,
                correlation_id: 7 + i,
                ..v0.clone()
            },
            2 + i,
        )?;
    }
    let v1 = Kernel {
        demangled: "void reduce_v1<(int)256>(int *, int *)",
        short: "reduce_v1",
        mangled: Some("_Z9reduce_v1ILi256EEvPiS0_"),
        ..v0.clone()
    };
    for (i, (start, d)) in [(t0 + 2_604_000, 60_000), (0, 0), (t0 + 3_004_000, 58_000)]
        .into_iter()
        .enumerate()
    {
        let i = i as i64;
        add_kernel(
            &mut db,
            v,
            &Kernel {
                start,
                duration: d,
                correlation_id: 13 + i,
                ..v1.clone()
            },
            6 + i,
        )?;
    }
    add_copy(
        &db,
        v,
        &plain_copy(true, 16_777_216, t0 + 310_000, 1_048_576, 4),
    )?;
    add_copy(
        &db,
        v,
        &Copy {
            copy_kind: 8,
            src_kind: 2,
            dst_kind: 2,
            ..plain_copy(true, 1_000_000, t0 + 3_302_000, 1_000, 16)
        },
    )?;
    add_copy(
        &db,
        v,
        &Copy {
            dst_kind: 1,
            ..plain_copy(false, 16_384, t0 + 3_405_000, 4_096, 17)
        },
    )?;
    Ok(())
}

/// nsys 2024.5.1.113, lazy: the profiling lab's TILE_DIM 64 run. 64 x 64 = 4096 threads per block is
/// over the limit of 1024, so no kernel ran: 15 API calls, the copies, and no kernel table.
/// The seed reports only the count of calls, so every call here returns 0.
pub fn nsys_2024_5_transpose64_failed(path: &Path) -> Result<()> {
    let v = Version::V2024_5;
    let refs = v.refs();
    let mut db = Db::create(path, refs)?;
    write_meta(
        &db,
        super::tables::META_DATA_EXPORT,
        &meta_2024_5(true, "report_64.sqlite"),
    )?;
    add_enum_tables(&db)?;
    add_gpu(
        &db,
        refs,
        0,
        0,
        "NVIDIA A100-SXM-64GB",
        108,
        2_039_000_000_000,
    )?;
    db.table(super::tables::MEMCPY, &memcpy_cols(v), refs)?;
    db.table(super::tables::RUNTIME, &runtime_cols(), refs)?;
    let t0 = 61_000_000_000;
    let names = [
        "cudaMalloc_v3020",
        "cudaMalloc_v3020",
        "cudaMemcpy_v3020",
        "cudaEventCreate_v3020",
        "cudaEventCreate_v3020",
        "cudaEventRecord_v3020",
        "cudaLaunchKernel_v7000",
        "cudaLaunchKernel_v7000",
        "cudaLaunchKernel_v7000",
        "cudaEventRecord_v3020",
        "cudaEventSynchronize_v3020",
        "cudaEventElapsedTime_v3020",
        "cudaMemcpy_v3020",
        "cudaFree_v3020",
        "cudaFree_v3020",
    ];
    for (i, n) in names.iter().enumerate() {
        let i = i as i64;
        add_call(&mut db, &call(n, i + 1, t0 + i * 100_000, 20_000))?;
    }
    add_copy(
        &db,
        v,
        &plain_copy(true, 4_000_000, t0 + 200_500, 331_000, 3),
    )?;
    add_copy(
        &db,
        v,
        &plain_copy(false, 4_000_000, t0 + 1_200_500, 327_000, 13),
    )?;
    Ok(())
}

/// One fixture file.
pub struct Fixture {
    /// The file name.
    pub file: &'static str,
    /// One line on what it imitates.
    pub about: &'static str,
    /// Writes it.
    pub build: fn(&Path) -> Result<()>,
}

/// Every fixture, in the order of the table in the module docs.
pub const FIXTURES: [Fixture; 5] = [
    Fixture {
        file: "nsys2022.1_um_add.sqlite",
        about: "nsys 2022.1 / schema 2.9.1, lazy: unified-memory migrations, no ENUM tables",
        build: nsys_2022_1_um_add,
    },
    Fixture {
        file: "nsys2022.2_saxpy.sqlite",
        about: "nsys 2022.2 / schema 2.9.1, not lazy: eventClass 67 duplicates, appended columns",
        build: nsys_2022_2_saxpy,
    },
    Fixture {
        file: "nsys2024.5_transpose32.sqlite",
        about: "nsys 2024.5 / schema 3.13.2: the profiling lab's transpose at TILE_DIM 32",
        build: nsys_2024_5_transpose32,
    },
    Fixture {
        file: "nsys2026.1_reduce.sqlite",
        about: "nsys 2026.1 / schema 3.24.14: reductions, driver calls, API errors",
        build: nsys_2026_1_reduce,
    },
    Fixture {
        file: "nsys2024.5_transpose64_failed.sqlite",
        about:
            "nsys 2024.5, lazy: the profiling lab's TILE_DIM 64 run, 15 API calls and no kernels",
        build: nsys_2024_5_transpose64_failed,
    },
];

/// Writes every fixture into `dir` (created if needed); returns the paths in
/// [`FIXTURES`] order.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    FIXTURES
        .iter()
        .map(|f| {
            let p = dir.join(f.file);
            (f.build)(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok(p)
        })
        .collect()
}

// Scenario exports: not in [`FIXTURES`], each built for the findings it must get right.

/// A 2024.5-layout export with the usual tables (metadata, ENUM tables, one H200), empty,
/// for the scenarios below.
fn scenario(path: &Path) -> Result<Db> {
    let v = Version::V2024_5;
    let refs = v.refs();
    let db = Db::create(path, refs)?;
    write_meta(
        &db,
        super::tables::META_DATA_EXPORT,
        &meta_2024_5(true, "scenario.sqlite"),
    )?;
    add_enum_tables(&db)?;
    add_gpu(&db, refs, 0, 0, "NVIDIA H200", 132, 4_800_000_000_000)?;
    db.table(super::tables::KERNEL, &kernel_cols(v), refs)?;
    db.table(super::tables::MEMCPY, &memcpy_cols(v), refs)?;
    db.table(super::tables::RUNTIME, &runtime_cols(), refs)?;
    Ok(db)
}

/// A kernel of the scenarios, launched by call `correlation_id`.
fn scenario_kernel(
    name: &'static str,
    start: i64,
    duration: i64,
    correlation_id: i64,
    stream: i64,
) -> Kernel<'static> {
    Kernel {
        demangled: name,
        short: name,
        mangled: None,
        grid: [1024, 1, 1],
        block: [256, 1, 1],
        start,
        duration,
        correlation_id,
        registers: 16,
        static_shared: 0,
        dynamic_shared: 0,
        device: 0,
        stream,
        pid: PID,
    }
}

/// Start of the scenarios' timelines, ns.
pub const SCENARIO_T0: i64 = 90_000_000_000;

/// Unified memory, demand paging: one 60 ms kernel `touch` and 80 migrations, all inside
/// it. 50 Host-to-Device migrations (copyKind 11) of 0.8 ms start at 1, 2, …, 50 ms; 30
/// Device-to-Host ones (copyKind 12, evictions) of 0.9 ms start at 1.1, 2.1, …, 30.1 ms,
/// overlapping them. Their durations sum to 67 ms, 1.1x the kernel; they cover 30 x 1.0 +
/// 20 x 0.8 = 46 ms of wall-clock time, all of it while the kernel ran. Each migration moves
/// 64 KiB; correlationId 0 and stream 0, as nsys writes migrations.
pub fn unified_memory_in_kernel(path: &Path) -> Result<()> {
    let v = Version::V2024_5;
    let mut db = scenario(path)?;
    let t0 = SCENARIO_T0;
    add_call(
        &mut db,
        &call("cudaMallocManaged_v6000", 1, t0 - 500_000, 100_000),
    )?;
    add_call(
        &mut db,
        &call("cudaLaunchKernel_v7000", 2, t0 - 20_000, 10_000),
    )?;
    add_call(
        &mut db,
        &call("cudaDeviceSynchronize_v3020", 3, t0 - 5_000, 60_100_000),
    )?;
    add_kernel(
        &mut db,
        v,
        &scenario_kernel("touch(float *, long)", t0, 60_000_000, 2, 7),
        1,
    )?;
    let um = |kind, start, duration| Copy {
        copy_kind: kind,
        src_kind: 7,
        dst_kind: 7,
        bytes: 65_536,
        start,
        duration,
        correlation_id: 0,
        stream: 0,
        migration: Some((if kind == 11 { 1 } else { 3 }, 0x7f00_0000_0000 + start)),
        pid: PID,
    };
    for k in 1..=50 {
        add_copy(&db, v, &um(11, t0 + k * 1_000_000, 800_000))?;
    }
    for k in 1..=30 {
        add_copy(&db, v, &um(12, t0 + k * 1_000_000 + 100_000, 900_000))?;
    }
    Ok(())
}

/// Copies on four streams at once, and a kernel. Host-to-Device (pinned) on streams 11 and
/// 12: [0, 8.0) and [3.0, 9.2) ms; Device-to-Host on streams 13 and 14: [10.0, 17.0) and
/// [14.2, 19.2) ms. The durations sum to 26.2 ms and cover 18.4 ms; the kernel `step`
/// ([8.5, 12.5) ms, stream 7) overlaps 0.7 + 2.5 = 3.2 ms of them. Each copy moves 64 MB.
pub fn copies_on_four_streams(path: &Path) -> Result<()> {
    let v = Version::V2024_5;
    let mut db = scenario(path)?;
    let t0 = SCENARIO_T0;
    let ms = 1_000_000;
    let copies = [
        (true, 11, 0, 8_000_000),
        (true, 12, 3 * ms, 6_200_000),
        (false, 13, 10 * ms, 7 * ms),
        (false, 14, 14_200_000, 5 * ms),
    ];
    for (i, &(htod, stream, start, duration)) in copies.iter().enumerate() {
        let corr = 10 + i as i64;
        add_call(
            &mut db,
            &call("cudaMemcpyAsync_v3020", corr, t0 + start - 10_000, 5_000),
        )?;
        let c = plain_copy(htod, 64_000_000, t0 + start, duration, corr);
        let pinned = Copy {
            stream,
            src_kind: if htod { 1 } else { 2 },
            dst_kind: if htod { 2 } else { 1 },
            ..c
        };
        add_copy(&db, v, &pinned)?;
    }
    add_call(
        &mut db,
        &call("cudaLaunchKernel_v7000", 20, t0 + 8 * ms, 10_000),
    )?;
    add_kernel(
        &mut db,
        v,
        &scenario_kernel("step(float *)", t0 + 8_500_000, 4 * ms, 20, 7),
        1,
    )?;
    Ok(())
}

/// Runs SQL on a built export and closes it (no `-wal` or journal left), for tests that
/// alter one.
pub fn edit(path: &Path, sql: &str) -> Result<()> {
    let conn = Connection::open(path)?;
    conn.execute_batch(sql)?;
    conn.close().map_err(|(_, e)| e)?;
    Ok(())
}

/// Leaves changes in an export's `-wal`: switches it to WAL mode, commits `sql` there, and
/// closes without a checkpoint (`SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`), so that the `-wal` and
/// `-shm` stay beside it and the database file itself still holds the rows as they were,
/// as a writer that crashed or never checkpointed leaves them.
pub fn commit_to_wal(path: &Path, sql: &str) -> Result<()> {
    let conn = open_wal_writer(path)?;
    conn.execute_batch(sql)?;
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )?;
    conn.close().map_err(|(_, e)| e)?;
    Ok(())
}

/// A writer connection to an export in WAL mode, with automatic checkpoints off: what it
/// commits stays in the `-wal` while it is open.
pub fn open_wal_writer(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if mode != "wal" {
        return Err(format!("{}: journal_mode is {mode}, not wal", path.display()).into());
    }
    conn.execute_batch("PRAGMA wal_autocheckpoint = 0; PRAGMA foreign_keys = OFF;")?;
    Ok(conn)
}
