//! The declared-operation examples under examples/ops without a GPU: every manifest parses,
//! every example has a correct kernel and at least two labelled bugs, every CUDA source
//! compiles with NVRTC, and every C reference compiles and computes what its operation
//! says (checked here against independent Rust code on inputs that make its edge cases
//! fire: ties, NaN, ragged tiles, signed zeros). The kernels themselves run on the GPU
//! (`scripts/gpu-run examples`).

use std::path::{Path, PathBuf};

use klab_spec::manifest::{self, Manifest};

fn examples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ops");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|d| d.unwrap().path())
        // One folder per example; files beside them (the examples' lab plan) are not one.
        .filter(|d| d.is_dir())
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    v
}

fn load(name: &str) -> (PathBuf, Manifest) {
    let p = examples()
        .into_iter()
        .find(|p| p.file_stem().is_some_and(|s| s == name))
        .unwrap_or_else(|| panic!("no example {name}"));
    let m = manifest::load(&p).unwrap();
    (p, m)
}

#[test]
fn every_example_has_a_correct_kernel_and_two_labelled_bugs() {
    let all = examples();
    assert!(all.len() >= 5, "{all:?}");
    for p in all {
        let m = manifest::load(&p).unwrap_or_else(|e| panic!("{e}"));
        let correct = m
            .kernels
            .iter()
            .filter(|k| k.known_broken.is_none())
            .count();
        let bugs = m
            .kernels
            .iter()
            .filter(|k| k.known_broken.is_some())
            .count();
        assert!(
            correct >= 1 && bugs >= 2,
            "{}: {correct} correct, {bugs} bugs",
            p.display()
        );
        for k in &m.kernels {
            let op = k.op.as_ref();
            klab_engine::declared::ladder(op).unwrap();
        }
    }
}

fn nvrtc_or_skip(test: &str) -> bool {
    if klab_cuda::probe::nvrtc_present() {
        return true;
    }
    if std::env::var("KLAB_REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!("KLAB_REQUIRE_NVRTC=1 but libnvrtc.so.13 cannot be loaded");
    }
    eprintln!("SKIPPED {test}: NVRTC not found");
    false
}

#[test]
fn every_example_compiles_with_nvrtc() {
    if !nvrtc_or_skip("every_example_compiles_with_nvrtc") {
        return;
    }
    for p in examples() {
        let m = manifest::load(&p).unwrap();
        let spec = klab_cuda::nvrtc::CompileSpec::for_kernel(
            &m,
            &m.kernels[0],
            klab_cuda::nvrtc::DEFAULT_ARCH,
        )
        .unwrap();
        let c = klab_cuda::nvrtc::compile(&spec, &klab_cuda::nvrtc::Cache::disabled())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let names: Vec<String> = c.ptxas_resources().into_iter().map(|r| r.kernel).collect();
        // Every launch's entry, a sequence's too.
        for l in m.kernels.iter().flat_map(|k| k.launches()) {
            assert!(
                names.iter().any(|n| n == l.entry),
                "{}: {} in {names:?}",
                p.display(),
                l.entry
            );
        }
    }
}

/// The example's C reference, compiled (None, said loudly, without a C compiler).
fn reference(name: &str) -> Option<klab_tools::cref::CReference> {
    let (path, m) = load(name);
    c_reference(name, &path, &m.kernels[0].op)
}

/// `op`'s C reference, declared in the manifest at `path`, compiled (None, said loudly,
/// without a C compiler).
fn c_reference(
    name: &str,
    path: &Path,
    op: &std::sync::Arc<klab_spec::declared::DeclaredOp>,
) -> Option<klab_tools::cref::CReference> {
    let klab_spec::declared::ReferenceSpec::C(s) = &op.spec.reference else {
        panic!("{name}: not a C reference")
    };
    let (file, function) = s.rsplit_once(':').unwrap();
    let spec = klab_tools::cref::CReferenceSpec {
        source: path.parent().unwrap().join(file),
        function: function.into(),
        params: klab_tools::cref::params_for(op),
        working: op.spec.working_precision(),
    };
    match klab_tools::cref::CReference::build(&spec, None) {
        Ok(r) => Some(r),
        Err(klab_tools::cref::CRefError::Compiler { why, .. })
            if std::env::var("KLAB_REQUIRE_CC").as_deref() != Ok("1") =>
        {
            eprintln!("SKIPPED the {name} reference: no C compiler ({why})");
            None
        }
        Err(e) => panic!("{name}: {e}"),
    }
}

fn bytes<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|x| f(*x)).collect()
}

