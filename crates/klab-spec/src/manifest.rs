//! Kernel manifests: how a kernel is declared, built-in or brought by a user, in TOML.
//!
//! ```toml
//! source = "transpose.cu"          # relative to the manifest: CUDA C++ (.cu, .cuh), or a
//!                                  # precompiled module (.cubin, .ptx, .fatbin)
//! include_dirs = ["inc"]           # optional: -I folders, relative to the manifest
//! [[kernel]]
//! name = "padded"
//! entry = "transpose_padded"       # the extern "C" __global__ function, or a template
//!                                  # instance by name: "scale<float, 128>", or one of
//!                                  # several overloads: "scale(const float *, int)"
//! operation = "transpose"          # copy | transpose | triad | reduce-sum
//! params = ["out", "in", "n:i32"]  # the kernel's parameters in order, by role
//! block = [32, 8, 1]
//! elements_per_block = [32, 32]    # grid = N / this, per axis (rounded by grid_rounding)
//! grid_rounding = "up"             # up (ceil, default) | down (floor)
//! dynamic_shared_bytes = 0
//! options = []                     # extra NVRTC options
//! known_broken = "why"             # optional: always rejected, never timed
//! exploit = "how it cheats"        # optional: a labelled harness exploit (correct when
//!                                  # checked, skips work when timed); `klab audit` must
//!                                  # reject it through the timing gates
//! prediction = "what and why"      # optional: the expected result, written before measuring;
//!                                  # rounds summaries and reports show it beside the outcome
//! ```
//!
//! Each operation fixes the roles its kernel must take: copy and transpose `out`, `in` and
//! `n` (i32); triad `x`, `z`, `y`, `n` (u64) and `alpha` (f32); reduce-sum `in`, `partials`
//! and `n` (u64). A manifest whose parameters don't match its operation is an error that
//! names the field. These fields state a built-in contract, which
//! [`crate::declared::builtin::declare`] writes into the same [`crate::declared::DeclaredOp`]
//! an `operation = "declared"` kernel gives in `[kernel.op]`: [`KernelDecl::op`] is what
//! every gate reads.
//!
//! A manifest read from disk ([`load`], [`Files::Dir`]) may name include folders; each is
//! read into an [`IncludeDir`] (its files' digest, which the compile cache keys on).
//! Built-ins are given from memory ([`Files::Given`]) and take none.
//!
//! The source is read as bytes and becomes a [`Source`] by its extension: CUDA C++ text,
//! which NVRTC compiles, or a precompiled [`ModuleKind`], which the driver loads as it is (so
//! it takes no NVRTC `options`, no `include_dirs` and no template entries, and has no source
//! text to show).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::declared::builtin::{OpKind, Param, Rounding, ScalarType};
use crate::include::{IncludeDir, ReachedHeaders};
use klab_core::artifact::{read_regular, read_text, Input};
use klab_core::device::Dim3;
use klab_core::dtype::Dtype;
use klab_core::text::{is_identifier, template_name};

/// A library routine that stands in for a kernel: manifest entries beginning with `@`.
/// Each takes the parameters `out, in, n:i32` of an N x N float32 matrix, so it runs
/// through the same gates (oracle, sanitizer, timing engine) as a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LibraryRoutine {
    /// `cuMemcpyDtoDAsync` of the whole matrix (the copy engine path): a copy ceiling.
    MemcpyDtoD,
    /// cuBLAS `sgeam` with `op(A) = A^T`, `alpha = 1`, `beta = 0`: the library transpose.
    CublasSgeam,
}

impl LibraryRoutine {
    pub const ALL: [LibraryRoutine; 2] = [LibraryRoutine::MemcpyDtoD, LibraryRoutine::CublasSgeam];

    /// The manifest entry that names it.
    pub fn entry(self) -> &'static str {
        match self {
            LibraryRoutine::MemcpyDtoD => "@cuMemcpyDtoD",
            LibraryRoutine::CublasSgeam => "@cublasSgeam",
        }
    }

    pub fn from_entry(entry: &str) -> Option<LibraryRoutine> {
        LibraryRoutine::ALL.into_iter().find(|r| r.entry() == entry)
    }

    pub fn operation(self) -> OpKind {
        match self {
            LibraryRoutine::MemcpyDtoD => OpKind::Copy,
            LibraryRoutine::CublasSgeam => OpKind::Transpose,
        }
    }

    /// The parameters every library routine takes, in this order.
    pub fn params() -> Vec<Param> {
        vec![
            Param::Buffer("out".into()),
            Param::Buffer("in".into()),
            Param::Scalar("n".into(), ScalarType::I32),
        ]
    }
}

/// One declared kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelDecl {
    pub name: String,
    pub entry: String,
    /// The built-in contract it was declared with, or `Declared` for its own `[kernel.op]`.
    pub operation: OpKind,
    pub options: Vec<String>,
    pub known_broken: Option<String>,
    /// How the kernel games a harness, when it is a labelled exploit (`klab audit` times it
    /// and must reject it); unlike `known_broken`, the label stops nothing.
    pub exploit: Option<String>,
    /// The author's prediction for this kernel, written before measuring (one line).
    pub prediction: Option<String>,
    /// The tool that generated the kernel's module (Triton, say) and from what, when the
    /// manifest says: receipts carry it beside the module's own hash.
    pub generated_by: Option<GeneratedBy>,
    /// What the kernel computes: its size variables, launch, buffers, rules and
    /// reference. A built-in operation's launch fields (`block`, `elements_per_block`,
    /// `grid_rounding`, `equality`) are written into one by [`crate::declared::builtin`].
    pub op: std::sync::Arc<crate::declared::DeclaredOp>,
}

impl KernelDecl {
    /// Its launches, in order: one of `entry`, or the sequence its operation declares
    /// ([`crate::declared::launches`]).
    pub fn launches(&self) -> Vec<crate::declared::launches::DeclaredLaunch<'_>> {
        self.op.launches(&self.entry)
    }
}

/// What a precompiled module is, by its file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleKind {
    /// `.cubin`: machine code for one architecture.
    Cubin,
    /// `.ptx`: virtual-ISA text the driver compiles for the device when it loads it.
    Ptx,
    /// `.fatbin`: a bundle of cubins and PTX; the driver picks what fits the device.
    Fatbin,
}

impl ModuleKind {
    pub const ALL: [ModuleKind; 3] = [ModuleKind::Cubin, ModuleKind::Ptx, ModuleKind::Fatbin];

    /// The file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            ModuleKind::Cubin => "cubin",
            ModuleKind::Ptx => "ptx",
            ModuleKind::Fatbin => "fatbin",
        }
    }

    /// As prose names it.
    pub fn name(self) -> &'static str {
        match self {
            ModuleKind::Cubin => "cubin",
            ModuleKind::Ptx => "PTX",
            ModuleKind::Fatbin => "fatbin",
        }
    }
}

/// Extensions read as CUDA C++ source: CUDA's own, and the C++ headers and sources
/// projects keep kernels in (`kernels.h`, TensorFlow's `.cu.cc`), all of which NVRTC compiles.
pub const CUDA_EXTENSIONS: [&str; 10] = [
    "cu", "cuh", "h", "hpp", "hh", "hxx", "inl", "cc", "cpp", "cxx",
];

/// A manifest's source as klab holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// CUDA C++ that NVRTC compiles.
    Cuda { text: CudaText },
    /// A compiled module the driver loads as it is.
    Module { kind: ModuleKind, bytes: Vec<u8> },
}

/// CUDA C++ text, and its kernels as klab reads them ([`crate::signature::Index`]), read
/// once when first asked: every kernel of a manifest is looked up in the same reading.
///
/// A file may hold bytes that are not UTF-8 in its comments (a Latin-1 author's name): the
/// text then has U+FFFD in their place, which changes nothing the compiler reads, and the
/// file's own bytes are what receipts bind.
#[derive(Debug, Clone)]
pub struct CudaText {
    bytes: Vec<u8>,
    text: String,
    index: std::sync::OnceLock<crate::signature::Index>,
}

impl CudaText {
    pub fn new(text: String) -> CudaText {
        CudaText {
            bytes: text.clone().into_bytes(),
            text,
            index: std::sync::OnceLock::new(),
        }
    }

    /// The text of a file's bytes; the 1-based line of the first byte that is not UTF-8
    /// outside a comment, if one is.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<CudaText, usize> {
        let text = match String::from_utf8(bytes) {
            Ok(text) => return Ok(CudaText::new(text)),
            Err(e) => e.into_bytes(),
        };
        if let Some(line) = crate::signature::invalid_outside_comments(&text) {
            return Err(line);
        }
        Ok(CudaText {
            text: String::from_utf8_lossy(&text).into_owned(),
            bytes: text,
            index: std::sync::OnceLock::new(),
        })
    }

    /// The file's bytes, as read.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The text's kernels, read on the first call.
    pub fn index(&self) -> &crate::signature::Index {
        self.index
            .get_or_init(|| crate::signature::Index::new(&self.text))
    }
}

/// Two texts are equal by their bytes; the index follows from them.
impl PartialEq for CudaText {
    fn eq(&self, other: &CudaText) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for CudaText {}

impl std::ops::Deref for CudaText {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl Source {
    /// The file's bytes, as read.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Source::Cuda { text } => text.bytes(),
            Source::Module { bytes, .. } => bytes,
        }
    }

    /// SHA-256 of the file's bytes: what receipts bind.
    pub fn sha256(&self) -> String {
        klab_core::artifact::sha256_hex(self.bytes())
    }

    /// The CUDA C++ text, or `None` for a precompiled module.
    pub fn text(&self) -> Option<&str> {
        match self {
            Source::Cuda { text } => Some(text.as_str()),
            Source::Module { .. } => None,
        }
    }

    /// The module kind, or `None` for CUDA C++.
    pub fn module_kind(&self) -> Option<ModuleKind> {
        match self {
            Source::Cuda { .. } => None,
            Source::Module { kind, .. } => Some(*kind),
        }
    }

    /// What it is, for messages: `CUDA C++` or `a precompiled cubin`.
    pub fn describe(&self) -> String {
        match self {
            Source::Cuda { .. } => "CUDA C++".into(),
            Source::Module { kind, .. } => format!("a precompiled {}", kind.name()),
        }
    }

    /// What the file `name` holds, by its extension: `None` for CUDA C++, else the module
    /// kind; `Err` for an extension klab does not know.
    fn kind_of(name: &str) -> Result<Option<ModuleKind>, String> {
        let ext = Path::new(name)
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("");
        if let Some(kind) = ModuleKind::ALL.into_iter().find(|k| k.extension() == ext) {
            return Ok(Some(kind));
        }
        if CUDA_EXTENSIONS.contains(&ext) {
            return Ok(None);
        }
        Err(format!(
            "'{name}' is neither CUDA C++ ({}) nor a precompiled module ({}), by its extension",
            CUDA_EXTENSIONS.map(|e| format!(".{e}")).join(", "),
            ModuleKind::ALL
                .map(|k| format!(".{}", k.extension()))
                .join(", ")
        ))
    }

    /// The source named `name`, of the kind [`Source::kind_of`] gave, from its bytes.
    fn from_file(name: &str, kind: Option<ModuleKind>, bytes: Vec<u8>) -> Result<Source, String> {
        match kind {
            Some(kind) => Ok(Source::Module { kind, bytes }),
            None => CudaText::from_bytes(bytes)
                .map(|text| Source::Cuda { text })
                .map_err(|line| {
                    format!("'{name}' is not UTF-8 text outside its comments (line {line})")
                }),
        }
    }

    /// Why `name` (a plain name: an entry, or a template's name without its arguments) is
    /// no kernel klab can load from this source, if it is not. CUDA C++ must declare a
    /// `__global__` function of that name, by token ([`crate::signature::lookup_entry`]), of the
    /// kind the entry names: `extern "C"` for a plain entry (the loader asks for the name
    /// itself), a template for an instance. A PTX module must have an `.entry` of that name,
    /// a cubin a symbol; a fatbin may be compressed, so nothing is said of it.
    fn entry_problem(&self, name: &str, template: bool, file: &str) -> Option<String> {
        use crate::signature::EntryLookup;
        match self {
            Source::Cuda { text } => match text.index().lookup(name) {
                EntryLookup::Kernel(k) => {
                    let at = format!("'{name}' ({file} line {})", k.line);
                    match (&k.template, template) {
                        (None, true) => Some(format!(
                            "{at} is not a template: give its name, {name}, as the entry"
                        )),
                        (Some(params), false) => Some(format!(
                            "{at} is a template <{params}>: name an instance, {name}<...> with its arguments"
                        )),
                        // Not extern "C": NVRTC lowers the name to its mangled symbol
                        // ([`Manifest::name_expressions`]), as it does a template instance's.
                        _ => None,
                    }
                }
                EntryLookup::CannotTell => None,
                // A template instance among overloads of its name: the one template is it.
                EntryLookup::Overloaded(kernels)
                    if template && kernels.iter().filter(|k| k.template.is_some()).count() == 1 =>
                {
                    None
                }
                EntryLookup::Overloaded(kernels) => Some(format!(
                    "'{name}' names {} overloads ({file} lines {}): give its entry with the parameter types of the one to run, as {}",
                    kernels.len(),
                    kernels
                        .iter()
                        .map(|k| k.line.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    kernels
                        .iter()
                        .map(|k| match k.template {
                            Some(_) => format!("{}<...> with its arguments", k.qualified()),
                            None => format!("\"{}\"", k.with_types()),
                        })
                        .collect::<Vec<_>>()
                        .join(" or ")
                )),
                EntryLookup::InNamespace(kernels) => Some(format!(
                    "'{name}' is declared in a namespace ({file} line {}): give its entry as {}",
                    kernels[0].line,
                    kernels
                        .iter()
                        .map(|k| match k.template {
                            Some(_) => format!("{}<...> with its arguments", k.qualified()),
                            None => k.qualified(),
                        })
                        .collect::<Vec<_>>()
                        .join(" or ")
                )),
                // It may be in a header the source includes (a project's kernels.cuh):
                // klab cannot tell; NVRTC will, by name ([`Manifest::name_expressions`]).
                EntryLookup::Missing(_) if crate::include::includes_own_headers(text) => None,
                EntryLookup::Missing(names) => Some(format!(
                    "no __global__ function '{name}' in {file} ({})",
                    if names.is_empty() {
                        "it declares none".to_string()
                    } else {
                        format!("it declares {}", names.join(", "))
                    }
                )),
            },
            Source::Module {
                kind: ModuleKind::Fatbin,
                ..
            } => None,
            Source::Module { kind, bytes } => {
                let found = match kind {
                    ModuleKind::Ptx => ptx_entries(bytes).any(|e| e == name.as_bytes()),
                    // A symbol's name stands between NULs in the string table.
                    _ => {
                        let symbol = [&[0u8][..], name.as_bytes(), &[0u8]].concat();
                        bytes.windows(symbol.len()).any(|w| w == symbol)
                    }
                };
                (!found).then(|| format!("'{name}' does not appear in {file}"))
            }
        }
    }
}

/// How much of a kernel's signature [`Source::signature_problem`] holds the manifest to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SignatureCheck {
    /// A declared operation: the user wrote every parameter's role and type, so each is
    /// held to the signature.
    Full,
    /// A built-in operation: its contract fixes the types, and kernels that do its work
    /// correctly take other ones (`size_t n`, where klab passes a non-negative n in a slot
    /// of 8 bytes; `unsigned*` for a bitwise copy of floats). Only roles are held: an
    /// output behind `const` is two roles swapped.
    Roles,
}

impl Source {
    /// The `__global__` function `entry` names, as its template instance declares it where
    /// it is one; `None` where the source is no CUDA text or the name is not one kernel.
    fn readable_kernel(&self, entry: &Readable) -> Option<crate::signature::Kernel> {
        let Source::Cuda { text } = self else {
            return None;
        };
        let crate::signature::EntryLookup::Kernel(k) = text.index().lookup(&entry.lookup) else {
            return None;
        };
        Some(match (&entry.arguments, &k.template) {
            (Some(args), Some(_)) => {
                k.instance(&args.iter().map(String::as_str).collect::<Vec<_>>())
            }
            _ => k,
        })
    }

