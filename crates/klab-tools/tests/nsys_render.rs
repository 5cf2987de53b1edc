//! The text report and the CSV of a trace.

mod nsys_fixtures;

use std::path::PathBuf;

use klab_tools::nsys::render::{self, CSV_HEADER};
use klab_tools::nsys::Rates;
use nsys_fixtures::*;

const SEED_RATES: Rates = Rates {
    bytes_moved: Some(8_000_000),
    peak_gbs: Some(2039.0),
};

/// Splits one CSV line into fields (RFC 4180 quotes).
fn fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().unwrap().push(c),
        }
    }
    out
}

/// The CSV rows as maps from column name to field.
fn rows(csv: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut lines = csv.lines();
    let head = fields(lines.next().unwrap());
    lines
        .map(|l| {
            let f = fields(l);
            assert_eq!(f.len(), head.len(), "{l}");
            head.iter().cloned().zip(f).collect()
        })
        .collect()
}

#[test]
fn csv_has_one_row_per_launch_copy_and_set_with_the_seed_numbers() {
    let (_d, mut t) = open(TRANSPOSE32);
    t.path = PathBuf::from("runs/report_32.sqlite");
    let csv = render::csv(std::slice::from_ref(&t), &SEED_RATES);
    assert_eq!(csv.lines().next().unwrap(), CSV_HEADER);
    let r = rows(&csv);
    assert_eq!(r.len(), 6 + 2 + 1);
    let kinds: Vec<&str> = r.iter().map(|r| r["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "kernel", "kernel", "kernel", "kernel", "kernel", "kernel", "memcpy", "memcpy",
            "memset"
        ]
    );
    let copy = &r[3];
    assert_eq!(copy["file"], "runs/report_32.sqlite");
    assert_eq!(copy["name"], "mat_copy(const int *, int *, int)");
    assert_eq!(copy["grid"], "32x32x1");
    assert_eq!(copy["block"], "32x32x1");
    assert_eq!(copy["registers"], "16");
    assert_eq!(copy["shared_mem_bytes"], "0");
    assert_eq!(copy["duration_ns"], "6560");
    assert_eq!(copy["bytes"], "8000000");
    assert_eq!(copy["gb_s"], "1219.512");
    assert_eq!(copy["pct_of_peak"], "59.81");
    assert_eq!(copy["api"], "cudaLaunchKernel");
    assert_eq!(copy["correlation_id"], "8");
    assert_eq!(
        copy["end_ns"].parse::<i64>().unwrap() - copy["start_ns"].parse::<i64>().unwrap(),
        6560
    );
    assert_eq!(r[5]["shared_mem_bytes"], "4096");
    // The raw line quotes the demangled name.
    assert!(
        csv.contains(",kernel,\"mat_copy(const int *, int *, int)\",0,7,32x32x1,32x32x1,16,0,,,")
    );

    let h2d = &r[6];
    assert_eq!(h2d["name"], "Host-to-Device");
    assert_eq!(h2d["memory"], "Pageable -> Device");
    assert_eq!(h2d["bytes"], "4000000");
    assert_eq!(h2d["gb_s"], "12.121");
    assert_eq!(
        h2d["pct_of_peak"], "",
        "copies are not compared with the HBM peak"
    );
    assert_eq!(h2d["grid"], "");
    assert_eq!(h2d["api"], "cudaMemcpy");
    let set = &r[8];
    assert_eq!(set["name"], "memset");
    assert_eq!(set["memory"], "Device");
    assert_eq!(set["value"], "0");
    assert_eq!(set["gb_s"], "200.000");
}

