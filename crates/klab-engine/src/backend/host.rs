//! A [`Backend`] that runs Rust functions in place of kernels and records every call.
//! It exists to test the gates' logic without a GPU: which steps run, in what order, and
//! what a gate decides for a given output. Its timings are synthetic (a fixed cost per
//! launch) and never reported as measurements.

use std::collections::BTreeMap;

use super::{Arg, Backend, BackendError};
use klab_core::device::{DeviceLimits, KernelResources};
use klab_spec::plan::LaunchPlan;

/// A host stand-in for a kernel with the transpose signature `(out, in, n)`.
pub type HostKernelFn = fn(out: &mut [u32], input: &[u32], n: u64, launch_index: u64);

/// A host stand-in for any kernel: all buffers, the launch's arguments, its index.
pub type GeneralKernelFn = fn(memory: &mut [Vec<u32>], args: &[HostArg], launch_index: u64);

thread_local! {
    /// The share of its work the running host kernel says it did ([`report_work`]).
    static WORK_DONE: std::cell::Cell<f64> = const { std::cell::Cell::new(1.0) };
}

/// Called by a host kernel that did only `fraction` of its work (an emulated exploit that
/// skipped it): the launch is charged that share of [`HostBackend::ms_per_launch`], as a GPU
/// would take less time. A launch that reports nothing is charged in full.
pub fn report_work(fraction: f64) {
    WORK_DONE.with(|w| w.set(fraction));
}

/// A kernel argument as the host backend sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HostArg {
    Buffer(usize),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    /// An f16's bits.
    F16(u16),
    /// A bf16's bits.
    Bf16(u16),
    F32(f32),
    F64(f64),
}

#[derive(Debug, Clone, Copy)]
enum HostImpl {
    Transpose(HostKernelFn),
    General(GeneralKernelFn),
}

/// What the backend was asked to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Alloc(usize),
    /// An allocation of this many bytes.
    AllocBytes(usize),
    Upload(usize),
    Fill {
        buffer: usize,
        byte: u8,
    },
    Launch(String),
    Synchronize,
    Download(usize),
    EventStart,
    EventStop,
    /// A graph captured from these launches' entries, in order.
    Capture(Vec<String>),
    Replay,
    /// A device-checker judgement of an output.
    Verify(usize),
    /// A device-generated input.
    Generate(usize),
    /// An invalidation's random bytes written over a buffer.
    Scramble(usize),
    /// Elements copied into a buffer at drawn positions (a perturbation, or its undoing).
    CopyElements(usize),
    /// A kernel opted in to this much dynamic shared memory per block.
    AllowDynamicShared {
        entry: String,
        bytes: u32,
    },
}

/// Host buffers are indices into the backend's memory.
#[derive(Debug)]
pub struct HostBuffer(usize);

#[derive(Debug, Clone)]
pub struct HostKernel {
    entry: String,
    f: HostImpl,
}

/// A captured launch sequence: the kernel and each launch's arguments.
#[derive(Debug, Clone)]
pub struct HostGraph {
    launches: Vec<(HostKernel, Vec<HostArg>)>,
}

/// The host backend.
pub struct HostBackend {
    limits: DeviceLimits,
    kernels: BTreeMap<String, HostImpl>,
    memory: Vec<Vec<u32>>,
    free_bytes: u64,
    l2_bytes: u64,
    launches: u64,
    /// Synthetic milliseconds charged since the start event (None: no event pending).
    elapsed_ms: Option<f64>,
    /// Every call, in order.
    pub calls: Vec<Call>,
    /// Synthetic milliseconds charged per timed launch.
    pub ms_per_launch: f64,
    policy: crate::verify::VerifyPolicy,
    /// Whether it has a device checker (computed on the host; wrong as `policy.mutant` says).
    checker: bool,
    /// The rates the physical floor is computed from (none unless set).
    rates: Option<klab_core::floor::DeviceRates>,
    /// Each kernel's parameter sizes, where a test gives them ([`Backend::parameter_sizes`]).
    parameter_sizes: BTreeMap<String, Vec<usize>>,
}

