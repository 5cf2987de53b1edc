//! The check's flow: sampled slices, a check resumed after a case, the user's `.npy` data,
//! and how each kernel is launched (shared memory opted in, launch parameters kept fixed).

use super::*;

/// [`good`], with the last row wrong.
fn wrong_last_row(mem: &mut [Vec<u32>], a: &[HostArg], n: u64) {
    good(mem, a, n);
    let (_, y, rows, _) = args(a);
    mem[y][rows - 1] = 12345.0f32.to_bits();
}

#[test]
fn a_sampled_workload_runs_the_reference_on_its_slices_and_names_failures_in_the_whole_buffer() {
    struct Seen(std::cell::RefCell<Vec<i64>>);
    impl Reference for Seen {
        fn run(&self, s: &Shape, b: &mut [&mut [u8]], i: &[i64], f: &[f64]) -> Result<(), String> {
            self.0.borrow_mut().push(s["rows"]);
            assert_eq!(b[0].len(), 4 * 5 * s["rows"] as usize, "the gathered rows");
            RowSum.run(s, b, i, f)
        }
        fn describe(&self) -> String {
            "a row sum that notes its shapes".into()
        }
    }
    let d = with(&MANIFEST.replace("sizes.rows = {}", "slices = \"rows\"\nsizes.rows = {}"));
    let seen = std::rc::Rc::new(Seen(Default::default()));
    // A million rows: the sample's runs (13,108 rows each, 65,536 elements of x) cover
    // part of them.
    let rows = 1_000_000;
    let shape = Shape::from([("rows".into(), rows), ("cols".into(), 5)]);
    let w = DeclaredWorkload::new(d, shape, InputCase::Uniform { seed: 1 }, 0, seen.clone())
        .unwrap()
        .sampled(3)
        .unwrap();
    let chosen = w.sample.as_ref().unwrap().chosen.clone();
    let last = rows as u64 - 1;
    assert!(chosen.len() < rows as usize / 2 && chosen.contains(&0) && chosen.contains(&last));
    let note = w.sample_note().unwrap();
    assert!(
        note.contains(&format!("{} of {rows} slices of rows", chosen.len())),
        "{note}"
    );
    for (kernel, fails) in [
        (good as crate::backend::host::GeneralKernelFn, false),
        (wrong_last_row, true),
    ] {
        let mut b = HostBackend::new().with_general_kernel("rowsum", kernel);
        let k = [b.kernel("rowsum").unwrap()];
        let mut bufs = w.create_slot(&mut b, 0).unwrap();
        w.poison(&mut b, &mut bufs, 0xff).unwrap();
        b.launch_all(&w.launches::<HostBackend>(&k, &bufs)).unwrap();
        b.synchronize().unwrap();
        let v = &w.judge(&mut b, &bufs).unwrap()[0].1;
        assert_eq!(
            v.elements,
            chosen.len() as u64,
            "only the sample is compared"
        );
        assert_eq!(v.passed(), !fails, "{v:?}");
        if fails {
            let f = v.first.as_ref().unwrap();
            assert_eq!(
                (f.index, f.coords.clone()),
                (last, vec![last]),
                "the whole buffer's place"
            );
            assert_eq!(v.failing, vec![last]);
        }
    }
    // The reference ran once, on the chosen rows alone.
    assert_eq!(*seen.0.borrow(), vec![chosen.len() as i64]);
}

