//! Repeated rounds in separate processes with alternating order (seed 000), and the
//! per-variant summary `klab lab` prints from them.

use serde::Serialize;

use crate::row::TransposeRow;
use crate::stats::Summary;

/// Header of `repeated-benchmark.csv`: the harness row prefixed by round and position.
pub const ROUNDS_CSV_HEADER: &str =
    "round,position,variant,correct,mismatches,max_abs_error,average_ms,effective_gb_s";

/// The order for a 1-based round: as given in odd rounds, reversed in even rounds.
pub fn alternating_order<T: Clone>(round: u32, variants: &[T]) -> Vec<T> {
    let mut v = variants.to_vec();
    if round % 2 == 0 {
        v.reverse();
    }
    v
}

/// One process's row in one round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundRow {
    pub round: u32,
    /// 0-based position within the round.
    pub position: u32,
    pub row: TransposeRow,
}

impl RoundRow {
    pub fn to_csv(&self) -> String {
        format!("{},{},{}", self.round, self.position, self.row.to_csv())
    }
}

/// The whole rounds CSV.
pub fn rounds_csv(rows: &[RoundRow]) -> String {
    let mut s = String::from(ROUNDS_CSV_HEADER);
    s.push('\n');
    for r in rows {
        s.push_str(&r.to_csv());
        s.push('\n');
    }
    s
}

/// One variant's distribution over rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantSummary {
    pub variant: String,
    /// Rounds in which the variant passed and was timed.
    pub timed_rounds: usize,
    /// Rounds in which it failed its check.
    pub failed_rounds: usize,
    /// Distribution of per-round average milliseconds.
    pub ms: Option<Summary>,
    /// Median effective bandwidth (GB/s) over rounds.
    pub median_gb_s: Option<f64>,
    /// Median bandwidth as a percentage of the reference variant's median bandwidth.
    pub pct_of_reference: Option<f64>,
    /// Median bandwidth as a percentage of the theoretical peak.
    pub pct_of_peak: Option<f64>,
}

/// Summaries per variant, in first-seen order. `reference` names the variant whose median
/// bandwidth is 100% (copy, in the lab); `peak_gb_s` the device's theoretical peak.
pub fn summarize(
    rows: &[RoundRow],
    reference: &str,
    peak_gb_s: Option<f64>,
) -> Vec<VariantSummary> {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.row.variant.as_str()) {
            names.push(&r.row.variant);
        }
    }
    let median_gbs = |name: &str| -> Option<f64> {
        let g: Vec<f64> = rows
            .iter()
            .filter(|r| r.row.variant == name)
            .filter_map(|r| r.row.timing.map(|t| t.effective_gb_s))
            .collect();
        Summary::of(&g).map(|s| s.median)
    };
    let reference_gbs = median_gbs(reference);
    names
        .into_iter()
        .map(|name| {
            let mine: Vec<&RoundRow> = rows.iter().filter(|r| r.row.variant == name).collect();
            let ms: Vec<f64> = mine
                .iter()
                .filter_map(|r| r.row.timing.map(|t| t.average_ms))
                .collect();
            let median_gb_s = median_gbs(name);
            VariantSummary {
                variant: name.to_string(),
                timed_rounds: ms.len(),
                failed_rounds: mine.iter().filter(|r| !r.row.correct).count(),
                ms: Summary::of(&ms),
                median_gb_s,
                pct_of_reference: median_gb_s.zip(reference_gbs).map(|(g, r)| 100.0 * g / r),
                pct_of_peak: median_gb_s.zip(peak_gb_s).map(|(g, p)| 100.0 * g / p),
            }
        })
        .collect()
}

/// Header of `summary.csv`.
pub const SUMMARY_CSV_HEADER: &str = "variant,timed_rounds,failed_rounds,median_ms,p10_ms,p90_ms,median_gb_s,pct_of_copy,pct_of_peak";

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_default()
}

/// One row of `summary.csv`: what the lab writes and the report reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SummaryRow {
    pub variant: String,
    /// Rounds in which it passed and was timed.
    pub timed_rounds: u64,
    /// Rounds in which it failed its check.
    pub failed_rounds: u64,
    /// Median, p10 and p90 of the per-round averages, ms.
    pub median_ms: Option<f64>,
    pub p10_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    /// Median effective bandwidth over rounds, GB/s.
    pub median_gb_s: Option<f64>,
    /// Median bandwidth as % of the copy kernel's and of the theoretical peak.
    pub pct_of_copy: Option<f64>,
    pub pct_of_peak: Option<f64>,
}

impl VariantSummary {
    /// Its row of `summary.csv`.
    pub fn row(&self) -> SummaryRow {
        SummaryRow {
            variant: self.variant.clone(),
            timed_rounds: self.timed_rounds as u64,
            failed_rounds: self.failed_rounds as u64,
            median_ms: self.ms.map(|m| m.median),
            p10_ms: self.ms.map(|m| m.p10),
            p90_ms: self.ms.map(|m| m.p90),
            median_gb_s: self.median_gb_s,
            pct_of_copy: self.pct_of_reference,
            pct_of_peak: self.pct_of_peak,
        }
    }
}

pub fn summary_csv(s: &[VariantSummary]) -> String {
    let mut out = String::from(SUMMARY_CSV_HEADER);
    out.push('\n');
    for v in s.iter().map(VariantSummary::row) {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            v.variant,
            v.timed_rounds,
            v.failed_rounds,
            opt(v.median_ms, 6),
            opt(v.p10_ms, 6),
            opt(v.p90_ms, 6),
            opt(v.median_gb_s, 2),
            opt(v.pct_of_copy, 1),
            opt(v.pct_of_peak, 1),
        ));
    }
    out
}

