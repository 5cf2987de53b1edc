//! One module per command.

mod audit;
mod bench;
mod check;
mod compare;
mod env;
mod exploit_audit;
mod gpu;
mod init;
mod kernels;
mod lab;
mod model;
mod profile;
mod receipt;
mod reduce_lab;
mod report;
mod rounds;
pub(crate) mod sanitize;
mod sweep;
pub mod trace;
mod transpose;
mod triad;

use std::path::Path;
use std::process::ExitCode;

use klab_run::child::{ChildResult, Results};

use crate::child::{ChildCmd, ChildSpec};
use crate::cli::{Cli, Command};
use crate::output::{self, Format, Report};

/// How a command ended: its exit code and, for a command that runs as a klab child, the
/// result its parent reads (main says it last, to the parent's results file).
pub struct Finished {
    pub code: ExitCode,
    pub result: Option<ChildResult>,
}

impl From<ExitCode> for Finished {
    fn from(code: ExitCode) -> Finished {
        Finished { code, result: None }
    }
}

impl Finished {
    /// A child's result and the exit code that goes with it.
    pub fn with(result: ChildResult, passed: bool) -> Finished {
        Finished {
            code: if passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(crate::EXIT_GATE_FAILED)
            },
            result: Some(result),
        }
    }
}

impl Finished {
    /// A lab driver's report, said by its child: printed here for a person (the parent
    /// relays it, and a lab's log keeps it), or rendered in a machine format into the result
    /// the parent prints on stdout (printed here when no parent reads results).
    pub fn reporting<R: Report>(
        report: &R,
        format: Format,
        code: u8,
        results: &Results,
    ) -> anyhow::Result<Finished> {
        let result = if format.is_for_machines() && results.is_open() {
            Some(ChildResult::Reported {
                code,
                report: format.render(report)?,
            })
        } else {
            output::emit(report, format)?;
            None
        };
        Ok(Finished {
            code: ExitCode::from(code),
            result,
        })
    }
}

/// A tool's binary given by `flag` (`--ncu`, `--sanitizer`) must be one that can start:
/// said in one line before any folder is made or child started, not once per kernel after.
pub fn given_tool(flag: &str, path: Option<&Path>) -> anyhow::Result<()> {
    match path.and_then(|p| klab_tools::process::explicit_tool_problem(p).map(|why| (p, why))) {
        Some((p, why)) => anyhow::bail!("{flag} {}: {why}", p.display()),
        None => Ok(()),
    }
}

/// Run the command; `policy` (how outputs are verified) goes to every command that opens a
/// device or starts a klab that does, and `results` (where a parent reads what a child
/// says) to a child's work.
pub fn run(cli: Cli, results: &Results) -> anyhow::Result<Finished> {
    let policy = cli.verify_policy();
    let code = match cli.into_command() {
        Command::Child(a) => return run_child(&a.spec, results),
        Command::Bench(a) => bench::run(a, policy),
        Command::Check(a) => check::run(a, policy),
        Command::Profile(a) => profile::run(a, policy),
        Command::Transpose(a) => transpose::run(a, policy),
        Command::Model(a) => model::run(a),
        Command::Lab(a) => lab::run(a, policy),
        Command::Env(a) => env::run(a),
        Command::Kernels(a) => kernels::run(a),
        Command::Triad(a) => triad::run(a, policy),
        Command::Rounds(a) => rounds::run(a, policy),
        Command::Compare(a) => compare::run(a),
        Command::Receipt(a) => receipt::run(a),
        Command::ReduceLab(a) => reduce_lab::run(a, policy),
        Command::Sanitize(a) => sanitize::run(a),
        Command::Sweep(a) => sweep::run(a, policy),
        Command::Audit(a) => audit::run(a, policy),
        Command::Trace(a) => trace::run(a),
        Command::Report(a) => report::run(a),
        Command::Init(a) => init::run(a),
    }?;
    Ok(code.into())
}

/// `klab __child SPEC`: the work a parent klab gave, run here, verifying as the spec says.
fn run_child(spec: &str, results: &Results) -> anyhow::Result<Finished> {
    let ChildSpec { work, policy } = ChildSpec::parse(spec)?;
    let code = match work {
        ChildCmd::Check(a) => return check::here(a, policy, results),
        ChildCmd::Bench(a) => return bench::here(a, policy, results),
        ChildCmd::PacedBench(a) => return bench::paced_here(a, policy, results),
        ChildCmd::ProfiledLaunches(a) => return profile::here(a, policy),
        ChildCmd::Profile(a) => profile::run(a, policy),
        ChildCmd::Transpose(a) => return transpose::here(a, policy, results),
        ChildCmd::Triad(a) => return triad::here(a, policy, results),
        ChildCmd::ReduceLab(a) => return reduce_lab::here(a, policy, results),
        ChildCmd::Rounds(a) => rounds::run(a, policy),
        ChildCmd::Round(w) => return bench::round_here(w, policy),
        ChildCmd::Sanitize(a) => sanitize::run(a),
    }?;
    Ok(code.into())
}

/// A progress bar on stderr (`klab COMMAND: PREFIX [====>   ] 3/12 MSG (12s, about 40s
/// left)`), hidden when stderr is not a terminal.
pub fn progress_bar(command: &str, len: u64, prefix: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let target = if std::io::stderr().is_terminal() {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    };
    let bar = indicatif::ProgressBar::with_draw_target(Some(len), target);
    let template =
        format!("klab {command}: {{prefix}} [{{bar:30}}] {{pos}}/{{len}} {{msg}} ({{elapsed}}, about {{eta}} left)");
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(prefix.to_string());
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab's profile step is a whole `klab profile` in a child, which starts ncu over
    /// children of its own; ncu's child runs one kernel's launches. Both carry profile's
    /// arguments, and the lab's step once reached the launch child ("a profile child runs
    /// exactly one kernel") on the H200.
    #[test]
    fn the_labs_profile_step_runs_the_whole_command_in_its_child() {
        use clap::Parser;
        let Command::Profile(args) = Cli::try_parse_from([
            "klab",
            "profile",
            "copy",
            "naive",
            "--ncu",
            "/nonexistent/ncu",
        ])
        .unwrap()
        .into_command() else {
            panic!("not a profile")
        };
        let policy = Default::default();
        let spec = |work: ChildCmd| ChildSpec { work, policy }.to_json();
        let results = Results::none();
        let whole = run_child(&spec(ChildCmd::Profile(args.clone())), &results);
        let e = format!("{:#}", whole.err().expect("no ncu there"));
        assert!(e.starts_with("--ncu /nonexistent/ncu"), "{e}");
        let launches = run_child(&spec(ChildCmd::ProfiledLaunches(args)), &results);
        let e = format!("{:#}", launches.err().expect("two kernels"));
        assert!(e.contains("exactly one kernel"), "{e}");
    }
}
