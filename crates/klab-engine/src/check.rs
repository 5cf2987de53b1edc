//! The reference-verification gate (`klab check`): a kernel against its operation's oracle
//! on a size ladder that makes launch bugs fire, with exact inputs first, seeded random
//! inputs next (replay seed printed), two different poison patterns, a determinism check
//! and the operation's properties (transpose is an involution; a sum is invariant under
//! swapping its first and last 99 elements, and linear).

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendError};
use crate::declared;
use crate::timing::validate_once;
use crate::workload::{prepare_launches, Workload, POISON_BYTES};
use klab_core::stats::Rng;
use klab_spec::declared::builtin::OpKind;
use klab_spec::manifest::KernelDecl;
use klab_spec::ops::reduce;

/// One case's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub case: String,
    pub n: u64,
    pub pass: bool,
    pub detail: String,
    /// Not run, and `detail` says why (the index-overflow case on a device too small for
    /// it): it counts as no failure and is printed as SKIP, never as PASS.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
}

impl CaseResult {
    pub fn render(&self) -> String {
        format!(
            "{} {} n={}: {}",
            if self.skipped {
                "SKIP"
            } else if self.pass {
                "PASS"
            } else {
                "FAIL"
            },
            self.case,
            self.n,
            self.detail
        )
    }
}

/// A whole check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub kernel: String,
    pub operation: String,
    pub known_broken: Option<String>,
    pub seed: u64,
    pub cases: Vec<CaseResult>,
}

impl CheckReport {
    /// Every case passed, whatever the kernel's label (what the audit asks).
    pub fn all_cases_pass(&self) -> bool {
        self.cases.iter().all(|c| c.pass)
    }

    /// Every case passed (a known-broken kernel still fails the gate).
    pub fn passed(&self) -> bool {
        self.known_broken.is_none() && self.cases.iter().all(|c| c.pass)
    }

    pub fn failures(&self) -> usize {
        self.cases.iter().filter(|c| !c.pass).count()
    }

    /// The first failing case, if any.
    pub fn first_failure(&self) -> Option<&CaseResult> {
        self.cases.iter().find(|c| !c.pass)
    }

    pub fn render(&self) -> String {
        let mut s = format!(
            "check {} ({}), replay seed {}: {} cases\n",
            self.kernel,
            self.operation,
            self.seed,
            self.cases.len()
        );
        for c in &self.cases {
            s.push_str(&c.render());
            s.push('\n');
        }
        let verdict = if let Some(why) = &self.known_broken {
            // Rejected for its label; say whether the oracle saw the bug too.
            match self.failures() {
                0 => format!(
                    "verdict: REJECTED (known-broken: {why}); the oracle passed all {} cases: this bug is for another gate",
                    self.cases.len()
                ),
                f => format!(
                    "verdict: REJECTED (known-broken: {why}; {f} of {} cases failed)",
                    self.cases.len()
                ),
            }
        } else if self.passed() {
            format!("verdict: PASS ({} cases)", self.cases.len())
        } else {
            format!(
                "verdict: FAIL ({} of {} cases; first: {})",
                self.failures(),
                self.cases.len(),
                self.first_failure().map(|c| c.render()).unwrap_or_default()
            )
        };
        s.push_str(&verdict);
        s.push('\n');
        s
    }
}

/// Options for [`run`].
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Replay seed for the random inputs and scalars.
    pub seed: u64,
    /// Sizes to use instead of the ladder.
    pub sizes: Option<Vec<u64>>,
    /// Whole shapes to use instead of the ladder (`--shape`, checked against the operation).
    pub shapes: Option<Vec<declared::Shape>>,
    /// Only the exact-input case per size (what a sanitizer run needs to exercise the paths).
    pub quick: bool,
    /// The first cases of the plan already ran in a process that died in the last of them
    /// (a fault poisons the CUDA context): announce and run only the cases after these.
    pub resume_after: usize,
}

/// What a running check reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// A case is about to run (its label names the shape, the input and its seed).
    Starting(&'a str),
    /// A case's verdict.
    Done(&'a CaseResult),
}

/// One shape of a check and its workloads in the order they run: (input case, poison
/// byte, scalar index).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedShape {
    pub shape: declared::Shape,
    pub inputs: Vec<(declared::InputCase, u8, usize)>,
}

/// What a check will run, known before any launch: its shapes and workloads, and the seed
/// of the index-overflow case when it ends with one.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckPlan {
    pub shapes: Vec<PlannedShape>,
    /// The exact case: distinct values where every rule is bitwise, else small integers.
    pub exact: declared::InputCase,
    /// Every rule is bitwise or exact (special values run, determinism is required).
    pub bitwise_rules: bool,
    /// Every rule is bitwise (data movement).
    pub moves_data: bool,
    pub overflow_seed: Option<u64>,
}

/// The plan of [`run`] for `decl` under `opts`: the same shapes, inputs and seeds, drawn
/// in the same order, so `klab check --plan` lists exactly what a check runs.
pub fn plan(decl: &KernelDecl, opts: &CheckOptions) -> Result<CheckPlan, BackendError> {
    let op = &decl.op;
    let shapes = match &opts.sizes {
        _ if opts.shapes.is_some() => opts.shapes.clone().expect("some"),
        Some(v) if op.spec.sizes.len() == 1 => {
            let var = op
                .spec
                .sizes
                .keys()
                .next()
                .expect("one size variable")
                .clone();
            let min = op.spec.sizes[&var].min;
            let max = declared::size_cap(op, &var);
            if let Some(n) = v.iter().find(|n| **n < min || **n > max) {
                return Err(BackendError::from(format!(
                    "--sizes: {n} is outside {var}'s range ({min} to {max})"
                )));
            }
            let spec = &op.spec.sizes[&var];
            if let Some(n) = v.iter().find(|n| !spec.admits(**n)) {
                return Err(BackendError::from(format!(
                    "--sizes: {n} is not a multiple of {}, as {var} must be",
                    spec.multiple
                )));
            }
            v.iter()
                .map(|n| declared::Shape::from([(var.clone(), *n as i64)]))
                .collect()
        }
        Some(_) => {
            return Err(BackendError::from(format!(
                "--sizes gives one size; {} has {} size variables (declare values in the manifest)",
                decl.name,
                op.spec.sizes.len()
            )))
        }
        None => declared::ladder(op).map_err(BackendError::from)?,
    };
    let rules = || op.spec.buffers.values().filter_map(|b| b.compare.as_ref());
    let bitwise_rules = rules().all(|c| {
        matches!(
            c,
            klab_spec::rule::RuleSpec::Bitwise | klab_spec::rule::RuleSpec::Exact
        )
    });
    // Distinct values where every output is compared bit for bit (data movement: copy,
    // transpose, gather), so a misplaced element cannot meet an equal value; small integers
    // where a result is computed (a sum must stay exact, a sort must see repeats).
    let moves_data = rules().all(|c| matches!(c, klab_spec::rule::RuleSpec::Bitwise));
    let exact = if moves_data {
        declared::InputCase::Distinct
    } else {
        declared::InputCase::Structural
    };
    let mut rng = Rng::new(opts.seed);
    let mut planned = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let mut inputs = vec![(exact, POISON_BYTES[0], 0usize)];
        if !opts.quick {
            let seed = rng.next_u64() % 1_000_000;
            inputs.push((
                declared::InputCase::Uniform { seed },
                POISON_BYTES[1],
                i + 1,
            ));
            // At the middle shape, the inputs that make other bugs fire.
            if i == shapes.len() / 2 {
                let seed = rng.next_u64() % 1_000_000;
                inputs.push((declared::InputCase::Normal { seed }, POISON_BYTES[0], i + 2));
                inputs.push((declared::InputCase::Large { seed }, POISON_BYTES[1], i + 3));
                inputs.push((declared::InputCase::Constant, POISON_BYTES[0], i + 4));
                if bitwise_rules {
                    inputs.push((declared::InputCase::Special, POISON_BYTES[1], i + 5));
                }
            }
        }
        planned.push(PlannedShape {
            shape: shape.clone(),
            inputs,
        });
    }
    let overflow = opts.sizes.is_none() && opts.shapes.is_none() && !opts.quick;
    Ok(CheckPlan {
        shapes: planned,
        exact,
        bitwise_rules,
        moves_data,
        overflow_seed: overflow.then(|| rng.next_u64() % 1_000_000),
    })
}

impl CheckPlan {
    /// The shape with the least work, where the reference first runs on any machine.
    pub fn smallest(&self, decl: &KernelDecl) -> Option<&PlannedShape> {
        let work = |p: &PlannedShape| shape_work(&decl.op, &p.shape);
        self.shapes
            .iter()
            .min_by(|a, b| work(a).total_cmp(&work(b)))
    }

