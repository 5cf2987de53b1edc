//! The one way klab starts itself: a [`ChildSpec`] (the work, as the argument struct of the
//! command that does it, and how to verify), serialized as JSON into the one argument of the
//! hidden `klab __child`, run by klab-tools' runner (watchdog, own process group, death with
//! the parent), and read back from the results file the parent made for it ([`ResultsFile`],
//! named as `--results-to`), never from its stdout. The argument structs are the schema: a
//! child's work has no second description to keep in step with the command line.
//!
//! Every command that launches kernel code does it in a child: `check`, `rounds`, `audit`
//! and `lab` start one per kernel or step (`rounds` one per block, or one per round); `bench`, `transpose`, `triad` and `reduce-lab`
//! run their work in one under the watchdog ([`relay`]); `sanitize` and `profile` start the
//! tool, which starts the child.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use klab_engine::verify::VerifyPolicy;
use klab_run::child::{ChildResult, ChildVerdict, Ending, ResultsFile};
use klab_run::pace::Turn;
use klab_tools::process::{self, Captured, Echo, RunOptions};

use crate::output::{self, Format};
use serde::{Deserialize, Serialize};

use crate::cli::{
    BenchArgs, CheckArgs, ProfileArgs, ReduceLabArgs, RoundsArgs, SanitizeArgs, TransposeArgs,
    TriadArgs,
};

/// The work a klab child does: a command's arguments, run in the child's process (the part
/// of `check`, `bench`, `transpose`, `triad`, `reduce-lab` and `profile` that runs kernels),
/// or a whole `rounds`, `sanitize` or `profile` (the lab's steps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChildCmd {
    /// One kernel's check (its plan when `plan`; the cases after `resume_after`)
    Check(CheckArgs),
    Bench(BenchArgs),
    /// A bench started ahead of its turn (a block of `klab rounds`, a receipt of the lab):
    /// its parent paces it (`klab_run::pace::Turn`, `crate::pacing`), giving its turns on
    /// its stdin
    PacedBench(BenchArgs),
    Transpose(TransposeArgs),
    Triad(TriadArgs),
    ReduceLab(ReduceLabArgs),
    /// One kernel's launch sequence, which ncu profiles
    ProfiledLaunches(ProfileArgs),
    /// A whole `klab profile` (the lab's step), which starts ncu over its own children
    Profile(ProfileArgs),
    Rounds(RoundsArgs),
    /// One round of `klab rounds` in one process (`--isolation round`)
    Round(RoundWork),
    Sanitize(SanitizeArgs),
}

/// A round's blocks, run in order in one process on a device opened once: each block a
/// `klab bench` child's work, saying its results to a file of its own, so that its parent
/// reads every block as it reads a block that had a process to itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundWork {
    pub blocks: Vec<RoundBlock>,
}

/// One block of a [`RoundWork`]: the bench, and the file its parent reads its results from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundBlock {
    pub bench: BenchArgs,
    #[serde(with = "klab_core::os_path")]
    pub results: std::path::PathBuf,
}

/// What a child is given: its work and how it verifies kernel outputs (its parent's way).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildSpec {
    pub work: ChildCmd,
    pub policy: VerifyPolicy,
}

impl ChildSpec {
    /// The spec from `klab __child`'s argument.
    pub fn parse(json: &str) -> anyhow::Result<ChildSpec> {
        serde_json::from_str(json)
            .context("klab __child takes the work as JSON that klab itself wrote")
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a child's spec is plain data")
    }
}

impl ChildCmd {
    /// The child's arguments after the program name: `__child SPEC`, verifying as `policy`
    /// says (as its parent was told to).
    pub fn argv_for(&self, policy: VerifyPolicy) -> Vec<OsString> {
        let spec = ChildSpec {
            work: self.clone(),
            policy,
        };
        vec!["__child".into(), spec.to_json().into()]
    }

