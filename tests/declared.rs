//! Declared operations without a GPU: the layer-norm example's manifest, its C reference
//! (compiled by the system C compiler) and its CUDA source (compiled by NVRTC when
//! present), and `klab check` naming the field an incomplete manifest lacks.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use klab_spec::declared::builtin::OpKind;
use klab_spec::registry::{self, Scope};

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
        let op = decl.op.as_ref();
        assert_eq!(op.params.len(), 5);
        assert_eq!(decl.known_broken.is_some(), decl.name != "layernorm");
        let shapes = klab_engine::declared::ladder(op).unwrap();
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

/// `function` of the C file `source` built as `decl`'s reference into `cache`; None (the
/// test `test` skipping, and saying so) where this machine has no C compiler and
/// KLAB_REQUIRE_CC is not 1.
fn c_reference(
    decl: &klab_spec::manifest::KernelDecl,
    source: &Path,
    function: &str,
    cache: &Path,
    test: &str,
) -> Option<klab_tools::cref::CReference> {
    let op = decl.op.as_ref();
    let spec = klab_tools::cref::CReferenceSpec {
        source: source.to_path_buf(),
        function: function.into(),
        params: klab_tools::cref::params_for(op),
        working: op.spec.working_precision(),
    };
    match klab_tools::cref::CReference::build(&spec, Some(cache)) {
        Ok(r) => Some(r),
        Err(klab_tools::cref::CRefError::Compiler { why, .. })
            if std::env::var("KLAB_REQUIRE_CC").as_deref() != Ok("1") =>
        {
            eprintln!("SKIPPED {test}: no C compiler ({why})");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_c_reference_compiles_and_computes_a_layer_norm() {
    let (_, decl) = registry::resolve(
        &format!("{}:layernorm", example().display()),
        Scope::Default,
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let Some(r) = c_reference(
        &decl,
        &example().parent().unwrap().join("layernorm_ref.c"),
        "layernorm_ref",
        tmp.path(),
        "the_c_reference_compiles_and_computes_a_layer_norm",
    ) else {
        return;
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
    use klab_engine::reference::Reference;
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
            "--n sets an operation's one size variable; this one has 2 (cols, rows)",
        ),
        (
            vec!["profile", k.as_str(), "--n", "5"],
            "--n sets an operation's one size variable; this one has 2 (cols, rows)",
        ),
    ] {
        let o = klab().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
    }
    let (_, decl) = registry::resolve(&k, Scope::Default).unwrap();
    let bench = decl.op.spec.bench.clone().unwrap();
    assert_eq!(bench["rows"], 16384);
    assert_eq!(bench["cols"], 4096);
}

/// y = a * x through a Python program (standard library only: a tiny .npy reader and
/// writer), as a manifest's `reference = { command = [...] }` declares it.
const SCALE_REF_PY: &str = r#"
import ast, json, os, struct
d = os.environ['KLAB_REF_DIR']
v = json.load(open(os.path.join(d, 'params.json')))['values']
b = open(os.path.join(d, 'x.npy'), 'rb').read()
n = struct.unpack('<H', b[8:10])[0]
h = ast.literal_eval(b[10:10 + n].decode('latin1'))
assert h['descr'] == '<f4' and h['shape'] == (v['n'],), h
x = struct.unpack('<%df' % v['n'], b[10 + n:])
y = struct.pack('<%df' % v['n'], *[v['a'] * e for e in x])
dct = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % v['n']
pad = 64 - (10 + len(dct) + 1) % 64
hd = (dct + ' ' * pad + '\n').encode('latin1')
open(os.path.join(d, 'y.npy'), 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hd)) + hd + y)
"#;

const SCALE_TOML: &str = r#"
source = "scale.cu"
[[kernel]]
name = "scale"
entry = "scale"
operation = "declared"
params = ["x", "y", "n:i32", "a:f32"]
[kernel.op]
grid = ["ceil_div(n, 64)"]
block = ["64"]
useful_bytes = "8 * n"
reference = { command = ["python3", "scale_ref.py"] }
sizes.n = {}
buffers.x = { dtype = "f32", len = "n", role = "in" }
buffers.y = { dtype = "f32", len = "n", role = "out", compare = { allclose = { atol = 1e-6, rtol = 1e-6 } } }
scalars.a = { type = "f32", values = [0.5, 3.0] }
"#;

/// A folder holding `scale.cu`, the kernel [`SCALE_TOML`] declares.
fn scale_source() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("scale.cu"),
        "extern \"C\" __global__ void scale(const float *x, float *y, int n, float a) {}\n",
    )
    .unwrap();
    tmp
}

