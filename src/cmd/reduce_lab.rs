//! `klab reduce-lab`: the reduction lab's outcome on the GPU. The supplied weak suite (golden
//! snapshot, determinism, 1e-2 oracle, linearity at 1,024) and the hardened suite (scaled
//! oracle at 611, 1,024 and 16,483, swap-ends, linearity and determinism at 16,483) run on
//! both launch variants of the block-tree sum. Exit 0 only when the seed's outcome is
//! reproduced: weak passes drop-tail 4 for 4; hardened fails it at 611 and 16,483, passes
//! it at 1,024, and passes the guarded variant. Any other outcome prints a GATE line. The
//! report ([`ReduceLabReport`]) goes out through the sinks like every command's.

use klab_engine::verify::VerifyPolicy;
use std::process::ExitCode;

use klab_spec::ops::reduce::{self, SuiteReport};

use crate::child::{self, ChildCmd};
use crate::cli::ReduceLabArgs;
use crate::cmd::Finished;
use crate::output::Report;
use crate::EXIT_GATE_FAILED;
use klab_run::child::Results;
use klab_run::kernel::Kernel;
use klab_run::session::Session;
use serde::Serialize;

fn suites(session: &mut Session, name: &str) -> anyhow::Result<(SuiteReport, SuiteReport)> {
    let kernel = Kernel::parse(name)?;
    let k = klab_engine::workload::load_kernels(&mut session.backend, &kernel.decl)?;
    let decl = kernel.decl.clone();
    let backend = &mut session.backend;
    let mut sum = |x: &[f32]| klab_engine::check::device_sum(backend, &decl, &k, x);
    let weak = reduce::weak_suite(&mut sum);
    let hard = reduce::hardened_suite(&mut sum);
    Ok((weak, hard))
}

fn find<'a>(r: &'a SuiteReport, name_part: &str, n: u64) -> Option<&'a reduce::TestResult> {
    r.tests
        .iter()
        .find(|t| t.name.contains(name_part) && t.n == n)
}

/// The parent: the suites in a child under the watchdog.
pub fn run(args: ReduceLabArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let (timeout, format) = (args.timeout, args.output.format());
    let run = child::relay(
        ChildCmd::ReduceLab(args),
        policy,
        timeout,
        "reduce-lab",
        format,
    )?;
    Ok(ExitCode::from(run.verdict.exit_code()))
}

/// What `klab reduce-lab` reports: the device, each suite on each launch variant, and the
/// lab's claims that did not hold (none when the lab reproduced).
#[derive(Serialize)]
struct ReduceLabReport {
    device: String,
    suites: Vec<LabelledSuite>,
    reproduced: bool,
    unmet_claims: Vec<String>,
}

#[derive(Serialize)]
struct LabelledSuite {
    variant: &'static str,
    /// weak or hardened
    suite: &'static str,
    #[serde(flatten)]
    report: SuiteReport,
}

impl LabelledSuite {
    fn label(&self) -> String {
        format!("{}, {} suite", self.variant, self.suite)
    }
}

impl Report for ReduceLabReport {
    fn human(&self) -> String {
        let mut text = format!("klab reduce-lab: {}\n", self.device);
        for s in &self.suites {
            text += &format!("== {}\n{}\n", s.label(), s.report.render());
        }
        if self.reproduced {
            text += "the reduction lab reproduced: the weak suite passes the drop-tail sum 4 for 4; the hardened suite fails it at 611 and 16483, passes it at 1024, and passes the guarded sum\n";
        }
        for c in &self.unmet_claims {
            text += &format!("GATE: {c}\n");
        }
        text
    }

    /// One row per test: the variant and suite beside the test's fields.
    fn csv(&self) -> anyhow::Result<String> {
        #[derive(Serialize)]
        struct Row<'a> {
            variant: &'a str,
            suite: &'a str,
            test: &'a str,
            n: u64,
            pass: bool,
            detail: &'a str,
        }
        let rows: Vec<Row> = self
            .suites
            .iter()
            .flat_map(|s| {
                s.report.tests.iter().map(|t| Row {
                    variant: s.variant,
                    suite: s.suite,
                    test: &t.name,
                    n: t.n,
                    pass: t.pass,
                    detail: &t.detail,
                })
            })
            .collect();
        Ok(klab_core::csv::of_value(&serde_json::to_value(rows)?))
    }
}

