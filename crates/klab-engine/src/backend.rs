//! The narrow interface between klab's gates and a device: allocate, upload, poison,
//! launch, download, time. The CUDA runtime (`klab-cuda`) implements it on a GPU; the
//! [`host`] backend implements it with Rust functions so that the gates' logic is tested
//! on machines without one (and so a PTX emulator can be added later).

use std::fmt;

use klab_core::device::{DeviceLimits, KernelResources};
use klab_spec::plan::LaunchPlan;

pub mod host;

/// A failure while running or judging a kernel, as text for the user, and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendError {
    pub message: String,
    pub fault: Fault,
}

/// Whose failure a [`BackendError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// What the kernel's run or its workload met (a launch error, a fault, a bad shape):
    /// during a case, that case's failure.
    #[default]
    Run,
    /// klab's own checking went wrong (its device checker disagreed with its CPU oracle):
    /// an error, never a verdict on the kernel.
    Klab,
}

impl From<String> for BackendError {
    fn from(message: String) -> BackendError {
        BackendError {
            message,
            fault: Fault::Run,
        }
    }
}

impl BackendError {
    /// A fault in klab's own checking.
    pub fn klab_fault(message: String) -> BackendError {
        BackendError {
            message,
            fault: Fault::Klab,
        }
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BackendError {}

/// One kernel parameter.
#[derive(Debug)]
pub enum Arg<'a, B> {
    Buffer(&'a B),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    /// An f16's bits (a `__half` parameter).
    F16(u16),
    /// A bf16's bits (an `__nv_bfloat16` parameter).
    Bf16(u16),
    F32(f32),
    F64(f64),
}

/// One launch of a workload's sequence: which kernel, how, and with what (a declared
/// operation computed by several kernels in order is several; see
/// [`crate::workload::Workload::launches`]).
#[derive(Debug)]
pub struct Launch<'a, K, T> {
    pub kernel: &'a K,
    pub plan: LaunchPlan,
    pub args: Vec<Arg<'a, T>>,
}

/// What a kernel's compiled code says of its parameters ([`Backend::parameter_sizes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledParams {
    /// The size in bytes of each parameter, in order.
    pub sizes: Vec<usize>,
    /// Whether `sizes` holds all of them; false where no more were asked for (the kernel
    /// may take more).
    pub complete: bool,
}

impl CompiledParams {
    /// How many parameters a backend verifying as `policy` asks for at most, of a kernel
    /// to which the manifest passes `declared`: under a sanitizer no more than those (asking
    /// past a kernel's last fails, and the sanitizer reports that as the program's error),
    /// else until the device says there is no more.
    pub fn most_to_ask(policy: crate::verify::VerifyPolicy, declared: usize) -> usize {
        // A kernel's parameters fit in 32764 bytes: far fewer than this many.
        const MOST: usize = 32_768;
        if policy.sanitized {
            declared
        } else {
            MOST
        }
    }

    /// Ask `size_of` for parameter 0, 1, ... (`Ok(None)`: there is no such parameter;
    /// `Err`: the device cannot say) and ask for none at or past `most`.
    pub fn probe<E>(
        most: usize,
        mut size_of: impl FnMut(usize) -> Result<Option<usize>, E>,
    ) -> Option<CompiledParams> {
        let mut sizes = Vec::new();
        for index in 0..most {
            match size_of(index).ok()? {
                Some(size) => sizes.push(size),
                None => {
                    return Some(CompiledParams {
                        sizes,
                        complete: true,
                    })
                }
            }
        }
        Some(CompiledParams {
            sizes,
            complete: false,
        })
    }
}

/// What the gates need from a device.
pub trait Backend {
    /// A device allocation ('static: a workload keeps its uploaded expected values).
    type Buffer: 'static;
    type Kernel;
    /// A captured sequence of launches that can be replayed as one unit (a CUDA graph).
    type Graph;

