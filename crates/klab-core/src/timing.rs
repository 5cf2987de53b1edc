//! The timing engine: one implementation for every command that times a kernel.
//!
//! Per measurement: check the plan; allocate the regime's slots; one poisoned validation
//! (a failure stops here, nothing is timed); warmup by a declared policy; the GPU state
//! before; `samples` samples, each one event pair around one launch, a batch of launches
//! or one graph replay, slot `i mod slots` for sample `i`, with an L2 scrub before each
//! sample (outside the interval) in the flushed regime; the GPU state after; every slot's
//! output checked as the timed launches left it; one more poisoned validation.

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendError};
use crate::gpustate::{BlockState, GpuState};
use crate::plan::{self, PlanError};
use crate::samples::{Regime, Sample, Timer};
use crate::stats::{self, Summary};
use crate::workload::{CheckOutcome, Workload, POISON_BYTES};

/// How long to warm up before sampling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "policy")]
pub enum WarmupPolicy {
    /// A fixed number of launches (raised to two per rotation slot).
    Count { launches: u64 },
    /// Windows of `window` discarded samples until the median of a window moves less than
    /// `tolerance_pct` percent from the previous window's, or `max_launches` is reached.
    UntilStable {
        window: u32,
        tolerance_pct: f64,
        max_launches: u64,
    },
}

impl WarmupPolicy {
    /// `20` or `stable:WINDOW:PCT:MAX`.
    pub fn parse(s: &str) -> Result<WarmupPolicy, String> {
        if let Ok(n) = s.parse::<u64>() {
            return Ok(WarmupPolicy::Count { launches: n });
        }
        let parts: Vec<&str> = s.split(':').collect();
        if let ["stable", w, p, m] = parts[..] {
            let window = w.parse::<u32>().ok().filter(|w| *w >= 3);
            let pct = p.parse::<f64>().ok().filter(|p| p.is_finite() && *p > 0.0);
            let max = m.parse::<u64>().ok().filter(|m| *m >= 1);
            if let (Some(window), Some(tolerance_pct), Some(max_launches)) = (window, pct, max) {
                return Ok(WarmupPolicy::UntilStable {
                    window,
                    tolerance_pct,
                    max_launches,
                });
            }
        }
        Err(format!(
            "warmup '{s}': expected a launch count (e.g. 20) or stable:WINDOW:PCT:MAX (window >= 3, PCT > 0, MAX >= 1)"
        ))
    }

    /// The text [`WarmupPolicy::parse`] reads back: `20` or `stable:WINDOW:PCT:MAX`.
    pub fn spec(&self) -> String {
        match self {
            WarmupPolicy::Count { launches } => launches.to_string(),
            WarmupPolicy::UntilStable {
                window,
                tolerance_pct,
                max_launches,
            } => format!("stable:{window}:{tolerance_pct}:{max_launches}"),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            WarmupPolicy::Count { launches } => format!("count: {launches} launches (at least 2 per slot)"),
            WarmupPolicy::UntilStable {
                window,
                tolerance_pct,
                max_launches,
            } => format!(
                "until stable: windows of {window} samples until the window median moves < {tolerance_pct}% (at most {max_launches} launches)"
            ),
        }
    }
}

impl std::str::FromStr for WarmupPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WarmupPolicy::parse(s)
    }
}

/// What to measure and how.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimingConfig {
    pub timer: Timer,
    pub regime: Regime,
    pub samples: u32,
    pub warmup: WarmupPolicy,
}

/// Why a measurement could not be made (never a correctness verdict).
#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    #[error("launch plan rejected: {0}")]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(
        "buffer rotation needs {need} bytes but conservative allocation budget is {budget} bytes"
    )]
    RotationBudget { need: u64, budget: u64 },
    #[error("invalid timing sample {index}: {value} us is not finite and positive; increase the measurement window (a batch or graph timer)")]
    InvalidSample { index: u64, value: f64 },
    #[error("{0}")]
    Config(String),
}

