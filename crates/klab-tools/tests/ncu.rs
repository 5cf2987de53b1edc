//! The Nsight Compute parsers over real H200 outputs (tests/fixtures/ncu, see its README),
//! plus the edge cases real outputs do not show: quoting, CRLF, ragged and truncated
//! tables, empty input, permission and no-kernel failures.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use klab_tools::ncu::{
    self, metrics, parse_details, parse_query_metrics, parse_raw, parse_version, CacheControl,
    ColumnKind, Lookup, MessageLevel, NcuError, Page, ProfileRequest, RawReport, Value,
    DEFAULT_SECTIONS, KLAB_METRICS, SECTION_METRICS, UNLISTED_PREFIXES,
};

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ncu")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The part of dev_misc.txt under `## <title>`, up to the next `## `.
fn misc_section(title: &str) -> String {
    let text = fixture("dev_misc.txt");
    let start = text
        .find(&format!("## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title}"));
    let body = &text[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let end = body.find("\n## ").map_or(body.len(), |e| e + 1);
    body[..end].to_string()
}

fn raw(name: &str) -> RawReport {
    parse_raw(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const STORE_SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum";
const STORE_REQUESTS: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum";

// ---------------------------------------------------------------- raw page, real files

#[test]
fn naive_three_kernels_and_32_sectors_per_store_request() {
    let r = raw("ncu_raw_naive_metrics.csv");
    assert_eq!(r.kernels.len(), 3);
    assert_eq!(
        r.kernels.iter().map(|k| k.id).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    for k in &r.kernels {
        assert_eq!(
            k.metric(STORE_SECTORS),
            Lookup::Number(16_777_216.0, "sector")
        );
        assert_eq!(k.metric(STORE_REQUESTS), Lookup::Number(524_288.0, ""));
        assert_eq!(k.ratio(STORE_SECTORS, STORE_REQUESTS), Some(32.0));
        assert_eq!(
            k.sum_of("l1tex__t_sectors_pipe_lsu_mem_global_op_st")
                .number(),
            Some(16_777_216.0)
        );
    }
    let k = &r.kernels[0];
    assert_eq!(
        k.metric(metrics::DRAM_THROUGHPUT_PCT),
        Lookup::Number(10.35, "%")
    );
    assert_eq!(
        r.kernels[1].number(metrics::DRAM_THROUGHPUT_PCT),
        Some(10.26)
    );
    // A decimal with a thousands separator.
    assert_eq!(
        k.metric("l1tex__t_requests_pipe_lsu_mem_global_op_st.avg"),
        Lookup::Number(3971.88, "")
    );
    assert_eq!(
        k.avg_of("l1tex__t_sectors_pipe_lsu_mem_global_op_st")
            .number(),
        Some(127_100.12)
    );
    assert_eq!(k.metric(metrics::DURATION), Lookup::Number(279_200.0, "ns"));
    assert_eq!(k.number_in(metrics::DURATION, "us"), Some(279.2));
    assert_eq!(r.kernels[2].number(metrics::DURATION), Some(281_888.0));
}

#[test]
fn naive_identity_columns() {
    let r = raw("ncu_raw_naive_metrics.csv");
    for k in &r.kernels {
        assert_eq!(k.kernel_name, "naive_k");
        assert_eq!(k.function_name(), "naive_k");
        assert_eq!(k.block, Some([32, 8, 1]));
        assert_eq!(k.grid, Some([128, 128, 1]));
        assert_eq!(k.process_id, Some(570));
        assert_eq!(k.process_name, "probe");
        assert_eq!(k.host_name, "127.0.0.1");
        assert_eq!(k.context, Some(1));
        assert_eq!(k.stream, Some(7));
        assert_eq!(k.device, Some(0));
        assert_eq!(k.cc, "9.0");
        assert!(k.extra.is_empty());
        // Identity columns are not metrics.
        assert!(k.metric("Block Size").is_absent());
        assert!(k.metric("Kernel Name").is_absent());
    }
    assert_eq!(r.kernels_named("naive_k").count(), 3);
    assert_eq!(r.kernels_named("tiled_k").count(), 0);
    assert_eq!(r.kernel(2).unwrap().id, 2);
    assert!(r.kernel(3).is_none());
}

#[test]
fn naive_device_attributes_are_kept_apart_from_metrics() {
    let r = raw("ncu_raw_naive_metrics.csv");
    let k = &r.kernels[0];
    let name = "device__attribute_display_name";
    assert_eq!(k.device_attribute(name), Lookup::Text("NVIDIA H200"));
    assert!(!k.metrics.contains_key(name));
    assert!(k.metric(name).is_absent());
    assert_eq!(k.device_name(), Some("NVIDIA H200"));
    assert_eq!(
        k.device_attribute("device__attribute_l2_cache_size")
            .number(),
        Some(62_914_560.0)
    );
    assert_eq!(k.device_attribute("nvlink__max_count").number(), Some(18.0));
    assert_eq!(r.column(name).unwrap().kind, ColumnKind::DeviceAttribute);
    // Launch attributes are the launch's: metrics.
    assert_eq!(
        k.metric("launch__cluster_scheduling_policy"),
        Lookup::Text("PolicySpread")
    );
    assert_eq!(k.number("launch__registers_per_thread"), Some(20.0));
    assert_eq!(k.number("launch__grid_size"), Some(16_384.0));
    // 166 device__attribute_* plus 24 c2clink__/nvlink__/numa__ columns.
    assert_eq!(k.device_attributes.len(), 190);
}

#[test]
fn every_column_lands_in_exactly_one_place() {
    for name in [
        "ncu_raw_naive_metrics.csv",
        "ncu_raw_tiled_bankconflicts.csv",
        "ncu_raw_sections_tiled.csv",
        "dev_import_raw_tiled.csv",
    ] {
        let r = raw(name);
        let identity = r
            .columns
            .iter()
            .filter(|c| c.kind == ColumnKind::Identity)
            .count();
        assert_eq!(identity, 11, "{name}");
        for k in &r.kernels {
            assert_eq!(
                identity + k.metrics.len() + k.device_attributes.len(),
                r.columns.len(),
                "{name}"
            );
            for key in k.device_attributes.keys() {
                assert!(!k.metrics.contains_key(key), "{name}: {key}");
            }
            assert!(
                k.metrics
                    .keys()
                    .all(|m| !m.starts_with("device__attribute_")),
                "{name}"
            );
        }
    }
}

#[test]
fn numbers_are_numbers_and_only_known_fields_are_text() {
    // If thousands separators or decimals stopped parsing, numbers would turn into text
    // here; if commas inside "(32, 8, 1)" were stripped, text would turn into numbers.
    let text_metrics: BTreeSet<&str> = [
        "launch__cluster_scheduling_policy",
        "launch__func_cache_config",
        "launch__tpc_enabled",
    ]
    .into();
    let text_attributes: BTreeSet<&str> = [
        "device__attribute_display_name",
        "device__attribute_confidential_computing_mode",
    ]
    .into();
    for name in [
        "ncu_raw_naive_metrics.csv",
        "ncu_raw_tiled_bankconflicts.csv",
        "ncu_raw_sections_tiled.csv",
        "dev_import_raw_tiled.csv",
    ] {
        let r = raw(name);
        for k in &r.kernels {
            let mut numbers = 0;
            for (m, v) in &k.metrics {
                match &v.value {
                    Value::Text(t) => {
                        assert!(text_metrics.contains(m.as_str()), "{name}: {m} = {t:?}")
                    }
                    Value::Number(_) => numbers += 1,
                    Value::NoData => {}
                }
            }
            assert!(numbers > 50, "{name}: {numbers}");
            for (a, v) in &k.device_attributes {
                if let Value::Text(t) = &v.value {
                    assert!(text_attributes.contains(a.as_str()), "{name}: {a} = {t:?}");
                }
            }
        }
    }
}

#[test]
fn naive_messages_and_application_output() {
    let r = raw("ncu_raw_naive_metrics.csv");
    let warnings: Vec<_> = r.warnings().collect();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0]
        .text
        .starts_with("Note: Running with unmodified GPU clocks"));
    assert_eq!(warnings[0].line, 1);
    assert_eq!(r.errors().count(), 0);
    let prof: Vec<_> = r
        .messages
        .iter()
        .filter(|m| m.level == MessageLevel::Prof)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(
        prof,
        [
            "Connected to process 570 (./probe)",
            "Disconnected from process 570"
        ]
    );
    assert_eq!(r.other_lines.len(), 8);
    assert_eq!(
        r.other_lines[0].split_whitespace().next(),
        Some("device=NVIDIA")
    );
    assert_eq!(r.other_lines[7], "naive_k n=4096 mismatches=0");
}

#[test]
fn tiled_bank_conflicts() {
    let r = raw("ncu_raw_tiled_bankconflicts.csv");
    assert_eq!(r.kernels.len(), 3);
    let sums: Vec<f64> = r
        .kernels
        .iter()
        .map(|k| k.number(metrics::SHARED_LOAD_BANK_CONFLICTS).unwrap())
        .collect();
    assert_eq!(sums, [16_488_054.0, 16_491_116.0, 16_486_036.0]);
    let k = &r.kernels[0];
    assert_eq!(k.kernel_name, "tiled_k");
    assert_eq!(
        k.metric("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.avg"),
        Lookup::Number(124_909.5, "")
    );
    assert_eq!(k.number(metrics::DURATION), Some(79_424.0));
    // Not requested in this run.
    assert!(k.metric(STORE_SECTORS).is_absent());
    assert!(k.metric(metrics::DRAM_THROUGHPUT_PCT).is_absent());
}

#[test]
fn sections_no_data_spilling_and_occupancy() {
    let r = raw("ncu_raw_sections_tiled.csv");
    assert_eq!(r.kernels.len(), 1);
    let k = &r.kernels[0];
    assert_eq!(k.process_id, Some(1241));
    // "no data" is NoData, with its unit still recorded in the column.
    assert_eq!(
        k.metric("derived__local_spilling_requests_pct"),
        Lookup::NoData
    );
    assert_eq!(
        r.column("derived__local_spilling_requests_pct")
            .unwrap()
            .unit,
        "%"
    );
    assert_eq!(
        k.metric("sass__inst_executed_register_spilling_mem_local"),
        Lookup::NoData
    );
    assert_eq!(
        k.number("sass__inst_executed_register_spilling_mem_local"),
        None
    );
    assert_eq!(
        k.metric(metrics::REGISTER_SPILLING_INSTRUCTIONS),
        Lookup::Number(0.0, "inst")
    );
    // Occupancy limiters, in blocks per SM.
    for (m, v) in [
        ("launch__occupancy_limit_registers", 8.0),
        ("launch__occupancy_limit_shared_mem", 20.0),
        ("launch__occupancy_limit_warps", 8.0),
        ("launch__occupancy_limit_blocks", 32.0),
        ("launch__occupancy_limit_barriers", 32.0),
    ] {
        assert_eq!(k.metric(m), Lookup::Number(v, "block"), "{m}");
    }
    assert_eq!(
        k.metric(metrics::ACHIEVED_OCCUPANCY_PCT),
        Lookup::Number(92.81, "%")
    );
    assert_eq!(k.number(metrics::SM_THROUGHPUT_PCT), Some(24.68));
    assert_eq!(k.number(metrics::REGISTERS_PER_THREAD), Some(28.0));
    assert_eq!(
        k.metric("launch__shared_mem_per_block_static"),
        Lookup::Number(4096.0, "byte/block")
    );
    assert_eq!(
        k.metric("dram__bytes.sum.per_second"),
        Lookup::Number(1_456_022_838_499.18, "byte/s")
    );
    assert_eq!(
        k.number_in("dram__bytes.sum.per_second", "Gbyte/s"),
        Some(1_456.022_838_499_18)
    );
    // Metric names without "__" are still metrics.
    assert_eq!(k.number("inst_executed"), Some(20_185_088.0));
    assert_eq!(k.number("derived_tempMetric0"), Some(144_000.0));
}

#[test]
fn a_metric_not_in_the_report_is_absent() {
    let r = raw("ncu_raw_sections_tiled.csv");
    let k = &r.kernels[0];
    for m in [
        metrics::GLOBAL_LOAD_SECTORS,
        metrics::SHARED_LOAD_BANK_CONFLICTS,
        "no_such__metric.sum",
    ] {
        assert_eq!(k.metric(m), Lookup::Absent, "{m}");
        assert_eq!(k.number(m), None);
        assert!(!r.has_metric(m));
    }
    assert!(k
        .sum_of("l1tex__t_sectors_pipe_lsu_mem_global_op_ld")
        .is_absent());
    assert_eq!(
        k.ratio(metrics::GLOBAL_LOAD_SECTORS, metrics::GLOBAL_LOAD_REQUESTS),
        None
    );
}

#[test]
fn imported_report_scales_units_and_prints_signatures() {
    let r = raw("dev_import_raw_tiled.csv");
    assert_eq!(r.kernels.len(), 2);
    assert!(r.messages.is_empty());
    assert!(r.other_lines.is_empty());
    for k in &r.kernels {
        assert_eq!(k.kernel_name, "tiled_k(const float *, float *, int)");
        assert_eq!(k.function_name(), "tiled_k");
        assert_eq!(k.process_name, "k");
        for m in KLAB_METRICS {
            assert!(k.number(m).is_some(), "{m}: {:?}", k.metric(m));
        }
        // Coalesced in both directions: 4 sectors per request.
        assert_eq!(
            k.ratio(metrics::GLOBAL_LOAD_SECTORS, metrics::GLOBAL_LOAD_REQUESTS),
            Some(4.0)
        );
        assert_eq!(
            k.ratio(
                metrics::GLOBAL_STORE_SECTORS,
                metrics::GLOBAL_STORE_REQUESTS
            ),
            Some(4.0)
        );
        assert!(k.number(metrics::SHARED_LOAD_BANK_CONFLICTS).unwrap() > 16_000_000.0);
        assert_eq!(k.number(metrics::REGISTER_SPILLING_INSTRUCTIONS), Some(0.0));
    }
    assert_eq!(r.kernels_named("tiled_k").count(), 2);
    let k = &r.kernels[0];
    // Six decimals, no separators.
    assert_eq!(
        k.metric(metrics::GLOBAL_LOAD_SECTORS),
        Lookup::Number(2_097_152.0, "sector")
    );
    // The same metrics a live run printed in ns and byte come back in us and Mbyte.
    assert_eq!(k.metric(metrics::DURATION), Lookup::Number(84.48, "us"));
    assert_eq!(k.number_in(metrics::DURATION, "ns"), Some(84_480.0));
    assert_eq!(
        k.metric(metrics::DRAM_BYTES_READ),
        Lookup::Number(67.113472, "Mbyte")
    );
    let bytes = k.number_in(metrics::DRAM_BYTES_READ, "byte").unwrap();
    assert!((bytes - 67_113_472.0).abs() < 1e-6, "{bytes}");
    assert_eq!(k.number_in(metrics::DRAM_BYTES_READ, "ns"), None);
    assert_eq!(
        k.metric("launch__shared_mem_per_block_static"),
        Lookup::Number(4.096, "Kbyte/block")
    );
    assert_eq!(
        k.number_in("launch__shared_mem_per_block_static", "byte/block"),
        Some(4096.0)
    );
    assert_eq!(
        k.metric("derived__local_spilling_requests_pct"),
        Lookup::NoData
    );
}

// ---------------------------------------------------------------- details page, real files

#[test]
fn details_speed_of_light_and_rules() {
    let d = parse_details(&fixture("ncu_details_padded.csv")).unwrap();
    assert_eq!(d.kernels.len(), 1);
    let k = &d.kernels[0];
    assert_eq!(k.kernel_name, "padded_k");
    assert_eq!(k.block, Some([32, 8, 1]));
    assert_eq!(k.grid, Some([128, 128, 1]));
    let sol = "GPU Speed Of Light Throughput";
    assert_eq!(k.metric(sol, "DRAM Throughput"), Lookup::Number(65.05, "%"));
    assert_eq!(k.metric(sol, "Duration"), Lookup::Number(36_064.0, "ns"));
    assert_eq!(
        k.metric(sol, "DRAM Frequency"),
        Lookup::Number(3_197_426_796.81, "hz")
    );
    assert_eq!(k.section(sol).unwrap().metrics.len(), 10);
    assert!(k.metric(sol, "No Such Row").is_absent());
    assert!(k.metric("No Such Section", "Duration").is_absent());

    let names: Vec<&str> = k.sections.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            sol,
            "PM Sampling",
            "Compute Workload Analysis",
            "Memory Workload Analysis",
            "Scheduler Statistics",
            "Warp State Statistics",
            "Instruction Statistics",
            "Launch Statistics",
            "Occupancy",
            "GPU and Memory Workload Distribution",
            "Source Counters",
        ]
    );
    let rows: usize = k.sections.iter().map(|s| s.metrics.len()).sum();
    assert_eq!(rows + k.rules.len(), 95);
    assert_eq!(k.rules.len(), 8);

    let sol_rule: Vec<_> = k.rules_named("SOLBottleneck").collect();
    assert_eq!(sol_rule.len(), 1);
    assert_eq!(sol_rule[0].section, "SpeedOfLight");
    assert_eq!(sol_rule[0].rule_type, "OPT");
    assert!(sol_rule[0]
        .description
        .starts_with("Memory is more heavily utilized than Compute"));
    assert!(sol_rule[0].description.contains("you're efficiently"));
    assert_eq!(sol_rule[0].speedup_type, None);
    assert_eq!(sol_rule[0].estimated_speedup, None);

    let smem: Vec<_> = k.rules_named("SharedMemoryConflicts").collect();
    assert_eq!(smem[0].speedup_type.as_deref(), Some("global"));
    assert_eq!(smem[0].estimated_speedup, Some(3.351));
    assert_eq!(k.rules_named("CPIStall").count(), 2);

    assert_eq!(
        k.metric("Launch Statistics", "Cluster Scheduling Policy"),
        Lookup::Text("PolicySpread")
    );
    assert_eq!(
        k.metric("Occupancy", "Block Limit Registers"),
        Lookup::Number(8.0, "block")
    );
    assert_eq!(
        k.metric("Occupancy", "Achieved Occupancy"),
        Lookup::Number(91.09, "%")
    );
    assert_eq!(
        k.metric("Memory Workload Analysis", "Memory Throughput"),
        Lookup::Number(3_128_085_181_898.85, "byte/s")
    );

    let w: Vec<_> = d.warnings().collect();
    assert_eq!(w.len(), 2);
    assert!(w[1]
        .text
        .starts_with("Unable to access the following 6 metrics"));
    assert!(d
        .other_lines
        .contains(&"padded_k n=4096 mismatches=0".to_string()));
}

