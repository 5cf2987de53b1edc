//! A command reference: a program (NumPy, PyTorch, anything) that reads a declared
//! operation's inputs as `.npy` files and writes its expected outputs the same way.
//!
//! Per call klab makes a fresh private folder and writes into it `<buffer>.npy` for every
//! `in` and `inout` buffer (its declared dtype; its declared `shape`, else 1-D) and
//! `params.json`:
//!
//! ```json
//! {"values": {"rows": 7, "cols": 33, "eps": 9.999999747378752e-06},
//!  "dtypes": {"rows": "i32", "cols": "i32", "eps": "f32"}}
//! ```
//!
//! every size variable and scalar by name, valued as the kernel receives it (an f32 scalar
//! already rounded to f32), typed by its parameter (a size the kernel does not take is
//! `i64`), and under `"buffers"` every buffer in the kernel's order, as
//! `{"name": "x", "dtype": "f32", "shape": [7, 33], "role": "in"}` (what a generic runner,
//! such as the Python package's `klab.reference`, needs to know what to write). Then it runs the argv without a shell, in the manifest's folder, with
//! `KLAB_REF_DIR=<folder>` in the environment and every argument that is exactly `{dir}`
//! replaced by the folder; `argv[0]` is relative to the manifest's folder when it holds a
//! `/`, else looked up in `PATH`. The program must write `<buffer>.npy` for every `out` and
//! `inout` buffer, which klab reads strictly: little-endian, C order, the buffer's dtype
//! exactly (bf16 has no NumPy dtype: its raw bits as `<u2`), and the declared shape or
//! the flat 1-D one of the same length. A non-zero exit, a signal, the watchdog
//! ([`CommandSpec::timeout`]), a missing or malformed output each fail the call with one
//! line; the program's process group is killed when it exits, so nothing it started
//! outlives the call, and the folder is removed afterwards.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klab_core::dtype::Dtype;
use klab_core::npy;
use klab_engine::declared::Shape;
use klab_engine::reference::Reference;
use klab_spec::declared::{CommandSpec, DeclaredOp, OpParam, Role};

use crate::process::{self, RunOptions};

/// The variable that names the call's folder in the program's environment.
pub const DIR_ENV: &str = "KLAB_REF_DIR";
/// An argument replaced by the call's folder.
pub const DIR_ARG: &str = "{dir}";
/// The stderr lines an error quotes, and the most characters it quotes of them.
const STDERR_LINES: usize = 3;
const STDERR_CHARS: usize = 300;
/// How much of the program's output is kept: far more than [`STDERR_LINES`] lines need.
const STDERR_KEPT: usize = 64 << 10;

/// Why a command reference could not be set up or called: one line.
#[derive(Debug, thiserror::Error)]
#[error("command reference {command}: {why}")]
pub struct CmdRefError {
    /// The argv as written.
    pub command: String,
    pub why: String,
}

/// A command reference, ready to call.
#[derive(Debug)]
pub struct CommandReference {
    spec: CommandSpec,
    /// `argv[0]`: absolute when written with a `/`, else a name for `PATH`.
    program: PathBuf,
    /// The manifest's folder, absolute: the working directory.
    workdir: PathBuf,
    op: Arc<DeclaredOp>,
}

