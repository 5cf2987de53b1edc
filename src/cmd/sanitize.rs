//! `klab sanitize <kernel>...`: the Compute Sanitizer gate. Each tool runs once per kernel
//! (up to `--jobs` runs at once), as an argument vector (no shell), over a klab child that
//! checks the kernel as `klab check <kernel> --quick` does (its exact inputs) at a ragged and a full-tile size; each
//! report is parsed into findings and classified (clean, errors found, the application
//! failed, the tool could not run). Accepted kernels must be clean
//! under every tool; known-broken kernels are expected failures.
//! `klab sanitize --import REPORT --tool T` skips the run and gives a saved report to the
//! same parser and describe line ([`sanitizer::import`]).

use crate::output::{self, Format, Report};
use klab_engine::verify::VerifyPolicy;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use klab_core::artifact::write_atomic;
use klab_tools::sanitizer::{self, Options, Outcome, SanitizedKernel, Tool};

use crate::child::ChildCmd;
use crate::cli::{CheckArgs, SanitizeArgs};
use crate::{EXIT_ERROR, EXIT_GATE_FAILED};
use klab_run::folder::output_dir;
use klab_run::kernel::Kernel;

/// The compute-sanitizer binary: `--sanitizer`, else PATH, else the toolkit's usual place.
pub fn find_sanitizer(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    crate::cmd::given_tool("--sanitizer", given)?;
    sanitizer::locate(given)
        .context("compute-sanitizer not found (put it on PATH or pass --sanitizer PATH)")
}

/// The order in which the (kernel, tool) runs start, as indices into `pairs`: the longest
/// first, so that none is left to run alone at the end. A known-broken kernel's runs lead
/// (a report can hold millions of hazards: the lab's racy transpose ran 5 s longer under
/// racecheck than any other run), then racecheck's; otherwise kernel and tool order.
fn start_order(pairs: &[(usize, Tool)], known_broken: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&i| {
        let (k, tool) = pairs[i];
        (!known_broken(k), tool != Tool::Racecheck)
    });
    order
}

/// A ragged and a full-tile size for a kernel's launch (its one size variable's chunk).
pub fn sizes_for(kernel: &Kernel) -> (u64, u64) {
    let e = kernel
        .size_variable()
        .map(|var| klab_engine::declared::chunk(&kernel.decl.op, var))
        .unwrap_or(1)
        .max(1);
    (e + 1, full_tile_size(e))
}

/// The full-tile size for chunk `e`: two whole chunks (a chunk beside a chunk, not only at
/// an edge) and at least 256 elements. The tools judge accesses, and a race or a stray index
/// shows at this size as at any larger one, while their cost grows with the work: racecheck
/// of the lab's racy transpose took 9-10 s at 1024 and 4 s at 256 on the H100. No chunk of
/// 512 or less is run larger than before (1024); a chunk over 512 gets two where it had one.
fn full_tile_size(e: u64) -> u64 {
    let e = e.max(1);
    (2 * e).max(256).div_ceil(e) * e
}

/// The `klab check` a tool runs for `kernel`, the sizes it covers and how to say where:
/// the exact-input case (`--quick`) at a ragged and a full-tile size for a built-in
/// operation, at every shape of the ladder for a declared one. The tools judge the
/// launches' accesses, not their values: the value cases (random, special, determinism)
/// are the oracle's, and under racecheck each one multiplied a run's time (the lab's
/// sanitize step took 18.6 s with them, nearly all of it one racecheck run of a racy kernel).
pub(crate) fn sanitize_target(kernel: &Kernel, device: u32) -> (CheckArgs, Vec<u64>, String) {
    let base = crate::cmd::check::child_args(kernel.spec(), device);
    if kernel.decl.operation == klab_spec::declared::builtin::OpKind::Declared {
        let args = CheckArgs {
            quick: true,
            ..base
        };
        return (
            args,
            Vec::new(),
            "every shape of its ladder (exact inputs)".into(),
        );
    }
    let (ragged, full) = sizes_for(kernel);
    let args = CheckArgs {
        sizes: Some(format!("{ragged},{full}")),
        quick: true,
        ..base
    };
    (
        args,
        vec![ragged, full],
        format!("n={ragged},{full} (exact inputs)"),
    )
}

