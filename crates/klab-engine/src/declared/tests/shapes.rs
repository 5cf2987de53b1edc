//! The shapes a check walks: `--shape`, the size ladder and each variable's chunk, and the
//! index-overflow shape with the case that runs it.

use super::*;

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
