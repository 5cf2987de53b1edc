//! What a klab child process tells the klab that started it, and what that means.
//!
//! A parent names a file for the child's results ([`ResultsFile`], passed to the child as
//! `--results-to`); the child appends one tagged JSON line per record to it
//! ([`Results::say`]): each case it starts or finishes as it goes, then its result once, at
//! the end. Nothing of this goes to stdout, where the kernel, a user's reference and any
//! tool between the two klabs print what they like: a line there that looks like a result is
//! just output. The parent reads the file when the child has ended and decides by the last
//! result in it ([`ChildResult::find`]), not by exit codes or wording. A child that died
//! before saying one (a signal, the watchdog) has no result: the parent says so from the
//! process status, and from the last case the file names.
//!
//! What a finished child means is decided once, by [`ChildVerdict::of`] from its result and
//! how its process ended ([`Ending`]); every parent (check, rounds, sweep, audit, the lab)
//! acts on that verdict, and [`ChildVerdict::exit_code`] is the one mapping to exit codes.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use klab_engine::backend::{BackendError, Fault};
use klab_engine::check::CheckReport;
use klab_engine::timing::TimingError;

/// The tag every result line starts with.
pub const RESULT_TAG: &str = "klab-result: ";

/// The most of a results file a parent reads: a child says a few lines per case.
const RESULTS_CAP: u64 = 64 << 20;

/// A child's side of the results file: the file its parent named, opened to append, or none
/// when no klab started this one (then nothing is said).
#[derive(Debug, Default)]
pub struct Results {
    file: Option<File>,
}

impl Results {
    /// Results for no parent: [`Results::say`] does nothing.
    pub fn none() -> Results {
        Results::default()
    }

    /// The file the parent made, opened to append (it must exist: a child never creates a
    /// results file of its own).
    pub fn open(path: &Path) -> std::io::Result<Results> {
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Results { file: Some(file) })
    }

    /// Whether a parent is reading.
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Append `record` as one line, written through at once so that it is there if this
    /// process dies next. A write that fails is not retried: the parent then finds no
    /// result and says so.
    pub fn say(&self, record: &ChildResult) {
        if let Some(mut f) = self.file.as_ref() {
            let _ = f.write_all(format!("{}\n", record.line()).as_bytes());
        }
    }
}

/// A parent's side: a new empty file in the temporary folder for one child's results,
/// removed when this is dropped, or when a signal ends the parent first.
pub struct ResultsFile {
    // Dropped first: the signal handler forgets the path before the file goes.
    _on_signal: klab_tools::process::RemovedOnSignal,
    file: tempfile::NamedTempFile,
}

impl std::fmt::Debug for ResultsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultsFile")
            .field("path", &self.path())
            .finish()
    }
}

impl ResultsFile {
    /// A fresh file, made only for this child (created exclusively, readable by this user).
    pub fn new() -> std::io::Result<ResultsFile> {
        let file = tempfile::Builder::new()
            .prefix("klab-results-")
            .tempfile()?;
        Ok(ResultsFile {
            _on_signal: klab_tools::process::RemovedOnSignal::register(file.path()),
            file,
        })
    }

    /// Where the child writes (its `--results-to`).
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// What the child said, as text (at most 64 MiB of it).
    pub fn read(&self) -> std::io::Result<String> {
        let mut bytes = Vec::new();
        File::open(self.path())?
            .take(RESULTS_CAP)
            .read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Whether an error a child stops on is a fault in klab's own checking: a
/// [`BackendError`] of [`Fault::Klab`] anywhere in its chain (directly, or inside a
/// `RunError` or `TimingError`, which pass their message through).
pub fn is_klab_fault(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        let backend = err.downcast_ref::<BackendError>().or_else(|| {
            match err.downcast_ref::<crate::error::RunError>() {
                Some(crate::error::RunError::Backend(b)) => Some(b),
                Some(crate::error::RunError::Timing(TimingError::Backend(b))) => Some(b),
                _ => err.downcast_ref::<TimingError>().and_then(|t| match t {
                    TimingError::Backend(b) => Some(b),
                    _ => None,
                }),
            }
        });
        if backend.is_some_and(|b| b.fault == Fault::Klab) {
            return true;
        }
        next = err.source();
    }
    false
}

/// How a gate came out for the kernel a child ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Correct (and, for a timing child, timed).
    Pass,
    /// A correctness gate rejected it (or it is known-broken).
    Fail,
}

