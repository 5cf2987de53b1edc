//! Verification on the device, and how it is kept honest.
//!
//! A [`DeviceCheck`] asks a backend's device checker (`kernels/verify.cu`) to judge one
//! output against its expected values under a [`Comparison`]: from a buffer (a reference's
//! output uploaded once, or a copy's input) or from an input through an [`ExpectMap`] (a
//! transpose's). Only a [`DeviceSummary`] comes back: the failure count, the largest
//! errors, and the first [`FIRST_K`] failing elements with both values. [`DeviceSummary::
//! verdict`] turns it into the same [`Verdict`] the CPU oracle ([`klab_spec::rule::compare`])
//! gives, field for field, so every gate reads one type whichever checker ran.
//!
//! The CPU oracle stays the independent reference: under a [`VerifyPolicy`] with the
//! device checker, the first validation of every workload whose compared outputs are at
//! most [`CROSS_CHECK_MAX_BYTES`] (every validation under `paranoid`) is judged by both,
//! and any [`disagreement`] is a klab error, never a pass. The mutation audit builds
//! wrong checkers ([`CheckerMutant`]) to show that the cross-check catches them.

use serde::{Deserialize, Serialize};

use klab_core::dtype::Dtype;
use klab_spec::rule::{self, Comparison, Failure, NanRule, Rule, Verdict};

/// Failing elements the device checker returns (the verdict's [`Verdict::failing`]).
pub const FIRST_K: usize = rule::FIRST_FAILURES;

/// The device checker's threads per block (`VERIFY_THREADS` in `kernels/verify.cu`).
pub const VERIFY_THREADS: u32 = 256;

/// The CPU oracle also judges the first validation of a workload whose compared outputs
/// hold at most this many bytes (128 MiB: the transpose lab's N = 4097, not 8193).
pub const CROSS_CHECK_MAX_BYTES: u64 = 1 << 27;

/// Which checker judges outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Checker {
    /// Inputs made and outputs judged on the device, cross-checked on the CPU oracle (the
    /// oracle alone where klab's checker cannot be loaded)
    #[default]
    Device,
    /// The CPU oracle alone: inputs made on the host, every output downloaded and judged
    /// there
    Cpu,
}

/// A wrong device checker, for the mutation audit (`KLAB_VERIFY_MUTANT` in
/// `kernels/verify.cu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CheckerMutant {
    /// Reports no failures.
    NoFailures,
    /// Never judges the last element.
    SkipsLast,
    /// Takes -0.0 for +0.0 under the bitwise rule.
    NegativeZero,
}

impl CheckerMutant {
    pub const ALL: [CheckerMutant; 3] = [
        CheckerMutant::NoFailures,
        CheckerMutant::SkipsLast,
        CheckerMutant::NegativeZero,
    ];

    /// The value of `KLAB_VERIFY_MUTANT` that builds it.
    pub fn define(self) -> u32 {
        match self {
            CheckerMutant::NoFailures => 1,
            CheckerMutant::SkipsLast => 2,
            CheckerMutant::NegativeZero => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CheckerMutant::NoFailures => "checker_no_failures",
            CheckerMutant::SkipsLast => "checker_skips_last",
            CheckerMutant::NegativeZero => "checker_negative_zero",
        }
    }

    /// The labelled wrong kernel whose output exposes this checker: one that fails (every
    /// mutant), fails at the last element (skips-last), and writes +0.0 for -0.0
    /// (negative-zero).
    pub fn exposed_by(self) -> &'static str {
        match self {
            CheckerMutant::NoFailures | CheckerMutant::SkipsLast => "mut_skip_ragged_tile",
            CheckerMutant::NegativeZero => "mut_canonical_zero",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            CheckerMutant::NoFailures => "a device checker that always reports zero mismatches",
            CheckerMutant::SkipsLast => "a device checker that skips the last element",
            CheckerMutant::NegativeZero => "a device checker that treats -0.0 as +0.0",
        }
    }
}

/// What a check's error says when the CPU cross-check catches the device checker (the
/// mutation audit recognises its wrong checkers by it).
pub const DISAGREEMENT: &str = "the device checker and the CPU oracle disagree";

