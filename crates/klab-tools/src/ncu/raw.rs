//! The raw page: `ncu --csv --page raw`, one row per profiled kernel launch.
//!
//! Layout: a header row of column names, then (normally) a unit row whose `ID` field is
//! empty, then one row per kernel. The first columns identify the launch
//! ([`IDENTITY_COLUMNS`]); every other column is a metric or a device attribute
//! ([`column_kind`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::aliases::{alias, Alias, BLOCK_SIZE, CC, GRID_SIZE};
use super::csv::{scan, Record, Scan};
use super::value::{parse_value, Lookup, MetricValue, NumberLocale};
use super::{
    first_error, is_details_header, output_failure, MessageLevel, NcuError, NcuMessage, Page,
};

/// The columns that identify a launch rather than measure it, as ncu 2025.3 names them.
/// Any other column whose name contains a space is treated the same way (kept in
/// [`KernelRecord::extra`]).
pub const IDENTITY_COLUMNS: [&str; 11] = [
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
];

/// Column-name prefixes that describe the device rather than the kernel: the CUDA device
/// attributes (`device__attribute_display_name`, `..._l2_cache_size`, ...), and the static
/// topology ncu prints beside them: chip-to-chip links (`c2clink__present`), NVLink
/// (`nvlink__count_physical`, `nvlink__peer_access`, ...) and NUMA placement
/// (`numa__id_cpu`, ...). These are the same for every kernel on a device. Measured NVLink
/// traffic uses other prefixes (`nvlrx__`, `nvltx__`) and stays a metric. `launch__*`
/// (the launch's configuration) and `profiler__*` (replay passes) stay metrics: they
/// belong to the profiled launch.
pub const DEVICE_ATTRIBUTE_PREFIXES: [&str; 4] =
    ["device__attribute_", "c2clink__", "nvlink__", "numa__"];

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnKind {
    /// Identifies the launch ([`IDENTITY_COLUMNS`], or a name with a space).
    Identity,
    /// A metric of the kernel.
    Metric,
    /// A property of the device ([`DEVICE_ATTRIBUTE_PREFIXES`]).
    DeviceAttribute,
}

/// The kind of a raw-page column, by its name.
pub fn column_kind(name: &str) -> ColumnKind {
    if IDENTITY_COLUMNS.contains(&name) || name.contains(char::is_whitespace) {
        ColumnKind::Identity
    } else if DEVICE_ATTRIBUTE_PREFIXES
        .iter()
        .any(|p| name.starts_with(p))
    {
        ColumnKind::DeviceAttribute
    } else {
        ColumnKind::Metric
    }
}

/// One column of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    /// As in the header.
    pub name: String,
    /// From the unit row; empty when ncu printed none (or there was no unit row).
    pub unit: String,
    /// Where its values go.
    pub kind: ColumnKind,
}

/// One profiled kernel launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelRecord {
    /// ncu's result ID (0, 1, 2, ... in profiling order).
    pub id: u64,
    /// The profiled process's ID.
    pub process_id: Option<u64>,
    /// The profiled process's name.
    pub process_name: String,
    /// The host it ran on.
    pub host_name: String,
    /// As printed: the function name (`naive_k`) or, from an imported report, the demangled
    /// signature (`tiled_k(const float *, float *, int)`). See
    /// [`KernelRecord::function_name`].
    pub kernel_name: String,
    /// The CUDA context's ID.
    pub context: Option<u64>,
    /// The stream's ID.
    pub stream: Option<u64>,
    /// `(x, y, z)` threads per block, from `"(32, 8, 1)"`; without a `Block Size` column,
    /// [`KernelRecord::block_total`] may still count them.
    pub block: Option<[u32; 3]>,
    /// `(x, y, z)` blocks per grid; see [`KernelRecord::grid_total`].
    pub grid: Option<[u32; 3]>,
    /// The device's index.
    pub device: Option<u32>,
    /// Compute capability as printed, e.g. `9.0`; empty without a `CC` column (see
    /// [`KernelRecord::compute_capability`]).
    pub cc: String,
    /// Identity columns not in [`IDENTITY_COLUMNS`], verbatim.
    pub extra: BTreeMap<String, String>,
    /// Every metric column.
    pub metrics: BTreeMap<String, MetricValue>,
    /// Every device-description column ([`DEVICE_ATTRIBUTE_PREFIXES`]).
    pub device_attributes: BTreeMap<String, MetricValue>,
}

