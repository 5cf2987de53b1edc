//! The transpose harness (seed 000), written once against [`Backend`].
//!
//! Per variant: check the launch plan; poison the output (0xff bytes) and run one fresh
//! validation launch; stop there if it failed or the variant is known-broken (never timed);
//! otherwise 5 warmup launches, `reps` launches timed with one event pair, and a second
//! poisoned validation after timing. A failed check suppresses the performance fields.

use serde::Serialize;

use crate::backend::{Arg, Backend, BackendError};
use crate::device::KernelResources;
use crate::ops::transpose::{self as op, InputPattern, Verdict};
use crate::plan::{self, LaunchPlan, PlanError};
use crate::row::{BatchTiming, TransposeRow};
use crate::variant::{Variant, BLOCK_ROWS, TILE};

/// Warmup launches before the timed batch (seed 000).
pub const WARMUP_LAUNCHES: u32 = 5;

/// Why the harness could not produce a verdict (exit 1, never a gate failure).
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("launch plan rejected: {0}")]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(
        "N = {n} needs {need:.2} GB of device memory for input and output; {free:.2} GB is free"
    )]
    DeviceMemory { n: u64, need: f64, free: f64 },
    #[error("N = {n} needs {need:.2} GB of host memory for input and output copies, which could not be allocated")]
    HostMemory { n: u64, need: f64 },
    #[error("N = {0} is too large: N^2 x 4 bytes does not fit in 64 bits")]
    Overflow(u64),
}

/// Everything one variant's run established.
#[derive(Debug, Clone, Serialize)]
pub struct VariantReport {
    pub row: TransposeRow,
    pub plan: LaunchPlan,
    pub resources: KernelResources,
    /// The validation before warmup.
    pub before: Verdict,
    /// The validation after timing (absent when the variant was not timed).
    pub after: Option<Verdict>,
    /// Whether the timed batch ran.
    pub timed: bool,
}

/// A prepared harness: input uploaded once, output buffer reused by each variant.
pub struct TransposeHarness<'b, B: Backend> {
    backend: &'b mut B,
    n: u64,
    input_host: Vec<u32>,
    output_host: Vec<u32>,
    input_dev: B::Buffer,
    output_dev: B::Buffer,
}

fn gb(bytes: u64) -> f64 {
    bytes as f64 / 1e9
}

fn host_vec(words: usize, n: u64, need: u64) -> Result<Vec<u32>, HarnessError> {
    let mut v = Vec::new();
    v.try_reserve_exact(words)
        .map_err(|_| HarnessError::HostMemory { n, need: gb(need) })?;
    v.resize(words, 0);
    Ok(v)
}

impl<'b, B: Backend> TransposeHarness<'b, B> {
    /// The plan every built-in variant uses at size `n`.
    pub fn plan(n: u64) -> LaunchPlan {
        LaunchPlan::tiled_2d(n, TILE, BLOCK_ROWS)
    }

    /// Check memory and the plan, fill the input and upload it.
    pub fn prepare(backend: &'b mut B, n: u64) -> Result<Self, HarnessError> {
        let plan = Self::plan(n);
        plan::validate(&plan, backend.limits(), None, false)?;
        let words = n.checked_mul(n).ok_or(HarnessError::Overflow(n))?;
        let buffer_bytes = words.checked_mul(4).ok_or(HarnessError::Overflow(n))?;
        let need = buffer_bytes
            .checked_mul(2)
            .ok_or(HarnessError::Overflow(n))?;
        let free = backend.free_memory_bytes()?;
        if need > free {
            return Err(HarnessError::DeviceMemory {
                n,
                need: gb(need),
                free: gb(free),
            });
        }
        let words = usize::try_from(words).map_err(|_| HarnessError::Overflow(n))?;
        let mut input_host = host_vec(words, n, need)?;
        let output_host = host_vec(words, n, need)?;
        op::fill_input(n, &mut input_host);
        let mut input_dev = backend.alloc(words)?;
        let output_dev = backend.alloc(words)?;
        backend.upload(&mut input_dev, &input_host)?;
        Ok(TransposeHarness {
            backend,
            n,
            input_host,
            output_host,
            input_dev,
            output_dev,
        })
    }

    pub fn n(&self) -> u64 {
        self.n
    }

    pub fn input_pattern(&self) -> InputPattern {
        InputPattern::for_n(self.n)
    }

