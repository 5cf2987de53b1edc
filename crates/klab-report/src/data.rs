//! Loading a run folder: `lab.json` (required) and every artifact the report knows, each
//! one optional. A missing or unreadable artifact becomes a [`Note`] that the report shows
//! in that artifact's section; only a folder without a readable `lab.json` is an error.

use std::fmt;
use std::path::{Path, PathBuf};

use klab_core::artifact::{self, FileError, Input};
use klab_core::device::DeviceFacts;
use klab_evidence::compare;
use klab_evidence::receipt::{check_relative_path, Receipt, ReceiptError};
use klab_evidence::row::{self, TransposeRow};
use klab_model::bound::{ProfileRecord, PROFILE_SCHEMA};
use serde::Deserialize;

use crate::error::ReportError;
use klab_core::csv::Csv;

/// Why a part of the report has nothing to show, in one line (for example "not in this
/// run: step 'profile' was skipped: ncu not found").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note(pub String);

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One artifact as loaded: its content, or the note that replaces it.
pub type Part<T> = Result<T, Note>;

/// `lab.json` (the type `klab lab` writes it with).
pub use klab_evidence::schema::{LabArtifact, LabRecord, LabStep};

/// `environment.json`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Environment {
    /// klab's version.
    #[serde(default)]
    pub klab_version: Option<String>,
    /// The device facts, `null` without a GPU.
    #[serde(default)]
    pub device: Option<serde_json::Value>,
    /// Why there is no device, when there is none.
    #[serde(default)]
    pub device_error: Option<String>,
    /// NVRTC's version, when it loaded.
    #[serde(default)]
    pub nvrtc_version: Option<String>,
    /// Operating system.
    #[serde(default)]
    pub os: Option<String>,
    /// CPU architecture.
    #[serde(default)]
    pub arch: Option<String>,
}

/// One `check-N.csv`: every variant's verdict at one ladder size.
#[derive(Debug, Clone, PartialEq)]
pub struct LadderSize {
    /// The matrix size.
    pub n: u64,
    /// Every variant's row at this size.
    pub rows: Part<Vec<TransposeRow>>,
}

/// One block of `rounds/rounds.csv` (the type `klab rounds` writes it with).
pub use klab_evidence::schema::RoundsBlock;

/// `rounds/summary.json` and `ceilings/summary.json` (the types `klab rounds` writes them with).
pub use klab_evidence::schema::{RateRow, RoundsAnalysis, RoundsSummary};

/// A receipt found in the run, by its path relative to the run folder.
#[derive(Debug, Clone)]
pub struct ReceiptEntry {
    /// Relative to the run folder.
    pub path: String,
    /// The receipt, or why it could not be read.
    pub receipt: Part<Receipt>,
    /// Why it cannot stand, if it cannot: it does not check as `klab compare` checks a side
    /// ([`klab_evidence::compare::check`]: a file it hashes missing or changed, a figure
    /// its files do not give), or compare would refuse it as evidence of a speedup
    /// ([`klab_evidence::compare::require_evidence`]). Its row says so.
    pub refused: Option<String>,
}

/// One kernel of `sanitize/sanitize.json` (the type `klab sanitize` writes it with).
pub use klab_evidence::sanitize::{
    Outcome as SanitizerOutcome, RunRecord as SanitizerRun, SanitizedKernel,
};

/// One row of `resources.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRow {
    /// Entry function.
    pub kernel: String,
    /// Registers per thread.
    pub registers: String,
    /// Static shared memory per block, bytes.
    pub static_shared_bytes: String,
    /// Local memory per thread, bytes.
    pub local_bytes: String,
    /// `driver` or `ptxas`.
    pub source: String,
}

/// What the report found when it re-hashed an artifact that `lab.json` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactStatus {
    /// The file's SHA-256 equals the recorded one.
    Verified,
    /// The file differs from the recorded hash; `actual` is its hash now.
    Mismatch {
        /// The file's SHA-256 now.
        actual: String,
    },
    /// The file is not in the folder.
    Missing,
    /// The file could not be read.
    Unreadable(String),
    /// The recorded path is absolute or leaves the run folder: not opened.
    Refused(String),
    /// `lab.json` records no hash for it.
    NoHash,
}

