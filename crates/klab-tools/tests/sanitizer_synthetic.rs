//! The command line, the tool names, and the parser on reports other than the H200
//! captures: tool failures, other tools' and other versions' wording, unknown blocks.

use std::ffi::OsString;
use std::path::Path;

use klab_tools::sanitizer::{
    argv, parse, FindingKind, Hazard, Options, Outcome, Report, Tool, UnknownTool,
};

fn p(tool: Tool, text: &str, exit: Option<i32>) -> Report {
    parse(tool, text, exit, 99)
}

fn reason(r: &Report) -> &str {
    match &r.outcome {
        Outcome::ToolFailed { reason } => reason,
        o => panic!("expected ToolFailed, got {o:?}"),
    }
}

fn strs(v: &[OsString]) -> Vec<&str> {
    v.iter().map(|s| s.to_str().unwrap()).collect()
}

// ---- tools and options ----------------------------------------------------------------

#[test]
fn tool_names() {
    assert_eq!(
        Tool::ALL,
        [
            Tool::Memcheck,
            Tool::Racecheck,
            Tool::Synccheck,
            Tool::Initcheck
        ]
    );
    for t in Tool::ALL {
        assert_eq!(t.to_string().parse::<Tool>().unwrap(), t);
        assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{t}\""));
    }
    assert_eq!(Tool::Racecheck.to_string(), "racecheck");
    assert_eq!("MemCheck".parse::<Tool>().unwrap(), Tool::Memcheck);
    let e = "leakcheck".parse::<Tool>().unwrap_err();
    assert_eq!(e, UnknownTool("leakcheck".into()));
    assert!(e.to_string().contains("leakcheck"));
}

#[test]
fn argv_defaults_per_tool() {
    let o = Options::default();
    assert_eq!(o.error_exitcode, 99);
    assert_eq!(o.padding, 32);
    assert!(o.leak_check);
    assert!(o.destroy_on_device_error_kernel);
    assert_eq!(o.print_limit, None);
    let args = [
        OsString::from("broken"),
        OsString::from("33"),
        OsString::from("1"),
    ];
    let prog = Path::new("./transpose_lab");
    assert_eq!(
        strs(&argv(Tool::Memcheck, &o, prog, &args)),
        [
            "compute-sanitizer",
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
            "./transpose_lab",
            "broken",
            "33",
            "1"
        ]
    );
    for t in [Tool::Racecheck, Tool::Synccheck, Tool::Initcheck] {
        assert_eq!(
            strs(&argv(t, &o, prog, &args)),
            [
                "compute-sanitizer",
                "--tool",
                t.as_str(),
                "--error-exitcode",
                "99",
                "--destroy-on-device-error",
                "kernel",
                "./transpose_lab",
                "broken",
                "33",
                "1"
            ]
        );
    }
}

#[test]
fn argv_options() {
    let o = Options {
        error_exitcode: 1,
        padding: 0,
        leak_check: false,
        destroy_on_device_error_kernel: false,
        print_limit: Some(1000),
    };
    assert_eq!(
        strs(&argv(Tool::Memcheck, &o, Path::new("/bin/app"), &[])),
        [
            "compute-sanitizer",
            "--tool",
            "memcheck",
            "--error-exitcode",
            "1",
            "--destroy-on-device-error",
            "context",
            "--padding",
            "0",
            "--leak-check",
            "no",
            "--print-limit",
            "1000",
            "/bin/app"
        ]
    );
    // Arguments pass through untouched, spaces and all: no shell is involved.
    let a = argv(
        Tool::Racecheck,
        &Options::default(),
        Path::new("a b"),
        &[OsString::from("x; rm -rf /"), OsString::from("")],
    );
    assert_eq!(strs(&a[a.len() - 3..]), ["a b", "x; rm -rf /", ""]);
}

// ---- the tool could not run ------------------------------------------------------------

#[test]
fn empty_output_is_tool_failure() {
    let r = p(Tool::Memcheck, "", Some(1));
    assert!(reason(&r).contains("exit 1"), "{}", reason(&r));
    assert!(!r.passes());
    let r = p(Tool::Memcheck, "", None);
    assert!(matches!(r.outcome, Outcome::ToolFailed { .. }));
    let r = p(Tool::Memcheck, "", Some(0));
    assert!(
        matches!(r.outcome, Outcome::ToolFailed { .. }),
        "exit 0 without a report is not clean"
    );
}

