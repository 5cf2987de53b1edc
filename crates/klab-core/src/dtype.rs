//! Element types of declared buffers, and element access over little-endian bytes.
//!
//! A manifest declares every buffer with a [`Dtype`]; outputs are compared, inputs
//! generated and `.npy` files read and written through it. Elements are always stored
//! little-endian (the layout of every GPU klab targets and of NumPy's `<` descriptors).
//!
//! Half precision is converted by hand (no dependency): [`f16_to_f64`], [`f16_from_f64`],
//! [`bf16_to_f32`], [`bf16_from_f32`] and friends. Decoding is exact (subnormals,
//! infinities and NaN payloads included); encoding rounds to nearest, ties to even,
//! directly from the f64 value (never through f32, which would round twice).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The element type of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits.
    F16,
    /// bfloat16: the upper half of a float32 (1 sign, 8 exponent, 7 mantissa bits).
    Bf16,
    F32,
    F64,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
}

/// A dtype name that is not one of [`Dtype::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype '{0}': expected one of f16, bf16, f32, f64, i8, u8, i16, u16, i32, u32, i64, u64")]
pub struct UnknownDtype(pub String);

impl Dtype {
    /// Every dtype, floats first.
    pub const ALL: [Dtype; 12] = [
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F32,
        Dtype::F64,
        Dtype::I8,
        Dtype::U8,
        Dtype::I16,
        Dtype::U16,
        Dtype::I32,
        Dtype::U32,
        Dtype::I64,
        Dtype::U64,
    ];

