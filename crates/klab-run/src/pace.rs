//! The turns a parent gives a paced child, one byte each on the child's stdin, in the order
//! of [`Turn`], and the child's side of them ([`Pace`]).
//!
//! A block of `klab rounds` is started while the block before it still runs: it prepares
//! (the driver, its module, NVML; no context, nothing on the GPU) and waits for
//! [`Turn::Open`], given when the block before says its last launch is over
//! ([`crate::child::ChildResult::LaunchesOver`]); it then opens its context and loads its
//! module, and waits for [`Turn::Time`], given when the block before has closed the device
//! ([`crate::child::ChildResult::DeviceReleased`]: the driver says its context is gone) or
//! exited; only then does it make its slots, validate and time. So no launch of a block
//! shares the GPU with another block's context at work, and a block's process start,
//! driver and context cost the run little.

use std::io::Read;

/// A turn, in the order a child is given them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// A context and its module.
    Open,
    /// Its work on the device: slots, inputs, validations, timing.
    Time,
}

impl Turn {
    /// The byte that gives this turn.
    pub fn byte(self) -> u8 {
        match self {
            Turn::Open => b'o',
            Turn::Time => b't',
        }
    }
}

/// `+0.123 s`: how long after `from` the instant `at` came (never negative), as the
/// parent's `# turns:` line and a paced child's log line both write it, so that one reads
/// the two together.
pub fn offset(from: std::time::Instant, at: std::time::Instant) -> String {
    format!("+{:.3} s", at.saturating_duration_since(from).as_secs_f64())
}

/// A paced child's side of its turns: it reads them from `from` (its stdin).
pub struct Pace<R: Read> {
    from: R,
    /// Seconds spent waiting for turns: not the block's cost, the block before's.
    pub waited_s: f64,
    /// When this pace began: the child's start, for its log.
    began: std::time::Instant,
    /// Its [`Turn::Open`] turn, once it came.
    pub opened: Option<Opened>,
}

/// A paced child's turn to open the device, as the child saw it.
#[derive(Debug, Clone, Copy)]
pub struct Opened {
    /// When the turn came.
    pub at: std::time::Instant,
    /// Seconds from the child's start to its wait for the turn: its preparation.
    pub prepared_s: f64,
    /// Seconds it then waited; about none when the turn was given before it was ready to
    /// take it (it came late).
    pub waited_s: f64,
}

impl<R: Read> Pace<R> {
    /// A pace beginning now, which the child makes first, so that its log says how long it
    /// took to prepare for its turn.
    pub fn new(from: R) -> Pace<R> {
        Pace {
            from,
            waited_s: 0.0,
            began: std::time::Instant::now(),
            opened: None,
        }
    }

    /// Block until the parent gives `turn`. An error when it gives another, or closes the
    /// pipe first (it withdrew this block, or died): the block must not go on.
    pub fn wait_for(&mut self, turn: Turn) -> std::io::Result<()> {
        let t = std::time::Instant::now();
        let mut b = [0u8; 1];
        let got = loop {
            match self.from.read(&mut b) {
                Ok(0) => break None,
                Ok(_) => break Some(b[0]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        let waited_s = t.elapsed().as_secs_f64();
        self.waited_s += waited_s;
        match got {
            Some(g) if g == turn.byte() => {
                if turn == Turn::Open {
                    self.opened = Some(Opened {
                        at: std::time::Instant::now(),
                        prepared_s: t.saturating_duration_since(self.began).as_secs_f64(),
                        waited_s,
                    });
                }
                Ok(())
            }
            Some(g) => Err(std::io::Error::other(format!(
                "the parent gave turn {:?} where {turn:?} was due",
                g as char
            ))),
            None => Err(std::io::Error::other(format!(
                "the parent withdrew this block before its {turn:?} turn"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds to three places; an instant before `from` reads as +0.000 s.
    #[test]
    fn an_offset_is_seconds_after_its_start() {
        let t0 = std::time::Instant::now();
        let later = t0 + std::time::Duration::from_micros(123_400);
        assert_eq!(offset(t0, later), "+0.123 s");
        assert_eq!(offset(later, t0), "+0.000 s");
    }

    /// The turns come in order, one byte each; another byte, or the pipe closed before the
    /// turn (the parent withdrew the block or died), stops the block.
    /// Gives its bytes one at a time, each `delay` after it is asked for: a parent that
    /// gives a turn some time after the child began to wait for it.
    struct Slow {
        bytes: &'static [u8],
        delay: std::time::Duration,
    }

    impl Read for Slow {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            std::thread::sleep(self.delay);
            let Some((&b, rest)) = self.bytes.split_first() else {
                return Ok(0);
            };
            (buf[0], self.bytes) = (b, rest);
            Ok(1)
        }
    }

    /// The open turn's marks: the child's preparation from the pace's start to its wait,
    /// then the wait itself.
    #[test]
    fn the_open_turn_says_how_long_the_child_prepared_and_then_waited() {
        // The wait is long beside the preparation, so that a slow machine cannot blur them.
        let delay = std::time::Duration::from_millis(300);
        let mut p = Pace::new(Slow { bytes: b"o", delay });
        std::thread::sleep(std::time::Duration::from_millis(20));
        p.wait_for(Turn::Open).unwrap();
        let o = p.opened.expect("when the open turn came");
        assert!(o.prepared_s >= 0.02 && o.prepared_s < 0.3, "{o:?}");
        assert!(o.waited_s >= 0.3, "{o:?}");
        assert!(
            o.at >= p.began + std::time::Duration::from_millis(320),
            "{o:?}"
        );
    }

    #[test]
    fn a_paced_child_goes_on_only_with_the_turn_that_is_due() {
        let mut p = Pace::new(&b"ot"[..]);
        assert!(p.opened.is_none());
        p.wait_for(Turn::Open).unwrap();
        assert!(p.opened.is_some(), "when the open turn came");
        p.wait_for(Turn::Time).unwrap();
        let e = p.wait_for(Turn::Time).unwrap_err();
        assert!(e.to_string().contains("withdrew"), "{e}");
        let e = Pace::new(&b"t"[..]).wait_for(Turn::Open).unwrap_err();
        assert!(e.to_string().contains("'t'"), "{e}");
    }
}
