//! The one typed way klab starts itself: a [`ChildCmd`] over the clap argument structs,
//! turned into an argument vector by one function ([`ChildCmd::argv`], which a test parses
//! back), run by klab-tools' runner (watchdog, own process group, death with the parent),
//! and read back from the results file the parent made for it ([`ResultsFile`], named on
//! the child's command line as `--results-to`), never from its stdout.
//!
//! Every command that launches kernel code does it in a child: `check`, `rounds`, `audit`
//! and `lab` start one per kernel or step; `bench`, `transpose`, `triad` and `reduce-lab`
//! re-run themselves `--in-process` under the watchdog ([`relay`]); `sanitize` and
//! `profile` start the tool, which starts klab.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use klab_engine::verify::VerifyPolicy;
use klab_run::child::{ChildResult, ChildVerdict, Ending, ResultsFile};
use klab_tools::process::{self, Captured, RunOptions};

use crate::cli::{
    BenchArgs, CheckArgs, ProfileArgs, ReduceLabArgs, RoundsArgs, SanitizeArgs, TimingArgs,
    TransposeArgs, TriadArgs,
};

/// The options that hand `policy` to a child.
fn policy_argv(policy: VerifyPolicy) -> Vec<OsString> {
    use clap::ValueEnum;
    let mut a = Argv::default();
    if let Some(v) = policy.checker.to_possible_value() {
        a.opt("--checker", v.get_name());
    }
    a.flag("--paranoid", policy.paranoid);
    if let Some(v) = policy.mutant.and_then(|m| m.to_possible_value()) {
        a.opt("--checker-mutant", v.get_name());
    }
    a.0
}

/// A klab command line that klab runs as a child.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildCmd {
    Check(CheckArgs),
    Bench(BenchArgs),
    Transpose(TransposeArgs),
    Triad(TriadArgs),
    ReduceLab(ReduceLabArgs),
    Profile(ProfileArgs),
    Rounds(RoundsArgs),
    Sanitize(SanitizeArgs),
}

/// An argument vector under construction (OS strings: a path is passed as its bytes).
#[derive(Default)]
struct Argv(Vec<OsString>);

impl Argv {
    fn arg(&mut self, a: impl ToString) -> &mut Self {
        self.0.push(a.to_string().into());
        self
    }
    /// `--flag=value`: a value that begins with '-' stays a value.
    fn opt(&mut self, flag: &str, v: impl ToString) -> &mut Self {
        self.0.push(format!("{flag}={}", v.to_string()).into());
        self
    }
    /// `--flag=PATH` with the path's own bytes, when there is one.
    fn path(&mut self, flag: &str, p: &Option<std::path::PathBuf>) -> &mut Self {
        if let Some(p) = p {
            let mut a = OsString::from(format!("{flag}="));
            a.push(p.as_os_str());
            self.0.push(a);
        }
        self
    }
    /// Everything after this is positional, even a name that begins with '-'.
    fn positional<T: AsRef<std::ffi::OsStr>>(&mut self, items: &[T]) -> &mut Self {
        self.0.push("--".into());
        self.0
            .extend(items.iter().map(|i| i.as_ref().to_os_string()));
        self
    }
    fn maybe<T: ToString>(&mut self, flag: &str, v: &Option<T>) -> &mut Self {
        if let Some(v) = v {
            self.opt(flag, v.to_string());
        }
        self
    }
    /// `--flag=v` once for each value.
    fn each<T: ToString>(&mut self, flag: &str, vs: &[T]) -> &mut Self {
        for v in vs {
            self.opt(flag, v.to_string());
        }
        self
    }
    fn flag(&mut self, flag: &str, on: bool) -> &mut Self {
        if on {
            self.0.push(flag.into());
        }
        self
    }
    fn timing(&mut self, t: &TimingArgs) -> &mut Self {
        self.opt("--regime", t.regime)
            .opt("--timer", t.timer.spec())
            .opt("--samples", t.samples)
            .opt("--warmup", t.warmup.spec())
    }
}

impl ChildCmd {
    /// [`ChildCmd::argv`] with the verification policy as options right after the
    /// command's name, before its own options and the positional `--` (after which they
    /// would be taken for names): a child verifies as its parent was told to.
    pub fn argv_for(&self, policy: VerifyPolicy) -> Vec<OsString> {
        let mut argv = self.argv();
        let at = 1.min(argv.len());
        argv.splice(at..at, policy_argv(policy));
        argv
    }

