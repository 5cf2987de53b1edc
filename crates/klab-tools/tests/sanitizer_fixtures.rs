//! The parser against every real report captured on the H200 (tests/fixtures, copied
//! unmodified from shared/fixtures/h200/sanitizer), and fuzzing around them.

mod common;

use common::{all_fixtures, fixture, Rng};
use klab_tools::sanitizer::{parse, Finding, FindingKind, Hazard, Outcome, Report, Severity, Tool};

fn parse_fixture(tool: Tool, name: &str) -> Report {
    let (text, exit) = fixture(name);
    parse(tool, &text, exit, 99)
}

fn kinds(r: &Report) -> Vec<FindingKind> {
    r.findings.iter().map(|f| f.kind).collect()
}

#[test]
fn memcheck_triad_buggy_invalid_global_read() {
    let r = parse_fixture(Tool::Memcheck, "san_memcheck_triad_buggy.txt");
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert!(!r.passes());
    assert_eq!(r.exit_status, Some(99));
    assert_eq!(r.error_summary, Some(3));
    assert_eq!(r.summary_line.as_deref(), Some("ERROR SUMMARY: 3 errors"));
    assert!(r.banner);
    assert_eq!(
        kinds(&r),
        [
            FindingKind::InvalidGlobalRead,
            FindingKind::Other,
            FindingKind::Other
        ]
    );
    let f = &r.findings[0];
    assert_eq!(f.access_size, Some(4));
    assert_eq!(f.kernel.as_deref(), Some("triad_buggy"));
    assert_eq!(f.location.as_deref(), Some("default_program:32"));
    assert_eq!(f.file.as_deref(), Some("default_program"));
    assert_eq!(f.line, Some(32));
    assert_eq!(f.thread, Some([67, 0, 0]));
    assert_eq!(f.block, Some([3906, 0, 0]));
    assert_eq!(f.address.as_deref(), Some("0x48ea3d090c"));
    assert_eq!(f.hazard, None);
    assert_eq!(f.count, 1);
    assert!(f
        .raw
        .starts_with("========= Invalid __global__ read of size 4 bytes\n"));
    assert!(f.raw.ends_with("Host Frame: main [0x266e4] in probe"));
    assert_eq!(f.raw.lines().count(), 12);
    // The two API errors the failed launch caused are kept, with their text.
    for (o, call) in r.findings[1..]
        .iter()
        .zip(["cuStreamSynchronize", "cuModuleUnload"])
    {
        assert!(o.raw.starts_with(
            "========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to \"unspecified launch failure\""
        ));
        assert!(o.raw.lines().next().unwrap().ends_with(&format!("{call}.")));
        assert_eq!(o.kernel, None);
        assert_eq!(o.location, None);
    }
    assert_eq!(
        r.app_failure.as_deref(),
        Some("Target application returned an error")
    );
    assert_eq!(r.tool_failure, None);
    assert_eq!(r.notes, ["Target application returned an error"]);
    assert_eq!(
        r.describe(),
        "memcheck: found errors; summary 3 errors; findings: 1 invalid global read, 2 other; \
         first: invalid global read of 4 bytes in triad_buggy at default_program:32 \
         thread (67,0,0) block (3906,0,0) address 0x48ea3d090c; exit 99"
    );
}

#[test]
fn memcheck_square_past_end_invalid_write() {
    let r = parse_fixture(Tool::Memcheck, "san_memcheck_square_past_end.txt");
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.exit_status, Some(99));
    assert_eq!(r.error_summary, Some(1));
    assert_eq!(r.summary_line.as_deref(), Some("ERROR SUMMARY: 1 error"));
    assert_eq!(
        r.app_failure, None,
        "with --destroy-on-device-error kernel the app succeeds"
    );
    assert_eq!(kinds(&r), [FindingKind::InvalidGlobalWrite]);
    let f = &r.findings[0];
    assert_eq!(f.access_size, Some(4));
    assert_eq!(f.kernel.as_deref(), Some("square_past_end"));
    assert_eq!(f.location.as_deref(), Some("default_program:37"));
    assert_eq!(f.line, Some(37));
    assert_eq!(f.thread, Some([99, 0, 0]));
    assert_eq!(f.block, Some([2, 0, 0]));
    assert_eq!(f.address.as_deref(), Some("0x48ea00138c"));
    assert_eq!(
        r.describe(),
        "memcheck: found errors; summary 1 error; findings: 1 invalid global write; first: \
         invalid global write of 4 bytes in square_past_end at default_program:37 \
         thread (99,0,0) block (2,0,0) address 0x48ea00138c; exit 99"
    );
}

