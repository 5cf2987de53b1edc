//! The four built-in operations as declared operations. A manifest that says
//! `operation = "transpose"` with `block`, `elements_per_block` and `grid_rounding` states
//! the same contract a user would write in `[kernel.op]`: a size variable `n`, buffers with
//! roles, dtypes, lengths and comparison rules, a launch over `n`, useful bytes and FLOPs.
//! [`declare`] writes that [`DeclaredOp`]; its reference is the operation's CPU oracle
//! ([`BuiltinOracle`], run through the same [`Reference`] seam as a user's C function). So
//! every kernel, built-in or brought, is checked, timed and profiled by one workload
//! ([`crate::general::DeclaredWorkload`]) and one ladder ([`crate::check::run`]).
//!
//! What each contract declares:
//!
//! | operation | buffers (f32) | rule | reference |
//! |---|---|---|---|
//! | copy | `out[n][n]`, `in[n][n]` | bitwise (or any NaN matches, `equality`) | index arithmetic |
//! | transpose | `out[n][n]`, `in[n][n]` | bitwise (or any NaN matches) | index arithmetic |
//! | triad | `x[n]`, `z[n]`, `y[n]` | allclose atol 2e-6 rtol 2e-5 | float64 FMA, one cast |
//! | reduce-sum | `in[n]`, `partials[ceil(n / e)]` | scaled-sum over `e` terms | float64 compensated sum per chunk |
//!
//! A reduce-sum kernel writes one partial per chunk of `e` elements (its
//! `elements_per_block`); the contract's partials buffer always has `ceil(n / e)`
//! elements, so a grid that rounds down leaves the last partial poisoned and fails.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::declared::{
    BufferSpec, DeclaredOp, DeclaredOpSpec, FieldError, ReferenceSpec, Role, ScalarSpec, SizeSpec,
};
use crate::device::Dim3;
use crate::dtype::Dtype;
use crate::expr::Expr;
use crate::general::{Reference, Shape};
use crate::manifest::{OpKind, Param, Rounding, ScalarType};
use crate::ops::{reduce, transpose, triad};
use crate::rule::{NanRule, RuleSpec};

/// A built-in operation's CPU oracle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BuiltinOracle {
    /// `out[r][c] = in[r][c]`.
    Copy,
    /// `out[c][r] = in[r][c]`.
    Transpose,
    /// `y[i] = fmaf(alpha, x[i], z[i])`.
    Triad,
    /// `partials[b]` = the sum of `in[b * chunk .. (b + 1) * chunk]`.
    ReduceSum { chunk: u64 },
}

/// The values of alpha the triad's cases cycle through: the seed's 1.25 first (what bench
/// and rounds time), then a small, a large and a negative one.
pub const TRIAD_ALPHAS: [f64; 4] = [triad::ALPHA as f64, 0.25, 2.75, -1.5];

/// The shape `bench`, `rounds` and `profile` time a built-in operation at.
pub fn bench_n(op: OpKind) -> u64 {
    match op {
        OpKind::Copy | OpKind::Transpose => 4096,
        OpKind::Triad => triad::N,
        OpKind::ReduceSum => reduce::LARGE_N,
        OpKind::Declared => 1,
    }
}

