//! The report parser: lines -> blocks -> findings, summary, notes -> outcome.
//!
//! Total by construction: it slices only at positions found in the same string (ASCII
//! lowercasing keeps byte offsets), parses numbers with `checked` arithmetic, and never
//! indexes past a length it has checked, so no input makes it panic.

use super::{Finding, FindingKind, Hazard, Outcome, Report, Severity, Tool};

/// The prefix of every line the tool writes (`--prefix`'s default).
const PREFIX: &str = "=========";

/// The lines of a report, whatever its line endings (`\n`, `\r\n`, or a lone `\r` as old
/// Mac tools and some log collectors write). A `\r\n` yields an extra empty line, which is
/// application output (no prefix) and so changes nothing.
pub(super) fn report_lines(output: &str) -> impl DoubleEndedIterator<Item = &str> {
    output.split(['\n', '\r'])
}

/// `text` without terminal colour and cursor codes (`ESC [ ... letter`), which a report
/// saved from a terminal that colours it carries around its prefix and text.
pub(super) fn without_ansi(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameters and intermediates up to the final byte (@ to ~).
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    std::borrow::Cow::Owned(out)
}

/// Parse a report. `output` is the captured text (stdout and stderr; application lines
/// without the prefix are ignored), `exit_status` the command's status when known, and
/// `error_exitcode` the `--error-exitcode` it ran with. See the module documentation of
/// [`super`] for the outcome precedence.
pub fn parse(tool: Tool, output: &str, exit_status: Option<i32>, error_exitcode: i32) -> Report {
    parse_with(tool, output, exit_status, error_exitcode, None)
}

/// [`parse`], with a tool failure known from outside the text (a timeout, a signal).
pub(crate) fn parse_with(
    tool: Tool,
    output: &str,
    exit_status: Option<i32>,
    error_exitcode: i32,
    external_failure: Option<String>,
) -> Report {
    let output = &*without_ansi(output);
    let st = program_lines_set_aside(output);
    let summary_mismatch = st.mismatch();
    let mut report = Report {
        tool,
        findings: st.findings,
        error_summary: st.error_summary,
        warnings: st.warnings,
        not_printed: st.not_printed,
        summary_line: if st.summary_lines.is_empty() {
            None
        } else {
            Some(st.summary_lines.join(" | "))
        },
        banner: st.banner,
        exit_status,
        app_failure: st.app_failure,
        tool_failure: st.tool_failure,
        summary_mismatch,
        notes: st.notes,
        outcome: Outcome::Clean,
    };
    report.outcome = decide(&report, output, error_exitcode, external_failure);
    report
}

/// Reads the blocks. A program may print a line that starts with the tool's prefix
/// (`========= Checking results`), even inside one of the tool's records; read as a header,
/// it would be a finding of no known kind, or cut a record in two. Such a line is taken for
/// the program's when the tool's own summary counts every finding without it: then the
/// report is read again without it (a record it cut is whole again) and a note says so.
/// Otherwise it stays a finding: a message this parser does not know may be an error.
fn program_lines_set_aside(output: &str) -> State {
    let first = State::read(&blocks(output, &[]));
    // ERROR SUMMARY counts every record the tool printed; RACECHECK SUMMARY only its
    // hazards, so it cannot say that a record of another kind is not the tool's.
    if first.unknown.is_empty() || first.error_count.is_none() {
        return first;
    }
    let mut again = State::read(&blocks(output, &first.unknown));
    if !again.unknown.is_empty() || again.mismatch().is_some() {
        return first;
    }
    again.notes.push(format!(
        "{} line(s) with the tool's prefix that the tool's summary does not count were read as the program's output, first: {}",
        first.unknown.len(),
        klab_core::text::first_line_clipped(first.unknown_first.as_deref().unwrap_or(""), 200)
    ));
    again
}

/// The precedence rule (documented in the parent module).
fn decide(
    r: &Report,
    output: &str,
    error_exitcode: i32,
    external_failure: Option<String>,
) -> Outcome {
    // Infos never fail: the tool itself grades them benign.
    let mut failing = r.findings.iter().filter(|f| f.severity.fails());
    // 1. Findings of a known kind (the kernel's own device exceptions among them).
    if failing.clone().any(|f| f.kind != FindingKind::Other) {
        return Outcome::FoundErrors;
    }
    // 2. The tool said it could not work, or the caller knows it did not finish.
    if let Some(reason) = external_failure.or_else(|| r.tool_failure.clone()) {
        return Outcome::ToolFailed { reason };
    }
    // 3. Unknown findings, or a count above zero.
    let count = r
        .error_summary
        .unwrap_or(0)
        .saturating_add(r.warnings.unwrap_or(0));
    if failing.next().is_some() || count > 0 {
        return Outcome::FoundErrors;
    }
    let status = match r.exit_status {
        Some(s) => format!("exit {s}"),
        None => "exit status unknown".to_string(),
    };
    if r.error_summary.is_none() {
        let reason = if r.banner {
            format!("incomplete report: COMPUTE-SANITIZER banner but no ERROR SUMMARY or RACECHECK SUMMARY line ({status})")
        } else {
            let mut s = format!(
                "the tool did not run: no COMPUTE-SANITIZER banner and no summary line ({status})"
            );
            if let Some(line) = telling_line(output) {
                s.push_str(&format!("; output: {line}"));
            }
            s
        };
        return Outcome::ToolFailed { reason };
    }
    // 4. The tool's own error status.
    if error_exitcode != 0 && r.exit_status == Some(error_exitcode) {
        return Outcome::FoundErrors;
    }
    // 5. The application failed.
    if r.app_failure.is_some() || matches!(r.exit_status, Some(s) if s != 0) {
        return Outcome::ApplicationFailed {
            status: r.exit_status,
        };
    }
    Outcome::Clean
}

/// For a tool that did not run: its first non-empty line (the tool prints its complaint
/// before any usage text), clipped.
fn telling_line(output: &str) -> Option<String> {
    let line = report_lines(output)
        .map(str::trim)
        .find(|l| !l.is_empty())?;
    Some(klab_core::text::first_line_clipped(line, 200))
}

