//! The inputs of a case: each [`InputCase`]'s bytes for every `in` and `inout` buffer, made
//! on the host or by a device generator, always inside the buffer's domain (an integer
//! buffer's range, the rows it indexes, its offsets' total; a float range declared
//! `domain = true`), the user's `.npy` data, and the few elements a verified timed launch
//! draws again (`Perturbation`).

use super::*;

/// How the inputs are filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputCase {
    /// Small integers, exact in every dtype, so every intermediate is representable and
    /// a tolerance is irrelevant.
    Structural,
    /// Every element a different value where the dtype has enough of them (f32: the
    /// integers 0, 1, 2, ... while they are exact, then distinct bit patterns including
    /// signed zeros, subnormals, infinities and NaN payloads): a kernel that moves an
    /// element to the wrong place cannot meet an equal value there. For operations whose
    /// rules are all bitwise or exact (data movement).
    Distinct,
    /// Uniform over the buffer's range (default by dtype), from a replayable seed.
    Uniform { seed: u64 },
    /// Normal around the middle of the range (a sixth of its width per standard deviation).
    Normal { seed: u64 },
    /// Uniform over a thousand times the range: overflow without a max subtraction, say.
    Large { seed: u64 },
    /// Every element the same: contention for atomics, zero variance.
    Constant,
    /// Float inputs cycle through signed zeros, subnormals, infinities and NaN payloads,
    /// integer inputs through their extreme values (for bitwise and exact rules only:
    /// a tolerance has no answer for them).
    Special,
    /// The user's data for case `case` of `[kernel.op] cases` (`.npy` files); the inputs it
    /// does not name are uniform random from seed `case`.
    Data { case: usize },
}

impl InputCase {
    pub fn describe(self) -> String {
        match self {
            InputCase::Structural => "exact input".into(),
            InputCase::Distinct => "distinct exact input".into(),
            InputCase::Uniform { seed } => format!("random input seed {seed}"),
            InputCase::Normal { seed } => format!("normal input seed {seed}"),
            InputCase::Large { seed } => format!("large-magnitude input seed {seed}"),
            InputCase::Constant => "constant input".into(),
            InputCase::Special => "special values".into(),
            InputCase::Data { case } => format!("user data (cases[{case}])"),
        }
    }
}

/// A buffer's initial bytes from the user's `.npy` file: its dtype (bf16 as `<u2`) and its
/// element count must be the buffer's at this shape.
fn load(b: &Buffer, path: &str) -> Result<Vec<u8>, String> {
    let npy = klab_core::npy::read_file(std::path::Path::new(path))
        .and_then(|n| n.declared(b.dtype))
        .map_err(|e| format!("buffer {}: {path}: {e}", b.name))?;
    if npy.elements() != b.elements {
        return Err(format!(
            "buffer {}: {path} holds {} elements (shape {}); the buffer has {} at this shape",
            b.name,
            npy.elements(),
            klab_core::npy::shape_repr(&npy.shape),
            b.elements
        ));
    }
    Ok(npy.data)
}

/// Buffer `i`'s domain at this shape (see [`Buffer::domain`]): None for a float buffer or
/// one with neither a range nor `index_into`; an error where the domain is empty while the
/// buffer has elements, or where the dtype cannot hold it.
pub(super) fn domain_of(
    buffers: &[Buffer],
    spec: &klab_spec::declared::BufferSpec,
    i: usize,
    shape: &Shape,
    at: &str,
) -> Result<Option<[i64; 2]>, BackendError> {
    let b = &buffers[i];
    // An empty buffer holds no index (its domain may be empty too: a table of no rows).
    if !b.dtype.is_integer() || b.elements == 0 {
        return Ok(None);
    }
    let (lo, hi, from) = match (&spec.index_into, b.range) {
        (Some(target), _) => {
            let t = buffers.iter().find(|x| &x.name == target).ok_or_else(|| {
                BackendError::from(format!("buffer {}: no buffer {target}", b.name))
            })?;
            let rows = t.shape.first().copied().unwrap_or(t.elements);
            (0.0, rows as f64 - 1.0, format!("the rows of {target}"))
        }
        (None, Some([lo, hi])) => (lo, hi, "its range".to_string()),
        (None, None) => match &spec.offsets {
            Some(total) => {
                let t = total.eval(shape).map_err(|e| {
                    BackendError::from(format!("buffers.{}.offsets at {at}: {e}", b.name))
                })?;
                (0.0, t as f64, "0 to its offsets' total".to_string())
            }
            None => return Ok(None),
        },
    };
    let name = &b.name;
    if b.elements > 0 && lo > hi {
        return Err(BackendError::from(format!(
            "buffer {name}: its domain ({from}) is [{lo}, {hi}] at {at}: empty, while {name} has {} elements",
            b.elements
        )));
    }
    let holds = |v: f64| {
        b.dtype
            .int_of_bits(b.dtype.bits_of_f64(v))
            .is_some_and(|x| x as f64 == v)
    };
    if b.elements > 0 && !(holds(lo) && holds(hi)) {
        return Err(BackendError::from(format!(
            "buffer {name}: its domain ({from}) is [{lo}, {hi}] at {at}, which {} does not hold",
            b.dtype
        )));
    }
    Ok(Some([lo as i64, hi as i64]))
}

