//! Text for one-line messages and table cells.

use std::time::Duration;

/// Control characters (newlines, tabs) to spaces.
/// `Serialize` and `Deserialize` for a type through its `Display` and `FromStr` (the text a
/// command line gives): `klab_core::serde_as_text!(ShapeArg);`.
#[macro_export]
macro_rules! serde_as_text {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <String as serde::Deserialize>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The first non-empty line, clipped to `max` characters.
pub fn first_line_clipped(s: &str, max: usize) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line = line
        .trim_start_matches('=')
        .trim_start()
        .chars()
        .take(max)
        .collect::<String>();
    one_line(&line)
}

/// A C identifier: a letter or `_`, then letters, digits and `_`.
pub fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// The template a C++ template-id names (`scale` of `scale<float, 128>`, `ns::scale` of
/// `ns::scale<T>`), or `None` when `s` is not one ([`template_id`]).
pub fn template_name(s: &str) -> Option<&str> {
    template_id(s).map(|(name, _)| name)
}

/// A C++ template-id's template and its arguments as written, trimmed and split at the
/// commas outside nested `<>` and `()` (`scale<float, f<int, 2>>` gives `scale` and
/// `["float", "f<int, 2>"]`), or `None` when `s` is not one: a name (identifiers joined by
/// `::`), `<`, arguments (none where every one has a default), and the `>` that closes the
/// first `<` as the last character. The arguments are types and constant expressions:
/// identifiers, numbers, character literals, spaces, operators (`1 << 7`, `3 % 2`, `~0`,
/// `!B`), nested template-ids and parentheses, inside which `<` and `>` compare
/// (`(256 > 128)`). The compiler judges what they mean; this only says where each ends.
pub fn template_id(s: &str) -> Option<(&str, Vec<&str>)> {
    let open = s.find('<')?;
    let (name, rest) = (s[..open].trim_end(), &s[open..]);
    if !name.split("::").all(is_identifier) {
        return None;
    }
    let inner = rest.strip_prefix('<')?.strip_suffix('>')?;
    // Every character allowed below is ASCII, so a char's index is its byte offset.
    let args: Vec<char> = inner.chars().collect();
    let (mut angle, mut paren) = (0i32, 0i32);
    let mut cuts = vec![0];
    let mut i = 0;
    while i < args.len() {
        match args[i] {
            '(' | '[' => paren += 1,
            ')' | ']' => paren -= 1,
            // In parentheses, a comparison or a shift.
            '<' | '>' if paren > 0 => {}
            // A shift: `<<` is one token.
            '<' if args.get(i + 1) == Some(&'<') => i += 1,
            '<' => angle += 1,
            '>' => angle -= 1,
            ',' if angle == 0 && paren == 0 => cuts.push(i),
            // A character literal: `'a'`, `'\n'`.
            '\'' => {
                let close = (i + 1..args.len().min(i + 5))
                    .find(|&k| args[k] == '\'' && args[k - 1] != '\\')?;
                i = close;
            }
            c if c.is_ascii_alphanumeric() || " _,:*&.+-%~!^|/?=".contains(c) => {}
            _ => return None,
        }
        // A `>` closing the outer `<` before the end: `k<a>b<c>`.
        if angle < 0 || paren < 0 {
            return None;
        }
        i += 1;
    }
    if angle != 0 || paren != 0 {
        return None;
    }
    cuts.push(inner.len());
    let pieces: Vec<&str> = cuts
        .windows(2)
        .enumerate()
        .map(|(k, w)| inner[w[0] + usize::from(k > 0)..w[1]].trim())
        .collect();
    // `k<>`: no arguments, not one empty one.
    let arguments = match pieces.as_slice() {
        [""] => Vec::new(),
        _ => pieces,
    };
    Some((name, arguments))
}

/// A process's death by `signal` as a person reads it: `signal 11 (SIGSEGV, an invalid
/// memory access)`; the number alone for a signal without a usual meaning here.
pub fn describe_signal(signal: i32) -> String {
    let name = match signal {
        4 => Some("SIGILL, an illegal instruction"),
        6 => Some("SIGABRT, an abort: a failed assert or abort()"),
        7 => Some("SIGBUS, a bad memory access"),
        8 => Some("SIGFPE, an arithmetic fault such as an integer division by zero"),
        9 => Some("SIGKILL"),
        11 => Some("SIGSEGV, an invalid memory access"),
        13 => Some("SIGPIPE"),
        15 => Some("SIGTERM"),
        _ => None,
    };
    match name {
        Some(n) => format!("signal {signal} ({n})"),
        None => format!("signal {signal}"),
    }
}

/// A duration as a person reads it: `1.5 s` from a second up, `250 ms` below.
/// `'text'` for a POSIX shell (a `'` inside as `'\''`).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// One word of a command line as a person would type it: as it is when a shell leaves it
/// alone, quoted otherwise.
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        shell_quote(s)
    }
}

pub fn describe_duration(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// An error and its causes as one message, `outer: inner: ...`, each said once: a cause whose
/// words the message already holds (a wrapper that repeats its source) is not said again.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(e);
    while let Some(cause) = next {
        let said = cause.to_string();
        if !text.contains(said.as_str()) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&said);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_word_is_quoted_only_when_a_shell_would_change_it() {
        assert_eq!(shell_word("--n=4096"), "--n=4096");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word(r#"{"x":"it's"}"#), r#"'{"x":"it'\''s"}'"#);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(describe_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(describe_duration(Duration::from_millis(1500)), "1.5 s");
    }

    #[test]
    fn template_ids_are_a_name_and_balanced_arguments() {
        for (id, name) in [
            ("scale<float, 128>", "scale"),
            ("scale<float,128>", "scale"),
            ("ns::inner::k<T*, -1>", "ns::inner::k"),
            ("k<pair<int, float>, (4 + 4)>", "k"),
            ("k <unsigned long long>", "k"),
            // Every argument defaulted; constant expressions (a reviewer's public kernels).
            ("k<>", "k"),
            ("scale<float, 1 << 7>", "scale"),
            ("scale<float, (256 > 128)>", "scale"),
            ("scale<float, 3 % 2>", "scale"),
            ("scale<float, ~0>", "scale"),
            ("scale<!false>", "scale"),
            ("scale<'a'>", "scale"),
            ("scale<'\\''>", "scale"),
            ("scale<Tag<float>>", "scale"),
            ("scale<a[1]>", "scale"),
        ] {
            assert_eq!(template_name(id), Some(name), "{id}");
        }
        for junk in [
            "scale",
            "k<",
            "<float>",
            "k<'ab>",
            "k<(1 < 2>",
            "k<float>>",
            "k<float>x",
            "k<a>b<c>",
            "k<float;>",
            "k<\"s\">",
            "k<(int>",
            "1k<int>",
            "a::<int>",
            "k k<int>",
        ] {
            assert_eq!(template_name(junk), None, "{junk}");
        }
    }

    #[test]
    fn a_template_ids_arguments_split_at_its_own_commas() {
        for (id, args) in [
            ("k<>", vec![]),
            ("k<float>", vec!["float"]),
            ("k< float , 128 >", vec!["float", "128"]),
            (
                "k<pair<int, float>, (4, 4), f<a<b>>>",
                vec!["pair<int, float>", "(4, 4)", "f<a<b>>"],
            ),
            (
                "k<float, (2 > 1), 1 << 7>",
                vec!["float", "(2 > 1)", "1 << 7"],
            ),
            ("k<','>", vec!["','"]),
        ] {
            assert_eq!(template_id(id), Some(("k", args)), "{id}");
        }
    }
}