#[test]
fn csv_without_rates_leaves_kernel_rate_fields_empty_and_unknown_durations_blank() {
    let (_d, t) = open(REDUCE);
    let csv = render::csv(std::slice::from_ref(&t), &Rates::default());
    let r = rows(&csv);
    let kernels: Vec<_> = r.iter().filter(|r| r["kind"] == "kernel").collect();
    assert_eq!(kernels.len(), 8);
    assert!(kernels
        .iter()
        .all(|k| k["gb_s"].is_empty() && k["bytes"].is_empty() && k["pct_of_peak"].is_empty()));
    let untimed = kernels[7];
    assert_eq!(untimed["start_ns"], "0");
    assert_eq!(untimed["duration_ns"], "");
    // Copies still have their own rate.
    let d2d = r.iter().find(|r| r["name"] == "Device-to-Device").unwrap();
    assert_eq!(d2d["gb_s"], "1000.000");
    // With a byte count, the untimed launch still has no rate.
    let csv = render::csv(
        std::slice::from_ref(&t),
        &Rates {
            bytes_moved: Some(16_777_216),
            peak_gbs: None,
        },
    );
    let r = rows(&csv);
    assert_eq!(r[7]["start_ns"], "0");
    assert_eq!(r[7]["gb_s"], "");
    assert_eq!(r[0]["name"], "init_data");
    assert_eq!(r[0]["gb_s"], "419.430", "{:?}", r[0]);
    assert_eq!(r[0]["pct_of_peak"], "");
}

#[test]
fn several_traces_share_one_header() {
    let (_d1, a) = open(UM_ADD);
    let (_d2, b) = open(FAILED64);
    let csv = render::csv(&[a, b], &Rates::default());
    assert_eq!(csv.matches(CSV_HEADER).count(), 1);
    let r = rows(&csv);
    assert_eq!(r.len(), (1 + 3) + 2);
    assert!(r[0]["file"].ends_with(UM_ADD));
    assert!(r[5]["file"].ends_with(FAILED64));
    assert_eq!(r[1]["name"], "Unified Host-to-Device");
    assert_eq!(r[1]["memory"], "Unknown -> Unknown");
    assert_eq!(r[1]["correlation_id"], "0");
    assert_eq!(r[1]["api"], "");
}

#[test]
fn the_text_report_has_every_section() {
    let (_d, mut t) = open(REDUCE);
    t.path = PathBuf::from("reduce.sqlite");
    let text = render::text(
        &t,
        &Rates {
            bytes_moved: Some(16_777_216),
            peak_gbs: Some(4800.0),
        },
    );
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        "== reduce.sqlite: nsys 2026.1.1.204, schema 3.24.14, lazy export"
    );
    assert!(text.contains("GPU: CUDA device 0: NVIDIA H200, 132 SMs, 4800.0 GB/s memory bandwidth"));
    assert!(text.contains("API calls: 18, 2 returned an error"));
    assert!(text.contains("kernel launches (8):"));
    assert!(text.contains("memcpy/memset (3 + 0):"));
    assert!(text.contains(
        "per-kernel summary (ns; GB/s at the median for 16777216 bytes moved per launch):"
    ));
    assert!(text.contains(
        "findings:\n  - 2 API calls returned an error (first: cudaLaunchKernel returned 9)\n"
    ));
    assert!(text.contains("notes:\n  - no CUPTI_ACTIVITY_KIND_MEMSET table"));
    // The reduce_v0 summary row: 4 launches, median 102000 ns -> 164.5 GB/s, 3.4% of 4800.
    let row = text
        .lines()
        .find(|l| l.contains("reduce_v0") && l.trim_start().starts_with('4'))
        .unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[..7],
        ["4", "4", "96000", "102000", "120000", "164.5", "3.4"]
    );
    // The untimed launch shows dashes, not zeros.
    let untimed = text
        .lines()
        .find(|l| l.trim_start().starts_with("0 "))
        .unwrap();
    assert!(
        untimed.split_whitespace().take(4).eq(["0", "-", "-", "-"]),
        "{untimed}"
    );
    // The kernel table gives grid and block as launched.
    assert!(text.contains("16384x1x1  256x1x1"));
}

#[test]
fn the_text_report_says_why_there_are_no_kernels() {
    let (_d, mut t) = open(FAILED64);
    t.path = PathBuf::from("report_64.sqlite");
    let text = render::text(&t, &Rates::default());
    assert!(text.contains("kernel launches: none (no CUPTI_ACTIVITY_KIND_KERNEL table)"));
    assert!(
        text.contains("findings:\n  - 15 runtime API calls and zero kernels: launches failed\n")
    );
    assert!(!text.contains("per-kernel summary"));
    assert!(!text.contains("GB/s  %peak"));
}

