//! Kernel manifests: how a kernel is declared, built-in or brought by a user, in TOML.
//!
//! ```toml
//! source = "transpose.cu"          # relative to the manifest
//! [[kernel]]
//! name = "padded"
//! entry = "transpose_padded"       # the extern "C" __global__ function
//! operation = "transpose"          # copy | transpose | triad | reduce-sum
//! params = ["out", "in", "n:i32"]  # the kernel's parameters in order, by role
//! block = [32, 8, 1]
//! elements_per_block = [32, 32]    # grid = N / this, per axis (rounded by grid_rounding)
//! grid_rounding = "up"             # up (ceil, default) | down (floor)
//! dynamic_shared_bytes = 0
//! options = []                     # extra NVRTC options
//! known_broken = "why"             # optional: always rejected, never timed
//! prediction = "what and why"      # optional: the expected result, written before measuring;
//!                                  # rounds summaries and reports show it beside the outcome
//! ```
//!
//! Each operation fixes the roles its kernel must take: copy and transpose `out`, `in` and
//! `n` (i32); triad `x`, `z`, `y`, `n` (u64) and `alpha` (f32); reduce-sum `in`, `partials`
//! and `n` (u64). A manifest whose parameters don't match its operation is an error that
//! names the field.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plan::{Dim3, LaunchPlan};
use crate::text::is_identifier;

/// What a kernel must compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    Copy,
    Transpose,
    Triad,
    ReduceSum,
    /// The manifest declares what the kernel computes (`[kernel.op]`, see
    /// [`crate::declared`]).
    Declared,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Copy => "copy",
            OpKind::Transpose => "transpose",
            OpKind::Triad => "triad",
            OpKind::ReduceSum => "reduce-sum",
            OpKind::Declared => "declared",
        }
    }

    /// (buffer roles, scalar roles with their required type), in no particular order.
    pub fn roles(
        self,
    ) -> (
        &'static [&'static str],
        &'static [(&'static str, ScalarType)],
    ) {
        match self {
            OpKind::Copy | OpKind::Transpose => (&["out", "in"], &[("n", ScalarType::I32)]),
            OpKind::Triad => (
                &["x", "z", "y"],
                &[("n", ScalarType::U64), ("alpha", ScalarType::F32)],
            ),
            OpKind::ReduceSum => (&["in", "partials"], &[("n", ScalarType::U64)]),
            // Its parameters are whatever [kernel.op] declares.
            OpKind::Declared => (&[], &[]),
        }
    }

    /// Problem dimensions: 2 for an N x N matrix, 1 for a vector.
    pub fn dims(self) -> usize {
        match self {
            OpKind::Copy | OpKind::Transpose => 2,
            OpKind::Triad | OpKind::ReduceSum | OpKind::Declared => 1,
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The C type of a scalar parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalarType {
    I32,
    U64,
    F32,
}

impl ScalarType {
    fn parse(s: &str) -> Option<ScalarType> {
        match s {
            "i32" | "int" => Some(ScalarType::I32),
            "u64" | "size_t" | "unsigned long long" => Some(ScalarType::U64),
            "f32" | "float" => Some(ScalarType::F32),
            _ => None,
        }
    }
}

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

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Param {
    Buffer(String),
    Scalar(String, ScalarType),
}

/// How the grid covers N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rounding {
    Up,
    Down,
}

/// One declared kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelDecl {
    pub name: String,
    pub entry: String,
    pub operation: OpKind,
    pub params: Vec<Param>,
    pub block: Dim3,
    pub elements_per_block: Vec<u64>,
    pub grid_rounding: Rounding,
    pub dynamic_shared_bytes: u32,
    pub options: Vec<String>,
    pub known_broken: Option<String>,
    /// How copy and transpose outputs are compared (`equality = "nan-any-payload"`).
    pub equality: crate::ops::transpose::Equality,
    /// The author's prediction for this kernel, written before measuring (one line).
    pub prediction: Option<String>,
    /// What a `declared` kernel computes (its launch, buffers, rules and reference; the
    /// built-in operations' fields above are unused then).
    pub declared: Option<std::sync::Arc<crate::declared::DeclaredOp>>,
}

