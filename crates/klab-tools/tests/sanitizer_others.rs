//! Reports by others (issue 29, item 8): reports the parser misread or misfiled. Each test
//! fails without its fix.

mod common;

use std::path::Path;

use common::{all_fixtures, fixture, fixture_path};
use klab_tools::sanitizer::{
    import, parse, FindingKind, Hazard, ImportError, Outcome, Report, Severity, Tool,
};

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

/// The tools `klab sanitize --import` accepts the report at `path` under.
fn accepted_under(path: &Path) -> Vec<Tool> {
    Tool::ALL
        .into_iter()
        .filter(|&t| match import(t, path) {
            Ok(_) => true,
            Err(ImportError::OtherTool {
                given, written_by, ..
            }) => {
                assert_eq!(given, t);
                assert!(!written_by.is_empty() && !written_by.contains(&t));
                false
            }
            Err(e) => panic!("{}: {e}", path.display()),
        })
        .collect()
}

const ALL: [Tool; 4] = Tool::ALL;
const MEMCHECK: [Tool; 1] = [Tool::Memcheck];
const RACECHECK: [Tool; 1] = [Tool::Racecheck];
const INITCHECK: [Tool; 1] = [Tool::Initcheck];
const NOT_RACECHECK: [Tool; 3] = [Tool::Memcheck, Tool::Synccheck, Tool::Initcheck];

/// Every real report (the H200 captures in tests/fixtures, copied unmodified from
/// shared/fixtures/h200/sanitizer and the cases and audit captures beside them) is
/// accepted under the tool that wrote it, and refused under a tool its content rules out.
/// Before the fix every one was accepted under every tool.
#[test]
fn a_real_report_is_refused_under_a_tool_that_did_not_write_it() {
    let want: &[(&str, &[Tool])] = &[
        ("cases_initcheck_uninit.txt", &INITCHECK),
        // Clean memcheck runs: `--leak-check full` writes a LEAK SUMMARY.
        ("cases_memcheck_clean.txt", &MEMCHECK),
        ("cases_memcheck_exit3.txt", &MEMCHECK),
        ("cases_memcheck_leak.txt", &MEMCHECK),
        ("cases_memcheck_misaligned.txt", &MEMCHECK),
        // The tool could not run: nothing says which it was.
        ("cases_memcheck_missing_program.txt", &ALL),
        ("cases_memcheck_not_cuda.txt", &ALL),
        ("cases_memcheck_shared_oob.txt", &MEMCHECK),
        ("cases_racecheck_race.txt", &RACECHECK),
        ("cases_racecheck_race_hazard.txt", &RACECHECK),
        // `ERROR SUMMARY: 0 errors` alone: any tool but racecheck.
        ("cases_synccheck_syncwarp.txt", &NOT_RACECHECK),
        ("klab_audit_memcheck_gelu_pair_overread.txt", &MEMCHECK),
        ("klab_audit_racecheck_gemm_no_second_sync.txt", &RACECHECK),
        ("san_initcheck_read_uninit.txt", &INITCHECK),
        ("san_memcheck_broken_33.txt", &NOT_RACECHECK),
        ("san_memcheck_padded_clean.txt", &MEMCHECK),
        ("san_memcheck_square_past_end.txt", &MEMCHECK),
        ("san_memcheck_square_past_end_noflag_default.txt", &MEMCHECK),
        ("san_memcheck_triad_buggy.txt", &MEMCHECK),
        ("san_racecheck_broken_33.txt", &RACECHECK),
        ("san_racecheck_padded_clean.txt", &RACECHECK),
        ("san_racecheck_tiled_1024.txt", &RACECHECK),
        ("san_synccheck_sync_divergent.txt", &NOT_RACECHECK),
        ("written/cudamemcheck55_racecheck_hazards.txt", &RACECHECK),
    ];
    let mut names: Vec<&str> = want.iter().map(|(n, _)| *n).collect();
    names.push("san_version.txt");
    assert_eq!(
        all_fixtures()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        names
            .iter()
            .filter(|n| !n.contains('/'))
            .copied()
            .collect::<Vec<_>>(),
        "a new fixture needs a row here"
    );
    for (name, tools) in want {
        assert_eq!(accepted_under(&fixture_path(name)), *tools, "{name}");
    }

    let path = fixture_path("san_racecheck_broken_33.txt");
    let e = import(Tool::Memcheck, &path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{} was written by racecheck, not memcheck (its RACECHECK SUMMARY line): import it with --tool racecheck",
            path.display()
        )
    );
    let path = fixture_path("san_memcheck_broken_33.txt");
    let e = import(Tool::Racecheck, &path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{} was written by memcheck, synccheck or initcheck, not racecheck (it has an ERROR SUMMARY line and no RACECHECK SUMMARY line, which Compute Sanitizer's racecheck writes in its place)",
            path.display()
        )
    );
    let path = fixture_path("san_initcheck_read_uninit.txt");
    let e = import(Tool::Synccheck, &path).unwrap_err();
    assert!(
        e.to_string().ends_with(
            "was written by initcheck, not synccheck (its uninitialized global read findings): import it with --tool initcheck"
        ),
        "{e}"
    );
}

