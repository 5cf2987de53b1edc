//! NVRTC compilation and its cache, with the real NVRTC (no GPU needed). These skip, saying
//! so, where libnvrtc is absent, unless KLAB_REQUIRE_NVRTC=1 (set by scripts/test once it
//! has installed the NVRTC wheel), in which case absence fails them.

use klab_cuda::nvrtc::{self, Cache, CompileSpec};
use klab_cuda::{probe, CudaError};
use klab_spec::builtin;

fn nvrtc_or_skip(test: &str) -> bool {
    if probe::nvrtc_present() {
        return true;
    }
    if std::env::var("KLAB_REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!("{test}: KLAB_REQUIRE_NVRTC=1 but libnvrtc.so.13 cannot be loaded");
    }
    eprintln!("SKIPPED {test}: NVRTC not found (libnvrtc.so.13 not on the library path)");
    false
}

fn transpose_spec() -> CompileSpec {
    CompileSpec::transpose_lab(nvrtc::DEFAULT_ARCH)
}

/// A copy kernel whose shared tile is `TILE` floats, a macro of a header: the tests that
/// edit the header watch the module's shared memory follow it (or not, from a stale cache).
const TILE_KERNEL: &str = "extern \"C\" __global__ void k(float* o, const float* i, int n) {\n    __shared__ float s[TILE];\n    s[threadIdx.x % TILE] = i[threadIdx.x];\n    __syncthreads();\n    if ((int)threadIdx.x < n) o[threadIdx.x] = s[(threadIdx.x + 1) % TILE];\n}\n";

/// `m.toml` in `dir`: kernel `k` of `k.cu` as a copy, with `top` (say, its include_dirs) first.
fn copy_manifest(dir: &std::path::Path, top: &str) -> std::path::PathBuf {
    let m = dir.join("m.toml");
    std::fs::write(
        &m,
        format!("source = \"k.cu\"\n{top}[[kernel]]\nname = \"k\"\nentry = \"k\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [32]\nelements_per_block = [32, 32]\n"),
    )
    .unwrap();
    m
}

/// A folder holding `tile.cuh` (TILE 32), `k.cu` (`prelude`, then [`TILE_KERNEL`]) and its
/// manifest: (the folder, the header, the manifest).
fn tile_project(prelude: &str) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let header = t.path().join("tile.cuh");
    std::fs::write(&header, "#define TILE 32\n").unwrap();
    std::fs::write(t.path().join("k.cu"), format!("{prelude}{TILE_KERNEL}")).unwrap();
    let m = copy_manifest(t.path(), "");
    (t, header, m)
}

/// The manifest at `m` read now, and its first kernel's module compiled through `cache`.
fn build_from(m: &std::path::Path, cache: &Cache) -> Result<nvrtc::Compiled, CudaError> {
    let manifest = klab_spec::manifest::load(m).unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    nvrtc::compile(&spec, cache)
}

/// The static shared memory of a module's only kernel.
fn shared_bytes(c: &nvrtc::Compiled) -> u32 {
    c.ptxas_resources()[0].static_shared_bytes
}

#[test]
fn every_builtin_kernel_compiles_with_the_expected_shared_memory() {
    if !nvrtc_or_skip("every_builtin_kernel_compiles_with_the_expected_shared_memory") {
        return;
    }
    let c = nvrtc::compile(&transpose_spec(), &Cache::disabled()).unwrap();
    assert!(!c.cubin.is_empty());
    assert!(c.options.contains(&"-lineinfo".to_string()));
    let mut r = c.ptxas_resources();
    r.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    let got: Vec<(&str, u32, u32)> = r
        .iter()
        .map(|k| (k.kernel.as_str(), k.static_shared_bytes, k.local_bytes))
        .collect();
    assert_eq!(
        got,
        [
            ("transpose_broken", 4224, 0),
            ("transpose_copy", 0, 0),
            ("transpose_naive", 0, 0),
            ("transpose_padded", 4224, 0),
            ("transpose_tiled", 4096, 0),
        ],
        "NVRTC log:\n{}",
        c.log
    );
    assert!(r.iter().all(|k| k.registers > 0 && k.registers <= 255));
}

#[test]
fn the_cache_hits_and_rebuilds_a_corrupt_entry() {
    if !nvrtc_or_skip("the_cache_hits_and_rebuilds_a_corrupt_entry") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::at(dir.path());
    let spec = transpose_spec();
    let first = nvrtc::compile(&spec, &cache).unwrap();
    assert!(!first.from_cache);
    let second = nvrtc::compile(&spec, &cache).unwrap();
    assert!(second.from_cache);
    assert_eq!(second.cubin, first.cubin);
    assert_eq!(second.log, first.log);

    let entry = dir.path().join(format!("{}.cubin", first.key));
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&entry, &bytes).unwrap();
    let third = nvrtc::compile(&spec, &cache).unwrap();
    assert!(!third.from_cache, "a corrupt entry must not be trusted");
    assert!(
        third.notes[0].contains("entry hash does not match"),
        "{:?}",
        third.notes
    );
    assert_eq!(third.cubin, first.cubin);
    assert!(
        nvrtc::compile(&spec, &cache).unwrap().from_cache,
        "rewritten"
    );

    // A different architecture is a different entry.
    let mut other = spec.clone();
    other.arch = "sm_80".into();
    assert!(!nvrtc::compile(&other, &cache).unwrap().from_cache);
}

