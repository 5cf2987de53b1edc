//! [`Workload`] for a declared operation: what the gates call to make a slot, poison and
//! invalidate it, give it new inputs, and check it.

use crate::backend::Arg;
use crate::workload::{NewInputs, PerturbSource};
use klab_spec::rule::CheckOutcome;

use super::fill::{fill, generator};
use super::*;

/// A reference slower than this (seconds, on the first inputs) makes no expected values
/// for fresh inputs inside a timed block ([`Workload::with_fresh_inputs`]).
pub const FRESH_REFERENCE_BUDGET_S: f64 = 2.0;

/// The seed of the other values a timed launch's inputs are perturbed with
/// ([`crate::workload::Workload::perturbation_sources`]); the positions change every launch.
const OTHER_VALUES_SEED: u64 = 0x4f54_4845_5253;

impl Workload for DeclaredWorkload {
    fn decl(&self) -> &KernelDecl {
        &self.decl
    }
    fn operation(&self) -> String {
        let outs: Vec<String> = self
            .buffers
            .iter()
            .filter(|b| b.role.compared())
            .map(|b| format!("{} ({})", b.name, b.dtype))
            .collect();
        format!(
            "{}: {} at {}",
            self.decl.operation.name(),
            outs.join(", "),
            describe_shape(&self.shape)
        )
    }
    fn dtype(&self) -> &'static str {
        self.buffers
            .iter()
            .find(|b| b.role.compared())
            .map(|b| b.dtype.name())
            .unwrap_or("none")
    }
    fn n(&self) -> u64 {
        match self.shape.values().collect::<Vec<_>>()[..] {
            [n] => *n as u64,
            _ => self
                .buffers
                .iter()
                .find(|b| b.role.compared())
                .map(|b| b.elements)
                .unwrap_or(0),
        }
    }
    fn plans(&self) -> Vec<LaunchPlan> {
        self.plans.clone()
    }
    fn slot_bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.bytes() as u64).sum()
    }
    fn useful_bytes(&self) -> u64 {
        self.useful_bytes
    }
    fn flops(&self) -> u64 {
        self.flops
    }
    fn reference(&self) -> String {
        self.reference.describe()
    }
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        self.buffers
            .iter()
            .find_map(|b| match b.comparison.as_ref()?.rule {
                rule::Rule::AllClose { atol, rtol } => Some((Some(atol), Some(rtol))),
                _ => None,
            })
            .unwrap_or((None, None))
    }
    fn rule(&self) -> String {
        self.buffers
            .iter()
            .filter_map(|b| {
                b.comparison
                    .as_ref()
                    .map(|c| format!("{}: {}", b.name, c.describe_for(b.dtype)))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
    fn verification(&self) -> String {
        match self.device_judged.get() {
            0 => "CPU oracle".into(),
            n => format!(
                "device checker ({n} judgement{}, {} cross-checked on the CPU oracle)",
                if n == 1 { "" } else { "s" },
                self.cross_checked.get()
            ),
        }
    }
    fn create_slot<B: Backend>(
        &self,
        b: &mut B,
        _slot: u64,
    ) -> Result<Vec<B::Buffer>, BackendError> {
        let on_device = self.inputs_on_device(b);
        let mut out = Vec::with_capacity(self.buffers.len());
        for (i, buf) in self.buffers.iter().enumerate() {
            let mut d = b.alloc_bytes(buf.bytes())?;
            match buf.role {
                Role::In | Role::Inout => self.put_input(b, &mut d, i, on_device)?,
                Role::Out | Role::Scratch => {
                    b.fill_bytes(&mut d, crate::workload::POISON_BYTES[0])?
                }
            }
            out.push(d);
        }
        Ok(out)
    }
    fn args<'a, B: Backend>(&self, step: usize, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>> {
        let (ints, floats) = self.scalars_at(&self.shape);
        launch_args(
            &self.decl.launches()[step],
            &self.op,
            &self.shape,
            bufs,
            &ints,
            &floats,
        )
    }
    fn poison<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        byte: u8,
    ) -> Result<(), BackendError> {
        self.reset_slot(b, bufs, |b, d, _, _| b.fill_bytes(d, byte))
    }
    fn invalidate<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        seed: u64,
    ) -> Result<(), BackendError> {
        self.reset_slot(b, bufs, |b, d, i, bytes| {
            b.scramble(d, bytes, crate::inputs::stream_key(seed, i as u64))
        })
    }
    fn with_new_inputs(&self, seed: u64, kind: NewInputs) -> Option<DeclaredWorkload> {
        // The user's own data, or inputs given by a property check, are not redrawn: what
        // they may hold is theirs to say.
        let case = self.redrawn(seed)?;
        if self
            .reference_s
            .get()
            .is_some_and(|s| *s > FRESH_REFERENCE_BUDGET_S)
        {
            return None;
        }
        let mut w = match kind {
            NewInputs::Fresh => DeclaredWorkload::new(
                self.decl.clone(),
                self.shape.clone(),
                case,
                self.scalar_index,
                self.reference.clone(),
            )
            .ok()?,
            // Made where the block's inputs are (on the device, where a generator can),
            // not as host bytes of the whole input: a copy of the block's inputs on the
            // host, the other case and the reference there took half a second a block at
            // 8192 x 8192.
            NewInputs::Perturbed => {
                let mut w = self.remade();
                w.perturbation = Some(Perturbation { seed, case });
                w
            }
        };
        w.reference_s = self.reference_s.clone();
        // One block's judgements are counted together; the new inputs' are cross-checked
        // on the CPU only when every judgement is.
        w.first_judgement = self.first_judgement.clone();
        w.cross_checked = self.cross_checked.clone();
        w.device_judged = self.device_judged.clone();
        Some(w)
    }
    fn perturbation_sources<B: Backend>(
        &self,
        b: &mut B,
    ) -> Result<Vec<PerturbSource<B::Buffer>>, BackendError> {
        let Some(other_case) = self.redrawn(OTHER_VALUES_SEED) else {
            return Ok(Vec::new());
        };
        let on_device = self.inputs_on_device(b);
        let mut out = Vec::new();
        let mut k = 0;
        for (i, buf) in self.buffers.iter().enumerate() {
            if !matches!(buf.role, Role::In | Role::Inout) {
                continue;
            }
            let input = k;
            k += 1;
            // Row offsets are a structure, not values: one element moved would send a row
            // past the entries.
            if buf.offsets {
                continue;
            }
            let mut other = b.alloc_bytes(buf.bytes())?;
            // Made on the device wherever a generator can (the host never needs them).
            let made = match generator(buf, input, other_case) {
                Some(g) => b.device_generate(&mut other, &g)?,
                None => false,
            };
            if !made {
                let bytes = fill(buf, input, other_case).map_err(BackendError::from)?;
                b.upload_bytes(&mut other, &bytes)?;
            }
            let block = match buf.role {
                Role::In => Some(self.input_copy(b, i, on_device)?),
                _ => None,
            };
            out.push(PerturbSource {
                index: i,
                elements: buf.elements,
                size: buf.dtype.size_bytes(),
                other,
                block,
            });
        }
        Ok(out)
    }
    fn restore_inouts<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
    ) -> Result<(), BackendError> {
        self.reset_slot(b, bufs, |_, _, _, _| Ok(()))
    }
    fn put_inputs<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
    ) -> Result<(), BackendError> {
        let on_device = self.inputs_on_device(b);
        for (i, (buf, d)) in self.buffers.iter().zip(bufs.iter_mut()).enumerate() {
            if matches!(buf.role, Role::In | Role::Inout) {
                self.put_input(b, d, i, on_device)?;
            }
        }
        Ok(())
    }
    fn output<B: Backend>(&self, b: &mut B, bufs: &[B::Buffer]) -> Result<Vec<u32>, BackendError> {
        let mut bytes = Vec::new();
        for (buf, d) in self.buffers.iter().zip(bufs) {
            if buf.role.compared() {
                let mut got =
                    host_for_download(buf.bytes(), &buf.name).map_err(BackendError::from)?;
                b.download_bytes(d, &mut got)?;
                bytes.extend(got);
            }
        }
        Ok(bytes
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(w)
            })
            .collect())
    }
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        _slot: u64,
    ) -> Result<CheckOutcome, BackendError> {
        let verdicts = self.judge(b, bufs)?;
        Ok(self.outcome_of(&verdicts))
    }
    fn hold_cross_check(&self, hold: bool) {
        DeclaredWorkload::hold_cross_check(self, hold);
    }
    fn settle(&self) -> Result<(), BackendError> {
        self.settle_cross_check()
    }
}

