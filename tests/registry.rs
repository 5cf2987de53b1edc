//! The kernel registry and the child protocol from the command line, on any machine: what a
//! user types resolves to one kernel (or is refused in one line naming the alternatives),
//! user manifests keep their path from any folder, mutants stay inside the audit, and a
//! child's result line is for its parent only.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::klab;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/user")
}

fn one_error_line(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

#[test]
fn a_user_kernel_named_like_a_builtin_is_refused_naming_both() {
    let m = examples().join("mine.toml");
    for argv in [
        vec![
            "rounds".to_string(),
            format!("{}:tiled", m.display()),
            "padded".into(),
        ],
        // The whole manifest takes `tiled` in too.
        vec!["check".to_string(), m.display().to_string()],
    ] {
        let o = klab().args(&argv).output().unwrap();
        let err = one_error_line(&o);
        assert!(err.contains("transpose/tiled"), "{err}");
        assert!(err.contains(&m.display().to_string()), "{err}");
    }
}

#[test]
fn mutants_run_only_in_the_audit_and_unknown_names_get_suggestions() {
    let o = klab().args(["bench", "mut_wild_store"]).output().unwrap();
    assert!(one_error_line(&o).contains("only 'klab audit' runs them"));
    let o = klab().args(["check", "lean_64_cn"]).output().unwrap();
    let err = one_error_line(&o);
    assert!(
        err.contains("closest: lean_64_cm") && err.contains("'klab kernels'"),
        "{err}"
    );
    // The audit names its kernels before it opens a device.
    let o = klab()
        .args([
            "audit",
            "--only",
            "mut_wild_store,nosuch",
            "--tools",
            "none",
        ])
        .output()
        .unwrap();
    assert!(one_error_line(&o).contains("'nosuch' is not one of the audited kernels"));
    // Archived exploration kernels answer to their qualified name only.
    let o = klab().args(["bench", "strip64_k2"]).output().unwrap();
    assert!(one_error_line(&o).contains("archive/strip64_k2"));
}

#[test]
fn kernels_lists_the_namespaces_and_all_adds_archive_and_mutants() {
    let o = klab().arg("kernels").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0));
    for ns in ["transpose/", "triad/", "reduce/", "fast/"] {
        assert!(out.contains(ns), "{out}");
    }
    assert!(out.contains("fast/lean_64_cm") && out.contains("transpose"));
    let listed = |prefix: &str| out.lines().any(|l| l.trim_start().starts_with(prefix));
    assert!(!listed("archive/") && !listed("mutants/"), "{out}");
    let o = klab()
        .args(["kernels", "--all", "--json"])
        .output()
        .unwrap();
    let all: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"archive/strip64_k2"));
    assert!(names.contains(&"mutants/mut_wild_store"));
    assert!(names.contains(&"transpose/padded"));
}