#[test]
fn memcheck_square_past_end_without_destroy_flag() {
    // Without --destroy-on-device-error kernel the context dies with the kernel: the same
    // write, plus two API errors and the application's failure.
    let (text, exit) = fixture("san_memcheck_square_past_end_noflag_default.txt");
    assert_eq!(exit, Some(99), "the captured status");
    let r = parse(Tool::Memcheck, &text, exit, 99);
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.error_summary, Some(3));
    assert_eq!(
        kinds(&r),
        [
            FindingKind::InvalidGlobalWrite,
            FindingKind::Other,
            FindingKind::Other
        ]
    );
    assert_eq!(
        r.findings[0].location.as_deref(),
        Some("default_program:37")
    );
    assert_eq!(r.findings[0].thread, Some([99, 0, 0]));
    assert!(r.app_failure.is_some());
    // Seed 002's point: without --error-exitcode the tool exits with the application's own
    // 0. The summary still decides.
    let r0 = parse(Tool::Memcheck, &text, Some(0), 99);
    assert_eq!(r0.outcome, Outcome::FoundErrors);
    assert_eq!(r0.exit_status, Some(0));
    // And an application status other than 0 or 99 is recorded, findings still win.
    let r2 = parse(Tool::Memcheck, &text, Some(2), 99);
    assert_eq!(r2.outcome, Outcome::FoundErrors);
    assert_eq!(r2.exit_status, Some(2));
}

#[test]
fn initcheck_uninitialized_reads() {
    let r = parse_fixture(Tool::Initcheck, "san_initcheck_read_uninit.txt");
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.exit_status, Some(99));
    assert_eq!(r.error_summary, Some(611));
    assert_eq!(r.not_printed, Some(511));
    assert_eq!(r.summary_line.as_deref(), Some("ERROR SUMMARY: 611 errors"));
    assert_eq!(r.findings.len(), 100, "the default --print-limit");
    assert_eq!(r.findings.len() as u64 + 511, 611);
    for f in &r.findings {
        assert_eq!(f.kind, FindingKind::UninitializedGlobalRead);
        assert_eq!(f.access_size, Some(4));
        assert_eq!(f.kernel.as_deref(), Some("read_uninit"));
        assert_eq!(f.location.as_deref(), Some("default_program:41"));
        assert_eq!(f.block, Some([0, 0, 0]));
        assert_eq!(f.count, 1);
    }
    let first = &r.findings[0];
    assert_eq!(first.thread, Some([96, 0, 0]));
    assert_eq!(first.address.as_deref(), Some("0x48ea000180"));
    let last = &r.findings[99];
    assert_eq!(last.thread, Some([67, 0, 0]));
    // 100 distinct threads: 96..=127, then 0..=67.
    let mut xs: Vec<u32> = r.findings.iter().map(|f| f.thread.unwrap()[0]).collect();
    xs.sort();
    xs.dedup();
    assert_eq!(xs.len(), 100);
    assert!(r.describe().starts_with(
        "initcheck: found errors; summary 611 errors (511 not printed); \
         findings: 100 uninitialized global read; first: uninitialized global read of 4 bytes \
         in read_uninit at default_program:41 thread (96,0,0) block (0,0,0)"
    ));
}

