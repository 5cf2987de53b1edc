//! Running an external tool as a child process: an argument vector (never a shell), both
//! pipes read concurrently, and a watchdog that kills the whole process group at the
//! deadline. Shared by the Compute Sanitizer and Nsight Compute drivers.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

/// How often the watchdog looks at the child.
const POLL: Duration = Duration::from_millis(10);
/// After the child exits, how long to wait for the pipes to close (a grandchild that
/// outlives it can hold them open).
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// The longest piece one read hands over, so an endless line cannot grow without bound
/// before it is merged.
const CHUNK: u64 = 64 * 1024;

/// What a finished (or killed) child left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The exit code; `None` when the process was killed by a signal (including the
    /// watchdog).
    pub exit_code: Option<i32>,
    /// The signal that ended the process (Unix), if any.
    pub signal: Option<i32>,
    /// The watchdog killed the process group at the deadline.
    pub timed_out: bool,
    /// Everything written to stdout.
    pub stdout: Vec<u8>,
    /// Everything written to stderr.
    pub stderr: Vec<u8>,
    /// stdout and stderr merged line by line in arrival order (like `2>&1`).
    pub merged: Vec<u8>,
    /// The pipes were still open [`DRAIN_GRACE`] after the process exited, so the output
    /// may be cut short.
    pub incomplete: bool,
}

/// Why a child could not be run at all. A child that ran and failed is not an error: it is
/// a [`Captured`] with its status.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The binary could not be started (missing, not executable, ...).
    #[error("cannot start {}: {source}", .program.display())]
    Spawn {
        /// The binary as given.
        program: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Waiting for the child failed.
    #[error("waiting for {}: {source}", .program.display())]
    Wait {
        /// The binary as given.
        program: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

enum Msg {
    Chunk(u8, Vec<u8>),
    Done,
}

/// Run `program` with `args` (no shell), stdin from `/dev/null`, capturing stdout and
/// stderr, and kill it and everything it started if it runs past `timeout`.
///
/// The child runs in its own process group (Unix) so the watchdog can also kill what it
/// launched (the application under a profiler or sanitizer). Only a binary that cannot be
/// started, or a failed wait, is an `Err`; the error names the binary.
pub fn run_captured(
    program: &Path,
    args: &[OsString],
    timeout: Duration,
) -> Result<Captured, ProcessError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
        program: program.to_path_buf(),
        source,
    })?;

    let (tx, rx) = mpsc::channel();
    let mut open = 0usize;
    if let Some(out) = child.stdout.take() {
        spawn_reader(0, out, tx.clone());
        open += 1;
    }
    if let Some(err) = child.stderr.take() {
        spawn_reader(1, err, tx.clone());
        open += 1;
    }
    drop(tx);

    let mut streams = Streams::default();
    let deadline = Instant::now().checked_add(timeout);
    let mut timed_out = false;
    let wait_err = |source| ProcessError::Wait {
        program: program.to_path_buf(),
        source,
    };

    let status: ExitStatus = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => {
                kill_tree(&mut child);
                let _ = child.wait();
                return Err(wait_err(e));
            }
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            kill_tree(&mut child);
            match child.wait() {
                Ok(st) => break st,
                Err(e) => return Err(wait_err(e)),
            }
        }
        let step = deadline.map_or(POLL, |d| d.saturating_duration_since(now).min(POLL));
        if open == 0 {
            thread::sleep(step);
            continue;
        }
        match rx.recv_timeout(step) {
            Ok(Msg::Chunk(stream, bytes)) => streams.push(stream, bytes),
            Ok(Msg::Done) => open -= 1,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = 0,
        }
    };

    // The child is gone; collect what is left in the pipes.
    let grace = Instant::now() + DRAIN_GRACE;
    while open > 0 {
        let left = grace.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left) {
            Ok(Msg::Chunk(stream, bytes)) => streams.push(stream, bytes),
            Ok(Msg::Done) => open -= 1,
            Err(_) => break,
        }
    }

    Ok(Captured {
        exit_code: status.code(),
        signal: signal_of(&status),
        timed_out,
        stdout: streams.stdout,
        stderr: streams.stderr,
        merged: streams.merged,
        incomplete: open > 0,
    })
}

/// A duration as a person reads it: `1.5 s` from a second up, `250 ms` below.
pub fn describe_duration(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Find a tool's binary: `explicit` if given (returned as is, even if it does not exist, so
/// that starting it fails with an error naming it), else the first executable `name` in the
/// directories of `path_var` (a `PATH`-style list), else the first `fallbacks` entry that is
/// an executable file.
pub fn locate_tool_in(
    explicit: Option<&Path>,
    name: &str,
    path_var: Option<&OsStr>,
    fallbacks: &[&Path],
) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(var) = path_var {
        for dir in std::env::split_paths(var) {
            if dir.as_os_str().is_empty() {
                continue;
            }
            let candidate = dir.join(name);
            if is_executable_file(&candidate) {
                return Some(candidate);
            }
        }
    }
    fallbacks
        .iter()
        .find(|p| is_executable_file(p))
        .map(|p| p.to_path_buf())
}

