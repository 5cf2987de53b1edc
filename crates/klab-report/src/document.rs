//! The report as a format-free document: sections of paragraphs, notes, tables, labelled
//! statements and plots. [`crate::html`] and [`crate::markdown`] render the same document,
//! so the page and the summary cannot disagree. All text here is raw (unescaped): each
//! renderer escapes it for its format.

pub use crate::verdict::Tone;

/// The whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub title: String,
    /// Label and value lines under the title (device, date, version, command, peaks).
    pub facts: Vec<(String, String)>,
    pub sections: Vec<Section>,
}

/// One section (`<h2>`).
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Anchor id.
    pub id: String,
    pub title: String,
    pub blocks: Vec<Block>,
}

/// A piece of a section.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A sub-heading (`<h3>`).
    Heading(String),
    Paragraph(String),
    /// Why something is not shown ("not in this run: ...").
    Note(String),
    Table(Table),
    /// `Label: value` lines (a bound statement).
    Statement(Vec<(String, String)>),
    /// Plots side by side where the page is wide enough: file names under `plots/`.
    Plots(Vec<String>),
    /// Text shown as written, in a fixed-width font (a tool's aligned report).
    Preformatted(String),
}

/// A table.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// One cell: text, and a tone for verdicts and statuses.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub text: String,
    pub tone: Tone,
    /// Shown in a fixed-width font (hashes, paths, numbers).
    pub mono: bool,
}

impl Cell {
    /// Plain text.
    pub fn plain(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
            mono: false,
        }
    }

    /// Fixed-width text.
    pub fn mono(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
            mono: true,
        }
    }

    /// Text with a tone.
    pub fn toned(text: impl Into<String>, tone: Tone) -> Cell {
        Cell {
            text: text.into(),
            tone,
            mono: false,
        }
    }
}

impl Table {
    /// A table with these column names and no rows.
    pub fn new(columns: &[&str]) -> Table {
        Table {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
        }
    }
}
