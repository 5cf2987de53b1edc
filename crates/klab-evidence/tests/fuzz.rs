//! Property tests over the parsers of klab-core, klab-spec and klab-evidence: manifests, expressions, receipts, sample CSVs
//! and `.npy` files each meet arbitrary input and mutations of the real files they are
//! written for (the examples' manifests, the transpose timing receipts and samples). Every
//! case must end in `Ok` or the parser's typed error, without a panic, within
//! [`support::BOUND`]; where a parser accepts, what it returns must keep the invariants
//! its documentation states. Case counts: `KLAB_FUZZ_CASES` (see `support/mutate.rs`).

#[path = "support/mutate.rs"]
mod support;

use klab_core::expr::{Expr, Problem};
use klab_core::npy;
use klab_core::samples::{parse_samples_csv, SAMPLES_CSV_HEADER};
use klab_evidence::receipt::Receipt;
use klab_spec::manifest::{self, Files};
use proptest::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use support::{apply, apply_text, config, edits, timed};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

// ---------------------------------------------------------------------------------------
// Manifests

const EXAMPLES: [&str; 5] = ["argmax", "gelu", "gemm", "layernorm", "sort"];

/// The example's manifest text, and a loader giving the files beside it from memory (a
/// mutated name that is not one of them is refused, as a missing file would be).
fn example(name: &str) -> (String, BTreeMap<String, Vec<u8>>) {
    let dir = repo().join("examples/ops").join(name);
    let text = std::fs::read_to_string(dir.join(format!("{name}.toml"))).unwrap();
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let file = p.file_name().unwrap().to_string_lossy().into_owned();
        files.insert(file, std::fs::read(&p).unwrap());
    }
    (text, files)
}

fn parse_manifest(text: &str, files: &BTreeMap<String, Vec<u8>>) -> Result<(), TestCaseError> {
    let loader = |name: &str| {
        files
            .get(name)
            .map(|b| (name.to_string(), b.clone()))
            .ok_or_else(|| format!("no file {name}"))
    };
    let got = timed("manifest::parse", || {
        manifest::parse("fuzz.toml", text, Files::Given(&loader))
    })?;
    match got {
        Ok(m) => prop_assert!(
            !m.kernels.is_empty(),
            "a manifest with no kernel was accepted"
        ),
        Err(e) => {
            prop_assert_eq!(&e.origin, "fuzz.toml");
            prop_assert!(!e.to_string().is_empty());
        }
    }
    Ok(())
}