/// The lab's claims about the drop-tail sum (`weak`, `hard`) and the guarded one
/// (`guarded`) that did not hold.
fn unmet_claims(weak: &SuiteReport, hard: &SuiteReport, guarded: &SuiteReport) -> Vec<String> {
    let scaled = |n: u64| find(hard, "scaled oracle", n).map(|t| t.pass);
    [
        (
            weak.passed() && weak.tests.len() == 4,
            "the weak suite should pass drop-tail 4 for 4",
        ),
        (
            scaled(611) == Some(false),
            "the hardened suite should fail drop-tail at n=611",
        ),
        (
            scaled(16_483) == Some(false),
            "the hardened suite should fail drop-tail at n=16483",
        ),
        (
            scaled(1024) == Some(true),
            "the hardened suite should pass drop-tail at n=1024",
        ),
        (
            guarded.passed(),
            "the hardened suite should pass the guarded variant",
        ),
    ]
    .into_iter()
    .filter(|(held, _)| !held)
    .map(|(_, claim)| claim.to_string())
    .collect()
}

/// The child: both suites on both launch variants, and the lab's claims.
pub fn here(
    args: ReduceLabArgs,
    policy: VerifyPolicy,
    results: &Results,
) -> anyhow::Result<Finished> {
    let kernel = Kernel::parse("reduce_guarded")?;
    let mut session = Session::open(&kernel.manifest, &kernel.decl, args.device, policy)?;
    let device = session.backend.facts().describe();
    let (weak_d, hard_d) = suites(&mut session, "reduce_drop_tail")?;
    let (weak_g, hard_g) = suites(&mut session, "reduce_guarded")?;
    let unmet_claims = unmet_claims(&weak_d, &hard_d, &hard_g);
    let labelled = |variant, suite, report: &SuiteReport| LabelledSuite {
        variant,
        suite,
        report: report.clone(),
    };
    let report = ReduceLabReport {
        device,
        suites: vec![
            labelled("drop-tail", "weak", &weak_d),
            labelled("drop-tail", "hardened", &hard_d),
            labelled("guarded", "weak", &weak_g),
            labelled("guarded", "hardened", &hard_g),
        ],
        reproduced: unmet_claims.is_empty(),
        unmet_claims,
    };
    let code = if report.reproduced {
        0
    } else {
        EXIT_GATE_FAILED
    };
    Finished::reporting(&report, args.output.format(), code, results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use klab_spec::ops::reduce::TestResult;

    fn suite(name: &str, passes: &[(u64, bool)]) -> SuiteReport {
        SuiteReport {
            name: name.into(),
            tests: passes
                .iter()
                .map(|&(n, pass)| TestResult {
                    name: "scaled oracle".into(),
                    n,
                    pass,
                    detail: "d".into(),
                })
                .collect(),
        }
    }

    /// Every claim that does not hold is named, and a report with one is not reproduced.
    #[test]
    fn unmet_claims_are_named_and_each_test_is_a_csv_row() {
        let weak = suite("supplied (weak)", &[(1024, true); 4]);
        let hard = suite("hardened", &[(611, false), (1024, true), (16_483, false)]);
        let guarded = suite("hardened", &[(611, true)]);
        assert!(unmet_claims(&weak, &hard, &guarded).is_empty());
        let leaky = suite("hardened", &[(611, true), (1024, true), (16_483, false)]);
        assert_eq!(
            unmet_claims(&weak, &leaky, &guarded),
            ["the hardened suite should fail drop-tail at n=611"]
        );
        let report = ReduceLabReport {
            device: "dev".into(),
            suites: vec![LabelledSuite {
                variant: "drop-tail",
                suite: "hardened",
                report: leaky,
            }],
            reproduced: false,
            unmet_claims: vec!["c".into()],
        };
        assert_eq!(
            report.human(),
            "klab reduce-lab: dev\n== drop-tail, hardened suite\nPASS scaled oracle n=611: d\n\
             PASS scaled oracle n=1024: d\nFAIL scaled oracle n=16483: d\n\nGATE: c\n"
        );
        let csv = report.csv().unwrap();
        let table = klab_core::csv::Csv::parse(&csv).unwrap();
        table
            .require(&["variant", "suite", "test", "n", "pass", "detail"])
            .unwrap();
        let passes: Vec<_> = table.rows().map(|r| r.get("pass").to_string()).collect();
        assert_eq!(passes, ["true", "true", "false"], "{csv}");
    }
}
