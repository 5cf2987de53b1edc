//! The four built-in operations as declared operations.
//! `operation = "transpose"` with `block`, `elements_per_block` and `grid_rounding` states
//! the same contract a user would write in `[kernel.op]`: a size variable `n`, buffers with
//! roles, dtypes, lengths and comparison rules, a launch over `n`, useful bytes and FLOPs.
//! [`declare`] writes that [`DeclaredOp`]; its reference is the operation's CPU oracle
//! ([`BuiltinOracle`], run through the same `klab_engine::reference::Reference` seam (its implementation,
//! `klab_engine::oracle::BuiltinReference`) as a user's C function). So
//! every kernel, built-in or brought, is checked, timed and profiled by one workload
//! (`klab_engine::declared::DeclaredWorkload`) and one ladder (`klab_engine::check::run`).
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
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::declared::{
    BufferSpec, DeclaredOp, DeclaredOpSpec, FieldError, ReferenceSpec, Role, ScalarSpec, SizeSpec,
};
use crate::ops::{reduce, transpose, triad};
use crate::rule::{NanRule, RuleSpec};
use klab_core::device::Dim3;
use klab_core::dtype::Dtype;
use klab_core::expr::Expr;

/// What a kernel must compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    Copy,
    Transpose,
    Triad,
    ReduceSum,
    /// The manifest declares what the kernel computes (`[kernel.op]`, see
    /// [`crate::declared`]).
    Declared,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Copy => "copy",
            OpKind::Transpose => "transpose",
            OpKind::Triad => "triad",
            OpKind::ReduceSum => "reduce-sum",
            OpKind::Declared => "declared",
        }
    }

    /// (buffer roles, scalar roles with their required type), in no particular order.
    pub fn roles(
        self,
    ) -> (
        &'static [&'static str],
        &'static [(&'static str, ScalarType)],
    ) {
        match self {
            OpKind::Copy | OpKind::Transpose => (&["out", "in"], &[("n", ScalarType::I32)]),
            OpKind::Triad => (
                &["x", "z", "y"],
                &[("n", ScalarType::U64), ("alpha", ScalarType::F32)],
            ),
            OpKind::ReduceSum => (&["in", "partials"], &[("n", ScalarType::U64)]),
            // Its parameters are whatever [kernel.op] declares.
            OpKind::Declared => (&[], &[]),
        }
    }

    /// Problem dimensions: 2 for an N x N matrix, 1 for a vector.
    pub fn dims(self) -> usize {
        match self {
            OpKind::Copy | OpKind::Transpose => 2,
            OpKind::Triad | OpKind::ReduceSum | OpKind::Declared => 1,
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The C type of a scalar parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalarType {
    I32,
    U64,
    F32,
}

impl ScalarType {
    /// The scalar type a manifest names (`i32` or `int`, ...); None for any other name.
    pub fn parse(s: &str) -> Option<ScalarType> {
        match s {
            "i32" | "int" => Some(ScalarType::I32),
            "u64" | "size_t" | "unsigned long long" => Some(ScalarType::U64),
            "f32" | "float" => Some(ScalarType::F32),
            _ => None,
        }
    }
}

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Param {
    Buffer(String),
    Scalar(String, ScalarType),
}

/// How the grid covers N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rounding {
    Up,
    Down,
}

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
/// is added by the ladder itself (`klab_engine::declared::overflow_shape`). Sizes past u64 are
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
        r.push(1 + klab_core::stats::splitmix_at(e, i) % (e - 1));
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
        domain: false,
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
                multiple: 1,
                tile: None,
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

#[cfg(test)]
mod tests {
    use super::*;

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
