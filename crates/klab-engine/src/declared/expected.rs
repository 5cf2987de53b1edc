//! What the reference says: its expected outputs on the case's inputs (on a sample of the
//! slices at the index-overflow shape), and each rule's per-element scale (scaled-sum's
//! magnitudes, reference-error's reference errors), each made once per workload.

use super::*;

/// How far a float computed on a few slices alone may be from its value at the whole
/// shape, relative to the output's largest magnitude ([`DeclaredWorkload::slices_disagree`]).
pub const SLICES_AGREE: f64 = 1e-5;

impl DeclaredWorkload {
    /// Why the operation's declared slices are not independent for its reference, if they
    /// are not: the reference run on the middle and the last slice alone, or on as many as
    /// the declaration admits as a size (a strict subset: this needs at least 4 slices and
    /// an admitted count below the whole, else None) must give the values it gives them at this
    /// whole shape (a prefix sum along rows declared `slices = "rows"` would not). Integers
    /// must be equal; floats within [`SLICES_AGREE`] of the largest magnitude (a
    /// reference that blocks its loops by the sizes may round differently), NaN where NaN.
    /// The reference failing on the slices alone is a reason too.
    pub fn slices_disagree(&self) -> Option<String> {
        let var = self.op.spec.slices.clone()?;
        let total = u64::try_from(self.shape.get(&var).copied().unwrap_or(0)).unwrap_or(0);
        if total < 4 {
            return None;
        }
        let at = describe_shape(&self.shape);
        // The last slice and the middle ones: as many as the declaration admits as a size
        // (a reference may hold to its min or multiple), a strict subset, else no test.
        let count = klab_spec::declared::slices::admitted_count(&self.op.spec, &var, 2)
            .filter(|c| *c < total)?;
        let mut set = std::collections::BTreeSet::from([total - 1]);
        klab_spec::declared::slices::fill_to(count, total, &mut set);
        let chosen: Vec<u64> = set.into_iter().collect();
        let which = match chosen.as_slice() {
            [a, .., b] if chosen.len() > 4 => format!("{} of them, {a} to {b},", chosen.len()),
            _ => format!("{chosen:?}"),
        };
        let not_held = |why: String| {
            Some(format!(
                "slices = \"{var}\" does not hold for the reference at {at}: computed on {var} slices {which} alone {why}; each slice must depend only on its own slice of the inputs (remove slices, or fix the reference)"
            ))
        };
        let parts = match klab_spec::declared::slices::parts(&self.op.spec, &self.shape, &var) {
            Ok(p) => p,
            Err(e) => return not_held(format!("it cannot be sliced: {e}")),
        };
        let sample = klab_spec::declared::slices::Sample {
            var: var.clone(),
            total,
            chosen: chosen.clone(),
            parts,
        };
        let alone = self.with_sample(Some(sample.clone()));
        let whole = match self.expected() {
            Ok(w) => w,
            Err(e) => return not_held(format!("(the whole shape failed first: {})", e.message)),
        };
        let apart = match alone.expected() {
            Ok(a) => a,
            Err(e) => return not_held(format!("it failed: {}", e.message)),
        };
        for (i, b) in self.buffers.iter().enumerate() {
            if !b.role.compared() {
                continue;
            }
            let size = b.dtype.size_bytes();
            let want = sample.gather(&b.name, &whole[i], size);
            let n = want.len() / size;
            // The output's largest finite magnitude, once (not once per element).
            let scale = match b.dtype.is_float() {
                true => (0..n)
                    .map(|j| b.dtype.to_f64(&want, j).abs())
                    .filter(|v| v.is_finite())
                    .fold(0.0, f64::max),
                false => 0.0,
            };
            let differs = |k: usize| -> bool {
                if b.dtype.is_float() {
                    let (x, y) = (b.dtype.to_f64(&apart[i], k), b.dtype.to_f64(&want, k));
                    !(x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= SLICES_AGREE * scale)
                } else {
                    want[k * size..(k + 1) * size] != apart[i][k * size..(k + 1) * size]
                }
            };
            if let Some(k) = (0..n).find(|k| differs(*k)) {
                let value =
                    |bytes: &[u8]| rule::show_value(b.dtype, &bytes[k * size..(k + 1) * size]);
                return not_held(format!(
                    "it gives {}[{}] = {}, the whole shape gives {}",
                    b.name,
                    sample.full_index(&b.name, k as u64),
                    value(&apart[i]),
                    value(&want)
                ));
            }
        }
        None
    }

    /// The reference this workload computes with.
    pub fn reference_rc(&self) -> std::rc::Rc<dyn Reference> {
        self.reference.clone()
    }

    /// What the sample covers, when there is one ([`klab_spec::declared::slices::Sample::describe`]).
    pub fn sample_note(&self) -> Option<String> {
        self.sample.as_ref().map(|s| s.describe())
    }

    /// The shape the reference sees: the sample's, else this one.
    pub fn reference_shape(&self) -> Shape {
        match &self.sample {
            Some(s) => s.shape(&self.shape),
            None => self.shape.clone(),
        }
    }

