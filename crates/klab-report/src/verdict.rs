//! The correctness verdict of one kernel, gathered from every gate of the run (ladder,
//! the blocks of the rounds, sanitizer, receipt). The project's rule is that a
//! performance number is shown only beside its kernel's verdict: every table with a
//! number takes its verdict cell from here.

use klab_evidence::receipt::Receipt;
use klab_spec::Variant;

use crate::data::{RunData, SanitizedKernel};

/// Whether the evidence says the kernel is correct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Every gate that ran passed (or a known-broken kernel was rejected, as it must be).
    Good,
    /// A gate failed.
    Bad,
    /// No gate ran on it in this run.
    Unknown,
    /// Plain text (not a verdict).
    Plain,
}

/// A verdict: one line of text and its tone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// One line.
    pub text: String,
    /// Good, bad or unknown.
    pub tone: Tone,
}

fn known_broken(name: &str) -> bool {
    name.parse::<Variant>()
        .map(|v| v.known_broken())
        .unwrap_or(false)
}

/// The sanitizer's kernel record for a kernel name or entry (`transpose_naive` finds
/// `naive`).
pub fn sanitized<'a>(run: &'a RunData, name: &str) -> Option<&'a SanitizedKernel> {
    let sanitize = run.sanitize.as_ref().ok()?;
    sanitize.iter().find(|k| k.kernel == name).or_else(|| {
        name.strip_prefix("transpose_")
            .and_then(|short| sanitize.iter().find(|k| k.kernel == short))
    })
}

/// One word for the sanitizer's result on a kernel, and whether it passed.
fn sanitizer_piece(k: &SanitizedKernel) -> (String, bool) {
    let failing: Vec<&str> = k
        .runs
        .iter()
        .filter(|r| !r.report.passes())
        .map(|r| r.tool.as_str())
        .collect();
    if k.runs.is_empty() {
        ("sanitizer: no runs".into(), false)
    } else if failing.is_empty() {
        (format!("sanitizer clean ({} tools)", k.runs.len()), true)
    } else {
        (
            format!("sanitizer not clean: {}", failing.join(", ")),
            false,
        )
    }
}

/// The verdict for a kernel of the lab (ladder, the rounds' blocks, sanitizer).
pub fn for_variant(run: &RunData, variant: &str) -> Verdict {
    let broken = known_broken(variant);
    let mut pieces = Vec::new();
    let mut all_ok = true;
    if let Ok(sizes) = &run.ladder {
        let mut seen = 0;
        let mut passed = 0;
        let mut bad = Vec::new();
        for s in sizes {
            if let Some(r) = s
                .rows
                .as_ref()
                .ok()
                .and_then(|rows| rows.iter().find(|r| r.variant == variant))
            {
                seen += 1;
                if r.correct {
                    passed += 1;
                }
                if r.correct == broken {
                    bad.push(format!("N={}", s.n));
                }
            }
        }
        if seen > 0 {
            if broken {
                pieces.push(format!(
                    "ladder rejected it at {}/{seen} sizes",
                    seen - passed
                ));
            } else {
                pieces.push(format!("ladder {passed}/{seen} sizes"));
            }
            if !bad.is_empty() {
                all_ok = false;
                pieces.push(format!("wrong at {}", bad.join(" ")));
            }
        }
    }
    if let Ok(blocks) = &run.round_blocks {
        let mine: Vec<_> = blocks.iter().filter(|b| b.variant == variant).collect();
        if !mine.is_empty() {
            let ok = mine.iter().filter(|b| b.correct).count();
            all_ok &= (ok == mine.len()) != broken;
            pieces.push(format!("rounds {ok}/{} blocks correct", mine.len()));
        }
    }
    if let Some(k) = sanitized(run, variant) {
        let (text, clean) = sanitizer_piece(k);
        all_ok &= clean != broken;
        pieces.push(text);
    }
    finish(pieces, all_ok, broken)
}

/// The verdict for a receipt: its own correctness record and the sanitizer's, if the run
/// sanitized that kernel.
pub fn for_receipt(run: &RunData, r: &Receipt) -> Verdict {
    let c = &r.correctness;
    let mut all_ok = c.failures == 0;
    let mut pieces = vec![format!(
        "{} against {}{}",
        if c.failures == 0 {
            "0 failures".to_string()
        } else {
            format!("{} failures", c.failures)
        },
        c.reference,
        if c.checked_after_timing {
            ", rechecked after timing"
        } else {
            ""
        }
    )];
    if let Some(k) = sanitized(run, &r.source.entry) {
        let (text, clean) = sanitizer_piece(k);
        all_ok &= clean;
        pieces.push(text);
    }
    finish(pieces, all_ok, known_broken(&r.source.entry))
}

fn finish(pieces: Vec<String>, all_ok: bool, broken: bool) -> Verdict {
    if pieces.is_empty() {
        return Verdict {
            text: "no correctness evidence in this run".into(),
            tone: Tone::Unknown,
        };
    }
    let head = match (all_ok, broken) {
        (true, false) => "pass",
        (true, true) => "known broken, rejected",
        (false, true) => "KNOWN BROKEN BUT ACCEPTED",
        (false, false) => "FAIL",
    };
    Verdict {
        text: format!("{head}: {}", pieces.join("; ")),
        tone: if all_ok { Tone::Good } else { Tone::Bad },
    }
}
