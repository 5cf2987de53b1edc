//! klab-model: the CPU address model of the transpose lab: tile-mapping coverage, shared-memory banks,
//! global-memory sectors, and per-variant predictions.
//!
//! Everything here is exact enumeration of the index arithmetic in
//! `kernels/transpose.cu`, generalized to any matrix size `n >= 1`, tile width
//! `tile >= 1` and block height `block_rows >= 1`. It counts 32-byte regions
//! touched and distinct words per shared-memory bank; it does not model caches,
//! HBM transactions, warp scheduling or time, and it never runs CUDA.
//!
//! * [`coverage`]: every output written once, every shared read has the right producer.
//! * [`banks`]: which of the 32 banks a warp's shared accesses touch.
//! * [`sectors`]: which 32-byte sectors a warp's global accesses touch.
//! * [`predict`]: per-variant sectors and wavefronts per request over a whole grid.
//! * [`report`]: everything `klab model` prints, as JSON or plain text.
//! * [`bound`]: the prediction set against Nsight Compute's counters, and the verdict.

pub mod banks;
pub mod bound;
pub mod coverage;
pub mod predict;
pub mod report;
pub mod sectors;

pub use banks::{bank_map, wavefronts, wavefronts_with_banks, BankMap};
pub use coverage::{check_coverage, check_coverage_padded, CoverageReport};
pub use predict::{
    accesses, predict, predict_all, Access, AccessKind, AccessPrediction, AddressRule, FullWarp,
    LaneCtx, Space, VariantPrediction,
};
pub use report::{ModelParams, ModelReport};
pub use sectors::{sector_coverage, seed_sector_cases, SectorCase, SectorCoverage};

/// Threads per warp, and lanes per shared-memory request.
pub const WARP_SIZE: u64 = 32;

/// Upper bound on the lane-steps one model call may enumerate (about 6.9e10).
///
/// N = 46341 with the seed geometry needs about 4.3e9 for coverage and 2.2e9 per
/// access for predictions; anything past this limit would run for many minutes.
pub const MAX_WORK: u64 = 1 << 36;

/// Upper bound on `n * n` for the coverage bitset (2 GiB of bits; N <= 131072).
pub const MAX_COVERAGE_OUTPUTS: u64 = 1 << 34;

/// Upper bound on the words of one shared tile, `tile * (tile + padding)`, that the
/// coverage producer map holds (16M entries).
pub const MAX_TILE_WORDS: u64 = 1 << 24;

/// Why a model could not be computed. Nothing in this module panics on bad input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// A size that must be positive was zero.
    #[error("{what} must be at least 1, got 0")]
    Zero {
        /// Which parameter.
        what: &'static str,
    },
    /// A product of the parameters does not fit in 64 bits.
    #[error("{what} overflows 64-bit arithmetic")]
    Overflow {
        /// Which product.
        what: String,
    },
    /// The parameters are valid but the enumeration or its memory would be too large.
    #[error("{what} is {value}, above this model's limit of {limit}")]
    TooLarge {
        /// What was measured.
        what: String,
        /// Its value (saturated at `u128::MAX`).
        value: u128,
        /// The limit.
        limit: u64,
    },
    /// The coverage bitset could not be allocated.
    #[error("could not allocate {bytes} bytes for the output bitset")]
    Allocation {
        /// Bytes requested.
        bytes: u64,
    },
    /// A list parameter was empty.
    #[error("{what} must name at least one value")]
    Empty {
        /// Which list.
        what: &'static str,
    },
}

/// Validated launch geometry of the generalized transpose kernels.
///
/// Block = `tile x block_rows` threads, grid = `ceil(n/tile)^2` blocks, each thread
/// loops `for offset in (0..tile).step_by(block_rows)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub n: u64,
    pub tile: u64,
    pub block_rows: u64,
    pub padding: u64,
    /// Blocks per grid dimension: `ceil(n / tile)`.
    pub grid: u64,
    /// Threads per block: `tile * block_rows`.
    pub threads: u64,
    /// Offset-loop trips: `ceil(tile / block_rows)`.
    pub iterations: u64,
    /// Shared row stride in words: `tile + padding`.
    pub row_stride: u64,
}

