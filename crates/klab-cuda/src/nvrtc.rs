//! Run-time compilation with NVRTC, for the device's own architecture, with `-lineinfo`,
//! and an on-disk cache of compiled modules.
//!
//! The toolkit's headers (`cuda_fp16.h`, `cuda_bf16.h`, ...) are found without being asked
//! for ([`toolkit_include_dir`]) and passed as one more `-I`; [`Compiled::toolkit_include`]
//! records which folder it was.
//!
//! A manifest's `include_dirs` come as [`IncludeDir`]s (klab-spec reads them with the
//! manifest): each is an `-I`, and its files' digest is in the cache key.
//!
//! The C and C++ standard headers NVRTC lacks come from [`crate::std_headers`], a folder
//! written for each compile and passed as the last `-I` (not recorded among the options).
//!
//! Entries that name template instances (`scale<float, 128>`) are NVRTC name expressions:
//! added before compiling (which instantiates them), lowered to their mangled symbols after,
//! and kept in [`Compiled::lowered_names`] (cache entries too), through which the backend
//! and [`Compiled::ptxas_resources`] know a template instance by its entry.
//!
//! Cache key: SHA-256 over the program name, the source, the architecture, the options (every
//! `-I` among them), the include folders' digests, the reached headers' digest, the supplied
//! standard headers' digest, the name expressions and the NVRTC version. An entry stores the SHA-256 of everything after its first line (the header with
//! the log ptxas's register counts are read from, and the code), and a hit also re-checks
//! that the fields the header records (source hash, architecture, options, NVRTC version,
//! program, toolkit folder, template instances) are the request's ([`KeyFields`]). An entry
//! that fails any check (format, hash, length, a field) is reported in a note, recompiled
//! and overwritten, never trusted.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use cudarc::nvrtc::{result, sys};
use klab_core::artifact::{self, sha256_hex, Input};
use klab_core::device::KernelResources;
use klab_core::ptxas;
use klab_spec::include::IncludeDir;
use klab_spec::manifest::{KernelDecl, Manifest};
use serde::{Deserialize, Serialize};

use crate::{probe, CudaError};

/// The architecture compiled for when no device is present (the lent H200's).
pub const DEFAULT_ARCH: &str = "sm_90";

/// Options klab always passes. `--ptxas-options=-v` puts the resource report in the log;
/// `--no-cache` turns off NVRTC's own cache (CUDA 12.9+), whose hits skip ptxas and so
/// leave that report out (seen on the H200 machine); klab keeps its own cache instead.
pub const BASE_OPTIONS: [&str; 4] = [
    "-lineinfo",
    "--std=c++17",
    "--ptxas-options=-v",
    "--no-cache",
];

const CACHE_FORMAT: &str = "klab-nvrtc-cache-3";

/// The header whose presence marks a folder as the toolkit's include folder.
const TOOLKIT_HEADER: &str = "cuda_fp16.h";

/// What to compile.
#[derive(Debug, Clone)]
pub struct CompileSpec {
    /// NVRTC program name; reports (racecheck, ncu source view) cite it as the file.
    pub program: String,
    pub source: String,
    /// e.g. `sm_90`.
    pub arch: String,
    /// Options beyond [`BASE_OPTIONS`].
    pub extra_options: Vec<String>,
    /// The user's header folders, each passed as `-I` (before the toolkit's).
    pub include_dirs: Vec<IncludeDir>,
    /// The digest of the headers the source reaches by `#include` (beside it or in the
    /// include folders), when it was read from a folder.
    pub headers_sha256: Option<String>,
    /// Why that digest may not cover every header a compile reads (klab-spec's
    /// `ReachedHeaders::incomplete`): such a spec is compiled without the cache.
    pub uncached: Option<String>,
    /// Template instances to instantiate and look up by name (`scale<float, 128>`).
    pub name_expressions: Vec<String>,
}

impl CompileSpec {
    /// `source` as program `program` for `arch`, with no options of its own.
    pub fn new(program: &str, source: &str, arch: &str) -> CompileSpec {
        CompileSpec {
            program: program.to_string(),
            source: source.to_string(),
            arch: arch.to_string(),
            extra_options: Vec::new(),
            include_dirs: Vec::new(),
            headers_sha256: None,
            uncached: None,
            name_expressions: Vec::new(),
        }
    }

    /// The transpose lab's built-in kernels (`kernels/transpose.cu`) for `arch`.
    pub fn transpose_lab(arch: &str) -> CompileSpec {
        CompileSpec::new(
            klab_spec::builtin::TRANSPOSE_PROGRAM,
            klab_spec::builtin::TRANSPOSE_SOURCE,
            arch,
        )
    }

