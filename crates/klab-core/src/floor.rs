//! The physical floor: the shortest time in which a device can do a launch's declared work.
//!
//! A launch must move its declared useful bytes and perform its declared FLOPs. Bytes that
//! cannot stay in L2 come from memory at no more than the theoretical HBM peak
//! (2 x memory clock x bus width); up to one L2 of them may be served by L2, at no more than
//! the L2 ceiling klab measures with its own read kernel times [`L2_HEADROOM`] (klab's
//! kernel need not be the fastest possible reader); the FLOPs take at least FLOPs / the
//! device's fastest arithmetic rate (dense tensor cores on the narrowest type, since klab
//! does not know which units a kernel uses). The floor is the larger of the memory and the
//! arithmetic time: every rate is an upper bound and every term a lower one, so an honest
//! kernel cannot be faster. The L2 share is granted in every regime: klab's invalidation
//! writes the outputs just before each launch, and the flushed regime's scrub is no proof
//! that every line left L2.
//!
//! A median below the floor is a failed gate (`klab_engine::timing::Measurement::gate_failure`):
//! the timed launches cannot have done the declared work.

use serde::{Deserialize, Serialize};

/// The factor on the measured L2 ceiling: a kernel better than klab's reader may read L2
/// faster than klab measured.
pub const L2_HEADROOM: f64 = 1.5;

/// The fastest rates a device allows, and how each was obtained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceRates {
    /// Theoretical HBM peak, GB/s (10^9 bytes per second).
    pub hbm_gb_s: f64,
    /// L2 read bandwidth klab measured with its own kernel, GB/s (before the headroom).
    pub l2_measured_gb_s: f64,
    /// How the L2 ceiling was measured.
    pub l2_method: String,
    pub l2_bytes: u64,
    /// The fastest arithmetic rate, operations per second; absent when klab has no entry
    /// for the architecture (the floor is then the memory time alone).
    pub peak_ops_per_s: Option<f64>,
    /// Where the arithmetic rate comes from.
    pub ops_method: String,
}

/// The floor of one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Floor {
    /// The floor itself: the larger of the two times below, microseconds.
    pub us: f64,
    /// The declared bytes at HBM and L2 speed, microseconds.
    pub memory_us: f64,
    /// The declared FLOPs at the fastest arithmetic rate, microseconds (0 without a rate).
    pub compute_us: f64,
    pub useful_bytes: u64,
    pub flops: u64,
    pub rates: DeviceRates,
}

impl Floor {
    /// The floor of a launch that moves `useful_bytes` and performs `flops` on a device with
    /// `rates`.
    pub fn of(useful_bytes: u64, flops: u64, rates: &DeviceRates) -> Floor {
        let bytes = useful_bytes as f64;
        let in_l2 = bytes.min(rates.l2_bytes as f64);
        let l2_rate = rates.l2_measured_gb_s * L2_HEADROOM;
        // A device that reports no memory clock has no HBM peak: no floor from it, rather
        // than an infinite one that every kernel would breach.
        let hbm_s = if rates.hbm_gb_s.is_finite() && rates.hbm_gb_s > 0.0 {
            (bytes - in_l2) / (rates.hbm_gb_s * 1e9)
        } else {
            0.0
        };
        let memory_s = hbm_s
            + if l2_rate > 0.0 {
                in_l2 / (l2_rate * 1e9)
            } else {
                0.0
            };
        let compute_s = match rates.peak_ops_per_s {
            Some(r) if r > 0.0 => flops as f64 / r,
            _ => 0.0,
        };
        Floor {
            us: 1e6 * memory_s.max(compute_s),
            memory_us: 1e6 * memory_s,
            compute_us: 1e6 * compute_s,
            useful_bytes,
            flops,
            rates: rates.clone(),
        }
    }

    /// Whether a median of `median_us` is impossible on this device.
    pub fn breached_by(&self, median_us: f64) -> bool {
        median_us < self.us
    }

