//! Reading and writing the files klab is given and makes: every read and every atomic write
//! goes through here, so a hostile path is refused the same way everywhere.
//!
//! Reading: [`read_regular`] (bytes), [`read_text`] (UTF-8) and [`sha256_file`] (streamed)
//! open a path only when it is a regular file, without blocking (a FIFO is opened with
//! `O_NONBLOCK` and then refused by the handle's own metadata), and read at most the cap of
//! its [`Input`] kind plus one byte, so `/dev/zero` or a 5 GB file is one line, never a hang
//! or an exhausted memory. [`resolve_inside`] follows a relative path's symbolic links only
//! while they stay inside a folder (a run or receipt folder never leads to `/etc/shadow`).
//!
//! Writing: [`write_atomic`] refuses a target that exists and is not a regular file (a
//! symbolic link, FIFO, device node or folder would otherwise be replaced by the rename),
//! then writes a temporary file beside it and renames it over. Every failure is a
//! [`FileError`] that names the path.
//!
//! Also here: hashes, numbered run folders, the cache folder, UTC timestamps.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// One kind of file klab reads, with the most bytes it reads of one (a manifest is small; a
/// `.npy` input may be large). The name and the cap are said in a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input {
    /// What the file is, as a refusal names it ("manifest", "receipt").
    pub what: &'static str,
    /// The most bytes read.
    pub cap: u64,
}

const MIB: u64 = 1 << 20;

impl Input {
    pub const MANIFEST: Input = Input::new("manifest", 4 * MIB);
    pub const SOURCE: Input = Input::new("CUDA source", 16 * MIB);
    /// A C reference's source (checked here, read by the C compiler).
    pub const C_SOURCE: Input = Input::new("C reference source", 16 * MIB);
    /// One file of an include folder; the folder as a whole holds at most as much
    /// (`include::MAX_BYTES` is this cap).
    pub const HEADER: Input = Input::new("header", 64 * MIB);
    pub const SAMPLES: Input = Input::new("sample CSV", 256 * MIB);
    pub const RECEIPT: Input = Input::new("receipt", 16 * MIB);
    pub const LAB_RECORD: Input = Input::new("lab record", 16 * MIB);
    pub const PLAN: Input = Input::new("lab plan", 4 * MIB);
    /// A sweep file (`klab sweep --file`).
    pub const SWEEP_FILE: Input = Input::new("sweep file", 4 * MIB);
    /// A file of a run or receipt folder (summaries, CSVs, reports, logs), and any file
    /// klab hashes ([`sha256_file`]).
    pub const ARTIFACT: Input = Input::new("run artifact", 1024 * MIB);
    /// A Compute Sanitizer text report given to `klab sanitize --import`.
    pub const SANITIZER_REPORT: Input = Input::new("Compute Sanitizer report", 256 * MIB);
    /// A file given to `klab profile --import`, before its kind is known: only its first
    /// bytes are read as that ([`read_prefix`]); a report goes to ncu whole, a CSV page is
    /// read as [`Input::NCU_CSV`].
    pub const NCU_IMPORT: Input = Input::new("Nsight Compute report or CSV page", 64 * 1024 * MIB);
    /// A CSV page of an Nsight Compute report (`--page raw` or `--page details`).
    pub const NCU_CSV: Input = Input::new("Nsight Compute CSV page", 1024 * MIB);
    pub const CACHE_ENTRY: Input = Input::new("cache entry", 256 * MIB);
    pub const NPY: Input = Input::new(".npy array", 4096 * MIB);
    /// Checked, not read whole: SQLite reads the pages it needs.
    pub const NSYS_EXPORT: Input = Input::new("Nsight Systems export", 64 * 1024 * MIB);

    pub const fn new(what: &'static str, cap: u64) -> Input {
        Input { what, cap }
    }
}

/// Why a file was not read or written. Each names its path and reads as one line.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {} {}: {error}", .kind.what, .path.display())]
    Open {
        path: PathBuf,
        kind: Input,
        error: io::Error,
    },
    #[error("{} is {is}, not a regular file; klab reads a {} only from a regular file", .path.display(), .kind.what)]
    NotRegular {
        path: PathBuf,
        is: &'static str,
        kind: Input,
    },
    /// `size` when the file said it (its metadata); `None` when it grew while read.
    #[error("{} is {}, the most klab reads of a {}", .path.display(), over_cap(*.size, .kind.cap), .kind.what)]
    TooLarge {
        path: PathBuf,
        kind: Input,
        size: Option<u64>,
    },
    #[error("{} is not UTF-8 text", .path.display())]
    NotText { path: PathBuf },
    #[error("{} leads out of {} (to {}); klab follows a symbolic link only inside the folder", .path.display(), .folder.display(), .resolved.display())]
    Escapes {
        path: PathBuf,
        folder: PathBuf,
        resolved: PathBuf,
    },
    #[error("{} is {is}; klab writes only a regular file or a new one (- for stdout where an option takes it)", .path.display())]
    NotRegularOutput { path: PathBuf, is: &'static str },
    #[error("cannot write {}: {error}", .path.display())]
    Write { path: PathBuf, error: io::Error },
}