impl HostBackend {
    pub fn new() -> HostBackend {
        HostBackend {
            limits: DeviceLimits::hopper(),
            kernels: BTreeMap::new(),
            memory: Vec::new(),
            free_bytes: 1 << 31,
            l2_bytes: 1 << 20,
            launches: 0,
            elapsed_ms: None,
            calls: Vec::new(),
            ms_per_launch: 0.01,
            policy: crate::verify::VerifyPolicy {
                checker: crate::verify::Checker::Cpu,
                ..Default::default()
            },
            checker: false,
            rates: None,
            parameter_sizes: BTreeMap::new(),
        }
    }

    /// Kernel `entry` declares parameters of these sizes, as a compiled one would.
    pub fn with_parameter_sizes(mut self, entry: &str, sizes: &[usize]) -> HostBackend {
        self.parameter_sizes
            .insert(entry.to_string(), sizes.to_vec());
        self
    }

    /// Verify as a process under compute-sanitizer does ([`VerifyPolicy::sanitized`]).
    ///
    /// [`VerifyPolicy::sanitized`]: crate::verify::VerifyPolicy::sanitized
    pub fn with_sanitized(mut self) -> HostBackend {
        self.policy.sanitized = true;
        self
    }

    /// Rates for the physical floor ([`klab_core::floor`]).
    pub fn with_rates(mut self, rates: klab_core::floor::DeviceRates) -> HostBackend {
        self.rates = Some(rates);
        self
    }

    /// A device checker (correct, or the wrong one `mutant`) and device input generation,
    /// both computed on the host, with the device checker chosen as the policy.
    pub fn with_device_checker(
        mut self,
        mutant: Option<crate::verify::CheckerMutant>,
    ) -> HostBackend {
        self.checker = true;
        self.policy.checker = crate::verify::Checker::Device;
        self.policy.mutant = mutant;
        self
    }

    /// Cross-check every validation on the CPU.
    pub fn with_paranoid(mut self) -> HostBackend {
        self.policy.paranoid = true;
        self
    }

    /// The first `bytes` bytes of a buffer.
    fn bytes_of(&self, buffer: &HostBuffer, bytes: usize) -> Vec<u8> {
        let mut out: Vec<u8> = self.memory[buffer.0]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        out.truncate(bytes);
        out
    }

    pub fn with_kernel(mut self, entry: &str, f: HostKernelFn) -> HostBackend {
        self.kernels
            .insert(entry.to_string(), HostImpl::Transpose(f));
        self
    }

    pub fn with_general_kernel(mut self, entry: &str, f: GeneralKernelFn) -> HostBackend {
        self.kernels.insert(entry.to_string(), HostImpl::General(f));
        self
    }

    /// A buffer's words, for tests.
    pub fn memory(&self, buffer: &HostBuffer) -> &[u32] {
        &self.memory[buffer.0]
    }

    pub fn with_free_bytes(mut self, bytes: u64) -> HostBackend {
        self.free_bytes = bytes;
        self
    }

    pub fn with_l2_bytes(mut self, bytes: u64) -> HostBackend {
        self.l2_bytes = bytes;
        self
    }

