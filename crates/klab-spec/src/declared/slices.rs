//! Independent slices: an operation declared with `slices = "B"` computes each slice of its
//! outermost axis B from the same slice of its inputs alone (and from the buffers that do
//! not grow with B: weights, a table). Every buffer is then either [`Part::Sliced`] (B
//! times a slice's length, B outermost) or [`Part::Whole`], which [`parts`] works out from
//! the length expressions and validation checks once ([`check`]).
//!
//! The index-overflow case uses it: a [`Sample`] of the slices (those around each 2^31
//! element offset of every sliced buffer, the first, the last and a few at random) is what
//! the reference computes and what the kernel's outputs are compared on, so that a C
//! reference costs a few slices' time at a shape past 2^31 elements. Data only: the
//! workload gathers the slices ([`Sample::gather`]) and maps a compared element back to
//! its place in the whole buffer ([`Sample::full_index`]).

use std::collections::{BTreeMap, BTreeSet};

use super::{Bound, BufferSpec, DeclaredOpSpec, Role};

/// A shape: each size variable's value.
type Shape = BTreeMap<String, i64>;

/// Element offsets at these multiples are where 32-bit arithmetic wraps (2^31 signed,
/// 2^32 unsigned).
const WRAP: u64 = 1 << 31;

/// Runs of slices drawn at random from the case's seed, beside the boundaries, the first and the last.
pub const RANDOM_RUNS: u64 = 4;

/// A run of the sample covers at least this many elements of the largest sliced buffer
/// (as many slices as that takes, at least one), so that thin slices (one element each)
/// still sample a stretch of the data and not a handful of elements.
pub const RUN_ELEMENTS: u64 = 1 << 16;

/// How one buffer lies over the slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// B slices of `per` elements each, B outermost.
    Sliced { per: u64 },
    /// The same whole buffer for every slice.
    Whole,
}

/// `shape` with `var` set to `value`.
fn with(shape: &Shape, var: &str, value: i64) -> Shape {
    let mut s = shape.clone();
    s.insert(var.to_string(), value);
    s
}

/// How buffer `name` lies over the slices of `var` at `shape`: its length is either free
/// of `var` or `var` times its length at `var = 1`; anything else is an error naming it.
fn part(name: &str, b: &BufferSpec, shape: &Shape, var: &str) -> Result<Part, String> {
    let len = |v: i64| {
        b.len
            .eval_u64(&with(shape, var, v))
            .map_err(|e| format!("buffer {name}: {e}"))
    };
    let (one, two, three) = (len(1)?, len(2)?, len(3)?);
    let at = shape.get(var).copied().unwrap_or(1);
    let here = len(at)?;
    if one == two && two == three && here == one {
        return Ok(Part::Whole);
    }
    if two == 2 * one && three == 3 * one && u64::try_from(at).ok().map(|a| a * one) == Some(here) {
        return Ok(Part::Sliced { per: one });
    }
    Err(format!(
        "buffer {name}: its length {} is neither {var} times a length free of {var} nor free of {var}",
        b.len
    ))
}

/// Every buffer's [`Part`] at `shape`, by name, for an operation sliced along `var`.
/// Scratch is left out: the reference gets it zeroed, as long as its length at the
/// sample's own shape.
pub fn parts(
    spec: &DeclaredOpSpec,
    shape: &Shape,
    var: &str,
) -> Result<BTreeMap<String, Part>, String> {
    spec.buffers
        .iter()
        .filter(|(_, b)| b.role != Role::Scratch)
        .map(|(name, b)| Ok((name.clone(), part(name, b, shape, var)?)))
        .collect()
}

