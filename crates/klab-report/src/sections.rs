//! What the report says, section by section: the [`Document`] built from a [`RunData`].
//! Title and facts, steps, correctness, performance, "why it is that fast", artifacts.
//! Every table that shows a performance number has the kernel's correctness verdict in the
//! same row (see [`crate::verdict`]).

use klab_core::samples::{Isolation, RoundOrder};
use klab_evidence::row::TransposeRow;
use klab_model::bound::{Agreement, KernelProfile};
use klab_spec::Variant;

use crate::data::{
    ArtifactStatus, Part, RoundsSummary, RunData, SanitizedKernel, SanitizerOutcome, SanitizerRun,
};
use crate::document::{Block, Cell, Document, Section, Table, Tone};
use crate::format;
use crate::metrics::{self, BandwidthRow, Peaks};
use crate::verdict;

/// Build the document.
pub fn build(run: &RunData) -> Document {
    let peaks = metrics::peaks(run);
    let rows = metrics::bandwidth_rows(run);
    Document {
        title: format!("klab report: {}", run.name),
        facts: facts(run, &peaks),
        sections: vec![
            steps(run),
            correctness(run),
            performance(run, &peaks, &rows),
            why(run),
            artifacts(run),
        ],
    }
}

fn known_broken(name: &str) -> bool {
    name.parse::<Variant>()
        .map(|v| v.known_broken())
        .unwrap_or(false)
}

fn facts(run: &RunData, peaks: &Peaks) -> Vec<(String, String)> {
    let lab = &run.lab;
    let mut f = vec![("Run folder".to_string(), run.name.clone())];
    f.push((
        "Device".into(),
        match &run.device {
            Ok(d) => format!(
                "{} ({}), compute capability {}.{}, {} SMs, L2 {:.1} MiB, memory {} MHz x {}-bit, driver {}",
                d.name,
                d.uuid,
                d.compute_capability.0,
                d.compute_capability.1,
                d.sm_count,
                d.l2_bytes as f64 / 1_048_576.0,
                d.memory_clock_khz / 1000,
                d.bus_width_bits,
                d.driver_version
            ),
            Err(n) => n.0.clone(),
        },
    ));
    f.push((
        "Date (UTC)".into(),
        format!(
            "{} to {}",
            lab.started_utc.as_deref().unwrap_or("unknown"),
            lab.finished_utc.as_deref().unwrap_or("unknown")
        ),
    ));
    f.push((
        "klab version".into(),
        lab.klab_version.clone().unwrap_or_else(|| "unknown".into()),
    ));
    f.push((
        "Command".into(),
        if lab.command.is_empty() {
            "unknown".into()
        } else {
            lab.command.join(" ")
        },
    ));
    f.push((
        "Theoretical peak".into(),
        match peaks.theoretical_gb_s {
            Some(p) => format!("{} GB/s ({})", format::gb_s(p), peaks.theoretical_basis),
            None => peaks.theoretical_basis.clone(),
        },
    ));
    f.push((
        "Copy-kernel reference".into(),
        match peaks.ceiling_gb_s {
            Some(c) => format!("{} GB/s ({})", format::gb_s(c), peaks.ceiling_basis),
            None => peaks.ceiling_basis.clone(),
        },
    ));
    f.push((
        "FP32 peak".into(),
        match (&peaks.fp32_gflops, &run.device) {
            (Ok(g), Ok(d)) => format!(
                "{} GFLOP/s ({} SMs x {} FP32 lanes x 2 x {} MHz maximum SM clock)",
                format::grouped(*g),
                d.sm_count,
                klab_core::device::fp32_lanes_per_sm(d.compute_capability).unwrap_or(0),
                d.sm_clock_khz.unwrap_or(0) / 1000
            ),
            (Ok(g), Err(_)) => format!("{} GFLOP/s", format::grouped(*g)),
            (Err(why), _) => format!("unknown: {why}"),
        },
    ));
    f
}