/// Issue 15: an entry's header was trusted unhashed, so an edited register count was
/// reported as ptxas's; now any edit of the header is a miss that recompiles, with a note.
#[test]
fn an_edited_cache_entry_header_recompiles_with_a_note() {
    if !nvrtc_or_skip("an_edited_cache_entry_header_recompiles_with_a_note") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::at(dir.path());
    let spec = transpose_spec();
    let first = nvrtc::compile(&spec, &cache).unwrap();
    let registers = first.ptxas_resources()[0].registers;
    let entry = dir.path().join(format!("{}.cubin", first.key));
    let bytes = std::fs::read(&entry).unwrap();
    let nl = bytes.iter().position(|b| *b == b'\n').unwrap();
    let header_end = nl + 1 + bytes[nl + 1..].iter().position(|b| *b == b'\n').unwrap();
    let header = String::from_utf8(bytes[nl + 1..header_end].to_vec()).unwrap();
    let used = format!("Used {registers} registers");
    assert!(header.contains(&used), "{header}");
    let edited_header = header.replacen(&used, "Used 31 registers", 1);
    let mut edited = bytes[..=nl].to_vec();
    edited.extend_from_slice(edited_header.as_bytes());
    edited.extend_from_slice(&bytes[header_end..]);
    std::fs::write(&entry, &edited).unwrap();

    let again = nvrtc::compile(&spec, &cache).unwrap();
    assert!(!again.from_cache, "an edited header must not be trusted");
    assert_eq!(again.ptxas_resources()[0].registers, registers);
    assert_eq!(again.notes.len(), 1, "{:?}", again.notes);
    assert!(
        again.notes[0].contains("could not be trusted (entry hash does not match"),
        "{:?}",
        again.notes
    );
    assert!(nvrtc::compile(&spec, &cache).unwrap().from_cache);
}

/// Issue 15: a FIFO at a cache entry's path blocked the compile forever.
#[test]
fn a_fifo_as_a_cache_entry_is_a_note_not_a_hang() {
    if !nvrtc_or_skip("a_fifo_as_a_cache_entry_is_a_note_not_a_hang") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::at(dir.path());
    let spec = transpose_spec();
    let key = nvrtc::compile(&spec, &Cache::disabled()).unwrap().key;
    let entry = dir.path().join(format!("{key}.cubin"));
    assert!(std::process::Command::new("mkfifo")
        .arg(&entry)
        .status()
        .unwrap()
        .success());
    let c = nvrtc::compile(&spec, &cache).unwrap();
    assert!(!c.from_cache);
    assert!(
        c.notes.iter().any(|n| n.contains("is a FIFO (named pipe)")),
        "{:?}",
        c.notes
    );
}

