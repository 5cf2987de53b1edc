//! `klab lab` as a library: the transpose lab's investigation as a pipeline of steps.
//!
//! A [`LabPlan`] (kernels, sizes, tools; data, written to the run folder's `plan.json`
//! before any step) says what the steps run. [`STEPS`] is the pipeline: each step has a
//! name and the [`Need`]s it declares (a GPU, NVRTC, the built kernels, Compute Sanitizer,
//! Nsight Compute, cuBLAS). [`run`] probes what this machine has once ([`Machine`]), then
//! runs every step in order: a step whose needs are not met is recorded as skipped with the
//! first unmet need's reason, never attempted. Every kernel runs in a klab child process
//! under the watchdog; the caller says how to start one through [`Launcher`] (the binary
//! maps each [`Child`] to its own command line) and prints what the lab reports through it.
//! The run's record is `lab.json` ([`klab_evidence::schema::LabRecord`]), written after the
//! steps, again after the report, with every artifact's size and hash.

mod error;
mod plan;
mod steps;

use std::path::{Path, PathBuf};

use klab_core::artifact::{create_run_dir, sha256_file, utc_timestamp, write_atomic, FileError};
use klab_core::device::DeviceFacts;
use klab_core::samples::{Isolation, RoundOrder};
use klab_evidence::schema::{LabArtifact, LabPlan, LabRecord, LabStep};
use klab_run::child::{ChildResult, ChildVerdict};
use klab_tools::sanitizer::ToolList;
use serde::Serialize;

pub use error::LabError;
pub use plan::{check_plan, load_plan};

/// Something a step needs from the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Need {
    /// A CUDA device that opens.
    Gpu,
    /// The NVRTC library, to compile kernels.
    Nvrtc,
    /// The build step compiled the transpose lab's kernels.
    Kernels,
    /// The compute-sanitizer binary.
    Sanitizer,
    /// The Nsight Compute binary.
    Ncu,
    /// The cuBLAS library (the sgeam baseline).
    Cublas,
}

impl Need {
    pub fn as_str(self) -> &'static str {
        match self {
            Need::Gpu => "gpu",
            Need::Nvrtc => "nvrtc",
            Need::Kernels => "kernels",
            Need::Sanitizer => "sanitizer",
            Need::Ncu => "ncu",
            Need::Cublas => "cublas",
        }
    }
}

/// What this machine has, probed once before the first step.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The device's facts, or why none opened.
    pub device: Result<DeviceFacts, String>,
    pub nvrtc: bool,
    pub sanitizer: Option<PathBuf>,
    pub ncu: Option<PathBuf>,
    pub cublas: bool,
    /// Children that time nothing the lab reports, at once: half the cores, or one where
    /// the device's compute mode lets only one process hold it.
    pub untimed_at_once: usize,
}

impl Machine {
    /// Probe the device `ordinal` and the tools on PATH and in the toolkit's usual places.
    pub fn probe(ordinal: u32) -> Machine {
        Machine {
            device: klab_cuda::device::Device::open(ordinal)
                .map(|d| d.facts().clone())
                .map_err(|e| e.to_string()),
            nvrtc: klab_cuda::probe::nvrtc_present(),
            sanitizer: klab_tools::sanitizer::locate(None),
            ncu: klab_tools::ncu::locate_ncu(None),
            cublas: klab_cuda::probe::cublas_present(),
            untimed_at_once: klab_cuda::device::Device::processes_at_once(
                ordinal,
                klab_core::par::untimed_children(),
            ),
        }
    }

    /// Why `need` is not met, or `None` when it is (`built`: the build step's result).
    fn unmet(&self, need: Need, built: bool) -> Option<String> {
        let reason = match need {
            Need::Gpu if self.device.is_err() => {
                "no CUDA device: correctness and timing gates need a GPU"
            }
            Need::Nvrtc if !self.nvrtc => "NVRTC not found: kernels not compiled, resources unknown",
            Need::Kernels if !built => "kernels were not built",
            Need::Sanitizer if self.sanitizer.is_none() => {
                "compute-sanitizer not found (PATH, /usr/local/cuda/bin): the sanitizer gate did not run"
            }
            Need::Ncu if self.ncu.is_none() => {
                "Nsight Compute (ncu) not found (PATH, /usr/local/cuda/bin): no counters, no bound statements"
            }
            Need::Cublas if !self.cublas => {
                "libcublas could not be loaded: no cuBLAS sgeam baseline, so no ceilings step"
            }
            _ => return None,
        };
        Some(reason.to_string())
    }
}