    /// Buffer `b`'s elements as the reference sees them.
    pub(super) fn reference_elements(&self, b: &Buffer) -> u64 {
        match &self.sample {
            // Scratch is only zeroed: as long as the sample's own shape makes it.
            Some(_) if b.role == Role::Scratch => self.op.spec.buffers[&b.name]
                .len
                .eval_u64(&self.reference_shape())
                .unwrap_or(b.elements)
                .min(b.elements),
            Some(s) => s.elements(&b.name, b.elements),
            None => b.elements,
        }
    }

    /// The inputs as the reference sees them: the sample's slices of each, else the inputs.
    fn reference_inputs(&self) -> Result<&[Vec<u8>], BackendError> {
        let Some(sample) = &self.sample else {
            return self.inputs();
        };
        let inputs = self.inputs()?;
        self.sampled_inputs
            .get_or_init(|| {
                Ok(self
                    .buffers
                    .iter()
                    .zip(inputs)
                    .map(|(b, v)| match v.is_empty() {
                        true => Vec::new(),
                        false => sample.gather(&b.name, v, b.dtype.size_bytes()),
                    })
                    .collect())
            })
            .as_deref()
            .map_err(|e| BackendError::from(e.clone()))
    }

    /// The reference run on host copies of `inputs` (outputs and scratch zeroed), each as
    /// the reference sees it ([`Self::reference_inputs`]).
    fn run_reference(&self, inputs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
        self.run_reference_with(inputs, false, None)
    }

    /// [`Self::run_reference`], with the float scalars' absolute values when `abs_scalars`
    /// (scaled-sum's magnitudes: `alpha AB + beta C` with beta < 0 must not cancel), in
    /// a working precision when `precision` is given ([`Reference::run_in`]).
    fn run_reference_with(
        &self,
        inputs: &[Vec<u8>],
        abs_scalars: bool,
        precision: Option<rule::Precision>,
    ) -> Result<Vec<Vec<u8>>, String> {
        let mut host = Vec::with_capacity(self.buffers.len());
        for (b, i) in self.buffers.iter().zip(inputs) {
            let bytes = self.reference_elements(b) as usize * b.dtype.size_bytes();
            let mut v = host_zeroed(bytes, &b.name)?;
            if !i.is_empty() {
                // Spread over the cores: a copy of a large input is the reference's first cost.
                klab_core::par::for_chunks(&mut v, 1, |c, part| {
                    let at = c * klab_core::par::CHUNK_ELEMENTS;
                    part.copy_from_slice(&i[at..at + part.len()]);
                });
            }
            host.push(v);
        }
        let shape = self.reference_shape();
        let (ints, mut floats) = self.scalars_at(&shape);
        if abs_scalars {
            floats.iter_mut().for_each(|f| *f = f.abs());
        }
        let mut views: Vec<&mut [u8]> = host.iter_mut().map(|v| v.as_mut_slice()).collect();
        match precision {
            None => self.reference.run(&shape, &mut views, &ints, &floats)?,
            Some(p) => self
                .reference
                .run_in(p, &shape, &mut views, &ints, &floats)?,
        }
        Ok(host)
    }

    /// Whether an output's bound takes a per-element scale from the reference (the
    /// reference then runs again: scaled-sum once, reference-error
    /// 2 [`crate::refscale::SAMPLES`]` - 1` times).
    pub fn uses_scales(&self) -> bool {
        self.buffers.iter().any(|b| scaled(b.comparison.as_ref()))
    }

    /// Make the inputs, the reference's outputs and the rules' per-element scales now
    /// (each is made once and kept), so that a reference failure is known before any
    /// launch.
    pub fn prepare(&self) -> Result<(), BackendError> {
        self.expected()?;
        self.scales()?;
        Ok(())
    }

    /// The reference's outputs (of the sample, when there is one), computed once per
    /// workload.
    pub(super) fn expected(&self) -> Result<&[Vec<u8>], BackendError> {
        let inputs = self.reference_inputs()?;
        let r = self.expected.get_or_init(|| {
            let t = std::time::Instant::now();
            let r = self.run_reference(inputs);
            let _ = self.reference_s.set(t.elapsed().as_secs_f64());
            r
        });
        r.as_deref()
            .map_err(|e| BackendError::from(format!("the reference failed: {e}")))
    }

