//! The `__global__` functions of a CUDA source, read from its text: what `klab init`
//! writes a skeleton from and what a manifest's `params` are checked against.
//!
//! [`kernels`] reads the source as tokens (comments, string and character literals and
//! preprocessor lines cannot fake a kernel) and finds every `__global__` function: its
//! name, whether it is `extern "C"` (inside an `extern "C" { }` block too) or a template,
//! its `__launch_bounds__`, and each parameter ([`Param`]): a pointer (with the constness
//! of what it points to) or a value, of an element type klab knows ([`Dtype`]), a vector
//! type such as `float4`, or a type klab has no dtype for (kept by name, never an error).
//! [`lookup_entry`] finds one entry by name.

use klab_core::dtype::Dtype;

/// An element type as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elem {
    Known(Dtype),
    /// C++'s `bool`: one byte that must hold 0 or 1.
    Bool,
    /// A CUDA vector type (`float4`): `count` elements of `dtype`.
    Vector {
        dtype: Dtype,
        count: u32,
        name: String,
    },
    /// No dtype: the type as written and why.
    Unknown {
        name: String,
        why: String,
    },
}

/// How a parameter is passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamKind {
    /// `T*` or `T[]`; `read_only` when what it points to is `const`.
    Pointer { elem: Elem, read_only: bool },
    /// By value.
    Value(Elem),
}

/// One parameter of a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The name, or `None` where a declaration leaves it out.
    pub name: Option<String>,
    pub kind: ParamKind,
    /// The parameter as written, on one line (for notes).
    pub text: String,
    /// Its type as written, without its name or default (`const float *`): what an entry
    /// naming one of several overloads gives (`k(const float *, int)`).
    pub type_text: String,
    /// Written in a branch of an `#if` klab cannot decide, apart from its kernel.
    pub conditional: bool,
    /// A function parameter pack (`Ts... rest`): any number of parameters.
    pub pack: bool,
}

/// A `__global__` function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub name: String,
    /// The named namespaces around it, outermost first: empty in the global namespace. An
    /// anonymous or inline namespace adds none (its names are reached without it).
    pub scope: Vec<String>,
    /// 1-based line of `__global__`.
    pub line: usize,
    pub extern_c: bool,
    /// The template parameter list (`typename T, int B`) of a template kernel.
    pub template: Option<String>,
    /// The arguments of `__launch_bounds__(...)`.
    pub launch_bounds: Option<String>,
    pub params: Vec<Param>,
    /// The branches of `#if` groups klab cannot decide (`#ifdef X ... #else`) it is declared
    /// in, as (group, branch) pairs: a kernel of the same name in another branch of one of
    /// those groups is the compiler's alternative, not an overload ([`Kernel::exclusive_with`]).
    pub branches: Vec<(u32, u32)>,
    /// Its name is in another branch than its `__global__` (`__global__ void` then `#ifdef D`,
    /// `k(double *x)`, `#else`, `k(float *x)`, `#endif`): klab cannot tell which declaration
    /// the compiler sees.
    pub header_uncertain: bool,
}

impl Kernel {
    /// Whether this kernel and `other` are in different branches of one `#if` group: the
    /// compiler sees at most one of them.
    pub fn exclusive_with(&self, other: &Kernel) -> bool {
        self.branches
            .iter()
            .any(|(g, i)| other.branches.iter().any(|(h, j)| g == h && i != j))
    }

    /// The parameters klab can hold to the kernel's, and whether they are all of them: those
    /// before the first one in a branch of an `#if` (`#ifdef WITH_Z float *z, #endif`), after
    /// which which parameters the compiler sees is not known, or the first pack (`Ts...
    /// rest`), which stands for any number; none where the name itself is in such a branch.
    pub fn readable_params(&self) -> (&[Param], bool) {
        if self.header_uncertain {
            return (&[], false);
        }
        match self.params.iter().position(|p| p.conditional || p.pack) {
            Some(i) => (&self.params[..i], false),
            None => (&self.params, true),
        }
    }

    /// This template kernel as its instance `args` (the entry's template arguments, as
    /// written) declares it: each parameter whose type is one of the template's type
    /// parameters (`T *x`, `const T a`) read with the type the entry gives it, or the
    /// parameter's default (`typename T = float`). A type klab cannot read (`Foo<2>`, a
    /// pointer, a pack's) leaves the parameter unknown, as before.
    pub fn instance(&self, args: &[&str]) -> Kernel {
        let given = self
            .template
            .as_deref()
            .map(|list| template_type_arguments(list, args))
            .unwrap_or_default();
        let read = |elem: &Elem| match elem {
            Elem::Unknown { name, why } if why == TEMPLATE_PARAMETER => given
                .iter()
                .find(|(t, _)| t == name)
                .and_then(|(_, ty)| type_of(ty)),
            _ => None,
        };
        let mut k = self.clone();
        for p in &mut k.params {
            match &mut p.kind {
                ParamKind::Pointer { elem, .. } | ParamKind::Value(elem) => {
                    if let Some(e) = read(elem) {
                        *elem = e;
                    }
                }
            }
        }
        k
    }

    /// The name a program reaches it by from the global namespace: `ns::k`, or `k`.
    pub fn qualified(&self) -> String {
        self.scope
            .iter()
            .chain([&self.name])
            .cloned()
            .collect::<Vec<_>>()
            .join("::")
    }

