//! A declared operation: what a kernel outside the built-in contracts computes, as its
//! manifest writes it in `[kernel.op]`. Size variables (`rows`, `cols`) are the shape;
//! every length, launch dimension and byte or FLOP count is an [`Expr`] over them. Buffers
//! have a dtype, a length and a role; outputs name the rule they are compared by; scalars
//! have a type and one or more values; the reference computes the expected outputs.
//!
//! ```toml
//! [[kernel]]
//! name = "layernorm"
//! entry = "layernorm_rows"
//! operation = "declared"
//! params = ["x", "y", "rows:i32", "cols:i32", "eps:f32"]   # the kernel's own order
//!
//! [kernel.op]
//! grid = ["rows"]
//! block = ["256"]
//! useful_bytes = "2 * rows * cols * 4"
//! flops = "8 * rows * cols"
//! reference = { c = "layernorm_ref.c:layernorm_ref" }      # same parameters as the kernel
//! sizes.rows = { values = [1, 7, 64, 1000] }
//! sizes.cols = { values = [1, 31, 32, 33, 1024] }
//! buffers.x = { dtype = "f32", len = "rows * cols", role = "in", range = [-2.0, 2.0] }
//! buffers.y = { dtype = "f32", len = "rows * cols", role = "out", shape = ["rows", "cols"],
//!               compare = { allclose = { atol = 1e-5, rtol = 1e-5 } } }
//! scalars.eps = { type = "f32", values = [1e-5] }
//! ```
//!
//! [`DeclaredOpSpec`] is the TOML as written; [`DeclaredOpSpec::validate`] checks it
//! against the kernel's parameter list and gives a [`DeclaredOp`], or the field and the
//! problem. Values that depend on a shape (lengths, the launch) are evaluated per case.
//! [`slices`] holds what `slices = "VAR"` means for the buffers, and its validation;
//! [`launches`] how the kernel is launched: once, or as a sequence of kernels.

pub mod builtin;
pub mod launches;
pub mod slices;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::rule::{NanRule, Precision, RuleSpec};
use klab_core::dtype::Dtype;
use klab_core::expr::Expr;
use klab_core::text::is_identifier;

/// A size variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeSpec {
    /// The values the check's ladder uses for this variable (else klab derives them).
    #[serde(default)]
    pub values: Option<Vec<u64>>,
    /// The smallest size the kernel accepts (default 1; 0 lets the ladder try empty).
    #[serde(default = "one")]
    pub min: u64,
    /// The largest size the kernel accepts (a shared-memory tile, say): the ladder and the
    /// index-overflow case stay at or below it.
    #[serde(default)]
    pub max: Option<u64>,
    /// A launch parameter (a block size, a tile): only its `values` are used, never scaled
    /// by the ladder, the index-overflow case or a sweep.
    #[serde(default)]
    pub launch: bool,
    /// Every size the kernel accepts is a multiple of this (default 1): a kernel that loads
    /// `float4`s declares 4. The ladder, the index-overflow case and every given shape keep
    /// to it, stepping by it where they would step by one.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub multiple: u64,
    /// The kernel walks this variable in steps of `tile` that its launch does not show (a
    /// Triton kernel's BLOCK over a row, a loop over shared-memory tiles): the ladder adds
    /// the sizes around one and two tiles, which it cannot find from the grid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<u64>,
}

impl SizeSpec {
    /// The largest value this variable may take.
    pub fn upper(&self) -> u64 {
        self.max.unwrap_or(u64::MAX)
    }

    /// Whether `v` is a size this variable may take: within min and max, and a multiple.
    pub fn admits(&self, v: u64) -> bool {
        v >= self.min && v <= self.upper() && v % self.multiple.max(1) == 0
    }

    /// The first multiple at or above `v` (saturating at the last one below u64::MAX).
    pub fn at_or_above(&self, v: u64) -> u64 {
        let m = self.multiple.max(1);
        v.div_ceil(m)
            .checked_mul(m)
            .unwrap_or_else(|| self.at_or_below(u64::MAX))
    }

    /// The last multiple at or below `v`.
    pub fn at_or_below(&self, v: u64) -> u64 {
        let m = self.multiple.max(1);
        v / m * m
    }

    /// The smallest non-empty size this variable may take.
    pub fn lowest(&self) -> u64 {
        self.at_or_above(self.min.max(1))
    }
}

fn one() -> u64 {
    1
}

fn is_one(v: &u64) -> bool {
    *v == 1
}

/// What a buffer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read by the kernel: generated, never compared.
    In,
    /// Written by the kernel: poisoned before each launch, compared.
    Out,
    /// Read and written: set before each launch like an input, compared afterwards.
    Inout,
    /// Working space: poisoned, never compared.
    Scratch,
}

impl Role {
    pub fn compared(self) -> bool {
        matches!(self, Role::Out | Role::Inout)
    }

    /// As the manifest writes it.
    pub fn name(self) -> &'static str {
        match self {
            Role::In => "in",
            Role::Out => "out",
            Role::Inout => "inout",
            Role::Scratch => "scratch",
        }
    }
}

/// One buffer parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferSpec {
    pub dtype: Dtype,
    /// Elements, over the size variables.
    pub len: Expr,
    pub role: Role,
    /// Row-major dimensions for naming a failing element (`[row 3, col 256]`); their
    /// product must equal `len`.
    #[serde(default)]
    pub shape: Option<Vec<Expr>>,
    /// Names of the shape's axes (default: the shape's expressions).
    #[serde(default)]
    pub axes: Option<Vec<String>>,
    /// How an output is compared with the reference's.
    #[serde(default)]
    pub compare: Option<RuleSpec>,
    #[serde(default)]
    pub nan: Option<NanRule>,
    /// The interval random inputs are drawn from (default by dtype); each end a number or
    /// an expression over the size variables (`[0, "V - 1"]`). On an integer buffer it is
    /// the buffer's domain, both ends included: every case stays inside it.
    #[serde(default, deserialize_with = "two")]
    pub range: Option<[Bound; 2]>,
    /// An integer input that indexes the rows of another buffer (`index_into = "wte"`):
    /// its domain is 0 to that buffer's first dimension less one.
    #[serde(default)]
    pub index_into: Option<String>,
    /// An integer input that holds the row offsets of a compressed layout (a CSR matrix's
    /// `row_ptr`: `offsets = "nnz"`): non-decreasing from 0 to this expression, which it
    /// reaches at its last element. Every case keeps to that, with its own spread of the
    /// entries over the rows (even, growing, random with empty rows, all in one row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offsets: Option<Expr>,
    /// A float input whose `range` every case keeps to, as an integer's does (a second
    /// moment in [0, 1], a logarithm's positive inputs): without it a float range bounds
    /// only the random draws.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub domain: bool,
}

/// One end of a buffer's range: a number, or an expression over the size variables.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    Number(f64),
    Expr(Expr),
}

impl Bound {
    /// Its value at `shape`.
    pub fn eval(&self, shape: &BTreeMap<String, i64>) -> Result<f64, klab_core::expr::ExprError> {
        match self {
            Bound::Number(x) => Ok(*x),
            Bound::Expr(e) => e.eval(shape).map(|v| v as f64),
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bound::Number(x) => write!(f, "{x}"),
            Bound::Expr(e) => write!(f, "\"{e}\""),
        }
    }
}

