//! klab-engine: a declared operation run on a [`backend::Backend`] and judged.
//!
//! [`declared::DeclaredWorkload`] is one case of one operation: it makes the [`inputs`],
//! asks a [`reference::Reference`] (a built-in [`oracle`], a user's C function or command,
//! or a trusted kernel through [`gpuref`]) for the expected outputs, and judges a slot's
//! outputs by the operation's rule ([`verify`] holds the device checker's side). [`check`]
//! walks the size ladder and its cases; [`timing`] runs the same workload in timed blocks
//! and verifies timed launches. The [`backend::Backend`] trait is the seam: `klab-cuda`
//! implements it on a GPU and [`backend::host::HostBackend`] runs every gate without one.

pub mod backend;
pub mod check;
pub mod declared;
pub mod gpuref;
pub mod inputs;
pub mod oracle;
pub mod reference;
pub mod refscale;
pub mod timing;
pub mod verify;
pub mod workload;