    /// [`ChildCmd::argv_for`] with the file the child writes its results to (a global
    /// option, placed with the policy's before the positional `--`).
    pub fn argv_reporting_to(&self, policy: VerifyPolicy, results: &Path) -> Vec<OsString> {
        let mut argv = self.argv_for(policy);
        let at = 1.min(argv.len());
        argv.splice(at..at, [OsString::from("--results-to"), results.into()]);
        argv
    }

    /// The arguments after the program name. Parsing them gives back `self`.
    pub fn argv(&self) -> Vec<OsString> {
        let mut a = Argv::default();
        match self {
            ChildCmd::Check(c) => {
                a.arg("check")
                    .opt("--seed", c.seed)
                    .maybe("--sizes", &c.sizes)
                    .each("--shape", &c.shape)
                    .opt("--timeout", c.timeout)
                    .flag("--verbose", c.verbose)
                    .flag("--quick", c.quick)
                    .flag("--json", c.json)
                    .flag("--plan", c.plan)
                    .flag("--in-process", c.in_process)
                    .opt("--resume-after", c.resume_after)
                    .opt("--device", c.device)
                    .positional(&c.kernels);
            }
            ChildCmd::Bench(b) => {
                a.arg("bench")
                    .maybe("--n", &b.n)
                    .maybe("--shape", &b.shape)
                    .timing(&b.timing)
                    .opt("--rounds", b.rounds)
                    .path("--out", &b.out)
                    .maybe("--claim", &b.claim)
                    .opt("--timeout", b.timeout)
                    .flag("--in-process", b.in_process)
                    .opt("--device", b.device)
                    .positional(std::slice::from_ref(&b.kernel));
            }
            ChildCmd::Transpose(t) => {
                a.arg("transpose")
                    .opt("--timeout", t.timeout)
                    .flag("--in-process", t.in_process)
                    .opt("--device", t.device)
                    .positional(&[t.variant.clone(), t.n.clone(), t.reps.clone()]);
            }
            ChildCmd::Triad(t) => {
                // The mode and path may begin with '-', so the options come first.
                a.arg("triad")
                    .opt("--timeout", t.timeout)
                    .flag("--in-process", t.in_process)
                    .opt("--device", t.device);
                let mut rest: Vec<OsString> = t.mode.iter().map(OsString::from).collect();
                rest.extend(t.samples_csv.iter().map(|p| p.as_os_str().to_os_string()));
                rest.extend(t.extra.iter().map(OsString::from));
                a.positional(&rest);
            }
            ChildCmd::ReduceLab(r) => {
                a.arg("reduce-lab")
                    .opt("--timeout", r.timeout)
                    .flag("--in-process", r.in_process)
                    .opt("--device", r.device);
            }
            ChildCmd::Profile(p) => {
                a.arg("profile")
                    .maybe("--n", &p.n)
                    .opt("--sections", &p.sections)
                    .maybe("--metrics", &p.metrics)
                    .opt("--warmup", p.warmup)
                    .opt("--cache-control", p.cache_control)
                    .path("--ncu", &p.ncu)
                    .opt("--timeout", p.timeout)
                    .path("--out", &p.out)
                    .flag("--in-process", p.in_process)
                    .opt("--device", p.device)
                    .positional(&p.kernels);
            }
            ChildCmd::Rounds(r) => {
                a.arg("rounds")
                    .maybe("--baseline", &r.baseline)
                    .maybe("--n", &r.n)
                    .maybe("--shape", &r.shape)
                    .timing(&r.timing)
                    .opt("--rounds", r.rounds)
                    .path("--out", &r.out)
                    .opt("--seed", r.seed)
                    .opt("--timeout", r.timeout)
                    .opt("--device", r.device)
                    .positional(&r.kernels);
            }
            ChildCmd::Sanitize(s) => {
                a.arg("sanitize")
                    .opt("--tools", &s.tools)
                    .maybe("--jobs", &s.jobs)
                    .path("--sanitizer", &s.sanitizer)
                    .opt("--timeout", s.timeout)
                    .path("--out", &s.out)
                    .opt("--device", s.device)
                    .positional(&s.kernels);
            }
        }
        a.0
    }

