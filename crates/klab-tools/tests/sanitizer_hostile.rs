//! Reports written by others that the parser once misread (issue 15): other line endings,
//! the prefix after application text, racecheck's severities, and a summary count that
//! disagrees with the findings. Each test fails on the parser before the fix.

mod common;

use common::{all_fixtures, fixture};
use klab_tools::sanitizer::{parse, FindingKind, Outcome, Report, Severity, Tool};

fn p(tool: Tool, text: &str, exit: Option<i32>) -> Report {
    parse(tool, text, exit, 99)
}

#[test]
fn racecheck_report_with_cr_only_line_endings_is_read() {
    let (text, exit) = fixture("san_racecheck_broken_33.txt");
    let lf = p(Tool::Racecheck, &text, exit);
    let cr = p(Tool::Racecheck, &text.replace('\n', "\r"), exit);
    assert_eq!(cr.outcome, Outcome::FoundErrors, "{}", cr.describe());
    assert_eq!(cr.findings.len(), 48);
    assert_eq!(cr, lf);
}

#[test]
fn every_fixture_reads_the_same_under_every_line_ending() {
    for name in all_fixtures() {
        let (text, exit) = fixture(&name);
        for tool in Tool::ALL {
            let lf = p(tool, &text, exit);
            for ending in ["\r\n", "\r"] {
                let other = p(tool, &text.replace('\n', ending), exit);
                assert_eq!(other, lf, "{name} {tool} {ending:?}");
            }
        }
    }
}

#[test]
fn no_real_report_disagrees_with_its_summary() {
    for name in all_fixtures() {
        let (text, exit) = fixture(&name);
        let tool = Tool::ALL
            .into_iter()
            .find(|t| name.contains(t.as_str()))
            .unwrap_or(Tool::Memcheck);
        let r = p(tool, &text, exit);
        assert_eq!(r.summary_mismatch, None, "{name}: {}", r.describe());
    }
}

const TWO_WRITES: &str = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at square+0x90 in k.cu:7
=========     by thread (3,0,0) in block (1,0,0)
=========     Address 0x7f0000000a64 is out of bounds
=========
result: partial line from the application========= Invalid __global__ write of size 4 bytes
=========     at square+0x90 in k.cu:7
=========     by thread (4,0,0) in block (1,0,0)
=========     Address 0x7f0000000a68 is out of bounds
=========
========= ERROR SUMMARY: 2 errors
";

#[test]
fn memcheck_finding_after_application_text_is_kept() {
    let r = p(Tool::Memcheck, TWO_WRITES, Some(99));
    assert_eq!(r.findings.len(), 2, "{}", r.describe());
    let f = &r.findings[1];
    assert_eq!(f.kind, FindingKind::InvalidGlobalWrite);
    assert_eq!(f.thread, Some([4, 0, 0]));
    assert_eq!(f.address.as_deref(), Some("0x7f0000000a68"));
    assert!(
        f.raw.starts_with("========= Invalid __global__ write"),
        "the finding's text is the tool's, without the application's: {:?}",
        f.raw
    );
    assert_eq!(r.summary_mismatch, None);
    // A rule of `=` in the application's output is still not the prefix.
    let ruled = "==========\nresults ===============\n========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
    let r = p(Tool::Memcheck, ruled, Some(0));
    assert_eq!(r.outcome, Outcome::Clean, "{}", r.describe());
    assert!(r.findings.is_empty() && r.notes.is_empty());
}

