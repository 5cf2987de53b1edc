//! klab-cuda: the CUDA runtime layer. Every GPU call in klab goes through this crate.
//!
//! - [`probe`]: is libcuda / libnvrtc loadable (cudarc panics when a library is missing,
//!   so every entry point checks first and returns a clear error);
//! - [`device`]: opening a device and reading its facts;
//! - [`nvrtc`]: run-time compilation for the device's own architecture, with an on-disk
//!   cache keyed by source hash, arch, options (include folders among them, with their
//!   headers' digest), template instances and NVRTC version;
//! - [`std_headers`]: the C and C++ standard headers NVRTC does not ship, given to it as
//!   in-memory headers (`<cstdint>`, `<cmath>`, `<cfloat>`, ...);
//! - [`module`]: what a manifest's kernels run from, compiled by [`nvrtc`] or brought
//!   precompiled (cubin, PTX, fatbin);
//! - [`checker`]: klab's own device module, the device checker and input generator;
//! - [`gpu`]: [`gpu::CudaBackend`], the implementation of klab-engine's `Backend`, over a
//!   loaded module.

pub mod checker;
pub mod device;
pub mod error;
pub mod gpu;
pub mod module;
pub mod nvml;
pub mod nvrtc;
pub mod probe;
pub mod std_headers;

pub use error::CudaError;
