//! Findings that are true about time, and exports whose changes are still in a `-wal`:
//! copy time as wall-clock time (copies on four streams that overlap count once), the part
//! of it during kernels, unified-memory migrations inside a kernel (demand paging, not
//! extra time), the per-direction copy summary, and WAL-mode databases read as SQLite
//! itself sees them, without writing beside them. Each test named after a defect fails on
//! the reader that summed durations and opened every file `immutable=1`.

mod nsys_fixtures;

use std::path::Path;

use klab_tools::nsys::{self, testdata, FindingKind, NsysError, Trace};
use nsys_fixtures::*;
use rusqlite::Connection;

fn scenario(build: fn(&Path) -> testdata::Result<()>) -> (tempfile::TempDir, Trace) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.sqlite");
    build(&path).unwrap();
    let t = nsys::open(&path).unwrap();
    (dir, t)
}

fn finding(t: &Trace, kind: FindingKind) -> Option<&str> {
    t.findings
        .iter()
        .find(|f| f.kind == kind)
        .map(|f| f.text.as_str())
}

#[test]
fn unified_memory_migrations_inside_a_kernel_are_not_reported_as_extra_copy_time() {
    let (_d, t) = scenario(testdata::unified_memory_in_kernel);
    assert_eq!(t.memcpys.len(), 80);
    assert!(t.memcpys.iter().all(|m| m.is_unified()));
    // The old finding summed them: "memory copies took 67.00 ms in total, 1.1x the 60.00 ms
    // of kernel time".
    assert_eq!(
        finding(&t, FindingKind::CopiesDominate),
        None,
        "{:?}",
        t.findings
    );
    assert_eq!(
        finding(&t, FindingKind::UnifiedMemory),
        Some(
            "80 unified-memory migrations (50 Host-to-Device, 30 Device-to-Host; 5.24 MB) took 46.00 ms of wall-clock time, all of it while kernels ran: demand paging inside kernel time, not time added to it"
        )
    );
    let s = t.copy_summary();
    assert_eq!(s.len(), 2);
    let (h, d) = (&s[0], &s[1]);
    assert_eq!(
        (h.copy_kind, h.direction.as_str()),
        (11, "Unified Host-to-Device")
    );
    assert!(h.unified && d.unified);
    assert_eq!((h.count, h.timed, h.bytes), (50, 50, 50 * 65_536));
    assert_eq!(h.total_ns, 40_000_000);
    assert_eq!(
        (h.min_ns, h.median_ns, h.max_ns),
        (Some(800_000), Some(800_000.0), Some(800_000))
    );
    assert_eq!((h.wall_ns, h.during_kernels_ns), (40_000_000, 40_000_000));
    assert_eq!(
        (d.copy_kind, d.direction.as_str()),
        (12, "Unified Device-to-Host")
    );
    assert_eq!(
        (d.count, d.total_ns, d.wall_ns, d.during_kernels_ns),
        (30, 27_000_000, 27_000_000, 27_000_000)
    );
}

#[test]
fn migrations_outside_kernels_are_said_to_be_outside() {
    let (dir, _) = scenario(testdata::unified_memory_in_kernel);
    let path = dir.path().join("scenario.sqlite");
    // Move the kernel to after every migration: a prefetch before the launch.
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + 100000000, \"end\" = \"end\" + 100000000",
    )
    .unwrap();
    drop(c);
    let t = nsys::open(&path).unwrap();
    assert_eq!(
        finding(&t, FindingKind::UnifiedMemory),
        Some(
            "80 unified-memory migrations (50 Host-to-Device, 30 Device-to-Host; 5.24 MB) took 46.00 ms of wall-clock time, none of it while kernels ran"
        )
    );
    // Half inside: the kernel now covers [25, 85) ms of the timeline.
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start - 75000000, \"end\" = \"end\" - 75000000",
    )
    .unwrap();
    drop(c);
    let t = nsys::open(&path).unwrap();
    let text = finding(&t, FindingKind::UnifiedMemory).unwrap();
    // Before 25 ms: 24 x 1.0 ms (k = 1..24); k = 25 starts at 25 ms, inside.
    assert!(
        text.ends_with(
            ": 22.00 ms while kernels ran (demand paging inside kernel time, not time added to it), 24.00 ms outside kernels"
        ),
        "{text}"
    );
}

