//! `klab init` on a real CUDA file: the layer-norm example, to stdout and to a file, an
//! existing file kept, and `klab check` naming the first placeholder left.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ops/layernorm/layernorm.cu")
}

fn klab() -> Command {
    let mut c = Command::cargo_bin("klab").unwrap();
    c.env_remove("KLAB_PARENT");
    c
}

/// (exit code, stdout, stderr).
fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let o = klab().args(args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every placeholder filled with a value that fits its field.
fn fill(text: &str) -> String {
    text.replace("values = [\"TODO\"]", "values = [1e-5]")
        .replace(
            "compare = \"TODO\"",
            "compare = { allclose = { atol = 1e-4, rtol = 1e-4 } }",
        )
        .replace("c = \"TODO\"", "c = \"layernorm_ref.c:layernorm_ref\"")
        .replace("len = \"TODO\"", "len = \"rows * cols\"")
        .replace("\"TODO\"", "\"rows\"")
}

#[test]
fn init_writes_the_layer_norm_skeleton_to_stdout() {
    let (code, out, err) = run(&[
        "init".as_ref(),
        example().as_os_str(),
        "-o".as_ref(),
        "-".as_ref(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err, "");
    assert_eq!(out.matches("[[kernel]]").count(), 3, "{out}");
    for name in ["layernorm", "layernorm_tail", "layernorm_race"] {
        assert!(
            out.contains(&format!("entry = \"{name}\"\n")),
            "{name}: {out}"
        );
    }
    assert!(out.contains("params = [\"x\", \"y\", \"rows:i32\", \"cols:i32\", \"eps:f32\"]"));
    assert!(out.contains("# TODO: out or inout?"));
    assert!(
        out.contains(&format!("source = \"{}\"", example().display())),
        "{out}"
    );
}

#[test]
fn init_writes_beside_the_source_keeps_an_existing_file_and_check_names_the_first_todo() {
    let tmp = tempfile::tempdir().unwrap();
    let cu = tmp.path().join("layernorm.cu");
    std::fs::copy(example(), &cu).unwrap();
    let toml = tmp.path().join("layernorm.toml");
    let (code, out, err) = run(&["init".as_ref(), cu.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with(&format!(
            "wrote {}: 3 kernel(s), 24 \"TODO\"",
            toml.display()
        )),
        "{out}"
    );
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(text.contains("source = \"layernorm.cu\"\n"), "{text}");

    // An existing file is kept, unless --force.
    std::fs::write(&toml, "mine\n").unwrap();
    let (code, _, err) = run(&["init".as_ref(), cu.as_os_str()]);
    assert_eq!(code, Some(1));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("exists; klab init keeps it (pass --force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&toml).unwrap(), "mine\n");
    let (code, _, err) = run(&["init".as_ref(), cu.as_os_str(), "--force".as_ref()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&toml).unwrap(), text);

    // klab check on the unfilled skeleton: one line naming the first placeholder.
    let (code, _, err) = run(&["check".as_ref(), toml.as_os_str()]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("kernel[0].op.grid[0]: fill in TODO (written by klab init)"),
        "{err}"
    );
    // Filled in, it is a manifest klab loads (its source found beside it).
    std::fs::write(&toml, fill(&text)).unwrap();
    let m = klab_spec::manifest::load(&toml).unwrap();
    assert_eq!(m.kernels.len(), 3);
    assert!(m
        .kernels
        .iter()
        .all(|k| k.operation == klab_spec::declared::builtin::OpKind::Declared));

    // -o elsewhere: the source is named relative to the manifest's folder.
    std::fs::create_dir(tmp.path().join("sub")).unwrap();
    let other = tmp.path().join("sub/ln.toml");
    let (code, _, err) = run(&[
        "init".as_ref(),
        cu.as_os_str(),
        "-o".as_ref(),
        other.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let text = std::fs::read_to_string(&other).unwrap();
    assert!(text.contains("source = \"../layernorm.cu\"\n"), "{text}");
    std::fs::write(&other, fill(&text)).unwrap();
    assert_eq!(klab_spec::manifest::load(&other).unwrap().kernels.len(), 3);
}

#[test]
fn init_errors_are_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let none = tmp.path().join("none.cu");
    std::fs::write(
        &none,
        "// __global__ void k(float *x) {}\nint main() { return 0; }\n",
    )
    .unwrap();
    let missing = tmp.path().join("missing.cu");
    let nowhere = tmp.path().join("no/such/dir.toml");
    for (args, needle) in [
        (
            vec![none.into_os_string()],
            "none.cu: no __global__ function found",
        ),
        (vec![missing.into_os_string()], "cannot read"),
        (
            vec![
                example().into_os_string(),
                "-o".into(),
                nowhere.into_os_string(),
            ],
            "does not exist",
        ),
    ] {
        let mut a: Vec<&std::ffi::OsStr> = vec!["init".as_ref()];
        a.extend(args.iter().map(|x| x.as_os_str()));
        let (code, out, err) = run(&a);
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(out, "");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(!tmp.path().join("none.toml").exists());
}
