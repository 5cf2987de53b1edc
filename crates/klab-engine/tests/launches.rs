//! Operations declared as a sequence of launches, through the engine: each launch's own
//! parameters and launch, a correct sequence passing every case launched in order, a wrong
//! launch failing at its element, the sequence timed and captured as one unit, and the
//! refusals that name their field.

use klab_core::expr::Shape;
use klab_engine::backend::host::{Call, HostArg, HostBackend};
use klab_engine::reference::Reference;
use klab_spec::manifest::KernelDecl;

/// Rows centred on their mean, in two launches: the means (into scratch), then the
/// centred rows. The first launch takes a size no other parameter list has (`tpb`),
/// the second `cols` as i64 where the operation passes it as i32.
const CENTRE: &str = r#"
source = "k.cu"
[[kernel]]
name = "centre"
operation = "declared"
params = ["out", "mean", "x", "rows:i32", "cols:i32"]
launches = [
  { entry = "row_mean", params = ["mean", "x", "rows:i32", "cols:i32", "tpb:i32"], grid = ["rows"], block = ["tpb"] },
  { entry = "centre", params = ["out", "x", "mean", "rows:i32", "cols:i64"], grid = ["ceil_div(rows * cols, 64)"], block = ["64"] },
]
[kernel.op]
useful_bytes = "8 * rows * cols"
reference = { c = "ref.c:centre_ref" }
sizes.rows = { values = [1, 3, 40] }
sizes.cols = { values = [1, 5, 33] }
sizes.tpb = { values = [32], launch = true }
buffers.x = { dtype = "f32", len = "rows * cols", role = "in", range = [-2.0, 2.0] }
buffers.mean = { dtype = "f32", len = "rows", role = "scratch" }
buffers.out = { dtype = "f32", len = "rows * cols", role = "out", shape = ["rows", "cols"], compare = "bitwise" }
"#;

fn parse(manifest: &str) -> Result<KernelDecl, klab_spec::manifest::ManifestError> {
    let source = klab_spec::testing::stand_in_source(manifest);
    klab_spec::manifest::parse(
        "m.toml",
        manifest,
        klab_spec::manifest::Files::Given(&|_| Ok(("k.cu".into(), source.clone().into()))),
    )
    .map(|m| m.kernels[0].clone())
}

fn f32s(words: &[u32]) -> Vec<f32> {
    words.iter().map(|w| f32::from_bits(*w)).collect()
}

fn mean_of(row: &[f32]) -> f32 {
    row.iter().fold(0.0f32, |a, v| a + v) / row.len() as f32
}

fn row_mean(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    let [HostArg::Buffer(mean), HostArg::Buffer(x), HostArg::I32(rows), HostArg::I32(cols), HostArg::I32(32)] =
        a
    else {
        panic!("{a:?}")
    };
    let (rows, cols) = (*rows as usize, *cols as usize);
    let xs = f32s(&mem[*x]);
    for r in 0..rows {
        mem[*mean][r] = mean_of(&xs[r * cols..(r + 1) * cols]).to_bits();
    }
}

fn centre_with(mem: &mut [Vec<u32>], a: &[HostArg], same_mean: bool) {
    let [HostArg::Buffer(out), HostArg::Buffer(x), HostArg::Buffer(mean), HostArg::I32(rows), HostArg::I64(cols)] =
        a
    else {
        panic!("{a:?}")
    };
    let (rows, cols) = (*rows as usize, *cols as usize);
    let (xs, means) = (f32s(&mem[*x]), f32s(&mem[*mean]));
    for i in 0..rows * cols {
        let m = if same_mean { means[0] } else { means[i / cols] };
        mem[*out][i] = (xs[i] - m).to_bits();
    }
}

fn centre(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    centre_with(mem, a, false)
}

/// Centres every row on the first row's mean.
fn centre_on_row_0(mem: &mut [Vec<u32>], a: &[HostArg], _: u64) {
    centre_with(mem, a, true)
}

struct CentreRef;
impl Reference for CentreRef {
    fn run(&self, _: &Shape, b: &mut [&mut [u8]], i: &[i64], _: &[f64]) -> Result<(), String> {
        let (rows, cols) = (i[0] as usize, i[1] as usize);
        let xs: Vec<f32> = b[2]
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        for r in 0..rows {
            let m = mean_of(&xs[r * cols..(r + 1) * cols]);
            for c in 0..cols {
                let v = (xs[r * cols + c] - m).to_le_bytes();
                b[0][4 * (r * cols + c)..4 * (r * cols + c + 1)].copy_from_slice(&v);
            }
        }
        Ok(())
    }
    fn describe(&self) -> String {
        "a Rust centring".into()
    }
}

