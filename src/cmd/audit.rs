//! `klab audit`: a mutation audit of the gates. Every built-in mutant (kernels/mutants.toml,
//! each a labelled deliberate bug) and every correct built-in variant goes through every
//! gate: the oracle (`klab check`, in its own process under a watchdog: a fault or a hang
//! counts as a rejection) and each Compute Sanitizer tool. The kill matrix says which gate
//! rejects which mutant. The audit fails (exit 2) if a mutant survives every gate or a
//! correct variant is rejected by any. A kernel's `known_broken` label is never a kill:
//! only evidence is.

use crate::output::{self, Report};
use klab_engine::verify::VerifyPolicy;
use klab_tools::process::Echo;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use klab_core::artifact::write_atomic;
use klab_engine::verify::{Checker, CheckerMutant};
use klab_run::child::{ChildResult, ChildVerdict};
use klab_tools::sanitizer::{self, Options, Outcome, Tool};
use serde::Serialize;

use crate::child::{ChildCmd, ChildRun};
use crate::cli::{AuditArgs, AuditPart, CheckArgs};
use crate::cmd::check;
use crate::cmd::exploit_audit::{self, Role};
use crate::cmd::sanitize::{find_sanitizer, sanitize_target, sanitized_check};
use crate::{EXIT_ERROR, EXIT_GATE_FAILED};
use klab_run::folder::output_dir;
use klab_run::kernel::Kernel;

/// The built-in variants that are deliberately broken (audited like the mutants).
pub const BUILTIN_BROKEN: [&str; 3] = ["broken", "triad_buggy", "reduce_drop_tail"];

/// The correct variants the audit must accept.
pub const CORRECT: [&str; 6] = [
    "copy",
    "naive",
    "tiled",
    "padded",
    "triad_f32",
    "reduce_guarded",
];

/// The built-in exploit audit: every kernel of the `exploits` namespace (an `exploit`
/// label makes an exploit, the others are controls) and the correct variants.
fn builtin_exploit_names() -> Vec<(String, Role)> {
    let ns = klab_spec::registry::registry().namespace("exploits");
    let mut names: Vec<(String, Role)> = ns
        .map(|ns| {
            ns.manifest
                .kernels
                .iter()
                .map(|k| {
                    let role = if k.exploit.is_some() {
                        Role::Exploit
                    } else {
                        Role::Control
                    };
                    (format!("exploits/{}", k.name), role)
                })
                .collect()
        })
        .unwrap_or_default();
    names.extend(
        CORRECT
            .iter()
            .chain(&AT_THE_LIMIT)
            .map(|c| (c.to_string(), Role::Builtin)),
    );
    names
}

/// The built-ins nearest the device's limits (the copy ceilings, cuBLAS and the fastest
/// transposes): the physical floor and the stale-output probes must accept them too.
pub const AT_THE_LIMIT: [&str; 5] = ["memcpy", "copy_vec16", "sgeam", "reg4_64", "leanu_64_cm"];

/// The built-in audit: every mutant and known-broken variant (labelled bugs) and the
/// correct variants, as (kernel, labelled bug).
fn builtin_names() -> Vec<(String, bool)> {
    let mutants: Vec<String> = klab_spec::registry::registry()
        .namespace("mutants")
        .map(|ns| {
            ns.manifest
                .kernels
                .iter()
                .map(|k| format!("mutants/{}", k.name))
                .collect()
        })
        .unwrap_or_default();
    // The built-in known-broken variants are labelled bugs too.
    let mut names: Vec<(String, bool)> = mutants
        .into_iter()
        .chain(BUILTIN_BROKEN.iter().map(|s| s.to_string()))
        .map(|m| (m, true))
        .collect();
    names.extend(CORRECT.iter().map(|c| (c.to_string(), false)));
    names
}

#[derive(Debug, Clone, Serialize)]
struct Cell {
    gate: String,
    /// `kill`, `pass`, or `error` (the gate could not decide).
    verdict: String,
    detail: String,
}

#[derive(Debug, Serialize)]
struct Row {
    kernel: String,
    mutant: bool,
    bug: Option<String>,
    cells: Vec<Cell>,
}