#[test]
fn imported_details_match_the_raw_page_of_the_same_report() {
    let d = parse_details(&fixture("dev_import_details_tiled.csv")).unwrap();
    let r = raw("dev_import_raw_tiled.csv");
    assert_eq!(d.kernels.len(), 2);
    for (dk, rk) in d.kernels.iter().zip(&r.kernels) {
        assert_eq!(dk.id, rk.id);
        assert_eq!(dk.kernel_name, rk.kernel_name);
        let cmd = dk.section("Command line profiler metrics").unwrap();
        let listed: BTreeSet<&str> = cmd.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(listed, KLAB_METRICS.into_iter().collect());
        for m in &cmd.metrics {
            let shown = m.value.as_number().unwrap();
            let full = rk.number(&m.name).unwrap();
            // The details page rounds for display; the unit is the same.
            assert_eq!(m.unit, rk.metrics[&m.name].unit, "{}", m.name);
            assert!(
                (shown - full).abs() <= 0.005 + full.abs() * 1e-9,
                "{}: {shown} vs {full}",
                m.name
            );
        }
        assert_eq!(
            dk.metric(
                "Memory Workload Analysis",
                "Local Memory Spilling Request Overhead"
            ),
            Lookup::NoData
        );
        let sol: Vec<_> = dk.rules_named("SOLBottleneck").collect();
        assert_eq!(sol.len(), 1);
        assert_eq!(sol[0].rule_type, "INF");
    }
}