fn check(second: klab_engine::backend::host::GeneralKernelFn) -> klab_engine::check::CheckReport {
    let decl = parse(CENTRE).unwrap();
    let mut b = HostBackend::new()
        .with_general_kernel("row_mean", row_mean)
        .with_general_kernel("centre", second);
    let k = klab_engine::workload::load_kernels(&mut b, &decl).unwrap();
    let opts = klab_engine::check::CheckOptions {
        seed: 5,
        sizes: None,
        shapes: None,
        quick: false,
        resume_after: 0,
    };
    klab_engine::check::run(
        &mut b,
        &decl,
        &k,
        std::rc::Rc::new(CentreRef),
        &opts,
        &mut |_| {},
    )
    .unwrap()
}

#[test]
fn a_sequence_is_declared_with_each_launch_its_own_parameters_and_launch() {
    let decl = parse(CENTRE).unwrap();
    assert_eq!(decl.entry, "row_mean + centre");
    let launches = decl.launches();
    assert_eq!(
        launches.iter().map(|l| l.entry).collect::<Vec<_>>(),
        ["row_mean", "centre"]
    );
    let at = Shape::from([("rows".into(), 3), ("cols".into(), 100), ("tpb".into(), 32)]);
    let plans: Vec<_> = launches.iter().map(|l| l.plan(&at).unwrap()).collect();
    assert_eq!((plans[0].grid.x, plans[0].block.x), (3, 32));
    assert_eq!((plans[1].grid.x, plans[1].block.x), (5, 64));
    // Arguments by name: the launch-only size from the shape, cols in each launch's type.
    let bufs = ["out", "mean", "x"];
    let args =
        klab_engine::declared::launch_args(&launches[1], &decl.op, &at, &bufs, &[3, 100], &[]);
    let shown: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    assert_eq!(
        shown,
        [
            "Buffer(\"out\")",
            "Buffer(\"x\")",
            "Buffer(\"mean\")",
            "I32(3)",
            "I64(100)"
        ]
    );
    let args =
        klab_engine::declared::launch_args(&launches[0], &decl.op, &at, &bufs, &[3, 100], &[]);
    assert_eq!(format!("{:?}", args[4]), "I32(32)");
}

#[test]
fn a_correct_sequence_passes_every_case_launched_in_order() {
    let r = check(centre);
    assert!(r.passed(), "{}", r.render());
    // The second launch read what the first wrote: had they run the other way round,
    // it would have read a poisoned or scrambled mean.
    let decl = parse(CENTRE).unwrap();
    let mut b = HostBackend::new()
        .with_general_kernel("row_mean", row_mean)
        .with_general_kernel("centre", centre);
    let k = klab_engine::workload::load_kernels(&mut b, &decl).unwrap();
    let w = klab_engine::declared::DeclaredWorkload::new(
        decl,
        Shape::from([("rows".into(), 3), ("cols".into(), 5), ("tpb".into(), 32)]),
        klab_engine::declared::InputCase::Structural,
        0,
        std::rc::Rc::new(CentreRef),
    )
    .unwrap();
    use klab_engine::workload::Workload;
    let mut bufs = w.create_slot(&mut b, 0).unwrap();
    b.calls.clear();
    let outcome = klab_engine::timing::validate_once(&mut b, &w, &k, &mut bufs, 0, 0xff).unwrap();
    assert!(outcome.passed(), "{outcome:?}");
    let launched: Vec<&Call> = b
        .calls
        .iter()
        .filter(|c| matches!(c, Call::Launch(_)))
        .collect();
    assert_eq!(
        launched,
        [
            &Call::Launch("row_mean".into()),
            &Call::Launch("centre".into())
        ]
    );
}

#[test]
fn a_wrong_launch_of_the_sequence_fails_at_its_element() {
    let r = check(centre_on_row_0);
    assert!(!r.passed(), "{}", r.render());
    let f = r.first_failure().unwrap();
    assert!(f.detail.contains("first at ["), "{}", f.detail);
}