    /// The lowercase name (`f16`, `bf16`, ..., `u64`), as manifests and serde spell it.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
            Dtype::I8 => "i8",
            Dtype::U8 => "u8",
            Dtype::I16 => "i16",
            Dtype::U16 => "u16",
            Dtype::I32 => "i32",
            Dtype::U32 => "u32",
            Dtype::I64 => "i64",
            Dtype::U64 => "u64",
        }
    }

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 => 1,
            Dtype::F16 | Dtype::Bf16 | Dtype::I16 | Dtype::U16 => 2,
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::F64 | Dtype::I64 | Dtype::U64 => 8,
        }
    }

    /// Whether the dtype is a floating-point format.
    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::Bf16 | Dtype::F32 | Dtype::F64)
    }

    /// Whether the dtype is an integer format.
    pub fn is_integer(self) -> bool {
        !self.is_float()
    }

    /// Whether values can be negative (every float, and the `i` integers).
    pub fn is_signed(self) -> bool {
        !matches!(self, Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64)
    }

    /// The C type a host reference function takes for this dtype.
    ///
    /// C has no portable half-precision type, so f16 and bf16 elements are passed as
    /// `uint16_t` holding the raw bit pattern; the reference converts them itself.
    pub fn c_type(self) -> &'static str {
        match self {
            Dtype::F16 | Dtype::Bf16 | Dtype::U16 => "uint16_t",
            Dtype::F32 => "float",
            Dtype::F64 => "double",
            Dtype::I8 => "int8_t",
            Dtype::U8 => "uint8_t",
            Dtype::I16 => "int16_t",
            Dtype::I32 => "int32_t",
            Dtype::U32 => "uint32_t",
            Dtype::I64 => "int64_t",
            Dtype::U64 => "uint64_t",
        }
    }

    /// The NumPy `.npy` descriptor (little-endian; `|` for one-byte types).
    ///
    /// NumPy has no bfloat16, so bf16 is stored as `<u2`: the raw bit patterns. Reading
    /// such a file gives [`Dtype::U16`]; the caller that knows the data is bf16 (from its
    /// manifest) reinterprets it (see `npy::Npy::declared`).
    pub fn npy_descr(self) -> &'static str {
        match self {
            Dtype::F16 => "<f2",
            Dtype::Bf16 | Dtype::U16 => "<u2",
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
            Dtype::I8 => "|i1",
            Dtype::U8 => "|u1",
            Dtype::I16 => "<i2",
            Dtype::I32 => "<i4",
            Dtype::U32 => "<u4",
            Dtype::I64 => "<i8",
            Dtype::U64 => "<u8",
        }
    }

    /// The dtype of a little-endian NumPy descriptor, or `None` for anything else
    /// (big-endian, structured, complex, bool, ...). `<u2` gives [`Dtype::U16`] (never
    /// bf16). One-byte types are accepted with `|`, `<` or `=`, as NumPy itself accepts them.
    pub fn from_npy_descr(descr: &str) -> Option<Dtype> {
        let (order, code) = descr.split_at_checked(1)?;
        let dtype = match code {
            "f2" => Dtype::F16,
            "f4" => Dtype::F32,
            "f8" => Dtype::F64,
            "i1" => Dtype::I8,
            "u1" => Dtype::U8,
            "i2" => Dtype::I16,
            "u2" => Dtype::U16,
            "i4" => Dtype::I32,
            "u4" => Dtype::U32,
            "i8" => Dtype::I64,
            "u8" => Dtype::U64,
            _ => return None,
        };
        let ok = match order {
            "<" => true,
            "|" | "=" => dtype.size_bytes() == 1,
            _ => false,
        };
        ok.then_some(dtype)
    }

    /// Machine epsilon of a float dtype (the spacing of values at 1.0): 2^-10 for f16,
    /// 2^-7 for bf16, 2^-23 for f32, 2^-52 for f64. `None` for integers.
    pub fn eps(self) -> Option<f64> {
        let m = self.mantissa_bits()?;
        Some(pow2(-(m as i32)))
    }

    /// The value of this dtype nearest `v`: what a kernel parameter of this dtype receives
    /// when klab passes it `v` ([`Dtype::bits_of_f64`]'s rounding, then decoded exactly).
    pub fn nearest(self, v: f64) -> f64 {
        self.value_of_bits(self.bits_of_f64(v))
    }

    /// The largest finite value of a float dtype (65504 for f16); `None` for integers.
    pub fn largest_finite(self) -> Option<f64> {
        let (e, m) = self.float_layout()?;
        // The largest exponent below the all-ones of infinity, every mantissa bit set.
        let bits = ((1u64 << e) - 2) << m | ((1u64 << m) - 1);
        Some(self.value_of_bits(bits))
    }

    /// (exponent bits, stored mantissa bits) of a float dtype.
    fn float_layout(self) -> Option<(u32, u32)> {
        match self {
            Dtype::F16 => Some((5, 10)),
            Dtype::Bf16 => Some((8, 7)),
            Dtype::F32 => Some((8, 23)),
            Dtype::F64 => Some((11, 52)),
            _ => None,
        }
    }

    fn mantissa_bits(self) -> Option<u32> {
        self.float_layout().map(|(_, m)| m)
    }

    /// The element's raw bits, zero-extended. Panics if element `i` is out of range of
    /// `bytes`, like slice indexing.
    pub fn bits(self, bytes: &[u8], i: usize) -> u64 {
        let n = self.size_bytes();
        let start = i.checked_mul(n).expect("element index overflows usize");
        let mut word = [0u8; 8];
        word[..n].copy_from_slice(&bytes[start..start + n]);
        u64::from_le_bytes(word)
    }

    /// Store the low `size_bytes()` bytes of `bits` as element `i` (higher bits are
    /// dropped). Panics if element `i` is out of range of `out`.
    pub fn write_bits(self, out: &mut [u8], i: usize, bits: u64) {
        let n = self.size_bytes();
        let start = i.checked_mul(n).expect("element index overflows usize");
        out[start..start + n].copy_from_slice(&bits.to_le_bytes()[..n]);
    }

    /// The value of a float with raw bits `bits` (exact; NaN payloads kept where f64 can
    /// hold them), or the integer's value for integer dtypes (exact up to 2^53 in
    /// magnitude, rounded to nearest beyond, for i64 and u64).
    pub fn value_of_bits(self, bits: u64) -> f64 {
        match self {
            Dtype::F64 => f64::from_bits(bits),
            // Exact; NaNs go the long way so that their payload survives by construction.
            Dtype::F32 if !self.is_nan_bits(bits) => f64::from(f32::from_bits(bits as u32)),
            Dtype::F16 | Dtype::Bf16 | Dtype::F32 => {
                let (e, m) = self.float_layout().expect("float");
                decode_narrow(bits, e, m)
            }
            _ => self.int_of_bits(bits).expect("integer") as f64,
        }
    }

    /// The integer value of raw bits, sign-extended for signed dtypes; `None` for floats.
    pub fn int_of_bits(self, bits: u64) -> Option<i128> {
        let v = match self {
            Dtype::I8 => i128::from(bits as u8 as i8),
            Dtype::I16 => i128::from(bits as u16 as i16),
            Dtype::I32 => i128::from(bits as u32 as i32),
            Dtype::I64 => i128::from(bits as i64),
            Dtype::U8 => i128::from(bits as u8),
            Dtype::U16 => i128::from(bits as u16),
            Dtype::U32 => i128::from(bits as u32),
            Dtype::U64 => i128::from(bits),
            _ => return None,
        };
        Some(v)
    }

    /// Element `i` as f64 (see [`Dtype::value_of_bits`]). f16 and bf16 decode exactly,
    /// subnormals, infinities and NaN included.
    pub fn to_f64(self, bytes: &[u8], i: usize) -> f64 {
        self.value_of_bits(self.bits(bytes, i))
    }

    /// Element `i` of an integer dtype; `None` for floats.
    pub fn to_i128(self, bytes: &[u8], i: usize) -> Option<i128> {
        self.int_of_bits(self.bits(bytes, i))
    }

    /// The raw bits that encode `v` in this dtype.
    ///
    /// - Floats round to nearest, ties to even (f64 is exact); values beyond the largest
    ///   finite overflow to infinity as IEEE 754 rounding says; a NaN keeps the top
    ///   mantissa bits of its payload (set to the quiet bit if none survive) and its sign.
    /// - Integers round to nearest, ties to even, then saturate to the dtype's range; NaN
    ///   writes 0. Saturation (not wrapping) so a generator asking for 300 in a u8 gets
    ///   255, the value nearest what it asked for.
    pub fn bits_of_f64(self, v: f64) -> u64 {
        match self {
            Dtype::F64 => v.to_bits(),
            Dtype::F16 | Dtype::Bf16 | Dtype::F32 => {
                let (e, m) = self.float_layout().expect("float");
                encode_narrow(v, e, m)
            }
            _ => {
                // `as` from float to int saturates and sends NaN to 0.
                let r = v.round_ties_even();
                match self {
                    Dtype::I8 => r as i8 as u8 as u64,
                    Dtype::U8 => r as u8 as u64,
                    Dtype::I16 => r as i16 as u16 as u64,
                    Dtype::U16 => r as u16 as u64,
                    Dtype::I32 => r as i32 as u32 as u64,
                    Dtype::U32 => r as u32 as u64,
                    Dtype::I64 => r as i64 as u64,
                    Dtype::U64 => r as u64,
                    _ => unreachable!("floats handled above"),
                }
            }
        }
    }

    /// `v` as a float of this dtype inside `[lo, hi]`: rounded ([`Dtype::bits_of_f64`]), then
    /// stepped one value inwards where the rounding left the range (an f16 or bf16 end such
    /// as 0.1 rounds past itself). A range that holds no value of the dtype keeps the
    /// nearest one. kernels/verify.cu's `within` steps a generated value the same way.
    pub fn bits_within(self, v: f64, [lo, hi]: [f64; 2]) -> u64 {
        let bits = self.bits_of_f64(v.clamp(lo, hi));
        let sign = 1u64 << (8 * self.size_bytes() - 1);
        let magnitude = bits & !sign;
        // The next value up or down, in sign-magnitude order (either zero steps to the
        // smallest value of the other side).
        let up = match (bits & sign != 0, magnitude) {
            (_, 0) => 1,
            (false, _) => bits + 1,
            (true, _) => bits - 1,
        };
        let down = match (bits & sign != 0, magnitude) {
            (_, 0) => sign | 1,
            (false, _) => bits - 1,
            (true, _) => bits + 1,
        };
        let value = self.value_of_bits(bits);
        let inside = |b: u64| (lo..=hi).contains(&self.value_of_bits(b));
        if value > hi && inside(down) {
            down
        } else if value < lo && inside(up) {
            up
        } else {
            bits
        }
    }

    /// The values of this float dtype inside `[lo, hi]`, as the range of their order keys
    /// ([`Dtype::order_key`]); `None` when the interval holds none of them (an f16
    /// `[0.10001, 0.10002]`, say).
    pub fn keys_within(self, [lo, hi]: [f64; 2]) -> Option<(i128, i128)> {
        let (first, last) = (
            self.bits_within(lo, [lo, hi]),
            self.bits_within(hi, [lo, hi]),
        );
        let inside = |b: u64| (lo..=hi).contains(&self.value_of_bits(b));
        (inside(first) && inside(last)).then(|| (self.order_key(first), self.order_key(last)))
    }

    /// A float's bits as an integer in the order of the values: consecutive keys are
    /// neighbouring values, and both zeros are key 0.
    pub fn order_key(self, bits: u64) -> i128 {
        let sign = 1u64 << (8 * self.size_bytes() - 1);
        let magnitude = i128::from(bits & !sign);
        if bits & sign != 0 {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The bits of order key `key` ([`Dtype::order_key`]; key 0 is +0).
    pub fn bits_of_order_key(self, key: i128) -> u64 {
        let sign = 1u64 << (8 * self.size_bytes() - 1);
        if key < 0 {
            sign | (-key) as u64
        } else {
            key as u64
        }
    }

    /// Store `v` as element `i`, rounded and saturated as [`Dtype::bits_of_f64`] says.
    pub fn write_f64(self, out: &mut [u8], i: usize, v: f64) {
        self.write_bits(out, i, self.bits_of_f64(v));
    }

    /// Whether raw bits are a NaN (always false for integers).
    pub fn is_nan_bits(self, bits: u64) -> bool {
        match self.float_layout() {
            Some((e, m)) => {
                let exp = (bits >> m) & ((1 << e) - 1);
                exp == (1 << e) - 1 && bits & ((1 << m) - 1) != 0
            }
            None => false,
        }
    }

    /// Total bits of the element (8 x size).
    pub fn bit_width(self) -> u32 {
        8 * self.size_bytes() as u32
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dtype {
    type Err = UnknownDtype;

    fn from_str(s: &str) -> Result<Dtype, UnknownDtype> {
        Dtype::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDtype(s.to_string()))
    }
}

/// 2^e as f64 for -1074 <= e <= 1023 (exact).
fn pow2(e: i32) -> f64 {
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e + 1074))
    }
}

