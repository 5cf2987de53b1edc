//! GPU state through NVML (libnvidia-ml, loaded at run time). klab only reads: it never
//! changes clocks, power limits or modes.

use klab_core::artifact::utc_timestamp;
use klab_core::gpustate::GpuState;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{
    Clock, PerformancePolicy, PerformanceState, Sampling, TemperatureSensor,
};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::struct_wrappers::device::Sample;
use nvml_wrapper::Nvml;

/// A reader of one device's state, matched by UUID (CUDA ordinals and NVML indexes can
/// differ under CUDA_VISIBLE_DEVICES).
pub struct StateReader {
    nvml: Option<Nvml>,
    uuid: String,
    error: Option<String>,
    /// When the previous reading was taken (CPU microseconds since the epoch, NVML's clock
    /// for its samples): a reading holds the SM clock samples taken after it.
    last_read_us: std::cell::Cell<Option<u64>>,
}

impl StateReader {
    /// Never fails: without NVML every observation carries the reason instead.
    pub fn new(uuid: &str) -> StateReader {
        match Nvml::init() {
            Ok(nvml) => StateReader {
                nvml: Some(nvml),
                uuid: uuid.to_string(),
                error: None,
                last_read_us: Default::default(),
            },
            Err(e) => StateReader {
                nvml: None,
                uuid: uuid.to_string(),
                error: Some(format!("NVML unavailable: {e}")),
                last_read_us: Default::default(),
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
        // A limit of 0 (a virtualised device that enforces none) is no limit read.
        s.power_limit_w = device
            .enforced_power_limit()
            .ok()
            .filter(|&mw| mw > 0)
            .map(|mw| f64::from(mw) / 1000.0);
        match device.current_throttle_reasons() {
            Ok(r) => s.clock_event_reasons = reason_names(r),
            Err(e) => s.error = Some(format!("clock-event reasons unreadable: {e}")),
        }
        // Counters and samples a device may not offer: absent, not an error.
        let violation = |p| device.violation_status(p).ok().map(|v| v.violation_time);
        s.power_capped_ns = violation(PerformancePolicy::Power);
        s.thermal_capped_ns = violation(PerformancePolicy::Thermal);
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        if let Some(since) = self.last_read_us.replace(Some(now_us)) {
            s.sm_clock_samples_mhz = device
                .samples(Sampling::ProcessorClock, since)
                .map(|v| clock_samples(&v, since))
                .unwrap_or_default();
        }
        s
    }
}

/// NVML's clock samples taken after `since_us`, in MHz, in time order.
fn clock_samples(samples: &[Sample], since_us: u64) -> Vec<u32> {
    let mut taken: Vec<(u64, u32)> = samples
        .iter()
        .filter(|s| s.timestamp > since_us)
        .filter_map(|s| match s.value {
            SampleValue::U32(v) => Some((s.timestamp, v)),
            SampleValue::U64(v) => u32::try_from(v).ok().map(|v| (s.timestamp, v)),
            _ => None,
        })
        .collect();
    taken.sort_unstable();
    taken.into_iter().map(|(_, v)| v).collect()
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
    fn clock_samples_are_those_after_the_previous_reading_in_time_order() {
        let at = |timestamp, value| Sample { timestamp, value };
        let got = clock_samples(
            &[
                at(30, SampleValue::U32(1700)),
                at(10, SampleValue::U32(1980)),
                at(20, SampleValue::U64(1800)),
                at(40, SampleValue::F64(1.0)),
            ],
            10,
        );
        assert_eq!(got, [1800, 1700]);
    }

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
