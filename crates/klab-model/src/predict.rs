//! Per-variant predictions: sectors per request of each global access and wavefronts
//! (bank-conflict degree) of each shared access, aggregated over the whole grid.
//!
//! Each kernel of `kernels/transpose.cu` is described as data: a table of its memory
//! instructions, each with a per-lane address rule that mirrors the source, guard
//! included. Threads are linearized x-fastest (`ty * tile + tx`) and chunked into
//! 32-lane warps; one request is one warp executing one access at one offset
//! iteration with at least one active lane. The model counts 32-byte sectors and
//! distinct words per bank; it does not model caches, HBM transactions or time.

use serde::Serialize;

use super::banks::warp_wavefronts;
use super::sectors::{warp_sectors, SECTOR_BYTES, WORD_BYTES};
use super::{check_limit, Geometry, ModelError, MAX_WORK, WARP_SIZE};
use klab_spec::variant::Variant;

/// Memory space of an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Space {
    /// Device memory: counted in 32-byte sectors.
    Global,
    /// Shared memory: counted in wavefronts (distinct words per bank).
    Shared,
}

/// Direction of an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessKind {
    /// Read.
    Load,
    /// Write.
    Store,
}

/// Everything an address rule may depend on, for one lane at one offset iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaneCtx {
    /// Matrix size.
    pub n: u64,
    /// Tile width (`blockDim.x`).
    pub tile: u64,
    /// Block height (`blockDim.y`).
    pub block_rows: u64,
    /// Shared row padding in words (0 for kernels without a tile).
    pub padding: u64,
    /// `blockIdx.x`.
    pub bx: u64,
    /// `blockIdx.y`.
    pub by: u64,
    /// `threadIdx.x`.
    pub tx: u64,
    /// `threadIdx.y`.
    pub ty: u64,
    /// The loop variable `offset`.
    pub offset: u64,
}

/// Word-address rules of the kernels' memory instructions, guards included.
///
/// With `x = bx*tile + tx`, `y = by*tile + ty` (input side) and
/// `ox = by*tile + tx`, `oy = bx*tile + ty` (output side of the tiled kernels).
/// Every rule is block-affine: an admitted lane's address is a base depending only on
/// `(bx, by)` plus a pattern depending only on `(tx, ty, offset)`; the prediction's
/// interior-block shortcut relies on this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressRule {
    /// `(y + offset) * n + x` if `x < n && y + offset < n`: every input load, and
    /// the copy store.
    InputRowMajor,
    /// `x * n + y + offset` if `x < n && y + offset < n`: the naive store.
    NaiveColumnStore,
    /// `tile[ty + offset][tx]` = word `(ty + offset) * (tile + padding) + tx` if
    /// `x < n && y + offset < n`.
    SharedRowStore,
    /// `tile[tx][ty + offset]` = word `tx * (tile + padding) + ty + offset` if
    /// `ox < n && oy + offset < n`.
    SharedColumnLoad,
    /// `(oy + offset) * n + ox` if `ox < n && oy + offset < n`: the tiled store.
    OutputRowMajor,
}

impl AddressRule {
    /// The word index one lane accesses, or `None` when the guard excludes it (or
    /// when the arithmetic would overflow u64, which no validated launch reaches).
    #[inline(always)]
    pub fn address(self, c: &LaneCtx) -> Option<u64> {
        match self {
            AddressRule::InputRowMajor => {
                let (x, y) = input_xy(c)?;
                guard(x, y, c.n)?;
                y.checked_mul(c.n)?.checked_add(x)
            }
            AddressRule::NaiveColumnStore => {
                let (x, y) = input_xy(c)?;
                guard(x, y, c.n)?;
                x.checked_mul(c.n)?.checked_add(y)
            }
            AddressRule::SharedRowStore => {
                let (x, y) = input_xy(c)?;
                guard(x, y, c.n)?;
                let row = c.ty.checked_add(c.offset)?;
                row.checked_mul(c.tile.checked_add(c.padding)?)?
                    .checked_add(c.tx)
            }
            AddressRule::SharedColumnLoad => {
                let (x, y) = output_xy(c)?;
                guard(x, y, c.n)?;
                let col = c.ty.checked_add(c.offset)?;
                c.tx.checked_mul(c.tile.checked_add(c.padding)?)?
                    .checked_add(col)
            }
            AddressRule::OutputRowMajor => {
                let (x, y) = output_xy(c)?;
                guard(x, y, c.n)?;
                y.checked_mul(c.n)?.checked_add(x)
            }
        }
    }
}

