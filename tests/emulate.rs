//! The built-in transposes of kernels/fast.cu, run on the CPU: tests/emulate/fast_emu.cpp
//! compiles the CUDA source as C++ (one std::thread per CUDA thread, a barrier for
//! `__syncthreads`, exact-size buffers under AddressSanitizer) and checks every kernel against
//! the oracle at ragged and aligned sizes. This is how kernel logic is tested without a GPU;
//! the GPU tests and `klab check` run the same kernels for real.
//!
//! Needs a C++20 compiler (`KLAB_CXX`, default `g++`). Without one the tests say they skipped,
//! unless `KLAB_REQUIRE_CXX=1` (set by scripts/test when g++ is present), which fails them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cxx() -> Option<String> {
    let cxx = std::env::var("KLAB_CXX").unwrap_or_else(|_| "g++".into());
    let found = Command::new(&cxx)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if found {
        return Some(cxx);
    }
    if std::env::var("KLAB_REQUIRE_CXX").as_deref() == Ok("1") {
        panic!("KLAB_REQUIRE_CXX=1 but the C++ compiler '{cxx}' is missing");
    }
    eprintln!("SKIPPED: no C++ compiler '{cxx}' (set KLAB_CXX), the kernel emulation did not run");
    None
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Build the emulator over the `fast.cu` in `kernels` into `dir`.
fn build(cxx: &str, kernels: &Path, dir: &Path) -> PathBuf {
    let exe = dir.join("fast_emu");
    let o = Command::new(cxx)
        .args(["-std=c++20", "-O1", "-g", "-fsanitize=address,undefined"])
        .args(["-fno-sanitize-recover=undefined", "-Wno-unknown-pragmas"])
        .arg("-I")
        .arg(kernels)
        .arg("-o")
        .arg(&exe)
        .arg(root().join("tests/emulate/fast_emu.cpp"))
        .arg("-lpthread")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "building the emulator failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

fn run(exe: &Path, sizes: &[u32]) -> (bool, String) {
    run_only(exe, "", sizes)
}

/// Run the kernels whose names start with `prefix` (comma-separated prefixes; "" for all) at
/// each size.
fn run_only(exe: &Path, prefix: &str, sizes: &[u32]) -> (bool, String) {
    run_only_with(exe, &[], prefix, sizes)
}

/// `run_only` with extra emulator arguments first (e.g. `--owners=8`).
fn run_only_with(exe: &Path, extra: &[String], prefix: &str, sizes: &[u32]) -> (bool, String) {
    let o = Command::new(exe)
        .args(extra)
        .arg(format!("--only={prefix}"))
        .args(sizes.iter().map(|n| n.to_string()))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn every_fast_kernel_matches_the_oracle_on_the_cpu() {
    let Some(cxx) = cxx() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let exe = build(&cxx, &root().join("kernels"), tmp.path());
    // 1..7: smaller than a vector or a tile; 33, 65, 67, 131: every N % 4 and several tiles;
    // 64, 66, 128: aligned and 8-byte-aligned rows.
    let sizes = [1, 2, 3, 4, 5, 6, 7, 33, 64, 65, 66, 67, 128, 131];
    let (ok, text) = run(&exe, &sizes);
    assert!(ok, "{text}");
    assert!(text.contains("0 failing runs"), "{text}");
    for k in [
        "vec4_t4",
        "reg4_64",
        "reg2_64",
        "own4_64",
        "own4_128x64",
        "reg4_64x128",
        "reg4_64_cs",
        "strip64_k2",
        "strip128x32_k8",
    ] {
        assert!(
            text.contains(&format!("{k} n=131: 0 mismatches")),
            "{k} did not run:\n{text}"
        );
    }
}

/// The strips at sizes with several strips per row of blocks (a strip is up to 512 columns
/// wide), so that every strip but the first loads the head it shares with its left neighbour.
#[test]
fn the_strips_match_the_oracle_across_several_strips() {
    let Some(cxx) = cxx() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let exe = build(&cxx, &root().join("kernels"), tmp.path());
    let (ok, text) = run_only(&exe, "strip", &[259, 517, 519, 520]);
    assert!(ok, "{text}");
    for k in ["strip64_k2", "strip64_k4", "strip64_k8", "strip128x32_k8"] {
        for n in [259, 517, 519, 520] {
            assert!(
                text.contains(&format!("{k} n={n}: 0 mismatches")),
                "{k} n={n} did not run:\n{text}"
            );
        }
    }
}

/// The lean kernels at sizes where most tiles take the unchecked path (every loaded row and
/// column inside the matrix), at each N mod 8 that is not 0 mod 4, and one aligned size.
#[test]
fn the_lean_kernels_match_the_oracle_with_inside_tiles() {
    let Some(cxx) = cxx() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let exe = build(&cxx, &root().join("kernels"), tmp.path());
    let sizes = [259, 261, 262, 263, 265, 266, 268];
    let (ok, text) = run_only(&exe, "lean", &sizes);
    assert!(ok, "{text}");
    for k in [
        "lean_64",
        "lean_64_r2",
        "lean_64_cm",
        "leana_64",
        "leana_128x64",
        "leana_64x128",
        "leanu_64_cm",
        "leanu_128x64_cm",
        "leanu_128x64_cm_t512",
    ] {
        for n in sizes {
            assert!(
                text.contains(&format!("{k} n={n}: 0 mismatches")),
                "{k} n={n} did not run:\n{text}"
            );
        }
    }
}

/// (shared requests, extra wavefronts) the emulator printed for `kernel` at `n` in `--banks`
/// mode.
fn bank_counts(text: &str, kernel: &str, n: u32) -> (usize, usize) {
    let prefix = format!("{kernel} n={n}: ");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix) && l.contains("shared requests"))
        .unwrap_or_else(|| panic!("no bank line for {kernel} n={n}:\n{text}"));
    let numbers: Vec<usize> = line[prefix.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

/// Shared-memory bank conflicts of the lean path, counted from the kernels' own addresses
/// (`fast_emu --banks`): none at an odd size, at N = 2 mod 4 and (for the path every N takes)
/// at an aligned size. A layout without the slot rotation, which the oracle cannot tell apart
/// (every output still matches), conflicts on most requests.
#[test]
fn the_lean_shared_layout_is_conflict_free() {
    let Some(cxx) = cxx() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let exe = build(&cxx, &root().join("kernels"), tmp.path());
    let banks = vec!["--banks".to_string()];
    let (ok, text) = run_only_with(&exe, &banks, "lean_64_cm,leanu_64_cm", &[261, 262, 264]);
    assert!(ok, "{text}");
    for (k, n) in [
        ("lean_64_cm", 261),
        ("lean_64_cm", 262),
        ("leanu_64_cm", 261),
        ("leanu_64_cm", 262),
        ("leanu_64_cm", 264),
    ] {
        let (requests, extra) = bank_counts(&text, k, n);
        assert!(requests > 0, "{k} n={n}: no request counted:\n{text}");
        assert_eq!(extra, 0, "{k} n={n}:\n{text}");
    }

    let source = std::fs::read_to_string(root().join("kernels/fast.cu")).unwrap();
    let from = "if (q < MV) return i * S + W * ((q + (i >> 2)) & (MV - 1));";
    assert_eq!(source.matches(from).count(), 1, "mutation site '{from}'");
    let mutant = tempfile::tempdir().unwrap();
    std::fs::write(
        mutant.path().join("fast.cu"),
        source.replace(from, "if (q < MV) return i * S + W * q;"),
    )
    .unwrap();
    let exe = build(&cxx, mutant.path(), mutant.path());
    let (ok, text) = run_only_with(&exe, &banks, "lean_64_cm", &[261]);
    assert!(ok, "the unrotated layout is still correct:\n{text}");
    let (requests, extra) = bank_counts(&text, "lean_64_cm", 261);
    assert!(
        extra > requests,
        "{requests} requests, {extra} extra:\n{text}"
    );
}

/// The number the emulator printed for `kernel` at `n` in `--owners` mode.
fn shared_units(text: &str, kernel: &str, n: u32) -> usize {
    let prefix = format!("{kernel} n={n}: ");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for {kernel} n={n}:\n{text}"));
    line[prefix.len()..]
        .split(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unreadable line '{line}'"))
}

/// Output ownership, the mechanism behind own8_64_o5's gain (notes/transpose-fast.md, #20):
/// at ragged sizes its blocks write whole 32-byte sectors, none shared between two blocks
/// (sectors spanning two output rows aside), while own4_64 owns whole 16-byte vectors but
/// shares sectors, and reg4_64 shares both. At an aligned size nothing is shared.
#[test]
fn ownership_kernels_never_split_their_unit_between_blocks() {
    let Some(cxx) = cxx() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let exe = build(&cxx, &root().join("kernels"), tmp.path());
    let owners = |unit: u32, prefix: &str, sizes: &[u32]| {
        let (ok, text) = run_only_with(&exe, &[format!("--owners={unit}")], prefix, sizes);
        assert!(ok, "{text}");
        text
    };
    let kernels = "own8,strip8,lean,own4_64,reg4_64";
    let sectors = owners(8, kernels, &[131, 133]);
    for n in [131, 133] {
        for k in [
            "own8_64_o5",
            "own8_128x64",
            "strip8_64_k2",
            "lean_64",
            "lean_64_r2",
            "lean_64_cm",
            "leana_64",
            "leana_128x64",
            "leana_64x128",
            "leanu_64_cm",
            "leanu_128x64_cm",
            "leanu_128x64_cm_t512",
        ] {
            assert_eq!(shared_units(&sectors, k, n), 0, "{k} n={n}:\n{sectors}");
        }
        for k in ["own4_64", "reg4_64"] {
            assert!(shared_units(&sectors, k, n) > 0, "{k} n={n}:\n{sectors}");
        }
    }
    let vectors = owners(4, "own4_64,reg4_64", &[131, 133]);
    for n in [131, 133] {
        assert_eq!(shared_units(&vectors, "own4_64", n), 0, "{vectors}");
        assert!(shared_units(&vectors, "reg4_64", n) > 0, "{vectors}");
    }
    let aligned = owners(8, "reg4_64,leanu", &[128, 132]);
    for k in ["reg4_64", "leanu_64_cm", "leanu_128x64_cm"] {
        assert_eq!(shared_units(&aligned, k, 128), 0, "{aligned}");
    }
    // N = 4 mod 8: rows start 16-byte but not 32-byte aligned; the lean path still owns sectors.
    for k in ["leanu_64_cm", "leanu_128x64_cm"] {
        assert_eq!(shared_units(&aligned, k, 132), 0, "{aligned}");
    }
}

/// The emulation catches real kernel bugs: a wrong swizzle on the aligned path, a vector
/// store one element past the end of the ragged path's output rows, and in the strips a
/// missing head load and a dropped carry (columns a vector brings past its tile), and in the
/// lean kernels a missing reordering of a vector's elements and an extra-column layout that
/// maps two rows to one slot.
#[test]
fn the_emulation_catches_a_wrong_swizzle_and_a_store_past_the_row() {
    let Some(cxx) = cxx() else { return };
    let source = std::fs::read_to_string(root().join("kernels/fast.cu")).unwrap();
    for (from, to, n, needle) in [
        (
            "const V y = s[j * QR + (q ^ ((j / W) % SW))];",
            "const V y = s[j * QR + q];",
            64,
            "reg4_64 n=64: first mismatch",
        ),
        (
            "if (ilo + W <= ilim) {",
            "if (ilo + W <= ilim + 1) {",
            67,
            "own4_64 n=67: first mismatch",
        ),
        (
            "if (j + W > 0) {",
            "if (j + W > 0 && false) {",
            67,
            "strip64_k2 n=67: first mismatch",
        ),
        (
            "if (c < jend) tile[rl * STR + (c & (CB - 1))] = r.v[u];",
            "if (c < jend && c < (k + 1) * TC) tile[rl * STR + (c & (CB - 1))] = r.v[u];",
            131,
            "strip64_k2 n=131: first mismatch",
        ),
        (
            "const V y = rotate_vec<W>(g, (W - k) & 3);",
            "const V y = rotate_vec<W>(g, 0);",
            261,
            "lean_64 n=261: first mismatch",
        ),
        (
            "return XS + W * ((i & ~7) | (((i >> 2) + 2 * (i & 3)) & 7));",
            "return XS + W * ((i & ~7) | ((i >> 2) & 7));",
            261,
            "lean_64_r2 n=261: first mismatch",
        ),
    ] {
        assert_eq!(source.matches(from).count(), 1, "mutation site '{from}'");
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("fast.cu"), source.replace(from, to)).unwrap();
        let exe = build(&cxx, tmp.path(), tmp.path());
        // Only the kernel the needle names (and those its name prefixes).
        let kernel = needle.split(' ').next().unwrap();
        let (ok, text) = run_only(&exe, kernel, &[n]);
        assert!(!ok, "the mutant '{to}' passed:\n{text}");
        assert!(text.contains(needle), "'{needle}' not in:\n{text}");
    }
}

// ---------------------------------------------------------------------------------------
// kernels/verify.cu: the device checker and the input generator, emulated.
// ---------------------------------------------------------------------------------------

use klab_core::dtype::Dtype;
use klab_core::inputs::{Generator, Pattern};
use klab_core::rule::{self, Comparison, NanRule, Rule};
use klab_core::verify::{self, CheckerMutant, DeviceCheck, DeviceSummary, ExpectMap};

/// Build the checker's emulator (a wrong checker for `mutant`) into `dir`.
fn build_verify(cxx: &str, dir: &Path, mutant: Option<CheckerMutant>) -> PathBuf {
    let exe = dir.join(format!(
        "verify_emu{}",
        mutant.map(|m| m.define()).unwrap_or(0)
    ));
    let o = Command::new(cxx)
        .args(["-std=c++20", "-O2", "-g", "-fsanitize=address,undefined"])
        .args(["-fno-sanitize-recover=undefined", "-ffp-contract=off"])
        .arg(format!(
            "-DKLAB_VERIFY_MUTANT={}",
            mutant.map(|m| m.define()).unwrap_or(0)
        ))
        .arg("-I")
        .arg(root().join("kernels"))
        .arg("-I")
        .arg(root().join("tests/emulate"))
        .arg("-o")
        .arg(&exe)
        .arg(root().join("tests/emulate/verify_emu.cpp"))
        .arg("-lpthread")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "building the checker's emulator failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

/// One output to judge: the kernel's bytes, the expected buffer (mapped by `map`), and the
/// magnitudes for scaled-sum.
struct Case {
    dtype: Dtype,
    cmp: Comparison,
    got: Vec<u8>,
    source: Vec<u8>,
    map: ExpectMap,
    magnitude: Option<Vec<f64>>,
    shape: Vec<u64>,
}

impl Case {
    fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The CPU oracle's verdict on the same output.
    fn cpu(&self) -> rule::Verdict {
        let size = self.dtype.size_bytes();
        let mut want = vec![0u8; self.got.len()];
        for i in 0..self.elements() {
            let from = self.map.source_index(i) as usize;
            let i = i as usize;
            want[i * size..(i + 1) * size]
                .copy_from_slice(&self.source[from * size..(from + 1) * size]);
        }
        rule::compare(
            self.dtype,
            &self.cmp,
            &self.got,
            &want,
            self.magnitude.as_deref(),
            &self.shape,
        )
        .unwrap()
    }
}

/// The emulated device checker's verdicts on `cases` (one emulator process for all of
/// them), each launched as the CUDA backend launches it: on at most 3 blocks, so that the
/// compaction crosses blocks at every size past two tiles.
fn device_verdicts(exe: &Path, dir: &Path, cases: &[Case]) -> Vec<rule::Verdict> {
    let mut jobs = String::new();
    for (k, c) in cases.iter().enumerate() {
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(format!("{k}-{name}"));
            std::fs::write(&p, bytes).unwrap();
            p.display().to_string()
        };
        let got = write("got.bin", &c.got);
        let want = write("want.bin", &c.source);
        let mag = match &c.magnitude {
            Some(m) => write(
                "mag.bin",
                &m.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
            ),
            None => "-".into(),
        };
        let (blocks, chunk) = verify::grid(c.elements(), 3);
        let check = DeviceCheck::<()> {
            got: &(),
            want: &(),
            map: c.map,
            magnitude: None,
            dtype: c.dtype,
            comparison: c.cmp,
            elements: c.elements(),
        };
        let words: Vec<String> = check.words(chunk).iter().map(|w| w.to_string()).collect();
        jobs += &format!("{got} {want} {mag} {blocks} {}\n", words.join(" "));
    }
    let job_file = dir.join("jobs.txt");
    std::fs::write(&job_file, jobs).unwrap();
    let o = Command::new(exe)
        .arg("batch")
        .arg(&job_file)
        .output()
        .unwrap();
    for k in 0..cases.len() {
        for name in ["got.bin", "want.bin", "mag.bin"] {
            let _ = std::fs::remove_file(dir.join(format!("{k}-{name}")));
        }
    }
    assert!(
        o.status.success(),
        "verify_emu batch failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), cases.len(), "{text}");
    lines
        .iter()
        .zip(cases)
        .map(|(l, c)| {
            let words: Vec<u64> = l.split(' ').map(|w| w.parse().unwrap()).collect();
            DeviceSummary::from_words(&words).verdict(c.dtype, &c.cmp, &c.shape)
        })
        .collect()
}

/// Bits of `v` as `dt`, little-endian, one element.
fn put(dt: Dtype, out: &mut [u8], i: usize, bits: u64) {
    dt.write_bits(out, i, bits);
}

/// `want` as the reference gives it, and `got`: the same with mismatches planted at the first
/// and the last element, NaN payloads on both sides, a -0.0 where +0.0 is expected (and the
/// reverse), near misses for the tolerance rules, and an infinity.
fn planted(dt: Dtype, n: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let size = dt.size_bytes();
    let mut want = vec![0u8; n * size];
    Generator {
        dtype: dt,
        elements: n as u64,
        k: 0,
        pattern: Pattern::Uniform {
            key: seed,
            lo: -3.0,
            hi: 3.0,
            scale: if dt.is_float() { 1.0 } else { 50.0 },
        },
    }
    .fill(&mut want);
    let mut got = want.clone();
    if n == 0 {
        return (got, want);
    }
    let flip = |b: u64| b ^ 1;
    put(dt, &mut got, 0, flip(dt.bits(&want, 0)));
    put(dt, &mut got, n - 1, dt.bits(&want, n - 1).wrapping_add(3));
    if dt.is_float() && n > 8 {
        let w = dt.bit_width();
        let sign = 1u64 << (w - 1);
        let inf = dt.bits_of_f64(f64::INFINITY);
        // NaN payloads: the same NaN, another payload, a NaN where a number is expected.
        for (i, g, wv) in [
            (1, inf | 1, inf | 1),
            (2, inf | 3, inf | 1),
            (3, inf | 2, dt.bits(&want, 3)),
            (4, 0, sign),
            (5, sign, 0),
            (6, inf, inf),
            (7, sign | inf, inf),
        ] {
            put(dt, &mut got, i, g);
            put(dt, &mut want, i, wv);
        }
    }
    // Near misses in the middle: one step each way.
    for i in (n / 3..n).step_by((n / 5).max(1)) {
        let b = dt.bits(&want, i);
        put(dt, &mut got, i, b.wrapping_add(1 + (i as u64 % 2)));
    }
    (got, want)
}

fn comparisons(dt: Dtype) -> Vec<Comparison> {
    let mut c = vec![Comparison::new(Rule::Bitwise)];
    if dt.is_float() {
        c.push(Comparison::new(Rule::Bitwise).with_nan(NanRule::NanAnyPayload));
        c.push(Comparison::new(Rule::Ulp { max: 1 }));
        c.push(Comparison::new(Rule::Ulp { max: 2 }).with_nan(NanRule::NanEqual));
        c.push(Comparison::new(Rule::AllClose {
            atol: 1e-3,
            rtol: 1e-2,
        }));
        c.push(
            Comparison::new(Rule::AllClose {
                atol: 0.0,
                rtol: 1e-6,
            })
            .with_nan(NanRule::NanAnyPayload),
        );
        c.push(Comparison::new(Rule::ScaledSum { k: 64.0 }));
    } else {
        c.push(Comparison::new(Rule::Exact));
        c.push(Comparison::new(Rule::AllClose {
            atol: 1.0,
            rtol: 0.01,
        }));
    }
    c
}

/// Every shape of the built-in operations' ladders (the transposes' up to N = 4097, the
/// triad's and the reduction's vectors), each with planted mismatches: the emulated device
/// checker's verdict equals the CPU oracle's in every field, the errors to the bit. The
/// transposes are judged through the transpose map against their input; the vector
/// ladders under every rule of every dtype.
#[test]
fn the_device_checker_agrees_with_the_cpu_oracle_on_every_ladder_size() {
    let Some(cxx) = cxx() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_verify(&cxx, tmp.path(), None);
    let ladder = |kernel: &str| -> Vec<u64> {
        let (_, decl) =
            klab_core::registry::resolve(kernel, klab_core::registry::Scope::Audit).unwrap();
        klab_core::general::ladder(&decl.op)
            .unwrap()
            .iter()
            .map(|s| s["n"] as u64)
            .collect()
    };
    let mut judged = 0;
    let mut judge = |cases: Vec<Case>, what: &dyn Fn(&Case) -> String| {
        let t = std::time::Instant::now();
        let dev = device_verdicts(&exe, tmp.path(), &cases);
        eprintln!(
            "{} cases judged on the emulated device in {:.1} s",
            cases.len(),
            t.elapsed().as_secs_f64()
        );
        for (c, d) in cases.iter().zip(dev) {
            let cpu = c.cpu();
            assert_eq!(d, cpu, "{}", what(c));
            assert!(verify::disagreement(&d, &cpu).is_none());
            judged += 1;
        }
    };
    // Transposes: f32 through the map, bitwise and any-NaN (cuBLAS's rule).
    let mut group = Vec::new();
    let transpose_ladder = ladder("naive");
    for (i, &n) in transpose_ladder.iter().enumerate() {
        let elements = (n * n) as usize;
        let (mut src, _) = planted(Dtype::F32, elements, n);
        let t = ExpectMap::Transpose { rows: n, cols: n };
        let mut got = vec![0u8; elements * 4];
        for i in 0..elements as u64 {
            let from = t.source_index(i) as usize;
            got[4 * i as usize..4 * i as usize + 4].copy_from_slice(&src[4 * from..4 * from + 4]);
        }
        // Plant in the output: first and last element, a signed zero. Past N = 1024 also
        // the next eight elements, so that the emulated compaction (a barrier per step of
        // its scan, each one costly in threads) stops early; below it, the few failures
        // are compacted across blocks.
        let last = elements - 1;
        got[0] ^= 1;
        got[4 * last + 3] ^= 0x80;
        if n > 1024 {
            for k in 1..9 {
                got[4 * k] ^= 2;
            }
        }
        if elements > 4 {
            src[4..8].copy_from_slice(&0x8000_0000u32.to_le_bytes()); // src[0][1] = -0.0
            let at = (0..elements as u64)
                .find(|i| t.source_index(*i) == 1)
                .unwrap() as usize;
            got[4 * at..4 * at + 4].copy_from_slice(&0u32.to_le_bytes());
        }
        for cmp in [
            Comparison::new(Rule::Bitwise),
            Comparison::new(Rule::Bitwise).with_nan(NanRule::NanAnyPayload),
        ] {
            let case = Case {
                dtype: Dtype::F32,
                cmp,
                got: got.clone(),
                source: src.clone(),
                map: t,
                magnitude: None,
                shape: vec![n, n],
            };
            assert!(
                case.cpu().failures >= 2.min(elements as u64),
                "n = {n}: the plants did not fail"
            );
            group.push(case);
        }
        if group.len() >= 16 || n > 2048 || i + 1 == transpose_ladder.len() {
            judge(std::mem::take(&mut group), &|c: &Case| {
                format!("transpose n = {}, {}", c.shape[0], c.cmp.describe())
            });
        }
    }
    // Vectors: every ladder size under a dtype and a rule that rotate with it, and every
    // dtype under every rule at the sizes that matter most (empty, one element, one past a
    // block, the reduction's odd and big sizes, the triad's million).
    let mut sizes = ladder("triad_f32");
    sizes.extend(ladder("reduce_guarded"));
    sizes.sort_unstable();
    sizes.dedup();
    let dtypes = [
        Dtype::F32,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F64,
        Dtype::I32,
        Dtype::U8,
        Dtype::I8,
        Dtype::U16,
        Dtype::I16,
        Dtype::U32,
        Dtype::I64,
        Dtype::U64,
    ];
    let full = [0u64, 1, 257, 611, 16_483];
    let mut cases = Vec::new();
    for (s, &n) in sizes.iter().enumerate() {
        for (d, &dt) in dtypes.iter().enumerate() {
            let all = comparisons(dt);
            let rules: Vec<Comparison> = if full.contains(&n) || (n > 100_000 && d < 4) {
                all
            } else if (s + d) % 12 == 0 {
                vec![all[(s / 12 + d) % all.len()]]
            } else {
                continue;
            };
            let (got, want) = planted(dt, n as usize, n ^ dt.size_bytes() as u64);
            for cmp in rules {
                let magnitude = matches!(cmp.rule, Rule::ScaledSum { .. }).then(|| {
                    (0..n as usize)
                        .map(|i| (dt.to_f64(&want, i).abs() + 1.0).min(1e30) * (i % 3) as f64)
                        .collect()
                });
                cases.push(Case {
                    dtype: dt,
                    cmp,
                    got: got.clone(),
                    source: want.clone(),
                    map: ExpectMap::Direct,
                    magnitude,
                    shape: vec![n],
                });
            }
        }
    }
    let covered: std::collections::BTreeSet<u64> = cases.iter().map(|c| c.shape[0]).collect();
    assert_eq!(covered.len(), sizes.len(), "every ladder size is judged");
    judge(cases, &|c: &Case| {
        format!(
            "{} n = {}, {}",
            c.dtype,
            c.shape[0],
            c.cmp.describe_for(c.dtype)
        )
    });
    eprintln!("{judged} outputs judged alike by the emulated device checker and the CPU oracle");
    assert!(judged > 200);
}

/// Each wrong checker the audit builds disagrees with the CPU oracle on an output with a
/// mismatch at the last element and a +0.0 where -0.0 is expected: the cross-check would
/// stop it.
#[test]
fn the_checker_mutants_disagree_with_the_cpu_oracle() {
    let Some(cxx) = cxx() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for m in CheckerMutant::ALL {
        let exe = build_verify(&cxx, tmp.path(), Some(m));
        let f = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let n = 1000usize;
        let mut want: Vec<u32> = (0..n as u32).map(|i| (i as f32).to_bits()).collect();
        let mut got = want.clone();
        want[10] = 0x8000_0000;
        got[10] = 0;
        got[n - 1] ^= 1;
        let case = Case {
            dtype: Dtype::F32,
            cmp: Comparison::new(Rule::Bitwise),
            got: f(&got),
            source: f(&want),
            map: ExpectMap::Direct,
            magnitude: None,
            shape: vec![n as u64],
        };
        let (cpu, dev) = (
            case.cpu(),
            device_verdicts(&exe, tmp.path(), std::slice::from_ref(&case)).remove(0),
        );
        assert_eq!(cpu.failures, 2);
        assert!(
            verify::disagreement(&dev, &cpu).is_some(),
            "{} agreed with the CPU oracle",
            m.name()
        );
    }
}

/// The device generator makes every input pattern bit for bit as the host does, for every
/// dtype, across chunk boundaries, and the transpose lab's distinct input with its patches
/// at N = 4097 (rotated, as a second input is).
#[test]
fn the_device_generator_makes_the_hosts_bytes() {
    let Some(cxx) = cxx() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_verify(&cxx, tmp.path(), None);
    let gen = |g: &Generator| -> Vec<u8> {
        let out = tmp.path().join("gen.bin");
        let patches = g.patches();
        let pairs = tmp.path().join("pairs.bin");
        let bytes: Vec<u8> = patches
            .iter()
            .flat_map(|&(i, b)| [i, b])
            .flat_map(|w| w.to_le_bytes())
            .collect();
        std::fs::write(&pairs, &bytes).unwrap();
        let o = Command::new(&exe)
            .arg("generate")
            .arg(&out)
            .arg(if patches.is_empty() {
                PathBuf::from("-")
            } else {
                pairs
            })
            .args(g.device_words().iter().map(|w| w.to_string()))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(&out).unwrap()
    };
    let dtypes = [
        Dtype::F32,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::F64,
        Dtype::I32,
        Dtype::U8,
        Dtype::I8,
        Dtype::U16,
        Dtype::I16,
        Dtype::U32,
        Dtype::I64,
        Dtype::U64,
    ];
    let mut made = 0;
    for dt in dtypes {
        for (lo, hi) in [(-1.0, 1.0), (-300.0, 1e6), (0.0, 200.0)] {
            let patterns = vec![
                Pattern::Structural,
                Pattern::Uniform {
                    key: 77,
                    lo,
                    hi,
                    scale: 1.0,
                },
                Pattern::Uniform {
                    key: 78,
                    lo,
                    hi,
                    scale: 1000.0,
                },
                Pattern::Constant { lo, hi },
                Pattern::Special(klab_core::inputs::special_bits(dt)),
                Pattern::Distinct {
                    cap: klab_core::inputs::distinct_cap(dt),
                },
            ];
            for pattern in patterns {
                for (elements, k) in [(1u64, 0u64), (1000, 1), ((1 << 20) + 3, 2)] {
                    let g = Generator {
                        dtype: dt,
                        elements,
                        k,
                        pattern: pattern.clone(),
                    };
                    let mut host = vec![0u8; elements as usize * dt.size_bytes()];
                    g.fill(&mut host);
                    assert!(gen(&g) == host, "{dt} {pattern:?} n = {elements} k = {k}");
                    made += 1;
                }
            }
        }
    }
    for (n, rotate) in [(4096u64, 0u64), (4097, 0), (4097, 7919)] {
        let g = Generator {
            dtype: Dtype::F32,
            elements: n * n,
            k: u64::from(rotate > 0),
            pattern: Pattern::DistinctF32 { rotate },
        };
        let mut host = vec![0u8; (n * n * 4) as usize];
        g.fill(&mut host);
        assert!(gen(&g) == host, "distinct f32 n = {n} rotate = {rotate}");
        made += 1;
    }
    eprintln!("{made} generated inputs identical on the emulated device and the host");
}
