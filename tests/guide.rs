//! The user guide's five-minute example (docs/declared-operations.md) works as written:
//! its kernel, C reference and manifest are taken from the guide's code blocks (each names
//! its file on its first line), the manifest parses, its ladder derives, the reference
//! compiles and computes `y = alpha x`, and NVRTC compiles the kernel. On the GPU,
//! `scripts/gpu-examples-evidence` runs `klab check` on the same files.

use std::path::Path;

/// The guide's code blocks that name a file on their first line: (file name, text).
fn guide_files() -> Vec<(String, String)> {
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/declared-operations.md"),
    )
    .unwrap();
    let mut files = Vec::new();
    let mut block: Option<Vec<String>> = None;
    for line in guide.lines() {
        let t = line.trim_start();
        if t.starts_with("```") {
            match block.take() {
                Some(lines) => {
                    let first = lines.first().cloned().unwrap_or_default();
                    let name = first
                        .trim_start_matches(['/', '#', '*', ' '])
                        .trim_end_matches(['*', '/', ' '])
                        .to_string();
                    if name.ends_with(".cu") || name.ends_with(".c") || name.ends_with(".toml") {
                        files.push((name, lines.join("\n") + "\n"));
                    }
                }
                None => block = Some(Vec::new()),
            }
        } else if let Some(lines) = block.as_mut() {
            // Code blocks are indented under their list item.
            lines.push(line.strip_prefix("   ").unwrap_or(line).to_string());
        }
    }
    files
}

#[test]
fn the_guide_example_parses_and_its_reference_computes() {
    let files = guide_files();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["scale.cu", "ref.c", "scale.toml"]);
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in &files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let m = klab_spec::manifest::load(&dir.path().join("scale.toml")).unwrap();
    let op = m.kernels[0].op.clone();
    let shapes = klab_engine::declared::ladder(&op).unwrap();
    assert!(shapes.iter().any(|s| s["n"] == 257), "{shapes:?}");
    let spec = klab_tools::cref::CReferenceSpec {
        source: dir.path().join("ref.c"),
        function: "scale_ref".into(),
        params: klab_tools::cref::params_for(&op),
        working: op.spec.working_precision(),
    };
    let r = match klab_tools::cref::CReference::build(&spec, None) {
        Ok(r) => r,
        Err(klab_tools::cref::CRefError::Compiler { why, .. })
            if std::env::var("KLAB_REQUIRE_CC").as_deref() != Ok("1") =>
        {
            eprintln!("SKIPPED the guide's reference: no C compiler ({why})");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let x = [1.0f32, -2.0, 3.5];
    let mut xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut yb = vec![0u8; 12];
    r.call(&mut [&mut xb, &mut yb], &[3], &[2.0]).unwrap();
    let y: Vec<f32> = yb
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(y, [2.0, -4.0, 7.0]);

    if !klab_cuda::probe::nvrtc_present() {
        assert_ne!(
            std::env::var("KLAB_REQUIRE_NVRTC").as_deref(),
            Ok("1"),
            "KLAB_REQUIRE_NVRTC=1 but libnvrtc.so.13 cannot be loaded"
        );
        eprintln!("SKIPPED compiling the guide's kernel: NVRTC not found");
        return;
    }
    let c = klab_cuda::nvrtc::compile(
        &klab_cuda::nvrtc::CompileSpec::for_kernel(
            &m,
            &m.kernels[0],
            klab_cuda::nvrtc::DEFAULT_ARCH,
        )
        .unwrap(),
        &klab_cuda::nvrtc::Cache::disabled(),
    )
    .unwrap();
    assert!(c.ptxas_resources().iter().any(|k| k.kernel == "scale"));
}
