//! The workload of a declared operation (`operation = "declared"`): one shape (a value
//! per size variable), one input case and one set of scalar values, with the user's
//! reference computing the expected outputs. It implements [`Workload`], so every gate
//! that runs a built-in kernel runs a declared one the same way: exact-length buffers,
//! two poison patterns on outputs and scratch, inputs (and in-out buffers) set before each
//! launch, every output compared by its declared rule.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use crate::backend::{Arg, Backend, BackendError};
use crate::reference::Reference;
use crate::workload::PerturbSource;
use crate::workload::{NewInputs, Workload};
use klab_core::dtype::Dtype;
use klab_spec::declared::launches::DeclaredLaunch;
use klab_spec::declared::{DeclaredOp, OpParam, Role};
use klab_spec::manifest::KernelDecl;
use klab_spec::plan::LaunchPlan;
use klab_spec::rule::CheckOutcome;
use klab_spec::rule::{self, Comparison, Verdict};

pub use klab_core::expr::{describe_shape, Shape};

/// `--shape m=64,k=32`: a value for each size variable of an operation (checked against the
/// operation by [`klab_spec::declared::DeclaredOpSpec::shape_problem`]).
/// Serialized as that text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShapeArg(pub BTreeMap<String, u64>);

klab_core::serde_as_text!(ShapeArg);

impl std::str::FromStr for ShapeArg {
    type Err = String;
    fn from_str(s: &str) -> Result<ShapeArg, String> {
        let mut out = BTreeMap::new();
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}': expected VAR=VALUE, e.g. m=64,n=64,k=32"))?;
            let k = k.trim();
            let named = k
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !named {
                return Err(format!("'{k}' is not a size variable's name"));
            }
            let v: u64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{k}: '{}' is not a whole number", v.trim()))?;
            if out.insert(k.to_string(), v).is_some() {
                return Err(format!("{k} is given twice"));
            }
        }
        Ok(ShapeArg(out))
    }
}

impl std::fmt::Display for ShapeArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(","))
    }
}

/// A workload's expected values and per-element scales on one backend's device, uploaded once
/// (an `in` buffer's `want` is a copy of its input, to see that no launch changed it).
struct DeviceExpected<D> {
    want: Vec<Option<D>>,
    scale: Vec<Option<D>>,
}

impl<D: 'static> DeviceExpected<D> {
    /// The workload's entry in its device cache, made empty for `buffers` on first use.
    fn in_cache(cache: &mut Option<Box<dyn std::any::Any>>, buffers: usize) -> &mut Self {
        if !cache.as_ref().is_some_and(|c| c.is::<Self>()) {
            *cache = Some(Box::new(Self {
                want: (0..buffers).map(|_| None).collect(),
                scale: (0..buffers).map(|_| None).collect(),
            }));
        }
        cache
            .as_mut()
            .and_then(|c| c.downcast_mut::<Self>())
            .expect("made above")
    }
}

/// An output's per-element scale as the device checker reads it: little-endian f64s.
fn scale_bytes(m: &[f64], name: &str) -> Result<Vec<u8>, BackendError> {
    // Spread over the cores: at the index-overflow case this is 17 GB.
    let mut bytes = host_zeroed(8 * m.len(), name).map_err(BackendError::from)?;
    klab_core::par::for_chunks(&mut bytes, 8, |c, part| {
        let base = c * klab_core::par::CHUNK_ELEMENTS;
        for (j, out) in part.chunks_exact_mut(8).enumerate() {
            out.copy_from_slice(&m[base + j].to_le_bytes());
        }
    });
    Ok(bytes)
}

/// How the inputs are filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputCase {
    /// Small integers, exact in every dtype, so every intermediate is representable and
    /// a tolerance is irrelevant.
    Structural,
    /// Every element a different value where the dtype has enough of them (f32: the
    /// integers 0, 1, 2, ... while they are exact, then distinct bit patterns including
    /// signed zeros, subnormals, infinities and NaN payloads): a kernel that moves an
    /// element to the wrong place cannot meet an equal value there. For operations whose
    /// rules are all bitwise or exact (data movement).
    Distinct,
    /// Uniform over the buffer's range (default by dtype), from a replayable seed.
    Uniform { seed: u64 },
    /// Normal around the middle of the range (a sixth of its width per standard deviation).
    Normal { seed: u64 },
    /// Uniform over a thousand times the range: overflow without a max subtraction, say.
    Large { seed: u64 },
    /// Every element the same: contention for atomics, zero variance.
    Constant,
    /// Float inputs cycle through signed zeros, subnormals, infinities and NaN payloads,
    /// integer inputs through their extreme values (for bitwise and exact rules only:
    /// a tolerance has no answer for them).
    Special,
    /// The user's data for case `case` of `[kernel.op] cases` (`.npy` files); the inputs it
    /// does not name are uniform random from seed `case`.
    Data { case: usize },
}

impl InputCase {
    pub fn describe(self) -> String {
        match self {
            InputCase::Structural => "exact input".into(),
            InputCase::Distinct => "distinct exact input".into(),
            InputCase::Uniform { seed } => format!("random input seed {seed}"),
            InputCase::Normal { seed } => format!("normal input seed {seed}"),
            InputCase::Large { seed } => format!("large-magnitude input seed {seed}"),
            InputCase::Constant => "constant input".into(),
            InputCase::Special => "special values".into(),
            InputCase::Data { case } => format!("user data (cases[{case}])"),
        }
    }
}

/// One buffer at one shape.
#[derive(Debug, Clone)]
struct Buffer {
    name: String,
    dtype: Dtype,
    role: Role,
    elements: u64,
    shape: Vec<u64>,
    axes: Vec<String>,
    comparison: Option<Comparison>,
    /// The declared range at this shape.
    range: Option<[f64; 2]>,
    /// An integer input's domain at this shape, both ends included: its declared range,
    /// the rows of the buffer it indexes, or 0 to its offsets' total. Every case stays
    /// inside it.
    domain: Option<[i64; 2]>,
    /// The input holds a compressed layout's row offsets (`offsets`): non-decreasing from 0
    /// to the domain's end, made on the host ([`offsets_fill`]) and never perturbed.
    offsets: bool,
    /// A float input's range that every case keeps to (`domain = true`), made on the host
    /// but for the random draws ([`float_domain_fill`]).
    float_domain: Option<[f64; 2]>,
}

impl Buffer {
    /// Its length in bytes (checked when the workload is made).
    fn bytes(&self) -> usize {
        self.elements as usize * self.dtype.size_bytes()
    }
}

/// A zeroed host buffer, or an error when the host cannot hold it.
fn host_zeroed(bytes: usize, what: &str) -> Result<Vec<u8>, String> {
    // A reservation first, so that a size the host cannot hold is an error, not an abort;
    // then `vec!` of zeros, which takes zeroed pages from the allocator (calloc) where a
    // resize would write every byte on one thread (25 ms per 64 MiB, several times in each
    // cross-checked judgement).
    Vec::<u8>::new()
        .try_reserve_exact(bytes)
        .map_err(|_| format!("{what}: {bytes} bytes of host memory could not be allocated"))?;
    Ok(klab_core::par::zeroed(bytes))
}

/// [`host_zeroed`] with every page already mapped, by all the cores: a download into
/// unmapped pages takes each page fault on the driver's one copying thread.
fn host_for_download(bytes: usize, what: &str) -> Result<Vec<u8>, String> {
    let mut v = host_zeroed(bytes, what)?;
    klab_core::par::for_chunks(&mut v, 1, |_, part| {
        part.fill(0);
        // The allocator's pages are known zero: keep the stores that map them.
        std::hint::black_box(part);
    });
    Ok(v)
}

/// One buffer's per-element scale for its rule: scaled-sum's magnitudes, reference-error's
/// reference errors (None: its rule has no per-element scale).
type Scales = Option<Vec<f64>>;

/// Whether a comparison's bound is a multiple of a per-element scale from the reference.
fn scaled(c: Option<&Comparison>) -> bool {
    c.is_some_and(|c| {
        matches!(
            c.rule,
            rule::Rule::ScaledSum { .. } | rule::Rule::ReferenceError { .. }
        )
    })
}

/// A declared kernel at one shape, case and scalar choice.
#[derive(Clone)]
pub struct DeclaredWorkload {
    pub decl: KernelDecl,
    op: Arc<DeclaredOp>,
    pub shape: Shape,
    pub case: InputCase,
    /// Which of each scalar's values (cycled).
    scalar_index: usize,
    reference: std::rc::Rc<dyn Reference>,
    buffers: Vec<Buffer>,
    /// One plan per launch of the kernel's sequence.
    plans: Vec<LaunchPlan>,
    useful_bytes: u64,
    flops: u64,
    inputs: Arc<OnceLock<Result<Vec<Vec<u8>>, String>>>,
    expected: Arc<OnceLock<Result<Vec<Vec<u8>>, String>>>,
    /// Per buffer, the rule's per-element scale ([`Scales`]).
    scales: Arc<OnceLock<Result<Vec<Scales>, String>>>,
    /// The inputs were given ([`DeclaredWorkload::with_inputs`]), never generated.
    given_inputs: bool,
    /// The expected values on the device (a `DeviceExpected` of the backend's buffers).
    device_cache: std::rc::Rc<std::cell::RefCell<Option<Box<dyn std::any::Any>>>>,
    /// No validation has been judged yet: the first is cross-checked on the CPU.
    first_judgement: std::rc::Rc<std::cell::Cell<bool>>,
    /// Validations the CPU oracle cross-checked.
    cross_checked: std::rc::Rc<std::cell::Cell<u64>>,
    /// Judgements the device checker made.
    device_judged: std::rc::Rc<std::cell::Cell<u64>>,
    /// Seconds the reference took for the expected values, once it ran.
    reference_s: Arc<OnceLock<f64>>,
    /// The slices the reference computes and the outputs are compared on (the
    /// index-overflow case of an operation declared with `slices`); None: all of it.
    sample: Option<Arc<klab_spec::declared::slices::Sample>>,
    /// The inputs as the reference sees them: the sample's slices gathered (unused
    /// without a sample).
    sampled_inputs: Arc<OnceLock<Result<Vec<Vec<u8>>, String>>>,
    /// A few elements of each input drawn again from another case (a verified launch on
    /// the block's inputs barely changed); applied wherever the inputs are made, on the
    /// host or on the device.
    perturbation: Option<Perturbation>,
}

/// Inputs of the workload's case with [`crate::workload::PERTURBED_ELEMENTS`] elements of
/// each input (row offsets aside: they are a structure) taken from `case`, at positions
/// drawn from `seed` xor the input's number: the same positions and values on the host
/// ([`perturb`]) and on the device (`copy_elements`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Perturbation {
    seed: u64,
    case: InputCase,
}

/// How far a float computed on a few slices alone may be from its value at the whole
/// shape, relative to the output's largest magnitude ([`DeclaredWorkload::slices_disagree`]).
pub const SLICES_AGREE: f64 = 1e-5;

/// A reference slower than this (seconds, on the first inputs) makes no expected values
/// for fresh inputs inside a timed block ([`Workload::with_fresh_inputs`]).
pub const FRESH_REFERENCE_BUDGET_S: f64 = 2.0;

impl std::fmt::Debug for DeclaredWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclaredWorkload")
            .field("kernel", &self.decl.name)
            .field("shape", &self.shape)
            .field("case", &self.case)
            .finish()
    }
}

/// `launch`'s arguments in its parameter order. `bufs`, `ints` and `floats` are
/// the operation's values in the operation's parameter order (`op.params`): its
/// buffers, and its integer and float sizes and scalars each in the order they
/// appear. A size the operation's parameters leave out (a launch parameter only this
/// entry takes) is read from `shape`.
pub fn launch_args<'a, T>(
    launch: &DeclaredLaunch<'_>,
    op: &DeclaredOp,
    shape: &Shape,
    bufs: &'a [T],
    ints: &[i64],
    floats: &[f64],
) -> Vec<Arg<'a, T>> {
    let (mut i, mut f, mut k) = (0, 0, 0);
    let mut buffer_at = std::collections::BTreeMap::new();
    let mut value_of = std::collections::BTreeMap::new();
    for p in &op.params {
        match p {
            OpParam::Buffer(name) => {
                buffer_at.insert(name.as_str(), k);
                k += 1;
            }
            OpParam::Size(name, dt) | OpParam::Scalar(name, dt) if !dt.is_float() => {
                value_of.insert(name.as_str(), Value::Int(ints[i]));
                i += 1;
            }
            OpParam::Size(name, _) | OpParam::Scalar(name, _) => {
                value_of.insert(name.as_str(), Value::Float(floats[f]));
                f += 1;
            }
        }
    }
    launch
        .params
        .iter()
        .map(|p| match p {
            OpParam::Buffer(name) => Arg::Buffer(&bufs[buffer_at[name.as_str()]]),
            OpParam::Size(name, dt) | OpParam::Scalar(name, dt) => {
                let v = value_of
                    .get(name.as_str())
                    .copied()
                    .unwrap_or_else(|| Value::Int(shape[name]));
                v.as_arg(*dt)
            }
        })
        .collect()
}

/// A size's or scalar's value before it takes its parameter's type.
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(i64),
    Float(f64),
}

impl Value {
    fn as_arg<'a, T>(self, dt: Dtype) -> Arg<'a, T> {
        let (int, float) = match self {
            Value::Int(v) => (v, v as f64),
            Value::Float(v) => (v as i64, v),
        };
        match dt {
            Dtype::I32 => Arg::I32(int as i32),
            Dtype::U32 => Arg::U32(int as u32),
            Dtype::U64 => Arg::U64(int as u64),
            Dtype::F32 => Arg::F32(float as f32),
            Dtype::F64 => Arg::F64(float),
            _ => Arg::I64(int),
        }
    }
}

impl DeclaredWorkload {
    /// Evaluate every expression of `decl`'s operation at `shape`. A size that makes an
    /// expression fail (division by zero, a negative length) is an error naming it.
    pub fn new(
        decl: KernelDecl,
        shape: Shape,
        case: InputCase,
        scalar_index: usize,
        reference: std::rc::Rc<dyn Reference>,
    ) -> Result<DeclaredWorkload, BackendError> {
        let op = decl.op.clone();
        let at = describe_shape(&shape);
        let eval = |field: &str, x: &klab_core::expr::Expr| {
            x.eval_u64(&shape)
                .map_err(|e| BackendError::from(format!("op.{field} at {at}: {e}")))
        };
        let all = |field: &str, v: &[klab_core::expr::Expr]| -> Result<Vec<u64>, BackendError> {
            v.iter().map(|x| eval(field, x)).collect()
        };
        let spec = &op.spec;
        let plans = decl
            .launches()
            .iter()
            .map(|l| l.plan(&shape))
            .collect::<Result<Vec<_>, _>>()
            .map_err(BackendError::from)?;
        let mut buffers = Vec::new();
        for p in &op.params {
            let OpParam::Buffer(name) = p else { continue };
            let b = &spec.buffers[name];
            let elements = eval(&format!("buffers.{name}.len"), &b.len)?;
            elements
                .checked_mul(b.dtype.size_bytes() as u64)
                .and_then(|x| usize::try_from(x).ok())
                .filter(|x| *x <= isize::MAX as usize)
                .ok_or_else(|| {
                    BackendError::from(format!(
                        "buffer {name}: {elements} elements of {} overflow a byte count at {at}",
                        b.dtype
                    ))
                })?;
            let shape_dims: Vec<u64> = match &b.shape {
                Some(s) => all(&format!("buffers.{name}.shape"), s)?,
                None => vec![elements],
            };
            if shape_dims.iter().try_fold(1u64, |a, d| a.checked_mul(*d)) != Some(elements) {
                return Err(BackendError::from(format!(
                    "buffer {name}: shape {shape_dims:?} does not hold its {elements} elements at {}",
                    describe_shape(&shape)
                )));
            }
            let axes = match (&b.axes, &b.shape) {
                (Some(a), _) => a.clone(),
                (None, Some(s)) => s.iter().map(|x| x.to_string()).collect(),
                (None, None) => vec!["i".into()],
            };
            let comparison = match &b.compare {
                Some(c) => {
                    let rule = c
                        .resolve(b.dtype, |k| {
                            klab_core::expr::Expr::parse(k)
                                .and_then(|x| x.eval(&shape))
                                .map(|v| v as f64)
                                .map_err(|e| e.to_string())
                        })
                        .map_err(|e| BackendError::from(format!("buffer {name}: {e}")))?;
                    let mut cmp = Comparison::new(rule);
                    if let Some(n) = b.nan {
                        cmp = cmp.with_nan(n);
                    }
                    Some(cmp)
                }
                None => None,
            };
            let range = match &b.range {
                Some([lo, hi]) => {
                    let end = |x: &klab_spec::declared::Bound| {
                        x.eval(&shape).map_err(|e| {
                            BackendError::from(format!("buffers.{name}.range at {at}: {e}"))
                        })
                    };
                    Some([end(lo)?, end(hi)?])
                }
                None => None,
            };
            buffers.push(Buffer {
                name: name.clone(),
                dtype: b.dtype,
                role: b.role,
                elements,
                shape: shape_dims,
                axes,
                comparison,
                float_domain: match range {
                    Some([lo, hi]) if b.domain && b.dtype.is_float() => {
                        if lo.partial_cmp(&hi).is_none_or(|o| o.is_gt()) {
                            return Err(BackendError::from(format!(
                                "buffers.{name}.range at {at}: [{lo}, {hi}] is not an interval"
                            )));
                        }
                        Some([lo, hi])
                    }
                    _ => None,
                },
                range,
                domain: None,
                offsets: b.offsets.is_some(),
            });
        }
        for i in 0..buffers.len() {
            buffers[i].domain =
                domain_of(&buffers, &spec.buffers[&buffers[i].name], i, &shape, &at)?;
        }
        Ok(DeclaredWorkload {
            useful_bytes: eval("useful_bytes", &spec.useful_bytes)?,
            flops: match &spec.flops {
                Some(f) => eval("flops", f)?,
                None => 0,
            },
            decl,
            op,
            shape,
            case,
            scalar_index,
            reference,
            buffers,
            plans,
            inputs: Default::default(),
            expected: Default::default(),
            scales: Default::default(),
            given_inputs: false,
            device_cache: Default::default(),
            first_judgement: std::rc::Rc::new(std::cell::Cell::new(true)),
            cross_checked: Default::default(),
            device_judged: Default::default(),
            reference_s: Default::default(),
            sample: None,
            sampled_inputs: Default::default(),
            perturbation: None,
        })
    }

    /// This workload with the reference run, and the outputs compared, on a sample of the
    /// operation's independent slices ([`klab_spec::declared::slices::Sample`], drawn from `seed`);
    /// unchanged when the operation declares no slices or has too few to sample.
    pub fn sampled(self, seed: u64) -> Result<DeclaredWorkload, BackendError> {
        let sample = klab_spec::declared::slices::Sample::at(&self.op.spec, &self.shape, seed)
            .map_err(|e| {
                BackendError::from(format!("slices at {}: {e}", describe_shape(&self.shape)))
            })?;
        Ok(self.with_sample(sample))
    }

    /// This workload with its inputs and everything made from them (expected values, scales,
    /// the sample's gathered inputs, the device's copies) to be made again.
    fn remade(&self) -> DeclaredWorkload {
        let mut w = self.clone();
        w.inputs = Default::default();
        w.expected = Default::default();
        w.scales = Default::default();
        w.sampled_inputs = Default::default();
        w.device_cache = Default::default();
        w
    }

    /// This workload on `sample` (None: all of it), its inputs shared, everything the
    /// reference computes made again.
    fn with_sample(&self, sample: Option<klab_spec::declared::slices::Sample>) -> DeclaredWorkload {
        let mut w = self.clone();
        w.sample = sample.map(Arc::new);
        w.expected = Default::default();
        w.scales = Default::default();
        w.sampled_inputs = Default::default();
        w.reference_s = Default::default();
        w
    }

    /// Why the operation's declared slices are not independent for its reference, if they
    /// are not: the reference run on the middle and the last slice alone (a strict subset:
    /// this needs at least 4 slices, else None) must give the values it gives them at this
    /// whole shape (a prefix sum along rows declared `slices = "rows"` would not). Integers
    /// must be equal; floats within [`SLICES_AGREE`] of the largest magnitude (a
    /// reference that blocks its loops by the sizes may round differently), NaN where NaN.
    /// The reference failing on the slices alone is a reason too.
    pub fn slices_disagree(&self) -> Option<String> {
        let var = self.op.spec.slices.clone()?;
        let total = u64::try_from(self.shape.get(&var).copied().unwrap_or(0)).unwrap_or(0);
        if total < 4 {
            return None;
        }
        let at = describe_shape(&self.shape);
        let chosen = vec![total / 2, total - 1];
        let not_held = |why: String| {
            Some(format!(
                "slices = \"{var}\" does not hold for the reference at {at}: computed on {var} slices {chosen:?} alone {why}; each slice must depend only on its own slice of the inputs (remove slices, or fix the reference)"
            ))
        };
        let parts = match klab_spec::declared::slices::parts(&self.op.spec, &self.shape, &var) {
            Ok(p) => p,
            Err(e) => return not_held(format!("it cannot be sliced: {e}")),
        };
        let sample = klab_spec::declared::slices::Sample {
            var: var.clone(),
            total,
            chosen: chosen.clone(),
            parts,
        };
        let alone = self.with_sample(Some(sample.clone()));
        let whole = match self.expected() {
            Ok(w) => w,
            Err(e) => return not_held(format!("(the whole shape failed first: {})", e.message)),
        };
        let apart = match alone.expected() {
            Ok(a) => a,
            Err(e) => return not_held(format!("it failed: {}", e.message)),
        };
        for (i, b) in self.buffers.iter().enumerate() {
            if !b.role.compared() {
                continue;
            }
            let size = b.dtype.size_bytes();
            let want = sample.gather(&b.name, &whole[i], size);
            let n = want.len() / size;
            let differs = |k: usize| -> bool {
                if b.dtype.is_float() {
                    let (x, y) = (b.dtype.to_f64(&apart[i], k), b.dtype.to_f64(&want, k));
                    let scale = (0..n)
                        .map(|j| b.dtype.to_f64(&want, j).abs())
                        .filter(|v| v.is_finite())
                        .fold(0.0, f64::max);
                    !(x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= SLICES_AGREE * scale)
                } else {
                    want[k * size..(k + 1) * size] != apart[i][k * size..(k + 1) * size]
                }
            };
            if let Some(k) = (0..n).find(|k| differs(*k)) {
                let value =
                    |bytes: &[u8]| rule::show_value(b.dtype, &bytes[k * size..(k + 1) * size]);
                return not_held(format!(
                    "it gives {}[{}] = {}, the whole shape gives {}",
                    b.name,
                    sample.full_index(&b.name, k as u64),
                    value(&apart[i]),
                    value(&want)
                ));
            }
        }
        None
    }

