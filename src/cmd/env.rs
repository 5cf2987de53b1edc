//! `klab env`: what CUDA stack this machine has.

use std::process::ExitCode;

use klab_cuda::device::Device;
use klab_cuda::{nvrtc, probe};

use crate::cli::EnvArgs;

pub fn run(args: EnvArgs) -> anyhow::Result<ExitCode> {
    let device = Device::open(args.device);
    let nvrtc_version = nvrtc::version().ok();
    if args.json {
        let v = serde_json::json!({
            "klab_version": env!("CARGO_PKG_VERSION"),
            "driver_loadable": probe::driver_present(),
            "nvrtc_loadable": probe::nvrtc_present(),
            "nvrtc_version": nvrtc_version,
            "nvrtc_from_checkout": probe::checkout_nvrtc(),
            "device": device.as_ref().ok().map(|d| d.facts()),
            "device_error": device.as_ref().err().map(|e| e.to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("klab {}", env!("CARGO_PKG_VERSION"));
        println!(
            "libcuda: {}",
            if probe::driver_present() {
                "loadable"
            } else {
                "not found"
            }
        );
        println!(
            "NVRTC: {}{}",
            nvrtc_version.as_deref().unwrap_or("not found"),
            probe::checkout_nvrtc()
                .map(|p| format!(" (this checkout's, {})", p.display()))
                .unwrap_or_default()
        );
        if let Ok(d) = &device {
            println!("{}", d.facts().describe());
        }
    }
    match device {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
    }
}
