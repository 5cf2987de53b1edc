//! `run` with the real compute-sanitizer on a GPU machine. Ignored by default; run it as
//!
//! ```sh
//! sh crates/klab-tools/tests/fixtures/cases/capture.sh /tmp/caps   # builds /tmp/sanitizer_cases
//! KLAB_SANITIZER_CASES=/tmp/sanitizer_cases cargo test -p klab-tools --test sanitizer_device -- --ignored
//! ```
//!
//! `KLAB_COMPUTE_SANITIZER` overrides the binary (default: `compute-sanitizer` on PATH, else
//! /usr/local/cuda/bin/compute-sanitizer).
#![cfg(unix)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use klab_tools::sanitizer::{run, FindingKind, Hazard, Options, Outcome, Tool};

fn sanitizer() -> PathBuf {
    if let Some(p) = std::env::var_os("KLAB_COMPUTE_SANITIZER") {
        return PathBuf::from(p);
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("compute-sanitizer"))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("/usr/local/cuda/bin/compute-sanitizer"))
}

fn cases() -> PathBuf {
    PathBuf::from(
        std::env::var_os("KLAB_SANITIZER_CASES")
            .expect("KLAB_SANITIZER_CASES must name the built sanitizer_cases binary"),
    )
}

const T: Duration = Duration::from_secs(120);

fn go(
    tool: Tool,
    program: &Path,
    mode: &str,
    timeout: Duration,
) -> klab_tools::sanitizer::RunRecord {
    let rec = run(
        tool,
        &Options::default(),
        program,
        &[OsString::from(mode)],
        &sanitizer(),
        timeout,
    )
    .expect("run");
    println!("{mode}: {}", rec.report.describe());
    rec
}

#[test]
#[ignore = "needs a GPU, compute-sanitizer and the sanitizer_cases binary"]
fn real_sanitizer_end_to_end() {
    let cases = cases();

    let rec = go(Tool::Memcheck, &cases, "shared_oob", T);
    assert_eq!(rec.exit_status, Some(99));
    assert_eq!(rec.report.outcome, Outcome::FoundErrors);
    assert_eq!(rec.report.findings.len(), 31);
    assert!(rec
        .report
        .findings
        .iter()
        .all(|f| f.kind == FindingKind::InvalidSharedWrite
            && f.kernel.as_deref() == Some("shared_oob")));
    assert!(
        rec.output.contains("mode=shared_oob"),
        "application output captured"
    );

    let rec = go(Tool::Memcheck, &cases, "clean", T);
    assert_eq!(rec.exit_status, Some(0));
    assert!(rec.report.passes(), "{}", rec.report.describe());

    let rec = go(Tool::Memcheck, &cases, "exit3", T);
    assert_eq!(
        rec.report.outcome,
        Outcome::ApplicationFailed { status: Some(3) }
    );

    let rec = go(Tool::Memcheck, &cases, "leak", T);
    assert_eq!(rec.report.findings[0].kind, FindingKind::Leak);

    let rec = go(Tool::Racecheck, &cases, "race", T);
    assert_eq!(rec.report.outcome, Outcome::FoundErrors);
    assert_eq!(rec.report.race_hazards(), 92);
    assert_eq!(rec.report.findings[0].hazard, Some(Hazard::Waw));

    let rec = go(Tool::Initcheck, &cases, "uninit", T);
    assert_eq!(rec.report.findings.len(), 32);

    let rec = go(Tool::Synccheck, &cases, "clean", T);
    assert!(rec.report.passes(), "{}", rec.report.describe());

    let rec = go(Tool::Memcheck, Path::new("./no-such-program"), "x", T);
    assert!(matches!(rec.report.outcome, Outcome::ToolFailed { .. }));

    let rec = go(Tool::Memcheck, Path::new("/bin/true"), "x", T);
    assert!(matches!(rec.report.outcome, Outcome::ToolFailed { .. }));

    // The watchdog against the real tool: 50 ms is too short for it to start.
    let rec = go(Tool::Memcheck, &cases, "clean", Duration::from_millis(50));
    assert!(rec.timed_out);
    assert!(matches!(rec.report.outcome, Outcome::ToolFailed { .. }));
}
