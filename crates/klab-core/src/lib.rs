//! klab-core: everything klab knows that needs no GPU.
//!
//! Operations as contracts (inputs, oracle, verification rule, useful bytes), the
//! launch-plan rules, the timing engine written against a narrow backend interface,
//! statistics, reading and writing files (`artifact`: every input checked to be a regular
//! file within a cap, every output written atomically), and the CPU address model. No
//! module here calls a GPU; the CUDA runtime lives in `klab-cuda`.

pub mod artifact;
pub mod backend;
pub mod bound;
pub mod builtin;
pub mod check;
pub mod child;
pub mod compare;
pub mod csv;
pub mod declared;
pub mod device;
pub mod dtype;
pub mod expr;
pub mod floor;
pub mod general;
pub mod gpuref;
pub mod gpustate;
pub mod include;
pub mod init;
pub mod inputs;
pub mod manifest;
pub mod model;
pub mod npy;
pub mod ops;
pub mod oracle;
pub mod par;
pub mod plan;
pub mod ptxas;
pub mod receipt;
pub mod reference;
pub mod refscale;
pub mod registry;
pub mod row;
pub mod rule;
pub mod samples;
pub mod sanitize;
pub mod schema;
pub mod signature;
pub mod stats;
pub mod sweep;
pub mod text;
pub mod timing;
pub mod variant;
pub mod verify;
pub mod workload;

pub use variant::Variant;
