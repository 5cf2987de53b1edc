//! Schema robustness and bad input: column order, missing and extra columns, NULLs,
//! unresolved names, ENUM tables, and files that are not exports.

mod nsys_fixtures;

use std::path::Path;

use klab_tools::nsys::testdata::{
    self, add_call, add_copy, add_kernel, call, int, null, plain_copy, Col, Db, Kernel, Refs,
    Version,
};
use klab_tools::nsys::{self, FindingKind, NsysError, TableState};
use nsys_fixtures::*;
use rusqlite::Connection;

const V: Version = Version::V2024_5;

fn reduce_kernel(correlation_id: i64, start: i64, duration: i64) -> Kernel<'static> {
    Kernel {
        demangled: "void reduce_v0<(int)256>(int *, int *)",
        short: "reduce_v0",
        mangled: Some("_Z9reduce_v0ILi256EEvPiS0_"),
        grid: [128, 128, 1],
        block: [256, 2, 1],
        start,
        duration,
        correlation_id,
        registers: 32,
        static_shared: 1024,
        dynamic_shared: 512,
        device: 1,
        stream: 14,
        pid: testdata::PID,
    }
}

/// A small export whose activity tables have the given column lists.
fn build(path: &Path, kernel: &[Col], memcpy: &[Col], runtime: &[Col]) {
    let mut db = Db::create(path, Refs::Comment).unwrap();
    db.table(nsys::tables::KERNEL, kernel, Refs::Comment)
        .unwrap();
    db.table(nsys::tables::MEMCPY, memcpy, Refs::Comment)
        .unwrap();
    db.table(nsys::tables::RUNTIME, runtime, Refs::Comment)
        .unwrap();
    for i in 0..3 {
        add_call(
            &mut db,
            &call("cudaLaunchKernel_v7000", 10 + i, 1_000 + i * 100, 20),
        )
        .unwrap();
    }
    add_call(&mut db, &call("cudaMemcpyAsync_v3020", 20, 5_000, 30)).unwrap();
    for i in 0..3 {
        add_kernel(
            &mut db,
            V,
            &reduce_kernel(10 + i, 1_050 + i * 100, 40 + i * 10),
            i,
        )
        .unwrap();
    }
    add_copy(&db, V, &plain_copy(true, 1_000, 5_010, 100, 20)).unwrap();
}

#[test]
fn columns_are_found_by_name_whatever_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let normal = dir.path().join("normal.sqlite");
    let shuffled = dir.path().join("shuffled.sqlite");
    build(
        &normal,
        &testdata::kernel_cols(V),
        &testdata::memcpy_cols(V),
        &testdata::runtime_cols(),
    );
    let rev = |mut v: Vec<Col>| {
        v.reverse();
        v
    };
    // Reversed, and with a column this reader does not know in front.
    let mut k = rev(testdata::kernel_cols(V));
    k.insert(
        0,
        Col {
            name: "futureColumn",
            ty: "TEXT",
            not_null: false,
            refs: None,
            doc: "",
        },
    );
    build(
        &shuffled,
        &k,
        &rev(testdata::memcpy_cols(V)),
        &rev(testdata::runtime_cols()),
    );
    let a = nsys::open(&normal).unwrap();
    let b = nsys::open(&shuffled).unwrap();
    assert_eq!(a.kernels, b.kernels);
    assert_eq!(a.memcpys, b.memcpys);
    assert_eq!(a.api, b.api);
    assert_eq!(a.notes, b.notes);
    // And the values are the right ones, not merely the same ones.
    let k = &b.kernels[1];
    assert_eq!(k.name, "void reduce_v0<(int)256>(int *, int *)");
    assert_eq!(k.grid.to_string(), "128x128x1");
    assert_eq!(k.block.to_string(), "256x2x1");
    assert_eq!((k.device, k.stream), (1, 14));
    assert_eq!(k.span.start_ns, 1_150);
    assert_eq!(k.span.duration_ns, Some(50));
    assert_eq!(k.registers_per_thread, Some(32));
    assert_eq!(k.shared_bytes(), Some(1536));
    assert_eq!(k.correlation_id, Some(11));
    assert_eq!(k.api.as_deref(), Some("cudaLaunchKernel"));
    assert_eq!(b.memcpys[0].bytes, 1_000);
    assert!(close(b.memcpys[0].gb_s().unwrap(), 10.0));
    assert_eq!(b.memcpys[0].api.as_deref(), Some("cudaMemcpyAsync"));
    assert_eq!(b.api.count, 4);
}