/// One child's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum ChildResult {
    /// A check child: the whole report.
    Check { report: CheckReport },
    /// A bench child: the verdict and, when timed, the receipt (a path as the
    /// child was given its output folder).
    Bench {
        kernel: String,
        verdict: Verdict,
        receipt: Option<String>,
        detail: String,
        /// What `klab bench` prints (its parent prints it); absent from the blocks of
        /// `rounds`, `sweep` and the exploit audit, whose parents report otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        report: Option<Box<crate::bench::BenchReport>>,
        /// Seconds the block took in its process, when it shared the process with other
        /// blocks (a round in one process): its parent cannot time it from outside.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elapsed_s: Option<f64>,
        /// Seconds a paced block waited for its turns while the block before it finished:
        /// spent by neither.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        waited_s: Option<f64>,
    },
    /// A profile child: the launch sequence ncu profiled.
    Profile { report: ProfileChild },
    /// A command without a result of its own finished with this exit code.
    Exit { code: u8 },
    /// A lab driver (`transpose`, `triad`, `reduce-lab`) finished with this exit code, its
    /// report rendered in the machine format its parent asked for: the parent prints it on
    /// stdout, which the child's own output never reaches in a machine format.
    Reported { code: u8, report: String },
    /// The child stopped on an error (bad input, no device, a CUDA failure). `klab_fault`:
    /// klab's own checking went wrong, so even during a case it is an error, not the kernel's
    /// failure.
    Error {
        message: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        klab_fault: bool,
    },
    /// Not a result: the case a `klab check` child is about to run (its shape, input and
    /// seed), printed before each, so that a child that dies names what it was doing.
    Case { label: String },
    /// Not a result: a case a `klab check` child judged a failure, printed as it is judged,
    /// so that the failures of a child that dies later are still counted.
    CaseFailed { label: String },
    /// Not a result: the announced case ended (passed, or for a bench child its kernel code
    /// finished); what fails after it is klab's, not the kernel's.
    CaseDone { label: String },
    /// Not a result: a paced block's last launch is over ([`crate::pace::Turn`]); its parent
    /// may let the next block open a context.
    LaunchesOver,
    /// Not a result: a paced block's process closed the device and the driver says its
    /// context is gone: the rest of it (its receipt, its exit) runs on the host, and its
    /// parent may let the next block time.
    DeviceReleased,
}

/// What the profiled child saw of its own launches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileChild {
    pub entry: String,
    pub n: u64,
    pub launches_before: u64,
    pub before_failures: u64,
    pub measured_failures: Option<u64>,
    pub known_broken: bool,
    pub first_failure: Option<String>,
}

impl ChildResult {
    /// The line a child prints.
    pub fn line(&self) -> String {
        format!(
            "{RESULT_TAG}{}",
            serde_json::to_string(self).expect("a result serialises")
        )
    }

    /// The last result in what a child said, if it said one that parses.
    pub fn find(output: &str) -> Option<ChildResult> {
        Self::tagged(output).find(|r| {
            !matches!(
                r,
                ChildResult::Case { .. }
                    | ChildResult::CaseFailed { .. }
                    | ChildResult::CaseDone { .. }
                    | ChildResult::LaunchesOver
                    | ChildResult::DeviceReleased
            )
        })
    }

    /// Whether a paced child said `what` ([`ChildResult::LaunchesOver`] or
    /// [`ChildResult::DeviceReleased`]).
    pub fn said(output: &str, what: &ChildResult) -> bool {
        Self::tagged(output).any(|r| &r == what)
    }