    /// `manifest`'s source as `decl` needs it compiled: with the kernel's options, the
    /// manifest's include folders and every template instance the manifest names. A
    /// precompiled module has no source to compile: [`CudaError::NoSource`].
    pub fn for_kernel(
        manifest: &Manifest,
        decl: &KernelDecl,
        arch: &str,
    ) -> Result<CompileSpec, CudaError> {
        let text = manifest.source.text().ok_or_else(|| CudaError::NoSource {
            program: manifest.program.clone(),
            what: manifest.source.describe(),
        })?;
        Ok(CompileSpec {
            extra_options: decl.options.clone(),
            include_dirs: manifest.include_dirs.clone(),
            headers_sha256: manifest.headers.as_ref().map(|h| h.sha256.clone()),
            uncached: manifest.headers.as_ref().and_then(|h| h.incomplete.clone()),
            name_expressions: manifest.name_expressions(),
            ..CompileSpec::new(&manifest.program, text, arch)
        })
    }

    /// What of the headers this spec was keyed by reads otherwise from disk now (an include
    /// folder, or the headers the source reaches), if anything: a module compiled while one
    /// changed is not stored under the key.
    fn headers_changed(&self) -> Option<String> {
        for d in &self.include_dirs {
            if IncludeDir::read(&d.path).map(|now| now.sha256) != Ok(d.sha256.clone()) {
                return Some(format!("the include folder {}", d.path.display()));
            }
        }
        let was = self.headers_sha256.as_ref()?;
        let now = klab_spec::include::ReachedHeaders::of(
            Path::new(&self.program),
            &self.source,
            &self.include_dirs,
        );
        (now.sha256 != *was).then(|| format!("a header {} reaches", self.program))
    }

    /// Every option NVRTC is given: the architecture, [`BASE_OPTIONS`], the spec's own, `-I`
    /// for each of its include folders, then `-I` for the toolkit's headers when a folder of
    /// them was found, and for its `cccl` folder when it has one (CUDA 13 keeps libcu++'s
    /// `nv/target`, which cooperative groups include, there; nvcc adds it by itself).
    pub fn options(&self, toolkit_include: Option<&Path>) -> Vec<String> {
        let mut o = vec![format!("--gpu-architecture={}", self.arch)];
        o.extend(BASE_OPTIONS.iter().map(|s| s.to_string()));
        o.extend(self.extra_options.iter().cloned());
        o.extend(
            self.include_dirs
                .iter()
                .map(|d| format!("-I{}", d.path.display())),
        );
        if let Some(d) = toolkit_include {
            o.push(format!("-I{}", d.display()));
            let cccl = d.join("cccl");
            if cccl.is_dir() {
                o.push(format!("-I{}", cccl.display()));
            }
        }
        o
    }
}

/// Where the toolkit's headers may be, in the order they are tried: `$CUDA_HOME/include`,
/// `$CUDA_PATH/include`, `/usr/local/cuda/include`, then the `include` folder beside the
/// folder libnvrtc was loaded from (the PyPI wheels' layout: `nvidia/cu13/lib/libnvrtc.so.13`
/// beside `nvidia/cu13/include`).
pub fn toolkit_include_candidates(
    var: impl Fn(&str) -> Option<OsString>,
    nvrtc_dir: Option<&Path>,
) -> Vec<PathBuf> {
    let mut c: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| var(v).filter(|s| !s.is_empty()))
        .map(|root| PathBuf::from(root).join("include"))
        .collect();
    c.push(PathBuf::from("/usr/local/cuda/include"));
    c.extend(nvrtc_dir.and_then(Path::parent).map(|p| p.join("include")));
    c
}

/// The first of [`toolkit_include_candidates`] that holds `cuda_fp16.h`, or `None`. Asks for
/// the loaded libnvrtc's folder, so call it once NVRTC is loaded.
pub fn toolkit_include_dir() -> Option<PathBuf> {
    let maps = fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let nvrtc_dir = nvrtc_dir_in_maps(&maps);
    first_with_toolkit_header(toolkit_include_candidates(
        |v| std::env::var_os(v),
        nvrtc_dir.as_deref(),
    ))
}

fn first_with_toolkit_header(candidates: Vec<PathBuf>) -> Option<PathBuf> {
    candidates
        .into_iter()
        .find(|d| d.join(TOOLKIT_HEADER).is_file())
}

/// The folder of the libnvrtc mapped into this process, from `/proc/self/maps` text (the
/// path is the line's last field; libnvrtc-builtins, which sits beside it, is not it).
fn nvrtc_dir_in_maps(maps: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(Path::new)
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc.") && n.contains(".so"))
        })
        .and_then(Path::parent)
        .map(Path::to_path_buf)
}