impl KernelRecord {
    /// A metric by klab's name for it ([`ALIASES`](super::ALIASES); device attributes are not metrics, see
    /// [`KernelRecord::device_attribute`]): the column `name`, else the first of
    /// its other names with a value. A column without a value (`n/a`) is
    /// [`Lookup::NoData`] only when no name has one. A total printed in parts is summed by
    /// [`KernelRecord::number_in`], which brings the parts to one unit.
    pub fn metric(&self, name: &str) -> Lookup<'_> {
        let exact = self.exact_metric(name);
        let Some(Alias::Names(others)) = alias(name) else {
            return exact;
        };
        let mut first_present = exact;
        for l in std::iter::once(exact).chain(others.iter().map(|o| self.exact_metric(o))) {
            match l {
                Lookup::Number(..) | Lookup::Text(_) => return l,
                Lookup::NoData if first_present.is_absent() => first_present = l,
                _ => {}
            }
        }
        first_present
    }

    /// A metric's number converted to `unit` (e.g. `ns`, `byte`), whatever unit ncu chose
    /// to print it in; by klab's name for it, as [`KernelRecord::metric`], and a total
    /// printed in parts ([`Alias::Parts`]) as their sum.
    pub fn number_in(&self, name: &str, unit: &str) -> Option<f64> {
        if let Some(Alias::Parts(parts)) = alias(name) {
            let sum: Option<f64> = parts.iter().map(|p| self.metric(p).number_in(unit)).sum();
            if sum.is_some() {
                return sum;
            }
        }
        self.metric(name).number_in(unit)
    }

    /// The compute capability: the `CC` column as printed (`9.0`), else `major.minor` from
    /// the device attributes ([`ALIASES`](super::ALIASES)).
    pub fn compute_capability(&self) -> Option<String> {
        if !self.cc.trim().is_empty() {
            return Some(self.cc.trim().to_string());
        }
        let Some(Alias::MajorMinor(major, minor)) = alias(CC) else {
            return None;
        };
        let whole = |name: &str| {
            self.device_attribute(name)
                .number()
                .filter(|x| x.fract() == 0.0 && *x >= 0.0)
        };
        Some(format!("{}.{}", whole(major)?, whole(minor)?))
    }

    /// Blocks in the grid: the product of the `Grid Size` column's `(x, y, z)`, else the
    /// launch metric that counts them ([`ALIASES`](super::ALIASES)).
    pub fn grid_total(&self) -> Option<u64> {
        self.total(self.grid, GRID_SIZE)
    }

    /// Threads in a block: the product of the `Block Size` column's `(x, y, z)`, else the
    /// launch metric that counts them ([`ALIASES`](super::ALIASES)).
    pub fn block_total(&self) -> Option<u64> {
        self.total(self.block, BLOCK_SIZE)
    }

    fn total(&self, dims: Option<[u32; 3]>, column: &str) -> Option<u64> {
        if let Some(d) = dims {
            return Some(d.iter().fold(1u64, |p, &x| p.saturating_mul(u64::from(x))));
        }
        let Some(Alias::Total(metric)) = alias(column) else {
            return None;
        };
        let x = self.metric(metric).number()?;
        // A count: a whole number within u64 (the cast saturates; the bound keeps it exact).
        (x.fract() == 0.0 && (0.0..=9.0e15).contains(&x)).then_some(x as u64)
    }

    /// The column `name` itself, without [`ALIASES`](super::ALIASES).
    fn exact_metric(&self, name: &str) -> Lookup<'_> {
        self.metrics
            .get(name)
            .map_or(Lookup::Absent, MetricValue::lookup)
    }

    /// A metric's number, if it has one (by klab's name, as [`KernelRecord::metric`]).
    pub fn number(&self, name: &str) -> Option<f64> {
        self.metric(name).number()
    }

    /// A device attribute by its full column name (`device__attribute_display_name`).
    pub fn device_attribute(&self, name: &str) -> Lookup<'_> {
        self.device_attributes
            .get(name)
            .map_or(Lookup::Absent, MetricValue::lookup)
    }

    /// The first metric column named `base` + one of `suffixes`, in preference order; an
    /// empty suffix means `base` itself. Returns the column name found and its value.
    /// `resolve("dram__throughput", &[".avg.pct_of_peak_sustained_elapsed", ""])`.
    pub fn resolve<'a>(
        &'a self,
        base: &str,
        suffixes: &[&str],
    ) -> Option<(&'a str, &'a MetricValue)> {
        suffixes.iter().find_map(|s| {
            let name = format!("{base}{s}");
            self.metrics
                .get_key_value(&name)
                .map(|(k, v)| (k.as_str(), v))
        })
    }

    /// The `.sum` roll-up of a counter (`sum_of("l1tex__t_sectors_pipe_lsu_mem_global_op_ld")`
    /// reads `...op_ld.sum`), else `base` itself (metrics without roll-ups, such as
    /// `launch__registers_per_thread`).
    pub fn sum_of(&self, base: &str) -> Lookup<'_> {
        self.resolve(base, &[".sum", ""])
            .map_or(Lookup::Absent, |(_, v)| v.lookup())
    }

    /// The `.avg` roll-up, else `base` itself.
    pub fn avg_of(&self, base: &str) -> Lookup<'_> {
        self.resolve(base, &[".avg", ""])
            .map_or(Lookup::Absent, |(_, v)| v.lookup())
    }

    /// `numerator / denominator` of two metrics' numbers (e.g. sectors per request); `None`
    /// if either has no number or the denominator is 0. The units are not checked.
    pub fn ratio(&self, numerator: &str, denominator: &str) -> Option<f64> {
        let n = self.number(numerator)?;
        let d = self.number(denominator)?;
        (d != 0.0).then(|| n / d)
    }

    /// Whether this launch is of the kernel `name` (a manifest's entry): its printed name;
    /// the same qualified name and template arguments, as ncu prints them (`void
    /// ops::twice(float *, int)`, `scale<float, (int)128>(float *)`); or, where ncu printed
    /// only a function name (no namespace, no template arguments), the same function name
    /// ([`base_function_name`], how `--kernel-name-base function` matches it). Another
    /// instance or another namespace's kernel of the same name is not this one.
    pub fn is_named(&self, name: &str) -> bool {
        if self.kernel_name == name || comparable_name(&self.kernel_name) == comparable_name(name) {
            return true;
        }
        let printed = strip_trailing_group(self.kernel_name.trim(), '(', ')');
        !printed.contains(['<', ':']) && self.function_name() == base_function_name(name)
    }

    /// The kernel's name with its namespace and template arguments, without return type or
    /// parameters (`ns::k<float,4>`): what [`Self::is_named`] compares, so what a refusal to
    /// match a name shows.
    pub fn qualified_name(&self) -> String {
        comparable_name(&self.kernel_name)
    }

    /// The kernel's function name without return type, namespace, template arguments or
    /// parameters (see [`base_function_name`]).
    pub fn function_name(&self) -> &str {
        base_function_name(&self.kernel_name)
    }

    /// The device's name (`device__attribute_display_name`), e.g. `NVIDIA H200`.
    pub fn device_name(&self) -> Option<&str> {
        self.device_attribute("device__attribute_display_name")
            .text()
    }
}