    /// Run it under the watchdog, verifying as `policy` says.
    pub fn run(
        &self,
        policy: VerifyPolicy,
        timeout: Duration,
        echo: bool,
    ) -> anyhow::Result<ChildRun> {
        let exe = std::env::current_exe().context("locating the klab binary")?;
        let opts = RunOptions {
            echo,
            ..RunOptions::new(timeout)
        };
        let results = ResultsFile::new().context("making a file for a child's results")?;
        let argv = self.argv_reporting_to(policy, results.path());
        let captured = process::run(&exe, &argv, &opts)
            .with_context(|| format!("starting {}", exe.display()))?;
        let said = results
            .read()
            .context("reading what a child said in its results file")?;
        let result = ChildResult::find(&said);
        let ending = Ending {
            exit_code: captured.exit_code,
            signal: captured.signal,
            killed_after: captured.timed_out.then_some(timeout),
        };
        let during = ChildResult::running(&said);
        Ok(ChildRun {
            // The command as a person would type it: the results file is this run's own.
            argv: without_results_file(&argv, results.path()),
            verdict: ChildVerdict::of(result.as_ref(), &ending, during.as_deref()),
            result,
            said,
            stdout: String::from_utf8_lossy(&captured.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&captured.stderr).into_owned(),
            captured,
        })
    }
}

/// A finished child: its output, what it said in its results file, its result, and the
/// verdict built once from the result and how its process ended.
pub struct ChildRun {
    pub argv: Vec<String>,
    pub captured: Captured,
    pub result: Option<ChildResult>,
    /// Everything the child said in its results file (the cases it ran, then its result).
    pub said: String,
    pub verdict: ChildVerdict,
    pub stdout: String,
    pub stderr: String,
}

impl ChildRun {
    /// `$ klab ARGS`, the output and how it ended, for a log file.
    pub fn log_block(&self) -> String {
        let ended = match (&self.verdict, self.captured.exit_code) {
            (ChildVerdict::Hung { .. }, _) | (_, None) => self.verdict.describe(),
            (_, Some(code)) => format!("exit {code}"),
        };
        format!(
            "$ klab {}\n{}{}[{ended}]\n\n",
            self.argv.join(" "),
            self.stdout,
            self.stderr,
        )
    }
}

/// `argv` as text without the `--results-to FILE` pair that names `results`: what a log or
/// a saved command shows (the file is the parent's, for one run).
pub fn without_results_file(argv: &[OsString], results: &Path) -> Vec<String> {
    let mut shown = Vec::with_capacity(argv.len());
    let mut args = argv.iter().peekable();
    while let Some(a) = args.next() {
        if a == "--results-to" && args.peek().is_some_and(|p| Path::new(p) == results) {
            args.next();
            continue;
        }
        shown.push(a.to_string_lossy().into_owned());
    }
    shown
}

/// Re-run a command in a child under the watchdog, its output shown as it comes, and exit
/// as its verdict says; what is not a plain exit (a hang, a crash, an error) in one line.
pub fn relay(
    cmd: ChildCmd,
    policy: VerifyPolicy,
    timeout_s: u64,
    what: &str,
) -> anyhow::Result<ExitCode> {
    let run = cmd.run(policy, Duration::from_secs(timeout_s), true)?;
    match (&run.verdict, &run.result) {
        (ChildVerdict::Hung { .. } | ChildVerdict::Crashed { .. }, _) => {
            eprintln!("{what}: FAIL: {}", run.verdict.describe())
        }
        // The child said its own error.
        (ChildVerdict::Error { .. }, Some(ChildResult::Error { .. })) => {}
        (ChildVerdict::Error { message }, _) => eprintln!("error: {what}: {message}"),
        _ => {}
    }
    Ok(ExitCode::from(run.verdict.exit_code()))
}