    /// The plan as `klab check --plan` prints it: a line per shape with its workloads, then
    /// the determinism shapes, the user's data and the index-overflow case.
    pub fn render(&self, decl: &KernelDecl) -> String {
        let op = &decl.op;
        let workloads: usize = self.shapes.iter().map(|s| s.inputs.len()).sum();
        let mut out = format!(
            "check plan: {}: {} shape(s), {workloads} workload(s)\n",
            decl.name,
            self.shapes.len()
        );
        for p in &self.shapes {
            let inputs: Vec<String> = p
                .inputs
                .iter()
                .map(|(c, poison, _)| format!("{}, poison {poison:#04x}", c.describe()))
                .collect();
            out += &format!(
                "  {}: {}\n",
                declared::describe_shape(&p.shape),
                inputs.join("; ")
            );
        }
        let n = self.shapes.len();
        if !self.shapes.is_empty() && self.overflow_seed.is_some() {
            let at: Vec<String> = [n / 2, n - 1]
                .iter()
                .map(|i| declared::describe_shape(&self.shapes[*i].shape))
                .collect();
            out += &format!("  determinism: {}\n", at.join(" and "));
        }
        if self.overflow_seed.is_some() {
            for (i, shape, files) in user_data_cases(op) {
                out += &format!(
                    "  user data: cases[{i}] at {} ({})\n",
                    declared::describe_shape(&shape),
                    files.join(", ")
                );
            }
        }
        if let (Some(seed), Some(base)) = (self.overflow_seed, self.shapes.get(n / 2)) {
            out += &match declared::overflow_shape(
                op,
                &base.shape,
                declared::INDEX_OVERFLOW_ELEMENTS,
            ) {
                Ok(shape) => {
                    let input = if self.moves_data {
                        self.exact
                    } else {
                        declared::InputCase::Uniform { seed }
                    };
                    let sample =
                        match klab_spec::declared::slices::Sample::at(&op.spec, &shape, seed) {
                            Ok(Some(s)) => format!("; {}", s.describe()),
                            Ok(None) => String::new(),
                            Err(why) => format!("; slices: {why}"),
                        };
                    // Sizes the user listed, grown past every listed value: the kernel may
                    // take no larger one, and only a max says so.
                    let past: Vec<String> = shape
                        .iter()
                        .filter(|(k, v)| {
                            let spec = &op.spec.sizes[k.as_str()];
                            spec.max.is_none()
                                && spec
                                    .values
                                    .as_ref()
                                    .is_some_and(|vals| vals.iter().all(|x| (*x as i64) < **v))
                        })
                        .map(|(k, _)| format!("sizes.{k}"))
                        .collect();
                    let hint = if past.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "\n    past every listed value of {}: give a max where the kernel takes no larger size",
                            past.join(", ")
                        )
                    };
                    format!(
                        "  index overflow: {}, {}{sample} (run where memory, the launch limits and the reference's time allow){hint}\n",
                        declared::describe_shape(&shape),
                        input.describe()
                    )
                }
                Err(why) => format!("  index overflow: not applicable: {why}\n"),
            };
        }
        out
    }
}

/// What [`reference_dry_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DryRun {
    /// The reference computed the smallest shape (or the plan has no shape).
    Ran,
    /// Not run, and why: this machine cannot hold the smallest shape.
    NotRun(String),
    /// It ran, and the operation's `slices` do not hold for it (why): the index-overflow
    /// case will not be run on a sample.
    SlicesDoNotHold(String),
}

/// A dry run whose buffers take at least this many bytes is announced before it starts: it
/// can take a minute on one core.
pub const DRY_RUN_ANNOUNCED_BYTES: u64 = 256 << 20;

/// The line to print before [`reference_dry_run`] when it will run and its buffers take
/// [`DRY_RUN_ANNOUNCED_BYTES`] or more (None: it is quick, this machine cannot hold it, or
/// there is nothing to run).
pub fn dry_run_announcement(decl: &KernelDecl, plan: &CheckPlan) -> Option<String> {
    let at = &plan.smallest(decl)?.shape;
    let bytes = declared::slot_bytes_at(&decl.op, at)?;
    let need = bytes.saturating_mul(declared::host_copies(&decl.op));
    let fits = memory_refusal(0, u64::MAX, Some(need)).is_none();
    (fits && bytes >= DRY_RUN_ANNOUNCED_BYTES).then(|| {
        format!(
            "running the reference once at {} ({:.1} GB of buffers) without a GPU",
            declared::describe_shape(at),
            bytes as f64 / 1e9
        )
    })
}

/// The reference run once on the plan's smallest shape with the exact input: whether it
/// builds and computes without a GPU (`klab check` does this before it asks for a device,
/// so a reference that crashes or refuses its inputs is known on any machine). A shape
/// this machine's memory cannot hold is not run ([`DryRun::NotRun`]).
pub fn reference_dry_run(
    decl: &KernelDecl,
    reference: std::rc::Rc<dyn crate::reference::Reference>,
    plan: &CheckPlan,
) -> Result<DryRun, BackendError> {
    let Some(smallest) = plan.smallest(decl) else {
        return Ok(DryRun::Ran);
    };
    let at = declared::describe_shape(&smallest.shape);
    let w = declared::DeclaredWorkload::new(
        decl.clone(),
        smallest.shape.clone(),
        plan.exact,
        0,
        reference,
    )?;
    if let Some(why) = memory_refusal(0, u64::MAX, Some(w.reference_host_bytes())) {
        return Ok(DryRun::NotRun(format!(
            "at {at}, the smallest shape, it {why}"
        )));
    }
    w.prepare()
        .map_err(|e| BackendError::from(format!("{}: at {at}: {}", decl.name, e.message)))?;
    let shapes: Vec<declared::Shape> = plan.shapes.iter().map(|p| p.shape.clone()).collect();
    let wrong = plan
        .overflow_seed
        .and_then(|seed| slices_problem(decl, &w.reference_rc(), &shapes, seed));
    Ok(wrong.map_or(DryRun::Ran, DryRun::SlicesDoNotHold))
}

/// The user's own data (`[kernel.op] cases` with `inputs`), read as the check will read
/// it: each file's dtype, element count at its case's shape and domain. A case whose
/// inputs the host could not hold is left to the check itself.
pub fn check_user_data(
    decl: &KernelDecl,
    reference: &std::rc::Rc<dyn crate::reference::Reference>,
) -> Result<(), BackendError> {
    for (i, case) in decl.op.spec.cases.iter().enumerate() {
        if case.inputs.is_empty() {
            continue;
        }
        let shape: declared::Shape = case
            .shape
            .iter()
            .map(|(k, v)| (k.clone(), *v as i64))
            .collect();
        let w = declared::DeclaredWorkload::new(
            decl.clone(),
            shape,
            declared::InputCase::Data { case: i },
            0,
            reference.clone(),
        )?;
        if memory_refusal(0, u64::MAX, Some(w.reference_host_bytes())).is_some() {
            continue;
        }
        w.initial_bytes()
            .map_err(|e| BackendError::from(format!("{}: cases[{i}]: {}", decl.name, e.message)))?;
    }
    Ok(())
}

/// Why the operation's declared `slices` do not hold for its reference, if they do not
/// ([`declared::DeclaredWorkload::slices_disagree`]). Tried only where the index-overflow
/// case (grown from `shapes`' middle, drawn from `seed`) would sample slices, at the ladder
/// shape with the most slices (the least work among those), raised to at least 4 slices, on
/// random inputs.
fn slices_problem(
    decl: &KernelDecl,
    reference: &std::rc::Rc<dyn crate::reference::Reference>,
    shapes: &[declared::Shape],
    seed: u64,
) -> Option<String> {
    let op = &decl.op;
    let var = op.spec.slices.as_ref()?;
    let base = shapes.get(shapes.len() / 2)?;
    let overflow = declared::overflow_shape(op, base, declared::INDEX_OVERFLOW_ELEMENTS).ok()?;
    klab_spec::declared::slices::Sample::at(&op.spec, &overflow, seed).ok()??;
    let count = |s: &declared::Shape| s.get(var).copied().unwrap_or(0);
    let mut probe = shapes
        .iter()
        .min_by(|a, b| {
            count(b)
                .cmp(&count(a))
                .then(shape_work(op, a).total_cmp(&shape_work(op, b)))
        })?
        .clone();
    // At least 4 slices (the test needs a strict subset of them), a number the declaration
    // admits: the whole shape's reference runs there too.
    let at_least = u64::try_from(count(&probe).max(4)).unwrap_or(4);
    let raised = klab_spec::declared::slices::admitted_count(&op.spec, var, at_least)?;
    probe.insert(var.clone(), i64::try_from(raised).ok()?);
    let input = declared::InputCase::Uniform { seed };
    let w =
        declared::DeclaredWorkload::new(decl.clone(), probe, input, 0, reference.clone()).ok()?;
    if memory_refusal(0, u64::MAX, Some(w.reference_host_bytes())).is_some() {
        return None;
    }
    w.slices_disagree()
}

