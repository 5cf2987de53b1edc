use cudarc::driver::result::DriverError;

/// Everything that can go wrong in the runtime layer, each a one-line message.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver: libcuda could not be loaded (this machine has no NVIDIA driver, or it is not on the library path)")]
    NoDriver,
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    #[error("NVRTC not found: libnvrtc.so.13 could not be loaded (install the CUDA 13 toolkit or the PyPI wheel nvidia-cuda-nvrtc==13.0.* and put its lib folder on LD_LIBRARY_PATH)")]
    NoNvrtc,
    #[error("{what}: {}", describe(.error))]
    Driver { what: String, error: DriverError },
    #[error("NVRTC could not compile {program} for {arch} with {options}:\n{log}")]
    Compile {
        program: String,
        arch: String,
        options: String,
        log: String,
    },
    #[error("NVRTC: {0}")]
    Nvrtc(String),
    #[error("{program} is {what}: it has no CUDA source to compile or show")]
    NoSource { program: String, what: String },
}

/// `CUDA_ERROR_NAME (explanation)` for a driver error.
pub fn describe(e: &DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if text.is_empty() {
        name
    } else {
        format!("{name} ({text})")
    }
}

/// Attach what was being done to a driver result.
pub(crate) trait DriverContext<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, CudaError>;
}

impl<T> DriverContext<T> for Result<T, DriverError> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, CudaError> {
        self.map_err(|error| CudaError::Driver {
            what: what(),
            error,
        })
    }
}
