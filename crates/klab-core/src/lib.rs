//! klab-core: everything klab knows that needs no GPU.
//!
//! Operations as contracts (inputs, oracle, verification rule, useful bytes), the
//! launch-plan rules, statistics, artifact writing, and the CPU address model.
//! No module here calls a GPU; the runtime layer lives in `klab-cuda`.

pub mod model;
pub mod variant;

pub use variant::{Operation, Variant};
