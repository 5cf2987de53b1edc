//! The details page: `ncu --import <rep> --csv --page details`.
//!
//! One row per section metric (`Section Name`, `Metric Name`, `Metric Unit`, `Metric
//! Value`) or per rule result (`Rule Name`, `Rule Type`, `Rule Description`, `Estimated
//! Speedup Type`, `Estimated Speedup`), each row repeating the launch's identity columns.
//!
//! Two things in real output that a strict CSV reader would reject or mix up:
//!
//! * metric rows stop after `Metric Value` with a trailing comma, so they have fewer fields
//!   than the header (16 of 20 in ncu 2025.3). Rows shorter than the header are padded with
//!   empty fields; a row longer than the header is an error.
//! * rule rows name their section by its identifier (`SpeedOfLight`), metric rows by its
//!   display name (`GPU Speed Of Light Throughput`). Both are kept as printed.
//!
//! [`DetailsKernel::to_record`] turns one launch into the raw page's [`KernelRecord`]
//! (metrics under their raw names, see [`SECTION_METRICS`]), so whatever reads a raw page
//! (the bound statement) reads a details page through the same code.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::csv::Scan;
use super::raw::{scan_checked, Identity, KernelRecord};
use super::value::{parse_number, parse_value, Lookup, MetricValue, NumberLocale, Value};
use super::{MessageLevel, NcuError, NcuMessage, Page, DETAILS_COLUMNS};

/// The section that holds the metrics asked for with `--metrics`, each row under the
/// metric's own (raw) name.
pub const COMMAND_LINE_SECTION: &str = "Command line profiler metrics";

/// One value a details page shows in a section under a display name, and the raw-page metric
/// it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionMetric {
    /// The section's display names, newest first: ncu has renamed sections across versions.
    pub sections: &'static [&'static str],
    /// The row's display names, newest first.
    pub shown: &'static [&'static str],
    /// The raw page's name for the same value.
    pub raw: &'static str,
}

impl SectionMetric {
    /// The row in `kernel`: the first of the names, newest first, that the page has.
    pub fn find<'k>(&self, kernel: &'k DetailsKernel) -> Option<&'k DetailsMetric> {
        self.sections
            .iter()
            .filter_map(|s| kernel.section(s))
            .find_map(|s| self.shown.iter().find_map(|m| s.metric(m)))
    }
}