/// The kernels' bounds guard `x < n && y + offset < n`.
#[inline(always)]
fn guard(x: u64, y: u64, n: u64) -> Option<()> {
    (x < n && y < n).then_some(())
}

/// `(x, y + offset)` on the input side.
#[inline(always)]
fn input_xy(c: &LaneCtx) -> Option<(u64, u64)> {
    Some((
        c.bx.checked_mul(c.tile)?.checked_add(c.tx)?,
        c.by.checked_mul(c.tile)?
            .checked_add(c.ty)?
            .checked_add(c.offset)?,
    ))
}

/// `(ox, oy + offset)` on the output side of the tiled kernels.
#[inline(always)]
fn output_xy(c: &LaneCtx) -> Option<(u64, u64)> {
    Some((
        c.by.checked_mul(c.tile)?.checked_add(c.tx)?,
        c.bx.checked_mul(c.tile)?
            .checked_add(c.ty)?
            .checked_add(c.offset)?,
    ))
}

/// One memory instruction of a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Access {
    /// Human name, e.g. "global load input".
    pub name: &'static str,
    /// Memory space.
    pub space: Space,
    /// Load or store.
    pub kind: AccessKind,
    /// Per-lane word address.
    pub rule: AddressRule,
}

const COPY: [Access; 2] = [
    Access {
        name: "global load input",
        space: Space::Global,
        kind: AccessKind::Load,
        rule: AddressRule::InputRowMajor,
    },
    Access {
        name: "global store output",
        space: Space::Global,
        kind: AccessKind::Store,
        rule: AddressRule::InputRowMajor,
    },
];

const NAIVE: [Access; 2] = [
    Access {
        name: "global load input",
        space: Space::Global,
        kind: AccessKind::Load,
        rule: AddressRule::InputRowMajor,
    },
    Access {
        name: "global store output",
        space: Space::Global,
        kind: AccessKind::Store,
        rule: AddressRule::NaiveColumnStore,
    },
];

const TILED: [Access; 4] = [
    Access {
        name: "global load input",
        space: Space::Global,
        kind: AccessKind::Load,
        rule: AddressRule::InputRowMajor,
    },
    Access {
        name: "shared store tile",
        space: Space::Shared,
        kind: AccessKind::Store,
        rule: AddressRule::SharedRowStore,
    },
    Access {
        name: "shared load tile",
        space: Space::Shared,
        kind: AccessKind::Load,
        rule: AddressRule::SharedColumnLoad,
    },
    Access {
        name: "global store output",
        space: Space::Global,
        kind: AccessKind::Store,
        rule: AddressRule::OutputRowMajor,
    },
];

/// The memory instructions of a variant's kernel, in source order.
pub fn accesses(variant: Variant) -> &'static [Access] {
    match variant {
        Variant::Copy => &COPY,
        Variant::Naive => &NAIVE,
        Variant::Tiled | Variant::Padded | Variant::Broken => &TILED,
    }
}

/// The first warp request (in block-row, block, offset, warp order) with all 32
/// lanes active, and its sectors or wavefronts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FullWarp {
    /// `blockIdx.x`.
    pub bx: u64,
    /// `blockIdx.y`.
    pub by: u64,
    /// Warp index within the block.
    pub warp: u64,
    /// Loop offset.
    pub offset: u64,
    /// Sectors (global) or wavefronts (shared) of this one request.
    pub value: u64,
}

/// One access's prediction over the whole grid.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccessPrediction {
    /// Access name.
    pub name: &'static str,
    /// Memory space.
    pub space: Space,
    /// Load or store.
    pub kind: AccessKind,
    /// Address rule.
    pub rule: AddressRule,
    /// Warp requests with at least one active lane.
    pub requests: u64,
    /// Active lanes summed over requests.
    pub active_lanes: u64,
    /// Global: distinct 32-byte sectors per request, summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sectors: Option<u64>,
    /// Global: `sectors / requests`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sectors_per_request: Option<f64>,
    /// Global: `4 * active_lanes / (32 * sectors)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_fraction: Option<f64>,
    /// Shared: wavefronts (max distinct words in one bank) per request, summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wavefronts: Option<u64>,
    /// Shared: `wavefronts / requests`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wavefronts_per_request: Option<f64>,
    /// Shared: `sum(wavefronts - 1)`, what ncu's
    /// `l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum` would count
    /// under this model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bank_conflicts: Option<u64>,
    /// One full warp's value, or `None` when no request has 32 active lanes.
    pub full_warp: Option<FullWarp>,
}