    /// Why the `__global__` function `entry` names cannot take `params` (of `op`), if a
    /// plain reading of its parameter list shows it: another count, a buffer for a value
    /// or a value for a pointer, an output behind `const`, or an element or scalar type
    /// of another kind or width than declared ([`SignatureCheck::Roles`]: an output behind
    /// `const` only). Types klab cannot read (a struct, a macro, a typedef of a pointer,
    /// `void *`) are taken on trust: a false refusal is as bad as a missed one.
    fn signature_problem(
        &self,
        entry: &Readable,
        params: &[crate::declared::OpParam],
        op: &crate::declared::DeclaredOp,
        file: &str,
        check: SignatureCheck,
    ) -> Option<String> {
        use crate::declared::OpParam;
        use crate::signature::{Elem, ParamKind};
        let k = self.readable_kernel(entry)?;
        // Parameters behind an `#ifdef`: klab holds the kernel to those before them only.
        let (readable, all) = k.readable_params();
        // An overload entry's types may be spelt otherwise than the kernel's: name the
        // kernel as the source declares it.
        let name = match crate::signature::overload_entry(&entry.entry) {
            Some(_) => k.with_types(),
            None => entry.entry.clone(),
        };
        let at = format!("{name} ({file} line {})", k.line);
        if check == SignatureCheck::Roles && k.params.len() != params.len() {
            return None;
        }
        if all && k.params.len() != params.len() {
            return Some(format!(
                "the manifest passes {} argument(s); {at} takes {}: ({})",
                params.len(),
                k.params.len(),
                k.params
                    .iter()
                    .map(|p| p.text.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for (i, (mine, theirs)) in params.iter().zip(readable).enumerate() {
            let written = format!("parameter {i} of {at}, `{}`", theirs.text);
            // An output behind const. In a sequence, a launch may read what another writes:
            // whether some launch writes each output is checked over all of them.
            let const_output = |b: &str| {
                let role = op.spec.buffers[b].role;
                (role != crate::declared::Role::In && op.sequence.is_empty()).then(|| {
                    format!(
                        "'{b}' is declared {}, but {written} is read-only (const)",
                        role.name()
                    )
                })
            };
            let problem = match (mine, &theirs.kind) {
                (OpParam::Buffer(b), ParamKind::Pointer { read_only: true, .. })
                    if const_output(b).is_some() =>
                {
                    const_output(b)
                }
                // Where only roles are held, that is all.
                _ if check == SignatureCheck::Roles => None,
                // A name klab cannot read may be a typedef of a pointer.
                (OpParam::Buffer(_), ParamKind::Value(Elem::Unknown { .. })) => None,
                (OpParam::Buffer(b), ParamKind::Value(_)) => Some(format!(
                    "'{b}' is a buffer, but {written} is passed by value"
                )),
                (OpParam::Size(v, _) | OpParam::Scalar(v, _), ParamKind::Pointer { .. }) => {
                    Some(format!("'{v}' is a value, but {written} is a pointer"))
                }
                (OpParam::Buffer(b), ParamKind::Pointer { elem, .. }) => {
                    let dtype = op.spec.buffers[b].dtype;
                    match elem {
                        Elem::Known(t) if !element_fits(dtype, *t) => Some(format!(
                            "'{b}' is declared {dtype}, but {written} points to {t}"
                        )),
                        Elem::Vector { dtype: v, name, .. }
                            if v.is_float() && !element_fits(dtype, *v) =>
                        {
                            Some(format!(
                                "'{b}' is declared {dtype}, but {written} points to {name}"
                            ))
                        }
                        Elem::Bool => bool_buffer_problem(&op.spec.buffers[b], b, &written),
                        // A device array of device pointers: a flat buffer's elements would
                        // be read as addresses.
                        e if e.is_pointers() => Some(format!(
                            "'{b}' is a flat buffer, but {written} points to pointers: klab cannot build an array of them"
                        )),
                        _ => None,
                    }
                }
                (OpParam::Size(v, _), ParamKind::Value(Elem::Bool)) => {
                    Some(format!("'{v}' is a size, but {written} is a bool"))
                }
                (OpParam::Scalar(v, d), ParamKind::Value(Elem::Bool)) if d.is_float() => {
                    Some(format!(
                        "'{v}' is passed as {d}, but {written} is a bool: declare an integer scalar of values 0 and 1"
                    ))
                }
                (OpParam::Scalar(v, _), ParamKind::Value(Elem::Bool)) => {
                    (!scalar_within(&op.spec.scalars[v], 0.0, 1.0)).then(|| {
                        format!("'{v}' takes values past what {written}, a bool, holds (0 and 1)")
                    })
                }
                // A narrower integer (`unsigned char flag`, `short k`): the driver copies the
                // parameter's own bytes, the low ones of klab's little-endian value, so every
                // value the scalar takes must fit it.
                (OpParam::Scalar(v, d), ParamKind::Value(Elem::Known(t)))
                    if d.is_integer()
                        && t.is_integer()
                        && t.size_bytes() < d.size_bytes() =>
                {
                    let (lo, hi) = integer_bounds(*t);
                    (!scalar_within(&op.spec.scalars[v], lo, hi)).then(|| {
                        format!("'{v}' takes values past what {written}, a {t}, holds ({lo} to {hi})")
                    })
                }
                // Integers of one width share their bytes; floats must be the same format
                // (an f16 and a bf16 have one width and different bits).
                (OpParam::Size(v, d) | OpParam::Scalar(v, d), ParamKind::Value(Elem::Known(t)))
                    if d != t
                        && (d.is_float() || t.is_float() || d.size_bytes() != t.size_bytes()) =>
                {
                    Some(format!("'{v}' is passed as {d}, but {written} is {t}"))
                }
                // klab passes one number: a vector's bytes would be that number's bits.
                (
                    OpParam::Size(v, d) | OpParam::Scalar(v, d),
                    ParamKind::Value(Elem::Vector { name, .. }),
                ) => Some(format!(
                    "'{v}' is passed as {d}, but {written} is a {name}, a vector: klab passes one number"
                )),
                _ => None,
            };
            if problem.is_some() {
                return problem;
            }
        }
        None
    }
}

impl Source {
    /// The buffers `params` passes to `__global__` function `name` through pointers that
    /// are not `const`; None where its parameter list cannot be read.
    fn written_buffers<'a>(
        &self,
        entry: &Readable,
        params: &'a [crate::declared::OpParam],
    ) -> Option<BTreeSet<&'a str>> {
        use crate::declared::OpParam;
        use crate::signature::ParamKind;
        let k = self.readable_kernel(entry)?;
        if !k.readable_params().1 {
            return None;
        }
        Some(
            params
                .iter()
                .zip(&k.params)
                .filter_map(|(mine, theirs)| match (mine, &theirs.kind) {
                    (
                        OpParam::Buffer(b),
                        ParamKind::Pointer {
                            read_only: false, ..
                        },
                    ) => Some(b.as_str()),
                    _ => None,
                })
                .collect(),
        )
    }
}

/// Whether a buffer declared `declared` can be what a kernel's `written *` points to: the
/// same float type, integers of the same width (signedness aside: the bits are the same),
/// floats as integers of their width (their raw bits: a bitwise copy, radix-sort keys,
/// `__float_as_uint` work), and any buffer behind a byte pointer. Two float types are not
/// each other (f16 and bf16: the same width, other values), and integers are not a float
/// type: a kernel that reads them as floats computes on other values.
fn element_fits(declared: Dtype, written: Dtype) -> bool {
    if written.size_bytes() == 1 && written.is_integer() {
        return true;
    }
    if declared.size_bytes() != written.size_bytes() {
        return false;
    }
    match (declared.is_float(), written.is_float()) {
        (true, true) => declared == written,
        (_, false) => true,
        (false, true) => false,
    }
}

/// Whether every value an integer scalar takes (each of its values, or each whole number
/// of its range) lies in `[lo, hi]`.
fn scalar_within(spec: &crate::declared::ScalarSpec, lo: f64, hi: f64) -> bool {
    let fits = |x: f64| (lo..=hi).contains(&x);
    spec.values.iter().copied().all(fits)
        && spec
            .range
            .is_none_or(|[a, b]| fits(a.ceil()) && fits(b.floor()))
}

/// Why buffer `b` cannot be what a `bool *` points to: a bool is one byte, so the buffer
/// must be of one-byte integers, and one klab fills must be filled with 0 and 1 only
/// (`range = [0, 1]`): any other byte is no bool the kernel's code expects.
fn bool_buffer_problem(
    spec: &crate::declared::BufferSpec,
    b: &str,
    written: &str,
) -> Option<String> {
    use crate::declared::{Bound, Role};
    let dtype = spec.dtype;
    if !(dtype.size_bytes() == 1 && dtype.is_integer()) {
        return Some(format!(
            "'{b}' is declared {dtype}, but {written} points to bool: declare it u8, each element 0 or 1"
        ));
    }
    let filled = matches!(spec.role, Role::In | Role::Inout);
    // An end may be written as an expression; one of no size variable is a number.
    let value = |b: &Bound| b.eval(&BTreeMap::new()).ok();
    let zero_one = spec.range.as_ref().is_some_and(|[lo, hi]| {
        value(lo).is_some_and(|v| v >= 0.0) && value(hi).is_some_and(|v| v <= 1.0)
    });
    (filled && !zero_one).then(|| {
        format!("'{b}' is read as bool by {written}: give it range = [0, 1], so that klab fills it with 0 and 1 only")
    })
}

/// The smallest and largest value of an integer dtype of at most 32 bits, as f64.
fn integer_bounds(t: Dtype) -> (f64, f64) {
    let bits = 8 * t.size_bytes() as i32;
    if t.is_signed() {
        (-(2f64.powi(bits - 1)), 2f64.powi(bits - 1) - 1.0)
    } else {
        (0.0, 2f64.powi(bits) - 1.0)
    }
}

/// The name after each `.entry` directive of PTX text: its kernels.
fn ptx_entries(ptx: &[u8]) -> impl Iterator<Item = &[u8]> {
    const ENTRY: &[u8] = b".entry";
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
    (0..ptx.len()).filter_map(move |i| {
        let rest = ptx[i..].strip_prefix(ENTRY)?;
        // `.entry` itself as a token, then blanks, then the name.
        if i > 0 && !ptx[i - 1].is_ascii_whitespace() {
            return None;
        }
        let blanks = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
        if blanks == 0 {
            return None;
        }
        let rest = &rest[blanks..];
        Some(&rest[..rest.iter().take_while(|b| word(**b)).count()])
    })
}

/// A manifest: one source file and the kernels it declares.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    /// Where the manifest came from (`builtin:transpose` for built-ins).
    pub origin: String,
    /// The source's path as reports should name it (repository-relative for built-ins).
    pub source_path: String,
    /// NVRTC program name: for a manifest read from a folder, the source's absolute path, so
    /// that NVRTC looks for a quoted header beside the source, as nvcc does (with a bare file
    /// name it looks in the folder klab runs in). The file name for built-ins; a
    /// precompiled module's file name.
    pub program: String,
    #[serde(skip)]
    pub source: Source,
    /// `include_dirs`, resolved against the manifest's folder, in the order given.
    pub include_dirs: Vec<IncludeDir>,
    /// The headers a CUDA C++ source read from a folder reaches by `#include`.
    pub headers: Option<ReachedHeaders>,
    pub kernels: Vec<KernelDecl>,
}

impl Manifest {
    /// The entries whose symbols are mangled, each once, in the order declared: template
    /// instances (`scale<float, 128>`) and plain C++ kernels (not `extern "C"`, as most
    /// projects write them). NVRTC is asked to instantiate and lower them when the source
    /// is compiled, for every kernel of the manifest, so one compiled module serves them
    /// all and each is loaded by its lowered name. An `extern "C"` entry is its own symbol.
    pub fn name_expressions(&self) -> Vec<String> {
        use crate::signature::EntryLookup;
        // A kernel in an included header is asked for by name too: NVRTC lowers an
        // extern "C" name to itself and a C++ one to its symbol.
        let mangled = |e: &str| match &self.source {
            Source::Cuda { text } => {
                // A qualified name is looked up by the compiler, whatever its linkage.
                template_name(e).is_some()
                    || e.contains("::")
                    // One overload by its types, extern "C" or not: its address is lowered.
                    || crate::signature::overload_entry(e).is_some()
                    || match text.index().lookup(e) {
                        EntryLookup::Kernel(k) => !k.extern_c,
                        EntryLookup::Missing(_) => text.index().includes_own_headers(),
                        // A macro may write a C++ kernel: asked by name, either lowers.
                        EntryLookup::CannotTell
                        | EntryLookup::InNamespace(_)
                        | EntryLookup::Overloaded(_) => true,
                    }
            }
            Source::Module { .. } => template_name(e).is_some(),
        };
        let mut seen = BTreeSet::new();
        self.kernels
            .iter()
            .flat_map(|k| k.launches())
            .map(|l| l.entry)
            .filter(|e| mangled(e))
            .filter(|e| seen.insert(*e))
            .map(str::to_string)
            .collect()
    }
}

/// A manifest that cannot be used: one line naming the file and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub origin: String,
    pub field: String,
    pub problem: String,
}

/// The field of a manifest that could not be read at all; its problem (a
/// [`klab_core::artifact::FileError`]) names the file and says it is a manifest.
pub const FILE_FIELD: &str = "file";

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field == FILE_FIELD {
            f.write_str(&self.problem)
        } else {
            write!(
                f,
                "manifest {}: {}: {}",
                self.origin, self.field, self.problem
            )
        }
    }
}

impl std::error::Error for ManifestError {}

