//! A slot judged: every compared output against the expected values by its rule, on the
//! device checker where the backend's policy has one (cross-checked by the CPU oracle) or
//! on the host, and every `in` buffer the launch must have left as klab wrote it.

use klab_spec::rule::Verdict;

use super::*;

/// A workload's expected values and per-element scales on one backend's device, uploaded once
/// (an `in` buffer's `want` is a copy of its input, to see that no launch changed it).
struct DeviceExpected<D> {
    want: Vec<Option<D>>,
    scale: Vec<Option<D>>,
}

impl<D: 'static> DeviceExpected<D> {
    /// The workload's entry in its device cache, made empty for `buffers` on first use.
    fn in_cache(cache: &mut Option<Box<dyn std::any::Any>>, buffers: usize) -> &mut Self {
        if !cache.as_ref().is_some_and(|c| c.is::<Self>()) {
            *cache = Some(Box::new(Self {
                want: (0..buffers).map(|_| None).collect(),
                scale: (0..buffers).map(|_| None).collect(),
            }));
        }
        cache
            .as_mut()
            .and_then(|c| c.downcast_mut::<Self>())
            .expect("made above")
    }
}

/// An output's per-element scale as the device checker reads it: little-endian f64s.
fn scale_bytes(m: &[f64], name: &str) -> Result<Vec<u8>, BackendError> {
    // Spread over the cores: at the index-overflow case this is 17 GB.
    let mut bytes = host_zeroed(8 * m.len(), name).map_err(BackendError::from)?;
    klab_core::par::for_chunks(&mut bytes, 8, |c, part| {
        let base = c * klab_core::par::CHUNK_ELEMENTS;
        for (j, out) in part.chunks_exact_mut(8).enumerate() {
            out.copy_from_slice(&m[base + j].to_le_bytes());
        }
    });
    Ok(bytes)
}