fn scale_args(a: &[klab_engine::backend::host::HostArg]) -> (usize, usize, usize, f32) {
    use klab_engine::backend::host::HostArg;
    match a {
        [HostArg::Buffer(x), HostArg::Buffer(y), HostArg::I32(n), HostArg::F32(s)] => {
            (*x, *y, *n as usize, *s)
        }
        _ => panic!("{a:?}"),
    }
}

fn scale_good(mem: &mut [Vec<u32>], a: &[klab_engine::backend::host::HostArg], _: u64) {
    scale_first(mem, a, |n| n);
}

/// Skips the last elements when n is not a multiple of the 64-thread block.
fn scale_drops_tail(mem: &mut [Vec<u32>], a: &[klab_engine::backend::host::HostArg], _: u64) {
    scale_first(mem, a, |n| n / 64 * 64);
}

/// y[i] = a * x[i] for the first `written(n)` elements.
fn scale_first(
    mem: &mut [Vec<u32>],
    a: &[klab_engine::backend::host::HostArg],
    written: fn(usize) -> usize,
) {
    let (x, y, n, s) = scale_args(a);
    let xs = mem[x][..written(n)].to_vec();
    for (out, v) in mem[y].iter_mut().zip(xs) {
        *out = (s * f32::from_bits(v)).to_bits();
    }
}

