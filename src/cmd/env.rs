//! `klab env`: what CUDA stack this machine has.

use std::path::PathBuf;
use std::process::ExitCode;

use klab_core::device::DeviceFacts;
use serde::Serialize;

use klab_cuda::device::Device;
use klab_cuda::{nvrtc, probe};

use crate::cli::EnvArgs;
use crate::output::{self, Report};

/// What `klab env` reports (fields in the order its JSON has always had them).
#[derive(Serialize)]
struct EnvReport {
    /// The device's facts as a JSON object (its keys sorted, as they always were).
    device: Option<serde_json::Value>,
    #[serde(skip)]
    facts: Option<DeviceFacts>,
    device_error: Option<String>,
    driver_loadable: bool,
    klab_version: &'static str,
    nvrtc_from_checkout: Option<PathBuf>,
    nvrtc_loadable: bool,
    nvrtc_version: Option<String>,
}

impl Report for EnvReport {
    fn human(&self) -> String {
        let mut out = format!("klab {}\n", self.klab_version);
        out += &format!(
            "libcuda: {}\n",
            if self.driver_loadable {
                "loadable"
            } else {
                "not found"
            }
        );
        out += &format!(
            "NVRTC: {}{}\n",
            self.nvrtc_version.as_deref().unwrap_or("not found"),
            self.nvrtc_from_checkout
                .as_ref()
                .map(|p| format!(" (this checkout's, {})", p.display()))
                .unwrap_or_default()
        );
        if let Some(d) = &self.facts {
            out += &format!("{}\n", d.describe());
        }
        out
    }
}

pub fn run(args: EnvArgs) -> anyhow::Result<ExitCode> {
    let device = Device::open(args.device);
    let report = EnvReport {
        klab_version: env!("CARGO_PKG_VERSION"),
        driver_loadable: probe::driver_present(),
        nvrtc_loadable: probe::nvrtc_present(),
        nvrtc_version: nvrtc::version().ok(),
        nvrtc_from_checkout: probe::checkout_nvrtc().map(PathBuf::from),
        device: match &device {
            Ok(d) => Some(serde_json::to_value(d.facts())?),
            Err(_) => None,
        },
        facts: device.as_ref().ok().map(|d| d.facts().clone()),
        device_error: device.as_ref().err().map(|e| e.to_string()),
    };
    output::emit(&report, args.output.format())?;
    match device {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
    }
}