impl CommandReference {
    /// Set up `spec` for `op`, whose manifest lives in `manifest_dir`. A program written
    /// as a path must exist.
    pub fn new(
        spec: &CommandSpec,
        op: Arc<DeclaredOp>,
        manifest_dir: &Path,
    ) -> Result<CommandReference, CmdRefError> {
        let command = spec.argv.join(" ");
        let bad = |why: String| CmdRefError {
            command: command.clone(),
            why,
        };
        let first = spec
            .argv
            .first()
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| bad("no program given".into()))?;
        let dir = if manifest_dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            manifest_dir
        };
        let workdir =
            std::path::absolute(dir).map_err(|e| bad(format!("{}: {e}", dir.display())))?;
        let program = if first.contains('/') {
            let p = workdir.join(first);
            let relative = match Path::new(first).is_absolute() {
                true => String::new(),
                false => format!(" (relative to {})", workdir.display()),
            };
            match std::fs::metadata(&p) {
                Ok(m) if m.is_file() => {}
                Ok(_) => return Err(bad(format!("{first}: not a file{relative}"))),
                Err(_) => return Err(bad(format!("{first}: no such file{relative}"))),
            }
            p
        } else {
            PathBuf::from(first)
        };
        Ok(CommandReference {
            spec: spec.clone(),
            program,
            workdir,
            op,
        })
    }

    fn fail(&self, why: String) -> CmdRefError {
        CmdRefError {
            command: self.spec.argv.join(" "),
            why,
        }
    }

    /// Compute the outputs at `shape`: `buffers` in the kernel's buffer order, `ints` and
    /// `floats` the kernel's other parameters (see [`Reference`]).
    pub fn call(
        &self,
        shape: &Shape,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), CmdRefError> {
        let named: Vec<&str> = self
            .op
            .params
            .iter()
            .filter_map(|p| match p {
                OpParam::Buffer(n) => Some(n.as_str()),
                _ => None,
            })
            .collect();
        if named.len() != buffers.len() {
            return Err(self.fail(format!(
                "expected {} buffers, got {}",
                named.len(),
                buffers.len()
            )));
        }
        let folder = CallDir::create().map_err(|e| self.fail(format!("a private folder: {e}")))?;
        let dir = folder.path.as_path();
        let write = |name: &str, bytes: &[u8]| {
            klab_core::artifact::write_atomic(&dir.join(name), bytes)
                .map_err(|e| self.fail(format!("writing {name}: {e}")))
        };
        let mut dims = Vec::with_capacity(buffers.len());
        for (name, bytes) in named.iter().zip(buffers.iter()) {
            let b = &self.op.spec.buffers[*name];
            let d = self.dims(name, b.dtype, bytes.len(), shape)?;
            if matches!(b.role, Role::In | Role::Inout) {
                let file = npy::to_bytes(b.dtype, &d, bytes)
                    .map_err(|e| self.fail(format!("{name}.npy: {e}")))?;
                write(&format!("{name}.npy"), &file)?;
            }
            dims.push(d);
        }
        let params = self.params_json(shape, ints, floats, &named, &dims)?;
        write("params.json", params.as_bytes())?;

        let args: Vec<OsString> = self.spec.argv[1..]
            .iter()
            .map(|a| match a.as_str() {
                DIR_ARG => dir.as_os_str().to_owned(),
                _ => OsString::from(a),
            })
            .collect();
        let opts = RunOptions {
            dir: Some(self.workdir.clone()),
            env: vec![(DIR_ENV.into(), dir.as_os_str().to_owned())],
            end_group_on_exit: true,
            // Only stderr's last lines are ever quoted; a chatty reference costs no memory.
            keep_tail: Some(STDERR_KEPT),
            ..RunOptions::new(self.spec.timeout())
        };
        let cap =
            process::run(&self.program, &args, &opts).map_err(|e| self.fail(e.to_string()))?;
        if cap.timed_out {
            return Err(self.fail(format!(
                "still running after {} s: killed (timeout_s in the reference table sets the limit)",
                self.spec.timeout().as_secs()
            )));
        }
        if cap.exit_code != Some(0) {
            let how = match (cap.exit_code, cap.signal) {
                (Some(c), _) => format!("exited with code {c}"),
                (None, Some(s)) => format!("was killed by signal {s}"),
                (None, None) => "ended abnormally".into(),
            };
            return Err(self.fail(format!("{how}; {}", stderr_tail(&cap.stderr))));
        }

        let outputs: Vec<&str> = named
            .iter()
            .copied()
            .filter(|n| self.op.spec.buffers[*n].role.compared())
            .collect();
        for ((name, bytes), d) in named.iter().zip(buffers.iter_mut()).zip(&dims) {
            let b = &self.op.spec.buffers[*name];
            if !b.role.compared() {
                continue;
            }
            let path = dir.join(format!("{name}.npy"));
            if std::fs::metadata(&path).is_err() {
                return Err(self.fail(format!(
                    "wrote no {name}.npy (it must write a .npy for every out and inout buffer: {}; {})",
                    outputs.join(", "),
                    stderr_tail(&cap.stderr)
                )));
            }
            read_output(&path, name, b.dtype, d, bytes).map_err(|why| self.fail(why))?;
        }
        Ok(())
    }

    /// The buffer's dimensions: its declared shape at `shape`, else its length.
    fn dims(
        &self,
        name: &str,
        dtype: Dtype,
        bytes: usize,
        shape: &Shape,
    ) -> Result<Vec<u64>, CmdRefError> {
        let elements = (bytes / dtype.size_bytes()) as u64;
        let Some(exprs) = &self.op.spec.buffers[name].shape else {
            return Ok(vec![elements]);
        };
        let d = exprs
            .iter()
            .map(|e| e.eval_u64(shape))
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|e| self.fail(format!("buffer {name}'s shape: {e}")))?;
        if d.iter().try_fold(1u64, |a, x| a.checked_mul(*x)) != Some(elements) {
            return Err(self.fail(format!(
                "buffer {name}'s shape {} does not hold its {elements} elements",
                npy::shape_repr(&d)
            )));
        }
        Ok(d)
    }

    /// `params.json`: every size variable and scalar, valued as the kernel receives it, and
    /// every buffer (`named`, of `dims`) in the kernel's order.
    fn params_json(
        &self,
        shape: &Shape,
        ints: &[i64],
        floats: &[f64],
        named: &[&str],
        dims: &[Vec<u64>],
    ) -> Result<String, CmdRefError> {
        let mut values = serde_json::Map::new();
        let mut dtypes = serde_json::Map::new();
        let (mut i, mut f) = (ints.iter(), floats.iter());
        let short = || self.fail("fewer integer or float parameters than the kernel takes".into());
        for p in &self.op.params {
            let (name, dtype) = match p {
                OpParam::Buffer(_) => continue,
                OpParam::Size(n, d) | OpParam::Scalar(n, d) => (n, *d),
            };
            let v = match dtype {
                d if d.is_float() => serde_json::json!(d.nearest(*f.next().ok_or_else(short)?)),
                // The kernel reads the same 64 bits as unsigned.
                Dtype::U64 => serde_json::json!(*i.next().ok_or_else(short)? as u64),
                _ => serde_json::json!(*i.next().ok_or_else(short)?),
            };
            values.insert(name.clone(), v);
            dtypes.insert(name.clone(), dtype.name().into());
        }
        for (name, v) in shape {
            if !values.contains_key(name) {
                values.insert(name.clone(), (*v).into());
                dtypes.insert(name.clone(), Dtype::I64.name().into());
            }
        }
        let buffers: Vec<serde_json::Value> = named
            .iter()
            .zip(dims)
            .map(|(name, d)| {
                let b = &self.op.spec.buffers[*name];
                serde_json::json!({
                    "name": name,
                    "dtype": b.dtype.name(),
                    "shape": d,
                    "role": b.role.name(),
                })
            })
            .collect();
        let doc = serde_json::json!({ "values": values, "dtypes": dtypes, "buffers": buffers });
        Ok(format!("{doc}\n"))
    }
}