    /// The entry that names this kernel among overloads: `ops::k(const float *, int)`.
    pub fn with_types(&self) -> String {
        format!(
            "{}({})",
            self.qualified(),
            self.params
                .iter()
                .map(|p| p.type_text.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Punct(char),
    /// A number or a character literal, as written.
    Number(String),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
    /// The branches of `#if` groups klab cannot decide (`#ifdef`, an expression) it is in,
    /// as (group, branch) pairs, outermost first: the compiler may not see it.
    branches: std::sync::Arc<[(u32, u32)]>,
}

/// What klab knows of a preprocessor conditional: `#if 0` is dead, `#if 1` live, anything
/// else (`#ifdef X`, an expression) undecided, and so are the branches after it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Branch {
    Live,
    Dead,
    Undecided,
}

/// An open `#if` group: the branch now, and whether an earlier branch was taken (None:
/// cannot tell).
#[derive(Debug, Clone, Copy)]
struct Group {
    branch: Branch,
    taken: Option<bool>,
    /// Which group (in order of their `#if`s) and which of its branches.
    id: u32,
    index: u32,
}

/// A constant `#if` condition klab can decide: `0`, `1`, `false`, `true`.
fn decide(condition: &str) -> Option<bool> {
    let c = condition
        .split("//")
        .next()
        .unwrap_or("")
        .split("/*")
        .next()
        .unwrap_or("")
        .trim();
    match c {
        "0" | "false" | "(0)" => Some(false),
        "1" | "true" | "(1)" => Some(true),
        _ => None,
    }
}

/// The groups after a conditional directive (`directive` from its `#`), or None for
/// another directive.
fn after_conditional(groups: &mut Vec<Group>, next_id: &mut u32, directive: &str) -> Option<()> {
    let body = directive.trim_start_matches('#').trim_start();
    let word: String = body
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let rest = &body[word.len()..];
    let branch = |taken: Option<bool>| match taken {
        Some(true) => Branch::Live,
        Some(false) => Branch::Dead,
        None => Branch::Undecided,
    };
    let mut open = |taken: Option<bool>| {
        *next_id += 1;
        Group {
            branch: branch(taken),
            taken,
            id: *next_id,
            index: 0,
        }
    };
    match word.as_str() {
        "if" => groups.push(open(decide(rest))),
        "ifdef" | "ifndef" => groups.push(open(None)),
        "elif" | "elifdef" | "elifndef" | "else" => {
            let g = groups.last_mut()?;
            let this = if word == "elif" {
                decide(rest)
            } else if word == "else" {
                Some(true)
            } else {
                None
            };
            g.index += 1;
            (g.branch, g.taken) = match g.taken {
                Some(true) => (Branch::Dead, Some(true)),
                Some(false) => (branch(this), this),
                None => (Branch::Undecided, None),
            };
        }
        "endif" => {
            groups.pop();
        }
        _ => return None,
    }
    Some(())
}

/// A source as tokens, and whether a preprocessor line writes `__global__`.
#[derive(Debug, Clone)]
struct Lexed {
    toks: Vec<Token>,
    /// A macro declares kernels: [`kernels`] cannot see those.
    macro_global: bool,
}

/// The 1-based line of the first byte of `bytes` that is not UTF-8 and not in a comment,
/// if there is one (a string or character literal, a raw string, or code: there the compiler
/// would read the replacement klab's text puts in its place).
pub fn invalid_outside_comments(bytes: &[u8]) -> Option<usize> {
    let mut bad = Vec::new();
    let mut at = 0;
    for chunk in bytes.utf8_chunks() {
        at += chunk.valid().len();
        bad.extend(at..at + chunk.invalid().len());
        at += chunk.invalid().len();
    }
    if bad.is_empty() {
        return None;
    }
    let comments = comment_spans(bytes);
    let in_comment = |b: usize| comments.iter().any(|&(s, e)| s <= b && b < e);
    let first = bad.into_iter().find(|&b| !in_comment(b))?;
    Some(1 + bytes[..first].iter().filter(|&&c| c == b'\n').count())
}

/// The byte ranges of the comments of C++ source `b` (`//` to the line's end, a backslash
/// before it going on; `/*` to `*/`), read past string and character literals, raw strings
/// (`R"d( ... )d"`) and digit separators (`1'000`).
fn comment_spans(b: &[u8]) -> Vec<(usize, usize)> {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let start = i;
                while i < b.len() && b[i] != b'\n' {
                    i += if b[i] == b'\\' && b.get(i + 1) == Some(&b'\n') {
                        2
                    } else {
                        1
                    };
                }
                spans.push((start, i));
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let start = i;
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i = (i + 2).min(b.len());
                spans.push((start, i));
            }
            c if word(c) => {
                // A word: an identifier, or a number with its separators and exponent signs.
                let start = i;
                let number = c.is_ascii_digit() || (c == b'.');
                while i < b.len()
                    && (word(b[i])
                        || (number
                            && (b[i] == b'.'
                                || (b[i] == b'\'' && b.get(i + 1).is_some_and(|&n| word(n)))))
                        || (number
                            && matches!(b[i], b'+' | b'-')
                            && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P')))
                {
                    i += 1;
                }
                let w = &b[start..i];
                // A raw string: R"delim( ... )delim", with any encoding prefix.
                if !number && w.ends_with(b"R") && w.len() <= 3 && b.get(i) == Some(&b'"') {
                    let open = i + 1;
                    let paren = (open..b.len().min(open + 17)).find(|&k| b[k] == b'(');
                    if let Some(p) = paren {
                        let mut close = Vec::from(&b"\x29"[..]);
                        close.extend_from_slice(&b[open..p]);
                        close.push(b'"');
                        i = (p + 1..b.len())
                            .find(|&k| b[k..].starts_with(&close))
                            .map_or(b.len(), |k| k + close.len());
                    }
                }
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    spans
}

/// The index past the block comment that opens at `c[i]` (`/*`), counting its lines into
/// `line`; the end where it is never closed.
fn past_block_comment(c: &[char], mut i: usize, line: &mut usize) -> usize {
    i += 2;
    while i < c.len() && !(c[i] == '*' && c.get(i + 1) == Some(&'/')) {
        if c[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    i + 2
}

/// The directive that starts at `c[i]` (`#`) without its comments, and the index past it,
/// counting its lines into `line`. A backslash before the newline continues it; a comment in
/// it is a space, and one that opens there runs on to its end, lines and all.
fn read_directive(c: &[char], mut i: usize, line: &mut usize) -> (String, usize) {
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut directive = String::new();
    while i < c.len() && c[i] != '\n' {
        if c[i] == '\\' && at(i + 1) == '\n' {
            *line += 1;
            i += 2;
        } else if c[i] == '/' && at(i + 1) == '*' {
            i = past_block_comment(c, i, line);
            directive.push(' ');
        } else if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else {
            directive.push(c[i]);
            i += 1;
        }
    }
    (directive, i)
}

/// The source as tokens, without comments and preprocessor lines; string literals keep
/// their text (for `extern "C"`). Never fails: an unterminated comment or literal runs to
/// the end.
fn tokenize(src: &str) -> Lexed {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut macro_global = false;
    let (mut i, mut line) = (0usize, 1usize);
    let mut line_start = true;
    let mut groups: Vec<Group> = Vec::new();
    let mut next_id = 0u32;
    let mut branches: std::sync::Arc<[(u32, u32)]> = std::sync::Arc::new([]);
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            line_start = true;
            i += 1;
            continue;
        }
        // Comments, in dead code too: a `#else` inside one is no directive.
        if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if ch == '/' && at(i + 1) == '*' {
            i = past_block_comment(&c, i, &mut line);
            continue;
        }
        // Inside `#if 0`: nothing but the directives that may end it. Its literals are
        // still literals (a `"/*"` there opens no comment); one left open ends at the line's
        // end, as an apostrophe in prose does.
        let dead = groups.iter().any(|g| g.branch == Branch::Dead);
        if dead && !(ch == '#' && line_start) {
            if !ch.is_whitespace() {
                line_start = false;
            }
            i += 1;
            if ch == '"' || ch == '\'' {
                while i < c.len() && c[i] != ch && c[i] != '\n' {
                    i += if c[i] == '\\' && at(i + 1) != '\n' {
                        2
                    } else {
                        1
                    };
                }
                if at(i) == ch {
                    i += 1;
                }
            }
            continue;
        }
        if ch.is_whitespace() {
            i += 1;
            continue;
        }
        if ch == '#' && line_start {
            let directive;
            (directive, i) = read_directive(&c, i, &mut line);
            if after_conditional(&mut groups, &mut next_id, &directive).is_some() {
                branches = groups
                    .iter()
                    .filter(|g| g.branch == Branch::Undecided)
                    .map(|g| (g.id, g.index))
                    .collect();
            } else if !dead {
                macro_global |= directive.contains("__global__");
            }
            continue;
        }
        line_start = false;
        let start_line = line;
        if ch == '"' || ch == '\'' {
            let mut text = String::new();
            i += 1;
            while i < c.len() && c[i] != ch {
                if c[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    line += 1;
                }
                if i < c.len() {
                    text.push(c[i]);
                }
                i += 1;
            }
            i += 1;
            out.push(Token {
                tok: if ch == '"' {
                    Tok::Str(text)
                } else {
                    Tok::Number(format!("'{text}'"))
                },
                line: start_line,
                branches: branches.clone(),
            });
            continue;
        }
        if ch.is_ascii_digit() || (ch == '.' && at(i + 1).is_ascii_digit()) {
            // Digits, suffixes, exponents and C++14 separators (1'000).
            let begin = i;
            while i < c.len() {
                let d = c[i];
                let exp = matches!(d, 'e' | 'E' | 'p' | 'P') && matches!(at(i + 1), '+' | '-');
                if exp {
                    i += 2;
                } else if d.is_ascii_alphanumeric() || d == '.' || d == '_' || d == '\'' {
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(Token {
                tok: Tok::Number(c[begin..i.min(c.len())].iter().collect()),
                line: start_line,
                branches: branches.clone(),
            });
            continue;
        }
        // ASCII identifiers only: every name klab writes is then a bare TOML key.
        if ch.is_ascii_alphabetic() || ch == '_' {
            let begin = i;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[begin..i].iter().collect();
            // A raw string: R"delim( ... )delim", with any encoding prefix.
            if word.ends_with('R') && at(i) == '"' && word.len() <= 3 {
                let mut j = i + 1;
                let mut delim = String::new();
                while j < c.len() && c[j] != '(' && delim.len() <= 16 {
                    delim.push(c[j]);
                    j += 1;
                }
                let close: Vec<char> = format!("){delim}\"").chars().collect();
                let body = j + 1;
                let mut k = body;
                while k < c.len() && c[k..].iter().take(close.len()).ne(close.iter()) {
                    if c[k] == '\n' {
                        line += 1;
                    }
                    k += 1;
                }
                let text: String = c[body.min(c.len())..k.min(c.len())].iter().collect();
                out.push(Token {
                    tok: Tok::Str(text),
                    line: start_line,
                    branches: branches.clone(),
                });
                i = (k + close.len()).min(c.len());
                continue;
            }
            out.push(Token {
                tok: Tok::Ident(word),
                line: start_line,
                branches: branches.clone(),
            });
            continue;
        }
        out.push(Token {
            tok: Tok::Punct(ch),
            line: start_line,
            branches: branches.clone(),
        });
        i += 1;
    }
    Lexed {
        toks: out,
        macro_global,
    }
}

fn is_punct(t: Option<&Token>, p: char) -> bool {
    matches!(t, Some(Token { tok: Tok::Punct(c), .. }) if *c == p)
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t {
        Some(Token {
            tok: Tok::Ident(s), ..
        }) => Some(s),
        _ => None,
    }
}

/// The index just past the bracket that closes the one at `open`.
fn skip_balanced(toks: &[Token], open: usize) -> usize {
    let mut depth = 0i32;
    let mut i = open;
    while i < toks.len() {
        match &toks[i].tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth <= 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    toks.len()
}

/// Tokens as text on one line, C style (`const float *__restrict__ x`, `Foo<int, 3> *t`).
fn text_of(toks: &[Token]) -> String {
    let mut s = String::new();
    for t in toks {
        let piece = match &t.tok {
            Tok::Ident(w) => w.clone(),
            Tok::Str(x) => format!("\"{x}\""),
            Tok::Punct(p) => p.to_string(),
            Tok::Number(n) => n.clone(),
        };
        let tight_before = matches!(t.tok, Tok::Punct(',' | ')' | ']' | '>' | '[' | '<' | ':'))
            || (matches!(t.tok, Tok::Punct('*' | '&')) && s.ends_with(['*', '&']));
        let tight_after = s.ends_with(['(', '[', '<', ':', '*', '&']);
        if !(s.is_empty() || tight_before || tight_after) {
            s.push(' ');
        }
        s.push_str(&piece);
    }
    s
}

/// Words that only qualify a parameter.
const QUALIFIERS: [&str; 9] = [
    "__restrict__",
    "__restrict",
    "restrict",
    "volatile",
    "__grid_constant__",
    "struct",
    "class",
    "register",
    "typename",
];
/// Attribute-like words followed by a parenthesised argument list.
const ATTRIBUTES: [&str; 7] = [
    "__launch_bounds__",
    "__maxnreg__",
    "__cluster_dims__",
    "__attribute__",
    "__declspec",
    "alignas",
    "__align__",
];
/// Whether `name(list)`, followed at `after` by another name and its list, is a macro before
/// a kernel's name rather than the kernel: a name in capitals before one that is not
/// (`LAUNCH_BOUNDS() k(...)`, `LB(WARPS * 32) k(...)`: macros are written so), else a list
/// that reads as a macro's arguments.
fn looks_like_a_macro(name: &str, list: &[Token], toks: &[Token], after: usize) -> bool {
    let capitals = |w: &str| {
        w.chars().any(|c| c.is_ascii_uppercase())
            && w.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    };
    if !names_a_function(toks, after) {
        return false;
    }
    let next = ident(toks.get(after)).unwrap_or("");
    (capitals(name) && !capitals(next)) || macro_arguments(list)
}

/// Whether a parenthesised list reads as a macro's arguments (`256`, `CUDA_NUM_THREADS, 4`)
/// rather than parameters: not empty, and no declarator in it (no `*` or `&`, no type
/// followed by a name, no `void`).
fn macro_arguments(list: &[Token]) -> bool {
    !list.is_empty()
        && !list.iter().any(|t| {
            is_punct(Some(t), '*') || is_punct(Some(t), '&') || ident(Some(t)) == Some("void")
        })
        && !list
            .windows(2)
            .any(|w| ident(Some(&w[0])).is_some() && ident(Some(&w[1])).is_some())
}

/// Whether `toks[at..]` starts a function's name and its parameter list (`k(`, `ns::k(`),
/// not a qualifier after one (`const`, `noexcept(...)`, an attribute).
fn names_a_function(toks: &[Token], mut at: usize) -> bool {
    const AFTER_A_LIST: [&str; 7] = [
        "const", "volatile", "noexcept", "throw", "override", "final", "requires",
    ];
    loop {
        let Some(w) = ident(toks.get(at)) else {
            return false;
        };
        if AFTER_A_LIST.contains(&w) || ATTRIBUTES.contains(&w) {
            return false;
        }
        if is_punct(toks.get(at + 1), ':') && is_punct(toks.get(at + 2), ':') {
            at += 3;
            continue;
        }
        return is_punct(toks.get(at + 1), '(');
    }
}

/// Libraries' half-precision types, by namespace and name: read as f16 or bf16 only so
/// qualified (the bare names are common in users' own code, as other types).
const LIBRARY_HALF_TYPES: [(&str, &str); 8] = [
    ("at", "Half"),
    ("c10", "Half"),
    ("cutlass", "half_t"),
    ("cute", "half_t"),
    ("at", "BFloat16"),
    ("c10", "BFloat16"),
    ("cutlass", "bfloat16_t"),
    ("cute", "bfloat16_t"),
];

/// Why a `T **` parameter has no element type.
const POINTER_TO_POINTERS: &str = "a pointer to pointers: klab passes flat buffers";

impl Elem {
    /// What a `T **` points to: pointers, an array of them that klab cannot build.
    pub fn is_pointers(&self) -> bool {
        matches!(self, Elem::Unknown { why, .. } if why == POINTER_TO_POINTERS)
    }
}

/// Why a type name is no element type.
const NO_DTYPE: &str = "klab has no dtype for it (f16 bf16 f32 f64 i8 u8 i16 u16 i32 u32 i64 u64)";
/// Why a parameter of a template's type has no dtype.
const TEMPLATE_PARAMETER: &str = "a template parameter: the entry must be an instance";
/// The words of C's built-in integer types.
const INT_WORDS: [&str; 6] = ["signed", "unsigned", "short", "long", "int", "char"];

/// The element type of a type's words (qualifiers removed, `std::` dropped).
fn element(words: &[String], template_types: &[String]) -> Elem {
    let name = words.join(" ");
    let unknown = |why: &str| Elem::Unknown {
        name: name.clone(),
        why: why.into(),
    };
    if words.is_empty() {
        return unknown("no type");
    }
    if let [w] = words {
        if template_types.contains(w) {
            return unknown(TEMPLATE_PARAMETER);
        }
    }
    if words.iter().all(|w| INT_WORDS.contains(&w.as_str())) {
        let has = |x: &str| words.iter().any(|w| w == x);
        let unsigned = has("unsigned");
        return Elem::Known(if has("char") {
            if unsigned {
                Dtype::U8
            } else if has("signed") {
                Dtype::I8
            } else {
                return unknown(
                    "plain char's signedness is the compiler's: write signed char or unsigned char",
                );
            }
        } else if has("short") {
            if unsigned {
                Dtype::U16
            } else {
                Dtype::I16
            }
        } else if has("long") {
            // LP64, as on every Linux CUDA target.
            if unsigned {
                Dtype::U64
            } else {
                Dtype::I64
            }
        } else if unsigned {
            Dtype::U32
        } else {
            Dtype::I32
        });
    }
    let [w] = words else {
        return unknown(NO_DTYPE);
    };
    let known = match w.as_str() {
        "float" => Some(Dtype::F32),
        "double" => Some(Dtype::F64),
        // CUDA's names, then PyTorch's and CUTLASS's, by their namespace
        // ([`LIBRARY_HALF_TYPES`]).
        "__half" | "half" | "nv_half" | "at::Half" | "c10::Half" | "cutlass::half_t"
        | "cute::half_t" => Some(Dtype::F16),
        "__nv_bfloat16"
        | "nv_bfloat16"
        | "at::BFloat16"
        | "c10::BFloat16"
        | "cutlass::bfloat16_t"
        | "cute::bfloat16_t" => Some(Dtype::Bf16),
        "int8_t" => Some(Dtype::I8),
        "uint8_t" => Some(Dtype::U8),
        "int16_t" => Some(Dtype::I16),
        "uint16_t" => Some(Dtype::U16),
        "int32_t" => Some(Dtype::I32),
        "uint32_t" => Some(Dtype::U32),
        "int64_t" | "ptrdiff_t" | "intptr_t" | "ssize_t" | "longlong" => Some(Dtype::I64),
        "uint64_t" | "size_t" | "uintptr_t" | "ulonglong" => Some(Dtype::U64),
        _ => None,
    };
    if let Some(d) = known {
        return Elem::Known(d);
    }
    // CUDA's vector types: float4, int2, uchar4, __half2, __nv_bfloat162, ...
    let vector = w.strip_suffix(['1', '2', '3', '4']).and_then(|base| {
        let count = w[base.len()..].parse::<u32>().ok()?;
        let dtype = match base {
            "float" => Dtype::F32,
            "double" => Dtype::F64,
            "char" => Dtype::I8,
            "uchar" => Dtype::U8,
            "short" => Dtype::I16,
            "ushort" => Dtype::U16,
            "int" => Dtype::I32,
            "uint" => Dtype::U32,
            "long" | "longlong" => Dtype::I64,
            "ulong" | "ulonglong" => Dtype::U64,
            "__half" | "half" if count == 2 => Dtype::F16,
            "__nv_bfloat16" | "nv_bfloat16" if count == 2 => Dtype::Bf16,
            _ => return None,
        };
        Some((dtype, count))
    });
    // A launch's shape: three unsigned ints by value.
    let vector = vector.or((w == "dim3").then_some((Dtype::U32, 3)));
    match vector {
        Some((dtype, count)) => Elem::Vector {
            dtype,
            count,
            name: w.clone(),
        },
        None if w == "bool" => Elem::Bool,
        None => unknown(NO_DTYPE),
    }
}

/// One parameter from its tokens (without the separating commas).
fn param(toks: &[Token], template_types: &[String]) -> Param {
    // A default argument is not part of the type.
    let end = toks
        .iter()
        .position(|t| matches!(t.tok, Tok::Punct('=')))
        .unwrap_or(toks.len());
    let toks = &toks[..end];
    let text = text_of(toks);
    let mut words: Vec<String> = Vec::new();
    let (mut stars, mut refs, mut const_before_star) = (0, 0, false);
    let mut angle = false;
    // The namespace just before the next name (`at` of `at::Half`).
    let mut namespace: Option<&str> = None;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].tok {
            Tok::Ident(w) if ATTRIBUTES.contains(&w.as_str()) && is_punct(toks.get(i + 1), '(') => {
                i = skip_balanced(toks, i + 1);
                continue;
            }
            Tok::Punct('[') if is_punct(toks.get(i + 1), '[') => {
                i = skip_balanced(toks, i);
                continue;
            }
            // `x[]` and `x[N]` are pointers.
            Tok::Punct('[') => {
                stars += 1;
                i = skip_balanced(toks, i);
                continue;
            }
            // `std::int32_t`, `::size_t`, `cuda::std::...`: the last name is the type.
            Tok::Ident(w)
                if w != "const"
                    && !QUALIFIERS.contains(&w.as_str())
                    && is_punct(toks.get(i + 1), ':')
                    && is_punct(toks.get(i + 2), ':') =>
            {
                namespace = Some(w.as_str());
                i += 3;
                continue;
            }
            Tok::Punct(':') => {}
            Tok::Punct('*') => stars += 1,
            Tok::Punct('&') => refs += 1,
            Tok::Punct('<') => {
                angle = true;
                let (mut depth, mut paren) = (0, 0);
                while i < toks.len() {
                    match toks[i].tok {
                        Tok::Punct('(' | '[') => paren += 1,
                        Tok::Punct(')' | ']') => paren -= 1,
                        // In parentheses, a comparison.
                        Tok::Punct('<' | '>') if paren > 0 => {}
                        Tok::Punct('<') => depth += 1,
                        Tok::Punct('>') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            // `const T *p` and `T const *p` protect what p points to; `T *const p` only p.
            Tok::Ident(w) if w == "const" => const_before_star |= stars == 0,
            Tok::Ident(w) if QUALIFIERS.contains(&w.as_str()) => {}
            // A library's half type keeps its namespace: a file's own `half_t` may be
            // anything.
            Tok::Ident(w) => words.push(match namespace.take() {
                Some(ns) if LIBRARY_HALF_TYPES.contains(&(ns, w.as_str())) => format!("{ns}::{w}"),
                _ => w.clone(),
            }),
            _ => {}
        }
        i += 1;
    }
    // The last word names the parameter unless it is all the type there is or a word of a
    // built-in type (`unsigned int`).
    let last_is_name = words.len() >= 2 && !INT_WORDS.contains(&words[words.len() - 1].as_str());
    let name = if last_is_name { words.pop() } else { None };
    let elem = if angle {
        Elem::Unknown {
            name: text.clone(),
            why: format!("a template type: {NO_DTYPE}"),
        }
    } else {
        element(&words, template_types)
    };
    let elem = match (stars, refs) {
        (_, r) if r > 0 => Elem::Unknown {
            name: text.clone(),
            why: "a reference: klab passes values and flat buffers".into(),
        },
        (s, _) if s > 1 => Elem::Unknown {
            name: text.clone(),
            why: POINTER_TO_POINTERS.into(),
        },
        _ => elem,
    };
    let kind = if stars >= 1 {
        ParamKind::Pointer {
            elem,
            read_only: const_before_star,
        }
    } else {
        ParamKind::Value(elem)
    };
    // The type: the tokens without the name (the last word of that name) and the words
    // that do not make another type ([`type_words`]).
    let at = name.as_ref().and_then(|n| {
        toks.iter()
            .rposition(|t| matches!(&t.tok, Tok::Ident(w) if w == n))
    });
    let type_toks: Vec<Token> = toks
        .iter()
        .enumerate()
        .filter(|(i, t)| Some(*i) != at && !is_restrict(t))
        .map(|(_, t)| t.clone())
        .collect();
    Param {
        name,
        kind,
        text,
        type_text: text_of(&type_toks),
        conditional: false,
        pack: toks
            .windows(3)
            .any(|w| w.iter().all(|t| matches!(t.tok, Tok::Punct('.')))),
    }
}

/// A qualifier of a parameter that its function's type does not hold.
fn is_restrict(t: &Token) -> bool {
    matches!(&t.tok, Tok::Ident(w) if matches!(w.as_str(), "__restrict__" | "__restrict" | "restrict" | "__grid_constant__"))
}

/// A type's words as an overload is matched by, the same for every spelling of one type
/// that klab can tell: without the qualifiers a function's type does not hold
/// ([`is_restrict`]), the words before the first `*`, `&` or `[` in one order (`float const`
/// is `const float`), and C's integer names in one form (`unsigned int` is `unsigned`,
/// `long int` is `long`, `signed int` is `int`). A top-level `const` of a value is kept
/// (rare, and then written alike).
fn type_words(text: &str) -> Vec<String> {
    let words: Vec<String> = tokenize(text)
        .toks
        .iter()
        .filter(|t| !is_restrict(t))
        .map(|t| match &t.tok {
            Tok::Ident(w) | Tok::Number(w) => w.clone(),
            Tok::Str(x) => format!("\"{x}\""),
            Tok::Punct(p) => p.to_string(),
        })
        .collect();
    let split = words
        .iter()
        .position(|w| matches!(w.as_str(), "*" | "&" | "["))
        .unwrap_or(words.len());
    let (base, rest) = words.split_at(split);
    let mut base: Vec<String> = base.to_vec();
    let qualifier = |w: &String| w == "const" || w == "volatile";
    if base
        .iter()
        .any(|w| matches!(w.as_str(), "unsigned" | "signed" | "short" | "long"))
    {
        base.retain(|w| w != "int");
        // `signed` of anything but char is the type itself; `signed` alone is int.
        if !base.iter().any(|w| w == "char") {
            base.retain(|w| w != "signed");
        }
        if base.iter().all(qualifier) {
            base.push("int".into());
        }
    }
    base.sort();
    base.extend(rest.iter().cloned());
    base
}

/// An entry naming one overload, `k(const float *, int)`: the name before the parameter
/// list and the parameter types; `None` for an entry without a list.
pub fn overload_entry(entry: &str) -> Option<(&str, Vec<&str>)> {
    let open = entry.find('(')?;
    let inner = entry[open + 1..].strip_suffix(')')?;
    let mut types = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                types.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner.trim().is_empty() {
        types.push(inner[start..].trim());
    }
    Some((entry[..open].trim_end(), types))
}

/// Each type parameter of a template parameter list (`typename T, int B, class U = float`)
/// with the type `args` gives it by position, else its default: `[("T", "half"), ("U",
/// "float")]`. A parameter pack (`typename... Ts`) ends the reading: what follows it is not
/// positional.
fn template_type_arguments(list: &str, args: &[&str]) -> Vec<(String, String)> {
    let id = format!("t<{list}>");
    let Some((_, params)) = klab_core::text::template_id(&id) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, p) in params.iter().enumerate() {
        let (decl, default) = match p.split_once('=') {
            Some((d, v)) => (d.trim(), Some(v.trim())),
            None => (*p, None),
        };
        let Some(rest) = decl
            .strip_prefix("typename")
            .or_else(|| decl.strip_prefix("class"))
            .filter(|r| r.starts_with([' ', '\t', '\n', '.']))
            .map(str::trim_start)
        else {
            continue;
        };
        if rest.starts_with('.') {
            break;
        }
        let Some(ty) = args.get(i).copied().or(default) else {
            continue;
        };
        // A default naming an earlier parameter (`typename U = T`) is that one's type.
        let ty = out
            .iter()
            .find(|(earlier, _)| earlier == ty)
            .map_or(ty.to_string(), |(_, t)| t.clone());
        if klab_core::text::is_identifier(rest) {
            out.push((rest.to_string(), ty));
        }
    }
    out
}

/// The element a type written alone reads as (`float`, `unsigned int`, `c10::Half`,
/// `float4`); `None` for a pointer, a reference, a template type or a name klab has no
/// dtype for.
fn type_of(ty: &str) -> Option<Elem> {
    let toks = tokenize(ty).toks;
    match param(&toks, &[]).kind {
        ParamKind::Value(e @ (Elem::Known(_) | Elem::Vector { .. } | Elem::Bool)) => Some(e),
        _ => None,
    }
}

/// The type names a template parameter list declares (`typename T, int B` gives `T`).
fn template_types(list: &[Token]) -> Vec<String> {
    let mut out = Vec::new();
    for w in list.windows(2) {
        if let (Some("typename" | "class"), Some(name)) = (ident(Some(&w[0])), ident(Some(&w[1]))) {
            out.push(name.to_string());
        }
    }
    out
}

/// Every `__global__` function of a CUDA source, in order; a name declared and then
/// defined appears once (as defined, `extern "C"` if any declaration is: the first one
/// gives the linkage).
pub fn kernels(src: &str) -> Vec<Kernel> {
    kernels_in(&tokenize(src).toks)
}

/// Whether a `#define` of the source writes `__global__` (`#define KERNEL __global__`): the
/// kernels declared through it are not among [`kernels`].
pub fn macro_writes_global(src: &str) -> bool {
    tokenize(src).macro_global
}

/// How a name (a manifest's `entry`, or a template's name without its arguments; plain or
/// qualified, `ns::k`) stands in a CUDA source: what a manifest checks before anything is
/// compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryLookup {
    /// The `__global__` function of that name.
    Kernel(Kernel),
    /// klab cannot tell; the compiler will: no visible kernel has the name but a macro
    /// writes `__global__` and the name is a word of the code (outside comments and
    /// literals); a qualified name whose namespace klab did not see (opened by a macro) or
    /// that names another kernel than the one of that name klab saw; a plain name only
    /// namespaced kernels have, reached by a `using`, or in a file whose braces klab could
    /// not pair (a preprocessor branch may open one).
    CannotTell,
    /// A plain name only kernels in namespaces have, none `extern "C"`, none reached by a
    /// `using namespace` of its namespace or a `using` of its name: those kernels.
    InNamespace(Vec<Kernel>),
    /// Several kernels of that name (overloads), and the entry names no parameter types, or
    /// types none of them has: those kernels, each to be named by [`Kernel::with_types`].
    Overloaded(Vec<Kernel>),
    /// None of these: the qualified names of the kernels the source does declare, in order.
    Missing(Vec<String>),
}

/// Look up `name` among the source's kernels, by token (a comment, a string, a
/// `__device__` function or a constant of that name is no kernel). To look up several
/// names in one source, read it once with [`Index::new`].
pub fn lookup_entry(src: &str, name: &str) -> EntryLookup {
    Index::new(src).lookup(name)
}

/// A source read once for looking up its kernels: a manifest of many kernels in one file
/// looks each up in the same reading (reading the file for each made loading it quadratic
/// in its kernels).
#[derive(Debug, Clone)]
pub struct Index {
    lexed: Lexed,
    kernels: Vec<Kernel>,
    /// Every brace paired ([`kernels_and_balance`]).
    balanced: bool,
    /// The source includes headers of its own ([`crate::include::includes_own_headers`]).
    own_headers: bool,
}

impl Index {
    pub fn new(src: &str) -> Index {
        let lexed = tokenize(src);
        let (kernels, balanced) = kernels_and_balance(&lexed.toks);
        Index {
            lexed,
            kernels,
            balanced,
            own_headers: crate::include::includes_own_headers(src),
        }
    }

    /// The source's kernels, in order.
    pub fn kernels(&self) -> &[Kernel] {
        &self.kernels
    }

    /// Whether the source includes headers of its own, where kernels klab does not see may be.
    pub fn includes_own_headers(&self) -> bool {
        self.own_headers
    }

    /// [`lookup_entry`] in this source.
    pub fn lookup(&self, name: &str) -> EntryLookup {
        let (lexed, kernels) = (&self.lexed, &self.kernels);
        // One overload among several, named with its parameter types: matched by them.
        if let Some((base, types)) = overload_entry(name) {
            return self.lookup_overload(base, &types);
        }
        let named: Vec<&Kernel> = kernels.iter().filter(|k| k.qualified() == name).collect();
        match named.as_slice() {
            [k] => return EntryLookup::Kernel((*k).clone()),
            // Definitions in branches of an `#if` klab cannot decide: the compiler sees one.
            [_, _, ..]
                if named
                    .iter()
                    .any(|a| named.iter().any(|b| a.exclusive_with(b))) =>
            {
                return EntryLookup::CannotTell
            }
            // Overloads: C++ kernels (an extern "C" name has one definition), told apart by
            // their parameter types.
            [_, _, ..] => return EntryLookup::Overloaded(named.into_iter().cloned().collect()),
            [] => {}
        }
        let bare = name.rsplit("::").next().unwrap_or(name);
        let same: Vec<&Kernel> = kernels.iter().filter(|k| k.name == bare).collect();
        let reached = same.iter().any(|k| reached_by_using(&lexed.toks, k));
        match (name.contains("::"), same.as_slice()) {
            // Qualified, and the one kernel of that name klab saw in no namespace: its
            // namespace may be a macro's.
            (true, [k]) if k.scope.is_empty() => return EntryLookup::Kernel((*k).clone()),
            (true, [_, ..]) => return EntryLookup::CannotTell,
            // An extern "C" kernel's symbol is its plain name, whatever its namespace.
            (false, [k]) if k.extern_c => return EntryLookup::Kernel((*k).clone()),
            (false, [_, ..]) if !self.balanced || reached => return EntryLookup::CannotTell,
            (false, [_, ..]) => {
                return EntryLookup::InNamespace(same.into_iter().cloned().collect())
            }
            _ => {}
        }
        if lexed.macro_global && lexed.toks.iter().any(|t| ident(Some(t)) == Some(bare)) {
            return EntryLookup::CannotTell;
        }
        EntryLookup::Missing(kernels.iter().map(Kernel::qualified).collect())
    }

    /// [`Index::lookup`] of one overload, `base(types)`.
    fn lookup_overload(&self, base: &str, types: &[&str]) -> EntryLookup {
        let kernels = &self.kernels;
        let wanted: Vec<Vec<String>> = types.iter().map(|t| type_words(t)).collect();
        let same: Vec<&Kernel> = kernels.iter().filter(|k| k.qualified() == base).collect();
        let matching = |k: &&&Kernel| {
            k.params
                .iter()
                .map(|p| type_words(&p.type_text))
                .eq(wanted.iter().cloned())
        };
        // The overload asked for may be in a header the source includes: the compiler will
        // tell, as it does for a plain name klab does not see.
        match (same.iter().find(matching), same.as_slice()) {
            (Some(k), _) => EntryLookup::Kernel((*k).clone()),
            (None, _) if self.own_headers => EntryLookup::CannotTell,
            // One kernel of that name, its types spelt otherwise (a typedef): NVRTC's cast
            // will say whether they are its types.
            (None, [k]) => EntryLookup::Kernel((*k).clone()),
            (None, []) => EntryLookup::Missing(kernels.iter().map(Kernel::qualified).collect()),
            (None, _) => EntryLookup::Overloaded(same.into_iter().cloned().collect()),
        }
    }
}

/// What an open brace opened, for the kernels after it.
#[derive(Debug, Clone, PartialEq)]
enum Brace {
    ExternC,
    /// `namespace a::b {` (its names), `namespace {` or `inline namespace v {` (none).
    Namespace(Vec<String>),
    Other,
}

/// The namespace opened at `toks[i]` (`namespace`): its names and the index after its
/// `{`; `None` for `using namespace x;` and `namespace a = b;`, which open nothing.
fn namespace_at(toks: &[Token], i: usize) -> Option<(Vec<String>, usize)> {
    let mut names = Vec::new();
    let mut j = i + 1;
    while let Some(n) = ident(toks.get(j)) {
        names.push(n.to_string());
        j += 1;
        if is_punct(toks.get(j), ':') && is_punct(toks.get(j + 1), ':') {
            j += 2;
        } else {
            break;
        }
    }
    if !is_punct(toks.get(j), '{') {
        return None;
    }
    let inline = i > 0 && ident(toks.get(i - 1)) == Some("inline");
    Some((if inline { Vec::new() } else { names }, j + 1))
}

/// Whether a `using namespace` of `k`'s namespace or a `using` of its qualified name
/// (`using ops::k;`) makes its plain name reach it.
fn reached_by_using(toks: &[Token], k: &Kernel) -> bool {
    let (scope, qualified) = (k.scope.join("::"), k.qualified());
    toks.iter().enumerate().any(|(i, t)| {
        if ident(Some(t)) != Some("using") {
            return false;
        }
        let directive = ident(toks.get(i + 1)) == Some("namespace");
        let mut path = Vec::new();
        let mut j = i + 1 + usize::from(directive);
        while let Some(n) = ident(toks.get(j)) {
            path.push(n);
            if is_punct(toks.get(j + 1), ':') && is_punct(toks.get(j + 2), ':') {
                j += 3;
            } else {
                break;
            }
        }
        let path = path.join("::");
        if directive {
            path == scope
        } else {
            path == qualified
        }
    })
}

fn kernels_in(toks: &[Token]) -> Vec<Kernel> {
    kernels_and_balance(toks).0
}

/// The kernels, and whether every brace closed one that was open and none stayed open (an
/// unpaired brace in one branch of an `#if` leaves namespaces klab cannot trust).
fn kernels_and_balance(toks: &[Token]) -> (Vec<Kernel>, bool) {
    let mut out: Vec<(Kernel, bool)> = Vec::new();
    let mut braces: Vec<Brace> = Vec::new();
    let mut balanced = true;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].tok {
            Tok::Ident(w) if w == "extern" => {
                let c = matches!(toks.get(i + 1), Some(Token { tok: Tok::Str(s), .. }) if s == "C");
                if c && is_punct(toks.get(i + 2), '{') {
                    braces.push(Brace::ExternC);
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(w) if w == "namespace" => {
                if let Some((names, next)) = namespace_at(toks, i) {
                    braces.push(Brace::Namespace(names));
                    i = next;
                    continue;
                }
            }
            Tok::Punct('{') => braces.push(Brace::Other),
            Tok::Punct('}') => {
                balanced &= braces.pop().is_some();
            }
            Tok::Ident(w) if w == "__global__" => {
                let scope: Vec<String> = braces
                    .iter()
                    .filter_map(|b| match b {
                        Brace::Namespace(n) => Some(n.iter().cloned()),
                        _ => None,
                    })
                    .flatten()
                    .collect();
                let in_extern_c = braces.contains(&Brace::ExternC);
                if let Some((k, defined, next)) = global_at(toks, i, in_extern_c, scope) {
                    let q = k.qualified();
                    // The same function declared again (or defined after its declaration),
                    // not an overload: the same types however spelt ([`type_words`]), or a
                    // declaration and a definition of as many parameters (a typedef in one,
                    // `uint32_t` for `unsigned`). Two declarations of other types are two
                    // overloads (their definitions may be in a header klab does not read).
                    let same_function = |o: &Kernel, o_defined: bool| {
                        o.qualified() == q
                            && (o
                                .params
                                .iter()
                                .map(|p| type_words(&p.type_text))
                                .eq(k.params.iter().map(|p| type_words(&p.type_text)))
                                || (o_defined != defined && o.params.len() == k.params.len()))
                    };
                    match out.iter_mut().find(|(o, d)| same_function(o, *d)) {
                        Some(slot) => {
                            let extern_c = slot.0.extern_c || k.extern_c;
                            if !slot.1 && defined {
                                *slot = (k, defined);
                            }
                            slot.0.extern_c = extern_c;
                        }
                        None => out.push((k, defined)),
                    }
                    i = next;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    let balanced = balanced && braces.is_empty();
    let mut kernels: Vec<Kernel> = out.into_iter().map(|(k, _)| k).collect();
    read_aliases(&mut kernels, toks);
    (kernels, balanced)
}

/// Each parameter whose type klab could not read but the source aliases at file scope to a
/// type it knows ([`aliases`]) takes that type; a template parameter keeps its own.
fn read_aliases(kernels: &mut [Kernel], toks: &[Token]) {
    let aliases = aliases(toks);
    if aliases.is_empty() {
        return;
    }
    for p in kernels.iter_mut().flat_map(|k| k.params.iter_mut()) {
        let (ParamKind::Pointer { elem, .. } | ParamKind::Value(elem)) = &p.kind;
        let Elem::Unknown { name, why } = elem else {
            continue;
        };
        let Some(known) = aliases
            .get(name.as_str())
            .filter(|_| why != TEMPLATE_PARAMETER)
        else {
            continue;
        };
        match (&mut p.kind, known) {
            // `real x`, `const real *x`: the alias's element.
            (ParamKind::Pointer { elem, .. } | ParamKind::Value(elem), ParamKind::Value(e)) => {
                *elem = e.clone()
            }
            // `realw_p x` of `typedef float *realw_p;`: a pointer (`const realw_p` makes the
            // pointer const, not what it points to).
            (kind @ ParamKind::Value(_), pointer @ ParamKind::Pointer { .. }) => {
                *kind = pointer.clone()
            }
            // A pointer to an alias of a pointer: klab reads no such level.
            (ParamKind::Pointer { .. }, ParamKind::Pointer { .. }) => {}
        }
    }
}

/// The types the source names by a file-scope `typedef` or `using` alias of a type klab
/// knows (`typedef float real;`, `using idx_t = long long;`, `typedef float *realw_p;`):
/// what a parameter of that name holds. An alias of a struct, a template, a pointer to a
/// pointer or anything else klab cannot read is left out, and so is a name aliased twice to different types or aliased
/// at all inside braces (a namespace's, a function's or a struct's, which a parameter of
/// that name outside them does not see): those parameters stay taken on trust.
fn aliases(toks: &[Token]) -> std::collections::BTreeMap<String, ParamKind> {
    let mut found: std::collections::BTreeMap<String, Option<ParamKind>> = Default::default();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match toks[i].tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        let decl = match &toks[i].tok {
            // `typedef TYPE NAME;`: a declaration of NAME, as a parameter is.
            Tok::Ident(w) if w == "typedef" => Some(i + 1),
            // `using NAME = TYPE;`: the same as `TYPE NAME`.
            Tok::Ident(w) if w == "using" && is_punct(toks.get(i + 2), '=') => Some(i + 3),
            _ => None,
        };
        let Some(from) = decl else {
            i += 1;
            continue;
        };
        let end = (from..toks.len())
            .find(|k| matches!(toks[*k].tok, Tok::Punct(';' | '{' | '}')))
            .unwrap_or(toks.len());
        let stars = toks[from..end]
            .iter()
            .filter(|t| is_punct(Some(t), '*'))
            .count();
        let plain = end < toks.len()
            && is_punct(toks.get(end), ';')
            && stars <= 1
            && toks[from..end]
                .iter()
                .all(|t| matches!(&t.tok, Tok::Ident(_) | Tok::Punct('*')));
        if plain {
            let (name, elem) = match &toks[i].tok {
                Tok::Ident(w) if w == "using" => {
                    let mut declared: Vec<Token> = toks[from..end].to_vec();
                    declared.push(toks[i + 1].clone());
                    let p = param(&declared, &[]);
                    (p.name, p.kind)
                }
                _ => {
                    let p = param(&toks[from..end], &[]);
                    (p.name, p.kind)
                }
            };
            // An alias of an alias read before it: `typedef real *real_p;`.
            let elem = match elem {
                ParamKind::Value(Elem::Unknown { name: of, why }) => match found.get(&of) {
                    Some(Some(kind)) => kind.clone(),
                    _ => ParamKind::Value(Elem::Unknown { name: of, why }),
                },
                ParamKind::Pointer {
                    elem: Elem::Unknown { name: of, why },
                    read_only,
                } => match found.get(&of) {
                    Some(Some(ParamKind::Value(e))) => ParamKind::Pointer {
                        elem: e.clone(),
                        read_only,
                    },
                    _ => ParamKind::Pointer {
                        elem: Elem::Unknown { name: of, why },
                        read_only,
                    },
                },
                other => other,
            };
            let readable = |e: &Elem| matches!(e, Elem::Known(_) | Elem::Vector { .. });
            let element = match &elem {
                ParamKind::Value(e) | ParamKind::Pointer { elem: e, .. } => e.clone(),
            };
            match (name, elem) {
                (Some(name), kind) if depth == 0 && readable(&element) => {
                    let entry = found.entry(name).or_insert_with(|| Some(kind.clone()));
                    if entry.as_ref() != Some(&kind) {
                        *entry = None;
                    }
                }
                // Aliased in a scope (or to a type klab cannot read): the name is not one
                // type everywhere.
                (Some(name), _) => {
                    found.insert(name, None);
                }
                (None, _) => {}
            }
        } else {
            // An alias klab cannot read (an attribute, an array, a function pointer): every
            // name it may declare is not one type everywhere.
            let named = match &toks[i].tok {
                Tok::Ident(w) if w == "using" => &toks[i + 1..i + 2],
                _ => &toks[from..end],
            };
            for t in named {
                if let Some(w) = ident(Some(t)) {
                    found.insert(w.to_string(), None);
                }
            }
        }
        i = end.max(i + 1);
    }
    found
        .into_iter()
        .filter_map(|(name, elem)| Some((name, elem?)))
        .collect()
}

/// [`param`] of a kernel whose `__global__` is `global`, marked conditional where a token
/// of it is in other `#if` branches than that.
fn param_in(toks: &[Token], template_types: &[String], global: &Token) -> Param {
    Param {
        conditional: toks.iter().any(|t| t.branches != global.branches),
        ..param(toks, template_types)
    }
}

/// The function whose `__global__` is at `g`: the kernel, whether a body follows, and the
/// index after its parameter list; `None` when no function follows (`__global__` in a
/// macro's use, say).
fn global_at(
    toks: &[Token],
    g: usize,
    in_extern_c: bool,
    mut scope: Vec<String>,
) -> Option<(Kernel, bool, usize)> {
    // What comes before it in the same declaration: extern "C", template<...>, static.
    let begin = toks[..g]
        .iter()
        .rposition(|t| matches!(t.tok, Tok::Punct(';' | '{' | '}')))
        .map_or(0, |p| p + 1);
    let prefix = &toks[begin..g];
    let extern_c = in_extern_c
        || prefix.windows(2).any(|w| {
            ident(Some(&w[0])) == Some("extern") && matches!(&w[1].tok, Tok::Str(s) if s == "C")
        });
    let mut template = None;
    let mut template_names = Vec::new();
    if let Some(t) = prefix
        .iter()
        .position(|t| ident(Some(t)) == Some("template"))
    {
        if is_punct(prefix.get(t + 1), '<') {
            let mut depth = 0;
            let mut end = t + 1;
            for (k, tok) in prefix.iter().enumerate().skip(t + 1) {
                match tok.tok {
                    Tok::Punct('<') => depth += 1,
                    Tok::Punct('>') => {
                        depth -= 1;
                        if depth == 0 {
                            end = k;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let list = &prefix[t + 2..end.max(t + 2)];
            template = Some(text_of(list));
            template_names = template_types(list);
        }
    }
    let mut launch_bounds = None;
    let mut j = g + 1;
    // The qualifier of a definition outside its namespace: `void ns::k(...) {`.
    let mut qualifier = Vec::new();
    let (name, open) = loop {
        let t = toks.get(j)?;
        match &t.tok {
            Tok::Ident(w) if is_punct(toks.get(j + 1), ':') && is_punct(toks.get(j + 2), ':') => {
                qualifier.push(w.clone());
                j += 3;
                continue;
            }
            Tok::Ident(w) if is_punct(toks.get(j + 1), '(') => {
                let end = skip_balanced(toks, j + 1);
                if ATTRIBUTES.contains(&w.as_str()) {
                    if w == "__launch_bounds__" {
                        launch_bounds = Some(text_of(toks.get(j + 2..end - 1).unwrap_or_default()));
                    }
                    j = end;
                    continue;
                }
                // A function-like macro before the name (`void C10_LAUNCH_BOUNDS_1(256)
                // k(...)`): another name and its list follow it, where a function's own
                // list is followed by its body, a `;` or qualifiers.
                if looks_like_a_macro(w, toks.get(j + 2..end - 1).unwrap_or_default(), toks, end) {
                    j = end;
                    continue;
                }
                break (w.clone(), j + 1);
            }
            Tok::Punct('[') if is_punct(toks.get(j + 1), '[') => j = skip_balanced(toks, j),
            Tok::Punct(';' | '{' | '}' | '(' | '=') => return None,
            _ => {
                qualifier.clear();
                j += 1;
            }
        }
    };
    scope.extend(qualifier);
    let close = skip_balanced(toks, open);
    let inner = &toks[open + 1..close.saturating_sub(1).max(open + 1)];
    let mut params = Vec::new();
    let (mut paren, mut angle) = (0i32, 0i32);
    let mut start = 0;
    // In a default argument (`int n = 1 << 4`) `<<` and `>>` are shifts, not brackets.
    let mut default = false;
    let shift = |k: usize, c: char| {
        is_punct(inner.get(k + 1), c) || (k > 0 && is_punct(inner.get(k - 1), c))
    };
    for (k, t) in inner.iter().enumerate() {
        match t.tok {
            Tok::Punct('<') if default && shift(k, '<') => {}
            Tok::Punct('>') if default && shift(k, '>') => {}
            Tok::Punct('(' | '[' | '{') => paren += 1,
            Tok::Punct(')' | ']' | '}') => paren = (paren - 1).max(0),
            // In parentheses `<` and `>` compare (`conditional_t<(N > 2), float, double>`).
            Tok::Punct('<') if paren == 0 => angle += 1,
            Tok::Punct('>') if paren == 0 => angle = (angle - 1).max(0),
            Tok::Punct('=') if paren == 0 && angle == 0 => default = true,
            Tok::Punct(',') if paren == 0 && angle == 0 => {
                params.push(param_in(&inner[start..k], &template_names, &toks[g]));
                start = k + 1;
                default = false;
            }
            _ => {}
        }
    }
    let last = &inner[start..];
    let only_void = last.len() == 1 && ident(last.first()) == Some("void") && params.is_empty();
    if !last.is_empty() && !only_void {
        params.push(param_in(last, &template_names, &toks[g]));
    }
    // A body or a semicolon ends the declaration (after const, noexcept, attributes).
    let mut k = close;
    let defined = loop {
        match toks.get(k).map(|t| &t.tok) {
            Some(Tok::Punct('{')) => break true,
            Some(Tok::Punct(';')) | None => break false,
            _ => k += 1,
        }
    };
    Some((
        Kernel {
            name,
            scope,
            line: toks[g].line,
            extern_c,
            template,
            launch_bounds,
            params,
            branches: toks[g].branches.to_vec(),
            header_uncertain: toks[open - 1].branches != toks[g].branches,
        },
        defined,
        close,
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A default argument holding a shift is one parameter, not two.
    #[test]
    fn a_default_argument_with_a_shift_is_one_parameter() {
        let src = "__global__ void k(const float *x, float *y, int n = 1 << 4, float a = 2.f, int m = 256 >> 2) {}";
        match lookup_entry(src, "k") {
            EntryLookup::Kernel(k) => assert_eq!(k.params.len(), 5, "{:?}", k.params),
            other => panic!("{other:?}"),
        }
    }

    /// A file-scope alias names a parameter's type, but never a template parameter of the
    /// same name: that is the instance's (`typedef float scalar_t;` beside
    /// `template <typename scalar_t>` must not make `k<double>` take floats).
    #[test]
    fn an_alias_is_read_but_never_for_a_template_parameter() {
        let src = "typedef float scalar_t;\n\
                   template <typename scalar_t> __global__ void t(const scalar_t *x, int n) {}\n\
                   extern \"C\" __global__ void k(const scalar_t *x, int n) {}\n";
        let ks = kernels(src);
        let elem = |name: &str| match &ks.iter().find(|k| k.name == name).unwrap().params[0].kind {
            ParamKind::Pointer { elem, .. } => elem.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(elem("k"), Elem::Known(Dtype::F32));
        assert!(
            matches!(elem("t"), Elem::Unknown { ref why, .. } if why == TEMPLATE_PARAMETER),
            "{:?}",
            elem("t")
        );
    }

    /// A template kernel and its explicit specialization are one template, not overloads:
    /// the template's name finds the template (its instance is named by its arguments).
    #[test]
    fn a_template_and_its_specialization_are_not_overloads() {
        let src = "template <typename T> __global__ void k(T *o, int n) {}\n\
                   template <> __global__ void k<float>(float *o, int n) {}\n";
        match lookup_entry(src, "k") {
            EntryLookup::Kernel(k) => assert!(k.template.is_some(), "{k:?}"),
            other => panic!("{other:?}"),
        }
    }

    fn kind(k: &Kernel, i: usize) -> &ParamKind {
        &k.params[i].kind
    }

    fn ptr(d: Dtype, read_only: bool) -> ParamKind {
        ParamKind::Pointer {
            elem: Elem::Known(d),
            read_only,
        }
    }

    fn val(d: Dtype) -> ParamKind {
        ParamKind::Value(Elem::Known(d))
    }

    pub(crate) const SRC: &str = r#"
#include <cuda_fp16.h>
#define DECLARE(name) __global__ void name(float *p)
// __global__ void in_a_comment(float *x) {}
/* __global__ void in_a_block_comment(int *x) {} */
static const char *msg = "__global__ void in_a_string(int *x) {}";
static const char *raw = R"x(__global__ void in_a_raw_string(int *y) {})x";
#define LONG_MACRO(a) \
    __global__ void in_a_continued_macro(a *x) {}

extern "C" __global__ void __launch_bounds__(256, 2)
scale(const float *__restrict__ x, float *__restrict__ y, int n, float a) {
    const char c = '}';  // a brace in a character literal
    if (n > 1'000) { y[0] = x[0]; }
}

__global__ void plain(double *out, const std::int64_t *idx, unsigned long long count);

template <typename T, int BLOCK>
__global__ void tmpl(const T *in, T *out, size_t n) {}

extern "C" {
__global__ void in_block(const __half *h, __nv_bfloat16 *b, short s, unsigned u,
                         const int8_t *i8, unsigned char *u8, long long ll) {}
}

__global__ void plain(double *out, const std::int64_t *idx, unsigned long long count) {}

extern "C" __global__ void odd(float4 *v, const MyStruct *m, bool flag, Foo<int, 3> *t,
                               float **pp, const float x[], char c, uint16_t w = 3) {}
extern "C" __global__ void unnamed(const float *, float *, int);
extern "C" __global__ void no_params(void) {}
"#;

    #[test]
    fn comments_strings_and_macros_hide_no_kernel_and_hide_none() {
        let ks = kernels(SRC);
        let names: Vec<&str> = ks.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "scale",
                "plain",
                "tmpl",
                "in_block",
                "odd",
                "unnamed",
                "no_params"
            ]
        );
    }

    #[test]
    fn each_parameter_is_read_with_its_constness_and_type() {
        let ks = kernels(SRC);
        let k = &ks[0];
        assert!(k.extern_c && k.template.is_none());
        assert_eq!(k.launch_bounds.as_deref(), Some("256, 2"));
        assert_eq!(k.line, 11);
        let names: Vec<_> = k.params.iter().map(|p| p.name.clone().unwrap()).collect();
        assert_eq!(names, ["x", "y", "n", "a"]);
        assert_eq!(kind(k, 0), &ptr(Dtype::F32, true));
        assert_eq!(kind(k, 1), &ptr(Dtype::F32, false));
        assert_eq!(kind(k, 2), &val(Dtype::I32));
        assert_eq!(kind(k, 3), &val(Dtype::F32));
        assert_eq!(k.params[0].text, "const float *__restrict__ x");

        // Declared, then defined: one kernel; not extern "C".
        let p = &ks[1];
        assert!(!p.extern_c);
        assert_eq!(kind(p, 0), &ptr(Dtype::F64, false));
        assert_eq!(kind(p, 1), &ptr(Dtype::I64, true));
        assert_eq!(kind(p, 2), &val(Dtype::U64));

        let t = &ks[2];
        assert_eq!(t.template.as_deref(), Some("typename T, int BLOCK"));
        assert!(
            matches!(kind(t, 0), ParamKind::Pointer { elem: Elem::Unknown { why, .. }, read_only: true } if why.contains("template parameter"))
        );
        assert_eq!(kind(t, 2), &val(Dtype::U64));

        let b = &ks[3];
        assert!(b.extern_c, "inside an extern \"C\" block");
        let want = [
            ptr(Dtype::F16, true),
            ptr(Dtype::Bf16, false),
            val(Dtype::I16),
            val(Dtype::U32),
            ptr(Dtype::I8, true),
            ptr(Dtype::U8, false),
            val(Dtype::I64),
        ];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(kind(b, i), w, "in_block parameter {i}");
        }

        let o = &ks[4];
        assert_eq!(
            kind(o, 0),
            &ParamKind::Pointer {
                elem: Elem::Vector {
                    dtype: Dtype::F32,
                    count: 4,
                    name: "float4".into()
                },
                read_only: false
            }
        );
        let why = |i: usize| match kind(o, i) {
            ParamKind::Pointer {
                elem: Elem::Unknown { name, why },
                ..
            }
            | ParamKind::Value(Elem::Unknown { name, why }) => format!("{name}: {why}"),
            other => panic!("{i}: {other:?}"),
        };
        assert!(
            why(1).starts_with("MyStruct: klab has no dtype for it (f16 bf16"),
            "{}",
            why(1)
        );
        assert!(
            matches!(kind(o, 2), ParamKind::Value(Elem::Bool)),
            "{:?}",
            kind(o, 2)
        );
        assert!(why(3).contains("a template type"), "{}", why(3));
        assert!(why(4).contains("a pointer to pointers"), "{}", why(4));
        assert_eq!(kind(o, 5), &ptr(Dtype::F32, true), "an array is a pointer");
        assert!(why(6).contains("plain char"), "{}", why(6));
        assert_eq!(
            kind(o, 7),
            &val(Dtype::U16),
            "a default argument is dropped"
        );
        assert_eq!(o.params[7].name.as_deref(), Some("w"));

        let u = &ks[5];
        assert!(u.params.iter().all(|p| p.name.is_none()));
        assert_eq!(kind(u, 2), &val(Dtype::I32));
        assert!(ks[6].params.is_empty());
    }

    #[test]
    fn const_protects_what_it_stands_before() {
        let k =
            &kernels("__global__ void k(float const *a, float *const b, const float *const c) {}")
                [0];
        assert_eq!(kind(k, 0), &ptr(Dtype::F32, true));
        assert_eq!(
            kind(k, 1),
            &ptr(Dtype::F32, false),
            "only the pointer is const"
        );
        assert_eq!(kind(k, 2), &ptr(Dtype::F32, true));
        assert_eq!(k.params[1].name.as_deref(), Some("b"));
    }

    #[test]
    fn integer_spellings_map_to_their_dtypes() {
        for (ty, d) in [
            ("int", Dtype::I32),
            ("signed", Dtype::I32),
            ("unsigned", Dtype::U32),
            ("unsigned int", Dtype::U32),
            ("uint32_t", Dtype::U32),
            ("long long", Dtype::I64),
            ("long long int", Dtype::I64),
            ("unsigned long long", Dtype::U64),
            ("long unsigned int", Dtype::U64),
            ("size_t", Dtype::U64),
            ("short", Dtype::I16),
            ("unsigned short", Dtype::U16),
            ("signed char", Dtype::I8),
            ("unsigned char", Dtype::U8),
            ("std::uint8_t", Dtype::U8),
            ("::int16_t", Dtype::I16),
            ("half", Dtype::F16),
            ("nv_bfloat16", Dtype::Bf16),
        ] {
            let k = kernels(&format!("__global__ void k({ty} v, const {ty} *p) {{}}"));
            assert_eq!(kind(&k[0], 0), &val(d), "{ty}");
            assert_eq!(k[0].params[0].name.as_deref(), Some("v"), "{ty}");
            assert_eq!(kind(&k[0], 1), &ptr(d, true), "{ty}");
        }
    }

    /// A function-like macro between the return type and the name (PyTorch's
    /// `C10_LAUNCH_BOUNDS_1(...)`) is no kernel name; a kernel whose list is followed by an
    /// attribute-like macro keeps its own name.
    #[test]
    fn a_function_like_macro_before_the_name_is_skipped() {
        let src = "#define LB(n) __launch_bounds__(n)\n\
                   __global__ void LB(256) scale(const float *x, float *y, int n) {}\n\
                   template <typename T> __global__ void C10_LAUNCH_BOUNDS_1(CUDA_NUM_THREADS, 4) conv(const T *x, int n) {}\n\
                   __global__ void plain(float *y, int n) ATTR(x) {}\n";
        let names: Vec<String> = kernels(src).iter().map(|k| k.name.clone()).collect();
        assert_eq!(names, ["scale", "conv", "plain"]);
        // Macros are written in capitals: an empty list or a product is still a macro's.
        let capitals = "__global__ void LAUNCH_BOUNDS() a(float *y, int n) {}\n\
                        __global__ void LB(WARPS * 32) b(float *y, int n) {}\n\
                        __global__ void c(A * B) ATTR(x) {}\n";
        let names: Vec<String> = kernels(capitals).iter().map(|k| k.name.clone()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        match lookup_entry(src, "scale") {
            EntryLookup::Kernel(k) => assert_eq!(k.params.len(), 3),
            other => panic!("{other:?}"),
        }
    }

    /// `#if 0` is dead code; the branches of an `#ifdef` are the compiler's to choose.
    #[test]
    fn preprocessor_branches_are_read_as_the_compiler_may_see_them() {
        let dead = "#if 0\n__global__ void scale(const float *x, float *y, int n) { }\n#endif\n\
                    __global__ void scale(const float *x, float *y, int n, float a) {}\n";
        match lookup_entry(dead, "scale") {
            EntryLookup::Kernel(k) => assert_eq!(k.params.len(), 4),
            other => panic!("{other:?}"),
        }
        let live_else = "#if 1\n__global__ void a(int n) {}\n#else\n__global__ void a(int n, int m) {}\n#endif\n";
        assert_eq!(kernels(live_else).len(), 1);
        let either = "#ifdef USE_DOUBLE\n__global__ void scale(const double *x, int n) {}\n#else\n\
                      __global__ void scale(const float *x, int n) {}\n#endif\n";
        assert_eq!(lookup_entry(either, "scale"), EntryLookup::CannotTell);
        let in_list = "__global__ void scale(const float *x,\n#ifdef WITH_Z\n    float *z,\n#endif\n    float *y, int n) {}\n";
        match lookup_entry(in_list, "scale") {
            EntryLookup::Kernel(k) => {
                let (readable, all) = k.readable_params();
                assert_eq!((readable.len(), all), (1, false));
            }
            other => panic!("{other:?}"),
        }
        // `#if 0` in the list is dead: every parameter is read.
        let dead_in_list =
            "__global__ void scale(const double *x,\n#if 0\n float *u,\n#endif\n int n) {}\n";
        match lookup_entry(dead_in_list, "scale") {
            EntryLookup::Kernel(k) => assert_eq!(k.readable_params().0.len(), 2),
            other => panic!("{other:?}"),
        }
        // Overloads inside one include guard are overloads; a name in a branch of its own
        // is read as neither declaration.
        let guarded_overloads =
            "#ifndef G_CUH\n#define G_CUH\n__global__ void scale(const double *x, int n) {}\n\
                                 __global__ void scale(const int *x, int n) {}\n#endif\n";
        assert!(matches!(
            lookup_entry(guarded_overloads, "scale"),
            EntryLookup::Overloaded(_)
        ));
        let name_in_branch =
            "__global__ void\n#ifdef D\nscale(double *x)\n#else\nscale(float *x)\n#endif\n{}\n";
        match lookup_entry(name_in_branch, "scale") {
            EntryLookup::Kernel(k) => assert_eq!(k.readable_params(), (&[][..], false)),
            other => panic!("{other:?}"),
        }
        // A directive-like line inside a comment is no directive.
        let commented = "#if 0 /* the old path; the\n#else branch below */\n__global__ void scale(double *x) {}\n\
                         #else\n__global__ void scale(float *x) {}\n#endif\n";
        match lookup_entry(commented, "scale") {
            EntryLookup::Kernel(k) => assert_eq!(k.params[0].type_text, "float *"),
            other => panic!("{other:?}"),
        }
        let in_dead_comment = "#if 0\n/*\n#else\n*/\n__global__ void scale(double *x) {}\n#endif\n__global__ void scale(float *x) {}\n";
        assert_eq!(kernels(in_dead_comment).len(), 1);
        // A comment opener in a dead string opens nothing; an apostrophe in dead prose ends
        // at its line.
        let dead_literals = "#if 0\nprintf(\"/*\");\nwe don't use this\n#endif\n__global__ void live(float *x) {}\n";
        let names: Vec<String> = kernels(dead_literals)
            .iter()
            .map(|k| k.name.clone())
            .collect();
        assert_eq!(names, ["live"]);
        // A whole file behind a guard is read as usual.
        let guarded = "#ifdef __CUDACC__\n__global__ void g(float *y, int n) {}\n#endif\n";
        match lookup_entry(guarded, "g") {
            EntryLookup::Kernel(k) => {
                assert!(!k.branches.is_empty());
                assert_eq!(k.readable_params().0.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        // Nested: a dead group inside an undecided one, and an #elif after a dead #if.
        let nested = "#ifdef X\n#if 0\n__global__ void d(int n) {}\n#endif\n#endif\n\
                      #if 0\n__global__ void e(int n) {}\n#elif defined(Y)\n__global__ void f(int n) {}\n#endif\n";
        let names: Vec<String> = kernels(nested).iter().map(|k| k.name.clone()).collect();
        assert_eq!(names, ["f"]);
    }

    /// Bytes that are not UTF-8 are the compiler's business only outside comments.
    #[test]
    fn bytes_that_are_not_utf8_are_found_outside_comments_only() {
        let at = |b: &[u8]| invalid_outside_comments(b);
        assert_eq!(at(b"// Autor: J\xf6rg\n__global__ void k() {}\n"), None);
        assert_eq!(at(b"/* J\xf6rg\n   \xe9 */ int x;\n"), None);
        assert_eq!(at(b"int x;\nconst char *s = \"J\xf6rg\";\n"), Some(2));
        assert_eq!(at(b"int \xf6;\n"), Some(1));
        // Not comments: a `//` inside a string, and a comment closed before the byte.
        assert_eq!(at(b"const char *s = \"//\"; \xf6\n"), Some(1));
        assert_eq!(at(b"/* x */ \xf6\n"), Some(1));
        assert_eq!(at(b"/*/ \xf6 */\n"), None);
        // A line comment continued by a backslash goes on.
        assert_eq!(at(b"// a \\\n \xf6\n"), None);
        assert_eq!(at(b"char c = '\\\\'; \xf6\n"), Some(1));
        // Raw strings and digit separators (a reviewer's cases).
        assert_eq!(
            at(b"const char *s = R\"(say \"hi // J\xf6rg)\";\n"),
            Some(1)
        );
        assert_eq!(
            at(b"int m = 1'000; const char *s = \"'// J\xf6rg\";\n"),
            Some(1)
        );
        assert_eq!(at(b"__device__ int m = 1'000; // J\xf6rg\n"), None);
        assert_eq!(at(b"auto s = u8R\"x(a)\" )x\"; // \xf6\n"), None);
        assert_eq!(at(b"double d = 1e-5; char c = u8'a'; // \xf6\n"), None);
    }

    /// A parameter whose type is a file-scope alias of a pointer is that pointer.
    #[test]
    fn an_alias_of_a_pointer_is_a_pointer() {
        let src = "typedef float * realw_p;\ntypedef const float *realw_const_p;\n\
                   __global__ void k(realw_p y, realw_const_p x, const realw_p z, int n) {}\n";
        let k = &kernels(src)[0];
        let kinds: Vec<&ParamKind> = k.params.iter().map(|p| &p.kind).collect();
        let f32p = |read_only| ParamKind::Pointer {
            elem: Elem::Known(Dtype::F32),
            read_only,
        };
        assert_eq!(kinds[..3], [&f32p(false), &f32p(true), &f32p(false)]);
    }

    /// An alias of an alias is read; an alias klab cannot read anywhere makes the name
    /// unreadable everywhere (a reviewer's namespace `real` of doubles with an attribute was
    /// read as the file's float `real`).
    #[test]
    fn chained_and_unreadable_aliases() {
        let src =
            "typedef float real;\ntypedef real *real_p;\n__global__ void k(real_p y, int n) {}\n";
        assert_eq!(
            kernels(src)[0].params[0].kind,
            ParamKind::Pointer {
                elem: Elem::Known(Dtype::F32),
                read_only: false
            }
        );
        let src = "typedef float real;\nnamespace dbl { typedef double real __attribute__((aligned(8)));\n\
                   __global__ void k(const real *x, int n) {} }\n";
        assert!(matches!(
            kernels(src)[0].params[0].kind,
            ParamKind::Pointer {
                elem: Elem::Unknown { .. },
                ..
            }
        ));
    }
}
