//! A [`Backend`] that runs Rust functions in place of kernels and records every call.
//! It exists to test the gates' logic without a GPU: which steps run, in what order, and
//! what a gate decides for a given output. Its timings are synthetic (a fixed cost per
//! launch) and never reported as measurements.

use std::collections::BTreeMap;

use super::{Arg, Backend, BackendError};
use crate::device::{DeviceLimits, KernelResources};
use crate::plan::LaunchPlan;

/// A host stand-in for a kernel with the transpose signature `(out, in, n)`.
pub type HostKernelFn = fn(out: &mut [u32], input: &[u32], n: u64, launch_index: u64);

/// What the backend was asked to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Alloc(usize),
    Upload(usize),
    Fill { buffer: usize, byte: u8 },
    Launch(String),
    Synchronize,
    Download(usize),
    Time { kernel: String, launches: u32 },
}

/// Host buffers are indices into the backend's memory.
#[derive(Debug)]
pub struct HostBuffer(usize);

#[derive(Debug, Clone)]
pub struct HostKernel {
    entry: String,
    f: HostKernelFn,
}

/// The host backend.
pub struct HostBackend {
    limits: DeviceLimits,
    kernels: BTreeMap<String, HostKernelFn>,
    memory: Vec<Vec<u32>>,
    free_bytes: u64,
    launches: u64,
    /// Every call, in order.
    pub calls: Vec<Call>,
    /// Synthetic milliseconds charged per timed launch.
    pub ms_per_launch: f64,
}

impl HostBackend {
    pub fn new() -> HostBackend {
        HostBackend {
            limits: DeviceLimits::hopper(),
            kernels: BTreeMap::new(),
            memory: Vec::new(),
            free_bytes: 1 << 34,
            launches: 0,
            calls: Vec::new(),
            ms_per_launch: 0.01,
        }
    }

    pub fn with_kernel(mut self, entry: &str, f: HostKernelFn) -> HostBackend {
        self.kernels.insert(entry.to_string(), f);
        self
    }

    pub fn with_free_bytes(mut self, bytes: u64) -> HostBackend {
        self.free_bytes = bytes;
        self
    }

    fn run(
        &mut self,
        kernel: &HostKernel,
        args: &[Arg<'_, HostBuffer>],
    ) -> Result<(), BackendError> {
        let (out, inp, n) = match args {
            [Arg::Buffer(o), Arg::Buffer(i), Arg::I32(n)] => (o.0, i.0, *n),
            _ => return Err(BackendError("host kernels take (out, in, n)".into())),
        };
        let input = self.memory[inp].clone();
        let index = self.launches;
        self.launches += 1;
        (kernel.f)(&mut self.memory[out], &input, n as u64, index);
        Ok(())
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

    fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    fn free_memory_bytes(&mut self) -> Result<u64, BackendError> {
        Ok(self.free_bytes)
    }

    fn kernel(&mut self, entry: &str) -> Result<HostKernel, BackendError> {
        let f = *self
            .kernels
            .get(entry)
            .ok_or_else(|| BackendError(format!("no kernel named {entry}")))?;
        Ok(HostKernel {
            entry: entry.to_string(),
            f,
        })
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

    fn time_launches(
        &mut self,
        kernel: &HostKernel,
        _plan: &LaunchPlan,
        args: &[Arg<'_, HostBuffer>],
        launches: u32,
    ) -> Result<f64, BackendError> {
        self.calls.push(Call::Time {
            kernel: kernel.entry.clone(),
            launches,
        });
        for _ in 0..launches {
            self.run(kernel, args)?;
        }
        Ok(self.ms_per_launch * f64::from(launches))
    }
}