/// [`locate_tool_in`] with this process's `PATH`.
pub fn locate_tool(explicit: Option<&Path>, name: &str, fallbacks: &[&Path]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH");
    locate_tool_in(explicit, name, path.as_deref(), fallbacks)
}

fn is_executable_file(p: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(p) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// The two streams, kept apart and merged at line granularity.
#[derive(Default)]
struct Streams {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    merged: Vec<u8>,
    last: Option<u8>,
}

impl Streams {
    fn push(&mut self, stream: u8, chunk: Vec<u8>) {
        if stream == 0 {
            self.stdout.extend_from_slice(&chunk);
        } else {
            self.stderr.extend_from_slice(&chunk);
        }
        // A partial line of one stream is never glued to a line of the other.
        if self.last.is_some_and(|s| s != stream) && self.merged.last().is_some_and(|&b| b != b'\n')
        {
            self.merged.push(b'\n');
        }
        self.merged.extend_from_slice(&chunk);
        self.last = Some(stream);
    }
}

fn spawn_reader<R: Read + Send + 'static>(stream: u8, r: R, tx: Sender<Msg>) {
    thread::spawn(move || {
        let mut r = BufReader::new(r);
        loop {
            let mut buf = Vec::new();
            match (&mut r).take(CHUNK).read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {
                    if tx.send(Msg::Chunk(stream, buf)).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(Msg::Done);
    });
}

/// Kill the child and, on Unix, its process group (what the child started).
fn kill_tree(child: &mut Child) {
    #[cfg(unix)]
    {
        // The child leads its own group (process_group(0)), so its pid is the group id, and
        // it is not reaped yet, so the id cannot have been reused.
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg("--")
            .arg(format!("-{}", child.id()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
}

fn signal_of(status: &ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn sh(script: &str) -> (PathBuf, Vec<OsString>) {
        (
            PathBuf::from("/bin/sh"),
            vec![OsString::from("-c"), OsString::from(script)],
        )
    }

    #[test]
    fn stdout_and_stderr_are_kept_apart_and_merged() {
        let (p, a) = sh("echo out1; echo err1 >&2; echo out2; exit 3");
        let c = run_captured(&p, &a, Duration::from_secs(30)).unwrap();
        assert_eq!(c.exit_code, Some(3));
        assert_eq!(c.signal, None);
        assert!(!c.timed_out);
        assert_eq!(c.stdout, b"out1\nout2\n");
        assert_eq!(c.stderr, b"err1\n");
        let merged = String::from_utf8(c.merged).unwrap();
        for l in ["out1\n", "err1\n", "out2\n"] {
            assert!(merged.contains(l), "{merged:?}");
        }
        assert_eq!(merged.len(), 15);
    }

    #[test]
    fn partial_lines_of_two_streams_are_not_glued() {
        let mut s = Streams::default();
        s.push(0, b"abc".to_vec());
        s.push(1, b"def\n".to_vec());
        s.push(1, b"ghi".to_vec());
        assert_eq!(s.merged, b"abc\ndef\nghi");
        assert_eq!(s.stdout, b"abc");
        assert_eq!(s.stderr, b"def\nghi");
    }

    #[test]
    fn watchdog_kills_at_the_deadline() {
        let (p, a) = sh("echo started; sleep 30");
        let t0 = Instant::now();
        let c = run_captured(&p, &a, Duration::from_millis(300)).unwrap();
        assert!(c.timed_out);
        assert_eq!(c.exit_code, None);
        assert_eq!(c.signal, Some(9));
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert_eq!(c.stdout, b"started\n");
    }

    #[test]
    fn missing_binary_is_a_spawn_error_naming_it() {
        let e = run_captured(
            Path::new("/nonexistent/dir/tool"),
            &[],
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(matches!(e, ProcessError::Spawn { .. }));
        assert!(e.to_string().contains("/nonexistent/dir/tool"), "{e}");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(describe_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(describe_duration(Duration::from_millis(1500)), "1.5 s");
    }

    #[test]
    fn locate_prefers_explicit_then_path_then_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let exe = b.join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Not executable: skipped.
        let plain = a.join("tool");
        std::fs::write(&plain, "").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let path = std::env::join_paths([&a, &b]).unwrap();

        let explicit = Path::new("/does/not/exist/tool");
        assert_eq!(
            locate_tool_in(Some(explicit), "tool", Some(&path), &[]),
            Some(explicit.to_path_buf())
        );
        assert_eq!(
            locate_tool_in(None, "tool", Some(&path), &[]),
            Some(exe.clone())
        );
        let only_a = std::env::join_paths([&a]).unwrap();
        assert_eq!(locate_tool_in(None, "tool", Some(&only_a), &[]), None);
        assert_eq!(
            locate_tool_in(
                None,
                "tool",
                Some(&only_a),
                &[plain.as_path(), exe.as_path()]
            ),
            Some(exe.clone())
        );
        assert_eq!(locate_tool_in(None, "tool", None, &[]), None);
    }
}
