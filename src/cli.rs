//! The command line.

use std::path::PathBuf;

use crate::output::Format;
use clap::{Args, Parser, Subcommand};
use klab_core::samples::{Isolation, Regime, RoundOrder, Timer};
use klab_engine::timing::WarmupPolicy;
use klab_tools::ncu::CacheControl;
use klab_tools::sanitizer::ToolList;
use serde::{Deserialize, Serialize};

/// The heading of the options every command takes.
const GLOBAL: &str = "Options for every command";

#[derive(Debug, Parser)]
#[command(
    name = "klab",
    version,
    about = "GPU kernel performance work turned into evidence",
    long_about = "klab checks a kernel against an independent oracle on poisoned outputs and \
boundary shapes, times it with CUDA events under a declared method, and explains it with \
a CPU address model. Exit codes: 0 success, 1 runtime or argument error (including no \
CUDA device), 2 a correctness gate failed (including every run of a known-broken variant)."
)]
pub struct Cli {
    /// CUDA device ordinal for the commands that use one, before or after the command's name
    #[arg(long, global = true, default_value_t = 0, help_heading = GLOBAL)]
    pub device: u32,
    /// Watchdog, seconds: a process klab starts that is still running then is killed and
    /// reported as hung (exit 2); one per kernel's check, bench, profile or sanitizer run,
    /// per lab run of transpose, triad and reduce-lab, per rounds or sweep block and per
    /// lab step [default: 300 for an audit's gate run, 900 for a rounds or sweep block and
    /// a lab step, 600 otherwise]
    #[arg(long, global = true, value_name = "SECONDS", value_parser = at_least_one::<u64>, help_heading = GLOBAL)]
    pub timeout: Option<u64>,
    /// Who judges kernel outputs: klab's device checker (the first validation of every
    /// workload with at most 128 MiB of output also on the CPU oracle; a disagreement is
    /// an error) or the CPU oracle alone
    #[arg(long, global = true, value_enum, env = "KLAB_CHECKER", default_value_t = klab_engine::verify::Checker::Device, help_heading = GLOBAL)]
    pub checker: klab_engine::verify::Checker,
    /// Cross-check every validation on the CPU oracle, at every size
    #[arg(long, global = true, env = "KLAB_PARANOID", help_heading = GLOBAL)]
    pub paranoid: bool,
    /// A wrong device checker (the mutation audit's)
    #[arg(long, global = true, value_enum, hide = true)]
    pub checker_mutant: Option<klab_engine::verify::CheckerMutant>,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// How this process verifies kernel outputs: one value, handed to every backend it
    /// opens and to every klab it starts (as these options, never through the environment).
    pub fn verify_policy(&self) -> klab_engine::verify::VerifyPolicy {
        klab_engine::verify::VerifyPolicy {
            checker: self.checker,
            paranoid: self.paranoid,
            mutant: self.checker_mutant,
            // Only the checks `klab sanitize` starts are told they run under it.
            sanitized: false,
        }
    }

