//! Comparison rules: how one output's bytes are judged against the reference's bytes.
//!
//! Every declared output carries a [`Comparison`]: a [`Rule`] and a [`NanRule`]. The rules,
//! for elements `got` (the kernel's) and `want` (the reference's) of one dtype:
//!
//! - [`Rule::Bitwise`] (any dtype): the element's bytes are equal. -0.0 differs from +0.0
//!   and a NaN must keep its payload.
//! - [`Rule::Exact`] (integer dtypes only): the values are equal.
//! - [`Rule::Ulp`] (float dtypes only): the distance in units in the last place of the
//!   dtype is at most `max`. Bit patterns map monotonically to integers (sign-magnitude
//!   to two's complement, +0 and -0 both to 0), and the distance is the difference of the
//!   two integers: the count of representable values stepped over. Subnormals are
//!   therefore spaced by one ulp of the smallest binade (the spacing they really have),
//!   and a step across zero counts the values on both sides with one zero. An infinity
//!   matches only the infinity of the same sign (never "one ulp above the largest
//!   finite").
//! - [`Rule::AllClose`] (any dtype): NumPy's `|got - want| <= atol + rtol * |want|`,
//!   evaluated in f64 after decoding (integers: the difference is taken exactly in i128,
//!   then converted). An infinity matches only the same infinity.
//! - [`Rule::ScaledSum`] (float dtypes only): the reduction lab's gate,
//!   `|got - want| <= 4 * eps(dtype) * sqrt(k) * magnitude[i]`, with eps 2^-10 (f16),
//!   2^-7 (bf16), 2^-23 (f32), 2^-52 (f64) and `magnitude[i]` supplied by the reference
//!   (e.g. `sum_j |a_j x_j|`, so the gate scales with the terms, not with a sum that may
//!   cancel). An infinity matches only the same infinity. Unlike `ops::reduce` there is no
//!   1e-6 floor: a magnitude of 0 demands exactly 0.
//! - [`Rule::ReferenceError`] (float dtypes only): as accurate as the reference computed in
//!   the kernel's own working precision, `|got - want| <= k * err[i] + atol`, where `want`
//!   is the reference computed in double and `err[i]` its own error at element `i` when
//!   computed in the working precision instead ([`Precision`]), supplied by the caller
//!   (`klab_engine::declared` measures it; see there for how it keeps the bound from resting on luck).
//!
//! For float dtypes, whenever `got` or `want` is a NaN the [`NanRule`] alone decides, for
//! every rule but `Exact` (which only integers reach):
//!
//! - [`NanRule::NanEqual`]: both are NaN with the same bits.
//! - [`NanRule::NanAnyPayload`]: both are NaN.
//! - [`NanRule::NanFails`]: never (a NaN on either side is a failure).
//!
//! Defaults ([`Rule::default_nan`]): `Bitwise` takes `NanEqual` (that is what bitwise
//! means); the tolerance rules take `NanFails`. A tolerance rule is for arithmetic, where a
//! NaN is most often a bug (or a skipped store: klab poisons outputs with 0xff bytes, a
//! NaN in every float dtype, and with 0x7f bytes, also a NaN in f16), so a NaN must be
//! declared to be expected (`nan = "nan-equal"` or `"nan-any-payload"`) to pass.
//!
//! [`compare`] returns a [`Verdict`]: failures over all elements, `max_abs` and `max_rel`
//! over the elements where both sides are finite (`max_abs` is infinite when a failing
//! element has a NaN or an infinity on either side, under every rule), `max_ulp` likewise
//! for float dtypes, and
//! the first (lowest-index) failure with its multi-dimensional coordinates.

use std::fmt;

use serde::{Deserialize, Serialize};

use klab_core::dtype::{bf16_to_f32, f16_to_f32, Dtype};

/// How one output is judged. See the module documentation for the exact semantics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(from = "RuleRepr", into = "RuleRepr")]
pub enum Rule {
    /// Every element's bytes equal.
    Bitwise,
    /// Integer values equal (integer dtypes only).
    Exact,
    /// At most `max` units in the last place apart (float dtypes only).
    Ulp { max: u64 },
    /// `|got - want| <= atol + rtol * |want|`.
    AllClose { atol: f64, rtol: f64 },
    /// `|got - want| <= 4 * eps(dtype) * sqrt(k) * magnitude[i]` (float dtypes only).
    ScaledSum { k: f64 },
    /// `|got - want| <= k * err[i] + atol`, `err[i]` the reference's own error in
    /// `precision` (float dtypes only).
    ReferenceError {
        k: f64,
        atol: f64,
        precision: Precision,
    },
}

/// The working precision a reference is computed in a second time for
/// [`Rule::ReferenceError`]: the C type its `KLAB_REAL` macro names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    F32,
    F64,
}

impl Precision {
    /// The C type: `float`, `double`.
    pub fn c_type(self) -> &'static str {
        match self {
            Precision::F32 => "float",
            Precision::F64 => "double",
        }
    }

    /// The manifest spelling: `f32`, `f64`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// The precision a kernel writing `dtype` most likely works in when a manifest does
    /// not say: f64 for f64 outputs, f32 otherwise (f16 and bf16 kernels accumulate in f32).
    pub fn default_for(dtype: Dtype) -> Precision {
        match dtype {
            Dtype::F64 => Precision::F64,
            _ => Precision::F32,
        }
    }
}

/// What a NaN on either side means (float dtypes; see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NanRule {
    /// NaN matches NaN with the same bits.
    NanEqual,
    /// Any NaN matches any NaN.
    NanAnyPayload,
    /// A NaN on either side is a failure.
    NanFails,
}

/// A rule with its NaN rule: everything needed to judge one output.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(from = "ComparisonRepr", into = "ComparisonRepr")]
pub struct Comparison {
    pub rule: Rule,
    pub nan: NanRule,
}

/// Why a rule cannot be used or a comparison cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    #[error("rule {rule} cannot compare {dtype}: {why}")]
    Dtype {
        rule: &'static str,
        dtype: Dtype,
        why: &'static str,
    },
    #[error("rule {rule}: {message}")]
    Parameter { rule: &'static str, message: String },
    #[error("nan = \"{nan}\" was given with compare = \"exact\", which compares integers (no NaN); remove it")]
    NanWithExact { nan: NanRule },
    #[error("the size expression '{expr}' of scaled-sum cannot be evaluated: {message}")]
    SizeExpression { expr: String, message: String },
    #[error("the output has {got} bytes but the reference has {want} bytes")]
    Length { got: usize, want: usize },
    #[error("{bytes} bytes are not a whole number of {dtype} elements ({size} bytes each)")]
    Partial {
        bytes: usize,
        dtype: Dtype,
        size: usize,
    },
    #[error("shape {shape:?} has {shape_elements} elements but the buffers hold {elements} {dtype} elements")]
    Shape {
        shape: Vec<u64>,
        shape_elements: u128,
        elements: u64,
        dtype: Dtype,
    },
    #[error("rule {rule} needs a value per element from the reference (scaled-sum: a magnitude; reference-error: its own error), and none was supplied")]
    MissingScale { rule: &'static str },
    #[error("the reference supplied {got} values per element for {want} elements")]
    ScaleLength { got: usize, want: u64 },
    #[error("the reference's value for element {index} = {value:?} is not a finite number >= 0")]
    BadScale { index: u64, value: f64 },
}

impl Rule {
    /// The rule's name as manifests spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Rule::Bitwise => "bitwise",
            Rule::Exact => "exact",
            Rule::Ulp { .. } => "ulp",
            Rule::AllClose { .. } => "allclose",
            Rule::ScaledSum { .. } => "scaled-sum",
            Rule::ReferenceError { .. } => "reference-error",
        }
    }

    /// The NaN rule a comparison gets when none is declared: `NanEqual` for `Bitwise` and
    /// `Exact` (for which it is what the rule already means, or moot), `NanFails` for the
    /// tolerance rules.
    pub fn default_nan(&self) -> NanRule {
        match self {
            Rule::Bitwise | Rule::Exact => NanRule::NanEqual,
            Rule::Ulp { .. }
            | Rule::AllClose { .. }
            | Rule::ScaledSum { .. }
            | Rule::ReferenceError { .. } => NanRule::NanFails,
        }
    }

    /// Whether the rule applies to `dtype` and its parameters are valid: `Exact` needs an
    /// integer dtype, `Ulp` and `ScaledSum` a float one; `atol`, `rtol` and `k` must be
    /// finite and >= 0.
    pub fn check_dtype(&self, dtype: Dtype) -> Result<(), RuleError> {
        let rule = self.name();
        let bad = |message: String| Err(RuleError::Parameter { rule, message });
        match *self {
            Rule::Bitwise => {}
            Rule::Exact if dtype.is_float() => {
                return Err(RuleError::Dtype {
                    rule,
                    dtype,
                    why: "exact compares integer values; for floats use bitwise, ulp or allclose",
                })
            }
            Rule::Exact => {}
            Rule::Ulp { .. } if !dtype.is_float() => {
                return Err(RuleError::Dtype {
                    rule,
                    dtype,
                    why: "ulp distance is defined for float dtypes; for integers use exact or allclose",
                })
            }
            Rule::Ulp { .. } => {}
            Rule::AllClose { atol, rtol } => {
                for (name, v) in [("atol", atol), ("rtol", rtol)] {
                    if !(v.is_finite() && v >= 0.0) {
                        return bad(format!("{name} = {v:?} must be a finite number >= 0"));
                    }
                }
            }
            Rule::ScaledSum { .. } if !dtype.is_float() => {
                return Err(RuleError::Dtype {
                    rule,
                    dtype,
                    why: "the scaled-sum gate is in units of the float dtype's epsilon; for integers use exact",
                })
            }
            Rule::ScaledSum { k } => {
                if !(k.is_finite() && k >= 0.0) {
                    return bad(format!("k = {k:?} must be a finite number >= 0"));
                }
            }
            Rule::ReferenceError { .. } if !dtype.is_float() => {
                return Err(RuleError::Dtype {
                    rule,
                    dtype,
                    why: "a reference's rounding error is a float's; for integers use exact",
                })
            }
            Rule::ReferenceError { k, atol, .. } => {
                for (name, v) in [("k", k), ("atol", atol)] {
                    if !(v.is_finite() && v >= 0.0) {
                        return bad(format!("{name} = {v:?} must be a finite number >= 0"));
                    }
                }
            }
        }
        Ok(())
    }

    /// One phrase: `bitwise`, `exact`, `ulp <= 2`, `allclose atol=1e-5 rtol=1e-5`,
    /// `scaled-sum k=4096: |got - want| <= 4 eps sqrt(k) magnitude`.
    pub fn describe(&self) -> String {
        match *self {
            Rule::Bitwise => "bitwise".to_string(),
            Rule::Exact => "exact".to_string(),
            Rule::Ulp { max } => format!("ulp <= {max}"),
            Rule::AllClose { atol, rtol } => format!("allclose atol={atol:?} rtol={rtol:?}"),
            Rule::ScaledSum { k } => {
                format!("scaled-sum k={k:?}: |got - want| <= 4 eps sqrt(k) magnitude")
            }
            Rule::ReferenceError { k, atol, precision } => format!(
                "reference-error k={k:?} atol={atol:?}: |got - want| <= {k:?} x |want_{p} - want| + {atol:?}, want_{p} the reference computed in {p}",
                p = precision.name()
            ),
        }
    }

    /// [`Rule::describe`], with scaled-sum's gate worked out for `dtype`:
    /// `scaled-sum k=4096.0: |got - want| <= 4 x 2^-23 x sqrt(4096.0) x magnitude = 3.052e-5 x magnitude`.
    pub fn describe_for(&self, dtype: Dtype) -> String {
        match (*self, dtype.eps()) {
            (Rule::ScaledSum { k }, Some(eps)) => format!(
                "scaled-sum k={k:?}: |got - want| <= 4 x 2^-{} x sqrt({k:?}) x magnitude = {:.3e} x magnitude",
                eps.log2().round().abs(),
                scaled_factor(eps, k)
            ),
            _ => self.describe(),
        }
    }
}

