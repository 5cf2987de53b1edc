//! klab-tools: drivers and parsers for the external tools klab runs or reads. No GPU calls
//! here: the tools run as child processes (argument vectors, never a shell) and their
//! reports are parsed into findings; a user's C reference is compiled by the system C
//! compiler and loaded (`cref`).

pub mod cref;
pub mod ncu;
pub mod nsys;
pub mod process;
pub mod sanitizer;
