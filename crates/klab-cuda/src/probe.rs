//! Is the CUDA stack loadable? cudarc panics on first use of a missing library, so klab
//! asks these first and turns absence into [`CudaError`]s.

use crate::CudaError;

/// Whether libcuda (the driver) can be loaded.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen candidate names and closes them again.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether libnvrtc can be loaded.
pub fn nvrtc_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Whether the CUDA runtime library (libcudart) can be loaded; klab uses it only to
/// report the runtime version.
pub fn runtime_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::runtime::sys::is_culib_present() }
}

/// Whether libcublas can be loaded (the `@cublasSgeam` baseline needs it).
pub fn cublas_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

pub fn require_driver() -> Result<(), CudaError> {
    if driver_present() {
        Ok(())
    } else {
        Err(CudaError::NoDriver)
    }
}

pub fn require_nvrtc() -> Result<(), CudaError> {
    if nvrtc_present() {
        Ok(())
    } else {
        Err(CudaError::NoNvrtc)
    }
}
