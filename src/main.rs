//! `klab`: GPU kernel performance work turned into evidence.
//!
//! A thin binary: argument parsing and exit codes here, the work in the library crates
//! and `klab-cuda` (the runtime layer). Exit codes: 0 success, 1 runtime or argument
//! error, 2 a correctness gate failed.

// Before the modules, so that theirs are these (macro_rules! scope is textual). std's
// panic when stdout cannot be written (`klab model > /dev/full`: exit 101 and a backtrace);
// these end in one line and exit 1, as any other error does.
macro_rules! print {
    ($($arg:tt)*) => { $crate::write_stdout(format_args!($($arg)*), false) };
}
macro_rules! println {
    () => { $crate::write_stdout(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::write_stdout(format_args!($($arg)*), true) };
}

mod child;
mod cli;
mod cmd;
mod output;
mod pacing;

/// What [`print!`] and [`println!`] do: write, flush (so a failure is seen here and not
/// lost at exit), and on failure end through [`klab_tools::process::exit_on_stdout_error`].
fn write_stdout(args: std::fmt::Arguments<'_>, newline: bool) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| {
            if newline {
                out.write_all(b"\n")
            } else {
                Ok(())
            }
        })
        .and_then(|()| out.flush());
    if let Err(e) = written {
        klab_tools::process::exit_on_stdout_error(&e);
    }
}

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;

/// Exit status when a correctness gate failed.
pub const EXIT_GATE_FAILED: u8 = 2;
/// Exit status for runtime and argument errors.
pub const EXIT_ERROR: u8 = 1;

fn main() -> ExitCode {
    if child::is_child() {
        // Started by klab (maybe through compute-sanitizer or ncu): die with that parent.
        klab_tools::process::die_with_parent();
    }
    // Ctrl-C, a scheduler's SIGTERM or a closed terminal end every child klab started.
    klab_tools::process::install_signal_handlers();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    // A parent klab names the file it reads this child's results from; nothing of them
    // goes to stdout, where kernels, references and tools print what they like.
    let results_to = match &cli.command {
        cli::Command::Child(c) => c.results_to.clone(),
        _ => None,
    };
    let results = match results_to.as_deref().map(klab_run::child::Results::open) {
        None => klab_run::child::Results::none(),
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            eprintln!("error: --results-to: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let (code, result) = match cmd::run(cli, &results) {
        Ok(cmd::Finished { code, result }) => (code, result),
        Err(e) => (ExitCode::from(EXIT_ERROR), Some(said_error(&e))),
    };
    if results.is_open() {
        let result = result.unwrap_or(klab_run::child::ChildResult::Exit {
            code: exit_code_number(code),
        });
        results.say(&result);
    }
    code
}

/// An error a command stopped on, said on stderr in one line, as the result a parent reads.
pub fn said_error(e: &anyhow::Error) -> klab_run::child::ChildResult {
    let message = one_line(&error_text(e));
    eprintln!("error: {message}");
    klab_run::child::ChildResult::Error {
        message,
        klab_fault: klab_run::child::is_klab_fault(e.as_ref()),
    }
}

/// The number behind an ExitCode klab made (klab only makes 0, 1 and 2).
pub fn exit_code_number(code: ExitCode) -> u8 {
    if code == ExitCode::SUCCESS {
        0
    } else if code == ExitCode::from(EXIT_GATE_FAILED) {
        EXIT_GATE_FAILED
    } else {
        EXIT_ERROR
    }
}

/// clap exits 2 on usage errors; klab's 2 means a failed gate, so usage errors exit 1
/// with one line. Help and version go to stdout and exit 0.
fn usage_error(e: clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            eprintln!("error: no command given; see 'klab --help'");
            ExitCode::from(EXIT_ERROR)
        }
        _ => {
            let text = e.render().to_string();
            let body = text.split("\n\nUsage:").next().unwrap_or(&text);
            let body = body
                .split("\n\nFor more information")
                .next()
                .unwrap_or(body);
            let line = body.split_whitespace().collect::<Vec<_>>().join(" ");
            let line = line.strip_prefix("error: ").unwrap_or(&line);
            eprintln!("error: {line}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// An error and its causes, joined by `: ` as anyhow's `{:#}` joins them, each said once.
///
/// A thiserror variant with a field named `source` (or marked `#[source]`/`#[from]`) prints
/// that cause in its own message and also returns it as its source, so `{:#}` would print
/// the cause twice (`File exists (os error 17): File exists (os error 17)`). Here a cause
/// whose text is already in the line is left out, whichever library the error came from.
pub fn error_text(e: &anyhow::Error) -> String {
    klab_core::text::error_chain(e.as_ref())
}

/// Keep an error on one line unless it carries a compiler log, which is shown whole.
fn one_line(s: &str) -> String {
    if s.contains("NVRTC could not compile") {
        s.to_string()
    } else {
        s.lines().map(str::trim).collect::<Vec<_>>().join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What thiserror derives for `#[error("...: {source}")]` over a field `source`.
    #[derive(Debug)]
    struct WithSource {
        source: std::io::Error,
    }

    impl std::fmt::Display for WithSource {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "creating a run folder under f: {}", self.source)
        }
    }

    impl std::error::Error for WithSource {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    /// A fault in klab's checking stays one under the context a command adds.
    #[test]
    fn a_klab_fault_is_found_under_context() {
        use klab_engine::backend::BackendError;
        let e = anyhow::Error::new(BackendError::klab_fault("disagree".into()))
            .context("checking padded");
        assert!(klab_run::child::is_klab_fault(e.as_ref()));
        let e = anyhow::Error::new(BackendError::from("illegal address".to_string()))
            .context("checking padded");
        assert!(!klab_run::child::is_klab_fault(e.as_ref()));
    }

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let io = || std::io::Error::from_raw_os_error(17);
        let e = anyhow::Error::new(WithSource { source: io() });
        assert_eq!(format!("{e:#}").matches("os error 17").count(), 2);
        assert_eq!(
            error_text(&e),
            "creating a run folder under f: File exists (os error 17)"
        );
        // Context that does not repeat its cause keeps it, as `{:#}` does.
        let e = anyhow::Error::new(io()).context("writing x");
        assert_eq!(error_text(&e), "writing x: File exists (os error 17)");
        assert_eq!(
            error_text(&e.context("the run")),
            "the run: writing x: File exists (os error 17)"
        );
    }
}