/// A parsed raw page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawReport {
    /// Every column in header order.
    pub columns: Vec<Column>,
    /// One per data row, in order.
    pub kernels: Vec<KernelRecord>,
    /// Every `==ERROR==` / `==WARNING==` / `==PROF==` line, wherever it was.
    pub messages: Vec<NcuMessage>,
    /// Other lines outside the table (the application's output), in order.
    pub other_lines: Vec<String>,
}

impl RawReport {
    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// Whether the report has a metric column `name`.
    pub fn has_metric(&self, name: &str) -> bool {
        self.column(name)
            .is_some_and(|c| c.kind == ColumnKind::Metric)
    }

    /// The kernel with result ID `id`.
    pub fn kernel(&self, id: u64) -> Option<&KernelRecord> {
        self.kernels.iter().find(|k| k.id == id)
    }

    /// Kernels whose printed name or function name ([`base_function_name`]) is `name`.
    pub fn kernels_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a KernelRecord> {
        self.kernels.iter().filter(move |k| k.is_named(name))
    }

    /// The `==WARNING==` messages.
    pub fn warnings(&self) -> impl Iterator<Item = &NcuMessage> {
        self.messages
            .iter()
            .filter(|m| m.level == MessageLevel::Warning)
    }

    /// The `==ERROR==` messages.
    pub fn errors(&self) -> impl Iterator<Item = &NcuMessage> {
        self.messages
            .iter()
            .filter(|m| m.level == MessageLevel::Error)
    }
}