fn steps(run: &RunData) -> Section {
    let mut t = Table::new(&["step", "status", "detail", "artifacts"]);
    for s in &run.lab.steps {
        let tone = match s.status.as_str() {
            "ran" => Tone::Good,
            "failed" | "error" => Tone::Bad,
            _ => Tone::Unknown,
        };
        t.rows.push(vec![
            Cell::plain(&s.name),
            Cell::toned(&s.status, tone),
            Cell::plain(&s.detail),
            Cell::plain(s.artifacts.len().to_string()),
        ]);
    }
    let blocks = if t.rows.is_empty() {
        vec![Block::Note("lab.json records no steps".into())]
    } else {
        vec![Block::Table(t)]
    };
    Section {
        id: "steps".into(),
        title: "Steps".into(),
        blocks,
    }
}

fn ladder_cell(r: Option<&TransposeRow>) -> Cell {
    match r {
        None => Cell::toned("not run", Tone::Unknown),
        Some(r) => match (known_broken(&r.variant), r.correct) {
            (false, true) => Cell::toned("pass", Tone::Good),
            (false, false) => Cell::toned(format!("FAIL: {} mismatches", r.mismatches), Tone::Bad),
            (true, false) => Cell::toned("rejected", Tone::Good),
            (true, true) => Cell::toned("ACCEPTED (known broken)", Tone::Bad),
        },
    }
}

fn correctness(run: &RunData) -> Section {
    let mut blocks = vec![Block::Heading("Boundary ladder (check-N.csv)".into())];
    match &run.ladder {
        Err(n) => blocks.push(Block::Note(n.0.clone())),
        Ok(sizes) => {
            blocks.push(Block::Paragraph(
                "Every variant at sizes no block divides, plus block-exact contrasts, checked bitwise against the CPU oracle on poisoned outputs. A known-broken variant must be rejected at every size.".into(),
            ));
            let mut names: Vec<String> = Vec::new();
            for s in sizes {
                for r in s.rows.iter().flatten() {
                    if !names.contains(&r.variant) {
                        names.push(r.variant.clone());
                    }
                }
            }
            let mut columns = vec!["variant".to_string()];
            columns.extend(sizes.iter().map(|s| format!("N={}", s.n)));
            let mut t = Table {
                columns,
                rows: Vec::new(),
            };
            for v in &names {
                let mut row = vec![Cell::plain(v)];
                for s in sizes {
                    row.push(match &s.rows {
                        Ok(rows) => ladder_cell(rows.iter().find(|r| &r.variant == v)),
                        Err(_) => Cell::toned("unreadable", Tone::Unknown),
                    });
                }
                t.rows.push(row);
            }
            blocks.push(Block::Table(t));
            for s in sizes {
                if let Err(n) = &s.rows {
                    blocks.push(Block::Note(n.0.clone()));
                }
            }
        }
    }
    blocks.push(Block::Heading(
        "Compute Sanitizer (sanitize/sanitize.json)".into(),
    ));
    match &run.sanitize {
        Err(n) => blocks.push(Block::Note(n.0.clone())),
        Ok(kernels) => blocks.extend(sanitizer_table(kernels)),
    }
    Section {
        id: "correctness".into(),
        title: "Correctness".into(),
        blocks,
    }
}

fn first_finding(r: &SanitizerRun) -> Option<String> {
    let f = r.report.findings.first()?;
    let mut s = String::new();
    if let Some(h) = &f.hazard {
        s.push_str(&format!("{h} "));
    }
    s.push_str(f.kind.label());
    if let Some(l) = &f.location {
        s.push_str(&format!(" at {l}"));
    }
    if let Some(p) = &f.peer_location {
        s.push_str(&format!(" with {p}"));
    }
    if f.count > 1 {
        s.push_str(&format!(" ({} hazards)", f.count));
    }
    Some(s)
}