    /// The reference this workload computes with.
    pub fn reference_rc(&self) -> std::rc::Rc<dyn Reference> {
        self.reference.clone()
    }

    /// What the sample covers, when there is one ([`klab_spec::declared::slices::Sample::describe`]).
    pub fn sample_note(&self) -> Option<String> {
        self.sample.as_ref().map(|s| s.describe())
    }

    /// The shape the reference sees: the sample's, else this one.
    pub fn reference_shape(&self) -> Shape {
        match &self.sample {
            Some(s) => s.shape(&self.shape),
            None => self.shape.clone(),
        }
    }

    /// Buffer `b`'s elements as the reference sees them.
    fn reference_elements(&self, b: &Buffer) -> u64 {
        match &self.sample {
            // Scratch is only zeroed: as long as the sample's own shape makes it.
            Some(_) if b.role == Role::Scratch => self.op.spec.buffers[&b.name]
                .len
                .eval_u64(&self.reference_shape())
                .unwrap_or(b.elements)
                .min(b.elements),
            Some(s) => s.elements(&b.name, b.elements),
            None => b.elements,
        }
    }

    /// The inputs as the reference sees them: the sample's slices of each, else the inputs.
    fn reference_inputs(&self) -> Result<&[Vec<u8>], BackendError> {
        let Some(sample) = &self.sample else {
            return self.inputs();
        };
        let inputs = self.inputs()?;
        self.sampled_inputs
            .get_or_init(|| {
                Ok(self
                    .buffers
                    .iter()
                    .zip(inputs)
                    .map(|(b, v)| match v.is_empty() {
                        true => Vec::new(),
                        false => sample.gather(&b.name, v, b.dtype.size_bytes()),
                    })
                    .collect())
            })
            .as_deref()
            .map_err(|e| BackendError::from(e.clone()))
    }

    /// A built-in operation's kernel at size `n`, with the operation's CPU oracle.
    pub fn builtin(
        decl: KernelDecl,
        n: u64,
        case: InputCase,
        scalar_index: usize,
    ) -> Result<DeclaredWorkload, BackendError> {
        let reference = crate::oracle::BuiltinReference::for_op(&decl.op).ok_or_else(|| {
            BackendError::from(format!(
                "{} declares its own reference; build it first",
                decl.name
            ))
        })?;
        let n =
            i64::try_from(n).map_err(|_| BackendError::from(format!("n = {n} is too large")))?;
        DeclaredWorkload::new(
            decl,
            Shape::from([("n".to_string(), n)]),
            case,
            scalar_index,
            std::rc::Rc::new(reference),
        )
    }

    /// Another kernel of the same operation at the same shape, case and scalars: the
    /// inputs, the reference's outputs and the per-element scales are made once for both when the
    /// two declare the same buffers, scalars and reference (a command that runs several
    /// transposes generates the input once).
    pub fn with_decl(&self, decl: KernelDecl) -> Result<DeclaredWorkload, BackendError> {
        let same = {
            let (a, b) = (&self.op.spec, &decl.op.spec);
            a.buffers == b.buffers && a.scalars == b.scalars && a.reference == b.reference
        };
        // The other kernel's own reference: a copy's oracle must never judge a transpose.
        let reference: std::rc::Rc<dyn Reference> =
            match crate::oracle::BuiltinReference::for_op(&decl.op) {
                Some(r) => std::rc::Rc::new(r),
                None if same => self.reference.clone(),
                None => {
                    return Err(BackendError::from(format!(
                        "{} declares another reference than {}; build it first",
                        decl.name, self.decl.name
                    )))
                }
            };
        let mut w = DeclaredWorkload::new(
            decl,
            self.shape.clone(),
            self.case,
            self.scalar_index,
            reference,
        )?;
        if same {
            w.sample = self.sample.clone();
            w.inputs = self.inputs.clone();
            w.expected = self.expected.clone();
            w.scales = self.scales.clone();
            w.reference_s = self.reference_s.clone();
            w.sampled_inputs = self.sampled_inputs.clone();
        }
        Ok(w)
    }

    /// The same workload on the given initial bytes of each buffer (empty for outputs and
    /// scratch), in the kernel's buffer order: the property checks' permuted or scaled
    /// inputs.
    pub fn with_inputs(&self, inputs: Vec<Vec<u8>>) -> Result<DeclaredWorkload, BackendError> {
        if inputs.len() != self.buffers.len() {
            return Err(BackendError::from(format!(
                "{} initial buffers given for {} buffers",
                inputs.len(),
                self.buffers.len()
            )));
        }
        for (b, i) in self.buffers.iter().zip(&inputs) {
            let want = if matches!(b.role, Role::In | Role::Inout) {
                b.bytes()
            } else {
                0
            };
            if i.len() != want {
                return Err(BackendError::from(format!(
                    "buffer {}: {} initial bytes given, it takes {want}",
                    b.name,
                    i.len()
                )));
            }
        }
        let mut w = self.remade();
        w.inputs = Arc::new(OnceLock::from(self.within_domains(inputs)));
        w.given_inputs = true;
        w.perturbation = None;
        w.first_judgement = std::rc::Rc::new(std::cell::Cell::new(true));
        w.cross_checked = Default::default();
        w.device_judged = Default::default();
        Ok(w)
    }

    /// Each buffer's initial bytes (inputs and in-out buffers; empty for the others), in
    /// the kernel's buffer order.
    pub fn initial_bytes(&self) -> Result<&[Vec<u8>], BackendError> {
        self.inputs()
    }

    /// The position of buffer `name` in the kernel's buffer order.
    pub fn buffer_index(&self, name: &str) -> Option<usize> {
        self.buffers.iter().position(|b| b.name == name)
    }

    /// No element to compute: every compared output is empty.
    pub fn empty(&self) -> bool {
        self.buffers
            .iter()
            .all(|b| !b.role.compared() || b.elements == 0)
    }

    /// Why the launch cannot produce the outputs: a grid with a zero dimension while an
    /// output has elements (a launch that covers nothing is a failure, not a pass).
    pub fn launch_covers_nothing(&self) -> Option<String> {
        let out = self
            .buffers
            .iter()
            .find(|b| b.role.compared() && b.elements > 0)?;
        let launches = self.decl.launches();
        let (launch, plan) = launches
            .iter()
            .zip(&self.plans)
            .find(|(_, p)| p.grid.product() == 0 || p.block.product() == 0)?;
        let which = match launch.index {
            Some(_) => format!("the launch of {}", launch.entry),
            None => "the launch".into(),
        };
        Some(format!(
            "{which} ({}) has a zero dimension while {} has {} elements",
            plan.describe(),
            out.name,
            out.elements
        ))
    }

    /// The scalar values of this case at `shape`, in the kernel's parameter order: (ints,
    /// floats).
    fn scalars_at(&self, shape: &Shape) -> (Vec<i64>, Vec<f64>) {
        let (mut ints, mut floats) = (Vec::new(), Vec::new());
        for p in &self.op.params {
            match p {
                OpParam::Buffer(_) => {}
                OpParam::Size(name, _) => ints.push(shape[name]),
                OpParam::Scalar(name, dtype) => {
                    let x = self.op.spec.scalars[name].value(self.scalar_index);
                    if dtype.is_float() {
                        floats.push(x);
                    } else {
                        ints.push(x as i64);
                    }
                }
            }
        }
        (ints, floats)
    }

    /// Each buffer's initial bytes (inputs and in-out buffers; empty for the others).
    fn inputs(&self) -> Result<&[Vec<u8>], BackendError> {
        self.inputs
            .get_or_init(|| {
                // `k` counts the inputs (so the first input is the same whatever the
                // outputs before it), and makes two inputs of one shape differ.
                let mut k = 0;
                self.buffers
                    .iter()
                    .map(|b| match (b.role, self.case) {
                        (Role::Out | Role::Scratch, _) => Ok(Vec::new()),
                        (_, case) => {
                            k += 1;
                            match case {
                                InputCase::Data { case } => {
                                    match self.op.spec.cases[case].inputs.get(&b.name) {
                                        Some(path) => load(b, path).and_then(|bytes| {
                                            match outside_domain(b, &bytes) {
                                                Some((i, v)) => Err(format!(
                                                    "buffer {}: {path}: element {i} holds {v}, outside the buffer's domain {}",
                                                    b.name,
                                                    describe_domain(b)
                                                )),
                                                None => Ok(bytes),
                                            }
                                        }),
                                        None => {
                                            fill(b, k - 1, InputCase::Uniform { seed: case as u64 })
                                        }
                                    }
                                }
                                _ => fill(b, k - 1, case),
                            }
                        }
                    })
                    .collect::<Result<Vec<_>, String>>()
                    .and_then(|mut inputs| {
                        if let Some(p) = self.perturbation {
                            self.perturb_on_host(&mut inputs, p)?;
                        }
                        self.within_domains(inputs)
                    })
            })
            .as_deref()
            .map_err(|e| BackendError::from(e.clone()))
    }

    /// `inputs` (the case's) with `p`'s elements drawn again.
    fn perturb_on_host(&self, inputs: &mut [Vec<u8>], p: Perturbation) -> Result<(), String> {
        let mut k = 0;
        for (b, held) in self.buffers.iter().zip(inputs.iter_mut()) {
            if !matches!(b.role, Role::In | Role::Inout) {
                continue;
            }
            if !b.offsets {
                let drawn = fill(b, k, p.case)?;
                perturb(held, &drawn, b.dtype.size_bytes(), p.seed ^ k as u64);
            }
            k += 1;
        }
        Ok(())
    }

    /// Input `i`, just generated on the device, with the perturbation's elements drawn
    /// again there: the other case made in a buffer of its own, then the drawn positions
    /// copied over.
    fn perturb_on_device<B: Backend>(
        &self,
        b: &mut B,
        d: &mut B::Buffer,
        i: usize,
    ) -> Result<(), BackendError> {
        let (Some(p), buf) = (self.perturbation, &self.buffers[i]) else {
            return Ok(());
        };
        if !matches!(buf.role, Role::In | Role::Inout) || buf.offsets {
            return Ok(());
        }
        let k = self.input_number(i);
        let mut other = b.alloc_bytes(buf.bytes())?;
        let made = match generator(buf, k, p.case) {
            Some(g) => b.device_generate(&mut other, &g)?,
            None => false,
        };
        if !made {
            let bytes = fill(buf, k, p.case).map_err(BackendError::from)?;
            b.upload_bytes(&mut other, &bytes)?;
        }
        let size = buf.dtype.size_bytes();
        let key = p.seed ^ k as u64;
        b.copy_elements(
            d,
            &other,
            buf.elements,
            size,
            key,
            crate::workload::PERTURBED_ELEMENTS,
        )
    }

    /// `inputs` when every index holds a value of its domain; else klab's own bug (a
    /// generated value the reference and the kernel would read out of bounds), said so.
    fn within_domains(&self, inputs: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, String> {
        for (b, bytes) in self.buffers.iter().zip(&inputs) {
            if let Some((i, v)) = outside_domain(b, bytes) {
                return Err(format!(
                    "klab's bug: the {} made {v} at element {i} of {}, outside its domain {}; please report this line",
                    self.case.describe(),
                    b.name,
                    describe_domain(b)
                ));
            }
        }
        Ok(inputs)
    }

    /// The reference run on host copies of `inputs` (outputs and scratch zeroed), each as
    /// the reference sees it ([`Self::reference_inputs`]).
    fn run_reference(&self, inputs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
        self.run_reference_with(inputs, false, None)
    }

    /// [`Self::run_reference`], with the float scalars' absolute values when `abs_scalars`
    /// (scaled-sum's magnitudes: `alpha AB + beta C` with beta < 0 must not cancel), in
    /// a working precision when `precision` is given ([`Reference::run_in`]).
    fn run_reference_with(
        &self,
        inputs: &[Vec<u8>],
        abs_scalars: bool,
        precision: Option<rule::Precision>,
    ) -> Result<Vec<Vec<u8>>, String> {
        let mut host = Vec::with_capacity(self.buffers.len());
        for (b, i) in self.buffers.iter().zip(inputs) {
            let bytes = self.reference_elements(b) as usize * b.dtype.size_bytes();
            let mut v = host_zeroed(bytes, &b.name)?;
            if !i.is_empty() {
                // Spread over the cores: a copy of a large input is the reference's first cost.
                klab_core::par::for_chunks(&mut v, 1, |c, part| {
                    let at = c * klab_core::par::CHUNK_ELEMENTS;
                    part.copy_from_slice(&i[at..at + part.len()]);
                });
            }
            host.push(v);
        }
        let shape = self.reference_shape();
        let (ints, mut floats) = self.scalars_at(&shape);
        if abs_scalars {
            floats.iter_mut().for_each(|f| *f = f.abs());
        }
        let mut views: Vec<&mut [u8]> = host.iter_mut().map(|v| v.as_mut_slice()).collect();
        match precision {
            None => self.reference.run(&shape, &mut views, &ints, &floats)?,
            Some(p) => self
                .reference
                .run_in(p, &shape, &mut views, &ints, &floats)?,
        }
        Ok(host)
    }

    /// Whether an output's bound takes a per-element scale from the reference (the
    /// reference then runs again: scaled-sum once, reference-error
    /// 2 [`crate::refscale::SAMPLES`]` - 1` times).
    pub fn uses_scales(&self) -> bool {
        self.buffers.iter().any(|b| scaled(b.comparison.as_ref()))
    }

    /// Make the inputs, the reference's outputs and the rules' per-element scales now
    /// (each is made once and kept), so that a reference failure is known before any
    /// launch.
    pub fn prepare(&self) -> Result<(), BackendError> {
        self.expected()?;
        self.scales()?;
        Ok(())
    }

    /// The reference's outputs (of the sample, when there is one), computed once per
    /// workload.
    fn expected(&self) -> Result<&[Vec<u8>], BackendError> {
        let inputs = self.reference_inputs()?;
        let r = self.expected.get_or_init(|| {
            let t = std::time::Instant::now();
            let r = self.run_reference(inputs);
            let _ = self.reference_s.set(t.elapsed().as_secs_f64());
            r
        });
        r.as_deref()
            .map_err(|e| BackendError::from(format!("the reference failed: {e}")))
    }

    /// Every output's per-element scale, made once: scaled-sum's magnitudes
    /// ([`Self::abs_magnitudes`]), reference-error's reference errors
    /// ([`Self::reference_errors`]), None for the other rules.
    fn scales(&self) -> Result<&[Scales], BackendError> {
        let r = self.scales.get_or_init(|| {
            let mut out: Vec<Scales> = vec![None; self.buffers.len()];
            if !self.uses_scales() {
                return Ok(out);
            }
            let is = |b: &Buffer, f: fn(&rule::Rule) -> bool| {
                b.comparison.as_ref().is_some_and(|c| f(&c.rule))
            };
            if self
                .buffers
                .iter()
                .any(|b| is(b, |r| matches!(r, rule::Rule::ScaledSum { .. })))
            {
                let mut m = self.abs_magnitudes().map_err(|e| {
                    format!("the reference failed on the absolute inputs (scaled-sum's magnitudes): {e}")
                })?;
                for (i, b) in self.buffers.iter().enumerate() {
                    if is(b, |r| matches!(r, rule::Rule::ScaledSum { .. })) {
                        out[i] = Some(std::mem::take(&mut m[i]));
                    }
                }
            }
            self.reference_errors(&mut out)?;
            Ok(out)
        });
        r.as_deref().map_err(|e| BackendError::from(e.clone()))
    }

    /// Scaled-sum's per-element magnitudes: the reference run again on the absolute values
    /// of the float inputs, so that for a sum of products (a dot product, a GEMM, a
    /// reduction, a convolution) each output's magnitude is `sum |a_i x_i|`, the bound the
    /// reduction lab's gate is written against. Integer inputs (indices, counts) are kept.
    /// One vector per buffer (empty for inputs).
    fn abs_magnitudes(&self) -> Result<Vec<Vec<f64>>, String> {
        let mut abs = self.reference_inputs().map_err(|e| e.message)?.to_vec();
        for (b, v) in self.buffers.iter().zip(abs.iter_mut()) {
            // Outputs and scratch have no initial bytes (empty).
            if b.dtype.is_float() && !v.is_empty() {
                let dt = b.dtype;
                klab_core::par::for_chunks(v, dt.size_bytes(), |_, part| {
                    for i in 0..part.len() / dt.size_bytes() {
                        let x = dt.to_f64(part, i);
                        dt.write_f64(part, i, x.abs());
                    }
                });
            }
        }
        let out = self.run_reference_with(&abs, true, None)?;
        Ok(self
            .buffers
            .iter()
            .zip(out)
            .map(|(b, bytes)| {
                let mut m = klab_core::par::zeroed(self.reference_elements(b) as usize);
                klab_core::par::for_chunks(&mut m, 1, |c, part| {
                    let base = c * klab_core::par::CHUNK_ELEMENTS;
                    for (j, m) in part.iter_mut().enumerate() {
                        // A magnitude the dtype cannot hold (an f16 sum past 65504) gives
                        // no bound: the element must then equal the reference.
                        let v = b.dtype.to_f64(&bytes, base + j).abs();
                        *m = if v.is_finite() { v } else { 0.0 };
                    }
                });
                m
            })
            .collect())
    }

    /// Reference-error's per-element scales, into `out` for each output it compares: the
    /// reference in the rule's working precision against the reference in double, on the
    /// inputs and on [`crate::refscale::SAMPLES`]` - 1` perturbations of them
    /// ([`crate::refscale::errors`]).
    fn reference_errors(&self, out: &mut [Scales]) -> Result<(), String> {
        let precision_of = |b: &Buffer| match b.comparison.as_ref()?.rule {
            rule::Rule::ReferenceError { precision, .. } => Some(precision),
            _ => None,
        };
        // Validation allows one working precision per operation.
        let Some(p) = self.buffers.iter().find_map(precision_of) else {
            return Ok(());
        };
        let failed = |e: String| {
            format!(
                "the reference in {} (rule reference-error) failed: {e}",
                p.name()
            )
        };
        let inputs = self.reference_inputs().map_err(|e| e.message)?;
        let expected = self.expected().map_err(|e| e.message)?;
        let samples = crate::refscale::SAMPLES as usize;
        // One sample's runs at a time: the running maximum per element is all that is kept.
        let mut acc: Vec<Option<crate::refscale::Errors>> = self
            .buffers
            .iter()
            .map(|b| {
                precision_of(b).map(|_| {
                    let n = self.reference_elements(b) as usize;
                    crate::refscale::Errors::new(b.dtype, n, samples)
                })
            })
            .collect();
        for sample in 0..crate::refscale::SAMPLES {
            let (low, high) = if sample == 0 {
                let low = self
                    .run_reference_with(inputs, false, Some(p))
                    .map_err(failed)?;
                (low, None)
            } else {
                let mut moved = inputs.to_vec();
                for (k, (b, v)) in self.buffers.iter().zip(moved.iter_mut()).enumerate() {
                    crate::refscale::perturb(b.dtype, v, sample, k as u64);
                }
                let low = self
                    .run_reference_with(&moved, false, Some(p))
                    .map_err(failed)?;
                (low, Some(self.run_reference_with(&moved, false, None)?))
            };
            for (i, a) in acc.iter_mut().enumerate() {
                if let Some(a) = a {
                    let high = high.as_ref().map_or(&expected[i], |h| &h[i]);
                    a.add(&low[i], high);
                }
            }
        }
        for (slot, a) in out.iter_mut().zip(acc) {
            if let Some(a) = a {
                *slot = Some(a.finish());
            }
        }
        Ok(())
    }

    /// Every compared buffer's verdict against the reference.
    pub fn verdicts<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        let expected = self.expected()?;
        let scales = self.scales()?;
        let mut out = Vec::new();
        for (i, buf) in self.buffers.iter().enumerate() {
            let Some(cmp) = &buf.comparison else { continue };
            let mut got = host_for_download(buf.bytes(), &buf.name).map_err(BackendError::from)?;
            b.download_bytes(&bufs[i], &mut got)?;
            let scale = scales[i].as_deref();
            let failed = |e| BackendError::from(format!("buffer {}: {e}", buf.name));
            let v = match &self.sample {
                None => rule::compare(buf.dtype, cmp, &got, &expected[i], scale, &buf.shape)
                    .map_err(failed)?,
                Some(sample) => {
                    let got = sample.gather(&buf.name, &got, buf.dtype.size_bytes());
                    let shape = self.sampled_dims(buf);
                    rule::compare(buf.dtype, cmp, &got, &expected[i], scale, &shape)
                        .map_err(failed)?
                        .relocated(|k| sample.full_index(&buf.name, k), &buf.shape)
                }
            };
            out.push((buf.name.clone(), v));
        }
        Ok(out)
    }

