//! Outputs with planted mismatches for judging the device checker against the CPU oracle:
//! the same cases on the emulated device (tests/emulate.rs) and on the GPU (tests/gpu.rs).

use klab_core::dtype::Dtype;
use klab_engine::inputs::{Generator, Pattern};
use klab_engine::verify::ExpectMap;
use klab_spec::rule::{self, Comparison, NanRule, Rule};

/// Every dtype klab compares, the float ones first.
pub const DTYPES: [Dtype; 12] = [
    Dtype::F32,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F64,
    Dtype::I32,
    Dtype::U8,
    Dtype::I8,
    Dtype::U16,
    Dtype::I16,
    Dtype::U32,
    Dtype::I64,
    Dtype::U64,
];

/// One output to judge: the kernel's bytes, the expected buffer (mapped by `map`), and the
/// magnitudes for scaled-sum.
pub struct Case {
    pub dtype: Dtype,
    pub cmp: Comparison,
    pub got: Vec<u8>,
    pub source: Vec<u8>,
    pub map: ExpectMap,
    pub magnitude: Option<Vec<f64>>,
    pub shape: Vec<u64>,
}

impl Case {
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// `f32 n = [33, 33], bitwise, NaN = NaN (same bits)`, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "{} shape {:?}, {}",
            self.dtype,
            self.shape,
            self.cmp.describe_for(self.dtype)
        )
    }

    /// The CPU oracle's verdict on the same output.
    pub fn cpu(&self) -> rule::Verdict {
        let size = self.dtype.size_bytes();
        let mut want = vec![0u8; self.got.len()];
        for i in 0..self.elements() {
            let from = self.map.source_index(i) as usize;
            let i = i as usize;
            want[i * size..(i + 1) * size]
                .copy_from_slice(&self.source[from * size..(from + 1) * size]);
        }
        rule::compare(
            self.dtype,
            &self.cmp,
            &self.got,
            &want,
            self.magnitude.as_deref(),
            &self.shape,
        )
        .unwrap()
    }
}

/// Bits of `v` as `dt`, little-endian, one element.
pub fn put(dt: Dtype, out: &mut [u8], i: usize, bits: u64) {
    dt.write_bits(out, i, bits);
}

/// `want` as the reference gives it, and `got`: the same with mismatches planted at the first
/// and the last element, NaN payloads on both sides, a -0.0 where +0.0 is expected (and the
/// reverse), near misses for the tolerance rules, and an infinity.
pub fn planted(dt: Dtype, n: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let size = dt.size_bytes();
    let mut want = vec![0u8; n * size];
    Generator {
        dtype: dt,
        elements: n as u64,
        k: 0,
        pattern: Pattern::Uniform {
            key: seed,
            lo: -3.0,
            hi: 3.0,
            scale: if dt.is_float() { 1.0 } else { 50.0 },
            within: false,
        },
    }
    .fill(&mut want);
    let mut got = want.clone();
    if n == 0 {
        return (got, want);
    }
    let flip = |b: u64| b ^ 1;
    put(dt, &mut got, 0, flip(dt.bits(&want, 0)));
    put(dt, &mut got, n - 1, dt.bits(&want, n - 1).wrapping_add(3));
    if dt.is_float() && n > 8 {
        let w = dt.bit_width();
        let sign = 1u64 << (w - 1);
        let inf = dt.bits_of_f64(f64::INFINITY);
        // NaN payloads: the same NaN, another payload, a NaN where a number is expected.
        for (i, g, wv) in [
            (1, inf | 1, inf | 1),
            (2, inf | 3, inf | 1),
            (3, inf | 2, dt.bits(&want, 3)),
            (4, 0, sign),
            (5, sign, 0),
            (6, inf, inf),
            (7, sign | inf, inf),
        ] {
            put(dt, &mut got, i, g);
            put(dt, &mut want, i, wv);
        }
    }
    // Near misses in the middle: one step each way.
    for i in (n / 3..n).step_by((n / 5).max(1)) {
        let b = dt.bits(&want, i);
        put(dt, &mut got, i, b.wrapping_add(1 + (i as u64 % 2)));
    }
    (got, want)
}

