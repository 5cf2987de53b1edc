//! The transpose and copy contracts (seed 000): inputs, the CPU oracle and the bitwise rule.
//!
//! Values move without arithmetic, so the oracle is exact: each output word must equal,
//! bit for bit, the input word the operation maps to it (so -0.0 differs from +0.0 and a
//! NaN must keep its payload). The oracle is plain index arithmetic on the host and shares
//! no code or order with any kernel.

use std::thread;

use serde::Serialize;

use crate::variant::Operation;

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

/// Bytes a transpose or copy of an N x N float32 matrix must move: one read and one write
/// of every element.
pub fn useful_bytes(n: u64) -> Option<u64> {
    n.checked_mul(n)?.checked_mul(8)
}

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

/// Fill `out` (length N*N) with the input for `n`, as 32-bit patterns.
pub fn fill_input(n: u64, out: &mut [u32]) {
    debug_assert_eq!(out.len() as u64, n * n);
    match InputPattern::for_n(n) {
        InputPattern::ExactIntegers => par_fill(out, |i| (i as f32).to_bits()),
        InputPattern::DistinctBits => fill_distinct(out),
    }
}

fn fill_distinct(out: &mut [u32]) {
    let len = out.len();
    par_fill(out, |i| {
        let v = affine(i as u64);
        // Beyond 2^32 words the affine map wraps; keep the poison words out regardless.
        if v == POISON_WORD {
            0x7fbf_ffff
        } else if v == FORBIDDEN_WORDS[1] {
            0x7fbf_fffe
        } else {
            v
        }
    });
    if len < SPECIAL_PATTERNS.len() {
        return;
    }
    let distinct = (len as u64) < DISTINCT_LIMIT;
    let last = len - 1;
    let count = SPECIAL_PATTERNS.len();
    let mut touched: Vec<usize> = Vec::with_capacity(2 * count);
    let locate = |out: &[u32], touched: &[usize], value: u32| -> Option<usize> {
        let m = affine_index(value);
        if m < len as u64 && out[m as usize] == value {
            return Some(m as usize);
        }
        touched.iter().copied().find(|&p| out[p] == value)
    };
    for (k, &special) in SPECIAL_PATTERNS.iter().enumerate() {
        // Targets spread from the first element to the last.
        let target = ((k as u128 * last as u128) / (count as u128 - 1)) as usize;
        if distinct {
            match locate(out, &touched, special) {
                Some(p) => {
                    out.swap(p, target);
                    touched.push(p);
                }
                None => out[target] = special,
            }
        } else {
            out[target] = special;
        }
        touched.push(target);
    }
    if distinct {
        // The indexes that map to a poison word (if in range) get unused patterns.
        let mut next = len as u64;
        for forbidden in FORBIDDEN_WORDS {
            if let Some(p) = locate(out, &touched, forbidden) {
                let unused = loop {
                    let v = affine(next);
                    next += 1;
                    if !FORBIDDEN_WORDS.contains(&v) && !SPECIAL_PATTERNS.contains(&v) {
                        break v;
                    }
                };
                out[p] = unused;
            }
        }
    }
}

/// Words per thread chunk below which work stays on one thread.
const PAR_THRESHOLD: usize = 1 << 22;

fn workers(len: usize) -> usize {
    if len < PAR_THRESHOLD {
        return 1;
    }
    thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 32)
}

fn par_fill(out: &mut [u32], f: impl Fn(usize) -> u32 + Sync) {
    let threads = workers(out.len());
    let chunk = out.len().div_ceil(threads).max(1);
    thread::scope(|s| {
        for (c, part) in out.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || {
                let base = c * chunk;
                for (j, w) in part.iter_mut().enumerate() {
                    *w = f(base + j);
                }
            });
        }
    });
}

/// The word the oracle expects at output position (row, col).
pub fn expected(op: Operation, n: u64, input: &[u32], row: u64, col: u64) -> u32 {
    match op {
        Operation::Copy => input[(row * n + col) as usize],
        Operation::Transpose => input[(col * n + row) as usize],
    }
}

/// The first output element that differs from the oracle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    pub row: u64,
    pub col: u64,
    pub got: u32,
    pub want: u32,
}

