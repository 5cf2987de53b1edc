//! Coverage of the tiled transpose mapping (`transpose_tile` in `kernels/transpose.cu`).
//!
//! Exhaustive enumeration, generalized to any `n`, `tile` and `block_rows`: a block of
//! `tile x block_rows` threads loops `for offset in (0..tile).step_by(block_rows)`;
//! the load phase stores `tile[ty + offset][tx]` from input
//! `(by*tile + ty + offset, bx*tile + tx)` when both are `< n`; the store phase writes
//! output `(bx*tile + ty + offset, by*tile + tx)` from `tile[tx][ty + offset]` under
//! the same kind of guard. The model checks that every output is written exactly once
//! and that every shared read has a producer in its block holding the transposed
//! input coordinate. All producer writes precede consumer reads here (the barrier);
//! reads whose producer sits in another warp are counted, because without the
//! barrier (`broken`) those are the race. It does not execute CUDA or model scheduling.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::{
    check_limit, Geometry, ModelError, MAX_COVERAGE_OUTPUTS, MAX_TILE_WORDS, MAX_WORK, WARP_SIZE,
};

/// The output-phase coordinate rule. Only `Transposed` is the kernel; the others are
/// deliberately wrong mappings that prove the checker can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mapping {
    /// `output_x = blockIdx.y * tile + tx`, `output_y = blockIdx.x * tile + ty`.
    Transposed,
    /// Seed 001's failure mode: the block indexes are not swapped on the output side
    /// (`output_x = blockIdx.x * tile + tx`, `output_y = blockIdx.y * tile + ty`).
    #[cfg(test)]
    UnswappedBlocks,
    /// Every output tile one tile to the right; the first tile column is never written.
    #[cfg(test)]
    ShiftedColumns,
}

impl Mapping {
    /// Output `(row, col)` of the block's shared element `(0, 0)` read by thread (0, 0).
    fn output_origin(self, bx: u64, by: u64, tile: u64) -> (u64, u64) {
        match self {
            Mapping::Transposed => (bx * tile, by * tile),
            #[cfg(test)]
            Mapping::UnswappedBlocks => (by * tile, bx * tile),
            #[cfg(test)]
            Mapping::ShiftedColumns => (bx * tile, (by + 1) * tile),
        }
    }
}

/// What the enumeration found. `ok()` = every failure count is zero.
///
/// Serializes with two derived fields, `ok` and `needs_barrier`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoverageReport {
    /// Matrix size.
    pub n: u64,
    /// Tile width (`blockDim.x`).
    pub tile: u32,
    /// Block height (`blockDim.y`).
    pub block_rows: u32,
    /// Shared row padding: the array is `tile[tile][tile + padding]`.
    pub padding: u32,
    /// Blocks enumerated, `ceil(n / tile)^2`.
    pub blocks: u64,
    /// `n * n`.
    pub outputs_expected: u64,
    /// Distinct outputs written at least once.
    pub outputs_written: u64,
    /// Output stores that hit an already written output.
    pub double_writes: u64,
    /// Outputs never written, `outputs_expected - outputs_written`.
    pub unwritten: u64,
    /// Admitted shared stores (inside the array or not).
    pub shared_stores: u64,
    /// Admitted shared loads (inside the array or not).
    pub shared_loads: u64,
    /// In-array shared loads whose element no thread of the block stored.
    pub reads_without_producer: u64,
    /// In-array shared loads whose producer holds an input coordinate other than the
    /// transpose of the output coordinate.
    pub wrong_source: u64,
    /// Admitted shared stores or loads whose `[row][col]` is outside
    /// `tile[tile][tile + padding]` (happens when `block_rows` does not divide `tile`).
    /// Such loads are not checked for a producer.
    pub out_of_tile: u64,
    /// Produced shared loads whose producer is a different thread of the same block.
    pub cross_thread_reads: u64,
    /// Produced shared loads whose producer is in a different warp (32 consecutive
    /// threads of `ty * tile + tx`). These need the block barrier; without it
    /// (`broken`) each is a predicted race. Not a failure of the mapping.
    pub cross_warp_reads: u64,
    /// The first problem found, naming block, thread and coordinates.
    pub first_problem: Option<String>,
    /// The first cross-warp read found (the first predicted race without a barrier).
    pub first_cross_warp_read: Option<String>,
}

