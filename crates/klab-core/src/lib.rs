//! klab-core: the facts and files every other klab crate stands on.
//!
//! Values with no klab concept above them: element types ([`dtype`]), size expressions and
//! shapes ([`expr`]), CUDA's limits and a device's facts ([`device`]), reading and writing
//! files ([`artifact`]: every input checked to be a regular file within a cap, every output
//! written atomically), `.npy` files, host work spread over the cores ([`par`]), statistics
//! and the seeded random streams ([`stats`]), timed samples, the timer floor, the GPU state
//! a block records, and text helpers. Nothing here knows what an operation, a kernel or a
//! receipt is; the crates above (`klab-spec`, `klab-engine`, `klab-evidence`) do.

pub mod artifact;
pub mod csv;
pub mod device;
pub mod dtype;
pub mod expr;
pub mod floor;
pub mod gpustate;
pub mod npy;
pub mod os_path;
pub mod par;
pub mod ptxas;
pub mod samples;
pub mod stats;
pub mod text;
