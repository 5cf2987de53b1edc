//! `ncu::run`, `import_raw`, `import_details` and `RunOutput::check` against fake ncu
//! binaries: small shell scripts that print captured output, fail, hang or die; and a
//! binary that does not exist.
#![cfg(unix)]

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use klab_tools::ncu::{
    self, import_argv, locate_ncu, parse_raw, parse_version, version_argv, NcuError, Page,
    ProfileRequest,
};

/// One script at a time: a fork in another test thread while a script is open for writing
/// would make its exec fail with "text file busy".
static SERIAL: Mutex<()> = Mutex::new(());

const LONG: Duration = Duration::from_secs(60);

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ncu")
        .join(name)
}

fn script(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("ncu");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

#[test]
fn import_raw_reads_stdout_and_passes_the_argv() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let args_file = dir.path().join("args");
    let fake = script(
        dir.path(),
        &format!(
            "for a in \"$@\"; do echo \"$a\"; done > {}\necho '==PROF== importing' >&2\ncat {}",
            quoted(&args_file),
            quoted(&fixture_path("dev_import_raw_tiled.csv"))
        ),
    );
    let report = dir.path().join("my report.ncu-rep");
    let r = ncu::import_raw(&fake, &report, LONG).expect("import");
    assert_eq!(r.kernels.len(), 2);
    assert_eq!(r.kernels[0].function_name(), "tiled_k");
    let args = std::fs::read_to_string(&args_file).unwrap();
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        [
            "--import",
            report.to_str().unwrap(),
            "--csv",
            "--page",
            "raw"
        ]
    );
    // stderr stays out of the parsed table; the merged output has both.
    let out = ncu::run(&import_argv(&fake, &report, Page::Raw), LONG).unwrap();
    assert!(out.succeeded());
    assert!(out.check().is_ok());
    assert_eq!(out.stderr, "==PROF== importing\n");
    assert!(!out.stdout.contains("==PROF=="));
    assert!(out.output.contains("==PROF== importing\n"));
    assert_eq!(out.messages().len(), 1);
    assert_eq!(out.argv[0], fake.display().to_string());
    assert_eq!(out.exit_status, Some(0));
}

#[test]
fn import_details_through_a_fake() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(
        dir.path(),
        &format!("cat {}", quoted(&fixture_path("ncu_details_padded.csv"))),
    );
    let d = ncu::import_details(&fake, Path::new("r.ncu-rep"), LONG).expect("import");
    assert_eq!(d.kernels.len(), 1);
    assert_eq!(
        d.kernels[0]
            .metric("GPU Speed Of Light Throughput", "Duration")
            .number(),
        Some(36_064.0)
    );
}

#[test]
fn failed_import_names_ncus_error() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(
        dir.path(),
        "echo \"==ERROR== Could not open report file '$2'.\" >&2\n\
         echo '==ERROR== The file does not exist or is not a regular file.' >&2\nexit 1",
    );
    let e = ncu::import_raw(&fake, Path::new("/nonexistent.ncu-rep"), LONG).unwrap_err();
    match &e {
        NcuError::Failed { status, message } => {
            assert_eq!(*status, Some(1));
            assert_eq!(
                message,
                "==ERROR== Could not open report file '/nonexistent.ncu-rep'."
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        e.to_string(),
        "ncu failed (exit 1): ==ERROR== Could not open report file '/nonexistent.ncu-rep'."
    );
}

#[test]
fn failure_without_an_error_line_reports_the_last_line() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(dir.path(), "echo first\necho 'last words'\nexit 7");
    let out = ncu::run(&version_argv(&fake), LONG).unwrap();
    assert!(!out.succeeded());
    let e = out.check().unwrap_err();
    assert_eq!(e.to_string(), "ncu failed (exit 7): last words");
}

#[test]
fn profile_that_matched_no_kernel() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // The real output of `ncu --kernel-name no_such_kernel ./k` (exit 0).
    let fake = script(
        dir.path(),
        "echo '==PROF== Connected to process 545 (/tmp/k)'\necho status=0\n\
         echo '==PROF== Disconnected from process 545'\necho '==WARNING== No kernels were profiled.'\n\
         echo 'Available Kernels:'\necho '1. naive_k'\nexit 0",
    );
    let req = ProfileRequest::new("no_such_kernel", dir.path().join("r"), "/tmp/k", vec![]);
    let out = ncu::run(&req.argv(&fake), LONG).unwrap();
    assert!(out.succeeded());
    let e = out.check().unwrap_err();
    assert!(
        matches!(&e, NcuError::NoKernelsProfiled { detail } if detail == "==WARNING== No kernels were profiled."),
        "{e:?}"
    );
}

