//! [`CudaBackend`]: klab-engine's `Backend` on a CUDA device.
//!
//! Buffers are plain `cuMemAlloc` allocations of exactly the length asked for; copies,
//! fills and launches go to one non-blocking stream created for the run; every launch's
//! status and every synchronisation is checked. Timing uses two `CU_EVENT_DEFAULT` events
//! created once and recorded in the kernel's stream around the launches.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{result, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;
use klab_core::device::{DeviceFacts, DeviceLimits, KernelResources};
use klab_engine::backend::{Arg, Backend, BackendError, CompiledParams};
use klab_engine::verify::VerifyPolicy;
use klab_spec::manifest::LibraryRoutine;
use klab_spec::plan::LaunchPlan;

use crate::device::Device;
use crate::error::{describe, DriverContext};
use crate::module::Module;
use crate::nvrtc::Compiled;
use crate::CudaError;

/// A device allocation, freed on drop.
pub struct DeviceBuffer {
    ptr: CUdeviceptr,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.bytes > 0 && self.ctx.bind_to_thread().is_ok() {
            // SAFETY: ptr came from malloc_sync and is freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// An instantiated CUDA graph and the graph it came from, destroyed on drop.
pub struct CudaGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: both handles are live and destroyed once.
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
    }
}

/// A kernel of the loaded module with its resources, or a library routine standing in
/// for one (a manifest entry beginning with `@`).
pub struct Kernel {
    func: Option<CudaFunction>,
    library: Option<LibraryRoutine>,
    resources: KernelResources,
}

/// The parameters `func` takes, as the driver reads them from the compiled code
/// (cuFuncGetParamInfo), the first `most` at most; None where the driver cannot say.
fn parameter_sizes(func: &CudaFunction, most: usize) -> Option<CompiledParams> {
    // The call came with CUDA 12.4's driver: looking it up in an older one would abort.
    let mut version = 0;
    // SAFETY: the out-pointer is a local.
    let r = unsafe { sys::cuDriverGetVersion(&mut version) };
    if r != sys::CUresult::CUDA_SUCCESS || version < 12040 {
        return None;
    }
    CompiledParams::probe(most, |index| {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: the function belongs to a loaded module; the out-pointers are locals.
        let r =
            unsafe { sys::cuFuncGetParamInfo(func.cu_function(), index, &mut offset, &mut size) };
        match r {
            sys::CUresult::CUDA_SUCCESS => Ok(Some(size)),
            // Past the last parameter.
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => Ok(None),
            other => Err(other),
        }
    })
}

/// A cuBLAS handle bound to the backend's stream, destroyed on drop.
struct Cublas(cudarc::cublas::sys::cublasHandle_t);

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed once.
        let _ = unsafe { cudarc::cublas::result::destroy_handle(self.0) };
    }
}

/// The CUDA implementation of `Backend`.
pub struct CudaBackend {
    device: Device,
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    /// Template instances' entries and their symbols in `module`.
    lowered_names: BTreeMap<String, String>,
    start: CudaEvent,
    stop: CudaEvent,
    cublas: Option<Cublas>,
    policy: VerifyPolicy,
    /// klab's device checker, loaded on first use (Err: unavailable, said once).
    checker: Option<Result<crate::checker::CheckerModule, String>>,
    /// The checker's parameters, summary and per-block counts, allocated on its first use
    /// and reused: a check is one upload, its launches and one download.
    check_scratch: Option<DeviceBuffer>,
    /// The floor's rates, measured on first use.
    rates: Option<klab_core::floor::DeviceRates>,
    /// The dynamic shared memory each function was opted in to, by its handle: the driver
    /// keeps one limit per function, which every [`Kernel`] of that entry shares, so it
    /// only grows (a launch checked earlier keeps what it was allowed).
    dynamic_shared_allowed: std::collections::HashMap<usize, u32>,
}

fn backend_err(e: CudaError) -> BackendError {
    BackendError::from(e.to_string())
}

impl CudaBackend {
    /// Load `compiled` into `device` and prepare a stream and a timing-event pair; outputs
    /// are verified as `policy` says.
    pub fn new(
        device: Device,
        compiled: &Compiled,
        policy: VerifyPolicy,
    ) -> Result<CudaBackend, CudaError> {
        CudaBackend::load(
            device,
            &compiled.cubin,
            compiled.describe(),
            compiled.lowered_names.clone(),
            policy,
        )
    }

