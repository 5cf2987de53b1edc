//! A trace as text for people and as CSV for tools.
//!
//! # CSV
//!
//! One header ([`CSV_HEADER`]) and one row per kernel launch, memcpy and memset, files in
//! the order given, rows of a file in that order (kernels, then copies, then sets, each by
//! start time). Columns:
//!
//! | column | kernel | memcpy | memset |
//! |---|---|---|---|
//! | `file` | the export's path as given | same | same |
//! | `kind` | `kernel` | `memcpy` | `memset` |
//! | `name` | demangled name | direction, e.g. `Host-to-Device` | `memset` |
//! | `device`, `stream` | CUDA device ordinal, stream id | same | same |
//! | `grid`, `block` | e.g. `128x128x1` | empty | empty |
//! | `registers` | registers per thread | empty | empty |
//! | `shared_mem_bytes` | static + dynamic shared memory | empty | empty |
//! | `memory` | empty | `Pageable -> Device` | memory kind, e.g. `Device` |
//! | `value` | empty | empty | the byte written |
//! | `start_ns`, `end_ns` | timestamps as recorded | same | same |
//! | `duration_ns` | `end - start`; empty when unknown | same | same |
//! | `bytes` | `--bytes-moved`, else empty | bytes copied | bytes set |
//! | `gb_s` | `bytes / duration_ns` (10^9 B/s) | same | same |
//! | `pct_of_peak` | `gb_s / --peak-gbs * 100` | empty | empty |
//! | `api` | launching API call, version suffix stripped | same | same |
//! | `correlation_id` | CUPTI correlationId | same | same |
//! | `pid` | the issuing process, from `globalPid` | same | same |
//! | `gpu` | the GPU's id in the export (`TARGET_INFO_GPU.id`), empty when unknown | same | same |
//!
//! `device` is an ordinal in the issuing process: two processes that each see one GPU both
//! call it 0. `gpu` says which GPU it was.
//!
//! Fields are quoted (RFC 4180) when they hold a comma, quote or line break; demangled
//! names usually do.

use std::fmt::Write as _;

use super::{Rates, TableState, Trace};

/// The CSV header line (without the line break).
pub const CSV_HEADER: &str = "file,kind,name,device,stream,grid,block,registers,shared_mem_bytes,memory,value,start_ns,end_ns,duration_ns,bytes,gb_s,pct_of_peak,api,correlation_id,pid,gpu";

use klab_core::csv::field as csv_field;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn fixed(v: Option<f64>, decimals: usize) -> String {
    v.map(|v| format!("{v:.decimals$}")).unwrap_or_default()
}

/// The CSV rows of one trace, each ending in `\n`, without the header.
pub fn csv_rows(t: &Trace, rates: &Rates) -> String {
    let file = t.path.display().to_string();
    let mut out = String::new();
    let mut row = |fields: Vec<String>| {
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    };
    for k in &t.kernels {
        let gb_s = rates.gb_s(k.span.duration_ns);
        row(vec![
            file.clone(),
            "kernel".into(),
            k.name.clone(),
            k.device.to_string(),
            k.stream.to_string(),
            k.grid.to_string(),
            k.block.to_string(),
            opt(k.registers_per_thread),
            opt(k.shared_bytes()),
            String::new(),
            String::new(),
            k.span.start_ns.to_string(),
            k.span.end_ns.to_string(),
            opt(k.span.duration_ns),
            opt(rates.bytes_moved),
            fixed(gb_s, 3),
            fixed(rates.pct_of_peak(gb_s), 2),
            opt(k.api.clone()),
            opt(k.correlation_id),
            opt(k.pid),
            opt(k.gpu),
        ]);
    }
    for m in &t.memcpys {
        row(vec![
            file.clone(),
            "memcpy".into(),
            m.direction.clone(),
            m.device.to_string(),
            m.stream.to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            memory_kinds(m.src_kind.as_deref(), m.dst_kind.as_deref()),
            String::new(),
            m.span.start_ns.to_string(),
            m.span.end_ns.to_string(),
            opt(m.span.duration_ns),
            m.bytes.to_string(),
            fixed(m.gb_s(), 3),
            String::new(),
            opt(m.api.clone()),
            opt(m.correlation_id),
            opt(m.pid),
            opt(m.gpu),
        ]);
    }
    for m in &t.memsets {
        row(vec![
            file.clone(),
            "memset".into(),
            "memset".into(),
            m.device.to_string(),
            m.stream.to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            opt(m.mem_kind.clone()),
            opt(m.value),
            m.span.start_ns.to_string(),
            m.span.end_ns.to_string(),
            opt(m.span.duration_ns),
            m.bytes.to_string(),
            fixed(m.gb_s(), 3),
            String::new(),
            opt(m.api.clone()),
            opt(m.correlation_id),
            opt(m.pid),
            opt(m.gpu),
        ]);
    }
    out
}