/// An export trimmed or post-processed into views (a view of the kernel table under the
/// table's name) reads as the export it shows: its launches, and no finding that they failed.
#[test]
fn an_activity_table_shown_through_a_view_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("view.sqlite");
    build(
        &path,
        &testdata::kernel_cols(V),
        &testdata::memcpy_cols(V),
        &testdata::runtime_cols(),
    );
    let table = nsys::tables::KERNEL;
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "ALTER TABLE {table} RENAME TO kernels_kept; \
         CREATE VIEW {table} AS SELECT * FROM kernels_kept;"
    ))
    .unwrap();
    drop(conn);
    let t = nsys::open(&path).unwrap();
    assert_eq!(t.kernels.len(), 3);
    assert_eq!(t.kernels[1].span.duration_ns, Some(50));
    assert!(
        t.findings
            .iter()
            .all(|f| f.kind != FindingKind::LaunchesFailed),
        "{:?}",
        t.findings
    );
}

fn without(cols: Vec<Col>, name: &str) -> Vec<Col> {
    cols.into_iter().filter(|c| c.name != name).collect()
}

#[test]
fn a_missing_required_column_skips_the_table_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.sqlite");
    // No `start` in the kernel table (the builder writes `start`, so make the table and
    // rows by hand), no `bytes` in the copy table.
    let mut db = Db::create(&p, Refs::Comment).unwrap();
    db.table(
        nsys::tables::KERNEL,
        &without(testdata::kernel_cols(V), "start"),
        Refs::Comment,
    )
    .unwrap();
    db.table(
        nsys::tables::MEMCPY,
        &without(testdata::memcpy_cols(V), "bytes"),
        Refs::Comment,
    )
    .unwrap();
    db.table(
        nsys::tables::RUNTIME,
        &testdata::runtime_cols(),
        Refs::Comment,
    )
    .unwrap();
    add_call(&mut db, &call("cudaLaunchKernel_v7000", 1, 10, 5)).unwrap();
    db.sql("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (end, deviceId, contextId, streamId, demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) VALUES (20, 0, 1, 7, 0, 0, 16, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0, 1);")
        .unwrap();
    drop(db);
    let t = nsys::open(&p).unwrap();
    assert_eq!(t.tables.kernel, TableState::Skipped);
    assert_eq!(t.tables.memcpy, TableState::Skipped);
    assert!(t.kernels.is_empty());
    assert!(has_note(
        &t,
        "CUPTI_ACTIVITY_KIND_KERNEL has no column `start`: table skipped, its kernel launches are not shown"
    ));
    assert!(has_note(
        &t,
        "CUPTI_ACTIVITY_KIND_MEMCPY has no column `bytes`: table skipped"
    ));
    // The runtime table was still read.
    assert_eq!(t.api.count, 1);
    assert!(!t
        .findings
        .iter()
        .any(|f| f.kind == FindingKind::LaunchesFailed));
}

