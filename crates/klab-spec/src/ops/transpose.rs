//! The transpose and copy inputs (the transpose lab's): the exact integers while they are
//! exact, then distinct 32-bit patterns with every special value, never a poison word.
//!
//! Values move without arithmetic, so the oracle is exact: each output word must equal,
//! bit for bit, the input word the operation maps to it (so -0.0 differs from +0.0 and a
//! NaN must keep its payload). The oracle ([`crate::declared::builtin::BuiltinOracle`]) is
//! plain index arithmetic on the host and shares no code or order with any kernel.

use serde::Serialize;

/// Largest N for which the input is the exact integers `0..N^2` as float32 (seed 000).
/// `4096^2 - 1 = 16,777,215 < 2^24`, so every value is exactly representable.
pub const EXACT_INTEGER_LIMIT: u64 = 4096;

/// Poison byte written over every output before a validation launch: each word becomes
/// `0xffffffff`, a NaN, so a skipped store can never inherit a correct value.
pub const POISON_BYTE: u8 = 0xff;
/// The word the poison byte produces.
pub const POISON_WORD: u32 = 0xffff_ffff;
/// Words no input may contain: the words both poison bytes (0xff, 0x7f) produce.
pub const FORBIDDEN_WORDS: [u32; 2] = [POISON_WORD, 0x7f7f_7f7f];

/// Which input an N gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputPattern {
    /// `input[i] = i as f32` (exact for N <= 4096).
    ExactIntegers,
    /// Distinct 32-bit patterns (for N <= 65535) including -0.0, subnormals, infinities
    /// and NaNs with payloads; never the poison word.
    DistinctBits,
}

impl InputPattern {
    pub fn for_n(n: u64) -> InputPattern {
        if n <= EXACT_INTEGER_LIMIT {
            InputPattern::ExactIntegers
        } else {
            InputPattern::DistinctBits
        }
    }

    /// One line saying what the input is, for stderr and artifacts.
    pub fn describe(self, n: u64) -> String {
        match self {
            InputPattern::ExactIntegers => format!(
                "integers 0..{} as float32 (exact)",
                n.saturating_mul(n).saturating_sub(1)
            ),
            InputPattern::DistinctBits => {
                let distinct = if n.saturating_mul(n) < DISTINCT_LIMIT {
                    "distinct"
                } else {
                    "repeating (N^2 exceeds the distinct 32-bit patterns)"
                };
                format!(
                    "{distinct} 32-bit patterns incl. -0.0, subnormals, +-inf and NaN payloads; never 0x{POISON_WORD:08x}"
                )
            }
        }
    }
}

/// Special patterns every `DistinctBits` input contains, spread over the matrix.
pub const SPECIAL_PATTERNS: [u32; 12] = [
    0x0000_0000, // +0.0
    0x8000_0000, // -0.0
    0x0000_0001, // smallest positive subnormal
    0x007f_ffff, // largest positive subnormal
    0x8000_0001, // smallest negative subnormal
    0x7f80_0000, // +inf
    0xff80_0000, // -inf
    0x7fc0_0000, // canonical quiet NaN
    0x7fc1_2345, // quiet NaN with payload
    0x7f80_0001, // signalling NaN with payload
    0xffc0_0001, // negative quiet NaN with payload
    0x7f7f_ffff, // largest finite
];

// i -> i * MUL + ADD (mod 2^32) is a bijection on u32 because MUL is odd.
const MUL: u32 = 0x9e37_79b1;
/// Index that the affine map sends to the poison word. Chosen inside every DistinctBits
/// input so that the replacement below always runs (and is tested).
const POISON_INDEX: u64 = 1000;
const ADD: u32 = POISON_WORD.wrapping_sub(MUL.wrapping_mul(POISON_INDEX as u32));
/// Inputs with fewer words than this hold pairwise distinct patterns.
const DISTINCT_LIMIT: u64 = (1u64 << 32) - SPECIAL_PATTERNS.len() as u64 - 2;

fn affine(i: u64) -> u32 {
    (i as u32).wrapping_mul(MUL).wrapping_add(ADD)
}