#[test]
fn device_not_supported_then_error_999() {
    // The tool prints its refusal, the application then fails with CUDA error 999, and the
    // summary counts the API error: not a finding about the kernel.
    let text = "\
========= COMPUTE-SANITIZER
========= Error: Device not supported. Please refer to the \"Supported Devices\" section of the sanitizer documentation
========= 
========= Program hit cudaErrorUnknown (error 999) due to \"unknown error\" on CUDA API call to cudaMalloc.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: main [0x1234] in app
========= 
app: cudaMalloc failed: unknown error (999)
========= Target application returned an error
========= ERROR SUMMARY: 1 error
";
    let r = p(Tool::Memcheck, text, Some(99));
    assert!(
        reason(&r).starts_with("Error: Device not supported"),
        "{}",
        reason(&r)
    );
    assert_eq!(r.error_summary, Some(1));
    assert_eq!(r.findings.len(), 1, "the API error is kept");
    assert_eq!(r.findings[0].kind, FindingKind::Other);
    assert!(r.tool_failure.is_some() && r.app_failure.is_some());
    assert!(r
        .describe()
        .starts_with("memcheck: tool failed: Error: Device not supported"));

    // The same without the tool's prefix (no banner, no summary).
    let r = p(
        Tool::Memcheck,
        "Device not supported\nCUDA error 999: unknown error\n",
        Some(1),
    );
    let why = reason(&r);
    assert!(why.contains("no COMPUTE-SANITIZER banner"), "{why}");
    assert!(why.contains("Device not supported"), "{why}");
}

#[test]
fn wsl_device_not_supported_with_error_summary() {
    // WSL without the debugger interface: two tool errors, the application runs unchecked,
    // and the summary says 2 errors.
    let text = "\
========= COMPUTE-SANITIZER
========= Error: Failed to initialize WDDM debugger interface. Please run EnableDebuggerInterface.bat as an administrator
========= 
========= Error: Device not supported. Please refer to the \"Supported Devices\" section of the sanitizer documentation
========= 
PASS N=1000
========= ERROR SUMMARY: 2 errors
";
    let r = p(Tool::Racecheck, text, Some(1));
    assert!(reason(&r).contains("WDDM"));
    assert!(r.findings.is_empty());
    assert_eq!(r.notes.len(), 2);
}

#[test]
fn other_tool_failures() {
    for (text, needle) in [
        (
            "========= COMPUTE-SANITIZER\n<app output>\n========= Error: Target application terminated before first instrumented API call\n",
            "terminated before first instrumented",
        ),
        (
            "========= COMPUTE-SANITIZER\n========= Error: Target application terminated before first instrumented API call\n\
             ========= Tracking kernels launched by child processes requires the --target-processes all option.\n\
             ========= Error: No attachable process found. compute-sanitizer timed-out.\n\
             ========= Default timeout can be adjusted with --launch-timeout. Awaiting target completion.\n",
            "terminated before first instrumented",
        ),
        (
            "========= COMPUTE-SANITIZER\n========= Internal Sanitizer Error: The Sanitizer encountered an error while launching k and didn't track the launch. Errors might go undetected. (Unable to allocate enough memory to perform the requested operation)\n========= ERROR SUMMARY: 0 errors\n",
            "Internal Sanitizer Error",
        ),
        (
            "========= COMPUTE-SANITIZER\n========= Error: Unknown option '--bogus'\n",
            "Unknown option",
        ),
        (
            "========= COMPUTE-SANITIZER\n========= Error: Target application ./nope does not exist\n",
            "does not exist",
        ),
        (
            "Unrecognized option: --tool=bogus\nUsage: compute-sanitizer [options] [your-program] [your-program-options]\n",
            "Unrecognized option",
        ),
        (
            "========= COMPUTE-SANITIZER\nhello\n",
            "incomplete report",
        ),
    ] {
        let r = p(Tool::Memcheck, text, Some(255));
        assert!(reason(&r).contains(needle), "{needle}: {}", reason(&r));
    }
}