/// Parse `ncu --csv --page raw` output (live or `--import`), with anything around the
/// table.
///
/// Errors, first match wins: empty input; `ERR_NVGPUCTRPERM` anywhere
/// ([`NcuError::CounterPermission`]); a broken quote; no header (with no data rows, ncu's
/// `No kernels were profiled` is reported instead); a details page's header
/// ([`NcuError::WrongPage`]); a ragged row (field count differs from the header's); a
/// non-numeric ID; numbers not in English format ([`NcuError::NumberLocale`]); a header
/// with no kernel rows ([`NcuError::NoKernelsProfiled`]).
pub fn parse_raw(text: &str) -> Result<RawReport, NcuError> {
    let scanned = scan_checked(text)?;
    let Scan {
        header,
        records,
        messages,
        other_lines,
    } = scanned;
    let header = header.expect("scan_checked ensures a header");
    // A details page read as a raw one has only identity columns (their names have
    // spaces): kernels with no metrics, which would read as "nothing measured".
    if is_details_header(&header.fields) {
        return Err(NcuError::WrongPage {
            expected: Page::Raw,
            found: Page::Details,
        });
    }
    let n = header.fields.len();

    let mut rows = records.into_iter().enumerate().peekable();
    // The unit row: the first record after the header, with an empty ID.
    let mut units: Vec<String> = vec![String::new(); n];
    if let Some((_, r)) = rows.peek() {
        if r.fields.first().is_some_and(|f| f.trim().is_empty()) {
            let (i, r) = rows.next().expect("peeked");
            check_width(&r, i, n)?;
            units = r.fields.iter().map(|u| u.trim().to_string()).collect();
        }
    }
    let columns: Vec<Column> = header
        .fields
        .iter()
        .zip(&units)
        .map(|(name, unit)| {
            let name = name.trim().to_string();
            Column {
                kind: column_kind(&name),
                name,
                unit: unit.clone(),
            }
        })
        .collect();
    let ids = Identity::locate(&columns);

    let mut kernels = Vec::new();
    let mut locale = NumberLocale::default();
    for (i, r) in rows {
        check_width(&r, i, n)?;
        let mut k = ids.read(&r, i + 2)?;
        for (c, field) in columns.iter().zip(&r.fields) {
            if c.kind != ColumnKind::Identity {
                locale.add(field);
            }
            let v = MetricValue {
                unit: c.unit.clone(),
                value: parse_value(field),
            };
            match c.kind {
                ColumnKind::Identity => {
                    if !IDENTITY_COLUMNS.contains(&c.name.as_str()) {
                        k.extra.insert(c.name.clone(), field.clone());
                    }
                }
                ColumnKind::Metric => {
                    k.metrics.insert(c.name.clone(), v);
                }
                ColumnKind::DeviceAttribute => {
                    k.device_attributes.insert(c.name.clone(), v);
                }
            }
        }
        kernels.push(k);
    }
    locale
        .check()
        .map_err(|problem| NcuError::NumberLocale { problem })?;
    if kernels.is_empty() {
        return Err(NcuError::NoKernelsProfiled {
            detail: "the CSV table has a header but no kernel rows".to_string(),
        });
    }
    Ok(RawReport {
        columns,
        kernels,
        messages,
        other_lines,
    })
}

