//! Opening the device and building the transpose module: shared by the GPU commands.

use klab_cuda::device::Device;
use klab_cuda::gpu::CudaBackend;
use klab_cuda::nvrtc::{self, Cache, CompileSpec, Compiled};
use klab_engine::verify::VerifyPolicy;

/// Compile (or fetch from the cache) and report cache notes on stderr.
pub fn compile(arch: &str) -> anyhow::Result<Compiled> {
    let compiled = nvrtc::compile(&CompileSpec::transpose_lab(arch), &Cache::from_env())?;
    for note in &compiled.notes {
        eprintln!("klab: {note}");
    }
    Ok(compiled)
}

/// Device open, module compiled and loaded.
pub fn open_transpose(
    ordinal: u32,
    policy: VerifyPolicy,
) -> anyhow::Result<(CudaBackend, Compiled)> {
    let device = Device::open(ordinal)?;
    klab_cuda::probe::require_nvrtc()?;
    let compiled = compile(&device.facts().arch())?;
    let backend = CudaBackend::new(device, &compiled, policy)?;
    Ok((backend, compiled))
}