/// A compiled module and how it was obtained.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Compiled {
    pub program: String,
    pub arch: String,
    pub options: Vec<String>,
    pub nvrtc_version: String,
    pub source_sha256: String,
    /// The toolkit include folder passed as `-I`, when one was found.
    pub toolkit_include: Option<String>,
    pub key: String,
    /// The NVRTC log (with ptxas's resource lines).
    pub log: String,
    /// Each name expression compiled (a template instance's entry) and its mangled symbol.
    #[serde(default)]
    pub lowered_names: BTreeMap<String, String>,
    /// Milliseconds NVRTC took when this entry was compiled.
    pub compile_ms: f64,
    #[serde(skip)]
    pub cubin: Vec<u8>,
    /// Whether this came from the cache.
    #[serde(skip)]
    pub from_cache: bool,
    /// Anything worth telling the user (a corrupt entry rebuilt, a cache that can't be written).
    #[serde(skip)]
    pub notes: Vec<String>,
}

impl Compiled {
    /// For messages: `the module compiled from k.cu for sm_90`.
    pub fn describe(&self) -> String {
        format!(
            "the module compiled from {} for {}",
            self.program, self.arch
        )
    }

    /// Per-kernel resources according to ptxas (no device needed). ptxas names a template
    /// instance by its mangled symbol; those are reported under the entry that named it.
    pub fn ptxas_resources(&self) -> Vec<KernelResources> {
        let entries: BTreeMap<&str, &str> = self
            .lowered_names
            .iter()
            .map(|(entry, symbol)| (symbol.as_str(), entry.as_str()))
            .collect();
        let mut r = ptxas::parse_resources(&self.log);
        for k in &mut r {
            if let Some(entry) = entries.get(k.kernel.as_str()) {
                k.kernel = entry.to_string();
            }
        }
        r
    }
}

/// The module symbol of `entry`: a template instance's lowered name from `lowered`, else the
/// entry itself (an `extern "C"` name or an already mangled one).
pub fn symbol<'a>(
    lowered: &'a BTreeMap<String, String>,
    entry: &'a str,
) -> Result<&'a str, CudaError> {
    match lowered.get(entry) {
        Some(s) => Ok(s),
        None if klab_core::text::template_name(entry).is_some() || entry.contains("::") => {
            Err(CudaError::Nvrtc(format!(
                "{entry} is a template instance or a name in a namespace that was not named when the module was compiled, so it has no symbol (klab names every such entry of the manifest; a precompiled module needs the mangled name)"
            )))
        }
        None => Ok(entry),
    }
}

/// NVRTC's version, e.g. "13.0".
pub fn version() -> Result<String, CudaError> {
    probe::require_nvrtc()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints; the library is present.
    let r = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    if r != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(CudaError::Nvrtc(format!("nvrtcVersion failed: {r:?}")));
    }
    Ok(format!("{major}.{minor}"))
}

/// Where compiled modules are cached.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: Option<PathBuf>,
}