    /// The command, with the global `--device` and `--timeout` in its arguments (each
    /// command's own default watchdog where `--timeout` is not given).
    pub fn into_command(self) -> Command {
        let mut c = self.command;
        let (device, watchdog) = match &mut c {
            Command::Transpose(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Lab(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Bench(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Triad(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Rounds(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Check(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::ReduceLab(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Sanitize(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Audit(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Profile(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Sweep(a) => (Some(&mut a.device), Some(&mut a.timeout)),
            Command::Env(a) => (Some(&mut a.device), None),
            Command::Model(_)
            | Command::Kernels(_)
            | Command::Compare(_)
            | Command::Receipt(_)
            | Command::Trace(_)
            | Command::Report(_)
            | Command::Init(_)
            | Command::Child(_) => (None, None),
        };
        if let Some(d) = device {
            *d = self.device;
        }
        if let (Some(t), Some(given)) = (watchdog, self.timeout) {
            *t = given;
        }
        c
    }
}

#[derive(Debug, Clone, PartialEq, Subcommand)]
pub enum Command {
    /// The transpose lab's harness: validate, time and report one variant or all five
    Transpose(TransposeArgs),
    /// The transpose lab's CPU address model: tile coverage, shared-memory banks, global sectors
    Model(ModelArgs),
    /// The main job: the whole transpose investigation into artifacts/run-NN/
    Lab(LabArgs),
    /// Device, driver, runtime and NVRTC facts
    Env(EnvArgs),
    /// The built-in kernels by namespace, with their operation and what they are
    Kernels(KernelsArgs),
    /// Time one kernel with the timing engine and write its samples and a receipt
    Bench(BenchArgs),
    /// The triad lab's program: check, buggy, profile, bench-hot, bench-rotate
    Triad(TriadArgs),
    /// Alternating rounds (ABBA), each block in its own process, with round-level ratios
    Rounds(RoundsArgs),
    /// Kernels over axes of sizes and cache regimes: every point checked, timed, receipted
    Sweep(SweepArgs),
    /// Re-check two receipts and their artifacts, then print the speedup
    Compare(CompareArgs),
    /// Re-check one receipt on its own; sign it or verify its signature (ssh-keygen -Y)
    Receipt(ReceiptArgs),
    /// The reference-verification gate: oracle, size ladder, two poisons, determinism, properties
    Check(CheckArgs),
    /// The reduction lab: the weak and the hardened suite on both launch variants
    ReduceLab(ReduceLabArgs),
    /// The Compute Sanitizer gate: memcheck, racecheck, synccheck, initcheck, parsed
    Sanitize(SanitizeArgs),
    /// Mutation and exploit audits: every gate on every labelled bug, every timing gate on every cheating kernel; the kill matrices
    Audit(AuditArgs),
    /// Nsight Compute on one measured launch: counters, the bound statement, predicted vs measured
    Profile(ProfileArgs),
    /// Nsight Systems SQLite exports as tables: kernel launches, copies, findings
    Trace(crate::cmd::trace::TraceArgs),
    /// A self-contained HTML page and a markdown summary of a run folder, with SVG plots
    Report(ReportArgs),
    /// A declared-operation manifest skeleton from a CUDA file's __global__ signatures
    Init(InitArgs),
    /// What a parent klab starts: one piece of work, given whole as JSON
    #[command(name = "__child", hide = true)]
    Child(ChildArgs),
}

/// `klab __child [--results-to FILE] SPEC`: the one way klab starts itself (src/child.rs).
/// SPEC is a [`crate::child::ChildSpec`] as JSON: the work, the device and how to verify;
/// its results go to FILE, which the parent made and reads, never to stdout.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct ChildArgs {
    /// The file the parent reads this child's results from
    #[arg(long, value_name = "FILE")]
    pub results_to: Option<PathBuf>,
    /// The work, as JSON
    #[arg(value_name = "SPEC")]
    pub spec: String,
}

/// `klab profile`'s captures at once: each is its own ncu over its own child, and ncu
/// serializes the profiled launches of the processes it profiles, so what the captures
/// share is their start, their child's setup and their imports. On the H100 the lab's
/// profile step of four kernels went from 12-13 s to 8-9 s.
pub const PROFILE_JOBS: usize = 4;

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
#[command(
    after_help = "For each kernel, Nsight Compute profiles exactly one launch of klab's own sequence: \
one poisoned validation, --warmup launches, a fresh poison, the measured launch and its check \
(ncu --kernel-name-base function --kernel-name ENTRY, a regular expression for a qualified or \
template entry, --launch-skip 1+WARMUP --launch-count 1 --clock-control none). \
The report (.ncu-rep) is imported as CSV (--page raw and --page details), the counters are \
set beside the address model's predictions (built-in transpose variants) under stated \
tolerances, and a bound statement is written per kernel: profile.json, bound.txt, \
counters.csv in --out. Profiler durations are diagnostics, never benchmark results. \
Exit 0 when every kernel was profiled, 2 when one failed its correctness check (known-broken \
kernels always do, and are not profiled), 1 when ncu could not run. \
--import FILE reads a profile made elsewhere instead of running anything: an .ncu-rep (through \
`ncu --import FILE --csv --page raw`, so ncu is needed) or its raw or details CSV page (told \
apart by the header). Every launch in it gets the same counters, table and bound statement, \
its correctness marked not checked; without --kernel nothing is predicted but the measured \
counters are shown. --kernel NAME (a klab kernel or manifest.toml:name; again for more) picks \
the launches of that kernel's entry and sets them beside its predictions at --n, after their \
grid and block are checked against klab's own launch at that size. Counters that disagree \
with a prediction are reported, as for a capture, not a failed gate. Exit 0 when the file was \
read, 1 when it cannot be, is another format (one line naming the format expected and `ncu \
--csv --page raw`), or has no launch of a --kernel."
)]
pub struct ProfileArgs {
    /// Kernels (built-in names or manifest paths)
    #[arg(required_unless_present = "import", conflicts_with = "import")]
    pub kernels: Vec<String>,
    /// Read this profile instead of running ncu: an .ncu-rep, or its raw or details CSV page
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["sections", "metrics", "warmup", "cache_control", "out"]
    )]
    #[serde(with = "klab_core::os_path::option")]
    pub import: Option<PathBuf>,
    /// With --import: the kernel of klab's whose launches to predict (repeatable)
    #[arg(long = "kernel", value_name = "NAME", requires = "import")]
    pub import_kernels: Vec<String>,
    /// Problem size [default: 4096 for matrices, the operation's default otherwise]
    #[arg(long, value_parser = at_least_one::<u64>)]
    pub n: Option<u64>,
    /// Nsight Compute sections, comma-separated
    #[arg(
        long,
        default_value = "LaunchStats,SpeedOfLight,MemoryWorkloadAnalysis,Occupancy"
    )]
    pub sections: String,
    /// Extra metrics, comma-separated (added to the ones the bound statement needs)
    #[arg(long)]
    pub metrics: Option<String>,
    /// Warmup launches before the profiled one (at most 100,000)
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub warmup: u64,
    /// ncu cache control between replay passes: all (flush) or none
    #[arg(long, default_value = "all")]
    pub cache_control: CacheControl,
    /// The ncu binary [default: from PATH or /usr/local/cuda/bin]
    #[arg(long)]
    #[serde(with = "klab_core::os_path::option")]
    pub ncu: Option<PathBuf>,
    /// Captures at once, each its own ncu and child (ncu still profiles one launch at a
    /// time); one that hangs or fails beside others is run again alone
    #[arg(
        long,
        default_value_t = PROFILE_JOBS,
        value_parser = at_least_one::<usize>,
        conflicts_with = "import"
    )]
    pub jobs: usize,
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 600u64)]
    pub timeout: u64,
    /// Output folder (must not exist or be empty) [default: artifacts/profile/run-NN]
    #[arg(long)]
    #[serde(with = "klab_core::os_path::option")]
    pub out: Option<PathBuf>,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, PartialEq, Args)]
