//! One test per export version: the values read from each synthetic export, checked
//! against the rows the builder wrote (see `klab_tools::nsys::testdata`).

mod nsys_fixtures;

use klab_tools::nsys::{self, testdata, FindingKind, Rates, TableState};
use nsys_fixtures::*;
use rusqlite::Connection;

/// Column names of a table in a built file, in order.
fn columns(path: &std::path::Path, table: &str) -> Vec<String> {
    let c = Connection::open(path).unwrap();
    let mut s = c.prepare("SELECT name FROM pragma_table_info(?1)").unwrap();
    s.query_map([table], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn the_fixtures_have_the_documented_layouts() {
    let (_d, a) = write(UM_ADD);
    let (_d2, b) = write(SAXPY);
    let (_d3, c) = write(TRANSPOSE32);
    let (_d4, d) = write(REDUCE);
    let k = nsys::tables::KERNEL;
    let m = nsys::tables::MEMCPY;
    assert_eq!(columns(&a, k).len(), 27);
    assert_eq!(columns(&a, m).len(), 19);
    assert_eq!(columns(&c, k).len(), 28);
    assert_eq!(columns(&c, k)[4], "greenContextId");
    assert_eq!(columns(&c, m)[4], "greenContextId");
    assert_eq!(columns(&c, m).len(), 20);
    assert_eq!(columns(&d, k).len(), 39);
    assert_eq!(columns(&d, m).len(), 21);
    assert_eq!(columns(&d, m)[20], "copyCount");
    assert_eq!(columns(&b, nsys::tables::RUNTIME).last().unwrap(), "name");
    assert_eq!(columns(&b, m).last().unwrap(), "name");
    assert_eq!(columns(&b, nsys::tables::RUNTIME).len(), 9);
    assert_eq!(columns(&a, "TARGET_INFO_GPU").len(), 41);
    // 2022.2 writes REFERENCES as constraints, the others as comments.
    let ddl = |p: &std::path::Path| -> String {
        Connection::open(p)
            .unwrap()
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert!(ddl(&b)
        .contains("shortName                       INTEGER NOT NULL REFERENCES StringIds(id),"));
    assert!(ddl(&d).contains("shortName                       INTEGER NOT NULL, -- REFERENCES StringIds(id) -- Base kernel function name"));
    // No ENUM tables in schema 2.9.1.
    for p in [&a, &b] {
        let n: i64 = Connection::open(p)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name LIKE 'ENUM_%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0);
    }
}

#[test]
fn nsys_2022_1_lazy_unified_memory() {
    let (_d, t) = open(UM_ADD);
    assert_eq!(t.version.table.as_deref(), Some("EXPORT_META_DATA"));
    assert_eq!(t.version.product.as_deref(), Some("2022.1.3.3"));
    assert_eq!(t.version.schema.as_deref(), Some("2.9.1"));
    assert_eq!(t.version.lazy, Some(true));
    assert_eq!(
        t.version.to_string(),
        "nsys 2022.1.3.3, schema 2.9.1, lazy export"
    );

    assert_eq!(t.kernels.len(), 1);
    let k = &t.kernels[0];
    assert_eq!(k.name, "add(int, float *, float *)");
    assert_eq!(k.short_name.as_deref(), Some("add"));
    assert_eq!(k.mangled_name.as_deref(), Some("_Z3addiPfS_"));
    assert_eq!(k.grid.to_string(), "4096x1x1");
    assert_eq!(k.block.to_string(), "256x1x1");
    assert_eq!(k.span.duration_ns, Some(2_500_000));
    assert_eq!(k.registers_per_thread, Some(18));
    assert_eq!(k.shared_bytes(), Some(0));
    assert_eq!(k.stream, 7);
    assert_eq!(k.api.as_deref(), Some("cudaLaunchKernel"));
    assert_eq!(k.pid, Some(testdata::PID));

    // Unified-memory migrations, labelled without ENUM tables.
    let dirs: Vec<&str> = t.memcpys.iter().map(|m| m.direction.as_str()).collect();
    assert_eq!(
        dirs,
        [
            "Unified Host-to-Device",
            "Unified Host-to-Device",
            "Unified Device-to-Host"
        ]
    );
    for m in &t.memcpys {
        assert_eq!(m.src_kind.as_deref(), Some("Unknown"));
        assert_eq!(m.dst_kind.as_deref(), Some("Unknown"));
        assert_eq!(m.correlation_id, Some(0));
        assert_eq!(m.stream, 0);
        assert_eq!(m.api, None, "a migration joins to no API call");
    }
    let rates: Vec<f64> = t.memcpys.iter().map(|m| m.gb_s().unwrap()).collect();
    assert!(close(rates[0], 6.4) && close(rates[1], 8.0) && close(rates[2], 2.0));

    assert_eq!(t.tables.memset, TableState::Missing);
    assert_eq!(t.tables.kernel, TableState::Read(1));
    assert_eq!(t.api.count, 6);
    assert!(t.api.errors.is_empty());
    // The two Host-to-Device migrations fall inside the kernel, the Device-to-Host one
    // after it; none of it is counted as copy time.
    assert_eq!(t.findings.len(), 1, "{:?}", t.findings);
    assert_eq!(t.findings[0].kind, FindingKind::UnifiedMemory);
    assert_eq!(
        t.findings[0].text,
        "3 unified-memory migrations (2 Host-to-Device, 1 Device-to-Host; 1.12 MB) took 143.4 us of wall-clock time: 141.3 us while kernels ran (demand paging inside kernel time, not time added to it), 2.0 us outside kernels"
    );
    assert!(has_note(
        &t,
        "no CUPTI_ACTIVITY_KIND_MEMSET table: treated as zero memory sets"
    ));
    assert!(has_note(
        &t,
        "no ENUM_CUDA_MEMCPY_OPER table: built-in copy kind labels used"
    ));
    assert!(has_note(
        &t,
        "no ENUM_CUDA_MEM_KIND table: built-in memory kind labels used"
    ));
    assert_eq!(t.gpus.len(), 1);
    assert_eq!(t.gpus[0].name.as_deref(), Some("Tesla T4"));
    assert!(close(t.gpus[0].memory_bandwidth_gbs.unwrap(), 320.064));
}

#[test]
fn nsys_2022_2_event_class_67_duplicates_are_not_double_counted() {
    let (_d, path) = write(SAXPY);
    // The trap is really there: a naive join gives 10 rows for 5 kernels.
    let naive: i64 = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON k.correlationId = r.correlationId",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(naive, 10);

    let t = nsys::open(&path).unwrap();
    assert_eq!(t.version.product.as_deref(), Some("2022.2.1.31"));
    assert_eq!(t.version.lazy, Some(false));
    assert_eq!(t.kernels.len(), 5);
    for (i, k) in t.kernels.iter().enumerate() {
        assert_eq!(k.name, "saxpy(double *, double *, double *, double, int)");
        assert_eq!(k.mangled_name.as_deref(), Some("_Z5saxpyPdS_S_di"));
        assert_eq!(k.grid.to_string(), "3907x1x1");
        assert_eq!(k.block.to_string(), "256x1x1");
        assert_eq!(k.correlation_id, Some(6 + i as i64));
        assert_eq!(k.api.as_deref(), Some("cudaLaunchKernel"));
    }
    let d: Vec<u64> = t
        .kernels
        .iter()
        .map(|k| k.span.duration_ns.unwrap())
        .collect();
    assert_eq!(d, [21_000, 20_500, 20_480, 20_600, 20_450]);
    // 14 calls in 25 rows: the 11 eventClass 67 rows are not calls of their own.
    assert_eq!(t.api.rows, 25);
    assert_eq!(t.api.count, 14);
    assert!(
        has_note(
            &t,
            "11 rows repeat the correlationId of another call (eventClass 67)"
        ),
        "{:?}",
        t.notes
    );
    // Copies: ordinary memory, labelled without ENUM tables; the API name is the
    // suffix-stripped runtime name, not the class-67 row's.
    assert_eq!(t.memcpys.len(), 3);
    let m = &t.memcpys[0];
    assert_eq!(m.direction, "Host-to-Device");
    assert_eq!(m.src_kind.as_deref(), Some("Pageable"));
    assert_eq!(m.dst_kind.as_deref(), Some("Device"));
    assert_eq!(m.bytes, 8_000_000);
    assert!(close(m.gb_s().unwrap(), 12.5));
    assert_eq!(m.api.as_deref(), Some("cudaMemcpy"));
    assert_eq!(t.memcpys[2].direction, "Device-to-Host");
    assert!(close(t.memcpys[2].gb_s().unwrap(), 12.8));
    // The empty MEMSET table of a non-lazy export is zero rows, not missing.
    assert_eq!(t.tables.memset, TableState::Read(0));
    assert!(!has_note(&t, "no CUPTI_ACTIVITY_KIND_MEMSET"));
    // 2.065 ms of copies against 103.03 us of kernels.
    assert_eq!(t.findings.len(), 1, "{:?}", t.findings);
    assert_eq!(t.findings[0].kind, FindingKind::CopiesDominate);
    assert_eq!(
        t.findings[0].text,
        "memory copies took 2.06 ms of wall-clock time, 20.0x the 103.0 us of kernel time"
    );
}

#[test]
fn nsys_2024_5_transpose_matches_the_seed_numbers() {
    let (_d, t) = open(TRANSPOSE32);
    assert_eq!(t.version.table.as_deref(), Some("META_DATA_EXPORT"));
    assert_eq!(t.version.product.as_deref(), Some("2024.5.1.113"));
    assert_eq!(t.version.schema.as_deref(), Some("3.13.2"));
    // Every table and ENUM table is there: nothing to note.
    assert!(t.notes.is_empty(), "{:?}", t.notes);

    let names: Vec<&str> = t.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mat_copy(const int *, int *, int)",
            "mat_transpose_unshared(const int *, int *, int)",
            "mat_transpose_shared(const int *, int *, int)",
            "mat_copy(const int *, int *, int)",
            "mat_transpose_unshared(const int *, int *, int)",
            "mat_transpose_shared(const int *, int *, int)",
        ]
    );
    for k in &t.kernels {
        assert_eq!(k.grid.to_string(), "32x32x1");
        assert_eq!(k.block.to_string(), "32x32x1");
        assert_eq!(k.api.as_deref(), Some("cudaLaunchKernel"));
    }
    assert_eq!(t.kernels[2].shared_bytes(), Some(4096));
    assert_eq!(t.kernels[2].registers_per_thread, Some(18));

    // The seed's table: 8 MB moved, 6.56 us -> 1219.5 GB/s, 59.8% of 2039 GB/s.
    let rates = Rates {
        bytes_moved: Some(8_000_000),
        peak_gbs: Some(2039.0),
    };
    let copy = &t.kernels[3];
    assert_eq!(copy.span.duration_ns, Some(6_560));
    let g = rates.gb_s(copy.span.duration_ns).unwrap();
    assert_eq!(format!("{g:.1}"), "1219.5");
    assert_eq!(
        format!("{:.1}", rates.pct_of_peak(Some(g)).unwrap()),
        "59.8"
    );
    let naive = rates.gb_s(t.kernels[4].span.duration_ns).unwrap();
    assert_eq!(format!("{naive:.0}"), "232");

    let s = t.summary();
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].name, "mat_copy(const int *, int *, int)");
    assert_eq!(
        (s[0].launches, s[0].timed, s[0].min_ns, s[0].max_ns),
        (2, 2, Some(6_560), Some(7_210))
    );
    assert_eq!(s[0].median_ns, Some(6_885.0));
    assert_eq!(s[2].median_ns, Some(13_165.0));

    // Copies and the memset, labelled through the export's ENUM tables.
    assert_eq!(t.memcpys.len(), 2);
    assert_eq!(t.memcpys[0].direction, "Host-to-Device");
    assert_eq!(format!("{:.1}", t.memcpys[0].gb_s().unwrap()), "12.1");
    assert_eq!(t.memcpys[1].direction, "Device-to-Host");
    assert_eq!(format!("{:.1}", t.memcpys[1].gb_s().unwrap()), "12.3");
    assert_eq!(t.memsets.len(), 1);
    let ms = &t.memsets[0];
    assert_eq!(ms.bytes, 4_000_000);
    assert_eq!(ms.value, Some(0));
    assert_eq!(ms.mem_kind.as_deref(), Some("Device"));
    assert!(close(ms.gb_s().unwrap(), 200.0));
    assert_eq!(ms.api.as_deref(), Some("cudaMemset"));

    assert_eq!(t.api.count, 13);
    assert_eq!(t.findings.len(), 1);
    assert_eq!(
        t.findings[0].text,
        "memory copies took 656.0 us of wall-clock time, 6.0x the 109.7 us of kernel time"
    );
    assert_eq!(t.gpus[0].name.as_deref(), Some("NVIDIA A100-SXM-64GB"));
    assert!(close(t.gpus[0].memory_bandwidth_gbs.unwrap(), 2039.0));
}