impl AccessPrediction {
    /// Sectors or wavefronts per request, whichever applies.
    pub fn per_request(&self) -> f64 {
        self.sectors_per_request
            .or(self.wavefronts_per_request)
            .unwrap_or(0.0)
    }
}

/// Every access of one variant at one geometry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantPrediction {
    /// The variant.
    pub variant: Variant,
    /// Matrix size.
    pub n: u64,
    /// Tile width.
    pub tile: u32,
    /// Block height.
    pub block_rows: u32,
    /// Shared row padding, for the tiled family.
    pub padding: Option<u32>,
    /// Whether a barrier separates the shared phases.
    pub has_barrier: bool,
    /// Blocks in the grid, `ceil(n/tile)^2`.
    pub blocks: u64,
    /// The accesses, in source order.
    pub accesses: Vec<AccessPrediction>,
}

/// Predict every access of `variant` over the whole grid.
///
/// Errors: zero sizes, `n * n` overflow, or more than [`MAX_WORK`] lane-steps.
pub fn predict(
    variant: Variant,
    n: u64,
    tile: u32,
    block_rows: u32,
) -> Result<VariantPrediction, ModelError> {
    let g = admit(variant, n, tile, block_rows)?;
    let padding = variant.shared_padding();
    let accesses = accesses(variant)
        .iter()
        .map(|a| predict_access(&g, a))
        .collect();
    Ok(VariantPrediction {
        variant,
        n,
        tile,
        block_rows,
        padding,
        has_barrier: variant.has_barrier(),
        blocks: g.blocks(),
        accesses,
    })
}

/// The geometry of [`predict`] once its limits hold: cheap, so a caller with several
/// predictions to make asks for each first.
pub(crate) fn admit(
    variant: Variant,
    n: u64,
    tile: u32,
    block_rows: u32,
) -> Result<Geometry, ModelError> {
    let g = Geometry::new(n, tile, block_rows, variant.shared_padding().unwrap_or(0))?;
    check_limit(
        "prediction lane-steps",
        Scope::new(&g)
            .work(g.blocks())
            .saturating_mul(accesses(variant).len() as u128),
        MAX_WORK,
    )?;
    Ok(g)
}

/// [`predict`] for every variant, in [`Variant::ALL`] order.
pub fn predict_all(
    n: u64,
    tile: u32,
    block_rows: u32,
) -> Result<Vec<VariantPrediction>, ModelError> {
    Variant::ALL
        .iter()
        .map(|&v| predict(v, n, tile, block_rows))
        .collect()
}

/// Totals of one access, over a block or the grid.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    requests: u64,
    active_lanes: u64,
    units: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.requests += other.requests;
        self.active_lanes += other.active_lanes;
        self.units += other.units;
    }
}

fn predict_access(g: &Geometry, a: &Access) -> AccessPrediction {
    // Monomorphize the lane loop per rule so the address arithmetic inlines.
    let (t, full_warp) = match a.rule {
        AddressRule::InputRowMajor => {
            enumerate(g, a.space, |c| AddressRule::InputRowMajor.address(c))
        }
        AddressRule::NaiveColumnStore => {
            enumerate(g, a.space, |c| AddressRule::NaiveColumnStore.address(c))
        }
        AddressRule::SharedRowStore => {
            enumerate(g, a.space, |c| AddressRule::SharedRowStore.address(c))
        }
        AddressRule::SharedColumnLoad => {
            enumerate(g, a.space, |c| AddressRule::SharedColumnLoad.address(c))
        }
        AddressRule::OutputRowMajor => {
            enumerate(g, a.space, |c| AddressRule::OutputRowMajor.address(c))
        }
    };
    let per_request = if t.requests == 0 {
        0.0
    } else {
        t.units as f64 / t.requests as f64
    };
    let global = a.space == Space::Global;
    let payload = if t.units == 0 {
        0.0
    } else {
        (t.active_lanes as f64 * WORD_BYTES as f64) / (t.units as f64 * SECTOR_BYTES as f64)
    };
    AccessPrediction {
        name: a.name,
        space: a.space,
        kind: a.kind,
        rule: a.rule,
        requests: t.requests,
        active_lanes: t.active_lanes,
        sectors: global.then_some(t.units),
        sectors_per_request: global.then_some(per_request),
        payload_fraction: global.then_some(payload),
        wavefronts: (!global).then_some(t.units),
        wavefronts_per_request: (!global).then_some(per_request),
        // Every request has >= 1 wavefront, so this is sum(wavefronts - 1).
        bank_conflicts: (!global).then_some(t.units.saturating_sub(t.requests)),
        full_warp,
    }
}