#[command(
    after_help = "Reads lab.json and every artifact it knows (environment, ladder, benchmark, \
rounds, ceilings and receipts, sanitize/sanitize.json, profile/profile.json) \
and writes index.html (one self-contained page: inline CSS and SVG, no script), report.md (the \
same tables and statements) and plots/bandwidth.svg, rounds.svg, roofline.svg, counters.svg \
into RUN_DIR/report or --out. A missing artifact is said in its section, not an error. Every \
file is written atomically; the same run gives byte-identical files. Prints the paths written. \
Exit 0 on success, 1 when RUN_DIR is not a run folder (no lab.json), --out holds a file it would \
replace that is not an earlier report's, or a file cannot be written."
)]
pub struct ReportArgs {
    /// A run folder (for example artifacts/run-01)
    pub run_dir: PathBuf,
    /// Write the report here instead of RUN_DIR/report: the files it writes (index.html,
    /// report.md, plots/) may be there only as an earlier klab report's; others are left alone
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Args)]
#[command(
    after_help = "Reads every __global__ function of FILE (comments, strings and preprocessor \
lines cannot fake one; templates, __launch_bounds__ and extern \"C\" blocks are understood) and \
writes one [[kernel]] per function with operation = \"declared\": params in the kernel's order, \
const T* a buffer with role in, T* one with role out (marked: out or inout?), integers size \
variables, floats scalars. What only you know (lengths, the launch, useful bytes, the reference, \
the rules, scalar values) is the string \"TODO\", which klab check refuses by field until it is \
filled in; types klab cannot take are named in # TODO notes. Written atomically; an existing \
file is kept unless --force. Exit 0 when written, 1 when FILE cannot be read, holds no \
__global__ function, or OUT exists."
)]
pub struct InitArgs {
    /// The CUDA source
    pub file: PathBuf,
    /// Where to write the manifest; - for stdout (its source is then relative to the
    /// current folder) [default: FILE with the extension .toml]
    #[arg(short, long, value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// Overwrite OUT if it exists
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, PartialEq, Args)]
pub struct AuditArgs {
    /// Kernels or manifests to audit instead of the built-in mutants and variants: a
    /// kernel with `known_broken` is a labelled bug some gate must reject, any other a
    /// correct kernel every gate must accept
    pub kernels: Vec<String>,
    /// Sanitizer tools to include as gates, comma-separated (empty or none: oracle only)
    #[arg(long, default_value = "memcheck,racecheck,synccheck,initcheck")]
    pub tools: ToolList,
    /// Only these kernels, comma-separated
    #[arg(long)]
    pub only: Option<String>,
    /// Which audit: the mutation audit (labelled bugs through the oracle and the
    /// sanitizers), the exploit audit (exploits, their controls and the correct kernels
    /// timed in every regime under every timer), or both
    #[arg(long, value_enum, default_value_t = AuditPart::All)]
    pub part: AuditPart,
    /// The compute-sanitizer binary [default: from PATH or /usr/local/cuda/bin]
    #[arg(long)]
    pub sanitizer: Option<PathBuf>,
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 300u64)]
    pub timeout: u64,
    /// Output folder (must not exist or be empty) [default: artifacts/audit/run-NN]
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Which half of `klab audit` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditPart {
    Mutants,
    Exploits,
    All,
}

/// A Compute Sanitizer tool as `--tool` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SanitizerTool {
    Memcheck,
    Racecheck,
    Synccheck,
    Initcheck,
}

impl From<SanitizerTool> for klab_tools::sanitizer::Tool {
    fn from(t: SanitizerTool) -> Self {
        use klab_tools::sanitizer::Tool;
        match t {
            SanitizerTool::Memcheck => Tool::Memcheck,
            SanitizerTool::Racecheck => Tool::Racecheck,
            SanitizerTool::Synccheck => Tool::Synccheck,
            SanitizerTool::Initcheck => Tool::Initcheck,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
#[command(
    after_help = "Runs compute-sanitizer once per tool and kernel (memcheck with --padding 32 \
and --leak-check full; every tool with --destroy-on-device-error kernel and --error-exitcode 99) \
over a klab child that checks KERNEL as `klab check KERNEL --quick` does (its exact inputs) at a ragged and a full-tile size (a declared operation: every shape of its ladder). Reports are saved and \
parsed into findings (kind, severity, access size, hazard, kernel, source line, thread, block, \
count). Racecheck warnings fail like errors; infos are shown and never fail. A summary count \
that disagrees with the findings is said. Exit 0 when every accepted kernel is clean, 2 when \
one is not or a known-broken kernel was included, 1 when the tool could not run. \
--import REPORT --tool T parses a text report saved elsewhere the same way: exit 0 clean, 2 \
findings (or the application failed), 1 an unreadable file, a report of a tool that could \
not run, or a report whose own lines say another tool wrote it."
)]
pub struct SanitizeArgs {
    /// Kernels (built-in names or manifest paths)
    #[arg(required_unless_present = "import", conflicts_with = "import")]
    pub kernels: Vec<String>,
    /// Parse this saved Compute Sanitizer text report instead of running the tool
    #[arg(
        long,
        value_name = "REPORT",
        requires = "tool",
        conflicts_with_all = ["tools", "sanitizer", "timeout", "out"]
    )]
    #[serde(with = "klab_core::os_path::option")]
    pub import: Option<PathBuf>,
    /// The tool that wrote the --import report (refused when the report says another did)
    #[arg(long, value_enum, requires = "import")]
    pub tool: Option<SanitizerTool>,
    /// Tools, comma-separated
    #[arg(long, default_value = "memcheck,racecheck,synccheck,initcheck")]
    pub tools: ToolList,
    /// The compute-sanitizer binary [default: from PATH or /usr/local/cuda/bin]
    #[arg(long)]
    #[serde(with = "klab_core::os_path::option")]
    pub sanitizer: Option<PathBuf>,
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 600u64)]
    pub timeout: u64,
    /// Sanitizer runs at once (each its own process on the one GPU; none is timed)
    /// [default: half the cores, at most 8]
    #[arg(long, value_parser = at_least_one::<usize>, conflicts_with = "import")]
    pub jobs: Option<usize>,
    /// Output folder (must not exist or be empty) [default: artifacts/sanitize/run-NN]
    #[arg(long)]
    #[serde(with = "klab_core::os_path::option")]
    pub out: Option<PathBuf>,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
