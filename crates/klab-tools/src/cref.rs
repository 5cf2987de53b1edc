//! A user's C reference: a plain C function that takes the kernel's own parameter list
//! (buffers as pointers, then the same scalars), compiled by the system C compiler into
//! klab's cache and called on host copies of the kernel's buffers. It is the independent
//! CPU oracle a declared operation is checked against.
//!
//! klab writes a shim that includes the user's file and defines one entry with a fixed
//! signature, `klab_reference_entry(void *const *buffers, const int64_t *ints, const double
//! *floats)`, which casts each argument to the declared C type and calls the function. A
//! declaration that disagrees with the function's real parameter types fails to compile
//! (incompatible pointer types, implicit declarations and int conversions are errors), so
//! a reference cannot be called with the wrong signature. The library is compiled with
//! `-O2 -ffp-contract=off` (no fused multiply-adds the source does not write) and cached
//! under a key of the shim, the user's source, the compiler's version line and the flags.
//!
//! The library is built with OpenMP (`-fopenmp`) where the compiler has it, so a reference
//! whose independent loops carry `#pragma omp parallel for` runs on every core: at the
//! index-overflow shape of an operation without independent slices the reference computes
//! all of a buffer past 2^31 elements. Code without pragmas compiles to the same program.
//! A compiler without OpenMP builds the plain library instead (the pragmas are then
//! ignored), and [`CReference::openmp`] says which was built. The library is loaded with
//! `RTLD_NODELETE`: OpenMP's worker threads outlive a parallel loop, and must never find
//! their runtime unmapped under them.
//!
//! The shim defines `KLAB_REAL` as `double` unless the command line sets it: a reference
//! that writes its working type as `KLAB_REAL` is the double-precision oracle, and for
//! rule reference-error ([`CReferenceSpec::working`]) a second library is built with
//! `-DKLAB_REAL=float` (the kernel's working precision) and called by
//! [`klab_engine::reference::Reference::run_in`].

use std::ffi::{c_void, CString, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use klab_core::artifact::{open_regular, sha256_hex, write_atomic, Input};

use crate::process;

/// One parameter of the reference, in the kernel's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CParam {
    /// A pointer to `c_type` elements; `writable` for outputs (else `const`).
    Buffer { c_type: String, writable: bool },
    /// An integer scalar of `c_type`, passed from an `i64`.
    Int { c_type: String },
    /// A floating-point scalar of `c_type`, passed from an `f64`.
    Float { c_type: String },
}

/// What to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CReferenceSpec {
    /// The user's C file.
    pub source: PathBuf,
    /// The function in it.
    pub function: String,
    pub params: Vec<CParam>,
    /// Also build it in this working precision (rule reference-error).
    pub working: Option<klab_spec::rule::Precision>,
}

/// Why a reference could not be built or called.
#[derive(Debug, thiserror::Error)]
pub enum CRefError {
    #[error("C reference {}: {why}", .source_path.display())]
    Source { source_path: PathBuf, why: String },
    #[error("the C compiler {compiler} could not be run: {why}")]
    Compiler { compiler: String, why: String },
    #[error("C reference {}:{function} did not compile with {compiler}: {first_error}", .source_path.display())]
    Compile {
        source_path: PathBuf,
        function: String,
        compiler: String,
        first_error: String,
    },
    #[error("C reference library {}: {why}", .library.display())]
    Load { library: PathBuf, why: String },
    #[error("C reference call: {0}")]
    Call(String),
    #[error("C reference {}:{function} never uses KLAB_REAL, so computed in {precision} it would be the same program: rule reference-error needs its working type written as KLAB_REAL (klab defines it as double for the oracle and as the kernel's precision for the second build)", .source_path.display())]
    NoWorkingType {
        source_path: PathBuf,
        function: String,
        precision: &'static str,
    },
}

/// Flags every reference is compiled with (part of the cache key).
pub const CFLAGS: [&str; 9] = [
    "-O2",
    "-std=gnu11",
    "-ffp-contract=off",
    "-fPIC",
    "-shared",
    "-Werror=implicit-function-declaration",
    "-Werror=incompatible-pointer-types",
    "-Werror=int-conversion",
    "-Werror=int-to-pointer-cast",
];

/// The flag that builds a reference with OpenMP, tried first (see the module docs).
pub const OPENMP_FLAG: &str = "-fopenmp";

