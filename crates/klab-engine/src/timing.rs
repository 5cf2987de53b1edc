//! The timing engine: one implementation for every command that times a kernel.
//!
//! Per measurement: check the plan; allocate the regime's slots ([`SlotLayout`]: a group
//! per rotation step, a slot per launch of an interval); one poisoned validation, timed in
//! its own event pair (a failure stops here, nothing is timed); warmup by a declared
//! policy; the samples to verify drawn at random; the GPU state before; `samples` samples,
//! each one event pair around one launch, a batch of launches or one graph replay on group
//! `i mod groups`, after the invalidation of its slots ([`Invalidation`]) and, in the
//! flushed regime, an L2 scrub (both outside the interval); each drawn sample verified right
//! after its interval; the GPU state after; every slot's output checked as its last timed
//! launch left it; one more poisoned, timed validation. The block then has a correctness
//! verdict, a checked time beside its timed time, and the physical floor its median must
//! not break ([`Measurement::gate_failure`]).

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendError};
use crate::workload::{
    perturb_inputs, prepare_launches, LaunchError, NewInputs, PerturbSource, Workload, POISON_BYTES,
};
use klab_core::floor::Floor;
use klab_core::gpustate::{BlockState, GpuState};
use klab_core::samples::{Invalidation, Regime, Sample, Timer};
use klab_core::stats::{self, Summary};
use klab_spec::rule::CheckOutcome;

/// How long to warm up before sampling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
    pub invalidation: Invalidation,
}

/// Why a measurement could not be made (never a correctness verdict).
#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    #[error("launch plan rejected: {0}")]
    Plan(#[from] LaunchError),
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
    /// The process around the block stopped it before it started
    /// ([`BlockEvents::start`]).
    #[error("{0}")]
    Stopped(String),
}

/// What a block tells the process that runs it, and asks of it: the GPU's state around its
/// samples, when it may start its work on the device (before it makes its slots, so it
/// finds the device's memory as a block alone would) and when its last launch is over (its
/// second validation, the last launch timed in any way). A process that paces blocks holds
/// a block at [`BlockEvents::start`] until the block before it has closed the device, and
/// lets the next block open a context after [`BlockEvents::launches_over`]. A closure that
/// reads the GPU's state is the events of a block no one paces.
pub trait BlockEvents {
    fn gpu_state(&mut self) -> GpuState;
    /// Called before the block makes anything on the device: an error stops the block,
    /// nothing launched.
    fn start(&mut self) -> Result<(), TimingError> {
        Ok(())
    }
    /// Called once the block's last launch has finished on the GPU.
    fn launches_over(&mut self) {}
    /// Called as the block passes each [`Milestone`] after its start, in their order: where
    /// its time on the device goes, for the log of a process that paces it.
    fn reached(&mut self, _milestone: Milestone) {}
}

/// The points a block passes between its start and the end of its launches
/// ([`BlockEvents::reached`]), in the order it passes them. A rejected block stops after
/// [`Milestone::Validated`]; a block on slots its caller made ([`measure_in`]) has no
/// [`Milestone::SlotsMade`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Milestone {
    /// Its slots allocated and their inputs made.
    SlotsMade,
    /// Its first poisoned validation judged.
    Validated,
    /// Its timed launches ready: graphs captured, the scrub buffer and perturbation
    /// sources made.
    Prepared,
    /// Its warmup done.
    WarmedUp,
    /// Its samples and probes taken.
    Sampled,
    /// Its slots' last launches and its second validation judged.
    Revalidated,
}

impl Milestone {
    /// The milestone in a log line.
    pub fn label(self) -> &'static str {
        match self {
            Milestone::SlotsMade => "slots made",
            Milestone::Validated => "validated",
            Milestone::Prepared => "prepared",
            Milestone::WarmedUp => "warmed up",
            Milestone::Sampled => "sampled",
            Milestone::Revalidated => "revalidated",
        }
    }
}

