//! The parent's side of pacing ([`klab_run::pace`]): `klab bench` children run one after
//! another, each started while the one before it runs ([`Ahead`]), given its turn to open
//! the device once that one's launches are over and its turn to time once that one has
//! closed the device ([`run_paced`]). `klab rounds` runs its blocks so, and the lab its
//! receipts.
//!
//! A paced child prepares (its kernel, the driver, its module, NVML:
//! [`klab_run::session::Prepared`]) while the one before runs. A process costs about 0.35 s
//! in driver, context and exit on the H200 whatever it times
//! (evidence/2026-12-02-device-cost); started ahead, most of that runs beside the one
//! before, and still no timed launch shares the GPU with another child's context.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use klab_engine::verify::VerifyPolicy;
use klab_run::child::ChildResult;
use klab_run::pace::{offset, Turn};
use klab_tools::process::Echo;

use crate::child::{ChildCmd, ChildRun, StartedChild};
use crate::cli::BenchArgs;

/// A paced bench (a block of `klab rounds`, a receipt of the lab): its name in the run
/// (rounds' blocks: relative to the rounds' folder), by which a child started ahead is
/// matched to it, its folder, and its arguments.
#[derive(Clone)]
pub(crate) struct BlockBench {
    pub rel: String,
    pub dir: PathBuf,
    pub args: BenchArgs,
}

/// A block's child started ahead of its turn: the block, its child, and when it was given
/// its turns (while the block before it still ran: to open a context once that block's
/// launches were over, and to start once it had closed the device).
struct Started {
    bench: BlockBench,
    child: StartedChild,
    opened: Option<Instant>,
    timed: Option<Instant>,
}

impl Started {
    /// Give this block the turns that what the block before it said allows: to open a
    /// context once that block's launches are over (where `open` says it may) or it closed
    /// the device, and to start once it closed the device.
    fn follow(&mut self, before: &Said, open: OpenTurn) {
        if self.timed.is_some() {
            return;
        }
        let released = before.released.is_some();
        let over = before.over.is_some() && open == OpenTurn::OnLaunchesOver;
        if self.opened.is_none() && (released || over) {
            self.opened = self.child.give(Turn::Open).is_ok().then(Instant::now);
        }
        if self.opened.is_some() && released {
            self.timed = self.child.give(Turn::Time).is_ok().then(Instant::now);
        }
    }
}

/// When the parent first read each of a paced block's lines in its results file (within a
/// poll of the saying).
#[derive(Default)]
struct Said {
    over: Option<Instant>,
    released: Option<Instant>,
}

impl Said {
    fn heard(&mut self, text: &str) {
        let now = Instant::now();
        if self.released.is_none() && ChildResult::said(text, &ChildResult::DeviceReleased) {
            self.released = Some(now);
        }
        // A block that closed the device is past its launches whether or not that was read.
        if self.over.is_none()
            && (self.released.is_some() || ChildResult::said(text, &ChildResult::LaunchesOver))
        {
            self.over = Some(now);
        }
    }
}

/// A block's turns for the log, in seconds from its turn to start: where its share of the
/// run went, and what the next block's process did meanwhile.
struct Timeline {
    turn: Instant,
    ahead_s: f64,
    said: Said,
    /// A block was started ahead to follow this one.
    next_started: bool,
    next_opened: Option<Instant>,
    next_timed: Option<Instant>,
    ended: Instant,
}

impl Timeline {
    /// The turns of a block whose turn was `turn`, started `ahead_s` before it, that said
    /// `said` and ended at `ended`, with `next` started ahead to follow it.
    fn of(turn: Instant, ahead_s: f64, said: Said, next: Option<&Started>, ended: Instant) -> Self {
        Timeline {
            turn,
            ahead_s,
            said,
            next_started: next.is_some(),
            next_opened: next.and_then(|u| u.opened),
            next_timed: next.and_then(|u| u.timed),
            ended,
        }
    }

    fn describe(&self) -> String {
        let at = |t: Option<Instant>| match t {
            // Everything here comes after the block's turn; an instant before it would read
            // as +0.000 rather than fail.
            Some(t) => offset(self.turn, t),
            None => "not seen".into(),
        };
        let next = match (self.next_started, self.next_opened, self.next_timed) {
            (false, ..) => "no block started ahead after it".to_string(),
            (true, None, None) => {
                "the next block, started ahead, had no turn before it ended".into()
            }
            (true, opened, timed) => {
                format!("the next block opened {}, began {}", at(opened), at(timed))
            }
        };
        format!(
            "turns: started {:.3} s before its turn; launches over {}, device released {}, exited {}; {next}",
            self.ahead_s,
            at(self.said.over),
            at(self.said.released),
            at(Some(self.ended)),
        )
    }
}