/// The buffer's range: declared, else [-1, 1] for floats, [-100, 100] for signed and
/// [0, 200] for unsigned integers.
fn range_of(b: &Buffer) -> [f64; 2] {
    let dt = b.dtype;
    b.range.unwrap_or(if dt.is_float() {
        [-1.0, 1.0]
    } else if dt.is_signed() {
        [-100.0, 100.0]
    } else {
        [0.0, 200.0]
    })
}

/// The element-wise generator of a case's input (`k`: the input's position among the
/// inputs, which makes two inputs of one shape differ, so a kernel that swaps them is
/// caught). None for the cases made otherwise: the normal case (host only) and user data.
pub(super) fn generator(b: &Buffer, k: usize, case: InputCase) -> Option<crate::inputs::Generator> {
    use crate::inputs::{distinct_cap, special_bits, stream_key, Generator, Pattern};
    if b.offsets {
        return None;
    }
    let [lo, hi] = range_of(b);
    let dt = b.dtype;
    // A float domain's cases but the random draw are made on the host.
    if b.float_domain.is_some() && !matches!(case, InputCase::Uniform { .. }) {
        return None;
    }
    let pattern = match (b.domain, case) {
        (Some(domain), _) => domain_pattern(dt, domain, k, case)?,
        (None, case) => match case {
            InputCase::Structural => Pattern::Structural,
            InputCase::Uniform { seed } | InputCase::Large { seed } => Pattern::Uniform {
                key: stream_key(seed, k as u64),
                lo,
                hi,
                scale: if matches!(case, InputCase::Large { .. }) {
                    1000.0
                } else {
                    1.0
                },
                // A float domain's draw (its only case made by a generator).
                within: b.float_domain.is_some(),
            },
            InputCase::Constant => Pattern::Constant { lo, hi },
            InputCase::Special => Pattern::Special(special_bits(dt)),
            // The transpose lab's input for f32; the index for the other dtypes.
            InputCase::Distinct if dt == Dtype::F32 => Pattern::DistinctF32 {
                rotate: (k as u64 * 7919) % b.elements.max(1),
            },
            InputCase::Distinct => Pattern::Distinct {
                cap: distinct_cap(dt),
            },
            InputCase::Normal { .. } | InputCase::Data { .. } => return None,
        },
    };
    Some(Generator {
        dtype: dt,
        elements: b.elements,
        k: k as u64,
        pattern,
    })
}

