//! The built-in kernel sources, embedded in the binary so klab runs from any folder.

/// `kernels/transpose.cu`: copy, naive, tiled, padded, broken.
pub const TRANSPOSE_SOURCE: &str = include_str!("../../../kernels/transpose.cu");
/// NVRTC program name for it, so tool reports cite the file.
pub const TRANSPOSE_PROGRAM: &str = "transpose.cu";
/// Path of the source in the repository, for artifacts.
pub const TRANSPOSE_PATH: &str = "kernels/transpose.cu";

/// `kernels/triad.cu`: triad_f32 and triad_buggy.
pub const TRIAD_SOURCE: &str = include_str!("../../../kernels/triad.cu");
pub const TRIAD_PROGRAM: &str = "triad.cu";
pub const TRIAD_PATH: &str = "kernels/triad.cu";

/// `kernels/reduce.cu`: the block-tree sum (two launch variants in reduce.toml).
pub const REDUCE_SOURCE: &str = include_str!("../../../kernels/reduce.cu");
pub const REDUCE_PROGRAM: &str = "reduce.cu";
pub const REDUCE_PATH: &str = "kernels/reduce.cu";

/// `kernels/mutants.cu`: the mutation audit's deliberate bugs (kernels/mutants.toml).
pub const MUTANTS_SOURCE: &str = include_str!("../../../kernels/mutants.cu");
pub const MUTANTS_PATH: &str = "kernels/mutants.cu";

/// `kernels/exploits.cu`: the exploit audit's cheating kernels and their honest controls
/// (kernels/exploits.toml).
pub const EXPLOITS_SOURCE: &str = include_str!("../../../kernels/exploits.cu");
pub const EXPLOITS_PATH: &str = "kernels/exploits.cu";

/// `kernels/fast.cu`: the 16-byte copy ceiling and the vectorized transposes
/// (kernels/fast.toml, which also declares the memcpy and cuBLAS baselines).
pub const FAST_SOURCE: &str = include_str!("../../../kernels/fast.cu");
pub const FAST_PATH: &str = "kernels/fast.cu";

/// `kernels/verify.cu`: klab's device checker and input generator (not a lab kernel).
pub const VERIFY_SOURCE: &str = include_str!("../../../kernels/verify.cu");
pub const VERIFY_PROGRAM: &str = "klab_verify.cu";