// ---------------------------------------------------------------- pages told apart

/// The details fixture with every metric row padded to the header's width (the four rule
/// columns left empty), as a CSV tool that rewrites rows writes it; still a details page.
fn details_with_full_rows() -> String {
    let text = fixture("ncu_details_padded.csv");
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(line);
        if line.starts_with("\"0\"") && line.ends_with(',') {
            out.push_str(",,,,");
        }
        out.push('\n');
    }
    out
}

/// Issue 15, item 6: the raw-page parser given a details page returned its launches with no
/// metrics (every details column has a space in its name, so all of them were identity
/// columns) whenever the rows were as wide as the header, and refused the real page's short
/// rows as "ragged". It now names the page.
#[test]
fn the_raw_parser_refuses_a_details_page() {
    let full = details_with_full_rows();
    // The padded page is a valid details page with the same content.
    assert_eq!(
        parse_details(&full).unwrap().kernels,
        parse_details(&fixture("ncu_details_padded.csv"))
            .unwrap()
            .kernels
    );
    for (what, text) in [
        ("full rows", full),
        ("as captured", fixture("ncu_details_padded.csv")),
        ("imported", fixture("dev_import_details_tiled.csv")),
    ] {
        let e = match parse_raw(&text) {
            Ok(r) => panic!(
                "{what}: read as a raw page: {} launches, {} metrics in the first",
                r.kernels.len(),
                r.kernels[0].metrics.len()
            ),
            Err(e) => e,
        };
        assert!(
            matches!(
                e,
                NcuError::WrongPage {
                    expected: Page::Raw,
                    found: Page::Details
                }
            ),
            "{what}: {e:?}"
        );
        assert_eq!(
            e.to_string(),
            "the CSV is ncu's details page (--page details: one row per section metric or rule result), not the raw page (--page raw: one row per launch, one column per metric) this parser reads",
            "{what}"
        );
    }
}

