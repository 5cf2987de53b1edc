//! Finding ncu's CSV table inside captured output and reading it as RFC 4180 records.
//!
//! Captured output holds more than the table: ncu's `==PROF==` / `==WARNING==` /
//! `==ERROR==` lines and the application's own output come before it (and, when stdout and
//! stderr are merged, after it). The scanner works line by line:
//!
//! * a line starting with an ncu prefix is a [`NcuMessage`], wherever it is;
//! * before the header, any other line is application output, until the header: the first
//!   line whose first CSV field is `ID` and that has more than one field;
//! * after the header, a line is a record if it starts with `"` (ncu quotes every field);
//!   when the header itself was not quoted, every non-empty line is a record. Any other
//!   line is kept in [`Scan::other_lines`]. A record may span lines inside a quoted field.

use super::{MessageLevel, NcuError, NcuMessage};

/// One CSV record and the line (1-based) it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub fields: Vec<String>,
    pub line: usize,
}

/// What the scanner found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Scan {
    pub header: Option<Record>,
    pub records: Vec<Record>,
    pub messages: Vec<NcuMessage>,
    /// Lines that are neither ncu messages nor table records (application output), in
    /// order, without line terminators; empty lines are dropped.
    pub other_lines: Vec<String>,
}

/// The ncu message prefixes and their levels.
const PREFIXES: [(&str, MessageLevel); 4] = [
    ("==ERROR==", MessageLevel::Error),
    ("==WARNING==", MessageLevel::Warning),
    ("==WARN==", MessageLevel::Warning),
    ("==PROF==", MessageLevel::Prof),
];

/// The message on `line`, if it is one (leading whitespace allowed).
pub(crate) fn message(line: &str, line_no: usize) -> Option<NcuMessage> {
    let t = line.trim_start();
    PREFIXES.iter().find_map(|(p, level)| {
        t.strip_prefix(p).map(|rest| NcuMessage {
            level: *level,
            text: rest.trim().to_string(),
            line: line_no,
        })
    })
}

/// Split `text` into the table and everything around it.
pub(crate) fn scan(text: &str) -> Result<Scan, NcuError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Scan::default();
    let mut quoted_style = true;
    let mut pos = 0usize;
    let mut line_no = 1usize;
    while pos < text.len() {
        let eol = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
        let line = text[pos..eol].strip_suffix('\r').unwrap_or(&text[pos..eol]);
        let next = if eol < text.len() {
            eol + 1
        } else {
            text.len()
        };

        if let Some(m) = message(line, line_no) {
            out.messages.push(m);
            pos = next;
            line_no += 1;
            continue;
        }
        let is_record = if out.header.is_none() {
            is_header(line)
        } else if line.trim().is_empty() {
            pos = next;
            line_no += 1;
            continue;
        } else {
            line.starts_with('"') || !quoted_style
        };
        if is_record {
            let (fields, end, newlines) = read_record(text, pos, line_no)?;
            let rec = Record {
                fields,
                line: line_no,
            };
            if out.header.is_none() {
                quoted_style = line.starts_with('"');
                out.header = Some(rec);
            } else {
                out.records.push(rec);
            }
            pos = end;
            line_no += newlines;
        } else {
            if !line.trim().is_empty() {
                out.other_lines.push(line.to_string());
            }
            pos = next;
            line_no += 1;
        }
    }
    Ok(out)
}

/// The header's fields, as [`scan`] would find them (the first line that is not an ncu
/// message and whose first field is `ID`), without reading the rest of the table; `None`
/// when there is no header or it cannot be read.
pub(crate) fn header_fields(text: &str) -> Option<Vec<String>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut pos = 0usize;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end_matches(['\n', '\r']);
        if message(bare, i + 1).is_none() && is_header(bare) {
            return read_record(text, pos, i + 1)
                .ok()
                .map(|(fields, _, _)| fields);
        }
        pos += line.len();
    }
    None
}

/// A header line: first field `ID`, and at least one more field.
fn is_header(line: &str) -> bool {
    let rest = if let Some(r) = line.strip_prefix("\"ID\"") {
        r
    } else if let Some(r) = line.strip_prefix("ID") {
        r
    } else {
        return false;
    };
    rest.starts_with(',')
}

