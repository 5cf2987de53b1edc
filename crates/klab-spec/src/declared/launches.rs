//! How a declared operation's kernel is launched: once, or as a sequence of kernels in
//! order on one set of buffers.
//!
//! Most kernels are one launch: the kernel's `entry` with the operation's parameters, and
//! the operation's `grid`, `block` and `dynamic_shared_bytes`. A kernel may instead give
//! `launches = [...]`: a layer norm computed as a mean, then an rstd, then the normalised
//! output is three entries, each with its own parameters (a selection of the operation's
//! buffers, sizes and scalars, in that entry's order) and its own launch. What one launch
//! writes (an intermediate declared `scratch`, or an `out` that is compared too) the next
//! reads. The kernel's `params` stay the operation's: the order the reference takes.
//!
//! ```toml
//! [[kernel]]
//! name = "three_pass"
//! operation = "declared"
//! op = "layernorm"
//! params = ["out", "mean", "rstd", "inp", "N:i32", "C:i32"]   # the reference's order
//! launches = [
//!   { entry = "mean_kernel", params = ["mean", "inp", "N:i32", "C:i32"], grid = ["N"], block = ["128"] },
//!   { entry = "rstd_kernel", params = ["rstd", "inp", "mean", "N:i32", "C:i32"], grid = ["N"], block = ["128"] },
//!   { entry = "norm_kernel", params = ["out", "inp", "mean", "rstd", "N:i32", "C:i32"], grid = ["ceil_div(N * C, 256)"], block = ["256"] },
//! ]
//! ```
//!
//! [`LaunchSpec`] is one launch as written; [`crate::declared::DeclaredOp::with_sequence`]
//! validates a list of them into [`OpLaunch`]es. [`DeclaredLaunch`] is either kind borrowed, the one
//! view every gate launches through (`klab_engine::declared::launch_args` gives its arguments): each
//! gate runs the whole sequence as one unit (poisoned, checked, sanitized, and timed from the
//! first launch to the end of the last). This module holds data and validation only.

use serde::{Deserialize, Serialize};

use super::{DeclaredOp, OpParam};
use crate::plan::LaunchPlan;
use klab_core::device::Dim3;
use klab_core::expr::{describe_shape, Expr, Shape};

/// One launch of a sequence, as the manifest writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchSpec {
    /// The `extern "C"` `__global__` function (or a template instance by name).
    pub entry: String,
    /// Its parameters in its own order: buffers, and sizes and scalars with their type.
    pub params: Vec<String>,
    pub grid: Vec<Expr>,
    pub block: Vec<Expr>,
    #[serde(default)]
    pub dynamic_shared_bytes: Option<Expr>,
}

/// One validated launch of a sequence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpLaunch {
    pub entry: String,
    pub params: Vec<OpParam>,
    pub grid: Vec<Expr>,
    pub block: Vec<Expr>,
    pub dynamic_shared_bytes: Option<Expr>,
}

/// One launch of a kernel, borrowed from its declaration: what is launched, with which of
/// the operation's values, and how.
#[derive(Debug, Clone, Copy)]
pub struct DeclaredLaunch<'a> {
    /// Its place in a sequence of several (None: the kernel's one launch).
    pub index: Option<usize>,
    pub entry: &'a str,
    pub params: &'a [OpParam],
    pub grid: &'a [Expr],
    pub block: &'a [Expr],
    pub dynamic_shared_bytes: Option<&'a Expr>,
}

impl DeclaredOp {
    /// The launches of this operation's kernel, whose entry is `entry`: its sequence, else
    /// one launch of `entry` with the operation's parameters and launch.
    pub fn launches<'a>(&'a self, entry: &'a str) -> Vec<DeclaredLaunch<'a>> {
        if self.sequence.is_empty() {
            return vec![DeclaredLaunch {
                index: None,
                entry,
                params: &self.params,
                grid: &self.spec.grid,
                block: &self.spec.block,
                dynamic_shared_bytes: self.spec.dynamic_shared_bytes.as_ref(),
            }];
        }
        self.sequence
            .iter()
            .enumerate()
            .map(|(i, l)| DeclaredLaunch {
                index: Some(i),
                entry: &l.entry,
                params: &l.params,
                grid: &l.grid,
                block: &l.block,
                dynamic_shared_bytes: l.dynamic_shared_bytes.as_ref(),
            })
            .collect()
    }

    /// The grid and block of each of its launches, whatever the entry: the sequence's, else
    /// the operation's own.
    pub fn launch_dims(&self) -> Vec<(&[Expr], &[Expr])> {
        if self.sequence.is_empty() {
            return vec![(&self.spec.grid, &self.spec.block)];
        }
        self.sequence
            .iter()
            .map(|l| (&l.grid[..], &l.block[..]))
            .collect()
    }

