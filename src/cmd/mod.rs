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
mod measure;
mod model;
mod profile;
mod receipt;
mod reduce_lab;
mod report;
mod rounds;
mod sanitize;
mod sweep;
pub mod trace;
mod transpose;
mod triad;

use std::path::Path;
use std::process::ExitCode;

use crate::cli::{Cli, Command};

/// A tool's binary given by `flag` (`--ncu`, `--sanitizer`) must be one that can start:
/// said in one line before any folder is made or child started, not once per kernel after.
pub fn given_tool(flag: &str, path: Option<&Path>) -> anyhow::Result<()> {
    match path.and_then(|p| klab_tools::process::explicit_tool_problem(p).map(|why| (p, why))) {
        Some((p, why)) => anyhow::bail!("{flag} {}: {why}", p.display()),
        None => Ok(()),
    }
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.into_command() {
        Command::Transpose(a) => transpose::run(a),
        Command::Model(a) => model::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Env(a) => env::run(a),
        Command::Kernels(a) => kernels::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Triad(a) => triad::run(a),
        Command::Rounds(a) => rounds::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Receipt(a) => receipt::run(a),
        Command::Check(a) => check::run(a),
        Command::ReduceLab(a) => reduce_lab::run(a),
        Command::Sanitize(a) => sanitize::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Audit(a) => audit::run(a),
        Command::Profile(a) => profile::run(a),
        Command::Trace(a) => trace::run(a),
        Command::Report(a) => report::run(a),
        Command::Init(a) => init::run(a),
    }
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