/// What the enumeration can skip without changing any count.
///
/// An admitted lane has `tx < n`, `ty + offset < n` and `offset < n` on either side
/// of the kernel (`x = b*tile + tx < n`, `y + offset = b*tile + ty + offset < n`).
/// So only warps holding a lane with `ty < min(block_rows, n)` and
/// `tx < min(tile, n)` can issue a request, and only offsets below `n`. Warps stay
/// chunks of the full block: skipping idle warps changes no warp's composition.
struct Scope {
    /// Threads that may act: `min(block_rows, n) * tile`, at most `tile * block_rows`.
    threads: u64,
    /// Thread rows that may act: `min(block_rows, n)`.
    rows: u64,
    /// Lanes of a thread row that may act: `min(tile, n)`.
    span: u64,
    /// Offsets that may act: those below `min(tile, n)`.
    offsets: u64,
    /// Rows a block's loop reaches, at least `tile`: `max(tile, last offset + block_rows)`.
    reach: u64,
    /// Blocks enumerated lane by lane: edge blocks plus at most 32 interior templates.
    enumerated_blocks: u64,
}

impl Scope {
    fn new(g: &Geometry) -> Scope {
        let last_offset = (g.iterations - 1) * g.block_rows;
        let reach = g.tile.max(last_offset + g.block_rows);
        let interior = if g.n >= reach {
            ((g.n - reach) / g.tile + 1).min(g.grid)
        } else {
            0
        };
        let interior_blocks = interior * interior;
        Scope {
            threads: g.block_rows.min(g.n) * g.tile,
            rows: g.block_rows.min(g.n),
            span: g.tile.min(g.n),
            offsets: g.tile.min(g.n).div_ceil(g.block_rows),
            reach,
            enumerated_blocks: g.blocks() - interior_blocks + interior_blocks.min(32),
        }
    }

    /// Warps with a lane in `tx < span` of some thread row `ty < rows`, ascending:
    /// for each row, the warps of linear ids `ty*tile .. ty*tile + span`.
    fn warps(&self, tile: u64) -> impl Iterator<Item = u64> + '_ {
        let mut next = 0;
        (0..self.rows).flat_map(move |ty| {
            let lo = (ty * tile / WARP_SIZE).max(next);
            let hi = (ty * tile + self.span - 1) / WARP_SIZE + 1;
            next = next.max(hi);
            lo..hi
        })
    }

    /// Upper bound on lane evaluations per access, plus a block visit (template
    /// lookup) costed as one warp's worth of lanes.
    fn work(&self, blocks: u64) -> u128 {
        let warps_per_row = self.span.div_ceil(WARP_SIZE) + 1;
        let warps = u128::from(self.threads.div_ceil(WARP_SIZE))
            .min(u128::from(self.rows) * u128::from(warps_per_row));
        u128::from(self.enumerated_blocks)
            .saturating_mul(u128::from(self.offsets))
            .saturating_mul(warps * u128::from(WARP_SIZE))
            .saturating_add(u128::from(blocks) * u128::from(WARP_SIZE))
    }
}

