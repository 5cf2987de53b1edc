//! Reports by others (issue 29, item 8): reports the parser misread or misfiled. Each test
//! fails without its fix.

mod common;

use common::fixture;
use klab_tools::sanitizer::{parse, FindingKind, Hazard, Outcome, Report, Severity, Tool};

fn p(tool: Tool, text: &str, exit: Option<i32>) -> Report {
    parse(tool, text, exit, 99)
}

/// A cuda-memcheck 5.5 racecheck report, written in the format of the CUDA 5.5
/// cuda-memcheck manual's racecheck examples (tests/fixtures/written/README.md; not a
/// captured log). That era's `RACECHECK SUMMARY: N hazards displayed` counts the info
/// hazards too, while its `(E errors, W warnings)` grades only the others: the report
/// agrees with itself, and klab used to say it did not.
#[test]
fn cuda_memcheck_55_racecheck_counts_infos_in_displayed() {
    let (text, exit) = fixture("written/cudamemcheck55_racecheck_hazards.txt");
    let r = p(Tool::Racecheck, &text, exit);
    assert!(r.banner);
    assert_eq!(r.summary_mismatch, None, "{}", r.describe());
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.error_summary, Some(1));
    assert_eq!(r.warnings, Some(1));
    let got: Vec<(FindingKind, Severity, Option<Hazard>)> = r
        .findings
        .iter()
        .map(|f| (f.kind, f.severity, f.hazard))
        .collect();
    assert_eq!(
        got,
        [
            (FindingKind::Race, Severity::Error, Some(Hazard::Waw)),
            (FindingKind::Race, Severity::Warning, Some(Hazard::Raw)),
            (FindingKind::Race, Severity::Info, Some(Hazard::Waw)),
        ]
    );
    let f = &r.findings[0];
    assert_eq!(f.kernel.as_deref(), Some("WAW"));
    assert_eq!(f.location.as_deref(), Some("raceWAW.cu:18"));
    assert_eq!(f.thread, Some([31, 0, 0]));
    assert_eq!(f.block, Some([0, 0, 0]));
    assert_eq!(f.address.as_deref(), Some("0x0"));
    let info = &r.findings[2];
    assert_eq!(info.kernel.as_deref(), Some("rowSum"));
    assert_eq!(info.location.as_deref(), Some("raceWAW.cu:24"));
    assert_eq!(info.address.as_deref(), Some("0x80"));
    assert!(info
        .raw
        .starts_with("========= INFO:(Identical data being written) Potential WAW"));
    assert!(
        r.describe()
            .starts_with("racecheck: found errors; summary 1 error, 1 warning; findings: 1 race (1 hazards), 1 race warning (1 hazards), 1 race info (1 hazards)"),
        "{}",
        r.describe()
    );

    for ending in ["\r\n", "\r"] {
        assert_eq!(
            p(Tool::Racecheck, &text.replace('\n', ending), exit),
            r,
            "{ending:?}"
        );
    }

    // Without the info block the count no longer adds up either way: said.
    let cut = text
        .split("=========\n")
        .filter(|b| !b.contains("INFO:"))
        .collect::<Vec<_>>()
        .join("=========\n");
    let r = p(Tool::Racecheck, &cut, exit);
    assert_eq!(r.findings.len(), 2);
    assert_eq!(
        r.summary_mismatch.as_deref(),
        Some(
            "RACECHECK SUMMARY displays 3 hazards but the report itemises 2 (1 errors, 1 warnings)"
        ),
    );
    // A breakdown that grades the hazards otherwise is still said, infos counted or not.
    let regraded = text.replace("(1 error, 1 warning)", "(2 errors, 0 warnings)");
    let r = p(Tool::Racecheck, &regraded, exit);
    assert_eq!(
        r.summary_mismatch.as_deref(),
        Some("RACECHECK SUMMARY grades 2 errors and 0 warnings but the report itemises 1 and 1"),
    );
}