/// A klab command the lab runs as a child, as data; the [`Launcher`] gives it the device
/// and the watchdog.
#[derive(Debug, Clone, PartialEq)]
pub enum Child {
    /// `klab transpose SELECTION N REPS` (the CSV on stdout).
    Transpose {
        selection: String,
        n: u64,
        reps: u32,
    },
    /// `klab bench KERNEL [--n N] --samples S --out OUT`.
    Bench {
        kernel: String,
        n: Option<u64>,
        samples: u32,
        out: PathBuf,
    },
    /// `klab rounds KERNELS --baseline B --n N --rounds R --samples S --out OUT`.
    Rounds {
        kernels: Vec<String>,
        baseline: String,
        n: u64,
        rounds: u32,
        samples: u32,
        /// What one process runs: a block, or a whole round's blocks.
        isolation: Isolation,
        /// Which blocks make a round.
        order: RoundOrder,
        out: PathBuf,
    },
    /// `klab sanitize KERNELS --tools T --sanitizer PATH --out OUT`.
    Sanitize {
        kernels: Vec<String>,
        tools: ToolList,
        sanitizer: PathBuf,
        out: PathBuf,
    },
    /// `klab profile KERNELS --n N --ncu PATH --out OUT`.
    Profile {
        kernels: Vec<String>,
        n: u64,
        ncu: PathBuf,
        out: PathBuf,
    },
}

/// A finished child, as the lab reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildOutcome {
    /// What it means: the one judgement of a finished child every klab parent uses.
    pub verdict: ChildVerdict,
    /// Its stdout.
    pub stdout: String,
    /// Its command line, output and status, for a log file.
    pub log: String,
    /// The result it said in its results file.
    pub result: Option<ChildResult>,
}

/// `run` on each of `children` (with its index), in order, up to and with the first that
/// could not be started: [`Launcher::run_in_turn`]'s outcomes.
pub fn in_turn(
    children: &[Child],
    mut run: impl FnMut(usize, &Child) -> Result<ChildOutcome, LabError>,
) -> Vec<Result<ChildOutcome, LabError>> {
    let mut outcomes = Vec::with_capacity(children.len());
    for (i, c) in children.iter().enumerate() {
        let outcome = run(i, c);
        let stop = outcome.is_err();
        outcomes.push(outcome);
        if stop {
            break;
        }
    }
    outcomes
}

/// How the lab starts klab's children and shows progress: the binary implements it.
pub trait Launcher {
    /// Run `child` to completion under a watchdog of `timeout_s` seconds. `Err` only when
    /// it could not be started.
    fn run(&mut self, child: &Child, timeout_s: u64) -> Result<ChildOutcome, LabError>;
    /// Run `children`, none of whose timings the lab reports, up to `jobs` at once, each as
    /// [`Launcher::run`] runs one; the outcomes in their order. By default one after another.
    fn run_all(
        &mut self,
        children: &[Child],
        timeout_s: u64,
        jobs: usize,
    ) -> Vec<Result<ChildOutcome, LabError>> {
        let _ = jobs;
        children.iter().map(|c| self.run(c, timeout_s)).collect()
    }
    /// Run `children`, whose timings the lab reports, one after another under a watchdog
    /// of `timeout_s` seconds each; the outcomes in their order, up to and with the first
    /// child that could not be started (none after it is run). A bench is paced as `klab
    /// rounds` paces its blocks: started while the one before it runs, and given the device
    /// once that one has closed it. By default each as [`Launcher::run`] runs it.
    fn run_in_turn(
        &mut self,
        children: &[Child],
        timeout_s: u64,
    ) -> Vec<Result<ChildOutcome, LabError>> {
        in_turn(children, |_, c| self.run(c, timeout_s))
    }
    /// A line for the person watching (stderr).
    fn note(&mut self, line: &str);
    /// Progress within a step: `done` of `total`, now on `what`.
    fn progress(&mut self, step: &str, done: u64, total: u64, what: &str);
    /// Text for stdout (the rounds table).
    fn print(&mut self, text: &str);
}

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ran,
    /// A gate failed.
    Failed,
    /// It could not run.
    Error,
    /// A need was not met.
    Skipped,
}

impl Status {
    /// A step whose child left nothing usable: failed when the kernel failed (a gate, a
    /// hang, a crash), else an error.
    pub fn unusable(verdict: &ChildVerdict) -> Status {
        if verdict.is_kernel_failure() {
            Status::Failed
        } else {
            Status::Error
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ran => "ran",
            Status::Failed => "failed",
            Status::Error => "error",
            Status::Skipped => "skipped",
        }
    }

    fn mark(self) -> &'static str {
        match self {
            Status::Ran => "ok",
            Status::Skipped => "SKIPPED",
            Status::Failed => "GATE FAILED",
            Status::Error => "ERROR",
        }
    }
}

