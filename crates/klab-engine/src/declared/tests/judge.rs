//! The comparison rules: each verdict names its rule; tolerance, scaled-sum, reference-error,
//! bitwise with special values, and a failure found at the element a kernel skipped.

use super::*;

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