/// The pattern of an integer input with domain `[lo, hi]` under `case`: each case in the
/// domain's own terms. Exact input cycles through its first 17 values; distinct input
/// counts through it (from `lo` = 0; a domain elsewhere is drawn uniformly); random and
/// large-magnitude input are uniform over it; constant input is its middle; special values
/// are its edges (`lo`, `hi`, their neighbours, the middle). The normal case is made on the
/// host and clamped (None here).
fn domain_pattern(
    dt: Dtype,
    [lo, hi]: [i64; 2],
    k: usize,
    case: InputCase,
) -> Option<crate::inputs::Pattern> {
    use crate::inputs::{stream_key, Pattern};
    let (lo_f, hi_f) = (lo as f64, hi as f64);
    let table = |v: &[i64]| {
        let mut bits: Vec<u64> = Vec::new();
        for x in v.iter().map(|x| (*x).clamp(lo, hi)) {
            let b = dt.bits_of_f64(x as f64);
            if !bits.contains(&b) {
                bits.push(b);
            }
        }
        Pattern::Special(bits)
    };
    let uniform = |seed: u64| Pattern::Uniform {
        key: stream_key(seed, k as u64),
        lo: lo_f,
        // Floored, so an end just short of `hi + 1` includes `hi` (short by more than the
        // product's rounding for any domain narrower than 2^32, so `hi + 1` never appears).
        hi: hi_f + 1.0 - 1.0 / 65536.0,
        scale: 1.0,
        within: false,
    };
    Some(match case {
        InputCase::Structural => table(&(0..17).map(|j| lo.saturating_add(j)).collect::<Vec<_>>()),
        InputCase::Distinct if lo == 0 => Pattern::Distinct {
            cap: (hi as u64).saturating_add(1),
        },
        InputCase::Distinct => uniform(0),
        InputCase::Uniform { seed } | InputCase::Large { seed } => uniform(seed),
        // The pattern's value is (lo' + hi') / 2 + 1, floored: the domain's middle.
        InputCase::Constant => Pattern::Constant {
            lo: lo_f - 2.0,
            hi: hi_f,
        },
        InputCase::Special => {
            let mid = lo + (hi - lo) / 2;
            table(&[lo, hi, lo.saturating_add(1), hi.saturating_sub(1), mid, 0])
        }
        InputCase::Normal { .. } | InputCase::Data { .. } => return None,
    })
}

/// `[lo, hi]`, the buffer's domain as it reads in a message.
fn describe_domain(b: &Buffer) -> String {
    match b.domain {
        Some([lo, hi]) => format!("[{lo}, {hi}]"),
        None => "(none)".into(),
    }
}

/// The first element of `bytes` outside buffer `b`'s domain, as (element, value). Row
/// offsets must also start at 0, never decrease, and end at the domain's end.
pub(super) fn outside_domain(b: &Buffer, bytes: &[u8]) -> Option<(u64, i128)> {
    let [lo, hi] = b.domain?;
    let n = bytes.len() / b.dtype.size_bytes();
    let mut previous = i128::MIN;
    (0..n).find_map(|i| {
        let v = b.dtype.to_i128(bytes, i)?;
        let out = v < i128::from(lo) || v > i128::from(hi);
        let misplaced = b.offsets
            && (v < previous || (i == 0 && v != 0) || (i + 1 == n && n > 1 && v != i128::from(hi)));
        previous = v;
        (out || misplaced).then_some((i as u64, v))
    })
}

/// Row offsets for a case: `elements - 1` rows sharing `total` entries, non-decreasing from
/// 0 to `total`. Exact input spreads them evenly, distinct input in growing rows, random
/// input (also large-magnitude, normal and user cases without a file) at random with about
/// a fifth of the rows empty, constant input puts them all in the last row and special
/// values all in the first.
fn offsets_fill(b: &Buffer, k: usize, case: InputCase, out: &mut [u8]) {
    let n = b.elements as usize;
    let total = b.domain.map_or(0, |d| d[1]).max(0);
    if n == 0 {
        return;
    }
    let rows = (n - 1) as i64;
    let even = |i: i64| (i as i128 * total as i128 / rows.max(1) as i128) as i64;
    let values: Vec<i64> = match case {
        InputCase::Structural => (0..=rows).map(even).collect(),
        InputCase::Distinct => (0..=rows)
            .map(|i| (total as f64 * (i as f64 / rows.max(1) as f64).powi(2)) as i64)
            .collect(),
        InputCase::Constant => (0..=rows)
            .map(|i| if i == rows { total } else { 0 })
            .collect(),
        InputCase::Special => (0..=rows).map(|i| if i == 0 { 0 } else { total }).collect(),
        InputCase::Uniform { seed } | InputCase::Large { seed } | InputCase::Normal { seed } => {
            random_offsets(rows, total, crate::inputs::stream_key(seed, k as u64))
        }
        InputCase::Data { case } => random_offsets(
            rows,
            total,
            crate::inputs::stream_key(case as u64, k as u64),
        ),
    };
    for (i, v) in values.into_iter().enumerate() {
        // rows == 0 holds one offset, 0: no entries can be placed.
        let v = if rows == 0 { 0 } else { v.clamp(0, total) };
        b.dtype.write_f64(out, i, v as f64);
    }
}