#[test]
fn real_findings_beat_a_partial_tool_failure() {
    let text = "\
========= COMPUTE-SANITIZER
========= Internal Sanitizer Error: The Sanitizer encountered an error while launching other_k and didn't track the launch.
========= 
========= Invalid __shared__ write of size 8 bytes
=========     at k+0x40 in k.cu:9
=========     by thread (1,2,3) in block (4,5,6)
=========     Address 0x400 is out of bounds
========= 
========= ERROR SUMMARY: 2 errors
";
    let r = p(Tool::Memcheck, text, Some(99));
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert!(r
        .tool_failure
        .as_deref()
        .unwrap()
        .starts_with("Internal Sanitizer Error"));
    let f = &r.findings[0];
    assert_eq!(f.kind, FindingKind::InvalidSharedWrite);
    assert_eq!(f.access_size, Some(8));
    assert_eq!(f.thread, Some([1, 2, 3]));
    assert_eq!(f.block, Some([4, 5, 6]));
    assert_eq!(f.address.as_deref(), Some("0x400"));
    assert_eq!(f.location.as_deref(), Some("k.cu:9"));
}

// ---- unknown and other wording -----------------------------------------------------------

#[test]
fn unknown_error_block_is_one_other_finding() {
    let text = "\
========= COMPUTE-SANITIZER
========= Error: something new
=========     with a detail line
=========     at mystery_k+0x10 in m.cu:7
========= 
========= ERROR SUMMARY: 1 error
";
    let r = p(Tool::Memcheck, text, Some(99));
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.findings.len(), 1);
    let f = &r.findings[0];
    assert_eq!(f.kind, FindingKind::Other);
    assert_eq!(
        f.raw,
        "========= Error: something new\n=========     with a detail line\n=========     at mystery_k+0x10 in m.cu:7"
    );
    assert_eq!(f.kernel.as_deref(), Some("mystery_k"));
    assert_eq!(f.location.as_deref(), Some("m.cu:7"));
    assert!(r
        .describe()
        .contains("findings: 1 other; first: other: Error: something new in mystery_k at m.cu:7"));

    // Never dropped, even when the summary says nothing was wrong.
    let quiet = text.replace("1 error", "0 errors");
    let r = p(Tool::Memcheck, &quiet, Some(0));
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.outcome, Outcome::FoundErrors);
}

#[test]
fn summary_count_without_itemised_findings() {
    let text = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 5 errors\n";
    let r = p(Tool::Memcheck, text, Some(0));
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.error_summary, Some(5));
    assert!(r.findings.is_empty());
}

#[test]
fn application_failure_versus_found_errors() {
    let clean_summary =
        "========= COMPUTE-SANITIZER\napp output\n========= ERROR SUMMARY: 0 errors\n";
    assert_eq!(
        p(Tool::Memcheck, clean_summary, Some(0)).outcome,
        Outcome::Clean
    );
    assert_eq!(
        p(Tool::Memcheck, clean_summary, None).outcome,
        Outcome::Clean
    );
    assert_eq!(
        p(Tool::Memcheck, clean_summary, Some(2)).outcome,
        Outcome::ApplicationFailed { status: Some(2) }
    );
    assert_eq!(
        p(Tool::Memcheck, clean_summary, Some(-6)).outcome,
        Outcome::ApplicationFailed { status: Some(-6) }
    );
    // The error exit code itself means the tool found errors.
    assert_eq!(
        p(Tool::Memcheck, clean_summary, Some(99)).outcome,
        Outcome::FoundErrors
    );
    // With --error-exitcode 0 (the tool's default) status 0 means nothing.
    assert_eq!(
        parse(Tool::Memcheck, clean_summary, Some(0), 0).outcome,
        Outcome::Clean
    );
    // The application's own failure line.
    let failed = "========= COMPUTE-SANITIZER\n========= Error: process didn't terminate successfully\n\
                  ========= Target application returned an error\n========= ERROR SUMMARY: 0 errors\n";
    let r = p(Tool::Memcheck, failed, None);
    assert_eq!(r.outcome, Outcome::ApplicationFailed { status: None });
    assert_eq!(
        r.app_failure.as_deref(),
        Some("Error: process didn't terminate successfully")
    );
    // Findings win over a failed application; both are recorded.
    let both = "========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n\
                =========     at k+0x1 in k.cu:1\n========= \nmy check failed\n\
                ========= Target application returned an error\n========= ERROR SUMMARY: 1 error\n";
    let r = p(Tool::Memcheck, both, Some(2));
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.exit_status, Some(2));
    assert!(r.app_failure.is_some());
}

