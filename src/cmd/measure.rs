//! Shared by the commands that time kernels (`bench`, `triad`, `rounds`, `lab`): resolve a
//! built-in kernel, open the device, compile, run measurement blocks through the timing
//! engine with NVML state around each, and write raw samples plus a receipt.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use klab_core::artifact::{sha256_file, sha256_hex, utc_timestamp, write_atomic};
use klab_core::samples::samples_csv;
use klab_core::stats::{gb_per_s, Summary, QUANTILE_RULE};
use klab_cuda::device::Device;
use klab_cuda::gpu::CudaBackend;
use klab_cuda::module::{self, Module};
use klab_cuda::nvml::StateReader;
use klab_cuda::nvrtc::Cache;
use klab_engine::general::DeclaredWorkload;
use klab_engine::timing::{self, Measurement, Outcome, TimingConfig};
use klab_engine::verify::VerifyPolicy;
use klab_engine::workload::Workload;
use klab_evidence::receipt::{self, Receipt, RECEIPT_SCHEMA};
use klab_spec::manifest::{KernelDecl, Manifest};
use klab_spec::registry::{self, KernelRef, Scope};
use klab_spec::rule::CheckOutcome;

/// A kernel klab can run: where it is declared ([`KernelRef`], what a child is given) and
/// its declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub kref: KernelRef,
    pub manifest: Manifest,
    pub decl: KernelDecl,
}

impl Kernel {
    /// Exactly one kernel from what a user typed (the default namespaces).
    pub fn parse(s: &str) -> anyhow::Result<Kernel> {
        Kernel::load(registry::expand_one(s, Scope::Default)?)
    }

    /// Exactly one kernel from what a parent klab passed: the mutants too, since the audit
    /// hands them to its children.
    pub fn parse_in_child(s: &str) -> anyhow::Result<Kernel> {
        Kernel::load(registry::expand_one(s, Scope::Audit)?)
    }

    /// Every kernel a command line names (globs and whole manifests expanded), refusing one
    /// name twice.
    pub fn parse_all(specs: &[String], scope: Scope) -> anyhow::Result<Vec<Kernel>> {
        registry::expand_all(specs, scope)?
            .into_iter()
            .map(Kernel::load)
            .collect()
    }

    pub fn load(kref: KernelRef) -> anyhow::Result<Kernel> {
        let (manifest, decl) = kref.load()?;
        Ok(Kernel {
            kref,
            manifest,
            decl,
        })
    }

    pub fn name(&self) -> String {
        self.decl.name.clone()
    }

    /// What resolves to this kernel from any folder (for a child's command line).
    pub fn spec(&self) -> String {
        self.kref.spec()
    }

    /// The size `--n` means when it is not given: the operation's bench shape (its one
    /// size variable); 1 for an operation with several (they are timed at `bench`).
    pub fn default_n(&self) -> u64 {
        match (self.size_variable(), &self.decl.op.spec.bench) {
            (Some(var), Some(bench)) => bench.get(var).copied().unwrap_or(1),
            _ => 1,
        }
    }

    /// This kernel timed at `shape` (`--shape`) instead of its manifest's bench shape; a
    /// shape that misses a size variable, names another or leaves a range is refused.
    pub fn at_shape(
        mut self,
        shape: Option<&klab_engine::general::ShapeArg>,
    ) -> anyhow::Result<Kernel> {
        let Some(shape) = shape else {
            return Ok(self);
        };
        self.check_shape(shape)?;
        let mut op = (*self.decl.op).clone();
        op.spec.bench = Some(shape.0.clone());
        self.decl.op = std::sync::Arc::new(op);
        Ok(self)
    }

    /// [`Kernel::at_shape`]'s check alone.
    pub fn check_shape(&self, shape: &klab_engine::general::ShapeArg) -> anyhow::Result<()> {
        self.decl
            .op
            .spec
            .shape_problem(&shape.0)
            .map_err(|why| anyhow::anyhow!("{}: --shape {shape}: {why}", self.name()))
    }

    /// The operation's size variable when it has exactly one (what `--n` sets).
    pub fn size_variable(&self) -> Option<&str> {
        let sizes = &self.decl.op.spec.sizes;
        (sizes.len() == 1).then(|| sizes.keys().next().expect("one").as_str())
    }

