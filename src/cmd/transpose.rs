//! `klab transpose <variant|all> <N> <reps>`: the transpose lab's harness, a formatter over
//! the timing engine with a batch timer (`klab_evidence::row::transpose_row`). The kernels run
//! in a child ([`here`]) under the watchdog; its CSV is relayed as it comes (the report's
//! text, a row at a time), or with `--format json|csv` handed up whole when it is done.

use klab_engine::verify::VerifyPolicy;
use std::process::ExitCode;

use anyhow::{bail, Context};
use klab_engine::declared::{DeclaredWorkload, InputCase};
use klab_engine::workload::Workload;
use klab_evidence::row::{self, TransposeRow, CSV_HEADER};
use klab_run::child::Results;
use klab_spec::manifest::KernelDecl;
use klab_spec::ops::transpose::InputPattern;
use klab_spec::registry::{self, Scope};
use klab_spec::Variant;
use serde::Serialize;

use crate::child::{self, ChildCmd};
use crate::cli::TransposeArgs;
use crate::cmd::gpu;
use crate::cmd::Finished;
use crate::output::{self, Report};
use crate::EXIT_GATE_FAILED;

/// Variants selected by the first argument.
pub fn parse_selection(s: &str) -> anyhow::Result<Vec<Variant>> {
    if s == "all" {
        return Ok(Variant::ALL.to_vec());
    }
    match s.parse::<Variant>() {
        Ok(v) => Ok(vec![v]),
        Err(_) => {
            bail!("unknown variant '{s}' (expected copy, naive, tiled, padded, broken or all)")
        }
    }
}

fn parse_positive(what: &str, s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix('-') {
        if rest.parse::<f64>().is_ok() {
            bail!("{what} must be a positive integer, got negative '{s}'");
        }
    }
    match t.parse::<u64>() {
        Ok(0) => bail!("{what} must be at least 1, got 0"),
        Ok(v) => Ok(v),
        Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
            bail!("{what} '{s}' is too large")
        }
        Err(_) => bail!("{what} must be a positive integer, got '{s}'"),
    }
}

pub fn parse_n(s: &str) -> anyhow::Result<u64> {
    parse_positive("N", s)
}

pub fn parse_reps(s: &str) -> anyhow::Result<u32> {
    let v = parse_positive("reps", s)?;
    u32::try_from(v).with_context(|| format!("reps {v} is too large (at most {})", u32::MAX))
}

/// The parent: every argument checked before the GPU is touched, then the variants in a
/// child under the watchdog.
pub fn run(args: TransposeArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    parse_selection(&args.variant)?;
    parse_n(&args.n)?;
    parse_reps(&args.reps)?;
    let (timeout, what) = (args.timeout, format!("transpose {}", args.variant));
    let format = args.output.format();
    let run = child::relay(ChildCmd::Transpose(args), policy, timeout, &what, format)?;
    Ok(ExitCode::from(run.verdict.exit_code()))
}