/// The block started ahead of its turn, if any, and when it is given its turn to open a
/// context.
pub(crate) struct Ahead {
    next: Option<Started>,
    open: OpenTurn,
}

/// When the block started ahead opens its context. Never beside the current block's
/// launches: on an H100 a context made then slowed the running block's release and launches
/// through the driver and saved little (evidence/2026-12-05-open-ahead-h100).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum OpenTurn {
    /// When the current block says its launches are over.
    OnLaunchesOver,
    /// With its turn to start: the device lets one process hold a context at a time
    /// (exclusive-process mode), or there was none to ask.
    WithTime,
}

impl Ahead {
    /// `shares`: whether the device lets a second process open a context while one holds
    /// its own (its compute mode is the default one).
    pub fn new(shares: bool) -> Ahead {
        let open = match shares {
            true => OpenTurn::OnLaunchesOver,
            false => OpenTurn::WithTime,
        };
        Ahead { next: None, open }
    }

    /// The child started ahead for `bench`, if that is the one waiting. Any other is
    /// withdrawn now, before another block starts: killed and reaped, and, when it had
    /// begun, its folder moved aside (`-withdrawn`, which nothing reads) and its seconds
    /// since its turn counted in the run's wall ([`Withdrawn`]), so that it runs again in a
    /// clean folder in its turn.
    fn take_for(&mut self, bench: &BlockBench) -> (Option<Started>, Option<Withdrawn>) {
        let Some(started) = self.next.take() else {
            return (None, None);
        };
        if started.bench.rel == bench.rel {
            return (Some(started), None);
        }
        let Started {
            bench: withdrawn,
            child,
            timed,
            ..
        } = started;
        drop(child);
        // Withdrawn before its turn: nothing of it was made.
        let Some(turn) = timed else {
            return (None, None);
        };
        let aside = suffixed(&withdrawn.dir, WITHDRAWN_SUFFIX);
        let moved = match withdrawn.dir.exists() {
            true => std::fs::rename(&withdrawn.dir, &aside).map_or_else(
                |e| format!("not moved: {e}"),
                |()| format!("moved to {}", aside.display()),
            ),
            false => "not made".to_string(),
        };
        let withdrawn = Withdrawn {
            wall_s: turn.elapsed().as_secs_f64(),
            line: format!(
                "# {} withdrawn after its turn (another block runs first); its folder {moved}\n",
                withdrawn.rel,
            ),
        };
        (None, Some(withdrawn))
    }
}

/// A child started ahead for another block and withdrawn after its turn: its seconds since
/// that turn, which count in the run's wall, and the log's line on it.
pub(crate) struct Withdrawn {
    pub wall_s: f64,
    pub line: String,
}

/// What ends the folder of a block withdrawn after its turn to time.
const WITHDRAWN_SUFFIX: &str = "-withdrawn";

/// `dir` with `suffix` after its last name: a block's other folder beside it.
pub(crate) fn suffixed(dir: &Path, suffix: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.with_file_name(format!("{name}{suffix}"))
}

/// A bench's paced run: what its child said and did, and where its time went.
pub(crate) struct PacedRun {
    pub out: ChildRun,
    /// Its share of the run: from its turn to time to the next bench's (or its end).
    pub wall_s: f64,
    /// Seconds its process ran beside other benches' turns: before its own (started ahead,
    /// waiting or opening the device while the one before finished) and after the next
    /// one's (its receipt and exit, once it had closed the device).
    pub beside_s: f64,
    /// Its turns, for the log (`turns: started ...`).
    pub turns: String,
    /// The child started ahead for another bench, withdrawn before this one ran.
    pub withdrawn: Option<Withdrawn>,
}

