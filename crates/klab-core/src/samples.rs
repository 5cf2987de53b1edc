//! Timing samples as data: the cache regime and timer they were taken under, and the raw
//! sample CSV `sample,slot,elapsed_us` (seed 003) written and read back with every check
//! `klab compare` relies on.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Header of a raw sample file.
pub const SAMPLES_CSV_HEADER: &str = "sample,slot,elapsed_us";

/// The longest one sample may be, microseconds (an hour): a launch longer than that would
/// have met every watchdog klab sets, so a sample file that says so was not written by it.
pub const MAX_SAMPLE_US: f64 = 3.6e9;

/// Decimals of `elapsed_us` in a sample file klab writes (nanosecond-exact for event times).
pub const SAMPLES_CSV_DECIMALS: usize = 6;

/// The most a figure computed from unrounded samples can differ from the same figure
/// recomputed from the file: half a unit in the last printed decimal. Quantiles interpolate
/// between two samples, so their error is no larger than either sample's.
pub const SAMPLES_CSV_HALF_UNIT_US: f64 = 0.5e-6;

/// The resolution of a CUDA event pair, microseconds ("around 0.5 microseconds", CUDA
/// Runtime API, `cudaEventElapsedTime`). One event pair cannot measure less, so a sample
/// below it (divided by the launches the pair spans) was not measured.
pub const EVENT_RESOLUTION_US: f64 = 0.5;

/// What a process holds of `klab rounds`: each block, or each round's blocks in their order.
/// Rounds are separate processes either way, so the interval across rounds still sees what
/// a process contributes; a round's blocks in one process share one opened device and one
/// process start, which for a kernel of a few microseconds is most of a block's time.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// Every block in a process of its own, started while the block before it runs and
    /// starting its work only once that block has closed the device (docs/timing.md).
    #[default]
    Block,
    /// Each round's blocks, in the round's order, in one process.
    Round,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Block => "block",
            Isolation::Round => "round",
        }
    }

    /// What a reader of ratios measured this way must know, where something is known.
    pub fn caveat(self) -> Option<&'static str> {
        match self {
            Isolation::Block => None,
            // evidence/2026-12-05-gpu and evidence/2026-12-05-triton-isolation.
            Isolation::Round => Some(
                "on the H200 every block after the first in a round's process timed about 7% \
                 slower than a block alone (the copy at n = 1024: 5.28-5.43 against \
                 4.93-5.03 us), and with the settling block an A/A pair was still called \
                 different in each of 19 runs (a lean of about 0.8%, wider than the \
                 intervals rounds reach): rely on --isolation block for ratios",
            ),
        }
    }

    /// Where the blocks ran, as a receipt and a summary say it.
    pub fn describe(self) -> &'static str {
        match self {
            Isolation::Block => "each block its own process",
            Isolation::Round => {
                "each round's blocks in one process after a settling block it does not count, each round its own"
            }
        }
    }
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which blocks make a round of `klab rounds`. The blocks run in the same sequence either way
/// (A B B A A B B A ...); what differs is the round, the unit each ratio is taken over and
/// that the interval counts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum RoundOrder {
    /// The kernels in order, then reversed (A B B A): two blocks of each kernel a round, so
    /// a steady drift within the round cancels in its ratio.
    #[default]
    Mirrored,
    /// Each kernel once, in order in odd rounds and reversed in even ones (A B, then B A):
    /// half the blocks for as many rounds; a round's ratio rests on one block of each kernel,
    /// and drift within a round cancels only across rounds.
    Alternating,
}

