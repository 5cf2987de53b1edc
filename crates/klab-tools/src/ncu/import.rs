//! Profiles klab did not capture: a file given to `klab profile --import`, read by the same
//! parsers as klab's own capture, its launches given as [`KernelRecord`]s whatever the file
//! was.
//!
//! What the file is, is told from its bytes (the name only breaks a tie):
//!
//! * it starts with [`REPORT_SIGNATURE`], or its name ends in `.ncu-rep`: a report, which only
//!   ncu reads. It goes through `ncu --import FILE --csv --page raw` ([`super::import_raw`],
//!   under the shared watchdog) to [`parse_raw`]. The name counts too so that a report whose
//!   first bytes differ (another ncu version) still reaches ncu, which then says what it
//!   makes of it.
//! * text whose CSV header has the details page's columns ([`DETAILS_COLUMNS`]): the details
//!   page, to [`parse_details`], each launch turned into a raw-page record
//!   ([`DetailsKernel::to_record`](super::DetailsKernel::to_record)).
//! * text with another CSV header (a line whose first field is `ID`): the raw page, to
//!   [`parse_raw`].
//! * anything else: [`NcuError::NotAProfile`], one line naming the format expected and the
//!   command that writes it ([`EXPECTED_FORMAT`]), and what the file looks like when that can
//!   be told (ncu's default text output, JSON, an empty file, binary data).
//!
//! Files are read through [`klab_core::artifact`]: a regular file only (a FIFO or a device
//! is refused without blocking), at most [`Input::NCU_CSV`] of a CSV page. Of a report, and
//! of binary data (a NUL byte early on), only the first [`HEAD_BYTES`] are read here.

use std::path::Path;
use std::time::Duration;

use klab_core::artifact::{read_prefix, read_regular, Input};

use super::csv::{header_fields, message};
use super::{
    first_error, import_argv, import_raw, is_details_header, locate_ncu, output_failure,
    parse_details, parse_raw, KernelRecord, NcuError, NcuMessage, Page,
};

/// The first bytes of an `.ncu-rep` file: `NVR` and a NUL, as Extra-P's reader of the
/// format (`ncu-report.ksy`) checks them.
pub const REPORT_SIGNATURE: &[u8; 4] = b"NVR\0";

/// How much of a file is read to tell a report or binary data from a CSV page.
const HEAD_BYTES: usize = 4096;

/// What an import reads, said when a file is something else.
pub const EXPECTED_FORMAT: &str = "an Nsight Compute report (.ncu-rep) or its raw or details \
     CSV page, as `ncu --import REPORT.ncu-rep --csv --page raw > REPORT.csv` writes it \
     (or `ncu --csv --page raw ...` while profiling)";

/// What the imported file was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A report, read through ncu (its raw page).
    Report,
    /// A CSV page written by someone else.
    Page(Page),
}

impl Format {
    /// The format in words, for the line that says what was read.
    pub fn describe(self) -> String {
        match self {
            Format::Report => {
                "an Nsight Compute report, read through ncu --import --csv --page raw".into()
            }
            Format::Page(p) => format!("ncu's {}", p.describe()),
        }
    }
}

/// An imported file's launches.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// What the file was.
    pub format: Format,
    /// Every profiled launch in the file's order (a details page's as raw-page records).
    pub kernels: Vec<KernelRecord>,
    /// ncu's own lines in the page (for a report, in ncu's CSV output).
    pub messages: Vec<NcuMessage>,
    /// For a report, the ncu command that read it.
    pub ncu_argv: Option<Vec<String>>,
}

