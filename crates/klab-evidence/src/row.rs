//! `klab transpose`'s CSV row (the transpose lab's contract), written and read back, and
//! [`transpose_row`], which measures one variant for it through the timing engine.

use serde::Serialize;

use klab_core::gpustate::GpuState;
use klab_core::samples::{Invalidation, Regime, Timer};
use klab_engine::backend::Backend;
use klab_engine::declared::DeclaredWorkload;
use klab_engine::timing::{self, Outcome, TimingConfig, TimingError, WarmupPolicy};
use klab_engine::workload::Workload;
use klab_spec::rule::CheckOutcome;

/// Warmup launches before the timed batch (the transpose lab's harness).
pub const BATCH_WARMUP_LAUNCHES: u64 = 5;

/// Header printed once per `klab transpose` invocation.
pub const CSV_HEADER: &str = "variant,correct,mismatches,max_abs_error,average_ms,effective_gb_s";

/// Timing of one batch: `reps` launches between one event pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BatchTiming {
    /// Event interval divided by the number of launches.
    pub average_ms: f64,
    /// Useful bytes (2 x N^2 x 4) over `average_ms`.
    pub effective_gb_s: f64,
}

impl BatchTiming {
    /// From the batch's mean time per launch, in microseconds.
    pub fn from_mean_us(mean_us: f64, useful_bytes: u64) -> BatchTiming {
        BatchTiming {
            average_ms: mean_us / 1e3,
            effective_gb_s: klab_core::stats::gb_per_s(useful_bytes, mean_us),
        }
    }
}

/// One variant's verdict and, only when it passed, its timing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransposeRow {
    pub variant: String,
    pub correct: bool,
    pub mismatches: u64,
    pub max_abs_error: f64,
    pub timing: Option<BatchTiming>,
}

fn fmt_error(e: f64) -> String {
    if e.is_infinite() {
        "inf".to_string()
    } else if e.is_nan() {
        "nan".to_string()
    } else {
        format!("{e}")
    }
}

/// Two decimals at 1 GB/s and above; below, six significant digits, so a tiny matrix's
/// rate never prints as a misleading 0.00.
fn fmt_rate(v: f64) -> String {
    if !v.is_finite() || v >= 1.0 || v <= 0.0 {
        return format!("{v:.2}");
    }
    let digits = (5 - v.log10().floor() as i32).max(2) as usize;
    format!("{v:.digits$}")
}

impl TransposeRow {
    /// The CSV line (no newline). Performance fields are empty when timing is absent.
    pub fn to_csv(&self) -> String {
        let (ms, gbs) = match self.timing {
            Some(t) => (format!("{:.6}", t.average_ms), fmt_rate(t.effective_gb_s)),
            None => (String::new(), String::new()),
        };
        format!(
            "{},{},{},{},{},{}",
            self.variant,
            self.correct,
            self.mismatches,
            fmt_error(self.max_abs_error),
            ms,
            gbs
        )
    }

    /// Parse a line written by [`TransposeRow::to_csv`].
    pub fn parse(line: &str) -> Result<TransposeRow, RowError> {
        let fields: Vec<&str> = line.trim_end_matches(['\r', '\n']).split(',').collect();
        if fields.len() != 6 {
            return Err(RowError(format!(
                "expected 6 fields, found {} in '{line}'",
                fields.len()
            )));
        }
        let bad = |what: &str| RowError(format!("bad {what} in '{line}'"));
        let correct = match fields[1] {
            "true" => true,
            "false" => false,
            _ => return Err(bad("correct")),
        };
        let mismatches = fields[2].parse().map_err(|_| bad("mismatches"))?;
        let max_abs_error = fields[3].parse::<f64>().map_err(|_| bad("max_abs_error"))?;
        let timing = match (fields[4], fields[5]) {
            ("", "") => None,
            (ms, gbs) => Some(BatchTiming {
                average_ms: ms.parse().map_err(|_| bad("average_ms"))?,
                effective_gb_s: gbs.parse().map_err(|_| bad("effective_gb_s"))?,
            }),
        };
        Ok(TransposeRow {
            variant: fields[0].to_string(),
            correct,
            mismatches,
            max_abs_error,
            timing,
        })
    }
}