impl CoverageReport {
    /// Every output written exactly once, every shared access inside the tile, every
    /// read produced by the right input element.
    pub fn ok(&self) -> bool {
        self.double_writes == 0
            && self.unwritten == 0
            && self.reads_without_producer == 0
            && self.wrong_source == 0
            && self.out_of_tile == 0
    }

    /// Whether some shared read crosses warps, so a block barrier must separate the
    /// phases.
    pub fn needs_barrier(&self) -> bool {
        self.cross_warp_reads > 0
    }
}

impl Serialize for CoverageReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("CoverageReport", 20)?;
        s.serialize_field("n", &self.n)?;
        s.serialize_field("tile", &self.tile)?;
        s.serialize_field("block_rows", &self.block_rows)?;
        s.serialize_field("padding", &self.padding)?;
        s.serialize_field("blocks", &self.blocks)?;
        s.serialize_field("outputs_expected", &self.outputs_expected)?;
        s.serialize_field("outputs_written", &self.outputs_written)?;
        s.serialize_field("double_writes", &self.double_writes)?;
        s.serialize_field("unwritten", &self.unwritten)?;
        s.serialize_field("shared_stores", &self.shared_stores)?;
        s.serialize_field("shared_loads", &self.shared_loads)?;
        s.serialize_field("reads_without_producer", &self.reads_without_producer)?;
        s.serialize_field("wrong_source", &self.wrong_source)?;
        s.serialize_field("out_of_tile", &self.out_of_tile)?;
        s.serialize_field("cross_thread_reads", &self.cross_thread_reads)?;
        s.serialize_field("cross_warp_reads", &self.cross_warp_reads)?;
        s.serialize_field("first_problem", &self.first_problem)?;
        s.serialize_field("first_cross_warp_read", &self.first_cross_warp_read)?;
        s.serialize_field("ok", &self.ok())?;
        s.serialize_field("needs_barrier", &self.needs_barrier())?;
        s.end()
    }
}

/// Check the kernel's tiled mapping with an unpadded `tile[tile][tile]` array.
pub fn check_coverage(n: u64, tile: u32, block_rows: u32) -> Result<CoverageReport, ModelError> {
    check_coverage_padded(n, tile, block_rows, 0)
}

/// Check the kernel's tiled mapping with a `tile[tile][tile + padding]` array.
///
/// Errors: zero sizes, `n * n` overflow, or more than [`MAX_COVERAGE_OUTPUTS`]
/// outputs, [`MAX_TILE_WORDS`] producer-map words or [`MAX_WORK`] lane-steps.
pub fn check_coverage_padded(
    n: u64,
    tile: u32,
    block_rows: u32,
    padding: u32,
) -> Result<CoverageReport, ModelError> {
    check_mapping(n, tile, block_rows, padding, Mapping::Transposed)
}

/// One entry of a block's producer map: which input element, which thread, which block.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Linear input index `row * n + col` the producer loaded.
    src: u64,
    /// Producer's linear thread id `ty * tile + tx`.
    thread: u64,
    /// Block stamp; an entry is live only for the block with this stamp.
    stamp: u64,
}

/// A bitset over `n * n` outputs.
struct Bitset {
    words: Vec<u64>,
}

impl Bitset {
    fn new(bits: u64) -> Result<Self, ModelError> {
        let len = bits.div_ceil(64);
        let bytes = len.saturating_mul(8);
        let len = usize::try_from(len).map_err(|_| ModelError::Allocation { bytes })?;
        let mut words = Vec::new();
        words
            .try_reserve_exact(len)
            .map_err(|_| ModelError::Allocation { bytes })?;
        words.resize(len, 0);
        Ok(Bitset { words })
    }

    /// Set bits `start..start + len` (in range); return how many were already set and
    /// the first such bit.
    fn set_range(&mut self, start: u64, len: u64) -> (u64, Option<u64>) {
        let end = start + len;
        let mut pos = start;
        let mut dups = 0;
        let mut first = None;
        while pos < end {
            let wi = (pos / 64) as usize;
            let bit = pos % 64;
            let take = (64 - bit).min(end - pos);
            let mask = if take == 64 {
                !0
            } else {
                ((1u64 << take) - 1) << bit
            };
            let old = self.words[wi];
            let dup = old & mask;
            if dup != 0 {
                dups += u64::from(dup.count_ones());
                first.get_or_insert(wi as u64 * 64 + u64::from(dup.trailing_zeros()));
            }
            self.words[wi] = old | mask;
            pos += take;
        }
        (dups, first)
    }

    fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// First clear bit below `bits`.
    fn first_zero(&self, bits: u64) -> Option<u64> {
        self.words
            .iter()
            .enumerate()
            .find(|(_, w)| **w != !0)
            .map(|(i, w)| i as u64 * 64 + u64::from(w.trailing_ones()))
            .filter(|&b| b < bits)
    }
}

/// Running counts of one enumeration.
#[derive(Default)]
struct Tally {
    double_writes: u64,
    shared_stores: u64,
    shared_loads: u64,
    reads_without_producer: u64,
    wrong_source: u64,
    out_of_tile: u64,
    cross_thread_reads: u64,
    cross_warp_reads: u64,
    first_problem: Option<String>,
    first_cross_warp_read: Option<String>,
}

impl Tally {
    #[cold]
    fn note(&mut self, message: impl FnOnce() -> String) {
        if self.first_problem.is_none() {
            self.first_problem = Some(message());
        }
    }
}

/// One row of shared reads (thread row `ty` at `off`), for describing what went wrong.
struct Read {
    n: u64,
    tile: u64,
    bx: u64,
    by: u64,
    ty: u64,
    off: u64,
    c: u64,
    out_row: u64,
    out_col0: u64,
}

impl Read {
    fn at(&self, tx: u64) -> String {
        format!(
            "block (bx={}, by={}) thread (tx={tx}, ty={}) offset {}",
            self.bx, self.by, self.ty, self.off
        )
    }

    /// A missing producer or a wrong source at lane `tx`, if any.
    #[cold]
    fn problem(&self, tx: u64, e: &Entry, stamp: u64) -> Option<String> {
        let (n, c, out_row, out_col) = (self.n, self.c, self.out_row, self.out_col0 + tx);
        if e.stamp != stamp {
            return Some(format!(
                "{}: output ({out_row}, {out_col}) reads tile[{tx}][{c}], which no thread of the block stored",
                self.at(tx)
            ));
        }
        (e.src != out_col * n + out_row).then(|| {
            format!(
                "{}: output ({out_row}, {out_col}) reads tile[{tx}][{c}] holding input ({}, {}), \
                 expected input ({out_col}, {out_row})",
                self.at(tx),
                e.src / n,
                e.src % n
            )
        })
    }

    /// A read at lane `tx` produced by another warp, if it is one.
    #[cold]
    fn race(&self, tx: u64, e: &Entry, stamp: u64) -> Option<String> {
        let me = self.ty * self.tile + tx;
        (e.stamp == stamp && e.thread / WARP_SIZE != me / WARP_SIZE).then(|| {
            format!(
                "block (bx={}, by={}) thread (tx={tx}, ty={}) of warp {} reads tile[{tx}][{}] \
                 stored by thread (tx={}, ty={}) of warp {}",
                self.bx,
                self.by,
                self.ty,
                me / WARP_SIZE,
                self.c,
                e.thread % self.tile,
                e.thread / self.tile,
                e.thread / WARP_SIZE
            )
        })
    }
}

/// The geometry of a coverage check and its producer map's (rows, words per row), once
/// every limit holds: cheap, so a caller with several checks to run asks for each first.
pub(crate) fn admit(
    n: u64,
    tile: u32,
    block_rows: u32,
    padding: u32,
) -> Result<(Geometry, u64, u64), ModelError> {
    let g = Geometry::new(n, tile, block_rows, padding)?;
    let outputs = n * n; // checked by Geometry
    check_limit("n * n outputs", u128::from(outputs), MAX_COVERAGE_OUTPUTS)?;
    // Admitted shared coordinates are < n as well as inside the loop bounds, so the
    // producer map only needs min(tile, n) rows of min(tile + padding, n) words.
    let map_rows = g.tile.min(n);
    let map_cols = g.row_stride.min(n);
    check_limit(
        "shared producer map words",
        u128::from(map_rows) * u128::from(map_cols),
        MAX_TILE_WORDS,
    )?;
    // Rows a block's loop reaches: last offset + block_rows (may exceed tile).
    let last_offset = (g.iterations - 1) * g.block_rows;
    let reach = (last_offset + g.block_rows).min(n);
    check_limit(
        "coverage lane-steps",
        2 * u128::from(g.blocks()) * u128::from(reach) * u128::from(map_rows),
        MAX_WORK,
    )?;
    Ok((g, map_rows, map_cols))
}