/// Check a kernel against `reference` on every shape of its operation's ladder
/// ([`declared::ladder`], or `opts.sizes` as values of its one size variable): per shape,
/// exact input under the first poison (distinct values where every rule is bitwise or
/// exact), random input (seed printed) under the second, and at two shapes a determinism
/// run (required bitwise where every rule is bitwise or exact; reported otherwise); then
/// the user's data, the index-overflow shape and the operation's properties. Each verdict
/// names its rule; a failure its element and both values. A built-in operation is checked
/// exactly so, with its CPU oracle as the reference ([`crate::oracle`]).
pub fn run<B: Backend>(
    backend: &mut B,
    decl: &KernelDecl,
    kernels: &[B::Kernel],
    reference: std::rc::Rc<dyn crate::reference::Reference>,
    opts: &CheckOptions,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<CheckReport, BackendError> {
    let plan = plan(decl, opts)?;
    let shapes: Vec<declared::Shape> = plan.shapes.iter().map(|p| p.shape.clone()).collect();
    let determinism_at: Vec<usize> = [shapes.len() / 2, shapes.len().saturating_sub(1)].into();
    let mut run = Run {
        backend,
        decl,
        kernels,
        reference,
        opts,
        progress,
        announced: 0,
        cases: Vec::new(),
    };
    for (i, planned) in plan.shapes.iter().enumerate() {
        let determinism = !opts.quick && determinism_at.contains(&i);
        run.ladder_shape(planned, plan.exact, determinism, plan.bitwise_rules)?;
    }
    run.user_data()?;
    // Only the default ladder ends with the index-overflow case.
    if let Some(seed) = plan.overflow_seed {
        run.index_overflow(&shapes, seed, plan.moves_data, plan.exact)?;
    }
    if !opts.quick {
        let sizes: Vec<u64> = determinism_at
            .iter()
            .filter_map(|i| shapes.get(*i))
            .filter_map(|s| match s.values().collect::<Vec<_>>()[..] {
                [n] => Some(*n as u64),
                _ => None,
            })
            .collect();
        properties(
            run.backend,
            decl,
            kernels,
            &sizes,
            run.progress,
            &mut run.cases,
        )?;
    }
    Ok(CheckReport {
        kernel: decl.name.clone(),
        operation: format!(
            "{}, reference: {}",
            decl.operation.name(),
            run.reference.describe()
        ),
        known_broken: decl.known_broken.clone(),
        seed: opts.seed,
        cases: run.cases,
    })
}

/// One check on its way: what every case runs with, and the cases so far.
struct Run<'a, B: Backend> {
    backend: &'a mut B,
    decl: &'a KernelDecl,
    kernels: &'a [B::Kernel],
    reference: std::rc::Rc<dyn crate::reference::Reference>,
    opts: &'a CheckOptions,
    progress: &'a mut dyn FnMut(Progress<'_>),
    /// Cases are counted as they are announced, the same in every process (the plan fixes
    /// them), so a fresh process resumes after the case its predecessor died in.
    announced: usize,
    cases: Vec<CaseResult>,
}

impl<B: Backend> Run<'_, B> {
    fn push(&mut self, c: CaseResult) {
        (self.progress)(Progress::Done(&c));
        self.cases.push(c);
    }

    /// Announce the case `label`; whether it runs in this process (a resumed check skips
    /// the cases its predecessors ran).
    fn starting(&mut self, label: &str) -> bool {
        self.announced += 1;
        let runs = self.announced > self.opts.resume_after;
        if runs {
            (self.progress)(Progress::Starting(label));
        }
        runs
    }

    fn workload(
        &self,
        shape: declared::Shape,
        input: declared::InputCase,
        scalar_index: usize,
    ) -> Result<declared::DeclaredWorkload, BackendError> {
        declared::DeclaredWorkload::new(
            self.decl.clone(),
            shape,
            input,
            scalar_index,
            self.reference.clone(),
        )
    }

    /// One ladder shape's cases (each input under its poison), then, where asked, two
    /// launches of the exact input compared with each other.
    fn ladder_shape(
        &mut self,
        planned: &PlannedShape,
        exact: declared::InputCase,
        determinism: bool,
        bitwise_rules: bool,
    ) -> Result<(), BackendError> {
        let PlannedShape { shape, inputs } = planned;
        let at = declared::describe_shape(shape);
        let mut twice = None;
        for &(input, poison, scalar_index) in inputs {
            let what = format!("{}, poison {poison:#04x}", input.describe());
            let label = format!("{at}: {what}");
            let w = match self.workload(shape.clone(), input, scalar_index) {
                Ok(w) => w,
                Err(e) => {
                    self.push(fail(label, 0, e.message));
                    break;
                }
            };
            if input == exact && determinism {
                twice = Some(w.clone());
            }
            if !self.starting(&label) {
                continue;
            }
            let (result, bufs) =
                declared_case(self.backend, self.kernels, &w, &at, &what, poison, false)?;
            self.push(result);
            if bufs.is_none() {
                twice = None;
                break;
            }
        }
        let label = format!("{at}: determinism");
        if let Some(w) = twice.filter(|_| self.starting(&label)) {
            let c = self.determinism(&w, label, bitwise_rules)?;
            self.push(c);
        }
        Ok(())
    }

    /// Two launches of `w`'s exact input, each on a slot of its own (an inout buffer starts
    /// from klab's bytes both times), compared with each other.
    fn determinism(
        &mut self,
        w: &declared::DeclaredWorkload,
        case: String,
        bitwise_rules: bool,
    ) -> Result<CaseResult, BackendError> {
        let backend = &mut *self.backend;
        // The cases before it opted the kernel in where it needs that; a check resumed at
        // this case ran none of them in this process.
        if let Err(e) = prepare_launches(backend, w, self.kernels) {
            return Ok(CaseResult {
                skipped: false,
                case,
                n: w.n(),
                pass: false,
                detail: format!("launch plan: {}", plan_refusal(e)?),
            });
        }
        let mut outputs = Vec::new();
        for poison in POISON_BYTES {
            let mut bufs = w.create_slot(backend, 0)?;
            w.poison(backend, &mut bufs, poison)?;
            backend.launch_all(&w.launches::<B>(self.kernels, &bufs))?;
            backend.synchronize()?;
            outputs.push(w.output(backend, &bufs)?);
        }
        let (first, again) = (&outputs[0], &outputs[1]);
        let differ = first.iter().zip(again).filter(|(a, b)| a != b).count();
        Ok(CaseResult {
            skipped: false,
            case,
            n: w.n(),
            pass: differ == 0 || !bitwise_rules,
            detail: format!(
                "two runs of the exact input, {differ} of {} output words differ{}",
                first.len(),
                if bitwise_rules {
                    " (bitwise rules: required equal)"
                } else {
                    " (tolerance rules: reported, not required)"
                }
            ),
        })
    }

    /// The user's data, each at its case's shape (not when the shapes were given).
    fn user_data(&mut self) -> Result<(), BackendError> {
        if self.opts.sizes.is_some() || self.opts.shapes.is_some() {
            return Ok(());
        }
        let op = self.decl.op.clone();
        for (i, shape, files) in user_data_cases(&op) {
            let at = declared::describe_shape(&shape);
            let what = format!(
                "user data (cases[{i}]: {}), poison {:#04x}",
                files.join(", "),
                POISON_BYTES[0]
            );
            match self.workload(shape, declared::InputCase::Data { case: i }, i) {
                Err(e) => self.push(fail(format!("{at}: {what}"), 0, e.message)),
                Ok(w) => {
                    if !self.starting(&format!("{at}: {what}")) {
                        continue;
                    }
                    let (c, _) = declared_case(
                        self.backend,
                        self.kernels,
                        &w,
                        &at,
                        &what,
                        POISON_BYTES[0],
                        false,
                    )?;
                    self.push(c);
                }
            }
        }
        Ok(())
    }

    /// The index-overflow case: the smallest shape past 2^31 elements grown from the
    /// ladder's middle, where an offset computed in 32-bit arithmetic wraps; skipped, and
    /// said so, when the operation cannot form it, memory or the reference's cost does not
    /// allow it, or its declared slices do not hold for the reference.
    fn index_overflow(
        &mut self,
        shapes: &[declared::Shape],
        seed: u64,
        moves_data: bool,
        exact: declared::InputCase,
    ) -> Result<(), BackendError> {
        let skip = |case: String, detail: String| CaseResult {
            skipped: true,
            case,
            n: 0,
            pass: true,
            detail,
        };
        // A sample of slices is trusted only once the reference agrees on them alone.
        if let Some(why) = slices_problem(self.decl, &self.reference, shapes, seed) {
            self.push(skip(
                "index overflow".into(),
                format!("not applicable: {why}"),
            ));
            return Ok(());
        }
        let op = self.decl.op.clone();
        let base = &shapes[shapes.len() / 2];
        let shape = match declared::overflow_shape(&op, base, declared::INDEX_OVERFLOW_ELEMENTS) {
            Ok(shape) => shape,
            Err(why) => {
                self.push(skip(
                    "index overflow".into(),
                    format!("not applicable: {why}"),
                ));
                return Ok(());
            }
        };
        let at = format!("index overflow, {}", declared::describe_shape(&shape));
        // Distinct values are filled in parallel and catch a wrapped offset at any element;
        // arithmetic gets random values.
        let input = if moves_data {
            exact
        } else {
            declared::InputCase::Uniform { seed }
        };
        let what = format!("{}, poison {:#04x}", input.describe(), POISON_BYTES[0]);
        let label = format!("{at}: {what}");
        let made = self.workload(shape, input, 0).and_then(|w| w.sampled(seed));
        // The reference's FLOPs: those of the slices it computes.
        let flops = made.as_ref().ok().and_then(|w| {
            let f = op.spec.flops.as_ref()?;
            f.eval_u64(&w.reference_shape()).ok()
        });
        let w = match made {
            // A shape klab chose that the operation cannot form (a launch dimension past 32
            // bits, say) says nothing about the kernel.
            Err(e) => {
                self.push(skip(label, format!("not applicable: {}", e.message)));
                return Ok(());
            }
            Ok(_) if flops.is_some_and(|f| f > max_overflow_flops()) => {
                self.push(skip(
                    label,
                    format!(
                        "not run: {:.1e} FLOPs at this shape; the reference would run for minutes (limit {:.1e}: {MAX_OVERFLOW_FLOPS_PER_CORE:.0e} on each of {} cores)",
                        flops.unwrap_or(0) as f64,
                        max_overflow_flops() as f64,
                        klab_core::par::cores()
                    ),
                ));
                return Ok(());
            }
            Ok(w) => w,
        };
        let too_slow = not_runnable_here(self.backend, self.kernels, &w)?
            .map(|why| format!("not run: {why}"))
            .or_else(|| {
                let goal = w.reference_shape();
                reference_too_slow(self.decl, &self.reference, base, &goal, input)
            });
        if let Some(why) = too_slow {
            self.push(skip(label, why));
            return Ok(());
        }
        if !self.starting(&label) {
            return Ok(());
        }
        let t0 = std::time::Instant::now();
        let (mut c, _) = declared_case(
            self.backend,
            self.kernels,
            &w,
            &at,
            &what,
            POISON_BYTES[0],
            true,
        )?;
        if let Some(note) = w.sample_note() {
            c.detail += &format!("; {note}");
        }
        c.detail += &format!(" ({:.1} s)", t0.elapsed().as_secs_f64());
        self.push(c);
        Ok(())
    }
}

