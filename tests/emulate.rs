//! The built-in transposes of kernels/fast.cu, run on the CPU: tests/emulate/fast_emu.cpp
//! compiles the CUDA source as C++ (one fiber per CUDA thread that `__syncthreads` switches
//! away from, exact-size buffers under AddressSanitizer; tests/emulate/cuda_emu.h) and checks every kernel against
//! the oracle at ragged and aligned sizes. This is how kernel logic is tested without a GPU;
//! the GPU tests and `klab check` run the same kernels for real.
//!
//! Needs a C++20 compiler (`KLAB_CXX`, default `g++`). Without one the tests say they skipped,
//! unless `KLAB_REQUIRE_CXX=1` (set by scripts/test when g++ is present), which fails them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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

/// `cmd`'s output, with a line every 30 s while it runs (an emulation can take minutes).
fn output_of(cmd: &mut Command, what: &str) -> std::process::Output {
    let _beat = common::Heartbeat::start(&format!("emulate: {what}"));
    cmd.output().unwrap()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Build the emulator over the `fast.cu` in `kernels` into `dir`.
fn build(cxx: &str, kernels: &Path, dir: &Path) -> PathBuf {
    let exe = dir.join("fast_emu");
    let mut o = Command::new(cxx);
    o.args(["-std=c++20", "-O0", "-g", "-fsanitize=address,undefined"])
        .args(["-fno-sanitize-recover=undefined", "-Wno-unknown-pragmas"])
        .arg("-I")
        .arg(kernels)
        .arg("-o")
        .arg(&exe)
        .arg(root().join("tests/emulate/fast_emu.cpp"))
        .arg("-lpthread");
    let o = output_of(&mut o, "compiling the fast kernels' emulator");
    assert!(
        o.status.success(),
        "building the emulator failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

/// An emulator of the checkout's own kernels, built once per test process by `make` (into the
/// folder it is given) and shared by the tests; a mutant gets a build of its own. It lands in
/// target/tmp under a fixed name by a rename, so test processes never see half an executable.
fn shared_build(name: &str, make: impl FnOnce(&Path) -> PathBuf) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("emulate");
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = tempfile::tempdir_in(&dir).unwrap();
    let exe = dir.join(name);
    std::fs::rename(make(scratch.path()), &exe).unwrap();
    exe
}

/// The emulator of the checkout's kernels/fast.cu.
fn fast_emulator(cxx: &str) -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| shared_build("fast_emu", |dir| build(cxx, &root().join("kernels"), dir)))
}

/// The emulator of the checkout's kernels/verify.cu (the right checker).
fn verify_emulator(cxx: &str) -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| shared_build("verify_emu", |dir| build_verify(cxx, dir, None)))
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
    let o = output_of(
        Command::new(exe)
            .args(extra)
            .arg(format!("--only={prefix}"))
            .args(sizes.iter().map(|n| n.to_string())),
        &format!("kernels '{prefix}' at {sizes:?}"),
    );
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
    let exe = fast_emulator(&cxx);
    // 1..7: smaller than a vector or a tile; 33, 65, 67, 131: every N % 4 and several tiles;
    // 64, 66, 128: aligned and 8-byte-aligned rows.
    let sizes = [1, 2, 3, 4, 5, 6, 7, 33, 64, 65, 66, 67, 128, 131];
    let (ok, text) = run(exe, &sizes);
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
    let exe = fast_emulator(&cxx);
    let (ok, text) = run_only(exe, "strip", &[259, 517, 519, 520]);
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
    let exe = fast_emulator(&cxx);
    let sizes = [259, 261, 262, 263, 265, 266, 268];
    let (ok, text) = run_only(exe, "lean", &sizes);
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
    let exe = fast_emulator(&cxx);
    let banks = vec!["--banks".to_string()];
    let (ok, text) = run_only_with(exe, &banks, "lean_64_cm,leanu_64_cm", &[261, 262, 264]);
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
    let exe = fast_emulator(&cxx);
    let owners = |unit: u32, prefix: &str, sizes: &[u32]| {
        let (ok, text) = run_only_with(exe, &[format!("--owners={unit}")], prefix, sizes);
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
/// store one element past the end of the ragged path's output rows, a thread that leaves
/// before a barrier the others wait at (a hang on a GPU), and in the strips a missing head load
/// and a dropped carry (columns a vector brings past its tile), and in the lean kernels a
/// missing reordering of a vector's elements and an extra-column layout that maps two rows to
/// one slot.
#[test]
fn the_emulation_catches_a_wrong_swizzle_and_a_store_past_the_row() {
    let Some(cxx) = cxx() else { return };
    let source = std::fs::read_to_string(root().join("kernels/fast.cu")).unwrap();
    for (from, to, kernel, n, needle) in [
        (
            "const V y = s[j * QR + (q ^ ((j / W) % SW))];",
            "const V y = s[j * QR + q];",
            "reg4_64",
            64,
            "reg4_64 n=64: first mismatch",
        ),
        (
            "if (ilo + W <= ilim) {",
            "if (ilo + W <= ilim + 1) {",
            "own4_64",
            67,
            "own4_64 n=67: first mismatch",
        ),
        (
            "if (j + W > 0) {",
            "if (j + W > 0 && false) {",
            "strip64_k2",
            67,
            "strip64_k2 n=67: first mismatch",
        ),
        (
            "if (c < jend) tile[rl * STR + (c & (CB - 1))] = r.v[u];",
            "if (c < jend && c < (k + 1) * TC) tile[rl * STR + (c & (CB - 1))] = r.v[u];",
            "strip64_k2",
            131,
            "strip64_k2 n=131: first mismatch",
        ),
        (
            "const V y = rotate_vec<W>(g, (W - k) & 3);",
            "const V y = rotate_vec<W>(g, 0);",
            "lean_64",
            261,
            "lean_64 n=261: first mismatch",
        ),
        (
            "      s[(v * W + t) * QR + (q ^ (v % SW))] = y;\n    }\n  }\n  __syncthreads();",
            "      s[(v * W + t) * QR + (q ^ (v % SW))] = y;\n    }\n  }\n  if (tid == 0) return;\n  __syncthreads();",
            "reg4_64",
            64,
            "255 threads wait at __syncthreads while 1 exited",
        ),
        (
            "return XS + W * ((i & ~7) | (((i >> 2) + 2 * (i & 3)) & 7));",
            "return XS + W * ((i & ~7) | ((i >> 2) & 7));",
            "lean_64_r2",
            261,
            "lean_64_r2 n=261: first mismatch",
        ),
    ] {
        assert_eq!(source.matches(from).count(), 1, "mutation site '{from}'");
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("fast.cu"), source.replace(from, to)).unwrap();
        let exe = build(&cxx, tmp.path(), tmp.path());
        // Only that kernel (and those its name prefixes).
        let (ok, text) = run_only(&exe, kernel, &[n]);
        assert!(!ok, "the mutant '{to}' passed:\n{text}");
        assert!(text.contains(needle), "'{needle}' not in:\n{text}");
    }
}

