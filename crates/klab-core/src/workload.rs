//! A kernel plus the operation it must compute, ready to be checked and timed: what to
//! allocate per buffer slot, which arguments to pass, and how to check an output. The
//! timing engine runs any [`Workload`] on any [`Backend`].

use serde::Serialize;

use crate::backend::{Arg, Backend, BackendError};
use crate::manifest::{KernelDecl, OpKind, Param};
use crate::ops::{reduce, transpose, triad};
use crate::plan::LaunchPlan;
use crate::variant::Variant;

/// Build a kernel's arguments in its declared parameter order: buffers by role (looked up
/// in `buffers`, the slot's buffer roles in allocation order), scalars from `scalar`.
fn declared_args<'a, B: Backend>(
    decl: &KernelDecl,
    roles: &[&str],
    bufs: &'a [B::Buffer],
    scalar: &dyn Fn(&str) -> Arg<'a, B::Buffer>,
) -> Vec<Arg<'a, B::Buffer>> {
    decl.params
        .iter()
        .map(|p| match p {
            Param::Buffer(role) => {
                let i = roles
                    .iter()
                    .position(|r| r == role)
                    .expect("manifest validation guarantees every buffer role");
                Arg::Buffer(&bufs[i])
            }
            Param::Scalar(role, _) => scalar(role),
        })
        .collect()
}

fn builtin_decl(name: &str) -> KernelDecl {
    crate::registry::resolve(name, crate::registry::Scope::Audit)
        .expect("built-in kernels resolve")
        .1
}

/// Poison bytes, alternated across validation runs: 0xff fills words with a NaN,
/// 0x7f with 3.4e38. A kernel that skips a store cannot inherit a correct value, and one
/// that happens to write one poison pattern is caught by the other.
pub const POISON_BYTES: [u8; 2] = [transpose::POISON_BYTE, 0x7f];

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

/// A kernel and its contract.
pub trait Workload {
    /// The kernel's entry point.
    /// The kernel's declaration (its entry, label and launch fields).
    fn decl(&self) -> &KernelDecl;
    fn entry(&self) -> &str {
        &self.decl().entry
    }
    /// What it computes, e.g. `y = fmaf(alpha, x, z)`.
    fn operation(&self) -> String;
    fn dtype(&self) -> &'static str {
        "float32"
    }
    /// Problem size (elements per side for transpose, elements for triad).
    fn n(&self) -> u64;
    fn plan(&self) -> LaunchPlan;
    /// Device bytes one slot (all its buffers) occupies.
    fn slot_bytes(&self) -> u64;
    /// Algorithmic bytes one launch must move.
    fn useful_bytes(&self) -> u64;
    fn flops(&self) -> u64;
    /// The oracle and the rule, for receipts.
    fn reference(&self) -> String;
    fn rule(&self) -> String;
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        (None, None)
    }
    /// Whether the kernel is a known-broken variant that must never be accepted or timed.
    fn known_broken(&self) -> bool {
        self.decl().known_broken.is_some()
    }
    /// Allocate one slot (exact lengths), upload its inputs (distinct per slot where the
    /// operation allows) and poison its outputs.
    fn create_slot<B: Backend>(&self, b: &mut B, slot: u64)
        -> Result<Vec<B::Buffer>, BackendError>;
    /// The kernel's arguments for a slot.
    fn args<'a, B: Backend>(&self, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>>;
    /// Fill the slot's outputs with 0xff bytes.
    /// Fill the slot's outputs with `byte` (one of [`POISON_BYTES`]).
    fn poison<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        byte: u8,
    ) -> Result<(), BackendError>;
    /// The slot's raw output words (for determinism checks).
    fn output<B: Backend>(&self, b: &mut B, bufs: &[B::Buffer]) -> Result<Vec<u32>, BackendError>;
    /// Download the slot's outputs and check them against the oracle.
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        slot: u64,
    ) -> Result<CheckOutcome, BackendError>;
}

/// A transpose-lab variant at size N. Every slot holds the same input (the oracle's
/// exact integers or distinct patterns); rotation changes addresses, not values.
#[derive(Debug, Clone)]
pub struct TransposeWorkload {
    pub decl: KernelDecl,
    pub n: u64,
    /// Generated on first use, so describing a workload costs nothing; shared by the
    /// workloads [`TransposeWorkload::with_decl`] makes.
    input: std::sync::Arc<std::sync::OnceLock<Vec<u32>>>,
    /// The host copy of the output that checks download into, kept between checks: a
    /// fresh 1 GiB buffer per check (N = 16384) costs more in page faults than the copy.
    readback: std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
}

