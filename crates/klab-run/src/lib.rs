//! klab-run: how klab runs kernel code and judges what came back.
//!
//! Every command that launches kernel code does it in a klab child under a watchdog;
//! [`child`] is what that child tells its parent (one tagged result line) and what a
//! finished child means ([`child::ChildVerdict`]), decided once for every orchestrator.

pub mod child;