/// Decode a binary floating-point format with `e` exponent and `m` mantissa bits
/// (narrower than f64) into the f64 of the same value. Exact: every such value is an f64.
/// A NaN keeps its sign and its payload, shifted into the top of f64's mantissa.
fn decode_narrow(bits: u64, e: u32, m: u32) -> f64 {
    let sign = (bits >> (e + m)) & 1;
    let exp = (bits >> m) & ((1 << e) - 1);
    let man = bits & ((1 << m) - 1);
    let bias = (1i32 << (e - 1)) - 1;
    let sign64 = sign << 63;
    if exp == (1 << e) - 1 {
        // Infinity (man = 0) or NaN (payload kept).
        return f64::from_bits(sign64 | (0x7ff << 52) | (man << (52 - m)));
    }
    let magnitude = if exp == 0 {
        // Zero or subnormal: man x 2^(1 - bias - m), exact (man < 2^m).
        man as f64 * pow2(1 - bias - m as i32)
    } else {
        let e64 = (exp as i32 - bias + 1023) as u64;
        f64::from_bits((e64 << 52) | (man << (52 - m)))
    };
    f64::from_bits(sign64 | magnitude.to_bits())
}

/// Encode `v` into a binary format with `e` exponent and `m` mantissa bits (narrower than
/// f64), rounding to nearest, ties to even.
fn encode_narrow(v: f64, e: u32, m: u32) -> u64 {
    let b = v.to_bits();
    let sign = (b >> 63) << (e + m);
    let exp64 = ((b >> 52) & 0x7ff) as i32;
    let man64 = b & ((1u64 << 52) - 1);
    let max_exp = (1u64 << e) - 1;
    let inf = max_exp << m;
    if exp64 == 0x7ff {
        if man64 == 0 {
            return sign | inf;
        }
        let mut payload = man64 >> (52 - m);
        if payload == 0 {
            payload = 1 << (m - 1);
        }
        return sign | inf | payload;
    }
    if exp64 == 0 {
        // Zero or an f64 subnormal (< 2^-1022): far below half the smallest subnormal of
        // any narrower format here, so it rounds to a signed zero.
        return sign;
    }
    let bias = (1i32 << (e - 1)) - 1;
    let unbiased = exp64 - 1023;
    if unbiased + bias >= max_exp as i32 {
        return sign | inf;
    }
    let sig = (1u64 << 52) | man64; // 53 significant bits
                                    // Normal results keep m fraction bits; subnormal ones fewer (exponent fixed at 1 - bias).
    let (shift, exp_field) = if unbiased >= 1 - bias {
        ((52 - m) as i32, (unbiased + bias) as u64)
    } else {
        ((52 - m) as i32 + (1 - bias - unbiased), 0)
    };
    let q = if shift > 63 {
        0 // below half the smallest subnormal
    } else {
        let shift = shift as u32;
        let q = sig >> shift;
        let rem = sig & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    // A normal q carries the implicit bit (q in [2^m, 2^(m+1)]): adding (exp_field - 1)
    // << m sums it into the exponent, so a round-up carry bumps the exponent (and at the
    // top becomes exactly the infinity pattern). A subnormal q that rounds up to 2^m
    // likewise becomes the smallest normal.
    let magnitude = if exp_field == 0 {
        q
    } else {
        ((exp_field - 1) << m) + q
    };
    sign | magnitude.min(inf)
}

/// binary16 bits to the f64 of the same value (exact).
pub fn f16_to_f64(bits: u16) -> f64 {
    decode_narrow(u64::from(bits), 5, 10)
}

/// binary16 bits to the f32 of the same value (exact; NaN payload kept).
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    if bits & 0x7c00 == 0x7c00 {
        return f32::from_bits(sign | 0x7f80_0000 | (u32::from(bits & 0x3ff) << 13));
    }
    f16_to_f64(bits) as f32 // exact: every binary16 value is a float32
}