/// Slots for a regime: 1, or (rotated) enough that the footprint is at least
/// max(8 slots, 2 x L2 + one slot), within a conservative budget of a quarter of free
/// memory (seed 003's rule).
pub fn slots_for(
    regime: Regime,
    slot_bytes: u64,
    l2_bytes: u64,
    free_bytes: u64,
) -> Result<u64, TimingError> {
    if regime != Regime::BufferRotated {
        return Ok(1);
    }
    let slot = slot_bytes.max(1);
    let target = (8 * slot).max(2 * l2_bytes + slot);
    let desired = target.div_ceil(slot);
    let affordable = (free_bytes / (4 * slot)).max(1);
    if desired > affordable {
        return Err(TimingError::RotationBudget {
            need: desired * slot,
            budget: affordable * slot,
        });
    }
    Ok(desired)
}

/// Scrub size for the L2-flushed regime: twice the L2, at least 1 MiB.
pub fn scrub_bytes(l2_bytes: u64) -> u64 {
    (2 * l2_bytes).max(1 << 20)
}

/// Where one block's time went, in seconds of the host's monotonic clock. The caller that
/// opened the device fills `setup_s` and `compile_s`; [`measure`] the others.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phases {
    /// Opening the device: its context, stream and timing events.
    pub setup_s: f64,
    /// The kernel's module and klab's device checker, compiled or loaded from the NVRTC
    /// cache.
    pub compile_s: f64,
    /// Allocating the slots and making their inputs (on the device, or on the host and
    /// uploaded).
    pub inputs_s: f64,
    /// The poisoned validation launches and their judgements (with the reference's
    /// expected values, made when first needed, and the CPU cross-check).
    pub validations_s: f64,
    /// Warmup and timed launches.
    pub timed_s: f64,
    /// Who judged the outputs ([`Workload::verification`]).
    pub checker: String,
}

impl Phases {
    /// `setup 0.21 s, compile 0.03 s, inputs 0.40 s, validations 0.12 s, timed 0.05 s`.
    pub fn describe(&self) -> String {
        format!(
            "setup {:.2} s, compile {:.2} s, inputs {:.2} s, validations {:.2} s, timed {:.2} s",
            self.setup_s, self.compile_s, self.inputs_s, self.validations_s, self.timed_s
        )
    }

    /// The phases' sum.
    pub fn total_s(&self) -> f64 {
        self.setup_s + self.compile_s + self.inputs_s + self.validations_s + self.timed_s
    }
}

/// A completed measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub samples: Vec<Sample>,
    pub slots: u64,
    pub warmup_launches: u64,
    /// Window medians (us) the until-stable policy saw.
    pub warmup_medians_us: Vec<f64>,
    pub scrub_bytes: Option<u64>,
    pub before: CheckOutcome,
    /// Each slot's output as the timed launches left it.
    pub after_timing: Vec<CheckOutcome>,
    /// A fresh poisoned validation after timing.
    pub revalidation: CheckOutcome,
    pub state: BlockState,
    pub phases: Phases,
}

impl Measurement {
    /// Every check passed.
    pub fn correct(&self) -> bool {
        self.before.passed()
            && self.after_timing.iter().all(|c| c.passed())
            && self.revalidation.passed()
    }

    pub fn failures(&self) -> u64 {
        self.before.failures
            + self.after_timing.iter().map(|c| c.failures).sum::<u64>()
            + self.revalidation.failures
    }

    pub fn summary(&self) -> Option<Summary> {
        let v: Vec<f64> = self.samples.iter().map(|s| s.elapsed_us).collect();
        Summary::of(&v)
    }
}

/// What a measurement call produced.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// The validation before timing failed, or the kernel is known-broken: not timed.
    Rejected {
        before: CheckOutcome,
        known_broken: bool,
    },
    Measured(Box<Measurement>),
}

/// One fresh validation of a slot: poison its outputs, launch once, wait, check.
pub fn validate_once<B: Backend, W: Workload>(
    backend: &mut B,
    workload: &W,
    kernel: &B::Kernel,
    bufs: &mut [B::Buffer],
    slot: u64,
    poison: u8,
) -> Result<CheckOutcome, BackendError> {
    workload.poison(backend, bufs, poison)?;
    backend.launch(kernel, &workload.plan(), &workload.args::<B>(bufs))?;
    backend.synchronize()?;
    workload.check(backend, bufs, slot)
}

/// Warmup launches before the profiled launch (seed 000: one validation, five warmups).
pub const PROFILE_WARMUP: u64 = 5;

/// How many launches of the entry `klab profile`'s child makes before the one it
/// profiles: the poisoned validation, then `warmup` warmups. ncu's `--launch-skip`.
pub fn profile_launch_skip(warmup: u64) -> u64 {
    1 + warmup
}

