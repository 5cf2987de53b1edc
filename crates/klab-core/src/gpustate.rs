//! GPU state observed around a timed block (read through NVML by the runtime layer), and
//! the rule that flags a block whose conditions moved.

use serde::{Deserialize, Serialize};

/// One observation. Fields NVML could not read are `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct GpuState {
    pub utc: String,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    /// Performance state, 0 (P0) is the highest.
    pub pstate: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    pub power_draw_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    /// Active clock-event (throttle) reasons, as NVML names them.
    pub clock_event_reasons: Vec<String>,
    /// Why NVML could not be read, when it could not.
    pub error: Option<String>,
}

/// Reasons that mean the clocks were held down by power or heat.
pub const CAPPING_REASONS: [&str; 5] = [
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
];

/// Most an SM clock may move across a block before the block is flagged.
pub const SM_CLOCK_TOLERANCE: f64 = 0.05;

/// The state before and after one timed block, and what in it deserves a flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockState {
    pub label: String,
    pub before: GpuState,
    pub after: GpuState,
    pub flags: Vec<String>,
}

impl BlockState {
    pub fn new(label: impl Into<String>, before: GpuState, after: GpuState) -> BlockState {
        let flags = flags(&before, &after);
        BlockState {
            label: label.into(),
            before,
            after,
            flags,
        }
    }
}

/// Flags for a block: power or thermal capping in either observation, an SM clock that
/// moved more than 5%, a device that changed, or state that could not be read.
pub fn flags(before: &GpuState, after: &GpuState) -> Vec<String> {
    let mut out = Vec::new();
    for (when, s) in [("before", before), ("after", after)] {
        if let Some(e) = &s.error {
            out.push(format!("state unreadable {when}: {e}"));
        }
        for r in &s.clock_event_reasons {
            if CAPPING_REASONS.contains(&r.as_str()) {
                out.push(format!("{r} {when}"));
            }
        }
    }
    if let (Some(a), Some(b)) = (before.sm_clock_mhz, after.sm_clock_mhz) {
        let base = f64::from(a.max(1));
        let moved = (f64::from(b) - f64::from(a)).abs() / base;
        if moved > SM_CLOCK_TOLERANCE {
            out.push(format!(
                "SM clock moved {:.1}% ({a} -> {b} MHz)",
                100.0 * moved
            ));
        }
    }
    if before.uuid.is_some() && after.uuid.is_some() && before.uuid != after.uuid {
        out.push("device UUID changed".to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(sm: u32, reasons: &[&str]) -> GpuState {
        GpuState {
            uuid: Some("GPU-x".into()),
            sm_clock_mhz: Some(sm),
            clock_event_reasons: reasons.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn steady_blocks_have_no_flags() {
        assert!(flags(&st(1980, &["gpu_idle"]), &st(1980, &[])).is_empty());
        assert!(
            flags(&st(1980, &[]), &st(1900, &[])).is_empty(),
            "4% is inside tolerance"
        );
    }

    #[test]
    fn capping_clock_moves_and_unreadable_state_are_flagged() {
        let f = flags(&st(1980, &[]), &st(1755, &["sw_power_cap"]));
        assert_eq!(
            f,
            [
                "sw_power_cap after",
                "SM clock moved 11.4% (1980 -> 1755 MHz)"
            ]
        );
        let f = flags(&st(1980, &["hw_thermal_slowdown"]), &st(1980, &[]));
        assert_eq!(f, ["hw_thermal_slowdown before"]);
        let bad = GpuState {
            error: Some("NVML not found".into()),
            ..Default::default()
        };
        assert_eq!(flags(&bad, &bad).len(), 2);
        let mut other = st(1980, &[]);
        other.uuid = Some("GPU-y".into());
        assert_eq!(flags(&st(1980, &[]), &other), ["device UUID changed"]);
    }
}
