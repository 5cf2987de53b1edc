//! `klab trace <export.sqlite>...`: Nsight Systems SQLite exports as tables (kernel
//! launches, copies and sets, a per-direction copy summary, a per-kernel summary), with
//! findings such as API calls that launched nothing. Reading is done by `klab_tools::nsys`; this file is arguments, output
//! and the CSV file.

use std::io::Write as _;
use std::num::IntErrorKind;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use klab_core::artifact;
use klab_tools::nsys::{self, render, Rates};

use crate::EXIT_ERROR;

const AFTER_HELP: &str = "\
Make an export with: nsys export --type sqlite report.nsys-rep
Exports from nsys 2022.1 to 2026.1 are read (columns are found by name); the file is opened
read-only and nothing is written beside it. An export in WAL mode whose changes are still in
its -wal file is read through that file and its -shm (a note says so); without a -shm that
cannot be done without writing one, and the export is an error that says how to fold the
changes in (sqlite3 EXPORT 'PRAGMA wal_checkpoint').

Each file gets its own section:
  header     path, nsys and schema version, GPUs, API call count
  kernels    one row per launch: start_ns, duration_ns (end - start; '-' when the row has
             no timestamps), GB/s and %peak (with --bytes-moved / --peak-gbs), device,
             stream, grid and block as launched (XxYxZ), registers per thread, static +
             dynamic shared memory in bytes, the launching API call, the demangled name
  copies     one row per memcpy (direction, source -> destination memory) and memset:
             bytes, duration_ns, GB/s = bytes / duration_ns
  directions per copy direction (unified-memory migrations, copy kinds 11-13, are their
             own directions, so labelled): count, timed, bytes, total (durations summed),
             median / min / max, wall (time covered: copies that overlap, on several
             streams, count once) and in_kernels (the part of wall while a kernel ran), ns
  summary    per kernel name: launches, timed launches, min / median / max ns (the median
             of an even count is the mean of the two middle values), GB/s at the median
  findings   facts to act on, e.g. 'N runtime API calls and zero kernels: launches failed':
             calls were recorded but no kernel ran (typically a launch error nobody
             checked, such as more than 1024 threads per block); API calls that returned
             an error; rows without timestamps; copies that took more wall-clock time than
             the kernels (with their summed durations when they overlap, and the part
             during kernels); unified-memory migrations, and how much of their time fell
             inside kernels (demand paging: part of the kernels' time, not added to it)
  notes      what the export lacked (tables, columns, ENUM tables) and how it was read

Units: ns, bytes, GB/s = 10^9 bytes per second.

--csv PATH writes one row per kernel launch, memcpy and memset, with the header
  file,kind,name,device,stream,grid,block,registers,shared_mem_bytes,memory,value,
  start_ns,end_ns,duration_ns,bytes,gb_s,pct_of_peak,api,correlation_id
kind is kernel, memcpy or memset; for kernels, bytes is --bytes-moved and pct_of_peak is
gb_s / --peak-gbs * 100; for copies and sets, bytes is what they moved and pct_of_peak is
empty. Empty fields are unknown or not applicable. The file is written atomically, and
not at all when an export could not be read (an existing file is then left as it was).
--csv - prints the CSV alone on stdout instead of the text report.

--summary-csv PATH writes one row per kernel name and export, with the header
  file,name,launches,timed,min_ns,median_ns,max_ns,total_ns,gb_s_at_median,pct_of_peak
(atomically, and not at all when an export could not be read).

Exit status: 0 when every export was read (findings do not change it), 1 when an export
could not be read (the others are still reported) or on an argument error.";

/// Arguments of `klab trace`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct TraceArgs {
    /// Nsight Systems SQLite exports
    #[arg(required = true, value_name = "EXPORT.sqlite")]
    pub exports: Vec<PathBuf>,
    /// Bytes each kernel launch reads plus writes: adds achieved GB/s (bytes / duration)
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, allow_hyphen_values = true)]
    pub bytes_moved: Option<u64>,
    /// Peak memory bandwidth in GB/s: adds % of peak (needs --bytes-moved)
    #[arg(
        long,
        value_name = "GBS",
        value_parser = parse_gbs,
        allow_hyphen_values = true,
        requires = "bytes_moved"
    )]
    pub peak_gbs: Option<f64>,
    /// Write the CSV here ('-' = stdout); see below for its columns
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Write the per-kernel summary as CSV here ('-' = stdout); see below for its columns
    #[arg(long, value_name = "PATH")]
    pub summary_csv: Option<PathBuf>,
}