/// Walk every block, offset and warp; gather the active lanes' addresses in a fixed
/// 32-word buffer and count sectors or wavefronts of each request.
///
/// Shortcut for interior blocks, exact by construction: every [`AddressRule`] is
/// block-affine (address = base(bx, by) + pattern(tx, ty, offset)), so in a block
/// where the guard admits every lane, each request's words are the same pattern
/// shifted by the block's base. A shift by `s` words permutes the 32 banks (same
/// wavefronts) and changes the sector count only through `s mod 8`; so all fully
/// admitted blocks whose lane-0 address agrees mod 32 have identical totals, and
/// only one block per residue is enumerated. Edge blocks are always enumerated.
fn enumerate<F: Fn(&LaneCtx) -> Option<u64>>(
    g: &Geometry,
    space: Space,
    address: F,
) -> (Tally, Option<FullWarp>) {
    // A block index b is interior on both axes when its columns (tx < tile) and its
    // rows (ty + offset < last offset + block_rows) all stay below n.
    let scope = Scope::new(g);
    let interior = |b: u64| b * g.tile + scope.reach <= g.n;
    let mut templates: [Option<Tally>; 32] = [None; 32];
    let mut total = Tally::default();
    let mut full_warp = None;
    let mut c = LaneCtx {
        n: g.n,
        tile: g.tile,
        block_rows: g.block_rows,
        padding: g.padding,
        ..LaneCtx::default()
    };
    for by in 0..g.grid {
        c.by = by;
        for bx in 0..g.grid {
            c.bx = bx;
            let key = if interior(bx) && interior(by) {
                let lane0 = LaneCtx {
                    tx: 0,
                    ty: 0,
                    offset: 0,
                    ..c
                };
                address(&lane0).map(|a| (a % 32) as usize)
            } else {
                None
            };
            if let Some(k) = key {
                if let Some(t) = templates[k] {
                    total.add(t);
                    continue;
                }
            }
            let t = enumerate_block(g, &scope, space, &address, &mut c, &mut full_warp);
            if let Some(k) = key {
                templates[k] = Some(t);
            }
            total.add(t);
        }
    }
    (total, full_warp)
}

