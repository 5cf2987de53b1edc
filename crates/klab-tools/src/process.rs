//! The one way klab runs a child process: an argument vector (never a shell), both pipes
//! read concurrently (and, when asked, echoed as they arrive), and a watchdog that kills the
//! whole process group at the deadline.
//!
//! No orphans: every child leads its own process group, which is recorded while it runs;
//! [`install_signal_handlers`] makes SIGINT, SIGTERM and SIGHUP end every recorded group
//! (SIGTERM, a short grace for a klab child to clean up, then SIGKILL) before klab exits
//! with one line, and each child is started with `PR_SET_PDEATHSIG` so
//! the kernel kills it when klab dies, SIGKILL included. What left the group (a `setsid`
//! or a double fork: a daemon a reference started) still carries [`TREE_ENV`] naming the
//! run it descends from, and is killed when that run ends ([`end_descendants`]). A klab process started by another
//! (it sees [`CHILD_ENV`]) calls [`die_with_parent`] first thing, so a klab under
//! compute-sanitizer or ncu dies with the tool that started it.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
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
    /// The file given as the child's standard input could not be opened.
    #[error("input for {}: {source}", .program.display())]
    Stdin {
        /// The binary as given.
        program: PathBuf,
        source: klab_core::artifact::FileError,
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

/// Set in the environment of every child klab starts: a klab process that sees it was
/// started by klab (and dies with its parent, see [`die_with_parent`]).
pub const CHILD_ENV: &str = "KLAB_CHILD";

/// Set beside [`CHILD_ENV`]: `PID:START` of the klab that started the child (START is the
/// process's start time in clock ticks, so a reused pid is not mistaken for it). A klab
/// further down (under compute-sanitizer or ncu, whose launchers may outlive the tool)
/// watches it.
pub const PARENT_ENV: &str = "KLAB_PARENT";

/// Set in the environment of every child klab starts (but a detached one): the runs it
/// descends from, `PID:START:N` each (this klab's identity and its run's number),
/// comma-separated, its own run last. Everything a child starts inherits it, whatever
/// process group or session it moves to, so the end of a run finds what it left running.
pub const TREE_ENV: &str = "KLAB_TREE";

/// How many children this process has started (a run's number in [`TREE_ENV`]).
static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How to run a child.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The watchdog: the process group is killed when the child runs longer.
    pub timeout: Duration,
    /// Whether and where the child's output is written as it arrives (it is captured all
    /// the same).
    pub echo: Echo,
    /// The child's working directory (default: this process's).
    pub dir: Option<PathBuf>,
    /// Set in the child's environment, beside the inherited variables.
    pub env: Vec<(OsString, OsString)>,
    /// Kill the child's process group as soon as the child exits, before its pipes are
    /// drained. Off for the tools whose launchers klab waits for through [`DRAIN_GRACE`]:
    /// what those leave gets the grace to finish its output, and is then ended with
    /// everything else the run started ([`end_descendants`]), as on every run.
    pub end_group_on_exit: bool,
    /// The child's standard input: this file, opened as klab opens every file it reads (a
    /// regular file within the kind's cap, see [`klab_core::artifact::open_regular`]);
    /// `/dev/null` when `None`.
    pub stdin: Option<(PathBuf, klab_core::artifact::Input)>,
    /// The child hands work to a scheduler that runs it after this process is gone
    /// (`sbatch`): it gets none of klab's child markers, so what the scheduler starts from
    /// its environment is not taken for an orphan of this klab.
    pub detached: bool,
    /// The child's stdin is a pipe from this process, which gives it turns
    /// ([`Running::give`]); `stdin` is then not used. Closing it (dropping the child)
    /// tells a paced child it gets no more.
    pub turns: bool,
    /// Keep only about the last this many bytes of each of stdout, stderr and the merged
    /// output (at most twice it while the child runs): for a program whose output only
    /// ever serves to quote its end, so that one writing gigabytes costs no memory.
    /// `None` keeps everything.
    pub keep_tail: Option<usize>,
}

impl RunOptions {
    pub fn new(timeout: Duration) -> RunOptions {
        RunOptions {
            timeout,
            echo: Echo::Off,
            dir: None,
            env: Vec::new(),
            end_group_on_exit: false,
            stdin: None,
            detached: false,
            turns: false,
            keep_tail: None,
        }
    }
}

/// Where a child's output is shown as it arrives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Echo {
    /// Captured only.
    #[default]
    Off,
    /// Its stdout on this process's stdout, its stderr on stderr.
    AsIs,
    /// Both on this process's stderr: this process's stdout is kept for a report that must
    /// parse (`--format json`), whatever a kernel or a tool prints.
    ToStderr,
}

/// [`run`] without echo.
pub fn run_captured(
    program: &Path,
    args: &[OsString],
    timeout: Duration,
) -> Result<Captured, ProcessError> {
    run(program, args, &RunOptions::new(timeout))
}

/// Run `program` with `args` (no shell), stdin from `/dev/null` (or `opts.stdin`), capturing stdout and
/// stderr, and kill it and everything it started if it runs past the timeout.
///
/// The child runs in its own process group (Unix) so the watchdog can also kill what it
/// launched (the application under a profiler or sanitizer), and dies with this process.
/// Only a binary that cannot be started, or a failed wait, is an `Err`; the error names the
/// binary.
pub fn run(program: &Path, args: &[OsString], opts: &RunOptions) -> Result<Captured, ProcessError> {
    spawn(program, args, opts)?.wait(opts.timeout, &mut || {})
}

/// A child started by [`spawn`] and not yet waited for: its output is read as it comes, and
/// the watchdog starts when [`Running::wait`] is called. Dropped before that, it is killed
/// with everything it started, and reaped.
pub struct Running {
    program: PathBuf,
    child: Child,
    run_id: String,
    /// The child's start time (clock ticks since boot, 0 if unknown): nothing it started
    /// began earlier.
    started: u64,
    rx: mpsc::Receiver<Msg>,
    open: usize,
    streams: Streams,
    /// This process's end of the socket that is the child's stdin, under
    /// [`RunOptions::turns`].
    turns: Option<std::os::unix::net::UnixStream>,
    detached: bool,
    end_group_on_exit: bool,
    reaped: bool,
    _group: GroupGuard,
}