pub fn comparisons(dt: Dtype) -> Vec<Comparison> {
    let mut c = vec![Comparison::new(Rule::Bitwise)];
    if dt.is_float() {
        c.push(Comparison::new(Rule::Bitwise).with_nan(NanRule::NanAnyPayload));
        c.push(Comparison::new(Rule::Ulp { max: 1 }));
        c.push(Comparison::new(Rule::Ulp { max: 2 }).with_nan(NanRule::NanEqual));
        c.push(Comparison::new(Rule::AllClose {
            atol: 1e-3,
            rtol: 1e-2,
        }));
        c.push(
            Comparison::new(Rule::AllClose {
                atol: 0.0,
                rtol: 1e-6,
            })
            .with_nan(NanRule::NanAnyPayload),
        );
        c.push(Comparison::new(Rule::ScaledSum { k: 64.0 }));
        // The same per-element gate with an atol (the device adds it after the product).
        c.push(Comparison::new(Rule::ReferenceError {
            k: 4.0,
            atol: 1e-3,
            precision: rule::Precision::F32,
        }));
    } else {
        c.push(Comparison::new(Rule::Exact));
        c.push(Comparison::new(Rule::AllClose {
            atol: 1.0,
            rtol: 0.01,
        }));
    }
    c
}

/// Every shape of the built-in operations' ladders, in groups for `judge`: the transposes'
/// (up to N = 4097, f32 through the transpose map, bitwise and any-NaN) and the vector
/// operations' (the triad's and the reduction's sizes, each under a dtype and a rule that
/// rotate with it, and every dtype under every rule at the sizes that matter most), each
/// with planted mismatches at the first and the last element, NaN payloads and signed zeros.
pub fn ladder_cases(mut judge: impl FnMut(Vec<Case>)) {
    let ladder = |kernel: &str| -> Vec<u64> {
        let (_, decl) =
            klab_spec::registry::resolve(kernel, klab_spec::registry::Scope::Audit).unwrap();
        klab_engine::declared::ladder(&decl.op)
            .unwrap()
            .iter()
            .map(|s| s["n"] as u64)
            .collect()
    };
    // Transposes: f32 through the map, bitwise and any-NaN (cuBLAS's rule).
    let mut group = Vec::new();
    let transpose_ladder = ladder("naive");
    for (i, &n) in transpose_ladder.iter().enumerate() {
        let elements = (n * n) as usize;
        let (mut src, _) = planted(Dtype::F32, elements, n);
        let t = ExpectMap::Transpose { rows: n, cols: n };
        let mut got = vec![0u8; elements * 4];
        for i in 0..elements as u64 {
            let from = t.source_index(i) as usize;
            got[4 * i as usize..4 * i as usize + 4].copy_from_slice(&src[4 * from..4 * from + 4]);
        }
        // Plant in the output: first and last element, a signed zero. Past N = 1024 also
        // the next eight elements, so that the emulated compaction (a barrier per step of
        // its scan, each one a pass over the block's threads) stops early; below it, the few failures
        // are compacted across blocks.
        let last = elements - 1;
        got[0] ^= 1;
        got[4 * last + 3] ^= 0x80;
        if n > 1024 {
            for k in 1..9 {
                got[4 * k] ^= 2;
            }
        }
        if elements > 4 {
            src[4..8].copy_from_slice(&0x8000_0000u32.to_le_bytes()); // src[0][1] = -0.0
            let at = (0..elements as u64)
                .find(|i| t.source_index(*i) == 1)
                .unwrap() as usize;
            got[4 * at..4 * at + 4].copy_from_slice(&0u32.to_le_bytes());
        }
        for cmp in [
            Comparison::new(Rule::Bitwise),
            Comparison::new(Rule::Bitwise).with_nan(NanRule::NanAnyPayload),
        ] {
            let case = Case {
                dtype: Dtype::F32,
                cmp,
                got: got.clone(),
                source: src.clone(),
                map: t,
                magnitude: None,
                shape: vec![n, n],
            };
            assert!(
                case.cpu().failures >= 2.min(elements as u64),
                "n = {n}: the plants did not fail"
            );
            group.push(case);
        }
        if group.len() >= 16 || n > 2048 || i + 1 == transpose_ladder.len() {
            judge(std::mem::take(&mut group));
        }
    }
    // Vectors: every ladder size under a dtype and a rule that rotate with it, and every
    // dtype under every rule at the sizes that matter most (empty, one element, one past a
    // block, the reduction's odd and big sizes, the triad's million).
    let mut sizes = ladder("triad_f32");
    sizes.extend(ladder("reduce_guarded"));
    sizes.sort_unstable();
    sizes.dedup();
    let dtypes = DTYPES;
    let full = [0u64, 1, 257, 611, 16_483];
    let mut cases = Vec::new();
    for (s, &n) in sizes.iter().enumerate() {
        for (d, &dt) in dtypes.iter().enumerate() {
            let all = comparisons(dt);
            let rules: Vec<Comparison> = if full.contains(&n) || (n > 100_000 && d < 4) {
                all
            } else if (s + d) % 12 == 0 {
                vec![all[(s / 12 + d) % all.len()]]
            } else {
                continue;
            };
            let (got, want) = planted(dt, n as usize, n ^ dt.size_bytes() as u64);
            for cmp in rules {
                let scaled = matches!(
                    cmp.rule,
                    Rule::ScaledSum { .. } | Rule::ReferenceError { .. }
                );
                let magnitude = scaled.then(|| {
                    (0..n as usize)
                        .map(|i| (dt.to_f64(&want, i).abs() + 1.0).min(1e30) * (i % 3) as f64)
                        .collect()
                });
                cases.push(Case {
                    dtype: dt,
                    cmp,
                    got: got.clone(),
                    source: want.clone(),
                    map: ExpectMap::Direct,
                    magnitude,
                    shape: vec![n],
                });
            }
        }
    }
    let covered: std::collections::BTreeSet<u64> = cases.iter().map(|c| c.shape[0]).collect();
    assert_eq!(covered.len(), sizes.len(), "every ladder size is judged");
    judge(cases);
}

