//! Escaping text taken from files, for HTML and for markdown. Every string a run folder
//! supplies (kernel names, details, commands, findings) goes through one of these before it
//! reaches the page, so a file cannot inject markup.

/// Escape for HTML text and attribute values: `& < > " '`.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escape for a markdown table cell or line: HTML's characters as entities (markdown
/// passes raw HTML through), markdown's active characters with a backslash, and line
/// breaks as spaces (a cell is one line).
pub fn markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' | '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_markup() {
        assert_eq!(
            html("<script>alert('x & y')</script>"),
            "&lt;script&gt;alert(&#39;x &amp; y&#39;)&lt;/script&gt;"
        );
        assert_eq!(html("a\"b"), "a&quot;b");
    }

    #[test]
    fn markdown_escapes_markup_and_table_syntax() {
        assert_eq!(markdown("<b>|x|</b>"), "&lt;b&gt;\\|x\\|&lt;/b&gt;");
        assert_eq!(
            markdown("transpose_tile<1>\nnext"),
            "transpose\\_tile&lt;1&gt; next"
        );
    }
}