    /// Load `module` (compiled, or precompiled: the driver JIT-compiles PTX here) into
    /// `device` and prepare a stream and a timing-event pair; outputs are verified as
    /// `policy` says.
    pub fn from_module(
        device: Device,
        module: &Module,
        policy: VerifyPolicy,
    ) -> Result<CudaBackend, CudaError> {
        CudaBackend::load(
            device,
            module.image(),
            module.describe(),
            module.lowered_names().clone(),
            policy,
        )
    }

    /// Load `image` (described as `what` in errors) with its template instances' symbols.
    fn load(
        device: Device,
        image: &[u8],
        what: String,
        lowered_names: BTreeMap<String, String>,
        policy: VerifyPolicy,
    ) -> Result<CudaBackend, CudaError> {
        let ctx = device.ctx.clone();
        // klab manages its own allocations; no per-buffer event tracking.
        // SAFETY: called before any cudarc allocation in this context.
        unsafe { ctx.disable_event_tracking() };
        let module = ctx
            .load_module(Ptx::from_binary(image.to_vec()))
            .ctx(|| format!("loading {what}"))?;
        let stream = ctx.new_stream().ctx(|| "creating a stream".into())?;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = ctx
            .new_event(flags)
            .ctx(|| "creating a timing event".into())?;
        let stop = ctx
            .new_event(flags)
            .ctx(|| "creating a timing event".into())?;
        Ok(CudaBackend {
            device,
            stream,
            module,
            lowered_names,
            start,
            stop,
            cublas: None,
            policy,
            checker: None,
            check_scratch: None,
            rates: None,
            dynamic_shared_allowed: Default::default(),
        })
    }

    /// Verify outputs as `policy` says from now on.
    pub fn set_verify_policy(&mut self, policy: VerifyPolicy) {
        if policy.mutant != self.policy.mutant {
            self.checker = None;
        }
        self.policy = policy;
    }

    /// The device checker, compiled or loaded from the cache on first use; None when it
    /// cannot be (no NVRTC, say), which is said once on stderr: the CPU oracle then judges.
    fn checker(&mut self) -> Option<&crate::checker::CheckerModule> {
        if self.policy.checker != klab_engine::verify::Checker::Device {
            return None;
        }
        if self.checker.is_none() {
            let arch = self.device.facts().arch();
            let loaded =
                crate::checker::CheckerModule::load(&self.device.ctx, &arch, self.policy.mutant)
                    .map_err(|e| e.to_string());
            if let Err(e) = &loaded {
                eprintln!("klab: the device checker is unavailable ({e}); the CPU oracle judges every output");
            }
            self.checker = Some(loaded);
        }
        self.checker.as_ref().and_then(|c| c.as_ref().ok())
    }

    /// Load the device checker now (when the policy uses it), so that its compile or cache
    /// load is not charged to the first validation.
    pub fn prepare_checker(&mut self) {
        let _ = self.checker();
    }

    /// How the device checker was obtained, once it was: (from the cache, compile ms).
    pub fn checker_origin(&self) -> Option<(bool, f64)> {
        match &self.checker {
            Some(Ok(c)) => Some((c.from_cache, c.compile_ms)),
            _ => None,
        }
    }

    /// Launch `func` on a 1-D grid with 64-bit parameter words (pointers and integers).
    /// A launch of klab's own checker or generator: a 1-D grid, every parameter an 8-byte
    /// word (a pointer or an integer).
    fn launch_words(
        &self,
        func: &CudaFunction,
        blocks: u32,
        threads: u32,
        words: &[u64],
        what: &str,
    ) -> Result<(), BackendError> {
        self.launch_8byte_params(
            func,
            (blocks.max(1), 1, 1),
            (threads, 1, 1),
            0,
            words.to_vec(),
            || what.to_string(),
        )
    }