/// The tolerance factor of a scaled rule: `4 eps sqrt(k)` for a sum of `k` terms.
pub fn scaled_factor(eps: f64, k: f64) -> f64 {
    4.0 * eps * k.sqrt()
}

impl NanRule {
    /// As receipts and verdicts say it: `NaN = NaN (same bits)`, `any NaN = any NaN`,
    /// `NaN fails`.
    pub fn describe(self) -> &'static str {
        match self {
            NanRule::NanEqual => "NaN = NaN (same bits)",
            NanRule::NanAnyPayload => "any NaN = any NaN",
            NanRule::NanFails => "NaN fails",
        }
    }

    /// The manifest spelling: `nan-equal`, `nan-any-payload`, `nan-fails`.
    pub fn name(self) -> &'static str {
        match self {
            NanRule::NanEqual => "nan-equal",
            NanRule::NanAnyPayload => "nan-any-payload",
            NanRule::NanFails => "nan-fails",
        }
    }

    /// The verdict for a pair of which at least one is a NaN.
    fn passes(self, got_nan: bool, want_nan: bool, got: u64, want: u64) -> bool {
        match self {
            NanRule::NanEqual => got_nan && want_nan && got == want,
            NanRule::NanAnyPayload => got_nan && want_nan,
            NanRule::NanFails => false,
        }
    }
}

impl fmt::Display for NanRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Comparison {
    /// `rule` with its default NaN rule ([`Rule::default_nan`]).
    pub fn new(rule: Rule) -> Comparison {
        Comparison {
            rule,
            nan: rule.default_nan(),
        }
    }

    /// The same rule with another NaN rule.
    pub fn with_nan(self, nan: NanRule) -> Comparison {
        Comparison { nan, ..self }
    }

    /// One line: `allclose atol=1e-5 rtol=1e-5, NaN = NaN (same bits)`; `exact` alone.
    pub fn describe(&self) -> String {
        match self.rule {
            Rule::Exact => self.rule.describe(),
            _ => format!("{}, {}", self.rule.describe(), self.nan.describe()),
        }
    }

    /// [`Comparison::describe`] for one dtype: scaled-sum's gate worked out, and no NaN
    /// clause for integer dtypes (which have no NaN).
    pub fn describe_for(&self, dtype: Dtype) -> String {
        if dtype.is_integer() || self.rule == Rule::Exact {
            self.rule.describe_for(dtype)
        } else {
            format!("{}, {}", self.rule.describe_for(dtype), self.nan.describe())
        }
    }
}

impl Default for Comparison {
    /// Bitwise, NaN payloads included: klab's rule when a manifest declares none.
    fn default() -> Comparison {
        Comparison::new(Rule::Bitwise)
    }
}

// ---------------------------------------------------------------------------------------
// Serde: the manifest's spelling.
//
//     compare = "bitwise"
//     compare = "exact"
//     compare = { ulp = 2 }
//     compare = { allclose = { atol = 1e-5, rtol = 1e-5 } }
//     compare = { scaled-sum = "n" }          # RuleSpec: k is a size expression
//     compare = { reference-error = { k = 4, atol = 1e-6 } }   # precision = "f32" optional
//     nan = "nan-equal" | "nan-any-payload" | "nan-fails"   # optional
// ---------------------------------------------------------------------------------------

/// [`Rule`]'s serde form (scaled-sum holds the evaluated k as a number).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
enum RuleRepr {
    Bitwise,
    Exact,
    Ulp(u64),
    #[serde(rename = "allclose")]
    AllClose {
        atol: f64,
        rtol: f64,
    },
    ScaledSum(f64),
    ReferenceError {
        k: f64,
        atol: f64,
        precision: Precision,
    },
}

impl From<RuleRepr> for Rule {
    fn from(r: RuleRepr) -> Rule {
        match r {
            RuleRepr::Bitwise => Rule::Bitwise,
            RuleRepr::Exact => Rule::Exact,
            RuleRepr::Ulp(max) => Rule::Ulp { max },
            RuleRepr::AllClose { atol, rtol } => Rule::AllClose { atol, rtol },
            RuleRepr::ScaledSum(k) => Rule::ScaledSum { k },
            RuleRepr::ReferenceError { k, atol, precision } => {
                Rule::ReferenceError { k, atol, precision }
            }
        }
    }
}

impl From<Rule> for RuleRepr {
    fn from(r: Rule) -> RuleRepr {
        match r {
            Rule::Bitwise => RuleRepr::Bitwise,
            Rule::Exact => RuleRepr::Exact,
            Rule::Ulp { max } => RuleRepr::Ulp(max),
            Rule::AllClose { atol, rtol } => RuleRepr::AllClose { atol, rtol },
            Rule::ScaledSum { k } => RuleRepr::ScaledSum(k),
            Rule::ReferenceError { k, atol, precision } => {
                RuleRepr::ReferenceError { k, atol, precision }
            }
        }
    }
}

/// [`Comparison`]'s serde form: `{ compare = <rule>, nan = <nan rule> }`, nan optional
/// on input (the rule's default) and always written on output.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ComparisonRepr {
    compare: Rule,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nan: Option<NanRule>,
}

impl From<ComparisonRepr> for Comparison {
    fn from(r: ComparisonRepr) -> Comparison {
        let c = Comparison::new(r.compare);
        match r.nan {
            Some(nan) => c.with_nan(nan),
            None => c,
        }
    }
}

impl From<Comparison> for ComparisonRepr {
    fn from(c: Comparison) -> ComparisonRepr {
        ComparisonRepr {
            compare: c.rule,
            nan: Some(c.nan),
        }
    }
}

/// A rule as a manifest declares it, before its size expression is evaluated: the same
/// as [`Rule`] except that scaled-sum's k is an expression (`"n"`, `"rows * cols"`; a
/// bare number is accepted and kept as its text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[serde(remote = "RuleSpec")]
pub enum RuleSpec {
    Bitwise,
    Exact,
    Ulp(u64),
    #[serde(rename = "allclose")]
    AllClose {
        atol: f64,
        rtol: f64,
    },
    ScaledSum(#[serde(deserialize_with = "size_expression")] String),
    /// The working precision is the output's default ([`Precision::default_for`]) unless
    /// given.
    ReferenceError {
        k: f64,
        atol: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precision: Option<Precision>,
    },
}

/// The rules as a manifest spells them, for messages.
const RULE_FORMS: &str = "\"bitwise\", \"exact\", { ulp = K }, { allclose = { atol = A, rtol = R } }, { scaled-sum = \"K\" } or { reference-error = { k = K, atol = A } }";

impl Serialize for RuleSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RuleSpec::serialize(self, s)
    }
}