#[command(
    after_help = "KERNEL is a built-in name (copy, naive, tiled, padded, broken, triad_f32, \
triad_buggy, reduce_guarded, reduce_drop_tail) or path/to/manifest.toml[:name]. Cases: the \
size ladder (0 for vectors, 1, one ragged size per remainder class of the launch, block-exact \
contrasts, a large size, and the index-overflow case: the smallest size whose element \
offsets pass 2^31, skipped and said so when device or host memory cannot hold it), exact \
inputs under poison 0xff, then seeded random inputs (and a varied scalar) under poison 0x7f, \
a determinism check (bitwise), and the operation's properties (transpose: involution; sum: \
swap-ends permutation and linearity). A declared operation (operation = \"declared\") gets \
its own ladder over its size variables and the input cases of its dtypes. Each kernel \
runs in its own process under a watchdog: a fault or a hang is that kernel's failure. \
Exit 0 when every kernel passes, 2 when any fails (known-broken kernels always do)."
)]
pub struct CheckArgs {
    /// Kernels to check
    #[arg(required = true)]
    pub kernels: Vec<String>,
    /// Replay seed for random inputs
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Sizes instead of the ladder, comma-separated
    #[arg(long)]
    pub sizes: Option<String>,
    /// A shape instead of the ladder, a value for every size variable (m=64,n=128,k=32);
    /// again for more
    #[arg(long, value_name = "VAR=V,...", conflicts_with = "sizes")]
    pub shape: Vec<klab_engine::declared::ShapeArg>,
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 600u64)]
    pub timeout: u64,
    /// Print every case, not only failures
    #[arg(long)]
    pub verbose: bool,
    /// Only the exact-input case per size (no random inputs, determinism or properties)
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// List the shapes and cases the check would run, run the C or command reference once
    /// on the smallest shape, and stop: no GPU needed
    #[arg(long, conflicts_with_all = ["json", "format"])]
    pub plan: bool,
    /// The child resumes after this many cases (its predecessor died in the last of them)
    #[arg(long, hide = true, default_value_t = 0)]
    pub resume_after: usize,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
pub struct ReduceLabArgs {
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 600u64)]
    pub timeout: u64,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    #[serde(default)]
    pub output: OutputArgs,
}

/// How a command that reports prints its report: one pair of options for every such
/// command, rendered by the sinks in `output.rs`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Args, Serialize, Deserialize)]
pub struct OutputArgs {
    /// How the report is printed: text, one JSON value, or its table as CSV (stdout then
    /// holds the report alone; everything else goes to stderr)
    #[arg(long, value_enum, default_value_t, help_heading = "Output")]
    pub format: Format,
    /// The same as --format json
    #[arg(long, conflicts_with = "format", help_heading = "Output")]
    pub json: bool,
}

impl OutputArgs {
    /// The format asked for.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else {
            self.format
        }
    }
}

/// Options shared by every command that times.
#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
pub struct TimingArgs {
    /// Cache regime: same-buffer, buffer-rotated or l2-flushed
    #[arg(long, default_value = "same-buffer")]
    pub regime: Regime,
    /// Timer: per-launch (one event pair per launch), batch:K or graph:K (each of the K
    /// launches on a slot of its own, its outputs invalidated before the interval)
    #[arg(long, default_value = "per-launch")]
    pub timer: Timer,
    /// Samples per block (at least 2)
    #[arg(long, default_value_t = 200, value_parser = parse_samples)]
    pub samples: u32,
    /// Warmup: a launch count (at least 2 per slot) or stable:WINDOW:PCT:MAX
    #[arg(long, default_value = "20")]
    pub warmup: WarmupPolicy,
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
#[command(
    allow_negative_numbers = true,
    after_help = "Prints CSV on stdout (header once): \
variant,correct,mismatches,max_abs_error,average_ms,effective_gb_s. Device, launch shape and \
resources go to stderr.\n\n\
Input: for N <= 4096 the integers 0..N^2-1 as float32 (exact); above, distinct 32-bit \
patterns including -0.0, subnormals, infinities and NaNs with payloads. Before each of \
two validation launches (one before warmup, one after timing) the output is filled with \
0xff bytes. Outputs are compared by 32-bit pattern; max_abs_error is a diagnostic \
(non-finite mismatches count as inf, -0.0 vs +0.0 as 0); the mismatch count decides.\n\n\
Timing: 5 warmup launches, then REPS launches between one CUDA event pair in the kernel's \
stream; average_ms is per launch; effective_gb_s = 2 x N^2 x 4 bytes / average time. \
Buffers are reused (a warm, same-buffer regime): the lab's contract, so outputs are not \
invalidated between the timed launches as they are in bench and rounds. Instead, an average \
below the physical floor (the declared bytes at the HBM peak beyond L2 and the measured L2 \
ceiling within it) fails the variant like a failed check, and a batch average far below \
the validation launches' own times is flagged on stderr.\n\n\
A failed check leaves the performance fields empty and exits 2. 'broken' is a known race: \
it always exits 2 and is never timed. 'all' runs copy, naive, tiled, padded, broken."
)]
pub struct TransposeArgs {
    /// copy, naive, tiled, padded, broken or all
    #[arg(value_name = "VARIANT")]
    pub variant: String,
    /// Matrix edge (N x N float32)
    #[arg(value_name = "N")]
    pub n: String,
    /// Timed launches
    #[arg(value_name = "REPS")]
    pub reps: String,
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 600u64)]
    pub timeout: u64,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    #[serde(default)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, PartialEq, Args)]
