//! Opening an export read-only and reading its tables into a [`Trace`].

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use klab_core::artifact::{open_regular, Input};
use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::schema::{self, MissingColumn, Schema, Select};
use super::tables::*;
use super::{
    analyze, ApiCalls, ApiError, Dim3, ExportVersion, Gpu, KernelLaunch, Memcpy, Memset, NsysError,
    ProcessOrdinal, Span, TableState, Tables, Trace,
};

/// See [`super::open`].
pub fn open(path: &Path) -> Result<Trace, NsysError> {
    // SQLite would wait on a FIFO and read a device node: only a regular file is opened.
    match open_regular(path, Input::NSYS_EXPORT) {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {
            return Err(NsysError::NotFound {
                path: path.to_path_buf(),
            })
        }
        Err(e) if e.is_folder() => {
            return Err(NsysError::IsDirectory {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(NsysError::File(e)),
    }
    let wal = pending_wal(path)?;
    let query = match &wal {
        None => "immutable=1",
        Some(_) => "mode=ro&readonly_shm=1",
    };
    let uri = file_uri(path, query).map_err(|source| NsysError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    // Through the WAL, a `-shm` that cannot be opened read-only (or that vanished since it
    // was seen) is a CANTOPEN on the first read; said as the WAL problem it is.
    let open_error = |e: rusqlite::Error| match &wal {
        Some(w) if e.sqlite_error_code() == Some(ErrorCode::CannotOpen) => {
            NsysError::UncheckpointedWal {
                path: path.to_path_buf(),
                wal: w.wal.clone(),
                reason: format!("SQLite could not read it through {}: {e}", w.shm.display()),
            }
        }
        _ => sql_error(path)(e),
    };
    let conn = Connection::open_with_flags(&uri, flags).map_err(open_error)?;
    // One read transaction for every query: a writer still open on a WAL export cannot
    // change the rows between them.
    conn.execute_batch("BEGIN").map_err(open_error)?;
    let schema = Schema::load(&conn).map_err(open_error)?;
    if !schema.looks_like_nsys() {
        return Err(NsysError::NotNsys {
            path: path.to_path_buf(),
        });
    }
    let notes = wal
        .iter()
        .map(|w| {
            format!(
                "{} holds changes not yet checkpointed into the export (WAL mode): read through it and {}, read-only",
                w.wal.display(),
                w.shm.display()
            )
        })
        .collect();
    Reader {
        conn: &conn,
        schema: &schema,
        notes,
    }
    .read(path)
    .map_err(sql_error(path))
}

/// The `-wal` and `-shm` files of an export whose `-wal` holds frames.
struct Wal {
    wal: PathBuf,
    shm: PathBuf,
}

/// The WAL header; a `-wal` no longer than this holds no frames.
const WAL_HEADER_BYTES: u64 = 32;

/// Whether the export has a `-wal` beside it that holds frames: changes committed by a
/// writer that is still open or that closed without a checkpoint. `immutable=1` would ignore
/// them, and SQLite reads them only through a `-shm` wal-index: an existing one opened
/// read-only (`readonly_shm=1`; with no writer alive SQLite rebuilds the index in its own
/// memory from the `-wal`), since creating one would write beside the export. No `-shm`:
/// [`NsysError::UncheckpointedWal`]. The names are SQLite's: the database's path, symbolic
/// links resolved, plus `-wal` / `-shm`.
fn pending_wal(path: &Path) -> Result<Option<Wal>, NsysError> {
    let real = std::fs::canonicalize(path).map_err(|source| NsysError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let beside = |suffix: &str| {
        let mut p = real.clone().into_os_string();
        p.push(suffix);
        PathBuf::from(p)
    };
    let (wal, shm) = (beside("-wal"), beside("-shm"));
    let frames = std::fs::metadata(&wal).is_ok_and(|m| m.is_file() && m.len() > WAL_HEADER_BYTES);
    if !frames {
        return Ok(None);
    }
    if !shm.is_file() {
        return Err(NsysError::UncheckpointedWal {
            path: path.to_path_buf(),
            reason: format!("there is no {}", shm.display()),
            wal,
        });
    }
    Ok(Some(Wal { wal, shm }))
}

/// `file:/abs/path?QUERY`: with `immutable=1` SQLite takes no locks and creates no `-wal`,
/// `-shm` or journal files (the export must not change while it is read, which holds for a
/// finished export); with `mode=ro&readonly_shm=1` it reads a pending `-wal` through an
/// existing `-shm` without writing either. Every byte outside the URI-unreserved set is
/// percent-encoded, so `?`, `#`, `%` and spaces in a path are safe.
fn file_uri(path: &Path, query: &str) -> std::io::Result<String> {
    let abs = std::path::absolute(path)?;
    let raw = abs.as_os_str().as_encoded_bytes();
    #[cfg(windows)]
    let raw: Vec<u8> = std::iter::once(b'/')
        .chain(raw.iter().map(|&b| if b == b'\\' { b'/' } else { b }))
        .collect();
    // "file://" plus an empty authority, so a path that starts with "//" is still a path.
    let mut uri = String::from("file://");
    for &b in raw.iter() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('?');
    uri.push_str(query);
    Ok(uri)
}

/// Maps an SQLite error to the module's error; "file is not a database" gets its own.
fn sql_error(path: &Path) -> impl Fn(rusqlite::Error) -> NsysError + '_ {
    move |e| match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => NsysError::NotSqlite {
            path: path.to_path_buf(),
        },
        _ => NsysError::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// Labels for an enum column: the export's `ENUM_*` table when it has one, else the
/// built-in copy, else `<word> N`. Remembers whether the export's table was missing when
/// a label was needed, for a note.
struct Labels {
    table_name: &'static str,
    table: Option<HashMap<i64, String>>,
    builtin: &'static [&'static str],
    word: &'static str,
    used_builtin: Cell<bool>,
}

impl Labels {
    fn label(&self, id: i64) -> String {
        if let Some(l) = self.table.as_ref().and_then(|t| t.get(&id)) {
            return l.clone();
        }
        if self.table.is_none() {
            self.used_builtin.set(true);
        }
        schema::builtin_label(self.builtin, id)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{} {id}", self.word))
    }

    fn note(&self) -> Option<String> {
        self.used_builtin.get().then(|| {
            format!(
                "no {} table: built-in {} labels used",
                self.table_name, self.word
            )
        })
    }
}

/// Counts values that a NOT NULL column should not hold (NULL, non-integer, negative
/// byte counts), per table, for one note.
#[derive(Default)]
struct Oddities {
    count: u64,
    columns: BTreeSet<&'static str>,
}

impl Oddities {
    fn want(&mut self, value: Option<i64>, column: &'static str) -> i64 {
        value.unwrap_or_else(|| {
            self.count += 1;
            self.columns.insert(column);
            0
        })
    }

    fn bytes(&mut self, value: Option<i64>, column: &'static str) -> u64 {
        match value.map(u64::try_from) {
            Some(Ok(b)) => b,
            _ => {
                self.count += 1;
                self.columns.insert(column);
                0
            }
        }
    }

    fn span(&mut self, start: Option<i64>, end: Option<i64>) -> Span {
        match (start, end) {
            (Some(s), Some(e)) => Span::new(s, e),
            (s, e) => {
                self.count += 1;
                self.columns
                    .insert(if s.is_none() { "start" } else { "end" });
                Span {
                    start_ns: s.unwrap_or(0),
                    end_ns: e.unwrap_or(0),
                    duration_ns: None,
                }
            }
        }
    }

    fn note(&self, table: &str) -> Option<String> {
        (self.count > 0).then(|| {
            format!(
                "{table}: {} NULL, non-integer or negative values in {} read as 0 or unknown",
                self.count,
                self.columns
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

/// A row's `correlationId` as a join key: NULL and 0 (unified-memory migrations, which no
/// call caused) are not keys.
fn join_key(correlation_id: Option<i64>) -> Option<i64> {
    correlation_id.filter(|&c| c != 0)
}

/// The process id in a serialized GlobalId (`globalPid`, `globalTid`): nsys packs hardware,
/// VM, process and thread ids into one integer, the process id in bits 24..48 (its own SQL
/// examples extract it as `globalTid / 0x1000000 % 0x1000000`).
fn pid_of(global_id: Option<i64>) -> Option<i64> {
    global_id.map(|g| (g >> 24) & 0xFF_FFFF)
}

/// The API call names by (process, correlationId): CUPTI correlation ids are unique
/// within a process, not across the processes of one trace.
#[derive(Default)]
struct CallIndex {
    exact: HashMap<(Option<i64>, i64), String>,
    /// correlationId -> name, `None` when two processes use the id for different calls.
    by_id: HashMap<i64, Option<String>>,
}

impl CallIndex {
    fn insert(&mut self, pid: Option<i64>, id: i64, name: &str) {
        self.exact.insert((pid, id), name.to_string());
        self.by_id
            .entry(id)
            .and_modify(|n| {
                if n.as_deref() != Some(name) {
                    *n = None;
                }
            })
            .or_insert_with(|| Some(name.to_string()));
    }

    /// The call of an activity row: same process and id; when the runtime rows carry no
    /// process, the same id; when the activity row carries none, the id if it is unambiguous.
    fn name(&self, pid: Option<i64>, correlation_id: Option<i64>) -> Option<String> {
        let id = join_key(correlation_id)?;
        match pid {
            Some(_) => self
                .exact
                .get(&(pid, id))
                .or_else(|| self.exact.get(&(None, id)))
                .cloned(),
            None => self.by_id.get(&id).cloned().flatten(),
        }
    }
}

/// Which GPU a row's process and ordinal name: its process's entry in
/// `TARGET_INFO_CUDA_DEVICE` (2025.5 on), else the one GPU with that ordinal (older exports,
/// or a process the table leaves out). What cannot be told is none, with a note.
struct GpuIndex {
    /// (pid, ordinal) -> the GPU, None where rows of the table disagree.
    by_process: HashMap<(i64, i64), Option<i64>>,
    by_ordinal: HashMap<i64, Option<i64>>,
    notes: Vec<String>,
}

impl GpuIndex {
    fn new(gpus: &[Gpu], seen: &[(i64, ProcessOrdinal)]) -> GpuIndex {
        let mut notes = Vec::new();
        let known: BTreeSet<i64> = gpus.iter().filter_map(|g| g.id).collect();
        let mut by_process: HashMap<(i64, i64), Option<i64>> = HashMap::new();
        for &(g, p) in seen {
            by_process
                .entry((p.pid, p.cuda_device))
                .and_modify(|owner| {
                    if *owner != Some(g) {
                        *owner = None
                    }
                })
                .or_insert(Some(g));
        }
        let unlisted: BTreeSet<i64> = seen
            .iter()
            .map(|(g, _)| *g)
            .filter(|g| !known.contains(g))
            .collect();
        if !unlisted.is_empty() {
            notes.push(format!(
                "{TARGET_INFO_CUDA_DEVICE} names GPU id(s) {} that {TARGET_INFO_GPU} does not list: their rows' gpu is that id, with no name",
                unlisted.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
        let mut conflicting: Vec<String> = by_process
            .iter()
            .filter(|(_, g)| g.is_none())
            .map(|((pid, d), _)| format!("process {pid}'s CUDA device {d}"))
            .collect();
        conflicting.sort();
        if !conflicting.is_empty() {
            notes.push(format!(
                "{TARGET_INFO_CUDA_DEVICE} gives more than one GPU for {}: its rows' gpu is blank",
                conflicting.join(", ")
            ));
        }
        let mut by_ordinal: HashMap<i64, Option<i64>> = HashMap::new();
        for g in gpus {
            let Some(id) = g.id else { continue };
            let ordinals: BTreeSet<i64> = g
                .processes
                .iter()
                .map(|p| p.cuda_device)
                .chain(g.cuda_device)
                .collect();
            for d in ordinals {
                // An ordinal two GPUs share names neither.
                by_ordinal
                    .entry(d)
                    .and_modify(|owner| {
                        if *owner != Some(id) {
                            *owner = None
                        }
                    })
                    .or_insert(Some(id));
            }
        }
        if seen.is_empty() && by_ordinal.values().any(Option::is_none) {
            notes.push(format!(
                "several GPUs have the same CUDA ordinal and the export has no {TARGET_INFO_CUDA_DEVICE}: which GPU a row ran on cannot be told (dev is the ordinal in the row's process)"
            ));
        }
        GpuIndex {
            by_process,
            by_ordinal,
            notes,
        }
    }

    fn gpu(&self, pid: Option<i64>, device: i64) -> Option<i64> {
        match pid.and_then(|p| self.by_process.get(&(p, device))) {
            Some(g) => *g,
            None => self.by_ordinal.get(&device).copied().flatten(),
        }
    }
}

struct Reader<'a> {
    conn: &'a Connection,
    schema: &'a Schema,
    notes: Vec<String>,
}

impl Reader<'_> {
    fn read(mut self, path: &Path) -> rusqlite::Result<Trace> {
        let version = self.version()?;
        let strings = self.strings()?;
        let (gpus, gpu_of) = self.gpus()?;
        let (runtime, api, calls) = self.runtime(&strings)?;
        let (kernel, mut kernels) = self.kernels(&strings)?;
        let copy_kinds = self.labels(ENUM_MEMCPY_OPER, &schema::MEMCPY_KIND_LABELS, "copy kind")?;
        let mem_kinds = self.labels(ENUM_MEM_KIND, &schema::MEM_KIND_LABELS, "memory kind")?;
        let (memcpy, mut memcpys) = self.memcpys(&copy_kinds, &mem_kinds)?;
        let (memset, mut memsets) = self.memsets(&mem_kinds)?;
        self.notes
            .extend([copy_kinds.note(), mem_kinds.note()].into_iter().flatten());

        for k in &mut kernels {
            k.api = calls.name(k.pid, k.correlation_id);
            k.gpu = gpu_of.gpu(k.pid, k.device);
        }
        for m in &mut memcpys {
            m.api = calls.name(m.pid, m.correlation_id);
            m.gpu = gpu_of.gpu(m.pid, m.device);
        }
        for m in &mut memsets {
            m.api = calls.name(m.pid, m.correlation_id);
            m.gpu = gpu_of.gpu(m.pid, m.device);
        }
        if api.count > 0 {
            let unmatched = kernels.iter().filter(|k| k.api.is_none()).count();
            if unmatched > 0 {
                self.notes.push(format!(
                    "{unmatched} of {} kernel launches have no API call with their correlationId; their api is blank",
                    kernels.len()
                ));
            }
        }
        if api.graph_launches > 0 && matches!(kernel, TableState::Missing | TableState::Read(0)) {
            self.notes.push(format!(
                "{} graph launches and zero kernel rows: not taken for failed launches, since nsys writes a graph's kernels as kernel rows only when it traces graph nodes (--cuda-graph-trace=node)",
                api.graph_launches
            ));
        }
        // By start time; rows without timestamps last. Stable: ties keep table order.
        kernels.sort_by_key(|k| (k.span.has_no_timestamps(), k.span.start_ns));
        memcpys.sort_by_key(|m| (m.span.has_no_timestamps(), m.span.start_ns));
        memsets.sort_by_key(|m| (m.span.has_no_timestamps(), m.span.start_ns));

        let mut trace = Trace {
            path: path.to_path_buf(),
            version,
            gpus,
            kernels,
            memcpys,
            memsets,
            api,
            tables: Tables {
                kernel,
                memcpy,
                memset,
                runtime,
            },
            findings: Vec::new(),
            notes: self.notes,
        };
        trace.findings = analyze::findings(&trace);
        Ok(trace)
    }

    /// Plans a SELECT on an activity table, or says why the table gives nothing: missing
    /// (noted as zero events) or lacking a required column (noted, skipped).
    fn plan(
        &mut self,
        table: &str,
        required: &[&'static str],
        optional: &[&'static str],
        what: &str,
    ) -> rusqlite::Result<Result<Select, TableState>> {
        if !self.schema.has(table) {
            self.notes
                .push(format!("no {table} table: treated as zero {what}"));
            return Ok(Err(TableState::Missing));
        }
        match Select::plan(self.conn, table, required, optional)? {
            Ok(sel) => Ok(Ok(sel)),
            Err(MissingColumn(c)) => {
                self.notes.push(format!(
                    "{table} has no column `{c}`: table skipped, its {what} are not shown"
                ));
                Ok(Err(TableState::Skipped))
            }
        }
    }

    fn note_missing_optional(&mut self, table: &str, sel: &Select, consequences: &[(&str, &str)]) {
        for c in &sel.missing_optional {
            let why = consequences
                .iter()
                .find(|(name, _)| name == c)
                .map(|(_, why)| *why)
                .unwrap_or("its values are unknown");
            self.notes
                .push(format!("{table} has no column `{c}`: {why}"));
        }
    }

    fn version(&mut self) -> rusqlite::Result<ExportVersion> {
        for table in [META_DATA_EXPORT, EXPORT_META_DATA] {
            if !self.schema.has(table) {
                continue;
            }
            let sel = match Select::plan(self.conn, table, &["name", "value"], &[])? {
                Ok(sel) => sel,
                Err(MissingColumn(c)) => {
                    self.notes
                        .push(format!("{table} has no column `{c}`: version unknown"));
                    continue;
                }
            };
            let mut meta = HashMap::new();
            let mut stmt = self.conn.prepare(&sel.sql)?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                if let (Some(k), Some(v)) = (sel.text(row, "name"), sel.text(row, "value")) {
                    meta.entry(k).or_insert(v);
                }
            }
            let lazy = meta
                .get("EXPORT_LAZY")
                .or_else(|| meta.get("EXPORT_PARAM_LAZY"))
                .and_then(|v| match v.trim().to_ascii_lowercase().as_str() {
                    "true" | "1" => Some(true),
                    "false" | "0" => Some(false),
                    _ => None,
                });
            return Ok(ExportVersion {
                table: Some(table.to_string()),
                product: meta.remove("EXPORT_PRODUCT_VERSION"),
                schema: meta.remove("EXPORT_SCHEMA_VERSION"),
                lazy,
            });
        }
        self.notes.push(format!(
            "no {META_DATA_EXPORT} or {EXPORT_META_DATA} table: export version unknown"
        ));
        Ok(ExportVersion::default())
    }

    fn strings(&mut self) -> rusqlite::Result<HashMap<i64, String>> {
        let mut strings = HashMap::new();
        if !self.schema.has(STRING_IDS) {
            self.notes.push(format!(
                "no {STRING_IDS} table: names are shown as string ids"
            ));
            return Ok(strings);
        }
        let sel = match Select::plan(self.conn, STRING_IDS, &["id", "value"], &[])? {
            Ok(sel) => sel,
            Err(MissingColumn(c)) => {
                self.notes.push(format!(
                    "{STRING_IDS} has no column `{c}`: names are shown as string ids"
                ));
                return Ok(strings);
            }
        };
        let mut stmt = self.conn.prepare(&sel.sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            if let (Some(id), Some(v)) = (sel.int(row, "id"), sel.text(row, "value")) {
                strings.insert(id, v);
            }
        }
        Ok(strings)
    }

    /// An `ENUM_*` table as id -> label (the `name` column when there is no `label`), or
    /// `None` when the export has no usable table.
    fn enum_table(&mut self, table: &str) -> rusqlite::Result<Option<HashMap<i64, String>>> {
        if !self.schema.has(table) {
            return Ok(None);
        }
        let sel = match Select::plan(self.conn, table, &["id"], &["label", "name"])? {
            Ok(sel) if sel.has("label") || sel.has("name") => sel,
            _ => {
                self.notes.push(format!(
                    "{table} has no `id` and `label` columns: built-in labels used"
                ));
                return Ok(None);
            }
        };
        let mut map = HashMap::new();
        let mut stmt = self.conn.prepare(&sel.sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let label = sel.text(row, "label").or_else(|| sel.text(row, "name"));
            if let (Some(id), Some(label)) = (sel.int(row, "id"), label) {
                map.insert(id, label);
            }
        }
        Ok(Some(map))
    }

    fn labels(
        &mut self,
        table_name: &'static str,
        builtin: &'static [&'static str],
        word: &'static str,
    ) -> rusqlite::Result<Labels> {
        Ok(Labels {
            table_name,
            table: self.enum_table(table_name)?,
            builtin,
            word,
            used_builtin: Cell::new(false),
        })
    }

    /// The GPUs, and which GPU each process's ordinal names (`TARGET_INFO_CUDA_DEVICE`).
    fn gpus(&mut self) -> rusqlite::Result<(Vec<Gpu>, GpuIndex)> {
        let seen = self.process_ordinals()?;
        let gpus = self.gpu_rows(&seen)?;
        let index = GpuIndex::new(&gpus, &seen);
        self.notes.extend(index.notes.iter().cloned());
        Ok((gpus, index))
    }

    /// `TARGET_INFO_CUDA_DEVICE`: each (gpuId, process, ordinal) row, pids read as process ids.
    fn process_ordinals(&mut self) -> rusqlite::Result<Vec<(i64, ProcessOrdinal)>> {
        let mut out = Vec::new();
        if !self.schema.has(TARGET_INFO_CUDA_DEVICE) {
            return Ok(out);
        }
        let Ok(map) = Select::plan(
            self.conn,
            TARGET_INFO_CUDA_DEVICE,
            &["gpuId", "cudaId"],
            &["pid"],
        )?
        else {
            return Ok(out);
        };
        let mut stmt = self.conn.prepare(&map.sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let (Some(g), Some(c), Some(p)) = (
                map.int(row, "gpuId"),
                map.int(row, "cudaId"),
                map.int(row, "pid"),
            ) else {
                continue;
            };
            // Documented as a process id; read a serialized GlobalId too.
            let pid = if p > 0xFF_FFFF {
                pid_of(Some(p)).unwrap_or(p)
            } else {
                p
            };
            out.push((
                g,
                ProcessOrdinal {
                    pid,
                    cuda_device: c,
                },
            ));
        }
        Ok(out)
    }

    /// `TARGET_INFO_GPU`, each GPU with the processes `TARGET_INFO_CUDA_DEVICE` gives it.
    fn gpu_rows(&mut self, seen: &[(i64, ProcessOrdinal)]) -> rusqlite::Result<Vec<Gpu>> {
        if !self.schema.has(TARGET_INFO_GPU) {
            return Ok(Vec::new());
        }
        let optional = ["name", "cuDevice", "smCount", "memoryBandwidth"];
        let Ok(sel) = Select::plan(self.conn, TARGET_INFO_GPU, &["id"], &optional)? else {
            return Ok(Vec::new());
        };
        // gpuId -> each process's ordinal for it.
        let mut seen_by: HashMap<i64, BTreeSet<ProcessOrdinal>> = HashMap::new();
        for &(g, p) in seen {
            seen_by.entry(g).or_default().insert(p);
        }
        let mut gpus = Vec::new();
        let mut stmt = self.conn.prepare(&sel.sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let id = sel.int(row, "id");
            let processes: Vec<ProcessOrdinal> = id
                .and_then(|i| seen_by.get(&i))
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            let ordinals: BTreeSet<i64> = id
                .and_then(|i| seen_by.get(&i))
                .map(|s| s.iter().map(|p| p.cuda_device).collect())
                .unwrap_or_default();
            let from_map = (ordinals.len() == 1)
                .then(|| ordinals.first().copied())
                .flatten();
            gpus.push(Gpu {
                id,
                cuda_device: from_map.or_else(|| sel.int(row, "cuDevice")),
                processes,
                name: sel.text(row, "name"),
                sm_count: sel.int(row, "smCount"),
                memory_bandwidth_gbs: sel.int(row, "memoryBandwidth").map(|b| b as f64 / 1e9),
            });
        }
        gpus.sort_by_key(|g| (g.cuda_device, g.id));
        Ok(gpus)
    }

    /// The API calls, de-duplicated (see [`ApiCalls`]), and their names by process and
    /// correlationId.
    fn runtime(
        &mut self,
        strings: &HashMap<i64, String>,
    ) -> rusqlite::Result<(TableState, ApiCalls, CallIndex)> {
        let optional = [
            "start",
            "eventClass",
            "correlationId",
            "returnValue",
            "globalTid",
        ];
        let sel = match self.plan(RUNTIME, &["nameId"], &optional, "API calls")? {
            Ok(sel) => sel,
            Err(state) => return Ok((state, ApiCalls::default(), CallIndex::default())),
        };
        self.note_missing_optional(
            RUNTIME,
            &sel,
            &[
                ("returnValue", "API errors cannot be detected"),
                (
                    "correlationId",
                    "API calls cannot be joined to kernels or copies, nor de-duplicated",
                ),
                (
                    "eventClass",
                    "rows sharing a correlationId are still counted once",
                ),
                ("start", "the first API error is the first in table order"),
                (
                    "globalTid",
                    "calls are matched by correlationId alone, whatever their process",
                ),
            ],
        );
        struct Call {
            name: String,
            start: Option<i64>,
            class: Option<i64>,
            primary: bool,
            ret: Option<i64>,
            corr: Option<i64>,
            pid: Option<i64>,
        }
        let mut calls: Vec<Call> = Vec::new();
        let mut by_id: HashMap<(Option<i64>, i64), usize> = HashMap::new();
        let mut rows_read = 0u64;
        let mut dup_classes: BTreeSet<String> = BTreeSet::new();
        let mut stmt = self.conn.prepare(&sel.sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            rows_read += 1;
            let name_id = sel.int(row, "nameId");
            let name = name_id
                .and_then(|i| strings.get(&i).cloned())
                .unwrap_or_else(|| match name_id {
                    Some(i) => format!("<string id {i}>"),
                    None => "<unnamed>".to_string(),
                });
            let class = sel.int(row, "eventClass");
            let call = Call {
                name: schema::strip_version_suffix(&name).to_string(),
                start: sel.int(row, "start"),
                class,
                primary: matches!(class, None | Some(0) | Some(1)),
                ret: sel.int(row, "returnValue"),
                corr: sel.int(row, "correlationId"),
                pid: pid_of(sel.int(row, "globalTid")),
            };
            match join_key(call.corr) {
                Some(id) => match by_id.get(&(call.pid, id)) {
                    Some(&i) => {
                        // A second row for the same call: keep the runtime/driver row.
                        let dropped_class = if !calls[i].primary && call.primary {
                            std::mem::replace(&mut calls[i], call).class
                        } else {
                            call.class
                        };
                        dup_classes.insert(
                            dropped_class
                                .map(|c| c.to_string())
                                .unwrap_or_else(|| "unknown".to_string()),
                        );
                    }
                    None => {
                        by_id.insert((call.pid, id), calls.len());
                        calls.push(call);
                    }
                },
                None => calls.push(call),
            }
        }
        let count = calls.len() as u64;
        if rows_read > count {
            self.notes.push(format!(
                "{RUNTIME}: {} rows repeat the correlationId of another call (eventClass {}); each call counted once",
                rows_read - count,
                dup_classes.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        let mut errors: Vec<ApiError> = calls
            .iter()
            .filter(|c| c.ret.is_some_and(|r| r != 0))
            .map(|c| ApiError {
                name: c.name.clone(),
                return_value: c.ret.unwrap_or_default(),
                start_ns: c.start,
                correlation_id: c.corr,
                pid: c.pid,
            })
            .collect();
        // Known start times first, in order; stable, so ties stay in table order.
        errors.sort_by_key(|e| (e.start_ns.is_none(), e.start_ns));
        let mut names = CallIndex::default();
        for ((pid, id), i) in by_id {
            names.insert(pid, id, &calls[i].name);
        }
        Ok((
            TableState::Read(rows_read),
            ApiCalls {
                count,
                rows: rows_read,
                launches: calls
                    .iter()
                    .filter(|c| schema::is_kernel_launch(&c.name))
                    .count() as u64,
                graph_launches: calls
                    .iter()
                    .filter(|c| schema::is_graph_launch(&c.name))
                    .count() as u64,
                errors,
            },
            names,
        ))
    }

    fn kernels(
        &mut self,
        strings: &HashMap<i64, String>,
    ) -> rusqlite::Result<(TableState, Vec<KernelLaunch>)> {
        let required = [
            "start", "end", "deviceId", "streamId", "gridX", "gridY", "gridZ", "blockX", "blockY",
            "blockZ",
        ];
        let optional = [
            "demangledName",
            "shortName",
            "mangledName",
            "correlationId",
            "globalPid",
            "registersPerThread",
            "staticSharedMemory",
            "dynamicSharedMemory",
        ];
        let sel = match self.plan(KERNEL, &required, &optional, "kernel launches")? {
            Ok(sel) => sel,
            Err(state) => return Ok((state, Vec::new())),
        };
        if !["demangledName", "shortName", "mangledName"]
            .iter()
            .any(|c| sel.has(c))
        {
            self.notes.push(format!(
                "{KERNEL} has no column `demangledName`, `shortName` or `mangledName`: table skipped, its kernel launches are not shown"
            ));
            return Ok((TableState::Skipped, Vec::new()));
        }
        let name_columns_missing: Vec<&str> = sel
            .missing_optional
            .iter()
            .copied()
            .filter(|c| c.ends_with("Name"))
            .collect();
        let mut others = sel.missing_optional.clone();
        others.retain(|c| !c.ends_with("Name"));
        if !name_columns_missing.is_empty() {
            self.notes.push(format!(
                "{KERNEL} has no column {}: names fall back to the others",
                name_columns_missing
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for c in others {
            let why = match c {
                "correlationId" => "launching API calls unknown",
                _ => "its values are unknown",
            };
            self.notes
                .push(format!("{KERNEL} has no column `{c}`: {why}"));
        }

        let resolve = |id: Option<i64>| {
            id.and_then(|i| strings.get(&i))
                .filter(|s| !s.is_empty())
                .cloned()
        };
        let mut odd = Oddities::default();
        let mut fallbacks = 0u64;
        let mut kernels = Vec::new();
        let mut stmt = self.conn.prepare(&sel.sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let ids = [
                sel.int(row, "demangledName"),
                sel.int(row, "shortName"),
                sel.int(row, "mangledName"),
            ];
            let demangled = resolve(ids[0]);
            let short_name = resolve(ids[1]);
            let mangled_name = resolve(ids[2]);
            if demangled.is_none() {
                fallbacks += 1;
            }
            let name = demangled
                .or_else(|| short_name.clone())
                .or_else(|| mangled_name.clone())
                .unwrap_or_else(|| match ids.iter().flatten().next() {
                    Some(i) => format!("<string id {i}>"),
                    None => "<unnamed>".to_string(),
                });
            let mut dim = |x: &'static str, y: &'static str, z: &'static str| Dim3 {
                x: odd.want(sel.int(row, x), x),
                y: odd.want(sel.int(row, y), y),
                z: odd.want(sel.int(row, z), z),
            };
            let grid = dim("gridX", "gridY", "gridZ");
            let block = dim("blockX", "blockY", "blockZ");
            kernels.push(KernelLaunch {
                name,
                short_name,
                mangled_name,
                device: odd.want(sel.int(row, "deviceId"), "deviceId"),
                stream: odd.want(sel.int(row, "streamId"), "streamId"),
                grid,
                block,
                span: odd.span(sel.int(row, "start"), sel.int(row, "end")),
                registers_per_thread: sel.int(row, "registersPerThread"),
                static_shared_bytes: sel.int(row, "staticSharedMemory"),
                dynamic_shared_bytes: sel.int(row, "dynamicSharedMemory"),
                correlation_id: sel.int(row, "correlationId"),
                pid: pid_of(sel.int(row, "globalPid")),
                gpu: None,
                api: None,
            });
        }
        if fallbacks > 0 && sel.has("demangledName") {
            self.notes.push(format!(
                "{KERNEL}: {fallbacks} rows whose demangledName does not resolve through {STRING_IDS}; shown by short name, mangled name or string id"
            ));
        }
        if let Some(n) = odd.note(KERNEL) {
            self.notes.push(n);
        }
        Ok((TableState::Read(kernels.len() as u64), kernels))
    }

    fn memcpys(
        &mut self,
        kinds: &Labels,
        mems: &Labels,
    ) -> rusqlite::Result<(TableState, Vec<Memcpy>)> {
        let required = ["start", "end", "deviceId", "streamId", "bytes", "copyKind"];
        let optional = ["srcKind", "dstKind", "correlationId", "globalPid"];
        let sel = match self.plan(MEMCPY, &required, &optional, "memory copies")? {
            Ok(sel) => sel,
            Err(state) => return Ok((state, Vec::new())),
        };
        self.note_missing_optional(
            MEMCPY,
            &sel,
            &[("correlationId", "launching API calls unknown")],
        );
        let mut odd = Oddities::default();
        let mut raw = Vec::new();
        let mut stmt = self.conn.prepare(&sel.sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            raw.push((
                odd.want(sel.int(row, "copyKind"), "copyKind"),
                sel.int(row, "srcKind"),
                sel.int(row, "dstKind"),
                Memcpy {
                    device: odd.want(sel.int(row, "deviceId"), "deviceId"),
                    stream: odd.want(sel.int(row, "streamId"), "streamId"),
                    bytes: odd.bytes(sel.int(row, "bytes"), "bytes"),
                    copy_kind: 0,
                    direction: String::new(),
                    src_kind: None,
                    dst_kind: None,
                    span: odd.span(sel.int(row, "start"), sel.int(row, "end")),
                    correlation_id: sel.int(row, "correlationId"),
                    pid: pid_of(sel.int(row, "globalPid")),
                    gpu: None,
                    api: None,
                },
            ));
        }
        let memcpys: Vec<Memcpy> = raw
            .into_iter()
            .map(|(kind, src, dst, m)| Memcpy {
                copy_kind: kind,
                direction: kinds.label(kind),
                src_kind: src.map(|k| mems.label(k)),
                dst_kind: dst.map(|k| mems.label(k)),
                ..m
            })
            .collect();
        if let Some(n) = odd.note(MEMCPY) {
            self.notes.push(n);
        }
        Ok((TableState::Read(memcpys.len() as u64), memcpys))
    }

    fn memsets(&mut self, mems: &Labels) -> rusqlite::Result<(TableState, Vec<Memset>)> {
        let required = ["start", "end", "deviceId", "streamId", "bytes"];
        let optional = ["value", "memKind", "correlationId", "globalPid"];
        let sel = match self.plan(MEMSET, &required, &optional, "memory sets")? {
            Ok(sel) => sel,
            Err(state) => return Ok((state, Vec::new())),
        };
        self.note_missing_optional(
            MEMSET,
            &sel,
            &[("correlationId", "launching API calls unknown")],
        );
        let mut odd = Oddities::default();
        let mut raw = Vec::new();
        let mut stmt = self.conn.prepare(&sel.sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            raw.push((
                sel.int(row, "memKind"),
                Memset {
                    device: odd.want(sel.int(row, "deviceId"), "deviceId"),
                    stream: odd.want(sel.int(row, "streamId"), "streamId"),
                    bytes: odd.bytes(sel.int(row, "bytes"), "bytes"),
                    value: sel.int(row, "value"),
                    mem_kind: None,
                    span: odd.span(sel.int(row, "start"), sel.int(row, "end")),
                    correlation_id: sel.int(row, "correlationId"),
                    pid: pid_of(sel.int(row, "globalPid")),
                    gpu: None,
                    api: None,
                },
            ));
        }
        let memsets: Vec<Memset> = raw
            .into_iter()
            .map(|(kind, m)| Memset {
                mem_kind: kind.map(|k| mems.label(k)),
                ..m
            })
            .collect();
        if let Some(n) = odd.note(MEMSET) {
            self.notes.push(n);
        }
        Ok((TableState::Read(memsets.len() as u64), memsets))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{testdata, FindingKind};

    /// The seed's failed export with its three `cudaLaunchKernel` calls renamed.
    fn failed_with_launches_named(name: &str) -> super::super::Trace {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        testdata::nsys_2024_5_transpose64_failed(&path).unwrap();
        let sql = format!(
            "UPDATE StringIds SET value = '{name}' WHERE value = 'cudaLaunchKernel_v7000';"
        );
        testdata::edit(&path, &sql).unwrap();
        super::open(&path).unwrap()
    }

    #[test]
    fn host_callbacks_and_graph_launches_are_not_failed_kernel_launches() {
        let t = failed_with_launches_named("cudaLaunchHostFunc_v10000");
        assert_eq!((t.api.launches, t.api.graph_launches), (0, 0));
        assert!(t
            .findings
            .iter()
            .all(|f| f.kind != FindingKind::LaunchesFailed));

        let t = failed_with_launches_named("cudaGraphLaunch_v10000");
        assert_eq!((t.api.launches, t.api.graph_launches), (0, 3));
        assert!(t
            .findings
            .iter()
            .all(|f| f.kind != FindingKind::LaunchesFailed));
        assert!(t
            .notes
            .iter()
            .any(|n| n.starts_with("3 graph launches and zero kernel rows")));

        let t = failed_with_launches_named("cuLaunchKernel_ptsz");
        assert_eq!(t.api.launches, 3);
        assert_eq!(t.findings[0].kind, FindingKind::LaunchesFailed);
    }
}