impl Cache {
    /// klab's cache folder `nvrtc/` ([`klab_core::artifact::cache_dir`]).
    pub fn from_env() -> Cache {
        Cache {
            dir: klab_core::artifact::cache_dir("nvrtc"),
        }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Cache {
        Cache {
            dir: Some(dir.into()),
        }
    }

    pub fn disabled() -> Cache {
        Cache { dir: None }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn entry_path(&self, key: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{key}.cubin")))
    }
}

/// The cache key for a spec under a given toolkit include folder and NVRTC version. The
/// user's include folders count by path and by the digest of their files, and the headers
/// the source reaches by their digest (editing a header recompiles). The toolkit folder counts by its path only (it is among the options): the
/// contents of its headers are not hashed, since they change with a toolkit's version.
pub fn cache_key(
    spec: &CompileSpec,
    toolkit_include: Option<&Path>,
    nvrtc_version: &str,
) -> String {
    let mut text = String::new();
    for part in [
        CACHE_FORMAT,
        spec.program.as_str(),
        spec.source.as_str(),
        spec.arch.as_str(),
        &spec.options(toolkit_include).join("\u{1f}"),
        &spec
            .include_dirs
            .iter()
            .map(|d| d.sha256.as_str())
            .collect::<Vec<_>>()
            .join("\u{1f}"),
        spec.headers_sha256.as_deref().unwrap_or(""),
        &crate::std_headers::digest(),
        &spec.name_expressions.join("\u{1f}"),
        nvrtc_version,
    ] {
        text.push_str(part);
        text.push('\0');
    }
    sha256_hex(text.as_bytes())
}

/// What a request compiles, as an entry must record it: the key and the fields behind it
/// that a [`Compiled`] keeps. Made once per request ([`KeyFields::of`]); a fresh compile
/// records these fields and a cache entry is taken only when it records the same, so an
/// entry copied under another key, or edited and re-hashed, is still a miss.
#[derive(Debug, Clone, PartialEq)]
struct KeyFields {
    key: String,
    program: String,
    source_sha256: String,
    arch: String,
    options: Vec<String>,
    nvrtc_version: String,
    toolkit_include: Option<String>,
    name_expressions: Vec<String>,
}

impl KeyFields {
    fn of(spec: &CompileSpec, toolkit: Option<&Path>, nvrtc_version: &str) -> KeyFields {
        KeyFields {
            key: cache_key(spec, toolkit, nvrtc_version),
            program: spec.program.clone(),
            source_sha256: sha256_hex(spec.source.as_bytes()),
            arch: spec.arch.clone(),
            options: spec.options(toolkit),
            nvrtc_version: nvrtc_version.to_string(),
            toolkit_include: toolkit.map(|d| d.display().to_string()),
            name_expressions: spec.name_expressions.clone(),
        }
    }

    /// The first field in which `c` differs from the request, in words.
    fn mismatch(&self, c: &Compiled) -> Option<String> {
        let mut named: Vec<&String> = c.lowered_names.keys().collect();
        let mut asked: Vec<&String> = self.name_expressions.iter().collect();
        named.sort();
        named.dedup();
        asked.sort();
        asked.dedup();
        let differs = |field: &str, entry: String, request: String| {
            Some(format!("its {field} {entry}, the request's {request}"))
        };
        if c.key != self.key {
            differs("key is", c.key.clone(), self.key.clone())
        } else if c.source_sha256 != self.source_sha256 {
            differs(
                "source sha256 is",
                c.source_sha256.clone(),
                self.source_sha256.clone(),
            )
        } else if c.arch != self.arch {
            differs("architecture is", c.arch.clone(), self.arch.clone())
        } else if c.options != self.options {
            differs("options are", c.options.join(" "), self.options.join(" "))
        } else if c.nvrtc_version != self.nvrtc_version {
            differs(
                "NVRTC version is",
                c.nvrtc_version.clone(),
                self.nvrtc_version.clone(),
            )
        } else if c.program != self.program {
            differs("program is", c.program.clone(), self.program.clone())
        } else if c.toolkit_include != self.toolkit_include {
            differs(
                "toolkit include folder is",
                format!("{:?}", c.toolkit_include),
                format!("{:?}", self.toolkit_include),
            )
        } else if named != asked {
            differs(
                "template instances are",
                format!("{named:?}"),
                format!("{asked:?}"),
            )
        } else {
            None
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    payload_len: usize,
    meta: Compiled,
}

/// Serialise an entry: a first line `FORMAT SHA256`, where the digest covers everything
/// after that line (header and code alike), then one JSON header line, then the CUBIN bytes.
fn encode_entry(c: &Compiled) -> Vec<u8> {
    let header = Header {
        payload_len: c.cubin.len(),
        meta: c.clone(),
    };
    let mut body = serde_json::to_vec(&header).expect("header serialises");
    body.push(b'\n');
    body.extend_from_slice(&c.cubin);
    let mut out = format!("{CACHE_FORMAT} {}\n", sha256_hex(&body)).into_bytes();
    out.extend_from_slice(&body);
    out
}

/// Parse and check an entry against the request; `Err` says why it can't be trusted.
fn decode_entry(bytes: &[u8], want: &KeyFields) -> Result<Compiled, String> {
    let line = |b: &[u8]| b.iter().position(|c| *c == b'\n');
    let nl = line(bytes).ok_or("no header line")?;
    let first = std::str::from_utf8(&bytes[..nl]).map_err(|_| "unknown format")?;
    let (format, digest) = first.split_once(' ').unwrap_or((first, ""));
    if format != CACHE_FORMAT {
        return Err(format!("unknown format {:.40}", format));
    }
    let body = &bytes[nl + 1..];
    if sha256_hex(body) != digest {
        return Err("entry hash does not match (its header or code was changed)".into());
    }
    let nl = line(body).ok_or("no header line")?;
    let header: Header =
        serde_json::from_slice(&body[..nl]).map_err(|e| format!("bad header: {e}"))?;
    let payload = &body[nl + 1..];
    if payload.len() != header.payload_len {
        return Err(format!(
            "payload is {} bytes, header says {}",
            payload.len(),
            header.payload_len
        ));
    }
    if let Some(why) = want.mismatch(&header.meta) {
        return Err(why);
    }
    let mut c = header.meta;
    c.cubin = payload.to_vec();
    c.from_cache = true;
    Ok(c)
}

/// Compile `spec`, or take it from `cache` when a trustworthy entry exists.
pub fn compile(spec: &CompileSpec, cache: &Cache) -> Result<Compiled, CudaError> {
    let nvrtc_version = version()?;
    let toolkit = toolkit_include_dir();
    let want = KeyFields::of(spec, toolkit.as_deref(), &nvrtc_version);
    let mut notes = Vec::new();
    let disabled = Cache::disabled();
    let cache = match &spec.uncached {
        Some(why) => {
            notes.push(format!(
                "compiled without the cache: klab cannot hash every header {} may read ({why})",
                spec.program
            ));
            &disabled
        }
        None => cache,
    };
    if let Some(path) = cache.entry_path(&want.key) {
        match artifact::read_regular(&path, Input::CACHE_ENTRY) {
            Ok(bytes) => match decode_entry(&bytes, &want) {
                Ok(c) => return Ok(c),
                Err(why) => notes.push(format!(
                    "cache entry {} could not be trusted ({why}); recompiled",
                    path.display()
                )),
            },
            Err(e) if e.is_not_found() => {}
            Err(e) => notes.push(format!("{e}; recompiled")),
        }
    }
    let mut compiled = compile_uncached(spec, &want)?;
    // A header edited while NVRTC read it: the module is not what the key says.
    let changed = spec.headers_changed();
    if let Some(what) = &changed {
        notes.push(format!(
            "{what} changed while compiling; the module is not cached"
        ));
    }
    if let (None, Some(path)) = (&changed, cache.entry_path(&compiled.key)) {
        let stored = path
            .parent()
            .map(fs::create_dir_all)
            .transpose()
            .map_err(|e| e.to_string())
            .and_then(|_| {
                artifact::write_atomic(&path, &encode_entry(&compiled)).map_err(|e| e.to_string())
            });
        if let Err(e) = stored {
            notes.push(format!(
                "could not write cache entry {} ({e})",
                path.display()
            ));
        }
    }
    compiled.notes = notes;
    Ok(compiled)
}

/// The CUBIN of a program NVRTC compiled.
fn cubin_of(prog: sys::nvrtcProgram) -> Result<Vec<u8>, CudaError> {
    let mut size = 0usize;
    // SAFETY: prog compiled; writes one usize.
    let r = unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) };
    if r != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(nvrtc_err("nvrtcGetCUBINSize", r));
    }
    let mut buf = vec![0u8; size];
    // SAFETY: buf has the size NVRTC asked for.
    let r = unsafe { sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()) };
    if r != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(nvrtc_err("nvrtcGetCUBIN", r));
    }
    Ok(buf)
}

