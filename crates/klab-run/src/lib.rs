//! klab-run: how klab runs kernel code and writes down what happened.
//!
//! A [`kernel::Kernel`] is a kernel found by name with its declaration; a
//! [`session::Session`] opens a device with its module, [`blocks::run_blocks`] times it
//! there; a [`receipt`] is written from those blocks, binding the bytes measured. Every
//! command that launches kernel code does it in a klab child under a watchdog; [`child`] is
//! what that child tells its parent (in a results file the parent names) and what a finished
//! child means
//! ([`child::ChildVerdict`]), decided once for every orchestrator; [`pace`] is how a parent
//! paces a block's child, started ahead of its turn. [`folder`] gives a
//! command a fresh folder for its results. One error type, [`RunError`].

pub mod bench;
pub mod blocks;
pub mod child;
pub mod error;
pub mod folder;
pub mod kernel;
pub mod pace;
pub mod receipt;
pub mod session;

pub use error::RunError;
