//! A small seeded PRNG: xoshiro256** (Blackman and Vigna) with its state filled by SplitMix64,
//! as the reference code recommends. Deterministic across platforms; no dependencies.

/// SplitMix64's output at position `i` of the stream with key `key` (its state after
/// `i + 1` steps): a counter-based generator.
pub fn splitmix_at(key: u64, i: u64) -> u64 {
    let mut z = key.wrapping_add(i.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64 step: advances `state` and returns the next output.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Seeded xoshiro256** generator. Not cryptographic; meant for reproducible resampling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose whole output stream is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        // Four consecutive SplitMix64 outputs are distinct, so the state is never all zero.
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { s }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n`, without modulo bias (Lemire's multiply-and-reject method).
    ///
    /// # Panics
    /// When `n` is 0: the range is empty.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below(0): empty range");
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            // 2^64 mod n: low halves below it belong to the over-represented outputs.
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_reference_outputs() {
        let mut state = 0;
        assert_eq!(splitmix64(&mut state), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut state), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(splitmix64(&mut state), 0x06c4_5d18_8009_454f);
    }

    /// First outputs pinned against Vigna's C reference (xoshiro256** seeded by SplitMix64).
    #[test]
    fn xoshiro_first_outputs_are_pinned() {
        let mut r = Rng::new(0);
        let got: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(
            got,
            [
                0x99ec_5f36_cb75_f2b4,
                0xbf6e_1f78_4956_452a,
                0x1a5f_849d_4933_e6e0,
                0x6aa5_94f1_262d_2d2c
            ]
        );
        let mut r = Rng::new(0x6b6c_6162);
        let got: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(
            got,
            [
                0x30b3_66d5_7538_a3de,
                0xaad1_a6be_35b8_1229,
                0xf32a_850d_10e5_f95c,
                0x2d5b_aecb_0df2_3daf
            ]
        );
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let a: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..16).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..16).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = Rng::new(43);
            (0..16).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_stays_in_range_and_hits_every_value() {
        let mut r = Rng::new(7);
        for n in [1u64, 2, 3, 5, 7, 10, 1000] {
            let mut seen = vec![false; n as usize];
            for _ in 0..(200 * n) {
                let v = r.below(n);
                assert!(v < n, "below({n}) gave {v}");
                seen[v as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "below({n}) missed a value");
        }
        for n in [u64::MAX, (1 << 63) + 1, 1 << 63] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
        assert_eq!(r.below(1), 0);
    }

    /// With n = 3 * 2^62, `x % n` would put half of all draws below 2^62 (those values are
    /// reached from two ranges of x); an unbiased draw puts a third there.
    #[test]
    fn below_has_no_modulo_bias() {
        let mut r = Rng::new(1);
        let n = 3u64 << 62;
        let draws = 30_000;
        let low = (0..draws).filter(|_| r.below(n) < (1u64 << 62)).count();
        let frac = low as f64 / draws as f64;
        assert!(
            (frac - 1.0 / 3.0).abs() < 0.02,
            "fraction below 2^62: {frac}"
        );
    }

    #[test]
    fn below_small_n_is_roughly_uniform() {
        let mut r = Rng::new(2);
        let mut counts = [0u32; 3];
        for _ in 0..30_000 {
            counts[r.below(3) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..=10_500).contains(&c), "{counts:?}");
        }
    }

    #[test]
    #[should_panic(expected = "empty range")]
    fn below_zero_panics() {
        Rng::new(0).below(0);
    }

    #[test]
    fn next_f64_is_in_unit_interval() {
        let mut r = Rng::new(3);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        assert!((sum / 10_000.0 - 0.5).abs() < 0.02);
    }
}