const ENTRY: &str = "klab_reference_entry";
const COMPILE_TIMEOUT: Duration = Duration::from_secs(120);

type Entry = unsafe extern "C" fn(*const *mut c_void, *const i64, *const f64);

/// One compiled and loaded library of the reference.
struct Library {
    handle: *mut c_void,
    entry: Entry,
    path: PathBuf,
    from_cache: bool,
    openmp: bool,
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and is closed once.
        unsafe { libc::dlclose(self.handle) };
    }
}

/// A loaded reference.
pub struct CReference {
    oracle: Library,
    /// The build in a working precision, when [`CReferenceSpec::working`] asked for one.
    working: Option<(klab_spec::rule::Precision, Library)>,
    params: Vec<CParam>,
    /// The user's file and function.
    pub source: PathBuf,
    pub function: String,
    /// The compiled library.
    pub library: PathBuf,
    /// The compiler's first `--version` line.
    pub compiler: String,
    pub from_cache: bool,
    /// Built with OpenMP: its `#pragma omp` loops run on every core.
    pub openmp: bool,
}

impl std::fmt::Debug for CReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CReference")
            .field("library", &self.library)
            .field("working", &self.working.as_ref().map(|w| w.0))
            .field("compiler", &self.compiler)
            .field("from_cache", &self.from_cache)
            .field("openmp", &self.openmp)
            .finish()
    }
}