/// One line of output.
enum Line<'a> {
    /// Application output (no prefix).
    App,
    /// The prefix alone: ends a block.
    Blank,
    /// Prefix, one space, text: starts a block.
    Header(&'a str),
    /// Prefix and indented text: continues a block.
    Cont(&'a str),
}

/// Where the tool's part of a line starts: the first `=========` that is neither part of a
/// longer rule of `=` nor preceded by one. Usually at the start, but an application that
/// printed without a final newline leaves its text in front of the tool's line.
pub(super) fn prefix_at(raw: &str) -> Option<usize> {
    let bytes = raw.as_bytes();
    (0..raw.len()).find(|&i| {
        bytes[i..].starts_with(PREFIX.as_bytes())
            && (i == 0 || bytes[i - 1] != b'=')
            && bytes.get(i + PREFIX.len()) != Some(&b'=')
    })
}

/// A line and the tool's part of it (from the prefix on; the whole line when there is none).
fn classify_line(raw: &str) -> (Line<'_>, &str) {
    let Some(at) = prefix_at(raw) else {
        return (Line::App, raw);
    };
    let tool_part = &raw[at..];
    let rest = &tool_part[PREFIX.len()..];
    let rest = rest.strip_prefix(' ').unwrap_or(rest);
    let line = if rest.trim().is_empty() {
        Line::Blank
    } else if rest.trim_end().ends_with("==") {
        // A rule of `=` around text (pytest's `===== 1 passed in 0.1s =====`) is the
        // application's; the tool ends no line with one.
        return (Line::App, raw);
    } else if rest.starts_with(char::is_whitespace) {
        Line::Cont(rest.trim())
    } else {
        Line::Header(rest.trim_end())
    };
    (line, tool_part)
}

/// A header and its continuation lines; `raw` lines are verbatim from the prefix on.
struct Block<'a> {
    header: &'a str,
    header_raw: &'a str,
    /// The header's line number in the report.
    line: usize,
    /// Begun by an indented line with no block open: the rest of a record that something
    /// cut (the tool's format, so never the program's line).
    headless: bool,
    /// (text without prefix and indentation, verbatim line)
    body: Vec<(&'a str, &'a str)>,
}

impl Block<'_> {
    fn raw(&self) -> String {
        let mut s = String::from(self.header_raw);
        for (_, raw) in &self.body {
            s.push('\n');
            s.push_str(raw);
        }
        s
    }

    /// Header and body without the prefix, for notes.
    fn text(&self) -> String {
        let mut s = String::from(self.header);
        for (t, _) in &self.body {
            s.push('\n');
            s.push_str("    ");
            s.push_str(t);
        }
        s
    }
}

/// Every block's header, without the prefix: the lines that say what a report is (its
/// banner, its summaries, its findings' kinds).
pub(super) fn headers(output: &str) -> Vec<&str> {
    blocks(output, &[])
        .into_iter()
        .map(|b| b.header.trim())
        .collect()
}

/// The blocks of a report; the lines numbered in `program` are the program's output: skipped,
/// and with them the continuation lines under them when no block was open (they headed
/// their own).
fn blocks<'a>(output: &'a str, program: &[usize]) -> Vec<Block<'a>> {
    let mut out = Vec::new();
    let mut cur: Option<Block<'_>> = None;
    let mut skipping = false;
    for (n, line) in report_lines(output).enumerate() {
        let (kind, raw) = classify_line(line);
        // `program` is in increasing order (the order blocks were read in).
        if program.binary_search(&n).is_ok() {
            skipping = cur.is_none();
            continue;
        }
        match kind {
            Line::App => {}
            Line::Blank => {
                skipping = false;
                out.extend(cur.take())
            }
            Line::Header(h) => {
                skipping = false;
                out.extend(cur.take());
                cur = Some(Block {
                    header: h,
                    header_raw: raw,
                    line: n,
                    headless: false,
                    body: Vec::new(),
                });
            }
            Line::Cont(_) if skipping => {}
            Line::Cont(t) => match cur.as_mut() {
                Some(b) => b.body.push((t, raw)),
                // A continuation with no header (output cut at the front): its own block.
                None => {
                    cur = Some(Block {
                        header: t,
                        header_raw: raw,
                        line: n,
                        headless: true,
                        body: Vec::new(),
                    })
                }
            },
        }
    }
    out.extend(cur);
    out
}

#[derive(Default)]
struct State {
    findings: Vec<Finding>,
    /// Finding blocks as the tool counts them (one per header; a race block holds several
    /// pairs): racecheck's by severity, every other block in `others`.
    races: Graded,
    others: u64,
    /// `ERROR SUMMARY: N errors`, summed, apart from racecheck's counts.
    error_count: Option<u64>,
    /// `RACECHECK SUMMARY: N hazards displayed`, summed.
    displayed: Option<u64>,
    error_summary: Option<u64>,
    warnings: Option<u64>,
    not_printed: Option<u64>,
    summary_lines: Vec<String>,
    banner: bool,
    app_failure: Option<String>,
    tool_failure: Option<String>,
    notes: Vec<String>,
    /// The line numbers of blocks no tool message matches (findings of kind Other), and the
    /// first one's header: perhaps the program's output (see [`program_lines_set_aside`]).
    unknown: Vec<usize>,
    unknown_first: Option<String>,
}

/// Messages that mean the tool could not run or could not check everything.
const TOOL_FAILURE: [&str; 31] = [
    "internal sanitizer error",
    // cuda-memcheck's: `Internal error (20)`, then `No CUDA-MEMCHECK results found`.
    "internal error",
    "results found",
    "doesn't exist",
    "not a valid executable",
    "sanitizer encountered an error",
    "device not supported",
    "not supported",
    "failed to initialize",
    "terminated before first instrumented",
    "no attachable process",
    "timed-out",
    "timed out",
    "couldn't find exit code",
    "unable to",
    "didn't track",
    "failed to launch",
    "failed to start",
    "failed to create",
    "failed to load",
    "could not launch",
    "cannot launch",
    "unrecognized option",
    "unrecognised option",
    "unknown option",
    "invalid option",
    "invalid value for",
    "no such file",
    "does not exist",
    "permission denied",
    "incompatible",
];

/// Warnings that the tool lost track of state, so that its results may be incomplete
/// (racecheck's `Detected overflow of tracked cuda::barrier structures. Results might be
/// incorrect`): not a finding about the kernel, and not a clean run either.
const INCOMPLETE: [&str; 2] = ["detected overflow of tracked", "results might be incorrect"];

/// Whether a header no tool message matches speaks of trouble: such a block is never taken
/// for the program's output ([`program_lines_set_aside`]).
fn alarming(l: &str) -> bool {
    const WORDS: [&str; 19] = [
        "error",
        "fail",
        "warning",
        "invalid",
        "violation",
        "illegal",
        "address",
        "range",
        "exception",
        "overflow",
        "misaligned",
        "race",
        "hazard",
        "leak",
        "uninit",
        "barrier",
        "assert",
        "fault",
        "abort",
    ];
    WORDS.iter().any(|w| l.contains(w))
}

