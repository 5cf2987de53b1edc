//! Editing an ncu CSV page's columns in a test: rename, drop, or set a column's values,
//! leaving every other byte as it was. Shared by the klab-tools tests and the CLI's
//! (tests/profile_import.rs includes this file by path).

/// A CSV line cut at the commas outside quotes, each field verbatim (quotes kept), so that
/// joining with `,` gives the line back.
fn fields(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&line[start..]);
    out
}

/// `text` with the table's columns edited: each `(from, to)` renamed (`to` empty: dropped),
/// in the header and every row after it (a details page's short rows lose a dropped column
/// only where they reach it). `value` rewrites the field of a column in the data rows (not
/// the unit row).
pub fn edited(text: &str, renames: &[(&str, &str)], value: Option<(&str, &str)>) -> String {
    let mut out = String::new();
    let mut header: Option<Vec<String>> = None;
    for line in text.lines() {
        let f = fields(line);
        let is_header = header.is_none() && f.first() == Some(&"\"ID\"");
        if is_header {
            header = Some(f.iter().map(|s| s.trim_matches('"').to_string()).collect());
        }
        let Some(names) = header.as_ref().filter(|_| line.starts_with('"')) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let mut kept = Vec::new();
        for (i, field) in f.iter().enumerate() {
            let name = names.get(i).map_or("", String::as_str);
            let rename = renames.iter().find(|(from, _)| *from == name);
            if rename.is_some_and(|(_, to)| to.is_empty()) {
                continue;
            }
            if is_header {
                kept.push(format!("\"{}\"", rename.map_or(name, |(_, to)| *to)));
            } else if let Some((_, v)) = value.filter(|(c, _)| *c == name && f[0] != "\"\"") {
                kept.push(format!("\"{v}\""));
            } else {
                kept.push(field.to_string());
            }
        }
        out.push_str(&kept.join(","));
        out.push('\n');
    }
    out
}
