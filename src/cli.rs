//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Seed 000's transpose harness: validate, time and report one variant or all five
    Transpose(TransposeArgs),
    /// Seed 000's CPU address model: tile coverage, shared-memory banks, global sectors
    Model(ModelArgs),
    /// The main job: the whole transpose investigation into artifacts/run-NN/
    Lab(LabArgs),
    /// Device, driver, runtime and NVRTC facts
    Env(EnvArgs),
}

#[derive(Debug, Args)]
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
Buffers are reused (a warm, same-buffer regime).\n\n\
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
    /// CUDA device ordinal
    #[arg(long, default_value_t = 0)]
    pub device: u32,
}

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// Matrix edges to prove the tiled mapping for (comma-separated); the largest also
    /// drives the per-variant predictions
    #[arg(long = "n", value_delimiter = ',', default_values_t = [1u64, 7, 31, 32, 33, 65, 257, 4096])]
    pub ns: Vec<u64>,
    /// Tile edge in elements (threads per block along x)
    #[arg(long, default_value_t = 32)]
    pub tile: u32,
    /// Thread rows per block; each thread covers tile / block-rows rows
    #[arg(long, default_value_t = 8)]
    pub block_rows: u32,
    /// Shared-memory row strides (in words) for the bank map (comma-separated)
    #[arg(long = "stride", value_delimiter = ',', default_values_t = [32u32, 33, 34])]
    pub strides: Vec<u32>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LabArgs {
    /// Folder that receives run-NN/ (created if missing)
    #[arg(long, default_value = "artifacts")]
    pub out: PathBuf,
    /// CUDA device ordinal
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// Rounds of the repeated benchmark
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// CUDA device ordinal
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}