impl<'de> Deserialize<'de> for Bound {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bound, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Bound;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number or an expression over the size variables (\"V - 1\")")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Bound, E> {
                Ok(Bound::Number(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Bound, E> {
                Ok(Bound::Number(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Bound, E> {
                Ok(Bound::Number(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Bound, E> {
                Expr::parse(v).map(Bound::Expr).map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Serialize for Bound {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Bound::Number(x) => s.serialize_f64(*x),
            Bound::Expr(e) => e.serialize(s),
        }
    }
}

/// A scalar parameter that is not a size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalarSpec {
    #[serde(rename = "type")]
    pub ty: Dtype,
    /// Cases cycle through these values...
    #[serde(default, deserialize_with = "exact_values")]
    pub values: Vec<f64>,
    /// ...or draw each case's value from this interval (whole numbers for integer types).
    #[serde(default, deserialize_with = "exact_range")]
    pub range: Option<[f64; 2]>,
}

/// Scalar values as f64, refusing an integer that f64 cannot hold exactly (past 2^53):
/// read as a float it would reach the kernel as another number (9007199254740993 as
/// 9007199254740992).
fn exact_values<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Vec::<ExactNumber>::deserialize(d).map(|v| v.into_iter().map(|n| n.0).collect())
}

/// [`exact_values`] for a range's two ends.
fn exact_range<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<[f64; 2]>, D::Error> {
    two::<D, ExactNumber>(d).map(|r| r.map(|[lo, hi]| [lo.0, hi.0]))
}

/// A range's two ends, `[lo, hi]`: exactly two (serde's array reads the first two of a
/// longer list and ignores the rest).
fn two<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<[T; 2]>, D::Error> {
    let Some(v) = Option::<Vec<T>>::deserialize(d)? else {
        return Ok(None);
    };
    let n = v.len();
    <[T; 2]>::try_from(v)
        .map(Some)
        .map_err(|_| serde::de::Error::custom(format!("a range is [lo, hi], two values; got {n}")))
}

/// A TOML number as f64, an integer only where f64 holds it exactly.
struct ExactNumber(f64);

impl<'de> Deserialize<'de> for ExactNumber {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ExactNumber;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<ExactNumber, E> {
                Ok(ExactNumber(v))
            }
            fn visit_i64<E: serde::de::Error>(self, i: i64) -> Result<ExactNumber, E> {
                // On the integer itself: 2^53 + 1 as an f64 is already 2^53.
                if i.unsigned_abs() <= 1 << 53 {
                    Ok(ExactNumber(i as f64))
                } else {
                    Err(E::custom(format!(
                        "{i} is past 2^53, where klab cannot hold every integer exactly; give a value within +/-2^53"
                    )))
                }
            }
            fn visit_u64<E: serde::de::Error>(self, u: u64) -> Result<ExactNumber, E> {
                match i64::try_from(u) {
                    Ok(i) => self.visit_i64(i),
                    Err(_) => Err(E::custom(format!(
                        "{u} is past 2^53, where klab cannot hold every integer exactly; give a value within +/-2^53"
                    ))),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl ScalarSpec {
    /// The value for case `index`, as a parameter of the scalar's type holds it: the values
    /// cycled, or a low-discrepancy point of the range (the golden-ratio sequence: no two
    /// cases alike, both ends approached). A float is rounded to its type (0.1 as an f16 is
    /// 0.0999755859375), a drawn one inside the range, so that every reference computes
    /// with what the kernel gets and the kernel gets no value outside what was declared.
    pub fn value(&self, index: usize) -> f64 {
        let ty = self.ty;
        match self.range {
            Some([lo, hi]) => {
                let t = (index as f64 * 0.618_033_988_749_895).fract();
                if ty.is_float() {
                    ty.value_of_bits(ty.bits_within(lo + (hi - lo) * t, [lo, hi]))
                } else {
                    // Every whole number of [lo, hi] is reachable, hi included.
                    (lo.ceil() + ((hi.floor() - lo.ceil() + 1.0) * t).floor()).min(hi.floor())
                }
            }
            None if ty.is_float() => ty.nearest(self.values[index % self.values.len()]),
            None => self.values[index % self.values.len()],
        }
    }
}

/// Where the expected outputs come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum ReferenceSpec {
    /// `"file.c:function"`: a plain C function with the kernel's parameters, compiled by the
    /// system C compiler (the independent CPU oracle klab recommends).
    C(String),
    /// `"path.toml:name"`: a trusted kernel run on the same inputs.
    Kernel(String),
    /// A program that reads the inputs and writes the expected outputs as `.npy` files.
    Command(CommandSpec),
    /// A built-in operation's CPU oracle (`klab_engine::oracle`); stated by the
    /// built-in contracts, never written in a manifest.
    #[serde(skip_deserializing)]
    Builtin(builtin::BuiltinOracle),
}

/// A command reference as written: `command = ["python3", "ref.py"]`, or the table
/// `command = { argv = ["python3", "ref.py"], timeout_s = 60 }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The program and its arguments (no shell).
    pub argv: Vec<String>,
    /// The watchdog per call, seconds (default [`CommandSpec::DEFAULT_TIMEOUT_S`]).
    pub timeout_s: Option<u64>,
}

impl CommandSpec {
    /// How long one call may run unless `timeout_s` says otherwise.
    pub const DEFAULT_TIMEOUT_S: u64 = 120;
    /// The longest `timeout_s` accepted (a day): longer is a typo, not a reference.
    pub const MAX_TIMEOUT_S: u64 = 86_400;

    pub fn new(argv: Vec<String>) -> CommandSpec {
        CommandSpec {
            argv,
            timeout_s: None,
        }
    }

    /// The watchdog per call.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_s.unwrap_or(Self::DEFAULT_TIMEOUT_S))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandTable {
    argv: Vec<String>,
    #[serde(default)]
    timeout_s: Option<u64>,
}

impl<'de> Deserialize<'de> for CommandSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CommandSpec, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = CommandSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of strings (the program and its arguments) or a table { argv = [...], timeout_s = N }")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                a: A,
            ) -> Result<CommandSpec, A::Error> {
                let argv =
                    Vec::<String>::deserialize(serde::de::value::SeqAccessDeserializer::new(a))?;
                Ok(CommandSpec::new(argv))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                a: A,
            ) -> Result<CommandSpec, A::Error> {
                let t = CommandTable::deserialize(serde::de::value::MapAccessDeserializer::new(a))?;
                Ok(CommandSpec {
                    argv: t.argv,
                    timeout_s: t.timeout_s,
                })
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Serialize for CommandSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self.timeout_s {
            None => self.argv.serialize(s),
            Some(t) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("argv", &self.argv)?;
                m.serialize_entry("timeout_s", &t)?;
                m.end()
            }
        }
    }
}

/// `[kernel.op]` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredOpSpec {
    pub sizes: BTreeMap<String, SizeSpec>,
    pub buffers: BTreeMap<String, BufferSpec>,
    #[serde(default)]
    pub scalars: BTreeMap<String, ScalarSpec>,
    /// 1 to 3 expressions each; empty where every kernel of the operation gives its own
    /// (`launches`, [`launches`]).
    #[serde(default)]
    pub grid: Vec<Expr>,
    #[serde(default)]
    pub block: Vec<Expr>,
    #[serde(default)]
    pub dynamic_shared_bytes: Option<Expr>,
    pub useful_bytes: Expr,
    #[serde(default)]
    pub flops: Option<Expr>,
    pub reference: ReferenceSpec,
    /// The shape `klab bench`, `rounds` and `profile` time (a value per size variable).
    #[serde(default)]
    pub bench: Option<BTreeMap<String, u64>>,
    /// Shapes the user adds to the ladder, each optionally with inputs from `.npy` files.
    #[serde(default)]
    pub cases: Vec<CaseSpec>,
    /// The size variable whose slices are independent (`slices = "rows"`): each output
    /// slice depends on the same slice of the inputs and on the buffers that do not grow
    /// with it ([`slices`]). The index-overflow case then runs the reference on a
    /// sample of the slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices: Option<String>,
}

/// `cases = [{ shape = { rows = 4, cols = 1000 }, inputs = { x = "x.npy" } }]`: a shape
/// the ladder also runs (a production shape, say) and, when `inputs` names files, a case on
/// that data (real activations) beside the generated ones. Paths are relative to the
/// manifest; inputs not named are generated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub shape: BTreeMap<String, u64>,
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
}

/// One kernel parameter of a declared operation, in the kernel's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum OpParam {
    Buffer(String),
    /// A size variable passed as `dtype`.
    Size(String, Dtype),
    /// A declared scalar.
    Scalar(String, Dtype),
}

impl OpParam {
    /// The buffer, size or scalar passed.
    pub fn name(&self) -> &str {
        match self {
            OpParam::Buffer(n) | OpParam::Size(n, _) | OpParam::Scalar(n, _) => n,
        }
    }
}

/// A validated declared operation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeclaredOp {
    pub spec: DeclaredOpSpec,
    /// The operation's parameters, in the order its kernel (a kernel of one launch) and
    /// its reference take them.
    pub params: Vec<OpParam>,
    /// The kernel's launches when it is a sequence of several ([`launches`]); empty: one
    /// launch of the kernel's entry with `params` and the spec's grid and block.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sequence: Vec<launches::OpLaunch>,
}

/// An integer's value as given: whole (held exactly), or the number that is not.
type Given = Result<i128, f64>;

/// Types a scalar parameter can take.
pub const SCALAR_TYPES: [Dtype; 8] = [
    Dtype::I32,
    Dtype::U32,
    Dtype::I64,
    Dtype::U64,
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F32,
    Dtype::F64,
];

/// [`SCALAR_TYPES`] as messages list them: `i32 u32 ... f64`.
pub fn scalar_type_names() -> String {
    SCALAR_TYPES.map(Dtype::name).join(" ")
}

/// A problem with a field of `[kernel.op]` (the field relative to it, e.g. `buffers.y.compare`).
pub type FieldError = (String, String);

/// `problem` with `field`, as validation reports it.
fn bad<T>(field: &str, problem: String) -> Result<T, FieldError> {
    Err((field.to_string(), problem))
}

/// The working precision of a buffer compared by reference-error.
fn working_precision(b: &BufferSpec) -> Option<Precision> {
    match b.compare.as_ref()? {
        RuleSpec::ReferenceError { precision, .. } => {
            Some(precision.unwrap_or(Precision::default_for(b.dtype)))
        }
        _ => None,
    }
}

impl DeclaredOpSpec {
    /// The working precision the reference is also built in (rule reference-error; one
    /// per operation, checked by validation), if any output asks for one.
    pub fn working_precision(&self) -> Option<Precision> {
        self.buffers.values().find_map(working_precision)
    }

