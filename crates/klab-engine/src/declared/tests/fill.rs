//! Each input case's bytes: random streams, integer and float domains, index buffers and row
//! offsets kept inside them, and user data outside one refused.

use super::*;
use crate::declared::fill::{fill, generator, outside_domain};

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