#[test]
fn summary_count_that_disagrees_with_the_findings_is_said() {
    let text = TWO_WRITES.replace("ERROR SUMMARY: 2 errors", "ERROR SUMMARY: 3 errors");
    let r = p(Tool::Memcheck, &text, Some(99));
    assert_eq!(r.findings.len(), 2);
    let m = r.summary_mismatch.as_deref().expect("a mismatch");
    assert_eq!(m, "ERROR SUMMARY counts 3 errors but the report itemises 2");
    assert!(
        r.describe()
            .contains("summary disagrees: ERROR SUMMARY counts 3 errors"),
        "{}",
        r.describe()
    );
    // Errors over --print-limit are counted but not printed: that is no disagreement.
    let limited = TWO_WRITES.replace(
        "========= ERROR SUMMARY: 2 errors\n",
        "========= ERROR SUMMARY: 5 errors\n========= ERROR SUMMARY: 3 errors were not printed\n",
    );
    assert_eq!(p(Tool::Memcheck, &limited, Some(99)).summary_mismatch, None);
    // Racecheck: displayed hazards against the race blocks.
    let (race, exit) = fixture("san_racecheck_broken_33.txt");
    let race = race.replace(
        "12 hazards displayed (12 errors",
        "13 hazards displayed (13 errors",
    );
    let r = p(Tool::Racecheck, &race, exit);
    assert_eq!(
        r.summary_mismatch.as_deref(),
        Some("RACECHECK SUMMARY displays 13 hazards but the report itemises 12 (12 errors, 0 warnings)")
    );
}

const GRADED: &str = "\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at k+0x10 in k.cu:5
=========     and Read access at k+0x20 in k.cu:6 [8 hazards]
=========
========= Warning: Race reported between Write access at k+0x30 in k.cu:9
=========     and Write access at k+0x30 in k.cu:9 [4 hazards]
=========
========= Info: Race reported between Write access at k+0x40 in k.cu:12
=========     and Write access at k+0x40 in k.cu:12 [32 hazards]
=========
========= INFO:(Identical data being written) Potential WAW hazard detected at __shared__ 0x0 in block (0, 0, 0) :
=========     Write Thread (0, 0, 0) at k+0x40 in k.cu:12
=========     Write Thread (1, 0, 0) at k+0x40 in k.cu:12
=========
========= Race reported between Write access at k+0x50 in k.cu:14 and Read access at k+0x60 in k.cu:15 (Warning)
=========
========= RACECHECK SUMMARY: 3 hazards displayed (1 errors, 2 warnings)
";

#[test]
fn racecheck_severity_is_kept_and_shown() {
    let r = p(Tool::Racecheck, GRADED, Some(99));
    let got: Vec<Severity> = r.findings.iter().map(|f| f.severity).collect();
    assert_eq!(
        got,
        [
            Severity::Error,
            Severity::Warning,
            Severity::Info,
            Severity::Info,
            Severity::Warning
        ]
    );
    assert!(r.findings.iter().all(|f| f.kind == FindingKind::Race));
    assert_eq!(r.findings[4].location.as_deref(), Some("k.cu:14"));
    assert_eq!(r.findings[4].peer_location.as_deref(), Some("k.cu:15"));
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.summary_mismatch, None, "infos are in neither count");
    let d = r.describe();
    assert!(
        d.contains(
            "findings: 1 race (8 hazards), 2 race warning (5 hazards), 2 race info (33 hazards)"
        ),
        "{d}"
    );
    assert!(d.contains("first: RAW race in k at k.cu:5"), "{d}");
    assert!(r.findings[2].describe().starts_with("info WAW race"));
    let json = serde_json::to_value(&r.findings[1]).unwrap();
    assert_eq!(json["severity"], "warning");
}

#[test]
fn racecheck_infos_alone_do_not_fail() {
    let text = "\
========= COMPUTE-SANITIZER
========= INFO:(Identical data being written) Potential WAW hazard detected at __shared__ 0x0 in block (0, 0, 0) :
=========     Write Thread (0, 0, 0) at k+0x40 in k.cu:12
=========     Write Thread (1, 0, 0) at k+0x40 in k.cu:12
=========
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
";
    let r = p(Tool::Racecheck, text, Some(0));
    assert_eq!(r.outcome, Outcome::Clean, "{}", r.describe());
    assert_eq!(r.findings.len(), 1);
    assert!(
        r.describe().contains("findings: 1 race info (1 hazards)"),
        "{}",
        r.describe()
    );
    // Warnings alone still fail.
    let warned = text.replace(
        "INFO:(Identical data being written)",
        "WARN:(Warp Level Programming)",
    );
    let warned = warned.replace("(0 errors, 0 warnings)", "(0 errors, 1 warnings)");
    let warned = warned.replace("0 hazards displayed", "1 hazards displayed");
    let r = p(Tool::Racecheck, &warned, Some(0));
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.summary_mismatch, None);
}
