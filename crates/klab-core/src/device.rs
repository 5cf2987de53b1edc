//! Facts about a device and a compiled kernel, as data (filled in by the runtime layer).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A launch's grid or block extent, or a device's limit on one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Dim3 {
    pub const fn new(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }

    /// `x * y * z`, saturated at `u64::MAX` (above every limit): three u32 values can
    /// overflow 64 bits, and a product that wrapped could read as 0.
    pub fn product(&self) -> u64 {
        u64::from(self.x)
            .saturating_mul(u64::from(self.y))
            .saturating_mul(u64::from(self.z))
    }

    /// The three extents with their axis letters, for messages that name an axis.
    pub fn axes(&self) -> [(char, u32); 3] {
        [('x', self.x), ('y', self.y), ('z', self.z)]
    }
}

/// Most threads in a block on any CUDA device (every compute capability since 2.0).
pub const CUDA_MAX_THREADS_PER_BLOCK: u32 = 1024;
/// Most threads along each axis of a block on any CUDA device.
pub const CUDA_MAX_BLOCK_DIM: Dim3 = Dim3::new(1024, 1024, 64);

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.x, self.y, self.z)
    }
}

/// The limits a launch plan is checked against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceLimits {
    pub max_threads_per_block: u32,
    pub max_block_dim: Dim3,
    pub max_grid_dim: Dim3,
    /// Shared memory a block may use without opting in (static + dynamic).
    pub max_shared_per_block: u32,
    /// Shared memory a block may use after opting in to a larger dynamic allocation.
    pub max_shared_per_block_optin: u32,
    pub warp_size: u32,
}

impl DeviceLimits {
    /// The compute capability 9.0 limits (H100/H200), for tests and CPU-only reports.
    pub fn hopper() -> DeviceLimits {
        DeviceLimits {
            max_threads_per_block: CUDA_MAX_THREADS_PER_BLOCK,
            max_block_dim: CUDA_MAX_BLOCK_DIM,
            max_grid_dim: Dim3::new(2_147_483_647, 65_535, 65_535),
            max_shared_per_block: 49_152,
            max_shared_per_block_optin: 232_448,
            warp_size: 32,
        }
    }
}

/// Who a device is and what it can do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFacts {
    pub ordinal: u32,
    pub name: String,
    pub uuid: String,
    pub compute_capability: (u32, u32),
    pub sm_count: u32,
    pub l2_bytes: u64,
    pub memory_clock_khz: u64,
    /// Maximum SM clock the driver reports (absent in records written before it was kept).
    #[serde(default)]
    pub sm_clock_khz: Option<u64>,
    pub bus_width_bits: u32,
    pub total_memory_bytes: u64,
    /// Driver API version as reported by the driver, e.g. "13.0".
    pub driver_version: String,
    /// CUDA runtime library version if one could be loaded; klab itself uses the driver API.
    pub runtime_version: Option<String>,
    pub nvrtc_version: Option<String>,
    pub limits: DeviceLimits,
}

impl DeviceFacts {
    /// Theoretical peak memory bandwidth: 2 x memory clock x bus width (double data rate).
    pub fn theoretical_peak_gb_s(&self) -> f64 {
        theoretical_peak_gb_s(self.memory_clock_khz, self.bus_width_bits)
    }

    /// Peak FP32 rate in GFLOP/s: SMs x FP32 lanes per SM x 2 (an FMA is two FLOPs) x
    /// the maximum SM clock. `None` when the clock or the architecture's lane count is
    /// unknown.
    pub fn fp32_peak_gflops(&self) -> Option<f64> {
        let lanes = fp32_lanes_per_sm(self.compute_capability)?;
        let clock = self.sm_clock_khz?;
        Some(f64::from(self.sm_count) * f64::from(lanes) * 2.0 * clock as f64 / 1e6)
    }

    /// The architecture NVRTC should compile for, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        arch_name(self.compute_capability)
    }

    /// One line for stderr.
    pub fn describe(&self) -> String {
        format!(
            "device {}: {} ({}), cc {}.{}, {} SMs, L2 {:.1} MiB, {:.1} GiB, memory {} MHz x {}-bit, peak {:.1} GB/s, driver {}, runtime {}, NVRTC {}",
            self.ordinal,
            self.name,
            self.uuid,
            self.compute_capability.0,
            self.compute_capability.1,
            self.sm_count,
            self.l2_bytes as f64 / 1048576.0,
            self.total_memory_bytes as f64 / 1073741824.0,
            self.memory_clock_khz / 1000,
            self.bus_width_bits,
            self.theoretical_peak_gb_s(),
            self.driver_version,
            self.runtime_version.as_deref().unwrap_or("not loaded"),
            self.nvrtc_version.as_deref().unwrap_or("not loaded"),
        )
    }
}