/// A TOML error on one line: what the parser says, and where (`line L, column C`, from its
/// span). The parser says nothing where the file ends inside a statement (`source = `).
fn toml_problem(text: &str, e: &toml::de::Error) -> String {
    let said = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let Some(span) = e.span() else {
        return said;
    };
    // The span is in bytes; step back to a character boundary (never slice inside one).
    let start = (0..=span.start.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let said = match said.is_empty() {
        false => said,
        true if text[start..].trim().is_empty() && text[..start].trim_end().ends_with('=') => {
            "the file ends where a value is expected".to_string()
        }
        true if text[start..].trim().is_empty() => "the file ends inside a statement".to_string(),
        true => "the parser cannot read what is here".to_string(),
    };
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    format!(
        "{said} (line {}, column {})",
        text[..start].matches('\n').count() + 1,
        text[line_start..start].chars().count() + 1
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    source: String,
    #[serde(default)]
    include_dirs: Vec<String>,
    /// Declared operations shared by several kernels (`[ops.NAME]`, used by `op = "NAME"`).
    #[serde(default)]
    ops: BTreeMap<String, crate::declared::DeclaredOpSpec>,
    #[serde(rename = "kernel")]
    kernels: Vec<RawKernel>,
}

/// A kernel's `op`: its own `[kernel.op]` table, or the name of a top-level `[ops.NAME]`
/// (a correct kernel and its labelled bugs compute one operation).
enum RawOp {
    Inline(Box<crate::declared::DeclaredOpSpec>),
    Named(String),
}

impl<'de> Deserialize<'de> for RawOp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawOp, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawOp;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a [kernel.op] table or the name of an [ops.NAME] table")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawOp, E> {
                Ok(RawOp::Named(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawOp, A::Error> {
                // The table's own errors (a missing or unknown field) keep their words.
                crate::declared::DeclaredOpSpec::deserialize(
                    serde::de::value::MapAccessDeserializer::new(map),
                )
                .map(|spec| RawOp::Inline(Box::new(spec)))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    name: String,
    /// Absent for a kernel that gives `launches`.
    #[serde(default)]
    entry: Option<String>,
    operation: String,
    params: Vec<String>,
    #[serde(default)]
    block: Option<Vec<u32>>,
    #[serde(default)]
    elements_per_block: Option<Vec<u64>>,
    /// A declared operation's `[kernel.op]`, or `op = "NAME"` for a shared `[ops.NAME]`.
    #[serde(default)]
    op: Option<RawOp>,
    #[serde(default)]
    grid_rounding: Option<String>,
    #[serde(default)]
    dynamic_shared_bytes: u32,
    #[serde(default)]
    options: Vec<String>,
    #[serde(default)]
    known_broken: Option<String>,
    #[serde(default)]
    exploit: Option<String>,
    #[serde(default)]
    equality: Option<String>,
    #[serde(default)]
    prediction: Option<String>,
    /// This kernel's own launch of a shared declared operation.
    #[serde(default)]
    launch: Option<LaunchOverride>,
    /// A declared operation computed by several kernels in order.
    #[serde(default)]
    launches: Option<Vec<crate::declared::launches::LaunchSpec>>,
    /// The tool that generated the module, and from what.
    #[serde(default)]
    generated_by: Option<GeneratedBySpec>,
}

/// `generated_by = { tool = "triton 3.6.0", source = "softmax.py", function = "softmax",
/// settings = ["BLOCK=1024", "num_warps=4"] }`: what made a precompiled module, as the
/// manifest states it. `source` is read (relative to the manifest) and hashed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct GeneratedBySpec {
    tool: String,
    source: String,
    #[serde(default)]
    function: Option<String>,
    #[serde(default)]
    settings: Vec<String>,
}

/// What generated a kernel's module: the tool and its version, the file it was generated
/// from (as the manifest names it, and its SHA-256), the function, and every setting that
/// chose the code (constexprs, warps, stages, the architecture).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneratedBy {
    pub tool: String,
    pub source: String,
    pub source_sha256: String,
    #[serde(default)]
    pub function: Option<String>,
    #[serde(default)]
    pub settings: Vec<String>,
}

impl GeneratedBy {
    /// `generated by triton 3.6.0 from softmax.py:softmax (sha256 0123abcd...; BLOCK=1024,
    /// num_warps=4)`.
    pub fn describe(&self) -> String {
        let function = self
            .function
            .as_ref()
            .map(|f| format!(":{f}"))
            .unwrap_or_default();
        let settings = if self.settings.is_empty() {
            String::new()
        } else {
            format!("; {}", self.settings.join(", "))
        };
        let short: String = self.source_sha256.chars().take(12).collect();
        format!(
            "generated by {} from {}{function} (sha256 {short}...{settings})",
            self.tool, self.source,
        )
    }
}

impl GeneratedBySpec {
    /// The statement with its source file read and hashed.
    fn resolve(self, files: &Files<'_>) -> Result<GeneratedBy, String> {
        if self.tool.trim().is_empty() {
            return Err("name the tool (and its version), e.g. tool = \"triton 3.6.0\"".into());
        }
        let (_, bytes) = files
            .source(&self.source)
            .map_err(|e| format!("source {}: {e}", self.source))?;
        Ok(GeneratedBy {
            tool: self.tool,
            source: self.source,
            source_sha256: klab_core::artifact::sha256_hex(&bytes),
            function: self.function,
            settings: self.settings,
        })
    }

    /// A module compiled from the manifest's own source has no generator to state.
    fn applies_to(source: &Source, file: &str) -> Result<(), String> {
        match source.module_kind() {
            Some(_) => Ok(()),
            None => Err(format!(
                "{file} is compiled by klab (NVRTC): generated_by states what made a precompiled module"
            )),
        }
    }
}

/// `launch = { block = ["128"], sizes = { bs = [128] } }`: what one kernel of a shared
/// `[ops.NAME]` launches differently (five block sizes of one layer norm share its buffers,
/// rule and reference): its grid, block and dynamic shared memory, and the values of the
/// operation's launch parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LaunchOverride {
    #[serde(default)]
    grid: Option<Vec<klab_core::expr::Expr>>,
    #[serde(default)]
    block: Option<Vec<klab_core::expr::Expr>>,
    #[serde(default)]
    dynamic_shared_bytes: Option<klab_core::expr::Expr>,
    #[serde(default)]
    sizes: BTreeMap<String, Vec<u64>>,
}

impl LaunchOverride {
    /// Whether it sets a grid, block or dynamic shared memory (beside sizes).
    fn sets_the_launch(&self) -> bool {
        self.grid.is_some() || self.block.is_some() || self.dynamic_shared_bytes.is_some()
    }

    /// `spec` launched this way; an error names the launch field.
    fn apply(
        self,
        mut spec: crate::declared::DeclaredOpSpec,
    ) -> Result<crate::declared::DeclaredOpSpec, (String, String)> {
        if let Some(g) = self.grid {
            spec.grid = g;
        }
        if let Some(b) = self.block {
            spec.block = b;
        }
        if let Some(d) = self.dynamic_shared_bytes {
            spec.dynamic_shared_bytes = Some(d);
        }
        for (var, values) in self.sizes {
            match spec.sizes.get_mut(&var) {
                Some(s) if s.launch => {
                    // The bench shape launches this kernel its own way too.
                    if let (Some(bench), Some(first)) = (spec.bench.as_mut(), values.first()) {
                        if let Some(v) = bench.get_mut(&var) {
                            *v = *first;
                        }
                    }
                    s.values = Some(values);
                }
                Some(_) => {
                    return Err((
                        format!("sizes.{var}"),
                        format!("{var} is a problem size; only a launch parameter (launch = true) takes a kernel's own values"),
                    ))
                }
                None => return Err((format!("sizes.{var}"), format!("'{var}' is not a size variable"))),
            }
        }
        Ok(spec)
    }
}

/// What `klab init` writes where the user must fill in a value: the whole string, or the
/// type of a parameter (`"n:TODO"`). Any such string left in a manifest is refused, naming
/// its field, before anything else is read.
pub const PLACEHOLDER: &str = "TODO";

/// A string `klab init` left for the user to fill in.
pub fn is_placeholder(s: &str) -> bool {
    s.trim() == PLACEHOLDER
        || s.rsplit_once(':')
            .is_some_and(|(_, t)| t.trim() == PLACEHOLDER)
}

/// The field of the first placeholder in document order (`kernel[0].op.grid[0]`), if the
/// text is TOML and holds one.
fn first_placeholder(text: &str) -> Option<String> {
    use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

    /// Visits every value in the order the parser meets them (the document's).
    struct Walk<'a> {
        path: String,
        found: &'a mut Option<String>,
    }
    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any TOML value")
        }
        fn visit_str<E>(self, v: &str) -> Result<(), E> {
            // `name:TODO` only where klab init writes it: a parameter's type.
            let typed = self.path.contains(".params[");
            if self.found.is_none() && (v.trim() == PLACEHOLDER || (typed && is_placeholder(v))) {
                *self.found = Some(self.path);
            }
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let Walk { path, found } = self;
            let mut i = 0;
            while seq
                .next_element_seed(Walk {
                    path: format!("{path}[{i}]"),
                    found: &mut *found,
                })?
                .is_some()
            {
                i += 1;
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let Walk { path, found } = self;
            while let Some(key) = map.next_key::<String>()? {
                let path = match path.is_empty() {
                    true => key,
                    false => format!("{path}.{key}"),
                };
                map.next_value_seed(Walk {
                    path,
                    found: &mut *found,
                })?;
            }
            Ok(())
        }
    }
    let mut found = None;
    Walk {
        path: String::new(),
        found: &mut found,
    }
    .deserialize(toml::Deserializer::new(text))
    .ok()?;
    found
}

/// Loads the source a manifest names: (path as reports name it, bytes), or why not.
pub type SourceLoader<'a> = dyn Fn(&str) -> Result<(String, Vec<u8>), String> + 'a;

/// Where the files a manifest names are found.
pub enum Files<'a> {
    /// On disk, relative to this folder (the manifest's own).
    Dir(&'a Path),
    /// From memory (built-ins, tests): the source by its name; no include folders.
    Given(&'a SourceLoader<'a>),
}

impl Files<'_> {
    fn source(&self, name: &str) -> Result<(String, Vec<u8>), String> {
        match self {
            Files::Dir(dir) => {
                let p = dir.join(name);
                read_regular(&p, Input::SOURCE)
                    .map(|s| (p.display().to_string(), s))
                    .map_err(|e| e.to_string())
            }
            Files::Given(f) => f(name),
        }
    }

    fn include_dir(&self, name: &str) -> Result<IncludeDir, String> {
        match self {
            Files::Dir(dir) => IncludeDir::read(&dir.join(name)),
            Files::Given(_) => Err("only a manifest read from a file takes include folders".into()),
        }
    }
}

/// Parse manifest text, reading the files it names from `files`.
pub fn parse(origin: &str, text: &str, files: Files<'_>) -> Result<Manifest, ManifestError> {
    let err = |field: String, problem: String| ManifestError {
        origin: origin.to_string(),
        field,
        problem,
    };
    if let Some(field) = first_placeholder(text) {
        return Err(err(
            field,
            format!("fill in {PLACEHOLDER} (written by klab init)"),
        ));
    }
    let raw: RawManifest =
        toml::from_str(text).map_err(|e| err("toml".into(), toml_problem(text, &e)))?;
    if raw.kernels.is_empty() {
        return Err(err("kernel".into(), "no [[kernel]] entries".into()));
    }
    // The extension decides what the file is, before it is read.
    let kind = Source::kind_of(&raw.source).map_err(|p| err("source".into(), p))?;
    let (source_path, bytes) = files
        .source(&raw.source)
        .map_err(|p| err("source".into(), p))?;
    let source =
        Source::from_file(&raw.source, kind, bytes).map_err(|p| err("source".into(), p))?;
    if !raw.include_dirs.is_empty() && source.module_kind().is_some() {
        return Err(err(
            "include_dirs".into(),
            format!(
                "{} is {}: it is not compiled, so include folders do not apply",
                raw.source,
                source.describe()
            ),
        ));
    }
    let include_dirs = raw
        .include_dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            files
                .include_dir(d)
                .map_err(|p| err(format!("include_dirs[{i}]"), p))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let file_name = Path::new(&raw.source)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("kernel.cu")
        .to_string();
    let (program, headers) = match (&files, source.text()) {
        (Files::Dir(dir), Some(text)) => {
            let path = std::path::absolute(dir.join(&raw.source))
                .map_err(|e| err("source".into(), format!("{}: {e}", raw.source)))?;
            let headers = ReachedHeaders::of(&path, text, &include_dirs);
            (path.to_string_lossy().into_owned(), Some(headers))
        }
        _ => (file_name, None),
    };
    let mut names = BTreeSet::new();
    let mut kernels = Vec::new();
    for (i, k) in raw.kernels.into_iter().enumerate() {
        if !names.insert(k.name.clone()) {
            return Err(err(
                format!("kernel[{i}].name"),
                format!("'{}' is declared twice", k.name),
            ));
        }
        let decl = kernel_decl(i, k, &raw.ops, &files, &source, &raw.source)
            .map_err(|(field, problem)| err(field, problem))?;
        kernels.push(decl);
    }
    Ok(Manifest {
        origin: origin.to_string(),
        source_path,
        program,
        source,
        include_dirs,
        headers,
        kernels,
    })
}

/// The `i`th `[[kernel]]` of a manifest over `source` (the file `file`): its name, its
/// entry or launches, and its operation, built in or declared.
fn kernel_decl(
    i: usize,
    mut k: RawKernel,
    ops: &BTreeMap<String, crate::declared::DeclaredOpSpec>,
    files: &Files<'_>,
    source: &Source,
    file: &str,
) -> Result<KernelDecl, (String, String)> {
    let f = |name: &str| format!("kernel[{i}].{name}");
    if !is_identifier(&k.name.replace('-', "_")) {
        return Err((f("name"), format!("'{}' is not a usable name", k.name)));
    }
    let generated_by = match k.generated_by.take() {
        Some(g) => Some(
            GeneratedBySpec::applies_to(source, file)
                .and_then(|()| g.resolve(files))
                .map_err(|problem| (f("generated_by"), problem))?,
        ),
        None => None,
    };
    let mut decl = kernel_decl_of(i, k, ops, files, source, file)?;
    decl.generated_by = generated_by;
    Ok(decl)
}

/// The kernel of [`kernel_decl`], all but what generated its module.
fn kernel_decl_of(
    i: usize,
    mut k: RawKernel,
    ops: &BTreeMap<String, crate::declared::DeclaredOpSpec>,
    files: &Files<'_>,
    source: &Source,
    file: &str,
) -> Result<KernelDecl, (String, String)> {
    let f = |name: &str| format!("kernel[{i}].{name}");
    if !k.options.is_empty() && source.module_kind().is_some() {
        return Err((
            f("options"),
            format!(
                "{} is {}: it is not compiled, so NVRTC options do not apply",
                file,
                source.describe()
            ),
        ));
    }
    // A header folder or file given as an option is searched by NVRTC but not hashed into
    // the compile cache's key (an edited header would be served stale): include_dirs are.
    if let Some(o) = k.options.iter().find(|o| {
        ["-I", "--include-path", "--pre-include", "-include"]
            .iter()
            .any(|p| o.starts_with(p))
    }) {
        return Err((
            f("options"),
            format!(
                "'{o}' names headers klab would not hash into the compile cache's key: name the folder in include_dirs (an included file, by #include in the source)"
            ),
        ));
    }
    // A sequence's entries are its launches'; every other kernel names its own.
    let launched = match (k.launches.take(), k.entry.take()) {
        (Some(_), Some(_)) => {
            return Err((
                f("entry"),
                "a kernel with launches names each launch's entry, not its own".into(),
            ))
        }
        (Some(launches), None) => Launched::Sequence(launches),
        (None, Some(e)) => Launched::Entry(
            checked_entry(&e, source, file).map_err(|problem| (f("entry"), problem))?,
        ),
        (None, None) => {
            return Err((
                f("entry"),
                "give the kernel's entry, or launches = [...] for a sequence of kernels".into(),
            ))
        }
    };
    let operation = match k.operation.as_str() {
        "copy" => OpKind::Copy,
        "transpose" => OpKind::Transpose,
        "triad" => OpKind::Triad,
        "reduce-sum" | "reduce_sum" | "sum" => OpKind::ReduceSum,
        "declared" => OpKind::Declared,
        other => {
            return Err((
                f("operation"),
                format!(
                    "unknown operation '{other}' (copy, transpose, triad, reduce-sum, or declared with a [kernel.op] table)"
                ),
            ))
        }
    };
    if operation == OpKind::Declared {
        return declared_kernel(k, launched, ops, files, source, file, &f);
    }
    let Launched::Entry(entry) = launched else {
        return Err((
            f("launches"),
            format!("a sequence of launches computes a declared operation, not {operation}"),
        ));
    };
    builtin_kernel(k, entry, operation, source, file, &f)
}

