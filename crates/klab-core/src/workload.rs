//! A kernel plus the operation it must compute, ready to be checked and timed: what to
//! allocate per buffer slot, which arguments to pass, and how to check an output. The
//! timing engine runs any [`Workload`] on any [`Backend`].

use serde::Serialize;

use crate::backend::{Arg, Backend, BackendError};
use crate::ops::{transpose, triad};
use crate::plan::LaunchPlan;
use crate::variant::{Variant, BLOCK_ROWS, TILE};

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
    fn entry(&self) -> &str;
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
    fn reference(&self) -> &'static str;
    fn rule(&self) -> &'static str;
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        (None, None)
    }
    /// Whether the kernel is a known-broken variant that must never be accepted or timed.
    fn known_broken(&self) -> bool {
        false
    }
    /// Allocate one slot (exact lengths), upload its inputs (distinct per slot where the
    /// operation allows) and poison its outputs.
    fn create_slot<B: Backend>(&self, b: &mut B, slot: u64)
        -> Result<Vec<B::Buffer>, BackendError>;
    /// The kernel's arguments for a slot.
    fn args<'a, B: Backend>(&self, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>>;
    /// Fill the slot's outputs with 0xff bytes.
    fn poison<B: Backend>(&self, b: &mut B, bufs: &mut [B::Buffer]) -> Result<(), BackendError>;
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
    pub variant: Variant,
    pub n: u64,
    input: Vec<u32>,
}

impl TransposeWorkload {
    pub fn new(variant: Variant, n: u64) -> Result<TransposeWorkload, BackendError> {
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
        Ok(TransposeWorkload { variant, n, input })
    }
}

impl Workload for TransposeWorkload {
    fn entry(&self) -> &str {
        self.variant.entry()
    }
    fn operation(&self) -> String {
        match self.variant.operation() {
            crate::Operation::Copy => "copy: out[r][c] = in[r][c]".into(),
            crate::Operation::Transpose => "transpose: out[c][r] = in[r][c]".into(),
        }
    }
    fn n(&self) -> u64 {
        self.n
    }
    fn plan(&self) -> LaunchPlan {
        LaunchPlan::tiled_2d(self.n, TILE, BLOCK_ROWS)
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
    fn reference(&self) -> &'static str {
        "host index arithmetic (no kernel code)"
    }
    fn rule(&self) -> &'static str {
        "bitwise: every 32-bit pattern equal"
    }
    fn known_broken(&self) -> bool {
        self.variant.known_broken()
    }
    fn create_slot<B: Backend>(
        &self,
        b: &mut B,
        _slot: u64,
    ) -> Result<Vec<B::Buffer>, BackendError> {
        let mut input = b.alloc(self.input.len())?;
        b.upload(&mut input, &self.input)?;
        let mut out = b.alloc(self.input.len())?;
        b.fill_bytes(&mut out, transpose::POISON_BYTE)?;
        Ok(vec![out, input])
    }
    fn args<'a, B: Backend>(&self, bufs: &'a [B::Buffer]) -> Vec<Arg<'a, B::Buffer>> {
        vec![
            Arg::Buffer(&bufs[0]),
            Arg::Buffer(&bufs[1]),
            Arg::I32(self.n as i32),
        ]
    }
    fn poison<B: Backend>(&self, b: &mut B, bufs: &mut [B::Buffer]) -> Result<(), BackendError> {
        b.fill_bytes(&mut bufs[0], transpose::POISON_BYTE)
    }
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        _slot: u64,
    ) -> Result<CheckOutcome, BackendError> {
        let mut out = vec![0u32; self.input.len()];
        b.download(&bufs[0], &mut out)?;
        let v = transpose::verify(self.variant.operation(), self.n, &self.input, &out);
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
    pub entry: &'static str,
    pub n: u64,
    pub alpha: f32,
    pub base_seed: u32,
}

impl TriadWorkload {
    pub fn new(buggy: bool, n: u64, seed: u32) -> TriadWorkload {
        TriadWorkload {
            entry: if buggy { "triad_buggy" } else { "triad_f32" },
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
    fn entry(&self) -> &str {
        self.entry
    }
    fn operation(&self) -> String {
        format!("triad: y[i] = fmaf({}f, x[i], z[i])", self.alpha)
    }
    fn n(&self) -> u64 {
        self.n
    }
    fn plan(&self) -> LaunchPlan {
        let blocks = self.n.div_ceil(u64::from(triad::THREADS));
        LaunchPlan {
            grid: crate::plan::Dim3::new(u32::try_from(blocks).unwrap_or(u32::MAX), 1, 1),
            block: crate::plan::Dim3::new(triad::THREADS, 1, 1),
            dynamic_shared_bytes: 0,
        }
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
    fn reference(&self) -> &'static str {
        triad::REFERENCE
    }
    fn rule(&self) -> &'static str {
        triad::RULE
    }
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        (Some(triad::ATOL), Some(triad::RTOL))
    }
    fn known_broken(&self) -> bool {
        self.entry == "triad_buggy"
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
        vec![
            Arg::Buffer(&bufs[0]),
            Arg::Buffer(&bufs[1]),
            Arg::Buffer(&bufs[2]),
            Arg::U64(self.n),
            Arg::F32(self.alpha),
        ]
    }
    fn poison<B: Backend>(&self, b: &mut B, bufs: &mut [B::Buffer]) -> Result<(), BackendError> {
        if self.n == 0 {
            return Ok(());
        }
        b.fill_bytes(&mut bufs[2], transpose::POISON_BYTE)
    }
    fn check<B: Backend>(
        &self,
        b: &mut B,
        bufs: &[B::Buffer],
        slot: u64,
    ) -> Result<CheckOutcome, BackendError> {
        let (x, z) = self.inputs(slot);
        let mut raw = vec![0u32; self.n as usize];
        if self.n > 0 {
            b.download(&bufs[2], &mut raw)?;
        }
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