#[test]
fn a_compile_error_shows_the_nvrtc_log() {
    if !nvrtc_or_skip("a_compile_error_shows_the_nvrtc_log") {
        return;
    }
    let spec = CompileSpec::new(
        "bad.cu",
        "extern \"C\" __global__ void k(float* o) { o[0] = undeclared_name; }",
        nvrtc::DEFAULT_ARCH,
    );
    match nvrtc::compile(&spec, &Cache::disabled()) {
        Err(CudaError::Compile { log, program, .. }) => {
            assert_eq!(program, "bad.cu");
            assert!(log.contains("undeclared_name"), "{log}");
            assert!(log.contains("bad.cu"), "{log}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn nvrtc_reports_its_version() {
    if !nvrtc_or_skip("nvrtc_reports_its_version") {
        return;
    }
    let v = nvrtc::version().unwrap();
    assert!(v.starts_with("13."), "{v}");
}

#[test]
fn a_repeated_compile_still_reports_resources() {
    // NVRTC 12.9+ keeps its own cache; a hit there skips ptxas and drops the resource
    // report from the log (seen on the H200 machine). klab passes --no-cache.
    if !nvrtc_or_skip("a_repeated_compile_still_reports_resources") {
        return;
    }
    for _ in 0..2 {
        let c = nvrtc::compile(&transpose_spec(), &Cache::disabled()).unwrap();
        assert_eq!(c.ptxas_resources().len(), 5, "NVRTC log:\n{}", c.log);
    }
}

/// kernels/fast.cu: the T-tile transposes hold T padded 32 x 33 tiles (4,224 bytes each),
/// the register-transpose family one TR x (TC + 1) float tile (its ragged path's layout, which
/// the vector layout of the aligned path shares; W more rows with ownership), the strips
/// TR + 4 rows of a 2 TC + 1 circular buffer, and nothing spills to local memory.
#[test]
fn the_fast_kernels_compile_without_spills() {
    if !nvrtc_or_skip("the_fast_kernels_compile_without_spills") {
        return;
    }
    let spec = CompileSpec::new("fast.cu", builtin::FAST_SOURCE, nvrtc::DEFAULT_ARCH);
    let c = nvrtc::compile(&spec, &Cache::disabled()).unwrap();
    let mut r = c.ptxas_resources();
    r.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    let got: Vec<(&str, u32, u32)> = r
        .iter()
        .map(|k| (k.kernel.as_str(), k.static_shared_bytes, k.local_bytes))
        .collect();
    assert_eq!(
        got,
        [
            ("copy_vec16", 0, 0),
            // Lean: TR + 8 rows of TC / 4 slots, plus one extra slot per row.
            ("transpose_lean_64", (72 * 64 + 72 * 4) * 4, 0),
            ("transpose_lean_64_cm", (72 * 64 + 72 * 4) * 4, 0),
            ("transpose_lean_64_r2", (72 * 64 + 72 * 4) * 4, 0),
            ("transpose_leana_128x64", (136 * 64 + 136 * 4) * 4, 0),
            ("transpose_leana_64", (72 * 64 + 72 * 4) * 4, 0),
            ("transpose_leana_64x128", (72 * 128 + 72 * 4) * 4, 0),
            ("transpose_leanu_128x64_cm", (136 * 64 + 136 * 4) * 4, 0),
            (
                "transpose_leanu_128x64_cm_t512",
                (136 * 64 + 136 * 4) * 4,
                0
            ),
            ("transpose_leanu_64_cm", (72 * 64 + 72 * 4) * 4, 0),
            ("transpose_own4_128x64", 132 * 65 * 4, 0),
            ("transpose_own4_64", 68 * 65 * 4, 0),
            ("transpose_own4_64_o5", 68 * 65 * 4, 0),
            ("transpose_own8_128x64", 136 * 65 * 4, 0),
            ("transpose_own8_64_o5", 72 * 65 * 4, 0),
            ("transpose_reg2_64", 64 * 65 * 4, 0),
            ("transpose_reg4_128x64", 128 * 65 * 4, 0),
            ("transpose_reg4_128x64_cm", 128 * 65 * 4, 0),
            ("transpose_reg4_64", 64 * 65 * 4, 0),
            ("transpose_reg4_64_cm", 64 * 65 * 4, 0),
            ("transpose_reg4_64_cs", 64 * 65 * 4, 0),
            ("transpose_reg4_64_dg", 64 * 65 * 4, 0),
            ("transpose_reg4_64_e2", 64 * 65 * 4, 0),
            ("transpose_reg4_64_g32", 64 * 65 * 4, 0),
            ("transpose_reg4_64x128", 64 * 129 * 4, 0),
            ("transpose_reg4_64x128_cm", 64 * 129 * 4, 0),
            ("transpose_strip128x32_k8", 132 * 65 * 4, 0),
            ("transpose_strip64_k2", 68 * 129 * 4, 0),
            ("transpose_strip64_k4", 68 * 129 * 4, 0),
            ("transpose_strip64_k8", 68 * 129 * 4, 0),
            ("transpose_strip8_64_k2", 72 * 129 * 4, 0),
            ("transpose_vec4_t1", 4224, 0),
            ("transpose_vec4_t2", 2 * 4224, 0),
            ("transpose_vec4_t4", 4 * 4224, 0),
        ],
        "NVRTC log:\n{}",
        c.log
    );
    for k in &r {
        eprintln!("{} {} registers", k.kernel, k.registers);
    }
}

/// The toolkit's half-precision headers are found without an `-I` from the user: the
/// folder beside the loaded libnvrtc (the wheels' layout; scripts/test installs
/// nvidia-cuda-runtime for the headers), else `$CUDA_HOME`, `$CUDA_PATH`, /usr/local/cuda.
#[test]
fn a_kernel_including_the_fp16_and_bf16_headers_compiles() {
    let test = "a_kernel_including_the_fp16_and_bf16_headers_compiles";
    if !nvrtc_or_skip(test) {
        return;
    }
    // Where a header folder is looked for, NVRTC must be loaded (its path is read from the
    // process's mappings): nvrtc::version() loads it.
    nvrtc::version().unwrap();
    let Some(dir) = nvrtc::toolkit_include_dir() else {
        if std::env::var("KLAB_REQUIRE_NVRTC").as_deref() == Ok("1") {
            panic!("{test}: KLAB_REQUIRE_NVRTC=1 but no folder with cuda_fp16.h was found (install nvidia-cuda-runtime==13.0.* beside NVRTC, or set CUDA_HOME)");
        }
        eprintln!("SKIPPED {test}: no toolkit headers (cuda_fp16.h) found");
        return;
    };
    let spec = CompileSpec::new(
        "half.cu",
        r#"#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void widen(float* out, const __nv_bfloat16* a, const __half* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __bfloat162float(a[i]) + __half2float(b[i]);
}
"#,
        nvrtc::DEFAULT_ARCH,
    );
    let c = nvrtc::compile(&spec, &Cache::disabled()).unwrap();
    let shown = dir.display().to_string();
    assert_eq!(c.toolkit_include.as_deref(), Some(shown.as_str()));
    assert!(c.options.contains(&format!("-I{shown}")), "{:?}", c.options);
    assert!(
        c.ptxas_resources().iter().any(|r| r.kernel == "widen"),
        "{}",
        c.log
    );
}

/// A manifest's include_dirs: the header is found, and editing it misses the cache (the
/// folder's files are in the key) and compiles what it now says.
#[test]
fn a_header_from_include_dirs_compiles_and_editing_it_recompiles() {
    if !nvrtc_or_skip("a_header_from_include_dirs_compiles_and_editing_it_recompiles") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("inc/tiles")).unwrap();
    let header = t.path().join("inc/tiles/tile.cuh");
    std::fs::write(&header, "#define TILE 32\n").unwrap();
    std::fs::write(
        t.path().join("k.cu"),
        format!("#include \"tiles/tile.cuh\"\n{TILE_KERNEL}"),
    )
    .unwrap();
    let m = copy_manifest(t.path(), "include_dirs = [\"inc\"]\n");
    let cache = Cache::at(t.path().join("cache"));
    let build = || build_from(&m, &cache).unwrap();
    let shared = shared_bytes;
    let first = build();
    assert!(
        first
            .options
            .contains(&format!("-I{}", t.path().join("inc").display())),
        "{:?}",
        first.options
    );
    assert_eq!(shared(&first), 32 * 4, "{}", first.log);
    assert!(build().from_cache);
    std::fs::write(&header, "#define TILE 64\n").unwrap();
    let edited = build();
    assert!(!edited.from_cache, "an edited header must recompile");
    assert_ne!(edited.key, first.key);
    assert_eq!(shared(&edited), 64 * 4, "{}", edited.log);
}

/// A template kernel named by its instance: NVRTC instantiates it, lowers the name to the
/// mangled symbol (kept through a cache hit), and ptxas's resources are reported under the
/// entry.
#[test]
fn a_template_instance_compiles_by_name_and_its_resources_are_reported() {
    if !nvrtc_or_skip("a_template_instance_compiles_by_name_and_its_resources_are_reported") {
        return;
    }
    let source = r#"template <typename T, int B>
__global__ void scale(T* out, const T* in, int n) {
    __shared__ T tile[B];
    int i = blockIdx.x * B + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : T(0);
    __syncthreads();
    if (i < n) out[i] = tile[threadIdx.x] * T(2);
}
"#;
    let kernel = |name: &str, entry: &str| {
        format!("[[kernel]]\nname = \"{name}\"\nentry = \"{entry}\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [128]\nelements_per_block = [128, 1]\n")
    };
    let manifest = klab_spec::manifest::parse(
        "m.toml",
        &format!(
            "source = \"scale.cu\"\n{}{}",
            kernel("f128", "scale<float, 128>"),
            kernel("d64", "scale<double, 64>")
        ),
        klab_spec::manifest::Files::Given(&|_| Ok(("scale.cu".into(), source.into()))),
    )
    .unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    assert_eq!(
        spec.name_expressions,
        ["scale<float, 128>", "scale<double, 64>"]
    );
    let t = tempfile::tempdir().unwrap();
    let cache = Cache::at(t.path());
    let c = nvrtc::compile(&spec, &cache).unwrap();
    let f128 = &c.lowered_names["scale<float, 128>"];
    let d64 = &c.lowered_names["scale<double, 64>"];
    assert!(f128.starts_with("_Z5scaleIfLi128EE"), "{f128}");
    assert!(d64.starts_with("_Z5scaleIdLi64EE"), "{d64}");
    assert_eq!(
        nvrtc::symbol(&c.lowered_names, "scale<float, 128>").unwrap(),
        f128
    );
    let r = c.ptxas_resources();
    let shared = |entry: &str| {
        r.iter()
            .find(|k| k.kernel == entry)
            .unwrap_or_else(|| panic!("{entry} not in {r:?}; NVRTC log:\n{}", c.log))
            .static_shared_bytes
    };
    assert_eq!(shared("scale<float, 128>"), 128 * 4);
    assert_eq!(shared("scale<double, 64>"), 64 * 8);
    let hit = nvrtc::compile(&spec, &cache).unwrap();
    assert!(hit.from_cache);
    assert_eq!(hit.lowered_names, c.lowered_names);

    // An instance the template cannot make is NVRTC's compile error, with its log.
    let mut bad = spec.clone();
    bad.name_expressions = vec!["scale<float>".into()];
    match nvrtc::compile(&bad, &Cache::disabled()) {
        Err(CudaError::Compile { log, .. }) => assert!(log.contains("scale"), "{log}"),
        other => panic!("expected a compile error, got {other:?}"),
    }
}

/// A plain C++ kernel (not extern "C", as llm.c's and most projects' are) is compiled by
/// its name: NVRTC lowers it to the mangled symbol the loader asks for, and ptxas's
/// resources are reported under the entry. klab refused such kernels before.
#[test]
fn a_plain_cpp_kernel_compiles_by_name_and_its_resources_are_reported() {
    if !nvrtc_or_skip("a_plain_cpp_kernel_compiles_by_name_and_its_resources_are_reported") {
        return;
    }
    let source = r#"__global__ void twice(float* out, const float* in, int n) {
    __shared__ float tile[64];
    int i = blockIdx.x * 64 + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = 2.0f * tile[threadIdx.x];
}
extern "C" __global__ void once(float* out, const float* in, int n) {
    int i = blockIdx.x * 64 + threadIdx.x;
    if (i < n) out[i] = in[i];
}
"#;
    let kernel = |entry: &str| {
        format!("[[kernel]]\nname = \"{entry}\"\nentry = \"{entry}\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [64]\nelements_per_block = [64, 1]\n")
    };
    let manifest = klab_spec::manifest::parse(
        "m.toml",
        &format!("source = \"k.cu\"\n{}{}", kernel("twice"), kernel("once")),
        klab_spec::manifest::Files::Given(&|_| Ok(("k.cu".into(), source.into()))),
    )
    .unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    assert_eq!(spec.name_expressions, ["twice"]);
    let c = nvrtc::compile(&spec, &Cache::disabled()).unwrap();
    let twice = nvrtc::symbol(&c.lowered_names, "twice").unwrap();
    assert!(twice.starts_with("_Z5twicePfPKfi"), "{twice}");
    assert_eq!(nvrtc::symbol(&c.lowered_names, "once").unwrap(), "once");
    let r = c.ptxas_resources();
    let twice = r
        .iter()
        .find(|k| k.kernel == "twice")
        .unwrap_or_else(|| panic!("twice not in {r:?}; NVRTC log:\n{}", c.log));
    assert_eq!(twice.static_shared_bytes, 64 * 4);
}