/// The operation's cases that bring data of their own: each one's index, shape and
/// `buffer = file` list.
fn user_data_cases(
    op: &klab_spec::declared::DeclaredOp,
) -> impl Iterator<Item = (usize, declared::Shape, Vec<String>)> + '_ {
    op.spec
        .cases
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.inputs.is_empty())
        .map(|(i, c)| {
            let shape: declared::Shape = c
                .shape
                .iter()
                .map(|(k, v)| (k.clone(), *v as i64))
                .collect();
            let files = c.inputs.iter().map(|(b, p)| format!("{b} = {p}")).collect();
            (i, shape, files)
        })
}

/// A launch plan the device cannot make, as a case's failure; the driver refusing an opt-in
/// the plan was checked to allow is klab's error (or the driver's), never the kernel's.
fn plan_refusal(e: crate::workload::LaunchError) -> Result<String, BackendError> {
    match e {
        crate::workload::LaunchError::OptIn { error, .. } => Err(BackendError {
            message: format!(
                "opting the kernel in to more shared memory: {}",
                error.message
            ),
            fault: crate::backend::Fault::Klab,
        }),
        plan => Ok(plan.to_string()),
    }
}

/// Why a workload at a shape klab chose cannot run here, if it cannot: its device or host
/// memory, or a launch past the device's limits.
fn not_runnable_here<B: Backend>(
    backend: &mut B,
    kernels: &[B::Kernel],
    w: &declared::DeclaredWorkload,
) -> Result<Option<String>, BackendError> {
    let free = backend.free_memory_bytes()?;
    if let Some(why) = memory_refusal(w.slot_bytes(), free, Some(w.host_bytes(backend))) {
        return Ok(Some(why));
    }
    Ok(prepare_launches(backend, w, kernels)
        .err()
        .map(|e| format!("the launch at this shape: {e}")))
}

/// Why a workload cannot run here: `device` bytes past the `free` device memory, or (when
/// `host` is given) more host memory than is available. None: it fits.
fn memory_refusal(device: u64, free: u64, host: Option<u64>) -> Option<String> {
    let gb = |b: u64| format!("{:.1} GB", b as f64 / 1e9);
    if device > free {
        return Some(format!(
            "needs {} of device memory; {} is free",
            gb(device),
            gb(free)
        ));
    }
    match (host, klab_core::device::host_available_bytes()) {
        (Some(need), Some(have)) if need > have => Some(format!(
            "needs about {} of host memory; {} is available",
            gb(need),
            gb(have)
        )),
        _ => None,
    }
}

/// The index-overflow case is skipped when the reference would run longer than this at
/// that shape, as estimated from its time at the largest shape of the ladder.
pub const MAX_OVERFLOW_REFERENCE_S: f64 = 120.0;

/// Shapes at these fractions of the index-overflow shape's limit time the reference, in
/// turn, until one takes long enough to measure ([`reference_too_slow`]).
const OVERFLOW_CALIBRATION: [u64; 4] = [65536, 4096, 256, 16];

/// The shortest calibration timing whose rate against the one before it can skip the
/// index-overflow case (see [`reference_too_slow`]).
const DECISIVE_TIMING_S: f64 = 0.25;

/// Why the reference would take too long at `shape` (the index-overflow shape, or the
/// sample of its slices the reference sees), if it would: it is
/// timed (inputs made, reference run) at shapes a 65536th, a 4096th, a 256th and a 16th
/// of the way there, each grown from `base` like the overflow shape, until one takes half a
/// second or the rate between the last two timings, carried to this shape, passes
/// [`MAX_OVERFLOW_REFERENCE_S`]. The ladder's shapes are too small to time (microseconds
/// scaled a millionfold made estimates of days); these timings cost at most about a
/// fifteenth of the case itself.
fn reference_too_slow(
    decl: &KernelDecl,
    reference: &std::rc::Rc<dyn crate::reference::Reference>,
    base: &declared::Shape,
    shape: &declared::Shape,
    input: declared::InputCase,
) -> Option<String> {
    let op = &decl.op;
    let limit = declared::INDEX_OVERFLOW_ELEMENTS;
    let goal = shape_work(op, shape);
    // The previous timing as (work, seconds): the rate between two timings leaves a fixed
    // cost (a command reference's process start) unmultiplied.
    let mut previous: Option<(f64, f64)> = None;
    for d in OVERFLOW_CALIBRATION {
        let Ok(at) = declared::overflow_shape(op, base, limit / d) else {
            continue;
        };
        // A reference on a sample of slices may see less than a calibration shape: what
        // was timed on the way (if anything) then bounds it.
        if shape_work(op, &at) >= goal {
            break;
        }
        let Ok(w) =
            declared::DeclaredWorkload::new(decl.clone(), at.clone(), input, 0, reference.clone())
        else {
            continue;
        };
        let t0 = std::time::Instant::now();
        if let Err(e) = w.prepare() {
            return Some(format!(
                "not run: the reference failed at {}, on the way to this shape: {}",
                declared::describe_shape(&at),
                e.message
            ));
        }
        let (work, t) = (shape_work(op, &at).max(1.0), t0.elapsed().as_secs_f64());
        let estimate = match previous {
            Some((w0, t0)) if work > w0 => t + ((t - t0) / (work - w0)).max(0.0) * (goal - work),
            _ => t * goal / work,
        };
        // One timing alone says little unless it is long itself, and a pair only once the
        // later timing is long enough that a busy machine's noise (tens of milliseconds)
        // cannot make the rate; the last calibration shape decides with what it has.
        let last = d == OVERFLOW_CALIBRATION[OVERFLOW_CALIBRATION.len() - 1];
        let decisive = t >= 1.0 || (previous.is_some() && (t >= DECISIVE_TIMING_S || last));
        if estimate > MAX_OVERFLOW_REFERENCE_S && decisive {
            return Some(format!(
                "not run: the reference took {t:.2} s at {}; at this shape it would take about {estimate:.0} s (limit {MAX_OVERFLOW_REFERENCE_S:.0} s)",
                declared::describe_shape(&at)
            ));
        }
        if t >= 0.5 {
            break;
        }
        previous = Some((work, t));
    }
    None
}

/// A measure of the work at `shape` that grows at least as fast as a reference's cost for
/// the operations klab sees: the larger of the largest buffer's length and the product of
/// the size variables (a GEMM's M N K, where the output holds only M N).
fn shape_work(op: &klab_spec::declared::DeclaredOp, shape: &declared::Shape) -> f64 {
    let product: f64 = shape.values().map(|v| (*v).max(1) as f64).product();
    let largest = declared::largest_buffer(op, shape).unwrap_or(0) as f64;
    product.max(largest)
}

/// The index-overflow case is skipped, before any timing, above this many FLOPs for each of
/// the host's cores: a reference at a few GFLOP/s per core would take minutes even on all of
/// them. Below it the reference's own timings decide (`reference_too_slow`), so a reference
/// that spreads its loops over the cores (OpenMP) is judged by what it does.
pub const MAX_OVERFLOW_FLOPS_PER_CORE: u64 = 100_000_000_000;

/// [`MAX_OVERFLOW_FLOPS_PER_CORE`] on this host's cores.
fn max_overflow_flops() -> u64 {
    MAX_OVERFLOW_FLOPS_PER_CORE.saturating_mul(klab_core::par::cores() as u64)
}

fn fail(case: String, n: u64, detail: String) -> CaseResult {
    CaseResult {
        skipped: false,
        case,
        n,
        pass: false,
        detail,
    }
}