/// Every generator pattern for every dtype (three ranges, two or three sizes and input
/// positions, one past a chunk of 2^20 elements), and the transpose lab's f32 input at N = 4096 (exact
/// integers) and 4097 (distinct patterns with their patches, also rotated as a second input).
pub fn generators() -> Vec<Generator> {
    let dtypes = DTYPES;
    let mut v = Vec::new();
    for dt in dtypes {
        for (r, (lo, hi)) in [(-1.0, 1.0), (-300.0, 1e6), (0.0, 200.0)]
            .into_iter()
            .enumerate()
        {
            let patterns = vec![
                Pattern::Structural,
                Pattern::Uniform {
                    key: 77,
                    lo,
                    hi,
                    scale: 1.0,
                    within: false,
                },
                Pattern::Uniform {
                    key: 78,
                    lo,
                    hi,
                    scale: 1000.0,
                    within: false,
                },
                Pattern::Constant { lo, hi },
                Pattern::Special(klab_engine::inputs::special_bits(dt)),
                Pattern::Distinct {
                    cap: klab_engine::inputs::distinct_cap(dt),
                },
            ];
            for pattern in patterns {
                // Past a chunk of 2^20 elements under the first range only (the emulation's
                // cost is in the large inputs).
                let sizes: &[(u64, u64)] = if r == 0 {
                    &[(1, 0), (1000, 1), ((1 << 20) + 3, 2)]
                } else {
                    &[(1, 0), (1000, 1)]
                };
                for &(elements, k) in sizes {
                    v.push(Generator {
                        dtype: dt,
                        elements,
                        k,
                        pattern: pattern.clone(),
                    });
                }
            }
        }
    }
    // A float domain's random draw, whose ends the 16-bit floats cannot hold (0.10003
    // rounds past itself in f16): stepped back inside on both sides alike.
    for dt in DTYPES.into_iter().filter(|d| d.is_float()) {
        // [-0.0, -0.0]: an end equal to the draw keeps the draw's sign, as f64::clamp does.
        for (lo, hi) in [(-0.10003, 0.10003), (0.1, 0.702), (-0.0, -0.0)] {
            for (elements, k) in [(1000u64, 0u64), ((1 << 20) + 3, 1)] {
                v.push(Generator {
                    dtype: dt,
                    elements,
                    k,
                    pattern: Pattern::Uniform {
                        key: 79,
                        lo,
                        hi,
                        scale: 1.0,
                        within: true,
                    },
                });
            }
        }
    }
    for (n, rotate) in [(4096u64, 0u64), (4097, 0), (4097, 7919)] {
        v.push(Generator {
            dtype: Dtype::F32,
            elements: n * n,
            k: u64::from(rotate > 0),
            pattern: Pattern::DistinctF32 { rotate },
        });
    }
    v
}
