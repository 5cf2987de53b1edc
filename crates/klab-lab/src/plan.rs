//! The plan: `--plan FILE` or the built-in one, checked whole before any step runs.

use std::path::Path;

use klab_core::artifact::{read_regular, Input};
use klab_evidence::schema::LabPlan;
use klab_spec::registry::{self, Scope};
use klab_tools::sanitizer::ToolList;

use crate::LabError;

/// The plan in `path`, else the built-in one; either is checked by [`check_plan`].
pub fn load_plan(path: Option<&Path>) -> Result<LabPlan, LabError> {
    let Some(p) = path else {
        let plan = LabPlan::default();
        check_plan(&plan)?;
        return Ok(plan);
    };
    let bytes = read_regular(p, Input::PLAN)?;
    let what = format!("the plan {}", p.display());
    let plan: LabPlan = serde_json::from_slice(&bytes).map_err(|e| LabError::Plan {
        what: what.clone(),
        why: format!("not a lab plan: {e}"),
    })?;
    check_plan(&plan).map_err(|e| match e {
        LabError::Plan { why, .. } => LabError::Plan { what, why },
        other => other,
    })?;
    Ok(plan)
}

/// Every size in range, every kernel known, baselines among their kernels, tools named.
pub fn check_plan(plan: &LabPlan) -> Result<(), LabError> {
    let bad = |why: String| LabError::Plan {
        what: "the built-in plan".into(),
        why,
    };
    // Transposes take n as an i32.
    let size_ok = |n: u64| (1..=i32::MAX as u64).contains(&n);
    if plan.ladder.is_empty() || !plan.ladder.iter().all(|&n| size_ok(n)) {
        return Err(bad(format!(
            "ladder sizes must be at least 1 and at most {}",
            i32::MAX
        )));
    }
    if !size_ok(plan.bench_n) || !size_ok(plan.ceiling_n) {
        return Err(bad(format!(
            "bench_n and ceiling_n must be at least 1 and at most {}",
            i32::MAX
        )));
    }
    if plan.bench_reps == 0 {
        return Err(bad("bench_reps must be at least 1".into()));
    }
    // Every kernel resolves now, not halfway through the run.
    for (field, names) in [
        ("round_variants", &plan.round_variants),
        ("receipt_kernels", &plan.receipt_kernels),
        ("sanitize_accepted", &plan.sanitize_accepted),
        ("sanitize_broken", &plan.sanitize_broken),
        ("profile_kernels", &plan.profile_kernels),
        ("ceiling_kernels", &plan.ceiling_kernels),
    ] {
        for n in names {
            registry::expand_one(n, Scope::Default).map_err(|e| bad(format!("{field}: {e}")))?;
        }
    }
    // These steps pass their size as --n, which sets an operation's one size variable: a
    // declared operation with several is timed at its bench shape in receipt_kernels.
    for (field, names, size) in [
        ("round_variants", &plan.round_variants, "bench_n"),
        ("profile_kernels", &plan.profile_kernels, "bench_n"),
        ("ceiling_kernels", &plan.ceiling_kernels, "ceiling_n"),
    ] {
        for n in names {
            let (_, decl) = registry::expand_one(n, Scope::Default)
                .and_then(|k| k.load())
                .map_err(|e| bad(format!("{field}: {e}")))?;
            let sizes = &decl.op.spec.sizes;
            if sizes.len() != 1 {
                return Err(bad(format!(
                    "{field}: '{n}' has {} size variables ({}); this step times its kernels at {size} (their one size variable), so name it in receipt_kernels, which times each kernel at its own bench shape",
                    sizes.len(),
                    sizes.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    for (field, kernels, baseline) in [
        (
            "round_variants",
            &plan.round_variants,
            &plan.rounds_baseline,
        ),
        (
            "ceiling_kernels",
            &plan.ceiling_kernels,
            &plan.ceiling_baseline,
        ),
    ] {
        if kernels.len() < 2 {
            return Err(bad(format!(
                "{field}: the rounds alternate at least two kernels"
            )));
        }
        for (i, k) in kernels.iter().enumerate() {
            if kernels[..i].contains(k) {
                return Err(bad(format!("{field}: '{k}' is listed twice")));
            }
        }
        if !kernels.contains(baseline) {
            return Err(bad(format!(
                "the baseline '{baseline}' is not one of {field}"
            )));
        }
    }
    if plan.sanitize_accepted.is_empty() || plan.profile_kernels.is_empty() {
        return Err(bad(
            "sanitize_accepted and profile_kernels name at least one kernel each".into(),
        ));
    }
    let tools: ToolList = plan
        .sanitize_tools
        .parse()
        .map_err(|e| bad(format!("sanitize_tools: {e}")))?;
    if tools.0.is_empty() {
        return Err(bad("sanitize_tools names no tool".into()));
    }
    Ok(())
}