fn sanitizer_cell(r: &SanitizerRun, broken: bool) -> Cell {
    if r.timed_out {
        return Cell::toned("timed out", Tone::Bad);
    }
    match &r.report.outcome {
        SanitizerOutcome::Clean => Cell::toned("clean", Tone::Good),
        SanitizerOutcome::FoundErrors => {
            let mut text = format!(
                "found errors: {}",
                r.report
                    .error_summary
                    .map(|e| format!("{e} reported"))
                    .unwrap_or_else(|| format!("{} findings", r.report.findings.len()))
            );
            if let Some(f) = first_finding(r) {
                text.push_str(&format!("; first: {f}"));
            }
            Cell::toned(text, if broken { Tone::Good } else { Tone::Bad })
        }
        SanitizerOutcome::ApplicationFailed { status } => Cell::toned(
            match status.or(r.exit_status) {
                Some(s) => format!("application failed (exit {s})"),
                None => "application failed".into(),
            },
            if broken { Tone::Plain } else { Tone::Bad },
        ),
        SanitizerOutcome::ToolFailed { reason } => {
            Cell::toned(format!("tool failed: {reason}"), Tone::Bad)
        }
    }
}

fn sanitizer_table(kernels: &[SanitizedKernel]) -> Vec<Block> {
    let mut tools = Vec::new();
    for k in kernels {
        for r in &k.runs {
            if !tools.contains(&r.tool) {
                tools.push(r.tool);
            }
        }
    }
    let mut columns = vec!["kernel".to_string(), "sizes".to_string()];
    columns.extend(tools.iter().map(|t| t.to_string()));
    columns.push("verdict".into());
    let mut t = Table {
        columns,
        rows: Vec::new(),
    };
    for k in kernels {
        let broken = k.known_broken.is_some();
        let mut row = vec![
            Cell::plain(if broken {
                format!("{} (known broken)", k.kernel)
            } else {
                k.kernel.clone()
            }),
            Cell::plain(
                k.sizes
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ];
        for tool in &tools {
            row.push(match k.runs.iter().find(|r| r.tool == *tool) {
                Some(r) => sanitizer_cell(r, broken),
                None => Cell::toned("not run", Tone::Unknown),
            });
        }
        let ok = k.verdict.starts_with("CLEAN") || (broken && k.verdict.starts_with("REJECTED"));
        row.push(Cell::toned(
            &k.verdict,
            if ok { Tone::Good } else { Tone::Bad },
        ));
        t.rows.push(row);
    }
    vec![
        Block::Paragraph(
            "Each tool is a separate run gated on its exit code; a clean run covers the sizes it ran.".into(),
        ),
        Block::Table(t),
    ]
}

fn verdict_cell(v: verdict::Verdict) -> Cell {
    Cell::toned(v.text, v.tone)
}

fn num(v: Option<f64>, f: impl Fn(f64) -> String) -> Cell {
    Cell::mono(format::opt(v, f))
}

fn range(lo: Option<f64>, hi: Option<f64>, f: impl Fn(f64) -> String) -> Cell {
    match (lo, hi) {
        (Some(a), Some(b)) => Cell::mono(format!("{} - {}", f(a), f(b))),
        _ => Cell::mono("n/a"),
    }
}

fn performance(run: &RunData, peaks: &Peaks, rows: &Part<Vec<BandwidthRow>>) -> Section {
    let mut blocks = vec![Block::Paragraph(format!(
        "Effective bandwidth is useful bytes over time (a transpose of N x N float32 reads and writes 2 x N^2 x 4 bytes). It is set against the copy-kernel reference, {}, and the theoretical peak, {}. Quantiles: {}.",
        match peaks.ceiling_gb_s {
            Some(c) => format!("{} GB/s ({})", format::gb_s(c), peaks.ceiling_basis),
            None => peaks.ceiling_basis.clone(),
        },
        match peaks.theoretical_gb_s {
            Some(p) => format!("{} GB/s ({})", format::gb_s(p), peaks.theoretical_basis),
            None => peaks.theoretical_basis.clone(),
        },
        klab_core::stats::QUANTILE_RULE
    ))];
    blocks.push(Block::Heading(
        "Alternating rounds (rounds/summary.json)".into(),
    ));
    match &run.rounds {
        Err(n) => blocks.push(Block::Note(n.0.clone())),
        Ok(s) => blocks.extend(rounds(run, s, rows)),
    }
    if let Err(n) = &run.round_blocks {
        blocks.push(Block::Note(n.0.clone()));
    }
    // All four plots together (two per row on a wide page); counters.svg belongs to the
    // "why" section's table and is referenced from there.
    blocks.push(Block::Plots(vec![
        "bandwidth.svg".into(),
        "rounds.svg".into(),
        "roofline.svg".into(),
        "counters.svg".into(),
    ]));
    blocks.push(Block::Heading(
        "Single-process benchmark (benchmark.csv)".into(),
    ));
    match &run.benchmark {
        Err(n) => blocks.push(Block::Note(n.0.clone())),
        Ok(bench) => blocks.push(Block::Table(benchmark_table(bench, peaks))),
    }
    blocks.push(Block::Heading(
        "Ceilings and the library baseline (ceilings/summary.json)".into(),
    ));
    match &run.ceilings {
        Err(n) => blocks.push(Block::Note(n.0.clone())),
        Ok(s) => blocks.extend(ceilings(s)),
    }
    blocks.push(Block::Heading("Receipts".into()));
    match &run.receipts {
        Err(n) => blocks.push(Block::Note(n.0.clone())),
        Ok(entries) => blocks.extend(receipts(run, entries)),
    }
    Section {
        id: "performance".into(),
        title: "Performance".into(),
        blocks,
    }
}

fn benchmark_table(rows: &[TransposeRow], peaks: &Peaks) -> Table {
    // Shares of this table's own copy row: the same process and the same batch timer (the
    // rounds' ceiling is per-launch timed, which a small kernel's launch cost lowers).
    let copy_gb_s = rows
        .iter()
        .find(|r| r.variant == "copy" && r.correct)
        .and_then(|r| r.timing.map(|t| t.effective_gb_s));
    let mut t = Table::new(&[
        "variant",
        "correctness",
        "average ms",
        "GB/s",
        "% of copy kernel",
        "% of peak",
    ]);
    for r in rows {
        let v = match (known_broken(&r.variant), r.correct) {
            (false, true) => Cell::toned("pass: validated before and after timing", Tone::Good),
            (false, false) => Cell::toned(
                format!("FAIL: {} mismatches; not timed", r.mismatches),
                Tone::Bad,
            ),
            (true, false) => Cell::toned(
                format!(
                    "known broken, rejected: {} mismatches; not timed",
                    format::grouped(r.mismatches as f64)
                ),
                Tone::Good,
            ),
            (true, true) => Cell::toned("ACCEPTED (known broken)", Tone::Bad),
        };
        let g = r.timing.map(|t| t.effective_gb_s);
        t.rows.push(vec![
            Cell::plain(&r.variant),
            v,
            num(r.timing.map(|t| t.average_ms), format::ms),
            num(g, format::gb_s),
            num(metrics::pct(g, copy_gb_s), format::pct),
            num(metrics::pct(g, peaks.theoretical_gb_s), format::pct),
        ]);
    }
    t
}

/// A round's order as a summary records it.
fn round_order(s: &RoundsSummary) -> String {
    match (s.order.is_empty(), s.round_order) {
        (true, _) => "unknown".to_string(),
        (false, Some(RoundOrder::Alternating)) => {
            format!("{}, reversed every other round", s.order.join(" "))
        }
        (false, _) => s.order.join(" "),
    }
}

/// The copy ceilings, cuBLAS and klab's best transpose in the same alternating rounds.
fn ceilings(s: &RoundsSummary) -> Vec<Block> {
    let mut blocks = vec![Block::Paragraph(format!(
        "klab rounds at N = {}, {} rounds, order {}: every kernel's median effective rate, its share of the fastest copy in the same rounds (the ceiling) and of the theoretical peak, and the round-level ratio against {} (above 1: faster) with its 95% interval over rounds.",
        s.n.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into()),
        s.rounds.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into()),
        round_order(s),
        s.baseline
    ))];
    if s.rates.is_empty() {
        blocks.push(Block::Note(metrics::no_rates("ceilings/summary.json").0));
        return blocks;
    }
    // The manifests' predictions, when any kernel declares one, beside the outcome.
    let predicted = s.rates.iter().any(|r| r.prediction.is_some());
    let mut header = vec![
        "kernel",
        "correctness",
        "median GB/s",
        "% of ceiling",
        "% of peak",
        "ratio vs baseline",
    ];
    if predicted {
        header.push("prediction (manifest, written before measuring)");
    }
    let mut t = Table::new(&header);
    for r in &s.rates {
        let correctness = match (r.blocks_passed, r.blocks) {
            (Some(p), Some(b)) if p == b && b > 0 => {
                Cell::toned(format!("pass: {p}/{b} blocks validated"), Tone::Good)
            }
            (Some(p), Some(b)) => Cell::toned(format!("FAIL: {p}/{b} blocks passed"), Tone::Bad),
            _ => Cell::toned("unknown", Tone::Unknown),
        };
        let ratio = if r.kernel == s.baseline {
            Cell::plain("baseline")
        } else {
            match s.analyses.iter().find(|a| a.candidate == r.kernel) {
                Some(a) => Cell::mono(match a.analysis.interval {
                    Some((lo, hi)) => format!(
                        "{} [{}, {}]",
                        format::ratio(a.analysis.ratio),
                        format::ratio(lo),
                        format::ratio(hi)
                    ),
                    None => format!("{} (no interval)", format::ratio(a.analysis.ratio)),
                }),
                None => Cell::plain("-"),
            }
        };
        t.rows.push(vec![
            Cell::plain(&r.kernel),
            correctness,
            num(r.median_gb_s, format::gb_s),
            num(r.pct_of_ceiling, format::pct),
            num(r.pct_of_peak, format::pct),
            ratio,
        ]);
        if predicted {
            let cell = match &r.prediction {
                Some(p) => Cell::plain(p),
                None => Cell::plain("-"),
            };
            t.rows.last_mut().expect("row just pushed").push(cell);
        }
    }
    blocks.push(Block::Table(t));
    blocks
}

