//! What the export's schema holds: which tables exist, which columns a table has (by
//! name), the SELECT that reads the wanted ones, and the built-in enum labels used when the
//! export has no `ENUM_*` tables.

use std::collections::{BTreeSet, HashMap};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row};

/// The tables of the export (`sqlite_master`, type `table`, or `view`: a trimmed or
/// post-processed export can show a table's rows through a view of the same name).
pub struct Schema {
    tables: BTreeSet<String>,
}

impl Schema {
    /// Lists the tables. This is the first read of the file, so it is where SQLite finds out
    /// that a file is not a database.
    pub fn load(conn: &Connection) -> rusqlite::Result<Schema> {
        let mut stmt =
            conn.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")?;
        let tables = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(Schema { tables })
    }

    /// Whether the table exists (exact name; nsys names are stable).
    pub fn has(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    /// Whether anything marks this as an nsys export: `StringIds`, a metadata table, or a
    /// `CUPTI_ACTIVITY_KIND_*` table.
    pub fn looks_like_nsys(&self) -> bool {
        self.has(super::tables::STRING_IDS)
            || self.has(super::tables::META_DATA_EXPORT)
            || self.has(super::tables::EXPORT_META_DATA)
            || self
                .tables
                .iter()
                .any(|t| t.starts_with("CUPTI_ACTIVITY_KIND_"))
    }
}

/// The column names of a table, in table order, from `PRAGMA table_info`.
pub fn columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = stmt
        .query_map([table], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(names)
}

/// A SELECT of named columns: the required ones (all present) and whichever of the
/// optional ones the table has. Values are fetched by the wanted name, whatever the
/// table's column order.
pub struct Select {
    /// The SQL text.
    pub sql: String,
    index: HashMap<&'static str, usize>,
    /// Optional columns the table lacks.
    pub missing_optional: Vec<&'static str>,
}

/// A required column that the table lacks.
pub struct MissingColumn(pub &'static str);

impl Select {
    /// Plans `SELECT "a", "b", … FROM "table"`. Column names match case-insensitively, as
    /// in SQLite. Fails with the first required column that is missing.
    pub fn plan(
        conn: &Connection,
        table: &str,
        required: &[&'static str],
        optional: &[&'static str],
    ) -> rusqlite::Result<Result<Select, MissingColumn>> {
        let have = columns(conn, table)?;
        let present = |c: &str| have.iter().any(|h| h.eq_ignore_ascii_case(c));
        if let Some(c) = required.iter().find(|c| !present(c)) {
            return Ok(Err(MissingColumn(c)));
        }
        let mut wanted: Vec<&'static str> = required.to_vec();
        let mut missing_optional = Vec::new();
        for &c in optional {
            if present(c) {
                wanted.push(c);
            } else {
                missing_optional.push(c);
            }
        }
        let list = wanted
            .iter()
            .map(|c| quote_ident(c))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("SELECT {list} FROM {}", quote_ident(table));
        let index = wanted.iter().enumerate().map(|(i, &c)| (c, i)).collect();
        Ok(Ok(Select {
            sql,
            index,
            missing_optional,
        }))
    }

    /// Whether the column is part of the SELECT.
    pub fn has(&self, column: &str) -> bool {
        self.index.contains_key(column)
    }

    /// The column's value as an integer: `None` for NULL, an absent optional column, or a
    /// value that is not a whole number.
    pub fn int(&self, row: &Row<'_>, column: &str) -> Option<i64> {
        let i = *self.index.get(column)?;
        int_value(row.get_ref(i).ok()?)
    }

    /// The column's value as text (integers and reals are printed); `None` for NULL, a
    /// blob, or an absent column.
    pub fn text(&self, row: &Row<'_>, column: &str) -> Option<String> {
        let i = *self.index.get(column)?;
        text_value(row.get_ref(i).ok()?)
    }
}

/// An SQL identifier in double quotes.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// An integer value: integers as they are, reals that are whole numbers, text that parses
/// as an integer; otherwise `None`.
pub fn int_value(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Real(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e18 => {
            Some(f as i64)
        }
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// A text value (invalid UTF-8 replaced); numbers are printed.
pub fn text_value(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Null | ValueRef::Blob(_) => None,
    }
}

/// `ENUM_CUDA_MEMCPY_OPER` labels as nsys writes them (identical in every export that has
/// the table, 2022.4 to 2026.1). Ids 0–10 are CUPTI's `CUpti_ActivityMemcpyKind`; 11–13 are
/// nsys's unified-memory migrations.
pub const MEMCPY_KIND_LABELS: [&str; 14] = [
    "Unknown",
    "Host-to-Device",
    "Device-to-Host",
    "Host-to-Array",
    "Array-to-Host",
    "Array-to-Array",
    "Array-to-Device",
    "Device-to-Array",
    "Device-to-Device",
    "Host-to-Host",
    "Peer-to-Peer",
    "Unified Host-to-Device",
    "Unified Device-to-Host",
    "Unified Device-to-Device",
];

/// `ENUM_CUDA_MEM_KIND` labels (CUPTI's `CUpti_ActivityMemoryKind` order).
pub const MEM_KIND_LABELS: [&str; 8] = [
    "Pageable",
    "Pinned",
    "Device",
    "Array",
    "Managed",
    "Device Static",
    "Managed Static",
    "Unknown",
];

/// The built-in label of an id, if the table has one.
pub fn builtin_label(labels: &'static [&'static str], id: i64) -> Option<&'static str> {
    usize::try_from(id)
        .ok()
        .and_then(|i| labels.get(i).copied())
}

/// An API name without its CUDA version suffix: `cudaLaunchKernel_v7000` ->
/// `cudaLaunchKernel`. Names without a `_v<digits>` ending are returned unchanged.
pub fn strip_version_suffix(name: &str) -> &str {
    match name.rfind("_v") {
        Some(i)
            if i > 0 && name.len() > i + 2 && name[i + 2..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            &name[..i]
        }
        _ => name,
    }
}

/// Whether the API call `name` (version suffix stripped) launches a kernel: the runtime's
/// and the driver's launches, their cooperative and extended forms (`cudaLaunchKernelExC`,
/// `cuLaunchCooperativeKernelMultiDevice`), per-thread-stream variants (`_ptsz`), and the
/// launches before CUDA 7 (`cudaLaunch`, `cuLaunch`, `cuLaunchGrid*`). `<<<...>>>` compiles
/// to `cudaLaunchKernel`. Not `cudaLaunchHostFunc` (a host callback, never a kernel), nor a
/// graph launch ([`is_graph_launch`]).
pub fn is_kernel_launch(name: &str) -> bool {
    const PREFIXES: [&str; 4] = [
        "cudaLaunchKernel",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchCooperativeKernel",
    ];
    let n = without_stream_suffix(name);
    PREFIXES.iter().any(|p| n.starts_with(p))
        || matches!(
            n,
            "cudaLaunch" | "cuLaunch" | "cuLaunchGrid" | "cuLaunchGridAsync"
        )
}

/// Whether the API call `name` launches a CUDA graph, whose kernels become kernel rows only
/// when nsys traced the graph's nodes (`--cuda-graph-trace=node`).
pub fn is_graph_launch(name: &str) -> bool {
    matches!(
        without_stream_suffix(name),
        "cudaGraphLaunch" | "cuGraphLaunch"
    )
}

/// `cudaLaunchKernel_ptsz` -> `cudaLaunchKernel`: the per-thread default stream variants.
fn without_stream_suffix(name: &str) -> &str {
    name.strip_suffix("_ptsz")
        .or_else(|| name.strip_suffix("_ptds"))
        .unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_launches_are_told_from_other_calls_named_launch() {
        for n in [
            "cudaLaunchKernel",
            "cudaLaunchKernel_ptsz",
            "cudaLaunchKernelExC",
            "cudaLaunchCooperativeKernel",
            "cudaLaunchCooperativeKernelMultiDevice",
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cuLaunchCooperativeKernel",
            "cudaLaunch",
            "cuLaunchGrid",
        ] {
            assert!(is_kernel_launch(n), "{n}");
            assert!(!is_graph_launch(n), "{n}");
        }
        for n in [
            "cudaLaunchHostFunc",
            "cuLaunchHostFunc",
            "cudaLaunchHostFunc_ptsz",
        ] {
            assert!(!is_kernel_launch(n), "{n}");
            assert!(!is_graph_launch(n), "{n}");
        }
        for n in ["cudaGraphLaunch", "cudaGraphLaunch_ptsz", "cuGraphLaunch"] {
            assert!(!is_kernel_launch(n), "{n}");
            assert!(is_graph_launch(n), "{n}");
        }
    }

    #[test]
    fn version_suffixes_are_stripped_and_nothing_else() {
        assert_eq!(
            strip_version_suffix("cudaLaunchKernel_v7000"),
            "cudaLaunchKernel"
        );
        assert_eq!(strip_version_suffix("cudaMemcpy_v3020"), "cudaMemcpy");
        assert_eq!(strip_version_suffix("cudaLaunchKernel"), "cudaLaunchKernel");
        assert_eq!(strip_version_suffix("cuKernelGetName"), "cuKernelGetName");
        assert_eq!(strip_version_suffix("foo_v"), "foo_v");
        assert_eq!(strip_version_suffix("foo_v12a"), "foo_v12a");
        assert_eq!(strip_version_suffix("_v2"), "_v2");
        assert_eq!(strip_version_suffix("a_v1_v2"), "a_v1");
    }

    #[test]
    fn builtin_labels_cover_the_documented_ids() {
        assert_eq!(
            builtin_label(&MEMCPY_KIND_LABELS, 1),
            Some("Host-to-Device")
        );
        assert_eq!(
            builtin_label(&MEMCPY_KIND_LABELS, 13),
            Some("Unified Device-to-Device")
        );
        assert_eq!(builtin_label(&MEMCPY_KIND_LABELS, 14), None);
        assert_eq!(builtin_label(&MEMCPY_KIND_LABELS, -1), None);
        assert_eq!(builtin_label(&MEM_KIND_LABELS, 0), Some("Pageable"));
        assert_eq!(builtin_label(&MEM_KIND_LABELS, 7), Some("Unknown"));
    }

    #[test]
    fn integer_values_are_read_leniently() {
        assert_eq!(int_value(ValueRef::Integer(5)), Some(5));
        assert_eq!(int_value(ValueRef::Real(5.0)), Some(5));
        assert_eq!(int_value(ValueRef::Real(5.5)), None);
        assert_eq!(int_value(ValueRef::Text(b" 42 ")), Some(42));
        assert_eq!(int_value(ValueRef::Text(b"x")), None);
        assert_eq!(int_value(ValueRef::Null), None);
    }
}