impl<F: FnMut() -> GpuState> BlockEvents for F {
    fn gpu_state(&mut self) -> GpuState {
        self()
    }
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
    // Saturating: a group of K launches' slots can be past u64 (batch:2147483648), and is
    // then refused like any other group too large, never wrapped to 0.
    let slot = slot_bytes.max(1);
    let target = slot
        .saturating_mul(8)
        .max(l2_bytes.saturating_mul(2).saturating_add(slot));
    let desired = target.div_ceil(slot);
    let affordable = (free_bytes / slot.saturating_mul(4)).max(1);
    if desired > affordable {
        return Err(TimingError::RotationBudget {
            need: desired.saturating_mul(slot),
            budget: affordable.saturating_mul(slot),
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

/// A timed sample whose launches klab verified right after its interval.
#[derive(Debug, Clone, Serialize)]
pub struct VerifiedSample {
    pub sample: u64,
    /// Its time per launch, microseconds.
    pub elapsed_us: f64,
    /// Other inputs than the block's it ran on ([`Workload::with_new_inputs`]).
    pub inputs: Option<NewInputs>,
    /// The invalidated half of a stale-output probe: launched right after a launch on the
    /// same slot with the same arguments.
    pub back_to_back: bool,
    /// Its launches' outputs, judged together.
    pub outcome: CheckOutcome,
}

/// A timed median this many times below the checked median is flagged: the timed launches
/// ran faster than the launches klab verified. Chosen from honest kernels on the H200
/// (docs/timing.md, "Timing a kernel cannot game").
pub const CHECKED_RATIO_FLAG: f64 = 2.0;

/// ...when the two also differ by more than this, microseconds. A checked launch is timed
/// alone, so it carries the launch latency that a batch or a graph replay spreads over its
/// launches: honest graph:10 samples of kernels of a few microseconds were up to 5.5x (and
/// up to 5.0 us) below their checked launches on the H200.
pub const CHECKED_MIN_GAP_US: f64 = 10.0;

/// The stale-output gate: launches that found their previous output in place (median
/// `stale`) ran more than [`STALE_RATIO_LIMIT`] times and [`STALE_MIN_GAIN_US`] faster than
/// the same launches on invalidated outputs (`invalidated`). `slack` widens both thresholds
/// by that fraction, for a reader that sees the medians rounded.
pub fn stale_outputs_faster(stale: f64, invalidated: f64, slack: f64) -> bool {
    stale * STALE_RATIO_LIMIT * (1.0 + slack) < invalidated
        && invalidated - stale > STALE_MIN_GAIN_US * (1.0 + slack)
}

/// The checked-median flag: the timed median more than [`CHECKED_RATIO_FLAG`] times and
/// [`CHECKED_MIN_GAP_US`] below the median of the launches klab verified; `slack` as in
/// [`stale_outputs_faster`].
pub fn timed_far_below_checked(timed: f64, checked: f64, slack: f64) -> bool {
    timed * CHECKED_RATIO_FLAG * (1.0 + slack) < checked
        && checked - timed > CHECKED_MIN_GAP_US * (1.0 + slack)
}

/// The words every checked-median flag holds ([`Measurement::checked_flag`]).
pub const CHECKED_FLAG_WORDS: &str = "below the checked median";

/// A completed measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub samples: Vec<Sample>,
    /// Buffer groups the samples rotate through (the regime's slots).
    pub slots: u64,
    /// Slots one sample launches on: one per launch of its interval under invalidation.
    pub slots_per_sample: u64,
    pub invalidation: Invalidation,
    pub warmup_launches: u64,
    /// Window medians (us) the until-stable policy saw.
    pub warmup_medians_us: Vec<f64>,
    pub scrub_bytes: Option<u64>,
    pub before: CheckOutcome,
    /// The samples drawn at random before timing, verified after their intervals.
    pub verified: Vec<VerifiedSample>,
    /// Each slot's output as its last timed launch left it.
    pub after_timing: Vec<CheckOutcome>,
    /// A fresh poisoned validation after timing.
    pub revalidation: CheckOutcome,
    /// Per-launch times of the launches klab verified: the validation before timing, the
    /// verified samples, the validation after.
    pub checked_us: Vec<f64>,
    /// Per-launch times of the stale-output probes ([`STALE_PROBES`]): each launch found
    /// its previous output in place.
    pub probe_us: Vec<f64>,
    /// Their pairs: the same launch right after, on the same slot, invalidated first.
    pub probe_invalidated_us: Vec<f64>,
    /// The fastest the device allows for the declared work (absent: the backend has no
    /// rates).
    pub floor: Option<Floor>,
    pub state: BlockState,
    pub phases: Phases,
}

impl Measurement {
    /// Every check passed.
    pub fn correct(&self) -> bool {
        self.before.passed()
            && self.verified.iter().all(|v| v.outcome.passed())
            && self.after_timing.iter().all(|c| c.passed())
            && self.revalidation.passed()
    }

    pub fn failures(&self) -> u64 {
        self.before.failures
            + self
                .verified
                .iter()
                .map(|v| v.outcome.failures)
                .sum::<u64>()
            + self.after_timing.iter().map(|c| c.failures).sum::<u64>()
            + self.revalidation.failures
    }

    pub fn summary(&self) -> Option<Summary> {
        let v: Vec<f64> = self.samples.iter().map(|s| s.elapsed_us).collect();
        Summary::of(&v)
    }

    /// The median of the checked launches' times.
    pub fn checked_median_us(&self) -> Option<f64> {
        Summary::of(&self.checked_us).map(|s| s.median)
    }

    /// Why this block fails a gate, in one line: a failed check, or a median below the
    /// physical floor. `None`: it passed.
    pub fn gate_failure(&self) -> Option<String> {
        if !self.correct() {
            return Some(format!(
                "correctness gate failed: {} failure(s) in the outputs klab verified",
                self.failures()
            ));
        }
        let median = self.summary()?.median;
        if let Some(f) = self.floor.as_ref().filter(|f| f.breached_by(median)) {
            return Some(f.breach_line(median));
        }
        let stale = Summary::of(&self.probe_us)?.median;
        let invalidated = Summary::of(&self.probe_invalidated_us)?.median;
        stale_outputs_faster(stale, invalidated, 0.0).then(|| {
            format!(
                "the launches that found their previous output in place ran {:.1}x faster (median {stale:.3} us) than the same launches on invalidated outputs (median {invalidated:.3} us): the kernel's work depends on what its outputs hold",
                invalidated / stale
            )
        })
    }

    /// A flag when the timed median is more than [`CHECKED_RATIO_FLAG`] times below the
    /// checked median.
    pub fn checked_flag(&self) -> Option<String> {
        let timed = self.summary()?.median;
        let checked = self.checked_median_us()?;
        timed_far_below_checked(timed, checked, 0.0).then(|| {
            format!(
                "timed median {timed:.3} us is {:.1}x below the checked median {checked:.3} us (launches klab verified)",
                checked / timed
            )
        })
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
    kernels: &[B::Kernel],
    bufs: &mut [B::Buffer],
    slot: u64,
    poison: u8,
) -> Result<CheckOutcome, BackendError> {
    workload.poison(backend, bufs, poison)?;
    backend.launch_all(&workload.launches::<B>(kernels, bufs))?;
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
    kernels: &[B::Kernel],
    warmup: u64,
) -> Result<ProfiledLaunch, TimingError> {
    prepare_launches(backend, workload, kernels)?;
    let mut bufs = workload.create_slot(backend, 0)?;
    let before = validate_once(backend, workload, kernels, &mut bufs, 0, POISON_BYTES[0])?;
    let mut launches_before = 1;
    if !before.passed() || workload.known_broken() {
        return Ok(ProfiledLaunch {
            before,
            measured: None,
            launches_before,
        });
    }
    for _ in 0..warmup {
        backend.launch_all(&workload.launches::<B>(kernels, &bufs))?;
        launches_before += 1;
    }
    backend.synchronize()?;
    let measured = validate_once(backend, workload, kernels, &mut bufs, 0, POISON_BYTES[1])?;
    Ok(ProfiledLaunch {
        before,
        measured: Some(measured),
        launches_before,
    })
}

/// The buffer sets of one measurement: `groups` sets of `per_sample` slots. Sample `i`
/// launches on group `i mod groups`, one slot per launch of its interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotLayout {
    /// The regime's rotation: 1, or the buffer-rotated count.
    pub groups: u64,
    /// Slots per sample: the launches of one interval under invalidation, else 1.
    pub per_sample: u64,
}

impl SlotLayout {
    pub fn total(self) -> u64 {
        self.groups * self.per_sample
    }

    /// The slots sample `i` launches on, in launch order.
    pub fn slots_of(self, sample: u64) -> std::ops::Range<u64> {
        let g = sample % self.groups;
        g * self.per_sample..(g + 1) * self.per_sample
    }
}

/// The layout for a configuration: the regime's groups (each group the size of one
/// sample's slots), and a slot per launch of an interval under invalidation. Refused, in
/// one line naming the need, where a quarter of free memory cannot hold them.
pub fn layout_for(
    cfg: &TimingConfig,
    slot_bytes: u64,
    l2_bytes: u64,
    free_bytes: u64,
) -> Result<SlotLayout, TimingError> {
    let per_sample = match cfg.invalidation {
        Invalidation::EveryLaunch => u64::from(cfg.timer.launches_per_sample()),
        Invalidation::LabContract => 1,
    };
    let group_bytes = slot_bytes.max(1).saturating_mul(per_sample);
    let groups = slots_for(cfg.regime, group_bytes, l2_bytes, free_bytes)?;
    let need = groups.saturating_mul(group_bytes);
    if per_sample > 1 && need > free_bytes / 4 {
        return Err(TimingError::Config(format!(
            "the {} timer puts {per_sample} launches in one interval, each on a slot of its own with freshly invalidated outputs: {} slot(s) need {need} bytes, over the conservative allocation budget of {} bytes (a quarter of free device memory); use fewer launches per sample",
            cfg.timer.spec(),
            groups.saturating_mul(per_sample),
            free_bytes / 4
        )));
    }
    Ok(SlotLayout { groups, per_sample })
}

/// Run one measurement block of `workload` on `backend`.
pub fn measure<B: Backend, W: Workload>(
    backend: &mut B,
    workload: &W,
    kernels: &[B::Kernel],
    cfg: &TimingConfig,
    label: &str,
    events: &mut dyn BlockEvents,
) -> Result<Outcome, TimingError> {
    // One sample is the transpose lab's batch; statistics need two (the commands say so).
    if cfg.samples < 1 {
        return Err(TimingError::Config("at least 1 sample is needed".into()));
    }
    events.start()?;
    prepare_launches(backend, workload, kernels)?;
    let free = backend.free_memory_bytes()?;
    let layout = layout_for(cfg, workload.slot_bytes(), backend.l2_bytes(), free)?;
    // Under invalidation the validations get a slot of their own, after the timed ones: a
    // kernel that works only on the buffers it was checked on is then timed skipping.
    let slots = layout.total() + u64::from(cfg.invalidation == Invalidation::EveryLaunch);
    // Beside the slots, up to a slot's worth for the checker's copies (expected values and
    // inputs), two for what perturbations copy from (other values, and the block's inputs
    // to put back), and one for each of the two verified samples on new inputs, whose
    // copies live until the block ends.
    let beside = if cfg.invalidation == Invalidation::EveryLaunch {
        5
    } else {
        1
    };
    let needed = (slots + beside).saturating_mul(workload.slot_bytes());
    if needed > free {
        return Err(TimingError::Config(format!(
            "{slots} slot(s) and the checker's copies need {needed} bytes of device memory; {free} bytes are free"
        )));
    }
    let made = std::time::Instant::now();
    let mut bufs = Vec::with_capacity(slots as usize);
    for s in 0..slots {
        bufs.push(workload.create_slot(backend, s)?);
    }
    backend.synchronize()?;
    let inputs_s = made.elapsed().as_secs_f64();
    events.reached(Milestone::SlotsMade);
    let mut outcome = measure_laid_out(
        backend, workload, kernels, cfg, label, &mut bufs, layout, events,
    )?;
    if let Outcome::Measured(m) = &mut outcome {
        m.phases.inputs_s = inputs_s;
    }
    Ok(outcome)
}

/// [`measure`] over slots the caller made with `workload.create_slot` (one group per slot,
/// one slot per sample: the transpose lab's harness, which measures several kernels of one
/// shape on the same buffers so that their placement in memory is the same for all).
pub fn measure_in<B: Backend, W: Workload>(
    backend: &mut B,
    workload: &W,
    kernels: &[B::Kernel],
    cfg: &TimingConfig,
    label: &str,
    bufs: &mut [Vec<B::Buffer>],
    events: &mut dyn BlockEvents,
) -> Result<Outcome, TimingError> {
    let per_sample = match cfg.invalidation {
        Invalidation::EveryLaunch => u64::from(cfg.timer.launches_per_sample()),
        Invalidation::LabContract => 1,
    };
    if bufs.is_empty() || bufs.len() as u64 % per_sample != 0 {
        return Err(TimingError::Config(format!(
            "at least 1 slot, and a whole number of {per_sample}-slot groups, are needed"
        )));
    }
    events.start()?;
    let layout = SlotLayout {
        groups: bufs.len() as u64 / per_sample,
        per_sample,
    };
    measure_laid_out(backend, workload, kernels, cfg, label, bufs, layout, events)
}

/// How many timed samples are verified at random (besides the last launch of every slot).
pub const RANDOM_VERIFIED_SAMPLES: u64 = 4;

/// How many stale-output probe pairs a block takes, at samples drawn in advance: a launch
/// that finds its previous output in place, then the same launch on invalidated outputs,
/// both timed alone and kept apart from the samples. An honest kernel never reads what its
/// outputs hold, so the two take the same time; one that skips work when its previous
/// result is in place runs faster in the first ([`STALE_RATIO_LIMIT`]). Eight, not four: a
/// median of four moved with two slow invalidated halves (single launches of a few
/// microseconds, timed alone), which failed an honest copy on the H200
/// (evidence/2026-12-05-triton-isolation); a median of eight needs four. A kernel that skips
/// does so in every pair.
pub const STALE_PROBES: u64 = 8;

/// The probes' median on invalidated outputs over their median on stale outputs above
/// which a block fails: the kernel's work depends on what its outputs hold. On the H200
/// honest kernels reached 1.26 (a memory-bound kernel whose launches fall into two speeds)
/// and, at a few microseconds, 1.5; the skipping exploits 2.3 and more (docs/timing.md,
/// "Timing a kernel cannot game"). A smaller skip is still timed honestly: the timed
/// launches are invalidated whatever the probes say.
pub const STALE_RATIO_LIMIT: f64 = 2.0;

/// ...and the difference, microseconds, above which it fails. At small sizes the half on
/// invalidated outputs ran up to 2.7 us (1.5x) slower than the stale half for honest
/// kernels on the H200 (docs/timing.md, "Timing a kernel cannot game"); the timed samples
/// are invalidated whatever the probes say, so a smaller skip buys a receipt nothing.
pub const STALE_MIN_GAIN_US: f64 = 5.0;

/// Mixed into the block's seed for the warmup's and the probes' invalidations.
const WARMUP_SEED: u64 = 0x5741_524d_5550;
const PROBE_SEED: u64 = 0x0050_524f_4245;
const PERTURB_SEED: u64 = 0x0050_4552_5455;

/// A seed no kernel can predict: the process's hasher keys, the clock and a counter.
fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.finish()
}

/// `count` distinct sample indices below `samples`, drawn from `seed`, ascending.
pub fn draw_samples(seed: u64, samples: u64, count: u64) -> Vec<u64> {
    let mut chosen = std::collections::BTreeSet::new();
    let want = count.min(samples);
    let mut i = 0;
    while (chosen.len() as u64) < want {
        chosen.insert(klab_core::stats::splitmix_at(seed, i) % samples);
        i += 1;
    }
    chosen.into_iter().collect()
}

/// One poisoned validation, its launch timed in an event pair of its own: the checked
/// time of a launch whose output klab verified.
fn validate_timed<B: Backend, W: Workload>(
    backend: &mut B,
    workload: &W,
    kernels: &[B::Kernel],
    bufs: &mut [B::Buffer],
    poison: u8,
) -> Result<(CheckOutcome, f64), BackendError> {
    workload.poison(backend, bufs, poison)?;
    // Arguments are built before the interval: only the enqueue is timed.
    let sequence = workload.launches::<B>(kernels, bufs);
    backend.event_start()?;
    backend.launch_all(&sequence)?;
    let us = backend.event_stop_ms()? * 1000.0;
    drop(sequence);
    Ok((workload.check(backend, bufs, 0)?, us))
}

/// A block's hold on its workload's first cross-check ([`Workload::hold_cross_check`]):
/// asked when made, dropped with it, so that a block ending in an error leaves nothing held
/// for a later judgement of the same workload.
struct HeldCrossCheck<'a, W: Workload>(&'a W);

impl<'a, W: Workload> HeldCrossCheck<'a, W> {
    fn of(workload: &'a W) -> Self {
        workload.hold_cross_check(true);
        HeldCrossCheck(workload)
    }
}

impl<W: Workload> Drop for HeldCrossCheck<'_, W> {
    fn drop(&mut self) {
        self.0.hold_cross_check(false);
    }
}