/// Messages that mean the application failed.
const APP_FAILURE: [&str; 3] = [
    "target application returned",
    "process didn't terminate successfully",
    "process did not terminate successfully",
];

impl State {
    fn read(blocks: &[Block<'_>]) -> State {
        let mut st = State::default();
        let mut i = 0;
        while i < blocks.len() {
            let consumed = st.take(blocks, i);
            i += consumed.max(1);
        }
        st
    }

    /// Consume the block at `i` (and, for a wrapped racecheck summary, the next); returns
    /// how many blocks were used.
    fn take(&mut self, blocks: &[Block<'_>], i: usize) -> usize {
        let Some(b) = blocks.get(i) else { return 1 };
        let h = b.header.trim();
        let l = h.to_ascii_lowercase();

        if l == "compute-sanitizer" || l == "cuda-memcheck" {
            self.banner = true;
            return 1;
        }
        // cuda-memcheck 11.x's banner goes on: it is deprecated, use compute-sanitizer.
        if l.starts_with("this tool is deprecated")
            || l.starts_with("please use the compute-sanitizer")
        {
            self.notes.push(b.text());
            return 1;
        }
        if let Some(rest) = strip_prefix_ci(h, "ERROR SUMMARY:") {
            self.error_summary_line(h, rest, b);
            return 1;
        }
        if let Some(rest) = strip_prefix_ci(h, "RACECHECK SUMMARY:") {
            return self.racecheck_summary(h, rest, blocks.get(i + 1));
        }
        if l.starts_with("leak summary:") || l.starts_with("unused memory") {
            self.notes.push(b.text());
            return 1;
        }
        if l.contains("race reported between") {
            let (severity, pairs) = race_pairs(b);
            self.races.add(severity);
            self.findings.extend(pairs);
            return 1;
        }
        if l.contains("hazard detected") {
            let f = race_hazard(b);
            self.races.add(f.severity);
            self.findings.push(f);
            return 1;
        }
        if self.trace_or_incomplete(&l, h, b) {
            return 1;
        }
        // A known kind first; else a device exception; else whatever the header said.
        let kind = match (finding_kind(&l, b), hardware_exception(&l)) {
            (Some(k), _) if k != FindingKind::Other => Some(k),
            (_, Some(h)) => Some(h),
            (k, None) => k,
        };
        if let Some(kind) = kind {
            self.others += 1;
            self.findings.push(generic_finding(kind, b));
            return 1;
        }
        if !l.starts_with("program hit") && TOOL_FAILURE.iter().any(|m| l.contains(m)) {
            if self.tool_failure.is_none() {
                self.tool_failure = Some(klab_core::text::one_line(h));
            }
            self.notes.push(b.text());
            return 1;
        }
        if APP_FAILURE.iter().any(|m| l.contains(m)) {
            if self.app_failure.is_none() {
                self.app_failure = Some(klab_core::text::one_line(h));
            }
            self.notes.push(b.text());
            return 1;
        }
        // `Program hit ...` API errors and every block this parser does not know. One that
        // speaks of an error, a failure or a warning is never taken for the program's.
        if !l.starts_with("program hit") && !b.headless && !alarming(&l) {
            self.unknown.push(b.line);
            self.unknown_first.get_or_insert_with(|| h.to_string());
        }
        self.others += 1;
        self.findings.push(generic_finding(FindingKind::Other, b));
        1
    }

    /// A block that is no finding although its words sound like one: a sync trace line
    /// (`--racecheck-trace-sync yes` traces every barrier and syncwarp: facts, not errors),
    /// or a warning that results may be incomplete. Kept as a note; `true` when taken.
    fn trace_or_incomplete(&mut self, l: &str, h: &str, b: &Block<'_>) -> bool {
        let trace =
            l.contains(" called by threads starting at") || l.starts_with("sync mask of thread");
        let incomplete = INCOMPLETE.iter().any(|m| l.contains(m));
        if incomplete && self.tool_failure.is_none() {
            let line = klab_core::text::one_line(h);
            self.tool_failure = Some(format!("results may be incomplete: {line}"));
        }
        if trace || incomplete {
            self.notes.push(b.text());
        }
        trace || incomplete
    }

    /// The tool's own counts against the blocks parsed, in words when they disagree.
    /// `ERROR SUMMARY` counts every error it printed plus those it did not (`N errors were
    /// not printed`); `RACECHECK SUMMARY` counts the hazard blocks it displayed, and its
    /// `(E errors, W warnings)` grades them when every one was displayed. Infos are in
    /// neither count of compute-sanitizer's; cuda-memcheck (5.5, 6.x) counts them among the
    /// displayed hazards but not in the breakdown, so either total agrees.
    fn mismatch(&self) -> Option<String> {
        let mut said = Vec::new();
        if let Some(n) = self.error_count {
            let printed = n.saturating_sub(self.not_printed.unwrap_or(0));
            let parsed = self.others + self.races.error + self.races.warning;
            if printed != parsed {
                let hidden = match self.not_printed {
                    Some(h) => format!(" ({h} not printed)"),
                    None => String::new(),
                };
                said.push(format!(
                    "ERROR SUMMARY counts {n} errors{hidden} but the report itemises {parsed}"
                ));
            }
        }
        if let Some(d) = self.displayed {
            let graded = self.races.error + self.races.warning;
            let with_infos = graded.saturating_add(self.races.info);
            if d != graded && d != with_infos {
                let infos = match self.races.info {
                    0 => String::new(),
                    i => format!(" plus {i} infos"),
                };
                said.push(format!(
                    "RACECHECK SUMMARY displays {d} hazards but the report itemises {graded} ({} errors, {} warnings){infos}",
                    self.races.error, self.races.warning
                ));
            } else if let Some(e) = self.error_summary {
                let w = self.warnings.unwrap_or(0);
                // The breakdown covers every displayed hazard, or every one but the infos
                // where the displayed count includes them.
                let sum = e.saturating_add(w);
                let all_graded = sum == d || sum.saturating_add(self.races.info) == d;
                if all_graded && (e, w) != (self.races.error, self.races.warning) {
                    said.push(format!(
                        "RACECHECK SUMMARY grades {e} errors and {w} warnings but the report itemises {} and {}",
                        self.races.error, self.races.warning
                    ));
                }
            }
        }
        (!said.is_empty()).then(|| said.join("; "))
    }

    fn error_summary_line(&mut self, h: &str, rest: &str, b: &Block<'_>) {
        let rest = rest.trim();
        let (n, after) = leading_number(rest);
        let after_l = after.trim().to_ascii_lowercase();
        match n {
            Some(n) if after_l.contains("not printed") => {
                self.not_printed = Some(self.not_printed.unwrap_or(0).saturating_add(n));
            }
            Some(n) if after_l.starts_with("error") => {
                self.error_summary = Some(self.error_summary.unwrap_or(0).saturating_add(n));
                self.error_count = Some(self.error_count.unwrap_or(0).saturating_add(n));
                self.summary_lines.push(klab_core::text::one_line(h));
            }
            // A summary this parser cannot read: keep it, count nothing.
            _ => self.notes.push(b.text()),
        }
    }

    fn racecheck_summary(&mut self, h: &str, rest: &str, next: Option<&Block<'_>>) -> usize {
        let (displayed, after) = leading_number(rest.trim());
        if let Some(d) = displayed {
            self.displayed = Some(self.displayed.unwrap_or(0).saturating_add(d));
        }
        let mut line = klab_core::text::one_line(h);
        let mut counts = paren_counts(after);
        let mut used = 1;
        if counts.is_none() {
            // Some logs wrap `(E errors, W warnings)` onto the next prefixed line.
            if let Some(nb) = next {
                if nb.header.trim_start().starts_with('(') {
                    counts = paren_counts(nb.header);
                    if counts.is_some() {
                        line.push(' ');
                        line.push_str(nb.header.trim());
                        used = 2;
                    }
                }
            }
        }
        let (errors, warnings) = match counts {
            Some((e, w)) => (e, w),
            // No breakdown: count every displayed hazard as an error.
            None => (displayed, None),
        };
        match errors {
            Some(e) => {
                self.error_summary = Some(self.error_summary.unwrap_or(0).saturating_add(e));
                if let Some(w) = warnings {
                    self.warnings = Some(self.warnings.unwrap_or(0).saturating_add(w));
                }
                self.summary_lines.push(line);
            }
            None => self.notes.push(line),
        }
        used
    }
}

/// Racecheck blocks by severity.
#[derive(Default)]
struct Graded {
    error: u64,
    warning: u64,
    info: u64,
}

impl Graded {
    fn add(&mut self, s: Severity) {
        let n = match s {
            Severity::Error => &mut self.error,
            Severity::Warning => &mut self.warning,
            Severity::Info => &mut self.info,
        };
        *n += 1;
    }
}

/// A severity word as racecheck writes it (`Error`, `ERROR`, `Warning`, `WARN`, `Info`,
/// `INFO`).
fn severity_word(w: &str) -> Option<Severity> {
    match w.trim().to_ascii_lowercase().as_str() {
        "error" | "err" => Some(Severity::Error),
        "warning" | "warn" => Some(Severity::Warning),
        "info" | "information" => Some(Severity::Info),
        _ => None,
    }
}

/// A race block header's severity and the header without it: a leading `Error: ` /
/// `WARN:(reason) ` / `INFO:(reason) `, or a trailing `(Warning)` / `(Info)`. No grade is
/// an error (the tool's own default).
fn race_severity(header: &str) -> (Severity, &str) {
    let h = header.trim();
    if let Some((word, rest)) = h.split_once(':') {
        if let Some(s) = severity_word(word) {
            let rest = rest.trim_start();
            // `WARN:(Warp Level Programming) Potential ...`: the reason stays in the text.
            return (s, rest);
        }
    }
    if let Some(open) = h.strip_suffix(')').and_then(|t| t.rfind('(')) {
        if let Some(s) = severity_word(&h[open + 1..h.len() - 1]) {
            return (s, h[..open].trim_end());
        }
    }
    (Severity::Error, h)
}

/// `(E errors, W warnings)` anywhere in `s`: (errors, warnings), each when present; `None`
/// when no error count is found.
fn paren_counts(s: &str) -> Option<(Option<u64>, Option<u64>)> {
    let open = s.find('(')?;
    let inner = &s[open + 1..];
    let inner = inner.split(')').next().unwrap_or(inner);
    let mut errors = None;
    let mut warnings = None;
    for part in inner.split(',') {
        let (n, word) = leading_number(part.trim());
        let word = word.trim().to_ascii_lowercase();
        if word.starts_with("error") {
            errors = n;
        } else if word.starts_with("warning") {
            warnings = n;
        }
    }
    errors.map(|e| (Some(e), warnings))
}

/// Case-insensitive `strip_prefix` (ASCII).
fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix) {
        s.get(prefix.len()..)
    } else {
        None
    }
}