/// Section rows that show a raw-page metric under a display name. The newest names of each
/// were checked against the raw page of the same report
/// (`tests/fixtures/ncu/dev_import_{details,raw}_tiled.csv`, ncu 2025.3.1): same unit, same
/// value up to the details page's rounding. `Block Limit SM` is ncu's name for the
/// block-count limit.
///
/// The older names are the Speed Of Light section's before ncu 2023: `Memory [%]` and
/// `Compute (SM) [%]` (about 2021-2022), and before that a section named `GPU Speed Of
/// Light` with `SM [%]`, `Memory [%]` and the per-unit `SOL FB` (the frame buffer, that is
/// the DRAM partitions), `SOL L2` and `SOL TEX` (about 2019-2020). Each is the same
/// percentage of its unit's peak; an older page's numbers are its own tool's.
pub const SECTION_METRICS: [SectionMetric; 17] = [
    sol(&["Duration"], "gpu__time_duration.sum"),
    sol(
        &["DRAM Throughput", "SOL FB"],
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    sol(
        &["Memory Throughput", "Memory [%]"],
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    sol(
        &["Compute (SM) Throughput", "Compute (SM) [%]", "SM [%]"],
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    sol(
        &["L1/TEX Cache Throughput", "SOL TEX"],
        "l1tex__throughput.avg.pct_of_peak_sustained_active",
    ),
    sol(
        &["L2 Cache Throughput", "SOL L2"],
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    ),
    // Counts, not shapes: 256 for a (32, 8, 1) block.
    in_section(&[LAUNCH], &["Block Size"], "launch__block_size"),
    in_section(&[LAUNCH], &["Grid Size"], "launch__grid_size"),
    in_section(
        &[LAUNCH],
        &["Registers Per Thread"],
        "launch__registers_per_thread",
    ),
    in_section(
        &[LAUNCH],
        &["Static Shared Memory Per Block"],
        "launch__shared_mem_per_block_static",
    ),
    in_section(
        &[OCCUPANCY],
        &["Theoretical Occupancy"],
        "sm__maximum_warps_per_active_cycle_pct",
    ),
    in_section(
        &[OCCUPANCY],
        &["Achieved Occupancy"],
        "sm__warps_active.avg.pct_of_peak_sustained_active",
    ),
    in_section(
        &[OCCUPANCY],
        &["Block Limit Registers"],
        "launch__occupancy_limit_registers",
    ),
    in_section(
        &[OCCUPANCY],
        &["Block Limit Shared Mem"],
        "launch__occupancy_limit_shared_mem",
    ),
    in_section(
        &[OCCUPANCY],
        &["Block Limit Warps"],
        "launch__occupancy_limit_warps",
    ),
    in_section(
        &[OCCUPANCY],
        &["Block Limit SM"],
        "launch__occupancy_limit_blocks",
    ),
    in_section(
        &[OCCUPANCY],
        &["Block Limit Barriers"],
        "launch__occupancy_limit_barriers",
    ),
];

/// The Speed Of Light section's display names, newest first.
const SOL: &[&str] = &["GPU Speed Of Light Throughput", "GPU Speed Of Light"];
/// A row of [`SOL`].
const fn sol(shown: &'static [&'static str], raw: &'static str) -> SectionMetric {
    SectionMetric {
        sections: SOL,
        shown,
        raw,
    }
}
/// A row of a section that has kept its name.
const fn in_section(
    sections: &'static [&'static str],
    shown: &'static [&'static str],
    raw: &'static str,
) -> SectionMetric {
    SectionMetric {
        sections,
        shown,
        raw,
    }
}

const LAUNCH: &str = "Launch Statistics";
const OCCUPANCY: &str = "Occupancy";

/// One metric row of a section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetailsMetric {
    /// As displayed, e.g. `DRAM Throughput`.
    pub name: String,
    /// As printed, e.g. `%`, `ns`, `byte/s`; empty when none.
    pub unit: String,
    /// The value.
    pub value: Value,
}

impl DetailsMetric {
    /// The value with its unit, as the raw page holds one.
    pub fn value_with_unit(&self) -> MetricValue {
        MetricValue {
            unit: self.unit.clone(),
            value: self.value.clone(),
        }
    }

    /// The value as a [`Lookup`].
    pub fn lookup(&self) -> Lookup<'_> {
        match &self.value {
            Value::Number(x) => Lookup::Number(*x, &self.unit),
            Value::NoData => Lookup::NoData,
            Value::Text(s) => Lookup::Text(s),
        }
    }
}

/// One section of one kernel: its metric rows in report order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// The display name, e.g. `GPU Speed Of Light Throughput`.
    pub name: String,
    /// Its metric rows in report order.
    pub metrics: Vec<DetailsMetric>,
}

impl Section {
    /// The metric displayed as `name`.
    pub fn metric(&self, name: &str) -> Option<&DetailsMetric> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

/// One rule result (ncu's guided analysis).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleResult {
    /// The section identifier as printed, e.g. `SpeedOfLight`.
    pub section: String,
    /// E.g. `SOLBottleneck`.
    pub name: String,
    /// As printed: `OPT` (an optimisation opportunity), `INF` (information), ...
    pub rule_type: String,
    /// The rule's message.
    pub description: String,
    /// `global` or `local` when the rule estimates a speedup.
    pub speedup_type: Option<String>,
    /// The estimated speedup in percent, when given.
    pub estimated_speedup: Option<f64>,
}

