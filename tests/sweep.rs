//! `klab sweep` without a GPU: the plan and its refusals, the job array, a task that finds
//! no device (its points recorded as errors, not dropped), `collect` of a folder with a
//! missing task, and the whole SLURM path against a real one-node SLURM on this machine
//! (`scripts/slurm-local`; the test command installs Debian's slurm-wlm and munge).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn klab(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = assert_cmd::Command::new(common::klab_bin());
    c.args(args).timeout(Duration::from_secs(120));
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn has_driver() -> bool {
    klab_cuda::probe::driver_present()
}

/// A test of the records made without a device skips, and says so, where there is one.
fn driver_here() -> bool {
    let here = has_driver();
    if here {
        eprintln!("SKIPPED: this machine has a CUDA driver; the no-device records are not made");
    }
    here
}

#[test]
fn bad_sweeps_are_one_line_and_exit_1_before_any_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let o = out.to_str().unwrap();
    for (args, says) in [
        (
            vec!["sweep", "copy", "--axis", "k=1,2", "--out", o],
            "'k' is not a size variable",
        ),
        (
            vec!["sweep", "copy", "--axis", "n=8:4:x2", "--out", o],
            "LO <= HI",
        ),
        (
            vec!["sweep", "copy", "--axis", "n=1:100000:+1", "--out", o],
            "more than 4096",
        ),
        (vec!["sweep", "copy", "--out", o], "needs a size axis"),
        (
            vec![
                "sweep", "copy", "--axis", "n=4", "--axis", "n=8", "--out", o,
            ],
            "given twice",
        ),
        (
            vec!["sweep", "nosuchkernel", "--axis", "n=4", "--out", o],
            "nosuchkernel",
        ),
        (
            vec![
                "sweep", "copy", "--axis", "n=4", "--rounds", "3", "--out", o,
            ],
            "at least two kernels",
        ),
        (
            vec![
                "sweep",
                "copy",
                "naive",
                "--axis",
                "n=4",
                "--baseline",
                "tiled",
                "--out",
                o,
            ],
            "baseline 'tiled'",
        ),
        (
            vec![
                "sweep",
                "copy",
                "--axis",
                "n=4",
                "--devices",
                "0,0",
                "--out",
                o,
            ],
            "listed twice",
        ),
        (
            vec![
                "sweep",
                "copy",
                "--axis",
                "n=4",
                "--devices",
                "0",
                "--slurm",
                "--out",
                o,
            ],
            "cannot be used with",
        ),
        (
            vec!["sweep", "copy", "--axis", "n=4", "--dry-run", "--out", o],
            "--slurm",
        ),
    ] {
        let r = klab(&args, &[]);
        let (_, err) = text(&r);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} made a folder");
    }
    if !has_driver() {
        // No GPU: a local sweep says so once, before a folder.
        for devices in [None, Some("all"), Some("0,1")] {
            let mut args = vec!["sweep", "copy", "--axis", "n=4", "--out", o];
            if let Some(d) = devices {
                args.extend(["--devices", d]);
            }
            let r = klab(&args, &[]);
            let (_, err) = text(&r);
            assert_eq!(r.status.code(), Some(1), "{err}");
            assert!(err.contains("no CUDA driver"), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(!out.exists());
        }
    }
}

#[test]
fn without_slurm_the_sweep_says_so_and_keeps_the_job_array() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    let s = dir.path().join("s");
    let r = klab(
        &[
            "sweep",
            "copy",
            "--axis",
            "n=32",
            "--slurm",
            "--out",
            s.to_str().unwrap(),
        ],
        &[("PATH", empty.to_str().unwrap())],
    );
    let (_, err) = text(&r);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("SLURM is not installed here (no sbatch on PATH)"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(s.join("sweep.sbatch").is_file() && s.join("sweep-plan.json").is_file());
}