#[test]
fn the_argmax_reference_takes_the_first_maximum_and_the_first_nan() {
    let Some(r) = reference("argmax") else { return };
    let rows: [&[f32]; 5] = [
        &[1.0, 3.0, 3.0, 2.0],
        &[f32::NEG_INFINITY; 4],
        &[1.0, f32::NAN, 5.0, f32::NAN],
        &[-0.0, 0.0, -0.0, 0.0],
        &[f32::NAN, 9.0, 1.0, 2.0],
    ];
    let x: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    let mut xb = bytes(&x, f32::to_le_bytes);
    let mut out = vec![0u8; 4 * rows.len()];
    r.call(&mut [&mut xb, &mut out], &[rows.len() as i64, 4], &[])
        .unwrap();
    let got: Vec<i32> = out
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [1, 0, 1, 0, 0]);
}

fn bf16(x: f32) -> u16 {
    // Round to nearest even on the f32 bits (the inputs here are finite).
    let u = x.to_bits();
    ((u + 0x7fff + ((u >> 16) & 1)) >> 16) as u16
}

#[test]
fn the_gelu_reference_rounds_gelu_to_bf16() {
    let Some(r) = reference("gelu") else { return };
    let xs: Vec<f32> = vec![0.0, -0.0, 1.0, -1.0, 3.0, -5.0, 6.0, 0.5];
    let x: Vec<u16> = xs.iter().map(|v| bf16(*v)).collect();
    let mut xb = bytes(&x, u16::to_le_bytes);
    let mut yb = vec![0u8; 2 * x.len()];
    r.call(&mut [&mut xb, &mut yb], &[x.len() as i64], &[])
        .unwrap();
    let y: Vec<u16> = yb
        .chunks(2)
        .map(|c| u16::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // GELU(1) = 0.8413447, GELU(-1) = -0.1586553, GELU(3) = 2.9959502,
    // GELU(-5) = -1.4333e-6, GELU(6) = 6 (to bf16), GELU(0.5) = 0.3457312.
    let want: Vec<u16> = [
        0.0f32,
        -0.0,
        0.841_344_7,
        -0.158_655_3,
        2.995_950_2,
        -1.433_3e-6,
        6.0,
        0.345_731_2,
    ]
    .iter()
    .map(|v| bf16(*v))
    .collect();
    assert_eq!(y, want);
}

#[test]
fn the_gemm_reference_multiplies_ragged_matrices() {
    let Some(r) = reference("gemm") else { return };
    let (m, n, k) = (3usize, 5usize, 7usize);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 5) as f32 - 2.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 3) as f32 - 1.0).collect();
    let mut want = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
        }
    }
    let (mut ab, mut bb) = (bytes(&a, f32::to_le_bytes), bytes(&b, f32::to_le_bytes));
    let mut cb = vec![0u8; 4 * m * n];
    r.call(
        &mut [&mut ab, &mut bb, &mut cb],
        &[m as i64, n as i64, k as i64],
        &[],
    )
    .unwrap();
    assert_eq!(cb, bytes(&want, f32::to_le_bytes));
}

#[test]
fn the_stencil_reference_clamps_every_tap_to_the_image() {
    let Some(r) = reference("stencil") else {
        return;
    };
    // Small integers: every sum is exact in f32 and double alike. An image one pixel high
    // or wide reads its single row or column for every tap.
    for (h, w) in [(5usize, 7usize), (1, 6), (4, 1), (1, 1)] {
        let img: Vec<f32> = (0..h * w).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        let wt: Vec<f32> = (0..25).map(|i| ((i * 3) % 5) as f32 - 2.0).collect();
        let at = |y: i64, x: i64| {
            img[(y.clamp(0, h as i64 - 1) * w as i64 + x.clamp(0, w as i64 - 1)) as usize]
        };
        let mut want = vec![0f32; h * w];
        for y in 0..h as i64 {
            for x in 0..w as i64 {
                want[(y * w as i64 + x) as usize] = (0..25)
                    .map(|t| wt[t as usize] * at(y + t / 5 - 2, x + t % 5 - 2))
                    .sum();
            }
        }
        let (mut ib, mut wb) = (bytes(&img, f32::to_le_bytes), bytes(&wt, f32::to_le_bytes));
        let mut ob = vec![0u8; 4 * h * w];
        r.call(&mut [&mut ib, &mut wb, &mut ob], &[h as i64, w as i64], &[])
            .unwrap();
        assert_eq!(ob, bytes(&want, f32::to_le_bytes), "H={h} W={w}");
    }
}