/// The options of one run.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// The folder that receives `run-NN/`.
    pub out: PathBuf,
    pub device: u32,
    /// Rounds of the rounds and ceilings steps.
    pub rounds: u32,
    /// What one process of those steps runs: a block, or a whole round's blocks.
    pub isolation: Isolation,
    /// Which blocks make a round of those steps.
    pub order: RoundOrder,
    /// Watchdog per child process, seconds.
    pub timeout: u64,
    pub plan: LabPlan,
    /// The klab binary the children run (hashed into source.sha256).
    pub klab_binary: PathBuf,
    /// The command line, for lab.json.
    pub command: Vec<String>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabOutcome {
    pub dir: PathBuf,
    /// Some step could not run.
    pub error: bool,
    /// Some gate failed.
    pub gate_failed: bool,
    /// Steps skipped for an unmet need.
    pub skipped: Vec<String>,
}

/// A step of the pipeline.
pub struct StepDef {
    pub name: &'static str,
    pub needs: &'static [Need],
    run: fn(&mut Lab<'_>) -> Result<(), LabError>,
}

/// The run folder's folder of child logs: `logs/STEP.log`, one per step.
pub const LOGS_DIR: &str = "logs";

/// The pipeline, in order. The report step runs after these, always.
pub const STEPS: &[StepDef] = &[
    StepDef {
        name: "environment",
        needs: &[],
        run: steps::environment,
    },
    StepDef {
        name: "model",
        needs: &[],
        run: steps::model,
    },
    StepDef {
        name: "build",
        needs: &[Need::Nvrtc],
        run: steps::build,
    },
    StepDef {
        name: "ladder",
        needs: &[Need::Gpu, Need::Kernels],
        run: steps::ladder,
    },
    StepDef {
        name: "benchmark",
        needs: &[Need::Gpu, Need::Kernels],
        run: steps::benchmark,
    },
    StepDef {
        name: "receipts",
        needs: &[Need::Gpu, Need::Kernels],
        run: steps::receipts,
    },
    StepDef {
        name: "rounds",
        needs: &[Need::Gpu, Need::Kernels],
        run: steps::rounds,
    },
    StepDef {
        name: "sanitize",
        needs: &[Need::Gpu, Need::Kernels, Need::Sanitizer],
        run: steps::sanitize,
    },
    StepDef {
        name: "profile",
        needs: &[Need::Gpu, Need::Kernels, Need::Ncu],
        run: steps::profile,
    },
    StepDef {
        name: "ceilings",
        needs: &[Need::Gpu, Need::Kernels, Need::Cublas],
        run: steps::ceilings,
    },
];

/// A run in progress: its folder, what the machine has, the steps so far.
pub(crate) struct Lab<'a> {
    pub dir: PathBuf,
    pub opts: &'a LabOptions,
    pub machine: Machine,
    /// The build step compiled the kernels.
    pub built: bool,
    pub steps: Vec<LabStep>,
    pub launcher: &'a mut dyn Launcher,
    /// The step now running and its needs.
    current: (&'static str, &'static [Need]),
}

impl Lab<'_> {
    pub fn plan(&self) -> &LabPlan {
        &self.opts.plan
    }

    /// Write `bytes` to `name` in the run folder, atomically; the name is returned for the
    /// step's artifact list.
    pub fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> Result<String, LabError> {
        let path = self.dir.join(name);
        write_atomic(&path, bytes.as_ref())?;
        Ok(name.to_string())
    }

    /// What the lab saw of a step's children (their command lines, output and ends), in
    /// `logs/NAME.log`: a folder of the lab's own, so no command's own log is overwritten
    /// (`klab rounds` writes `rounds.log` in its folder) and a child that made no folder
    /// still leaves its log. The name is returned for the step's artifact list.
    pub fn log(&self, name: &str, text: impl AsRef<[u8]>) -> Result<String, LabError> {
        let logs = self.dir.join(LOGS_DIR);
        std::fs::create_dir_all(&logs).map_err(|error| FileError::Write { path: logs, error })?;
        self.write(&format!("{LOGS_DIR}/{name}.log"), text)
    }

    /// Record the current step's end.
    pub fn step(&mut self, status: Status, detail: String, artifacts: Vec<String>) {
        let (name, needs) = self.current;
        self.launcher
            .note(&format!("klab lab: [{}] {name}: {detail}", status.mark()));
        self.steps.push(LabStep {
            name: name.into(),
            status: status.as_str().into(),
            detail,
            artifacts,
            needs: needs.iter().map(|n| n.as_str().to_string()).collect(),
        });
    }

    /// Run a child under the watchdog, `processes` watchdog periods long (a child that
    /// itself runs several watched processes gets a deadline covering all of them).
    pub fn child(&mut self, child: &Child, processes: u64) -> Result<ChildOutcome, LabError> {
        self.launcher
            .run(child, self.opts.timeout.saturating_mul(processes.max(1)))
    }

    /// [`Lab::child`] for children whose timings the lab reports, one after another, each
    /// bench started while the one before it runs ([`Launcher::run_in_turn`]).
    pub fn children_in_turn(&mut self, children: &[Child]) -> Vec<Result<ChildOutcome, LabError>> {
        self.launcher.run_in_turn(children, self.opts.timeout)
    }

    /// [`Lab::child`] for children whose timings the lab does not report, up to `jobs` at
    /// once.
    pub fn untimed_children(
        &mut self,
        children: &[Child],
        jobs: usize,
    ) -> Vec<Result<ChildOutcome, LabError>> {
        self.launcher.run_all(children, self.opts.timeout, jobs)
    }

    pub fn progress(&mut self, done: u64, total: u64, what: &str) {
        let name = self.current.0;
        self.launcher.progress(name, done, total, what);
    }
}