#[test]
fn older_cuda_memcheck_wording() {
    let text = "\
========= CUDA-MEMCHECK
========= Invalid __global__ read of size 4
=========     at 0x00000020 in test(int*, int*)
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x00000000 is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame:/lib64/libcuda.so.1 (cuLaunchKernel + 0x346) [0x297db6]
=========
========= Fatal UVM GPU fault of type invalid pde due to invalid address
=========     during atomic access to address 0x20be00000
=========
========= Invalid __local__ write of size 16
=========     at 0x00000c40 in /src/k.cu:73:kern(float*)
=========     by thread (5,0,0) in block (1,0,0)
=========     Address 0x00fffd00 is out of bounds
=========
========= Invalid __global__ read of size 8
=========     at 0x00000020 in k2
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f0000000004 is misaligned
=========
========= Leaked 4,092 bytes at 0x7b95b4000000
=========     Saved host backtrace up to driver entry point at allocation time
=========
========= LEAK SUMMARY: 4092 bytes leaked in 1 allocations
========= ERROR SUMMARY: 5 errors
";
    let r = p(Tool::Memcheck, text, Some(1));
    assert!(r.banner);
    assert_eq!(
        r.findings.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [
            FindingKind::InvalidGlobalRead,
            FindingKind::Other,
            FindingKind::InvalidLocalWrite,
            FindingKind::Misaligned,
            FindingKind::Leak
        ]
    );
    let f = &r.findings[0];
    assert_eq!(f.kernel.as_deref(), Some("test"));
    assert_eq!(f.location, None);
    assert_eq!(f.access_size, Some(4));
    assert_eq!(f.address.as_deref(), Some("0x00000000"));
    let f = &r.findings[2];
    assert_eq!(f.kernel.as_deref(), Some("kern"));
    assert_eq!(f.location.as_deref(), Some("/src/k.cu:73"));
    assert_eq!(f.access_size, Some(16));
    assert_eq!(f.thread, Some([5, 0, 0]));
    assert_eq!(r.findings[3].access_size, Some(8));
    assert_eq!(r.findings[3].kernel.as_deref(), Some("k2"));
    assert_eq!(r.findings[4].address.as_deref(), Some("0x7b95b4000000"));
    assert_eq!(
        r.notes,
        ["LEAK SUMMARY: 4092 bytes leaked in 1 allocations"]
    );
    assert_eq!(r.outcome, Outcome::FoundErrors);
}

#[test]
fn synccheck_barrier_errors() {
    let text = "\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at sync_divergent+0x90 in default_program:50
=========     by thread (128,0,0) in block (3,0,0)
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cuLaunchKernel [0x39fb94] in libcuda.so.1
========= 
========= Barrier error detected. Invalid arguments.
=========     at __syncwarp(unsigned int)+0xe0 in sm_30_intrinsics.hpp:110
=========         Device Frame: broken_sync(float *, unsigned long)+0xb0 in /input/kernel.cu:12
=========     by thread (16,0,0) in block (0,0,0)
========= 
========= ERROR SUMMARY: 2 errors
";
    let r = p(Tool::Synccheck, text, Some(99));
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.findings.len(), 2);
    let f = &r.findings[0];
    assert_eq!(f.kind, FindingKind::Barrier);
    assert_eq!(f.kernel.as_deref(), Some("sync_divergent"));
    assert_eq!(f.location.as_deref(), Some("default_program:50"));
    assert_eq!(f.thread, Some([128, 0, 0]));
    assert_eq!(f.block, Some([3, 0, 0]));
    let f = &r.findings[1];
    assert_eq!(f.kind, FindingKind::Barrier);
    assert_eq!(
        f.kernel.as_deref(),
        Some("broken_sync"),
        "the outermost device frame"
    );
    assert_eq!(f.location.as_deref(), Some("sm_30_intrinsics.hpp:110"));
    assert_eq!(f.thread, Some([16, 0, 0]));
}