    /// Check the spec against the kernel's `params` (`"x"`, `"rows:i32"`, ...).
    /// Why `shape` is not a shape of this operation: a name that is no size variable, a
    /// value outside its range, or a variable left out.
    pub fn shape_problem(&self, shape: &BTreeMap<String, u64>) -> Result<(), String> {
        for (k, v) in shape {
            match self.sizes.get(k) {
                None => return Err(format!("'{k}' is not a size variable")),
                Some(s) if *v < s.min => return Err(format!("{k} = {v} is below min = {}", s.min)),
                Some(s) if *v > s.upper() => {
                    return Err(format!("{k} = {v} is above max = {}", s.upper()))
                }
                Some(s) if !s.admits(*v) => {
                    return Err(format!("{k} = {v} is not a multiple of {}", s.multiple))
                }
                Some(_) => {}
            }
        }
        if let Some(k) = self.sizes.keys().find(|k| !shape.contains_key(*k)) {
            return Err(format!("give {k} too: the shape needs every size variable"));
        }
        Ok(())
    }

    pub fn validate(self, params: &[String]) -> Result<DeclaredOp, FieldError> {
        self.check_sizes()?;
        // Empty: each kernel gives its own (`launches`); the manifest asks for them where
        // a kernel launches once.
        for (what, dims) in [("grid", &self.grid), ("block", &self.block)] {
            if !dims.is_empty() {
                self.check_launch_dims(what, dims)?;
            }
        }
        self.uses_only_sizes("useful_bytes", &self.useful_bytes)?;
        if let Some(e) = &self.flops {
            self.uses_only_sizes("flops", e)?;
        }
        if let Some(e) = &self.dynamic_shared_bytes {
            self.uses_only_sizes("dynamic_shared_bytes", e)?;
        }
        self.check_buffers()?;
        self.check_scalars()?;
        if let Some(var) = &self.slices {
            slices::check(&self, var).map_err(|e| ("slices".to_string(), e))?;
        }
        self.check_shapes_and_cases()?;
        self.check_reference()?;
        let out = self.parse_params(params)?;
        let seen: BTreeSet<&str> = out.iter().map(OpParam::name).collect();
        if let Some(b) = self.buffers.keys().find(|b| !seen.contains(b.as_str())) {
            return bad(
                "params",
                format!("buffer '{b}' is not among the kernel's parameters"),
            );
        }
        if let Some(s) = self.scalars.keys().find(|s| !seen.contains(s.as_str())) {
            return bad(
                "params",
                format!("scalar '{s}' is not among the kernel's parameters"),
            );
        }
        self.check_sizes_fit(&out)?;
        Ok(DeclaredOp {
            spec: self,
            params: out,
            sequence: Vec::new(),
        })
    }

    /// Each size variable: a usable name, an interval, values inside it.
    fn check_sizes(&self) -> Result<(), FieldError> {
        if self.sizes.is_empty() {
            return bad("sizes", "declare at least one size variable".into());
        }
        for (name, s) in &self.sizes {
            let field = format!("sizes.{name}");
            if !is_identifier(name) {
                return bad(&field, format!("'{name}' is not a usable name"));
            }
            if s.upper() < s.min {
                return bad(
                    &field,
                    format!("max = {} is below min = {}", s.upper(), s.min),
                );
            }
            if s.multiple == 0 {
                return bad(&field, "multiple = 0: give 1 or more".into());
            }
            if s.tile == Some(0) {
                return bad(&field, "tile = 0: give the kernel's step, 1 or more".into());
            }
            if s.tile.is_some() && (s.launch || s.values.is_some()) {
                return bad(
                    &field,
                    "tile shapes the derived ladder, which a launch parameter or given values replace: drop one"
                        .into(),
                );
            }
            if let Some(t) = s.tile.filter(|t| *t > s.upper()) {
                return bad(
                    &field,
                    format!(
                        "tile = {t} is above max = {}: no size reaches one tile",
                        s.upper()
                    ),
                );
            }
            if s.at_or_above(s.min) > s.upper() {
                return bad(
                    &field,
                    format!(
                        "no multiple of {} lies between min = {} and max = {}",
                        s.multiple,
                        s.min,
                        s.upper()
                    ),
                );
            }
            if s.launch && s.values.is_none() {
                return bad(
                    &field,
                    "a launch parameter takes its values as given: give values".into(),
                );
            }
            if let Some(v) = &s.values {
                if v.is_empty() {
                    return bad(&field, "values is empty".into());
                }
                if let Some(x) = v.iter().find(|x| **x < s.min) {
                    return bad(&field, format!("value {x} is below min = {}", s.min));
                }
                if let Some(x) = v.iter().find(|x| **x > s.upper()) {
                    return bad(&field, format!("value {x} is above max = {}", s.upper()));
                }
                if let Some(x) = v.iter().find(|x| !s.admits(**x)) {
                    return bad(
                        &field,
                        format!("value {x} is not a multiple of {}", s.multiple),
                    );
                }
            }
        }
        Ok(())
    }

    /// A variable's smallest size fits the integer the kernel receives it as (its listed
    /// values are checked against the type where the params are read).
    fn check_sizes_fit(&self, params: &[OpParam]) -> Result<(), FieldError> {
        for p in params {
            let OpParam::Size(name, dtype) = p else {
                continue;
            };
            let Some(s) = self.sizes.get(name) else {
                continue;
            };
            let most: u64 = match dtype {
                Dtype::I32 => i32::MAX as u64,
                Dtype::U32 => u32::MAX as u64,
                _ => i64::MAX as u64,
            };
            let field = format!("sizes.{name}");
            if s.lowest() > most {
                return bad(
                    &field,
                    format!(
                        "its smallest size, {}, does not fit the {dtype} the kernel takes it as",
                        s.lowest()
                    ),
                );
            }
        }
        Ok(())
    }

    /// The buffers: at least one compared, each valid ([`Self::check_buffer`]), none named
    /// as a size variable.
    fn check_buffers(&self) -> Result<(), FieldError> {
        if self.buffers.is_empty() {
            return bad("buffers", "declare at least one buffer".into());
        }
        if !self.buffers.values().any(|b| b.role.compared()) {
            return bad(
                "buffers",
                "no buffer has role out or inout: nothing would be checked".into(),
            );
        }
        for (name, b) in &self.buffers {
            self.check_buffer(name, b)?;
        }
        if let Some(b) = self.buffers.keys().find(|b| self.sizes.contains_key(*b)) {
            return bad(
                &format!("buffers.{b}"),
                format!("'{b}' is also a size variable"),
            );
        }
        Ok(())
    }