#[test]
fn a_missing_optional_column_leaves_values_unknown_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.sqlite");
    let mut db = Db::create(&p, Refs::Comment).unwrap();
    let kcols = without(
        without(testdata::kernel_cols(V), "correlationId"),
        "registersPerThread",
    );
    db.table(nsys::tables::KERNEL, &kcols, Refs::Comment)
        .unwrap();
    db.table(
        nsys::tables::RUNTIME,
        &without(testdata::runtime_cols(), "returnValue"),
        Refs::Comment,
    )
    .unwrap();
    let name = db.string("cudaLaunchKernel_v7000").unwrap();
    db.insert(
        nsys::tables::RUNTIME,
        &[
            ("start", int(10)),
            ("end", int(15)),
            ("eventClass", int(0)),
            ("correlationId", int(1)),
            ("nameId", int(name)),
        ],
    )
    .unwrap();
    let s = db.string("k(float *)").unwrap();
    db.sql(&format!("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, demangledName, shortName, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) VALUES (12, 30, 0, 1, 7, {s}, {s}, 2, 1, 1, 64, 1, 1, 0, 0, 0, 0, 1);"))
        .unwrap();
    drop(db);
    let t = nsys::open(&p).unwrap();
    assert_eq!(t.kernels.len(), 1);
    let k = &t.kernels[0];
    assert_eq!(k.name, "k(float *)");
    assert_eq!(k.correlation_id, None);
    assert_eq!(k.registers_per_thread, None);
    assert_eq!(k.api, None);
    assert_eq!(k.span.duration_ns, Some(18));
    assert!(has_note(
        &t,
        "CUPTI_ACTIVITY_KIND_KERNEL has no column `correlationId`: launching API calls unknown"
    ));
    assert!(has_note(
        &t,
        "CUPTI_ACTIVITY_KIND_KERNEL has no column `registersPerThread`"
    ));
    assert!(has_note(
        &t,
        "CUPTI_ACTIVITY_KIND_RUNTIME has no column `returnValue`: API errors cannot be detected"
    ));
    assert!(has_note(&t, "1 of 1 kernel launches have no API call"));
}

/// An export with one kernel whose name ids are given (None = NULL), ids 0..=2 being
/// demangled, short and mangled names in StringIds.
fn kernel_with_name_ids(dir: &Path, ids: [Option<i64>; 3]) -> nsys::Trace {
    let p = dir.join(format!("names-{ids:?}.sqlite").replace([' ', '(', ')', ',', '[', ']'], "_"));
    let mut db = Db::create(&p, Refs::Comment).unwrap();
    db.string("void scale<float>(float *, float, int)").unwrap();
    db.string("scale").unwrap();
    db.string("_Z5scaleIfEvPT_S0_i").unwrap();
    db.table(
        nsys::tables::KERNEL,
        &testdata::kernel_cols(V),
        Refs::Comment,
    )
    .unwrap();
    let v = |o: Option<i64>| o.map(int).unwrap_or_else(null);
    db.insert(
        nsys::tables::KERNEL,
        &[
            ("start", int(100)),
            ("end", int(250)),
            ("deviceId", int(0)),
            ("contextId", int(1)),
            ("streamId", int(7)),
            ("demangledName", v(ids[0])),
            ("shortName", v(ids[1])),
            ("mangledName", v(ids[2])),
            ("registersPerThread", int(10)),
            ("gridX", int(1)),
            ("gridY", int(1)),
            ("gridZ", int(1)),
            ("blockX", int(32)),
            ("blockY", int(1)),
            ("blockZ", int(1)),
            ("staticSharedMemory", int(0)),
            ("dynamicSharedMemory", int(0)),
            ("localMemoryPerThread", int(0)),
            ("localMemoryTotal", int(0)),
            ("gridId", int(1)),
        ],
    )
    .unwrap();
    drop(db);
    nsys::open(&p).unwrap()
}

