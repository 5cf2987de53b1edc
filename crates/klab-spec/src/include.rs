//! The headers a kernel's source is compiled with, and their digests for the compile cache
//! (klab-cuda's cache key holds every digest here, so editing a header rebuilds a module):
//!
//! - A manifest's include folders (`include_dirs = ["inc"]`): each is passed to NVRTC as `-I`
//!   and read once, when the manifest is, into one [`IncludeDir`] digest of every file under
//!   it. The read is bounded ([`MAX_FILES`], [`MAX_BYTES`]): a folder past either is refused
//!   rather than hashed for minutes.
//! - The headers the source reaches by `#include` ([`ReachedHeaders`]), found as NVRTC finds
//!   them when the program is named by the source's path: a quoted name beside the file that
//!   includes it, then in the include folders; an angled name in the include folders. A
//!   header beside the source needs no `include_dirs`, and only what is reached is read (a
//!   source in a large project's folder does not hash the whole folder).

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use klab_core::artifact::{read_regular, Input};

/// The most files one include folder may hold.
pub const MAX_FILES: usize = 2_000;
/// The most bytes the files of one include folder may hold together: as much as one
/// header may hold alone.
pub const MAX_BYTES: u64 = Input::HEADER.cap;
/// Folders nested deeper than this are refused (a symbolic link to a parent would loop).
const MAX_DEPTH: usize = 32;

/// An include folder and what its files held when the manifest was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IncludeDir {
    pub path: PathBuf,
    /// SHA-256 over every file under `path` (symbolic links followed), in order of their
    /// paths relative to it: each relative path, its length and its bytes.
    pub sha256: String,
    pub files: usize,
}

impl IncludeDir {
    /// Read and hash the folder at `path`; `Err` is one line saying why not.
    pub fn read(path: &Path) -> Result<IncludeDir, String> {
        match fs::metadata(path) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("{} is not a folder", path.display())),
            Err(e) => return Err(format!("no folder {} ({e})", path.display())),
        }
        let mut files = Vec::new();
        walk(path, Path::new(""), 0, &mut files)?;
        files.sort();
        let mut h = Sha256::new();
        let mut total = 0u64;
        for rel in &files {
            let full = path.join(rel);
            // A FIFO or device node under the folder is refused, not waited on or read.
            let buf = read_regular(&full, Input::HEADER).map_err(|e| e.to_string())?;
            total += buf.len() as u64;
            if total > MAX_BYTES {
                return Err(format!(
                    "{} holds more than {} MiB; klab hashes every file of an include folder into the compile cache's key, so name a smaller folder",
                    path.display(),
                    MAX_BYTES >> 20
                ));
            }
            let name = rel.to_string_lossy().replace('\\', "/");
            h.update(name.as_bytes());
            h.update([0]);
            h.update((buf.len() as u64).to_le_bytes());
            h.update(&buf);
        }
        Ok(IncludeDir {
            path: path.to_path_buf(),
            sha256: hex::encode(h.finalize()),
            files: files.len(),
        })
    }
}

/// How an `#include` names its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delimiter {
    /// `#include "tile.cuh"`: beside the including file first.
    Quoted,
    /// `#include <cuda_fp16.h>`: the include folders only.
    Angled,
}

/// What a directive names as a header: written out, or by a macro (`#include HEADER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Include {
    Header { name: String, delimiter: Delimiter },
    Macro(String),
}