/// One launch of a declared workload at shape `at` (`what`: its input and poison) and its
/// verdicts: the case and, when the kernel ran, its buffers (None: nothing more to do at
/// this shape, e.g. an empty shape or a plan the device refuses). `skip_when_too_big`
/// turns a workload larger than the device's free memory or the host's into a skipped
/// case (the index-overflow case) instead of a failure.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn declared_case<B: Backend>(
    backend: &mut B,
    kernels: &[B::Kernel],
    w: &declared::DeclaredWorkload,
    at: &str,
    what: &str,
    poison: u8,
    skip_when_too_big: bool,
) -> Result<(CaseResult, Option<Vec<B::Buffer>>), BackendError> {
    let label = format!("{at}: {what}");
    if w.empty() {
        let c = CaseResult {
            skipped: false,
            case: label,
            n: 0,
            pass: true,
            detail: "no output elements, nothing to launch".into(),
        };
        return Ok((c, None));
    }
    // A launch that covers nothing while an output has elements is a failure.
    if let Some(why) = w.launch_covers_nothing() {
        return Ok((fail(label, w.n(), why), None));
    }
    let skip = |why: String| CaseResult {
        skipped: true,
        case: label.clone(),
        n: w.n(),
        pass: true,
        detail: format!("not run: {why}"),
    };
    if skip_when_too_big {
        // klab chose the shape: memory or a launch the device cannot make there is not
        // the kernel's failure.
        if let Some(why) = not_runnable_here(backend, kernels, w)? {
            return Ok((skip(why), None));
        }
    } else {
        let free = backend.free_memory_bytes()?;
        if let Some(why) = memory_refusal(w.slot_bytes(), free, None) {
            return Ok((fail(label, w.n(), why), None));
        }
        // This machine's host memory is not the kernel's failure: an error, before any
        // allocation the kernel's overcommit would let through and then kill.
        if let Some(why) = memory_refusal(0, u64::MAX, Some(w.host_bytes(backend))) {
            return Err(BackendError::from(format!(
                "{label}: this machine cannot run the case: it {why}"
            )));
        }
        if let Err(e) = prepare_launches(backend, w, kernels) {
            return Ok((
                fail(format!("{at}: launch plan"), w.n(), plan_refusal(e)?),
                None,
            ));
        }
    }
    // Likewise a reference that cannot compute the expected values at that shape (a
    // command reference past its timeout, say): said, not a failure of the kernel.
    if skip_when_too_big && !w.inputs_on_device(backend) {
        if let Err(e) = w.prepare() {
            return Ok((skip(e.message), None));
        }
    }
    let mut bufs = w.create_slot(backend, 0)?;
    w.poison(backend, &mut bufs, poison)?;
    backend.launch_all(&w.launches::<B>(kernels, &bufs))?;
    backend.synchronize()?;
    let verdicts = w.judge(backend, &bufs)?;
    let pass = verdicts.iter().all(|(_, v)| v.passed());
    let c = CaseResult {
        skipped: false,
        case: label,
        n: w.n(),
        pass,
        detail: w.describe_verdicts(&verdicts),
    };
    Ok((c, Some(bufs)))
}