    fn limits(&self) -> &DeviceLimits;
    /// L2 cache size in bytes (sizes rotation and scrub buffers).
    fn l2_bytes(&self) -> u64;
    /// Device memory currently free, in bytes.
    fn free_memory_bytes(&mut self) -> Result<u64, BackendError>;
    /// Look up a compiled kernel by its entry point.
    fn kernel(&mut self, entry: &str) -> Result<Self::Kernel, BackendError>;
    fn resources(&self, kernel: &Self::Kernel) -> KernelResources;
    /// The parameters the compiled kernel declares, where the device can say (CUDA's
    /// cuFuncGetParamInfo); None for a library routine or a backend that cannot. Those past
    /// the `declared` ones that the manifest passes go unasked under a sanitizer
    /// ([`crate::verify::VerifyPolicy::sanitized`]).
    fn parameter_sizes(&self, _kernel: &Self::Kernel, _declared: usize) -> Option<CompiledParams> {
        None
    }
    /// Let `kernel` launch with `dynamic_bytes` of dynamic shared memory, past the default
    /// per-block limit (a CUDA program opts in the same way, cuFuncSetAttribute's
    /// MAX_DYNAMIC_SHARED_SIZE_BYTES). Called only for a launch that needs it, after its plan
    /// was checked against the opted-in limit.
    fn allow_dynamic_shared(
        &mut self,
        kernel: &Self::Kernel,
        dynamic_bytes: u32,
    ) -> Result<(), BackendError>;
    /// A buffer of `words` 32-bit words with the exact length asked for.
    fn alloc(&mut self, words: usize) -> Result<Self::Buffer, BackendError>;
    fn upload(&mut self, dst: &mut Self::Buffer, src: &[u32]) -> Result<(), BackendError>;
    /// Set every byte of `dst` (poisoning).
    fn fill_bytes(&mut self, dst: &mut Self::Buffer, byte: u8) -> Result<(), BackendError>;
    fn download(&mut self, src: &Self::Buffer, dst: &mut [u32]) -> Result<(), BackendError>;
    /// A buffer of exactly `bytes` bytes, for data of any element size: an overrun of one
    /// element is outside it.
    fn alloc_bytes(&mut self, bytes: usize) -> Result<Self::Buffer, BackendError>;
    fn upload_bytes(&mut self, dst: &mut Self::Buffer, src: &[u8]) -> Result<(), BackendError>;
    fn download_bytes(&mut self, src: &Self::Buffer, dst: &mut [u8]) -> Result<(), BackendError>;
    /// Launch once; a launch the device refuses is an error.
    fn launch(
        &mut self,
        kernel: &Self::Kernel,
        plan: &LaunchPlan,
        args: &[Arg<'_, Self::Buffer>],
    ) -> Result<(), BackendError>;
    /// Wait for all submitted work; a fault during it is an error.
    fn synchronize(&mut self) -> Result<(), BackendError>;
    /// Record the start timing event in the kernel's stream.
    fn event_start(&mut self) -> Result<(), BackendError>;
    /// Record the stop event in the kernel's stream, wait for it, and return the
    /// milliseconds since the start event (a fault during the interval is an error).
    fn event_stop_ms(&mut self) -> Result<f64, BackendError>;
    /// Capture `launches`, in order, into a replayable graph.
    fn capture_graph(
        &mut self,
        launches: &[Launch<'_, Self::Kernel, Self::Buffer>],
    ) -> Result<Self::Graph, BackendError>;
    /// Submit one replay of a captured graph to the kernel's stream.
    fn replay(&mut self, graph: &Self::Graph) -> Result<(), BackendError>;

    /// Overwrite every byte of `dst` with pseudo-random bytes drawn from `seed` (the
    /// invalidation before a timed launch: no word a kernel could recognise). The default
    /// makes them on the host and uploads them.
    fn scramble(
        &mut self,
        dst: &mut Self::Buffer,
        bytes: usize,
        seed: u64,
    ) -> Result<(), BackendError> {
        let mut v = vec![0u8; bytes];
        crate::inputs::random_bytes(seed, &mut v);
        self.upload_bytes(dst, &v)
    }

    /// Copy `count` elements of `size` bytes from `src` to `dst`, both `elements` long, at
    /// the positions [`crate::inputs::drawn_position`] draws from `key` (a timed launch's
    /// perturbed inputs, and their restoration). The default goes through the host.
    #[allow(clippy::too_many_arguments)]
    fn copy_elements(
        &mut self,
        dst: &mut Self::Buffer,
        src: &Self::Buffer,
        elements: u64,
        size: usize,
        key: u64,
        count: u64,
    ) -> Result<(), BackendError> {
        if elements == 0 || count == 0 {
            return Ok(());
        }
        let bytes = elements as usize * size;
        let (mut to, mut from) = (vec![0u8; bytes], vec![0u8; bytes]);
        self.download_bytes(dst, &mut to)?;
        self.download_bytes(src, &mut from)?;
        for j in 0..count {
            let at = crate::inputs::drawn_position(key, j, elements) as usize * size;
            to[at..at + size].copy_from_slice(&from[at..at + size]);
        }
        self.upload_bytes(dst, &to)
    }

    /// The fastest rates this device allows, for the physical floor ([`klab_core::floor`]);
    /// `None` when the backend cannot say (no floor is applied).
    fn rates(&mut self) -> Result<Option<klab_core::floor::DeviceRates>, BackendError> {
        Ok(None)
    }

    /// How this process verifies outputs (the CPU oracle alone unless set).
    fn verify_policy(&self) -> crate::verify::VerifyPolicy {
        crate::verify::VerifyPolicy {
            checker: crate::verify::Checker::Cpu,
            ..Default::default()
        }
    }

    /// Judge one output with the device checker. `Ok(None)`: this backend has none, and
    /// the CPU oracle judges (see [`crate::verify`]).
    fn device_check(
        &mut self,
        _check: &crate::verify::DeviceCheck<'_, Self::Buffer>,
    ) -> Result<Option<crate::verify::DeviceSummary>, BackendError> {
        Ok(None)
    }

    /// Fill `dst` with a generated input on the device. `Ok(false)`: this backend cannot,
    /// and the host makes and uploads the bytes.
    fn device_generate(
        &mut self,
        _dst: &mut Self::Buffer,
        _generator: &crate::inputs::Generator,
    ) -> Result<bool, BackendError> {
        Ok(false)
    }

    /// Launch a workload's sequence once, in order (each launch the device refuses is an
    /// error).
    fn launch_all(
        &mut self,
        sequence: &[Launch<'_, Self::Kernel, Self::Buffer>],
    ) -> Result<(), BackendError> {
        for l in sequence {
            self.launch(l.kernel, &l.plan, &l.args)?;
        }
        Ok(())
    }
}