impl Reference for CommandReference {
    fn run(
        &self,
        shape: &Shape,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), String> {
        self.call(shape, buffers, ints, floats)
            .map_err(|e| e.to_string())
    }

    fn describe(&self) -> String {
        format!("command reference {}", self.spec.argv.join(" "))
    }
}

/// Read the program's `<name>.npy` into `bytes`, buffer `name`'s host copy of `dims`:
/// the dtype exactly (bf16 as `<u2`), the declared shape or the flat one.
fn read_output(
    path: &Path,
    name: &str,
    dtype: Dtype,
    dims: &[u64],
    bytes: &mut [u8],
) -> Result<(), String> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("{name}.npy: {e}"))?
        .len();
    // Never read more than the buffer and a header could take.
    if len > bytes.len() as u64 + (1 << 20) {
        return Err(format!(
            "{name}.npy is {len} bytes; buffer {name} holds {} bytes",
            bytes.len()
        ));
    }
    let a = npy::read_file(path).map_err(|e| format!("{name}.npy: {e}"))?;
    let held = a.dtype;
    let a = a.declared(dtype).map_err(|_| {
        format!(
            "{name}.npy holds {} but buffer {name} is {}",
            describe_dtype(held),
            describe_dtype(dtype)
        )
    })?;
    let elements = bytes.len() / dtype.size_bytes();
    if a.shape != dims && a.shape != [elements as u64] {
        return Err(format!(
            "{name}.npy has shape {} but buffer {name} is {} ({elements} elements; the flat ({elements},) is accepted too)",
            npy::shape_repr(&a.shape),
            npy::shape_repr(dims)
        ));
    }
    bytes.copy_from_slice(&a.data);
    Ok(())
}

