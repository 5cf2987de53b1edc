//! klab's own device module: the device checker and the input generator of
//! `kernels/verify.cu`, compiled by NVRTC for the device (and kept in the NVRTC cache)
//! the first time a [`crate::gpu::CudaBackend`] needs them, and loaded beside the user's
//! module in the same context. The launch order is the one the file states.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use klab_engine::verify::CheckerMutant;

use crate::error::DriverContext;
use crate::nvrtc::{self, Cache, CompileSpec};
use crate::CudaError;

/// The loaded module and its entry points.
pub struct CheckerModule {
    _module: Arc<CudaModule>,
    pub reduce: CudaFunction,
    pub compact: CudaFunction,
    pub generate: CudaFunction,
    pub patch: CudaFunction,
    pub scramble: CudaFunction,
    pub copy_elements: CudaFunction,
    pub l2_read: CudaFunction,
    /// How it was obtained (compiled, or from the cache), for the time breakdown.
    pub from_cache: bool,
    pub compile_ms: f64,
}

/// The compile spec of the checker for `arch` (a wrong checker for `mutant`).
pub fn spec(arch: &str, mutant: Option<CheckerMutant>) -> CompileSpec {
    let mut s = CompileSpec::new(
        klab_spec::builtin::VERIFY_PROGRAM,
        klab_spec::builtin::VERIFY_SOURCE,
        arch,
    );
    if let Some(m) = mutant {
        s.extra_options
            .push(format!("-DKLAB_VERIFY_MUTANT={}", m.define()));
    }
    s
}

impl CheckerModule {
    /// Compile (or fetch from the cache) and load the checker into `ctx`.
    pub fn load(
        ctx: &Arc<cudarc::driver::CudaContext>,
        arch: &str,
        mutant: Option<CheckerMutant>,
    ) -> Result<CheckerModule, CudaError> {
        crate::probe::require_nvrtc()?;
        let compiled = nvrtc::compile(&spec(arch, mutant), &Cache::from_env())?;
        let module = ctx
            .load_module(Ptx::from_binary(compiled.cubin.clone()))
            .ctx(|| "loading klab's device checker".into())?;
        let f = |name: &str| {
            module
                .load_function(name)
                .ctx(|| format!("looking up {name} in klab's device checker"))
        };
        Ok(CheckerModule {
            reduce: f("klab_verify_reduce")?,
            compact: f("klab_verify_compact")?,
            generate: f("klab_generate")?,
            patch: f("klab_patch")?,
            scramble: f("klab_scramble")?,
            copy_elements: f("klab_copy_elements")?,
            l2_read: f("klab_l2_read")?,
            from_cache: compiled.from_cache,
            compile_ms: compiled.compile_ms,
            _module: module,
        })
    }
}