/// One artifact of `lab.json` and its re-check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactCheck {
    /// Relative to the run folder.
    pub path: String,
    /// Size recorded in lab.json.
    pub bytes: Option<u64>,
    /// Hash recorded in lab.json.
    pub sha256: Option<String>,
    /// What the re-hash found.
    pub status: ArtifactStatus,
}

/// Everything the report knows about one run folder.
#[derive(Debug, Clone)]
pub struct RunData {
    /// The folder as given.
    pub dir: PathBuf,
    /// The folder's own name (the report never prints the absolute path).
    pub name: String,
    /// `lab.json`.
    pub lab: LabRecord,
    /// `environment.json`.
    pub environment: Part<Environment>,
    /// The device: environment.json's, else lab.json's.
    pub device: Part<DeviceFacts>,
    /// Ladder sizes in increasing N.
    pub ladder: Part<Vec<LadderSize>>,
    /// `benchmark.csv`: every variant at the benchmark size in one process.
    pub benchmark: Part<Vec<TransposeRow>>,
    /// `rounds/rounds.csv`: every block of the alternating rounds (one process, one kernel).
    pub round_blocks: Part<Vec<RoundsBlock>>,
    /// `rounds/summary.json`: the rounds' rates per kernel, the ceiling and the ratios.
    pub rounds: Part<RoundsSummary>,
    /// `ceilings/summary.json`: the copy ceilings, cuBLAS and the best variant (issue 6).
    pub ceilings: Part<RoundsSummary>,
    /// Receipts of the run.
    pub receipts: Part<Vec<ReceiptEntry>>,
    /// `sanitize/sanitize.json` and `sanitize-broken/sanitize.json`.
    pub sanitize: Part<Vec<SanitizedKernel>>,
    /// `profile/profile.json` (schema `klab-profile/1`).
    pub profile: Part<ProfileRecord>,
    /// `resources.csv`.
    pub resources: Part<Vec<ResourceRow>>,
    /// `model.txt`: the address model's report, as the model step wrote it.
    pub model: Part<String>,
    /// Every artifact of lab.json, re-hashed.
    pub artifacts: Vec<ArtifactCheck>,
}

/// Read a run folder. Errors only when `run_dir` is not a folder or has no readable
/// `lab.json`; everything else missing or broken becomes a note.
pub fn load(run_dir: &Path) -> Result<RunData, ReportError> {
    if !run_dir.is_dir() {
        return Err(ReportError::NotAFolder(run_dir.to_path_buf()));
    }
    let lab_path = run_dir.join("lab.json");
    let text = match artifact::resolve_inside(run_dir, Path::new("lab.json"), Input::LAB_RECORD)
        .and_then(|p| artifact::read_regular(&p, Input::LAB_RECORD))
    {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Err(ReportError::NotARun(run_dir.to_path_buf())),
        Err(e) => return Err(e.into()),
    };
    let mut lab: LabRecord =
        serde_json::from_slice(&text).map_err(|e| ReportError::NotALabRecord {
            path: lab_path.clone(),
            message: e.to_string(),
        })?;
    without_the_report_itself(&mut lab);
    let name = run_dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| run_dir.display().to_string());
    let r = Reader {
        dir: run_dir,
        lab: &lab,
    };
    let environment = r.json::<Environment>("environment.json", "environment");
    let device = device(&environment, &lab);
    Ok(RunData {
        dir: run_dir.to_path_buf(),
        name,
        environment,
        device,
        ladder: r.ladder(),
        benchmark: r.with("benchmark.csv", "benchmark", |t| {
            row::parse_csv(t).map_err(|e| e.to_string())
        }),
        round_blocks: r.with(
            "rounds/rounds.csv",
            "rounds",
            klab_evidence::schema::parse_rounds_csv,
        ),
        rounds: r.json::<RoundsSummary>("rounds/summary.json", "rounds"),
        ceilings: r.json::<RoundsSummary>("ceilings/summary.json", "ceilings"),
        receipts: r.receipts(),
        sanitize: r.sanitized(),
        profile: r.profile(),
        resources: r.with("resources.csv", "build", parse_resources),
        model: r.with("model.txt", "model", |t| Ok(t.to_string())),
        artifacts: check_artifacts(run_dir, &lab),
        lab,
    })
}

