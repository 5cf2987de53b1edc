//! A small reader for the CSV files a run folder holds: a header line, then rows whose
//! fields may be double-quoted (`""` inside quotes is one quote). Rows are read by column
//! name, so a reordered or extended file still reads.

/// A parsed CSV file: the header and the rows, each row as long as the header.
#[derive(Debug, Clone, PartialEq)]
pub struct Csv {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// One row, read by column name.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    header: &'a [String],
    fields: &'a [String],
    /// 2-based line number in the file (the header is line 1), for messages.
    pub line: usize,
}

impl Csv {
    /// Parse `text`. Errors: no header, or a row with a different field count (the
    /// message names the line).
    pub fn parse(text: &str) -> Result<Csv, String> {
        let mut lines = text
            .lines()
            .map(|l| l.trim_end_matches('\r'))
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let header = match lines.next() {
            Some((_, h)) => split(h),
            None => return Err("empty file".into()),
        };
        let mut rows = Vec::new();
        for (i, l) in lines {
            let fields = split(l);
            if fields.len() != header.len() {
                return Err(format!(
                    "line {}: {} fields, the header has {}",
                    i + 1,
                    fields.len(),
                    header.len()
                ));
            }
            rows.push(fields);
        }
        Ok(Csv { header, rows })
    }

    /// Fail unless every named column is present.
    pub fn require(&self, columns: &[&str]) -> Result<(), String> {
        let missing: Vec<&str> = columns
            .iter()
            .filter(|c| !self.header.iter().any(|h| h == *c))
            .copied()
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("missing column(s): {}", missing.join(", ")))
        }
    }

    /// The rows in file order.
    pub fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().enumerate().map(|(i, f)| Row {
            header: &self.header,
            fields: f,
            line: i + 2,
        })
    }
}

impl<'a> Row<'a> {
    /// The field under `column`, or "" when there is no such column.
    pub fn get(&self, column: &str) -> &'a str {
        self.header
            .iter()
            .position(|h| h == column)
            .map(|i| self.fields[i].as_str())
            .unwrap_or("")
    }

    /// The field as text; an error names the line when it is empty.
    pub fn text(&self, column: &str) -> Result<String, String> {
        match self.get(column) {
            "" => Err(format!("line {}: empty {column}", self.line)),
            s => Ok(s.to_string()),
        }
    }

    /// A number; `None` for an empty field, an error for anything else that is not one.
    pub fn opt_f64(&self, column: &str) -> Result<Option<f64>, String> {
        match self.get(column).trim() {
            "" => Ok(None),
            s => match s.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(Some(v)),
                _ => Err(format!(
                    "line {}: {column} is not a finite number: '{s}'",
                    self.line
                )),
            },
        }
    }

    /// A required non-negative integer.
    pub fn u64(&self, column: &str) -> Result<u64, String> {
        let s = self.get(column).trim();
        s.parse::<u64>().map_err(|_| {
            format!(
                "line {}: {column} is not a non-negative integer: '{s}'",
                self.line
            )
        })
    }

    /// `true` or `false`.
    pub fn bool(&self, column: &str) -> Result<bool, String> {
        match self.get(column).trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            s => Err(format!(
                "line {}: {column} is not true or false: '{s}'",
                self.line
            )),
        }
    }
}

fn split(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if field.is_empty() => quoted = true,
            (',', false) => out.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    out.push(field);
    out
}