impl RoundOrder {
    pub fn name(self) -> &'static str {
        match self {
            RoundOrder::Mirrored => "mirrored",
            RoundOrder::Alternating => "alternating",
        }
    }

    /// Round `round`'s blocks (rounds count from 1), in the order they run.
    pub fn of_round<T: Clone>(self, kernels: &[T], round: u32) -> Vec<T> {
        match self {
            RoundOrder::Mirrored => kernels
                .iter()
                .chain(kernels.iter().rev())
                .cloned()
                .collect(),
            RoundOrder::Alternating if round % 2 == 0 => kernels.iter().rev().cloned().collect(),
            RoundOrder::Alternating => kernels.to_vec(),
        }
    }

    /// Rounds come in multiples of this: alternating rounds in pairs (each pair one mirrored
    /// round), so that every kernel runs first as often as last and a difference between
    /// the two halves cannot tip the median.
    pub fn rounds_step(self) -> u32 {
        match self {
            RoundOrder::Mirrored => 1,
            RoundOrder::Alternating => 2,
        }
    }

    /// Whether `rounds` is a number of rounds this order runs (its error: one line).
    pub fn check_rounds(self, rounds: u32) -> Result<(), String> {
        match rounds % self.rounds_step() {
            0 => Ok(()),
            _ => {
                let (below, above) = (rounds.saturating_sub(1), rounds.saturating_add(1));
                let pass = match below >= 2 {
                    true => format!("--rounds {below} or {above}"),
                    false => format!("--rounds {above}"),
                };
                Err(format!(
                    "--order {self} takes an even number of rounds, so that each kernel runs first in as many rounds as it runs last (got --rounds {rounds}; pass {pass})"
                ))
            }
        }
    }

    /// Blocks of each kernel in a round.
    pub fn blocks_per_kernel(self) -> u32 {
        match self {
            RoundOrder::Mirrored => 2,
            RoundOrder::Alternating => 1,
        }
    }

    /// How the rounds were ordered, as a receipt's `measurement.order` says it.
    pub fn describe(self) -> &'static str {
        match self {
            RoundOrder::Mirrored => "ABBA: kernels in order then reversed within each round",
            RoundOrder::Alternating => {
                "alternating: kernels in order in odd rounds, reversed in even rounds (AB BA)"
            }
        }
    }
}

impl fmt::Display for RoundOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which buffers a timed launch touches, and so what the cache holds when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Regime {
    /// Every sample reuses one set of buffers: data may be served from L2.
    SameBuffer,
    /// Samples cycle through enough buffer sets that their footprint exceeds L2 twice over.
    BufferRotated,
    /// One buffer set; a scrub larger than L2 runs between samples, outside the interval.
    L2Flushed,
}

impl Regime {
    pub const ALL: [Regime; 3] = [Regime::SameBuffer, Regime::BufferRotated, Regime::L2Flushed];

    pub fn name(self) -> &'static str {
        match self {
            Regime::SameBuffer => "same-buffer",
            Regime::BufferRotated => "buffer-rotated",
            Regime::L2Flushed => "l2-flushed",
        }
    }

    /// Whether `slots` is a slot count this regime can have.
    pub fn accepts_slots(self, slots: u64) -> bool {
        match self {
            Regime::SameBuffer | Regime::L2Flushed => slots == 1,
            Regime::BufferRotated => slots >= 2,
        }
    }

    /// What the regime does not guarantee, printed beside its results.
    pub fn caveat(self) -> &'static str {
        match self {
            Regime::SameBuffer => "same buffers every sample: inputs and outputs may be served from L2; not a streaming (HBM) measurement",
            Regime::BufferRotated => "rotation encourages L2 turnover but does not prove each launch's loads and stores reached HBM",
            Regime::L2Flushed => "the scrub writes a buffer larger than L2 between samples; it does not guarantee every line was evicted or every dirty line written back, and it is not an architectural flush",
        }
    }
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Regime {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "same-buffer" | "hot" => Ok(Regime::SameBuffer),
            "buffer-rotated" | "rotated" | "rotate" => Ok(Regime::BufferRotated),
            "l2-flushed" | "flushed" | "flush" => Ok(Regime::L2Flushed),
            _ => Err(format!(
                "unknown cache regime '{s}' (expected same-buffer, buffer-rotated or l2-flushed)"
            )),
        }
    }
}

/// How the engine keeps a timed launch from finding the previous launch's result in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Invalidation {
    /// Before every timed launch (outside the event interval) the outputs and scratch of
    /// its slot get fresh pseudo-random words, a new seed each time, its in-out buffers
    /// their inputs again, and its inputs 64 elements drawn again at positions of its own;
    /// the launches of one interval (batch, graph) each have a slot of their own. Launches
    /// are verified: samples drawn at random before the block started, and a last unit of
    /// every slot on the block's inputs after the samples.
    EveryLaunch,
    /// The transpose lab's contract (`klab transpose`): one buffer pair, the launches of
    /// the batch back to back, the output checked as they left it.
    LabContract,
}