/// The whole CSV: header and the rows of every trace.
pub fn csv(traces: &[Trace], rates: &Rates) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for t in traces {
        out.push_str(&csv_rows(t, rates));
    }
    out
}

/// Header of the per-kernel summary CSV (`klab trace --summary-csv`).
pub const SUMMARY_CSV_HEADER: &str =
    "file,name,launches,timed,min_ns,median_ns,max_ns,total_ns,gb_s_at_median,pct_of_peak";

/// One row per kernel name and export: the statistics of [`super::summarize`], and the
/// rate at the median duration when `rates` has `bytes_moved`.
pub fn summary_csv(traces: &[Trace], rates: &Rates) -> String {
    let mut out = format!("{SUMMARY_CSV_HEADER}\n");
    for t in traces {
        let file = t.path.display().to_string();
        for s in super::summarize(&t.kernels) {
            let gb_s = rates.gb_s_at(s.median_ns);
            let fields = [
                file.clone(),
                s.name.clone(),
                s.launches.to_string(),
                s.timed.to_string(),
                opt(s.min_ns),
                s.median_ns.map(|m| format!("{m}")).unwrap_or_default(),
                opt(s.max_ns),
                s.total_ns.to_string(),
                gb_s.map(|g| format!("{g:.1}")).unwrap_or_default(),
                rates
                    .pct_of_peak(gb_s)
                    .map(|p| format!("{p:.1}"))
                    .unwrap_or_default(),
            ];
            let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
            out.push_str(&line.join(","));
            out.push('\n');
        }
    }
    out
}

/// `Pageable -> Device`; `?` for an unknown side; empty when both are unknown.
fn memory_kinds(src: Option<&str>, dst: Option<&str>) -> String {
    if src.is_none() && dst.is_none() {
        return String::new();
    }
    format!("{} -> {}", src.unwrap_or("?"), dst.unwrap_or("?"))
}

/// A duration that may be fractional (a median): no decimals when whole.
fn ns_f(v: Option<f64>) -> String {
    match v {
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "-".into(),
    }
}

fn or_dash(s: String) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}

