//! How an input buffer's elements are made from the seed, one element at a time.
//!
//! A [`Generator`] gives element `i` of one input from `i` alone (a counter-based stream:
//! SplitMix64's output at position `i` of the input's key), so any part of a buffer can be
//! made independently, on any number of host threads or on the device. The device does
//! exactly this in `kernels/verify.cu` (`klab_generate`) from [`Generator::device_words`];
//! both sides use the same correctly rounded f64 operations in the same order, so the
//! bytes are identical (tested on the CPU through the emulation, and on the GPU).
//!
//! The normal-distribution case needs a logarithm and a cosine, which the device's math
//! library does not round as the host's does: it is made on the host only ([`normal`]).

use klab_core::dtype::Dtype;
use klab_core::stats::splitmix_at;

/// What one generated input holds (the cases of [`crate::declared::InputCase`] that a
/// device can make).
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// Small integers `((i * 7 + 3 + 5 k) % 17)`, less 8 for signed and float dtypes.
    Structural,
    /// `(lo + (hi - lo) u) * scale` for u uniform in [0, 1) (53 bits), floored for
    /// integer dtypes. `within` (a float domain's draw, scale 1): a value rounding put past
    /// an end is stepped back inside ([`Dtype::bits_within`]).
    Uniform {
        key: u64,
        lo: f64,
        hi: f64,
        scale: f64,
        within: bool,
    },
    /// `(lo + hi) / 2 + 1`, floored for integer dtypes.
    Constant { lo: f64, hi: f64 },
    /// The dtype's special bit patterns in turn, from position `k`.
    Special(Vec<u64>),
    /// The transpose lab's f32 input: exact integers up to 2^24 elements, else distinct
    /// 32-bit patterns with special values patched in; element i holds position
    /// `(i + rotate) % n` of it.
    DistinctF32 { rotate: u64 },
    /// The index, offset by `7919 k` and wrapped to the integers the dtype holds exactly.
    Distinct { cap: u64 },
}

/// One input's generator.
#[derive(Debug, Clone, PartialEq)]
pub struct Generator {
    pub dtype: Dtype,
    pub elements: u64,
    /// The input's position among the kernel's inputs (two inputs of one shape differ).
    pub k: u64,
    pub pattern: Pattern,
}