/// A rule's name alone is accepted where it takes no parameters; for the others the
/// message gives the whole form (`compare = "allclose"` says where atol and rtol go).
impl<'de> Deserialize<'de> for RuleSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RuleSpec, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RuleSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a rule: {RULE_FORMS}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RuleSpec, E> {
                match v {
                    "bitwise" => Ok(RuleSpec::Bitwise),
                    "exact" => Ok(RuleSpec::Exact),
                    "allclose" => Err(E::custom(
                        "allclose takes its tolerances: compare = { allclose = { atol = 1e-5, rtol = 1e-5 } }",
                    )),
                    "ulp" => Err(E::custom("ulp takes its bound: compare = { ulp = 2 }")),
                    "scaled-sum" => Err(E::custom(
                        "scaled-sum takes the length of its sums: compare = { scaled-sum = \"K\" }",
                    )),
                    "reference-error" => Err(E::custom(
                        "reference-error takes its factor and floor: compare = { reference-error = { k = 4, atol = 1e-6 } }",
                    )),
                    other => Err(E::custom(format!("unknown rule '{other}': give {RULE_FORMS}"))),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<RuleSpec, A::Error> {
                let rule =
                    RuleSpec::deserialize(serde::de::value::MapAccessDeserializer::new(&mut a))?;
                if a.next_key::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(serde::de::Error::custom("give one rule, not two"));
                }
                Ok(rule)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// An output's `compare` and optional `nan`, as a manifest declares them. Unknown keys
/// are refused, so this struct is for a table of its own; a manifest table that holds
/// other keys beside these two declares `compare: RuleSpec` and `nan: Option<NanRule>`
/// fields itself (each deserializes on its own; `#[serde(flatten)]` would defeat
/// `deny_unknown_fields`) and builds a `ComparisonSpec` from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComparisonSpec {
    pub compare: RuleSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nan: Option<NanRule>,
}

impl RuleSpec {
    /// The rule for an output of `dtype`, with scaled-sum's size expression evaluated by
    /// `eval` (which says why when it cannot) and reference-error's precision defaulted for
    /// the dtype. Does not check parameters against the dtype ([`Rule::check_dtype`]).
    pub fn resolve(
        &self,
        dtype: Dtype,
        eval: impl FnOnce(&str) -> Result<f64, String>,
    ) -> Result<Rule, RuleError> {
        Ok(match self {
            RuleSpec::Bitwise => Rule::Bitwise,
            RuleSpec::Exact => Rule::Exact,
            RuleSpec::Ulp(max) => Rule::Ulp { max: *max },
            RuleSpec::AllClose { atol, rtol } => Rule::AllClose {
                atol: *atol,
                rtol: *rtol,
            },
            RuleSpec::ScaledSum(expr) => {
                let k = eval(expr).map_err(|message| RuleError::SizeExpression {
                    expr: expr.clone(),
                    message,
                })?;
                Rule::ScaledSum { k }
            }
            RuleSpec::ReferenceError { k, atol, precision } => Rule::ReferenceError {
                k: *k,
                atol: *atol,
                precision: precision.unwrap_or(Precision::default_for(dtype)),
            },
        })
    }
}

impl ComparisonSpec {
    /// The comparison: the rule resolved ([`RuleSpec::resolve`]) with the declared NaN rule
    /// or the rule's default. A NaN rule declared with `exact` is an error.
    pub fn resolve(
        &self,
        dtype: Dtype,
        eval: impl FnOnce(&str) -> Result<f64, String>,
    ) -> Result<Comparison, RuleError> {
        let rule = self.compare.resolve(dtype, eval)?;
        match (rule, self.nan) {
            (Rule::Exact, Some(nan)) => Err(RuleError::NanWithExact { nan }),
            (_, Some(nan)) => Ok(Comparison::new(rule).with_nan(nan)),
            (_, None) => Ok(Comparison::new(rule)),
        }
    }
}

fn size_expression<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(
                "a size expression for k (a string such as \"n\" or \"rows * cols\", or a number)",
            )
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            if v.trim().is_empty() {
                return Err(E::invalid_value(serde::de::Unexpected::Str(v), &self));
            }
            Ok(v.to_string())
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<String, E> {
            Ok(format!("{v:?}"))
        }
    }
    d.deserialize_any(V)
}

// ---------------------------------------------------------------------------------------
// The comparison.
// ---------------------------------------------------------------------------------------

/// One failing element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// Flat (row-major) element index.
    pub index: u64,
    /// The index in each dimension of the shape (empty for a scalar).
    pub coords: Vec<u64>,
    /// The kernel's value: `1.5 (0x3fc00000)` for floats (shortest round-trip decimal and
    /// the raw bits), `-3` for integers.
    pub got: String,
    /// The reference's value, written the same way.
    pub want: String,
    /// Under a rule whose bound varies per element (scaled-sum, reference-error): how far
    /// off the kernel is and what was allowed here; where both values are NaN with other
    /// payloads, what would take them ([`Failure::at`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
}

impl Failure {
    /// The failure at flat index `index` of `shape`, from the raw bits of both values;
    /// `scale` is the rule's per-element value there (scaled-sum's magnitude,
    /// reference-error's reference error), which the line then shows beside the error.
    pub fn at(
        dtype: Dtype,
        rule: Rule,
        index: u64,
        shape: &[u64],
        (got, want): (u64, u64),
        scale: Option<f64>,
    ) -> Failure {
        Failure {
            index,
            coords: coords(index, shape),
            got: show(dtype, got),
            want: show(dtype, want),
            bound: scale
                .and_then(|s| bound_note(dtype, rule, got, want, s))
                .or_else(|| payload_note(dtype, got, want)),
        }
    }

    /// `[row 3, col 256]: got 1.5 (0x3fc00000), want 1.25 (0x3fa00000)`. Axis `k` is
    /// named `axis_names[k]`, or by default `i` (1-D), `row`/`col` (2-D), `d0, d1, ...`
    /// (otherwise); a scalar's position is `[scalar]`.
    pub fn describe(&self, axis_names: &[&str]) -> String {
        let bound = self
            .bound
            .as_ref()
            .map(|b| format!(" ({b})"))
            .unwrap_or_default();
        format!(
            "{}: got {}, want {}{bound}",
            self.position(axis_names),
            self.got,
            self.want
        )
    }

    /// `[row 3, col 256]`.
    pub fn position(&self, axis_names: &[&str]) -> String {
        if self.coords.is_empty() {
            return "[scalar]".to_string();
        }
        let ndim = self.coords.len();
        let parts: Vec<String> = self
            .coords
            .iter()
            .enumerate()
            .map(|(k, c)| match axis_names.get(k) {
                Some(name) => format!("{name} {c}"),
                None => format!("{} {c}", default_axis_name(ndim, k)),
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }
}

/// What a per-element bound allowed at a failing element whose values are both finite:
/// `off by 4.5e-5; the reference in f32 is off by 1.0e-5, and 4 x that + 1e-6 = 4.1e-5 is
/// allowed`.
/// Both NaN with other payloads, the kernel's not klab's 0xff poison (an element left
/// unwritten): arithmetic on a GPU writes its own quiet NaN whatever the input's payload, so
/// a correct kernel fails `nan-equal` here. Said once, where the failure is shown.
fn payload_note(dtype: Dtype, got: u64, want: u64) -> Option<String> {
    let poison = u64::MAX >> (64 - 8 * dtype.size_bytes() as u32);
    (dtype.is_nan_bits(got) && dtype.is_nan_bits(want) && got != want && got != poison).then(|| {
        "both NaN, other payloads: a GPU computing a NaN writes its own; nan = \"nan-any-payload\" takes any NaN"
            .to_string()
    })
}

fn bound_note(dtype: Dtype, rule: Rule, got: u64, want: u64, scale: f64) -> Option<String> {
    let (g, w) = (dtype.value_of_bits(got), dtype.value_of_bits(want));
    if !(g.is_finite() && w.is_finite()) {
        return None;
    }
    let off = sci((g - w).abs());
    match rule {
        Rule::ScaledSum { k } => {
            let factor = scaled_factor(dtype.eps()?, k);
            Some(format!(
                "off by {off}; the magnitude is {}, and {factor:.3e} x that = {} is allowed",
                sci(scale),
                sci(factor * scale)
            ))
        }
        Rule::ReferenceError { k, atol, precision } => Some(format!(
            "off by {off}; the reference in {} is off by {}, and {k:?} x that + {atol:?} = {} is allowed",
            precision.name(),
            sci(scale),
            sci(k * scale + atol)
        )),
        _ => None,
    }
}

fn default_axis_name(ndim: usize, k: usize) -> String {
    match (ndim, k) {
        (1, _) => "i".to_string(),
        (2, 0) => "row".to_string(),
        (2, _) => "col".to_string(),
        _ => format!("d{k}"),
    }
}

/// The outcome of comparing one output with the reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Elements compared.
    pub elements: u64,
    /// Elements that fail the rule.
    pub failures: u64,
    /// Largest `|got - want|` over the elements where both are finite (0 if none); under
    /// `Bitwise`, infinite when a failing element has a NaN or an infinity on either side.
    pub max_abs: f64,
    /// Largest `|got - want| / |want|` over the same elements: 0 where they are equal,
    /// infinite where `want` is 0 and `got` is not.
    pub max_rel: f64,
    /// Largest ulp distance over the same elements, for float dtypes (`None` for integers).
    pub max_ulp: Option<u64>,
    /// The failure with the lowest flat index.
    pub first: Option<Failure>,
    /// The flat indices of the first [`FIRST_FAILURES`] failures, in index order (what the
    /// device checker's compaction returns; the cross-check compares them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<u64>,
    /// The comparison, described for the dtype ([`Comparison::describe_for`]).
    pub rule: String,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }

    /// This verdict on a sample of a buffer (a few slices of it, compared on their own),
    /// with every failing index moved to its place in the whole buffer by `to_whole` and
    /// its coordinates given in the whole buffer's `shape`. Failing indices stay in order:
    /// `to_whole` keeps order (slices are sampled in ascending order).
    pub fn relocated(mut self, to_whole: impl Fn(u64) -> u64, shape: &[u64]) -> Verdict {
        if let Some(f) = &mut self.first {
            f.index = to_whole(f.index);
            f.coords = coords(f.index, shape);
        }
        self.failing.iter_mut().for_each(|i| *i = to_whole(*i));
        self
    }

    /// [`Verdict::describe_with`] with the default axis names.
    pub fn describe(&self) -> String {
        self.describe_with(&[])
    }

    /// One line: `PASS 0/4096 failures (allclose atol=1e-5 rtol=1e-5, NaN fails); max abs
    /// 3.1e-7, max rel 2.0e-7, max ulp 3`, or `FAIL 12/4096 failures (...); max abs ...;
    /// first at [row 3, col 256]: got ..., want ...`.
    pub fn describe_with(&self, axis_names: &[&str]) -> String {
        let mut s = format!(
            "{} {}/{} failures ({}); max abs {}, max rel {}",
            if self.passed() { "PASS" } else { "FAIL" },
            self.failures,
            self.elements,
            self.rule,
            sci(self.max_abs),
            sci(self.max_rel)
        );
        if let Some(u) = self.max_ulp {
            s += &format!(", max ulp {u}");
        }
        if let Some(f) = &self.first {
            s += &format!("; first at {}", f.describe(axis_names));
        }
        s
    }

    /// The verdict as the timing engine's [`CheckOutcome`].
    pub fn check_outcome(&self, axis_names: &[&str]) -> CheckOutcome {
        CheckOutcome {
            failures: self.failures,
            max_abs: self.max_abs,
            max_rel: self.max_rel,
            first_failure: self.first.as_ref().map(|f| f.describe(axis_names)),
        }
    }
}

/// `3.1e-7`, `0`, `inf`.
fn sci(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v.is_finite() {
        format!("{v:.1e}")
    } else {
        format!("{v}")
    }
}

/// Elements per block that [`compare`] first compares as bytes.
const BLOCK: usize = 4096;

/// How many failing indices a verdict lists ([`Verdict::failing`]).
pub const FIRST_FAILURES: usize = 8;

/// Compare the kernel's output `got` with the reference's `want`, both little-endian
/// elements of `dtype` laid out row-major in `shape` (`[]` is a scalar).
///
/// `scale` is the reference's value per element that the rule's bound is a multiple of:
/// the magnitude for [`Rule::ScaledSum`], the reference's own error for
/// [`Rule::ReferenceError`] (required by those two, one finite value >= 0 per element;
/// ignored by the other rules). Errors: the rule does not apply to the dtype or has bad
/// parameters, the lengths differ, they are not whole elements, the shape does not hold
/// exactly that many elements, or the scale is missing, of the wrong length, or not
/// finite and >= 0.
pub fn compare(
    dtype: Dtype,
    cmp: &Comparison,
    got: &[u8],
    want: &[u8],
    scale: Option<&[f64]>,
    shape: &[u64],
) -> Result<Verdict, RuleError> {
    cmp.rule.check_dtype(dtype)?;
    if got.len() != want.len() {
        return Err(RuleError::Length {
            got: got.len(),
            want: want.len(),
        });
    }
    let size = dtype.size_bytes();
    if got.len() % size != 0 {
        return Err(RuleError::Partial {
            bytes: got.len(),
            dtype,
            size,
        });
    }
    let n = got.len() / size;
    let shape_elements = shape
        .iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(u128::from(d)))
        .unwrap_or(u128::MAX);
    if shape_elements != n as u128 {
        return Err(RuleError::Shape {
            shape: shape.to_vec(),
            shape_elements,
            elements: n as u64,
            dtype,
        });
    }
    let gate = match cmp.rule {
        Rule::ScaledSum { k } => {
            let eps = dtype.eps().expect("check_dtype: scaled-sum is float-only");
            Some((scaled_factor(eps, k), 0.0, per_element(cmp.rule, scale, n)?))
        }
        Rule::ReferenceError { k, atol, .. } => Some((k, atol, per_element(cmp.rule, scale, n)?)),
        _ => None,
    };

    let judge = Judge {
        dtype,
        rule: cmp.rule,
        nan: cmp.nan,
        gate,
    };
    // Equal bytes pass with zero error under every rule, except a NaN under NanFails.
    let equal_bytes_pass = dtype.is_integer() || cmp.nan != NanRule::NanFails;
    let empty = Verdict {
        elements: n as u64,
        failures: 0,
        max_abs: 0.0,
        max_rel: 0.0,
        max_ulp: dtype.is_float().then_some(0),
        first: None,
        failing: Vec::new(),
        rule: cmp.describe_for(dtype),
    };
    // Ranges of whole blocks (par's chunks are a multiple of BLOCK), judged on the cores
    // and merged in index order, so the first failure is the lowest index.
    let parts = klab_core::par::map_ranges(n, |range| {
        let mut v = empty.clone();
        let (g, w) = (
            &got[range.start * size..range.end * size],
            &want[range.start * size..range.end * size],
        );
        for (b, (gb, wb)) in g
            .chunks(BLOCK * size)
            .zip(w.chunks(BLOCK * size))
            .enumerate()
        {
            if equal_bytes_pass && gb == wb {
                continue;
            }
            let base = range.start + b * BLOCK;
            match size {
                1 => judge.block::<1>(gb, wb, base, shape, &mut v),
                2 => judge.block::<2>(gb, wb, base, shape, &mut v),
                4 => judge.block::<4>(gb, wb, base, shape, &mut v),
                _ => judge.block::<8>(gb, wb, base, shape, &mut v),
            }
        }
        v
    });
    let mut v = empty;
    for p in parts {
        v.failures += p.failures;
        v.max_abs = v.max_abs.max(p.max_abs);
        v.max_rel = v.max_rel.max(p.max_rel);
        if let (Some(m), Some(u)) = (v.max_ulp.as_mut(), p.max_ulp) {
            *m = (*m).max(u);
        }
        if v.first.is_none() {
            v.first = p.first;
        }
        let room = FIRST_FAILURES - v.failing.len();
        v.failing.extend(p.failing.into_iter().take(room));
    }
    Ok(v)
}

/// The rule's per-element scale, checked: present, one per element, finite and >= 0.
fn per_element(rule: Rule, scale: Option<&[f64]>, n: usize) -> Result<&[f64], RuleError> {
    let scale = scale.ok_or(RuleError::MissingScale { rule: rule.name() })?;
    if scale.len() != n {
        return Err(RuleError::ScaleLength {
            got: scale.len(),
            want: n as u64,
        });
    }
    if let Some((i, &v)) = scale
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v >= 0.0))
    {
        return Err(RuleError::BadScale {
            index: i as u64,
            value: v,
        });
    }
    Ok(scale)
}

/// Little-endian bits of one element of N bytes.
#[inline(always)]
fn le_bits<const N: usize>(chunk: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..N].copy_from_slice(&chunk[..N]);
    u64::from_le_bytes(word)
}

struct Judge<'a> {
    dtype: Dtype,
    rule: Rule,
    nan: NanRule,
    /// ScaledSum and ReferenceError: `|got - want| <= factor * scale[i] + atol` as
    /// (factor, atol, scale): scaled-sum's 4 eps sqrt(k), 0 and the magnitudes;
    /// reference-error's k, atol and the reference's own errors.
    gate: Option<(f64, f64, &'a [f64])>,
}

struct ElementOutcome {
    pass: bool,
    /// (abs, rel, ulp) where both values are finite.
    error: Option<(f64, f64, Option<u64>)>,
}