/// The command reference from manifest to verdict, on the host backend: `klab check`
/// itself needs a GPU, so this runs its library path (the manifest through the registry,
/// the reference built as `klab check` builds it, the declared check's cases).
#[test]
fn a_command_reference_checks_a_declared_kernel_through_npy_files() {
    let python = std::process::Command::new("python3")
        .args(["-c", "import json"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !python {
        eprintln!(
            "SKIPPED a_command_reference_checks_a_declared_kernel_through_npy_files: no python3"
        );
        return;
    }
    use klab_engine::backend::Backend;
    let tmp = scale_source();
    let dir = tmp.path();
    std::fs::write(dir.join("scale_ref.py"), SCALE_REF_PY).unwrap();
    std::fs::write(dir.join("scale.toml"), SCALE_TOML).unwrap();
    let spec = format!("{}:scale", dir.join("scale.toml").display());
    let (_, decl) = registry::resolve(&spec, Scope::Default).unwrap();
    let op = decl.op.clone();
    let reference = klab_tools::reference::build(&op, dir).unwrap();
    assert_eq!(
        reference.describe(),
        "command reference python3 scale_ref.py"
    );
    let opts = klab_engine::check::CheckOptions {
        seed: 1,
        sizes: None,
        shapes: None,
        quick: false,
        resume_after: 0,
    };
    let check = |f: klab_engine::backend::host::GeneralKernelFn| {
        let mut b = klab_engine::backend::host::HostBackend::new().with_general_kernel("scale", f);
        let k = [b.kernel("scale").unwrap()];
        klab_engine::check::run(&mut b, &decl, &k, reference.clone(), &opts, &mut |_| {})
    };
    let good = check(scale_good).unwrap();
    assert!(good.passed(), "{}", good.render());
    assert!(good.cases.len() > 10, "{}", good.render());
    assert_eq!(
        good.operation,
        "declared, reference: command reference python3 scale_ref.py"
    );
    let bad = check(scale_drops_tail).unwrap();
    assert!(!bad.passed());
    let f = bad.cases.iter().find(|c| !c.pass).unwrap();
    assert!(f.detail.contains("got NaN"), "{}", f.detail);
    // A reference that fails stops the check with one line naming the command.
    std::fs::write(
        dir.join("scale_ref.py"),
        "import sys\nsys.exit('no numpy here')\n",
    )
    .unwrap();
    let e = check(scale_good).unwrap_err().to_string();
    assert!(
        e.contains("the reference failed: command reference python3 scale_ref.py: exited with code 1; stderr ends: no numpy here"),
        "{e}"
    );
}

#[test]
fn a_bad_command_reference_is_one_line_naming_its_field() {
    let tmp = scale_source();
    let dir = tmp.path();
    for (from, to, needle) in [
        (
            "{ command = [\"python3\", \"scale_ref.py\"] }",
            "{ command = [] }",
            "kernel[0].op.reference: command needs a program",
        ),
        (
            "{ command = [\"python3\", \"scale_ref.py\"] }",
            "{ command = { argv = [\"python3\"], timeout_s = 0 } }",
            "kernel[0].op.reference: timeout_s = 0 is not 1 to 86400 seconds",
        ),
        (
            "{ command = [\"python3\", \"scale_ref.py\"] }",
            "{ kernel = \"other.toml:k\" }",
            "reference.kernel runs on a device",
        ),
    ] {
        let m = dir.join("m.toml");
        std::fs::write(&m, SCALE_TOML.replacen(from, to, 1)).unwrap();
        let o = klab().arg("check").arg(&m).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        if needle.starts_with("kernel[0]") {
            assert!(err.contains(needle), "{needle}: {err}");
        } else {
            // Refused when the reference is built, which needs the device first.
            let (_, decl) = registry::resolve(&m.display().to_string(), Scope::Default).unwrap();
            let e = klab_tools::reference::build(&decl.op, dir)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains(needle), "{e}");
        }
    }
}

/// Whether a C compiler is here (else the test says it skipped, unless KLAB_REQUIRE_CC=1).
fn cc_or_skip(test: &str) -> bool {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let found = std::process::Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert_ne!(
            std::env::var("KLAB_REQUIRE_CC").as_deref(),
            Ok("1"),
            "KLAB_REQUIRE_CC=1 but no C compiler '{cc}'"
        );
        eprintln!("SKIPPED {test}: no C compiler '{cc}'");
    }
    found
}