/// `f32 (<f4)`; bf16 says it travels as raw bits.
fn describe_dtype(d: Dtype) -> String {
    match d {
        Dtype::Bf16 => "bf16 (raw bits as <u2)".into(),
        _ => format!("{d} ({})", d.npy_descr()),
    }
}

/// The last lines of the program's stderr, on one line and clipped.
fn stderr_tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return "no stderr".into();
    }
    let tail = lines[lines.len().saturating_sub(STDERR_LINES)..].join(" | ");
    let count = tail.chars().count();
    let tail = if count > STDERR_CHARS {
        let skip = count - STDERR_CHARS;
        format!("...{}", tail.chars().skip(skip).collect::<String>())
    } else {
        tail
    };
    format!("stderr ends: {tail}")
}

/// A call's private folder (mode 0700), removed when dropped, or by the signal handler
/// when a signal ends this process ([`process::RemovedOnSignal`]). Its name holds where
/// this process runs ([`here`]), its pid and its start time, so that a folder left by a
/// klab killed outright (SIGKILL, which no handler sees) is known as such and removed by
/// the next call on the same machine and PID namespace.
struct CallDir {
    path: PathBuf,
    _on_signal: process::RemovedOnSignal,
}

/// The names of call folders start so.
const CALL_DIR_PREFIX: &str = "klab-ref-";

impl CallDir {
    fn create() -> std::io::Result<CallDir> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let root = std::path::absolute(std::env::temp_dir())?;
        let here = here();
        // Once a process: a reference is called once per case, and the temporary folder
        // can hold thousands of entries.
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| remove_abandoned(&root, &here));
        let pid = std::process::id();
        let started = process::start_time(pid).unwrap_or(0);
        let mut last = None;
        for _ in 0..8 {
            let n = CALLS.fetch_add(1, Ordering::Relaxed);
            let path = root.join(format!("{CALL_DIR_PREFIX}{here}-{pid}-{started}-{n}"));
            let mut b = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
            match b.create(&path) {
                Ok(()) => {
                    let _on_signal = process::RemovedOnSignal::register(&path);
                    return Ok(CallDir { path, _on_signal });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("eight attempts"))
    }
}

impl Drop for CallDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Where this process runs, as 16 hex digits: the boot, the PID namespace and the host. A
/// pid says whether a klab is alive only where it was read; a temporary folder shared with
/// another container or node holds folders of pids this process cannot see.
fn here() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let pid_ns = std::fs::read_link("/proc/self/ns/pid").unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let place = format!("{}|{}|{}", boot.trim(), pid_ns.display(), host.trim());
    klab_core::artifact::sha256_hex(place.as_bytes())[..16].to_string()
}

/// Remove the call folders in `root` whose klab is gone (`klab-ref-HERE-PID-START-N` of
/// this machine and PID namespace, `here`, a process PID that started at START no longer
/// running), best effort. Only this user's: another user's cannot be removed, and is left.
fn remove_abandoned(root: &Path, here: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let here = format!("{CALL_DIR_PREFIX}{here}-");
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&here)) else {
            continue;
        };
        let mut parts = rest.split('-');
        let (Some(Ok(pid)), Some(Ok(started)), Some(Ok(_)), None) = (
            parts.next().map(str::parse::<u32>),
            parts.next().map(str::parse::<u64>),
            parts.next().map(str::parse::<u64>),
            parts.next(),
        ) else {
            continue;
        };
        let is_folder = e.file_type().is_ok_and(|t| t.is_dir());
        if is_folder && started != 0 && !process::is_running((pid, started)) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use klab_spec::declared::DeclaredOpSpec;

    /// y = a * x and s[r] += r over x (rows x cols), in Python's standard library only: a
    /// tiny .npy reader and writer. The first argument picks a misbehaviour; the second
    /// must be the folder (`{dir}`); the third is a file to leave notes in.
    const REF_PY: &str = r#"