impl FileError {
    /// Whether the path does not exist (callers that treat absence as a note ask this).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Open { error, .. } if error.kind() == io::ErrorKind::NotFound)
    }

    /// Whether a file was expected and the path is a folder.
    pub fn is_folder(&self) -> bool {
        matches!(self, FileError::NotRegular { is, .. } if *is == FOLDER)
    }
}

const FOLDER: &str = "a folder";

/// What a file that is not regular is, in words.
fn file_type_words(t: fs::FileType) -> &'static str {
    if t.is_dir() {
        FOLDER
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// `17825792 bytes, more than 16 MiB` (or `larger than 16 MiB` without a size).
fn over_cap(size: Option<u64>, cap: u64) -> String {
    match size {
        Some(n) => format!("{n} bytes, more than {}", human_bytes(cap)),
        None => format!("larger than {}", human_bytes(cap)),
    }
}

/// `64 MiB`, `4 GiB`: caps are powers of two in practice.
fn human_bytes(n: u64) -> String {
    if n >= 1 << 30 && n % (1 << 30) == 0 {
        format!("{} GiB", n >> 30)
    } else if n >= MIB && n % MIB == 0 {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// Open `path` for reading only if it is a regular file (symbolic links followed) no larger
/// than `kind.cap`. `O_NONBLOCK` makes opening a FIFO return at once instead of waiting for a
/// writer; the check is on the opened handle, so the file checked is the file read.
pub fn open_regular(path: &Path, kind: Input) -> Result<fs::File, FileError> {
    let failed = |error| FileError::Open {
        path: path.to_path_buf(),
        kind,
        error,
    };
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|error| match fs::metadata(path) {
            // A socket cannot be opened at all (ENXIO): say what it is, not the errno.
            Ok(m) if !m.is_file() => FileError::NotRegular {
                path: path.to_path_buf(),
                is: file_type_words(m.file_type()),
                kind,
            },
            _ => failed(error),
        })?;
    let meta = f.metadata().map_err(failed)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            is: file_type_words(meta.file_type()),
            kind,
        });
    }
    if meta.len() > kind.cap {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            kind,
            size: Some(meta.len()),
        });
    }
    Ok(f)
}

/// The bytes of the regular file at `path` ([`open_regular`]); at most `kind.cap` of them,
/// however the file grows while it is read.
pub fn read_regular(path: &Path, kind: Input) -> Result<Vec<u8>, FileError> {
    let f = open_regular(path, kind)?;
    let mut bytes = Vec::new();
    f.take(kind.cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|error| FileError::Open {
            path: path.to_path_buf(),
            kind,
            error,
        })?;
    if bytes.len() as u64 > kind.cap {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            kind,
            size: None,
        });
    }
    Ok(bytes)
}

