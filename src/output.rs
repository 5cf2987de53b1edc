//! How a command's report reaches stdout: the command builds one value, and one sink per
//! format turns it into text (as hyperfine's exporters do). A command never writes its own
//! JSON; a format is added here once, for every command that reports.
//!
//! The CSV sink writes a report's table: the rows a report names (a sweep's points, a
//! profile's counters), or by default the report's JSON value flattened into `field,value`
//! rows (a list of flat records as a table), so every report has a CSV form and none writes one by hand.
//!
//! Progress, per-case lines and relayed child output are not reports: they go out as they
//! happen (stderr, or a child's stdout passed through).

use serde::Serialize;

/// What a command reports: a serializable value and the text a person reads.
pub trait Report: Serialize {
    /// The human text, ending in a newline.
    fn human(&self) -> String;

    /// The report as CSV, header first: by default its JSON value as a table when it is a
    /// list of flat records, else as `field,value` rows.
    fn csv(&self) -> anyhow::Result<String> {
        Ok(klab_core::csv::of_value(&serde_json::to_value(self)?))
    }
}

/// The format a command prints its report in (`--format`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Text for a person
    #[default]
    Human,
    /// The report as one pretty-printed JSON value
    Json,
    /// The report's table as CSV, header first
    Csv,
}

impl Format {
    /// `report` in this format.
    pub fn render<R: Report>(self, report: &R) -> anyhow::Result<String> {
        Ok(match self {
            Format::Human => report.human(),
            Format::Json => serde_json::to_string_pretty(report)? + "\n",
            Format::Csv => report.csv()?,
        })
    }

    /// Whatever else a command or its child prints (kernel printf, relayed tool output)
    /// goes to stderr, so that stdout holds the report alone and parses.
    pub fn is_for_machines(self) -> bool {
        self != Format::Human
    }
}

/// Print `report` on stdout in `format`.
pub fn emit<R: Report>(report: &R, format: Format) -> anyhow::Result<()> {
    print_rendered(&format.render(report)?)
}

/// Print a report a child rendered (`ChildResult::Reported`) on stdout.
pub fn print_rendered(text: &str) -> anyhow::Result<()> {
    print!("{text}");
    Ok(())
}

impl Report for klab_model::ModelReport {
    fn human(&self) -> String {
        self.render_text()
    }

    /// One row per predicted access: the variant's scalars beside the access's.
    fn csv(&self) -> anyhow::Result<String> {
        use serde_json::Value;
        let mut rows = Vec::new();
        for p in serde_json::to_value(&self.predictions)?
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(variant) = p.as_object() else {
                continue;
            };
            let scalars = variant
                .iter()
                .filter(|(_, v)| !v.is_object() && !v.is_array());
            let accesses = variant.get("accesses").and_then(Value::as_array);
            for a in accesses.into_iter().flatten() {
                let mut row: serde_json::Map<String, Value> = scalars
                    .clone()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                for (k, v) in a.as_object().into_iter().flatten() {
                    if !v.is_object() && !v.is_array() {
                        row.insert(format!("access_{k}"), v.clone());
                    }
                }
                rows.push(Value::Object(row));
            }
        }
        Ok(klab_core::csv::of_value(&Value::Array(rows)))
    }
}

impl Report for klab_evidence::compare::Comparison {
    fn human(&self) -> String {
        self.render_text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Two {
        a: u32,
    }

    impl Report for Two {
        fn human(&self) -> String {
            format!("a is {}\n", self.a)
        }
    }

    #[test]
    fn each_format_renders_the_same_value() {
        let r = Two { a: 2 };
        assert_eq!(Format::Human.render(&r).unwrap(), "a is 2\n");
        assert_eq!(Format::Json.render(&r).unwrap(), "{\n  \"a\": 2\n}\n");
        assert_eq!(Format::Csv.render(&r).unwrap(), "field,value\na,2\n");
    }
}