/// One profiled kernel's details.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetailsKernel {
    /// ncu's result ID (0, 1, 2, ... in profiling order).
    pub id: u64,
    /// The profiled process's ID.
    pub process_id: Option<u64>,
    /// The profiled process's name.
    pub process_name: String,
    /// The host it ran on.
    pub host_name: String,
    /// As printed (see [`super::KernelRecord::kernel_name`]).
    pub kernel_name: String,
    /// The CUDA context's ID.
    pub context: Option<u64>,
    /// The stream's ID.
    pub stream: Option<u64>,
    /// `(x, y, z)` threads per block.
    pub block: Option<[u32; 3]>,
    /// `(x, y, z)` blocks per grid.
    pub grid: Option<[u32; 3]>,
    /// The device's index.
    pub device: Option<u32>,
    /// Compute capability as printed, e.g. `9.0`.
    pub cc: String,
    /// Sections in order of first appearance.
    pub sections: Vec<Section>,
    /// Rule results in report order.
    pub rules: Vec<RuleResult>,
}

impl DetailsKernel {
    /// The section displayed as `name`.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// A metric of a section: [`Lookup::Absent`] when the section or the metric is not in
    /// the report.
    pub fn metric(&self, section: &str, name: &str) -> Lookup<'_> {
        self.section(section)
            .and_then(|s| s.metric(name))
            .map_or(Lookup::Absent, DetailsMetric::lookup)
    }

    /// Rule results named `name` (one rule can report more than once).
    pub fn rules_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a RuleResult> {
        self.rules.iter().filter(move |r| r.name == name)
    }

    /// This launch as a raw-page record: the identity as printed; as metrics, every row of
    /// [`COMMAND_LINE_SECTION`] under its own name and the rows of [`SECTION_METRICS`] under
    /// their raw names. A command-line row wins over a section row of the same metric (it
    /// is what was asked for by name). Other section rows have no raw name here and are
    /// left out; the page has no device attributes. Values keep the page's display
    /// rounding (`84.48 us`).
    pub fn to_record(&self) -> KernelRecord {
        let mut metrics: BTreeMap<String, MetricValue> = BTreeMap::new();
        for row in SECTION_METRICS {
            if let Some(m) = row.find(self) {
                metrics.insert(row.raw.to_string(), m.value_with_unit());
            }
        }
        if let Some(s) = self.section(COMMAND_LINE_SECTION) {
            for m in &s.metrics {
                metrics.insert(m.name.clone(), m.value_with_unit());
            }
        }
        KernelRecord {
            id: self.id,
            process_id: self.process_id,
            process_name: self.process_name.clone(),
            host_name: self.host_name.clone(),
            kernel_name: self.kernel_name.clone(),
            context: self.context,
            stream: self.stream,
            block: self.block,
            grid: self.grid,
            device: self.device,
            cc: self.cc.clone(),
            extra: BTreeMap::new(),
            metrics,
            device_attributes: BTreeMap::new(),
        }
    }
}

/// A parsed details page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetailsReport {
    /// One per kernel ID, in order of first appearance.
    pub kernels: Vec<DetailsKernel>,
    /// Every `==ERROR==` / `==WARNING==` / `==PROF==` line.
    pub messages: Vec<NcuMessage>,
    /// Other lines outside the table (the application's output).
    pub other_lines: Vec<String>,
}

impl DetailsReport {
    /// The kernel with result ID `id`.
    pub fn kernel(&self, id: u64) -> Option<&DetailsKernel> {
        self.kernels.iter().find(|k| k.id == id)
    }

    /// The `==WARNING==` messages.
    pub fn warnings(&self) -> impl Iterator<Item = &NcuMessage> {
        self.messages
            .iter()
            .filter(|m| m.level == MessageLevel::Warning)
    }
}