impl TransposeWorkload {
    /// A built-in transpose-lab variant.
    pub fn new(variant: Variant, n: u64) -> Result<TransposeWorkload, BackendError> {
        Self::from_decl(builtin_decl(variant.name()), n)
    }

    /// Any kernel declared with operation copy or transpose.
    pub fn from_decl(decl: KernelDecl, n: u64) -> Result<TransposeWorkload, BackendError> {
        if !matches!(decl.operation, OpKind::Copy | OpKind::Transpose) {
            return Err(BackendError(format!(
                "{} is not a copy or transpose kernel",
                decl.name
            )));
        }
        if n > i32::MAX as u64 {
            return Err(BackendError(format!(
                "N = {n} does not fit the kernel's int parameter"
            )));
        }
        Ok(TransposeWorkload {
            decl,
            n,
            input: Default::default(),
            readback: Default::default(),
        })
    }

    /// A built-in variant at the same N over the same host input (see [`Self::with_decl`]).
    pub fn with_variant(&self, variant: Variant) -> Result<TransposeWorkload, BackendError> {
        self.with_decl(builtin_decl(variant.name()))
    }

    /// Another kernel at the same N over the same host input and readback buffer, so a
    /// command that runs several variants generates the input once.
    pub fn with_decl(&self, decl: KernelDecl) -> Result<TransposeWorkload, BackendError> {
        let mut w = Self::from_decl(decl, self.n)?;
        w.input = self.input.clone();
        w.readback = self.readback.clone();
        Ok(w)
    }

    fn input(&self) -> Result<&[u32], BackendError> {
        if let Some(v) = self.input.get() {
            return Ok(v);
        }
        let n = self.n;
        let words = n
            .checked_mul(n)
            .and_then(|w| usize::try_from(w).ok())
            .ok_or_else(|| BackendError(format!("N = {n} is too large")))?;
        let mut input = Vec::new();
        input
            .try_reserve_exact(words)
            .map_err(|_| BackendError(format!("cannot allocate host memory for N = {n}")))?;
        input.resize(words, 0);
        transpose::fill_input(n, &mut input);
        Ok(self.input.get_or_init(|| input))
    }

    fn op(&self) -> crate::Operation {
        match self.decl.operation {
            OpKind::Copy => crate::Operation::Copy,
            _ => crate::Operation::Transpose,
        }
    }
}

impl Workload for TransposeWorkload {
    fn decl(&self) -> &KernelDecl {
        &self.decl
    }
    fn operation(&self) -> String {
        match self.op() {
            crate::Operation::Copy => "copy: out[r][c] = in[r][c]".into(),
            crate::Operation::Transpose => "transpose: out[c][r] = in[r][c]".into(),
        }
    }
    fn n(&self) -> u64 {
        self.n
    }
    fn plan(&self) -> LaunchPlan {
        self.decl.plan(self.n)
    }
    fn slot_bytes(&self) -> u64 {
        self.n * self.n * 8
    }
    fn useful_bytes(&self) -> u64 {
        self.n * self.n * 8
    }
    fn flops(&self) -> u64 {
        0
    }
    fn reference(&self) -> String {
        "host index arithmetic (no kernel code)".into()
    }
    fn rule(&self) -> String {
        self.decl.equality.rule().into()
    }
    fn create_slot<B: Backend>(
        &self,
        b: &mut B,
        _slot: u64,
    ) -> Result<Vec<B::Buffer>, BackendError> {
        let host = self.input()?;
        let mut input = b.alloc(host.len())?;
        b.upload(&mut input, host)?;
        let mut out = b.alloc(host.len())?;
        b.fill_bytes(&mut out, transpose::POISON_BYTE)?;
        Ok(vec![out, input])
    }
    fn args<'a, B: Backend>(&self, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>> {
        let n = self.n as i32;
        declared_args::<B>(&self.decl, &["out", "in"], bufs, &|_| Arg::I32(n))
    }
    fn poison<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        byte: u8,
    ) -> Result<(), BackendError> {
        b.fill_bytes(&mut bufs[0], byte)
    }
    fn output<B: Backend>(&self, b: &mut B, bufs: &[B::Buffer]) -> Result<Vec<u32>, BackendError> {
        let mut out = vec![0u32; (self.n * self.n) as usize];
        b.download(&bufs[0], &mut out)?;
        Ok(out)
    }
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        _slot: u64,
    ) -> Result<CheckOutcome, BackendError> {
        let host = self.input()?;
        let mut out = self
            .readback
            .lock()
            .map_err(|_| BackendError("the readback buffer was poisoned by a panic".into()))?;
        if out.len() != host.len() {
            *out = Vec::new();
            out.try_reserve_exact(host.len()).map_err(|_| {
                BackendError(format!("cannot allocate host memory for N = {}", self.n))
            })?;
            out.resize(host.len(), 0);
        }
        b.download(&bufs[0], &mut out)?;
        let v = transpose::verify_with(self.op(), self.n, host, &out, self.decl.equality);
        Ok(CheckOutcome {
            failures: v.mismatches,
            max_abs: v.max_abs_error,
            max_rel: 0.0,
            first_failure: v.first_mismatch.map(|m| m.describe()),
        })
    }
}