/// A number at the start of `s` (digits with `,` separators) and the rest.
fn leading_number(s: &str) -> (Option<u64>, &str) {
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == ','))
        .map_or(s.len(), |(i, _)| i);
    let digits: String = s[..end].chars().filter(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return (None, s);
    }
    (digits.parse::<u64>().ok(), &s[end..])
}

/// The number after `marker` (case-insensitive) in `s`.
fn number_after(s: &str, marker: &str) -> Option<u64> {
    let l = s.to_ascii_lowercase();
    let i = l.find(marker)?;
    leading_number(s.get(i + marker.len()..)?.trim_start()).0
}

/// The kind of a non-race block, from its header (and body for misalignment); `None` when
/// the header is not a known finding.
fn finding_kind(l: &str, b: &Block<'_>) -> Option<FindingKind> {
    if l.contains("barrier") || l.contains("syncwarp") || l.contains("divergent thread") {
        return Some(FindingKind::Barrier);
    }
    let misaligned = l.contains("misaligned")
        || b.body
            .iter()
            .any(|(t, _)| t.to_ascii_lowercase().contains("misaligned"));
    if l.starts_with("uninitialized") || l.contains("uninitialized __") {
        if misaligned {
            return Some(FindingKind::Misaligned);
        }
        let global = l.contains("global") || !l.contains("__");
        return Some(if global && l.contains(" read") {
            FindingKind::UninitializedGlobalRead
        } else {
            FindingKind::Other
        });
    }
    if l.starts_with("invalid") || l.starts_with("misaligned") {
        if misaligned {
            return Some(FindingKind::Misaligned);
        }
        let read = l.contains(" read");
        // An atomic is a read-modify-write: counted as the write it ends with (the raw text
        // keeps the word `atomic`).
        let write = l.contains(" write") || l.contains(" atomic");
        let kind = match (read, write) {
            (true, false) if l.contains("global") => FindingKind::InvalidGlobalRead,
            (false, true) if l.contains("global") => FindingKind::InvalidGlobalWrite,
            (true, false) if l.contains("shared") => FindingKind::InvalidSharedRead,
            (false, true) if l.contains("shared") => FindingKind::InvalidSharedWrite,
            (true, false) if l.contains("local") => FindingKind::InvalidLocalRead,
            (false, true) if l.contains("local") => FindingKind::InvalidLocalWrite,
            _ => FindingKind::Other,
        };
        return Some(kind);
    }
    if l.starts_with("leaked ") {
        return Some(FindingKind::Leak);
    }
    None
}

