//! The parser against reports of other kernels: C++ (demangled, templated) kernels compiled
//! by nvcc from tests/fixtures/cases/sanitizer_cases.cu and captured on an H200 by
//! tests/fixtures/cases/capture.sh (the `cases_*.txt` fixtures, unmodified).

mod common;

use common::fixture;
use klab_tools::sanitizer::{parse, FindingKind, Hazard, Outcome, Report, Tool};

fn parse_fixture(tool: Tool, name: &str) -> Report {
    let (text, exit) = fixture(name);
    parse(tool, &text, exit, 99)
}

fn tool_failure_reason(r: &Report) -> &str {
    match &r.outcome {
        Outcome::ToolFailed { reason } => reason,
        o => panic!("expected ToolFailed, got {o:?}"),
    }
}

#[test]
fn shared_out_of_bounds_writes() {
    let r = parse_fixture(Tool::Memcheck, "cases_memcheck_shared_oob.txt");
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.error_summary, Some(31));
    assert_eq!(r.findings.len(), 31, "threads 1..=31; thread 0 writes s[0]");
    for (i, f) in r.findings.iter().enumerate() {
        assert_eq!(f.kind, FindingKind::InvalidSharedWrite);
        assert_eq!(f.access_size, Some(4));
        assert_eq!(f.kernel.as_deref(), Some("shared_oob"));
        assert_eq!(f.location.as_deref(), Some("sanitizer_cases.cu:14"));
        assert_eq!(f.file.as_deref(), Some("sanitizer_cases.cu"));
        assert_eq!(f.thread, Some([i as u32 + 1, 0, 0]));
        assert_eq!(f.block, Some([0, 0, 0]));
    }
    assert_eq!(r.findings[0].address.as_deref(), Some("0x4400"));
    assert_eq!(r.findings[30].address.as_deref(), Some("0x7c400"));
    assert_eq!(r.notes, ["LEAK SUMMARY: 0 bytes leaked in 0 allocations"]);
}

#[test]
fn misaligned_vector_loads() {
    let r = parse_fixture(Tool::Memcheck, "cases_memcheck_misaligned.txt");
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.error_summary, Some(32));
    assert_eq!(r.findings.len(), 32);
    for f in &r.findings {
        assert_eq!(f.kind, FindingKind::Misaligned);
        assert_eq!(f.access_size, Some(16));
        assert_eq!(f.kernel.as_deref(), Some("misaligned_load"));
        assert_eq!(f.location.as_deref(), Some("sanitizer_cases.cu:21"));
    }
    assert_eq!(r.findings[0].address.as_deref(), Some("0x7f154ea00004"));
    assert_eq!(r.findings[31].thread, Some([31, 0, 0]));
}

#[test]
fn leak_check_full() {
    let r = parse_fixture(Tool::Memcheck, "cases_memcheck_leak.txt");
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.exit_status, Some(99));
    assert_eq!(r.error_summary, Some(1));
    assert_eq!(r.findings.len(), 1);
    let f = &r.findings[0];
    assert_eq!(f.kind, FindingKind::Leak);
    assert_eq!(f.address.as_deref(), Some("0x7fa59e800000"));
    assert_eq!(f.kernel, None);
    assert!(f
        .raw
        .starts_with("========= Leaked 1,048,576 bytes at 0x7fa59e800000"));
    assert_eq!(
        r.notes,
        ["LEAK SUMMARY: 1048576 bytes leaked in 1 allocations"]
    );
}

#[test]
fn application_exit_3_is_the_applications_failure() {
    // The tool prints `Target application returned an error` and does not count it.
    let r = parse_fixture(Tool::Memcheck, "cases_memcheck_exit3.txt");
    assert_eq!(r.exit_status, Some(3));
    assert_eq!(r.error_summary, Some(0));
    assert!(r.findings.is_empty());
    assert_eq!(r.outcome, Outcome::ApplicationFailed { status: Some(3) });
    assert_eq!(
        r.app_failure.as_deref(),
        Some("Target application returned an error")
    );
    assert!(!r.passes());
}

#[test]
fn clean_memcheck() {
    let r = parse_fixture(Tool::Memcheck, "cases_memcheck_clean.txt");
    assert_eq!(r.outcome, Outcome::Clean);
    assert!(r.passes());
}