/// Each entry's symbol, as NVRTC lowered the expression it was asked for it (`expressions`,
/// in the entries' order), kept under the entry.
fn lowered_names_of(
    prog: sys::nvrtcProgram,
    entries: &[String],
    expressions: &[CString],
) -> Result<BTreeMap<String, String>, CudaError> {
    let mut lowered = BTreeMap::new();
    for (text, e) in entries.iter().zip(expressions) {
        let mut out: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: prog compiled with e added; NVRTC writes a pointer to a string it owns
        // until the program is destroyed, copied out below before that.
        let r = unsafe { sys::nvrtcGetLoweredName(prog, e.as_ptr(), &mut out) };
        if r != sys::nvrtcResult::NVRTC_SUCCESS || out.is_null() {
            return Err(nvrtc_err(&format!("nvrtcGetLoweredName({text})"), r));
        }
        // SAFETY: non-null, NUL-terminated, alive until destroy_program.
        let symbol = unsafe { CStr::from_ptr(out) }
            .to_string_lossy()
            .into_owned();
        lowered.insert(text.clone(), symbol);
    }
    Ok(lowered)
}

/// What NVRTC is asked for an entry: the entry itself (a name, a template instance), or for
/// one overload of several (`k(const float *, int)`) that overload's address,
/// `static_cast<void (*)(const float *, int)>(k)`. Its lowered name is kept under the entry.
fn nvrtc_expression(entry: &str) -> String {
    match klab_spec::signature::overload_entry(entry) {
        Some((name, types)) => format!("static_cast<void (*)({})>({name})", types.join(", ")),
        None => entry.to_string(),
    }
}

fn nvrtc_err(what: &str, r: impl std::fmt::Debug) -> CudaError {
    CudaError::Nvrtc(format!("{what} failed: {r:?}"))
}