#[test]
fn kernel_names_resolve_through_string_ids_with_fallbacks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let t = kernel_with_name_ids(d, [Some(0), Some(1), Some(2)]);
    assert_eq!(t.kernels[0].name, "void scale<float>(float *, float, int)");
    assert_eq!(t.kernels[0].short_name.as_deref(), Some("scale"));
    assert_eq!(
        t.kernels[0].mangled_name.as_deref(),
        Some("_Z5scaleIfEvPT_S0_i")
    );
    assert!(!has_note(&t, "does not resolve"));

    // NULL mangledName.
    let t = kernel_with_name_ids(d, [Some(0), Some(1), None]);
    assert_eq!(t.kernels[0].name, "void scale<float>(float *, float, int)");
    assert_eq!(t.kernels[0].mangled_name, None);
    assert!(t.notes.iter().all(|n| !n.contains("NULL")), "{:?}", t.notes);

    // demangledName missing from StringIds -> shortName.
    let t = kernel_with_name_ids(d, [Some(99), Some(1), Some(2)]);
    assert_eq!(t.kernels[0].name, "scale");
    assert!(has_note(
        &t,
        "1 rows whose demangledName does not resolve through StringIds"
    ));
    // ... and shortName too -> mangledName.
    let t = kernel_with_name_ids(d, [Some(99), Some(98), Some(2)]);
    assert_eq!(t.kernels[0].name, "_Z5scaleIfEvPT_S0_i");
    // Nothing resolves -> the demangled id.
    let t = kernel_with_name_ids(d, [Some(99), Some(98), None]);
    assert_eq!(t.kernels[0].name, "<string id 99>");
    assert_eq!(t.kernels[0].span.duration_ns, Some(150));
}

#[test]
fn nulls_in_not_null_columns_read_as_unknown_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.sqlite");
    let mut db = Db::create(&p, Refs::Comment).unwrap();
    // A kernel table declared without NOT NULL (as D1 says older exports might).
    let cols: Vec<Col> = testdata::kernel_cols(V)
        .into_iter()
        .map(|c| Col {
            not_null: false,
            ..c
        })
        .collect();
    db.table(nsys::tables::KERNEL, &cols, Refs::Comment)
        .unwrap();
    let s = db.string("k").unwrap();
    db.insert(
        nsys::tables::KERNEL,
        &[
            ("start", null()),
            ("end", int(500)),
            ("deviceId", int(0)),
            ("streamId", int(7)),
            ("demangledName", int(s)),
            ("shortName", int(s)),
            ("gridX", null()),
            ("gridY", int(1)),
            ("gridZ", int(1)),
            ("blockX", int(64)),
            ("blockY", int(1)),
            ("blockZ", int(1)),
        ],
    )
    .unwrap();
    drop(db);
    let t = nsys::open(&p).unwrap();
    let k = &t.kernels[0];
    assert_eq!(k.span.duration_ns, None, "a NULL start is not a start of 0");
    assert_eq!(k.grid.to_string(), "0x1x1");
    assert_eq!(k.registers_per_thread, None);
    assert_eq!(k.shared_bytes(), None);
    assert!(has_note(
        &t,
        "CUPTI_ACTIVITY_KIND_KERNEL: 2 NULL, non-integer or negative values in `gridX`, `start` read as 0 or unknown"
    ));
}

#[test]
fn enum_tables_are_used_when_present_and_built_in_labels_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.sqlite");
    let mut db = Db::create(&p, Refs::Comment).unwrap();
    db.table(
        nsys::tables::MEMCPY,
        &testdata::memcpy_cols(V),
        Refs::Comment,
    )
    .unwrap();
    add_copy(&db, V, &plain_copy(true, 100, 10, 10, 0)).unwrap();
    add_copy(
        &db,
        V,
        &testdata::Copy {
            copy_kind: 42,
            src_kind: 9,
            ..plain_copy(true, 100, 30, 10, 0)
        },
    )
    .unwrap();
    let _ = db.string("unused").unwrap();
    drop(db);
    let t = nsys::open(&p).unwrap();
    assert_eq!(t.memcpys[0].direction, "Host-to-Device");
    assert_eq!(t.memcpys[0].src_kind.as_deref(), Some("Pageable"));
    assert_eq!(t.memcpys[1].direction, "copy kind 42");
    assert_eq!(t.memcpys[1].src_kind.as_deref(), Some("memory kind 9"));
    assert!(has_note(&t, "no ENUM_CUDA_MEMCPY_OPER table"));

    // With the export's own tables, their labels win (even where they differ from the
    // built-in ones); ids they lack fall back to the built-in labels.
    let c = Connection::open(&p).unwrap();
    c.execute_batch(
        "CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT NOT NULL);
         INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (42, 'CUDA_MEMCPY_KIND_FUTURE', 'Future copy');
         CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT NOT NULL);
         INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable (from the export)');",
    )
    .unwrap();
    drop(c);
    let t = nsys::open(&p).unwrap();
    assert_eq!(t.memcpys[1].direction, "Future copy");
    assert_eq!(t.memcpys[0].direction, "Host-to-Device");
    assert_eq!(
        t.memcpys[0].src_kind.as_deref(),
        Some("Pageable (from the export)")
    );
    assert_eq!(t.memcpys[0].dst_kind.as_deref(), Some("Device"));
    assert!(!has_note(&t, "ENUM_CUDA_MEMCPY_OPER"), "{:?}", t.notes);
}