#[test]
fn overlapping_copies_on_four_streams_are_wall_clock_time_not_a_sum() {
    let (_d, t) = scenario(testdata::copies_on_four_streams);
    // The old finding: "memory copies took 26.20 ms in total, 6.5x the 4.00 ms of kernel
    // time".
    assert_eq!(
        finding(&t, FindingKind::CopiesDominate),
        Some(
            "memory copies took 18.40 ms of wall-clock time, 4.6x the 4.00 ms of kernel time (their durations sum to 26.20 ms over 4 streams: they overlap); 3.20 ms of it while kernels ran"
        )
    );
    assert_eq!(finding(&t, FindingKind::UnifiedMemory), None);
    let s = t.copy_summary();
    let rows: Vec<_> = s
        .iter()
        .map(|c| {
            (
                c.direction.as_str(),
                c.count,
                c.bytes,
                c.total_ns,
                c.median_ns,
                c.min_ns,
                c.max_ns,
                c.wall_ns,
                c.during_kernels_ns,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            // [0, 8.0) and [3.0, 9.2): median of an even count, the mean of the two.
            (
                "Host-to-Device",
                2,
                128_000_000,
                14_200_000,
                Some(7_100_000.0),
                Some(6_200_000),
                Some(8_000_000),
                9_200_000,
                700_000
            ),
            (
                "Device-to-Host",
                2,
                128_000_000,
                12_000_000,
                Some(6_000_000.0),
                Some(5_000_000),
                Some(7_000_000),
                9_200_000,
                2_500_000
            ),
        ]
    );
    assert!(s.iter().all(|c| !c.unified));
}

#[test]
fn the_copy_summary_of_a_fixture_matches_its_rows() {
    let (_d, t) = open(REDUCE);
    let s = t.copy_summary();
    let dirs: Vec<(&str, usize)> = s.iter().map(|c| (c.direction.as_str(), c.count)).collect();
    assert_eq!(
        dirs,
        [
            ("Host-to-Device", 1),
            ("Device-to-Host", 1),
            ("Device-to-Device", 1)
        ],
        "copyKind order"
    );
    for c in &s {
        let m: Vec<_> = t
            .memcpys
            .iter()
            .filter(|m| m.copy_kind == c.copy_kind)
            .collect();
        assert_eq!(c.bytes, m.iter().map(|m| m.bytes).sum::<u64>());
        assert_eq!(Some(c.total_ns), m.iter().map(|m| m.span.duration_ns).sum());
        assert_eq!(c.wall_ns, c.total_ns, "one copy: the union is its duration");
    }
}

/// Every file in a folder with its bytes, to show nothing was written.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    names_in(dir)
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

fn count(c: &Connection, table: &str) -> i64 {
    c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_wal_database_with_an_open_writer_is_read_as_sqlite_sees_it() {
    let (dir, path) = write(TRANSPOSE32);
    let writer = testdata::open_wal_writer(&path).unwrap();
    writer
        .execute_batch("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL;")
        .unwrap();
    assert_eq!(count(&writer, nsys::tables::KERNEL), 0, "what sqlite3 sees");
    let before = snapshot(dir.path());
    assert!(names_in(dir.path()).iter().any(|n| n.ends_with("-wal")));
    // The old reader (immutable=1) saw the 6 kernels the database file still holds.
    let t = nsys::open(&path).unwrap();
    assert_eq!(t.kernels.len(), 0);
    assert!(has_note(
        &t,
        "holds changes not yet checkpointed into the export (WAL mode)"
    ));
    assert_eq!(snapshot(dir.path()), before, "nothing written beside it");
    drop(writer);
}

#[test]
fn a_wal_left_without_a_checkpoint_is_read_and_without_its_shm_is_a_clear_error() {
    let (dir, path) = write(TRANSPOSE32);
    testdata::commit_to_wal(
        &path,
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE registersPerThread = 18;",
    )
    .unwrap();
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(
        names_in(dir.path()),
        [file.clone(), format!("{file}-shm"), format!("{file}-wal")]
    );
    let before = snapshot(dir.path());
    let t = nsys::open(&path).unwrap();
    assert_eq!(
        t.kernels.len(),
        4,
        "the two shared-memory launches are gone"
    );
    assert_eq!(snapshot(dir.path()), before);

    // Without the -shm, SQLite could read the -wal only by creating one: refused, saying why
    // and what to do, and still nothing is written.
    std::fs::remove_file(dir.path().join(format!("{file}-shm"))).unwrap();
    let before = snapshot(dir.path());
    let e = nsys::open(&path).unwrap_err();
    assert!(matches!(e, NsysError::UncheckpointedWal { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "{msg}");
    assert!(
        msg.starts_with(&format!(
            "{}: has changes in {}-wal not yet written into the database (WAL mode)",
            path.display(),
            std::fs::canonicalize(&path).unwrap().display()
        )),
        "{msg}"
    );
    assert!(msg.contains("-shm"), "{msg}");
    assert!(
        msg.contains(&format!(
            "sqlite3 {} 'PRAGMA wal_checkpoint'",
            path.display()
        )),
        "{msg}"
    );
    assert_eq!(snapshot(dir.path()), before, "no -shm created");

    // The advice works.
    let c = Connection::open(&path).unwrap();
    c.execute_batch("PRAGMA wal_checkpoint").unwrap();
    drop(c);
    let t = nsys::open(&path).unwrap();
    assert_eq!(t.kernels.len(), 4);
    assert!(!has_note(&t, "WAL mode"));
}

#[test]
fn an_empty_wal_changes_nothing() {
    let (dir, path) = write(TRANSPOSE32);
    let mut wal = path.clone().into_os_string();
    wal.push("-wal");
    std::fs::write(&wal, b"").unwrap();
    let before = snapshot(dir.path());
    let t = nsys::open(&path).unwrap();
    assert_eq!(t.kernels.len(), 6);
    assert!(!has_note(&t, "WAL mode"));
    assert_eq!(snapshot(dir.path()), before);
}