impl KernelDecl {
    /// The launch plan at problem size `n`.
    pub fn plan(&self, n: u64) -> LaunchPlan {
        let blocks = |e: u64| -> u32 {
            let b = match self.grid_rounding {
                Rounding::Up => n.div_ceil(e),
                Rounding::Down => n / e,
            };
            u32::try_from(b).unwrap_or(u32::MAX)
        };
        let grid = match self.elements_per_block[..] {
            [x] => Dim3::new(blocks(x), 1, 1),
            [x, y] => Dim3::new(blocks(x), blocks(y), 1),
            _ => Dim3::new(0, 0, 0),
        };
        LaunchPlan {
            grid,
            block: self.block,
            dynamic_shared_bytes: self.dynamic_shared_bytes,
        }
    }

    /// Position of each role among the parameters.
    pub fn position(&self, role: &str) -> Option<usize> {
        self.params.iter().position(|p| match p {
            Param::Buffer(r) | Param::Scalar(r, _) => r == role,
        })
    }
}

/// A manifest: one source file and the kernels it declares.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    /// Where the manifest came from (`builtin:transpose` for built-ins).
    pub origin: String,
    /// The source's path as reports should name it (repository-relative for built-ins).
    pub source_path: String,
    /// NVRTC program name (the source's file name).
    pub program: String,
    #[serde(skip)]
    pub source: String,
    pub kernels: Vec<KernelDecl>,
}