    /// [`ChildCmd::argv_for`] with the file the child writes its results to.
    pub fn argv_reporting_to(&self, policy: VerifyPolicy, results: &Path) -> Vec<OsString> {
        let mut argv = self.argv_for(policy);
        argv.splice(1..1, [OsString::from("--results-to"), results.into()]);
        argv
    }

    /// Run it under the watchdog, verifying as `policy` says.
    pub fn run(
        &self,
        policy: VerifyPolicy,
        timeout: Duration,
        echo: Echo,
    ) -> anyhow::Result<ChildRun> {
        self.start(policy, echo, false)?
            .finish(timeout, &mut |_: &StartedChild| {})
    }

    /// Start it without waiting for it; `paced`: it is given turns on its stdin
    /// ([`StartedChild::give`]).
    pub fn start(
        &self,
        policy: VerifyPolicy,
        echo: Echo,
        paced: bool,
    ) -> anyhow::Result<StartedChild> {
        let exe = std::env::current_exe().context("locating the klab binary")?;
        let opts = RunOptions {
            echo,
            turns: paced,
            // The watchdog's time is the one `finish` is given.
            ..RunOptions::new(Duration::ZERO)
        };
        let results = ResultsFile::new().context("making a file for a child's results")?;
        let argv = self.argv_reporting_to(policy, results.path());
        let running = process::spawn(&exe, &argv, &opts)
            .with_context(|| format!("starting {}", exe.display()))?;
        Ok(StartedChild {
            argv,
            results,
            running: Some(running),
            started: std::time::Instant::now(),
            paced,
        })
    }
}

/// A child started and not yet finished: dropped before [`StartedChild::finish`], it is
/// killed and reaped.
pub struct StartedChild {
    argv: Vec<OsString>,
    results: ResultsFile,
    running: Option<process::Running>,
    /// When its process was started.
    pub started: std::time::Instant,
    paced: bool,
}

impl StartedChild {
    /// Give it `turn` (it was started paced).
    pub fn give(&mut self, turn: Turn) -> anyhow::Result<()> {
        self.running
            .as_mut()
            .context("the child has finished")?
            .give(turn.byte())
            .with_context(|| format!("giving a child its {turn:?} turn"))
    }

    /// What it said in its results file so far.
    pub fn said(&self) -> std::io::Result<String> {
        self.results.read()
    }

    /// Wait for it to end, under a watchdog of `timeout` from now; `poll` is called every
    /// few milliseconds meanwhile, with this child (what it said so far).
    pub fn finish(
        mut self,
        timeout: Duration,
        poll: &mut dyn FnMut(&StartedChild),
    ) -> anyhow::Result<ChildRun> {
        let running = self.running.take().context("the child has finished")?;
        let captured = running.wait(timeout, &mut || poll(&self))?;
        let said = self
            .results
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
            argv: without_results_file(&self.argv, self.results.path()),
            paced: self.paced,
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
    /// It was given its turns on its stdin (its command, run by hand, needs them too).
    pub paced: bool,
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
        // A paced child waits for its turns: by hand, both at once.
        let turns = if self.paced { "printf ot | " } else { "" };
        format!(
            "$ {turns}klab {}\n{}{}[{ended}]\n\n",
            command_line(&self.argv),
            self.stdout,
            self.stderr,
        )
    }
}

/// Words as one line a person can paste into a shell (the spec is JSON, quoted).
pub fn command_line(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|w| klab_core::text::shell_word(w))
        .collect();
    quoted.join(" ")
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