impl DeclaredWorkload {
    /// A judgement's verdicts as one check's outcome: the failures summed, the largest
    /// errors, the first failure described.
    fn outcome_of(&self, verdicts: &[(String, rule::Verdict)]) -> CheckOutcome {
        let mut outcome = CheckOutcome {
            failures: 0,
            max_abs: 0.0,
            max_rel: 0.0,
            first_failure: None,
        };
        for (name, v) in verdicts {
            outcome.failures += v.failures;
            outcome.max_abs = outcome.max_abs.max(v.max_abs);
            outcome.max_rel = outcome.max_rel.max(v.max_rel);
            if outcome.first_failure.is_none() {
                if let Some(f) = &v.first {
                    outcome.first_failure = Some(format!(
                        "{name}{} ({})",
                        f.describe(&self.axes(name)),
                        v.rule
                    ));
                }
            }
        }
        outcome
    }
}

impl DeclaredWorkload {
    /// What a launch must find in a slot before it runs: each output and scratch buffer
    /// handed to `outputs` (with its index and length in bytes) to be overwritten, and each
    /// in-out buffer set again from its input, so that no launch sees the last one's result.
    fn reset_slot<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        mut outputs: impl FnMut(&mut B, &mut B::Buffer, usize, usize) -> Result<(), BackendError>,
    ) -> Result<(), BackendError> {
        let on_device = self.inputs_on_device(b);
        for (i, (buf, d)) in self.buffers.iter().zip(bufs.iter_mut()).enumerate() {
            match buf.role {
                Role::Out | Role::Scratch => outputs(b, d, i, buf.bytes())?,
                Role::Inout => self.put_input(b, d, i, on_device)?,
                Role::In => {}
            }
        }
        Ok(())
    }
}
