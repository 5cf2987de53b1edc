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

/// Every `#include` directive of `text` whose header is written out, with how it is
/// delimited, in order. A directive whose header is a macro (`#include HEADER`) is not read.
pub fn include_directives(text: &str) -> impl Iterator<Item = (&str, Delimiter)> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix("include")?.trim_start();
        let (close, delimiter) = match rest.chars().next()? {
            '"' => ('"', Delimiter::Quoted),
            '<' => ('>', Delimiter::Angled),
            _ => return None,
        };
        let name = &rest[1..];
        let end = name.find(close)?;
        (end > 0).then(|| (&name[..end], delimiter))
    })
}

/// The headers a source reaches by `#include`, read when the manifest is: the files, in the
/// order first reached, and one digest over their paths and bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReachedHeaders {
    pub sha256: String,
    pub files: Vec<PathBuf>,
}

impl ReachedHeaders {
    /// Follow `text`'s includes (the file at `source`) through every header found, as NVRTC
    /// looks for them (the module's docs), with `include_dirs` as its `-I` folders. A header
    /// found nowhere is left to the compiler: it may be the toolkit's, or behind an `#if`.
    /// `Err` is one line: a header that cannot be read, or more than [`MAX_FILES`] headers or
    /// [`MAX_BYTES`] in all.
    pub fn of(
        source: &Path,
        text: &str,
        include_dirs: &[IncludeDir],
    ) -> Result<ReachedHeaders, String> {
        let mut files: Vec<PathBuf> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut h = Sha256::new();
        let mut total = 0u64;
        // (the including file, its text), depth first in reading order.
        let mut pending = vec![(source.to_path_buf(), text.to_string())];
        while let Some((file, text)) = pending.pop() {
            let beside = file.parent().unwrap_or(Path::new(""));
            let mut found = Vec::new();
            for (name, delimiter) in include_directives(&text) {
                let quoted = (delimiter == Delimiter::Quoted).then(|| beside.join(name));
                let Some(path) = quoted
                    .into_iter()
                    .chain(include_dirs.iter().map(|d| d.path.join(name)))
                    // Not is_file: a FIFO is found here and refused, not left for NVRTC
                    // to block on.
                    .find(|p| p.exists() && !p.is_dir())
                else {
                    continue;
                };
                // Reached twice (or through a cycle of headers), read once.
                let key = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                if !seen.insert(key) {
                    continue;
                }
                let bytes = read_regular(&path, Input::HEADER).map_err(|e| e.to_string())?;
                total += bytes.len() as u64;
                if files.len() >= MAX_FILES || total > MAX_BYTES {
                    return Err(format!(
                        "{} reaches more than {MAX_FILES} headers or {} MiB by #include; klab hashes every header a source reaches into the compile cache's key",
                        source.display(),
                        MAX_BYTES >> 20
                    ));
                }
                let name = path.to_string_lossy();
                h.update(name.as_bytes());
                h.update([0]);
                h.update((bytes.len() as u64).to_le_bytes());
                h.update(&bytes);
                files.push(path.clone());
                found.push((path, String::from_utf8_lossy(&bytes).into_owned()));
            }
            // Pushed in reverse so that the first include is read next.
            pending.extend(found.into_iter().rev());
        }
        Ok(ReachedHeaders {
            sha256: hex::encode(h.finalize()),
            files,
        })
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

    #[test]
    fn include_directives_are_read_with_their_delimiters() {
        let text = "#include <cuda_fp16.h>\n  #  include \"tiles/tile.cuh\" // why\n#include HEADER\n#include\"a.h\"\n#includes \"no\"\n#include \"\"\nint x; // #include \"b.h\"\n";
        let got: Vec<_> = include_directives(text).collect();
        assert_eq!(
            got,
            [
                ("cuda_fp16.h", Delimiter::Angled),
                ("tiles/tile.cuh", Delimiter::Quoted),
                ("a.h", Delimiter::Quoted),
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
        let got = ReachedHeaders::of(&source, text, std::slice::from_ref(&inc)).unwrap();
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
        assert_eq!(
            ReachedHeaders::of(&source, text, std::slice::from_ref(&inc)).unwrap(),
            got
        );
        // Without the include folder, its header is not found (the compiler says so).
        assert_eq!(
            ReachedHeaders::of(&source, text, &[]).unwrap().files.len(),
            3
        );
        // Editing a reached header changes the digest; editing one not reached does not.
        fs::write(src.join("unused.cuh"), "y").unwrap();
        assert_eq!(
            ReachedHeaders::of(&source, text, std::slice::from_ref(&inc)).unwrap(),
            got
        );
        fs::write(src.join("sub/leaf.cuh"), "#define LEAF 2\n").unwrap();
        let edited = ReachedHeaders::of(&source, text, std::slice::from_ref(&inc)).unwrap();
        assert_ne!(edited.sha256, got.sha256);
        // A source with no header of its own reaches none.
        let none = ReachedHeaders::of(&source, "#include <cuda_bf16.h>\n", &[inc]).unwrap();
        assert!(none.files.is_empty());
    }

    #[test]
    fn a_reached_header_that_cannot_be_read_is_one_line() {
        let t = tree();
        let fifo = t.path().join("pipe.cuh");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e =
            ReachedHeaders::of(&t.path().join("k.cu"), "#include \"pipe.cuh\"\n", &[]).unwrap_err();
        assert!(e.contains("not a regular file") && !e.contains('\n'), "{e}");
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
