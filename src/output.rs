//! How a command's report reaches stdout: the command builds one value, and one sink per
//! format turns it into text (as hyperfine's exporters do). A command never writes its own
//! JSON; a format is added here once, for every command that reports.
//!
//! Progress, per-case lines and relayed child output are not reports: they go out as they
//! happen (stderr, or a child's stdout passed through).

use serde::Serialize;

/// What a command reports: a serializable value and the text a person reads.
pub trait Report: Serialize {
    /// The human text, ending in a newline.
    fn human(&self) -> String;
}

/// The format a command was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Human,
    /// The value as pretty-printed JSON (`--json`).
    Json,
}

impl Format {
    /// From a command's `--json` flag.
    pub fn json_if(json: bool) -> Format {
        if json {
            Format::Json
        } else {
            Format::Human
        }
    }

    /// `report` in this format.
    pub fn render<R: Report>(self, report: &R) -> anyhow::Result<String> {
        Ok(match self {
            Format::Human => report.human(),
            Format::Json => serde_json::to_string_pretty(report)? + "\n",
        })
    }
}

/// Print `report` on stdout in `format`.
pub fn emit<R: Report>(report: &R, format: Format) -> anyhow::Result<()> {
    print!("{}", format.render(report)?);
    Ok(())
}

impl Report for klab_model::ModelReport {
    fn human(&self) -> String {
        self.render_text()
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
        assert_eq!(Format::json_if(true), Format::Json);
    }
}