#[test]
fn the_details_parser_refuses_a_raw_page() {
    let e = parse_details(&fixture("ncu_raw_naive_metrics.csv")).unwrap_err();
    assert!(
        matches!(
            e,
            NcuError::WrongPage {
                expected: Page::Details,
                found: Page::Raw
            }
        ),
        "{e:?}"
    );
}

#[test]
fn read_page_tells_the_pages_apart_by_the_header() {
    for (name, page, launches) in [
        ("ncu_raw_naive_metrics.csv", Page::Raw, 3),
        ("ncu_raw_tiled_bankconflicts.csv", Page::Raw, 3),
        ("ncu_raw_sections_tiled.csv", Page::Raw, 1),
        ("dev_import_raw_tiled.csv", Page::Raw, 2),
        ("ncu_details_padded.csv", Page::Details, 1),
        ("dev_import_details_tiled.csv", Page::Details, 2),
    ] {
        let i = ncu::read_page(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(i.format, ncu::Format::Page(page), "{name}");
        assert_eq!(i.kernels.len(), launches, "{name}");
        assert!(i.ncu_argv.is_none());
    }
}

/// A details launch read as a raw-page record has the raw page's metrics of the same report
/// (up to the details page's display rounding), under their raw names and units.
#[test]
fn a_details_launch_reads_as_the_raw_page_of_the_same_report() {
    let d = parse_details(&fixture("dev_import_details_tiled.csv")).unwrap();
    let r = raw("dev_import_raw_tiled.csv");
    for (dk, rk) in d.kernels.iter().zip(&r.kernels) {
        let rec = dk.to_record();
        assert_eq!(
            (rec.id, &rec.kernel_name, rec.grid, rec.block),
            (rk.id, &rk.kernel_name, rk.grid, rk.block)
        );
        let names = SECTION_METRICS
            .iter()
            .map(|row| row.raw)
            .chain(KLAB_METRICS);
        for name in names {
            let (got, want) = (&rec.metrics[name], &rk.metrics[name]);
            assert_eq!(got.unit, want.unit, "{name}");
            let (g, w) = (
                got.value.as_number().unwrap(),
                want.value.as_number().unwrap(),
            );
            assert!(
                (g - w).abs() <= 0.005 + w.abs() * 1e-9,
                "{name}: {g} vs {w}"
            );
        }
        assert!(rec.device_attributes.is_empty());
    }
    // Every displayed name is one ncu prints in a --set full details page.
    let full = parse_details(&fixture("ncu_details_padded.csv")).unwrap();
    let rec = full.kernels[0].to_record();
    for row in SECTION_METRICS {
        assert!(
            rec.number(row.raw).is_some(),
            "{:?} / {:?} ({}) not in the --set full page",
            row.sections,
            row.shown,
            row.raw
        );
    }
    assert_eq!(
        rec.number_in("gpu__time_duration.sum", "ns"),
        Some(36_064.0)
    );
}

/// A details page of an older ncu names its Speed Of Light section and rows otherwise; the
/// same values are read from it under the same raw names. The pages are written here in the
/// layouts those versions printed (their identity columns, `nsecond` and `%` units), with
/// made-up numbers.
#[test]
fn older_speed_of_light_labels_read_as_the_same_metrics() {
    let page = |section: &str, rows: &[(&str, &str, &str)]| {
        let mut text = String::from(
            "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Kernel Time\",\"Context\",\"Stream\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n",
        );
        for (name, unit, value) in rows {
            text.push_str(&format!(
                "\"0\",\"4242\",\"app\",\"127.0.0.1\",\"step(int,float*)\",\"2020-Jun-01 10:00:00\",\"1\",\"7\",\"{section}\",\"{name}\",\"{unit}\",\"{value}\"\n"
            ));
        }
        text
    };
    let sol_2020 = page(
        "GPU Speed Of Light",
        &[
            ("SOL FB", "%", "41.25"),
            ("Memory [%]", "%", "41.25"),
            ("Duration", "nsecond", "7,512"),
            ("SOL L2", "%", "12.50"),
            ("SM [%]", "%", "20.75"),
            ("SOL TEX", "%", "10.00"),
            ("Elapsed Cycles", "cycle", "9,800"),
        ],
    );
    let sol_2022 = page(
        "GPU Speed Of Light Throughput",
        &[
            ("DRAM Throughput", "%", "41.25"),
            ("Duration", "usecond", "7.51"),
            ("L1/TEX Cache Throughput", "%", "10.00"),
            ("L2 Cache Throughput", "%", "12.50"),
            ("Compute (SM) [%]", "%", "20.75"),
            ("Memory [%]", "%", "41.25"),
        ],
    );
    for (era, text, ns) in [("2020", sol_2020, 7512.0), ("2022", sol_2022, 7510.0)] {
        let rec = parse_details(&text).unwrap().kernels[0].to_record();
        let pct = |name: &str| rec.number_in(name, "%");
        assert_eq!(
            pct("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
            Some(41.25),
            "{era}"
        );
        assert_eq!(
            pct("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
            Some(41.25),
            "{era}"
        );
        assert_eq!(
            pct("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            Some(20.75),
            "{era}"
        );
        assert_eq!(
            pct("lts__throughput.avg.pct_of_peak_sustained_elapsed"),
            Some(12.5),
            "{era}"
        );
        assert_eq!(
            pct("l1tex__throughput.avg.pct_of_peak_sustained_active"),
            Some(10.0),
            "{era}"
        );
        assert_eq!(
            rec.number_in("gpu__time_duration.sum", "ns"),
            Some(ns),
            "{era}"
        );
    }
    // A row another section shows under an older label is not read as Speed Of Light's.
    let elsewhere = page("Memory Workload Analysis", &[("Memory [%]", "%", "99")]);
    let rec = parse_details(&elsewhere).unwrap().kernels[0].to_record();
    assert_eq!(
        rec.number("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
        None
    );
}

// ---------------------------------------------------------------- listings and version

#[test]
fn query_metrics_filtered_listing() {
    let l = parse_query_metrics(&fixture("ncu_query_metrics.txt")).unwrap();
    assert_eq!(l.metrics.len(), 85);
    assert_eq!(l.device, None);
    let bank = l
        .get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld")
        .unwrap();
    assert_eq!(bank.metric_type, "Counter");
    assert_eq!(bank.unit, "");
    assert!(bank
        .description
        .starts_with("# of shared memory data bank conflicts"));
    let sectors = l.get("l1tex__t_sectors_pipe_lsu_mem_global_op_st").unwrap();
    assert_eq!(sectors.unit, "sector");
    assert_eq!(
        sectors.description,
        "# of sectors requested for global stores"
    );
    assert_eq!(l.get("dram__bytes_read").unwrap().unit, "byte");
    let ratio = l
        .get("l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld")
        .unwrap();
    assert_eq!(
        (ratio.metric_type.as_str(), ratio.unit.as_str()),
        ("Ratio", "sector")
    );
    let blank = l.metrics.iter().filter(|m| m.unit.is_empty()).count();
    assert_eq!(blank, 26);
    // This listing was filtered to sectors and bank conflicts.
    assert_eq!(
        l.unlisted(&KLAB_METRICS),
        [
            metrics::GLOBAL_LOAD_REQUESTS,
            metrics::GLOBAL_STORE_REQUESTS,
            metrics::SHARED_LOAD_WAVEFRONTS,
            metrics::SHARED_STORE_WAVEFRONTS,
            metrics::DRAM_THROUGHPUT_PCT,
            metrics::SM_THROUGHPUT_PCT,
            metrics::DURATION,
            metrics::ACHIEVED_OCCUPANCY_PCT,
        ]
    );
}

#[test]
fn query_metrics_real_listing_has_every_klab_metric() {
    let l = parse_query_metrics(&fixture("dev_query_metrics_excerpt.txt")).unwrap();
    assert_eq!(l.device.as_deref(), Some("NVIDIA H200 (GH100)"));
    assert!(
        l.unlisted(&KLAB_METRICS).is_empty(),
        "{:?}",
        l.unlisted(&KLAB_METRICS)
    );
    for m in KLAB_METRICS {
        let listed = l.contains(m);
        let unlisted_family = UNLISTED_PREFIXES.iter().any(|p| m.starts_with(p));
        assert!(listed != unlisted_family, "{m}");
    }
    // A description wrapped onto a continuation line.
    let w = l
        .get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld")
        .unwrap();
    assert_eq!(w.unit, "");
    assert!(
        w.description
            .starts_with("# of shared memory wavefronts processed by Data-Stage for LDS, LD, 3D "),
        "{}",
        w.description
    );
    assert!(!w.description.contains("  "));
    let t = l.get("dram__throughput").unwrap();
    assert_eq!(
        (t.metric_type.as_str(), t.unit.as_str()),
        ("Throughput", "%")
    );
    let dotted = l
        .get("FBSP.TriageCompute.dramc__read_throughput_internal_activity")
        .unwrap();
    assert!(dotted.description.ends_with("internal activity"));
    assert_eq!(l.get("gpu__time_duration").unwrap().unit, "ns");
    assert_eq!(l.messages.len(), 1);
    assert!(l.messages[0].text.contains("valid suffix"));
}

#[test]
fn version_of_the_real_binary() {
    let v = parse_version(&misc_section("ncu --version")).unwrap();
    assert_eq!(v.numbers, [2025, 3, 1, 0]);
    assert_eq!(v.build.as_deref(), Some("36398880"));
    assert_eq!(v.to_string(), "2025.3.1.0");
}

// ---------------------------------------------------------------- failures, real text

#[test]
fn no_kernels_profiled_is_a_clean_error() {
    for title in ["ncu /bin/true", "ncu --kernel-name no_such_kernel"] {
        let text = misc_section(title);
        let e = parse_raw(&text).unwrap_err();
        match &e {
            NcuError::NoKernelsProfiled { detail } => {
                assert_eq!(detail, "==WARNING== No kernels were profiled.")
            }
            other => panic!("{title}: {other:?}"),
        }
        assert!(matches!(
            parse_details(&text).unwrap_err(),
            NcuError::NoKernelsProfiled { .. }
        ));
    }
    // Older versions print it under ==PROF==.
    let e = parse_raw("==PROF== No kernels were profiled.\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "no kernels were profiled: ==PROF== No kernels were profiled."
    );
}

#[test]
fn ncu_errors_without_a_table_name_the_first_error() {
    let e = parse_raw(&misc_section("ncu --section NoSuchSection")).unwrap_err();
    assert!(matches!(e, NcuError::NoHeader { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "no CSV header (a line whose first field is \"ID\") in the ncu output; ncu said: \
         ==ERROR== Option '--section NoSuchSection' did not match any section."
    );
    // Without --csv ncu prints a text table (and `n/a` for an unknown metric): no header.
    let e = parse_raw(&misc_section("ncu --metrics no_such__metric.sum")).unwrap_err();
    assert!(matches!(e, NcuError::NoHeader { hint: None }), "{e:?}");
}

#[test]
fn counter_permission_is_a_policy_not_a_kernel_failure() {
    // The wording ncu documents for ERR_NVGPUCTRPERM (not captured here: the lent
    // machines run as root).
    let text = "==PROF== Connected to process 4242 (./probe)\n\
        ==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU \
        Performance Counters on the target device 0. For instructions on enabling permissions \
        and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM\n\
        naive_k n=4096 mismatches=0\n\
        ==PROF== Disconnected from process 4242\n\
        ==WARNING== No kernels were profiled.\n";
    for e in [
        parse_raw(text).unwrap_err(),
        parse_details(text).unwrap_err(),
    ] {
        assert!(matches!(e, NcuError::CounterPermission { .. }), "{e:?}");
        let s = e.to_string();
        assert!(s.contains("ERR_NVGPUCTRPERM"), "{s}");
        assert!(s.contains("permission policy"), "{s}");
        assert!(s.contains("not a kernel failure"), "{s}");
        assert!(s.contains("target device 0"), "{s}");
        assert!(!s.contains('\n'));
    }
    // Even next to a table, the failure is not hidden.
    let with_table = format!("{}{text}", fixture("ncu_raw_naive_metrics.csv"));
    assert!(matches!(
        parse_raw(&with_table).unwrap_err(),
        NcuError::CounterPermission { .. }
    ));
}

// ---------------------------------------------------------------- edge cases

#[test]
fn empty_and_headerless_inputs() {
    assert!(matches!(parse_raw(""), Err(NcuError::Empty)));
    assert!(matches!(parse_raw(" \n\r\n\t"), Err(NcuError::Empty)));
    assert!(matches!(parse_details(""), Err(NcuError::Empty)));
    assert_eq!(
        parse_raw("").unwrap_err().to_string(),
        "the ncu output is empty"
    );
    // The naive capture's preamble alone.
    let naive = fixture("ncu_raw_naive_metrics.csv");
    let preamble = &naive[..naive.find("\"ID\"").unwrap()];
    let e = parse_raw(preamble).unwrap_err();
    assert!(matches!(e, NcuError::NoHeader { hint: None }), "{e:?}");
    // A line that merely starts with ID is not a header.
    assert!(matches!(
        parse_raw("IDENTITY,x\n0,1\n").unwrap_err(),
        NcuError::NoHeader { .. }
    ));
}

#[test]
fn header_and_units_without_kernel_rows() {
    let naive = fixture("ncu_raw_naive_metrics.csv");
    let start = naive.find("\"ID\"").unwrap();
    let lines: Vec<&str> = naive[start..].lines().collect();
    let header_and_units = format!("{}\n{}\n", lines[0], lines[1]);
    let e = parse_raw(&header_and_units).unwrap_err();
    assert!(
        matches!(&e, NcuError::NoKernelsProfiled { detail } if detail.contains("no kernel rows")),
        "{e:?}"
    );
    // With ncu's own message, that message is the detail.
    let e = parse_raw(&format!(
        "{header_and_units}==WARNING== No kernels were profiled.\n"
    ))
    .unwrap_err();
    assert!(
        matches!(&e, NcuError::NoKernelsProfiled { detail } if detail.contains("==WARNING==")),
        "{e:?}"
    );
}

#[test]
fn crlf_line_endings_parse_the_same() {
    for name in ["ncu_raw_naive_metrics.csv", "ncu_raw_sections_tiled.csv"] {
        let lf = fixture(name);
        let crlf = lf.replace('\n', "\r\n");
        let a = parse_raw(&lf).unwrap();
        let b = parse_raw(&crlf).unwrap();
        assert_eq!(a.kernels, b.kernels, "{name}");
        assert_eq!(a.columns, b.columns, "{name}");
        assert_eq!(a.other_lines, b.other_lines, "{name}");
        assert_eq!(a.messages, b.messages, "{name}");
    }
    let lf = fixture("ncu_details_padded.csv");
    assert_eq!(
        parse_details(&lf).unwrap().kernels,
        parse_details(&lf.replace('\n', "\r\n")).unwrap().kernels
    );
}

#[test]
fn quoting_edge_cases() {
    let text = "app: \"unbalanced quote in the application's output\n\
        \"ID\",\"Kernel Name\",\"Block Size\",\"a__b.sum\",\"note__x\",\"x__y\"\n\
        \"\",\"\",\"\",\"byte\",\"\",\"\"\n\
        \"0\",\"k<\"\"a,b\"\">(int, float)\",\"(1, 2, 3)\",\"1,234,567.5\",\"say \"\"hi\"\", then\nbye\",\"\"\n\
        \"1\",\"plain\",\"(4, 5, 6)\",\"1,2\",\"n/a\",\"no data\"\n";
    let r = parse_raw(text).unwrap();
    assert_eq!(r.kernels.len(), 2);
    let k = &r.kernels[0];
    assert_eq!(k.kernel_name, "k<\"a,b\">(int, float)");
    assert_eq!(k.function_name(), "k");
    assert_eq!(k.block, Some([1, 2, 3]));
    assert_eq!(k.metric("a__b.sum"), Lookup::Number(1_234_567.5, "byte"));
    assert_eq!(k.metric("note__x"), Lookup::Text("say \"hi\", then\nbye"));
    assert_eq!(k.metric("x__y"), Lookup::NoData);
    let k = &r.kernels[1];
    // "1,2" is not a grouped number: text, not 12.
    assert_eq!(k.metric("a__b.sum"), Lookup::Text("1,2"));
    assert_eq!(k.metric("note__x"), Lookup::NoData);
    assert_eq!(k.metric("x__y"), Lookup::NoData);
    assert_eq!(
        r.other_lines,
        ["app: \"unbalanced quote in the application's output"]
    );
}

#[test]
fn ragged_row_names_its_row_and_line() {
    let naive = fixture("ncu_raw_naive_metrics.csv");
    // Drop the last field of the second kernel row (row 4: header, units, kernel 0, kernel
    // 1), on line 15 of the file.
    let mut lines: Vec<String> = naive.lines().map(str::to_string).collect();
    let i = lines.iter().position(|l| l.starts_with("\"1\",")).unwrap();
    assert_eq!(i + 1, 15);
    let cut = lines[i].rfind(',').unwrap();
    lines[i].truncate(cut);
    let e = parse_raw(&lines.join("\n")).unwrap_err();
    match e {
        NcuError::RaggedRow {
            row,
            line,
            found,
            expected,
        } => assert_eq!((row, line, found, expected), (4, 15, 288, 289)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse_raw(&lines.join("\n")).unwrap_err().to_string(),
        "CSV row 4 (line 15) has 288 fields but the header has 289"
    );
    // One field too many.
    let e = parse_raw("\"ID\",\"a__b\"\n\"0\",\"1\",\"2\"\n").unwrap_err();
    assert!(matches!(
        e,
        NcuError::RaggedRow {
            row: 2,
            line: 2,
            found: 3,
            expected: 2
        }
    ));
}

#[test]
fn truncated_capture_is_an_error_not_a_short_report() {
    let naive = fixture("ncu_raw_naive_metrics.csv");
    let last_row = naive.rfind("\"2\",").unwrap();
    // Cut inside a quoted field of the last row.
    let cut = &naive[..last_row + 300];
    let cut = &cut[..cut.rfind('"').unwrap() + 3];
    let e = parse_raw(cut).unwrap_err();
    assert!(
        matches!(
            e,
            NcuError::UnterminatedQuote { line: 16 } | NcuError::RaggedRow { line: 16, .. }
        ),
        "{e:?}"
    );
    // Cut between fields.
    let cut = &naive[..last_row + 300];
    let cut = &cut[..cut.rfind("\",").unwrap() + 1];
    let e = parse_raw(cut).unwrap_err();
    assert!(
        matches!(
            e,
            NcuError::RaggedRow {
                row: 5,
                line: 16,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn trailing_output_and_messages_after_the_table() {
    let text = format!(
        "{}==PROF== Disconnected from process 570\nafter the table\n==ERROR== something late\n\n",
        fixture("ncu_raw_naive_metrics.csv")
    );
    let r = parse_raw(&text).unwrap();
    assert_eq!(r.kernels.len(), 3);
    assert_eq!(r.other_lines.last().unwrap(), "after the table");
    let errors: Vec<_> = r.errors().collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].text, "something late");
    assert_eq!(errors[0].line, 19);
    // "No kernels were profiled" only fails a report that has no kernel rows.
    let r = parse_raw(&format!("{text}==WARNING== No kernels were profiled.\n")).unwrap();
    assert_eq!(r.kernels.len(), 3);
    assert_eq!(r.warnings().count(), 2);
}

#[test]
fn reports_round_trip_through_json() {
    let r = raw("ncu_raw_naive_metrics.csv");
    let json = serde_json::to_string(&r).unwrap();
    let back: RawReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    let d = parse_details(&fixture("ncu_details_padded.csv")).unwrap();
    let json = serde_json::to_string(&d).unwrap();
    assert_eq!(
        serde_json::from_str::<ncu::DetailsReport>(&json).unwrap(),
        d
    );
}

// ---------------------------------------------------------------- argument vectors

fn strings(v: &[OsString]) -> Vec<String> {
    v.iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

#[test]
fn profile_argv_with_klab_defaults() {
    // One validation launch and five warm-ups: the profiled launch is the sixth skip.
    let req = ProfileRequest::new(
        "naive_k",
        "artifacts/run-01/naive",
        "./transpose_lab",
        vec!["naive".into(), "4096".into(), "1".into()],
    )
    .skipping(1, 5);
    let v = strings(&req.argv(Path::new("/usr/local/cuda/bin/ncu")));
    let metrics_arg = KLAB_METRICS.join(",");
    let mut want: Vec<&str> = vec![
        "/usr/local/cuda/bin/ncu",
        "--kernel-name-base",
        "function",
        "--kernel-name",
        "naive_k",
        "--launch-skip",
        "6",
        "--launch-count",
        "1",
        "--clock-control",
        "none",
        "--cache-control",
        "all",
        "--force-overwrite",
        "--export",
        "artifacts/run-01/naive.ncu-rep",
    ];
    for s in DEFAULT_SECTIONS {
        want.push("--section");
        want.push(s);
    }
    want.extend([
        "--metrics",
        &metrics_arg,
        "./transpose_lab",
        "naive",
        "4096",
        "1",
    ]);
    assert_eq!(v, want);
    assert_eq!(
        req.report_path(),
        PathBuf::from("artifacts/run-01/naive.ncu-rep")
    );
}

#[test]
fn clock_control_none_is_always_there() {
    for cache in [CacheControl::All, CacheControl::None] {
        for (validation, warmups) in [(0, 0), (1, 5), (3, 100)] {
            let mut req = ProfileRequest::new("k", "r", "p", vec![]).skipping(validation, warmups);
            req.cache_control = cache;
            req.metrics.clear();
            req.sections.clear();
            let v = strings(&req.argv(Path::new("ncu")));
            let at = v.iter().position(|a| a == "--clock-control").unwrap();
            assert_eq!(v[at + 1], "none");
            assert_eq!(v.iter().filter(|a| *a == "--clock-control").count(), 1);
            let at = v.iter().position(|a| a == "--launch-skip").unwrap();
            assert_eq!(v[at + 1], (validation + warmups).to_string());
            let at = v.iter().position(|a| a == "--cache-control").unwrap();
            assert_eq!(v[at + 1], cache.as_str());
            // The program comes last, after every ncu option.
            assert_eq!(v.last().unwrap(), "p");
        }
    }
}

#[test]
fn klab_metrics_are_real_names() {
    // Every constant appears as a column with a value in the real imported report.
    let r = raw("dev_import_raw_tiled.csv");
    for m in KLAB_METRICS {
        assert!(r.has_metric(m), "{m}");
    }
    let unique: BTreeSet<&str> = KLAB_METRICS.into_iter().collect();
    assert_eq!(unique.len(), KLAB_METRICS.len());
}