/// How outputs are verified in one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VerifyPolicy {
    pub checker: Checker,
    /// Cross-check every validation on the CPU, at every size.
    pub paranoid: bool,
    /// A wrong device checker (the mutation audit's).
    pub mutant: Option<CheckerMutant>,
    /// The process runs under compute-sanitizer, which reports every driver call that fails
    /// as an error of the program's: klab then makes none it expects to fail (it asks for no
    /// parameter past those a kernel's manifest passes, [`crate::backend::CompiledParams`]).
    /// Absent from a spec: not under a sanitizer.
    #[serde(default)]
    pub sanitized: bool,
}

/// Where an output's expected value for element `i` is in the expected buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectMap {
    /// At `i`.
    Direct,
    /// The output is `rows x cols` row-major and the buffer its transpose: element `[r][c]`
    /// is at `c * rows + r`.
    Transpose { rows: u64, cols: u64 },
}

impl ExpectMap {
    /// The expected buffer's index of output element `i`.
    pub fn source_index(self, i: u64) -> u64 {
        match self {
            ExpectMap::Direct => i,
            ExpectMap::Transpose { rows, cols } => (i % cols) * rows + i / cols,
        }
    }
}

/// One output to judge on the device.
pub struct DeviceCheck<'a, B> {
    pub got: &'a B,
    pub want: &'a B,
    pub map: ExpectMap,
    /// The rule's per-element scale, as f64: scaled-sum's magnitudes, reference-error's
    /// reference errors.
    pub magnitude: Option<&'a B>,
    pub dtype: Dtype,
    pub comparison: Comparison,
    pub elements: u64,
}

/// The device checker's code of a dtype (`DT_*` in `kernels/verify.cu`).
pub fn dtype_code(dt: Dtype) -> u64 {
    match dt {
        Dtype::U8 => 0,
        Dtype::I8 => 1,
        Dtype::U16 => 2,
        Dtype::I16 => 3,
        Dtype::U32 => 4,
        Dtype::I32 => 5,
        Dtype::U64 => 6,
        Dtype::I64 => 7,
        Dtype::F16 => 8,
        Dtype::Bf16 => 9,
        Dtype::F32 => 10,
        Dtype::F64 => 11,
    }
}

/// Blocks of the device checker's grid for `elements` under `map` (at most `max_blocks`),
/// and the contiguous chunk of elements each owns: under the transpose map a whole number
/// of bands of 16 output rows (the checker walks a band in tiles of 16 rows by 64 columns).
pub fn grid(elements: u64, map: ExpectMap, max_blocks: u64) -> (u64, u64) {
    let max_blocks = max_blocks.max(1);
    let chunk = match map {
        ExpectMap::Transpose { rows, cols } if cols > 0 => {
            let band_rows = rows.div_ceil(max_blocks).div_ceil(16).max(1) * 16;
            band_rows * cols
        }
        // At least a tile of threads per block, so small outputs take few blocks.
        _ => elements.div_ceil(max_blocks).max(u64::from(VERIFY_THREADS)),
    };
    let chunk = chunk.max(1);
    (elements.div_ceil(chunk).max(1), chunk)
}

/// Words of the summary buffer the device checker writes.
pub const SUMMARY_WORDS: usize = 4 + 3 * FIRST_K;

impl<B> DeviceCheck<'_, B> {
    /// The checker's parameter words (`VP_*` in `kernels/verify.cu`) for a grid with
    /// `chunk` elements per block.
    pub fn words(&self, chunk: u64) -> Vec<u64> {
        let (rule, atol, rtol, factor, ulp_max) = match self.comparison.rule {
            Rule::Bitwise => (0, 0.0, 0.0, 0.0, 0),
            Rule::Exact => (1, 0.0, 0.0, 0.0, 0),
            Rule::Ulp { max } => (2, 0.0, 0.0, 0.0, max),
            Rule::AllClose { atol, rtol } => (3, atol, rtol, 0.0, 0),
            Rule::ScaledSum { k } => (
                4,
                0.0,
                0.0,
                rule::scaled_factor(self.dtype.eps().unwrap_or(0.0), k),
                0,
            ),
            // The same gate, `|got - want| <= factor * scale[i] + atol`, over the
            // reference's own errors.
            Rule::ReferenceError { k, atol, .. } => (4, atol, 0.0, k, 0),
        };
        let nan = match self.comparison.nan {
            NanRule::NanEqual => 0,
            NanRule::NanAnyPayload => 1,
            NanRule::NanFails => 2,
        };
        let (map, rows, cols) = match self.map {
            ExpectMap::Direct => (0, 0, 0),
            ExpectMap::Transpose { rows, cols } => (1, rows, cols),
        };
        vec![
            self.elements,
            dtype_code(self.dtype),
            rule,
            nan,
            f64::to_bits(atol),
            f64::to_bits(rtol),
            f64::to_bits(factor),
            ulp_max,
            map,
            rows,
            cols,
            chunk,
            FIRST_K as u64,
        ]
    }
}