/// FP32 lanes per SM by compute capability (CUDA C++ Programming Guide, arithmetic
/// instruction throughput table); `None` for architectures klab has no entry for.
pub fn fp32_lanes_per_sm(cc: (u32, u32)) -> Option<u32> {
    match cc {
        (7, 0) | (7, 2) | (7, 5) | (8, 0) => Some(64),
        (8, 6) | (8, 7) | (8, 9) | (9, 0) | (10, _) | (12, _) => Some(128),
        _ => None,
    }
}

/// The architecture NVRTC compiles for at compute capability `cc`, e.g. `sm_90` for (9, 0).
pub fn arch_name(cc: (u32, u32)) -> String {
    format!("sm_{}{}", cc.0, cc.1)
}

/// 2 x clock (kHz) x bus width (bits) / 8, in GB/s (10^9 bytes per second).
pub fn theoretical_peak_gb_s(memory_clock_khz: u64, bus_width_bits: u32) -> f64 {
    2.0 * memory_clock_khz as f64 * 1e3 * (f64::from(bus_width_bits) / 8.0) / 1e9
}

/// Resources a compiled kernel uses, and where the numbers came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    pub kernel: String,
    pub registers: u32,
    pub static_shared_bytes: u32,
    /// Local memory per thread (spills and stack arrays).
    pub local_bytes: u32,
    /// The most threads a block of this kernel may have (registers can lower it).
    pub max_threads_per_block: Option<u32>,
    /// `driver` (function attributes of the loaded module) or `ptxas` (the compile log).
    pub source: String,
}

impl KernelResources {
    pub fn describe(&self) -> String {
        format!(
            "{}: {} registers, {} B static shared, {} B local{} [{}]",
            self.kernel,
            self.registers,
            self.static_shared_bytes,
            self.local_bytes,
            self.max_threads_per_block
                .map(|t| format!(", <= {t} threads/block"))
                .unwrap_or_default(),
            self.source
        )
    }
}

/// CSV header for a resource report.
pub const RESOURCES_CSV_HEADER: &str =
    "kernel,registers,static_shared_bytes,local_bytes,max_threads_per_block,source";

/// A resource report as CSV (header included).
pub fn resources_csv(rows: &[KernelResources]) -> String {
    let mut s = String::from(RESOURCES_CSV_HEADER);
    s.push('\n');
    for r in rows {
        s.push_str(&format!(
            "{},{},{},{},{},{}\n",
            r.kernel,
            r.registers,
            r.static_shared_bytes,
            r.local_bytes,
            r.max_threads_per_block
                .map(|t| t.to_string())
                .unwrap_or_default(),
            r.source
        ));
    }
    s
}

/// The host memory available to a new allocation (`MemAvailable` of /proc/meminfo), or
/// None where the system does not say.
pub fn host_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    let host = kb.checked_mul(1024)?;
    // A container's own limit (cgroup v2) can be far below the host's free memory.
    let read = |f: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some(match (read("memory.max"), read("memory.current")) {
        (Some(max), Some(cur)) => host.min(max.saturating_sub(cur)),
        _ => host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h200_peak_is_2_x_clock_x_bus_width() {
        // Fixture: memclk_khz=3201000 bus=6016 attr_peak_gbs=4814.3
        let p = theoretical_peak_gb_s(3_201_000, 6016);
        assert!((p - 4814.3).abs() < 0.05, "{p}");
    }

    #[test]
    fn resources_csv_has_one_row_per_kernel() {
        let r = KernelResources {
            kernel: "transpose_padded".into(),
            registers: 30,
            static_shared_bytes: 4224,
            local_bytes: 0,
            max_threads_per_block: Some(1024),
            source: "driver".into(),
        };
        assert_eq!(
            resources_csv(&[r]),
            format!("{RESOURCES_CSV_HEADER}\ntranspose_padded,30,4224,0,1024,driver\n")
        );
    }
}
