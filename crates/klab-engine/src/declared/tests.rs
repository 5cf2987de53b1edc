use super::fill::{fill, generator, outside_domain};
use super::*;
use crate::workload::NewInputs;

/// The verified launch on perturbed inputs: the block's inputs with a few elements
/// drawn again, made on the device where the block's are (no host copy of the whole
/// input), and the same bytes as the host makes for the reference.
#[test]
fn perturbed_inputs_are_the_blocks_with_a_few_elements_drawn_again_on_either_side() {
    use crate::backend::host::{Call, HostBackend};
    let (_, decl) =
        klab_spec::registry::resolve("transpose_naive", klab_spec::registry::Scope::Audit).unwrap();
    let w = DeclaredWorkload::builtin(decl, 257, InputCase::Uniform { seed: 7 }, 0).unwrap();
    let p = w.with_new_inputs(99, NewInputs::Perturbed).unwrap();
    let i = w.buffers.iter().position(|b| b.role == Role::In).unwrap();
    let (block, host) = (
        &w.initial_bytes().unwrap()[i],
        &p.initial_bytes().unwrap()[i],
    );
    let differ = block
        .chunks(4)
        .zip(host.chunks(4))
        .filter(|(a, b)| a != b)
        .count() as u64;
    assert!(
        (1..=crate::workload::PERTURBED_ELEMENTS).contains(&differ),
        "{differ}"
    );

    let mut b = HostBackend::new().with_device_checker(None);
    assert!(p.inputs_on_device(&b));
    let mut d = b.alloc_bytes(w.buffers[i].bytes()).unwrap();
    p.put_input(&mut b, &mut d, i, true).unwrap();
    assert!(b.calls.iter().any(|c| matches!(c, Call::CopyElements(_))));
    let mut got = vec![0u8; host.len()];
    b.download_bytes(&d, &mut got).unwrap();
    assert_eq!(&got, host);
    // The block's own inputs are not perturbed.
    let mut d = b.alloc_bytes(w.buffers[i].bytes()).unwrap();
    w.put_input(&mut b, &mut d, i, true).unwrap();
    b.download_bytes(&d, &mut got).unwrap();
    assert_eq!(&got, block);
}

