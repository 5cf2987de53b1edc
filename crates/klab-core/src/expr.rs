//! Integer expressions over named size variables, as written in kernel manifests.
//!
//! Buffer lengths, grid and block dimensions, dynamic shared bytes, useful bytes and FLOPs
//! are written as expressions such as `"rows * cols"`, `"ceil_div(cols, 32)"` or
//! `"(n + 255) / 256"`. An [`Expr`] is parsed once (a manifest field of type `Expr` is
//! checked when the manifest loads), lists the [variables](Expr::variables) it uses, and
//! is [evaluated](Expr::eval) against the declared sizes.
//!
//! Grammar (whitespace is allowed between any two tokens):
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/' | '%') unary)*
//! unary   := '-' unary | primary
//! primary := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//! number  := decimal digits with '_' separators (1_024), or hex (0x400)
//! name    := [A-Za-z_][A-Za-z0-9_]*
//! ```
//!
//! Functions: `ceil_div(a, b)` (b > 0), `min(a, b, ...)` and `max(a, b, ...)` (two or more
//! arguments). `/` is floor division and `%` its remainder (with the divisor's sign): on
//! non-negative operands the usual truncating division, and `-7 / 2 = -4`, `-7 % 2 = 1`.
//! Arithmetic is in i128, and every literal, variable and intermediate value must lie in
//! the i64 range; leaving it, dividing by zero or naming an undeclared variable is an
//! [`ExprError`] naming the expression.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// A value for each size variable: what expressions are evaluated at.
pub type Shape = BTreeMap<String, i64>;

/// `rows=7 cols=33`.
pub fn describe_shape(shape: &Shape) -> String {
    shape
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A parsed integer expression; it keeps, prints and serializes as its source text.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Expr {
    source: String,
    root: Node,
}

/// An expression that does not parse or does not evaluate: one line naming its source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expression '{expression}': {problem}")]
pub struct ExprError {
    pub expression: String,
    pub problem: Problem,
}

/// What went wrong. In the arithmetic problems the `String` is the subexpression's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Empty,
    /// A message and its 1-based column in characters; `None` is the end of the text.
    Parse(String, Option<usize>),
    UnknownVariable(String),
    DivisionByZero(String),
    ModuloByZero(String),
    CeilDivBy(String, i128),
    /// The value, where it was computable at all.
    Overflow(String, Option<i128>),
    Negative(i128),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A divisor's text is shown unless it is just the literal.
        let detail = |term: &String, v: i128| match *term == v.to_string() {
            true => String::new(),
            false => format!(" ({term} = {v})"),
        };
        match self {
            Problem::Empty => write!(f, "empty expression"),
            Problem::Parse(message, Some(c)) => write!(f, "{message} at column {c}"),
            Problem::Parse(message, None) => write!(f, "{message} at the end"),
            Problem::UnknownVariable(name) => write!(f, "unknown variable '{name}'"),
            Problem::DivisionByZero(t) => write!(f, "division by zero{}", detail(t, 0)),
            Problem::ModuloByZero(t) => write!(f, "modulo by zero{}", detail(t, 0)),
            Problem::CeilDivBy(t, v) => write!(f, "ceil_div by {v}{}", detail(t, *v)),
            Problem::Overflow(t, Some(v)) => {
                write!(f, "overflow: {t} = {v} is outside the i64 range")
            }
            Problem::Overflow(t, None) => write!(f, "overflow in {t}"),
            Problem::Negative(v) => write!(f, "value {v} is negative, expected a size"),
        }
    }
}

/// A tree node with the byte span of its text in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    kind: Kind,
    start: usize,
    end: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Num(i64),
    Var(String),
    Neg(Box<Node>),
    /// An operator, one of `+ - * / %`, and its operands.
    Bin(char, Box<Node>, Box<Node>),
    /// A function, one of [`FUNCTIONS`], and its arguments.
    Call(&'static str, Vec<Node>),
}