/// Errors the kernel's own code raised, by header (lowercase): memcheck's accesses of any
/// kind (`Invalid __global__ atomic ...`), the hardware exceptions (`Illegal Instruction`,
/// `Illegal Address`, `Warp Illegal Address`, `Misaligned ...`, `Invalid PC`, stack
/// overflows, each with or without `Warp` / `Lane` / `Device`) and device-side
/// `malloc`/`free` errors. These are real findings, whatever else the report says.
fn is_device_error(l: &str) -> bool {
    const HARDWARE: [&str; 10] = [
        "illegal instruction",
        "illegal address",
        "misaligned",
        "invalid pc",
        "invalid address space",
        "out-of-range address",
        "out-of-range shared or local address",
        "hardware stack overflow",
        "user stack overflow",
        "assert",
    ];
    let bare = ["warp ", "lane ", "device "]
        .iter()
        .find_map(|w| l.strip_prefix(w))
        .unwrap_or(l);
    l.starts_with("invalid __")
        || l.contains("malloc/free error")
        || HARDWARE.iter().any(|h| bare.starts_with(h))
}

/// The kind of a hardware exception or device-side allocation error; `None` for any other
/// header.
fn hardware_exception(l: &str) -> Option<FindingKind> {
    if !is_device_error(l) {
        return None;
    }
    Some(if l.contains("misaligned") {
        FindingKind::Misaligned
    } else {
        FindingKind::DeviceException
    })
}

/// Where an access happened.
#[derive(Default)]
struct Site {
    kernel: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

impl Site {
    fn location(&self) -> Option<String> {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => Some(format!("{f}:{l}")),
            _ => None,
        }
    }
}

/// `X in LOC` or `X` or `LOC`, where X is `kernel+0xOFF`, `0xPC` or a function, and LOC is
/// `file:line`, `file:line:function(args)` or `function(args)`.
fn parse_site(s: &str) -> Site {
    let s = s.trim();
    let (pc, loc) = match s.rfind(" in ") {
        Some(i) => (&s[..i], Some(s[i + 4..].trim())),
        None if split_file_line(s).is_some() => ("", Some(s)),
        None => (s, None),
    };
    let mut site = Site {
        kernel: function_from_pc(pc),
        ..Site::default()
    };
    if let Some(loc) = loc {
        match split_file_line(loc) {
            Some((file, line, rest)) => {
                site.file = Some(file.to_string());
                site.line = Some(line);
                if site.kernel.is_none() {
                    site.kernel = rest.and_then(strip_params);
                }
            }
            // `in test(int*, int*)` or `in k2`: a function, no source line.
            None if site.kernel.is_none() && (loc.contains('(') || is_identifier(loc)) => {
                site.kernel = strip_params(loc);
            }
            None => {}
        }
    }
    site
}

/// The first `:<digits>` followed by the end, `:` or whitespace: (file, line, what follows
/// the next `:`).
fn split_file_line(loc: &str) -> Option<(&str, u32, Option<&str>)> {
    for (i, _) in loc.match_indices(':') {
        let after = &loc[i + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            continue;
        }
        let next = after.as_bytes().get(digits).copied();
        let ends = match next {
            None => true,
            Some(c) => c == b':' || c.is_ascii_whitespace(),
        };
        let file = loc[..i].trim();
        if !ends || file.is_empty() {
            continue;
        }
        let Ok(line) = after[..digits].parse::<u32>() else {
            continue;
        };
        let rest = if next == Some(b':') {
            Some(after[digits + 1..].trim())
        } else {
            None
        };
        return Some((file, line, rest));
    }
    None
}

/// `kernel+0x140` -> `kernel`; a bare `0x...` address -> none.
fn function_from_pc(pc: &str) -> Option<String> {
    let pc = pc.trim();
    let name = match pc.rfind("+0x") {
        Some(i) => &pc[..i],
        None => pc,
    };
    let name = name.trim();
    if name.is_empty() || is_hex_address(name) {
        return None;
    }
    strip_params(name)
}

/// A bare (possibly qualified or templated) name: `k2`, `ns::k<32>`.
fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && !is_hex_address(s)
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '<' | '>' | '$' | ','))
}

fn is_hex_address(s: &str) -> bool {
    let s = s.trim();
    let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) else {
        return false;
    };
    !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit())
}

/// `name(args)` -> `name`, with nested parentheses in the arguments, and without the
/// `void ` return type demangled template kernels carry (`void k<int>(T1 *)` -> `k<int>`);
/// a name without a parameter list is returned as is.
fn strip_params(name: &str) -> Option<String> {
    let name = name.trim();
    let name = name.strip_prefix("void ").unwrap_or(name).trim();
    if name.is_empty() {
        return None;
    }
    if !name.ends_with(')') {
        return Some(name.to_string());
    }
    let mut depth = 0i64;
    for (i, c) in name.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    let head = name[..i].trim();
                    return if head.is_empty() {
                        Some(name.to_string())
                    } else {
                        Some(head.to_string())
                    };
                }
            }
            _ => {}
        }
    }
    Some(name.to_string())
}

/// `(x,y,z)` or `(x, y, z)` right after `marker` (case-insensitive) in `s`.
fn triple_after(s: &str, marker: &str) -> Option<[u32; 3]> {
    let l = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = l.get(from..).and_then(|t| t.find(marker)) {
        let start = from + pos + marker.len();
        if let Some(t) = triple_at(s.get(start..)?) {
            return Some(t);
        }
        from = start;
    }
    None
}

fn triple_at(s: &str) -> Option<[u32; 3]> {
    let s = s.trim_start().strip_prefix('(')?;
    // Only digits, commas and spaces come before the `)`: stopping at anything else keeps
    // each try short of the next marker, so a line of many `thread (` is read in linear time.
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == ',' || c.is_whitespace()))?;
    if !s[end..].starts_with(')') {
        return None;
    }
    let inner = &s[..end];
    let mut it = inner.split(',').map(|p| p.trim().parse::<u32>().ok());
    let t = [it.next()??, it.next()??, it.next()??];
    if it.next().is_some() {
        return None;
    }
    Some(t)
}

