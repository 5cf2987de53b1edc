//! Running the tool: an argument vector (no shell), both pipes read concurrently, a
//! watchdog that kills the whole process group at the deadline.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use super::parse::parse_with;
use super::{argv, Options, RunRecord, SanitizerError, Tool};

/// How often the watchdog looks at the child.
const POLL: Duration = Duration::from_millis(10);
/// After the sanitizer exits, how long to wait for the pipes to close (a grandchild that
/// outlives it can hold them open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// The longest piece one read hands over, so an endless line cannot grow without bound
/// before it is merged.
const CHUNK: u64 = 64 * 1024;

enum Msg {
    Chunk(u8, Vec<u8>),
    Done,
}

/// Run `sanitizer` (the compute-sanitizer binary) with [`argv`]`(tool, opts, program, args)`,
/// capture stdout and stderr (merged line by line in arrival order, as `2>&1` would), kill
/// the sanitizer and everything it started if it runs past `timeout`, and parse the output.
///
/// The child runs in its own process group (Unix) so the watchdog can kill the application
/// the sanitizer launched as well; stdin is `/dev/null`. A timeout or a death by signal is a
/// tool failure for the outcome (unless the report already holds real findings) and
/// `timed_out` says which. Only a binary that cannot be started, or a failed wait, is an
/// `Err`; the error names the binary.
pub fn run(
    tool: Tool,
    opts: &Options,
    program: &Path,
    args: &[OsString],
    sanitizer: &Path,
    timeout: Duration,
) -> Result<RunRecord, SanitizerError> {
    let mut full = argv(tool, opts, program, args);
    full[0] = sanitizer.as_os_str().to_os_string();

    let mut cmd = Command::new(sanitizer);
    cmd.args(&full[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|source| SanitizerError::Spawn {
        program: sanitizer.to_path_buf(),
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

    let mut merged = Merged::default();
    let deadline = Instant::now().checked_add(timeout);
    let mut timed_out = false;
    let wait_err = |source| SanitizerError::Wait {
        program: sanitizer.to_path_buf(),
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
            Ok(Msg::Chunk(stream, bytes)) => merged.push(stream, bytes),
            Ok(Msg::Done) => open -= 1,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = 0,
        }
    };

    // The sanitizer is gone; collect what is left in the pipes.
    let grace = Instant::now() + DRAIN_GRACE;
    while open > 0 {
        let left = grace.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left) {
            Ok(Msg::Chunk(stream, bytes)) => merged.push(stream, bytes),
            Ok(Msg::Done) => open -= 1,
            Err(_) => break,
        }
    }
    let incomplete = open > 0;

    let output = String::from_utf8_lossy(&merged.bytes).into_owned();
    let exit_status = status.code();
    let external = if timed_out {
        let after = if timeout >= Duration::from_secs(1) {
            format!("{:.1} s", timeout.as_secs_f64())
        } else {
            format!("{} ms", timeout.as_millis())
        };
        Some(format!(
            "timed out after {after}; the watchdog killed the sanitizer and its process group"
        ))
    } else if exit_status.is_none() {
        Some(signal_reason(&status))
    } else {
        None
    };
    let mut report = parse_with(tool, &output, exit_status, opts.error_exitcode, external);
    if incomplete {
        report.notes.push(format!(
            "output may be incomplete: the pipes were still open {} s after the sanitizer exited",
            DRAIN_GRACE.as_secs()
        ));
    }
    Ok(RunRecord {
        tool,
        argv: full
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        exit_status,
        timed_out,
        output,
        report,
    })
}

/// The two streams merged at line granularity.
#[derive(Default)]
struct Merged {
    bytes: Vec<u8>,
    last: Option<u8>,
}

impl Merged {
    fn push(&mut self, stream: u8, chunk: Vec<u8>) {
        // A partial line of one stream is never glued to a line of the other.
        if self.last.is_some_and(|s| s != stream) && self.bytes.last().is_some_and(|&b| b != b'\n')
        {
            self.bytes.push(b'\n');
        }
        self.bytes.extend_from_slice(&chunk);
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

/// Kill the child and, on Unix, its process group (the application the sanitizer started).
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

fn signal_reason(status: &ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("the sanitizer was killed by signal {sig}");
        }
    }
    let _ = status;
    "the sanitizer ended without an exit status".to_string()
}