    /// One buffer: its name, length and shape over the sizes, its rule (outputs only), its
    /// domain (a range, row offsets, or rows of another buffer).
    fn check_buffer(&self, name: &str, b: &BufferSpec) -> Result<(), FieldError> {
        let uses_only_sizes = |field: &str, e: &Expr| self.uses_only_sizes(field, e);
        let field = |f: &str| format!("buffers.{name}.{f}");
        if !is_identifier(name) {
            return bad(
                &format!("buffers.{name}"),
                format!("'{name}' is not a usable name"),
            );
        }
        uses_only_sizes(&field("len"), &b.len)?;
        if let Some(shape) = &b.shape {
            for (i, e) in shape.iter().enumerate() {
                uses_only_sizes(&field(&format!("shape[{i}]")), e)?;
            }
            if let Some(axes) = &b.axes {
                if axes.len() != shape.len() {
                    return bad(
                        &field("axes"),
                        format!("{} names for {} dimensions", axes.len(), shape.len()),
                    );
                }
            }
        } else if b.axes.is_some() {
            return bad(
                &field("axes"),
                "axes name the dimensions of a shape; give shape".into(),
            );
        }
        match (&b.compare, b.role.compared()) {
            (None, true) => {
                return bad(
                    &field("compare"),
                    "an output needs a rule: \"bitwise\", \"exact\" (integers), { ulp = K } or { allclose = { atol, rtol } }".into(),
                )
            }
            (Some(_), false) => {
                return bad(
                    &field("compare"),
                    format!("a {:?} buffer is never compared", b.role).to_lowercase(),
                )
            }
            (Some(spec), true) => {
                if let RuleSpec::ScaledSum(k) = spec {
                    let k = Expr::parse(k).map_err(|e| (field("compare"), e.to_string()))?;
                    uses_only_sizes(&field("compare"), &k)?;
                }
                let rule = spec
                    .resolve(b.dtype, |_| Ok(1.0))
                    .map_err(|e| (field("compare"), e.to_string()))?;
                rule.check_dtype(b.dtype)
                    .map_err(|e| (field("compare"), e.to_string()))?;
            }
            (None, false) => {}
        }
        if b.nan.is_some() && !b.role.compared() {
            return bad(&field("nan"), "only outputs are compared".into());
        }
        if let Some([lo, hi]) = &b.range {
            for end in [lo, hi] {
                match end {
                    Bound::Number(x) if !x.is_finite() => {
                        return bad(&field("range"), format!("{x} is not a finite number"))
                    }
                    Bound::Number(x) if b.dtype.is_integer() && x.fract() != 0.0 => {
                        return bad(
                            &field("range"),
                            format!(
                                "{x} is not a whole number: an integer buffer's range is its domain"
                            ),
                        )
                    }
                    Bound::Number(_) => {}
                    Bound::Expr(e) => uses_only_sizes(&field("range"), e)?,
                }
            }
            if let (Bound::Number(lo), Bound::Number(hi)) = (lo, hi) {
                if lo > hi {
                    return bad(&field("range"), format!("[{lo}, {hi}] is not an interval"));
                }
            }
        }
        if b.domain {
            let problem = if b.range.is_none() {
                Some("domain keeps every case to the range: give range = [lo, hi]")
            } else if !matches!(b.role, Role::In | Role::Inout) {
                Some("only in and inout buffers are generated")
            } else {
                None
            };
            if let Some(p) = problem {
                return bad(&field("domain"), p.into());
            }
        }
        if let Some(total) = &b.offsets {
            uses_only_sizes(&field("offsets"), total)?;
            let problem = if b.range.is_some() || b.index_into.is_some() {
                Some("offsets is the buffer's domain: give it without range or index_into")
            } else if !b.dtype.is_integer() {
                Some("row offsets are integers")
            } else if b.role != Role::In {
                Some("only in buffers hold row offsets (klab makes them)")
            } else {
                None
            };
            if let Some(p) = problem {
                return bad(&field("offsets"), p.into());
            }
        }
        if let Some(target) = &b.index_into {
            let problem = if b.range.is_some() {
                Some("give range or index_into, not both".to_string())
            } else if !b.dtype.is_integer() {
                Some(format!("an index is an integer; {name} is {}", b.dtype))
            } else if !matches!(b.role, Role::In | Role::Inout) {
                Some("only in and inout buffers are generated".to_string())
            } else if target == name {
                Some(format!("{name} cannot index itself"))
            } else if !self.buffers.contains_key(target) {
                Some(format!("'{target}' is not a buffer"))
            } else {
                None
            };
            if let Some(p) = problem {
                return bad(&field("index_into"), p);
            }
        }
        Ok(())
    }

    /// Whether every value of float scalar `name` survives its rounding to `dtype`, as the
    /// kernel gets it: FLT_MAX written to 9 digits rounds to it, a step past rounds to
    /// infinity (65520 does in an f16), and 1e-8 rounds to zero in an f16. Either would
    /// run every case on another value than the manifest gives, silently.
    fn scalar_rounds_to_a_value(&self, name: &str, dtype: Dtype) -> Result<(), FieldError> {
        let s = &self.scalars[name];
        let ends = s.range.iter().flat_map(|[lo, hi]| [*lo, *hi]);
        let field = format!("scalars.{name}");
        if let Some([lo, hi]) = s.range {
            let inside = dtype.value_of_bits(dtype.bits_within(lo, [lo, hi]));
            if !(lo..=hi).contains(&inside) {
                return bad(
                    &field,
                    format!("range [{lo}, {hi}] holds no {dtype} value; widen it"),
                );
            }
        }
        for v in s.values.iter().copied().chain(ends) {
            let got = dtype.nearest(v);
            if got.is_infinite() {
                return bad(
                    &field,
                    format!(
                        "{v:e} rounds past the largest {dtype} ({:e}): the kernel would get infinity",
                        dtype.largest_finite().unwrap_or(f64::MAX)
                    ),
                );
            }
            if got == 0.0 && v != 0.0 {
                return bad(
                    &field,
                    format!("{v:e} rounds to 0 in an {dtype}: the kernel would get 0; give 0, or a value the type holds"),
                );
            }
        }
        Ok(())
    }