impl Invalidation {
    pub fn describe(self) -> &'static str {
        match self {
            Invalidation::EveryLaunch => "every timed launch: outputs and scratch overwritten with fresh random words, in-out buffers restored and 64 elements of every input drawn again at positions of its own before it, outside the interval; each launch of an interval on its own slot; inputs held unchanged by the kernel; a last launch of every slot on the block's inputs and random samples verified",
            Invalidation::LabContract => "none (the transpose lab's contract: one buffer pair, launches back to back); the physical floor and the checked time still apply",
        }
    }
}

/// How one sample was timed.
/// In JSON a timer is its spec string (`per-launch`, `batch:K`, `graph:K`), parsed
/// strictly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Timer {
    /// One CUDA event pair around each launch.
    PerLaunch,
    /// One event pair around `launches` back-to-back launches; the sample is the mean.
    Batch { launches: u32 },
    /// One event pair around one replay of a CUDA graph of `launches` launches; the
    /// sample is the mean.
    GraphReplay { launches: u32 },
}

impl Timer {
    /// Launches behind one sample.
    pub fn launches_per_sample(self) -> u32 {
        match self {
            Timer::PerLaunch => 1,
            Timer::Batch { launches } | Timer::GraphReplay { launches } => launches,
        }
    }

    /// A stable label, e.g. `cuda-events-per-launch`, `cuda-events-batch-10`.
    pub fn label(self) -> String {
        match self {
            Timer::PerLaunch => "cuda-events-per-launch".to_string(),
            Timer::Batch { launches } => format!("cuda-events-batch-{launches}"),
            Timer::GraphReplay { launches } => format!("cuda-events-graph-{launches}"),
        }
    }
}

impl Timer {
    /// The spec string `FromStr` accepts.
    pub fn spec(self) -> String {
        match self {
            Timer::PerLaunch => "per-launch".to_string(),
            Timer::Batch { launches } => format!("batch:{launches}"),
            Timer::GraphReplay { launches } => format!("graph:{launches}"),
        }
    }
}

impl From<Timer> for String {
    fn from(t: Timer) -> String {
        t.spec()
    }
}

impl TryFrom<String> for Timer {
    type Error = String;

    fn try_from(s: String) -> Result<Timer, String> {
        s.parse()
    }
}

impl fmt::Display for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl FromStr for Timer {
    type Err = String;

    /// `per-launch`, `batch:K`, `graph:K`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let count = |k: &str| -> Result<u32, String> {
            match k.parse::<u32>() {
                Ok(v) if v >= 1 => Ok(v),
                _ => Err(format!(
                    "timer '{s}': launch count must be a positive integer"
                )),
            }
        };
        match s.split_once(':') {
            None if s == "per-launch" => Ok(Timer::PerLaunch),
            Some(("batch", k)) => Ok(Timer::Batch {
                launches: count(k)?,
            }),
            Some(("graph", k)) => Ok(Timer::GraphReplay {
                launches: count(k)?,
            }),
            _ => Err(format!(
                "unknown timer '{s}' (expected per-launch, batch:K or graph:K)"
            )),
        }
    }
}

/// One raw sample, in acquisition order.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub sample: u64,
    pub slot: u64,
    pub elapsed_us: f64,
}

/// Write samples as CSV. Microseconds with [`SAMPLES_CSV_DECIMALS`] decimals.
pub fn samples_csv(samples: &[Sample]) -> String {
    let mut s = String::with_capacity(24 * (samples.len() + 1));
    s.push_str(SAMPLES_CSV_HEADER);
    s.push('\n');
    for x in samples {
        s.push_str(&format!(
            "{},{},{:.*}\n",
            x.sample, x.slot, SAMPLES_CSV_DECIMALS, x.elapsed_us
        ));
    }
    s
}

/// Why a sample file cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SampleError {
    #[error("sample file is not UTF-8")]
    NotText,
    #[error("sample file has header '{0}', expected '{SAMPLES_CSV_HEADER}'")]
    Schema(String),
    #[error("sample file line {line}: {why}")]
    Row { line: usize, why: String },
    #[error("sample file line {line}: sample {got} out of sequence (expected {want})")]
    Sequence { line: usize, got: String, want: u64 },
    #[error("sample file line {line}: slot {got} does not follow the rotation over {slots} slot(s) (expected {want})")]
    Rotation {
        line: usize,
        got: String,
        want: u64,
        slots: u64,
    },
    #[error(
        "sample file line {line}: duration '{got}' is not a positive number of microseconds up to an hour (3.6e9)"
    )]
    Duration { line: usize, got: String },
    #[error("sample file holds {0} sample(s); at least two are required")]
    TooFew(usize),
    #[error("sample file line {line}: duration {} us is below the CUDA event resolution ({min} us per sample for timer {timer}: {EVENT_RESOLUTION_US} us per event pair over {launches} launch(es))", plain_or_exponent(*.got))]
    BelowResolution {
        line: usize,
        got: f64,
        min: f64,
        timer: String,
        launches: u32,
    },
}