fn compile_uncached(spec: &CompileSpec, fields: &KeyFields) -> Result<Compiled, CudaError> {
    let src = CString::new(spec.source.as_bytes())
        .map_err(|_| CudaError::Nvrtc(format!("{} contains a NUL byte", spec.program)))?;
    let name = CString::new(spec.program.as_bytes())
        .map_err(|_| CudaError::Nvrtc("program name contains a NUL byte".into()))?;
    let options = fields.options.clone();
    let expressions = spec
        .name_expressions
        .iter()
        .map(|e| {
            CString::new(nvrtc_expression(e))
                .map_err(|_| CudaError::Nvrtc(format!("name expression {e:?} contains a NUL byte")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let prog = result::create_program(&src, Some(&name))
        .map_err(|e| nvrtc_err("nvrtcCreateProgram", e))?;
    for (text, e) in spec.name_expressions.iter().zip(&expressions) {
        // SAFETY: prog is live; e is a NUL-terminated string NVRTC copies.
        let r = unsafe { sys::nvrtcAddNameExpression(prog, e.as_ptr()) };
        if r != sys::nvrtcResult::NVRTC_SUCCESS {
            // SAFETY: prog is live and not used after this.
            let _ = unsafe { result::destroy_program(prog) };
            return Err(nvrtc_err(&format!("nvrtcAddNameExpression({text})"), r));
        }
    }
    // The standard headers' folder, searched last; kept until NVRTC has read it. Without it
    // (no temporary folder can be written) those includes fail as they would in NVRTC.
    let std_headers = crate::std_headers::folder().ok();
    let mut given = options.clone();
    given.extend(
        std_headers
            .as_ref()
            .map(|d| format!("-I{}", d.path().display())),
    );
    let started = Instant::now();
    // SAFETY: prog is a live program; options are plain strings.
    let compiled = unsafe { result::compile_program(prog, &given) };
    drop(std_headers);
    let compile_ms = started.elapsed().as_secs_f64() * 1e3;
    // SAFETY: prog is live.
    let log = unsafe { result::get_program_log(prog) }
        .map(|raw| {
            // SAFETY: NVRTC returns a NUL-terminated log.
            unsafe { CStr::from_ptr(raw.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    let cubin = compiled.map_err(|_| CudaError::Compile {
        program: spec.program.clone(),
        arch: spec.arch.clone(),
        options: options.join(" "),
        log: match crate::std_headers::hint(&log) {
            Some(hint) => format!("{}\n{hint}", log.trim_end()),
            None => log.trim_end().to_string(),
        },
    });
    let cubin = cubin.and_then(|()| cubin_of(prog));
    let lowered = cubin
        .as_ref()
        .ok()
        .map(|_| lowered_names_of(prog, &spec.name_expressions, &expressions));
    // SAFETY: prog is live and not used after this.
    let _ = unsafe { result::destroy_program(prog) };
    let cubin = cubin?;
    let lowered_names = lowered.transpose()?.unwrap_or_default();
    Ok(Compiled {
        program: fields.program.clone(),
        arch: fields.arch.clone(),
        options,
        nvrtc_version: fields.nvrtc_version.clone(),
        source_sha256: fields.source_sha256.clone(),
        toolkit_include: fields.toolkit_include.clone(),
        key: fields.key.clone(),
        log,
        lowered_names,
        compile_ms,
        cubin,
        from_cache: false,
        notes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CompileSpec {
        CompileSpec::new(
            "t.cu",
            "extern \"C\" __global__ void k(float* o) { o[0] = 1.0f; }",
            "sm_90",
        )
    }

    /// The request [`compiled`] answers: [`spec`] naming one template instance.
    fn want() -> KeyFields {
        let mut s = spec();
        s.name_expressions = vec!["k<int>".into()];
        KeyFields::of(&s, None, "13.0")
    }

    fn compiled() -> Compiled {
        let f = want();
        Compiled {
            program: f.program,
            arch: f.arch,
            options: f.options,
            nvrtc_version: f.nvrtc_version,
            source_sha256: f.source_sha256,
            toolkit_include: f.toolkit_include,
            key: f.key,
            log: "ptxas info    : Used 8 registers, used 0 barriers\n".into(),
            lowered_names: BTreeMap::from([("k<int>".into(), "_Z1kIiEvv".into())]),
            compile_ms: 1.5,
            cubin: vec![1, 2, 3, 10, 0, 255],
            from_cache: false,
            notes: vec![],
        }
    }

    #[test]
    fn key_changes_with_every_input() {
        let key = |s: &CompileSpec| cache_key(s, None, "13.0");
        let base = key(&spec());
        let mut s = spec();
        s.source.push(' ');
        assert_ne!(key(&s), base);
        let mut s = spec();
        s.arch = "sm_80".into();
        assert_ne!(key(&s), base);
        let mut s = spec();
        s.extra_options.push("-DX".into());
        assert_ne!(key(&s), base);
        let mut s = spec();
        s.program = "u.cu".into();
        assert_ne!(key(&s), base);
        assert_ne!(cache_key(&spec(), None, "13.1"), base);
        let a = Path::new("/a/include");
        let b = Path::new("/b/include");
        assert_ne!(cache_key(&spec(), Some(a), "13.0"), base);
        assert_ne!(
            cache_key(&spec(), Some(a), "13.0"),
            cache_key(&spec(), Some(b), "13.0")
        );
        assert_eq!(key(&spec()), base);

        // An include folder counts by its path and by its files' digest.
        let inc = |path: &str, sha: &str| IncludeDir {
            path: path.into(),
            sha256: sha.into(),
            files: 1,
        };
        let mut with = spec();
        with.include_dirs = vec![inc("/m/inc", "aa")];
        let with_key = key(&with);
        assert_ne!(with_key, base);
        with.include_dirs = vec![inc("/m/inc", "bb")];
        assert_ne!(key(&with), with_key, "an edited header recompiles");
        with.include_dirs = vec![inc("/n/inc", "aa")];
        assert_ne!(key(&with), with_key);

        // So do the headers the source reaches (beside it, with no include folder).
        let mut s = spec();
        s.headers_sha256 = Some("aa".into());
        assert_ne!(key(&s), base);
        let reached = key(&s);
        s.headers_sha256 = Some("bb".into());
        assert_ne!(
            key(&s),
            reached,
            "an edited header beside the source recompiles"
        );

        // Naming a template instance instantiates it: a different module.
        let mut s = spec();
        s.name_expressions = vec!["k<int>".into()];
        assert_ne!(key(&s), base);
    }

    #[test]
    fn template_instances_are_known_by_their_entry() {
        let mut c = compiled();
        c.log = "ptxas info    : Compiling entry function '_Z1kIiEvv' for 'sm_90'\n\
ptxas info    : Used 8 registers, used 0 barriers, 128 bytes smem\n\
ptxas info    : Compiling entry function 'plain' for 'sm_90'\n\
ptxas info    : Used 4 registers, used 0 barriers\n"
            .into();
        let r = c.ptxas_resources();
        assert_eq!(
            r.iter()
                .map(|k| (k.kernel.as_str(), k.registers, k.static_shared_bytes))
                .collect::<Vec<_>>(),
            [("k<int>", 8, 128), ("plain", 4, 0)]
        );
        assert_eq!(symbol(&c.lowered_names, "k<int>").unwrap(), "_Z1kIiEvv");
        assert_eq!(symbol(&c.lowered_names, "plain").unwrap(), "plain");
        let e = symbol(&c.lowered_names, "k<float>")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "k<float> is a template instance or a name in a namespace that was not named"
            ),
            "{e}"
        );
        // A qualified name is never taken for a symbol of its own.
        assert!(symbol(&c.lowered_names, "ops::k").is_err());
    }

    #[test]
    fn options_name_the_arch_line_info_and_the_toolkit_headers() {
        let o = spec().options(None);
        assert_eq!(o[0], "--gpu-architecture=sm_90");
        assert!(o.contains(&"-lineinfo".to_string()));
        assert!(!o.iter().any(|x| x.starts_with("-I")));
        let mut s = spec();
        s.include_dirs = vec![IncludeDir {
            path: "/m/inc".into(),
            sha256: "aa".into(),
            files: 0,
        }];
        let o = s.options(Some(Path::new("/t/include")));
        assert_eq!(o[o.len() - 2..], ["-I/m/inc", "-I/t/include"]);
        // CUDA 13's cccl folder (nv/target, which cooperative groups include) follows it.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("cccl")).unwrap();
        let o = s.options(Some(tmp.path()));
        assert_eq!(
            o[o.len() - 2..],
            [
                format!("-I{}", tmp.path().display()),
                format!("-I{}", tmp.path().join("cccl").display())
            ]
        );
    }

    #[test]
    fn toolkit_headers_are_looked_for_in_order_and_need_cuda_fp16() {
        let env = |v: &str| match v {
            "CUDA_HOME" => Some(OsString::from("/opt/cuda")),
            "CUDA_PATH" => Some(OsString::from("")),
            _ => None,
        };
        let lib = Path::new("/w/nvidia/cu13/lib");
        assert_eq!(
            toolkit_include_candidates(env, Some(lib)),
            [
                PathBuf::from("/opt/cuda/include"),
                PathBuf::from("/usr/local/cuda/include"),
                PathBuf::from("/w/nvidia/cu13/include"),
            ]
        );
        assert_eq!(
            toolkit_include_candidates(|_| None, None),
            [PathBuf::from("/usr/local/cuda/include")]
        );
        let maps =
            "7f00-7f10 r-xp 00000000 08:01 12 /w/nvidia/cu13/lib/libnvrtc-builtins.so.13.0\n\
7f10-7f20 r-xp 00000000 08:01 13 /w/nvidia/cu13/lib/libnvrtc.so.13\n\
7f20-7f30 rw-p 00000000 00:00 0\n";
        assert_eq!(nvrtc_dir_in_maps(maps), Some(lib.to_path_buf()));
        assert_eq!(
            nvrtc_dir_in_maps("7f20-7f30 rw-p 00000000 00:00 0 [heap]\n"),
            None
        );

        // A folder without cuda_fp16.h (the NVRTC wheel's own include/ holds only nvrtc.h)
        // is passed over for the next that has it.
        let t = tempfile::tempdir().unwrap();
        let (bare, full) = (t.path().join("bare"), t.path().join("full"));
        std::fs::create_dir_all(&bare).unwrap();
        std::fs::create_dir_all(&full).unwrap();
        std::fs::write(bare.join("nvrtc.h"), "").unwrap();
        std::fs::write(full.join("cuda_fp16.h"), "").unwrap();
        let gone = t.path().join("gone");
        assert_eq!(
            first_with_toolkit_header(vec![gone.clone(), bare.clone(), full.clone()]),
            Some(full)
        );
        assert_eq!(first_with_toolkit_header(vec![gone, bare]), None);
    }

    #[test]
    fn entries_round_trip_and_corruption_is_detected() {
        let c = compiled();
        let bytes = encode_entry(&c);
        let back = decode_entry(&bytes, &want()).unwrap();
        assert_eq!(back.cubin, c.cubin);
        assert!(back.from_cache);
        assert_eq!(back.log, c.log);
        assert_eq!(
            back.lowered_names, c.lowered_names,
            "a cache hit knows the symbols"
        );

        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(decode_entry(&flipped, &want())
            .unwrap_err()
            .starts_with("entry hash does not match"));
        let truncated = &bytes[..bytes.len() - 1];
        assert!(decode_entry(truncated, &want())
            .unwrap_err()
            .starts_with("entry hash does not match"));
        let mut other = want();
        other.key = "other".into();
        assert!(decode_entry(&bytes, &other)
            .unwrap_err()
            .starts_with("its key is "));
        assert!(decode_entry(b"garbage", &want()).is_err());
        assert!(decode_entry(b"{}\n", &want())
            .unwrap_err()
            .starts_with("unknown format"));
        let empty_header = format!("{CACHE_FORMAT} {}\n{{}}\n", sha256_hex(b"{}\n"));
        assert!(decode_entry(empty_header.as_bytes(), &want())
            .unwrap_err()
            .starts_with("bad header"));
    }

    /// Issue 15: the entry's header was not hashed, so an edited register count ("Used 31
    /// registers") was reported as ptxas's.
    #[test]
    fn an_edited_register_count_in_a_cache_entry_header_is_a_miss() {
        let bytes = encode_entry(&compiled());
        let text = String::from_utf8_lossy(&bytes).into_owned();
        assert!(text.contains("Used 8 registers"));
        let edited = text.replace("Used 8 registers", "Used 31 registers");
        let e = decode_entry(edited.as_bytes(), &want()).unwrap_err();
        assert!(e.starts_with("entry hash does not match"), "{e}");
    }

    /// Issue 15: a hit checked only the key it was stored under, so an entry whose header
    /// records another architecture, option list or NVRTC version (re-hashed, or copied
    /// under this key) was taken.
    #[test]
    fn a_cache_entry_recording_other_key_fields_is_a_miss() {
        type Edit = fn(&mut Compiled);
        let cases: [(&str, Edit); 6] = [
            ("its architecture is sm_80", |c| c.arch = "sm_80".into()),
            ("its options are", |c| c.options.push("-G".into())),
            ("its NVRTC version is 12.9", |c| {
                c.nvrtc_version = "12.9".into()
            }),
            ("its source sha256 is", |c| c.source_sha256 = "00".into()),
            ("its program is", |c| c.program = "u.cu".into()),
            ("its template instances are", |c| c.lowered_names.clear()),
        ];
        for (why, edit) in cases {
            let mut c = compiled();
            edit(&mut c);
            let e = decode_entry(&encode_entry(&c), &want()).unwrap_err();
            assert!(e.starts_with(why), "{why}: {e}");
        }
    }
}