/// Parse `ncu --csv --page details` output. The header must have `Section Name`, `Metric
/// Name`, `Metric Unit` and `Metric Value`; the rule columns are optional. Errors as for
/// [`super::parse_raw`] (numbers in the value and speedup columns), plus
/// [`NcuError::MissingColumn`]; a row is ragged only when it
/// has more fields than the header.
pub fn parse_details(text: &str) -> Result<DetailsReport, NcuError> {
    let Scan {
        header,
        records,
        messages,
        other_lines,
    } = scan_checked(text)?;
    let header = header.expect("scan_checked ensures a header");
    let names: Vec<&str> = header.fields.iter().map(|s| s.trim()).collect();
    if !names.iter().any(|n| DETAILS_COLUMNS.contains(n)) {
        return Err(NcuError::WrongPage {
            expected: Page::Details,
            found: Page::Raw,
        });
    }
    let at = |want: &str| names.iter().position(|n| *n == want);
    let need = |want: &str| {
        at(want).ok_or_else(|| NcuError::MissingColumn {
            column: want.to_string(),
        })
    };
    let section_col = need("Section Name")?;
    let name_col = need("Metric Name")?;
    let unit_col = need("Metric Unit")?;
    let value_col = need("Metric Value")?;
    let rule_col = at("Rule Name");
    let rule_type_col = at("Rule Type");
    let rule_desc_col = at("Rule Description");
    let speedup_type_col = at("Estimated Speedup Type");
    let speedup_col = at("Estimated Speedup");
    let ids = Identity::locate_names(names.iter().copied());
    let n = names.len();

    let mut kernels: Vec<DetailsKernel> = Vec::new();
    let mut locale = NumberLocale::default();
    for (i, r) in records.into_iter().enumerate() {
        let row = i + 2;
        if r.fields.len() > n {
            return Err(NcuError::RaggedRow {
                row,
                line: r.line,
                found: r.fields.len(),
                expected: n,
            });
        }
        let get = |c: Option<usize>| -> &str {
            c.and_then(|c| r.fields.get(c))
                .map(|s| s.trim())
                .unwrap_or("")
        };
        locale.add(get(Some(value_col)));
        locale.add(get(speedup_col));
        let id_rec = ids.read(&r, row)?;
        let k = match kernels.iter().position(|k| k.id == id_rec.id) {
            Some(p) => &mut kernels[p],
            None => {
                kernels.push(DetailsKernel {
                    id: id_rec.id,
                    process_id: id_rec.process_id,
                    process_name: id_rec.process_name,
                    host_name: id_rec.host_name,
                    kernel_name: id_rec.kernel_name,
                    context: id_rec.context,
                    stream: id_rec.stream,
                    block: id_rec.block,
                    grid: id_rec.grid,
                    device: id_rec.device,
                    cc: id_rec.cc,
                    sections: Vec::new(),
                    rules: Vec::new(),
                });
                kernels.last_mut().expect("just pushed")
            }
        };
        let section = get(Some(section_col)).to_string();
        let rule = get(rule_col);
        if !rule.is_empty() {
            let speedup_type = get(speedup_type_col);
            k.rules.push(RuleResult {
                section,
                name: rule.to_string(),
                rule_type: get(rule_type_col).to_string(),
                description: get(rule_desc_col).to_string(),
                speedup_type: (!speedup_type.is_empty()).then(|| speedup_type.to_string()),
                estimated_speedup: parse_number(get(speedup_col)),
            });
            continue;
        }
        let metric_name = get(Some(name_col));
        if metric_name.is_empty() && section.is_empty() {
            continue;
        }
        let metric = DetailsMetric {
            name: metric_name.to_string(),
            unit: get(Some(unit_col)).to_string(),
            value: parse_value(get(Some(value_col))),
        };
        match k.sections.iter_mut().find(|s| s.name == section) {
            Some(s) => s.metrics.push(metric),
            None => k.sections.push(Section {
                name: section,
                metrics: vec![metric],
            }),
        }
    }
    locale
        .check()
        .map_err(|problem| NcuError::NumberLocale { problem })?;
    if kernels.is_empty() {
        return Err(NcuError::NoKernelsProfiled {
            detail: "the CSV table has a header but no kernel rows".to_string(),
        });
    }
    Ok(DetailsReport {
        kernels,
        messages,
        other_lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\",\"Rule Name\",\"Rule Type\",\"Rule Description\",\"Estimated Speedup Type\",\"Estimated Speedup\"\n";

    #[test]
    fn short_metric_rows_and_rules() {
        let text = format!(
            "{HEADER}\"0\",\"k\",\"S\",\"Duration\",\"ns\",\"1,500\",\n\
             \"0\",\"k\",\"Sid\",\"\",\"\",\"\",\"R\",\"OPT\",\"do \"\"this\"\", then that\",\"global\",\"12.5\"\n\
             \"1\",\"k\",\"S\",\"Duration\",\"us\",\"2\",\n\
             \"0\",\"k\",\"S\",\"Note\",\"\",\"no data\",\n"
        );
        let d = parse_details(&text).unwrap();
        assert_eq!(d.kernels.len(), 2);
        let k0 = d.kernel(0).unwrap();
        assert_eq!(k0.metric("S", "Duration"), Lookup::Number(1500.0, "ns"));
        assert_eq!(k0.metric("S", "Note"), Lookup::NoData);
        assert_eq!(k0.metric("S", "Nope"), Lookup::Absent);
        assert_eq!(k0.metric("Nope", "Duration"), Lookup::Absent);
        assert_eq!(k0.sections.len(), 1);
        assert_eq!(k0.rules.len(), 1);
        let r = &k0.rules[0];
        assert_eq!(r.section, "Sid");
        assert_eq!(r.rule_type, "OPT");
        assert_eq!(r.description, "do \"this\", then that");
        assert_eq!(r.speedup_type.as_deref(), Some("global"));
        assert_eq!(r.estimated_speedup, Some(12.5));
        assert_eq!(
            d.kernel(1).unwrap().metric("S", "Duration").number_in("ns"),
            Some(2000.0)
        );
    }

    #[test]
    fn long_rows_and_missing_columns_are_errors() {
        let text = format!(
            "{HEADER}\"0\",\"k\",\"S\",\"M\",\"\",\"1\",\"\",\"\",\"\",\"\",\"\",\"extra\"\n"
        );
        let e = parse_details(&text).unwrap_err();
        assert!(
            matches!(
                e,
                NcuError::RaggedRow {
                    row: 2,
                    line: 2,
                    found: 12,
                    expected: 11
                }
            ),
            "{e:?}"
        );
        let e = parse_details("\"ID\",\"Kernel Name\",\"Section Name\"\n\"0\",\"k\",\"S\"\n")
            .unwrap_err();
        assert!(
            matches!(&e, NcuError::MissingColumn { column } if column == "Metric Name"),
            "{e:?}"
        );
    }

    #[test]
    fn header_only_is_no_kernels() {
        let e = parse_details(HEADER).unwrap_err();
        assert!(matches!(e, NcuError::NoKernelsProfiled { .. }), "{e:?}");
    }

    #[test]
    fn numbers_in_a_comma_decimal_locale_are_refused() {
        let page = |v: &str, speedup: &str| {
            format!("{HEADER}\"0\",\"k\",\"S\",\"Duration\",\"ns\",\"{v}\",\n\"0\",\"k\",\"S\",\"\",\"\",\"\",\"R\",\"OPT\",\"d\",\"global\",\"{speedup}\"\n")
        };
        for (v, speedup) in [("79.424", "12,5"), ("61.317", "3.351")] {
            let e = parse_details(&page(v, speedup)).unwrap_err();
            assert!(
                matches!(e, NcuError::NumberLocale { .. }),
                "{v} {speedup}: {e:?}"
            );
        }
        let d = parse_details(&page("79.424", "12.5")).unwrap();
        assert_eq!(d.kernels[0].metric("S", "Duration").number(), Some(79.424));
    }
}
