//! Launch plans and their validation against a device's limits.
//!
//! A plan that cannot run must be an error that names the limit it breaks, never a launch
//! that silently does nothing (seed 004: 64 x 64 and 128 x 128 blocks recorded zero kernels).

use serde::{Deserialize, Serialize};

use klab_core::device::{
    DeviceLimits, Dim3, KernelResources, CUDA_MAX_BLOCK_DIM, CUDA_MAX_THREADS_PER_BLOCK,
};

/// Why `block` cannot launch on any CUDA device, if it cannot: a zero dimension, a
/// dimension or a thread count above the limits every device shares. What a manifest
/// declares is checked here, before any device is asked ([`validate`] has its own).
pub fn block_problem(block: Dim3) -> Option<String> {
    for ((axis, value), (_, limit)) in block.axes().into_iter().zip(CUDA_MAX_BLOCK_DIM.axes()) {
        if value == 0 {
            return Some(format!("{axis} is 0; every dimension is at least 1"));
        }
        if value > limit {
            return Some(format!(
                "{axis} is {value}, above {limit}, the most threads along {axis} any CUDA device allows (MAX_BLOCK_DIM_{})",
                axis.to_ascii_uppercase()
            ));
        }
    }
    let threads = u64::from(block.x)
        .checked_mul(u64::from(block.y))
        .and_then(|t| t.checked_mul(u64::from(block.z)))
        .unwrap_or(u64::MAX);
    (threads > u64::from(CUDA_MAX_THREADS_PER_BLOCK)).then(|| {
        format!(
            "{block} is {threads} threads, above {CUDA_MAX_THREADS_PER_BLOCK}, the most any CUDA device allows in a block (MAX_THREADS_PER_BLOCK)"
        )
    })
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchPlan {
    pub grid: Dim3,
    pub block: Dim3,
    pub dynamic_shared_bytes: u32,
}

impl LaunchPlan {
    /// The seed's transpose geometry: `tile x block_rows` threads per block, one block per
    /// `tile x tile` tile, `ceil(n / tile)` blocks along each axis.
    pub fn tiled_2d(n: u64, tile: u32, block_rows: u32) -> LaunchPlan {
        let blocks = n.div_ceil(u64::from(tile.max(1)));
        let blocks = u32::try_from(blocks).unwrap_or(u32::MAX);
        LaunchPlan {
            grid: Dim3::new(blocks, blocks, 1),
            block: Dim3::new(tile, block_rows, 1),
            dynamic_shared_bytes: 0,
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "grid {}, block {} ({} threads), dynamic shared {} B",
            self.grid,
            self.block,
            self.block.product(),
            self.dynamic_shared_bytes
        )
    }
}

/// Why a plan cannot run. Each message names the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("launch plan has a zero {what} dimension ({dims}): nothing would run")]
    ZeroDimension { what: &'static str, dims: Dim3 },
    #[error("block {block} has {threads} threads, over the device limit of {limit} threads per block (MAX_THREADS_PER_BLOCK)")]
    TooManyThreads {
        block: Dim3,
        threads: u64,
        limit: u32,
    },
    #[error("block {axis} dimension {value} exceeds the device limit {limit} (MAX_BLOCK_DIM_{axis_upper})")]
    BlockDim {
        axis: char,
        axis_upper: char,
        value: u32,
        limit: u32,
    },
    #[error("grid {axis} dimension {value} exceeds the device limit {limit} (MAX_GRID_DIM_{axis_upper})")]
    GridDim {
        axis: char,
        axis_upper: char,
        value: u32,
        limit: u32,
    },
    #[error("kernel {kernel} can run at most {limit} threads per block with its {registers} registers; the plan asks for {threads} (function attribute MAX_THREADS_PER_BLOCK)")]
    KernelThreads {
        kernel: String,
        registers: u32,
        threads: u64,
        limit: u32,
    },
    #[error("block needs {total} B of shared memory ({static_bytes} static + {dynamic} dynamic), over the device limit of {limit} B per block ({which})")]
    SharedMemory {
        total: u64,
        static_bytes: u32,
        dynamic: u32,
        limit: u32,
        which: &'static str,
    },
}

/// Check `plan` against the device's limits and, when known, the kernel's own.
///
/// Shared memory is held to the opted-in limit: a block past the default one runs once its
/// kernel's dynamic limit is raised (cuFuncSetAttribute), as a program using that much
/// does; [`needs_opt_in`] says when.
pub fn validate(
    plan: &LaunchPlan,
    limits: &DeviceLimits,
    kernel: Option<&KernelResources>,
) -> Result<(), PlanError> {
    for (what, dims) in [("grid", plan.grid), ("block", plan.block)] {
        if dims.product() == 0 {
            return Err(PlanError::ZeroDimension { what, dims });
        }
    }
    let threads = plan.block.product();
    if threads > u64::from(limits.max_threads_per_block) {
        return Err(PlanError::TooManyThreads {
            block: plan.block,
            threads,
            limit: limits.max_threads_per_block,
        });
    }
    for ((axis, value), (_, limit)) in plan
        .block
        .axes()
        .into_iter()
        .zip(limits.max_block_dim.axes())
    {
        if value > limit {
            return Err(PlanError::BlockDim {
                axis,
                axis_upper: axis.to_ascii_uppercase(),
                value,
                limit,
            });
        }
    }
    for ((axis, value), (_, limit)) in plan.grid.axes().into_iter().zip(limits.max_grid_dim.axes())
    {
        if value > limit {
            return Err(PlanError::GridDim {
                axis,
                axis_upper: axis.to_ascii_uppercase(),
                value,
                limit,
            });
        }
    }
    let static_bytes = kernel.map(|k| k.static_shared_bytes).unwrap_or(0);
    if let Some(k) = kernel {
        if let Some(limit) = k.max_threads_per_block {
            if threads > u64::from(limit) {
                return Err(PlanError::KernelThreads {
                    kernel: k.kernel.clone(),
                    registers: k.registers,
                    threads,
                    limit,
                });
            }
        }
    }
    let total = shared_bytes(plan, kernel);
    // A device reporting no opt-in (older drivers) has only the default limit.
    let (limit, which) = if limits.max_shared_per_block_optin > limits.max_shared_per_block {
        (
            limits.max_shared_per_block_optin,
            "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
        )
    } else {
        (limits.max_shared_per_block, "MAX_SHARED_MEMORY_PER_BLOCK")
    };
    if total > u64::from(limit) {
        return Err(PlanError::SharedMemory {
            total,
            static_bytes,
            dynamic: plan.dynamic_shared_bytes,
            limit,
            which,
        });
    }
    Ok(())
}

/// Whether `plan`'s block needs more shared memory than a kernel gets without opting in.
pub fn needs_opt_in(
    plan: &LaunchPlan,
    limits: &DeviceLimits,
    kernel: Option<&KernelResources>,
) -> bool {
    shared_bytes(plan, kernel) > u64::from(limits.max_shared_per_block)
}

fn shared_bytes(plan: &LaunchPlan, kernel: Option<&KernelResources>) -> u64 {
    let static_bytes = kernel.map(|k| k.static_shared_bytes).unwrap_or(0);
    u64::from(static_bytes) + u64::from(plan.dynamic_shared_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn square_block(tile: u32) -> LaunchPlan {
        LaunchPlan {
            grid: Dim3::new(16, 16, 1),
            block: Dim3::new(tile, tile, 1),
            dynamic_shared_bytes: 0,
        }
    }

    #[test]
    fn seed_geometry_is_valid() {
        let plan = LaunchPlan::tiled_2d(4096, 32, 8);
        assert_eq!(plan.grid, Dim3::new(128, 128, 1));
        assert_eq!(plan.block, Dim3::new(32, 8, 1));
        validate(&plan, &DeviceLimits::hopper(), None).unwrap();
        assert_eq!(LaunchPlan::tiled_2d(33, 32, 8).grid, Dim3::new(2, 2, 1));
        assert_eq!(
            LaunchPlan::tiled_2d(46341, 32, 8).grid,
            Dim3::new(1449, 1449, 1)
        );
    }

    #[test]
    fn seed_004_tiles_of_64_and_128_are_rejected_naming_the_limit() {
        for (tile, threads) in [(64, 4096), (128, 16384)] {
            let err = validate(&square_block(tile), &DeviceLimits::hopper(), None).unwrap_err();
            assert_eq!(
                err,
                PlanError::TooManyThreads {
                    block: Dim3::new(tile, tile, 1),
                    threads,
                    limit: 1024
                }
            );
            assert!(err.to_string().contains("1024 threads per block"), "{err}");
        }
        // 32 x 32 = 1024 threads is exactly at the limit and runs.
        validate(&square_block(32), &DeviceLimits::hopper(), None).unwrap();
    }

    #[test]
    fn each_limit_is_named() {
        let l = DeviceLimits::hopper();
        let mut p = LaunchPlan::tiled_2d(4096, 32, 8);
        p.grid.y = 70_000;
        assert!(validate(&p, &l, None)
            .unwrap_err()
            .to_string()
            .contains("MAX_GRID_DIM_Y"));
        let p = LaunchPlan {
            grid: Dim3::new(1, 1, 1),
            block: Dim3::new(1, 1, 128),
            dynamic_shared_bytes: 0,
        };
        assert!(validate(&p, &l, None)
            .unwrap_err()
            .to_string()
            .contains("MAX_BLOCK_DIM_Z"));
        let p = LaunchPlan {
            grid: Dim3::new(0, 1, 1),
            block: Dim3::new(32, 8, 1),
            dynamic_shared_bytes: 0,
        };
        assert!(matches!(
            validate(&p, &l, None),
            Err(PlanError::ZeroDimension { what: "grid", .. })
        ));
        let mut p = LaunchPlan::tiled_2d(64, 32, 8);
        p.dynamic_shared_bytes = 48 * 1024;
        let k = KernelResources {
            kernel: "k".into(),
            registers: 30,
            static_shared_bytes: 4224,
            local_bytes: 0,
            max_threads_per_block: Some(1024),
            source: "driver".into(),
        };
        // 48 KiB dynamic + 4224 B static is past the default limit: it runs opted in.
        validate(&p, &l, Some(&k)).unwrap();
        assert!(needs_opt_in(&p, &l, Some(&k)));
        assert!(!needs_opt_in(&p, &l, None));
        p.dynamic_shared_bytes = l.max_shared_per_block_optin - 4224 + 1;
        let e = validate(&p, &l, Some(&k)).unwrap_err();
        assert!(
            e.to_string().contains("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            "{e}"
        );
        p.dynamic_shared_bytes -= 1;
        validate(&p, &l, Some(&k)).unwrap();
        // Without an opt-in limit above the default, the default is the limit.
        let old = DeviceLimits {
            max_shared_per_block_optin: l.max_shared_per_block,
            ..l.clone()
        };
        let e = validate(&p, &old, Some(&k)).unwrap_err();
        assert!(
            e.to_string().contains("(MAX_SHARED_MEMORY_PER_BLOCK)"),
            "{e}"
        );
        let k = KernelResources {
            max_threads_per_block: Some(128),
            registers: 255,
            ..k
        };
        let e = validate(&LaunchPlan::tiled_2d(64, 32, 8), &l, Some(&k)).unwrap_err();
        assert!(
            matches!(
                e,
                PlanError::KernelThreads {
                    limit: 128,
                    threads: 256,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_block_past_the_limits_of_every_device_is_named_by_the_limit() {
        let huge = 2_147_483_648;
        // 2^31 cubed wraps a u64 to 0: the product saturates instead.
        assert_eq!(Dim3::new(huge, huge, huge).product(), u64::MAX);
        assert_eq!(Dim3::new(32, 8, 1).product(), 256);
        assert_eq!(
            block_problem(Dim3::new(huge, huge, huge)).as_deref(),
            Some("x is 2147483648, above 1024, the most threads along x any CUDA device allows (MAX_BLOCK_DIM_X)")
        );
        assert_eq!(
            block_problem(Dim3::new(1, 1, 65)).as_deref(),
            Some("z is 65, above 64, the most threads along z any CUDA device allows (MAX_BLOCK_DIM_Z)")
        );
        assert_eq!(
            block_problem(Dim3::new(32, 33, 1)).as_deref(),
            Some("32x33x1 is 1056 threads, above 1024, the most any CUDA device allows in a block (MAX_THREADS_PER_BLOCK)")
        );
        assert_eq!(
            block_problem(Dim3::new(32, 0, 1)).as_deref(),
            Some("y is 0; every dimension is at least 1")
        );
        assert_eq!(block_problem(Dim3::new(1024, 1, 1)), None);
        assert_eq!(block_problem(Dim3::new(16, 1, 64)), None);
        // The device check is not fooled by the wrap either.
        let plan = LaunchPlan {
            grid: Dim3::new(1, 1, 1),
            block: Dim3::new(huge, huge, huge),
            dynamic_shared_bytes: 0,
        };
        assert!(matches!(
            validate(&plan, &DeviceLimits::hopper(), None),
            Err(PlanError::TooManyThreads {
                threads: u64::MAX,
                ..
            })
        ));
    }
}