// ---------------------------------------------------------------------------------------
// kernels/verify.cu: the device checker and the input generator, emulated.
// ---------------------------------------------------------------------------------------

use common::planted::{self, Case};
use klab_core::dtype::Dtype;
use klab_engine::inputs::Generator;
use klab_engine::verify::{self, CheckerMutant, DeviceCheck, DeviceSummary, ExpectMap};
use klab_spec::rule::{self, Comparison, Rule};

/// Build the checker's emulator (a wrong checker for `mutant`) into `dir`.
fn build_verify(cxx: &str, dir: &Path, mutant: Option<CheckerMutant>) -> PathBuf {
    let exe = dir.join(format!(
        "verify_emu{}",
        mutant.map(|m| m.define()).unwrap_or(0)
    ));
    let mut o = Command::new(cxx);
    o.args(["-std=c++20", "-O2", "-g", "-fsanitize=address,undefined"])
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
        .arg("-lpthread");
    let o = output_of(&mut o, "compiling the device checker's emulator");
    assert!(
        o.status.success(),
        "building the checker's emulator failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
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
        let (blocks, chunk) = verify::grid(c.elements(), c.map, 3);
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
    let o = output_of(
        Command::new(exe).arg("batch").arg(&job_file),
        &format!("the device checker on {} outputs", cases.len()),
    );
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
            DeviceSummary::from_words(&words).verdict(
                c.dtype,
                &c.cmp,
                &c.shape,
                c.magnitude.as_deref(),
            )
        })
        .collect()
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
    let exe = verify_emulator(&cxx);
    let mut judged = 0;
    planted::ladder_cases(|cases| {
        let t = std::time::Instant::now();
        let dev = device_verdicts(exe, tmp.path(), &cases);
        eprintln!(
            "{} cases judged on the emulated device in {:.1} s",
            cases.len(),
            t.elapsed().as_secs_f64()
        );
        for (c, d) in cases.iter().zip(dev) {
            let cpu = c.cpu();
            assert_eq!(d, cpu, "{}", c.describe());
            assert!(verify::disagreement(&d, &cpu).is_none());
            judged += 1;
        }
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
    let exe = verify_emulator(&cxx);
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
        let o = Command::new(exe)
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
    let mut made = 0;
    for g in planted::generators() {
        let mut host = vec![0u8; g.elements as usize * g.dtype.size_bytes()];
        g.fill(&mut host);
        assert!(gen(&g) == host, "{g:?}");
        made += 1;
    }
    eprintln!("{made} generated inputs identical on the emulated device and the host");
}
