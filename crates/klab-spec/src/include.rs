//! A manifest's include folders (`include_dirs = ["inc"]`): each is passed to NVRTC as `-I`
//! and read once, when the manifest is, into one digest of every file under it, so that
//! the compile cache ([`IncludeDir::sha256`] is in klab-cuda's cache key) rebuilds a module
//! when one of its headers changes. The read is bounded ([`MAX_FILES`], [`MAX_BYTES`]): a
//! folder past either is refused rather than hashed for minutes.

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