impl Judge<'_> {
    /// Judge the elements of one block (N bytes each) starting at flat index `base`.
    fn block<const N: usize>(
        &self,
        got: &[u8],
        want: &[u8],
        base: usize,
        shape: &[u64],
        v: &mut Verdict,
    ) {
        for (j, (gc, wc)) in got.chunks_exact(N).zip(want.chunks_exact(N)).enumerate() {
            let i = base + j;
            let (g, w) = (le_bits::<N>(gc), le_bits::<N>(wc));
            let o = self.element(i, g, w);
            if let Some((abs, rel, ulp)) = o.error {
                v.max_abs = v.max_abs.max(abs);
                v.max_rel = v.max_rel.max(rel);
                if let (Some(m), Some(u)) = (v.max_ulp.as_mut(), ulp) {
                    *m = (*m).max(u);
                }
            }
            if !o.pass {
                v.failures += 1;
                // A failure with a NaN or an infinity on either side has no finite error:
                // it counts as infinite, so max_abs never hides it ("max abs 0" beside a
                // NaN output read as a near miss; the transpose lab's rule for its
                // max_abs_error column).
                if o.error.is_none() {
                    v.max_abs = f64::INFINITY;
                }
                if v.failing.len() < FIRST_FAILURES {
                    v.failing.push(i as u64);
                }
                if v.first.is_none() {
                    v.first = Some(Failure::at(
                        self.dtype,
                        self.rule,
                        i as u64,
                        shape,
                        (g, w),
                        self.gate.map(|(_, _, scale)| scale[i]),
                    ));
                }
            }
        }
    }

    #[inline(always)]
    fn element(&self, i: usize, g: u64, w: u64) -> ElementOutcome {
        let dtype = self.dtype;
        if dtype.is_integer() {
            let (gi, wi) = (
                dtype.int_of_bits(g).expect("integer"),
                dtype.int_of_bits(w).expect("integer"),
            );
            let abs = (gi - wi).unsigned_abs() as f64;
            let pass = match self.rule {
                Rule::Bitwise | Rule::Exact => g == w,
                Rule::AllClose { atol, rtol } => abs <= atol + rtol * (wi as f64).abs(),
                Rule::Ulp { .. } | Rule::ScaledSum { .. } | Rule::ReferenceError { .. } => {
                    unreachable!("check_dtype")
                }
            };
            return ElementOutcome {
                pass,
                error: Some((abs, rel(abs, wi as f64), None)),
            };
        }
        let (gn, wn) = (dtype.is_nan_bits(g), dtype.is_nan_bits(w));
        if gn || wn {
            return ElementOutcome {
                pass: self.nan.passes(gn, wn, g, w),
                error: None,
            };
        }
        let (gv, wv) = (dtype.value_of_bits(g), dtype.value_of_bits(w));
        let finite = gv.is_finite() && wv.is_finite();
        let pass = match self.rule {
            Rule::Bitwise => g == w,
            Rule::Exact => unreachable!("check_dtype"),
            _ if !finite => gv == wv, // an infinity matches only the same infinity
            Rule::Ulp { max } => ulp_distance(dtype, g, w) <= max,
            Rule::AllClose { atol, rtol } => (gv - wv).abs() <= atol + rtol * wv.abs(),
            Rule::ScaledSum { .. } | Rule::ReferenceError { .. } => {
                let (factor, atol, scale) = self.gate.expect("compare sets the gate");
                (gv - wv).abs() <= factor * scale[i] + atol
            }
        };
        let error = finite.then(|| {
            let abs = (gv - wv).abs();
            (abs, rel(abs, wv), Some(ulp_distance(dtype, g, w)))
        });
        ElementOutcome { pass, error }
    }
}

fn rel(abs: f64, want: f64) -> f64 {
    if abs == 0.0 {
        0.0
    } else {
        abs / want.abs()
    }
}

/// The bit pattern of a float mapped to an integer that orders like the values
/// (+0 and -0 both 0).
fn ordered(dtype: Dtype, bits: u64) -> i128 {
    let w = dtype.bit_width();
    let magnitude = bits & ((1u64 << (w - 1)) - 1);
    if (bits >> (w - 1)) & 1 == 1 {
        -i128::from(magnitude)
    } else {
        i128::from(magnitude)
    }
}

/// Units in the last place between two non-NaN floats of `dtype` (see the module
/// documentation).
pub fn ulp_distance(dtype: Dtype, a: u64, b: u64) -> u64 {
    (ordered(dtype, a) - ordered(dtype, b)).unsigned_abs() as u64
}

/// Row-major coordinates of flat index `i` in `shape`.
pub fn coords(i: u64, shape: &[u64]) -> Vec<u64> {
    let mut c = vec![0; shape.len()];
    let mut rem = i;
    for (k, &d) in shape.iter().enumerate().rev() {
        c[k] = rem % d; // d > 0: the shape holds element i
        rem /= d;
    }
    c
}

/// One element's little-endian `bytes` of `dtype`, written as a failure line writes it
/// ([`show`]).
pub fn show_value(dtype: Dtype, bytes: &[u8]) -> String {
    let mut word = [0u8; 8];
    word[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
    show(dtype, u64::from_le_bytes(word))
}

/// A value for a failure line: `1.5 (0x3fc00000)` for floats (Rust's shortest
/// round-trip decimal of the dtype's value, then the raw bits), decimal for integers.
pub fn show(dtype: Dtype, bits: u64) -> String {
    match dtype {
        Dtype::F16 => format!("{:?} (0x{bits:04x})", f16_to_f32(bits as u16)),
        Dtype::Bf16 => format!("{:?} (0x{bits:04x})", bf16_to_f32(bits as u16)),
        Dtype::F32 => format!("{:?} (0x{bits:08x})", f32::from_bits(bits as u32)),
        Dtype::F64 => format!("{:?} (0x{bits:016x})", f64::from_bits(bits)),
        _ => dtype.int_of_bits(bits).expect("integer").to_string(),
    }
}

/// The result of checking one slot's output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOutcome {
    pub failures: u64,
    pub max_abs: f64,
    pub max_rel: f64,
    /// The first failing element, described.
    pub first_failure: Option<String>,
}

