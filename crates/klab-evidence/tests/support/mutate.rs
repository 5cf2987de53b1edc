//! Shared by the property suites (`klab-evidence/tests/fuzz.rs`, `klab-tools/tests/fuzz.rs`):
//! the case count and a byte-level mutator of real inputs, so each parser meets the
//! files it is written for with lines deleted, duplicated, swapped and truncated, bytes
//! flipped, and tokens known to break parsers (huge and negative numbers, NaN, NUL, a BOM,
//! unbalanced brackets, a CRLF) dropped in.

#![allow(dead_code)]

use proptest::prelude::*;
use std::time::{Duration, Instant};

/// Cases per property: `KLAB_FUZZ_CASES`, else a count that keeps each suite to seconds
/// on CI's two cores. Raise it locally to search longer.
pub fn cases() -> u32 {
    std::env::var("KLAB_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

pub fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        // A failing case is worth shrinking, but not for minutes.
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

/// The longest one parse may take on any case: a parser is linear in its input (at most a
/// few hundred KiB here); seconds mean a loop that is not.
pub const BOUND: Duration = Duration::from_secs(5);

/// Run `f`, failing the case if it takes longer than [`BOUND`].
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    prop_assert!(took < BOUND, "{what} took {took:?}");
    Ok(out)
}

const TOKENS: &[&str] = &[
    "\0",
    "\u{feff}",
    "\r\n",
    "\n",
    "-1",
    "0",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "1e309",
    "-0",
    "NaN",
    "inf",
    "\"",
    ",",
    ",,",
    "[",
    "]",
    "{",
    "}",
    "(",
    ")",
    "=",
    ":",
    "..",
    "/",
    "\u{e9}",
    "\u{1F600}",
    "n",
    "ceil_div(n, 0)",
    "null",
    "true",
    "\"\"",
];

/// One edit; positions are taken modulo the input's length (in lines or bytes).
#[derive(Debug, Clone)]
pub enum Edit {
    FlipByte(usize, u8),
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Insert(usize, &'static str),
    Truncate(usize),
}

pub fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::FlipByte(p, b)),
        any::<usize>().prop_map(Edit::DeleteLine),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        (any::<usize>(), proptest::sample::select(TOKENS)).prop_map(|(p, t)| Edit::Insert(p, t)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

/// Up to `max` edits.
pub fn edits(max: usize) -> impl Strategy<Value = Vec<Edit>> {
    proptest::collection::vec(edit(), 1..=max)
}

fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// `input` with `edits` applied in order.
pub fn apply(input: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = input.to_vec();
    for e in edits {
        match *e {
            Edit::FlipByte(p, b) if !out.is_empty() => {
                let i = p % out.len();
                out[i] ^= b.max(1);
            }
            Edit::DeleteLine(p) | Edit::DuplicateLine(p) if !out.is_empty() => {
                let mut ls = lines(&out);
                let i = p % ls.len();
                match e {
                    Edit::DeleteLine(_) => drop(ls.remove(i)),
                    _ => ls.insert(i, ls[i].clone()),
                }
                out = ls.concat();
            }
            Edit::SwapLines(a, b) if !out.is_empty() => {
                let mut ls = lines(&out);
                let n = ls.len();
                ls.swap(a % n, b % n);
                out = ls.concat();
            }
            Edit::Insert(p, t) => {
                let i = p % (out.len() + 1);
                out.splice(i..i, t.bytes());
            }
            Edit::Truncate(p) => out.truncate(p % (out.len() + 1)),
            _ => {}
        }
    }
    out
}

/// [`apply`], as text (lossily, for parsers that take `&str`).
pub fn apply_text(input: &str, edits: &[Edit]) -> String {
    String::from_utf8_lossy(&apply(input.as_bytes(), edits)).into_owned()
}