/// Kernels in namespaces, as projects write them (`namespace ops { __global__ ... }`, a
/// nested `a::b`, and one defined outside its namespace): each is named by its qualified
/// name, asked of NVRTC as written and found in the compiler's report. klab refused these
/// entries (`ops::twice` was not an identifier, and `twice` did not compile).
#[test]
fn kernels_in_namespaces_compile_by_their_qualified_names() {
    if !nvrtc_or_skip("kernels_in_namespaces_compile_by_their_qualified_names") {
        return;
    }
    let source = r#"namespace ops {
__global__ void twice(float* out, const float* in, int n) {
    int i = blockIdx.x * 64 + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
__global__ void thrice(float* out, const float* in, int n);
}
__global__ void ops::thrice(float* out, const float* in, int n) {
    int i = blockIdx.x * 64 + threadIdx.x;
    if (i < n) out[i] = 3.0f * in[i];
}
namespace a::b {
extern "C" __global__ void plain(float* out, const float* in, int n) {
    int i = blockIdx.x * 64 + threadIdx.x;
    if (i < n) out[i] = in[i];
}
}
"#;
    let kernel = |entry: &str| {
        let name = entry.rsplit("::").next().unwrap();
        format!("[[kernel]]\nname = \"{name}\"\nentry = \"{entry}\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [64]\nelements_per_block = [64, 1]\n")
    };
    let entries = ["ops::twice", "ops::thrice", "a::b::plain"];
    let manifest = klab_spec::manifest::parse(
        "m.toml",
        &format!("source = \"k.cu\"\n{}", entries.map(kernel).concat()),
        klab_spec::manifest::Files::Given(&|_| Ok(("k.cu".into(), source.into()))),
    )
    .unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    assert_eq!(spec.name_expressions, entries);
    let c = nvrtc::compile(&spec, &Cache::disabled()).unwrap_or_else(|e| panic!("{e}"));
    let twice = nvrtc::symbol(&c.lowered_names, "ops::twice").unwrap();
    assert!(twice.starts_with("_ZN3ops5twiceE"), "{twice}");
    let thrice = nvrtc::symbol(&c.lowered_names, "ops::thrice").unwrap();
    assert!(thrice.starts_with("_ZN3ops6thriceE"), "{thrice}");
    // extern "C" in a namespace: the symbol is the plain name.
    assert_eq!(
        nvrtc::symbol(&c.lowered_names, "a::b::plain").unwrap(),
        "plain"
    );
    let r = c.ptxas_resources();
    for name in entries {
        assert!(r.iter().any(|k| k.kernel == name), "{name} not in {r:?}");
    }
}

