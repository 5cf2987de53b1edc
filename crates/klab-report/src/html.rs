//! The HTML page: one self-contained file with inline CSS and the plots' SVG inline. No
//! script, no external resource. Every string from the run folder is escaped.

use crate::document::{Block, Cell, Document, Table, Tone};
use crate::escape::html as esc;
use crate::plots::Plot;

const CSS: &str = "
:root { color-scheme: light; }
body { margin: 0; background: #fbfbfa; color: #1d1d1f;
  font-family: system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif;
  font-size: 14px; line-height: 1.45; }
main { max-width: 1240px; margin: 0 auto; padding: 16px 20px 40px; }
h1 { font-size: 24px; margin: 8px 0 10px; }
h2 { font-size: 19px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 2px solid #d8d8d4; }
h3 { font-size: 15px; margin: 18px 0 6px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0 0 10px; }
dl.facts dt { font-weight: 600; color: #444; }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
nav a { margin-right: 14px; color: #20507a; }
table { border-collapse: collapse; margin: 6px 0 10px; background: #fff; }
th, td { border: 1px solid #d6d6d2; padding: 3px 7px; text-align: left; vertical-align: top;
  overflow-wrap: break-word; }
th { background: #efefeb; font-weight: 600; white-space: nowrap; }
td.mono { font-family: ui-monospace, 'DejaVu Sans Mono', monospace; font-size: 12px; }
pre { font-family: ui-monospace, 'DejaVu Sans Mono', monospace; font-size: 12px; overflow-x: auto; background: #fff; padding: 8px; border: 1px solid #ddd; }
td.short { white-space: nowrap; }
td.long { word-break: break-all; }
td.good { background: #e7f4ea; color: #0d5a24; }
td.bad { background: #fbe4e4; color: #9c1218; font-weight: 600; }
td.unknown { background: #f1f1ef; color: #5b5b5b; }
p.note { margin: 6px 0; padding: 5px 10px; border-left: 4px solid #c79a1b; background: #fff7df; }
dl.statement { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px;
  margin: 6px 0 8px; padding: 8px 10px; background: #fff; border: 1px solid #d6d6d2; }
dl.statement dt { font-weight: 600; }
dl.statement dd { margin: 0; overflow-wrap: anywhere; }
div.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 14px;
  margin: 10px 0; }
figure { margin: 0; padding: 8px; background: #fff; border: 1px solid #d6d6d2; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { font-size: 12.5px; color: #333; margin-top: 4px; }
footer { margin-top: 30px; color: #666; font-size: 12px; }
";

fn class(c: &Cell) -> String {
    let mut classes = Vec::new();
    match c.tone {
        Tone::Good => classes.push("good"),
        Tone::Bad => classes.push("bad"),
        Tone::Unknown => classes.push("unknown"),
        Tone::Plain => {}
    }
    if c.mono {
        classes.push("mono");
        // Long fixed-width text (hashes, paths) may break anywhere; numbers never wrap.
        classes.push(if c.text.chars().count() > 24 {
            "long"
        } else {
            "short"
        });
    }
    if classes.is_empty() {
        String::new()
    } else {
        format!(" class=\"{}\"", classes.join(" "))
    }
}

fn table(t: &Table, out: &mut String) {
    out.push_str("<table>\n<thead><tr>");
    for c in &t.columns {
        out.push_str(&format!("<th>{}</th>", esc(c)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        out.push_str("<tr>");
        for c in row {
            out.push_str(&format!("<td{}>{}</td>", class(c), esc(&c.text)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

/// The drawn plots (Document::for_rendering has made notes of the others).
fn plots(names: &[String], all: &[Plot], out: &mut String) {
    out.push_str("<div class=\"plots\">\n");
    for p in names
        .iter()
        .filter_map(|n| all.iter().find(|p| &p.file_name == n))
    {
        out.push_str(&format!(
            "<figure id=\"plot-{}\">\n",
            esc(p.file_name.trim_end_matches(".svg"))
        ));
        out.push_str(p.svg.trim());
        out.push_str(&format!(
            "\n<figcaption><b>{}</b>: {}</figcaption>\n</figure>\n",
            esc(&p.file_name),
            esc(&p.caption)
        ));
    }
    out.push_str("</div>\n");
}

/// The line that marks a page as klab's: an existing `index.html` without it is not
/// replaced ([`crate::write_into`]).
pub const GENERATOR: &str = "<meta name=\"generator\" content=\"klab report\">";

/// The page.
pub fn render(doc: &Document, all_plots: &[Plot]) -> String {
    let doc = &doc.for_rendering(all_plots);
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(GENERATOR);
    out.push('\n');
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str(&format!("<title>{}</title>\n", esc(&doc.title)));
    out.push_str(&format!("<style>{CSS}</style>\n</head>\n<body>\n<main>\n"));
    out.push_str(&format!(
        "<header>\n<h1>{}</h1>\n<dl class=\"facts\">\n",
        esc(&doc.title)
    ));
    for (k, v) in &doc.facts {
        out.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", esc(k), esc(v)));
    }
    out.push_str("</dl>\n<nav>");
    for s in &doc.sections {
        out.push_str(&format!(
            "<a href=\"#{}\">{}</a>",
            esc(&s.id),
            esc(&s.title)
        ));
    }
    out.push_str("</nav>\n</header>\n");
    for s in &doc.sections {
        out.push_str(&format!(
            "<section id=\"{}\">\n<h2>{}</h2>\n",
            esc(&s.id),
            esc(&s.title)
        ));
        for b in &s.blocks {
            match b {
                Block::Heading(h) => out.push_str(&format!("<h3>{}</h3>\n", esc(h))),
                Block::Paragraph(p) => out.push_str(&format!("<p>{}</p>\n", esc(p))),
                Block::Note(n) => out.push_str(&format!("<p class=\"note\">{}</p>\n", esc(n))),
                Block::Table(t) => table(t, &mut out),
                Block::Statement(lines) => {
                    out.push_str("<dl class=\"statement\">\n");
                    for (k, v) in lines {
                        out.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", esc(k), esc(v)));
                    }
                    out.push_str("</dl>\n");
                }
                Block::Plots(names) => plots(names, all_plots, &mut out),
                Block::Preformatted(t) => out.push_str(&format!("<pre>{}</pre>\n", esc(t))),
            }
        }
        out.push_str("</section>\n");
    }
    out.push_str(
        "<footer>Written by klab report from the run folder's artifacts; the plots are also in plots/ as SVG files.</footer>\n",
    );
    out.push_str("</main>\n</body>\n</html>\n");
    out
}