/// Start `program` with `args` as [`run`] does, without waiting for it.
pub fn spawn(
    program: &Path,
    args: &[OsString],
    opts: &RunOptions,
) -> Result<Running, ProcessError> {
    park_if_stopping();
    let mut cmd = Command::new(program);
    // Turns go through a socket, not a pipe: a turn given to a child that has just exited
    // is then an error of the send (MSG_NOSIGNAL), not a SIGPIPE, which klab's handler
    // would take for its own output closed.
    let mut turns = None;
    let stdin = match &opts.stdin {
        _ if opts.turns => {
            let (ours, theirs) =
                std::os::unix::net::UnixStream::pair().map_err(|source| ProcessError::Spawn {
                    program: program.to_path_buf(),
                    source,
                })?;
            turns = Some(ours);
            Stdio::from(std::os::fd::OwnedFd::from(theirs))
        }
        Some((path, kind)) => Stdio::from(klab_core::artifact::open_regular(path, *kind).map_err(
            |source| ProcessError::Stdin {
                program: program.to_path_buf(),
                source,
            },
        )?),
        None => Stdio::null(),
    };
    let run_id = format!(
        "{}:{}",
        self_identity(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    if opts.detached {
        cmd.env_remove(CHILD_ENV)
            .env_remove(PARENT_ENV)
            .env_remove(TREE_ENV);
    } else {
        let mut tree = std::env::var_os(TREE_ENV).unwrap_or_default();
        if !tree.is_empty() {
            tree.push(",");
        }
        tree.push(&run_id);
        cmd.env(CHILD_ENV, "1")
            .env(PARENT_ENV, self_identity())
            .env(TREE_ENV, tree);
    }
    cmd.args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(d) = &opts.dir {
        cmd.current_dir(d);
    }
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        cmd.process_group(0);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before the request took hold.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
        program: program.to_path_buf(),
        source,
    })?;
    let group = GroupGuard::register(child.id());

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
    // The child's end was handed over at the spawn; `cmd` still holds this process's copy.
    drop(cmd);
    Ok(Running {
        program: program.to_path_buf(),
        turns,
        started: start_time(child.id()).unwrap_or(0),
        child,
        run_id,
        rx,
        open,
        streams: Streams {
            echo: opts.echo,
            keep_tail: opts.keep_tail,
            ..Streams::default()
        },
        detached: opts.detached,
        end_group_on_exit: opts.end_group_on_exit,
        reaped: false,
        _group: group,
    })
}

impl Running {
    /// Write `byte` to the child's stdin (started with [`RunOptions::turns`]): one of the
    /// turns a paced child waits for. An error when the child has no such stdin or is gone.
    pub fn give(&mut self, byte: u8) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let Some(w) = self.turns.as_ref() else {
            return Err(std::io::Error::other(
                "the child was not started to be given turns",
            ));
        };
        loop {
            // SAFETY: one byte from a live local, on a socket this struct owns.
            let sent = unsafe {
                libc::send(
                    w.as_raw_fd(),
                    (&byte as *const u8).cast(),
                    1,
                    libc::MSG_NOSIGNAL,
                )
            };
            match sent {
                1 => return Ok(()),
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Wait for the child to end, killing its process group when it runs `timeout` past
    /// this call; `poll` is called every few milliseconds meanwhile (a parent that paces
    /// another child from what this one says).
    pub fn wait(
        mut self,
        timeout: Duration,
        poll: &mut dyn FnMut(),
    ) -> Result<Captured, ProcessError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut timed_out = false;
        let status = loop {
            poll();
            match self.child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) => {}
                Err(e) => {
                    self.end();
                    return Err(self.wait_err(e));
                }
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                timed_out = true;
                kill_tree(&mut self.child);
                match self.child.wait() {
                    Ok(st) => break st,
                    Err(e) => return Err(self.wait_err(e)),
                }
            }
            let step = deadline.map_or(POLL, |d| d.saturating_duration_since(now).min(POLL));
            if self.open == 0 {
                thread::sleep(step);
                continue;
            }
            match self.rx.recv_timeout(step) {
                Ok(Msg::Chunk(stream, bytes)) => self.streams.push(stream, bytes),
                Ok(Msg::Done) => self.open -= 1,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.open = 0,
            }
        };
        // A child the watchdog ended counts too: nothing of it is reported while stopping.
        park_if_stopping();
        self.reaped = true;
        if self.end_group_on_exit && !timed_out {
            end_group(self.child.id());
        }
        // The child is gone; collect what is left in the pipes.
        let grace = Instant::now() + DRAIN_GRACE;
        while self.open > 0 {
            let left = grace.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.rx.recv_timeout(left) {
                Ok(Msg::Chunk(stream, bytes)) => self.streams.push(stream, bytes),
                Ok(Msg::Done) => self.open -= 1,
                Err(_) => break,
            }
        }
        if !self.detached {
            end_descendants(&self.run_id, self.started);
        }
        let streams = std::mem::take(&mut self.streams);
        Ok(Captured {
            exit_code: status.code(),
            signal: signal_of(&status),
            timed_out,
            stdout: streams.stdout,
            stderr: streams.stderr,
            merged: streams.merged,
            incomplete: self.open > 0,
        })
    }

    fn wait_err(&self, source: std::io::Error) -> ProcessError {
        park_if_stopping();
        ProcessError::Wait {
            program: self.program.clone(),
            source,
        }
    }

    /// Kill the child and what it started, and reap it.
    fn end(&mut self) {
        if self.reaped {
            return;
        }
        self.reaped = true;
        kill_tree(&mut self.child);
        let _ = self.child.wait();
        if !self.detached {
            end_descendants(&self.run_id, self.started);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.end();
    }
}

/// Find a tool's binary: `explicit` if given (returned even if it does not exist, so that
/// starting it fails with an error naming it; a bare name as `./name`, which is what was
/// given, where `Command` would look it up on PATH), else the first executable `name` in
/// the directories of `path_var` (a `PATH`-style list), else the first `fallbacks` entry
/// that is an executable file. [`explicit_tool_problem`] says beforehand why a given one
/// cannot start.
pub fn locate_tool_in(
    explicit: Option<&Path>,
    name: &str,
    path_var: Option<&OsStr>,
    fallbacks: &[&Path],
) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(match p.parent() {
            Some(dir) if dir.as_os_str().is_empty() => Path::new(".").join(p),
            _ => p.to_path_buf(),
        });
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