#[test]
fn the_sort_reference_sorts_each_tile_of_1024_keys_unsigned() {
    let Some(r) = reference("sort") else { return };
    let n = 2500usize;
    let keys: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ (i << 31))
        .collect();
    let mut kb = bytes(&keys, u32::to_le_bytes);
    let mut ob = vec![0u8; 4 * n];
    r.call(&mut [&mut kb, &mut ob], &[n as i64], &[]).unwrap();
    let got: Vec<u32> = ob
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut want = keys.clone();
    for t in want.chunks_mut(1024) {
        t.sort_unstable();
    }
    assert_eq!(got, want);
    assert!(
        keys.iter().any(|k| *k >= 1 << 31),
        "keys past 2^31 are tested"
    );
}

#[test]
fn the_embedding_reference_adds_the_token_row_and_the_position_row() {
    let Some(r) = reference("embedding") else {
        return;
    };
    let (b, t, c, v) = (2usize, 3usize, 4usize, 5usize);
    // Both ends of the table's domain and a repeated id.
    let ids: Vec<i32> = vec![0, 4, 4, 2, 0, 1];
    let wte: Vec<f32> = (0..v * c).map(|i| i as f32 * 0.5).collect();
    let wpe: Vec<f32> = (0..t * c).map(|i| 100.0 + i as f32).collect();
    let mut want = vec![0f32; b * t * c];
    for bt in 0..b * t {
        for k in 0..c {
            want[bt * c + k] = wte[ids[bt] as usize * c + k] + wpe[(bt % t) * c + k];
        }
    }
    let mut out = vec![0u8; 4 * b * t * c];
    let (mut ib, mut wb, mut pb) = (
        bytes(&ids, i32::to_le_bytes),
        bytes(&wte, f32::to_le_bytes),
        bytes(&wpe, f32::to_le_bytes),
    );
    r.call(
        &mut [&mut out, &mut ib, &mut wb, &mut pb],
        &[b as i64, t as i64, c as i64, v as i64],
        &[],
    )
    .unwrap();
    assert_eq!(out, bytes(&want, f32::to_le_bytes));
}

#[test]
fn the_spmv_reference_multiplies_a_csr_matrix_in_both_precisions() {
    let Some(r) = reference("spmv") else {
        return;
    };
    // Three rows: two entries, none (an empty row), one; columns repeat.
    let (rows, cols) = (3usize, 4usize);
    let row_ptr: Vec<i32> = vec![0, 2, 2, 3];
    let col: Vec<i32> = vec![3, 0, 3];
    let val: Vec<f32> = vec![2.0, -1.0, 0.5];
    let x: Vec<f32> = vec![10.0, 20.0, 30.0, 1.0 + f32::EPSILON];
    let want: Vec<f32> = vec![2.0 * x[3] - 10.0, 0.0, 0.5 * x[3]];
    let run = |p: Option<klab_spec::rule::Precision>| {
        let mut y = vec![0xffu8; 4 * rows];
        let (mut a, mut b, mut c, mut d) = (
            bytes(&row_ptr, i32::to_le_bytes),
            bytes(&col, i32::to_le_bytes),
            bytes(&val, f32::to_le_bytes),
            bytes(&x, f32::to_le_bytes),
        );
        let mut bufs: [&mut [u8]; 5] = [&mut y, &mut a, &mut b, &mut c, &mut d];
        let ints = [rows as i64, cols as i64, 3];
        match p {
            None => r.call(&mut bufs, &ints, &[]).unwrap(),
            Some(p) => r.call_in(p, &mut bufs, &ints, &[]).unwrap(),
        }
        y
    };
    assert_eq!(run(None), bytes(&want, f32::to_le_bytes));
    // Its rule is reference-error: the same program, built a second time in float.
    assert_eq!(
        run(Some(klab_spec::rule::Precision::F32)),
        bytes(&want, f32::to_le_bytes)
    );
}

