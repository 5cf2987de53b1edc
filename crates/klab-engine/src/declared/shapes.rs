//! Shapes: `--shape` on the command line ([`ShapeArg`]), the size ladder a check walks
//! ([`ladder`]) with the index-overflow shape ([`overflow_shape`]), and what a shape
//! costs in device and host memory.

use std::collections::BTreeMap;

use super::*;

/// `--shape m=64,k=32`: a value for each size variable of an operation (checked against the
/// operation by [`klab_spec::declared::DeclaredOpSpec::shape_problem`]).
/// Serialized as that text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShapeArg(pub BTreeMap<String, u64>);

klab_core::serde_as_text!(ShapeArg);

impl std::str::FromStr for ShapeArg {
    type Err = String;
    fn from_str(s: &str) -> Result<ShapeArg, String> {
        let mut out = BTreeMap::new();
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}': expected VAR=VALUE, e.g. m=64,n=64,k=32"))?;
            let k = k.trim();
            let named = k
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !named {
                return Err(format!("'{k}' is not a size variable's name"));
            }
            let v: u64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{k}: '{}' is not a whole number", v.trim()))?;
            if out.insert(k.to_string(), v).is_some() {
                return Err(format!("{k} is given twice"));
            }
        }
        Ok(ShapeArg(out))
    }
}

impl std::fmt::Display for ShapeArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(","))
    }
}

/// How far [`chunk`] looks for the grid's growth: a grid that grows only past 2^24
/// elements is not a tile's (the ladder would reach 4c), and the block decides instead.
const CHUNK_SEARCH_LIMIT: i64 = 1 << 24;

/// The chunk of size variable `var`: the last size before the grid grows, else the block's
/// first dimension; at least 2. The other variables are held two ways, and the larger chunk
/// is taken: at their smallest (a launch parameter at its values' middle), where the grid's
/// growth with `var` is plainest, and every variable with values at their middle, where
/// the ladder holds it. A block size `bs = { values = [128] }` at 1 hides the block; rows
/// held at 1024 in a grid over `rows * cols` hide the block's 256 columns.
/// Only sizes the variable admits are tried: from its smallest, in steps of its `multiple`.
pub fn chunk(op: &DeclaredOp, var: &str) -> u64 {
    let held = |with_values: fn(&klab_spec::declared::SizeSpec) -> bool| -> BTreeMap<&str, i64> {
        op.spec
            .sizes
            .iter()
            .filter(|(k, _)| k.as_str() != var)
            .map(|(k, s)| {
                let middle = s
                    .values
                    .as_deref()
                    .filter(|_| with_values(s))
                    .and_then(middle);
                (k.as_str(), middle.unwrap_or(s.lowest()) as i64)
            })
            .collect()
    };
    let plain = held(|s| s.launch);
    let laddered = held(|_| true);
    let first = chunk_with(op, var, &plain);
    if laddered == plain {
        return first;
    }
    first.max(chunk_with(op, var, &laddered))
}

/// The middle of a variable's values: where the ladder holds it while another varies.
fn middle(values: &[u64]) -> Option<u64> {
    values.get(values.len() / 2).copied()
}

/// [`chunk`] with the other variables at `held`.
fn chunk_with(op: &DeclaredOp, var: &str, held: &BTreeMap<&str, i64>) -> u64 {
    let spec = &op.spec.sizes[var];
    let at = |n: i64| -> Shape {
        op.spec
            .sizes
            .keys()
            .map(|k| (k.clone(), held.get(k.as_str()).copied().unwrap_or(n)))
            .collect()
    };
    // A sequence's chunk is the first size at which any of its grids grows.
    let dims = op.launch_dims();
    let grids = |n: i64| -> Vec<Option<u64>> {
        dims.iter()
            .map(|(grid, _)| {
                grid.iter()
                    .map(|e| e.eval_u64(&at(n)).ok())
                    .try_fold(1u64, |a, d| d.and_then(|d| a.checked_mul(d)))
            })
            .collect()
    };
    // The k-th admitted size from the smallest.
    let (lowest, m) = (spec.lowest() as i64, spec.multiple.max(1) as i64);
    let size = |k: i64| lowest.saturating_add(k.saturating_mul(m));
    let first = grids(lowest);
    let grows = |k: i64| grids(size(k)) != first;
    let last_k = ((size_cap(op, var) as i64).min(CHUNK_SEARCH_LIMIT) - lowest) / m;
    (1..=4096i64)
        .find(|&k| grows(k))
        .or_else(|| first_growth_past(4096, last_k, grows))
        .map(|k| spec.at_or_below((size(k) - 1) as u64))
        .or_else(|| {
            dims.first()
                .and_then(|(_, block)| block.first())
                .and_then(|b| b.eval_u64(&at(lowest)).ok())
        })
        .unwrap_or(32)
        .max(2)
}