#[test]
fn control_characters_in_names_reach_the_text_report_escaped() {
    let (_d, path) = write(TRANSPOSE32);
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute(
        "UPDATE StringIds SET value = 'evil' || char(27) || '[2Jname' WHERE value LIKE 'mat_copy%'",
        [],
    )
    .unwrap();
    drop(c);
    let t = klab_tools::nsys::open(&path).unwrap();
    let out = render::text(&t, &Rates::default());
    assert!(!out.contains('\u{1b}'), "{out}");
    assert!(out.contains("evil\\u{1b}[2Jname"), "{out}");
}

#[test]
fn a_newline_in_a_kernel_name_does_not_split_a_table_row() {
    let (_d, path) = write(TRANSPOSE32);
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute(
        "UPDATE StringIds SET value = 'two' || char(10) || 'lines' || char(13) || char(9) || 'k' WHERE value LIKE 'mat_copy%'",
        [],
    )
    .unwrap();
    drop(c);
    let t = klab_tools::nsys::open(&path).unwrap();
    let out = render::text(&t, &Rates::default());
    // The old report printed the raw line break: "  ...  two" then "lines\r\tk" alone.
    assert!(!out.lines().any(|l| l.starts_with("lines")), "{out}");
    assert!(!out.contains('\r') && !out.contains('\t'), "{out}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("two\\nlines\\r\\tk"))
        .collect();
    // Two launches in the kernel table, one row in the per-kernel summary.
    assert_eq!(rows.len(), 3, "{out}");
    // Every kernel table row still has all its columns.
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("kernel launches ("))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 6, "{out}");
    assert!(
        table.iter().all(|l| l.split_whitespace().count() >= 10),
        "{out}"
    );
}

/// A fixture (by file name) edited by `sql`, opened.
fn edited(file: &str, sql: &str) -> (tempfile::TempDir, klab_tools::nsys::Trace) {
    let (dir, path) = write(file);
    klab_tools::nsys::testdata::edit(&path, sql).unwrap();
    let t = klab_tools::nsys::open(&path).unwrap();
    (dir, t)
}

/// Two processes that each see their own GPU as CUDA device 0 (one GPU each through
/// `CUDA_VISIBLE_DEVICES`): the reduce export with a second GPU, and a copy of the launch
/// of correlationId 7 made by process 5151 on it.
fn two_processes() -> (tempfile::TempDir, klab_tools::nsys::Trace) {
    use klab_tools::nsys::testdata::global_pid;
    let (dir, t) = edited(
        REDUCE,
        &format!(
            "CREATE TEMP TABLE g AS SELECT * FROM TARGET_INFO_GPU;
             UPDATE g SET id = 2, name = 'NVIDIA H100 80GB HBM3';
             INSERT INTO TARGET_INFO_GPU SELECT * FROM g;
             INSERT INTO TARGET_INFO_CUDA_DEVICE (gpuId, cudaId, pid) VALUES (2, 0, 5151);
             CREATE TEMP TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId = 7;
             UPDATE k SET globalPid = {};
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM k;",
            global_pid(5151)
        ),
    );
    (dir, t)
}

