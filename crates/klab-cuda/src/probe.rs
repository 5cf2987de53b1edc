//! Is the CUDA stack loadable? cudarc panics on first use of a missing library, so klab
//! asks these first and turns absence into [`CudaError`]s.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::CudaError;

/// Whether libcuda (the driver) can be loaded.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen candidate names and closes them again.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether libnvrtc can be loaded: by the loader's search, or else from the checkout klab
/// was built in ([`checkout_nvrtc`]).
pub fn nvrtc_present() -> bool {
    nvrtc_by_name() || checkout_nvrtc().is_some()
}

/// Whether the loader finds libnvrtc by one of cudarc's names.
fn nvrtc_by_name() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Where `./scripts/test` installs the NVRTC wheel, under a checkout's root.
pub const CHECKOUT_NVRTC: &str = ".deps/nvrtc/nvidia/cu13/lib/libnvrtc.so.13";

/// The library NVRTC loads by this name when it compiles, beside [`CHECKOUT_NVRTC`].
const CHECKOUT_NVRTC_BUILTINS: &str = "libnvrtc-builtins.so.13.0";

/// The libnvrtc of the checkout klab runs in, loaded into this process, when the loader
/// does not find one by name (`None` when it does: the machine's own is used): the folder klab runs in or one above it, or one above the
/// binary (`target/release/klab` sits two below the root), whichever first holds
/// [`CHECKOUT_NVRTC`]. Loaded once and never unloaded; cudarc's later load by name
/// (`libnvrtc.so.13`) then gets this library, since the loader matches a loaded library by
/// its soname. So a fresh clone's `klab lab` compiles its kernels once the tests installed
/// NVRTC, without `LD_LIBRARY_PATH`.
pub fn checkout_nvrtc() -> Option<&'static Path> {
    static LOADED: OnceLock<Option<PathBuf>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            if nvrtc_by_name() {
                return None;
            }
            let cwd = std::env::current_dir().ok();
            let exe = std::env::current_exe().ok();
            checkout_nvrtc_candidates(cwd.as_deref(), exe.as_deref())
                .into_iter()
                .filter(|p| p.is_file())
                .find(|p| {
                    // NVRTC opens its builtins by name when it compiles: loaded first, from
                    // beside it, they are the ones it gets.
                    let builtins = p.with_file_name(CHECKOUT_NVRTC_BUILTINS);
                    builtins.is_file() && load_for_good(&builtins) && load_for_good(p)
                })
        })
        .as_deref()
}

/// [`CHECKOUT_NVRTC`] under the folder klab runs in and each folder above it, then under
/// each folder above the binary.
fn checkout_nvrtc_candidates(cwd: Option<&Path>, exe: Option<&Path>) -> Vec<PathBuf> {
    let mut roots: Vec<&Path> = cwd.into_iter().flat_map(Path::ancestors).collect();
    roots.extend(
        exe.and_then(Path::parent)
            .into_iter()
            .flat_map(Path::ancestors),
    );
    let mut out: Vec<PathBuf> = Vec::new();
    for r in roots {
        let p = r.join(CHECKOUT_NVRTC);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// dlopen `path` for the rest of the process (the handle is never closed).
fn load_for_good(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; the library's initialisers are NVIDIA's own, run as
    // they would be by a load through LD_LIBRARY_PATH.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NODELETE) };
    !handle.is_null()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkout_is_looked_for_from_the_working_folder_up_then_from_the_binary_up() {
        let c = checkout_nvrtc_candidates(
            Some(Path::new("/w/klab/examples")),
            Some(Path::new("/w/klab/target/release/klab")),
        );
        let roots: Vec<String> = c
            .iter()
            .map(|p| {
                p.to_str()
                    .unwrap()
                    .strip_suffix(CHECKOUT_NVRTC)
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            roots,
            [
                "/w/klab/examples/",
                "/w/klab/",
                "/w/",
                "/",
                "/w/klab/target/release/",
                "/w/klab/target/"
            ]
        );
    }
}