/// `--slurm --dry-run` reports the script it wrote like any report: text for a person, and
/// one JSON value with the script in it for a program.
#[test]
fn a_slurm_dry_run_reports_its_script_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let args = |o: &str| {
        [
            "sweep",
            "copy",
            "--axis",
            "n=32,64",
            "--slurm",
            "--dry-run",
            "--gres",
            "none",
            "--out",
        ]
        .into_iter()
        .map(String::from)
        .chain([o.to_string()])
        .collect::<Vec<_>>()
    };
    let run = |extra: &[&str], o: &str| {
        let mut a = args(o);
        a.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = klab(&a, &[]);
        assert_eq!(r.status.code(), Some(0), "{:?}", text(&r));
        text(&r).0
    };
    let human = run(&[], &out("h"));
    assert!(human.starts_with("#!"), "{human}");
    assert!(human.contains("# written to "), "{human}");
    let json: serde_json::Value =
        serde_json::from_str(&run(&["--format", "json"], &out("j"))).unwrap();
    let script = json["script"].as_str().unwrap();
    assert!(script.contains("#SBATCH --array=0-1\n"), "{script}");
    assert_eq!(json["tasks"], 2);
    assert!(json["job_id"].is_null());
    let csv = run(&["--format", "csv"], &out("c"));
    assert!(csv.starts_with("field,value\n"), "{csv}");
}

#[test]
fn a_sweep_file_plans_the_same_as_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.toml");
    std::fs::write(
        &file,
        "kernels = [\"copy\", \"naive\"]\nbaseline = \"naive\"\nrounds = 2\n[axes]\nn = \"32:64:x2\"\nregime = [\"same-buffer\", \"l2-flushed\"]\n",
    )
    .unwrap();
    let plan_of = |args: &[&str], out: &Path| -> serde_json::Value {
        let mut a = args.to_vec();
        let o = out.to_str().unwrap();
        a.extend(["--slurm", "--dry-run", "--gres", "none", "--out", o]);
        let r = klab(&a, &[]);
        assert_eq!(r.status.code(), Some(0), "{:?}", text(&r));
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("sweep-plan.json")).unwrap()).unwrap();
        v["created_utc"] = serde_json::Value::Null;
        v
    };
    let f = plan_of(
        &["sweep", "--file", file.to_str().unwrap()],
        &dir.path().join("a"),
    );
    let c = plan_of(
        &[
            "sweep",
            "copy",
            "naive",
            "--baseline",
            "naive",
            "--rounds",
            "2",
            "--axis",
            "n=32,64",
            "--axis",
            "regime=same-buffer,l2-flushed",
        ],
        &dir.path().join("b"),
    );
    assert_eq!(f, c);
    assert_eq!(
        f["groups"].as_array().unwrap().len(),
        2,
        "a group per shape"
    );
    // The job array: one task per group, each running `klab sweep task DIR G`.
    let script = std::fs::read_to_string(dir.path().join("a/sweep.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --array=0-1\n"), "{script}");
    assert!(!script.contains("--gres"), "{script}");
    assert!(script.contains("sweep task"), "{script}");
    for g in 0..2 {
        assert!(dir.path().join(format!("a/tasks/{g}")).is_dir());
    }
    // A manifest the file names by a relative path is the one beside the file.
    let ops = dir.path().join("ops");
    std::fs::create_dir(&ops).unwrap();
    for f in std::fs::read_dir(root().join("examples/ops/gelu")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, ops.join(f.file_name().unwrap())).unwrap();
    }
    let beside = ops.join("sweep.toml");
    std::fs::write(
        &beside,
        "kernels = [\"gelu.toml:gelu\"]\n[axes]\nn = [1000]\n",
    )
    .unwrap();
    let plan = plan_of(
        &["sweep", "--file", beside.to_str().unwrap()],
        &dir.path().join("c"),
    );
    let spec = plan["kernels"][0]["spec"].as_str().unwrap().to_string();
    assert!(
        spec.starts_with(ops.to_str().unwrap()) && spec.ends_with("gelu.toml:gelu"),
        "{spec}"
    );
    // An operation with several size variables is swept by them, their product.
    let gemm = format!(
        "{}:gemm",
        root().join("examples/ops/gemm/gemm.toml").display()
    );
    let plan = plan_of(
        &[
            "sweep", &gemm, "--axis", "M=64,128", "--axis", "N=64", "--axis", "K=16,17",
        ],
        &dir.path().join("d"),
    );
    let shapes: Vec<String> = plan["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["shape"].to_string())
        .collect();
    assert_eq!(
        shapes,
        [
            r#"{"K":16,"M":64,"N":64}"#,
            r#"{"K":17,"M":64,"N":64}"#,
            r#"{"K":16,"M":128,"N":64}"#,
            r#"{"K":17,"M":128,"N":64}"#
        ]
    );
    let e_out = dir.path().join("e");
    for (axes, says) in [
        (vec!["--axis", "M=64", "--axis", "K=16"], "give N too"),
        (vec!["--axis", "n=64"], "sweep this one by its variables"),
    ] {
        let mut a = vec!["sweep", gemm.as_str()];
        a.extend(axes);
        a.extend(["--out", e_out.to_str().unwrap()]);
        let r = klab(&a, &[]);
        assert_eq!(r.status.code(), Some(1), "{:?}", text(&r));
        assert!(text(&r).1.contains(says), "{:?}", text(&r));
        assert!(!e_out.exists());
    }
    // A sweep file with an unknown field is refused in one line.
    std::fs::write(&file, "kernels = [\"copy\"]\nrepeat = 3\n[axes]\nn = [4]\n").unwrap();
    let r = klab(&["sweep", "--file", file.to_str().unwrap()], &[]);
    let (_, err) = text(&r);
    assert_eq!(r.status.code(), Some(1));
    assert!(err.contains("unknown field `repeat`"), "{err}");
}