/// `rows + 1` offsets from 0 to `total` with random row lengths (about a fifth empty).
fn random_offsets(rows: i64, total: i64, key: u64) -> Vec<i64> {
    let weight = |r: i64| {
        let u = (klab_core::stats::splitmix_at(key, r as u64) >> 11) as f64 / (1u64 << 53) as f64;
        if u < 0.2 {
            0.0
        } else {
            u
        }
    };
    let weights: Vec<f64> = (0..rows).map(weight).collect();
    let sum: f64 = weights.iter().sum();
    let mut out = Vec::with_capacity(rows as usize + 1);
    let mut acc = 0.0;
    out.push(0);
    for w in &weights {
        acc += w;
        let v = if sum > 0.0 {
            (acc / sum * total as f64).floor() as i64
        } else {
            0
        };
        out.push(v.min(total));
    }
    if let Some(last) = out.last_mut() {
        *last = total;
    }
    out
}

/// The buffer's initial bytes for a case (see [`generator`]; user data is loaded by the
/// workload, and a buffer the case names no file for is uniform).
pub(super) fn fill(b: &Buffer, k: usize, case: InputCase) -> Result<Vec<u8>, String> {
    let mut out = host_zeroed(b.bytes(), &b.name)?;
    if b.offsets {
        offsets_fill(b, k, case, &mut out);
        return Ok(out);
    }
    match case {
        InputCase::Data { case } => return fill(b, k, InputCase::Uniform { seed: case as u64 }),
        InputCase::Normal { seed } => {
            let [lo, hi] = match (b.domain, b.float_domain) {
                (Some([lo, hi]), _) => [lo as f64, hi as f64],
                (None, Some(d)) => d,
                (None, None) => range_of(b),
            };
            let key = crate::inputs::stream_key(seed, k as u64);
            crate::inputs::normal(b.dtype, key, (lo + hi) / 2.0, (hi - lo) / 6.0, &mut out);
            if b.domain.is_some() || b.float_domain.is_some() {
                let size = b.dtype.size_bytes();
                klab_core::par::for_chunks(&mut out, size, |_, chunk| {
                    for j in 0..chunk.len() / size {
                        let v = b.dtype.to_f64(chunk, j);
                        match b.float_domain {
                            Some(_) => {
                                b.dtype
                                    .write_bits(chunk, j, b.dtype.bits_within(v, [lo, hi]))
                            }
                            None => b.dtype.write_f64(chunk, j, v.clamp(lo, hi)),
                        }
                    }
                });
            }
        }
        _ => match (b.float_domain, generator(b, k, case)) {
            (_, Some(g)) => g.fill(&mut out),
            (Some(domain), None) => float_domain_fill(b.dtype, domain, k, case, &mut out),
            (None, None) => unreachable!("every other case has a generator"),
        },
    }
    Ok(out)
}

/// A float input's case inside its domain `[lo, hi]` (`domain = true`): exact input is 17
/// evenly spaced values from lo to hi, distinct input 2^20 of them, constant input the
/// middle, large-magnitude input uniform over the whole domain (it cannot go past it), and
/// the special values are the edges, their inner neighbours, the middle and the signed
/// zeros where the domain holds 0.
fn float_domain_fill(dt: Dtype, [lo, hi]: [f64; 2], k: usize, case: InputCase, out: &mut [u8]) {
    let at = |t: f64| lo + (hi - lo) * t;
    let special: Vec<f64> = {
        let mut v = vec![lo, hi, at(0.5), at(1.0 / 1024.0), at(1.0 - 1.0 / 1024.0)];
        if lo <= 0.0 && 0.0 <= hi {
            v.extend([0.0, -0.0]);
        }
        v
    };
    let k = k as u64;
    let value = |i: u64| -> f64 {
        match case {
            InputCase::Structural => at(((i * 7 + 3 + 5 * k) % 17) as f64 / 16.0),
            InputCase::Distinct => {
                at((i.wrapping_add(k.wrapping_mul(7919)) % (1 << 20)) as f64 / (1u64 << 20) as f64)
            }
            InputCase::Constant => at(0.5),
            InputCase::Special => special[((i + k) % special.len() as u64) as usize],
            InputCase::Large { seed } => at(crate::inputs::unit_at(
                crate::inputs::stream_key(seed ^ 0x4c41_5247, k),
                i,
            )),
            // Made elsewhere (the random draw on the device, normal and data by `fill`).
            InputCase::Uniform { .. } | InputCase::Normal { .. } | InputCase::Data { .. } => {
                at(0.5)
            }
        }
    };
    // Distinct input where the domain holds at most 2^20 values of the dtype (every f16 and
    // bf16 domain, a narrow f32 one): each of them in turn, so that neighbours differ; 2^20
    // evenly spaced points of [-1, 1] fall on a few hundred f16 values near -1.
    let enumerated = match (case, dt.keys_within([lo, hi])) {
        (InputCase::Distinct, Some((first, last))) if last - first < 1 << 20 => {
            Some((first, last - first + 1))
        }
        _ => None,
    };
    let bits = |i: u64| match enumerated {
        Some((first, count)) => {
            let step = i128::from(i.wrapping_add(k.wrapping_mul(7919))) % count;
            dt.bits_of_order_key(first + step)
        }
        None => dt.bits_within(value(i), [lo, hi]),
    };
    let size = dt.size_bytes();
    klab_core::par::for_chunks(out, size, |c, chunk| {
        let base = (c * klab_core::par::CHUNK_ELEMENTS) as u64;
        for j in 0..chunk.len() / size {
            dt.write_bits(chunk, j, bits(base + j as u64));
        }
    });
}