#[test]
fn shapes_parse_and_print_back() {
    let s: ShapeArg = "m=64, n=128,k=32".parse().unwrap();
    assert_eq!(s.to_string(), "k=32,m=64,n=128");
    assert_eq!(s.to_string().parse::<ShapeArg>().unwrap(), s);
    for (bad, says) in [
        ("m", "expected VAR=VALUE"),
        ("m=1,m=2", "given twice"),
        ("m=-1", "not a whole number"),
        ("9x=3", "not a size variable's name"),
        ("=3", "not a size variable's name"),
    ] {
        let e = bad.parse::<ShapeArg>().unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn a_large_random_input_is_the_same_on_any_number_of_cores_and_keeps_small_streams() {
    let buffer = |elements: u64| Buffer {
        name: "x".into(),
        dtype: Dtype::F32,
        role: Role::In,
        elements,
        shape: vec![elements],
        axes: vec!["i".into()],
        comparison: None,
        range: None,
        domain: None,
        float_domain: None,
        offsets: false,
    };
    let big = 2 * klab_core::par::CHUNK_ELEMENTS as u64 + 3;
    let case = InputCase::Uniform { seed: 42 };
    let a = fill(&buffer(big), 0, case).unwrap();
    assert_eq!(a, fill(&buffer(big), 0, case).unwrap());
    // A buffer of one chunk or less is the seed's own stream, as before chunks existed.
    let small = fill(&buffer(1000), 0, case).unwrap();
    assert_eq!(&a[..4000], &small[..]);
    // Chunks draw different streams.
    let c = klab_core::par::CHUNK_ELEMENTS * 4;
    assert_ne!(&a[..4000], &a[c..c + 4000]);
}
use crate::backend::host::{HostArg, HostBackend};
use crate::check::{run, CheckOptions};

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

/// [`good`], then a store into the buffer allocated last of the output's length that is
/// not its own: an out-of-bounds store that lands in klab's copy of the expected output
/// once the device checker has made one.
fn stores_into_the_checkers_copy(mem: &mut [Vec<u32>], a: &[HostArg], n: u64) {
    good(mem, a, n);
    let (x, y, _, _) = args(a);
    let len = mem[y].len();
    if let Some(i) = (0..mem.len())
        .rev()
        .find(|&i| i != x && i != y && mem[i].len() == len)
    {
        mem[i][0] = 12345.0f32.to_bits();
    }
}

/// A kernel storing into the device checker's own memory fails the block as the
/// kernel's fault, with the cross-check and without it; it was once a klab error (the
/// two checkers disagreed) or an output mismatch at an index the kernel got right.
#[test]
fn a_store_into_the_checkers_memory_is_the_kernels_failure() {
    use crate::timing::{measure, Outcome, TimingConfig, WarmupPolicy};
    use klab_core::samples::{Invalidation, Regime, Timer};
    let shape: Shape = [("rows".to_string(), 40), ("cols".to_string(), 33)].into();
    let cfg = TimingConfig {
        timer: Timer::PerLaunch,
        regime: Regime::SameBuffer,
        samples: 4,
        warmup: WarmupPolicy::Count { launches: 3 },
        invalidation: Invalidation::EveryLaunch,
    };
    for (f, paranoid, honest) in [
        (
            stores_into_the_checkers_copy as crate::backend::host::GeneralKernelFn,
            false,
            false,
        ),
        (stores_into_the_checkers_copy, true, false),
        (good, true, true),
    ] {
        // A workload per backend: its device cache holds that backend's buffers.
        let w = DeclaredWorkload::new(
            decl(),
            shape.clone(),
            InputCase::Uniform { seed: 3 },
            0,
            std::rc::Rc::new(RowSum),
        )
        .unwrap();
        let mut b = HostBackend::new()
            .with_general_kernel("rowsum", f)
            .with_device_checker(None);
        if paranoid {
            b = b.with_paranoid();
        }
        let k = [b.kernel("rowsum").unwrap()];
        let o = measure(&mut b, &w, &k, &cfg, "b", &mut Default::default)
            .unwrap_or_else(|e| panic!("paranoid {paranoid}: {e}"));
        let Outcome::Measured(m) = o else {
            panic!("{o:?}")
        };
        // What the outcomes of the verified launches say.
        let said = format!("{:?} {:?}", m.after_timing, m.verified);
        if honest {
            assert_eq!(m.gate_failure(), None);
            continue;
        }
        assert!(m.gate_failure().is_some(), "paranoid {paranoid}");
        assert!(
            said.contains("the kernel stored outside its declared buffers"),
            "paranoid {paranoid}: {said}"
        );
    }
}

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

#[test]
fn given_shapes_replace_the_ladder() {
    let run_at = |f: crate::backend::host::GeneralKernelFn, shapes: Vec<Shape>| {
        let mut b = HostBackend::new().with_general_kernel("rowsum", f);
        let k = [b.kernel("rowsum").unwrap()];
        let opts = CheckOptions {
            seed: 1,
            sizes: None,
            shapes: Some(shapes),
            quick: false,
            resume_after: 0,
        };
        run(
            &mut b,
            &decl(),
            &k,
            std::rc::Rc::new(RowSum),
            &opts,
            &mut |_| {},
        )
        .unwrap()
    };
    let at = |rows: i64, cols: i64| Shape::from([("rows".into(), rows), ("cols".into(), cols)]);
    let ragged = run_at(drops_tail, vec![at(33, 5)]);
    assert!(!ragged.passed(), "{}", ragged.render());
    let exact = run_at(drops_tail, vec![at(64, 3)]);
    assert!(exact.passed(), "{}", exact.render());
    let text = exact.render();
    assert!(text.contains("rows=64"), "{text}");
    assert!(
        !text.contains("rows=128") && !text.contains("rows=1 "),
        "only the given shape: {text}"
    );
}

#[test]
fn the_ladder_covers_every_chunk_remainder_and_non_square_shapes() {
    let op = decl().op;
    let shapes = ladder(&op).unwrap();
    let rows: Vec<i64> = shapes.iter().map(|s| s["rows"]).collect();
    // The grid grows after 32 rows: 1, 2, 31, 32, 33, 63, 65, 112, 128.
    for r in [1, 2, 31, 32, 33, 63, 65, 112, 128] {
        assert!(rows.contains(&r), "{r} in {rows:?}");
    }
    assert!(shapes.iter().any(|s| s["cols"] == 1) && shapes.iter().any(|s| s["cols"] == 33));
    let distinct: std::collections::BTreeSet<_> = shapes.iter().collect();
    assert_eq!(distinct.len(), shapes.len());
}

/// Sizes declared a multiple: the ladder steps by it across each chunk boundary, and the
/// index-overflow shape is made of multiples and still passes 2^31 elements.
#[test]
fn sizes_declared_a_multiple_are_the_only_sizes_klab_makes() {
    let d = with(&MANIFEST.replace(
        "sizes.rows = {}\nsizes.cols = { values = [1, 5, 33] }",
        "sizes.rows = { multiple = 8 }\nsizes.cols = { multiple = 4 }",
    ));
    let op = &d.op;
    let shapes = ladder(op).unwrap();
    let rows: std::collections::BTreeSet<i64> = shapes.iter().map(|s| s["rows"]).collect();
    let cols: std::collections::BTreeSet<i64> = shapes.iter().map(|s| s["cols"]).collect();
    // rows: the grid grows after 32; cols is not in the grid (the block's 32).
    for r in [8, 16, 24, 32, 40, 56, 72, 112, 128] {
        assert!(rows.contains(&r), "{r} in {rows:?}");
    }
    for c in [4, 8, 28, 32, 36, 60, 68] {
        assert!(cols.contains(&c), "{c} in {cols:?}");
    }
    assert!(rows.iter().all(|r| r % 8 == 0), "{rows:?}");
    assert!(cols.iter().all(|c| c % 4 == 0), "{cols:?}");
    let base = &shapes[shapes.len() / 2];
    let big = overflow_shape(op, base, INDEX_OVERFLOW_ELEMENTS).unwrap();
    assert!(big["rows"] % 8 == 0 && big["cols"] % 4 == 0, "{big:?}");
    assert!(
        largest_buffer(op, &big).unwrap() > INDEX_OVERFLOW_ELEMENTS,
        "{big:?}"
    );
    // A step smaller in either size is still past the limit: the last row starts past it.
    for (k, step) in [("rows", 8), ("cols", 4)] {
        let mut less = big.clone();
        *less.get_mut(k).unwrap() -= step;
        assert!(largest_buffer(op, &less).unwrap() > INDEX_OVERFLOW_ELEMENTS);
    }
}

/// The chunk is looked for among the sizes a variable admits: a float4 kernel's grid
/// over n / 4 is empty below 4, and its chunk is 1024 (not 3). A multiple that does
/// not divide the chunk still gets the first size past each boundary.
#[test]
fn the_chunk_of_a_multiple_is_found_among_multiples() {
    let op = |grid: &str, multiple: u64| {
        copy_op(grid, "256", &format!("{{ multiple = {multiple} }}")).op
    };
    let v4 = op("ceil_div(n / 4, 256)", 4);
    assert_eq!(chunk(&v4, "n"), 1024);
    let n: Vec<i64> = ladder(&v4).unwrap().iter().map(|s| s["n"]).collect();
    assert_eq!(n, [4, 8, 1020, 1024, 1028, 2044, 2052, 3584, 4096]);
    let three = op("ceil_div(n, 1024)", 3);
    let n: Vec<i64> = ladder(&three).unwrap().iter().map(|s| s["n"]).collect();
    // A size on either side of each boundary (1024, 2048), the nearest past each.
    for v in [1023, 1026, 2049] {
        assert!(n.contains(&v), "{v} in {n:?}");
    }
    assert!(n.iter().any(|v| (2043..=2046).contains(v)), "{n:?}");
    assert!(n.iter().all(|v| v % 3 == 0), "{n:?}");
}

/// A block-size launch parameter is held at its ladder's base (256 of 32, 256, 1024)
/// while another variable's chunk is looked for: at its smallest (1) the chunk was 2
/// and a strided loop over the columns never ran twice. A multiple above the chunk
/// still gets four sizes.
#[test]
fn a_launch_parameter_is_held_at_its_base_while_a_chunk_is_found() {
    let op = |sizes: &str, block: &str| {
        with(&format!(
            r#"
source = "k.cu"
[[kernel]]
name = "rows"
entry = "rowsum"
operation = "declared"
params = ["x", "y", "rows:i32", "cols:i32", "bs:i32"]
[kernel.op]
grid = ["rows"]
block = ["{block}"]
useful_bytes = "8 * rows * cols"
reference = {{ c = "ref.c:rows" }}
{sizes}
buffers.x = {{ dtype = "f32", len = "rows * cols", role = "in" }}
buffers.y = {{ dtype = "f32", len = "rows * cols", role = "out", compare = "bitwise" }}
"#
        ))
        .op
    };
    let launch = "sizes.bs = { values = [32, 256, 1024], launch = true }";
    let strided = op(
        &format!("sizes.rows = {{}}\nsizes.cols = {{}}\n{launch}"),
        "bs",
    );
    assert_eq!(chunk(&strided, "cols"), 256);
    let cols: std::collections::BTreeSet<i64> = ladder(&strided)
        .unwrap()
        .iter()
        .map(|s| s["cols"])
        .collect();
    for c in [255, 256, 257, 511, 513] {
        assert!(cols.contains(&c), "{c} in {cols:?}");
    }
    let wide = op(
        &format!("sizes.rows = {{}}\nsizes.cols = {{ multiple = 32 }}\n{launch}"),
        "16",
    );
    let cols: std::collections::BTreeSet<i64> =
        ladder(&wide).unwrap().iter().map(|s| s["cols"]).collect();
    assert_eq!(cols, [32, 64, 96, 128].into());
}

/// No derived size passes the kernel's size type (an i32 here), however late the grid
/// grows: the search stops at 2^24 and the block decides.
#[test]
fn derived_sizes_stay_within_the_size_type() {
    let d = with(&MANIFEST.replace(
        "grid = [\"ceil_div(rows, 32)\"]",
        "grid = [\"ceil_div(rows, 1073741824)\"]",
    ));
    assert_eq!(chunk(&d.op, "rows"), 32);
    let shapes = ladder(&d.op).unwrap();
    assert!(
        shapes.iter().all(|s| s["rows"] <= i32::MAX as i64),
        "{shapes:?}"
    );
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

/// A one-size copy (x to y, n f32 elements) launched on `grid` blocks of `block`
/// threads, its size declared `sizes.n = SIZE`.
fn copy_op(grid: &str, block: &str, size: &str) -> KernelDecl {
    with(&format!(
        r#"
source = "k.cu"
[[kernel]]
name = "copy"
entry = "rowsum"
operation = "declared"
params = ["x", "y", "n:i32"]
[kernel.op]
grid = ["{grid}"]
block = ["{block}"]
useful_bytes = "8 * n"
reference = {{ c = "ref.c:copy" }}
sizes.n = {size}
buffers.x = {{ dtype = "f32", len = "n", role = "in" }}
buffers.y = {{ dtype = "f32", len = "n", role = "out", compare = "bitwise" }}
"#
    ))
}

/// A tile past the linear scan's reach (16 elements for each of 1024 threads; 25600
/// elements staged in shared memory): the ladder still straddles its boundaries, where
/// it used to fall back to the block's 1024 and never reach a second tile.
#[test]
fn a_large_tiles_boundaries_are_found_past_the_linear_scan() {
    let op = |grid: &str| copy_op(grid, "1024", "{}").op;
    for (grid, c) in [
        ("ceil_div(n, 16384)", 16384),
        ("ceil_div(n, 25600)", 25600),
        ("ceil_div(n, 4096)", 4096),
        ("ceil_div(n, 1000003)", 1000003),
        ("(n + 1023) / 1024", 1024),
    ] {
        let op = op(grid);
        assert_eq!(chunk(&op, "n"), c, "{grid}");
        let n: Vec<i64> = ladder(&op).unwrap().iter().map(|s| s["n"]).collect();
        for v in [c - 1, c, c + 1, 2 * c - 1, 2 * c + 1] {
            assert!(n.contains(&(v as i64)), "{grid}: {v} in {n:?}");
        }
    }
    // A grid that never grows (a persistent kernel) falls back to the block.
    assert_eq!(chunk(&op("132"), "n"), 1024);
}

/// A float domain's ends in f16 or bf16: a value rounded past an end is stepped back
/// inside (0.10003 rounds to 0.1000366 in f16, past the end); a range that holds no
/// value of the dtype keeps the nearest.
#[test]
fn a_float_domain_keeps_16_bit_values_inside_its_ends() {
    let value = |dt: Dtype, v: f64, r: [f64; 2]| dt.value_of_bits(dt.bits_within(v, r));
    let r = [-0.10003, 0.10003];
    assert!(Dtype::F16.value_of_bits(Dtype::F16.bits_of_f64(0.10003)) > 0.10003);
    for (v, dt) in [
        (0.10003, Dtype::F16),
        (-0.10003, Dtype::F16),
        (1.0, Dtype::F16),
    ] {
        let got = value(dt, v, r);
        assert!((r[0]..=r[1]).contains(&got), "{v}: {got}");
        assert!((got - v.clamp(r[0], r[1])).abs() < 1e-4, "{v}: {got}");
    }
    // Zero and values well inside are as rounded; bf16 too.
    assert_eq!(value(Dtype::F16, 0.0, r), 0.0);
    assert_eq!(value(Dtype::Bf16, 1.5, [1.0, 2.0]), 1.5);
    let got = value(Dtype::Bf16, 1.004, [1.0, 1.004]);
    assert!((1.0..=1.004).contains(&got), "{got}");
    // Nothing of f16 lies in [0.10001, 0.10002]: the nearest stays.
    let got = value(Dtype::F16, 0.100015, [0.10001, 0.10002]);
    assert!((got - 0.100015).abs() < 1e-4, "{got}");
}

/// A row walked in steps of a BLOCK the launch does not show (one program per row, a
/// Triton kernel's loop over 1024 columns): the derived ladder stays at the block's
/// 128 and never reaches a second step; a declared tile adds the sizes around one and
/// two tiles (rounded to the multiple), and the block's boundaries stay.
#[test]
fn a_declared_tile_puts_its_boundaries_in_the_ladder() {
    let n_of = |size: &str| -> Vec<i64> {
        ladder(&copy_op("1", "128", size).op)
            .unwrap()
            .iter()
            .map(|s| s["n"])
            .collect()
    };
    let derived = n_of("{}");
    assert!(derived.iter().all(|n| *n < 1023), "{derived:?}");
    let tiled = n_of("{ tile = 1024 }");
    for v in [127, 128, 129, 1023, 1024, 1025, 2047, 2049] {
        assert!(tiled.contains(&v), "{v} in {tiled:?}");
    }
    let fours = n_of("{ tile = 1024, multiple = 4 }");
    for v in [1020, 1024, 1028, 2044, 2052] {
        assert!(fours.contains(&v), "{v} in {fours:?}");
    }
    assert!(fours.iter().all(|n| n % 4 == 0), "{fours:?}");
    // A max between one and two tiles keeps its edge.
    let capped = n_of("{ tile = 1024, max = 1500 }");
    for v in [1023, 1024, 1025, 1499, 1500] {
        assert!(capped.contains(&v), "{v} in {capped:?}");
    }
    assert!(capped.iter().all(|n| *n <= 1500), "{capped:?}");
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

/// out[i, :] = table[ids[i], :]: an embedding lookup, its ids declared as rows of the
/// table (`index_into`) or by a range expression.
const GATHER: &str = r#"
source = "k.cu"
[[kernel]]
name = "gather"
entry = "rowsum"
operation = "declared"
params = ["ids", "table", "out", "n:i32", "V:i32", "C:i32"]
[kernel.op]
grid = ["n"]
block = ["32"]
useful_bytes = "4 * n + 8 * n * C"
reference = { c = "ref.c:gather_ref" }
sizes.n = { values = [1, 40] }
sizes.V = { values = [1, 3, 64] }
sizes.C = { values = [1, 5] }
buffers.ids = { dtype = "i32", len = "n", role = "in", index_into = "table" }
buffers.table = { dtype = "f32", len = "V * C", role = "in", shape = ["V", "C"] }
buffers.out = { dtype = "f32", len = "n * C", role = "out", shape = ["n", "C"], compare = "bitwise" }
"#;

struct Gather;
impl Reference for Gather {
    fn run(&self, _: &Shape, b: &mut [&mut [u8]], i: &[i64], _: &[f64]) -> Result<(), String> {
        let (n, v, c) = (i[0] as usize, i[1] as usize, i[2] as usize);
        for r in 0..n {
            let id = i32::from_le_bytes(b[0][4 * r..4 * r + 4].try_into().unwrap());
            let row = usize::try_from(id)
                .ok()
                .filter(|x| *x < v)
                .ok_or(format!("id {id} is outside the table's {v} rows"))?;
            for k in 0..c {
                let at = 4 * (row * c + k);
                let w: [u8; 4] = b[1][at..at + 4].try_into().unwrap();
                b[2][4 * (r * c + k)..4 * (r * c + k) + 4].copy_from_slice(&w);
            }
        }
        Ok(())
    }
    fn describe(&self) -> String {
        "a Rust gather".into()
    }
}

/// The lookup; an id outside the table reads nothing (as a guarded kernel would).
fn gather(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    let [HostArg::Buffer(ids), HostArg::Buffer(t), HostArg::Buffer(out), HostArg::I32(n), HostArg::I32(v), HostArg::I32(c)] =
        a
    else {
        panic!("{a:?}")
    };
    let (n, v, c) = (*n as usize, *v as usize, *c as usize);
    for r in 0..n {
        let id = mem[*ids][r] as i32;
        if id < 0 || id as usize >= v {
            continue;
        }
        for k in 0..c {
            mem[*out][r * c + k] = mem[*t][id as usize * c + k];
        }
    }
}

fn check_gather(manifest: &str) -> Result<crate::check::CheckReport, BackendError> {
    check_on_host(&with(manifest), gather, Gather)
}

#[test]
fn an_index_buffer_stays_inside_its_domain_in_every_case() {
    let by_rows = check_gather(GATHER).unwrap();
    assert!(by_rows.passed(), "{}", by_rows.render());
    let text = by_rows.render();
    for case in [
        "special values",
        "constant input",
        "large-magnitude",
        "exact input",
    ] {
        assert!(text.contains(case), "{case} ran: {text}");
    }
    let by_range = GATHER.replace("index_into = \"table\"", "range = [0, \"V - 1\"]");
    assert_ne!(by_range, GATHER);
    let r = check_gather(&by_range).unwrap();
    assert!(r.passed(), "{}", r.render());
    // Before domains, the ids of most cases ran past the table and the reference
    // refused them; a plain range without the expression still does.
    let unbounded = GATHER.replace("index_into = \"table\"", "range = [0, 63]");
    let e = check_gather(&unbounded).unwrap_err();
    assert!(e.message.contains("outside the table"), "{e}");
}

/// out[r] = sum of vals[rp[r] .. rp[r + 1]]: the rows of a compressed layout, its row
/// offsets declared with `offsets`.
const SEGMENTS: &str = r#"
source = "k.cu"
[[kernel]]
name = "segsum"
entry = "rowsum"
operation = "declared"
params = ["rp", "vals", "out", "rows:i32", "nnz:i32"]
[kernel.op]
grid = ["rows"]
block = ["32"]
useful_bytes = "4 * rows + 4 * nnz"
reference = { c = "ref.c:segsum_ref" }
sizes.rows = { values = [1, 7, 40] }
sizes.nnz = { values = [0, 1, 33, 300], min = 0 }
buffers.rp = { dtype = "i32", len = "rows + 1", role = "in", offsets = "nnz" }
buffers.vals = { dtype = "f32", len = "nnz", role = "in" }
buffers.out = { dtype = "f32", len = "rows", role = "out", compare = { allclose = { atol = 1e-5, rtol = 1e-5 } } }
"#;

fn segment(rp: &[i32], r: usize, nnz: usize) -> Result<std::ops::Range<usize>, String> {
    let (a, b) = (rp[r], rp[r + 1]);
    if a < 0 || b < a || b as usize > nnz {
        return Err(format!(
            "row {r}: offsets {a}..{b} do not fit {nnz} entries"
        ));
    }
    Ok(a as usize..b as usize)
}

struct SegSum;
impl Reference for SegSum {
    fn run(&self, _: &Shape, b: &mut [&mut [u8]], i: &[i64], _: &[f64]) -> Result<(), String> {
        let (rows, nnz) = (i[0] as usize, i[1] as usize);
        let rp: Vec<i32> = b[0]
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        for r in 0..rows {
            let mut acc = 0f32;
            for j in segment(&rp, r, nnz)? {
                acc += f32::from_le_bytes(b[1][4 * j..4 * j + 4].try_into().unwrap());
            }
            b[2][4 * r..4 * r + 4].copy_from_slice(&acc.to_le_bytes());
        }
        Ok(())
    }
    fn describe(&self) -> String {
        "a Rust segment sum".into()
    }
}

fn segsum_with(mem: &mut [Vec<u32>], a: &[HostArg], drop_last: bool) {
    let [HostArg::Buffer(rp), HostArg::Buffer(v), HostArg::Buffer(out), HostArg::I32(rows), HostArg::I32(nnz)] =
        a
    else {
        panic!("{a:?}")
    };
    let rp_row: Vec<i32> = mem[*rp].iter().map(|x| *x as i32).collect();
    for r in 0..*rows as usize {
        let mut s = segment(&rp_row, r, *nnz as usize).expect("klab made valid offsets");
        if drop_last {
            s.end = s.end.saturating_sub(1).max(s.start);
        }
        let acc: f32 = s.map(|j| f32::from_bits(mem[*v][j])).sum();
        mem[*out][r] = acc.to_bits();
    }
}
fn segsum(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    segsum_with(mem, a, false)
}
fn segsum_drops_last(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    segsum_with(mem, a, true)
}

#[test]
fn row_offsets_stay_a_valid_layout_in_every_case_and_a_dropped_entry_fails() {
    let check_with = |f: crate::backend::host::GeneralKernelFn| {
        check_on_host(&with(SEGMENTS), f, SegSum).unwrap()
    };
    let r = check_with(segsum);
    assert!(r.passed(), "{}", r.render());
    let r = check_with(segsum_drops_last);
    assert!(!r.passed(), "{}", r.render());
    // Each case spreads the entries its own way, always from 0 to nnz.
    let shape = Shape::from([("rows".into(), 10), ("nnz".into(), 50)]);
    let offsets = |case: InputCase| -> Vec<i32> {
        let w = DeclaredWorkload::new(
            with(SEGMENTS),
            shape.clone(),
            case,
            0,
            std::rc::Rc::new(SegSum),
        )
        .unwrap();
        w.initial_bytes().unwrap()[0]
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    assert_eq!(
        offsets(InputCase::Structural),
        [0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50]
    );
    assert_eq!(
        offsets(InputCase::Constant),
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 50]
    );
    assert_eq!(
        offsets(InputCase::Special),
        [0, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50]
    );
    let random = offsets(InputCase::Uniform { seed: 3 });
    assert!(random.windows(2).all(|w| w[0] <= w[1]), "{random:?}");
    assert_eq!((random[0], random[10]), (0, 50));
    assert_ne!(random, offsets(InputCase::Uniform { seed: 4 }));
    // Offsets that decrease, or do not end at nnz, are not a layout: said before any
    // reference runs.
    let mut b = buffer_for_offsets(50);
    for bad in [vec![0, 7, 3, 50], vec![0, 7, 9, 49], vec![1, 7, 9, 50]] {
        b.elements = bad.len() as u64;
        let bytes: Vec<u8> = bad.iter().flat_map(|x: &i32| x.to_le_bytes()).collect();
        assert!(outside_domain(&b, &bytes).is_some(), "{bad:?}");
    }
    let good: Vec<u8> = [0i32, 7, 7, 50]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    b.elements = 4;
    assert_eq!(outside_domain(&b, &good), None);
}

fn buffer_for_offsets(total: i64) -> Buffer {
    Buffer {
        name: "rp".into(),
        dtype: Dtype::I32,
        role: Role::In,
        elements: 4,
        shape: vec![4],
        axes: vec!["i".into()],
        comparison: None,
        range: None,
        domain: Some([0, total]),
        float_domain: None,
        offsets: true,
    }
}

#[test]
fn an_empty_index_into_an_empty_table_is_made_in_every_case() {
    let shape = Shape::from([("n".into(), 0), ("V".into(), 0), ("C".into(), 1)]);
    for case in [
        InputCase::Structural,
        InputCase::Special,
        InputCase::Normal { seed: 1 },
    ] {
        let w = DeclaredWorkload::new(
            with(GATHER),
            shape.clone(),
            case,
            0,
            std::rc::Rc::new(Gather),
        )
        .unwrap();
        assert!(
            w.initial_bytes().unwrap().iter().all(Vec::is_empty),
            "{case:?}"
        );
    }
}

/// Every case klab generates an input for.
const EVERY_GENERATED_CASE: [InputCase; 7] = [
    InputCase::Structural,
    InputCase::Distinct,
    InputCase::Uniform { seed: 3 },
    InputCase::Normal { seed: 3 },
    InputCase::Large { seed: 3 },
    InputCase::Constant,
    InputCase::Special,
];

/// An input of 5000 elements with no range or domain.
fn input_of_5000(dtype: Dtype) -> Buffer {
    Buffer {
        name: "x".into(),
        dtype,
        role: Role::In,
        elements: 5000,
        shape: vec![5000],
        axes: vec!["i".into()],
        comparison: None,
        range: None,
        domain: None,
        float_domain: None,
        offsets: false,
    }
}

#[test]
fn every_case_of_a_domain_keeps_to_it_and_reaches_both_ends() {
    let buffer = |dtype: Dtype, domain: [i64; 2]| Buffer {
        domain: Some(domain),
        ..input_of_5000(dtype)
    };
    let cases = EVERY_GENERATED_CASE;
    for (dtype, domain) in [
        (Dtype::I32, [0, 0]),
        (Dtype::I32, [0, 63]),
        (Dtype::I64, [-7, 5]),
        (Dtype::U8, [250, 255]),
        (Dtype::U32, [0, u32::MAX as i64]),
    ] {
        let b = buffer(dtype, domain);
        let mut seen = std::collections::BTreeSet::new();
        for case in cases {
            let bytes = fill(&b, 1, case).unwrap();
            assert_eq!(
                outside_domain(&b, &bytes),
                None,
                "{dtype} {domain:?} {case:?}"
            );
            seen.extend((0..5000).map(|i| dtype.to_i128(&bytes, i).unwrap()));
            let g = generator(&b, 1, case);
            assert_eq!(
                g.is_none(),
                matches!(case, InputCase::Normal { .. }),
                "{case:?}"
            );
        }
        let (lo, hi) = (i128::from(domain[0]), i128::from(domain[1]));
        assert!(
            seen.contains(&lo) && seen.contains(&hi),
            "{dtype} {domain:?}"
        );
    }
}

/// A float input declared `domain = true` keeps every case inside its range (a second
/// moment's [0, 1]: the exact input's -8..8 made a correct `sqrt(v)` kernel NaN), reaches
/// both ends, and is random on the device as before; without it the range bounds only
/// the random draw.
#[test]
fn every_case_of_a_float_domain_keeps_to_it_and_reaches_both_ends() {
    let buffer = |dtype: Dtype, range: [f64; 2], domain: bool| Buffer {
        range: Some(range),
        float_domain: domain.then_some(range),
        ..input_of_5000(dtype)
    };
    let cases = EVERY_GENERATED_CASE;
    for (dtype, range) in [
        (Dtype::F32, [0.0, 1.0]),
        (Dtype::F64, [1e-3, 50.0]),
        (Dtype::Bf16, [-2.0, 0.0]),
        (Dtype::F16, [0.5, 4.0]),
    ] {
        let b = buffer(dtype, range, true);
        let mut seen = Vec::new();
        for case in cases {
            let bytes = fill(&b, 1, case).unwrap();
            let v: Vec<f64> = (0..5000).map(|i| dtype.to_f64(&bytes, i)).collect();
            assert!(
                v.iter().all(|x| (range[0]..=range[1]).contains(x)),
                "{dtype} {range:?} {case:?}: {:?}",
                v.iter().find(|x| !(range[0]..=range[1]).contains(*x))
            );
            seen.extend(v);
            assert_eq!(
                generator(&b, 1, case).is_some(),
                matches!(case, InputCase::Uniform { .. }),
                "{case:?}"
            );
        }
        assert!(
            seen.contains(&range[0]) && seen.contains(&range[1]),
            "{dtype}"
        );
        let exact = fill(&b, 1, InputCase::Structural).unwrap();
        let levels: std::collections::BTreeSet<u64> = (0..5000)
            .map(|i| dtype.to_f64(&exact, i).to_bits())
            .collect();
        assert!(levels.len() >= 9, "{dtype}: {}", levels.len());
    }
    // Without domain = true the range bounds the random draw only (documented).
    let plain = buffer(Dtype::F32, [0.0, 1.0], false);
    let exact = fill(&plain, 1, InputCase::Structural).unwrap();
    assert!((0..5000).any(|i| Dtype::F32.to_f64(&exact, i) < 0.0));
}

/// Distinct input in a float domain has no two equal neighbours: 2^20 evenly spaced points
/// of [-1, 1] gave the first twenty f16 elements one value (-1.0) and every bf16 element
/// of a thousand the same, so a kernel that moved elements could not be caught. Where the
/// domain holds at most 2^20 values of the dtype, each comes in turn.
#[test]
fn distinct_input_in_a_float_domain_is_distinct_in_its_dtype() {
    for (dtype, range) in [
        (Dtype::F16, [-1.0, 1.0]),
        (Dtype::Bf16, [-1.0, 1.0]),
        (Dtype::F16, [0.5, 0.6]),
        (Dtype::F32, [1.0, 1.0001]),
    ] {
        let b = Buffer {
            range: Some(range),
            float_domain: Some(range),
            ..input_of_5000(dtype)
        };
        let bytes = fill(&b, 1, InputCase::Distinct).unwrap();
        let v: Vec<u64> = (0..5000).map(|i| dtype.bits(&bytes, i)).collect();
        let (first, last) = dtype.keys_within(range).unwrap();
        let count = (last - first + 1).min(5000) as usize;
        let distinct: std::collections::BTreeSet<u64> = v.iter().copied().collect();
        assert_eq!(distinct.len(), count, "{dtype} {range:?}");
        assert!(
            v.windows(2).all(|w| w[0] != w[1]),
            "{dtype} {range:?}: equal neighbours"
        );
        assert!(v
            .iter()
            .all(|b| (range[0]..=range[1]).contains(&dtype.value_of_bits(*b))));
    }
}

/// A float domain that holds no value of its dtype cannot be kept to: refused in one line
/// naming the buffer, where every case used to leave it (-inf for f16 [-70000, -65520]).
#[test]
fn a_float_domain_without_a_value_of_its_dtype_is_refused() {
    for (dtype, range) in [
        (Dtype::F16, [-70000.0, -65520.0]),
        (Dtype::Bf16, [1.001, 1.002]),
        (Dtype::F16, [0.10001, 0.10002]),
    ] {
        assert_eq!(dtype.keys_within(range), None, "{dtype} {range:?}");
    }
    assert!(Dtype::F16.keys_within([0.1, 0.2]).is_some());
    let m = MANIFEST
        .replace("sizes.cols = { values = [1, 5, 33] }", "sizes.cols = { values = [5] }")
        .replace(
            r#"buffers.x = { dtype = "f32", len = "rows * cols", role = "in", shape = ["rows", "cols"] }"#,
            r#"buffers.x = { dtype = "f16", len = "rows * cols", role = "in", shape = ["rows", "cols"], range = [1.0001, 1.0002], domain = true }"#,
        );
    let d = with(&m);
    let shape = Shape::from([("rows".into(), 4), ("cols".into(), 5)]);
    let e = DeclaredWorkload::new(d, shape, InputCase::Structural, 0, std::rc::Rc::new(RowSum))
        .unwrap_err();
    assert!(
        e.message
            .contains("buffers.x.range at cols=5 rows=4: [1.0001, 1.0002] holds no f16 value"),
        "{}",
        e.message
    );
}

/// The random draw of a float domain is made by the generator (on the device for large
/// inputs): where an end is not a value of the dtype (0.10003 in f16 rounds to
/// 0.1000366), a draw that rounds past it is stepped back inside, as the host's cases are.
#[test]
fn a_float_domains_random_draw_stays_inside_ends_the_dtype_cannot_hold() {
    for (dtype, range) in [
        (Dtype::F16, [-0.10003, 0.10003]),
        (Dtype::Bf16, [0.1, 0.702]),
    ] {
        let b = Buffer {
            range: Some(range),
            float_domain: Some(range),
            ..input_of_5000(dtype)
        };
        let mut escaped_unstepped = 0;
        for seed in 0..40 {
            let case = InputCase::Uniform { seed };
            let bytes = fill(&b, 1, case).unwrap();
            let outside = (0..5000)
                .map(|i| dtype.to_f64(&bytes, i))
                .find(|x| !(range[0]..=range[1]).contains(x));
            assert_eq!(outside, None, "{dtype} {range:?} seed {seed}");
            // The same draw rounded without the step: what the generator made before.
            let Some(crate::inputs::Generator {
                pattern: crate::inputs::Pattern::Uniform { key, lo, hi, .. },
                ..
            }) = generator(&b, 1, case)
            else {
                panic!("a float domain's draw has a generator")
            };
            escaped_unstepped += (0..5000u64)
                .map(|i| lo + (hi - lo) * crate::inputs::unit_at(key, i))
                .filter(|v| !(lo..=hi).contains(&dtype.value_of_bits(dtype.bits_of_f64(*v))))
                .count();
        }
        assert!(
            escaped_unstepped > 0,
            "{dtype}: no draw rounded past an end"
        );
    }
}

#[test]
fn user_data_outside_a_domain_is_refused_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("klab-domain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ids = dir.join("ids.npy");
    let data: Vec<u8> = [1i32, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(
        &ids,
        klab_core::npy::to_bytes(Dtype::I32, &[2], &data).unwrap(),
    )
    .unwrap();
    let manifest = format!(
        "{GATHER}cases = [{{ shape = {{ n = 2, V = 3, C = 1 }}, inputs = {{ ids = '{}' }} }}]\n",
        ids.display()
    );
    let text = check_gather(&manifest).unwrap_err().message;
    assert!(
        text.contains("element 1 holds 9, outside the buffer's domain [0, 2]"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_index_overflow_shape_is_the_smallest_common_growth_past_the_limit() {
    let op = decl().op;
    let base: Shape = [("rows".to_string(), 3), ("cols".to_string(), 5)].into();
    // x holds rows * cols elements: grown by one factor f, 3f * 5f > 1000 at f ~ 8.2.
    let s = overflow_shape(&op, &base, 1000).unwrap();
    assert!(s["rows"] * s["cols"] > 1000, "{s:?}");
    // The last row starts past the limit (a 32-bit `row * cols` wraps there), and the
    // shape is the smallest such growth.
    assert!((s["rows"] - 1) * s["cols"] > 1000, "{s:?}");
    assert!(s["rows"] * (s["cols"] - 1) > 1000, "{s:?}");
    assert!((s["rows"] - 1) * (s["cols"] - 2) <= 1000, "smallest: {s:?}");
    let ratio = s["rows"] as f64 / s["cols"] as f64;
    assert!((ratio - 0.6).abs() < 0.1, "both grow by one factor: {s:?}");
    // The default limit: offsets past 2^31 in x, with rows an i32.
    let s = overflow_shape(&op, &base, INDEX_OVERFLOW_ELEMENTS).unwrap();
    assert!(largest_buffer(&op, &s).unwrap() > 1 << 31, "{s:?}");
    // A max keeps a variable where it is; the other grows alone.
    let capped = with(&MANIFEST.replace(
        "sizes.cols = { values = [1, 5, 33] }",
        "sizes.cols = { values = [1, 5, 33], max = 33 }",
    ));
    let s = overflow_shape(capped.op.as_ref(), &base, 1 << 31).unwrap();
    assert_eq!(s["cols"], 33);
    // The last row starts past the limit; cols, at its cap, is not asked to be one
    // smaller too (rows would have to grow past what the wrap needs): the smallest rows.
    assert!(
        (s["rows"] - 1) * 33 > 1 << 31 && (s["rows"] - 2) * 33 <= 1 << 31,
        "{s:?}"
    );
    // No shape can reach it when every variable is capped below it.
    let both = with(
        &MANIFEST
            .replace("sizes.rows = {}", "sizes.rows = { max = 1000 }")
            .replace(
                "sizes.cols = { values = [1, 5, 33] }",
                "sizes.cols = { values = [1, 5, 33], max = 33 }",
            ),
    );
    let e = overflow_shape(both.op.as_ref(), &base, 1 << 31).unwrap_err();
    assert!(e.contains("no shape within"), "{e}");
}

#[test]
fn a_length_over_three_sizes_still_finds_its_overflow_shape() {
    // rows * cols * cols: at the search's first probe (every size at its i32 cap) the length
    // overflows i64; that counts as past the limit, not as "no shape".
    let d = with(&MANIFEST.replace(
        "len = \"rows * cols\", role = \"in\", shape = [\"rows\", \"cols\"]",
        "len = \"rows * cols * cols\", role = \"in\"",
    ));
    let op = d.op;
    let base: Shape = [("rows".to_string(), 3), ("cols".to_string(), 5)].into();
    let s = overflow_shape(&op, &base, 1 << 31).unwrap();
    assert!(largest_buffer(&op, &s).unwrap() > 1 << 31, "{s:?}");
}

#[test]
fn an_overflow_shape_the_device_cannot_launch_is_a_skip_and_a_failing_reference_too() {
    // grid.y = rows: past 65535 at the overflow shape (cols capped at 33), within the
    // limit on every ladder shape.
    let d = with(
        &MANIFEST
            .replace(
                "grid = [\"ceil_div(rows, 32)\"]",
                "grid = [\"1\", \"rows\"]",
            )
            .replace(
                "sizes.cols = { values = [1, 5, 33] }",
                "sizes.cols = { values = [1, 5, 33], max = 33 }",
            ),
    );
    let mut b = HostBackend::new()
        .with_general_kernel("rowsum", good)
        .with_free_bytes(1 << 40);
    let k = [b.kernel("rowsum").unwrap()];
    let opts = CheckOptions {
        seed: 1,
        sizes: None,
        shapes: None,
        quick: false,
        resume_after: 0,
    };
    let r = run(&mut b, &d, &k, std::rc::Rc::new(RowSum), &opts, &mut |_| {}).unwrap();
    let c = r.cases.last().unwrap();
    // Skipped by the launch limit, or first by this machine's host memory: never a FAIL.
    assert!(c.skipped && c.detail.starts_with("not run: "), "{c:?}");
    assert!(
        c.detail.contains("the launch at this shape") || c.detail.contains("host memory"),
        "{}",
        c.detail
    );
    assert!(r.passed(), "{}", r.render());
}

#[test]
fn an_overflow_shape_the_operation_cannot_form_is_not_applicable_never_a_failure() {
    // The block's shared memory grows with rows * cols: past 32 bits at the overflow
    // shape, a few KiB on the ladder.
    let d = with(&MANIFEST.replace(
        "block = [\"32\"]",
        "block = [\"32\"]\ndynamic_shared_bytes = \"4 * rows * cols\"",
    ));
    let mut b = HostBackend::new()
        .with_general_kernel("rowsum", good)
        .with_free_bytes(1 << 40);
    let k = [b.kernel("rowsum").unwrap()];
    let opts = CheckOptions {
        seed: 1,
        sizes: None,
        shapes: None,
        quick: false,
        resume_after: 0,
    };
    let r = run(&mut b, &d, &k, std::rc::Rc::new(RowSum), &opts, &mut |_| {}).unwrap();
    let c = r.cases.last().unwrap();
    assert!(c.case.starts_with("index overflow"), "{c:?}");
    assert!(c.skipped && c.pass, "{c:?}");
    assert!(
        c.detail.starts_with("not applicable: ") && c.detail.contains("32 bits"),
        "{}",
        c.detail
    );
    assert!(r.passed(), "{}", r.render());
}

#[test]
fn the_check_says_plainly_when_the_index_overflow_case_does_not_fit() {
    // The host backend offers 2 GiB: x alone needs 8.6 GB past 2^31 elements.
    let r = check(good);
    let c = r.cases.last().unwrap();
    assert!(c.case.starts_with("index overflow, cols="), "{}", c.case);
    assert!(c.skipped && c.pass, "{c:?}");
    assert!(
        c.detail
            .starts_with("not run: needs 8.6 GB of device memory"),
        "{}",
        c.detail
    );
    assert!(
        c.render().starts_with("SKIP index overflow"),
        "{}",
        c.render()
    );
    assert!(r.passed());
}

#[test]
fn a_launch_that_covers_nothing_fails_and_min_and_max_keep_their_edges() {
    // rows / 256 blocks: 0 blocks below 256 rows, while y has rows elements.
    let d = with(
        &MANIFEST
            .replace("ceil_div(rows, 32)", "rows / 256")
            .replace("sizes.rows = {}", "sizes.rows = { values = [1, 7] }"),
    );
    let r = check_decl(&d, good);
    assert!(!r.passed());
    assert!(
        r.cases
            .iter()
            .filter(|c| !c.skipped)
            .all(|c| !c.pass && c.detail.contains("zero dimension")),
        "{}",
        r.render()
    );
    // A min above the first chunk keeps its edge, and the ladder straddles the first
    // boundary past it (the chunk is looked for from the smallest size admitted); a max
    // below the chunk keeps its edges.
    let d = with(&MANIFEST.replace("sizes.rows = {}", "sizes.rows = { min = 200 }"));
    let rows: Vec<i64> = ladder(d.op.as_ref())
        .unwrap()
        .iter()
        .map(|s| s["rows"])
        .collect();
    assert!(rows.iter().all(|r| *r >= 200), "{rows:?}");
    for r in [200, 223, 224, 225, 447, 449] {
        assert!(rows.contains(&r), "{r} in {rows:?}");
    }
    let d = with(&MANIFEST.replace("sizes.rows = {}", "sizes.rows = { max = 20 }"));
    let rows: Vec<i64> = ladder(d.op.as_ref())
        .unwrap()
        .iter()
        .map(|s| s["rows"])
        .collect();
    for r in [1, 2, 19, 20] {
        assert!(rows.contains(&r), "{r} in {rows:?}");
    }
    assert!(rows.iter().all(|r| *r <= 20), "{rows:?}");
}

#[test]
fn every_input_case_fills_its_buffer_as_it_says() {
    let b = |dtype: Dtype| Buffer {
        name: "x".into(),
        dtype,
        role: Role::In,
        elements: 10,
        shape: vec![10],
        axes: vec!["i".into()],
        comparison: None,
        range: Some([-2.0, 2.0]),
        domain: None,
        float_domain: None,
        offsets: false,
    };
    let f32s = |v: Vec<u8>| -> Vec<f32> {
        v.chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    // Two inputs of one shape differ; the same seed replays.
    let s0 = f32s(fill(&b(Dtype::F32), 0, InputCase::Structural).unwrap());
    assert_ne!(
        s0,
        f32s(fill(&b(Dtype::F32), 1, InputCase::Structural).unwrap())
    );
    assert!(s0.iter().all(|v| v.fract() == 0.0 && v.abs() <= 8.0));
    let u = fill(&b(Dtype::F32), 0, InputCase::Uniform { seed: 3 }).unwrap();
    assert_eq!(
        u,
        fill(&b(Dtype::F32), 0, InputCase::Uniform { seed: 3 }).unwrap()
    );
    assert!(f32s(u).iter().all(|v| (-2.0..=2.0).contains(v)));
    let large = f32s(fill(&b(Dtype::F32), 0, InputCase::Large { seed: 3 }).unwrap());
    assert!(large.iter().any(|v| v.abs() > 2.0) && large.iter().all(|v| v.abs() <= 2000.0));
    assert!(
        f32s(fill(&b(Dtype::F32), 0, InputCase::Normal { seed: 3 }).unwrap())
            .iter()
            .all(|v| v.is_finite())
    );
    let c = f32s(fill(&b(Dtype::F32), 0, InputCase::Constant).unwrap());
    assert!(c.iter().all(|v| *v == c[0]));
    let sp = f32s(fill(&b(Dtype::F32), 0, InputCase::Special).unwrap());
    assert_eq!(sp[1].to_bits(), 0x8000_0000, "-0.0");
    assert!(sp[2] > 0.0 && !sp[2].is_normal(), "a subnormal");
    assert!(sp[6].is_infinite() && sp[8].is_nan() && sp[9].is_nan());
    assert_ne!(sp[8].to_bits(), sp[9].to_bits(), "two NaN payloads");
    let ints = fill(&b(Dtype::I32), 0, InputCase::Special).unwrap();
    let i: Vec<i32> = ints
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(&i[..5], &[0, 1, i32::MAX, i32::MIN, -1]);
    let h = fill(&b(Dtype::F16), 0, InputCase::Special).unwrap();
    assert_eq!(u16::from_le_bytes([h[2], h[3]]), 0x8000, "-0.0 in f16");
}

#[test]
fn a_correct_kernel_passes_and_each_verdict_names_its_rule() {
    let r = check(good);
    assert!(r.passed(), "{}", r.render());
    assert!(r.cases.iter().any(|c| c.case.contains("random input seed")));
    assert!(r.cases.iter().any(|c| c.case.ends_with("determinism")));
    for case in [
        "normal input seed",
        "large-magnitude input seed",
        "constant input",
    ] {
        assert!(
            r.cases.iter().any(|c| c.case.contains(case) && c.pass),
            "{case}: {}",
            r.render()
        );
    }
    // The rule is a tolerance: no special values (a tolerance has no answer for NaN).
    assert!(!r.cases.iter().any(|c| c.case.contains("special values")));
    let c = &r.cases[0];
    assert!(c.detail.contains("allclose"), "{}", c.detail);
    assert_eq!(r.operation, "declared, reference: a Rust row sum");
}

/// Sums each row backwards (another order: rounding differs from the reference's).
fn reversed(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    let (x, y, rows, cols) = args(a);
    for r in 0..rows {
        let s: f32 = (0..cols)
            .rev()
            .map(|c| f32::from_bits(mem[x][r * cols + c]))
            .sum();
        mem[y][r] = s.to_bits();
    }
}
/// Drops the last column of every row wider than one.
fn drops_last_column(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    let (x, y, rows, cols) = args(a);
    for r in 0..rows {
        let s: f32 = (0..cols.saturating_sub(1).max(1))
            .map(|c| f32::from_bits(mem[x][r * cols + c]))
            .sum();
        mem[y][r] = s.to_bits();
    }
}

#[test]
fn scaled_sum_takes_its_magnitude_from_the_reference_on_absolute_inputs() {
    let d = with(&MANIFEST.replace(
        "{ allclose = { atol = 1e-5, rtol = 1e-5 } }",
        "{ scaled-sum = \"cols\" }",
    ));
    let r = check_decl(&d, reversed);
    assert!(r.passed(), "another summation order passes: {}", r.render());
    assert!(
        r.cases[0].detail.contains("scaled-sum k="),
        "{}",
        r.cases[0].detail
    );
    let r = check_decl(&d, drops_last_column);
    assert!(!r.passed(), "a dropped term fails: {}", r.render());
    // The device checker reads the magnitudes klab uploads (every judgement
    // cross-checked by the CPU oracle: a wrong upload is a klab error, not a verdict).
    for (f, pass) in [
        (reversed as crate::backend::host::GeneralKernelFn, true),
        (drops_last_column, false),
    ] {
        let b = HostBackend::new().with_device_checker(None).with_paranoid();
        let r = check_on(b, &d, f, RowSum).unwrap();
        assert_eq!(r.passed(), pass, "{}", r.render());
    }
    // The magnitude is sum |x|: a row of +1 and -1 sums to 0 with magnitude cols, so
    // the gate is not a relative error against the (zero) result.
    let w = DeclaredWorkload::new(
        d.clone(),
        [("rows".to_string(), 1), ("cols".to_string(), 4)].into(),
        InputCase::Structural,
        0,
        std::rc::Rc::new(RowSum),
    )
    .unwrap();
    let inputs = w.inputs().unwrap();
    let x: Vec<f32> = inputs[0]
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want: f64 = x.iter().map(|v| v.abs() as f64).sum();
    assert_eq!(w.scales().unwrap()[1].as_deref(), Some(&[want][..]));
    assert_eq!(w.scales().unwrap()[0], None, "inputs have no magnitude");
    // A k that is not a size expression is a manifest error naming the field.
    let bad = MANIFEST.replace(
        "{ allclose = { atol = 1e-5, rtol = 1e-5 } }",
        "{ scaled-sum = \"depth\" }",
    );
    let source = klab_spec::testing::stand_in_source(MANIFEST);
    let e = klab_spec::manifest::parse(
        "m.toml",
        &bad,
        klab_spec::manifest::Files::Given(&|_| Ok(("k.cu".into(), source.clone().into()))),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("buffers.y.compare") && e.to_string().contains("depth"),
        "{e}"
    );
}

/// A row sum whose oracle sums in f64 and whose working-precision build sums in f32
/// (what a C reference with `KLAB_REAL` gives).
struct RowSumReal;
impl Reference for RowSumReal {
    fn run(&self, _: &Shape, b: &mut [&mut [u8]], ints: &[i64], _: &[f64]) -> Result<(), String> {
        row_sum::<f64>(b, ints);
        Ok(())
    }
    fn run_in(
        &self,
        p: rule::Precision,
        _: &Shape,
        b: &mut [&mut [u8]],
        ints: &[i64],
        _: &[f64],
    ) -> Result<(), String> {
        assert_eq!(p, rule::Precision::F32);
        row_sum::<f32>(b, ints);
        Ok(())
    }
    fn describe(&self) -> String {
        "a Rust row sum in KLAB_REAL".into()
    }
}
fn row_sum<T: num_like::Real>(b: &mut [&mut [u8]], ints: &[i64]) {
    let (rows, cols) = (ints[0] as usize, ints[1] as usize);
    for r in 0..rows {
        let mut s = T::zero();
        for c in 0..cols {
            let i = 4 * (r * cols + c);
            s = s.add(f32::from_le_bytes(b[0][i..i + 4].try_into().unwrap()));
        }
        b[1][4 * r..4 * r + 4].copy_from_slice(&s.to_f32().to_le_bytes());
    }
}
mod num_like {
    pub trait Real: Copy {
        fn zero() -> Self;
        fn add(self, x: f32) -> Self;
        fn to_f32(self) -> f32;
    }
    impl Real for f32 {
        fn zero() -> f32 {
            0.0
        }
        fn add(self, x: f32) -> f32 {
            self + x
        }
        fn to_f32(self) -> f32 {
            self
        }
    }
    impl Real for f64 {
        fn zero() -> f64 {
            0.0
        }
        fn add(self, x: f32) -> f64 {
            self + x as f64
        }
        fn to_f32(self) -> f32 {
            self as f32
        }
    }
}
/// Sums each row in f32 but keeps only bfloat16's 8 bits of mantissa after each step:
/// a kernel less accurate than its working precision.
fn sums_in_bf16(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    let (x, y, rows, cols) = args(a);
    for r in 0..rows {
        let mut s = 0f32;
        for c in 0..cols {
            s = f32::from_bits((s + f32::from_bits(mem[x][r * cols + c])).to_bits() & 0xffff_0000);
        }
        mem[y][r] = s.to_bits();
    }
}

#[test]
fn reference_error_accepts_another_order_that_an_absolute_tolerance_rejects() {
    let check_with = |rule: &str, f: crate::backend::host::GeneralKernelFn| {
        let d = with(
            &MANIFEST
                .replace("{ allclose = { atol = 1e-5, rtol = 1e-5 } }", rule)
                .replace("values = [1, 5, 33]", "values = [1, 5, 33, 1000]"),
        );
        check_on_host(&d, f, RowSumReal).unwrap()
    };
    // The failure that motivated the rule: summing in another order than the reference
    // is as accurate, but large-magnitude inputs put the difference above an absolute
    // tolerance written for unit-scale inputs.
    let r = check_with("{ allclose = { atol = 1e-5, rtol = 0 } }", reversed);
    assert!(!r.passed(), "{}", r.render());
    let rule = "{ reference-error = { k = 4, atol = 0 } }";
    let r = check_with(rule, reversed);
    assert!(r.passed(), "another order is as accurate: {}", r.render());
    assert!(
        r.cases[0].detail.contains("reference-error k=4"),
        "{}",
        r.cases[0].detail
    );
    // Less accurate than the reference in f32, or wrong: rejected, and the line gives
    // the kernel's error beside the reference's own.
    for bad in [
        sums_in_bf16 as crate::backend::host::GeneralKernelFn,
        drops_last_column,
    ] {
        let r = check_with(rule, bad);
        assert!(!r.passed(), "{}", r.render());
        let failed = r.cases.iter().find(|c| !c.pass).unwrap();
        assert!(
            failed.detail.contains("the reference in f32 is off by"),
            "{}",
            failed.detail
        );
    }
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
fn bitwise_rules_also_get_special_values() {
    let d = with(&MANIFEST.replace("{ allclose = { atol = 1e-5, rtol = 1e-5 } }", "\"bitwise\""));
    let r = check_decl(&d, good);
    let special: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.case.contains("special values"))
        .collect();
    assert_eq!(special.len(), 1);
    assert!(special[0].pass, "{}", special[0].detail);
    assert!(r.passed(), "{}", r.render());
}

#[test]
fn a_dropped_ragged_tail_is_found_at_the_element_it_skipped() {
    let r = check(drops_tail);
    assert!(!r.passed());
    let f = r.cases.iter().find(|c| !c.pass).unwrap();
    // The first row past the last whole block of 32 was never written: the poison
    // (a NaN under 0xff) is read back, and the failure names that row.
    let rows: i64 = f
        .case
        .split("rows=")
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        f.detail
            .contains(&format!("first at [row {}]: got NaN", rows / 32 * 32)),
        "{}: {}",
        f.case,
        f.detail
    );
    // Block-exact shapes pass: the bug is only in the tail.
    assert!(r.cases.iter().any(|c| c.case.contains("rows=32") && c.pass));
}

/// y[r] += sum of row r of x: the accumulating form of the row sum (C = AB + C in a
/// GEMM), with y declared inout.
struct RowSumAcc;
impl Reference for RowSumAcc {
    fn run(&self, _: &Shape, b: &mut [&mut [u8]], ints: &[i64], _: &[f64]) -> Result<(), String> {
        let (rows, cols) = (ints[0] as usize, ints[1] as usize);
        for r in 0..rows {
            let mut s = 0f32;
            for c in 0..cols {
                let at = 4 * (r * cols + c);
                s += f32::from_le_bytes(b[0][at..at + 4].try_into().unwrap());
            }
            let y = f32::from_le_bytes(b[1][4 * r..4 * r + 4].try_into().unwrap());
            b[1][4 * r..4 * r + 4].copy_from_slice(&(y + s).to_le_bytes());
        }
        Ok(())
    }
    fn describe(&self) -> String {
        "a Rust accumulating row sum".into()
    }
}
fn accumulates(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    let (x, y, rows, cols) = args(a);
    for r in 0..rows {
        let s: f32 = (0..cols)
            .map(|c| f32::from_bits(mem[x][r * cols + c]))
            .sum();
        mem[y][r] = (f32::from_bits(mem[y][r]) + s).to_bits();
    }
}

/// An honest kernel that accumulates into an inout output is timed on its declared
/// input every launch (restored outside the interval), so the output checked after the
/// block is one launch's, under every timer and regime; before invalidation the timed
/// launches kept accumulating and a correct kernel failed the gate.
#[test]
fn an_accumulating_inout_kernel_is_accepted_under_every_timer_and_regime() {
    use crate::timing::{measure, Outcome, TimingConfig, WarmupPolicy};
    use klab_core::samples::{Invalidation, Regime, Timer};
    let d = with(&MANIFEST.replace("role = \"out\"", "role = \"inout\""));
    let shape: Shape = [("rows".to_string(), 40), ("cols".to_string(), 33)].into();
    let w = DeclaredWorkload::new(
        d,
        shape,
        InputCase::Uniform { seed: 3 },
        0,
        std::rc::Rc::new(RowSumAcc),
    )
    .unwrap();
    for invalidation in [Invalidation::EveryLaunch, Invalidation::LabContract] {
        for regime in Regime::ALL {
            for timer in [
                Timer::PerLaunch,
                Timer::Batch { launches: 3 },
                Timer::GraphReplay { launches: 2 },
            ] {
                // One sample as well: the sample run on fresh inputs is then the last
                // launch of its slots, judged against the fresh inputs' reference.
                for samples in [1, 12] {
                    let cfg = TimingConfig {
                        timer,
                        regime,
                        samples,
                        warmup: WarmupPolicy::Count { launches: 3 },
                        invalidation,
                    };
                    let mut b = HostBackend::new()
                        .with_general_kernel("rowsum", accumulates)
                        .with_l2_bytes(4096);
                    let k = [b.kernel("rowsum").unwrap()];
                    let o = measure(&mut b, &w, &k, &cfg, "b", &mut Default::default).unwrap();
                    let Outcome::Measured(m) = o else {
                        panic!("{o:?}")
                    };
                    let at = format!("{timer} {regime} {samples} {invalidation:?}");
                    match invalidation {
                        Invalidation::EveryLaunch => {
                            assert_eq!(m.gate_failure(), None, "{at}");
                            assert!(
                                m.verified
                                    .iter()
                                    .any(|v| v.inputs == Some(NewInputs::Fresh)),
                                "{at}"
                            );
                        }
                        // The lab's contract leaves the output in place: accumulated.
                        Invalidation::LabContract => {
                            assert!(!m.correct(), "{at}")
                        }
                    }
                }
            }
        }
    }
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

#[test]
fn the_index_overflow_case_of_a_matrix_is_the_first_n_whose_last_row_starts_past_2_31() {
    for name in ["padded", "lean_64_cm", "memcpy"] {
        let op = klab_spec::testing::op_of(name);
        let base = Shape::from([("n".into(), 1024)]);
        let s = crate::declared::overflow_shape(&op, &base, 1 << 31).unwrap();
        assert_eq!(s["n"], 46_342, "{name}");
    }
    let op = klab_spec::testing::op_of("triad_f32");
    let s =
        crate::declared::overflow_shape(&op, &Shape::from([("n".into(), 1024)]), 1 << 31).unwrap();
    assert_eq!(s["n"], (1 << 31) + 2);
}

/// A size with `values` (not marked `launch`) is held at its values while another's chunk
/// is looked for, as the ladder holds it: a block size `bs = { values = [128] }` taken at
/// 1 gave a chunk of 1 and a ladder of n = 1..8 that never reached a second block.
#[test]
fn a_size_with_values_is_held_there_while_a_chunk_is_found() {
    let op = |bs: &str| {
        with(&format!(
            r#"
source = "k.cu"
[[kernel]]
name = "copy"
entry = "rowsum"
operation = "declared"
params = ["x", "y", "n:i32", "bs:i32"]
[kernel.op]
grid = ["ceil_div(n, bs)"]
block = ["bs"]
useful_bytes = "8 * n"
reference = {{ c = "ref.c:copy" }}
sizes.n = {{}}
sizes.bs = {bs}
buffers.x = {{ dtype = "f32", len = "n", role = "in" }}
buffers.y = {{ dtype = "f32", len = "n", role = "out", compare = "bitwise" }}
"#
        ))
        .op
    };
    for (bs, block) in [
        ("{ values = [128] }", 128),
        ("{ values = [128], launch = true }", 128),
        ("{ values = [64, 128, 256] }", 128),
    ] {
        let op = op(bs);
        assert_eq!(chunk(&op, "n"), block, "{bs}");
        let n: std::collections::BTreeSet<i64> =
            ladder(&op).unwrap().iter().map(|s| s["n"]).collect();
        for v in [block - 1, block, block + 1, 2 * block - 1, 2 * block + 1] {
            assert!(n.contains(&(v as i64)), "{bs}: {v} in {n:?}");
        }
    }
}

/// Held at its values' middle, a size can hide another's block: rows at 1024 in a grid over
/// `rows * cols` make every cols a whole number of 256-element blocks. The chunk is the
/// larger of the two holdings (rows at 1 finds the 256).
#[test]
fn a_size_held_at_its_values_does_not_hide_another_sizes_block() {
    let d = with(
        &MANIFEST
            .replace(
                r#"grid = ["ceil_div(rows, 32)"]"#,
                r#"grid = ["(rows * cols + 255) / 256"]"#,
            )
            .replace(r#"block = ["32"]"#, r#"block = ["256"]"#)
            .replace(
                "sizes.rows = {}",
                "sizes.rows = { values = [1, 1024, 4096] }",
            )
            .replace("sizes.cols = { values = [1, 5, 33] }", "sizes.cols = {}"),
    );
    assert_eq!(chunk(&d.op, "cols"), 256);
}

/// The index-overflow shape exists whenever a buffer can hold more than 2^31 elements
/// within the sizes' caps: a `cols` of at most 2 (or 3) and a 1-D n of at most 2^31 + 1
/// were called "not applicable", and a capped cols asked rows to grow 50% past what the
/// wrap needs.
#[test]
fn a_capped_size_still_gets_the_smallest_overflow_shape() {
    let limit = INDEX_OVERFLOW_ELEMENTS as i64;
    for (max, rows) in [(2, 1_073_741_826), (3, 715_827_884), (4, 536_870_914)] {
        let d = with(&MANIFEST.replace(
            "sizes.cols = { values = [1, 5, 33] }",
            &format!("sizes.cols = {{ max = {max} }}"),
        ));
        let base: Shape = [("rows".to_string(), 3), ("cols".to_string(), 1)].into();
        let s = overflow_shape(d.op.as_ref(), &base, limit as u64).unwrap();
        assert_eq!(s["cols"], max, "{s:?}");
        assert!((s["rows"] - 1) * max > limit, "{s:?}");
        assert!(s["rows"] <= rows, "max {max}: {s:?}, at most {rows}");
    }
    // One dimension, n an i64 of at most 2^31 + 1: element 2^31 exists.
    let one = with(&format!(
        r#"
source = "k.cu"
[[kernel]]
name = "copy"
entry = "rowsum"
operation = "declared"
params = ["x", "y", "n:i64"]
[kernel.op]
grid = ["ceil_div(n, 256)"]
block = ["256"]
useful_bytes = "8 * n"
reference = {{ c = "ref.c:copy" }}
sizes.n = {{ max = {} }}
buffers.x = {{ dtype = "f32", len = "n", role = "in" }}
buffers.y = {{ dtype = "f32", len = "n", role = "out", compare = "bitwise" }}
"#,
        limit + 1
    ));
    let base: Shape = [("n".to_string(), 1024)].into();
    let s = overflow_shape(one.op.as_ref(), &base, limit as u64).unwrap();
    assert_eq!(s["n"], limit + 1);
}