/// A report that does not say which tool wrote it is accepted under any: a clean report
/// under the old `CUDA-MEMCHECK` banner (whose racecheck may have written an ERROR SUMMARY)
/// or without a banner, and a file whose signs contradict each other.
#[test]
fn a_report_that_does_not_say_its_tool_is_accepted_under_any() {
    let dir = tempfile::tempdir().unwrap();
    let (clean, _) = fixture("san_memcheck_broken_33.txt");
    let (race, _) = fixture("san_racecheck_broken_33.txt");
    for (name, text) in [
        (
            "old_banner.txt",
            clean.replace("========= COMPUTE-SANITIZER", "========= CUDA-MEMCHECK"),
        ),
        (
            "no_banner.txt",
            "========= ERROR SUMMARY: 0 errors\n".to_string(),
        ),
        (
            "contradicts.txt",
            format!("$ compute-sanitizer --tool memcheck ./probe\n{race}"),
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        assert_eq!(accepted_under(&path), ALL, "{name}");
    }
}

/// The command line saved at the top says the tool: its `--tool` (either spelling), else
/// memcheck, the default; an application's own `--tool` after the program is not read, and
/// another program's command line says nothing.
#[test]
fn the_saved_command_line_names_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    // The tool could not run: without its command line the report says nothing.
    let (failed, _) = fixture("cases_memcheck_not_cuda.txt");
    for (line, tools) in [
        (
            "$ compute-sanitizer --tool synccheck ./app",
            &[Tool::Synccheck][..],
        ),
        (
            "$ CUDA_VISIBLE_DEVICES=0 /opt/cuda/bin/compute-sanitizer --tool=initcheck ./app",
            &INITCHECK,
        ),
        (
            "$ compute-sanitizer --error-exitcode 99 ./app --tool racecheck",
            &MEMCHECK,
        ),
        ("$ cuda-memcheck --tool racecheck ./app", &RACECHECK),
        ("$ klab check --tool racecheck", &ALL),
        ("$ compute-sanitizer --tool leakcheck ./app", &ALL),
    ] {
        let path = dir.path().join("r.txt");
        std::fs::write(&path, format!("{line}\n{failed}")).unwrap();
        assert_eq!(accepted_under(&path), tools, "{line}");
    }
    let e = import(
        Tool::Racecheck,
        &fixture_path("klab_audit_memcheck_gelu_pair_overread.txt"),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("not racecheck (its command line says --tool memcheck)"),
        "{e}"
    );
}

/// cuda-memcheck 11.x (written here in its format): the banner goes on to say the tool is
/// deprecated. Those two lines were counted as findings, so a clean report failed.
#[test]
fn cuda_memcheck_11s_deprecation_lines_are_not_findings() {
    let text = "========= CUDA-MEMCHECK\n\
                ========= This tool is deprecated and will be removed in a future release of the CUDA toolkit\n\
                ========= Please use the compute-sanitizer tool as a drop-in replacement\n\
                app output\n\
                ========= LEAK SUMMARY: 0 bytes leaked in 0 allocations\n\
                ========= ERROR SUMMARY: 0 errors\n";
    let r = p(Tool::Memcheck, text, None);
    assert_eq!(r.outcome, Outcome::Clean, "{}", r.describe());
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert_eq!(r.summary_mismatch, None);
}

/// cuda-memcheck failing itself (`Internal error (N)`, `No CUDA-MEMCHECK results found`):
/// the tool failed (exit 1), not findings in the kernel (exit 2).
#[test]
fn cuda_memchecks_internal_error_is_the_tool_failing() {
    let text = "loop: 0 done\n\
                ========= CUDA-MEMCHECK\n\
                ========= Error: process didn't terminate successfully\n\
                ========= Internal error (20)\n\
                ========= No CUDA-MEMCHECK results found\n";
    let r = p(Tool::Memcheck, text, None);
    assert!(
        matches!(&r.outcome, Outcome::ToolFailed { reason } if reason.contains("Internal error (20)")),
        "{}",
        r.describe()
    );
    assert!(r.findings.is_empty(), "{:?}", r.findings);
}

/// A report saved from a terminal that colours it: the codes around the prefix hid every
/// line from the parser (a real invalid read was lost), and codes around whole lines made
/// the banner a finding.
#[test]
fn a_coloured_report_reads_as_the_plain_one() {
    let plain = "========= COMPUTE-SANITIZER\n\
                 ========= Invalid __global__ read of size 4 bytes\n\
                 =========     at scale(float *, int)+0x70 in scale.cu:6\n\
                 =========     by thread (255,0,0) in block (3,0,0)\n\
                 =========     Address 0x7f0000000ffc is out of bounds\n\
                 ========= \n\
                 ========= ERROR SUMMARY: 1 error\n";
    let red = |s: &str| format!("\u{1b}[1;31m{s}\u{1b}[0m");
    let prefix_only: String = plain
        .lines()
        .map(|l| format!("{}{}\n", red("========="), &l[9..]))
        .collect();
    let whole_lines: String = plain.lines().map(|l| format!("{}\n", red(l))).collect();
    let want = p(Tool::Memcheck, plain, None);
    assert_eq!(want.outcome, Outcome::FoundErrors);
    for coloured in [prefix_only, whole_lines] {
        let got = p(Tool::Memcheck, &coloured, None);
        assert_eq!(got.outcome, want.outcome, "{coloured:?}");
        assert_eq!(got.findings.len(), 1, "{:?}", got.findings);
        assert_eq!(got.findings[0].kind, want.findings[0].kind);
        assert_eq!(got.findings[0].location, want.findings[0].location);
        assert_eq!(got.summary_mismatch, None);
    }
}

/// pytest's summary rule (`========= 1 passed in 0.10s =========` on a narrow terminal)
/// starts like the tool's prefix; it is the application's line, not a finding.
#[test]
fn a_rule_of_equals_signs_around_text_is_the_applications() {
    let text = "========= COMPUTE-SANITIZER\n\
                ========= 1 passed in 0.10s =========\n\
                ========= ERROR SUMMARY: 0 errors\n";
    let r = p(Tool::Memcheck, text, None);
    assert_eq!(r.outcome, Outcome::Clean, "{}", r.describe());
}