#[test]
fn the_topk_reference_orders_by_total_order_with_ties_to_the_lowest_column() {
    let Some(r) = reference("topk") else {
        return;
    };
    // One row: a tie (2.0 twice), both zeros, a NaN (largest in totalOrder), -inf.
    let x: Vec<f32> = vec![2.0, -0.0, f32::NAN, 0.0, 2.0, f32::NEG_INFINITY];
    let k = 8usize;
    let mut values = vec![0u8; 4 * k];
    let mut indices = vec![0u8; 4 * k];
    let mut xb = bytes(&x, f32::to_le_bytes);
    r.call(
        &mut [&mut xb, &mut values, &mut indices],
        &[1, x.len() as i64, k as i64],
        &[],
    )
    .unwrap();
    let idx: Vec<i32> = indices
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(idx, [2, 0, 4, 3, 1, 5, -1, -1]);
    let bits: Vec<u32> = values
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(bits[0], f32::NAN.to_bits());
    assert_eq!(
        &bits[1..6],
        &[0x4000_0000, 0x4000_0000, 0, 0x8000_0000, 0xff80_0000]
    );
    assert_eq!(
        &bits[6..],
        &[0xff80_0000, 0xff80_0000],
        "past the row: -inf"
    );
}

#[test]
fn the_staged_layer_norm_reference_writes_the_means_rstds_and_rows() {
    let Some(r) = reference("layernorm_staged") else {
        return;
    };
    // Two rows of three: 1 2 3 (mean 2, variance 2/3) and a constant row (variance 0).
    let x: Vec<f32> = vec![1.0, 2.0, 3.0, 5.0, 5.0, 5.0];
    let eps = 1e-5f32 as f64; // the f32 scalar, as the reference widens it
    let inv = [1.0 / (2.0f64 / 3.0 + eps).sqrt(), 1.0 / eps.sqrt()];
    let want_y: Vec<f32> = [-inv[0], 0.0, inv[0], 0.0, 0.0, 0.0]
        .iter()
        .map(|v| *v as f32)
        .collect();
    let (mut xb, mut y, mut mean, mut rstd) = (
        bytes(&x, f32::to_le_bytes),
        vec![0xffu8; 24],
        vec![0xffu8; 8],
        vec![0xffu8; 8],
    );
    // The operation's parameter order: x, y, mean, rstd, rows, cols, eps.
    let mut bufs: [&mut [u8]; 4] = [&mut xb, &mut y, &mut mean, &mut rstd];
    r.call(&mut bufs, &[2, 3], &[eps]).unwrap();
    assert_eq!(y, bytes(&want_y, f32::to_le_bytes));
    assert_eq!(mean, bytes(&[2.0f32, 5.0], f32::to_le_bytes));
    assert_eq!(
        rstd,
        bytes(&[inv[0] as f32, inv[1] as f32], f32::to_le_bytes)
    );
}

/// examples/exploits/declared.toml: the exploit audit's cheats in two declared operations.
fn declared_exploits() -> (PathBuf, Manifest) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/exploits/declared.toml");
    let m = manifest::load(&p).unwrap_or_else(|e| panic!("{e}"));
    (p, m)
}

#[test]
fn the_declared_exploits_pair_each_exploit_with_its_control_and_compile() {
    let (p, m) = declared_exploits();
    // One operation per reference.
    let ops: std::collections::BTreeSet<String> = m
        .kernels
        .iter()
        .map(|k| format!("{:?}", k.op.spec.reference))
        .collect();
    assert!(ops.len() >= 2, "{ops:?}");
    for k in &m.kernels {
        let control = k.name.replacen("ex_", "ctl_", 1);
        if k.name.starts_with("ex_") {
            assert!(k.exploit.is_some(), "{} has no exploit label", k.name);
            let c = m.kernels.iter().find(|c| c.name == control);
            assert!(c.is_some_and(|c| c.exploit.is_none()), "{}", k.name);
        } else {
            assert!(
                k.exploit.is_none() && k.name.starts_with("ctl_"),
                "{}",
                k.name
            );
        }
    }
    if !nvrtc_or_skip("the_declared_exploits_pair_each_exploit_with_its_control_and_compile") {
        return;
    }
    let spec = klab_cuda::nvrtc::CompileSpec::for_kernel(
        &m,
        &m.kernels[0],
        klab_cuda::nvrtc::DEFAULT_ARCH,
    )
    .unwrap();
    let c = klab_cuda::nvrtc::compile(&spec, &klab_cuda::nvrtc::Cache::disabled())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let names: Vec<String> = c.ptxas_resources().into_iter().map(|r| r.kernel).collect();
    for l in m.kernels.iter().flat_map(|k| k.launches()) {
        assert!(
            names.iter().any(|n| n == l.entry),
            "{} in {names:?}",
            l.entry
        );
    }
}