#[test]
fn program_not_found_and_not_a_cuda_program() {
    let r = parse_fixture(Tool::Memcheck, "cases_memcheck_missing_program.txt");
    assert_eq!(r.exit_status, Some(1));
    assert!(r.findings.is_empty());
    assert_eq!(
        tool_failure_reason(&r),
        "Target application doesn't exist or is not a valid executable"
    );
    let r = parse_fixture(Tool::Memcheck, "cases_memcheck_not_cuda.txt");
    assert_eq!(r.exit_status, Some(255));
    assert_eq!(
        tool_failure_reason(&r),
        "Error: Target application terminated before first instrumented API call"
    );
}

#[test]
fn racecheck_template_kernel_pairs() {
    let r = parse_fixture(Tool::Racecheck, "cases_racecheck_race.txt");
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!((r.error_summary, r.warnings), (Some(2), Some(0)));
    let got: Vec<_> = r
        .findings
        .iter()
        .map(|f| {
            assert_eq!(f.kind, FindingKind::Race);
            assert_eq!(f.kernel.as_deref(), Some("race_all_write<int>"));
            (
                f.hazard,
                f.count,
                f.location.clone().unwrap(),
                f.peer_location.clone().unwrap(),
            )
        })
        .collect();
    let loc = |l: u32| format!("sanitizer_cases.cu:{l}");
    assert_eq!(
        got,
        [
            (Some(Hazard::Waw), 60, loc(28), loc(28)),
            (Some(Hazard::Raw), 16, loc(28), loc(29)),
            (Some(Hazard::War), 16, loc(29), loc(30)),
        ]
    );
    assert_eq!(r.race_hazards(), 92);
}

#[test]
fn racecheck_report_all_hazards_agree_with_the_analysis() {
    // --racecheck-report all: 92 individual hazards, then the two analysis reports. The
    // hazard kinds per line match the pair order of the analysis (60 WAW, 16 RAW, 16 WAR).
    let r = parse_fixture(Tool::Racecheck, "cases_racecheck_race_hazard.txt");
    assert_eq!(r.error_summary, Some(94));
    assert_eq!(r.findings.len(), 92 + 3);
    let (hazards, pairs) = r.findings.split_at(92);
    let count = |h: Hazard| hazards.iter().filter(|f| f.hazard == Some(h)).count();
    assert_eq!(
        (count(Hazard::Waw), count(Hazard::Raw), count(Hazard::War)),
        (60, 16, 16)
    );
    for f in hazards {
        assert_eq!(f.kind, FindingKind::Race);
        assert_eq!(f.count, 1);
        assert_eq!(f.block, Some([0, 0, 0]));
        assert_eq!(f.kernel.as_deref(), Some("race_all_write<int>"));
        assert!(f.thread.is_some() && f.address.is_some() && f.peer_location.is_some());
    }
    let raw = hazards
        .iter()
        .find(|f| f.hazard == Some(Hazard::Raw))
        .unwrap();
    assert_eq!(raw.location.as_deref(), Some("sanitizer_cases.cu:28"));
    assert_eq!(raw.peer_location.as_deref(), Some("sanitizer_cases.cu:29"));
    let pair_hazards: Vec<_> = pairs.iter().map(|f| (f.hazard, f.count)).collect();
    assert_eq!(
        pair_hazards,
        [
            (Some(Hazard::Waw), 60),
            (Some(Hazard::Raw), 16),
            (Some(Hazard::War), 16)
        ]
    );
    assert_eq!(hazards[0].address.as_deref(), Some("0x400"));
    assert_eq!(hazards[0].thread, Some([32, 0, 0]));
}

#[test]
fn synccheck_partial_syncwarp_not_reported_on_sm90() {
    // Like sync_divergent in the README: __syncwarp(0xffffffff) reached by half a warp was
    // not reported on sm_90 either. The parser reports what the tool said.
    let r = parse_fixture(Tool::Synccheck, "cases_synccheck_syncwarp.txt");
    assert_eq!(r.outcome, Outcome::Clean);
    assert_eq!(r.error_summary, Some(0));
}

#[test]
fn initcheck_reads_of_never_written_memory() {
    let r = parse_fixture(Tool::Initcheck, "cases_initcheck_uninit.txt");
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.error_summary, Some(32));
    assert_eq!(r.not_printed, None);
    assert_eq!(r.findings.len(), 32);
    for (i, f) in r.findings.iter().enumerate() {
        assert_eq!(f.kind, FindingKind::UninitializedGlobalRead);
        assert_eq!(f.access_size, Some(4));
        assert_eq!(f.kernel.as_deref(), Some("read_uninit"));
        assert_eq!(f.location.as_deref(), Some("sanitizer_cases.cu:41"));
        assert_eq!(f.thread, Some([i as u32, 0, 0]));
    }
    assert_eq!(r.findings[0].address.as_deref(), Some("0x7ff8e0800000"));
}