/// What the profiled sequence found.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfiledLaunch {
    /// The validation before warmup.
    pub before: CheckOutcome,
    /// The measured launch's own output, checked after it ran (the output was poisoned
    /// after warmup, so stale results cannot pass).
    pub measured: Option<CheckOutcome>,
    /// Launches of the entry before the measured one.
    pub launches_before: u64,
}

/// The launch sequence `klab profile` runs under Nsight Compute: one poisoned
/// validation, `warmup` launches on the same buffers, a fresh poison (a fill, not a
/// launch), exactly one measured launch, and its check. A failed validation or a
/// known-broken kernel stops before the measured launch (`measured` is `None`).
pub fn profile_sequence<B: Backend, W: Workload>(
    backend: &mut B,
    workload: &W,
    kernel: &B::Kernel,
    warmup: u64,
) -> Result<ProfiledLaunch, TimingError> {
    let plan = workload.plan();
    let resources = backend.resources(kernel);
    plan::validate(&plan, backend.limits(), Some(&resources), false)?;
    let mut bufs = workload.create_slot(backend, 0)?;
    let before = validate_once(backend, workload, kernel, &mut bufs, 0, POISON_BYTES[0])?;
    let mut launches_before = 1;
    if !before.passed() || workload.known_broken() {
        return Ok(ProfiledLaunch {
            before,
            measured: None,
            launches_before,
        });
    }
    for _ in 0..warmup {
        backend.launch(kernel, &plan, &workload.args::<B>(&bufs))?;
        launches_before += 1;
    }
    backend.synchronize()?;
    let measured = validate_once(backend, workload, kernel, &mut bufs, 0, POISON_BYTES[1])?;
    Ok(ProfiledLaunch {
        before,
        measured: Some(measured),
        launches_before,
    })
}

/// Run one measurement block of `workload` on `backend`.
pub fn measure<B: Backend, W: Workload>(
    backend: &mut B,
    workload: &W,
    kernel: &B::Kernel,
    cfg: &TimingConfig,
    label: &str,
    observe: &mut dyn FnMut() -> GpuState,
) -> Result<Outcome, TimingError> {
    // One sample is the transpose lab's batch; statistics need two (the commands say so).
    if cfg.samples < 1 {
        return Err(TimingError::Config("at least 1 sample is needed".into()));
    }
    let plan = workload.plan();
    let resources = backend.resources(kernel);
    plan::validate(&plan, backend.limits(), Some(&resources), false)?;
    let free = backend.free_memory_bytes()?;
    let slots = slots_for(cfg.regime, workload.slot_bytes(), backend.l2_bytes(), free)?;
    let needed = slots.saturating_mul(workload.slot_bytes());
    if needed > free {
        return Err(TimingError::Config(format!(
            "{} slot(s) need {needed} bytes of device memory; {free} bytes are free",
            slots
        )));
    }
    let made = std::time::Instant::now();
    let mut bufs = Vec::with_capacity(slots as usize);
    for s in 0..slots {
        bufs.push(workload.create_slot(backend, s)?);
    }
    backend.synchronize()?;
    let inputs_s = made.elapsed().as_secs_f64();
    let mut outcome = measure_in(backend, workload, kernel, cfg, label, &mut bufs, observe)?;
    if let Outcome::Measured(m) = &mut outcome {
        m.phases.inputs_s = inputs_s;
    }
    Ok(outcome)
}