    /// Every compared buffer's verdict, by the checker the backend's policy chooses: the
    /// device checker where it has one (the first judgement of a workload with at most
    /// [`crate::verify::CROSS_CHECK_MAX_BYTES`] of compared output, or every judgement
    /// under `paranoid`, also by the CPU oracle: a disagreement is a klab error), else
    /// the CPU oracle ([`Self::verdicts`]); then each `in` buffer the launch changed, as a
    /// failure of its own ([`Self::changed_inputs`]).
    pub fn judge<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        let changed = self.changed_inputs(b, bufs)?;
        // The device checker reads a copy's or a transpose's expected values from the
        // slot's input, which is no longer klab's: the CPU oracle judges from its own.
        let mut verdicts = if changed.is_empty() {
            self.outputs_judged(b, bufs)?
        } else {
            self.verdicts(b, bufs)?
        };
        verdicts.extend(changed);
        Ok(verdicts)
    }

    /// [`Self::judge`] for the compared outputs alone.
    fn outputs_judged<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        let policy = b.verify_policy();
        if policy.checker == crate::verify::Checker::Cpu {
            return self.verdicts(b, bufs);
        }
        let Some(device) = self.device_verdicts(b, bufs)? else {
            return self.verdicts(b, bufs);
        };
        let first = self.first_judgement.replace(false);
        if policy.paranoid
            || (first && self.compared_bytes() <= crate::verify::CROSS_CHECK_MAX_BYTES)
        {
            let cpu = self.verdicts(b, bufs)?;
            for ((name, d), (_, c)) in device.iter().zip(&cpu) {
                if let Some(why) = crate::verify::disagreement(d, c) {
                    let overwritten = self.overwritten_checker_copies(b)?;
                    if !overwritten.is_empty() {
                        return Ok(cpu.into_iter().chain(overwritten).collect());
                    }
                    return Err(BackendError::klab_fault(format!(
                        "klab error: {} on output {name} of {} at {}: {why} (a fault in klab's checking, not a verdict on the kernel)",
                        crate::verify::DISAGREEMENT,
                        self.decl.name,
                        describe_shape(&self.shape)
                    )));
                }
            }
            self.cross_checked.set(self.cross_checked.get() + 1);
        }
        if device.iter().any(|(_, v)| !v.passed()) {
            // A failure may be the checker's copy, not the output: then the CPU oracle judges.
            let overwritten = self.overwritten_checker_copies(b)?;
            if !overwritten.is_empty() {
                return Ok(self
                    .verdicts(b, bufs)?
                    .into_iter()
                    .chain(overwritten)
                    .collect());
            }
        }
        self.device_judged.set(self.device_judged.get() + 1);
        Ok(device)
    }

    /// The device checker's copies of the expected outputs that no longer hold what klab
    /// uploaded, each as a failure of its own. klab never writes them after the upload, so
    /// only a kernel storing outside its declared buffers changes them: its failure, not a
    /// fault in klab's checking. Looked at only when the device checker failed an output or
    /// disagreed with the CPU oracle, and only up to the cross-check's size (beyond it the
    /// host copies this needs would be as large as the outputs); the copies are dropped, to
    /// be uploaded afresh.
    fn overwritten_checker_copies<B: Backend>(
        &self,
        b: &mut B,
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        if self.compared_bytes() > crate::verify::CROSS_CHECK_MAX_BYTES {
            return Ok(Vec::new());
        }
        let bitwise = rule::Comparison {
            rule: rule::Rule::Bitwise,
            nan: rule::NanRule::NanEqual,
        };
        let (expected, scales) = (self.expected()?, self.scales()?);
        let mut cache = self.device_cache.borrow_mut();
        let dev = DeviceExpected::<B::Buffer>::in_cache(&mut cache, self.buffers.len());
        let mut out = Vec::new();
        for (i, buf) in self.buffers.iter().enumerate() {
            if buf.comparison.is_none() {
                continue;
            }
            let copies = [
                (
                    dev.want[i].as_ref(),
                    buf.dtype,
                    "expected",
                    Some(&expected[i][..]),
                ),
                (dev.scale[i].as_ref(), Dtype::F64, "scale of", None),
            ];
            for (copy, dtype, what, uploaded) in copies {
                let Some(copy) = copy else { continue };
                let scale;
                let uploaded = match (uploaded, scales[i].as_deref()) {
                    (Some(u), _) => u,
                    (None, Some(m)) => {
                        scale = scale_bytes(m, &buf.name)?;
                        &scale[..]
                    }
                    (None, None) => continue,
                };
                let mut held =
                    host_for_download(uploaded.len(), &buf.name).map_err(BackendError::from)?;
                b.download_bytes(copy, &mut held)?;
                let shape = [uploaded.len() as u64 / dtype.size_bytes() as u64];
                let mut v = rule::compare(dtype, &bitwise, &held, uploaded, None, &shape)
                    .map_err(|e| BackendError::from(format!("buffer {}: {e}", buf.name)))?;
                if !v.passed() {
                    v.rule = format!(
                        "klab's device copy of the {what} {} changed during the launch: the kernel stored outside its declared buffers",
                        buf.name
                    );
                    out.push((
                        format!("memory outside the kernel's buffers ({what} {})", buf.name),
                        v,
                    ));
                }
            }
        }
        if !out.is_empty() {
            *cache = None;
        }
        Ok(out)
    }

    /// The `in` buffers a launch changed, each as a failing verdict (none when every one
    /// holds the bytes klab put there). A kernel may not write what it was declared to only
    /// read: a mark left in an input lets a later launch find its last result, and an input
    /// overwritten to agree with a wrong output would satisfy a checker that reads the
    /// expected values from that input. Judged on the device against a copy made once where
    /// the policy has a device checker, else downloaded and compared on the host.
    fn changed_inputs<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Vec<(String, Verdict)>, BackendError> {
        let unchanged = rule::Comparison {
            rule: rule::Rule::Bitwise,
            nan: rule::NanRule::NanEqual,
        };
        let device = b.verify_policy().checker == crate::verify::Checker::Device;
        let mut out = Vec::new();
        for (i, buf) in self.buffers.iter().enumerate() {
            if buf.role != Role::In {
                continue;
            }
            let mut verdict = None;
            if device {
                verdict = self.device_unchanged(b, bufs, i, unchanged)?;
            }
            let mut v = match verdict {
                Some(v) => v,
                None => {
                    let mut got =
                        host_for_download(buf.bytes(), &buf.name).map_err(BackendError::from)?;
                    b.download_bytes(&bufs[i], &mut got)?;
                    let want = &self.inputs()?[i];
                    rule::compare(buf.dtype, &unchanged, &got, want, None, &buf.shape)
                        .map_err(|e| BackendError::from(format!("buffer {}: {e}", buf.name)))?
                }
            };
            if !v.passed() {
                v.rule = "declared in, so the kernel must leave it as klab wrote it (declare it inout if the kernel writes it)".into();
                out.push((format!("input {}", buf.name), v));
            }
        }
        Ok(out)
    }

    /// A new buffer holding input `i` as the slots get it.
    fn input_copy<B: Backend>(
        &self,
        b: &mut B,
        i: usize,
        on_device: bool,
    ) -> Result<B::Buffer, BackendError> {
        let mut d = b.alloc_bytes(self.buffers[i].bytes())?;
        self.put_input(b, &mut d, i, on_device)?;
        Ok(d)
    }

    /// The case a verified sample on new inputs draws from `seed`: the block's distribution
    /// (normal and large-magnitude keep theirs, every other case is uniform over the range).
    /// `None` for the user's own data.
    fn redrawn(&self, seed: u64) -> Option<InputCase> {
        if self.given_inputs || matches!(self.case, InputCase::Data { .. }) {
            return None;
        }
        Some(match self.case {
            InputCase::Normal { .. } => InputCase::Normal { seed },
            InputCase::Large { .. } => InputCase::Large { seed },
            _ => InputCase::Uniform { seed },
        })
    }

    /// Input `i` against its copy on the device (made on first use); `None` where the
    /// backend has no device checker.
    fn device_unchanged<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        i: usize,
        unchanged: rule::Comparison,
    ) -> Result<Option<Verdict>, BackendError> {
        let on_device = self.inputs_on_device(b);
        let mut cache = self.device_cache.borrow_mut();
        let dev = DeviceExpected::<B::Buffer>::in_cache(&mut cache, self.buffers.len());
        let buf = &self.buffers[i];
        if dev.want[i].is_none() {
            // An input has no expected values of its own: its slot holds the copy.
            dev.want[i] = Some(self.input_copy(b, i, on_device)?);
        }
        let check = crate::verify::DeviceCheck {
            got: &bufs[i],
            want: dev.want[i].as_ref().expect("made above"),
            map: crate::verify::ExpectMap::Direct,
            magnitude: None,
            dtype: buf.dtype,
            comparison: unchanged,
            elements: buf.elements,
        };
        Ok(b.device_check(&check)?
            .map(|s| s.verdict(buf.dtype, &unchanged, &buf.shape, None)))
    }

    /// Judgements the CPU oracle cross-checked so far.
    pub fn cross_checked(&self) -> u64 {
        self.cross_checked.get()
    }

    /// Bytes of the compared outputs.
    pub fn compared_bytes(&self) -> u64 {
        self.buffers
            .iter()
            .filter(|b| b.comparison.is_some())
            .map(|b| b.bytes() as u64)
            .sum()
    }

    /// Whether the inputs are generated on the device: the policy chooses the device
    /// checker, every input has a device generator, and every compared output's expected
    /// values come from an input (so the host needs the inputs only to cross-check).
    pub fn inputs_on_device<B: Backend>(&self, b: &B) -> bool {
        if self.given_inputs
            || self.sample.is_some()
            || b.verify_policy().checker != crate::verify::Checker::Device
        {
            return false;
        }
        let maps = self.reference.device_expectation(&self.shape);
        self.buffers
            .iter()
            .enumerate()
            .all(|(i, buf)| match buf.role {
                Role::In | Role::Inout => self.generator_of(i).is_some(),
                _ if buf.comparison.is_some() => maps.iter().any(|m| m.0 == i),
                _ => true,
            })
    }

    /// The host memory a validation needs, in bytes: none beyond small buffers when the
    /// inputs are made and judged on the device and nothing is cross-checked; else that many
    /// copies of the slot ([`Self::host_copies`]).
    pub fn host_bytes<B: Backend>(&self, b: &B) -> u64 {
        let cross = b.verify_policy().paranoid
            || self.compared_bytes() <= crate::verify::CROSS_CHECK_MAX_BYTES;
        if self.inputs_on_device(b) && !cross {
            return 0;
        }
        self.reference_host_bytes()
    }

    /// The host memory the inputs, the reference's outputs and the rules' scales take, in
    /// bytes: that many copies of the slot ([`Self::host_copies`]); with a sample, the
    /// whole inputs and one downloaded output beside the sample's copies.
    pub fn reference_host_bytes(&self) -> u64 {
        if self.sample.is_some() {
            // The whole inputs, one whole buffer downloaded (an output to gather, an input
            // to see unchanged) and the sample's copies.
            let sampled: u64 = self
                .buffers
                .iter()
                .map(|b| self.reference_elements(b) * b.dtype.size_bytes() as u64)
                .sum();
            let largest = self
                .buffers
                .iter()
                .map(|b| b.bytes() as u64)
                .max()
                .unwrap_or(0);
            return self
                .slot_bytes()
                .saturating_add(largest)
                .saturating_add(sampled.saturating_mul(self.host_copies()));
        }
        self.slot_bytes().saturating_mul(self.host_copies())
    }

    fn host_copies(&self) -> u64 {
        host_copies(&self.op)
    }

    /// Buffer `i`'s device generator, if it is an input the case can make on a device.
    fn generator_of(&self, i: usize) -> Option<crate::inputs::Generator> {
        generator(&self.buffers[i], self.input_number(i), self.case)
    }

    /// Buffer `i`'s number among the inputs (in and in-out buffers), which keys its values.
    fn input_number(&self, i: usize) -> usize {
        self.buffers[..i]
            .iter()
            .filter(|b| matches!(b.role, Role::In | Role::Inout))
            .count()
    }

    /// Set input buffer `i` on the device: generated there when [`Self::inputs_on_device`],
    /// else uploaded from the host's bytes.
    fn put_input<B: Backend>(
        &self,
        b: &mut B,
        d: &mut B::Buffer,
        i: usize,
        on_device: bool,
    ) -> Result<(), BackendError> {
        if on_device {
            if let Some(g) = self.generator_of(i) {
                if b.device_generate(d, &g)? {
                    return self.perturb_on_device(b, d, i);
                }
            }
        }
        let inputs = self.inputs()?;
        b.upload_bytes(d, &inputs[i])
    }

    /// Buffer `buf`'s dimensions in the sample: the first (the slices') shrunk to the
    /// chosen slices.
    fn sampled_dims(&self, buf: &Buffer) -> Vec<u64> {
        let mut dims = buf.shape.clone();
        if let Some(s) = &self.sample {
            if let klab_spec::declared::slices::Part::Sliced { per } = s.part(&buf.name) {
                // The sample's elements over the other dimensions' product (the first
                // dimension may be `B * T` or `B * T / 4`, not always a multiple of B).
                let rest: u64 = dims.iter().skip(1).product();
                if let Some(first) = dims.first_mut() {
                    *first = per * s.chosen.len() as u64 / rest.max(1);
                }
            }
        }
        dims
    }

    /// The device checker's verdicts (None: the backend has no device checker, or the
    /// outputs are compared on a sample of their slices, which the host does).
    fn device_verdicts<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
    ) -> Result<Option<Vec<(String, Verdict)>>, BackendError> {
        if self.sample.is_some() {
            return Ok(None);
        }
        let maps = self.reference.device_expectation(&self.shape);
        let mut cache = self.device_cache.borrow_mut();
        let dev = DeviceExpected::<B::Buffer>::in_cache(&mut cache, self.buffers.len());
        let mut out = Vec::new();
        for (i, buf) in self.buffers.iter().enumerate() {
            let Some(cmp) = &buf.comparison else { continue };
            let mapped = maps.iter().find(|m| m.0 == i).map(|m| (m.1, m.2));
            if mapped.is_none() && dev.want[i].is_none() {
                let expected = self.expected()?;
                let mut d = b.alloc_bytes(buf.bytes())?;
                b.upload_bytes(&mut d, &expected[i])?;
                dev.want[i] = Some(d);
            }
            let scaled = scaled(Some(cmp));
            if scaled && dev.scale[i].is_none() {
                let m = self.scales()?[i].as_deref().ok_or_else(|| {
                    BackendError::from(format!("{} without its per-element scale", cmp.rule.name()))
                })?;
                let bytes = scale_bytes(m, &buf.name)?;
                let mut d = b.alloc_bytes(bytes.len())?;
                b.upload_bytes(&mut d, &bytes)?;
                dev.scale[i] = Some(d);
            }
            let (want, map) = match mapped {
                Some((src, map)) => (&bufs[src], map),
                None => (
                    dev.want[i].as_ref().expect("uploaded above"),
                    crate::verify::ExpectMap::Direct,
                ),
            };
            let check = crate::verify::DeviceCheck {
                got: &bufs[i],
                want,
                map,
                magnitude: dev.scale[i].as_ref().filter(|_| scaled),
                dtype: buf.dtype,
                comparison: *cmp,
                elements: buf.elements,
            };
            let Some(summary) = b.device_check(&check)? else {
                return Ok(None);
            };
            out.push((
                buf.name.clone(),
                summary.verdict(buf.dtype, cmp, &buf.shape, self.scales()?[i].as_deref()),
            ));
        }
        Ok(Some(out))
    }

    /// Buffer `index` of `bufs` against `want` (its bytes) under that buffer's rule (a
    /// property check's expected values, not the reference's).
    pub fn compare_buffer<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        index: usize,
        want: &[u8],
    ) -> Result<Verdict, BackendError> {
        let buf = &self.buffers[index];
        let cmp = buf.comparison.unwrap_or_default();
        let mut got = host_for_download(buf.bytes(), &buf.name).map_err(BackendError::from)?;
        b.download_bytes(&bufs[index], &mut got)?;
        rule::compare(buf.dtype, &cmp, &got, want, None, &buf.shape)
            .map_err(|e| BackendError::from(format!("buffer {}: {e}", buf.name)))
    }

    fn axes(&self, name: &str) -> Vec<&str> {
        self.buffers
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.axes.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// One line per output: `y: PASS 0/4096 failures (allclose ...); ...`.
    pub fn describe_verdicts(&self, verdicts: &[(String, Verdict)]) -> String {
        verdicts
            .iter()
            .map(|(name, v)| format!("{name}: {}", v.describe_with(&self.axes(name))))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A buffer's initial bytes from the user's `.npy` file: its dtype (bf16 as `<u2`) and its
/// element count must be the buffer's at this shape.
fn load(b: &Buffer, path: &str) -> Result<Vec<u8>, String> {
    let npy = klab_core::npy::read_file(std::path::Path::new(path))
        .and_then(|n| n.declared(b.dtype))
        .map_err(|e| format!("buffer {}: {path}: {e}", b.name))?;
    if npy.elements() != b.elements {
        return Err(format!(
            "buffer {}: {path} holds {} elements (shape {}); the buffer has {} at this shape",
            b.name,
            npy.elements(),
            klab_core::npy::shape_repr(&npy.shape),
            b.elements
        ));
    }
    Ok(npy.data)
}

/// Buffer `i`'s domain at this shape (see [`Buffer::domain`]): None for a float buffer or
/// one with neither a range nor `index_into`; an error where the domain is empty while the
/// buffer has elements, or where the dtype cannot hold it.
fn domain_of(
    buffers: &[Buffer],
    spec: &klab_spec::declared::BufferSpec,
    i: usize,
    shape: &Shape,
    at: &str,
) -> Result<Option<[i64; 2]>, BackendError> {
    let b = &buffers[i];
    // An empty buffer holds no index (its domain may be empty too: a table of no rows).
    if !b.dtype.is_integer() || b.elements == 0 {
        return Ok(None);
    }
    let (lo, hi, from) = match (&spec.index_into, b.range) {
        (Some(target), _) => {
            let t = buffers.iter().find(|x| &x.name == target).ok_or_else(|| {
                BackendError::from(format!("buffer {}: no buffer {target}", b.name))
            })?;
            let rows = t.shape.first().copied().unwrap_or(t.elements);
            (0.0, rows as f64 - 1.0, format!("the rows of {target}"))
        }
        (None, Some([lo, hi])) => (lo, hi, "its range".to_string()),
        (None, None) => match &spec.offsets {
            Some(total) => {
                let t = total.eval(shape).map_err(|e| {
                    BackendError::from(format!("buffers.{}.offsets at {at}: {e}", b.name))
                })?;
                (0.0, t as f64, "0 to its offsets' total".to_string())
            }
            None => return Ok(None),
        },
    };
    let name = &b.name;
    if b.elements > 0 && lo > hi {
        return Err(BackendError::from(format!(
            "buffer {name}: its domain ({from}) is [{lo}, {hi}] at {at}: empty, while {name} has {} elements",
            b.elements
        )));
    }
    let holds = |v: f64| {
        b.dtype
            .int_of_bits(b.dtype.bits_of_f64(v))
            .is_some_and(|x| x as f64 == v)
    };
    if b.elements > 0 && !(holds(lo) && holds(hi)) {
        return Err(BackendError::from(format!(
            "buffer {name}: its domain ({from}) is [{lo}, {hi}] at {at}, which {} does not hold",
            b.dtype
        )));
    }
    Ok(Some([lo as i64, hi as i64]))
}

/// The buffer's range: declared, else [-1, 1] for floats, [-100, 100] for signed and
/// [0, 200] for unsigned integers.
fn range_of(b: &Buffer) -> [f64; 2] {
    let dt = b.dtype;
    b.range.unwrap_or(if dt.is_float() {
        [-1.0, 1.0]
    } else if dt.is_signed() {
        [-100.0, 100.0]
    } else {
        [0.0, 200.0]
    })
}

/// The element-wise generator of a case's input (`k`: the input's position among the
/// inputs, which makes two inputs of one shape differ, so a kernel that swaps them is
/// caught). None for the cases made otherwise: the normal case (host only) and user data.
fn generator(b: &Buffer, k: usize, case: InputCase) -> Option<crate::inputs::Generator> {
    use crate::inputs::{distinct_cap, special_bits, stream_key, Generator, Pattern};
    if b.offsets {
        return None;
    }
    let [lo, hi] = range_of(b);
    let dt = b.dtype;
    // A float domain's cases but the random draw are made on the host.
    if b.float_domain.is_some() && !matches!(case, InputCase::Uniform { .. }) {
        return None;
    }
    let pattern = match (b.domain, case) {
        (Some(domain), _) => domain_pattern(dt, domain, k, case)?,
        (None, case) => match case {
            InputCase::Structural => Pattern::Structural,
            InputCase::Uniform { seed } | InputCase::Large { seed } => Pattern::Uniform {
                key: stream_key(seed, k as u64),
                lo,
                hi,
                scale: if matches!(case, InputCase::Large { .. }) {
                    1000.0
                } else {
                    1.0
                },
                // A float domain's draw (its only case made by a generator).
                within: b.float_domain.is_some(),
            },
            InputCase::Constant => Pattern::Constant { lo, hi },
            InputCase::Special => Pattern::Special(special_bits(dt)),
            // The transpose lab's input for f32; the index for the other dtypes.
            InputCase::Distinct if dt == Dtype::F32 => Pattern::DistinctF32 {
                rotate: (k as u64 * 7919) % b.elements.max(1),
            },
            InputCase::Distinct => Pattern::Distinct {
                cap: distinct_cap(dt),
            },
            InputCase::Normal { .. } | InputCase::Data { .. } => return None,
        },
    };
    Some(Generator {
        dtype: dt,
        elements: b.elements,
        k: k as u64,
        pattern,
    })
}

/// The pattern of an integer input with domain `[lo, hi]` under `case`: each case in the
/// domain's own terms. Exact input cycles through its first 17 values; distinct input
/// counts through it (from `lo` = 0; a domain elsewhere is drawn uniformly); random and
/// large-magnitude input are uniform over it; constant input is its middle; special values
/// are its edges (`lo`, `hi`, their neighbours, the middle). The normal case is made on the
/// host and clamped (None here).
fn domain_pattern(
    dt: Dtype,
    [lo, hi]: [i64; 2],
    k: usize,
    case: InputCase,
) -> Option<crate::inputs::Pattern> {
    use crate::inputs::{stream_key, Pattern};
    let (lo_f, hi_f) = (lo as f64, hi as f64);
    let table = |v: &[i64]| {
        let mut bits: Vec<u64> = Vec::new();
        for x in v.iter().map(|x| (*x).clamp(lo, hi)) {
            let b = dt.bits_of_f64(x as f64);
            if !bits.contains(&b) {
                bits.push(b);
            }
        }
        Pattern::Special(bits)
    };
    let uniform = |seed: u64| Pattern::Uniform {
        key: stream_key(seed, k as u64),
        lo: lo_f,
        // Floored, so an end just short of `hi + 1` includes `hi` (short by more than the
        // product's rounding for any domain narrower than 2^32, so `hi + 1` never appears).
        hi: hi_f + 1.0 - 1.0 / 65536.0,
        scale: 1.0,
        within: false,
    };
    Some(match case {
        InputCase::Structural => table(&(0..17).map(|j| lo.saturating_add(j)).collect::<Vec<_>>()),
        InputCase::Distinct if lo == 0 => Pattern::Distinct {
            cap: (hi as u64).saturating_add(1),
        },
        InputCase::Distinct => uniform(0),
        InputCase::Uniform { seed } | InputCase::Large { seed } => uniform(seed),
        // The pattern's value is (lo' + hi') / 2 + 1, floored: the domain's middle.
        InputCase::Constant => Pattern::Constant {
            lo: lo_f - 2.0,
            hi: hi_f,
        },
        InputCase::Special => {
            let mid = lo + (hi - lo) / 2;
            table(&[lo, hi, lo.saturating_add(1), hi.saturating_sub(1), mid, 0])
        }
        InputCase::Normal { .. } | InputCase::Data { .. } => return None,
    })
}

/// `[lo, hi]`, the buffer's domain as it reads in a message.
fn describe_domain(b: &Buffer) -> String {
    match b.domain {
        Some([lo, hi]) => format!("[{lo}, {hi}]"),
        None => "(none)".into(),
    }
}

/// The first element of `bytes` outside buffer `b`'s domain, as (element, value). Row
/// offsets must also start at 0, never decrease, and end at the domain's end.
fn outside_domain(b: &Buffer, bytes: &[u8]) -> Option<(u64, i128)> {
    let [lo, hi] = b.domain?;
    let n = bytes.len() / b.dtype.size_bytes();
    let mut previous = i128::MIN;
    (0..n).find_map(|i| {
        let v = b.dtype.to_i128(bytes, i)?;
        let out = v < i128::from(lo) || v > i128::from(hi);
        let misplaced = b.offsets
            && (v < previous || (i == 0 && v != 0) || (i + 1 == n && n > 1 && v != i128::from(hi)));
        previous = v;
        (out || misplaced).then_some((i as u64, v))
    })
}

/// Row offsets for a case: `elements - 1` rows sharing `total` entries, non-decreasing from
/// 0 to `total`. Exact input spreads them evenly, distinct input in growing rows, random
/// input (also large-magnitude, normal and user cases without a file) at random with about
/// a fifth of the rows empty, constant input puts them all in the last row and special
/// values all in the first.
fn offsets_fill(b: &Buffer, k: usize, case: InputCase, out: &mut [u8]) {
    let n = b.elements as usize;
    let total = b.domain.map_or(0, |d| d[1]).max(0);
    if n == 0 {
        return;
    }
    let rows = (n - 1) as i64;
    let even = |i: i64| (i as i128 * total as i128 / rows.max(1) as i128) as i64;
    let values: Vec<i64> = match case {
        InputCase::Structural => (0..=rows).map(even).collect(),
        InputCase::Distinct => (0..=rows)
            .map(|i| (total as f64 * (i as f64 / rows.max(1) as f64).powi(2)) as i64)
            .collect(),
        InputCase::Constant => (0..=rows)
            .map(|i| if i == rows { total } else { 0 })
            .collect(),
        InputCase::Special => (0..=rows).map(|i| if i == 0 { 0 } else { total }).collect(),
        InputCase::Uniform { seed } | InputCase::Large { seed } | InputCase::Normal { seed } => {
            random_offsets(rows, total, crate::inputs::stream_key(seed, k as u64))
        }
        InputCase::Data { case } => random_offsets(
            rows,
            total,
            crate::inputs::stream_key(case as u64, k as u64),
        ),
    };
    for (i, v) in values.into_iter().enumerate() {
        // rows == 0 holds one offset, 0: no entries can be placed.
        let v = if rows == 0 { 0 } else { v.clamp(0, total) };
        b.dtype.write_f64(out, i, v as f64);
    }
}

/// `rows + 1` offsets from 0 to `total` with random row lengths (about a fifth empty).
fn random_offsets(rows: i64, total: i64, key: u64) -> Vec<i64> {
    let weight = |r: i64| {
        let u = (klab_core::stats::splitmix_at(key, r as u64) >> 11) as f64 / (1u64 << 53) as f64;
        if u < 0.2 {
            0.0
        } else {
            u
        }
    };
    let weights: Vec<f64> = (0..rows).map(weight).collect();
    let sum: f64 = weights.iter().sum();
    let mut out = Vec::with_capacity(rows as usize + 1);
    let mut acc = 0.0;
    out.push(0);
    for w in &weights {
        acc += w;
        let v = if sum > 0.0 {
            (acc / sum * total as f64).floor() as i64
        } else {
            0
        };
        out.push(v.min(total));
    }
    if let Some(last) = out.last_mut() {
        *last = total;
    }
    out
}

/// The buffer's initial bytes for a case (see [`generator`]; user data is loaded by the
/// workload, and a buffer the case names no file for is uniform).
fn fill(b: &Buffer, k: usize, case: InputCase) -> Result<Vec<u8>, String> {
    let mut out = host_zeroed(b.bytes(), &b.name)?;
    if b.offsets {
        offsets_fill(b, k, case, &mut out);
        return Ok(out);
    }
    match case {
        InputCase::Data { case } => return fill(b, k, InputCase::Uniform { seed: case as u64 }),
        InputCase::Normal { seed } => {
            let [lo, hi] = match (b.domain, b.float_domain) {
                (Some([lo, hi]), _) => [lo as f64, hi as f64],
                (None, Some(d)) => d,
                (None, None) => range_of(b),
            };
            let key = crate::inputs::stream_key(seed, k as u64);
            crate::inputs::normal(b.dtype, key, (lo + hi) / 2.0, (hi - lo) / 6.0, &mut out);
            if b.domain.is_some() || b.float_domain.is_some() {
                let size = b.dtype.size_bytes();
                klab_core::par::for_chunks(&mut out, size, |_, chunk| {
                    for j in 0..chunk.len() / size {
                        let v = b.dtype.to_f64(chunk, j);
                        match b.float_domain {
                            Some(_) => {
                                b.dtype
                                    .write_bits(chunk, j, b.dtype.bits_within(v, [lo, hi]))
                            }
                            None => b.dtype.write_f64(chunk, j, v.clamp(lo, hi)),
                        }
                    }
                });
            }
        }
        _ => match (b.float_domain, generator(b, k, case)) {
            (_, Some(g)) => g.fill(&mut out),
            (Some(domain), None) => float_domain_fill(b.dtype, domain, k, case, &mut out),
            (None, None) => unreachable!("every other case has a generator"),
        },
    }
    Ok(out)
}

/// A float input's case inside its domain `[lo, hi]` (`domain = true`): exact input is 17
/// evenly spaced values from lo to hi, distinct input 2^20 of them, constant input the
/// middle, large-magnitude input uniform over the whole domain (it cannot go past it), and
/// the special values are the edges, their inner neighbours, the middle and the signed
/// zeros where the domain holds 0.
fn float_domain_fill(dt: Dtype, [lo, hi]: [f64; 2], k: usize, case: InputCase, out: &mut [u8]) {
    let at = |t: f64| lo + (hi - lo) * t;
    let special: Vec<f64> = {
        let mut v = vec![lo, hi, at(0.5), at(1.0 / 1024.0), at(1.0 - 1.0 / 1024.0)];
        if lo <= 0.0 && 0.0 <= hi {
            v.extend([0.0, -0.0]);
        }
        v
    };
    let k = k as u64;
    let value = |i: u64| -> f64 {
        match case {
            InputCase::Structural => at(((i * 7 + 3 + 5 * k) % 17) as f64 / 16.0),
            InputCase::Distinct => {
                at((i.wrapping_add(k.wrapping_mul(7919)) % (1 << 20)) as f64 / (1u64 << 20) as f64)
            }
            InputCase::Constant => at(0.5),
            InputCase::Special => special[((i + k) % special.len() as u64) as usize],
            InputCase::Large { seed } => at(crate::inputs::unit_at(
                crate::inputs::stream_key(seed ^ 0x4c41_5247, k),
                i,
            )),
            // Made elsewhere (the random draw on the device, normal and data by `fill`).
            InputCase::Uniform { .. } | InputCase::Normal { .. } | InputCase::Data { .. } => {
                at(0.5)
            }
        }
    };
    let size = dt.size_bytes();
    klab_core::par::for_chunks(out, size, |c, chunk| {
        let base = (c * klab_core::par::CHUNK_ELEMENTS) as u64;
        for j in 0..chunk.len() / size {
            dt.write_bits(chunk, j, dt.bits_within(value(base + j as u64), [lo, hi]));
        }
    });
}

/// The seed of the other values a timed launch's inputs are perturbed with
/// ([`crate::workload::Workload::perturbation_sources`]); the positions change every launch.
const OTHER_VALUES_SEED: u64 = 0x4f54_4845_5253;

/// Copy [`crate::workload::PERTURBED_ELEMENTS`] elements of `size` bytes, at positions drawn from `seed`,
/// from `drawn` into `held`.
fn perturb(held: &mut [u8], drawn: &[u8], size: usize, seed: u64) {
    let elements = (held.len() / size.max(1)) as u64;
    if elements == 0 {
        return;
    }
    for i in 0..crate::workload::PERTURBED_ELEMENTS {
        let at = crate::inputs::drawn_position(seed, i, elements) as usize * size;
        held[at..at + size].copy_from_slice(&drawn[at..at + size]);
    }
}

impl Workload for DeclaredWorkload {
    fn decl(&self) -> &KernelDecl {
        &self.decl
    }
    fn operation(&self) -> String {
        let outs: Vec<String> = self
            .buffers
            .iter()
            .filter(|b| b.role.compared())
            .map(|b| format!("{} ({})", b.name, b.dtype))
            .collect();
        format!(
            "{}: {} at {}",
            self.decl.operation.name(),
            outs.join(", "),
            describe_shape(&self.shape)
        )
    }
    fn dtype(&self) -> &'static str {
        self.buffers
            .iter()
            .find(|b| b.role.compared())
            .map(|b| b.dtype.name())
            .unwrap_or("none")
    }
    fn n(&self) -> u64 {
        match self.shape.values().collect::<Vec<_>>()[..] {
            [n] => *n as u64,
            _ => self
                .buffers
                .iter()
                .find(|b| b.role.compared())
                .map(|b| b.elements)
                .unwrap_or(0),
        }
    }
    fn plans(&self) -> Vec<LaunchPlan> {
        self.plans.clone()
    }
    fn slot_bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.bytes() as u64).sum()
    }
    fn useful_bytes(&self) -> u64 {
        self.useful_bytes
    }
    fn flops(&self) -> u64 {
        self.flops
    }
    fn reference(&self) -> String {
        self.reference.describe()
    }
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        self.buffers
            .iter()
            .find_map(|b| match b.comparison.as_ref()?.rule {
                rule::Rule::AllClose { atol, rtol } => Some((Some(atol), Some(rtol))),
                _ => None,
            })
            .unwrap_or((None, None))
    }
    fn rule(&self) -> String {
        self.buffers
            .iter()
            .filter_map(|b| {
                b.comparison
                    .as_ref()
                    .map(|c| format!("{}: {}", b.name, c.describe_for(b.dtype)))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
    fn verification(&self) -> String {
        match self.device_judged.get() {
            0 => "CPU oracle".into(),
            n => format!(
                "device checker ({n} judgement{}, {} cross-checked on the CPU oracle)",
                if n == 1 { "" } else { "s" },
                self.cross_checked.get()
            ),
        }
    }
    fn create_slot<B: Backend>(
        &self,
        b: &mut B,
        _slot: u64,
    ) -> Result<Vec<B::Buffer>, BackendError> {
        let on_device = self.inputs_on_device(b);
        let mut out = Vec::with_capacity(self.buffers.len());
        for (i, buf) in self.buffers.iter().enumerate() {
            let mut d = b.alloc_bytes(buf.bytes())?;
            match buf.role {
                Role::In | Role::Inout => self.put_input(b, &mut d, i, on_device)?,
                Role::Out | Role::Scratch => {
                    b.fill_bytes(&mut d, crate::workload::POISON_BYTES[0])?
                }
            }
            out.push(d);
        }
        Ok(out)
    }
    fn args<'a, B: Backend>(&self, step: usize, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>> {
        let (ints, floats) = self.scalars_at(&self.shape);
        launch_args(
            &self.decl.launches()[step],
            &self.op,
            &self.shape,
            bufs,
            &ints,
            &floats,
        )
    }
    fn poison<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        byte: u8,
    ) -> Result<(), BackendError> {
        let on_device = self.inputs_on_device(b);
        for (i, (buf, d)) in self.buffers.iter().zip(bufs.iter_mut()).enumerate() {
            match buf.role {
                Role::Out | Role::Scratch => b.fill_bytes(d, byte)?,
                // Set again before each launch, so a launch never sees the last one's result.
                Role::Inout => self.put_input(b, d, i, on_device)?,
                Role::In => {}
            }
        }
        Ok(())
    }
    fn invalidate<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        seed: u64,
    ) -> Result<(), BackendError> {
        let on_device = self.inputs_on_device(b);
        for (i, (buf, d)) in self.buffers.iter().zip(bufs.iter_mut()).enumerate() {
            match buf.role {
                Role::Out | Role::Scratch => {
                    let key = crate::inputs::stream_key(seed, i as u64);
                    b.scramble(d, buf.bytes(), key)?
                }
                Role::Inout => self.put_input(b, d, i, on_device)?,
                Role::In => {}
            }
        }
        Ok(())
    }
    fn with_new_inputs(&self, seed: u64, kind: NewInputs) -> Option<DeclaredWorkload> {
        // The user's own data, or inputs given by a property check, are not redrawn: what
        // they may hold is theirs to say.
        let case = self.redrawn(seed)?;
        if self
            .reference_s
            .get()
            .is_some_and(|s| *s > FRESH_REFERENCE_BUDGET_S)
        {
            return None;
        }
        let mut w = match kind {
            NewInputs::Fresh => DeclaredWorkload::new(
                self.decl.clone(),
                self.shape.clone(),
                case,
                self.scalar_index,
                self.reference.clone(),
            )
            .ok()?,
            // Made where the block's inputs are (on the device, where a generator can),
            // not as host bytes of the whole input: a copy of the block's inputs on the
            // host, the other case and the reference there took half a second a block at
            // 8192 x 8192.
            NewInputs::Perturbed => {
                let mut w = self.remade();
                w.perturbation = Some(Perturbation { seed, case });
                w
            }
        };
        w.reference_s = self.reference_s.clone();
        // One block's judgements are counted together; the new inputs' are cross-checked
        // on the CPU only when every judgement is.
        w.first_judgement = self.first_judgement.clone();
        w.cross_checked = self.cross_checked.clone();
        w.device_judged = self.device_judged.clone();
        Some(w)
    }
    fn perturbation_sources<B: Backend>(
        &self,
        b: &mut B,
    ) -> Result<Vec<PerturbSource<B::Buffer>>, BackendError> {
        let Some(other_case) = self.redrawn(OTHER_VALUES_SEED) else {
            return Ok(Vec::new());
        };
        let on_device = self.inputs_on_device(b);
        let mut out = Vec::new();
        let mut k = 0;
        for (i, buf) in self.buffers.iter().enumerate() {
            if !matches!(buf.role, Role::In | Role::Inout) {
                continue;
            }
            let input = k;
            k += 1;
            // Row offsets are a structure, not values: one element moved would send a row
            // past the entries.
            if buf.offsets {
                continue;
            }
            let mut other = b.alloc_bytes(buf.bytes())?;
            // Made on the device wherever a generator can (the host never needs them).
            let made = match generator(buf, input, other_case) {
                Some(g) => b.device_generate(&mut other, &g)?,
                None => false,
            };
            if !made {
                let bytes = fill(buf, input, other_case).map_err(BackendError::from)?;
                b.upload_bytes(&mut other, &bytes)?;
            }
            let block = match buf.role {
                Role::In => Some(self.input_copy(b, i, on_device)?),
                _ => None,
            };
            out.push(PerturbSource {
                index: i,
                elements: buf.elements,
                size: buf.dtype.size_bytes(),
                other,
                block,
            });
        }
        Ok(out)
    }
    fn restore_inouts<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
    ) -> Result<(), BackendError> {
        let on_device = self.inputs_on_device(b);
        for (i, (buf, d)) in self.buffers.iter().zip(bufs.iter_mut()).enumerate() {
            if buf.role == Role::Inout {
                self.put_input(b, d, i, on_device)?;
            }
        }
        Ok(())
    }
    fn put_inputs<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
    ) -> Result<(), BackendError> {
        let on_device = self.inputs_on_device(b);
        for (i, (buf, d)) in self.buffers.iter().zip(bufs.iter_mut()).enumerate() {
            if matches!(buf.role, Role::In | Role::Inout) {
                self.put_input(b, d, i, on_device)?;
            }
        }
        Ok(())
    }
    fn output<B: Backend>(&self, b: &mut B, bufs: &[B::Buffer]) -> Result<Vec<u32>, BackendError> {
        let mut bytes = Vec::new();
        for (buf, d) in self.buffers.iter().zip(bufs) {
            if buf.role.compared() {
                let mut got =
                    host_for_download(buf.bytes(), &buf.name).map_err(BackendError::from)?;
                b.download_bytes(d, &mut got)?;
                bytes.extend(got);
            }
        }
        Ok(bytes
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(w)
            })
            .collect())
    }
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        _slot: u64,
    ) -> Result<CheckOutcome, BackendError> {
        let verdicts = self.judge(b, bufs)?;
        let mut outcome = CheckOutcome {
            failures: 0,
            max_abs: 0.0,
            max_rel: 0.0,
            first_failure: None,
        };
        for (name, v) in &verdicts {
            outcome.failures += v.failures;
            outcome.max_abs = outcome.max_abs.max(v.max_abs);
            outcome.max_rel = outcome.max_rel.max(v.max_rel);
            if outcome.first_failure.is_none() {
                if let Some(f) = &v.first {
                    outcome.first_failure = Some(format!(
                        "{name}{} ({})",
                        f.describe(&self.axes(name)),
                        v.rule
                    ));
                }
            }
        }
        Ok(outcome)
    }
}