/// `klab check --plan MANIFEST`'s stdout, which must exit 0.
fn plan_of(manifest: &Path) -> String {
    let o = klab()
        .args(["check", "--plan"])
        .arg(manifest)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The large-shared fixture's tiles hold 25600 elements: the ladder straddles them (it took
/// the block's 1024 threads when the grid's growth was looked for only up to 4097).
#[test]
fn the_ladder_of_a_large_tile_straddles_its_boundaries() {
    if !cc_or_skip("the_ladder_of_a_large_tile_straddles_its_boundaries") {
        return;
    }
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/large-shared/reverse.toml");
    let out = plan_of(&manifest);
    for n in [25599, 25600, 25601, 51199, 51201, 89600, 102400] {
        assert!(out.contains(&format!("  n={n}: ")), "{n}: {out}");
    }
    assert!(!out.contains("  n=1025: "), "{out}");
}

/// `multiple = 4`: the plan holds multiples of 4 only, and a shape that is not one is
/// refused in one line before anything runs.
#[test]
fn sizes_declared_a_multiple_of_4_are_all_the_check_and_bench_use() {
    if !cc_or_skip("sizes_declared_a_multiple_of_4_are_all_the_check_and_bench_use") {
        return;
    }
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vector-loads/scale4.toml");
    let out = plan_of(&manifest);
    let sizes: Vec<u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("  n=")?.split(':').next()?.parse().ok())
        .collect();
    assert_eq!(
        sizes,
        [4, 8, 1020, 1024, 1028, 2044, 2052, 3584, 4096],
        "{out}"
    );
    let out = tempfile::tempdir().unwrap();
    let sweep = out.path().join("sweep");
    let m = manifest.to_str().unwrap();
    for args in [
        vec!["bench", m, "--shape", "n=1023"],
        vec!["check", m, "--shape", "n=1023"],
        // --n reached the timed workload unchecked (bench, profile, sweeps' n axis).
        vec!["bench", m, "--n", "1023"],
        vec!["profile", m, "--n", "1023"],
        vec![
            "sweep",
            m,
            "--axis",
            "n=1024,1023",
            "--slurm",
            "--dry-run",
            "--out",
        ],
    ] {
        let mut cmd = klab();
        cmd.args(&args);
        if args[0] == "sweep" {
            cmd.arg(&sweep);
        }
        let o = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("n = 1023 is not a multiple of 4"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    assert!(!sweep.exists(), "a refused sweep writes nothing");
}

#[test]
fn check_plan_lists_the_cases_and_runs_the_reference_without_a_gpu() {
    if !cc_or_skip("check_plan_lists_the_cases_and_runs_the_reference_without_a_gpu") {
        return;
    }
    let o = klab()
        .args(["check", "--plan"])
        .arg(format!("{}:layernorm", example().display()))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.starts_with("check plan: layernorm: "), "{out}");
    for needle in [
        "cols=257 rows=3: exact input, poison 0xff; random input seed",
        "special values",
        "determinism: ",
        "index overflow: ",
        // Its rows are declared independent: the reference computes a sample of them.
        " slices of rows (around each 2^31-element offset",
        // rows lists its values and has no max: the case grows it past them, and says so.
        "\n    past every listed value of sizes.rows: give a max where the kernel takes no larger size\n",
    ] {
        // Special values run only where every rule is bitwise; the layer norm's is allclose.
        assert_eq!(
            out.contains(needle),
            needle != "special values",
            "{needle}: {out}"
        );
    }
    // The same plan twice: the seeds are the check's, drawn from --seed.
    let again = klab()
        .args(["check", "--plan"])
        .arg(format!("{}:layernorm", example().display()))
        .output()
        .unwrap();
    assert_eq!(again.stdout, o.stdout);

    // A reference that crashes on the smallest shape is found here, before any GPU.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for f in ["layernorm.cu", "layernorm.toml"] {
        std::fs::copy(example().parent().unwrap().join(f), dir.join(f)).unwrap();
    }
    std::fs::write(
        dir.join("layernorm_ref.c"),
        "#include <stdint.h>\n#include <stdlib.h>\nvoid layernorm_ref(const float *x, float *y, int32_t rows, int32_t cols, float eps) { abort(); }\n",
    )
    .unwrap();
    for args in [&["check", "--plan"][..], &["check"][..]] {
        let o = klab()
            .args(args)
            .arg(format!(
                "{}:layernorm",
                dir.join("layernorm.toml").display()
            ))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("checked on the CPU before any device at cols=1 rows=3")
                && err.contains("signal 6"),
            "{err}"
        );
    }
}