    /// Launch `func` with each parameter in an 8-byte slot whose first bytes hold its value
    /// (little-endian): what a kernel's pointer, integer and float parameters read.
    fn launch_8byte_params(
        &self,
        func: &CudaFunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        dynamic_shared_bytes: u32,
        mut storage: Vec<u64>,
        what: impl FnOnce() -> String,
    ) -> Result<(), BackendError> {
        let mut params: Vec<*mut c_void> = storage
            .iter_mut()
            .map(|s| (s as *mut u64).cast::<c_void>())
            .collect();
        // SAFETY: the function belongs to a loaded module whose parameters match the slots'
        // order and sizes (the caller's contract); buffers outlive the synchronisation that
        // follows every launch sequence.
        let r = unsafe {
            result::launch_kernel(
                func.cu_function(),
                grid,
                block,
                dynamic_shared_bytes,
                self.stream.cu_stream(),
                &mut params,
            )
        };
        // The message is made only for a failed launch: nothing but the enqueue may stand
        // between a timed launch's start event and its kernel.
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.check(Err(e.0), &what()),
        }
    }

    fn words_buffer(&mut self, words: &[u64]) -> Result<DeviceBuffer, BackendError> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut d = self.alloc_bytes(bytes.len())?;
        self.upload_bytes(&mut d, &bytes)?;
        Ok(d)
    }

    /// `src` into device memory at `dst`, synchronised.
    fn copy_to(&mut self, dst: CUdeviceptr, src: &[u8], what: &str) -> Result<(), BackendError> {
        // SAFETY: callers pass a pointer into a live buffer with room for `src`; the stream
        // is synchronised before `src` can go away.
        let r = unsafe { result::memcpy_htod_async(dst, src, self.stream.cu_stream()) };
        self.check(r.map_err(|e| e.0), what)?;
        self.synchronize()
    }

    /// The device checker's summary words at `src` (after its launches, in stream order).
    fn summary_words(&mut self, src: CUdeviceptr) -> Result<Vec<u64>, BackendError> {
        let mut bytes = vec![0u8; 8 * klab_engine::verify::SUMMARY_WORDS];
        // SAFETY: `src` points at the summary inside the live scratch buffer.
        let r = unsafe { result::memcpy_dtoh_async(&mut bytes, src, self.stream.cu_stream()) };
        self.check(
            r.map_err(|e| e.0),
            "copying the checker's summary to the host",
        )?;
        self.synchronize()?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }

    pub fn facts(&self) -> &DeviceFacts {
        self.device.facts()
    }

    fn check(&self, r: Result<(), sys::CUresult>, what: &str) -> Result<(), BackendError> {
        r.map_err(|code| {
            BackendError::from(format!("{what}: {}", describe(&result::DriverError(code))))
        })
    }

    /// A library routine in the kernel's stream: `args` are `out, in, n` (the manifest
    /// checks this for every `@` entry).
    fn library_launch(
        &self,
        routine: LibraryRoutine,
        args: &[Arg<'_, DeviceBuffer>],
    ) -> Result<(), BackendError> {
        let [Arg::Buffer(out), Arg::Buffer(input), Arg::I32(n)] = args else {
            return Err(BackendError::from(format!(
                "{} takes (out, in, n:i32)",
                routine.entry()
            )));
        };
        let n = *n;
        let bytes = (n.max(0) as usize).pow(2) * 4;
        if out.bytes < bytes || input.bytes < bytes {
            return Err(BackendError::from(format!(
                "{}: buffers of {} and {} bytes are smaller than {n} x {n} floats",
                routine.entry(),
                out.bytes,
                input.bytes
            )));
        }
        if n == 0 {
            return Ok(());
        }
        match routine {
            LibraryRoutine::MemcpyDtoD => {
                // SAFETY: both ranges lie inside live allocations (checked above); stream order.
                let r = unsafe {
                    result::memcpy_dtod_async(out.ptr, input.ptr, bytes, self.stream.cu_stream())
                };
                self.check(r.map_err(|e| e.0), "cuMemcpyDtoDAsync")
            }
            LibraryRoutine::CublasSgeam => {
                use cudarc::cublas::sys as cb;
                let handle = self
                    .cublas
                    .as_ref()
                    .ok_or_else(|| BackendError::from("cuBLAS was not initialised".to_string()))?;
                let (alpha, beta) = (1.0f32, 0.0f32);
                // Row-major Y = X^T is column-major Y^T = (X^T)^T: C = op(A) with A the
                // input read column-major and op = T. beta = 0 with B = C (in place,
                // transb = N, ldb = ldc) is the documented form that never reads B's values.
                // SAFETY: pointers are live device allocations of n*n floats; the handle's
                // stream is the backend's.
                let status = unsafe {
                    cb::cublasSgeam(
                        handle.0,
                        cb::cublasOperation_t::CUBLAS_OP_T,
                        cb::cublasOperation_t::CUBLAS_OP_N,
                        n,
                        n,
                        &alpha,
                        input.ptr as *const f32,
                        n,
                        &beta,
                        out.ptr as *const f32,
                        n,
                        out.ptr as *mut f32,
                        n,
                    )
                };
                if status == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                    Ok(())
                } else {
                    Err(BackendError::from(format!("cublasSgeam: {status:?}")))
                }
            }
        }
    }

    fn raw_launch(
        &self,
        kernel: &Kernel,
        plan: &LaunchPlan,
        args: &[Arg<'_, DeviceBuffer>],
    ) -> Result<(), BackendError> {
        let func = match (&kernel.func, kernel.library) {
            (_, Some(routine)) => return self.library_launch(routine, args),
            (Some(f), None) => f,
            (None, None) => {
                return Err(BackendError::from(
                    "a kernel without a function".to_string(),
                ))
            }
        };
        let words: Vec<u64> = args
            .iter()
            .map(|a| match a {
                Arg::Buffer(b) => b.ptr,
                Arg::I32(v) => u64::from(*v as u32),
                Arg::U32(v) => u64::from(*v),
                Arg::I64(v) => *v as u64,
                Arg::U64(v) => *v,
                Arg::F16(v) | Arg::Bf16(v) => u64::from(*v),
                Arg::F32(v) => u64::from(v.to_bits()),
                Arg::F64(v) => v.to_bits(),
            })
            .collect();
        self.launch_8byte_params(
            func,
            (plan.grid.x, plan.grid.y, plan.grid.z),
            (plan.block.x, plan.block.y, plan.block.z),
            plan.dynamic_shared_bytes,
            words,
            || {
                format!(
                    "launching {} with {}",
                    kernel.resources.kernel,
                    plan.describe()
                )
            },
        )
    }
}