/// The binary16 nearest `v` (ties to even; overflow to infinity).
pub fn f16_from_f64(v: f64) -> u16 {
    encode_narrow(v, 5, 10) as u16
}

/// The binary16 nearest `v` (ties to even; overflow to infinity).
pub fn f16_from_f32(v: f32) -> u16 {
    // f32 -> f64 is exact, so this rounds once. A NaN is rebuilt from its bits (a hardware
    // conversion could quiet a signalling NaN).
    if v.is_nan() {
        let b = v.to_bits();
        let mut payload = ((b >> 13) & 0x3ff) as u16;
        if payload == 0 {
            payload = 0x200;
        }
        return (((b >> 16) & 0x8000) as u16) | 0x7c00 | payload;
    }
    f16_from_f64(f64::from(v))
}

/// bfloat16 bits to the f32 of the same value (exact: the upper half of a float32).
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// bfloat16 bits to the f64 of the same value (exact).
pub fn bf16_to_f64(bits: u16) -> f64 {
    decode_narrow(u64::from(bits), 8, 7)
}

/// The bfloat16 nearest `v` (ties to even; overflow to infinity; a NaN keeps its sign and
/// the top 7 payload bits, or becomes quiet if they are all zero).
pub fn bf16_from_f32(v: f32) -> u16 {
    let b = v.to_bits();
    if v.is_nan() {
        let hi = (b >> 16) as u16;
        return if hi & 0x7f == 0 { hi | 0x40 } else { hi };
    }
    // Round to nearest even on the low 16 bits; a carry into the exponent is correct
    // (up to the infinity pattern at the top).
    let round = 0x7fff + ((b >> 16) & 1);
    (b.wrapping_add(round) >> 16) as u16
}