/// Inverse of `MUL` modulo 2^32 (Newton iteration; each step doubles the correct bits).
const fn mul_inverse() -> u32 {
    let mut x: u32 = MUL; // correct to 3 bits for odd MUL
    let mut i = 0;
    while i < 5 {
        x = x.wrapping_mul(2u32.wrapping_sub(MUL.wrapping_mul(x)));
        i += 1;
    }
    x
}
const MUL_INV: u32 = mul_inverse();

/// Index whose affine pattern is `value` (may be >= the input length).
fn affine_index(value: u32) -> u64 {
    u64::from(value.wrapping_sub(ADD).wrapping_mul(MUL_INV))
}

/// Fill `out` with the exact integers `0, 1, 2, ...` as float32 while every one of them
/// is exact (up to 2^24 words, an N x N matrix with N <= 4096), else with distinct 32-bit
/// patterns ([`InputPattern::DistinctBits`]).
pub fn fill_words(out: &mut [u32]) {
    let len = out.len() as u64;
    par_fill(out, |i| base_word(i as u64, len));
    for (i, w) in distinct_patches(len) {
        out[i as usize] = w;
    }
}

/// Word `i` of a `len`-word input before [`distinct_patches`]: the integer `i` as float32
/// while the input is exact, else the affine pattern with the poison words kept out. A
/// pure function of `i`, so the device makes the same words (`kernels/verify.cu`).
pub fn base_word(i: u64, len: u64) -> u32 {
    if len <= EXACT_INTEGER_LIMIT * EXACT_INTEGER_LIMIT {
        return (i as f32).to_bits();
    }
    let v = affine(i);
    // Beyond 2^32 words the affine map wraps; keep the poison words out regardless.
    if v == POISON_WORD {
        0x7fbf_ffff
    } else if v == FORBIDDEN_WORDS[1] {
        0x7fbf_fffe
    } else {
        v
    }
}

/// The words a `len`-word distinct input holds in place of [`base_word`], as (index,
/// word): every special pattern moved to a target spread from the first word to the last
/// (swapped with its own occurrence while the patterns are distinct), then fresh patterns
/// where a poison word would be. Empty for exact-integer inputs.
pub fn distinct_patches(len: u64) -> Vec<(u64, u32)> {
    use std::collections::BTreeMap;
    if len <= EXACT_INTEGER_LIMIT * EXACT_INTEGER_LIMIT || len < SPECIAL_PATTERNS.len() as u64 {
        return Vec::new();
    }
    let mut over: BTreeMap<u64, u32> = BTreeMap::new();
    let get = |over: &BTreeMap<u64, u32>, i: u64| {
        over.get(&i).copied().unwrap_or_else(|| base_word(i, len))
    };
    let distinct = len < DISTINCT_LIMIT;
    let last = len - 1;
    let count = SPECIAL_PATTERNS.len() as u64;
    let mut touched: Vec<u64> = Vec::with_capacity(2 * count as usize);
    let locate = |over: &BTreeMap<u64, u32>, touched: &[u64], value: u32| -> Option<u64> {
        let m = affine_index(value);
        if m < len && get(over, m) == value {
            return Some(m);
        }
        touched.iter().copied().find(|&p| get(over, p) == value)
    };
    for (k, &special) in SPECIAL_PATTERNS.iter().enumerate() {
        // Targets spread from the first element to the last.
        let target = ((k as u128 * last as u128) / (count as u128 - 1)) as u64;
        if distinct {
            match locate(&over, &touched, special) {
                Some(p) => {
                    let (a, b) = (get(&over, p), get(&over, target));
                    over.insert(p, b);
                    over.insert(target, a);
                    touched.push(p);
                }
                None => {
                    over.insert(target, special);
                }
            }
        } else {
            over.insert(target, special);
        }
        touched.push(target);
    }
    if distinct {
        // The indexes that map to a poison word (if in range) get unused patterns.
        let mut next = len;
        for forbidden in FORBIDDEN_WORDS {
            if let Some(p) = locate(&over, &touched, forbidden) {
                let unused = loop {
                    let v = affine(next);
                    next += 1;
                    if !FORBIDDEN_WORDS.contains(&v) && !SPECIAL_PATTERNS.contains(&v) {
                        break v;
                    }
                };
                over.insert(p, unused);
            }
        }
    }
    over.into_iter().collect()
}