#[allow(clippy::too_many_arguments)]
fn measure_laid_out<B: Backend, W: Workload>(
    backend: &mut B,
    workload: &W,
    kernels: &[B::Kernel],
    cfg: &TimingConfig,
    label: &str,
    bufs: &mut [Vec<B::Buffer>],
    layout: SlotLayout,
    events: &mut dyn BlockEvents,
) -> Result<Outcome, TimingError> {
    if cfg.samples < 1 {
        return Err(TimingError::Config("at least 1 sample is needed".into()));
    }
    prepare_launches(backend, workload, kernels)?;

    // The validations' slot: one of its own after the timed ones when the caller made it.
    let vslot = if bufs.len() as u64 > layout.total() {
        layout.total() as usize
    } else {
        0
    };
    // Validation before anything is timed. Its CPU cross-check, where it passes on the
    // device, waits until the launches are over: the oracle's host work (inferred at about
    // 0.07 s a block at 4096 x 4096 on the H200, docs/gates.md) then runs while the next
    // block opens its context.
    let _held = HeldCrossCheck::of(workload);
    let validating = std::time::Instant::now();
    let (before, before_us) = validate_timed(
        backend,
        workload,
        kernels,
        &mut bufs[vslot],
        POISON_BYTES[0],
    )?;
    let mut validations_s = validating.elapsed().as_secs_f64();
    events.reached(Milestone::Validated);
    if !before.passed() || workload.known_broken() {
        workload.settle()?;
        return Ok(Outcome::Rejected {
            before,
            known_broken: workload.known_broken(),
        });
    }
    let floor = backend
        .rates()?
        .map(|r| Floor::of(workload.useful_bytes(), workload.flops(), &r));

    let mut block = Block::prepare(backend, workload, kernels, cfg, layout, vslot, bufs)?;
    events.reached(Milestone::Prepared);
    let timing = std::time::Instant::now();
    let (warmup_launches, warmup_medians_us) = block.warmup(backend, bufs)?;
    events.reached(Milestone::WarmedUp);
    let sampled = block.sample_all(backend, bufs, events)?;
    backend.synchronize()?;
    let timed_s = timing.elapsed().as_secs_f64() - sampled.checking_s;
    events.reached(Milestone::Sampled);

    let validating = std::time::Instant::now();
    let (last_us, after_timing) = block.last_launches(backend, bufs, sampled.held)?;
    // The second poison pattern: a kernel that writes the first one can't pass both.
    let (revalidation, revalidation_us) = validate_timed(
        backend,
        workload,
        kernels,
        &mut bufs[vslot],
        POISON_BYTES[1],
    )?;
    backend.synchronize()?;
    events.reached(Milestone::Revalidated);
    events.launches_over();
    workload.settle()?;
    validations_s += validating.elapsed().as_secs_f64() + sampled.checking_s;
    let scrub_bytes = block.scrub.as_ref().map(|(_, b)| *b);
    let mut checked_us = vec![before_us];
    checked_us.extend(sampled.verified.iter().map(|v| v.elapsed_us));
    checked_us.extend(last_us);
    checked_us.push(revalidation_us);

    Ok(Outcome::Measured(Box::new(Measurement {
        samples: sampled.samples,
        slots: layout.groups,
        slots_per_sample: layout.per_sample,
        invalidation: cfg.invalidation,
        warmup_launches,
        warmup_medians_us,
        scrub_bytes,
        before,
        verified: sampled.verified,
        after_timing,
        revalidation,
        checked_us,
        probe_us: sampled.probe_us,
        probe_invalidated_us: sampled.probe_invalidated_us,
        floor,
        state: BlockState::new(label, sampled.state_before, sampled.state_after),
        phases: Phases {
            validations_s,
            timed_s,
            checker: workload.verification(),
            ..Phases::default()
        },
    })))
}

/// One block's timed work, after its first validation: what its warmup, samples, probes
/// and last launches share.
struct Block<'a, B: Backend, W: Workload> {
    workload: &'a W,
    kernels: &'a [B::Kernel],
    cfg: &'a TimingConfig,
    layout: SlotLayout,
    /// The validations' slot (a probe's decoy).
    vslot: usize,
    per_sample: u32,
    invalidate: bool,
    /// One captured graph per group of slots, under the graph timer.
    graphs: Vec<B::Graph>,
    /// The buffer that flushes L2 between samples, and its size, in the flushed regime.
    scrub: Option<(B::Buffer, u64)>,
    /// Where a timed launch's perturbed input elements come from.
    sources: Vec<PerturbSource<B::Buffer>>,
    /// A seed no kernel can predict, and how many slots were invalidated from it.
    seed: u64,
    launch_seed: u64,
    /// The slots some launch ran on: only they hold an output to judge after the block.
    /// Under invalidation every slot gets a last unit; under the lab's contract a warmup
    /// until stable can end before every group had a turn.
    launched: Vec<bool>,
}

