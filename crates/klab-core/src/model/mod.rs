//! The CPU address model (seed 000): tile-mapping coverage, shared-memory banks,
//! global-memory sectors, and per-variant predictions. Being written.