/// Scan, and apply the checks both pages share: empty input, ncu's own failure lines, no
/// header. The returned scan has a header.
pub(crate) fn scan_checked(text: &str) -> Result<Scan, NcuError> {
    if text.trim().is_empty() {
        return Err(NcuError::Empty);
    }
    let scanned = match scan(text) {
        Ok(s) => s,
        Err(e) => {
            // A broken table does not hide a permission failure.
            return Err(output_failure(text, false).unwrap_or(e));
        }
    };
    // Kernel rows: records with an ID (the unit row has none).
    let have_rows = scanned.header.is_some()
        && scanned
            .records
            .iter()
            .any(|r| r.fields.first().is_some_and(|f| !f.trim().is_empty()));
    if let Some(e) = output_failure(text, have_rows) {
        return Err(e);
    }
    if scanned.header.is_none() {
        return Err(NcuError::NoHeader {
            hint: first_error(&scanned.messages),
        });
    }
    Ok(scanned)
}

/// `record` (the `index`-th after the header, 0-based) must have `n` fields.
fn check_width(record: &Record, index: usize, n: usize) -> Result<(), NcuError> {
    if record.fields.len() != n {
        return Err(NcuError::RaggedRow {
            row: index + 2,
            line: record.line,
            found: record.fields.len(),
            expected: n,
        });
    }
    Ok(())
}

/// Where the identity columns are.
pub(crate) struct Identity {
    id: Option<usize>,
    process_id: Option<usize>,
    process_name: Option<usize>,
    host_name: Option<usize>,
    kernel_name: Option<usize>,
    context: Option<usize>,
    stream: Option<usize>,
    block: Option<usize>,
    grid: Option<usize>,
    device: Option<usize>,
    cc: Option<usize>,
}

impl Identity {
    pub(crate) fn locate(columns: &[Column]) -> Identity {
        Identity::locate_names(columns.iter().map(|c| c.name.as_str()))
    }

    pub(crate) fn locate_names<'a>(names: impl Iterator<Item = &'a str> + Clone) -> Identity {
        let at = |want: &str| names.clone().position(|n| n.trim() == want);
        Identity {
            id: at("ID"),
            process_id: at("Process ID"),
            process_name: at("Process Name"),
            host_name: at("Host Name"),
            kernel_name: at("Kernel Name"),
            context: at("Context"),
            stream: at("Stream"),
            block: at("Block Size"),
            grid: at("Grid Size"),
            device: at("Device"),
            cc: at("CC"),
        }
    }

    /// The identity of one row (`row` is its number, the header being 1), with empty maps.
    pub(crate) fn read(&self, r: &Record, row: usize) -> Result<KernelRecord, NcuError> {
        let get = |i: Option<usize>| -> &str {
            i.and_then(|i| r.fields.get(i))
                .map(|s| s.trim())
                .unwrap_or("")
        };
        let id_text = get(self.id);
        let id = id_text
            .replace(',', "")
            .parse::<u64>()
            .map_err(|_| NcuError::BadId {
                row,
                line: r.line,
                value: id_text.to_string(),
            })?;
        let num = |i: Option<usize>| get(i).replace(',', "").parse::<u64>().ok();
        Ok(KernelRecord {
            id,
            process_id: num(self.process_id),
            process_name: get(self.process_name).to_string(),
            host_name: get(self.host_name).to_string(),
            kernel_name: get(self.kernel_name).to_string(),
            context: num(self.context),
            stream: num(self.stream),
            block: parse_dim3(get(self.block)),
            grid: parse_dim3(get(self.grid)),
            device: num(self.device).and_then(|d| u32::try_from(d).ok()),
            cc: get(self.cc).to_string(),
            extra: BTreeMap::new(),
            metrics: BTreeMap::new(),
            device_attributes: BTreeMap::new(),
        })
    }
}

/// `"(32, 8, 1)"` -> `[32, 8, 1]`; `None` for anything else.
pub(crate) fn parse_dim3(s: &str) -> Option<[u32; 3]> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    let mut it = inner.split(',').map(|p| p.trim().parse::<u32>());
    let d = [it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?];
    it.next().is_none().then_some(d)
}