/// What the samples left: the samples, the verified ones, the probes' times, the device's
/// state around them, the time spent checking among them, and the slots that still hold
/// other inputs than the block's.
struct Sampled {
    samples: Vec<Sample>,
    verified: Vec<VerifiedSample>,
    probe_us: Vec<f64>,
    probe_invalidated_us: Vec<f64>,
    state_before: GpuState,
    state_after: GpuState,
    checking_s: f64,
    held: Vec<std::ops::Range<u64>>,
}

impl<'a, B: Backend, W: Workload> Block<'a, B, W> {
    /// The graphs, the scrub buffer and the perturbation sources, made before any timed
    /// launch so that nothing is allocated among them.
    fn prepare(
        backend: &mut B,
        workload: &'a W,
        kernels: &'a [B::Kernel],
        cfg: &'a TimingConfig,
        layout: SlotLayout,
        vslot: usize,
        bufs: &[Vec<B::Buffer>],
    ) -> Result<Self, TimingError> {
        let invalidate = cfg.invalidation == Invalidation::EveryLaunch;
        let graphs = match cfg.timer {
            Timer::GraphReplay { launches } => {
                let mut g = Vec::with_capacity(layout.groups as usize);
                for group in 0..layout.groups {
                    let slots = layout.slots_of(group);
                    // Each of the graph's launches is the whole sequence, on its slot.
                    let sequence: Vec<_> = (0..launches as u64)
                        .flat_map(|j| {
                            let s = slots.start + j % layout.per_sample;
                            workload.launches::<B>(kernels, &bufs[s as usize])
                        })
                        .collect();
                    g.push(backend.capture_graph(&sequence)?);
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
        let sources = if invalidate {
            workload.perturbation_sources(backend)?
        } else {
            Vec::new()
        };
        Ok(Block {
            workload,
            kernels,
            cfg,
            layout,
            vslot,
            per_sample: cfg.timer.launches_per_sample(),
            invalidate,
            graphs,
            scrub,
            sources,
            seed: fresh_seed(),
            launch_seed: 0,
            launched: vec![false; layout.total() as usize],
        })
    }

    /// One sample: invalidate its slots, perturb their inputs, scrub (all outside the
    /// interval), time the unit, put the inputs back. Microseconds per launch.
    fn take(
        &mut self,
        backend: &mut B,
        bufs: &mut [Vec<B::Buffer>],
        i: u64,
        invalidate: bool,
        perturb: bool,
        inputs: &W,
    ) -> Result<f64, TimingError> {
        let layout = self.layout;
        let slots = layout.slots_of(i);
        let mut perturbed = Vec::new();
        if invalidate {
            for s in slots.clone() {
                self.launch_seed += 1;
                let key = crate::inputs::stream_key(self.seed, self.launch_seed);
                inputs.invalidate(backend, &mut bufs[s as usize], key)?;
                if perturb {
                    let key = crate::inputs::stream_key(self.seed ^ PERTURB_SEED, self.launch_seed);
                    perturb_inputs(backend, &mut bufs[s as usize], &self.sources, key, false)?;
                    perturbed.push((s, key));
                }
            }
        }
        if let Some((buf, _)) = self.scrub.as_mut() {
            backend.fill_bytes(buf, (i % 251) as u8)?;
        }
        // The sample's launches, built before the interval: only the enqueue is timed.
        let sequence: Vec<_> = match self.cfg.timer {
            Timer::GraphReplay { .. } => Vec::new(),
            _ => (0..u64::from(self.per_sample))
                .flat_map(|j| {
                    let s = slots.start + j % layout.per_sample;
                    self.workload.launches::<B>(self.kernels, &bufs[s as usize])
                })
                .collect(),
        };
        backend.event_start()?;
        match self.cfg.timer {
            Timer::GraphReplay { .. } => {
                backend.replay(&self.graphs[(i % layout.groups) as usize])?
            }
            _ => backend.launch_all(&sequence)?,
        }
        let ms = backend.event_stop_ms()?;
        drop(sequence);
        for (s, key) in perturbed {
            perturb_inputs(backend, &mut bufs[s as usize], &self.sources, key, true)?;
        }
        for s in slots {
            self.launched[s as usize] = true;
        }
        Ok(ms * 1000.0 / f64::from(self.per_sample))
    }

    /// A stale-output probe pair on one slot, outside the samples. Each half launches the
    /// kernel (leaving its output), restores the in-out buffers, runs one invalidation and
    /// times the same launch again: in the first half the invalidation writes a decoy
    /// slot, so the launch finds its previous output in place; in the second it writes this
    /// slot, and that launch is verified. The halves differ only in what the outputs hold
    /// (the same kernels ran before each, the same bytes were written), so an honest kernel
    /// takes the same time in both, and any work that depends on the previous result, or on
    /// being launched again on the same pointers, shows.
    fn probe(
        &mut self,
        backend: &mut B,
        bufs: &mut [Vec<B::Buffer>],
        slot: usize,
        key: u64,
    ) -> Result<(f64, f64, CheckOutcome), TimingError> {
        let (workload, kernels) = (self.workload, self.kernels);
        let decoy = (self.vslot != slot).then_some(self.vslot);
        let mut timed = [0.0; 2];
        for (half, t) in timed.iter_mut().enumerate() {
            backend.launch_all(&workload.launches::<B>(kernels, &bufs[slot]))?;
            workload.restore_inouts(backend, &mut bufs[slot])?;
            let target = if half == 0 { decoy } else { Some(slot) };
            if let Some(target) = target {
                let key = crate::inputs::stream_key(key, half as u64);
                workload.invalidate(backend, &mut bufs[target], key)?;
            }
            if let Some((buf, _)) = self.scrub.as_mut() {
                backend.fill_bytes(buf, 0x5a)?;
            }
            let sequence = workload.launches::<B>(kernels, &bufs[slot]);
            backend.event_start()?;
            backend.launch_all(&sequence)?;
            *t = backend.event_stop_ms()? * 1000.0;
        }
        let outcome = workload.check(backend, &bufs[slot], slot as u64)?;
        Ok((timed[0], timed[1], outcome))
    }

    /// The warmup the policy asks for: its launches, and under "until stable" each
    /// window's median.
    fn warmup(
        &mut self,
        backend: &mut B,
        bufs: &mut [Vec<B::Buffer>],
    ) -> Result<(u64, Vec<f64>), TimingError> {
        let (workload, kernels, layout) = (self.workload, self.kernels, self.layout);
        let mut warmup_launches = 0u64;
        let mut medians_us = Vec::new();
        match self.cfg.warmup {
            WarmupPolicy::Count { launches } => {
                let count = launches.max(2 * layout.total());
                for i in 0..count {
                    let slot = (i % layout.total()) as usize;
                    // Invalidated like a timed launch: the warmup is then the same work, and
                    // a slot no sample uses holds one launch's output (an inout kept
                    // accumulating).
                    if self.invalidate {
                        let key = crate::inputs::stream_key(self.seed ^ WARMUP_SEED, i);
                        workload.invalidate(backend, &mut bufs[slot], key)?;
                    }
                    backend.launch_all(&workload.launches::<B>(kernels, &bufs[slot]))?;
                    self.launched[slot] = true;
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
                        // Warmups are never samples: their inputs need no perturbing.
                        w.push(self.take(backend, bufs, i, self.invalidate, false, workload)?);
                        i += 1;
                    }
                    warmup_launches += u64::from(window) * u64::from(self.per_sample);
                    w.sort_by(f64::total_cmp);
                    let m = stats::quantile_sorted(&w, 0.5).unwrap_or(f64::NAN);
                    let stable = medians_us
                        .last()
                        .map(|prev: &f64| ((m - prev) / prev).abs() * 100.0 < tolerance_pct)
                        .unwrap_or(false);
                    medians_us.push(m);
                    if stable || warmup_launches >= max_launches {
                        break;
                    }
                }
            }
        }
        Ok((warmup_launches, medians_us))
    }

    /// Every sample, with the stale-output probes among them and the drawn samples
    /// verified (the first on inputs no launch has seen, the second on the block's inputs
    /// with a few elements drawn again).
    fn sample_all(
        &mut self,
        backend: &mut B,
        bufs: &mut [Vec<B::Buffer>],
        events: &mut dyn BlockEvents,
    ) -> Result<Sampled, TimingError> {
        let (workload, layout, seed) = (self.workload, self.layout, self.seed);
        // The samples verified at random are drawn now, before the first timed launch, from
        // a seed the kernel cannot see; the lab's contract verifies only its one slot at the
        // end.
        let (drawn, probes) = if self.invalidate {
            let n = u64::from(self.cfg.samples);
            let drawn = draw_samples(seed, n, RANDOM_VERIFIED_SAMPLES);
            let probes = draw_samples(seed.rotate_left(17) ^ 0x0053_5441_4c45, n, STALE_PROBES);
            (drawn, probes)
        } else {
            (Vec::new(), Vec::new())
        };
        let mut out = Sampled {
            samples: Vec::with_capacity(self.cfg.samples as usize),
            verified: Vec::new(),
            probe_us: Vec::new(),
            probe_invalidated_us: Vec::new(),
            state_before: events.gpu_state(),
            state_after: GpuState::default(),
            checking_s: 0.0,
            // The slots that hold other inputs since a sample on them: the block's inputs
            // go back in before their next launch.
            held: Vec::new(),
        };
        for i in 0..u64::from(self.cfg.samples) {
            let now = layout.slots_of(i);
            let mut kept = Vec::with_capacity(out.held.len());
            for slots in out.held.drain(..) {
                if slots.start < now.end && now.start < slots.end {
                    for s in slots {
                        workload.put_inputs(backend, &mut bufs[s as usize])?;
                    }
                } else {
                    kept.push(slots);
                }
            }
            out.held = kept;
            if probes.binary_search(&i).is_ok() {
                let t = std::time::Instant::now();
                let slot = layout.slots_of(i).start;
                let key = crate::inputs::stream_key(seed ^ PROBE_SEED, i);
                let (stale, invalidated, outcome) =
                    self.probe(backend, bufs, slot as usize, key)?;
                out.probe_us.push(stale);
                out.probe_invalidated_us.push(invalidated);
                out.verified.push(VerifiedSample {
                    sample: i,
                    elapsed_us: invalidated,
                    inputs: None,
                    back_to_back: true,
                    outcome,
                });
                out.checking_s += t.elapsed().as_secs_f64();
            }
            let new_inputs = match drawn.iter().position(|d| *d == i) {
                Some(0) => Some(NewInputs::Fresh),
                Some(1) => Some(NewInputs::Perturbed),
                _ => None,
            };
            let fresh = new_inputs
                .and_then(|kind| workload.with_new_inputs(seed ^ i ^ 0x0046_5245_5348, kind));
            if let Some(fw) = &fresh {
                for s in layout.slots_of(i) {
                    fw.put_inputs(backend, &mut bufs[s as usize])?;
                }
            }
            let inputs = fresh.as_ref().unwrap_or(workload);
            // Every timed launch runs on inputs of its own, but for the drawn samples
            // (verified on new inputs, or on the block's).
            let perturb =
                self.invalidate && new_inputs.is_none() && drawn.binary_search(&i).is_err();
            let us = self.take(backend, bufs, i, self.invalidate, perturb, inputs)?;
            if !(us.is_finite() && us > 0.0) {
                return Err(TimingError::InvalidSample {
                    index: i,
                    value: us,
                });
            }
            out.samples.push(Sample {
                sample: i,
                slot: i % layout.groups,
                elapsed_us: us,
            });
            if drawn.binary_search(&i).is_ok() {
                let t = std::time::Instant::now();
                let mut outcomes = Vec::new();
                for s in layout.slots_of(i) {
                    outcomes.push(inputs.check(backend, &bufs[s as usize], s)?);
                }
                out.verified.push(VerifiedSample {
                    sample: i,
                    elapsed_us: us,
                    inputs: new_inputs.filter(|_| fresh.is_some()),
                    back_to_back: false,
                    outcome: merge_outcomes(outcomes),
                });
                out.checking_s += t.elapsed().as_secs_f64();
            }
            if fresh.is_some() {
                out.held.push(layout.slots_of(i));
            }
        }
        out.state_after = events.gpu_state();
        Ok(out)
    }

    /// After the samples, the block's inputs back where others were held. Under
    /// invalidation the samples' inputs were perturbed, so every slot gets a last launch on
    /// the block's inputs: one more unit per group, timed like a sample (a checked time, not
    /// a sample). Then every slot some launch ran on is judged; the lab's contract judges its
    /// slot as the batch left it. The last units' times and the judgements.
    fn last_launches(
        &mut self,
        backend: &mut B,
        bufs: &mut [Vec<B::Buffer>],
        held: Vec<std::ops::Range<u64>>,
    ) -> Result<(Vec<f64>, Vec<CheckOutcome>), TimingError> {
        let workload = self.workload;
        // (Only drawn samples, which the lab's contract has none of, leave new inputs held.)
        for slots in held {
            for s in slots {
                workload.put_inputs(backend, &mut bufs[s as usize])?;
            }
        }
        let mut last_us = Vec::new();
        if self.invalidate {
            for g in 0..self.layout.groups {
                last_us.push(self.take(backend, bufs, g, true, false, workload)?);
            }
        }
        let mut after_timing = Vec::with_capacity(bufs.len());
        for (s, b) in bufs[..self.layout.total() as usize].iter().enumerate() {
            if self.launched[s] {
                after_timing.push(workload.check(backend, b, s as u64)?);
            }
        }
        Ok((last_us, after_timing))
    }
}

/// Several slots' checks as one: failures summed, the largest errors, the first failure.
fn merge_outcomes(outcomes: Vec<CheckOutcome>) -> CheckOutcome {
    let mut all = CheckOutcome {
        failures: 0,
        max_abs: 0.0,
        max_rel: 0.0,
        first_failure: None,
    };
    for (s, o) in outcomes.into_iter().enumerate() {
        all.failures += o.failures;
        all.max_abs = all.max_abs.max(o.max_abs);
        all.max_rel = all.max_rel.max(o.max_rel);
        if all.first_failure.is_none() {
            all.first_failure = o
                .first_failure
                .map(|f| format!("launch {s} of the interval: {f}"));
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::host::{Call, HostArg, HostBackend};
    use crate::declared::{DeclaredWorkload, InputCase};
    use klab_spec::Variant;

    fn builtin(name: &str, n: u64) -> DeclaredWorkload {
        let (_, decl) =
            klab_spec::registry::resolve(name, klab_spec::registry::Scope::Audit).unwrap();
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
            invalidation: Invalidation::EveryLaunch,
        }
    }

    fn run(
        b: &mut HostBackend,
        w: &DeclaredWorkload,
        c: &TimingConfig,
    ) -> Result<Outcome, TimingError> {
        let k = [b.kernel(w.entry()).unwrap()];
        measure(b, w, &k, c, "block", &mut GpuState::default)
    }

    fn measured(o: Outcome) -> Measurement {
        match o {
            Outcome::Measured(m) => *m,
            other => panic!("expected a measurement, got {other:?}"),
        }
    }

    /// What a block told its process, in order; it stops the block at its start when `stop`.
    #[derive(Default)]
    struct Told {
        calls: Vec<&'static str>,
        stop: bool,
    }

    impl BlockEvents for Told {
        fn gpu_state(&mut self) -> GpuState {
            self.calls.push("state");
            GpuState::default()
        }
        fn start(&mut self) -> Result<(), TimingError> {
            self.calls.push("start");
            if self.stop {
                return Err(TimingError::Stopped("withdrawn".into()));
            }
            Ok(())
        }
        fn launches_over(&mut self) {
            self.calls.push("over");
        }
        fn reached(&mut self, milestone: Milestone) {
            self.calls.push(milestone.label());
        }
    }

    /// A paced block is held before it makes anything on the device, passes its milestones
    /// in order and says when its last launch (the second validation) is over; stopped at
    /// its start, it launched nothing.
    #[test]
    fn a_block_says_when_it_starts_and_when_its_launches_are_over() {
        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_kernel);
        let w = builtin("triad_f32", 257);
        let k = [b.kernel(w.entry()).unwrap()];
        let c = cfg(Regime::SameBuffer, Timer::PerLaunch);
        let mut told = Told::default();
        let m = measured(measure(&mut b, &w, &k, &c, "block", &mut told).unwrap());
        assert_eq!(
            told.calls,
            [
                "start",
                "slots made",
                "validated",
                "prepared",
                "warmed up",
                "state",
                "state",
                "sampled",
                "revalidated",
                "over"
            ]
        );
        assert!(m.revalidation.passed());
        let launched = b.launch_count();

        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_kernel);
        let k = [b.kernel(w.entry()).unwrap()];
        let mut told = Told {
            stop: true,
            ..Told::default()
        };
        let e = measure(&mut b, &w, &k, &c, "block", &mut told).unwrap_err();
        assert!(matches!(e, TimingError::Stopped(_)), "{e}");
        assert_eq!(told.calls, ["start"]);
        assert!(launched > 1);
        assert_eq!(b.launch_count(), 0, "nothing launched");
    }

    #[test]
    fn the_profiled_launch_is_the_one_after_the_computed_skip() {
        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_kernel);
        let w = builtin("triad_f32", 257);
        let k = [b.kernel(w.entry()).unwrap()];
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
        let k = [b.kernel(w.entry()).unwrap()];
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
    fn a_group_past_u64_is_refused_not_wrapped() {
        // 2^31-byte slots (a 16384 transpose) under batch:2147483648: the group is 2^62
        // bytes; 4 x 2^62 once wrapped to 0 and divided by it.
        let c = cfg(Regime::BufferRotated, Timer::Batch { launches: 1 << 31 });
        for regime in [Regime::BufferRotated, Regime::SameBuffer] {
            let c = TimingConfig {
                regime,
                ..c.clone()
            };
            let e = layout_for(&c, 1 << 31, 62_914_560, 140 << 30).unwrap_err();
            assert!(e.to_string().contains("bytes"), "{e}");
        }
        // No overflow at the very edge either: one slot, which the memory check then judges.
        assert_eq!(
            slots_for(Regime::BufferRotated, u64::MAX, u64::MAX, u64::MAX).unwrap(),
            1
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
        assert!(m.correct(), "{:?}", m.gate_failure());
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
        // 10 samples and the one group's last unit, each one replay of 5 launches; each
        // stale-output probe pair is four plain launches (each half's launch that leaves
        // its output, and its timed one).
        assert_eq!(
            b.calls.iter().filter(|c| matches!(c, Call::Replay)).count(),
            11
        );
        assert_eq!(m.probe_us.len() as u64, STALE_PROBES);
        // validation + 20 warmup + the replays of 5 + the probes' four + revalidation
        assert_eq!(
            b.launch_count() - before,
            1 + 20 + 5 * 11 + 4 * STALE_PROBES + 1
        );
    }

    #[test]
    fn the_flushed_regime_scrubs_before_each_sample_outside_the_interval() {
        let mut b = HostBackend::new()
            .with_general_kernel("triad_f32", triad_kernel)
            .with_l2_bytes(1 << 21);
        let w = builtin("triad_f32", 256);
        let m = measured(run(&mut b, &w, &cfg(Regime::L2Flushed, Timer::PerLaunch)).unwrap());
        assert_eq!(m.scrub_bytes, Some(1 << 22));
        // Every sample's EventStart is immediately preceded by a fill of the scrub buffer,
        // and that by the invalidation of the output (so the scrub evicts it too); a stale-
        // output probe's first half invalidates the validations' slot instead (a decoy, so
        // its launch finds its previous output in place); the two validations' event pairs
        // follow their poison fill.
        // x, z, y of the timed slot, x, z, y of the validations' slot, the scrub buffer
        let (y, decoy_y, scrub) = (2, 5, 6);
        let (mut scrubbed, mut invalidated, mut decoyed) = (0, 0, 0);
        for (i, w) in b.calls.windows(2).enumerate() {
            if w[1] == Call::EventStart
                && matches!(w[0], Call::Fill { buffer, .. } if buffer == scrub)
            {
                scrubbed += 1;
                // Past the perturbation of the inputs, if the sample has one.
                let before = b.calls[..i]
                    .iter()
                    .rev()
                    .find(|c| !matches!(c, Call::CopyElements(_)));
                invalidated += usize::from(before == Some(&Call::Scramble(y)));
                decoyed += usize::from(before == Some(&Call::Scramble(decoy_y)));
            }
        }
        // Each probe pair is scrubbed twice, after each half's invalidation; the slot's last
        // launch after the samples once.
        assert_eq!(scrubbed, 10 + 2 * STALE_PROBES as usize + 1);
        assert_eq!(invalidated, 10 + STALE_PROBES as usize + 1);
        assert_eq!(decoyed, STALE_PROBES as usize);
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
        let pairs = b.calls.iter().filter(|c| **c == Call::EventStart).count();
        assert_eq!(pairs, 1, "nothing timed but the validation's own launch");

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
        let pairs = b.calls.iter().filter(|c| **c == Call::EventStart).count();
        assert_eq!(pairs, 1, "nothing timed but the validation's own launch");
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

    /// Defect: with a warmup until stable that ends after one window, a block of fewer
    /// samples than rotated groups judged slots no launch had touched, and failed an honest
    /// kernel on the poison they still held. Every slot now gets a last launch, judged.
    #[test]
    fn every_slot_gets_a_last_launch_even_when_the_samples_are_fewer_than_the_groups() {
        let mut b = HostBackend::new().with_general_kernel("triad_f32", triad_kernel);
        let w = builtin("triad_f32", 256);
        let mut c = cfg(Regime::BufferRotated, Timer::PerLaunch);
        c.samples = 3;
        c.warmup = WarmupPolicy::UntilStable {
            window: 2,
            tolerance_pct: 1.0,
            max_launches: 1,
        };
        let m = measured(run(&mut b, &w, &c).unwrap());
        assert!(m.slots >= 8, "{}", m.slots);
        assert!(m.correct(), "{:?}", m.after_timing);
        assert_eq!(m.after_timing.len() as u64, m.slots);
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
        let k = [b.kernel("transpose_padded").unwrap()];
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
        // Caller-made slots: none is a configuration error; one slot cannot hold a batch of
        // 4 invalidated launches; under the lab's contract it is a measurement on it.
        let k = [b.kernel("triad_f32").unwrap()];
        let none = measure_in(&mut b, &w, &k, &c, "b", &mut [], &mut GpuState::default);
        assert!(matches!(none, Err(TimingError::Config(_))));
        let mut slot = [w.create_slot(&mut b, 0).unwrap()];
        let one = measure_in(&mut b, &w, &k, &c, "b", &mut slot, &mut GpuState::default);
        assert!(matches!(one, Err(TimingError::Config(_))));
        c.invalidation = Invalidation::LabContract;
        let allocs = b.calls.len();
        let o = measure_in(&mut b, &w, &k, &c, "b", &mut slot, &mut GpuState::default).unwrap();
        assert!(measured(o).correct());
        assert!(!b.calls[allocs..]
            .iter()
            .any(|c| matches!(c, Call::Alloc(_))));
    }
}

/// Exploits of a harness that leaves the last launch's output in place, emulated on the
/// host backend: each passes the validations and (before invalidation existed) every check
/// after timing; each must now fail the block under every timer and regime.
#[cfg(test)]
mod exploit_tests {
    use super::*;
    use crate::backend::host::{HostArg, HostBackend};
    use crate::declared::{DeclaredWorkload, InputCase};
    use klab_core::floor::DeviceRates;

    fn triad_args(args: &[HostArg]) -> (usize, usize, usize, usize, f32) {
        let [HostArg::Buffer(x), HostArg::Buffer(z), HostArg::Buffer(y), HostArg::U64(n), HostArg::F32(a)] =
            args
        else {
            panic!("triad args");
        };
        (*x, *z, *y, *n as usize, *a)
    }
    fn want(mem: &[Vec<u32>], x: usize, z: usize, a: f32, i: usize) -> u32 {
        a.mul_add(f32::from_bits(mem[x][i]), f32::from_bits(mem[z][i]))
            .to_bits()
    }
    fn work(mem: &mut [Vec<u32>], args: &[HostArg]) {
        let (x, z, y, n, a) = triad_args(args);
        for i in 0..n {
            mem[y][i] = want(mem, x, z, a, i);
        }
    }
    fn poisoned(w: u32) -> bool {
        w == 0xffff_ffff || w == 0x7f7f_7f7f
    }
    fn honest(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        work(mem, args)
    }
    /// A launch that skipped: it costs a tenth of the work on the host backend's clock.
    fn skipped() {
        crate::backend::host::report_work(0.1)
    }
    /// Skips when its first output already holds the answer.
    fn skip_if_done(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (x, z, y, _, a) = triad_args(args);
        if mem[y][0] != want(mem, x, z, a, 0) {
            work(mem, args)
        } else {
            skipped()
        }
    }
    /// Works only when its output looks like a poison word.
    fn skip_unless_poison(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (_, _, y, _, _) = triad_args(args);
        if poisoned(mem[y][0]) {
            work(mem, args)
        } else {
            skipped()
        }
    }
    /// Works on the first launches and every 8th (a launch counter in device memory).
    fn counts_launches(mem: &mut [Vec<u32>], args: &[HostArg], launch: u64) {
        if launch < 2 || launch % 8 == 0 {
            work(mem, args)
        } else {
            skipped()
        }
    }
    /// Computes every element only on a poisoned output, else every 4th.
    fn samples_elements(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (x, z, y, n, a) = triad_args(args);
        let step = if poisoned(mem[y][0]) { 1 } else { 4 };
        for i in (0..n).step_by(step) {
            mem[y][i] = want(mem, x, z, a, i);
        }
        if step > 1 {
            crate::backend::host::report_work(0.25)
        }
    }
    /// Skips when its output already holds a finite value that is not a poison word (it
    /// "looks like a result"), whatever the value.
    fn skip_plausible(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (_, _, y, _, _) = triad_args(args);
        if poisoned(mem[y][0]) || !f32::from_bits(mem[y][0]).is_finite() {
            work(mem, args)
        } else {
            skipped()
        }
    }

    thread_local! {
        /// The output buffer of the previous launch, and the first one ever seen.
        static SEEN: std::cell::Cell<(Option<usize>, Option<usize>)> =
            const { std::cell::Cell::new((None, None)) };
    }
    /// Skips when launched on its previous launch's buffers (a memo keyed on the pointers),
    /// unless the output is poisoned.
    fn same_pointers(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (_, _, y, _, _) = triad_args(args);
        let (last, first) = SEEN.with(|s| s.get());
        SEEN.with(|s| s.set((Some(y), first.or(Some(y)))));
        if last == Some(y) && !poisoned(mem[y][0]) {
            skipped()
        } else {
            work(mem, args)
        }
    }
    /// Works only on the first output buffer it ever saw (the one it was checked on).
    fn first_slot(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (_, _, y, _, _) = triad_args(args);
        let (_, first) = SEEN.with(|s| s.get());
        let first = first.unwrap_or(y);
        SEEN.with(|s| s.set((Some(y), Some(first))));
        if first == y {
            work(mem, args)
        } else {
            skipped()
        }
    }

    thread_local! {
        /// A memo: the first input element, and the output computed with it.
        static MEMO: std::cell::RefCell<Option<(Vec<u32>, Vec<u32>)>> =
            const { std::cell::RefCell::new(None) };
    }
    /// Memoizes by the content of its first input elements: a hit copies the memo (a tenth
    /// of the work, never reading the rest of the inputs).
    fn content_memo(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (x, _, y, n, _) = triad_args(args);
        let key = vec![mem[x][0]];
        let hit = MEMO.with(|m| match &*m.borrow() {
            Some((k, out)) if *k == key => Some(out.clone()),
            _ => None,
        });
        match hit {
            Some(out) => {
                mem[y][..n].copy_from_slice(&out);
                skipped()
            }
            None => {
                work(mem, args);
                MEMO.with(|m| *m.borrow_mut() = Some((key, mem[y][..n].to_vec())));
            }
        }
    }

    thread_local! {
        /// The output each output buffer got from its last honest launch.
        static STASH: std::cell::RefCell<std::collections::HashMap<usize, Vec<u32>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    /// A NaN payload the kernel writes into its own input as a marker.
    const MARK: u32 = 0x7fc0_dead;
    /// Computes once per buffer set, stashes the output and marks its input's last element;
    /// while the mark is there it copies the stash (right for unchanged inputs, since the
    /// stash was computed before the mark was written).
    fn marks_input(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (x, _, y, n, _) = triad_args(args);
        let stashed = STASH.with(|s| s.borrow().get(&y).cloned());
        match stashed {
            Some(out) if mem[x][n - 1] == MARK => {
                mem[y][..n].copy_from_slice(&out);
                skipped()
            }
            _ => {
                work(mem, args);
                STASH.with(|s| s.borrow_mut().insert(y, mem[y][..n].to_vec()));
                mem[x][n - 1] = MARK;
            }
        }
    }

    #[test]
    fn a_kernel_that_marks_its_input_and_replays_a_stash_fails() {
        for cfg in configs(Invalidation::EveryLaunch) {
            STASH.with(|s| s.borrow_mut().clear());
            // Rejected at the first validation: the mark is a change to an `in` buffer.
            match outcome(marks_input, &cfg) {
                Outcome::Rejected { before, .. } => {
                    let first = before.first_failure.unwrap_or_default();
                    assert!(first.starts_with("input x"), "{first}");
                }
                Outcome::Measured(m) => panic!(
                    "{} {}: accepted at {:?} us",
                    cfg.timer,
                    cfg.regime,
                    m.summary().map(|s| s.median)
                ),
            }
        }
    }

    /// Marks its input only from its second launch on a buffer set, and removes the mark
    /// while it replays: every other launch is skipped, and a validation that ran alone
    /// (the first launch on its slot) sees no mark. A verification after a marking launch
    /// does, and the after-block verification of every slot gives half a chance each.
    fn marks_input_later(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (x, _, y, n, _) = triad_args(args);
        let stashed = STASH.with(|s| s.borrow().get(&y).cloned());
        match stashed {
            Some(out) if mem[x][n - 1] == MARK => {
                mem[y][..n].copy_from_slice(&out);
                let want = STASH.with(|s| s.borrow().get(&usize::MAX).cloned());
                mem[x][n - 1] = want.map_or(0, |w| w[0]);
                skipped()
            }
            Some(_) => {
                let held = mem[x][n - 1];
                work(mem, args);
                STASH.with(|s| s.borrow_mut().insert(usize::MAX, vec![held]));
                mem[x][n - 1] = MARK;
            }
            None => {
                work(mem, args);
                STASH.with(|s| s.borrow_mut().insert(y, mem[y][..n].to_vec()));
            }
        }
    }

    #[test]
    fn a_kernel_that_marks_its_input_between_checks_fails() {
        for cfg in configs(Invalidation::EveryLaunch) {
            STASH.with(|s| s.borrow_mut().clear());
            let failed = match outcome(marks_input_later, &cfg) {
                Outcome::Rejected { .. } => true,
                Outcome::Measured(m) => m.gate_failure().is_some(),
            };
            assert!(failed, "{} {}: accepted", cfg.timer, cfg.regime);
        }
    }

    const EXPLOITS: [(&str, crate::backend::host::GeneralKernelFn); 8] = [
        ("skip_if_done", skip_if_done),
        ("skip_unless_poison", skip_unless_poison),
        ("counts_launches", counts_launches),
        ("samples_elements", samples_elements),
        ("skip_plausible", skip_plausible),
        ("same_pointers", same_pointers),
        ("first_slot", first_slot),
        ("content_memo", content_memo),
    ];

    /// Large enough that the 64 elements a perturbed sample draws again almost never hit a
    /// memo's key (x[0]): a hit lets the memo recompute and pass, with a chance of
    /// 64 / 2^18 = 0.02% per block.
    const N: u64 = 1 << 18;

    fn workload(n: u64) -> DeclaredWorkload {
        let (_, decl) =
            klab_spec::registry::resolve("triad_f32", klab_spec::registry::Scope::Audit).unwrap();
        DeclaredWorkload::builtin(decl, n, InputCase::Uniform { seed: 7 }, 0).unwrap()
    }

    fn outcome(f: crate::backend::host::GeneralKernelFn, cfg: &TimingConfig) -> Outcome {
        SEEN.with(|s| s.set((None, None)));
        MEMO.with(|m| *m.borrow_mut() = None);
        let mut b = HostBackend::new()
            .with_general_kernel("triad_f32", f)
            .with_l2_bytes(4096);
        let w = workload(N);
        let k = [b.kernel("triad_f32").unwrap()];
        measure(&mut b, &w, &k, cfg, "block", &mut GpuState::default).unwrap()
    }

    fn block(f: crate::backend::host::GeneralKernelFn, cfg: &TimingConfig) -> Measurement {
        match outcome(f, cfg) {
            Outcome::Measured(m) => *m,
            other => panic!("{other:?}"),
        }
    }

    fn configs(invalidation: Invalidation) -> Vec<TimingConfig> {
        let mut v = Vec::new();
        for regime in Regime::ALL {
            for timer in [
                Timer::PerLaunch,
                Timer::Batch { launches: 4 },
                Timer::GraphReplay { launches: 3 },
            ] {
                v.push(TimingConfig {
                    timer,
                    regime,
                    samples: 20,
                    warmup: WarmupPolicy::Count { launches: 5 },
                    invalidation,
                });
            }
        }
        v
    }

    #[test]
    fn every_exploit_fails_under_every_timer_and_regime_and_the_honest_kernel_passes() {
        for cfg in configs(Invalidation::EveryLaunch) {
            let at = format!("{} {}", cfg.timer, cfg.regime);
            let m = block(honest, &cfg);
            assert!(
                m.gate_failure().is_none(),
                "honest at {at}: {:?}",
                m.gate_failure()
            );
            assert_eq!(
                m.slots_per_sample,
                u64::from(cfg.timer.launches_per_sample())
            );
            for (name, f) in EXPLOITS {
                let m = block(f, &cfg);
                assert!(m.gate_failure().is_some(), "{name} at {at} was accepted");
            }
        }
    }

    thread_local! {
        static HASH_MEMO: std::cell::RefCell<Option<(u64, Vec<u32>)>> =
            const { std::cell::RefCell::new(None) };
    }
    /// Memoizes by a hash of every tenth element of both inputs: the 64 elements a
    /// perturbed sample draws again almost always touch one (a tenth of the reads, then a
    /// copy of the memo).
    fn hashed_memo(mem: &mut [Vec<u32>], args: &[HostArg], _: u64) {
        let (x, z, y, n, _) = triad_args(args);
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for i in (0..n).step_by(10) {
            h = (h ^ u64::from(mem[x][i]) ^ (u64::from(mem[z][i]) << 32))
                .wrapping_mul(0x0100_0000_01b3);
        }
        let hit = HASH_MEMO.with(|m| match &*m.borrow() {
            Some((k, out)) if *k == h => Some(out.clone()),
            _ => None,
        });
        match hit {
            Some(out) => {
                mem[y][..n].copy_from_slice(&out);
                crate::backend::host::report_work(0.2)
            }
            None => {
                work(mem, args);
                HASH_MEMO.with(|m| *m.borrow_mut() = Some((h, mem[y][..n].to_vec())));
            }
        }
    }

    /// Defect: every slot held the block's inputs, so a memo keyed on a hash of a large
    /// share of them recomputed only for the verified sample on perturbed inputs and
    /// replayed everywhere else (timed at a fifth of the honest time, and accepted). Every
    /// timed launch that is not verified now runs on inputs perturbed in 64 elements at
    /// positions of its own: the memo sees the change and does the work.
    #[test]
    fn a_memo_keyed_on_a_hash_of_its_inputs_is_timed_doing_the_work() {
        for cfg in configs(Invalidation::EveryLaunch) {
            let honest = block(honest, &cfg).summary().unwrap().median;
            HASH_MEMO.with(|m| *m.borrow_mut() = None);
            let m = block(hashed_memo, &cfg);
            let median = m.summary().unwrap().median;
            assert!(
                median > 0.9 * honest,
                "{} {}: memo {median} us, honest {honest} us",
                cfg.timer,
                cfg.regime
            );
            assert!(m.correct(), "{:?}", m.gate_failure());
        }
    }

    #[test]
    fn without_invalidation_the_exploits_pass_which_is_the_gap_it_closes() {
        // The lab's contract (one buffer pair, back-to-back launches) on a single slot: the
        // output-reading exploits find the previous result and are accepted, as every
        // timed block was before invalidation. Rotation is left out: the lab never rotates.
        for cfg in configs(Invalidation::LabContract)
            .into_iter()
            .filter(|c| c.regime != Regime::BufferRotated)
        {
            for (name, f) in [
                (
                    "skip_if_done",
                    skip_if_done as crate::backend::host::GeneralKernelFn,
                ),
                ("skip_unless_poison", skip_unless_poison),
                ("same_pointers", same_pointers),
                ("first_slot", first_slot),
            ] {
                let m = block(f, &cfg);
                assert!(
                    m.gate_failure().is_none(),
                    "{name} at {} {}",
                    cfg.timer,
                    cfg.regime
                );
            }
        }
    }

    #[test]
    fn each_launch_of_an_interval_has_its_own_slot_and_every_slot_is_checked() {
        let cfg = TimingConfig {
            timer: Timer::Batch { launches: 4 },
            regime: Regime::SameBuffer,
            // At least one sample per probe pair: every pair is taken.
            samples: STALE_PROBES as u32,
            warmup: WarmupPolicy::Count { launches: 1 },
            invalidation: Invalidation::EveryLaunch,
        };
        let m = block(honest, &cfg);
        assert_eq!((m.slots, m.slots_per_sample), (1, 4));
        assert_eq!(m.after_timing.len(), 4);
        // The drawn samples and the probes' verified halves.
        let verified = RANDOM_VERIFIED_SAMPLES + STALE_PROBES;
        assert_eq!(m.verified.len() as u64, verified);
        assert_eq!(
            m.verified.iter().filter(|v| v.back_to_back).count() as u64,
            STALE_PROBES
        );
        // The checked times: the two validations, the verified launches and the slots'
        // last unit.
        assert_eq!(m.checked_us.len() as u64, 2 + verified + 1);
        let layout = SlotLayout {
            groups: 3,
            per_sample: 4,
        };
        assert_eq!(layout.slots_of(4), 4..8);
        assert_eq!(layout.total(), 12);
    }

    #[test]
    fn a_batch_that_memory_cannot_hold_is_refused_in_one_line() {
        let cfg = TimingConfig {
            timer: Timer::Batch { launches: 100 },
            regime: Regime::SameBuffer,
            samples: 2,
            warmup: WarmupPolicy::Count { launches: 1 },
            invalidation: Invalidation::EveryLaunch,
        };
        let e = layout_for(&cfg, 1 << 30, 0, 80 << 30)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("batch:100") && e.contains("fewer launches per sample"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let lab = TimingConfig {
            invalidation: Invalidation::LabContract,
            ..cfg
        };
        assert_eq!(layout_for(&lab, 1 << 30, 0, 80 << 30).unwrap().total(), 1);
    }

    #[test]
    fn the_random_samples_differ_between_blocks_and_stay_in_range() {
        let a = draw_samples(fresh_seed(), 100, 4);
        assert_eq!(a.len(), 4);
        assert!(a.iter().all(|i| *i < 100) && a.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(draw_samples(1, 3, 4), vec![0, 1, 2]);
        let draws: std::collections::BTreeSet<Vec<u64>> = (0..8)
            .map(|_| draw_samples(fresh_seed(), 1000, 4))
            .collect();
        assert!(draws.len() > 1, "every block draws anew");
    }

    fn rates(hbm_gb_s: f64) -> DeviceRates {
        DeviceRates {
            hbm_gb_s,
            l2_measured_gb_s: hbm_gb_s,
            l2_method: "test".into(),
            l2_bytes: 0,
            peak_ops_per_s: None,
            ops_method: "test".into(),
        }
    }

    #[test]
    fn a_median_below_the_physical_floor_fails_the_gate() {
        // 12,000 useful bytes a launch; the host backend's launch takes 10 us. At 1 GB/s
        // the floor is 12 us: impossible. At 1000 GB/s it is 0.012 us: fine.
        let cfg = &configs(Invalidation::EveryLaunch)[0];
        for (gb_s, fails) in [(1.0, true), (1000.0, false)] {
            let mut b = HostBackend::new()
                .with_general_kernel("triad_f32", honest)
                .with_rates(rates(gb_s));
            let w = workload(1000);
            let k = [b.kernel("triad_f32").unwrap()];
            let Outcome::Measured(m) =
                measure(&mut b, &w, &k, cfg, "b", &mut GpuState::default).unwrap()
            else {
                panic!()
            };
            assert!(m.correct());
            let f = m.floor.as_ref().unwrap();
            assert!((f.us - 12_000.0 / (gb_s * 1e3)).abs() < 1e-9);
            assert_eq!(m.gate_failure().is_some(), fails, "{:?}", m.gate_failure());
            if fails {
                assert!(m
                    .gate_failure()
                    .unwrap()
                    .starts_with("faster than this device allows"));
            }
        }
    }

    /// On the H200 two of an honest copy's four invalidated halves were slow (single
    /// launches of 5 us, timed alone): their median doubled and the block failed. Slow
    /// halves on fewer than half of the probes are noise, never a gate failure.
    #[test]
    fn a_few_slow_invalidated_halves_do_not_fail_an_honest_block() {
        let cfg = &configs(Invalidation::EveryLaunch)[0];
        let honest_block = block(honest, cfg);
        assert!(honest_block.gate_failure().is_none());
        // The host backend's launches take 10 us; the H200's slow halves were about 3.2x.
        let with_slow = |count: usize| {
            let mut m = honest_block.clone();
            for t in &mut m.probe_invalidated_us[..count] {
                *t *= 4.0;
            }
            m.gate_failure()
        };
        // Two slow halves, as on the H200: noise (a median of four failed here).
        assert!(with_slow(2).is_none(), "{:?}", with_slow(2));
        // Half of them slow moves the median: a failure, as a skipping kernel's is.
        let half = (STALE_PROBES / 2) as usize;
        assert!(with_slow(half)
            .unwrap()
            .contains("found their previous output in place"));
    }

    #[test]
    fn a_timed_median_far_below_the_checked_median_is_flagged() {
        let mut m = block(honest, &configs(Invalidation::EveryLaunch)[0]);
        assert!(
            m.checked_flag().is_none(),
            "honest: timed and checked agree"
        );
        m.checked_us = vec![10.0 * CHECKED_RATIO_FLAG * 1.01; 3];
        assert!(m
            .checked_flag()
            .unwrap()
            .contains("below the checked median"));
        m.checked_us = vec![10.0 * CHECKED_RATIO_FLAG * 0.99; 3];
        assert!(m.checked_flag().is_none());
        // Far apart in ratio, close in time: a short kernel's launch latency, not a flag.
        for s in &mut m.samples {
            s.elapsed_us = 1.0;
        }
        m.checked_us = vec![1.0 + CHECKED_MIN_GAP_US * 0.99; 3];
        assert!(m.checked_flag().is_none());
        m.checked_us = vec![1.0 + CHECKED_MIN_GAP_US * 1.01; 3];
        assert!(m.checked_flag().is_some());
    }
}