/// What a sanitize run reports: each kernel's runs (as sanitize.json holds them) and its
/// verdict, and the folder.
#[derive(serde::Serialize)]
struct SanitizeReport {
    kernels: Vec<SanitizedKernel>,
    /// The watchdog a hung run was killed by.
    watchdog_s: u64,
    reports: PathBuf,
}

impl Report for SanitizeReport {
    fn human(&self) -> String {
        let mut out = String::new();
        for k in &self.kernels {
            for r in &k.runs {
                let said = if r.timed_out {
                    format!(
                        "FAIL: hung: killed by the watchdog after {} s",
                        self.watchdog_s
                    )
                } else {
                    r.report.describe()
                };
                out += &format!("{} {}: {said}\n", k.kernel, r.tool.as_str());
            }
            out += &format!("{}: {}\n", k.kernel, k.verdict);
        }
        out + &format!("reports: {}\n", self.reports.display())
    }

    /// One row per kernel and tool, with the kernel's verdict.
    fn csv(&self) -> anyhow::Result<String> {
        let head = [
            "kernel", "tool", "outcome", "errors", "warnings", "hung", "verdict",
        ];
        let mut rows = vec![head.map(String::from).to_vec()];
        let n = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        for k in &self.kernels {
            for r in &k.runs {
                rows.push(vec![
                    k.kernel.clone(),
                    r.tool.as_str().to_string(),
                    r.report.outcome.to_string(),
                    n(r.report.error_summary),
                    n(r.report.warnings),
                    r.timed_out.to_string(),
                    k.verdict.clone(),
                ]);
            }
        }
        Ok(klab_core::csv::lines(&rows))
    }
}

/// A sanitizer report read back from a file: the same parser and line as a run's.
#[derive(serde::Serialize)]
struct Imported {
    file: PathBuf,
    report: sanitizer::Report,
}

impl Report for Imported {
    fn human(&self) -> String {
        format!("{}: {}\n", self.file.display(), self.report.describe())
    }

    /// One row per finding (a clean report: one row without one), with the outcome.
    fn csv(&self) -> anyhow::Result<String> {
        let head = [
            "file", "tool", "outcome", "kind", "severity", "hazard", "kernel", "location", "count",
        ];
        let mut rows = vec![head.map(String::from).to_vec()];
        let r = &self.report;
        let common = [
            self.file.display().to_string(),
            r.tool.as_str().to_string(),
            r.outcome.to_string(),
        ];
        let opt = |v: Option<String>| v.unwrap_or_default();
        for f in &r.findings {
            let mut row = common.to_vec();
            row.extend([
                f.kind.to_string(),
                f.severity.to_string(),
                opt(f.hazard.map(|h| h.to_string())),
                opt(f.kernel.clone()),
                opt(f.location.clone()),
                f.count.to_string(),
            ]);
            rows.push(row);
        }
        if r.findings.is_empty() {
            let mut row = common.to_vec();
            row.resize(head.len(), String::new());
            rows.push(row);
        }
        Ok(klab_core::csv::lines(&rows))
    }
}

/// `--import REPORT --tool T`: the same parser and describe line as a run; exit 0 clean,
/// 2 findings or a failed application, 1 a file that cannot be read, a report of a tool
/// that could not run (as a run's exit says), or a report that says another tool wrote it.
fn import(path: &Path, tool: Tool, format: Format) -> anyhow::Result<ExitCode> {
    let report = sanitizer::import(tool, path)?;
    let code = match report.outcome {
        Outcome::Clean => ExitCode::SUCCESS,
        Outcome::ToolFailed { .. } => ExitCode::from(EXIT_ERROR),
        Outcome::FoundErrors | Outcome::ApplicationFailed { .. } => {
            ExitCode::from(EXIT_GATE_FAILED)
        }
    };
    output::emit(
        &Imported {
            file: path.to_path_buf(),
            report,
        },
        format,
    )?;
    Ok(code)
}