/// Text from the export (names, labels, versions) or the command line (paths) made safe
/// for one line of a terminal: every control character, line breaks included, is shown
/// escaped (`\n`, `\u{1b}`), so a kernel name cannot split a table row or a finding, nor
/// send terminal escapes.
fn one_line(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Aligned columns, two spaces apart, indented by two. `right[i]` right-aligns column i
/// (numbers); the last column is not padded. Cells go through [`one_line`].
fn table(out: &mut String, head: &[&str], right: &[bool], rows: &[Vec<String>]) {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| one_line(c)).collect())
        .collect();
    let mut width: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    for r in std::iter::once(&head).chain(&rows) {
        let mut line = String::from(" ");
        for (i, c) in r.iter().enumerate() {
            let pad = width[i].saturating_sub(c.chars().count());
            line.push(' ');
            if right[i] {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            } else if i + 1 < r.len() {
                line.push_str(c);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(c);
            }
            if i + 1 < r.len() {
                line.push(' ');
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// Why a table gave no rows, for the heading.
fn empty_reason(state: TableState, table: &str) -> String {
    match state {
        TableState::Missing => format!("none (no {table} table)"),
        TableState::Skipped => format!("none read ({table} skipped, see notes)"),
        TableState::Read(_) => "none".into(),
    }
}

/// The report of one trace: a header line (`== PATH: nsys VERSION, schema VERSION`), the
/// GPUs and API call count, the kernel launch table, the memcpy/memset table, the
/// per-direction copy summary, the per-kernel summary, findings and notes. GB/s and % of
/// peak columns appear when `rates` has `bytes_moved` (and `peak_gbs`). Text from the
/// export is shown on one line (see [`one_line`]).
pub fn text(t: &Trace, rates: &Rates) -> String {
    let mut out = String::new();
    header(&mut out, t);
    kernel_table(&mut out, t, rates);
    copy_table(&mut out, t);
    direction_summary(&mut out, t);
    kernel_summary(&mut out, t, rates);
    findings(&mut out, t);
    out
}

/// The trace's path and version, its GPUs and its API call count.
fn header(out: &mut String, t: &Trace) {
    let _ = writeln!(
        out,
        "== {}: {}",
        one_line(&t.path.display().to_string()),
        one_line(&t.version.to_string())
    );
    let shared = t.ordinals_shared();
    for g in &t.gpus {
        let mut facts = vec![g.name.clone().unwrap_or_else(|| "unnamed GPU".into())];
        if let Some(n) = g.sm_count {
            facts.push(format!("{n} SMs"));
        }
        if let Some(b) = g.memory_bandwidth_gbs {
            facts.push(format!("{b:.1} GB/s memory bandwidth"));
        }
        let facts = one_line(&facts.join(", "));
        if shared {
            // Rows name this GPU by its id: an ordinal means a different GPU in another process.
            let id = g.id.map(|i| i.to_string()).unwrap_or_else(|| "?".into());
            let seen: Vec<String> = g
                .processes
                .iter()
                .map(|p| format!("process {} as CUDA device {}", p.pid, p.cuda_device))
                .collect();
            let seen = if seen.is_empty() {
                String::new()
            } else {
                format!(" (seen by {})", seen.join(", "))
            };
            let _ = writeln!(out, "GPU {id}: {facts}{seen}");
        } else {
            let dev = g
                .cuda_device
                .map(|d| d.to_string())
                .unwrap_or_else(|| "?".into());
            let _ = writeln!(out, "GPU: CUDA device {dev}: {facts}");
        }
    }
    let _ = writeln!(
        out,
        "API calls: {}, {} returned an error",
        t.api.count,
        t.api.errors.len()
    );
}

/// The tables' device column: the CUDA ordinal, or the GPU's id where an ordinal names
/// several GPUs ([`Trace::ordinals_shared`]).
enum DeviceColumn {
    Ordinal,
    Gpu,
}

impl DeviceColumn {
    fn of(t: &Trace) -> DeviceColumn {
        if t.ordinals_shared() {
            DeviceColumn::Gpu
        } else {
            DeviceColumn::Ordinal
        }
    }

    fn head(&self) -> &'static str {
        match self {
            DeviceColumn::Ordinal => "dev",
            DeviceColumn::Gpu => "gpu",
        }
    }

    fn cell(&self, device: i64, gpu: Option<i64>) -> String {
        match self {
            DeviceColumn::Ordinal => device.to_string(),
            DeviceColumn::Gpu => or_dash(opt(gpu)),
        }
    }
}

/// Every kernel launch, with its rate where `rates` gives the bytes moved.
fn kernel_table(out: &mut String, t: &Trace, rates: &Rates) {
    let dev = DeviceColumn::of(t);
    use super::tables::KERNEL;
    let with_rate = rates.bytes_moved.is_some();
    let with_peak = with_rate && rates.peak_gbs.is_some();
    // Kernel launches.
    out.push('\n');
    if t.kernels.is_empty() {
        let _ = writeln!(
            out,
            "kernel launches: {}",
            empty_reason(t.tables.kernel, KERNEL)
        );
    } else {
        let _ = writeln!(out, "kernel launches ({}):", t.kernels.len());
        let mut head = vec!["start_ns", "duration_ns"];
        if with_rate {
            head.push("GB/s");
        }
        if with_peak {
            head.push("%peak");
        }
        head.extend([
            dev.head(),
            "stream",
            "grid",
            "block",
            "regs",
            "smem_B",
            "api",
            "name",
        ]);
        let mut right = vec![true, true];
        right.extend(std::iter::repeat_n(
            true,
            usize::from(with_rate) + usize::from(with_peak),
        ));
        right.extend([true, true, false, false, true, true, false, false]);
        let rows: Vec<Vec<String>> = t
            .kernels
            .iter()
            .map(|k| {
                let gb_s = rates.gb_s(k.span.duration_ns);
                let mut r = vec![
                    k.span.start_ns.to_string(),
                    or_dash(opt(k.span.duration_ns)),
                ];
                if with_rate {
                    r.push(or_dash(fixed(gb_s, 1)));
                }
                if with_peak {
                    r.push(or_dash(fixed(rates.pct_of_peak(gb_s), 1)));
                }
                r.extend([
                    dev.cell(k.device, k.gpu),
                    k.stream.to_string(),
                    k.grid.to_string(),
                    k.block.to_string(),
                    or_dash(opt(k.registers_per_thread)),
                    or_dash(opt(k.shared_bytes())),
                    or_dash(opt(k.api.clone())),
                    k.name.clone(),
                ]);
                r
            })
            .collect();
        table(out, &head, &right, &rows);
    }
}

/// Every memcpy and memset.
fn copy_table(out: &mut String, t: &Trace) {
    let dev = DeviceColumn::of(t);
    use super::tables::{MEMCPY, MEMSET};
    // Copies and sets.
    out.push('\n');
    if t.memcpys.is_empty() && t.memsets.is_empty() {
        let _ = writeln!(
            out,
            "memcpy/memset: {}; {}",
            empty_reason(t.tables.memcpy, MEMCPY),
            empty_reason(t.tables.memset, MEMSET)
        );
    } else {
        let _ = writeln!(
            out,
            "memcpy/memset ({} + {}):",
            t.memcpys.len(),
            t.memsets.len()
        );
        let head = [
            "start_ns",
            "duration_ns",
            "bytes",
            "GB/s",
            dev.head(),
            "stream",
            "api",
            "kind",
            "memory",
        ];
        let right = [true, true, true, true, true, true, false, false, false];
        let mut rows: Vec<Vec<String>> = Vec::new();
        for m in &t.memcpys {
            rows.push(vec![
                m.span.start_ns.to_string(),
                or_dash(opt(m.span.duration_ns)),
                m.bytes.to_string(),
                or_dash(fixed(m.gb_s(), 1)),
                dev.cell(m.device, m.gpu),
                m.stream.to_string(),
                or_dash(opt(m.api.clone())),
                format!("memcpy {}", m.direction),
                memory_kinds(m.src_kind.as_deref(), m.dst_kind.as_deref()),
            ]);
        }
        for m in &t.memsets {
            rows.push(vec![
                m.span.start_ns.to_string(),
                or_dash(opt(m.span.duration_ns)),
                m.bytes.to_string(),
                or_dash(fixed(m.gb_s(), 1)),
                dev.cell(m.device, m.gpu),
                m.stream.to_string(),
                or_dash(opt(m.api.clone())),
                match m.value {
                    Some(v) => format!("memset value {v}"),
                    None => "memset".into(),
                },
                opt(m.mem_kind.clone()),
            ]);
        }
        table(out, &head, &right, &rows);
    }
}

/// The copies by direction: counts, bytes, times, and the wall time they overlap kernels.
fn direction_summary(out: &mut String, t: &Trace) {
    // Per-direction copy summary.
    let copies = t.copy_summary();
    if !copies.is_empty() {
        out.push('\n');
        out.push_str(
            "memcpy by direction (ns; wall counts time that copies share once; in_kernels is \
             the part of wall while a kernel ran):\n",
        );
        let head = [
            "count",
            "timed",
            "bytes",
            "total",
            "median",
            "min",
            "max",
            "wall",
            "in_kernels",
            "direction",
        ];
        let mut right = [true; 10];
        right[9] = false;
        let rows: Vec<Vec<String>> = copies
            .iter()
            .map(|c| {
                vec![
                    c.count.to_string(),
                    c.timed.to_string(),
                    c.bytes.to_string(),
                    c.total_ns.to_string(),
                    ns_f(c.median_ns),
                    or_dash(opt(c.min_ns)),
                    or_dash(opt(c.max_ns)),
                    c.wall_ns.to_string(),
                    c.during_kernels_ns.to_string(),
                    if c.unified {
                        format!("{} (unified-memory migration)", c.direction)
                    } else {
                        c.direction.clone()
                    },
                ]
            })
            .collect();
        table(out, &head, &right, &rows);
    }
}

/// Each kernel's launches and times, with its rate at the median where `rates` allows.
fn kernel_summary(out: &mut String, t: &Trace, rates: &Rates) {
    let with_rate = rates.bytes_moved.is_some();
    let with_peak = with_rate && rates.peak_gbs.is_some();
    // Per-kernel summary.
    let summary = t.summary();
    if !summary.is_empty() {
        out.push('\n');
        let _ = match rates.bytes_moved {
            Some(b) => writeln!(
                out,
                "per-kernel summary (ns; GB/s at the median for {b} bytes moved per launch):"
            ),
            None => writeln!(out, "per-kernel summary (ns):"),
        };
        let mut head = vec!["launches", "timed", "min", "median", "max"];
        if with_rate {
            head.push("GB/s");
        }
        if with_peak {
            head.push("%peak");
        }
        head.push("name");
        let mut right = vec![true; head.len() - 1];
        right.push(false);
        let rows: Vec<Vec<String>> = summary
            .iter()
            .map(|s| {
                let gb_s = rates.gb_s_at(s.median_ns);
                let mut r = vec![
                    s.launches.to_string(),
                    s.timed.to_string(),
                    or_dash(opt(s.min_ns)),
                    ns_f(s.median_ns),
                    or_dash(opt(s.max_ns)),
                ];
                if with_rate {
                    r.push(or_dash(fixed(gb_s, 1)));
                }
                if with_peak {
                    r.push(or_dash(fixed(rates.pct_of_peak(gb_s), 1)));
                }
                r.push(s.name.clone());
                r
            })
            .collect();
        table(out, &head, &right, &rows);
    }
}

/// The findings and the notes.
fn findings(out: &mut String, t: &Trace) {
    out.push('\n');
    if t.findings.is_empty() {
        out.push_str("findings: none\n");
    } else {
        out.push_str("findings:\n");
        for f in &t.findings {
            let _ = writeln!(out, "  - {}", one_line(&f.text));
        }
    }
    if !t.notes.is_empty() {
        out.push_str("notes:\n");
        for n in &t.notes {
            let _ = writeln!(out, "  - {}", one_line(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("saxpy"), "saxpy");
        assert_eq!(
            csv_field("void reduce_v0<(int)256>(int *, int *)"),
            "\"void reduce_v0<(int)256>(int *, int *)\""
        );
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
        assert_eq!(csv_field("a\nb"), "\"a\nb\"");
    }

    #[test]
    fn one_line_escapes_every_control_character() {
        assert_eq!(one_line("saxpy(float *, int)"), "saxpy(float *, int)");
        assert_eq!(one_line("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(one_line("evil\u{1b}[2J"), "evil\\u{1b}[2J");
    }

    #[test]
    fn a_line_break_in_a_cell_does_not_split_the_row() {
        let mut out = String::new();
        table(
            &mut out,
            &["n", "name"],
            &[true, false],
            &[vec!["1".into(), "two\nlines".into()]],
        );
        assert_eq!(out, "  n  name\n  1  two\\nlines\n");
    }

    #[test]
    fn tables_align_and_do_not_pad_the_last_column() {
        let mut out = String::new();
        table(
            &mut out,
            &["n", "name"],
            &[true, false],
            &[
                vec!["1".into(), "a".into()],
                vec!["100".into(), "bb".into()],
            ],
        );
        assert_eq!(out, "    n  name\n    1  a\n  100  bb\n");
    }
}