fn par_fill(out: &mut [u32], f: impl Fn(usize) -> u32 + Sync) {
    klab_core::par::for_chunks(out, 1, |c, chunk| {
        let base = c * klab_core::par::CHUNK_ELEMENTS;
        for (j, w) in chunk.iter_mut().enumerate() {
            *w = f(base + j);
        }
    });
}

/// How output words are compared with the oracle's. Bitwise unless a manifest declares
/// otherwise, and every verdict names the rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Equality {
    /// Every 32-bit pattern equal (NaN payloads and the sign of zero included).
    #[default]
    Bitwise,
    /// Bitwise, except that any NaN matches any NaN: for routines that compute the result
    /// arithmetically (cuBLAS sgeam multiplies by alpha = 1, which returns the canonical
    /// NaN). A skipped store stays caught where the expected word is not a NaN, and at NaN
    /// positions by the 0x7f poison pass (0x7f7f7f7f is finite).
    NanAnyPayload,
}

impl Equality {
    pub fn parse(s: &str) -> Option<Equality> {
        match s {
            "bitwise" => Some(Equality::Bitwise),
            "nan-any-payload" => Some(Equality::NanAnyPayload),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn input(n: u64) -> Vec<u32> {
        let mut v = vec![0; (n * n) as usize];
        fill_words(&mut v);
        v
    }

    #[test]
    fn exact_input_is_the_integers_and_the_largest_is_exact() {
        let v = input(4);
        let floats: Vec<f32> = v.iter().map(|b| f32::from_bits(*b)).collect();
        assert_eq!(floats, (0..16).map(|i| i as f32).collect::<Vec<_>>());
        // 4096^2 - 1 round-trips through f32 exactly; one more than 2^24 would not.
        let top = (4096u64 * 4096 - 1) as f32;
        assert_eq!(top as u64, 4096 * 4096 - 1);
        assert_eq!(InputPattern::for_n(4096), InputPattern::ExactIntegers);
        assert_eq!(InputPattern::for_n(4097), InputPattern::DistinctBits);
    }

    #[test]
    fn mul_inverse_is_an_inverse() {
        assert_eq!(MUL.wrapping_mul(MUL_INV), 1);
        for i in [0u64, 1, 12345, 0xffff_fffe] {
            assert_eq!(affine_index(affine(i)), i);
        }
    }

    #[test]
    fn distinct_input_is_distinct_holds_every_special_and_never_poison() {
        let mut v = vec![0u32; 4099 * 4099];
        fill_words(&mut v);
        let set: HashSet<u32> = v.iter().copied().collect();
        assert_eq!(set.len(), v.len(), "patterns repeat");
        for s in SPECIAL_PATTERNS {
            assert!(set.contains(&s), "special 0x{s:08x} missing");
        }
        for w in FORBIDDEN_WORDS {
            assert!(!set.contains(&w), "0x{w:08x} present");
        }
        assert_eq!(v[0], SPECIAL_PATTERNS[0]);
        assert_eq!(*v.last().unwrap(), *SPECIAL_PATTERNS.last().unwrap());
    }

    #[test]
    fn the_patches_are_what_makes_the_affine_pattern_a_distinct_input() {
        let len = 4097u64 * 4097;
        let patches = distinct_patches(len);
        assert!(!patches.is_empty() && patches.len() <= 2 * SPECIAL_PATTERNS.len() + 2);
        assert!(
            distinct_patches(4096 * 4096).is_empty(),
            "exact integers need none"
        );
        let mut v = vec![0u32; len as usize];
        fill_words(&mut v);
        for (i, w) in &patches {
            assert_eq!(v[*i as usize], *w);
        }
        let unpatched = (0..len)
            .filter(|i| v[*i as usize] != base_word(*i, len))
            .count();
        assert!(unpatched <= patches.len());
    }

    #[test]
    fn distinct_input_replaces_the_pattern_that_would_be_poison() {
        assert_eq!(affine(POISON_INDEX), POISON_WORD);
        let mut v = vec![0u32; 4097 * 4097];
        fill_words(&mut v);
        assert_ne!(v[POISON_INDEX as usize], POISON_WORD);
        assert!(!v.contains(&POISON_WORD));
    }
}