impl Row {
    fn killed_by(&self) -> Vec<&str> {
        self.cells
            .iter()
            .filter(|c| c.verdict == "kill")
            .map(|c| c.gate.as_str())
            .collect()
    }
}

pub fn run(args: AuditArgs, policy: VerifyPolicy) -> anyhow::Result<ExitCode> {
    let tools: Vec<Tool> = args.tools.0.clone();
    let (names, exploit_names) = audited(&args)?;
    // The names first (the user's own words), then the tools, then the device.
    let sanitizer_bin = if tools.is_empty() || names.is_empty() {
        None
    } else {
        Some(find_sanitizer(args.sanitizer.as_deref())?)
    };
    klab_cuda::device::Device::check(args.device)?;
    let dir = output_dir(args.out.as_deref(), "audit")?;
    let gates = Gates {
        policy,
        device: args.device,
        timeout: Duration::from_secs(args.timeout),
        tools: &tools,
        sanitizer: sanitizer_bin.as_deref(),
        exe: std::env::current_exe().context("locating the klab binary")?,
        dir: &dir,
    };
    let mut rows = Vec::new();
    for (name, mutant) in &names {
        let row = gates.audit(name, *mutant)?;
        eprintln!(
            "klab audit: {}: {}",
            row.kernel,
            if row.killed_by().is_empty() {
                "no gate rejected it".to_string()
            } else {
                format!("rejected by {}", row.killed_by().join(", "))
            }
        );
        rows.push(row);
    }
    let tool_errors = rows
        .iter()
        .flat_map(|r| &r.cells)
        .filter(|c| c.verdict == "error")
        .count();
    // The device checker's mutants, on the built-ins only, when the device checker judges.
    let checker_rows = if args.kernels.is_empty()
        && args.part != AuditPart::Exploits
        && policy.checker == Checker::Device
    {
        gates.checker_mutants(args.only.as_deref())?
    } else {
        Vec::new()
    };
    let (mut text, mut problems) = matrix(&rows, &tools, &checker_rows);
    let mut exploits = Vec::new();
    if !exploit_names.is_empty() {
        let kernels = exploit_names
            .iter()
            .map(|(n, role)| Ok((Kernel::parse_in_child(n)?, *role)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let lanes_dir = dir.join("exploits");
        std::fs::create_dir_all(&lanes_dir)?;
        exploits = exploit_audit::run(
            &kernels,
            policy,
            args.device,
            args.timeout,
            &lanes_dir,
            &mut |l| eprintln!("klab audit: {l}"),
        )?;
        let (matrix, exploit_problems) = exploit_audit::matrix(&exploits);
        text.push('\n');
        text.push_str(&matrix);
        problems.extend(exploit_problems);
        write_atomic(
            &dir.join("exploits.json"),
            (serde_json::to_string_pretty(&exploits)? + "\n").as_bytes(),
        )?;
    }
    write_atomic(&dir.join("matrix.txt"), text.as_bytes())?;
    write_atomic(
        &dir.join("audit.json"),
        (serde_json::to_string_pretty(&rows)? + "\n").as_bytes(),
    )?;
    let report = AuditReport {
        kernels: rows,
        checker_mutants: checker_rows
            .iter()
            .map(|(m, caught, detail)| CheckerRow {
                mutant: m.name().to_string(),
                exposed_by: m.exposed_by().to_string(),
                caught: *caught,
                detail: detail.clone(),
            })
            .collect(),
        exploits,
        problems,
        reports: dir.clone(),
        text,
    };
    output::emit(&report, args.output.format())?;
    let problems = &report.problems;
    Ok(if tool_errors > 0 {
        ExitCode::from(EXIT_ERROR)
    } else if !problems.is_empty() {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// The kernels to audit, each with whether it is a labelled bug, and the exploit audit's,
/// each with its role: the built-ins or the user's, narrowed by `--part` and `--only`.
#[allow(clippy::type_complexity)]
fn audited(args: &AuditArgs) -> anyhow::Result<(Vec<(String, bool)>, Vec<(String, Role)>)> {
    let (mut names, mut exploit_names) = if args.kernels.is_empty() {
        (builtin_names(), builtin_exploit_names())
    } else {
        // The user's kernels: a labelled bug must be rejected, any other accepted; in the
        // exploit audit a labelled exploit must be rejected in every lane, any other
        // accepted.
        let user = Kernel::parse_all(&args.kernels, klab_spec::registry::Scope::Default)?;
        (
            user.iter()
                .map(|k| (k.spec(), k.decl.known_broken.is_some()))
                .collect(),
            user.iter()
                .filter(|k| k.decl.known_broken.is_none())
                .map(|k| {
                    let role = if k.decl.exploit.is_some() {
                        Role::Exploit
                    } else {
                        Role::Control
                    };
                    (k.spec(), role)
                })
                .collect(),
        )
    };
    if args.part == AuditPart::Exploits {
        names.clear();
    }
    if args.part == AuditPart::Mutants {
        exploit_names.clear();
    }
    let Some(only) = &args.only else {
        return Ok((names, exploit_names));
    };
    let keep: Vec<&str> = only.split(',').map(str::trim).collect();
    // `--only mut_wild_store` names a mutant by its short name.
    let short = |n: &str| {
        let n = n.rsplit('/').next().unwrap_or(n);
        n.rsplit(':').next().unwrap_or(n).to_string()
    };
    let checker_mutant = |k: &str| CheckerMutant::ALL.iter().any(|m| m.name() == k);
    let known = |k: &str| {
        names.iter().any(|(n, _)| n == k || short(n) == k)
            || exploit_names.iter().any(|(n, _)| n == k || short(n) == k)
    };
    if let Some(bad) = keep.iter().find(|k| !checker_mutant(k) && !known(k)) {
        anyhow::bail!(
            "--only: '{bad}' is not one of the audited kernels ({})",
            names
                .iter()
                .map(|(n, _)| short(n))
                .chain(exploit_names.iter().map(|(n, _)| short(n)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let kept = |n: &str| keep.contains(&n) || keep.contains(&short(n).as_str());
    names.retain(|(n, _)| kept(n));
    exploit_names.retain(|(n, _)| kept(n));
    Ok((names, exploit_names))
}

/// What every gate of the mutation audit runs with.
struct Gates<'a> {
    policy: VerifyPolicy,
    device: u32,
    timeout: Duration,
    tools: &'a [Tool],
    sanitizer: Option<&'a Path>,
    exe: std::path::PathBuf,
    dir: &'a Path,
}

impl Gates<'_> {
    /// Every gate on one kernel: the oracle in a child, then each sanitizer tool.
    fn audit(&self, spec: &str, mutant: bool) -> anyhow::Result<Row> {
        let kernel = Kernel::parse_in_child(spec)?;
        let name = &kernel.name();
        let o = ChildCmd::Check(check::child_args(kernel.spec(), self.device)).run(
            self.policy,
            self.timeout,
            Echo::Off,
        )?;
        write_atomic(
            &self.dir.join(format!("{name}-oracle.txt")),
            format!("{}\n{}", o.stdout, o.stderr).as_bytes(),
        )?;
        let mut cells = vec![oracle_cell(name, &o)?];
        let (check_args, _, _) = sanitize_target(&kernel, self.device);
        let target = sanitized_check(CheckArgs {
            quick: true,
            ..check_args
        });
        for &tool in self.tools {
            let bin = self.sanitizer.expect("found when tools are given");
            let rec = sanitizer::run(
                tool,
                &Options::default(),
                &self.exe,
                &target,
                bin,
                self.timeout,
            )?;
            write_atomic(
                &self.dir.join(format!("{name}-{}.txt", tool.as_str())),
                rec.log_text().as_bytes(),
            )?;
            let verdict = match &rec.report.outcome {
                Outcome::FoundErrors => "kill",
                Outcome::Clean | Outcome::ApplicationFailed { .. } => "pass",
                Outcome::ToolFailed { .. } => "error",
            };
            cells.push(Cell {
                gate: tool.as_str().into(),
                verdict: verdict.into(),
                detail: rec.report.describe(),
            });
        }
        Ok(Row {
            kernel: name.clone(),
            mutant,
            bug: kernel.decl.known_broken.clone(),
            cells,
        })
    }

    /// Each device checker mutant (those `--only` names, or all), run on the labelled kernel
    /// whose output exposes it: the CPU cross-check must stop the check with a disagreement.
    fn checker_mutants(
        &self,
        only: Option<&str>,
    ) -> anyhow::Result<Vec<(CheckerMutant, bool, String)>> {
        let mut found = Vec::new();
        for m in CheckerMutant::ALL {
            if only.is_some_and(|o| !o.split(',').any(|k| k.trim() == m.name())) {
                continue;
            }
            let kernel = Kernel::parse_in_child(m.exposed_by())?;
            let wrong = VerifyPolicy {
                mutant: Some(m),
                ..self.policy
            };
            let o = ChildCmd::Check(check::child_args(kernel.spec(), self.device)).run(
                wrong,
                self.timeout,
                Echo::Off,
            )?;
            write_atomic(
                &self.dir.join(format!("{}-cross-check.txt", m.name())),
                format!("{}\n{}", o.stdout, o.stderr).as_bytes(),
            )?;
            // The check's result decides: its error is the disagreement, or it is not caught.
            let (caught, detail) = match &o.verdict {
                ChildVerdict::Error { message } | ChildVerdict::Crashed { why: message }
                    if message.contains(klab_engine::verify::DISAGREEMENT) =>
                {
                    (true, message.clone())
                }
                v => (
                    false,
                    format!(
                        "the check of {} ended without a disagreement: {}",
                        m.exposed_by(),
                        v.describe()
                    ),
                ),
            };
            eprintln!(
                "klab audit: {}: {}",
                m.name(),
                if caught {
                    "caught by the CPU cross-check"
                } else {
                    "NOT caught"
                }
            );
            found.push((m, caught, detail));
        }
        Ok(found)
    }
}

/// The oracle gate's cell from its check child: the report's cases decide; a hang, a fault
/// or a crash of the kernel's process is a rejection; an error is not a verdict.
fn oracle_cell(name: &str, o: &ChildRun) -> anyhow::Result<Cell> {
    Ok(match (&o.result, &o.verdict) {
        (
            Some(ChildResult::Check { report: r }),
            ChildVerdict::Passed | ChildVerdict::GateFailed { .. },
        ) => {
            if r.all_cases_pass() {
                Cell {
                    gate: "oracle".into(),
                    verdict: "pass".into(),
                    detail: format!("{} cases pass", r.cases.len()),
                }
            } else {
                let first = r.first_failure().map(|c| c.render()).unwrap_or_default();
                Cell {
                    gate: "oracle".into(),
                    verdict: "kill".into(),
                    detail: format!(
                        "{} of {} cases fail; first: {first}",
                        r.failures(),
                        r.cases.len()
                    ),
                }
            }
        }
        (_, v) if v.is_kernel_failure() => Cell {
            gate: "oracle".into(),
            verdict: "kill".into(),
            detail: format!("the kernel's process failed: {}", v.describe()),
        },
        (_, v) => anyhow::bail!("the oracle gate on {name}: {}", v.describe()),
    })
}

/// The kill matrix of the mutation audit and the checker mutants, and what is wrong in it
/// (a mutant that survived, a correct kernel rejected, a checker mutant not caught).
/// What an audit reports: every kernel's cells, the device checker's mutants, the exploit
/// lanes and the problems; as text, matrix.txt (written from the same rows) and the
/// problems.
#[derive(Serialize)]
struct AuditReport {
    kernels: Vec<Row>,
    checker_mutants: Vec<CheckerRow>,
    exploits: Vec<exploit_audit::Row>,
    problems: Vec<String>,
    reports: std::path::PathBuf,
    #[serde(skip)]
    text: String,
}

#[derive(Serialize)]
struct CheckerRow {
    mutant: String,
    exposed_by: String,
    caught: bool,
    detail: String,
}

impl Report for AuditReport {
    fn human(&self) -> String {
        let mut out = self.text.clone();
        for p in &self.problems {
            out += &format!("AUDIT: {p}\n");
        }
        out + &format!("reports: {}\n", self.reports.display())
    }

    /// One row per kernel and gate (`kill`, `pass` or `error`), per checker mutant (its
    /// gate the CPU cross-check) and per exploit lane (`rejected` or `accepted`).
    fn csv(&self) -> anyhow::Result<String> {
        let head = ["kernel", "kind", "gate", "verdict", "detail"];
        let mut rows = vec![head.map(String::from).to_vec()];
        for r in &self.kernels {
            let kind = if r.mutant { "mutant" } else { "correct" };
            for c in &r.cells {
                rows.push(vec![
                    r.kernel.clone(),
                    kind.into(),
                    c.gate.clone(),
                    c.verdict.clone(),
                    c.detail.clone(),
                ]);
            }
        }
        for m in &self.checker_mutants {
            rows.push(vec![
                m.mutant.clone(),
                "checker-mutant".into(),
                "cpu-cross-check".into(),
                if m.caught { "kill" } else { "pass" }.into(),
                m.detail.clone(),
            ]);
        }
        for r in &self.exploits {
            let kind = serde_json::to_value(r.role)?
                .as_str()
                .unwrap_or_default()
                .to_string();
            for l in &r.lanes {
                rows.push(vec![
                    r.kernel.clone(),
                    kind.clone(),
                    format!("{}/{}", l.regime, l.timer),
                    if l.rejected { "rejected" } else { "accepted" }.into(),
                    l.detail.clone(),
                ]);
            }
        }
        Ok(klab_core::csv::lines(&rows))
    }
}

fn matrix(
    rows: &[Row],
    tools: &[Tool],
    checker_rows: &[(CheckerMutant, bool, String)],
) -> (String, Vec<String>) {
    let gates: Vec<String> = std::iter::once("oracle".to_string())
        .chain(tools.iter().map(|t| t.as_str().to_string()))
        .collect();
    let mut text = format!("{:<22} {:<8}", "kernel", "kind");
    for g in &gates {
        text.push_str(&format!(" {g:>9}"));
    }
    text.push_str("  verdict\n");
    let mut problems = Vec::new();
    for r in rows {
        text.push_str(&format!(
            "{:<22} {:<8}",
            r.kernel,
            if r.mutant { "mutant" } else { "correct" }
        ));
        for c in &r.cells {
            let mark = match c.verdict.as_str() {
                "kill" => "KILL",
                "pass" => "-",
                _ => "ERR",
            };
            text.push_str(&format!(" {mark:>9}"));
        }
        let killed = r.killed_by();
        let verdict = match (r.mutant, killed.is_empty()) {
            (true, false) => "killed".to_string(),
            (true, true) => {
                problems.push(format!("mutant {} survived every gate", r.kernel));
                "SURVIVED".to_string()
            }
            (false, true) => "accepted".to_string(),
            (false, false) => {
                problems.push(format!(
                    "correct variant {} rejected by {}",
                    r.kernel,
                    killed.join(", ")
                ));
                "WRONGLY REJECTED".to_string()
            }
        };
        text.push_str(&format!("  {verdict}\n"));
    }
    text.push('\n');
    for r in rows.iter().filter(|r| r.mutant) {
        text.push_str(&format!(
            "{}: {}\n",
            r.kernel,
            r.bug.as_deref().unwrap_or("")
        ));
        for c in r.cells.iter().filter(|c| c.verdict == "kill") {
            text.push_str(&format!("    {}: {}\n", c.gate, c.detail));
        }
    }
    if !checker_rows.is_empty() {
        text.push_str(
            "\ndevice checker mutants (each run on the labelled kernel that exposes it):\n",
        );
        for (m, caught, detail) in checker_rows {
            text.push_str(&format!(
                "{:<22} {} on {}: {}\n    {detail}\n",
                m.name(),
                if *caught { "CAUGHT" } else { "SURVIVED" },
                m.exposed_by(),
                m.describe()
            ));
            if !caught {
                problems.push(format!(
                    "checker mutant {} survived the CPU cross-check",
                    m.name()
                ));
            }
        }
    }
    (text, problems)
}
