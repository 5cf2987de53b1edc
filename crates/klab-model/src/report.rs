//! Everything `klab model` prints: coverage, bank maps, the seed's sector cases and
//! per-variant predictions, as JSON (`Serialize`) or plain text ([`ModelReport::render_text`]).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::banks::{bank_map, BankMap, BANKS};
use super::coverage::{self, check_coverage, CoverageReport};
use super::predict::{self, predict_all, Space, VariantPrediction};
use super::sectors::{seed_sector_cases, SectorCase};
use super::{ModelError, WARP_SIZE};
use klab_spec::variant::{Variant, BLOCK_ROWS, TILE};

/// What to model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelParams {
    /// Matrix sizes for the coverage check; the largest also drives the predictions.
    pub ns: Vec<u64>,
    /// Tile width (`blockDim.x`).
    pub tile: u32,
    /// Block height (`blockDim.y`).
    pub block_rows: u32,
    /// Shared row strides (words) for the bank maps.
    pub strides: Vec<u32>,
}

impl Default for ModelParams {
    /// Seed 000: the boundary ladder plus 4096, the kernel's 32 x 8 block, strides 32/33/34.
    fn default() -> Self {
        ModelParams {
            ns: vec![1, 7, 31, 32, 33, 65, 257, 4096],
            tile: TILE,
            block_rows: BLOCK_ROWS,
            strides: vec![32, 33, 34],
        }
    }
}

/// The full model output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelReport {
    /// The parameters it was built from.
    pub params: ModelParams,
    /// One coverage check per `n`, in the order given (unpadded tile array).
    pub coverage: Vec<CoverageReport>,
    /// One 32-lane, 32-bank column-read map per stride.
    pub bank_maps: Vec<BankMap>,
    /// Seed 000's four sector cases.
    pub sector_cases: Vec<SectorCase>,
    /// The `n` of the predictions: the largest in `params.ns`.
    pub prediction_n: u64,
    /// Per-variant predictions at `prediction_n`, in `Variant::ALL` order.
    pub predictions: Vec<VariantPrediction>,
}

const HEADLINE: &str =
    "Address arithmetic only: it counts 32-byte regions touched and distinct words \
per shared-memory bank, not cache misses, HBM transactions or time.";

impl ModelReport {
    /// Run every model. Errors when `ns` is empty or any model rejects the parameters;
    /// every model's limits are checked before any of them runs, so a refusal comes at once
    /// rather than after minutes of enumeration.
    pub fn build(params: ModelParams) -> Result<ModelReport, ModelError> {
        let prediction_n = params
            .ns
            .iter()
            .copied()
            .max()
            .ok_or(ModelError::Empty { what: "ns" })?;
        for &n in &params.ns {
            coverage::admit(n, params.tile, params.block_rows, 0)?;
        }
        for &v in &Variant::ALL {
            predict::admit(v, prediction_n, params.tile, params.block_rows)?;
        }
        let coverage = params
            .ns
            .iter()
            .map(|&n| check_coverage(n, params.tile, params.block_rows))
            .collect::<Result<Vec<_>, _>>()?;
        let bank_maps = params
            .strides
            .iter()
            .map(|&s| bank_map(s, WARP_SIZE as u32, BANKS))
            .collect::<Result<Vec<_>, _>>()?;
        let predictions = predict_all(prediction_n, params.tile, params.block_rows)?;
        Ok(ModelReport {
            params,
            coverage,
            bank_maps,
            sector_cases: seed_sector_cases(),
            prediction_n,
            predictions,
        })
    }

    /// Whether every coverage check passed.
    pub fn coverage_ok(&self) -> bool {
        self.coverage.iter().all(CoverageReport::ok)
    }