/// The bfloat16 nearest `v` (ties to even, rounding once from f64).
pub fn bf16_from_f64(v: f64) -> u16 {
    encode_narrow(v, 8, 7) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_fromstr_display_and_serde() {
        for d in Dtype::ALL {
            assert_eq!(d.name().parse::<Dtype>().unwrap(), d);
            assert_eq!(d.to_string(), d.name());
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{d}\""));
            let back: Dtype = serde_json::from_str(&format!("\"{d}\"")).unwrap();
            assert_eq!(back, d);
        }
        let err = "float32".parse::<Dtype>().unwrap_err();
        assert!(err.to_string().contains("'float32'"), "{err}");
        assert!(err.to_string().contains("bf16"), "{err}");
        let err = serde_json::from_str::<Dtype>("\"F32\"").unwrap_err();
        assert!(err.to_string().contains("expected one of"), "{err}");
    }

    #[test]
    fn sizes_kinds_and_c_types() {
        let sizes: Vec<usize> = Dtype::ALL.iter().map(|d| d.size_bytes()).collect();
        assert_eq!(sizes, [2, 2, 4, 8, 1, 1, 2, 2, 4, 4, 8, 8]);
        assert!(Dtype::Bf16.is_float() && Dtype::Bf16.is_signed());
        assert!(Dtype::I8.is_signed() && !Dtype::I8.is_float() && Dtype::I8.is_integer());
        assert!(!Dtype::U64.is_signed());
        assert_eq!(Dtype::F16.c_type(), "uint16_t");
        assert_eq!(Dtype::Bf16.c_type(), "uint16_t");
        assert_eq!(Dtype::F32.c_type(), "float");
        assert_eq!(Dtype::F64.c_type(), "double");
        assert_eq!(Dtype::I8.c_type(), "int8_t");
        assert_eq!(Dtype::U64.c_type(), "uint64_t");
        assert_eq!(Dtype::F32.eps(), Some(f64::from(f32::EPSILON)));
        assert_eq!(Dtype::F64.eps(), Some(f64::EPSILON));
        assert_eq!(Dtype::F16.eps(), Some(1.0 / 1024.0));
        assert_eq!(Dtype::Bf16.eps(), Some(1.0 / 128.0));
        assert_eq!(Dtype::I32.eps(), None);
    }

    #[test]
    fn npy_descriptors_invert() {
        for d in Dtype::ALL {
            let back = Dtype::from_npy_descr(d.npy_descr()).unwrap();
            if d == Dtype::Bf16 {
                assert_eq!(back, Dtype::U16);
            } else {
                assert_eq!(back, d);
            }
        }
        assert_eq!(Dtype::I8.npy_descr(), "|i1");
        assert_eq!(Dtype::from_npy_descr("<i1"), Some(Dtype::I8));
        for bad in [">f4", "|f4", "=f4", "<f16", "<c8", "|b1", "", "<", "f4"] {
            assert_eq!(Dtype::from_npy_descr(bad), None, "{bad}");
        }
    }

    #[test]
    fn element_access_is_little_endian() {
        let bytes = [0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(Dtype::U16.bits(&bytes, 1), 0x0403);
        assert_eq!(Dtype::U32.bits(&bytes, 0), 0x0403_0201);
        assert_eq!(Dtype::I32.to_i128(&bytes, 1), Some(-1));
        assert_eq!(Dtype::U32.to_i128(&bytes, 1), Some(0xffff_ffff));
        assert_eq!(Dtype::I8.to_f64(&bytes, 4), -1.0);
        assert_eq!(Dtype::F32.to_i128(&bytes, 0), None);
        let mut out = [0u8; 8];
        Dtype::U16.write_bits(&mut out, 2, 0xdead_beef);
        assert_eq!(out, [0, 0, 0, 0, 0xef, 0xbe, 0, 0]);
        Dtype::F32.write_f64(&mut out, 0, 1.5);
        assert_eq!(&out[..4], &1.5f32.to_le_bytes());
        assert_eq!(Dtype::F32.to_f64(&out, 0), 1.5);
        Dtype::I64.write_f64(&mut out, 0, -2.0);
        assert_eq!(Dtype::I64.to_i128(&out, 0), Some(-2));
    }

    #[test]
    fn integer_writes_round_to_even_and_saturate() {
        let w = |d: Dtype, v: f64| d.int_of_bits(d.bits_of_f64(v)).unwrap();
        assert_eq!(w(Dtype::U8, 300.0), 255);
        assert_eq!(w(Dtype::U8, -5.0), 0);
        assert_eq!(w(Dtype::I8, -200.0), -128);
        assert_eq!(w(Dtype::I8, 2.5), 2);
        assert_eq!(w(Dtype::I8, 3.5), 4);
        assert_eq!(w(Dtype::I8, -2.5), -2);
        assert_eq!(w(Dtype::I16, f64::NAN), 0);
        assert_eq!(w(Dtype::I32, f64::INFINITY), i128::from(i32::MAX));
        assert_eq!(w(Dtype::I64, -1e300), i128::from(i64::MIN));
        assert_eq!(w(Dtype::U64, 1e300), i128::from(u64::MAX));
        assert_eq!(w(Dtype::U32, 4_294_967_295.4), 4_294_967_295);
    }

    #[test]
    fn f16_known_values() {
        let cases: [(u16, f64); 12] = [
            (0x0000, 0.0),
            (0x8000, -0.0),
            (0x3c00, 1.0),
            (0xc000, -2.0),
            (0x3555, 0.333_251_953_125),
            (0x7bff, 65504.0),
            (0x0400, 6.103_515_625e-5),         // min normal 2^-14
            (0x0001, 5.960_464_477_539_063e-8), // min subnormal 2^-24
            (0x03ff, 6.097_555_160_522_461e-5), // max subnormal
            (0x8001, -5.960_464_477_539_063e-8),
            (0x7c00, f64::INFINITY),
            (0xfc00, f64::NEG_INFINITY),
        ];
        for (bits, v) in cases {
            let got = f16_to_f64(bits);
            assert_eq!(got.to_bits(), v.to_bits(), "decode 0x{bits:04x}");
            assert_eq!(f16_from_f64(v), bits, "encode {v:?}");
            assert_eq!(f16_to_f32(bits).to_bits(), (v as f32).to_bits());
            assert_eq!(f16_from_f32(v as f32), bits);
        }
        assert_eq!(f16_to_f64(0x0400), 2f64.powi(-14));
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        // The values as the brief writes them round to those patterns.
        assert_eq!(f16_from_f64(6.1e-5), 0x03ff); // just under 2^-14
        assert_eq!(f16_from_f64(6.11e-5), 0x0401);
        assert_eq!(f16_from_f64(5.96e-8), 0x0001);
        assert_eq!(f16_from_f64(65504.0), 0x7bff);
    }

    #[test]
    fn f16_rounding_ties_to_even_and_overflow() {
        // Between 1 and 1 + 2^-10: the midpoint rounds to even (1), just above it rounds up.
        let ulp = 2f64.powi(-10);
        assert_eq!(f16_from_f64(1.0 + ulp / 2.0), 0x3c00);
        assert_eq!(f16_from_f64(1.0 + ulp / 2.0 + 1e-12), 0x3c01);
        // 1 + 3/2 ulp is a tie between 0x3c01 (odd) and 0x3c02 (even).
        assert_eq!(f16_from_f64(1.0 + 1.5 * ulp), 0x3c02);
        assert_eq!(f16_from_f64(-(1.0 + 1.5 * ulp)), 0xbc02);
        // Largest finite 65504; the tie 65520 rounds to even, which is the infinity pattern.
        assert_eq!(f16_from_f64(65519.99), 0x7bff);
        assert_eq!(f16_from_f64(65520.0), 0x7c00);
        assert_eq!(f16_from_f64(-1e10), 0xfc00);
        // Subnormal ties: 2^-25 is half the smallest subnormal -> 0 (even); 3 x 2^-25 -> 2.
        assert_eq!(f16_from_f64(2f64.powi(-25)), 0x0000);
        assert_eq!(f16_from_f64(2f64.powi(-25) * 1.0001), 0x0001);
        assert_eq!(f16_from_f64(3.0 * 2f64.powi(-25)), 0x0002);
        assert_eq!(f16_from_f64(-2f64.powi(-26)), 0x8000);
        // The largest subnormal plus half a step is a tie -> the smallest normal (even).
        assert_eq!(f16_from_f64(1023.5 * 2f64.powi(-24)), 0x0400);
        // Tiny and f64-subnormal inputs become signed zeros.
        assert_eq!(f16_from_f64(1e-300), 0x0000);
        assert_eq!(f16_from_f64(-f64::from_bits(1)), 0x8000);
        // Rounding once from f64: just above a tie rounds up, although the same value
        // rounded to f32 first would be the tie itself (and round down to even).
        let v = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(f16_from_f64(v), 0x3c01);
        assert_eq!(f16_from_f32(v as f32), 0x3c00);
    }

    #[test]
    fn f16_every_pattern_round_trips() {
        for bits in 0..=u16::MAX {
            let v = f16_to_f64(bits);
            if v.is_nan() {
                assert!(Dtype::F16.is_nan_bits(u64::from(bits)));
                assert_eq!(f16_from_f64(v), bits, "NaN payload 0x{bits:04x}");
                assert_eq!(f16_from_f32(f16_to_f32(bits)), bits);
                assert_eq!(Dtype::F16.bits(&bits.to_le_bytes(), 0), u64::from(bits));
            } else {
                assert_eq!(f16_from_f64(v), bits, "0x{bits:04x} = {v:?}");
                assert_eq!(f16_to_f32(bits) as f64, v);
            }
        }
    }

    #[test]
    fn f16_nan_payload_survives_storage() {
        let mut buf = [0u8; 4];
        Dtype::F16.write_bits(&mut buf, 1, 0x7d23);
        assert_eq!(Dtype::F16.bits(&buf, 1), 0x7d23);
        assert!(Dtype::F16.to_f64(&buf, 1).is_nan());
        // Encoding the decoded NaN gives the same pattern back.
        assert_eq!(Dtype::F16.bits_of_f64(Dtype::F16.to_f64(&buf, 1)), 0x7d23);
        assert_eq!(f16_to_f32(0xfd23).to_bits(), 0xffa4_6000);
        // A NaN whose payload lives only below f16's mantissa becomes the quiet NaN.
        assert_eq!(f16_from_f64(f64::from_bits(0x7ff0_0000_0000_0001)), 0x7e00);
    }

    #[test]
    fn bf16_known_values_and_rounding() {
        let cases: [(u16, f32); 8] = [
            (0x0000, 0.0),
            (0x8000, -0.0),
            (0x3f80, 1.0),
            (0x7f7f, 3.389_531_4e38),
            (0x0080, 1.175_494_4e-38),
            (0x0001, 9.183_55e-41),
            (0x7f80, f32::INFINITY),
            (0xff80, f32::NEG_INFINITY),
        ];
        for (bits, v) in cases {
            assert_eq!(bf16_to_f32(bits).to_bits(), v.to_bits(), "0x{bits:04x}");
            assert_eq!(bf16_from_f32(v), bits);
            assert_eq!(bf16_from_f64(f64::from(v)), bits);
            assert_eq!(bf16_to_f64(bits), f64::from(v));
        }
        // 1 + 2^-8 is the tie between 1.0 (even) and 1 + 2^-7.
        assert_eq!(bf16_from_f32(1.0 + 2f32.powi(-8)), 0x3f80);
        assert_eq!(bf16_from_f32(1.0 + 3.0 * 2f32.powi(-8)), 0x3f82);
        assert_eq!(bf16_from_f32(1.0 + 2f32.powi(-8) + 2f32.powi(-20)), 0x3f81);
        assert_eq!(bf16_from_f32(f32::MAX), 0x7f80);
        assert_eq!(bf16_from_f32(f32::from_bits(0x7fc1_2345)), 0x7fc1);
        assert_eq!(bf16_from_f32(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(bf16_from_f32(f32::from_bits(0xff81_0000)), 0xff81);
        // f64 rounding happens once: a value just above a tie in f64 but a tie in f32.
        let v = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(bf16_from_f64(v), 0x3f81);
        assert_eq!(bf16_from_f32(v as f32), 0x3f80); // double rounding through f32
    }

    #[test]
    fn bf16_every_pattern_round_trips() {
        for bits in 0..=u16::MAX {
            let f = bf16_to_f32(bits);
            assert_eq!(bf16_from_f32(f), bits, "0x{bits:04x}");
            assert_eq!(bf16_from_f64(bf16_to_f64(bits)), bits, "0x{bits:04x}");
            if !f.is_nan() {
                assert_eq!(bf16_to_f64(bits), f64::from(f));
            }
        }
    }

    #[test]
    fn f32_encoder_agrees_with_the_hardware_conversion() {
        let mut x: u64 = 0x1234_5678_9abc_def0;
        let check = |v: f64| {
            let want = (v as f32).to_bits();
            let got = Dtype::F32.bits_of_f64(v) as u32;
            if v.is_nan() {
                assert!(f32::from_bits(got).is_nan());
            } else {
                assert_eq!(got, want, "{v:e}");
            }
        };
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(f64::from_bits(x));
            // Values in and near f32's range, including its subnormals.
            let e = (x >> 52) as i32 % 300 - 150;
            check(f64::from_bits(
                x & 0x800f_ffff_ffff_ffff | (((e + 1023) as u64) << 52),
            ));
        }
        for v in [
            f64::MAX,
            f64::MIN_POSITIVE,
            3.4028235677973366e38,
            3.4028235e38,
            1e-46,
            7e-46,
            1.401298464324817e-45,
            0.7006492321624085e-45,
        ] {
            check(v);
            check(-v);
        }
        // Every f32 decodes exactly.
        for b in [
            0u32,
            1,
            0x007f_ffff,
            0x0080_0000,
            0x7f7f_ffff,
            0x3f80_0001,
            0x8000_0001,
        ] {
            assert_eq!(
                Dtype::F32.value_of_bits(u64::from(b)),
                f64::from(f32::from_bits(b))
            );
        }
        assert_eq!(
            Dtype::F32.value_of_bits(0x7fc1_2345).to_bits(),
            0x7ff8_2468_a000_0000
        );
    }

    #[test]
    fn nan_detection() {
        assert!(Dtype::F32.is_nan_bits(0x7f80_0001));
        assert!(!Dtype::F32.is_nan_bits(0x7f80_0000));
        assert!(Dtype::F64.is_nan_bits(f64::NAN.to_bits()));
        assert!(Dtype::Bf16.is_nan_bits(0xffc1));
        assert!(Dtype::F16.is_nan_bits(0x7f7f)); // the 0x7f poison is a NaN in f16
        assert!(!Dtype::Bf16.is_nan_bits(0x7f7f)); // and finite in bf16
        assert!(!Dtype::U16.is_nan_bits(0xffff));
    }

    #[test]
    fn nearest_is_what_a_parameter_of_the_dtype_holds() {
        assert_eq!(Dtype::F16.nearest(0.1), f16_to_f64(f16_from_f64(0.1)));
        assert_ne!(Dtype::F16.nearest(0.1), 0.1);
        assert_eq!(Dtype::Bf16.nearest(1.0 + 1.0 / 512.0), 1.0);
        assert_eq!(Dtype::F32.nearest(0.1), 0.1f32 as f64);
        assert_eq!(Dtype::F64.nearest(0.1), 0.1);
        assert_eq!(Dtype::F16.nearest(70000.0), f64::INFINITY);
        assert_eq!(Dtype::I32.nearest(2.5), 2.0);
    }

    #[test]
    fn largest_finite_of_each_float() {
        assert_eq!(Dtype::F16.largest_finite(), Some(65504.0));
        assert_eq!(Dtype::Bf16.largest_finite(), Some(bf16_to_f64(0x7f7f)));
        assert_eq!(Dtype::F32.largest_finite(), Some(f32::MAX as f64));
        assert_eq!(Dtype::F64.largest_finite(), Some(f64::MAX));
        assert_eq!(Dtype::U8.largest_finite(), None);
    }
}
