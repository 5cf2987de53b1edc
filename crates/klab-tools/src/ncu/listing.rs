//! `ncu --query-metrics`: which metric base names this ncu and GPU have.
//!
//! The listing is a fixed-width table: `Device <name>`, a header (`Metric Name`, `Metric
//! Type`, `Metric Unit`, `Metric Description`) between dashed rules, then one metric per
//! line. Long descriptions wrap onto indented continuation lines. The name column's width
//! changes from one block of lines to the next, but the type and unit columns keep their
//! widths, so the unit and description are found relative to where the type starts. The
//! unit column is often blank (bank conflicts, requests), so splitting on whitespace alone
//! would read the description's first word as a unit. Without a header (a filtered
//! listing, e.g. through `grep`) the offsets are inferred from the lines themselves.

use serde::{Deserialize, Serialize};

use super::csv::message;
use super::{first_error, NcuError, NcuMessage};

/// Metric families that profiles report but `--query-metrics` does not list: launch
/// attributes (`launch__registers_per_thread`), instruction-level SASS metrics
/// (`sass__inst_executed_register_spilling`), device attributes and profiler bookkeeping.
/// [`MetricListing::unlisted`] does not report names with these prefixes as missing.
pub const UNLISTED_PREFIXES: [&str; 4] = ["launch__", "sass__", "device__", "profiler__"];

/// One metric of the listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricInfo {
    /// The base name, without roll-up suffixes (`dram__bytes_read`).
    pub name: String,
    /// `Counter`, `Ratio` or `Throughput`.
    pub metric_type: String,
    /// Empty when the listing gives none.
    pub unit: String,
    /// Continuation lines joined with single spaces.
    pub description: String,
}

/// A parsed `--query-metrics` listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricListing {
    /// From the `Device NVIDIA H200 (GH100)` line, when present.
    pub device: Option<String>,
    /// In listing order.
    pub metrics: Vec<MetricInfo>,
    /// ncu's own lines (e.g. the note that metrics need a suffix).
    pub messages: Vec<NcuMessage>,
}

impl MetricListing {
    /// The entry for a base name, exactly.
    pub fn get(&self, base: &str) -> Option<&MetricInfo> {
        self.metrics.iter().find(|m| m.name == base)
    }

    /// Whether `name` is listed, with or without suffixes: `dram__bytes_read.sum.per_second`
    /// is found through `dram__bytes_read` (dot-separated suffixes are dropped one at a time
    /// from the right, so listed names that contain dots also match).
    pub fn contains(&self, name: &str) -> bool {
        let mut candidate = name.trim();
        loop {
            if self.get(candidate).is_some() {
                return true;
            }
            match candidate.rfind('.') {
                Some(k) => candidate = &candidate[..k],
                None => return false,
            }
        }
    }

    /// The names in `wanted` this listing does not have, skipping [`UNLISTED_PREFIXES`]
    /// (which the listing never holds): the names to drop or fix before profiling.
    pub fn unlisted<'a>(&self, wanted: &[&'a str]) -> Vec<&'a str> {
        wanted
            .iter()
            .copied()
            .filter(|n| !UNLISTED_PREFIXES.iter().any(|p| n.starts_with(p)))
            .filter(|n| !self.contains(n))
            .collect()
    }
}

/// A metric line before its columns are split.
struct Row<'a> {
    line: &'a str,
    name: &'a str,
    metric_type: &'a str,
    /// Byte offset where the type starts.
    type_at: usize,
    /// Byte offset of the first word after the type, if any.
    next_at: Option<usize>,
    continuation: Vec<&'a str>,
}

/// Parse `ncu --query-metrics` output (the default table mode). An output without any
/// metric line is [`NcuError::EmptyListing`] (with the first `==ERROR==` line as a hint).
pub fn parse_query_metrics(text: &str) -> Result<MetricListing, NcuError> {
    if text.trim().is_empty() {
        return Err(NcuError::Empty);
    }
    let mut device = None;
    let mut messages = Vec::new();
    let mut header: Option<(usize, usize)> = None;
    let mut rows: Vec<Row> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(m) = message(line, i + 1) {
            messages.push(m);
            continue;
        }
        if let Some(d) = line.strip_prefix("Device ") {
            device = Some(d.trim().to_string());
            continue;
        }
        if t.starts_with("---") {
            continue;
        }
        if line.starts_with("Metric Name") {
            header = header_offsets(line);
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            if let Some(r) = rows.last_mut() {
                r.continuation.push(t);
            }
            continue;
        }
        let words = words(line);
        if words.len() < 2 {
            continue;
        }
        rows.push(Row {
            line,
            name: words[0].1,
            metric_type: words[1].1,
            type_at: words[1].0,
            next_at: words.get(2).map(|w| w.0),
            continuation: Vec::new(),
        });
    }
    if rows.is_empty() {
        return Err(NcuError::EmptyListing {
            hint: first_error(&messages),
        });
    }

    // Offsets of the unit and description columns relative to the type column.
    let inferred = || {
        let mut offs: Vec<usize> = rows
            .iter()
            .filter_map(|r| r.next_at.map(|n| n - r.type_at))
            .collect();
        offs.sort_unstable();
        offs.dedup();
        match (offs.first(), offs.last()) {
            (Some(&u), Some(&d)) if u < d => Some((u, d)),
            _ => None,
        }
    };
    let layout = header.or_else(inferred);

    let metrics = rows
        .iter()
        .map(|r| {
            let (unit, mut description) = split_unit(r, layout);
            for c in &r.continuation {
                if !description.is_empty() {
                    description.push(' ');
                }
                description.push_str(c);
            }
            MetricInfo {
                name: r.name.to_string(),
                metric_type: r.metric_type.to_string(),
                unit,
                description,
            }
        })
        .collect();
    Ok(MetricListing {
        device,
        metrics,
        messages,
    })
}

