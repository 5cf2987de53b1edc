//! `klab profile <kernel>...`: Nsight Compute on exactly one measured launch of klab's own
//! launch sequence, the counters set beside the address model's predictions, and seed
//! 000's bound statement filled from them.
//!
//! The parent builds ncu's argument vector (never a shell) around `klab profile KERNEL
//! --in-process`, whose launch sequence is `timing::profile_sequence`: the launch skip is
//! computed from that same sequence and checked against what the child reports.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use klab_core::artifact::{utc_timestamp, write_atomic};
use klab_core::bound::{
    self, KernelProfile, Measured, ProfileRecord, RejectedKernel, PROFILE_SCHEMA,
};
use klab_core::model::predict::{predict, VariantPrediction};
use klab_core::timing::{self, profile_launch_skip};
use klab_core::variant::{BLOCK_ROWS, TILE};
use klab_core::workload::Workload;
use klab_core::{builtin, Variant};
use klab_tools::ncu::{
    self, CacheControl, KernelRecord, MessageLevel, Page, ProfileRequest, RunOutput,
};

use crate::child::ChildCmd;
use crate::cli::ProfileArgs;
use crate::cmd::measure::{output_dir, Kernel, Session};
use crate::{EXIT_ERROR, EXIT_GATE_FAILED};
use klab_core::child::{ChildResult, ProfileChild};