/// `0.25`, but `1e-320` rather than 320 zeros.
fn plain_or_exponent(v: f64) -> String {
    if v != 0.0 && v.abs() < 1e-3 {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// Refuse a sample shorter than one event pair can measure under `timer`: a per-launch
/// sample below [`EVENT_RESOLUTION_US`], a batch or graph sample (the mean over K launches)
/// below that divided by K.
pub fn check_resolution(samples: &[Sample], timer: Timer) -> Result<(), SampleError> {
    let launches = timer.launches_per_sample().max(1);
    let min = EVENT_RESOLUTION_US / f64::from(launches);
    match samples
        .iter()
        .position(|s| s.elapsed_us.is_nan() || s.elapsed_us < min)
    {
        Some(i) => Err(SampleError::BelowResolution {
            line: i + 2,
            got: samples[i].elapsed_us,
            min,
            timer: timer.spec(),
            launches,
        }),
        None => Ok(()),
    }
}

/// Parse a sample file, requiring the exact header, samples numbered 0, 1, 2, ..., slots
/// that follow `sample mod slots`, and finite positive durations.
pub fn parse_samples_csv(bytes: &[u8], slots: u64) -> Result<Vec<Sample>, SampleError> {
    let text = std::str::from_utf8(bytes).map_err(|_| SampleError::NotText)?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    if header != SAMPLES_CSV_HEADER {
        return Err(SampleError::Schema(header.to_string()));
    }
    let slots = slots.max(1);
    let mut out = Vec::new();
    for (k, raw) in lines.enumerate() {
        let line = k + 2;
        let fields: Vec<&str> = raw.split(',').collect();
        if fields.len() != 3 {
            return Err(SampleError::Row {
                line,
                why: format!("expected 3 fields, found {}", fields.len()),
            });
        }
        let want = out.len() as u64;
        match fields[0].parse::<u64>() {
            Ok(v) if v == want && fields[0] == v.to_string() => {}
            _ => {
                return Err(SampleError::Sequence {
                    line,
                    got: fields[0].to_string(),
                    want,
                })
            }
        }
        let want_slot = want % slots;
        match fields[1].parse::<u64>() {
            Ok(v) if v == want_slot && fields[1] == v.to_string() => {}
            _ => {
                return Err(SampleError::Rotation {
                    line,
                    got: fields[1].to_string(),
                    want: want_slot,
                    slots,
                })
            }
        }
        let elapsed_us = match fields[2].parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 && v <= MAX_SAMPLE_US => v,
            _ => {
                return Err(SampleError::Duration {
                    line,
                    got: fields[2].to_string(),
                })
            }
        };
        out.push(Sample {
            sample: want,
            slot: want_slot,
            elapsed_us,
        });
    }
    if out.len() < 2 {
        return Err(SampleError::TooFew(out.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(i: u64, slot: u64, us: f64) -> Sample {
        Sample {
            sample: i,
            slot,
            elapsed_us: us,
        }
    }

    #[test]
    fn csv_round_trips() {
        let v = vec![s(0, 0, 10.5), s(1, 1, 11.25), s(2, 0, 9.0)];
        let text = samples_csv(&v);
        assert_eq!(
            text,
            "sample,slot,elapsed_us\n0,0,10.500000\n1,1,11.250000\n2,0,9.000000\n"
        );
        assert_eq!(parse_samples_csv(text.as_bytes(), 2).unwrap(), v);
    }

    #[test]
    fn every_defect_is_named() {
        let p = |t: &str, slots| parse_samples_csv(t.as_bytes(), slots).unwrap_err();
        assert!(matches!(
            p("a,b,c\n0,0,1\n1,0,1\n", 1),
            SampleError::Schema(_)
        ));
        assert!(matches!(
            p("sample,slot,elapsed_us\n0,0,1\n2,0,1\n", 1),
            SampleError::Sequence {
                line: 3,
                want: 1,
                ..
            }
        ));
        assert!(matches!(
            p("sample,slot,elapsed_us\n0,0,1\n01,0,1\n", 1),
            SampleError::Sequence { .. }
        ));
        assert!(matches!(
            p("sample,slot,elapsed_us\n0,0,1\n1,0,1\n", 2),
            SampleError::Rotation {
                line: 3,
                want: 1,
                ..
            }
        ));
        assert!(matches!(
            p("sample,slot,elapsed_us\n0,0,1\n1,0,nan\n", 1),
            SampleError::Duration { .. }
        ));
        assert!(matches!(
            p("sample,slot,elapsed_us\n0,0,1\n1,0,-2\n", 1),
            SampleError::Duration { .. }
        ));
        assert!(matches!(
            p("sample,slot,elapsed_us\n0,0,1\n1,0,0\n", 1),
            SampleError::Duration { .. }
        ));
        assert!(matches!(
            p("sample,slot,elapsed_us\n0,0,1\n1,0,inf\n", 1),
            SampleError::Duration { .. }
        ));
        assert!(matches!(
            p("sample,slot,elapsed_us\n0,0,1\n", 1),
            SampleError::TooFew(1)
        ));
        assert!(matches!(
            p("sample,slot,elapsed_us\n0,0,1\n1,0\n", 1),
            SampleError::Row { .. }
        ));
        assert!(matches!(p("truncated", 1), SampleError::Schema(_)));
        assert!(matches!(
            parse_samples_csv(&[0xff, 0xfe], 1).unwrap_err(),
            SampleError::NotText
        ));
    }

    #[test]
    fn durations_below_the_event_resolution_are_refused() {
        let v = [s(0, 0, 48.6), s(1, 0, 1e-320), s(2, 0, 48.6)];
        let e = check_resolution(&v, Timer::PerLaunch).unwrap_err();
        assert!(
            matches!(e, SampleError::BelowResolution { line: 3, min, .. } if min == 0.5),
            "{e:?}"
        );
        assert!(e.to_string().contains("duration 1e-320 us is below"), "{e}");
        // A batch of 10 launches measures 0.5 us in all: 0.05 us each.
        let v = [s(0, 0, 0.06), s(1, 0, 0.05)];
        assert!(check_resolution(&v, Timer::Batch { launches: 10 }).is_ok());
        assert!(check_resolution(&v, Timer::PerLaunch).is_err());
        assert!(check_resolution(&[s(0, 0, 0.5), s(1, 0, 7.0)], Timer::PerLaunch).is_ok());
    }

    #[test]
    fn regimes_and_timers_parse_and_check_slots() {
        for r in Regime::ALL {
            assert_eq!(r.name().parse::<Regime>().unwrap(), r);
        }
        assert!(Regime::SameBuffer.accepts_slots(1) && !Regime::SameBuffer.accepts_slots(2));
        assert!(Regime::BufferRotated.accepts_slots(11) && !Regime::BufferRotated.accepts_slots(1));
        assert!(!Regime::L2Flushed.accepts_slots(0));
        assert_eq!(
            "batch:10".parse::<Timer>().unwrap(),
            Timer::Batch { launches: 10 }
        );
        assert_eq!(
            "graph:20".parse::<Timer>().unwrap().launches_per_sample(),
            20
        );
        assert_eq!(
            "per-launch".parse::<Timer>().unwrap().label(),
            "cuda-events-per-launch"
        );
        assert!("batch:0".parse::<Timer>().is_err());
        assert!("batch".parse::<Timer>().is_err());
        assert!("cold".parse::<Regime>().is_err());
    }
}

#[cfg(test)]
mod serde_tests {
    use super::*;

    #[test]
    fn timers_are_strict_spec_strings_in_json() {
        for t in [
            Timer::PerLaunch,
            Timer::Batch { launches: 10 },
            Timer::GraphReplay { launches: 3 },
        ] {
            let j = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<Timer>(&j).unwrap(), t);
        }
        assert_eq!(
            serde_json::to_string(&Timer::Batch { launches: 10 }).unwrap(),
            "\"batch:10\""
        );
        assert!(serde_json::from_str::<Timer>(r#""per-launch:10""#).is_err());
        assert!(serde_json::from_str::<Timer>(r#"{"kind":"per-launch"}"#).is_err());
        assert!(serde_json::from_str::<Timer>(r#""""#).is_err());
        assert!(serde_json::from_str::<Timer>(r#""batch:0""#).is_err());
    }
}