/// The check's sizes for a built-in contract: 1, ragged sizes e + r over the remainder
/// classes r of the launch's chunk e ([`remainders`]), block-exact contrasts (e, 4e, 1024)
/// and the operation's own large sizes; 0 for the vector operations. The index-overflow size
/// is added by the ladder itself ([`crate::general::overflow_shape`]). Sizes past u64 are
/// left out (a chunk that large is refused later, when its buffers cannot be sized).
pub fn ladder_values(op: OpKind, elements_per_block: &[u64]) -> Vec<u64> {
    let e = elements_per_block.first().copied().unwrap_or(1).max(1);
    let mut v: Vec<u64> = vec![1, e, 1024];
    v.extend(e.checked_mul(4));
    v.extend(remainders(e).into_iter().filter_map(|r| e.checked_add(r)));
    match op {
        OpKind::Copy | OpKind::Transpose => v.push(4097),
        OpKind::Triad => v.extend([0, triad::N]),
        OpKind::ReduceSum => v.extend([0, reduce::ODD_N, reduce::BIG_N, reduce::LARGE_N]),
        OpKind::Declared => {}
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Chunks up to this many elements (every built-in's) get every remainder class in the
/// ladder: at most 1023 ragged sizes.
pub const ALL_REMAINDERS_UP_TO: u64 = 1024;

/// How many remainder classes a larger chunk gets.
pub const SAMPLED_REMAINDERS: usize = 32;

/// The remainders r in 1..e the ladder tries: all of them for a chunk of at most
/// [`ALL_REMAINDERS_UP_TO`], else [`SAMPLED_REMAINDERS`] of them, never enumerated: the
/// edges (1, 2, e/2, e - 2, e - 1) and the rest drawn from a generator seeded by e, so the
/// same manifest always gets the same sizes.
pub fn remainders(e: u64) -> Vec<u64> {
    if e <= ALL_REMAINDERS_UP_TO {
        return (1..e).collect();
    }
    let mut r = vec![1, 2, e / 2, e - 2, e - 1];
    let mut i = 0;
    while r.len() < SAMPLED_REMAINDERS {
        r.push(1 + crate::inputs::splitmix_at(e, i) % (e - 1));
        i += 1;
    }
    r.sort_unstable();
    r.dedup();
    r
}

fn expr(text: &str) -> Expr {
    Expr::parse(text).expect("the built-in contracts' expressions parse")
}

fn f32_buffer(len: &str, role: Role) -> BufferSpec {
    BufferSpec {
        dtype: Dtype::F32,
        len: expr(len),
        role,
        shape: None,
        axes: None,
        compare: None,
        nan: None,
        range: None,
        index_into: None,
        offsets: None,
    }
}

/// The parameter list as a declared operation writes it (`"n:i32"`).
fn param_texts(params: &[Param]) -> Vec<String> {
    params
        .iter()
        .map(|p| match p {
            Param::Buffer(name) => name.clone(),
            Param::Scalar(name, ty) => format!(
                "{name}:{}",
                match ty {
                    ScalarType::I32 => "i32",
                    ScalarType::U64 => "u64",
                    ScalarType::F32 => "f32",
                }
            ),
        })
        .collect()
}

/// A built-in contract as its manifest entry states it: the operation, the kernel's
/// parameters, and the launch over `n`.
#[derive(Debug, Clone)]
pub struct Contract<'a> {
    pub operation: OpKind,
    pub params: &'a [Param],
    pub block: Dim3,
    /// Matrix elements (per axis) or vector elements one block covers.
    pub elements_per_block: &'a [u64],
    pub grid_rounding: Rounding,
    pub dynamic_shared_bytes: u32,
    /// How copy and transpose outputs are compared (`equality = "nan-any-payload"`).
    pub equality: transpose::Equality,
}

/// The declared operation a built-in contract states (its launch fields become the grid,
/// block and shared-memory expressions).
pub fn declare(decl: &Contract) -> Result<DeclaredOp, FieldError> {
    let op = decl.operation;
    let per = |axis: usize| decl.elements_per_block.get(axis).copied().unwrap_or(1);
    let blocks = |axis: usize| match decl.grid_rounding {
        Rounding::Up => expr(&format!("ceil_div(n, {})", per(axis))),
        Rounding::Down => expr(&format!("n / {}", per(axis))),
    };
    let grid = (0..op.dims()).map(blocks).collect();
    let b = decl.block;
    let block = vec![
        expr(&b.x.to_string()),
        expr(&b.y.to_string()),
        expr(&b.z.to_string()),
    ];
    let mut buffers = BTreeMap::new();
    let mut scalars = BTreeMap::new();
    let (oracle, min) = match op {
        OpKind::Copy | OpKind::Transpose => {
            let mut out = f32_buffer("n * n", Role::Out);
            out.shape = Some(vec![expr("n"), expr("n")]);
            out.axes = Some(vec!["row".into(), "col".into()]);
            out.compare = Some(RuleSpec::Bitwise);
            if decl.equality == transpose::Equality::NanAnyPayload {
                out.nan = Some(NanRule::NanAnyPayload);
            }
            buffers.insert("out".to_string(), out);
            buffers.insert("in".to_string(), f32_buffer("n * n", Role::In));
            let oracle = if op == OpKind::Copy {
                BuiltinOracle::Copy
            } else {
                BuiltinOracle::Transpose
            };
            (oracle, 1)
        }
        OpKind::Triad => {
            buffers.insert("x".to_string(), f32_buffer("n", Role::In));
            buffers.insert("z".to_string(), f32_buffer("n", Role::In));
            let mut y = f32_buffer("n", Role::Out);
            y.compare = Some(RuleSpec::AllClose {
                atol: triad::ATOL,
                rtol: triad::RTOL,
            });
            buffers.insert("y".to_string(), y);
            scalars.insert(
                "alpha".to_string(),
                ScalarSpec {
                    ty: Dtype::F32,
                    values: TRIAD_ALPHAS.to_vec(),
                    range: None,
                },
            );
            (BuiltinOracle::Triad, 0)
        }
        OpKind::ReduceSum => {
            let chunk = per(0);
            buffers.insert("in".to_string(), f32_buffer("n", Role::In));
            let mut partials = f32_buffer(&format!("ceil_div(n, {chunk})"), Role::Out);
            partials.compare = Some(RuleSpec::ScaledSum(chunk.to_string()));
            buffers.insert("partials".to_string(), partials);
            (BuiltinOracle::ReduceSum { chunk }, 0)
        }
        OpKind::Declared => {
            return Err((
                "operation".into(),
                "a declared operation states its own [kernel.op]".into(),
            ))
        }
    };
    let (useful_bytes, flops) = work_exprs(op).ok_or_else(|| {
        (
            "operation".to_string(),
            "a declared operation states its own [kernel.op]".to_string(),
        )
    })?;
    let spec = DeclaredOpSpec {
        sizes: BTreeMap::from([(
            "n".to_string(),
            SizeSpec {
                values: Some(ladder_values(op, decl.elements_per_block)),
                min,
                max: None,
                launch: false,
            },
        )]),
        buffers,
        scalars,
        grid,
        block,
        dynamic_shared_bytes: (decl.dynamic_shared_bytes != 0)
            .then(|| expr(&decl.dynamic_shared_bytes.to_string())),
        useful_bytes: expr(&useful_bytes),
        flops: flops.as_deref().map(expr),
        reference: ReferenceSpec::Builtin(oracle),
        bench: Some(BTreeMap::from([("n".to_string(), bench_n(op))])),
        cases: Vec::new(),
        slices: None,
    };
    spec.validate(&param_texts(decl.params))
}

/// A built-in operation's useful bytes and FLOPs per launch, as expressions in `n`: what
/// its contract declares ([`declare`]) and what a receipt's workload is checked against
/// ([`builtin_work`]). `None` for a declared operation, which states its own.
fn work_exprs(op: OpKind) -> Option<(String, Option<String>)> {
    match op {
        OpKind::Copy | OpKind::Transpose => Some(("8 * n * n".into(), None)),
        OpKind::Triad => Some((
            format!("{} * n", triad::BYTES_PER_ELEMENT),
            Some(format!("{} * n", triad::FLOPS_PER_ELEMENT)),
        )),
        OpKind::ReduceSum => Some(("4 * n".into(), Some("max(n, 1) - 1".into()))),
        OpKind::Declared => None,
    }
}

/// The useful bytes and FLOPs (0 when the contract declares none) one launch of built-in
/// `op` does at size `n`, from the same expressions its contract declares; `None` for a
/// declared operation, or when `n` is so large the counts do not fit.
pub fn builtin_work(op: OpKind, n: u64) -> Option<(u64, u64)> {
    let (bytes, flops) = work_exprs(op)?;
    let vars = BTreeMap::from([("n".to_string(), i64::try_from(n).ok()?)]);
    let bytes = expr(&bytes).eval_u64(&vars).ok()?;
    let flops = match flops {
        Some(f) => expr(&f).eval_u64(&vars).ok()?,
        None => 0,
    };
    Some((bytes, flops))
}

/// A built-in oracle bound to a kernel's buffer order.
pub struct BuiltinReference {
    oracle: BuiltinOracle,
    /// The buffers' names in the kernel's order (what [`Reference::run`] is given).
    names: Vec<String>,
}

impl BuiltinReference {
    /// The oracle of `op` (whose reference must be [`ReferenceSpec::Builtin`]).
    pub fn for_op(op: &DeclaredOp) -> Option<BuiltinReference> {
        let ReferenceSpec::Builtin(oracle) = op.spec.reference else {
            return None;
        };
        let names = op
            .params
            .iter()
            .filter_map(|p| match p {
                crate::declared::OpParam::Buffer(b) => Some(b.clone()),
                _ => None,
            })
            .collect();
        Some(BuiltinReference { oracle, names })
    }

    fn index(&self, name: &str) -> Result<usize, String> {
        self.names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| format!("the built-in oracle needs a buffer '{name}'"))
    }
}

/// Two distinct buffers of `buffers`, the first mutable.
fn pair<'a>(buffers: &'a mut [&mut [u8]], out: usize, input: usize) -> (&'a mut [u8], &'a [u8]) {
    if out < input {
        let (a, b) = buffers.split_at_mut(input);
        (&mut *a[out], &*b[0])
    } else {
        let (a, b) = buffers.split_at_mut(out);
        (&mut *b[0], &*a[input])
    }
}