    /// A readable plain-text report: aligned columns, no colors.
    pub fn render_text(&self) -> String {
        let p = &self.params;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "klab model: CPU address model of kernels/transpose.cu (tile {}, block rows {})",
            p.tile, p.block_rows
        );
        let _ = writeln!(out, "{HEADLINE}");
        self.coverage_text(&mut out);
        self.banks_text(&mut out);
        self.sectors_text(&mut out);
        self.predictions_text(&mut out);
        out
    }

    /// The tiled mapping's coverage at every size, and the first problem or race.
    fn coverage_text(&self, out: &mut String) {
        let p = &self.params;
        // Coverage.
        let _ = writeln!(
            out,
            "\nCoverage of the tiled mapping (tiled, padded, broken), array tile[{}][{}]",
            p.tile, p.tile
        );
        let _ = writeln!(
            out,
            "Enumerates every admitted shared and global access: each output written once, each shared \
             read produced by the transposed input element. Does not run CUDA or model scheduling."
        );
        let mut t = Table::new(&[
            ("n", R),
            ("blocks", R),
            ("outputs", R),
            ("written", R),
            ("double", R),
            ("unwritten", R),
            ("no-producer", R),
            ("wrong-source", R),
            ("out-of-tile", R),
            ("cross-warp", R),
            ("result", L),
        ]);
        for c in &self.coverage {
            t.row(vec![
                c.n.to_string(),
                c.blocks.to_string(),
                c.outputs_expected.to_string(),
                c.outputs_written.to_string(),
                c.double_writes.to_string(),
                c.unwritten.to_string(),
                c.reads_without_producer.to_string(),
                c.wrong_source.to_string(),
                c.out_of_tile.to_string(),
                c.cross_warp_reads.to_string(),
                if c.ok() { "ok" } else { "FAIL" }.to_string(),
            ]);
        }
        out.push_str(&t.render());
        for c in &self.coverage {
            if let Some(problem) = &c.first_problem {
                let _ = writeln!(out, "  n={}: first problem: {problem}", c.n);
            }
        }
        let _ = writeln!(
            out,
            "cross-warp = shared reads whose producer is another warp: they need the barrier; \
             without it (broken) each is a predicted race."
        );
        if let Some(c) = self
            .coverage
            .iter()
            .find(|c| c.first_cross_warp_read.is_some())
        {
            if let Some(first) = &c.first_cross_warp_read {
                let _ = writeln!(out, "  n={}: e.g. {first}", c.n);
            }
        }
    }

    /// The bank map of a column read at each row stride.
    fn banks_text(&self, out: &mut String) {
        // Banks.
        let _ = writeln!(
            out,
            "\nShared-memory banks: column read of a row-major tile, {WARP_SIZE} lanes, {BANKS} banks"
        );
        let _ = writeln!(
            out,
            "Lane i reads word i*stride + c, bank = word mod {BANKS}; counts distinct words per bank \
             (wavefronts), not latency or time."
        );
        let mut t = Table::new(&[
            ("stride", R),
            ("banks touched", R),
            ("words per bank", R),
            ("conflict", L),
        ]);
        for b in &self.bank_maps {
            t.row(vec![
                b.stride_words.to_string(),
                b.banks_touched.to_string(),
                b.max_words_per_bank.to_string(),
                if b.max_words_per_bank <= 1 {
                    "none".to_string()
                } else {
                    format!("{}-way", b.max_words_per_bank)
                },
            ]);
        }
        out.push_str(&t.render());
    }

    /// The sectors one warp's words touch in the transpose lab's cases.
    fn sectors_text(&self, out: &mut String) {
        // Sectors.
        let _ = writeln!(
            out,
            "\nGlobal sectors: the transpose lab's cases (4-byte words, 256-byte-aligned base)"
        );
        let _ = writeln!(
            out,
            "Counts 32-byte sectors touched by one warp's words, not cache misses or HBM traffic."
        );
        let mut t = Table::new(&[
            ("case", L),
            ("words", L),
            ("sectors", R),
            ("useful bytes", R),
            ("payload", R),
        ]);
        for s in &self.sector_cases {
            t.row(vec![
                s.name.to_string(),
                s.words.to_string(),
                s.coverage.sectors.to_string(),
                s.coverage.useful_bytes.to_string(),
                format!("{:.1}%", s.coverage.payload_fraction * 100.0),
            ]);
        }
        out.push_str(&t.render());
    }

    /// Each variant's predicted sectors and wavefronts per request over the whole grid.
    fn predictions_text(&self, out: &mut String) {
        let p = &self.params;
        // Predictions.
        let blocks = self.predictions.first().map_or(0, |v| v.blocks);
        let _ = writeln!(
            out,
            "\nPredictions at n={}, tile {}, block rows {} (whole grid, {blocks} blocks)",
            self.prediction_n, p.tile, p.block_rows
        );
        let _ = writeln!(
            out,
            "Request = one warp, one access, one offset iteration, >= 1 active lane. Global: sectors per \
             request; shared: wavefronts per request, conflicts = sum(wavefronts - 1). Not cache hits, \
             HBM bytes or time."
        );
        let mut t = Table::new(&[
            ("variant", L),
            ("access", L),
            ("requests", R),
            ("per request", R),
            ("unit", L),
            ("full warp", R),
            ("conflicts", R),
        ]);
        for v in &self.predictions {
            for a in &v.accesses {
                t.row(vec![
                    v.variant.to_string(),
                    a.name.to_string(),
                    a.requests.to_string(),
                    format!("{:.2}", a.per_request()),
                    match a.space {
                        Space::Global => "sectors",
                        Space::Shared => "wavefronts",
                    }
                    .to_string(),
                    a.full_warp.map_or("-".to_string(), |w| w.value.to_string()),
                    a.bank_conflicts.map_or("-".to_string(), |c| c.to_string()),
                ]);
            }
        }
        out.push_str(&t.render());
        let _ = writeln!(
            out,
            "broken has padded's addresses; it differs only in the missing barrier (see cross-warp above)."
        );
    }
}