/// `bench` in a `klab bench` child of its own, paced (the module's docs): the child started
/// ahead for it if there is one, else one started now; `next`, the bench after it, is
/// started while it runs and given its turns as this one says it may. Under a watchdog of
/// `timeout`.
pub(crate) fn run_paced(
    bench: &BlockBench,
    next: Option<&BlockBench>,
    ahead: &mut Ahead,
    policy: VerifyPolicy,
    timeout: Duration,
) -> anyhow::Result<PacedRun> {
    let start = |b: &BlockBench| -> anyhow::Result<Started> {
        Ok(Started {
            bench: b.clone(),
            child: ChildCmd::PacedBench(b.args.clone()).start(policy, Echo::Off, true)?,
            opened: None,
            timed: None,
        })
    };
    let (taken, withdrawn) = ahead.take_for(bench);
    let mut me = match taken {
        Some(s) => s,
        None => start(bench)?,
    };
    // The one before has exited or closed the device. A child that already stopped (its
    // driver would not start) takes no turn; how it ended is its verdict.
    if me.opened.is_none() {
        let _ = me.child.give(Turn::Open);
    }
    let turn = match me.timed {
        Some(t) => t,
        None => {
            let _ = me.child.give(Turn::Time);
            Instant::now()
        }
    };
    let ahead_s = turn.duration_since(me.child.started).as_secs_f64();
    // Started now, the next child prepares while this one runs; one that cannot start is
    // started again in its turn, which says why.
    let mut upcoming = next.and_then(|b| start(b).ok());
    let open = ahead.open;
    let mut said = Said::default();
    let out = me.child.finish(timeout, &mut |me| {
        if said.released.is_some() {
            return;
        }
        let Ok(text) = me.said() else { return };
        said.heard(&text);
        if let Some(up) = upcoming.as_mut() {
            up.follow(&said, open);
        }
    })?;
    let ended = Instant::now();
    // Its share of the run ends where the next one's begins; what it did after that (its
    // receipt, its exit, on the host) ran beside that one, like what it did before its turn.
    let handed = upcoming.as_ref().and_then(|u| u.timed).unwrap_or(ended);
    let turns = Timeline::of(turn, ahead_s, said, upcoming.as_ref(), ended).describe();
    ahead.next = upcoming;
    Ok(PacedRun {
        out,
        wall_s: handed.duration_since(turn).as_secs_f64(),
        beside_s: ahead_s + ended.duration_since(handed).as_secs_f64(),
        turns,
        withdrawn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(lines: &[ChildResult]) -> String {
        lines.iter().map(|l| l.line() + "\n").collect()
    }

    fn case() -> ChildResult {
        ChildResult::Case {
            label: "k at n=8: its validations and timed launches".into(),
        }
    }

    /// Where the device lets two processes hold contexts, the next block opens once the
    /// current block's launches are over; where it does not (or there was no device to
    /// ask), only with its turn to start.
    #[test]
    fn the_turn_to_open_follows_what_the_device_allows() {
        assert_eq!(Ahead::new(true).open, OpenTurn::OnLaunchesOver);
        assert_eq!(Ahead::new(false).open, OpenTurn::WithTime);
    }

    /// A block heard to have closed the device is past its launches, whether or not its
    /// launches-over line was read first; each line is timed when first heard.
    #[test]
    fn a_block_that_closed_the_device_is_past_its_launches() {
        let mut s = Said::default();
        s.heard(&said(&[case()]));
        assert!(s.over.is_none() && s.released.is_none());
        s.heard(&said(&[case(), ChildResult::DeviceReleased]));
        assert!(s.over.is_some() && s.over == s.released);

        let mut s = Said::default();
        s.heard(&said(&[ChildResult::LaunchesOver]));
        let over = s.over;
        assert!(over.is_some() && s.released.is_none());
        s.heard(&said(&[
            ChildResult::LaunchesOver,
            ChildResult::DeviceReleased,
        ]));
        assert_eq!(s.over, over);
        assert!(s.released.is_some());
    }

    /// The log's turns line counts from the block's own turn (an instant before it reads
    /// +0.000), and says when no block followed it or the one that did got no turn.
    #[test]
    fn the_turns_line_counts_from_the_blocks_turn() {
        let turn = Instant::now();
        let ms = |m: u64| Some(turn + Duration::from_millis(m));
        let t = Timeline {
            turn,
            ahead_s: 0.4,
            said: Said {
                over: ms(120),
                released: ms(180),
            },
            next_started: true,
            next_opened: turn.checked_sub(Duration::from_millis(5)),
            next_timed: ms(185),
            ended: turn + Duration::from_millis(250),
        };
        assert_eq!(
            t.describe(),
            "turns: started 0.400 s before its turn; launches over +0.120 s, device released +0.180 s, exited +0.250 s; the next block opened +0.000 s, began +0.185 s"
        );
        let unheard = |next_started| Timeline {
            said: Said::default(),
            next_started,
            next_opened: None,
            next_timed: None,
            ..t
        };
        assert!(unheard(false).describe().ends_with(
            "launches over not seen, device released not seen, exited +0.250 s; no block started ahead after it"
        ));
        // A block that ended without saying it was over leaves the next one waiting.
        assert!(unheard(true)
            .describe()
            .ends_with("; the next block, started ahead, had no turn before it ended"));
    }
}
