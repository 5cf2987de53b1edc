//! GPU state through NVML (libnvidia-ml, loaded at run time). klab only reads: it never
//! changes clocks, power limits or modes.

use klab_core::artifact::utc_timestamp;
use klab_core::gpustate::GpuState;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, PerformanceState, TemperatureSensor};
use nvml_wrapper::Nvml;

/// A reader of one device's state, matched by UUID (CUDA ordinals and NVML indexes can
/// differ under CUDA_VISIBLE_DEVICES).
pub struct StateReader {
    nvml: Option<Nvml>,
    uuid: String,
    error: Option<String>,
}

impl StateReader {
    /// Never fails: without NVML every observation carries the reason instead.
    pub fn new(uuid: &str) -> StateReader {
        match Nvml::init() {
            Ok(nvml) => StateReader {
                nvml: Some(nvml),
                uuid: uuid.to_string(),
                error: None,
            },
            Err(e) => StateReader {
                nvml: None,
                uuid: uuid.to_string(),
                error: Some(format!("NVML unavailable: {e}")),
            },
        }
    }

    /// One observation now.
    pub fn read(&self) -> GpuState {
        let mut s = GpuState {
            utc: utc_timestamp(),
            ..Default::default()
        };
        let Some(nvml) = &self.nvml else {
            s.error = self.error.clone();
            return s;
        };
        let device = match nvml.device_by_uuid(self.uuid.as_str()) {
            Ok(d) => d,
            Err(e) => {
                s.error = Some(format!("NVML has no device {}: {e}", self.uuid));
                return s;
            }
        };
        s.uuid = device.uuid().ok();
        s.pci_bus_id = device.pci_info().ok().map(|p| p.bus_id);
        s.pstate = device.performance_state().ok().and_then(pstate_number);
        s.sm_clock_mhz = device.clock_info(Clock::SM).ok();
        s.memory_clock_mhz = device.clock_info(Clock::Memory).ok();
        s.temperature_c = device.temperature(TemperatureSensor::Gpu).ok();
        s.power_draw_w = device.power_usage().ok().map(|mw| f64::from(mw) / 1000.0);
        s.power_limit_w = device
            .enforced_power_limit()
            .ok()
            .map(|mw| f64::from(mw) / 1000.0);
        match device.current_throttle_reasons() {
            Ok(r) => s.clock_event_reasons = reason_names(r),
            Err(e) => s.error = Some(format!("clock-event reasons unreadable: {e}")),
        }
        s
    }
}

fn pstate_number(p: PerformanceState) -> Option<u32> {
    use PerformanceState::*;
    Some(match p {
        Zero => 0,
        One => 1,
        Two => 2,
        Three => 3,
        Four => 4,
        Five => 5,
        Six => 6,
        Seven => 7,
        Eight => 8,
        Nine => 9,
        Ten => 10,
        Eleven => 11,
        Twelve => 12,
        Thirteen => 13,
        Fourteen => 14,
        Fifteen => 15,
        Unknown => return None,
    })
}

/// NVML's clock-event reasons as the names klab-core's flag rule uses.
pub fn reason_names(r: ThrottleReasons) -> Vec<String> {
    let table = [
        (ThrottleReasons::GPU_IDLE, "gpu_idle"),
        (
            ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
            "applications_clocks_setting",
        ),
        (ThrottleReasons::SW_POWER_CAP, "sw_power_cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hw_slowdown"),
        (ThrottleReasons::SYNC_BOOST, "sync_boost"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
        (
            ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
            "hw_power_brake_slowdown",
        ),
        (
            ThrottleReasons::DISPLAY_CLOCK_SETTING,
            "display_clock_setting",
        ),
    ];
    table
        .iter()
        .filter(|(bit, _)| r.contains(*bit))
        .map(|(_, name)| name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use klab_core::gpustate::CAPPING_REASONS;

    #[test]
    fn reason_names_cover_the_capping_reasons() {
        let all = reason_names(ThrottleReasons::all());
        for r in CAPPING_REASONS {
            assert!(all.iter().any(|n| n == r), "{r} has no NVML bit");
        }
        assert_eq!(
            reason_names(ThrottleReasons::SW_POWER_CAP),
            ["sw_power_cap"]
        );
        assert!(reason_names(ThrottleReasons::empty()).is_empty());
    }

    #[test]
    fn without_nvml_an_observation_says_why() {
        let r = StateReader::new("GPU-00000000-0000-0000-0000-000000000000");
        let s = r.read();
        assert!(!s.utc.is_empty());
        if r.nvml.is_none() {
            assert!(s.error.as_deref().unwrap().starts_with("NVML unavailable"));
            assert!(s.sm_clock_mhz.is_none());
        } else {
            assert!(s.error.is_some(), "no device has the all-zero UUID");
        }
    }
}