#[test]
fn counter_permission_from_a_run() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(
        dir.path(),
        "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0.' >&2\nexit 0",
    );
    let req = ProfileRequest::new("k", dir.path().join("r"), "/tmp/k", vec![]);
    let e = ncu::run(&req.argv(&fake), LONG)
        .unwrap()
        .check()
        .unwrap_err();
    assert!(matches!(e, NcuError::CounterPermission { .. }), "{e:?}");
}

#[test]
fn version_through_a_fake() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(
        dir.path(),
        "[ \"$1\" = --version ] || exit 2\n\
         echo 'NVIDIA (R) Nsight Compute Command Line Profiler'\n\
         echo 'Copyright (c) 2018-2025 NVIDIA Corporation'\n\
         echo 'Version 2025.3.1.0 (build 36398880) (public-release)'",
    );
    let out = ncu::run(&version_argv(&fake), LONG).unwrap();
    out.check().unwrap();
    let v = parse_version(&out.stdout).unwrap();
    assert_eq!(v.numbers, [2025, 3, 1, 0]);
}

#[test]
fn watchdog_kills_a_hanging_ncu_and_its_children() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    // ncu starts the application (a child that would outlive it), then hangs.
    let fake = script(
        dir.path(),
        &format!(
            "sleep 300 &\necho $! > {}\necho '==PROF== Connected to process 1 (./app)'\nwait",
            quoted(&pid_file)
        ),
    );
    let t0 = Instant::now();
    let out = ncu::run(&version_argv(&fake), Duration::from_millis(500)).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert!(out.timed_out);
    assert_eq!(out.exit_status, None);
    assert!(out.output.contains("==PROF== Connected"));
    let e = out.check().unwrap_err();
    assert_eq!(
        e.to_string(),
        "ncu timed out after 500 ms; the watchdog killed it and its process group"
    );
    // The child was killed with the group.
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let pid = pid.trim();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let alive = std::process::Command::new("kill")
            .args(["-0", pid])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        if !alive {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "child {pid} survived the watchdog"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ncu_killed_by_a_signal() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fake = script(dir.path(), "echo partial\nkill -9 $$");
    let out = ncu::run(&version_argv(&fake), LONG).unwrap();
    assert!(!out.timed_out);
    assert_eq!(out.exit_status, None);
    assert_eq!(out.signal, Some(9));
    let e = out.check().unwrap_err();
    assert!(matches!(e, NcuError::Killed { signal: 9 }), "{e:?}");
}

#[test]
fn missing_binary_is_an_error_naming_it() {
    let missing = Path::new("/nonexistent/cuda/bin/ncu");
    let e = ncu::run(&version_argv(missing), LONG).unwrap_err();
    assert!(matches!(e, NcuError::Spawn { .. }), "{e:?}");
    let s = e.to_string();
    assert!(
        s.starts_with("cannot start the Nsight Compute binary /nonexistent/cuda/bin/ncu: "),
        "{s}"
    );
    assert!(!s.contains('\n'));
    let e = ncu::import_raw(missing, Path::new("r.ncu-rep"), LONG).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/cuda/bin/ncu"), "{e}");
}

#[test]
fn empty_argv_is_an_error() {
    let e = ncu::run(&[] as &[OsString], LONG).unwrap_err();
    assert!(matches!(e, NcuError::EmptyArgv), "{e:?}");
}

#[test]
fn locate_takes_an_explicit_path_as_given() {
    let p = Path::new("/opt/nsight/ncu-that-does-not-exist");
    assert_eq!(locate_ncu(Some(p)), Some(p.to_path_buf()));
    // Without one, whatever is found is an executable called ncu.
    if let Some(found) = locate_ncu(None) {
        assert_eq!(found.file_name().unwrap(), "ncu");
        assert!(found.is_file());
    }
}

#[test]
fn table_from_a_run_with_application_output_on_stdout() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // A live `--csv` run: ncu's lines and the application's output before the table.
    let fake = script(
        dir.path(),
        &format!("cat {}", quoted(&fixture_path("ncu_raw_naive_metrics.csv"))),
    );
    let req = ProfileRequest::new("naive_k", dir.path().join("r"), "./probe", vec![]);
    let out = ncu::run(&req.argv(&fake), LONG).unwrap();
    out.check().unwrap();
    let r = parse_raw(&out.stdout).unwrap();
    assert_eq!(r.kernels.len(), 3);
    assert_eq!(r.warnings().count(), 1);
}