/// The first step in (`from`, `cap`] at which `grows` holds, for a tile larger than a
/// linear scan reaches (a block of 1024 threads with 16 elements each, say): doubling until
/// the grid has grown, then bisecting, as a grid grows with the size and stays grown.
fn first_growth_past(from: i64, cap: i64, grows: impl Fn(i64) -> bool) -> Option<i64> {
    let mut hi = from;
    loop {
        if hi >= cap {
            return None;
        }
        let (lo, next) = (hi, hi.saturating_mul(2).min(cap));
        if grows(next) {
            let (mut lo, mut hi) = (lo, next);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if grows(mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            return Some(hi);
        }
        hi = next;
    }
}

/// Values of one size variable: its declared `values`, else derived from the launch: the
/// chunk `c` after which the grid grows (else the block's first dimension), and 1, 2, c-1,
/// c, c+1, 2c-1, 2c+1, 3c + c/2 and 4c (every remainder class a chunk boundary makes
/// fire), with 0 first when `min = 0`. A variable whose sizes must be a multiple m takes the
/// nearest multiples instead: m, 2m, the last ones at or below c-1, c and 2c-1 and the first
/// ones past c and 2c. None passes what the kernel's size type holds.
fn values(op: &DeclaredOp, var: &str) -> Result<Vec<u64>, String> {
    let spec = &op.spec.sizes[var];
    if let Some(v) = &spec.values {
        return Ok(v.clone());
    }
    let m = spec.multiple.max(1);
    // A chunk below the multiple (the block's width, say) would leave only m and 2m.
    let c = chunk(op, var).min(1 << 40).max(m);
    let (below, above) = (|x| spec.at_or_below(x), |x| spec.at_or_above(x));
    let mut v = vec![
        m,
        2 * m,
        below(c - 1),
        below(c),
        above(c + 1),
        below(2 * c - 1),
        above(2 * c + 1),
        above(3 * c + c / 2),
        above(4 * c),
    ];
    // A declared tile's boundaries, where the launch gives no sign of them.
    let tile = spec.tile.map(|t| t.min(1 << 40));
    if let Some(t) = tile {
        v.extend([below(t - 1), below(t), above(t + 1)]);
        v.extend([below(2 * t - 1), above(2 * t + 1)]);
    }
    if spec.min == 0 {
        v.push(0);
    }
    // A max inside the derived values keeps its edge: the last two sizes at or below it.
    let reach = (4 * c).max(tile.map_or(0, |t| 2 * t + 1));
    let top = below(spec.upper());
    if top < reach {
        v.extend([top.saturating_sub(m), top]);
    }
    v.push(spec.lowest());
    let cap = size_cap(op, var);
    v.retain(|x| spec.admits(*x) && *x <= cap);
    v.sort_unstable();
    v.dedup();
    if v.is_empty() {
        return Err(format!(
            "sizes.{var}: none of the derived values (up to {}) reaches min = {}; give values",
            reach, spec.min
        ));
    }
    Ok(v)
}

/// How many copies of the slot a validation of `op` holds on the host: the inputs and the
/// reference's buffers (2); scaled-sum adds the absolute inputs, a second run and f64
/// magnitudes (4); reference-error, per sample, perturbed inputs, two runs and the running
/// f64 maximum (6).
pub fn host_copies(op: &DeclaredOp) -> u64 {
    let has = |f: fn(&rule::RuleSpec) -> bool| {
        op.spec
            .buffers
            .values()
            .any(|b| b.compare.as_ref().is_some_and(f))
    };
    if has(|r| matches!(r, rule::RuleSpec::ReferenceError { .. })) {
        6
    } else if has(|r| matches!(r, rule::RuleSpec::ScaledSum(_))) {
        4
    } else {
        2
    }
}

/// Every buffer's bytes at `shape`, summed: a workload's slot there (None when an
/// expression fails or the sum passes u64).
pub fn slot_bytes_at(op: &DeclaredOp, shape: &Shape) -> Option<u64> {
    op.spec.buffers.values().try_fold(0u64, |sum, b| {
        let bytes = b
            .len
            .eval_u64(shape)
            .ok()?
            .checked_mul(b.dtype.size_bytes() as u64)?;
        sum.checked_add(bytes)
    })
}

/// Element offsets at or past this do not fit a 32-bit signed int.
pub const INDEX_OVERFLOW_ELEMENTS: u64 = 1 << 31;

/// The largest value a size variable can reach: its `max`, the range of the type it is
/// passed as, and 2^40, rounded down to its `multiple`.
pub fn size_cap(op: &DeclaredOp, var: &str) -> u64 {
    let by_type = op
        .params
        .iter()
        .find_map(|p| match p {
            OpParam::Size(n, dt) if n == var => Some(match dt {
                Dtype::I32 => i32::MAX as u64,
                Dtype::U32 => u32::MAX as u64,
                _ => i64::MAX as u64,
            }),
            _ => None,
        })
        .unwrap_or(i64::MAX as u64);
    let spec = &op.spec.sizes[var];
    spec.at_or_below(spec.upper().min(by_type).min(1 << 40))
}

/// The largest buffer's element count at `shape` (None when an expression fails there).
pub fn largest_buffer(op: &DeclaredOp, shape: &Shape) -> Option<u64> {
    op.spec
        .buffers
        .values()
        .map(|b| b.len.eval_u64(shape).ok())
        .try_fold(0u64, |a, n| n.map(|n| a.max(n)))
}

/// The index-overflow shape: every size variable but the launch parameters grown by one
/// common factor from `base` (the ladder's middle shape; each stays within its cap), the smallest factor at which
/// some buffer holds more than `limit` elements even with any one variable (but one at
/// its cap) one smaller, so that an offset computed in 32-bit arithmetic wraps, the start
/// of the last row included. An error says why no shape reaches it.
pub fn overflow_shape(op: &DeclaredOp, base: &Shape, limit: u64) -> Result<Shape, String> {
    let launch = |k: &str| op.spec.sizes.get(k).is_some_and(|s| s.launch);
    let at = |f: f64| -> Shape {
        base.iter()
            .map(|(k, v)| {
                if launch(k) {
                    return (k.clone(), *v);
                }
                let grown = ((*v).max(1) as f64 * f).ceil();
                let grown = op.spec.sizes[k].at_or_above(grown as u64);
                let v = (grown.min(size_cap(op, k)) as i64).max(*v);
                (k.clone(), v)
            })
            .collect()
    };
    // Past the limit even with any one variable one smaller: then the last row (or
    // column, or plane) itself starts past it, so an offset like `row * cols` computed in
    // 32 bits wraps, not only the elements inside that row. A variable at its cap (its
    // max, its type's range) is spared that: it cannot grow to make it hold, and the
    // others would have to grow past what is needed (a `cols` of at most 2 would ask
    // `rows` alone past 2^31) or could not at all; the elements past the limit still wrap.
    // A length too large to evaluate in 64 bits is past any limit (three sizes at their
    // caps multiply past i64); the search then settles far below that.
    let beyond = |s: &Shape| largest_buffer(op, s).is_none_or(|n| n > limit);
    let past = |f: f64| {
        let s = at(f);
        beyond(&s)
            && s.iter().filter(|(k, _)| !launch(k)).all(|(k, v)| {
                // One step smaller: by one, or by the multiple the sizes must be.
                let step = op.spec.sizes[k].multiple.max(1) as i64;
                let mut less = s.clone();
                less.insert(k.clone(), (*v - step).max(0));
                *v <= step || *v as u64 >= size_cap(op, k) || beyond(&less)
            })
    };
    let (mut lo, mut hi) = (1.0f64, 2f64.powi(41));
    if !past(hi) {
        return Err(format!(
            "no shape within the size variables' limits (max, and the range of their types) has a buffer of more than {limit} elements"
        ));
    }
    if past(lo) {
        return Ok(at(lo));
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if past(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo < 1e-9 * hi {
            break;
        }
    }
    Ok(at(hi))
}

/// The shapes `klab check` runs: each variable over its values with the others at a
/// ragged base value (the middle of their values), then pairs of different values for
/// two variables (non-square combinations), without repeats.
pub fn ladder(op: &DeclaredOp) -> Result<Vec<Shape>, String> {
    let vars: Vec<String> = op.spec.sizes.keys().cloned().collect();
    let mut all: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for v in &vars {
        all.insert(v.clone(), values(op, v)?);
    }
    let base: Shape = all
        .iter()
        .map(|(k, v)| (k.clone(), middle(v).unwrap_or(0) as i64))
        .collect();
    let mut shapes: Vec<Shape> = Vec::new();
    let add = |s: Shape, shapes: &mut Vec<Shape>| {
        if !shapes.contains(&s) {
            shapes.push(s);
        }
    };
    for v in &vars {
        for &x in &all[v] {
            let mut s = base.clone();
            s.insert(v.clone(), x as i64);
            add(s, &mut shapes);
        }
    }
    // The user's own shapes.
    for c in &op.spec.cases {
        add(
            c.shape
                .iter()
                .map(|(k, v)| (k.clone(), *v as i64))
                .collect(),
            &mut shapes,
        );
    }
    if vars.len() >= 2 {
        let (a, b) = (&vars[0], &vars[1]);
        let (va, vb) = (&all[a], &all[b]);
        for (i, &x) in va.iter().enumerate() {
            let y = vb[(vb.len() - 1).saturating_sub(i % vb.len())];
            let mut s = base.clone();
            s.insert(a.clone(), x as i64);
            s.insert(b.clone(), y as i64);
            add(s, &mut shapes);
        }
    }
    Ok(shapes)
}
