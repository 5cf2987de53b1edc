//! The built-in operations' CPU oracles ([`klab_spec::declared::builtin::BuiltinOracle`]),
//! bound to a kernel's buffer order and run through the same [`Reference`] seam as a
//! user's C function.

use crate::reference::Reference;
use klab_core::expr::Shape;
use klab_spec::declared::builtin::BuiltinOracle;
use klab_spec::declared::{DeclaredOp, ReferenceSpec};
use klab_spec::ops::{reduce, triad};

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
                klab_spec::declared::OpParam::Buffer(b) => Some(b.clone()),
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
                klab_core::par::for_parts(out, 4 * n.max(1) * TILE, |p, rows| {
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
                klab_core::par::for_chunks(out, 4, |c, part| {
                    let base = c * klab_core::par::CHUNK_ELEMENTS;
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
                klab_core::par::for_chunks(out, 4, |c, part| {
                    let base = c * klab_core::par::CHUNK_ELEMENTS;
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
    use klab_core::dtype::Dtype;
    use klab_spec::rule::NanRule;
    use klab_spec::testing::op_of;

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
    fn triad_verdict(x: &[f32], z: &[f32], y: &[f32], alpha: f32) -> klab_spec::rule::Verdict {
        let op = op_of("triad_f32");
        let n = x.len();
        let mut bufs = vec![bytes(x), bytes(z), vec![0u8; 4 * n]];
        run(&op, n as i64, &mut bufs, &[alpha as f64]);
        let spec = op.spec.buffers["y"].compare.clone().unwrap();
        let cmp = klab_spec::rule::Comparison::new(spec.resolve(Dtype::F32, |_| Ok(1.0)).unwrap());
        klab_spec::rule::compare(Dtype::F32, &cmp, &bytes(y), &bufs[2], None, &[n as u64]).unwrap()
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
        let cmp = klab_spec::rule::Comparison::default();
        let v = klab_spec::rule::compare(
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
}