#[test]
fn racecheck_other_wordings() {
    // Warnings, write-write and read-write pairs, old address+file:line:function locations.
    let text = "\
========= COMPUTE-SANITIZER
========= WARN: Race reported between Read access at 0x00000170 in ./race.cu:4:test(int*, int*)
=========     and Write access at 0x00000148 in ./race.cu:3:test(int*, int*) [4 hazards]
=========     and Write access at 0x000001a8 in ./race.cu:4:test(int*, int*) [4 hazards]
=========
========= Error: Race reported between Write access at 0x00000148 in ./race.cu:3:test(int*, int*)
=========     and Write access at 0x00000148 in ./race.cu:3:test(int*, int*) [124 hazards]
=========
========= Error: Race reported between Write access at 0x50 in kernel(float *) and Read access at 0x90 in kernel(float *)
========= 
========= RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warnings)
";
    let r = p(Tool::Racecheck, text, Some(99));
    assert_eq!(r.error_summary, Some(2));
    assert_eq!(r.warnings, Some(1));
    type Pair<'a> = (Option<Hazard>, u64, Option<&'a str>, Option<&'a str>);
    let got: Vec<Pair> = r
        .findings
        .iter()
        .map(|f| {
            assert_eq!(f.kind, FindingKind::Race);
            (
                f.hazard,
                f.count,
                f.location.as_deref(),
                f.peer_location.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                Some(Hazard::War),
                4,
                Some("./race.cu:4"),
                Some("./race.cu:3")
            ),
            (
                Some(Hazard::War),
                4,
                Some("./race.cu:4"),
                Some("./race.cu:4")
            ),
            (
                Some(Hazard::Waw),
                124,
                Some("./race.cu:3"),
                Some("./race.cu:3")
            ),
            (Some(Hazard::Raw), 1, None, None),
        ]
    );
    assert!(r.findings.iter().all(|f| f
        .kernel
        .as_deref()
        .is_some_and(|k| k == "test" || k == "kernel")));
    assert_eq!(r.findings[3].kernel.as_deref(), Some("kernel"));
    assert_eq!(r.outcome, Outcome::FoundErrors);

    // Warnings alone still fail a kernel.
    let warn_only = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n";
    let r = p(Tool::Racecheck, warn_only, Some(0));
    assert_eq!((r.error_summary, r.warnings), (Some(0), Some(1)));
    assert_eq!(r.outcome, Outcome::FoundErrors);
}

#[test]
fn racecheck_hazard_report_mode() {
    let text = "\
========= COMPUTE-SANITIZER
========= ERROR: Potential RAW hazard detected at __shared__ 0x10 in block (2, 0, 0) :
=========     Write Thread (31, 0, 0) at 0x00000148 in ./race.cu:3:test(int*, int*)
=========     Read Thread (0, 1, 0) at 0x00000170 in ./race.cu:4:test(int*, int*)
=========     Current Value : 0
=========
========= WARN:(Warp Level Programming) Potential WAR hazard detected at __shared__ 0x3 in block (0, 0, 0) :
=========     Read Thread (31, 0, 0) at read_k+0x170 in k.cu:4
=========     Write Thread (0, 0, 0) at read_k+0x1a8 in k.cu:5
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 errors, 1 warnings)
";
    let r = p(Tool::Racecheck, text, None);
    assert_eq!(r.findings.len(), 2);
    let f = &r.findings[0];
    assert_eq!(f.kind, FindingKind::Race);
    assert_eq!(f.hazard, Some(Hazard::Raw));
    assert_eq!(f.address.as_deref(), Some("0x10"));
    assert_eq!(f.block, Some([2, 0, 0]));
    assert_eq!(f.thread, Some([31, 0, 0]));
    assert_eq!(f.kernel.as_deref(), Some("test"));
    assert_eq!(f.location.as_deref(), Some("./race.cu:3"));
    assert_eq!(f.peer_location.as_deref(), Some("./race.cu:4"));
    assert_eq!(f.count, 1);
    let f = &r.findings[1];
    assert_eq!(f.hazard, Some(Hazard::War));
    assert_eq!(f.kernel.as_deref(), Some("read_k"));
    assert_eq!(f.location.as_deref(), Some("k.cu:4"));
}