/// The note for an artifact that is not in the folder, from what `lab.json` says about the
/// step that writes it.
pub fn absent_note(lab: &LabRecord, step: &str, rel: &str) -> Note {
    Note(match lab.step(step) {
        Some(s) if s.status == "skipped" => {
            format!("not in this run: step '{step}' was skipped: {}", s.detail)
        }
        Some(s) if s.status == "error" => {
            format!("not in this run: step '{step}' could not run: {}", s.detail)
        }
        Some(s) if s.status == "failed" => format!(
            "not in this run: {rel} is missing; step '{step}' failed: {}",
            s.detail
        ),
        Some(_) => format!("not in this run: {rel} is missing although step '{step}' ran"),
        None => format!("not in this run: lab.json has no '{step}' step and there is no {rel}"),
    })
}

struct Reader<'a> {
    dir: &'a Path,
    lab: &'a LabRecord,
}

impl Reader<'_> {
    /// `rel` in the run folder, through symbolic links only while they stay inside it.
    fn resolve(&self, rel: &str, kind: Input) -> Result<PathBuf, FileError> {
        artifact::resolve_inside(self.dir, Path::new(rel), kind)
    }

    /// The file's text; `Err` with the step's note when it is missing or unreadable.
    fn text(&self, rel: &str, step: &str) -> Part<String> {
        match self
            .resolve(rel, Input::ARTIFACT)
            .and_then(|p| artifact::read_text(&p, Input::ARTIFACT))
        {
            Ok(text) => Ok(text),
            Err(e) if e.is_not_found() => Err(absent_note(self.lab, step, rel)),
            Err(e) => Err(Note(format!(
                "could not read {rel}: {}",
                relative(e.to_string(), self.dir)
            ))),
        }
    }

    fn with<T>(
        &self,
        rel: &str,
        step: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Part<T> {
        let text = self.text(rel, step)?;
        parse(&text).map_err(|e| Note(format!("could not read {rel}: {e}")))
    }

    /// `sanitize/sanitize.json`, then the known-broken kernels the lab sanitizes into
    /// `sanitize-broken/` when that folder has a record.
    fn sanitized(&self) -> Part<Vec<SanitizedKernel>> {
        let mut kernels: Vec<SanitizedKernel> = self.json("sanitize/sanitize.json", "sanitize")?;
        let broken = "sanitize-broken/sanitize.json";
        if self.dir.join(broken).is_file() {
            kernels.extend(self.json::<Vec<SanitizedKernel>>(broken, "sanitize")?);
        }
        Ok(kernels)
    }

    fn json<T: serde::de::DeserializeOwned>(&self, rel: &str, step: &str) -> Part<T> {
        self.with(rel, step, |t| {
            serde_json::from_str(t).map_err(|e| e.to_string())
        })
    }

    fn ladder(&self) -> Part<Vec<LadderSize>> {
        let mut sizes: Vec<(u64, String)> = std::fs::read_dir(self.dir)
            .map_err(|e| Note(format!("could not list the run folder: {e}")))?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let n = name
                    .strip_prefix("check-")?
                    .strip_suffix(".csv")?
                    .parse::<u64>()
                    .ok()?;
                Some((n, name))
            })
            .collect();
        if sizes.is_empty() {
            return Err(absent_note(self.lab, "ladder", "check-N.csv"));
        }
        sizes.sort();
        Ok(sizes
            .into_iter()
            .map(|(n, name)| LadderSize {
                n,
                rows: self.with(&name, "ladder", |t| {
                    row::parse_csv(t).map_err(|e| e.to_string())
                }),
            })
            .collect())
    }

    /// Receipts listed in lab.json (block receipts of the rounds excepted), else
    /// `benchmark/*/receipt.json`.
    fn receipts(&self) -> Part<Vec<ReceiptEntry>> {
        let mut paths: Vec<String> = self
            .lab
            .artifacts
            .iter()
            .map(|a| a.path.clone())
            .filter(|p| p.ends_with("receipt.json") && !p.starts_with("rounds/blocks/"))
            .collect();
        if paths.is_empty() {
            if let Ok(entries) = std::fs::read_dir(self.dir.join("benchmark")) {
                let mut found: Vec<String> = entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .map(|v| format!("benchmark/{v}/receipt.json"))
                    .filter(|p| self.dir.join(p).is_file())
                    .collect();
                found.sort();
                paths = found;
            }
        }
        if paths.is_empty() {
            return Err(absent_note(
                self.lab,
                "receipts",
                "benchmark/<variant>/receipt.json",
            ));
        }
        Ok(paths
            .into_iter()
            .map(|path| {
                let mut refused = None;
                let receipt = match check_relative_path(&path) {
                    Err(why) => Err(Note(format!("not opened: {path} {why}"))),
                    Ok(()) if !self.dir.join(&path).is_file() => {
                        Err(Note(format!("not in this run: {path} is missing")))
                    }
                    Ok(()) => self
                        .resolve(&path, Input::RECEIPT)
                        .map_err(ReceiptError::from)
                        .and_then(|p| {
                            let r = Receipt::read(&p)?;
                            refused = standing(&path, &p);
                            Ok(r)
                        })
                        .map_err(|e| {
                            Note(format!(
                                "could not read {path}: {}",
                                relative(e.to_string(), self.dir)
                            ))
                        }),
                };
                ReceiptEntry {
                    path,
                    receipt,
                    refused: refused.map(|why| relative(why, self.dir)),
                }
            })
            .collect())
    }

    fn profile(&self) -> Part<ProfileRecord> {
        let p: ProfileRecord = self.json("profile/profile.json", "profile")?;
        if p.schema != PROFILE_SCHEMA {
            return Err(Note(format!(
                "could not read profile/profile.json: schema '{}', expected '{PROFILE_SCHEMA}'",
                p.schema
            )));
        }
        Ok(p)
    }
}

