//! The built-in transpose lab's variants (seed 000) and what each one promises.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One of the five kernels in `kernels/transpose.cu`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// A plain copy with the same logical traffic; verified as a copy.
    Copy,
    /// Coalesced reads, stores strided by N.
    Naive,
    /// Shared-memory tile `tile[32][32]`: both directions coalesced, 32-way bank conflict.
    Tiled,
    /// Shared-memory tile `tile[32][33]`: the padded row stride removes the conflict.
    Padded,
    /// The padded tile without its barrier: a known race, always rejected.
    Broken,
}

impl Variant {
    /// Every variant, in the order `all` runs them.
    pub const ALL: [Variant; 5] = [
        Variant::Copy,
        Variant::Naive,
        Variant::Tiled,
        Variant::Padded,
        Variant::Broken,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Copy => "copy",
            Variant::Naive => "naive",
            Variant::Tiled => "tiled",
            Variant::Padded => "padded",
            Variant::Broken => "broken",
        }
    }

    /// The `extern "C"` entry point in `kernels/transpose.cu`.
    pub fn entry(self) -> &'static str {
        match self {
            Variant::Copy => "transpose_copy",
            Variant::Naive => "transpose_naive",
            Variant::Tiled => "transpose_tiled",
            Variant::Padded => "transpose_padded",
            Variant::Broken => "transpose_broken",
        }
    }

    /// A known-broken variant fails its gate on every run, whatever its output.
    pub fn known_broken(self) -> bool {
        matches!(self, Variant::Broken)
    }

    /// Shared-memory row padding in words, for the tiled family.
    pub fn shared_padding(self) -> Option<u32> {
        match self {
            Variant::Tiled => Some(0),
            Variant::Padded | Variant::Broken => Some(1),
            Variant::Copy | Variant::Naive => None,
        }
    }

    /// Whether a block barrier separates shared writes from shared reads.
    pub fn has_barrier(self) -> bool {
        matches!(self, Variant::Tiled | Variant::Padded)
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A variant name that is not one of the five.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown variant '{0}' (expected one of: copy, naive, tiled, padded, broken)")]
pub struct UnknownVariant(pub String);

impl FromStr for Variant {
    type Err = UnknownVariant;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| UnknownVariant(s.to_string()))
    }
}

/// Launch geometry shared by every built-in transpose kernel (seed 000).
pub const TILE: u32 = 32;
/// Rows of threads per block; each thread covers `TILE / BLOCK_ROWS` rows.
pub const BLOCK_ROWS: u32 = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_is_the_seed_order() {
        let names: Vec<_> = Variant::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(names, ["copy", "naive", "tiled", "padded", "broken"]);
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>().unwrap(), v);
        }
        assert!("all".parse::<Variant>().is_err());
        assert!("Padded".parse::<Variant>().is_err());
    }

    #[test]
    fn only_broken_is_known_broken() {
        for v in Variant::ALL {
            assert_eq!(v.known_broken(), v == Variant::Broken);
        }
        assert!(!Variant::Broken.has_barrier());
        assert_eq!(Variant::Tiled.shared_padding(), Some(0));
        assert_eq!(Variant::Padded.shared_padding(), Some(1));
    }
}