/// The unit and the description's first line of one row.
fn split_unit(r: &Row, layout: Option<(usize, usize)>) -> (String, String) {
    let Some(next) = r.next_at else {
        return (String::new(), String::new());
    };
    if let Some((u, d)) = layout {
        let unit_at = r.type_at + u;
        let desc_at = r.type_at + d;
        if next >= desc_at {
            return (String::new(), r.line[next..].trim().to_string());
        }
        if next >= unit_at {
            let unit = r.line.get(next..desc_at.min(r.line.len()));
            let desc = r.line.get(desc_at.min(r.line.len())..);
            if let (Some(unit), Some(desc)) = (unit, desc) {
                // A unit is one word; if the slice holds more, the layout does not fit.
                if !unit.trim().contains(char::is_whitespace) {
                    return (unit.trim().to_string(), desc.trim().to_string());
                }
            }
        }
    }
    // No usable layout: a unit is one word followed by column padding (two or more spaces)
    // or the end of the line.
    let rest = &r.line[next..];
    let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let after = &rest[word_end..];
    if after.trim().is_empty() || after.starts_with("  ") {
        (rest[..word_end].to_string(), after.trim().to_string())
    } else {
        (String::new(), rest.trim().to_string())
    }
}

/// From a header line, the unit and description offsets relative to the type column.
fn header_offsets(line: &str) -> Option<(usize, usize)> {
    let t = line.find("Metric Type")?;
    let u = line.find("Metric Unit")?;
    let d = line.find("Metric Description")?;
    (t < u && u < d).then(|| (u - t, d - t))
}

/// Whitespace-separated words and their byte offsets.
fn words(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((s, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &line[s..]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_blank_units_and_continuations() {
        let text = "\
Device NVIDIA H200 (GH100)
--------------- ------- ------- -----------
Metric Name     Metric Type     Metric Unit     Metric Description
--------------- ------- ------- -----------
a__x            Counter         byte            # of bytes
b__y            Counter                         # of conflicts generated
                                                by LDS
c__z            Ratio           register/thread per thread
d__w            Throughput      %
==PROF== Note that these metrics must be appended with a valid suffix.
";
        let l = parse_query_metrics(text).unwrap();
        assert_eq!(l.device.as_deref(), Some("NVIDIA H200 (GH100)"));
        assert_eq!(l.metrics.len(), 4);
        let b = l.get("b__y").unwrap();
        assert_eq!(b.unit, "");
        assert_eq!(b.description, "# of conflicts generated by LDS");
        assert_eq!(l.get("a__x").unwrap().unit, "byte");
        let c = l.get("c__z").unwrap();
        assert_eq!(
            (c.unit.as_str(), c.description.as_str()),
            ("register/thread", "per thread")
        );
        let d = l.get("d__w").unwrap();
        assert_eq!((d.unit.as_str(), d.description.as_str()), ("%", ""));
        assert_eq!(l.messages.len(), 1);
        assert!(l.contains("a__x.sum.per_second"));
        assert!(l.contains("b__y"));
        assert!(!l.contains("a__"));
        assert!(!l.contains("e__v.sum"));
        assert_eq!(
            l.unlisted(&["a__x.sum", "launch__registers_per_thread", "e__v.sum"]),
            ["e__v.sum"]
        );
    }

    #[test]
    fn without_a_header_offsets_are_inferred() {
        let text = "\
aa__x      Counter         sector          # of sectors
bb__yyyyyy Counter                         # of requests
";
        let l = parse_query_metrics(text).unwrap();
        assert_eq!(l.get("aa__x").unwrap().unit, "sector");
        assert_eq!(l.get("bb__yyyyyy").unwrap().unit, "");
        assert_eq!(l.get("bb__yyyyyy").unwrap().description, "# of requests");
    }

    #[test]
    fn one_offset_only_falls_back_to_padding() {
        let l = parse_query_metrics("a__x  Counter  byte   # of bytes\n").unwrap();
        assert_eq!(l.get("a__x").unwrap().unit, "byte");
        let l = parse_query_metrics("a__x  Counter  # of bytes\n").unwrap();
        assert_eq!(l.get("a__x").unwrap().unit, "");
        assert_eq!(l.get("a__x").unwrap().description, "# of bytes");
    }

    #[test]
    fn dotted_names_match() {
        let l = parse_query_metrics("FBSP.Triage.dramc__cycles   Counter   cycle   x\n").unwrap();
        assert!(l.contains("FBSP.Triage.dramc__cycles.sum"));
        assert!(!l.contains("dramc__cycles"));
    }

    #[test]
    fn errors() {
        assert!(matches!(parse_query_metrics(" \n"), Err(NcuError::Empty)));
        let e = parse_query_metrics("==ERROR== No supported devices found\n").unwrap_err();
        assert!(e.to_string().contains("No supported devices found"), "{e}");
    }
}