const FUNCTIONS: [&str; 3] = ["ceil_div", "min", "max"];

fn node(kind: Kind, start: usize, end: usize) -> Node {
    Node { kind, start, end }
}

/// The error's one line names the expression; a very long one by its start and length.
fn failure(expression: &str) -> impl Fn(Problem) -> ExprError + '_ {
    const SHOWN: usize = 100;
    move |problem| ExprError {
        expression: match expression.chars().count() {
            n if n > SHOWN + 20 => {
                let start: String = expression.chars().take(SHOWN).collect();
                format!("{start}... ({n} characters)")
            }
            _ => expression.to_string(),
        },
        problem,
    }
}

impl Expr {
    /// Parses `text`; the error names the text and the column of the first problem.
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        if text.trim().is_empty() {
            return Err(failure(text)(Problem::Empty));
        }
        let mut parser = Parser {
            text,
            pos: 0,
            depth: 0,
            operators: 0,
        };
        let root = parser.expr().map_err(failure(text))?;
        if parser.peek().is_some() {
            return Err(failure(text)(
                parser.error("expected an operator or the end"),
            ));
        }
        Ok(Expr {
            source: text.to_string(),
            root,
        })
    }

    /// The text the expression was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Every variable name the expression uses.
    pub fn variables(&self) -> BTreeSet<String> {
        fn walk(node: &Node, out: &mut BTreeSet<String>) {
            match &node.kind {
                Kind::Num(_) => {}
                Kind::Var(name) => drop(out.insert(name.clone())),
                Kind::Neg(a) => walk(a, out),
                Kind::Bin(_, a, b) => [a, b].iter().for_each(|n| walk(n, out)),
                Kind::Call(_, args) => args.iter().for_each(|n| walk(n, out)),
            }
        }
        let mut out = BTreeSet::new();
        walk(&self.root, &mut out);
        out
    }

    /// The value with each variable taken from `vars`.
    pub fn eval(&self, vars: &BTreeMap<String, i64>) -> Result<i128, ExprError> {
        self.value(&self.root, vars).map_err(failure(&self.source))
    }

    /// The value as a size: an error unless it is non-negative (it then fits u64).
    pub fn eval_u64(&self, vars: &BTreeMap<String, i64>) -> Result<u64, ExprError> {
        let v = self.eval(vars)?;
        u64::try_from(v).map_err(|_| failure(&self.source)(Problem::Negative(v)))
    }

    /// The text of `node`, without surrounding whitespace or enclosing parentheses.
    fn term(&self, node: &Node) -> String {
        let mut s = self.source[node.start..node.end].trim();
        while s.starts_with('(') && closes_at_end(s) {
            s = s[1..s.len() - 1].trim();
        }
        s.to_string()
    }

    fn value(&self, node: &Node, vars: &BTreeMap<String, i64>) -> Result<i128, Problem> {
        let value = match &node.kind {
            Kind::Num(v) => Some(i128::from(*v)),
            Kind::Var(name) => match vars.get(name) {
                Some(v) => Some(i128::from(*v)),
                None => return Err(Problem::UnknownVariable(name.clone())),
            },
            Kind::Neg(a) => self.value(a, vars)?.checked_neg(),
            Kind::Bin(op, a, b) => {
                let (x, y) = (self.value(a, vars)?, self.value(b, vars)?);
                match op {
                    '+' => x.checked_add(y),
                    '-' => x.checked_sub(y),
                    '*' => x.checked_mul(y),
                    '/' if y == 0 => return Err(Problem::DivisionByZero(self.term(b))),
                    '%' if y == 0 => return Err(Problem::ModuloByZero(self.term(b))),
                    '/' => floor_div(x, y),
                    _ => floor_div(x, y).and_then(|q| x.checked_sub(q.checked_mul(y)?)),
                }
            }
            Kind::Call(func, args) => {
                let mut v = Vec::with_capacity(args.len());
                for a in args {
                    v.push(self.value(a, vars)?);
                }
                match *func {
                    "ceil_div" if v[1] <= 0 => {
                        return Err(Problem::CeilDivBy(self.term(&args[1]), v[1]));
                    }
                    "ceil_div" => floor_div(-v[0], v[1]).map(|q| -q),
                    "min" => v.into_iter().min(),
                    _ => v.into_iter().max(),
                }
            }
        };
        match value {
            Some(v) if i64::try_from(v).is_ok() => Ok(v),
            v => Err(Problem::Overflow(self.term(node), v)),
        }
    }
}

