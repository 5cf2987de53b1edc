//! Reports by others (issue 29, item 8): pages that hold a value klab reads under another
//! name (`gpu__time_duration` without `.sum`, or its `.avg`/`.max` roll-up; `dram__bytes.sum`
//! for read plus write; the compute capability as device attributes; the launch's grid and
//! block as counts) are read through `ncu::ALIASES`, where klab showed `n/a`.
//!
//! No real page with those names is at hand, so each case is built from a real H200 page
//! (tests/fixtures/ncu: copies of shared/fixtures/h200/ncu, and for DRAM bytes, which those
//! captures lack, `dev_import_raw_tiled.csv` from the same machine) by renaming or dropping
//! its columns here, in the test; the values are the page's own.

#[path = "common/csv_edit.rs"]
mod csv_edit;

use std::path::PathBuf;

use csv_edit::edited;
use klab_tools::ncu::{alias, metrics, parse_details, parse_raw, Alias, KernelRecord};

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ncu")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn raw_first(text: &str) -> KernelRecord {
    parse_raw(text).unwrap().kernels.remove(0)
}

#[test]
fn the_aliases_are_one_table() {
    assert_eq!(
        alias(metrics::DURATION),
        Some(Alias::Names(&[
            "gpu__time_duration",
            "gpu__time_duration.avg",
            "gpu__time_duration.max"
        ]))
    );
    assert_eq!(
        alias(metrics::DRAM_BYTES),
        Some(Alias::Parts(&[
            metrics::DRAM_BYTES_READ,
            metrics::DRAM_BYTES_WRITE
        ]))
    );
    assert_eq!(
        alias("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        None
    );
}

/// `gpu__time_duration.sum` under another name: without the suffix, or only its `.avg` or
/// `.max` roll-up (one launch: every roll-up is the same number).
#[test]
fn duration_under_another_name_is_read() {
    let text = fixture("ncu_raw_sections_tiled.csv");
    let want = raw_first(&text).number_in(metrics::DURATION, "ns");
    assert_eq!(want, Some(78_464.0));
    const ROLLUPS: [&str; 4] = [
        "gpu__time_duration.sum",
        "gpu__time_duration.avg",
        "gpu__time_duration.max",
        "gpu__time_duration.min",
    ];
    fn drop_but(keep: &str, to: &'static str) -> Vec<(&'static str, &'static str)> {
        ROLLUPS
            .iter()
            .map(|r| (*r, if *r == keep { to } else { "" }))
            .collect()
    }
    for renames in [
        drop_but("gpu__time_duration.sum", "gpu__time_duration"),
        drop_but("gpu__time_duration.avg", "gpu__time_duration.avg"),
        drop_but("gpu__time_duration.max", "gpu__time_duration.max"),
    ] {
        let page = edited(&text, &renames, None);
        let k = raw_first(&page);
        assert!(!k.metrics.contains_key(metrics::DURATION), "{renames:?}");
        assert_eq!(k.number_in(metrics::DURATION, "ns"), want, "{renames:?}");
        assert!(!k.metric(metrics::DURATION).is_absent(), "{renames:?}");
    }
    // Nothing under any name: still absent.
    let page = edited(&text, &drop_but("", ""), None);
    assert!(raw_first(&page).metric(metrics::DURATION).is_absent());
}

/// DRAM bytes as one total: read plus write when both are there, else `dram__bytes.sum`.
#[test]
fn dram_bytes_as_one_total_are_read() {
    let text = fixture("dev_import_raw_tiled.csv");
    let k = raw_first(&text);
    let read = k.number_in(metrics::DRAM_BYTES_READ, "byte").unwrap();
    let write = k.number_in(metrics::DRAM_BYTES_WRITE, "byte").unwrap();
    assert_eq!(k.number_in(metrics::DRAM_BYTES, "byte"), Some(read + write));
    // The page's own Mbyte figures, summed as the total ncu would print.
    let mbyte = |name: &str| k.number_in(name, "Mbyte").unwrap();
    let total = format!(
        "{:.6}",
        mbyte(metrics::DRAM_BYTES_READ) + mbyte(metrics::DRAM_BYTES_WRITE)
    );
    assert_eq!(total, "114.394112");
    let page = edited(
        &text,
        &[
            (metrics::DRAM_BYTES_READ, metrics::DRAM_BYTES),
            (metrics::DRAM_BYTES_WRITE, ""),
        ],
        Some((metrics::DRAM_BYTES_READ, &total)),
    );
    let k = raw_first(&page);
    assert!(k.metric(metrics::DRAM_BYTES_READ).is_absent());
    let got = k.number_in(metrics::DRAM_BYTES, "byte").unwrap();
    assert!(
        (got - (read + write)).abs() < 1.0,
        "{got} vs {}",
        read + write
    );
}

/// Without the `CC`, `Grid Size` and `Block Size` columns, the compute capability comes
/// from the device attributes and the grid and block from the launch statistics (counts:
/// the shapes are not on the page).
#[test]
fn launch_and_device_facts_without_the_identity_columns_are_read() {
    let text = fixture("ncu_raw_naive_metrics.csv");
    let k = raw_first(&text);
    assert_eq!(k.compute_capability().as_deref(), Some("9.0"));
    assert_eq!((k.grid_total(), k.block_total()), (Some(16_384), Some(256)));
    let page = edited(
        &text,
        &[("CC", ""), ("Grid Size", ""), ("Block Size", "")],
        None,
    );
    let k = raw_first(&page);
    assert_eq!((k.cc.as_str(), k.grid, k.block), ("", None, None));
    assert_eq!(k.compute_capability().as_deref(), Some("9.0"));
    assert_eq!((k.grid_total(), k.block_total()), (Some(16_384), Some(256)));

    // The details page: Launch Statistics' Grid Size and Block Size rows.
    let text = fixture("ncu_details_padded.csv");
    let page = edited(
        &text,
        &[("CC", ""), ("Grid Size", ""), ("Block Size", "")],
        None,
    );
    let d = parse_details(&page).unwrap();
    assert_eq!(
        d.kernels[0].sections,
        parse_details(&text).unwrap().kernels[0].sections,
        "the edit keeps every row"
    );
    let k = d.kernels[0].to_record();
    assert_eq!((k.grid, k.block), (None, None));
    assert_eq!((k.grid_total(), k.block_total()), (Some(16_384), Some(256)));
    // A details page has no device attributes: no other source of the CC.
    assert_eq!(k.compute_capability(), None);
    assert_eq!(k.number_in(metrics::DURATION, "ns"), Some(36_064.0));
    // SpeedOfLight's "DRAM Throughput" row is the GPU-level twin of klab's metric.
    assert_eq!(k.number_in(metrics::DRAM_THROUGHPUT_PCT, "%"), Some(65.05));
}