#[test]
fn a_smallest_shape_this_machine_cannot_hold_skips_the_cpu_run_in_one_line() {
    if !cc_or_skip("a_smallest_shape_this_machine_cannot_hold_skips_the_cpu_run_in_one_line") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("k.cu"),
        "extern \"C\" __global__ void k(const unsigned long long *x, unsigned long long *y, long long n) {}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("r.c"),
        "#include <stdint.h>\nvoid r(const uint64_t *x, uint64_t *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = x[i]; }\n",
    )
    .unwrap();
    // 2^36 elements of 8 bytes in each buffer: 1.1 TB for the smallest (and only) shape.
    std::fs::write(
        dir.join("m.toml"),
        r#"source = "k.cu"
[[kernel]]
name = "k"
entry = "k"
operation = "declared"
params = ["x", "y", "n:i64"]
[kernel.op]
grid = ["ceil_div(n, 32)"]
block = ["32"]
useful_bytes = "16 * n"
reference = { c = "r.c:r" }
sizes.n = { values = [68719476736] }
buffers.x = { dtype = "u64", len = "n", role = "in" }
buffers.y = { dtype = "u64", len = "n", role = "out", compare = "exact" }
"#,
    )
    .unwrap();
    let o = klab()
        .args(["check", "--plan"])
        .arg(dir.join("m.toml"))
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    // One line, and no announcement of a run that will not happen.
    let says: Vec<&str> = err.lines().filter(|l| l.contains("k:")).collect();
    assert_eq!(says.len(), 1, "{err}");
    assert!(
        says[0].starts_with("klab check: k: the reference's run without a GPU is skipped: at n=68719476736, the smallest shape, it needs about")
            && says[0].contains("of host memory"),
        "{err}"
    );
}