impl Backend for CudaBackend {
    type Buffer = DeviceBuffer;
    type Kernel = Kernel;
    type Graph = CudaGraph;

    fn verify_policy(&self) -> VerifyPolicy {
        self.policy
    }

    fn device_check(
        &mut self,
        check: &klab_engine::verify::DeviceCheck<'_, DeviceBuffer>,
    ) -> Result<Option<klab_engine::verify::DeviceSummary>, BackendError> {
        use klab_engine::verify::{self, DeviceSummary, SUMMARY_WORDS, VERIFY_THREADS};
        let sms = u64::from(self.device.facts().sm_count.max(1));
        let Some(c) = self.checker() else {
            return Ok(None);
        };
        let (reduce, compact) = (c.reduce.clone(), c.compact.clone());
        let max_blocks = 8 * sms;
        let (blocks, chunk) = verify::grid(check.elements, check.map, max_blocks);
        // Scratch: [parameters | summary | per-block counts]; the parameters and a zeroed
        // summary go up in one copy (reduce writes every block's count).
        let mut head = check.words(chunk);
        let param_words = head.len();
        head.extend(std::iter::repeat_n(0, SUMMARY_WORDS));
        let scratch_bytes = 8 * (head.len() + max_blocks as usize);
        if self
            .check_scratch
            .as_ref()
            .is_none_or(|s| s.bytes < scratch_bytes)
        {
            self.check_scratch = Some(self.alloc_bytes(scratch_bytes)?);
        }
        let base = self.check_scratch.as_ref().expect("allocated above").ptr;
        let bytes: Vec<u8> = head.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.copy_to(
            base,
            &bytes,
            "copying the checker's parameters to the device",
        )?;
        let (params, summary) = (base, base + 8 * param_words as u64);
        let counts = summary + 8 * SUMMARY_WORDS as u64;
        let magnitude = check.magnitude.map(|m| m.ptr).unwrap_or(0);
        let words = [
            check.got.ptr,
            check.want.ptr,
            magnitude,
            params,
            summary,
            counts,
        ];
        let what = "running klab's device checker";
        self.launch_words(&reduce, blocks as u32, VERIFY_THREADS, &words, what)?;
        let mut out = self.summary_words(summary)?;
        if out[0] > 0 {
            self.launch_words(&compact, blocks as u32, VERIFY_THREADS, &words, what)?;
            out = self.summary_words(summary)?;
        }
        Ok(Some(DeviceSummary::from_words(&out)))
    }