/// Why the receipt at `path` (as the run names it; `at` resolved) cannot stand, if it
/// cannot (see [`ReceiptEntry::refused`]): the line names the receipt.
fn standing(path: &str, at: &Path) -> Option<String> {
    match compare::check(at) {
        Err(e) => Some(format!("klab compare cannot check {e}")),
        Ok(c) => compare::require_evidence(Path::new(path), &c.receipt)
            .err()
            .map(|e| format!("klab compare refuses {e}")),
    }
}

/// Error text with the run folder's path removed (the report shows paths relative to it).
fn relative(message: String, dir: &Path) -> String {
    // Paths that went through resolve_inside are canonical; the canonical folder goes
    // first, so that a relative `dir` is not cut out of the middle of an absolute path.
    let canonical = dir.canonicalize().ok();
    [canonical.as_deref(), Some(dir)]
        .into_iter()
        .flatten()
        .fold(message, |message, dir| {
            let d = dir.display().to_string();
            let d = d.trim_end_matches('/');
            if d.is_empty() {
                message
            } else {
                message.replace(&format!("{d}/"), "")
            }
        })
}

fn device(env: &Part<Environment>, lab: &LabRecord) -> Part<DeviceFacts> {
    let parse = |v: &serde_json::Value, from: &str| {
        serde_json::from_value::<DeviceFacts>(v.clone())
            .map_err(|e| Note(format!("the device in {from} does not read: {e}")))
    };
    let from_lab = || match &lab.device {
        Some(v) if !v.is_null() => parse(v, "lab.json"),
        _ => Err(Note("no device: lab.json records none".into())),
    };
    match env {
        Ok(e) => match &e.device {
            Some(v) if !v.is_null() => parse(v, "environment.json"),
            _ => from_lab().map_err(|_| {
                Note(format!(
                    "no device: {}",
                    e.device_error
                        .as_deref()
                        .unwrap_or("environment.json and lab.json record none")
                ))
            }),
        },
        Err(_) => from_lab(),
    }
}