/// A project's layout: the kernel (plain C++) lives in a header the wrapper source includes
/// from `include_dirs`. klab refused the entry (the wrapper declares no kernel); it is now
/// asked of NVRTC by name and found in the header.
#[test]
fn a_kernel_in_an_included_header_compiles_by_name() {
    if !nvrtc_or_skip("a_kernel_in_an_included_header_compiles_by_name") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("kernels")).unwrap();
    std::fs::write(
        t.path().join("kernels/copy.cuh"),
        "__global__ void copy_rows(float* out, const float* in, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) out[i] = in[i];\n}\n",
    )
    .unwrap();
    std::fs::write(t.path().join("wrap.cu"), "#include \"copy.cuh\"\n").unwrap();
    let m = t.path().join("m.toml");
    std::fs::write(
        &m,
        "source = \"wrap.cu\"\ninclude_dirs = [\"kernels\"]\n[[kernel]]\nname = \"copy_rows\"\nentry = \"copy_rows\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [64]\nelements_per_block = [64, 1]\n",
    )
    .unwrap();
    let manifest = klab_spec::manifest::load(&m).unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    assert_eq!(spec.name_expressions, ["copy_rows"]);
    let c = nvrtc::compile(&spec, &Cache::disabled()).unwrap();
    let symbol = nvrtc::symbol(&c.lowered_names, "copy_rows").unwrap();
    assert!(symbol.starts_with("_Z9copy_rows"), "{symbol}");
}

/// A cubin and a PTX made by NVRTC, brought as a user's precompiled modules: the manifest
/// keeps their bytes, the module for the driver is them (PTX NUL-terminated), nothing asks
/// NVRTC to compile them, and the first thing that needs a driver says there is none.
#[test]
fn precompiled_cubin_and_ptx_become_modules_without_compiling_and_stop_at_the_driver() {
    use klab_cuda::module::{self, Module};
    use klab_spec::manifest::{ModuleKind, Source};
    let test = "precompiled_cubin_and_ptx_become_modules_without_compiling_and_stop_at_the_driver";
    if !nvrtc_or_skip(test) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let cubin = nvrtc::compile(&transpose_spec(), &Cache::disabled())
        .unwrap()
        .cubin;
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(
        builtin::TRANSPOSE_SOURCE,
        cudarc::nvrtc::CompileOptions {
            arch: Some("compute_80"),
            ..Default::default()
        },
    )
    .unwrap()
    .to_src();
    assert!(ptx.contains(".entry transpose_padded"), "{ptx}");
    std::fs::write(t.path().join("t.cubin"), &cubin).unwrap();
    std::fs::write(t.path().join("t.ptx"), &ptx).unwrap();
    // The cache would be written by a compile; none may happen.
    let cache_dir = t.path().join("cache");
    for (file, kind, bytes) in [
        ("t.cubin", ModuleKind::Cubin, cubin.clone()),
        ("t.ptx", ModuleKind::Ptx, ptx.clone().into_bytes()),
    ] {
        let m = t.path().join(format!("{file}.toml"));
        std::fs::write(
            &m,
            format!("source = \"{file}\"\n[[kernel]]\nname = \"padded\"\nentry = \"transpose_padded\"\noperation = \"transpose\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [32, 8, 1]\nelements_per_block = [32, 32]\n"),
        )
        .unwrap();
        let manifest = klab_spec::manifest::load(&m).unwrap();
        assert_eq!(
            manifest.source,
            Source::Module {
                kind,
                bytes: bytes.clone()
            }
        );
        assert_eq!(
            manifest.source.sha256(),
            klab_core::artifact::sha256_hex(&bytes)
        );
        let decl = &manifest.kernels[0];
        match CompileSpec::for_kernel(&manifest, decl, nvrtc::DEFAULT_ARCH) {
            Err(e @ CudaError::NoSource { .. }) => {
                assert!(e.to_string().contains("has no CUDA source"), "{e}")
            }
            other => panic!("{file}: expected NoSource, got {other:?}"),
        }
        let built =
            module::build(&manifest, decl, nvrtc::DEFAULT_ARCH, &Cache::at(&cache_dir)).unwrap();
        let Module::Precompiled(p) = &built else {
            panic!("{file} was compiled");
        };
        assert_eq!(p.kind, kind);
        match kind {
            ModuleKind::Ptx => {
                assert_eq!(&p.image[..bytes.len()], &bytes[..]);
                assert_eq!(p.image[bytes.len()..], [0], "PTX ends in one NUL");
            }
            _ => assert_eq!(p.image, bytes),
        }
        assert!(built.flags().is_empty(), "{:?}", built.flags());
        assert!(
            built
                .compiler()
                .starts_with(&format!("precompiled {}", kind.name())),
            "{}",
            built.compiler()
        );
    }
    assert!(!cache_dir.exists(), "nothing was compiled");
    if !probe::driver_present() {
        let e = klab_cuda::device::Device::open(0).err().unwrap();
        assert!(matches!(e, CudaError::NoDriver), "{e}");
        assert!(e.to_string().starts_with("no CUDA driver"), "{e}");
    }
}

#[test]
fn the_device_checker_and_its_mutants_compile_without_spills() {
    if !nvrtc_or_skip("the_device_checker_and_its_mutants_compile_without_spills") {
        return;
    }
    let mutants = klab_engine::verify::CheckerMutant::ALL.map(Some);
    for mutant in [None].into_iter().chain(mutants) {
        let spec = klab_cuda::checker::spec(nvrtc::DEFAULT_ARCH, mutant);
        let c =
            nvrtc::compile(&spec, &Cache::disabled()).unwrap_or_else(|e| panic!("{mutant:?}: {e}"));
        let mut names: Vec<(String, u32)> = c
            .ptxas_resources()
            .into_iter()
            .map(|k| (k.kernel, k.local_bytes))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                ("klab_copy_elements".to_string(), 0),
                ("klab_generate".to_string(), 0),
                ("klab_l2_read".to_string(), 0),
                ("klab_patch".to_string(), 0),
                ("klab_scramble".to_string(), 0),
                ("klab_verify_compact".to_string(), 0),
                ("klab_verify_reduce".to_string(), 0),
            ],
            "{mutant:?}: NVRTC log:\n{}",
            c.log
        );
    }
}