#[test]
fn every_example_manifest_parses_unmutated() {
    // The mutations below start from accepted inputs; were these refused, they would only
    // test the first refusal.
    for name in EXAMPLES {
        let (text, files) = example(name);
        let loader = |n: &str| {
            files
                .get(n)
                .map(|b| (n.to_string(), b.clone()))
                .ok_or_else(|| format!("no file {n}"))
        };
        manifest::parse(name, &text, Files::Given(&loader)).unwrap_or_else(|e| panic!("{e}"));
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn manifest_mutations_parse_or_refuse(
        which in 0..EXAMPLES.len(),
        edits in edits(6),
    ) {
        let (text, files) = example(EXAMPLES[which]);
        parse_manifest(&apply_text(&text, &edits), &files)?;
    }

    #[test]
    fn manifest_arbitrary_text_parses_or_refuses(text in "(?s).{0,400}") {
        let (_, files) = example("gelu");
        parse_manifest(&text, &files)?;
    }

    /// Values that are expressions in the manifest: every one a random expression.
    #[test]
    fn manifest_expression_fields_parse_or_refuse(
        grid in "[-+*/%()n0-9 a-z_,]{0,24}",
        len in "[-+*/%()n0-9 a-z_,]{0,24}",
        bench in proptest::sample::select(vec![
            "0", "1", "-1", "9223372036854775807", "18446744073709551615", "1e400", "\"n\"",
        ]),
    ) {
        let (text, files) = example("gelu");
        let text = text
            .replace("\"ceil_div(n, 512)\"", &format!("{grid:?}"))
            .replace("len = \"n\", role = \"in\"", &format!("len = {len:?}, role = \"in\""))
            .replace("67108864", bench);
        parse_manifest(&text, &files)?;
    }
}

// ---------------------------------------------------------------------------------------
// Expressions

fn vars() -> impl Strategy<Value = BTreeMap<String, i64>> {
    let value = prop_oneof![
        Just(0i64),
        Just(1),
        Just(-1),
        Just(i64::MAX),
        Just(i64::MIN),
        any::<i64>(),
        -1000i64..1000,
    ];
    proptest::collection::btree_map(
        proptest::sample::select(vec!["n".to_string(), "m".into(), "k".into()]),
        value,
        0..=3,
    )
}

fn check_expr(text: &str, vars: &BTreeMap<String, i64>) -> Result<(), TestCaseError> {
    let parsed = timed("Expr::parse", || Expr::parse(text))?;
    let Ok(e) = parsed else { return Ok(()) };
    prop_assert_eq!(e.source(), text);
    match timed("Expr::eval", || e.eval(vars))? {
        // Documented: a value outside i64 is an Overflow error, never a result.
        Ok(v) => prop_assert!(i64::try_from(v).is_ok(), "{} = {} outside i64", text, v),
        Err(err) => {
            prop_assert_eq!(&err.expression, text);
            if let Problem::UnknownVariable(name) = &err.problem {
                prop_assert!(!vars.contains_key(name), "{} is given", name);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn expressions_from_the_grammar_parse_and_evaluate_or_refuse(
        text in "([-+*/% ()n,mk0-9]|ceil_div\\(|min\\(|max\\(|9223372036854775807|0x|\u{e9}){0,30}",
        vars in vars(),
    ) {
        check_expr(&text, &vars)?;
    }

    #[test]
    fn arbitrary_text_parses_or_refuses(text in "(?s).{0,60}", vars in vars()) {
        check_expr(&text, &vars)?;
    }

    /// A division or modulo by a divisor that evaluates to 0 is that error, never a value.
    #[test]
    fn division_by_a_zero_variable_is_an_error(x in any::<i64>(), op in "[/%]") {
        let e = Expr::parse(&format!("{x} {op} (n - n)")).unwrap();
        let vars = BTreeMap::from([("n".to_string(), x)]);
        let err = e.eval(&vars).unwrap_err();
        prop_assert!(
            matches!(err.problem, Problem::DivisionByZero(_) | Problem::ModuloByZero(_)),
            "{:?}", err.problem
        );
    }
}

#[test]
fn deeply_nested_expression_is_refused_not_a_stack_overflow() {
    for open in ["(", "-", "min(", "ceil_div("] {
        let text = format!("{}1", open.repeat(100_000));
        assert!(Expr::parse(&text).is_err(), "{open}");
    }
}

// ---------------------------------------------------------------------------------------
// Receipts

const RECEIPTS: [&str; 3] = [
    "evidence/2026-11-30-timing/transpose-rotated/tiled.receipt.json",
    "evidence/2026-11-30-timing/transpose-rotated/padded.receipt.json",
    "evidence/2026-11-30-timing/transpose-rotated/blocks/r01-p0-tiled/receipt.json",
];

/// Parse and validate; an accepted receipt must survive its own round trip.
fn check_receipt(text: &str) -> Result<(), TestCaseError> {
    let path = Path::new("fuzz.receipt.json");
    let got = timed("Receipt::from_json + validate", || {
        Receipt::from_json(text, path).and_then(|r| r.validate().map(|()| r))
    })?;
    if let Ok(r) = got {
        let again = Receipt::from_json(&r.to_json(), path);
        prop_assert!(
            again.is_ok(),
            "a valid receipt does not re-read: {:?}",
            again.err()
        );
        let again = again.unwrap();
        prop_assert!(
            again.validate().is_ok(),
            "a valid receipt's JSON does not validate"
        );
        prop_assert_eq!(again.to_json(), r.to_json());
    }
    Ok(())
}

#[test]
fn the_real_receipts_validate_unmutated() {
    for rel in RECEIPTS {
        let r = Receipt::from_json(&read(rel), Path::new(rel)).unwrap();
        r.validate().unwrap_or_else(|e| panic!("{rel}: {e}"));
    }
}

/// Every leaf of a JSON document, as a JSON pointer.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, v)| {
            leaves(
                v,
                format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                out,
            )
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| leaves(v, format!("{at}/{i}"), out)),
        _ => out.push(at),
    }
}

fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(serde_json::json!(-1)),
        Just(serde_json::json!(0)),
        Just(serde_json::json!(0.0)),
        Just(serde_json::json!(1e308)),
        Just(serde_json::json!(-1e308)),
        Just(serde_json::json!(u64::MAX)),
        Just(serde_json::json!(i64::MIN)),
        Just(serde_json::json!(5e-324)),
        Just(serde_json::json!("")),
        Just(serde_json::json!("../../../etc/passwd")),
        Just(serde_json::json!("/etc/passwd")),
        Just(serde_json::json!("a\nb")),
        Just(serde_json::json!("\u{0}")),
        Just(serde_json::json!("x".repeat(10_000))),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
        Just(serde_json::json!(true)),
        any::<i64>().prop_map(|v| serde_json::json!(v)),
        any::<f64>()
            .prop_filter("JSON holds finite numbers", |v| v.is_finite())
            .prop_map(|v| serde_json::json!(v)),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn receipt_byte_and_line_mutations_parse_or_refuse(
        which in 0..RECEIPTS.len(),
        edits in edits(4),
    ) {
        check_receipt(&apply_text(&read(RECEIPTS[which]), &edits))?;
    }

    /// Well-formed JSON with one to three fields replaced by a hostile value: what serde
    /// lets through, `validate` must refuse or keep.
    #[test]
    fn receipt_field_mutations_validate_or_refuse(
        which in 0..RECEIPTS.len(),
        picks in proptest::collection::vec((any::<usize>(), hostile_value()), 1..=3),
        remove in any::<bool>(),
    ) {
        let mut doc: Value = serde_json::from_str(&read(RECEIPTS[which])).unwrap();
        for (pick, value) in picks {
            let mut all = Vec::new();
            leaves(&doc, String::new(), &mut all);
            let at = &all[pick % all.len()];
            if remove {
                let (parent, key) = at.rsplit_once('/').unwrap();
                if let Some(Value::Object(m)) = doc.pointer_mut(parent) {
                    m.remove(&key.replace("~1", "/").replace("~0", "~"));
                    continue;
                }
            }
            *doc.pointer_mut(at).unwrap() = value;
        }
        check_receipt(&serde_json::to_string_pretty(&doc).unwrap())?;
    }

    #[test]
    fn receipt_check_figures_takes_any_samples(
        samples in proptest::collection::vec(
            proptest::collection::vec(
                prop_oneof![any::<f64>(), Just(f64::NAN), Just(f64::INFINITY), 0.0f64..1e3],
                0..20,
            ),
            0..4,
        ),
    ) {
        let r = Receipt::from_json(&read(RECEIPTS[0]), Path::new("r")).unwrap();
        let got = timed("check_figures", || r.check_figures(&samples))?;
        // No finite sample: nothing to recompute from, which must be said.
        if samples.iter().flatten().all(|v| !v.is_finite()) {
            prop_assert!(got.is_err());
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sample CSVs

const SAMPLES: &str =
    "evidence/2026-11-30-timing/transpose-rotated/blocks/r01-p0-tiled/samples-r01-p0.csv";

fn check_samples(bytes: &[u8], slots: u64) -> Result<(), TestCaseError> {
    if let Ok(samples) = timed("parse_samples_csv", || parse_samples_csv(bytes, slots))? {
        prop_assert!(samples.len() >= 2);
        for (i, s) in samples.iter().enumerate() {
            prop_assert_eq!(s.sample, i as u64);
            prop_assert_eq!(s.slot, i as u64 % slots.max(1));
            prop_assert!(s.elapsed_us.is_finite() && s.elapsed_us > 0.0, "{:?}", s);
        }
    }
    Ok(())
}

#[test]
fn the_real_samples_parse_unmutated() {
    let rows = parse_samples_csv(read(SAMPLES).as_bytes(), 1).or_else(|_| {
        // A rotated run's slots count is in its receipt; any count the file follows will do.
        (2..=64)
            .find_map(|s| parse_samples_csv(read(SAMPLES).as_bytes(), s).ok())
            .ok_or(())
    });
    assert!(rows.unwrap().len() >= 2);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn sample_csv_mutations_parse_or_refuse(
        edits in edits(5),
        slots in prop_oneof![Just(0u64), Just(1), 1u64..64, Just(u64::MAX)],
    ) {
        check_samples(&apply(read(SAMPLES).as_bytes(), &edits), slots)?;
    }

    #[test]
    fn sample_csv_rows_of_arbitrary_fields(
        rows in proptest::collection::vec("[-0-9.eE+a-z,]{0,24}", 0..12),
        slots in 0u64..4,
    ) {
        let text = format!("{SAMPLES_CSV_HEADER}\n{}", rows.join("\n"));
        check_samples(text.as_bytes(), slots)?;
    }
}

// ---------------------------------------------------------------------------------------
// .npy files

fn check_npy(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(a) = timed("npy::read", || npy::read(bytes))? {
        let want = a.elements() as u128 * a.dtype.size_bytes() as u128;
        prop_assert_eq!(a.data.len() as u128, want, "shape {:?}", a.shape);
    }
    Ok(())
}

fn dtype() -> impl Strategy<Value = klab_core::dtype::Dtype> {
    use klab_core::dtype::Dtype;
    proptest::sample::select(vec![
        Dtype::F32,
        Dtype::F64,
        Dtype::U8,
        Dtype::I64,
        Dtype::F16,
    ])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn npy_mutations_of_valid_files_read_or_refuse(
        dtype in dtype(),
        shape in proptest::collection::vec(0u64..5, 0..4),
        edits in edits(4),
    ) {
        let n: u64 = shape.iter().product();
        let data = vec![0x5au8; (n as usize) * dtype.size_bytes()];
        let good = npy::to_bytes(dtype, &shape, &data).unwrap();
        check_npy(&good)?;
        check_npy(&apply(&good, &edits))?;
    }

    /// A header of arbitrary dictionary text behind a valid preamble.
    #[test]
    fn npy_arbitrary_headers_read_or_refuse(
        header in "[{}()\\[\\]':, 0-9a-z<>|_-]{0,120}",
        version in prop_oneof![Just(1u8), Just(2), Just(3), any::<u8>()],
        tail in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = b"\x93NUMPY".to_vec();
        bytes.extend([version, 0]);
        let len = header.len();
        if version == 1 {
            bytes.extend((len as u16).to_le_bytes());
        } else {
            bytes.extend((len as u32).to_le_bytes());
        }
        bytes.extend(header.bytes());
        bytes.extend(tail);
        check_npy(&bytes)?;
    }

    #[test]
    fn npy_arbitrary_bytes_read_or_refuse(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        check_npy(&bytes)?;
    }
}