/// A manifest that cannot be used: one line naming the file and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("manifest {origin}: {field}: {problem}")]
pub struct ManifestError {
    pub origin: String,
    pub field: String,
    pub problem: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    source: String,
    #[serde(rename = "kernel")]
    kernels: Vec<RawKernel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    name: String,
    entry: String,
    operation: String,
    params: Vec<String>,
    #[serde(default)]
    block: Option<Vec<u32>>,
    #[serde(default)]
    elements_per_block: Option<Vec<u64>>,
    /// A declared operation's `[kernel.op]`.
    #[serde(default)]
    op: Option<crate::declared::DeclaredOpSpec>,
    #[serde(default)]
    grid_rounding: Option<String>,
    #[serde(default)]
    dynamic_shared_bytes: u32,
    #[serde(default)]
    options: Vec<String>,
    #[serde(default)]
    known_broken: Option<String>,
    #[serde(default)]
    equality: Option<String>,
    #[serde(default)]
    prediction: Option<String>,
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
            if self.found.is_none() && is_placeholder(v) {
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

/// Loads the source a manifest names: (path as reports name it, text), or why not.
pub type SourceLoader<'a> = dyn Fn(&str) -> Result<(String, String), String> + 'a;

/// Parse manifest text. `source_for` loads the source file named by `source`.
pub fn parse(
    origin: &str,
    text: &str,
    source_for: &SourceLoader<'_>,
) -> Result<Manifest, ManifestError> {
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
    let raw: RawManifest = toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        let span = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].lines().count().max(1);
                format!(" (line {line})")
            })
            .unwrap_or_default();
        err("toml".into(), format!("{msg}{span}"))
    })?;
    if raw.kernels.is_empty() {
        return Err(err("kernel".into(), "no [[kernel]] entries".into()));
    }
    let (source_path, source) = source_for(&raw.source).map_err(|p| err("source".into(), p))?;
    let program = Path::new(&raw.source)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("kernel.cu")
        .to_string();
    let mut names = BTreeSet::new();
    let mut kernels = Vec::new();
    for (i, k) in raw.kernels.into_iter().enumerate() {
        let f = |name: &str| format!("kernel[{i}].{name}");
        if !is_identifier(&k.name.replace('-', "_")) {
            return Err(err(f("name"), format!("'{}' is not a usable name", k.name)));
        }
        if !names.insert(k.name.clone()) {
            return Err(err(f("name"), format!("'{}' is declared twice", k.name)));
        }
        let library = LibraryRoutine::from_entry(&k.entry);
        if k.entry.starts_with('@') && library.is_none() {
            return Err(err(
                f("entry"),
                format!(
                    "'{}' is not a library routine klab knows ({})",
                    k.entry,
                    LibraryRoutine::ALL
                        .iter()
                        .map(|r| r.entry())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if library.is_none() && !is_identifier(&k.entry) {
            return Err(err(
                f("entry"),
                format!("'{}' is not a C identifier", k.entry),
            ));
        }
        if library.is_none() && !source.contains(&k.entry) {
            return Err(err(
                f("entry"),
                format!("'{}' does not appear in {}", k.entry, raw.source),
            ));
        }
        let operation = match k.operation.as_str() {
            "copy" => OpKind::Copy,
            "transpose" => OpKind::Transpose,
            "triad" => OpKind::Triad,
            "reduce-sum" | "reduce_sum" | "sum" => OpKind::ReduceSum,
            "declared" => OpKind::Declared,
            other => {
                return Err(err(
                    f("operation"),
                    format!(
                        "unknown operation '{other}' (copy, transpose, triad, reduce-sum, or declared with a [kernel.op] table)"
                    ),
                ))
            }
        };
        if operation == OpKind::Declared {
            kernels.push(declared_kernel(k, &f).map_err(|(field, problem)| err(field, problem))?);
            continue;
        }
        if k.op.is_some() {
            return Err(err(
                f("op"),
                format!("[kernel.op] declares an operation; set operation = \"declared\" (not {operation})"),
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
            return Err(err(f(missing), format!("{operation} needs {missing}")));
        };
        let (buffers, scalars) = operation.roles();
        let mut params = Vec::new();
        let mut seen = BTreeSet::new();
        for (j, p) in k.params.iter().enumerate() {
            let pf = f(&format!("params[{j}]"));
            let (role, ty) = match p.split_once(':') {
                Some((r, t)) => (r.trim(), Some(t.trim())),
                None => (p.trim(), None),
            };
            if !seen.insert(role.to_string()) {
                return Err(err(pf, format!("role '{role}' appears twice")));
            }
            if buffers.contains(&role) {
                if ty.is_some() {
                    return Err(err(pf, format!("'{role}' is a buffer; it takes no type")));
                }
                params.push(Param::Buffer(role.to_string()));
            } else if let Some((_, want)) = scalars.iter().find(|(r, _)| *r == role) {
                let Some(t) = ty else {
                    return Err(err(
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
                        return Err(err(
                            pf,
                            format!(
                                "'{role}' must be {} for {operation}, got '{t}'",
                                format!("{want:?}").to_lowercase()
                            ),
                        ))
                    }
                }
            } else {
                return Err(err(
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
                return Err(err(
                    f("params"),
                    format!("{operation} needs a '{role}' parameter"),
                ));
            }
        }
        if let Some(r) = library {
            if operation != r.operation() {
                return Err(err(
                    f("operation"),
                    format!("{} computes {}, not {operation}", r.entry(), r.operation()),
                ));
            }
            if params != LibraryRoutine::params() {
                return Err(err(
                    f("params"),
                    format!("{} takes [\"out\", \"in\", \"n:i32\"]", r.entry()),
                ));
            }
        }
        let block = match block_dims[..] {
            [x] => Dim3::new(x, 1, 1),
            [x, y] => Dim3::new(x, y, 1),
            [x, y, z] => Dim3::new(x, y, z),
            _ => return Err(err(f("block"), "give 1 to 3 dimensions".into())),
        };
        if block.product() == 0 {
            return Err(err(f("block"), "a dimension is 0".into()));
        }
        if elements_per_block.len() != operation.dims() || elements_per_block.contains(&0) {
            return Err(err(
                f("elements_per_block"),
                format!("{operation} needs {} positive value(s)", operation.dims()),
            ));
        }
        let grid_rounding = match k.grid_rounding.as_deref() {
            None | Some("up") => Rounding::Up,
            Some("down") => Rounding::Down,
            Some(o) => return Err(err(f("grid_rounding"), format!("'{o}' is not up or down"))),
        };
        let equality = match k.equality.as_deref() {
            None => crate::ops::transpose::Equality::Bitwise,
            Some(e) => match crate::ops::transpose::Equality::parse(e) {
                Some(eq) if matches!(operation, OpKind::Copy | OpKind::Transpose) => eq,
                Some(_) => {
                    return Err(err(
                        f("equality"),
                        format!("only copy and transpose take an equality, not {operation}"),
                    ))
                }
                None => {
                    return Err(err(
                        f("equality"),
                        format!("'{e}' is not bitwise or nan-any-payload"),
                    ))
                }
            },
        };
        if let Some(b) = &k.known_broken {
            if b.trim().is_empty() {
                return Err(err(f("known_broken"), "give the reason".into()));
            }
        }
        if let Some(p) = &k.prediction {
            if p.trim().is_empty() || p.contains(['\n', '\r']) {
                return Err(err(
                    f("prediction"),
                    "give one non-empty line (reports print it in a table cell)".into(),
                ));
            }
        }
        kernels.push(KernelDecl {
            name: k.name,
            entry: k.entry,
            operation,
            params,
            block,
            elements_per_block,
            grid_rounding,
            dynamic_shared_bytes: k.dynamic_shared_bytes,
            options: k.options,
            known_broken: k.known_broken,
            equality,
            prediction: k.prediction.map(|p| p.trim().to_string()),
            declared: None,
        });
    }
    Ok(Manifest {
        origin: origin.to_string(),
        source_path,
        program,
        source,
        kernels,
    })
}

/// A `declared` kernel: `[kernel.op]` checked against its parameters; the built-in
/// operations' launch fields are refused (the op's grid and block replace them).
fn declared_kernel(
    k: RawKernel,
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
    let Some(spec) = k.op else {
        return Err((
            f("op"),
            "operation = \"declared\" needs a [kernel.op] table: sizes, buffers, grid, block, useful_bytes and reference".into(),
        ));
    };
    let op = spec
        .validate(&k.params)
        .map_err(|(field, problem)| (f(&format!("op.{field}")), problem))?;
    if let Some(b) = &k.known_broken {
        if b.trim().is_empty() {
            return Err((f("known_broken"), "give the reason".into()));
        }
    }
    Ok(KernelDecl {
        name: k.name,
        entry: k.entry,
        operation: OpKind::Declared,
        params: Vec::new(),
        block: Dim3::new(0, 0, 0),
        elements_per_block: Vec::new(),
        grid_rounding: Rounding::Up,
        dynamic_shared_bytes: 0,
        options: k.options,
        known_broken: k.known_broken,
        equality: crate::ops::transpose::Equality::Bitwise,
        prediction: k.prediction.map(|p| p.trim().to_string()),
        declared: Some(std::sync::Arc::new(op)),
    })
}

/// Load a manifest file; its source is resolved relative to the manifest's folder.
pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
        origin: origin.clone(),
        field: "file".into(),
        problem: e.to_string(),
    })?;
    let dir: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse(&origin, &text, &|src: &str| {
        let p = dir.join(src);
        std::fs::read_to_string(&p)
            .map(|s| (p.display().to_string(), s))
            .map_err(|e| format!("cannot read {}: {e}", p.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(spec: &str) -> Result<(Manifest, KernelDecl), crate::registry::RegistryError> {
        crate::registry::resolve(spec, crate::registry::Scope::Default)
    }

    const SRC: &str = "extern \"C\" __global__ void k(float* o, const float* i, int n) {}";

    fn parse_one(body: &str) -> Result<Manifest, ManifestError> {
        parse(
            "m.toml",
            &format!("source = \"k.cu\"\n[[kernel]]\n{body}"),
            &|_| Ok(("k.cu".into(), SRC.into())),
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
                &|_| Ok(("k.cu".into(), SRC.into())),
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
        assert_eq!(t4.plan(8193).grid, Dim3::new(257, 65, 1));
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
        assert_eq!(padded.plan(33).grid, Dim3::new(2, 2, 1));
        let (_, guarded) = resolve("reduce_guarded").unwrap();
        let (_, drop) = resolve("reduce_drop_tail").unwrap();
        assert_eq!(guarded.plan(611).grid.x, 3);
        assert_eq!(drop.plan(611).grid.x, 2);
        assert_eq!(
            drop.plan(255).grid.x,
            0,
            "drop-tail launches nothing below 256"
        );
        assert!(drop.known_broken.is_some() && guarded.known_broken.is_none());
        let (_, triad) = resolve("triad_f32").unwrap();
        assert_eq!(triad.position("alpha"), Some(4));
        assert_eq!(resolve("transpose_tiled").unwrap().1.name, "tiled");
        assert!(resolve("nope")
            .unwrap_err()
            .to_string()
            .contains("unknown kernel 'nope'"));
    }

    #[test]
    fn a_good_manifest_parses() {
        let m = parse_one(OK).unwrap();
        assert_eq!(m.kernels[0].block, Dim3::new(32, 8, 1));
        assert_eq!(m.program, "k.cu");
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
        bad(
            "block = [32, 0]",
            "block = [32, 8]",
            "kernel[0].block",
            "a dimension is 0",
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
            "does not appear",
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
        let e = parse("m.toml", "source = \"k.cu\"\nkernel = []\n", &|_| {
            Ok(("k".into(), SRC.into()))
        })
        .unwrap_err();
        assert_eq!(e.field, "kernel");
        let e = parse(
            "m.toml",
            &format!("source = \"gone.cu\"\n[[kernel]]\n{OK}"),
            &|s| Err(format!("cannot read {s}")),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "manifest m.toml: source: cannot read gone.cu"
        );
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
            matches!(&e, crate::registry::RegistryError::Manifest(m) if m.field == "file"),
            "{e}"
        );
    }
}