fn c_string_literal(path: &Path) -> Option<String> {
    let s = path.to_str()?;
    if s.chars().any(|c| c.is_control()) {
        return None;
    }
    Some(format!(
        "\"{}\"",
        s.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

/// The shim's text for `spec` (the user's file is `source`, absolute).
pub fn shim(spec: &CReferenceSpec, source: &Path) -> Result<String, CRefError> {
    let literal = c_string_literal(source).ok_or_else(|| CRefError::Source {
        source_path: spec.source.clone(),
        why: "the path is not valid UTF-8 or holds a control character".into(),
    })?;
    let (mut b, mut i, mut f) = (0, 0, 0);
    let mut types = Vec::new();
    let args: Vec<String> = spec
        .params
        .iter()
        .map(|p| match p {
            CParam::Buffer { c_type, writable } => {
                b += 1;
                let c = if *writable { "" } else { "const " };
                types.push(format!("{c}{c_type} *"));
                format!("({c}{c_type} *)buffers[{}]", b - 1)
            }
            CParam::Int { c_type } => {
                i += 1;
                types.push(c_type.clone());
                format!("({c_type})ints[{}]", i - 1)
            }
            CParam::Float { c_type } => {
                f += 1;
                types.push(c_type.clone());
                format!("({c_type})floats[{}]", f - 1)
            }
        })
        .collect();
    // The function is assigned to a pointer of exactly the declared type: any difference in
    // a parameter's type, order or constness is an incompatible-pointer error, not a call
    // that converts silently.
    Ok(format!(
        "#include <stdint.h>\n#include <stddef.h>\n\
         #ifndef KLAB_REAL\n#define KLAB_REAL double\n#endif\n#include {literal}\n\n\
         typedef void (*klab_signature)({});\n\n\
         void {ENTRY}(void *const *buffers, const int64_t *ints, const double *floats) {{\n    \
         (void)buffers; (void)ints; (void)floats;\n    \
         klab_signature typed = {};\n    typed({});\n}}\n",
        if types.is_empty() {
            "void".to_string()
        } else {
            types.join(", ")
        },
        spec.function,
        args.join(", ")
    ))
}

/// `$CC`, else `cc`.
pub fn compiler() -> String {
    std::env::var("CC")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "cc".into())
}

fn compiler_version(cc: &str) -> Result<String, CRefError> {
    let cap = process::run_captured(
        Path::new(cc),
        &[OsString::from("--version")],
        Duration::from_secs(30),
    )
    .map_err(|e| CRefError::Compiler {
        compiler: cc.into(),
        why: e.to_string(),
    })?;
    let out = String::from_utf8_lossy(&cap.stdout);
    match (cap.exit_code, out.lines().next()) {
        (Some(0), Some(line)) => Ok(line.trim().to_string()),
        _ => Err(CRefError::Compiler {
            compiler: cc.into(),
            why: "`--version` did not answer".into(),
        }),
    }
}

/// What every library of one reference shares.
struct Build<'a> {
    spec: &'a CReferenceSpec,
    shim: &'a str,
    cc: &'a str,
    version: &'a str,
    cache: Option<&'a Path>,
}

impl Build<'_> {
    /// Compile (or find in the cache) and load the library with `KLAB_REAL` set to
    /// `working`'s C type (None: the shim's default, double). Returns it with its cache
    /// key, which names the preprocessed text.
    fn library(
        &self,
        working: Option<klab_spec::rule::Precision>,
    ) -> Result<(Library, String), CRefError> {
        let real = working.map_or("double", |p| p.c_type());
        let define = OsString::from(format!("-DKLAB_REAL={real}"));
        // The key is the preprocessed shim (the user's file and every header it includes,
        // as the compiler sees them, KLAB_REAL expanded), the compiler and the flags.
        let dir = std::env::temp_dir().join(format!("klab-cref-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| CRefError::Load {
            library: dir.clone(),
            why: e.to_string(),
        })?;
        // One probe file per build: builds may run at once in one process.
        static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe = dir.join(format!("{}-shim-{n}.c", self.spec.function));
        write_atomic(&probe, self.shim.as_bytes()).map_err(|e| CRefError::Load {
            library: probe.clone(),
            why: e.to_string(),
        })?;
        let pre = process::run_captured(
            Path::new(self.cc),
            &[
                define.clone(),
                OsString::from("-E"),
                OsString::from("-P"),
                probe.clone().into_os_string(),
            ],
            COMPILE_TIMEOUT,
        )
        .map_err(|e| CRefError::Compiler {
            compiler: self.cc.to_string(),
            why: e.to_string(),
        })?;
        let _ = std::fs::remove_file(&probe);
        if pre.exit_code != Some(0) {
            let log = String::from_utf8_lossy(&pre.merged);
            return Err(CRefError::Compile {
                source_path: self.spec.source.clone(),
                function: self.spec.function.clone(),
                compiler: self.version.to_string(),
                first_error: first_error(&log, pre.timed_out),
            });
        }
        let text = sha256_hex(&pre.stdout);
        let dir = match self.cache {
            Some(d) => d.to_path_buf(),
            None => dir,
        };
        std::fs::create_dir_all(&dir).map_err(|e| CRefError::Load {
            library: dir.clone(),
            why: e.to_string(),
        })?;
        // OpenMP first; a compiler that refuses it builds the plain library, whose error (if
        // it fails too) is the one about the user's code.
        let (library, key, from_cache, openmp) = match self.compiled(&dir, &text, &define, true) {
            Ok((library, key, from_cache)) => (library, key, from_cache, true),
            Err(CRefError::Compile { .. }) => {
                let (library, key, from_cache) = self.compiled(&dir, &text, &define, false)?;
                (library, key, from_cache, false)
            }
            Err(e) => return Err(e),
        };
        let c_path =
            CString::new(library.as_os_str().as_encoded_bytes()).map_err(|_| CRefError::Load {
                library: library.clone(),
                why: "the path holds a NUL byte".into(),
            })?;
        // SAFETY: a library klab compiled from the shim; RTLD_LOCAL keeps its symbols apart,
        // RTLD_NODELETE keeps it and its OpenMP runtime mapped while worker threads live.
        let handle = unsafe {
            libc::dlopen(
                c_path.as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE,
            )
        };
        if handle.is_null() {
            return Err(CRefError::Load {
                library,
                why: dl_error(),
            });
        }
        let name = CString::new(ENTRY).expect("no NUL");
        // SAFETY: looking up a symbol in a library just opened.
        let sym = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if sym.is_null() {
            // SAFETY: the handle is open.
            unsafe { libc::dlclose(handle) };
            return Err(CRefError::Load {
                library,
                why: format!("no {ENTRY} in it"),
            });
        }
        // SAFETY: the shim defines the entry with exactly this signature.
        let entry = unsafe {
            std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*const *mut c_void, *const i64, *const f64),
            >(sym)
        };
        let lib = Library {
            handle,
            entry,
            path: library,
            from_cache,
            openmp,
        };
        Ok((lib, key))
    }

    /// The library for the preprocessed text hashed as `text`, compiled with `define`
    /// (and [`OPENMP_FLAG`] when `openmp`) into `dir`, or found there: its path, its cache
    /// key (the text, the compiler and the flags) and whether it was found.
    fn compiled(
        &self,
        dir: &Path,
        text: &str,
        define: &OsString,
        openmp: bool,
    ) -> Result<(PathBuf, String, bool), CRefError> {
        let mut flags: Vec<&str> = CFLAGS.to_vec();
        if openmp {
            flags.push(OPENMP_FLAG);
        }
        let key = sha256_hex(format!("{text}\0{}\0{}", self.version, flags.join(" ")).as_bytes());
        let library = dir.join(format!("{}-{}.so", self.spec.function, &key[..16]));
        // Anything but a regular file at the library's path (a FIFO would hang dlopen) is
        // not a hit; the rename below replaces it.
        if std::fs::symlink_metadata(&library).is_ok_and(|m| m.is_file()) {
            return Ok((library, key, true));
        }
        let shim_path = dir.join(format!("{}-{}.c", self.spec.function, &key[..16]));
        write_atomic(&shim_path, self.shim.as_bytes()).map_err(|e| CRefError::Load {
            library: shim_path.clone(),
            why: e.to_string(),
        })?;
        // Compile to a private name, then rename: a reader never sees half a library.
        let partial = dir.join(format!(
            ".{}-{}.{}.so",
            self.spec.function,
            &key[..16],
            std::process::id()
        ));
        let mut args: Vec<OsString> = flags.iter().map(OsString::from).collect();
        args.push(define.clone());
        args.extend([
            OsString::from("-o"),
            partial.clone().into_os_string(),
            shim_path.into_os_string(),
            OsString::from("-lm"),
        ]);
        let cap =
            process::run_captured(Path::new(self.cc), &args, COMPILE_TIMEOUT).map_err(|e| {
                CRefError::Compiler {
                    compiler: self.cc.to_string(),
                    why: e.to_string(),
                }
            })?;
        if cap.exit_code != Some(0) {
            let log = String::from_utf8_lossy(&cap.merged);
            let first_error = first_error(&log, cap.timed_out);
            let _ = std::fs::remove_file(&partial);
            return Err(CRefError::Compile {
                source_path: self.spec.source.clone(),
                function: self.spec.function.clone(),
                compiler: self.version.to_string(),
                first_error,
            });
        }
        std::fs::rename(&partial, &library).map_err(|e| CRefError::Load {
            library: library.clone(),
            why: e.to_string(),
        })?;
        Ok((library, key, false))
    }
}