#[test]
fn a_slices_declaration_the_reference_breaks_is_said_without_a_gpu() {
    if !cc_or_skip("a_slices_declaration_the_reference_breaks_is_said_without_a_gpu") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(
        dir.join("k.cu"),
        "extern \"C\" __global__ void k(const float *x, float *y, int rows, int cols) {}\n",
    )
    .unwrap();
    // Each row's output adds every row before it: the rows are not independent.
    std::fs::write(
        dir.join("r.c"),
        "#include <stdint.h>\nvoid r(const float *x, float *y, int32_t rows, int32_t cols) {\n  float acc = 0;\n  for (int32_t i = 0; i < rows; i++) { for (int32_t j = 0; j < cols; j++) acc += x[i * cols + j]; y[i] = acc; }\n}\n",
    )
    .unwrap();
    let manifest = |slices: &str| {
        format!(
            r#"source = "k.cu"
[[kernel]]
name = "k"
entry = "k"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32"]
[kernel.op]
grid = ["rows"]
block = ["32"]
useful_bytes = "4 * rows * cols + 4 * rows"
reference = {{ c = "r.c:r" }}
{slices}
sizes.rows = {{ values = [1, 3, 40] }}
sizes.cols = {{ values = [1, 5] }}
buffers.x = {{ dtype = "f32", len = "rows * cols", role = "in", shape = ["rows", "cols"] }}
buffers.y = {{ dtype = "f32", len = "rows", role = "out", shape = ["rows"], compare = "bitwise" }}
"#
        )
    };
    for slices in ["", "slices = \"rows\""] {
        std::fs::write(dir.join("m.toml"), manifest(slices)).unwrap();
        let o = klab()
            .args(["check", "--plan"])
            .arg(dir.join("m.toml"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        // The declaration only decides how the index-overflow case computes its reference:
        // one line says it will not be sampled, and the check goes on.
        assert_eq!(o.status.code(), Some(0), "{slices}: {err}");
        if slices.is_empty() {
            assert!(err.is_empty(), "{err}");
        } else {
            assert!(
                err.starts_with("klab check: k: the index-overflow case will not be sampled: slices = \"rows\" does not hold for the reference at cols=1 rows=40: computed on rows slices [20, 39] alone it gives y[20] = "),
                "{err}"
            );
            assert_eq!(err.lines().count(), 1, "one line: {err}");
        }
    }
}

/// What the device run would refuse is refused by `--plan` on a CPU: a trusted kernel as the
/// reference that is this kernel itself or names no kernel (it was resolved only in the
/// device's child), and a case's `.npy` data of the wrong length or dtype (read only when
/// the case ran).
#[test]
fn check_plan_resolves_a_gpu_reference_and_reads_the_users_data() {
    let tmp = scale_source();
    let dir = tmp.path();
    let manifest = |reference: &str, cases: &str| {
        let text = SCALE_TOML.replace(
            r#"reference = { command = ["python3", "scale_ref.py"] }"#,
            &format!("reference = {reference}\n{cases}"),
        );
        std::fs::write(dir.join("scale.toml"), text).unwrap();
    };
    // The trusted kernel: the same source under another manifest.
    std::fs::write(dir.join("trusted.toml"), SCALE_TOML).unwrap();
    let plan = |expect: Option<&str>| {
        let o = klab()
            .args(["check", "--plan"])
            .arg(format!("{}:scale", dir.join("scale.toml").display()))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        match expect {
            None => assert_eq!(o.status.code(), Some(0), "{err}"),
            Some(says) => {
                assert_eq!(o.status.code(), Some(1), "{err}");
                assert_eq!(err.trim().lines().count(), 1, "{err}");
                assert!(err.contains(says), "{says} not in {err}");
            }
        }
    };
    manifest(r#"{ kernel = "trusted.toml:scale" }"#, "");
    plan(None);
    manifest(r#"{ kernel = "scale.toml:scale" }"#, "");
    plan(Some("is this kernel itself"));
    manifest(r#"{ kernel = "nope.toml:scale" }"#, "");
    plan(Some("nope.toml"));
    let npy = |name: &str, dtype: klab_core::dtype::Dtype, n: u64| {
        let data = vec![0u8; n as usize * dtype.size_bytes()];
        let bytes = klab_core::npy::to_bytes(dtype, &[n], &data).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    use klab_core::dtype::Dtype;
    npy("x16.npy", Dtype::F32, 16);
    npy("x17.npy", Dtype::F32, 17);
    npy("x16f64.npy", Dtype::F64, 16);
    let case = |file: &str| {
        format!(r#"cases = [{{ shape = {{ n = 16 }}, inputs = {{ x = "{file}" }} }}]"#)
    };
    manifest(r#"{ kernel = "trusted.toml:scale" }"#, &case("x16.npy"));
    plan(None);
    manifest(r#"{ kernel = "trusted.toml:scale" }"#, &case("x17.npy"));
    plan(Some("holds 17 elements"));
    manifest(r#"{ kernel = "trusted.toml:scale" }"#, &case("x16f64.npy"));
    plan(Some("x16f64.npy"));
}

/// An f16 and a bf16 scalar reach a C reference as floats of their values: the shim
/// declares `float a, float b` (a raw-bits `uint16_t` would not compile against the
/// reference), and the engine hands it the values the kernel's parameters hold.
#[test]
fn half_precision_scalars_reach_a_c_reference_as_floats_of_their_values() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/half-scalars");
    let (_, decl) = registry::resolve(
        &format!("{}:axpb", fixture.join("axpb.toml").display()),
        Scope::Default,
    )
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let Some(r) = c_reference(
        &decl,
        &fixture.join("axpb_ref.c"),
        "axpb_ref",
        tmp.path(),
        "half_precision_scalars_reach_a_c_reference_as_floats_of_their_values",
    ) else {
        return;
    };
    use klab_core::dtype::Dtype;
    let (a, b) = (Dtype::F16.nearest(0.1), Dtype::Bf16.nearest(0.3));
    assert_eq!(a, 0.0999755859375);
    let x: Vec<f32> = (0..5).map(|i| i as f32 - 2.0).collect();
    let mut xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut yb = vec![0u8; x.len() * 4];
    r.call(&mut [&mut xb, &mut yb], &[x.len() as i64], &[a, b])
        .unwrap();
    let want: Vec<u8> = x
        .iter()
        .flat_map(|v| (a as f32).mul_add(*v, b as f32).to_le_bytes())
        .collect();
    assert_eq!(yb, want);
}