/// Seed 003's triad at length `n`; slot `s` holds the inputs of seed `base_seed + s`.
#[derive(Debug, Clone)]
pub struct TriadWorkload {
    pub decl: KernelDecl,
    pub n: u64,
    pub alpha: f32,
    pub base_seed: u32,
}

impl TriadWorkload {
    /// The built-in triad_f32 or triad_buggy.
    pub fn new(buggy: bool, n: u64, seed: u32) -> TriadWorkload {
        let decl = builtin_decl(if buggy { "triad_buggy" } else { "triad_f32" });
        TriadWorkload::from_decl(decl, n, seed)
    }

    /// The same workload with another scalar.
    pub fn with_alpha(mut self, alpha: f32) -> TriadWorkload {
        self.alpha = alpha;
        self
    }

    /// Any kernel declared with operation triad.
    pub fn from_decl(decl: KernelDecl, n: u64, seed: u32) -> TriadWorkload {
        TriadWorkload {
            decl,
            n,
            alpha: triad::ALPHA,
            base_seed: seed,
        }
    }

    /// The host inputs of a slot.
    pub fn inputs(&self, slot: u64) -> (Vec<f32>, Vec<f32>) {
        let n = self.n as usize;
        let (mut x, mut z) = (vec![0.0f32; n], vec![0.0f32; n]);
        triad::fill_inputs(&mut x, &mut z, self.base_seed + slot as u32, self.alpha);
        (x, z)
    }
}

fn to_bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

impl Workload for TriadWorkload {
    fn decl(&self) -> &KernelDecl {
        &self.decl
    }
    fn operation(&self) -> String {
        format!("triad: y[i] = fmaf({}f, x[i], z[i])", self.alpha)
    }
    fn n(&self) -> u64 {
        self.n
    }
    fn plan(&self) -> LaunchPlan {
        self.decl.plan(self.n)
    }
    fn slot_bytes(&self) -> u64 {
        self.n * 12
    }
    fn useful_bytes(&self) -> u64 {
        self.n * triad::BYTES_PER_ELEMENT
    }
    fn flops(&self) -> u64 {
        self.n * triad::FLOPS_PER_ELEMENT
    }
    fn reference(&self) -> String {
        triad::REFERENCE.into()
    }
    fn rule(&self) -> String {
        triad::RULE.into()
    }
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        (Some(triad::ATOL), Some(triad::RTOL))
    }
    fn create_slot<B: Backend>(
        &self,
        b: &mut B,
        slot: u64,
    ) -> Result<Vec<B::Buffer>, BackendError> {
        let (x, z) = self.inputs(slot);
        let n = self.n as usize;
        let mut xb = b.alloc(n)?;
        let mut zb = b.alloc(n)?;
        let mut yb = b.alloc(n)?;
        if n > 0 {
            b.upload(&mut xb, &to_bits(&x))?;
            b.upload(&mut zb, &to_bits(&z))?;
            b.fill_bytes(&mut yb, transpose::POISON_BYTE)?;
        }
        Ok(vec![xb, zb, yb])
    }
    fn args<'a, B: Backend>(&self, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>> {
        let (n, alpha) = (self.n, self.alpha);
        declared_args::<B>(&self.decl, &["x", "z", "y"], bufs, &|role| {
            if role == "alpha" {
                Arg::F32(alpha)
            } else {
                Arg::U64(n)
            }
        })
    }
    fn poison<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        byte: u8,
    ) -> Result<(), BackendError> {
        if self.n == 0 {
            return Ok(());
        }
        b.fill_bytes(&mut bufs[2], byte)
    }
    fn output<B: Backend>(&self, b: &mut B, bufs: &[B::Buffer]) -> Result<Vec<u32>, BackendError> {
        let mut out = vec![0u32; self.n as usize];
        if self.n > 0 {
            b.download(&bufs[2], &mut out)?;
        }
        Ok(out)
    }
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        slot: u64,
    ) -> Result<CheckOutcome, BackendError> {
        let (x, z) = self.inputs(slot);
        let raw = self.output(b, bufs)?;
        let y: Vec<f32> = raw.iter().map(|w| f32::from_bits(*w)).collect();
        let v = triad::verify(&x, &z, &y, self.alpha);
        Ok(CheckOutcome {
            failures: v.failures,
            max_abs: v.max_abs,
            max_rel: v.max_rel,
            first_failure: v
                .first_failure
                .map(|(i, got, want)| format!("index {i}: got {got:e}, reference {want:e}")),
        })
    }
}