#[test]
fn nsys_2026_1_new_columns_api_errors_and_missing_timestamps() {
    let (_d, t) = open(REDUCE);
    assert_eq!(t.version.product.as_deref(), Some("2026.1.1.204"));
    assert_eq!(t.version.schema.as_deref(), Some("3.24.14"));
    assert_eq!(t.kernels.len(), 8);

    // The launch without timestamps sorts last and has no duration.
    let none = &t.kernels[7];
    assert_eq!((none.span.start_ns, none.span.end_ns), (0, 0));
    assert_eq!(none.span.duration_ns, None);
    assert_eq!(none.name, "void reduce_v1<(int)256>(int *, int *)");

    // extern "C": NULL mangledName.
    let init = t.kernels.iter().find(|k| k.name == "init_data").unwrap();
    assert_eq!(init.mangled_name, None);
    assert_eq!(init.short_name.as_deref(), Some("init_data"));
    assert_eq!(init.grid.to_string(), "65536x1x1");

    let v0 = t
        .kernels
        .iter()
        .find(|k| k.name == "void reduce_v0<(int)256>(int *, int *)")
        .unwrap();
    assert_eq!(v0.short_name.as_deref(), Some("reduce_v0"));
    assert_eq!(
        v0.mangled_name.as_deref(),
        Some("_Z9reduce_v0ILi256EEvPiS0_")
    );
    assert_eq!(v0.grid.to_string(), "16384x1x1");
    assert_eq!(v0.block.to_string(), "256x1x1");
    assert_eq!(v0.stream, 13);
    assert_eq!(v0.shared_bytes(), Some(1024));
    assert!(t
        .kernels
        .iter()
        .all(|k| k.api.as_deref() == Some("cudaLaunchKernel")));

    // Summary: even count -> mean of the middle two; untimed launches are counted but
    // left out of the statistics.
    let s = t.summary();
    let r0 = s.iter().find(|s| s.name.contains("reduce_v0")).unwrap();
    assert_eq!((r0.launches, r0.timed), (4, 4));
    assert_eq!(
        (r0.min_ns, r0.median_ns, r0.max_ns),
        (Some(96_000), Some(102_000.0), Some(120_000))
    );
    let r1 = s.iter().find(|s| s.name.contains("reduce_v1")).unwrap();
    assert_eq!((r1.launches, r1.timed), (3, 2));
    assert_eq!(r1.median_ns, Some(59_000.0));
    let rates = Rates {
        bytes_moved: Some(16_777_216),
        peak_gbs: None,
    };
    assert_eq!(
        format!("{:.1}", rates.gb_s_at(r0.median_ns).unwrap()),
        "164.5"
    );

    // 18 calls, two driver calls among them, two errors.
    assert_eq!((t.api.count, t.api.rows), (18, 18));
    assert_eq!(t.api.errors.len(), 2);
    assert_eq!(t.api.errors[0].name, "cudaLaunchKernel");
    assert_eq!(t.api.errors[0].return_value, 9);
    assert_eq!(t.api.errors[1].name, "cudaGetLastError");

    let texts: Vec<&str> = t.findings.iter().map(|f| f.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "2 API calls returned an error (first: cudaLaunchKernel returned 9)",
            "1 of 8 kernel launches has no timestamps (start = end = 0): duration unknown, left out of the statistics",
            "memory copies took 1.05 ms of wall-clock time, 1.8x the 578.0 us of kernel time",
        ]
    );

    // copyCount is ignored; labels from the ENUM tables.
    let m: Vec<(String, String, String)> = t
        .memcpys
        .iter()
        .map(|m| {
            (
                m.direction.clone(),
                format!(
                    "{} -> {}",
                    m.src_kind.clone().unwrap(),
                    m.dst_kind.clone().unwrap()
                ),
                format!("{:.1}", m.gb_s().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        m,
        [
            (
                "Host-to-Device".into(),
                "Pageable -> Device".into(),
                "16.0".into()
            ),
            (
                "Device-to-Device".into(),
                "Device -> Device".into(),
                "1000.0".into()
            ),
            (
                "Device-to-Host".into(),
                "Device -> Pinned".into(),
                "4.0".into()
            ),
        ]
    );

    // TARGET_INFO_CUDA_DEVICE maps GPU id 1 to CUDA device 0.
    assert_eq!(t.gpus.len(), 1);
    assert_eq!(t.gpus[0].cuda_device, Some(0));
    assert_eq!(t.gpus[0].name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(t.gpus[0].sm_count, Some(132));
    assert!(has_note(&t, "no CUPTI_ACTIVITY_KIND_MEMSET table"));
}

#[test]
fn seed_004_failed_launches_are_a_finding() {
    let (_d, t) = open(FAILED64);
    assert_eq!(t.tables.kernel, TableState::Missing);
    assert!(t.kernels.is_empty());
    assert_eq!(t.api.count, 15);
    assert_eq!(t.findings[0].kind, FindingKind::LaunchesFailed);
    assert_eq!(
        t.findings[0].text,
        "15 runtime API calls and zero kernels: launches failed"
    );
    assert_eq!(t.findings.len(), 1, "{:?}", t.findings);
    assert!(has_note(
        &t,
        "no CUPTI_ACTIVITY_KIND_KERNEL table: treated as zero kernel launches"
    ));
    // The copies still ran and are still reported.
    assert_eq!(t.memcpys.len(), 2);
    assert_eq!(t.memcpys[0].api.as_deref(), Some("cudaMemcpy"));
}

#[test]
fn an_empty_kernel_table_is_zero_kernels_too_but_a_skipped_one_is_not() {
    let (_d, path) = write(FAILED64);
    let c = Connection::open(&path).unwrap();
    c.execute_batch(&testdata::create_table_sql(
        nsys::tables::KERNEL,
        &testdata::kernel_cols(testdata::Version::V2024_5),
        testdata::Refs::Comment,
    ))
    .unwrap();
    drop(c);
    let t = nsys::open(&path).unwrap();
    assert_eq!(t.tables.kernel, TableState::Read(0));
    assert_eq!(
        t.findings[0].text,
        "15 runtime API calls and zero kernels: launches failed"
    );

    // A kernel table this reader cannot read says nothing about launches.
    let c = Connection::open(&path).unwrap();
    c.execute_batch("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (stop INTEGER, demangledName INTEGER);")
        .unwrap();
    drop(c);
    let t = nsys::open(&path).unwrap();
    assert_eq!(t.tables.kernel, TableState::Skipped);
    assert!(t
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::LaunchesFailed));
    assert!(has_note(
        &t,
        "CUPTI_ACTIVITY_KIND_KERNEL has no column `start`: table skipped"
    ));

    // No API calls and no kernels: nothing to say about launches.
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME;",
    )
    .unwrap();
    drop(c);
    let t = nsys::open(&path).unwrap();
    assert_eq!(t.api.count, 0);
    assert!(t.findings.is_empty(), "{:?}", t.findings);
}

#[test]
fn one_api_call_is_singular() {
    let (_d, path) = write(FAILED64);
    let c = Connection::open(&path).unwrap();
    // Keep one call, a launch (correlationId 7 is cudaLaunchKernel).
    c.execute_batch("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId != 7;")
        .unwrap();
    drop(c);
    let t = nsys::open(&path).unwrap();
    assert_eq!(
        t.findings[0].text,
        "1 runtime API call and zero kernels: launches failed"
    );
}

#[test]
fn api_calls_without_a_launch_and_no_kernels_are_not_failed_launches() {
    let (_d, path) = write(FAILED64);
    let c = Connection::open(&path).unwrap();
    c.execute_batch("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN (SELECT id FROM StringIds WHERE value LIKE '%Launch%');")
        .unwrap();
    drop(c);
    let t = nsys::open(&path).unwrap();
    assert_eq!(t.api.count, 12);
    assert_eq!(t.api.launches, 0);
    assert!(t
        .findings
        .iter()
        .all(|f| f.kind != FindingKind::LaunchesFailed));
}

#[test]
fn write_all_writes_every_fixture_and_each_opens() {
    let dir = tempfile::tempdir().unwrap();
    let paths = testdata::write_all(&dir.path().join("sub")).unwrap();
    assert_eq!(paths.len(), 5);
    for p in &paths {
        nsys::open(p).unwrap_or_else(|e| panic!("{e}"));
    }
    // Writing again replaces the files.
    let again = testdata::write_all(&dir.path().join("sub")).unwrap();
    assert_eq!(again, paths);
    assert_eq!(names_in(&dir.path().join("sub")).len(), 5);
}
