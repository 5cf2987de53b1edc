//! `klab check <kernel>...`: the reference-verification gate. Each kernel runs in its own
//! child process under a watchdog, so a kernel that faults (an illegal address poisons the
//! CUDA context) or hangs is reported as that kernel's failure and the others still run.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use klab_core::check::{self, CheckOptions};

use crate::cli::CheckArgs;
use crate::cmd::measure::{Kernel, Session};
use crate::{EXIT_ERROR, EXIT_GATE_FAILED};

/// How a child process ended.
#[derive(Debug)]
pub struct ChildOutcome {
    pub status: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Run `exe args` with a watchdog (klab-tools' process runner): both pipes are drained
/// while it runs, and the child leads its own process group, so a timeout kills everything
/// it started.
pub fn run_isolated(
    exe: &Path,
    args: &[String],
    timeout: Duration,
) -> anyhow::Result<ChildOutcome> {
    let argv: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    let c = klab_tools::process::run_captured(exe, &argv, timeout)
        .with_context(|| format!("starting {}", exe.display()))?;
    Ok(ChildOutcome {
        status: c.exit_code,
        timed_out: c.timed_out,
        stdout: String::from_utf8_lossy(&c.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&c.stderr).into_owned(),
    })
}

/// Sizes from `--sizes 33,1024`.
fn sizes(s: &Option<String>) -> anyhow::Result<Option<Vec<u64>>> {
    s.as_ref()
        .map(|t| {
            t.split(',')
                .map(|x| {
                    x.trim()
                        .parse::<u64>()
                        .with_context(|| format!("--sizes: '{x}' is not a size"))
                })
                .collect()
        })
        .transpose()
}

/// One kernel in this process (the child side).
fn check_here(args: &CheckArgs, name: &str) -> anyhow::Result<ExitCode> {
    use klab_core::backend::Backend;
    let kernel = Kernel::parse(name)?;
    let mut session = Session::open(&kernel, args.device)?;
    let k = session.backend.kernel(&kernel.decl.entry)?;
    let opts = CheckOptions {
        seed: args.seed,
        sizes: sizes(&args.sizes)?,
        quick: args.quick,
    };
    let verbose = args.verbose;
    let report = check::run(&mut session.backend, &kernel.decl, &k, &opts, &mut |c| {
        if verbose || !c.pass {
            eprintln!("klab check: {}", c.render());
        }
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let r = report.render();
        // The per-case lines went to stderr as they ran (failures always); stdout gets the
        // summary: header, failures, verdict.
        let mut lines = r.lines();
        if let Some(h) = lines.next() {
            println!("{h}");
        }
        for l in lines {
            if !l.starts_with("PASS ") {
                println!("{l}");
            }
        }
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_GATE_FAILED)
    })
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    // Resolve every kernel and the sizes first: bad input is an error, not a verdict.
    let kernels: Vec<Kernel> = args
        .kernels
        .iter()
        .map(|k| Kernel::parse(k))
        .collect::<Result<_, _>>()?;
    sizes(&args.sizes)?;
    if args.in_process {
        return check_here(&args, &args.kernels[0]);
    }
    // A device must exist before children are blamed for anything.
    klab_cuda::device::Device::open(args.device)?;
    let exe = std::env::current_exe().context("locating the klab binary")?;
    let timeout = Duration::from_secs(args.timeout);
    let mut worst = 0u8;
    for (k, spec) in kernels.iter().zip(&args.kernels) {
        let mut argv = vec![
            "check".to_string(),
            spec.clone(),
            "--in-process".into(),
            "--seed".into(),
            args.seed.to_string(),
            "--device".into(),
            args.device.to_string(),
        ];
        if let Some(s) = &args.sizes {
            argv.extend(["--sizes".into(), s.clone()]);
        }
        if args.json {
            argv.push("--json".into());
        }
        if args.verbose {
            argv.push("--verbose".into());
        }
        if args.quick {
            argv.push("--quick".into());
        }
        let o = run_isolated(&exe, &argv, timeout)?;
        print!("{}", o.stdout);
        eprint!("{}", o.stderr);
        let code = match (o.timed_out, o.status) {
            (true, _) => {
                println!(
                    "check {}: FAIL: hung: killed by the watchdog after {} s",
                    k.name(),
                    args.timeout
                );
                EXIT_GATE_FAILED
            }
            (false, Some(0)) => 0,
            (false, Some(2)) => EXIT_GATE_FAILED,
            (false, status) => {
                let why = o
                    .stderr
                    .lines()
                    .rev()
                    .find(|l| l.starts_with("error:"))
                    .unwrap_or("no error line");
                println!(
                    "check {}: FAIL: the kernel's process failed ({}): {why}",
                    k.name(),
                    status
                        .map(|s| format!("exit {s}"))
                        .unwrap_or_else(|| "killed by a signal".into())
                );
                EXIT_GATE_FAILED
            }
        };
        worst = worst.max(code);
    }
    Ok(match worst {
        0 => ExitCode::SUCCESS,
        EXIT_ERROR => ExitCode::from(EXIT_ERROR),
        _ => ExitCode::from(EXIT_GATE_FAILED),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_watchdog_kills_a_hung_child_and_keeps_its_output() {
        let started = Instant::now();
        let o = run_isolated(
            Path::new("/bin/sh"),
            &["-c".into(), "echo started; sleep 30".into()],
            Duration::from_millis(500),
        )
        .unwrap();
        assert!(o.timed_out);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(o.stdout, "started\n");
    }

    #[test]
    fn a_child_that_dies_reports_its_status() {
        let o = run_isolated(
            Path::new("/bin/sh"),
            &["-c".into(), "echo oops >&2; exit 3".into()],
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(!o.timed_out);
        assert_eq!(o.status, Some(3));
        assert_eq!(o.stderr, "oops\n");
        let o = run_isolated(
            Path::new("/bin/sh"),
            &["-c".into(), "kill -SEGV $$".into()],
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(o.status, None, "a signal is not an exit status");
    }
}
