//! Global-memory sector coverage: which 32-byte sectors a set of 4-byte words touches.
//!
//! Address-only model (seed 000's `sector_coverage`): word `w` lives at byte `4 * w`
//! of a 256-byte-aligned buffer and falls in sector `floor(4 * w / 32)`. It counts
//! 32-byte regions touched, not cache misses, HBM transactions or elapsed time.

use serde::Serialize;

/// Bytes per global-memory sector.
pub const SECTOR_BYTES: u64 = 32;
/// Bytes per modeled word (float32).
pub const WORD_BYTES: u64 = 4;
/// Words per sector.
pub(crate) const WORDS_PER_SECTOR: u64 = SECTOR_BYTES / WORD_BYTES;

/// Sectors touched by a set of word addresses and the share of their bytes that is payload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SectorCoverage {
    /// Distinct 32-byte sectors touched.
    pub sectors: u64,
    /// `4 *` distinct words.
    pub useful_bytes: u64,
    /// `useful_bytes / (32 * sectors)`; 0.0 when no word is given.
    pub payload_fraction: f64,
}

/// Sector coverage of 4-byte words given by index from a 256-byte-aligned base.
///
/// Duplicate words count once (a repeated address is one useful word).
pub fn sector_coverage<I: IntoIterator<Item = u64>>(word_indexes: I) -> SectorCoverage {
    let mut words: Vec<u64> = word_indexes.into_iter().collect();
    words.sort_unstable();
    words.dedup();
    let useful_words = words.len() as u64;
    let sectors = count_distinct_sorted(words.iter().map(|w| w / WORDS_PER_SECTOR));
    from_counts(sectors, useful_words)
}

pub(crate) fn from_counts(sectors: u64, useful_words: u64) -> SectorCoverage {
    let useful_bytes = useful_words.saturating_mul(WORD_BYTES);
    let payload_fraction = if sectors == 0 {
        0.0
    } else {
        useful_bytes as f64 / (sectors as f64 * SECTOR_BYTES as f64)
    };
    SectorCoverage {
        sectors,
        useful_bytes,
        payload_fraction,
    }
}

/// Distinct values of a nondecreasing sequence.
fn count_distinct_sorted<I: Iterator<Item = u64>>(values: I) -> u64 {
    let mut count = 0;
    let mut last = None;
    for v in values {
        if last != Some(v) {
            count += 1;
            last = Some(v);
        }
    }
    count
}

/// Sort a small slice in place unless it is already nondecreasing (the common case
/// for lane-ordered addresses), so the hot path of [`crate::predict`] skips the sort.
pub(crate) fn sort_small(words: &mut [u64]) {
    if !words.windows(2).all(|p| p[0] <= p[1]) {
        words.sort_unstable();
    }
}

/// Distinct sectors of one warp's word addresses (reorders `words`; no allocation).
pub(crate) fn warp_sectors(words: &mut [u64]) -> u64 {
    sort_small(words);
    count_distinct_sorted(words.iter().map(|w| w / WORDS_PER_SECTOR))
}

/// One named seed case: a warp's word addresses and their coverage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SectorCase {
    /// What the addresses are, as the seed names them.
    pub name: &'static str,
    /// The word indexes, described.
    pub words: &'static str,
    /// The result.
    pub coverage: SectorCoverage,
}

/// Seed 000's four sector cases, in the seed's order.
pub fn seed_sector_cases() -> Vec<SectorCase> {
    vec![
        SectorCase {
            name: "aligned row, N=4096",
            words: "0..32",
            coverage: sector_coverage(0..32),
        },
        SectorCase {
            name: "second row, N=33",
            words: "33..65",
            coverage: sector_coverage(33..65),
        },
        SectorCase {
            name: "naive column, N=4096",
            words: "lane * 4096, lane 0..32",
            coverage: sector_coverage((0..32).map(|lane| lane * 4096)),
        },
        SectorCase {
            name: "one active edge lane",
            words: "32",
            coverage: sector_coverage([32]),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(c: SectorCoverage, sectors: u64, useful: u64, fraction: f64) {
        assert_eq!(c.sectors, sectors);
        assert_eq!(c.useful_bytes, useful);
        assert_eq!(c.payload_fraction, fraction);
    }

    #[test]
    fn seed_cases_match_the_seed_printout() {
        let cases = seed_sector_cases();
        assert_eq!(cases.len(), 4);
        exact(cases[0].coverage, 4, 128, 1.0);
        exact(cases[1].coverage, 5, 128, 0.8);
        exact(cases[2].coverage, 32, 128, 0.125);
        exact(cases[3].coverage, 1, 4, 0.125);
    }

    #[test]
    fn empty_duplicates_and_order() {
        exact(sector_coverage(std::iter::empty()), 0, 0, 0.0);
        // Same word from every lane: one word, one sector.
        exact(sector_coverage([7; 32]), 1, 4, 0.125);
        // Order does not matter.
        exact(sector_coverage((0..32).rev()), 4, 128, 1.0);
        // Words 7 and 8 straddle a sector boundary; huge indexes do not overflow.
        exact(sector_coverage([7, 8]), 2, 8, 0.125);
        exact(sector_coverage([u64::MAX, u64::MAX - 1]), 1, 8, 0.25);
    }

    #[test]
    fn warp_sectors_agrees_with_sector_coverage() {
        let mut lanes: Vec<u64> = (0..32).map(|l| (l * 37) % 61 + 1000).collect();
        let expected = sector_coverage(lanes.clone()).sectors;
        assert_eq!(warp_sectors(&mut lanes), expected);
        let mut empty: [u64; 0] = [];
        assert_eq!(warp_sectors(&mut empty), 0);
    }

    proptest::proptest! {
        #[test]
        fn warp_sectors_matches_reference(words in proptest::collection::vec(0u64..4096, 0..33)) {
            let reference: std::collections::HashSet<u64> = words.iter().map(|w| 4 * w / 32).collect();
            let mut copy = words.clone();
            proptest::prop_assert_eq!(warp_sectors(&mut copy), reference.len() as u64);
            proptest::prop_assert_eq!(sector_coverage(words).sectors, reference.len() as u64);
        }
    }
}