/// What the device checker found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSummary {
    pub failures: u64,
    pub max_abs_bits: u64,
    pub max_rel_bits: u64,
    pub max_ulp: u64,
    /// The first failures in index order: (index, got bits, want bits).
    pub first: Vec<(u64, u64, u64)>,
}

impl DeviceSummary {
    /// From the summary buffer's words (the failing triples the count says were written).
    pub fn from_words(words: &[u64]) -> DeviceSummary {
        let failures = words[0];
        let shown = (failures as usize).min(FIRST_K);
        DeviceSummary {
            failures,
            max_abs_bits: words[1],
            max_rel_bits: words[2],
            max_ulp: words[3],
            first: (0..shown)
                .map(|k| (words[4 + 3 * k], words[5 + 3 * k], words[6 + 3 * k]))
                .collect(),
        }
    }

    /// The verdict, exactly as [`rule::compare`] states it for the same output.
    pub fn verdict(
        &self,
        dtype: Dtype,
        cmp: &Comparison,
        shape: &[u64],
        scale: Option<&[f64]>,
    ) -> Verdict {
        let elements = shape.iter().product();
        Verdict {
            elements,
            failures: self.failures,
            max_abs: f64::from_bits(self.max_abs_bits),
            max_rel: f64::from_bits(self.max_rel_bits),
            max_ulp: dtype.is_float().then_some(self.max_ulp),
            first: self.first.first().map(|&(index, g, w)| {
                let at = scale.and_then(|s| s.get(index as usize).copied());
                Failure::at(dtype, cmp.rule, index, shape, (g, w), at)
            }),
            failing: self.first.iter().map(|f| f.0).collect(),
            rule: cmp.describe_for(dtype),
        }
    }

    /// The summary a correct device checker returns for `verdict` (the host backend's
    /// stand-in for the device). `bits(i)` gives (got, want) bits of element `i`.
    pub fn of_verdict(verdict: &Verdict, bits: impl Fn(u64) -> (u64, u64)) -> DeviceSummary {
        DeviceSummary {
            failures: verdict.failures,
            max_abs_bits: verdict.max_abs.to_bits(),
            max_rel_bits: verdict.max_rel.to_bits(),
            max_ulp: verdict.max_ulp.unwrap_or(0),
            first: verdict
                .failing
                .iter()
                .map(|&i| {
                    let (g, w) = bits(i);
                    (i, g, w)
                })
                .collect(),
        }
    }
}

/// Where the device checker's verdict and the CPU oracle's differ (None: they agree on
/// every field, the errors to the bit).
pub fn disagreement(device: &Verdict, cpu: &Verdict) -> Option<String> {
    let mut d = Vec::new();
    if device.failures != cpu.failures {
        d.push(format!(
            "failures {} on the device, {} on the CPU",
            device.failures, cpu.failures
        ));
    }
    for (what, a, b) in [
        ("max abs", device.max_abs, cpu.max_abs),
        ("max rel", device.max_rel, cpu.max_rel),
    ] {
        if a.to_bits() != b.to_bits() {
            d.push(format!("{what} {a:e} on the device, {b:e} on the CPU"));
        }
    }
    if device.max_ulp != cpu.max_ulp {
        d.push(format!(
            "max ulp {:?} on the device, {:?} on the CPU",
            device.max_ulp, cpu.max_ulp
        ));
    }
    if device.failing != cpu.failing {
        d.push(format!(
            "first failing elements {:?} on the device, {:?} on the CPU",
            device.failing, cpu.failing
        ));
    }
    if device.first != cpu.first {
        d.push("the first failure's values differ".to_string());
    }
    (!d.is_empty()).then(|| d.join("; "))
}