impl CheckOutcome {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }

    /// `PASS failures=0 max_abs=... max_rel=...`
    pub fn describe(&self) -> String {
        format!(
            "{} failures={} max_abs={:e} max_rel={:e}{}",
            if self.passed() { "PASS" } else { "FAIL" },
            self.failures,
            self.max_abs,
            self.max_rel,
            self.first_failure
                .as_ref()
                .map(|f| format!("; first at {f}"))
                .unwrap_or_default()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn f32b(v: &[u32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn f64s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn u16s(v: &[u16]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn run(dtype: Dtype, cmp: Comparison, got: &[u8], want: &[u8]) -> Verdict {
        let n = (got.len() / dtype.size_bytes()) as u64;
        compare(dtype, &cmp, got, want, None, &[n]).unwrap()
    }
    fn bitwise() -> Comparison {
        Comparison::new(Rule::Bitwise)
    }
    fn allclose(atol: f64, rtol: f64) -> Comparison {
        Comparison::new(Rule::AllClose { atol, rtol })
    }

    #[test]
    fn rules_check_their_dtypes_and_parameters() {
        for d in Dtype::ALL {
            assert!(Rule::Bitwise.check_dtype(d).is_ok());
            assert!(Rule::AllClose {
                atol: 0.0,
                rtol: 1e-5
            }
            .check_dtype(d)
            .is_ok());
            assert_eq!(Rule::Exact.check_dtype(d).is_ok(), d.is_integer(), "{d}");
            assert_eq!(
                Rule::Ulp { max: 1 }.check_dtype(d).is_ok(),
                d.is_float(),
                "{d}"
            );
            assert_eq!(
                Rule::ScaledSum { k: 4.0 }.check_dtype(d).is_ok(),
                d.is_float()
            );
        }
        let e = Rule::Exact.check_dtype(Dtype::F32).unwrap_err().to_string();
        assert!(e.starts_with("rule exact cannot compare f32:"), "{e}");
        let e = Rule::Ulp { max: 0 }
            .check_dtype(Dtype::I32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ulp") && e.contains("i32"), "{e}");
        let e = Rule::AllClose {
            atol: -1.0,
            rtol: 0.0,
        }
        .check_dtype(Dtype::F32)
        .unwrap_err()
        .to_string();
        assert_eq!(e, "rule allclose: atol = -1.0 must be a finite number >= 0");
        assert!(Rule::AllClose {
            atol: 0.0,
            rtol: f64::NAN
        }
        .check_dtype(Dtype::F32)
        .is_err());
        assert!(Rule::ScaledSum { k: f64::INFINITY }
            .check_dtype(Dtype::F32)
            .is_err());
        // compare refuses the same.
        let e = compare(
            Dtype::F32,
            &Comparison::new(Rule::Exact),
            &[0; 4],
            &[0; 4],
            None,
            &[1],
        );
        assert!(matches!(
            e,
            Err(RuleError::Dtype {
                rule: "exact",
                dtype: Dtype::F32,
                ..
            })
        ));
    }

    /// A poisoned (NaN) element left unwritten under a tolerance rule: max_abs says
    /// infinite, not 0 (the error over the finite elements alone).
    #[test]
    fn a_non_finite_failure_is_an_infinite_max_abs_under_every_rule() {
        let want = f32b(&[0x0000_0000, 0x3f80_0000]);
        let got = f32b(&[0xffff_ffff, 0x3f80_0000]);
        for rule in [
            Comparison::new(Rule::AllClose {
                atol: 1e-4,
                rtol: 1e-4,
            }),
            Comparison::new(Rule::Ulp { max: 1 }),
        ] {
            let v = run(Dtype::F32, rule, &got, &want);
            assert_eq!((v.failures, v.max_abs), (1, f64::INFINITY), "{rule:?}");
        }
        // Passing elements with matching NaNs (declared expected) add no error.
        let nan = f32b(&[0x7fc0_0000]);
        let v = run(
            Dtype::F32,
            Comparison::new(Rule::AllClose {
                atol: 1e-4,
                rtol: 1e-4,
            })
            .with_nan(NanRule::NanEqual),
            &nan,
            &nan,
        );
        assert_eq!((v.failures, v.max_abs), (0, 0.0));
    }

    #[test]
    fn bitwise_distinguishes_zero_signs_and_nan_payloads() {
        let want = f32b(&[0x0000_0000, 0x7fc0_0001, 0x3f80_0000, 0x7fc0_0000]);
        let got = f32b(&[0x8000_0000, 0x7fc0_0002, 0x3f80_0000, 0x7fc0_0000]);
        let v = run(Dtype::F32, bitwise(), &got, &want);
        assert_eq!(v.failures, 2);
        assert_eq!(v.first.as_ref().unwrap().index, 0);
        // -0 vs +0 is a failure of error 0; a NaN payload mismatch has no finite error.
        assert_eq!(v.max_abs, f64::INFINITY);
        assert_eq!(v.max_ulp, Some(0));
        let v = run(Dtype::F32, bitwise(), &got[..4], &want[..4]);
        assert_eq!((v.failures, v.max_abs), (1, 0.0));
        // Any payload relaxes only NaN-vs-NaN.
        let v = run(
            Dtype::F32,
            bitwise().with_nan(NanRule::NanAnyPayload),
            &got,
            &want,
        );
        assert_eq!(v.failures, 1);
        // NanFails: even the identical NaN at index 3 fails (1.0 at index 2 passes).
        let v = run(
            Dtype::F32,
            bitwise().with_nan(NanRule::NanFails),
            &got,
            &want,
        );
        assert_eq!(v.failures, 3);
        // Integers: bytes.
        let v = run(
            Dtype::I16,
            bitwise(),
            &u16s(&[1, 0xffff]),
            &u16s(&[1, 0xfffe]),
        );
        assert_eq!((v.failures, v.max_abs, v.max_ulp), (1, 1.0, None));
        assert_eq!(v.first.unwrap().describe(&[]), "[i 1]: got -1, want -2");
    }

    #[test]
    fn exact_compares_integer_values() {
        let got: Vec<u8> = [5i64, -7, i64::MIN]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let want: Vec<u8> = [5i64, -7, i64::MAX]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let v = run(Dtype::I64, Comparison::new(Rule::Exact), &got, &want);
        assert_eq!(v.failures, 1);
        assert_eq!(v.max_abs, u64::MAX as f64);
        let f = v.first.unwrap();
        assert_eq!(f.got, "-9223372036854775808");
        assert_eq!(f.want, "9223372036854775807");
        assert_eq!(v.rule, "exact");
        let v = run(
            Dtype::U8,
            Comparison::new(Rule::Exact),
            &[0, 255],
            &[0, 255],
        );
        assert!(v.passed());
    }

    #[test]
    fn ulp_distance_is_monotonic_and_counts_across_zero() {
        let f = |x: f32| u64::from(x.to_bits());
        assert_eq!(ulp_distance(Dtype::F32, f(0.0), f(-0.0)), 0);
        assert_eq!(
            ulp_distance(Dtype::F32, f(1.0), f(f32::from_bits(0x3f80_0001))),
            1
        );
        assert_eq!(ulp_distance(Dtype::F32, 0x0000_0001, 0x8000_0001), 2);
        assert_eq!(ulp_distance(Dtype::F32, 0x007f_ffff, 0x0080_0000), 1); // subnormal to normal
        assert_eq!(ulp_distance(Dtype::F32, f(1.0), f(2.0)), 1 << 23);
        assert_eq!(ulp_distance(Dtype::F16, 0x3c00, 0x3c03), 3);
        assert_eq!(ulp_distance(Dtype::F16, 0x0001, 0x8001), 2);
        assert_eq!(ulp_distance(Dtype::Bf16, 0x3f80, 0xbf80), 2 * 0x3f80);
        assert_eq!(
            ulp_distance(Dtype::F64, f64::MAX.to_bits(), (-f64::MAX).to_bits()),
            2 * 0x7fef_ffff_ffff_ffff
        );
    }

    #[test]
    fn ulp_rule() {
        let cmp = Comparison::new(Rule::Ulp { max: 2 });
        assert_eq!(cmp.nan, NanRule::NanFails);
        let want = f32b(&[
            0x3f80_0000,
            0x3f80_0000,
            0x0000_0000,
            0x7f7f_ffff,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
        ]);
        let got = f32b(&[
            0x3f80_0002,
            0x3f80_0003,
            0x8000_0001,
            0x7f80_0000,
            0x7f80_0000,
            0x7f80_0000,
            0x7fc0_0000,
        ]);
        let v = run(Dtype::F32, cmp, &got, &want);
        // 3 ulp fails; max finite vs inf fails; -inf vs +inf fails; NaN fails by default.
        let failing: Vec<u64> = (0..7)
            .filter(|&i| {
                !run(
                    Dtype::F32,
                    cmp,
                    &got[i * 4..i * 4 + 4],
                    &want[i * 4..i * 4 + 4],
                )
                .passed()
            })
            .map(|i| i as u64)
            .collect();
        assert_eq!(failing, [1, 3, 5, 6]);
        assert_eq!(v.failures, 4);
        assert_eq!(v.max_ulp, Some(3)); // over finite pairs only
        let v = run(Dtype::F32, cmp.with_nan(NanRule::NanEqual), &got, &want);
        assert_eq!(v.failures, 3);
        // Huge max never lets finite match infinity.
        let v = run(
            Dtype::F32,
            Comparison::new(Rule::Ulp { max: u64::MAX }),
            &got[12..16],
            &want[12..16],
        );
        assert_eq!(v.failures, 1);
        // f16 via u16 bits.
        let v = run(
            Dtype::F16,
            Comparison::new(Rule::Ulp { max: 1 }),
            &u16s(&[0x3c01, 0x8000]),
            &u16s(&[0x3c00, 0x0001]),
        );
        assert!(v.passed(), "{}", v.describe());
    }

    #[test]
    fn allclose_is_numpys_rule() {
        let cmp = allclose(1e-3, 1e-2);
        // tol at want = 10 is 1e-3 + 0.1: 10.1 is inside, 10.102 outside.
        let want = f64s(&[10.0, 10.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, 1.0]);
        let got = f64s(&[10.1, 10.102, 0.0009, f64::INFINITY, f64::INFINITY, f64::NAN]);
        let v = run(Dtype::F64, cmp, &got, &want);
        assert_eq!(v.failures, 3);
        assert_eq!(v.first.as_ref().unwrap().index, 1);
        // -inf vs inf and NaN vs 1 fail with no finite error: max_abs is infinite.
        assert_eq!(v.max_abs, f64::INFINITY);
        assert_eq!(v.max_rel, f64::INFINITY); // 0.0009 vs 0
        let v = run(Dtype::F64, cmp, &got[..24], &want[..24]);
        assert!((v.max_abs - 0.102).abs() < 1e-12);
        // NaN vs NaN under the rules.
        let nan = f32b(&[0x7fc0_0000]);
        let nan2 = f32b(&[0x7fc0_0001]);
        assert!(!run(Dtype::F32, cmp, &nan, &nan).passed());
        assert!(run(Dtype::F32, cmp.with_nan(NanRule::NanEqual), &nan, &nan).passed());
        // The GPU's own NaN against the reference's payload: the line says what takes it;
        // an element left at klab's 0xff poison gets no such word.
        let at =
            |got: u64| Failure::at(Dtype::F32, Rule::Bitwise, 0, &[1], (got, 0x7fc0_0001), None);
        assert!(at(0x7fff_ffff)
            .describe(&[])
            .contains("nan = \"nan-any-payload\""));
        assert_eq!(at(0xffff_ffff).bound, None);
        assert_eq!(at(0x3f80_0000).bound, None);
        assert!(!run(Dtype::F32, cmp.with_nan(NanRule::NanEqual), &nan2, &nan).passed());
        assert!(run(
            Dtype::F32,
            cmp.with_nan(NanRule::NanAnyPayload),
            &nan2,
            &nan
        )
        .passed());
        assert!(!run(
            Dtype::F32,
            cmp.with_nan(NanRule::NanAnyPayload),
            &f32s(&[1.0]),
            &nan
        )
        .passed());
        // Integers, with the difference taken exactly.
        let got: Vec<u8> = [100u32, 0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let want: Vec<u8> = [98u32, u32::MAX]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let v = run(Dtype::U32, allclose(2.0, 0.0), &got, &want);
        assert_eq!(v.failures, 1);
        assert_eq!(v.max_abs, f64::from(u32::MAX));
    }

    #[test]
    fn scaled_sum_needs_a_valid_magnitude() {
        let cmp = Comparison::new(Rule::ScaledSum { k: 4.0 });
        let (got, want) = (f32s(&[1.0, 2.0]), f32s(&[1.0, 2.0]));
        let e = compare(Dtype::F32, &cmp, &got, &want, None, &[2]).unwrap_err();
        assert_eq!(e, RuleError::MissingScale { rule: "scaled-sum" });
        assert!(e.to_string().contains("a magnitude"));
        let e = compare(Dtype::F32, &cmp, &got, &want, Some(&[1.0]), &[2]).unwrap_err();
        assert_eq!(e, RuleError::ScaleLength { got: 1, want: 2 });
        let e = compare(Dtype::F32, &cmp, &got, &want, Some(&[1.0, -1.0]), &[2]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the reference's value for element 1 = -1.0 is not a finite number >= 0"
        );
        assert!(compare(Dtype::F32, &cmp, &got, &want, Some(&[f64::NAN, 1.0]), &[2]).is_err());
        assert!(
            compare(Dtype::F32, &cmp, &got, &want, Some(&[1.0, 1.0]), &[2])
                .unwrap()
                .passed()
        );
    }

    #[test]
    fn reference_error_allows_k_times_the_references_own_error_plus_atol() {
        let rule = Rule::ReferenceError {
            k: 4.0,
            atol: 1e-6,
            precision: Precision::F32,
        };
        let cmp = Comparison::new(rule);
        assert_eq!(cmp.nan, NanRule::NanFails);
        // Element 0: the reference in f32 was off by 1e-5, so 4e-5 + 1e-6 is allowed.
        // Element 1: the reference in f32 was exact: only atol is allowed.
        let want = f32s(&[1.0, 2.0]);
        let err = [1e-5, 0.0];
        let pass = f32s(&[1.0 + 4.0e-5, 2.0 + 9.0e-7]);
        let v = compare(Dtype::F32, &cmp, &pass, &want, Some(&err), &[2]).unwrap();
        assert!(v.passed(), "{}", v.describe());
        let fail = f32s(&[1.0 + 4.5e-5, 2.0 + 2.0e-6]);
        let v = compare(Dtype::F32, &cmp, &fail, &want, Some(&err), &[2]).unwrap();
        assert_eq!(v.failures, 2, "{}", v.describe());
        assert!(v.rule.contains("|want_f32 - want|"), "{}", v.rule);
        // It needs the errors, and compares floats only.
        let e = compare(Dtype::F32, &cmp, &pass, &want, None, &[2]).unwrap_err();
        assert_eq!(
            e,
            RuleError::MissingScale {
                rule: "reference-error"
            }
        );
        assert!(rule.check_dtype(Dtype::I32).is_err());
        let bad = Rule::ReferenceError {
            k: -1.0,
            atol: 0.0,
            precision: Precision::F32,
        };
        assert!(bad.check_dtype(Dtype::F32).is_err());
    }

    #[test]
    fn reference_error_is_spelled_with_k_and_atol_and_an_optional_precision() {
        let s = spec("compare = { reference-error = { k = 4, atol = 1e-6 } }").unwrap();
        let c = s.resolve(Dtype::F32, no_k).unwrap();
        assert_eq!(
            c.rule,
            Rule::ReferenceError {
                k: 4.0,
                atol: 1e-6,
                precision: Precision::F32
            }
        );
        // The default precision follows the output: an f64 output is computed in f64.
        let c = s.resolve(Dtype::F64, no_k).unwrap();
        assert!(matches!(
            c.rule,
            Rule::ReferenceError {
                precision: Precision::F64,
                ..
            }
        ));
        let s = spec("compare = { reference-error = { k = 2, atol = 0, precision = \"f32\" } }")
            .unwrap();
        let c = s.resolve(Dtype::F64, no_k).unwrap();
        assert!(matches!(
            c.rule,
            Rule::ReferenceError {
                precision: Precision::F32,
                ..
            }
        ));
        let e = spec("compare = \"reference-error\"").unwrap_err();
        assert!(
            e.contains("{ reference-error = { k = 4, atol = 1e-6 } }"),
            "{e}"
        );
        assert!(spec("compare = { reference-error = { k = 4 } }").is_err());
        assert!(spec("compare = { reference-error = { k = 4, atol = 0, rtol = 0 } }").is_err());
        // Receipts keep the resolved rule and read it back.
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Comparison>(&json).unwrap(), c);
    }

    #[test]
    fn scaled_sum_gate() {
        // k = 4: the gate is 4 x 2^-23 x 2 x magnitude = 2^-20 x magnitude.
        let cmp = Comparison::new(Rule::ScaledSum { k: 4.0 });
        let gate = 2f64.powi(-20) * 64.0;
        let want = f64s(&[100.0, 100.0, 0.0, 0.0]);
        let got = f64s(&[100.0 + gate, 100.0 + gate * 1.01, 0.0, 1e-300]);
        let v = compare(
            Dtype::F64,
            &cmp,
            &got,
            &want,
            Some(&[64.0, 64.0, 0.0, 0.0]),
            &[4],
        )
        .unwrap();
        // Dtype f64 has eps 2^-52: everything but the exact zero fails there.
        assert_eq!(v.failures, 3);
        let (got, want) = (
            f32s(&[100.0 + gate as f32, 100.0 + (gate * 1.5) as f32, 0.0, 1e-30]),
            f32s(&[100.0, 100.0, 0.0, 0.0]),
        );
        let v = compare(
            Dtype::F32,
            &cmp,
            &got,
            &want,
            Some(&[64.0, 64.0, 0.0, 0.0]),
            &[4],
        )
        .unwrap();
        assert_eq!(v.failures, 2, "{}", v.describe());
        assert_eq!(v.first.as_ref().unwrap().index, 1);
        assert_eq!(
            v.rule,
            "scaled-sum k=4.0: |got - want| <= 4 x 2^-23 x sqrt(4.0) x magnitude = 9.537e-7 x magnitude, NaN fails"
        );
        // An infinity matches only itself; NaN per the rule.
        let inf = f32s(&[f32::INFINITY]);
        assert!(compare(Dtype::F32, &cmp, &inf, &inf, Some(&[1.0]), &[1])
            .unwrap()
            .passed());
        assert!(
            !compare(Dtype::F32, &cmp, &inf, &f32s(&[1.0]), Some(&[1.0]), &[1])
                .unwrap()
                .passed()
        );
        // bf16: eps 2^-7, so 1 vs 1 + 2^-7 at magnitude 1 with k = 1 is inside 4 eps.
        let cmp = Comparison::new(Rule::ScaledSum { k: 1.0 });
        let v = compare(
            Dtype::Bf16,
            &cmp,
            &u16s(&[0x3f81]),
            &u16s(&[0x3f80]),
            Some(&[1.0]),
            &[1],
        )
        .unwrap();
        assert!(v.passed());
        assert!(v.rule.contains("4 x 2^-7 x sqrt(1.0)"), "{}", v.rule);
    }

    #[test]
    fn lengths_and_shapes_are_checked() {
        let e = compare(Dtype::F32, &bitwise(), &[0; 8], &[0; 12], None, &[2]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the output has 8 bytes but the reference has 12 bytes"
        );
        let e = compare(Dtype::F32, &bitwise(), &[0; 6], &[0; 6], None, &[2]).unwrap_err();
        assert!(
            e.to_string().contains("not a whole number of f32 elements"),
            "{e}"
        );
        let e = compare(Dtype::F32, &bitwise(), &[0; 8], &[0; 8], None, &[3]).unwrap_err();
        assert!(e.to_string().contains("shape [3] has 3 elements"), "{e}");
        let e = compare(
            Dtype::U8,
            &bitwise(),
            &[0; 8],
            &[0; 8],
            None,
            &[u64::MAX, u64::MAX, 2],
        );
        assert!(e.is_err());
        // A scalar is shape [] with one element; an empty output is shape [0].
        let v = compare(
            Dtype::F32,
            &bitwise(),
            &f32s(&[1.0]),
            &f32s(&[2.0]),
            None,
            &[],
        )
        .unwrap();
        assert_eq!(
            v.first.unwrap().describe(&[]),
            "[scalar]: got 1.0 (0x3f800000), want 2.0 (0x40000000)"
        );
        let v = compare(Dtype::F32, &bitwise(), &[], &[], None, &[0]).unwrap();
        assert!(v.passed() && v.elements == 0);
        let v = compare(Dtype::F32, &bitwise(), &[], &[], None, &[5, 0]).unwrap();
        assert!(v.passed());
    }

    #[test]
    fn first_failure_has_coordinates_and_the_describe_format() {
        let (rows, cols) = (5u64, 300u64);
        let n = (rows * cols) as usize;
        let want: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut want = want;
        want[3 * 300 + 256] = 1.25;
        let mut got = want.clone();
        got[3 * 300 + 256] = 1.5;
        got[4 * 300 + 1] = 2.0 * 1201.0; // abs 1201, rel 1, 2^23 ulp
        let v = compare(
            Dtype::F32,
            &bitwise(),
            &f32s(&got),
            &f32s(&want),
            None,
            &[rows, cols],
        )
        .unwrap();
        assert_eq!(v.failures, 2);
        let f = v.first.clone().unwrap();
        assert_eq!(f.index, 3 * 300 + 256);
        assert_eq!(f.coords, [3, 256]);
        assert_eq!(
            f.describe(&[]),
            "[row 3, col 256]: got 1.5 (0x3fc00000), want 1.25 (0x3fa00000)"
        );
        assert_eq!(
            f.describe(&["y", "x"]),
            "[y 3, x 256]: got 1.5 (0x3fc00000), want 1.25 (0x3fa00000)"
        );
        assert_eq!(
            v.describe(),
            "FAIL 2/1500 failures (bitwise, NaN = NaN (same bits)); max abs 1.2e3, max rel 1.0e0, max ulp 8388608; \
             first at [row 3, col 256]: got 1.5 (0x3fc00000), want 1.25 (0x3fa00000)"
        );
        let o = v.check_outcome(&["r", "c"]);
        assert_eq!(o.failures, 2);
        assert_eq!(
            o.first_failure.as_deref(),
            Some("[r 3, c 256]: got 1.5 (0x3fc00000), want 1.25 (0x3fa00000)")
        );
        // Three dimensions, default names.
        assert_eq!(coords(12 + 2 * 4 + 1, &[2, 3, 4]), [1, 2, 1]);
        assert_eq!(coords(23, &[2, 3, 4]), [1, 2, 3]);
        let f = Failure {
            index: 23,
            coords: vec![1, 2, 3],
            got: "1".into(),
            want: "2".into(),
            bound: None,
        };
        assert_eq!(f.describe(&["b"]), "[b 1, d1 2, d2 3]: got 1, want 2");
    }

    #[test]
    fn pass_line() {
        let want: Vec<f32> = (0..4096).map(|i| i as f32 / 7.0).collect();
        let got: Vec<f32> = want.iter().map(|x| x * (1.0 + 2e-7)).collect();
        let v = run(Dtype::F32, allclose(1e-5, 1e-5), &f32s(&got), &f32s(&want));
        assert!(v.passed());
        let line = v.describe();
        assert!(
            line.starts_with(
                "PASS 0/4096 failures (allclose atol=1e-5 rtol=1e-5, NaN fails); max abs "
            ),
            "{line}"
        );
        assert!(!line.contains("first at"));
    }

    #[test]
    fn floats_print_distinctly() {
        assert_eq!(show(Dtype::F32, 0x3dcc_cccd), "0.1 (0x3dcccccd)");
        assert_eq!(show(Dtype::F32, 0x3dcc_ccce), "0.10000001 (0x3dccccce)");
        assert_eq!(
            show(Dtype::F64, 0.1f64.to_bits()),
            "0.1 (0x3fb999999999999a)"
        );
        assert_eq!(show(Dtype::F16, 0x3c01), "1.0009766 (0x3c01)");
        assert_eq!(show(Dtype::Bf16, 0xffc1), "NaN (0xffc1)");
        assert_eq!(show(Dtype::F32, 0x8000_0000), "-0.0 (0x80000000)");
        assert_eq!(show(Dtype::F16, 0xfc00), "-inf (0xfc00)");
        assert_eq!(show(Dtype::U8, 0xff), "255");
        assert_eq!(show(Dtype::I8, 0xff), "-1");
    }

    #[test]
    fn f16_poison_fails_tolerance_rules_by_default() {
        // Both poison bytes are NaN in f16; a skipped store must fail even where the
        // reference is itself a NaN with the same bits, unless NaN is declared.
        let want = u16s(&[0x7f7f, 0x3c00]);
        for poison in [0xffu8, 0x7f] {
            let got = vec![poison; 4];
            let v = run(Dtype::F16, allclose(1.0, 1.0), &got, &want);
            assert_eq!(v.failures, 2, "poison 0x{poison:02x}");
        }
    }

    #[test]
    fn a_large_output_judged_on_several_cores_reports_the_lowest_failure_and_every_count() {
        let n = 3 * klab_core::par::CHUNK_ELEMENTS + 5;
        let want: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut got = want.clone();
        for i in [n - 1, 1_500_000, klab_core::par::CHUNK_ELEMENTS] {
            got[i] = -got[i] - 1.0;
        }
        let v = run(Dtype::F32, bitwise(), &f32s(&got), &f32s(&want));
        assert_eq!(v.failures, 3);
        assert_eq!(
            v.first.unwrap().index,
            klab_core::par::CHUNK_ELEMENTS as u64
        );
        assert_eq!(v.max_abs, 2.0 * (n - 1) as f64 + 1.0);
    }

    #[test]
    fn byte_blocks_do_not_hide_failures() {
        let n = 3 * BLOCK + 17;
        let want: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut got = want.clone();
        for &i in &[BLOCK + 5, 3 * BLOCK + 16] {
            got[i] += 1.0;
        }
        let v = run(Dtype::F32, allclose(0.5, 0.0), &f32s(&got), &f32s(&want));
        assert_eq!(v.failures, 2);
        assert_eq!(v.first.unwrap().index, (BLOCK + 5) as u64);
        assert_eq!(v.max_abs, 1.0);
        // NanFails looks at every element, also in identical blocks.
        let mut w = f32s(&want);
        w[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
        let v = run(Dtype::F32, allclose(0.5, 0.0), &w, &w);
        assert_eq!(v.failures, 1);
        assert_eq!(v.first.unwrap().index, 2);
    }

    /// How a manifest's output table can hold the two keys beside its own.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Output {
        name: String,
        compare: RuleSpec,
        nan: Option<NanRule>,
    }

    fn spec(toml_text: &str) -> Result<ComparisonSpec, String> {
        toml::from_str::<ComparisonSpec>(toml_text).map_err(|e| e.to_string())
    }

    fn no_k(_: &str) -> Result<f64, String> {
        Err("no sizes here".into())
    }

    #[test]
    fn toml_specs() {
        let s = spec("compare = \"bitwise\"").unwrap();
        assert_eq!(
            s.resolve(Dtype::F32, no_k).unwrap(),
            Comparison::new(Rule::Bitwise)
        );
        let s = spec("compare = \"exact\"").unwrap();
        assert_eq!(s.resolve(Dtype::F32, no_k).unwrap().rule, Rule::Exact);
        let s = spec("compare = { ulp = 2 }").unwrap();
        assert_eq!(
            s.resolve(Dtype::F32, no_k).unwrap(),
            Comparison::new(Rule::Ulp { max: 2 })
        );
        let s = spec("compare = { allclose = { atol = 1e-5, rtol = 1e-5 } }\nnan = \"nan-equal\"")
            .unwrap();
        let c = s.resolve(Dtype::F32, no_k).unwrap();
        assert_eq!(
            c.rule,
            Rule::AllClose {
                atol: 1e-5,
                rtol: 1e-5
            }
        );
        assert_eq!(c.nan, NanRule::NanEqual);
        assert_eq!(
            c.describe(),
            "allclose atol=1e-5 rtol=1e-5, NaN = NaN (same bits)"
        );
        let s = spec("compare = { scaled-sum = \"n\" }\nnan = \"nan-any-payload\"").unwrap();
        assert_eq!(s.compare, RuleSpec::ScaledSum("n".into()));
        let c = s
            .resolve(Dtype::F32, |e| {
                if e == "n" {
                    Ok(4096.0)
                } else {
                    Err(format!("unknown {e}"))
                }
            })
            .unwrap();
        assert_eq!(
            c,
            Comparison {
                rule: Rule::ScaledSum { k: 4096.0 },
                nan: NanRule::NanAnyPayload
            }
        );
        let e = s.resolve(Dtype::F32, no_k).unwrap_err().to_string();
        assert_eq!(
            e,
            "the size expression 'n' of scaled-sum cannot be evaluated: no sizes here"
        );
        let s = spec("compare = { scaled-sum = 1024 }").unwrap();
        assert_eq!(s.compare, RuleSpec::ScaledSum("1024".into()));
        // Inside an output table.
        let o: Output = toml::from_str("name = \"y\"\ncompare = { ulp = 1 }").unwrap();
        assert_eq!((o.compare, o.nan), (RuleSpec::Ulp(1), None));
        // exact with a NaN rule is refused.
        let e = spec("compare = \"exact\"\nnan = \"nan-equal\"")
            .unwrap()
            .resolve(Dtype::F32, no_k)
            .unwrap_err();
        assert!(e.to_string().contains("exact"), "{e}");
    }

    #[test]
    fn wrong_specs_name_what_was_expected() {
        let e = spec("compare = \"bitwize\"").unwrap_err();
        assert!(
            e.contains("unknown rule 'bitwize'") && e.contains("{ scaled-sum = \"K\" }"),
            "{e}"
        );
        // A rule that takes parameters, named alone, is told its whole form.
        let e = spec("compare = \"allclose\"").unwrap_err();
        assert!(
            e.contains("compare = { allclose = { atol = 1e-5, rtol = 1e-5 } }"),
            "{e}"
        );
        let e = spec("compare = \"ulp\"").unwrap_err();
        assert!(e.contains("compare = { ulp = 2 }"), "{e}");
        let e = spec("compare = { alclose = { atol = 1e-5, rtol = 1e-5 } }").unwrap_err();
        assert!(e.contains("alclose"), "{e}");
        let e = spec("compare = { ulp = -1 }").unwrap_err();
        assert!(e.contains("u64") || e.contains("invalid value"), "{e}");
        let e = spec("compare = { allclose = { atol = 1e-5 } }").unwrap_err();
        assert!(e.contains("missing field `rtol`"), "{e}");
        let e = spec("compare = { allclose = { atol = 1e-5, rtol = 0.0, foo = 1 } }").unwrap_err();
        assert!(e.contains("foo") && e.contains("`atol` or `rtol`"), "{e}");
        let e = spec("compare = { scaled-sum = true }").unwrap_err();
        assert!(e.contains("a size expression for k"), "{e}");
        let e = spec("compare = { scaled-sum = \" \" }").unwrap_err();
        assert!(e.contains("a size expression for k"), "{e}");
        let e = spec("compare = \"bitwise\"\nnan = \"nan-sometimes\"").unwrap_err();
        assert!(e.contains("nan-any-payload"), "{e}");
        let e = spec("compare = { ulp = 1, allclose = { atol = 0.0, rtol = 0.0 } }").unwrap_err();
        assert!(!e.is_empty());
        let e = spec("nan = \"nan-equal\"").unwrap_err();
        assert!(e.contains("missing field `compare`"), "{e}");
        let e = spec("compare = \"bitwise\"\nnans = \"nan-equal\"").unwrap_err();
        assert!(e.contains("unknown field `nans`"), "{e}");
    }

    #[test]
    fn comparison_serde_round_trips() {
        let cases = [
            Comparison::new(Rule::Bitwise),
            Comparison::new(Rule::Exact),
            Comparison::new(Rule::Ulp { max: 4 }).with_nan(NanRule::NanAnyPayload),
            Comparison::new(Rule::AllClose {
                atol: 1e-6,
                rtol: 1e-3,
            }),
            Comparison::new(Rule::ScaledSum { k: 611.0 }),
        ];
        for c in cases {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(
                serde_json::from_str::<Comparison>(&json).unwrap(),
                c,
                "{json}"
            );
            let t = toml::to_string(&c).unwrap();
            assert_eq!(toml::from_str::<Comparison>(&t).unwrap(), c, "{t}");
        }
        assert_eq!(
            serde_json::to_string(&Comparison::new(Rule::AllClose {
                atol: 1e-5,
                rtol: 0.0
            }))
            .unwrap(),
            r#"{"compare":{"allclose":{"atol":0.00001,"rtol":0.0}},"nan":"nan-fails"}"#
        );
        let c: Comparison = toml::from_str("compare = { scaled-sum = 16.0 }").unwrap();
        assert_eq!(c, Comparison::new(Rule::ScaledSum { k: 16.0 }));
        let c: Comparison = toml::from_str("compare = \"bitwise\"").unwrap();
        assert_eq!(c.nan, NanRule::NanEqual);
    }
}
