//! A receipt made: each timing block's samples written and hashed, and the receipt that
//! binds them, with the source, the binary, the device, the workload and how correctness
//! was checked ([`write_receipt`]). The schema and its validation are `klab-evidence`'s;
//! this is the one place that fills it in from a measurement.

use std::path::{Path, PathBuf};

use klab_core::artifact::{sha256_file, sha256_hex, utc_timestamp, write_atomic};
use klab_core::samples::samples_csv;
use klab_core::stats::{gb_per_s, Summary, QUANTILE_RULE};
use klab_cuda::module::Module;
use klab_engine::timing::Measurement;
use klab_engine::workload::Workload;
use klab_evidence::receipt::{self, Receipt, RECEIPT_SCHEMA};
use klab_spec::registry::KernelRef;

use crate::blocks::BenchSpec;
use crate::error::{RunError, Within};
use crate::kernel::Kernel;

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

pub fn workload_info(kernel: &Kernel, n: u64, device: u32) -> Result<WorkloadInfo, RunError> {
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
    /// The klab binary's digest, from a parent that hashed it once ([`KlabBinary`]).
    pub klab: Option<&'a KlabBinary>,
}

/// The klab binary a receipt names: its SHA-256, with a stamp of the file it was taken of
/// (device, inode, size, modification and change times). A parent that starts many blocks
/// hashes itself once and hands this to each child (the same file), which takes it only
/// while the file it runs from has the same stamp, and hashes itself otherwise. The change
/// time is the kernel's: a copy that keeps the modification time (`cp -p`) still differs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KlabBinary {
    pub sha256: String,
    pub stamp: String,
}

impl KlabBinary {
    /// The running binary, hashed now.
    pub fn this() -> Result<KlabBinary, RunError> {
        let exe = std::env::current_exe()?;
        let stamp = stamp(&exe)?;
        Ok(KlabBinary {
            sha256: sha256_file(&exe).within(|| "hashing the klab binary".into())?,
            stamp,
        })
    }

    /// `given` if the running binary is still the file it describes, else the binary hashed
    /// now.
    pub fn confirmed(given: Option<&KlabBinary>) -> Result<KlabBinary, RunError> {
        if let Some(g) = given {
            if stamp(&std::env::current_exe()?)? == g.stamp {
                return Ok(g.clone());
            }
        }
        KlabBinary::this()
    }
}

/// A file's device, inode, size, and modification and change times (nanoseconds).
fn stamp(path: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok(format!(
        "{}:{}:{}:{}.{:09}:{}.{:09}",
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// Write each block's samples (`samples-rNN[-pP].csv`) and a receipt into `dir`.
pub fn write_receipt(input: ReceiptInput<'_>) -> Result<(PathBuf, Receipt), RunError> {
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
        klab,
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
            sha256: sha256_file(&p).within(|| format!("hashing {}", p.display()))?,
            bytes: std::fs::metadata(&p)?.len(),
            path: name,
            role,
        });
    }
    let summary = Summary::of(&all).within(|| "no samples to summarise".into())?;
    let integrity = integrity(&blocks).within(|| "no block to vouch for".into())?;
    let gbs = gb_per_s(info.useful_bytes, summary.median);
    let peak = facts.theoretical_peak_gb_s();
    let flagged = states.iter().filter(|s| !s.flags.is_empty()).count() as u64;
    let power = states.first().and_then(|s| s.before.power_limit_w);
    let klab = KlabBinary::confirmed(klab)?;
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
            name: Some(spec.kernel.name()),
            binary_sha256: klab.sha256,
            compiler: module.compiler(),
            flags: module.flags().to_vec(),
            generated_by: spec.kernel.decl.generated_by.clone(),
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
        .within(|| "the receipt klab built does not validate".into())?;
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
) -> Result<BlockFiles, RunError> {
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
        write_atomic(&dir.join(&name), text.as_bytes()).within(|| format!("writing {name}"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A digest handed down is taken while the binary is the file it was taken of (so a
    /// block does not hash klab again), and replaced when size or time differ.
    #[test]
    fn a_binary_digest_from_the_parent_is_taken_only_for_the_same_file() {
        let exe = std::env::current_exe().unwrap();
        let handed = KlabBinary {
            sha256: "0".repeat(64),
            stamp: stamp(&exe).unwrap(),
        };
        assert_eq!(KlabBinary::confirmed(Some(&handed)).unwrap(), handed);
        let stale = KlabBinary {
            stamp: handed.stamp.replace(':', ";"),
            ..handed.clone()
        };
        let fresh = KlabBinary::confirmed(Some(&stale)).unwrap();
        assert_eq!(fresh, KlabBinary::this().unwrap());
        assert_eq!(fresh.sha256, sha256_file(&exe).unwrap());
        assert_eq!(KlabBinary::confirmed(None).unwrap(), fresh);
        // A copy that keeps the modification time is another file: another stamp.
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("klab");
        let t = std::fs::metadata(&exe).unwrap().modified().unwrap();
        let write_with_time = |bytes: &[u8]| {
            std::fs::write(&copy, bytes).unwrap();
            let f = std::fs::File::options().write(true).open(&copy).unwrap();
            f.set_modified(t).unwrap();
        };
        write_with_time(b"klab");
        let before = stamp(&copy).unwrap();
        std::fs::remove_file(&copy).unwrap();
        write_with_time(b"KLAB");
        let after = stamp(&copy).unwrap();
        let size_and_mtime = |s: &str| s.split(':').skip(2).take(2).collect::<Vec<_>>().join(":");
        assert_eq!(size_and_mtime(&before), size_and_mtime(&after));
        assert_ne!(after, before);
    }

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
        if Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../.git")
            .exists()
        {
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
        let gemm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ops/gemm/gemm.toml");
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