/// How far [`chunk`] looks for the grid's growth: a grid that grows only past 2^24
/// elements is not a tile's (the ladder would reach 4c), and the block decides instead.
const CHUNK_SEARCH_LIMIT: i64 = 1 << 24;

/// The chunk of size variable `var`: the last size before the grid grows (the other
/// variables at their smallest, a launch parameter at its ladder's base), else the block's
/// first dimension; at least 2.
/// Only sizes the variable admits are tried: from its smallest, in steps of its `multiple`.
pub fn chunk(op: &DeclaredOp, var: &str) -> u64 {
    let spec = &op.spec.sizes[var];
    // A launch parameter (a block size) at its ladder's base, as the ladder's shapes hold
    // it; a problem size at its smallest, where the grid's growth with `var` is plainest.
    let other = |s: &klab_spec::declared::SizeSpec| match &s.values {
        Some(v) if s.launch && !v.is_empty() => v[v.len() / 2] as i64,
        _ => s.lowest() as i64,
    };
    let at = |n: i64| -> Shape {
        op.spec
            .sizes
            .iter()
            .map(|(k, s)| (k.clone(), if k == var { n } else { other(s) }))
            .collect()
    };
    // A sequence's chunk is the first size at which any of its grids grows.
    let dims = op.launch_dims();
    let grids = |n: i64| -> Vec<Option<u64>> {
        dims.iter()
            .map(|(grid, _)| {
                grid.iter()
                    .map(|e| e.eval_u64(&at(n)).ok())
                    .try_fold(1u64, |a, d| d.and_then(|d| a.checked_mul(d)))
            })
            .collect()
    };
    // The k-th admitted size from the smallest.
    let (lowest, m) = (spec.lowest() as i64, spec.multiple.max(1) as i64);
    let size = |k: i64| lowest.saturating_add(k.saturating_mul(m));
    let first = grids(lowest);
    let grows = |k: i64| grids(size(k)) != first;
    let last_k = ((size_cap(op, var) as i64).min(CHUNK_SEARCH_LIMIT) - lowest) / m;
    (1..=4096i64)
        .find(|&k| grows(k))
        .or_else(|| first_growth_past(4096, last_k, grows))
        .map(|k| spec.at_or_below((size(k) - 1) as u64))
        .or_else(|| {
            dims.first()
                .and_then(|(_, block)| block.first())
                .and_then(|b| b.eval_u64(&at(lowest)).ok())
        })
        .unwrap_or(32)
        .max(2)
}