    /// A declared operation's reference, built (a C reference compiles into klab's cache).
    pub fn reference(
        &self,
        device: u32,
    ) -> anyhow::Result<std::rc::Rc<dyn klab_engine::reference::Reference>> {
        let op = &self.decl.op;
        let dir = match &self.kref {
            KernelRef::Manifest { path, .. } => {
                path.parent().map(Path::to_path_buf).unwrap_or_default()
            }
            KernelRef::Builtin { .. } => PathBuf::from("."),
        };
        if let klab_spec::declared::ReferenceSpec::Kernel(spec) = &op.spec.reference {
            // Resolved now (a bad name is an error before anything runs), opened on the
            // device only when the reference first runs: a parent that merely describes
            // the workload never creates a CUDA context.
            let (file, name) = spec.rsplit_once(':').expect("validated FILE:NAME");
            let kernel = Kernel::parse(&format!("{}:{name}", dir.join(file).display()))
                .with_context(|| format!("{}: reference.kernel {spec}", self.name()))?;
            if kernel.spec() == self.spec() {
                bail!(
                    "{}: reference.kernel {spec} is this kernel itself: it would agree with itself whatever it computes",
                    self.name()
                );
            }
            return Ok(std::rc::Rc::new(GpuReference {
                spec: spec.clone(),
                kernel,
                device,
                checked: op.clone(),
                loaded: Default::default(),
            }));
        }
        klab_tools::reference::build(op, &dir).with_context(|| self.name())
    }

    /// (program name, source, path as reports name it).
    pub fn program(&self) -> (&str, &klab_spec::manifest::Source, &str) {
        (
            &self.manifest.program,
            &self.manifest.source,
            &self.manifest.source_path,
        )
    }