/// The argument vector of the check a sanitizer runs: its outputs are judged on the CPU, so
/// that the tools see only the kernel's own launches, never klab's device checker, and it
/// makes no driver call it expects to fail, which the tools would report as the kernel's.
pub fn sanitized_check(args: CheckArgs) -> Vec<std::ffi::OsString> {
    ChildCmd::Check(args).argv_for(VerifyPolicy {
        checker: klab_engine::verify::Checker::Cpu,
        sanitized: true,
        ..VerifyPolicy::default()
    })
}

pub fn run(args: SanitizeArgs) -> anyhow::Result<ExitCode> {
    if let (Some(path), Some(tool)) = (&args.import, args.tool) {
        return import(path, tool.into(), args.output.format());
    }
    let kernels = Kernel::parse_all(&args.kernels, klab_spec::registry::Scope::Default)?;
    let tools: Vec<Tool> = args.tools.0.clone();
    if tools.is_empty() {
        bail!("--tools names no tool");
    }
    let sanitizer = find_sanitizer(args.sanitizer.as_deref())?;
    klab_cuda::device::Device::check(args.device)?;
    let dir = output_dir(args.out.as_deref(), "sanitize")?;
    let targets: Vec<_> = kernels
        .iter()
        .map(|k| sanitize_target(k, args.device))
        .collect();
    let mut records =
        run_every_tool(&kernels, &targets, &tools, &sanitizer, &args, &dir)?.into_iter();
    let mut all = Vec::new();
    let (mut failed, mut tool_broke) = (false, false);
    for (k, (_, sizes, at)) in kernels.iter().zip(targets) {
        let runs = tools
            .iter()
            .map(|_| records.next().expect("one record per kernel and tool"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        // A kernel that hung under a tool: that kernel's failure, not the tool's.
        let hung = runs.iter().any(|r| r.timed_out);
        tool_broke |= runs
            .iter()
            .any(|r| !r.timed_out && matches!(r.report.outcome, Outcome::ToolFailed { .. }));
        let (verdict, rejected) = verdict_of(k, &runs, hung, &tools, &at);
        failed |= rejected;
        all.push(SanitizedKernel {
            kernel: k.name(),
            known_broken: k.decl.known_broken.clone(),
            sizes,
            runs,
            verdict,
        });
    }
    write_atomic(
        &dir.join("sanitize.json"),
        (serde_json::to_string_pretty(&all)? + "\n").as_bytes(),
    )?;
    let report = SanitizeReport {
        kernels: all,
        watchdog_s: args.timeout,
        reports: dir.clone(),
    };
    output::emit(&report, args.output.format())?;
    Ok(if tool_broke {
        ExitCode::from(EXIT_ERROR)
    } else if failed {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Every (kernel, tool) run, at once up to `--jobs`: each is its own process under its own
/// watchdog, and none is timed, so they may share the GPU. Each report is written as its
/// run ends; the records come back in kernel and tool order.
fn run_every_tool(
    kernels: &[Kernel],
    targets: &[(CheckArgs, Vec<u64>, String)],
    tools: &[Tool],
    sanitizer: &Path,
    args: &SanitizeArgs,
    dir: &Path,
) -> anyhow::Result<Vec<anyhow::Result<sanitizer::RunRecord>>> {
    let exe = std::env::current_exe().context("locating the klab binary")?;
    let opts = Options::default();
    let pairs: Vec<(usize, Tool)> = (0..kernels.len())
        .flat_map(|k| tools.iter().map(move |&t| (k, t)))
        .collect();
    let order = start_order(&pairs, |k| kernels[k].decl.known_broken.is_some());
    let jobs = klab_cuda::device::Device::processes_at_once(
        args.device,
        args.jobs.unwrap_or_else(klab_core::par::untimed_children),
    );
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let records = klab_core::par::map_jobs(jobs, &order, |&i| {
        let (k, tool) = pairs[i];
        let rec = sanitizer::run(
            tool,
            &opts,
            &exe,
            &sanitized_check(targets[k].0.clone()),
            sanitizer,
            Duration::from_secs(args.timeout),
        )?;
        let name = format!("{}-{}.txt", kernels[k].name(), tool.as_str());
        write_atomic(&dir.join(&name), rec.log_text().as_bytes())?;
        let done = finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        eprintln!(
            "klab sanitize: {} {} finished ({done}/{})",
            kernels[k].name(),
            tool.as_str(),
            pairs.len()
        );
        anyhow::Ok(rec)
    });
    // Back in kernel and tool order.
    let mut slots: Vec<_> = pairs.iter().map(|_| None).collect();
    for (&i, r) in order.iter().zip(records) {
        slots[i] = Some(r);
    }
    Ok(slots
        .into_iter()
        .map(|r| r.expect("one record per kernel and tool"))
        .collect())
}

/// A kernel's verdict over its tools' runs at `at`, and whether it is a rejection: a
/// known-broken kernel always is (found by a tool, or left to another gate), a hang is, a
/// tool's finding on any other is.
fn verdict_of(
    k: &Kernel,
    runs: &[sanitizer::RunRecord],
    hung: bool,
    tools: &[Tool],
    at: &str,
) -> (String, bool) {
    let clean = !hung && runs.iter().all(|r| r.report.passes());
    let found: Vec<&str> = runs
        .iter()
        .filter(|r| r.report.outcome == Outcome::FoundErrors)
        .map(|r| r.tool.as_str())
        .collect();
    match (&k.decl.known_broken, clean) {
        (Some(why), _) if found.is_empty() => (
            format!("REJECTED (known-broken: {why}); no sanitizer tool reported it at {at}: another gate must catch it"),
            true,
        ),
        (Some(why), _) => (
            format!(
                "REJECTED (known-broken: {why}); found by {}",
                found.join(", ")
            ),
            true,
        ),
        (None, true) => (
            format!(
                "CLEAN under {} at {at}",
                tools
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            false,
        ),
        (None, false) if hung => (
            format!(
                "FAIL: hung under {}",
                runs.iter()
                    .filter(|r| r.timed_out)
                    .map(|r| r.tool.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            true,
        ),
        (None, false) => (
            format!(
                "FAIL: {}",
                runs.iter()
                    .filter(|r| !r.report.passes())
                    .map(|r| format!("{} {}", r.tool.as_str(), r.report.outcome))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            true,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_tile_size_is_two_whole_chunks_and_at_least_256() {
        // The transpose's 32-wide tile, a reduction's 512-element block, odd chunks.
        for (e, full) in [
            (1, 256),
            (32, 256),
            (100, 300),
            (512, 1024),
            (1024, 2048),
            (3, 258),
        ] {
            assert_eq!(full_tile_size(e), full, "chunk {e}");
            assert_eq!(full % e, 0);
            assert!(full >= 2 * e);
        }
        assert_eq!(full_tile_size(0), 256, "no chunk is one element");
        let tiled = Kernel::parse("transpose/tiled").unwrap();
        assert_eq!(sizes_for(&tiled), (33, 256));
    }

    #[test]
    fn runs_start_known_broken_first_then_racecheck_and_every_run_once() {
        let tools = [Tool::Memcheck, Tool::Racecheck, Tool::Synccheck];
        let pairs: Vec<(usize, Tool)> = (0..3)
            .flat_map(|k| tools.iter().map(move |&t| (k, t)))
            .collect();
        // Kernel 2 is known-broken.
        let order = start_order(&pairs, |k| k == 2);
        let started: Vec<(usize, Tool)> = order.iter().map(|&i| pairs[i]).collect();
        assert_eq!(
            started,
            [
                (2, Tool::Racecheck),
                (2, Tool::Memcheck),
                (2, Tool::Synccheck),
                (0, Tool::Racecheck),
                (1, Tool::Racecheck),
                (0, Tool::Memcheck),
                (0, Tool::Synccheck),
                (1, Tool::Memcheck),
                (1, Tool::Synccheck),
            ]
        );
        let mut seen = order.clone();
        seen.sort();
        assert_eq!(seen, (0..pairs.len()).collect::<Vec<_>>());
    }
}
