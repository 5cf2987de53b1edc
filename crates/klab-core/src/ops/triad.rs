//! The triad contract (seed 003): `y[i] = fmaf(alpha, x[i], z[i])` in float32.
//!
//! Reference: a CPU fused multiply-add in float64, cast once to float32. The GPU rounds
//! the fused operation directly to float32, so the reference is not a bitwise oracle:
//! an element passes when `|y - r| <= atol + rtol * |r|` with atol 2e-6 and rtol 2e-5 (the
//! seed's acceptance settings for bounded inputs and one FMA). A non-finite output or
//! reference is a failure.

use serde::Serialize;

/// The seed's length: odd, so the last 256-thread block is partly out of range.
pub const N: u64 = 1_000_003;
/// The seed's scalar.
pub const ALPHA: f32 = 1.25;
pub const ATOL: f64 = 2e-6;
pub const RTOL: f64 = 2e-5;
/// Threads per block.
pub const THREADS: u32 = 256;
/// Two float32 loads and one store per element.
pub const BYTES_PER_ELEMENT: u64 = 12;
/// One multiply and one add per element.
pub const FLOPS_PER_ELEMENT: u64 = 2;
/// `--check` cases (n, seed), in the seed's order.
pub const CHECK_CASES: [(u64, u32); 8] = [
    (0, 7),
    (1, 7),
    (255, 7),
    (256, 7),
    (257, 7),
    (N, 7),
    (N, 19),
    (N, 101),
];

pub const REFERENCE: &str = "CPU double FMA, one cast to float";
pub const RULE: &str = "|y - r| <= atol + rtol * |r|; non-finite output or reference fails";

/// Fill `x` and `z` (equal lengths) with the seed's deterministic pattern for `seed`,
/// including its special indices: zeros (i % 4096 == 0), the cancellation `x = 1,
/// z = -alpha` (== 1) and `1e10 * x + -1e10` (== 2).
pub fn fill_inputs(x: &mut [f32], z: &mut [f32], seed: u32, alpha: f32) {
    assert_eq!(x.len(), z.len());
    let seed = seed as usize;
    for i in 0..x.len() {
        let x_code = ((i.wrapping_mul(29).wrapping_add(seed * 17)) % 251) as i32 - 125;
        let z_code = ((i.wrapping_mul(31).wrapping_add(seed * 13)) % 239) as i32 - 119;
        let (mut xi, mut zi) = (x_code as f32 / 63.0, z_code as f32 / 71.0);
        match i % 4096 {
            0 => {
                xi = 0.0;
                zi = 0.0;
            }
            1 => {
                xi = 1.0;
                zi = -alpha;
            }
            2 => {
                xi = 1e10;
                zi = -1e10;
            }
            _ => {}
        }
        x[i] = xi;
        z[i] = zi;
    }
}

/// The reference value for one element.
pub fn reference(alpha: f32, x: f32, z: f32) -> f32 {
    f64::from(alpha).mul_add(f64::from(x), f64::from(z)) as f32
}

/// The outcome of comparing one output with the reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TriadVerdict {
    pub failures: u64,
    pub max_abs: f64,
    pub max_rel: f64,
    /// First failing index with its output and reference.
    pub first_failure: Option<(u64, f32, f32)>,
}

impl TriadVerdict {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }
}

/// Compare `y` with the reference, element by element.
pub fn verify(x: &[f32], z: &[f32], y: &[f32], alpha: f32) -> TriadVerdict {
    assert!(x.len() == z.len() && z.len() == y.len(), "lengths differ");
    let mut v = TriadVerdict {
        failures: 0,
        max_abs: 0.0,
        max_rel: 0.0,
        first_failure: None,
    };
    for i in 0..y.len() {
        let r = reference(alpha, x[i], z[i]);
        let failed = if !r.is_finite() || !y[i].is_finite() {
            v.max_abs = f64::INFINITY;
            v.max_rel = f64::INFINITY;
            true
        } else {
            let abs = (f64::from(y[i]) - f64::from(r)).abs();
            let rel = abs / f64::from(r).abs().max(1e-30);
            v.max_abs = v.max_abs.max(abs);
            v.max_rel = v.max_rel.max(rel);
            abs > ATOL + RTOL * f64::from(r).abs()
        };
        if failed {
            v.failures += 1;
            if v.first_failure.is_none() {
                v.first_failure = Some((i as u64, y[i], r));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(n: usize, seed: u32) -> (Vec<f32>, Vec<f32>) {
        let (mut x, mut z) = (vec![0.0; n], vec![0.0; n]);
        fill_inputs(&mut x, &mut z, seed, ALPHA);
        (x, z)
    }

    #[test]
    fn special_indices_are_the_seed_s() {
        let (x, z) = inputs(4099, 7);
        assert_eq!((x[0], z[0]), (0.0, 0.0));
        assert_eq!((x[1], z[1]), (1.0, -ALPHA));
        assert_eq!((x[2], z[2]), (1e10, -1e10));
        assert_eq!((x[4096], z[4096]), (0.0, 0.0));
        // Index 3, seed 7: x_code = (87 + 119) % 251 - 125 = 81, z_code = (93 + 91) % 239 - 119 = 65.
        assert_eq!((x[3], z[3]), (81.0 / 63.0, 65.0 / 71.0));
        assert_eq!(
            reference(ALPHA, 1.0, -ALPHA),
            0.0,
            "the cancellation case is exactly zero"
        );
        let (x2, _) = inputs(4099, 19);
        assert_ne!(x[3], x2[3], "seeds change the inputs");
    }

    #[test]
    fn a_float_fma_passes_and_a_wrong_or_missing_value_fails() {
        let (x, z) = inputs(5000, 19);
        let y: Vec<f32> = x
            .iter()
            .zip(&z)
            .map(|(a, b)| ALPHA.mul_add(*a, *b))
            .collect();
        let v = verify(&x, &z, &y, ALPHA);
        assert!(v.passed(), "{v:?}");
        assert!(v.max_abs < 1e-5);
        let mut bad = y.clone();
        bad[4999] = f32::from_bits(0xffff_ffff); // poison left in place: a skipped store
        bad[17] += 1e-3;
        let v = verify(&x, &z, &bad, ALPHA);
        assert_eq!(v.failures, 2);
        assert_eq!(v.first_failure.unwrap().0, 17);
        assert_eq!(v.max_abs, f64::INFINITY);
        // Without the FMA (two roundings in float32) the 1e10 case is still within tolerance
        // of the reference: the tolerance, not bit equality, decides.
        let unfused: Vec<f32> = x.iter().zip(&z).map(|(a, b)| ALPHA * a + b).collect();
        assert!(verify(&x, &z, &unfused, ALPHA).passed());
    }

    #[test]
    fn tolerance_is_atol_plus_rtol_times_reference() {
        let (x, z) = (vec![0.0f32, 400.0], vec![0.0f32, 0.0]);
        // r = 0: allowed 2e-6. r = 500: allowed 2e-6 + 1e-2.
        assert!(verify(&x, &z, &[1.5e-6, 500.009], ALPHA).passed());
        assert_eq!(verify(&x, &z, &[3e-6, 500.0], ALPHA).failures, 1);
        assert_eq!(verify(&x, &z, &[0.0, 500.02], ALPHA).failures, 1);
    }

    #[test]
    fn empty_input_passes() {
        assert!(verify(&[], &[], &[], ALPHA).passed());
    }
}