/// This process was started by klab (maybe through compute-sanitizer or ncu), so it dies
/// with that parent: both variables the runner sets are there (a stray `KLAB_CHILD` alone in
/// someone's shell changes nothing). Whether a parent reads results is `--results-to`'s.
pub fn is_child() -> bool {
    std::env::var_os(process::CHILD_ENV).is_some()
        && std::env::var_os(process::PARENT_ENV).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(argv: &[OsString]) -> Command {
        let mut full = vec![OsString::from("klab")];
        full.extend(argv.iter().cloned());
        Cli::try_parse_from(full)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
            .into_command()
    }

    fn round_trip(c: ChildCmd) {
        let argv = c.argv();
        let back = match (parse(&argv), &c) {
            (Command::Check(a), ChildCmd::Check(_)) => ChildCmd::Check(a),
            (Command::Bench(a), ChildCmd::Bench(_)) => ChildCmd::Bench(a),
            (Command::Transpose(a), ChildCmd::Transpose(_)) => ChildCmd::Transpose(a),
            (Command::Triad(a), ChildCmd::Triad(_)) => ChildCmd::Triad(a),
            (Command::ReduceLab(a), ChildCmd::ReduceLab(_)) => ChildCmd::ReduceLab(a),
            (Command::Profile(a), ChildCmd::Profile(_)) => ChildCmd::Profile(a),
            (Command::Rounds(a), ChildCmd::Rounds(_)) => ChildCmd::Rounds(a),
            (Command::Sanitize(a), ChildCmd::Sanitize(_)) => ChildCmd::Sanitize(a),
            (other, _) => panic!("{argv:?} parsed as {other:?}"),
        };
        assert_eq!(back, c, "{argv:?}");
    }

    fn parsed<T>(argv: &[&str], pick: impl Fn(Command) -> Option<T>) -> T {
        let v: Vec<OsString> = argv.iter().map(OsString::from).collect();
        pick(parse(&v)).expect("the command parses as itself")
    }

    fn finished(
        exit_code: Option<i32>,
        signal: Option<i32>,
        timed_out: bool,
        result: Option<ChildResult>,
    ) -> ChildRun {
        let ending = Ending {
            exit_code,
            signal,
            killed_after: timed_out.then_some(Duration::from_secs(10)),
        };
        ChildRun {
            argv: vec!["check".into()],
            captured: Captured {
                exit_code,
                signal,
                timed_out,
                stdout: Vec::new(),
                stderr: Vec::new(),
                merged: Vec::new(),
                incomplete: false,
            },
            verdict: ChildVerdict::of(result.as_ref(), &ending, None),
            result,
            said: String::new(),
            stdout: String::new(),
            stderr: String::new(),
        }
    }

    #[test]
    fn a_log_block_ends_with_the_exit_code_or_what_ended_the_process() {
        assert!(finished(Some(0), None, false, None)
            .log_block()
            .ends_with("[exit 0]\n\n"));
        assert!(finished(None, Some(9), true, None)
            .log_block()
            .ends_with("[hung: killed by the watchdog after 10.0 s]\n\n"));
        assert!(finished(None, Some(11), false, None)
            .log_block()
            .ends_with("[the process died of signal 11]\n\n"));
    }

    /// A child verifies as its parent was told to, by its own options and nothing else.
    /// Appended after the kernels they were taken for kernel names (`-- k --checker cpu`):
    /// the audit's wrong checkers never ran and sanitized checks named a kernel `cpu`.
    #[test]
    fn the_policy_reaches_the_child_as_its_options_not_kernel_names() {
        use klab_engine::verify::{Checker, CheckerMutant};
        let check = parsed(&["check", "padded"], |c| match c {
            Command::Check(a) => Some(a),
            _ => None,
        });
        for policy in [
            VerifyPolicy::default(),
            VerifyPolicy {
                checker: Checker::Cpu,
                paranoid: true,
                mutant: Some(CheckerMutant::SkipsLast),
            },
            VerifyPolicy {
                checker: Checker::Device,
                paranoid: false,
                mutant: Some(CheckerMutant::NegativeZero),
            },
        ] {
            let argv = ChildCmd::Check(check.clone()).argv_for(policy);
            let mut full = vec![OsString::from("klab")];
            full.extend(argv);
            let cli = Cli::try_parse_from(full).unwrap();
            assert_eq!(cli.verify_policy(), policy);
            let Command::Check(a) = cli.into_command() else {
                panic!("not a check")
            };
            assert_eq!(a.kernels, ["padded"]);
        }
    }

    /// The results file is the child's: its path arrives as `--results-to`, not as a kernel
    /// name, and the command is the same with it.
    #[test]
    fn the_results_file_reaches_the_child_as_its_option() {
        let check = parsed(&["check", "padded", "naive"], |c| match c {
            Command::Check(a) => Some(a),
            _ => None,
        });
        let file = Path::new("/tmp/a dir/klab-results-x");
        let argv = ChildCmd::Check(check.clone()).argv_reporting_to(VerifyPolicy::default(), file);
        // Logged and saved without it, as a person would type the command.
        let plain: Vec<String> = ChildCmd::Check(check.clone())
            .argv_for(VerifyPolicy::default())
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(without_results_file(&argv, file), plain);
        let mut full = vec![OsString::from("klab")];
        full.extend(argv);
        let cli = Cli::try_parse_from(full).unwrap();
        assert_eq!(cli.results_to.as_deref(), Some(file));
        let Command::Check(a) = cli.into_command() else {
            panic!("not a check")
        };
        assert_eq!(a, check);
    }

    #[test]
    fn every_child_command_parses_back_to_itself() {
        let spaced = "/tmp/my kernels/mine.toml:a";
        let mut check = parsed(&["check", "padded"], |c| match c {
            Command::Check(a) => Some(a),
            _ => None,
        });
        round_trip(ChildCmd::Check(check.clone()));
        check.kernels = vec![spaced.into(), "transpose/tiled".into()];
        check.sizes = Some("33,1024".into());
        check.in_process = true;
        check.quick = true;
        check.json = true;
        check.device = 3;
        round_trip(ChildCmd::Check(check.clone()));
        check.sizes = None;
        check.shape = vec![
            "M=64,N=8,K=3".parse().unwrap(),
            "M=1,N=1,K=1".parse().unwrap(),
        ];
        round_trip(ChildCmd::Check(check));

        let mut bench = parsed(&["bench", "x"], |c| match c {
            Command::Bench(a) => Some(a),
            _ => None,
        });
        round_trip(ChildCmd::Bench(bench.clone()));
        bench.kernel = spaced.into();
        bench.n = Some(8193);
        bench.timing.regime = "buffer-rotated".parse().unwrap();
        bench.timing.timer = "graph:8".parse().unwrap();
        bench.timing.warmup = "stable:5:0.5:1000".parse().unwrap();
        bench.out = Some("/tmp/a b/r01".into());
        round_trip(ChildCmd::Bench(bench.clone()));
        // A path that is not UTF-8 reaches the child byte for byte.
        {
            use std::os::unix::ffi::OsStrExt;
            bench.out = Some(std::ffi::OsStr::from_bytes(b"/tmp/nv\xff9").into());
        }
        bench.claim = Some("--looks like a flag".into());
        bench.in_process = true;
        round_trip(ChildCmd::Bench(bench.clone()));
        bench.n = None;
        bench.shape = Some("M=2048,N=2048,K=1024".parse().unwrap());
        round_trip(ChildCmd::Bench(bench));

        let mut t = parsed(&["transpose", "all", "33", "1"], |c| match c {
            Command::Transpose(a) => Some(a),
            _ => None,
        });
        round_trip(ChildCmd::Transpose(t.clone()));
        t.n = "-5".into();
        t.in_process = true;
        round_trip(ChildCmd::Transpose(t));

        for argv in [
            vec!["triad"],
            vec!["triad", "--bench-rotate", "/tmp/s s.csv"],
            vec!["triad", "--check"],
        ] {
            let mut tr = parsed(&argv, |c| match c {
                Command::Triad(a) => Some(a),
                _ => None,
            });
            round_trip(ChildCmd::Triad(tr.clone()));
            tr.in_process = true;
            tr.timeout = 7;
            round_trip(ChildCmd::Triad(tr));
        }

        let mut r = parsed(&["reduce-lab"], |c| match c {
            Command::ReduceLab(a) => Some(a),
            _ => None,
        });
        r.in_process = true;
        round_trip(ChildCmd::ReduceLab(r));

        let mut p = parsed(&["profile", "naive"], |c| match c {
            Command::Profile(a) => Some(a),
            _ => None,
        });
        round_trip(ChildCmd::Profile(p.clone()));
        p.kernels = vec![spaced.into()];
        p.metrics = Some("a,b".into());
        p.ncu = Some("/opt/n cu/ncu".into());
        p.in_process = true;
        round_trip(ChildCmd::Profile(p));

        let mut rounds = parsed(&["rounds", "a", "b"], |c| match c {
            Command::Rounds(a) => Some(a),
            _ => None,
        });
        round_trip(ChildCmd::Rounds(rounds.clone()));
        rounds.kernels = vec![spaced.into(), "-odd.toml:b".into()];
        rounds.baseline = Some("/x.toml:b".into());
        rounds.out = Some("out dir".into());
        round_trip(ChildCmd::Rounds(rounds.clone()));
        rounds.shape = Some("rows=33,cols=7".parse().unwrap());
        round_trip(ChildCmd::Rounds(rounds));

        let mut s = parsed(&["sanitize", "padded"], |c| match c {
            Command::Sanitize(a) => Some(a),
            _ => None,
        });
        round_trip(ChildCmd::Sanitize(s.clone()));
        s.sanitizer = Some("/opt/cs".into());
        s.out = Some("o".into());
        s.jobs = Some(3);
        round_trip(ChildCmd::Sanitize(s));
    }
}