/// Why `slices = var` does not describe `spec`, if it does not: `var` must be a size
/// variable that is not a launch parameter; every buffer sliced or whole ([`part`]) at two
/// probe shapes; every output sliced (an output free of `var` depends on every slice);
/// a sliced buffer's declared shape must have `var` in its first dimension only; and no
/// index may point across slices (an index into a sliced buffer, row offsets, a range
/// over `var`).
pub fn check(spec: &DeclaredOpSpec, var: &str) -> Result<(), String> {
    match spec.sizes.get(var) {
        None => return Err(format!("'{var}' is not a size variable")),
        Some(s) if s.launch => {
            return Err(format!(
                "'{var}' is a launch parameter; slices are a problem size"
            ))
        }
        Some(_) => {}
    }
    let mut sliced = BTreeSet::new();
    for probe in [5, 13] {
        // Each variable within its own bounds (a length like `T - 8` needs T > 8).
        let shape: Shape = spec
            .sizes
            .iter()
            .map(|(k, s)| (k.clone(), probe.max(s.min).min(s.upper()) as i64))
            .collect();
        for (name, p) in parts(spec, &shape, var)? {
            if p != Part::Whole {
                sliced.insert(name);
            }
        }
    }
    for (name, b) in spec.buffers.iter().filter(|(_, b)| b.role != Role::Scratch) {
        let is_sliced = sliced.contains(name);
        if b.role.compared() && !is_sliced {
            return Err(format!(
                "output {name} does not grow with {var}: each of its elements would depend on every slice"
            ));
        }
        if let Some(dims) = &b.shape {
            let uses: Vec<bool> = dims.iter().map(|d| d.variables().contains(var)).collect();
            if uses.iter().skip(1).any(|u| *u)
                || (is_sliced && !uses.first().copied().unwrap_or(false))
            {
                return Err(format!(
                    "buffer {name}: {var} must be its outermost dimension, and only that"
                ));
            }
        }
        if is_sliced && b.offsets.is_some() {
            return Err(format!(
                "buffer {name} holds row offsets into whole buffers; its slices are not independent"
            ));
        }
        if let Some(t) = &b.index_into {
            if sliced.contains(t) {
                return Err(format!(
                    "buffer {name} indexes {t}, which is sliced: an index would cross slices"
                ));
            }
        }
        if let Some(range) = &b.range {
            let over_var = range.iter().any(|e| match e {
                Bound::Expr(x) => x.variables().contains(var),
                Bound::Number(_) => false,
            });
            if over_var {
                return Err(format!(
                    "buffer {name}'s range uses {var}: its values would point across slices"
                ));
            }
        }
    }
    Ok(())
}

/// The smallest number of slices of `var`, at least `at_least`, that the declaration
/// admits as a size (its min, max and multiple); `None` past its max.
pub fn admitted_count(spec: &DeclaredOpSpec, var: &str, at_least: u64) -> Option<u64> {
    let size = spec.sizes.get(var)?;
    let c = size.at_or_above(at_least.max(size.min));
    size.admits(c).then_some(c)
}

/// Slices added to `out`, from the middle of `total` upwards (then from 0), until it
/// holds `count` of them (`count` at most `total`).
pub fn fill_to(count: u64, total: u64, out: &mut BTreeSet<u64>) {
    let mut s = total / 2;
    while (out.len() as u64) < count.min(total) {
        out.insert(s);
        s = (s + 1) % total.max(1);
    }
}

/// Slices `from..to` (clamped to `total`) into `out`.
fn insert_run(from: u64, to: u64, total: u64, out: &mut BTreeSet<u64>) {
    out.extend(from.min(total)..to.min(total));
}

/// The slices on either side of each multiple of 2^31 elements, a run each side, in a
/// buffer of `total` slices of `per` elements each.
fn around_wraps(total: u64, per: u64, run: u64, out: &mut BTreeSet<u64>) {
    if per == 0 {
        return;
    }
    let end = total.saturating_mul(per);
    let mut at = WRAP;
    while at < end {
        let s = at / per;
        insert_run(s.saturating_sub(run), s + run + 1, total, out);
        at = at.saturating_add(WRAP);
    }
}