    /// Each scalar: its own name, a scalar type, finite values or an interval.
    fn check_scalars(&self) -> Result<(), FieldError> {
        for (name, s) in &self.scalars {
            let field = format!("scalars.{name}");
            if self.sizes.contains_key(name) || self.buffers.contains_key(name) {
                return bad(&field, format!("'{name}' is also a size or a buffer"));
            }
            if !SCALAR_TYPES.contains(&s.ty) {
                return bad(
                    &field,
                    format!(
                        "type {} is not a scalar type ({})",
                        s.ty,
                        scalar_type_names()
                    ),
                );
            }
            match s.range {
                Some(_) if !s.values.is_empty() => {
                    return bad(&field, "give values or a range, not both".into())
                }
                Some([lo, hi]) if !(lo.is_finite() && hi.is_finite() && lo <= hi) => {
                    return bad(&field, format!("range [{lo}, {hi}] is not an interval"))
                }
                Some(_) => {}
                None if s.values.is_empty() || s.values.iter().any(|v| !v.is_finite()) => {
                    return bad(&field, "give one or more finite values, or a range".into());
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The bench shape and each case's shape fit the sizes; a case's data goes to in and
    /// inout buffers only.
    fn check_shapes_and_cases(&self) -> Result<(), FieldError> {
        let shapes = self.bench.iter().map(|b| ("bench".to_string(), b)).chain(
            self.cases
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("cases[{i}].shape"), &c.shape)),
        );
        for (field, shape) in shapes {
            if let Err(why) = self.shape_problem(shape) {
                return bad(&field, why);
            }
        }
        for (i, c) in self.cases.iter().enumerate() {
            for name in c.inputs.keys() {
                match self.buffers.get(name) {
                    Some(b) if matches!(b.role, Role::In | Role::Inout) => {}
                    Some(b) => {
                        return bad(
                            &format!("cases[{i}].inputs.{name}"),
                            format!(
                                "{name} is a {:?} buffer; only in and inout buffers take data",
                                b.role
                            )
                            .to_lowercase(),
                        )
                    }
                    None => {
                        return bad(
                            &format!("cases[{i}].inputs.{name}"),
                            format!("'{name}' is not a buffer"),
                        )
                    }
                }
            }
        }
        Ok(())
    }

    /// The reference: FILE:NAME, a command with a program and a sane timeout; a rule that
    /// builds it in a working precision needs a C reference and one precision.
    fn check_reference(&self) -> Result<(), FieldError> {
        match &self.reference {
            ReferenceSpec::C(s) | ReferenceSpec::Kernel(s) => match s.rsplit_once(':') {
                Some((path, name)) if !path.is_empty() && is_identifier(name) => {}
                _ => {
                    return bad(
                        "reference",
                        format!("'{s}' is not FILE:NAME (e.g. \"ref.c:my_ref\")"),
                    )
                }
            },
            ReferenceSpec::Builtin(_) => {}
            ReferenceSpec::Command(c) => {
                if c.argv.first().is_none_or(|p| p.trim().is_empty()) {
                    return bad(
                        "reference",
                        "command needs a program, e.g. [\"python3\", \"ref.py\"]".into(),
                    );
                }
                if let Some(t) = c.timeout_s {
                    if !(1..=CommandSpec::MAX_TIMEOUT_S).contains(&t) {
                        return bad(
                            "reference",
                            format!(
                                "timeout_s = {t} is not 1 to {} seconds",
                                CommandSpec::MAX_TIMEOUT_S
                            ),
                        );
                    }
                }
            }
        }

        // Rule reference-error builds the reference a second time in a working precision:
        // only a C reference can be, and one build has one precision.
        let working: BTreeSet<(Precision, &String)> = self
            .buffers
            .iter()
            .filter_map(|(name, b)| Some((working_precision(b)?, name)))
            .collect();
        if let Some((_, name)) = working.first() {
            if !matches!(self.reference, ReferenceSpec::C(_)) {
                return bad(
                    &format!("buffers.{name}.compare"),
                    "reference-error computes the reference a second time in the kernel's precision, which needs a C reference (`reference = { c = \"FILE:FUNCTION\" }`) whose working type is the macro KLAB_REAL".into(),
                );
            }
            let precisions: BTreeSet<Precision> = working.iter().map(|w| w.0).collect();
            if precisions.len() > 1 {
                return bad(
                    &format!("buffers.{name}.compare"),
                    "reference-error asks for more than one working precision over this operation's outputs; one C reference is built in one (give every output the same precision)".into(),
                );
            }
        }

        Ok(())
    }

    /// Why expression `e` of `field` is not over this operation's size variables, if it
    /// is not.
    fn uses_only_sizes(&self, field: &str, e: &Expr) -> Result<(), FieldError> {
        match e
            .variables()
            .into_iter()
            .find(|v| !self.sizes.contains_key(v))
        {
            Some(v) => Err((
                field.to_string(),
                format!(
                    "'{e}' uses '{v}', which is not a size variable (sizes: {})",
                    self.sizes.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )),
            None => Ok(()),
        }
    }

    /// A launch's `grid` or `block` (`what`): 1 to 3 expressions over the sizes.
    fn check_launch_dims(&self, what: &str, dims: &[Expr]) -> Result<(), FieldError> {
        if dims.is_empty() || dims.len() > 3 {
            return Err((what.to_string(), "give 1 to 3 dimensions".into()));
        }
        for (i, e) in dims.iter().enumerate() {
            self.uses_only_sizes(&format!("{what}[{i}]"), e)?;
        }
        self.check_constant_dims(what, dims)
    }

    /// Dimensions that name no size are known now: one below 1, or a block of them all that
    /// no CUDA device can launch ([`crate::plan::block_problem`]: more than 1024 threads),
    /// is refused here as a built-in operation's block is, not at its first launch.
    fn check_constant_dims(&self, what: &str, dims: &[Expr]) -> Result<(), FieldError> {
        let mut values = [1u32; 3];
        let mut constant = true;
        for (i, e) in dims.iter().enumerate() {
            if !e.variables().is_empty() {
                constant = false;
                continue;
            }
            let v = e
                .eval(&BTreeMap::new())
                .map_err(|e| (format!("{what}[{i}]"), e.to_string()))?;
            match u32::try_from(v) {
                Ok(v) if v >= 1 => values[i] = v,
                _ => {
                    let value = match e.source().trim() == v.to_string() {
                        true => v.to_string(),
                        false => format!("{e} = {v}"),
                    };
                    return Err((
                        format!("{what}[{i}]"),
                        format!(
                            "{value}: a launch dimension is at least 1 and at most {}",
                            u32::MAX
                        ),
                    ));
                }
            }
        }
        if constant && what == "block" {
            let block = klab_core::device::Dim3::new(values[0], values[1], values[2]);
            if let Some(problem) = crate::plan::block_problem(block) {
                return Err((what.to_string(), problem));
            }
        }
        Ok(())
    }

    /// A kernel's parameter list (`"x"`, `"rows:i32"`, ...): each a buffer, or a size or
    /// scalar with its type, each once, and every value it can be given (declared, bench
    /// and case values) one its type holds. The field is `params[i]`, or the size's or
    /// scalar's own.
    fn parse_params(&self, params: &[String]) -> Result<Vec<OpParam>, FieldError> {
        let bad = |field: &str, problem: String| Err((field.to_string(), problem));
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, p) in params.iter().enumerate() {
            let field = format!("params[{i}]");
            let (name, ty) = match p.split_once(':') {
                Some((n, t)) => (n.trim(), Some(t.trim())),
                None => (p.trim(), None),
            };
            if !seen.insert(name.to_string()) {
                return bad(&field, format!("'{name}' appears twice"));
            }
            if self.buffers.contains_key(name) {
                if ty.is_some() {
                    return bad(&field, format!("'{name}' is a buffer; it takes no type"));
                }
                out.push(OpParam::Buffer(name.to_string()));
                continue;
            }
            let is_size = self.sizes.contains_key(name);
            if !is_size && !self.scalars.contains_key(name) {
                return bad(
                    &field,
                    format!("'{name}' is not a buffer, size or scalar of [kernel.op]"),
                );
            }
            let Some(t) = ty else {
                return bad(&field, format!("'{name}' needs a type, e.g. '{name}:i32'"));
            };
            let dtype: Dtype = t
                .parse()
                .ok()
                .filter(|d| SCALAR_TYPES.contains(d))
                .ok_or_else(|| {
                    (
                        field.clone(),
                        format!("'{t}' is not a scalar type ({})", scalar_type_names()),
                    )
                })?;
            if is_size && dtype.is_float() {
                return bad(&field, format!("size '{name}' is an integer, not {dtype}"));
            }
            out.push(if is_size {
                OpParam::Size(name.to_string(), dtype)
            } else {
                OpParam::Scalar(name.to_string(), dtype)
            });
        }
        // A scalar's declared type is the type the kernel takes it as: two would leave one
        // silently overridden.
        for p in &out {
            if let OpParam::Scalar(n, d) = p {
                let declared = self.scalars[n].ty;
                if declared != *d {
                    return bad(
                        &format!("scalars.{n}.type"),
                        format!("is {declared}, but params takes '{n}:{d}'; give one type"),
                    );
                }
            }
        }
        // Values a parameter's type cannot hold would reach the kernel wrapped (or, for a
        // float narrower than f64, as infinity).
        for p in &out {
            if let OpParam::Scalar(n, d) = p {
                if d.is_float() {
                    self.scalar_rounds_to_a_value(n, *d)?;
                    continue;
                }
            }
            // Each value with the field it was given in, compared as integers: a u64 past
            // i64::MAX rounds, as an f64, onto i64::MAX's own neighbour.
            let whole = |v: f64| {
                (v.fract() == 0.0 && v.abs() < 2f64.powi(64))
                    .then_some(v as i128)
                    .ok_or(v)
            };
            let (name, dtype, values): (&str, Dtype, Vec<(String, Given)>) = match p {
                // Declared values, the bench shape and the user's case shapes.
                OpParam::Size(n, d) => {
                    let at = |field: String| move |v: &u64| (field.clone(), Ok(i128::from(*v)));
                    let declared = self.sizes[n].values.iter().flatten();
                    let values = declared
                        .map(at(format!("sizes.{n}")))
                        .chain(
                            self.bench
                                .iter()
                                .filter_map(|b| b.get(n))
                                .map(at("bench".into())),
                        )
                        .chain(self.cases.iter().enumerate().filter_map(|(i, c)| {
                            c.shape.get(n).map(at(format!("cases[{i}].shape")))
                        }))
                        .collect();
                    (n, *d, values)
                }
                OpParam::Scalar(n, d) if !d.is_float() => {
                    let s = &self.scalars[n];
                    let field = format!("scalars.{n}");
                    let ends = s.range.iter().flat_map(|[lo, hi]| [lo.floor(), hi.floor()]);
                    let values = s.values.iter().copied().chain(ends);
                    (n, *d, values.map(|v| (field.clone(), whole(v))).collect())
                }
                _ => continue,
            };
            let (lo, hi): (i128, i128) = match dtype {
                Dtype::I32 => (i32::MIN.into(), i32::MAX.into()),
                Dtype::U32 => (0, u32::MAX.into()),
                Dtype::I64 => (i64::MIN.into(), i64::MAX.into()),
                // Integers travel as i64 on their way to the kernel.
                _ => (0, i64::MAX.into()),
            };
            if let Some((field, v)) = values
                .iter()
                .find(|(_, v)| v.is_err() || v.is_ok_and(|i| i < lo || i > hi))
            {
                let what = if field.starts_with("sizes") || field.starts_with("scalars") {
                    String::new()
                } else {
                    format!("{name} = ")
                };
                let v = match v {
                    Ok(i) => i.to_string(),
                    Err(f) => f.to_string(),
                };
                // klab's integers travel as i64: a u64 holds more than it passes.
                let holds = match dtype {
                    Dtype::U64 => format!("klab passes as a {dtype} (0 to {hi})"),
                    _ => format!("{dtype} holds"),
                };
                return bad(
                    field,
                    format!("{what}{v} is not a whole number that {holds}"),
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYERNORM: &str = r#"
grid = ["rows"]
block = ["256"]
useful_bytes = "2 * rows * cols * 4"
flops = "8 * rows * cols"
reference = { c = "layernorm_ref.c:layernorm_ref" }
sizes.rows = { values = [1, 7, 64] }
sizes.cols = {}
buffers.x = { dtype = "f32", len = "rows * cols", role = "in", range = [-2.0, 2.0] }
buffers.y = { dtype = "f32", len = "rows * cols", role = "out", shape = ["rows", "cols"], axes = ["row", "col"], compare = { allclose = { atol = 1e-5, rtol = 1e-5 } } }
scalars.eps = { type = "f32", values = [1e-5] }
"#;

    fn params() -> Vec<String> {
        ["x", "y", "rows:i32", "cols:i32", "eps:f32"]
            .map(String::from)
            .to_vec()
    }

    fn check(text: &str, params: &[String]) -> Result<DeclaredOp, FieldError> {
        let spec: DeclaredOpSpec =
            toml::from_str(text).map_err(|e| ("toml".into(), e.to_string()))?;
        spec.validate(params)
    }

    #[test]
    fn a_scalar_range_gives_every_case_its_own_value_inside_it() {
        let s = ScalarSpec {
            ty: Dtype::F32,
            values: vec![],
            range: Some([0.25, 2.75]),
        };
        let v: Vec<f64> = (0..8).map(|i| s.value(i)).collect();
        assert!(v.iter().all(|x| (0.25..=2.75).contains(x)), "{v:?}");
        let distinct: std::collections::BTreeSet<u64> = v.iter().map(|x| x.to_bits()).collect();
        assert_eq!(distinct.len(), v.len(), "{v:?}");
        let i = ScalarSpec {
            ty: Dtype::I32,
            values: vec![],
            range: Some([-3.0, 9.0]),
        };
        assert!((0..8).all(|k| i.value(k).fract() == 0.0));
        let two = ScalarSpec {
            ty: Dtype::I32,
            values: vec![],
            range: Some([0.0, 1.0]),
        };
        let seen: std::collections::BTreeSet<i64> = (0..8).map(|k| two.value(k) as i64).collect();
        assert_eq!(seen, [0, 1].into(), "both ends of an integer range");
        let lists = ScalarSpec {
            ty: Dtype::F32,
            values: vec![1.0, 2.0],
            range: None,
        };
        assert_eq!(
            [lists.value(0), lists.value(1), lists.value(2)],
            [1.0, 2.0, 1.0]
        );
        // An f16's values are f16s, a drawn one inside the range (0.1 rounds to nearest
        // below it), a listed one the nearest.
        let half = ScalarSpec {
            ty: Dtype::F16,
            values: vec![],
            range: Some([0.1, 0.2]),
        };
        for k in 0..64 {
            let v = half.value(k);
            assert!((0.1..=0.2).contains(&v), "{k}: {v}");
            assert_eq!(Dtype::F16.nearest(v), v, "{k}: {v} is an f16");
        }
        let listed = ScalarSpec {
            ty: Dtype::F16,
            values: vec![0.1],
            range: None,
        };
        assert_eq!(listed.value(0), 0.0999755859375);
        // Exactly two ends: a longer list is refused, not cut to its first two.
        let read = |t: &str| toml::from_str::<ScalarSpec>(t).map_err(|e| e.to_string());
        assert_eq!(
            read("type = \"f32\"\nrange = [0.5, 1.5]").unwrap().range,
            Some([0.5, 1.5])
        );
        let e = read("type = \"f32\"\nrange = [0.5, 1.5, 9.0]").unwrap_err();
        assert!(e.contains("two values; got 3"), "{e}");
    }

    /// `domain = true` on a float input needs its range, and an input.
    #[test]
    fn a_float_domain_needs_a_range_and_an_input() {
        let x = "buffers.x = { dtype = \"f32\", len = \"rows * cols\", role = \"in\", range = [-2.0, 2.0] }";
        let ok = LAYERNORM.replace(
            x,
            &x.replace("range = [-2.0, 2.0]", "range = [0.0, 1.0], domain = true"),
        );
        let op = check(&ok, &params()).unwrap();
        assert!(op.spec.buffers["x"].domain);
        let (field, why) = check(
            &LAYERNORM.replace(x, &x.replace("range = [-2.0, 2.0]", "domain = true")),
            &params(),
        )
        .unwrap_err();
        assert_eq!(field, "buffers.x.domain");
        assert!(why.contains("give range"), "{why}");
        // Not written back when absent.
        let plain = check(LAYERNORM, &params()).unwrap();
        let json = serde_json::to_string(&plain.spec.buffers["x"]).unwrap();
        assert!(!json.contains("domain"), "{json}");
    }

    /// `multiple`: every value, the bench shape and a given shape keep to it; a multiple
    /// no size between min and max can be, or 0, is refused naming the field; so is a tile
    /// of 0 or one beside given values.
    #[test]
    fn sizes_declared_a_multiple_keep_to_it_everywhere() {
        let with = |cols: &str| LAYERNORM.replace("sizes.cols = {}", cols);
        let op = check(&with("sizes.cols = { multiple = 4 }"), &params()).unwrap();
        let cols = &op.spec.sizes["cols"];
        assert!(cols.admits(8) && !cols.admits(6) && !cols.admits(0));
        assert_eq!(
            (cols.lowest(), cols.at_or_above(5), cols.at_or_below(7)),
            (4, 8, 4)
        );
        let shape = |c: u64| BTreeMap::from([("rows".into(), 7), ("cols".into(), c)]);
        assert!(op.spec.shape_problem(&shape(12)).is_ok());
        let e = op.spec.shape_problem(&shape(10)).unwrap_err();
        assert_eq!(e, "cols = 10 is not a multiple of 4");
        for (cols, says) in [
            (
                "sizes.cols = { multiple = 4, values = [4, 6] }",
                "value 6 is not a multiple of 4",
            ),
            ("sizes.cols = { multiple = 0 }", "multiple = 0"),
            ("sizes.cols = { tile = 0 }", "tile = 0"),
            (
                "sizes.cols = { tile = 64, max = 32 }",
                "tile = 64 is above max = 32",
            ),
            (
                "sizes.cols = { tile = 64, values = [1, 64] }",
                "which a launch parameter or given values replace",
            ),
            (
                "sizes.cols = { multiple = 8, min = 9, max = 15 }",
                "no multiple of 8 lies between min = 9 and max = 15",
            ),
            (
                "sizes.cols = { multiple = 4 }\nbench = { rows = 7, cols = 1022 }",
                "cols = 1022 is not a multiple of 4",
            ),
        ] {
            let (field, why) = check(&with(cols), &params()).unwrap_err();
            assert!(
                field.starts_with("sizes.cols") || field == "bench",
                "{field}"
            );
            assert!(why.contains(says), "{cols}: {why}");
        }
        // Sizes that no i32 holds, for a kernel that takes the size as an i32.
        for (cols, says) in [
            (
                "sizes.cols = { multiple = 2147483648 }",
                "its smallest size, 2147483648, does not fit the i32",
            ),
            (
                "sizes.cols = { values = [4, 4294967296] }",
                "4294967296 is not a whole number that i32 holds",
            ),
        ] {
            let (field, why) = check(&with(cols), &params()).unwrap_err();
            assert_eq!(field, "sizes.cols");
            assert!(why.contains(says), "{cols}: {why}");
        }
        // The empty case alone is a size too.
        check(&with("sizes.cols = { min = 0, max = 0 }"), &params()).unwrap();
        // Not written back when it is the default: manifests and receipts stay as they were.
        let plain = check(LAYERNORM, &params()).unwrap();
        let json = serde_json::to_string(&plain.spec.sizes["cols"]).unwrap();
        assert!(!json.contains("multiple"), "{json}");
    }

    #[test]
    fn a_layer_norm_declares_its_parameters_in_the_kernels_order() {
        let op = check(LAYERNORM, &params()).unwrap();
        assert_eq!(
            op.params,
            vec![
                OpParam::Buffer("x".into()),
                OpParam::Buffer("y".into()),
                OpParam::Size("rows".into(), Dtype::I32),
                OpParam::Size("cols".into(), Dtype::I32),
                OpParam::Scalar("eps".into(), Dtype::F32),
            ]
        );
        assert_eq!(op.spec.sizes["cols"].min, 1);
        assert_eq!(
            op.spec.reference,
            ReferenceSpec::C("layernorm_ref.c:layernorm_ref".into())
        );
    }

    /// A u64 scalar passes what an i64 holds (klab's integers travel as i64), and says so.
    #[test]
    fn a_u64_scalar_past_i64_says_what_klab_passes() {
        let text = LAYERNORM.replace(
            "scalars.eps = { type = \"f32\", values = [1e-5] }",
            "scalars.eps = { type = \"u64\", values = [1e19] }",
        );
        let params: Vec<String> = ["x", "y", "rows:i32", "cols:i32", "eps:u64"]
            .map(String::from)
            .to_vec();
        let (field, why) = check(&text, &params).unwrap_err();
        assert_eq!(field, "scalars.eps");
        assert_eq!(
            why,
            "10000000000000000000 is not a whole number that klab passes as a u64 (0 to 9223372036854775807)"
        );
    }

    /// A refused size is printed as given (as an f64, 9223372036854775807 printed as ...808),
    /// and the largest integer TOML holds passes an i64 parameter.
    #[test]
    fn a_refused_size_is_printed_as_given() {
        let wide = |ty: &str| {
            ["x", "y", "rows:i32"]
                .into_iter()
                .map(String::from)
                .chain([format!("cols:{ty}"), "eps:f32".into()])
                .collect::<Vec<_>>()
        };
        for (ty, value, ok) in [
            ("i64", "9223372036854775807", true),
            ("u64", "9223372036854775807", true),
            ("i32", "9223372036854775807", false),
            ("u32", "9223372036854775807", false),
            ("i32", "2147483648", false),
        ] {
            let sizes = format!("sizes.cols = {{ values = [4, {value}] }}");
            let r = check(&LAYERNORM.replace("sizes.cols = {}", &sizes), &wide(ty));
            match ok {
                true => assert!(r.is_ok(), "{ty} {value}: {r:?}"),
                false => {
                    let (field, why) = r.unwrap_err();
                    assert_eq!(field, "sizes.cols");
                    assert!(
                        why.contains(&format!("{value} is not a whole number that {ty} holds")),
                        "{ty} {value}: {why}"
                    );
                }
            }
        }
    }

    /// A size value a parameter's type cannot hold is refused naming the field it was given
    /// in (a bench shape's was blamed on the size variable), and a shape outside the limits
    /// says which limit (not "outside min = 1 to max = 18446744073709551615").
    #[test]
    fn a_size_value_out_of_range_names_where_it_was_given() {
        for (extra, field, says) in [
            (
                "bench = { rows = 4294967296, cols = 3 }",
                "bench",
                "rows = 4294967296 is not a whole number that i32 holds",
            ),
            (
                "cases = [{ shape = { rows = 3, cols = 4294967296 } }]",
                "cases[0].shape",
                "cols = 4294967296 is not",
            ),
            (
                "bench = { rows = 0, cols = 3 }",
                "bench",
                "rows = 0 is below min = 1",
            ),
        ] {
            let (f, why) = check(&format!("{LAYERNORM}\n{extra}"), &params()).unwrap_err();
            assert_eq!(f, field, "{extra}: {why}");
            assert!(why.contains(says), "{extra}: {why}");
        }
    }

    /// A scalar value the kernel would not get as written is refused: an f32 past f32's
    /// largest (the kernel got infinity), a type that params contradicts (params won
    /// silently), an integer past 2^53 (klab holds values as f64 and rounded it).
    #[test]
    fn a_scalar_the_kernel_would_not_get_as_declared_is_refused() {
        let eps = |spec: &str, ty: &str| {
            let mut p = params();
            p[4] = format!("eps:{ty}");
            check(
                &LAYERNORM.replace(
                    "scalars.eps = { type = \"f32\", values = [1e-5] }",
                    &format!("scalars.eps = {spec}"),
                ),
                &p,
            )
        };
        for (spec, ty, says) in [
            (
                r#"{ type = "f32", values = [1e39] }"#,
                "f32",
                "1e39 rounds past the largest f32",
            ),
            (
                r#"{ type = "f32", range = [3e38, 1e39] }"#,
                "f32",
                "rounds past the largest f32",
            ),
            (
                r#"{ type = "f32", values = [3.4028236e38] }"#,
                "f32",
                "rounds past the largest f32",
            ),
            (
                r#"{ type = "i64", range = [0, 9007199254740993] }"#,
                "i64",
                "is past 2^53",
            ),
            (
                r#"{ type = "i64", values = ["3"] }"#,
                "i64",
                "expected a number",
            ),
            (
                r#"{ type = "i32", values = [2] }"#,
                "f32",
                "is i32, but params takes 'eps:f32'",
            ),
            (
                r#"{ type = "i64", values = [9007199254740993] }"#,
                "i64",
                "is past 2^53",
            ),
        ] {
            let (field, why) = eps(spec, ty).unwrap_err();
            // An inexact integer is refused as the TOML is read, before the rest is checked.
            assert!(
                field.starts_with("scalars.eps") || field == "toml",
                "{spec}: {field}"
            );
            assert!(why.contains(says), "{spec}: {why}");
        }
        eps(r#"{ type = "f32", values = [3e38] }"#, "f32").unwrap();
        // FLT_MAX as C writes it rounds to the largest f32, not to infinity.
        eps(
            r#"{ type = "f32", values = [3.40282347e38, -3.4028235e38] }"#,
            "f32",
        )
        .unwrap();
        eps(r#"{ type = "f64", values = [1e39] }"#, "f64").unwrap();
        eps(r#"{ type = "i64", values = [9007199254740992] }"#, "i64").unwrap();
    }

    #[test]
    fn a_range_end_can_be_an_expression_and_an_index_names_its_table() {
        let ids = |spec: &str| {
            LAYERNORM.replace(
                "scalars.eps",
                &format!(
                    "buffers.ids = {{ dtype = \"i32\", len = \"rows\", role = \"in\", {spec} }}\nscalars.eps"
                ),
            )
        };
        let with_ids = |spec: &str| {
            let mut p = params();
            p.push("ids".into());
            check(&ids(spec), &p)
        };
        let op = with_ids("range = [0, \"cols - 1\"]").unwrap();
        let r = op.spec.buffers["ids"].range.as_ref().unwrap();
        assert_eq!(r[0], Bound::Number(0.0));
        assert_eq!(r[1], Bound::Expr(Expr::parse("cols - 1").unwrap()));
        let shape = BTreeMap::from([("rows".into(), 3), ("cols".into(), 64)]);
        assert_eq!(r[1].eval(&shape).unwrap(), 63.0);
        assert!(with_ids("index_into = \"x\"").is_ok());
        for (spec, field, says) in [
            ("range = [0, \"V - 1\"]", "buffers.ids.range", "'V'"),
            ("range = [0, \"cols -\"]", "toml", "expression"),
            ("range = [0.5, 4]", "buffers.ids.range", "whole number"),
            ("range = [0, 4, 9]", "toml", "two values; got 3"),
            ("range = [0]", "toml", "two values; got 1"),
            (
                "range = [0, 4], index_into = \"x\"",
                "buffers.ids.index_into",
                "not both",
            ),
            ("index_into = \"ids\"", "buffers.ids.index_into", "itself"),
            (
                "index_into = \"w\"",
                "buffers.ids.index_into",
                "'w' is not a buffer",
            ),
        ] {
            let (f, problem) = with_ids(spec).unwrap_err();
            assert_eq!(f, field, "{spec}: {problem}");
            assert!(problem.contains(says), "{spec}: {problem}");
        }
        let float_index = LAYERNORM.replace("range = [-2.0, 2.0]", "index_into = \"y\"");
        let (f, problem) = check(&float_index, &params()).unwrap_err();
        assert_eq!(f, "buffers.x.index_into", "{problem}");
        // A float range keeps its numbers, written back as they were.
        let op = check(LAYERNORM, &params()).unwrap();
        let back = toml::to_string(&op.spec.buffers["x"]).unwrap();
        assert!(back.contains("range = [-2.0, 2.0]"), "{back}");
    }

    #[test]
    fn row_offsets_are_an_integer_input_with_a_total_over_the_sizes() {
        let with_rp = |spec: &str| {
            let mut p = params();
            p.push("rp".into());
            check(
                &LAYERNORM.replace(
                    "scalars.eps",
                    &format!("buffers.rp = {{ len = \"rows + 1\", {spec} }}\nscalars.eps"),
                ),
                &p,
            )
        };
        let op = with_rp("dtype = \"i32\", role = \"in\", offsets = \"rows * cols\"").unwrap();
        assert!(op.spec.buffers["rp"].offsets.is_some());
        for (spec, says) in [
            (
                "dtype = \"f32\", role = \"in\", offsets = \"cols\"",
                "integers",
            ),
            (
                "dtype = \"i32\", role = \"out\", compare = \"exact\", offsets = \"cols\"",
                "only in buffers",
            ),
            (
                "dtype = \"i32\", role = \"in\", offsets = \"cols\", range = [0, 3]",
                "without range",
            ),
            ("dtype = \"i32\", role = \"in\", offsets = \"nnz\"", "'nnz'"),
        ] {
            let (f, problem) = with_rp(spec).unwrap_err();
            assert_eq!(f, "buffers.rp.offsets", "{spec}: {problem}");
            assert!(problem.contains(says), "{spec}: {problem}");
        }
    }

    #[test]
    fn reference_error_needs_a_c_reference_and_one_working_precision() {
        let ln = LAYERNORM.replace(
            "{ allclose = { atol = 1e-5, rtol = 1e-5 } }",
            "{ reference-error = { k = 8, atol = 1e-6 } }",
        );
        let op = check(&ln, &params()).unwrap();
        assert_eq!(op.spec.working_precision(), Some(Precision::F32));
        assert_eq!(
            check(LAYERNORM, &params())
                .unwrap()
                .spec
                .working_precision(),
            None
        );
        let command = ln.replace(
            "reference = { c = \"layernorm_ref.c:layernorm_ref\" }",
            "reference = { command = [\"python3\", \"ref.py\"] }",
        );
        assert_ne!(command, ln);
        let (f, problem) = check(&command, &params()).unwrap_err();
        assert_eq!(f, "buffers.y.compare", "{problem}");
        assert!(problem.contains("needs a C reference"), "{problem}");
        // Two outputs in two working precisions cannot share one second build.
        let two = ln
            .replace("scalars.eps", "buffers.z = { dtype = \"f64\", len = \"rows\", role = \"out\", compare = { reference-error = { k = 8, atol = 0 } } }\nscalars.eps");
        let mut p = params();
        p.push("z".into());
        let (f, problem) = check(&two, &p).unwrap_err();
        assert!(
            f.ends_with(".compare") && problem.contains("one working precision"),
            "{f}: {problem}"
        );
        // An integer output has no rounding error.
        let ints = ln.replace(
            "buffers.y = { dtype = \"f32\"",
            "buffers.y = { dtype = \"i32\"",
        );
        let (f, problem) = check(&ints, &params()).unwrap_err();
        assert_eq!(f, "buffers.y.compare", "{problem}");
    }

    #[test]
    fn each_problem_names_its_field() {
        let cases: [(&str, &str, &str); 15] = [
            (
                "values = [1e-5] }",
                "values = [1e-5], range = [0.0, 1.0] }",
                "scalars.eps",
            ),
            ("values = [1e-5] }", "range = [1.0, 0.0] }", "scalars.eps"),
            (
                "len = \"rows * cols\", role = \"in\"",
                "len = \"rows * depth\", role = \"in\"",
                "buffers.x.len",
            ),
            (
                "compare = { allclose = { atol = 1e-5, rtol = 1e-5 } }",
                "compare = \"exact\"",
                "buffers.y.compare",
            ),
            (
                ", compare = { allclose = { atol = 1e-5, rtol = 1e-5 } }",
                "",
                "buffers.y.compare",
            ),
            (
                "role = \"in\", range",
                "role = \"in\", compare = \"bitwise\", range",
                "buffers.x.compare",
            ),
            ("grid = [\"rows\"]", "grid = [\"rows\", \"eps\"]", "grid[1]"),
            (
                "grid = [\"rows\"]",
                "grid = [\"rows\", \"1\", \"1\", \"1\"]",
                "grid",
            ),
            (
                "c = \"layernorm_ref.c:layernorm_ref\"",
                "c = \"layernorm_ref.c\"",
                "reference",
            ),
            (
                "range = [-2.0, 2.0]",
                "range = [2.0, -2.0]",
                "buffers.x.range",
            ),
            ("values = [1, 7, 64]", "values = [0, 7]", "sizes.rows"),
            // A block or grid that names no size is known at load: one no device launches
            // is refused there.
            ("block = [\"256\"]", "block = [\"0\"]", "block[0]"),
            ("block = [\"256\"]", "block = [\"4096\"]", "block"),
            ("block = [\"256\"]", "block = [\"32\", \"64\"]", "block"),
            (
                "grid = [\"rows\"]",
                "grid = [\"rows\", \"2 - 3\"]",
                "grid[1]",
            ),
        ];
        for (from, to, field) in cases {
            let text = LAYERNORM.replace(from, to);
            assert_ne!(text, LAYERNORM, "{from}");
            let (f, problem) = check(&text, &params()).unwrap_err();
            assert_eq!(f, field, "{to}: {problem}");
        }
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let e = check(LAYERNORM, &p(&["x", "rows:i32", "cols:i32", "eps:f32"])).unwrap_err();
        assert_eq!(e.0, "params");
        assert!(e.1.contains("buffer 'y'"), "{e:?}");
        let e = check(
            LAYERNORM,
            &p(&["x", "y", "rows:f32", "cols:i32", "eps:f32"]),
        )
        .unwrap_err();
        assert_eq!(e.0, "params[2]");
        let e = check(LAYERNORM, &p(&["x", "y", "rows", "cols:i32", "eps:f32"])).unwrap_err();
        assert!(e.1.contains("needs a type"), "{e:?}");
        let e = check(
            LAYERNORM,
            &p(&["x", "y", "rows:i32", "cols:i32", "eps:f32", "z:i32"]),
        )
        .unwrap_err();
        assert_eq!(e.0, "params[5]");
        let e = check(
            LAYERNORM,
            &p(&["x", "x", "y", "rows:i32", "cols:i32", "eps:f32"]),
        )
        .unwrap_err();
        assert!(e.1.contains("twice"), "{e:?}");
        let e = check(
            &LAYERNORM.replace("role = \"out\"", "role = \"scratch\""),
            &params(),
        )
        .unwrap_err();
        assert_eq!(e.0, "buffers");
        let e = check(
            &LAYERNORM.replace("sizes.cols = {}", "sizes.cols = { vals = [1] }"),
            &params(),
        )
        .unwrap_err();
        assert_eq!(e.0, "toml", "unknown fields are refused: {e:?}");
    }

    #[test]
    fn a_command_reference_is_a_list_or_a_table_with_a_timeout() {
        let c = |r: &str| {
            check(
                &LAYERNORM.replace("{ c = \"layernorm_ref.c:layernorm_ref\" }", r),
                &params(),
            )
        };
        let op = c("{ command = [\"python3\", \"ref.py\"] }").unwrap();
        let ReferenceSpec::Command(cmd) = &op.spec.reference else {
            panic!("{:?}", op.spec.reference)
        };
        assert_eq!(
            cmd,
            &CommandSpec::new(vec!["python3".into(), "ref.py".into()])
        );
        assert_eq!(cmd.timeout().as_secs(), CommandSpec::DEFAULT_TIMEOUT_S);
        let op = c("{ command = { argv = [\"./ref\", \"{dir}\"], timeout_s = 5 } }").unwrap();
        let ReferenceSpec::Command(cmd) = &op.spec.reference else {
            panic!()
        };
        assert_eq!(cmd.argv, ["./ref", "{dir}"]);
        assert_eq!(cmd.timeout().as_secs(), 5);
        // Both forms serialize back to what they were.
        let j = serde_json::to_string(&op.spec.reference).unwrap();
        assert_eq!(j, r#"{"command":{"argv":["./ref","{dir}"],"timeout_s":5}}"#);
        let j = serde_json::to_string(&ReferenceSpec::Command(CommandSpec::new(vec!["x".into()])))
            .unwrap();
        assert_eq!(j, r#"{"command":["x"]}"#);
        for (r, needle) in [
            ("{ command = [] }", "needs a program"),
            ("{ command = [\"\"] }", "needs a program"),
            (
                "{ command = { argv = [\"x\"], timeout_s = 0 } }",
                "timeout_s = 0",
            ),
        ] {
            let (field, problem) = c(r).unwrap_err();
            assert_eq!(field, "reference", "{r}");
            assert!(problem.contains(needle), "{r}: {problem}");
        }
        let (field, problem) = c("{ command = { argv = [\"x\"], timeout = 5 } }").unwrap_err();
        assert_eq!(field, "toml");
        assert!(problem.contains("timeout"), "{problem}");
    }
}