    /// `floor 14.2 us (memory 14.2 us: 134217728 B, 62914560 of them at L2 speed; compute 0.0 us)`.
    pub fn describe(&self) -> String {
        format!(
            "floor {:.3} us (memory {:.3} us for {} B at HBM {:.0} GB/s, up to {} B of them at {:.1} x the measured L2 {:.0} GB/s; compute {:.3} us for {} FLOPs)",
            self.us,
            self.memory_us,
            self.useful_bytes,
            self.rates.hbm_gb_s,
            self.rates.l2_bytes.min(self.useful_bytes),
            L2_HEADROOM,
            self.rates.l2_measured_gb_s,
            self.compute_us,
            self.flops
        )
    }

    /// The gate's line for a median below the floor.
    pub fn breach_line(&self, median_us: f64) -> String {
        format!(
            "faster than this device allows: the timed launches cannot have done the declared work (median {median_us:.3} us < {})",
            self.describe()
        )
    }
}

/// The fastest dense arithmetic rate per SM per clock, in operations, by compute capability:
/// the tensor cores on their narrowest type (FP8 and INT8 on Hopper, INT8 on the A100),
/// from NVIDIA's published peaks. `None` where klab has no entry.
pub fn peak_ops_per_sm_clock(cc: (u32, u32)) -> Option<u32> {
    match cc {
        (8, 0) => Some(4096),
        (9, 0) => Some(8192),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> DeviceRates {
        DeviceRates {
            hbm_gb_s: 4800.0,
            l2_measured_gb_s: 10_000.0,
            l2_method: "test".into(),
            l2_bytes: 60 << 20,
            peak_ops_per_s: Some(1.98e15),
            ops_method: "test".into(),
        }
    }

    #[test]
    fn bytes_beyond_l2_go_at_hbm_speed_and_the_rest_at_the_l2_ceiling_with_headroom() {
        let r = h200();
        let f = Floor::of(134_217_728, 0, &r);
        let l2 = (60u64 << 20) as f64;
        let want = (134_217_728.0 - l2) / 4.8e12 + l2 / 15e12;
        assert!((f.us - 1e6 * want).abs() < 1e-9, "{}", f.us);
        assert_eq!(f.compute_us, 0.0);
        // A small footprint is all L2.
        let f = Floor::of(1 << 20, 0, &r);
        assert!((f.us - 1e6 * (1u64 << 20) as f64 / 15e12).abs() < 1e-9);
    }

    #[test]
    fn flops_floor_wins_for_compute_bound_work_and_absent_rates_give_none() {
        let r = h200();
        let f = Floor::of(3 * 4 * 4096 * 4096, 2 * 4096u64.pow(3), &r);
        assert!(f.compute_us > f.memory_us);
        assert_eq!(f.us, f.compute_us);
        assert!(f.breached_by(f.us * 0.99) && !f.breached_by(f.us));
        let mut r = h200();
        r.peak_ops_per_s = None;
        assert_eq!(Floor::of(0, 1 << 40, &r).us, 0.0);
        assert!(Floor::of(4, 0, &r)
            .breach_line(0.0)
            .starts_with("faster than this device allows"));
    }

    #[test]
    fn an_unknown_hbm_peak_gives_no_memory_floor_not_an_infinite_one() {
        let mut r = h200();
        r.hbm_gb_s = 0.0;
        let f = Floor::of(1 << 30, 0, &r);
        // Only the share L2 could serve keeps its floor.
        let l2 = (60u64 << 20) as f64;
        assert!((f.us - 1e6 * l2 / 15e12).abs() < 1e-9, "{}", f.us);
    }

    #[test]
    fn hopper_and_ampere_have_entries_and_others_none() {
        assert_eq!(peak_ops_per_sm_clock((9, 0)), Some(8192));
        assert_eq!(peak_ops_per_sm_clock((8, 0)), Some(4096));
        assert_eq!(peak_ops_per_sm_clock((7, 5)), None);
    }
}