/// At most the first `n` bytes of the regular file at `path` ([`open_regular`]; fewer when
/// it is shorter): enough to tell a format by its signature without reading the rest.
pub fn read_prefix(path: &Path, kind: Input, n: usize) -> Result<Vec<u8>, FileError> {
    let f = open_regular(path, kind)?;
    let mut bytes = Vec::with_capacity(n);
    f.take(n as u64)
        .read_to_end(&mut bytes)
        .map_err(|error| FileError::Open {
            path: path.to_path_buf(),
            kind,
            error,
        })?;
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_text(path: &Path, kind: Input) -> Result<String, FileError> {
    String::from_utf8(read_regular(path, kind)?).map_err(|_| FileError::NotText {
        path: path.to_path_buf(),
    })
}

/// `folder/rel` with its symbolic links resolved, if it stays inside `folder` (also
/// resolved); `kind` is what the caller will read there. A path that does not exist (a
/// dangling link too) is [`FileError::is_not_found`]. `rel` itself is not checked for `..`
/// or absoluteness (callers that take paths from a file check that first), only where it
/// leads.
pub fn resolve_inside(folder: &Path, rel: &Path, kind: Input) -> Result<PathBuf, FileError> {
    let joined = folder.join(rel);
    let open = |path: &Path| {
        let path = path.to_path_buf();
        move |error| FileError::Open { path, kind, error }
    };
    let canonical_folder = fs::canonicalize(folder).map_err(open(folder))?;
    let resolved = fs::canonicalize(&joined).map_err(open(&joined))?;
    if !resolved.starts_with(&canonical_folder) {
        return Err(FileError::Escapes {
            path: joined,
            folder: canonical_folder,
            resolved,
        });
    }
    Ok(resolved)
}

/// Refuse an output path that exists and is not a regular file (not followed: a symbolic
/// link is refused as one). [`write_atomic`] checks this itself; commands call it early so
/// that a bad output is refused before the work that would fill it.
pub fn check_output(path: &Path) -> Result<(), FileError> {
    match fs::symlink_metadata(path) {
        Ok(m) if !m.is_file() => Err(FileError::NotRegularOutput {
            path: path.to_path_buf(),
            is: file_type_words(m.file_type()),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(FileError::Write {
            path: path.to_path_buf(),
            error,
        }),
    }
}

/// Write `bytes` to `path` atomically: a temporary file in the same folder, flushed and
/// synced, then renamed over the target. A killed writer leaves the old file or none,
/// never a torn one. A target that exists and is not a regular file is refused: the rename
/// would replace a symbolic link, FIFO or device node (`/dev/full`) with a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let failed = |error: io::Error| FileError::Write {
        path: path.to_path_buf(),
        error,
    };
    check_output(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| {
        failed(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path has no file name",
        ))
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        // create_new: a planted link at the temporary name is not followed.
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(failed)
}

/// SHA-256 of bytes, lowercase hex.
/// A file-name stem from a kernel name (manifest names are free text): every character
/// but ASCII letters, digits, `_` and `-` becomes `_`.
pub fn safe_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// SHA-256 of a regular file's contents ([`open_regular`]), streamed. What klab hashes is a
/// run's artifacts and its own binary, so one cap ([`Input::ARTIFACT`]) serves.
pub fn sha256_file(path: &Path) -> Result<String, FileError> {
    let kind = Input::ARTIFACT;
    let read_failed = |error| FileError::Open {
        path: path.to_path_buf(),
        kind,
        error,
    };
    let mut f = open_regular(path, kind)?.take(kind.cap.saturating_add(1));
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(read_failed)?;
        if k == 0 {
            break;
        }
        total += k as u64;
        h.update(&buf[..k]);
    }
    if total > kind.cap {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            kind,
            size: None,
        });
    }
    Ok(hex::encode(h.finalize()))
}

/// Create the next `run-NN` folder under `base` (`run-01`, `run-02`, ...; three digits
/// after 99). An existing run is never reused: creation is exclusive, so two concurrent
/// labs get different folders.
pub fn create_run_dir(base: &Path) -> io::Result<PathBuf> {
    fs::create_dir_all(base)?;
    let mut next = 1 + fs::read_dir(base)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("run-"))
                .and_then(|d| d.parse::<u32>().ok())
        })
        .max()
        .unwrap_or(0);
    loop {
        let dir = base.join(format!("run-{next:02}"));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => next += 1,
            Err(e) => return Err(e),
        }
    }
}

/// klab's cache folder for one kind of entry (`nvrtc`, `cref`): `$KLAB_CACHE_DIR/KIND`,
/// else `$XDG_CACHE_HOME/klab/KIND`, else `~/.cache/klab/KIND`. An empty variable counts
/// as unset (an empty `KLAB_CACHE_DIR` must not mean the current folder).
pub fn cache_dir(kind: &str) -> Option<PathBuf> {
    cache_dir_in(|name| std::env::var_os(name), kind)
}