    /// Every output's per-element scale, made once: scaled-sum's magnitudes
    /// ([`Self::abs_magnitudes`]), reference-error's reference errors
    /// ([`Self::reference_errors`]), None for the other rules.
    pub(super) fn scales(&self) -> Result<&[Scales], BackendError> {
        let r = self.scales.get_or_init(|| {
            let mut out: Vec<Scales> = vec![None; self.buffers.len()];
            if !self.uses_scales() {
                return Ok(out);
            }
            let is = |b: &Buffer, f: fn(&rule::Rule) -> bool| {
                b.comparison.as_ref().is_some_and(|c| f(&c.rule))
            };
            if self
                .buffers
                .iter()
                .any(|b| is(b, |r| matches!(r, rule::Rule::ScaledSum { .. })))
            {
                let mut m = self.abs_magnitudes().map_err(|e| {
                    format!("the reference failed on the absolute inputs (scaled-sum's magnitudes): {e}")
                })?;
                for (i, b) in self.buffers.iter().enumerate() {
                    if is(b, |r| matches!(r, rule::Rule::ScaledSum { .. })) {
                        out[i] = Some(std::mem::take(&mut m[i]));
                    }
                }
            }
            self.reference_errors(&mut out)?;
            Ok(out)
        });
        r.as_deref().map_err(|e| BackendError::from(e.clone()))
    }

    /// Scaled-sum's per-element magnitudes: the reference run again on the absolute values
    /// of the float inputs, so that for a sum of products (a dot product, a GEMM, a
    /// reduction, a convolution) each output's magnitude is `sum |a_i x_i|`, the bound the
    /// reduction lab's gate is written against. Integer inputs (indices, counts) are kept.
    /// One vector per buffer (empty for inputs).
    fn abs_magnitudes(&self) -> Result<Vec<Vec<f64>>, String> {
        let mut abs = self.reference_inputs().map_err(|e| e.message)?.to_vec();
        for (b, v) in self.buffers.iter().zip(abs.iter_mut()) {
            // Outputs and scratch have no initial bytes (empty).
            if b.dtype.is_float() && !v.is_empty() {
                let dt = b.dtype;
                klab_core::par::for_chunks(v, dt.size_bytes(), |_, part| {
                    for i in 0..part.len() / dt.size_bytes() {
                        let x = dt.to_f64(part, i);
                        dt.write_f64(part, i, x.abs());
                    }
                });
            }
        }
        let out = self.run_reference_with(&abs, true, None)?;
        Ok(self
            .buffers
            .iter()
            .zip(out)
            .map(|(b, bytes)| {
                let mut m = klab_core::par::zeroed(self.reference_elements(b) as usize);
                klab_core::par::for_chunks(&mut m, 1, |c, part| {
                    let base = c * klab_core::par::CHUNK_ELEMENTS;
                    for (j, m) in part.iter_mut().enumerate() {
                        // A magnitude the dtype cannot hold (an f16 sum past 65504) gives
                        // no bound: the element must then equal the reference.
                        let v = b.dtype.to_f64(&bytes, base + j).abs();
                        *m = if v.is_finite() { v } else { 0.0 };
                    }
                });
                m
            })
            .collect())
    }

    /// Reference-error's per-element scales, into `out` for each output it compares: the
    /// reference in the rule's working precision against the reference in double, on the
    /// inputs and on [`crate::refscale::SAMPLES`]` - 1` perturbations of them
    /// ([`crate::refscale::errors`]).
    fn reference_errors(&self, out: &mut [Scales]) -> Result<(), String> {
        let precision_of = |b: &Buffer| match b.comparison.as_ref()?.rule {
            rule::Rule::ReferenceError { precision, .. } => Some(precision),
            _ => None,
        };
        // Validation allows one working precision per operation.
        let Some(p) = self.buffers.iter().find_map(precision_of) else {
            return Ok(());
        };
        let failed = |e: String| {
            format!(
                "the reference in {} (rule reference-error) failed: {e}",
                p.name()
            )
        };
        let inputs = self.reference_inputs().map_err(|e| e.message)?;
        let expected = self.expected().map_err(|e| e.message)?;
        let samples = crate::refscale::SAMPLES as usize;
        // One sample's runs at a time: the running maximum per element is all that is kept.
        let mut acc: Vec<Option<crate::refscale::Errors>> = self
            .buffers
            .iter()
            .map(|b| {
                precision_of(b).map(|_| {
                    let n = self.reference_elements(b) as usize;
                    crate::refscale::Errors::new(b.dtype, n, samples)
                })
            })
            .collect();
        for sample in 0..crate::refscale::SAMPLES {
            let (low, high) = if sample == 0 {
                let low = self
                    .run_reference_with(inputs, false, Some(p))
                    .map_err(failed)?;
                (low, None)
            } else {
                let mut moved = inputs.to_vec();
                for (k, (b, v)) in self.buffers.iter().zip(moved.iter_mut()).enumerate() {
                    crate::refscale::perturb(b.dtype, v, sample, k as u64);
                }
                let low = self
                    .run_reference_with(&moved, false, Some(p))
                    .map_err(failed)?;
                (low, Some(self.run_reference_with(&moved, false, None)?))
            };
            for (i, a) in acc.iter_mut().enumerate() {
                if let Some(a) = a {
                    let high = high.as_ref().map_or(&expected[i], |h| &h[i]);
                    a.add(&low[i], high);
                }
            }
        }
        for (slot, a) in out.iter_mut().zip(acc) {
            if let Some(a) = a {
                *slot = Some(a.finish());
            }
        }
        Ok(())
    }
}