/// The first `0x...` token after `marker` (case-insensitive) in `s`.
fn hex_after(s: &str, marker: &str) -> Option<String> {
    let l = s.to_ascii_lowercase();
    let i = l.find(marker)? + marker.len();
    let rest = s.get(i..)?;
    let j = rest.to_ascii_lowercase().find("0x")?;
    let tok: String = rest[j + 2..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    if tok.is_empty() {
        None
    } else {
        Some(format!("0x{tok}"))
    }
}

/// A memcheck / initcheck / synccheck / unknown block.
fn generic_finding(kind: FindingKind, b: &Block<'_>) -> Finding {
    let mut f = Finding::new(kind, b.raw());
    let h = b.header;
    f.access_size = number_after(h, "of size ").and_then(|n| u32::try_from(n).ok());
    if kind == FindingKind::Leak {
        f.access_size = None;
        f.address = hex_after(h, " at ");
    }
    f.thread = triple_after(h, "thread ");
    f.block = triple_after(h, "block ");

    let mut site: Option<Site> = None;
    let mut device_kernel: Option<String> = None;
    for (t, _) in &b.body {
        let tl = t.to_ascii_lowercase();
        if tl.starts_with("host frame") || tl.starts_with("saved host backtrace") {
            continue;
        }
        if let Some(rest) = strip_prefix_ci(t, "at ") {
            if site.is_none() {
                site = Some(parse_site(rest));
            }
        } else if let Some(rest) = strip_prefix_ci(t, "device frame:") {
            // The outermost device frame (the last) is the kernel.
            if rest.contains("+0x") {
                let s = parse_site(rest);
                if s.kernel.is_some() {
                    device_kernel = s.kernel;
                }
            }
        } else if f.address.is_none()
            && (tl.starts_with("address ")
                || tl.starts_with("access to ")
                || tl.starts_with("access at "))
        {
            f.address = hex_after(t, " ");
        }
        if f.thread.is_none() {
            f.thread = triple_after(t, "thread ");
        }
        if f.block.is_none() {
            f.block = triple_after(t, "block ");
        }
    }
    if let Some(s) = site {
        f.location = s.location();
        f.file = s.file;
        f.line = s.line;
        f.kernel = s.kernel;
    }
    if device_kernel.is_some() {
        f.kernel = device_kernel;
    }
    f
}

/// One access of a race: `Write access at X in LOC [N hazards]`.
struct Access {
    /// Lowercase access type: `write`, `read`, `atomic`, ...
    op: String,
    site: Site,
    hazards: Option<u64>,
}

fn parse_access(s: &str) -> Option<Access> {
    let mut s = s.trim();
    if let Some(r) = strip_prefix_ci(s, "and ") {
        s = r.trim_start();
    }
    let (op, rest) = s.split_once(char::is_whitespace)?;
    let rest = strip_prefix_ci(rest.trim_start(), "access at ")
        .or_else(|| strip_prefix_ci(rest.trim_start(), "access "))?;
    let (rest, hazards) = strip_hazard_count(rest.trim());
    Some(Access {
        op: op.to_ascii_lowercase(),
        site: parse_site(rest),
        hazards,
    })
}

/// `... [280 hazards]` -> (`...`, 280).
fn strip_hazard_count(s: &str) -> (&str, Option<u64>) {
    let t = s.trim_end();
    if t.ends_with(']') {
        if let Some(open) = t.rfind('[') {
            let inner = &t[open + 1..t.len() - 1];
            let (n, word) = leading_number(inner.trim());
            if word.trim().to_ascii_lowercase().starts_with("hazard") {
                return (t[..open].trim_end(), n);
            }
        }
    }
    (s, None)
}

/// Split `A access at ... and B access at ...` at the ` and ` that starts the second access.
fn split_pair(s: &str) -> (&str, Option<&str>) {
    let l = s.to_ascii_lowercase();
    for (i, _) in l.match_indices(" and ") {
        let after = &l[i + 5..];
        if let Some((_, rest)) = after.split_once(' ') {
            if rest.starts_with("access") {
                return (&s[..i], Some(&s[i + 1..]));
            }
        }
    }
    (s, None)
}

fn hazard_of(first: &str, second: &str) -> Option<Hazard> {
    match (first, second) {
        ("write", "read") => Some(Hazard::Raw),
        ("read", "write") => Some(Hazard::War),
        ("write", "write") => Some(Hazard::Waw),
        _ => None,
    }
}

fn race_finding(first: &Access, second: Option<&Access>, raw: String) -> Finding {
    let mut f = Finding::new(FindingKind::Race, raw);
    f.kernel = first.site.kernel.clone();
    f.location = first.site.location();
    f.file = first.site.file.clone();
    f.line = first.site.line;
    f.count = first.hazards.unwrap_or(1);
    if let Some(s) = second {
        f.hazard = hazard_of(&first.op, &s.op);
        f.peer_location = s.site.location();
        if f.kernel.is_none() {
            f.kernel = s.site.kernel.clone();
        }
        f.count = s.hazards.or(first.hazards).unwrap_or(1);
    }
    f
}

/// `Race reported between A access ... and B access ... [N hazards]`: the block's
/// severity and one finding per pair, each with that severity.
fn race_pairs(b: &Block<'_>) -> (Severity, Vec<Finding>) {
    let (severity, h) = race_severity(b.header);
    let mut pairs = race_pairs_of(h, b);
    for f in &mut pairs {
        f.severity = severity;
    }
    (severity, pairs)
}

fn race_pairs_of(h: &str, b: &Block<'_>) -> Vec<Finding> {
    let l = h.to_ascii_lowercase();
    let Some(i) = l.find("race reported between") else {
        return vec![generic_finding(FindingKind::Race, b)];
    };
    let text = h[i + "race reported between".len()..].trim();
    let (first_text, inline_second) = split_pair(text);
    let Some(first) = parse_access(first_text) else {
        return vec![generic_finding(FindingKind::Race, b)];
    };
    let mut out = Vec::new();
    if let Some(second) = inline_second.and_then(parse_access) {
        out.push(race_finding(
            &first,
            Some(&second),
            b.header_raw.to_string(),
        ));
    }
    for (t, raw) in &b.body {
        if strip_prefix_ci(t, "and ").is_none() {
            continue;
        }
        if let Some(second) = parse_access(t) {
            let raw = format!("{}\n{}", b.header_raw, raw);
            out.push(race_finding(&first, Some(&second), raw));
        }
    }
    if out.is_empty() {
        out.push(race_finding(&first, None, b.raw()));
    }
    out
}

/// `Potential RAW hazard detected at __shared__ 0x0 in block (0, 0, 0) :` with the two
/// threads' accesses in the body (racecheck `--racecheck-report hazard`).
fn race_hazard(b: &Block<'_>) -> Finding {
    let mut f = Finding::new(FindingKind::Race, b.raw());
    f.severity = race_severity(b.header).0;
    let l = b.header.to_ascii_lowercase();
    f.hazard = if l.contains("raw hazard") {
        Some(Hazard::Raw)
    } else if l.contains("war hazard") {
        Some(Hazard::War)
    } else if l.contains("waw hazard") {
        Some(Hazard::Waw)
    } else {
        None
    };
    f.address = hex_after(b.header, "detected at");
    f.block = triple_after(b.header, "block ");
    let mut sites = Vec::new();
    for (t, _) in &b.body {
        let tl = t.to_ascii_lowercase();
        if !tl.contains("thread (") || tl.starts_with("host frame") {
            continue;
        }
        if f.thread.is_none() {
            f.thread = triple_after(t, "thread ");
        }
        if let Some(at) = tl.find(" at ") {
            sites.push(parse_site(&t[at + 4..]));
        }
    }
    let mut it = sites.into_iter();
    if let Some(first) = it.next() {
        f.location = first.location();
        f.file = first.file;
        f.line = first.line;
        f.kernel = first.kernel;
    }
    if let Some(second) = it.next() {
        f.peer_location = second.location();
        if f.kernel.is_none() {
            f.kernel = second.kernel;
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites() {
        let s = parse_site("read_uninit+0xc0 in default_program:41");
        assert_eq!(s.kernel.as_deref(), Some("read_uninit"));
        assert_eq!(s.location().as_deref(), Some("default_program:41"));
        let s = parse_site("0x00000c40 in /path/file.cu:73:kernel(float*, int)");
        assert_eq!(s.kernel.as_deref(), Some("kernel"));
        assert_eq!(s.location().as_deref(), Some("/path/file.cu:73"));
        let s = parse_site("0x00000020 in test(int*, int*)");
        assert_eq!(s.kernel.as_deref(), Some("test"));
        assert_eq!(s.location(), None);
        let s = parse_site("vector_add(float const *, float *, unsigned long)+0x130 in /k.cu:8");
        assert_eq!(s.kernel.as_deref(), Some("vector_add"));
        assert_eq!(s.line, Some(8));
        let s = parse_site("race.cu:21:race_kernel(float*)");
        assert_eq!(s.kernel.as_deref(), Some("race_kernel"));
        assert_eq!(s.location().as_deref(), Some("race.cu:21"));
        let s = parse_site(r"k+0x10 in C:\src\k.cu:25");
        assert_eq!(s.file.as_deref(), Some(r"C:\src\k.cu"));
        assert_eq!(s.line, Some(25));
        let s = parse_site("(anonymous namespace)::k(int)+0x8 in a.cu:3");
        assert_eq!(s.kernel.as_deref(), Some("(anonymous namespace)::k"));
    }

    #[test]
    fn triples_and_numbers() {
        assert_eq!(
            triple_after("by thread (67,0,0) in block (3906,0,0)", "block "),
            Some([3906, 0, 0])
        );
        assert_eq!(
            triple_after("Write Thread (31, 0, 0) at 0x1", "thread "),
            Some([31, 0, 0])
        );
        assert_eq!(
            triple_after("Divergent thread(s) in block", "thread "),
            None
        );
        assert_eq!(leading_number("4,092 bytes"), (Some(4092), " bytes"));
        assert_eq!(leading_number("x"), (None, "x"));
        assert_eq!(
            strip_hazard_count("a in b:27 [280 hazards]"),
            ("a in b:27", Some(280))
        );
        assert_eq!(
            paren_counts("(12 errors, 0 warnings)"),
            Some((Some(12), Some(0)))
        );
        assert_eq!(
            paren_counts("(1 error, 0 warnings)"),
            Some((Some(1), Some(0)))
        );
    }

    fn memcheck(text: &str) -> Report {
        parse(Tool::Memcheck, text, None, 99)
    }

    #[test]
    fn a_sync_trace_is_notes_not_barrier_errors() {
        let text = "\
========= COMPUTE-SANITIZER
========= Barrier called by threads starting at (32,0,0) in block (1,0,0), (active mask: 0xffffffff) at kernel()+0x2b0 in app.cu:36
========= Syncwarp called by threads starting at (0,0,0) in block (0,0,0), (active mask: 0xffff0000) at kernel()+0x3c0 in app.cu:42
=========     Sync mask of thread 16: 0xffff0000
=========     Sync mask of thread 17: 0xffff0000
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
";
        let r = parse(Tool::Racecheck, text, Some(0), 99);
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.outcome, Outcome::Clean);
        assert_eq!(r.notes.len(), 2);
        assert!(r.notes[1].contains("Sync mask of thread 17"));
    }

    #[test]
    fn a_barrier_tracking_overflow_is_incomplete_results_not_a_barrier_error() {
        let text = "\
========= COMPUTE-SANITIZER
========= Warning: Detected overflow of tracked cuda::barrier structures. Results might be incorrect. Try using --num-cuda-barriers to fix the issue
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
";
        let r = parse(Tool::Racecheck, text, Some(0), 99);
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        match r.outcome {
            Outcome::ToolFailed { reason } => {
                assert!(
                    reason.starts_with("results may be incomplete: Warning: Detected overflow"),
                    "{reason}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    /// Real findings beat an Internal Sanitizer Error elsewhere in the report.
    #[test]
    fn device_errors_outrank_a_tool_failure() {
        const ISE: &str = "========= Internal Sanitizer Error: The Sanitizer encountered an error while launching k2 and didn't track the launch. Errors might go undetected.\n";
        for (header, kind) in [
            (
                "Invalid __global__ atomic of size 4 bytes",
                FindingKind::InvalidGlobalWrite,
            ),
            (
                "Invalid __shared__ atomic of size 8 bytes",
                FindingKind::InvalidSharedWrite,
            ),
            ("Illegal Instruction", FindingKind::DeviceException),
            ("Illegal Address", FindingKind::DeviceException),
            ("Warp Illegal Address", FindingKind::DeviceException),
            ("Warp Misaligned Address", FindingKind::Misaligned),
            ("Invalid PC", FindingKind::DeviceException),
            ("Warp Out-of-range Address", FindingKind::DeviceException),
            (
                "Device Hardware Stack Overflow",
                FindingKind::DeviceException,
            ),
            (
                "Malloc/Free error encountered : Invalid pointer to free",
                FindingKind::DeviceException,
            ),
        ] {
            let text = format!(
                "========= COMPUTE-SANITIZER\n========= {header}\n=========     at k+0x70 in /x/a.cu:5\n=========     by thread (0,0,0) in block (0,0,0)\n=========\n{ISE}========= ERROR SUMMARY: 1 error\n"
            );
            let r = memcheck(&text);
            assert_eq!(r.findings.len(), 1, "{header}");
            assert_eq!(r.findings[0].kind, kind, "{header}");
            assert_eq!(r.outcome, Outcome::FoundErrors, "{header}");
        }
        // An API error alone does not: the tool failure explains it.
        let text = format!("========= COMPUTE-SANITIZER\n========= Program hit cudaErrorLaunchFailure (error 719) on CUDA API call to cudaDeviceSynchronize.\n{ISE}========= ERROR SUMMARY: 1 error\n");
        assert!(matches!(
            memcheck(&text).outcome,
            Outcome::ToolFailed { .. }
        ));
    }

    /// One header with 100,000 unclosed `thread (`: each try stops at the next letter.
    #[test]
    fn many_unclosed_triples_take_linear_time() {
        let line = format!(
            "Invalid __global__ read of size 4 bytes {}",
            "by thread (1".repeat(100_000)
        );
        let start = std::time::Instant::now();
        assert_eq!(triple_after(&line, "thread "), None);
        let text = format!("========= {line}\n========= ERROR SUMMARY: 1 error\n");
        assert_eq!(memcheck(&text).findings.len(), 1);
        let took = start.elapsed();
        assert!(took < std::time::Duration::from_secs(2), "{took:?}");
        assert_eq!(triple_at(" (1, 2 ,3) x"), Some([1, 2, 3]));
        assert_eq!(triple_at("(1, 2, 3x)"), None);
    }

    /// A program's own line with the tool's prefix, in a clean run: the tool counts no
    /// error, so the line is the program's, and the run is clean.
    #[test]
    fn a_program_line_with_the_prefix_in_a_clean_run_is_no_finding() {
        let text = "\
========= COMPUTE-SANITIZER
========= Checking results
all good
========= ERROR SUMMARY: 0 errors
";
        let r = parse(Tool::Memcheck, text, Some(0), 99);
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.outcome, Outcome::Clean);
        assert!(r.summary_mismatch.is_none());
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("read as the program's output, first: Checking results")),
            "{:?}",
            r.notes
        );
    }

    /// The same line printed inside a record: the record is whole again.
    #[test]
    fn a_program_line_inside_a_record_does_not_cut_it() {
        let text = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at k+0x70 in /x/a.cu:5
========= Checking results
=========     by thread (3,0,0) in block (2,0,0)
=========     Address 0x10 is out of bounds
=========
========= ERROR SUMMARY: 1 error
";
        let r = memcheck(text);
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        let f = &r.findings[0];
        assert_eq!(f.kind, FindingKind::InvalidGlobalRead);
        assert_eq!((f.thread, f.block), (Some([3, 0, 0]), Some([2, 0, 0])));
        assert_eq!(f.address.as_deref(), Some("0x10"));
        assert!(r.summary_mismatch.is_none(), "{:?}", r.summary_mismatch);
        assert_eq!(r.outcome, Outcome::FoundErrors);
    }

    /// A block of no known kind that the tool counts is a finding; so is one with no
    /// summary to say otherwise, and one whose words are alarming.
    #[test]
    fn an_unknown_block_the_tool_counts_stays_a_finding() {
        let counted = "\
========= COMPUTE-SANITIZER
========= Invalid __cluster__ something new
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
";
        let r = memcheck(counted);
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.outcome, Outcome::FoundErrors);
        let no_summary = "========= COMPUTE-SANITIZER\n========= Checking results\n";
        let r = parse(Tool::Memcheck, no_summary, Some(0), 99);
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.outcome, Outcome::FoundErrors);
        for line in [
            "Unexpected failure in the tool",
            "Something went wrong: error 5",
        ] {
            let text = format!(
                "========= COMPUTE-SANITIZER\n========= {line}\n========= ERROR SUMMARY: 0 errors\n"
            );
            let r = parse(Tool::Memcheck, &text, Some(0), 99);
            assert_eq!(r.findings.len(), 1, "{line}");
            assert_eq!(r.outcome, Outcome::FoundErrors, "{line}");
        }
    }

    /// Racecheck's summary counts only hazards: it cannot vouch that a record of another
    /// kind is not the tool's, so such a record stays a finding (a reviewer's log was called
    /// clean).
    #[test]
    fn racecheck_summaries_set_no_record_aside() {
        for header in [
            "Out-of-range Shared or Local Address",
            "Something new happened",
        ] {
            let text = format!(
                "========= COMPUTE-SANITIZER\n========= {header}\n=========     at k+0x70 in /x/a.cu:5\n=========     by thread (3,0,0) in block (2,0,0)\n=========\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
            );
            let r = parse(Tool::Racecheck, &text, Some(0), 99);
            assert_eq!(r.findings.len(), 1, "{header}");
            assert_eq!(r.outcome, Outcome::FoundErrors, "{header}");
        }
        let r = memcheck("========= Warp Out-of-range Shared or Local Address\n=========     at k+0x70 in /x/a.cu:5\n=========\n========= ERROR SUMMARY: 1 error\n");
        assert_eq!(r.findings[0].kind, FindingKind::DeviceException);
    }

    /// A bare prefix line from the program inside a record cuts it; the rest of the record
    /// (indented, no header) is the tool's and is never set aside.
    #[test]
    fn the_rest_of_a_cut_record_is_never_the_programs() {
        let text = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at k+0x70 in /x/a.cu:5
=========
=========     by thread (3,0,0) in block (2,0,0)
=========     Address 0x10 is out of bounds
=========
========= ERROR SUMMARY: 1 error
";
        let r = memcheck(text);
        assert_eq!(r.outcome, Outcome::FoundErrors);
        assert!(
            r.findings.iter().any(|f| f.raw.contains("Address 0x10")),
            "{:?}",
            r.findings
        );
        assert!(r.summary_mismatch.is_some());
        assert!(
            !r.notes.iter().any(|n| n.contains("program's output")),
            "{:?}",
            r.notes
        );
    }
}