/// `text` as the preprocessor reads its lines: each backslash-newline spliced and each
/// comment replaced by a space (string and character literals kept as they are), so that
/// `#include/**/"a.h"`, `/* x */ #include "a.h"` and a directive continued on the next line
/// read as they compile.
fn logical_lines(text: &str) -> Vec<String> {
    let spliced = text.replace("\\\r\n", "").replace("\\\n", "");
    let c: Vec<char> = spliced.chars().collect();
    let mut out = String::with_capacity(c.len());
    let mut i = 0;
    while i < c.len() {
        match (c[i], c.get(i + 1)) {
            ('/', Some('/')) => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
                out.push(' ');
            }
            ('/', Some('*')) => {
                i += 2;
                while i < c.len() && !(c[i] == '*' && c.get(i + 1) == Some(&'/')) {
                    // A comment spanning lines keeps them, so later lines stay lines.
                    if c[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
                i += 2;
                out.push(' ');
            }
            // A digit separator (1'000, 0xFF'FF), not a character literal (u8'a').
            ('\'', _) if in_number(&c, i) => {
                out.push('\'');
                i += 1;
            }
            // A raw string, R"delim( ... )delim": nothing inside it is a comment or a quote.
            ('"', _) if i > 0 && c[i - 1] == 'R' => {
                let open = c[i + 1..].iter().position(|&ch| ch == '(');
                let delim: String =
                    open.map_or(String::new(), |o| c[i + 1..i + 1 + o].iter().collect());
                let close: Vec<char> = format!("){delim}\"").chars().collect();
                let mut j = i + 1;
                while j < c.len() && !c[j..].starts_with(&close) {
                    // Its lines stay lines.
                    if c[j] == '\n' {
                        out.push('\n');
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = (j + close.len()).min(c.len());
            }
            (q @ ('"' | '\''), _) => {
                out.push(q);
                i += 1;
                while i < c.len() && c[i] != q && c[i] != '\n' {
                    if c[i] == '\\' && i + 1 < c.len() {
                        out.push(c[i]);
                        i += 1;
                    }
                    out.push(c[i]);
                    i += 1;
                }
                if i < c.len() && c[i] == q {
                    out.push(q);
                    i += 1;
                }
            }
            (ch, _) => {
                out.push(ch);
                i += 1;
            }
        }
    }
    out.lines().map(str::to_string).collect()
}

/// Whether `c[i]` follows a number's digits: the word before it starts with a digit.
fn in_number(c: &[char], i: usize) -> bool {
    let start = c[..i]
        .iter()
        .rposition(|ch| !(ch.is_ascii_alphanumeric() || *ch == '.'))
        .map_or(0, |p| p + 1);
    start < i && c[start].is_ascii_digit()
}

/// The directive a logical line holds, after its `#` (or the digraph `%:`), trimmed.
fn directive(line: &str) -> Option<&str> {
    let line = line.trim_start();
    line.strip_prefix('#')
        .or_else(|| line.strip_prefix("%:"))
        .map(str::trim_start)
}

/// A header written out at the start of `rest` (`"a.h"` or `<a.h>`).
fn written_header(rest: &str) -> Option<Include> {
    let (close, delimiter) = match rest.chars().next()? {
        '"' => ('"', Delimiter::Quoted),
        '<' => ('>', Delimiter::Angled),
        _ => return None,
    };
    let name = &rest[1..];
    let end = name.find(close)?;
    (end > 0).then(|| Include::Header {
        name: name[..end].to_string(),
        delimiter,
    })
}

/// Every header `text`'s directives name, in order: each `#include` (and `#include_next`),
/// and each `__has_include(...)` an `#if` asks about (whether it exists decides what
/// compiles).
pub fn includes(text: &str) -> Vec<Include> {
    let mut out = Vec::new();
    for line in logical_lines(text) {
        let Some(d) = directive(&line) else { continue };
        let word_end = d
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(d.len());
        let (word, rest) = (&d[..word_end], d[word_end..].trim_start());
        if matches!(word, "include" | "include_next") {
            match written_header(rest) {
                Some(h) => out.push(h),
                None => {
                    let m: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !m.is_empty() {
                        out.push(Include::Macro(m));
                    }
                }
            }
            continue;
        }
        for (at, _) in d.match_indices("__has_include") {
            let after = d[at..].trim_start_matches("__has_include_next");
            let after = after.trim_start_matches("__has_include").trim_start();
            if let Some(h) = after
                .strip_prefix('(')
                .and_then(|r| written_header(r.trim_start()))
            {
                out.push(h);
            }
        }
    }
    out
}

/// Whether CUDA C++ `text` includes a header of its own (`#include "kernels.cuh"` or one
/// named by a macro, not a toolkit's `<...>`), where kernels klab does not read may be
/// declared.
pub fn includes_own_headers(text: &str) -> bool {
    includes(text).iter().any(|i| {
        matches!(
            i,
            Include::Header {
                delimiter: Delimiter::Quoted,
                ..
            } | Include::Macro(_)
        )
    })
}

/// The object-like macros of `text` that name a header (`#define TILE_H "tile.cuh"`), for an
/// `#include TILE_H`.
fn header_macros(text: &str) -> Vec<(String, Include)> {
    logical_lines(text)
        .iter()
        .filter_map(|line| {
            let rest = directive(line)?.strip_prefix("define")?;
            let rest = rest.strip_prefix([' ', '\t'])?.trim_start();
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            let header = written_header(rest[end..].trim_start())?;
            Some((rest[..end].to_string(), header))
        })
        .collect()
}

/// The headers a source reaches by `#include`, read when the manifest is: the files, in the
/// order first reached, and one digest over how each directive resolved (the file found,
/// with its path and bytes, or that none was: a header created later, or a change of which
/// folder holds one, changes the digest too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReachedHeaders {
    pub sha256: String,
    pub files: Vec<PathBuf>,
    /// Why the digest may not cover everything a compile reads (a header named by a macro
    /// klab cannot resolve, a file it cannot read, more than [`MAX_FILES`] headers or
    /// [`MAX_BYTES`]): the compile cache is then not used for this source, rather than the
    /// manifest refused (the file may be behind an `#if` that is never true).
    pub incomplete: Option<String>,
}

impl ReachedHeaders {
    /// Follow `text`'s includes (the file at `source`) through every header found, as NVRTC
    /// looks for them (the module's docs), with `include_dirs` as its `-I` folders. A header
    /// found nowhere is left to the compiler: it may be the toolkit's or klab's standard
    /// headers, or behind an `#if`.
    pub fn of(source: &Path, text: &str, include_dirs: &[IncludeDir]) -> ReachedHeaders {
        let mut walk = Walk {
            source,
            include_dirs,
            files: Vec::new(),
            seen: std::collections::HashSet::new(),
            macros: Vec::new(),
            hash: Sha256::new(),
            total: 0,
            incomplete: None,
        };
        // (the including file, its text), depth first in reading order.
        let mut pending = vec![(source.to_path_buf(), text.to_string())];
        while let Some((file, text)) = pending.pop() {
            let beside = file.parent().unwrap_or(Path::new("")).to_path_buf();
            let mut found = Vec::new();
            for (name, delimiter) in walk.named(&file, &text) {
                match walk.visit(&beside, &name, delimiter) {
                    Visit::Read(path, text) => found.push((path, text)),
                    Visit::Known => {}
                    Visit::Full => break,
                }
            }
            // Pushed in reverse so that the first include is read next.
            pending.extend(found.into_iter().rev());
        }
        ReachedHeaders {
            sha256: hex::encode(walk.hash.finalize()),
            files: walk.files,
            incomplete: walk.incomplete,
        }
    }
}

/// What [`ReachedHeaders::of`] has seen so far.
struct Walk<'a> {
    source: &'a Path,
    include_dirs: &'a [IncludeDir],
    files: Vec<PathBuf>,
    /// (the file, the real folder it was reached from): a header read once from each.
    seen: std::collections::HashSet<(PathBuf, PathBuf)>,
    /// The header macros of every file read so far.
    macros: Vec<(String, Include)>,
    hash: Sha256,
    total: u64,
    incomplete: Option<String>,
}

/// What became of one include in [`Walk::visit`].
enum Visit {
    /// A header read for the first time from its folder: its path and text, to follow.
    Read(PathBuf, String),
    /// Absent, read before, or unreadable (said in `incomplete`).
    Known,
    /// Past [`MAX_FILES`] or [`MAX_BYTES`]: nothing more is read.
    Full,
}

impl Walk<'_> {
    fn note(&mut self, why: String) {
        self.incomplete.get_or_insert(why);
    }

    /// The headers `file` (holding `text`) names, in order. A header named by a macro is
    /// each header that macro is defined as anywhere read so far (an #ifdef may pick
    /// either): all of them are in the digest.
    fn named(&mut self, file: &Path, text: &str) -> Vec<(String, Delimiter)> {
        self.macros.extend(header_macros(text));
        let mut out = Vec::new();
        for include in includes(text) {
            match include {
                Include::Header { name, delimiter } => out.push((name, delimiter)),
                Include::Macro(m) => {
                    let before = out.len();
                    out.extend(
                        self.macros
                            .iter()
                            .filter(|(n, _)| *n == m)
                            .filter_map(|(_, h)| match h {
                                Include::Header { name, delimiter } => {
                                    Some((name.clone(), *delimiter))
                                }
                                Include::Macro(_) => None,
                            }),
                    );
                    if out.len() == before {
                        self.note(format!(
                            "{} names a header by the macro {m}, which klab cannot follow",
                            file.display()
                        ));
                    }
                }
            }
        }
        out
    }

    /// One include of a file in `beside`: where it resolved (or that it did not) in the
    /// digest, and the header read when it is new.
    fn visit(&mut self, beside: &Path, name: &str, delimiter: Delimiter) -> Visit {
        let quoted = (delimiter == Delimiter::Quoted).then(|| beside.join(name));
        let resolved = quoted
            .into_iter()
            .chain(self.include_dirs.iter().map(|d| d.path.join(name)))
            // Not is_file: a FIFO is found here (and not read), as NVRTC finds it.
            .find(|p| p.exists() && !p.is_dir());
        for part in [beside.to_string_lossy().as_bytes(), name.as_bytes()] {
            self.hash.update(part);
            self.hash.update([0]);
        }
        let Some(path) = resolved else {
            self.hash.update(b"absent\0");
            return Visit::Known;
        };
        self.hash.update(path.to_string_lossy().as_bytes());
        self.hash.update([0]);
        // Reached again (a header with include guards, a cycle): read once. What a header
        // includes is looked for beside the path NVRTC opened (the system resolving `..`
        // and links in it), so a header is the same one again only from the same folder: a
        // file reached through a symbolic link elsewhere is read again, and its includes
        // looked for there.
        let again = (
            fs::canonicalize(&path).unwrap_or_else(|_| path.clone()),
            path.parent()
                .and_then(|d| fs::canonicalize(d).ok())
                .unwrap_or_default(),
        );
        if !self.seen.insert(again) {
            return Visit::Known;
        }
        if self.files.len() >= MAX_FILES {
            self.note(format!(
                "{} reaches more than {MAX_FILES} headers",
                self.source.display()
            ));
            return Visit::Full;
        }
        let bytes = match read_regular(&path, Input::HEADER) {
            Ok(b) => b,
            Err(e) => {
                self.note(e.to_string());
                return Visit::Known;
            }
        };
        self.total += bytes.len() as u64;
        if self.total > MAX_BYTES {
            self.note(format!(
                "{} reaches more than {} MiB of headers",
                self.source.display(),
                MAX_BYTES >> 20
            ));
            return Visit::Full;
        }
        self.hash.update((bytes.len() as u64).to_le_bytes());
        self.hash.update(&bytes);
        self.files.push(path.clone());
        Visit::Read(path, String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Every file under `root/rel`, as paths relative to `root`.
fn walk(root: &Path, rel: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let dir = root.join(rel);
    if depth > MAX_DEPTH {
        return Err(format!(
            "{} is nested more than {MAX_DEPTH} folders deep (a symbolic link loop?)",
            dir.display()
        ));
    }
    let entries = fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let rel = rel.join(entry.file_name());
        // Followed through symbolic links: a header reached by one is read like any other.
        let meta = fs::metadata(root.join(&rel))
            .map_err(|e| format!("cannot read {}: {e}", root.join(&rel).display()))?;
        if meta.is_dir() {
            walk(root, &rel, depth + 1, out)?;
        } else {
            out.push(rel);
            if out.len() > MAX_FILES {
                return Err(format!(
                    "{} holds more than {MAX_FILES} files; klab hashes every file of an include folder into the compile cache's key, so name a smaller folder",
                    root.display()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("inc/sub")).unwrap();
        fs::write(t.path().join("inc/a.cuh"), "#define A 1\n").unwrap();
        fs::write(t.path().join("inc/sub/b.cuh"), "#define B 2\n").unwrap();
        t
    }

    #[test]
    fn the_digest_covers_every_file_and_nothing_else() {
        let t = tree();
        let inc = t.path().join("inc");
        let first = IncludeDir::read(&inc).unwrap();
        assert_eq!(first.files, 2);
        assert_eq!(IncludeDir::read(&inc).unwrap(), first, "stable");
        // Editing a nested header changes the digest.
        fs::write(inc.join("sub/b.cuh"), "#define B 3\n").unwrap();
        let edited = IncludeDir::read(&inc).unwrap();
        assert_ne!(edited.sha256, first.sha256);
        // So does renaming a file with the same contents, or adding one.
        fs::rename(inc.join("sub/b.cuh"), inc.join("sub/c.cuh")).unwrap();
        assert_ne!(IncludeDir::read(&inc).unwrap().sha256, edited.sha256);
        fs::write(inc.join("empty.h"), "").unwrap();
        assert_eq!(IncludeDir::read(&inc).unwrap().files, 3);
        // A file outside the folder does not count.
        let before = IncludeDir::read(&inc).unwrap();
        fs::write(t.path().join("outside.h"), "x").unwrap();
        assert_eq!(IncludeDir::read(&inc).unwrap(), before);
    }

    fn header(name: &str, delimiter: Delimiter) -> Include {
        Include::Header {
            name: name.into(),
            delimiter,
        }
    }

    /// Every way a directive may be written that the preprocessor reads as an include:
    /// comments around and inside it, a line continued with a backslash, the `%:` digraph,
    /// `#include_next`, a macro, and `__has_include` in an `#if`; and what is no include.
    #[test]
    fn includes_are_read_as_the_preprocessor_reads_them() {
        use Delimiter::{Angled, Quoted};
        let text = "#include <cuda_fp16.h>\n  #  include \"tiles/tile.cuh\" // why\n\
                    #include HEADER\n#include\"a.h\"\n#includes \"no\"\n#include \"\"\n\
                    int x; // #include \"b.h\"\n/* x */ #include \"c.h\"\n#include/**/\"d.h\"\n\
                    #include \\\n  \"e.h\"\n#inc\\\nlude \"f.h\"\n%:include \"g.h\"\n\
                    #include_next <h.h>\n#if __has_include(\"i.h\") && __has_include( <j.h> )\n#endif\n\
                    /* #include \"k.h\"\n#include \"l.h\" */\nconst char* s = \"#include \\\"m.h\\\"\";\n\
                    const char r[] = R\"x(\" /* )x\";\nint big = 1'000; const char* q = \"a'/*\";\n\
                    char8_t e = u8'\"'; /* \" */\n\
                    #include \"n.h\"\n";
        assert_eq!(
            includes(text),
            [
                header("cuda_fp16.h", Angled),
                header("tiles/tile.cuh", Quoted),
                Include::Macro("HEADER".into()),
                header("a.h", Quoted),
                header("c.h", Quoted),
                header("d.h", Quoted),
                header("e.h", Quoted),
                header("f.h", Quoted),
                header("g.h", Quoted),
                header("h.h", Angled),
                header("i.h", Quoted),
                header("j.h", Angled),
                header("n.h", Quoted),
            ]
        );
    }

    /// A quoted header is looked for beside the file that includes it (each header's own
    /// folder for its includes), then in the include folders; an angled one only there. What
    /// is found nowhere (the toolkit's) is left out; a cycle is read once.
    #[test]
    fn the_headers_a_source_reaches_are_found_as_nvrtc_finds_them_and_hashed() {
        let t = tree();
        let src = t.path().join("src");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("top.cuh"), "#include \"sub/mid.cuh\"\n").unwrap();
        // Beside mid.cuh, not beside the source; then a header of the include folder.
        fs::write(
            src.join("sub/mid.cuh"),
            "#include \"leaf.cuh\"\n#include <a.cuh>\n",
        )
        .unwrap();
        fs::write(
            src.join("sub/leaf.cuh"),
            "#include \"../top.cuh\"\n#define LEAF 1\n",
        )
        .unwrap();
        // Not reached: beside the source, but never included.
        fs::write(src.join("unused.cuh"), "x").unwrap();
        let inc = IncludeDir::read(&t.path().join("inc")).unwrap();
        let source = src.join("k.cu");
        let text = "#include <cuda_fp16.h>\n#include \"top.cuh\"\n#include \"top.cuh\"\n";
        let of = |text: &str| ReachedHeaders::of(&source, text, std::slice::from_ref(&inc));
        let got = of(text);
        let names: Vec<_> = got
            .files
            .iter()
            .map(|p| {
                p.strip_prefix(t.path())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "src/top.cuh",
                "src/sub/mid.cuh",
                "src/sub/leaf.cuh",
                "inc/a.cuh"
            ]
        );
        assert_eq!(got.incomplete, None);
        assert_eq!(of(text), got);
        // Without the include folder, its header is not found (the compiler says so).
        assert_eq!(ReachedHeaders::of(&source, text, &[]).files.len(), 3);
        // Editing a reached header changes the digest; editing one not reached does not.
        fs::write(src.join("unused.cuh"), "y").unwrap();
        assert_eq!(of(text), got);
        fs::write(src.join("sub/leaf.cuh"), "#define LEAF 2\n").unwrap();
        let edited = of(text);
        assert_ne!(edited.sha256, got.sha256);
        // A header asked about by __has_include and absent: creating it changes the digest.
        let asks = "#if __has_include(\"opt.cuh\")\n#include \"opt.cuh\"\n#endif\n";
        let before = of(asks);
        assert!(before.files.is_empty());
        fs::write(src.join("opt.cuh"), "#define OPT 1\n").unwrap();
        assert_ne!(of(asks).sha256, before.sha256);
        // A header named by a macro defined as a header name is followed.
        let by_macro = of("#define TOP \"top.cuh\"\n#include TOP\n");
        assert_eq!(by_macro.files.first(), Some(&src.join("top.cuh")));
        assert_eq!(by_macro.incomplete, None);
        // A macro defined two ways (an #ifdef picks one): both headers are in the digest.
        fs::write(src.join("alt.cuh"), "#define ALT 1\n").unwrap();
        let either = "#ifdef USE_ALT\n#define H \"alt.cuh\"\n#else\n#define H \"top.cuh\"\n#endif\n#include H\n";
        let both = of(either);
        assert!(
            both.files.contains(&src.join("alt.cuh")) && both.files.contains(&src.join("top.cuh"))
        );
        fs::write(src.join("alt.cuh"), "#define ALT 2\n").unwrap();
        assert_ne!(of(either).sha256, both.sha256);
        // One klab cannot follow leaves the digest incomplete: no cache, not a refusal.
        let unknown = of("#include HEADER_OF(x)\n");
        assert!(unknown.incomplete.unwrap().contains("the macro HEADER_OF"));
    }

    /// `..` after a symbolic link to a folder is the link target's parent, as the system
    /// (and so NVRTC) resolves it, not the name before it in the text.
    #[cfg(unix)]
    #[test]
    fn dot_dot_after_a_linked_folder_is_the_targets_parent() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("real/deep")).unwrap();
        fs::create_dir_all(t.path().join("src")).unwrap();
        std::os::unix::fs::symlink(t.path().join("real/deep"), t.path().join("src/lnk")).unwrap();
        fs::write(
            t.path().join("real/deep/a.cuh"),
            "#include \"../tile.cuh\"\n",
        )
        .unwrap();
        fs::write(t.path().join("real/tile.cuh"), "#define TILE 32\n").unwrap();
        let source = t.path().join("src/k.cu");
        let of = || ReachedHeaders::of(&source, "#include \"lnk/a.cuh\"\n", &[]);
        let got = of();
        assert_eq!(got.files.len(), 2, "{:?}", got.files);
        fs::write(t.path().join("real/tile.cuh"), "#define TILE 64\n").unwrap();
        assert_ne!(of().sha256, got.sha256);
    }

    /// A header that cannot be read (a FIFO, behind an #if that is never true, say) is no
    /// refusal: the digest is incomplete, so the compile cache is not used.
    #[test]
    fn a_reached_header_that_cannot_be_read_leaves_the_digest_incomplete() {
        let t = tree();
        let fifo = t.path().join("pipe.cuh");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let got = ReachedHeaders::of(
            &t.path().join("k.cu"),
            "#if 0\n#include \"pipe.cuh\"\n#endif\n",
            &[],
        );
        let why = got.incomplete.unwrap();
        assert!(
            why.contains("not a regular file") && !why.contains('\n'),
            "{why}"
        );
    }

    #[test]
    fn a_missing_or_oversized_folder_is_refused_in_one_line() {
        let t = tree();
        let e = IncludeDir::read(&t.path().join("gone")).unwrap_err();
        assert!(e.starts_with("no folder "), "{e}");
        let e = IncludeDir::read(&t.path().join("inc/a.cuh")).unwrap_err();
        assert!(e.ends_with("is not a folder"), "{e}");
        let many = t.path().join("many");
        fs::create_dir_all(&many).unwrap();
        for i in 0..=MAX_FILES {
            fs::write(many.join(format!("h{i}.h")), "").unwrap();
        }
        let e = IncludeDir::read(&many).unwrap_err();
        assert!(e.contains("more than 2000 files"), "{e}");
        let big = t.path().join("big");
        fs::create_dir_all(&big).unwrap();
        let half = vec![0u8; (MAX_BYTES / 2 + 1) as usize];
        fs::write(big.join("a.h"), &half).unwrap();
        assert!(IncludeDir::read(&big).is_ok());
        fs::write(big.join("b.h"), &half).unwrap();
        let e = IncludeDir::read(&big).unwrap_err();
        assert!(e.contains("more than 64 MiB"), "{e}");
        assert!(!e.contains('\n'));
    }

    /// Issue 15: a FIFO among the headers blocked the manifest's read forever.
    #[test]
    fn a_fifo_in_an_include_folder_is_refused_not_waited_on() {
        let t = tree();
        let fifo = t.path().join("inc/sub/pipe.h");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = IncludeDir::read(&t.path().join("inc")).unwrap_err();
        assert!(
            e.contains("pipe.h is a FIFO (named pipe), not a regular file"),
            "{e}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_loop_is_refused_not_followed_forever() {
        let t = tree();
        std::os::unix::fs::symlink(t.path().join("inc"), t.path().join("inc/sub/up")).unwrap();
        let e = IncludeDir::read(&t.path().join("inc")).unwrap_err();
        assert!(e.contains("symbolic link loop"), "{e}");
    }
}