/// [`cache_dir`] with the environment given (tests).
fn cache_dir_in(env: impl Fn(&str) -> Option<std::ffi::OsString>, kind: &str) -> Option<PathBuf> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty());
    var("KLAB_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("klab")))
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache/klab")))
        .map(|root| root.join(kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_are_file_safe() {
        assert_eq!(safe_stem("naive"), "naive");
        assert_eq!(safe_stem("my kernel/../x"), "my_kernel____x");
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporaries() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.csv");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(write_atomic(&d.path().join("missing/x"), b"x").is_err());
    }

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    /// Issue 15: a FIFO given as any input blocked forever in `fs::read`.
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.toml");
        mkfifo(&p);
        let e = read_regular(&p, Input::MANIFEST).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{} is a FIFO (named pipe), not a regular file; klab reads a manifest only from a regular file",
                p.display()
            )
        );
        assert!(sha256_file(&p).is_err());
    }

    #[test]
    fn a_prefix_is_read_from_regular_files_only() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.ncu-rep");
        fs::write(&p, b"NVR\0rest of the report").unwrap();
        assert_eq!(read_prefix(&p, Input::NCU_IMPORT, 4).unwrap(), b"NVR\0");
        fs::write(&p, b"NV").unwrap();
        assert_eq!(read_prefix(&p, Input::NCU_IMPORT, 4).unwrap(), b"NV");
        let fifo = d.path().join("f.csv");
        mkfifo(&fifo);
        let e = read_prefix(&fifo, Input::NCU_IMPORT, 4).unwrap_err();
        assert!(matches!(e, FileError::NotRegular { .. }), "{e}");
        let e = read_prefix(Path::new("/dev/zero"), Input::NCU_IMPORT, 4).unwrap_err();
        assert!(matches!(e, FileError::NotRegular { .. }), "{e}");
    }

    /// Issue 15: `/dev/zero` as an artifact was read until memory ran out.
    #[test]
    fn dev_zero_is_refused_not_read() {
        let e = read_regular(Path::new("/dev/zero"), Input::ARTIFACT).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/dev/zero is a character device, not a regular file"),
            "{e}"
        );
        let e = sha256_file(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(e, FileError::NotRegular { .. }), "{e}");
        let e = read_regular(Path::new("/tmp"), Input::RECEIPT).unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let socket = d.path().join("s.json");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let e = read_regular(&socket, Input::RECEIPT).unwrap_err();
        assert!(
            e.to_string().contains("is a socket, not a regular file"),
            "{e}"
        );
    }

    #[test]
    fn a_file_over_its_cap_is_refused_naming_the_cap() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.csv");
        fs::write(&p, vec![b'x'; (2 * MIB + 1) as usize]).unwrap();
        let kind = Input::new("sample CSV", 2 * MIB);
        let e = read_regular(&p, kind).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{} is 2097153 bytes, more than 2 MiB, the most klab reads of a sample CSV",
                p.display()
            )
        );
        fs::write(&p, vec![b'x'; (2 * MIB) as usize]).unwrap();
        assert_eq!(read_regular(&p, kind).unwrap().len() as u64, 2 * MIB);
        let e = read_regular(&d.path().join("gone"), kind).unwrap_err();
        assert!(e.is_not_found(), "{e}");
        fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_text(&p, kind).unwrap_err(),
            FileError::NotText { .. }
        ));
    }

    /// Issue 15: a symlink, FIFO, device node or folder given as an output was replaced by
    /// the rename (`/dev/full` became a regular file).
    #[test]
    fn write_atomic_refuses_a_target_that_is_not_a_regular_file() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target.txt");
        fs::write(&target, b"keep").unwrap();
        let link = d.path().join("link.csv");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let fifo = d.path().join("fifo.csv");
        mkfifo(&fifo);
        let folder = d.path().join("dir.csv");
        fs::create_dir(&folder).unwrap();
        for (p, is) in [
            (link.as_path(), "a symbolic link"),
            (fifo.as_path(), "a FIFO (named pipe)"),
            (folder.as_path(), "a folder"),
            (Path::new("/dev/full"), "a character device"),
        ] {
            let e = write_atomic(p, b"new").unwrap_err().to_string();
            assert!(e.starts_with(&format!("{} is {is}; ", p.display())), "{e}");
        }
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert!(fs::metadata("/dev/full")
            .unwrap()
            .file_type()
            .is_char_device());
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 4, "no temporaries");
    }

    /// Issue 15: `klab report` followed a symbolic link out of the run folder and hashed
    /// its target.
    #[test]
    fn resolve_inside_refuses_a_link_out_of_the_folder() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        fs::create_dir_all(run.join("sub")).unwrap();
        fs::write(run.join("sub/a.csv"), b"a").unwrap();
        fs::write(d.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink("sub/a.csv", run.join("inside")).unwrap();
        std::os::unix::fs::symlink(d.path().join("secret"), run.join("out")).unwrap();
        std::os::unix::fs::symlink("../../secret", run.join("sub/up")).unwrap();
        let canonical = fs::canonicalize(&run).unwrap();
        assert_eq!(
            resolve_inside(&run, Path::new("inside"), Input::ARTIFACT).unwrap(),
            canonical.join("sub/a.csv")
        );
        for rel in ["out", "sub/up"] {
            let e = resolve_inside(&run, Path::new(rel), Input::ARTIFACT).unwrap_err();
            assert!(matches!(e, FileError::Escapes { .. }), "{e}");
            assert!(e.to_string().contains("leads out of"), "{e}");
        }
        assert!(resolve_inside(&run, Path::new("gone"), Input::ARTIFACT)
            .unwrap_err()
            .is_not_found());
    }

    /// Issue 15: an empty `KLAB_CACHE_DIR` wrote compiled modules into the current folder.
    #[test]
    fn an_empty_cache_dir_variable_means_the_default() {
        let env = |klab: &'static str| {
            move |name: &str| match name {
                "KLAB_CACHE_DIR" => Some(std::ffi::OsString::from(klab)),
                "XDG_CACHE_HOME" => Some("".into()),
                "HOME" => Some("/home/u".into()),
                _ => None,
            }
        };
        assert_eq!(
            cache_dir_in(env(""), "nvrtc"),
            Some(PathBuf::from("/home/u/.cache/klab/nvrtc"))
        );
        assert_eq!(
            cache_dir_in(env("/c"), "nvrtc"),
            Some(PathBuf::from("/c/nvrtc"))
        );
    }

    #[test]
    fn run_dirs_count_up_and_never_reuse() {
        let d = tempfile::tempdir().unwrap();
        assert!(create_run_dir(d.path()).unwrap().ends_with("run-01"));
        assert!(create_run_dir(d.path()).unwrap().ends_with("run-02"));
        fs::create_dir(d.path().join("run-07")).unwrap();
        fs::create_dir(d.path().join("run-xx")).unwrap();
        assert!(create_run_dir(d.path()).unwrap().ends_with("run-08"));
    }

    #[test]
    fn sha256_of_known_bytes() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        fs::write(&p, b"abc").unwrap();
        assert_eq!(sha256_file(&p).unwrap(), sha256_hex(b"abc"));
    }
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_utc(secs)
}