/// The first step in (`from`, `cap`] at which `grows` holds, for a tile larger than a
/// linear scan reaches (a block of 1024 threads with 16 elements each, say): doubling until
/// the grid has grown, then bisecting, as a grid grows with the size and stays grown.
fn first_growth_past(from: i64, cap: i64, grows: impl Fn(i64) -> bool) -> Option<i64> {
    let mut hi = from;
    loop {
        if hi >= cap {
            return None;
        }
        let (lo, next) = (hi, hi.saturating_mul(2).min(cap));
        if grows(next) {
            let (mut lo, mut hi) = (lo, next);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if grows(mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            return Some(hi);
        }
        hi = next;
    }
}

/// Values of one size variable: its declared `values`, else derived from the launch: the
/// chunk `c` after which the grid grows (else the block's first dimension), and 1, 2, c-1,
/// c, c+1, 2c-1, 2c+1, 3c + c/2 and 4c (every remainder class a chunk boundary makes
/// fire), with 0 first when `min = 0`. A variable whose sizes must be a multiple m takes the
/// nearest multiples instead: m, 2m, the last ones at or below c-1, c and 2c-1 and the first
/// ones past c and 2c. None passes what the kernel's size type holds.
fn values(op: &DeclaredOp, var: &str) -> Result<Vec<u64>, String> {
    let spec = &op.spec.sizes[var];
    if let Some(v) = &spec.values {
        return Ok(v.clone());
    }
    let m = spec.multiple.max(1);
    // A chunk below the multiple (the block's width, say) would leave only m and 2m.
    let c = chunk(op, var).min(1 << 40).max(m);
    let (below, above) = (|x| spec.at_or_below(x), |x| spec.at_or_above(x));
    let mut v = vec![
        m,
        2 * m,
        below(c - 1),
        below(c),
        above(c + 1),
        below(2 * c - 1),
        above(2 * c + 1),
        above(3 * c + c / 2),
        above(4 * c),
    ];
    // A declared tile's boundaries, where the launch gives no sign of them.
    let tile = spec.tile.map(|t| t.min(1 << 40));
    if let Some(t) = tile {
        v.extend([below(t - 1), below(t), above(t + 1)]);
        v.extend([below(2 * t - 1), above(2 * t + 1)]);
    }
    if spec.min == 0 {
        v.push(0);
    }
    // A max inside the derived values keeps its edge: the last two sizes at or below it.
    let reach = (4 * c).max(tile.map_or(0, |t| 2 * t + 1));
    let top = below(spec.upper());
    if top < reach {
        v.extend([top.saturating_sub(m), top]);
    }
    v.push(spec.lowest());
    let cap = size_cap(op, var);
    v.retain(|x| spec.admits(*x) && *x <= cap);
    v.sort_unstable();
    v.dedup();
    if v.is_empty() {
        return Err(format!(
            "sizes.{var}: none of the derived values (up to {}) reaches min = {}; give values",
            reach, spec.min
        ));
    }
    Ok(v)
}

/// How many copies of the slot a validation of `op` holds on the host: the inputs and the
/// reference's buffers (2); scaled-sum adds the absolute inputs, a second run and f64
/// magnitudes (4); reference-error, per sample, perturbed inputs, two runs and the running
/// f64 maximum (6).
pub fn host_copies(op: &DeclaredOp) -> u64 {
    let has = |f: fn(&rule::RuleSpec) -> bool| {
        op.spec
            .buffers
            .values()
            .any(|b| b.compare.as_ref().is_some_and(f))
    };
    if has(|r| matches!(r, rule::RuleSpec::ReferenceError { .. })) {
        6
    } else if has(|r| matches!(r, rule::RuleSpec::ScaledSum(_))) {
        4
    } else {
        2
    }
}

/// Every buffer's bytes at `shape`, summed: a workload's slot there (None when an
/// expression fails or the sum passes u64).
pub fn slot_bytes_at(op: &DeclaredOp, shape: &Shape) -> Option<u64> {
    op.spec.buffers.values().try_fold(0u64, |sum, b| {
        let bytes = b
            .len
            .eval_u64(shape)
            .ok()?
            .checked_mul(b.dtype.size_bytes() as u64)?;
        sum.checked_add(bytes)
    })
}

/// Element offsets at or past this do not fit a 32-bit signed int.
pub const INDEX_OVERFLOW_ELEMENTS: u64 = 1 << 31;

/// The largest value a size variable can reach: its `max`, the range of the type it is
/// passed as, and 2^40, rounded down to its `multiple`.
pub fn size_cap(op: &DeclaredOp, var: &str) -> u64 {
    let by_type = op
        .params
        .iter()
        .find_map(|p| match p {
            OpParam::Size(n, dt) if n == var => Some(match dt {
                Dtype::I32 => i32::MAX as u64,
                Dtype::U32 => u32::MAX as u64,
                _ => i64::MAX as u64,
            }),
            _ => None,
        })
        .unwrap_or(i64::MAX as u64);
    let spec = &op.spec.sizes[var];
    spec.at_or_below(spec.upper().min(by_type).min(1 << 40))
}

/// The largest buffer's element count at `shape` (None when an expression fails there).
pub fn largest_buffer(op: &DeclaredOp, shape: &Shape) -> Option<u64> {
    op.spec
        .buffers
        .values()
        .map(|b| b.len.eval_u64(shape).ok())
        .try_fold(0u64, |a, n| n.map(|n| a.max(n)))
}

/// The index-overflow shape: every size variable but the launch parameters grown by one
/// common factor from `base` (the ladder's middle shape; each stays within its cap), the smallest factor at which
/// some buffer holds more than `limit` elements even with any one variable one smaller,
/// so that an offset computed in 32-bit arithmetic wraps, the start of the last row
/// included. An error says why no shape reaches it.
pub fn overflow_shape(op: &DeclaredOp, base: &Shape, limit: u64) -> Result<Shape, String> {
    let launch = |k: &str| op.spec.sizes.get(k).is_some_and(|s| s.launch);
    let at = |f: f64| -> Shape {
        base.iter()
            .map(|(k, v)| {
                if launch(k) {
                    return (k.clone(), *v);
                }
                let grown = ((*v).max(1) as f64 * f).ceil();
                let grown = op.spec.sizes[k].at_or_above(grown as u64);
                let v = (grown.min(size_cap(op, k)) as i64).max(*v);
                (k.clone(), v)
            })
            .collect()
    };
    // Past the limit even with any one variable one smaller: then the last row (or
    // column, or plane) itself starts past it, so an offset like `row * cols` computed in
    // 32 bits wraps, not only the elements inside that row.
    // A length too large to evaluate in 64 bits is past any limit (three sizes at their
    // caps multiply past i64); the search then settles far below that.
    let beyond = |s: &Shape| largest_buffer(op, s).is_none_or(|n| n > limit);
    let past = |f: f64| {
        let s = at(f);
        beyond(&s)
            && s.iter().filter(|(k, _)| !launch(k)).all(|(k, v)| {
                // One step smaller: by one, or by the multiple the sizes must be.
                let step = op.spec.sizes[k].multiple.max(1) as i64;
                let mut less = s.clone();
                less.insert(k.clone(), (*v - step).max(0));
                *v <= step || beyond(&less)
            })
    };
    let (mut lo, mut hi) = (1.0f64, 2f64.powi(41));
    if !past(hi) {
        return Err(format!(
            "no shape within the size variables' limits (max, and the range of their types) has a buffer of more than {limit} elements"
        ));
    }
    if past(lo) {
        return Ok(at(lo));
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if past(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo < 1e-9 * hi {
            break;
        }
    }
    Ok(at(hi))
}

/// The shapes `klab check` runs: each variable over its values with the others at a
/// ragged base value (the middle of their values), then pairs of different values for
/// two variables (non-square combinations), without repeats.
pub fn ladder(op: &DeclaredOp) -> Result<Vec<Shape>, String> {
    let vars: Vec<String> = op.spec.sizes.keys().cloned().collect();
    let mut all: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for v in &vars {
        all.insert(v.clone(), values(op, v)?);
    }
    let base: Shape = all
        .iter()
        .map(|(k, v)| (k.clone(), v[v.len() / 2] as i64))
        .collect();
    let mut shapes: Vec<Shape> = Vec::new();
    let add = |s: Shape, shapes: &mut Vec<Shape>| {
        if !shapes.contains(&s) {
            shapes.push(s);
        }
    };
    for v in &vars {
        for &x in &all[v] {
            let mut s = base.clone();
            s.insert(v.clone(), x as i64);
            add(s, &mut shapes);
        }
    }
    // The user's own shapes.
    for c in &op.spec.cases {
        add(
            c.shape
                .iter()
                .map(|(k, v)| (k.clone(), *v as i64))
                .collect(),
            &mut shapes,
        );
    }
    if vars.len() >= 2 {
        let (a, b) = (&vars[0], &vars[1]);
        let (va, vb) = (&all[a], &all[b]);
        for (i, &x) in va.iter().enumerate() {
            let y = vb[(vb.len() - 1).saturating_sub(i % vb.len())];
            let mut s = base.clone();
            s.insert(a.clone(), x as i64);
            s.insert(b.clone(), y as i64);
            add(s, &mut shapes);
        }
    }
    Ok(shapes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verified launch on perturbed inputs: the block's inputs with a few elements
    /// drawn again, made on the device where the block's are (no host copy of the whole
    /// input), and the same bytes as the host makes for the reference.
    #[test]
    fn perturbed_inputs_are_the_blocks_with_a_few_elements_drawn_again_on_either_side() {
        use crate::backend::host::{Call, HostBackend};
        let (_, decl) =
            klab_spec::registry::resolve("transpose_naive", klab_spec::registry::Scope::Audit)
                .unwrap();
        let w = DeclaredWorkload::builtin(decl, 257, InputCase::Uniform { seed: 7 }, 0).unwrap();
        let p = w.with_new_inputs(99, NewInputs::Perturbed).unwrap();
        let i = w.buffers.iter().position(|b| b.role == Role::In).unwrap();
        let (block, host) = (
            &w.initial_bytes().unwrap()[i],
            &p.initial_bytes().unwrap()[i],
        );
        let differ = block
            .chunks(4)
            .zip(host.chunks(4))
            .filter(|(a, b)| a != b)
            .count() as u64;
        assert!(
            (1..=crate::workload::PERTURBED_ELEMENTS).contains(&differ),
            "{differ}"
        );

        let mut b = HostBackend::new().with_device_checker(None);
        assert!(p.inputs_on_device(&b));
        let mut d = b.alloc_bytes(w.buffers[i].bytes()).unwrap();
        p.put_input(&mut b, &mut d, i, true).unwrap();
        assert!(b.calls.iter().any(|c| matches!(c, Call::CopyElements(_))));
        let mut got = vec![0u8; host.len()];
        b.download_bytes(&d, &mut got).unwrap();
        assert_eq!(&got, host);
        // The block's own inputs are not perturbed.
        let mut d = b.alloc_bytes(w.buffers[i].bytes()).unwrap();
        w.put_input(&mut b, &mut d, i, true).unwrap();
        b.download_bytes(&d, &mut got).unwrap();
        assert_eq!(&got, block);
    }

    #[test]
    fn shapes_parse_and_print_back() {
        let s: ShapeArg = "m=64, n=128,k=32".parse().unwrap();
        assert_eq!(s.to_string(), "k=32,m=64,n=128");
        assert_eq!(s.to_string().parse::<ShapeArg>().unwrap(), s);
        for (bad, says) in [
            ("m", "expected VAR=VALUE"),
            ("m=1,m=2", "given twice"),
            ("m=-1", "not a whole number"),
            ("9x=3", "not a size variable's name"),
            ("=3", "not a size variable's name"),
        ] {
            let e = bad.parse::<ShapeArg>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_large_random_input_is_the_same_on_any_number_of_cores_and_keeps_small_streams() {
        let buffer = |elements: u64| Buffer {
            name: "x".into(),
            dtype: Dtype::F32,
            role: Role::In,
            elements,
            shape: vec![elements],
            axes: vec!["i".into()],
            comparison: None,
            range: None,
            domain: None,
            float_domain: None,
            offsets: false,
        };
        let big = 2 * klab_core::par::CHUNK_ELEMENTS as u64 + 3;
        let case = InputCase::Uniform { seed: 42 };
        let a = fill(&buffer(big), 0, case).unwrap();
        assert_eq!(a, fill(&buffer(big), 0, case).unwrap());
        // A buffer of one chunk or less is the seed's own stream, as before chunks existed.
        let small = fill(&buffer(1000), 0, case).unwrap();
        assert_eq!(&a[..4000], &small[..]);
        // Chunks draw different streams.
        let c = klab_core::par::CHUNK_ELEMENTS * 4;
        assert_ne!(&a[..4000], &a[c..c + 4000]);
    }
    use crate::backend::host::{HostArg, HostBackend};
    use crate::check::{run, CheckOptions};

    /// y[r] = sum of row r of x (rows x cols), f32.
    const MANIFEST: &str = r#"
source = "k.cu"
[[kernel]]
name = "rowsum"
entry = "rowsum"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32"]
[kernel.op]
grid = ["ceil_div(rows, 32)"]
block = ["32"]
useful_bytes = "4 * rows * cols + 4 * rows"
reference = { c = "ref.c:rowsum_ref" }
sizes.rows = {}
sizes.cols = { values = [1, 5, 33] }
buffers.x = { dtype = "f32", len = "rows * cols", role = "in", shape = ["rows", "cols"] }
buffers.y = { dtype = "f32", len = "rows", role = "out", axes = ["row"], shape = ["rows"], compare = { allclose = { atol = 1e-5, rtol = 1e-5 } } }
"#;

    fn decl() -> KernelDecl {
        with(MANIFEST)
    }

    struct RowSum;
    impl Reference for RowSum {
        fn run(
            &self,
            _: &Shape,
            b: &mut [&mut [u8]],
            ints: &[i64],
            _: &[f64],
        ) -> Result<(), String> {
            let (rows, cols) = (ints[0] as usize, ints[1] as usize);
            let x: Vec<f32> = b[0]
                .chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            for r in 0..rows {
                let s: f32 = x[r * cols..(r + 1) * cols].iter().sum();
                b[1][4 * r..4 * r + 4].copy_from_slice(&s.to_le_bytes());
            }
            Ok(())
        }
        fn describe(&self) -> String {
            "a Rust row sum".into()
        }
    }

    fn args(a: &[HostArg]) -> (usize, usize, usize, usize) {
        match a {
            [HostArg::Buffer(x), HostArg::Buffer(y), HostArg::I32(r), HostArg::I32(c)] => {
                (*x, *y, *r as usize, *c as usize)
            }
            _ => panic!("{a:?}"),
        }
    }
    fn good(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let (x, y, rows, cols) = args(a);
        for r in 0..rows {
            let s: f32 = (0..cols)
                .map(|c| f32::from_bits(mem[x][r * cols + c]))
                .sum();
            mem[y][r] = s.to_bits();
        }
    }
    /// Drops the last row when rows is not a multiple of 32 (a ragged tail never written).
    fn drops_tail(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let (x, y, rows, cols) = args(a);
        for r in 0..rows / 32 * 32 {
            let s: f32 = (0..cols)
                .map(|c| f32::from_bits(mem[x][r * cols + c]))
                .sum();
            mem[y][r] = s.to_bits();
        }
    }

    fn check(f: crate::backend::host::GeneralKernelFn) -> crate::check::CheckReport {
        check_decl(&decl(), f)
    }

    /// `klab check` of `d` on the host backend, its kernel `f` standing in for the entry
    /// (every test manifest's entry is "rowsum"), seed 1, every case.
    fn check_on_host(
        d: &KernelDecl,
        f: crate::backend::host::GeneralKernelFn,
        reference: impl Reference + 'static,
    ) -> Result<crate::check::CheckReport, BackendError> {
        check_on(HostBackend::new(), d, f, reference)
    }

    /// [`check_on_host`] on the backend `b` (a device checker's, say).
    fn check_on(
        b: HostBackend,
        d: &KernelDecl,
        f: crate::backend::host::GeneralKernelFn,
        reference: impl Reference + 'static,
    ) -> Result<crate::check::CheckReport, BackendError> {
        let mut b = b.with_general_kernel("rowsum", f);
        let k = [b.kernel("rowsum").unwrap()];
        let opts = CheckOptions {
            seed: 1,
            sizes: None,
            shapes: None,
            quick: false,
            resume_after: 0,
        };
        run(
            &mut b,
            d,
            &k,
            std::rc::Rc::new(reference),
            &opts,
            &mut |_| {},
        )
    }

    fn check_decl(
        d: &KernelDecl,
        f: crate::backend::host::GeneralKernelFn,
    ) -> crate::check::CheckReport {
        check_on_host(d, f, RowSum).unwrap()
    }

    /// [`good`], then a store into the buffer allocated last of the output's length that is
    /// not its own: an out-of-bounds store that lands in klab's copy of the expected output
    /// once the device checker has made one.
    fn stores_into_the_checkers_copy(mem: &mut [Vec<u32>], a: &[HostArg], n: u64) {
        good(mem, a, n);
        let (x, y, _, _) = args(a);
        let len = mem[y].len();
        if let Some(i) = (0..mem.len())
            .rev()
            .find(|&i| i != x && i != y && mem[i].len() == len)
        {
            mem[i][0] = 12345.0f32.to_bits();
        }
    }

    /// A kernel storing into the device checker's own memory fails the block as the
    /// kernel's fault, with the cross-check and without it; it was once a klab error (the
    /// two checkers disagreed) or an output mismatch at an index the kernel got right.
    #[test]
    fn a_store_into_the_checkers_memory_is_the_kernels_failure() {
        use crate::timing::{measure, Outcome, TimingConfig, WarmupPolicy};
        use klab_core::samples::{Invalidation, Regime, Timer};
        let shape: Shape = [("rows".to_string(), 40), ("cols".to_string(), 33)].into();
        let cfg = TimingConfig {
            timer: Timer::PerLaunch,
            regime: Regime::SameBuffer,
            samples: 4,
            warmup: WarmupPolicy::Count { launches: 3 },
            invalidation: Invalidation::EveryLaunch,
        };
        for (f, paranoid, honest) in [
            (
                stores_into_the_checkers_copy as crate::backend::host::GeneralKernelFn,
                false,
                false,
            ),
            (stores_into_the_checkers_copy, true, false),
            (good, true, true),
        ] {
            // A workload per backend: its device cache holds that backend's buffers.
            let w = DeclaredWorkload::new(
                decl(),
                shape.clone(),
                InputCase::Uniform { seed: 3 },
                0,
                std::rc::Rc::new(RowSum),
            )
            .unwrap();
            let mut b = HostBackend::new()
                .with_general_kernel("rowsum", f)
                .with_device_checker(None);
            if paranoid {
                b = b.with_paranoid();
            }
            let k = [b.kernel("rowsum").unwrap()];
            let o = measure(&mut b, &w, &k, &cfg, "b", &mut Default::default)
                .unwrap_or_else(|e| panic!("paranoid {paranoid}: {e}"));
            let Outcome::Measured(m) = o else {
                panic!("{o:?}")
            };
            // What the outcomes of the verified launches say.
            let said = format!("{:?} {:?}", m.after_timing, m.verified);
            if honest {
                assert_eq!(m.gate_failure(), None);
                continue;
            }
            assert!(m.gate_failure().is_some(), "paranoid {paranoid}");
            assert!(
                said.contains("the kernel stored outside its declared buffers"),
                "paranoid {paranoid}: {said}"
            );
        }
    }

    /// [`good`], with the last row wrong.
    fn wrong_last_row(mem: &mut [Vec<u32>], a: &[HostArg], n: u64) {
        good(mem, a, n);
        let (_, y, rows, _) = args(a);
        mem[y][rows - 1] = 12345.0f32.to_bits();
    }

    #[test]
    fn a_sampled_workload_runs_the_reference_on_its_slices_and_names_failures_in_the_whole_buffer()
    {
        struct Seen(std::cell::RefCell<Vec<i64>>);
        impl Reference for Seen {
            fn run(
                &self,
                s: &Shape,
                b: &mut [&mut [u8]],
                i: &[i64],
                f: &[f64],
            ) -> Result<(), String> {
                self.0.borrow_mut().push(s["rows"]);
                assert_eq!(b[0].len(), 4 * 5 * s["rows"] as usize, "the gathered rows");
                RowSum.run(s, b, i, f)
            }
            fn describe(&self) -> String {
                "a row sum that notes its shapes".into()
            }
        }
        let d = with(&MANIFEST.replace("sizes.rows = {}", "slices = \"rows\"\nsizes.rows = {}"));
        let seen = std::rc::Rc::new(Seen(Default::default()));
        // A million rows: the sample's runs (13,108 rows each, 65,536 elements of x) cover
        // part of them.
        let rows = 1_000_000;
        let shape = Shape::from([("rows".into(), rows), ("cols".into(), 5)]);
        let w = DeclaredWorkload::new(d, shape, InputCase::Uniform { seed: 1 }, 0, seen.clone())
            .unwrap()
            .sampled(3)
            .unwrap();
        let chosen = w.sample.as_ref().unwrap().chosen.clone();
        let last = rows as u64 - 1;
        assert!(chosen.len() < rows as usize / 2 && chosen.contains(&0) && chosen.contains(&last));
        let note = w.sample_note().unwrap();
        assert!(
            note.contains(&format!("{} of {rows} slices of rows", chosen.len())),
            "{note}"
        );
        for (kernel, fails) in [
            (good as crate::backend::host::GeneralKernelFn, false),
            (wrong_last_row, true),
        ] {
            let mut b = HostBackend::new().with_general_kernel("rowsum", kernel);
            let k = [b.kernel("rowsum").unwrap()];
            let mut bufs = w.create_slot(&mut b, 0).unwrap();
            w.poison(&mut b, &mut bufs, 0xff).unwrap();
            b.launch_all(&w.launches::<HostBackend>(&k, &bufs)).unwrap();
            b.synchronize().unwrap();
            let v = &w.judge(&mut b, &bufs).unwrap()[0].1;
            assert_eq!(
                v.elements,
                chosen.len() as u64,
                "only the sample is compared"
            );
            assert_eq!(v.passed(), !fails, "{v:?}");
            if fails {
                let f = v.first.as_ref().unwrap();
                assert_eq!(
                    (f.index, f.coords.clone()),
                    (last, vec![last]),
                    "the whole buffer's place"
                );
                assert_eq!(v.failing, vec![last]);
            }
        }
        // The reference ran once, on the chosen rows alone.
        assert_eq!(*seen.0.borrow(), vec![chosen.len() as i64]);
    }

    /// y[r] = the sum of rows 0 to r of x: rows that are not independent.
    struct Prefix;
    impl Reference for Prefix {
        fn run(
            &self,
            _: &Shape,
            b: &mut [&mut [u8]],
            ints: &[i64],
            _: &[f64],
        ) -> Result<(), String> {
            let (rows, cols) = (ints[0] as usize, ints[1] as usize);
            let x = |i: usize| f32::from_le_bytes(b[0][4 * i..4 * i + 4].try_into().unwrap());
            let mut acc = 0f32;
            let mut y = vec![0f32; rows];
            for (r, out) in y.iter_mut().enumerate() {
                acc += (0..cols).map(|c| x(r * cols + c)).sum::<f32>();
                *out = acc;
            }
            for (r, v) in y.iter().enumerate() {
                b[1][4 * r..4 * r + 4].copy_from_slice(&v.to_le_bytes());
            }
            Ok(())
        }
        fn describe(&self) -> String {
            "a prefix sum over the rows".into()
        }
    }
    fn prefix(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let (x, y, rows, cols) = args(a);
        let mut acc = 0f32;
        for r in 0..rows {
            acc += (0..cols)
                .map(|c| f32::from_bits(mem[x][r * cols + c]))
                .sum::<f32>();
            mem[y][r] = acc.to_bits();
        }
    }

    #[test]
    fn a_slices_declaration_the_reference_does_not_honour_is_caught_before_any_sample_is_trusted() {
        let d = with(&MANIFEST.replace("sizes.rows = {}", "slices = \"rows\"\nsizes.rows = {}"));
        let shape = Shape::from([("rows".into(), 10), ("cols".into(), 5)]);
        let at = |r: std::rc::Rc<dyn Reference>| {
            DeclaredWorkload::new(d.clone(), shape.clone(), InputCase::Structural, 0, r).unwrap()
        };
        let why = at(std::rc::Rc::new(Prefix)).slices_disagree().unwrap();
        assert!(
            why.starts_with("slices = \"rows\" does not hold for the reference at cols=5 rows=10: computed on rows slices [5, 9] alone it gives y[5] = "),
            "{why}"
        );
        assert_eq!(at(std::rc::Rc::new(RowSum)).slices_disagree(), None);
        // Three slices cannot be tested by a strict subset of two: nothing is claimed.
        let three = Shape::from([("rows".into(), 3), ("cols".into(), 5)]);
        let w = DeclaredWorkload::new(
            d.clone(),
            three,
            InputCase::Structural,
            0,
            std::rc::Rc::new(Prefix),
        );
        assert_eq!(w.unwrap().slices_disagree(), None);
        // In a check the kernel (a right prefix sum) passes every case, and the index-overflow
        // case is not applicable: a sample of rows would have judged it against wrong values.
        let r = check_on_host(&d, prefix, Prefix).unwrap();
        let c = r.cases.iter().find(|c| c.case == "index overflow").unwrap();
        assert!(
            c.skipped
                && c.detail
                    .starts_with("not applicable: slices = \"rows\" does not hold"),
            "{c:?}"
        );
        assert!(r.passed(), "{}", r.render());
    }

    /// `d` checked on the host with the good row sum from after case `resume_after`: the
    /// cases started, the report, and the backend's calls.
    fn resumed(
        d: &KernelDecl,
        resume_after: usize,
    ) -> (
        Vec<String>,
        crate::check::CheckReport,
        Vec<crate::backend::host::Call>,
    ) {
        let mut b = HostBackend::new().with_general_kernel("rowsum", good);
        let k = [b.kernel("rowsum").unwrap()];
        let opts = CheckOptions {
            seed: 1,
            sizes: None,
            shapes: None,
            quick: false,
            resume_after,
        };
        let mut started = Vec::new();
        b.calls.clear();
        let r = run(&mut b, d, &k, std::rc::Rc::new(RowSum), &opts, &mut |p| {
            if let crate::check::Progress::Starting(l) = p {
                started.push(l.to_string());
            }
        })
        .unwrap();
        (started, r, b.calls)
    }

    #[test]
    fn a_check_resumed_after_a_case_runs_exactly_the_cases_after_it() {
        let run_from = |resume_after: usize| {
            let (started, r, _) = resumed(&decl(), resume_after);
            (started, r.cases)
        };
        let (all, every) = run_from(0);
        assert!(all.iter().any(|l| l.ends_with("determinism")), "{all:?}");
        for skip in [1, 5, all.len() - 1] {
            let (rest, cases) = run_from(skip);
            assert_eq!(rest, all[skip..], "resumed after {skip}");
            let after: Vec<_> = every
                .iter()
                .filter(|c| !all[..skip].contains(&c.case))
                .cloned()
                .collect();
            assert_eq!(cases, after, "resumed after {skip}");
        }
    }

    /// A check resumed at its determinism case opts the kernel in before that case's first
    /// launch: the cases that did so before ran in another process.
    #[test]
    fn a_check_resumed_at_determinism_opts_in_before_its_first_launch() {
        use crate::backend::host::Call;
        let d = with(&MANIFEST.replace(
            "block = [\"32\"]",
            "block = [\"32\"]\ndynamic_shared_bytes = \"65536\"",
        ));
        let run_from = |resume_after: usize| {
            let (started, _, calls) = resumed(&d, resume_after);
            (started, calls)
        };
        let (all, _) = run_from(0);
        let at = all.iter().position(|l| l.ends_with("determinism")).unwrap();
        let (_, calls) = run_from(at);
        let first = |f: fn(&Call) -> bool| calls.iter().position(f);
        let opt_in = first(|c| matches!(c, Call::AllowDynamicShared { .. })).unwrap();
        let launch = first(|c| matches!(c, Call::Launch(_))).unwrap();
        assert!(opt_in < launch, "{calls:?}");
    }

    #[test]
    fn given_shapes_replace_the_ladder() {
        let run_at = |f: crate::backend::host::GeneralKernelFn, shapes: Vec<Shape>| {
            let mut b = HostBackend::new().with_general_kernel("rowsum", f);
            let k = [b.kernel("rowsum").unwrap()];
            let opts = CheckOptions {
                seed: 1,
                sizes: None,
                shapes: Some(shapes),
                quick: false,
                resume_after: 0,
            };
            run(
                &mut b,
                &decl(),
                &k,
                std::rc::Rc::new(RowSum),
                &opts,
                &mut |_| {},
            )
            .unwrap()
        };
        let at = |rows: i64, cols: i64| Shape::from([("rows".into(), rows), ("cols".into(), cols)]);
        let ragged = run_at(drops_tail, vec![at(33, 5)]);
        assert!(!ragged.passed(), "{}", ragged.render());
        let exact = run_at(drops_tail, vec![at(64, 3)]);
        assert!(exact.passed(), "{}", exact.render());
        let text = exact.render();
        assert!(text.contains("rows=64"), "{text}");
        assert!(
            !text.contains("rows=128") && !text.contains("rows=1 "),
            "only the given shape: {text}"
        );
    }

    #[test]
    fn the_ladder_covers_every_chunk_remainder_and_non_square_shapes() {
        let op = decl().op;
        let shapes = ladder(&op).unwrap();
        let rows: Vec<i64> = shapes.iter().map(|s| s["rows"]).collect();
        // The grid grows after 32 rows: 1, 2, 31, 32, 33, 63, 65, 112, 128.
        for r in [1, 2, 31, 32, 33, 63, 65, 112, 128] {
            assert!(rows.contains(&r), "{r} in {rows:?}");
        }
        assert!(shapes.iter().any(|s| s["cols"] == 1) && shapes.iter().any(|s| s["cols"] == 33));
        let distinct: std::collections::BTreeSet<_> = shapes.iter().collect();
        assert_eq!(distinct.len(), shapes.len());
    }

    /// Sizes declared a multiple: the ladder steps by it across each chunk boundary, and the
    /// index-overflow shape is made of multiples and still passes 2^31 elements.
    #[test]
    fn sizes_declared_a_multiple_are_the_only_sizes_klab_makes() {
        let d = with(&MANIFEST.replace(
            "sizes.rows = {}\nsizes.cols = { values = [1, 5, 33] }",
            "sizes.rows = { multiple = 8 }\nsizes.cols = { multiple = 4 }",
        ));
        let op = &d.op;
        let shapes = ladder(op).unwrap();
        let rows: std::collections::BTreeSet<i64> = shapes.iter().map(|s| s["rows"]).collect();
        let cols: std::collections::BTreeSet<i64> = shapes.iter().map(|s| s["cols"]).collect();
        // rows: the grid grows after 32; cols is not in the grid (the block's 32).
        for r in [8, 16, 24, 32, 40, 56, 72, 112, 128] {
            assert!(rows.contains(&r), "{r} in {rows:?}");
        }
        for c in [4, 8, 28, 32, 36, 60, 68] {
            assert!(cols.contains(&c), "{c} in {cols:?}");
        }
        assert!(rows.iter().all(|r| r % 8 == 0), "{rows:?}");
        assert!(cols.iter().all(|c| c % 4 == 0), "{cols:?}");
        let base = &shapes[shapes.len() / 2];
        let big = overflow_shape(op, base, INDEX_OVERFLOW_ELEMENTS).unwrap();
        assert!(big["rows"] % 8 == 0 && big["cols"] % 4 == 0, "{big:?}");
        assert!(
            largest_buffer(op, &big).unwrap() > INDEX_OVERFLOW_ELEMENTS,
            "{big:?}"
        );
        // A step smaller in either size is still past the limit: the last row starts past it.
        for (k, step) in [("rows", 8), ("cols", 4)] {
            let mut less = big.clone();
            *less.get_mut(k).unwrap() -= step;
            assert!(largest_buffer(op, &less).unwrap() > INDEX_OVERFLOW_ELEMENTS);
        }
    }

    /// The chunk is looked for among the sizes a variable admits: a float4 kernel's grid
    /// over n / 4 is empty below 4, and its chunk is 1024 (not 3). A multiple that does
    /// not divide the chunk still gets the first size past each boundary.
    #[test]
    fn the_chunk_of_a_multiple_is_found_among_multiples() {
        let op = |grid: &str, multiple: u64| {
            copy_op(grid, "256", &format!("{{ multiple = {multiple} }}")).op
        };
        let v4 = op("ceil_div(n / 4, 256)", 4);
        assert_eq!(chunk(&v4, "n"), 1024);
        let n: Vec<i64> = ladder(&v4).unwrap().iter().map(|s| s["n"]).collect();
        assert_eq!(n, [4, 8, 1020, 1024, 1028, 2044, 2052, 3584, 4096]);
        let three = op("ceil_div(n, 1024)", 3);
        let n: Vec<i64> = ladder(&three).unwrap().iter().map(|s| s["n"]).collect();
        // A size on either side of each boundary (1024, 2048), the nearest past each.
        for v in [1023, 1026, 2049] {
            assert!(n.contains(&v), "{v} in {n:?}");
        }
        assert!(n.iter().any(|v| (2043..=2046).contains(v)), "{n:?}");
        assert!(n.iter().all(|v| v % 3 == 0), "{n:?}");
    }

    /// A block-size launch parameter is held at its ladder's base (256 of 32, 256, 1024)
    /// while another variable's chunk is looked for: at its smallest (1) the chunk was 2
    /// and a strided loop over the columns never ran twice. A multiple above the chunk
    /// still gets four sizes.
    #[test]
    fn a_launch_parameter_is_held_at_its_base_while_a_chunk_is_found() {
        let op = |sizes: &str, block: &str| {
            with(&format!(
                r#"
source = "k.cu"
[[kernel]]
name = "rows"
entry = "rowsum"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32", "bs:i32"]
[kernel.op]
grid = ["rows"]
block = ["{block}"]
useful_bytes = "8 * rows * cols"
reference = {{ c = "ref.c:rows" }}
{sizes}
buffers.x = {{ dtype = "f32", len = "rows * cols", role = "in" }}
buffers.y = {{ dtype = "f32", len = "rows * cols", role = "out", compare = "bitwise" }}
"#
            ))
            .op
        };
        let launch = "sizes.bs = { values = [32, 256, 1024], launch = true }";
        let strided = op(
            &format!("sizes.rows = {{}}\nsizes.cols = {{}}\n{launch}"),
            "bs",
        );
        assert_eq!(chunk(&strided, "cols"), 256);
        let cols: std::collections::BTreeSet<i64> = ladder(&strided)
            .unwrap()
            .iter()
            .map(|s| s["cols"])
            .collect();
        for c in [255, 256, 257, 511, 513] {
            assert!(cols.contains(&c), "{c} in {cols:?}");
        }
        let wide = op(
            &format!("sizes.rows = {{}}\nsizes.cols = {{ multiple = 32 }}\n{launch}"),
            "16",
        );
        let cols: std::collections::BTreeSet<i64> =
            ladder(&wide).unwrap().iter().map(|s| s["cols"]).collect();
        assert_eq!(cols, [32, 64, 96, 128].into());
    }

    /// No derived size passes the kernel's size type (an i32 here), however late the grid
    /// grows: the search stops at 2^24 and the block decides.
    #[test]
    fn derived_sizes_stay_within_the_size_type() {
        let d = with(&MANIFEST.replace(
            "grid = [\"ceil_div(rows, 32)\"]",
            "grid = [\"ceil_div(rows, 1073741824)\"]",
        ));
        assert_eq!(chunk(&d.op, "rows"), 32);
        let shapes = ladder(&d.op).unwrap();
        assert!(
            shapes.iter().all(|s| s["rows"] <= i32::MAX as i64),
            "{shapes:?}"
        );
    }

    /// A block past the default 48 KiB of shared memory is launched opted in (as a program
    /// must); past the opted-in limit it is refused naming that limit. It was refused at
    /// the default limit, so a kernel staging 64 KiB in shared memory could not be checked.
    #[test]
    fn a_block_past_the_default_shared_memory_is_opted_in_and_past_the_opt_in_refused() {
        use crate::backend::host::Call;
        let prepared = |bytes: u32| {
            let d = with(&MANIFEST.replace(
                "block = [\"32\"]",
                &format!("block = [\"32\"]\ndynamic_shared_bytes = \"{bytes}\""),
            ));
            let shape = Shape::from([("rows".into(), 64), ("cols".into(), 5)]);
            let w = DeclaredWorkload::new(
                d,
                shape,
                InputCase::Uniform { seed: 1 },
                0,
                std::rc::Rc::new(RowSum),
            )
            .unwrap();
            let mut b = HostBackend::new().with_general_kernel("rowsum", drops_tail);
            let k = [b.kernel("rowsum").unwrap()];
            b.calls.clear();
            let r = crate::workload::prepare_launches(&mut b, &w, &k);
            (r, b.calls)
        };
        let (r, calls) = prepared(48 * 1024);
        r.unwrap();
        assert!(calls.is_empty(), "within the default limit: {calls:?}");
        let (r, calls) = prepared(100 * 1024);
        r.unwrap();
        assert_eq!(
            calls,
            [Call::AllowDynamicShared {
                entry: "rowsum".into(),
                bytes: 100 * 1024
            }]
        );
        let over = klab_core::device::DeviceLimits::hopper().max_shared_per_block_optin + 1;
        let (r, calls) = prepared(over);
        let e = r.unwrap_err().to_string();
        assert!(e.contains("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"), "{e}");
        assert!(calls.is_empty(), "{calls:?}");
    }

    /// A one-size copy (x to y, n f32 elements) launched on `grid` blocks of `block`
    /// threads, its size declared `sizes.n = SIZE`.
    fn copy_op(grid: &str, block: &str, size: &str) -> KernelDecl {
        with(&format!(
            r#"
source = "k.cu"
[[kernel]]
name = "copy"
entry = "rowsum"
operation = "declared"
params = ["x", "y", "n:i32"]
[kernel.op]
grid = ["{grid}"]
block = ["{block}"]
useful_bytes = "8 * n"
reference = {{ c = "ref.c:copy" }}
sizes.n = {size}
buffers.x = {{ dtype = "f32", len = "n", role = "in" }}
buffers.y = {{ dtype = "f32", len = "n", role = "out", compare = "bitwise" }}
"#
        ))
    }

    /// A tile past the linear scan's reach (16 elements for each of 1024 threads; 25600
    /// elements staged in shared memory): the ladder still straddles its boundaries, where
    /// it used to fall back to the block's 1024 and never reach a second tile.
    #[test]
    fn a_large_tiles_boundaries_are_found_past_the_linear_scan() {
        let op = |grid: &str| copy_op(grid, "1024", "{}").op;
        for (grid, c) in [
            ("ceil_div(n, 16384)", 16384),
            ("ceil_div(n, 25600)", 25600),
            ("ceil_div(n, 4096)", 4096),
            ("ceil_div(n, 1000003)", 1000003),
            ("(n + 1023) / 1024", 1024),
        ] {
            let op = op(grid);
            assert_eq!(chunk(&op, "n"), c, "{grid}");
            let n: Vec<i64> = ladder(&op).unwrap().iter().map(|s| s["n"]).collect();
            for v in [c - 1, c, c + 1, 2 * c - 1, 2 * c + 1] {
                assert!(n.contains(&(v as i64)), "{grid}: {v} in {n:?}");
            }
        }
        // A grid that never grows (a persistent kernel) falls back to the block.
        assert_eq!(chunk(&op("132"), "n"), 1024);
    }

    /// A float domain's ends in f16 or bf16: a value rounded past an end is stepped back
    /// inside (0.10003 rounds to 0.1000366 in f16, past the end); a range that holds no
    /// value of the dtype keeps the nearest.
    #[test]
    fn a_float_domain_keeps_16_bit_values_inside_its_ends() {
        let value = |dt: Dtype, v: f64, r: [f64; 2]| dt.value_of_bits(dt.bits_within(v, r));
        let r = [-0.10003, 0.10003];
        assert!(Dtype::F16.value_of_bits(Dtype::F16.bits_of_f64(0.10003)) > 0.10003);
        for (v, dt) in [
            (0.10003, Dtype::F16),
            (-0.10003, Dtype::F16),
            (1.0, Dtype::F16),
        ] {
            let got = value(dt, v, r);
            assert!((r[0]..=r[1]).contains(&got), "{v}: {got}");
            assert!((got - v.clamp(r[0], r[1])).abs() < 1e-4, "{v}: {got}");
        }
        // Zero and values well inside are as rounded; bf16 too.
        assert_eq!(value(Dtype::F16, 0.0, r), 0.0);
        assert_eq!(value(Dtype::Bf16, 1.5, [1.0, 2.0]), 1.5);
        let got = value(Dtype::Bf16, 1.004, [1.0, 1.004]);
        assert!((1.0..=1.004).contains(&got), "{got}");
        // Nothing of f16 lies in [0.10001, 0.10002]: the nearest stays.
        let got = value(Dtype::F16, 0.100015, [0.10001, 0.10002]);
        assert!((got - 0.100015).abs() < 1e-4, "{got}");
    }

    /// A row walked in steps of a BLOCK the launch does not show (one program per row, a
    /// Triton kernel's loop over 1024 columns): the derived ladder stays at the block's
    /// 128 and never reaches a second step; a declared tile adds the sizes around one and
    /// two tiles (rounded to the multiple), and the block's boundaries stay.
    #[test]
    fn a_declared_tile_puts_its_boundaries_in_the_ladder() {
        let n_of = |size: &str| -> Vec<i64> {
            ladder(&copy_op("1", "128", size).op)
                .unwrap()
                .iter()
                .map(|s| s["n"])
                .collect()
        };
        let derived = n_of("{}");
        assert!(derived.iter().all(|n| *n < 1023), "{derived:?}");
        let tiled = n_of("{ tile = 1024 }");
        for v in [127, 128, 129, 1023, 1024, 1025, 2047, 2049] {
            assert!(tiled.contains(&v), "{v} in {tiled:?}");
        }
        let fours = n_of("{ tile = 1024, multiple = 4 }");
        for v in [1020, 1024, 1028, 2044, 2052] {
            assert!(fours.contains(&v), "{v} in {fours:?}");
        }
        assert!(fours.iter().all(|n| n % 4 == 0), "{fours:?}");
        // A max between one and two tiles keeps its edge.
        let capped = n_of("{ tile = 1024, max = 1500 }");
        for v in [1023, 1024, 1025, 1499, 1500] {
            assert!(capped.contains(&v), "{v} in {capped:?}");
        }
        assert!(capped.iter().all(|n| *n <= 1500), "{capped:?}");
    }

    fn with(manifest: &str) -> KernelDecl {
        let source = klab_spec::testing::stand_in_source(manifest);
        klab_spec::manifest::parse(
            "m.toml",
            manifest,
            klab_spec::manifest::Files::Given(&|_| Ok(("k.cu".into(), source.clone().into()))),
        )
        .unwrap()
        .kernels[0]
            .clone()
    }

    /// out[i, :] = table[ids[i], :]: an embedding lookup, its ids declared as rows of the
    /// table (`index_into`) or by a range expression.
    const GATHER: &str = r#"
source = "k.cu"
[[kernel]]
name = "gather"
entry = "rowsum"
operation = "declared"
params = ["ids", "table", "out", "n:i32", "V:i32", "C:i32"]
[kernel.op]
grid = ["n"]
block = ["32"]
useful_bytes = "4 * n + 8 * n * C"
reference = { c = "ref.c:gather_ref" }
sizes.n = { values = [1, 40] }
sizes.V = { values = [1, 3, 64] }
sizes.C = { values = [1, 5] }
buffers.ids = { dtype = "i32", len = "n", role = "in", index_into = "table" }
buffers.table = { dtype = "f32", len = "V * C", role = "in", shape = ["V", "C"] }
buffers.out = { dtype = "f32", len = "n * C", role = "out", shape = ["n", "C"], compare = "bitwise" }
"#;

    struct Gather;
    impl Reference for Gather {
        fn run(&self, _: &Shape, b: &mut [&mut [u8]], i: &[i64], _: &[f64]) -> Result<(), String> {
            let (n, v, c) = (i[0] as usize, i[1] as usize, i[2] as usize);
            for r in 0..n {
                let id = i32::from_le_bytes(b[0][4 * r..4 * r + 4].try_into().unwrap());
                let row = usize::try_from(id)
                    .ok()
                    .filter(|x| *x < v)
                    .ok_or(format!("id {id} is outside the table's {v} rows"))?;
                for k in 0..c {
                    let at = 4 * (row * c + k);
                    let w: [u8; 4] = b[1][at..at + 4].try_into().unwrap();
                    b[2][4 * (r * c + k)..4 * (r * c + k) + 4].copy_from_slice(&w);
                }
            }
            Ok(())
        }
        fn describe(&self) -> String {
            "a Rust gather".into()
        }
    }

    /// The lookup; an id outside the table reads nothing (as a guarded kernel would).
    fn gather(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let [HostArg::Buffer(ids), HostArg::Buffer(t), HostArg::Buffer(out), HostArg::I32(n), HostArg::I32(v), HostArg::I32(c)] =
            a
        else {
            panic!("{a:?}")
        };
        let (n, v, c) = (*n as usize, *v as usize, *c as usize);
        for r in 0..n {
            let id = mem[*ids][r] as i32;
            if id < 0 || id as usize >= v {
                continue;
            }
            for k in 0..c {
                mem[*out][r * c + k] = mem[*t][id as usize * c + k];
            }
        }
    }

    fn check_gather(manifest: &str) -> Result<crate::check::CheckReport, BackendError> {
        check_on_host(&with(manifest), gather, Gather)
    }

    #[test]
    fn an_index_buffer_stays_inside_its_domain_in_every_case() {
        let by_rows = check_gather(GATHER).unwrap();
        assert!(by_rows.passed(), "{}", by_rows.render());
        let text = by_rows.render();
        for case in [
            "special values",
            "constant input",
            "large-magnitude",
            "exact input",
        ] {
            assert!(text.contains(case), "{case} ran: {text}");
        }
        let by_range = GATHER.replace("index_into = \"table\"", "range = [0, \"V - 1\"]");
        assert_ne!(by_range, GATHER);
        let r = check_gather(&by_range).unwrap();
        assert!(r.passed(), "{}", r.render());
        // Before domains, the ids of most cases ran past the table and the reference
        // refused them; a plain range without the expression still does.
        let unbounded = GATHER.replace("index_into = \"table\"", "range = [0, 63]");
        let e = check_gather(&unbounded).unwrap_err();
        assert!(e.message.contains("outside the table"), "{e}");
    }

    /// out[r] = sum of vals[rp[r] .. rp[r + 1]]: the rows of a compressed layout, its row
    /// offsets declared with `offsets`.
    const SEGMENTS: &str = r#"
source = "k.cu"
[[kernel]]
name = "segsum"
entry = "rowsum"
operation = "declared"
params = ["rp", "vals", "out", "rows:i32", "nnz:i32"]
[kernel.op]
grid = ["rows"]
block = ["32"]
useful_bytes = "4 * rows + 4 * nnz"
reference = { c = "ref.c:segsum_ref" }
sizes.rows = { values = [1, 7, 40] }
sizes.nnz = { values = [0, 1, 33, 300], min = 0 }
buffers.rp = { dtype = "i32", len = "rows + 1", role = "in", offsets = "nnz" }
buffers.vals = { dtype = "f32", len = "nnz", role = "in" }
buffers.out = { dtype = "f32", len = "rows", role = "out", compare = { allclose = { atol = 1e-5, rtol = 1e-5 } } }
"#;

    fn segment(rp: &[i32], r: usize, nnz: usize) -> Result<std::ops::Range<usize>, String> {
        let (a, b) = (rp[r], rp[r + 1]);
        if a < 0 || b < a || b as usize > nnz {
            return Err(format!(
                "row {r}: offsets {a}..{b} do not fit {nnz} entries"
            ));
        }
        Ok(a as usize..b as usize)
    }

    struct SegSum;
    impl Reference for SegSum {
        fn run(&self, _: &Shape, b: &mut [&mut [u8]], i: &[i64], _: &[f64]) -> Result<(), String> {
            let (rows, nnz) = (i[0] as usize, i[1] as usize);
            let rp: Vec<i32> = b[0]
                .chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            for r in 0..rows {
                let mut acc = 0f32;
                for j in segment(&rp, r, nnz)? {
                    acc += f32::from_le_bytes(b[1][4 * j..4 * j + 4].try_into().unwrap());
                }
                b[2][4 * r..4 * r + 4].copy_from_slice(&acc.to_le_bytes());
            }
            Ok(())
        }
        fn describe(&self) -> String {
            "a Rust segment sum".into()
        }
    }

    fn segsum_with(mem: &mut [Vec<u32>], a: &[HostArg], drop_last: bool) {
        let [HostArg::Buffer(rp), HostArg::Buffer(v), HostArg::Buffer(out), HostArg::I32(rows), HostArg::I32(nnz)] =
            a
        else {
            panic!("{a:?}")
        };
        let rp_row: Vec<i32> = mem[*rp].iter().map(|x| *x as i32).collect();
        for r in 0..*rows as usize {
            let mut s = segment(&rp_row, r, *nnz as usize).expect("klab made valid offsets");
            if drop_last {
                s.end = s.end.saturating_sub(1).max(s.start);
            }
            let acc: f32 = s.map(|j| f32::from_bits(mem[*v][j])).sum();
            mem[*out][r] = acc.to_bits();
        }
    }
    fn segsum(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        segsum_with(mem, a, false)
    }
    fn segsum_drops_last(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        segsum_with(mem, a, true)
    }

    #[test]
    fn row_offsets_stay_a_valid_layout_in_every_case_and_a_dropped_entry_fails() {
        let check_with = |f: crate::backend::host::GeneralKernelFn| {
            check_on_host(&with(SEGMENTS), f, SegSum).unwrap()
        };
        let r = check_with(segsum);
        assert!(r.passed(), "{}", r.render());
        let r = check_with(segsum_drops_last);
        assert!(!r.passed(), "{}", r.render());
        // Each case spreads the entries its own way, always from 0 to nnz.
        let shape = Shape::from([("rows".into(), 10), ("nnz".into(), 50)]);
        let offsets = |case: InputCase| -> Vec<i32> {
            let w = DeclaredWorkload::new(
                with(SEGMENTS),
                shape.clone(),
                case,
                0,
                std::rc::Rc::new(SegSum),
            )
            .unwrap();
            w.initial_bytes().unwrap()[0]
                .chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        assert_eq!(
            offsets(InputCase::Structural),
            [0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50]
        );
        assert_eq!(
            offsets(InputCase::Constant),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 50]
        );
        assert_eq!(
            offsets(InputCase::Special),
            [0, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50]
        );
        let random = offsets(InputCase::Uniform { seed: 3 });
        assert!(random.windows(2).all(|w| w[0] <= w[1]), "{random:?}");
        assert_eq!((random[0], random[10]), (0, 50));
        assert_ne!(random, offsets(InputCase::Uniform { seed: 4 }));
        // Offsets that decrease, or do not end at nnz, are not a layout: said before any
        // reference runs.
        let mut b = buffer_for_offsets(50);
        for bad in [vec![0, 7, 3, 50], vec![0, 7, 9, 49], vec![1, 7, 9, 50]] {
            b.elements = bad.len() as u64;
            let bytes: Vec<u8> = bad.iter().flat_map(|x: &i32| x.to_le_bytes()).collect();
            assert!(outside_domain(&b, &bytes).is_some(), "{bad:?}");
        }
        let good: Vec<u8> = [0i32, 7, 7, 50]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        b.elements = 4;
        assert_eq!(outside_domain(&b, &good), None);
    }

    fn buffer_for_offsets(total: i64) -> Buffer {
        Buffer {
            name: "rp".into(),
            dtype: Dtype::I32,
            role: Role::In,
            elements: 4,
            shape: vec![4],
            axes: vec!["i".into()],
            comparison: None,
            range: None,
            domain: Some([0, total]),
            float_domain: None,
            offsets: true,
        }
    }

    #[test]
    fn an_empty_index_into_an_empty_table_is_made_in_every_case() {
        let shape = Shape::from([("n".into(), 0), ("V".into(), 0), ("C".into(), 1)]);
        for case in [
            InputCase::Structural,
            InputCase::Special,
            InputCase::Normal { seed: 1 },
        ] {
            let w = DeclaredWorkload::new(
                with(GATHER),
                shape.clone(),
                case,
                0,
                std::rc::Rc::new(Gather),
            )
            .unwrap();
            assert!(
                w.initial_bytes().unwrap().iter().all(Vec::is_empty),
                "{case:?}"
            );
        }
    }

    /// Every case klab generates an input for.
    const EVERY_GENERATED_CASE: [InputCase; 7] = [
        InputCase::Structural,
        InputCase::Distinct,
        InputCase::Uniform { seed: 3 },
        InputCase::Normal { seed: 3 },
        InputCase::Large { seed: 3 },
        InputCase::Constant,
        InputCase::Special,
    ];

    /// An input of 5000 elements with no range or domain.
    fn input_of_5000(dtype: Dtype) -> Buffer {
        Buffer {
            name: "x".into(),
            dtype,
            role: Role::In,
            elements: 5000,
            shape: vec![5000],
            axes: vec!["i".into()],
            comparison: None,
            range: None,
            domain: None,
            float_domain: None,
            offsets: false,
        }
    }

    #[test]
    fn every_case_of_a_domain_keeps_to_it_and_reaches_both_ends() {
        let buffer = |dtype: Dtype, domain: [i64; 2]| Buffer {
            domain: Some(domain),
            ..input_of_5000(dtype)
        };
        let cases = EVERY_GENERATED_CASE;
        for (dtype, domain) in [
            (Dtype::I32, [0, 0]),
            (Dtype::I32, [0, 63]),
            (Dtype::I64, [-7, 5]),
            (Dtype::U8, [250, 255]),
            (Dtype::U32, [0, u32::MAX as i64]),
        ] {
            let b = buffer(dtype, domain);
            let mut seen = std::collections::BTreeSet::new();
            for case in cases {
                let bytes = fill(&b, 1, case).unwrap();
                assert_eq!(
                    outside_domain(&b, &bytes),
                    None,
                    "{dtype} {domain:?} {case:?}"
                );
                seen.extend((0..5000).map(|i| dtype.to_i128(&bytes, i).unwrap()));
                let g = generator(&b, 1, case);
                assert_eq!(
                    g.is_none(),
                    matches!(case, InputCase::Normal { .. }),
                    "{case:?}"
                );
            }
            let (lo, hi) = (i128::from(domain[0]), i128::from(domain[1]));
            assert!(
                seen.contains(&lo) && seen.contains(&hi),
                "{dtype} {domain:?}"
            );
        }
    }

    /// A float input declared `domain = true` keeps every case inside its range (a second
    /// moment's [0, 1]: the exact input's -8..8 made a correct `sqrt(v)` kernel NaN), reaches
    /// both ends, and is random on the device as before; without it the range bounds only
    /// the random draw.
    #[test]
    fn every_case_of_a_float_domain_keeps_to_it_and_reaches_both_ends() {
        let buffer = |dtype: Dtype, range: [f64; 2], domain: bool| Buffer {
            range: Some(range),
            float_domain: domain.then_some(range),
            ..input_of_5000(dtype)
        };
        let cases = EVERY_GENERATED_CASE;
        for (dtype, range) in [
            (Dtype::F32, [0.0, 1.0]),
            (Dtype::F64, [1e-3, 50.0]),
            (Dtype::Bf16, [-2.0, 0.0]),
            (Dtype::F16, [0.5, 4.0]),
        ] {
            let b = buffer(dtype, range, true);
            let mut seen = Vec::new();
            for case in cases {
                let bytes = fill(&b, 1, case).unwrap();
                let v: Vec<f64> = (0..5000).map(|i| dtype.to_f64(&bytes, i)).collect();
                assert!(
                    v.iter().all(|x| (range[0]..=range[1]).contains(x)),
                    "{dtype} {range:?} {case:?}: {:?}",
                    v.iter().find(|x| !(range[0]..=range[1]).contains(*x))
                );
                seen.extend(v);
                assert_eq!(
                    generator(&b, 1, case).is_some(),
                    matches!(case, InputCase::Uniform { .. }),
                    "{case:?}"
                );
            }
            assert!(
                seen.contains(&range[0]) && seen.contains(&range[1]),
                "{dtype}"
            );
            let exact = fill(&b, 1, InputCase::Structural).unwrap();
            let levels: std::collections::BTreeSet<u64> = (0..5000)
                .map(|i| dtype.to_f64(&exact, i).to_bits())
                .collect();
            assert!(levels.len() >= 9, "{dtype}: {}", levels.len());
        }
        // Without domain = true the range bounds the random draw only (documented).
        let plain = buffer(Dtype::F32, [0.0, 1.0], false);
        let exact = fill(&plain, 1, InputCase::Structural).unwrap();
        assert!((0..5000).any(|i| Dtype::F32.to_f64(&exact, i) < 0.0));
    }

    /// The random draw of a float domain is made by the generator (on the device for large
    /// inputs): where an end is not a value of the dtype (0.10003 in f16 rounds to
    /// 0.1000366), a draw that rounds past it is stepped back inside, as the host's cases are.
    #[test]
    fn a_float_domains_random_draw_stays_inside_ends_the_dtype_cannot_hold() {
        for (dtype, range) in [
            (Dtype::F16, [-0.10003, 0.10003]),
            (Dtype::Bf16, [0.1, 0.702]),
        ] {
            let b = Buffer {
                range: Some(range),
                float_domain: Some(range),
                ..input_of_5000(dtype)
            };
            let mut escaped_unstepped = 0;
            for seed in 0..40 {
                let case = InputCase::Uniform { seed };
                let bytes = fill(&b, 1, case).unwrap();
                let outside = (0..5000)
                    .map(|i| dtype.to_f64(&bytes, i))
                    .find(|x| !(range[0]..=range[1]).contains(x));
                assert_eq!(outside, None, "{dtype} {range:?} seed {seed}");
                // The same draw rounded without the step: what the generator made before.
                let Some(crate::inputs::Generator {
                    pattern: crate::inputs::Pattern::Uniform { key, lo, hi, .. },
                    ..
                }) = generator(&b, 1, case)
                else {
                    panic!("a float domain's draw has a generator")
                };
                escaped_unstepped += (0..5000u64)
                    .map(|i| lo + (hi - lo) * crate::inputs::unit_at(key, i))
                    .filter(|v| !(lo..=hi).contains(&dtype.value_of_bits(dtype.bits_of_f64(*v))))
                    .count();
            }
            assert!(
                escaped_unstepped > 0,
                "{dtype}: no draw rounded past an end"
            );
        }
    }

    #[test]
    fn user_data_outside_a_domain_is_refused_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("klab-domain-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ids = dir.join("ids.npy");
        let data: Vec<u8> = [1i32, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(
            &ids,
            klab_core::npy::to_bytes(Dtype::I32, &[2], &data).unwrap(),
        )
        .unwrap();
        let manifest = format!(
            "{GATHER}cases = [{{ shape = {{ n = 2, V = 3, C = 1 }}, inputs = {{ ids = '{}' }} }}]\n",
            ids.display()
        );
        let text = check_gather(&manifest).unwrap_err().message;
        assert!(
            text.contains("element 1 holds 9, outside the buffer's domain [0, 2]"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_index_overflow_shape_is_the_smallest_common_growth_past_the_limit() {
        let op = decl().op;
        let base: Shape = [("rows".to_string(), 3), ("cols".to_string(), 5)].into();
        // x holds rows * cols elements: grown by one factor f, 3f * 5f > 1000 at f ~ 8.2.
        let s = overflow_shape(&op, &base, 1000).unwrap();
        assert!(s["rows"] * s["cols"] > 1000, "{s:?}");
        // The last row starts past the limit (a 32-bit `row * cols` wraps there), and the
        // shape is the smallest such growth.
        assert!((s["rows"] - 1) * s["cols"] > 1000, "{s:?}");
        assert!(s["rows"] * (s["cols"] - 1) > 1000, "{s:?}");
        assert!((s["rows"] - 1) * (s["cols"] - 2) <= 1000, "smallest: {s:?}");
        let ratio = s["rows"] as f64 / s["cols"] as f64;
        assert!((ratio - 0.6).abs() < 0.1, "both grow by one factor: {s:?}");
        // The default limit: offsets past 2^31 in x, with rows an i32.
        let s = overflow_shape(&op, &base, INDEX_OVERFLOW_ELEMENTS).unwrap();
        assert!(largest_buffer(&op, &s).unwrap() > 1 << 31, "{s:?}");
        // A max keeps a variable where it is; the other grows alone.
        let capped = with(&MANIFEST.replace(
            "sizes.cols = { values = [1, 5, 33] }",
            "sizes.cols = { values = [1, 5, 33], max = 33 }",
        ));
        let s = overflow_shape(capped.op.as_ref(), &base, 1 << 31).unwrap();
        assert_eq!(s["cols"], 33);
        // Past the limit with cols one smaller too (32 columns): the smallest such rows.
        assert!(
            s["rows"] * 32 > 1 << 31 && (s["rows"] - 1) * 32 <= 1 << 31,
            "{s:?}"
        );
        // No shape can reach it when every variable is capped below it.
        let both = with(
            &MANIFEST
                .replace("sizes.rows = {}", "sizes.rows = { max = 1000 }")
                .replace(
                    "sizes.cols = { values = [1, 5, 33] }",
                    "sizes.cols = { values = [1, 5, 33], max = 33 }",
                ),
        );
        let e = overflow_shape(both.op.as_ref(), &base, 1 << 31).unwrap_err();
        assert!(e.contains("no shape within"), "{e}");
    }

    #[test]
    fn a_length_over_three_sizes_still_finds_its_overflow_shape() {
        // rows * cols * cols: at the search's first probe (every size at its i32 cap) the length
        // overflows i64; that counts as past the limit, not as "no shape".
        let d = with(&MANIFEST.replace(
            "len = \"rows * cols\", role = \"in\", shape = [\"rows\", \"cols\"]",
            "len = \"rows * cols * cols\", role = \"in\"",
        ));
        let op = d.op;
        let base: Shape = [("rows".to_string(), 3), ("cols".to_string(), 5)].into();
        let s = overflow_shape(&op, &base, 1 << 31).unwrap();
        assert!(largest_buffer(&op, &s).unwrap() > 1 << 31, "{s:?}");
    }

    #[test]
    fn an_overflow_shape_the_device_cannot_launch_is_a_skip_and_a_failing_reference_too() {
        // grid.y = rows: past 65535 at the overflow shape (cols capped at 33), within the
        // limit on every ladder shape.
        let d = with(
            &MANIFEST
                .replace(
                    "grid = [\"ceil_div(rows, 32)\"]",
                    "grid = [\"1\", \"rows\"]",
                )
                .replace(
                    "sizes.cols = { values = [1, 5, 33] }",
                    "sizes.cols = { values = [1, 5, 33], max = 33 }",
                ),
        );
        let mut b = HostBackend::new()
            .with_general_kernel("rowsum", good)
            .with_free_bytes(1 << 40);
        let k = [b.kernel("rowsum").unwrap()];
        let opts = CheckOptions {
            seed: 1,
            sizes: None,
            shapes: None,
            quick: false,
            resume_after: 0,
        };
        let r = run(&mut b, &d, &k, std::rc::Rc::new(RowSum), &opts, &mut |_| {}).unwrap();
        let c = r.cases.last().unwrap();
        // Skipped by the launch limit, or first by this machine's host memory: never a FAIL.
        assert!(c.skipped && c.detail.starts_with("not run: "), "{c:?}");
        assert!(
            c.detail.contains("the launch at this shape") || c.detail.contains("host memory"),
            "{}",
            c.detail
        );
        assert!(r.passed(), "{}", r.render());
    }

    #[test]
    fn an_overflow_shape_the_operation_cannot_form_is_not_applicable_never_a_failure() {
        // The block's shared memory grows with rows * cols: past 32 bits at the overflow
        // shape, a few KiB on the ladder.
        let d = with(&MANIFEST.replace(
            "block = [\"32\"]",
            "block = [\"32\"]\ndynamic_shared_bytes = \"4 * rows * cols\"",
        ));
        let mut b = HostBackend::new()
            .with_general_kernel("rowsum", good)
            .with_free_bytes(1 << 40);
        let k = [b.kernel("rowsum").unwrap()];
        let opts = CheckOptions {
            seed: 1,
            sizes: None,
            shapes: None,
            quick: false,
            resume_after: 0,
        };
        let r = run(&mut b, &d, &k, std::rc::Rc::new(RowSum), &opts, &mut |_| {}).unwrap();
        let c = r.cases.last().unwrap();
        assert!(c.case.starts_with("index overflow"), "{c:?}");
        assert!(c.skipped && c.pass, "{c:?}");
        assert!(
            c.detail.starts_with("not applicable: ") && c.detail.contains("32 bits"),
            "{}",
            c.detail
        );
        assert!(r.passed(), "{}", r.render());
    }

    #[test]
    fn the_check_says_plainly_when_the_index_overflow_case_does_not_fit() {
        // The host backend offers 2 GiB: x alone needs 8.6 GB past 2^31 elements.
        let r = check(good);
        let c = r.cases.last().unwrap();
        assert!(c.case.starts_with("index overflow, cols="), "{}", c.case);
        assert!(c.skipped && c.pass, "{c:?}");
        assert!(
            c.detail
                .starts_with("not run: needs 8.6 GB of device memory"),
            "{}",
            c.detail
        );
        assert!(
            c.render().starts_with("SKIP index overflow"),
            "{}",
            c.render()
        );
        assert!(r.passed());
    }

    #[test]
    fn a_launch_that_covers_nothing_fails_and_min_and_max_keep_their_edges() {
        // rows / 256 blocks: 0 blocks below 256 rows, while y has rows elements.
        let d = with(
            &MANIFEST
                .replace("ceil_div(rows, 32)", "rows / 256")
                .replace("sizes.rows = {}", "sizes.rows = { values = [1, 7] }"),
        );
        let r = check_decl(&d, good);
        assert!(!r.passed());
        assert!(
            r.cases
                .iter()
                .filter(|c| !c.skipped)
                .all(|c| !c.pass && c.detail.contains("zero dimension")),
            "{}",
            r.render()
        );
        // A min above the first chunk keeps its edge, and the ladder straddles the first
        // boundary past it (the chunk is looked for from the smallest size admitted); a max
        // below the chunk keeps its edges.
        let d = with(&MANIFEST.replace("sizes.rows = {}", "sizes.rows = { min = 200 }"));
        let rows: Vec<i64> = ladder(d.op.as_ref())
            .unwrap()
            .iter()
            .map(|s| s["rows"])
            .collect();
        assert!(rows.iter().all(|r| *r >= 200), "{rows:?}");
        for r in [200, 223, 224, 225, 447, 449] {
            assert!(rows.contains(&r), "{r} in {rows:?}");
        }
        let d = with(&MANIFEST.replace("sizes.rows = {}", "sizes.rows = { max = 20 }"));
        let rows: Vec<i64> = ladder(d.op.as_ref())
            .unwrap()
            .iter()
            .map(|s| s["rows"])
            .collect();
        for r in [1, 2, 19, 20] {
            assert!(rows.contains(&r), "{r} in {rows:?}");
        }
        assert!(rows.iter().all(|r| *r <= 20), "{rows:?}");
    }

    #[test]
    fn every_input_case_fills_its_buffer_as_it_says() {
        let b = |dtype: Dtype| Buffer {
            name: "x".into(),
            dtype,
            role: Role::In,
            elements: 10,
            shape: vec![10],
            axes: vec!["i".into()],
            comparison: None,
            range: Some([-2.0, 2.0]),
            domain: None,
            float_domain: None,
            offsets: false,
        };
        let f32s = |v: Vec<u8>| -> Vec<f32> {
            v.chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        // Two inputs of one shape differ; the same seed replays.
        let s0 = f32s(fill(&b(Dtype::F32), 0, InputCase::Structural).unwrap());
        assert_ne!(
            s0,
            f32s(fill(&b(Dtype::F32), 1, InputCase::Structural).unwrap())
        );
        assert!(s0.iter().all(|v| v.fract() == 0.0 && v.abs() <= 8.0));
        let u = fill(&b(Dtype::F32), 0, InputCase::Uniform { seed: 3 }).unwrap();
        assert_eq!(
            u,
            fill(&b(Dtype::F32), 0, InputCase::Uniform { seed: 3 }).unwrap()
        );
        assert!(f32s(u).iter().all(|v| (-2.0..=2.0).contains(v)));
        let large = f32s(fill(&b(Dtype::F32), 0, InputCase::Large { seed: 3 }).unwrap());
        assert!(large.iter().any(|v| v.abs() > 2.0) && large.iter().all(|v| v.abs() <= 2000.0));
        assert!(
            f32s(fill(&b(Dtype::F32), 0, InputCase::Normal { seed: 3 }).unwrap())
                .iter()
                .all(|v| v.is_finite())
        );
        let c = f32s(fill(&b(Dtype::F32), 0, InputCase::Constant).unwrap());
        assert!(c.iter().all(|v| *v == c[0]));
        let sp = f32s(fill(&b(Dtype::F32), 0, InputCase::Special).unwrap());
        assert_eq!(sp[1].to_bits(), 0x8000_0000, "-0.0");
        assert!(sp[2] > 0.0 && !sp[2].is_normal(), "a subnormal");
        assert!(sp[6].is_infinite() && sp[8].is_nan() && sp[9].is_nan());
        assert_ne!(sp[8].to_bits(), sp[9].to_bits(), "two NaN payloads");
        let ints = fill(&b(Dtype::I32), 0, InputCase::Special).unwrap();
        let i: Vec<i32> = ints
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(&i[..5], &[0, 1, i32::MAX, i32::MIN, -1]);
        let h = fill(&b(Dtype::F16), 0, InputCase::Special).unwrap();
        assert_eq!(u16::from_le_bytes([h[2], h[3]]), 0x8000, "-0.0 in f16");
    }

    #[test]
    fn a_correct_kernel_passes_and_each_verdict_names_its_rule() {
        let r = check(good);
        assert!(r.passed(), "{}", r.render());
        assert!(r.cases.iter().any(|c| c.case.contains("random input seed")));
        assert!(r.cases.iter().any(|c| c.case.ends_with("determinism")));
        for case in [
            "normal input seed",
            "large-magnitude input seed",
            "constant input",
        ] {
            assert!(
                r.cases.iter().any(|c| c.case.contains(case) && c.pass),
                "{case}: {}",
                r.render()
            );
        }
        // The rule is a tolerance: no special values (a tolerance has no answer for NaN).
        assert!(!r.cases.iter().any(|c| c.case.contains("special values")));
        let c = &r.cases[0];
        assert!(c.detail.contains("allclose"), "{}", c.detail);
        assert_eq!(r.operation, "declared, reference: a Rust row sum");
    }

    /// Sums each row backwards (another order: rounding differs from the reference's).
    fn reversed(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let (x, y, rows, cols) = args(a);
        for r in 0..rows {
            let s: f32 = (0..cols)
                .rev()
                .map(|c| f32::from_bits(mem[x][r * cols + c]))
                .sum();
            mem[y][r] = s.to_bits();
        }
    }
    /// Drops the last column of every row wider than one.
    fn drops_last_column(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let (x, y, rows, cols) = args(a);
        for r in 0..rows {
            let s: f32 = (0..cols.saturating_sub(1).max(1))
                .map(|c| f32::from_bits(mem[x][r * cols + c]))
                .sum();
            mem[y][r] = s.to_bits();
        }
    }

    #[test]
    fn scaled_sum_takes_its_magnitude_from_the_reference_on_absolute_inputs() {
        let d = with(&MANIFEST.replace(
            "{ allclose = { atol = 1e-5, rtol = 1e-5 } }",
            "{ scaled-sum = \"cols\" }",
        ));
        let r = check_decl(&d, reversed);
        assert!(r.passed(), "another summation order passes: {}", r.render());
        assert!(
            r.cases[0].detail.contains("scaled-sum k="),
            "{}",
            r.cases[0].detail
        );
        let r = check_decl(&d, drops_last_column);
        assert!(!r.passed(), "a dropped term fails: {}", r.render());
        // The device checker reads the magnitudes klab uploads (every judgement
        // cross-checked by the CPU oracle: a wrong upload is a klab error, not a verdict).
        for (f, pass) in [
            (reversed as crate::backend::host::GeneralKernelFn, true),
            (drops_last_column, false),
        ] {
            let b = HostBackend::new().with_device_checker(None).with_paranoid();
            let r = check_on(b, &d, f, RowSum).unwrap();
            assert_eq!(r.passed(), pass, "{}", r.render());
        }
        // The magnitude is sum |x|: a row of +1 and -1 sums to 0 with magnitude cols, so
        // the gate is not a relative error against the (zero) result.
        let w = DeclaredWorkload::new(
            d.clone(),
            [("rows".to_string(), 1), ("cols".to_string(), 4)].into(),
            InputCase::Structural,
            0,
            std::rc::Rc::new(RowSum),
        )
        .unwrap();
        let inputs = w.inputs().unwrap();
        let x: Vec<f32> = inputs[0]
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let want: f64 = x.iter().map(|v| v.abs() as f64).sum();
        assert_eq!(w.scales().unwrap()[1].as_deref(), Some(&[want][..]));
        assert_eq!(w.scales().unwrap()[0], None, "inputs have no magnitude");
        // A k that is not a size expression is a manifest error naming the field.
        let bad = MANIFEST.replace(
            "{ allclose = { atol = 1e-5, rtol = 1e-5 } }",
            "{ scaled-sum = \"depth\" }",
        );
        let source = klab_spec::testing::stand_in_source(MANIFEST);
        let e = klab_spec::manifest::parse(
            "m.toml",
            &bad,
            klab_spec::manifest::Files::Given(&|_| Ok(("k.cu".into(), source.clone().into()))),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("buffers.y.compare") && e.to_string().contains("depth"),
            "{e}"
        );
    }

    /// A row sum whose oracle sums in f64 and whose working-precision build sums in f32
    /// (what a C reference with `KLAB_REAL` gives).
    struct RowSumReal;
    impl Reference for RowSumReal {
        fn run(
            &self,
            _: &Shape,
            b: &mut [&mut [u8]],
            ints: &[i64],
            _: &[f64],
        ) -> Result<(), String> {
            row_sum::<f64>(b, ints);
            Ok(())
        }
        fn run_in(
            &self,
            p: rule::Precision,
            _: &Shape,
            b: &mut [&mut [u8]],
            ints: &[i64],
            _: &[f64],
        ) -> Result<(), String> {
            assert_eq!(p, rule::Precision::F32);
            row_sum::<f32>(b, ints);
            Ok(())
        }
        fn describe(&self) -> String {
            "a Rust row sum in KLAB_REAL".into()
        }
    }
    fn row_sum<T: num_like::Real>(b: &mut [&mut [u8]], ints: &[i64]) {
        let (rows, cols) = (ints[0] as usize, ints[1] as usize);
        for r in 0..rows {
            let mut s = T::zero();
            for c in 0..cols {
                let i = 4 * (r * cols + c);
                s = s.add(f32::from_le_bytes(b[0][i..i + 4].try_into().unwrap()));
            }
            b[1][4 * r..4 * r + 4].copy_from_slice(&s.to_f32().to_le_bytes());
        }
    }
    mod num_like {
        pub trait Real: Copy {
            fn zero() -> Self;
            fn add(self, x: f32) -> Self;
            fn to_f32(self) -> f32;
        }
        impl Real for f32 {
            fn zero() -> f32 {
                0.0
            }
            fn add(self, x: f32) -> f32 {
                self + x
            }
            fn to_f32(self) -> f32 {
                self
            }
        }
        impl Real for f64 {
            fn zero() -> f64 {
                0.0
            }
            fn add(self, x: f32) -> f64 {
                self + x as f64
            }
            fn to_f32(self) -> f32 {
                self as f32
            }
        }
    }
    /// Sums each row in f32 but keeps only bfloat16's 8 bits of mantissa after each step:
    /// a kernel less accurate than its working precision.
    fn sums_in_bf16(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let (x, y, rows, cols) = args(a);
        for r in 0..rows {
            let mut s = 0f32;
            for c in 0..cols {
                s = f32::from_bits(
                    (s + f32::from_bits(mem[x][r * cols + c])).to_bits() & 0xffff_0000,
                );
            }
            mem[y][r] = s.to_bits();
        }
    }

    #[test]
    fn reference_error_accepts_another_order_that_an_absolute_tolerance_rejects() {
        let check_with = |rule: &str, f: crate::backend::host::GeneralKernelFn| {
            let d = with(
                &MANIFEST
                    .replace("{ allclose = { atol = 1e-5, rtol = 1e-5 } }", rule)
                    .replace("values = [1, 5, 33]", "values = [1, 5, 33, 1000]"),
            );
            check_on_host(&d, f, RowSumReal).unwrap()
        };
        // The failure that motivated the rule: summing in another order than the reference
        // is as accurate, but large-magnitude inputs put the difference above an absolute
        // tolerance written for unit-scale inputs.
        let r = check_with("{ allclose = { atol = 1e-5, rtol = 0 } }", reversed);
        assert!(!r.passed(), "{}", r.render());
        let rule = "{ reference-error = { k = 4, atol = 0 } }";
        let r = check_with(rule, reversed);
        assert!(r.passed(), "another order is as accurate: {}", r.render());
        assert!(
            r.cases[0].detail.contains("reference-error k=4"),
            "{}",
            r.cases[0].detail
        );
        // Less accurate than the reference in f32, or wrong: rejected, and the line gives
        // the kernel's error beside the reference's own.
        for bad in [
            sums_in_bf16 as crate::backend::host::GeneralKernelFn,
            drops_last_column,
        ] {
            let r = check_with(rule, bad);
            assert!(!r.passed(), "{}", r.render());
            let failed = r.cases.iter().find(|c| !c.pass).unwrap();
            assert!(
                failed.detail.contains("the reference in f32 is off by"),
                "{}",
                failed.detail
            );
        }
    }

    #[test]
    fn user_cases_add_shapes_and_run_on_the_users_npy_data() {
        let tmp = tempfile::tempdir().unwrap();
        let x: Vec<f32> = (0..10).map(|i| i as f32 * 0.5 - 2.0).collect();
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(
            tmp.path().join("x.npy"),
            klab_core::npy::to_bytes(Dtype::F32, &[2, 5], &bytes).unwrap(),
        )
        .unwrap();
        std::fs::write(
            tmp.path().join("k.cu"),
            klab_spec::testing::stand_in_source(MANIFEST),
        )
        .unwrap();
        let text = MANIFEST.replace(
            "sizes.cols = { values = [1, 5, 33] }",
            "sizes.cols = { values = [1, 5, 33] }\ncases = [{ shape = { rows = 2, cols = 5 }, inputs = { x = \"x.npy\" } }, { shape = { rows = 1000, cols = 7 } }]",
        );
        let parse = |text: &str| {
            klab_spec::manifest::parse("m.toml", text, klab_spec::manifest::Files::Dir(tmp.path()))
        };
        let d = parse(&text).unwrap().kernels[0].clone();
        let op = d.op.clone();
        let shapes = ladder(&op).unwrap();
        assert!(
            shapes.iter().any(|s| s["rows"] == 1000 && s["cols"] == 7),
            "an added shape"
        );
        let r = check_decl(&d, good);
        assert!(r.passed(), "{}", r.render());
        let data = r
            .cases
            .iter()
            .find(|c| c.case.contains("user data"))
            .unwrap();
        assert!(
            data.case
                .starts_with("cols=5 rows=2: user data (cases[0]: x = "),
            "{}",
            data.case
        );
        // The workload's input is the file's bytes.
        let w = DeclaredWorkload::new(
            d.clone(),
            [("rows".to_string(), 2), ("cols".to_string(), 5)].into(),
            InputCase::Data { case: 0 },
            0,
            std::rc::Rc::new(RowSum),
        )
        .unwrap();
        assert_eq!(w.inputs().unwrap()[0], bytes);
        // A kernel that skips the ragged tail fails on the user's data too.
        let r = check_decl(&d, drops_tail);
        assert!(r
            .cases
            .iter()
            .any(|c| c.case.contains("user data") && !c.pass));
        // A missing file, a shape without every variable, data for an output: the field.
        for (edit, field) in [
            ("x = \"x.npy\"", "cases[0].inputs.x"),
            ("shape = { rows = 1000, cols = 7 }", "cases[1].shape"),
            ("inputs = { x = \"x.npy\" }", "cases[0].inputs.y"),
        ] {
            let bad = match field {
                "cases[0].inputs.x" => text.replace(edit, "x = \"nope.npy\""),
                "cases[1].shape" => text.replace(edit, "shape = { rows = 1000 }"),
                _ => text.replace(edit, "inputs = { y = \"x.npy\" }"),
            };
            let e = parse(&bad).unwrap_err();
            assert!(e.field.ends_with(field), "{field}: {e}");
        }
        // A file of the wrong length is one error naming the buffer and both counts.
        let w = DeclaredWorkload::new(
            d,
            [("rows".to_string(), 3), ("cols".to_string(), 5)].into(),
            InputCase::Data { case: 0 },
            0,
            std::rc::Rc::new(RowSum),
        )
        .unwrap();
        let e = w.inputs().unwrap_err().message;
        assert!(
            e.contains("holds 10 elements (shape (2, 5))") && e.contains("15"),
            "{e}"
        );
    }

    #[test]
    fn bitwise_rules_also_get_special_values() {
        let d =
            with(&MANIFEST.replace("{ allclose = { atol = 1e-5, rtol = 1e-5 } }", "\"bitwise\""));
        let r = check_decl(&d, good);
        let special: Vec<_> = r
            .cases
            .iter()
            .filter(|c| c.case.contains("special values"))
            .collect();
        assert_eq!(special.len(), 1);
        assert!(special[0].pass, "{}", special[0].detail);
        assert!(r.passed(), "{}", r.render());
    }

    #[test]
    fn a_dropped_ragged_tail_is_found_at_the_element_it_skipped() {
        let r = check(drops_tail);
        assert!(!r.passed());
        let f = r.cases.iter().find(|c| !c.pass).unwrap();
        // The first row past the last whole block of 32 was never written: the poison
        // (a NaN under 0xff) is read back, and the failure names that row.
        let rows: i64 = f
            .case
            .split("rows=")
            .nth(1)
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            f.detail
                .contains(&format!("first at [row {}]: got NaN", rows / 32 * 32)),
            "{}: {}",
            f.case,
            f.detail
        );
        // Block-exact shapes pass: the bug is only in the tail.
        assert!(r.cases.iter().any(|c| c.case.contains("rows=32") && c.pass));
    }

    /// y[r] += sum of row r of x: the accumulating form of the row sum (C = AB + C in a
    /// GEMM), with y declared inout.
    struct RowSumAcc;
    impl Reference for RowSumAcc {
        fn run(
            &self,
            _: &Shape,
            b: &mut [&mut [u8]],
            ints: &[i64],
            _: &[f64],
        ) -> Result<(), String> {
            let (rows, cols) = (ints[0] as usize, ints[1] as usize);
            for r in 0..rows {
                let mut s = 0f32;
                for c in 0..cols {
                    let at = 4 * (r * cols + c);
                    s += f32::from_le_bytes(b[0][at..at + 4].try_into().unwrap());
                }
                let y = f32::from_le_bytes(b[1][4 * r..4 * r + 4].try_into().unwrap());
                b[1][4 * r..4 * r + 4].copy_from_slice(&(y + s).to_le_bytes());
            }
            Ok(())
        }
        fn describe(&self) -> String {
            "a Rust accumulating row sum".into()
        }
    }
    fn accumulates(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let (x, y, rows, cols) = args(a);
        for r in 0..rows {
            let s: f32 = (0..cols)
                .map(|c| f32::from_bits(mem[x][r * cols + c]))
                .sum();
            mem[y][r] = (f32::from_bits(mem[y][r]) + s).to_bits();
        }
    }

    /// An honest kernel that accumulates into an inout output is timed on its declared
    /// input every launch (restored outside the interval), so the output checked after the
    /// block is one launch's, under every timer and regime; before invalidation the timed
    /// launches kept accumulating and a correct kernel failed the gate.
    #[test]
    fn an_accumulating_inout_kernel_is_accepted_under_every_timer_and_regime() {
        use crate::timing::{measure, Outcome, TimingConfig, WarmupPolicy};
        use klab_core::samples::{Invalidation, Regime, Timer};
        let d = with(&MANIFEST.replace("role = \"out\"", "role = \"inout\""));
        let shape: Shape = [("rows".to_string(), 40), ("cols".to_string(), 33)].into();
        let w = DeclaredWorkload::new(
            d,
            shape,
            InputCase::Uniform { seed: 3 },
            0,
            std::rc::Rc::new(RowSumAcc),
        )
        .unwrap();
        for invalidation in [Invalidation::EveryLaunch, Invalidation::LabContract] {
            for regime in Regime::ALL {
                for timer in [
                    Timer::PerLaunch,
                    Timer::Batch { launches: 3 },
                    Timer::GraphReplay { launches: 2 },
                ] {
                    // One sample as well: the sample run on fresh inputs is then the last
                    // launch of its slots, judged against the fresh inputs' reference.
                    for samples in [1, 12] {
                        let cfg = TimingConfig {
                            timer,
                            regime,
                            samples,
                            warmup: WarmupPolicy::Count { launches: 3 },
                            invalidation,
                        };
                        let mut b = HostBackend::new()
                            .with_general_kernel("rowsum", accumulates)
                            .with_l2_bytes(4096);
                        let k = [b.kernel("rowsum").unwrap()];
                        let o = measure(&mut b, &w, &k, &cfg, "b", &mut Default::default).unwrap();
                        let Outcome::Measured(m) = o else {
                            panic!("{o:?}")
                        };
                        let at = format!("{timer} {regime} {samples} {invalidation:?}");
                        match invalidation {
                            Invalidation::EveryLaunch => {
                                assert_eq!(m.gate_failure(), None, "{at}");
                                assert!(
                                    m.verified
                                        .iter()
                                        .any(|v| v.inputs == Some(NewInputs::Fresh)),
                                    "{at}"
                                );
                            }
                            // The lab's contract leaves the output in place: accumulated.
                            Invalidation::LabContract => {
                                assert!(!m.correct(), "{at}")
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn kernels_of_one_operation_launch_their_own_way_and_launch_parameters_stay_fixed() {
        const LN: &str = r#"
source = "k.cu"
[ops.ln]
grid = ["rows"]
block = ["bs"]
dynamic_shared_bytes = "4 * bs"
useful_bytes = "8 * rows * cols"
reference = { c = "ref.c:r" }
sizes.rows = { values = [1, 7] }
sizes.cols = {}
sizes.bs = { values = [32, 256], launch = true }
bench = { rows = 64, cols = 1024, bs = 256 }
buffers.x = { dtype = "f32", len = "rows * cols", role = "in" }
buffers.y = { dtype = "f32", len = "rows * cols", role = "out", compare = "bitwise" }
[[kernel]]
name = "ln"
entry = "ln"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32", "bs:i32"]
op = "ln"
[[kernel]]
name = "ln_128"
entry = "ln"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32", "bs:i32"]
op = "ln"
launch = { sizes = { bs = [128] } }
[[kernel]]
name = "ln_fixed"
entry = "ln_fixed"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32", "bs:i32"]
op = "ln"
launch = { block = ["64"], dynamic_shared_bytes = "0" }
"#;
        let parse_text = |text: &str| {
            let src = klab_spec::testing::stand_in_source(LN);
            klab_spec::manifest::parse(
                "m.toml",
                text,
                klab_spec::manifest::Files::Given(&|_| Ok(("k.cu".into(), src.clone().into()))),
            )
        };
        let m = parse_text(LN).unwrap();
        let sizes = |i: usize| m.kernels[i].op.spec.sizes["bs"].values.clone().unwrap();
        assert_eq!(sizes(0), [32, 256]);
        assert_eq!(sizes(1), [128]);
        assert_eq!(m.kernels[1].op.spec.bench.as_ref().unwrap()["bs"], 128);
        assert_eq!(m.kernels[0].op.spec.bench.as_ref().unwrap()["bs"], 256);
        assert_eq!(m.kernels[2].op.spec.block[0].source(), "64");
        let shapes = crate::general::ladder(&m.kernels[1].op).unwrap();
        assert!(shapes.iter().all(|s| s["bs"] == 128), "{shapes:?}");
        // The overflow case grows the problem, never the block size.
        let base = shapes[shapes.len() / 2].clone();
        let big = crate::general::overflow_shape(&m.kernels[0].op, &base, 1 << 31).unwrap();
        assert_eq!(big["bs"], base["bs"], "{big:?}");
        assert!(big["rows"] * big["cols"] > 1 << 31, "{big:?}");
        for (from, to, field, says) in [
            (
                "bs = [128]",
                "cols = [128]",
                "kernel[1].launch.sizes.cols",
                "problem size",
            ),
            (
                "bs = [128]",
                "depth = [128]",
                "kernel[1].launch.sizes.depth",
                "not a size variable",
            ),
            (
                "launch = true }",
                "launch = true, min = 1 }\nsizes.t = { launch = true }",
                "ops.ln.sizes.t",
                "give values",
            ),
        ] {
            let e = parse_text(&LN.replacen(from, to, 1)).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.problem.contains(says), "{e}");
        }
    }

    #[test]
    fn the_index_overflow_case_of_a_matrix_is_the_first_n_whose_last_row_starts_past_2_31() {
        for name in ["padded", "lean_64_cm", "memcpy"] {
            let op = klab_spec::testing::op_of(name);
            let base = Shape::from([("n".into(), 1024)]);
            let s = crate::general::overflow_shape(&op, &base, 1 << 31).unwrap();
            assert_eq!(s["n"], 46_342, "{name}");
        }
        let op = klab_spec::testing::op_of("triad_f32");
        let s = crate::general::overflow_shape(&op, &Shape::from([("n".into(), 1024)]), 1 << 31)
            .unwrap();
        assert_eq!(s["n"], (1 << 31) + 2);
    }
}
