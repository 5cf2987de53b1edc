//! The module a manifest's kernels run from: compiled by NVRTC from CUDA C++ ([`Compiled`],
//! with klab's cache), or brought precompiled ([`Precompiled`]: a cubin, PTX or fatbin the
//! driver loads as it is, no NVRTC involved). [`build`] makes one from a manifest;
//! [`crate::gpu::CudaBackend::from_module`] loads it into a device.
//!
//! A precompiled module has no ptxas log: the backend reads its kernels' resources from the
//! loaded module (`cuFuncGetAttribute`), as it does for compiled ones.

use std::collections::BTreeMap;

use klab_spec::manifest::{KernelDecl, Manifest, ModuleKind, Source};

use crate::nvrtc::{self, Cache, CompileSpec, Compiled};
use crate::CudaError;

/// A module brought compiled.
#[derive(Debug, Clone)]
pub struct Precompiled {
    /// Its file name.
    pub program: String,
    pub kind: ModuleKind,
    /// What `cuModuleLoadData` is given: the file's bytes, NUL-terminated for PTX (which
    /// the driver reads as a C string).
    pub image: Vec<u8>,
}

impl Precompiled {
    pub fn new(program: &str, kind: ModuleKind, bytes: &[u8]) -> Precompiled {
        let mut image = bytes.to_vec();
        if kind == ModuleKind::Ptx && image.last() != Some(&0) {
            image.push(0);
        }
        Precompiled {
            program: program.to_string(),
            kind,
            image,
        }
    }
}

/// A module ready for the driver, and how it came to be.
#[derive(Debug, Clone)]
pub enum Module {
    Compiled(Box<Compiled>),
    Precompiled(Precompiled),
}

/// No template instances: what a precompiled module's lowered names are.
static NO_LOWERED_NAMES: BTreeMap<String, String> = BTreeMap::new();

impl Module {
    /// The source file it came from.
    pub fn program(&self) -> &str {
        match self {
            Module::Compiled(c) => &c.program,
            Module::Precompiled(p) => &p.program,
        }
    }

    /// The bytes the driver loads.
    pub fn image(&self) -> &[u8] {
        match self {
            Module::Compiled(c) => &c.cubin,
            Module::Precompiled(p) => &p.image,
        }
    }

    /// Template instances' entries and their symbols (none in a precompiled module, whose
    /// entries are symbols already).
    pub fn lowered_names(&self) -> &BTreeMap<String, String> {
        match self {
            Module::Compiled(c) => &c.lowered_names,
            Module::Precompiled(_) => &NO_LOWERED_NAMES,
        }
    }

    /// What made the code that runs, as receipts name it.
    pub fn compiler(&self) -> String {
        match self {
            Module::Compiled(c) => format!("NVRTC {}", c.nvrtc_version),
            Module::Precompiled(p) => match p.kind {
                ModuleKind::Cubin => "precompiled cubin (loaded as it is by the CUDA driver)",
                ModuleKind::Ptx => "precompiled PTX (compiled by the CUDA driver's JIT on load)",
                ModuleKind::Fatbin => {
                    "precompiled fatbin (the CUDA driver loads the image that fits the device)"
                }
            }
            .to_string(),
        }
    }

    /// The compiler options (none for a precompiled module: klab did not compile it).
    pub fn flags(&self) -> &[String] {
        match self {
            Module::Compiled(c) => &c.options,
            Module::Precompiled(_) => &[],
        }
    }

    /// Anything worth telling the user about how it was obtained.
    pub fn notes(&self) -> &[String] {
        match self {
            Module::Compiled(c) => &c.notes,
            Module::Precompiled(_) => &[],
        }
    }

    /// For messages: `the module compiled from k.cu for sm_90`, `the precompiled cubin k.cubin`.
    pub fn describe(&self) -> String {
        match self {
            Module::Compiled(c) => c.describe(),
            Module::Precompiled(p) => format!("the precompiled {} {}", p.kind.name(), p.program),
        }
    }
}

/// The module `decl` of `manifest` runs from on an `arch` device: CUDA C++ compiled by
/// NVRTC (through `cache`), a precompiled module taken as it is.
pub fn build(
    manifest: &Manifest,
    decl: &KernelDecl,
    arch: &str,
    cache: &Cache,
) -> Result<Module, CudaError> {
    match &manifest.source {
        Source::Cuda { .. } => {
            nvrtc::compile(&CompileSpec::for_kernel(manifest, decl, arch)?, cache)
                .map(|c| Module::Compiled(Box::new(c)))
        }
        Source::Module { kind, bytes } => Ok(Module::Precompiled(Precompiled::new(
            &manifest.program,
            *kind,
            bytes,
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_is_nul_terminated_once_and_binaries_are_kept_as_they_are() {
        let p = Precompiled::new("k.ptx", ModuleKind::Ptx, b".version 8.0\n");
        assert_eq!(p.image, b".version 8.0\n\0");
        let again = Precompiled::new("k.ptx", ModuleKind::Ptx, &p.image);
        assert_eq!(
            again.image, p.image,
            "an already terminated PTX gets no second NUL"
        );
        let elf = b"\x7fELF\x02\0\x01";
        for kind in [ModuleKind::Cubin, ModuleKind::Fatbin] {
            assert_eq!(Precompiled::new("k", kind, elf).image, elf);
        }
        let m = Module::Precompiled(Precompiled::new("k.cubin", ModuleKind::Cubin, elf));
        assert!(m.flags().is_empty() && m.lowered_names().is_empty());
        assert!(m.compiler().starts_with("precompiled cubin"));
        assert_eq!(m.describe(), "the precompiled cubin k.cubin");
    }
}