/// Read the file at `path` ([module docs](self)). `ncu` is the binary to read a report with
/// (as given, else found on `PATH` or at [`super::DEFAULT_NCU_PATH`]); it is looked for only
/// when the file is a report, so a CSV page needs no ncu. `timeout` bounds that ncu run.
pub fn import_file(
    path: &Path,
    ncu: Option<&Path>,
    timeout: Duration,
) -> Result<Imported, NcuError> {
    let head = read_prefix(path, Input::NCU_IMPORT, HEAD_BYTES)?;
    let named_report = path
        .extension()
        .is_some_and(|e| e == super::REPORT_EXTENSION);
    if head.starts_with(REPORT_SIGNATURE) || named_report {
        let ncu = locate_ncu(ncu).ok_or_else(|| NcuError::NcuMissing {
            path: path.to_path_buf(),
        })?;
        let argv = import_argv(&ncu, path, Page::Raw)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let raw = import_raw(&ncu, path, timeout)?;
        return Ok(Imported {
            format: Format::Report,
            kernels: raw.kernels,
            messages: raw.messages,
            ncu_argv: Some(argv),
        });
    }
    // A CSV page holds no NUL byte: binary data is refused before it is read whole.
    if head.contains(&0) {
        return Err(NcuError::NotAProfile {
            path: path.to_path_buf(),
            looks_like: looks_like(&head, ""),
        });
    }
    let bytes = read_regular(path, Input::NCU_CSV)?;
    // ncu writes UTF-8; a stray byte in an application's output line must not hide a
    // table, so the text is read lossily (as a run's captured output is).
    let text = String::from_utf8_lossy(&bytes);
    if header_fields(&text).is_none() {
        // ncu's own verdict (no permission, nothing profiled) says more than "not a
        // table", unless the file shows profiled launches in ncu's text form.
        if !is_text_output(&text) {
            if let Some(e) = output_failure(&text, false) {
                return Err(e);
            }
        }
        return Err(NcuError::NotAProfile {
            path: path.to_path_buf(),
            looks_like: looks_like(&bytes, &text),
        });
    }
    read_page(&text)
}

/// Read a CSV page, raw or details as its header says, into launches.
pub fn read_page(text: &str) -> Result<Imported, NcuError> {
    let details = header_fields(text).is_some_and(|h| is_details_header(&h));
    if details {
        let d = parse_details(text)?;
        return Ok(Imported {
            format: Format::Page(Page::Details),
            kernels: d.kernels.iter().map(|k| k.to_record()).collect(),
            messages: d.messages,
            ncu_argv: None,
        });
    }
    let r = parse_raw(text)?;
    Ok(Imported {
        format: Format::Page(Page::Raw),
        kernels: r.kernels,
        messages: r.messages,
        ncu_argv: None,
    })
}

/// ncu without `--csv`: per launch a signature line, then `Section: NAME` and a table.
fn is_text_output(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("Section: "))
}

/// A guess at what a file with no CSV table is, for the refusal.
fn looks_like(bytes: &[u8], text: &str) -> Option<String> {
    if bytes.starts_with(b"SQLite format 3\0") {
        return Some(
            "an SQLite database, such as an Nsight Systems export, which klab trace reads".into(),
        );
    }
    if bytes.contains(&0) || std::str::from_utf8(bytes).is_err() {
        return Some(format!(
            "binary data, and not an Nsight Compute report: it does not start with {:?}",
            String::from_utf8_lossy(REPORT_SIGNATURE)
        ));
    }
    let t = text.trim_start_matches('\u{feff}').trim_start();
    if t.is_empty() {
        return Some("an empty file".into());
    }
    if is_text_output(text) {
        return Some("ncu's default text output (ncu without --csv)".into());
    }
    if t.starts_with('{') || t.starts_with('[') {
        return Some("JSON".into());
    }
    if t.starts_with('<') {
        return Some("XML or HTML".into());
    }
    let messages: Vec<NcuMessage> = text.lines().filter_map(|l| message(l, 0)).collect();
    if let Some(first) = first_error(&messages) {
        return Some(format!("ncu's output with no table; ncu said: {first}"));
    }
    if !messages.is_empty() {
        return Some("ncu's output with no table".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guesses() {
        let l = |s: &str| looks_like(s.as_bytes(), s);
        assert_eq!(l(" \n").as_deref(), Some("an empty file"));
        assert_eq!(l("{\"a\": 1}").as_deref(), Some("JSON"));
        assert_eq!(l("<html>").as_deref(), Some("XML or HTML"));
        assert!(
            l("  k(int) (1, 1, 1)x(32, 1, 1)\n    Section: SpeedOfLight\n")
                .unwrap()
                .starts_with("ncu's default text output")
        );
        assert_eq!(
            l("==ERROR== Could not open\n==ERROR== more\n").as_deref(),
            Some("ncu's output with no table; ncu said: ==ERROR== Could not open")
        );
        assert_eq!(
            l("==PROF== Connected\n").as_deref(),
            Some("ncu's output with no table")
        );
        assert!(looks_like(b"\x00\x01\x02", "")
            .unwrap()
            .starts_with("binary data"));
        assert!(looks_like(b"SQLite format 3\0...", "")
            .unwrap()
            .contains("klab trace"));
        assert_eq!(l("a,b\n1,2\n"), None);
    }
}