/// Seed 002's reduce-sum: the kernel writes one partial per block and the host folds the
/// partials in block order in float32 (the host fold is part of the sum under test). Slot
/// `s` holds the exact input for `base_seed == 0`, else random inputs of seed base + s.
#[derive(Debug, Clone)]
pub struct ReduceWorkload {
    pub decl: KernelDecl,
    pub n: u64,
    pub input_seed: Option<u64>,
    /// An explicit input (property checks feed permuted or scaled inputs).
    pub input_override: Option<std::sync::Arc<Vec<f32>>>,
}

impl ReduceWorkload {
    /// Exact small-integer input ((i % 97) * 0.5), or seeded random input.
    pub fn from_decl(decl: KernelDecl, n: u64, input_seed: Option<u64>) -> ReduceWorkload {
        ReduceWorkload {
            decl,
            n,
            input_seed,
            input_override: None,
        }
    }

    /// This kernel summing exactly `x`.
    pub fn with_input(decl: KernelDecl, x: Vec<f32>) -> ReduceWorkload {
        ReduceWorkload {
            n: x.len() as u64,
            decl,
            input_seed: None,
            input_override: Some(std::sync::Arc::new(x)),
        }
    }

    pub fn input(&self, slot: u64) -> Vec<f32> {
        if let Some(x) = &self.input_override {
            return x.as_ref().clone();
        }
        match self.input_seed {
            None => reduce::exact_input(self.n as usize),
            Some(seed) => reduce::random_input(self.n as usize, seed + slot),
        }
    }

    fn blocks(&self) -> usize {
        self.plan().grid.x as usize
    }

    /// Fold partials in block order, in float32.
    pub fn fold(partials: &[f32]) -> f32 {
        partials.iter().fold(0.0f32, |a, b| a + b)
    }
}

impl Workload for ReduceWorkload {
    fn decl(&self) -> &KernelDecl {
        &self.decl
    }
    fn operation(&self) -> String {
        "reduce-sum: s = sum of x[i], float32, partials folded on the host".into()
    }
    fn n(&self) -> u64 {
        self.n
    }
    fn plan(&self) -> LaunchPlan {
        self.decl.plan(self.n)
    }
    fn slot_bytes(&self) -> u64 {
        (self.n + self.blocks() as u64) * 4
    }
    fn useful_bytes(&self) -> u64 {
        self.n * 4
    }
    fn flops(&self) -> u64 {
        self.n.saturating_sub(1)
    }
    fn reference(&self) -> String {
        reduce::REFERENCE.into()
    }
    fn rule(&self) -> String {
        reduce::RULE.into()
    }
    fn create_slot<B: Backend>(
        &self,
        b: &mut B,
        slot: u64,
    ) -> Result<Vec<B::Buffer>, BackendError> {
        let x: Vec<u32> = self.input(slot).iter().map(|f| f.to_bits()).collect();
        let mut xb = b.alloc(x.len())?;
        if !x.is_empty() {
            b.upload(&mut xb, &x)?;
        }
        let mut pb = b.alloc(self.blocks())?;
        if self.blocks() > 0 {
            b.fill_bytes(&mut pb, transpose::POISON_BYTE)?;
        }
        Ok(vec![xb, pb])
    }
    fn args<'a, B: Backend>(&self, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>> {
        let n = self.n;
        declared_args::<B>(&self.decl, &["in", "partials"], bufs, &|_| Arg::U64(n))
    }
    fn poison<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        byte: u8,
    ) -> Result<(), BackendError> {
        if self.blocks() == 0 {
            return Ok(());
        }
        b.fill_bytes(&mut bufs[1], byte)
    }
    fn output<B: Backend>(&self, b: &mut B, bufs: &[B::Buffer]) -> Result<Vec<u32>, BackendError> {
        let mut out = vec![0u32; self.blocks()];
        if !out.is_empty() {
            b.download(&bufs[1], &mut out)?;
        }
        Ok(out)
    }
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        slot: u64,
    ) -> Result<CheckOutcome, BackendError> {
        let raw = self.output(b, bufs)?;
        let partials: Vec<f32> = raw.iter().map(|w| f32::from_bits(*w)).collect();
        let got = Self::fold(&partials);
        let v = reduce::check(got, &self.input(slot));
        Ok(CheckOutcome {
            failures: u64::from(!v.pass),
            max_abs: (v.got - v.want).abs(),
            max_rel: v.rel_error,
            first_failure: (!v.pass).then(|| {
                format!(
                    "sum of n={}: got {} want {} rel {:.3e} > {}",
                    v.n, v.got, v.want, v.rel_error, v.rule
                )
            }),
        })
    }
}