/// y[r] = the sum of rows 0 to r of x: rows that are not independent.
struct Prefix;
impl Reference for Prefix {
    fn run(&self, _: &Shape, b: &mut [&mut [u8]], ints: &[i64], _: &[f64]) -> Result<(), String> {
        let (rows, cols) = (ints[0] as usize, ints[1] as usize);
        let x = |i: usize| f32::from_le_bytes(b[0][4 * i..4 * i + 4].try_into().unwrap());
        let mut acc = 0f32;
        let mut y = vec![0f32; rows];
        for (r, out) in y.iter_mut().enumerate() {
            acc += (0..cols).map(|c| x(r * cols + c)).sum::<f32>();
            *out = acc;
        }
        for (r, v) in y.iter().enumerate() {
            b[1][4 * r..4 * r + 4].copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }
    fn describe(&self) -> String {
        "a prefix sum over the rows".into()
    }
}
fn prefix(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    let (x, y, rows, cols) = args(a);
    let mut acc = 0f32;
    for r in 0..rows {
        acc += (0..cols)
            .map(|c| f32::from_bits(mem[x][r * cols + c]))
            .sum::<f32>();
        mem[y][r] = acc.to_bits();
    }
}

#[test]
fn a_slices_declaration_the_reference_does_not_honour_is_caught_before_any_sample_is_trusted() {
    let d = with(&MANIFEST.replace("sizes.rows = {}", "slices = \"rows\"\nsizes.rows = {}"));
    let shape = Shape::from([("rows".into(), 10), ("cols".into(), 5)]);
    let at = |r: std::rc::Rc<dyn Reference>| {
        DeclaredWorkload::new(d.clone(), shape.clone(), InputCase::Structural, 0, r).unwrap()
    };
    let why = at(std::rc::Rc::new(Prefix)).slices_disagree().unwrap();
    assert!(
            why.starts_with("slices = \"rows\" does not hold for the reference at cols=5 rows=10: computed on rows slices [5, 9] alone it gives y[5] = "),
            "{why}"
        );
    assert_eq!(at(std::rc::Rc::new(RowSum)).slices_disagree(), None);
    // Three slices cannot be tested by a strict subset of two: nothing is claimed.
    let three = Shape::from([("rows".into(), 3), ("cols".into(), 5)]);
    let w = DeclaredWorkload::new(
        d.clone(),
        three,
        InputCase::Structural,
        0,
        std::rc::Rc::new(Prefix),
    );
    assert_eq!(w.unwrap().slices_disagree(), None);
    // In a check the kernel (a right prefix sum) passes every case, and the index-overflow
    // case is not applicable: a sample of rows would have judged it against wrong values.
    let r = check_on_host(&d, prefix, Prefix).unwrap();
    let c = r.cases.iter().find(|c| c.case == "index overflow").unwrap();
    assert!(
        c.skipped
            && c.detail
                .starts_with("not applicable: slices = \"rows\" does not hold"),
        "{c:?}"
    );
    assert!(r.passed(), "{}", r.render());
}

/// `d` checked on the host with the good row sum from after case `resume_after`: the
/// cases started, the report, and the backend's calls.
fn resumed(
    d: &KernelDecl,
    resume_after: usize,
) -> (
    Vec<String>,
    crate::check::CheckReport,
    Vec<crate::backend::host::Call>,
) {
    let mut b = HostBackend::new().with_general_kernel("rowsum", good);
    let k = [b.kernel("rowsum").unwrap()];
    let opts = CheckOptions {
        seed: 1,
        sizes: None,
        shapes: None,
        quick: false,
        resume_after,
    };
    let mut started = Vec::new();
    b.calls.clear();
    let r = run(&mut b, d, &k, std::rc::Rc::new(RowSum), &opts, &mut |p| {
        if let crate::check::Progress::Starting(l) = p {
            started.push(l.to_string());
        }
    })
    .unwrap();
    (started, r, b.calls)
}

#[test]
fn a_check_resumed_after_a_case_runs_exactly_the_cases_after_it() {
    let run_from = |resume_after: usize| {
        let (started, r, _) = resumed(&decl(), resume_after);
        (started, r.cases)
    };
    let (all, every) = run_from(0);
    assert!(all.iter().any(|l| l.ends_with("determinism")), "{all:?}");
    for skip in [1, 5, all.len() - 1] {
        let (rest, cases) = run_from(skip);
        assert_eq!(rest, all[skip..], "resumed after {skip}");
        let after: Vec<_> = every
            .iter()
            .filter(|c| !all[..skip].contains(&c.case))
            .cloned()
            .collect();
        assert_eq!(cases, after, "resumed after {skip}");
    }
}

/// A check resumed at its determinism case opts the kernel in before that case's first
/// launch: the cases that did so before ran in another process.
#[test]
fn a_check_resumed_at_determinism_opts_in_before_its_first_launch() {
    use crate::backend::host::Call;
    let d = with(&MANIFEST.replace(
        "block = [\"32\"]",
        "block = [\"32\"]\ndynamic_shared_bytes = \"65536\"",
    ));
    let run_from = |resume_after: usize| {
        let (started, _, calls) = resumed(&d, resume_after);
        (started, calls)
    };
    let (all, _) = run_from(0);
    let at = all.iter().position(|l| l.ends_with("determinism")).unwrap();
    let (_, calls) = run_from(at);
    let first = |f: fn(&Call) -> bool| calls.iter().position(f);
    let opt_in = first(|c| matches!(c, Call::AllowDynamicShared { .. })).unwrap();
    let launch = first(|c| matches!(c, Call::Launch(_))).unwrap();
    assert!(opt_in < launch, "{calls:?}");
}

/// A block past the default 48 KiB of shared memory is launched opted in (as a program
/// must); past the opted-in limit it is refused naming that limit. It was refused at
/// the default limit, so a kernel staging 64 KiB in shared memory could not be checked.
#[test]
fn a_block_past_the_default_shared_memory_is_opted_in_and_past_the_opt_in_refused() {
    use crate::backend::host::Call;
    let prepared = |bytes: u32| {
        let d = with(&MANIFEST.replace(
            "block = [\"32\"]",
            &format!("block = [\"32\"]\ndynamic_shared_bytes = \"{bytes}\""),
        ));
        let shape = Shape::from([("rows".into(), 64), ("cols".into(), 5)]);
        let w = DeclaredWorkload::new(
            d,
            shape,
            InputCase::Uniform { seed: 1 },
            0,
            std::rc::Rc::new(RowSum),
        )
        .unwrap();
        let mut b = HostBackend::new().with_general_kernel("rowsum", drops_tail);
        let k = [b.kernel("rowsum").unwrap()];
        b.calls.clear();
        let r = crate::workload::prepare_launches(&mut b, &w, &k);
        (r, b.calls)
    };
    let (r, calls) = prepared(48 * 1024);
    r.unwrap();
    assert!(calls.is_empty(), "within the default limit: {calls:?}");
    let (r, calls) = prepared(100 * 1024);
    r.unwrap();
    assert_eq!(
        calls,
        [Call::AllowDynamicShared {
            entry: "rowsum".into(),
            bytes: 100 * 1024
        }]
    );
    let over = klab_core::device::DeviceLimits::hopper().max_shared_per_block_optin + 1;
    let (r, calls) = prepared(over);
    let e = r.unwrap_err().to_string();
    assert!(e.contains("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"), "{e}");
    assert!(calls.is_empty(), "{calls:?}");
}

#[test]
fn user_cases_add_shapes_and_run_on_the_users_npy_data() {
    let tmp = tempfile::tempdir().unwrap();
    let x: Vec<f32> = (0..10).map(|i| i as f32 * 0.5 - 2.0).collect();
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(
        tmp.path().join("x.npy"),
        klab_core::npy::to_bytes(Dtype::F32, &[2, 5], &bytes).unwrap(),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("k.cu"),
        klab_spec::testing::stand_in_source(MANIFEST),
    )
    .unwrap();
    let text = MANIFEST.replace(
            "sizes.cols = { values = [1, 5, 33] }",
            "sizes.cols = { values = [1, 5, 33] }\ncases = [{ shape = { rows = 2, cols = 5 }, inputs = { x = \"x.npy\" } }, { shape = { rows = 1000, cols = 7 } }]",
        );
    let parse = |text: &str| {
        klab_spec::manifest::parse("m.toml", text, klab_spec::manifest::Files::Dir(tmp.path()))
    };
    let d = parse(&text).unwrap().kernels[0].clone();
    let op = d.op.clone();
    let shapes = ladder(&op).unwrap();
    assert!(
        shapes.iter().any(|s| s["rows"] == 1000 && s["cols"] == 7),
        "an added shape"
    );
    let r = check_decl(&d, good);
    assert!(r.passed(), "{}", r.render());
    let data = r
        .cases
        .iter()
        .find(|c| c.case.contains("user data"))
        .unwrap();
    assert!(
        data.case
            .starts_with("cols=5 rows=2: user data (cases[0]: x = "),
        "{}",
        data.case
    );
    // The workload's input is the file's bytes.
    let w = DeclaredWorkload::new(
        d.clone(),
        [("rows".to_string(), 2), ("cols".to_string(), 5)].into(),
        InputCase::Data { case: 0 },
        0,
        std::rc::Rc::new(RowSum),
    )
    .unwrap();
    assert_eq!(w.inputs().unwrap()[0], bytes);
    // A kernel that skips the ragged tail fails on the user's data too.
    let r = check_decl(&d, drops_tail);
    assert!(r
        .cases
        .iter()
        .any(|c| c.case.contains("user data") && !c.pass));
    // A missing file, a shape without every variable, data for an output: the field.
    for (edit, field) in [
        ("x = \"x.npy\"", "cases[0].inputs.x"),
        ("shape = { rows = 1000, cols = 7 }", "cases[1].shape"),
        ("inputs = { x = \"x.npy\" }", "cases[0].inputs.y"),
    ] {
        let bad = match field {
            "cases[0].inputs.x" => text.replace(edit, "x = \"nope.npy\""),
            "cases[1].shape" => text.replace(edit, "shape = { rows = 1000 }"),
            _ => text.replace(edit, "inputs = { y = \"x.npy\" }"),
        };
        let e = parse(&bad).unwrap_err();
        assert!(e.field.ends_with(field), "{field}: {e}");
    }
    // A file of the wrong length is one error naming the buffer and both counts.
    let w = DeclaredWorkload::new(
        d,
        [("rows".to_string(), 3), ("cols".to_string(), 5)].into(),
        InputCase::Data { case: 0 },
        0,
        std::rc::Rc::new(RowSum),
    )
    .unwrap();
    let e = w.inputs().unwrap_err().message;
    assert!(
        e.contains("holds 10 elements (shape (2, 5))") && e.contains("15"),
        "{e}"
    );
}

#[test]
fn kernels_of_one_operation_launch_their_own_way_and_launch_parameters_stay_fixed() {
    const LN: &str = r#"
source = "k.cu"
[ops.ln]
grid = ["rows"]
block = ["bs"]
dynamic_shared_bytes = "4 * bs"
useful_bytes = "8 * rows * cols"
reference = { c = "ref.c:r" }
sizes.rows = { values = [1, 7] }
sizes.cols = {}
sizes.bs = { values = [32, 256], launch = true }
bench = { rows = 64, cols = 1024, bs = 256 }
buffers.x = { dtype = "f32", len = "rows * cols", role = "in" }
buffers.y = { dtype = "f32", len = "rows * cols", role = "out", compare = "bitwise" }
[[kernel]]
name = "ln"
entry = "ln"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32", "bs:i32"]
op = "ln"
[[kernel]]
name = "ln_128"
entry = "ln"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32", "bs:i32"]
op = "ln"
launch = { sizes = { bs = [128] } }
[[kernel]]
name = "ln_fixed"
entry = "ln_fixed"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32", "bs:i32"]
op = "ln"
launch = { block = ["64"], dynamic_shared_bytes = "0" }
"#;
    let parse_text = |text: &str| {
        let src = klab_spec::testing::stand_in_source(LN);
        klab_spec::manifest::parse(
            "m.toml",
            text,
            klab_spec::manifest::Files::Given(&|_| Ok(("k.cu".into(), src.clone().into()))),
        )
    };
    let m = parse_text(LN).unwrap();
    let sizes = |i: usize| m.kernels[i].op.spec.sizes["bs"].values.clone().unwrap();
    assert_eq!(sizes(0), [32, 256]);
    assert_eq!(sizes(1), [128]);
    assert_eq!(m.kernels[1].op.spec.bench.as_ref().unwrap()["bs"], 128);
    assert_eq!(m.kernels[0].op.spec.bench.as_ref().unwrap()["bs"], 256);
    assert_eq!(m.kernels[2].op.spec.block[0].source(), "64");
    let shapes = crate::declared::ladder(&m.kernels[1].op).unwrap();
    assert!(shapes.iter().all(|s| s["bs"] == 128), "{shapes:?}");
    // The overflow case grows the problem, never the block size.
    let base = shapes[shapes.len() / 2].clone();
    let big = crate::declared::overflow_shape(&m.kernels[0].op, &base, 1 << 31).unwrap();
    assert_eq!(big["bs"], base["bs"], "{big:?}");
    assert!(big["rows"] * big["cols"] > 1 << 31, "{big:?}");
    for (from, to, field, says) in [
        (
            "bs = [128]",
            "cols = [128]",
            "kernel[1].launch.sizes.cols",
            "problem size",
        ),
        (
            "bs = [128]",
            "depth = [128]",
            "kernel[1].launch.sizes.depth",
            "not a size variable",
        ),
        (
            "launch = true }",
            "launch = true, min = 1 }\nsizes.t = { launch = true }",
            "ops.ln.sizes.t",
            "give values",
        ),
    ] {
        let e = parse_text(&LN.replacen(from, to, 1)).unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(e.problem.contains(says), "{e}");
    }
}

/// y = a * x with `a` an f16 scalar: the kernel gets a's bits, and the reference the value
/// those bits hold (0.1 as an f16 is 0.0999755859375), so a correct kernel matches bitwise.
#[test]
fn a_half_precision_scalar_reaches_the_kernel_as_its_bits_and_the_reference_as_their_value() {
    const SCALE: &str = r#"
source = "k.cu"
[[kernel]]
name = "scale"
entry = "rowsum"
operation = "declared"
params = ["x", "y", "n:i32", "a:DTYPE"]
[kernel.op]
grid = ["ceil_div(n, 32)"]
block = ["32"]
useful_bytes = "8 * n"
reference = { c = "ref.c:scale_ref" }
sizes.n = { values = [1, 33] }
scalars.a = { type = "DTYPE", values = [0.1, -2.5, 1e-3] }
buffers.x = { dtype = "f32", len = "n", role = "in" }
buffers.y = { dtype = "f32", len = "n", role = "out", compare = "bitwise" }
"#;
    struct Scale;
    impl Reference for Scale {
        fn run(&self, _: &Shape, b: &mut [&mut [u8]], i: &[i64], f: &[f64]) -> Result<(), String> {
            let a = f[0] as f32;
            for e in 0..i[0] as usize {
                let x = f32::from_le_bytes(b[0][4 * e..4 * e + 4].try_into().unwrap());
                b[1][4 * e..4 * e + 4].copy_from_slice(&(a * x).to_le_bytes());
            }
            Ok(())
        }
        fn describe(&self) -> String {
            "a Rust scale".into()
        }
    }
    fn scale(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
        let (x, y, n, alpha) = match a {
            [HostArg::Buffer(x), HostArg::Buffer(y), HostArg::I32(n), HostArg::F16(bits)] => {
                (*x, *y, *n, klab_core::dtype::f16_to_f32(*bits))
            }
            [HostArg::Buffer(x), HostArg::Buffer(y), HostArg::I32(n), HostArg::Bf16(bits)] => {
                (*x, *y, *n, klab_core::dtype::bf16_to_f32(*bits))
            }
            _ => panic!("{a:?}"),
        };
        let xs: Vec<u32> = mem[x][..n as usize].to_vec();
        for (out, v) in mem[y].iter_mut().zip(xs) {
            *out = (alpha * f32::from_bits(v)).to_bits();
        }
    }
    for dtype in ["f16", "bf16"] {
        let d = with(&SCALE.replace("DTYPE", dtype));
        let r = check_on_host(&d, scale, Scale).unwrap();
        assert!(r.passed(), "{dtype}: {}", r.render());
    }
}

/// A kernel is held at load to the parameter sizes its compiled code declares: the row
/// sum's (x, y, rows, cols) loads against pointers and two ints, and is refused, before any
/// case, against a kernel whose last parameter is a 16-byte struct.
#[test]
fn a_kernel_whose_compiled_parameters_differ_is_refused_at_load() {
    let d = decl();
    let mut b = HostBackend::new()
        .with_general_kernel("rowsum", good)
        .with_parameter_sizes("rowsum", &[8, 8, 4, 4]);
    crate::workload::load_kernels(&mut b, &d).unwrap();
    let mut b = HostBackend::new()
        .with_general_kernel("rowsum", good)
        .with_parameter_sizes("rowsum", &[8, 8, 4, 16]);
    let e = crate::workload::load_kernels(&mut b, &d).err().unwrap();
    assert_eq!(
        e.message,
        "rowsum cannot take what the manifest passes: 'cols' is passed as i32 (4 bytes), but parameter 3 is 16 bytes"
    );
    let extra = |b: HostBackend| {
        b.with_general_kernel("rowsum", good)
            .with_parameter_sizes("rowsum", &[8, 8, 4, 4, 8])
    };
    let e = crate::workload::load_kernels(&mut extra(HostBackend::new()), &d)
        .err()
        .unwrap();
    assert_eq!(
        e.message,
        "rowsum cannot take what the manifest passes: its compiled code takes 5 parameter(s) (8, 8, 4, 4, 8 bytes), the manifest passes 4"
    );
    // Under a sanitizer, which would report the driver's refusal of a parameter past the
    // last as the kernel's error, only the manifest's four are asked for (and held).
    crate::workload::load_kernels(&mut extra(HostBackend::new().with_sanitized()), &d).unwrap();
    let mut b = HostBackend::new()
        .with_sanitized()
        .with_general_kernel("rowsum", good)
        .with_parameter_sizes("rowsum", &[8, 8, 4, 16]);
    assert!(crate::workload::load_kernels(&mut b, &d).is_err());
}
