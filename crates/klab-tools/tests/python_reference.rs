//! A Python function as the reference of a whole check, on the host backend: klab's
//! command-reference path runs `python -m klab.reference ref.py:scale` once per case, and the
//! gates compare the kernel with what it returns. A correct kernel passes every case; one that
//! drops its last element fails, named at that element. The interpreter must have klab's
//! Python package and NumPy: `KLAB_TEST_PYTHON` names it (scripts/test sets it to the wheel's
//! test environment). Without it the test says it is skipped.

use klab_engine::backend::host::{HostArg, HostBackend};
use klab_engine::backend::Backend;
use klab_engine::check::{self, CheckOptions, CheckReport};

const MANIFEST: &str = r#"
source = "k.cu"
[[kernel]]
name = "k"
entry = "k"
operation = "declared"
params = ["y", "x", "n:i32", "a:f32"]
[kernel.op]
grid = ["ceil_div(n, 256)"]
block = ["256"]
useful_bytes = "8 * n"
reference = { command = ["PYTHON", "-m", "klab.reference", "ref.py:scale"] }
sizes.n = {}
scalars.a = { type = "f32", values = [0.1] }
buffers.x = { dtype = "f32", len = "n", role = "in" }
buffers.y = { dtype = "f32", len = "n", role = "out", compare = { ulp = 0 } }
"#;

/// In double precision, rounded once to y's f32 by klab.reference: for a product of two
/// f32 values that is the f32 product itself, so the rule can be exact.
const REF_PY: &str = r#"
import numpy as np

def scale(x, *, a, n):
    assert x.shape == (n,) and x.dtype == np.float32, (x.shape, x.dtype)
    return np.float64(a) * x.astype(np.float64)
"#;

/// y = a * x, over every element, or all but the last.
fn kernel(mem: &mut [Vec<u32>], args: &[HostArg], drops_last: bool) {
    let [HostArg::Buffer(y), HostArg::Buffer(x), HostArg::I32(n), HostArg::F32(a)] = args else {
        panic!("{args:?}")
    };
    let n = *n as usize - usize::from(drops_last && *n > 0);
    let got: Vec<u32> = mem[*x][..n]
        .iter()
        .map(|v| (a * f32::from_bits(*v)).to_bits())
        .collect();
    mem[*y][..n].copy_from_slice(&got);
}

fn right(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
    kernel(mem, args, false)
}

fn drops_last(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
    kernel(mem, args, true)
}

fn check_with(python: &str, f: klab_engine::backend::host::GeneralKernelFn) -> CheckReport {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ref.py"), REF_PY).unwrap();
    let text = MANIFEST.replace("PYTHON", python);
    let m = klab_spec::manifest::parse(
        "m.toml",
        &text,
        klab_spec::manifest::Files::Given(&|_| {
            Ok((
                "k.cu".into(),
                klab_spec::testing::stand_in_source(&text).into(),
            ))
        }),
    )
    .unwrap();
    let decl = &m.kernels[0];
    let reference = klab_tools::reference::build(&decl.op, dir.path()).unwrap();
    let mut b = HostBackend::new().with_general_kernel("k", f);
    let k = [b.kernel("k").unwrap()];
    let opts = CheckOptions {
        seed: 7,
        // Sizes a block of 256 does not divide, one it does, and a single element.
        sizes: Some(vec![1, 33, 256, 1000]),
        shapes: None,
        quick: false,
        resume_after: 0,
    };
    check::run(&mut b, decl, &k, reference, &opts, &mut |_| {}).unwrap()
}

#[test]
fn a_python_function_judges_a_whole_check_on_the_host_backend() {
    let Some(python) = std::env::var_os("KLAB_TEST_PYTHON") else {
        eprintln!(
            "SKIPPED: KLAB_TEST_PYTHON names no interpreter with klab and NumPy (scripts/test sets it)"
        );
        return;
    };
    let python = python.to_str().unwrap().to_string();
    let r = check_with(&python, right);
    assert!(r.passed(), "{}", r.render());
    assert!(
        r.cases.iter().filter(|c| !c.skipped).count() >= 8,
        "{}",
        r.render()
    );
    let r = check_with(&python, drops_last);
    assert!(!r.passed(), "{}", r.render());
    let first = r.first_failure().unwrap().render();
    // At n = 1 the one element is the last: it stays poisoned.
    assert!(
        first.contains("n=1") && first.contains("first at [i 0]: got NaN"),
        "{first}"
    );
}