/// Why `p`, a tool's binary given on the command line, cannot be started, if it cannot: a
/// check cheap enough to make before any folder is made or child started.
pub fn explicit_tool_problem(p: &Path) -> Option<&'static str> {
    match std::fs::metadata(p) {
        Err(_) => Some("no such file"),
        Ok(m) if !m.is_file() => Some("not a file"),
        Ok(_) if !is_executable_file(p) => Some("not executable"),
        Ok(_) => None,
    }
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
    echo: Echo,
    keep_tail: Option<usize>,
}

impl Streams {
    fn push(&mut self, stream: u8, chunk: Vec<u8>) {
        use std::io::Write;
        match self.echo {
            Echo::Off => {}
            // A closed stdout (klab piped into `head`) must not stop the child's capture.
            Echo::AsIs if stream == 0 => {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(&chunk).and_then(|_| o.flush());
            }
            Echo::AsIs | Echo::ToStderr => {
                let _ = std::io::stderr().write_all(&chunk);
            }
        }
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
        if let Some(keep) = self.keep_tail {
            for b in [&mut self.stdout, &mut self.stderr, &mut self.merged] {
                // Trimmed at twice the tail, so each byte is moved at most once or twice.
                if b.len() > keep.saturating_mul(2) {
                    b.drain(..b.len() - keep);
                }
            }
        }
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
        // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
        unsafe {
            libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// Kill what is left of the process group of a child that has exited and been reaped.
fn end_group(pid: u32) {
    #[cfg(unix)]
    // SAFETY: kill(2) on a process group; no memory involved. The group's id cannot name
    // anything else while a member is alive (Linux does not reuse a pid that is still a
    // group's id), and with no member left the call finds no group.
    unsafe {
        libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// SIGKILL every process whose environment names run `run_id` in [`TREE_ENV`]: what the
/// run's child, started at `since` (clock ticks since boot, 0 if unknown), started and left
/// running outside its process group (a `setsid` daemon, a double fork), once the child
/// itself has ended. How many there were. Linux only (the environments are read from
/// /proc); a process that clears its environment escapes it.
pub fn end_descendants(run_id: &str, since: u64) -> usize {
    #[cfg(target_os = "linux")]
    {
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        let mut ended = 0;
        for pid in entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid != me)
        {
            if descends_from(pid, run_id, since) {
                // SAFETY: kill(2) on one process; no memory involved.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
                ended += 1;
            }
        }
        ended
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (run_id, since);
        0
    }
}

/// Whether process `pid`'s environment names run `run_id` in [`TREE_ENV`] (a process whose
/// environment cannot be read, another user's, does not).
///
/// A process in the middle of exec reads as an empty environment until its new one is set
/// up (proc(5)'s `environ` is empty while the new image has none yet), so a daemon caught
/// exec'ing would escape the one scan at the run's end: an empty environment of a process
/// that started since the run's child (at `since`) and is neither a kernel thread nor a
/// zombie is read again, a few times, briefly. One that started before cannot be the run's.
#[cfg(target_os = "linux")]
fn descends_from(pid: u32, run_id: &str, since: u64) -> bool {
    const READS: usize = 10;
    for read in 0..READS {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            return false;
        };
        if !environ.is_empty() {
            return names_run(&environ, run_id);
        }
        if read + 1 == READS || !may_be_in_exec(pid, since) {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
    false
}

/// Whether `environ` (a /proc environ: NUL-separated) names run `run_id` in [`TREE_ENV`].
fn names_run(environ: &[u8], run_id: &str) -> bool {
    let key = format!("{TREE_ENV}=");
    environ
        .split(|b| *b == 0)
        .filter_map(|var| var.strip_prefix(key.as_bytes()))
        .any(|tree| tree.split(|b| *b == b',').any(|id| id == run_id.as_bytes()))
}

/// Whether process `pid` could be a user process between exec's new image and its new
/// environment, started at or after `since`: alive (not a zombie), and not a kernel thread
/// (which has no environment).
#[cfg(target_os = "linux")]
fn may_be_in_exec(pid: u32, since: u64) -> bool {
    /// `PF_KTHREAD` in /proc/PID/stat's flags (include/linux/sched.h).
    const PF_KTHREAD: u64 = 0x0020_0000;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The name, in parentheses, may hold anything; the fields after it are: state, ppid,
    // pgrp, session, tty, tpgid, flags, ...
    let Some((_, fields)) = stat.rsplit_once(')') else {
        return false;
    };
    let fields: Vec<&str> = fields.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    let state = fields.first().copied().unwrap_or("Z");
    // flags is stat's 9th field and starttime its 22nd: the 7th and 20th after the name.
    let flags = field(6).unwrap_or(PF_KTHREAD);
    let started = field(19).unwrap_or(0);
    !matches!(state, "Z" | "X" | "x") && flags & PF_KTHREAD == 0 && started >= since
}

/// Set by the signal handler while its children end: a thread whose child ends then, or
/// that would start one, stops where it is ([`park_if_stopping`]) rather than take a child
/// the signal stopped for one that failed and write that down.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long the signal handler lets its children end on SIGTERM before SIGKILL, in ms: a
/// klab child's own handler then ends what it started and removes its folders (a
/// reference's call folder), which SIGKILL would leave behind. A klab started by klab
/// waits half as long, so that its parent's wait outlasts its own.
static STOP_GRACE_MS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(2000);

/// Never returns while the signal handler is stopping this process (it ends it).
fn park_if_stopping() {
    while STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        thread::sleep(Duration::from_secs(1));
    }
}

/// The process groups of the children running now, for the signal handler (a fixed table
/// of atomics: the handler may neither lock nor allocate).
const MAX_GROUPS: usize = 64;
static GROUPS: [std::sync::atomic::AtomicI32; MAX_GROUPS] =
    [const { std::sync::atomic::AtomicI32::new(0) }; MAX_GROUPS];

/// Records a running child's process group, and forgets it when dropped.
struct GroupGuard(Option<usize>);

impl GroupGuard {
    fn register(pid: u32) -> GroupGuard {
        use std::sync::atomic::Ordering;
        let pid = pid as i32;
        for (i, slot) in GROUPS.iter().enumerate() {
            if slot
                .compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return GroupGuard(Some(i));
            }
        }
        // More than 64 at once: the child still dies with klab through PDEATHSIG.
        GroupGuard(None)
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            GROUPS[i].store(0, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// The process groups of the children running now, copied, and how many there are.
/// Only async-signal-safe work: [`on_signal`] runs it.
fn running_groups() -> ([i32; MAX_GROUPS], u8) {
    use std::sync::atomic::Ordering;
    let mut groups = [0i32; MAX_GROUPS];
    let mut n = 0u8;
    for (g, slot) in groups.iter_mut().zip(&GROUPS) {
        *g = slot.load(Ordering::SeqCst);
        n = n.saturating_add(u8::from(*g > 0));
    }
    (groups, n)
}

/// Send `sig` to each of `groups` (0: none). Only async-signal-safe calls.
#[cfg(unix)]
fn signal_groups(groups: &[i32], sig: libc::c_int) {
    for &pg in groups.iter().filter(|&&pg| pg > 0) {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe {
            libc::kill(-pg, sig);
        }
    }
}

/// SIGKILL the process group of every running child; how many there were. Only
/// async-signal-safe calls: [`on_signal`] runs it.
#[cfg(unix)]
fn kill_running_groups() -> u8 {
    let (groups, n) = running_groups();
    signal_groups(&groups, libc::SIGKILL);
    n
}

/// SIGTERM `groups`, then wait up to [`STOP_GRACE_MS`] for every member of them to end
/// (not only the leader: a launcher such as compute-sanitizer may lead a klab child's
/// group and end first). Only async-signal-safe calls.
#[cfg(target_os = "linux")]
fn let_groups_end(groups: &[i32]) {
    signal_groups(groups, libc::SIGTERM);
    let grace = STOP_GRACE_MS.load(std::sync::atomic::Ordering::SeqCst);
    let step = libc::timespec {
        tv_sec: 0,
        tv_nsec: 20_000_000,
    };
    for _ in 0..grace / 20 {
        if !signal_safe::any_live_in(groups) {
            break;
        }
        // SAFETY: nanosleep(2) is async-signal-safe; both pointers are to this stack.
        unsafe {
            libc::nanosleep(&step, std::ptr::null_mut());
        }
    }
}

const MAX_REMOVED: usize = 64;
static REMOVED_ON_SIGNAL: [std::sync::atomic::AtomicPtr<libc::c_char>; MAX_REMOVED] =
    [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; MAX_REMOVED];

/// A file this process removes if a signal ends it (as the file's owner does when it is
/// dropped): a parent's results file for a child, which the handler would otherwise leave
/// in the temporary folder; or a folder, removed with the files in it (a command
/// reference's call folder). Forgotten when dropped.
pub struct RemovedOnSignal(Option<usize>);

impl RemovedOnSignal {
    pub fn register(path: &Path) -> RemovedOnSignal {
        use std::sync::atomic::Ordering;
        #[cfg(unix)]
        let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
        #[cfg(not(unix))]
        let bytes = path.to_string_lossy().into_owned().into_bytes();
        let Ok(c) = std::ffi::CString::new(bytes) else {
            return RemovedOnSignal(None);
        };
        // Never freed: the handler may be reading a slot while its guard is dropped, so a
        // path lives as long as the process (a few dozen bytes per child).
        let ptr = c.into_raw();
        for (i, slot) in REMOVED_ON_SIGNAL.iter().enumerate() {
            if slot
                .compare_exchange(
                    std::ptr::null_mut(),
                    ptr,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok()
            {
                return RemovedOnSignal(Some(i));
            }
        }
        RemovedOnSignal(None)
    }
}

impl Drop for RemovedOnSignal {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            REMOVED_ON_SIGNAL[i].store(std::ptr::null_mut(), std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Remove every registered file, and every registered folder with what is in it. Only
/// async-signal-safe calls: [`on_signal`] runs it.
#[cfg(unix)]
fn remove_registered_files() {
    for slot in &REMOVED_ON_SIGNAL {
        let p = slot.load(std::sync::atomic::Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: unlink(2) is async-signal-safe; the path is never freed.
            let unlinked = unsafe { libc::unlink(p) } == 0;
            #[cfg(target_os = "linux")]
            if !unlinked {
                signal_safe::remove_folder(p);
            }
            #[cfg(not(target_os = "linux"))]
            let _ = unlinked;
        }
    }
}

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    let (groups, ended) = running_groups();
    #[cfg(target_os = "linux")]
    if ended > 0 {
        let_groups_end(&groups);
    }
    // What is left, and a child started meanwhile.
    signal_groups(&groups, libc::SIGKILL);
    kill_running_groups();
    #[cfg(target_os = "linux")]
    signal_safe::end_every_descendant();
    remove_registered_files();
    // A closed stdout with no child running is the reader having read enough (`klab
    // model | head`): end quietly with exit 0, as ripgrep does. With children running,
    // work was cut short: say so and exit 1.
    if sig == libc::SIGPIPE && ended == 0 {
        // SAFETY: _exit(2) is async-signal-safe.
        unsafe { libc::_exit(0) }
    }
    let name: &[u8] = match sig {
        libc::SIGINT => b"SIGINT",
        libc::SIGTERM => b"SIGTERM",
        libc::SIGPIPE => b"SIGPIPE (its output was closed)",
        _ => b"SIGHUP",
    };
    let mut line = [0u8; 128];
    let mut len = 0;
    for part in [
        b"klab: stopped by ".as_slice(),
        name,
        if ended > 0 {
            b"; killed the process groups of its running children".as_slice()
        } else {
            b"; no child was running".as_slice()
        },
        b"\n",
    ] {
        line[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffer lives on this stack.
    unsafe {
        libc::write(2, line.as_ptr().cast(), len);
        libc::_exit(1);
    }
}

/// A write to stdout failed (`klab model > /dev/full`, a full disk, an I/O error): end the
/// running children as a signal does, say so in one line and exit 1, where `println!`
/// would panic. A closed pipe is SIGPIPE's case, and ends the same way as there: quietly
/// with exit 0 when no child was running.
pub fn exit_on_stdout_error(e: &std::io::Error) -> ! {
    #[cfg(unix)]
    let ended = kill_running_groups();
    #[cfg(unix)]
    remove_registered_files();
    #[cfg(not(unix))]
    let ended = 0u8;
    if e.kind() == std::io::ErrorKind::BrokenPipe && ended == 0 {
        std::process::exit(0);
    }
    let _ = writeln!(std::io::stderr(), "error: cannot write to stdout: {e}");
    std::process::exit(1)
}

/// SIGINT, SIGTERM, SIGHUP and SIGPIPE kill the process group of every running child, print
/// one line on stderr and exit 1. SIGPIPE too: Rust ignores it, so a closed stdout (`klab
/// model | head`) would otherwise make the next print panic, and the children outlive that;
/// with no child running, SIGPIPE ends klab quietly with exit 0.
pub fn install_signal_handlers() {
    #[cfg(target_os = "linux")]
    signal_safe::remember_identity(&self_identity());
    #[cfg(unix)]
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        // SAFETY: a handler that only makes async-signal-safe calls.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut act.sa_mask);
            // A second signal while the handler runs waits (the handler then exits): it
            // would otherwise start the handler, and its grace, over.
            for other in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
                libc::sigaddset(&mut act.sa_mask, other);
            }
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// End this process at once with SIGKILL: no exit handler, no CUDA teardown that a hung
/// kernel could hold up, no core dump. Its parent sees a death by signal 9.
pub fn end_this_process_now() -> ! {
    // SAFETY: signalling this process itself; nothing in it runs after the signal.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL cannot be caught; should delivery lag, nothing more of this process runs.
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// For a klab process that another started: die when the parent does (SIGKILL included),
/// ending what it started itself, and exit at once, with one line, if it already has.
///
/// Two mechanisms, because a tool may stand between the two klabs: `PR_SET_PDEATHSIG`
/// covers the direct parent, and a thread watches the klab named in [`PARENT_ENV`]: when it
/// is gone, this process kills its own process group (itself, and a tool launcher that
/// shares it, such as compute-sanitizer's or ncu's subreaper, which survive the tool) when
/// klab made that group, and otherwise exits alone.
pub fn die_with_parent() {
    #[cfg(target_os = "linux")]
    // SIGTERM, not SIGKILL: [`install_signal_handlers`]'s handler then ends this
    // process's own children's groups and descendants and removes its files before it
    // exits, where SIGKILL would leave what they started (a reference's `sleep`) running.
    // SAFETY: a plain system call without memory arguments. (Whether the parent already
    // died is read from PARENT_ENV below, not from getppid(): a klab that is PID 1 in a
    // container is a parent like any other.)
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
    }
    STOP_GRACE_MS.store(1000, std::sync::atomic::Ordering::SeqCst);
    let Some(watched) = std::env::var(PARENT_ENV)
        .ok()
        .and_then(|v| parse_identity(&v))
    else {
        return;
    };
    if !is_running(watched) {
        eprintln!(
            "klab: the klab that started this process (pid {}) is gone; exiting",
            watched.0
        );
        std::process::exit(1);
    }
    // Take the whole group down only if klab made it: its leader is the klab's own child
    // (the tool, or this process). Otherwise (a stray KLAB_PARENT in someone's shell) the
    // group is not klab's to kill, and this process ends alone.
    #[cfg(unix)]
    // SAFETY: getpgrp(2) takes no arguments.
    let group = unsafe { libc::getpgrp() } as u32;
    #[cfg(not(unix))]
    let group = 0u32;
    let group_is_klabs = parent_of(group) == Some(watched.0);
    thread::spawn(move || loop {
        if !is_running(watched) {
            // What this process started goes first, as on a signal.
            #[cfg(unix)]
            {
                kill_running_groups();
                #[cfg(target_os = "linux")]
                signal_safe::end_every_descendant();
                remove_registered_files();
            }
            #[cfg(unix)]
            // SAFETY: kill(2) on this process's own group and _exit(2); no memory involved.
            unsafe {
                if group_is_klabs {
                    libc::kill(0, libc::SIGKILL);
                }
                libc::_exit(1);
            }
        }
        thread::sleep(Duration::from_millis(100));
    });
}

/// The parent pid of a process (field 4 of /proc/PID/stat).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `PID:START` of this process.
fn self_identity() -> String {
    let pid = std::process::id();
    format!("{pid}:{}", start_time(pid).unwrap_or(0))
}

fn parse_identity(v: &str) -> Option<(u32, u64)> {
    let (p, t) = v.split_once(':')?;
    Some((p.parse().ok()?, t.parse().ok()?))
}

/// The process is alive (not a zombie) and is the one that was recorded.
pub(crate) fn is_running((pid, start): (u32, u64)) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let rest = stat.rsplit(')').next().unwrap_or("");
    let mut fields = rest.split_whitespace();
    let state = fields.next().unwrap_or("");
    if state.starts_with('Z') || state.starts_with('X') {
        return false;
    }
    // After the state: ppid, pgrp, ... ; starttime is field 22 of stat, the 20th after it.
    let started = fields.nth(18).and_then(|t| t.parse::<u64>().ok());
    start == 0 || started == Some(start)
}

/// A process's start time in clock ticks since boot (field 22 of /proc/PID/stat).
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit(')').next()?;
    rest.split_whitespace().nth(19)?.parse().ok()
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

/// [`end_descendants`] for a signal handler, for every run of this process at once: no
/// allocation and no lock, only system calls a handler may make (open, read, getdents64,
/// kill, close) on buffers of its own stack. The identity a run id starts with is stored
/// before any handler is installed.
#[cfg(target_os = "linux")]
mod signal_safe {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `KLAB_TREE=` ids of this process's runs start with `PID:START:` (the trailing colon
    /// tells them from `KLAB_PARENT=PID:START`, which children also carry).
    const MAX_PREFIX: usize = 48;
    static PREFIX: [std::sync::atomic::AtomicU8; MAX_PREFIX] =
        [const { std::sync::atomic::AtomicU8::new(0) }; MAX_PREFIX];
    static PREFIX_LEN: AtomicUsize = AtomicUsize::new(0);

    /// Store `identity` (`PID:START`) for [`end_every_descendant`].
    pub fn remember_identity(identity: &str) {
        let bytes = identity.as_bytes();
        if bytes.len() + 1 > MAX_PREFIX {
            return;
        }
        for (slot, b) in PREFIX.iter().zip(bytes.iter().chain(b":")) {
            slot.store(*b, Ordering::SeqCst);
        }
        PREFIX_LEN.store(bytes.len() + 1, Ordering::SeqCst);
    }

    /// SIGKILL every process whose environment holds an id of one of this process's runs.
    pub fn end_every_descendant() {
        let len = PREFIX_LEN.load(Ordering::SeqCst);
        if len == 0 {
            return;
        }
        let mut prefix = [0u8; MAX_PREFIX];
        for (b, slot) in prefix.iter_mut().zip(&PREFIX) {
            *b = slot.load(Ordering::SeqCst);
        }
        let prefix = &prefix[..len];
        let me = std::process::id();
        // SAFETY: open(2), getdents64(2) and close(2) on this stack's buffers.
        let dir = unsafe { libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
        if dir < 0 {
            return;
        }
        each_entry(dir, |name| {
            if let Some(pid) = pid_of(name) {
                if pid != me && environ_holds(name, prefix) {
                    // SAFETY: kill(2) on one process.
                    unsafe {
                        libc::kill(pid as libc::pid_t, libc::SIGKILL);
                    }
                }
            }
        });
        // SAFETY: closing the descriptor opened above.
        unsafe {
            libc::close(dir);
        }
    }

    /// Calls `f` with the name (without its NUL) of each entry of the open folder `dir`,
    /// from its start.
    fn each_entry(dir: libc::c_int, mut f: impl FnMut(&[u8])) {
        // SAFETY: lseek(2) on a descriptor; rewinds a folder already read.
        unsafe {
            libc::lseek(dir, 0, libc::SEEK_SET);
        }
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: the kernel writes at most buf.len() bytes into buf.
            let n =
                unsafe { libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) };
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            while at + 19 < n as usize {
                // linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
                let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                if reclen == 0 {
                    break;
                }
                let name = &buf[at + 19..(at + reclen).min(n as usize)];
                f(&name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())]);
                at += reclen;
            }
        }
    }

    /// Remove the folder `path` (NUL-terminated) and what is in it: its files, and folders
    /// in it that are empty. A link is not followed. A few passes, since removing while
    /// reading a folder may skip an entry.
    pub fn remove_folder(path: *const libc::c_char) {
        // SAFETY: open(2) on a NUL-terminated path that outlives the call.
        let dir =
            unsafe { libc::open(path, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW) };
        if dir < 0 {
            return;
        }
        for _ in 0..4 {
            let mut removed = 0usize;
            each_entry(dir, |name| {
                let mut c = [0u8; 256];
                if name == b"." || name == b".." || name.len() >= c.len() {
                    return;
                }
                c[..name.len()].copy_from_slice(name);
                // SAFETY: unlinkat(2) relative to the open folder, on a NUL-terminated
                // name of this stack.
                let gone = unsafe {
                    libc::unlinkat(dir, c.as_ptr().cast(), 0) == 0
                        || libc::unlinkat(dir, c.as_ptr().cast(), libc::AT_REMOVEDIR) == 0
                };
                removed += usize::from(gone);
            });
            if removed == 0 {
                break;
            }
        }
        // SAFETY: close(2) of the descriptor opened here; rmdir(2) on the path.
        unsafe {
            libc::close(dir);
            libc::rmdir(path);
        }
    }

    /// Whether a live process (not a zombie) is in one of `groups` (process group ids; 0
    /// is none), by its /proc stat.
    pub fn any_live_in(groups: &[i32]) -> bool {
        // SAFETY: open(2) of a constant path.
        let dir = unsafe { libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
        if dir < 0 {
            return false;
        }
        let mut found = false;
        each_entry(dir, |name| {
            if !found && pid_of(name).is_some() {
                found = live_group(name).is_some_and(|g| g > 0 && groups.contains(&g));
            }
        });
        // SAFETY: closing the descriptor opened above.
        unsafe {
            libc::close(dir);
        }
        found
    }

    /// `/proc/NAME/LEAF`, NUL-terminated, in a buffer of this stack (None where it does not
    /// fit).
    fn proc_path(name: &[u8], leaf: &[u8]) -> Option<[u8; 32]> {
        let mut path = [0u8; 32];
        let mut len = 0;
        for part in [b"/proc/".as_slice(), name, leaf] {
            if len + part.len() >= path.len() {
                return None;
            }
            path[len..len + part.len()].copy_from_slice(part);
            len += part.len();
        }
        Some(path)
    }

    /// The process group of /proc entry `name`, if that process is alive.
    fn live_group(name: &[u8]) -> Option<i32> {
        let path = proc_path(name, b"/stat")?;
        let mut buf = [0u8; 512];
        // SAFETY: open(2), read(2) and close(2) on this stack's NUL-terminated path and buffer.
        let got = unsafe {
            let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY);
            if fd < 0 {
                return None;
            }
            let got = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            libc::close(fd);
            got
        };
        let stat = buf.get(..usize::try_from(got).ok()?)?;
        // After the name (in parentheses, anything in it): state, ppid, pgrp.
        let after = stat.iter().rposition(|&b| b == b')')? + 1;
        let mut fields = stat[after..]
            .split(|&b| b == b' ')
            .filter(|f| !f.is_empty());
        let state = fields.next()?;
        if matches!(state, [b'Z' | b'X' | b'x', ..]) {
            return None;
        }
        let _ppid = fields.next()?;
        let pgrp = fields.next()?;
        pgrp.iter().try_fold(0i32, |a, d| {
            d.is_ascii_digit()
                .then(|| a.checked_mul(10)?.checked_add(i32::from(d - b'0')))
                .flatten()
        })
    }

    fn pid_of(name: &[u8]) -> Option<u32> {
        if name.is_empty() || name.len() > 10 || !name.iter().all(u8::is_ascii_digit) {
            return None;
        }
        name.iter().try_fold(0u32, |a, d| {
            a.checked_mul(10)?.checked_add(u32::from(d - b'0'))
        })
    }

    /// Whether `/proc/NAME/environ` holds `prefix` at the start of a run id (after the
    /// variable's `=` or a `,`: `9123:456:` holds `123:456:` too), read in pieces that
    /// overlap by the prefix's length and its boundary byte, so that a match across two
    /// reads is found.
    fn environ_holds(name: &[u8], prefix: &[u8]) -> bool {
        let Some(path) = proc_path(name, b"/environ") else {
            return false;
        };
        // SAFETY: path is NUL-terminated (zeroed past len); open(2) and read(2) on this
        // stack's buffers, close(2) on the descriptor opened here.
        let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY) };
        if fd < 0 {
            return false;
        }
        let mut buf = [0u8; 4096];
        let keep = prefix.len();
        let mut have = 0usize;
        let mut found = false;
        loop {
            let n = unsafe { libc::read(fd, buf[have..].as_mut_ptr().cast(), buf.len() - have) };
            if n <= 0 {
                break;
            }
            let end = have + n as usize;
            // A window at 0 was whole in the previous piece (or starts the file, where no
            // id can).
            let at_id =
                |(i, w): (usize, &[u8])| i > 0 && w == prefix && matches!(buf[i - 1], b'=' | b',');
            if buf[..end].windows(prefix.len()).enumerate().any(at_id) {
                found = true;
                break;
            }
            let tail = end.min(keep);
            buf.copy_within(end - tail..end, 0);
            have = tail;
        }
        unsafe {
            libc::close(fd);
        }
        found
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

    /// With `keep_tail`, a child that writes megabytes leaves only their end in memory,
    /// on each stream and merged; without it, everything.
    #[test]
    fn keep_tail_keeps_only_the_end_of_a_long_output() {
        let script = "i=0; while [ $i -lt 20000 ]; do echo \"out line $i of many\"; \
                      echo \"err line $i of many\" >&2; i=$((i+1)); done; echo last-out; \
                      echo last-err >&2";
        let (p, a) = sh(script);
        let opts = RunOptions {
            keep_tail: Some(1024),
            ..RunOptions::new(Duration::from_secs(60))
        };
        let c = run(&p, &a, &opts).unwrap();
        assert_eq!(c.exit_code, Some(0));
        for (name, b) in [
            ("stdout", &c.stdout),
            ("stderr", &c.stderr),
            ("merged", &c.merged),
        ] {
            assert!(b.len() <= 2048, "{name}: {} bytes kept", b.len());
            assert!(b.len() >= 1024, "{name}: {} bytes kept", b.len());
        }
        assert!(c.stdout.ends_with(b"line 19999 of many\nlast-out\n"));
        assert!(c.stderr.ends_with(b"line 19999 of many\nlast-err\n"));
        let all = run_captured(&p, &a, Duration::from_secs(60)).unwrap();
        assert!(all.stdout.len() > 400_000, "{}", all.stdout.len());
    }

    /// A daemon the child started in a session of its own (out of its process group, so
    /// the group kill cannot reach it) ends with the run: it carries the run's id.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_daemon_that_left_the_process_group_ends_with_the_run() {
        let Some(setsid) = locate_tool(None, "setsid", &[]) else {
            eprintln!("SKIPPED: no setsid binary here");
            return;
        };
        let script = format!(
            "{} sleep 1234 </dev/null >/dev/null 2>&1 & echo $!; exit 4",
            setsid.display()
        );
        let (p, a) = sh(&script);
        let c = run_captured(&p, &a, Duration::from_secs(30)).unwrap();
        assert_eq!(c.exit_code, Some(4));
        let pid: u32 = String::from_utf8_lossy(&c.stdout).trim().parse().unwrap();
        // Killed: gone, or a zombie until its new parent reaps it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_running((pid, 0)) {
            assert!(Instant::now() < deadline, "sleep {pid} outlived its run");
            thread::sleep(Duration::from_millis(20));
        }
        // This process's own environment names no run of its own: it is never a target.
        assert_eq!(end_descendants("no-such-run", 0), 0);
    }

    /// A process that may be between exec's new image and its environment: this one may be
    /// (alive, a user process); a kernel thread and a zombie may not.
    #[cfg(target_os = "linux")]
    #[test]
    fn only_a_live_user_process_is_read_again_for_its_environment() {
        let me = std::process::id();
        let mine = start_time(me).unwrap();
        assert!(may_be_in_exec(me, mine));
        // Started before the run: not the run's.
        assert!(!may_be_in_exec(me, mine + 1));
        // kthreadd, the kernel threads' parent, where this runs with a kernel's threads
        // visible (not in every container).
        if std::fs::read_to_string("/proc/2/stat").is_ok_and(|s| s.contains("(kthreadd)")) {
            assert!(!may_be_in_exec(2, 0));
        }
        let mut zombie = std::process::Command::new("true").spawn().unwrap();
        let pid = zombie.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| !s.rsplit_once(')').unwrap().1.trim_start().starts_with('Z'))
        {
            assert!(Instant::now() < deadline, "true {pid} never ended");
            thread::sleep(Duration::from_millis(5));
        }
        assert!(!may_be_in_exec(pid, 0));
        zombie.wait().unwrap();
        let environ = format!("A=1\0{TREE_ENV}=11:2:3,44:5:6\0B=2\0");
        assert!(names_run(environ.as_bytes(), "44:5:6"));
        assert!(!names_run(environ.as_bytes(), "4:5:6"));
        assert!(!names_run(b"A=1\0", "44:5:6"));
    }

    /// The signal handler's scan finds and ends what carries a run id of this process.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_signal_safe_scan_ends_what_carries_this_processs_run_ids() {
        // An identity of its own: this process's real one is on the children of the tests
        // running beside this one, which the scan would end.
        let identity = "4242424:4242";
        // Another klab's id that ends like this one's (pid 14242424) is not this one's.
        let mut bystander = std::process::Command::new("sleep")
            .arg("303")
            .env(TREE_ENV, format!("1{identity}:5"))
            .spawn()
            .unwrap();
        let mut daemon = std::process::Command::new("sleep")
            .arg("302")
            .env(TREE_ENV, format!("1:1:0,{identity}:77"))
            .spawn()
            .unwrap();
        let pid = daemon.id();
        thread::sleep(Duration::from_millis(100));
        signal_safe::remember_identity(identity);
        signal_safe::end_every_descendant();
        let status = daemon.wait().unwrap();
        assert!(!status.success(), "sleep {pid} was not ended");
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "another klab's run was ended"
        );
        bystander.kill().unwrap();
        bystander.wait().unwrap();
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
    fn the_watchdog_kills_a_child_that_ignores_sigterm_and_its_grandchildren() {
        // The shell ignores TERM and leaves a grandchild in its group.
        let (p, a) = sh("trap '' TERM; sleep 30 & echo $!; wait");
        let c = run_captured(&p, &a, Duration::from_millis(500)).unwrap();
        assert!(c.timed_out);
        let grandchild: i32 = String::from_utf8_lossy(&c.stdout).trim().parse().unwrap();
        // Killed with the group (and reaped by whoever inherited it).
        let t0 = Instant::now();
        let alive = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(false)
        };
        while alive(grandchild) && t0.elapsed() < Duration::from_secs(5) {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(grandchild), "the grandchild outlived the watchdog");
    }