/// The slices of `var` the reference computes at one shape, and how each buffer lies.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub var: String,
    /// `var`'s value at the whole shape.
    pub total: u64,
    /// The chosen slices, ascending.
    pub chosen: Vec<u64>,
    /// Each buffer's part, by name.
    pub parts: BTreeMap<String, Part>,
}

impl Sample {
    /// The sample at `shape` for `spec` (None: the operation declares no slices, or it has
    /// so few that the sample would be all of them): the slices around every 2^31-element
    /// offset of each sliced buffer, the first and the last, and [`RANDOM_RUNS`] runs
    /// drawn from `seed`.
    pub fn at(spec: &DeclaredOpSpec, shape: &Shape, seed: u64) -> Result<Option<Sample>, String> {
        let Some(var) = &spec.slices else {
            return Ok(None);
        };
        let parts = parts(spec, shape, var)?;
        let total = u64::try_from(shape.get(var).copied().unwrap_or(0)).unwrap_or(0);
        // The widest slice sets the run: each run covers RUN_ELEMENTS of the data.
        let widest = parts
            .values()
            .filter_map(|p| match p {
                Part::Sliced { per } if *per > 0 => Some(*per),
                _ => None,
            })
            .max()
            .unwrap_or(1);
        let run = RUN_ELEMENTS.div_ceil(widest).max(1);
        let mut chosen = BTreeSet::new();
        insert_run(0, run, total, &mut chosen);
        insert_run(total.saturating_sub(run), total, total, &mut chosen);
        for p in parts.values() {
            if let Part::Sliced { per } = p {
                around_wraps(total, *per, run, &mut chosen);
            }
        }
        for draw in 0..RANDOM_RUNS {
            let from = klab_core::stats::splitmix_at(seed, draw) % total.max(1);
            insert_run(from, from + run, total, &mut chosen);
        }
        // The reference runs with `var` set to the number of slices: one the declaration
        // admits (min, max, multiple), so that a reference holding to it is not run outside.
        let Some(count) = admitted_count(spec, var, chosen.len() as u64).filter(|c| *c < total)
        else {
            return Ok(None);
        };
        fill_to(count, total, &mut chosen);
        Ok(Some(Sample {
            var: var.clone(),
            total,
            chosen: chosen.into_iter().collect(),
            parts,
        }))
    }

    /// The shape the reference sees: `var` set to the number of chosen slices.
    pub fn shape(&self, whole: &Shape) -> Shape {
        with(whole, &self.var, self.chosen.len() as i64)
    }

    /// The part of buffer `name` (Whole for a name it does not know).
    pub fn part(&self, name: &str) -> Part {
        self.parts.get(name).copied().unwrap_or(Part::Whole)
    }

    /// Buffer `name`'s elements in the sample.
    pub fn elements(&self, name: &str, whole: u64) -> u64 {
        match self.part(name) {
            Part::Sliced { per } => per * self.chosen.len() as u64,
            Part::Whole => whole,
        }
    }

    /// The chosen slices of buffer `name` (`bytes`, elements of `size` bytes), one after
    /// another; a whole buffer as it is.
    pub fn gather(&self, name: &str, bytes: &[u8], size: usize) -> Vec<u8> {
        match self.part(name) {
            Part::Whole => bytes.to_vec(),
            Part::Sliced { per } => {
                let len = per as usize * size;
                let mut out = Vec::with_capacity(len * self.chosen.len());
                for &s in &self.chosen {
                    let at = s as usize * len;
                    out.extend_from_slice(&bytes[at..at + len]);
                }
                out
            }
        }
    }

    /// Where element `i` of buffer `name`'s sample lies in the whole buffer.
    pub fn full_index(&self, name: &str, i: u64) -> u64 {
        match self.part(name) {
            Part::Whole => i,
            Part::Sliced { per } => self.chosen[(i / per) as usize] * per + i % per,
        }
    }