/// [`measure`] over slots the caller made with `workload.create_slot` (one per slot; the
/// regime's slot count is the caller's to choose): a command that measures several kernels
/// of one shape on the same buffers, as the transpose lab's harness does, keeps their
/// placement in memory the same for all of them.
pub fn measure_in<B: Backend, W: Workload>(
    backend: &mut B,
    workload: &W,
    kernel: &B::Kernel,
    cfg: &TimingConfig,
    label: &str,
    bufs: &mut [Vec<B::Buffer>],
    observe: &mut dyn FnMut() -> GpuState,
) -> Result<Outcome, TimingError> {
    if cfg.samples < 1 || bufs.is_empty() {
        return Err(TimingError::Config(
            "at least 1 sample and 1 slot are needed".into(),
        ));
    }
    let plan = workload.plan();
    plan::validate(
        &plan,
        backend.limits(),
        Some(&backend.resources(kernel)),
        false,
    )?;
    let slots = bufs.len() as u64;

    // Validation before anything is timed.
    let validating = std::time::Instant::now();
    let before = validate_once(backend, workload, kernel, &mut bufs[0], 0, POISON_BYTES[0])?;
    let mut validations_s = validating.elapsed().as_secs_f64();
    if !before.passed() || workload.known_broken() {
        return Ok(Outcome::Rejected {
            before,
            known_broken: workload.known_broken(),
        });
    }

    let per_sample = cfg.timer.launches_per_sample();
    let graphs = match cfg.timer {
        Timer::GraphReplay { launches } => {
            let mut g = Vec::with_capacity(slots as usize);
            for b in bufs.iter() {
                g.push(backend.capture_graph(kernel, &plan, &workload.args::<B>(b), launches)?);
            }
            g
        }
        _ => Vec::new(),
    };
    let scrub = match cfg.regime {
        Regime::L2Flushed => {
            let bytes = scrub_bytes(backend.l2_bytes());
            Some((backend.alloc((bytes / 4) as usize)?, bytes))
        }
        _ => None,
    };
    let mut scrub = scrub;

    // One sample: scrub (outside the interval), then the timed unit.
    let mut take = |backend: &mut B, i: u64| -> Result<f64, TimingError> {
        let slot = (i % slots) as usize;
        if let Some((buf, _)) = scrub.as_mut() {
            backend.fill_bytes(buf, (i % 251) as u8)?;
        }
        backend.event_start()?;
        match cfg.timer {
            Timer::GraphReplay { .. } => backend.replay(&graphs[slot])?,
            _ => {
                let args = workload.args::<B>(&bufs[slot]);
                for _ in 0..per_sample {
                    backend.launch(kernel, &plan, &args)?;
                }
            }
        }
        let ms = backend.event_stop_ms()?;
        Ok(ms * 1000.0 / f64::from(per_sample))
    };

    // Warmup.
    let timing = std::time::Instant::now();
    let mut warmup_launches = 0u64;
    let mut warmup_medians_us = Vec::new();
    match cfg.warmup {
        WarmupPolicy::Count { launches } => {
            let count = launches.max(2 * slots);
            for i in 0..count {
                let slot = (i % slots) as usize;
                backend.launch(kernel, &plan, &workload.args::<B>(&bufs[slot]))?;
            }
            backend.synchronize()?;
            warmup_launches = count;
        }
        WarmupPolicy::UntilStable {
            window,
            tolerance_pct,
            max_launches,
        } => {
            let mut i = 0u64;
            loop {
                let mut w = Vec::with_capacity(window as usize);
                for _ in 0..window {
                    w.push(take(backend, i)?);
                    i += 1;
                }
                warmup_launches += u64::from(window) * u64::from(per_sample);
                w.sort_by(f64::total_cmp);
                let m = stats::quantile_sorted(&w, 0.5).unwrap_or(f64::NAN);
                let stable = warmup_medians_us
                    .last()
                    .map(|prev: &f64| ((m - prev) / prev).abs() * 100.0 < tolerance_pct)
                    .unwrap_or(false);
                warmup_medians_us.push(m);
                if stable || warmup_launches >= max_launches {
                    break;
                }
            }
        }
    }

    let state_before = observe();
    let mut samples = Vec::with_capacity(cfg.samples as usize);
    for i in 0..u64::from(cfg.samples) {
        let us = take(backend, i)?;
        if !(us.is_finite() && us > 0.0) {
            return Err(TimingError::InvalidSample {
                index: i,
                value: us,
            });
        }
        samples.push(Sample {
            sample: i,
            slot: i % slots,
            elapsed_us: us,
        });
    }
    let state_after = observe();
    backend.synchronize()?;
    let timed_s = timing.elapsed().as_secs_f64();

    let validating = std::time::Instant::now();
    let mut after_timing = Vec::with_capacity(slots as usize);
    for (s, b) in bufs.iter().enumerate() {
        after_timing.push(workload.check(backend, b, s as u64)?);
    }
    // The second poison pattern: a kernel that writes the first one can't pass both.
    let revalidation = validate_once(backend, workload, kernel, &mut bufs[0], 0, POISON_BYTES[1])?;
    validations_s += validating.elapsed().as_secs_f64();

    Ok(Outcome::Measured(Box::new(Measurement {
        samples,
        slots,
        warmup_launches,
        warmup_medians_us,
        scrub_bytes: scrub.as_ref().map(|(_, b)| *b),
        before,
        after_timing,
        revalidation,
        state: BlockState::new(label, state_before, state_after),
        phases: Phases {
            validations_s,
            timed_s,
            checker: workload.verification(),
            ..Phases::default()
        },
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::host::{Call, HostArg, HostBackend};
    use crate::general::{DeclaredWorkload, InputCase};
    use crate::Variant;

    fn builtin(name: &str, n: u64) -> DeclaredWorkload {
        let (_, decl) = crate::registry::resolve(name, crate::registry::Scope::Audit).unwrap();
        let case = InputCase::Uniform { seed: 7 };
        DeclaredWorkload::builtin(decl, n, case, 0).unwrap()
    }

    fn triad_kernel(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let [HostArg::Buffer(x), HostArg::Buffer(z), HostArg::Buffer(y), HostArg::U64(n), HostArg::F32(a)] =
            args
        else {
            panic!("triad args");
        };
        let out: Vec<u32> = (0..*n as usize)
            .map(|i| {
                a.mul_add(f32::from_bits(mem[*x][i]), f32::from_bits(mem[*z][i]))
                    .to_bits()
            })
            .collect();
        mem[*y][..out.len()].copy_from_slice(&out);
    }
    /// Correct for the first 3 launches, then stops writing element 0 and writes NaN.
    fn triad_decays(mem: &mut [Vec<u32>], args: &[HostArg], launch: u64) {
        triad_kernel(mem, args, launch);
        if launch >= 3 {
            if let HostArg::Buffer(y) = args[2] {
                mem[y][0] = 0x7fc0_0000;
            }
        }
    }

    fn cfg(regime: Regime, timer: Timer) -> TimingConfig {
        TimingConfig {
            timer,
            regime,
            samples: 10,
            warmup: WarmupPolicy::Count { launches: 20 },
        }
    }

    fn run(
        b: &mut HostBackend,
        w: &DeclaredWorkload,
        c: &TimingConfig,
    ) -> Result<Outcome, TimingError> {
        let k = b.kernel(w.entry()).unwrap();
        measure(b, w, &k, c, "block", &mut GpuState::default)
    }

    fn measured(o: Outcome) -> Measurement {
        match o {
            Outcome::Measured(m) => *m,
            other => panic!("expected a measurement, got {other:?}"),
        }
    }

    #[test]
    fn the_profiled_launch_is_the_one_after_the_computed_skip() {
        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_kernel);
        let w = builtin("triad_f32", 257);
        let k = b.kernel(w.entry()).unwrap();
        let p = profile_sequence(&mut b, &w, &k, PROFILE_WARMUP).unwrap();
        assert_eq!(p.launches_before, profile_launch_skip(PROFILE_WARMUP));
        assert_eq!(
            profile_launch_skip(PROFILE_WARMUP),
            6,
            "the transpose lab: --launch-skip 6"
        );
        assert!(p.before.passed());
        assert!(p.measured.as_ref().unwrap().passed());
        // The recorded calls: exactly skip + 1 launches, and the output was poisoned
        // between the last warmup and the measured launch.
        let launches: Vec<usize> = b
            .calls
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c, Call::Launch(_)))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            launches.len() as u64,
            profile_launch_skip(PROFILE_WARMUP) + 1
        );
        let last = *launches.last().unwrap();
        let prev = launches[launches.len() - 2];
        assert!(b.calls[prev..last]
            .iter()
            .any(|c| matches!(c, Call::Fill { byte: 0x7f, .. })));
    }

    #[test]
    fn a_kernel_that_stops_writing_fails_the_profiled_check() {
        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_decays);
        let w = builtin("triad_f32", 257);
        let k = b.kernel(w.entry()).unwrap();
        let p = profile_sequence(&mut b, &w, &k, PROFILE_WARMUP).unwrap();
        assert!(p.before.passed());
        assert!(!p.measured.unwrap().passed());
    }

    #[test]
    fn rotation_follows_the_seed_rule_and_refuses_beyond_budget() {
        // Triad at the seed's n: 12,000,036-byte slots, H200's 60 MiB L2.
        let slot = 12_000_036;
        let l2 = 62_914_560;
        assert_eq!(
            slots_for(Regime::BufferRotated, slot, l2, 140 << 30).unwrap(),
            12
        );
        assert_eq!(slots_for(Regime::SameBuffer, slot, l2, 0).unwrap(), 1);
        assert_eq!(slots_for(Regime::L2Flushed, slot, l2, 0).unwrap(), 1);
        // Small slots: at least 8 of them, and more than twice L2 in total.
        assert_eq!(
            slots_for(Regime::BufferRotated, 1 << 20, 0, 1 << 40).unwrap(),
            8
        );
        let e = slots_for(Regime::BufferRotated, slot, l2, 100_000_000).unwrap_err();
        assert_eq!(
            e.to_string(),
            "buffer rotation needs 144000432 bytes but conservative allocation budget is 24000072 bytes"
        );
    }

    #[test]
    fn per_launch_samples_rotate_slots_and_every_slot_is_checked() {
        let mut b = HostBackend::new()
            .with_general_kernel("triad_f32", triad_kernel)
            .with_l2_bytes(4096);
        let w = builtin("triad_f32", 1000);
        let m = measured(run(&mut b, &w, &cfg(Regime::BufferRotated, Timer::PerLaunch)).unwrap());
        // 12,000-byte slots, L2 4096: max(8 slots, 2*4096 + slot) -> 8 slots.
        assert_eq!(m.slots, 8);
        assert_eq!(m.warmup_launches, 20);
        assert_eq!(m.samples.len(), 10);
        assert_eq!(
            m.samples.iter().map(|s| s.slot).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]
        );
        assert!(
            m.samples.iter().all(|s| (s.elapsed_us - 10.0).abs() < 1e-9),
            "0.01 ms per launch"
        );
        assert_eq!(m.after_timing.len(), 8);
        assert!(m.correct());
    }

    #[test]
    fn batch_and_graph_samples_are_means_per_launch() {
        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_kernel);
        let w = builtin("triad_f32", 257);
        let m = measured(
            run(
                &mut b,
                &w,
                &cfg(Regime::SameBuffer, Timer::Batch { launches: 4 }),
            )
            .unwrap(),
        );
        assert!(m.samples.iter().all(|s| (s.elapsed_us - 10.0).abs() < 1e-9));
        let before = b.launch_count();
        let m = measured(
            run(
                &mut b,
                &w,
                &cfg(Regime::SameBuffer, Timer::GraphReplay { launches: 5 }),
            )
            .unwrap(),
        );
        assert!(m.samples.iter().all(|s| (s.elapsed_us - 10.0).abs() < 1e-9));
        assert_eq!(
            b.calls.iter().filter(|c| matches!(c, Call::Replay)).count(),
            10
        );
        // validation + 20 warmup + 10 replays of 5 + revalidation
        assert_eq!(b.launch_count() - before, 1 + 20 + 50 + 1);
    }

    #[test]
    fn the_flushed_regime_scrubs_before_each_sample_outside_the_interval() {
        let mut b = HostBackend::new()
            .with_general_kernel("triad_f32", triad_kernel)
            .with_l2_bytes(1 << 21);
        let w = builtin("triad_f32", 256);
        let m = measured(run(&mut b, &w, &cfg(Regime::L2Flushed, Timer::PerLaunch)).unwrap());
        assert_eq!(m.scrub_bytes, Some(1 << 22));
        // Every EventStart is immediately preceded by a fill of the scrub buffer.
        let scrub = 3; // x, z, y, then the scrub buffer
        let mut starts = 0;
        for pair in b.calls.windows(2) {
            if pair[1] == Call::EventStart {
                starts += 1;
                assert_eq!(
                    pair[0],
                    Call::Fill {
                        buffer: scrub,
                        byte: ((starts - 1) % 251) as u8
                    }
                );
            }
        }
        assert_eq!(starts, 10);
    }

    #[test]
    fn a_failing_kernel_is_rejected_before_timing_and_late_failures_are_caught() {
        fn wrong(mem: &mut [Vec<u32>], args: &[HostArg], launch: u64) {
            triad_kernel(mem, args, launch);
            if let HostArg::Buffer(y) = args[2] {
                mem[y][5] = 0;
            }
        }
        let mut b = HostBackend::new().with_general_kernel("triad_f32", wrong);
        let w = builtin("triad_f32", 300);
        match run(&mut b, &w, &cfg(Regime::SameBuffer, Timer::PerLaunch)).unwrap() {
            Outcome::Rejected {
                before,
                known_broken,
            } => {
                assert_eq!(before.failures, 1);
                assert!(!known_broken);
            }
            other => panic!("{other:?}"),
        }
        assert!(!b.calls.contains(&Call::EventStart), "nothing timed");

        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_decays);
        let m = measured(run(&mut b, &w, &cfg(Regime::SameBuffer, Timer::PerLaunch)).unwrap());
        assert!(m.before.passed());
        assert_eq!(m.after_timing[0].failures, 1);
        assert_eq!(m.revalidation.failures, 1);
        assert!(!m.correct());
    }

    #[test]
    fn known_broken_kernels_are_never_timed() {
        let mut b = HostBackend::new().with_general_kernel("triad_buggy", triad_kernel);
        let w = builtin("triad_buggy", 300);
        let o = run(&mut b, &w, &cfg(Regime::SameBuffer, Timer::PerLaunch)).unwrap();
        assert!(matches!(
            o,
            Outcome::Rejected {
                known_broken: true,
                ..
            }
        ));
        assert!(!b.calls.contains(&Call::EventStart));
    }

    #[test]
    fn until_stable_warmup_stops_when_window_medians_agree() {
        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_kernel);
        let w = builtin("triad_f32", 256);
        let mut c = cfg(Regime::SameBuffer, Timer::PerLaunch);
        c.warmup = WarmupPolicy::UntilStable {
            window: 5,
            tolerance_pct: 1.0,
            max_launches: 1000,
        };
        let m = measured(run(&mut b, &w, &c).unwrap());
        // Synthetic times never move: the second window already agrees.
        assert_eq!(m.warmup_medians_us.len(), 2);
        assert_eq!(m.warmup_launches, 10);
        assert_eq!(WarmupPolicy::parse("stable:5:1:1000").unwrap(), c.warmup);
        assert_eq!(
            WarmupPolicy::parse("20").unwrap(),
            WarmupPolicy::Count { launches: 20 }
        );
        assert!(WarmupPolicy::parse("stable:1:1:10").is_err());
        assert!(WarmupPolicy::parse("warm").is_err());
    }

    #[test]
    fn a_transpose_variant_runs_through_the_same_engine() {
        fn t(out: &mut [u32], input: &[u32], n: u64, _: u64) {
            for r in 0..n {
                for c in 0..n {
                    out[(c * n + r) as usize] = input[(r * n + c) as usize];
                }
            }
        }
        let mut b = HostBackend::new().with_kernel("transpose_padded", t);
        let w = builtin(Variant::Padded.name(), 33);
        let k = b.kernel("transpose_padded").unwrap();
        let o = measure(
            &mut b,
            &w,
            &k,
            &cfg(Regime::SameBuffer, Timer::PerLaunch),
            "b",
            &mut GpuState::default,
        )
        .unwrap();
        let m = measured(o);
        assert!(m.correct());
        assert_eq!(m.summary().unwrap().median, 10.0);
    }

    #[test]
    fn no_samples_is_a_configuration_error_and_one_batch_is_a_measurement() {
        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_kernel);
        let w = builtin("triad_f32", 256);
        let mut c = cfg(Regime::SameBuffer, Timer::PerLaunch);
        c.samples = 0;
        assert!(matches!(run(&mut b, &w, &c), Err(TimingError::Config(_))));
        c.samples = 1;
        c.timer = Timer::Batch { launches: 4 };
        assert_eq!(measured(run(&mut b, &w, &c).unwrap()).samples.len(), 1);
        // Caller-made slots: none is a configuration error, one is a measurement on it.
        let k = b.kernel("triad_f32").unwrap();
        let none = measure_in(&mut b, &w, &k, &c, "b", &mut [], &mut GpuState::default);
        assert!(matches!(none, Err(TimingError::Config(_))));
        let mut slot = [w.create_slot(&mut b, 0).unwrap()];
        let allocs = b.calls.len();
        let o = measure_in(&mut b, &w, &k, &c, "b", &mut slot, &mut GpuState::default).unwrap();
        assert!(measured(o).correct());
        assert!(!b.calls[allocs..]
            .iter()
            .any(|c| matches!(c, Call::Alloc(_))));
    }
}