#[test]
fn a_task_without_a_device_records_its_points_and_collect_names_the_missing_task() {
    if driver_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let so = s.to_str().unwrap();
    let r = klab(
        &[
            "sweep",
            "copy",
            "naive",
            "--axis",
            "n=32,33",
            "--baseline",
            "naive",
            "--slurm",
            "--dry-run",
            "--out",
            so,
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(0), "{:?}", text(&r));
    let r = klab(&["sweep", "task", so, "0"], &[]);
    let (out, err) = text(&r);
    assert_eq!(r.status.code(), Some(1), "{out}{err}");
    // Its line is a log line, on stderr (a SLURM job log takes both).
    assert!(
        err.contains("klab sweep task: group 0 (n=32, same-buffer) on device 0: 0/2 passed"),
        "{err}"
    );
    // Run again (a requeued task): a fresh attempt folder, the record replaced.
    let r = klab(&["sweep", "task", so, "0"], &[]);
    assert_eq!(r.status.code(), Some(1), "{:?}", text(&r));
    assert!(s.join("tasks/0/run-01/sweep-task.log").is_file());
    assert!(s.join("tasks/0/run-02/sweep-task.log").is_file());
    let r = klab(&["sweep", "task", so, "7"], &[]);
    assert!(text(&r).1.contains("there is no group 7"), "{:?}", text(&r));
    let r = klab(&["sweep", "collect", so], &[]);
    let (out, _) = text(&r);
    assert_eq!(r.status.code(), Some(1), "{out}");
    assert!(
        out.contains("MISSING: task 1 (n=33, same-buffer) left no record"),
        "{out}"
    );
    let csv = std::fs::read_to_string(s.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert_eq!(csv.matches(",error,").count(), 2, "{csv}");
    assert_eq!(csv.matches(",not-run,").count(), 2, "{csv}");
    assert!(csv.contains("no CUDA driver"), "{csv}");
    let page = std::fs::read_to_string(s.join("report/index.html")).unwrap();
    assert!(
        page.contains("left no record"),
        "the report names the missing task"
    );
    assert!(s.join("report/plots/sweep-bandwidth.svg").is_file());
    // Collect twice: the same bytes (the report is a function of the records).
    let before = std::fs::read(s.join("report/index.html")).unwrap();
    klab(&["sweep", "collect", so], &[]);
    assert_eq!(std::fs::read(s.join("report/index.html")).unwrap(), before);
    // A record whose receipt lies outside the folder, or is no receipt, is refused.
    std::fs::write(dir.path().join("outside.json"), "{}").unwrap();
    std::fs::write(s.join("tasks/0/fake.json"), "{\"schema\": 1}").unwrap();
    let rec_path = s.join("tasks/0/group.json");
    let mut rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&rec_path).unwrap()).unwrap();
    for (i, receipt) in ["../outside.json", "tasks/0/fake.json"].iter().enumerate() {
        rec["points"][i]["status"] = "passed".into();
        rec["points"][i]["receipt"] = (*receipt).into();
    }
    std::fs::write(&rec_path, serde_json::to_vec(&rec).unwrap()).unwrap();
    let r = klab(&["sweep", "collect", so], &[]);
    let (out, _) = text(&r);
    assert_eq!(r.status.code(), Some(1), "{out}");
    assert_eq!(out.matches("its receipt was refused").count(), 2, "{out}");
    // Refused for where it is, before anything reads it.
    assert!(out.contains("leads out of"), "{out}");
    assert!(!out.contains(" passed "), "{out}");
    // A record is the plan's: a kernel the plan lacks, or a point given twice, makes the
    // task's record refused (the task is then missing), and its words reach the terminal
    // without their control characters.
    let clean: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&rec_path).unwrap()).unwrap();
    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit); 2] = [
        ("which the plan does not have", |r| {
            r["points"][0]["kernel"] = "other".into()
        }),
        ("a second time", |r| {
            let first = r["points"][0].clone();
            r["points"].as_array_mut().unwrap().push(first);
        }),
    ];
    for (says, edit) in edits {
        let mut rec = clean.clone();
        edit(&mut rec);
        std::fs::write(&rec_path, serde_json::to_vec(&rec).unwrap()).unwrap();
        let r = klab(&["sweep", "collect", so], &[]);
        let (out, _) = text(&r);
        assert_eq!(r.status.code(), Some(1), "{out}");
        assert!(
            out.contains(says) && out.contains("MISSING: task 0"),
            "{says}: {out}"
        );
    }
    let mut rec = clean.clone();
    rec["points"][0]["detail"] = "\u{1b}[2J\u{1b}]0;owned\u{7}gone".into();
    std::fs::write(&rec_path, serde_json::to_vec(&rec).unwrap()).unwrap();
    let r = klab(&["sweep", "collect", so], &[]);
    let (out, err) = text(&r);
    assert!(
        !out.contains('\u{1b}') && !err.contains('\u{1b}'),
        "{out:?}"
    );
    // Not a sweep folder.
    let r = klab(&["sweep", "collect", dir.path().to_str().unwrap()], &[]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        text(&r).1.contains("is this a klab sweep folder?"),
        "{:?}",
        text(&r)
    );
}

