//! Values as ncu prints them, and their units.
//!
//! ncu prints numbers with thousands separators (`16,777,216`, `3,971.88`), sometimes with
//! six decimals (`2097152.000000`, seen in an imported report), `no data` or `n/a` when it
//! has no value, and text for some launch attributes (`PolicySpread`, `(32, 8, 1)`).
//!
//! Units are ncu's defaults, recorded as printed. They are not stable: a live `--csv --page
//! raw` run printed `gpu__time_duration.sum` in `ns` and `dram__bytes_read.sum` in `byte`,
//! while `--import` of a saved report printed the same metrics in `us` and `Mbyte`. Compare
//! values through [`convert`] (or [`MetricValue::number_in`]), never by their raw number.

use serde::{Deserialize, Serialize};

/// One value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Value {
    /// A number; thousands separators removed.
    Number(f64),
    /// `no data`, `n/a` or an empty field: the metric has no value for this kernel (ncu also
    /// prints `n/a` for a metric name it does not know).
    NoData,
    /// Anything else, verbatim (trimmed).
    Text(String),
}

impl Value {
    /// The number, if it is one.
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Value::Number(x) => Some(*x),
            _ => None,
        }
    }

    /// The text, if it is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// A metric's value and the unit ncu printed for it (empty when it printed none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricValue {
    /// As printed in the unit row, e.g. `sector`, `us`, `%`; empty when none.
    pub unit: String,
    /// The value.
    pub value: Value,
}

impl MetricValue {
    /// The number in `target` units (e.g. `"ns"`, `"byte"`), converting SI prefixes; `None`
    /// if there is no number or the units measure different things. See [`convert`].
    pub fn number_in(&self, target: &str) -> Option<f64> {
        convert(self.value.as_number()?, &self.unit, target)
    }

    /// This value as a [`Lookup`].
    pub fn lookup(&self) -> Lookup<'_> {
        match &self.value {
            Value::Number(x) => Lookup::Number(*x, &self.unit),
            Value::NoData => Lookup::NoData,
            Value::Text(s) => Lookup::Text(s),
        }
    }
}