impl CReference {
    /// Compile `spec` (or find it in `cache`, a folder; `None` compiles into a temporary
    /// folder every time) and load it; also in its working precision when
    /// [`CReferenceSpec::working`] asks.
    pub fn build(spec: &CReferenceSpec, cache: Option<&Path>) -> Result<CReference, CRefError> {
        Self::build_with(spec, cache, &compiler())
    }

    /// [`CReference::build`] with the C compiler `cc`.
    fn build_with(
        spec: &CReferenceSpec,
        cache: Option<&Path>,
        cc: &str,
    ) -> Result<CReference, CRefError> {
        let bad = |why: String| CRefError::Source {
            source_path: spec.source.clone(),
            why,
        };
        if !klab_core::text::is_identifier(&spec.function) {
            return Err(bad(format!("'{}' is not a C identifier", spec.function)));
        }
        let source = std::fs::canonicalize(&spec.source).map_err(|e| bad(e.to_string()))?;
        // The compiler reads it: a FIFO or device node would hang or flood it.
        open_regular(&source, Input::C_SOURCE).map_err(|e| bad(e.to_string()))?;
        let shim_text = shim(spec, &source)?;
        let version = compiler_version(cc)?;
        let build = Build {
            spec,
            shim: &shim_text,
            cc,
            version: &version,
            cache,
        };
        let (oracle, oracle_key) = build.library(None)?;
        let working = match spec.working {
            None => None,
            Some(p) => {
                let (lib, key) = build.library(Some(p))?;
                // The same preprocessed text: the working type is not KLAB_REAL.
                if key == oracle_key {
                    return Err(CRefError::NoWorkingType {
                        source_path: spec.source.clone(),
                        function: spec.function.clone(),
                        precision: p.name(),
                    });
                }
                Some((p, lib))
            }
        };
        Ok(CReference {
            library: oracle.path.clone(),
            from_cache: oracle.from_cache,
            openmp: oracle.openmp,
            oracle,
            working,
            params: spec.params.clone(),
            source: spec.source.clone(),
            function: spec.function.clone(),
            compiler: version,
        })
    }