/// A sweep task's groups without a device: a several-variable operation reaches its check
/// as --shape, and two regimes at one shape make one group whose kernel is checked once.
#[test]
fn a_task_checks_by_shape_and_once_per_group_without_a_device() {
    if driver_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A group of a several-variable operation reaches its check as --shape.
    let g = dir.path().join("g");
    let gemm = format!(
        "{}:gemm",
        root().join("examples/ops/gemm/gemm.toml").display()
    );
    let r = klab(
        &[
            "sweep",
            &gemm,
            "--axis",
            "M=64",
            "--axis",
            "N=64",
            "--axis",
            "K=16",
            "--slurm",
            "--dry-run",
            "--out",
            g.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(0), "{:?}", text(&r));
    let r = klab(&["sweep", "task", g.to_str().unwrap(), "0"], &[]);
    assert_eq!(r.status.code(), Some(1), "{:?}", text(&r));
    let rec = std::fs::read_to_string(g.join("tasks/0/group.json")).unwrap();
    assert!(rec.contains("no CUDA driver"), "{rec}");
    let log = std::fs::read_to_string(g.join("tasks/0/run-01/sweep-task.log")).unwrap();
    assert!(log.contains(r#""shape":["K=16,M=64,N=64"]"#), "{log}");
    // Two regimes at one shape: one group, each kernel checked once, a point per regime.
    let two = dir.path().join("two");
    let r = klab(
        &[
            "sweep",
            "copy",
            "--axis",
            "n=32",
            "--axis",
            "regime=same-buffer,l2-flushed",
            "--slurm",
            "--dry-run",
            "--out",
            two.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(0), "{:?}", text(&r));
    klab(&["sweep", "task", two.to_str().unwrap(), "0"], &[]);
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(two.join("tasks/0/group.json")).unwrap()).unwrap();
    let regimes: Vec<&str> = rec["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["regime"].as_str().unwrap())
        .collect();
    assert_eq!(regimes, ["same-buffer", "l2-flushed"]);
    let log = std::fs::read_to_string(two.join("tasks/0/run-01/sweep-task.log")).unwrap();
    assert_eq!(
        log.matches(r#"$ klab __child '{"work":{"check""#).count(),
        1,
        "{log}"
    );
}

/// The local SLURM's daemons, stopped when the test ends however it ends.
struct Slurm {
    state: PathBuf,
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(root().join("scripts/slurm-local"))
            .arg("stop")
            .arg(&self.state)
            .status();
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tool(name: &str) -> bool {
    ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"]
        .iter()
        .any(|d| Path::new(d).join(name).is_file())
}

#[test]
fn a_sweep_runs_as_a_slurm_job_array_and_collect_reports_the_cancelled_task() {
    let test = "a_sweep_runs_as_a_slurm_job_array_and_collect_reports_the_cancelled_task";
    let required = std::env::var_os("KLAB_REQUIRE_SLURM").is_some();
    if !["sbatch", "slurmctld", "slurmd", "munged"]
        .iter()
        .all(|t| tool(t))
    {
        if required {
            panic!(
                "{test}: KLAB_REQUIRE_SLURM is set but SLURM (slurm-wlm, munge) is not installed"
            );
        }
        eprintln!("SKIPPED {test}: SLURM is not installed (apt-get install slurm-wlm munge)");
        return;
    }
    if has_driver() {
        eprintln!("SKIPPED {test}: the tasks here would use the GPU; this test wants points that need none");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("slurm");
    let started = Command::new("bash")
        .arg(root().join("scripts/slurm-local"))
        .arg("start")
        .arg(&state)
        .output()
        .unwrap();
    let _slurm = Slurm {
        state: state.clone(),
    };
    assert!(
        started.status.success(),
        "{test}: the local SLURM did not start: {}{}",
        String::from_utf8_lossy(&started.stdout),
        String::from_utf8_lossy(&started.stderr)
    );
    let conf = state.join("slurm.conf");
    let conf = conf.to_str().unwrap();
    let client = |args: &[&str]| -> String {
        let o = Command::new(args[0])
            .args(&args[1..])
            .env("SLURM_CONF", conf)
            .env(
                "PATH",
                format!("{}:/usr/sbin", std::env::var("PATH").unwrap_or_default()),
            )
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    let s = dir.path().join("sweep");
    let so = s.to_str().unwrap();
    // Held at submission, so that one task can be cancelled before it runs.
    let r = klab(
        &[
            "sweep",
            "copy",
            "naive",
            "--axis",
            "n=32,33,65",
            "--baseline",
            "naive",
            "--slurm",
            "--gres",
            "none",
            "--out",
            so,
        ],
        &[("SLURM_CONF", conf), ("SBATCH_HOLD", "1")],
    );
    let (out, err) = text(&r);
    assert_eq!(r.status.code(), Some(0), "{out}{err}");
    let job = std::fs::read_to_string(s.join("slurm-job.txt"))
        .unwrap()
        .trim()
        .to_string();
    assert!(
        out.contains(&format!("submitted SLURM job {job}: 3 array tasks")),
        "{out}"
    );
    client(&["scancel", &format!("{job}_2")]);
    client(&["scontrol", "release", &job]);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let q = client(&["squeue", "-h", "-j", &job, "-t", "PD,R,CG"]);
        if q.trim().is_empty() || q.contains("Invalid job id") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{test}: the job did not finish: {q}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let r = klab(&["sweep", "collect", so], &[]);
    let (out, err) = text(&r);
    assert_eq!(r.status.code(), Some(1), "{out}{err}");
    assert!(
        out.contains("MISSING: task 2 (n=65, same-buffer) left no record"),
        "{out}"
    );
    assert!(
        !out.contains("MISSING: task 0") && !out.contains("MISSING: task 1"),
        "{out}"
    );
    // The tasks that ran recorded their points as failed (no device), not dropped.
    for g in 0..2 {
        let rec = std::fs::read_to_string(s.join(format!("tasks/{g}/group.json"))).unwrap();
        assert!(rec.contains("no CUDA driver"), "{rec}");
        let log = std::fs::read_dir(s.join(format!("tasks/{g}")))
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().starts_with("slurm-"));
        assert!(log, "task {g} has its SLURM output file");
    }
    let csv = std::fs::read_to_string(s.join("sweep.csv")).unwrap();
    assert_eq!(csv.matches(",error,").count(), 4, "{csv}");
    assert_eq!(csv.matches(",not-run,").count(), 2, "{csv}");
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Collect with real receipts: a rounds folder of the H200 (evidence/2026-11-30-timing) in
/// a group's attempt folder passes the re-check; one raw sample changed is refused.
#[test]
fn collect_keeps_real_receipts_and_refuses_a_changed_one() {
    if driver_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let so = s.to_str().unwrap();
    let r = klab(
        &[
            "sweep",
            "tiled",
            "padded",
            "--axis",
            "n=4096",
            "--baseline",
            "tiled",
            "--rounds",
            "2",
            // The receipts below were timed buffer-rotated; a point is held to its regime.
            "--regime",
            "buffer-rotated",
            "--slurm",
            "--dry-run",
            "--out",
            so,
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(0), "{:?}", text(&r));
    // The task runs (no device: its points are errors), then its record is given the
    // numbers a GPU run would have written, from the real receipts put where it would have.
    klab(&["sweep", "task", so, "0"], &[]);
    copy_tree(
        &root().join("evidence/2026-11-30-timing/transpose-rotated"),
        &s.join("tasks/0/run-01/buffer-rotated/rounds"),
    );
    // Those receipts predate the integrity section, which a sweep's points must have (as
    // compare requires): given one, as a receipt of today's engine carries.
    for k in ["tiled", "padded"] {
        common::add_integrity(&s.join(format!(
            "tasks/0/run-01/buffer-rotated/rounds/{k}.receipt.json"
        )));
    }
    let rec_path = s.join("tasks/0/group.json");
    let mut rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&rec_path).unwrap()).unwrap();
    for p in rec["points"].as_array_mut().unwrap() {
        let kernel = p["kernel"].as_str().unwrap().to_string();
        let receipt: serde_json::Value = serde_json::from_slice(
            &std::fs::read(s.join(format!(
                "tasks/0/run-01/buffer-rotated/rounds/{kernel}.receipt.json"
            )))
            .unwrap(),
        )
        .unwrap();
        p["status"] = "passed".into();
        p["detail"] = "2 rounds".into();
        p["receipt"] = format!("tasks/0/run-01/buffer-rotated/rounds/{kernel}.receipt.json").into();
        p["gb_s"] = receipt["result"]["useful_gb_s"].clone();
        p["median_us"] = receipt["result"]["median_us"].clone();
        p["gpu_uuid"] = receipt["hardware"]["gpu_uuid"].clone();
        p["ratio_to_baseline"] = receipt["result"]["rounds"]["ratio_to_baseline"].clone();
    }
    std::fs::write(&rec_path, serde_json::to_vec(&rec).unwrap()).unwrap();
    let r = klab(&["sweep", "collect", so], &[]);
    let (out, err) = text(&r);
    assert_eq!(r.status.code(), Some(0), "{out}{err}");
    assert_eq!(out.matches(" passed ").count(), 2, "{out}");
    let honest = out.clone();

    // The record is not hashed, so none of its figures is taken: a ratio written into it
    // is replaced by the receipt's, a passed point without a receipt is an error, and a
    // point naming another kernel's receipt is refused.
    let forge = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut forged = rec.clone();
        edit(&mut forged["points"]);
        std::fs::write(&rec_path, serde_json::to_vec(&forged).unwrap()).unwrap();
        let r = klab(&["sweep", "collect", so], &[]);
        text(&r).0
    };
    let out = forge(&|p| {
        p[1]["ratio_to_baseline"] = 3.0.into();
        p[1]["ratio_interval"] = serde_json::json!([2.9, 3.1]);
        p[1]["gb_s"] = 99999.0.into();
    });
    assert_eq!(out, honest, "a forged record's figures were shown");
    let out = forge(&|p| p[1]["receipt"] = serde_json::Value::Null);
    assert!(
        out.contains("the point says it passed but names no receipt"),
        "{out}"
    );
    let out = forge(&|p| {
        p[1]["receipt"] = "tasks/0/run-01/buffer-rotated/rounds/tiled.receipt.json".into()
    });
    assert!(
        out.contains("is not where the sweep writes padded's receipt of group 0"),
        "{out}"
    );
    // Nor through `..` or a link to another folder, though the file is the same.
    let out = forge(&|p| {
        p[1]["receipt"] =
            "tasks/0/run-01/buffer-rotated/rounds/../rounds/padded.receipt.json".into()
    });
    assert!(out.contains("is not where the sweep writes"), "{out}");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(s.join("tasks/0/run-01"), s.join("tasks/0/run-02")).unwrap();
        let out = forge(&|p| {
            p[1]["receipt"] = "tasks/0/run-02/buffer-rotated/rounds/padded.receipt.json".into()
        });
        assert!(out.contains("is not where the sweep writes"), "{out}");
        std::fs::remove_file(s.join("tasks/0/run-02")).unwrap();
    }
    std::fs::write(&rec_path, serde_json::to_vec(&rec).unwrap()).unwrap();
    // The same table as CSV (sweep.csv's own rows) and as one JSON value (sweep.json's).
    let r = klab(&["sweep", "collect", so, "--format", "csv"], &[]);
    let (csv, _) = text(&r);
    assert_eq!(r.status.code(), Some(0));
    assert_eq!(csv, std::fs::read_to_string(s.join("sweep.csv")).unwrap());
    let r = klab(&["sweep", "collect", so, "--json"], &[]);
    let value: serde_json::Value = serde_json::from_str(&text(&r).0).unwrap();
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(value["points"], file["points"]);
    assert_eq!(value["points"].as_array().unwrap().len(), 2);
    let page = std::fs::read_to_string(s.join("report/index.html")).unwrap();
    assert!(page.contains("GPU-96453395"), "the report names the GPU");
    let bw = std::fs::read_to_string(s.join("report/plots/sweep-bandwidth.svg")).unwrap();
    assert!(
        bw.contains("padded") && bw.contains("tiled"),
        "both kernels drawn"
    );
    // One raw sample of one block changed: that receipt no longer matches its bytes.
    let block =
        s.join("tasks/0/run-01/buffer-rotated/rounds/blocks/r01-p0-tiled/samples-r01-p0.csv");
    let csv = std::fs::read_to_string(&block).unwrap();
    let changed = csv.replacen(",0,", ",1,", 1);
    assert_ne!(changed, csv);
    std::fs::write(&block, changed).unwrap();
    let r = klab(&["sweep", "collect", so], &[]);
    let (out, _) = text(&r);
    assert_eq!(r.status.code(), Some(1), "{out}");
    assert!(out.contains("its receipt was refused"), "{out}");
    assert_eq!(out.matches(" passed ").count(), 1, "{out}");
}

/// `--resolve` travels in the plan to every point's rounds (a SLURM task reads it there),
/// and is refused in one line where its rounds could not start.
#[test]
fn a_resolved_sweep_keeps_its_target_in_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let so = s.to_str().unwrap();
    let base = [
        "sweep",
        "copy",
        "naive",
        "--axis",
        "n=64",
        "--slurm",
        "--dry-run",
    ];
    let r = klab(
        &[
            &base[..],
            &[
                "--rounds",
                "6",
                "--resolve",
                "1%",
                "--budget",
                "30s",
                "--out",
                so,
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(r.status.code(), Some(0), "{:?}", text(&r));
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.join("sweep-plan.json")).unwrap()).unwrap();
    assert_eq!(plan["resolve"]["target"], 0.01);
    assert_eq!(plan["resolve"]["budget_s"], 30.0);
    for (extra, says) in [
        (&["--rounds", "5", "--resolve", "1"][..], "at least 6"),
        (&["--resolve", "1"][..], "at least 6"),
        (&["--rounds", "5", "--resolve", "100%"][..], "below 100%"),
        (&["--rounds", "5", "--budget", "30"][..], "--resolve"),
    ] {
        let out = dir.path().join("refused");
        let r = klab(
            &[&base[..], extra, &["--out", out.to_str().unwrap()]].concat(),
            &[],
        );
        let (_, err) = text(&r);
        assert_eq!(r.status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
        assert!(!out.exists(), "{extra:?} made its folder");
    }
}