/// The key of input `k`'s random stream under `seed`.
pub fn stream_key(seed: u64, k: u64) -> u64 {
    seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The position of element `j` of `count` drawn from `key` in a buffer of `elements`
/// (`elements` > 0): the elements a perturbation replaces (kernels/verify.cu's
/// klab_copy_elements picks the same).
pub fn drawn_position(key: u64, j: u64, elements: u64) -> u64 {
    splitmix_at(key, j) % elements
}

/// Pseudo-random bytes: 8-byte word `w` of `out` is [`splitmix_at`]`(seed, w)` in
/// little-endian order (the tail takes the low bytes of the next word). klab's device
/// scramble (`klab_scramble` in kernels/verify.cu) writes the same bytes.
pub fn random_bytes(seed: u64, out: &mut [u8]) {
    for (w, chunk) in out.chunks_mut(8).enumerate() {
        let word = splitmix_at(seed, w as u64).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// Uniform in [0, 1) with 53 bits, from position `i` of stream `key`.
pub fn unit_at(key: u64, i: u64) -> f64 {
    (splitmix_at(key, i) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The integers a dtype holds exactly, as the modulus of [`Pattern::Distinct`]: 2^(mantissa
/// + 1) for floats, 2^bits for narrow integers, 2^64 - 1 for 64-bit ones.
pub fn distinct_cap(dt: Dtype) -> u64 {
    match dt {
        Dtype::F16 => 1 << 11,
        Dtype::Bf16 => 1 << 8,
        Dtype::F32 => 1 << 24,
        Dtype::F64 => 1 << 53,
        _ if dt.bit_width() == 64 => u64::MAX,
        _ => 1 << dt.bit_width(),
    }
}

/// The special bit patterns of a dtype: for floats +0, -0, the smallest subnormal (both
/// signs), 1, -1, +inf, -inf and two NaN payloads; for integers 0, 1, the maximum, the
/// minimum and (signed) -1.
pub fn special_bits(dt: Dtype) -> Vec<u64> {
    let bits = dt.bit_width();
    let sign = 1u64 << (bits - 1);
    if dt.is_float() {
        let one = dt.bits_of_f64(1.0);
        let inf = dt.bits_of_f64(f64::INFINITY);
        let mantissa = match dt {
            Dtype::F16 => 10,
            Dtype::Bf16 => 7,
            Dtype::F32 => 23,
            _ => 52,
        };
        let quiet = 1u64 << (mantissa - 1);
        vec![
            0,
            sign,
            1,
            sign | 1,
            one,
            sign | one,
            inf,
            sign | inf,
            inf | 1,
            sign | inf | quiet | 5,
        ]
    } else {
        let all = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        if dt.is_signed() {
            vec![0, 1, sign - 1, sign, all]
        } else {
            vec![0, 1, all, all - 1]
        }
    }
}

// `kernels/verify.cu`'s generator parameter words (GP_*) and patterns (GEN_*).
const GP_WORDS: usize = 16;
const GEN_STRUCTURAL: u64 = 0;
const GEN_UNIFORM: u64 = 1;
const GEN_CONSTANT: u64 = 2;
const GEN_SPECIAL: u64 = 3;
const GEN_DISTINCT_F32: u64 = 4;
const GEN_DISTINCT: u64 = 5;

impl Generator {
    /// Element `i`'s bits.
    pub fn bits(&self, i: u64) -> u64 {
        let dt = self.dtype;
        let whole = |v: f64| if dt.is_float() { v } else { v.floor() };
        match &self.pattern {
            Pattern::Structural => {
                let v = (i.wrapping_mul(7).wrapping_add(3).wrapping_add(5 * self.k) % 17) as f64;
                let v = if dt.is_signed() || dt.is_float() {
                    v - 8.0
                } else {
                    v
                };
                dt.bits_of_f64(v)
            }
            Pattern::Uniform {
                key,
                lo,
                hi,
                scale,
                within,
            } => {
                let v = (lo + (hi - lo) * unit_at(*key, i)) * scale;
                if *within {
                    dt.bits_within(v, [*lo, *hi])
                } else {
                    dt.bits_of_f64(whole(v))
                }
            }
            Pattern::Constant { lo, hi } => dt.bits_of_f64(whole((lo + hi) / 2.0 + 1.0)),
            Pattern::Special(table) => table[((i + self.k) % table.len() as u64) as usize],
            Pattern::DistinctF32 { rotate } => {
                let j = (i + rotate) % self.elements.max(1);
                u64::from(klab_spec::ops::transpose::base_word(j, self.elements))
            }
            Pattern::Distinct { cap } => {
                let v = i.wrapping_add(self.k.wrapping_mul(7919)) % cap;
                if dt.is_float() {
                    dt.bits_of_f64(v as f64)
                } else {
                    v
                }
            }
        }
    }

    /// Words written over the pattern after it is generated, as (element, bits): the
    /// distinct f32 input's special values (a few dozen at most; none for the others).
    pub fn patches(&self) -> Vec<(u64, u64)> {
        let Pattern::DistinctF32 { rotate } = self.pattern else {
            return Vec::new();
        };
        let n = self.elements;
        klab_spec::ops::transpose::distinct_patches(n)
            .into_iter()
            // Position p of the pattern is element (p - rotate) mod n.
            .map(|(p, w)| ((p + n - rotate % n.max(1)) % n.max(1), u64::from(w)))
            .collect()
    }

    /// The whole buffer, little-endian, made on the host's cores.
    pub fn fill(&self, out: &mut [u8]) {
        let size = self.dtype.size_bytes();
        klab_core::par::for_chunks(out, size, |c, chunk| {
            let base = (c * klab_core::par::CHUNK_ELEMENTS) as u64;
            for j in 0..chunk.len() / size {
                self.dtype.write_bits(chunk, j, self.bits(base + j as u64));
            }
        });
        for (i, bits) in self.patches() {
            self.dtype.write_bits(out, i as usize, bits);
        }
    }

    /// `klab_generate`'s parameter words.
    pub fn device_words(&self) -> Vec<u64> {
        let mut p = vec![0u64; GP_WORDS];
        p[0] = self.elements;
        p[1] = crate::verify::dtype_code(self.dtype);
        p[7] = self.k;
        match &self.pattern {
            Pattern::Structural => p[2] = GEN_STRUCTURAL,
            Pattern::Uniform {
                key,
                lo,
                hi,
                scale,
                within,
            } => {
                p[2] = GEN_UNIFORM;
                p[3] = *key;
                p[4] = lo.to_bits();
                p[5] = hi.to_bits();
                p[6] = scale.to_bits();
                p[10] = u64::from(*within);
            }
            Pattern::Constant { lo, hi } => {
                p[2] = GEN_CONSTANT;
                p[4] = lo.to_bits();
                p[5] = hi.to_bits();
            }
            Pattern::Special(table) => {
                p[2] = GEN_SPECIAL;
                p[9] = table.len() as u64;
                p.extend(table);
            }
            Pattern::DistinctF32 { rotate } => {
                p[2] = GEN_DISTINCT_F32;
                p[8] = *rotate;
            }
            Pattern::Distinct { cap } => {
                p[2] = GEN_DISTINCT;
                p[4] = *cap;
            }
        }
        p
    }
}

/// The normal case (host only): Box-Muller on positions 2i and 2i + 1 of the stream,
/// around `mid` with standard deviation `sd`, floored for integer dtypes.
pub fn normal(dtype: Dtype, key: u64, mid: f64, sd: f64, out: &mut [u8]) {
    let size = dtype.size_bytes();
    klab_core::par::for_chunks(out, size, |c, chunk| {
        let base = (c * klab_core::par::CHUNK_ELEMENTS) as u64;
        for j in 0..chunk.len() / size {
            let i = base + j as u64;
            // 1 - u keeps the logarithm finite.
            let (u1, u2) = (1.0 - unit_at(key, 2 * i), unit_at(key, 2 * i + 1));
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let v = mid + sd * z;
            let v = if dtype.is_float() { v } else { v.floor() };
            dtype.write_f64(chunk, j, v);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_stream_is_splitmix64_from_the_key() {
        // SplitMix64 from state 0: the published first outputs.
        assert_eq!(splitmix_at(0, 0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix_at(0, 1), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(splitmix_at(0, 2), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn a_generated_buffer_is_its_elements_one_by_one() {
        let g = Generator {
            dtype: Dtype::F16,
            elements: 3 << 20,
            k: 1,
            pattern: Pattern::Uniform {
                key: stream_key(5, 1),
                lo: -1.0,
                hi: 1.0,
                scale: 1.0,
                within: false,
            },
        };
        let mut out = vec![0u8; (3 << 20) * 2];
        g.fill(&mut out);
        for i in [0u64, 1, (1 << 20) - 1, 1 << 20, (3 << 20) - 1] {
            assert_eq!(Dtype::F16.bits(&out, i as usize), g.bits(i));
        }
    }
}
