//! `klab receipt check|sign|verify`: one receipt on its own. `check` runs every check
//! `klab compare` makes of one side ([`compare::check`]) and notes what compare would
//! refuse the receipt for ([`compare::require_evidence`]). `sign` signs only a receipt
//! compare would take ([`compare::check_as_evidence`]); `sign` and `verify` hand the
//! receipt's bytes to ssh-keygen ([`sshsig`]), and `verify` checks the files the receipt
//! hashes once the signature is good. Exit codes: 0 success; 1 a refused receipt (a
//! signed one whose files changed since included), a missing file or tool; 2 a signature
//! that does not verify (a failed gate).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use klab_core::artifact::{
    check_output, read_prefix, read_regular, sha256_hex, write_atomic, Input,
};
use klab_evidence::compare;
use klab_tools::sshsig::{self, SigError};

use crate::cli::{
    ReceiptArgs, ReceiptCheckArgs, ReceiptCommand, ReceiptSignArgs, ReceiptVerifyArgs,
};
use crate::EXIT_GATE_FAILED;

pub fn run(args: ReceiptArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ReceiptCommand::Check(a) => check(a),
        ReceiptCommand::Sign(a) => sign(a),
        ReceiptCommand::Verify(a) => verify(a),
    }
}

/// `FILE.sig` beside the receipt unless given.
fn signature_path(receipt: &Path, given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| {
        let mut s = receipt.as_os_str().to_owned();
        s.push(".sig");
        PathBuf::from(s)
    })
}

fn check(args: ReceiptCheckArgs) -> anyhow::Result<ExitCode> {
    for path in &args.receipts {
        let c = compare::check(path)?;
        let samples: usize = c.rounds.iter().map(Vec::len).sum();
        println!(
            "ok {}: {} raw sample file(s), {samples} samples, {} block receipt(s), median {:.3} us",
            path.display(),
            c.rounds.len(),
            c.blocks.len(),
            c.receipt.result.median_us
        );
        // The receipt is true to its files; whether it can stand behind a speedup is
        // compare's to say, and said here so that "ok" never hides a refusal.
        if let Err(e) = compare::require_evidence(path, &c.receipt) {
            println!("note {e}; klab compare refuses it");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn sign(args: ReceiptSignArgs) -> anyhow::Result<ExitCode> {
    let tool = sshsig::locate(args.ssh_keygen.as_deref())?;
    let out = signature_path(&args.receipt, args.signature);
    refuse_to_replace(&out)?;
    let before = sha256_hex(&read_regular(&args.receipt, Input::RECEIPT)?);
    // Only a receipt that stands up to `compare` is worth a name on it.
    compare::check_as_evidence(&args.receipt)?;
    let signature = sshsig::sign(&tool, &args.key, &args.receipt)?;
    let after = sha256_hex(&read_regular(&args.receipt, Input::RECEIPT)?);
    if before != after {
        bail!(
            "{} changed while it was checked and signed; no signature written",
            args.receipt.display()
        );
    }
    write_atomic(&out, &signature)
        .with_context(|| format!("writing the signature of {}", args.receipt.display()))?;
    println!(
        "signed {} (sha256 {before}, namespace {}): {}",
        args.receipt.display(),
        sshsig::NAMESPACE,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// A signature is written over nothing but an earlier signature: a `--signature` that
/// names the receipt, one of its files, the key or anything else would lose that file.
fn refuse_to_replace(out: &Path) -> anyhow::Result<()> {
    check_output(out)?;
    match read_prefix(
        out,
        Input::new("existing signature", 1 << 20),
        sshsig::ARMOR.len(),
    ) {
        Ok(head) if head != sshsig::ARMOR => bail!(
            "{} exists and is not an SSH signature; klab replaces only a signature there \
             (give another --signature)",
            out.display()
        ),
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn verify(args: ReceiptVerifyArgs) -> anyhow::Result<ExitCode> {
    let tool = sshsig::locate(args.ssh_keygen.as_deref())?;
    let sig = signature_path(&args.receipt, args.signature);
    // Missing or hostile inputs are refused here (exit 1), so that exit 2 means ssh-keygen
    // read everything and did not accept the signature.
    read_regular(&sig, Input::new("receipt signature", 1 << 20))?;
    read_regular(
        &args.allowed_signers,
        Input::new("allowed-signers file", 16 << 20),
    )?;
    read_regular(&args.receipt, Input::RECEIPT)?;
    match sshsig::verify(
        &tool,
        &args.allowed_signers,
        &args.identity,
        &sig,
        &args.receipt,
    ) {
        Ok(said) => {
            // The signature covers the receipt's bytes; the files it hashes are checked
            // now, so that "verified" never vouches for evidence changed since signing.
            compare::check(&args.receipt).with_context(|| {
                format!(
                    "{}: the signature is good, but the receipt no longer checks",
                    args.receipt.display()
                )
            })?;
            println!("verified {}: {said}", args.receipt.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ SigError::Rejected { .. }) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(EXIT_GATE_FAILED))
        }
        Err(e) => Err(e.into()),
    }
}
