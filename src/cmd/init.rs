//! `klab init FILE.cu`: a declared-operation manifest skeleton (`klab_spec::init`) written
//! beside the source, to `-o OUT`, or to stdout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use klab_spec::init;

use crate::cli::InitArgs;

pub fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    let bytes = klab_core::artifact::read_regular(&args.file, klab_core::artifact::Input::SOURCE)?;
    // A stray non-UTF-8 byte (a comment in Latin-1) must not stop it.
    let src = String::from_utf8_lossy(&bytes);
    let stdout = args.out.as_deref() == Some(Path::new("-"));
    let out = match &args.out {
        Some(o) => o.clone(),
        None => args.file.with_extension("toml"),
    };
    // The manifest names its source relative to its own folder.
    let source = if stdout {
        args.file.clone()
    } else {
        let file = std::fs::canonicalize(&args.file)
            .with_context(|| format!("cannot read {}", args.file.display()))?;
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = std::fs::canonicalize(&dir)
            .with_context(|| format!("the folder of {} does not exist", out.display()))?;
        init::relative_to(&dir, &file)
    };
    let source = source
        .to_str()
        .with_context(|| format!("{} is not a UTF-8 path", source.display()))?;
    let skeleton = init::skeleton(&src, source, &args.file.display().to_string())?;
    if stdout {
        let mut o = std::io::stdout().lock();
        o.write_all(skeleton.text.as_bytes())
            .and_then(|()| o.flush())
            .context("writing the manifest to stdout")?;
        return Ok(ExitCode::SUCCESS);
    }
    if std::fs::canonicalize(&out).ok() == std::fs::canonicalize(&args.file).ok() {
        bail!("{} is the source itself; give another -o", out.display());
    }
    if out.exists() && !args.force {
        bail!(
            "{} exists; klab init keeps it (pass --force to overwrite it)",
            out.display()
        );
    }
    klab_core::artifact::write_atomic(&out, skeleton.text.as_bytes())?;
    println!(
        "wrote {}: {} kernel(s), {} \"TODO\" to fill in; then klab check {}",
        out.display(),
        skeleton.kernels,
        skeleton.placeholders,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
