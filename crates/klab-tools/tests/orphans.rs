//! No orphans: a child started through klab's runner dies with klab, whether klab is
//! stopped by SIGTERM (the signal handler kills the child's whole process group, even a
//! member that ignores SIGTERM) or by SIGKILL (the child was started with PDEATHSIG).
//! `hold_child` (an example of this crate) stands in for a klab command.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn hold_child() -> PathBuf {
    // target/<profile>/deps/orphans-HASH -> target/<profile>/examples/hold_child
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let p = dir.join("examples").join("hold_child");
    assert!(p.is_file(), "{} not built", p.display());
    p
}

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

fn gone_within(pid: i32, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Start hold_child over `script`, which prints the pids to watch, one per line, then blocks.
fn start(script: &str, pids: usize) -> (std::process::Child, Vec<i32>) {
    let mut holder = Command::new(hold_child())
        .args(["/bin/sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    let mut v = Vec::new();
    for _ in 0..pids {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        v.push(line.trim().parse::<i32>().expect("a pid"));
    }
    for &p in &v {
        assert!(alive(p), "{p} should be running");
    }
    (holder, v)
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

#[test]
fn sigterm_kills_the_whole_group_even_a_child_that_ignores_it() {
    // The shell ignores TERM; its background sleep is a grandchild in the same group.
    let (mut holder, pids) = start(
        "trap '' TERM; sleep 300 & echo $!; echo $$; wait; sleep 300",
        2,
    );
    signal(holder.id(), "-TERM");
    let status = holder.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let mut err = String::new();
    std::io::Read::read_to_string(holder.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("klab: stopped by SIGTERM"), "{err}");
    for p in pids {
        assert!(gone_within(p, Duration::from_secs(5)), "{p} outlived klab");
    }
}

/// A daemon the child started in a session of its own is out of the group the handler
/// kills; it carries the run's KLAB_TREE, and the handler ends it too.
#[test]
fn a_signal_ends_a_daemon_that_left_the_childs_process_group() {
    let Ok(setsid) = which("setsid") else {
        eprintln!("SKIPPED: no setsid binary here");
        return;
    };
    for sig in ["-TERM", "-INT"] {
        let script =
            format!("{setsid} sleep 301 </dev/null >/dev/null 2>&1 & echo $!; wait; sleep 300");
        let (mut holder, pids) = start(&script, 1);
        signal(holder.id(), sig);
        assert_eq!(holder.wait().unwrap().code(), Some(1), "{sig}");
        assert!(
            gone_within(pids[0], Duration::from_secs(5)),
            "{sig}: the setsid daemon {} outlived klab",
            pids[0]
        );
    }
}

fn which(name: &str) -> Result<String, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
        .ok_or(())
}

#[test]
fn sigkill_of_the_parent_still_ends_the_child() {
    // `exec` makes the sleeper the direct child, which PDEATHSIG covers.
    let (mut holder, pids) = start("trap '' TERM; echo $$; exec sleep 300", 1);
    signal(holder.id(), "-KILL");
    holder.wait().unwrap();
    assert!(
        gone_within(pids[0], Duration::from_secs(5)),
        "the child outlived a SIGKILLed parent"
    );
}

#[test]
fn sigint_and_sighup_are_handled_like_sigterm() {
    for sig in ["-INT", "-HUP"] {
        let (mut holder, pids) = start("echo $$; exec sleep 300", 1);
        signal(holder.id(), sig);
        assert_eq!(holder.wait().unwrap().code(), Some(1), "{sig}");
        assert!(gone_within(pids[0], Duration::from_secs(5)), "{sig}");
    }
}

#[test]
fn a_klab_behind_a_launcher_that_outlives_the_tool_still_dies_with_klab() {
    // holder -> sh (direct child, group leader: the tool) -> a launcher in the same group
    // (survives the tool, like compute-sanitizer's subreaper) -> a klab child. SIGKILL of the
    // holder ends sh by PDEATHSIG; the launcher lives on, so the inner klab must notice the
    // holder is gone and take the group down.
    let inner = format!("{} --as-child", hold_child().display());
    let script = format!("sh -c 'echo $$; {inner} & wait' & wait");
    let (mut holder, pids) = start(&script, 2);
    signal(holder.id(), "-KILL");
    holder.wait().unwrap();
    for p in pids {
        assert!(
            gone_within(p, Duration::from_secs(5)),
            "{p} outlived a SIGKILLed klab behind a launcher"
        );
    }
}

/// SIGKILL of the top klab: the klab it started dies by PDEATHSIG, and takes with it what
/// its own child started (a reference's shell and the `sleep` in that shell's group), where
/// a PDEATHSIG of SIGKILL used to leave that `sleep` running.
#[test]
fn sigkill_of_the_top_klab_ends_what_its_klab_child_started() {
    let inner = format!(
        "{} --as-child /bin/sh -c 'sleep 303 & echo $!; wait'",
        hold_child().display()
    );
    let (mut holder, pids) = start(&format!("exec {inner}"), 1);
    signal(holder.id(), "-KILL");
    holder.wait().unwrap();
    assert!(
        gone_within(pids[0], Duration::from_secs(5)),
        "the sleep {} outlived a SIGKILLed klab two levels up",
        pids[0]
    );
}

#[test]
fn a_stray_parent_variable_never_kills_the_callers_group() {
    // A shell that exported klab's variables by mistake: the klab under it says why it
    // stops, exits 1, and the shell (same process group) carries on.
    let script = format!(
        "KLAB_CHILD=1 KLAB_PARENT=999999:5 {} --as-child; echo \"exit $?\"; echo survived",
        hold_child().display()
    );
    // Its own group, so that a regression kills only this shell (and fails the test)
    // rather than the test harness.
    use std::os::unix::process::CommandExt;
    let o = Command::new("/bin/sh")
        .args(["-c", &script])
        .process_group(0)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("exit 1") && out.contains("survived"), "{out}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is gone; exiting"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Start `holder` with its output piped, and read the pid its program prints first.
fn holding(holder: &mut Command) -> (std::process::Child, i32) {
    let mut holder = holder
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (holder, line.trim().parse().expect("a pid"))
}

/// Run hold_child with `path` registered for removal on a signal, over a shell that prints
/// its pid and sleeps; end the holder with `sig`. Whether `path` is gone, and the shell.
fn removed_after(sig: &str, path: &std::path::Path) -> bool {
    let (mut holder, pid) = holding(
        Command::new(hold_child())
            .arg("--remove-on-signal")
            .arg(path)
            .args(["/bin/sh", "-c", "echo $$; sleep 300"]),
    );
    assert!(path.exists());
    signal(holder.id(), sig);
    holder.wait().unwrap();
    assert!(
        gone_within(pid, Duration::from_secs(5)),
        "{sig}: {pid} outlived the holder"
    );
    !path.exists()
}

/// A parent's results file for its child is removed when a signal ends the parent (its
/// owner's drop never runs then): it is not left in the temporary folder.
#[test]
fn a_file_registered_for_removal_is_gone_after_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("klab-results-x");
    std::fs::write(&file, "").unwrap();
    assert!(
        removed_after("-TERM", &file),
        "{} is left behind",
        file.display()
    );
}

/// A folder registered for removal goes with the files in it (a command reference's call
/// folder, which its owner's drop would have removed).
#[test]
fn a_folder_registered_for_removal_is_gone_after_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let call = dir.path().join("klab-ref-x");
    std::fs::create_dir(&call).unwrap();
    for i in 0..300 {
        std::fs::write(call.join(format!("file-{i}.npy")), "x").unwrap();
    }
    std::fs::create_dir(call.join("empty")).unwrap();
    assert!(
        removed_after("-INT", &call),
        "{} is left behind",
        call.display()
    );
}

/// SIGINT of the top klab while a klab it started holds a folder (a check child's command
/// reference's call folder): the child gets SIGTERM and a moment first, and its own handler
/// removes the folder, where an immediate SIGKILL of its group left it behind.
#[test]
fn a_klab_childs_folder_is_removed_when_the_top_klab_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let call = dir.path().join("klab-ref-child");
    std::fs::create_dir(&call).unwrap();
    std::fs::write(call.join("x.npy"), "x").unwrap();
    let (mut holder, pid) = holding(
        Command::new(hold_child())
            .arg(hold_child())
            .arg("--as-child")
            .arg("--remove-on-signal")
            .arg(&call)
            .args(["/bin/sh", "-c", "echo $$; sleep 300"]),
    );
    let t0 = Instant::now();
    signal(holder.id(), "-INT");
    assert_eq!(holder.wait().unwrap().code(), Some(1));
    // The child ended on SIGTERM: no wait for the grace.
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    assert!(
        gone_within(pid, Duration::from_secs(5)),
        "{pid} outlived klab"
    );
    assert!(!call.exists(), "{} is left behind", call.display());
}

/// The same with a launcher leading the klab child's group (as compute-sanitizer does) that
/// ends at once on SIGTERM, and a grandchild that ignores it: the top klab waits for every
/// member of the group, not only its leader, so the child's handler still removes the folder.
#[test]
fn a_klab_childs_folder_is_removed_when_a_launcher_leads_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let call = dir.path().join("klab-ref-child");
    std::fs::create_dir(&call).unwrap();
    let h = hold_child();
    let launcher = format!(
        "{} --as-child --remove-on-signal {} /bin/sh -c 'trap \"\" TERM; echo $$; exec sleep 300'; true",
        h.display(),
        call.display()
    );
    let (mut holder, pid) = holding(Command::new(&h).args(["/bin/sh", "-c", &launcher]));
    signal(holder.id(), "-INT");
    assert_eq!(holder.wait().unwrap().code(), Some(1));
    assert!(
        gone_within(pid, Duration::from_secs(5)),
        "{pid} outlived klab"
    );
    assert!(!call.exists(), "{} is left behind", call.display());
}