#[test]
fn a_relative_manifest_path_with_spaces_resolves_from_its_own_folder() {
    let d = tempfile::tempdir().unwrap();
    let sub = d.path().join("my kernels");
    std::fs::create_dir_all(&sub).unwrap();
    for f in ["mine.toml", "mine.cu"] {
        std::fs::copy(examples().join(f), sub.join(f)).unwrap();
    }
    // Resolution succeeds (the only complaint, on a machine without a GPU, is the device).
    let o = klab()
        .current_dir(d.path())
        .args(["bench", "my kernels/mine.toml:my_naive"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(1) {
        assert!(
            !err.contains("manifest") && !err.contains("unknown kernel"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let o = klab()
        .current_dir(d.path())
        .args(["bench", "my kernels/mine.toml:nope*"])
        .output()
        .unwrap();
    let err = one_error_line(&o);
    assert!(err.contains("declares my_naive, my_tiled, tiled"), "{err}");
}

#[test]
fn a_file_named_like_a_builtin_in_the_current_folder_does_not_shadow_it() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("padded"), "not a manifest").unwrap();
    let o = klab()
        .current_dir(d.path())
        .args(["bench", "padded"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("manifest"), "{err}");
}

/// `klab __child`'s spec for `work` (one command's arguments as klab writes them), verifying
/// as klab does by default.
fn child_spec(work: &str) -> String {
    format!(r#"{{"work":{work},"policy":{{"checker":"device","paranoid":false,"mutant":null}}}}"#)
}

const PLAN_PADDED: &str = r#"{"check":{"kernels":["padded"],"seed":1,"sizes":null,"shape":[],"timeout":600,"verbose":false,"quick":false,"output":{"format":"human","json":false},"plan":true,"resume_after":0,"device":0}}"#;
const BENCH_NOPE: &str = r#"{"bench":{"kernel":"nope","n":null,"shape":null,"timing":{"regime":"same-buffer","timer":"per-launch","samples":200,"warmup":{"policy":"count","launches":20}},"rounds":1,"out":null,"claim":null,"timeout":600,"device":0,"output":{"format":"human","json":false}}}"#;

#[test]
fn a_child_says_its_result_in_the_file_its_parent_named_and_never_on_stdout() {
    // The runner sets both variables (the parent's pid and start time; 0: any start).
    let parent = format!("{}:0", std::process::id());
    let d = tempfile::tempdir().unwrap();
    let said = |name: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, "").unwrap();
        p
    };
    // A check's plan needs no GPU: it prints the plan, and its result goes to the file.
    let file = said("plan");
    let o = klab()
        .env("KLAB_CHILD", "1")
        .env("KLAB_PARENT", &parent)
        .arg("__child")
        .arg("--results-to")
        .arg(&file)
        .arg(child_spec(PLAN_PADDED))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("padded"), "{out}");
    assert!(!out.contains("klab-result"), "{out}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "klab-result: {\"result\":\"exit\",\"code\":0}\n"
    );
    let file = said("bench");
    let o = klab()
        .arg("__child")
        .arg("--results-to")
        .arg(&file)
        .arg(child_spec(BENCH_NOPE))
        .output()
        .unwrap();
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with(r#"klab-result: {"result":"error","message":"unknown kernel 'nope'"#),
        "{text}"
    );
    // A results file is its parent's to make: a child asked to write to one that is not
    // there says so and writes nothing.
    let gone = d.path().join("not-made");
    let o = klab()
        .arg("__child")
        .arg("--results-to")
        .arg(&gone)
        .arg(child_spec(PLAN_PADDED))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(!gone.exists());
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: --results-to: "));
    // A spec klab did not write: one line and exit 1, its result in the file.
    let file = said("garbled");
    let o = klab()
        .arg("__child")
        .arg("--results-to")
        .arg(&file)
        .arg("check padded")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: klab __child takes the work as JSON"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(std::fs::read_to_string(&file)
        .unwrap()
        .starts_with(r#"klab-result: {"result":"error""#));
    // Started by a person (a stray KLAB_CHILD in the environment or not), nothing is said.
    let o = klab().args(["bench", "nope"]).output().unwrap();
    assert!(o.stdout.is_empty());
    let o = klab()
        .env("KLAB_CHILD", "1")
        .args(["kernels", "--json"])
        .output()
        .unwrap();
    serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("plain JSON, no result line");
    // The child's work is not a public command's: the hidden flag it once was is gone.
    let o = klab()
        .args(["bench", "--in-process", "copy"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
}

/// A paced block's child checks its kernel before it waits for a turn: a kernel it cannot
/// time is said at once, with no turn given (its parent gives none until the block before
/// is done), and the driver is not what it speaks of.
#[test]
fn a_paced_child_refuses_its_kernel_before_any_turn() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("paced");
    std::fs::write(&file, "").unwrap();
    let paced = BENCH_NOPE.replacen(r#"{"bench":"#, r#"{"paced-bench":"#, 1);
    // Stdin is a pipe nothing is written to and that stays open: no turn ever comes.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_klab"))
        .arg("__child")
        .arg("--results-to")
        .arg(&file)
        .arg(child_spec(&paced))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "it waited for a turn"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with(r#"klab-result: {"result":"error","message":"unknown kernel 'nope'"#),
        "{text}"
    );
}