#[test]
fn a_sequence_is_timed_and_captured_as_one_unit() {
    use klab_core::gpustate::GpuState;
    use klab_core::samples::{Invalidation, Regime, Timer};
    use klab_engine::timing::{measure, Outcome, TimingConfig, WarmupPolicy};
    let decl = parse(CENTRE).unwrap();
    let w = klab_engine::declared::DeclaredWorkload::new(
        decl.clone(),
        Shape::from([("rows".into(), 40), ("cols".into(), 33), ("tpb".into(), 32)]),
        klab_engine::declared::InputCase::Uniform { seed: 1 },
        0,
        std::rc::Rc::new(CentreRef),
    )
    .unwrap();
    for timer in [Timer::PerLaunch, Timer::GraphReplay { launches: 4 }] {
        let mut b = HostBackend::new()
            .with_general_kernel("row_mean", row_mean)
            .with_general_kernel("centre", centre);
        let k = klab_engine::workload::load_kernels(&mut b, &decl).unwrap();
        let cfg = TimingConfig {
            timer,
            regime: Regime::SameBuffer,
            samples: 5,
            warmup: WarmupPolicy::Count { launches: 4 },
            invalidation: Invalidation::EveryLaunch,
        };
        let o = measure(&mut b, &w, &k, &cfg, "block", &mut GpuState::default).unwrap();
        assert!(matches!(o, Outcome::Measured(_)), "{timer:?}: {o:?}");
        let launches = |name: &str| {
            b.calls
                .iter()
                .filter(|c| **c == Call::Launch(name.into()))
                .count()
        };
        // Every launch of the sequence is the whole sequence, never one kernel alone.
        assert_eq!(launches("row_mean"), launches("centre"), "{timer:?}");
        if let Timer::GraphReplay { .. } = timer {
            let captured = b.calls.iter().find_map(|c| match c {
                Call::Capture(entries) => Some(entries.clone()),
                _ => None,
            });
            assert_eq!(
                captured.unwrap(),
                ["row_mean", "centre"].repeat(4),
                "each of the graph's launches is the sequence"
            );
        }
    }
}

#[test]
fn a_sequence_that_is_not_one_is_refused_naming_its_field() {
    let cases = [
        // Each launch names its own entry; the kernel names none.
        (
            CENTRE.replace(
                "name = \"centre\"\n",
                "name = \"centre\"\nentry = \"row_mean\"\n",
            ),
            "kernel[0].entry",
            "each launch's entry",
        ),
        (
            {
                let (start, end) = (
                    CENTRE.find("launches = [").unwrap(),
                    CENTRE.find("\n]\n").unwrap(),
                );
                format!("{}launches = []{}", &CENTRE[..start], &CENTRE[end + 2..])
            },
            "kernel[0].launches",
            "give one or more launches",
        ),
        (
            CENTRE.replace(
                "\"mean\", \"x\", \"rows:i32\", \"cols:i32\", \"tpb:i32\"",
                "\"mean\", \"x\", \"rows:i32\", \"cols:i32\", \"nope:i32\"",
            ),
            "kernel[0].launches[0].params[4]",
            "'nope' is not a buffer, size or scalar",
        ),
        (
            CENTRE.replace(
                "[\"ceil_div(rows * cols, 64)\"]",
                "[\"ceil_div(rows * depth, 64)\"]",
            ),
            "kernel[0].launches[1].grid[0]",
            "'depth', which is not a size variable",
        ),
        (
            CENTRE
                .replace("[\"mean\", \"x\", \"rows:i32\"", "[\"x\", \"rows:i32\"")
                .replace(
                    "\"out\", \"x\", \"mean\", \"rows:i32\"",
                    "\"out\", \"x\", \"rows:i32\"",
                ),
            "kernel[0].launches",
            "buffer 'mean' is passed to no launch",
        ),
    ];
    let scalar = CENTRE
        .replace(
            "params = [\"out\", \"mean\", \"x\", \"rows:i32\", \"cols:i32\"]\n",
            "params = [\"out\", \"mean\", \"x\", \"rows:i32\", \"cols:i32\", \"k:f32\"]\n",
        )
        .replace(
            "[kernel.op]\n",
            "[kernel.op]\nscalars.k = { type = \"f32\", values = [2.0] }\n",
        );
    let cases = cases.into_iter().chain([
        // A scalar the operation passes its reference but no launch takes.
        (
            scalar,
            "kernel[0].launches",
            "scalar 'k' is passed to no launch",
        ),
        // A value a launch's parameter type cannot hold is the operation's size's.
        (
            CENTRE
                .replace(
                    "sizes.rows = { values = [1, 3, 40] }",
                    "sizes.rows = { values = [1, 3, 3000000000] }",
                )
                .replace(
                    "params = [\"out\", \"mean\", \"x\", \"rows:i32\", \"cols:i32\"]\n",
                    "params = [\"out\", \"mean\", \"x\", \"rows:i64\", \"cols:i32\"]\n",
                ),
            "kernel[0].op.sizes.rows",
            "3000000000 is not a whole number that i32 holds",
        ),
        // Neither an entry nor launches.
        (
            {
                let (start, end) = (
                    CENTRE.find("launches = [").unwrap(),
                    CENTRE.find("\n]\n").unwrap(),
                );
                format!("{}{}", &CENTRE[..start], &CENTRE[end + 3..])
            },
            "kernel[0].entry",
            "or launches = [...]",
        ),
    ]);
    for (text, field, words) in cases {
        let e = parse(&text).unwrap_err();
        assert!(e.field.starts_with(field), "{field}: {e}");
        assert!(e.to_string().contains(words), "{words}: {e}");
    }
    // A launch's parameters against its own __global__ signature.
    let source =
        klab_spec::testing::stand_in_source(CENTRE).replace("int64_t cols", "int32_t cols");
    let e = klab_spec::manifest::parse(
        "m.toml",
        CENTRE,
        klab_spec::manifest::Files::Given(&|_| Ok(("k.cu".into(), source.clone().into()))),
    )
    .unwrap_err();
    assert_eq!(e.field, "kernel[0].launches[1].params", "{e}");
    assert!(e.to_string().contains("'cols' is passed as i64"), "{e}");
    // An operation without a launch of its own needs one for a kernel that has none.
    let single = "source = \"k.cu\"\n[[kernel]]\nname = \"one\"\nentry = \"row_mean\"\noperation = \"declared\"\nparams = [\"mean\", \"x\", \"rows:i32\", \"cols:i32\", \"tpb:i32\"]\n[kernel.op]\nuseful_bytes = \"4\"\nreference = { c = \"ref.c:r\" }\nsizes.rows = { values = [1] }\nsizes.cols = { values = [1] }\nsizes.tpb = { values = [32], launch = true }\nbuffers.x = { dtype = \"f32\", len = \"rows * cols\", role = \"in\" }\nbuffers.mean = { dtype = \"f32\", len = \"rows\", role = \"out\", compare = \"bitwise\" }\n";
    let e = parse(single).unwrap_err();
    assert_eq!(e.field, "kernel[0].op.grid", "{e}");
    assert!(e.to_string().contains("launches = [...]"), "{e}");
}