/// Square tiles of the transpose oracle: it reads the input down a column, so a tile at a
/// time keeps those reads in cache.
const TILE: usize = 64;

impl Reference for BuiltinReference {
    fn run(
        &self,
        shape: &Shape,
        buffers: &mut [&mut [u8]],
        _ints: &[i64],
        floats_in: &[f64],
    ) -> Result<(), String> {
        let n = *shape.get("n").ok_or("the built-in oracle needs n")? as usize;
        let f32_at = |b: &[u8], i: usize| {
            f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
        };
        match self.oracle {
            BuiltinOracle::Copy => {
                let (out, input) = pair(buffers, self.index("out")?, self.index("in")?);
                out.copy_from_slice(input);
            }
            BuiltinOracle::Transpose => {
                let (out, input) = pair(buffers, self.index("out")?, self.index("in")?);
                // Parts of TILE output rows; within a part, tiles of TILE input rows.
                crate::par::for_parts(out, 4 * n.max(1) * TILE, |p, rows| {
                    let c_first = p * TILE;
                    let c_count = rows.len() / (4 * n.max(1));
                    for r0 in (0..n).step_by(TILE) {
                        for dc in 0..c_count {
                            let c = c_first + dc;
                            for r in r0..(r0 + TILE).min(n) {
                                // out[c][r] = in[r][c]
                                let (o, i) = (4 * (dc * n + r), 4 * (r * n + c));
                                rows[o..o + 4].copy_from_slice(&input[i..i + 4]);
                            }
                        }
                    }
                });
            }
            BuiltinOracle::Triad => {
                let alpha = *floats_in.first().ok_or("triad needs alpha")? as f32;
                let (x, z, y) = (self.index("x")?, self.index("z")?, self.index("y")?);
                let mut out = std::mem::take(&mut buffers[y]);
                let (xb, zb) = (&*buffers[x], &*buffers[z]);
                crate::par::for_chunks(out, 4, |c, part| {
                    let base = c * crate::par::CHUNK_ELEMENTS;
                    for (j, e) in part.chunks_exact_mut(4).enumerate() {
                        let r = triad::reference(alpha, f32_at(xb, base + j), f32_at(zb, base + j));
                        e.copy_from_slice(&r.to_le_bytes());
                    }
                });
                buffers[y] = std::mem::take(&mut out);
            }
            BuiltinOracle::ReduceSum { chunk } => {
                let (x, p) = (self.index("in")?, self.index("partials")?);
                let chunk = chunk.max(1) as usize;
                let mut out = std::mem::take(&mut buffers[p]);
                let xb = &*buffers[x];
                let elements = xb.len() / 4;
                crate::par::for_chunks(out, 4, |c, part| {
                    let base = c * crate::par::CHUNK_ELEMENTS;
                    for (j, e) in part.chunks_exact_mut(4).enumerate() {
                        let start = ((base + j) * chunk).min(elements);
                        let end = (start + chunk).min(elements);
                        let values: Vec<f32> = (start..end).map(|i| f32_at(xb, i)).collect();
                        e.copy_from_slice(&(reduce::oracle(&values) as f32).to_le_bytes());
                    }
                });
                buffers[p] = std::mem::take(&mut out);
            }
        }
        Ok(())
    }