pub struct ModelArgs {
    /// Matrix edges to prove the tiled mapping for (comma-separated); the largest also
    /// drives the per-variant predictions
    #[arg(long = "n", value_delimiter = ',', default_values_t = [1u64, 7, 31, 32, 33, 65, 257, 4096])]
    pub ns: Vec<u64>,
    /// Tile edge in elements (threads per block along x)
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub tile: u32,
    /// Thread rows per block; each thread covers tile / block-rows rows
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub block_rows: u32,
    /// Shared-memory row strides (in words) for the bank map (comma-separated)
    #[arg(long = "stride", value_delimiter = ',', default_values_t = [32u32, 33, 34])]
    pub strides: Vec<u32>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, PartialEq, Args)]
pub struct LabArgs {
    /// Folder that receives run-NN/ (created if missing)
    #[arg(long, default_value = "artifacts")]
    pub out: PathBuf,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    /// Rounds of the rounds and ceilings steps (6, the fewest that give a 95% interval; even
    /// unless --order mirrored, since alternating rounds come in pairs)
    #[arg(long, default_value_t = 6, value_parser = at_least_one::<u32>)]
    pub rounds: u32,
    /// What one process of the rounds and ceilings steps runs, as for `klab rounds` (round is
    /// faster, but its ratios lean on the H200 even with its settling block: docs/timing.md)
    #[arg(long, value_enum, default_value_t = Isolation::Block)]
    pub isolation: Isolation,
    /// Which blocks make a round of the rounds and ceilings steps, as for `klab rounds`.
    /// Alternating by default: half the blocks of mirrored for the same 6 rounds; the lab
    /// reads its rates and ratios to a percent, not to mirrored's last tenth of one
    #[arg(long, value_enum, default_value_t = RoundOrder::Alternating)]
    pub order: RoundOrder,
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 900u64)]
    pub timeout: u64,
    /// Kernels, sizes and tools of every step, as JSON [default: the built-in plan, which
    /// every run writes to plan.json]
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
#[command(
    after_help = "Kernels: copy, naive, tiled, padded, broken (kernels/transpose.cu, N x N), \
triad_f32, triad_buggy (kernels/triad.cu, n elements). Each block: one poisoned validation \
(a failure or a known-broken kernel stops there, untimed), warmup, samples in acquisition \
order (slot i mod slots), GPU state through NVML before and after, every slot's output \
checked after timing, one more poisoned validation. Writes samples-rNN-p0.csv \
(sample,slot,elapsed_us) and receipt.json into --out (or artifacts/bench/run-NN)."
)]
pub struct BenchArgs {
    /// The kernel: a built-in name or path/to/manifest.toml:NAME
    pub kernel: String,
    /// Problem size (transpose: N for N x N; triad: elements) [default: 4096 / 1000003]
    #[arg(long, value_parser = at_least_one::<u64>)]
    pub n: Option<u64>,
    /// The shape to time instead of the manifest's bench shape: a value for every size
    /// variable, e.g. m=64,n=128,k=32
    #[arg(long, value_name = "VAR=V,...", conflicts_with = "n")]
    pub shape: Option<klab_engine::declared::ShapeArg>,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// Blocks of samples, run one after another in this process
    #[arg(long, default_value_t = 1, value_parser = at_least_one::<u32>)]
    pub rounds: u32,
    /// Output folder (must not exist or be empty)
    #[arg(long)]
    #[serde(with = "klab_core::os_path::option")]
    pub out: Option<PathBuf>,
    /// The claim the receipt states
    #[arg(long)]
    pub claim: Option<String>,
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 600u64)]
    pub timeout: u64,
    /// The klab binary's digest from a parent that runs many blocks (hashed once there);
    /// the child takes it only while its own file still matches
    #[arg(skip)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub klab_binary: Option<klab_run::receipt::KlabBinary>,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
#[command(
    after_help = "Modes: --check runs triad_f32 on n = 0, 1, 255, 256, 257 and \
1,000,003 (seeds 7, 19, 101) against a CPU double-FMA reference (atol 2e-6, rtol 2e-5); \
--buggy launches triad_buggy (i <= n) once for a sanitizer to inspect and exits 2; \
--profile launches triad_f32 once; --bench-hot and --bench-rotate time 200 samples \
(same-buffer, or buffer-rotated over enough slots to exceed 2 x L2) after max(20, 2 x slots) \
warmup launches, verify every slot afterwards, and write samples.csv (sample,slot,elapsed_us) \
with a receipt beside it."
)]
pub struct TriadArgs {
    /// --check, --buggy, --profile, --bench-hot or --bench-rotate
    #[arg(allow_hyphen_values = true)]
    pub mode: Option<String>,
    /// Sample CSV path (benchmark modes only)
    #[arg(allow_hyphen_values = true)]
    #[serde(with = "klab_core::os_path::option")]
    pub samples_csv: Option<PathBuf>,
    /// Any further argument is an error
    #[arg(hide = true, allow_hyphen_values = true)]
    pub extra: Vec<String>,
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 600u64)]
    pub timeout: u64,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    #[serde(default)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, PartialEq, Args, Serialize, Deserialize)]