/// A kernel of a built-in operation (copy, transpose, triad, reduce-sum): its parameters by
/// role, its launch, and the operation's contract.
fn builtin_kernel(
    k: RawKernel,
    entry: Entry,
    operation: OpKind,
    source: &Source,
    file: &str,
    f: &dyn Fn(&str) -> String,
) -> Result<KernelDecl, (String, String)> {
    if k.launch.is_some() {
        return Err((
            f("launch"),
            "launch overrides a declared operation's launch; this kernel gives block and elements_per_block".into(),
        ));
    }
    if k.op.is_some() {
        return Err((
            f("op"),
            format!(
                "[kernel.op] declares an operation; set operation = \"declared\" (not {operation})"
            ),
        ));
    }
    let (Some(block_dims), Some(elements_per_block)) =
        (k.block.clone(), k.elements_per_block.clone())
    else {
        let missing = if k.block.is_none() {
            "block"
        } else {
            "elements_per_block"
        };
        return Err((f(missing), format!("{operation} needs {missing}")));
    };
    let params = builtin_params(&k.params, operation, f)?;
    if let Some(r) = LibraryRoutine::from_entry(&entry.name) {
        if operation != r.operation() {
            return Err((
                f("operation"),
                format!("{} computes {}, not {operation}", r.entry(), r.operation()),
            ));
        }
        if params != LibraryRoutine::params() {
            return Err((
                f("params"),
                format!("{} takes [\"out\", \"in\", \"n:i32\"]", r.entry()),
            ));
        }
    }
    let block = match block_dims[..] {
        [x] => Dim3::new(x, 1, 1),
        [x, y] => Dim3::new(x, y, 1),
        [x, y, z] => Dim3::new(x, y, z),
        _ => return Err((f("block"), "give 1 to 3 dimensions".into())),
    };
    if let Some(problem) = crate::plan::block_problem(block) {
        return Err((f("block"), problem));
    }
    if elements_per_block.len() != operation.dims() || elements_per_block.contains(&0) {
        return Err((
            f("elements_per_block"),
            format!("{operation} needs {} positive value(s)", operation.dims()),
        ));
    }
    let grid_rounding = match k.grid_rounding.as_deref() {
        None | Some("up") => Rounding::Up,
        Some("down") => Rounding::Down,
        Some(o) => return Err((f("grid_rounding"), format!("'{o}' is not up or down"))),
    };
    let equality = match k.equality.as_deref() {
        None => crate::ops::transpose::Equality::Bitwise,
        Some(e) => match crate::ops::transpose::Equality::parse(e) {
            Some(eq) if matches!(operation, OpKind::Copy | OpKind::Transpose) => eq,
            Some(_) => {
                return Err((
                    f("equality"),
                    format!("only copy and transpose take an equality, not {operation}"),
                ))
            }
            None => {
                return Err((
                    f("equality"),
                    format!("'{e}' is not bitwise or nan-any-payload"),
                ))
            }
        },
    };
    for (field, label) in [("known_broken", &k.known_broken), ("exploit", &k.exploit)] {
        if label.as_ref().is_some_and(|b| b.trim().is_empty()) {
            return Err((f(field), "give the reason".into()));
        }
    }
    if let Some(p) = &k.prediction {
        if p.trim().is_empty() || p.contains(['\n', '\r']) {
            return Err((
                f("prediction"),
                "give one non-empty line (reports print it in a table cell)".into(),
            ));
        }
    }
    let op = crate::declared::builtin::declare(&crate::declared::builtin::Contract {
        operation,
        params: &params,
        block,
        elements_per_block: &elements_per_block,
        grid_rounding,
        dynamic_shared_bytes: k.dynamic_shared_bytes,
        equality,
    })
    .map_err(|(field, problem)| (f(&field), problem))?;
    // The roles in the kernel's order, read against its signature: an output bound to a
    // `const` pointer is a swap of two roles.
    let sig = entry.readable.as_ref();
    if let Some(problem) =
        sig.and_then(|n| source.signature_problem(n, &op.params, &op, file, SignatureCheck::Roles))
    {
        return Err((f("params"), problem));
    }
    Ok(KernelDecl {
        name: k.name,
        entry: entry.name,
        operation,
        options: k.options,
        known_broken: k.known_broken,
        exploit: k.exploit,
        prediction: k.prediction.map(|p| p.trim().to_string()),
        generated_by: None,
        op: std::sync::Arc::new(op),
    })
}