    /// The case a child was running when it ended: the last it announced, unless that case
    /// was said to be over.
    pub fn running(output: &str) -> Option<String> {
        Self::tagged(output)
            .find_map(|r| match r {
                ChildResult::Case { label } => Some(Some(label)),
                ChildResult::CaseFailed { .. } | ChildResult::CaseDone { .. } => Some(None),
                _ => None,
            })
            .flatten()
    }

    /// How many cases a check child announced.
    pub fn cases_started(output: &str) -> usize {
        Self::tagged(output)
            .filter(|r| matches!(r, ChildResult::Case { .. }))
            .count()
    }

    /// How many cases a check child judged failures.
    pub fn cases_failed(output: &str) -> usize {
        Self::tagged(output)
            .filter(|r| matches!(r, ChildResult::CaseFailed { .. }))
            .count()
    }

    /// The tagged lines that parse, last first.
    fn tagged(output: &str) -> impl Iterator<Item = ChildResult> + '_ {
        output
            .lines()
            .rev()
            .filter_map(|l| l.strip_prefix(RESULT_TAG))
            .filter_map(|j| serde_json::from_str(j).ok())
    }
}

/// How a child's process ended, as its parent saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ending {
    /// The exit code, `None` when a signal ended it.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The watchdog killed it after this long.
    pub killed_after: Option<Duration>,
}

/// What a finished child means for the kernel it ran: the one judgement every parent uses.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildVerdict {
    /// Its gates passed (or the command it ran succeeded).
    Passed,
    /// A gate rejected the kernel.
    GateFailed { why: String },
    /// The watchdog killed it: the kernel's failure (`during` the case it was running).
    Hung {
        after: Duration,
        during: Option<String>,
    },
    /// Its process died (a signal), or stopped on an error while the kernel's code ran (a
    /// case was announced): the kernel's failure, named with what was running.
    Crashed { why: String },
    /// It could not do its work (bad input, no device, klab's own fault): no verdict on the
    /// kernel.
    Error { message: String },
}

impl ChildVerdict {
    /// The verdict of a child that said `result` (the last in its results file, if any), ended as
    /// `ending`, and was last running the case `during` (announced by [`ChildResult::Case`]).
    pub fn of(result: Option<&ChildResult>, ending: &Ending, during: Option<&str>) -> ChildVerdict {
        let running = |what: String| match during {
            Some(case) => format!("{what} (while running {case})"),
            None => what,
        };
        if let Some(after) = ending.killed_after {
            return ChildVerdict::Hung {
                after,
                during: during.map(String::from),
            };
        }
        match result {
            Some(ChildResult::Check { report }) if report.passed() => ChildVerdict::Passed,
            Some(ChildResult::Check { report }) => ChildVerdict::GateFailed {
                why: match (&report.known_broken, report.first_failure()) {
                    (Some(why), _) => format!("known-broken: {why}"),
                    (None, Some(case)) => format!(
                        "{} of {} cases fail; first: {}",
                        report.failures(),
                        report.cases.len(),
                        case.render()
                    ),
                    (None, None) => "the check failed".into(),
                },
            },
            Some(ChildResult::Bench {
                verdict: Verdict::Pass,
                ..
            }) => ChildVerdict::Passed,
            Some(ChildResult::Bench { detail, .. }) => ChildVerdict::GateFailed {
                why: detail.clone(),
            },
            Some(ChildResult::Error {
                message,
                klab_fault: false,
            }) if during.is_some() => ChildVerdict::Crashed {
                why: running(message.clone()),
            },
            Some(ChildResult::Error { message, .. }) => ChildVerdict::Error {
                message: message.clone(),
            },
            // A result without a judgement of its own: the command's exit code is its verdict.
            Some(ChildResult::Exit { code } | ChildResult::Reported { code, .. }) => {
                Self::of_exit(i32::from(*code))
            }
            Some(ChildResult::Profile { .. }) => Self::of_exit(ending.exit_code.unwrap_or(1)),
            // Announcements are never results; `find` does not return them.
            Some(
                ChildResult::Case { .. }
                | ChildResult::CaseFailed { .. }
                | ChildResult::CaseDone { .. }
                | ChildResult::LaunchesOver
                | ChildResult::DeviceReleased,
            )
            | None => {
                match (ending.signal, ending.exit_code) {
                    (Some(sig), _) => ChildVerdict::Crashed {
                        why: running(format!(
                            "the process died of {}",
                            klab_core::text::describe_signal(sig)
                        )),
                    },
                    (None, Some(code)) if during.is_some() => ChildVerdict::Crashed {
                        why: running(format!("the process exited {code} without a result")),
                    },
                    // klab's own failure to report (a panic exits 101): not the kernel's.
                    (None, Some(code)) => ChildVerdict::Error {
                        message: format!("the process exited {code} without a result"),
                    },
                    (None, None) => ChildVerdict::Error {
                        message: "the process ended without a result".into(),
                    },
                }
            }
        }
    }