    fn device_generate(
        &mut self,
        dst: &mut DeviceBuffer,
        generator: &klab_engine::inputs::Generator,
    ) -> Result<bool, BackendError> {
        let sms = self.device.facts().sm_count.max(1);
        let Some(c) = self.checker() else {
            return Ok(false);
        };
        let (generate, patch) = (c.generate.clone(), c.patch.clone());
        let bytes = generator.elements as usize * generator.dtype.size_bytes();
        if bytes != dst.bytes {
            return Err(BackendError::from(format!(
                "generating {bytes} bytes into a buffer of {}",
                dst.bytes
            )));
        }
        if bytes == 0 {
            return Ok(true);
        }
        let params = self.words_buffer(&generator.device_words())?;
        let threads = 256u32;
        let blocks = generator
            .elements
            .div_ceil(u64::from(threads))
            .min(u64::from(16 * sms)) as u32;
        let what = "generating an input on the device";
        self.launch_words(&generate, blocks, threads, &[dst.ptr, params.ptr], what)?;
        let patches = generator.patches();
        if !patches.is_empty() {
            let pairs: Vec<u64> = patches.iter().flat_map(|&(i, b)| [i, b]).collect();
            let pairs = self.words_buffer(&pairs)?;
            let size = generator.dtype.size_bytes() as u64;
            let words = [dst.ptr, pairs.ptr, patches.len() as u64, size];
            self.launch_words(&patch, 1, 64, &words, what)?;
        }
        self.synchronize()?;
        Ok(true)
    }

    fn limits(&self) -> &DeviceLimits {
        &self.device.facts().limits
    }

    fn scramble(
        &mut self,
        dst: &mut DeviceBuffer,
        bytes: usize,
        seed: u64,
    ) -> Result<(), BackendError> {
        if bytes != dst.bytes {
            return Err(BackendError::from(format!(
                "scrambling {bytes} bytes of a buffer of {}",
                dst.bytes
            )));
        }
        if bytes == 0 {
            return Ok(());
        }
        let sms = self.device.facts().sm_count.max(1);
        let Some(c) = self.checker() else {
            let mut v = vec![0u8; bytes];
            klab_engine::inputs::random_bytes(seed, &mut v);
            return self.upload_bytes(dst, &v);
        };
        let f = c.scramble.clone();
        let blocks = (bytes as u64 / 8)
            .div_ceil(256)
            .clamp(1, u64::from(16 * sms)) as u32;
        let words = [dst.ptr, bytes as u64, seed];
        self.launch_words(
            &f,
            blocks,
            256,
            &words,
            "invalidating an output before a timed launch",
        )
    }

    fn copy_elements(
        &mut self,
        dst: &mut DeviceBuffer,
        src: &DeviceBuffer,
        elements: u64,
        size: usize,
        key: u64,
        count: u64,
    ) -> Result<(), BackendError> {
        let bytes = elements.saturating_mul(size as u64);
        if bytes != dst.bytes as u64 || bytes != src.bytes as u64 {
            return Err(BackendError::from(format!(
                "copying elements of {elements} x {size} bytes between buffers of {} and {} bytes",
                dst.bytes, src.bytes
            )));
        }
        if elements == 0 || count == 0 {
            return Ok(());
        }
        let Some(c) = self.checker() else {
            // Without klab's module: one small device-to-device copy an element.
            for j in 0..count {
                let at = klab_engine::inputs::drawn_position(key, j, elements) * size as u64;
                // SAFETY: `at + size` is within both buffers (their lengths are checked
                // above), in stream order.
                let r = unsafe {
                    result::memcpy_dtod_async(
                        dst.ptr + at,
                        src.ptr + at,
                        size,
                        self.stream.cu_stream(),
                    )
                };
                self.check(
                    r.map_err(|e| e.0),
                    "perturbing an input before a timed launch",
                )?;
            }
            return Ok(());
        };
        let f = c.copy_elements.clone();
        let words = [dst.ptr, src.ptr, elements, size as u64, key, count];
        self.launch_words(
            &f,
            count.div_ceil(256).min(1024) as u32,
            256,
            &words,
            "perturbing an input before a timed launch",
        )
    }

    fn rates(&mut self) -> Result<Option<klab_core::floor::DeviceRates>, BackendError> {
        if self.rates.is_none() {
            let (l2_measured_gb_s, l2_method) = self.measure_l2_gb_s()?;
            let f = self.device.facts();
            let per_sm = klab_core::floor::peak_ops_per_sm_clock(f.compute_capability);
            let peak_ops_per_s = match (per_sm, f.sm_clock_khz) {
                (Some(ops), Some(khz)) => {
                    Some(f64::from(f.sm_count) * f64::from(ops) * khz as f64 * 1e3)
                }
                _ => None,
            };
            self.rates = Some(klab_core::floor::DeviceRates {
                hbm_gb_s: f.theoretical_peak_gb_s(),
                l2_measured_gb_s,
                l2_method,
                l2_bytes: f.l2_bytes,
                peak_ops_per_s,
                ops_method: match per_sm {
                    Some(ops) => format!(
                        "{} SMs x {ops} dense tensor operations per SM per clock (the narrowest type) x the maximum SM clock",
                        f.sm_count
                    ),
                    None => "no entry for this architecture: no arithmetic floor".into(),
                },
            });
        }
        Ok(self.rates.clone())
    }