fn parse_resources(text: &str) -> Result<Vec<ResourceRow>, String> {
    let c = Csv::parse(text)?;
    c.require(&["kernel", "registers"])?;
    c.rows()
        .map(|r| {
            Ok(ResourceRow {
                kernel: r.text("kernel")?,
                registers: r.get("registers").to_string(),
                static_shared_bytes: r.get("static_shared_bytes").to_string(),
                local_bytes: r.get("local_bytes").to_string(),
                source: r.get("source").to_string(),
            })
        })
        .collect()
}

/// The report describes the run up to itself: the lab's report step and the report's own
/// files (which `klab lab` records after writing them) are left out, so that the report
/// rendered inside the lab and `klab report RUN` run on its folder any number of times are
/// the same bytes, and a report never checks its own earlier copy.
fn without_the_report_itself(lab: &mut LabRecord) {
    let own = format!("{}/", crate::REPORT_DIR);
    lab.steps.retain(|s| s.name != crate::REPORT_DIR);
    lab.artifacts.retain(|a| !a.path.starts_with(&own));
}

fn check_artifacts(dir: &Path, lab: &LabRecord) -> Vec<ArtifactCheck> {
    lab.artifacts
        .iter()
        .map(|a| {
            let status = match check_relative_path(&a.path) {
                Err(why) => ArtifactStatus::Refused(format!("the path {why}")),
                // A link out of the folder is not followed: the report must not hash (and
                // so confirm) a file the run does not hold, such as /etc/shadow.
                Ok(()) => match artifact::resolve_inside(dir, Path::new(&a.path), Input::ARTIFACT)
                    .and_then(|p| artifact::sha256_file(&p))
                {
                    Err(e) if e.is_not_found() => ArtifactStatus::Missing,
                    Err(e @ FileError::Escapes { .. }) => {
                        ArtifactStatus::Refused(relative(e.to_string(), dir))
                    }
                    Err(e) => ArtifactStatus::Unreadable(relative(e.to_string(), dir)),
                    Ok(got) => match &a.sha256 {
                        None => ArtifactStatus::NoHash,
                        Some(want) if want.eq_ignore_ascii_case(&got) => ArtifactStatus::Verified,
                        Some(_) => ArtifactStatus::Mismatch { actual: got },
                    },
                },
            };
            ArtifactCheck {
                path: a.path.clone(),
                bytes: a.bytes,
                sha256: a.sha256.clone(),
                status,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(steps: &str) -> LabRecord {
        serde_json::from_str(&format!(r#"{{"steps": {steps}}}"#)).unwrap()
    }

    #[test]
    fn absent_notes_quote_the_step() {
        let l = lab(
            r#"[{"name":"profile","status":"skipped","detail":"ncu not found"},
                        {"name":"ladder","status":"error","detail":"no GPU"},
                        {"name":"rounds","status":"ran","detail":"ok"}]"#,
        );
        assert_eq!(
            absent_note(&l, "profile", "profile/profile.json").0,
            "not in this run: step 'profile' was skipped: ncu not found"
        );
        assert_eq!(
            absent_note(&l, "ladder", "check-N.csv").0,
            "not in this run: step 'ladder' could not run: no GPU"
        );
        assert!(absent_note(&l, "rounds", "rounds/summary.json")
            .0
            .contains("rounds/summary.json is missing although step 'rounds' ran"));
        assert!(absent_note(&l, "sanitize", "sanitize/sanitize.json")
            .0
            .contains("lab.json has no 'sanitize' step"));
    }
}