/// The audits' kernels (the mutation audit's bugs, the exploit audit's cheats and controls)
/// only reach a GPU through `klab audit`; each entry their manifests name must compile, with
/// nothing spilled, so that an audit on the H200 never stops at a typo.
#[test]
fn every_audit_kernel_compiles_and_each_declared_entry_exists() {
    if !nvrtc_or_skip("every_audit_kernel_compiles_and_each_declared_entry_exists") {
        return;
    }
    let audits = [
        (
            "mutants.cu",
            builtin::MUTANTS_SOURCE,
            include_str!("../../../kernels/mutants.toml"),
        ),
        (
            "exploits.cu",
            builtin::EXPLOITS_SOURCE,
            include_str!("../../../kernels/exploits.toml"),
        ),
    ];
    for (program, source, manifest) in audits {
        let spec = CompileSpec::new(program, source, nvrtc::DEFAULT_ARCH);
        let c = nvrtc::compile(&spec, &Cache::disabled()).unwrap_or_else(|e| panic!("{e}"));
        let compiled: std::collections::BTreeMap<String, u32> = c
            .ptxas_resources()
            .into_iter()
            .map(|k| (k.kernel, k.local_bytes))
            .collect();
        let entries: Vec<&str> = manifest
            .lines()
            .filter_map(|l| l.trim().strip_prefix("entry = \""))
            .filter_map(|l| l.strip_suffix('"'))
            .collect();
        assert!(entries.len() >= 8, "{program}: {entries:?}");
        for e in entries {
            assert_eq!(compiled.get(e), Some(&0), "{program}: {e} in {compiled:?}");
        }
    }
}

/// The most common layout: `k.cu` includes `"tile.cuh"` from its own folder, with no
/// `include_dirs`. The header is found whatever folder klab runs from (as nvcc finds it
/// beside the including file), and editing it misses the cache and compiles what it says.
#[test]
fn a_header_beside_the_source_is_found_from_any_folder_and_editing_it_recompiles() {
    if !nvrtc_or_skip(
        "a_header_beside_the_source_is_found_from_any_folder_and_editing_it_recompiles",
    ) {
        return;
    }
    let (t, header, m) = tile_project("#include \"tile.cuh\"\n");
    let cache = Cache::at(t.path().join("cache"));
    let build = || build_from(&m, &cache);
    let shared = shared_bytes;
    // The test process's folder is the crate's, not the source's.
    assert_ne!(std::env::current_dir().unwrap(), t.path());
    let first = build().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(shared(&first), 32 * 4, "{}", first.log);
    // NVRTC names the program by the source's path: it looks beside it, not in the folder
    // klab runs in (where a header of the same name would have been taken first).
    assert_eq!(first.program, t.path().join("k.cu").display().to_string());
    assert!(build().unwrap().from_cache);
    std::fs::write(&header, "#define TILE 64\n").unwrap();
    let edited = build().unwrap();
    assert!(
        !edited.from_cache,
        "an edited header beside the source must recompile"
    );
    assert_eq!(shared(&edited), 64 * 4, "{}", edited.log);
}

/// Kernels from real projects include the C and C++ standard headers nvcc takes from the host
/// compiler; NVRTC has none of them, and such a kernel was refused at its first line. klab
/// supplies them: the types have their sizes, the limits and float macros their values, the
/// std:: math names their float overloads (std::abs(-1.5f) is a float, not abs(int)).
#[test]
fn a_kernel_including_the_standard_headers_compiles() {
    if !nvrtc_or_skip("a_kernel_including_the_standard_headers_compiles") {
        return;
    }
    let source = r#"#include <cstdint>
#include <cmath>
#include <cfloat>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstddef>
#include <cassert>
#include <stdint.h>
#include <math.h>
#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <assert.h>
#include <stddef.h>
template <class A, class B> struct same { static const bool value = false; };
template <class A> struct same<A, A> { static const bool value = true; };
static_assert(sizeof(int8_t) == 1 && sizeof(uint16_t) == 2 && sizeof(int32_t) == 4, "sizes");
static_assert(sizeof(std::uint64_t) == 8 && sizeof(intptr_t) == 8 && sizeof(std::size_t) == 8, "sizes");
static_assert(INT32_MAX == 2147483647 && INT32_MIN == -2147483647 - 1, "int32");
static_assert(UINT64_MAX == 18446744073709551615ULL && INT_MAX == INT32_MAX, "limits");
static_assert(LLONG_MIN == INT64_MIN && UINT32_C(5) == 5u && INT64_C(5) == 5ll, "limits");
static_assert(CHAR_BIT == 8 && SHRT_MAX == 32767 && UINT_MAX == 4294967295u, "limits");
static_assert(same<decltype(std::abs(-1.5f)), float>::value, "std::abs(float)");
static_assert(same<decltype(std::abs(-1.5)), double>::value, "std::abs(double)");
static_assert(same<decltype(std::sqrt(2.0f)), float>::value, "std::sqrt(float)");
static_assert(same<decltype(std::pow(2.0f, 2.0f)), float>::value, "std::pow(float)");
static_assert(same<decltype(std::fmax(2.0f, 1.0f)), float>::value, "std::fmax(float)");
static_assert(FLT_EPSILON == 1.1920928955078125e-07F && DBL_EPSILON == 2.220446049250313e-16, "eps");
static_assert(FLT_MAX == 3.4028234663852886e+38F && FLT_MIN == 1.1754943508222875e-38F, "flt");
struct S { int a; float b; };
extern "C" __global__ void k(float* o, std::size_t n, std::int64_t m) {
    // Not a constant expression under NVRTC (no __builtin_offsetof): used at run time.
    o[0] = (float)offsetof(S, b);
    std::uint32_t i = threadIdx.x;
    if (i < n) {
        float v = std::sqrt(std::fabs(o[i])) + (float)M_PI + std::fmax(1.f, 2.f) + (float)m;
        o[i] = std::isnan(v) ? NAN : (v > FLT_MAX ? INFINITY : v);
    }
    if (i == 0) std::printf("%d %f\n", INT_MAX, HUGE_VAL);
    assert(n > 0);
    void* p = std::malloc(4);
    std::free(p);
    std::memset(o, 0, 0);
    std::memcpy(o, o, 0);
}
"#;
    let spec = CompileSpec::new("k.cu", source, nvrtc::DEFAULT_ARCH);
    let c = nvrtc::compile(&spec, &Cache::disabled()).unwrap_or_else(|e| panic!("{e}"));
    assert!(!c.cubin.is_empty());

    // The C++ library proper is not imitated: NVRTC's error, and where such code can go.
    let spec = CompileSpec::new(
        "k.cu",
        "#include <type_traits>\nextern \"C\" __global__ void k(float* o) { o[0] = 1.f; }\n",
        nvrtc::DEFAULT_ARCH,
    );
    let e = nvrtc::compile(&spec, &Cache::disabled())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot open source file \"type_traits\""), "{e}");
    assert!(e.contains("<cuda/std/type_traits>"), "{e}");
}