    fn l2_bytes(&self) -> u64 {
        self.device.facts().l2_bytes
    }

    fn free_memory_bytes(&mut self) -> Result<u64, BackendError> {
        self.device
            .memory_info()
            .map(|(free, _)| free)
            .map_err(backend_err)
    }

    fn kernel(&mut self, entry: &str) -> Result<Kernel, BackendError> {
        if let Some(routine) = LibraryRoutine::from_entry(entry) {
            if routine == LibraryRoutine::CublasSgeam && self.cublas.is_none() {
                if !crate::probe::cublas_present() {
                    return Err(BackendError::from(
                        "libcublas could not be loaded (install the CUDA toolkit's cuBLAS or put it on the library path)".to_string(),
                    ));
                }
                use cudarc::cublas::result as cr;
                let handle = cr::create_handle()
                    .map_err(|e| BackendError::from(format!("cublasCreate: {e:?}")))?;
                let handle = Cublas(handle);
                // SAFETY: the handle is live; the stream is the backend's own.
                unsafe { cr::set_stream(handle.0, self.stream.cu_stream() as _) }
                    .map_err(|e| BackendError::from(format!("cublasSetStream: {e:?}")))?;
                self.cublas = Some(handle);
            }
            return Ok(Kernel {
                func: None,
                library: Some(routine),
                resources: KernelResources {
                    kernel: entry.to_string(),
                    registers: 0,
                    static_shared_bytes: 0,
                    local_bytes: 0,
                    max_threads_per_block: None,
                    source: "library routine (no kernel attributes)".into(),
                },
            });
        }
        let symbol = crate::nvrtc::symbol(&self.lowered_names, entry).map_err(backend_err)?;
        let func = self
            .module
            .load_function(symbol)
            .ctx(|| {
                if symbol == entry {
                    format!("looking up kernel {entry}")
                } else {
                    format!("looking up kernel {entry} (symbol {symbol})")
                }
            })
            .map_err(backend_err)?;
        let get = |r: Result<i32, result::DriverError>, what: &str| {
            r.map(|v| v.max(0) as u32)
                .ctx(|| format!("reading {what} of {entry}"))
                .map_err(backend_err)
        };
        let resources = KernelResources {
            kernel: entry.to_string(),
            registers: get(func.num_regs(), "registers")?,
            static_shared_bytes: get(func.shared_size_bytes(), "static shared memory")?,
            local_bytes: get(func.local_size_bytes(), "local memory")?,
            max_threads_per_block: Some(get(
                func.max_threads_per_block(),
                "max threads per block",
            )?),
            source: "driver".into(),
        };
        Ok(Kernel {
            func: Some(func),
            library: None,
            resources,
        })
    }

    fn resources(&self, kernel: &Kernel) -> KernelResources {
        kernel.resources.clone()
    }

    fn parameter_sizes(&self, kernel: &Kernel, declared: usize) -> Option<CompiledParams> {
        let most = CompiledParams::most_to_ask(self.policy, declared);
        parameter_sizes(kernel.func.as_ref()?, most)
    }

    fn allow_dynamic_shared(
        &mut self,
        kernel: &Kernel,
        dynamic_bytes: u32,
    ) -> Result<(), BackendError> {
        let Some(func) = &kernel.func else {
            return Ok(());
        };
        let handle = func.cu_function() as usize;
        if dynamic_bytes
            <= self
                .dynamic_shared_allowed
                .get(&handle)
                .copied()
                .unwrap_or(0)
        {
            return Ok(());
        }
        let value = i32::try_from(dynamic_bytes).map_err(|_| {
            BackendError::from(format!("{dynamic_bytes} bytes of dynamic shared memory"))
        })?;
        func.set_attribute(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            value,
        )
        .ctx(|| {
            format!(
                "letting {} use {dynamic_bytes} bytes of dynamic shared memory",
                kernel.resources.kernel
            )
        })
        .map_err(backend_err)?;
        self.dynamic_shared_allowed.insert(handle, dynamic_bytes);
        Ok(())
    }