    /// Call the reference: one byte buffer per buffer parameter (in order; each must hold
    /// the elements the function reads or writes), the integer scalars and the floating
    /// scalars in order.
    pub fn call(
        &self,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), CRefError> {
        self.call_library(&self.oracle, buffers, ints, floats)
    }

    /// [`CReference::call`] on the build in working precision `precision`.
    pub fn call_in(
        &self,
        precision: klab_spec::rule::Precision,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), CRefError> {
        match &self.working {
            Some((p, lib)) if *p == precision => self.call_library(lib, buffers, ints, floats),
            _ => Err(CRefError::Call(format!(
                "no build of {} in {} (CReferenceSpec::working)",
                self.function,
                precision.name()
            ))),
        }
    }

    fn call_library(
        &self,
        lib: &Library,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), CRefError> {
        let count = |pred: fn(&CParam) -> bool| self.params.iter().filter(|p| pred(p)).count();
        let want = (
            count(|p| matches!(p, CParam::Buffer { .. })),
            count(|p| matches!(p, CParam::Int { .. })),
            count(|p| matches!(p, CParam::Float { .. })),
        );
        if want != (buffers.len(), ints.len(), floats.len()) {
            return Err(CRefError::Call(format!(
                "expected {} buffers, {} integers and {} floats, got {}, {} and {}",
                want.0,
                want.1,
                want.2,
                buffers.len(),
                ints.len(),
                floats.len()
            )));
        }
        let ptrs: Vec<*mut c_void> = buffers
            .iter_mut()
            .map(|b| b.as_mut_ptr().cast::<c_void>())
            .collect();
        // SAFETY: the entry casts each pointer to the declared type; the caller sizes each
        // buffer for the elements the function touches (the declared lengths).
        unsafe { (lib.entry)(ptrs.as_ptr(), ints.as_ptr(), floats.as_ptr()) };
        Ok(())
    }
}

impl klab_engine::reference::Reference for CReference {
    fn run(
        &self,
        _shape: &klab_engine::declared::Shape,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), String> {
        self.call(buffers, ints, floats).map_err(|e| e.to_string())
    }

    fn run_in(
        &self,
        precision: klab_spec::rule::Precision,
        _shape: &klab_engine::declared::Shape,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), String> {
        self.call_in(precision, buffers, ints, floats)
            .map_err(|e| e.to_string())
    }

    fn describe(&self) -> String {
        format!(
            "C reference {}:{} ({}{})",
            self.source.display(),
            self.function,
            self.compiler,
            if self.openmp { ", OpenMP" } else { "" }
        )
    }
}

/// The reference's parameters for a declared operation: its kernel's, in order (inputs
/// `const`).
pub fn params_for(op: &klab_spec::declared::DeclaredOp) -> Vec<CParam> {
    use klab_spec::declared::{OpParam, Role};
    op.params
        .iter()
        .map(|p| match p {
            OpParam::Buffer(name) => {
                let b = &op.spec.buffers[name];
                CParam::Buffer {
                    c_type: b.dtype.c_type().into(),
                    writable: b.role != Role::In,
                }
            }
            // C has no half-precision type: an f16 or bf16 scalar arrives as the float of
            // its exact value (every f16 and bf16 is one), not as a buffer's raw bits.
            OpParam::Size(_, dt) | OpParam::Scalar(_, dt) if dt.is_float() => CParam::Float {
                c_type: match dt {
                    klab_core::dtype::Dtype::F64 => "double",
                    _ => "float",
                }
                .into(),
            },
            OpParam::Size(_, dt) | OpParam::Scalar(_, dt) => CParam::Int {
                c_type: dt.c_type().into(),
            },
        })
        .collect()
}

/// The compiler's first error line (else its first line).
fn first_error(log: &str, timed_out: bool) -> String {
    log.lines()
        .find(|l| l.contains("error"))
        .or_else(|| log.lines().find(|l| !l.trim().is_empty()))
        .map(|l| l.trim().to_string())
        .unwrap_or_else(|| match timed_out {
            true => format!("timed out after {} s", COMPILE_TIMEOUT.as_secs()),
            false => "no output".into(),
        })
}