/// A CSV field as written: quoted (inner quotes doubled) when it holds a comma, a quote or
/// a line break.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Rows of fields as CSV text: each field quoted as [`field`] says, one line per row.
pub fn lines<R: AsRef<[String]>>(rows: &[R]) -> String {
    let mut out = String::new();
    for r in rows {
        let fields: Vec<String> = r.as_ref().iter().map(|f| field(f)).collect();
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// A JSON value as CSV: a list of flat records (objects of scalars) as a table with one
/// column per key, anything else [`flattened`].
pub fn of_value(value: &serde_json::Value) -> String {
    use serde_json::Value;
    let scalar = |v: &Value| !matches!(v, Value::Object(_) | Value::Array(_));
    let records: Option<Vec<&serde_json::Map<String, Value>>> = match value {
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|v| v.as_object().filter(|o| o.values().all(scalar)))
            .collect(),
        _ => None,
    };
    let Some(records) = records else {
        return flattened(value);
    };
    let mut header: Vec<String> = Vec::new();
    for k in records.iter().flat_map(|r| r.keys()) {
        if !header.contains(k) {
            header.push(k.clone());
        }
    }
    let text = |v: Option<&Value>| match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    let mut rows = vec![header.clone()];
    rows.extend(
        records
            .iter()
            .map(|r| header.iter().map(|k| text(r.get(k))).collect()),
    );
    lines(&rows)
}

/// A JSON value as `field,value` rows, one per scalar: object keys joined with `.`, array
/// elements as `[i]` (`cases[2].label`). Strings are written as they are, `null` as an empty
/// field; an empty object or array is a row of its own with an empty value, so that no
/// field of the value goes unnamed.
pub fn flattened(value: &serde_json::Value) -> String {
    fn walk(path: String, v: &serde_json::Value, rows: &mut Vec<[String; 2]>) {
        use serde_json::Value;
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, v) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(p, v, rows);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for (i, v) in a.iter().enumerate() {
                    walk(format!("{path}[{i}]"), v, rows);
                }
            }
            Value::Object(_) | Value::Array(_) | Value::Null => rows.push([path, String::new()]),
            Value::String(s) => rows.push([path, s.clone()]),
            Value::Bool(_) | Value::Number(_) => rows.push([path, v.to_string()]),
        }
    }
    let mut rows = vec![["field".to_string(), "value".to_string()]];
    walk(String::new(), value, &mut rows);
    lines(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_flat_records_is_a_table() {
        let v = serde_json::json!([
            {"name": "a", "n": 1, "why": null},
            {"name": "b,c", "n": 2, "extra": true},
        ]);
        assert_eq!(of_value(&v), "n,name,why,extra\n1,a,,\n2,\"b,c\",,true\n");
        let nested = serde_json::json!([{"a": {"b": 1}}]);
        assert_eq!(of_value(&nested), "field,value\n[0].a.b,1\n");
    }

    #[test]
    fn a_value_flattens_to_named_fields_that_read_back() {
        let v = serde_json::json!({
            "kernel": "tiled, v2",
            "n": 1024,
            "ok": true,
            "missing": null,
            "cases": [{"label": "say \"hi\""}, {"label": "b"}],
            "none": [],
        });
        let text = flattened(&v);
        let c = Csv::parse(&text).unwrap();
        let got: Vec<(String, String)> = c
            .rows()
            .map(|r| (r.get("field").to_string(), r.get("value").to_string()))
            .collect();
        let want = [
            ("cases[0].label", "say \"hi\""),
            ("cases[1].label", "b"),
            ("kernel", "tiled, v2"),
            ("missing", ""),
            ("n", "1024"),
            ("none", ""),
            ("ok", "true"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn quoted_fields_and_named_columns() {
        let c = Csv::parse("a,b,flags\n1,x,\"\"\n2,y,\"p,q \"\"r\"\"\"\n").unwrap();
        let rows: Vec<Row> = c.rows().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].get("flags"), "");
        assert_eq!(rows[1].get("flags"), "p,q \"r\"");
        assert_eq!(rows[1].u64("a").unwrap(), 2);
        assert_eq!(rows[1].get("nope"), "");
        assert!(c.require(&["a", "zz"]).unwrap_err().contains("zz"));
    }

    #[test]
    fn ragged_rows_and_bad_numbers_name_the_line() {
        assert!(Csv::parse("a,b\n1\n").unwrap_err().contains("line 2"));
        let c = Csv::parse("a\nx\n").unwrap();
        let r = c.rows().next().unwrap();
        assert!(r.opt_f64("a").unwrap_err().contains("line 2"));
        let c = Csv::parse("a\nNaN\n").unwrap();
        let r = c.rows().next().unwrap();
        assert!(r.opt_f64("a").unwrap_err().contains("not a finite number"));
        assert_eq!(Csv::parse("").unwrap_err(), "empty file");
    }
}