#[command(
    after_help = "Each round runs the variants in order and then in reverse (ABBA for two; \
with --order alternating, each once, reversed every other round), every block in its own \
`klab bench` process. Every block's row is kept (rounds.csv) with its \
GPU state; a block the power or thermal cap held down is run once more in its place, and \
summary.json names both runs and which one counts. Per-variant receipts collect the blocks' \
samples; ratios are taken per round (baseline median / variant median, > 1 = variant faster) \
with the 95% order-statistic interval of their median, which takes at least 6 rounds."
)]
pub struct RoundsArgs {
    /// Kernels to alternate (at least two, after globs and whole manifests are expanded);
    /// the first is the baseline unless --baseline
    #[arg(required = true)]
    pub kernels: Vec<String>,
    /// The variant ratios are taken against
    #[arg(long)]
    pub baseline: Option<String>,
    /// Problem size (as for bench)
    #[arg(long, value_parser = at_least_one::<u64>)]
    pub n: Option<u64>,
    /// The shape every kernel is timed at (as for bench)
    #[arg(long, value_name = "VAR=V,...", conflicts_with = "n")]
    pub shape: Option<klab_engine::declared::ShapeArg>,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// Rounds (with --resolve, the fewest; at least 6 there). Fewer than 6 give no 95%
    /// interval; at 7 an A/A pair is called different about 1.6% of the time
    #[arg(long, default_value_t = 7, value_parser = at_least_one::<u32>)]
    pub rounds: u32,
    #[command(flatten)]
    pub resolution: ResolveArgs,
    /// What one process runs: each block alone, or a round's blocks in their order after a
    /// settling block it does not count (one device opening and one process start per
    /// round; a block that process could not judge runs again alone). Rounds are separate
    /// processes either way. On the H200 the blocks after the first in a round's process
    /// timed about 7% slower than a block alone, and with the settling block an A/A pair was
    /// still called different in each of 19 runs: use block for ratios (docs/timing.md)
    #[arg(long, value_enum, default_value_t = Isolation::Block)]
    pub isolation: Isolation,
    /// Which blocks make a round: mirrored (A B B A, two blocks of each kernel) or
    /// alternating (A B, then B A: the same sequence of blocks, each half a round, so 6
    /// rounds, the fewest with a 95% interval, take half the blocks; a round's ratio rests
    /// on one block of each kernel, and a difference between running first and last is not
    /// cancelled within a round; --rounds must be even; docs/timing.md)
    #[arg(long, value_enum, default_value_t = RoundOrder::Mirrored)]
    #[serde(default)]
    pub order: RoundOrder,
    /// Output folder (must not exist or be empty)
    #[arg(long)]
    #[serde(with = "klab_core::os_path::option")]
    pub out: Option<PathBuf>,
    /// The watchdog, seconds per block: the global `--timeout`, or this command's default
    #[arg(skip = 900u64)]
    pub timeout: u64,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, PartialEq, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Every shape of the size axes is a group: each kernel is checked at that \
shape once (`klab check --sizes N`, or `--shape` for an operation's several size variables), \
then the kernels that passed are timed there in each regime (`klab bench` each, or with --rounds R one `klab rounds` of them all, whose ratios \
against --baseline come with a round-level interval), each with its receipt. A point whose \
gate fails is recorded as failed and the sweep goes on. The folder holds sweep-plan.json \
(written first), tasks/G/ per group (its group.json, receipts and logs), sweep.csv and \
sweep.json, and report/ (a page with plots of GB/s and speedup against size). \
--devices runs groups on several GPUs at once, one group at a time per GPU. --slurm writes a \
job array (sweep.sbatch, one task per group) and submits it with sbatch (--dry-run: only \
print it); `klab sweep collect DIR` then re-checks every receipt and builds the table and \
report, listing tasks that failed or never ran. Exit 0 when every point passed, 2 when a \
point failed a gate, 1 when a point could not run or a task left no record."
)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub command: Option<SweepCommand>,
    /// Kernels (built-in names, globs or manifest paths)
    #[arg(required_unless_present = "file")]
    pub kernels: Vec<String>,
    /// An axis: n=1024:16384:x2 (xK multiplies, +K adds), n=4097,8193 (each kernel's one
    /// size variable), VAR=... (a size variable of an operation with several: M=64,128),
    /// or regime=same-buffer,l2-flushed; several axes give their product
    #[arg(long = "axis", value_name = "NAME=VALUES", conflicts_with = "file")]
    pub axes: Vec<klab_evidence::sweep::Axis>,
    /// A TOML sweep file (kernels, baseline, rounds, timing and [axes]) instead of the
    /// kernels and --axis
    #[arg(long, conflicts_with_all = ["kernels", "baseline", "rounds"])]
    pub file: Option<PathBuf>,
    /// The kernel the others are compared with at each point
    #[arg(long)]
    pub baseline: Option<String>,
    /// Rounds per point (the kernels alternate ABBA); 0: one bench per kernel and point
    #[arg(long, default_value_t = 0)]
    pub rounds: u32,
    /// With rounds: `--resolve` at every point (each point's rounds get the budget)
    #[command(flatten)]
    pub resolution: ResolveArgs,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// GPUs to spread the points over: all, or CUDA ordinals such as 0,1,3
    #[arg(long, conflicts_with = "slurm")]
    pub devices: Option<klab_evidence::sweep::DeviceList>,
    /// Write a SLURM job array (one task per point) and submit it with sbatch
    #[arg(long)]
    pub slurm: bool,
    /// The SLURM partition
    #[arg(long, requires = "slurm", value_parser = klab_evidence::sweep::slurm_word)]
    pub partition: Option<String>,
    /// Each task's --gres (none: leave it out)
    #[arg(long, requires = "slurm", default_value = "gpu:1", value_parser = klab_evidence::sweep::slurm_word)]
    pub gres: String,
    /// Write the job array and print it; submit nothing
    #[arg(long, requires = "slurm")]
    pub dry_run: bool,
    /// Output folder (must not exist or be empty) [default: artifacts/sweep/run-NN]
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The watchdog, seconds: the global `--timeout`, or this command's default
    #[arg(skip = 900u64)]
    pub timeout: u64,
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, PartialEq, Subcommand)]
pub enum SweepCommand {
    /// Merge a sweep folder's task records into its table and report, re-checking every
    /// receipt and listing the tasks that failed or never ran
    Collect {
        /// The sweep folder
        dir: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Run one group of a planned sweep (what each SLURM array task does)
    #[command(hide = true)]
    Task { dir: PathBuf, group: u32 },
}

/// Rounds until resolved (`klab rounds` and each point of `klab sweep`).
#[derive(Debug, Clone, Copy, PartialEq, Args, Serialize, Deserialize)]
pub struct ResolveArgs {
    /// Add rounds until every ratio's 95% interval is within this much of the ratio (1 or
    /// 1%: +/-1%), or --budget runs out; the summary says which
    #[arg(long, value_name = "PERCENT", value_parser = percent)]
    pub resolve: Option<f64>,
    /// With --resolve: the time the rounds may take in all, seconds (60 or 60s); a round is
    /// added only while it fits (the --rounds asked for always run)
    #[arg(long, value_name = "SECONDS", value_parser = seconds, requires = "resolve", default_value_t = DEFAULT_BUDGET_S)]
    pub budget: f64,
}

impl ResolveArgs {
    /// The target and budget, when `--resolve` was given; refused when `rounds` (the
    /// rounds to start from) are too few for it.
    pub fn checked(&self, rounds: u32) -> anyhow::Result<Option<klab_evidence::sweep::Resolve>> {
        let Some(target) = self.resolve else {
            return Ok(None);
        };
        klab_core::stats::resolve::check_start(rounds).map_err(anyhow::Error::msg)?;
        Ok(Some(klab_evidence::sweep::Resolve {
            target,
            budget_s: self.budget,
        }))
    }