/// Enumerate the mapping block by block. `mapping` picks the output-phase rule.
pub(crate) fn check_mapping(
    n: u64,
    tile: u32,
    block_rows: u32,
    padding: u32,
    mapping: Mapping,
) -> Result<CoverageReport, ModelError> {
    let (g, map_rows, map_cols) = admit(n, tile, block_rows, padding)?;
    let outputs = n * n; // checked by Geometry
    let map_len = (map_rows * map_cols) as usize;
    let mut map: Vec<Entry> = Vec::new();
    map.try_reserve_exact(map_len)
        .map_err(|_| ModelError::Allocation {
            bytes: (map_len as u64).saturating_mul(std::mem::size_of::<Entry>() as u64),
        })?;
    map.resize(
        map_len,
        Entry {
            src: 0,
            thread: 0,
            stamp: 0,
        },
    );
    let mut walk = Walk {
        out: Bitset::new(outputs)?,
        map,
        map_cols,
        t: Tally::default(),
        mapping,
        g,
    };
    let mut stamp = 0u64;
    // bx outer: consecutive blocks write consecutive columns of the same output rows.
    for bx in 0..walk.g.grid {
        for by in 0..walk.g.grid {
            stamp += 1;
            walk.load(bx, by, stamp);
            walk.store(bx, by, stamp);
        }
    }
    let Walk { out, mut t, g, .. } = walk;
    let outputs_written = out.count_ones();
    let unwritten = outputs - outputs_written;
    if unwritten > 0 {
        if let Some(bit) = out.first_zero(outputs) {
            t.note(|| format!("output ({}, {}) is never written", bit / n, bit % n));
        }
    }
    Ok(CoverageReport {
        n,
        tile,
        block_rows,
        padding,
        blocks: g.blocks(),
        outputs_expected: outputs,
        outputs_written,
        double_writes: t.double_writes,
        unwritten,
        shared_stores: t.shared_stores,
        shared_loads: t.shared_loads,
        reads_without_producer: t.reads_without_producer,
        wrong_source: t.wrong_source,
        out_of_tile: t.out_of_tile,
        cross_thread_reads: t.cross_thread_reads,
        cross_warp_reads: t.cross_warp_reads,
        first_problem: t.first_problem,
        first_cross_warp_read: t.first_cross_warp_read,
    })
}

/// The walk over every block: the outputs written, the shared tile's producers (stamped
/// per block), and the tally.
struct Walk {
    out: Bitset,
    map: Vec<Entry>,
    map_cols: u64,
    t: Tally,
    mapping: Mapping,
    g: Geometry,
}

impl Walk {
    /// Block (bx, by)'s load phase: which thread put which input where in the tile.
    fn load(&mut self, bx: u64, by: u64, stamp: u64) {
        let (n, map_cols) = (self.g.n, self.map_cols);
        let (tile, rows, stride) = (self.g.tile, self.g.block_rows, self.g.row_stride);
        // Load phase: tile[ty + offset][tx] = input[(by*tile + ty + offset) * n + bx*tile + tx].
        let (in_row0, in_col0) = (by * tile, bx * tile);
        let cols = (n - in_col0).min(tile); // tx admitted: 0..cols
        for off in self.g.offsets() {
            if in_row0 + off >= n {
                break;
            }
            for ty in 0..rows {
                let r = ty + off;
                let in_row = in_row0 + r;
                if in_row >= n {
                    break;
                }
                if r >= tile {
                    self.t.out_of_tile += cols;
                    self.t.note(|| {
                        format!(
                            "block (bx={bx}, by={by}) thread (tx=0, ty={ty}) offset {off}: \
                             shared store tile[{r}][0] is outside tile[{tile}][{stride}] \
                             (input ({in_row}, {in_col0}))"
                        )
                    });
                    continue;
                }
                self.t.shared_stores += cols;
                let base = (r * map_cols) as usize;
                let src0 = in_row * n + in_col0;
                let thread0 = ty * tile;
                // Thread (tx, ty) stores input (in_row, in_col0 + tx) at tile[r][tx].
                for (tx, e) in (0..cols).zip(&mut self.map[base..base + cols as usize]) {
                    *e = Entry {
                        src: src0 + tx,
                        thread: thread0 + tx,
                        stamp,
                    };
                }
            }
        }
    }

