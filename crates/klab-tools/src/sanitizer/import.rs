//! Reports klab did not run: read a saved text report (capped, regular files only, through
//! [`klab_core::artifact`]) and give it to the same [`parse`] a run uses, so an imported
//! report gets the same findings and outcome.
//!
//! # Which tool wrote it
//!
//! A run knows its tool; an import is told it (`--tool`), and a report read under another
//! tool's name is a wrong verdict (a clean memcheck report passed off as racecheck's says
//! nothing about races). So the report is asked too, through the signs that name its tool
//! unambiguously (`Sign`): a `$ compute-sanitizer ...` command line saved at the top,
//! racecheck's summary and race blocks, memcheck's invalid accesses and leaks, initcheck's
//! uninitialised reads and unused memory, synccheck's barrier errors, and, under a
//! `COMPUTE-SANITIZER` banner, an `ERROR SUMMARY` without a `RACECHECK SUMMARY` (that
//! racecheck writes the second in place of the first). Each sign allows a set of tools;
//! the report is from a tool every sign allows. When that excludes the given tool the
//! import is refused ([`ImportError::OtherTool`]); a report without signs (a clean report
//! that says only `ERROR SUMMARY: 0 errors` under the old `CUDA-MEMCHECK` banner, or a tool
//! that could not run) is accepted under any tool, and so is one whose signs contradict
//! each other (two reports in one file): klab refuses only what the report itself says.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use klab_core::artifact::{read_regular, FileError, Input};

use super::parse::{headers, parse, prefix_at, report_lines, without_ansi};
use super::{FindingKind, Options, Report, Tool};

/// What klab reads, said when a file is something else.
pub const EXPECTED_FORMAT: &str = "a Compute Sanitizer text report (lines starting `=========`, as `compute-sanitizer --tool TOOL PROGRAM > report.txt 2>&1` writes it)";

/// Why a report was not imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{} is not a report klab reads{}: expected {EXPECTED_FORMAT}", .path.display(), .looks_like.map(|l| format!(" (it looks like {l})")).unwrap_or_default())]
    NotAReport {
        path: PathBuf,
        looks_like: Option<&'static str>,
    },
    #[error("{} was written by {}, not {given} ({because}){}", .path.display(), tool_list(.written_by), match .written_by.as_slice() { [one] => format!(": import it with --tool {one}"), _ => String::new() })]
    OtherTool {
        path: PathBuf,
        /// The tool the import was told.
        given: Tool,
        /// The tools the report's signs allow (one or more; never `given`).
        written_by: Vec<Tool>,
        /// The first sign that excludes `given`, in words.
        because: String,
    },
}

/// Parse the report at `path` as `tool`'s. The exit status is taken from a last line
/// `exit=N` (what `klab sanitize` and the H200 captures save after the report) and the
/// `--error-exitcode` from a `$ compute-sanitizer ...` command line above it; without
/// them the status is unknown and klab's default error exit code is assumed. A report
/// that is not valid UTF-8 is read lossily, as a run's captured output is; one in UTF-16
/// with a byte-order mark (what PowerShell 5's `>` writes) is decoded, with a note.
pub fn import(tool: Tool, path: &Path) -> Result<Report, ImportError> {
    let bytes = read_regular(path, Input::SANITIZER_REPORT)?;
    let (text, utf16) = decode(&bytes);
    let text = without_ansi(&text);
    // No line carries the prefix: another format, or not a report at all.
    if !report_lines(&text).any(|l| prefix_at(l).is_some()) {
        return Err(ImportError::NotAReport {
            path: path.to_path_buf(),
            looks_like: looks_like(&bytes, &text),
        });
    }
    let exit = report_lines(&text)
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .and_then(|l| l.strip_prefix("exit="))
        .and_then(|s| s.trim().parse::<i32>().ok());
    let error_exitcode = error_exitcode(&text).unwrap_or(Options::default().error_exitcode);
    let mut report = parse(tool, &text, exit, error_exitcode);
    if let Some(encoding) = utf16 {
        report.notes.push(format!(
            "read as {encoding}: the file starts with its byte-order mark"
        ));
    }
    let signs = signs(&text, &report);
    let written_by: Vec<Tool> = Tool::ALL
        .into_iter()
        .filter(|t| signs.iter().all(|s| s.tools.contains(t)))
        .collect();
    // No tool fits every sign: the report contradicts itself, and says nothing for sure.
    if written_by.is_empty() || written_by.contains(&tool) {
        return Ok(report);
    }
    let because = signs
        .into_iter()
        .find(|s| !s.tools.contains(&tool))
        .map(|s| s.what)
        .unwrap_or_default();
    Err(ImportError::OtherTool {
        path: path.to_path_buf(),
        given: tool,
        written_by,
        because,
    })
}

/// Something in a report that says which tools can have written it.
struct Sign {
    tools: &'static [Tool],
    /// What the report has, for the refusal: `its RACECHECK SUMMARY line`.
    what: String,
}

