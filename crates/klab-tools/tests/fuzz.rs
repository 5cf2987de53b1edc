//! Property tests over klab-tools' parsers of other tools' output: Nsight Compute's raw
//! and details CSV pages (and the import's page detection), its metric listing, version
//! line and value cells, and Compute Sanitizer's reports. Each meets arbitrary text and
//! mutations of the real captures in `tests/fixtures`; every case must end in `Ok` or
//! `NcuError` (the sanitizer parser always returns a report) without a panic, within
//! [`support::BOUND`], and what is accepted must keep the parser's stated invariants.
//! Case counts: `KLAB_FUZZ_CASES` (see klab-evidence's `tests/support/mutate.rs`).

#[path = "../../klab-evidence/tests/support/mutate.rs"]
mod support;

use klab_tools::ncu::{
    self, parse_details, parse_query_metrics, parse_raw, parse_value, read_page, Format, Page,
};
use klab_tools::sanitizer::{self, Severity, Tool};
use proptest::prelude::*;
use std::path::Path;
use support::{apply_text, config, edits, timed};

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_else(|e| panic!("{name}: {e}")))
        .into_owned()
}

const RAW_PAGES: [&str; 5] = [
    "ncu/ncu_raw_naive_metrics.csv",
    "ncu/ncu_raw_sections_tiled.csv",
    "ncu/ncu_raw_tiled_bankconflicts.csv",
    "ncu/klab_capture_naive.raw.csv",
    "ncu/dev_import_raw_tiled.csv",
];
const DETAILS_PAGES: [&str; 3] = [
    "ncu/ncu_details_padded.csv",
    "ncu/klab_capture_naive.details.csv",
    "ncu/dev_import_details_tiled.csv",
];
const OTHER_NCU: [&str; 5] = [
    "ncu/ncu_query_metrics.txt",
    "ncu/dev_query_metrics_excerpt.txt",
    "ncu/klab_capture_tiled_default_text.txt",
    "ncu/dev_profile_tiled.txt",
    "ncu/dev_misc.txt",
];

fn any_ncu_fixture() -> impl Strategy<Value = &'static str> {
    let all: Vec<&str> = RAW_PAGES
        .iter()
        .chain(&DETAILS_PAGES)
        .chain(&OTHER_NCU)
        .copied()
        .collect();
    proptest::sample::select(all)
}

/// Every ncu parser on `text`; what each accepts must be consistent.
fn check_ncu(text: &str) -> Result<(), TestCaseError> {
    let raw = timed("parse_raw", || parse_raw(text))?;
    if let Ok(r) = &raw {
        for k in &r.kernels {
            // A metric value is read from the column of that name, so every one is a column.
            for name in k.metrics.keys() {
                prop_assert!(r.column(name).is_some(), "metric {} is no column", name);
            }
        }
    }
    let details = timed("parse_details", || parse_details(text))?;
    if let Ok(d) = &details {
        let ids: Vec<u64> = d.kernels.iter().map(|k| k.id).collect();
        let mut unique = ids.clone();
        unique.dedup();
        // Documented: one kernel per ID, in order of first appearance.
        prop_assert_eq!(ids.len(), {
            unique.sort_unstable();
            unique.dedup();
            unique.len()
        });
    }
    if let Ok(page) = timed("read_page", || read_page(text))? {
        // The page it detected is the parser that accepted it.
        match page.format {
            Format::Page(Page::Raw) => prop_assert!(raw.is_ok(), "raw page the raw parser refuses"),
            Format::Page(Page::Details) => {
                prop_assert!(details.is_ok(), "details page the details parser refuses")
            }
            Format::Report => prop_assert!(false, "text read as a binary report"),
        }
    }
    let _listing = timed("parse_query_metrics", || parse_query_metrics(text))?;
    let _version = timed("parse_version", || ncu::parse_version(text))?;
    Ok(())
}