/// The answer to "what is metric X for this kernel?".
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lookup<'a> {
    /// The report has no such column: the metric was not requested, or this GPU or ncu
    /// version does not have it.
    Absent,
    /// The column is there but ncu has no value (`no data`, `n/a`, empty).
    NoData,
    /// A number and its unit as printed.
    Number(f64, &'a str),
    /// A text value.
    Text(&'a str),
}

impl<'a> Lookup<'a> {
    /// The number, if it is one.
    pub fn number(&self) -> Option<f64> {
        match self {
            Lookup::Number(x, _) => Some(*x),
            _ => None,
        }
    }

    /// The number in `target` units (see [`convert`]).
    pub fn number_in(&self, target: &str) -> Option<f64> {
        match self {
            Lookup::Number(x, unit) => convert(*x, unit, target),
            _ => None,
        }
    }

    /// The unit, for a number.
    pub fn unit(&self) -> Option<&'a str> {
        match self {
            Lookup::Number(_, u) => Some(u),
            _ => None,
        }
    }

    /// The text, if it is text.
    pub fn text(&self) -> Option<&'a str> {
        match self {
            Lookup::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The column is not in the report.
    pub fn is_absent(&self) -> bool {
        matches!(self, Lookup::Absent)
    }
}

/// Read one field: `no data` / `n/a` / empty -> [`Value::NoData`]; a number (commas only as
/// thousands separators: one to three digits, then groups of exactly three) ->
/// [`Value::Number`]; anything else -> [`Value::Text`].
pub fn parse_value(field: &str) -> Value {
    let t = field.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("no data") || t.eq_ignore_ascii_case("n/a") {
        return Value::NoData;
    }
    match parse_number(t) {
        Some(x) => Value::Number(x),
        None => Value::Text(t.to_string()),
    }
}

/// A decimal number as ncu prints it: optional sign, an integer part that is plain digits or
/// grouped by commas in threes, optional fraction, optional exponent. `None` for anything
/// else (`(32, 8, 1)`, `1,2`, `1,2345`, `inf`).
pub fn parse_number(s: &str) -> Option<f64> {
    let t = s.trim();
    let body = t.strip_prefix(['-', '+']).unwrap_or(t);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(k) => (&body[..k], Some(&body[k + 1..])),
        None => (body, None),
    };
    if let Some(e) = exponent {
        let digits = e.strip_prefix(['-', '+']).unwrap_or(e);
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    if let Some(f) = frac {
        if !f.bytes().all(|c| c.is_ascii_digit()) || (f.is_empty() && int.is_empty()) {
            return None;
        }
    }
    if int.is_empty() {
        if frac.is_none_or(|f| f.is_empty()) {
            return None;
        }
    } else if int.contains(',') {
        let mut groups = int.split(',');
        let first = groups.next().unwrap_or("");
        if first.is_empty() || first.len() > 3 || !first.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        if !groups.all(|g| g.len() == 3 && g.bytes().all(|c| c.is_ascii_digit())) {
            return None;
        }
    } else if !int.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    t.replace(',', "").parse::<f64>().ok()
}

/// The number format of a page, told from all its numbers together (never one value at a
/// time): ncu writes numbers in the system locale, and a German or Spanish one writes
/// `13.490.336` for 13,490,336 and `44,19` for 44.19. Each numeric field is read both ways,
/// English and with `.` and `,` swapped:
///
/// * English only (`1,980,000`, `3,971.88`, `44.19`, `2097152.000000`): an English sign;
/// * swapped only: a comma-decimal sign, strong where English can have no such field even as
///   text (`13.490.336`, `1.234,5`: `.` groups digits), weak otherwise (`44,19`, which an
///   English page may hold as text, as ncu's `1,2` would be);
/// * both, with different values (`61.317`, `1,024`: one separator, three digits): locale
///   dependent; both, the same value (`100`): says nothing.
///
/// A page is English when it has an English sign and no strong comma-decimal sign (a weak
/// one beside it is text), or no sign and no locale-dependent value at all; otherwise it is
/// refused ([`NumberLocale::check`]): comma-decimal signs alone (weak ones too), both kinds
/// of sign, or only locale-dependent values (then nothing tells whether `61.317` is 61.317
/// or 61317, and a wrong guess is off by 1000). Every real
/// raw page tells: its device attributes hold numbers over a million (`1,980,000` kHz).
#[derive(Debug, Default)]
pub(crate) struct NumberLocale {
    english: Option<String>,
    strong_comma: Option<String>,
    weak_comma: Option<String>,
    dependent: Option<String>,
}

impl NumberLocale {
    /// Take one field's evidence (the first example of each kind is kept).
    pub(crate) fn add(&mut self, field: &str) {
        let t = field.trim();
        if !t.contains(['.', ',']) {
            return;
        }
        let swapped: String = t
            .chars()
            .map(|c| match c {
                '.' => ',',
                ',' => '.',
                c => c,
            })
            .collect();
        let slot = match (parse_number(t), parse_number(&swapped)) {
            (Some(_), None) => &mut self.english,
            (None, Some(_)) if t.matches('.').count() > 1 || dot_before_comma(t) => {
                &mut self.strong_comma
            }
            (None, Some(_)) => &mut self.weak_comma,
            (Some(a), Some(b)) if a != b => &mut self.dependent,
            _ => return,
        };
        slot.get_or_insert_with(|| t.to_string());
    }

    /// `Err` with what the numbers show, unless the page is English (see the type).
    pub(crate) fn check(&self) -> Result<(), String> {
        let comma = self.strong_comma.as_ref().or(self.weak_comma.as_ref());
        match (&self.english, comma) {
            (Some(_), None) => Ok(()),
            (Some(_), Some(_)) if self.strong_comma.is_none() => Ok(()),
            (Some(en), Some(c)) => Err(format!(
                "the numbers mix English (`{en}`) and comma-decimal (`{c}`) formats"
            )),
            (None, Some(c)) => {
                let also = self
                    .dependent
                    .as_ref()
                    .map(|d| format!(", so `{d}` is not what it reads as in English"))
                    .unwrap_or_default();
                Err(format!(
                    "the numbers are written in a comma-decimal locale (`{c}`){also}"
                ))
            }
            (None, None) => match &self.dependent {
                None => Ok(()),
                Some(d) => Err(format!(
                    "no number tells the locale the page was written in, and `{d}` reads 1000 times apart in English and in a comma-decimal locale (a whole raw page tells: its device attributes hold numbers over a million)"
                )),
            },
        }
    }
}

/// `1.234,5`: a `.` somewhere before a `,`.
fn dot_before_comma(t: &str) -> bool {
    matches!((t.find('.'), t.rfind(',')), (Some(d), Some(c)) if d < c)
}

/// Unit words that may carry an SI prefix (`Kbyte`, `us`, `Ghz`, `Tbyte/s`). `s` and
/// `second` are the same unit, as are `hz` and `Hz`.
const BASE_UNITS: [&str; 16] = [
    "second",
    "byte",
    "hz",
    "cycle",
    "inst",
    "sector",
    "request",
    "warp",
    "thread",
    "block",
    "wavefront",
    "bit",
    "pass",
    "cluster",
    "register",
    "%",
];

fn prefix_exponent(c: char) -> Option<i32> {
    Some(match c {
        'n' => -9,
        'u' | 'µ' => -6,
        'm' => -3,
        'K' | 'k' => 3,
        'M' => 6,
        'G' => 9,
        'T' => 12,
        'P' => 15,
        _ => return None,
    })
}

fn canonical_word(w: &str) -> String {
    match w {
        "s" | "sec" | "second" | "seconds" => "second".to_string(),
        "Hz" | "hz" => "hz".to_string(),
        other => other.to_string(),
    }
}

/// One side of a unit (`Kbyte`, `us`, `%`): its power of ten and the unprefixed unit.
fn scale_word(w: &str) -> (i32, String) {
    let w = w.trim();
    let canon = canonical_word(w);
    if BASE_UNITS.contains(&canon.as_str()) {
        return (0, canon);
    }
    let mut chars = w.chars();
    if let Some(c) = chars.next() {
        if let Some(e) = prefix_exponent(c) {
            let rest = canonical_word(chars.as_str());
            if BASE_UNITS.contains(&rest.as_str()) {
                return (e, rest);
            }
        }
    }
    (0, canon)
}

/// A unit as a power of ten and its unprefixed form: `us` -> (-6, `second`), `Gbyte/s` ->
/// (9, `byte/second`), `%/Kbyte` -> (-3, `%/byte`). Unknown words keep power 0.
pub fn unit_scale(unit: &str) -> (i32, String) {
    match unit.split_once('/') {
        Some((num, den)) => {
            let (ea, a) = scale_word(num);
            let (eb, b) = scale_word(den);
            (ea - eb, format!("{a}/{b}"))
        }
        None => scale_word(unit),
    }
}

/// Convert `value` from unit `from` to unit `to` when both measure the same thing, with
/// decimal SI prefixes (ncu's `Mbyte` is 10^6 bytes): `convert(84.48, "us", "ns")` is
/// 84480. `None` when the units differ in kind (`byte` to `ns`).
pub fn convert(value: f64, from: &str, to: &str) -> Option<f64> {
    if from == to {
        return Some(value);
    }
    let (ef, fb) = unit_scale(from);
    let (et, tb) = unit_scale(to);
    if fb != tb {
        return None;
    }
    // Multiply or divide by an exact power of ten, never by an inexact 1e-3.
    let d = ef - et;
    Some(if d >= 0 {
        value * 10f64.powi(d)
    } else {
        value / 10f64.powi(-d)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_with_thousands_separators() {
        assert_eq!(parse_number("16,777,216"), Some(16_777_216.0));
        assert_eq!(parse_number("3,971.88"), Some(3971.88));
        assert_eq!(
            parse_number("1,456,022,838,499.18"),
            Some(1_456_022_838_499.18)
        );
        assert_eq!(parse_number("2097152.000000"), Some(2_097_152.0));
        assert_eq!(parse_number("0"), Some(0.0));
        assert_eq!(parse_number("-12.5"), Some(-12.5));
        assert_eq!(parse_number("+7"), Some(7.0));
        assert_eq!(parse_number("1.5e3"), Some(1500.0));
        assert_eq!(parse_number("2E-2"), Some(0.02));
        assert_eq!(parse_number(".5"), Some(0.5));
        assert_eq!(parse_number("5."), Some(5.0));
    }

    #[test]
    fn commas_that_are_not_thousands_separators_make_text() {
        for s in [
            "(32, 8, 1)",
            "1,2",
            "1,2345",
            ",123",
            "1234,567",
            "1,,234",
            "12,345,67",
            "1,234.5,6",
            "",
            ".",
            "-",
            "e5",
            "1e",
            "1.2.3",
            "inf",
            "NaN",
            "0x10",
            "9.0.1",
        ] {
            assert_eq!(parse_number(s), None, "{s:?}");
        }
    }

    #[test]
    fn values() {
        assert_eq!(parse_value("no data"), Value::NoData);
        assert_eq!(parse_value("No Data"), Value::NoData);
        assert_eq!(parse_value("n/a"), Value::NoData);
        assert_eq!(parse_value("N/A"), Value::NoData);
        assert_eq!(parse_value(""), Value::NoData);
        assert_eq!(parse_value("  "), Value::NoData);
        assert_eq!(parse_value("65.05"), Value::Number(65.05));
        assert_eq!(
            parse_value("PolicySpread"),
            Value::Text("PolicySpread".into())
        );
        assert_eq!(parse_value("(32, 8, 1)"), Value::Text("(32, 8, 1)".into()));
        assert_eq!(parse_value(" 36,064 "), Value::Number(36064.0));
    }

    #[test]
    fn units_convert_with_si_prefixes() {
        assert_eq!(convert(84.48, "us", "ns"), Some(84_480.0));
        assert_eq!(convert(279_200.0, "ns", "ns"), Some(279_200.0));
        let b = convert(67.113472, "Mbyte", "byte").unwrap();
        assert!((b - 67_113_472.0).abs() < 1e-3, "{b}");
        let hz = convert(1.97, "Ghz", "hz").unwrap();
        assert!((hz - 1.97e9).abs() < 1.0);
        assert_eq!(convert(1.0, "ms", "second"), Some(1e-3));
        assert_eq!(convert(1.0, "s", "second"), Some(1.0));
        let bw = convert(3.5, "Tbyte/s", "Gbyte/second").unwrap();
        assert!((bw - 3500.0).abs() < 1e-9);
        let per = convert(9.86, "%/Kbyte", "%/byte").unwrap();
        assert!((per - 0.00986).abs() < 1e-12);
        assert_eq!(convert(4.0, "Kbyte/block", "byte/block"), Some(4000.0));
        assert_eq!(convert(1.0, "byte", "ns"), None);
        assert_eq!(convert(1.0, "sector", "byte"), None);
        assert_eq!(
            convert(28.0, "register/thread", "register/thread"),
            Some(28.0)
        );
        assert_eq!(convert(50.0, "%", "%"), Some(50.0));
        // Words that merely start with a prefix letter are not prefixed.
        assert_eq!(unit_scale("SM"), (0, "SM".to_string()));
        assert_eq!(unit_scale("pass"), (0, "pass".to_string()));
        assert_eq!(unit_scale("msecond"), (-3, "second".to_string()));
        assert_eq!(unit_scale("Gbyte/s"), (9, "byte/second".to_string()));
    }

    #[test]
    fn lookups() {
        let m = MetricValue {
            unit: "us".into(),
            value: Value::Number(2.5),
        };
        assert_eq!(m.lookup(), Lookup::Number(2.5, "us"));
        assert_eq!(m.number_in("ns"), Some(2500.0));
        assert_eq!(m.lookup().unit(), Some("us"));
        assert_eq!(Lookup::Absent.number(), None);
        assert!(Lookup::Absent.is_absent());
        assert!(!Lookup::NoData.is_absent());
        assert_eq!(Lookup::Text("x").text(), Some("x"));
        assert_eq!(Lookup::NoData.number_in("ns"), None);
    }

    #[test]
    fn the_locale_is_told_from_all_numbers_together() {
        let check = |fields: &[&str]| {
            let mut l = NumberLocale::default();
            fields.iter().for_each(|f| l.add(f));
            l.check()
        };
        assert!(check(&["1,980,000", "61.317"]).is_ok());
        assert!(check(&["2097152.000000", "1,024"]).is_ok());
        assert!(check(&["0", "100", "(32, 8, 1)", "n/a", "PolicySpread"]).is_ok());
        assert!(check(&["13.490.336", "61.317"]).is_err());
        assert!(check(&["1.234,5"]).is_err());
        assert!(check(&["44,19", "61.317"]).is_err());
        assert!(check(&["61.317"]).is_err());
        assert!(check(&["1,024"]).is_err());
        assert!(check(&["44.19", "13.490.336"]).is_err());
    }
}