const ONLY_MEMCHECK: &[Tool] = &[Tool::Memcheck];
const ONLY_RACECHECK: &[Tool] = &[Tool::Racecheck];
const ONLY_SYNCCHECK: &[Tool] = &[Tool::Synccheck];
const ONLY_INITCHECK: &[Tool] = &[Tool::Initcheck];
const NOT_RACECHECK: &[Tool] = &[Tool::Memcheck, Tool::Synccheck, Tool::Initcheck];

fn only(tool: Tool) -> &'static [Tool] {
    match tool {
        Tool::Memcheck => ONLY_MEMCHECK,
        Tool::Racecheck => ONLY_RACECHECK,
        Tool::Synccheck => ONLY_SYNCCHECK,
        Tool::Initcheck => ONLY_INITCHECK,
    }
}

/// The signs of the tool that wrote a report: `text` as saved, `report` its parse (whose
/// findings do not depend on the tool it was parsed as).
fn signs(text: &str, report: &Report) -> Vec<Sign> {
    let mut signs = Vec::new();
    if let Some((tool, explicit)) = command_tool(text) {
        signs.push(Sign {
            tools: only(tool),
            what: if explicit {
                format!("its command line says --tool {tool}")
            } else {
                "its command line has no --tool, and memcheck is the default".to_string()
            },
        });
    }
    let headers = headers(text);
    let has = |prefix: &str| {
        headers.iter().any(|h| {
            h.get(..prefix.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
        })
    };
    let racecheck_summary = has("RACECHECK SUMMARY:");
    if racecheck_summary {
        signs.push(Sign {
            tools: ONLY_RACECHECK,
            what: "its RACECHECK SUMMARY line".to_string(),
        });
    }
    // Compute Sanitizer's racecheck ends with its RACECHECK SUMMARY and no ERROR SUMMARY
    // (every racecheck report captured on the H200); cuda-memcheck's may differ, so only
    // under the newer banner.
    let compute_sanitizer = headers
        .iter()
        .any(|h| h.eq_ignore_ascii_case("COMPUTE-SANITIZER"));
    if compute_sanitizer && !racecheck_summary && has("ERROR SUMMARY:") {
        signs.push(Sign {
            tools: NOT_RACECHECK,
            what: "it has an ERROR SUMMARY line and no RACECHECK SUMMARY line, which Compute Sanitizer's racecheck writes in its place".to_string(),
        });
    }
    if has("LEAK SUMMARY:") {
        signs.push(Sign {
            tools: ONLY_MEMCHECK,
            what: "its LEAK SUMMARY line".to_string(),
        });
    }
    if has("Unused memory") {
        signs.push(Sign {
            tools: ONLY_INITCHECK,
            what: "its unused memory report".to_string(),
        });
    }
    // One sign per kind of finding, in report order.
    let mut seen: Vec<FindingKind> = Vec::new();
    for f in &report.findings {
        if seen.contains(&f.kind) {
            continue;
        }
        seen.push(f.kind);
        let tools = match f.kind {
            FindingKind::InvalidGlobalRead
            | FindingKind::InvalidGlobalWrite
            | FindingKind::InvalidSharedRead
            | FindingKind::InvalidSharedWrite
            | FindingKind::InvalidLocalRead
            | FindingKind::InvalidLocalWrite
            | FindingKind::Leak => ONLY_MEMCHECK,
            FindingKind::Race => ONLY_RACECHECK,
            FindingKind::Barrier => ONLY_SYNCCHECK,
            FindingKind::UninitializedGlobalRead => ONLY_INITCHECK,
            // Misaligned accesses are memcheck's and initcheck's; device exceptions, API
            // errors and unknown blocks any tool's.
            FindingKind::Misaligned | FindingKind::DeviceException | FindingKind::Other => continue,
        };
        signs.push(Sign {
            tools,
            what: format!("its {} findings", f.kind),
        });
    }
    signs
}

/// The tool a `$ compute-sanitizer ...` or `$ cuda-memcheck ...` command line on the first
/// line ran, and whether it said so: its `--tool`, else memcheck (both binaries' default).
/// `None` for another first line, or a tool klab does not know. The options end at the
/// first word that is neither an option nor the word after one (the program), so an
/// application's own `--tool` is not read.
fn command_tool(text: &str) -> Option<(Tool, bool)> {
    let line = report_lines(text).next()?.strip_prefix("$ ")?;
    let mut words = line
        .split_whitespace()
        // `VAR=value` assignments before the command.
        .skip_while(|w| !w.starts_with('-') && w.contains('='));
    let binary = words
        .next()?
        .rsplit(['/', '\\'])
        .next()?
        .to_ascii_lowercase();
    let binary = binary
        .strip_suffix(".exe")
        .or_else(|| binary.strip_suffix(".bat"))
        .unwrap_or(&binary);
    if binary != "compute-sanitizer" && binary != "cuda-memcheck" {
        return None;
    }
    let mut after_option = false;
    while let Some(w) = words.next() {
        if let Some(v) = w.strip_prefix("--tool=") {
            return Some((v.parse().ok()?, true));
        }
        if w == "--tool" {
            return Some((words.next()?.parse().ok()?, true));
        }
        if w.starts_with('-') {
            after_option = !w.contains('=');
        } else if after_option {
            after_option = false;
        } else {
            break;
        }
    }
    Some((Tool::Memcheck, false))
}

/// `memcheck`, `memcheck or initcheck`, `memcheck, synccheck or initcheck`.
fn tool_list(tools: &[Tool]) -> String {
    match tools {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => {
            let rest: Vec<&str> = rest.iter().map(|t| t.as_str()).collect();
            format!("{} or {last}", rest.join(", "))
        }
    }
}

/// `--error-exitcode N` on a `$ ` command line at the top of a saved report.
fn error_exitcode(text: &str) -> Option<i32> {
    let first = report_lines(text).next()?.strip_prefix("$ ")?;
    let mut words = first.split_whitespace();
    words.find(|w| *w == "--error-exitcode")?;
    words.next()?.parse().ok()
}

/// The text of a report, and the UTF-16 encoding it was decoded from, if any: UTF-16 with a
/// byte-order mark decoded (lossily), a UTF-8 byte-order mark dropped, anything else read
/// as UTF-8, lossily.
fn decode(bytes: &[u8]) -> (Cow<'_, str>, Option<&'static str>) {
    let units = |be: bool| {
        bytes[2..].chunks_exact(2).map(move |p| {
            let pair = [p[0], p[1]];
            if be {
                u16::from_be_bytes(pair)
            } else {
                u16::from_le_bytes(pair)
            }
        })
    };
    let utf16 = |be: bool| {
        char::decode_utf16(units(be))
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect::<String>()
            .into()
    };
    match bytes {
        [0xFF, 0xFE, ..] => (utf16(false), Some("UTF-16LE")),
        [0xFE, 0xFF, ..] => (utf16(true), Some("UTF-16BE")),
        [0xEF, 0xBB, 0xBF, rest @ ..] => (String::from_utf8_lossy(rest), None),
        _ => (String::from_utf8_lossy(bytes), None),
    }
}

/// A guess at a file's format, for the refusal.
fn looks_like(bytes: &[u8], text: &str) -> Option<&'static str> {
    let t = text.trim_start();
    // ASCII text in UTF-16 without a byte-order mark: every other byte is NUL.
    let sample = &bytes[..bytes.len().min(64)];
    let nul = |start: usize| sample.iter().skip(start).step_by(2).all(|&b| b == 0);
    if sample.len() >= 4 && (nul(0) || nul(1)) {
        return Some("UTF-16 text without a byte-order mark: save the report as UTF-8 (PowerShell: `| Out-File -Encoding utf8`)");
    }
    if t.starts_with("<?xml") || t.starts_with('<') {
        Some("XML (compute-sanitizer --xml): save the text report instead")
    } else if t.starts_with('{') || t.starts_with('[') {
        Some("JSON")
    } else if t.is_empty() {
        Some("an empty file")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "$ compute-sanitizer --tool memcheck ./app\r\n========= COMPUTE-SANITIZER\r\n========= ERROR SUMMARY: 0 errors\r\nexit=0\r\n";

    fn utf16(text: &str, bom: bool, be: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let units = std::iter::once(0xFEFF)
            .filter(|_| bom)
            .chain(text.encode_utf16());
        for u in units {
            out.extend(if be { u.to_be_bytes() } else { u.to_le_bytes() });
        }
        out
    }

    /// PowerShell 5's `>` writes UTF-16LE with a byte-order mark.
    #[test]
    fn a_utf16_report_with_a_byte_order_mark_is_decoded() {
        let dir = tempfile::tempdir().unwrap();
        for (be, name) in [(false, "UTF-16LE"), (true, "UTF-16BE")] {
            let path = dir.path().join(format!("{name}.txt"));
            std::fs::write(&path, utf16(CLEAN, true, be)).unwrap();
            let r = import(Tool::Memcheck, &path).unwrap();
            assert_eq!(r.outcome, crate::sanitizer::Outcome::Clean, "{name}");
            assert_eq!(r.exit_status, Some(0), "{name}");
            assert!(r
                .notes
                .iter()
                .any(|n| n.starts_with(&format!("read as {name}"))));
        }
        // Without the mark it is refused, and the refusal says why.
        let path = dir.path().join("nobom.txt");
        std::fs::write(&path, utf16(CLEAN, false, false)).unwrap();
        let e = import(Tool::Memcheck, &path).unwrap_err().to_string();
        assert!(
            e.contains("UTF-16 text without a byte-order mark: save the report as UTF-8"),
            "{e}"
        );
    }
}