    fn host_args(args: &[Arg<'_, HostBuffer>]) -> Vec<HostArg> {
        args.iter()
            .map(|a| match a {
                Arg::Buffer(b) => HostArg::Buffer(b.0),
                Arg::I32(v) => HostArg::I32(*v),
                Arg::U32(v) => HostArg::U32(*v),
                Arg::I64(v) => HostArg::I64(*v),
                Arg::U64(v) => HostArg::U64(*v),
                Arg::F16(v) => HostArg::F16(*v),
                Arg::Bf16(v) => HostArg::Bf16(*v),
                Arg::F32(v) => HostArg::F32(*v),
                Arg::F64(v) => HostArg::F64(*v),
            })
            .collect()
    }

    fn run(
        &mut self,
        kernel: &HostKernel,
        args: &[Arg<'_, HostBuffer>],
    ) -> Result<(), BackendError> {
        let args = Self::host_args(args);
        self.run_raw(kernel, &args)
    }

    fn run_raw(&mut self, kernel: &HostKernel, args: &[HostArg]) -> Result<(), BackendError> {
        let index = self.launches;
        self.launches += 1;
        WORK_DONE.with(|w| w.set(1.0));
        let charge = |me: &mut HostBackend| {
            let share = WORK_DONE.with(|w| w.get());
            if let Some(ms) = me.elapsed_ms.as_mut() {
                *ms += me.ms_per_launch * share;
            }
        };
        match kernel.f {
            HostImpl::Transpose(f) => {
                let (out, inp, n) = match args {
                    [HostArg::Buffer(o), HostArg::Buffer(i), HostArg::I32(n)] => (*o, *i, *n),
                    _ => {
                        return Err(BackendError::from(
                            "this host kernel takes (out, in, n)".to_string(),
                        ))
                    }
                };
                let input = self.memory[inp].clone();
                f(&mut self.memory[out], &input, n as u64, index);
            }
            HostImpl::General(f) => f(&mut self.memory, args, index),
        }
        charge(self);
        Ok(())
    }

    /// Launches since construction (each graph replay counts its launches).
    pub fn launch_count(&self) -> u64 {
        self.launches
    }
}

impl Default for HostBackend {
    fn default() -> Self {
        HostBackend::new()
    }
}

impl Backend for HostBackend {
    type Buffer = HostBuffer;
    type Kernel = HostKernel;
    type Graph = HostGraph;

    fn verify_policy(&self) -> crate::verify::VerifyPolicy {
        self.policy
    }

    fn device_check(
        &mut self,
        check: &crate::verify::DeviceCheck<'_, HostBuffer>,
    ) -> Result<Option<crate::verify::DeviceSummary>, BackendError> {
        if !self.checker {
            return Ok(None);
        }
        let mutant = self.policy.mutant;
        self.calls.push(Call::Verify(check.got.0));
        let size = check.dtype.size_bytes();
        let bytes = check.elements as usize * size;
        let got = self.bytes_of(check.got, bytes);
        let source = self.bytes_of(check.want, bytes);
        let mut want = vec![0u8; bytes];
        for i in 0..check.elements {
            let from = check.map.source_index(i) as usize;
            want[i as usize * size..(i as usize + 1) * size]
                .copy_from_slice(&source[from * size..(from + 1) * size]);
        }
        let magnitude: Option<Vec<f64>> = check.magnitude.map(|m| {
            self.bytes_of(m, check.elements as usize * 8)
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect()
        });
        crate::verify::host_summary(
            check.dtype,
            &check.comparison,
            &got,
            &want,
            magnitude.as_deref(),
            mutant,
        )
        .map(Some)
        .map_err(|e| BackendError::from(e.to_string()))
    }

    fn device_generate(
        &mut self,
        dst: &mut HostBuffer,
        generator: &crate::inputs::Generator,
    ) -> Result<bool, BackendError> {
        if !self.checker {
            return Ok(false);
        }
        self.calls.push(Call::Generate(dst.0));
        let mut bytes = vec![0u8; generator.elements as usize * generator.dtype.size_bytes()];
        generator.fill(&mut bytes);
        self.upload_bytes(dst, &bytes)?;
        self.calls.pop(); // the upload is the generation's, not a call of its own
        Ok(true)
    }

    fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    fn l2_bytes(&self) -> u64 {
        self.l2_bytes
    }

    fn free_memory_bytes(&mut self) -> Result<u64, BackendError> {
        Ok(self.free_bytes)
    }

    fn kernel(&mut self, entry: &str) -> Result<HostKernel, BackendError> {
        let f = *self
            .kernels
            .get(entry)
            .ok_or_else(|| BackendError::from(format!("no kernel named {entry}")))?;
        Ok(HostKernel {
            entry: entry.to_string(),
            f,
        })
    }

    fn allow_dynamic_shared(
        &mut self,
        kernel: &HostKernel,
        dynamic_bytes: u32,
    ) -> Result<(), BackendError> {
        self.calls.push(Call::AllowDynamicShared {
            entry: kernel.entry.clone(),
            bytes: dynamic_bytes,
        });
        Ok(())
    }

    fn parameter_sizes(
        &self,
        kernel: &HostKernel,
        declared: usize,
    ) -> Option<crate::backend::CompiledParams> {
        let sizes = self.parameter_sizes.get(&kernel.entry)?;
        let most = crate::backend::CompiledParams::most_to_ask(self.policy, declared);
        crate::backend::CompiledParams::probe(most, |i| Ok::<_, ()>(sizes.get(i).copied()))
    }

    fn resources(&self, kernel: &HostKernel) -> KernelResources {
        KernelResources {
            kernel: kernel.entry.clone(),
            registers: 0,
            static_shared_bytes: 0,
            local_bytes: 0,
            max_threads_per_block: None,
            source: "host".into(),
        }
    }

    fn alloc(&mut self, words: usize) -> Result<HostBuffer, BackendError> {
        self.calls.push(Call::Alloc(words));
        // Fresh allocations hold arbitrary bytes on a GPU; model that with a pattern.
        self.memory.push(vec![0x5a5a_5a5a; words]);
        Ok(HostBuffer(self.memory.len() - 1))
    }

    fn upload(&mut self, dst: &mut HostBuffer, src: &[u32]) -> Result<(), BackendError> {
        self.calls.push(Call::Upload(dst.0));
        self.memory[dst.0].copy_from_slice(src);
        Ok(())
    }

    fn fill_bytes(&mut self, dst: &mut HostBuffer, byte: u8) -> Result<(), BackendError> {
        self.calls.push(Call::Fill {
            buffer: dst.0,
            byte,
        });
        let word = u32::from_ne_bytes([byte; 4]);
        self.memory[dst.0].iter_mut().for_each(|w| *w = word);
        Ok(())
    }

    fn download(&mut self, src: &HostBuffer, dst: &mut [u32]) -> Result<(), BackendError> {
        self.calls.push(Call::Download(src.0));
        dst.copy_from_slice(&self.memory[src.0]);
        Ok(())
    }

    /// Held as whole words (the last one padded), little-endian, so host kernels see words.
    fn alloc_bytes(&mut self, bytes: usize) -> Result<HostBuffer, BackendError> {
        self.calls.push(Call::AllocBytes(bytes));
        self.memory.push(vec![0x5a5a_5a5a; bytes.div_ceil(4)]);
        Ok(HostBuffer(self.memory.len() - 1))
    }

    fn upload_bytes(&mut self, dst: &mut HostBuffer, src: &[u8]) -> Result<(), BackendError> {
        self.calls.push(Call::Upload(dst.0));
        let words = &mut self.memory[dst.0];
        if src.len().div_ceil(4) != words.len() {
            return Err(BackendError::from(
                "upload length differs from the buffer's".to_string(),
            ));
        }
        for (w, chunk) in words.iter_mut().zip(src.chunks(4)) {
            let mut b = w.to_le_bytes();
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u32::from_le_bytes(b);
        }
        Ok(())
    }

    fn download_bytes(&mut self, src: &HostBuffer, dst: &mut [u8]) -> Result<(), BackendError> {
        self.calls.push(Call::Download(src.0));
        let words = &self.memory[src.0];
        if dst.len().div_ceil(4) != words.len() {
            return Err(BackendError::from(
                "download length differs from the buffer's".to_string(),
            ));
        }
        for (chunk, w) in dst.chunks_mut(4).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes()[..chunk.len()]);
        }
        Ok(())
    }