/// Every offset and warp of the block `(c.bx, c.by)`.
fn enumerate_block<F: Fn(&LaneCtx) -> Option<u64>>(
    g: &Geometry,
    scope: &Scope,
    space: Space,
    address: &F,
    c: &mut LaneCtx,
    full_warp: &mut Option<FullWarp>,
) -> Tally {
    let mut t = Tally::default();
    let mut buf = [0u64; WARP_SIZE as usize];
    for offset in g.offsets().take_while(|&o| o < g.n) {
        c.offset = offset;
        for warp in scope.warps(g.tile) {
            let first = warp * WARP_SIZE;
            let lanes = (scope.threads - first).min(WARP_SIZE);
            c.tx = first % g.tile;
            c.ty = first / g.tile;
            let mut active = 0;
            for _ in 0..lanes {
                if let Some(word) = address(c) {
                    buf[active] = word;
                    active += 1;
                }
                c.tx += 1;
                if c.tx == g.tile {
                    c.tx = 0;
                    c.ty += 1;
                }
            }
            if active == 0 {
                continue;
            }
            let words = &mut buf[..active];
            let units = match space {
                Space::Global => warp_sectors(words),
                Space::Shared => u64::from(warp_wavefronts(words)),
            };
            t.requests += 1;
            t.active_lanes += active as u64;
            t.units += units;
            if active == WARP_SIZE as usize && full_warp.is_none() {
                *full_warp = Some(FullWarp {
                    bx: c.bx,
                    by: c.by,
                    warp,
                    offset,
                    value: units,
                });
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{sector_coverage, wavefronts};

    fn access<'a>(p: &'a VariantPrediction, name: &str) -> &'a AccessPrediction {
        p.accesses.iter().find(|a| a.name == name).unwrap()
    }

    /// (requests, sectors or wavefronts, full-warp value)
    fn totals(a: &AccessPrediction) -> (u64, u64, Option<u64>) {
        (
            a.requests,
            a.sectors.or(a.wavefronts).unwrap(),
            a.full_warp.map(|w| w.value),
        )
    }

    #[test]
    fn seed_predictions_at_4096() {
        // 128 x 128 blocks, 4 offsets, 8 full warps each: 524288 requests per access.
        const REQ: u64 = 128 * 128 * 4 * 8;
        let all = predict_all(4096, 32, 8).unwrap();
        let [copy, naive, tiled, padded, broken] = &all[..] else {
            panic!()
        };

        assert_eq!(
            totals(access(copy, "global load input")),
            (REQ, 4 * REQ, Some(4))
        );
        assert_eq!(
            totals(access(copy, "global store output")),
            (REQ, 4 * REQ, Some(4))
        );
        assert_eq!(
            totals(access(naive, "global load input")),
            (REQ, 4 * REQ, Some(4))
        );
        let store = access(naive, "global store output");
        assert_eq!(totals(store), (REQ, 32 * REQ, Some(32)));
        assert_eq!(store.sectors_per_request, Some(32.0));
        assert_eq!(store.payload_fraction, Some(0.125));
        assert_eq!(store.bank_conflicts, None);

        assert_eq!(
            totals(access(tiled, "global load input")),
            (REQ, 4 * REQ, Some(4))
        );
        assert_eq!(
            totals(access(tiled, "global store output")),
            (REQ, 4 * REQ, Some(4))
        );
        let st = access(tiled, "shared store tile");
        assert_eq!(totals(st), (REQ, REQ, Some(1)));
        assert_eq!(st.bank_conflicts, Some(0));
        let ld = access(tiled, "shared load tile");
        assert_eq!(totals(ld), (REQ, 32 * REQ, Some(32)));
        assert_eq!(ld.wavefronts_per_request, Some(32.0));
        assert_eq!(ld.bank_conflicts, Some(31 * REQ));
        assert_eq!(
            ld.full_warp,
            Some(FullWarp {
                bx: 0,
                by: 0,
                warp: 0,
                offset: 0,
                value: 32
            })
        );

        assert_eq!(
            totals(access(padded, "shared load tile")),
            (REQ, REQ, Some(1))
        );
        assert_eq!(access(padded, "shared load tile").bank_conflicts, Some(0));
        assert_eq!(
            totals(access(padded, "shared store tile")),
            (REQ, REQ, Some(1))
        );
        assert_eq!(
            totals(access(padded, "global store output")),
            (REQ, 4 * REQ, Some(4))
        );

        // broken = padded's addresses without the barrier.
        assert_eq!(broken.accesses, padded.accesses);
        assert!(!broken.has_barrier && padded.has_barrier);
        assert_eq!(
            (padded.padding, tiled.padding, copy.padding),
            (Some(1), Some(0), None)
        );
    }

    #[test]
    fn ragged_n_33_by_hand() {
        // N=33, tile 32, rows 8: grid 2x2.
        // Global load (and the tiled global store, by symmetry):
        //  block (0,0): 32 full requests (8 warps x 4 offsets); row r covers words
        //    33r..33r+31 starting at sector offset r mod 8: 4 sectors when r%8 == 0
        //    (rows 0,8,16,24), else 5: 4*4 + 28*5 = 156 sectors;
        //  block (1,0): only column 32 (tx=0), 32 rows: 32 one-lane requests, 32 sectors;
        //  block (0,1): only row 32 (ty=0, offset 0): 1 request, words 1056..1087,
        //    1056 = 8*132, so 4 sectors;
        //  block (1,1): element (32,32): 1 request, 1 sector.
        //  Total 66 requests, 156 + 32 + 4 + 1 = 193 sectors.
        let tiled = predict(Variant::Tiled, 33, 32, 8).unwrap();
        assert_eq!(
            totals(access(&tiled, "global load input")),
            (66, 193, Some(4))
        );
        assert_eq!(
            totals(access(&tiled, "global store output")),
            (66, 193, Some(4))
        );
        // Shared load tile[tx][ty+o] = word 32*tx + ty + o, all lanes in bank ty+o:
        //  block (0,0): 32 requests x 32 wavefronts = 1024;
        //  block (1,0): output row 32 only (ty=0, o=0), 32 lanes in bank 0: 1 x 32;
        //  block (0,1): output column 32 only (tx=0): 32 one-lane requests: 32;
        //  block (1,1): 1. Total 66 requests, 1089 wavefronts, 1089 - 66 = 1023 conflicts.
        let ld = access(&tiled, "shared load tile");
        assert_eq!(totals(ld), (66, 1089, Some(32)));
        assert_eq!(ld.bank_conflicts, Some(1023));
        assert_eq!(
            totals(access(&tiled, "shared store tile")),
            (66, 66, Some(1))
        );
        // Padded: word 33*tx + ty + o, bank (tx + ty + o) mod 32, distinct per lane.
        let padded = predict(Variant::Padded, 33, 32, 8).unwrap();
        assert_eq!(
            totals(access(&padded, "shared load tile")),
            (66, 66, Some(1))
        );
        // Naive store x*33 + y + o: lanes 33 words apart, one sector each:
        //  block (0,0): 32 x 32; block (1,0): 32 x 1; block (0,1): 1 x 32; block (1,1): 1.
        let naive = predict(Variant::Naive, 33, 32, 8).unwrap();
        assert_eq!(
            totals(access(&naive, "global store output")),
            (66, 1089, Some(32))
        );
        assert_eq!(
            totals(access(&naive, "global load input")),
            (66, 193, Some(4))
        );
    }

    #[test]
    fn sixteen_by_sixteen_tile() {
        // tile 16, rows 16: a warp is two half-rows (ty, ty+1) of 16 lanes.
        // Unpadded column read: word 16*tx + ty + o lands in bank ty+o or ty+o+16,
        // 8 lanes each, distinct words; the second half-row uses banks +1: 8 wavefronts
        // (seed 004 called this 2-way by looking at one lane pair only).
        // Padded (stride 17): word 17*tx + t and 17*tx' + t + 1 share a bank only when
        // 17*(tx - tx') = 1 mod 32, i.e. tx - tx' = 17 = -15: tx = 0, tx' = 15: 2 wavefronts.
        // Global: two 64-byte half-rows at 16-word-aligned columns: 2 + 2 = 4 sectors.
        const REQ: u64 = 256 * 256 * 8;
        let tiled = predict(Variant::Tiled, 4096, 16, 16).unwrap();
        assert_eq!(
            totals(access(&tiled, "shared load tile")),
            (REQ, 8 * REQ, Some(8))
        );
        assert_eq!(
            totals(access(&tiled, "shared store tile")),
            (REQ, REQ, Some(1))
        );
        assert_eq!(
            totals(access(&tiled, "global load input")),
            (REQ, 4 * REQ, Some(4))
        );
        let padded = predict(Variant::Padded, 4096, 16, 16).unwrap();
        assert_eq!(
            totals(access(&padded, "shared load tile")),
            (REQ, 2 * REQ, Some(2))
        );
    }

    #[test]
    fn address_rules_mirror_the_source() {
        let c = LaneCtx {
            n: 100,
            tile: 32,
            block_rows: 8,
            padding: 1,
            bx: 1,
            by: 2,
            tx: 3,
            ty: 4,
            offset: 8,
        };
        // x = 35, y + offset = 76; ox = 67, oy + offset = 32 + 4 + 8 = 44.
        assert_eq!(AddressRule::InputRowMajor.address(&c), Some(76 * 100 + 35));
        assert_eq!(
            AddressRule::NaiveColumnStore.address(&c),
            Some(35 * 100 + 76)
        );
        assert_eq!(AddressRule::SharedRowStore.address(&c), Some(12 * 33 + 3));
        assert_eq!(AddressRule::SharedColumnLoad.address(&c), Some(3 * 33 + 12));
        assert_eq!(AddressRule::OutputRowMajor.address(&c), Some(44 * 100 + 67));
        // Guards: y + offset = 100 is out on the input side only.
        let c = LaneCtx {
            by: 2,
            ty: 28 - 8,
            offset: 16,
            bx: 0,
            ..c
        };
        assert_eq!(AddressRule::InputRowMajor.address(&c), None);
        assert_eq!(AddressRule::SharedRowStore.address(&c), None);
        assert_eq!(AddressRule::SharedColumnLoad.address(&c), Some(3 * 33 + 36));
        // Out-of-launch input overflowing u64 is None, not a panic.
        let wild = LaneCtx {
            n: u64::MAX,
            tile: u64::MAX,
            padding: 1,
            bx: 1,
            tx: 5,
            ..c
        };
        for rule in [
            AddressRule::InputRowMajor,
            AddressRule::NaiveColumnStore,
            AddressRule::SharedRowStore,
            AddressRule::SharedColumnLoad,
            AddressRule::OutputRowMajor,
        ] {
            assert_eq!(rule.address(&wild), None, "{rule:?}");
        }
        assert_eq!(accesses(Variant::Copy).len(), 2);
        assert_eq!(accesses(Variant::Broken), accesses(Variant::Padded));
    }

    #[test]
    fn errors_instead_of_panics() {
        assert_eq!(
            predict(Variant::Copy, 0, 32, 8),
            Err(ModelError::Zero { what: "n" })
        );
        assert_eq!(
            predict(Variant::Copy, 1, 32, 0),
            Err(ModelError::Zero { what: "block_rows" })
        );
        assert!(matches!(
            predict(Variant::Tiled, 1 << 33, 32, 8),
            Err(ModelError::Overflow { .. })
        ));
        assert!(matches!(
            predict(Variant::Tiled, 1 << 22, 32, 8),
            Err(ModelError::TooLarge { .. })
        ));
        // Mostly idle huge blocks: only rows ty < n and offsets < n are walked.
        let p = predict(Variant::Tiled, 3, 1 << 16, 1 << 16).unwrap();
        // One request per thread row (rows are 2^16 lanes apart): words 0..3, 3..6 in
        // sector 0, words 6..9 across sectors 0 and 1: 1 + 1 + 2 sectors.
        assert_eq!(totals(&p.accesses[0]), (3, 4, None));
        // A 2^31-wide tile on n=100: 100 offsets x 4 warps (lanes tx < 100) per access.
        let p = predict(Variant::Tiled, 100, 1 << 31, 1).unwrap();
        assert!(p
            .accesses
            .iter()
            .all(|a| (a.requests, a.active_lanes) == (400, 10_000)));
        // 2^32 blocks of one thread: too many block visits.
        assert!(matches!(
            predict(Variant::Copy, 1 << 16, 1, 1),
            Err(ModelError::TooLarge { .. })
        ));
        // Huge blocks around a single element: one lane acts.
        let p = predict(Variant::Tiled, 1, u32::MAX, u32::MAX).unwrap();
        assert!(p.accesses.iter().all(|a| totals(a) == (1, 1, None)));
        // ...but with padding its shared word indexes no longer fit in u64.
        assert!(matches!(
            predict(Variant::Padded, 1, u32::MAX, u32::MAX),
            Err(ModelError::Overflow { .. })
        ));
        // Fewer than 32 threads per block: no full warp exists.
        let p = predict(Variant::Tiled, 8, 4, 4).unwrap();
        assert!(p.accesses.iter().all(|a| a.full_warp.is_none()));
        assert_eq!(p.accesses[0].requests, 4);
        // N=1: one lane, one request, one sector, per access.
        let p = predict(Variant::Naive, 1, 32, 8).unwrap();
        assert!(p.accesses.iter().all(|a| totals(a) == (1, 1, None)));
    }

    /// Straightforward re-enumeration with seed-style set arithmetic.
    fn reference(v: Variant, n: u64, tile: u64, rows: u64) -> Vec<(u64, u64, Option<u64>)> {
        let pad = u64::from(v.shared_padding().unwrap_or(0));
        let grid = n.div_ceil(tile);
        let threads = tile * rows;
        accesses(v)
            .iter()
            .map(|a| {
                let (mut req, mut units, mut full) = (0, 0, None);
                for by in 0..grid {
                    for bx in 0..grid {
                        for offset in (0..tile).step_by(rows as usize) {
                            for warp in 0..threads.div_ceil(32) {
                                let words: Vec<u64> = (warp * 32..(warp * 32 + 32).min(threads))
                                    .filter_map(|l| {
                                        let c = LaneCtx {
                                            n,
                                            tile,
                                            block_rows: rows,
                                            padding: pad,
                                            bx,
                                            by,
                                            tx: l % tile,
                                            ty: l / tile,
                                            offset,
                                        };
                                        a.rule.address(&c)
                                    })
                                    .collect();
                                if words.is_empty() {
                                    continue;
                                }
                                let u = match a.space {
                                    Space::Global => sector_coverage(words.clone()).sectors,
                                    Space::Shared => u64::from(wavefronts(&words)),
                                };
                                req += 1;
                                units += u;
                                if words.len() == 32 && full.is_none() {
                                    full = Some(u);
                                }
                            }
                        }
                    }
                }
                (req, units, full)
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn matches_the_reference_enumeration(n in 1u64..45, tile in 1u32..40, rows in 1u32..12, vi in 0usize..5) {
            let v = Variant::ALL[vi];
            let fast: Vec<_> = predict(v, n, tile, rows).unwrap().accesses.iter().map(totals).collect();
            proptest::prop_assert_eq!(fast, reference(v, n, tile.into(), rows.into()));
        }

        /// Small tiles on larger matrices: many interior blocks in every residue class.
        #[test]
        fn interior_shortcut_matches_the_reference(n in 30u64..120, tile in 1u32..13, rows in 1u32..7, vi in 0usize..5) {
            let v = Variant::ALL[vi];
            let fast: Vec<_> = predict(v, n, tile, rows).unwrap().accesses.iter().map(totals).collect();
            proptest::prop_assert_eq!(fast, reference(v, n, tile.into(), rows.into()));
        }
    }

    /// `cargo test --release -p klab-model -- --ignored --nocapture predict_timing`
    #[test]
    #[ignore = "timing: run in release"]
    fn predict_timing() {
        for n in [4096u64, 46341] {
            let start = std::time::Instant::now();
            let all = predict_all(n, 32, 8).unwrap();
            eprintln!("predict_all N={n}: {:?}", start.elapsed());
            assert_eq!(all.len(), 5);
        }
    }
}