/// A header of the project's own named like a standard one is the project's, not klab's:
/// klab's come last in the search, so a quoted include beside the including file and an
/// include folder's file are found first (NVRTC takes an in-memory header before either,
/// which broke a project's `sub/math.h`). A project `math.h` beside the source does not hide
/// klab's from `<cmath>`, whose angled include NVRTC looks for in the include folders only.
#[test]
fn a_projects_own_header_named_like_a_standard_one_is_the_one_used() {
    if !nvrtc_or_skip("a_projects_own_header_named_like_a_standard_one_is_the_one_used") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("sub")).unwrap();
    std::fs::create_dir_all(t.path().join("inc")).unwrap();
    std::fs::write(t.path().join("sub/math.h"), "#define TILE 7\n").unwrap();
    std::fs::write(t.path().join("sub/helpers.cuh"), "#include \"math.h\"\n").unwrap();
    std::fs::write(t.path().join("inc/limits.h"), "#define OWN_LIMIT 9\n").unwrap();
    std::fs::write(
        t.path().join("math.h"),
        "#error the project's math.h is not <cmath>'s\n",
    )
    .unwrap();
    std::fs::write(
        t.path().join("k.cu"),
        "#include \"sub/helpers.cuh\"\n#include <limits.h>\n#include <cmath>\n\
         static_assert(TILE == 7 && OWN_LIMIT == 9, \"the project's own\");\n\
         extern \"C\" __global__ void k(float* o, const float* i, int n) { o[0] = std::sqrt(i[1]) + TILE + OWN_LIMIT + n; }\n",
    )
    .unwrap();
    let m = t.path().join("m.toml");
    std::fs::write(
        &m,
        "source = \"k.cu\"\ninclude_dirs = [\"inc\"]\n[[kernel]]\nname = \"k\"\nentry = \"k\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [32]\nelements_per_block = [32, 32]\n",
    )
    .unwrap();
    let manifest = klab_spec::manifest::load(&m).unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    let c = nvrtc::compile(&spec, &Cache::disabled()).unwrap_or_else(|e| panic!("{e}"));
    // The standard headers' folder (a fresh one each compile) is in no recorded option.
    assert!(
        c.options.iter().all(|o| !o.contains("klab-std-headers")),
        "{:?}",
        c.options
    );
}

/// INFINITY and NAN are constant expressions, as under nvcc (attention kernels start a
/// running maximum at `constexpr float kNegInf = -INFINITY`).
#[test]
fn infinity_and_nan_are_constant_expressions() {
    if !nvrtc_or_skip("infinity_and_nan_are_constant_expressions") {
        return;
    }
    let source = "#include <cmath>\n#include <cstddef>\n#include <cstdint>\n\
        constexpr float kNegInf = -INFINITY;\n__device__ const float kNan = NAN;\n\
        constexpr double kHuge = HUGE_VAL;\n\
        template <class A, class B> struct same { static const bool value = false; };\n\
        template <class A> struct same<A, A> { static const bool value = true; };\n\
        static_assert(kNegInf < -3.0e38f && kHuge > 1.0e308, \"infinities\");\n\
        static_assert(same<decltype(PTRDIFF_MAX), std::ptrdiff_t>::value, \"PTRDIFF_MAX is a ptrdiff_t\");\n\
        extern \"C\" __global__ void k(float* o) { o[0] = kNegInf + kNan; }\n";
    let spec = CompileSpec::new("k.cu", source, nvrtc::DEFAULT_ARCH);
    nvrtc::compile(&spec, &Cache::disabled()).unwrap_or_else(|e| panic!("{e}"));
}