/// A built-in operation's parameters, each a role it takes (a buffer, or a scalar with its
/// type: `n:i32`), each once, and every role there.
fn builtin_params(
    given: &[String],
    operation: OpKind,
    f: &dyn Fn(&str) -> String,
) -> Result<Vec<Param>, (String, String)> {
    let (buffers, scalars) = operation.roles();
    let mut params = Vec::new();
    let mut seen = BTreeSet::new();
    for (j, p) in given.iter().enumerate() {
        let pf = f(&format!("params[{j}]"));
        let (role, ty) = match p.split_once(':') {
            Some((r, t)) => (r.trim(), Some(t.trim())),
            None => (p.trim(), None),
        };
        if !seen.insert(role.to_string()) {
            return Err((pf, format!("role '{role}' appears twice")));
        }
        if buffers.contains(&role) {
            if ty.is_some() {
                return Err((pf, format!("'{role}' is a buffer; it takes no type")));
            }
            params.push(Param::Buffer(role.to_string()));
        } else if let Some((_, want)) = scalars.iter().find(|(r, _)| *r == role) {
            let Some(t) = ty else {
                return Err((
                    pf,
                    format!(
                        "scalar '{role}' needs a type, e.g. '{role}:{}'",
                        format!("{want:?}").to_lowercase()
                    ),
                ));
            };
            match ScalarType::parse(t) {
                Some(t) if t == *want => params.push(Param::Scalar(role.to_string(), t)),
                Some(_) | None => {
                    return Err((
                        pf,
                        format!(
                            "'{role}' must be {} for {operation}, got '{t}'",
                            format!("{want:?}").to_lowercase()
                        ),
                    ))
                }
            }
        } else {
            return Err((
                pf,
                format!(
                    "'{role}' is not a parameter of {operation} (expected {})",
                    buffers
                        .iter()
                        .copied()
                        .chain(scalars.iter().map(|(r, _)| *r))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    for role in buffers.iter().chain(scalars.iter().map(|(r, _)| r)) {
        if !seen.contains(*role) {
            return Err((
                f("params"),
                format!("{operation} needs a '{role}' parameter"),
            ));
        }
    }
    Ok(params)
}

/// How a kernel is launched, as its manifest gives it: its own entry, or a sequence.
enum Launched {
    Entry(Entry),
    Sequence(Vec<crate::declared::launches::LaunchSpec>),
}

/// An entry checked against the source it must be found in.
struct Entry {
    /// As the manifest gives it (`scale<float, 128>`, `@cublasSgeam`).
    name: String,
    /// The function of the source whose parameters can be read (none for a library
    /// routine).
    readable: Option<Readable>,
}

/// A kernel of the source whose parameters klab reads: looked up by `lookup` (the entry,
/// or a template instance's template), read as the instance of `arguments` for a template.
struct Readable {
    /// As the manifest gives it, for messages.
    entry: String,
    lookup: String,
    arguments: Option<Vec<String>>,
}

/// `entry`, checked: a library routine klab knows, or a C identifier or template instance
/// that `source` (the file `file`) declares as klab can load it.
fn checked_entry(entry: &str, source: &Source, file: &str) -> Result<Entry, String> {
    let library = LibraryRoutine::from_entry(entry);
    if entry.starts_with('@') && library.is_none() {
        return Err(format!(
            "'{entry}' is not a library routine klab knows ({})",
            LibraryRoutine::ALL
                .iter()
                .map(|r| r.entry())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // A template instance is compiled by name (NVRTC lowers it to its mangled symbol);
    // the source must then hold the template's name.
    let template = template_name(entry);
    // One of several overloads, by its parameter types: `k(const float *, int)`.
    let overload = crate::signature::overload_entry(entry).map(|(name, _)| name);
    let name = overload.unwrap_or(entry);
    let qualified = name.contains("::") && name.split("::").all(is_identifier);
    if library.is_none()
        && (template.is_none() || overload.is_some())
        && !is_identifier(name)
        && !qualified
    {
        return Err(format!(
            "'{entry}' is not a C identifier, a qualified name such as ops::scale, a template instance such as scale<float, 128> or an overload such as scale(const float *, int)"
        ));
    }
    if overload.is_some() && source.module_kind().is_some() {
        return Err(format!(
            "{file} is {}: its symbols are not overloaded by name; give the kernel's symbol (its mangled name, which cuobjdump -symbols lists)",
            source.describe()
        ));
    }
    if (template.is_some() || qualified) && source.module_kind().is_some() {
        return Err(format!(
            "{file} is {}: {}; give the {} symbol (its mangled name, which cuobjdump -symbols lists)",
            source.describe(),
            if qualified {
                "it has no namespaces to look a name up in"
            } else {
                "it has no template to instantiate"
            },
            if qualified { "kernel's" } else { "instance's" }
        ));
    }
    // The name as the source declares it, namespace and all (`ops::scale` of
    // `ops::scale<float>`): the lookup reads namespaces.
    let named = template.unwrap_or(entry);
    if library.is_none() {
        if let Some(problem) = source.entry_problem(named, template.is_some(), file) {
            return Err(problem);
        }
    }
    let arguments = klab_core::text::template_id(entry)
        .map(|(_, args)| args.into_iter().map(String::from).collect());
    Ok(Entry {
        name: entry.to_string(),
        readable: library.is_none().then(|| Readable {
            entry: entry.to_string(),
            lookup: named.to_string(),
            arguments,
        }),
    })
}

/// A `declared` kernel: `[kernel.op]` checked against its parameters; the built-in
/// operations' launch fields are refused (the op's grid and block replace them).
fn declared_kernel(
    k: RawKernel,
    launched: Launched,
    ops: &BTreeMap<String, crate::declared::DeclaredOpSpec>,
    files: &Files<'_>,
    source: &Source,
    file: &str,
    f: &dyn Fn(&str) -> String,
) -> Result<KernelDecl, (String, String)> {
    for (given, name) in [
        (k.block.is_some(), "block"),
        (k.elements_per_block.is_some(), "elements_per_block"),
        (k.grid_rounding.is_some(), "grid_rounding"),
        (k.equality.is_some(), "equality"),
        (k.dynamic_shared_bytes != 0, "dynamic_shared_bytes"),
    ] {
        if given {
            return Err((
                f(name),
                "a declared operation gives this in [kernel.op] (grid, block, dynamic_shared_bytes, compare), not here".to_string(),
            ));
        }
    }
    let (spec, at) = match k.op {
        None => {
            return Err((
                f("op"),
                "operation = \"declared\" needs a [kernel.op] table (sizes, buffers, grid, block, useful_bytes and reference) or op = \"NAME\" of an [ops.NAME] table".into(),
            ))
        }
        Some(RawOp::Inline(spec)) => (*spec, f("op")),
        Some(RawOp::Named(name)) => match ops.get(&name) {
            Some(spec) => (spec.clone(), format!("ops.{name}")),
            None => {
                return Err((
                    f("op"),
                    format!(
                        "no [ops.{name}] table in this manifest ({})",
                        if ops.is_empty() {
                            "it has none".to_string()
                        } else {
                            ops.keys().cloned().collect::<Vec<_>>().join(", ")
                        }
                    ),
                ))
            }
        },
    };
    let mut spec = match k.launch {
        Some(l) if matches!(launched, Launched::Sequence(_)) && l.sets_the_launch() => {
            return Err((
                f("launch"),
                "this kernel's launches give their own grid, block and dynamic shared memory; launch here gives only sizes".into(),
            ))
        }
        Some(l) => l
            .apply(spec)
            .map_err(|(field, problem)| (f(&format!("launch.{field}")), problem))?,
        None => spec,
    };
    resolve_case_inputs(&mut spec, files, &at)?;
    let op =
        spec.validate(&k.params)
            .map_err(|(field, problem)| match field.starts_with("params") {
                // The parameter list is the kernel's, wherever its operation is declared.
                true => (
                    f(&field),
                    problem.replace("[kernel.op]", &format!("[{at}]")),
                ),
                false => (format!("{at}.{field}"), problem),
            })?;
    let (entry, op) = match launched {
        Launched::Sequence(launches) => declared_sequence(op, launches, source, file, &at, f)?,
        Launched::Entry(entry) => declared_single(op, entry, source, file, &at, f)?,
    };
    for (field, label) in [("known_broken", &k.known_broken), ("exploit", &k.exploit)] {
        if label.as_ref().is_some_and(|b| b.trim().is_empty()) {
            return Err((f(field), "give the reason".into()));
        }
    }
    Ok(KernelDecl {
        name: k.name,
        entry,
        operation: OpKind::Declared,
        options: k.options,
        known_broken: k.known_broken,
        exploit: k.exploit,
        prediction: k.prediction.map(|p| p.trim().to_string()),
        generated_by: None,
        op: std::sync::Arc::new(op),
    })
}

/// The paths of `spec`'s user data, resolved against the manifest's folder; each must be a
/// file (`at` names the operation's table in an error).
fn resolve_case_inputs(
    spec: &mut crate::declared::DeclaredOpSpec,
    files: &Files<'_>,
    at: &str,
) -> Result<(), (String, String)> {
    let Files::Dir(dir) = files else {
        return Ok(());
    };
    for (i, c) in spec.cases.iter_mut().enumerate() {
        for (name, path) in c.inputs.iter_mut() {
            let p = dir.join(&*path);
            if !p.is_file() {
                return Err((
                    format!("{at}.cases[{i}].inputs.{name}"),
                    format!("{} is not a file", p.display()),
                ));
            }
            *path = p.display().to_string();
        }
    }
    Ok(())
}

/// A declared operation computed by one launch of `entry`: the operation's own launch,
/// its parameters checked against the entry's `__global__` signature.
fn declared_single(
    op: crate::declared::DeclaredOp,
    entry: Entry,
    source: &Source,
    file: &str,
    at: &str,
    f: &dyn Fn(&str) -> String,
) -> Result<(String, crate::declared::DeclaredOp), (String, String)> {
    if op.spec.grid.is_empty() || op.spec.block.is_empty() {
        return Err((
            format!("{at}.grid"),
            "give the operation's grid and block, or launches = [...] on each kernel".into(),
        ));
    }
    let sig = entry.readable.as_ref();
    if let Some(problem) =
        sig.and_then(|n| source.signature_problem(n, &op.params, &op, file, SignatureCheck::Full))
    {
        return Err((f("params"), problem));
    }
    Ok((entry.name, op))
}

/// A declared operation computed by `launches` in order: each entry checked against the
/// source and each launch's parameters against its `__global__` signature. Gives the
/// name receipts and reports use for the sequence (its entries joined by ` + `).
fn declared_sequence(
    op: crate::declared::DeclaredOp,
    launches: Vec<crate::declared::launches::LaunchSpec>,
    source: &Source,
    file: &str,
    at: &str,
    f: &dyn Fn(&str) -> String,
) -> Result<(String, crate::declared::DeclaredOp), (String, String)> {
    let mut entries = Vec::with_capacity(launches.len());
    for (i, l) in launches.iter().enumerate() {
        let field = f(&format!("launches[{i}].entry"));
        if LibraryRoutine::from_entry(&l.entry).is_some() {
            return Err((
                field,
                "a library routine is a kernel of its own, not a launch of a sequence".into(),
            ));
        }
        entries.push(checked_entry(&l.entry, source, file).map_err(|p| (field, p))?);
    }
    // A launch's own fields are the kernel's; a size's or scalar's are the operation's.
    let op = op.with_sequence(launches).map_err(|(field, problem)| {
        let problem = problem.replace("[kernel.op]", &format!("[{at}]"));
        match field.starts_with("launches") {
            true => (f(&field), problem),
            false => (format!("{at}.{field}"), problem),
        }
    })?;
    let mut written = Some(BTreeSet::new());
    for (i, (entry, l)) in entries.iter().zip(&op.sequence).enumerate() {
        let sig = entry.readable.as_ref();
        if let Some(problem) = sig
            .and_then(|n| source.signature_problem(n, &l.params, &op, file, SignatureCheck::Full))
        {
            return Err((f(&format!("launches[{i}].params")), problem));
        }
        let by_this = sig.and_then(|n| source.written_buffers(n, &l.params));
        written = written.zip(by_this).map(|(mut all, more)| {
            all.extend(more);
            all
        });
    }
    // Every output is written by some launch (where every signature could be read).
    let unwritten = written.and_then(|w| {
        op.spec
            .buffers
            .iter()
            .find(|(name, b)| b.role != crate::declared::Role::In && !w.contains(name.as_str()))
    });
    if let Some((name, b)) = unwritten {
        return Err((
            f("launches"),
            format!(
                "'{name}' is declared {}, but every launch takes it through a const pointer: none writes it",
                b.role.name()
            ),
        ));
    }
    let name = entries
        .iter()
        .map(|e| e.name.as_str())
        .collect::<Vec<_>>()
        .join(" + ");
    Ok((name, op))
}

/// Load a manifest file; its source is resolved relative to the manifest's folder.
pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
    let origin = path.display().to_string();
    let text = read_text(path, Input::MANIFEST).map_err(|e| ManifestError {
        origin: origin.clone(),
        field: FILE_FIELD.into(),
        problem: e.to_string(),
    })?;
    let dir: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse(&origin, &text, Files::Dir(&dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::stand_in_source;

    fn resolve(spec: &str) -> Result<(Manifest, KernelDecl), crate::registry::RegistryError> {
        crate::registry::resolve(spec, crate::registry::Scope::Default)
    }

    const SRC: &str = "extern \"C\" __global__ void k(float* o, const float* i, int n) {}";

    fn parse_one(body: &str) -> Result<Manifest, ManifestError> {
        parse(
            "m.toml",
            &format!("source = \"k.cu\"\n[[kernel]]\n{body}"),
            Files::Given(&|_| Ok(("k.cu".into(), SRC.into()))),
        )
    }

    const OK: &str = "name = \"k\"\nentry = \"k\"\noperation = \"transpose\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [32, 8]\nelements_per_block = [32, 32]\n";

    #[test]
    fn a_placeholder_left_by_klab_init_is_named_by_its_field_in_document_order() {
        let declared = |op: &str, params: &str| {
            parse(
                "m.toml",
                &format!(
                    "source = \"k.cu\"\n[[kernel]]\nname = \"k\"\nentry = \"k\"\noperation = \"declared\"\nparams = {params}\n\n[kernel.op]\n{op}"
                ),
                Files::Given(&|_| Ok(("k.cu".into(), SRC.into()))),
            )
        };
        let op = "grid = [\"n\", \"TODO\"]\nblock = [\"TODO\"]\nuseful_bytes = \"TODO\"\nscalars.a = { type = \"f32\", values = [\"TODO\"] }\n";
        // Document order: grid comes before block (a sorted walk would name block first).
        let e = declared(op, "[\"o\", \"i\", \"n:i32\"]").unwrap_err();
        assert_eq!(e.field, "kernel[0].op.grid[1]");
        assert_eq!(
            e.to_string(),
            "manifest m.toml: kernel[0].op.grid[1]: fill in TODO (written by klab init)"
        );
        let e = declared(op, "[\"o\", \"i\", \"n:TODO\"]").unwrap_err();
        assert_eq!(e.field, "kernel[0].params[2]", "a parameter's type");
        let e = declared(
            "scalars.a = { type = \"f32\", values = [\"TODO\"] }\n",
            "[\"o\"]",
        )
        .unwrap_err();
        assert_eq!(
            e.field, "kernel[0].op.scalars.a.values[0]",
            "where a number goes"
        );
        // Text that merely mentions it is no placeholder.
        assert!(!is_placeholder("TODO: later") && !is_placeholder("todo"));
        // Only a parameter's type takes the `name:TODO` form: a label may end in it.
        assert_eq!(first_placeholder("known_broken = \"fix: TODO\"\n"), None);
        assert_eq!(
            first_placeholder("[[kernel]]\nparams = [\"n:TODO\"]\n").as_deref(),
            Some("kernel[0].params[0]")
        );
        assert!(is_placeholder(" TODO ") && is_placeholder("ref.c:TODO"));
        let m = parse_one(&format!("{OK}known_broken = \"TODO: explain\"\n")).unwrap();
        assert_eq!(m.kernels[0].known_broken.as_deref(), Some("TODO: explain"));
    }

    #[test]
    fn library_routines_are_declared_by_entry_and_checked() {
        let m = parse_one(&OK.replace("entry = \"k\"", "entry = \"@cublasSgeam\"")).unwrap();
        assert_eq!(
            LibraryRoutine::from_entry(&m.kernels[0].entry),
            Some(LibraryRoutine::CublasSgeam)
        );
        let e = parse_one(&OK.replace("entry = \"k\"", "entry = \"@cuMemcpyDtoD\"")).unwrap_err();
        assert_eq!(e.field, "kernel[0].operation");
        assert!(e.problem.contains("computes copy, not transpose"), "{e}");
        let e = parse_one(&OK.replace("entry = \"k\"", "entry = \"@cublasDgeam\"")).unwrap_err();
        assert_eq!(e.field, "kernel[0].entry");
        assert!(e.problem.contains("@cuMemcpyDtoD, @cublasSgeam"), "{e}");
        let e = parse_one(
            &OK.replace("entry = \"k\"", "entry = \"@cublasSgeam\"")
                .replace(
                    "[\"out\", \"in\", \"n:i32\"]",
                    "[\"in\", \"out\", \"n:i32\"]",
                ),
        )
        .unwrap_err();
        assert_eq!(e.field, "kernel[0].params");
        let (_, memcpy) = resolve("memcpy").unwrap();
        assert_eq!(memcpy.operation, OpKind::Copy);
        let (_, sgeam) = resolve("sgeam").unwrap();
        assert_eq!(sgeam.entry, "@cublasSgeam");
        let (_, t4) = resolve("vec4_t4").unwrap();
        assert_eq!(plan(&t4, 8193).grid, Dim3::new(257, 65, 1));
    }

    /// A built-in contract's launch at size n.
    fn plan(decl: &KernelDecl, n: i64) -> crate::plan::LaunchPlan {
        decl.launches()[0]
            .plan(&klab_core::expr::Shape::from([("n".into(), n)]))
            .unwrap()
    }

    #[test]
    fn builtins_parse_and_plans_follow_from_n() {
        let mutants = &crate::registry::registry()
            .namespace("mutants")
            .unwrap()
            .manifest;
        assert!(
            mutants.kernels.len() >= 10 && mutants.kernels.iter().all(|k| k.known_broken.is_some())
        );
        let (_, padded) = resolve("padded").unwrap();
        assert_eq!(padded.entry, "transpose_padded");
        assert_eq!(plan(&padded, 33).grid, Dim3::new(2, 2, 1));
        let (_, guarded) = resolve("reduce_guarded").unwrap();
        let (_, drop) = resolve("reduce_drop_tail").unwrap();
        assert_eq!(plan(&guarded, 611).grid.x, 3);
        assert_eq!(plan(&drop, 611).grid.x, 2);
        assert_eq!(
            plan(&drop, 255).grid.x,
            0,
            "drop-tail launches nothing below 256"
        );
        assert!(drop.known_broken.is_some() && guarded.known_broken.is_none());
        let (_, triad) = resolve("triad_f32").unwrap();
        assert_eq!(
            triad.op.params[4],
            crate::declared::OpParam::Scalar("alpha".into(), klab_core::dtype::Dtype::F32)
        );
        assert_eq!(resolve("transpose_tiled").unwrap().1.name, "tiled");
        assert!(resolve("nope")
            .unwrap_err()
            .to_string()
            .contains("unknown kernel 'nope'"));
    }

    /// Header folders and files given as options would be searched but not hashed (an
    /// edited header served stale from the cache): refused, pointing at include_dirs.
    #[test]
    fn include_options_are_refused_for_include_dirs() {
        for o in [
            "-I/opt/inc",
            "-Iinc",
            "--include-path=inc",
            "--pre-include=a.h",
            "-include",
        ] {
            let body = OK.replace(
                "name = \"k\"",
                &format!("name = \"k\"\noptions = [\"{o}\"]"),
            );
            let e = parse_one(&body).unwrap_err();
            assert_eq!(e.field, "kernel[0].options", "{o}");
            assert!(e.problem.contains("include_dirs"), "{o}: {e}");
        }
        let body = OK.replace(
            "name = \"k\"",
            "name = \"k\"\noptions = [\"-DTILE=32\", \"--use_fast_math\"]",
        );
        assert!(parse_one(&body).is_ok());
    }

    #[test]
    fn a_good_manifest_parses() {
        let m = parse_one(OK).unwrap();
        assert_eq!(plan(&m.kernels[0], 64).block, Dim3::new(32, 8, 1));
        assert_eq!(m.program, "k.cu");
    }

    /// A declared operation over `x` (dtype X), `y`, `n` and `a`, for kernel `ENTRY` of k.cu.
    const DECLARED_XY: &str = r#"
source = "k.cu"
[[kernel]]
name = "k"
entry = "ENTRY"
operation = "declared"
params = ["x", "y", "n:i32", "a:f32"]
[kernel.op]
grid = ["n"]
block = ["32"]
useful_bytes = "4 * n"
reference = { c = "ref.c:r" }
sizes.n = {}
buffers.x = { dtype = "X", len = "n", role = "in" }
buffers.y = { dtype = "f32", len = "n", role = "out", compare = "bitwise" }
scalars.a = { type = "f32", values = [1.0] }
"#;

    /// [`DECLARED_XY`] over f32 buffers for kernel `entry` of the source `src`.
    fn declared_f32(src: &str, entry: &str) -> Result<Manifest, ManifestError> {
        parse(
            "m.toml",
            &DECLARED_XY
                .replace("ENTRY", entry)
                .replace("\"X\"", "\"f32\""),
            Files::Given(&|_| Ok(("k.cu".into(), src.into()))),
        )
    }

    /// [`DECLARED_XY`] of entry `k`, buffer x of dtype `x`, over the source `src`.
    fn declared_xy(x: &str, src: &str) -> Result<Manifest, ManifestError> {
        let src = src.to_string();
        parse(
            "m.toml",
            &DECLARED_XY
                .replace("ENTRY", "k")
                .replace("\"X\"", &format!("\"{x}\"")),
            Files::Given(&|_| Ok(("k.cu".into(), src.clone().into()))),
        )
    }

    #[test]
    fn a_declared_parameter_list_that_the_kernel_cannot_take_is_one_line_naming_both() {
        let parse_with = |x: &str, sig: &str| {
            declared_xy(x, &format!("extern \"C\" __global__ void k({sig}) {{}}"))
        };
        for (x, sig) in [
            ("f32", "const float *x, float *y, int n, float a"),
            // Constness of an input is the kernel's business; signedness is bits.
            (
                "f32",
                "float *x, float *__restrict__ y, unsigned n, float a",
            ),
            ("bf16", "const unsigned short *x, float *y, int n, float a"),
            ("bf16", "const __nv_bfloat16 *x, float *y, int n, float a"),
            ("f32", "const float4 *x, float2 *y, int n, float a"),
            ("f16", "const int4 *x, float *y, int n, float a"),
            ("u8", "const void *x, float *y, int n, float a"),
            ("f64", "const char *x, float *y, int n, float a"),
            ("f32", "const T *x, float *y, int n, float a"),
            ("f32", "const float *x, float *y, int32_t n, Scalar a"),
            // A float buffer's raw bits, as an integer of its width.
            ("f32", "const unsigned *x, float *y, int n, float a"),
            ("f32", "const int *x, float *y, int n, float a"),
            (
                "f64",
                "const unsigned long long *x, float *y, int n, float a",
            ),
        ] {
            assert!(
                parse_with(x, sig).is_ok(),
                "{x} {sig}: {:?}",
                parse_with(x, sig)
            );
        }
        for (x, sig, says) in [
            ("f32", "const float *x, float *y, int n", "passes 4 argument(s); k (k.cu line 1) takes 3"),
            ("f32", "float *y, const float *x, int n, float a", "'y' is declared out, but parameter 1"),
            ("f32", "const short *x, float *y, int n, float a", "'x' is declared f32, but parameter 0 of k (k.cu line 1), `const short *x` points to i16"),
            ("i32", "const float *x, float *y, int n, float a", "'x' is declared i32, but parameter 0 of k (k.cu line 1), `const float *x` points to f32"),
            ("f32", "const double *x, float *y, int n, float a", "points to f64"),
            ("f32", "const float *x, float y, int n, float a", "'y' is a buffer, but parameter 1"),
            ("f32", "const float *x, float *y, int *n, float a", "'n' is a value, but parameter 2"),
            ("f32", "const float *x, float *y, long long n, float a", "'n' is passed as i32, but"),
            ("f32", "const float *x, float *y, int n, double a", "'a' is passed as f32, but"),
            ("f32", "const float *x, float *y, int n, int a", "'a' is passed as f32, but"),
            ("f32", "const double4 *x, float *y, int n, float a", "points to double4"),
            // The same width, other values: a bf16 buffer is not a kernel's __half.
            ("bf16", "const __half *x, float *y, int n, float a", "'x' is declared bf16, but parameter 0 of k (k.cu line 1), `const __half *x` points to f16"),
            ("f16", "const __nv_bfloat16 *x, float *y, int n, float a", "points to bf16"),
            ("bf16", "const __half2 *x, float *y, int n, float a", "points to __half2"),
            // An array of device pointers is no flat buffer.
            ("f32", "const float **x, float *y, int n, float a", "'x' is a flat buffer, but parameter 0 of k (k.cu line 1), `const float **x` points to pointers"),
        ] {
            let e = parse_with(x, sig).unwrap_err();
            assert_eq!(e.field, "kernel[0].params", "{sig}: {e}");
            assert!(e.problem.contains(says), "{sig}: {e}");
            assert_eq!(e.to_string().lines().count(), 1, "{e}");
        }
    }

    /// An integer scalar may reach a narrower integer parameter (`unsigned char flag`) when
    /// every value it takes fits there: the driver copies the parameter's own bytes.
    #[test]
    fn a_narrower_integer_parameter_takes_a_scalar_whose_values_fit() {
        let with = |scalar: &str, ty: &str| {
            let src = format!(
                "extern \"C\" __global__ void k(const float *x, float *y, int n, {ty} a) {{}}"
            );
            parse(
                "m.toml",
                &DECLARED_XY
                    .replace("ENTRY", "k")
                    .replace("\"X\"", "\"f32\"")
                    .replace("scalars.a = { type = \"f32\", values = [1.0] }", scalar)
                    .replace("\"a:f32\"", "\"a:i32\""),
                Files::Given(&|_| Ok(("k.cu".into(), src.clone().into()))),
            )
        };
        with(
            "scalars.a = { type = \"i32\", values = [0, 1, 255] }",
            "unsigned char",
        )
        .unwrap();
        with(
            "scalars.a = { type = \"i32\", range = [-128, 127] }",
            "signed char",
        )
        .unwrap();
        with(
            "scalars.a = { type = \"i32\", values = [-3, 30000] }",
            "short",
        )
        .unwrap();
        with(
            "scalars.a = { type = \"i32\", range = [-0.5, 255.5] }",
            "unsigned char",
        )
        .unwrap();
        let e = with(
            "scalars.a = { type = \"i32\", values = [0, 256] }",
            "unsigned char",
        )
        .unwrap_err();
        assert!(
            e.problem.contains("'a' takes values past what parameter 3"),
            "{e}"
        );
        assert!(e.problem.contains("a u8, holds (0 to 255)"), "{e}");
        let e = with(
            "scalars.a = { type = \"i32\", values = [-1] }",
            "unsigned short",
        )
        .unwrap_err();
        assert!(e.problem.contains("(0 to 65535)"), "{e}");
    }

    /// A `bool` is one byte that must hold 0 or 1: a scalar of integers 0 and 1, a buffer of
    /// one-byte integers that klab fills with 0 and 1 only (apex's `bool per_tensor`, the
    /// Gaussian rasterizer's `bool *present`). A float, a wider buffer or a fill of other
    /// bytes is refused.
    #[test]
    fn a_bool_takes_zero_and_one_in_one_byte() {
        let with = |ty: &str, a: &str, x: &str, range: &str| {
            let src = format!(
                "extern \"C\" __global__ void k(const {ty} *x, float *y, int n, bool a) {{}}"
            );
            parse(
                "m.toml",
                &DECLARED_XY
                    .replace("ENTRY", "k")
                    .replace("\"X\"", &format!("\"{x}\"{range}"))
                    .replace("scalars.a = { type = \"f32\", values = [1.0] }", a)
                    .replace(
                        "\"a:f32\"",
                        &format!("\"a:{}\"", &a[a.find("type = \"").unwrap() + 8..][..3]),
                    ),
                Files::Given(&|_| Ok(("k.cu".into(), src.clone().into()))),
            )
        };
        let zero_one = "scalars.a = { type = \"i32\", values = [0, 1] }";
        with("bool", zero_one, "u8", ", range = [0, 1]").unwrap();
        with("bool", zero_one, "u8", ", range = [0, \"1\"]").unwrap();
        with(
            "bool",
            "scalars.a = { type = \"u32\", range = [0, 1] }",
            "i8",
            ", range = [0, 1]",
        )
        .unwrap();
        for (ty, a, x, range, says) in [
            ("float", "scalars.a = { type = \"f32\", values = [1.0] }", "f32", "", "'a' is passed as f32, but parameter 3 of k (k.cu line 1), `bool a` is a bool"),
            ("float", "scalars.a = { type = \"i32\", values = [0, 2] }", "f32", "", "'a' takes values past what parameter 3 of k (k.cu line 1), `bool a`, a bool, holds (0 and 1)"),
            ("bool", zero_one, "i32", "", "'x' is declared i32, but parameter 0 of k (k.cu line 1), `const bool *x` points to bool"),
            ("bool", zero_one, "u8", "", "'x' is read as bool by parameter 0"),
            ("bool", zero_one, "u8", ", range = [0, 2]", "give it range = [0, 1]"),
        ] {
            let e = with(ty, a, x, range).unwrap_err();
            assert_eq!(e.field, "kernel[0].params", "{e}");
            assert!(e.problem.contains(says), "{ty} {a} {x}: {e}");
        }
    }

    /// A template instance's parameters are read with the types its arguments give its
    /// type parameters (vLLM's and bitsandbytes' kernels are templates): another count, a
    /// buffer of another element or a scalar of another type is refused as for a plain
    /// kernel, and what no argument decides is taken on trust.
    #[test]
    fn a_template_instance_is_held_to_its_parameters() {
        let with = |src: &str, entry: &str, x: &str, params: &str| {
            // The scalar a as params types it, or none.
            let a = match params.split("\"a:").nth(1) {
                Some(t) => format!(
                    "scalars.a = {{ type = \"{}\", values = [1.0] }}",
                    &t[..t.find('"').unwrap()]
                ),
                None => String::new(),
            };
            parse(
                "m.toml",
                &DECLARED_XY
                    .replace("ENTRY", entry)
                    .replace("\"X\"", &format!("\"{x}\""))
                    .replace("scalars.a = { type = \"f32\", values = [1.0] }", &a)
                    .replace("[\"x\", \"y\", \"n:i32\", \"a:f32\"]", params),
                Files::Given(&|_| Ok(("k.cu".into(), src.to_string().into()))),
            )
        };
        let act = "template <typename scalar_t, typename F> __global__ void act(const scalar_t *__restrict__ x, scalar_t *__restrict__ y, const int n, const float a) {}\n";
        let xyna = r#"["x", "y", "n:i32", "a:f32"]"#;
        with(act, "act<float, relu<float>>", "f32", xyna).unwrap();
        with(act, "act<c10::Half, relu<c10::Half>>", "f16", xyna).unwrap_err();
        let e = with(act, "act<float, relu<float>>", "bf16", xyna).unwrap_err();
        assert!(
            e.problem.contains("'x' is declared bf16, but parameter 0 of act<float, relu<float>> (k.cu line 1), `const scalar_t *__restrict__ x` points to f32"),
            "{e}"
        );
        let kfunc = "template <typename T, int FUNC> __global__ void kfunc(const float *x, T *y, T a, long n) {}\n";
        // y's element is the instance's at::Half below: an f32 y is refused.
        let half = act.replace("const scalar_t *__restrict__ x", "const float *x");
        for (src, entry, params, says) in [
            (
                act,
                "act<float, relu<float>>",
                r#"["x", "y", "n:i32", "a:bf16"]"#,
                "'a' is passed as bf16, but parameter 3",
            ),
            (
                act,
                "act<float, relu<float>>",
                r#"["x", "y", "n:i32"]"#,
                "the manifest passes 3 argument(s)",
            ),
            (
                half.as_str(),
                "act<at::Half, relu>",
                xyna,
                "'y' is declared f32, but parameter 1",
            ),
            (
                kfunc,
                "kfunc<float, 0>",
                r#"["x", "y", "a:f16", "n:i64"]"#,
                "'a' is passed as f16, but parameter 2 of kfunc<float, 0>",
            ),
            (
                kfunc,
                "kfunc<float, 0>",
                r#"["x", "y", "a:f32", "n:i32"]"#,
                "'n' is passed as i32",
            ),
        ] {
            let e = with(src, entry, "f32", params).unwrap_err();
            assert!(e.problem.contains(says), "{entry} {params}: {e}");
        }
        // A default, and a type klab cannot read (taken on trust).
        let dflt = "template <int B, typename T = float> __global__ void k(const T *x, float *y, int n, float a) {}\n";
        with(dflt, "k<128>", "f32", xyna).unwrap();
        with(dflt, "k<128>", "f64", xyna).unwrap_err();
        with(dflt, "k<128, double>", "f64", xyna).unwrap();
        with(dflt, "k<128, Wrapper<float>>", "f64", xyna).unwrap();
        // A default naming an earlier parameter, a bool argument, and `>` in parentheses
        // inside a template argument, which closes nothing.
        let later = "template <typename T, typename U = T> __global__ void k(const T *x, float *y, int n, U a) {}\n";
        with(later, "k<float>", "f32", xyna).unwrap();
        let e = with(later, "k<float>", "f32", r#"["x", "y", "n:i32", "a:f64"]"#).unwrap_err();
        assert!(e.problem.contains("'a' is passed as f64"), "{e}");
        let flags =
            "template <typename T> __global__ void k(const T *x, float *y, int n, float a) {}\n";
        let e = with(flags, "k<bool>", "f32", xyna).unwrap_err();
        assert!(e.problem.contains("points to bool"), "{e}");
        let cond = "template <typename T, int N> __global__ void k(const T *x, std::conditional_t<(N > 2), float, double> *y, int n, float a) {}\n";
        with(cond, "k<float, 4>", "f32", xyna).unwrap();
        // A pack: the parameters after it are not counted.
        let pack = "template <typename... Ts> __global__ void k(const float *x, float *y, Ts... rest) {}\n";
        with(pack, "k<int, float>", "f32", xyna).unwrap();
    }

    /// A half-precision scalar (`__half alpha`, `__nv_bfloat16 beta`) is declared f16 or
    /// bf16, and only that format passes: the two have one width and different bits.
    #[test]
    fn a_half_precision_scalar_is_declared_in_its_own_format() {
        let with = |dtype: &str, values: &str, ty: &str| {
            let src = format!(
                "#include <cuda_fp16.h>\nextern \"C\" __global__ void k(const float *x, float *y, int n, {ty} a) {{}}"
            );
            parse(
                "m.toml",
                &DECLARED_XY
                    .replace("ENTRY", "k")
                    .replace("\"X\"", "\"f32\"")
                    .replace(
                        "scalars.a = { type = \"f32\", values = [1.0] }",
                        &format!("scalars.a = {{ type = \"{dtype}\", values = [{values}] }}"),
                    )
                    .replace("\"a:f32\"", &format!("\"a:{dtype}\"")),
                Files::Given(&|_| Ok(("k.cu".into(), src.clone().into()))),
            )
        };
        with("f16", "0.1, -2.5, 65504", "__half").unwrap();
        with("f16", "1.5", "half").unwrap();
        with("bf16", "0.1, 3e38", "__nv_bfloat16").unwrap();
        for (dtype, ty, says) in [
            ("f16", "__nv_bfloat16", "'a' is passed as f16, but parameter 3 of k (k.cu line 2), `__nv_bfloat16 a` is bf16"),
            ("bf16", "__half", "'a' is passed as bf16, but"),
            ("f16", "float", "'a' is passed as f16, but"),
            ("f32", "__half", "'a' is passed as f32, but"),
            ("f16", "short", "'a' is passed as f16, but"),
        ] {
            let e = with(dtype, "1.0", ty).unwrap_err();
            assert!(e.problem.contains(says), "{dtype} {ty}: {e}");
        }
        // 65520 rounds to infinity in an f16, as 3.4e38 * 1.01 does in a bf16.
        for (dtype, v, says) in [
            ("f16", "65520", "rounds past the largest f16 (6.5504e4)"),
            ("bf16", "3.4e38", "rounds past the largest bf16"),
        ] {
            let e = with(
                dtype,
                v,
                if dtype == "f16" {
                    "__half"
                } else {
                    "__nv_bfloat16"
                },
            )
            .unwrap_err();
            assert_eq!(e.field, "kernel[0].op.scalars.a", "{e}");
            assert!(e.problem.contains(says), "{e}");
        }
        // A range with no value of the type in it.
        let narrow = DECLARED_XY
            .replace("ENTRY", "k")
            .replace("\"X\"", "\"f32\"")
            .replace(
                "scalars.a = { type = \"f32\", values = [1.0] }",
                "scalars.a = { type = \"f16\", range = [0.1, 0.10001] }",
            )
            .replace("\"a:f32\"", "\"a:f16\"");
        let src = "extern \"C\" __global__ void k(const float *x, float *y, int n, __half a) {}";
        let e = parse(
            "m.toml",
            &narrow,
            Files::Given(&|_| Ok(("k.cu".into(), src.into()))),
        )
        .unwrap_err();
        assert!(
            e.problem
                .contains("range [0.1, 0.10001] holds no f16 value"),
            "{e}"
        );
        // A value that rounds to zero would run every case on 0.
        let e = with("f16", "1e-8", "__half").unwrap_err();
        assert!(e.problem.contains("1e-8 rounds to 0 in an f16"), "{e}");
        with("f16", "0.0, 6e-8", "__half").unwrap();
        // Libraries' half types by their namespace; a file's own `Half` is its own.
        with("f16", "1.0", "c10::Half").unwrap();
        with("bf16", "1.0", "cutlass::bfloat16_t").unwrap();
        with("f16", "1.0", "at::BFloat16").unwrap_err();
        let own = |prefix: &str, ty: &str, dtype: &str| {
            let src = format!("{prefix}\nextern \"C\" __global__ void k(const {ty} *x, float *y, int n, float a) {{}}");
            parse(
                "m.toml",
                &DECLARED_XY
                    .replace("ENTRY", "k")
                    .replace("\"X\"", &format!("\"{dtype}\"")),
                Files::Given(&|_| Ok(("k.cu".into(), src.clone().into()))),
            )
        };
        own("typedef float half_t;", "half_t", "f32").unwrap();
        own("using Half = unsigned short;", "Half", "u16").unwrap();
        own("", "cute::half_t", "f16").unwrap();
        own("", "cute::half_t", "f32").unwrap_err();
    }

    /// Public kernels a reviewer found refused: a function-like macro before the name,
    /// dead code of another signature, an `#ifdef` choosing between signatures or inside
    /// the parameter list. Each loads.
    #[test]
    fn macros_and_preprocessor_branches_of_public_kernels_load() {
        for src in [
            "#define LAUNCH_BOUNDS(n) __launch_bounds__(n)\nextern \"C\" __global__ void LAUNCH_BOUNDS(256) k(const float *x, float *y, int n, float a) {}",
            "#if 0\nextern \"C\" __global__ void k(const float *x, float *y, int n) {}\n#endif\nextern \"C\" __global__ void k(const float *x, float *y, int n, float a) {}",
            "#ifdef USE_DOUBLE\nextern \"C\" __global__ void k(const double *x, double *y, int n, double a) {}\n#else\nextern \"C\" __global__ void k(const float *x, float *y, int n, float a) {}\n#endif",
            "extern \"C\" __global__ void k(const float *x,\n#ifdef WITH_Z\n    float *z,\n#endif\n    float *y, int n, float a) {}",
        ] {
            let r = declared_xy("f32", src);
            assert!(r.is_ok(), "{src}: {:?}", r.err());
        }
        // What the branches leave readable is still held (a reviewer's double kernels
        // passed an f32 manifest): `#if 0` is dead, and the parameters before an `#ifdef`
        // are read.
        for src in [
            "extern \"C\" __global__ void k(const double *x, double *y,\n#if 0\n float *unused,\n#endif\n int n, float a) {}",
            "extern \"C\" __global__ void k(const double *x, double *y,\n#ifdef EXTRA\n float *z,\n#endif\n int n, float a) {}",
            "#ifndef G\n#define G\nextern \"C\" __global__ void k(const double *x, double *y, int n, double a) {}\n#endif",
        ] {
            let e = declared_xy("f32", src).unwrap_err();
            assert!(e.problem.contains("points to f64"), "{src}: {e}");
        }
    }

    /// A parameter of a `typedef` or `using` alias of a known type is checked as that type
    /// (it was taken on trust: an f64 buffer passed a `const real *` of floats), and a
    /// scalar bound to a vector passed by value is refused (its bits would be one number's).
    #[test]
    fn an_alias_of_a_known_type_and_a_vector_by_value_are_checked() {
        let parse_src = declared_xy;
        let real = "typedef float real;\nextern \"C\" __global__ void k(const real *x, real *y, int n, real a) {}";
        parse_src("f32", real).unwrap();
        let e = parse_src("f64", real).unwrap_err();
        assert!(e.problem.contains("'x' is declared f64, but parameter 0 of k (k.cu line 2), `const real *x` points to f32"), "{e}");
        let idx = "using idx_t = long long;\nextern \"C\" __global__ void k(const float *x, float *y, idx_t n, float a) {}";
        let e = parse_src("f32", idx).unwrap_err();
        assert!(
            e.problem.contains("'n' is passed as i32, but parameter 2"),
            "{e}"
        );
        // One name aliased to two types (in two scopes): taken on trust, as before.
        let twice = "namespace a { typedef float real; }\nnamespace b { typedef double real; }\nextern \"C\" __global__ void k(const real *x, float *y, int n, float a) {}";
        parse_src("f64", twice).unwrap();
        parse_src("f32", twice).unwrap();
        // An alias inside braces (a function's, a namespace's) is not the name a parameter
        // outside them sees (there: a header's typedef klab does not read): on trust.
        for scoped in [
            "__device__ double acc(double v) { using real = double; return v; }\nextern \"C\" __global__ void k(const real *x, float *y, int n, float a) {}",
            "namespace detail { typedef double real; }\nextern \"C\" __global__ void k(const real *x, float *y, int n, float a) {}",
        ] {
            parse_src("f32", scoped).unwrap();
        }
        let vector = "extern \"C\" __global__ void k(const float *x, float *y, int n, float2 a) {}";
        let e = parse_src("f32", vector).unwrap_err();
        assert!(e.problem.contains("'a' is passed as f32, but parameter 3 of k (k.cu line 1), `float2 a` is a float2, a vector"), "{e}");
    }

    #[test]
    fn kernels_share_a_declared_operation_by_name() {
        const SHARED: &str = r#"
source = "k.cu"
[ops.sum]
grid = ["ceil_div(n, 256)"]
block = ["256"]
useful_bytes = "4 * n"
reference = { c = "ref.c:sum_ref" }
sizes.n = {}
buffers.x = { dtype = "f32", len = "n", role = "in" }
buffers.y = { dtype = "f32", len = "1", role = "out", compare = { scaled-sum = "n" } }
[[kernel]]
name = "a"
entry = "k"
operation = "declared"
params = ["x", "y", "n:i32"]
op = "sum"
[[kernel]]
name = "b"
entry = "k"
operation = "declared"
params = ["x", "y", "n:i32"]
op = "sum"
known_broken = "b"
"#;
        let parse_one = |text: &str| {
            parse(
                "m.toml",
                text,
                Files::Given(&|_| Ok(("k.cu".into(), stand_in_source(SHARED).into()))),
            )
        };
        let m = parse_one(SHARED).unwrap();
        assert_eq!(m.kernels.len(), 2);
        assert_eq!(m.kernels[0].op, m.kernels[1].op);
        let e = parse_one(&SHARED.replacen("op = \"sum\"", "op = \"summ\"", 1)).unwrap_err();
        assert_eq!(e.field, "kernel[0].op");
        assert!(
            e.problem.contains("no [ops.summ]") && e.problem.contains("sum"),
            "{e}"
        );
        // A problem inside the shared table names it; a parameter problem names the kernel.
        let e =
            parse_one(&SHARED.replace("len = \"n\", role = \"in\"", "len = \"m\", role = \"in\""))
                .unwrap_err();
        assert_eq!(e.field, "ops.sum.buffers.x.len", "{e}");
        let e = parse_one(&SHARED.replacen("\"n:i32\"", "\"n\"", 1)).unwrap_err();
        assert_eq!(e.field, "kernel[0].params[2]", "{e}");
        // An unknown key inside a table still names the key and its line.
        let e =
            parse_one(&SHARED.replace("sizes.n = {}", "sizes.n = {}\nblok = [\"1\"]")).unwrap_err();
        assert!(
            e.problem.contains("blok") && e.problem.contains("line"),
            "{e}"
        );
    }

    #[test]
    fn a_prediction_is_kept_trimmed_and_is_optional() {
        assert_eq!(parse_one(OK).unwrap().kernels[0].prediction, None);
        let m = parse_one(&OK.replace(
            "name = \"k\"",
            "name = \"k\"\nprediction = \" 3,900 GB/s at 16384 \"",
        ))
        .unwrap();
        assert_eq!(
            m.kernels[0].prediction.as_deref(),
            Some("3,900 GB/s at 16384")
        );
    }

    /// A built-in operation holds a kernel's signature to its roles only: kernels that do
    /// the contract's work through other types load (a reviewer's cases, refused by the
    /// first form of the check), and an output behind `const` does not.
    #[test]
    fn a_builtin_kernel_is_held_to_its_roles_not_its_types() {
        let with = |src: &str| {
            let src = src.to_string();
            parse(
                "m.toml",
                &format!("source = \"k.cu\"\n[[kernel]]\n{OK}"),
                Files::Given(&|_| Ok(("k.cu".into(), src.clone().into_bytes()))),
            )
        };
        for ok in [
            "extern \"C\" __global__ void k(float* __restrict__ o, const float* __restrict__ i, const size_t n) {}",
            "extern \"C\" __global__ void k(unsigned* o, const unsigned* i, long long n) {}",
            "typedef float* fptr;\nextern \"C\" __global__ void k(fptr o, const float* i, int n) {}",
            "#define ARGS float* o, const float* i, int n\nextern \"C\" __global__ void k(ARGS) {}",
        ] {
            assert!(with(ok).is_ok(), "{ok}: {:?}", with(ok).err());
        }
        let e =
            with("extern \"C\" __global__ void k(const float* i, float* o, int n) {}").unwrap_err();
        assert_eq!(e.field, "kernel[0].params", "{e}");
        assert!(e.problem.contains("'out' is declared out"), "{e}");
    }

    #[test]
    fn every_bad_field_is_named() {
        let bad = |edit: &str, from: &str, field: &str, needle: &str| {
            let body = OK.replace(from, edit);
            let e = parse_one(&body).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.to_string().contains(needle), "{e}");
            assert!(!e.to_string().contains('\n'), "{e}");
        };
        bad(
            "operation = \"gemm\"",
            "operation = \"transpose\"",
            "kernel[0].operation",
            "unknown operation 'gemm'",
        );
        bad(
            "params = [\"out\", \"in\"]",
            "params = [\"out\", \"in\", \"n:i32\"]",
            "kernel[0].params",
            "needs a 'n' parameter",
        );
        bad(
            "params = [\"out\", \"in\", \"n\"]",
            "params = [\"out\", \"in\", \"n:i32\"]",
            "kernel[0].params[2]",
            "needs a type",
        );
        bad(
            "params = [\"out\", \"in\", \"n:f32\"]",
            "params = [\"out\", \"in\", \"n:i32\"]",
            "kernel[0].params[2]",
            "must be i32",
        );
        bad(
            "params = [\"out\", \"x\", \"n:i32\"]",
            "params = [\"out\", \"in\", \"n:i32\"]",
            "kernel[0].params[1]",
            "'x' is not a parameter of transpose",
        );
        bad(
            "params = [\"out\", \"out\", \"n:i32\"]",
            "params = [\"out\", \"in\", \"n:i32\"]",
            "kernel[0].params[1]",
            "appears twice",
        );
        // A built-in operation's roles are read against the signature as a declared
        // operation's are: `k(float* o, const float* i, int n)` takes its output first.
        bad(
            "params = [\"in\", \"out\", \"n:i32\"]",
            "params = [\"out\", \"in\", \"n:i32\"]",
            "kernel[0].params",
            "'out' is declared out, but parameter 1 of k (k.cu line 1), `const float *i` is read-only (const)",
        );
        bad(
            "block = [32, 0]",
            "block = [32, 8]",
            "kernel[0].block",
            "y is 0; every dimension is at least 1",
        );
        bad(
            "elements_per_block = [32]",
            "elements_per_block = [32, 32]",
            "kernel[0].elements_per_block",
            "2 positive",
        );
        bad(
            "entry = \"missing\"",
            "entry = \"k\"",
            "kernel[0].entry",
            "no __global__ function 'missing' in k.cu (it declares k)",
        );
        bad(
            "entry = \"k k\"",
            "entry = \"k\"",
            "kernel[0].entry",
            "not a C identifier",
        );
        bad(
            "name = \"k\"\ncolour = 1",
            "name = \"k\"",
            "toml",
            "unknown field `colour`",
        );
        bad("block = \"big\"", "block = [32, 8]", "toml", "invalid type");
        bad(
            "name = \"k\"\nprediction = \"  \"",
            "name = \"k\"",
            "kernel[0].prediction",
            "one non-empty line",
        );
        bad(
            "name = \"k\"\nprediction = \"fast\\nslow\"",
            "name = \"k\"",
            "kernel[0].prediction",
            "one non-empty line",
        );
        let e = parse(
            "m.toml",
            "source = \"k.cu\"\nkernel = []\n",
            Files::Given(&|_| Ok(("k".into(), SRC.into()))),
        )
        .unwrap_err();
        assert_eq!(e.field, "kernel");
        let e = parse(
            "m.toml",
            &format!("source = \"gone.cu\"\n[[kernel]]\n{OK}"),
            Files::Given(&|s| Err(format!("cannot read {s}"))),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "manifest m.toml: source: cannot read gone.cu"
        );
    }

    /// Plain C++ kernels are lowered by name, like template instances; extern "C" ones are
    /// their own symbols and are not asked for (the cache key of their modules stays).
    #[test]
    fn plain_cpp_kernels_are_name_expressions_and_extern_c_ones_are_not() {
        let src = "__global__ void plain(float *y, const float *x, int n) {}\n\
                   extern \"C\" __global__ void k(float *y, const float *x, int n) {}";
        let body = |name: &str, entry: &str| {
            format!(
                "[[kernel]]\n{}",
                OK.replace("name = \"k\"", &format!("name = \"{name}\""))
                    .replace("entry = \"k\"", &format!("entry = \"{entry}\""))
            )
        };
        let m = parse(
            "m.toml",
            &format!(
                "source = \"k.cu\"\n{}{}",
                body("a", "plain"),
                body("b", "k")
            ),
            Files::Given(&|_| Ok(("k.cu".into(), src.into()))),
        )
        .unwrap();
        assert_eq!(m.name_expressions(), ["plain"]);
    }

    /// Overloaded kernels (C++ allows two `k`s of other parameter types): a plain entry is
    /// refused in one line giving each overload's entry; an entry with the parameter types
    /// picks one, whose signature is checked, and is a name expression for NVRTC. A
    /// declaration followed by its definition, spelt otherwise, is one kernel, not two.
    #[test]
    fn an_overloaded_kernel_is_named_by_its_parameter_types() {
        let src = "__global__ void k(const float *x, float *y, int n, float a);\n\
                   __global__ void k(const float *__restrict__ in, float *out, int count, float b) {}\n\
                   __global__ void k(const double *x, double *y, int n, double a) {}\n\
                   __global__ void k(const float *x, float *y, long long n, float a) {}\n\
                   __global__ void one(float const *x, float *y, int n, float a);\n\
                   __global__ void one(const float *x, float *y, int n, float a) {}\n";
        let with = |entry: &str| declared_f32(src, entry);
        let e = with("k").unwrap_err();
        assert_eq!(e.field, "kernel[0].entry");
        assert!(
            e.problem.contains("'k' names 3 overloads (k.cu lines 2, 3, 4)")
                && e.problem.contains("\"k(const float *, float *, int, float)\" or \"k(const double *, double *, int, double)\" or \"k(const float *, float *, long long, float)\""),
            "{e}"
        );
        // Spacing and __restrict__ aside, the types pick the overload.
        let m = with("k(const float*, float *,int, float)").unwrap();
        assert_eq!(
            m.name_expressions(),
            ["k(const float*, float *,int, float)"]
        );
        // Its signature is the one checked: the double overload cannot take f32 buffers.
        let e = with("k(const double *, double *, int, double)").unwrap_err();
        assert!(e.problem.contains("points to f64"), "{e}");
        let e = with("k(int *, int)").unwrap_err();
        assert!(e.problem.contains("names 3 overloads"), "{e}");
        // A template beside a plain overload of its name: its instance is named by its
        // arguments, the plain one by its types.
        let mixed =
            "template <typename T> __global__ void t(const T *x, float *y, int n, float a) {}\n\
                     __global__ void t(const double *x, double *y, int n, double a) {}\n";
        let with_mixed = |entry: &str| declared_f32(mixed, entry);
        assert!(
            with_mixed("t<float>").is_ok(),
            "{:?}",
            with_mixed("t<float>")
        );
        let e = with_mixed("t").unwrap_err().problem;
        assert!(
            e.contains("names 2 overloads")
                && e.contains(
                    "t<...> with its arguments or \"t(const double *, double *, int, double)\""
                ),
            "{e}"
        );
        // An extern "C" kernel among C++ overloads, named by its types: lowered by NVRTC
        // too (its symbol is its name), not loaded by the entry's text.
        let ec = "extern \"C\" __global__ void e(const float *x, float *y, int n, float a) {}\n\
                  __global__ void e(const double *x, double *y, int n, double a) {}\n";
        let m = declared_f32(ec, "e(const float *, float *, int, float)").unwrap();
        assert_eq!(
            m.name_expressions(),
            ["e(const float *, float *, int, float)"]
        );
        // Another spelling of the same types picks the same overload.
        assert!(with("k(float const *, float *, int, float)").is_ok());
        // One kernel of that name: a spelling klab does not take as the same (a typedef) is
        // the compiler's to judge.
        let one = "__global__ void one(const real *x, float *y, int n, float a) {}\n";
        let with_one = |entry: &str| declared_f32(one, entry);
        assert!(with_one("one(const float *, float *, int, float)").is_ok());
        // Its refusal names the kernel as declared, not the entry's other types.
        let e = declared_f32(
            "__global__ void one(const double *x, float *y, int n, float a) {}\n",
            "one(const float *, float *, int, float)",
        )
        .unwrap_err();
        assert!(
            e.problem.contains("parameter 0 of one(const double *, float *, int, float) (k.cu line 1), `const double *x` points to f64"),
            "{e}"
        );
        // The overload asked for in a header the source includes: the compiler's to find.
        let in_header = "#include \"more.cuh\"\n__global__ void h(const double *x, double *y, int n, double a) {}\n";
        let with_header = |entry: &str| declared_f32(in_header, entry);
        assert!(with_header("h(const float *, float *, int, float)").is_ok());
        // Two declarations of other types are two overloads, not one kernel.
        let protos = "__global__ void p(const float *x, float *y, int n, float a);\n\
                      __global__ void p(const double *x, double *y, int n, double a);\n";
        let with_protos = |entry: &str| declared_f32(protos, entry);
        assert!(with_protos("p")
            .unwrap_err()
            .problem
            .contains("names 2 overloads"));
        assert!(with_protos("p(const float *, float *, int, float)").is_ok());
        // A declaration and its definition are one kernel: its plain name is enough.
        assert!(with("one").is_ok(), "{:?}", with("one"));
        // Not an entry: a list that does not close.
        assert!(with("k(int *")
            .unwrap_err()
            .problem
            .contains("not a C identifier"));
    }

    /// A kernel in a header the source includes (the usual layout of a project) is taken
    /// by name, for NVRTC to find; a source with no header of its own still names its
    /// kernels when the entry is none of them.
    #[test]
    fn a_kernel_in_an_included_header_is_asked_for_by_name() {
        let wrap = |src: &'static str| {
            parse(
                "m.toml",
                &format!(
                    "source = \"k.cu\"\n[[kernel]]\n{}",
                    OK.replace("entry = \"k\"", "entry = \"sgemm\"")
                ),
                Files::Given(&move |_| Ok(("k.cu".into(), src.into()))),
            )
        };
        let m = wrap("#include <cuda_fp16.h>\n# include \"kernels.cuh\"\n").unwrap();
        assert_eq!(m.name_expressions(), ["sgemm"]);
        let e = wrap("#include <cuda_fp16.h>\n__global__ void other() {}\n").unwrap_err();
        assert!(
            e.problem.contains("no __global__ function 'sgemm'"),
            "{e:?}"
        );
    }

    #[test]
    fn template_instances_are_entries_and_junk_is_not() {
        let src = "template <typename T, int B> __global__ void scale(T* o, const T* i, int n) {}";
        let with = |entries: &[&str]| {
            let body: String = entries
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    format!(
                        "[[kernel]]\n{}",
                        OK.replace("name = \"k\"", &format!("name = \"k{i}\""))
                            .replace("entry = \"k\"", &format!("entry = \"{e}\""))
                    )
                })
                .collect();
            parse(
                "m.toml",
                &format!("source = \"k.cu\"\n{body}"),
                Files::Given(&|_| Ok(("k.cu".into(), src.into()))),
            )
        };
        let m = with(&["scale<float, 128>", "scale<int, 64>", "scale<float, 128>"]).unwrap();
        assert_eq!(m.kernels[0].entry, "scale<float, 128>");
        assert_eq!(
            m.name_expressions(),
            ["scale<float, 128>", "scale<int, 64>"],
            "each instance once, in order"
        );
        assert!(parse_one(OK).unwrap().name_expressions().is_empty());
        for (junk, needle) in [
            ("scale<float; 128>", "not a C identifier, a qualified name"),
            ("scale<float", "not a C identifier, a qualified name"),
            ("ops::", "not a C identifier, a qualified name"),
            ("::k", "not a C identifier, a qualified name"),
            ("shift<float>", "no __global__ function 'shift' in k.cu"),
        ] {
            let e = with(&[junk]).unwrap_err();
            assert_eq!(e.field, "kernel[0].entry", "{e}");
            assert!(e.problem.contains(needle), "{junk}: {e}");
        }
    }

    /// A manifest over `file`, whose bytes are `bytes`, with `OK`'s kernel edited by `edit`.
    fn over(file: &str, bytes: &[u8], edit: &str) -> Result<Manifest, ManifestError> {
        let bytes = bytes.to_vec();
        parse(
            "m.toml",
            &format!("source = \"{file}\"\n{edit}[[kernel]]\n{OK}"),
            Files::Given(&|name| Ok((format!("dir/{name}"), bytes.clone()))),
        )
    }

    #[test]
    fn precompiled_modules_are_read_as_bytes_by_their_extension() {
        // Not UTF-8, as a cubin is not: the bytes are kept exactly, their hash is stable.
        // Its symbol `k` for a cubin, an `.entry k` for PTX.
        let elf = b"\x7fELF\x02\x01\x01\0\xff\xfe.text.k\0k\0 .entry k(";
        for kind in ModuleKind::ALL {
            let file = format!("k.{}", kind.extension());
            let m = over(&file, elf, "").unwrap();
            assert_eq!(
                m.source,
                Source::Module {
                    kind,
                    bytes: elf.to_vec()
                }
            );
            assert_eq!(m.source.bytes(), elf);
            assert_eq!(m.source.text(), None);
            assert_eq!(m.source.sha256(), klab_core::artifact::sha256_hex(elf));
            assert_eq!(
                over(&file, elf, "").unwrap().source.sha256(),
                m.source.sha256()
            );
            assert_eq!(
                (m.program.as_str(), m.source_path.as_str()),
                (file.as_str(), &*format!("dir/{file}"))
            );
        }
        // CUDA C++ is text, hashed as the text's bytes (as receipts always bound it).
        let m = parse_one(OK).unwrap();
        assert_eq!(m.source.text(), Some(SRC));
        assert_eq!(
            m.source.sha256(),
            klab_core::artifact::sha256_hex(SRC.as_bytes())
        );
        assert!(over("k.cuh", SRC.as_bytes(), "").is_ok());
    }

    #[test]
    fn a_source_klab_cannot_read_or_a_module_with_compile_settings_is_named() {
        let elf = b"\x7fELF\0k\0";
        let bad = |file: &str, bytes: &[u8], edit: &str, field: &str, needle: &str| {
            let e = over(file, bytes, edit).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.problem.contains(needle), "{e}");
            assert!(!e.to_string().contains('\n'), "{e}");
        };
        bad(
            "k.o",
            elf,
            "",
            "source",
            "'k.o' is neither CUDA C++ (.cu, .cuh, .h, .hpp, .hh, .hxx, .inl, .cc, .cpp, .cxx) nor a precompiled module (.cubin, .ptx, .fatbin)",
        );
        bad("kernel", elf, "", "source", "is neither CUDA C++");
        bad(
            "k.cu",
            b"\xff\xfe k",
            "",
            "source",
            "'k.cu' is not UTF-8 text outside its comments (line 1)",
        );
        // In a comment, a byte that is not UTF-8 changes nothing the compiler reads: the
        // source loads, and its hash is of the file's own bytes.
        let latin1 = [b"// Autor: J\xf6rg\n".as_slice(), SRC.as_bytes()].concat();
        let m = over("k.cu.cc", &latin1, "").unwrap();
        assert_eq!(m.source.sha256(), klab_core::artifact::sha256_hex(&latin1));
        assert!(m.source.text().unwrap().contains("J\u{fffd}rg"));
        assert!(over("kernels.h", SRC.as_bytes(), "").is_ok());
        bad(
            "k.cubin",
            b"\x7fELF\0other\0",
            "",
            "kernel[0].entry",
            "'k' does not appear in k.cubin",
        );
        bad(
            "k.ptx",
            b".visible .entry k(",
            "include_dirs = [\"inc\"]\n",
            "include_dirs",
            "k.ptx is a precompiled PTX: it is not compiled, so include folders do not apply",
        );
        // A cubin takes no NVRTC options, has no template to instantiate and no namespaces
        // to look a name up in: each refused in one line naming the field.
        let in_cubin = |kernel: String| {
            parse(
                "m.toml",
                &format!("source = \"k.cubin\"\n[[kernel]]\n{kernel}"),
                Files::Given(&|_| Ok(("k.cubin".into(), elf.to_vec()))),
            )
            .unwrap_err()
        };
        for (edit, field, says) in [
            (
                ("name = \"k\"", "name = \"k\"\noptions = [\"-DX\"]"),
                "kernel[0].options",
                "NVRTC options do not apply",
            ),
            (
                ("entry = \"k\"", "entry = \"k<float>\""),
                "kernel[0].entry",
                "give the instance's symbol",
            ),
            (
                ("entry = \"k\"", "entry = \"ops::k\""),
                "kernel[0].entry",
                "give the kernel's symbol",
            ),
        ] {
            let e = in_cubin(OK.replace(edit.0, edit.1));
            assert_eq!(e.field, field, "{e}");
            assert!(e.problem.contains(says), "{e}");
        }
        // A fatbin may be compressed: its entries cannot be looked for, so none is refused.
        assert!(over("k.fatbin", b"\x50\xed\x55\xba", "").is_ok());
    }

    /// A precompiled module may say what generated it; klab reads and hashes the file it
    /// names (relative to the manifest), and refuses the statement where klab compiles the
    /// source itself, where the tool is not named, or where the file cannot be read.
    #[test]
    fn generated_by_names_the_tool_and_hashes_the_file_it_generated_from() {
        let elf = b"\x7fELF\0.text.k\0k\0".to_vec();
        let py = b"@triton.jit\ndef k(): pass\n".to_vec();
        let with = |source: &str, generated: &str| {
            let text =
                format!("source = \"{source}\"\n[[kernel]]\n{OK}generated_by = {generated}\n");
            let (elf, py) = (elf.clone(), py.clone());
            parse(
                "m.toml",
                &text,
                Files::Given(&move |name| match name {
                    "k.py" => Ok(("dir/k.py".into(), py.clone())),
                    "k.cu" => Ok(("dir/k.cu".into(), SRC.into())),
                    "k.cubin" => Ok(("dir/k.cubin".into(), elf.clone())),
                    other => Err(format!("{other}: no such file")),
                }),
            )
        };
        let m = with(
            "k.cubin",
            r#"{ tool = "triton 3.6.0", source = "k.py", function = "k", settings = ["BLOCK=1024", "num_warps=4"] }"#,
        )
        .unwrap();
        assert_eq!(
            m.kernels[0].generated_by,
            Some(GeneratedBy {
                tool: "triton 3.6.0".into(),
                source: "k.py".into(),
                source_sha256: klab_core::artifact::sha256_hex(&py),
                function: Some("k".into()),
                settings: vec!["BLOCK=1024".into(), "num_warps=4".into()],
            })
        );
        let said = m.kernels[0].generated_by.as_ref().unwrap().describe();
        assert!(
            said.starts_with("generated by triton 3.6.0 from k.py:k (sha256 ")
                && said.ends_with("...; BLOCK=1024, num_warps=4)"),
            "{said}"
        );
        for (source, generated, needle) in [
            (
                "k.cu",
                r#"{ tool = "triton", source = "k.py" }"#,
                "compiled by klab (NVRTC)",
            ),
            (
                "k.cubin",
                r#"{ tool = " ", source = "k.py" }"#,
                "name the tool",
            ),
            (
                "k.cubin",
                r#"{ tool = "triton", source = "gone.py" }"#,
                "source gone.py: gone.py: no such file",
            ),
            (
                "k.cubin",
                r#"{ tool = "triton", source = "k.py", version = "3" }"#,
                "unknown field",
            ),
        ] {
            let e = with(source, generated).unwrap_err();
            assert!(e.to_string().contains(needle), "{source} {generated}: {e}");
        }
    }

    #[test]
    fn include_dirs_are_read_beside_the_manifest_and_a_missing_one_is_named() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("k.cu"), SRC).unwrap();
        std::fs::create_dir_all(d.path().join("inc")).unwrap();
        std::fs::write(d.path().join("inc/tile.cuh"), "#define TILE 32\n").unwrap();
        let p = d.path().join("m.toml");
        let write = |dirs: &str| {
            std::fs::write(
                &p,
                format!("source = \"k.cu\"\ninclude_dirs = {dirs}\n[[kernel]]\n{OK}"),
            )
            .unwrap()
        };
        write("[\"inc\"]");
        let m = load(&p).unwrap();
        assert_eq!(m.include_dirs.len(), 1);
        assert_eq!(m.include_dirs[0].path, d.path().join("inc"));
        assert_eq!(m.include_dirs[0].files, 1);
        let before = m.include_dirs[0].sha256.clone();
        std::fs::write(d.path().join("inc/tile.cuh"), "#define TILE 64\n").unwrap();
        assert_ne!(load(&p).unwrap().include_dirs[0].sha256, before);

        write("[\"inc\", \"nowhere\"]");
        let e = load(&p).unwrap_err();
        assert_eq!(e.field, "include_dirs[1]", "{e}");
        assert!(e.problem.starts_with("no folder "), "{e}");
        assert!(e.problem.contains("nowhere"), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
        write("[\"k.cu\"]");
        assert!(load(&p).unwrap_err().problem.ends_with("is not a folder"));
        // Without include_dirs there are none.
        assert!(parse_one(OK).unwrap().include_dirs.is_empty());
    }

    #[test]
    fn manifests_load_from_files_and_resolve_by_name() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("k.cu"), SRC).unwrap();
        let two = format!(
            "source = \"k.cu\"\n[[kernel]]\n{OK}\n[[kernel]]\n{}",
            OK.replace("name = \"k\"", "name = \"k2\"")
        );
        let p = d.path().join("mine.toml");
        std::fs::write(&p, &two).unwrap();
        let spec = format!("{}:k2", p.display());
        assert_eq!(resolve(&spec).unwrap().1.name, "k2");
        let e = resolve(&p.display().to_string()).unwrap_err();
        assert!(e.to_string().contains("names 2 kernels (k, k2)"), "{e}");
        let e = resolve(&format!("{}:zz", p.display())).unwrap_err();
        assert!(e.to_string().contains("no kernel matches 'zz'"), "{e}");
        let e = resolve(&d.path().join("none.toml").display().to_string()).unwrap_err();
        assert!(
            matches!(&e, crate::registry::RegistryError::Manifest(m) if m.field == FILE_FIELD),
            "{e}"
        );
    }

    /// A manifest over `src` (as k.cu) whose one kernel has `entry`.
    fn entry_in(src: &str, entry: &str) -> Result<Manifest, ManifestError> {
        let src = src.to_string();
        parse(
            "m.toml",
            &format!(
                "source = \"k.cu\"\n[[kernel]]\n{}",
                OK.replace("entry = \"k\"", &format!("entry = \"{entry}\""))
            ),
            Files::Given(&|_| Ok(("k.cu".into(), src.clone().into_bytes()))),
        )
    }

    #[test]
    fn an_entry_is_a_global_function_found_by_token_not_a_substring() {
        // Whether the entry is found; its sources take other parameters than OK passes.
        let problem = |src: &str, entry: &str| {
            entry_in(src, entry)
                .err()
                .filter(|e| e.field != "kernel[0].params")
                .map(|e| e.problem)
        };
        let src = "#define N 4\nconst int extern_n = 1; // __global__ void gone() {}\n\
                   __device__ int helper() { return 0; }\n\
                   extern \"C\" __global__ void k(float* o) { const char* s = \"ghost\"; }\n";
        for word in [
            "extern", "N", "extern_n", "gone", "helper", "ghost", "float", "k2", "_k",
        ] {
            assert_eq!(
                problem(src, word).as_deref(),
                Some(&*format!(
                    "no __global__ function '{word}' in k.cu (it declares k)"
                )),
            );
        }
        assert_eq!(problem(src, "k"), None);
        assert_eq!(
            problem("int main() {}", "k").as_deref(),
            Some("no __global__ function 'k' in k.cu (it declares none)")
        );
        // extern "C" from a block, or from the first declaration (which gives the linkage).
        assert_eq!(
            problem("extern \"C\" {\n__global__ void k() {}\n}", "k"),
            None
        );
        assert_eq!(
            problem(
                "extern \"C\" __global__ void k();\n__global__ void k() {}",
                "k"
            ),
            None
        );
        // A plain C++ kernel (not extern "C", as most projects write them) is an entry:
        // NVRTC lowers its name ([`Manifest::name_expressions`]).
        assert_eq!(problem("__global__ void k() {}", "k"), None);
        // Templates by their name, in a namespace too; a plain entry is no instance.
        let t = "namespace ns {\ntemplate <typename T, int B> __global__ void scale(T* o) {}\n}";
        assert_eq!(problem(t, "ns::scale<float, 4>"), None);
        assert_eq!(
            problem(t, "ns::scale").as_deref(),
            Some("'ns::scale' (k.cu line 2) is a template <typename T, int B>: name an instance, ns::scale<...> with its arguments")
        );
        // A kernel in a namespace is reached by its qualified name, as the program does; the
        // plain name is refused in one line (NVRTC's error would be many).
        assert_eq!(
            problem(t, "scale").as_deref(),
            Some("'scale' is declared in a namespace (k.cu line 2): give its entry as ns::scale<...> with its arguments")
        );
        assert_eq!(problem(t, "scale<float, 4>").as_deref(), Some("'scale' is declared in a namespace (k.cu line 2): give its entry as ns::scale<...> with its arguments"));
        let nested = "namespace a::b {
namespace {
__global__ void k(float* o) {}
}
}
                      namespace c { __global__ void k(float* o); }
                      __global__ void c::k(float* o) {}
                      using namespace std;
";
        assert_eq!(problem(nested, "a::b::k"), None);
        assert_eq!(problem(nested, "c::k"), None);
        assert_eq!(
            problem(nested, "a::k").as_deref(),
            None,
            "two kernels k: a namespace klab did not see is the compiler's to judge"
        );
        let plain = "namespace ops {
__global__ void k(float* o) {}
}
";
        assert_eq!(
            problem(plain, "k").as_deref(),
            Some("'k' is declared in a namespace (k.cu line 2): give its entry as ops::k")
        );
        assert_eq!(problem(plain, "ops::k"), None);
        // `using namespace ops;` or `using ops::k;` reaches it by its plain name; a using of
        // another namespace does not.
        let with = |tail: &str| format!("{plain}{tail}\n");
        assert_eq!(problem(&with("using namespace ops;"), "k"), None);
        assert_eq!(problem(&with("using ops::k;"), "k"), None);
        assert!(problem(&with("using namespace std;"), "k").is_some());
        // An extern "C" kernel in a namespace is its plain symbol: the plain name is right.
        assert_eq!(
            problem(
                "namespace a { extern \"C\" __global__ void k(float* o) {} }",
                "k"
            ),
            None
        );
        // Braces klab cannot pair (both branches of an #if open one): not refused.
        let branches = "#if A\nnamespace x {\n#else\nnamespace y {\n#endif\n}\n__global__ void k(float* o) {}\n";
        assert_eq!(problem(branches, "k"), None);
        // A qualified name of another namespace than the one klab saw is the compiler's.
        assert_eq!(problem(plain, "fp16::k"), None);
        assert!(problem(plain, "ops::other").is_some());
        assert_eq!(
            problem(SRC, "k<float>").as_deref(),
            Some("'k' (k.cu line 1) is not a template: give its name, k, as the entry")
        );
        // Kernels a macro declares are out of sight: the name must still be a word of the code.
        let m = "#define KERNEL(name) extern \"C\" __global__ void name(float* o)\nKERNEL(k) {}\n";
        assert_eq!(problem(m, "k"), None);
        assert!(problem(m, "other").is_some());
    }

    #[test]
    fn a_module_entry_is_a_ptx_entry_or_a_cubin_symbol() {
        let problem = |file: &str, bytes: &[u8]| over(file, bytes, "").err().map(|e| e.problem);
        let ptx = b".version 8.0\n.extern .shared .align 4 .b8 k_smem[];\n.visible .entry k(\n";
        assert_eq!(problem("k.ptx", ptx), None);
        assert_eq!(
            problem("k.ptx", b".visible .entry k_other(\n.extern .shared k"),
            Some("'k' does not appear in k.ptx".into())
        );
        assert_eq!(problem("k.ptx", b".visible .entry\tk (\n"), None);
        assert_eq!(problem("k.cubin", b"\x7fELF\0.text.k\0k\0"), None);
        assert_eq!(
            problem("k.cubin", b"\x7fELF\0.text.kk\0kk\0"),
            Some("'k' does not appear in k.cubin".into())
        );
        assert_eq!(problem("k.fatbin", b"compressed"), None);
    }

    #[test]
    fn a_toml_error_says_what_and_where_on_one_line() {
        let toml = |text: &str| {
            let e = parse(
                "m.toml",
                text,
                Files::Given(&|_| Ok(("k.cu".into(), SRC.into()))),
            )
            .unwrap_err();
            assert_eq!(e.field, "toml", "{e}");
            e.problem
        };
        // The parser's own message is empty here.
        assert_eq!(
            toml("source = "),
            "the file ends where a value is expected (line 1, column 10)"
        );
        assert_eq!(
            toml("source = \n"),
            "invalid string; expected `\"`, `'` (line 1, column 10)"
        );
        // A span at the start of a line is on that line, not the one before.
        assert_eq!(
            toml("a.b = 1\na = 2\n"),
            "duplicate key `a` in document root (line 2, column 1)"
        );
        // Columns count characters, not bytes.
        assert_eq!(
            toml("# \u{e9}\u{e9}\n\u{e9} = 1"),
            "invalid key (line 2, column 1)"
        );
        assert!(toml("s = \"\u{e9}\u{e9}\" x").ends_with("(line 1, column 10)"));
    }

    #[test]
    fn a_manifest_that_cannot_be_read_is_named_once() {
        let d = tempfile::tempdir().unwrap();
        let e = load(d.path()).unwrap_err();
        assert_eq!(e.field, FILE_FIELD);
        let line = e.to_string();
        assert_eq!(
            line.matches(&*d.path().display().to_string()).count(),
            1,
            "{line}"
        );
        assert!(
            line.ends_with(
                "is a folder, not a regular file; klab reads a manifest only from a regular file"
            ),
            "{line}"
        );
    }
}