#[test]
fn every_page_fixture_reads_unmutated() {
    for name in RAW_PAGES {
        let page = read_page(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(page.format, Format::Page(Page::Raw), "{name}");
        assert!(!page.kernels.is_empty(), "{name}");
    }
    for name in DETAILS_PAGES {
        let page = read_page(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(page.format, Format::Page(Page::Details), "{name}");
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ncu_fixture_mutations_parse_or_refuse(name in any_ncu_fixture(), edits in edits(6)) {
        check_ncu(&apply_text(&fixture(name), &edits))?;
    }

    /// Short CSV-like text of quotes, commas and ncu's column names: the tokenizer's edges.
    #[test]
    fn ncu_arbitrary_csv_parses_or_refuses(
        text in "(\"|,|\n|\r|ID|Kernel Name|Section Name|Metric Name|Metric Value|Metric Unit|Block Size|Grid Size|\\(1, 1, 1\\)|==ERROR==|==PROF==|dram__bytes.sum|[0-9.,e-]){0,80}"
    ) {
        check_ncu(&text)?;
    }

    #[test]
    fn ncu_arbitrary_text_parses_or_refuses(text in "(?s).{0,300}") {
        check_ncu(&text)?;
    }

    /// A cell's value: a number, when one is read, is what the cell says (finite unless it
    /// spells an infinity or NaN).
    #[test]
    fn ncu_value_cells_parse(cell in "[-+0-9.,eE ]{0,24}|(?s).{0,24}") {
        let v = timed("parse_value", || parse_value(&cell))?;
        if let Some(x) = ncu::value::parse_number(&cell) {
            prop_assert!(!x.is_nan(), "{:?} read as NaN", cell);
        }
        let _ = v;
    }

    #[test]
    fn ncu_unit_conversion_takes_any_units(
        v in any::<f64>(),
        from in "(|[kKMGTPm]?(byte|B|second|s|Hz|%|cycle|inst)(/second)?)",
        to in "(|[kKMGTPm]?(byte|B|second|s|Hz|%|cycle|inst)(/second)?)",
    ) {
        if let Some(x) = timed("convert", || ncu::convert(v, &from, &to))? {
            // Same unit: the value itself.
            if from == to && v.is_finite() {
                prop_assert_eq!(x, v);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Compute Sanitizer

const SANITIZER: [&str; 21] = [
    "cases_initcheck_uninit.txt",
    "cases_memcheck_clean.txt",
    "cases_memcheck_exit3.txt",
    "cases_memcheck_leak.txt",
    "cases_memcheck_misaligned.txt",
    "cases_memcheck_missing_program.txt",
    "cases_memcheck_not_cuda.txt",
    "cases_memcheck_shared_oob.txt",
    "cases_racecheck_race.txt",
    "cases_racecheck_race_hazard.txt",
    "cases_synccheck_syncwarp.txt",
    "san_initcheck_read_uninit.txt",
    "san_memcheck_broken_33.txt",
    "san_memcheck_padded_clean.txt",
    "san_memcheck_square_past_end.txt",
    "san_memcheck_square_past_end_noflag_default.txt",
    "san_memcheck_triad_buggy.txt",
    "san_racecheck_broken_33.txt",
    "san_racecheck_padded_clean.txt",
    "san_racecheck_tiled_1024.txt",
    "san_synccheck_sync_divergent.txt",
];

fn tool() -> impl Strategy<Value = Tool> {
    proptest::sample::select(vec![
        Tool::Memcheck,
        Tool::Racecheck,
        Tool::Synccheck,
        Tool::Initcheck,
    ])
}

fn exit() -> impl Strategy<Value = Option<i32>> {
    prop_oneof![
        Just(None),
        Just(Some(0)),
        Just(Some(1)),
        Just(Some(86)),
        any::<Option<i32>>()
    ]
}

/// The gate's own rules: a report passes only on a clean (or, imported, unknown) exit with
/// no failing finding.
fn check_sanitizer(tool: Tool, text: &str, exit: Option<i32>) -> Result<(), TestCaseError> {
    let r = timed("sanitizer::parse", || {
        sanitizer::parse(tool, text, exit, 86)
    })?;
    prop_assert_eq!(r.tool, tool);
    prop_assert_eq!(r.exit_status, exit);
    if r.passes() {
        // An imported report has no exit status (None); a run's must be 0 to pass.
        prop_assert!(matches!(exit, None | Some(0)), "passed on exit {:?}", exit);
        prop_assert!(
            r.findings.iter().all(|f| f.severity == Severity::Info),
            "passed with failing findings"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn sanitizer_fixture_mutations_parse(
        name in proptest::sample::select(SANITIZER.to_vec()),
        tool in tool(),
        exit in exit(),
        edits in edits(6),
    ) {
        check_sanitizer(tool, &apply_text(&fixture(name), &edits), exit)?;
    }

    /// Lines built from the report's own vocabulary, in any order and count.
    #[test]
    fn sanitizer_arbitrary_reports_parse(
        lines in proptest::collection::vec(
            "(========= |COMPUTE-SANITIZER|ERROR SUMMARY: |RACECHECK SUMMARY: |Invalid __global__ (read|write) of size |[0-9]{1,22}| bytes| errors?| hazards displayed \\(| warnings\\)|at |0x[0-9a-f]{0,20}|in |default_program:|[a-z_]+\\(int\\)| by thread \\(|, |\\)| block \\(|Address |is out of bounds|Saved host backtrace|Program hit |Race reported between|Write access at |Read access at |Warning|Error|Info|Target application returned an error|\\.|=|\t| )*",
            0..24,
        ),
        tool in tool(),
        exit in exit(),
    ) {
        check_sanitizer(tool, &lines.join("\n"), exit)?;
    }

    #[test]
    fn sanitizer_arbitrary_text_parses(text in "(?s).{0,300}", tool in tool(), exit in exit()) {
        check_sanitizer(tool, &text, exit)?;
    }
}