    /// This operation computed by `launches` in order (validated: parameters of this
    /// operation, launches over its sizes, every buffer passed to some launch). An error
    /// names the field relative to the kernel (`launches[1].params[0]`).
    pub fn with_sequence(
        mut self,
        launches: Vec<LaunchSpec>,
    ) -> Result<DeclaredOp, (String, String)> {
        if launches.is_empty() {
            return Err(("launches".into(), "give one or more launches".into()));
        }
        let mut sequence = Vec::with_capacity(launches.len());
        for (i, l) in launches.into_iter().enumerate() {
            let at = |field: &str| format!("launches[{i}].{field}");
            // A value a parameter's type cannot hold is the operation's size's or scalar's.
            let params =
                self.spec
                    .parse_params(&l.params)
                    .map_err(|(field, problem)| match field.starts_with("params") {
                        true => (at(&field), problem),
                        false => (field, problem),
                    })?;
            for (what, dims) in [("grid", &l.grid), ("block", &l.block)] {
                self.spec
                    .check_launch_dims(what, dims)
                    .map_err(|(field, problem)| (at(&field), problem))?;
            }
            if let Some(e) = &l.dynamic_shared_bytes {
                self.spec
                    .uses_only_sizes("dynamic_shared_bytes", e)
                    .map_err(|(field, problem)| (at(&field), problem))?;
            }
            sequence.push(OpLaunch {
                entry: l.entry,
                params,
                grid: l.grid,
                block: l.block,
                dynamic_shared_bytes: l.dynamic_shared_bytes,
            });
        }
        let passed = |name: &str| {
            sequence
                .iter()
                .any(|l| l.params.iter().any(|p| p.name() == name))
        };
        if let Some(b) = self.spec.buffers.keys().find(|b| !passed(b)) {
            return Err((
                "launches".into(),
                format!("buffer '{b}' is passed to no launch"),
            ));
        }
        if let Some(s) = self.spec.scalars.keys().find(|s| !passed(s)) {
            return Err((
                "launches".into(),
                format!("scalar '{s}' is passed to no launch"),
            ));
        }
        self.sequence = sequence;
        Ok(self)
    }
}

fn dim3(v: &[u64]) -> Result<Dim3, String> {
    let c = |x: u64| u32::try_from(x).map_err(|_| format!("{x} does not fit a launch dimension"));
    Ok(match v {
        [x] => Dim3::new(c(*x)?, 1, 1),
        [x, y] => Dim3::new(c(*x)?, c(*y)?, 1),
        [x, y, z] => Dim3::new(c(*x)?, c(*y)?, c(*z)?),
        _ => return Err("give 1 to 3 dimensions".into()),
    })
}

impl DeclaredLaunch<'_> {
    /// Where its fields are written: `op` for the operation's launch, `launches[1]
    /// (row_rstd)` for one of a sequence.
    pub fn field(&self) -> String {
        match self.index {
            Some(i) => format!("launches[{i}] ({})", self.entry),
            None => "op".into(),
        }
    }

    /// This launch at `shape`: its grid, block and dynamic shared memory evaluated (an
    /// expression that fails there, or a dimension the launch cannot take, is an error
    /// naming its field).
    pub fn plan(&self, shape: &Shape) -> Result<LaunchPlan, String> {
        let at = describe_shape(shape);
        let of = self.field();
        let eval = |field: &str, x: &Expr| {
            x.eval_u64(shape)
                .map_err(|e| format!("{of}.{field} at {at}: {e}"))
        };
        let all = |field: &str, v: &[Expr]| -> Result<Vec<u64>, String> {
            v.iter().map(|x| eval(field, x)).collect()
        };
        let grid = all("grid", self.grid)?;
        let block = all("block", self.block)?;
        let dynamic_shared_bytes = match self.dynamic_shared_bytes {
            Some(x) => u32::try_from(eval("dynamic_shared_bytes", x)?)
                .map_err(|_| format!("{of}.dynamic_shared_bytes does not fit 32 bits"))?,
            None => 0,
        };
        // The operation's launch keeps the words it always had (`grid: ...`).
        let dims = |field: &str, v: &[u64]| {
            dim3(v).map_err(|m| match self.index {
                Some(_) => format!("{of}.{field} at {at}: {m}"),
                None => format!("{field}: {m}"),
            })
        };
        Ok(LaunchPlan {
            grid: dims("grid", &grid)?,
            block: dims("block", &block)?,
            dynamic_shared_bytes,
        })
    }
}
