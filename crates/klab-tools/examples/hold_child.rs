//! A stand-in for a klab command, for the no-orphans tests: install klab's signal handlers,
//! then run the given command through the one runner (echoing its output) under a 60 s
//! watchdog, and exit with its status.
//!
//! `hold_child [--remove-on-signal FILE] PROGRAM [ARGS...]`: FILE is removed if a signal
//! ends this process (as a parent's results file for its child is).
//! `hold_child --as-child [PROGRAM ARGS...]`: behave as a klab started by klab (die with the
//! klab named in the environment); print the pid and wait, or run PROGRAM as above.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use klab_tools::process::{self, RunOptions};

fn main() {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|a| a == "--as-child") {
        args.next();
        process::die_with_parent();
        if args.peek().is_none() {
            println!("{}", std::process::id());
            std::thread::sleep(Duration::from_secs(300));
            return;
        }
    }
    process::install_signal_handlers();
    let _removed = if args.peek().is_some_and(|a| a == "--remove-on-signal") {
        args.next();
        let file = PathBuf::from(args.next().expect("a file"));
        Some(process::RemovedOnSignal::register(&file))
    } else {
        None
    };
    let program = PathBuf::from(args.next().expect("a program to run"));
    let rest: Vec<OsString> = args.collect();
    let opts = RunOptions {
        echo: klab_tools::process::Echo::AsIs,
        ..RunOptions::new(Duration::from_secs(60))
    };
    let c = process::run(&program, &rest, &opts).expect("the child starts");
    std::process::exit(c.exit_code.unwrap_or(3));
}
