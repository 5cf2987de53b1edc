//! The triad contract (seed 003): `y[i] = fmaf(alpha, x[i], z[i])` in float32.
//!
//! Reference: a CPU fused multiply-add in float64, cast once to float32. The GPU rounds
//! the fused operation directly to float32, so the reference is not a bitwise oracle:
//! an element passes when `|y - r| <= atol + rtol * |r|` with atol 2e-6 and rtol 2e-5 (the
//! seed's acceptance settings for bounded inputs and one FMA). A non-finite output or
//! reference is a failure.

/// The seed's length: odd, so the last 256-thread block is partly out of range.
pub const N: u64 = 1_000_003;
/// The seed's scalar.
pub const ALPHA: f32 = 1.25;
pub const ATOL: f64 = 2e-6;
pub const RTOL: f64 = 2e-5;
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
}