    /// No resolving: the rounds asked for, and no more.
    pub fn none() -> ResolveArgs {
        ResolveArgs {
            resolve: None,
            budget: DEFAULT_BUDGET_S,
        }
    }
}

/// How long rounds until resolved may take by default, seconds.
pub const DEFAULT_BUDGET_S: f64 = 300.0;

#[derive(Debug, Clone, PartialEq, Args)]
#[command(
    after_help = "Each receipt is re-checked first, as `klab receipt check` does: strict schema, \
every field's domain, every artifact re-hashed, the raw samples re-parsed (none below the CUDA \
event resolution), and every figure recomputed from them and from its block receipts; a \
receipt that contradicts its own files is refused naming the field and both values. The pair \
must be two measurements (not one receipt twice, no sample file shared) of like with like. \
--resolve P asks that the ratio's 95% interval be within P of it; when it is not, the output \
says about how many rounds would make it so. Exit 0 when the pair compares (and resolves P), \
1 when a receipt or the pair is refused, 2 when the rounds do not resolve P."
)]
pub struct CompareArgs {
    /// Baseline receipt (JSON)
    pub baseline: PathBuf,
    /// Candidate receipt (JSON)
    pub candidate: PathBuf,
    /// Require the ratio's 95% interval to be within this much of it (1 or 1%: +/-1%);
    /// exit 2 when the receipts' rounds do not give that
    #[arg(long, value_name = "PERCENT", value_parser = percent)]
    pub resolve: Option<f64>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, PartialEq, Args)]
pub struct ReceiptArgs {
    #[command(subcommand)]
    pub command: ReceiptCommand,
}

#[derive(Debug, Clone, PartialEq, Subcommand)]
pub enum ReceiptCommand {
    /// Re-check receipts on their own: everything `klab compare` checks of one side
    Check(ReceiptCheckArgs),
    /// Sign a receipt with an SSH key (ssh-keygen -Y sign), writing FILE.sig
    Sign(ReceiptSignArgs),
    /// Verify a receipt's SSH signature for one identity (ssh-keygen -Y verify)
    Verify(ReceiptVerifyArgs),
}

#[derive(Debug, Clone, PartialEq, Args)]
#[command(
    after_help = "Each receipt is parsed strictly and validated (every field's domain and the \
figures it determines), every artifact and raw sample file is re-hashed, the samples are \
re-parsed, and the median, p10 and p90 and a combined receipt's block receipts are \
recomputed and compared with what it states. Exit 0 when every receipt passes, 1 at the \
first one refused (one line naming the receipt, the field and both values)."
)]
pub struct ReceiptCheckArgs {
    /// Receipts (JSON)
    #[arg(required = true)]
    pub receipts: Vec<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Args)]
