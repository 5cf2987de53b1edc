//! The transpose harness's CSV row (seed 000's contract), written and read back.

use serde::Serialize;

/// Header printed once per `klab transpose` invocation.
pub const CSV_HEADER: &str = "variant,correct,mismatches,max_abs_error,average_ms,effective_gb_s";

/// Timing of one batch: `reps` launches between one event pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BatchTiming {
    /// Event interval divided by the number of launches.
    pub average_ms: f64,
    /// Useful bytes (2 x N^2 x 4) over `average_ms`.
    pub effective_gb_s: f64,
}

impl BatchTiming {
    pub fn from_interval(total_ms: f64, reps: u32, useful_bytes: u64) -> BatchTiming {
        let average_ms = total_ms / f64::from(reps.max(1));
        BatchTiming {
            average_ms,
            effective_gb_s: crate::stats::gb_per_s(useful_bytes, average_ms * 1e3),
        }
    }
}

/// One variant's verdict and, only when it passed, its timing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransposeRow {
    pub variant: String,
    pub correct: bool,
    pub mismatches: u64,
    pub max_abs_error: f64,
    pub timing: Option<BatchTiming>,
}

fn fmt_error(e: f64) -> String {
    if e.is_infinite() {
        "inf".to_string()
    } else if e.is_nan() {
        "nan".to_string()
    } else {
        format!("{e}")
    }
}

/// Two decimals at 1 GB/s and above; below, six significant digits, so a tiny matrix's
/// rate never prints as a misleading 0.00.
fn fmt_rate(v: f64) -> String {
    if !v.is_finite() || v >= 1.0 || v <= 0.0 {
        return format!("{v:.2}");
    }
    let digits = (5 - v.log10().floor() as i32).max(2) as usize;
    format!("{v:.digits$}")
}

impl TransposeRow {
    /// The CSV line (no newline). Performance fields are empty when timing is absent.
    pub fn to_csv(&self) -> String {
        let (ms, gbs) = match self.timing {
            Some(t) => (format!("{:.6}", t.average_ms), fmt_rate(t.effective_gb_s)),
            None => (String::new(), String::new()),
        };
        format!(
            "{},{},{},{},{},{}",
            self.variant,
            self.correct,
            self.mismatches,
            fmt_error(self.max_abs_error),
            ms,
            gbs
        )
    }

    /// Parse a line written by [`TransposeRow::to_csv`].
    pub fn parse(line: &str) -> Result<TransposeRow, RowError> {
        let fields: Vec<&str> = line.trim_end_matches(['\r', '\n']).split(',').collect();
        if fields.len() != 6 {
            return Err(RowError(format!(
                "expected 6 fields, found {} in '{line}'",
                fields.len()
            )));
        }
        let bad = |what: &str| RowError(format!("bad {what} in '{line}'"));
        let correct = match fields[1] {
            "true" => true,
            "false" => false,
            _ => return Err(bad("correct")),
        };
        let mismatches = fields[2].parse().map_err(|_| bad("mismatches"))?;
        let max_abs_error = fields[3].parse::<f64>().map_err(|_| bad("max_abs_error"))?;
        let timing = match (fields[4], fields[5]) {
            ("", "") => None,
            (ms, gbs) => Some(BatchTiming {
                average_ms: ms.parse().map_err(|_| bad("average_ms"))?,
                effective_gb_s: gbs.parse().map_err(|_| bad("effective_gb_s"))?,
            }),
        };
        Ok(TransposeRow {
            variant: fields[0].to_string(),
            correct,
            mismatches,
            max_abs_error,
            timing,
        })
    }
}

/// A CSV line that is not a transpose row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a transpose row: {0}")]
pub struct RowError(pub String);

/// Parse a whole `klab transpose` stdout: the header once, then rows.
pub fn parse_csv(text: &str) -> Result<Vec<TransposeRow>, RowError> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    match lines.next() {
        Some(h) if h == CSV_HEADER => {}
        Some(h) => return Err(RowError(format!("unexpected header '{h}'"))),
        None => return Err(RowError("empty output".to_string())),
    }
    lines.map(TransposeRow::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_failures_have_no_timing() {
        let ok = TransposeRow {
            variant: "padded".into(),
            correct: true,
            mismatches: 0,
            max_abs_error: 0.0,
            timing: Some(BatchTiming::from_interval(3.96, 100, 134_217_728)),
        };
        assert_eq!(ok.to_csv(), "padded,true,0,0,0.039600,3389.34");
        let bad = TransposeRow {
            variant: "broken".into(),
            correct: false,
            mismatches: 12,
            max_abs_error: f64::INFINITY,
            timing: None,
        };
        assert_eq!(bad.to_csv(), "broken,false,12,inf,,");
        assert_eq!(TransposeRow::parse(&bad.to_csv()).unwrap(), bad);
        let back = TransposeRow::parse(&ok.to_csv()).unwrap();
        assert_eq!(back.variant, "padded");
        assert!((back.timing.unwrap().average_ms - 0.0396).abs() < 1e-9);
        let text = format!("{CSV_HEADER}\n{}\n{}\n", ok.to_csv(), bad.to_csv());
        assert_eq!(parse_csv(&text).unwrap().len(), 2);
        assert!(parse_csv("a,b\n").is_err());
        assert!(TransposeRow::parse("x,maybe,0,0,,").is_err());
    }

    #[test]
    fn small_rates_keep_significant_digits() {
        assert_eq!(fmt_rate(3419.04), "3419.04");
        assert_eq!(fmt_rate(1.0), "1.00");
        assert_eq!(fmt_rate(0.85), "0.850000");
        // N = 1: 8 bytes in 0.0285 ms.
        assert_eq!(fmt_rate(8.0 / 0.0285e-3 / 1e9), "0.000280702");
        assert_eq!(fmt_rate(0.0), "0.00");
    }

    #[test]
    fn effective_bandwidth_is_useful_bytes_over_average_time() {
        // Seed 000: 134,217,728 bytes in 0.250 ms is 536.9 GB/s.
        let t = BatchTiming::from_interval(25.0, 100, 134_217_728);
        assert!((t.average_ms - 0.25).abs() < 1e-12);
        assert!((t.effective_gb_s - 536.870912).abs() < 1e-6);
    }
}
