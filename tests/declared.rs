//! Declared operations without a GPU: the layer-norm example's manifest, its C reference
//! (compiled by the system C compiler) and its CUDA source (compiled by NVRTC when
//! present), and `klab check` naming the field an incomplete manifest lacks.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use klab_core::manifest::OpKind;
use klab_core::registry::{self, Scope};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ops/layernorm/layernorm.toml")
}

fn klab() -> Command {
    let mut c = Command::cargo_bin("klab").unwrap();
    c.env_remove("KLAB_PARENT");
    c
}

#[test]
fn the_layer_norm_example_declares_three_kernels_two_of_them_labelled_bugs() {
    let spec = format!("{}", example().display());
    let kernels = registry::expand_all(&[spec], Scope::Default).unwrap();
    assert_eq!(kernels.len(), 3);
    for k in &kernels {
        let (_, decl) = registry::resolve(&k.spec(), Scope::Default).unwrap();
        assert_eq!(decl.operation, OpKind::Declared);
        let op = decl.declared.as_ref().unwrap();
        assert_eq!(op.params.len(), 5);
        assert_eq!(decl.known_broken.is_some(), decl.name != "layernorm");
        let shapes = klab_core::general::ladder(op).unwrap();
        // The grid does not depend on cols: its values come from the 256-thread block.
        for cols in [1, 255, 256, 257, 511, 513] {
            assert!(shapes.iter().any(|s| s["cols"] == cols), "cols = {cols}");
        }
    }
}

fn layernorm_f64(x: &[f32], rows: usize, cols: usize, eps: f32) -> Vec<f32> {
    let mut y = vec![0f32; x.len()];
    for r in 0..rows {
        let xr = &x[r * cols..(r + 1) * cols];
        let mean = xr.iter().map(|v| f64::from(*v)).sum::<f64>() / cols as f64;
        let var = xr
            .iter()
            .map(|v| (f64::from(*v) - mean) * (f64::from(*v) - mean))
            .sum::<f64>()
            / cols as f64;
        let inv = 1.0 / (var + f64::from(eps)).sqrt();
        for c in 0..cols {
            y[r * cols + c] = ((f64::from(xr[c]) - mean) * inv) as f32;
        }
    }
    y
}

#[test]
fn the_c_reference_compiles_and_computes_a_layer_norm() {
    let (_, decl) = registry::resolve(
        &format!("{}:layernorm", example().display()),
        Scope::Default,
    )
    .unwrap();
    let op = decl.declared.as_ref().unwrap();
    let spec = klab_tools::cref::CReferenceSpec {
        source: example().parent().unwrap().join("layernorm_ref.c"),
        function: "layernorm_ref".into(),
        params: klab_tools::cref::params_for(op),
    };
    let tmp = tempfile::tempdir().unwrap();
    let r = match klab_tools::cref::CReference::build(&spec, Some(tmp.path())) {
        Ok(r) => r,
        Err(klab_tools::cref::CRefError::Compiler { why, .. })
            if std::env::var("KLAB_REQUIRE_CC").as_deref() != Ok("1") =>
        {
            eprintln!(
                "SKIPPED the_c_reference_compiles_and_computes_a_layer_norm: no C compiler ({why})"
            );
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let (rows, cols) = (3usize, 33usize);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7 + 3) % 17) as f32 - 8.0)
        .collect();
    let mut xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut yb = vec![0u8; x.len() * 4];
    r.call(
        &mut [&mut xb, &mut yb],
        &[rows as i64, cols as i64],
        &[1e-5],
    )
    .unwrap();
    let want: Vec<u8> = layernorm_f64(&x, rows, cols, 1e-5)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(yb, want);
    use klab_core::general::Reference;
    assert!(r.describe().contains("layernorm_ref.c:layernorm_ref"));
}

#[test]
fn the_example_compiles_with_nvrtc() {
    if !klab_cuda::probe::nvrtc_present() {
        if std::env::var("KLAB_REQUIRE_NVRTC").as_deref() == Ok("1") {
            panic!("KLAB_REQUIRE_NVRTC=1 but libnvrtc.so.13 cannot be loaded");
        }
        eprintln!("SKIPPED the_example_compiles_with_nvrtc: NVRTC not found");
        return;
    }
    let dir = example().parent().unwrap().to_path_buf();
    let source = std::fs::read_to_string(dir.join("layernorm.cu")).unwrap();
    let spec =
        klab_cuda::nvrtc::CompileSpec::new("layernorm.cu", &source, klab_cuda::nvrtc::DEFAULT_ARCH);
    let c = klab_cuda::nvrtc::compile(&spec, &klab_cuda::nvrtc::Cache::disabled()).unwrap();
    let names: Vec<String> = c.ptxas_resources().into_iter().map(|r| r.kernel).collect();
    for k in ["layernorm", "layernorm_tail", "layernorm_race"] {
        assert!(names.iter().any(|n| n == k), "{k} in {names:?}");
    }
}

#[test]
fn an_incomplete_declared_manifest_is_one_line_naming_the_missing_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::copy(
        example().parent().unwrap().join("layernorm.cu"),
        dir.join("layernorm.cu"),
    )
    .unwrap();
    let text = std::fs::read_to_string(example()).unwrap();
    for (from, to, field) in [
        (
            "reference = { c = \"layernorm_ref.c:layernorm_ref\" }\n",
            "",
            "missing field `reference`",
        ),
        (
            ", compare = { allclose = { atol = 1e-4, rtol = 1e-4 } }",
            "",
            "ops.layernorm.buffers.y.compare",
        ),
        (
            "params = [\"x\", \"y\", \"rows:i32\", \"cols:i32\", \"eps:f32\"]",
            "params = [\"x\", \"rows:i32\", \"cols:i32\", \"eps:f32\"]",
            "kernel[0].params: buffer 'y'",
        ),
    ] {
        let m = dir.join("m.toml");
        std::fs::write(&m, text.replacen(from, to, 1)).unwrap();
        let o = klab().arg("check").arg(&m).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(field), "{field}: {err}");
    }
}

#[test]
fn a_declared_kernel_is_timed_and_profiled_at_its_bench_shape_never_at_an_n() {
    let k = format!("{}:layernorm", example().display());
    for (args, needle) in [
        (
            vec!["bench", k.as_str(), "--n", "5"],
            "--n is for the built-in operations",
        ),
        (
            vec!["profile", k.as_str(), "--n", "5"],
            "--n is for the built-in operations",
        ),
    ] {
        let o = klab().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
    }
    let (_, decl) = registry::resolve(&k, Scope::Default).unwrap();
    let bench = decl.declared.unwrap().spec.bench.clone().unwrap();
    assert_eq!(bench["rows"], 16384);
    assert_eq!(bench["cols"], 4096);
}