/// Copy [`crate::workload::PERTURBED_ELEMENTS`] elements of `size` bytes, at positions drawn from `seed`,
/// from `drawn` into `held`.
fn perturb(held: &mut [u8], drawn: &[u8], size: usize, seed: u64) {
    let elements = (held.len() / size.max(1)) as u64;
    if elements == 0 {
        return;
    }
    for i in 0..crate::workload::PERTURBED_ELEMENTS {
        let at = crate::inputs::drawn_position(seed, i, elements) as usize * size;
        held[at..at + size].copy_from_slice(&drawn[at..at + size]);
    }
}

impl DeclaredWorkload {
    /// Each buffer's initial bytes (inputs and in-out buffers; empty for the others).
    pub(super) fn inputs(&self) -> Result<&[Vec<u8>], BackendError> {
        self.inputs
            .get_or_init(|| {
                // `k` counts the inputs (so the first input is the same whatever the
                // outputs before it), and makes two inputs of one shape differ.
                let mut k = 0;
                self.buffers
                    .iter()
                    .map(|b| match (b.role, self.case) {
                        (Role::Out | Role::Scratch, _) => Ok(Vec::new()),
                        (_, case) => {
                            k += 1;
                            match case {
                                InputCase::Data { case } => {
                                    match self.op.spec.cases[case].inputs.get(&b.name) {
                                        Some(path) => load(b, path).and_then(|bytes| {
                                            match outside_domain(b, &bytes) {
                                                Some((i, v)) => Err(format!(
                                                    "buffer {}: {path}: element {i} holds {v}, outside the buffer's domain {}",
                                                    b.name,
                                                    describe_domain(b)
                                                )),
                                                None => Ok(bytes),
                                            }
                                        }),
                                        None => {
                                            fill(b, k - 1, InputCase::Uniform { seed: case as u64 })
                                        }
                                    }
                                }
                                _ => fill(b, k - 1, case),
                            }
                        }
                    })
                    .collect::<Result<Vec<_>, String>>()
                    .and_then(|mut inputs| {
                        if let Some(p) = self.perturbation {
                            self.perturb_on_host(&mut inputs, p)?;
                        }
                        self.within_domains(inputs)
                    })
            })
            .as_deref()
            .map_err(|e| BackendError::from(e.clone()))
    }

    /// `inputs` (the case's) with `p`'s elements drawn again.
    fn perturb_on_host(&self, inputs: &mut [Vec<u8>], p: Perturbation) -> Result<(), String> {
        let mut k = 0;
        for (b, held) in self.buffers.iter().zip(inputs.iter_mut()) {
            if !matches!(b.role, Role::In | Role::Inout) {
                continue;
            }
            if !b.offsets {
                let drawn = fill(b, k, p.case)?;
                perturb(held, &drawn, b.dtype.size_bytes(), p.seed ^ k as u64);
            }
            k += 1;
        }
        Ok(())
    }