/// How `klab transpose` times a variant: one slot (the same buffers throughout), five warmup
/// launches, then one sample of `reps` launches between one event pair.
pub fn batch_config(reps: u32) -> TimingConfig {
    TimingConfig {
        timer: Timer::Batch { launches: reps },
        regime: Regime::SameBuffer,
        samples: 1,
        warmup: WarmupPolicy::Count {
            launches: BATCH_WARMUP_LAUNCHES,
        },
        invalidation: Invalidation::LabContract,
    }
}

/// What can be refused before any output: the launch plan against the device's limits and
/// one slot against free device memory (the same checks [`timing::measure`] makes).
pub fn precheck<B: Backend>(
    backend: &mut B,
    workload: &DeclaredWorkload,
) -> Result<(), TimingError> {
    for plan in workload.plans() {
        klab_spec::plan::validate(&plan, backend.limits(), None)
            .map_err(|error| klab_engine::workload::LaunchError::Plan { entry: None, error })?;
    }
    let free = backend.free_memory_bytes()?;
    if workload.slot_bytes() > free {
        let gb = |bytes: u64| bytes as f64 / 1e9;
        return Err(TimingError::Config(format!(
            "N = {} needs {:.2} GB of device memory for input and output; {:.2} GB is free",
            workload.n(),
            gb(workload.slot_bytes()),
            gb(free)
        )));
    }
    Ok(())
}

/// One variant through the timing engine with [`batch_config`] on `slot` (made once by
/// `create_slot` and shared by every variant of a command, so they all run on the same
/// buffers): a poisoned validation (a failure or a known-broken variant stops there,
/// untimed), warmup, the timed batch, the output as the batch left it, and a second
/// poisoned validation. Any failed check makes the row incorrect, with that check's
/// mismatches and no timing. `log` gets stderr lines.
pub fn transpose_row<B: Backend>(
    backend: &mut B,
    workload: &DeclaredWorkload,
    slot: &mut Vec<B::Buffer>,
    reps: u32,
    log: &mut dyn FnMut(String),
) -> Result<TransposeRow, TimingError> {
    let name = workload.decl.name.clone();
    let kernels = klab_engine::workload::load_kernels(backend, &workload.decl)?;
    log(format!(
        "{name}: {}; {}",
        klab_engine::workload::describe_plans(workload),
        klab_engine::workload::describe_resources(backend, &kernels)
    ));
    let failed = |check: &CheckOutcome| TransposeRow {
        variant: name.clone(),
        correct: false,
        mismatches: check.failures,
        max_abs_error: check.max_abs,
        timing: None,
    };
    let outcome = timing::measure_in(
        backend,
        workload,
        &kernels,
        &batch_config(reps),
        &name,
        std::slice::from_mut(slot),
        &mut GpuState::default,
    )?;
    let m = match outcome {
        Outcome::Rejected {
            before,
            known_broken,
        } => {
            if let Some(f) = &before.first_failure {
                log(format!(
                    "{name}: validation before warmup: {} mismatches; first at {f}",
                    before.failures
                ));
            }
            if known_broken {
                log(format!(
                    "{name}: known-broken variant: rejected whatever its output ({} mismatches this run) and never timed",
                    before.failures
                ));
            }
            return Ok(failed(&before));
        }
        Outcome::Measured(m) => m,
    };
    let checks = m.after_timing.iter().map(|c| ("output after timing", c));
    let checks = checks.chain([("validation after timing", &m.revalidation)]);
    for (what, check) in checks {
        if !check.passed() {
            log(format!(
                "{name}: {what}: {} mismatches; first at {}",
                check.failures,
                check.first_failure.as_deref().unwrap_or("?")
            ));
            return Ok(failed(check));
        }
    }
    // The lab's contract times launches back to back on one buffer pair, so the floor and
    // the checked time are its guards against a kernel that skips repeated work.
    if let Some(why) = m.gate_failure() {
        log(format!("{name}: {why}"));
        return Ok(TransposeRow {
            timing: None,
            ..failed(&m.before)
        });
    }
    if let Some(flag) = m.checked_flag() {
        log(format!("{name}: FLAG: {flag}"));
    }
    let batch_us = m.samples.first().map(|s| s.elapsed_us).unwrap_or(f64::NAN);
    Ok(TransposeRow {
        variant: name,
        correct: true,
        mismatches: 0,
        max_abs_error: 0.0,
        timing: Some(BatchTiming::from_mean_us(batch_us, workload.useful_bytes())),
    })
}