pub fn run(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    if args.in_process {
        let [name] = args.kernels.as_slice() else {
            bail!("--in-process takes exactly one kernel");
        };
        return child(&args, name);
    }
    let cache = args.cache_control;
    let sections = split_list(&args.sections);
    if sections.is_empty() {
        bail!("--sections: at least one section is needed");
    }
    let mut metrics: Vec<String> = ncu::KLAB_METRICS.iter().map(|s| s.to_string()).collect();
    for m in args.metrics.as_deref().map(split_list).unwrap_or_default() {
        if !metrics.contains(&m) {
            metrics.push(m);
        }
    }
    let kernels = args
        .kernels
        .iter()
        .map(|k| Kernel::parse(k).map(|kk| (kk.spec(), kk)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    crate::cmd::given_tool("--ncu", args.ncu.as_deref())?;
    for (i, (_, k)) in kernels.iter().enumerate() {
        if kernels[..i].iter().any(|(_, o)| o.name() == k.name()) {
            bail!("kernel '{}' is listed twice", k.name());
        }
        if klab_core::manifest::LibraryRoutine::from_entry(&k.decl.entry).is_some() {
            bail!(
                "'{}' is a library routine ({}), not a kernel of {}: klab profile selects one kernel launch by its entry name",
                k.name(),
                k.decl.entry,
                k.manifest.program
            );
        }
        k.refuse_n_for_declared(args.n)?;
        // A size the workload refuses is an error before ncu starts.
        k.workload(args.n.unwrap_or_else(|| k.default_n()), None, args.device)?;
    }
    let ncu_bin = ncu::locate_ncu(args.ncu.as_deref()).with_context(|| {
        "Nsight Compute (ncu) not found: pass --ncu PATH or put ncu on PATH".to_string()
    })?;
    let exe = std::env::current_exe().context("locating the klab binary")?;
    // No device check here: the device is ncu's child's, and a stand-in ncu (tests/profile.rs)
    // profiles on a machine without one.
    let dir = output_dir(args.out.as_deref(), "profile")?;
    let version = ncu::run(&ncu::version_argv(&ncu_bin), Duration::from_secs(60))
        .ok()
        .and_then(|o| ncu::parse_version(&o.output).ok())
        .map(|v| v.to_string());

    let mut profiles = Vec::new();
    let mut device: Option<String> = None;
    let mut rejected: Vec<RejectedKernel> = Vec::new();
    let mut gate_failed = false;
    let mut tool_failed = false;
    for (spec, kernel) in &kernels {
        match profile_one(
            &args,
            spec,
            kernel,
            &ncu_bin,
            &exe,
            &dir,
            cache,
            &sections,
            &metrics,
            &mut device,
            &mut rejected,
        ) {
            Ok(Some(p)) => {
                println!(
                    "== {} ({}) ==\n{}",
                    p.kernel,
                    p.size_label(),
                    p.bound.render()
                );
                profiles.push(p);
            }
            Ok(None) => gate_failed = true,
            Err(e) => {
                eprintln!(
                    "klab profile: {}: {}",
                    kernel.name(),
                    one_line(&crate::error_text(&e))
                );
                tool_failed = true;
            }
        }
    }
    let record = ProfileRecord {
        schema: PROFILE_SCHEMA.into(),
        created_utc: utc_timestamp(),
        ncu_version: version,
        device,
        clock_control: "none".into(),
        cache_control: args.cache_control.to_string(),
        sections,
        kernels: profiles,
        rejected,
    };
    write_outputs(&dir, &record)?;
    if !record.kernels.is_empty() {
        println!("{}", bound::render_table(&record.kernels));
    }
    println!("profile: {}", dir.display());
    Ok(if tool_failed {
        ExitCode::from(EXIT_ERROR)
    } else if gate_failed {
        ExitCode::from(EXIT_GATE_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn write_outputs(dir: &Path, record: &ProfileRecord) -> anyhow::Result<()> {
    write_atomic(
        &dir.join("profile.json"),
        (serde_json::to_string_pretty(record)? + "\n").as_bytes(),
    )?;
    let mut text = String::new();
    for k in &record.kernels {
        text.push_str(&format!(
            "== {} ({}) ==\n{}\n",
            k.kernel,
            k.size_label(),
            k.bound.render()
        ));
    }
    text.push_str(&bound::render_table(&record.kernels));
    write_atomic(&dir.join("bound.txt"), text.as_bytes())?;
    write_atomic(
        &dir.join("counters.csv"),
        bound::table_csv(&record.kernels).as_bytes(),
    )?;
    Ok(())
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

fn one_line(s: &str) -> String {
    s.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

/// The address model's prediction, for the built-in transpose variants only: the model
/// describes their source, not an arbitrary user kernel.
fn model_prediction(kernel: &Kernel, n: u64) -> Option<VariantPrediction> {
    if kernel.manifest.source.text() != Some(builtin::TRANSPOSE_SOURCE) {
        return None;
    }
    let v = Variant::ALL
        .into_iter()
        .find(|v| v.entry() == kernel.decl.entry)?;
    predict(v, n, TILE, BLOCK_ROWS).ok()
}

#[allow(clippy::too_many_arguments)]
fn profile_one(
    args: &ProfileArgs,
    spec: &str,
    kernel: &Kernel,
    ncu_bin: &Path,
    exe: &Path,
    dir: &Path,
    cache: CacheControl,
    sections: &[String],
    metrics: &[String],
    device: &mut Option<String>,
    rejected: &mut Vec<RejectedKernel>,
) -> anyhow::Result<Option<KernelProfile>> {
    let name = kernel.name();
    let n = args.n.unwrap_or_else(|| kernel.default_n());
    let skip = profile_launch_skip(args.warmup);
    let stem = safe_stem(&name);
    let report_rel = format!("{stem}.ncu-rep");
    let request = ProfileRequest {
        kernel_name: kernel.decl.entry.clone(),
        launch_skip: skip,
        launch_count: 1,
        sections: sections.to_vec(),
        metrics: metrics.to_vec(),
        export: dir.join(&report_rel),
        cache_control: cache,
        program: exe.to_path_buf(),
        args: ChildCmd::Profile(ProfileArgs {
            kernels: vec![spec.to_string()],
            // An operation with several size variables is profiled at its bench shape.
            n: kernel.size_variable().is_some().then_some(n),
            in_process: true,
            out: None,
            ..args.clone()
        })
        .argv(),
    };
    let argv = request.argv(ncu_bin);
    let shown: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    eprintln!("klab profile: {name}: {}", shown.join(" "));
    let out = ncu::run(&argv, Duration::from_secs(args.timeout))?;
    let log_rel = format!("{stem}.log");
    write_atomic(
        &dir.join(&log_rel),
        format!(
            "$ {}\n{}{}[exit {}{}]\n",
            shown.join(" "),
            out.stdout,
            out.stderr,
            out.exit_status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "signal".into()),
            if out.timed_out {
                ", killed by the watchdog"
            } else {
                ""
            }
        )
        .as_bytes(),
    )?;
    let child = match ChildResult::find(&out.stdout) {
        Some(ChildResult::Profile { report }) => Some(report),
        _ => None,
    };
    if out.timed_out {
        // A kernel that never finishes is that kernel's failure, not ncu's.
        let reason = format!(
            "hung: killed by the watchdog after {} s (ncu and the kernel's process)",
            args.timeout
        );
        println!("profile {name}: FAIL: {reason}");
        rejected.push(RejectedKernel {
            kernel: name,
            reason,
            log: log_rel,
        });
        return Ok(None);
    }
    let Some(child) = child else {
        let mut why = error_lines(&out);
        // The child's own one-line error (klab prints `error: ...`).
        why.extend(
            out.output
                .lines()
                .filter(|l| l.starts_with("error:"))
                .map(String::from),
        );
        bail!(
            "the profiled run did not complete (exit {:?}{}): {}; see {}",
            out.exit_status,
            if out.timed_out { ", watchdog" } else { "" },
            if why.is_empty() {
                "no error line".to_string()
            } else {
                why.join("; ")
            },
            log_rel
        );
    };
    let Some(measured_failures) = child.measured_failures else {
        let reason = format!(
            "not profiled: {} (validation: {} mismatches{})",
            if child.known_broken {
                "known-broken kernel"
            } else {
                "failed its validation"
            },
            child.before_failures,
            child
                .first_failure
                .map(|f| format!(", first {f}"))
                .unwrap_or_default()
        );
        eprintln!("klab profile: {name}: {reason}");
        rejected.push(RejectedKernel {
            kernel: name,
            reason,
            log: log_rel,
        });
        return Ok(None);
    };
    // The sequence stopped early for a rejected kernel; otherwise it must have made
    // exactly the launches ncu skipped.
    if child.launches_before != skip {
        bail!(
            "the child made {} launches before the measured one but ncu skipped {skip}: the profiled launch would be the wrong one",
            child.launches_before
        );
    }
    if measured_failures > 0 {
        // Counters of a launch that computed the wrong result explain nothing.
        let reason = format!(
            "the profiled launch's own output had {measured_failures} mismatches{}: no bound statement",
            child
                .first_failure
                .map(|f| format!(" (first {f})"))
                .unwrap_or_default()
        );
        eprintln!("klab profile: {name}: {reason}");
        rejected.push(RejectedKernel {
            kernel: name,
            reason,
            log: log_rel,
        });
        return Ok(None);
    }
    if !dir.join(&report_rel).is_file() {
        bail!("ncu wrote no report {report_rel}; see {log_rel}");
    }

    // Import: raw page (every metric) and details page (sections as ncu shows them).
    let raw_rel = format!("{stem}.raw.csv");
    let raw = import(ncu_bin, &dir.join(&report_rel), Page::Raw, args.timeout)?;
    write_atomic(&dir.join(&raw_rel), raw.as_bytes())?;
    if let Ok(details) = import(ncu_bin, &dir.join(&report_rel), Page::Details, args.timeout) {
        write_atomic(&dir.join(format!("{stem}.details.csv")), details.as_bytes())?;
    }
    let parsed = ncu::parse_raw(&raw).with_context(|| format!("reading {raw_rel}"))?;
    let record = match parsed.kernels.as_slice() {
        [one] => one,
        [] => bail!("{raw_rel}: no profiled launch"),
        more => bail!(
            "{raw_rel}: {} launches profiled, expected exactly one",
            more.len()
        ),
    };
    if device.is_none() {
        *device = record.device_name().map(String::from);
    }
    let measured = measured_from(record);
    if measured.compute_pct.is_none()
        && measured.dram_pct.is_none()
        && measured.global_load_sectors.is_none()
        && measured.global_store_sectors.is_none()
    {
        bail!("{raw_rel}: none of the counters the bound statement needs is in the report (SpeedOfLight throughput, global sectors); see {log_rel}");
    }
    let absent_metrics: Vec<String> = metrics
        .iter()
        .filter(|m| record.metric(m).is_absent())
        .cloned()
        .collect();
    let prediction = model_prediction(kernel, n);
    let w = kernel.workload(n, None, args.device)?;
    let mut counters = bound::compare(prediction.as_ref(), &measured);
    counters.push(bound::dram_row(w.useful_bytes(), &measured));
    let plan = w.plan();
    let workload = format!(
        "{} {} ({}), block {}x{}x{}, grid {}x{}x{}; the launch after {} validation and {} warmup launches (ncu --launch-skip {skip} --launch-count 1, --clock-control none, --cache-control {})",
        w.dtype(),
        w.operation(),
        name,
        plan.block.x,
        plan.block.y,
        plan.block.z,
        plan.grid.x,
        plan.grid.y,
        plan.grid.z,
        1,
        args.warmup,
        args.cache_control
    );
    let correctness = format!(
        "{} mismatches in the validation launch and {measured_failures} in the profiled launch's own output (poisoned before it), checked against {} ({}); log {log_rel}",
        child.before_failures,
        w.reference(),
        w.rule()
    );
    let statement = bound::statement(workload, correctness, &report_rel, &measured, &counters);
    // The built-in operations' rows have their n; a declared one's its whole shape.
    let shape = (kernel.decl.operation == klab_core::manifest::OpKind::Declared)
        .then(|| klab_core::general::describe_shape(&w.shape));
    Ok(Some(KernelProfile {
        kernel: name,
        entry: kernel.decl.entry.clone(),
        operation: kernel.decl.operation.name().to_string(),
        n: w.n(),
        shape,
        launch_skip: skip,
        argv: shown,
        report: report_rel,
        raw_csv: raw_rel,
        log: log_rel,
        mismatches: Some(child.before_failures + measured_failures),
        measured,
        absent_metrics,
        counters,
        bound: statement,
    }))
}

/// ncu's `==ERROR==` lines.
fn error_lines(out: &RunOutput) -> Vec<String> {
    out.messages()
        .into_iter()
        .filter(|m| m.level == MessageLevel::Error)
        .map(|m| m.to_string())
        .collect()
}

fn import(ncu_bin: &Path, report: &Path, page: Page, timeout: u64) -> anyhow::Result<String> {
    let argv = ncu::import_argv(ncu_bin, report, page);
    let out = ncu::run(&argv, Duration::from_secs(timeout))?;
    if !out.succeeded() {
        bail!(
            "ncu --import {} failed (exit {:?}): {}",
            report.display(),
            out.exit_status,
            error_lines(&out).join("; ")
        );
    }
    Ok(out.stdout)
}

/// Read the counters the bound statement uses from one launch's record.
pub fn measured_from(r: &KernelRecord) -> Measured {
    // Values are read in base units: an imported report prints `us` and `Mbyte` where a
    // live run prints `ns` and `byte`.
    let get = |name: &str, unit: &str| r.number_in(name, unit);
    let limits = [
        ("registers", "launch__occupancy_limit_registers"),
        ("shared memory", "launch__occupancy_limit_shared_mem"),
        ("warps", "launch__occupancy_limit_warps"),
        ("blocks", "launch__occupancy_limit_blocks"),
        ("barriers", "launch__occupancy_limit_barriers"),
    ];
    Measured {
        duration_ns: get("gpu__time_duration.sum", "ns"),
        dram_pct: get("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%").or_else(|| {
            get(
                "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                "%",
            )
        }),
        compute_pct: get("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
        memory_pct: get(
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
            "%",
        ),
        l1tex_pct: get("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),
        l2_pct: get("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
        dram_bytes_read: get("dram__bytes_read.sum", "byte"),
        dram_bytes_write: get("dram__bytes_write.sum", "byte"),
        global_load_sectors: get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sector"),
        global_load_requests: get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", ""),
        global_store_sectors: get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "sector"),
        global_store_requests: get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", ""),
        shared_load_conflicts: get(
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "",
        ),
        shared_store_conflicts: get(
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
            "",
        ),
        registers_per_thread: get("launch__registers_per_thread", "register/thread"),
        spill_instructions: get("sass__inst_executed_register_spilling", "inst"),
        static_shared_bytes: get("launch__shared_mem_per_block_static", "byte/block"),
        theoretical_occupancy_pct: get("sm__maximum_warps_per_active_cycle_pct", "%"),
        achieved_occupancy_pct: get("sm__warps_active.avg.pct_of_peak_sustained_active", "%"),
        occupancy_limits: limits
            .iter()
            .filter_map(|(label, m)| get(m, "block").map(|v| (label.to_string(), v)))
            .collect(),
    }
}

/// A file-name stem from a kernel name (manifest names are free text).
fn safe_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The child: the launch sequence ncu profiles, then one line for the parent.
fn child(args: &ProfileArgs, spec: &str) -> anyhow::Result<ExitCode> {
    use klab_core::backend::Backend;
    let kernel = Kernel::parse_in_child(spec)?;
    let n = args.n.unwrap_or_else(|| kernel.default_n());
    let w = kernel.workload(n, None, args.device)?;
    let mut session = Session::open(&kernel, args.device)?;
    let k = session.backend.kernel(&kernel.decl.entry)?;
    let p = timing::profile_sequence(&mut session.backend, &w, &k, args.warmup)?;
    let report = ProfileChild {
        entry: kernel.decl.entry.clone(),
        n,
        launches_before: p.launches_before,
        before_failures: p.before.failures,
        measured_failures: p.measured.as_ref().map(|m| m.failures),
        known_broken: w.known_broken(),
        first_failure: p
            .before
            .first_failure
            .clone()
            .or_else(|| p.measured.as_ref().and_then(|m| m.first_failure.clone())),
    };
    crate::child::set_result(ChildResult::Profile { report });
    let ok = p.measured.as_ref().is_some_and(|m| m.passed());
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_GATE_FAILED)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_are_file_safe() {
        assert_eq!(safe_stem("naive"), "naive");
        assert_eq!(safe_stem("my kernel/../x"), "my_kernel____x");
    }

    #[test]
    fn lists_split_and_trim() {
        assert_eq!(split_list(" a, b,,c "), ["a", "b", "c"]);
        assert!(split_list("").is_empty());
    }

    #[test]
    fn the_model_predicts_only_built_in_transposes() {
        let k = Kernel::parse("naive").unwrap();
        assert!(model_prediction(&k, 64).is_some());
        let k = Kernel::parse("triad_f32").unwrap();
        assert!(model_prediction(&k, 1024).is_none());
    }
}
