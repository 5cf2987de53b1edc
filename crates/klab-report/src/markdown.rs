//! The markdown summary: the same document as the page, tables as pipe tables, plots
//! referenced as `plots/NAME.svg`. Every string from the run folder is escaped.

use crate::document::{Block, Cell, Document, Table, Tone};
use crate::escape::markdown as esc;
use crate::plots::Plot;

fn cell(c: &Cell) -> String {
    let text = esc(&c.text);
    match c.tone {
        Tone::Bad if !text.is_empty() => format!("**{text}**"),
        _ => text,
    }
}

fn table(t: &Table, out: &mut String) {
    out.push_str(&format!(
        "| {} |\n",
        t.columns
            .iter()
            .map(|c| esc(c))
            .collect::<Vec<_>>()
            .join(" | ")
    ));
    out.push_str(&format!(
        "|{}\n",
        t.columns.iter().map(|_| " --- |").collect::<String>()
    ));
    for row in &t.rows {
        out.push_str(&format!(
            "| {} |\n",
            row.iter().map(cell).collect::<Vec<_>>().join(" | ")
        ));
    }
    out.push('\n');
}

/// The summary.
pub fn render(doc: &Document, plots: &[Plot]) -> String {
    let doc = &doc.for_rendering(plots);
    let mut out = format!("# {}\n\n", esc(&doc.title));
    for (k, v) in &doc.facts {
        out.push_str(&format!("- **{}:** {}\n", esc(k), esc(v)));
    }
    out.push('\n');
    for s in &doc.sections {
        out.push_str(&format!("## {}\n\n", esc(&s.title)));
        for b in &s.blocks {
            match b {
                Block::Heading(h) => out.push_str(&format!("### {}\n\n", esc(h))),
                Block::Paragraph(p) => out.push_str(&format!("{}\n\n", esc(p))),
                Block::Note(n) => out.push_str(&format!("> **Note:** {}\n\n", esc(n))),
                Block::Table(t) => table(t, &mut out),
                Block::Statement(lines) => {
                    for (k, v) in lines {
                        out.push_str(&format!("- **{}:** {}\n", esc(k), esc(v)));
                    }
                    out.push('\n');
                }
                // A fence longer than any run of backticks in the text closes only itself.
                Block::Preformatted(t) => {
                    let fence = "`".repeat(longest_backtick_run(t).max(2) + 1);
                    out.push_str(&format!("{fence}text\n{}\n{fence}\n\n", t.trim_end()));
                }
                // Only drawn plots are left here (Document::for_rendering).
                Block::Plots(names) => {
                    for p in names
                        .iter()
                        .filter_map(|n| plots.iter().find(|p| &p.file_name == n))
                    {
                        out.push_str(&format!(
                            "![{0}](plots/{0})\n\n*{1}*\n\n",
                            p.file_name,
                            esc(&p.caption)
                        ));
                    }
                }
            }
        }
    }
    out.trim_end().to_string() + "\n"
}
/// The longest run of backticks in `t`.
fn longest_backtick_run(t: &str) -> usize {
    t.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod preformatted_tests {
    use super::*;
    use crate::document::Section;

    /// Text holding a fence of its own cannot close the block it is shown in.
    #[test]
    fn a_fence_is_longer_than_any_backtick_run_in_the_text() {
        assert_eq!(longest_backtick_run("no ticks"), 0);
        assert_eq!(longest_backtick_run("a `b` ```c``` d"), 3);
        let doc = Document {
            title: "t".into(),
            facts: Vec::new(),
            sections: vec![Section {
                id: "s".into(),
                title: "S".into(),
                blocks: vec![Block::Preformatted("x\n```\ny".into())],
            }],
        };
        let md = render(&doc, &[]);
        assert!(md.contains("````text\nx\n```\ny\n````"), "{md}");
    }
}