/// A CSV line that is not a transpose row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a transpose row: {0}")]
pub struct RowError(pub String);

/// Parse a whole `klab transpose` stdout: the header once, then rows.
pub fn parse_csv(text: &str) -> Result<Vec<TransposeRow>, RowError> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    match lines.next() {
        Some(h) if h == CSV_HEADER => {}
        Some(h) => return Err(RowError(format!("unexpected header '{h}'"))),
        None => return Err(RowError("empty output".to_string())),
    }
    lines.map(TransposeRow::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use klab_engine::backend::host::{Call, HostBackend};
    use klab_spec::ops::transpose::POISON_WORD;
    use klab_spec::Variant;

    fn decl(v: Variant) -> klab_spec::manifest::KernelDecl {
        klab_spec::registry::resolve(v.name(), klab_spec::registry::Scope::Audit)
            .unwrap()
            .1
    }
    fn workload(v: Variant, n: u64) -> DeclaredWorkload {
        DeclaredWorkload::builtin(decl(v), n, klab_engine::declared::InputCase::Distinct, 0)
            .unwrap()
    }

    fn transpose(out: &mut [u32], input: &[u32], n: u64, _: u64) {
        for r in 0..n {
            for c in 0..n {
                out[(c * n + r) as usize] = input[(r * n + c) as usize];
            }
        }
    }
    fn copy(out: &mut [u32], input: &[u32], _: u64, _: u64) {
        out.copy_from_slice(input);
    }
    /// Writes every element except the last row: correct only if the buffer was stale.
    fn skips_last_row(out: &mut [u32], input: &[u32], n: u64, _: u64) {
        for r in 0..n {
            for c in 0..n - 1 {
                out[(c * n + r) as usize] = input[(r * n + c) as usize];
            }
        }
    }
    /// Correct on the first launch only (a kernel whose later launches go wrong).
    fn decays(out: &mut [u32], input: &[u32], n: u64, launch: u64) {
        transpose(out, input, n, launch);
        if launch > 0 {
            out[0] = 0x8000_0000; // -0.0 where +0.0 belongs
        }
    }

    fn backend() -> HostBackend {
        HostBackend::new()
            .with_kernel("transpose_copy", copy)
            .with_kernel("transpose_naive", transpose)
            .with_kernel("transpose_tiled", transpose)
            .with_kernel("transpose_padded", skips_last_row)
            .with_kernel("transpose_broken", transpose)
    }

    fn row(b: &mut HostBackend, n: u64, v: Variant, log: &mut Vec<String>) -> TransposeRow {
        let w = workload(v, n);
        let mut slot = w.create_slot(b, 0).unwrap();
        transpose_row(b, &w, &mut slot, 10, &mut |l| log.push(l)).unwrap()
    }

    #[test]
    fn a_correct_variant_is_validated_warmed_timed_once_checked_and_revalidated() {
        let mut b = backend();
        let r = row(&mut b, 33, Variant::Naive, &mut Vec::new());
        assert!(r.correct);
        // The host backend's event pair measures 0.01 ms per launch.
        let t = r.timing.unwrap();
        assert!((t.average_ms - 0.01).abs() < 1e-12, "{t:?}");
        let launch = || Call::Launch("transpose_naive".into());
        let fill = |byte| Call::Fill { buffer: 0, byte };
        // Allocation in parameter order (out poisoned, in uploaded); a 0xff-poisoned
        // validation in an event pair of its own (its checked time); 5 warmups; one timed
        // batch of 10 on the same buffers (the lab's contract: no invalidation); the output
        // as the batch left it; a 0x7f-poisoned, timed validation. Each judgement reads the
        // input back (it must be as klab wrote it), then the output. The last launch is
        // finished on the device before the block says its launches are over.
        let mut want = vec![
            Call::AllocBytes(33 * 33 * 4),
            fill(0xff),
            Call::AllocBytes(33 * 33 * 4),
            Call::Upload(1),
            fill(0xff),
            Call::EventStart,
            launch(),
            Call::EventStop,
            Call::Download(1),
            Call::Download(0),
        ];
        want.extend(std::iter::repeat_n(launch(), 5));
        want.push(Call::Synchronize);
        want.push(Call::EventStart);
        want.extend(std::iter::repeat_n(launch(), 10));
        want.extend([
            Call::EventStop,
            Call::Synchronize,
            Call::Download(1),
            Call::Download(0),
        ]);
        want.extend([
            fill(0x7f),
            Call::EventStart,
            launch(),
            Call::EventStop,
            Call::Download(1),
            Call::Download(0),
            Call::Synchronize,
        ]);
        assert_eq!(b.calls, want);
    }

    #[test]
    fn poison_exposes_a_store_that_only_a_stale_buffer_would_hide() {
        let mut b = backend();
        let w = workload(Variant::Naive, 33);
        let mut slot = w.create_slot(&mut b, 0).unwrap();
        // naive leaves a correct transpose in the shared output buffer...
        assert!(
            transpose_row(&mut b, &w, &mut slot, 1, &mut |_| {})
                .unwrap()
                .correct
        );
        // ...which would hide padded's missing last row without fresh poison.
        let mut lines = Vec::new();
        let padded = w.with_decl(decl(Variant::Padded)).unwrap();
        let r = transpose_row(&mut b, &padded, &mut slot, 1, &mut |l| lines.push(l)).unwrap();
        assert!(!r.correct);
        assert_eq!(r.mismatches, 33);
        assert_eq!(r.max_abs_error, f64::INFINITY);
        assert!(r.timing.is_none());
        assert!(
            lines
                .iter()
                .any(|l| l.contains("validation before warmup: 33 mismatches")
                    && l.contains("[row 32, col 0]")
                    && l.contains(&format!("{POISON_WORD:#010x}"))),
            "{lines:?}"
        );
        // naive: its two validations and one batch; padded: its one validation only.
        assert_eq!(
            b.calls
                .iter()
                .filter(|c| matches!(c, Call::EventStart))
                .count(),
            4
        );
    }

    #[test]
    fn broken_is_rejected_and_never_timed_even_when_its_output_is_right() {
        let mut b = backend();
        let mut lines = Vec::new();
        let r = row(&mut b, 65, Variant::Broken, &mut lines);
        assert!(!r.correct);
        assert_eq!(r.mismatches, 0, "this stand-in happens to be right");
        assert!(r.timing.is_none());
        assert_eq!(r.to_csv(), "broken,false,0,0,,");
        // Only the validation's own event pair: nothing after it.
        assert_eq!(b.calls.last(), Some(&Call::Download(0)));
        let launches = b
            .calls
            .iter()
            .filter(|c| matches!(c, Call::Launch(_)))
            .count();
        assert_eq!(launches, 1, "one validation launch, no warmup");
        assert!(
            lines.iter().any(|l| l.contains("known-broken")),
            "{lines:?}"
        );
    }

    #[test]
    fn copy_is_verified_as_a_copy_and_a_transpose_is_not_a_copy() {
        let mut b = backend().with_kernel("transpose_copy", transpose);
        let r = row(&mut b, 7, Variant::Copy, &mut Vec::new());
        assert!(!r.correct);
        assert_eq!(r.mismatches, 42);
        let mut b = backend();
        assert!(row(&mut b, 7, Variant::Copy, &mut Vec::new()).correct);
    }

    #[test]
    fn a_failure_after_timing_suppresses_the_timing() {
        let mut b = backend().with_kernel("transpose_tiled", decays);
        let mut lines = Vec::new();
        let r = row(&mut b, 32, Variant::Tiled, &mut lines);
        assert!(!r.correct && r.timing.is_none());
        assert_eq!(r.to_csv(), "tiled,false,1,0,,");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("output after timing: 1 mismatches")),
            "{lines:?}"
        );
    }

    #[test]
    fn precheck_refuses_what_measure_would_before_any_output() {
        let mut b = backend().with_free_bytes(30_000_000);
        let w = workload(Variant::Naive, 2000);
        let e = precheck(&mut b, &w).unwrap_err().to_string();
        assert_eq!(
            e,
            "N = 2000 needs 0.03 GB of device memory for input and output; 0.03 GB is free"
        );
        let w = workload(Variant::Naive, 65_535 * 32 + 1);
        assert!(matches!(
            precheck(&mut backend(), &w),
            Err(TimingError::Plan(_))
        ));
        assert!(precheck(&mut backend(), &workload(Variant::Naive, 64)).is_ok());
    }

    #[test]
    fn a_missing_kernel_is_an_error() {
        let mut b = HostBackend::new();
        let w = workload(Variant::Copy, 4);
        let mut slot = w.create_slot(&mut b, 0).unwrap();
        assert!(transpose_row(&mut b, &w, &mut slot, 1, &mut |_| {}).is_err());
    }

    #[test]
    fn variants_share_one_input_and_one_set_of_buffers() {
        let w = workload(Variant::Naive, 5);
        let mut b = backend();
        let mut slot = w.create_slot(&mut b, 0).unwrap();
        transpose_row(&mut b, &w, &mut slot, 1, &mut |_| {}).unwrap();
        let p = w.with_decl(decl(Variant::Tiled)).unwrap();
        assert_eq!(p.decl.name, "tiled");
        assert!(
            transpose_row(&mut b, &p, &mut slot, 1, &mut |_| {})
                .unwrap()
                .correct
        );
        let allocs = b
            .calls
            .iter()
            .filter(|c| matches!(c, Call::AllocBytes(_)))
            .count();
        assert_eq!(allocs, 2, "one input and one output for both variants");
    }

    #[test]
    fn rows_round_trip_and_failures_have_no_timing() {
        let ok = TransposeRow {
            variant: "padded".into(),
            correct: true,
            mismatches: 0,
            max_abs_error: 0.0,
            timing: Some(BatchTiming::from_mean_us(39.6, 134_217_728)),
        };
        assert_eq!(ok.to_csv(), "padded,true,0,0,0.039600,3389.34");
        let bad = TransposeRow {
            variant: "broken".into(),
            correct: false,
            mismatches: 12,
            max_abs_error: f64::INFINITY,
            timing: None,
        };
        assert_eq!(bad.to_csv(), "broken,false,12,inf,,");
        assert_eq!(TransposeRow::parse(&bad.to_csv()).unwrap(), bad);
        let back = TransposeRow::parse(&ok.to_csv()).unwrap();
        assert_eq!(back.variant, "padded");
        assert!((back.timing.unwrap().average_ms - 0.0396).abs() < 1e-9);
        let text = format!("{CSV_HEADER}\n{}\n{}\n", ok.to_csv(), bad.to_csv());
        assert_eq!(parse_csv(&text).unwrap().len(), 2);
        assert!(parse_csv("a,b\n").is_err());
        assert!(TransposeRow::parse("x,maybe,0,0,,").is_err());
    }

    #[test]
    fn small_rates_keep_significant_digits() {
        assert_eq!(fmt_rate(3419.04), "3419.04");
        assert_eq!(fmt_rate(1.0), "1.00");
        assert_eq!(fmt_rate(0.85), "0.850000");
        // N = 1: 8 bytes in 0.0285 ms.
        assert_eq!(fmt_rate(8.0 / 0.0285e-3 / 1e9), "0.000280702");
        assert_eq!(fmt_rate(0.0), "0.00");
    }

    #[test]
    fn effective_bandwidth_is_useful_bytes_over_average_time() {
        // Seed 000: 134,217,728 bytes in 0.250 ms is 536.9 GB/s.
        let t = BatchTiming::from_mean_us(250.0, 134_217_728);
        assert!((t.average_ms - 0.25).abs() < 1e-12);
        assert!((t.effective_gb_s - 536.870912).abs() < 1e-6);
    }
}