/// Floor division (`y != 0`); `None` only on i128 overflow.
fn floor_div(x: i128, y: i128) -> Option<i128> {
    let q = x.checked_div(y)?;
    Some(q - i128::from(x % y != 0 && (x < 0) != (y < 0)))
}

/// Whether the '(' opening `s` is closed by its last character.
fn closes_at_end(s: &str) -> bool {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 1 => return i == s.len() - 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Expr({:?})", self.source)
    }
}

impl TryFrom<String> for Expr {
    type Error = ExprError;
    fn try_from(s: String) -> Result<Expr, ExprError> {
        Expr::parse(&s)
    }
}

impl From<Expr> for String {
    fn from(e: Expr) -> String {
        e.source
    }
}

/// Deepest nesting of parentheses, calls and unary minus accepted.
const MAX_DEPTH: usize = 64;

/// Most binary operators in one expression. A chain of them is a tree as deep as it is
/// long, which evaluating and dropping walk recursively: the cap keeps that far from the
/// stack's end, and far above what a size expression needs.
const MAX_OPERATORS: usize = 1024;

/// A recursive-descent parser over the text; `pos` is a byte offset.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
    operators: usize,
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Parser<'_> {
    /// Skips whitespace and returns the next character, not consuming it.
    fn peek(&mut self) -> Option<char> {
        let rest = &self.text[self.pos..];
        let trimmed = rest.trim_start();
        self.pos += rest.len() - trimmed.len();
        trimmed.chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(c);
        self.pos += usize::from(found);
        found
    }

    /// `message` at the current position.
    fn error(&self, message: &str) -> Problem {
        let column = self.text[..self.pos].chars().count() + 1;
        let at_end = self.pos == self.text.len();
        Problem::Parse(message.to_string(), (!at_end).then_some(column))
    }

    /// A left-associative chain of `next`s joined by the operators in `ops`.
    fn chain(
        &mut self,
        ops: &str,
        next: fn(&mut Self) -> Result<Node, Problem>,
    ) -> Result<Node, Problem> {
        let mut left = next(self)?;
        while let Some(op) = self.peek().filter(|c| ops.contains(*c)) {
            if self.operators == MAX_OPERATORS {
                return Err(self.error(&format!(
                    "more than {MAX_OPERATORS} operators in one expression"
                )));
            }
            self.operators += 1;
            self.pos += 1;
            let right = next(self)?;
            let (start, end) = (left.start, right.end);
            left = node(Kind::Bin(op, Box::new(left), Box::new(right)), start, end);
        }
        Ok(left)
    }

    fn expr(&mut self) -> Result<Node, Problem> {
        self.chain("+-", Self::term)
    }

    fn term(&mut self) -> Result<Node, Problem> {
        self.chain("*/%", Self::unary)
    }

    fn unary(&mut self) -> Result<Node, Problem> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error("expression nested too deeply"));
        }
        self.depth += 1;
        let start = self.pos;
        let result = match self.eat('-') {
            true => self.unary().map(|a| {
                let end = a.end;
                node(Kind::Neg(Box::new(a)), start, end)
            }),
            false => self.primary(),
        };
        self.depth -= 1;
        result
    }

    fn primary(&mut self) -> Result<Node, Problem> {
        let c = self.peek();
        let start = self.pos;
        if self.eat('(') {
            let inner = self.expr()?;
            if !self.eat(')') {
                return Err(self.error("expected ')'"));
            }
            return Ok(node(inner.kind, start, self.pos));
        }
        let Some(c) = c.filter(|c| is_word(*c)) else {
            return Err(self.error("expected a number, a name or '('"));
        };
        let rest = &self.text[start..];
        let word = &rest[..rest.find(|c| !is_word(c)).unwrap_or(rest.len())];
        let end = start + word.len();
        if c.is_ascii_digit() {
            let (digits, radix) = match word.strip_prefix("0x").or(word.strip_prefix("0X")) {
                Some(hex) => (hex, 16),
                None => (word, 10),
            };
            let bad = digits.is_empty() || digits.starts_with('_') || digits.ends_with('_');
            return match i64::from_str_radix(&digits.replace('_', ""), radix) {
                Ok(v) if !bad => {
                    self.pos = end;
                    Ok(node(Kind::Num(v), start, end))
                }
                Err(e) if !bad && *e.kind() == std::num::IntErrorKind::PosOverflow => {
                    Err(self.error(&format!("number {word} is outside the i64 range")))
                }
                _ => Err(self.error(&format!("invalid number '{word}'"))),
            };
        }
        self.pos = end;
        if !self.eat('(') {
            return Ok(node(Kind::Var(word.to_string()), start, end));
        }
        let Some(&name) = FUNCTIONS.iter().find(|f| **f == word) else {
            self.pos = start;
            let known = FUNCTIONS.join(", ");
            return Err(self.error(&format!("unknown function '{word}' (known: {known})")));
        };
        let mut args = vec![self.expr()?];
        while self.eat(',') {
            args.push(self.expr()?);
        }
        if !self.eat(')') {
            return Err(self.error("expected ',' or ')'"));
        }
        if args.len() < 2 || (name == "ceil_div" && args.len() > 2) {
            let wanted = if name == "ceil_div" {
                "2"
            } else {
                "at least 2"
            };
            self.pos = start;
            return Err(self.error(&format!(
                "{name} takes {wanted} arguments, got {}",
                args.len()
            )));
        }
        Ok(node(Kind::Call(name, args), start, self.pos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// The value, or the error's one line.
    fn eval(text: &str, pairs: &[(&str, i64)]) -> Result<i128, String> {
        let e = Expr::parse(text).map_err(|e| e.to_string())?;
        e.eval(&vars(pairs)).map_err(|e| e.to_string())
    }

    const V: [(&str, i64); 7] = [
        ("rows", 100),
        ("cols", 70),
        ("n", 1000),
        ("k", 32),
        ("z", 0),
        ("a", 1 << 40),
        ("b", 1 << 40),
    ];

    /// `text = value` cases, separated by ';'.
    const VALUES: &str = "
        2 + 3 * 4 = 14; 20 - 4 - 3 = 13; 100 / 10 / 5 = 2; -3 * 2 = -6; (2 + 3) * 4 = 20;
        2 * -3 = -6; - -4 = 4; -(2 + 3) = -5; 17 % 5 * 2 = 4; 2 - 3 + 4 = 3; 12 / 2 * 3 = 18;
        1_024 = 1024; 0x400 = 1024; 0Xff_ff = 65535; 9223372036854775807 = 9223372036854775807;
        7 / 2 = 3; 7 % 2 = 1; -7 / 2 = -4; -7 % 2 = 1; 7 / -2 = -4; 7 % -2 = -1; -8 / 2 = -4;
        -8 % 2 = 0; rows * cols = 7000; 2 * rows * cols * 4 = 56000; (n + 255) / 256 = 4;
        ceil_div(cols, 32) = 3; ceil_div(64, k) = 2; ceil_div(z, 32) = 0; ceil_div(-7, 2) = -3;
        min(256, n) = 256; min(n, rows, cols) = 70; max(1, n % 7) = 6; max(rows, -1, 3) = 100;
        ceil_div ( n , 3 ) + max(min(1,2),z) = 335; \t( (\n7 ) )\t = 7";

    #[test]
    fn values() {
        for case in VALUES.split(';') {
            let (text, want) = case.trim_matches(' ').rsplit_once(" = ").unwrap();
            assert_eq!(eval(text, &V), Ok(want.parse().unwrap()), "{text}");
        }
        // A function's name without '(' is an ordinary variable.
        assert_eq!(eval("min + 1", &[("min", 4)]), Ok(5));
    }

    #[test]
    fn evaluation_errors_name_the_expression() {
        let a_b = "overflow: a * b = 1208925819614629174706176 is outside the i64 range";
        let cases = [
            ("rows / (cols - 70)", "division by zero (cols - 70 = 0)"),
            ("rows / 0", "division by zero"),
            ("rows % 0", "modulo by zero"),
            ("rows % (z)", "modulo by zero (z = 0)"),
            ("ceil_div(n, 0)", "ceil_div by 0"),
            ("ceil_div(n, k - 34)", "ceil_div by -2 (k - 34 = -2)"),
            ("rows * colz", "unknown variable 'colz'"),
            ("1 + (a * b)", a_b),
            ("a * b / b", a_b), // back in range afterwards is still an error
            (
                "-9223372036854775807 - 2",
                "overflow: -9223372036854775807 - 2 = ",
            ),
        ];
        for (text, message) in cases {
            let got = eval(text, &V).unwrap_err();
            let want = format!("expression '{text}': {message}");
            assert!(got.starts_with(&want), "{got}");
        }
        assert_eq!(
            eval("9223372036854775807 + 1", &[]).unwrap_err(),
            "expression '9223372036854775807 + 1': overflow: 9223372036854775807 + 1 = \
             9223372036854775808 is outside the i64 range"
        );
        let e = Expr::parse("n - 5").unwrap();
        assert_eq!(e.eval_u64(&vars(&[("n", 7)])), Ok(2));
        let negative = e.eval_u64(&vars(&[("n", 3)])).unwrap_err().to_string();
        assert_eq!(
            negative,
            "expression 'n - 5': value -2 is negative, expected a size"
        );
    }

    /// `text => message` cases, one a line.
    const PARSE_ERRORS: &str = "
        rows * * 2 => expected a number, a name or '(' at column 8
        1 + => expected a number, a name or '(' at the end
        (1 + 2 => expected ')' at the end
        1 2 => expected an operator or the end at column 3
        n ) => expected an operator or the end at column 3
        n $ 2 => expected an operator or the end at column 3
        é + 1 => expected a number, a name or '(' at column 1
        2 * (é) => expected a number, a name or '(' at column 6
        foo(1, 2) => unknown function 'foo' (known: ceil_div, min, max) at column 1
        1 + ceil_div(1) => ceil_div takes 2 arguments, got 1 at column 5
        ceil_div(1, 2, 3) => ceil_div takes 2 arguments, got 3 at column 1
        min(n) => min takes at least 2 arguments, got 1 at column 1
        max(n) => max takes at least 2 arguments, got 1 at column 1
        max() => expected a number, a name or '(' at column 5
        min(1, 2 => expected ',' or ')' at the end
        1_ => invalid number '1_' at column 1
        2 * 0x => invalid number '0x' at column 5
        12ab => invalid number '12ab' at column 1
        9223372036854775808 => number 9223372036854775808 is outside the i64 range at column 1";

    #[test]
    fn parse_errors_give_the_column() {
        for line in PARSE_ERRORS.trim().lines() {
            let (text, message) = line.trim().split_once(" => ").unwrap();
            let e = Expr::parse(text).unwrap_err();
            assert_eq!(e.to_string(), format!("expression '{text}': {message}"));
        }
        for empty in ["", "  \t"] {
            let e = Expr::parse(empty).unwrap_err().to_string();
            assert_eq!(e, format!("expression '{empty}': empty expression"));
        }
        let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
        assert!(Expr::parse(&deep)
            .unwrap_err()
            .to_string()
            .contains("nested too deeply"));
        assert_eq!(
            eval(&format!("{}1{}", "(".repeat(50), ")".repeat(50)), &[]),
            Ok(1)
        );
        // A flat chain is no deeper in the parser, but as deep a tree: refused past the
        // cap (40,000 terms overflowed the stack), with the text clipped in the line.
        let long = |terms: usize| vec!["n"; terms].join("+");
        assert_eq!(eval(&long(MAX_OPERATORS + 1), &[("n", 2)]), Ok(2050));
        let e = Expr::parse(&long(40_000)).unwrap_err().to_string();
        assert!(
            e.starts_with("expression 'n+n+") && e.contains("... (79999 characters)"),
            "{e}"
        );
        assert!(
            e.ends_with("more than 1024 operators in one expression at column 2050"),
            "{e}"
        );
        assert!(e.len() < 200, "{e}");
    }

    #[test]
    fn variables_and_source() {
        let e = Expr::parse("ceil_div(rows, tile) * cols + rows").unwrap();
        assert_eq!(
            e.variables().into_iter().collect::<Vec<_>>(),
            ["cols", "rows", "tile"]
        );
        assert!(Expr::parse("2 * 3").unwrap().variables().is_empty());
        assert_eq!(e.source(), "ceil_div(rows, tile) * cols + rows");
        assert_eq!(e.to_string(), e.source());
        assert_eq!(
            format!("{e:?}"),
            "Expr(\"ceil_div(rows, tile) * cols + rows\")"
        );
    }

    #[derive(Debug, Deserialize, Serialize)]
    struct X {
        e: Expr,
    }

    #[test]
    fn serde_through_toml() {
        let x: X = toml::from_str(r#"e = "ceil_div(n, 32) * 4""#).unwrap();
        assert_eq!(x.e.eval_u64(&vars(&[("n", 33)])), Ok(8));
        let text = toml::to_string(&x).unwrap();
        assert_eq!(text.trim(), r#"e = "ceil_div(n, 32) * 4""#);
        assert_eq!(toml::from_str::<X>(&text).unwrap().e, x.e);
        // toml shows the offending line, field name included, above the expression's error.
        let bad = toml::from_str::<X>(r#"e = "rows * * 2""#)
            .unwrap_err()
            .to_string();
        assert!(bad.contains(r#"e = "rows * * 2""#), "{bad}");
        assert!(
            bad.contains("expression 'rows * * 2': expected a number"),
            "{bad}"
        );
        let wrong = toml::from_str::<X>("e = 3").unwrap_err().to_string();
        assert!(wrong.contains("e = 3"), "{wrong}");
    }

    fn apply(op: char, x: i64, y: i64) -> i64 {
        match op {
            '+' => x + y,
            '-' => x - y,
            '*' => x * y,
            '/' => x.div_euclid(y),
            _ => x.rem_euclid(y),
        }
    }

    proptest::proptest! {
        // Divisors are positive, where floor division is Rust's div_euclid.
        #[test]
        fn matches_rust_arithmetic(
            a in -1000i64..1000,
            b in 1i64..1000,
            c in 1i64..1000,
            op1 in proptest::sample::select(vec!['+', '-', '*', '/', '%']),
            op2 in proptest::sample::select(vec!['+', '-', '*', '/', '%']),
            named in proptest::bool::ANY,
        ) {
            let tight = |op: char| "*/%".contains(op);
            let expected = if tight(op2) && !tight(op1) {
                apply(op1, a, apply(op2, b, c))
            } else {
                apply(op2, apply(op1, a, b), c)
            };
            let text = match named {
                true => format!("a {op1} b {op2} c"),
                false => format!("{a} {op1} {b}{op2}{c}"),
            };
            let got = eval(&text, &[("a", a), ("b", b), ("c", c)]);
            proptest::prop_assert_eq!(got, Ok(i128::from(expected)), "{}", text);
        }
    }
}