import ast, json, os, struct, subprocess, sys, time

def load(path):
    b = open(path, 'rb').read()
    assert b[:6] == b'\x93NUMPY', path
    if b[6] == 1:
        n, start = struct.unpack('<H', b[8:10])[0], 10
    else:
        n, start = struct.unpack('<I', b[8:12])[0], 12
    h = ast.literal_eval(b[start:start + n].decode('latin1'))
    return h['descr'], h['shape'], b[start + n:]

def save(path, descr, shape, data):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    pad = 64 - (10 + len(d) + 1) % 64
    h = (d + ' ' * pad + '\n').encode('latin1')
    open(path, 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h + data)

mode, d, notes = sys.argv[1], sys.argv[2], sys.argv[3]
assert d == os.environ['KLAB_REF_DIR'], (d, os.environ['KLAB_REF_DIR'])
p = json.load(open(os.path.join(d, 'params.json')))
v, t = p['values'], p['dtypes']
assert t == {'rows': 'i32', 'cols': 'i32', 'a': 'f32', 'k': 'i64'}, t
assert v['k'] == 2, v
assert v['a'] == struct.unpack('<f', struct.pack('<f', 0.1))[0], 'a reaches the program as the f32 the kernel gets'
assert v['rows'] == 3 and v['cols'] == 5, v
assert p['buffers'] == [
    {'name': 'x', 'dtype': 'f32', 'shape': [3, 5], 'role': 'in'},
    {'name': 'y', 'dtype': 'f32', 'shape': [3, 5], 'role': 'out'},
    {'name': 's', 'dtype': 'i32', 'shape': [3], 'role': 'inout'},
], p['buffers']
with open(notes, 'w') as f:
    f.write(json.dumps({'dir': d, 'cwd': os.getcwd(), 'pid': os.getpid(), 'files': sorted(os.listdir(d))}))
rows, cols, a = v['rows'], v['cols'], v['a']
descr, shape, data = load(os.path.join(d, 'x.npy'))
assert descr == '<f4' and shape == (rows, cols), (descr, shape)
x = struct.unpack('<%df' % (rows * cols), data)
y = struct.pack('<%df' % len(x), *[a * e for e in x])
sd, sshape, sdata = load(os.path.join(d, 's.npy'))
assert sd == '<i4' and sshape == (rows,), (sd, sshape)
s = struct.unpack('<%di' % rows, sdata)
s = struct.pack('<%di' % rows, *[e + r for r, e in enumerate(s)])
if mode == 'fail':
    sys.stderr.write('Traceback (most recent call last):\n  File "ref.py"\nValueError: the reference is unhappy\n')
    sys.exit(3)
if mode == 'hang':
    child = subprocess.Popen(['sleep', '300'])
    with open(notes, 'w') as f:
        f.write(json.dumps({'pid': os.getpid(), 'child': child.pid}))
    time.sleep(300)
if mode == 'background':
    child = subprocess.Popen(['sleep', '300'])
    with open(notes, 'w') as f:
        f.write(json.dumps({'pid': os.getpid(), 'child': child.pid, 'dir': d}))
save(os.path.join(d, 's.npy'), '<i4', (rows,), s)
if mode == 'missing':
    sys.exit(0)
if mode == 'f64':
    save(os.path.join(d, 'y.npy'), '<f8', (rows, cols), struct.pack('<%dd' % len(x), *x))
elif mode == 'transposed':
    save(os.path.join(d, 'y.npy'), '<f4', (cols, rows), y)
elif mode == 'short':
    save(os.path.join(d, 'y.npy'), '<f4', (rows * cols - 1,), y[4:])
elif mode == 'flat':
    save(os.path.join(d, 'y.npy'), '<f4', (rows * cols,), y)
else:
    save(os.path.join(d, 'y.npy'), '<f4', (rows, cols), y)
"#;

    const OP: &str = r#"