impl Geometry {
    pub(crate) fn new(
        n: u64,
        tile: u32,
        block_rows: u32,
        padding: u32,
    ) -> Result<Self, ModelError> {
        if n == 0 {
            return Err(ModelError::Zero { what: "n" });
        }
        if tile == 0 {
            return Err(ModelError::Zero { what: "tile" });
        }
        if block_rows == 0 {
            return Err(ModelError::Zero { what: "block_rows" });
        }
        let (tile, block_rows, padding) =
            (u64::from(tile), u64::from(block_rows), u64::from(padding));
        n.checked_mul(n).ok_or_else(|| ModelError::Overflow {
            what: format!("n * n for n = {n}"),
        })?;
        let row_stride = tile + padding; // two u32 values: cannot overflow u64
                                         // tile * row_stride and every shared word index (< tile*row_stride + tile + block_rows)
        tile.checked_mul(row_stride)
            .and_then(|w| w.checked_add(tile))
            .and_then(|w| w.checked_add(block_rows))
            .ok_or_else(|| ModelError::Overflow {
                what: format!("shared tile words {tile} * ({tile} + {padding})"),
            })?;
        let grid = n.div_ceil(tile);
        Ok(Geometry {
            n,
            tile,
            block_rows,
            padding,
            grid,
            threads: tile * block_rows, // two u32 values: cannot overflow u64
            iterations: tile.div_ceil(block_rows),
            row_stride,
        })
    }

    /// Blocks in the grid (`grid^2 <= n^2`, already checked).
    pub(crate) fn blocks(&self) -> u64 {
        self.grid * self.grid
    }

    /// The `offset` values of the kernel loop, `0, block_rows, ...` below `tile`.
    pub(crate) fn offsets(&self) -> impl Iterator<Item = u64> {
        let (tile, step) = (self.tile, self.block_rows);
        (0..self.iterations)
            .map(move |i| i * step)
            .take_while(move |&o| o < tile)
    }
}

/// Fail with [`ModelError::TooLarge`] when `work` (computed in u128) exceeds `limit`.
pub(crate) fn check_limit(what: &str, work: u128, limit: u64) -> Result<(), ModelError> {
    if work > u128::from(limit) {
        Err(ModelError::TooLarge {
            what: what.to_string(),
            value: work,
            limit,
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_rejects_zero_and_overflow() {
        assert_eq!(
            Geometry::new(0, 32, 8, 0),
            Err(ModelError::Zero { what: "n" })
        );
        assert_eq!(
            Geometry::new(1, 0, 8, 0),
            Err(ModelError::Zero { what: "tile" })
        );
        assert_eq!(
            Geometry::new(1, 32, 0, 0),
            Err(ModelError::Zero { what: "block_rows" })
        );
        assert!(matches!(
            Geometry::new(1 << 32, 32, 8, 0),
            Err(ModelError::Overflow { .. })
        ));
        assert!(Geometry::new((1 << 32) - 1, 32, 8, 0).is_ok());
        assert!(matches!(
            Geometry::new(1, u32::MAX, 1, u32::MAX),
            Err(ModelError::Overflow { .. })
        ));
    }

    #[test]
    fn geometry_of_the_seed_launch() {
        let g = Geometry::new(33, 32, 8, 1).unwrap();
        assert_eq!(
            (g.grid, g.blocks(), g.threads, g.iterations, g.row_stride),
            (2, 4, 256, 4, 33)
        );
        assert_eq!(g.offsets().collect::<Vec<_>>(), [0, 8, 16, 24]);
        let g = Geometry::new(4096, 32, 7, 0).unwrap();
        assert_eq!(g.offsets().collect::<Vec<_>>(), [0, 7, 14, 21, 28]);
        let g = Geometry::new(5, 4, 9, 0).unwrap();
        assert_eq!(g.offsets().collect::<Vec<_>>(), [0]);
    }

    const NS: [u64; 12] = [
        0,
        1,
        2,
        3,
        5,
        31,
        33,
        64,
        100,
        (1 << 32) - 1,
        1 << 32,
        u64::MAX,
    ];
    const SIZES: [u32; 9] = [0, 1, 2, 3, 7, 32, 33, 1 << 16, u32::MAX];

    proptest::proptest! {
        /// Edge values either model exactly or fail with an error, quickly; never panic.
        #[test]
        fn edge_values_never_panic(
            n in proptest::sample::select(&NS[..]),
            tile in proptest::sample::select(&SIZES[..]),
            rows in proptest::sample::select(&SIZES[..]),
            padding in proptest::sample::select(vec![0u32, 1, u32::MAX]),
        ) {
            if let Ok(r) = check_coverage_padded(n, tile, rows, padding) {
                proptest::prop_assert_eq!(r.outputs_written + r.unwritten, n * n);
                proptest::prop_assert_eq!(r.ok(), r.first_problem.is_none());
            }
            for v in klab_spec::Variant::ALL {
                if let Ok(p) = predict(v, n, tile, rows) {
                    for a in &p.accesses {
                        proptest::prop_assert!(a.requests >= 1 && a.active_lanes <= 32 * a.requests);
                    }
                }
            }
            let _ = bank_map(tile, rows, padding);
        }
    }
}