#[test]
fn racecheck_broken_33_races() {
    // No exit= line in this capture: the status is unknown.
    let (text, exit) = fixture("san_racecheck_broken_33.txt");
    assert_eq!(exit, None);
    let r = parse(Tool::Racecheck, &text, exit, 99);
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.error_summary, Some(12));
    assert_eq!(r.warnings, Some(0));
    assert_eq!(
        r.summary_line.as_deref(),
        Some("RACECHECK SUMMARY: 12 hazards displayed (12 errors, 0 warnings)")
    );
    // 12 reports, each a write at line 25 racing four reads at line 27.
    assert_eq!(r.findings.len(), 48);
    for f in &r.findings {
        assert_eq!(f.kind, FindingKind::Race);
        assert_eq!(f.hazard, Some(Hazard::Raw), "write then read");
        assert_eq!(f.kernel.as_deref(), Some("broken_k"));
        assert_eq!(f.location.as_deref(), Some("default_program:25"));
        assert_eq!(f.line, Some(25));
        assert_eq!(f.peer_location.as_deref(), Some("default_program:27"));
        assert_eq!(f.raw.lines().count(), 2);
    }
    let counts: Vec<u64> = r.findings.iter().map(|f| f.count).collect();
    assert_eq!(&counts[..8], [280, 288, 288, 288, 288, 224, 256, 256]);
    for (n, times) in [(280, 3), (288, 18), (224, 9), (256, 18)] {
        assert_eq!(counts.iter().filter(|&&c| c == n).count(), times, "{n}");
    }
    assert_eq!(r.race_hazards(), 12_648);
    assert_eq!(
        r.findings[0].raw,
        "========= Error: Race reported between Write access at broken_k+0x530 in default_program:25\n\
         =========     and Read access at broken_k+0x5b0 in default_program:27 [280 hazards]"
    );
    assert_eq!(
        r.describe(),
        "racecheck: found errors; summary 12 errors, 0 warnings; findings: 48 race (12648 hazards); \
         first: RAW race in broken_k at default_program:25 with default_program:27 [280 hazards]; \
         exit unknown"
    );
    // Seed 000: the harness exits 2 for broken; the races still decide.
    let r2 = parse(Tool::Racecheck, &text, Some(2), 99);
    assert_eq!(r2.outcome, Outcome::FoundErrors);
    assert_eq!(r2.exit_status, Some(2));
}

#[test]
fn racecheck_clean_runs() {
    for name in [
        "san_racecheck_padded_clean.txt",
        "san_racecheck_tiled_1024.txt",
    ] {
        let r = parse_fixture(Tool::Racecheck, name);
        assert_eq!(r.outcome, Outcome::Clean, "{name}");
        assert!(r.passes());
        assert_eq!(r.exit_status, Some(0));
        assert_eq!(r.error_summary, Some(0));
        assert_eq!(r.warnings, Some(0));
        assert!(r.findings.is_empty());
        assert_eq!(
            r.summary_line.as_deref(),
            Some("RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)")
        );
        assert_eq!(
            r.describe(),
            "racecheck: clean; summary 0 errors, 0 warnings; no findings; exit 0"
        );
    }
}

#[test]
fn memcheck_clean_padded() {
    let r = parse_fixture(Tool::Memcheck, "san_memcheck_padded_clean.txt");
    assert_eq!(r.outcome, Outcome::Clean);
    assert!(r.passes());
    assert_eq!(r.error_summary, Some(0));
    assert!(r.findings.is_empty());
    assert_eq!(r.notes, ["LEAK SUMMARY: 0 bytes leaked in 0 allocations"]);
    assert_eq!(
        r.describe(),
        "memcheck: clean; summary 0 errors; no findings; exit 0"
    );
}

#[test]
fn memcheck_broken_33_is_clean_tool_wise() {
    // broken has no out-of-bounds access: memcheck finds nothing even though the output is
    // wrong (mismatches=2). The capture has no exit= line.
    let (text, exit) = fixture("san_memcheck_broken_33.txt");
    assert_eq!(exit, None);
    let r = parse(Tool::Memcheck, &text, exit, 99);
    assert_eq!(r.outcome, Outcome::Clean);
    assert_eq!(r.error_summary, Some(0));
    assert!(r.findings.is_empty());
    // Seed 000's harness exits 2 for broken: with that status it is the application's
    // failure, not the tool's finding.
    let r2 = parse(Tool::Memcheck, &text, Some(2), 99);
    assert_eq!(r2.outcome, Outcome::ApplicationFailed { status: Some(2) });
    assert!(!r2.passes());
    assert_eq!(
        r2.describe(),
        "memcheck: application failed (exit 2); summary 0 errors; no findings; exit 2"
    );
}

