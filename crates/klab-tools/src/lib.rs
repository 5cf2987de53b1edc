//! klab-tools: drivers and parsers for the external tools klab runs or reads. No GPU calls
//! here: the tools run as child processes (argument vectors, never a shell) and their
//! reports are parsed into findings. A declared operation's reference is built here
//! (`reference`): a user's C function compiled by the system C compiler and loaded
//! (`cref`), or a program that reads and writes `.npy` files (`cmdref`). Receipts are
//! signed and verified by OpenSSH's `ssh-keygen -Y` (`sshsig`).

pub mod cmdref;
pub mod cref;
pub mod ncu;
pub mod nsys;
pub mod process;
pub mod reference;
pub mod sanitizer;
pub mod sshsig;