    /// The workload at its operation's `bench` shape, with `n` as the value of its one
    /// size variable (seeded random input), and its reference.
    pub fn workload(
        &self,
        n: u64,
        seed: Option<u64>,
        device: u32,
    ) -> anyhow::Result<DeclaredWorkload> {
        let op = &self.decl.op;
        let shape = op.spec.bench.clone().with_context(|| {
            format!(
                "{}: give the shape to time in [kernel.op], e.g. bench = {{ {} }}",
                self.name(),
                op.spec
                    .sizes
                    .keys()
                    .map(|k| format!("{k} = 4096"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let mut shape: klab_engine::general::Shape =
            shape.into_iter().map(|(k, v)| (k, v as i64)).collect();
        if let Some(var) = self.size_variable() {
            let n = i64::try_from(n).with_context(|| format!("--n {n} is too large"))?;
            shape.insert(var.to_string(), n);
        }
        let input = klab_engine::general::InputCase::Uniform {
            seed: seed.unwrap_or(1),
        };
        Ok(DeclaredWorkload::new(
            self.decl.clone(),
            shape,
            input,
            0,
            self.reference(device)?,
        )?)
    }

    /// `--n` sets an operation's one size variable; one with several is timed at its
    /// `[kernel.op]` bench shape.
    pub fn refuse_n_for_declared(&self, n: Option<u64>) -> anyhow::Result<()> {
        if n.is_some() && self.size_variable().is_none() {
            anyhow::bail!(
                "{}: --n sets an operation's one size variable; this one has {} ({}) and is timed at its [kernel.op] bench shape",
                self.name(),
                self.decl.op.spec.sizes.len(),
                self.decl.op.spec.sizes.keys().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        Ok(())
    }
}

/// An open device with one module loaded (compiled by NVRTC, or precompiled).
pub struct Session {
    pub backend: CudaBackend,
    pub module: Module,
    pub state: StateReader,
    /// Seconds spent opening the device (context, stream, events) and compiling or
    /// loading the modules, charged to the first block this session measures.
    setup_s: f64,
    compile_s: f64,
}

impl Session {
    pub fn open(kernel: &Kernel, ordinal: u32, policy: VerifyPolicy) -> anyhow::Result<Session> {
        let t = std::time::Instant::now();
        let device = Device::open(ordinal)?;
        let mut setup_s = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let module = module::build(
            &kernel.manifest,
            &kernel.decl,
            &device.facts().arch(),
            &Cache::from_env(),
        )?;
        let mut compile_s = t.elapsed().as_secs_f64();
        for note in module.notes() {
            eprintln!("klab: {note}");
        }
        let t = std::time::Instant::now();
        let state = StateReader::new(&device.facts().uuid);
        let mut backend = CudaBackend::from_module(device, &module, policy)?;
        setup_s += t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        backend.prepare_checker();
        compile_s += t.elapsed().as_secs_f64();
        Ok(Session {
            backend,
            module,
            state,
            setup_s,
            compile_s,
        })
    }

    /// The setup and compile seconds not yet charged to a block (then zero).
    fn take_open_time(&mut self) -> (f64, f64) {
        let t = (self.setup_s, self.compile_s);
        (self.setup_s, self.compile_s) = (0.0, 0.0);
        t
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchSpec {
    pub kernel: Kernel,
    pub n: u64,
    pub config: TimingConfig,
    pub rounds: u32,
    pub claim: Option<String>,
}

/// One block's result.
pub struct Block {
    pub round: u32,
    pub outcome: Outcome,
}

/// Run `rounds` blocks of one kernel in this process.
pub fn run_blocks(
    session: &mut Session,
    spec: &BenchSpec,
    log: &mut dyn FnMut(String),
) -> anyhow::Result<Vec<Block>> {
    let mut blocks = Vec::new();
    let w = spec
        .kernel
        .workload(spec.n, None, session.backend.facts().ordinal)?;
    run_workload(session, &w, spec, &mut blocks, log)?;
    Ok(blocks)
}

fn run_workload<W: Workload>(
    session: &mut Session,
    w: &W,
    spec: &BenchSpec,
    blocks: &mut Vec<Block>,
    log: &mut dyn FnMut(String),
) -> anyhow::Result<()> {
    if w.n() == 0 {
        bail!("n must be at least 1 to time a kernel");
    }
    let kernels = klab_engine::workload::load_kernels(&mut session.backend, w.decl())?;
    log(format!(
        "{}: {}; {}",
        w.entry(),
        klab_engine::workload::describe_plans(w),
        klab_engine::workload::describe_resources(&session.backend, &kernels)
    ));
    for round in 1..=spec.rounds {
        let state = &session.state;
        let outcome = timing::measure(
            &mut session.backend,
            w,
            &kernels,
            &spec.config,
            &format!("round {round}"),
            &mut || state.read(),
        )?;
        let mut outcome = outcome;
        if let Outcome::Measured(m) = &mut outcome {
            (m.phases.setup_s, m.phases.compile_s) = session.take_open_time();
        }
        let stop = matches!(outcome, Outcome::Rejected { .. });
        blocks.push(Block { round, outcome });
        if stop {
            break;
        }
    }
    Ok(())
}

/// A workload's static description, for receipts (built without a device).
pub struct WorkloadInfo {
    pub entry: String,
    pub operation: String,
    /// The workload's own n (its one size variable, else its first output's elements).
    pub n: u64,
    pub dtype: String,
    /// Each launch's entry and plan, in order (one for most kernels).
    pub launches: Vec<(String, klab_spec::plan::LaunchPlan)>,
    pub useful_bytes: u64,
    pub flops: u64,
    pub reference: String,
    pub rule: String,
    pub tolerances: (Option<f64>, Option<f64>),
}

pub fn workload_info(kernel: &Kernel, n: u64, device: u32) -> anyhow::Result<WorkloadInfo> {
    // Workloads build their inputs lazily, so describing one allocates nothing large.
    let w = kernel.workload(n, None, device)?;
    Ok(WorkloadInfo {
        entry: w.entry().to_string(),
        operation: w.operation(),
        n: w.n(),
        dtype: w.dtype().to_string(),
        launches: w
            .decl()
            .launches()
            .iter()
            .map(|l| l.entry.to_string())
            .zip(w.plans())
            .collect(),
        useful_bytes: w.useful_bytes(),
        flops: w.flops(),
        reference: w.reference().to_string(),
        rule: w.rule().to_string(),
        tolerances: w.tolerances(),
    })
}

/// Where the kernel's source is versioned: (repository URL, commit). A built-in kernel's
/// source is embedded in klab, so it is klab's build commit (`-dirty` when the tree had
/// changes); a manifest's is the git repository holding the manifest's folder, when there
/// is one (its file hash in the receipt pins the exact bytes either way).
fn source_version(kernel: &Kernel) -> (Option<String>, Option<String>) {
    let KernelRef::Manifest { path, .. } = &kernel.kref else {
        return (None, option_env!("KLAB_BUILD_COMMIT").map(str::to_string));
    };
    let Some(dir) = path.parent() else {
        return (None, None);
    };
    let git = |args: &[&str]| -> Option<String> {
        let mut argv: Vec<std::ffi::OsString> = vec!["-C".into(), dir.as_os_str().into()];
        argv.extend(args.iter().map(|a| a.into()));
        let out = klab_tools::process::run_captured(
            Path::new("git"),
            &argv,
            std::time::Duration::from_secs(10),
        )
        .ok()?;
        if out.exit_code != Some(0) {
            return None;
        }
        let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (!s.is_empty()).then_some(s)
    };
    (
        git(&["config", "--get", "remote.origin.url"]),
        git(&[
            "describe",
            "--always",
            "--dirty",
            "--abbrev=40",
            "--match=NO-TAGS",
        ]),
    )
}

/// Describe a check for stdout.
pub fn check_line(m: &Measurement) -> String {
    let worst = |v: &[CheckOutcome]| v.iter().find(|c| !c.passed()).cloned();
    let after = worst(&m.after_timing);
    format!(
        "correctness={} before: {}; after timing ({} slot(s)): {}; revalidation: {}",
        if m.correct() { "PASS" } else { "FAIL" },
        m.before.describe(),
        m.after_timing.len(),
        after.map(|c| c.describe()).unwrap_or_else(|| "PASS".into()),
        m.revalidation.describe()
    )
}

/// Everything `write_receipt` needs.
pub struct ReceiptInput<'a> {
    pub dir: &'a Path,
    pub spec: &'a BenchSpec,
    pub facts: &'a klab_core::device::DeviceFacts,
    pub module: &'a Module,
    /// (round, position, measurement) for every timed block.
    pub blocks: Vec<(u32, u32, &'a Measurement)>,
    pub order: String,
    pub extra_artifacts: Vec<(String, String)>,
    pub receipt_name: String,
    /// File name for the samples when there is one block (default `samples-rNN-pP.csv`).
    pub samples_name: Option<String>,
}

/// Write each block's samples (`samples-rNN[-pP].csv`) and a receipt into `dir`.
pub fn write_receipt(input: ReceiptInput<'_>) -> anyhow::Result<(PathBuf, Receipt)> {
    let ReceiptInput {
        dir,
        spec,
        facts,
        module,
        blocks,
        order,
        extra_artifacts,
        receipt_name,
        samples_name,
    } = input;
    let info = workload_info(&spec.kernel, spec.n, facts.ordinal)?;
    let (_, source, path) = spec.kernel.program();
    let BlockFiles {
        raw,
        mut artifacts,
        all,
        states,
        failures,
        slots,
        warmup,
        scrub,
    } = write_samples(dir, &blocks, samples_name.as_deref())?;
    for (name, role) in extra_artifacts {
        let p = dir.join(&name);
        artifacts.push(receipt::Artifact {
            sha256: sha256_file(&p).with_context(|| format!("hashing {}", p.display()))?,
            bytes: std::fs::metadata(&p)?.len(),
            path: name,
            role,
        });
    }
    let summary = Summary::of(&all).context("no samples to summarise")?;
    let integrity = integrity(&blocks).context("no block to vouch for")?;
    let gbs = gb_per_s(info.useful_bytes, summary.median);
    let peak = facts.theoretical_peak_gb_s();
    let flagged = states.iter().filter(|s| !s.flags.is_empty()).count() as u64;
    let power = states.first().and_then(|s| s.before.power_limit_w);
    let exe = std::env::current_exe()?;
    let (repository, commit) = source_version(&spec.kernel);
    let r = Receipt {
        schema: RECEIPT_SCHEMA.into(),
        claim: spec.claim.clone().unwrap_or_else(|| {
            format!(
                "{} at n={} takes a median {:.3} us per launch under the {} regime on {}",
                info.entry, spec.n, summary.median, spec.config.regime, facts.name
            )
        }),
        command: std::env::args().collect(),
        created_utc: utc_timestamp(),
        klab_version: env!("CARGO_PKG_VERSION").into(),
        source: receipt::Source {
            repository: repository.clone(),
            commit: commit.clone(),
            file: path.into(),
            file_sha256: source.sha256(),
            entry: info.entry.clone(),
            binary_sha256: sha256_file(&exe).context("hashing the klab binary")?,
            compiler: module.compiler(),
            flags: module.flags().to_vec(),
        },
        baseline_source: None,
        hardware: hardware(facts, power),
        workload: workload_section(&info, spec, slots),
        correctness: receipt::Correctness {
            reference: info.reference.clone(),
            rule: info.rule.clone(),
            atol: info.tolerances.0,
            rtol: info.tolerances.1,
            failures,
            checked_after_timing: true,
            slots_checked: slots,
            sanitizer: Vec::new(),
        },
        measurement: receipt::Measurement {
            timer: spec.config.timer,
            warmup: receipt::Warmup {
                policy: spec.config.warmup.describe(),
                launches: warmup,
            },
            samples_per_round: u64::from(spec.config.samples),
            rounds: blocks.iter().map(|b| b.0).max().unwrap_or(0).into(),
            order,
            raw_samples: raw,
            quantiles: QUANTILE_RULE.into(),
            profiler_attached: false,
            l2_scrub_bytes: scrub,
            gpu_state: states,
            phases: blocks.iter().map(|(_, _, m)| m.phases.clone()).collect(),
        },
        artifacts,
        result: receipt::ResultSummary {
            median_us: summary.median,
            p10_us: summary.p10,
            p90_us: summary.p90,
            useful_gb_s: gbs,
            pct_of_peak: 100.0 * gbs / peak,
            flagged_blocks: flagged,
            rounds: None,
        },
        integrity: Some(integrity),
    };
    r.validate()
        .context("the receipt klab built does not validate")?;
    let path = dir.join(receipt_name);
    r.write(&path)?;
    Ok((path, r))
}

/// The samples of every block, written, and what the receipt says of them together.
struct BlockFiles {
    raw: Vec<receipt::RawSamples>,
    artifacts: Vec<receipt::Artifact>,
    /// Every sample of every block, in microseconds.
    all: Vec<f64>,
    states: Vec<klab_core::gpustate::BlockState>,
    failures: u64,
    slots: u64,
    warmup: u64,
    scrub: Option<u64>,
}

/// Each block's samples as `samples-rNN-pP.csv` (or `samples_name` for a single block) in
/// `dir`, with their hashes.
fn write_samples(
    dir: &Path,
    blocks: &[(u32, u32, &Measurement)],
    samples_name: Option<&str>,
) -> anyhow::Result<BlockFiles> {
    let mut f = BlockFiles {
        raw: Vec::new(),
        artifacts: Vec::new(),
        all: Vec::new(),
        states: Vec::new(),
        failures: 0,
        slots: 1,
        warmup: 0,
        scrub: None,
    };
    for (round, position, m) in blocks {
        let name = match (samples_name, blocks.len()) {
            (Some(n), 1) => n.to_string(),
            _ => format!("samples-r{round:02}-p{position}.csv"),
        };
        let text = samples_csv(&m.samples);
        write_atomic(&dir.join(&name), text.as_bytes())
            .with_context(|| format!("writing {name}"))?;
        let sha = sha256_hex(text.as_bytes());
        f.raw.push(receipt::RawSamples {
            round: u64::from(*round),
            position: u64::from(*position),
            path: name.clone(),
            sha256: sha.clone(),
        });
        f.artifacts.push(receipt::Artifact {
            path: name,
            sha256: sha,
            bytes: text.len() as u64,
            role: "raw-samples".into(),
        });
        f.all.extend(m.samples.iter().map(|s| s.elapsed_us));
        f.states.push(m.state.clone());
        f.failures += m.failures();
        f.slots = m.slots;
        f.warmup = m.warmup_launches;
        f.scrub = m.scrub_bytes;
    }
    Ok(f)
}

/// The receipt's hardware section: the device's facts as klab found them.
fn hardware(
    facts: &klab_core::device::DeviceFacts,
    power_limit_w: Option<f64>,
) -> receipt::Hardware {
    receipt::Hardware {
        gpu_uuid: facts.uuid.clone(),
        gpu_name: facts.name.clone(),
        compute_capability: format!(
            "{}.{}",
            facts.compute_capability.0, facts.compute_capability.1
        ),
        driver: facts.driver_version.clone(),
        cuda_runtime: facts.runtime_version.clone(),
        nvrtc: facts.nvrtc_version.clone(),
        power_limit_w,
        clock_policy: "observed (klab never changes clocks, power limits or modes)".into(),
        isolation: "not controlled: other processes may share the GPU".into(),
        l2_bytes: facts.l2_bytes,
        theoretical_peak_gb_s: facts.theoretical_peak_gb_s(),
    }
}

/// The receipt's workload section: what was launched, at what size, in which regime.
fn workload_section(info: &WorkloadInfo, spec: &BenchSpec, slots: u64) -> receipt::Workload {
    let dims = |d: klab_core::device::Dim3| [d.x, d.y, d.z];
    let first = info.launches[0].1;
    receipt::Workload {
        operation: info.operation.clone(),
        dtype: info.dtype.clone(),
        n: info.n,
        grid: dims(first.grid),
        block: dims(first.block),
        dynamic_shared_bytes: first.dynamic_shared_bytes,
        cache_regime: spec.config.regime,
        rotation_slots: slots,
        useful_bytes_per_launch: info.useful_bytes,
        flops_per_launch: info.flops,
        // A sequence records every launch; one launch is the fields above.
        sequence: match info.launches.len() {
            1 => Vec::new(),
            _ => info
                .launches
                .iter()
                .map(|(entry, p)| receipt::LaunchRecord {
                    entry: entry.clone(),
                    grid: dims(p.grid),
                    block: dims(p.block),
                    dynamic_shared_bytes: p.dynamic_shared_bytes,
                })
                .collect(),
        },
    }
}

/// The receipt's integrity section over every block: the policy, the floor (the same for
/// every block of one kernel and shape), the checked and probe medians over all blocks.
pub fn integrity(blocks: &[(u32, u32, &Measurement)]) -> Option<receipt::Integrity> {
    let first = blocks.first()?.2;
    let checked: Vec<f64> = blocks.iter().flat_map(|b| b.2.checked_us.clone()).collect();
    let probes: Vec<f64> = blocks.iter().flat_map(|b| b.2.probe_us.clone()).collect();
    let pairs: Vec<f64> = blocks
        .iter()
        .flat_map(|b| b.2.probe_invalidated_us.clone())
        .collect();
    Some(receipt::Integrity {
        invalidation: first.invalidation,
        policy: first.invalidation.describe().into(),
        slots_per_sample: first.slots_per_sample,
        verified_samples: blocks.iter().map(|b| b.2.verified.len() as u64).sum(),
        floor: first.floor.clone(),
        checked_median_us: Summary::of(&checked).map(|s| s.median),
        checked_launches: checked.len() as u64,
        probe_median_us: Summary::of(&probes).map(|s| s.median),
        probe_invalidated_median_us: Summary::of(&pairs).map(|s| s.median),
        probes: probes.len() as u64,
        flags: blocks
            .iter()
            .filter_map(|(round, _, m)| m.checked_flag().map(|f| format!("round {round}: {f}")))
            .collect(),
    })
}

/// The block's integrity line: the floor, the checked and probe medians, and a flag.
pub fn integrity_line(round: u32, m: &Measurement) -> String {
    let us = |v: Option<f64>| {
        v.map(|x| format!("{x:.3}"))
            .unwrap_or_else(|| "none".into())
    };
    let probe = Summary::of(&m.probe_us).map(|s| s.median);
    let pair = Summary::of(&m.probe_invalidated_us).map(|s| s.median);
    format!(
        "round {round}: floor_us={} checked_median_us={} probe_median_us={} probe_invalidated_median_us={} verified_samples={} slots_per_sample={}{}",
        us(m.floor.as_ref().map(|f| f.us)),
        us(m.checked_median_us()),
        us(probe),
        us(pair),
        m.verified.len(),
        m.slots_per_sample,
        m.checked_flag().map(|f| format!(" FLAG: {f}")).unwrap_or_default()
    )
}

/// The standard stdout line for one measured block.
pub fn block_line(round: u32, m: &Measurement, useful_bytes: u64) -> String {
    match m.summary() {
        Some(s) => format!(
            "round {round}: p10_us={:.3} median_us={:.3} p90_us={:.3} useful_gb_s={:.1} slots={} warmup={} flags={}",
            s.p10,
            s.median,
            s.p90,
            gb_per_s(useful_bytes, s.median),
            m.slots,
            m.warmup_launches,
            if m.state.flags.is_empty() { "none".to_string() } else { m.state.flags.join("; ") }
        ),
        None => format!("round {round}: no samples"),
    }
}

/// A fresh output folder: `dir` if given (must not exist or be empty), else the next
/// `artifacts/<what>/run-NN`.
pub fn output_dir(dir: Option<&Path>, what: &str) -> anyhow::Result<PathBuf> {
    match dir {
        Some(d) => {
            if d.exists()
                && std::fs::read_dir(d)
                    .map(|mut r| r.next().is_some())
                    .unwrap_or(true)
            {
                bail!("output folder {} already exists and is not empty (klab never overwrites results)", d.display());
            }
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            Ok(d.to_path_buf())
        }
        None => klab_core::artifact::create_run_dir(&Path::new("artifacts").join(what))
            .with_context(|| format!("creating a run folder under artifacts/{what}")),
    }
}

/// `reference = { kernel = "ref.toml:name" }`: the trusted kernel, compiled into its own
/// backend on the checked kernel's device when it first runs.
struct GpuReference {
    spec: String,
    kernel: Kernel,
    device: u32,
    checked: std::sync::Arc<klab_spec::declared::DeclaredOp>,
    loaded: std::cell::OnceCell<Result<klab_engine::gpuref::KernelReference<CudaBackend>, String>>,
}

impl klab_engine::reference::Reference for GpuReference {
    fn run(
        &self,
        shape: &klab_engine::general::Shape,
        buffers: &mut [&mut [u8]],
        ints: &[i64],
        floats: &[f64],
    ) -> Result<(), String> {
        let r = self.loaded.get_or_init(|| {
            // The reference's own outputs are the expected values: nothing is verified here.
            let session = Session::open(&self.kernel, self.device, VerifyPolicy::default())
                .map_err(|e| {
                    format!(
                        "the reference kernel {}: {}",
                        self.spec,
                        crate::error_text(&e)
                    )
                })?;
            klab_engine::gpuref::KernelReference::new(
                session.backend,
                &self.kernel.decl,
                &self.spec,
                &self.checked,
            )
        });
        r.as_ref()
            .map_err(Clone::clone)?
            .run(shape, buffers, ints, floats)
    }

    fn describe(&self) -> String {
        klab_engine::gpuref::describe(&self.spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    #[test]
    fn a_receipt_names_the_commit_of_the_repository_holding_the_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(
            dir.join("k.cu"),
            "extern \"C\" __global__ void k(float *o, const float *i, int n) {}",
        )
        .unwrap();
        std::fs::write(
            dir.join("k.toml"),
            "source = \"k.cu\"\n[[kernel]]\nname = \"mine\"\nentry = \"k\"\noperation = \"copy\"\nparams = [\"out\", \"in\", \"n:i32\"]\nblock = [32, 8]\nelements_per_block = [32, 32]\n",
        )
        .unwrap();
        let kernel = Kernel::parse(&format!("{}:mine", dir.join("k.toml").display())).unwrap();
        // Not in a repository: nothing is claimed.
        assert_eq!(source_version(&kernel), (None, None));
        git(dir, &["init", "-q"]);
        git(dir, &["add", "."]);
        git(
            dir,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "k",
            ],
        );
        let head = git(dir, &["rev-parse", "HEAD"]);
        assert_eq!(source_version(&kernel), (None, Some(head.clone())));
        std::fs::write(dir.join("k.cu"), "// edited").unwrap();
        assert_eq!(source_version(&kernel).1, Some(format!("{head}-dirty")));
        // A built-in kernel's source is klab's own: its build commit, recorded by build.rs
        // whenever klab is built from a checkout (CI builds from a clone).
        let builtin = source_version(&Kernel::parse("padded").unwrap()).1;
        if Path::new(env!("CARGO_MANIFEST_DIR")).join(".git").exists() {
            let c = builtin.expect("built from a checkout: the build commit is known");
            let hash = c.strip_suffix("-dirty").unwrap_or(&c);
            assert!(
                hash.len() == 40 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
                "{c}"
            );
        }
    }

    /// An operation with several size variables is timed at its bench shape: its receipt's
    /// n is the first output's element count and its operation states the shape (before,
    /// n was the `--n` default of 1).
    #[test]
    fn a_multi_variable_workload_is_described_at_its_bench_shape() {
        let gemm = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ops/gemm/gemm.toml");
        let kernel = Kernel::parse(&format!("{}:gemm", gemm.display())).unwrap();
        let info = workload_info(&kernel, kernel.default_n(), 0).unwrap();
        assert!(
            info.operation.ends_with(" at K=1024 M=2048 N=2048"),
            "{}",
            info.operation
        );
        assert_eq!(info.n, 2048 * 2048);
        let padded = Kernel::parse("padded").unwrap();
        let info = workload_info(&padded, 4096, 0).unwrap();
        assert_eq!(
            (info.n, info.operation.ends_with(" at n=4096")),
            (4096, true)
        );
    }
}
