//! Opening a device and reading its facts from the driver.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute as A;
use cudarc::driver::{result, sys, CudaContext};
use klab_core::device::Dim3;
use klab_core::device::{DeviceFacts, DeviceLimits};

use crate::error::DriverContext;
use crate::{nvrtc, probe, CudaError};

/// An open device: its primary context and what it is. A clone shares the context: the
/// blocks of one round, each with its own module, stream and buffers, open the device once.
#[derive(Clone)]
pub struct Device {
    pub(crate) ctx: Arc<CudaContext>,
    facts: DeviceFacts,
}

/// A device the driver knows, not yet opened: no context, nothing on the GPU. Its facts are
/// the same [`Device::open`] reads for it.
#[derive(Debug, Clone)]
pub struct Unopened {
    pub ordinal: u32,
    pub uuid: String,
    pub compute_capability: (u32, u32),
}

impl Unopened {
    /// The architecture NVRTC compiles for, as [`DeviceFacts::arch`] says it.
    pub fn arch(&self) -> String {
        klab_core::device::arch_name(self.compute_capability)
    }
}

impl Device {
    /// Open device `ordinal` and read its facts. Fails cleanly without a driver or device.
    pub fn open(ordinal: u32) -> Result<Device, CudaError> {
        Device::check(ordinal)?;
        let ctx = CudaContext::new(ordinal as usize)
            .ctx(|| format!("creating a context on device {ordinal}"))?;
        let facts = read_facts(&ctx, ordinal)?;
        Ok(Device { ctx, facts })
    }

    /// How many CUDA devices the driver reports (none: an error saying why).
    pub fn count() -> Result<u32, CudaError> {
        Device::check(0)?;
        let count = result::device::get_count().ctx(|| "counting CUDA devices".into())?;
        Ok(count.max(0) as u32)
    }

    /// Whether device `ordinal` is there to open, without opening it (no context): what a
    /// command whose children use the device asks before it makes an output folder.
    pub fn check(ordinal: u32) -> Result<(), CudaError> {
        probe::require_driver()?;
        if let Err(e) = result::init() {
            return Err(CudaError::NoDevice(format!(
                "the driver did not initialise: {}",
                crate::error::describe(&e)
            )));
        }
        let count = result::device::get_count().ctx(|| "counting CUDA devices".into())?;
        if count <= 0 {
            return Err(CudaError::NoDevice(
                "the driver loaded but reports no devices".into(),
            ));
        }
        if i64::from(ordinal) >= i64::from(count) {
            return Err(CudaError::NoDevice(format!(
                "device {ordinal} asked for, but only {count} present"
            )));
        }
        Ok(())
    }

    pub fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    /// What the driver says of device `ordinal` without a context ([`Unopened`]): enough to
    /// build its module and start reading its state before opening it.
    pub fn unopened(ordinal: u32) -> Result<Unopened, CudaError> {
        Device::check(ordinal)?;
        let dev =
            result::device::get(ordinal as i32).ctx(|| format!("getting device {ordinal}"))?;
        let attr = |a: A| -> Result<u32, CudaError> {
            // SAFETY: a device the driver just gave; the attribute is an int.
            unsafe { result::device::get_attribute(dev, a) }
                .map(|v| v.max(0) as u32)
                .ctx(|| format!("reading device {ordinal}'s attribute {a:?}"))
        };
        let uuid = result::device::get_uuid(dev).ctx(|| "reading the device UUID".into())?;
        Ok(Unopened {
            ordinal,
            uuid: uuid_string(&uuid.bytes),
            compute_capability: (
                attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
        })
    }

    /// Whether processes may hold contexts on device `ordinal` at the same time: its compute
    /// mode is the default one (not exclusive-process, not prohibited). Asks the driver
    /// without a context.
    pub fn shares_processes(ordinal: u32) -> Result<bool, CudaError> {
        Device::check(ordinal)?;
        let dev =
            result::device::get(ordinal as i32).ctx(|| format!("getting device {ordinal}"))?;
        // SAFETY: a device the driver just gave; the attribute is an int.
        let mode =
            unsafe { result::device::get_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_MODE) }
                .ctx(|| format!("reading device {ordinal}'s compute mode"))?;
        Ok(mode == sys::CUcomputemode::CU_COMPUTEMODE_DEFAULT as i32)
    }