    fn alloc(&mut self, words: usize) -> Result<DeviceBuffer, BackendError> {
        let bytes = words
            .checked_mul(4)
            .ok_or_else(|| BackendError::from(format!("{words} words overflow a byte count")))?;
        self.alloc_bytes(bytes)
    }

    fn alloc_bytes(&mut self, bytes: usize) -> Result<DeviceBuffer, BackendError> {
        let ctx = self.device.ctx.clone();
        if bytes == 0 {
            return Ok(DeviceBuffer { ptr: 0, bytes, ctx });
        }
        // SAFETY: plain allocation in the bound context.
        let ptr = unsafe { result::malloc_sync(bytes) }
            .ctx(|| format!("allocating {bytes} bytes of device memory"))
            .map_err(backend_err)?;
        Ok(DeviceBuffer { ptr, bytes, ctx })
    }

    fn upload(&mut self, dst: &mut DeviceBuffer, src: &[u32]) -> Result<(), BackendError> {
        if src.len() * 4 != dst.bytes {
            return Err(BackendError::from(
                "upload length differs from the buffer's".to_string(),
            ));
        }
        // SAFETY: lengths match; the stream is synchronised before `src` can go away.
        let r = unsafe { result::memcpy_htod_async(dst.ptr, src, self.stream.cu_stream()) };
        self.check(r.map_err(|e| e.0), "copying input to the device")?;
        self.synchronize()
    }

    fn fill_bytes(&mut self, dst: &mut DeviceBuffer, byte: u8) -> Result<(), BackendError> {
        if dst.bytes == 0 {
            return Ok(());
        }
        // SAFETY: fills exactly the buffer's bytes, in stream order.
        let r =
            unsafe { result::memset_d8_async(dst.ptr, byte, dst.bytes, self.stream.cu_stream()) };
        self.check(r.map_err(|e| e.0), "poisoning the output")
    }

    fn download(&mut self, src: &DeviceBuffer, dst: &mut [u32]) -> Result<(), BackendError> {
        if dst.len() * 4 != src.bytes {
            return Err(BackendError::from(
                "download length differs from the buffer's".to_string(),
            ));
        }
        // SAFETY: lengths match; synchronised before returning.
        let r = unsafe { result::memcpy_dtoh_async(dst, src.ptr, self.stream.cu_stream()) };
        self.check(r.map_err(|e| e.0), "copying output to the host")?;
        self.synchronize()
    }

    fn upload_bytes(&mut self, dst: &mut DeviceBuffer, src: &[u8]) -> Result<(), BackendError> {
        if src.len() != dst.bytes {
            return Err(BackendError::from(
                "upload length differs from the buffer's".to_string(),
            ));
        }
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: lengths match; the stream is synchronised before `src` can go away.
        let r = unsafe { result::memcpy_htod_async(dst.ptr, src, self.stream.cu_stream()) };
        self.check(r.map_err(|e| e.0), "copying input to the device")?;
        self.synchronize()
    }

    fn download_bytes(&mut self, src: &DeviceBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        if dst.len() != src.bytes {
            return Err(BackendError::from(
                "download length differs from the buffer's".to_string(),
            ));
        }
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: lengths match; synchronised before returning.
        let r = unsafe { result::memcpy_dtoh_async(dst, src.ptr, self.stream.cu_stream()) };
        self.check(r.map_err(|e| e.0), "copying output to the host")?;
        self.synchronize()
    }