/// Column alignment.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}
const L: Align = Align::Left;
const R: Align = Align::Right;

/// A plain-text table with two-space gutters and a two-space indent.
struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(columns: &[(&'static str, Align)]) -> Self {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self) -> String {
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (head, _))| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .chain([head.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let heads: Vec<String> = self.columns.iter().map(|(h, _)| h.to_string()).collect();
        for cells in std::iter::once(&heads).chain(&self.rows) {
            let mut line = String::from("  ");
            for (i, (_, align)) in self.columns.iter().enumerate() {
                let cell = cells.get(i).map_or("", String::as_str);
                let w = widths[i];
                if i > 0 {
                    line.push_str("  ");
                }
                let _ = match align {
                    Align::Left => write!(line, "{cell:<w$}"),
                    Align::Right => write!(line, "{cell:>w$}"),
                };
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use klab_spec::variant::Variant;

    #[test]
    fn default_params_are_the_seed() {
        let p = ModelParams::default();
        assert_eq!(p.ns, [1, 7, 31, 32, 33, 65, 257, 4096]);
        assert_eq!((p.tile, p.block_rows), (32, 8));
        assert_eq!(p.strides, [32, 33, 34]);
    }

    #[test]
    fn default_report_holds_the_seed_numbers() {
        let r = ModelReport::build(ModelParams::default()).unwrap();
        assert_eq!(r.coverage.len(), 8);
        assert!(r.coverage_ok());
        assert_eq!(
            r.coverage.iter().map(|c| c.n).collect::<Vec<_>>(),
            [1, 7, 31, 32, 33, 65, 257, 4096]
        );
        assert_eq!(r.coverage[4].cross_warp_reads, 952);
        let banks: Vec<_> = r
            .bank_maps
            .iter()
            .map(|b| (b.stride_words, b.banks_touched, b.max_words_per_bank))
            .collect();
        assert_eq!(banks, [(32, 1, 32), (33, 32, 1), (34, 16, 2)]);
        assert_eq!(r.sector_cases.len(), 4);
        assert_eq!(r.prediction_n, 4096);
        let variants: Vec<_> = r.predictions.iter().map(|p| p.variant).collect();
        assert_eq!(variants, Variant::ALL);
        let naive_store = &r.predictions[1].accesses[1];
        assert_eq!(naive_store.sectors_per_request, Some(32.0));
        let tiled_load = &r.predictions[2].accesses[2];
        assert_eq!(tiled_load.wavefronts_per_request, Some(32.0));
    }

    #[test]
    fn predictions_use_the_largest_n_and_errors_propagate() {
        let r = ModelReport::build(ModelParams {
            ns: vec![33, 7],
            strides: vec![],
            ..ModelParams::default()
        })
        .unwrap();
        assert_eq!(r.prediction_n, 33);
        assert_eq!(r.predictions[2].accesses[2].wavefronts, Some(1089));
        assert!(r.bank_maps.is_empty());

        let bad = |ns: Vec<u64>, tile, block_rows| {
            ModelReport::build(ModelParams {
                ns,
                tile,
                block_rows,
                strides: vec![32],
            })
        };
        assert_eq!(bad(vec![], 32, 8), Err(ModelError::Empty { what: "ns" }));
        assert_eq!(bad(vec![4], 0, 8), Err(ModelError::Zero { what: "tile" }));
        assert_eq!(bad(vec![4, 0], 32, 8), Err(ModelError::Zero { what: "n" }));
        assert!(matches!(
            bad(vec![1 << 20], 32, 8),
            Err(ModelError::TooLarge { .. })
        ));
        assert!(matches!(
            bad(vec![1 << 40], 32, 8),
            Err(ModelError::Overflow { .. })
        ));
        // Every limit before any work: the coverage at n = 100000 alone would enumerate for
        // minutes before the prediction's limit refused it.
        let started = std::time::Instant::now();
        assert_eq!(
            bad(vec![7, 100_000], 1, 1),
            Err(ModelError::TooLarge {
                what: "prediction lane-steps".into(),
                value: 640_000_002_048,
                limit: crate::MAX_WORK
            })
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // A failing mapping still builds; the report says FAIL.
        let r = bad(vec![64], 32, 7).unwrap();
        assert!(!r.coverage_ok());
        let text = r.render_text();
        assert!(text.contains("FAIL"), "{text}");
        assert!(
            text.contains("n=64: first problem: block (bx=0, by=0)"),
            "{text}"
        );
    }

    #[test]
    fn json_carries_every_section() {
        let r = ModelReport::build(ModelParams {
            ns: vec![1, 33],
            ..ModelParams::default()
        })
        .unwrap();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["params"]["ns"], serde_json::json!([1, 33]));
        assert_eq!(v["coverage"][1]["ok"], true);
        assert_eq!(v["coverage"][0]["needs_barrier"], false);
        assert_eq!(v["bank_maps"][2]["banks_touched"], 16);
        assert_eq!(v["sector_cases"][1]["coverage"]["payload_fraction"], 0.8);
        assert_eq!(v["prediction_n"], 33);
        let naive = &v["predictions"][1];
        assert_eq!(naive["variant"], "naive");
        assert_eq!(naive["padding"], serde_json::Value::Null);
        assert_eq!(naive["accesses"][1]["sectors"], 1089);
        assert_eq!(naive["accesses"][1]["space"], "global");
        assert!(naive["accesses"][1].get("wavefronts").is_none());
        let padded_load = &v["predictions"][3]["accesses"][2];
        assert_eq!(padded_load["rule"], "shared_column_load");
        assert_eq!(padded_load["bank_conflicts"], 0);
        assert_eq!(padded_load["full_warp"]["value"], 1);
    }

    #[test]
    fn text_is_plain_and_aligned() {
        let r = ModelReport::build(ModelParams::default()).unwrap();
        let text = r.render_text();
        assert!(!text.contains('\x1b'));
        assert!(text.is_ascii());
        for section in [
            "Coverage of the tiled mapping",
            "Shared-memory banks",
            "Global sectors",
            "Predictions at n=4096",
        ] {
            assert!(text.contains(section), "missing {section}");
        }
        assert!(text.contains("not cache misses, HBM transactions or time"));
        // Every row of the predictions table has the header's width (right-aligned last column).
        let lines: Vec<&str> = text.lines().collect();
        let head = lines
            .iter()
            .position(|l| l.starts_with("  variant"))
            .unwrap();
        let width = lines[head].len();
        for l in &lines[head + 1..head + 17] {
            assert_eq!(l.len(), width, "{l}");
        }
        insta::assert_snapshot!("default_text", text);
    }
}