    /// Block (bx, by)'s store phase: each output written once, from the tile element its
    /// own input was loaded into, by a thread of the same warp.
    fn store(&mut self, bx: u64, by: u64, stamp: u64) {
        let (n, map_cols) = (self.g.n, self.map_cols);
        let (tile, rows, stride) = (self.g.tile, self.g.block_rows, self.g.row_stride);
        // Store phase: output[(out_row0 + ty + offset) * n + out_col0 + tx] = tile[tx][ty + offset].
        let (out_row0, out_col0) = self.mapping.output_origin(bx, by, tile);
        if out_row0 >= n || out_col0 >= n {
            return;
        }
        let out_cols = (n - out_col0).min(tile);
        for off in self.g.offsets() {
            if out_row0 + off >= n {
                break;
            }
            for ty in 0..rows {
                let c = ty + off;
                let out_row = out_row0 + c;
                if out_row >= n {
                    break;
                }
                self.t.shared_loads += out_cols;
                let (dups, first_dup) = self.out.set_range(out_row * n + out_col0, out_cols);
                if dups > 0 {
                    self.t.double_writes += dups;
                    if let Some(bit) = first_dup {
                        self.t.note(|| {
                            let tx = bit - (out_row * n + out_col0);
                            format!(
                                "block (bx={bx}, by={by}) thread (tx={tx}, ty={ty}) offset {off}: \
                                 output ({out_row}, {}) is written more than once",
                                out_col0 + tx
                            )
                        });
                    }
                }
                if c >= stride {
                    self.t.out_of_tile += out_cols;
                    self.t.note(|| {
                        format!(
                            "block (bx={bx}, by={by}) thread (tx=0, ty={ty}) offset {off}: \
                             shared load tile[0][{c}] is outside tile[{tile}][{stride}] \
                             (output ({out_row}, {out_col0}))"
                        )
                    });
                    continue;
                }
                let me0 = ty * tile;
                // Expected source of output (out_row, out_col0 + tx): input (out_col0 + tx, out_row).
                let expect0 = out_col0 * n + out_row;
                // Tight, branch-light pass; messages come from a rescan on the rare path.
                let (mut missing, mut wrong, mut other_thread, mut other_warp) =
                    (0u64, 0u64, 0u64, 0u64);
                let mut idx = c as usize;
                let (mut me, mut expect) = (me0, expect0);
                for _ in 0..out_cols {
                    let e = &self.map[idx];
                    if e.stamp != stamp {
                        missing += 1;
                    } else {
                        wrong += u64::from(e.src != expect);
                        other_thread += u64::from(e.thread != me);
                        other_warp += u64::from(e.thread / WARP_SIZE != me / WARP_SIZE);
                    }
                    idx += map_cols as usize;
                    me += 1;
                    expect += n;
                }
                self.t.reads_without_producer += missing;
                self.t.wrong_source += wrong;
                self.t.cross_thread_reads += other_thread;
                self.t.cross_warp_reads += other_warp;
                let describe_problem = (missing > 0 || wrong > 0) && self.t.first_problem.is_none();
                let describe_race = other_warp > 0 && self.t.first_cross_warp_read.is_none();
                if describe_problem || describe_race {
                    let read = Read {
                        n,
                        tile,
                        bx,
                        by,
                        ty,
                        off,
                        c,
                        out_row,
                        out_col0,
                    };
                    for tx in 0..out_cols {
                        let e = &self.map[(tx * map_cols + c) as usize];
                        if describe_problem && self.t.first_problem.is_none() {
                            self.t.first_problem = read.problem(tx, e, stamp);
                        }
                        if describe_race && self.t.first_cross_warp_read.is_none() {
                            self.t.first_cross_warp_read = read.race(tx, e, stamp);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const LADDER: [u64; 7] = [1, 7, 31, 32, 33, 65, 257];

    fn assert_clean(r: &CoverageReport) {
        let nn = r.n * r.n;
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.outputs_expected, nn);
        assert_eq!(r.outputs_written, nn);
        assert_eq!(r.shared_stores, nn);
        assert_eq!(r.shared_loads, nn);
        assert_eq!(
            (
                r.double_writes,
                r.unwritten,
                r.reads_without_producer,
                r.wrong_source,
                r.out_of_tile
            ),
            (0, 0, 0, 0, 0)
        );
        assert_eq!(r.first_problem, None);
    }

    #[test]
    fn seed_ladder_passes_with_the_kernel_geometry() {
        for n in LADDER {
            for padding in [0, 1] {
                let r = check_coverage_padded(n, 32, 8, padding).unwrap();
                assert_clean(&r);
                assert_eq!(r.blocks, n.div_ceil(32).pow(2));
            }
        }
    }

    #[test]
    fn n_4096_passes() {
        let r = check_coverage(4096, 32, 8).unwrap();
        assert_clean(&r);
        assert_eq!(r.blocks, 128 * 128);
        assert!(r.needs_barrier());
    }

    #[test]
    fn seed_004_geometry_16_by_16_passes() {
        for n in LADDER {
            assert_clean(&check_coverage(n, 16, 16).unwrap());
        }
    }

    #[test]
    fn cross_warp_reads_are_counted_exactly() {
        // One full 32x32 block: thread (tx, ty) at offset o reads tile[tx][ty+o], stored by
        // thread (ty+o, tx%8) of warp tx%8. Same warp iff tx%8 == ty: 4 of 32 tx for each
        // of the 32 (ty, o) pairs, so 1024 - 128 = 896 cross-warp reads; same thread iff
        // tx == ty+o: 32 reads, so 992 cross-thread reads.
        let r = check_coverage(32, 32, 8).unwrap();
        assert_eq!((r.cross_warp_reads, r.cross_thread_reads), (896, 992));
        // N=33 adds two one-column edge blocks with 28 cross-warp reads each:
        // block (1,0) reads tile[tx][0] (tx 0..31, warp 0), stored by warp tx%8;
        // block (0,1) reads tile[0][ty+o] (warp ty), stored by thread (ty+o, 0), warp 0.
        let r = check_coverage(33, 32, 8).unwrap();
        assert_eq!(r.cross_warp_reads, 896 + 28 + 28);
        assert!(r.needs_barrier());
        assert_eq!(
            r.first_cross_warp_read.as_deref(),
            Some("block (bx=0, by=0) thread (tx=1, ty=0) of warp 0 reads tile[1][0] stored by thread (tx=0, ty=1) of warp 1")
        );
        // A single element never leaves thread (0, 0).
        let r = check_coverage(1, 32, 8).unwrap();
        assert_eq!((r.cross_warp_reads, r.cross_thread_reads), (0, 0));
        assert!(!r.needs_barrier());
        assert_eq!(r.first_cross_warp_read, None);
    }

    #[test]
    fn block_rows_not_dividing_tile_is_caught() {
        // tile 32, block_rows 7: offsets 0,7,..,28 with ty <= 6 reach rows 32..34.
        // N=64, grid 2x2. Stores: blocks with by=0 admit input rows 32..34 as shared rows
        // 32..34: 3 rows x 32 cols x 2 blocks = 192. Loads: blocks with bx=0 read
        // tile[tx][32..34] for output rows 32..34: another 192. Those output rows are
        // also written by the bx=1 blocks: 3 x 64 = 192 double writes.
        let r = check_coverage(64, 32, 7).unwrap();
        assert!(!r.ok());
        assert_eq!(r.out_of_tile, 384);
        assert_eq!(r.double_writes, 192);
        assert_eq!(
            (r.unwritten, r.reads_without_producer, r.wrong_source),
            (0, 0, 0)
        );
        assert_eq!(
            r.first_problem.as_deref(),
            Some("block (bx=0, by=0) thread (tx=0, ty=4) offset 28: shared store tile[32][0] is outside tile[32][32] (input (32, 0))")
        );
        // With a padded row the load of column 32 stays in the array but has no
        // producer (32 per block x 2); columns 33 and 34 remain outside.
        let r = check_coverage_padded(64, 32, 7, 1).unwrap();
        assert_eq!(r.out_of_tile, 192 + 128);
        assert_eq!(r.reads_without_producer, 64);
        assert!(check_coverage(33, 32, 7).unwrap().out_of_tile > 0);
        assert!(check_coverage(4096, 32, 7).unwrap().out_of_tile > 0);
    }

    #[test]
    fn unswapped_block_indexes_are_caught() {
        // One block: the grid's only block is on the diagonal, so forgetting the swap
        // is invisible there.
        let r = check_mapping(32, 32, 8, 0, Mapping::UnswappedBlocks).unwrap();
        assert!(r.ok());
        // N=64: both off-diagonal blocks read a tile holding input (by*32+tx, bx*32+c)
        // for output (by*32+c, bx*32+tx), whose source must be (bx*32+tx, by*32+c).
        let r = check_mapping(64, 32, 8, 0, Mapping::UnswappedBlocks).unwrap();
        assert!(!r.ok());
        assert_eq!(r.wrong_source, 2 * 1024);
        assert_eq!(
            (r.double_writes, r.unwritten, r.reads_without_producer),
            (0, 0, 0)
        );
        assert_eq!(
            r.first_problem.as_deref(),
            Some("block (bx=0, by=1) thread (tx=0, ty=0) offset 0: output (32, 0) reads tile[0][0] holding input (32, 0), expected input (0, 32)")
        );
        // N=33: the edge blocks (1,0) and (0,1) each read 32 elements of which only
        // one was stored (31 without a producer) and that one is the wrong element.
        let r = check_mapping(33, 32, 8, 0, Mapping::UnswappedBlocks).unwrap();
        assert_eq!((r.wrong_source, r.reads_without_producer), (2, 62));
    }

    #[test]
    fn errors_instead_of_panics() {
        assert_eq!(
            check_coverage(0, 32, 8),
            Err(ModelError::Zero { what: "n" })
        );
        assert_eq!(
            check_coverage(1, 0, 8),
            Err(ModelError::Zero { what: "tile" })
        );
        assert_eq!(
            check_coverage(1, 32, 0),
            Err(ModelError::Zero { what: "block_rows" })
        );
        assert!(matches!(
            check_coverage(u64::MAX, 32, 8),
            Err(ModelError::Overflow { .. })
        ));
        assert!(matches!(
            check_coverage(200_000, 32, 8),
            Err(ModelError::TooLarge { .. })
        ));
        assert!(matches!(
            check_coverage(5000, 5000, 1),
            Err(ModelError::TooLarge { .. })
        ));
        // Huge tiles on small matrices are fine: only min(tile, n) matters.
        assert_clean(&check_coverage(3, u32::MAX, u32::MAX).unwrap());
        // block_rows > tile: rows 1.. of a 1-wide tile are outside it.
        let r = check_coverage_padded(5, 1, u32::MAX, u32::MAX).unwrap();
        assert!(!r.ok());
        assert_eq!(r.out_of_tile, 50);
    }

    #[test]
    fn unwritten_outputs_are_reported() {
        let mut b = Bitset::new(130).unwrap();
        assert_eq!(b.words.len(), 3);
        assert_eq!(b.set_range(0, 4), (0, None));
        assert_eq!(b.set_range(2, 4), (2, Some(2)));
        assert_eq!(b.count_ones(), 6);
        assert_eq!(b.first_zero(130), Some(6));
        assert_eq!(b.set_range(60, 70), (0, None));
        assert_eq!(b.set_range(6, 54), (0, None));
        assert_eq!(b.first_zero(130), None);
        assert_eq!(b.count_ones(), 130);
        assert_eq!(b.set_range(0, 130), (130, Some(0)));
        // A mapping that shifts every output tile one tile right never writes the
        // first tile column: 64 rows x 32 columns.
        let r = check_mapping(64, 32, 8, 0, Mapping::ShiftedColumns).unwrap();
        assert_eq!(
            (r.unwritten, r.outputs_written, r.double_writes),
            (2048, 2048, 0)
        );
        assert_eq!(r.wrong_source, 2048);
        let r = check_mapping(32, 32, 8, 0, Mapping::ShiftedColumns).unwrap();
        assert_eq!(r.unwritten, 1024);
        assert_eq!(
            r.first_problem.as_deref(),
            Some("output (0, 0) is never written")
        );
    }

    #[test]
    fn serializes_with_ok_and_needs_barrier() {
        let v = serde_json::to_value(check_coverage(33, 32, 8).unwrap()).unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(v["needs_barrier"], true);
        assert_eq!(v["outputs_written"], 1089);
        assert_eq!(v["first_problem"], serde_json::Value::Null);
    }

    /// Counts of the seed's dictionary-based `check_mapping`, generalized.
    #[derive(Debug, PartialEq, Eq)]
    struct Counts([u64; 10]);

    fn fast_counts(r: &CoverageReport) -> Counts {
        Counts([
            r.outputs_written,
            r.double_writes,
            r.unwritten,
            r.shared_stores,
            r.shared_loads,
            r.reads_without_producer,
            r.wrong_source,
            r.out_of_tile,
            r.cross_thread_reads,
            r.cross_warp_reads,
        ])
    }

    fn reference(n: u64, tile: u64, rows: u64, pad: u64, mapping: Mapping) -> Counts {
        let grid = n.div_ceil(tile);
        let mut out: HashMap<(u64, u64), u64> = HashMap::new();
        let (mut stores, mut loads, mut nop, mut wrong, mut oot, mut ct, mut cw) =
            (0, 0, 0, 0, 0, 0, 0);
        for by in 0..grid {
            for bx in 0..grid {
                let mut shared = HashMap::new();
                for ty in 0..rows {
                    for tx in 0..tile {
                        for off in (0..tile).step_by(rows as usize) {
                            let (row, col) = (by * tile + ty + off, bx * tile + tx);
                            if row < n && col < n {
                                if ty + off >= tile || tx >= tile + pad {
                                    oot += 1;
                                } else {
                                    stores += 1;
                                    shared.insert((ty + off, tx), ((row, col), ty * tile + tx));
                                }
                            }
                        }
                    }
                }
                let (row0, col0) = mapping.output_origin(bx, by, tile);
                for ty in 0..rows {
                    for tx in 0..tile {
                        for off in (0..tile).step_by(rows as usize) {
                            let (row, col) = (row0 + ty + off, col0 + tx);
                            if row < n && col < n {
                                loads += 1;
                                *out.entry((row, col)).or_default() += 1;
                                let (sr, sc) = (tx, ty + off);
                                if sr >= tile || sc >= tile + pad {
                                    oot += 1;
                                    continue;
                                }
                                let me = ty * tile + tx;
                                match shared.get(&(sr, sc)) {
                                    None => nop += 1,
                                    Some(&(src, thread)) => {
                                        if src != (col, row) {
                                            wrong += 1;
                                        }
                                        if thread != me {
                                            ct += 1;
                                            if thread / 32 != me / 32 {
                                                cw += 1;
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        let written = out.len() as u64;
        let double: u64 = out.values().map(|c| c - 1).sum();
        Counts([
            written,
            double,
            n * n - written,
            stores,
            loads,
            nop,
            wrong,
            oot,
            ct,
            cw,
        ])
    }

    proptest::proptest! {
        #[test]
        fn matches_the_reference_enumeration(
            n in 1u64..70, tile in 1u32..40, rows in 1u32..40, pad in 0u32..3, which in 0u8..3,
        ) {
            let mapping = [Mapping::Transposed, Mapping::UnswappedBlocks, Mapping::ShiftedColumns][usize::from(which)];
            let fast = check_mapping(n, tile, rows, pad, mapping).unwrap();
            let slow = reference(n, tile.into(), rows.into(), pad.into(), mapping);
            proptest::prop_assert_eq!(fast_counts(&fast), slow);
            proptest::prop_assert_eq!(fast.ok(), fast.first_problem.is_none());
        }

        #[test]
        fn dividing_block_rows_always_pass(n in 1u64..300, tile in 1u32..48, k in 0usize..48) {
            let divisors: Vec<u32> = (1..=tile).filter(|d| tile % d == 0).collect();
            let rows = divisors[k % divisors.len()];
            let r = check_coverage(n, tile, rows).unwrap();
            proptest::prop_assert!(r.ok(), "{:?}", r);
            proptest::prop_assert_eq!(r.outputs_written, n * n);
        }
    }

    /// `cargo test --release -p klab-model -- --ignored --nocapture coverage_timing`
    #[test]
    #[ignore = "timing: run in release"]
    fn coverage_timing() {
        for n in [4096u64, 46341] {
            let start = std::time::Instant::now();
            let r = check_coverage(n, 32, 8).unwrap();
            eprintln!("coverage N={n}: {:?}", start.elapsed());
            assert_clean(&r);
        }
    }
}
