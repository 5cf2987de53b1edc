//! What a klab child process tells the klab that started it: one tagged JSON line on
//! stdout, `klab-result: {...}`, read by the parent instead of the child's prose.
//!
//! A child prints its result once, at the end; the parent takes the last tagged line of its
//! stdout ([`ChildResult::find`]), echoes everything else, and decides by the result, not by
//! exit codes or wording. A child that died before printing one (a signal, the watchdog)
//! has no result: the parent says so from the process status.

use serde::{Deserialize, Serialize};

use crate::check::CheckReport;

/// The tag every result line starts with.
pub const RESULT_TAG: &str = "klab-result: ";

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
    /// `klab check --in-process`: the whole report.
    Check { report: CheckReport },
    /// `klab bench --in-process`: the verdict and, when timed, the receipt (a path as the
    /// child was given its output folder).
    Bench {
        kernel: String,
        verdict: Verdict,
        receipt: Option<String>,
        detail: String,
    },
    /// `klab profile --in-process`: the launch sequence ncu profiled.
    Profile { report: ProfileChild },
    /// A command without a result of its own finished with this exit code.
    Exit { code: u8 },
    /// The child stopped on an error (bad input, no device, a CUDA failure).
    Error { message: String },
    /// Not a result: the case a `klab check` child is about to run (its shape, input and
    /// seed), printed before each, so that a child that dies names what it was doing.
    Case { label: String },
    /// Not a result: a case a `klab check` child judged a failure, printed as it is judged,
    /// so that the failures of a child that dies later are still counted.
    CaseFailed { label: String },
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

    /// The last result line in a child's output, if it printed one that parses.
    pub fn find(output: &str) -> Option<ChildResult> {
        Self::tagged(output)
            .find(|r| !matches!(r, ChildResult::Case { .. } | ChildResult::CaseFailed { .. }))
    }

    /// The last case a check child announced, if any.
    pub fn last_case(output: &str) -> Option<String> {
        Self::tagged(output).find_map(|r| match r {
            ChildResult::Case { label } => Some(label),
            _ => None,
        })
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

    /// A child's output without its result lines (what a person should see).
    pub fn strip(output: &str) -> String {
        output
            .split_inclusive('\n')
            .filter(|l| !l.starts_with(RESULT_TAG))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            ChildResult::last_case(&out).as_deref(),
            Some("n=65: random input seed 12, poison 0x7f")
        );
        assert_eq!(ChildResult::strip(&out), "checking\n");
        let done = format!("{out}{}\n", ChildResult::Exit { code: 0 }.line());
        assert_eq!(
            ChildResult::find(&done),
            Some(ChildResult::Exit { code: 0 })
        );
    }

    #[test]
    fn the_last_result_line_is_found_among_prose() {
        let bench = ChildResult::Bench {
            kernel: "a".into(),
            verdict: Verdict::Pass,
            receipt: Some("/x y/receipt.json".into()),
            detail: "median 1 us".into(),
        };
        let out = format!(
            "round 1: ...\n{}\nmore prose\n{}\n",
            ChildResult::Exit { code: 2 }.line(),
            bench.line()
        );
        assert_eq!(ChildResult::find(&out), Some(bench));
        assert_eq!(ChildResult::strip(&out), "round 1: ...\nmore prose\n");
        assert_eq!(
            ChildResult::find("no result\nklab-result: {bad json\n"),
            None
        );
    }
}