/// Read `summary.csv` by its header's column names. Columns a file lacks read as empty
/// (older files had fewer); `variant` and the millisecond and GB/s columns are required.
pub fn parse_summary_csv(text: &str) -> Result<Vec<SummaryRow>, String> {
    let c = crate::csv::Csv::parse(text)?;
    c.require(&["variant", "median_ms", "p10_ms", "p90_ms", "median_gb_s"])?;
    c.rows()
        .map(|r| {
            Ok(SummaryRow {
                variant: r.text("variant")?,
                timed_rounds: r.u64("timed_rounds").unwrap_or(0),
                failed_rounds: r.u64("failed_rounds").unwrap_or(0),
                median_ms: r.opt_f64("median_ms")?,
                p10_ms: r.opt_f64("p10_ms")?,
                p90_ms: r.opt_f64("p90_ms")?,
                median_gb_s: r.opt_f64("median_gb_s")?,
                pct_of_copy: r.opt_f64("pct_of_copy")?,
                pct_of_peak: r.opt_f64("pct_of_peak")?,
            })
        })
        .collect()
}

/// The terminal table.
pub fn render_table(s: &[VariantSummary]) -> String {
    let mut out = format!(
        "{:<8} {:>6} {:>11} {:>23} {:>10} {:>9} {:>9}\n",
        "variant", "rounds", "median ms", "p10 - p90 ms", "GB/s", "% copy", "% peak"
    );
    for v in s {
        let (median, range) = match v.ms {
            Some(m) => (
                format!("{:.4}", m.median),
                format!("{:.4} - {:.4}", m.p10, m.p90),
            ),
            None => ("-".into(), "-".into()),
        };
        let dash = |x: Option<f64>, d: usize| x.map(|x| format!("{x:.d$}")).unwrap_or("-".into());
        let rounds = if v.failed_rounds > 0 {
            format!("{}!{}", v.timed_rounds, v.failed_rounds)
        } else {
            v.timed_rounds.to_string()
        };
        out.push_str(&format!(
            "{:<8} {:>6} {:>11} {:>23} {:>10} {:>9} {:>9}\n",
            v.variant,
            rounds,
            median,
            range,
            dash(v.median_gb_s, 1),
            dash(v.pct_of_reference, 1),
            dash(v.pct_of_peak, 1),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::BatchTiming;

    fn row(round: u32, position: u32, variant: &str, ms: Option<f64>) -> RoundRow {
        RoundRow {
            round,
            position,
            row: TransposeRow {
                variant: variant.into(),
                correct: ms.is_some(),
                mismatches: if ms.is_some() { 0 } else { 3 },
                max_abs_error: if ms.is_some() { 0.0 } else { f64::INFINITY },
                timing: ms.map(|m| BatchTiming::from_mean_us(m * 1e3, 134_217_728)),
            },
        }
    }

    #[test]
    fn order_alternates_by_round() {
        let v = ["copy", "naive", "tiled", "padded"];
        assert_eq!(alternating_order(1, &v), v);
        assert_eq!(
            alternating_order(2, &v),
            ["padded", "tiled", "naive", "copy"]
        );
        assert_eq!(alternating_order(3, &v), v);
    }

    #[test]
    fn summary_uses_medians_and_reference() {
        let rows = vec![
            row(1, 0, "copy", Some(0.05)),
            row(1, 1, "naive", Some(0.30)),
            row(2, 0, "naive", Some(0.28)),
            row(2, 1, "copy", Some(0.04)),
            row(3, 0, "copy", Some(0.045)),
            row(3, 1, "naive", None),
        ];
        let s = summarize(&rows, "copy", Some(4814.3));
        assert_eq!(s.len(), 2);
        let copy = &s[0];
        assert_eq!(copy.timed_rounds, 3);
        assert!((copy.ms.unwrap().median - 0.045).abs() < 1e-12);
        assert!((copy.pct_of_reference.unwrap() - 100.0).abs() < 1e-9);
        let naive = &s[1];
        assert_eq!((naive.timed_rounds, naive.failed_rounds), (2, 1));
        assert!((naive.ms.unwrap().median - 0.29).abs() < 1e-12);
        // Median of bandwidths, not bandwidth of the median time.
        let g = |ms: f64| 134_217_728.0 / (ms * 1e-3) / 1e9;
        let want = (g(0.30) + g(0.28)) / 2.0;
        assert!((naive.median_gb_s.unwrap() - want).abs() < 1e-6);
        let pct = 100.0 * want / g(0.045);
        assert!((naive.pct_of_reference.unwrap() - pct).abs() < 1e-6);
        assert!((naive.pct_of_peak.unwrap() - 100.0 * want / 4814.3).abs() < 1e-6);
        let csv = summary_csv(&s);
        assert!(csv.starts_with(SUMMARY_CSV_HEADER));
        assert!(render_table(&s).contains("2!1"));
        // What is written reads back as the same rows (to the digits written).
        let back = parse_summary_csv(&csv).unwrap();
        assert_eq!(back.len(), s.len());
        assert_eq!(back[1].variant, "naive");
        assert_eq!((back[1].timed_rounds, back[1].failed_rounds), (2, 1));
        assert!((back[1].median_ms.unwrap() - 0.29).abs() < 1e-6);
        assert!((back[1].median_gb_s.unwrap() - want).abs() < 0.01);
        assert!(parse_summary_csv("variant,median_ms\n").is_err());
        assert!(parse_summary_csv(&csv.replace("0.290000", "fast")).is_err());
    }

    #[test]
    fn rounds_csv_prefixes_round_and_position() {
        let csv = rounds_csv(&[row(2, 1, "tiled", None)]);
        assert_eq!(
            csv,
            format!("{ROUNDS_CSV_HEADER}\n2,1,tiled,false,3,inf,,\n")
        );
    }
}