fn dl_error() -> String {
    // SAFETY: dlerror returns a thread-local string or null.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "dlopen failed".into()
    } else {
        // SAFETY: a NUL-terminated string from the loader.
        unsafe { std::ffi::CStr::from_ptr(e) }
            .to_string_lossy()
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use klab_engine::reference::Reference;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn spec(dir: &Path, body: &str, params: Vec<CParam>) -> CReferenceSpec {
        let source = dir.join("my ref.c");
        std::fs::write(&source, body).unwrap();
        CReferenceSpec {
            source,
            function: "axpy_ref".into(),
            params,
            working: None,
        }
    }

    fn axpy_params() -> Vec<CParam> {
        vec![
            CParam::Buffer {
                c_type: "float".into(),
                writable: false,
            },
            CParam::Buffer {
                c_type: "float".into(),
                writable: true,
            },
            CParam::Int {
                c_type: "int32_t".into(),
            },
            CParam::Float {
                c_type: "float".into(),
            },
        ]
    }

    const AXPY: &str = "#include <stdint.h>\n\
        void axpy_ref(const float *x, float *y, int32_t n, float a) {\n\
            for (int32_t i = 0; i < n; i++) y[i] = a * x[i] + y[i];\n\
        }\n";

    fn have_cc() -> bool {
        if compiler_version(&compiler()).is_ok() {
            return true;
        }
        if std::env::var("KLAB_REQUIRE_CC").as_deref() == Ok("1") {
            panic!(
                "KLAB_REQUIRE_CC=1 but the C compiler {} does not run",
                compiler()
            );
        }
        eprintln!("SKIPPED: no C compiler ({}) on this machine", compiler());
        false
    }

    #[test]
    fn a_reference_compiles_once_and_is_called_with_the_kernels_parameters() {
        if !have_cc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let s = spec(tmp.path(), AXPY, axpy_params());
        let cache = tmp.path().join("cache");
        let r = CReference::build(&s, Some(&cache)).unwrap();
        assert!(!r.from_cache);
        let mut x = f32s(&[1.0, 2.0, 3.0]);
        let mut y = f32s(&[10.0, 20.0, 30.0]);
        r.call(&mut [&mut x, &mut y], &[3], &[0.5]).unwrap();
        assert_eq!(y, f32s(&[10.5, 21.0, 31.5]));
        assert!(r.call(&mut [&mut x], &[3], &[0.5]).is_err());
        drop(r);
        let again = CReference::build(&s, Some(&cache)).unwrap();
        assert!(
            again.from_cache,
            "the same source, compiler and flags hit the cache"
        );
        // A changed source is another entry, and so is a changed header it includes.
        std::fs::write(&s.source, AXPY.replace("a * x[i]", "2.0f * a * x[i]")).unwrap();
        assert!(!CReference::build(&s, Some(&cache)).unwrap().from_cache);
        std::fs::write(tmp.path().join("scale.h"), "#define SCALE 1.0f\n").unwrap();
        std::fs::write(
            &s.source,
            format!(
                "#include \"scale.h\"\n{}",
                AXPY.replace("a * x[i]", "SCALE * a * x[i]")
            ),
        )
        .unwrap();
        assert!(!CReference::build(&s, Some(&cache)).unwrap().from_cache);
        assert!(CReference::build(&s, Some(&cache)).unwrap().from_cache);
        std::fs::write(tmp.path().join("scale.h"), "#define SCALE 3.0f\n").unwrap();
        let r = CReference::build(&s, Some(&cache)).unwrap();
        assert!(!r.from_cache, "the header changed");
        let mut x = f32s(&[1.0]);
        let mut y = f32s(&[0.0]);
        r.call(&mut [&mut x, &mut y], &[1], &[2.0]).unwrap();
        assert_eq!(y, f32s(&[6.0]));
    }

    /// The POSIX names of math.h (M_PI, a GELU reference's constant) are there: under
    /// -std=c11 they were not, and such a reference did not compile.
    #[test]
    fn a_reference_may_use_m_pi() {
        if !have_cc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let src = AXPY
            .replace(
                "#include <stdint.h>",
                "#include <stdint.h>\n#include <math.h>",
            )
            .replace("a * x[i]", "(float)M_PI * a * x[i]");
        let s = spec(tmp.path(), &src, axpy_params());
        let r = CReference::build(&s, None).unwrap();
        let mut x = f32s(&[1.0]);
        let mut y = f32s(&[0.0]);
        r.call(&mut [&mut x, &mut y], &[1], &[1.0]).unwrap();
        assert_eq!(y, f32s(&[std::f32::consts::PI]));
    }

    /// A sum whose working type is KLAB_REAL: 1 + 2^-30 is 1 in float, not in double.
    const SUM: &str = "#include <stdint.h>\n\
        void sum_ref(const float *x, float *y, int32_t n) {\n\
            KLAB_REAL s = 0;\n\
            for (int32_t i = 0; i < n; i++) s += (KLAB_REAL)x[i];\n\
            y[0] = (float)(s - (KLAB_REAL)1.0);\n\
        }\n";

    #[test]
    fn klab_real_is_double_for_the_oracle_and_the_working_precision_in_a_second_build() {
        if !have_cc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let mut s = spec(tmp.path(), SUM, axpy_params()[..3].to_vec());
        s.function = "sum_ref".into();
        let x = f32s(&[1.0, 2f32.powi(-30)]);
        let call = |r: &CReference, p: Option<klab_spec::rule::Precision>| {
            let (mut x, mut y) = (x.clone(), f32s(&[7.0]));
            match p {
                None => r.call(&mut [&mut x, &mut y], &[2], &[]).unwrap(),
                Some(p) => r.call_in(p, &mut [&mut x, &mut y], &[2], &[]).unwrap(),
            }
            y
        };
        let plain = CReference::build(&s, None).unwrap();
        assert_eq!(call(&plain, None), f32s(&[2f32.powi(-30)]), "double");
        assert!(plain
            .call_in(klab_spec::rule::Precision::F32, &mut [], &[], &[])
            .is_err());
        s.working = Some(klab_spec::rule::Precision::F32);
        let both = CReference::build(&s, None).unwrap();
        assert_eq!(call(&both, None), f32s(&[2f32.powi(-30)]));
        let f32_ = Some(klab_spec::rule::Precision::F32);
        assert_eq!(call(&both, f32_), f32s(&[0.0]), "float loses 2^-30");
        // A reference that never writes KLAB_REAL would be the same program twice.
        let plain_src = SUM.replace("KLAB_REAL", "double");
        let mut s2 = spec(tmp.path(), &plain_src, axpy_params()[..3].to_vec());
        s2.function = "sum_ref".into();
        s2.working = f32_;
        let e = CReference::build(&s2, None).unwrap_err();
        assert!(matches!(e, CRefError::NoWorkingType { .. }), "{e}");
        assert!(e.to_string().contains("never uses KLAB_REAL"), "{e}");
    }

    /// Each element is the OpenMP thread that wrote it.
    const THREADS: &str = "#include <stdint.h>\n#include <omp.h>\n\
        void threads_ref(const float *x, float *y, int32_t n) {\n\
            (void)x;\n\
            #pragma omp parallel for schedule(static)\n\
            for (int32_t i = 0; i < n; i++) y[i] = (float)omp_get_thread_num();\n\
        }\n";

    #[test]
    fn a_reference_with_openmp_pragmas_runs_on_every_core_and_survives_a_rebuild() {
        if !have_cc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let mut s = spec(tmp.path(), THREADS, axpy_params()[..3].to_vec());
        s.function = "threads_ref".into();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Built, called, dropped and built again: the second call runs on the threads the
        // first left (RTLD_NODELETE keeps their runtime mapped).
        for round in 0..2 {
            let r = CReference::build(&s, None).unwrap();
            assert!(r.openmp, "gcc and clang with libomp take -fopenmp: {r:?}");
            assert!(r.describe().ends_with(", OpenMP)"), "{}", r.describe());
            let n = 4096;
            let (mut x, mut y) = (f32s(&[0.0]), vec![0u8; 4 * n]);
            r.call(&mut [&mut x, &mut y], &[n as i64], &[]).unwrap();
            let mut seen: Vec<u32> = y
                .chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as u32)
                .collect();
            seen.dedup();
            if cores >= 2 {
                assert!(
                    seen.len() >= 2,
                    "round {round}: one thread wrote {n} elements on {cores} cores"
                );
            }
        }
    }

    #[test]
    fn a_compiler_without_openmp_builds_the_plain_library() {
        if !have_cc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let cc = tmp.path().join("cc-without-openmp");
        std::fs::write(
            &cc,
            format!(
                "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = {OPENMP_FLAG} ] && {{ echo \"error: unsupported option '$a'\" >&2; exit 1; }}; done\nexec {} \"$@\"\n",
                compiler()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&cc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let s = spec(tmp.path(), AXPY, axpy_params());
        let cc = cc.to_str().unwrap();
        let r = CReference::build_with(&s, None, cc).unwrap();
        assert!(!r.openmp);
        assert!(!r.describe().contains("OpenMP"), "{}", r.describe());
        let (mut x, mut y) = (f32s(&[1.0, 2.0]), f32s(&[10.0, 20.0]));
        r.call(&mut [&mut x, &mut y], &[2], &[0.5]).unwrap();
        assert_eq!(y, f32s(&[10.5, 21.0]));
        // An error in the user's code is still the error reported.
        let broken = spec(
            tmp.path(),
            &AXPY.replace("y[i] =", "y[i] = undefined_name +"),
            axpy_params(),
        );
        let e = CReference::build_with(&broken, None, cc).unwrap_err();
        assert!(e.to_string().contains("undefined_name"), "{e}");
    }

    #[test]
    fn a_signature_that_disagrees_or_a_missing_function_does_not_compile() {
        if !have_cc() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let mut params = axpy_params();
        params[0] = CParam::Buffer {
            c_type: "double".into(),
            writable: false,
        };
        let e = CReference::build(&spec(tmp.path(), AXPY, params), None).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, CRefError::Compile { .. }), "{msg}");
        assert!(msg.contains("my ref.c:axpy_ref did not compile"), "{msg}");
        assert_eq!(msg.lines().count(), 1, "{msg}");
        // Scalars in another order, or an input without const, do not compile either.
        let mut swapped = axpy_params();
        swapped.swap(2, 3);
        assert!(matches!(
            CReference::build(&spec(tmp.path(), AXPY, swapped), None),
            Err(CRefError::Compile { .. })
        ));
        let loose = AXPY.replace("const float *x", "float *x");
        assert!(matches!(
            CReference::build(&spec(tmp.path(), &loose, axpy_params()), None),
            Err(CRefError::Compile { .. })
        ));
        let mut s = spec(tmp.path(), AXPY, axpy_params());
        s.function = "nope".into();
        assert!(matches!(
            CReference::build(&s, None),
            Err(CRefError::Compile { .. })
        ));
        s.function = "not an identifier".into();
        assert!(matches!(
            CReference::build(&s, None),
            Err(CRefError::Source { .. })
        ));
        s.function = "axpy_ref".into();
        s.source = tmp.path().join("missing.c");
        assert!(matches!(
            CReference::build(&s, None),
            Err(CRefError::Source { .. })
        ));
    }

    /// Issue 15: a C source that is a FIFO or a device node is refused before the compiler
    /// is started on it (no compiler is needed to see the refusal).
    #[test]
    fn a_c_source_that_is_a_fifo_or_a_device_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("ref.c");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        for (source, is) in [
            (fifo, "is a FIFO (named pipe)"),
            (PathBuf::from("/dev/zero"), "is a character device"),
        ] {
            let mut s = spec(tmp.path(), AXPY, axpy_params());
            s.source = source;
            let e = CReference::build(&s, None).unwrap_err().to_string();
            assert!(e.contains(is), "{e}");
            assert!(e.contains("klab reads a C reference source only"), "{e}");
        }
    }

    #[test]
    fn the_shim_casts_each_parameter_in_order() {
        let s = CReferenceSpec {
            source: "r.c".into(),
            function: "f".into(),
            params: axpy_params(),
            working: None,
        };
        let text = shim(&s, Path::new("/a \"b\"/r.c")).unwrap();
        assert!(text.contains("#include \"/a \\\"b\\\"/r.c\""), "{text}");
        assert!(
            text.contains(
                "typedef void (*klab_signature)(const float *, float *, int32_t, float);"
            ),
            "{text}"
        );
        assert!(text.contains("klab_signature typed = f;"));
        assert!(text.contains(
            "typed((const float *)buffers[0], (float *)buffers[1], (int32_t)ints[0], (float)floats[0]);"
        ));
        assert!(shim(&s, Path::new("/a\nb.c")).is_err());
    }
}
