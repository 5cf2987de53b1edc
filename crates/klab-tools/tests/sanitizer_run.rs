//! `run` against fake sanitizers: small shell scripts that print a captured report, flood
//! both pipes, hang, or die; and a binary that does not exist.
#![cfg(unix)]

mod common;

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::fixture_path;
use klab_tools::sanitizer::{run, FindingKind, Options, Outcome, SanitizerError, Tool};

/// One script at a time: a fork in another test thread while a script is open for writing
/// would make its exec fail with "text file busy".
static SERIAL: Mutex<()> = Mutex::new(());

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

const LONG: Duration = Duration::from_secs(60);

#[test]
fn fake_sanitizer_prints_a_report_and_exits_99() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(
        dir.path(),
        "compute-sanitizer",
        &format!(
            "echo \"argv: $*\" >&2\ncat {}\nexit 99",
            quoted(&fixture_path("san_memcheck_triad_buggy.txt"))
        ),
    );
    let args = [OsString::from("--buggy"), OsString::from("two words")];
    let rec = run(
        Tool::Memcheck,
        &Options::default(),
        Path::new("./klab-triad"),
        &args,
        &fake,
        LONG,
    )
    .expect("run");
    assert_eq!(rec.tool, Tool::Memcheck);
    assert_eq!(rec.exit_status, Some(99));
    assert!(!rec.timed_out);
    assert_eq!(rec.argv[0], fake.display().to_string());
    assert_eq!(
        rec.argv[1..],
        [
            "--tool",
            "memcheck",
            "--error-exitcode",
            "99",
            "--destroy-on-device-error",
            "kernel",
            "--padding",
            "32",
            "--leak-check",
            "full",
            "./klab-triad",
            "--buggy",
            "two words"
        ]
    );
    // stderr is captured too, and the arguments arrived as a vector.
    assert!(rec.output.contains(
        "argv: --tool memcheck --error-exitcode 99 --destroy-on-device-error kernel \
         --padding 32 --leak-check full ./klab-triad --buggy two words\n"
    ));
    let r = &rec.report;
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.exit_status, Some(99));
    assert_eq!(r.error_summary, Some(3));
    assert_eq!(r.findings[0].kind, FindingKind::InvalidGlobalRead);
    assert_eq!(r.findings[0].kernel.as_deref(), Some("triad_buggy"));
    assert_eq!(r.findings[0].thread, Some([67, 0, 0]));
    assert_eq!(r.findings[0].block, Some([3906, 0, 0]));
    // The record serialises.
    let json = serde_json::to_string(&rec).unwrap();
    let back: klab_tools::sanitizer::RunRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back, rec);
}

#[test]
fn fake_sanitizer_racecheck_clean() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(
        dir.path(),
        "cs",
        &format!(
            "cat {}",
            quoted(&fixture_path("san_racecheck_padded_clean.txt"))
        ),
    );
    let rec = run(
        Tool::Racecheck,
        &Options::default(),
        Path::new("app"),
        &[],
        &fake,
        LONG,
    )
    .unwrap();
    assert_eq!(rec.exit_status, Some(0));
    assert!(rec.report.passes(), "{}", rec.report.describe());
    assert!(!rec.argv.iter().any(|a| a == "--padding"), "memcheck only");
}

#[test]
fn full_pipes_do_not_block() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // 3 MB on each pipe, far beyond a pipe buffer, then a clean report.
    let fake = script(
        dir.path(),
        "cs",
        &format!(
            "head -c 3000000 /dev/zero | tr '\\0' e >&2\n\
             head -c 3000000 /dev/zero | tr '\\0' o\necho\ncat {}\nexit 0",
            quoted(&fixture_path("san_memcheck_padded_clean.txt"))
        ),
    );
    let t = Instant::now();
    let rec = run(
        Tool::Memcheck,
        &Options::default(),
        Path::new("app"),
        &[],
        &fake,
        LONG,
    )
    .unwrap();
    assert!(t.elapsed() < Duration::from_secs(30));
    assert!(!rec.timed_out);
    assert!(rec.output.len() >= 6_000_000, "{}", rec.output.len());
    assert!(rec.output.matches('e').count() >= 3_000_000);
    assert_eq!(
        rec.report.outcome,
        Outcome::Clean,
        "{}",
        rec.report.describe()
    );
}