    /// One fresh validation: poison, launch once, wait, download, compare bit for bit.
    fn validate_once(
        &mut self,
        variant: Variant,
        kernel: &B::Kernel,
        plan: &LaunchPlan,
    ) -> Result<Verdict, HarnessError> {
        self.backend
            .fill_bytes(&mut self.output_dev, op::POISON_BYTE)?;
        let n = self.n as i32;
        let args = [
            Arg::Buffer(&self.output_dev),
            Arg::Buffer(&self.input_dev),
            Arg::I32(n),
        ];
        self.backend.launch(kernel, plan, &args)?;
        self.backend.synchronize()?;
        self.backend
            .download(&self.output_dev, &mut self.output_host)?;
        Ok(op::verify(
            variant.operation(),
            self.n,
            &self.input_host,
            &self.output_host,
        ))
    }

    /// Run one variant through the whole sequence. `log` receives stderr lines.
    pub fn run(
        &mut self,
        variant: Variant,
        reps: u32,
        log: &mut dyn FnMut(String),
    ) -> Result<VariantReport, HarnessError> {
        let plan = Self::plan(self.n);
        let kernel = self.backend.kernel(variant.entry())?;
        let resources = self.backend.resources(&kernel);
        plan::validate(&plan, self.backend.limits(), Some(&resources), false)?;
        log(format!(
            "{variant}: {}; {}",
            plan.describe(),
            resources.describe()
        ));

        let before = self.validate_once(variant, &kernel, &plan)?;
        let fail_row = |v: &Verdict| TransposeRow {
            variant: variant.name().to_string(),
            correct: false,
            mismatches: v.mismatches,
            max_abs_error: v.max_abs_error,
            timing: None,
        };
        if let Some(m) = before.first_mismatch {
            log(format!(
                "{variant}: validation before warmup: {} mismatches; first at {}",
                before.mismatches,
                m.describe()
            ));
        }
        if !before.correct() || variant.known_broken() {
            if variant.known_broken() {
                log(format!(
                    "{variant}: known-racy variant (no barrier): rejected whatever its output ({} mismatches this run) and never timed",
                    before.mismatches
                ));
            }
            return Ok(VariantReport {
                row: fail_row(&before),
                plan,
                resources,
                before,
                after: None,
                timed: false,
            });
        }

        let n = self.n as i32;
        {
            let args = [
                Arg::Buffer(&self.output_dev),
                Arg::Buffer(&self.input_dev),
                Arg::I32(n),
            ];
            for _ in 0..WARMUP_LAUNCHES {
                self.backend.launch(&kernel, &plan, &args)?;
            }
            self.backend.synchronize()?;
        }
        let total_ms = {
            let args = [
                Arg::Buffer(&self.output_dev),
                Arg::Buffer(&self.input_dev),
                Arg::I32(n),
            ];
            self.backend.time_launches(&kernel, &plan, &args, reps)?
        };
        let after = self.validate_once(variant, &kernel, &plan)?;
        let row = if after.correct() {
            let bytes = op::useful_bytes(self.n).ok_or(HarnessError::Overflow(self.n))?;
            TransposeRow {
                variant: variant.name().to_string(),
                correct: true,
                mismatches: 0,
                max_abs_error: 0.0,
                timing: Some(BatchTiming::from_interval(total_ms, reps, bytes)),
            }
        } else {
            if let Some(m) = after.first_mismatch {
                log(format!(
                    "{variant}: validation after timing: {} mismatches; first at {}",
                    after.mismatches,
                    m.describe()
                ));
            }
            fail_row(&after)
        };
        Ok(VariantReport {
            row,
            plan,
            resources,
            before,
            after: Some(after),
            timed: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::host::{Call, HostBackend};
    use crate::ops::transpose::POISON_WORD;

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

    fn run(b: &mut HostBackend, n: u64, v: Variant) -> VariantReport {
        let mut h = TransposeHarness::prepare(b, n).unwrap();
        h.run(v, 10, &mut |_| {}).unwrap()
    }

    #[test]
    fn a_correct_variant_is_validated_poisoned_twice_and_timed_once() {
        let mut b = backend();
        let r = run(&mut b, 33, Variant::Naive);
        assert!(r.row.correct && r.timed);
        let t = r.row.timing.unwrap();
        assert!((t.average_ms - 0.01).abs() < 1e-12);
        // Sequence after allocation and upload: poison, launch, sync, download; 5 warmups;
        // one timed batch; poison, launch, sync, download.
        let calls: Vec<Call> = b.calls.iter().skip(3).cloned().collect();
        let launch = || Call::Launch("transpose_naive".into());
        let fill = Call::Fill {
            buffer: 1,
            byte: 0xff,
        };
        let mut want = vec![fill.clone(), launch(), Call::Synchronize, Call::Download(1)];
        want.extend(std::iter::repeat_n(launch(), 5));
        want.push(Call::Synchronize);
        want.push(Call::EventStart);
        want.extend(std::iter::repeat_n(launch(), 10));
        want.push(Call::EventStop);
        want.extend([fill, launch(), Call::Synchronize, Call::Download(1)]);
        assert_eq!(calls, want);
    }

    #[test]
    fn poison_exposes_a_store_that_only_a_stale_buffer_would_hide() {
        let mut b = backend();
        let mut h = TransposeHarness::prepare(&mut b, 33).unwrap();
        // naive leaves a correct transpose in the output buffer...
        assert!(h.run(Variant::Naive, 1, &mut |_| {}).unwrap().row.correct);
        // ...which would hide padded's missing last row without fresh poison.
        let mut lines = Vec::new();
        let r = h.run(Variant::Padded, 1, &mut |l| lines.push(l)).unwrap();
        assert!(!r.row.correct);
        assert_eq!(r.row.mismatches, 33);
        assert_eq!(r.row.max_abs_error, f64::INFINITY);
        assert!(r.row.timing.is_none() && !r.timed);
        let m = r.before.first_mismatch.unwrap();
        assert_eq!((m.row, m.col, m.got), (32, 0, POISON_WORD));
        assert!(
            lines.iter().any(|l| l.contains("(row 32, col 0)")),
            "{lines:?}"
        );
    }

    #[test]
    fn broken_is_rejected_and_never_timed_even_when_its_output_is_right() {
        let mut b = backend();
        let r = run(&mut b, 65, Variant::Broken);
        assert!(!r.row.correct);
        assert_eq!(r.row.mismatches, 0, "this stand-in happens to be right");
        assert!(r.row.timing.is_none() && !r.timed);
        assert!(!b.calls.iter().any(|c| matches!(c, Call::EventStart)));
        let launches = b
            .calls
            .iter()
            .filter(|c| matches!(c, Call::Launch(_)))
            .count();
        assert_eq!(launches, 1, "one validation launch, no warmup");
    }

    #[test]
    fn copy_is_verified_as_a_copy_and_a_transpose_is_not_a_copy() {
        let mut b = backend().with_kernel("transpose_copy", transpose);
        let r = run(&mut b, 7, Variant::Copy);
        assert!(!r.row.correct);
        assert_eq!(r.row.mismatches, 42);
        let mut b = backend();
        assert!(run(&mut b, 7, Variant::Copy).row.correct);
    }

    #[test]
    fn a_failure_after_timing_suppresses_the_timing() {
        let mut b = backend().with_kernel("transpose_tiled", decays);
        let r = run(&mut b, 32, Variant::Tiled);
        assert!(r.before.correct());
        assert!(r.timed);
        assert_eq!(r.after.as_ref().unwrap().mismatches, 1);
        assert!(!r.row.correct && r.row.timing.is_none());
        assert_eq!(r.row.to_csv(), "tiled,false,1,0,,");
    }

    #[test]
    fn memory_and_plan_limits_are_errors_not_verdicts() {
        let mut b = backend().with_free_bytes(1000);
        let e = TransposeHarness::prepare(&mut b, 100).err().unwrap();
        assert_eq!(
            e.to_string(),
            "N = 100 needs 0.00 GB of device memory for input and output; 0.00 GB is free"
        );
        assert!(b.calls.is_empty(), "nothing allocated");
        let mut b = backend();
        // 65535 * 32 + 1 needs 65536 blocks in y, one more than the device allows.
        let e = TransposeHarness::prepare(&mut b, 65_535 * 32 + 1)
            .err()
            .unwrap();
        assert!(e.to_string().contains("MAX_GRID_DIM_Y"), "{e}");
        let e = TransposeHarness::prepare(&mut b, u64::MAX).err().unwrap();
        assert!(matches!(e, HarnessError::Plan(_)), "{e}");
    }

    #[test]
    fn a_missing_kernel_is_an_error() {
        let mut b = HostBackend::new();
        let mut h = TransposeHarness::prepare(&mut b, 4).unwrap();
        assert!(h.run(Variant::Copy, 1, &mut |_| {}).is_err());
    }
}
