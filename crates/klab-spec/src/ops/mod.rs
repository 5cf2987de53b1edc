//! Operations as contracts: what a kernel must compute, the inputs that expose a wrong
//! kernel, and the rule that decides whether an output is correct.

pub mod reduce;
pub mod transpose;
pub mod triad;