/// `--bytes-moved`: a whole number of bytes, at least 1.
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("bytes must be positive, got '{s}'"));
    }
    match t.parse::<u64>() {
        Ok(0) => Err("bytes must be at least 1, got 0".into()),
        Ok(n) => Ok(n),
        Err(e) if *e.kind() == IntErrorKind::PosOverflow => {
            Err(format!("bytes must be at most {}, got '{s}'", u64::MAX))
        }
        Err(_) => Err(format!("bytes must be a whole number, got '{s}'")),
    }
}

/// `--peak-gbs`: a finite number above 0.
fn parse_gbs(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) if v.is_nan() => Err("GB/s must be a number, got NaN".into()),
        Ok(_) => Err(format!("GB/s must be a finite number above 0, got '{s}'")),
        Err(_) => Err(format!("GB/s must be a number, got '{s}'")),
    }
}

/// A table written from every trace read.
type Render = fn(&[nsys::Trace], &Rates) -> String;

/// Whether two paths name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Whether two output paths (which need not exist) name one file: the same name in the
/// same folder, however each was written.
fn same_target(a: &Path, b: &Path) -> bool {
    let place = |p: &Path| {
        let folder = match p.parent() {
            Some(f) if !f.as_os_str().is_empty() => f,
            _ => Path::new("."),
        };
        (
            folder.canonicalize().ok(),
            p.file_name().map(|n| n.to_owned()),
        )
    };
    same_file(a, b)
        || matches!((place(a), place(b)), ((Some(x), n), (Some(y), m)) if x == y && n == m)
}

pub fn run(args: TraceArgs) -> anyhow::Result<ExitCode> {
    let rates = Rates {
        bytes_moved: args.bytes_moved,
        peak_gbs: args.peak_gbs,
    };
    let is_stdout = |p: Option<&Path>| p == Some(Path::new("-"));
    let csv_stdout = is_stdout(args.csv.as_deref());
    let summary_stdout = is_stdout(args.summary_csv.as_deref());
    if csv_stdout && summary_stdout {
        bail!("--csv - and --summary-csv - would both write to stdout; give one of them a path");
    }
    // With a CSV on stdout, stdout holds only that CSV.
    let text_out = !csv_stdout && !summary_stdout;
    let outputs = [
        ("--csv", args.csv.as_deref().filter(|_| !csv_stdout)),
        (
            "--summary-csv",
            args.summary_csv.as_deref().filter(|_| !summary_stdout),
        ),
    ];
    for (flag, path) in outputs {
        if let Some(csv) = path {
            if let Some(e) = args.exports.iter().find(|e| same_file(e, csv)) {
                bail!(
                    "{flag} {} is one of the exports ({}); refusing to overwrite it",
                    csv.display(),
                    e.display()
                );
            }
            // A FIFO, device node or link given as the output, or one in no folder: refused
            // before any export is read, so that no CSV is written when another cannot be.
            artifact::check_output(csv)?;
            let folder = match csv.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if !folder.is_dir() {
                bail!(
                    "cannot write {} ({flag}): no folder {}",
                    csv.display(),
                    folder.display()
                );
            }
        }
    }
    if let [(_, Some(a)), (_, Some(b))] = outputs {
        if same_target(a, b) {
            bail!(
                "--csv and --summary-csv both name {}; give each its own file",
                b.display()
            );
        }
    }

    let mut traces = Vec::new();
    let mut failed = 0usize;
    let stdout = std::io::stdout();
    for (i, path) in args.exports.iter().enumerate() {
        match nsys::open(path) {
            Ok(t) => {
                if text_out {
                    let mut out = stdout.lock();
                    if i > 0 {
                        writeln!(out)?;
                    }
                    out.write_all(render::text(&t, &rates).as_bytes())?;
                    out.flush()?;
                }
                traces.push(t);
            }
            Err(e) => {
                failed += 1;
                eprintln!("error: {e}");
            }
        }
    }

    let tables = [
        ("CSV", "csv", args.csv.as_deref(), render::csv as Render),
        (
            "summary CSV",
            "summary csv",
            args.summary_csv.as_deref(),
            render::summary_csv as Render,
        ),
    ];
    for (what, label, path, render) in tables {
        let Some(path) = path else { continue };
        if failed > 0 {
            eprintln!(
                "error: {what} not written to {}: {failed} of {} exports could not be read",
                path.display(),
                args.exports.len()
            );
            continue;
        }
        let text = render(&traces, &rates);
        if is_stdout(Some(path)) {
            let mut out = stdout.lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        } else {
            artifact::write_atomic(path, text.as_bytes())?;
            if text_out {
                let rows = text.lines().count() - 1;
                let gap = if label == "csv" { "\n" } else { "" };
                println!("{gap}{label}: {} ({rows} rows)", path.display());
            }
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(EXIT_ERROR)
    } else {
        ExitCode::SUCCESS
    })
}