#[test]
fn runtime_rows_dedupe_by_correlation_id_in_any_order_and_without_event_class() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.sqlite");
    let mut db = Db::create(&p, Refs::Comment).unwrap();
    db.table(
        nsys::tables::RUNTIME,
        &testdata::runtime_cols(),
        Refs::Comment,
    )
    .unwrap();
    // The class-67 row after the runtime row this time, and one with an error.
    add_call(&mut db, &call("cudaMalloc_v3020", 1, 100, 10)).unwrap();
    add_call(
        &mut db,
        &testdata::Call {
            event_class: 67,
            start: 99,
            ..call("cudaMalloc", 1, 100, 12)
        },
    )
    .unwrap();
    add_call(
        &mut db,
        &testdata::Call {
            return_value: 2,
            ..call("cudaMalloc_v3020", 2, 200, 10)
        },
    )
    .unwrap();
    // The class-67 row first: the runtime row that follows replaces it, with its error.
    add_call(
        &mut db,
        &testdata::Call {
            event_class: 67,
            ..call("cudaFree", 3, 400, 12)
        },
    )
    .unwrap();
    add_call(
        &mut db,
        &testdata::Call {
            return_value: 1,
            ..call("cudaFree_v3020", 3, 401, 10)
        },
    )
    .unwrap();
    // Rows without a correlationId (NULL) each count.
    db.sql("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, nameId, returnValue) VALUES (300, 310, 0, 0, 0), (320, 330, 0, 0, 0);")
        .unwrap();
    drop(db);
    let t = nsys::open(&p).unwrap();
    assert_eq!((t.api.count, t.api.rows), (5, 7));
    let errors: Vec<(&str, i64, Option<i64>)> = t
        .api
        .errors
        .iter()
        .map(|e| (e.name.as_str(), e.return_value, e.start_ns))
        .collect();
    assert_eq!(
        errors,
        [("cudaMalloc", 2, Some(200)), ("cudaFree", 1, Some(401))]
    );
    let f = t
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::ApiErrors)
        .unwrap();
    assert_eq!(
        f.text,
        "2 API calls returned an error (first: cudaMalloc returned 2)"
    );
    assert!(has_note(
        &t,
        "2 rows repeat the correlationId of another call (eventClass 67)"
    ));

    // The same table without eventClass.
    let c = Connection::open(&p).unwrap();
    c.execute_batch("ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME DROP COLUMN eventClass;")
        .unwrap();
    drop(c);
    let t = nsys::open(&p).unwrap();
    assert_eq!((t.api.count, t.api.rows), (5, 7));
    assert!(has_note(&t, "has no column `eventClass`"));
}

#[test]
fn reversed_timestamps_are_a_finding_and_give_no_duration() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.sqlite");
    let mut db = Db::create(&p, Refs::Comment).unwrap();
    db.table(
        nsys::tables::KERNEL,
        &testdata::kernel_cols(V),
        Refs::Comment,
    )
    .unwrap();
    add_kernel(&mut db, V, &reduce_kernel(1, 500, -100), 1).unwrap();
    add_kernel(&mut db, V, &reduce_kernel(2, 900, 100), 2).unwrap();
    drop(db);
    let t = nsys::open(&p).unwrap();
    assert_eq!(t.kernels[0].span.duration_ns, None);
    assert_eq!(t.kernels[1].span.duration_ns, Some(100));
    assert_eq!(
        t.findings[0].text,
        "1 of 2 kernel launches ends before it starts: duration unknown, left out of the statistics"
    );
}