/// A kernel's function name as ncu's `--kernel-name-base function` sees it, approximately:
/// drops the parameter list, template arguments, a leading return type and namespaces.
/// `void ns::k<float, 4>(float const*, int)` -> `k`; `tiled_k(const float *, float *, int)`
/// -> `tiled_k`; `naive_k` -> `naive_k`.
pub fn base_function_name(name: &str) -> &str {
    let s = name.trim();
    // Drop a trailing parameter list: the last top-level "(...)" that ends the name.
    let s = strip_trailing_group(s, '(', ')');
    // Drop trailing template arguments.
    let s = strip_trailing_group(s, '<', '>');
    // Drop a return type: the last top-level space separates it.
    let s = match last_top_level(s, |c| c == ' ') {
        Some(k) => &s[k + 1..],
        None => s,
    };
    // Drop namespaces and classes: after the last top-level "::".
    let mut start = 0;
    let bytes = s.as_bytes();
    let mut depth = 0i32;
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth -= 1,
            b':' if depth == 0 && i + 1 < bytes.len() && bytes[i + 1] == b':' => start = i + 2,
            _ => {}
        }
    }
    let s = &s[start..];
    let s = strip_trailing_group(s, '<', '>');
    if s.is_empty() {
        name.trim()
    } else {
        s
    }
}