/// The operation's own properties, checked beside the oracle: a transpose is an
/// involution (the kernel applied to its own output gives back its input); a sum is
/// invariant under swapping its first and last 99 elements, and linear.
fn properties<B: Backend>(
    backend: &mut B,
    decl: &KernelDecl,
    kernels: &[B::Kernel],
    determinism_at: &[u64],
    progress: &mut dyn FnMut(Progress<'_>),
    cases: &mut Vec<CaseResult>,
) -> Result<(), BackendError> {
    let mut push = |c: CaseResult, cases: &mut Vec<CaseResult>| {
        progress(Progress::Done(&c));
        cases.push(c);
    };
    match decl.operation {
        OpKind::Transpose => {
            for &n in determinism_at {
                push(involution(backend, decl, kernels, n)?, cases);
            }
        }
        OpKind::ReduceSum => {
            let n = reduce::BIG_N as usize;
            let mut sum =
                |x: &[f32]| -> Result<f32, String> { device_sum(backend, decl, kernels, x) };
            let x = reduce::exact_input(n);
            for t in [
                reduce::swap_ends_check(&mut sum, &x),
                reduce::linearity_check(&mut sum, &x),
            ] {
                let c = CaseResult {
                    skipped: false,
                    case: t.name.clone(),
                    n: t.n,
                    pass: t.pass,
                    detail: t.detail.clone(),
                };
                push(c, cases);
            }
        }
        OpKind::Copy | OpKind::Triad | OpKind::Declared => {}
    }
    Ok(())
}

/// transpose(transpose(x)) == x under the output's rule: the kernel applied to its own
/// output.
fn involution<B: Backend>(
    backend: &mut B,
    decl: &KernelDecl,
    kernels: &[B::Kernel],
    n: u64,
) -> Result<CaseResult, BackendError> {
    let w = declared::DeclaredWorkload::builtin(decl.clone(), n, declared::InputCase::Distinct, 0)?;
    let (Some(out), Some(input)) = (w.buffer_index("out"), w.buffer_index("in")) else {
        return Err(BackendError::from(
            "a transpose has buffers out and in".to_string(),
        ));
    };
    let mut bufs = w.create_slot(backend, 0)?;
    validate_once(backend, &w, kernels, &mut bufs, 0, POISON_BYTES[0])?;
    // [out, in] -> [in, out]: the second launch reads the first launch's output and
    // writes over the (poisoned) original input buffer.
    bufs.swap(out, input);
    backend.fill_bytes(&mut bufs[out], POISON_BYTES[1])?;
    backend.launch_all(&w.launches::<B>(kernels, &bufs))?;
    backend.synchronize()?;
    let original = w.initial_bytes()?[input].clone();
    let v = w.compare_buffer(backend, &bufs, out, &original)?;
    Ok(CaseResult {
        skipped: false,
        case: "involution".into(),
        n,
        pass: v.passed(),
        detail: format!(
            "transpose(transpose(x)) vs x: {} of {} elements differ ({})",
            v.failures, v.elements, v.rule
        ),
    })
}

/// The kernel's sum of `x`: launch, fold the partials on the host in block order in
/// float32. A launch of zero blocks (drop-tail below one block) is an error: nothing runs.
pub fn device_sum<B: Backend>(
    backend: &mut B,
    decl: &KernelDecl,
    kernels: &[B::Kernel],
    x: &[f32],
) -> Result<f32, String> {
    let run = |backend: &mut B| -> Result<f32, BackendError> {
        let w = declared::DeclaredWorkload::builtin(
            decl.clone(),
            x.len() as u64,
            declared::InputCase::Structural,
            0,
        )?;
        if w.plans()[0].grid.x == 0 && !x.is_empty() {
            return Err(BackendError::from(format!(
                "launch of 0 blocks for n = {}: nothing runs",
                x.len()
            )));
        }
        let input = w
            .buffer_index("in")
            .ok_or_else(|| BackendError::from("a sum has an input buffer in".to_string()))?;
        let mut inputs = vec![Vec::new(); w.initial_bytes()?.len()];
        inputs[input] = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let w = w.with_inputs(inputs)?;
        let mut bufs = w.create_slot(backend, 0)?;
        validate_once(backend, &w, kernels, &mut bufs, 0, POISON_BYTES[0])?;
        // The partials of the blocks the launch ran, folded in block order: a grid that
        // rounds down leaves the tail out of the sum (the reduction lab's bug), where the
        // contract's check sees its last partial still poisoned.
        let raw = w.output(backend, &bufs)?;
        let launched = w.plans()[0].grid.x as usize;
        Ok(raw
            .iter()
            .take(launched)
            .map(|b| f32::from_bits(*b))
            .fold(0.0f32, |a, b| a + b))
    };
    run(backend).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    /// A plan past the device's limits is the case's failure; the driver refusing the
    /// opt-in the plan was checked to allow is klab's error, never a verdict on the kernel.
    #[test]
    fn a_refused_opt_in_is_an_error_and_a_plan_past_the_limits_a_failure() {
        use crate::workload::LaunchError;
        let plan = LaunchError::Plan {
            entry: None,
            error: klab_spec::plan::PlanError::ZeroDimension {
                what: "grid",
                dims: klab_core::device::Dim3::new(0, 1, 1),
            },
        };
        assert!(super::plan_refusal(plan).unwrap().contains("grid"));
        let opt_in = LaunchError::OptIn {
            entry: None,
            error: crate::backend::BackendError::from("CUDA_ERROR_INVALID_VALUE".to_string()),
        };
        let e = super::plan_refusal(opt_in).unwrap_err();
        assert_eq!(e.fault, crate::backend::Fault::Klab);
        assert!(
            e.message.contains("CUDA_ERROR_INVALID_VALUE"),
            "{}",
            e.message
        );
    }

    /// A known-broken kernel whose bug the oracle cannot see (a race, an over-read) is
    /// rejected for its label, and its verdict says the oracle passed it rather than
    /// "0 of N cases failed" beside REJECTED.
    #[test]
    fn a_labelled_bug_the_oracle_passes_says_so() {
        let case = |pass| super::CaseResult {
            case: "exact input".into(),
            n: 33,
            pass,
            detail: String::new(),
            skipped: false,
        };
        let mut r = super::CheckReport {
            kernel: "k".into(),
            operation: "declared".into(),
            known_broken: Some("a race".into()),
            seed: 1,
            cases: vec![case(true), case(true)],
        };
        assert!(r.render().ends_with(
            "verdict: REJECTED (known-broken: a race); the oracle passed all 2 cases: this bug is for another gate\n"
        ));
        r.cases[1].pass = false;
        assert!(r
            .render()
            .ends_with("verdict: REJECTED (known-broken: a race; 1 of 2 cases failed)\n"));
    }
    use super::*;
    use crate::backend::host::{HostArg, HostBackend};
    fn resolve(
        spec: &str,
    ) -> Result<(klab_spec::manifest::Manifest, KernelDecl), klab_spec::registry::RegistryError>
    {
        klab_spec::registry::resolve(spec, klab_spec::registry::Scope::Audit)
    }

    /// A declared 1-D copy `k(x, y, n)`, n passed as `n_type`.
    fn copy_manifest(n_type: &str) -> klab_spec::manifest::Manifest {
        copy_manifest_of(n_type, "f32")
    }

    /// [`copy_manifest`] of `elem` elements.
    fn copy_manifest_of(n_type: &str, elem: &str) -> klab_spec::manifest::Manifest {
        copy_manifest_with(n_type, elem, "")
    }

    /// [`copy_manifest_of`] with `extra` lines in the op table.
    fn copy_manifest_with(n_type: &str, elem: &str, extra: &str) -> klab_spec::manifest::Manifest {
        let text = format!(
            r#"
source = "k.cu"
[[kernel]]
name = "k"
entry = "k"
operation = "declared"
params = ["x", "y", "n:{n_type}"]
[kernel.op]
grid = ["ceil_div(n, 32)"]
block = ["32"]
useful_bytes = "8 * n"
reference = {{ c = "r.c:r" }}
{extra}
sizes.n = {{}}
buffers.x = {{ dtype = "{elem}", len = "n", role = "in" }}
buffers.y = {{ dtype = "{elem}", len = "n", role = "out", compare = "bitwise" }}
"#
        );
        klab_spec::manifest::parse(
            "m.toml",
            &text,
            klab_spec::manifest::Files::Given(&|_| {
                Ok((
                    "k.cu".into(),
                    klab_spec::testing::stand_in_source(&text).into(),
                ))
            }),
        )
        .unwrap()
    }

    /// The host stand-in for [`copy_manifest`]'s kernel.
    fn host_copy(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let [HostArg::Buffer(x), HostArg::Buffer(y), _] = a else {
            panic!()
        };
        let v = mem[*x].clone();
        mem[*y].copy_from_slice(&v);
    }

    #[test]
    fn a_dry_run_this_machine_cannot_hold_is_said_and_a_large_one_announced() {
        struct Copy;
        impl crate::reference::Reference for Copy {
            fn run(
                &self,
                _: &declared::Shape,
                b: &mut [&mut [u8]],
                _: &[i64],
                _: &[f64],
            ) -> Result<(), String> {
                let x = b[0].to_vec();
                b[1].copy_from_slice(&x);
                Ok(())
            }
            fn describe(&self) -> String {
                "a copy".into()
            }
        }
        let dry = |elem: &str, n: i64, announced: &mut Vec<String>| {
            let m = copy_manifest_of("u64", elem);
            let decl = &m.kernels[0];
            let opts = CheckOptions {
                seed: 1,
                sizes: None,
                shapes: Some(vec![declared::Shape::from([("n".to_string(), n)])]),
                quick: false,
                resume_after: 0,
            };
            let p = plan(decl, &opts).unwrap();
            announced.extend(dry_run_announcement(decl, &p));
            reference_dry_run(decl, std::rc::Rc::new(Copy), &p).unwrap()
        };
        // 2^39 bytes per buffer: once an allocation the kernel's overcommit allowed and a
        // kill when its pages were touched; now refused before anything is allocated.
        let mut lines = Vec::new();
        match dry("u64", 1 << 36, &mut lines) {
            DryRun::NotRun(why) => assert!(
                why.starts_with("at n=68719476736, the smallest shape, it needs about")
                    && why.contains("of host memory"),
                "{why}"
            ),
            r => panic!("{r:?}"),
        }
        assert!(lines.is_empty());
        assert_eq!(dry("u8", 1000, &mut lines), DryRun::Ran);
        assert!(lines.is_empty(), "a small shape runs without a line");
        let big = DRY_RUN_ANNOUNCED_BYTES as i64 / 2;
        assert_eq!(dry("u8", big, &mut lines), DryRun::Ran);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("running the reference once at n=134217728 (0.3 GB of buffers)"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_reference_that_fails_where_klab_chose_the_shape_is_a_skip() {
        struct Fails;
        impl crate::reference::Reference for Fails {
            fn run(
                &self,
                _: &declared::Shape,
                _: &mut [&mut [u8]],
                _: &[i64],
                _: &[f64],
            ) -> Result<(), String> {
                Err("the command was killed by its 120 s watchdog".into())
            }
            fn describe(&self) -> String {
                "a failing reference".into()
            }
        }
        let m = copy_manifest("i32");
        let d = m.kernels[0].clone();
        let mut b = HostBackend::new().with_general_kernel("k", host_copy);
        let k = [b.kernel("k").unwrap()];
        let w = declared::DeclaredWorkload::new(
            d,
            [("n".to_string(), 40)].into(),
            declared::InputCase::Structural,
            0,
            std::rc::Rc::new(Fails),
        )
        .unwrap();
        let (c, bufs) =
            declared_case(&mut b, &k, &w, "index overflow, n=40", "exact", 0xff, true).unwrap();
        assert!(bufs.is_none() && c.skipped, "{c:?}");
        assert!(
            c.detail.contains("killed by its 120 s watchdog"),
            "{}",
            c.detail
        );
        // Where the user chose the shape, the same failure is an error, not a skip.
        assert!(declared_case(&mut b, &k, &w, "n=40", "exact", 0xff, false).is_err());
    }

    #[test]
    fn a_reference_with_a_fixed_start_up_cost_still_runs_the_index_overflow_case() {
        // 30 ms a call whatever the size (a process start), then a plain copy: the old
        // estimate scaled a small shape's time to the overflow shape and skipped it. With
        // `slow_call`, that call takes 30 ms longer (a busy machine): its rate against the
        // first (30 ms more for half a million elements) once skipped the case ("about
        // 133 s"); a timing that short no longer decides.
        struct Startup {
            calls: std::cell::Cell<u32>,
            slow_call: Option<u32>,
            start_ms: u64,
        }
        impl crate::reference::Reference for Startup {
            fn run(
                &self,
                _: &declared::Shape,
                b: &mut [&mut [u8]],
                _: &[i64],
                _: &[f64],
            ) -> Result<(), String> {
                self.calls.set(self.calls.get() + 1);
                let ms = if Some(self.calls.get()) == self.slow_call {
                    2 * self.start_ms
                } else {
                    self.start_ms
                };
                std::thread::sleep(std::time::Duration::from_millis(ms));
                let x = b[0].to_vec();
                b[1].copy_from_slice(&x);
                Ok(())
            }
            fn describe(&self) -> String {
                "a reference with a start-up cost".into()
            }
        }
        let m = copy_manifest_of("u64", "u8");
        let decl = &m.kernels[0];
        let base = declared::Shape::from([("n".to_string(), 65)]);
        let shape =
            declared::overflow_shape(&decl.op, &base, declared::INDEX_OVERFLOW_ELEMENTS).unwrap();
        let why = |slow_call, start_ms| {
            let r: std::rc::Rc<dyn crate::reference::Reference> = std::rc::Rc::new(Startup {
                calls: std::cell::Cell::new(0),
                slow_call,
                start_ms,
            });
            reference_too_slow(
                decl,
                &r,
                &base,
                &shape,
                declared::InputCase::Uniform { seed: 1 },
            )
        };
        for slow_call in [None, Some(2)] {
            // The per-element work (klab's inputs, the copy) is real, and a machine busy
            // enough can make it too slow by itself: then the same reference without the
            // start-up cost is skipped too. The start-up cost alone never decides.
            if let Some(w) = why(slow_call, 30) {
                assert!(
                    why(None, 0).is_some(),
                    "slow call {slow_call:?}: skipped for the start-up cost: {w}"
                );
            }
        }
    }

    /// A reference whose time grows with n (2 us per element).
    struct Slow;
    impl crate::reference::Reference for Slow {
        fn run(
            &self,
            s: &declared::Shape,
            b: &mut [&mut [u8]],
            _: &[i64],
            _: &[f64],
        ) -> Result<(), String> {
            std::thread::sleep(std::time::Duration::from_micros(2 * s["n"] as u64));
            let x = b[0].to_vec();
            b[1].copy_from_slice(&x);
            Ok(())
        }
        fn describe(&self) -> String {
            "a slow reference".into()
        }
    }

    /// The index-overflow case of a byte copy (its overflow shape fits this machine's
    /// memory, so the reference is what decides) declared with `extra`, under [`Slow`].
    fn slow_overflow_case(extra: &str) -> CaseResult {
        let m = copy_manifest_with("u64", "u8", extra);
        let mut b = HostBackend::new()
            .with_general_kernel("k", host_copy)
            .with_free_bytes(1 << 40);
        let k = [b.kernel("k").unwrap()];
        let opts = CheckOptions {
            seed: 1,
            sizes: None,
            shapes: None,
            quick: false,
            resume_after: 0,
        };
        let r = run(
            &mut b,
            &m.kernels[0],
            &k,
            std::rc::Rc::new(Slow),
            &opts,
            &mut |_| {},
        )
        .unwrap();
        assert!(r.passed(), "{}", r.render());
        r.cases
            .into_iter()
            .find(|c| c.case.starts_with("index overflow"))
            .unwrap()
    }

    #[test]
    fn an_index_overflow_case_whose_reference_would_run_for_hours_is_a_skip() {
        // No declared flops: klab times the reference on the way to the overflow shape and
        // says why it skips.
        let c = slow_overflow_case("");
        assert!(c.skipped);
        assert!(
            c.detail.contains("at this shape it would take about")
                && c.detail.contains("limit 120 s"),
            "{}",
            c.detail
        );
    }

    #[test]
    fn the_flop_limit_of_the_index_overflow_case_counts_every_core() {
        // Far past any host: skipped before any timing, the limit named with the cores.
        let c = slow_overflow_case(r#"flops = "100000 * n""#);
        assert!(c.skipped);
        let cores = klab_core::par::cores();
        assert!(
            c.detail.contains("FLOPs at this shape")
                && c.detail.contains(&format!("on each of {cores} cores")),
            "{}",
            c.detail
        );
        // 60 FLOPs an element passes 1e11 at n > 2^31, within two cores' limit: the
        // reference's own timings decide (a reference on all cores may be fast enough).
        if cores >= 2 {
            let c = slow_overflow_case(r#"flops = "60 * n""#);
            assert!(
                c.skipped && c.detail.contains("at this shape it would take about"),
                "{}",
                c.detail
            );
        }
    }

    fn transpose_ok(out: &mut [u32], input: &[u32], n: u64, _: u64) {
        for r in 0..n {
            for c in 0..n {
                out[(c * n + r) as usize] = input[(r * n + c) as usize];
            }
        }
    }
    /// Skips the last column's stores: only sizes with a ragged last tile... no: always.
    fn transpose_skips_corner(out: &mut [u32], input: &[u32], n: u64, k: u64) {
        transpose_ok(out, input, n, k);
        if n > 32 && n % 32 != 0 {
            out[(n * n - 1) as usize] = 0x7f7f_7f7f;
        }
    }
    /// Writes whatever poison the first run left: correct under one poison, wrong under the other.
    fn nondeterministic(out: &mut [u32], input: &[u32], n: u64, k: u64) {
        transpose_ok(out, input, n, k);
        if k % 2 == 1 && n > 1 {
            out[1] ^= 1;
        }
    }
    /// The block-tree sum with a grid of ceil(n / 256) blocks, one partial each.
    fn reduce_model(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        reduce_blocks(mem, args, |n| n.div_ceil(256));
    }
    /// The same kernel launched on n / 256 blocks: the tail's partial is never written.
    fn reduce_drop_model(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        reduce_blocks(mem, args, |n| n / 256);
    }
    fn reduce_blocks(mem: &mut [Vec<u32>], args: &[HostArg], grid: fn(u64) -> u64) {
        let [HostArg::Buffer(x), HostArg::Buffer(p), HostArg::U64(n)] = args else {
            panic!("args")
        };
        let xs: Vec<f32> = mem[*x][..*n as usize]
            .iter()
            .map(|b| f32::from_bits(*b))
            .collect();
        for b in 0..grid(*n) as usize {
            let part = reduce::model_block_tree(
                &xs[(b * 256).min(xs.len())..((b + 1) * 256).min(xs.len())],
                1,
            );
            mem[*p][b] = part.to_bits();
        }
    }

    fn check(decl: &str, host: HostBackend, sizes: Option<Vec<u64>>) -> CheckReport {
        check_with(decl, host, sizes).0.unwrap()
    }

    #[test]
    fn the_ladder_covers_every_remainder_class_and_exact_contrasts() {
        let sizes = |name: &str| -> Vec<u64> {
            let (_, d) = resolve(name).unwrap();
            declared::ladder(&d.op)
                .unwrap()
                .iter()
                .map(|s| s["n"] as u64)
                .collect()
        };
        let l = sizes("padded");
        for r in 1..32 {
            assert!(l.iter().any(|n| n % 32 == r), "remainder {r}");
        }
        assert!(l.contains(&32) && l.contains(&128) && l.contains(&4097) && !l.contains(&0));
        let l = sizes("reduce_guarded");
        assert!(
            l.contains(&0) && l.contains(&611) && l.contains(&16_483) && l.contains(&1_000_003)
        );
        assert_eq!(l.iter().filter(|n| **n > 256 && **n < 512).count(), 255);
    }

    #[test]
    fn a_correct_transpose_passes_every_case_and_its_properties() {
        let r = check(
            "padded",
            HostBackend::new().with_kernel("transpose_padded", transpose_ok),
            Some(vec![1, 33, 64]),
        );
        assert!(r.passed(), "{}", r.render());
        assert!(r.cases.iter().any(|c| c.case == "involution" && c.pass));
        assert!(r
            .cases
            .iter()
            .any(|c| c.case.ends_with("determinism") && c.pass));
    }

    #[test]
    fn ragged_only_bugs_fail_on_the_ladder_and_name_the_case() {
        let r = check(
            "padded",
            HostBackend::new().with_kernel("transpose_padded", transpose_skips_corner),
            Some(vec![32, 33, 64]),
        );
        assert!(!r.passed());
        let f = r.first_failure().unwrap();
        assert_eq!(f.n, 33);
        assert!(f.detail.contains("[row 32, col 32]"), "{}", f.detail);
        // Block-exact sizes alone would have passed it.
        let r = check(
            "padded",
            HostBackend::new().with_kernel("transpose_padded", transpose_skips_corner),
            Some(vec![32, 64]),
        );
        assert!(r.passed());
    }

    fn check_with(
        decl: &str,
        host: HostBackend,
        sizes: Option<Vec<u64>>,
    ) -> (Result<CheckReport, BackendError>, HostBackend) {
        let (_, d) = resolve(decl).unwrap();
        let mut b = host;
        let k = [b.kernel(&d.entry).unwrap()];
        let oracle = crate::oracle::BuiltinReference::for_op(&d.op).unwrap();
        let r = run(
            &mut b,
            &d,
            &k,
            std::rc::Rc::new(oracle),
            &CheckOptions {
                seed: 1,
                sizes,
                shapes: None,
                quick: false,
                resume_after: 0,
            },
            &mut |_| {},
        );
        (r, b)
    }

    #[test]
    fn the_device_checker_gives_the_cpu_oracles_verdicts_and_is_cross_checked() {
        use crate::backend::host::Call;
        let sizes = Some(vec![1, 33, 64]);
        let host = || HostBackend::new().with_kernel("transpose_padded", transpose_skips_corner);
        let cpu = check("padded", host(), sizes.clone());
        let (device, b) = check_with("padded", host().with_device_checker(None), sizes);
        let device = device.unwrap();
        // The same cases and verdicts, word for word, whichever checker judged.
        assert_eq!(device.render(), cpu.render());
        assert!(!device.passed());
        // The device judged, the inputs were made on the device, and the CPU oracle
        // cross-checked (every case is a new workload: its first judgement).
        assert!(b.calls.iter().any(|c| matches!(c, Call::Verify(_))));
        assert!(b.calls.iter().any(|c| matches!(c, Call::Generate(_))));
    }

    /// Zeroes its input and writes zeros as the transpose: wrong, but consistent with what
    /// its input now holds.
    fn transpose_zeroes_its_input(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (HostArg::Buffer(out), HostArg::Buffer(input), HostArg::I32(n)) =
            (&args[0], &args[1], &args[2])
        else {
            panic!("{args:?}")
        };
        let nn = (*n as usize).pow(2);
        mem[*input][..nn].fill(0);
        mem[*out][..nn].fill(0);
    }

    /// Defect: the device checker reads a transpose's expected values from the slot's
    /// input, so a kernel that overwrote its input to agree with a wrong output passed
    /// wherever the CPU oracle did not cross-check. Every judgement now holds each `in`
    /// buffer to the bytes klab wrote, and the CPU oracle judges the outputs when one moved.
    #[test]
    fn a_kernel_that_writes_its_input_fails_under_either_checker() {
        for device in [false, true] {
            let mut host = HostBackend::new()
                .with_general_kernel("transpose_padded", transpose_zeroes_its_input);
            if device {
                host = host.with_device_checker(None);
            }
            let (r, _) = check_with("padded", host, Some(vec![1, 33, 64]));
            let r = r.unwrap();
            assert!(!r.passed());
            let case = r.cases.iter().find(|c| !c.skipped && !c.pass).unwrap();
            assert!(
                case.detail.contains("input in: FAIL") && case.detail.contains("declare it inout"),
                "device={device}: {}",
                case.detail
            );
        }
    }

    #[test]
    fn each_wrong_device_checker_is_a_klab_error_not_a_verdict() {
        use crate::verify::CheckerMutant;
        // Wrong at the ragged sizes' last element: every checker mutant misjudges it, and
        // the skipped-store pattern 0x7f7f7f7f is compared under the bitwise rule.
        for m in [CheckerMutant::NoFailures, CheckerMutant::SkipsLast] {
            let host = HostBackend::new()
                .with_kernel("transpose_padded", transpose_skips_corner)
                .with_device_checker(Some(m));
            let (r, _) = check_with("padded", host, Some(vec![33]));
            let e = r.expect_err("the cross-check must stop the check");
            assert!(
                e.message
                    .contains("the device checker and the CPU oracle disagree"),
                "{m:?}: {e}"
            );
        }
        // A correct kernel under a wrong checker: nothing to disagree on, the check passes.
        let host = HostBackend::new()
            .with_kernel("transpose_padded", transpose_ok)
            .with_device_checker(Some(CheckerMutant::NoFailures));
        let (r, _) = check_with("padded", host, Some(vec![33]));
        assert!(r.unwrap().passed());
    }

    /// Writes +0.0 wherever the input holds -0.0 (a canonicalising kernel).
    fn transpose_canonical_zero(out: &mut [u32], input: &[u32], n: u64, k: u64) {
        transpose_ok(out, input, n, k);
        for w in out.iter_mut().take((n * n) as usize) {
            if *w == 0x8000_0000 {
                *w = 0;
            }
        }
    }

    #[test]
    fn a_checker_that_takes_negative_zero_for_positive_zero_is_caught_on_the_special_values() {
        let host = || {
            HostBackend::new()
                .with_kernel("transpose_padded", transpose_canonical_zero)
                .with_device_checker(Some(crate::verify::CheckerMutant::NegativeZero))
        };
        // One element: its special value is +0.0, nothing for the mutant to misjudge.
        let (r, _) = check_with("padded", host(), Some(vec![1]));
        assert!(r.unwrap().passed());
        // The special-values case at the middle shape holds -0.0.
        let (r, _) = check_with("padded", host(), Some(vec![1, 33, 64]));
        let e = r.expect_err("the special-values case holds -0.0");
        assert!(
            e.message.contains("disagree") && e.message.contains("n=33"),
            "{e}"
        );
    }

    /// A timed block small enough for the host backend: 4 per-launch samples on one slot,
    /// each launch invalidated.
    fn small_block() -> crate::timing::TimingConfig {
        crate::timing::TimingConfig {
            timer: klab_core::samples::Timer::PerLaunch,
            regime: klab_core::samples::Regime::SameBuffer,
            samples: 4,
            warmup: crate::timing::WarmupPolicy::Count { launches: 2 },
            invalidation: klab_core::samples::Invalidation::EveryLaunch,
        }
    }

    #[test]
    fn paranoid_cross_checks_every_judgement_of_a_timed_block() {
        use crate::timing::measure;
        let (_, d) = resolve("padded").unwrap();
        let w =
            declared::DeclaredWorkload::builtin(d.clone(), 64, declared::InputCase::Distinct, 0)
                .unwrap();
        let cfg = small_block();
        // before, the 4 samples drawn for verification (all 4 of 4), the 4 stale-output
        // probes' verified halves, after timing (one warm slot), revalidation: 11
        // judgements, the first cross-checked, or all when paranoid.
        for (paranoid, want) in [(false, 1), (true, 11)] {
            let mut b = HostBackend::new()
                .with_kernel("transpose_padded", transpose_ok)
                .with_device_checker(None);
            if paranoid {
                b = b.with_paranoid();
            }
            let w = w.with_decl(d.clone()).unwrap();
            let k = [b.kernel(&d.entry).unwrap()];
            let o = measure(
                &mut b,
                &w,
                &k,
                &cfg,
                "block",
                &mut klab_core::gpustate::GpuState::default,
            )
            .unwrap();
            let crate::timing::Outcome::Measured(m) = o else {
                panic!("not measured")
            };
            assert!(m.correct());
            assert_eq!(w.cross_checked(), want, "paranoid = {paranoid}");
            assert!(
                m.phases
                    .checker
                    .starts_with("device checker (11 judgements"),
                "{}",
                m.phases.checker
            );
        }
    }

    /// A timed block's events that note how many judgements the CPU oracle had
    /// cross-checked when the block's launches were over.
    struct CrossCheckedAtLaunchesOver<'a> {
        w: &'a declared::DeclaredWorkload,
        seen: Option<u64>,
    }

    impl crate::timing::BlockEvents for CrossCheckedAtLaunchesOver<'_> {
        fn gpu_state(&mut self) -> klab_core::gpustate::GpuState {
            Default::default()
        }
        fn launches_over(&mut self) {
            self.seen = Some(self.w.cross_checked());
        }
    }

    /// A timed block on `kernel` at `n` under the device checker (`mutant`: a wrong one):
    /// its outcome, and the cross-checked judgements when its launches were over.
    fn timed_block(
        kernel: crate::backend::host::HostKernelFn,
        mutant: Option<crate::verify::CheckerMutant>,
        n: u64,
    ) -> (
        Result<crate::timing::Outcome, crate::timing::TimingError>,
        Option<u64>,
        u64,
    ) {
        use crate::timing::measure;
        let (_, d) = resolve("padded").unwrap();
        let w = declared::DeclaredWorkload::builtin(d.clone(), n, declared::InputCase::Distinct, 0)
            .unwrap();
        let cfg = small_block();
        let mut b = HostBackend::new()
            .with_kernel("transpose_padded", kernel)
            .with_device_checker(mutant);
        let k = [b.kernel(&d.entry).unwrap()];
        let mut events = CrossCheckedAtLaunchesOver { w: &w, seen: None };
        let o = measure(&mut b, &w, &k, &cfg, "block", &mut events);
        (o, events.seen, w.cross_checked())
    }

    /// The CPU oracle's cross-check of a block's first validation (host work inferred at
    /// about 0.07 s a block at 4096 x 4096 on the H200) once ran before the block's timed
    /// launches, on the path from one block's turn to the next's; it now runs once they
    /// are over, and still counts.
    #[test]
    fn a_timed_blocks_cross_check_runs_after_its_launches() {
        let (o, at_launches_over, after) = timed_block(transpose_ok, None, 64);
        let Ok(crate::timing::Outcome::Measured(m)) = o else {
            panic!("not measured")
        };
        assert!(m.correct());
        assert_eq!((at_launches_over, after), (Some(0), 1));
        assert!(
            m.phases
                .checker
                .ends_with("1 cross-checked on the CPU oracle)"),
            "{}",
            m.phases.checker
        );
    }

    #[test]
    fn a_wrong_device_checker_still_stops_a_timed_block() {
        use crate::verify::CheckerMutant;
        // The mutant passes the wrong corner: the cross-check after the launches finds it.
        let (o, at_launches_over, _) =
            timed_block(transpose_skips_corner, Some(CheckerMutant::NoFailures), 33);
        let e = o.expect_err("the cross-check must stop the block");
        assert!(e.to_string().contains("disagree"), "{e}");
        assert_eq!(at_launches_over, Some(0));
        // A failure on the device ends the block at once, cross-checked before it does.
        let (o, at_launches_over, after) = timed_block(transpose_skips_corner, None, 33);
        assert!(matches!(o, Ok(crate::timing::Outcome::Rejected { .. })));
        assert_eq!((at_launches_over, after), (None, 1));
    }

    #[test]
    fn nondeterminism_is_caught() {
        let r = check(
            "padded",
            HostBackend::new().with_kernel("transpose_padded", nondeterministic),
            Some(vec![33]),
        );
        assert!(!r.passed(), "{}", r.render());
    }

    #[test]
    fn drop_tail_reduction_fails_at_ragged_sizes_and_passes_block_exact_ones() {
        let host = |f| HostBackend::new().with_general_kernel("reduce_block_tree", f);
        let r = check(
            "reduce_drop_tail",
            host(reduce_drop_model),
            Some(vec![0, 255, 611, 1024, 16_483]),
        );
        let by_n = |n: u64| r.cases.iter().filter(|c| c.n == n).all(|c| c.pass);
        assert!(by_n(0) && by_n(1024));
        assert!(!by_n(611) && !by_n(16_483));
        let plan = r.cases.iter().find(|c| c.n == 255).unwrap();
        assert!(
            !plan.pass && plan.detail.contains("zero dimension"),
            "{}",
            plan.detail
        );
        assert!(
            r.cases.iter().any(|c| c.case.contains("swap") && !c.pass),
            "{}",
            r.render()
        );
        assert!(!r.passed());
        let g = check(
            "reduce_guarded",
            host(reduce_model),
            Some(vec![0, 1, 255, 611, 1024, 16_483]),
        );
        assert!(g.passed(), "{}", g.render());
    }

    #[test]
    fn the_drop_tail_sum_is_the_fold_of_the_blocks_it_launched() {
        // The reduction lab's weak suite snapshots this value (11815.5 at n = 611): the
        // tail's partial was never written and is not part of the kernel's sum.
        let (_, d) = resolve("reduce_drop_tail").unwrap();
        let mut b = HostBackend::new().with_general_kernel("reduce_block_tree", reduce_drop_model);
        let k = [b.kernel(&d.entry).unwrap()];
        let x = reduce::exact_input(611);
        let got = device_sum(&mut b, &d, &k, &x).unwrap();
        assert_eq!(got, reduce::GOLDEN_611);
    }

    #[test]
    fn known_broken_never_passes() {
        let r = check(
            "broken",
            HostBackend::new().with_kernel("transpose_broken", transpose_ok),
            Some(vec![33]),
        );
        assert!(r.cases.iter().all(|c| c.pass));
        assert!(!r.passed());
        assert!(r.render().contains("REJECTED"));
    }
}