/// Run the lab: a new `run-NN/` under `opts.out`, every step of [`STEPS`] whose needs the
/// machine meets, the report, and lab.json.
pub fn run(opts: &LabOptions, launcher: &mut dyn Launcher) -> Result<LabOutcome, LabError> {
    run_on(opts, Machine::probe(opts.device), launcher)
}

/// [`run`] on a machine already probed (or described, in tests).
pub fn run_on(
    opts: &LabOptions,
    machine: Machine,
    launcher: &mut dyn Launcher,
) -> Result<LabOutcome, LabError> {
    check_plan(&opts.plan)?;
    let started = utc_timestamp();
    let dir = create_run_dir(&opts.out).map_err(|source| LabError::RunDir {
        base: opts.out.clone(),
        source,
    })?;
    launcher.note(&format!("klab lab: writing {}", dir.display()));
    let mut lab = Lab {
        dir,
        opts,
        machine,
        built: false,
        steps: Vec::new(),
        launcher,
        current: ("", &[]),
    };
    // Where the time goes, per step (printed, never recorded: lab.json and the report stay
    // byte-identical for the same measurements).
    let mut times = Vec::new();
    for def in STEPS {
        lab.current = (def.name, def.needs);
        let unmet = def
            .needs
            .iter()
            .find_map(|&n| lab.machine.unmet(n, lab.built));
        let t = std::time::Instant::now();
        match unmet {
            Some(why) => lab.step(Status::Skipped, why, vec![]),
            None => (def.run)(&mut lab)?,
        }
        times.push(format!("{} {:.1} s", def.name, t.elapsed().as_secs_f64()));
    }
    lab.launcher
        .note(&format!("klab lab: time per step: {}", times.join(", ")));
    write_record(&lab, &started)?;
    lab.current = (klab_report::REPORT_DIR, &[]);
    steps::report(&mut lab);
    write_record(&lab, &started)?;
    let skipped: Vec<String> = lab
        .steps
        .iter()
        .filter(|s| s.status == Status::Skipped.as_str())
        .map(|s| s.name.clone())
        .collect();
    if !skipped.is_empty() {
        lab.launcher
            .note(&format!("klab lab: skipped gates: {}", skipped.join(", ")));
    }
    lab.launcher
        .note(&format!("klab lab: artifacts in {}", lab.dir.display()));
    Ok(LabOutcome {
        error: lab.steps.iter().any(|s| s.status == Status::Error.as_str()),
        gate_failed: lab
            .steps
            .iter()
            .any(|s| s.status == Status::Failed.as_str()),
        skipped,
        dir: lab.dir,
    })
}

/// lab.json: the steps so far and every artifact they list, sized and hashed.
fn write_record(lab: &Lab<'_>, started: &str) -> Result<(), LabError> {
    let mut artifacts = Vec::new();
    for s in &lab.steps {
        for name in &s.artifacts {
            let path = lab.dir.join(name);
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let sha256 = sha256_file(&path)?;
            artifacts.push(LabArtifact {
                path: name.clone(),
                bytes: Some(bytes),
                sha256: Some(sha256),
            });
        }
    }
    let record = LabRecord {
        klab_version: Some(env!("CARGO_PKG_VERSION").into()),
        command: lab.opts.command.clone(),
        started_utc: Some(started.to_string()),
        finished_utc: Some(utc_timestamp()),
        device: lab
            .machine
            .device
            .as_ref()
            .ok()
            .and_then(|f| serde_json::to_value(f).ok()),
        steps: lab.steps.clone(),
        artifacts,
    };
    let json = serde_json::to_string_pretty(&record).expect("a lab record serialises") + "\n";
    lab.write("lab.json", json)?;
    Ok(())
}

/// Files under `rel` in `dir` (recursively), as run-relative paths, sorted.
pub(crate) fn files_under(dir: &Path, rel: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![rel.to_string()];
    while let Some(r) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&r)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = format!("{r}/{}", e.file_name().to_string_lossy());
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(name),
                Ok(t) if t.is_file() => out.push(name),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests;
