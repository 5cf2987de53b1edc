//! The workload of a declared operation (the built-in operations are declared too): one
//! shape (a value per size variable), one input case and one set of scalar values, with a
//! reference computing the expected outputs. [`DeclaredWorkload`] implements [`Workload`],
//! so every gate runs every kernel the same way: exact-length buffers, two poison patterns
//! on outputs and scratch, inputs (and in-out buffers) set before each launch, every output
//! compared by its declared rule.
//!
//! The parts, in the order a case runs:
//! - `shapes`: the shapes a check walks (`--shape` as a [`ShapeArg`], the size [`ladder`],
//!   each variable's [`chunk`], the [`overflow_shape`]) and what a shape costs in memory.
//! - this module: the workload made from a [`KernelDecl`] at a shape
//!   ([`DeclaredWorkload::new`]), every buffer's length, dimensions, rule and domain
//!   evaluated into a `Buffer`.
//! - `fill`: each [`InputCase`]'s input bytes, made on the host or by a device generator,
//!   inside each buffer's domain, and the few elements a verified timed launch draws again.
//! - `expected`: the reference on the inputs (or on a sample of the slices), giving the
//!   expected outputs and each rule's per-element scale.
//! - `judge`: a slot's outputs against them, by the device checker or the CPU oracle, and
//!   the `in` buffers a launch must have left alone.
//! - `args`: a launch's arguments in its parameter order ([`launch_args`]).
//! - `slot`: the [`Workload`] implementation the gates call: slots made, poisoned,
//!   invalidated, given new inputs and checked.

use std::sync::{Arc, OnceLock};

use crate::backend::{Backend, BackendError};
use crate::reference::Reference;
use crate::workload::Workload;
use klab_core::dtype::Dtype;
use klab_spec::declared::{DeclaredOp, OpParam, Role};
use klab_spec::manifest::KernelDecl;
use klab_spec::plan::LaunchPlan;
use klab_spec::rule::{self, Comparison};

mod args;
mod expected;
mod fill;
mod judge;
mod shapes;
mod slot;
#[cfg(test)]
mod tests;

use fill::domain_of;

pub use args::launch_args;
pub use expected::SLICES_AGREE;
pub use fill::InputCase;
pub use klab_core::expr::{describe_shape, Shape};
pub use shapes::{
    chunk, host_copies, ladder, largest_buffer, overflow_shape, size_cap, slot_bytes_at, ShapeArg,
    INDEX_OVERFLOW_ELEMENTS,
};
pub use slot::FRESH_REFERENCE_BUDGET_S;

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
    /// Whether the first judgement's cross-check waits for the caller, and what it holds
    /// while it does.
    later: std::rc::Rc<std::cell::RefCell<CrossCheckLater>>,
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

/// The CPU oracle's cross-check of a workload's first judgement, held back at the caller's
/// request ([`Workload::hold_cross_check`]) until it settles it ([`Workload::settle`]): a
/// timed block does that once its launches are over, so the oracle's host work runs while
/// the next block opens its context rather than before this block's timed launches.
#[derive(Default)]
enum CrossCheckLater {
    /// Cross-check when the judgement is made.
    #[default]
    No,
    /// Hold back the first judgement's cross-check if the device checker passes it.
    Asked,
    /// A first judgement the device checker passed, with the bytes it judged.
    Pending {
        device: Vec<(String, rule::Verdict)>,
        got: Vec<Vec<u8>>,
    },
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

impl std::fmt::Debug for DeclaredWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclaredWorkload")
            .field("kernel", &self.decl.name)
            .field("shape", &self.shape)
            .field("case", &self.case)
            .finish()
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
                        // Every case keeps to the domain: one with no value of the dtype
                        // in it has no input to give.
                        if b.dtype.keys_within([lo, hi]).is_none() {
                            return Err(BackendError::from(format!(
                                "buffers.{name}.range at {at}: [{lo}, {hi}] holds no {} value, so no input can keep to it (domain = true); widen the range",
                                b.dtype
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
            later: Default::default(),
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
        // A held cross-check is of bytes this workload's expected values judge, not its own.
        w.later = Default::default();
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
        w.later = Default::default();
        w
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
    /// floats). A float is the value its parameter's type holds
    /// ([`klab_spec::declared::ScalarSpec::value`]), so that the reference computes with
    /// what the kernel gets.
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
}