#[test]
fn two_processes_each_with_its_own_device_0_are_told_apart() {
    let (_d, mut t) = two_processes();
    assert!(t.ordinals_shared());
    let on = |gpu: i64| {
        t.kernels
            .iter()
            .filter(|k| k.gpu == Some(gpu))
            .map(|k| k.pid.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(on(2), [5151]);
    assert_eq!(on(1).len(), 8);
    assert!(on(1).iter().all(|&p| p == 4242));
    t.path = PathBuf::from("two.sqlite");
    let text = render::text(&t, &Rates::default());
    assert!(
        text.contains(
            "GPU 1: NVIDIA H200, 132 SMs, 4800.0 GB/s memory bandwidth (seen by process 4242 as CUDA device 0)"
        ),
        "{text}"
    );
    assert!(text.contains(
        "GPU 2: NVIDIA H100 80GB HBM3, 132 SMs, 4800.0 GB/s memory bandwidth (seen by process 5151 as CUDA device 0)"
    ));
    assert!(!text.contains("CUDA device 0:"), "{text}");
    // The tables name the GPU, not the ordinal both processes use.
    let head = text
        .lines()
        .find(|l| l.trim_start().starts_with("start_ns") && l.contains("regs"))
        .unwrap();
    assert!(head.contains(" gpu ") && !head.contains(" dev "), "{head}");
    let csv = render::csv(&[t], &Rates::default());
    let r = rows(&csv);
    let mine: Vec<(&str, &str, &str)> = r
        .iter()
        .filter(|r| r["correlation_id"] == "7")
        .map(|r| (r["device"].as_str(), r["pid"].as_str(), r["gpu"].as_str()))
        .collect();
    assert_eq!(mine, [("0", "4242", "1"), ("0", "5151", "2")]);
}

#[test]
fn one_process_keeps_the_ordinal_in_its_tables() {
    let (_d, t) = open(REDUCE);
    assert!(!t.ordinals_shared());
    assert!(t.kernels.iter().all(|k| k.gpu == Some(1)));
    let text = render::text(&t, &Rates::default());
    let head = text
        .lines()
        .find(|l| l.trim_start().starts_with("start_ns") && l.contains("regs"))
        .unwrap();
    assert!(head.contains(" dev "), "{head}");
}

/// A process the map gives a GPU that TARGET_INFO_GPU does not list: its rows carry that
/// GPU's id, not the GPU another process calls by the same ordinal, and a note says so.
#[test]
fn a_gpu_the_map_names_but_the_gpu_table_lacks_is_not_another_gpu() {
    use klab_tools::nsys::testdata::global_pid;
    let (_d, t) = edited(
        REDUCE,
        &format!(
            "INSERT INTO TARGET_INFO_CUDA_DEVICE (gpuId, cudaId, pid) VALUES (9, 0, 5151);
             CREATE TEMP TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId = 7;
             UPDATE k SET globalPid = {};
             INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM k;",
            global_pid(5151)
        ),
    );
    let theirs: Vec<Option<i64>> = t
        .kernels
        .iter()
        .filter(|k| k.pid == Some(5151))
        .map(|k| k.gpu)
        .collect();
    assert_eq!(theirs, [Some(9)]);
    assert!(
        has_note(&t, "names GPU id(s) 9 that TARGET_INFO_GPU does not list"),
        "{:?}",
        t.notes
    );
}

/// Two rows that give one process's ordinal two GPUs: that process's rows name neither.
#[test]
fn a_process_ordinal_the_map_gives_two_gpus_names_neither() {
    let (_d, t) = edited(
        REDUCE,
        "CREATE TEMP TABLE g AS SELECT * FROM TARGET_INFO_GPU;
         UPDATE g SET id = 2;
         INSERT INTO TARGET_INFO_GPU SELECT * FROM g;
         INSERT INTO TARGET_INFO_CUDA_DEVICE (gpuId, cudaId, pid) VALUES (2, 0, 4242);",
    );
    assert!(t.kernels.iter().all(|k| k.gpu.is_none()));
    assert!(
        has_note(
            &t,
            "gives more than one GPU for process 4242's CUDA device 0"
        ),
        "{:?}",
        t.notes
    );
}

/// An export without the map and two GPUs of one ordinal: the tables keep the ordinal, and a
/// note says which GPU cannot be told.
#[test]
fn without_the_map_shared_ordinals_keep_the_ordinal_and_say_so() {
    let (_d, t) = edited(
        TRANSPOSE32,
        "CREATE TEMP TABLE g AS SELECT * FROM TARGET_INFO_GPU;
         UPDATE g SET id = 7;
         INSERT INTO TARGET_INFO_GPU SELECT * FROM g;",
    );
    assert!(!t.ordinals_shared());
    assert!(t.kernels.iter().all(|k| k.gpu.is_none()));
    assert!(
        has_note(&t, "which GPU a row ran on cannot be told"),
        "{:?}",
        t.notes
    );
    let text = render::text(&t, &Rates::default());
    let head = text
        .lines()
        .find(|l| l.trim_start().starts_with("start_ns") && l.contains("regs"))
        .unwrap();
    assert!(head.contains(" dev "), "{head}");
}
