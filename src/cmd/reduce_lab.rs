//! `klab reduce-lab`: seed 002's outcome on the GPU. The supplied weak suite (golden
//! snapshot, determinism, 1e-2 oracle, linearity at 1,024) and the hardened suite (scaled
//! oracle at 611, 1,024 and 16,483, swap-ends, linearity and determinism at 16,483) run on
//! both launch variants of the block-tree sum. Exit 0 only when the seed's outcome is
//! reproduced: weak passes drop-tail 4 for 4; hardened fails it at 611 and 16,483, passes
//! it at 1,024, and passes the guarded variant. Any other outcome prints a GATE line.

use klab_engine::verify::VerifyPolicy;
use std::process::ExitCode;

use klab_spec::ops::reduce::{self, SuiteReport};

use crate::child::{self, ChildCmd};
use crate::cli::ReduceLabArgs;
use crate::output::Format;
use crate::EXIT_GATE_FAILED;
use klab_run::kernel::Kernel;
use klab_run::session::Session;

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
    let timeout = args.timeout;
    let run = child::relay(
        ChildCmd::ReduceLab(args),
        policy,
        timeout,
        "reduce-lab",
        Format::Human,
    )?;
    Ok(ExitCode::from(run.verdict.exit_code()))
}

/// The child: both suites on both launch variants, and the lab's claims.
pub fn here(args: ReduceLabArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let kernel = Kernel::parse("reduce_guarded")?;
    let mut session = Session::open(&kernel.manifest, &kernel.decl, args.device, policy)?;
    println!("klab reduce-lab: {}", session.backend.facts().describe());
    let (weak_d, hard_d) = suites(&mut session, "reduce_drop_tail")?;
    let (weak_g, hard_g) = suites(&mut session, "reduce_guarded")?;
    for (label, r) in [
        ("drop-tail, weak suite", &weak_d),
        ("drop-tail, hardened suite", &hard_d),
        ("guarded, weak suite", &weak_g),
        ("guarded, hardened suite", &hard_g),
    ] {
        println!("== {label}\n{}", r.render());
    }
    let mut gates = Vec::new();
    let mut claim = |ok: bool, what: &str| {
        if !ok {
            gates.push(format!("GATE: {what}"));
        }
    };
    claim(
        weak_d.passed() && weak_d.tests.len() == 4,
        "the weak suite should pass drop-tail 4 for 4",
    );
    let scaled = |n: u64| find(&hard_d, "scaled oracle", n).map(|t| t.pass);
    claim(
        scaled(611) == Some(false),
        "the hardened suite should fail drop-tail at n=611",
    );
    claim(
        scaled(16_483) == Some(false),
        "the hardened suite should fail drop-tail at n=16483",
    );
    claim(
        scaled(1024) == Some(true),
        "the hardened suite should pass drop-tail at n=1024",
    );
    claim(
        hard_g.passed(),
        "the hardened suite should pass the guarded variant",
    );
    if gates.is_empty() {
        println!("the reduction lab reproduced: the weak suite passes the drop-tail sum 4 for 4; the hardened suite fails it at 611 and 16483, passes it at 1024, and passes the guarded sum");
        Ok(ExitCode::SUCCESS)
    } else {
        for g in &gates {
            println!("{g}");
        }
        Ok(ExitCode::from(EXIT_GATE_FAILED))
    }
}
