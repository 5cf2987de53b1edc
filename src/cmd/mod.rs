//! One module per command.

mod env;
mod gpu;
mod lab;
mod model;
mod transpose;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Transpose(a) => transpose::run(a),
        Command::Model(a) => model::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Env(a) => env::run(a),
    }
}