    /// A child started ahead runs up to where it waits for its turn, gets it on its stdin,
    /// and is waited for with a watchdog that starts at the wait; one dropped before its
    /// turn is killed and reaped, not left waiting.
    #[test]
    fn a_child_started_ahead_waits_for_its_turn_and_dies_when_dropped() {
        let (p, a) = sh("echo ready; t=$(head -c 1); echo \"turn $t\"");
        let opts = RunOptions {
            turns: true,
            ..RunOptions::new(Duration::from_secs(30))
        };
        let mut c = spawn(&p, &a, &opts).unwrap();
        // Waiting before its turn: the watchdog has not started, so a short one is fine
        // once the turn comes.
        thread::sleep(Duration::from_millis(300));
        c.give(b't').unwrap();
        let mut polled = 0;
        let out = c.wait(Duration::from_secs(5), &mut || polled += 1).unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ready\nturn t\n");
        assert_eq!(out.exit_code, Some(0));
        assert!(polled >= 1);

        let (p, a) = sh("echo $$; sleep 30");
        let c = spawn(&p, &a, &opts).unwrap();
        let pid = c.child.id() as i32;
        let t0 = Instant::now();
        drop(c);
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(
            std::fs::metadata(format!("/proc/{pid}")).is_err(),
            "a dropped child is reaped"
        );
        // Without turns there is nothing to give.
        let (p, a) = sh("true");
        let mut c = spawn(&p, &a, &RunOptions::new(Duration::from_secs(5))).unwrap();
        assert!(c.give(b't').is_err());
    }

