//! Shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The klab binary: `KLAB_BIN` when set (the GPU machine runs a copied bundle), else the
/// one Cargo built for this test.
pub fn klab_bin() -> PathBuf {
    std::env::var_os("KLAB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_klab")))
}

pub fn klab() -> Command {
    Command::new(klab_bin())
}

/// Run a command that must succeed; its stdout (stdout and stderr in the failure message).
pub fn stdout_of_success(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{cmd:?}\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Whether a CUDA device can be opened. Without one, a GPU test prints that it skipped
/// and passes, unless KLAB_REQUIRE_GPU=1 (scripts/gpu-run), where absence fails it.
pub fn gpu_or_skip(test: &str) -> bool {
    match klab_cuda::device::Device::open(0) {
        Ok(_) => true,
        Err(e) => {
            if std::env::var("KLAB_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("{test}: KLAB_REQUIRE_GPU=1 but no GPU: {e}");
            }
            eprintln!("SKIPPED {test}: {e}");
            false
        }
    }
}