    /// How many of `wanted` processes that each open device `ordinal` may run at once: one
    /// where the driver says its compute mode keeps it to one process (exclusive-process: a
    /// second could not open it), else all (where the driver cannot be asked, none of them
    /// opens it either).
    pub fn processes_at_once(ordinal: u32, wanted: usize) -> usize {
        match Device::shares_processes(ordinal) {
            Ok(false) => 1,
            _ => wanted.max(1),
        }
    }

    /// Whether this process's primary context on device `ordinal` is active: false once
    /// every [`Device`] (and everything made on it) was dropped and the driver destroyed the
    /// context, which frees its memory and ends its work on the GPU.
    pub fn context_active(ordinal: u32) -> Result<bool, CudaError> {
        let dev =
            result::device::get(ordinal as i32).ctx(|| format!("getting device {ordinal}"))?;
        let (mut flags, mut active) = (0u32, 0i32);
        // SAFETY: two out-parameters owned here; the driver is initialised (a device was
        // got above).
        unsafe { sys::cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active) }
            .result()
            .ctx(|| format!("reading device {ordinal}'s primary context"))?;
        Ok(active != 0)
    }

    /// (free, total) device memory in bytes.
    pub fn memory_info(&self) -> Result<(u64, u64), CudaError> {
        let (free, total) = self
            .ctx
            .mem_get_info()
            .ctx(|| "reading device memory".into())?;
        Ok((free as u64, total as u64))
    }
}

fn version_string(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

fn uuid_string(bytes: &[std::ffi::c_char; 16]) -> String {
    let b: Vec<u8> = bytes.iter().map(|c| *c as u8).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex::encode(&b[0..4]),
        hex::encode(&b[4..6]),
        hex::encode(&b[6..8]),
        hex::encode(&b[8..10]),
        hex::encode(&b[10..16])
    )
}

fn read_facts(ctx: &Arc<CudaContext>, ordinal: u32) -> Result<DeviceFacts, CudaError> {
    let attr = |a: A| -> Result<u32, CudaError> {
        ctx.attribute(a)
            .map(|v| v.max(0) as u32)
            .ctx(|| format!("reading device attribute {a:?}"))
    };
    let name = ctx.name().ctx(|| "reading the device name".into())?;
    let uuid = ctx.uuid().ctx(|| "reading the device UUID".into())?;
    let total = ctx
        .total_mem()
        .ctx(|| "reading device memory size".into())?;
    let mut driver = 0i32;
    // SAFETY: writes one int.
    unsafe { sys::cuDriverGetVersion(&mut driver) }
        .result()
        .ctx(|| "reading the driver version".into())?;
    let runtime_version = if probe::runtime_present() {
        let mut v = 0i32;
        // SAFETY: writes one int; the library is present.
        let r = unsafe { cudarc::runtime::sys::cudaRuntimeGetVersion(&mut v) };
        (r == cudarc::runtime::sys::cudaError_t::cudaSuccess).then(|| version_string(v))
    } else {
        None
    };
    let limits = DeviceLimits {
        max_threads_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_block_dim: Dim3::new(
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ),
        max_grid_dim: Dim3::new(
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ),
        max_shared_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        max_shared_per_block_optin: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        warp_size: attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
    };
    Ok(DeviceFacts {
        ordinal,
        name,
        uuid: uuid_string(&uuid.bytes),
        compute_capability: (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        l2_bytes: u64::from(attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?),
        memory_clock_khz: u64::from(attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?),
        sm_clock_khz: Some(u64::from(attr(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?)),
        bus_width_bits: attr(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
        total_memory_bytes: total as u64,
        driver_version: version_string(driver),
        runtime_version,
        nvrtc_version: nvrtc::version().ok(),
        limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_uuids_format_like_nvidia_smi() {
        assert_eq!(version_string(13000), "13.0");
        assert_eq!(version_string(12090), "12.9");
        let raw: [u8; 16] = [
            0xf7, 0xff, 0xc5, 0x11, 0xa1, 0x49, 0xd9, 0xfe, 0x98, 0xc1, 0x84, 0x00, 0xdd, 0xd9,
            0xae, 0x65,
        ];
        let c: [std::ffi::c_char; 16] = raw.map(|b| b as std::ffi::c_char);
        assert_eq!(uuid_string(&c), "GPU-f7ffc511-a149-d9fe-98c1-8400ddd9ae65");
    }
}