    fn launch(
        &mut self,
        kernel: &Kernel,
        plan: &LaunchPlan,
        args: &[Arg<'_, DeviceBuffer>],
    ) -> Result<(), BackendError> {
        self.raw_launch(kernel, plan, args)
    }

    fn synchronize(&mut self) -> Result<(), BackendError> {
        self.stream
            .synchronize()
            .ctx(|| "waiting for the device (a kernel may have faulted)".into())
            .map_err(backend_err)
    }

    fn event_start(&mut self) -> Result<(), BackendError> {
        self.start
            .record(&self.stream)
            .ctx(|| "recording the start event".into())
            .map_err(backend_err)
    }

    fn event_stop_ms(&mut self) -> Result<f64, BackendError> {
        self.stop
            .record(&self.stream)
            .ctx(|| "recording the stop event".into())
            .map_err(backend_err)?;
        self.stop
            .synchronize()
            .ctx(|| "waiting for the timed work (a kernel may have faulted)".into())
            .map_err(backend_err)?;
        let ms = self
            .start
            .elapsed_ms(&self.stop)
            .ctx(|| "reading the event interval".into())
            .map_err(backend_err)?;
        Ok(f64::from(ms))
    }

    fn capture_graph(
        &mut self,
        launches: &[klab_engine::backend::Launch<'_, Kernel, DeviceBuffer>],
    ) -> Result<CudaGraph, BackendError> {
        let stream = self.stream.cu_stream();
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: the stream is ours and idle; capture ends below on every path.
        let r = unsafe { result::stream::begin_capture(stream, mode) };
        self.check(r.map_err(|e| e.0), "starting graph capture")?;
        let mut launched = Ok(());
        for l in launches {
            launched = self.raw_launch(l.kernel, &l.plan, &l.args);
            if launched.is_err() {
                break;
            }
        }
        // SAFETY: ends the capture begun above.
        let graph = unsafe { result::stream::end_capture(stream) };
        launched?;
        let graph = graph
            .map_err(|e| BackendError::from(format!("ending graph capture: {}", describe(&e))))?;
        // SAFETY: graph was just captured.
        let exec = unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
        let exec = match exec {
            Ok(e) => e,
            Err(e) => {
                // SAFETY: graph is valid and not used again.
                let _ = unsafe { result::graph::destroy(graph) };
                return Err(BackendError::from(format!(
                    "instantiating the graph: {}",
                    describe(&e)
                )));
            }
        };
        let g = CudaGraph { graph, exec };
        // SAFETY: exec and stream are valid.
        let r = unsafe { result::graph::upload(exec, stream) };
        self.check(r.map_err(|e| e.0), "uploading the graph")?;
        Ok(g)
    }

    fn replay(&mut self, graph: &CudaGraph) -> Result<(), BackendError> {
        // SAFETY: exec is a live instantiated graph; the stream is ours.
        let r = unsafe { result::graph::launch(graph.exec, self.stream.cu_stream()) };
        self.check(r.map_err(|e| e.0), "replaying the graph")
    }
}

impl CudaBackend {
    /// The L2 read ceiling in GB/s, with its method: klab's `klab_l2_read` over a buffer of
    /// a quarter of L2 (at most 16 MiB), 32 passes a launch, the fastest of five timed
    /// launches after 20 ms of untimed ones.
    fn measure_l2_gb_s(&mut self) -> Result<(f64, String), BackendError> {
        let sms = self.device.facts().sm_count.max(1);
        let l2 = self.device.facts().l2_bytes;
        let Some(c) = self.checker() else {
            return Ok((
                0.0,
                "not measured: klab's device kernels are unavailable".into(),
            ));
        };
        let read = c.l2_read.clone();
        let bytes = ((l2 / 4).min(16 << 20) / 16 * 16).max(16) as usize;
        let mut buf = self.alloc_bytes(bytes)?;
        self.fill_bytes(&mut buf, 0x5a)?;
        let sink = self.alloc_bytes(8)?;
        let passes = 32u64;
        let words = [buf.ptr, (bytes / 16) as u64, passes, sink.ptr];
        let (blocks, threads) = (4 * sms, 512);
        let what = "measuring the L2 read ceiling";
        // Untimed launches for 20 ms first (at most 400): a GPU idle before the process
        // started runs its first microseconds at low clocks, and a ceiling measured then
        // would put the floor too high.
        let warming = std::time::Instant::now();
        for _ in 0..400 {
            self.launch_words(&read, blocks, threads, &words, what)?;
            self.synchronize()?;
            if warming.elapsed() >= std::time::Duration::from_millis(20) {
                break;
            }
        }
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            self.event_start()?;
            self.launch_words(&read, blocks, threads, &words, what)?;
            best = best.min(self.event_stop_ms()?);
        }
        let gb_s = (bytes as u64 * passes) as f64 / (best * 1e-3) / 1e9;
        Ok((
            gb_s,
            format!(
                "klab_l2_read: {passes} passes over {bytes} bytes (L2-resident, ld.global.cg, 16-byte loads, {blocks} blocks of {threads} threads), fastest of 5 launches after 20 ms of untimed ones: {best:.4} ms"
            ),
        ))
    }

    /// (free, total) device memory in bytes.
    pub fn memory_info(&self) -> Result<(u64, u64), CudaError> {
        self.device.memory_info()
    }
}