    /// `the reference on 9 of 141 slices of B (...)`.
    pub fn describe(&self) -> String {
        format!(
            "the reference on {} of {} slices of {} (around each 2^31-element offset, the first, the last and {RANDOM_RUNS} at random)",
            self.chosen.len(),
            self.total,
            self.var
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(slices: &str, extra: &str) -> Result<DeclaredOpSpec, String> {
        let text = format!(
            r#"
grid = ["B"]
block = ["32"]
useful_bytes = "4 * B * T * C"
reference = {{ c = "r.c:r" }}
slices = "{slices}"
sizes.B = {{}}
sizes.T = {{}}
sizes.C = {{}}
sizes.bs = {{ values = [32], launch = true }}
buffers.x = {{ dtype = "f32", len = "B * T * C", role = "in", shape = ["B", "T", "C"] }}
buffers.w = {{ dtype = "f32", len = "C", role = "in" }}
buffers.y = {{ dtype = "f32", len = "B * T * C", role = "out", compare = "bitwise" }}
{extra}
"#
        );
        let s: DeclaredOpSpec = toml::from_str(&text).map_err(|e| e.to_string())?;
        check(&s, slices)?;
        Ok(s)
    }

    #[test]
    fn buffers_are_sliced_or_whole_and_anything_else_is_refused() {
        let s = spec("B", "").unwrap();
        let shape: Shape = [("B", 7), ("T", 3), ("C", 5), ("bs", 32)]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        let p = parts(&s, &shape, "B").unwrap();
        assert_eq!(p["x"], Part::Sliced { per: 15 });
        assert_eq!(p["y"], Part::Sliced { per: 15 });
        assert_eq!(p["w"], Part::Whole);
        for (slices, extra, says) in [
            ("Q", "", "not a size variable"),
            ("bs", "", "launch parameter"),
            ("B", "buffers.s = { dtype = \"f32\", len = \"B * B\", role = \"in\" }", "neither B times"),
            ("B", "buffers.t = { dtype = \"f32\", len = \"C\", role = \"out\", compare = \"bitwise\" }", "output t does not grow"),
            ("B", "buffers.u = { dtype = \"f32\", len = \"B * C\", role = \"in\", shape = [\"C\", \"B\"] }", "outermost"),
            ("B", "buffers.i = { dtype = \"i32\", len = \"B\", role = \"in\", index_into = \"x\" }", "cross slices"),
            ("B", "buffers.i = { dtype = \"i32\", len = \"B\", role = \"in\", range = [0, \"B - 1\"] }", "range uses B"),
            ("B", "buffers.o = { dtype = \"i32\", len = \"B + 1\", role = \"in\", offsets = \"T\" }", "neither B times"),
        ] {
            let e = spec(slices, extra).unwrap_err();
            assert!(e.contains(says), "{slices} {extra}: {e}");
        }
        // Indices into a whole table (an embedding) slice with their rows.
        assert!(spec(
            "B",
            "buffers.i = { dtype = \"i32\", len = \"B * T\", role = \"in\", index_into = \"w\" }"
        )
        .is_ok());
    }

    /// The reference runs on the sample with `var` set to the number of slices chosen: a
    /// number the declaration admits, so that a reference that holds to `min` or
    /// `multiple` is never run outside them (B = 9 for `min = 100`, say).
    #[test]
    fn the_sample_has_a_number_of_slices_the_declaration_admits() {
        let shape: Shape = [("B", 1000), ("T", 1 << 11), ("C", 1 << 11), ("bs", 32)]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        for ((min, multiple), admitted) in [
            ((100, 1), (|c: u64| c >= 100) as fn(u64) -> bool),
            ((1, 7), |c| c % 7 == 0),
            ((20, 4), |c| c >= 20 && c % 4 == 0),
        ] {
            let mut s = spec("B", "").unwrap();
            let b = s.sizes.get_mut("B").unwrap();
            (b.min, b.multiple) = (min, multiple);
            let a = Sample::at(&s, &shape, 7).unwrap().unwrap();
            let n = a.chosen.len() as u64;
            assert!(admitted(n), "min {min} multiple {multiple}: {n} slices");
            for must in [0, 511, 512, 513, 999] {
                assert!(a.chosen.contains(&must), "{:?}", a.chosen);
            }
        }
        // An admitted count as large as the whole: no sample, the whole is computed.
        let mut s = spec("B", "").unwrap();
        s.sizes.get_mut("B").unwrap().min = 1000;
        assert_eq!(Sample::at(&s, &shape, 7).unwrap(), None);
        assert_eq!(admitted_count(&s, "B", 2), Some(1000));
        s.sizes.get_mut("B").unwrap().max = Some(1000);
        assert_eq!(admitted_count(&s, "B", 1001), None);
    }

    #[test]
    fn the_sample_holds_the_slices_around_every_wrap_the_ends_and_a_few_more() {
        let s = spec("B", "").unwrap();
        // 1,000 slices of 2^22 elements: the buffer holds 2^31 at slice 512 and 2^32 at 1024
        // (past the end), so slices 511 to 513, 0, 999 and four at random.
        let shape: Shape = [("B", 1000), ("T", 1 << 11), ("C", 1 << 11), ("bs", 32)]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        let a = Sample::at(&s, &shape, 7).unwrap().unwrap();
        for must in [0, 511, 512, 513, 999] {
            assert!(a.chosen.contains(&must), "{:?}", a.chosen);
        }
        assert_eq!(a.chosen.len() as u64, 5 + RANDOM_RUNS, "{:?}", a.chosen);
        assert!(a.chosen.windows(2).all(|w| w[0] < w[1]));
        assert_ne!(
            a.chosen,
            Sample::at(&s, &shape, 8).unwrap().unwrap().chosen,
            "the seed draws"
        );
        assert_eq!(a.shape(&shape)["B"], a.chosen.len() as i64);
        assert_eq!(a.elements("x", 1000 << 22), (a.chosen.len() as u64) << 22);
        assert_eq!(a.elements("w", 2048), 2048);
        // Slice 512's first element is element 2^31 of the whole buffer.
        let k = a.chosen.iter().position(|c| *c == 512).unwrap() as u64;
        assert_eq!(a.full_index("y", k << 22), 1 << 31);
        assert_eq!(a.full_index("w", 5), 5);
        // Gathering takes each chosen slice's bytes in order.
        let small: Shape = [("B", 10), ("T", 1), ("C", 2), ("bs", 32)]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        let a = Sample {
            chosen: vec![1, 4],
            total: 10,
            var: "B".into(),
            parts: parts(&s, &small, "B").unwrap(),
        };
        let bytes: Vec<u8> = (0..20).collect();
        assert_eq!(a.gather("x", &bytes, 1), vec![2, 3, 8, 9]);
        assert_eq!(a.gather("w", &bytes[..2], 1), vec![0, 1]);
        // Slices of one element each are sampled in runs of RUN_ELEMENTS.
        let n = spec("n", "").map(|_| ()).unwrap_err();
        assert!(n.contains("not a size variable"), "{n}");
        let thin: Shape = [("B", 3 << 30), ("T", 1), ("C", 1), ("bs", 32)]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        let a = Sample::at(&s, &thin, 1).unwrap().unwrap();
        let r = RUN_ELEMENTS;
        for must in [
            0,
            r - 1,
            (1 << 31) - r,
            1 << 31,
            (1 << 31) + r,
            (3 << 30) - 1,
        ] {
            assert!(a.chosen.binary_search(&must).is_ok(), "{must}");
        }
        assert!(
            a.chosen.len() as u64 <= (4 + 2 * RANDOM_RUNS) * r,
            "{}",
            a.chosen.len()
        );
        // Too few slices to sample: the reference runs on all of them.
        let three = with(&small, "B", 3);
        assert_eq!(Sample::at(&s, &three, 1).unwrap(), None);
    }
}