#[test]
fn watchdog_kills_a_hanging_sanitizer_and_its_children() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("sleep.pid");
    // The sleep is a grandchild holding both pipes open: killing only the script would leave
    // the readers waiting for it.
    let fake = script(
        dir.path(),
        "cs",
        &format!(
            "echo '========= COMPUTE-SANITIZER'\nsleep 30 &\necho $! > {}\nwait\necho never",
            quoted(&pidfile)
        ),
    );
    let t = Instant::now();
    let rec = run(
        Tool::Memcheck,
        &Options::default(),
        Path::new("app"),
        &[],
        &fake,
        Duration::from_secs(1),
    )
    .unwrap();
    let took = t.elapsed();
    assert!(rec.timed_out);
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(rec.exit_status, None);
    assert!(
        rec.output.contains("========= COMPUTE-SANITIZER"),
        "partial output kept"
    );
    assert!(!rec.output.contains("never"));
    match &rec.report.outcome {
        Outcome::ToolFailed { reason } => {
            assert!(reason.contains("timed out after 1.0 s"), "{reason}")
        }
        o => panic!("{o:?}"),
    }
    // The grandchild is dead (gone, or a zombie waiting for its reaper).
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    let stat = PathBuf::from(format!("/proc/{pid}/stat"));
    if Path::new("/proc/self/stat").exists() {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let state = std::fs::read_to_string(&stat)
                .ok()
                .and_then(|s| s.rsplit(')').next().map(|r| r.trim().chars().next()))
                .flatten();
            if matches!(state, None | Some('Z') | Some('X')) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "sleep {pid} still running: {state:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn sanitizer_killed_by_a_signal_is_a_tool_failure() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(
        dir.path(),
        "cs",
        "echo '========= COMPUTE-SANITIZER'\necho '========= ERROR SUMMARY: 0 errors'\nkill -TERM $$\nsleep 5",
    );
    let rec = run(
        Tool::Memcheck,
        &Options::default(),
        Path::new("app"),
        &[],
        &fake,
        LONG,
    )
    .unwrap();
    assert!(!rec.timed_out);
    assert_eq!(rec.exit_status, None);
    match &rec.report.outcome {
        Outcome::ToolFailed { reason } => assert!(reason.contains("signal 15"), "{reason}"),
        o => panic!("{o:?}"),
    }
}

#[test]
fn sanitizer_that_prints_nothing_is_a_tool_failure() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(
        dir.path(),
        "cs",
        "echo 'Error: Device not supported' >&2\nexit 1",
    );
    let rec = run(
        Tool::Synccheck,
        &Options::default(),
        Path::new("app"),
        &[],
        &fake,
        LONG,
    )
    .unwrap();
    assert_eq!(rec.exit_status, Some(1));
    match &rec.report.outcome {
        Outcome::ToolFailed { reason } => {
            assert!(reason.contains("exit 1"), "{reason}");
            assert!(reason.contains("Device not supported"), "{reason}");
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn missing_binary_is_an_error_naming_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-compute-sanitizer");
    let err = run(
        Tool::Memcheck,
        &Options::default(),
        Path::new("app"),
        &[],
        &missing,
        LONG,
    )
    .unwrap_err();
    assert!(matches!(&err, SanitizerError::Spawn { program, .. } if program == &missing));
    let msg = err.to_string();
    assert!(msg.contains(&missing.display().to_string()), "{msg}");
    assert!(msg.contains("cannot start"), "{msg}");
}
