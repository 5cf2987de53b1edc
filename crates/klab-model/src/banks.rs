//! Shared-memory banks: word `k` lives in bank `k mod 32` (scalar 32-bit accesses).
//!
//! Distinct words in one bank serialize into separate wavefronts; lanes reading the
//! same word are served by broadcast. This counts distinct words per bank, not
//! load-to-use latency or time.

use serde::Serialize;

use super::ModelError;

/// Shared-memory banks on every architecture klab targets.
pub const BANKS: u32 = 32;

/// How a warp's column read of a row-major shared tile spreads over the banks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BankMap {
    /// Row stride of the tile in words (`tile + padding`).
    pub stride_words: u32,
    /// Lanes reading, lane `i` reading word `i * stride_words + c`.
    pub lanes: u32,
    /// Banks.
    pub banks: u32,
    /// Distinct banks the lanes touch.
    pub banks_touched: u32,
    /// Most distinct words in any one bank: the wavefronts of the request, the
    /// "n-way" of an n-way conflict (1 = conflict-free).
    pub max_words_per_bank: u32,
}

/// Bank map of a column read: lane `i` in `0..lanes` reads word `i * stride_words + c`.
///
/// The column `c` only rotates banks, so it does not change the counts. Exact closed
/// form: with `g = gcd(stride, banks)` lanes cycle through `banks / g` banks, so
/// `min(lanes, banks / g)` are touched with at most `ceil(lanes / (banks / g))`
/// distinct words each; stride 0 is one word read by every lane (broadcast).
pub fn bank_map(stride_words: u32, lanes: u32, banks: u32) -> Result<BankMap, ModelError> {
    if lanes == 0 {
        return Err(ModelError::Zero { what: "lanes" });
    }
    if banks == 0 {
        return Err(ModelError::Zero { what: "banks" });
    }
    let (banks_touched, max_words_per_bank) = if stride_words == 0 {
        (1, 1)
    } else {
        let period = banks / gcd(stride_words, banks);
        (lanes.min(period), lanes.div_ceil(period))
    };
    Ok(BankMap {
        stride_words,
        lanes,
        banks,
        banks_touched,
        max_words_per_bank,
    })
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Wavefronts of one shared request over 32 banks: the largest number of DISTINCT
/// words any bank must serve. Same word from several lanes = broadcast, no conflict.
/// 0 when no lane is active.
pub fn wavefronts(word_addresses: &[u64]) -> u32 {
    let mut counts = [0u32; BANKS as usize];
    if word_addresses.len() <= 64 {
        let mut buf = [0u64; 64];
        let words = &mut buf[..word_addresses.len()];
        words.copy_from_slice(word_addresses);
        warp_wavefronts_with(words, &mut counts)
    } else {
        let mut words = word_addresses.to_vec();
        warp_wavefronts_with(&mut words, &mut counts)
    }
}

/// [`wavefronts`] for any number of banks (`banks >= 1`).
pub fn wavefronts_with_banks(word_addresses: &[u64], banks: u32) -> Result<u32, ModelError> {
    if banks == 0 {
        return Err(ModelError::Zero { what: "banks" });
    }
    let mut words = word_addresses.to_vec();
    words.sort_unstable();
    words.dedup();
    let mut bank_of: Vec<u64> = words.iter().map(|w| w % u64::from(banks)).collect();
    bank_of.sort_unstable();
    let mut best = 0u64;
    let mut run = 0u64;
    for (i, b) in bank_of.iter().enumerate() {
        run = if i > 0 && bank_of[i - 1] == *b {
            run + 1
        } else {
            1
        };
        best = best.max(run);
    }
    Ok(u32::try_from(best).unwrap_or(u32::MAX))
}

/// Hot-path wavefronts for 32 banks: reorders `words`, no allocation.
pub(crate) fn warp_wavefronts(words: &mut [u64]) -> u32 {
    let mut counts = [0u32; BANKS as usize];
    warp_wavefronts_with(words, &mut counts)
}

fn warp_wavefronts_with(words: &mut [u64], counts: &mut [u32; BANKS as usize]) -> u32 {
    super::sectors::sort_small(words);
    let mut last = None;
    let mut best = 0;
    for &w in words.iter() {
        if last == Some(w) {
            continue; // broadcast: the same word again
        }
        last = Some(w);
        let c = &mut counts[(w % u64::from(BANKS)) as usize];
        *c = c.saturating_add(1);
        best = best.max(*c);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_strides() {
        let m = |s| {
            let b = bank_map(s, 32, 32).unwrap();
            (b.banks_touched, b.max_words_per_bank)
        };
        assert_eq!(m(32), (1, 32));
        assert_eq!(m(33), (32, 1));
        assert_eq!(m(34), (16, 2));
        // Seed 004: a 16-wide unpadded tile alternates two banks.
        assert_eq!(m(16), (2, 16));
        assert_eq!(m(17), (32, 1));
        assert_eq!(m(0), (1, 1));
        assert_eq!(m(1), (32, 1));
        assert_eq!(m(64), (1, 32));
    }

    #[test]
    fn bank_map_rejects_zero() {
        assert_eq!(bank_map(32, 0, 32), Err(ModelError::Zero { what: "lanes" }));
        assert_eq!(bank_map(32, 32, 0), Err(ModelError::Zero { what: "banks" }));
        let b = bank_map(u32::MAX, u32::MAX, u32::MAX).unwrap();
        assert_eq!((b.banks_touched, b.max_words_per_bank), (1, u32::MAX));
    }

    #[test]
    fn wavefronts_counts_distinct_words_per_bank() {
        assert_eq!(wavefronts(&[]), 0);
        assert_eq!(wavefronts(&[5]), 1);
        // 32 lanes on one word: broadcast.
        assert_eq!(wavefronts(&[64; 32]), 1);
        // Column of an unpadded 32-wide tile: 32 words in bank 3.
        let column: Vec<u64> = (0..32).map(|i| i * 32 + 3).collect();
        assert_eq!(wavefronts(&column), 32);
        // Two lanes per word, two words per bank.
        assert_eq!(wavefronts(&[0, 0, 32, 32, 1, 33]), 2);
        // Long input takes the allocating path.
        let long: Vec<u64> = (0..100).map(|i| i * 32).collect();
        assert_eq!(wavefronts(&long), 100);
        assert_eq!(wavefronts_with_banks(&long, 32).unwrap(), 100);
        assert_eq!(wavefronts_with_banks(&[0, 1, 2, 3], 2).unwrap(), 2);
        assert_eq!(wavefronts_with_banks(&[], 2).unwrap(), 0);
        assert!(wavefronts_with_banks(&[1], 0).is_err());
    }

    #[test]
    fn closed_form_matches_enumeration() {
        for banks in [1u32, 2, 7, 16, 32] {
            for lanes in 1u32..=40 {
                for stride in 0u32..=70 {
                    let words: Vec<u64> = (0..u64::from(lanes))
                        .map(|i| i * u64::from(stride) + 5)
                        .collect();
                    let touched: std::collections::HashSet<u64> =
                        words.iter().map(|w| w % u64::from(banks)).collect();
                    let b = bank_map(stride, lanes, banks).unwrap();
                    assert_eq!(
                        b.banks_touched as usize,
                        touched.len(),
                        "s{stride} l{lanes} b{banks}"
                    );
                    assert_eq!(
                        b.max_words_per_bank,
                        wavefronts_with_banks(&words, banks).unwrap(),
                        "s{stride} l{lanes} b{banks}"
                    );
                    if banks == 32 {
                        assert_eq!(b.max_words_per_bank, wavefronts(&words));
                    }
                }
            }
        }
    }
}