#[test]
fn racecheck_wrapped_summary() {
    let text = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 100 hazards displayed\n========= (4528176 errors, 661824 warnings)\n";
    let r = p(Tool::Racecheck, text, Some(99));
    assert_eq!(r.error_summary, Some(4_528_176));
    assert_eq!(r.warnings, Some(661_824));
    assert_eq!(
        r.summary_line.as_deref(),
        Some("RACECHECK SUMMARY: 100 hazards displayed (4528176 errors, 661824 warnings)")
    );
    assert!(
        r.findings.is_empty(),
        "the wrapped line is part of the summary"
    );
}

#[test]
fn unused_memory_is_a_note_and_crlf_is_fine() {
    let text = "========= COMPUTE-SANITIZER\r\n\
                ========= Unused memory in allocation 0x1303d80000 of size 16 bytes\r\n\
                =========     Not written any memory.\r\n\
                =========\r\n\
                ========= ERROR SUMMARY: 0 errors\r\n";
    let r = p(Tool::Initcheck, text, Some(0));
    assert_eq!(r.outcome, Outcome::Clean);
    assert_eq!(r.notes.len(), 1);
    assert!(r.notes[0].starts_with("Unused memory in allocation"));
    assert_eq!(r.summary_line.as_deref(), Some("ERROR SUMMARY: 0 errors"));
}

#[test]
fn truncated_reports() {
    // Cut inside a finding: the finding counts, the missing summary does not hide it.
    let text = "========= COMPUTE-SANITIZER\n========= Invalid __global__ write of size 4 bytes\n=========     at k+0x1";
    let r = p(Tool::Memcheck, text, None);
    assert_eq!(r.outcome, Outcome::FoundErrors);
    assert_eq!(r.findings[0].kind, FindingKind::InvalidGlobalWrite);
    assert_eq!(r.findings[0].kernel.as_deref(), Some("k"));
    // Cut at the front: a continuation without its header is kept as an unknown block.
    let text =
        "=========     by thread (1,0,0) in block (0,0,0)\n========= ERROR SUMMARY: 1 error\n";
    let r = p(Tool::Memcheck, text, Some(99));
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].kind, FindingKind::Other);
    assert_eq!(r.findings[0].thread, Some([1, 0, 0]));
    // Banner only.
    let r = p(Tool::Memcheck, "========= COMPUTE-SANITIZER\n", Some(0));
    assert!(reason(&r).contains("incomplete report"));
    // Numbers too large for their fields are left out, not wrapped or panicked on.
    let text = "========= Invalid __global__ read of size 99999999999 bytes\n\
                =========     by thread (4294967296,0,0) in block (1,2,3)\n\
                ========= ERROR SUMMARY: 99999999999999999999999 errors\n";
    let r = p(Tool::Memcheck, text, None);
    assert_eq!(r.findings[0].access_size, None);
    assert_eq!(r.findings[0].thread, None);
    assert_eq!(r.findings[0].block, Some([1, 2, 3]));
    assert_eq!(r.outcome, Outcome::FoundErrors);
}

#[test]
fn other_prefix_rules_are_application_output() {
    // Other tools' rules of '=' and valgrind-style prefixes are not sanitizer lines.
    let text = "==================================================================\n\
                ==123== ERROR SUMMARY: 7 errors from 7 contexts\n\
                ========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
    let r = p(Tool::Memcheck, text, Some(0));
    assert_eq!(r.outcome, Outcome::Clean);
    assert_eq!(r.error_summary, Some(0));
}

#[test]
fn describe_is_one_line() {
    let text = "========= COMPUTE-SANITIZER\n========= Error: two\n=========     lines\n========= ERROR SUMMARY: 1 error\n";
    let d = p(Tool::Memcheck, text, Some(99)).describe();
    assert_eq!(
        d,
        "memcheck: found errors; summary 1 error; findings: 1 other; first: other: Error: two; exit 99"
    );
    let r = p(Tool::Memcheck, "line one\nline two", Some(3));
    assert!(!r.describe().contains('\n'));
}
