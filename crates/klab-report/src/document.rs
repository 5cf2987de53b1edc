//! The report as a format-free document: sections of paragraphs, notes, tables, labelled
//! statements and plots. [`crate::html`] and [`crate::markdown`] render the same document,
//! so the page and the summary cannot disagree. All text here is raw (unescaped): each
//! renderer escapes it for its format.

pub use crate::verdict::Tone;

use crate::plots::Plot;

/// The whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub title: String,
    /// Label and value lines under the title (device, date, version, command, peaks).
    pub facts: Vec<(String, String)>,
    pub sections: Vec<Section>,
}

impl Document {
    /// The document as both renderers show it: a plot that could not be drawn becomes a
    /// note (plots missing for one reason share it), and a note is said once per section. A
    /// skipped step leaves its reason in its own note and in every plot drawn from it; the
    /// summary of a run without a GPU said one sentence six times.
    pub fn for_rendering(&self, plots: &[Plot]) -> Document {
        let mut doc = self.clone();
        for s in &mut doc.sections {
            let mut said: Vec<String> = Vec::new();
            let mut blocks = Vec::new();
            for b in std::mem::take(&mut s.blocks) {
                match b {
                    Block::Note(n) => {
                        if !said.contains(&n) {
                            said.push(n.clone());
                            blocks.push(Block::Note(n));
                        }
                    }
                    Block::Plots(names) => {
                        let (drawn, missing) = drawable(names, plots);
                        if !drawn.is_empty() {
                            blocks.push(Block::Plots(drawn));
                        }
                        for (why, names) in missing {
                            let files: Vec<String> =
                                names.iter().map(|n| format!("plots/{n}")).collect();
                            let files = files.join(", ");
                            if said.contains(&why) {
                                blocks.push(Block::Note(format!(
                                    "{files} not drawn, for the reason above"
                                )));
                            } else {
                                blocks.push(Block::Note(format!("{files} not drawn: {why}")));
                                said.push(why);
                            }
                        }
                    }
                    other => blocks.push(other),
                }
            }
            s.blocks = blocks;
        }
        doc
    }
}

/// The plots among `names` that were drawn, and those that were not, grouped by why (in
/// the order first met).
fn drawable(names: Vec<String>, plots: &[Plot]) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let mut drawn = Vec::new();
    let mut missing: Vec<(String, Vec<String>)> = Vec::new();
    for name in names {
        let why = match plots.iter().find(|p| p.file_name == name) {
            Some(p) => match &p.missing {
                None => {
                    drawn.push(name);
                    continue;
                }
                Some(why) => why.clone(),
            },
            None => "it was not rendered".to_string(),
        };
        match missing.iter_mut().find(|(w, _)| *w == why) {
            Some((_, same)) => same.push(name),
            None => missing.push((why, vec![name])),
        }
    }
    (drawn, missing)
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

#[cfg(test)]
mod rendering_tests {
    use super::*;

    fn plot(name: &str, missing: Option<&str>) -> Plot {
        Plot {
            file_name: name.into(),
            svg: "<svg></svg>".into(),
            caption: format!("{name} caption"),
            missing: missing.map(String::from),
        }
    }

    /// A skipped step's reason is said once in its section, however many notes and plots
    /// carry it; plots missing for another reason still say theirs, and drawn plots stay.
    #[test]
    fn a_skipped_steps_reason_is_said_once_per_section() {
        let skipped = "not in this run: step 'rounds' was skipped: no GPU";
        let doc = Document {
            title: "t".into(),
            facts: Vec::new(),
            sections: vec![Section {
                id: "p".into(),
                title: "Performance".into(),
                blocks: vec![
                    Block::Note(skipped.into()),
                    Block::Note(skipped.into()),
                    Block::Plots(vec![
                        "a.svg".into(),
                        "b.svg".into(),
                        "c.svg".into(),
                        "d.svg".into(),
                        "e.svg".into(),
                    ]),
                ],
            }],
        };
        let plots = [
            plot("a.svg", Some(skipped)),
            plot("b.svg", None),
            plot("c.svg", Some(skipped)),
            plot("d.svg", Some("no memory roof")),
        ];
        for text in [
            crate::markdown::render(&doc, &plots),
            crate::html::render(&doc, &plots),
        ] {
            assert_eq!(text.matches("was skipped: no GPU").count(), 1, "{text}");
            assert!(text.contains("plots/a.svg, plots/c.svg not drawn, for the reason above"));
            assert!(text.contains("plots/d.svg not drawn: no memory roof"));
            assert!(text.contains("plots/e.svg not drawn: it was not rendered"));
            assert!(text.contains("b.svg caption"), "{text}");
        }
    }
}