/// Format seconds since the Unix epoch as UTC (proleptic Gregorian calendar).
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Seconds since the Unix epoch of an RFC 3339 date-time (`2026-11-30T09:04:56Z`,
/// `2026-11-30T10:04:56.250+01:00`); `None` for anything else. Strict: four-digit year,
/// a real calendar day, `T` between date and time, seconds up to 60 (a leap second), and
/// an offset (`Z` or `+HH:MM`/`-HH:MM`) always present. Fractional seconds are dropped.
pub fn parse_utc(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let at = |i: usize, c: u8| b.get(i).is_some_and(|x| x.eq_ignore_ascii_case(&c));
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day < 1 || day > month_days || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset = if at(i, b'Z') && b.len() == i + 1 {
        0
    } else if matches!(b.get(i), Some(b'+' | b'-')) && at(i + 3, b':') && b.len() == i + 6 {
        let (oh, om) = (digits(i + 1, 2)?, digits(i + 4, 2)?);
        if oh > 23 || om > 59 {
            return None;
        }
        let sign = if b[i] == b'-' { -1 } else { 1 };
        sign * (oh * 3600 + om * 60)
    } else {
        return None;
    };
    // Days-from-civil (Howard Hinnant's algorithm), the inverse of `format_utc`.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// Seconds since the Unix epoch now (0 if the clock is before it).
pub fn now_utc_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod time_tests {
    use super::{format_utc, parse_utc};

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_796_029_496), "2026-11-30T09:04:56Z");
    }

    #[test]
    fn parses_rfc3339_and_inverts_format_utc() {
        for secs in [0, 951_782_400, 1_796_029_496, 4_102_444_800] {
            assert_eq!(parse_utc(&format_utc(secs)), Some(secs as i64));
        }
        assert_eq!(
            parse_utc("2026-11-30T10:04:56.250+01:00"),
            Some(1_796_029_496)
        );
        assert_eq!(parse_utc("2026-11-30t09:04:56z"), Some(1_796_029_496));
        assert_eq!(parse_utc("1969-12-31T23:59:59Z"), Some(-1));
        for bad in [
            "",
            "banana",
            "2026-11-30",
            "2026-11-30 09:04:56Z",
            "2026-11-30T09:04:56",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T09:60:00Z",
            "2026-11-30T09:04:61Z",
            "2026-11-30T09:04:56.Z",
            "2026-11-30T09:04:56+0100",
            "2026-11-30T09:04:56Zjunk",
            "+026-11-30T09:04:56Z",
            "2026-11-30T09:04:5６Z",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad:?}");
        }
        assert_eq!(parse_utc("2024-02-29T00:00:00Z"), Some(1_709_164_800));
    }
}