    fn of_exit(code: i32) -> ChildVerdict {
        match code {
            0 => ChildVerdict::Passed,
            2 => ChildVerdict::GateFailed {
                why: "a gate failed (exit 2)".into(),
            },
            code => ChildVerdict::Error {
                message: format!("the process exited {code}"),
            },
        }
    }

    /// The kernel failed (a gate, a hang, a crash), as opposed to passing or an error.
    pub fn is_kernel_failure(&self) -> bool {
        matches!(
            self,
            ChildVerdict::GateFailed { .. }
                | ChildVerdict::Hung { .. }
                | ChildVerdict::Crashed { .. }
        )
    }

    /// The exit code a command whose outcome this is ends with: 0, 2 (the kernel failed) or
    /// 1 (an error).
    pub fn exit_code(&self) -> u8 {
        match self {
            ChildVerdict::Passed => 0,
            ChildVerdict::Error { .. } => 1,
            _ => 2,
        }
    }

    /// What happened, in one line.
    pub fn describe(&self) -> String {
        match self {
            ChildVerdict::Passed => "passed".into(),
            ChildVerdict::GateFailed { why } | ChildVerdict::Crashed { why } => why.clone(),
            ChildVerdict::Hung { after, during } => format!(
                "hung: killed by the watchdog after {}{}",
                klab_core::text::describe_duration(*after),
                during
                    .as_ref()
                    .map(|c| format!(" (while running {c})"))
                    .unwrap_or_default()
            ),
            ChildVerdict::Error { message } => message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Saying the launches are over, or the device closed, is neither a result nor the
    /// end of a case.
    #[test]
    fn launches_over_is_no_result_and_ends_no_case() {
        let case = ChildResult::Case { label: "k".into() }.line();
        let said = format!(
            "{case}\n{}\n{}\n",
            ChildResult::LaunchesOver.line(),
            ChildResult::DeviceReleased.line()
        );
        assert!(ChildResult::said(&said, &ChildResult::LaunchesOver));
        assert!(ChildResult::said(&said, &ChildResult::DeviceReleased));
        assert!(!ChildResult::said(&case, &ChildResult::LaunchesOver));
        assert_eq!(ChildResult::find(&said), None);
        assert_eq!(ChildResult::running(&said).as_deref(), Some("k"));
    }

    #[test]
    fn a_case_line_names_what_a_dead_child_was_running_and_is_never_its_result() {
        let case = |l: &str| ChildResult::Case { label: l.into() }.line();
        let out = format!(
            "{}\nchecking\n{}\n",
            case("n=33: exact input, poison 0xff"),
            case("n=65: random input seed 12, poison 0x7f")
        );
        assert_eq!(ChildResult::find(&out), None);
        assert_eq!(ChildResult::cases_started(&out), 2);
        assert_eq!(ChildResult::cases_failed(&out), 0);
        let failed = format!(
            "{out}{}
",
            ChildResult::CaseFailed {
                label: "n=65: random input seed 12, poison 0x7f".into()
            }
            .line()
        );
        assert_eq!(
            ChildResult::find(&failed),
            None,
            "a failed case is no result"
        );
        assert_eq!(ChildResult::cases_failed(&failed), 1);
        assert_eq!(
            ChildResult::running(&out).as_deref(),
            Some("n=65: random input seed 12, poison 0x7f")
        );
        assert_eq!(ChildResult::running(&failed), None, "a failed case is over");
        let passed = format!(
            "{out}{}\n",
            ChildResult::CaseDone {
                label: "n=65: random input seed 12, poison 0x7f".into()
            }
            .line()
        );
        assert_eq!(ChildResult::running(&passed), None, "a passed case is over");
        assert_eq!(
            ChildResult::find(&passed),
            None,
            "a passed case is no result"
        );
        let done = format!("{out}{}\n", ChildResult::Exit { code: 0 }.line());
        assert_eq!(
            ChildResult::find(&done),
            Some(ChildResult::Exit { code: 0 })
        );
    }

    fn ended(exit_code: Option<i32>, signal: Option<i32>) -> Ending {
        Ending {
            exit_code,
            signal,
            killed_after: None,
        }
    }

    fn bench(verdict: Verdict, detail: &str) -> ChildResult {
        ChildResult::Bench {
            kernel: "k".into(),
            verdict,
            receipt: None,
            detail: detail.into(),
            report: None,
            elapsed_s: None,
            waited_s: None,
        }
    }

    /// One rule for every parent: results decide, then how the process ended, then whether
    /// the kernel's code was running.
    #[test]
    fn a_finished_child_is_judged_once_by_one_rule() {
        let of = ChildVerdict::of;
        let exit = |code| ChildResult::Exit { code };
        assert_eq!(
            of(Some(&exit(0)), &ended(Some(0), None), None),
            ChildVerdict::Passed
        );
        assert!(matches!(
            of(Some(&exit(2)), &ended(Some(2), None), None),
            ChildVerdict::GateFailed { .. }
        ));
        assert!(matches!(
            of(Some(&exit(1)), &ended(Some(1), None), None),
            ChildVerdict::Error { .. }
        ));
        // A lab driver's rendered report changes nothing: its code is its verdict.
        let reported = |code| ChildResult::Reported {
            code,
            report: "{}".into(),
        };
        assert!(matches!(
            of(Some(&reported(2)), &ended(Some(2), None), None),
            ChildVerdict::GateFailed { .. }
        ));
        assert_eq!(
            of(Some(&reported(0)), &ended(Some(0), None), None),
            ChildVerdict::Passed
        );
        assert_eq!(
            of(
                Some(&bench(Verdict::Pass, "median 1 us")),
                &ended(Some(0), None),
                None
            ),
            ChildVerdict::Passed
        );
        assert_eq!(
            of(
                Some(&bench(Verdict::Fail, "stale output")),
                &ended(Some(2), None),
                None
            ),
            ChildVerdict::GateFailed {
                why: "stale output".into()
            }
        );
        // The watchdog outranks whatever was printed.
        let hung = Ending {
            killed_after: Some(Duration::from_secs(3)),
            ..ended(None, Some(9))
        };
        let v = of(Some(&exit(0)), &hung, Some("n=33: exact"));
        assert!(v.is_kernel_failure() && v.exit_code() == 2);
        assert_eq!(
            v.describe(),
            "hung: killed by the watchdog after 3.0 s (while running n=33: exact)"
        );
        // A signal is the kernel's failure, with or without a case running.
        let v = of(None, &ended(None, Some(11)), None);
        assert_eq!(
            v,
            ChildVerdict::Crashed {
                why: "the process died of signal 11 (SIGSEGV, an invalid memory access)".into()
            }
        );
        assert_eq!(v.exit_code(), 2);
        // An error while the kernel's code ran is the kernel's; before it, klab's.
        let fault = ChildResult::Error {
            message: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            klab_fault: false,
        };
        let v = of(
            Some(&fault),
            &ended(Some(1), None),
            Some("n=65: random seed 1"),
        );
        assert_eq!(
            v.describe(),
            "CUDA_ERROR_ILLEGAL_ADDRESS (while running n=65: random seed 1)"
        );
        assert!(v.is_kernel_failure());
        let v = of(Some(&fault), &ended(Some(1), None), None);
        assert!(!v.is_kernel_failure() && v.exit_code() == 1, "{v:?}");
        // A fault in klab's own checking during a case is klab's error, not the kernel's
        // failure (a device checker that disagreed with the CPU oracle once failed the
        // kernel it was judging).
        let ours = ChildResult::Error {
            message: "klab error: the device checker and the CPU oracle disagree".into(),
            klab_fault: true,
        };
        let v = of(Some(&ours), &ended(Some(1), None), Some("n=33: exact"));
        assert!(!v.is_kernel_failure() && v.exit_code() == 1, "{v:?}");
        // It reaches the parent as written, and an old line without the field reads as
        // the kernel's, as it was.
        assert_eq!(ChildResult::find(&ours.line()), Some(ours));
        assert_eq!(
            ChildResult::find(r#"klab-result: {"result":"error","message":"m"}"#),
            Some(ChildResult::Error {
                message: "m".into(),
                klab_fault: false
            })
        );
        // No result and a plain exit: a crash inside a case, klab's failure to report outside.
        assert!(of(None, &ended(Some(3), None), Some("n=1: exact")).is_kernel_failure());
        let v = of(None, &ended(Some(101), None), None);
        assert_eq!(v.describe(), "the process exited 101 without a result");
        assert_eq!(v.exit_code(), 1);
        assert_eq!(ChildVerdict::Passed.exit_code(), 0);
    }

    /// The fault travels inside the error types klab wraps a backend's error in.
    #[test]
    fn a_klab_fault_is_found_through_the_errors_that_wrap_it() {
        use crate::error::RunError;
        let ours = || BackendError::klab_fault("disagree".into());
        let run = || BackendError::from("illegal address".to_string());
        assert!(is_klab_fault(&ours()));
        assert!(!is_klab_fault(&run()));
        assert!(is_klab_fault(&RunError::Backend(ours())));
        assert!(is_klab_fault(&RunError::Timing(TimingError::Backend(
            ours()
        ))));
        assert!(!is_klab_fault(&RunError::Backend(run())));
    }

    #[test]
    fn the_last_result_line_is_found_among_prose() {
        let bench = ChildResult::Bench {
            kernel: "a".into(),
            verdict: Verdict::Pass,
            receipt: Some("/x y/receipt.json".into()),
            detail: "median 1 us".into(),
            report: None,
            elapsed_s: None,
            waited_s: None,
        };
        let out = format!(
            "round 1: ...\n{}\nmore prose\n{}\n",
            ChildResult::Exit { code: 2 }.line(),
            bench.line()
        );
        assert_eq!(ChildResult::find(&out), Some(bench));
        assert_eq!(
            ChildResult::find("no result\nklab-result: {bad json\n"),
            None
        );
    }

    #[test]
    fn what_a_child_says_reaches_its_parent_through_the_named_file_alone() {
        let file = ResultsFile::new().unwrap();
        let child = Results::open(file.path()).unwrap();
        assert!(child.is_open());
        let case = ChildResult::Case {
            label: "n=33".into(),
        };
        child.say(&case);
        // Said and not yet over: a parent reading now (the child died) names the case.
        let said = file.read().unwrap();
        assert_eq!(ChildResult::running(&said).as_deref(), Some("n=33"));
        assert_eq!(ChildResult::find(&said), None);
        child.say(&ChildResult::Exit { code: 2 });
        let said = file.read().unwrap();
        assert_eq!(said.lines().count(), 2);
        assert_eq!(
            ChildResult::find(&said),
            Some(ChildResult::Exit { code: 2 })
        );
        // No parent: nothing is said, anywhere.
        Results::none().say(&case);
        assert!(!Results::none().is_open());
        // A child never makes a results file of its own.
        let gone = file.path().with_extension("missing");
        assert!(Results::open(&gone).is_err());
        let path = file.path().to_path_buf();
        drop(file);
        assert!(!path.exists(), "the parent's file is removed with it");
    }
}