/// Read one record starting at byte `start` (the start of a line). Returns the fields, the
/// byte position after the record's line terminator, and how many lines it consumed.
pub(crate) fn read_record(
    text: &str,
    start: usize,
    line_no: usize,
) -> Result<(Vec<String>, usize, usize), NcuError> {
    let b = text.as_bytes();
    let mut fields = Vec::new();
    let mut i = start;
    let mut lines = 1usize;
    loop {
        // At the start of a field.
        let mut field = String::new();
        if i < b.len() && b[i] == b'"' {
            let opened_on = line_no + lines - 1;
            i += 1;
            loop {
                let Some(q) = text[i..].find('"') else {
                    return Err(NcuError::UnterminatedQuote { line: opened_on });
                };
                let chunk = &text[i..i + q];
                lines += chunk.matches('\n').count();
                field.push_str(chunk);
                i += q + 1;
                if i < b.len() && b[i] == b'"' {
                    field.push('"');
                    i += 1;
                } else {
                    break;
                }
            }
            // Anything between the closing quote and the delimiter is kept (lenient).
            let end = text[i..].find([',', '\n']).map_or(text.len(), |k| i + k);
            let tail = text[i..end].strip_suffix('\r').unwrap_or(&text[i..end]);
            field.push_str(tail);
            i = end;
        } else {
            let end = text[i..].find([',', '\n']).map_or(text.len(), |k| i + k);
            let raw = text[i..end].strip_suffix('\r').unwrap_or(&text[i..end]);
            field.push_str(raw);
            i = end;
        }
        fields.push(field);
        if i < b.len() && b[i] == b',' {
            i += 1;
            continue;
        }
        // End of line or of text.
        if i < b.len() {
            i += 1; // the '\n'
        }
        return Ok((fields, i, lines));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(s: &str) -> Vec<String> {
        read_record(s, 0, 1).unwrap().0
    }

    #[test]
    fn quoted_fields_with_commas_quotes_and_newlines() {
        assert_eq!(
            rec("\"a,b\",\"say \"\"hi\"\"\",plain,\"\"\n"),
            ["a,b", "say \"hi\"", "plain", ""]
        );
        let (f, end, lines) = read_record("\"x\ny\",z\nnext", 0, 1).unwrap();
        assert_eq!(f, ["x\ny", "z"]);
        assert_eq!(lines, 2);
        assert_eq!(end, 8);
        // Trailing empty field (ncu's details rows end with a comma).
        assert_eq!(rec("\"1\",\"2\",\n"), ["1", "2", ""]);
    }

    #[test]
    fn crlf_is_stripped_outside_quotes() {
        assert_eq!(rec("\"a\",b\r\n"), ["a", "b"]);
        assert_eq!(rec("\"a\r\nb\",c\r\n"), ["a\r\nb", "c"]);
        assert_eq!(rec("a,\"b\"\r\n"), ["a", "b"]);
    }

    #[test]
    fn text_after_a_closing_quote_is_kept() {
        assert_eq!(rec("\"ab\"cd,e"), ["abcd", "e"]);
    }

    #[test]
    fn unterminated_quote_names_its_line() {
        let e = read_record("x\n\"a,b\nc", 2, 2).unwrap_err();
        assert!(
            matches!(e, NcuError::UnterminatedQuote { line: 2 }),
            "{e:?}"
        );
    }

    #[test]
    fn headers() {
        assert!(is_header("\"ID\",\"Kernel Name\""));
        assert!(is_header("ID,Kernel Name"));
        assert!(!is_header("\"ID\""));
        assert!(!is_header("IDX,a"));
        assert!(!is_header("\"IDs\",a"));
        assert!(!is_header(" \"ID\",a"));
    }

    #[test]
    fn scan_separates_messages_output_and_table() {
        let text = "==PROF== Connected\napp says \"hi\n\"ID\",\"A\"\n\"\",\"u\"\n\n\"0\",\"1\"\n==PROF== Disconnected\nbye\n";
        let s = scan(text).unwrap();
        assert_eq!(s.header.as_ref().unwrap().fields, ["ID", "A"]);
        assert_eq!(s.header.as_ref().unwrap().line, 3);
        assert_eq!(s.records.len(), 2);
        assert_eq!(s.records[1].fields, ["0", "1"]);
        assert_eq!(s.records[1].line, 6);
        assert_eq!(s.other_lines, ["app says \"hi", "bye"]);
        assert_eq!(s.messages.len(), 2);
        assert_eq!(s.messages[1].text, "Disconnected");
        assert_eq!(s.messages[1].line, 7);
    }

    #[test]
    fn unquoted_tables_take_every_line_after_the_header() {
        let s = scan("ID,A\n,u\n0,x\n1,y").unwrap();
        assert_eq!(s.records.len(), 3);
        assert_eq!(s.records[2].fields, ["1", "y"]);
        assert!(s.other_lines.is_empty());
    }

    #[test]
    fn header_fields_are_found_after_messages_and_output() {
        let text = "==PROF== x\napp\n\"ID\",\"Section Name\"\r\n\"0\",\"S\"\n";
        assert_eq!(header_fields(text).unwrap(), ["ID", "Section Name"]);
        assert_eq!(
            header_fields("\u{feff}ID,a\n0,1"),
            Some(vec!["ID".into(), "a".into()])
        );
        assert_eq!(header_fields("==PROF== only\n  Section: x\n"), None);
        assert_eq!(header_fields("\"ID\",\"unclosed\n"), None);
    }

    #[test]
    fn bom_is_ignored() {
        let s = scan("\u{feff}\"ID\",\"A\"\n\"0\",\"1\"\n").unwrap();
        assert!(s.header.is_some());
    }
}