    fn launch(
        &mut self,
        kernel: &HostKernel,
        _plan: &LaunchPlan,
        args: &[Arg<'_, HostBuffer>],
    ) -> Result<(), BackendError> {
        self.calls.push(Call::Launch(kernel.entry.clone()));
        self.run(kernel, args)
    }

    fn synchronize(&mut self) -> Result<(), BackendError> {
        self.calls.push(Call::Synchronize);
        Ok(())
    }

    fn event_start(&mut self) -> Result<(), BackendError> {
        self.calls.push(Call::EventStart);
        self.elapsed_ms = Some(0.0);
        Ok(())
    }

    fn event_stop_ms(&mut self) -> Result<f64, BackendError> {
        self.calls.push(Call::EventStop);
        self.elapsed_ms
            .take()
            .ok_or_else(|| BackendError::from("stop event without a start event".to_string()))
    }

    fn capture_graph(
        &mut self,
        launches: &[super::Launch<'_, HostKernel, HostBuffer>],
    ) -> Result<HostGraph, BackendError> {
        self.calls.push(Call::Capture(
            launches.iter().map(|l| l.kernel.entry.clone()).collect(),
        ));
        Ok(HostGraph {
            launches: launches
                .iter()
                .map(|l| (l.kernel.clone(), Self::host_args(&l.args)))
                .collect(),
        })
    }

    fn replay(&mut self, graph: &HostGraph) -> Result<(), BackendError> {
        self.calls.push(Call::Replay);
        for (kernel, args) in &graph.launches {
            self.run_raw(kernel, args)?;
        }
        Ok(())
    }

    fn scramble(
        &mut self,
        dst: &mut HostBuffer,
        bytes: usize,
        seed: u64,
    ) -> Result<(), BackendError> {
        self.calls.push(Call::Scramble(dst.0));
        let mut v = vec![0u8; bytes];
        crate::inputs::random_bytes(seed, &mut v);
        let words = &mut self.memory[dst.0];
        for (w, chunk) in words.iter_mut().zip(v.chunks(4)) {
            let mut b = w.to_le_bytes();
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u32::from_le_bytes(b);
        }
        Ok(())
    }

    fn rates(&mut self) -> Result<Option<klab_core::floor::DeviceRates>, BackendError> {
        Ok(self.rates.clone())
    }

    fn copy_elements(
        &mut self,
        dst: &mut HostBuffer,
        src: &HostBuffer,
        elements: u64,
        size: usize,
        key: u64,
        count: u64,
    ) -> Result<(), BackendError> {
        self.calls.push(Call::CopyElements(dst.0));
        let bytes = elements as usize * size;
        for b in [dst.0, src.0] {
            if bytes.div_ceil(4) != self.memory[b].len() {
                return Err(BackendError::from(
                    "copying elements between buffers of another length".to_string(),
                ));
            }
        }
        if elements == 0 {
            return Ok(());
        }
        let byte = |words: &[u32], i: usize| (words[i / 4] >> (8 * (i % 4))) as u8;
        for j in 0..count {
            let at = crate::inputs::drawn_position(key, j, elements) as usize * size;
            for i in at..at + size {
                let v = byte(&self.memory[src.0], i);
                let w = &mut self.memory[dst.0][i / 4];
                *w = (*w & !(0xff << (8 * (i % 4)))) | (u32::from(v) << (8 * (i % 4)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_buffers_round_trip_at_their_exact_length() {
        let mut b = HostBackend::new();
        let mut buf = b.alloc_bytes(6).unwrap();
        assert_eq!(b.calls[0], Call::AllocBytes(6));
        b.upload_bytes(&mut buf, &[1, 2, 3, 4, 5, 6]).unwrap();
        // Little-endian words, the last one padded with what the allocation held.
        assert_eq!(b.memory(&buf)[0], 0x0403_0201);
        assert_eq!(b.memory(&buf)[1] & 0xffff, 0x0605);
        let mut back = [0u8; 6];
        b.download_bytes(&buf, &mut back).unwrap();
        assert_eq!(back, [1, 2, 3, 4, 5, 6]);
        assert!(b.upload_bytes(&mut buf, &[0; 9]).is_err());
        assert!(b.download_bytes(&buf, &mut [0u8; 2]).is_err());
        let empty = b.alloc_bytes(0).unwrap();
        b.download_bytes(&empty, &mut []).unwrap();
    }
}