#[test]
fn a_launch_that_cannot_be_formed_names_its_place_in_the_sequence() {
    let decl = parse(&CENTRE.replace(
        "[\"ceil_div(rows * cols, 64)\"]",
        "[\"ceil_div(rows * cols, cols - 1)\"]",
    ))
    .unwrap();
    let at = Shape::from([("rows".into(), 3), ("cols".into(), 1), ("tpb".into(), 32)]);
    assert!(decl.launches()[0].plan(&at).is_ok());
    let e = decl.launches()[1].plan(&at).unwrap_err();
    assert!(
        e.starts_with("launches[1] (centre).grid at cols=1 rows=3 tpb=32: "),
        "{e}"
    );
}

#[test]
fn a_reference_kernel_that_launches_with_a_size_the_checked_one_lacks_is_refused() {
    let decl = parse(CENTRE).unwrap();
    // The checked operation: the same, without the launch parameter tpb.
    let checked = CENTRE
            .replace("launches = [\n  { entry = \"row_mean\", params = [\"mean\", \"x\", \"rows:i32\", \"cols:i32\", \"tpb:i32\"], grid = [\"rows\"], block = [\"tpb\"] },", "launches = [\n  { entry = \"row_mean\", params = [\"mean\", \"x\", \"rows:i32\", \"cols:i32\"], grid = [\"rows\"], block = [\"32\"] },")
            .replace("sizes.tpb = { values = [32], launch = true }\n", "");
    let checked = parse(&checked).unwrap();
    let b = HostBackend::new()
        .with_general_kernel("row_mean", row_mean)
        .with_general_kernel("centre", centre);
    let e = klab_engine::gpuref::KernelReference::new(b, &decl, "ref.toml:centre", &checked.op)
        .err()
        .unwrap();
    assert_eq!(
            e,
            "the reference kernel ref.toml:centre launches row_mean with size 'tpb', which the kernel it checks does not declare"
        );
}

#[test]
fn the_ladder_follows_every_launch_of_a_sequence() {
    let decl = parse(CENTRE).unwrap();
    // Only the second launch's grid grows with cols: after 64 of them at one row (after 21
    // at the three rows the ladder holds rows at; the larger is the chunk).
    assert_eq!(klab_engine::declared::chunk(&decl.op, "cols"), 64);
}
