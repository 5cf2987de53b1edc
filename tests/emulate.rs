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