    /// Input `i`, just generated on the device, with the perturbation's elements drawn
    /// again there: the other case made in a buffer of its own, then the drawn positions
    /// copied over.
    fn perturb_on_device<B: Backend>(
        &self,
        b: &mut B,
        d: &mut B::Buffer,
        i: usize,
    ) -> Result<(), BackendError> {
        let (Some(p), buf) = (self.perturbation, &self.buffers[i]) else {
            return Ok(());
        };
        if !matches!(buf.role, Role::In | Role::Inout) || buf.offsets {
            return Ok(());
        }
        let k = self.input_number(i);
        let mut other = b.alloc_bytes(buf.bytes())?;
        let made = match generator(buf, k, p.case) {
            Some(g) => b.device_generate(&mut other, &g)?,
            None => false,
        };
        if !made {
            let bytes = fill(buf, k, p.case).map_err(BackendError::from)?;
            b.upload_bytes(&mut other, &bytes)?;
        }
        let size = buf.dtype.size_bytes();
        let key = p.seed ^ k as u64;
        b.copy_elements(
            d,
            &other,
            buf.elements,
            size,
            key,
            crate::workload::PERTURBED_ELEMENTS,
        )
    }

    /// `inputs` when every index holds a value of its domain; else klab's own bug (a
    /// generated value the reference and the kernel would read out of bounds), said so.
    pub(super) fn within_domains(&self, inputs: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, String> {
        for (b, bytes) in self.buffers.iter().zip(&inputs) {
            if let Some((i, v)) = outside_domain(b, bytes) {
                return Err(format!(
                    "klab's bug: the {} made {v} at element {i} of {}, outside its domain {}; please report this line",
                    self.case.describe(),
                    b.name,
                    describe_domain(b)
                ));
            }
        }
        Ok(inputs)
    }

    /// A new buffer holding input `i` as the slots get it.
    pub(super) fn input_copy<B: Backend>(
        &self,
        b: &mut B,
        i: usize,
        on_device: bool,
    ) -> Result<B::Buffer, BackendError> {
        let mut d = b.alloc_bytes(self.buffers[i].bytes())?;
        self.put_input(b, &mut d, i, on_device)?;
        Ok(d)
    }

    /// The case a verified sample on new inputs draws from `seed`: the block's distribution
    /// (normal and large-magnitude keep theirs, every other case is uniform over the range).
    /// `None` for the user's own data.
    pub(super) fn redrawn(&self, seed: u64) -> Option<InputCase> {
        if self.given_inputs || matches!(self.case, InputCase::Data { .. }) {
            return None;
        }
        Some(match self.case {
            InputCase::Normal { .. } => InputCase::Normal { seed },
            InputCase::Large { .. } => InputCase::Large { seed },
            _ => InputCase::Uniform { seed },
        })
    }

    /// Whether the inputs are generated on the device: the policy chooses the device
    /// checker, every input has a device generator, and every compared output's expected
    /// values come from an input (so the host needs the inputs only to cross-check).
    pub fn inputs_on_device<B: Backend>(&self, b: &B) -> bool {
        if self.given_inputs
            || self.sample.is_some()
            || b.verify_policy().checker != crate::verify::Checker::Device
        {
            return false;
        }
        let maps = self.reference.device_expectation(&self.shape);
        self.buffers
            .iter()
            .enumerate()
            .all(|(i, buf)| match buf.role {
                Role::In | Role::Inout => self.generator_of(i).is_some(),
                _ if buf.comparison.is_some() => maps.iter().any(|m| m.0 == i),
                _ => true,
            })
    }

    /// Buffer `i`'s device generator, if it is an input the case can make on a device.
    fn generator_of(&self, i: usize) -> Option<crate::inputs::Generator> {
        generator(&self.buffers[i], self.input_number(i), self.case)
    }

    /// Buffer `i`'s number among the inputs (in and in-out buffers), which keys its values.
    fn input_number(&self, i: usize) -> usize {
        self.buffers[..i]
            .iter()
            .filter(|b| matches!(b.role, Role::In | Role::Inout))
            .count()
    }

    /// Set input buffer `i` on the device: generated there when [`Self::inputs_on_device`],
    /// else uploaded from the host's bytes.
    pub(super) fn put_input<B: Backend>(
        &self,
        b: &mut B,
        d: &mut B::Buffer,
        i: usize,
        on_device: bool,
    ) -> Result<(), BackendError> {
        if on_device {
            if let Some(g) = self.generator_of(i) {
                if b.device_generate(d, &g)? {
                    return self.perturb_on_device(b, d, i);
                }
            }
        }
        let inputs = self.inputs()?;
        b.upload_bytes(d, &inputs[i])
    }
}