/// The device checker's answer computed on the host, as a wrong checker `mutant` (or a
/// correct one) would give it: the host backend's device checker, so the gates' use of
/// the device path and the cross-check are tested without a GPU.
pub fn host_summary(
    dtype: Dtype,
    cmp: &Comparison,
    got: &[u8],
    want_mapped: &[u8],
    magnitude: Option<&[f64]>,
    mutant: Option<CheckerMutant>,
) -> Result<DeviceSummary, rule::RuleError> {
    let size = dtype.size_bytes();
    let n = got.len() / size;
    let (mut got, mut want) = (got.to_vec(), want_mapped.to_vec());
    let mut judged = n;
    match mutant {
        Some(CheckerMutant::SkipsLast) => judged = n.saturating_sub(1),
        Some(CheckerMutant::NegativeZero) if cmp.rule == Rule::Bitwise && dtype.is_float() => {
            let sign = 1u64 << (dtype.bit_width() - 1);
            for buf in [&mut got, &mut want] {
                for i in 0..n {
                    if dtype.bits(buf, i) == sign {
                        dtype.write_bits(buf, i, 0);
                    }
                }
            }
        }
        _ => {}
    }
    let v = rule::compare(
        dtype,
        cmp,
        &got[..judged * size],
        &want[..judged * size],
        magnitude.map(|m| &m[..judged]),
        &[judged as u64],
    )?;
    let mut s = DeviceSummary::of_verdict(&v, |i| {
        (dtype.bits(&got, i as usize), dtype.bits(&want, i as usize))
    });
    if mutant == Some(CheckerMutant::NoFailures) {
        s.failures = 0;
        s.first.clear();
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_reads_back_into_the_cpu_verdict() {
        let dt = Dtype::F32;
        let cmp = Comparison::new(Rule::AllClose {
            atol: 1e-6,
            rtol: 0.0,
        });
        let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let got = f(&[1.0, 2.5, f32::NAN, 4.0, -0.0, 7.0]);
        let want = f(&[1.0, 2.0, 3.0, 4.0, 0.0, 7.5]);
        let cpu = rule::compare(dt, &cmp, &got, &want, None, &[2, 3]).unwrap();
        let s = host_summary(dt, &cmp, &got, &want, None, None).unwrap();
        assert_eq!(s.verdict(dt, &cmp, &[2, 3], None), cpu);
        assert_eq!(cpu.failing, vec![1, 2, 5]);
        assert!(disagreement(&s.verdict(dt, &cmp, &[2, 3], None), &cpu).is_none());
    }

    #[test]
    fn each_checker_mutant_disagrees_with_the_cpu_on_its_planted_output() {
        let dt = Dtype::F32;
        let cmp = Comparison::default();
        let f = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        // Wrong first and last elements, and a +0.0 where -0.0 is expected.
        let want = f(&[1.0, -0.0, 3.0, 4.0]);
        let got = f(&[9.0, 0.0, 3.0, 5.0]);
        let cpu = rule::compare(dt, &cmp, &got, &want, None, &[4]).unwrap();
        assert_eq!(cpu.failures, 3);
        for m in CheckerMutant::ALL {
            let s = host_summary(dt, &cmp, &got, &want, None, Some(m)).unwrap();
            let d = disagreement(&s.verdict(dt, &cmp, &[4], None), &cpu);
            assert!(d.is_some(), "{} agreed with the CPU", m.name());
        }
    }

    #[test]
    fn the_grid_covers_every_element_once() {
        for (n, max) in [
            (0u64, 8),
            (1, 8),
            (255, 8),
            (257, 8),
            (1 << 28, 1056),
            (12345, 1),
        ] {
            let (blocks, chunk) = grid(n, ExpectMap::Direct, max);
            assert!(blocks <= max.max(1));
            assert!(blocks * chunk >= n, "n = {n}");
            assert!(
                n == 0 || (blocks - 1) * chunk < n,
                "n = {n}: an empty block"
            );
        }
        for (side, max) in [(1u64, 8), (33, 3), (4097, 3), (16384, 1056), (46341, 1056)] {
            let map = ExpectMap::Transpose {
                rows: side,
                cols: side,
            };
            let n = side * side;
            let (blocks, chunk) = grid(n, map, max);
            assert!(blocks <= max, "side {side}");
            assert_eq!(chunk % (16 * side), 0, "side {side}: whole bands");
            assert!(
                blocks * chunk >= n && (blocks - 1) * chunk < n,
                "side {side}"
            );
        }
    }

    #[test]
    fn the_transpose_map_finds_the_source_element() {
        let m = ExpectMap::Transpose { rows: 3, cols: 5 };
        // out[1][4] = in[4][1]: in is 5 x 3.
        assert_eq!(m.source_index(5 + 4), 4 * 3 + 1);
    }
}