/// The child: validate, time and report the variants.
pub fn here(
    args: TransposeArgs,
    policy: VerifyPolicy,
    results: &Results,
) -> anyhow::Result<Finished> {
    let selection = parse_selection(&args.variant)?;
    let n = parse_n(&args.n)?;
    let reps = parse_reps(&args.reps)?;
    let (mut backend, compiled) = gpu::open_transpose(args.device, policy)?;
    eprintln!("klab transpose: {}", backend.facts().describe());
    eprintln!(
        "klab transpose: module {} for {} ({}; NVRTC {}, toolkit headers {}, {})",
        compiled.program,
        compiled.arch,
        compiled.options.join(" "),
        compiled.nvrtc_version,
        compiled.toolkit_include.as_deref().unwrap_or("not found"),
        if compiled.from_cache {
            "cached"
        } else {
            "compiled now"
        }
    );
    // Refused before the header: a size the device cannot launch or hold prints nothing.
    let decl = |v: Variant| -> anyhow::Result<KernelDecl> {
        Ok(registry::resolve(v.name(), Scope::Default)?.1)
    };
    let first = DeclaredWorkload::builtin(decl(selection[0])?, n, InputCase::Distinct, 0)?;
    row::precheck(&mut backend, &first)?;
    eprintln!(
        "klab transpose: N={n}, reps={reps}; input: {}; output poisoned (0xff bytes, then 0x7f) before each validation",
        InputPattern::for_n(n).describe(n)
    );

    let format = args.output.format();
    // For a person the report goes out a row at a time, as each variant is measured, so a
    // hang or a crash keeps the rows before it (the lab keeps this stdout); a machine
    // format is the whole report at the end.
    let streaming = !format.is_for_machines();
    let mut report = TransposeReport {
        n,
        reps,
        rows: Vec::new(),
    };
    if streaming {
        output::print_rendered(&report.human())?;
    }
    // One input and one output buffer for every variant, as the lab's harness always had:
    // a naive transpose's strided stores are sensitive to where its buffers lie.
    let mut slot = first.create_slot(&mut backend, 0)?;
    for v in selection {
        let workload = first.with_decl(decl(v)?)?;
        let row = row::transpose_row(&mut backend, &workload, &mut slot, reps, &mut |line| {
            eprintln!("klab transpose: {line}")
        })?;
        if streaming {
            output::print_rendered(&TransposeReport::line(&row))?;
        }
        report.rows.push(row);
    }
    let failed = report.rows.iter().any(|r| !r.correct);
    let code = if failed { EXIT_GATE_FAILED } else { 0 };
    if streaming {
        return Ok(ExitCode::from(code).into());
    }
    Finished::reporting(&report, format, code, results)
}

/// What `klab transpose` reports: a row per variant. Its human text is the lab's CSV
/// (the same as `--format csv`).
#[derive(Serialize)]
struct TransposeReport {
    n: u64,
    reps: u32,
    rows: Vec<TransposeRow>,
}

impl TransposeReport {
    /// A row's line of the text.
    fn line(row: &TransposeRow) -> String {
        row.to_csv() + "\n"
    }
}

impl Report for TransposeReport {
    fn human(&self) -> String {
        let rows: String = self.rows.iter().map(TransposeReport::line).collect();
        format!("{CSV_HEADER}\n{rows}")
    }

    fn csv(&self) -> anyhow::Result<String> {
        Ok(self.human())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_messages() {
        assert_eq!(parse_n("33").unwrap(), 33);
        let e = |r: anyhow::Result<u64>| r.unwrap_err().to_string();
        assert_eq!(e(parse_n("0")), "N must be at least 1, got 0");
        assert_eq!(
            e(parse_n("-5")),
            "N must be a positive integer, got negative '-5'"
        );
        assert_eq!(e(parse_n("abc")), "N must be a positive integer, got 'abc'");
        assert_eq!(e(parse_n("1.5")), "N must be a positive integer, got '1.5'");
        assert_eq!(e(parse_n("")), "N must be a positive integer, got ''");
        assert_eq!(
            e(parse_n("99999999999999999999999")),
            "N '99999999999999999999999' is too large"
        );
        assert!(parse_reps("4294967296")
            .unwrap_err()
            .to_string()
            .contains("too large"));
        assert_eq!(parse_reps("100").unwrap(), 100);
        assert_eq!(parse_selection("all").unwrap().len(), 5);
        assert!(parse_selection("fast")
            .unwrap_err()
            .to_string()
            .contains("unknown variant 'fast'"));
    }
}

#[cfg(test)]
mod report_tests {
    use super::*;

    /// The text and the CSV are the lab's CSV; the JSON carries the size with the rows.
    #[test]
    fn the_report_is_the_labs_csv() {
        let row = |variant: &str, correct| TransposeRow {
            variant: variant.into(),
            correct,
            mismatches: u64::from(!correct),
            max_abs_error: 0.0,
            timing: None,
        };
        let report = TransposeReport {
            n: 33,
            reps: 1,
            rows: vec![row("copy", true), row("broken", false)],
        };
        let text = report.human();
        assert_eq!(text, report.csv().unwrap());
        assert_eq!(row::parse_csv(&text).unwrap(), report.rows);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["n"], 33);
        assert_eq!(json["rows"][1]["correct"], false);
    }
}
