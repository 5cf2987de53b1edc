//! Other names: where a page holds a value klab reads under a name other than the one klab
//! asks for. One table, [`ALIASES`], says it for every such value; the lookups of a
//! [`super::KernelRecord`] go through it ([`super::KernelRecord::metric`],
//! [`super::KernelRecord::number_in`], [`super::KernelRecord::compute_capability`],
//! [`super::KernelRecord::grid_total`] and [`super::KernelRecord::block_total`]), so a
//! caller asks by klab's name and never needs to know which one the page used.
//!
//! Why a value has several names: a counter can be printed with or without its roll-up
//! suffix, and a record is one launch, so its `.avg` and `.max` roll-ups equal its `.sum`;
//! a throughput has a GPU-level twin (`gpu__dram_throughput`, what the details page shows);
//! a total can be printed whole or split into parts; the identity columns (`CC`, `Grid
//! Size`, `Block Size`) can be missing from a page that still has the same facts as device
//! attributes or launch metrics (on the details page, as Launch Statistics rows). A name
//! that is not in the table is only itself.

/// Where else a value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alias {
    /// The same number under other metric names, tried in order after the name itself.
    Names(&'static [&'static str]),
    /// A total ncu may print whole or in parts: the parts' sum when every part has a
    /// number (read before the total: klab has always read DRAM traffic as read plus
    /// write), else the total itself.
    Parts(&'static [&'static str]),
    /// The compute capability (identity column `CC`, `9.0`) as two device attributes,
    /// major and minor.
    MajorMinor(&'static str, &'static str),
    /// A launch dimension (identity column, `(128, 128, 1)`) as its total, a launch metric
    /// (`16,384`): the count of blocks or of threads, not their shape.
    Total(&'static str),
}

/// The identity column of the compute capability.
pub const CC: &str = "CC";
/// The identity column of the grid's shape.
pub const GRID_SIZE: &str = "Grid Size";
/// The identity column of the block's shape.
pub const BLOCK_SIZE: &str = "Block Size";

/// Every other name of a value klab reads: (klab's name, where else it may be).
pub const ALIASES: [(&str, Alias); 6] = [
    // The details page's SpeedOfLight row "DRAM Throughput" is this GPU-level metric.
    (
        super::metrics::DRAM_THROUGHPUT_PCT,
        Alias::Names(&["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]),
    ),
    (
        super::metrics::DURATION,
        Alias::Names(&[
            "gpu__time_duration",
            "gpu__time_duration.avg",
            "gpu__time_duration.max",
        ]),
    ),
    (
        super::metrics::DRAM_BYTES,
        Alias::Parts(&[
            super::metrics::DRAM_BYTES_READ,
            super::metrics::DRAM_BYTES_WRITE,
        ]),
    ),
    (
        CC,
        Alias::MajorMinor(
            "device__attribute_compute_capability_major",
            "device__attribute_compute_capability_minor",
        ),
    ),
    (GRID_SIZE, Alias::Total("launch__grid_size")),
    (BLOCK_SIZE, Alias::Total("launch__block_size")),
];

/// The other names of `name`, if it has any.
pub fn alias(name: &str) -> Option<Alias> {
    ALIASES.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
}