impl Mismatch {
    /// `(row 3, col 17): got 0xffffffff (NaN), want 0x42c80000 (100)`.
    pub fn describe(&self) -> String {
        format!(
            "(row {}, col {}): got 0x{:08x} ({}), want 0x{:08x} ({})",
            self.row,
            self.col,
            self.got,
            show_f32(self.got),
            self.want,
            show_f32(self.want)
        )
    }
}

fn show_f32(bits: u32) -> String {
    let v = f32::from_bits(bits);
    if v.is_nan() {
        "NaN".to_string()
    } else {
        format!("{v:?}")
    }
}

/// The rule for `max_abs_error`, stated wherever the number is shown.
pub const MAX_ABS_ERROR_RULE: &str = "max_abs_error is a diagnostic: |got - want| over mismatching elements, \
computed in float64; a mismatch where either word is NaN or infinite counts as inf; \
bit-identical words count 0 (so -0.0 vs +0.0 is a mismatch of error 0); the mismatch count decides correctness";

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

    /// The rule as receipts and verdicts state it.
    pub fn rule(self) -> &'static str {
        match self {
            Equality::Bitwise => "bitwise: every 32-bit pattern equal",
            Equality::NanAnyPayload => {
                "bitwise except NaN payloads: every 32-bit pattern equal, any NaN matches any NaN"
            }
        }
    }

    /// Whether `got` passes for `want`.
    pub fn matches(self, got: u32, want: u32) -> bool {
        got == want
            || (self == Equality::NanAnyPayload
                && f32::from_bits(got).is_nan()
                && f32::from_bits(want).is_nan())
    }
}

/// The outcome of comparing one output with the oracle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub mismatches: u64,
    pub max_abs_error: f64,
    pub first_mismatch: Option<Mismatch>,
}

impl Verdict {
    pub fn correct(&self) -> bool {
        self.mismatches == 0
    }

    fn merge(mut self, other: Verdict) -> Verdict {
        self.mismatches += other.mismatches;
        self.max_abs_error = max_error(self.max_abs_error, other.max_abs_error);
        if self.first_mismatch.is_none() {
            self.first_mismatch = other.first_mismatch;
        }
        self
    }
}

fn max_error(a: f64, b: f64) -> f64 {
    if a >= b {
        a
    } else {
        b
    }
}

/// Absolute error contribution of one element under [`MAX_ABS_ERROR_RULE`].
pub fn element_error(got: u32, want: u32) -> f64 {
    if got == want {
        return 0.0;
    }
    let (g, w) = (f32::from_bits(got), f32::from_bits(want));
    if g.is_finite() && w.is_finite() {
        (f64::from(g) - f64::from(w)).abs()
    } else {
        f64::INFINITY
    }
}

/// Compare `output` (N*N words) with the oracle for `op` over `input`, bit for bit.
pub fn verify(op: Operation, n: u64, input: &[u32], output: &[u32]) -> Verdict {
    verify_with(op, n, input, output, Equality::Bitwise)
}