/// One of declared.toml's C references, by its operation's kernels' names.
fn exploit_reference(name: &str) -> Option<klab_tools::cref::CReference> {
    let (path, m) = declared_exploits();
    let k = m.kernels.iter().find(|k| k.name.contains(name)).unwrap();
    c_reference(name, &path, &k.op)
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn the_softmax_and_silu_references_compute_their_operations() {
    if let Some(r) = exploit_reference("softmax") {
        let x: [f32; 6] = [1.0, 2.0, 3.0, -1e30, 0.0, f32::NEG_INFINITY];
        let mut xb = bytes(&x, f32::to_le_bytes);
        let mut yb = vec![0u8; 24];
        r.call(&mut [&mut xb, &mut yb], &[2, 3], &[]).unwrap();
        let y = f32s(&yb);
        let e = [(-2f64).exp(), (-1f64).exp(), 1.0];
        let s: f64 = e.iter().sum();
        for (got, want) in y[..3].iter().zip(e.iter().map(|v| (v / s) as f32)) {
            assert_eq!(*got, want);
        }
        // A row of one finite maximum: 0, 1, 0 (exp of -inf is 0).
        assert_eq!(&y[3..], &[0.0, 1.0, 0.0]);
    }
    if let Some(r) = exploit_reference("silu") {
        let x: [f32; 4] = [0.0, 1.0, -2.0, 1e30];
        let mut xb = bytes(&x, f32::to_le_bytes);
        let mut yb = vec![0u8; 16];
        r.call(&mut [&mut xb, &mut yb], &[4], &[]).unwrap();
        let want: Vec<f32> = x
            .iter()
            .map(|v| (f64::from(*v) / (1.0 + (-f64::from(*v)).exp())) as f32)
            .collect();
        assert_eq!(f32s(&yb), want);
    }
}

/// examples/calibration: the A/A pair is one entry under two names, the delayed copies are
/// instances of the same template, and the source compiles.
#[test]
fn the_calibration_kernels_pair_one_entry_and_compile() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/calibration/calibration.toml");
    let m = manifest::load(&p).unwrap_or_else(|e| panic!("{e}"));
    let entry = |name: &str| {
        m.kernels
            .iter()
            .find(|k| k.name == name)
            .map(|k| k.entry.clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(entry("copy_a"), entry("copy_b"));
    assert_eq!(entry("copy_a"), "copy_delay<0>");
    assert_eq!(entry("copy_slow260"), "copy_delay<260>");
    if !nvrtc_or_skip("the_calibration_kernels_pair_one_entry_and_compile") {
        return;
    }
    for k in &m.kernels {
        let spec = klab_cuda::nvrtc::CompileSpec::for_kernel(&m, k, klab_cuda::nvrtc::DEFAULT_ARCH)
            .unwrap();
        klab_cuda::nvrtc::compile(&spec, &klab_cuda::nvrtc::Cache::disabled())
            .unwrap_or_else(|e| panic!("{}: {}: {e}", p.display(), k.name));
    }
}

/// examples/triton/softmax.cu, the CUDA counterpart of the Triton softmax (its manifest is
/// written by examples/triton/export.py beside the Triton kernels'), compiles with NVRTC and
/// has its entry.
#[test]
fn the_triton_examples_cuda_softmax_compiles_with_nvrtc() {
    if !nvrtc_or_skip("the_triton_examples_cuda_softmax_compiles_with_nvrtc") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/triton");
    let text = r#"
source = "softmax.cu"
[[kernel]]
name = "softmax_cuda"
entry = "softmax_cuda"
operation = "declared"
params = ["y", "x", "rows:i32", "cols:i32"]
[kernel.op]
grid = ["rows"]
block = ["256"]
useful_bytes = "2 * rows * cols * 4"
reference = { command = ["python3", "-m", "klab.reference", "ref.py:softmax"] }
sizes.rows = { values = [1, 3, 64] }
sizes.cols = {}
buffers.x = { dtype = "f32", len = "rows * cols", role = "in", shape = ["rows", "cols"] }
buffers.y = { dtype = "f32", len = "rows * cols", role = "out", shape = ["rows", "cols"], compare = { allclose = { atol = 1e-6, rtol = 1e-4 } } }
"#;
    let m = manifest::parse("softmax_cuda.toml", text, manifest::Files::Dir(&dir)).unwrap();
    let spec = klab_cuda::nvrtc::CompileSpec::for_kernel(
        &m,
        &m.kernels[0],
        klab_cuda::nvrtc::DEFAULT_ARCH,
    )
    .unwrap();
    let c = klab_cuda::nvrtc::compile(&spec, &klab_cuda::nvrtc::Cache::disabled())
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = c.ptxas_resources().into_iter().map(|r| r.kernel).collect();
    assert!(names.iter().any(|n| n == "softmax_cuda"), "{names:?}");
}