/// Re-run a command in a child under the watchdog, its output shown as it comes (all of it
/// on stderr when the report must parse), and hand back the finished child: its exit code is
/// its verdict's. What is not a plain exit (a hang, a crash, an error) is said in one line.
pub fn relay(
    cmd: ChildCmd,
    policy: VerifyPolicy,
    timeout_s: u64,
    what: &str,
    format: Format,
) -> anyhow::Result<ChildRun> {
    let echo = if format.is_for_machines() {
        Echo::ToStderr
    } else {
        Echo::AsIs
    };
    let run = cmd.run(policy, Duration::from_secs(timeout_s), echo)?;
    match (&run.verdict, &run.result) {
        (ChildVerdict::Hung { .. } | ChildVerdict::Crashed { .. }, _) => {
            eprintln!("{what}: FAIL: {}", run.verdict.describe())
        }
        // The child said its own error.
        (ChildVerdict::Error { .. }, Some(ChildResult::Error { .. })) => {}
        (ChildVerdict::Error { message }, _) => eprintln!("error: {what}: {message}"),
        _ => {}
    }
    // A lab driver's report in a machine format came in its result, not on its stdout.
    if let Some(ChildResult::Reported { report, .. }) = &run.result {
        output::print_rendered(report)?;
    }
    Ok(run)
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

    /// The spec a child's command line carries, as the child reads it.
    fn spec_of(argv: &[OsString]) -> (ChildSpec, Option<std::path::PathBuf>) {
        match parse(argv) {
            Command::Child(a) => (ChildSpec::parse(&a.spec).unwrap(), a.results_to),
            other => panic!("{argv:?} parsed as {other:?}"),
        }
    }

    fn round_trip(c: ChildCmd) {
        let argv = c.argv_for(VerifyPolicy::default());
        assert_eq!(argv[0], "__child");
        let (spec, results) = spec_of(&argv);
        assert_eq!(spec.work, c, "{argv:?}");
        assert_eq!(results, None);
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
            paced: false,
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
            .ends_with("[the process died of signal 11 (SIGSEGV, an invalid memory access)]\n\n"));
    }

    /// A child verifies as its parent was told to, by its spec and nothing else. (Options
    /// once appended after the kernels were taken for kernel names (`-- k --checker cpu`):
    /// the audit's wrong checkers never ran and sanitized checks named a kernel `cpu`.)
    #[test]
    fn the_policy_reaches_the_child_in_its_spec_not_as_kernel_names() {
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
                sanitized: false,
            },
            VerifyPolicy {
                checker: Checker::Device,
                paranoid: false,
                mutant: Some(CheckerMutant::NegativeZero),
                sanitized: true,
            },
        ] {
            let argv = ChildCmd::Check(check.clone()).argv_for(policy);
            let (spec, _) = spec_of(&argv);
            assert_eq!(spec.policy, policy);
            let ChildCmd::Check(a) = spec.work else {
                panic!("not a check")
            };
            assert_eq!(a.kernels, ["padded"]);
        }
        // The check a sanitizer runs is told so: it judges on the CPU and asks the driver
        // nothing it expects to refuse, which the sanitizer would report as the kernel's
        // error (a kernel's parameters past the manifest's once were).
        let argv = crate::cmd::sanitize::sanitized_check(check);
        let (spec, _) = spec_of(&argv);
        assert_eq!(
            spec.policy,
            VerifyPolicy {
                checker: Checker::Cpu,
                paranoid: false,
                mutant: None,
                sanitized: true,
            }
        );
    }

    /// The results file is the child's: its path arrives as `--results-to`, beside the spec,
    /// and a log or a saved command leaves it out.
    #[test]
    fn the_results_file_reaches_the_child_as_its_option() {
        let check = parsed(&["check", "padded", "naive"], |c| match c {
            Command::Check(a) => Some(a),
            _ => None,
        });
        let file = Path::new("/tmp/a dir/klab-results-x");
        let cmd = ChildCmd::Check(check.clone());
        let argv = cmd.argv_reporting_to(VerifyPolicy::default(), file);
        let plain: Vec<String> = cmd
            .argv_for(VerifyPolicy::default())
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(without_results_file(&argv, file), plain);
        let (spec, results) = spec_of(&argv);
        assert_eq!(results.as_deref(), Some(file));
        assert_eq!(spec.work, cmd);
    }

    /// A spec klab did not write is one line, not a panic.
    #[test]
    fn a_spec_that_is_not_klabs_json_is_refused() {
        for bad in ["check padded", "{}", r#"{"work":{"nope":{}},"policy":{}}"#] {
            let e = ChildSpec::parse(bad).unwrap_err();
            assert!(
                format!("{e}").contains("JSON that klab itself wrote"),
                "{e:#}"
            );
        }
    }

    /// What a log shows can be pasted into a shell: the JSON is one quoted word.
    #[test]
    fn a_child_command_line_is_one_line_a_shell_takes_back() {
        let check = parsed(&["check", "it's mine.toml:k"], |c| match c {
            Command::Check(a) => Some(a),
            _ => None,
        });
        let argv = ChildCmd::Check(check).argv_for(VerifyPolicy::default());
        let words: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let line = command_line(&words);
        assert!(line.starts_with("__child '{"), "{line}");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\n' {line}"))
            .output()
            .unwrap();
        let back: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(back, words);
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
        check.quick = true;
        check.output.format = crate::output::Format::Csv;
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
        round_trip(ChildCmd::Bench(bench.clone()));
        // A parent's digest of the klab binary reaches the child in its spec.
        bench.klab_binary = Some(klab_run::receipt::KlabBinary {
            sha256: "a".repeat(64),
            stamp: "2049:1234:12:1700000000.000000001:1700000000.000000002".into(),
        });
        round_trip(ChildCmd::Bench(bench.clone()));
        bench.n = None;
        bench.shape = Some("M=2048,N=2048,K=1024".parse().unwrap());
        round_trip(ChildCmd::Bench(bench.clone()));
        // A round in one process: each block with the file its results go to.
        round_trip(ChildCmd::Round(RoundWork {
            blocks: vec![
                RoundBlock {
                    bench: bench.clone(),
                    results: "/tmp/klab-results-a b".into(),
                },
                RoundBlock {
                    bench,
                    results: "/tmp/klab-results-2".into(),
                },
            ],
        }));

        let mut t = parsed(&["transpose", "all", "33", "1", "--json"], |c| match c {
            Command::Transpose(a) => Some(a),
            _ => None,
        });
        round_trip(ChildCmd::Transpose(t.clone()));
        t.n = "-5".into();
        round_trip(ChildCmd::Transpose(t));

        for argv in [
            vec!["triad"],
            vec!["triad", "--bench-rotate", "/tmp/s s.csv"],
            vec!["triad", "--check", "--format", "csv"],
            vec!["triad", "--format", "json", "--bench-hot", "x.csv"],
        ] {
            let mut tr = parsed(&argv, |c| match c {
                Command::Triad(a) => Some(a),
                _ => None,
            });
            round_trip(ChildCmd::Triad(tr.clone()));
            tr.timeout = 7;
            round_trip(ChildCmd::Triad(tr));
        }

        let r = parsed(&["reduce-lab", "--format", "csv"], |c| match c {
            Command::ReduceLab(a) => Some(a),
            _ => None,
        });
        round_trip(ChildCmd::ReduceLab(r));

        let mut p = parsed(&["profile", "naive"], |c| match c {
            Command::Profile(a) => Some(a),
            _ => None,
        });
        round_trip(ChildCmd::Profile(p.clone()));
        p.kernels = vec![spaced.into()];
        p.metrics = Some("a,b".into());
        p.ncu = Some("/opt/n cu/ncu".into());
        round_trip(ChildCmd::Profile(p.clone()));
        round_trip(ChildCmd::ProfiledLaunches(p));

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
        round_trip(ChildCmd::Rounds(rounds.clone()));
        rounds.isolation = klab_core::samples::Isolation::Block;
        rounds.order = klab_core::samples::RoundOrder::Alternating;
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