/// Two overloads of one kernel (both a copy's, as the operation's contract and each
/// signature must agree), each named by its parameter types: NVRTC is asked for each
/// overload's address, each lowers to its own symbol, kept under the entry (through a cache
/// hit too), and ptxas's resources are reported under it.
#[test]
fn overloads_compile_by_their_parameter_types() {
    if !nvrtc_or_skip("overloads_compile_by_their_parameter_types") {
        return;
    }
    let source = "__global__ void twice(float *out, const float *in, int n) {\n    __shared__ float s[64];\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    s[threadIdx.x % 64] = i < n ? in[i] : 0.f;\n    __syncthreads();\n    if (i < n) out[i] = 2.f * s[threadIdx.x % 64];\n}\n__global__ void twice(float *out, const float *in, unsigned n) {\n    __shared__ double s[32];\n    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n    s[threadIdx.x % 32] = i < n ? in[i] : 0.0;\n    __syncthreads();\n    if (i < n) out[i] = 2.0 * s[threadIdx.x % 32];\n}\n";
    let kernel = |name: &str, entry: &str| {
        format!("[[kernel]]\nname = \"{name}\"\nentry = \"{entry}\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [64]\nelements_per_block = [64, 1]\n")
    };
    let (f, d) = (
        "twice(float *, const float *, int)",
        "twice(float*, const float*, unsigned int)",
    );
    let manifest = klab_spec::manifest::parse(
        "m.toml",
        &format!(
            "source = \"twice.cu\"\n{}{}",
            kernel("f", f),
            kernel("d", d)
        ),
        klab_spec::manifest::Files::Given(&|_| Ok(("twice.cu".into(), source.into()))),
    )
    .unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    assert_eq!(spec.name_expressions, [f, d]);
    let t = tempfile::tempdir().unwrap();
    let cache = Cache::at(t.path());
    let c = nvrtc::compile(&spec, &cache).unwrap_or_else(|e| panic!("{e}"));
    let (sf, sd) = (&c.lowered_names[f], &c.lowered_names[d]);
    assert!(sf.starts_with("_Z5twicePfPKfi"), "{sf}");
    assert!(sd.starts_with("_Z5twicePfPKfj"), "{sd}");
    assert_eq!(nvrtc::symbol(&c.lowered_names, f).unwrap(), sf);
    let r = c.ptxas_resources();
    let shared = |entry: &str| {
        r.iter()
            .find(|k| k.kernel == entry)
            .unwrap_or_else(|| panic!("{entry} not in {r:?}"))
            .static_shared_bytes
    };
    assert_eq!((shared(f), shared(d)), (64 * 4, 32 * 8));
    let hit = nvrtc::compile(&spec, &cache).unwrap();
    assert!(hit.from_cache);
    assert_eq!(hit.lowered_names, c.lowered_names);

    // An extern "C" kernel among C++ overloads, named by its types: its address lowers to
    // its own name, the symbol the module has.
    let source = "extern \"C\" __global__ void e(float *out, const float *in, int n) { if (n) out[0] = in[0]; }\n__global__ void e(double *out, const double *in, int n) { if (n) out[0] = in[0]; }\n";
    let entry = "e(float *, const float *, int)";
    let manifest = klab_spec::manifest::parse(
        "m.toml",
        &format!("source = \"e.cu\"\n{}", kernel("e", entry)),
        klab_spec::manifest::Files::Given(&|_| Ok(("e.cu".into(), source.into()))),
    )
    .unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    let c = nvrtc::compile(&spec, &Cache::disabled()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(nvrtc::symbol(&c.lowered_names, entry).unwrap(), "e");
}

/// Every way of writing an include that the preprocessor reads (and an adversarial helper
/// found klab's first scanner missed) keys the cache by the header: editing it recompiles.
/// A header named by a macro klab cannot follow compiles without the cache, with a note;
/// one edited between reading the manifest and compiling is not stored under the old key.
#[test]
fn every_include_form_keys_the_cache_and_what_cannot_be_keyed_is_not_cached() {
    if !nvrtc_or_skip("every_include_form_keys_the_cache_and_what_cannot_be_keyed_is_not_cached") {
        return;
    }
    let shared = shared_bytes;
    for form in [
        "#include /* the tile */ \"tile.cuh\"\n",
        "/* x */ #include \"tile.cuh\"\n",
        "#include/**/\"tile.cuh\"\n",
        "#include \\\n  \"tile.cuh\"\n",
        "#inc\\\nlude \"tile.cuh\"\n",
        "%:include \"tile.cuh\"\n",
        "#define H \"tile.cuh\"\n#include H\n",
        "#if __has_include(\"tile.cuh\")\n#include \"tile.cuh\"\n#else\n#define TILE 8\n#endif\n",
    ] {
        let (t, header, m) = tile_project(form);
        let cache = Cache::at(t.path().join("cache"));
        let build = || build_from(&m, &cache).unwrap_or_else(|e| panic!("{form:?}: {e}"));
        assert_eq!(shared(&build()), 32 * 4, "{form:?}");
        assert!(build().from_cache, "{form:?}");
        std::fs::write(&header, "#define TILE 64\n").unwrap();
        let edited = build();
        assert!(
            !edited.from_cache,
            "{form:?}: an edited header must recompile"
        );
        assert_eq!(shared(&edited), 64 * 4, "{form:?}");
        // Creating a header a __has_include asks about, or removing it, recompiles too.
        if form.contains("__has_include") {
            std::fs::remove_file(&header).unwrap();
            let gone = build();
            assert!(!gone.from_cache);
            assert_eq!(shared(&gone), 8 * 4);
        }
    }

    // A header named by a function-like macro: compiled, never cached, and said so.
    let (t, _, m) =
        tile_project("#define STR(x) #x\n#define XSTR(x) STR(x)\n#include XSTR(tile.cuh)\n");
    let cache = Cache::at(t.path().join("cache"));
    let manifest = klab_spec::manifest::load(&m).unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    for _ in 0..2 {
        let c = nvrtc::compile(&spec, &cache).unwrap();
        assert!(!c.from_cache);
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("compiled without the cache") && n.contains("XSTR")),
            "{:?}",
            c.notes
        );
    }

    // Edited after the manifest was read, before the compile: not stored under the old key.
    let (t, header, m) = tile_project("#include \"tile.cuh\"\n");
    let cache = Cache::at(t.path().join("cache"));
    let manifest = klab_spec::manifest::load(&m).unwrap();
    let spec =
        CompileSpec::for_kernel(&manifest, &manifest.kernels[0], nvrtc::DEFAULT_ARCH).unwrap();
    std::fs::write(&header, "#define TILE 64\n").unwrap();
    let c = nvrtc::compile(&spec, &cache).unwrap();
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("changed while compiling")),
        "{:?}",
        c.notes
    );
    std::fs::write(&header, "#define TILE 32\n").unwrap();
    let again = nvrtc::compile(&spec, &cache).unwrap();
    assert!(
        !again.from_cache,
        "the module of TILE 64 was stored under TILE 32's key"
    );
    assert_eq!(shared(&again), 32 * 4);
}