fn rates_table(run: &RunData, rows: &[BandwidthRow]) -> Table {
    let mut t = Table::new(&[
        "kernel",
        "correctness",
        "blocks",
        "median us",
        "median GB/s",
        "p10 - p90 GB/s over blocks",
        "% of ceiling",
        "% of peak",
    ]);
    for r in rows {
        let rate = &r.rate;
        t.rows.push(vec![
            Cell::plain(&rate.kernel),
            verdict_cell(verdict::for_variant(run, &rate.kernel)),
            Cell::mono(match (rate.blocks, rate.blocks_passed) {
                (Some(b), Some(p)) if p >= b => b.to_string(),
                (Some(b), Some(p)) => format!("{b} ({} failed)", b - p),
                (Some(b), None) => b.to_string(),
                (None, _) => "n/a".into(),
            }),
            num(rate.median_us, format::us),
            num(rate.median_gb_s, format::gb_s),
            range(r.low_gb_s, r.high_gb_s, format::gb_s),
            num(rate.pct_of_ceiling, format::pct),
            num(rate.pct_of_peak, format::pct),
        ]);
    }
    t
}

/// The alternating rounds: how they ran, every kernel's rate beside its verdict, and the
/// round-level ratios against the baseline.
fn rounds(run: &RunData, s: &RoundsSummary, rows: &Part<Vec<BandwidthRow>>) -> Vec<Block> {
    let cfg = s.config.as_ref();
    let get = |k: &str| {
        cfg.and_then(|c| c.get(k))
            .map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_else(|| "unknown".into())
    };
    let warmup = cfg
        .and_then(|c| c.get("warmup"))
        .map(|w| {
            format!(
                "{} launches ({})",
                w.get("launches").map(|l| l.to_string()).unwrap_or_default(),
                w.get("policy").and_then(|p| p.as_str()).unwrap_or("")
            )
        })
        .unwrap_or_else(|| "unknown".into());
    let flagged = run
        .round_blocks
        .as_ref()
        .map(|b| {
            let f: Vec<String> = b
                .iter()
                .filter(|b| !b.flags.is_empty())
                .map(|b| format!("round {} {} ({})", b.round, b.variant, b.flags))
                .collect();
            if f.is_empty() {
                "none".to_string()
            } else {
                f.join("; ")
            }
        })
        .unwrap_or_else(|_| "unknown (rounds/rounds.csv missing)".into());
    let mut blocks = vec![Block::Paragraph(format!(
        "klab rounds at N = {}, {} rounds, {} blocks, {}; order within a round: {}. Timer {}, regime {}, {} samples per block, warmup {}. A kernel's median is over every sample of its blocks, its range p10 - p90 of its block medians; the ceiling is the fastest copy kernel in the same rounds. Ratio = baseline median / candidate median per round (above 1: the candidate is faster); the interval is the 95% order-statistic interval of the median round ratio. Flagged blocks (GPU state changed): {}.{}",
        s.n.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into()),
        s.rounds.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into()),
        s.blocks.map(|n| n.to_string()).unwrap_or_else(|| "unknown".into()),
        s.isolation.unwrap_or(Isolation::Block).describe(),
        round_order(s),
        get("timer"),
        get("regime"),
        get("samples"),
        warmup,
        flagged,
        s.reruns
            .iter()
            .map(|r| format!(" {}.", r.describe()))
            .collect::<String>()
    ))];
    match rows {
        Err(n) => blocks.push(Block::Note(n.0.clone())),
        Ok(rows) => blocks.push(Block::Table(rates_table(run, rows))),
    }
    if s.analyses.is_empty() {
        blocks.push(Block::Note(
            "no ratios: klab rounds reports none when a correctness gate failed in a block (see rounds/summary.txt)".into(),
        ));
        return blocks;
    }
    let mut t = Table::new(&[
        "candidate",
        "correctness",
        "baseline",
        "ratio",
        "95% interval",
        "verdict",
        "per-round ratios",
        "reversals",
    ]);
    for a in &s.analyses {
        let x = &a.analysis;
        t.rows.push(vec![
            Cell::plain(&a.candidate),
            verdict_cell(verdict::for_variant(run, &a.candidate)),
            Cell::plain(&a.baseline),
            Cell::mono(format::ratio(x.ratio)),
            Cell::mono(match x.interval {
                Some((lo, hi)) => format!(
                    "{} - {} ({:.0}%)",
                    format::ratio(lo),
                    format::ratio(hi),
                    100.0 * x.confidence
                ),
                None => format!(
                    "n/a (fewer than {} rounds)",
                    klab_core::stats::min_rounds(x.confidence)
                ),
            }),
            Cell::plain(format!("{:?}", x.verdict).to_lowercase()),
            Cell::mono(
                x.round_ratios
                    .iter()
                    .map(|r| format!("{r:.3}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            Cell::plain(if x.reversals.is_empty() {
                "none".to_string()
            } else {
                x.reversals
                    .iter()
                    .map(|r| format!("round {r}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
        ]);
    }
    blocks.push(Block::Table(t));
    for a in &s.analyses {
        if let Some(n) = &a.analysis.note {
            blocks.push(Block::Note(format!("{}: {n}", a.candidate)));
        }
    }
    blocks
}

fn receipts(run: &RunData, entries: &[crate::data::ReceiptEntry]) -> Vec<Block> {
    let mut t = Table::new(&[
        "receipt",
        "kernel",
        "correctness",
        "method",
        "median us",
        "p10 - p90 us",
        "GB/s",
        "% of peak",
        "FLOP per byte",
        "klab compare",
    ]);
    let mut notes = Vec::new();
    for e in entries {
        match &e.receipt {
            Err(n) => notes.push(Block::Note(n.0.clone())),
            Ok(r) => {
                let w = &r.workload;
                // Whether the receipt stands as compare would take it; why not, below.
                let stands = match &e.refused {
                    None => "takes it".to_string(),
                    Some(why) => {
                        notes.push(Block::Note(why.clone()));
                        "refuses it (below)".to_string()
                    }
                };
                t.rows.push(vec![
                    Cell::mono(&e.path),
                    Cell::plain(format!("{} ({})", r.source.entry, w.shape())),
                    verdict_cell(verdict::for_receipt(run, r)),
                    Cell::plain(format!(
                        "{}, {}, {} samples x {} round(s)",
                        r.measurement.timer.spec(),
                        w.cache_regime.name(),
                        r.measurement.samples_per_round,
                        r.measurement.rounds
                    )),
                    Cell::mono(format::us(r.result.median_us)),
                    Cell::mono(format!(
                        "{} - {}",
                        format::us(r.result.p10_us),
                        format::us(r.result.p90_us)
                    )),
                    Cell::mono(format::gb_s(r.result.useful_gb_s)),
                    Cell::mono(format::pct(r.result.pct_of_peak)),
                    Cell::mono(
                        if w.flops_per_launch == 0 || w.useful_bytes_per_launch == 0 {
                            "0".to_string()
                        } else {
                            format!(
                                "{:.4}",
                                w.flops_per_launch as f64 / w.useful_bytes_per_launch as f64
                            )
                        },
                    ),
                    Cell::plain(stands),
                ]);
            }
        }
    }
    let mut blocks = vec![Block::Paragraph(
        "Timing-engine receipts (CUDA events in the kernel's stream; times are per launch), each checked here as klab compare checks one side (every file it hashes read again, its figures recomputed): the last column says whether compare takes it as evidence of a speedup.".into(),
    )];
    if !t.rows.is_empty() {
        blocks.push(Block::Table(t));
    }
    blocks.extend(notes);
    blocks
}

fn why(run: &RunData) -> Section {
    // The prediction comes first: it was written before anything was measured, and on a
    // machine without a GPU it is what the run has to say.
    let mut blocks = vec![Block::Heading(
        "The address model's prediction (model.txt)".into(),
    )];
    blocks.push(match &run.model {
        Ok(text) => Block::Preformatted(text.clone()),
        Err(n) => Block::Note(n.0.clone()),
    });
    blocks.push(Block::Heading("Nsight Compute (profile/)".into()));
    match &run.profile {
        Err(n) => blocks.push(Block::Note(n.0.clone())),
        Ok(p) => {
            blocks.push(Block::Paragraph(format!(
                "Nsight Compute {} on {}; clock control: {}; cache control: {}; sections: {}. Counters come from one profiled launch per kernel; profiler durations are never quoted as benchmark results.",
                p.ncu_version.as_deref().unwrap_or("(version unknown)"),
                p.device.as_deref().unwrap_or("an unrecorded device"),
                p.clock_control,
                p.cache_control,
                if p.sections.is_empty() { "none recorded".to_string() } else { p.sections.join(", ") }
            )));
            blocks.push(Block::Paragraph(
                "Each kernel's bound statement, line by line, then its predicted-vs-measured table (plotted in counters.svg under Performance). A measurement that disagrees with the address model beyond the stated tolerance is flagged.".into(),
            ));
            for k in &p.kernels {
                blocks.extend(kernel_profile(k));
            }
            for r in &p.rejected {
                blocks.push(Block::Note(format!(
                    "{}: {} (log {})",
                    r.kernel, r.reason, r.log
                )));
            }
        }
    }
    blocks.push(Block::Heading("Resources (resources.csv)".into()));
    match &run.resources {
        Err(n) => blocks.push(Block::Note(n.0.clone())),
        Ok(rows) => {
            let mut t = Table::new(&[
                "kernel",
                "registers",
                "static shared B",
                "local B",
                "source",
            ]);
            for r in rows {
                t.rows.push(vec![
                    Cell::plain(&r.kernel),
                    Cell::mono(&r.registers),
                    Cell::mono(&r.static_shared_bytes),
                    Cell::mono(&r.local_bytes),
                    Cell::plain(&r.source),
                ]);
            }
            blocks.push(Block::Table(t));
        }
    }
    Section {
        id: "why".into(),
        title: "Why it is that fast".into(),
        blocks,
    }
}

fn kernel_profile(k: &KernelProfile) -> Vec<Block> {
    let mut blocks = vec![Block::Heading(format!(
        "{} ({}), {}",
        k.kernel,
        k.entry,
        k.shape.clone().unwrap_or_else(|| format!("N = {}", k.n))
    ))];
    // The statement as klab-model renders it, one `Label: value` line each.
    let lines: Vec<(String, String)> = k
        .bound
        .render()
        .lines()
        .map(|l| match l.split_once(": ") {
            Some((a, b)) => (a.to_string(), b.to_string()),
            None => (String::new(), l.to_string()),
        })
        .collect();
    blocks.push(Block::Statement(lines));
    let mut t = Table::new(&["quantity", "predicted", "measured", "verdict", "tolerance"]);
    for r in &k.counters {
        let tone = match r.agreement {
            Agreement::Agrees => Tone::Good,
            Agreement::Disagrees => Tone::Bad,
            _ => Tone::Unknown,
        };
        t.rows.push(vec![
            Cell::plain(&r.quantity),
            num(r.predicted, format::counter),
            num(r.measured, format::counter),
            Cell::toned(r.agreement.label(), tone),
            Cell::plain(&r.tolerance),
        ]);
    }
    blocks.push(Block::Table(t));
    if !k.absent_metrics.is_empty() {
        blocks.push(Block::Note(format!(
            "{}: metrics asked for but absent from the Nsight Compute report: {}",
            k.kernel,
            k.absent_metrics.join(", ")
        )));
    }
    let disagreements: Vec<&str> = k
        .counters
        .iter()
        .filter(|r| r.agreement == Agreement::Disagrees)
        .map(|r| r.quantity.as_str())
        .collect();
    if !disagreements.is_empty() {
        blocks.push(Block::Note(format!(
            "{}: the measurement DISAGREES with the address model for {}",
            k.kernel,
            disagreements.join(", ")
        )));
    }
    blocks
}

fn artifacts(run: &RunData) -> Section {
    let a = &run.artifacts;
    let count = |f: fn(&ArtifactStatus) -> bool| a.iter().filter(|x| f(&x.status)).count();
    let mut blocks = vec![Block::Paragraph(format!(
        "lab.json lists {} artifacts; the report re-hashed each file: {} verified, {} missing, {} changed since the run, {} not checked.",
        a.len(),
        count(|s| *s == ArtifactStatus::Verified),
        count(|s| *s == ArtifactStatus::Missing),
        count(|s| matches!(s, ArtifactStatus::Mismatch { .. })),
        count(|s| matches!(
            s,
            ArtifactStatus::Unreadable(_) | ArtifactStatus::Refused(_) | ArtifactStatus::NoHash
        )),
    ))];
    let mut t = Table::new(&["path", "bytes", "sha256 (lab.json)", "re-check"]);
    for x in a {
        let status = match &x.status {
            ArtifactStatus::Verified => Cell::toned("verified", Tone::Good),
            ArtifactStatus::Mismatch { actual } => {
                Cell::toned(format!("CHANGED: sha256 now {actual}"), Tone::Bad)
            }
            ArtifactStatus::Missing => Cell::toned("missing", Tone::Bad),
            ArtifactStatus::Unreadable(e) => Cell::toned(format!("unreadable: {e}"), Tone::Bad),
            ArtifactStatus::Refused(e) => Cell::toned(format!("not opened: {e}"), Tone::Bad),
            ArtifactStatus::NoHash => Cell::toned("no hash recorded", Tone::Unknown),
        };
        t.rows.push(vec![
            Cell::mono(&x.path),
            Cell::mono(x.bytes.map(|b| b.to_string()).unwrap_or_default()),
            Cell::mono(x.sha256.clone().unwrap_or_default()),
            status,
        ]);
    }
    if t.rows.is_empty() {
        blocks.push(Block::Note("lab.json lists no artifacts".into()));
    } else {
        blocks.push(Block::Table(t));
    }
    Section {
        id: "artifacts".into(),
        title: "Artifacts".into(),
        blocks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary's round order reads as its first round's blocks, and says when every other
    /// round ran them reversed; one written before the field was there ran mirrored rounds.
    #[test]
    fn a_round_order_says_when_rounds_alternate() {
        let json = r#"{"baseline": "a", "order": ["a", "b"]}"#;
        let mut s: RoundsSummary = serde_json::from_str(json).unwrap();
        assert_eq!(round_order(&s), "a b");
        s.round_order = Some(RoundOrder::Alternating);
        assert_eq!(round_order(&s), "a b, reversed every other round");
        s.order.clear();
        assert_eq!(round_order(&s), "unknown");
    }
}