#[command(
    after_help = "The receipt is re-checked first (as `klab receipt check`); only a receipt that \
passes is signed. ssh-keygen signs its bytes under the namespace klab-receipt, and the \
signature is written atomically beside it as FILE.sig (or --signature), over nothing but \
an earlier signature. The signature covers the receipt, which binds its artifacts by SHA-256. A key with a passphrase must be in \
ssh-agent (pass its public key): ssh-keygen runs in the background and cannot ask for one. \
Exit 0 when signed, 1 when the receipt is refused, the key cannot sign, ssh-keygen is \
missing or the signature's path holds another file."
)]
pub struct ReceiptSignArgs {
    /// The receipt (JSON)
    pub receipt: PathBuf,
    /// SSH private key, or public key whose private half is in ssh-agent
    #[arg(long)]
    pub key: PathBuf,
    /// Where to write the signature [default: the receipt's path with .sig appended]
    #[arg(long)]
    pub signature: Option<PathBuf>,
    /// The ssh-keygen binary [default: from PATH or /usr/bin]
    #[arg(long)]
    pub ssh_keygen: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Args)]
#[command(
    after_help = "ssh-keygen checks that the signature (FILE.sig, or --signature) was made over \
the receipt's exact bytes under the namespace klab-receipt by a key the allowed-signers file \
lists for the identity (ssh-keygen's ALLOWED SIGNERS format: `IDENTITY KEYTYPE KEY` per \
line). The receipt's artifacts are not re-checked here; run `klab receipt check` for that. \
Exit 0 when the signature verifies, 2 when ssh-keygen does not accept it (a failed gate: the \
receipt or the signature changed, another key signed it, or the allowed-signers file does not \
list that key for the identity), 1 when a file is missing or ssh-keygen cannot be run."
)]
pub struct ReceiptVerifyArgs {
    /// The receipt (JSON)
    pub receipt: PathBuf,
    /// ssh-keygen allowed-signers file: the identities and their public keys
    #[arg(long)]
    pub allowed_signers: PathBuf,
    /// The identity the receipt must be signed by (as the allowed-signers file names it)
    #[arg(long)]
    pub identity: String,
    /// The signature [default: the receipt's path with .sig appended]
    #[arg(long)]
    pub signature: Option<PathBuf>,
    /// The ssh-keygen binary [default: from PATH or /usr/bin]
    #[arg(long)]
    pub ssh_keygen: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Args)]
pub struct EnvArgs {
    /// The CUDA device: filled from the global `--device`
    #[arg(skip)]
    pub device: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

impl TimingArgs {
    /// The timing engine's configuration.
    pub fn config(&self) -> klab_engine::timing::TimingConfig {
        klab_engine::timing::TimingConfig {
            timer: self.timer,
            regime: self.regime,
            samples: self.samples,
            warmup: self.warmup,
            invalidation: klab_core::samples::Invalidation::EveryLaunch,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Args)]
pub struct KernelsArgs {
    /// Also the archive (exploration variants) and the audit's mutants
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// A count of at least 1 (clap's own range error would print `u64::MAX` as the bound).
fn at_least_one<T: std::str::FromStr + PartialOrd + From<u8>>(s: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(v) if v >= T::from(1) => Ok(v),
        Ok(_) => Err(format!("must be at least 1, got {s}")),
        Err(_) => Err(format!("must be a whole number, got '{s}'")),
    }
}

/// A percentage above 0 and below 100 (`1` or `1%`), as a fraction.
fn percent(s: &str) -> Result<f64, String> {
    let t = s.trim();
    match t.strip_suffix('%').unwrap_or(t).trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v < 100.0 => Ok(v / 100.0),
        Ok(_) => Err(format!("must be above 0% and below 100%, got {s}")),
        Err(_) => Err(format!("must be a percentage such as 1 or 0.5%, got '{s}'")),
    }
}

/// Seconds above 0, at most a day (`60` or `60s`).
fn seconds(s: &str) -> Result<f64, String> {
    let t = s.trim();
    match t.strip_suffix('s').unwrap_or(t).trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        Ok(_) => Err(format!("must be above 0 s and at most 86400 s, got {s}")),
        Err(_) => Err(format!("must be seconds such as 60 or 60s, got '{s}'")),
    }
}

fn parse_samples(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(v) if v >= 2 => Ok(v),
        Ok(v) => Err(format!("samples must be at least 2, got {v}")),
        Err(_) => Err(format!("samples must be a whole number, got '{s}'")),
    }
}

#[cfg(test)]
mod global_tests {
    use super::*;

    fn parsed(argv: &[&str]) -> Command {
        Cli::try_parse_from(argv).unwrap().into_command()
    }

    /// `--device` and `--timeout` reach the command's arguments from before or after its
    /// name; without `--timeout`, each command keeps its own watchdog.
    #[test]
    fn the_global_options_reach_every_command_that_takes_them() {
        let Command::Check(a) = parsed(&["klab", "--timeout", "7", "check", "x", "--device", "3"])
        else {
            panic!("not a check")
        };
        assert_eq!((a.timeout, a.device), (7, 3));
        let Command::Check(a) = parsed(&["klab", "check", "x"]) else {
            panic!("not a check")
        };
        assert_eq!((a.timeout, a.device), (600, 0));
        let Command::Rounds(a) = parsed(&["klab", "rounds", "a", "b"]) else {
            panic!("not rounds")
        };
        assert_eq!(a.timeout, 900);
        let Command::Audit(a) = parsed(&["klab", "audit", "--timeout", "9"]) else {
            panic!("not an audit")
        };
        assert_eq!(a.timeout, 9);
        let Command::Audit(a) = parsed(&["klab", "audit"]) else {
            panic!("not an audit")
        };
        assert_eq!(a.timeout, 300);
    }
}