#[test]
fn an_export_without_metadata_has_an_unknown_version() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.sqlite");
    let mut db = Db::create(&p, Refs::Comment).unwrap();
    db.string("x").unwrap();
    drop(db);
    let t = nsys::open(&p).unwrap();
    assert_eq!(t.version.to_string(), "nsys unknown, schema unknown");
    assert!(has_note(
        &t,
        "no META_DATA_EXPORT or EXPORT_META_DATA table: export version unknown"
    ));
    assert_eq!(t.tables.kernel, TableState::Missing);
    assert!(t.findings.is_empty());
}

// ---- files that are not exports ----

fn err(p: &Path) -> NsysError {
    match nsys::open(p) {
        Ok(_) => panic!("{} opened", p.display()),
        Err(e) => e,
    }
}

#[test]
fn a_missing_file_or_a_directory_is_a_clean_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.sqlite");
    let e = err(&missing);
    assert!(matches!(e, NsysError::NotFound { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("{}: no such file", missing.display())
    );
    assert!(!missing.exists(), "opening must not create the file");

    let e = err(dir.path());
    assert!(matches!(e, NsysError::IsDirectory { .. }), "{e:?}");
    assert!(e.to_string().starts_with(&dir.path().display().to_string()));
}

#[test]
fn a_file_that_is_not_sqlite_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("report.nsys-rep");
    std::fs::write(&text, "this is a report, not a database\n".repeat(200)).unwrap();
    let e = err(&text);
    assert!(matches!(e, NsysError::NotSqlite { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not an SQLite database (make one with `nsys export --type sqlite REPORT.nsys-rep`)",
            text.display()
        )
    );
    let short = dir.path().join("short.sqlite");
    std::fs::write(&short, b"SQLite").unwrap();
    assert!(matches!(err(&short), NsysError::NotSqlite { .. }));
    let binary = dir.path().join("bin.sqlite");
    std::fs::write(
        &binary,
        (0..8192u32)
            .map(|i| (i * 7 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(matches!(err(&binary), NsysError::NotSqlite { .. }));
}

#[test]
fn an_empty_file_or_an_unrelated_database_is_not_an_nsys_export() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let e = err(&empty);
    assert!(matches!(e, NsysError::NotNsys { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not an Nsight Systems export (no StringIds / CUPTI tables)",
            empty.display()
        )
    );
    assert_eq!(
        std::fs::metadata(&empty).unwrap().len(),
        0,
        "left as it was"
    );

    let other = dir.path().join("other.sqlite");
    let c = Connection::open(&other).unwrap();
    c.execute_batch("CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('x');")
        .unwrap();
    drop(c);
    assert!(matches!(err(&other), NsysError::NotNsys { .. }));
}

#[test]
fn opening_writes_nothing_beside_the_export() {
    let (dir, path) = write(REDUCE);
    let before = std::fs::read(&path).unwrap();
    let names = names_in(dir.path());
    let t = nsys::open(&path).unwrap();
    assert_eq!(t.kernels.len(), 8);
    assert_eq!(names_in(dir.path()), names);
    assert_eq!(std::fs::read(&path).unwrap(), before);

    // Even for an export left in WAL mode.
    let c = Connection::open(&path).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(c);
    let names = names_in(dir.path());
    nsys::open(&path).unwrap();
    assert_eq!(names_in(dir.path()), names);
}

#[test]
fn paths_with_uri_characters_open() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("a dir?x=1#frag%20");
    std::fs::create_dir(&odd).unwrap();
    let p = odd.join("rep ort?.sqlite");
    (testdata::FIXTURES[2].build)(&p).unwrap();
    let t = nsys::open(&p).unwrap();
    assert_eq!(t.kernels.len(), 6);
    assert_eq!(t.path, p);
    assert_eq!(names_in(&odd), ["rep ort?.sqlite"]);
}

#[test]
fn correlation_ids_are_per_process() {
    // Two processes (an MPI job) that both number their calls from 1.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("mpi.sqlite");
    let mut db = Db::create(&p, Refs::Comment).unwrap();
    db.table(
        nsys::tables::KERNEL,
        &testdata::kernel_cols(V),
        Refs::Comment,
    )
    .unwrap();
    db.table(
        nsys::tables::MEMCPY,
        &testdata::memcpy_cols(V),
        Refs::Comment,
    )
    .unwrap();
    db.table(
        nsys::tables::RUNTIME,
        &testdata::runtime_cols(),
        Refs::Comment,
    )
    .unwrap();
    let in_pid = |pid, c: testdata::Call<'static>| testdata::Call { pid, ..c };
    for c in [
        in_pid(100, call("cudaMalloc_v3020", 1, 10, 5)),
        in_pid(100, call("cudaLaunchKernel_v7000", 2, 20, 5)),
        in_pid(200, call("cudaMalloc_v3020", 1, 12, 5)),
        in_pid(200, call("cudaMemcpyAsync_v3020", 2, 22, 5)),
    ] {
        add_call(&mut db, &c).unwrap();
    }
    add_kernel(
        &mut db,
        V,
        &Kernel {
            pid: 100,
            ..reduce_kernel(2, 30, 10)
        },
        1,
    )
    .unwrap();
    add_copy(
        &db,
        V,
        &testdata::Copy {
            pid: 200,
            ..plain_copy(true, 64, 32, 8, 2)
        },
    )
    .unwrap();
    drop(db);
    let t = nsys::open(&p).unwrap();
    assert_eq!((t.api.count, t.api.rows), (4, 4), "{:?}", t.notes);
    assert_eq!(t.kernels[0].pid, Some(100));
    assert_eq!(t.kernels[0].api.as_deref(), Some("cudaLaunchKernel"));
    assert_eq!(t.memcpys[0].pid, Some(200));
    assert_eq!(t.memcpys[0].api.as_deref(), Some("cudaMemcpyAsync"));
    assert!(!has_note(&t, "repeat the correlationId"));

    // Without globalPid on the activity rows, an id two processes share names no call.
    let c = Connection::open(&p).unwrap();
    c.execute_batch(
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN globalPid;
         ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN globalPid;",
    )
    .unwrap();
    drop(c);
    let t = nsys::open(&p).unwrap();
    assert_eq!(t.kernels[0].pid, None);
    assert_eq!(t.kernels[0].api, None);
    assert_eq!(t.memcpys[0].api, None);
}

#[test]
fn extreme_values_do_not_overflow() {
    let (_d, path) = write(TRANSPOSE32);
    let c = Connection::open(&path).unwrap();
    c.execute_batch(&format!(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 0, \"end\" = {max}, staticSharedMemory = {max}, dynamicSharedMemory = {max};
         UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET start = 0, \"end\" = {max};",
        max = i64::MAX
    ))
    .unwrap();
    drop(c);
    let t = nsys::open(&path).unwrap();
    assert!(t.kernels.len() > 1);
    assert!(t.kernels.iter().all(|k| k.shared_bytes().is_none()));
    let s = nsys::summarize(&t.kernels);
    let big = i64::MAX as u64;
    for k in &s {
        let want = (0..k.timed).fold(0u64, |a, _| a.saturating_add(big));
        assert_eq!((k.max_ns, k.total_ns), (Some(big), want), "{}", k.name);
    }
    assert!(
        s.iter().any(|k| k.timed >= 2),
        "a sum of two near-max durations"
    );
    let rates = nsys::Rates {
        bytes_moved: Some(u64::MAX),
        peak_gbs: Some(1.0),
    };
    let _ = nsys::render::text(&t, &rates);
}
