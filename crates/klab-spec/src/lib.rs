//! klab-spec: an operation and its kernels as data.
//!
//! A manifest's TOML becomes a [`manifest::KernelDecl`] whose operation is a
//! [`declared::DeclaredOp`] (buffers, sizes, dtypes, the reference, the comparison
//! [`rule`], the cases); built-in kernels get theirs from [`declared::builtin`] and are
//! found by name in the [`registry`]. A kernel's parameters are checked against its
//! `__global__` [`signature`], and [`plan`] holds the launch-plan rules. [`init`] writes
//! `klab init`'s skeletons. Everything here parses and validates; nothing runs a kernel or
//! computes an expected value (that is `klab-engine`).

pub mod builtin;
pub mod declared;
pub mod include;
pub mod init;
pub mod manifest;
pub mod ops;
pub mod plan;
pub mod registry;
pub mod rule;
pub mod signature;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod variant;

pub use variant::Variant;