impl DeclaredWorkload {
    /// Every compared buffer's verdict against the reference.
    pub fn verdicts<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        let got = self.download_compared(b, bufs)?;
        self.verdicts_of(&got)
    }

    /// Each compared buffer's bytes as the launch left them (the others: empty).
    fn download_compared<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Vec<Vec<u8>>, BackendError> {
        let mut out = Vec::with_capacity(self.buffers.len());
        for (i, buf) in self.buffers.iter().enumerate() {
            if buf.comparison.is_none() {
                out.push(Vec::new());
                continue;
            }
            let mut got = host_for_download(buf.bytes(), &buf.name).map_err(BackendError::from)?;
            b.download_bytes(&bufs[i], &mut got)?;
            out.push(got);
        }
        Ok(out)
    }

    /// Every compared buffer's verdict on `got` (from [`Self::download_compared`]) against
    /// the reference.
    fn verdicts_of(&self, got: &[Vec<u8>]) -> Result<Vec<(String, Verdict)>, BackendError> {
        let expected = self.expected()?;
        let scales = self.scales()?;
        let mut out = Vec::new();
        for (i, buf) in self.buffers.iter().enumerate() {
            let Some(cmp) = &buf.comparison else { continue };
            let got = &got[i];
            let scale = scales[i].as_deref();
            let failed = |e| BackendError::from(format!("buffer {}: {e}", buf.name));
            let v = match &self.sample {
                None => rule::compare(buf.dtype, cmp, got, &expected[i], scale, &buf.shape)
                    .map_err(failed)?,
                Some(sample) => {
                    let got = sample.gather(&buf.name, got, buf.dtype.size_bytes());
                    let shape = self.sampled_dims(buf);
                    rule::compare(buf.dtype, cmp, &got, &expected[i], scale, &shape)
                        .map_err(failed)?
                        .relocated(|k| sample.full_index(&buf.name, k), &buf.shape)
                }
            };
            out.push((buf.name.clone(), v));
        }
        Ok(out)
    }

    /// Every compared buffer's verdict, by the checker the backend's policy chooses: the
    /// device checker where it has one (the first judgement of a workload with at most
    /// [`crate::verify::CROSS_CHECK_MAX_BYTES`] of compared output, or every judgement
    /// under `paranoid`, also by the CPU oracle: a disagreement is a klab error), else
    /// the CPU oracle ([`Self::verdicts`]); then each `in` buffer the launch changed, as a
    /// failure of its own ([`Self::changed_inputs`]).
    pub fn judge<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        let changed = self.changed_inputs(b, bufs)?;
        // The device checker reads a copy's or a transpose's expected values from the
        // slot's input, which is no longer klab's: the CPU oracle judges from its own.
        let mut verdicts = if changed.is_empty() {
            self.outputs_judged(b, bufs)?
        } else {
            self.verdicts(b, bufs)?
        };
        verdicts.extend(changed);
        Ok(verdicts)
    }

    /// [`Self::judge`] for the compared outputs alone.
    fn outputs_judged<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        let policy = b.verify_policy();
        if policy.checker == crate::verify::Checker::Cpu {
            return self.verdicts(b, bufs);
        }
        let Some(device) = self.device_verdicts(b, bufs)? else {
            return self.verdicts(b, bufs);
        };
        let first = self.first_judgement.replace(false);
        if policy.paranoid
            || (first && self.compared_bytes() <= crate::verify::CROSS_CHECK_MAX_BYTES)
        {
            let got = self.download_compared(b, bufs)?;
            // A pass the caller asked to have cross-checked later keeps its bytes until
            // then; a failure ends the block, so it is cross-checked now.
            let passed = device.iter().all(|(_, v)| v.passed());
            if first
                && !policy.paranoid
                && passed
                && matches!(*self.later.borrow(), CrossCheckLater::Asked)
            {
                *self.later.borrow_mut() = CrossCheckLater::Pending {
                    device: device.clone(),
                    got,
                };
                self.device_judged.set(self.device_judged.get() + 1);
                return Ok(device);
            }
            let cpu = self.verdicts_of(&got)?;
            if let Err(e) = self.cross_check(&device, &cpu) {
                let overwritten = self.overwritten_checker_copies(b)?;
                if !overwritten.is_empty() {
                    return Ok(cpu.into_iter().chain(overwritten).collect());
                }
                return Err(e);
            }
        }
        if device.iter().any(|(_, v)| !v.passed()) {
            // A failure may be the checker's copy, not the output: then the CPU oracle judges.
            let overwritten = self.overwritten_checker_copies(b)?;
            if !overwritten.is_empty() {
                return Ok(self
                    .verdicts(b, bufs)?
                    .into_iter()
                    .chain(overwritten)
                    .collect());
            }
        }
        self.device_judged.set(self.device_judged.get() + 1);
        Ok(device)
    }

    /// The device checker's verdicts against the CPU oracle's on the same bytes: agreeing,
    /// one more cross-checked judgement; else a klab error naming the first output they
    /// disagree on (a fault in klab's checking, unless a kernel's stores outside its
    /// buffers changed the checker's copies).
    fn cross_check(
        &self,
        device: &[(String, Verdict)],
        cpu: &[(String, Verdict)],
    ) -> Result<(), BackendError> {
        for ((name, d), (_, c)) in device.iter().zip(cpu) {
            if let Some(why) = crate::verify::disagreement(d, c) {
                return Err(BackendError::klab_fault(format!(
                    "klab error: {} on output {name} of {} at {}: {why} (a fault in klab's checking, not a verdict on the kernel)",
                    crate::verify::DISAGREEMENT,
                    self.decl.name,
                    describe_shape(&self.shape)
                )));
            }
        }
        self.cross_checked.set(self.cross_checked.get() + 1);
        Ok(())
    }

    /// Whether the CPU oracle's cross-check of this workload's first judgement, where the
    /// device checker passes it, waits for [`Self::settle_cross_check`]; `false` also drops
    /// a held one never settled (its block ended in an error).
    pub(super) fn hold_cross_check(&self, hold: bool) {
        *self.later.borrow_mut() = if hold {
            CrossCheckLater::Asked
        } else {
            CrossCheckLater::No
        };
    }

    /// The cross-check [`Self::hold_cross_check`] held back, done now on the bytes the
    /// judgement saw. A disagreement is a klab error: the device checker's copies were
    /// uploaded for that judgement, after its launch, so no store of the kernel's can
    /// have changed what it read (later launches may have, which says nothing of it).
    pub(super) fn settle_cross_check(&self) -> Result<(), BackendError> {
        let later = std::mem::take(&mut *self.later.borrow_mut());
        let CrossCheckLater::Pending { device, got } = later else {
            return Ok(());
        };
        let cpu = self.verdicts_of(&got)?;
        self.cross_check(&device, &cpu)
    }

    /// The device checker's copies of the expected outputs that no longer hold what klab
    /// uploaded, each as a failure of its own. klab never writes them after the upload, so
    /// only a kernel storing outside its declared buffers changes them: its failure, not a
    /// fault in klab's checking. Looked at only when the device checker failed an output or
    /// disagreed with the CPU oracle, and only up to the cross-check's size (beyond it the
    /// host copies this needs would be as large as the outputs); the copies are dropped, to
    /// be uploaded afresh.
    fn overwritten_checker_copies<B: Backend>(
        &self,
        b: &mut B,
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        if self.compared_bytes() > crate::verify::CROSS_CHECK_MAX_BYTES {
            return Ok(Vec::new());
        }
        let bitwise = rule::Comparison {
            rule: rule::Rule::Bitwise,
            nan: rule::NanRule::NanEqual,
        };
        let (expected, scales) = (self.expected()?, self.scales()?);
        let mut cache = self.device_cache.borrow_mut();
        let dev = DeviceExpected::<B::Buffer>::in_cache(&mut cache, self.buffers.len());
        let mut out = Vec::new();
        for (i, buf) in self.buffers.iter().enumerate() {
            if buf.comparison.is_none() {
                continue;
            }
            let copies = [
                (
                    dev.want[i].as_ref(),
                    buf.dtype,
                    "expected",
                    Some(&expected[i][..]),
                ),
                (dev.scale[i].as_ref(), Dtype::F64, "scale of", None),
            ];
            for (copy, dtype, what, uploaded) in copies {
                let Some(copy) = copy else { continue };
                let scale;
                let uploaded = match (uploaded, scales[i].as_deref()) {
                    (Some(u), _) => u,
                    (None, Some(m)) => {
                        scale = scale_bytes(m, &buf.name)?;
                        &scale[..]
                    }
                    (None, None) => continue,
                };
                let mut held =
                    host_for_download(uploaded.len(), &buf.name).map_err(BackendError::from)?;
                b.download_bytes(copy, &mut held)?;
                let shape = [uploaded.len() as u64 / dtype.size_bytes() as u64];
                let mut v = rule::compare(dtype, &bitwise, &held, uploaded, None, &shape)
                    .map_err(|e| BackendError::from(format!("buffer {}: {e}", buf.name)))?;
                if !v.passed() {
                    v.rule = format!(
                        "klab's device copy of the {what} {} changed during the launch: the kernel stored outside its declared buffers",
                        buf.name
                    );
                    out.push((
                        format!("memory outside the kernel's buffers ({what} {})", buf.name),
                        v,
                    ));
                }
            }
        }
        if !out.is_empty() {
            *cache = None;
        }
        Ok(out)
    }

    /// The `in` buffers a launch changed, each as a failing verdict (none when every one
    /// holds the bytes klab put there). A kernel may not write what it was declared to only
    /// read: a mark left in an input lets a later launch find its last result, and an input
    /// overwritten to agree with a wrong output would satisfy a checker that reads the
    /// expected values from that input. Judged on the device against a copy made once where
    /// the policy has a device checker, else downloaded and compared on the host.
    fn changed_inputs<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        let unchanged = rule::Comparison {
            rule: rule::Rule::Bitwise,
            nan: rule::NanRule::NanEqual,
        };
        let device = b.verify_policy().checker == crate::verify::Checker::Device;
        let mut out = Vec::new();
        for (i, buf) in self.buffers.iter().enumerate() {
            if buf.role != Role::In {
                continue;
            }
            let mut verdict = None;
            if device {
                verdict = self.device_unchanged(b, bufs, i, unchanged)?;
            }
            let mut v = match verdict {
                Some(v) => v,
                None => {
                    let mut got =
                        host_for_download(buf.bytes(), &buf.name).map_err(BackendError::from)?;
                    b.download_bytes(&bufs[i], &mut got)?;
                    let want = &self.inputs()?[i];
                    rule::compare(buf.dtype, &unchanged, &got, want, None, &buf.shape)
                        .map_err(|e| BackendError::from(format!("buffer {}: {e}", buf.name)))?
                }
            };
            if !v.passed() {
                v.rule = "declared in, so the kernel must leave it as klab wrote it (declare it inout if the kernel writes it)".into();
                out.push((format!("input {}", buf.name), v));
            }
        }
        Ok(out)
    }

    /// Input `i` against its copy on the device (made on first use); `None` where the
    /// backend has no device checker.
    fn device_unchanged<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        i: usize,
        unchanged: rule::Comparison,
    ) -> Result<Option<Verdict>, BackendError> {
        let on_device = self.inputs_on_device(b);
        let mut cache = self.device_cache.borrow_mut();
        let dev = DeviceExpected::<B::Buffer>::in_cache(&mut cache, self.buffers.len());
        let buf = &self.buffers[i];
        if dev.want[i].is_none() {
            // An input has no expected values of its own: its slot holds the copy.
            dev.want[i] = Some(self.input_copy(b, i, on_device)?);
        }
        let check = crate::verify::DeviceCheck {
            got: &bufs[i],
            want: dev.want[i].as_ref().expect("made above"),
            map: crate::verify::ExpectMap::Direct,
            magnitude: None,
            dtype: buf.dtype,
            comparison: unchanged,
            elements: buf.elements,
        };
        Ok(b.device_check(&check)?
            .map(|s| s.verdict(buf.dtype, &unchanged, &buf.shape, None)))
    }

    /// Judgements the CPU oracle cross-checked so far.
    pub fn cross_checked(&self) -> u64 {
        self.cross_checked.get()
    }

    /// Bytes of the compared outputs.
    pub fn compared_bytes(&self) -> u64 {
        self.buffers
            .iter()
            .filter(|b| b.comparison.is_some())
            .map(|b| b.bytes() as u64)
            .sum()
    }

    /// Buffer `buf`'s dimensions in the sample: the first (the slices') shrunk to the
    /// chosen slices.
    fn sampled_dims(&self, buf: &Buffer) -> Vec<u64> {
        let mut dims = buf.shape.clone();
        if let Some(s) = &self.sample {
            if let klab_spec::declared::slices::Part::Sliced { per } = s.part(&buf.name) {
                // The sample's elements over the other dimensions' product (the first
                // dimension may be `B * T` or `B * T / 4`, not always a multiple of B).
                let rest: u64 = dims.iter().skip(1).product();
                if let Some(first) = dims.first_mut() {
                    *first = per * s.chosen.len() as u64 / rest.max(1);
                }
            }
        }
        dims
    }

    /// The device checker's verdicts (None: the backend has no device checker, or the
    /// outputs are compared on a sample of their slices, which the host does).
    fn device_verdicts<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Option<Vec<(String, Verdict)>>, BackendError> {
        if self.sample.is_some() {
            return Ok(None);
        }
        let maps = self.reference.device_expectation(&self.shape);
        let mut cache = self.device_cache.borrow_mut();
        let dev = DeviceExpected::<B::Buffer>::in_cache(&mut cache, self.buffers.len());
        let mut out = Vec::new();
        for (i, buf) in self.buffers.iter().enumerate() {
            let Some(cmp) = &buf.comparison else { continue };
            let mapped = maps.iter().find(|m| m.0 == i).map(|m| (m.1, m.2));
            if mapped.is_none() && dev.want[i].is_none() {
                let expected = self.expected()?;
                let mut d = b.alloc_bytes(buf.bytes())?;
                b.upload_bytes(&mut d, &expected[i])?;
                dev.want[i] = Some(d);
            }
            let scaled = scaled(Some(cmp));
            if scaled && dev.scale[i].is_none() {
                let m = self.scales()?[i].as_deref().ok_or_else(|| {
                    BackendError::from(format!("{} without its per-element scale", cmp.rule.name()))
                })?;
                let bytes = scale_bytes(m, &buf.name)?;
                let mut d = b.alloc_bytes(bytes.len())?;
                b.upload_bytes(&mut d, &bytes)?;
                dev.scale[i] = Some(d);
            }
            let (want, map) = match mapped {
                Some((src, map)) => (&bufs[src], map),
                None => (
                    dev.want[i].as_ref().expect("uploaded above"),
                    crate::verify::ExpectMap::Direct,
                ),
            };
            let check = crate::verify::DeviceCheck {
                got: &bufs[i],
                want,
                map,
                magnitude: dev.scale[i].as_ref().filter(|_| scaled),
                dtype: buf.dtype,
                comparison: *cmp,
                elements: buf.elements,
            };
            let Some(summary) = b.device_check(&check)? else {
                return Ok(None);
            };
            out.push((
                buf.name.clone(),
                summary.verdict(buf.dtype, cmp, &buf.shape, self.scales()?[i].as_deref()),
            ));
        }
        Ok(Some(out))
    }

    /// Buffer `index` of `bufs` against `want` (its bytes) under that buffer's rule (a
    /// property check's expected values, not the reference's).
    pub fn compare_buffer<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        index: usize,
        want: &[u8],
    ) -> Result<Verdict, BackendError> {
        let buf = &self.buffers[index];
        let cmp = buf.comparison.unwrap_or_default();
        let mut got = host_for_download(buf.bytes(), &buf.name).map_err(BackendError::from)?;
        b.download_bytes(&bufs[index], &mut got)?;
        rule::compare(buf.dtype, &cmp, &got, want, None, &buf.shape)
            .map_err(|e| BackendError::from(format!("buffer {}: {e}", buf.name)))
    }

    pub(super) fn axes(&self, name: &str) -> Vec<&str> {
        self.buffers
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.axes.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// One line per output: `y: PASS 0/4096 failures (allclose ...); ...`.
    pub fn describe_verdicts(&self, verdicts: &[(String, Verdict)]) -> String {
        verdicts
            .iter()
            .map(|(name, v)| format!("{name}: {}", v.describe_with(&self.axes(name))))
            .collect::<Vec<_>>()
            .join("; ")
    }
}