    #[test]
    fn a_child_gets_its_folder_and_variables_and_can_take_its_group_down_on_exit() {
        let dir = tempfile::tempdir().unwrap();
        let (p, a) = sh("pwd; echo \"$KLAB_TEST_VAR\"; sleep 30 & echo $!");
        let opts = RunOptions {
            dir: Some(dir.path().to_path_buf()),
            env: vec![("KLAB_TEST_VAR".into(), "set".into())],
            end_group_on_exit: true,
            ..RunOptions::new(Duration::from_secs(30))
        };
        let t0 = Instant::now();
        let c = run(&p, &a, &opts).unwrap();
        // The background sleep held the pipes: ending the group closes them at once.
        assert!(t0.elapsed() < DRAIN_GRACE, "{:?}", t0.elapsed());
        assert!(!c.incomplete);
        let out = String::from_utf8(c.stdout).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            Path::new(lines[0]).canonicalize().unwrap(),
            dir.path().canonicalize().unwrap()
        );
        assert_eq!(lines[1], "set");
        let bg: i32 = lines[2].parse().unwrap();
        let gone = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        };
        let t0 = Instant::now();
        while !gone(bg) && t0.elapsed() < Duration::from_secs(5) {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(bg), "the background child outlived the call");
    }

    #[test]
    fn a_child_reads_a_regular_file_as_its_stdin_and_never_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.txt");
        std::fs::write(&input, "from the file\n").unwrap();
        let (p, a) = sh("cat");
        let kind = klab_core::artifact::Input::RECEIPT;
        let opts = RunOptions {
            stdin: Some((input, kind)),
            ..RunOptions::new(Duration::from_secs(10))
        };
        let c = run(&p, &a, &opts).unwrap();
        assert_eq!(c.stdout, b"from the file\n");
        // Without it, stdin is /dev/null.
        let c = run_captured(&p, &a, Duration::from_secs(10)).unwrap();
        assert!(c.stdout.is_empty());
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let opts = RunOptions {
            stdin: Some((fifo, kind)),
            ..RunOptions::new(Duration::from_secs(10))
        };
        let e = run(&p, &a, &opts).unwrap_err().to_string();
        assert!(
            e.contains("is a FIFO (named pipe), not a regular file"),
            "{e}"
        );
    }

    #[test]
    fn children_are_told_they_are_klab_children() {
        let (p, a) = sh("echo \"$KLAB_CHILD\"");
        let c = run_captured(&p, &a, Duration::from_secs(10)).unwrap();
        assert_eq!(c.stdout, b"1\n");
    }

    #[test]
    fn a_process_is_known_by_its_pid_and_start_time() {
        let me = parse_identity(&self_identity()).unwrap();
        assert_eq!(me.0, std::process::id());
        assert!(me.1 > 0);
        assert!(is_running(me));
        // The same pid with another start time is another process.
        assert!(!is_running((me.0, me.1 + 1)));
        assert!(!is_running((u32::MAX - 1, 1)));
        assert_eq!(parse_identity("12:x"), None);
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
        // A bare name given is the file of that name here, not a lookup on PATH.
        assert_eq!(
            locate_tool_in(Some(Path::new("tool")), "tool", Some(&path), &[]),
            Some(PathBuf::from("./tool"))
        );
    }

    #[test]
    fn a_given_tool_that_cannot_start_is_said_before_it_is_started() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(explicit_tool_problem(&plain), Some("not executable"));
        assert_eq!(explicit_tool_problem(dir.path()), Some("not a file"));
        assert_eq!(
            explicit_tool_problem(&dir.path().join("none")),
            Some("no such file")
        );
        assert_eq!(explicit_tool_problem(Path::new("/bin/sh")), None);
    }
}