#[test]
fn synccheck_divergent_barrier_not_reported_on_sm90() {
    // The README's fact: synccheck did not report __syncthreads() inside a divergent branch
    // on sm_90. The parser reports what the tool said: clean.
    let r = parse_fixture(Tool::Synccheck, "san_synccheck_sync_divergent.txt");
    assert_eq!(r.exit_status, Some(0));
    assert_eq!(r.error_summary, Some(0));
    assert!(r.findings.is_empty());
    assert_eq!(r.outcome, Outcome::Clean);
    assert!(r.passes());
}

#[test]
fn version_output_is_not_a_report() {
    let (text, _) = fixture("san_version.txt");
    let r = parse(Tool::Memcheck, &text, Some(0), 99);
    assert!(!r.banner);
    assert_eq!(r.error_summary, None);
    match &r.outcome {
        Outcome::ToolFailed { reason } => {
            assert!(reason.contains("no COMPUTE-SANITIZER banner"), "{reason}");
            assert!(reason.contains("exit 0"), "{reason}");
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn every_fixture_round_trips_through_json() {
    for name in all_fixtures() {
        let (text, exit) = fixture(&name);
        for tool in Tool::ALL {
            let r = parse(tool, &text, exit, 99);
            let json = serde_json::to_string(&r).expect("serialize");
            let back: Report = serde_json::from_str(&json).expect("deserialize");
            assert_eq!(back, r, "{name}");
        }
    }
    let f: Finding = serde_json::from_value(serde_json::json!({
        "kind": "race", "access_size": null, "hazard": "WAR", "kernel": "k",
        "location": "k.cu:3", "file": "k.cu", "line": 3, "peer_location": "k.cu:4",
        "thread": null, "block": [0, 0, 0], "address": null, "count": 7, "raw": "x"
    }))
    .expect("finding from JSON");
    assert_eq!(f.hazard, Some(Hazard::War));
    let o: Outcome = serde_json::from_str(r#"{"kind":"application_failed","status":2}"#).unwrap();
    assert_eq!(o, Outcome::ApplicationFailed { status: Some(2) });
}

#[test]
fn every_fixture_keeps_every_block() {
    // Each block of the report lands somewhere: a finding, the summary, a note or the banner.
    for name in all_fixtures() {
        let (text, exit) = fixture(&name);
        let r = parse(Tool::Memcheck, &text, exit, 99);
        let headers = text
            .lines()
            .filter(|l| {
                l.strip_prefix("========= ")
                    .is_some_and(|c| !c.trim().is_empty() && !c.starts_with(' '))
            })
            .count();
        // A race block yields one finding per pair; its pairs share the header line.
        let race_headers: Vec<&str> = r
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::Race)
            .map(|f| f.raw.lines().next().unwrap())
            .collect();
        let race_blocks = (0..race_headers.len())
            .filter(|&i| i == 0 || race_headers[i] != race_headers[i - 1])
            .count();
        let other = r
            .findings
            .iter()
            .filter(|f| f.kind != FindingKind::Race)
            .count();
        let summaries =
            usize::from(r.error_summary.is_some()) + usize::from(r.not_printed.is_some());
        let accounted = race_blocks + other + r.notes.len() + summaries + usize::from(r.banner);
        assert_eq!(accounted, headers, "{name}");
    }
}

/// Invariants that hold for every report, whatever the input.
fn check_invariants(r: &Report) {
    let d = r.describe();
    assert!(!d.contains('\n') && !d.contains('\r'), "{d:?}");
    assert_eq!(r.passes(), r.outcome == Outcome::Clean);
    if r.outcome == Outcome::Clean {
        // Infos only: the tool grades them benign.
        assert!(r.findings.iter().all(|f| f.severity == Severity::Info));
        assert_eq!(r.error_summary, Some(0));
        assert!(r.warnings.unwrap_or(0) == 0);
        assert!(r.tool_failure.is_none());
    }
    if r.findings
        .iter()
        .any(|f| f.kind != FindingKind::Other && f.severity.fails())
    {
        assert_eq!(r.outcome, Outcome::FoundErrors);
    }
    for f in &r.findings {
        assert!(!f.raw.is_empty());
        assert!(f.count >= 1 || f.kind == FindingKind::Race);
        let _ = f.describe();
    }
    let _ = serde_json::to_string(r).expect("serializable");
}

fn parse_all_ways(text: &str) {
    for (tool, exit) in [
        (Tool::Memcheck, Some(99)),
        (Tool::Racecheck, None),
        (Tool::Synccheck, Some(0)),
        (Tool::Initcheck, Some(-1)),
    ] {
        check_invariants(&parse(tool, text, exit, 99));
    }
    check_invariants(&parse(Tool::Memcheck, text, Some(0), 0));
}

#[test]
fn fuzz_random_bytes() {
    let mut rng = Rng::new(0x5eed_0001);
    for _ in 0..3000 {
        let len = rng.below(600);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        parse_all_ways(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn fuzz_report_shaped_tokens() {
    const TOKENS: [&str; 44] = [
        "=========",
        "========= ",
        "=========     ",
        "==========",
        "\n",
        "\r\n",
        " ",
        "(",
        ")",
        ",",
        ":",
        "[",
        "]",
        "0x",
        "4",
        "99999999999999999999999",
        "at ",
        " in ",
        "+0x1f",
        "default_program:25",
        "Race reported between ",
        "Write access at ",
        "Read access at ",
        "and ",
        " hazards]",
        "ERROR SUMMARY: ",
        "RACECHECK SUMMARY: ",
        " errors",
        " warnings",
        "were not printed",
        "by thread ",
        "block ",
        "of size ",
        "Invalid __global__ read",
        "Invalid __shared__ write",
        "Potential WAW hazard detected at __shared__ ",
        "Barrier error detected.",
        "Leaked 12 bytes at ",
        "COMPUTE-SANITIZER",
        "Internal Sanitizer Error",
        "Target application returned an error",
        "Device Frame:",
        "é",
        "\u{0}",
    ];
    let mut rng = Rng::new(0x5eed_0002);
    for _ in 0..6000 {
        let n = rng.below(80);
        let s: String = (0..n).map(|_| TOKENS[rng.below(TOKENS.len())]).collect();
        parse_all_ways(&s);
    }
}

#[test]
fn fuzz_fixture_truncations_and_mutations() {
    let mut rng = Rng::new(0x5eed_0003);
    for name in all_fixtures() {
        let (text, _) = fixture(&name);
        let bytes = text.as_bytes();
        // Every line boundary, and for small files every byte.
        let mut cuts: Vec<usize> = if bytes.len() <= 8000 {
            (0..=bytes.len()).collect()
        } else {
            let mut v: Vec<usize> = bytes
                .iter()
                .enumerate()
                .filter(|(_, &b)| b == b'\n')
                .map(|(i, _)| i)
                .collect();
            v.extend((0..300).map(|_| rng.below(bytes.len() + 1)));
            v
        };
        cuts.push(bytes.len());
        for &cut in &cuts {
            let head = String::from_utf8_lossy(&bytes[..cut]);
            check_invariants(&parse(Tool::Memcheck, &head, Some(99), 99));
            let tail = String::from_utf8_lossy(&bytes[cut..]);
            check_invariants(&parse(Tool::Racecheck, &tail, None, 99));
        }
        // Random byte changes, deletions and line shuffles.
        for _ in 0..100 {
            let mut m = bytes.to_vec();
            for _ in 0..1 + rng.below(20) {
                if m.is_empty() {
                    break;
                }
                let i = rng.below(m.len());
                match rng.below(3) {
                    0 => m[i] = rng.next() as u8,
                    1 => {
                        m.remove(i);
                    }
                    _ => m.insert(i, b"=( ,:[]\n0x"[rng.below(10)]),
                }
            }
            parse_all_ways(&String::from_utf8_lossy(&m));
        }
        let mut lines: Vec<&str> = text.lines().collect();
        for _ in 0..20 {
            let n = lines.len();
            for i in 0..n {
                lines.swap(i, rng.below(n));
            }
            parse_all_ways(&lines.join("\n"));
        }
    }
}
