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
    /// Nanoseconds the power cap has held the clocks down since the driver started (NVML's
    /// violation counter): the difference across a block is the capping inside it, which
    /// the reasons read at its two ends can miss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_capped_ns: Option<u64>,
    /// The same for thermal limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal_capped_ns: Option<u64>,
    /// The SM clock samples NVML took since the previous reading (for the reading after a
    /// block: during the block), in MHz.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sm_clock_samples_mhz: Vec<u32>,
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

    /// Why the block's clocks were held down by power or heat (a capping reason at either
    /// end, or capping time counted inside it), or `None`.
    pub fn capped(&self) -> Option<String> {
        let why: Vec<String> = capping(&self.before, &self.after).collect();
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// The block's SM clock in MHz: the mean of NVML's samples during it, else of the two
    /// readings around it, else the one there is.
    pub fn sm_clock_mhz(&self) -> Option<f64> {
        let samples = &self.after.sm_clock_samples_mhz;
        if !samples.is_empty() {
            return Some(samples.iter().map(|&m| f64::from(m)).sum::<f64>() / samples.len() as f64);
        }
        match (self.before.sm_clock_mhz, self.after.sm_clock_mhz) {
            (Some(a), Some(b)) => Some((f64::from(a) + f64::from(b)) / 2.0),
            (a, b) => a.or(b).map(f64::from),
        }
    }
}

/// What held a block's clocks down: each capping reason NVML named at either end, and the
/// capping time its violation counters grew by across the block.
fn capping<'a>(before: &'a GpuState, after: &'a GpuState) -> impl Iterator<Item = String> + 'a {
    capping_reasons(before, "before")
        .chain(capping_reasons(after, "after"))
        .chain(capped_time(before, after))
}

fn capping_reasons<'a>(s: &'a GpuState, when: &'a str) -> impl Iterator<Item = String> + 'a {
    s.clock_event_reasons
        .iter()
        .filter(|r| CAPPING_REASONS.contains(&r.as_str()))
        .map(move |r| format!("{r} {when}"))
}

fn capped_time(before: &GpuState, after: &GpuState) -> impl Iterator<Item = String> {
    [
        ("power cap", before.power_capped_ns, after.power_capped_ns),
        (
            "thermal limit",
            before.thermal_capped_ns,
            after.thermal_capped_ns,
        ),
    ]
    .into_iter()
    .filter_map(|(what, a, b)| {
        let grew = b?.checked_sub(a?)?;
        (grew > 0).then(|| {
            format!(
                "held by the {what} for {:.3} ms during the block",
                grew as f64 / 1e6
            )
        })
    })
}

/// Flags for a block: power or thermal capping in either observation, an SM clock that
/// moved more than 5%, a device that changed, or state that could not be read.
pub fn flags(before: &GpuState, after: &GpuState) -> Vec<String> {
    let mut out = Vec::new();
    for (when, s) in [("before", before), ("after", after)] {
        if let Some(e) = &s.error {
            out.push(format!("state unreadable {when}: {e}"));
        }
        out.extend(capping_reasons(s, when));
    }
    out.extend(capped_time(before, after));
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
    let during = &after.sm_clock_samples_mhz;
    if let (Some(&lo), Some(&hi)) = (during.iter().min(), during.iter().max()) {
        if f64::from(hi - lo) / f64::from(hi.max(1)) > SM_CLOCK_TOLERANCE {
            out.push(format!("SM clock ranged {lo}-{hi} MHz during the block"));
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

    /// Capping inside a block is found from NVML's violation counters even when the reasons
    /// read at its two ends are clear; the clock samples during it give its clock.
    #[test]
    fn capping_inside_a_block_and_its_clock_come_from_the_counters_and_samples() {
        let mut before = st(1980, &[]);
        let mut after = st(1980, &[]);
        before.power_capped_ns = Some(5_000_000);
        after.power_capped_ns = Some(5_000_000);
        let steady = BlockState::new("b", before.clone(), after.clone());
        assert_eq!((steady.capped(), steady.flags.len()), (None, 0));
        after.power_capped_ns = Some(7_500_000);
        after.sm_clock_samples_mhz = vec![1980, 1700, 1800];
        let capped = BlockState::new("b", before.clone(), after.clone());
        assert_eq!(
            capped.capped().as_deref(),
            Some("held by the power cap for 2.500 ms during the block")
        );
        assert_eq!(
            capped.flags,
            [
                "held by the power cap for 2.500 ms during the block",
                "SM clock ranged 1700-1980 MHz during the block"
            ]
        );
        assert_eq!(capped.sm_clock_mhz(), Some(5480.0 / 3.0));
        assert_eq!(steady.sm_clock_mhz(), Some(1980.0));
        // A counter that went backwards (a driver restart) or is missing says nothing.
        after.power_capped_ns = Some(1);
        assert_eq!(BlockState::new("b", before.clone(), after).capped(), None);
        let thermal = BlockState::new("b", st(1980, &["hw_thermal_slowdown"]), st(1980, &[]));
        assert_eq!(
            thermal.capped().as_deref(),
            Some("hw_thermal_slowdown before")
        );
        // Records written before the counters existed read as they did.
        let old: GpuState = serde_json::from_str(
            r#"{"utc":"x","uuid":null,"pci_bus_id":null,"pstate":0,"sm_clock_mhz":1980,"memory_clock_mhz":null,"temperature_c":null,"power_draw_w":null,"power_limit_w":null,"clock_event_reasons":[],"error":null}"#,
        )
        .unwrap();
        assert_eq!(
            (old.power_capped_ns, old.sm_clock_samples_mhz.len()),
            (None, 0)
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