    fn device_expectation(&self, shape: &Shape) -> Vec<(usize, usize, crate::verify::ExpectMap)> {
        let n = shape.get("n").copied().unwrap_or(0).max(0) as u64;
        let map = match self.oracle {
            BuiltinOracle::Copy => crate::verify::ExpectMap::Direct,
            BuiltinOracle::Transpose => crate::verify::ExpectMap::Transpose { rows: n, cols: n },
            BuiltinOracle::Triad | BuiltinOracle::ReduceSum { .. } => return Vec::new(),
        };
        match (self.index("out"), self.index("in")) {
            (Ok(out), Ok(input)) => vec![(out, input, map)],
            _ => Vec::new(),
        }
    }

    fn describe(&self) -> String {
        match self.oracle {
            BuiltinOracle::Copy | BuiltinOracle::Transpose => {
                "host index arithmetic (no kernel code)".into()
            }
            BuiltinOracle::Triad => triad::REFERENCE.into(),
            BuiltinOracle::ReduceSum { chunk } => {
                format!("{} per chunk of {chunk} elements", reduce::REFERENCE)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{resolve, Scope};

    fn op_of(name: &str) -> DeclaredOp {
        let (_, d) = resolve(name, Scope::Audit).unwrap();
        (*d.op).clone()
    }

    fn run(op: &DeclaredOp, n: i64, bufs: &mut [Vec<u8>], floats: &[f64]) {
        let r = BuiltinReference::for_op(op).unwrap();
        let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        r.run(&Shape::from([("n".into(), n)]), &mut views, &[n], floats)
            .unwrap();
    }

    fn floats(bytes: &[u8]) -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn builtin_work_is_what_the_contracts_declare() {
        assert_eq!(
            builtin_work(OpKind::Transpose, 4096),
            Some((134_217_728, 0))
        );
        assert_eq!(builtin_work(OpKind::Copy, 4097), Some((134_283_272, 0)));
        assert_eq!(
            builtin_work(OpKind::Triad, 1_000_003),
            Some((12_000_036, 2_000_006))
        );
        assert_eq!(builtin_work(OpKind::ReduceSum, 10), Some((40, 9)));
        assert_eq!(builtin_work(OpKind::Declared, 10), None);
        assert_eq!(builtin_work(OpKind::Transpose, u64::MAX), None);
        assert_eq!(builtin_work(OpKind::Transpose, 1 << 40), None, "overflows");
    }

    #[test]
    fn every_builtin_kernel_declares_its_contract() {
        for ns in &crate::registry::registry().namespaces {
            for k in &ns.manifest.kernels {
                let op = &k.op;
                assert!(op.spec.sizes.contains_key("n") || k.operation == OpKind::Declared);
                if k.operation != OpKind::Declared {
                    assert!(
                        matches!(op.spec.reference, ReferenceSpec::Builtin(_)),
                        "{}",
                        k.name
                    );
                }
            }
        }
    }

    #[test]
    fn transpose_oracle_maps_rows_to_columns_across_tiles() {
        let op = op_of("naive");
        let n = 67usize; // two tiles and a ragged edge
        let input: Vec<f32> = (0..n * n).map(|i| i as f32).collect();
        let mut bufs = vec![vec![0u8; 4 * n * n], bytes(&input)];
        run(&op, n as i64, &mut bufs, &[]);
        let out = floats(&bufs[0]);
        for r in 0..n {
            for c in 0..n {
                assert_eq!(out[c * n + r], input[r * n + c]);
            }
        }
    }

    #[test]
    fn copy_oracle_copies_bits_and_the_rule_follows_equality() {
        let op = op_of("copy");
        let input = [f32::from_bits(0x7fc1_2345), -0.0, 1.5, 2.0];
        let mut bufs = vec![vec![0u8; 16], bytes(&input)];
        run(&op, 2, &mut bufs, &[]);
        assert_eq!(bufs[0], bufs[1]);
        assert_eq!(op.spec.buffers["out"].nan, None);
        assert_eq!(
            op_of("sgeam").spec.buffers["out"].nan,
            Some(NanRule::NanAnyPayload)
        );
    }

    #[test]
    fn triad_oracle_is_the_f64_fma_and_alpha_comes_from_the_scalar() {
        let op = op_of("triad_f32");
        let (x, z) = ([1.0f32, 2.0, -3.0], [0.5f32, -1.0, 4.0]);
        let mut bufs = vec![bytes(&x), bytes(&z), vec![0u8; 12]];
        run(&op, 3, &mut bufs, &[2.0]);
        assert_eq!(floats(&bufs[2]), vec![2.5, 3.0, -2.0]);
        assert_eq!(op.spec.scalars["alpha"].value(0), triad::ALPHA as f64);
    }

    /// The triad contract's verdict on `y`: its oracle's values compared by its rule.
    fn triad_verdict(x: &[f32], z: &[f32], y: &[f32], alpha: f32) -> crate::rule::Verdict {
        let op = op_of("triad_f32");
        let n = x.len();
        let mut bufs = vec![bytes(x), bytes(z), vec![0u8; 4 * n]];
        run(&op, n as i64, &mut bufs, &[alpha as f64]);
        let spec = op.spec.buffers["y"].compare.clone().unwrap();
        let cmp = crate::rule::Comparison::new(spec.resolve(Dtype::F32, |_| Ok(1.0)).unwrap());
        crate::rule::compare(Dtype::F32, &cmp, &bytes(y), &bufs[2], None, &[n as u64]).unwrap()
    }

    #[test]
    fn a_float_fma_passes_the_triad_and_a_wrong_or_missing_value_fails() {
        let n = 5000;
        let (mut x, mut z) = (vec![0.0f32; n], vec![0.0f32; n]);
        triad::fill_inputs(&mut x, &mut z, 19, triad::ALPHA);
        let a = triad::ALPHA;
        let y: Vec<f32> = x.iter().zip(&z).map(|(x, z)| a.mul_add(*x, *z)).collect();
        let v = triad_verdict(&x, &z, &y, a);
        assert!(v.passed() && v.max_abs < 1e-5, "{v:?}");
        let mut bad = y.clone();
        bad[4999] = f32::from_bits(0xffff_ffff); // poison left in place: a skipped store
        bad[17] += 1e-3;
        let v = triad_verdict(&x, &z, &bad, a);
        assert_eq!(v.failures, 2);
        assert_eq!(v.first.unwrap().index, 17);
        // Without the FMA (two roundings in float32) the 1e10 case is still within the
        // tolerance of the reference: the tolerance, not bit equality, decides.
        let unfused: Vec<f32> = x.iter().zip(&z).map(|(x, z)| a * x + z).collect();
        assert!(triad_verdict(&x, &z, &unfused, a).passed());
    }

    #[test]
    fn triad_tolerance_is_atol_plus_rtol_times_reference() {
        let (x, z) = ([0.0f32, 400.0], [0.0f32, 0.0]);
        let a = triad::ALPHA;
        // r = 0: allowed 2e-6. r = 500: allowed 2e-6 + 1e-2.
        assert!(triad_verdict(&x, &z, &[1.5e-6, 500.009], a).passed());
        assert_eq!(triad_verdict(&x, &z, &[3e-6, 500.0], a).failures, 1);
        assert_eq!(triad_verdict(&x, &z, &[0.0, 500.02], a).failures, 1);
        assert!(triad_verdict(&[], &[], &[], a).passed());
    }

    #[test]
    fn a_copy_that_transposes_fails_the_copy_contract_at_every_off_diagonal_element() {
        let op = op_of("copy");
        let n = 7usize;
        let input: Vec<f32> = (0..n * n).map(|i| i as f32).collect();
        let mut bufs = vec![vec![0u8; 4 * n * n], bytes(&input)];
        run(&op, n as i64, &mut bufs, &[]);
        let mut transposed = vec![0f32; n * n];
        for r in 0..n {
            for c in 0..n {
                transposed[c * n + r] = input[r * n + c];
            }
        }
        let cmp = crate::rule::Comparison::default();
        let v = crate::rule::compare(
            Dtype::F32,
            &cmp,
            &bytes(&transposed),
            &bufs[0],
            None,
            &[n as u64, n as u64],
        )
        .unwrap();
        assert_eq!(v.failures, 42);
    }

    #[test]
    fn reduce_contract_has_one_partial_per_chunk_whatever_the_grid() {
        // The drop-tail kernel's grid rounds down; its contract still has ceil(n / 256)
        // partials, so the last one stays poisoned and fails.
        for name in ["reduce_guarded", "reduce_drop_tail"] {
            let op = op_of(name);
            let len = &op.spec.buffers["partials"].len;
            assert_eq!(len.eval_u64(&Shape::from([("n".into(), 257)])).unwrap(), 2);
        }
        let guarded = op_of("reduce_guarded");
        let drop = op_of("reduce_drop_tail");
        let at = Shape::from([("n".into(), 257)]);
        assert_eq!(guarded.spec.grid[0].eval_u64(&at).unwrap(), 2);
        assert_eq!(drop.spec.grid[0].eval_u64(&at).unwrap(), 1);
        let x: Vec<f32> = (0..300).map(|i| i as f32).collect();
        let mut bufs = vec![bytes(&x), vec![0u8; 8]];
        run(&guarded, 300, &mut bufs, &[]);
        let want0: f32 = (0..256).map(|i| i as f32).sum();
        let want1: f32 = (256..300).map(|i| i as f32).sum();
        assert_eq!(floats(&bufs[1]), vec![want0, want1]);
    }

    #[test]
    fn the_index_overflow_case_of_a_matrix_is_the_first_n_whose_last_row_starts_past_2_31() {
        for name in ["padded", "lean_64_cm", "memcpy"] {
            let op = op_of(name);
            let base = Shape::from([("n".into(), 1024)]);
            let s = crate::general::overflow_shape(&op, &base, 1 << 31).unwrap();
            assert_eq!(s["n"], 46_342, "{name}");
        }
        let op = op_of("triad_f32");
        let s = crate::general::overflow_shape(&op, &Shape::from([("n".into(), 1024)]), 1 << 31)
            .unwrap();
        assert_eq!(s["n"], (1 << 31) + 2);
    }

    #[test]
    fn ladder_values_cover_every_remainder_and_the_lab_sizes() {
        let v = ladder_values(OpKind::Transpose, &[32, 32]);
        for r in 1..32 {
            assert!(v.contains(&(32 + r)));
        }
        assert!(v.contains(&4097) && v.contains(&1) && !v.contains(&0));
        let t = ladder_values(OpKind::Triad, &[256]);
        assert!(t.contains(&0) && t.contains(&triad::N));
    }

    #[test]
    fn a_huge_chunk_gets_a_bounded_sample_of_remainders() {
        // Once a panic (capacity overflow), a 34 GB allocation and 1e8 sizes.
        for e in [u64::MAX, i64::MAX as u64, 1 << 32, 100_000_000, 1025] {
            let v = ladder_values(OpKind::Transpose, &[e, 32]);
            assert!(v.len() <= SAMPLED_REMAINDERS + 6, "{e}: {} sizes", v.len());
            assert!(v.contains(&1) && v.contains(&e) && v.contains(&1024));
            if let Some(last) = e.checked_add(e - 1) {
                assert!(v.contains(&(e + 1)) && v.contains(&last), "{e}");
            }
            let r = remainders(e);
            assert!(r.iter().all(|r| (1..e).contains(r)));
            // Beyond the five edges, a sample from inside the range.
            assert!(r.len() > 5, "{e}: {r:?}");
        }
        assert_eq!(remainders(1024), (1..1024).collect::<Vec<_>>());
        assert_eq!(remainders(1), Vec::<u64>::new());
    }
}