/// [`verify`] under a declared [`Equality`].
pub fn verify_with(op: Operation, n: u64, input: &[u32], output: &[u32], eq: Equality) -> Verdict {
    assert_eq!(input.len(), output.len(), "input and output lengths differ");
    assert_eq!(input.len() as u64, n * n, "buffer length is not N*N");
    let rows = n as usize;
    let threads = workers(output.len()).min(rows.max(1));
    let rows_per = rows.div_ceil(threads.max(1)).max(1);
    thread::scope(|s| {
        let handles: Vec<_> = (0..rows)
            .step_by(rows_per)
            .map(|start| {
                let end = (start + rows_per).min(rows);
                s.spawn(move || verify_rows(op, n, input, output, start as u64..end as u64, eq))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("verification thread panicked"))
            .fold(
                Verdict {
                    mismatches: 0,
                    max_abs_error: 0.0,
                    first_mismatch: None,
                },
                Verdict::merge,
            )
    })
}

/// Square blocks of the comparison: a transpose's oracle reads the input down a column,
/// so rows are compared a block at a time to keep those reads in cache (one pass over
/// every row of a block at N = 16384 would touch a new page per element).
const VERIFY_BLOCK: u64 = 64;

fn verify_rows(
    op: Operation,
    n: u64,
    input: &[u32],
    output: &[u32],
    rows: std::ops::Range<u64>,
    eq: Equality,
) -> Verdict {
    let mut v = Verdict {
        mismatches: 0,
        max_abs_error: 0.0,
        first_mismatch: None,
    };
    let mut r0 = rows.start;
    while r0 < rows.end {
        let r1 = (r0 + VERIFY_BLOCK).min(rows.end);
        let mut c0 = 0;
        while c0 < n {
            let c1 = (c0 + VERIFY_BLOCK).min(n);
            for row in r0..r1 {
                let base = (row * n) as usize;
                for col in c0..c1 {
                    let got = output[base + col as usize];
                    let want = expected(op, n, input, row, col);
                    if !eq.matches(got, want) {
                        v.mismatches += 1;
                        v.max_abs_error = max_error(v.max_abs_error, element_error(got, want));
                        // Blocks are visited out of row-major order: keep the lowest index.
                        if v.first_mismatch.is_none_or(|m| (row, col) < (m.row, m.col)) {
                            v.first_mismatch = Some(Mismatch {
                                row,
                                col,
                                got,
                                want,
                            });
                        }
                    }
                }
            }
            c0 = c1;
        }
        r0 = r1;
    }
    v
}

/// The host-side reference result (used by tests and the host test backend).
pub fn reference(op: Operation, n: u64, input: &[u32]) -> Vec<u32> {
    let mut out = vec![0u32; input.len()];
    for row in 0..n {
        for col in 0..n {
            out[(row * n + col) as usize] = expected(op, n, input, row, col);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn input(n: u64) -> Vec<u32> {
        let mut v = vec![0; (n * n) as usize];
        fill_input(n, &mut v);
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
        fill_distinct(&mut v);
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
    fn distinct_input_replaces_the_pattern_that_would_be_poison() {
        assert_eq!(affine(POISON_INDEX), POISON_WORD);
        let mut v = vec![0u32; 4097 * 4097];
        fill_distinct(&mut v);
        assert_ne!(v[POISON_INDEX as usize], POISON_WORD);
        assert!(!v.contains(&POISON_WORD));
    }

    #[test]
    fn transpose_oracle_and_verdict() {
        let n = 33;
        let inp = input(n);
        let good = reference(Operation::Transpose, n, &inp);
        let v = verify(Operation::Transpose, n, &inp, &good);
        assert!(v.correct());
        assert_eq!(v.max_abs_error, 0.0);
        // The transpose of the transpose is the input (the oracle is an involution).
        assert_eq!(reference(Operation::Transpose, n, &good), inp);
        // A copy is not a transpose.
        let copy = reference(Operation::Copy, n, &inp);
        assert_eq!(copy, inp);
        let wrong = verify(Operation::Transpose, n, &inp, &copy);
        assert_eq!(wrong.mismatches, n * n - n, "all but the diagonal differ");
        let m = wrong.first_mismatch.unwrap();
        assert_eq!((m.row, m.col), (0, 1));
        assert_eq!(m.got, 1f32.to_bits());
        assert_eq!(m.want, 33f32.to_bits());
    }

    #[test]
    fn poison_is_caught_and_counts_as_infinite_error() {
        let n = 7;
        let inp = input(n);
        let mut out = reference(Operation::Transpose, n, &inp);
        out[48] = POISON_WORD;
        let v = verify(Operation::Transpose, n, &inp, &out);
        assert_eq!(v.mismatches, 1);
        assert_eq!(v.max_abs_error, f64::INFINITY);
        assert_eq!(v.first_mismatch.unwrap().row, 6);
        assert_eq!(v.first_mismatch.unwrap().col, 6);
    }

    #[test]
    fn nan_any_payload_forgives_only_nan_payloads() {
        let eq = Equality::NanAnyPayload;
        assert!(
            eq.matches(0x7fff_ffff, 0xff91_0a12),
            "canonical NaN for a payload NaN"
        );
        assert!(
            !eq.matches(0x8000_0000, 0x0000_0000),
            "-0.0 is still not +0.0"
        );
        assert!(
            !eq.matches(0x7f7f_7f7f, 0x7fc0_0000),
            "the 0x7f poison is not a NaN"
        );
        assert!(
            !eq.matches(0x7fc0_0000, 0x3f80_0000),
            "a NaN where a number belongs"
        );
        assert!(!Equality::Bitwise.matches(0x7fff_ffff, 0xff91_0a12));
        let n = 4097;
        let mut input = vec![0u32; (n * n) as usize];
        fill_input(n, &mut input);
        let mut out = reference(Operation::Transpose, n, &input);
        let mut nans = 0;
        for w in out.iter_mut() {
            if f32::from_bits(*w).is_nan() {
                *w = 0x7fff_ffff;
                nans += 1;
            }
        }
        assert!(nans > 0);
        let bitwise = verify(Operation::Transpose, n, &input, &out);
        assert!(bitwise.mismatches > 0 && bitwise.mismatches <= nans);
        assert!(verify_with(Operation::Transpose, n, &input, &out, eq).correct());
    }

    #[test]
    fn signed_zero_and_nan_payloads_are_compared_by_bits() {
        assert_eq!(element_error(0x8000_0000, 0), 0.0);
        let inp = vec![0u32, 0x7fc1_2345, 5f32.to_bits(), 0x8000_0000];
        let mut out = inp.clone();
        out[0] = 0x8000_0000; // -0.0 for +0.0
        out[1] = 0x7fc0_0000; // canonicalised NaN
        let v = verify(Operation::Copy, 2, &inp, &out);
        assert_eq!(v.mismatches, 2);
        assert_eq!(v.max_abs_error, f64::INFINITY);
        out[1] = inp[1];
        let v = verify(Operation::Copy, 2, &inp, &out);
        assert_eq!(v.mismatches, 1);
        assert_eq!(v.max_abs_error, 0.0);
        assert!(!v.correct());
    }

    #[test]
    fn finite_error_is_the_largest_absolute_difference() {
        let inp: Vec<u32> = [1.0f32, 2.0, 3.0, 4.0]
            .iter()
            .map(|f| f.to_bits())
            .collect();
        let mut out = inp.clone();
        out[1] = 2.5f32.to_bits();
        out[2] = (-3.0f32).to_bits();
        let v = verify(Operation::Copy, 2, &inp, &out);
        assert_eq!(v.mismatches, 2);
        assert_eq!(v.max_abs_error, 6.0);
    }

    #[test]
    fn parallel_verification_matches_serial_and_reports_the_lowest_index() {
        let n = 2100; // above the parallel threshold
        let inp = input(n);
        let mut out = reference(Operation::Transpose, n, &inp);
        out[(2000 * n + 5) as usize] ^= 1;
        out[(1500 * n + 7) as usize] = POISON_WORD;
        let v = verify(Operation::Transpose, n, &inp, &out);
        assert_eq!(v.mismatches, 2);
        let m = v.first_mismatch.unwrap();
        assert_eq!((m.row, m.col), (1500, 7));
        assert_eq!(v.max_abs_error, f64::INFINITY);
    }

    #[test]
    fn blocked_verification_reports_the_lowest_index_not_the_first_visited() {
        // Blocks are compared 64 x 64 at a time: (1501, 3) is visited before (1500, 70).
        for n in [70, 2100] {
            let inp = input(n);
            let mut out = reference(Operation::Transpose, n, &inp);
            let hi = n - 1;
            out[(hi * n + 3) as usize] ^= 1;
            out[((hi - 1) * n + 66) as usize] ^= 1;
            let v = verify(Operation::Transpose, n, &inp, &out);
            assert_eq!(v.mismatches, 2);
            let m = v.first_mismatch.unwrap();
            assert_eq!((m.row, m.col), (hi - 1, 66), "n = {n}");
        }
    }

    #[test]
    fn useful_bytes_of_4096_is_128_mib() {
        assert_eq!(useful_bytes(4096), Some(134_217_728));
        assert_eq!(useful_bytes(u64::MAX), None);
    }
}