/// Any declared kernel as a workload.
#[derive(Debug, Clone)]
pub enum AnyWorkload {
    Transpose(TransposeWorkload),
    Triad(TriadWorkload),
    Reduce(ReduceWorkload),
    /// A declared operation at one shape (made with its reference, not by `for_decl`).
    Declared(Box<crate::general::DeclaredWorkload>),
}

impl AnyWorkload {
    /// The workload for `decl` at size `n`; `seed` picks random inputs where the operation
    /// has them (triad: the seed's pattern seed; reduce: None = exact input).
    pub fn for_decl(
        decl: KernelDecl,
        n: u64,
        seed: Option<u64>,
    ) -> Result<AnyWorkload, BackendError> {
        Ok(match decl.operation {
            OpKind::Copy | OpKind::Transpose => {
                AnyWorkload::Transpose(TransposeWorkload::from_decl(decl, n)?)
            }
            OpKind::Triad => {
                AnyWorkload::Triad(TriadWorkload::from_decl(decl, n, seed.unwrap_or(7) as u32))
            }
            OpKind::ReduceSum => AnyWorkload::Reduce(ReduceWorkload::from_decl(decl, n, seed)),
            OpKind::Declared => {
                return Err(BackendError(format!(
                    "{} is a declared operation: its workload is made with its reference (general::DeclaredWorkload)",
                    decl.name
                )))
            }
        })
    }

    pub fn decl(&self) -> &KernelDecl {
        match self {
            AnyWorkload::Transpose(w) => &w.decl,
            AnyWorkload::Triad(w) => &w.decl,
            AnyWorkload::Reduce(w) => &w.decl,
            AnyWorkload::Declared(w) => &w.decl,
        }
    }
}

macro_rules! each {
    ($self:ident, $w:ident => $e:expr) => {
        match $self {
            AnyWorkload::Transpose($w) => $e,
            AnyWorkload::Triad($w) => $e,
            AnyWorkload::Reduce($w) => $e,
            AnyWorkload::Declared($w) => $e,
        }
    };
}

impl Workload for AnyWorkload {
    fn decl(&self) -> &KernelDecl {
        each!(self, w => w.decl())
    }
    fn operation(&self) -> String {
        each!(self, w => w.operation())
    }
    fn n(&self) -> u64 {
        each!(self, w => w.n())
    }
    fn plan(&self) -> LaunchPlan {
        each!(self, w => w.plan())
    }
    fn slot_bytes(&self) -> u64 {
        each!(self, w => w.slot_bytes())
    }
    fn useful_bytes(&self) -> u64 {
        each!(self, w => w.useful_bytes())
    }
    fn flops(&self) -> u64 {
        each!(self, w => w.flops())
    }
    fn reference(&self) -> String {
        each!(self, w => w.reference())
    }
    fn rule(&self) -> String {
        each!(self, w => w.rule())
    }
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        each!(self, w => w.tolerances())
    }
    fn create_slot<B: Backend>(
        &self,
        b: &mut B,
        slot: u64,
    ) -> Result<Vec<B::Buffer>, BackendError> {
        each!(self, w => w.create_slot(b, slot))
    }
    fn args<'a, B: Backend>(&self, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>> {
        each!(self, w => w.args::<B>(bufs))
    }
    fn poison<B: Backend>(
        &self,
        b: &mut B,
        bufs: &mut [B::Buffer],
        byte: u8,
    ) -> Result<(), BackendError> {
        each!(self, w => w.poison(b, bufs, byte))
    }
    fn output<B: Backend>(&self, b: &mut B, bufs: &[B::Buffer]) -> Result<Vec<u32>, BackendError> {
        each!(self, w => w.output(b, bufs))
    }
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        slot: u64,
    ) -> Result<CheckOutcome, BackendError> {
        each!(self, w => w.check(b, bufs, slot))
    }
}
