//! The declared workload's unit tests, a module per concept. Here what several share: the
//! row-sum manifest, its reference and host kernels, and `klab check` run on the host.

use super::*;
use crate::backend::host::{HostArg, HostBackend};
use crate::check::{run, CheckOptions};

mod check;
mod fill;
mod judge;
mod shapes;
mod slot;

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
    fn run(&self, _: &Shape, b: &mut [&mut [u8]], ints: &[i64], _: &[f64]) -> Result<(), String> {
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