/// A kernel's name as written or as ncu prints it, reduced to what both say alike: no
/// return type, no parameter list, no cast before a template argument (`(int)128`), no
/// spaces. `void ns::k<float, (int)4>(float const*, int)` and `ns::k<float, 4>` give
/// `ns::k<float,4>`.
fn comparable_name(name: &str) -> String {
    let s = strip_trailing_group(name.trim(), '(', ')');
    let s = match last_top_level(s, |c| c == ' ') {
        Some(k) => &s[k + 1..],
        None => s,
    };
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find('(') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(')') {
            // A cast: a type of letters and spaces in parentheses.
            Some(close)
                if after[..close]
                    .chars()
                    .all(|c| c.is_ascii_alphabetic() || c == ' ') =>
            {
                rest = &after[close + 1..];
            }
            _ => {
                out.push('(');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.retain(|c| !c.is_whitespace());
    out
}

/// `s` without a trailing balanced `open ... close` group (if it ends with `close`).
pub(crate) fn strip_trailing_group(s: &str, open: char, close: char) -> &str {
    let s = s.trim_end();
    if !s.ends_with(close) {
        return s;
    }
    let mut depth = 0i32;
    for (i, c) in s.char_indices().rev() {
        if c == close {
            depth += 1;
        } else if c == open {
            depth -= 1;
            if depth == 0 {
                return s[..i].trim_end();
            }
        }
    }
    s
}

/// The byte index of the last character matching `pred` outside any brackets.
fn last_top_level(s: &str, pred: impl Fn(char) -> bool) -> Option<usize> {
    let mut depth = 0i32;
    let mut last = None;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            _ if depth == 0 && pred(c) => last = Some(i),
            _ => {}
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncu::Value;

    const SMALL: &str = "\
==PROF== Connected to process 1 (./probe)\n\
app line\n\
\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"device__attribute_display_name\",\"gpu__time_duration.sum\",\"launch__func_cache_config\",\"x__y.sum\"\n\
\"\",\"\",\"\",\"\",\"\",\"ns\",\"\",\"\"\n\
\"0\",\"k\",\"(32, 8, 1)\",\"(128, 128, 1)\",\"NVIDIA H200\",\"1,024.0\",\"CachePreferNone\",\"n/a\"\n\
==PROF== Disconnected from process 1\n";

    #[test]
    fn small_table() {
        let r = parse_raw(SMALL).unwrap();
        assert_eq!(r.kernels.len(), 1);
        let k = &r.kernels[0];
        assert_eq!(k.id, 0);
        assert_eq!(k.kernel_name, "k");
        assert_eq!(k.block, Some([32, 8, 1]));
        assert_eq!(k.grid, Some([128, 128, 1]));
        assert_eq!(k.process_id, None);
        assert_eq!(
            k.metric("gpu__time_duration.sum"),
            Lookup::Number(1024.0, "ns")
        );
        assert_eq!(k.metric("x__y.sum"), Lookup::NoData);
        assert_eq!(
            k.metric("launch__func_cache_config"),
            Lookup::Text("CachePreferNone")
        );
        assert_eq!(k.metric("device__attribute_display_name"), Lookup::Absent);
        assert_eq!(k.device_name(), Some("NVIDIA H200"));
        assert_eq!(r.messages.len(), 2);
        assert_eq!(r.other_lines, ["app line"]);
        assert_eq!(r.column("gpu__time_duration.sum").unwrap().unit, "ns");
        assert!(r.has_metric("x__y.sum"));
        assert!(!r.has_metric("device__attribute_display_name"));
    }

    #[test]
    fn without_a_unit_row_units_are_empty() {
        let r = parse_raw("ID,Kernel Name,a__b.sum\n0,k,5\n1,k,6\n").unwrap();
        assert_eq!(r.kernels.len(), 2);
        assert_eq!(r.kernels[1].metric("a__b.sum"), Lookup::Number(6.0, ""));
    }

    #[test]
    fn ragged_unit_row_and_bad_id() {
        let e = parse_raw("ID,a__b\n,u,v\n0,1\n").unwrap_err();
        assert!(
            matches!(
                e,
                NcuError::RaggedRow {
                    row: 2,
                    line: 2,
                    found: 3,
                    expected: 2
                }
            ),
            "{e:?}"
        );
        let e = parse_raw("ID,a__b\n,u\nzero,1\n").unwrap_err();
        assert!(
            matches!(
                e,
                NcuError::BadId {
                    row: 3,
                    line: 3,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn column_kinds() {
        assert_eq!(column_kind("ID"), ColumnKind::Identity);
        assert_eq!(column_kind("Kernel Time"), ColumnKind::Identity);
        assert_eq!(
            column_kind("device__attribute_display_name"),
            ColumnKind::DeviceAttribute
        );
        assert_eq!(
            column_kind("nvlink__count_physical"),
            ColumnKind::DeviceAttribute
        );
        assert_eq!(column_kind("numa__id_cpu"), ColumnKind::DeviceAttribute);
        assert_eq!(column_kind("c2clink__present"), ColumnKind::DeviceAttribute);
        assert_eq!(column_kind("launch__grid_size"), ColumnKind::Metric);
        assert_eq!(column_kind("profiler__replayer_passes"), ColumnKind::Metric);
        assert_eq!(column_kind("inst_executed"), ColumnKind::Metric);
        assert_eq!(column_kind("nvlrx__bytes.sum"), ColumnKind::Metric);
    }

    #[test]
    fn dim3() {
        assert_eq!(parse_dim3("(32, 8, 1)"), Some([32, 8, 1]));
        assert_eq!(parse_dim3(" (1,2,3) "), Some([1, 2, 3]));
        assert_eq!(parse_dim3("(1, 2)"), None);
        assert_eq!(parse_dim3("(1, 2, 3, 4)"), None);
        assert_eq!(parse_dim3("1, 2, 3"), None);
        assert_eq!(parse_dim3("(a, 2, 3)"), None);
        assert_eq!(parse_dim3(""), None);
    }

    #[test]
    fn function_names() {
        assert_eq!(base_function_name("naive_k"), "naive_k");
        assert_eq!(
            base_function_name("tiled_k(const float *, float *, int)"),
            "tiled_k"
        );
        assert_eq!(
            base_function_name("void ns::inner::k<float, (int)4>(float const*, int)"),
            "k"
        );
        assert_eq!(
            base_function_name(
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1>>(int, T2, T3)"
            ),
            "vectorized_elementwise_kernel"
        );
        assert_eq!(base_function_name("k<3>"), "k");
        assert_eq!(base_function_name("  "), "");
    }

    /// A launch is found by the entry a manifest gives: plain, qualified or an instance.
    #[test]
    fn a_launch_is_named_by_a_qualified_entry_or_an_instance() {
        let launch = |name: &str| KernelRecord {
            id: 0,
            process_id: None,
            process_name: String::new(),
            host_name: String::new(),
            kernel_name: name.into(),
            context: None,
            stream: None,
            block: None,
            grid: None,
            device: None,
            cc: String::new(),
            extra: BTreeMap::new(),
            metrics: BTreeMap::new(),
            device_attributes: BTreeMap::new(),
        };
        assert!(launch("void ops::twice(float *, int)").is_named("ops::twice"));
        assert!(launch("twice").is_named("ops::twice"));
        assert!(launch("void scale<float, (int)128>(float *)").is_named("scale<float, 128>"));
        assert!(launch("naive_k").is_named("naive_k"));
        assert!(!launch("void ops::thrice(float *, int)").is_named("ops::twice"));
        // Another instance, or another namespace's kernel of that name, is not this one.
        assert!(!launch("void scale<double, (int)64>(double *)").is_named("scale<float, 128>"));
        assert!(!launch("void other::twice(float *, int)").is_named("ops::twice"));
        assert!(launch("tiled_k(const float *, float *, int)").is_named("tiled_k"));
    }

    #[test]
    fn sum_avg_resolve_ratio() {
        let r = parse_raw(
            "ID,a__x.sum,a__x.avg,b__y,c__z.sum\n,sector,sector,,\n0,\"1,000\",10.0,7,0\n",
        )
        .unwrap();
        let k = &r.kernels[0];
        assert_eq!(k.sum_of("a__x").number(), Some(1000.0));
        assert_eq!(k.avg_of("a__x").number(), Some(10.0));
        assert_eq!(k.sum_of("b__y").number(), Some(7.0));
        assert!(k.sum_of("nope").is_absent());
        let (name, v) = k.resolve("a__x", &[".max", ".avg", ".sum"]).unwrap();
        assert_eq!(name, "a__x.avg");
        assert_eq!(v.value, Value::Number(10.0));
        assert_eq!(k.ratio("a__x.sum", "a__x.avg"), Some(100.0));
        assert_eq!(k.ratio("a__x.sum", "c__z.sum"), None);
        assert_eq!(k.ratio("a__x.sum", "missing"), None);
    }

    /// ncu writes numbers in the system locale; a page is read only when its numbers tell
    /// that locale is English ([`NumberLocale`]), never 1000 times off.
    #[test]
    fn numbers_in_a_comma_decimal_locale_are_refused() {
        let page = |a: &str, b: &str| {
            format!("\"ID\",\"CC\",\"a__b.sum\",\"c__d.avg\"\n\"\",\"\",\"ns\",\"%\"\n\"0\",\"9.0\",\"{a}\",\"{b}\"\n")
        };
        let refused = |a: &str, b: &str| match parse_raw(&page(a, b)) {
            Err(NcuError::NumberLocale { problem }) => problem,
            other => panic!("{a} {b}: {other:?}"),
        };
        // German: `13.490.336` and `44,19`.
        let p = refused("13.490.336", "44,19");
        assert_eq!(
            p,
            "the numbers are written in a comma-decimal locale (`13.490.336`)"
        );
        assert!(refused("79.424", "44,19").contains("(`44,19`), so `79.424` is not"));
        let e = parse_raw(&page("61.317", "61.317"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("no number tells the locale"), "{e}");
        assert!(e.contains("LC_ALL=C ncu --import"), "{e}");
        assert!(refused("1,980,000", "13.490.336").starts_with("the numbers mix English"));
        // English: `1,980,000`, `44.19`; the CC column (`9.0`) is no number of the locale's.
        let k = &parse_raw(&page("61.317", "44.19")).unwrap().kernels[0];
        assert_eq!(k.number("a__b.sum"), Some(61.317));
        let k = &parse_raw(&page("61,317", "1,980,000")).unwrap().kernels[0];
        assert_eq!(k.number("a__b.sum"), Some(61_317.0));
        // A field English reads as text (`1,2`) does not outweigh English numbers.
        let k = &parse_raw(&page("1,2", "3,971.88")).unwrap().kernels[0];
        assert_eq!(k.metric("a__b.sum"), Lookup::Text("1,2"));
        // Nothing that depends on the locale: read.
        assert!(parse_raw(&page("100", "n/a")).is_ok());
    }
}