grid = ["rows"]
block = ["32"]
useful_bytes = "8 * rows * cols"
reference = { command = { argv = ["python3", "ref.py", "MODE", "{dir}", "NOTES"], timeout_s = 20 } }
sizes.rows = {}
sizes.cols = {}
sizes.k = { values = [2] }
buffers.x = { dtype = "f32", len = "rows * cols", role = "in", shape = ["rows", "cols"] }
buffers.y = { dtype = "f32", len = "rows * cols", role = "out", shape = ["rows", "cols"], compare = "bitwise" }
buffers.s = { dtype = "i32", len = "rows", role = "inout", compare = "exact" }
scalars.a = { type = "f32", values = [0.1] }
"#;

    fn have_python() -> bool {
        let ok = process::run_captured(
            Path::new("python3"),
            &["-c".into(), "import json".into()],
            std::time::Duration::from_secs(30),
        )
        .is_ok_and(|c| c.exit_code == Some(0));
        if !ok {
            eprintln!("SKIPPED: python3 is not on this machine");
        }
        ok
    }

    struct Case {
        dir: tempfile::TempDir,
        reference: CommandReference,
    }

    impl Case {
        fn notes(&self) -> serde_json::Value {
            let text = std::fs::read_to_string(self.dir.path().join("notes.json")).unwrap();
            serde_json::from_str(&text).unwrap()
        }
    }

    fn case(mode: &str, op_text: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ref.py"), REF_PY).unwrap();
        let notes = dir.path().join("notes.json");
        let text = op_text
            .replace("MODE", mode)
            .replace("NOTES", notes.to_str().unwrap());
        let spec: DeclaredOpSpec = toml::from_str(&text).unwrap();
        let params: Vec<String> = ["x", "y", "s", "rows:i32", "cols:i32", "a:f32"]
            .map(String::from)
            .to_vec();
        let op = Arc::new(spec.validate(&params).unwrap());
        let klab_spec::declared::ReferenceSpec::Command(c) = &op.spec.reference else {
            panic!()
        };
        let reference = CommandReference::new(c, op.clone(), dir.path()).unwrap();
        Case { dir, reference }
    }

    const ROWS: usize = 3;
    const COLS: usize = 5;

    /// Call the reference at 3 x 5: (y, s) or the error.
    fn call(c: &Case) -> Result<(Vec<f32>, Vec<i32>), String> {
        let x: Vec<u8> = (0..ROWS * COLS)
            .flat_map(|i| (i as f32 - 7.0).to_le_bytes())
            .collect();
        let mut x = x;
        let mut y = vec![0u8; ROWS * COLS * 4];
        let mut s: Vec<u8> = [10i32, 20, 30]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let shape = Shape::from([
            ("rows".into(), ROWS as i64),
            ("cols".into(), COLS as i64),
            ("k".into(), 2),
        ]);
        c.reference
            .run(
                &shape,
                &mut [&mut x, &mut y, &mut s],
                &[ROWS as i64, COLS as i64],
                &[0.1],
            )
            .map(|()| {
                (
                    y.chunks(4)
                        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                        .collect(),
                    s.chunks(4)
                        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
                        .collect(),
                )
            })
    }

    fn alive(pid: i64) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    }

    fn gone_soon(pid: i64) -> bool {
        let t0 = std::time::Instant::now();
        while alive(pid) && t0.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        !alive(pid)
    }

    #[test]
    fn the_outputs_land_and_the_folder_is_removed() {
        if !have_python() {
            return;
        }
        for mode in ["ok", "flat"] {
            let c = case(mode, OP);
            let (y, s) = call(&c).unwrap();
            let a = 0.1f32;
            let want: Vec<f32> = (0..ROWS * COLS).map(|i| a * (i as f32 - 7.0)).collect();
            assert_eq!(y, want, "{mode}");
            assert_eq!(s, [10, 21, 32], "the inout buffer is set and read back");
            let notes = c.notes();
            let dir = PathBuf::from(notes["dir"].as_str().unwrap());
            assert!(!dir.exists(), "{} was left behind", dir.display());
            assert_eq!(
                notes["files"],
                serde_json::json!(["params.json", "s.npy", "x.npy"]),
                "inputs and in-out buffers only"
            );
            assert_eq!(
                Path::new(notes["cwd"].as_str().unwrap())
                    .canonicalize()
                    .unwrap(),
                c.dir.path().canonicalize().unwrap(),
                "the program runs in the manifest's folder"
            );
        }
        let c = case("ok", OP);
        assert_eq!(
            c.reference.describe(),
            format!(
                "command reference python3 ref.py ok {{dir}} {}",
                c.dir.path().join("notes.json").display()
            ),
            "the argv as written"
        );
    }

    /// A call folder whose klab is gone (SIGKILL leaves it: no handler runs) is removed by
    /// the next call; a live klab's, another name, or a file are left alone.
    #[test]
    fn folders_of_klabs_that_are_gone_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let started = process::start_time(me).unwrap();
        let at = format!("{CALL_DIR_PREFIX}{}-", here());
        let gone = root.path().join(format!("{at}4000000000-{started}-0"));
        let reused = root.path().join(format!("{at}{me}-{}-1", started + 1));
        let kept = [
            root.path().join(format!("{at}{me}-{started}-2")),
            root.path().join(format!("{at}4000000000-0-3")),
            root.path().join("klab-ref-mine"),
            root.path().join(format!("{at}4000000000-{started}")),
            // Another machine's or container's: its pids are not this process's to read.
            root.path().join(format!(
                "{CALL_DIR_PREFIX}0123456789abcdef-4000000000-{started}-4"
            )),
        ];
        for d in kept.iter().chain([&gone, &reused]) {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("x.npy"), "x").unwrap();
        }
        let file = root.path().join(format!("{at}4000000000-{started}-9"));
        std::fs::write(&file, "x").unwrap();
        remove_abandoned(root.path(), &here());
        assert!(!gone.exists() && !reused.exists(), "abandoned folders left");
        for d in kept.iter().chain([&file]) {
            assert!(d.exists(), "{} removed", d.display());
        }
    }

    #[test]
    fn each_bad_output_is_one_line_naming_the_buffer() {
        if !have_python() {
            return;
        }
        for (mode, needles) in [
            (
                "f64",
                &["y.npy holds f64 (<f8) but buffer y is f32 (<f4)"][..],
            ),
            (
                "transposed",
                &["y.npy has shape (5, 3) but buffer y is (3, 5) (15 elements; the flat (15,) is accepted too)"][..],
            ),
            ("short", &["y.npy has shape (14,) but buffer y is (3, 5)"][..]),
            (
                "missing",
                &["wrote no y.npy (it must write a .npy for every out and inout buffer: y, s"][..],
            ),
            (
                "fail",
                &[
                    "exited with code 3; stderr ends: Traceback (most recent call last): | File \"ref.py\" | ValueError: the reference is unhappy",
                ][..],
            ),
        ] {
            let c = case(mode, OP);
            let e = call(&c).unwrap_err();
            assert!(e.starts_with("command reference python3 ref.py"), "{e}");
            for n in needles {
                assert!(e.contains(n), "{mode}: {e}");
            }
            assert_eq!(e.lines().count(), 1, "{e}");
            let dir = PathBuf::from(c.notes()["dir"].as_str().unwrap());
            assert!(!dir.exists(), "{mode}: {} was left behind", dir.display());
        }
    }

    #[test]
    fn an_output_has_the_buffers_dtype_exactly_bf16_as_raw_bits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("y.npy");
        let read = |file: Dtype, buffer: Dtype, shape: &[u64]| {
            let data = vec![7u8; shape.iter().product::<u64>() as usize * file.size_bytes()];
            std::fs::write(&path, npy::to_bytes(file, shape, &data).unwrap()).unwrap();
            let mut got = vec![0u8; 6 * buffer.size_bytes()];
            read_output(&path, "y", buffer, &[2, 3], &mut got).map(|()| got)
        };
        // NumPy has no bfloat16: its bits travel as <u2, which a bf16 buffer takes.
        assert_eq!(read(Dtype::U16, Dtype::Bf16, &[2, 3]).unwrap(), [7; 12]);
        assert_eq!(read(Dtype::F16, Dtype::F16, &[6]).unwrap(), [7; 12]);
        assert_eq!(
            read(Dtype::U16, Dtype::F16, &[2, 3]).unwrap_err(),
            "y.npy holds u16 (<u2) but buffer y is f16 (<f2)"
        );
        assert_eq!(
            read(Dtype::F32, Dtype::Bf16, &[2, 3]).unwrap_err(),
            "y.npy holds f32 (<f4) but buffer y is bf16 (raw bits as <u2)"
        );
        assert!(
            read(Dtype::I32, Dtype::U32, &[2, 3]).is_err(),
            "signedness counts"
        );
        // A file far larger than the buffer is refused before it is read.
        std::fs::write(&path, vec![0u8; 2 << 20]).unwrap();
        let e = read_output(&path, "y", Dtype::F32, &[2, 3], &mut [0; 24]).unwrap_err();
        assert_eq!(e, "y.npy is 2097152 bytes; buffer y holds 24 bytes");
        // A file that is no .npy says so.
        std::fs::write(&path, b"not numpy").unwrap();
        let e = read_output(&path, "y", Dtype::F32, &[2, 3], &mut [0; 24]).unwrap_err();
        assert!(e.starts_with("y.npy: not a .npy file"), "{e}");
    }

    #[test]
    fn stderr_is_quoted_by_its_last_lines_clipped() {
        assert_eq!(stderr_tail(b""), "no stderr");
        assert_eq!(stderr_tail(b"a\n\n b \nc\nd\n"), "stderr ends: b | c | d");
        let long = format!("{}\nend", "x".repeat(1000));
        let t = stderr_tail(long.as_bytes());
        assert!(
            t.starts_with("stderr ends: ...xxx") && t.ends_with("x | end"),
            "{t}"
        );
        assert_eq!(t.chars().count(), "stderr ends: ...".len() + STDERR_CHARS);
    }

    #[test]
    fn a_hang_is_killed_by_the_timeout_with_everything_it_started() {
        if !have_python() {
            return;
        }
        let c = case("hang", &OP.replace("timeout_s = 20", "timeout_s = 2"));
        let t0 = std::time::Instant::now();
        let e = call(&c).unwrap_err();
        assert!(t0.elapsed() < std::time::Duration::from_secs(15));
        assert!(e.contains("still running after 2 s: killed"), "{e}");
        let notes = c.notes();
        for who in ["pid", "child"] {
            let pid = notes[who].as_i64().unwrap();
            assert!(gone_soon(pid), "the {who} ({pid}) outlived the timeout");
        }
    }

    #[test]
    fn nothing_the_program_leaves_running_outlives_the_call() {
        if !have_python() {
            return;
        }
        let c = case("background", OP);
        call(&c).unwrap();
        let child = c.notes()["child"].as_i64().unwrap();
        assert!(
            gone_soon(child),
            "the program's background child {child} outlived it"
        );
    }

    #[test]
    fn a_program_path_is_relative_to_the_manifest_and_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let spec: DeclaredOpSpec =
            toml::from_str(&OP.replace("\"python3\", \"ref.py\"", "\"./nope.py\"")).unwrap();
        let params: Vec<String> = ["x", "y", "s", "rows:i32", "cols:i32", "a:f32"]
            .map(String::from)
            .to_vec();
        let op = Arc::new(spec.validate(&params).unwrap());
        let klab_spec::declared::ReferenceSpec::Command(cmd) = &op.spec.reference else {
            panic!()
        };
        let e = CommandReference::new(cmd, op.clone(), dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("command reference ./nope.py MODE"), "{e}");
        assert!(e.contains("./nope.py: no such file (relative to "), "{e}");
        // A folder is not a program, and an absolute path is relative to nothing.
        let mut folder = cmd.clone();
        folder.argv[0] = "/tmp".into();
        let e = CommandReference::new(&folder, op.clone(), dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("/tmp: not a file"), "{e}");
        // A program that cannot start is one line too.
        let mut missing = cmd.clone();
        missing.argv[0] = "klab-no-such-program".into();
        let r = CommandReference::new(&missing, op.clone(), dir.path()).unwrap();
        let shape = Shape::from([("rows".into(), 1), ("cols".into(), 1), ("k".into(), 2)]);
        let e = r
            .call(
                &shape,
                &mut [&mut [0; 4], &mut [0; 4], &mut [0; 4]],
                &[1, 1],
                &[1.0],
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot start klab-no-such-program"), "{e}");
    }
}
